"""Distribution-free confidence intervals for percentiles, from order statistics.

Derivation
----------
Let ``x(1) <= ... <= x(n)`` be ``n`` independent draws from a continuous distribution with
p-quantile ``ξ``. Each draw falls below ``ξ`` with probability ``p``, so the number ``B`` of draws
below ``ξ`` is Binomial(n, p), and ``x(j) <= ξ < x(k)`` exactly when ``j <= B < k``::

    P(x(j) <= ξ < x(k)) = P(j <= B <= k - 1) = F(k - 1) - F(j - 1),   F = Binomial(n, p) cdf

Splitting ``α = 1 - confidence`` evenly between the tails gives the equal-tailed interval:

* ``j`` = the largest rank with ``F(j - 1) <= α/2``;
* ``k`` = the smallest rank with ``F(k - 1) >= 1 - α/2``.

With ``ppf(q) = min{m : F(m) >= q}`` (``scipy.stats.binom.ppf``), ``k = ppf(1 - α/2) + 1`` and
``j = ppf(α/2)``, raised by one when ``F(ppf(α/2)) == α/2`` exactly. A bound exists only if its
rank lies in ``1..n``: the upper one needs ``p**n <= α/2``, i.e. ``n >= ln(α/2) / ln(p)`` — 368
samples for p99, 3,688 for p99.9, 36,887 for p99.99 at 95 % — and the lower one
``(1 - p)**n <= α/2`` (:func:`samples_needed`). This is the exact version of the normal
approximation Lancet uses (``j ≈ ⌊np − η√(np(1−p))⌋``, ``k ≈ ⌈np + η√(np(1−p))⌉ + 1``; Lancet
§2.3), and what ``scipy.stats.quantile_test(...).confidence_interval()`` computes for raw samples.

References: J.-Y. Le Boudec, *Performance Evaluation of Computer and Communication Systems*,
EPFL Press 2010, §2.4.2 and Annex A; H. A. David & H. N. Nagaraja, *Order Statistics*, 3rd ed.,
Wiley 2003, §7.1.

The point estimate is ``x(⌈np⌉)`` (numpy's ``inverted_cdf``), which lies inside ``[x(j), x(k)]``.

Autocorrelated samples: effective sample size
---------------------------------------------
Latencies of queued requests are correlated, and so is the indicator ``1{xᵢ <= ξ}`` whose sum is
``B``: its variance is ``n p(1 − p) τ`` rather than ``n p(1 − p)``, ``τ`` the integrated
autocorrelation time of the indicator (independence.py). Every sample is kept and the count is
taken on the scale of ``n_eff = n/τ`` samples — ``τ`` at its one-sided 99 % upper confidence
bound, so that τ's own estimation error does not narrow the interval (independence.py, "Carrying
τ's own error"; ``estimate_percentile`` passes that ``n_eff``): the ranks ``j, k`` come from
Binomial(m, p), ``m = round(n_eff)``, and are carried to the full sample at the same quantile
level — rank ``j`` of ``m`` is the empirical ``j/m``-quantile, which in ``n`` samples is
``x(⌈j·n/m⌉)`` — the usual effective-sample-size adjustment (Thiébaux & Zwiers, J. Clim. Appl. Meteor. 23, 1984;
Geyer, Stat. Sci. 7, 1992). With ``n_eff >= n`` it is exactly the i.i.d. interval. A bound that
``m`` samples cannot give is missing; then the percentile is *unsupported*: value and bounds are
None and ``samples_needed`` says how many effective samples would bound it — an unsupported
percentile is never reported as a number. What the samples do give is kept apart, as
``lower_bound``: the lower rank ``x(j)`` needs only ``(1 − q)**m <= α/2`` (a handful of samples for
a high percentile), and alone it is a one-sided bound at ``1 − α/2`` (97.5 % for a 95 % interval)
— "p99.99 is at least this", the bound a run too short or too clustered for the percentile has.

Family-wise level: each such bound holds at its own ``1 − α/2``, and so does each interval; the
bounds of several percentiles reported together — the six ``DEFAULT_PERCENTILES`` (p50 … p99.99),
any of which may be "≥ x" — carry no joint level. Bonferroni's inequality gives only that all six
hold at once with probability ≥ ``1 − 6·α/2`` (85 % for 95 % intervals); nothing more is claimed.
A Bonferroni-adjusted family, each bound at ``1 − α/12`` so that all six hold at ≥ 97.5 %, would
put each lower rank z = 2.64 instead of 1.96 binomial standard deviations below ``m·q`` (35 %
farther from the point estimate), at the cost of no more than one or two effective samples for
the bound to exist (``(1 − q)**m <= α/12``).

What may be left out, and censored values
-----------------------------------------
No sample leaves the statistics because of its value. A request that
timed out, was never sent or is still in flight has a right-censored latency: the true value is at
least the time it has been outstanding (its *bound*). Sort every sample at its value or bound
(``y(1) <= … <= y(n)``); the true order statistics satisfy ``x(r) >= y(r)`` for every rank, since
raising some values can only raise each order statistic. Hence:

* the lower bound ``y(j)`` stays a valid lower bound (``x(j) >= y(j)``);
* the upper bound: if ``m`` censored bounds are ``<= y(k)``, at most ``m`` of the ``k`` smallest
  observed values belong above, so ``x(k) <= y(k + m)`` — the bound moves up by ``m`` ranks, and
  is unknown (None) past ``y(n)``; with ``m = 0`` it is exact;
* the value ``y(⌈np⌉)`` is a lower bound of ``x(⌈np⌉)``; it is flagged *at least*
  (``at_least=True``) when the same shift could carry it past its own upper bound — a few
  requests in flight at a snapshot cannot, a freeze still going on does.

Below a censored bound the indicator ``1{x <= ξ}`` is known exactly (0), so counting the censored
requests in keeps the binomial argument valid; dropping them would bias every percentile down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from tailwise.stats import DEFAULT_PERCENTILES
from tailwise.stats.independence import Independence, independence


@dataclass(frozen=True)
class Percentile:
    """A percentile ``p`` (0–100) of a latency, with its confidence bounds (None: not boundable).

    Unsupported (too few effective samples for both bounds): ``value``, ``low`` and ``high`` are
    None, ``samples_needed`` the effective sample count that would bound it and ``lower_bound``
    the one-sided lower bound the samples do give (module doc; None when supported, or when even
    that is out of reach). ``at_least``:
    censored samples reach the value, which is then only a lower bound on the true percentile.
    """

    p: float
    value: float | None
    low: float | None
    high: float | None
    n_effective: float | None = None
    samples_needed: int | None = None
    at_least: bool = False
    #: With requests the client delayed (bounds.py): the percentile with each of them at its lower
    #: bound (``value`` has them as measured), and the interval of sampling alone, of which
    #: ``low``–``high`` is the widening to the identified set. Without, ``value`` and ``low``–``high``.
    value_low: float | None = None
    sampling_low: float | None = None
    sampling_high: float | None = None
    lower_bound: float | None = None

    @property
    def supported(self) -> bool:
        """Both bounds exist: the data support an interval for this percentile."""
        return self.low is not None and self.high is not None

    def as_json(self) -> dict:
        def ns(v: float | None) -> int | None:
            return None if v is None else int(v)

        return {"p": self.p, "value_ns": ns(self.value), "low_ns": ns(self.low), "high_ns": ns(self.high),
                "n_effective": self.n_effective, "samples_needed": self.samples_needed, "censored": self.at_least,
                "value_low_ns": ns(self.value_low), "sampling_low_ns": ns(self.sampling_low),
                "sampling_high_ns": ns(self.sampling_high), "lower_bound_ns": ns(self.lower_bound)}

    @property
    def floor(self) -> float | None:
        """The lowest the percentile can be at ``1 − α/2``, one-sided: the interval's low end when
        there is one, else the unsupported percentile's ``lower_bound``."""
        return self.low if self.low is not None else self.lower_bound

    @property
    def widening(self) -> float | None:
        """How much lower the interval reaches than sampling alone would: the requests the client
        delayed, at their lower bounds (0 without any)."""
        if self.low is None or self.sampling_low is None:
            return None
        return max(self.sampling_low - self.low, 0.0)


def _check(q: float, confidence: float) -> None:
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile {q} must be strictly between 0 and 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} must be strictly between 0 and 1")


def order_statistic_ranks(n: int, q: float, confidence: float = 0.95) -> tuple[int | None, int | None]:
    """1-based ranks ``(j, k)`` of the order statistics bounding the ``q``-quantile (0 < q < 1).

    ``None`` for a bound that ``n`` samples cannot give at this confidence.
    """
    from scipy.stats import binom
    _check(q, confidence)
    if n <= 0:
        return None, None
    half = (1.0 - confidence) / 2.0
    j = int(binom.ppf(half, n, q))
    if binom.cdf(j, n, q) <= half:
        j += 1
    k = int(binom.ppf(1.0 - half, n, q)) + 1
    return (j if j >= 1 else None), (k if k <= n else None)


def samples_needed(p: float, confidence: float = 0.95) -> int:
    """The fewest independent samples for which both bounds of percentile ``p`` (0–100) exist:
    ``q**n <= α/2`` (upper) and ``(1 − q)**n <= α/2`` (lower), ``q = p/100``. 368 for p99, 3,688
    for p99.9, 36,887 for p99.99 at 95 %."""
    q = p / 100.0
    _check(q, confidence)
    half = (1.0 - confidence) / 2.0
    n = max(math.ceil(math.log(half) / math.log(max(q, 1.0 - q))), 1)
    # Guard the floating-point ceiling against the exact rank condition.
    while n > 1 and None not in order_statistic_ranks(n - 1, q, confidence):
        n -= 1
    while None in order_statistic_ranks(n, q, confidence):
        n += 1
    return n


def value_rank(p: float, n: int) -> int:
    """The 1-based rank ``⌈np/100⌉`` of the point estimate, in exact decimal arithmetic: in floating
    point ⌈0.999 · 200,000⌉ is 199,801, one rank too high."""
    return min(max(math.ceil(Fraction(repr(float(p))) * n / 100), 1), max(n, 1))


def _ranks(n: int, q: float, confidence: float, n_eff: float | None) -> tuple[int | None, int | None, float | None]:
    """Ranks in ``1..n`` of the bounds, on the effective-sample scale when ``n_eff < n``."""
    if n_eff is None or math.isnan(n_eff) or n_eff >= n:
        j, k = order_statistic_ranks(n, q, confidence)
        return j, k, None if n_eff is None or math.isnan(n_eff) else float(n)
    m = int(round(n_eff))
    j, k = order_statistic_ranks(m, q, confidence)
    scale = n / m if m > 0 else 0.0

    def carry(r: int | None) -> int | None:
        return None if r is None else min(max(math.ceil(r * scale), 1), n)

    return carry(j), carry(k), float(n_eff)


def percentile_ci(sorted_x: np.ndarray, p: float, confidence: float = 0.95, n_eff: float | None = None) -> Percentile:
    """Percentile ``p`` (0–100) of *sorted* samples with its order-statistic confidence interval,
    the count widened to ``n_eff`` effective samples when given and below ``n`` (module doc).
    Unsupported (value None, ``samples_needed`` set) when a bound is missing; the lower one, when
    it exists, is kept as the one-sided ``lower_bound``."""
    n = len(sorted_x)
    q = p / 100.0
    need = samples_needed(p, confidence)
    j, k, n_eff_used = _ranks(n, q, confidence, n_eff)
    if j is None or k is None:
        return Percentile(p, None, None, None, n_eff_used, need,
                          lower_bound=None if j is None else float(sorted_x[j - 1]))
    value = float(sorted_x[value_rank(p, n) - 1])
    return Percentile(p, value, float(sorted_x[j - 1]), float(sorted_x[k - 1]), n_eff_used)


def percentiles(x: np.ndarray, ps=DEFAULT_PERCENTILES, confidence: float = 0.95) -> list[Percentile]:
    """Several percentiles of unsorted samples (sorted once), as if independent."""
    s = np.sort(np.asarray(x))
    return [percentile_ci(s, p, confidence) for p in ps]


def estimate_percentile(lat_in_send_order: np.ndarray, p: float, confidence: float = 0.95,
                        censored: np.ndarray | None = None,
                        sorted_x: np.ndarray | None = None) -> tuple[Percentile, Independence]:
    """Percentile ``p`` (0–100) of all samples with a CI widened by their autocorrelation.

    ``lat_in_send_order``: latencies (ns) in the order the requests were sent; ``censored``: an
    optional boolean mask of samples whose latency is only a lower bound (timed out, never sent,
    still in flight), given at that bound; ``sorted_x``: the same latencies sorted, when the caller
    has them (several percentiles of one series). The independence of the percentile's indicator is
    judged on the series in send order (independence.py); the interval is then taken on every
    sample with its effective size. If the correlation cannot be judged (``ind.ok`` False) the
    value stands but no interval is claimed (bounds None), unless there are too few samples for
    the percentile at all (then unsupported). Censored samples: see the module doc (the value
    becomes ``at_least``, the upper bound unknown when censored bounds reach them).
    """
    x = np.asarray(lat_in_send_order, dtype=float)
    n = len(x)
    ind = independence(x, p)
    need = samples_needed(p, confidence)
    if n < need and not ind.ok:  # no effective size to carry a one-sided bound either
        return Percentile(p, None, None, None, float(n), need), ind
    sx = np.sort(x) if sorted_x is None else np.asarray(sorted_x, dtype=float)
    if n < need or ind.ok:
        pc = percentile_ci(sx, p, confidence, ind.n_effective)
    else:  # correlated beyond reach: the value stands, no interval can be claimed
        pc = Percentile(p, float(sx[value_rank(p, n) - 1]), None, None, None)
    if censored is None or pc.value is None:
        return pc, ind
    cens = np.asarray(censored, dtype=bool)
    if cens.shape != x.shape:
        raise ValueError(f"censored mask of shape {cens.shape} for {x.shape} latencies")
    if not cens.any():
        return pc, ind
    # Each censored sample may really lie anywhere above its bound, so the true k-th order
    # statistic is at most the bound order's (k + m)-th, m the censored bounds at or below it:
    # the upper bound moves up by m ranks (unknown past the last sample); the lower bound holds.
    # The value is flagged a lower bound only when that shift could carry it past its interval —
    # a few requests in flight at a snapshot do not, a freeze still going on does.
    bounds = np.sort(x[cens])

    def shifted(v: float | None) -> float | None:
        if v is None:
            return None
        k = int(np.searchsorted(sx, v, side="right"))  # rank of v's last copy
        m = int(np.searchsorted(bounds, v, side="right"))
        return float(sx[k + m - 1]) if k + m <= n else None

    high = shifted(pc.high)
    top = shifted(pc.value)
    at_least = top is None or (pc.high is not None and top > pc.high) or (pc.high is None and top > pc.value)
    return Percentile(p, pc.value, pc.low, high, pc.n_effective, pc.samples_needed, at_least), ind
