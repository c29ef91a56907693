"""One pass of every check over a consistent snapshot of a run: a pure function of the data.

The order is the methodology's (Lancet Fig. 4, completed): load → arrivals → stationarity →
independence → confidence → consistency. ``Analysis.state`` names the first step that failed, or
``done``; the controller decides from it whether to collect more or conclude.

What may leave the statistics (ARCHITECTURE.md, "The exclusion rule")
----------------------------------------------------------------------
A sample leaves the statistics only for a cause on tailwise's own side, decided per request or by
the clock before any latency is looked at — never from its latency or its neighbours':

* ``warmup``: the leading span of the run, a whole number of 100 ms intervals, at most
  ``--warmup`` and at most ``WARMUP_MAX_SHARE`` of the run; reported with its own p99.
* ``engine_stall``: requests intended while their engine thread could not run, or in the guard
  after the stall while the backlog it built was sent (flagged per request by the engine).

The coordinator's own rounds take nothing away: without a CPU of its own it pauses the schedule
while it computes (controller.py), so no request is due then; the pauses are reported.

Everything else stays in: the target's own stalls (the built-in server's included), requests
outstanding across an engine stall (flagged as possibly inflated; the ``stalls`` check fails when
they could own the percentile asked for), and every request without a reply, *censored* at the
time it had been outstanding — so a freeze can only push the tail up. All causes share one budget
(``EXCLUSION_BUDGET`` of the requests in the window); each is counted in the summary.

Consistency: the engine keeps every-request histograms per 100 ms of intended time. Over exactly
the window the statistics used, the every-request distribution less the excluded requests (the
excluded samples × the sampling factor, bucket by bucket) must agree with each reported
percentile's interval at ``CONSISTENCY_CONFIDENCE``; and the requests intended just before each
exclusion (``PROBE_NS``, their latencies cut at its start so that the tool's own pause cannot
raise them) must not exceed the target percentile more often than the rest — else the exclusion
is correlated with the target (a co-located target whose slow moments take the client's CPU),
and the check fails.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from scipy.stats import binom

from tailwise.agent import Flag
from tailwise.methodology.checks import (
    Check,
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
from tailwise.stats.histogram import Buckets
from tailwise.stats.quantiles import DEFAULT_PERCENTILES, Percentile, estimate_percentile, percentile_ci
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

#: Width of the engine's every-request interval histograms (recorder.rs INTERVAL_NS).
INTERVAL_NS = 100_000_000
#: The warm-up never takes more than this share of the run.
WARMUP_MAX_SHARE = 0.10
DEFAULT_WARMUP_NS = 100_000_000
#: All exclusions together may take at most this share of the requests in the window.
EXCLUSION_BUDGET = 0.05
#: The reported intervals are checked against the every-request distribution at this confidence,
#: so that five percentiles give a false alarm in ~0.5 % of runs, not in ~25 %.
CONSISTENCY_CONFIDENCE = 0.999
#: Requests intended this long before each exclusion are the probe of the target's state then.
PROBE_NS = 10_000_000
#: An exclusion is correlated with the target when its probe exceeds the target percentile this
#: many times more often than the rest (binomial p < PROBE_ALPHA, at least PROBE_MIN_HITS hits).
PROBE_RATIO = 3.0
PROBE_ALPHA = 1e-3
PROBE_MIN_HITS = 5


@dataclass(frozen=True)
class Precision:
    """What the user asks for: a percentile, the CI width (absolute or relative), confidence; and
    the time budget and the warm-up bound."""

    percentile: float = 99.0
    ci_ns: float | None = None
    ci_rel: float | None = None
    confidence: float = 0.95
    max_time_s: float = 60.0
    warmup_ns: int = DEFAULT_WARMUP_NS


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


def consistency(every: Buckets | None, excluded_lat: np.ndarray, sample_every: int, used_sorted: np.ndarray,
                est: dict) -> list[dict]:
    """Each supported percentile (``est``: p → (Percentile, Independence)) against the
    every-request distribution of the same window less the excluded requests (see the module
    doc). Returns one row per percentile."""
    rows = []
    if every is None or every.total <= 0:
        return rows
    kept = every.minus(excluded_lat, sample_every)
    n_kept = max(kept.total, 1.0)
    # The excluded requests are estimated from their samples: allow the count's own spread.
    slack = sample_every * math.sqrt(len(excluded_lat)) / n_kept * 100.0 if sample_every > 1 else 0.0
    for pc, ind in est.values():
        if not pc.supported:
            continue
        wide = percentile_ci(used_sorted, pc.p, CONSISTENCY_CONFIDENCE, n_eff=ind.n_effective)
        v_all = every.value_at(pc.p)
        lo_v, hi_v = kept.value_at(pc.p - slack), kept.value_at(min(pc.p + slack, 100.0))
        # 1 % resolution of the interval histograms either way.
        below = wide.high is not None and lo_v is not None and lo_v > wide.high * 1.01
        above = wide.low is not None and hi_v is not None and hi_v < wide.low * 0.99
        rows.append({"p": pc.p, "value_ns": pc.value, "low_ns": wide.low, "high_ns": wide.high,
                     "every_request_ns": kept.value_at(pc.p), "with_excluded_ns": v_all,
                     "ok": not (below or above)})
    return rows


def analyse(samples: np.ndarray, *, counters: dict, elapsed_s: float, received_in_window: int, reasons,
            rate_rps: float, arrival: str, conns: int, outstanding: int, sample_every: int,
            precision: Precision, rng: np.random.Generator, end_ns: int | None = None,
            pauses=(), engine_stalls=(), target_stalls=(), exclude_stalls: bool = True,
            every_request: Callable[[int, int], Buckets | None] | None = None,
            late_ns: int | None = None) -> Analysis:
    """``samples``: SAMPLE_DTYPE records sorted by intended send time — every sampled request,
    finished or censored (outstanding ones at ``end_ns``, the snapshot time). ``pauses``: the
    coordinator's pauses of the schedule (ns since the start; no request is intended in them);
    ``engine_stalls`` and ``target_stalls``: the stalls of the engine threads and of an
    in-process server (reported; the former's effect is in the samples' flags);
    ``exclude_stalls`` false keeps everything (--keep-stalls). ``every_request(first, last)``: the
    every-request histogram of intervals first … last − 1. ``elapsed_s`` is the time the schedule
    ran, pauses left out."""
    t = samples["intended_ns"].astype(np.int64)
    lat = samples["latency_ns"].astype(np.int64)
    sent = samples["sent_ns"].astype(np.int64)
    flags = samples["flags"].astype(np.int64)
    n = len(samples)
    end = int(end_ns) if end_ns is not None else (int(t[-1]) + 1 if n else 0)
    w0 = warmup_end_ns(end, precision.warmup_ns)
    in_window = (t >= w0) & (t < end)
    censored = (flags & Flag.CENSORED) != 0
    x_stall = in_window & ((flags & Flag.ENGINE_STALL) != 0) if exclude_stalls else np.zeros(n, bool)
    excluded = x_stall
    used = in_window & ~excluded
    window_n = int(in_window.sum())

    lat_used, cens_used = lat[used], censored[used]
    answered = used & ~censored & (sent > 0)
    response_ns = float(np.mean(lat[answered] - (sent[answered] - t[answered]))) if answered.any() else None

    achieved = counters["sent"] / elapsed_s if elapsed_s > 0 else None
    completed = received_in_window / elapsed_s if elapsed_s > 0 else None
    checks = [rate_check(rate_rps, achieved, completed, elapsed_s, conns=conns, outstanding=outstanding,
                         response_ns=response_ns),
              errors_check(counters, reasons)]

    # Percentiles on every kept sample, with the indicator's autocorrelation in the variance.
    ps = sorted({*DEFAULT_PERCENTILES, precision.percentile})
    used_sorted = np.sort(lat_used)
    est = {p: estimate_percentile(lat_used, p, precision.confidence, censored=cens_used, sorted_x=used_sorted)
           for p in ps}
    pcts = [est[p][0] for p in DEFAULT_PERCENTILES]
    target, ind = est[precision.percentile]

    # Requests outstanding across an engine stall: could their lower bounds move the target?
    inflated = used & ((flags & Flag.INFLATED) != 0)
    owned = None
    if inflated.any() and target.supported:
        lower = lat.copy()
        lower[inflated] -= np.minimum(samples["inflation_ns"][inflated].astype(np.int64), lat[inflated])
        low_pc, _ = estimate_percentile(lower[used], precision.percentile, precision.confidence, censored=cens_used)
        owned = {"lower_value_ns": low_pc.value, "could_own": low_pc.value is not None and target.low is not None
                 and low_pc.value < target.low}
    checks.append(stalls_check(engine_stalls, target_stalls, excluded=int(x_stall.sum()), inflated=int(inflated.sum()),
                               used=int(used.sum()), owned=owned, p=precision.percentile, kept=not exclude_stalls))

    # Correlation of each exclusion with the target, by the probe before it.
    share = 1.0 - precision.percentile / 100.0
    probes = {}
    if target.value is not None:
        stall_starts = [a for a, _ in engine_stalls if w0 <= a < end] if exclude_stalls else []
        r = probe_correlation(t, lat, used, stall_starts, target.value, share)
        if r is not None:
            probes["engine_stall"] = r
    causes = {"engine_stall": int(x_stall.sum())}
    checks.append(exclusions_check(causes, window_n, EXCLUSION_BUDGET, probes, precision.percentile))

    # What the server saw: every request sent in the window, excluded ones included.
    was_sent = in_window & (sent > 0)
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

    st = stationarity(t[used], lat_used, precision.percentile)
    checks.append(stationarity_check(st))
    checks.append(independence_check(ind, sample_every))
    paused_ns = sum(max(0, min(b, end) - max(a, w0)) for a, b in pauses)
    span_s = (end - w0 - paused_ns) / 1e9
    rate_used = used.sum() / span_s if span_s > 0 else None
    conf, needed = confidence_check(target, int(used.sum()), precision.confidence,
                                    target_width_ns(target.value, precision.ci_ns, precision.ci_rel), rate_used)
    checks.append(conf)

    every = every_request(w0 // INTERVAL_NS, -(-end // INTERVAL_NS)) if every_request is not None else None
    rows = consistency(every, lat[excluded], sample_every, used_sorted, est)
    checks.append(consistency_check(rows, causes, sample_every, every is not None))

    by_name = {c.name: c for c in checks}
    state = "done"
    for step_name, names in STEPS.items():
        if not all(by_name[nm].ok for nm in names):
            state = step_name
            break

    warm = t < w0
    warm_p99 = float(np.percentile(lat[warm], 99, method="inverted_cdf")) if warm.any() else None
    details = {
        "window_ns": [w0, end],
        "window_every_request": {} if every is None else {
            "count": int(every.total),
            "percentiles": [{"p": p, "value_ns": every.value_at(p)} for p in DEFAULT_PERCENTILES]},
        "warmup": {"span_s": w0 / 1e9, "bound_s": precision.warmup_ns / 1e9, "max_share": WARMUP_MAX_SHARE,
                   "samples": int(warm.sum()), "p99_ns": warm_p99},
        "pauses": {"count": len(pauses), "total_s": sum(b - a for a, b in pauses) / 1e9},
        "exclusions": {"budget": EXCLUSION_BUDGET, "samples": int(excluded.sum()), "window_samples": window_n,
                       "share": excluded.sum() / window_n if window_n else 0.0, "causes": causes,
                       "correlation": probes},
        "consistency": rows,
        # Fields kept from earlier summaries (ARCHITECTURE.md, "Summary JSON").
        "warmup_trimmed_s": w0 / 1e9,
        "warmup_trimmed_samples": int(warm.sum()),
        "masked_samples": int(excluded.sum()),
        "stalls": len(engine_stalls),
        "stalls_longest_ns": max((b - a for a, b in engine_stalls), default=0),
        "stall_masked_samples": causes["engine_stall"],
        "target_stalls": len(target_stalls),
        "target_stalls_longest_ns": max((b - a for a, b in target_stalls), default=0),
        "inflated_samples": int(inflated.sum()),
        "censored_samples": int((used & censored).sum()),
        "thinning": ind.step,
        "samples_collected": int(n),
        "samples_used": int(used.sum()),
        "n_effective": ind.n_effective,
        "percentile_samples": {f"{p:g}": int(used.sum()) for p in ps},
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
