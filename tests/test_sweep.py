"""tailwise sweep: the search (pure functions, checked exactly), the knee and capacity against the
built-in server whose capacity is known, the SLO search, resuming a killed sweep, and
load_results. Points are fixed-length (--duration) so that every sweep is bounded in time."""

import json
import signal

import pytest

from conftest import run_cli
from live_run import Run
from noise import machine_noise
from tailwise.errors import InputError
from tailwise.sweep import (Outcome, capacity_of, capacity_text, conclude, host_shortfall, host_stall_share, knee_text,
                            kneedle, next_index, parse_rates, saturation)

NO, SAT = Outcome(False, False), Outcome(True, False)
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
    def row(rate, completed, saturated=True):
        return {"rate_rps": rate, "completed_rps": completed, "saturated": saturated}

    assert capacity_of([row(10e3, 10e3, False)]) == (None, False)
    # The server fell behind: its throughput, measured.
    assert capacity_of([row(40e3, 39.9e3, False), row(50e3, 44_166)]) == (44_166, False)
    # The latency diverged while the server kept up (39,643 of 40,000: within 5 %): at least that.
    assert capacity_of([row(30e3, 30e3, False), row(40e3, 39_643)]) == (39_643, True)
    assert capacity_text({"capacity_rps": 39_643, "capacity_lower_bound": True}).startswith("capacity: ≥ 39,643 req/s")
    assert capacity_text({"capacity_rps": 44_166, "capacity_lower_bound": False}) == \
        "capacity: 44,166 req/s completed at saturation"
    assert capacity_text({"capacity_rps": None}) is None


def test_host_stall_share_is_the_requests_a_stall_and_its_drain_can_delay():
    # 0.1 s stalled at ρ = 0.6 over 2 worker-seconds (busy 1.2 s): 0.1 / (0.4 × 2) = 12.5 %.
    s = {"target_stats": {"source": "builtin-server", "utilisation": 0.6, "busy_s": 1.2, "stalled_s": 0.1}}
    assert host_stall_share(s) == pytest.approx(0.125)
    s["target_stats"] |= {"utilisation": 1.02, "busy_s": 2.04, "stalled_s": 0.2}  # saturated: ρ capped at 0.95, share at 1
    assert host_stall_share(s) == 1.0
    assert host_stall_share({"target_stats": None}) is None  # another target: its stalls are not seen


def test_replies_a_host_stall_pushed_past_the_window_are_no_saturation():
    """A CI run: a 1 s point at 25k req/s of a fixed:10us server (busy 26 % of the time) in which
    the host stopped the server for 100 ms completed 23,658 req/s within the window, 5.4 % short,
    and the sweep stopped there as saturated."""
    point = {"rate": {"target_rps": 25_000.0, "achieved_rps": 25_370.0, "completed_rps": 23_658.0, "duration_s": 1.0},
             "target_stats": {"source": "builtin-server", "utilisation": 0.2626, "busy_s": 0.2626, "stalled_s": 0.1057},
             "checks": [{"name": "rate", "ok": False, "detail": "sent 25,370 req/s and completed 23,658 req/s"}],
             "counters": {"sent": 25_370}, "latency": {"window": {"percentiles": [{"p": 50.0, "value_ns": 13_439}]}}}
    assert host_stall_share(point) == pytest.approx(0.1057 / 0.7374)
    assert "not saturated" in host_shortfall(point)
    assert saturation(point, 13_311) is None
    # Without the stalls, or with a server busy all the time, or a client that did not send its
    # load, the same shortfall is a saturation.
    for change in ({"target_stats": point["target_stats"] | {"stalled_s": 0.01}},
                   {"target_stats": point["target_stats"] | {"utilisation": 0.97, "busy_s": 0.97}},
                   {"rate": point["rate"] | {"achieved_rps": 22_000.0}},
                   {"target_stats": None}):
        other = point | change
        assert host_shortfall(other) is None and saturation(other, 13_311).startswith("rate: ")
    # A shortfall the rate check lets pass needs no explaining.
    assert host_shortfall(point | {"rate": point["rate"] | {"completed_rps": 24_500.0}}) is None


def test_the_knee_is_uncertain_where_the_hosts_stalls_own_the_points_above_it():
    """A CI run: 100 ms stalls of the server at 30k and 40k req/s raised their p99 to ~100 ms, and
    Kneedle put the knee at 20k, half the server's capacity. The knee says so."""
    def row(i, rate, p99_us, share, saturated=False):
        return {"index": i, "rate_rps": rate, "saturated": saturated, "saturation_reason": "x" if saturated else None,
                "target": {"p": 99.0, "value_ns": p99_us * 1e3}, "every_ns": p99_us * 1e3, "completed_rps": rate,
                "host_stall_share": share, "meets_slo": None, "slo": None}

    rows = [row(0, 10e3, 346, 0.012), row(1, 20e3, 461, 0.012), row(2, 30e3, 94_372, 0.16),
            row(3, 40e3, 99_090, 0.315), row(4, 50e3, 161_481, 1.0, saturated=True)]
    doc = {"percentile": 99.0} | conclude(rows, [r["rate_rps"] for r in rows], None, 99.0)
    assert doc["knee"]["rate_rps"] == 20e3
    assert doc["knee"]["disturbed"] == [{"rate_rps": 30e3, "host_stall_share": 0.16},
                                        {"rate_rps": 40e3, "host_stall_share": 0.315}]
    assert "uncertain" in knee_text(doc) and "30,000 (16%), 40,000 (32%)" in knee_text(doc)
    # The same curve with quiet points above the knee: no caveat. At p50, 16 % is not enough to own it.
    for r in rows[2:4]:
        r["host_stall_share"] = 0.004
    assert conclude(rows, [r["rate_rps"] for r in rows], None, 99.0)["knee"]["disturbed"] == []
    assert knee_text({"percentile": 99.0, "knee": None}) is None


def _sweep(*args: str, timeout: float = 240) -> dict:
    r = run_cli("sweep", *args, "--json", timeout=timeout)
    assert r.returncode in (0, 1), r.stderr
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


def test_sweep_finds_the_knee_near_the_servers_capacity(tmp_path):
    """1 worker spinning fixed:20us per request serves at most ~50k req/s: the sweep saturates
    there, the rate completed within the window at saturation is that capacity, and the knee lies
    below it. The client's window (16 × 8 in flight) is wide enough that the server, not the
    client, is what runs out: with 8 × 4 a refill delayed by the host starves it now and then."""
    out = tmp_path / "sweep"
    s = _sweep("--rates", "10k:80k:8", "--service", "fixed:20us", "--duration", "2", "--conns", "16",
               "--outstanding", "8", "--out", str(out))
    assert s["schema"] == "tailwise.sweep/1" and s["mode"] == "knee" and s["complete"]
    rates = [p["rate_rps"] for p in s["points"]]
    assert rates == sorted(rates) and rates[0] == 10_000
    sat = s["saturation"]
    assert sat is not None, [(p["rate_rps"], p["verdict"]) for p in s["points"]]
    last = json.loads((out / s["points"][-1]["dir"] / "summary.json").read_text())
    capacity = 1e9 / last["target_stats"]["effective_service_ns"]  # the server's own busy time per request
    print(f"saturated at {sat['rate_rps']:,.0f} ({sat['reason']}); capacity {s['capacity_rps']:,.0f} measured, "
          f"{capacity:,.0f} from the server's busy time; knee {s['knee']}")
    if s["capacity_lower_bound"]:
        # Saturated by its latency while it completed its load (the host's stalls of the server
        # make the queue diverge below capacity): the throughput is at least that, and said so.
        assert (1 - 0.05) * sat["rate_rps"] <= s["capacity_rps"] <= 1.1 * capacity
    else:
        assert 0.85 * capacity <= s["capacity_rps"] <= 1.1 * capacity
    # Saturation comes at or just past capacity (a noisy host may bring it one step early).
    if sat["rate_rps"] < 0.7 * capacity and (why := machine_noise()) is not None:
        pytest.skip(f"saturated at {sat['rate_rps']:,.0f} req/s, below the server's capacity, on a noisy machine: {why}")
    assert 0.7 * capacity <= sat["rate_rps"] <= capacity + 10_000 + 1
    # The knee: where the curve leaves its low-load level for the blow-up at saturation — the
    # upper part of the range, below saturation — unless the sweep says the host's stalls of the
    # server own the percentile at the loads above it (their p99 is then the host's, not the load's).
    knee = s["knee"]
    assert knee is not None and knee["rate_rps"] < sat["rate_rps"]
    assert all(d["rate_rps"] > knee["rate_rps"] and d["host_stall_share"] >= 0.01 for d in knee["disturbed"])
    if knee["rate_rps"] < 0.5 * capacity and knee["disturbed"]:
        pytest.skip(f"the sweep calls its knee at {knee['rate_rps']:,.0f} req/s uncertain: the host's stalls of the "
                    f"server own the p99 above it ({knee['disturbed']})")
    assert 0.5 * capacity <= knee["rate_rps"]
    # No point past the first saturated one.
    assert rates[-1] == sat["rate_rps"]


def test_slo_search_meets_the_slo_and_a_load_above_does_not(tmp_path):
    slo = "p90<150us"
    s = _sweep("--rates", "10k:50k:9", "--service", "fixed:20us", "--duration", "2", "--slo", slo,
               "--out", str(tmp_path / "slo"))
    assert s["mode"] == "slo" and s["percentile"] == 90.0
    res = s["slo"]
    print(res["detail"])
    if res["rate_rps"] is None and (why := machine_noise()) is not None:
        pytest.skip(f"{res['detail']}, on a noisy machine: {why}")
    assert res["rate_rps"] is not None, res["detail"]
    # Bisection: at most ⌈log₂ 9⌉ + 2 points, none twice.
    idx = [p["index"] for p in s["points"]]
    assert len(idx) == len(set(idx)) <= 6
    assert res["percentile"]["status"] == "pass" and res["percentile"]["high_ns"] < 150_000
    if res["next_rate_rps"] is None:
        pytest.skip(f"every load up to {res['rate_rps']:,.0f} meets {slo}")
    # A load clearly above the answer, measured on its own, does not meet the SLO: at 45k req/s
    # and above the 20 µs server is ≥ 90 % busy and the M/D/1 queue's p90 alone is ~250 µs. (The
    # first load above the answer may still meet it: a noisy point there can be inconclusive.)
    above = min(max(res["next_rate_rps"] + 5_000, 45_000), 49_000)
    r = run_cli("run", "--rate", str(above), "--service", "fixed:20us", "--duration", "2", "--percentile", "90",
                "--threshold", slo, "--json")
    t = json.loads(r.stdout)["thresholds"][0]
    print(f"{above:,.0f} req/s: {t['detail']}")
    assert r.returncode == 3 and t["status"] != "pass"


def test_a_killed_sweep_resumes_with_the_same_points_and_no_duplicates(tmp_path):
    out = tmp_path / "resumed"
    args = ("--rates", "10k:30k:5", "--service", "fixed:10us", "--duration", "1", "--out", str(out))
    run = Run(*args, json_out=False, command="sweep")
    try:
        run.wait_line("point 2 ·", timeout_s=120)
    finally:
        run.proc.send_signal(signal.SIGKILL)
        run.finish(30)
    before = sorted(p.name for p in (out / "points").iterdir() if not p.name.startswith("."))
    assert len(before) >= 2
    again = run_cli("sweep", *args)
    assert again.returncode == 2 and "--resume" in again.stderr  # the directory holds a sweep already
    r = run_cli("sweep", "--resume", str(out), "--json", timeout=240)
    assert r.returncode in (0, 1), r.stderr
    s = json.loads(r.stdout)
    assert s["complete"] and s["stopped"] == "end-of-rates"
    assert [p["rate_rps"] for p in s["points"]] == [10_000, 15_000, 20_000, 25_000, 30_000]
    names = sorted(p.name for p in (out / "points").iterdir())
    assert len(names) == 5 and not any(n.startswith(".") for n in names)
    assert set(before) <= set(names)
    # Every point's directory is complete and its summary names its load.
    for p in s["points"]:
        point = json.loads((out / p["dir"] / "summary.json").read_text())
        assert point["rate"]["target_rps"] == p["rate_rps"] and point["sweep"]["rate_rps"] == p["rate_rps"]

    import tailwise

    res = tailwise.load_results(out)
    assert res.kind == "sweep" and list(res.points["rate_rps"]) == [p["rate_rps"] for p in s["points"]]
    assert set(res.samples["rate_rps"]) == set(res.points["rate_rps"]) and "latency_ns" in res.samples
    assert res.points["p50_ns"].notna().all()


def test_sweep_input_errors_are_one_line():
    for args, words in ((["--service", "fixed:10us"], "needs --rates"),
                        (["--rates", "10k:5k:3"], "not above the first"),
                        (["--resume", "/nonexistent/sweep"], "not a sweep directory"),
                        (["--resume", "/tmp", "--rate", "5k"], "No such option"),
                        (["--rates", "10k:20k:2", "--percentile", "99", "--slo", "p95<1ms"], "--percentile 95")):
        r = run_cli("sweep", *args)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_a_target_that_dies_mid_sweep_ends_it_with_exit_2_and_resume_measures_that_point_again(tmp_path):
    """A server killed during a sweep is an error, not a saturation: the sweep stops (exit 2) with
    the points before it kept, the failed point kept apart (failed/), and --resume, once the
    server is back, measures that point again."""
    from conftest import start_serve
    from servers import free_port

    port = free_port()
    out = tmp_path / "dies"
    srv = start_serve("--listen", f"127.0.0.1:{port}", "--service", "fixed:10us")
    run = Run(f"synthetic://127.0.0.1:{port}", "--rates", "5k:15k:3", "--duration", "3", "--out", str(out),
              json_out=False, command="sweep")
    try:
        run.wait_line("point 1 ·", timeout_s=60)
        srv.stop(signal.SIGKILL)
        r = run.finish(60)
    finally:
        srv.stop(signal.SIGKILL)
    assert r.returncode == 2, r.stderr
    assert "--resume" in r.stderr and "Traceback" not in r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert not s["complete"] and s["stopped"] == "error" and s["error"]
    kept = [p["rate_rps"] for p in s["points"]]
    assert kept and not any(p["saturated"] for p in s["points"])
    assert len(list((out / "failed").iterdir())) == 1
    srv = start_serve("--listen", f"127.0.0.1:{port}", "--service", "fixed:10us")
    try:
        r = run_cli("sweep", "--resume", str(out), "--json", timeout=120)
    finally:
        srv.stop(signal.SIGKILL)
    assert r.returncode in (0, 1), r.stderr
    s = json.loads(r.stdout)
    assert s["complete"] and [p["rate_rps"] for p in s["points"]] == [5_000, 10_000, 15_000]
