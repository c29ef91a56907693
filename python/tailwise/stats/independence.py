"""How much information do autocorrelated latency samples carry about one percentile?

Why: the order-statistic confidence interval of a percentile assumes i.i.d. samples. Requests
queued back to back have dependent latencies (the later one includes the earlier one's service),
so intervals from consecutive requests are too narrow (Lancet §4.3; Le Boudec 2010, §6).

What must be independent: the interval for the p-quantile ``ξ`` rests on one binomial count, the
number ``B = Σᵢ Iᵢ`` of samples below it, ``Iᵢ = 1{xᵢ ≤ ξ}`` (quantiles.py). For a stationary
series the variance of that sum is, for large n,

    Var B ≈ n·q(1 − q)·τ,   τ = 1 + 2 Σ_{k≥1} ρₖ,

with ``ρₖ`` the autocorrelation of the indicator series at lag k: ``τ`` is the integrated
autocorrelation time, and ``n_eff = n/τ`` samples that were independent would give the same
variance (Geyer, Stat. Sci. 7, 1992, §3; Le Boudec 2010, §6.6; Thiébaux & Zwiers, J. Clim. Appl.
Meteor. 23, 1984). So the statistic is computed on the indicator of the percentile at hand, not on
the raw latencies: a slow drift of the median (host noise) correlates the latencies for seconds
yet leaves the p99 indicator nearly independent, and the reverse holds in a saturated queue. Every
sample is kept; the binomial count is widened by ``τ`` (quantiles.percentile_ci with ``n_eff``),
taken at its upper confidence bound (below, "Carrying τ's own error").
This replaces Lancet's thinning (keep every ℓ-th sample until lag-ℓ correlation vanishes), which
at the median of a loaded queue kept one sample in ~1,000 and left no interval.

Estimating τ: the sample ACF (by FFT: ``scipy.signal.correlate``'s steps, ``fft_correlation``) is summed with Geyer's
*initial positive sequence* truncation (Geyer 1992, §3.3): for a reversible stationary chain the
pair sums ``Γₘ = ρ₂ₘ + ρ₂ₘ₊₁`` (``ρ₀ = 1``) are positive, so the sum stops at the first
``Γₘ ≤ 0`` — where the estimated correlations have become noise — and
``τ = −1 + 2 Σ_{m<M} Γₘ`` (lags 1 … 2M − 1). It needs no tuning constant, unlike cutting the
sum where ``|ρₖ|`` first drops below ``max(0.05, 1.96/√n)`` (the previous rule), which stops early
on correlations that decay slowly from just above it. On the coverage test's 200 seeds
(tests/unit/test_coverage.py: M/M/1 and bimodal M/G/1 at ρ = 0.5 and 0.8; p50, p90, p99) the threshold
rule covered 89–96.5 %, Geyer's 90–97.5 % (both at the estimate, before the bound below), at
least as much in all 12 cells (e.g. p50 of M/M/1 at
ρ = 0.5: 92 % against 94 %). The threshold is still computed and reported as the size of a
correlation that is negligible at this n.

Correlation that lasts longer than the lags tried (``max_lag``, default ``min(5000, n // 50)``:
beyond n/50 lags each estimate rests on too few pairs) — a level drifting with the host's noise —
either keeps the pair sums positive to ``max_lag`` or, weak at each lag, ends them early on noise.
Non-overlapping batch means then estimate it: ``τ = m·Var(batch mean)/Var(I)`` over ``BATCHES`` =
20 batches of m samples (Geyer 1992, §3.2; Flegal & Jones, Ann. Stat. 38, 2010), valid when the
batches are much longer than the correlation — here at least ``BATCH_LAGS`` = 2 times its reach
(``max_lag``, or its exponential extrapolation ``max_lag/−ln ρ(max_lag)`` when it has not died out).
With 20 batches the estimate varies by ~±30 %, so it replaces an ended Geyer sum only beyond
``LONG_RANGE_FACTOR`` = 2 times it. Simulated (a slow AR(1), φ = 0.9995, at a tenth of unit noise;
300k samples, 100 seeds): the p50 and p90 intervals covered 93 % and 94 % at the batch-means τ
(99 % and 98 % at its upper bound, below, 1.5 times as wide) against 20 % and 49 % without. ``ok``
is False when ``n < MIN_SAMPLES``, or when the correlation reaches past ``max_lag`` and the series
is too short for such batches: ``τ`` (a lower bound then) cannot be trusted.

Carrying τ's own error
----------------------
``τ`` is estimated, and the interval inherits its error one-sidedly: an ``n_eff`` set too high makes
the interval too narrow, one set too low only makes it wide. So ``n_eff`` is taken at a one-sided
upper confidence bound of ``τ``, ``n_eff = n/τ_U`` (``tau_upper``; ``tau`` stays the estimate):
``τ̂`` is a variance ratio, ``n·Var(Ī)/Var(I)``, and is treated as one, ``τ̂ ~ τ·χ²_ν/ν`` with ``ν``
its equivalent degrees of freedom (Satterthwaite, Biometrics Bull. 2, 1946), so

    τ_U = τ̂ · ν / χ²_ν(1 − TAU_CONFIDENCE),   TAU_CONFIDENCE = 0.99.

* Geyer's sum over ``M`` lags is a truncated-window estimate of the spectrum at frequency zero, of
  relative variance ``var(τ̂)/τ² ≈ 2(2M + 1)/n`` (Madras & Sokal, J. Stat. Phys. 50, 1988; Wolff,
  Comput. Phys. Commun. 156, 2004; Priestley, *Spectral Analysis and Time Series*, 1981, ch. 6, for
  the equivalent degrees of freedom of a lag-window estimate): ``ν = n/(2M + 1)``. On the coverage
  test's runs (medians) ``ν`` ≈ 540–1,100 at 80 % load (n = 200k; ``τ_U`` ≈ 1.11–1.16 ``τ̂``) and
  ≈ 2,100–3,700 at 50 % (n = 100k; 1.06–1.08 ``τ̂``); 50k i.i.d. samples (``M`` of 1–3 lags) keep
  ``n_eff`` ≈ 96 % of ``n``, 1,000 keep ≈ 83 %.
* Batch means over ``b`` batches: the sample variance of ``b`` means, ``ν = b − 1`` = 19 (the χ²
  of batch means: Schmeiser, Oper. Res. 30, 1982), ``τ_U`` = 2.49 ``τ̂`` — 20 batches say little.

What it covers, measured (tests/unit/test_coverage.py, 400 repetitions a cell: M/M/1 and bimodal
M/G/1 at 50 and 80 % load, p50/p90/p99, 95 % intervals): 94.0–97.0 % in all 12 cells, against
91.8–96.5 % at ``τ̂`` (p90 of M/M/1 at 80 % load: 94.0 against 91.8 %); the median interval is
2–4 % wider at 50 % load and 3–8 % at 80 %. The Madras–Sokal variance is the Gaussian,
large-``M`` one: the measured spread of ``τ̂`` over seeds is 1.1–1.35 times it at p50, 1.5–1.65
times at p90 and 3.5–4.4 times at p99, whose indicator is a few dozen clusters of exceedances (a
fourth-cumulant term, ≈ 3τ/(n(1 − q)) for geometric cluster sizes, that no window formula has). So
the bound is in truth a one-sided ≈ 93 % bound at p90 and ≈ 70 % at p99 — yet p99 covers
95.5–97 %, because its ``τ̂`` and its count's error grow together (a run with one long busy period
has both); carrying p99's full spread at the same level would have put it at 98.5–99.5 %. Over 600
repetitions with independent random seeds (M/M/1 at 80 % load) the estimate ``τ̂`` was unbiased
(13.3, 31.1 and 39.4 against the count's dispersion 13.3, 29.4 and 38.6 at p50/p90/p99) and covered
95.2/95.7/95.3 % already: most of the shortfall the test showed at ``τ̂`` (90.0 % at p90 over its
first 200 seeds) is its seeds' own dispersion (τ ≈ 35 at p90 over its 400), which the bound absorbs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RHO_MAX = 0.05
Z = 1.959963984540054
#: Below this many samples the indicator's correlation cannot be judged.
MIN_SAMPLES = 100
#: Default largest lag: min(MAX_LAG, n // LAG_DIVISOR).
MAX_LAG = 5_000
LAG_DIVISOR = 50
#: n_eff is taken at this one-sided upper confidence bound of τ (module doc, "Carrying τ's own
#: error").
TAU_CONFIDENCE = 0.99


@dataclass(frozen=True)
class Independence:
    """The autocorrelation of the p-th percentile's indicator and the effective sample size."""

    ok: bool
    tau: float  # integrated autocorrelation time 1 + 2 Σ ρₖ, the estimate (≥ 1; a lower bound when not ok)
    n: int
    n_effective: float  # n / tau_upper, what the interval is computed with (n / tau when not ok)
    rho_lag1: float
    lags: int  # lags summed into τ
    threshold: float  # |ρ| negligible at this n: max(0.05, 1.96/√n)
    detail: str
    #: The one-sided TAU_CONFIDENCE upper bound of τ (module doc), and the χ² degrees of freedom of
    #: the estimate it comes from; NaN when not ok (τ unknown, or only a lower bound).
    tau_upper: float = float("nan")
    tau_dof: float = float("nan")

    @property
    def step(self) -> int:
        """The equivalent thinning (keep one sample in ``step`` = ⌈τ⌉, the estimate), for the old
        summary fields."""
        return max(1, math.ceil(self.tau)) if math.isfinite(self.tau) else 1


def threshold(n: int) -> float:
    return float(max(RHO_MAX, Z / np.sqrt(max(n, 1))))


def geyer_dof(n: int, lags: int) -> float:
    """Equivalent χ² degrees of freedom of a τ summed over ``lags`` lags of ``n`` samples:
    var(τ̂)/τ² ≈ 2(2M + 1)/n (Madras & Sokal 1988; module doc), so ν = 2/(var(τ̂)/τ²) = n/(2M + 1)."""
    return n / (2.0 * max(lags, 1) + 1.0)


def tau_upper(tau: float, dof: float, confidence: float = TAU_CONFIDENCE) -> float:
    """One-sided upper confidence bound of τ from an estimate distributed as τ·χ²_ν/ν
    (Satterthwaite, Biometrics Bull. 2, 1946): τ·ν/χ²_ν(1 − confidence)."""
    from scipy.stats import chi2
    if not (math.isfinite(tau) and math.isfinite(dof) and dof > 0):
        return tau
    return max(tau, tau * dof / float(chi2.ppf(1.0 - confidence, dof)))


def _bound_txt(tau_u: float, dof: float) -> str:
    return f"{TAU_CONFIDENCE:.0%} upper bound {tau_u:,.1f} (ν ≈ {dof:,.0f})"


def indicator_acf(x: np.ndarray, p: float, max_lag: int) -> np.ndarray:
    """Autocorrelation of 1{x ≤ q_p} at lags 0…max_lag (q_p the sample p-th percentile)."""
    q = np.percentile(x, p, method="inverted_cdf")
    ind = (x <= q).astype(float)
    if ind.min() == ind.max():  # every sample on one side (ties): nothing varies, nothing correlates
        return np.r_[1.0, np.zeros(max_lag)]
    # The sample ACF (biased, as statsmodels' acf) by a real-input FFT correlation: the same
    # figures at half the cost of statsmodels' complex FFT (0.26 against 0.51 s at 1M samples).
    ind -= ind.mean()
    c = fft_correlation(ind, max_lag)
    return c / c[0]


def fft_correlation(d: np.ndarray, max_lag: int) -> np.ndarray:
    """``scipy.signal.correlate(d, d, mode="full", method="fft")[n - 1:n + max_lag]``, the same
    operations in the same order (scipy 1.17's ``fftconvolve``: both inputs' real FFTs at the next
    fast length ≥ 2n − 1, their product, its inverse; bit for bit the same figures), with only the
    lags kept: scipy keeps every one of the 2n − 1 and a copy of each spectrum, ~90 MB at 1M
    samples against ~55 MB here — the end of a long run peaks in this function (BENCHMARKS.md,
    "Memory")."""
    from scipy import fft as sp_fft
    n = len(d)
    size = sp_fft.next_fast_len(2 * n - 1, True)
    spectrum = sp_fft.rfftn(d, [size], axes=[0])
    spectrum *= sp_fft.rfftn(d[::-1], [size], axes=[0])  # correlate = convolve with the reversed input
    return sp_fft.irfftn(spectrum, [size], axes=[0])[n - 1:n + max_lag].copy()


def geyer_tau(rho: np.ndarray) -> tuple[float, int, bool]:
    """(τ, lags summed, truncated) from an ACF ``rho[0..L]`` by Geyer's initial positive sequence.

    ``truncated`` is False when every pair sum up to ``L`` is positive (the sequence did not end).
    """
    pairs = (len(rho) // 2) * 2
    gamma = rho[:pairs].reshape(-1, 2).sum(axis=1)  # Γₘ = ρ₂ₘ + ρ₂ₘ₊₁
    nonpos = np.nonzero(gamma <= 0)[0]
    m = int(nonpos[0]) if nonpos.size else len(gamma)
    tau = -1.0 + 2.0 * float(np.sum(gamma[:m]))
    return max(tau, 1.0), max(2 * m - 1, 0), bool(nonpos.size)


#: Batch means: this many batches, each at least BATCH_LAGS times the longest lag the ACF tried.
BATCHES = 20
BATCH_LAGS = 2
#: Batch means replace a Geyer sum that ended only when they exceed it this many times.
LONG_RANGE_FACTOR = 2.0


def batch_means_tau(x: np.ndarray, p: float, length: float) -> tuple[float, int, int] | None:
    """(τ, batches, batch size) of the p-th percentile's indicator by non-overlapping batch means —
    τ = m·Var(batch mean)/Var(indicator) for batches of m (Geyer 1992, §3.2; Flegal & Jones, Ann.
    Stat. 38, 2010) — when the series holds ``BATCHES`` batches of ≥ ``BATCH_LAGS``·length, the
    lags over which the correlation is known to reach; None otherwise (batches shorter than the
    correlation understate τ)."""
    n = len(x)
    size = n // BATCHES
    if not size >= BATCH_LAGS * length:
        return None
    q = np.percentile(x, p, method="inverted_cdf")
    ind = (x[: size * BATCHES] <= q).astype(float)
    var = ind.var()
    if var == 0:
        return 1.0, BATCHES, size
    means = ind.reshape(BATCHES, size).mean(axis=1)
    return max(1.0, size * float(means.var(ddof=1)) / var), BATCHES, size


def independence(latency_in_send_order: np.ndarray, p: float = 99.0, max_lag: int | None = None) -> Independence:
    """Integrated autocorrelation time and effective sample size of the p-th percentile's indicator
    (see the module doc). Never raises on data: too few samples give ``ok=False``."""
    x = np.asarray(latency_in_send_order, dtype=float)
    n = len(x)
    thr = threshold(n)
    if n < MIN_SAMPLES:
        return Independence(False, float("nan"), n, float(n), float("nan"), 0, thr,
                            f"only {n:,} samples: too few to judge the independence of p{p:g} (needs {MIN_SAMPLES})")
    max_lag = max(2, min(max_lag or MAX_LAG, n // LAG_DIVISOR, n - 1))
    rho = indicator_acf(x, p, max_lag)
    if not np.all(np.isfinite(rho)):
        return Independence(False, float("nan"), n, float(n), float("nan"), 0, thr,
                            f"the autocorrelation of the p{p:g} indicator could not be computed from {n:,} samples")
    tau, lags, ended = geyer_tau(rho)
    dof = geyer_dof(n, lags)
    tau_u = tau_upper(tau, dof)
    n_eff = n / tau_u
    # A weak correlation that lasts (a level drifting with the host's noise) can end Geyer's
    # sequence early, on noise, and leave τ far too small: batch means over batches much longer
    # than the lags tried see it. Their estimate varies by ~±30 % with 20 batches, so it replaces
    # Geyer's only beyond twice it.
    # How far the correlation reaches: the lags tried, or, when it has not died out by then, its
    # exponential extrapolation max_lag / −ln ρ(max_lag) (ρ ≥ 1: unknown, no batches are long enough).
    r_end = float(rho[max_lag])
    reach = float(max_lag) if ended or r_end <= 0 else (max_lag / -math.log(r_end) if r_end < 1 else math.inf)
    bm = batch_means_tau(x, p, max(float(max_lag), reach))
    if ended and bm is not None and bm[0] > LONG_RANGE_FACTOR * tau:
        tau_bm, batches, size = bm
        dof_bm = float(batches - 1)
        tau_bu = tau_upper(tau_bm, dof_bm)
        return Independence(True, tau_bm, n, n / tau_bu, float(rho[1]), lags, thr,
                            f"p{p:g} indicator: lag-1 autocorrelation {rho[1]:.2f}, correlated beyond the {lags:,} "
                            f"lags of Geyer's sum (τ = {tau:,.1f}): τ = {tau_bm:,.1f} from the means of {batches} "
                            f"batches of {size:,} samples, {_bound_txt(tau_bu, dof_bm)}: "
                            f"n_eff ≈ {n / tau_bu:,.0f} of {n:,}", tau_bu, dof_bm)
    if not ended:
        # Correlated beyond every lag tried: batch means over batches far longer still estimate τ.
        if bm is not None:
            tau_bm, batches, size = bm
            if tau_bm >= tau:  # the partial Geyer sum is a lower bound of τ
                tau, dof = tau_bm, float(batches - 1)
            tau_u = tau_upper(tau, dof)
            return Independence(True, tau, n, n / tau_u, float(rho[1]), lags, thr,
                                f"p{p:g} indicator still correlated at lag {max_lag:,} (ρ = {rho[max_lag]:.3f}): "
                                f"τ = {tau:,.1f} from the means of {batches} batches of {size:,} samples, "
                                f"{_bound_txt(tau_u, dof)}: n_eff ≈ {n / tau_u:,.0f} of {n:,}", tau_u, dof)
        # τ is only a lower bound here, n/τ an upper bound of n_eff: no confidence bound applies.
        return Independence(False, tau, n, n / tau, float(rho[1]), lags, thr,
                            f"whether a latency is above p{p:g} stays correlated up to lag {max_lag:,} "
                            f"(ρ = {r_end:.3f}, τ ≥ {tau:,.1f}) with {n:,} samples, too few for {BATCHES} batches "
                            f"of {BATCH_LAGS}× its reach (~{reach:,.0f} lags): n_eff ≤ {n / tau:,.0f} cannot be "
                            f"trusted")
    return Independence(True, tau, n, n_eff, float(rho[1]), lags, thr,
                        f"p{p:g} indicator: lag-1 autocorrelation {rho[1]:.2f}, τ = {tau:,.1f} over {lags:,} "
                        f"lag{'' if lags == 1 else 's'}, {_bound_txt(tau_u, dof)}: "
                        f"n_eff ≈ {n_eff:,.0f} of {n:,}", tau_u, dof)


def thin(n: int, step: int, rng: np.random.Generator) -> np.ndarray:
    """Indices keeping every ``step``-th of ``n`` samples from a random offset (no longer used by
    the estimate; kept for callers that still thin)."""
    if step <= 1:
        return np.arange(n)
    return np.arange(int(rng.integers(step)), n, step)
