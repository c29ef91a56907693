"""One pass of every check over a consistent snapshot of a run: a pure function of the data.

The order is the methodology's (Lancet Fig. 4, completed): load → arrivals → stationarity →
independence → confidence → consistency. ``Analysis.state`` names the first step that failed, or
``done``; the controller decides from it whether to collect more or conclude.

What is left out, and what is bounded (ARCHITECTURE.md, "Every request, as an interval")
----------------------------------------------------------------------------------------
Only the warm-up leaves the statistics: the leading span of the run, a whole number of 100 ms
intervals, at most ``--warmup`` and at most ``WARMUP_MAX_SHARE`` of the run, decided by the clock
and reported with its own p99. The coordinator's rounds take nothing away: without a CPU of its
own it pauses the schedule while it computes (controller.py), so no request is due then.

Every other request is in the statistics. Those that tailwise itself delayed — flagged by the
engine per request, never from a latency: sent late (due in a stall of its thread or the guard
after it, or behind such a request in its backlog: ``ENGINE_STALL``) or outstanding across a stall
with their reply possibly read late (``INFLATED``) — are *interval-censored*: the target's own
latency lies between a lower bound and the measured value (stats/bounds.py). Each percentile is
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

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy.stats import binom

from tailwise import _core
from tailwise.agent.local import Flag
from tailwise.methodology.checks import (
    Check,
    Setting,
    arrivals_check,
    confidence_check,
    consistency_check,
    errors_check,
    exclusions_check,
    independence_check,
    rate_check,
    stalls_check,
    stationarity_check,
    target_width_ns,
)
from tailwise.stats.arrivals import arrival_fit
from tailwise.stats.bounds import bounded_percentile, floor_ns, lower_bounds
from tailwise.stats.histogram import Buckets
from tailwise.stats.quantiles import DEFAULT_PERCENTILES, Percentile, percentile_ci
from tailwise.stats.stationarity import stationarity

#: The methodology's steps in order, each with its checks; ``Analysis.state`` is the first that fails.
STEPS: dict[str, tuple[str, ...]] = {
    "load": ("rate", "errors", "stalls", "exclusions"),
    "arrivals": ("arrivals",),
    "stationarity": ("stationarity",),
    "independence": ("independence",),
    "confidence": ("confidence",),
    "consistency": ("consistency",),
}
STATES = tuple(STEPS)

#: Width of the engine's every-request interval histograms (the engine's own: recorder.rs).
INTERVAL_NS: int = _core.INTERVAL_NS
#: The warm-up never takes more than this share of the run.
WARMUP_MAX_SHARE = 0.10
DEFAULT_WARMUP_NS = 100_000_000
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


@dataclass(frozen=True)
class Precision:
    """What the user asks for: a percentile, the CI width (absolute or relative), confidence; and
    the time budget and the warm-up bound; and the percentiles to report (``percentile`` among them)."""

    percentile: float = 99.0
    ci_ns: float | None = None
    ci_rel: float | None = None
    confidence: float = 0.95
    max_time_s: float = 60.0
    warmup_ns: int = DEFAULT_WARMUP_NS
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES

    @property
    def reported(self) -> list[float]:
        """The percentiles a summary reports: those asked and the one whose CI must meet --ci."""
        return sorted({*self.percentiles, self.percentile})


@dataclass
class Analysis:
    checks: list[Check]
    state: str  # first failing step, or "done"
    percentiles: list[Percentile]
    target: Percentile | None
    used_mask: np.ndarray  # over the samples given: True where a sample went into the statistics
    window: tuple[int, int]  # intended times [start, end) the statistics used (ns since the start)
    samples_needed: int | None
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.state == "done"

    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]


def warmup_end_ns(span_ns: int, warmup_ns: int) -> int:
    """The warm-up: the largest whole number of intervals within --warmup and WARMUP_MAX_SHARE of
    the run — so that the every-request window starts exactly where the statistics do."""
    bound = min(int(warmup_ns), int(WARMUP_MAX_SHARE * span_ns))
    return max(0, bound // INTERVAL_NS) * INTERVAL_NS


def probe_correlation(t: np.ndarray, lat: np.ndarray, used: np.ndarray, starts, threshold_ns: float,
                      share: float) -> dict | None:
    """The requests (kept) intended ``PROBE_NS`` before each window start, latencies cut at that
    start: how often they exceed ``threshold_ns`` against the ``share`` expected."""
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
                f"client and target, or isolated CPUs, help (tailwise doctor, when it exists, names the host's "
                f"sources of jitter)")
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


def analyse(samples: np.ndarray, *, counters: dict, elapsed_s: float, received_in_window: int, reasons,
            rate_rps: float, arrival: str, conns: int, outstanding: int, sample_every: int,
            precision: Precision, rng: np.random.Generator, end_ns: int | None = None,
            pauses=(), engine_stalls=(), target_stalls=(), bound_delays: bool = True,
            every_request: Callable[[int, int], Buckets | None] | None = None,
            late_ns: int | None = None, setting: Setting | None = None) -> Analysis:
    """``samples``: SAMPLE_DTYPE records sorted by intended send time — every sampled request,
    finished or censored (outstanding ones at ``end_ns``, the snapshot time). ``pauses``: the
    coordinator's pauses of the schedule (ns since the start; no request is intended in them);
    ``engine_stalls`` and ``target_stalls``: the stalls of the engine threads and of an
    in-process server (their effect on requests is in the samples' flags); ``bound_delays`` false
    takes the requests the client delayed as measured (--keep-stalls). ``every_request(first,
    last)``: the every-request histogram of intervals first … last − 1. ``elapsed_s`` is the time
    the schedule ran, pauses left out. ``setting``: how the client ran (for remedies that never
    recommend what is already the case)."""
    t = samples["intended_ns"].astype(np.int64)
    lat = samples["latency_ns"].astype(np.int64)
    sent = samples["sent_ns"].astype(np.int64)
    flags = samples["flags"].astype(np.int64)
    n = len(samples)
    end = int(end_ns) if end_ns is not None else (int(t[-1]) + 1 if n else 0)
    w0 = warmup_end_ns(end, precision.warmup_ns)
    used = (t >= w0) & (t < end)
    censored = (flags & Flag.CENSORED) != 0
    sent_late = (flags & Flag.ENGINE_STALL) != 0
    across = ((flags & Flag.INFLATED) != 0) & ~sent_late
    delayed = used & (sent_late | across) if bound_delays else np.zeros(n, bool)
    window_n = int(used.sum())

    lat_used, cens_used = lat[used], censored[used]
    answered = used & ~censored & (sent > 0)
    response_ns = float(np.mean(lat[answered] - (sent[answered] - t[answered]))) if answered.any() else None

    achieved = counters["sent"] / elapsed_s if elapsed_s > 0 else None
    completed = received_in_window / elapsed_s if elapsed_s > 0 else None
    checks = [rate_check(rate_rps, achieved, completed, elapsed_s, conns=conns, outstanding=outstanding,
                         response_ns=response_ns),
              errors_check(counters, reasons)]

    # Each delayed request between its lower bound and its measured value (stats/bounds.py); the
    # floor is the least latency of a request the client did not delay, anywhere in the run.
    floor = floor_ns(lat, ~censored & ~sent_late & ~across & (sent > 0))
    lower_used = None
    if delayed.any():
        lower = lower_bounds(lat, sent_late & delayed, across & delayed, samples["inflation_ns"], floor)
        lower_used = lower[used]

    # Percentiles on every sample in the window, with the indicator's autocorrelation in the variance.
    ps = precision.reported
    used_sorted = np.sort(lat_used)
    lower_sorted = None if lower_used is None else np.sort(lower_used)
    est = {p: bounded_percentile(lat_used, lower_used, p, precision.confidence, censored=cens_used,
                                 sorted_upper=used_sorted, sorted_lower=lower_sorted) for p in ps}
    pcts = [est[p][0] for p in ps]
    target, ind = est[precision.percentile]
    width_target = target_width_ns(target.value, precision.ci_ns, precision.ci_rel)

    # Did the host pause the client and the target together? (information)
    share = 1.0 - precision.percentile / 100.0
    stall_starts = [a for a, _ in engine_stalls if w0 <= a < end]
    probe = (probe_correlation(t, lat, used & ~delayed, stall_starts, target.value, share)
             if target.value is not None else None)
    pauses_both = host_pauses(engine_stalls, target_stalls, probe, w0, end, precision.percentile)

    n_late, n_across = int((delayed & sent_late).sum()), int((delayed & across).sum())
    checks.append(stalls_check(engine_stalls, target_stalls, sent_late=n_late, across=n_across, window=window_n,
                               target=target, width_target_ns=width_target, setting=setting,
                               host_pause=pauses_both["note"], bounded=bound_delays,
                               flagged=int((used & (sent_late | across)).sum())))
    warm = t < w0
    checks.append(exclusions_check(warmup_samples=int(warm.sum()), warmup_s=w0 / 1e9, window=window_n,
                                   delayed=n_late + n_across))

    # What the server saw: every request sent in the window.
    was_sent = used & (sent > 0)
    late_fraction = (float(np.mean((sent[was_sent] - t[was_sent]) > late_ns)) if late_ns is not None and was_sent.any()
                     else counters["late"] / max(counters["sent"], 1))
    # Gaps across a pause are the coordinator's, not the process's. Segments end where a pause
    # ends: an engine thread that noticed the pause late (a stall) still sent, at their own times,
    # requests due after the pause began, and its schedule resumes only after the pause's end.
    pause_ends = np.sort(np.array([b for _, b in pauses], dtype=np.int64))
    segments = np.searchsorted(pause_ends, t[was_sent], side="right") if len(pause_ends) else None
    fit = arrival_fit(sent[was_sent], t[was_sent], process=arrival, rate_rps=rate_rps, late_fraction=late_fraction,
                      rng=rng, segments=segments)
    checks.append(arrivals_check(fit))

    # Steady state is judged on the measured values: a request the backlog rule marks delayed may
    # be the target's (an engine stall inside a freeze of the target marks the freeze's backlog),
    # and at its lower bound the freeze would vanish from the test. A client's own transient fails
    # it too, and the remedy names both.
    st = stationarity(t[used], lat_used, precision.percentile)
    checks.append(stationarity_check(st))
    checks.append(independence_check(ind, sample_every))
    paused_ns = sum(max(0, min(b, end) - max(a, w0)) for a, b in pauses)
    span_s = (end - w0 - paused_ns) / 1e9
    rate_used = used.sum() / span_s if span_s > 0 else None
    conf, needed = confidence_check(target, window_n, precision.confidence, width_target, rate_used)
    checks.append(conf)

    every = every_request(w0 // INTERVAL_NS, -(-end // INTERVAL_NS)) if every_request is not None else None
    rows = consistency(every, sample_every, used_sorted, est)
    checks.append(consistency_check(rows, sample_every, every is not None))

    by_name = {c.name: c for c in checks}
    state = "done"
    for step_name, names in STEPS.items():
        if not all(by_name[nm].ok for nm in names):
            state = step_name
            break

    warm_p99 = float(np.percentile(lat[warm], 99, method="inverted_cdf")) if warm.any() else None
    n_delayed = n_late + n_across
    details = {
        "window_ns": [w0, end],
        "window_every_request": {} if every is None else {
            "count": int(every.total),
            "percentiles": [{"p": p, "value_ns": every.value_at(p)} for p in ps]},
        "warmup": {"span_s": w0 / 1e9, "bound_s": precision.warmup_ns / 1e9, "max_share": WARMUP_MAX_SHARE,
                   "samples": int(warm.sum()), "p99_ns": warm_p99},
        "pauses": {"count": len(pauses), "total_s": sum(b - a for a, b in pauses) / 1e9},
        # Nothing but the warm-up leaves the statistics; the old fields stay, at their new values.
        "exclusions": {"budget": 0.0, "samples": 0, "window_samples": window_n, "share": 0.0,
                       "causes": {"engine_stall": 0}, "correlation": {"engine_stall": probe} if probe else {}},
        "delayed": {
            "bounded": bool(bound_delays),
            "samples": n_delayed, "window_samples": window_n, "share": n_delayed / window_n if window_n else 0.0,
            "causes": {"sent_late": n_late, "outstanding_across": n_across},
            "floor_ns": floor,
            "percentiles": [{"p": pc.p, "value_ns": pc.value, "value_low_ns": pc.value_low,
                             "low_ns": pc.low, "sampling_low_ns": pc.sampling_low, "widening_ns": pc.widening}
                            for pc in pcts],
        },
        "host_pauses": pauses_both,
        "consistency": rows,
        # Fields kept from earlier summaries (ARCHITECTURE.md, "Summary JSON").
        "warmup_trimmed_s": w0 / 1e9,
        "warmup_trimmed_samples": int(warm.sum()),
        "masked_samples": 0,
        "delayed_samples": n_delayed,
        "stalls": len(engine_stalls),
        "stalls_longest_ns": max((b - a for a, b in engine_stalls), default=0),
        "stall_masked_samples": 0,
        "target_stalls": len(target_stalls),
        "target_stalls_longest_ns": max((b - a for a, b in target_stalls), default=0),
        "inflated_samples": int((used & across).sum()),
        "censored_samples": int((used & censored).sum()),
        "thinning": ind.step,
        "samples_collected": int(n),
        "samples_used": window_n,
        "n_effective": ind.n_effective,
        "percentile_samples": {f"{p:g}": window_n for p in ps},
        "percentile_n_effective": {f"{p:g}": est[p][1].n_effective for p in ps},
        "percentile_thinning": {f"{p:g}": est[p][1].step for p in ps},
        "response_mean_ns": response_ns,
        "arrival_distance": fit.distance,
        "arrival_pvalue": fit.pvalue,
        "kpss_p": st.kpss_p,
        "adf_p": st.adf_p,
        "tail_concentration": st.concentration,
    }
    return Analysis(checks, state, pcts, target, used, (w0, end), needed, details)
