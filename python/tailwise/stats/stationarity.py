"""Is the latency series steady: no drift of its level, no transient holding its tail?

The samples given are tested as they are. The warm-up is not searched for in the data: a rule
that drops samples by looking at their latencies is biased by construction (stats/quantiles.py,
"What may be left out"), so the caller cuts a leading span fixed by the clock and
passes only what follows. A transient found here is a verdict, never a trim.

Level
-----
Tests run on per-window summaries, not raw samples: the samples are split by intended send time
into windows of equal span holding ~``PER_WINDOW`` samples each (20–200 windows), each summarised
by its mean latency. On that series:

* KPSS (``statsmodels.tsa.stattools.kpss``, level-stationary null; Kwiatkowski et al., J.
  Econometrics 54, 1992) — the right direction for "is it steady?": a level shift or drift
  rejects it. Its p-value is interpolated within [0.01, 0.1]. Its automatic bandwidth (Hobijn et
  al., Statistica Neerlandica 58, 2004) divides by a long-run variance that can round to zero
  (OverflowError) or be NaN on a near-constant series; the fixed bandwidth ⌊4(n/100)^¼⌋ (Schwert,
  JBES 7, 1989; ``nlags="legacy"``) is then used, and said so.
* ADF (``adfuller``, unit-root null; Said & Dickey, Biometrika 71, 1984), lag chosen by AIC up
  to ``min(ADF_MAXLAG, n/4)`` — cheap on ≤ 200 window means (on 100k raw points the default
  search took 106 s here). Lancet used ADF alone; it passes on series with level shifts, hence
  KPSS beside it.

Effect size: at tens of thousands of samples KPSS detects drifts far below any precision a user
asks for (a drift of the median window mean by a few tenths of a µs over 3 s rejected it in 2 of
10 runs, BENCHMARKS.md). So the window means are cut into ``DRIFT_BLOCKS`` blocks in time, and a
rejection (by KPSS, or ADF's failure to reject a unit root, which a slow drift also causes) with
every block's median within ``LEVEL_DRIFT_MAX`` of the overall median passes, its figure
reported. A level shift of practical size (more than 5 % of the level) still fails. A test that
cannot be computed counts as a rejection and leaves the verdict to the drift, with the reason in
``detail``; a constant series is level-stationary and passes as such. Fewer than ``MIN_WINDOWS``
windows holding samples cannot be tested (``ok=False``).

The tail's transients are tested in stats/transients.py ("Transients in the tail", "Several
shorter transients"); ``stationarity`` judges both.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from tailwise.stats.transients import in_time_order, tail_concentration

ALPHA = 0.05
PER_WINDOW = 200
MIN_WINDOWS, MAX_WINDOWS = 20, 200
MIN_SAMPLES = MIN_WINDOWS * 10
ADF_MAXLAG = 10
DRIFT_BLOCKS = 5
LEVEL_DRIFT_MAX = 0.05


@dataclass(frozen=True)
class Stationarity:
    ok: bool
    warmup_windows: int  # always 0: the caller cuts the warm-up (kept for old summary fields)
    warmup_ns: int  # the first intended time tested
    windows: int
    kpss_stat: float | None
    kpss_p: float | None
    adf_stat: float | None
    adf_p: float | None
    concentration: float | None  # largest window's exceedances / expected; None when not applied
    transient_p: float | None
    detail: str
    level_drift: float | None = None  # largest fifth's median window mean vs the median, relative
    transient: bool = False  # the tail test fired
    exceedances: int | None = None  # samples above the pooled percentile
    #: The windows of intended time (ns, [start, end)) a transient over several windows was found in
    #: (stats/transients.py, "Several shorter transients"); empty when that test did not fire.
    transient_windows: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class LevelTests:
    kpss_stat: float | None
    kpss_p: float | None
    adf_stat: float | None
    adf_p: float | None
    constant: bool
    notes: tuple[str, ...]  # what could not be computed, and why

    @property
    def passed(self) -> bool:
        return self.constant or (self.kpss_p is not None and self.adf_p is not None
                                 and self.kpss_p >= ALPHA and self.adf_p <= ALPHA)


def window_means(intended_ns: np.ndarray, latency_ns: np.ndarray, n_windows: int) -> np.ndarray:
    """Mean latency per window of equal intended-time span (windows without samples left out)."""
    t0, t1 = float(intended_ns[0]), float(intended_ns[-1]) + 1.0
    edges = np.linspace(t0, t1, n_windows + 1)
    idx = np.clip(np.searchsorted(edges, intended_ns, side="right") - 1, 0, n_windows - 1)
    sums = np.bincount(idx, weights=latency_ns.astype(float), minlength=n_windows)
    counts = np.bincount(idx, minlength=n_windows)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    return means[counts > 0]


def _why(e: Exception) -> str:
    return f"{type(e).__name__}: {e}".rstrip(": ")


def level_tests(series: np.ndarray) -> LevelTests:
    """KPSS and ADF on a window series; never raises (what fails is named in ``notes``)."""
    from statsmodels.tsa.stattools import adfuller, kpss
    series = np.asarray(series, dtype=float)
    scale = max(float(np.max(np.abs(series))), 1.0) if len(series) else 1.0
    if len(series) and np.ptp(series) <= 1e-9 * scale:
        return LevelTests(None, None, None, None, True, ())
    notes: list[str] = []
    k_stat = k_p = a_stat = a_p = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # InterpolationWarning: p outside the table, reported as clipped
        for nlags in ("auto", "legacy"):
            try:
                k = kpss(series, regression="c", nlags=nlags, result_object=True)
                k_stat, k_p = float(k.statistic), float(k.pvalue)
                if nlags == "legacy":
                    notes.append("KPSS with Schwert's fixed bandwidth (the automatic one failed)")
                break
            except Exception as e:  # ValueError, OverflowError, MissingDataError, LinAlgError, …
                if nlags == "legacy":
                    notes.append(f"KPSS could not be computed ({_why(e)})")
        try:
            maxlag = min(ADF_MAXLAG, len(series) // 4)
            a = adfuller(series, maxlag=maxlag, regression="c", autolag="AIC", result_object=True)
            a_stat, a_p = float(a.statistic), float(a.pvalue)
        except Exception as e:  # e.g. "maxlag must be less than (nobs/2 - 1 - ntrend)"
            notes.append(f"ADF could not be computed ({_why(e)})")
    if k_p is not None and not math.isfinite(k_p):
        k_stat = k_p = None
        notes.append("KPSS gave no finite p-value")
    if a_p is not None and not math.isfinite(a_p):
        a_stat = a_p = None
        notes.append("ADF gave no finite p-value")
    return LevelTests(k_stat, k_p, a_stat, a_p, False, tuple(notes))


def level_drift(series: np.ndarray) -> float:
    """Largest departure of a block's median window mean from the series' median, relative to it:
    the practical size of a level change (``DRIFT_BLOCKS`` blocks in time)."""
    centre = float(np.median(series))
    if centre <= 0 or len(series) < DRIFT_BLOCKS:
        return float("inf")
    blocks = [float(np.median(b)) for b in np.array_split(series, DRIFT_BLOCKS)]
    return max(abs(b - centre) for b in blocks) / centre


def stationarity(intended_ns: np.ndarray, latency_ns: np.ndarray, p: float = 99.0,
                 tail_ns: np.ndarray | None = None) -> Stationarity:
    """Test the samples given (after the caller's clock-fixed warm-up cut) for a steady level and
    for a transient holding the p-th percentile's tail — on ``tail_ns`` when given (the same
    requests' lower bounds: methodology/analysis.py), else on ``latency_ns``. Never raises on
    data: what cannot be computed gives ``ok=False`` with the reason in ``detail``."""
    if tail_ns is not None:
        t = np.asarray(intended_ns, dtype=np.int64)
        tail_ns = np.asarray(tail_ns, dtype=float)
        if len(t) > 1 and not np.all(t[1:] >= t[:-1]):
            tail_ns = tail_ns[np.argsort(t, kind="stable")]
    intended, lat = in_time_order(np.asarray(intended_ns, dtype=np.int64), np.asarray(latency_ns, dtype=float))
    n = len(lat)
    start = int(intended[0]) if n else 0
    if n < MIN_SAMPLES:
        return Stationarity(False, 0, start, 0, None, None, None, None, None, None,
                            f"only {n:,} samples: too few to test stationarity (needs {MIN_SAMPLES})")
    bad = int(np.count_nonzero(~np.isfinite(lat)))
    if bad:
        return Stationarity(False, 0, start, 0, None, None, None, None, None, None,
                            f"{bad:,} of {n:,} latencies are not finite numbers: stationarity cannot be tested")
    means = window_means(intended, lat, int(np.clip(n // PER_WINDOW, MIN_WINDOWS, MAX_WINDOWS)))
    if len(means) < MIN_WINDOWS:
        return Stationarity(False, 0, start, len(means), None, None, None, None, None, None,
                            f"only {len(means)} windows with samples: too few to test stationarity "
                            f"(needs {MIN_WINDOWS})")
    lv = level_tests(means)
    drift = level_drift(means)
    notes = "".join(f"{note}; " for note in lv.notes)
    k_txt = "KPSS not computed" if lv.kpss_p is None else f"KPSS p = {lv.kpss_p:.3f}"
    a_txt = "ADF not computed" if lv.adf_p is None else f"ADF p = {lv.adf_p:.3f}"
    if lv.constant:
        level_ok, level_txt = True, f"the {len(means)} window means are constant: level-stationary"
    elif lv.passed:
        level_ok, level_txt = True, f"{notes}{k_txt}, {a_txt} on {len(means)} window means: level-stationary"
    elif drift <= LEVEL_DRIFT_MAX:
        level_ok = True
        level_txt = (f"{notes}{k_txt}, {a_txt} on {len(means)} window means, but the level drifts by {drift:.1%} "
                     f"only (≤ {LEVEL_DRIFT_MAX:.0%} passes)")
    else:
        level_ok = False
        level_txt = (f"{notes}window means not stationary ({k_txt}, {a_txt} on {len(means)} window means; "
                     f"the level moves by {drift:.1%} between fifths of the run, > {LEVEL_DRIFT_MAX:.0%}): "
                     f"the level shifts or drifts")
    tr = tail_concentration(intended, lat if tail_ns is None else tail_ns, p)
    ok = level_ok and not tr.fired
    detail = f"{tr.detail}; {level_txt}" if tr.fired else f"{level_txt}; {tr.detail}"
    return Stationarity(ok, 0, start, len(means), lv.kpss_stat, lv.kpss_p, lv.adf_stat, lv.adf_p,
                        tr.ratio, tr.pvalue, detail, drift if math.isfinite(drift) else None, tr.fired,
                        tr.exceedances, tr.windows)
