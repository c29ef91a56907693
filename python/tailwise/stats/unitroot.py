"""KPSS and augmented Dickey–Fuller tests of a short series, in numpy: what stats/stationarity.py
runs on its window means, the same figures as statsmodels 0.15's ``kpss(x, regression="c",
nlags=…)`` and ``adfuller(x, maxlag=…, regression="c", autolag="AIC")`` (to ~1e-9:
tests/unit/test_special.py) without importing statsmodels (~130 MB resident with the pandas and
SciPy it pulls in; a run's series has at most a few hundred points).

* KPSS (Kwiatkowski, Phillips, Schmidt & Shin, J. Econometrics 54, 1992), level-stationary null:
  η = Σ S_t² / n² over the partial sums S_t of the demeaned series, divided by the Newey–West
  long-run variance with Bartlett weights; the bandwidth ``"auto"`` is Hobijn, Franses & Ooms'
  (Statistica Neerlandica 58, 2004), ``"legacy"`` Schwert's ⌈12 (n/100)^¼⌉. The p-value is
  interpolated in KPSS' table (0.10, 0.05, 0.025, 0.01 at 0.347, 0.463, 0.574, 0.739) and clipped
  to its ends, as statsmodels does.
* ADF (Said & Dickey, Biometrika 71, 1984), constant term: Δx_t on x_{t−1}, the lagged
  differences up to L and a constant; L chosen by AIC among 0…maxlag on a common sample, then
  refitted on all it allows; the statistic is the t value of x_{t−1}'s coefficient, its p-value
  MacKinnon's approximation (J. Business & Economic Statistics 12, 1994: the normal CDF of a
  polynomial in the statistic, coefficients for N = 1 with a constant, as statsmodels' adfvalues).
"""

from __future__ import annotations

import math

import numpy as np

from tailwise.stats.special import norm_cdf

KPSS_CRIT = (0.347, 0.463, 0.574, 0.739)
KPSS_P = (0.10, 0.05, 0.025, 0.01)
# MacKinnon (1994), regression "c", N = 1: the statistic's range, where the small-p polynomial
# ends, and the two polynomials' coefficients (lowest order first).
_TAU_MAX, _TAU_MIN, _TAU_STAR = 2.74, -18.83, -1.61
_TAU_SMALLP = (2.1659, 1.4412, 0.038269)
_TAU_LARGEP = (1.7339, 0.93202, -0.12745, -0.010368)


def _autocov_sum(resids: np.ndarray, lag: int) -> float:
    return float(np.dot(resids[lag:], resids[:len(resids) - lag]))


def _kpss_bandwidth(resids: np.ndarray, nobs: int) -> int:
    covlags = int(np.power(nobs, 2.0 / 9.0))
    s0 = np.sum(resids ** 2) / nobs
    s1 = 0.0
    for i in range(1, covlags + 1):
        prod = _autocov_sum(resids, i) / (nobs / 2.0)
        s0 += prod
        s1 += i * prod
    s_hat = s1 / s0
    gamma = 1.1447 * np.power(s_hat * s_hat, 1.0 / 3.0)
    return int(gamma * np.power(nobs, 1.0 / 3.0))


def kpss(x: np.ndarray, nlags: str = "auto") -> tuple[float, float]:
    """(statistic, p-value) of the level-stationarity test; ``nlags`` "auto" or "legacy"."""
    x = np.asarray(x, dtype=float)
    nobs = len(x)
    resids = x - x.mean()
    if nlags == "legacy":
        lags = min(int(np.ceil(12.0 * np.power(nobs / 100.0, 0.25))), nobs - 1)
    else:
        lags = min(_kpss_bandwidth(resids, nobs), nobs - 1)
    eta = np.sum(resids.cumsum() ** 2) / (nobs ** 2)
    s_hat = np.sum(resids ** 2)
    for i in range(1, lags + 1):
        s_hat += 2 * _autocov_sum(resids, i) * (1.0 - i / (lags + 1.0))
    stat = float(eta / (s_hat / nobs))
    return stat, float(np.interp(stat, KPSS_CRIT, KPSS_P))


def _ols(y: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, float, int, np.ndarray]:
    """(coefficients, residual sum of squares, rank, pinv(X)) of y on x, as statsmodels' OLS (pinv)."""
    pinv = np.linalg.pinv(x)
    beta = pinv @ y
    resid = y - x @ beta
    return beta, float(resid @ resid), int(np.linalg.matrix_rank(x)), pinv


def _lagged(xdiff: np.ndarray, x: np.ndarray, lags: int) -> tuple[np.ndarray, np.ndarray]:
    """(Δx_t, [x_{t−1}, Δx_{t−1}, …, Δx_{t−lags}]) on the rows that have every lag."""
    nobs = len(xdiff) - lags
    cols = [x[-nobs - 1:-1]] + [xdiff[lags - i:len(xdiff) - i] for i in range(1, lags + 1)]
    return xdiff[-nobs:], np.column_stack(cols)


def mackinnon_p(stat: float) -> float:
    if stat > _TAU_MAX:
        return 1.0
    if stat < _TAU_MIN:
        return 0.0
    coef = _TAU_SMALLP if stat <= _TAU_STAR else _TAU_LARGEP
    return norm_cdf(sum(c * stat ** i for i, c in enumerate(coef)))


def adfuller(x: np.ndarray, maxlag: int) -> tuple[float, float, int]:
    """(statistic, p-value, lags used) of the unit-root test with a constant, lags by AIC."""
    x = np.asarray(x, dtype=float)
    if x.max() == x.min():
        raise ValueError("Invalid input, x is constant")
    if maxlag > len(x) // 2 - 2:
        raise ValueError("maxlag must be less than (nobs/2 - 1 - ntrend)")
    xdiff = np.diff(x)
    y, full = _lagged(xdiff, x, maxlag)
    rhs = np.column_stack([np.ones(len(y)), full])
    n = len(y)
    best = None
    for cols in range(2, 2 + maxlag + 1):  # constant and level, then each lagged difference
        _, ssr, rank, _ = _ols(y, rhs[:, :cols])
        llf = -n / 2.0 * (math.log(2 * math.pi) + math.log(ssr / n) + 1.0)
        aic = -2.0 * llf + 2.0 * rank
        if best is None or (aic, cols) < best:
            best = (aic, cols)
    lags = best[1] - 2
    y, xs = _lagged(xdiff, x, lags)
    design = np.column_stack([xs, np.ones(len(y))])
    beta, ssr, rank, pinv = _ols(y, design)
    sigma2 = ssr / (len(y) - rank)
    se = math.sqrt(sigma2 * float((pinv @ pinv.T)[0, 0]))
    stat = float(beta[0] / se)
    return stat, mackinnon_p(stat), lags
