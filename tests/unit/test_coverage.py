"""The property the methodology exists for: its 95 % CI of a percentile covers the true value.

Sojourn-time sequences come from the queueing model (autocorrelated, as real queues are): M/M/1
and a bimodal M/G/1 at 50 % and 80 % load. Each repetition keeps a random 1 in 2 customers (the
engine's sampler), then estimates p50, p90 and p99 from *every* kept sample with the interval
widened by the indicator's autocorrelation (``estimate_percentile``: effective sample size
n/τ_U, τ by Geyer's initial positive sequence and τ_U its one-sided 99 % upper bound,
stats/independence.py, "Carrying τ's own error"). The truth is the closed form for M/M/1 and one
very long simulation for the bimodal queue.

One band for every cell (issue 32): over ``REPS`` = 400 repetitions each of the 12 cells must cover
93–98.5 % — not below (too narrow) and, at p99 as elsewhere, not grossly conservative — and the
i.i.d. interval on the same samples must fall far below. Measured (seeds fixed, printed with
`pytest -s`): coverage in %, the median interval width in µs in brackets, before → after the
bound — "before" being the same interval at τ's estimate n/τ, which the test prints too:

                 p50                    p90                     p99
    M/M/1 ρ=.5   94.2→94.8 (0.37→0.38)  95.8→96.5 (1.49→1.54)   96.5→97.0 (5.50→5.69)
    M/M/1 ρ=.8   93.8→94.8 (1.60→1.69)  91.8→94.0 (7.37→7.84)   95.0→95.5 (27.5→29.5)
    bimod ρ=.5   95.5→96.0 (0.43→0.44)  95.2→96.0 (2.88→3.00)   95.8→96.5 (9.09→9.48)
    bimod ρ=.8   95.8→97.0 (2.65→2.74)  95.5→96.2 (13.7→14.7)   95.5→97.0 (51.7→56.0)

The first 200 of these seeds, which the test used alone before, gave 92.5 and 90.0 % at p50 and
p90 of M/M/1 at 80 % load at τ's estimate — the cells the band once excused (88–99 %). 400
repetitions, not 200: a coverage over m repetitions has a binomial noise of √(0.05·0.95/m), ±1.5 %
at 200 and ±1.1 % at 400, so that a method covering 95.5 % in truth puts some cell of the twelve
below 93 % in ~40 % of seed sets at 200 repetitions and in ~10 % at 400. The test takes ~80 s
instead of ~37 s (the FFTs of each repetition's three autocorrelations dominate).
"""

import math

import numpy as np
import pytest

from tailwise.stats.model import mm1_quantile_ns, model_percentiles, sojourn_sequence
from tailwise.stats.quantiles import estimate_percentile, percentile_ci

REPS = 400
#: Repetitions of each delayed-client cell.
DELAY_REPS = 100
K0 = 2
PS = (50.0, 90.0, 99.0)
CASES = [  # service, load, customers per repetition
    ("exp:10us", 0.5, 200_000),
    ("exp:10us", 0.8, 400_000),
    ("bimodal:10us", 0.5, 200_000),
    ("bimodal:10us", 0.8, 400_000),
]
#: Every cell, every percentile (module doc).
BAND = (0.93, 0.985)


def _truth(service: str, load: float) -> dict[float, float]:
    if service.startswith("exp:"):
        return {p: mm1_quantile_ns(10_000.0, load, p) for p in PS}
    r = model_percentiles(service, load, ps=PS, n=20_000_000, seed=999)
    return {d["p"]: d["value_ns"] for d in r["percentiles"]}


def _covers(pc, truth) -> bool:
    return pc.supported and pc.low <= truth <= pc.high


@pytest.mark.parametrize("service,load,n", CASES)
def test_percentile_ci_coverage(service, load, n):
    truth = _truth(service, load)
    covered = dict.fromkeys(PS, 0)
    at_estimate = dict.fromkeys(PS, 0)
    naive = dict.fromkeys(PS, 0)
    taus = {p: [] for p in PS}
    widths = {p: [] for p in PS}
    widths_at_estimate = {p: [] for p in PS}
    for rep in range(REPS):
        seq = sojourn_sequence(service, load, n=n, seed=10_000 + rep, warmup=50_000)
        rng = np.random.default_rng(rep)
        kept = seq[rng.random(n) < 1.0 / K0]
        s = np.sort(kept)
        for p in PS:
            pc, ind = estimate_percentile(kept, p, 0.95, sorted_x=s)
            assert ind.ok, ind.detail
            assert pc.n_effective == pytest.approx(len(kept) / ind.tau_upper) and ind.tau_upper >= ind.tau
            taus[p].append(ind.tau)
            covered[p] += _covers(pc, truth[p])
            widths[p].append(pc.high - pc.low)
            # The same interval at τ's estimate (n/τ), as before the bound (issue 32): the cost of it.
            est = percentile_ci(s, p, 0.95, n_eff=len(kept) / ind.tau)
            at_estimate[p] += _covers(est, truth[p])
            widths_at_estimate[p].append(est.high - est.low)
            naive[p] += _covers(percentile_ci(s, p, 0.95), truth[p])
    cov = {p: covered[p] / REPS for p in PS}
    print(f"\n{service} at ρ={load}: " + "; ".join(
        f"p{p:g} {truth[p] / 1e3:.1f} µs: coverage {cov[p]:.1%} (median width {np.median(widths[p]) / 1e3:.2f} µs, "
        f"median τ {np.median(taus[p]):.1f}), at τ's estimate {at_estimate[p] / REPS:.1%} "
        f"({np.median(widths_at_estimate[p]) / 1e3:.2f} µs), {naive[p] / REPS:.1%} without" for p in PS))
    for p in PS:
        assert BAND[0] <= cov[p] <= BAND[1], (p, cov[p])
        assert naive[p] / REPS < cov[p] - 0.1


def test_mm1_truth_is_the_closed_form():
    # −ln(1 − p)/(μ − λ) with E[S] = 10 µs at ρ = 0.5: 4.605/0.05 µs⁻¹ = 92.1 µs.
    assert math.isclose(mm1_quantile_ns(10_000.0, 0.5, 99.0), 92_103.4, rel_tol=1e-4)


# --- requests the client delayed (issue 18) ----------------------------------------------------

#: A stall of the client every STALL_EVERY customers on average, DELAYED_PER_STALL customers due in
#: it: ~0.5 % of the requests sent late, a few more outstanding across each stall.
STALL_EVERY, DELAYED_PER_STALL = 4_000, 20
DELAY_CASES = [("exp:10us", 0.5, 200_000, "anywhere"), ("exp:10us", 0.5, 200_000, "slow moments"),
               ("bimodal:10us", 0.5, 200_000, "slow moments")]


def _delayed(seq: np.ndarray, load: float, where: str, rng: np.random.Generator):
    """The measured latencies of a model sequence whose client stalled: (measured, sent late,
    outstanding across, inflation). Customers due in a stall are sent when it ends, as a burst that
    queues at the server (each waits its share of the burst: k · E[S]); those in service when it
    began have their reply read late by what is left of the stall. ``where``: stalls at random
    instants, or starting at the target's slow moments (where the true latency is highest), the
    case where the delays carry the tail."""
    n = len(seq)
    mean_gap = 10_000.0 / load  # E[S] = 10 µs, so customers arrive every E[S]/ρ
    k = rng.poisson(n / STALL_EVERY)
    if where == "anywhere":
        starts = rng.integers(DELAYED_PER_STALL, n - 2 * DELAYED_PER_STALL, k)
    else:
        slow = np.argsort(seq)[::-1][: 20 * k]  # among the slowest customers
        starts = np.clip(rng.choice(slow, k, replace=False), DELAYED_PER_STALL, n - 2 * DELAYED_PER_STALL)
    measured = seq.copy()
    late = np.zeros(n, bool)
    across = np.zeros(n, bool)
    inflation = np.zeros(n)
    for s in np.sort(starts):
        stall_ns = DELAYED_PER_STALL * mean_gap
        due = np.arange(s, s + DELAYED_PER_STALL)
        wait = (s + DELAYED_PER_STALL - due) * mean_gap  # until the stall's end
        measured[due] = seq[due] + wait + np.arange(DELAYED_PER_STALL) * 10_000.0
        late[due] = True
        # Earlier customers still in the system at the stall's start: their reply is read at its end.
        before = np.arange(max(s - 50, 0), s)
        left = seq[before] - (s - before) * mean_gap  # time still to go at the stall's start
        hit = (left > 0) & ~late[before]
        extra = np.maximum(stall_ns - left[hit], 0.0)
        measured[before[hit]] += extra
        across[before[hit]] = extra > 0
        inflation[before[hit]] = extra
    return measured, late, across & ~late, inflation


@pytest.mark.parametrize("service,load,n,where", DELAY_CASES)
def test_the_interval_covers_the_truth_when_the_client_delayed_requests(service, load, n, where):
    """The model's percentile lies in the reported interval — the lower bounds' low end to the
    measured values' high end (stats/bounds.py) — in ≥ 95 % of repetitions, for delays at random
    and for delays that come with the target's slow moments; the widening is printed."""
    from tailwise.stats.bounds import bounded_percentile, floor_ns, lower_bounds

    truth = _truth(service, load)
    covered = dict.fromkeys(PS, 0)
    measured_only = dict.fromkeys(PS, 0)
    widening = {p: [] for p in PS}
    reps = DELAY_REPS
    for rep in range(reps):
        seq = sojourn_sequence(service, load, n=n, seed=20_000 + rep, warmup=50_000)
        rng = np.random.default_rng(rep)
        measured, late, across, infl = _delayed(seq, load, where, rng)
        keep = rng.random(n) < 1.0 / K0
        m, l, a, f = measured[keep], late[keep], across[keep], infl[keep]
        lower = lower_bounds(m, l, a, f, floor_ns(m, ~l & ~a))
        for p in PS:
            pc, _ = bounded_percentile(m, lower, p, 0.95)
            covered[p] += _covers(pc, truth[p])
            measured_only[p] += pc.sampling_low is not None and pc.sampling_low <= truth[p] <= pc.sampling_high
            widening[p].append(pc.widening / max(truth[p], 1.0))
    cov = {p: covered[p] / reps for p in PS}
    print(f"\n{service} at ρ={load}, delays {where}: " + "; ".join(
        f"p{p:g}: coverage {cov[p]:.1%} ({measured_only[p] / reps:.1%} from the measured values alone), "
        f"median widening {np.median(widening[p]):.1%} of the value" for p in PS))
    for p in PS:
        assert cov[p] >= 0.95, (p, cov[p])
