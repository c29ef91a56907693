"""The property the methodology exists for: its 95 % CI of p99 covers the true p99.

Sojourn-time sequences come from the queueing model (autocorrelated, as real queues are): M/M/1
and a bimodal M/G/1 at 50 % and 80 % load. Each repetition keeps a random 1 in 2 customers (the
engine's sampler), then runs the methodology's independence and confidence steps
(``estimate_percentile``). The truth is the closed form for M/M/1 and one very long simulation
for the bimodal queue. With the independence step the coverage must be 93–97 % over 200
repetitions; without it (every sample kept) it falls, which is the point of the step.
Seeds are fixed, so the figures are reproducible; they are printed with `pytest -s`.
"""

import math

import numpy as np
import pytest

from tailwise.methodology.analysis import estimate_percentile
from tailwise.model import mm1_quantile_ns, model_percentiles, sojourn_sequence
from tailwise.stats.quantiles import percentile_ci

REPS = 200
K0 = 2
CASES = [  # service, load, customers per repetition
    ("exp:10us", 0.5, 200_000),
    ("exp:10us", 0.8, 400_000),
    ("bimodal:10us", 0.5, 200_000),
    ("bimodal:10us", 0.8, 400_000),
]


def _truth(service: str, load: float) -> float:
    if service.startswith("exp:"):
        return mm1_quantile_ns(10_000.0, load, 99.0)
    return model_percentiles(service, load, ps=(99.0,), n=20_000_000, seed=999)["percentiles"][0]["value_ns"]


def _covers(pc, truth) -> bool:
    return pc.low is not None and pc.high is not None and pc.low <= truth <= pc.high


@pytest.mark.parametrize("service,load,n", CASES)
def test_p99_ci_coverage(service, load, n):
    truth = _truth(service, load)
    with_step = without_step = 0
    steps = []
    for rep in range(REPS):
        seq = sojourn_sequence(service, load, n=n, seed=10_000 + rep, warmup=50_000)
        rng = np.random.default_rng(rep)
        kept = seq[rng.random(n) < 1.0 / K0]
        pc, ind, _ = estimate_percentile(kept, 99.0, 0.95, rng)
        steps.append(ind.step)
        with_step += _covers(pc, truth)
        without_step += _covers(percentile_ci(np.sort(kept), 99.0, 0.95), truth)
    cov, naive = with_step / REPS, without_step / REPS
    print(f"\n{service} at ρ={load}: true p99 {truth / 1e3:.1f} µs; coverage {cov:.1%} with the independence "
          f"step (median thinning {np.median(steps):.0f}), {naive:.1%} without")
    assert 0.93 <= cov <= 0.97
    assert naive < cov - 0.1


def test_mm1_truth_is_the_closed_form():
    # −ln(1 − p)/(μ − λ) with E[S] = 10 µs at ρ = 0.5: 4.605/0.05 µs⁻¹ = 92.1 µs.
    assert math.isclose(mm1_quantile_ns(10_000.0, 0.5, 99.0), 92_103.4, rel_tol=1e-4)
