"""Unit tests of tailwise.stats: independence, percentile intervals with an effective sample size
and censored samples, the arrivals criteria, stationarity and the tail-transient test.

Synthetic data with known answers; every generator has a fixed seed.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hst
from scipy.signal import lfilter

from tailwise.stats.independence import independence
from tailwise.stats.quantiles import (
    Percentile,
    estimate_percentile,
    order_statistic_ranks,
    percentile_ci,
    samples_needed,
)

SEED = 20261123
LATE_NS = 50_000  # the engine's default late threshold


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


def ar1(n: int, phi: float, rng: np.random.Generator) -> np.ndarray:
    return lfilter([1.0], [1.0, -phi], rng.normal(size=n))


# --- independence -----------------------------------------------------------------------------

def test_iid_has_tau_one_and_keeps_every_sample(rng):
    ind = independence(rng.exponential(size=50_000), 99)
    assert ind.ok and abs(ind.tau - 1) < 0.1 and ind.step == max(1, math.ceil(ind.tau))
    assert ind.n == 50_000 and ind.n_effective == pytest.approx(50_000 / ind.tau)
    assert "τ =" in ind.detail and "n_eff ≈" in ind.detail and "of 50,000" in ind.detail


@pytest.mark.parametrize("phi", [0.5, 0.9])
def test_ar1_median_indicator_tau_matches_theory(rng, phi):
    # The median indicator of a Gaussian AR(1) has correlation (2/π)·asin(φ^k) at lag k.
    x = ar1(200_000, phi, rng)
    theory = 1 + 2 * sum(2 / math.pi * math.asin(phi ** k) for k in range(1, 2_000))
    ind = independence(x, 50)
    assert ind.ok and abs(ind.tau - theory) < 0.1 * theory, (ind.tau, theory)
    assert ind.step == math.ceil(ind.tau) and ind.lags >= 1
    assert ind.rho_lag1 == pytest.approx(2 / math.pi * math.asin(phi), abs=0.02)


def test_correlation_beyond_reach_is_not_ok(rng):
    x = np.repeat(rng.normal(size=20), 500)  # 20 long plateaus
    ind = independence(x, 90)
    assert not ind.ok and "stays correlated" in ind.detail


def test_too_few_or_constant_samples_do_not_raise():
    few = independence(np.arange(50.0), 99)
    assert not few.ok and "too few" in few.detail and few.step == 1
    const = independence(np.full(1_000, 7.0), 99)
    assert const.ok and const.tau == 1.0


# --- percentiles: samples needed, effective sample size ----------------------------------------

@pytest.mark.parametrize("p,need", [(99.0, 368), (99.9, 3_688), (99.99, 36_887), (50.0, 6), (1.0, 368)])
def test_samples_needed_is_the_first_n_with_both_bounds(p, need):
    assert samples_needed(p, 0.95) == need
    assert None in order_statistic_ranks(need - 1, p / 100)
    assert None not in order_statistic_ranks(need, p / 100)


def test_n_eff_at_or_above_n_is_the_iid_interval(rng):
    x = np.sort(rng.exponential(size=5_000))
    iid = percentile_ci(x, 90)
    for n_eff in (None, 5_000, 1e9, float("inf")):
        pc = percentile_ci(x, 90, n_eff=n_eff)
        assert (pc.value, pc.low, pc.high) == (iid.value, iid.low, iid.high)


def test_n_eff_carries_the_ranks_by_quantile_level():
    x = np.arange(1.0, 10_001.0)  # x(r) = r
    pc = percentile_ci(x, 90, n_eff=1_000)
    j, k = order_statistic_ranks(1_000, 0.9)
    assert (pc.low, pc.high) == (math.ceil(j * 10), math.ceil(k * 10))
    assert pc.value == 9_000 and pc.n_effective == 1_000
    iid = percentile_ci(x, 90)
    assert pc.low < iid.low and pc.high > iid.high  # wider, about √10 times
    assert 2.5 < (pc.high - pc.low) / (iid.high - iid.low) < 3.8


@settings(max_examples=200, deadline=None)
@given(hst.lists(hst.integers(min_value=1, max_value=10**9), min_size=1, max_size=3_000),
       hst.sampled_from([50.0, 90.0, 99.0, 99.9]), hst.floats(min_value=0.001, max_value=1.0))
def test_value_inside_the_widened_interval(data, p, share):
    x = np.sort(np.array(data, dtype=float))
    pc = percentile_ci(x, p, n_eff=share * len(x))
    if pc.value is None:
        assert not pc.supported and pc.samples_needed > round(share * len(x))
    else:
        assert pc.low <= pc.value <= pc.high


def test_too_few_effective_samples_make_the_percentile_unsupported(rng):
    x = np.sort(rng.exponential(size=10_000))
    pc = percentile_ci(x, 99, n_eff=300)  # 10,000 samples but only 300 effective: p99 needs 368
    assert pc.value is None and pc.low is None and pc.high is None and not pc.supported
    assert pc.samples_needed == 368 and pc.n_effective == 300
    js = pc.as_json()
    assert js["value_ns"] is None and js["samples_needed"] == 368 and js["n_effective"] == 300


def test_percentile_defaults_keep_old_calls_working():
    pc = Percentile(99.0, 1.0, 0.5, 2.0)
    assert pc.supported and pc.n_effective is None and pc.samples_needed is None and not pc.at_least
    assert pc.as_json() == {"p": 99.0, "value_ns": 1, "low_ns": 0, "high_ns": 2, "n_effective": None,
                            "samples_needed": None, "censored": False}


def test_estimate_percentile_widens_by_the_autocorrelation(rng):
    x = ar1(100_000, 0.9, rng)
    pc, ind = estimate_percentile(x, 90, 0.95)
    naive = percentile_ci(np.sort(x), 90)
    assert ind.ok and ind.tau > 5 and pc.n_effective == pytest.approx(ind.n_effective)
    assert pc.value == naive.value
    assert pc.high - pc.low > 2 * (naive.high - naive.low)
    iid, ind_iid = estimate_percentile(rng.exponential(size=20_000), 99, 0.95)
    assert iid.supported and ind_iid.tau < 1.2


def test_estimate_percentile_when_independence_cannot_be_judged(rng):
    plateaus = np.repeat(rng.normal(size=20), 500)
    pc, ind = estimate_percentile(plateaus, 90, 0.95)
    assert not ind.ok and pc.value is not None and pc.low is None and pc.high is None
    few, ind_few = estimate_percentile(rng.exponential(size=50), 99, 0.95)  # p99 needs 368
    assert few.value is None and few.samples_needed == 368 and not ind_few.ok
    small, _ = estimate_percentile(rng.exponential(size=50), 50, 0.95)  # too few to judge, enough for p50
    assert small.value is not None and small.low is None and small.samples_needed is None


def test_censored_samples(rng):
    x = rng.exponential(10_000, 20_000)
    base, _ = estimate_percentile(x, 90, 0.95)
    cens = np.zeros(len(x), dtype=bool)
    # Censored far above the interval: nothing changes.
    y = x.copy()
    y[:10], cens[:10] = 1e9, True
    far, _ = estimate_percentile(y, 90, 0.95, censored=cens)
    assert far.supported and not far.at_least and far.as_json()["censored"] is False
    # A censored bound between the value and the upper bound: that bound is unknown.
    mid = y.copy()
    mid[0] = 0.5 * (base.value + base.high)
    pc, _ = estimate_percentile(mid, 90, 0.95, censored=cens)
    assert pc.high is None and pc.low is not None and not pc.at_least and pc.value is not None
    # A censored bound below the value: the value is only a lower bound.
    low = y.copy()
    low[0] = 100.0
    pc, _ = estimate_percentile(low, 90, 0.95, censored=cens)
    assert pc.at_least and pc.high is None and pc.low is not None and pc.as_json()["censored"] is True


def test_censored_lower_bound_keeps_its_coverage():
    # 3 % of requests time out at a random point of their true latency; the 95 % interval's lower
    # bound must stay below the true p90 at least 97.5 % of the time (up to binomial noise).
    rng = np.random.default_rng(11)
    truth = -math.log(0.1)
    reps, below = 400, 0
    for _ in range(reps):
        x = rng.exponential(size=2_000)
        cens = rng.random(len(x)) < 0.03
        seen = np.where(cens, x * rng.random(len(x)), x)  # a bound ≤ the true latency
        pc, _ = estimate_percentile(seen, 90, 0.95, censored=cens)
        below += pc.low <= truth
    assert below / reps >= 0.96
