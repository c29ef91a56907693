"""The per-request bounds of stats/bounds.py (issue 32): exact arithmetic on hand-made cases, and
the coverage of the reported interval on a simulated client in front of a FIFO target
(tests/support/clientsim.py: 8 × 4 slots, send 2 µs, read 1 µs a request, service mean 100 µs).

Coverage. Each cell — M/D/1, M/M/1 and bimodal, at 20, 50 and 80 % load, the client stalling
(2–5 ms) at random 10 times a second or at the target's slow moments — runs ``REPS`` repetitions of
``SPAN_S`` seconds (long enough at 80 % load for p99's effective sample to reach the 368 an
interval needs in most runs). Each repetition's interval of p50, p90 and p99 (``bounded_percentile``,
95 %, upper = the measured latency, lower = ``busy_lower_bounds``) is judged against the population
quantile of the undelayed system (one undelayed run of 1 M requests per service and load; its own
error, a few per cent of p99 at 80 % load, is far inside the intervals). A repetition whose data
support no interval (the percentile unsupported: too few effective samples) claims nothing: it is
counted apart, and must stay rare (≤ 10 % pooled) so that leaving it out does not hollow the test.

Binomial noise, honestly: a method whose coverage is exactly 95 % misses Binomial(m, 0.05) of m
intervals, so the test accepts what such a method would produce with probability ≥ 99 % and no
more: pooled over the 18 cells (m ≈ 360 a percentile) at most the 0.99 quantile of that binomial
(28 misses, 92.2 %); per cell (m ≤ 20) at most its 0.999 quantile (5) — a gross failure, as the
floor rule's in the issue's cell (0 of 8 at p99), cannot pass. Seeds are fixed, so the figures
are reproducible; `pytest -s` prints them. Per request, the bound the derivation proves,
``U − |Σ ∩ [B, R)|``, must hold for every simulated request without exception (the floor on top
of it is empirical and may not).

The floor rule misses: in the issue's cell (M/D/1, 50 % load, random stalls) its p99 interval
misses the undelayed truth in most seeds, because of the victims it counts as exact. A target
freeze of 200 ms with a 3 ms client stall inside: the new rule keeps p99's lower end above
100 ms where the floor rule drops it to the floor.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy.stats import binom

from support import clientsim as cs
from tailwise.stats.bounds import (INFLATION_SATURATED, bounded_percentile, busy_lower_bounds, lower_bounds,
                                   stall_time, stall_union)

PS = (50.0, 90.0, 99.0)
LOADS = (0.2, 0.5, 0.8)
WHERE = ("random", "slow")
SPAN_S = {0.2: 5.0, 0.5: 5.0, 0.8: 12.0}
REPS = 20
CELLS = [(kind, load, where) for kind in cs.KINDS for load in LOADS for where in WHERE]
MS = 1_000_000


# Exact arithmetic

def test_the_union_merges_overlapping_touching_and_unsorted_windows():
    u = stall_union([(50, 60), (10, 20), (15, 30), (30, 35), (5, 5), (70, 65), (12, 18)])
    assert u.dtype == np.int64 and u.tolist() == [[10, 35], [50, 60]]
    assert stall_union([]).shape == (0, 2)


def test_stall_time_is_the_measure_of_the_intersection():
    u = stall_union([(10, 20), (15, 30), (50, 60)])  # [10, 30) ∪ [50, 60)
    a = np.array([0, 12, 25, 31, 55, 0, 40, 70, 20])
    b = np.array([100, 14, 52, 45, 58, 10, 50, 80, 10])
    # whole; inside one; straddling a's window and b's; between; inside the second; ending at a
    # window's start; ending at one's start; after all; b before a.
    assert stall_time(u, a, b).tolist() == [30, 2, 7, 0, 3, 0, 0, 0, 0]
    assert stall_time(u, a, b).dtype == np.int64
    assert stall_time(stall_union([]), a, b).tolist() == [0] * len(a)


def test_busy_lower_bounds_count_the_stalls_since_the_busy_period_began():
    u = stall_union([(1_000, 4_000), (3_000, 5_000)])  # overlapping: one stall [1000, 5000)
    lat = np.array([6_000, 2_000, 700, 3_000, 1_500, 200])
    t = np.array([500, 5_200, 6_000, 2_000, 4_500, 10_000])
    busy = np.array([0, 0, 6_000, 1_500, 4_500, 10_000])
    low = busy_lower_bounds(lat, t, busy, u, floor=150.0)
    # 0: spans the whole stall: 6000 − 4000. 1: a victim, due after the stall's end, busy since
    # before it: the whole stall counts, 2000 − 4000 → the floor ([t, R) alone would count none).
    # 2: busy period after the stall: exact. 3: B straddled (1500 in the stall): 3000 − 3500 → the
    # floor. 4: R straddles the stall's end: 1500 − 500. 5: no stall, U below the floor: exact.
    assert low.tolist() == [2_000, 150, 700, 150, 1_000, 200]
    assert stall_time(u, t[1:2], t[1:2] + lat[1:2]).tolist() == [0]
    assert (low <= lat).all() and (low >= np.minimum(150, lat)).all()
    assert busy_lower_bounds(lat, t, busy, stall_union([]), 150.0).tolist() == lat.tolist()


def test_a_saturated_inflation_gives_the_floor():
    lat = np.array([5_000_000_000, 5_000_000_000, 40_000])
    infl = np.array([INFLATION_SATURATED, 1_000_000_000, 0], dtype=np.uint32)
    low = lower_bounds(lat, np.zeros(3, bool), np.array([True, True, False]), infl, 25_000.0)
    assert low.tolist() == [25_000, 4_000_000_000, 40_000]


def test_busy_from_is_the_start_of_the_clients_busy_period():
    t = np.array([0, 10, 30, 100, 105, 200])
    read = np.array([20, 35, 40, 110, 250, 210])
    # 0 idle before; 10 while 0 is out; 30 while 1 is out; 100 idle (all read by 40); 105 busy;
    # 200 while 4 is still out.
    assert cs.busy_from(t, read).tolist() == [0, 0, 0, 100, 100, 100]


def test_the_loop_and_the_vectorised_recursion_agree_without_stalls():
    rng = np.random.default_rng(5)
    for kind in cs.KINDS:
        t, s = cs.arrivals(rng, 0.9, 20_000), cs.service_times(rng, kind, 20_000)
        a, b = cs.simulate(t, s), cs.undelayed(t, s)
        assert np.array_equal(a.sent, b.sent) and np.array_equal(a.read, b.read)


# Coverage

def _cell(kind: str, load: float, where: str, truth: dict) -> dict:
    """REPS repetitions of one cell: per percentile, covered and supported counts; per request,
    the proven bound checked and the floor's exceptions counted."""
    i = CELLS.index((kind, load, where))
    covered, supported = dict.fromkeys(PS, 0), dict.fromkeys(PS, 0)
    bounded = n = below_floor = stalls = 0
    for r in range(REPS):
        rep = cs.repetition(kind, load, where, 100_000 + 1_000 * i + r, SPAN_S[load])
        lat = rep.run.latency
        assert (rep.truth <= lat).all() and (rep.raw_lower <= rep.truth).all()
        below_floor += int(np.count_nonzero(rep.lower > rep.truth))
        bounded, n, stalls = bounded + int(np.count_nonzero(rep.lower < lat)), n + len(lat), stalls + len(rep.run.stalls)
        for p, j in cs.judge(lat, rep.lower, truth).items():
            supported[p] += j["supported"]
            covered[p] += bool(j["covered"])
    return {"covered": covered, "supported": supported, "bounded": bounded / n, "below_floor": below_floor,
            "stalls_per_s": stalls / REPS / SPAN_S[load]}


def test_the_interval_covers_the_undelayed_truth():
    t0 = time.perf_counter()
    truths = {(k, ld): cs.truth_quantiles(k, ld, PS, n=1_000_000) for k in cs.KINDS for ld in LOADS}
    cells = {c: _cell(*c, truths[c[:2]]) for c in CELLS}
    print(f"\n{'cell':24} stalls/s bounded  " + "  ".join(f"p{p:g} cov/supp" for p in PS) + "  floor exceptions")
    for (kind, load, where), c in cells.items():
        print(f"{kind:8} {load:.1f} {where:7} {c['stalls_per_s']:7.1f} {c['bounded']:7.2%}  "
              + "  ".join(f"{c['covered'][p]:5}/{c['supported'][p]:<5}" for p in PS) + f"  {c['below_floor']}")
        for p in PS:
            m = c["supported"][p]
            assert m - c["covered"][p] <= binom.ppf(0.999, m, 0.05), ((kind, load, where), p, c)
    for p in PS:
        m = sum(c["supported"][p] for c in cells.values())
        miss = m - sum(c["covered"][p] for c in cells.values())
        allowed = binom.ppf(0.99, m, 0.05)
        print(f"p{p:g}: pooled coverage {1 - miss / m:.1%} of {m} supported intervals ({miss} misses, "
              f"≤ {allowed:.0f} allowed); unsupported {1 - m / (REPS * len(CELLS)):.1%}")
        assert miss <= allowed and m >= 0.9 * REPS * len(CELLS), (p, miss, m)
    print(f"{time.perf_counter() - t0:.1f} s")


def test_the_floor_rule_misses_the_victims_the_busy_period_rule_covers():
    """The issue's cell: M/D/1 at 50 % load, random stalls, 8 seeds."""
    truth = cs.truth_quantiles("fixed", 0.5, PS, n=1_000_000)
    new, old = dict.fromkeys(PS, 0), dict.fromkeys(PS, 0)
    for r in range(8):
        rep = cs.repetition("fixed", 0.5, "random", 32_000 + r, 5.0)
        lat = rep.run.latency
        floor_rule, victims = rep.floor_rule()
        late_by = (lat - rep.truth)[floor_rule == lat].max()
        jn, jo = cs.judge(lat, rep.lower, truth), cs.judge(lat, floor_rule, truth)
        print(f"\nseed {r}: victims {victims / len(lat):.2%}, up to {late_by / 1e3:,.0f} µs late; p99 truth "
              f"{truth[99.0] / 1e3:,.0f} µs, busy-period rule [{jn[99.0]['low'] / 1e3:,.0f}, "
              f"{jn[99.0]['high'] / 1e3:,.0f}], floor rule [{jo[99.0]['low'] / 1e3:,.0f}, {jo[99.0]['high'] / 1e3:,.0f}]",
              end="")
        for p in PS:
            new[p] += bool(jn[p]["covered"])
            old[p] += bool(jo[p]["covered"])
    print(f"\ncovered of 8 — busy-period rule {new}, floor rule {old}")
    assert old[99.0] <= 2 and old[90.0] <= 2
    assert all(new[p] >= 7 for p in PS)


@pytest.mark.parametrize("kind", cs.KINDS)
def test_a_client_stall_inside_a_freeze_keeps_the_freeze_in_the_lower_end(kind):
    """Ten 200 ms freezes of the target, 4 s apart, a 3 ms client stall 20 ms into each, 50 %
    load: p99's interval starts above 100 ms with the busy-period rule; the floor rule, which
    flags the whole backlog behind the stall, drops it to the floor."""
    rng = np.random.default_rng(7)
    n = 200_000
    t, s = cs.arrivals(rng, 0.5, n), cs.service_times(rng, kind, n)
    start = np.arange(10) * 4_000 * MS + 2_000 * MS
    freezes = np.column_stack([start, start + 200 * MS])
    run = cs.simulate(t, s, stalls=np.column_stack([start + 20 * MS, start + 23 * MS]), freezes=freezes)
    rep = cs.bounds_of(run, cs.simulate(t, s, freezes=freezes).latency)
    lat = run.latency
    assert (rep.raw_lower <= rep.truth).all() and (rep.truth <= lat).all()
    truth = float(np.quantile(rep.truth, 0.99, method="inverted_cdf"))
    new, _ = bounded_percentile(lat, rep.lower, 99.0)
    old, _ = bounded_percentile(lat, rep.floor_rule()[0], 99.0)
    print(f"\n{kind}: p99 of the undelayed run {truth / MS:.1f} ms; busy-period rule [{new.low / MS:.1f}, "
          f"{new.high / MS:.1f}] ms; floor rule [{old.low / MS:.3f}, {old.high / MS:.1f}] ms")
    assert new.low > 100 * MS and new.low <= truth <= new.high
    assert old.low < 2 * MS
