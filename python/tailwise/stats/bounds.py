"""Percentiles of a target when the client delayed some of its requests: sharp bounds with a CI.

The problem
-----------
A request that tailwise itself delayed — due while its engine thread could not run, or waiting
in the client's backlog behind such a request (sent late by the client's own fault), or
outstanding across a stall of its thread with its reply read late — has a measured latency ``U``
that may hold some of the client's delay. What the target would have given it is not known, but
it lies in an interval ``[L, U]``:

* ``U``, the measured latency (from the intended send time), is at least the target's: the delay
  only adds;
* ``L`` is what the target can be shown to have taken (``lower_bounds``):

  - a request sent late: the run's least latency (``floor_ns``: the least latency of any request
    the client did not delay). The latency from the actual send is *not* a sound bound: the late
    requests leave as a burst and queue at the target behind each other, so their latency from
    the send holds the client's burst, and had they been sent on time each might have found the
    target busier or idler — nothing narrower is provable;
  - a request outstanding across a stall (sent on time, its reply possibly read late): its
    measured latency less the part of the stall (and of the guard after it) that it spans,
    ``U − inflation_ns`` — its reply cannot have come earlier than the start of the stall it waited
    through — and never below the floor.

Every other request is exact (``L = U``). Flagging is the engine's, per request or by the clock,
never by latency (engine/thread.rs): flagging too many requests only widens the result.

Sharp bounds (partial identification)
-------------------------------------
The p-quantile ``ξ`` of the target's latencies over all requests is only *partially identified*:
with every interval-censored request anywhere in ``[L, U]``, the set of possible ``ξ`` is exactly
``[ξ_L, ξ_U]``, ``ξ_L`` the p-quantile with each such request at ``L`` and ``ξ_U`` with each at
``U`` — each order statistic is monotone in every value (Manski, *Partial Identification of
Probability Distributions*, Springer 2003, ch. 1; Horowitz & Manski, JASA 95, 2000). When few
requests are delayed the two are close; when the client's stalls come with the target's slow
moments, the delayed requests carry the tail and ``ξ_U`` is the every-request percentile.

Confidence interval
-------------------
Sampling adds its own uncertainty to each end. The order-statistic interval of the ``L`` series,
``[l_L, h_L]``, and of the ``U`` series, ``[l_U, h_U]`` (quantiles.py: exact binomial ranks on
the effective sample size n/τ, τ from each series' own indicator autocorrelation), each cover
their end with probability ≥ 1 − α, so ``P(l_L ≤ ξ_L) ≥ 1 − α/2`` and ``P(ξ_U ≤ h_U) ≥ 1 − α/2``
and ``[l_L, h_U]`` covers the whole identified set — hence the target's true percentile — with
probability ≥ 1 − α (Horowitz & Manski 2000, §3; Imbens & Manski, Econometrica 72, 2004, give the
slightly narrower interval for the parameter alone, which we do not need to be exact about). With
no delayed request the two series coincide and the interval is exactly the order-statistic CI.

The reported value is ``ξ_U`` estimated, the percentile of every request as measured: no decision
of the client's can make a figure look better than what was measured; the interval says how much
lower the target's own figure may be.

What it costs: the width of ``[l_L, h_U]`` is the sampling width plus the *widening*
``l_U − l_L`` (the ``U`` series' low end to the ``L`` series'); more samples shrink the former
but not the latter, which is set by the share of delayed requests and where they fall.
"""

from __future__ import annotations

import numpy as np

from tailwise.stats.independence import Independence
from tailwise.stats.quantiles import Percentile, estimate_percentile


def floor_ns(latency_ns: np.ndarray, exact: np.ndarray) -> float:
    """The run's least latency among the requests the client did not delay (``exact``, answered):
    no request of the target's can be shown faster, so it bounds every delayed one from below.
    0 when there is none."""
    lat = np.asarray(latency_ns)[np.asarray(exact, dtype=bool)]
    return float(lat.min()) if len(lat) else 0.0


def lower_bounds(latency_ns: np.ndarray, sent_late: np.ndarray, across: np.ndarray, inflation_ns: np.ndarray,
                 floor: float) -> np.ndarray:
    """Each request's least possible latency at the target (module doc): ``floor`` for one sent
    late by the client, its latency less the stall it spans (≥ floor) for one outstanding across
    a stall, its latency for the rest."""
    lat = np.asarray(latency_ns, dtype=np.float64)
    low = lat.copy()
    across = np.asarray(across, dtype=bool) & ~np.asarray(sent_late, dtype=bool)
    low[across] = np.maximum(lat[across] - np.asarray(inflation_ns, dtype=np.float64)[across], floor)
    low[np.asarray(sent_late, dtype=bool)] = floor
    return np.minimum(low, lat)


def bounded_percentile(upper: np.ndarray, lower: np.ndarray | None, p: float, confidence: float = 0.95,
                       censored: np.ndarray | None = None, sorted_upper: np.ndarray | None = None,
                       sorted_lower: np.ndarray | None = None) -> tuple[Percentile, Independence]:
    """Percentile ``p`` (0–100) of requests whose latencies lie in ``[lower, upper]`` (in send
    order), with the interval ``[l_L, h_U]`` that covers the identified set (module doc).
    ``lower`` None: every request exact — the plain order-statistic estimate. ``censored`` marks
    the ``upper`` values that are only lower bounds (quantiles.py). The value is the ``upper``
    series' percentile; ``value_low`` the ``lower`` series'; ``sampling_low``/``sampling_high``
    the ``upper`` series' own interval. The independence returned is the less favourable of the
    two series' (the larger τ; a failure if either failed)."""
    up, ind_up = estimate_percentile(upper, p, confidence, censored=censored, sorted_x=sorted_upper)
    base = Percentile(up.p, up.value, up.low, up.high, up.n_effective, up.samples_needed, up.at_least,
                      value_low=up.value, sampling_low=up.low, sampling_high=up.high, lower_bound=up.lower_bound)
    if lower is None:
        return base, ind_up
    lo, ind_lo = estimate_percentile(lower, p, confidence, sorted_x=sorted_lower)
    ind = ind_lo if (not ind_lo.ok or (ind_up.ok and ind_lo.tau > ind_up.tau)) else ind_up
    known = [x for x in (up.n_effective, lo.n_effective) if x is not None]
    n_eff = min(known) if known else None
    if up.value is None or lo.value is None:
        # Too few effective samples in either series: unsupported, with what the harder one needs
        # and the one-sided lower bound that covers both series, when each has one.
        need = max(up.samples_needed or 0, lo.samples_needed or 0) or None
        floor = min(lo.floor, up.floor) if up.floor is not None and lo.floor is not None else None
        return Percentile(p, None, None, None, n_eff, need, lower_bound=floor), ind
    # No interval at all when either series has none; and never above the measured values' own low
    # end (the lower series, less correlated, can have the tighter ranks): the interval always
    # holds sampling's interval of what was measured.
    low = min(lo.low, up.low) if up.low is not None and lo.low is not None else None
    return Percentile(p, up.value, low, up.high, n_eff, up.samples_needed, up.at_least,
                      value_low=min(lo.value, up.value), sampling_low=up.low, sampling_high=up.high), ind

