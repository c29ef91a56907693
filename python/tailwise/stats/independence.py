"""Are the latency samples independent, and if not, how much thinning makes them so?

Why: the order-statistic confidence interval of a percentile assumes i.i.d. samples. Requests
queued back to back have dependent latencies (the later one includes the earlier one's service),
so intervals from consecutive requests are too narrow (Lancet §4.3; Le Boudec 2010, §6).

What must be independent: the interval for the p-quantile rests on one binomial count, the number
of samples below it (quantiles.py). Its variance is that of a sum of the indicator series
Iᵢ = 1{xᵢ ≤ q}, inflated by 1 + 2 Σₖ ρₖ where ρₖ is that series' autocorrelation (e.g. Le Boudec
2010, §6.6; Geyer, Stat. Sci. 7, 1992). So the test is on the indicator of the percentile at hand,
not on the raw latencies: a slow drift of the median (host noise) correlates the latencies for
seconds yet leaves the p99 indicator nearly independent, and the reverse holds in a saturated
queue. Each percentile therefore gets its own thinning.

Method (Lancet's thinning, with an effect-size threshold): autocorrelation of the indicator series
at lags 1…L by FFT (``statsmodels.tsa.stattools.acf``); the thinning step ℓ is the first lag whose
|ρ| is below ``threshold(n) = max(RHO_MAX, z₀.₉₇₅/√n)`` — a p-value alone is useless at n ≥ 10⁵,
where any tiny correlation is "significant" (statistics notes). Keeping every ℓ-th sample leaves a
series whose lag-1 correlation is ρ(ℓ): with |ρ| ≤ 0.05 the variance of the count is inflated by at
most ≈ 1 + 2·0.05/(1 − 0.05) ≈ 1.1.

The effective sample size n/(1 + 2 Σ ρₖ) (summed while ρₖ > threshold) is reported alongside.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from statsmodels.tsa.stattools import acf

RHO_MAX = 0.05
Z = 1.959963984540054
#: Keep at least this many samples after thinning, or thinning cannot be judged.
MIN_THINNED = 50


@dataclass(frozen=True)
class Independence:
    ok: bool
    step: int  # keep every step-th sample
    rho_lag1: float  # before thinning
    rho_at_step: float  # after thinning (the lag-`step` autocorrelation)
    threshold: float
    n: int
    n_effective: float
    detail: str


def threshold(n: int) -> float:
    return max(RHO_MAX, Z / np.sqrt(max(n, 1)))


def indicator_acf(x: np.ndarray, p: float, max_lag: int) -> np.ndarray:
    """Autocorrelation of 1{x ≤ q_p} at lags 0…max_lag (q_p the sample p-th percentile)."""
    q = np.percentile(x, p, method="inverted_cdf")
    ind = (x <= q).astype(float)
    if ind.min() == ind.max():
        return np.r_[1.0, np.zeros(max_lag)]
    return acf(ind, nlags=max_lag, fft=True)


def independence(latency_in_send_order: np.ndarray, p: float = 99.0, max_lag: int | None = None) -> Independence:
    """Thinning that makes the indicator of the p-th percentile independent (see module doc)."""
    x = np.asarray(latency_in_send_order, dtype=float)
    n = len(x)
    if n < 2 * MIN_THINNED:
        return Independence(False, 1, float("nan"), float("nan"), threshold(n), n, float(n),
                            f"only {n} samples: too few to judge independence")
    max_lag = max(1, min(max_lag or 5_000, n // MIN_THINNED))
    rho = indicator_acf(x, p, max_lag)
    thr = threshold(n)
    below = np.nonzero(np.abs(rho[1:]) < thr)[0]
    # Effective sample size: sum the correlations until they first drop below the threshold.
    first = int(below[0]) + 1 if below.size else max_lag + 1
    n_eff = n / max(1.0, 1.0 + 2.0 * float(np.sum(rho[1:first])))
    if not below.size:
        return Independence(False, max_lag, float(rho[1]), float(rho[max_lag]), thr, n, n_eff,
                            f"whether a latency is above p{p:g} stays correlated up to lag {max_lag} "
                            f"(ρ = {rho[max_lag]:.3f} > {thr:.3f}) with {n:,} samples")
    step = first
    return Independence(True, step, float(rho[1]), float(rho[step]), thr, n, n_eff,
                        f"p{p:g} indicator: lag-1 autocorrelation {rho[1]:.3f}; {_kept(step)} "
                        f"(ρ at lag {step} = {rho[step]:.3f}, threshold {thr:.3f}); n_eff ≈ {n_eff:,.0f} of {n:,}")


def _kept(step: int) -> str:
    """'every sample kept', 'every 2nd sample kept', 'every 13th sample kept'."""
    if step <= 1:
        return "every sample kept"
    suffix = "th" if 10 <= step % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(step % 10, "th")
    return f"every {step}{suffix} sample kept"


def thin(n: int, step: int, rng: np.random.Generator) -> np.ndarray:
    """Indices keeping every ``step``-th of ``n`` samples from a random offset."""
    if step <= 1:
        return np.arange(n)
    return np.arange(int(rng.integers(step)), n, step)
