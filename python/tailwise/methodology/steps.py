"""The analysis' steps on a snapshot's samples (methodology/analysis.py runs them in order): the
exclusion rule, the delayed requests' lower bounds, the percentiles as bounded intervals, host-wide
pauses and the consistency comparison; each a pure function of what it is given.

What is left out, and what is bounded (ARCHITECTURE.md, "Every request, as an interval")
----------------------------------------------------------------------------------------
Only the warm-up leaves the statistics: the leading span of the run, a whole number of 100 ms
intervals, at most ``--warmup`` and at most ``WARMUP_MAX_SHARE`` of the run, decided by the clock
and reported with its own p99. The coordinator's rounds take nothing away: without a CPU of its
own it pauses the schedule while it computes (controller.py), so no request is due then.

Every other request is in the statistics. Those that tailwise itself may have delayed are
*interval-censored*: the target's own latency lies between a lower bound and the measured value
(stats/bounds.py). By default (``--bounds busy``) that is every request whose busy period — since
the client last had nothing outstanding (the engine's ``busy_from_ns``) — held a stall of an engine
thread, bounded by its latency less that stall time; with ``--bounds floor``, those the engine
flagged per request, never from a latency: sent late (due in a stall of its thread or the guard
after it, or behind such a request in its backlog: ``ENGINE_STALL``) or outstanding across a stall
with their reply possibly read late (``INFLATED``). Each percentile is
reported with the interval that covers both ends and sampling (the value as measured, the low end
from the lower bounds); the ``stalls`` check reports the share delayed and the widening, and fails
only when the widening alone makes the asked percentile's interval miss ``--ci``. Requests without
a reply are *right-censored* at the time they waited, so a freeze can only push the tail up.

Host-wide pauses: when the engine's stalls coincide with stalls of the built-in server, or the
requests just before the engine's stalls exceed the percentile far more often than the rest
(``PROBE_NS``: a host pausing both, or a co-located target taking the client's CPU), a single host
cannot tell whose pause it was; the interval's upper end carries it, and ``host_pauses`` says so
(information, not a failed check).

Consistency: the engine keeps every-request histograms per 100 ms of intended time. Over exactly
the window the statistics used, the every-request distribution (the delayed requests as measured,
like the samples' upper series) must agree with each reported percentile's sampling interval at
``CONSISTENCY_CONFIDENCE``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tailwise import _core
from tailwise.methodology.checks import target_width_ns
from tailwise.results.rows import Flag
from tailwise.spec.precision import Precision
from tailwise.stats.bounds import (bounded_percentile, busy_lower_bounds, floor_ns, lower_bounds, stall_time,
                                   stall_union)
from tailwise.stats.histogram import Buckets
from tailwise.stats.independence import Independence
from tailwise.stats.quantiles import Percentile, percentile_ci

#: Width of the engine's every-request interval histograms (the engine's own: record/interval.rs).
INTERVAL_NS: int = _core.INTERVAL_NS
#: The warm-up never takes more than this share of the run.
WARMUP_MAX_SHARE = 0.10
#: The reported intervals are checked against the every-request distribution at this confidence,
#: so that the six default percentiles give a false alarm in ~0.6 % of runs, not in ~26 %.
CONSISTENCY_CONFIDENCE = 0.999
#: Requests intended this long before each engine stall are the probe of the target's state then.
PROBE_NS = 10_000_000
#: The engine's stalls come with the target's slow moments when the probe exceeds the target
#: percentile this many times more often than the rest (binomial p < PROBE_ALPHA, at least
#: PROBE_MIN_HITS hits): said as a host-wide pause, never a failed check.
PROBE_RATIO = 3.0
PROBE_ALPHA = 1e-3
PROBE_MIN_HITS = 5


def warmup_end_ns(span_ns: int, warmup_ns: int) -> int:
    """The warm-up: the largest whole number of intervals within --warmup and WARMUP_MAX_SHARE of
    the run — so that the every-request window starts exactly where the statistics do."""
    bound = min(int(warmup_ns), int(WARMUP_MAX_SHARE * span_ns))
    return max(0, bound // INTERVAL_NS) * INTERVAL_NS


def probe_correlation(t: np.ndarray, lat: np.ndarray, used: np.ndarray, starts, threshold_ns: float,
                      share: float) -> dict | None:
    """The requests (kept) intended ``PROBE_NS`` before each window start, latencies cut at that
    start: how often they exceed ``threshold_ns`` against the ``share`` expected."""
    from scipy.stats import binom
    if not len(starts) or not used.any() or share <= 0:
        return None
    tu, lu = t[used], lat[used]
    starts = np.asarray(sorted(starts), dtype=np.int64)
    # The next window start after each kept request: it is in the probe if within PROBE_NS.
    j = np.searchsorted(starts, tu, side="right")
    has = j < len(starts)
    nxt = np.where(has, starts[np.clip(j, 0, len(starts) - 1)], 0)
    in_probe = has & (nxt - tu <= PROBE_NS)
    n = int(in_probe.sum())
    if n == 0:
        return None
    capped = np.minimum(lu[in_probe], nxt[in_probe] - tu[in_probe])
    hits = int(np.count_nonzero(capped > threshold_ns))
    ratio = hits / n / share
    pvalue = float(binom.sf(hits - 1, n, share)) if hits else 1.0
    return {"requests": n, "above": hits, "ratio": ratio, "pvalue": pvalue,
            "correlated": hits >= PROBE_MIN_HITS and ratio >= PROBE_RATIO and pvalue < PROBE_ALPHA}


def coinciding(engine_stalls, target_stalls, w0: int, end: int) -> int:
    """How many of the engine's stalls in [w0, end) overlap a stall of the target's."""
    if not engine_stalls or not target_stalls:
        return 0
    tgt = sorted(target_stalls)
    starts = np.array([a for a, _ in tgt], dtype=np.int64)
    ends = np.maximum.accumulate(np.array([b for _, b in tgt], dtype=np.int64))
    count = 0
    for a, b in engine_stalls:
        if not (w0 <= a < end):
            continue
        i = int(np.searchsorted(starts, b, side="left"))  # target stalls that start before b
        count += bool(i > 0 and ends[i - 1] > a)
    return count


def host_pauses(engine_stalls, target_stalls, probe: dict | None, w0: int, end: int, p: float) -> dict:
    """Whether the host paused the client and the target together (module doc): information."""
    in_window = [s for s in engine_stalls if w0 <= s[0] < end]
    both = coinciding(engine_stalls, target_stalls, w0, end)
    correlated = bool(probe and probe["correlated"])
    why = []
    if both:
        why.append(f"{both:,} of the engine's {len(in_window):,} stalls came with a stall of the built-in server")
    if correlated:
        why.append(f"the requests just before the engine's stalls exceeded p{p:g} {probe['ratio']:.1f}× as often as the "
                   f"rest ({probe['above']:,} of {probe['requests']:,})")
    note = None
    if why:
        note = (f"the host paused the client and the target together ({'; '.join(why)}): a measurement on one host "
                f"cannot separate them, so the intervals' upper ends carry those pauses — separate machines for "
                f"client and target, or isolated CPUs, help (see `tailwise doctor`: isolation; it names the "
                f"host's other sources of jitter too)")
    return {"engine_stalls": len(in_window), "with_target_stall": both, "probe": probe, "paused_both": bool(why),
            "note": note}


def consistency(every: Buckets | None, sample_every: int, used_sorted: np.ndarray, est: dict) -> list[dict]:
    """Each supported percentile (``est``: p → (Percentile, Independence)) against the
    every-request distribution of the same window (the delayed requests as measured, like the
    samples' measured values). Returns one row per percentile."""
    rows = []
    if every is None or every.total <= 0:
        return rows
    for pc, ind in est.values():
        if pc.sampling_low is None or pc.sampling_high is None:
            continue
        wide = percentile_ci(used_sorted, pc.p, CONSISTENCY_CONFIDENCE, n_eff=ind.n_effective)
        v_all = every.value_at(pc.p)
        # 1 % resolution of the interval histograms either way.
        below = wide.high is not None and v_all is not None and v_all > wide.high * 1.01
        above = wide.low is not None and v_all is not None and v_all < wide.low * 0.99
        rows.append({"p": pc.p, "value_ns": pc.value, "low_ns": wide.low, "high_ns": wide.high,
                     "every_request_ns": v_all, "with_excluded_ns": v_all, "ok": not (below or above)})
    return rows


@dataclass(frozen=True)
class Exclusion:
    """The exclusion rule's result: the window [``start_ns``, ``end_ns``) of intended times that
    the statistics use; the warm-up before it is what leaves them (``warm``)."""

    start_ns: int
    end_ns: int
    #: Over the samples: intended in the window.
    used: np.ndarray
    #: Over the samples: intended in the warm-up.
    warm: np.ndarray

    @property
    def window_samples(self) -> int:
        return int(self.used.sum())


def exclude_warmup(intended: np.ndarray, end_ns: int | None, warmup_ns: int) -> Exclusion:
    """The exclusion rule, the one step that leaves samples out: the warm-up, decided by the clock
    (``warmup_end_ns``); the window ends at the snapshot (``end_ns``; None: after the last sample)."""
    end = int(end_ns) if end_ns is not None else (int(intended[-1]) + 1 if len(intended) else 0)
    w0 = warmup_end_ns(end, warmup_ns)
    return Exclusion(w0, end, (intended >= w0) & (intended < end), intended < w0)


@dataclass(frozen=True)
class Delays:
    """The requests the client delayed, and their lower bounds (stats/bounds.py). The engine flags
    some per request, never from a latency: sent late (``ENGINE_STALL``) or outstanding across a
    stall (``INFLATED``). Under the busy-period rule (the default) every request whose busy period
    saw a stall of the client is bounded, flagged or not (``behind``: the victims of a stall that
    queued behind its burst); under the floor rule only the flagged ones. None is bounded with
    --keep-stalls."""

    censored: np.ndarray
    sent_late: np.ndarray
    across: np.ndarray
    #: Neither flag, but a stall of the client lies in its busy period (busy rule only).
    behind: np.ndarray
    #: In the window and bounded: between a lower bound and the measured value.
    delayed: np.ndarray
    #: The least latency of a request the client did not delay, anywhere in the run.
    floor: float
    #: The lower bounds of the window's samples (None: none delayed).
    lower_used: np.ndarray | None
    #: "busy" or "floor": the rule the lower bounds follow.
    rule: str = "busy"


def bound_delays(samples: np.ndarray, used: np.ndarray, bounded: bool, rule: str = "busy",
                 stalls=()) -> Delays:
    """Each request the client delayed between its lower bound and its measured value
    (stats/bounds.py): by ``rule`` — "busy", the client's stall time (``stalls``, every engine
    thread's, in the samples' time base) in its busy period; "floor", the floor for one sent late.
    Samples without ``busy_from_ns`` (an older engine) are bounded by the floor rule."""
    lat = samples["latency_ns"].astype(np.int64)
    flags = samples["flags"].astype(np.int64)
    censored = (flags & Flag.CENSORED) != 0
    sent_late = (flags & Flag.ENGINE_STALL) != 0
    across = ((flags & Flag.INFLATED) != 0) & ~sent_late
    answered = ~censored & (samples["sent_ns"] > 0)
    if rule == "busy" and "busy_from_ns" in (samples.dtype.names or ()):
        union = stall_union(stalls)
        intended = samples["intended_ns"].astype(np.int64)
        stalled = stall_time(union, samples["busy_from_ns"].astype(np.int64), intended + lat) > 0
        floor = floor_ns(lat, answered & ~stalled)
        behind = stalled & ~sent_late & ~across
        delayed = used & stalled if bounded else np.zeros(len(samples), bool)
        lower_used = None
        if delayed.any():
            lower = busy_lower_bounds(lat, intended, samples["busy_from_ns"].astype(np.int64), union, floor)
            lower_used = np.where(delayed, lower, lat)[used]
        return Delays(censored, sent_late, across, behind, delayed, floor, lower_used, "busy")
    delayed = used & (sent_late | across) if bounded else np.zeros(len(samples), bool)
    floor = floor_ns(lat, answered & ~sent_late & ~across)
    lower_used = None
    if delayed.any():
        lower = lower_bounds(lat, sent_late & delayed, across & delayed, samples["inflation_ns"], floor)
        lower_used = lower[used]
    return Delays(censored, sent_late, across, np.zeros(len(samples), bool), delayed, floor, lower_used, "floor")


@dataclass(frozen=True)
class Estimates:
    """Every reported percentile on every sample of the window, with its indicator's
    autocorrelation in the variance (bounded where the client delayed requests)."""

    by_p: dict[float, tuple[Percentile, Independence]]
    #: The window's latencies, sorted (the consistency step reuses them).
    used_sorted: np.ndarray
    #: The asked percentile's allowed CI width (None: none asked).
    width_target_ns: float | None

    @property
    def percentiles(self) -> list[Percentile]:
        return [pc for pc, _ in self.by_p.values()]


def estimate(lat_used: np.ndarray, cens_used: np.ndarray, lower_used: np.ndarray | None,
             precision: Precision) -> Estimates:
    used_sorted = np.sort(lat_used)
    lower_sorted = None if lower_used is None else np.sort(lower_used)
    by_p = {p: bounded_percentile(lat_used, lower_used, p, precision.confidence, censored=cens_used,
                                  sorted_upper=used_sorted, sorted_lower=lower_sorted) for p in precision.reported}
    target = by_p[precision.percentile][0]
    return Estimates(by_p, used_sorted, target_width_ns(target.value, precision.ci_ns, precision.ci_rel))
