"""The freeze matrix (issue 9): a target frozen (SIGSTOP … SIGCONT) at the worst moments must never
leave an ok verdict with the freeze gone from the tail.

The target is `tailwise serve` in a process of its own, stopped and continued by the test: for
20 ms, 200 ms and 1 s; at 10k and 50k req/s; in the warm-up, mid-run, right after a coordinator
round, right after a stall of the engine (caused by the test hook TAILWISE_TEST_ENGINE_STALL); in
fixed-length and adaptive runs; plus periodic 5 ms freezes every 100 ms. Each case must show the
freeze in every percentile it reaches — the every-request histogram of the same window says which
those are — or end not-measurable naming a check that saw it. A freeze of the engine's own
process is left out and reported instead.

Timing: the test reads the run's stderr as it comes — "measuring …" when the schedule starts,
"round N …" after each round of the coordinator, the test hook's line after the engine stall —
and freezes the server right after the line it waits for. Every run is bounded (--duration 4 or
--max-time 6, and a timeout on the process).
"""

from __future__ import annotations

import time

import pandas as pd
import pytest

from live_run import Run, assert_freeze_visible, freeze

FREEZES_S = (0.02, 0.2, 1.0)
RATES = ("10k", "50k")


def _matrix():
    for mode in ("fixed", "adaptive"):
        for where in ("warmup", "mid-run", "after-round", "after-engine-stall"):
            if mode == "fixed" and where == "after-round":
                continue  # a fixed-length run has no rounds
            for rate in RATES:
                for f in FREEZES_S:
                    yield pytest.param(mode, where, rate, f, id=f"{mode}-{where}-{rate}-{int(f * 1000)}ms")


def _mode_args(mode: str) -> list[str]:
    if mode == "fixed":
        return ["--duration", "4"]
    return ["--max-time", "6", "--percentile", "99", "--ci", "5%"]


@pytest.mark.parametrize("mode,where,rate,freeze_s", list(_matrix()))
def test_freeze_matrix(serve, mode, where, rate, freeze_s):
    srv = serve("--service", "fixed:5us")
    env = {"TAILWISE_TEST_ENGINE_STALL": "1.5s:500us"} if where == "after-engine-stall" else None
    run = Run(srv.url, "--rate", rate, "--timeout", "3s", "--conns", "16", *_mode_args(mode), "--seed", "11", env=env)
    start = run.wait_line("measuring ")
    if where == "warmup":
        pass  # at once: the schedule starts within 5 ms of the line
    elif where == "mid-run":
        time.sleep(max(0.0, start + 2.0 - time.monotonic()))
    elif where == "after-round":
        run.wait_line("round 1 ")
    else:
        run.wait_line("tailwise test hook: engine thread")
    t = freeze(srv.proc.pid, freeze_s)
    s = run.summary()
    if mode == "adaptive" and s["rate"]["duration_s"] < t - start + freeze_s:
        # The coordinator concluded before the freeze ended: the run does not contain it all.
        # (--ci 5% keeps p99 open for several rounds; this guards the assertion, it is rare.)
        assert s["rate"]["duration_s"] > t - start, "the run ended before the freeze began"
    assert_freeze_visible(s, freeze_s, f"{mode} {where} {rate} {freeze_s * 1e3:.0f} ms")


@pytest.mark.parametrize("mode", ["fixed", "adaptive"])
def test_periodic_5ms_freezes_every_100ms(serve, mode):
    srv = serve("--service", "fixed:5us")
    run = Run(srv.url, "--rate", "20k", "--conns", "16", *_mode_args(mode), "--seed", "5")
    run.wait_line("measuring ")
    stop_at = time.monotonic() + 4.0
    while time.monotonic() < stop_at and run.proc.poll() is None:
        freeze(srv.proc.pid, 0.005)
        time.sleep(0.095)
    s = run.summary()
    # 5 % of the time frozen: p99 and beyond are in the freezes.
    assert_freeze_visible(s, 0.005, f"{mode} periodic")


def test_a_freeze_of_the_engines_own_process_is_left_out_and_reported(serve, tmp_path):
    srv = serve("--service", "fixed:5us")
    out = tmp_path / "run"
    run = Run(srv.url, "--rate", "10k", "--duration", "6", "--seed", "3", "--out", str(out))
    start = run.wait_line("measuring ")
    time.sleep(max(0.0, start + 3.0 - time.monotonic()))
    t = freeze(run.proc.pid, 0.1)
    s = run.summary()
    m = s["methodology"]
    # The pause is the engine's: logged as its stall, the requests due in it left out and counted.
    assert m["stalls_longest_ns"] >= 80_000_000, m
    assert s["exclusions"]["causes"]["engine_stall"] >= 500, s["exclusions"]
    stalls = next(c for c in s["checks"] if c["name"] == "stalls")
    assert "left out" in stalls["detail"]
    # … and not taken for the target's latency, judged per request (the host's own pauses, which
    # stall the server too, stay in the tail and may own p99 on a noisy host): no request due in
    # the middle of the freeze is in the statistics, and none that was kept waited through it.
    # The schedule starts within 5 ms of the "measuring" line, the stop within 1 ms of `t`.
    samples = pd.read_csv(out / "samples.csv")
    f0, f1 = (t - start) * 1e9, (t - start + 0.1) * 1e9
    used = samples[samples["used"] == 1]
    due_in = used[(used["intended_ns"] > f0 + 10e6) & (used["intended_ns"] < f1 - 10e6)]
    assert due_in.empty, due_in.head()
    answered = used[used["received_ns"] > 0]
    through = answered[(answered["intended_ns"] < f0 - 10e6) & (answered["received_ns"] > f1 - 10e6)]
    assert through.empty, through.head()
    # With the requests due in it, p99 of every request is in the pause (~1.7 % of the run's
    # requests waited up to 100 ms); the reported p99 is below it.
    every = {p["p"]: p["value_ns"] for p in s["latency"]["window"]["percentiles"]}
    assert every[99.0] >= 25_000_000, every
    reported = {p["p"]: p["value_ns"] for p in s["latency"]["percentiles"] if p["value_ns"] is not None}
    assert 50.0 in reported and reported.get(99.0, 0) < every[99.0], (reported, every)


def test_a_2s_freeze_with_a_1s_timeout_is_in_the_tail_and_nothing_is_lost(serve):
    srv = serve("--service", "fixed:5us")
    run = Run(srv.url, "--rate", "10k", "--duration", "6", "--timeout", "1s", "--seed", "13")
    start = run.wait_line("measuring ")
    time.sleep(max(0.0, start + 2.0 - time.monotonic()))
    freeze(srv.proc.pid, 2.0)
    s = run.summary()
    c = s["counters"]
    # Requests that waited past the timeout (sent ones: timeouts; the rest: never sent) are in the
    # statistics at the time they waited, ≥ 1 s, never dropped.
    assert c["timeouts"] > 0 and c["never_sent"] > 1000, c
    assert c["intended"] == c["sent"] + c["never_sent"]
    assert c["sent"] == c["received"] + c["errors"] + c["timeouts"] + c["unfinished"]
    assert s["latency"]["histogram"]["count"] == c["intended"]
    p99 = next(p for p in s["latency"]["percentiles"] if p["p"] == 99)
    assert s["verdict"] == "not-measurable" or p99["value_ns"] >= 1_000_000_000, (s["verdict"], p99)
    assert p99["value_ns"] is None or p99["value_ns"] >= 1_000_000_000 or p99["censored"], p99


def test_the_time_budget_is_kept(serve):
    """A precision out of reach (p99.99 ± 1 %) with --max-time 20: the process ends within
    --max-time plus the bound it states when it starts."""
    t0 = time.monotonic()
    run = Run("--rate", "50k", "--service", "exp:10us", "--percentile", "99.99", "--ci", "1%", "--max-time", "20")
    run.wait_line("measuring ")
    started = time.monotonic() - t0
    line = next(ln for _, ln in run.lines if ln.startswith("measuring "))
    bound = float(line.rsplit("+ ", 1)[1].split(" s", 1)[0])  # "… at most 20 s (+ 6.2 s to conclude)"
    s = run.summary(timeout_s=120)
    took = time.monotonic() - t0
    print(f"ended after {took:.1f} s ({started:.1f} s to start, bound 20 + {bound:.1f} s): {s['methodology']['stopped']}")
    assert took <= started + 20 + bound, (took, started, bound)
