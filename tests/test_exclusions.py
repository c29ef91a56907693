"""The exclusion rule (issue 9) on synthetic sample sets with known answers: what may leave the
statistics, censoring, the budget, the correlation probe, the consistency check — and a property
test that no reported percentile falls below the true tail of the requests the clock-decided rule
keeps, whatever tool stalls, rounds and target bursts happen."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tailwise.agent import SAMPLE_DTYPE, Flag
from tailwise.methodology.analysis import (
    EXCLUSION_BUDGET,
    INTERVAL_NS,
    Precision,
    analyse,
    probe_correlation,
    warmup_end_ns,
)
from tailwise.stats.histogram import Buckets
from tailwise.stats.quantiles import percentile_ci

RATE = 20_000
GAP_NS = 1e9 / RATE


def make_run(rng, n=60_000, burst=None, stalls=(), guard_ns=100_000, freeze_of_target=None):
    """A steady run at RATE (every request sampled) with, optionally, a target burst (every request
    intended in [a, b) waits until b: a freeze) and engine stalls (requests intended in a stall or
    its guard flagged ENGINE_STALL and delayed to its end; those outstanding across it flagged
    INFLATED). Returns (samples, true latency of each request without the tool's delays)."""
    s = np.zeros(n, dtype=SAMPLE_DTYPE)
    t = np.cumsum(rng.exponential(GAP_NS, n)).astype(np.int64)
    true = (20_000 + rng.exponential(10_000, n)).astype(np.int64)
    if burst is not None:
        a, b = burst
        hit = (t >= a) & (t < b)
        true[hit] += b - t[hit]
    lat = true.copy()
    sent = t + 300
    flags = np.zeros(n, dtype=np.uint32)
    infl = np.zeros(n, dtype=np.uint32)
    for a, b in stalls:
        due = (t >= a) & (t < b + guard_ns)
        flags[due] |= np.uint32(Flag.ENGINE_STALL)
        delay = np.clip(b - t, 0, None)
        lat[due] += delay[due]
        sent[due] = np.maximum(sent[due], b)
        across = ~due & (t < a) & (t + lat > a)
        flags[across] |= np.uint32(Flag.INFLATED)
        over = np.clip(np.minimum(t + lat, b) - a, 0, None)  # the part of the stall it waited out
        lat[across] += over[across]
        infl[across] = over[across]
    s["intended_ns"], s["sent_ns"], s["latency_ns"], s["flags"], s["inflation_ns"] = t, sent, lat, flags, infl
    return s, true


def run_analysis(s, *, stalls=(), pauses=(), precision=None, exclude=True):
    n = len(s)
    c = {"intended": n, "sent": n, "received": n, "late": 0, "never_sent": 0, "errors": 0, "timeouts": 0}
    end = int(s["intended_ns"][-1]) + 1
    every = Buckets.of_values(s["latency_ns"].astype(np.int64))
    t = s["intended_ns"].astype(np.int64)

    def window(first, last):
        keep = (t >= first * INTERVAL_NS) & (t < last * INTERVAL_NS)
        return Buckets.of_values(s["latency_ns"][keep].astype(np.int64))

    assert every.total == n
    return analyse(s, counters=c, elapsed_s=end / 1e9, received_in_window=n, reasons=[], rate_rps=RATE, arrival="exp",
                   conns=16, outstanding=4, sample_every=1, precision=precision or Precision(ci_rel=0.5),
                   rng=np.random.default_rng(1), end_ns=end, pauses=pauses, engine_stalls=list(stalls),
                   exclude_stalls=exclude,
                   every_request=window, late_ns=50_000)


def check(a, name):
    return next(c for c in a.checks if c.name == name)


# --- the pieces -------------------------------------------------------------------------------

def test_warmup_is_whole_intervals_within_its_bounds():
    assert warmup_end_ns(10_000_000_000, 100_000_000) == 100_000_000
    assert warmup_end_ns(10_000_000_000, 250_000_000) == 200_000_000  # whole intervals only
    assert warmup_end_ns(1_500_000_000, 1_000_000_000) == 100_000_000  # at most 10 % of the run
    assert warmup_end_ns(900_000_000, 100_000_000) == 0  # runs under 1 s have none
    assert warmup_end_ns(10_000_000_000, 0) == 0


def test_the_probe_finds_exclusions_that_come_with_a_slow_target(rng):
    n = 100_000
    t = np.cumsum(rng.exponential(GAP_NS, n)).astype(np.int64)
    lat = (20_000 + rng.exponential(10_000, n)).astype(np.int64)
    used = np.ones(n, dtype=bool)
    q99 = float(np.percentile(lat, 99))
    random_starts = sorted(rng.integers(100_000_000, int(t[-1]), 30))
    r = probe_correlation(t, lat, used, random_starts, q99, 0.01)
    assert not r["correlated"], r
    # The target slows down in the 10 ms before each start (and a stall follows: co-located).
    slow = lat.copy()
    for a in random_starts:
        hit = (t >= a - 5_000_000) & (t < a)
        slow[hit] += 2_000_000
    r = probe_correlation(t, slow, used, random_starts, q99, 0.01)
    assert r["correlated"] and r["ratio"] > 10, r


@pytest.fixture
def rng():
    return np.random.default_rng(20261123)


# --- analyse: the rule ------------------------------------------------------------------------

def test_a_clean_run_keeps_everything_after_the_warmup(rng):
    s, _ = make_run(rng)
    a = run_analysis(s)
    assert a.ok, [c.detail for c in a.failed()]
    w0, _ = a.window
    assert w0 == 100_000_000
    assert a.details["samples_used"] == int((s["intended_ns"] >= w0).sum())
    assert a.details["exclusions"]["samples"] == 0
    assert check(a, "consistency").ok and "agree with every request" in check(a, "consistency").detail


def test_engine_stalls_leave_out_exactly_the_flagged_requests_and_count_them(rng):
    stalls = [(int(k * 3e8), int(k * 3e8 + 2e6)) for k in range(1, 9)]
    s, _ = make_run(rng, stalls=stalls)
    a = run_analysis(s, stalls=stalls)
    flagged = (s["flags"] & Flag.ENGINE_STALL) != 0
    w0, end = a.window
    in_window = (s["intended_ns"] >= w0) & (s["intended_ns"] < end)
    assert a.details["exclusions"]["causes"]["engine_stall"] == int((flagged & in_window).sum()) > 0
    assert not a.used_mask[flagged].any()
    # … and nothing else: not the requests outstanding across a stall (they stay in, inflated).
    inflated = (s["flags"] & Flag.INFLATED) != 0
    assert a.used_mask[inflated & in_window].all()
    assert a.details["inflated_samples"] == int((inflated & in_window).sum()) > 0
    assert check(a, "exclusions").ok and check(a, "stalls").ok, [c.detail for c in a.failed()]
    kept = run_analysis(s, stalls=stalls, exclude=False)  # --keep-stalls
    assert kept.details["exclusions"]["samples"] == 0 and kept.details["samples_used"] > a.details["samples_used"]


def test_beyond_the_budget_the_exclusions_check_fails_with_the_cause(rng):
    stalls = [(int(k * 5e7), int(k * 5e7 + 4e6)) for k in range(1, 55)]  # 8 % of the time
    s, _ = make_run(rng, stalls=stalls)
    a = run_analysis(s, stalls=stalls)
    c = check(a, "exclusions")
    assert not c.ok and c.statistic > EXCLUSION_BUDGET and "engine stalls" in c.detail and c.remedy
    assert a.state == "load"


def test_stalls_that_come_with_the_targets_slow_moments_fail(rng):
    # A co-located target: each engine stall follows a 5 ms burst of the target.
    bursts = [(int(k * 2e8), int(k * 2e8 + 5e6)) for k in range(1, 14)]
    s, _ = make_run(rng)
    t = s["intended_ns"].astype(np.int64)
    lat = s["latency_ns"].astype(np.int64)
    for a, b in bursts:
        hit = (t >= a) & (t < b)
        lat[hit] += b - t[hit]
    s["latency_ns"] = lat
    stalls = [(b, b + 1_000_000) for _, b in bursts]
    for a, b in stalls:
        s["flags"][(t >= a) & (t < b)] |= np.uint32(Flag.ENGINE_STALL)
    an = run_analysis(s, stalls=stalls)
    c = check(an, "exclusions")
    assert not c.ok and "slow moments" in c.detail, c


def test_censored_requests_stay_in_the_tail(rng):
    s, _ = make_run(rng)
    # A 2 s freeze at the end: the requests due in its last 2 s never got a reply (timeouts at
    # 1 s and never-sent ones), censored at the time they had waited.
    t = s["intended_ns"].astype(np.int64)
    end = int(t[-1]) + 1
    hit = t > end - 600_000_000
    s["latency_ns"][hit] = 1_000_000_000
    s["flags"][hit] |= np.uint32(Flag.CENSORED | Flag.TIMEOUT)
    a = run_analysis(s)
    p99 = next(p for p in a.percentiles if p.p == 99)
    assert p99.value >= 1_000_000_000 and p99.high is None or p99.at_least, p99


def test_consistency_fails_when_the_samples_lose_the_tail(rng):
    s, _ = make_run(rng)
    t = s["intended_ns"].astype(np.int64)
    every_lat = s["latency_ns"].astype(np.int64).copy()
    every_lat[rng.random(len(s)) < 0.02] += 5_000_000  # 2 % slow in every request …
    a = analyse(s, counters={"intended": len(s), "sent": len(s), "received": len(s), "late": 0, "never_sent": 0,
                             "errors": 0, "timeouts": 0},
                elapsed_s=t[-1] / 1e9, received_in_window=len(s), reasons=[], rate_rps=RATE, arrival="exp", conns=16,
                outstanding=4, sample_every=1, precision=Precision(ci_rel=0.5), rng=np.random.default_rng(1),
                end_ns=int(t[-1]) + 1, late_ns=50_000,
                every_request=lambda f, l: Buckets.of_values(every_lat[(t >= f * INTERVAL_NS) & (t < l * INTERVAL_NS)]))
    c = check(a, "consistency")  # … but none of them among the samples
    assert not c.ok and "every request" in c.detail, c


# --- the property -----------------------------------------------------------------------------

@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(burst_at=st.floats(0.05, 0.95), burst_ms=st.sampled_from([1, 5, 20, 100]),
       stall_at=st.lists(st.floats(0.0, 1.0), max_size=6), stall_ms=st.sampled_from([0.3, 1, 4]),
       near=st.sampled_from(["before", "after", "anywhere"]), seed=st.integers(0, 2**32 - 1))
def test_no_reported_percentile_falls_below_the_true_tail_of_what_the_rule_keeps(burst_at, burst_ms, stall_at,
                                                                                  stall_ms, near, seed):
    rng = np.random.default_rng(seed)
    n = 40_000
    span = n * GAP_NS
    a = int(0.1 * span + burst_at * 0.85 * span)
    burst = (a, a + int(burst_ms * 1e6))
    # Tool stalls at random, or right before / right after the burst (where latency-driven masks
    # used to grow into it).
    d = int(stall_ms * 1e6)
    if near == "before":
        stalls = [(burst[0] - d - 1_000, burst[0] - 1_000)]
    elif near == "after":
        stalls = [(burst[1] + 1_000, burst[1] + 1_000 + d)]
    else:
        stalls = []
    stalls += [(int(x * span), int(x * span) + d) for x in stall_at]
    stalls = [(max(x, 0), y) for x, y in stalls if not (x < burst[1] and y > burst[0])]  # not over it
    s, true = make_run(rng, n=n, burst=burst, stalls=stalls)
    an = run_analysis(s, stalls=stalls)
    if not an.ok:
        return  # not-measurable: no number is claimed
    # What the rule keeps, decided by the clock (the flags), and its true latencies.
    w0, end = an.window
    t = s["intended_ns"].astype(np.int64)
    kept = (t >= w0) & (t < end) & ((s["flags"] & Flag.ENGINE_STALL) == 0)
    truth = np.sort(true[kept])
    for pc in an.percentiles:
        if not pc.supported:
            continue
        want = truth[max(int(np.ceil(pc.p / 100 * len(truth))), 1) - 1]
        # "By more than its CI allows": the interval at 99.9 % on the same effective size.
        wide = percentile_ci(np.sort(s["latency_ns"][an.used_mask].astype(np.int64)), pc.p, 0.999,
                             n_eff=pc.n_effective)
        assert wide.high is None or wide.high >= want, (pc, want, burst, stalls)


def test_a_pause_an_engine_thread_noticed_late_leaves_the_schedule_poisson():
    """The coordinator paused the schedule for 200 ms at 50 ms; an engine thread stalled 10 ms
    noticed it then, sent what fell due meanwhile at its own times, and held the rest until the pause
    ended (thread.rs). The gap across the pause is the coordinator's, however late it was seen.
    (One such gap left in gives A² = 725 here; a CI run's validation skip showed A² = 120 on the
    intended gaps, likely from this.)"""
    rng = np.random.default_rng(7)
    s, _ = make_run(rng, n=1_900)  # every gap tested (at most 2,000 are)
    t = s["intended_ns"].astype(np.int64)
    pause, seen_late, length = 50_000_000, 10_000_000, 200_000_000
    after = t >= pause + seen_late
    s["intended_ns"][after] += length - seen_late
    s["sent_ns"][after] += length - seen_late
    a = run_analysis(s, pauses=[(pause, pause + length)])
    assert "intended gaps fit the exponential" in check(a, "arrivals").detail, check(a, "arrivals").detail
