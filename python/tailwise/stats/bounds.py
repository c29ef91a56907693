"""Percentiles of a target when the client delayed some of its requests: per-request bounds, the
percentile's sharp bounds, and a CI.

The problem
-----------
A request's measured latency ``U`` runs from its intended send time to the moment its reply was
read. When tailwise's own engine thread stalled (≥ 200 µs between two clock reads: it could not
send on time, or read a reply that had come), ``U`` may hold some of the client's delay as well as
the target's. What the target alone would have given the request — its latency in the same run
with the client never stalled, the *undelayed* latency ``U°`` — is not observed, but it lies in an
interval ``[L, U]``; ``busy_lower_bounds`` gives ``L``.

The client and the target as a max-plus system
-----------------------------------------------
Number the requests in intended order (due times ``t_n``). The client sends them in that order from
a FIFO backlog through ``C × K`` slots (request ``n`` waits for the slot that the read of
``n − CK`` frees), its send stage costs ``c`` a request and its read stage ``r`` a reply; the
target serves them in order (one FIFO server, the Lindley recursion; Lindley, Proc. Cambridge
Phil. Soc. 48, 1952). Send, departure and read times are then::

    x_n = π(max(t_n, x_{n−1} + c, R_{n−CK}))
    D_n = max(x_n + c, D_{n−1}) + s_n
    R_n = π(max(D_n, R_{n−1} + r))             U_n = R_n − t_n

where ``π`` is the client's stalls: ``π(y)`` is the end of the stall window holding ``y``, or ``y``
outside every window (Σ, their union). Without stalls (``π`` the identity) every event is a max of
earlier events plus constants: a max-plus linear system, a timed event graph (Baccelli, Cohen,
Olsder & Quadrat, *Synchronization and Linearity*, Wiley 1992; BCOQ below). Such a map is
monotone (no event comes earlier when an input comes later) and additively homogeneous, hence
1-Lipschitz in the sup norm (Crandall & Tartar, Proc. AMS 78, 1980): inputs later by at most
``δ`` make no event later by more than ``δ``. The stalls act as vacations of the client's two
stages, and ``π(y) − y ≤ |Σ ∩ [y, π(y))|``.

The rule
--------
Let ``B_n ≤ t_n`` be the last instant at or before ``t_n`` at which the client had nothing
outstanding: every backlog empty, every earlier reply read, nothing due (``busy_from_ns``, the
engine's). Then, for every request::

    L_n = max(floor, U_n − |Σ ∩ [B_n, R_n)|),      R_n = t_n + U_n

* *Regeneration.* At ``B_n`` the real system is empty: every request due before it has been read,
  so the target and both stages are idle. The undelayed system is empty too, since by
  monotonicity each of its events is no later than the real one. No event before ``B_n`` can bind
  one of a request due at or after it, so from ``B_n`` on both systems start empty with the same
  due times and service times and differ only by the vacations.
* *Lipschitz step.* (° marks the undelayed run.) By induction over the events in order: if each
  earlier event obeys ``e ≤ e° + |Σ ∩ [B_n, e)|``, so does the next, ``e = π(y)``: its binding
  term ``y = a + k`` (an earlier event plus a constant) is at most ``y° + |Σ ∩ [B_n, a)|`` (max
  and constants keep the bound), and ``π`` adds at most ``|Σ ∩ [y, π(y))|``, disjoint from the
  first part, both inside ``[B_n, e)``. At the read: ``R_n − R°_n ≤ |Σ ∩ [B_n, R_n)|``,
  so ``U°_n ≥ U_n − |Σ ∩ [B_n, R_n)|``; and ``U°_n ≤ U_n`` by monotonicity.
* *Why [B_n, R_n) and not [t_n, R_n).* A request due just after a stall ends can carry the whole
  stall: the burst the client sends at the stall's end queues (in its slots and at the target)
  ahead of it. Such a *victim* was never due in a stall nor outstanding across one, yet is late by
  up to the stall's length. Its busy period began before the stall, so the stall counts; once the
  client went idle, nothing of an earlier stall carries over, and it does not count.

Where the busy period saw no stall, ``L_n = U_n``: the request is exact. ``floor`` (``floor_ns``,
the least latency of a request the client did not delay) keeps ``L`` from claiming a target faster
than any seen. It is empirical, not part of the proof: an undelayed latency can lie below it
(with exponential service times, a few requests in a million, by nanoseconds).

What is assumed. The target serves each connection in order, with service times that do not
depend on when requests arrive: one FIFO server as above, or FIFO workers each owning its
connections — any network of FIFO stations whose routing is fixed in advance is a timed event
graph too (BCOQ), and the argument is the same. So not for processor-sharing, priority or
overtaking servers, for
timing-dependent routing across workers (the worker a request reaches depends on when it is sent),
or for pipelined batches (a batch's contents depend on the send times). Nor is a target whose
speed depends on wall-clock time 1-Lipschitz: a stall that pushes a request from just before a
freeze of the target into it adds the whole freeze, and the bound can then exceed ``U°`` for the
few requests at the freeze's start. Where these do not hold, use the *floor rule*
(``lower_bounds``), which assumes nothing of the target for the requests it flags: a request the
engine flags sent late gets ``L = floor`` (its latency from the
actual send is no bound: the late burst queues at the target behind itself); one flagged
outstanding across a stall gets ``U − inflation_ns`` (≥ floor; the reply cannot have come before
the stall it waited through; ``inflation_ns`` saturated at 2³² − 1 ns gives the floor); every
other request counts as exact. It is neither sound for victims (they count as exact, and no rule
can bound them without a model of the target) nor tight for a request delayed by a few
milliseconds inside a long freeze (it drops to the floor).

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


#: ``inflation_ns`` is a u32 in the engine, saturated here: the stall spanned is unknown.
INFLATION_SATURATED = 2**32 - 1


def lower_bounds(latency_ns: np.ndarray, sent_late: np.ndarray, across: np.ndarray, inflation_ns: np.ndarray,
                 floor: float) -> np.ndarray:
    """The floor rule (module doc): ``floor`` for a request sent late by the client, its latency
    less the stall it spans (≥ floor; the floor when ``inflation_ns`` saturated) for one outstanding
    across a stall, its latency for the rest."""
    lat = np.asarray(latency_ns, dtype=np.float64)
    infl = np.asarray(inflation_ns)
    low = lat.copy()
    late = np.asarray(sent_late, dtype=bool)
    across = np.asarray(across, dtype=bool) & ~late
    low[across] = np.maximum(lat[across] - infl[across].astype(np.float64), floor)
    low[across & (infl >= INFLATION_SATURATED)] = floor
    low[late] = floor
    return np.minimum(low, lat)


def stall_union(windows) -> np.ndarray:
    """The union Σ of stall windows ``(start, end)`` (ns, half-open), as sorted disjoint windows
    (k×2 int64); empty windows are dropped, overlapping or touching ones merged."""
    w = np.asarray(windows, dtype=np.int64).reshape(-1, 2)
    w = w[w[:, 1] > w[:, 0]]
    if not len(w):
        return w
    w = w[np.argsort(w[:, 0], kind="stable")]
    reach = np.maximum.accumulate(w[:, 1])
    first = np.flatnonzero(np.r_[True, w[1:, 0] > reach[:-1]])  # starts past every earlier window's end
    return np.column_stack([w[first, 0], np.maximum.reduceat(w[:, 1], first)])


def _measure_before(union: np.ndarray, x: np.ndarray) -> np.ndarray:
    """|Σ ∩ (−∞, x)| for each x."""
    starts, ends = union[:, 0], union[:, 1]
    before = np.r_[0, np.cumsum(ends - starts)]  # the measure of the windows before window j
    j = np.searchsorted(starts, x, side="right")  # windows starting at or before x
    last = np.maximum(j - 1, 0)
    inside = np.clip(x - starts[last], 0, (ends - starts)[last])
    return np.where(j > 0, before[last] + inside, 0)


def stall_time(union: np.ndarray, a, b) -> np.ndarray:
    """|Σ ∩ [a_i, b_i)| for each i (0 where b_i ≤ a_i), Σ a ``stall_union``: the difference of its
    cumulative measure at the two ends. Integer in, integer out."""
    a, b = np.asarray(a), np.asarray(b)
    union = np.asarray(union, dtype=np.int64).reshape(-1, 2)
    if not len(union):
        return np.zeros(np.broadcast(a, b).shape, dtype=np.result_type(a, b, np.int64))
    return np.maximum(_measure_before(union, b) - _measure_before(union, a), 0)


def busy_lower_bounds(latency_ns: np.ndarray, intended_ns: np.ndarray, busy_from_ns: np.ndarray, union: np.ndarray,
                      floor: float) -> np.ndarray:
    """The max-plus rule (module doc): ``max(floor, U − |Σ ∩ [B, intended + U)|)``, never above
    ``U``; exactly ``U`` where the busy period from ``B = busy_from_ns`` to the reply saw no stall
    of Σ (``stall_union``, the engine's stall windows of every thread, in the samples' time base).
    A censored request (``U`` only the time it waited) gets a valid bound too: ``U − |Σ ∩ [B, t + U)|``
    is nondecreasing in ``U``."""
    lat = np.asarray(latency_ns)
    lat = lat.astype(np.int64) if lat.dtype.kind == "u" else lat  # u64 from the engine: no float mix
    stalled = stall_time(union, np.asarray(busy_from_ns, dtype=np.int64), np.asarray(intended_ns, dtype=np.int64) + lat)
    low = np.where(stalled > 0, np.maximum(lat - stalled.astype(np.float64), floor), lat).astype(np.float64)
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

