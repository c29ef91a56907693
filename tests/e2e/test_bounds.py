"""Issue 32 live: the client's own stalls (the engine stopped by its test hook) widen the intervals
by about what they delayed — no more, no less — and are judged once.

* A 200 ms SIGSTOP of `tailwise serve` with the engine stopped 3 ms inside it: the freeze comes out
  as a freeze (p99's interval above 100 ms — the busy-period rule bounds a request by its latency
  less the client's stall time, not by the run's floor), stationarity names the transient, and
  arrivals does not blame the client for the backlog the frozen target held.
* The engine stopped 12 ms every 400 ms against a steady server: p99's interval reaches down to
  what an undisturbed run of the same workload measures.
* The engine stopped 5 ms twenty times at 20k req/s: the lateness those stops caused is in the
  intervals, so `arrivals` passes.

Timing: "measuring …" on stderr marks the schedule's start (the engine's t0 within a few ms); the
test hook stops the engine at its own times after t0 and says so on stderr. Every run is bounded
(--duration, and a timeout on the process).
"""

from __future__ import annotations

import time

import pytest

from support.live_run import Run, freeze, need_test_hook


def check(s: dict, name: str) -> dict:
    return next(c for c in s["checks"] if c["name"] == name)


def pct(s: dict, p: float) -> dict:
    return next(x for x in s["latency"]["percentiles"] if x["p"] == p)


def _freeze_with_a_stall_inside(serve, duration_s: float, at_s: float) -> dict:
    """A 200 ms SIGSTOP of the target from ``at_s`` with the engine stopped 3 ms 100 ms into it, in a
    run of ``duration_s`` at 10k req/s: its summary."""
    need_test_hook()
    srv = serve("--service", "fixed:20us")
    run = Run(srv.url, "--rate", "10k", "--conns", "16", "--timeout", "3s", "--duration", f"{duration_s:g}",
              "--seed", "21", env={"TAILWISE_TEST_ENGINE_STALL": f"{at_s + 0.1:g}s:3ms"})
    start = run.wait_line("measuring ")
    time.sleep(max(0.0, start + at_s - time.monotonic()))
    freeze(srv.proc.pid, 0.2)
    s = run.summary()
    assert any(ln.startswith("tailwise test hook: engine thread") for _, ln in run.lines), run.lines
    assert s["delayed"]["rule"] == "busy"
    arrivals = check(s, "arrivals")
    said = f"{arrivals['detail']} {arrivals['remedy'] or ''}"
    # The backlog the frozen target held is not the client's: no remedy says so.
    assert arrivals["ok"] or ("add --threads" not in said and "client fell behind" not in said), arrivals
    return s


def test_a_target_freeze_with_a_client_stall_inside_stays_a_freeze(serve):
    """A 200 ms SIGSTOP of the target with the engine stopped 3 ms inside it: p99's interval (or,
    unsupported, its one-sided bound) stays above 100 ms — under the floor rule the stop's flagged
    requests, the freeze's backlog, were bounded at the run's floor (~20 µs) and p99's low end fell
    to it; the busy-period rule takes only the client's stall time off them.

    Why 2.5 s: p99's exceedances are then one block of the freeze's longest waits, whose
    correlation gives p99 ~60 effective samples whatever the run's length or rate (τ ≈ the block's
    length, 1 % of the requests). A one-sided bound at 97.5 % from 60 lies at rank 58 of 60 — the
    run's top 3.3 % — which is above 100 ms only while the freeze's upper half (waits over 100 ms)
    holds more than 3.3 % of the run: a 200 ms freeze in at most ~3 s."""
    s = _freeze_with_a_stall_inside(serve, 2.5, 1.2)
    p99 = pct(s, 99.0)
    low = p99["low_ns"] if p99["low_ns"] is not None else p99["lower_bound_ns"]
    print(f"p99 {p99}; delayed {s['delayed']['causes']}")
    assert low is not None and low > 100_000_000, p99


def test_a_target_freeze_with_a_client_stall_inside_is_a_transient(serve):
    """The same freeze in a 6 s run: stationarity names the transient (the tail's clustering
    outside it is measured on enough of the run to judge it), and the run is not-measurable."""
    s = _freeze_with_a_stall_inside(serve, 6.0, 3.0)
    st = check(s, "stationarity")
    print(st["detail"])
    if st["ok"] and "too few samples above p99" in st["detail"]:
        # The one-window test has no power here: the host's own stalls cluster the tail outside the
        # freeze (τ in the detail) so much that even every exceedance in one window would not be
        # significant. The freeze stays in the statistics (the first test's bound); it is not named.
        pytest.skip(f"this host's tail clustering leaves no power to name a lone freeze: {st['detail']}")
    assert not st["ok"] and "transient" in st["detail"], st["detail"]
    assert s["verdict"] == "not-measurable"


def test_periodic_client_stalls_reach_down_to_an_undisturbed_run(serve):
    need_test_hook()
    srv = serve("--service", "fixed:20us")
    args = ("--rate", "10k", "--conns", "8", "--duration", "8", "--seed", "5")
    calm = Run(srv.url, *args).summary()
    # 12 ms every 400 ms: ~3 % of the run stopped, ~120 requests due in each stop.
    run = Run(srv.url, *args, env={"TAILWISE_TEST_ENGINE_STALL": "400ms:12ms:400ms:18"})
    s = run.summary()
    stops = [ln for _, ln in run.lines if ln.startswith("tailwise test hook: engine thread")]
    assert len(stops) >= 15, stops
    ref, p99 = pct(calm, 99.0), pct(s, 99.0)
    print(f"undisturbed p99 {ref}\nstopped 12 ms every 400 ms: p99 {p99}\ndelayed {s['delayed']}")
    assert s["delayed"]["samples"] > 0 and s["delayed"]["rule"] == "busy"
    assert p99["low_ns"] is not None
    # The stops' own requests and those queued behind them are bounded by their latency less the
    # stall time in their busy period: the interval reaches what the target gives undisturbed —
    # that run's every-request p99, or its interval's top when it has one (two runs of the same
    # workload differ by sampling and by the host's own pauses too).
    every = {x["p"]: x["value_ns"] for x in calm["latency"]["window"]["percentiles"]}[99.0]
    reach = max(every, ref["high_ns"] or 0)
    print(f"undisturbed every-request p99 {every}")
    assert p99["low_ns"] <= reach, (p99, ref, every)
    # ... and no lower than the run's floor: what was measured stays the upper end.
    assert p99["low_ns"] >= s["delayed"]["floor_ns"] and p99["high_ns"] >= p99["value_ns"]


def test_lateness_from_the_engines_own_stops_does_not_fail_arrivals(serve):
    need_test_hook()
    srv = serve("--service", "fixed:10us")
    run = Run(srv.url, "--rate", "20k", "--conns", "16", "--duration", "5", "--seed", "8",
              env={"TAILWISE_TEST_ENGINE_STALL": "500ms:5ms:200ms:20"})
    s = run.summary()
    stops = [ln for _, ln in run.lines if ln.startswith("tailwise test hook: engine thread")]
    assert len(stops) == 20, stops
    arrivals = check(s, "arrivals")
    print(arrivals["detail"])
    # ~100 requests due in each stop leave late, in a burst: the intervals carry that lateness, and
    # what is left is the client's own.
    assert s["counters"]["late"] >= 20 * 50, s["counters"]
    assert arrivals["ok"], arrivals
    assert "by the client's own doing" in arrivals["detail"]
