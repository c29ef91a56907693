"""Is the latency series stationary, and where does the warm-up end?

Method
------
Tests run on per-window summaries, not raw samples: the samples are split by intended send time
into windows holding ~``PER_WINDOW`` samples each (20–200 windows), and each window is
summarised by its mean latency. On that series (shared/notes/statistics.md):

* KPSS (``statsmodels.tsa.stattools.kpss``, level-stationary null; Kwiatkowski et al., J.
  Econometrics 54, 1992) — the right direction for "is it steady?": a level shift or drift
  rejects it. Its p-value is interpolated within [0.01, 0.1].
* ADF (``adfuller``, unit-root null; Said & Dickey, Biometrika 71, 1984), lag chosen by AIC up
  to ``ADF_MAXLAG`` — cheap on ≤ 200 window means (on 100k raw points the default search took
  106 s here).
  Lancet used ADF alone; it passes on series with level shifts, hence KPSS beside it.

Effect size: at tens of thousands of samples KPSS detects drifts far below any precision a
user asks for — on this machine, with the stalls of tailwise's own threads masked, a drift of the
median window mean by a few tenths of a µs over 3 s rejected it in 2 of 10 runs (BENCHMARKS.md).
As for the arrivals (a KS distance beside the p-value), the level is therefore judged by its
size too: the window means are cut into ``DRIFT_BLOCKS`` blocks in time, and a rejection (by KPSS,
or ADF's failure to reject a unit root, which a slow drift also causes) with every block's median
within ``LEVEL_DRIFT_MAX`` of the overall median passes, its figure reported. A level shift of
practical size (more than 5 % of the level) still fails.

Warm-up: drop leading windows in steps of 5 % (up to a quarter of the series) until both tests
pass — the first prefix that makes the rest stationary is the warm-up (in the spirit of MSER
truncation; White, Simulation 69, 1997). The cap keeps a stall in the middle of a run from being
trimmed away as "warm-up"; the adaptive controller also freezes the warm-up once found
(``min_start_ns``), so a later stall is judged, not trimmed.

Transients: a stall (a server paused for 100 ms) is not a unit root and hardly moves a KPSS
statistic, yet it makes the tail of one run unrepeatable. So the post-warm-up samples are also
cut into batches holding ≥ 100 expected exceedances of the target percentile, and the count of
samples above the pooled percentile is compared between batches: χ² homogeneity test plus an
effect size, the largest batch's count over its expectation. A run fails if one batch holds
``CONCENTRATION_MAX``× its share (and χ² p < 0.001): the ms-scale preemption of a shared 2-vCPU
guest (a 4 ms stall delays ~80 requests at 20k req/s: 1.8× a batch's share) stays below that; a
100 ms stall at tens of thousands of requests per second (20× and more) does not.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats
from statsmodels.tools.sm_exceptions import InterpolationWarning
from statsmodels.tsa.stattools import adfuller, kpss

ALPHA = 0.05
PER_WINDOW = 200
MIN_WINDOWS, MAX_WINDOWS = 20, 200
ADF_MAXLAG = 10
TRIM_STEP = 0.05
TRIM_MAX = 0.25
CONCENTRATION_MAX = 5.0
DRIFT_BLOCKS = 5
LEVEL_DRIFT_MAX = 0.05
EXCEEDANCES_PER_BATCH = 100


@dataclass(frozen=True)
class Stationarity:
    ok: bool
    warmup_windows: int
    warmup_ns: int  # intended-time offset where the kept data starts
    windows: int
    kpss_stat: float | None
    kpss_p: float | None
    adf_stat: float | None
    adf_p: float | None
    concentration: float | None  # largest batch's exceedances / expected
    transient_p: float | None
    detail: str


def window_means(intended_ns: np.ndarray, latency_ns: np.ndarray, n_windows: int) -> np.ndarray:
    """Mean latency per window of equal intended-time span."""
    t0, t1 = intended_ns[0], intended_ns[-1] + 1
    edges = np.linspace(t0, t1, n_windows + 1)
    idx = np.clip(np.searchsorted(edges, intended_ns, side="right") - 1, 0, n_windows - 1)
    sums = np.bincount(idx, weights=latency_ns.astype(float), minlength=n_windows)
    counts = np.bincount(idx, minlength=n_windows)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    return means[counts > 0]


def level_tests(series: np.ndarray) -> tuple[float, float, float, float]:
    """(KPSS stat, KPSS p, ADF stat, ADF p) of a window series."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InterpolationWarning)
        k = kpss(series, regression="c", nlags="auto", result_object=True)
    if np.ptp(series) == 0:
        return float(k.statistic), float(k.pvalue), float("-inf"), 0.0
    a = adfuller(series, maxlag=min(ADF_MAXLAG, len(series) // 4), regression="c", autolag="AIC", result_object=True)
    return float(k.statistic), float(k.pvalue), float(a.statistic), float(a.pvalue)


def level_drift(series: np.ndarray) -> float:
    """Largest departure of a block's median window mean from the series' median, relative to it:
    the practical size of a level change (``DRIFT_BLOCKS`` blocks in time)."""
    centre = float(np.median(series))
    if centre <= 0 or len(series) < DRIFT_BLOCKS:
        return float("inf")
    blocks = [float(np.median(b)) for b in np.array_split(series, DRIFT_BLOCKS)]
    return max(abs(b - centre) for b in blocks) / centre


def tail_concentration(intended_ns: np.ndarray, latency_ns: np.ndarray, p: float) -> tuple[float, float, int]:
    """(largest batch exceedance ratio, χ² p-value, batches) for exceedances of the p-th percentile."""
    n = len(latency_ns)
    q = np.percentile(latency_ns, p)
    tail = 1.0 - p / 100.0
    batches = int(np.clip(n * tail / EXCEEDANCES_PER_BATCH, 2, 100))
    if n * tail < 2 * EXCEEDANCES_PER_BATCH:
        return 1.0, 1.0, 1
    order = np.argsort(intended_ns, kind="stable")
    parts = np.array_split(latency_ns[order] > q, batches)
    exceed = np.array([b.sum() for b in parts], dtype=float)
    sizes = np.array([len(b) for b in parts], dtype=float)
    expected = sizes * exceed.sum() / n
    ratio = float(np.max(exceed / expected)) if exceed.sum() else 1.0
    chi = stats.chisquare(exceed, expected) if exceed.sum() else None
    return ratio, float(chi.pvalue) if chi is not None else 1.0, batches


def stationarity(intended_ns: np.ndarray, latency_ns: np.ndarray, p: float = 99.0,
                 fixed_start_ns: int | None = None) -> Stationarity:
    """Samples sorted by intended time. Finds the warm-up and tests the rest; with
    ``fixed_start_ns`` the warm-up is taken as already known (no further trimming)."""
    if fixed_start_ns is not None:
        keep = intended_ns >= fixed_start_ns
        intended_ns, latency_ns = intended_ns[keep], latency_ns[keep]
    n = len(latency_ns)
    n_windows = int(np.clip(n // PER_WINDOW, MIN_WINDOWS, MAX_WINDOWS))
    if n < MIN_WINDOWS * 10:
        return Stationarity(False, 0, int(intended_ns[0]) if n else 0, 0, None, None, None, None, None, None,
                            f"only {n} samples: too few to test stationarity")
    means = window_means(intended_ns, latency_ns, n_windows)
    span = intended_ns[-1] - intended_ns[0]
    best = None
    max_trim = 0 if fixed_start_ns is not None else int(len(means) * TRIM_MAX)
    drift_note = ""
    for trim in range(0, max_trim + 1, max(1, int(len(means) * TRIM_STEP))):
        k_stat, k_p, a_stat, a_p = level_tests(means[trim:])
        best = best or (trim, k_stat, k_p, a_stat, a_p)
        if k_p >= ALPHA and a_p <= ALPHA:
            best = (trim, k_stat, k_p, a_stat, a_p)
            break
    else:
        # No trim passes both tests: a drift too small to matter still passes (effect size).
        for trim in range(0, max_trim + 1, max(1, int(len(means) * TRIM_STEP))):
            k_stat, k_p, a_stat, a_p = level_tests(means[trim:])
            drift = level_drift(means[trim:])
            if drift <= LEVEL_DRIFT_MAX:
                best = (trim, k_stat, k_p, a_stat, a_p)
                drift_note = f"the level drifts by {drift:.1%} only (≤ {LEVEL_DRIFT_MAX:.0%} passes); "
                break
        else:
            trim, k_stat, k_p, a_stat, a_p = best
            drift = level_drift(means[trim:])
            return Stationarity(False, 0, int(intended_ns[0]), len(means), k_stat, k_p, a_stat, a_p, None, None,
                                f"window means not stationary even after dropping up to {TRIM_MAX:.0%} as warm-up "
                                f"(KPSS {k_stat:.2f}, p = {k_p:.3f}; ADF p = {a_p:.3f}; the level moves by {drift:.1%}"
                                f" between fifths of the run): the level shifts or drifts")
    trim, k_stat, k_p, a_stat, a_p = best
    start_ns = int(intended_ns[0] + span * trim / n_windows)
    keep = intended_ns >= start_ns
    ratio, chi_p, batches = tail_concentration(intended_ns[keep], latency_ns[keep], p)
    transient = ratio >= CONCENTRATION_MAX and chi_p < 1e-3
    warm = f"{trim} of {len(means)} windows dropped as warm-up ({(start_ns - intended_ns[0]) / 1e9:.2f} s); " if trim else ""
    detail = (f"{warm}{drift_note}KPSS p = {k_p:.3f}, ADF p = {a_p:.3f} on {len(means) - trim} window means; "
              f"p{p:g} exceedances: largest batch {ratio:.1f}× its share over {batches} batches")
    if transient:
        detail = (f"a transient holds the tail: one of {batches} time batches has {ratio:.1f}× its share of samples "
                  f"above p{p:g} (χ² p = {chi_p:.1e}) — a stall or burst, not steady state; {detail}")
    return Stationarity(not transient, trim, start_ns, len(means), k_stat, k_p, a_stat, a_p, ratio, chi_p, detail)
