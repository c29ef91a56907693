"""stats/special.py, stats/unitroot.py and the numpy tests of stats/arrivals.py give what SciPy and
statsmodels give (the references they replace, so that a run imports neither)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy import special as sp
from scipy import stats

from tailwise.stats import arrivals, special, unitroot
from tailwise.stats.independence import indicator_acf


def test_binomial_cdf_sf_and_quantile_agree_with_scipy():
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(10 ** rng.uniform(0, 6.3))
        p = float(rng.choice([0.5, 0.9, 0.99, 0.999, 0.9999, 0.01, rng.uniform()]))
        k = int(rng.integers(0, n + 1))
        assert special.binom_cdf(k, n, p) == pytest.approx(stats.binom.cdf(k, n, p), abs=1e-10)
        assert special.binom_sf(k, n, p) == pytest.approx(stats.binom.sf(k, n, p), rel=1e-7, abs=1e-300)
        # The levels an interval asks for (α/2, 1 − α/2); not q = 0.5 at p = 0.5, where F(m) = q
        # exactly for odd n and either side of the tie is rounding.
        for q in (0.0005, 0.005, 0.025, 0.975, 0.995, 0.9995):
            assert special.binom_ppf(q, n, p) == int(stats.binom.ppf(q, n, p)), (q, n, p)


def test_betainc_and_normal_cdf_agree_with_scipy():
    rng = np.random.default_rng(6)
    for _ in range(300):
        a, b = 10 ** rng.uniform(-1, 5, 2)
        x = float(rng.uniform())
        assert special.betainc(a, b, x) == pytest.approx(sp.betainc(a, b, x), rel=1e-8, abs=1e-14)
    for z in np.linspace(-8, 8, 33):
        assert special.norm_cdf(z) == pytest.approx(stats.norm.cdf(z), rel=1e-12, abs=1e-300)


def _series(rng, i: int) -> np.ndarray:
    n = int(rng.integers(20, 201))
    kind = i % 3
    if kind == 0:
        return rng.normal(size=n)
    if kind == 1:
        return np.cumsum(rng.normal(size=n))
    return rng.exponential(size=n) + np.linspace(0, rng.uniform(0, 3), n)


def test_kpss_and_adf_agree_with_statsmodels():
    from statsmodels.tsa.stattools import adfuller, kpss

    rng = np.random.default_rng(7)
    for i in range(150):
        x = _series(rng, i)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for nlags in ("auto", "legacy"):
                ref = kpss(x, regression="c", nlags=nlags, result_object=True)
                assert unitroot.kpss(x, nlags) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-9, abs=1e-12)
            maxlag = min(10, len(x) // 4)
            ref = adfuller(x, maxlag=maxlag, regression="c", autolag="AIC", result_object=True)
        stat, p, lags = unitroot.adfuller(x, maxlag)
        assert lags == ref.lags
        assert (stat, p) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-7, abs=1e-12)
    with pytest.raises(ValueError):
        unitroot.adfuller(np.ones(50), 5)


def test_gap_tests_and_acf_agree_with_scipy():
    rng = np.random.default_rng(8)
    for i in range(40):
        x = rng.exponential(size=int(rng.integers(50, 3000))) * (1 + (i % 4 == 0) * rng.uniform(size=1))
        ref = stats.anderson(x, dist="expon", method="interpolate")
        assert arrivals.anderson_expon(x) == pytest.approx((ref.statistic, ref.pvalue), rel=1e-10)
        ks = stats.kstest(x, "expon", args=(0.0, float(np.mean(x)))).statistic
        assert arrivals.ks_expon(x) == pytest.approx(ks, rel=1e-12)
        y = rng.exponential(size=int(rng.integers(50, 3000)))
        assert arrivals.wasserstein1(x, y) == pytest.approx(stats.wasserstein_distance(x, y), rel=1e-10)
    from scipy import signal

    lat = rng.exponential(size=5_000)
    q = np.percentile(lat, 99, method="inverted_cdf")
    d = (lat <= q).astype(float) - (lat <= q).mean()
    c = signal.correlate(d, d, mode="full", method="fft")[len(d) - 1:len(d) + 50]
    assert indicator_acf(lat, 99, 50) == pytest.approx(c / c[0], abs=1e-12)
