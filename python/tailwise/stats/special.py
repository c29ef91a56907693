"""The few special functions the statistics need, in plain Python on ``math``: the regularized
incomplete beta function, the binomial distribution built on it, the normal CDF.

Why not SciPy: ``scipy.stats`` costs ~75 MB of resident memory when imported and
``scipy.special`` ~26 MB (measured: BENCHMARKS.md, "Memory"), more than the rest of a run; a run
needs a handful of values per round. These agree with SciPy to ~1e-12 (tests/unit/test_special.py).

* ``betainc(a, b, x)`` = I_x(a, b), by its continued fraction evaluated with the modified Lentz
  method (Press et al., Numerical Recipes, 3rd ed., 2007, §6.4; Lentz, Applied Optics 15, 1976),
  on the side of the mean where it converges fast (x < (a + 1)/(a + b + 2)), in ~√max(a, b)
  terms; the prefactor x^a (1 − x)^b / (a B(a, b)) through ``math.lgamma``.
* The binomial CDF P(B ≤ k) = I_{1−p}(n − k, k + 1), its survival P(B > k) = I_p(k + 1, n − k)
  (computed directly, so that a small tail keeps its precision), and its quantile
  ``binom_ppf(q, n, p)`` = min{m : P(B ≤ m) ≥ q}, as ``scipy.stats.binom.ppf``: bracketed from the
  normal approximation, then bisected on the exact CDF.
"""

from __future__ import annotations

import math
from functools import lru_cache

_TINY = 1e-300
_EPS = 1e-15


def _betacf(a: float, b: float, x: float) -> float:
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 10_000 + int(20 * math.sqrt(max(a, b)))):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        c = 1.0 + aa / c
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = c if abs(c) > _TINY else _TINY
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        c = 1.0 + aa / c
        d = 1.0 / (d if abs(d) > _TINY else _TINY)
        c = c if abs(c) > _TINY else _TINY
        step = d * c
        h *= step
        if abs(step - 1.0) < _EPS:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b), a, b > 0, 0 ≤ x ≤ 1."""
    if not (a > 0 and b > 0) or not 0.0 <= x <= 1.0:
        return math.nan
    if x == 0.0 or x == 1.0:
        return x
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def binom_cdf(k: float, n: int, p: float) -> float:
    """P(B ≤ k), B ~ Binomial(n, p)."""
    k = math.floor(k)
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return betainc(n - k, k + 1.0, 1.0 - p)


def binom_sf(k: float, n: int, p: float) -> float:
    """P(B > k), B ~ Binomial(n, p)."""
    k = math.floor(k)
    if k < 0:
        return 1.0
    if k >= n:
        return 0.0
    return betainc(k + 1.0, n - k, p)


def norm_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def _norm_ppf(q: float) -> float:
    """The standard normal quantile to ~1e-9 (Acklam's rational approximation): a starting point."""
    a = (-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02,
         -3.066479806614716e+01, 2.506628277459239e+00)
    b = (-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01,
         -1.328068155288572e+01)
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00,
         4.374664141464968e+00, 2.938163982698783e+00)
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00)
    if q < 0.02425:
        r = math.sqrt(-2 * math.log(q))
        return (((((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4]) * r + c[5]) / \
            ((((d[0] * r + d[1]) * r + d[2]) * r + d[3]) * r + 1)
    if q > 1 - 0.02425:
        return -_norm_ppf(1 - q)
    r = (q - 0.5) ** 2
    return (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * (q - 0.5) / \
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)


@lru_cache(maxsize=4096)
def binom_ppf(q: float, n: int, p: float) -> int:
    """min{m : P(B ≤ m) ≥ q}, B ~ Binomial(n, p), 0 < q < 1 (``scipy.stats.binom.ppf``)."""
    if n <= 0:
        return 0
    if p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    guess = n * p + _norm_ppf(q) * math.sqrt(n * p * (1.0 - p))
    m = min(max(int(math.floor(guess)), 0), n)
    step = max(int(math.sqrt(n * p * (1.0 - p)) / 8), 1)
    # Bracket lo < answer ≤ hi: cdf(lo) < q ≤ cdf(hi).
    if binom_cdf(m, n, p) >= q:
        hi, lo = m, m - step
        while lo >= 0 and binom_cdf(lo, n, p) >= q:
            hi, lo, step = lo, lo - 2 * step, 2 * step
        lo = max(lo, -1)
    else:
        lo, hi = m, m + step
        while hi < n and binom_cdf(hi, n, p) < q:
            lo, hi, step = hi, hi + 2 * step, 2 * step
        hi = min(hi, n)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if binom_cdf(mid, n, p) >= q:
            hi = mid
        else:
            lo = mid
    return hi
