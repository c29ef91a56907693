"""Do the actual send times follow the requested inter-arrival process?

Method
------
The engine keeps a random 1-in-k subset of the requests (independent Bernoulli(1/k) draws).
Independent thinning of a Poisson process of rate λ is a Poisson process of rate λ/k (Rényi's
theorem; e.g. Kingman, *Poisson Processes*, 1993, §5.1), so the gaps between the *sent* times of
the kept requests are, under the null, i.i.d. exponential with mean k/λ — whatever k is.

* Goodness of fit: Anderson–Darling against the exponential with its scale *estimated* from the
  data, p-value from Stephens' tables for that case (``scipy.stats.anderson(..., 'expon',
  method='interpolated')``; Stephens, JASA 69, 1974). A plain KS test with an estimated mean would
  be invalid. It runs on a random subsample of at most ``MAX_GAPS`` gaps: at large n, timer
  granularity and sends batched in one loop iteration make any exact test reject a process that is
  Poisson for every practical purpose (shared/notes/statistics.md).
* Effect size: the coefficient of variation of the gaps (1 for an exponential) must be within
  ``CV_TOLERANCE``; a run passes on the test *or* on the effect size.
* The client must keep up: at most ``LATE_LIMIT`` of the requests sent later than the late
  threshold — otherwise what the server saw was not the requested process.

For fixed spacing the kept gaps are geometric multiples of 1/λ and say nothing; there the send
lag is the test (p99 below a tenth of the gap).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

MAX_GAPS = 2_000
ALPHA = 0.01
CV_TOLERANCE = 0.05
LATE_LIMIT = 0.05


@dataclass(frozen=True)
class ArrivalFit:
    ok: bool
    process: str
    gaps: int
    statistic: float | None  # A² (exp) or send-lag p99 / gap (fixed)
    pvalue: float | None
    cv: float | None
    late_fraction: float
    detail: str


def exp_gap_test(gaps: np.ndarray, rng: np.random.Generator, max_gaps: int = MAX_GAPS) -> tuple[float, float, float]:
    """(A², p-value, CV) of gaps against an exponential with estimated scale."""
    gaps = np.asarray(gaps, dtype=float)
    cv = float(np.std(gaps, ddof=1) / np.mean(gaps))
    sub = rng.choice(gaps, size=max_gaps, replace=False) if len(gaps) > max_gaps else gaps
    # Ties at zero (sends batched in one iteration) carry no shape information; nudge them to the
    # clock resolution so the log in A² stays finite.
    sub = np.maximum(sub, 1.0)
    res = stats.anderson(sub, dist="expon", method="interpolate")
    return float(res.statistic), float(res.pvalue), cv


def arrival_fit(sent_ns: np.ndarray, intended_ns: np.ndarray, *, process: str, rate_rps: float,
                late_fraction: float, rng: np.random.Generator) -> ArrivalFit:
    """Test the kept requests' send times (any order) against ``process`` ('exp' or 'fixed')."""
    sent = np.sort(np.asarray(sent_ns, dtype=np.int64))
    late_ok = late_fraction <= LATE_LIMIT
    late_txt = f"{late_fraction:.1%} of requests sent late"
    if len(sent) < 50:
        return ArrivalFit(False, process, max(len(sent) - 1, 0), None, None, None, late_fraction,
                          f"only {len(sent)} kept sends: too few to test the arrivals")
    if process == "exp":
        gaps = np.diff(sent).astype(float)
        a2, p, cv = exp_gap_test(gaps, rng)
        # The interpolated p-value is clipped to [0.01, 0.25]: 0.01 means "0.01 or less".
        fit_ok = p > ALPHA or abs(cv - 1.0) <= CV_TOLERANCE
        detail = (f"send gaps vs exponential: A² = {a2:.2f}, p = {p:.3f} on {min(len(gaps), MAX_GAPS):,} of "
                  f"{len(gaps):,} gaps, CV = {cv:.3f} (1 for Poisson); {late_txt}")
        return ArrivalFit(fit_ok and late_ok, process, len(gaps), a2, p, cv, late_fraction, detail)
    lag = sent_ns - intended_ns
    gap_ns = 1e9 / rate_rps
    ratio = float(np.percentile(lag, 99)) / gap_ns
    detail = f"send lag p99 = {ratio:.1%} of the {gap_ns / 1e3:.1f} µs spacing; {late_txt}"
    return ArrivalFit(ratio <= 0.1 and late_ok, process, len(sent) - 1, ratio, None, None, late_fraction, detail)
