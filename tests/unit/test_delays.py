"""Every request in the statistics, as an interval (issue 18): requests the client delayed are
interval-censored between a lower bound and their measured latency (stats/bounds.py), each
percentile reported with the interval that covers both ends and sampling. Synthetic sample sets
with answers computed by hand; the stalls check, which fails only when the widening alone misses
--ci; host-wide pauses said, not failed; and a property test that the reported interval never
misses the target's own percentile by more than its CI allows, whatever tool stalls, rounds and
target bursts happen."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tailwise.results.rows import SAMPLE_DTYPE, Flag
from tailwise.methodology.analysis import analyse
from tailwise.methodology.plan import AnalysisInput, RunPlan
from tailwise.methodology.steps import INTERVAL_NS, host_pauses, probe_correlation, warmup_end_ns
from tailwise.spec.precision import Precision
from tailwise.methodology.checks import Setting
from tailwise.methodology.words import client_words, remedy_words
from tailwise.stats.bounds import bounded_percentile, busy_lower_bounds, floor_ns, lower_bounds, stall_union
from tailwise.stats.histogram import Buckets
from tailwise.stats.quantiles import estimate_percentile, percentile_ci

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
    for a, b in merged(stalls):
        due = (t >= a) & (t < b + guard_ns)
        flags[due] |= np.uint32(Flag.ENGINE_STALL)
        delay = np.clip(b - t, 0, None)
        lat[due] += delay[due]
        sent[due] = np.maximum(sent[due], b)
        across = ~due & (t < a) & (t + lat > a)
        flags[across] |= np.uint32(Flag.INFLATED)
        over = np.clip(np.minimum(t + lat, b) - a, 0, None)  # the part of the stall it waited out
        lat[across] += over[across]
        infl[across] += over[across].astype(np.uint32)  # across several stalls: the stall time it spans, all of it (the engine's union)
    s["intended_ns"], s["sent_ns"], s["latency_ns"], s["flags"], s["inflation_ns"] = t, sent, lat, flags, infl
    s["busy_from_ns"] = busy_from(t, lat)
    return s, true


def busy_from(t: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """The engine's B_n for a client with slots to spare: the last instant at or before t_n when
    every earlier reply had been read — t_n itself when the replies so far all came by then, else
    the start of the busy period it joins."""
    replied = np.maximum.accumulate(t + lat)
    idle = np.r_[True, replied[:-1] <= t[1:]]
    return t[np.maximum.accumulate(np.where(idle, np.arange(len(t)), 0))]


def merged(stalls):
    """Stall intervals merged where they overlap: one thread cannot stall twice at once."""
    out: list[list[int]] = []
    for a, b in sorted(stalls):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [tuple(x) for x in out]


def run_analysis(s, *, stalls=(), pauses=(), precision=None, bound=True, target_stalls=(), setting=None, bounds="busy"):
    n = len(s)
    c = {"intended": n, "sent": n, "received": n, "late": 0, "never_sent": 0, "errors": 0, "timeouts": 0}
    end = int(s["intended_ns"][-1]) + 1
    every = Buckets.of_values(s["latency_ns"].astype(np.int64))
    t = s["intended_ns"].astype(np.int64)

    def window(first, last):
        keep = (t >= first * INTERVAL_NS) & (t < last * INTERVAL_NS)
        return Buckets.of_values(s["latency_ns"][keep].astype(np.int64))

    assert every.total == n
    plan = RunPlan(precision or Precision(ci_rel=0.5), rate_rps=RATE, arrival="exp", conns=16, outstanding=4,
                   sample_every=1, late_ns=50_000, bound_delays=bound, setting=setting, bounds=bounds)
    return analyse(AnalysisInput(plan, s, c, elapsed_s=end / 1e9, received_in_window=n, rng=np.random.default_rng(1),
                                 end_ns=end, pauses=pauses, engine_stalls=list(stalls),
                                 target_stalls=list(target_stalls), every_request=window))


def check(a, name):
    return next(c for c in a.checks if c.name == name)


# --- the pieces -------------------------------------------------------------------------------

def test_warmup_is_whole_intervals_within_its_bounds():
    assert warmup_end_ns(10_000_000_000, 100_000_000) == 100_000_000
    assert warmup_end_ns(10_000_000_000, 250_000_000) == 200_000_000  # whole intervals only
    assert warmup_end_ns(1_500_000_000, 1_000_000_000) == 100_000_000  # at most 10 % of the run
    assert warmup_end_ns(900_000_000, 100_000_000) == 0  # runs under 1 s have none
    assert warmup_end_ns(10_000_000_000, 0) == 0


def test_the_probe_finds_stalls_that_come_with_a_slow_target(rng):
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

def test_a_clean_run_keeps_everything_after_the_warmup_with_todays_intervals(rng):
    s, _ = make_run(rng)
    a = run_analysis(s)
    assert a.ok, [c.detail for c in a.failed()]
    w0, _ = a.window
    assert w0 == 100_000_000
    used = s["intended_ns"] >= w0
    assert a.samples_used == int(used.sum()) and a.delayed.samples == 0
    assert check(a, "consistency").ok and "agree with every request" in check(a, "consistency").detail
    # Nothing delayed: each interval is exactly the order-statistic CI of before (issue 18).
    lat = s["latency_ns"][used].astype(np.int64)
    for pc in a.percentiles:
        old, _ = estimate_percentile(lat, pc.p, 0.95, censored=np.zeros(len(lat), bool))
        assert (pc.value, pc.low, pc.high, pc.n_effective) == (old.value, old.low, old.high, old.n_effective)
        assert pc.value_low == pc.value and (pc.sampling_low, pc.sampling_high) == (pc.low, pc.high)
        assert pc.widening in (0.0, None)


# --- the bounds, by hand -----------------------------------------------------------------------

#: 200,000 requests: 199,000 exact ones at 20,000 + 10·k ns (k = 0 … 198,999) and 1,000 (0.5 %)
#: sent late by the client, measured at 5 ms, their lower bound the floor (the least exact value).
N_HAND, DELAYED_HAND, U_HAND = 200_000, 1_000, 5_000_000


def hand_set(seed: int = 3):
    exact = 20_000 + 10 * np.arange(N_HAND - DELAYED_HAND, dtype=np.int64)
    lat = np.r_[exact, np.full(DELAYED_HAND, U_HAND, dtype=np.int64)]
    late = np.r_[np.zeros(len(exact), bool), np.ones(DELAYED_HAND, bool)]
    order = np.random.default_rng(seed).permutation(N_HAND)  # the delayed ones anywhere in time
    return lat[order], late[order]


#: p → (ξ_L, ξ_U) by hand. ξ_U: rank ⌈pN⌉ of the exact values, or 5 ms past the 199,000th.
#: ξ_L: the 1,000 delayed at 20,000 ns come first, so rank r > 1,000 is exact value r − 1,001.
HAND = {50.0: (20_000 + 10 * 98_999, 20_000 + 10 * 99_999),
        99.0: (20_000 + 10 * 196_999, 20_000 + 10 * 197_999),
        99.9: (20_000 + 10 * 198_799, U_HAND)}


@pytest.mark.parametrize("p", sorted(HAND))
def test_bounds_by_hand_and_the_interval_covers_them(p):
    lat, late = hand_set()
    floor = floor_ns(lat, ~late)
    assert floor == 20_000
    lower = lower_bounds(lat, late, np.zeros(N_HAND, bool), np.zeros(N_HAND), floor)
    pc, _ = bounded_percentile(lat, lower, p, 0.95)
    lo, hi = HAND[p]
    assert (pc.value_low, pc.value) == (lo, hi)
    assert pc.low <= lo and hi <= pc.high
    # The high end is the measured values' own interval; the widening is the low end's move.
    assert pc.high == pc.sampling_high and pc.widening == pc.sampling_low - pc.low > 0


def test_analyse_gives_the_same_bounds_from_the_engines_flags():
    lat, late = hand_set()
    s = np.zeros(N_HAND, dtype=SAMPLE_DTYPE)
    s["intended_ns"] = np.arange(N_HAND, dtype=np.int64) * 50_000 + INTERVAL_NS  # 10 s at 20k/s, after a warm-up
    s["intended_ns"][:2_000] = np.arange(2_000) * 50_000  # the warm-up's own requests
    s["sent_ns"] = s["intended_ns"] + 300
    s["latency_ns"], s["flags"] = lat, np.where(late, int(Flag.ENGINE_STALL), 0)
    s["intended_ns"] = np.sort(s["intended_ns"])
    # The floor rule: the engine's flags alone, no stall windows (the busy rule needs them).
    a = run_analysis(s, precision=Precision(percentile=99.9, warmup_ns=0), bounds="floor")
    by_p = {pc.p: pc for pc in a.percentiles}
    for p, (lo, hi) in HAND.items():
        assert (by_p[p].value_low, by_p[p].value) == (lo, hi) and by_p[p].low <= lo and hi <= by_p[p].high
    d = a.to_dict()["delayed"]
    assert d["samples"] == DELAYED_HAND and d["causes"] == {"sent_late": DELAYED_HAND, "outstanding_across": 0, "behind_stall": 0}
    assert d["share"] == pytest.approx(0.005) and d["floor_ns"] == 20_000
    # No width asked: the stalls check reports, it cannot fail.
    assert check(a, "stalls").ok and "0.50% of the 200,000" in check(a, "stalls").detail
    assert check(a, "exclusions").ok and a.to_dict()["exclusions"]["samples"] == 0


def test_outstanding_across_a_stall_is_bounded_by_the_stall_it_spans():
    lat = np.array([30_000, 1_030_000, 25_000, 40_000])
    across = np.array([False, True, False, False])
    infl = np.array([0, 1_000_000, 0, 0])
    low = lower_bounds(lat, np.zeros(4, bool), across, infl, 25_000.0)
    assert low.tolist() == [30_000, 30_000, 25_000, 40_000]
    # … never below the floor, never above what was measured.
    low = lower_bounds(lat, np.zeros(4, bool), across, np.array([0, 1_029_000, 0, 0]), 25_000.0)
    assert low[1] == 25_000


def test_delays_that_come_with_the_targets_slow_moments_put_the_every_request_figure_on_top(rng):
    """A host pausing client and target together: each engine stall begins with a 5 ms slowdown of
    the target that starts at the same instant (the old probe's 10 ms before it stay clean). The
    delayed requests carry the tail: the value is the every-request percentile, the interval's top
    reaches it, and the host pause is said — not failed."""
    s, _ = make_run(rng)
    t = s["intended_ns"].astype(np.int64)
    lat = s["latency_ns"].astype(np.int64)
    stalls = [(int(k * 2e8), int(k * 2e8 + 5e6)) for k in range(1, 14)]
    for a, b in stalls:
        hit = (t >= a) & (t < b)
        lat[hit] += b - t[hit] + 2_000_000  # waited out the pause, then a slow target
        s["flags"][hit] |= np.uint32(Flag.ENGINE_STALL)
    s["latency_ns"] = lat
    s["busy_from_ns"] = busy_from(t, lat)
    floor = run_analysis(s, stalls=stalls, target_stalls=stalls, precision=Precision(), bounds="floor")
    an = run_analysis(s, stalls=stalls, target_stalls=stalls, precision=Precision())  # no width asked
    every = Buckets.of_values(lat[t >= an.window[0]])
    for pc in an.percentiles:
        if pc.value is None or pc.high is None:
            continue
        truth = every.value_at(pc.p)
        assert pc.value == pytest.approx(truth, rel=0.01) and pc.high >= truth * 0.99, (pc, truth)
    # The interval spans both readings: the 2 ms after each stall may be the target's own, or the
    # burst the stall sent queueing at it — a request due late in a stall carries all of the
    # stall in its busy period, so the busy rule bounds it by its latency less 5 ms (≤ the floor).
    for a in (floor, an):
        p99 = next(pc for pc in a.percentiles if pc.p == 99)
        assert p99.value > 2_000_000 and p99.low < 100_000, (a.delayed.rule, p99)
    hp = an.host_pauses
    assert hp["paused_both"] and hp["with_target_stall"] == 13 and "paused the client and the target" in hp["note"]
    assert hp["note"] in check(an, "stalls").detail and check(an, "stalls").ok


def test_the_stalls_check_fails_only_when_the_widening_alone_misses_the_ci(rng):
    s, _ = make_run(rng, n=100_000)
    t = s["intended_ns"].astype(np.int64)
    # 0.6 % of requests sent late by 3 ms stalls: p99's low end drops towards p98.4.
    stalls = [(int(k * 2.5e8), int(k * 2.5e8 + 3e6)) for k in range(1, 20)]
    for a, b in stalls:
        hit = (t >= a) & (t < b)
        s["latency_ns"][hit] += (b - t[hit]).astype(np.uint64)
        s["flags"][hit] |= np.uint32(Flag.ENGINE_STALL)
    loose = run_analysis(s, stalls=stalls, precision=Precision(ci_ns=10e6))
    pc = loose.target
    sampling, total = pc.sampling_high - pc.sampling_low, pc.high - pc.low
    assert pc.widening > 0 and total > sampling
    assert check(loose, "stalls").ok and check(loose, "confidence").ok
    # A width between sampling alone and the widened interval: the stalls check fails and says so,
    # the confidence check passes (more samples cannot help).
    between = run_analysis(s, stalls=stalls, precision=Precision(ci_ns=(sampling + total) / 2),
                           setting=Setting(poll="block", own_cpus=True, engine_cpus=(1,)))
    c = check(between, "stalls")
    # Precision, not validity (issue 32): the run is imprecise, its intervals sound.
    assert not c.ok and between.state == "confidence" and check(between, "confidence").ok
    assert between.verdict() == "imprecise" and between.precision["width"]["dominated_by"] == "client-stalls"
    assert between.precision["remedy"]["kind"] == "quieter-host"
    assert c.detail.startswith("p99 lies in [") and "delayed by the client's own stalls" in c.detail
    remedy = remedy_words(c.remedy)
    assert "--poll spin" in remedy and "CPUs of their own" not in remedy and "(1)" in remedy
    # Narrower than sampling alone and the widening small: the confidence check's (run longer).
    tight = run_analysis(s, stalls=stalls, precision=Precision(ci_ns=sampling / 2))
    assert pc.widening < sampling / 2  # (seeded: 13 µs against 788 µs)
    assert check(tight, "stalls").ok and not check(tight, "confidence").ok
    # --keep-stalls: the delayed requests as measured, the interval sampling's alone.
    kept = run_analysis(s, stalls=stalls, bound=False, precision=Precision(ci_ns=(sampling + total) / 2))
    assert kept.target.low == kept.target.sampling_low and check(kept, "stalls").ok
    assert "kept as measured (--keep-stalls)" in check(kept, "stalls").detail


def test_a_remedy_never_recommends_what_is_already_so():
    done = client_words(Setting(poll="spin", own_cpus=True, isolated=True, engine_cpus=(1,), local_target=False), 99)
    assert "--poll spin" not in done and "CPUs of their own" not in done and "isolate" not in done
    assert "another machine" not in done and "lower --percentile than p99" in done
    todo = client_words(Setting(poll="block", own_cpus=False, isolated=False, local_target=True), 99.9)
    assert "--poll spin" in todo and "CPUs of their own" in todo and "isolcpus" in todo and "another machine" in todo
    assert "another machine" not in client_words(Setting(builtin=True, local_target=True), 99)


def test_host_pauses_are_counted_by_overlap():
    engine = [(100, 200), (1_000, 1_100), (5_000, 5_050)]
    target = [(150, 400), (4_000, 5_010)]
    hp = host_pauses(engine, target, None, 0, 10_000, 99.0)
    assert hp["with_target_stall"] == 2 and hp["engine_stalls"] == 3 and hp["paused_both"]
    assert not host_pauses(engine, [], None, 0, 10_000, 99.0)["paused_both"]


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
    plan = RunPlan(Precision(ci_rel=0.5), rate_rps=RATE, arrival="exp", conns=16, outstanding=4, sample_every=1,
                   late_ns=50_000)
    a = analyse(AnalysisInput(
        plan, s, {"intended": len(s), "sent": len(s), "received": len(s), "late": 0, "never_sent": 0, "errors": 0,
                  "timeouts": 0},
        elapsed_s=t[-1] / 1e9, received_in_window=len(s), rng=np.random.default_rng(1), end_ns=int(t[-1]) + 1,
        every_request=lambda f, l: Buckets.of_values(every_lat[(t >= f * INTERVAL_NS) & (t < l * INTERVAL_NS)])))
    c = check(a, "consistency")  # … but none of them among the samples
    assert not c.ok and "every request" in c.detail, c


# --- the property -----------------------------------------------------------------------------

@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(burst_at=st.floats(0.05, 0.95), burst_ms=st.sampled_from([1, 5, 20, 100]),
       stall_at=st.lists(st.floats(0.0, 1.0), max_size=6), stall_ms=st.sampled_from([0.3, 1, 4]),
       near=st.sampled_from(["before", "after", "anywhere", "over"]), seed=st.integers(0, 2**32 - 1))
def test_the_interval_never_misses_the_targets_own_percentile(burst_at, burst_ms, stall_at, stall_ms, near, seed):
    """Whatever tool stalls (anywhere, next to a target burst, or over it) and target bursts: the
    target's own percentile — over every request in the window, at its latency without the tool's
    delays — lies in the interval, widened to 99.9 % on the same effective sizes (a tolerance for
    40 examples × 5 percentiles). A run that ends not-measurable claims no number and passes."""
    rng = np.random.default_rng(seed)
    n = 40_000
    span = n * GAP_NS
    a = int(0.1 * span + burst_at * 0.85 * span)
    burst = (a, a + int(burst_ms * 1e6))
    d = int(stall_ms * 1e6)
    stalls = {"before": [(burst[0] - d - 1_000, burst[0] - 1_000)], "after": [(burst[1] + 1_000, burst[1] + 1_000 + d)],
              "over": [(burst[0], burst[0] + d)], "anywhere": []}[near]
    stalls += [(int(x * span), int(x * span) + d) for x in stall_at]
    stalls = sorted((max(x, 0), y) for x, y in stalls)
    s, true = make_run(rng, n=n, burst=burst, stalls=stalls)
    t = s["intended_ns"].astype(np.int64)
    for rule in ("busy", "floor"):
        an = run_analysis(s, stalls=stalls, bounds=rule)
        assert an.delayed.rule == rule
        w0, end = an.window
        inside = (t >= w0) & (t < end)
        truth = np.sort(true[inside])
        flags = s["flags"][inside]
        lat = s["latency_ns"][inside].astype(np.int64)
        floor = an.delayed.floor_ns
        if rule == "busy":
            lower = busy_lower_bounds(lat, t[inside], s["busy_from_ns"][inside].astype(np.int64), stall_union(stalls),
                                      floor)
        else:
            lower = lower_bounds(lat, (flags & Flag.ENGINE_STALL) != 0, (flags & Flag.INFLATED) != 0,
                                 s["inflation_ns"][inside], floor)
        # The floor is the least latency of the requests not delayed: a delayed one's own draw can lie
        # below it (chance 1/n each, a fraction of a ns here), which moves no percentile.
        assert (lower <= lat).all() and (lower <= np.maximum(true[inside], floor)).all(), f"{rule}: a lower bound above the truth"
        for pc in an.percentiles:
            if not pc.supported:
                continue
            want = truth[max(int(np.ceil(pc.p / 100 * len(truth))), 1) - 1]
            low = percentile_ci(np.sort(lower), pc.p, 0.999, n_eff=pc.n_effective).low
            high = percentile_ci(np.sort(lat), pc.p, 0.999, n_eff=pc.n_effective).high
            assert (low is None or low <= want) and (high is None or want <= high), (rule, pc, want, burst, stalls)


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
