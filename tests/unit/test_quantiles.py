"""The order-statistic CI, checked against scipy.stats (binom, quantile_test) and exact arithmetic."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from tailwise.stats.quantiles import order_statistic_ranks, percentile_ci, percentiles


@pytest.mark.parametrize("n,q", [(100, 0.5), (1_000, 0.9), (10_000, 0.99), (50_000, 0.999), (368, 0.99), (37, 0.25)])
def test_ranks_are_the_equal_tailed_binomial_ones(n, q):
    j, k = order_statistic_ranks(n, q, 0.95)
    b = stats.binom(n, q)
    if j is not None:
        assert b.cdf(j - 1) <= 0.025 < b.cdf(j)  # largest j with P(B <= j-1) <= α/2
    if k is not None:
        assert b.cdf(k - 1) >= 0.975 > b.cdf(k - 2)  # smallest k with P(B <= k-1) >= 1-α/2
    if j is not None and k is not None:
        assert b.cdf(k - 1) - b.cdf(j - 1) >= 0.95  # coverage P(j <= B <= k-1)


def test_lancet_example_is_close_to_exact():
    # Lancet §2.3: n = 10,000, p99, 95 %: j = 9880, k = 9921 by the normal approximation.
    j, k = order_statistic_ranks(10_000, 0.99, 0.95)
    assert abs(j - 9880) <= 2 and abs(k - 9921) <= 2


@pytest.mark.parametrize("p,need", [(0.99, 368), (0.999, 3_688), (0.9999, 36_887)])
def test_upper_bound_appears_exactly_at_the_minimum_sample_count(p, need):
    assert need == math.ceil(math.log(0.025) / math.log(p))
    assert order_statistic_ranks(need - 1, p)[1] is None
    assert order_statistic_ranks(need, p)[1] == need


@pytest.mark.parametrize("q", [0.5, 0.9, 0.99])
def test_matches_scipy_quantile_test_on_known_data(q):
    x = np.arange(1.0, 2001.0)  # 1..2000: the exact q-quantile is x(ceil(nq))
    pc = percentile_ci(x, q * 100, 0.95)
    assert pc.value == math.ceil(q * 2000)
    ci = stats.quantile_test(x, q=pc.value, p=q).confidence_interval(0.95)
    assert (pc.low, pc.high) == (ci.low, ci.high)


def test_too_few_samples_give_null_not_zero():
    # p99.99 from 100 samples is unsupported: no value, no upper bound, and how many would bound
    # it. The lower bound stands alone: all 100 lie below p99.99 with probability 0.9999¹⁰⁰ ≈ 0.99
    # ≥ 97.5 %, so the largest of them is a one-sided bound.
    x = np.sort(np.random.default_rng(1).exponential(size=100))
    p = percentile_ci(x, 99.99)
    assert p.value is None and p.low is None and p.high is None and not p.supported
    assert p.lower_bound == x[-1] and p.floor == x[-1]
    assert p.samples_needed == 36_887
    assert p.as_json()["value_ns"] is None and p.as_json()["samples_needed"] == 36_887
    assert percentile_ci(np.array([]), 50).as_json() == {
        "p": 50, "value_ns": None, "low_ns": None, "high_ns": None,
        "n_effective": None, "samples_needed": 6, "censored": False,
        "value_low_ns": None, "sampling_low_ns": None, "sampling_high_ns": None, "lower_bound_ns": None}


def test_coverage_is_at_least_the_confidence_on_iid_data():
    # 2,000 repetitions of 1,000 iid Exp(1) draws: the 95 % CI of p90 must cover -ln(0.1).
    rng = np.random.default_rng(7)
    truth = -math.log(0.1)
    cover = sum(
        (lambda pc: pc.low <= truth <= pc.high)(percentile_ci(np.sort(rng.exponential(size=1_000)), 90.0))
        for _ in range(2_000)
    )
    # Exact intervals are conservative: coverage ≥ 95 % up to binomial noise (s.d. 0.5 %).
    assert cover / 2_000 >= 0.94


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=10**9), min_size=1, max_size=3_000),
       st.sampled_from([50.0, 90.0, 99.0, 99.9]))
def test_value_always_inside_its_interval(data, p):
    for pc in percentiles(np.array(data), [p]):
        if pc.value is None:  # unsupported: nothing reported
            assert not pc.supported and pc.samples_needed > len(data)
            continue
        assert pc.low <= pc.value <= pc.high


def test_an_unsupported_percentile_keeps_its_one_sided_lower_bound():
    """The lower rank is exact arithmetic on Binomial(n, q): the largest j with F(j − 1) ≤ α/2."""
    x = np.arange(1.0, 10_001.0)  # 1..10,000: x(r) = r
    pc = percentile_ci(x, 99.99)  # the upper bound needs 36,887
    j = max(r for r in range(1, 10_001) if stats.binom.cdf(r - 1, 10_000, 0.9999) <= 0.025)
    assert pc.value is None and pc.low is None and pc.high is None and pc.lower_bound == j
    assert j == 9_997  # P(at most 2 of 10,000 above p99.99) = 0.92..., 3 = 0.981


def test_the_one_sided_lower_bound_covers():
    """Over 4,000 draws of 1,000 exponentials, the lower bound of p99.9 (unsupported: the upper needs
    3,688) lies at or below the true quantile in ≥ 97.5 % of them (binomial slack of 3σ)."""
    rng = np.random.default_rng(7)
    truth = -math.log(1 - 0.999)
    hits = 0
    for _ in range(4_000):
        pc = percentile_ci(np.sort(rng.exponential(size=1_000)), 99.9)
        assert pc.value is None and pc.lower_bound is not None
        hits += pc.lower_bound <= truth
    assert hits / 4_000 >= 0.975 - 3 * math.sqrt(0.975 * 0.025 / 4_000)
