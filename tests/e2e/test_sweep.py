"""tailwise sweep end to end: the knee and capacity against the built-in server whose capacity is
known, the SLO search, resuming a killed sweep, input errors and the client's window. Points are
fixed-length (--duration) so that every sweep is bounded in time. The search's pure functions and
its conclusions on fake points: tests/unit/test_sweep_search.py."""

import json
import signal

import pytest

from support.cli import MEASURED, run_cli
from support.live_run import Run
from support.noise import machine_noise
from support.schemas import assert_valid


def _sweep(*args: str, timeout: float = 240) -> dict:
    r = run_cli("sweep", *args, "--json", timeout=timeout)
    assert r.returncode in MEASURED, r.stderr
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
    if sat["client_limited"]:
        # The client's window, not the server, was the limit: never reported as the server's capacity.
        assert s["capacity_rps"] is None and sat["reason"] == sat["client_limited"]
        if (why := machine_noise()) is not None:
            pytest.skip(f"saturated on the client's window at {sat['rate_rps']:,.0f} req/s ({sat['client_limited']}), "
                        f"on a noisy machine: {why}")
        pytest.fail(f"128 slots should hold 80k req/s on a quiet machine: {sat['client_limited']}")
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
    # Loads whose p99 has no interval (too few effective samples in 2 s for the tail's clustering on
    # a noisy host) cannot hold the knee: its range then reaches across them to the next load measured.
    unsupported = [p["rate_rps"] for p in s["points"] if knee["rate_rps"] < p["rate_rps"] < sat["rate_rps"]
                   and (p.get("target") or {}).get("low_ns") is None]
    if knee["rate_rps"] < 0.5 * capacity and unsupported:
        assert knee["high_rps"] >= min(unsupported) and knee["high_rps"] >= 0.5 * capacity, knee
        pytest.skip(f"p99 at {unsupported} req/s has no interval on this host: the knee lies between "
                    f"{knee['low_rps']:,.0f} and {knee['high_rps']:,.0f} req/s, as it says")
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
    assert r.returncode in MEASURED, r.stderr
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
                        (["--rates", "10k:20k:2", "--slo", "p100<1ms"], "outside (0, 100)")):
        r = run_cli("sweep", *args)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_a_target_that_dies_mid_sweep_ends_it_with_exit_2_and_resume_measures_that_point_again(tmp_path):
    """A server killed during a sweep is an error, not a saturation: the sweep stops (exit 2) with
    the points before it kept, the failed point kept apart (failed/), and --resume, once the
    server is back, measures that point again."""
    from support.cli import start_serve
    from support.servers import free_port

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
    assert r.returncode in MEASURED, r.stderr
    s = json.loads(r.stdout)
    assert s["complete"] and [p["rate_rps"] for p in s["points"]] == [5_000, 10_000, 15_000]


def test_a_window_too_small_for_the_top_load_is_refused_in_one_line_before_anything(tmp_path):
    out = tmp_path / "never"
    r = run_cli("sweep", "--rates", "10k:100k:4", "--conns", "8", "--outstanding", "4", "--out", str(out))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "--conns 25" in lines[0] and "Traceback" not in r.stderr
    assert not out.exists()


def test_a_sweep_sizes_its_window_for_its_top_load(tmp_path):
    """No --conns/--outstanding: the window holds the top load (40k × 500 µs × 2 = 40 slots, above
    the default 32), says so, and every point runs with it. The SLO is missed at the lowest load, so
    one short point is measured."""
    out = tmp_path / "sized"
    r = run_cli("sweep", "--rates", "2k,40k", "--duration", "0.5", "--slo", "p99<1us", "--out", str(out), "--json",
                timeout=120)
    assert r.returncode == 1, r.stderr
    assert "client window sized to 10 conns × 4 outstanding = 40 slots" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["client_window"] | {} == {"conns": 10, "outstanding": 4, "slots": 40, "needed_slots": 40,
                                          "assumed_response_ns": 500_000, "sized": True}
    point = json.loads((out / doc["points"][0]["dir"] / "summary.json").read_text())
    assert (point["config"]["conns"], point["config"]["outstanding"]) == (10, 4)
    assert_valid(doc, "sweep")
