"""The freeze matrix (issue 9): a target frozen (SIGSTOP … SIGCONT) at the worst moments must never
leave an ok verdict with the freeze gone from the tail.

The target is `tailwise serve` in a process of its own, stopped and continued by the test: for
20 ms, 200 ms and 1 s; at 10k and 50k req/s; in the warm-up, mid-run, right after a coordinator
round, right after a stall of the engine (caused by the test hook TAILWISE_TEST_ENGINE_STALL); in
fixed-length and adaptive runs; plus periodic 5 ms freezes every 100 ms. Each case must show the
freeze in every percentile it reaches — the every-request histogram of the same window says which
those are — or end not-measurable naming a check that saw it. A freeze of the engine's own
process is bounded instead: its requests are in the statistics as intervals, reported (issue 18).

Timing: the test reads the run's stderr as it comes — "measuring …" when the schedule starts,
"round N …" after each round of the coordinator, the test hook's line after the engine stall —
and freezes the server right after the line it waits for. Every run is bounded (--duration 4 or
--max-time 6, and a timeout on the process).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest

from support.live_run import Run, assert_freeze_visible, freeze, need_test_hook
from tailwise.results.rows import Flag
from tailwise.stats.quantiles import estimate_percentile

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
    if where == "after-engine-stall":
        need_test_hook()
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


def test_a_freeze_of_the_engines_own_process_is_bounded_and_reported(serve, tmp_path):
    srv = serve("--service", "fixed:5us")
    out = tmp_path / "run"
    run = Run(srv.url, "--rate", "10k", "--duration", "6", "--seed", "3", "--out", str(out))
    start = run.wait_line("measuring ")
    time.sleep(max(0.0, start + 3.0 - time.monotonic()))
    t = freeze(run.proc.pid, 0.1)
    s = run.summary()
    m = s["methodology"]
    # The pause is the engine's: logged as its stall, the requests due in it sent late by the client,
    # in the statistics as intervals and counted.
    assert m["stalls_longest_ns"] >= 80_000_000, m
    assert s["delayed"]["causes"]["sent_late"] >= 500, s["delayed"]
    stalls = next(c for c in s["checks"] if c["name"] == "stalls")
    assert "sent late by the client" in stalls["detail"]
    # Judged per request (the host's own pauses, which stall the server too, may own p99 on a
    # noisy host): every request due in the middle of the freeze is flagged, and none that waited
    # through it is unflagged. The schedule starts within 5 ms of the "measuring" line, the stop
    # within 1 ms of `t`.
    samples = pd.read_csv(out / "samples.csv")
    f0, f1 = (t - start) * 1e9, (t - start + 0.1) * 1e9
    flagged = (samples["flags"] & (int(Flag.ENGINE_STALL) | int(Flag.INFLATED))) != 0
    due_in = samples[~flagged & (samples["intended_ns"] > f0 + 10e6) & (samples["intended_ns"] < f1 - 10e6)]
    assert due_in.empty, due_in.head()
    answered = samples[~flagged & (samples["received_ns"] > 0)]
    through = answered[(answered["intended_ns"] < f0 - 10e6) & (answered["received_ns"] > f1 - 10e6)]
    assert through.empty, through.head()
    # Nothing is left out but the warm-up: every request in the window is used.
    assert (samples["used"] == 1).sum() == s["latency"]["samples"] == s["latency"]["window"]["count"]
    # With the requests due in it, p99 of every request is in the pause (~1.7 % of the run's
    # requests waited up to 100 ms): the reported p99 is that figure, and its interval reaches down
    # to what the target alone can have given.
    every = {p["p"]: p["value_ns"] for p in s["latency"]["window"]["percentiles"]}
    assert every[99.0] >= 25_000_000, every
    p99 = next(p for p in s["latency"]["percentiles"] if p["p"] == 99.0)
    if p99["value_ns"] is not None:
        assert p99["value_ns"] == pytest.approx(every[99.0], rel=0.02) and p99["high_ns"] >= every[99.0] * 0.98, p99
        assert p99["value_low_ns"] < 1_000_000 and p99["low_ns"] <= p99["value_low_ns"], p99


def test_engine_stopped_5ms_a_few_times_the_interval_holds_every_request(serve, tmp_path):
    """Issue 18: the engine stopped for 5 ms four times (the test hook). Each percentile's interval
    contains the every-request figure of the same window (the upper end of what the target can have
    given) and reaches below it by the widening; without any request delayed, the interval is
    exactly the order-statistic CI of the samples."""
    need_test_hook()
    srv = serve("--service", "fixed:5us")
    out = tmp_path / "run"
    run = Run(srv.url, "--rate", "10k", "--conns", "16", "--duration", "4", "--seed", "7", "--out", str(out),
              env={"TAILWISE_TEST_ENGINE_STALL": "1s:5ms:600ms:4"})
    run.wait_line("measuring ")
    s = run.summary()
    stops = [ln for _, ln in run.lines if ln.startswith("tailwise test hook: engine thread")]
    assert len(stops) == 4, stops
    d = s["delayed"]
    assert d["causes"]["sent_late"] >= 4 * 25, d  # ~50 due in each stop at 10k req/s
    every = {p["p"]: p["value_ns"] for p in s["latency"]["window"]["percentiles"]}
    for p in s["latency"]["percentiles"]:
        if p["low_ns"] is None or p["high_ns"] is None:
            continue
        # 1 % resolution of the every-request histograms.
        assert p["low_ns"] <= every[p["p"]] * 1.01 and every[p["p"]] <= p["high_ns"] * 1.01, (p, every)
        assert p["low_ns"] <= p["sampling_low_ns"] and p["value_low_ns"] <= p["value_ns"], p
    # The measured values' own interval is the plain order-statistic CI of every sample in the window.
    samples = pd.read_csv(out / "samples.csv")
    used = samples[samples["used"] == 1]
    lat = used["latency_ns"].to_numpy(dtype=np.int64)
    cens = (used["flags"].to_numpy() & int(Flag.CENSORED)) != 0
    for p in s["latency"]["percentiles"]:
        plain, _ = estimate_percentile(lat, p["p"], s["latency"]["confidence"], censored=cens)
        if p["value_ns"] is None:
            # Unsupported: the lower bounds' series (its own τ) may need more effective samples.
            assert p["samples_needed"], p
            continue
        if plain.low is None:
            continue
        assert (p["value_ns"], p["sampling_low_ns"], p["sampling_high_ns"]) == (
            int(plain.value), int(plain.low), int(plain.high)), (p, plain)
        if not d["samples"]:  # no request delayed (none this time): today's interval exactly
            assert (p["low_ns"], p["high_ns"]) == (int(plain.low), int(plain.high))


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
