"""tailwise sweep's search in process: the pure functions (grids, next index, kneedle, capacity, host
stalls, the client's window), checked exactly, and the conclusions from what was measured, on a
deterministic fake sequence of points (measure() replaced, nothing sent; one `sweep --resume` with
nothing left to do). The sweeps against the built-in server: tests/e2e/test_sweep.py."""

import copy
import errno
import json
import os
from pathlib import Path

import pytest

from support.cli import run_cli
from support.schemas import assert_valid
from tailwise.errors import InputError
from tailwise.render.sweep import capacity_text, knee_text
from tailwise.results.documents.latency import Percentile
from tailwise.results.documents.run import Summary
from tailwise.results.documents.sweep import Point, SweepSummary
from tailwise.sweep.events import PointDone, Resuming
from tailwise.sweep.search import (Outcome, capacity_of, conclude, host_shortfall, host_stall_share, kneedle, next_index,
                                   parse_rates, point_row, rising, saturation)


NO, SAT = Outcome(False, False), Outcome(True, False)

#: A real run's summary (the built-in server, verdict ok), what every fake point here starts from.
REAL = json.loads((Path(__file__).parent / "screens" / "run-ok.json").read_text())


def merged(base: dict, over: dict) -> dict:
    """``base`` with ``over`` laid on it, object by object (a list or a value replaces)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        out[k] = merged(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def summary(**over) -> Summary:
    """A point's summary: the real run's, with ``over`` laid on it, read as the sweep reads it."""
    return Summary.model_validate(merged(REAL, over))


def row(**fields) -> Point:
    """A sweep's point row with the fields the conclusions read (the rest unset)."""
    if isinstance(fields.get("target"), dict):
        fields["target"] = Percentile.model_construct(**fields["target"])
    return Point.model_construct(**({"client_limited": None, "achieved_rps": None, "host_stall_share": None} | fields))


def sweep_doc(**fields) -> SweepSummary:
    """A sweep's summary with only the fields a line reads."""
    return SweepSummary.model_construct(**fields)


MEETS = Outcome(False, True)


def test_rates_grids():
    assert parse_rates("10k:40k:4") == [10_000, 20_000, 30_000, 40_000]
    log = parse_rates("1k:100k:3", "log")
    assert log == pytest.approx([1_000, 10_000, 100_000])
    assert parse_rates("50k,10k,20k") == [10_000, 20_000, 50_000]
    for bad in ("10k:5k:3", "10k:40k", "10k:40k:1", "10k:40k:x", "fast"):
        with pytest.raises(InputError):
            parse_rates(bad)


def test_knee_mode_goes_up_until_the_first_saturated_point():
    assert next_index(4, {}, slo=False) == 0
    assert next_index(4, {0: NO, 1: NO}, slo=False) == 2
    assert next_index(4, {0: NO, 1: SAT}, slo=False) is None
    assert next_index(2, {0: NO, 1: NO}, slo=False) is None


def test_slo_mode_bisects_the_grid():
    n = 9
    assert next_index(n, {}, slo=True) == 0
    assert next_index(n, {0: NO}, slo=True) is None  # the lowest load misses: none meets
    assert next_index(n, {0: MEETS}, slo=True) == 8
    assert next_index(n, {0: MEETS, 8: MEETS}, slo=True) is None  # every load meets
    done = {0: MEETS, 8: NO}
    seen = []
    truth = 5  # loads 0..5 meet
    while (i := next_index(n, done, slo=True)) is not None:
        seen.append(i)
        done[i] = MEETS if i <= truth else NO
    assert seen == [4, 6, 5]
    assert max(i for i, o in done.items() if o.meets) == truth


def test_kneedle_on_exact_curves():
    x = [0.1 * i for i in range(1, 10)]
    # M/M/1 mean sojourn 1/(1−ρ): the knee sits where the curve leaves the chord most.
    y = [1 / (1 - r) for r in x]
    k = kneedle(x, y)
    assert k is not None and 0.6 <= x[k] <= 0.8
    assert kneedle([1, 2], [1, 2]) is None
    assert kneedle([1, 2, 3], [5, 5, 5]) is None


def test_capacity_is_a_lower_bound_where_the_saturated_point_completed_its_load():
    def point(rate, completed, saturated=True):
        return row(rate_rps=rate, completed_rps=completed, saturated=saturated)

    assert capacity_of([point(10e3, 10e3, False)]) == (None, False)
    # The server fell behind: its throughput, measured.
    assert capacity_of([point(40e3, 39.9e3, False), point(50e3, 44_166)]) == (44_166, False)
    # The latency diverged while the server kept up (39,643 of 40,000: within 5 %): at least that.
    assert capacity_of([point(30e3, 30e3, False), point(40e3, 39_643)]) == (39_643, True)
    assert capacity_text(sweep_doc(capacity_rps=39_643, capacity_lower_bound=True)).startswith(
        "capacity: ≥ 39,643 req/s")
    assert capacity_text(sweep_doc(capacity_rps=44_166, capacity_lower_bound=False)) == \
        "capacity: 44,166 req/s completed at saturation"
    assert capacity_text(sweep_doc(capacity_rps=None)) is None


def test_host_stall_share_is_the_requests_a_stall_and_its_drain_can_delay():
    # 0.1 s stalled at ρ = 0.6 over 2 worker-seconds (busy 1.2 s): 0.1 / (0.4 × 2) = 12.5 %.
    s = summary(target_stats={"utilisation": 0.6, "busy_s": 1.2, "stalled_s": 0.1})
    assert host_stall_share(s) == pytest.approx(0.125)
    # Saturated: ρ capped at 0.95, the share at 1.
    assert host_stall_share(summary(target_stats={"utilisation": 1.02, "busy_s": 2.04, "stalled_s": 0.2})) == 1.0
    assert host_stall_share(summary(target_stats=None)) is None  # another target: its stalls are not seen


def test_replies_a_host_stall_pushed_past_the_window_are_no_saturation():
    """A CI run: a 1 s point at 25k req/s of a fixed:10us server (busy 26 % of the time) in which
    the host stopped the server for 100 ms completed 23,658 req/s within the window, 5.4 % short,
    and the sweep stopped there as saturated."""
    point = {"rate": {"target_rps": 25_000.0, "achieved_rps": 25_370.0, "completed_rps": 23_658.0, "duration_s": 1.0},
             "target_stats": {"source": "builtin-server", "utilisation": 0.2626, "busy_s": 0.2626, "stalled_s": 0.1057},
             "checks": [{"name": "rate", "ok": False, "detail": "sent 25,370 req/s and completed 23,658 req/s",
                         "remedy": None, "statistic": None}],
             "counters": {"intended": 25_370, "sent": 25_370, "timeouts": 0, "errors": 0},
             "latency": {"window": {"percentiles": [{"p": 50.0, "value_ns": 13_439}]}}}
    assert host_stall_share(summary(**point)) == pytest.approx(0.1057 / 0.7374)
    assert "not saturated" in host_shortfall(summary(**point))
    assert saturation(summary(**point), 13_311) is None
    # Without the stalls, or with a server busy all the time, or a client that did not send its
    # load, the same shortfall is a saturation.
    for change in ({"target_stats": {"stalled_s": 0.01}},
                   {"target_stats": {"utilisation": 0.97, "busy_s": 0.97}},
                   {"rate": {"achieved_rps": 22_000.0}},
                   {"target_stats": None}):
        other = summary(**merged(point, change))
        assert host_shortfall(other) is None and saturation(other, 13_311).startswith("rate: ")
    # A shortfall the rate check lets pass needs no explaining.
    assert host_shortfall(summary(**merged(point, {"rate": {"completed_rps": 24_500.0}}))) is None


def test_the_knee_is_uncertain_where_the_hosts_stalls_own_the_points_above_it():
    """A CI run: 100 ms stalls of the server at 30k and 40k req/s raised their p99 to ~100 ms, and
    Kneedle put the knee at 20k, half the server's capacity. The knee says so."""
    def point(i, rate, p99_us, share, saturated=False):
        return row(index=i, rate_rps=rate, saturated=saturated, saturation_reason="x" if saturated else None,
                   target={"p": 99.0, "value_ns": p99_us * 1e3, "low_ns": p99_us * 950, "high_ns": p99_us * 1050},
                   every_ns=p99_us * 1e3, completed_rps=rate, host_stall_share=share, meets_slo=None, slo=None)

    rows = [point(0, 10e3, 346, 0.012), point(1, 20e3, 461, 0.012), point(2, 30e3, 94_372, 0.16),
            point(3, 40e3, 99_090, 0.315), point(4, 50e3, 161_481, 1.0, saturated=True)]
    knee = conclude(rows, [r.rate_rps for r in rows], None, 99.0).knee
    assert knee.rate_rps == 20e3
    assert [d.to_json() for d in knee.disturbed] == [{"rate_rps": 30e3, "host_stall_share": 0.16},
                                                     {"rate_rps": 40e3, "host_stall_share": 0.315}]
    doc = sweep_doc(percentile=99.0, knee=knee)
    assert "uncertain" in knee_text(doc) and "30,000 (16%), 40,000 (32%)" in knee_text(doc)
    # The same curve with quiet points above the knee: no caveat. At p50, 16 % is not enough to own it.
    for r in rows[2:4]:
        r.host_stall_share = 0.004
    assert conclude(rows, [r.rate_rps for r in rows], None, 99.0).knee.disturbed == []
    assert knee_text(sweep_doc(percentile=99.0, knee=None)) is None


# --------------------------------------------------------------------------- issue 19: conclusions
# from what was measured. The search runs for real (Sweep: directories, attempts, resume) on a
# deterministic fake sequence of points: measure() is replaced, nothing is sent.

def _pct(p: float, ci_us: tuple[float, float, float] | None) -> dict:
    if ci_us is None:  # unsupported: too few samples to bound it
        return {"p": p, "value_ns": None, "low_ns": None, "high_ns": None, "n_effective": 40.0,
                "samples_needed": 500, "censored": False}
    low, value, high = (int(x * 1e3) for x in ci_us)
    return {"p": p, "value_ns": value, "low_ns": low, "high_ns": high, "n_effective": 2_000.0,
            "samples_needed": None, "censored": False}


def _fake_point(rate: float, p90_us: tuple[float, float, float] | None, *, conns: int = 8, outstanding: int = 4,
                completed: float | None = None, late: int = 0, response_us: float = 30.0,
                verdict: str | None = None) -> dict:
    """A point's summary as JSON: the real run's, with what the sweep reads of it laid on it."""
    completed = rate if completed is None else completed
    ok = completed >= 0.95 * rate
    every90 = int((p90_us[1] if p90_us else 900.0) * 1e3)
    return merged(REAL, {
        "verdict": verdict or ("ok" if ok else "not-measurable"), "error": None,
        "rate": {"target_rps": rate, "achieved_rps": rate, "completed_rps": completed, "duration_s": 1.0,
                 "paused_s": 0.0},
        "checks": [{"name": "rate", "ok": ok, "detail": f"completed {completed:,.0f} of {rate:,.0f}",
                    "remedy": None, "statistic": 0.0}],
        "counters": {"intended": int(rate), "sent": int(rate), "received": int(completed), "late": late,
                     "never_sent": 0, "timeouts": 0, "errors": 0},
        "latency": {"percentiles": [_pct(50.0, (19, 20, 21)), _pct(90.0, p90_us), _pct(99.0, None)],
                    "window": {"percentiles": [{"p": 50.0, "value_ns": 20_000}, {"p": 90.0, "value_ns": every90},
                                               {"p": 99.0, "value_ns": 2 * every90}]}},
        "target_stats": None, "methodology": {"response_mean_ns": response_us * 1e3},
        "config": {"conns": conns, "outstanding": outstanding},
    })


@pytest.fixture
def fake_sweep(monkeypatch, tmp_path):
    """Run a sweep whose points come from ``sequence`` (rate → one figure per attempt), in-process."""
    from types import SimpleNamespace

    import tailwise.measure.point
    from tailwise.measure.point import Measurement
    import tailwise.results.export
    from tailwise.results.files import write_json
    from tailwise.spec.runspec import RunSpec
    from tailwise.sweep.run import Plan, Sweep

    measured: list[tuple[float, int]] = []
    events: list = []

    def go(sequence: dict, *, rates="10k:50k:9", slo="p90<150us", out=None, resumed=False, disk_holds=None):
        """``disk_holds``: how many points' directories the disk takes before it is full."""
        def measure(spec, setup, command, quiet=False, **_):
            n = sum(1 for r, _ in measured if r == spec.rate_rps)
            measured.append((spec.rate_rps, n + 1))
            figures = sequence[spec.rate_rps]
            s = figures[min(n, len(figures) - 1)]
            doc = _fake_point(spec.rate_rps, s) if not isinstance(s, dict) else s
            return Measurement(summary=Summary.model_validate(doc),
                               result=SimpleNamespace(interrupted=False, samples_file_error=None, journal_error=None),
                               analysis=SimpleNamespace(used_mask=None))

        monkeypatch.setattr(tailwise.measure.point, "measure", measure)
        # The host's knobs (tailwise doctor) are this machine's, not the sweep's: a busy machine would warn.
        monkeypatch.setattr(tailwise.measure.point, "host_knobs", lambda *a: [])
        def write_run(d, s, *a):
            d.mkdir(parents=True)
            if disk_holds is not None and len(measured) > disk_holds:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            write_json(d / "summary.json", s.to_json())

        monkeypatch.setattr(tailwise.results.export, "write_run", write_run)
        grid = parse_rates(rates)
        rs = RunSpec.from_flags({"rate": grid[0], "percentile": 90.0 if slo else None, "duration": "1"}, None)
        plan = Plan(rates_rps=grid, rates=rates, steps="linear", slo=slo, thresholds=[], samples_format="csv")
        job = Sweep(rs, plan, out or tmp_path / "sweep", "tailwise sweep (test)", resumed=resumed,
                    on_event=events.append)
        return job, job.run().to_json()

    go.measured, go.events = measured, events
    return go


INCONCLUSIVE, MET, MISSED = (100, 140, 200), (80, 100, 120), (300, 350, 400)


def test_an_inconclusive_lowest_load_is_measured_again_and_then_met(fake_sweep, tmp_path):
    """The lowest load's CI straddles the SLO (a noisy point): it is measured again, and meets it;
    the answer is the highest load met, never "none"."""
    k = 1e3
    seq = {10 * k: [INCONCLUSIVE, MET], 50 * k: [MISSED], 30 * k: [MET], 40 * k: [MISSED], 35 * k: [MET]}
    job, doc = fake_sweep(seq)
    assert fake_sweep.measured == [(10 * k, 1), (10 * k, 2), (50 * k, 1), (30 * k, 1), (40 * k, 1), (35 * k, 1)]
    assert doc["slo"]["outcome"] == "met" and doc["slo"]["rate_rps"] == 35 * k and doc["stopped"] == "slo-found"
    assert doc["slo"]["next_rate_rps"] == 40 * k and doc["slo"]["detail"].startswith("met up to 35,000 req/s")
    low = doc["points"][0]
    assert low["meets_slo"] is True and [a["slo_status"] for a in low["attempts"]] == ["inconclusive", "pass"]
    assert (tmp_path / "sweep/points/000-10000rps/summary.json").is_file()
    assert (tmp_path / "sweep/points/000-10000rps-2/summary.json").is_file() and low["dir"].endswith("-2")
    assert_valid(doc, "sweep")


def test_a_sweep_tells_its_caller_each_point_as_an_event(fake_sweep):
    """The sweep prints nothing: each point measured is a PointDone to the caller's callback, with
    the count so far, the attempt to come when its CI was inconclusive, and an ETA while points are left."""
    k = 1e3
    seq = {10 * k: [INCONCLUSIVE, MET], 50 * k: [MISSED], 30 * k: [MET], 40 * k: [MISSED], 35 * k: [MET]}
    fake_sweep(seq)
    events = fake_sweep.events
    assert all(isinstance(e, PointDone) for e in events)
    assert [(e.row.rate_rps, e.n_done, e.again) for e in events] == [
        (10 * k, 1, 2), (10 * k, 2, None), (50 * k, 3, None), (30 * k, 4, None), (40 * k, 5, None), (35 * k, 6, None)]
    assert all(e.eta_s > 0 for e in events[:-1]) and events[-1].eta_s is None


def test_a_full_disk_stops_the_sweep_with_the_point_it_could_not_write(fake_sweep, tmp_path):
    """The second point cannot be written: the sweep stops with an error that carries its
    percentiles, the first point stays on disk for --resume, and no half-written point is left."""
    k = 1e3
    _, doc = fake_sweep({10 * k: [MET], 50 * k: [MISSED]}, disk_holds=1)
    assert [p["rate_rps"] for p in doc["points"]] == [10 * k] and doc["stopped"] == "error"
    assert doc["error"].startswith("at 50,000 req/s: the point was measured (p50 20.0 µs, p90 350.0 µs, p99 —)")
    assert "could not hold it (no space left on device): free space there" in doc["error"]
    points = tmp_path / "sweep" / "points"
    assert sorted(p.name for p in points.iterdir()) == ["000-10000rps"]
    assert_valid(doc, "sweep")


def test_an_undetermined_lowest_load_is_neither_met_nor_failed(fake_sweep):
    """Inconclusive twice (MAX_ATTEMPTS): the lowest load stays undetermined (meets_slo null), the
    search goes on above it, and a load met there is the answer."""
    k = 1e3
    seq = {10 * k: [INCONCLUSIVE], 50 * k: [MISSED], 30 * k: [MET], 40 * k: [MISSED], 35 * k: [INCONCLUSIVE]}
    _, doc = fake_sweep(seq)
    low = doc["points"][0]
    assert low["meets_slo"] is None and low["slo_outcome"] == "undetermined" and len(low["attempts"]) == 2
    res = doc["slo"]
    assert res["outcome"] == "met" and res["rate_rps"] == 30 * k and res["next_rate_rps"] == 40 * k
    assert res["undetermined_rps"] == [35 * k] and "35,000 req/s undetermined after 2 attempts" in res["detail"]
    assert_valid(doc, "sweep")


def test_the_slo_is_undetermined_not_unmet_when_nothing_below_a_miss_is_conclusive(fake_sweep):
    k = 1e3
    _, doc = fake_sweep({10 * k: [INCONCLUSIVE, None], 50 * k: [MISSED], 30 * k: [MISSED], 20 * k: [MISSED],
                         15 * k: [MISSED]})
    res = doc["slo"]
    assert res["outcome"] == "undetermined" and res["rate_rps"] is None and doc["stopped"] == "slo-undetermined"
    assert "undetermined" in res["detail"] and "no load" not in res["detail"].split(":")[0]
    assert "10,000 req/s undetermined after 2 attempts" in res["detail"]
    assert doc["points"][0]["meets_slo"] is None
    assert_valid(doc, "sweep")


def test_not_met_at_any_load_only_when_the_lowest_loads_whole_ci_misses(fake_sweep):
    k = 1e3
    _, doc = fake_sweep({10 * k: [MISSED]})
    assert doc["slo"]["outcome"] == "not-met" and doc["stopped"] == "slo-not-met"
    assert doc["slo"]["detail"].startswith("not met at any load measured") and len(doc["points"]) == 1
    assert doc["points"][0]["meets_slo"] is False


def test_search_order_with_undetermined_points():
    U = Outcome(False, None)
    assert next_index(9, {0: U}, slo=True) == 8  # an undetermined lowest does not end the search
    assert next_index(9, {0: Outcome(False, None, True)}, slo=True) == 0  # attempts left: again
    assert next_index(9, {0: MEETS, 8: NO, 4: U}, slo=True) == 2  # below the undetermined point …
    assert next_index(9, {0: MEETS, 8: NO, 4: U, 2: MEETS, 3: MEETS}, slo=True) == 6  # … then above it
    assert next_index(9, {0: MEETS, 8: NO, 4: U, 2: MEETS, 3: MEETS, 6: NO, 5: NO}, slo=True) is None
    # Lowest and highest undetermined: the loads between them may still be conclusive.
    assert next_index(9, {0: U, 8: U}, slo=True) == 4
    assert next_index(9, {0: U, 8: U, 4: U, 2: U, 6: U, 1: U, 3: U, 5: U}, slo=True) == 7
    assert next_index(9, {i: U for i in range(9)}, slo=True) is None


def test_resume_keeps_the_first_command_adds_a_history_and_has_nothing_to_do_when_complete(fake_sweep, tmp_path):
    k = 1e3
    seq = {10 * k: [MET], 50 * k: [MISSED], 30 * k: [MET], 40 * k: [MISSED], 35 * k: [MET]}
    _, first = fake_sweep(seq)
    job, doc = fake_sweep(seq, resumed=True)
    assert fake_sweep.events[-1] == Resuming(tmp_path / "sweep", 5)
    assert job.nothing_to_do and len(fake_sweep.measured) == 5 and doc == first | {
        "started_at": doc["started_at"], "config": doc["config"]}
    saved = json.loads((tmp_path / "sweep/config.json").read_text())
    assert saved["command"] == "tailwise sweep (test)" and len(saved["history"]) == 2
    assert doc["config"]["history"] == saved["history"]
    assert_valid(doc, "sweep")
    # The command line: "nothing to do", the result printed, the exit status the sweep's verdict.
    r = run_cli("sweep", "--resume", str(tmp_path / "sweep"))
    assert r.returncode == 0 and "nothing to do" in r.stderr and "met up to 35,000 req/s" in r.stdout, r.stderr
    assert len(json.loads((tmp_path / "sweep/config.json").read_text())["history"]) == 3


def test_one_point_the_host_raised_is_not_the_knee():
    """A CI run: a host stall owned p99 at 20k req/s (172 µs in [71 µs, 1.4 ms]) while 30k and
    40k measured 80 and 100 µs, and Kneedle put the knee at 20k, 40 % of capacity. The curve it
    reads is the closest rising one, each point weighed by its interval: the knee is 40k."""
    def point(i, rate, us, low, high, saturated=False):
        return row(index=i, rate_rps=rate, saturated=saturated, saturation_reason="x" if saturated else None,
                   completed_rps=rate, host_stall_share=0.002, meets_slo=None, slo=None, every_ns=us * 1e3,
                   target={"p": 99.0, "value_ns": us * 1e3, "low_ns": low * 1e3, "high_ns": high * 1e3})

    rows = [point(0, 10e3, 60, 55, 65), point(1, 20e3, 172, 71, 1404), point(2, 30e3, 80, 75, 90),
            point(3, 40e3, 100, 90, 120), point(4, 50e3, 5000, 5000, 5000, saturated=True)]
    knee = conclude(rows, [r.rate_rps for r in rows], None, 99.0).knee
    assert knee.rate_rps == 40e3 and 20e3 not in knee.candidates_rps, knee
    # The point keeps its measured percentile; only the curve Kneedle reads is fitted.
    assert knee.percentile.value_ns == 100e3
    assert rising([3.0, 1.0, 2.0], [1.0, 1.0, 1.0]) == pytest.approx([2.0, 2.0, 2.0])
    assert rising([5.0, 1.0], [100.0, 1.0]) == pytest.approx([1.0004, 1.0004], rel=1e-3)


def test_the_knee_is_never_at_a_point_without_an_interval_and_states_its_range():
    """Kneedle would pick 30k (far from the chord), but its p99 has no interval: the knee comes
    from the supported points only, and says between which measured loads it lies."""
    def point(i, rate, p99_us, ci=True, saturated=False):
        return row(index=i, rate_rps=rate, saturated=saturated, saturation_reason="x" if saturated else None,
                   completed_rps=rate, meets_slo=None, slo=None, every_ns=p99_us * 1e3,
                   target={"p": 99.0, "value_ns": p99_us * 1e3 if ci else None,
                           "low_ns": p99_us * 900 if ci else None, "high_ns": p99_us * 1100 if ci else None})

    rows = [point(0, 10e3, 50), point(1, 20e3, 55), point(2, 30e3, 60, ci=False), point(3, 40e3, 70),
            point(4, 50e3, 400), point(5, 60e3, 5000, saturated=True)]
    knee = conclude(rows, [r.rate_rps for r in rows], None, 99.0).knee
    assert knee.rate_rps != 30e3 and knee.percentile.low_ns is not None
    assert knee.low_rps <= knee.rate_rps <= knee.high_rps and knee.rate_rps in knee.candidates_rps
    assert 30e3 not in knee.candidates_rps
    text = knee_text(sweep_doc(percentile=99.0, knee=knee))
    assert f"between {knee.low_rps:,.0f} and {knee.high_rps:,.0f} req/s" in text
    # Without any supported point before saturation there is no knee.
    bare = [point(0, 10e3, 50, ci=False), point(1, 20e3, 5000, saturated=True)]
    assert conclude(bare, [10e3, 20e3], None, 99.0).knee is None


def test_the_window_is_sized_for_the_top_load_or_refused():
    from tailwise.sweep.search import size_window, window_needed

    need = window_needed(100_000)  # 100k × 500 µs × 2
    assert need == 100
    conns, outstanding, note = size_window(100_000, None, None, threads=1)
    assert conns * outstanding >= need and outstanding == 4 and "Little's law" in note
    assert size_window(20_000, None, None, threads=1) == (8, 4, None)  # the default holds it
    assert size_window(100_000, 10, None, threads=1)[:2] == (10, 10)
    assert size_window(100_000, None, 2, threads=1)[:2] == (50, 2)
    assert size_window(100_000, 64, 2, threads=1) == (64, 2, None)
    with pytest.raises(InputError) as e:
        size_window(100_000, 8, 4, threads=1)
    assert "32 slots cannot hold the top load" in e.value.line() and "--conns 25" in e.value.line()


def test_a_short_poisson_point_that_drew_fewer_requests_is_not_saturated():
    """Seen in an e2e test: a 1 s point at 1k req/s drew 949 requests (Poisson: 1,000 ± 32), sent
    and completed them all, and the sweep called it saturated ("achieved 949 req/s of 1,000"),
    ending at an idle server. The shortfall is judged against what the schedule made due, and
    replies against requests sent."""
    drew = _fake_point(1_000, (50, 60, 70))
    drew["rate"] |= {"achieved_rps": 949.0, "completed_rps": 949.0}
    drew["counters"] |= {"intended": 949, "sent": 949, "received": 949}
    drew["checks"][0]["ok"] = True  # within the rate check's ±9.5 % for 1,000 expected
    assert saturation(summary(**drew), 50_000) is None
    behind = merged(drew, {"counters": {"intended": 1_000, "sent": 900}})
    assert saturation(summary(**behind), 50_000) == "achieved 949 req/s of 1,000 (sent 900 of 1,000 due)"
    lost = merged(drew, {"rate": {"completed_rps": 880.0}})
    assert saturation(summary(**lost), 50_000) == "completed 880 req/s of the 949 sent"


def test_a_point_saturated_on_the_clients_window_is_not_the_servers_capacity():
    from tailwise.render.sweep import saturation_text
    from tailwise.sweep.search import client_limited

    # 2 slots, 30 µs per response at the lowest load: completing 40k needs 1.2 in flight, more than
    # half the window, and most requests waited for a slot.
    small = _fake_point(40_000, (100, 120, 140), conns=1, outstanding=2, completed=15_000, late=30_000)
    why = client_limited(summary(**small), 30_000)
    assert why and "1 conns × 2 outstanding = 2 slots" in why and "--conns" in why and "host" not in why
    # Against a built-in server the host stalled, the message says the response time is partly the host's.
    stalled = summary(**merged(small, {"target_stats": REAL["target_stats"] | {
        "utilisation": 0.3, "busy_s": 0.3, "stalled_s": 0.2}}))
    assert "the host's stalls of the built-in server can have delayed 29% of the requests" in client_limited(stalled, 30_000)
    reason = saturation(summary(**small), 20_000, why)
    rows = [point_row(0, 40_000, "000-40000rps", summary(**small), 90.0, reason, None, [], why)]
    assert rows[0].saturated and rows[0].client_limited == why
    found = conclude(rows, [40_000], None, 90.0)
    doc = sweep_doc(percentile=90.0, capacity_rps=found.capacity_rps, saturation=found.saturation)
    assert doc.capacity_rps is None and capacity_text(doc) is None
    assert "no capacity from it: the client's window was the limit, not the server" in saturation_text(doc)
    # A wide window that a saturated server filled: the server's capacity, and no "closed loop".
    big = _fake_point(60_000, (900, 1000, 1100), conns=30, outstanding=4, completed=50_000, late=50_000)
    big["checks"][0]["detail"] = ("closed loop: too few connections: …; sent 60,000 req/s and completed 50,000 req/s "
                                  "of 60,000 (+0.0% / -16.7%; tolerance ±5.0%)")
    assert client_limited(summary(**big), 30_000) is None
    reason = saturation(summary(**big), 20_000, None)
    assert reason == "rate: sent 60,000 req/s and completed 50,000 req/s of 60,000 (+0.0% / -16.7%; tolerance ±5.0%)"
    rows = [point_row(0, 60_000, "000-60000rps", summary(**big), 90.0, reason, None, [], None)]
    assert conclude(rows, [60_000], None, 90.0).capacity_rps == 50_000


def test_a_saturation_within_the_rate_tolerance_says_which_rule_fired():
    """Issue 34: the README's sweep called its 50k point saturated while quoting rates inside their
    tolerance ("completed 48,183 req/s of 50,000 (+0.2% / −3.6%; tolerance ±5.0%)"). Within the
    tolerance the rule that fired is Little's law's: the reason names it, with its figures."""
    queued = _fake_point(50_000, (900, 1000, 1100), conns=8, outstanding=4, completed=48_183, response_us=800.0)
    queued["checks"][0]["ok"] = False
    why = saturation(summary(**queued), 20_000, None)
    assert why.startswith("rate: responses slowed to 800.0 µs on average, so carrying 50,000 req/s needs 40.0 in "
                          "flight (Little's law), more than 8 conns × 4 outstanding allow: the server's queue"), why
    assert why.endswith("(+0.0% / -3.6%; tolerance ±5.0%)"), why


def test_the_sweep_summary_declares_every_field_it_writes(fake_sweep):
    """The sweep's summary is written through its model (results/documents/sweep.py): every key it
    holds is one the model, and so docs/schema/sweep.schema.json, declares."""
    from tailwise.results.documents.base import STRICT
    from tailwise.results.documents.sweep import SweepSummary

    k = 1e3
    _, doc = fake_sweep({10 * k: [INCONCLUSIVE, MET], 50 * k: [MISSED], 30 * k: [MET], 40 * k: [MISSED],
                         35 * k: [MET]})
    assert SweepSummary.model_validate(doc, context=STRICT).to_json() == doc


def test_imprecise_points_are_measured_points_with_their_intervals(fake_sweep):
    """Issue 32: a point whose interval is wider than --ci (verdict imprecise) is an answer: the
    SLO judges its interval as any other, and the search finds its load."""
    k = 1e3
    seq = {r: [_fake_point(r, ci, verdict="imprecise")] for r, ci in
           ((10 * k, MET), (50 * k, MISSED), (30 * k, MET), (40 * k, MISSED), (35 * k, MET))}
    job, doc = fake_sweep(seq)
    assert {p["verdict"] for p in doc["points"]} == {"imprecise"}
    assert doc["slo"]["outcome"] == "met" and doc["slo"]["rate_rps"] == 35 * k
    assert_valid(doc, "sweep")
