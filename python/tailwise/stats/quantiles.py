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
samples for p99, 3,688 for p99.9, 36,887 for p99.99 at 95 % — and is ``None`` below that, never a
made-up number. This is the exact version of the normal approximation Lancet uses
(``j ≈ ⌊np − η√(np(1−p))⌋``, ``k ≈ ⌈np + η√(np(1−p))⌉ + 1``; Lancet §2.3), and what
``scipy.stats.quantile_test(...).confidence_interval()`` computes for raw samples.

References: J.-Y. Le Boudec, *Performance Evaluation of Computer and Communication Systems*,
EPFL Press 2010, §2.4.2 and Annex A; H. A. David & H. N. Nagaraja, *Order Statistics*, 3rd ed.,
Wiley 2003, §7.1.

The point estimate is ``x(⌈np⌉)`` (numpy's ``inverted_cdf``), which always lies inside
``[x(j), x(k)]``. The interval is only valid for independent samples: see the independence
check of the methodology.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import binom

#: The percentiles every summary reports.
DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0, 99.9, 99.99)


@dataclass(frozen=True)
class Percentile:
    """A percentile ``p`` (0–100) of a latency, with its confidence bounds (None: not boundable)."""

    p: float
    value: float | None
    low: float | None
    high: float | None

    def as_json(self) -> dict:
        def ns(v: float | None) -> int | None:
            return None if v is None else int(v)

        return {"p": self.p, "value_ns": ns(self.value), "low_ns": ns(self.low), "high_ns": ns(self.high)}


def order_statistic_ranks(n: int, q: float, confidence: float = 0.95) -> tuple[int | None, int | None]:
    """1-based ranks ``(j, k)`` of the order statistics bounding the ``q``-quantile (0 < q < 1).

    ``None`` for a bound that ``n`` samples cannot give at this confidence.
    """
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile {q} must be strictly between 0 and 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} must be strictly between 0 and 1")
    if n <= 0:
        return None, None
    half = (1.0 - confidence) / 2.0
    j = int(binom.ppf(half, n, q))
    if binom.cdf(j, n, q) <= half:
        j += 1
    k = int(binom.ppf(1.0 - half, n, q)) + 1
    return (j if j >= 1 else None), (k if k <= n else None)


def percentile_ci(sorted_x: np.ndarray, p: float, confidence: float = 0.95) -> Percentile:
    """Percentile ``p`` (0–100) of *sorted* samples with its order-statistic confidence interval."""
    n = len(sorted_x)
    if n == 0:
        return Percentile(p, None, None, None)
    q = p / 100.0
    value = float(sorted_x[max(int(np.ceil(q * n)), 1) - 1])
    j, k = order_statistic_ranks(n, q, confidence)
    low = None if j is None else float(sorted_x[j - 1])
    high = None if k is None else float(sorted_x[k - 1])
    return Percentile(p, value, low, high)


def percentiles(x: np.ndarray, ps=DEFAULT_PERCENTILES, confidence: float = 0.95) -> list[Percentile]:
    """Several percentiles of unsorted samples (sorted once)."""
    s = np.sort(np.asarray(x))
    return [percentile_ci(s, p, confidence) for p in ps]
