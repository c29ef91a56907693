"""One pass of every check over the samples collected so far: a pure function of the data.

The order is the methodology's (Lancet Fig. 4, completed): load → arrivals → warm-up and
stationarity → independence → confidence. ``Analysis.state`` names the first step that failed,
or ``done``; the controller decides from it whether to collect more or conclude.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tailwise.methodology.checks import (
    Check,
    arrivals_check,
    stalls_check,
    confidence_check,
    errors_check,
    independence_check,
    rate_check,
    stationarity_check,
    target_width_ns,
)
from tailwise.stats.arrivals import arrival_fit
from tailwise.stats.independence import Independence, independence, thin
from tailwise.stats.quantiles import DEFAULT_PERCENTILES, Percentile, percentile_ci
from tailwise.stats.stationarity import stationarity

STATES = ("load", "arrivals", "stationarity", "independence", "confidence")


@dataclass(frozen=True)
class Precision:
    """What the user asks for: a percentile, the CI width (absolute or relative), confidence."""

    percentile: float = 99.0
    ci_ns: float | None = None
    ci_rel: float | None = None
    confidence: float = 0.95
    max_time_s: float = 60.0


@dataclass
class Analysis:
    checks: list[Check]
    state: str  # first failing step, or "done"
    percentiles: list[Percentile]
    target: Percentile | None
    used_mask: np.ndarray  # over the samples given: True where a sample went into the statistics
    warmup_start_ns: int | None
    thinning: int
    samples_needed: int | None
    details: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.state == "done"

    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]


#: After a masked round, 5 ms windows whose median latency is above twice the run's median are the
#: queue still draining the backlog the round caused; the mask extends over them (at most 2 s).
DRAIN_WINDOW_NS = 5_000_000
DRAIN_FACTOR = 2.0
DRAIN_MAX_NS = 2_000_000_000


#: Around a stall of tailwise's own threads (stall.rs: ≥ 200 µs without running), the samples
#: intended from this long before it — the requests then in flight, which the stall caught — ...
STALL_BEFORE_NS = 1_000_000
#: ... to this long after it, or twice its length if longer — the backlog it left draining (at
#: load ρ a stall of d leaves a backlog that takes ρd/(1−ρ) to clear: d at 50 %) — are left out,
#: then ``extend_masks`` follows a longer drain.
STALL_AFTER_NS = 1_000_000


def stall_windows(stalls) -> list[tuple[int, int]]:
    """The interval of intended times each stall disturbed (see STALL_*)."""
    return [(a - STALL_BEFORE_NS, b + max(STALL_AFTER_NS, 2 * (b - a))) for a, b in stalls]


def extend_masks(intended_ns: np.ndarray, latency_ns: np.ndarray, masked) -> list[tuple[int, int]]:
    """Extend each masked interval over the drain that follows it (see DRAIN_*)."""
    if not len(masked) or not len(latency_ns):
        return list(masked)
    inside = np.zeros(len(intended_ns), dtype=bool)
    for a, b in masked:
        inside |= (intended_ns >= a) & (intended_ns < b)
    baseline = float(np.median(latency_ns[~inside])) if (~inside).any() else float(np.median(latency_ns))
    out = []
    for a, b in masked:
        end = b
        while end < b + DRAIN_MAX_NS:
            lo, hi = np.searchsorted(intended_ns, [end, end + DRAIN_WINDOW_NS])
            if hi == lo or np.median(latency_ns[lo:hi]) <= DRAIN_FACTOR * baseline:
                break
            end += DRAIN_WINDOW_NS
        out.append((a, end))
    return out


def estimate_percentile(lat_in_send_order: np.ndarray, p: float, confidence: float,
                        rng: np.random.Generator) -> tuple[Percentile, Independence, np.ndarray]:
    """The independence and confidence steps for one percentile: thin the samples until the
    percentile's indicator is independent, then the exact order-statistic CI on what is kept.
    Returns the percentile (bounds None while still correlated), the independence verdict and the
    indices kept."""
    ind = independence(lat_in_send_order, p)
    idx = thin(len(lat_in_send_order), ind.step, rng)
    pc = percentile_ci(np.sort(lat_in_send_order[idx]), p, confidence)
    if not ind.ok:  # still correlated: the value stands, no interval can be claimed
        pc = Percentile(p, pc.value, None, None)
    return pc, ind, idx


def analyse(samples: np.ndarray, *, counters: dict, elapsed_s: float, received_in_window: int, reasons,
            rate_rps: float, arrival: str, conns: int, outstanding: int, sample_every: int,
            precision: Precision, rng: np.random.Generator, fixed_start_ns: int | None = None,
            masked: list[tuple[int, int]] = (), late_ns: int | None = None,
            stalls: list[tuple[int, int]] = (), mask_stalls: bool = True) -> Analysis:
    """``samples``: SAMPLE_DTYPE records sorted by intended send time. ``masked``: intervals of
    intended time (ns since the engine's start) whose samples the statistics leave out — the
    coordinator's own rounds, which take CPU from a co-located engine or server (controller.py).
    ``stalls``: the (start, end) ns of stalls of tailwise's own threads (stall.rs); unless
    ``mask_stalls`` is false, the samples they disturbed are left out too (``stall_windows``)."""
    segments = None
    stall_masked = 0
    windows = stall_windows(stalls) if mask_stalls else []
    if len(masked) or windows:
        t = samples["intended_ns"].astype(np.int64)
        lat_all = samples["latency_ns"].astype(np.int64)
        masked = extend_masks(t, lat_all, [*masked, *windows])
        keep = np.ones(len(t), dtype=bool)
        for i, (a, b) in enumerate(masked):
            inside = (t >= a) & (t < b)
            if i >= len(masked) - len(windows):
                stall_masked += int(np.count_nonzero(inside & keep))
            keep &= ~inside
        full_len, kept_idx = len(samples), np.nonzero(keep)[0]
        samples = samples[keep]
        # Which gap between masks each kept sample lies in (for the arrival gaps).
        segments = np.searchsorted(np.sort([a for a, _ in masked]), samples["intended_ns"].astype(np.int64))
    else:
        full_len, kept_idx = len(samples), None
    lat = samples["latency_ns"].astype(np.int64)
    intended = samples["intended_ns"].astype(np.int64)
    sent = samples["sent_ns"].astype(np.int64)
    response_ns = float(np.mean(lat - (sent - intended))) if len(lat) else None

    achieved = counters["sent"] / elapsed_s if elapsed_s > 0 else None
    completed = received_in_window / elapsed_s if elapsed_s > 0 else None
    checks = [rate_check(rate_rps, achieved, completed, elapsed_s, conns=conns, outstanding=outstanding,
                         response_ns=response_ns),
              errors_check(counters, reasons),
              stalls_check(stalls, stall_masked, full_len, masked=mask_stalls)]
    # Late sends among the samples analysed (outside masked rounds), else from the engine's count.
    late_fraction = (float(np.mean((sent - intended) > late_ns)) if late_ns is not None and len(sent)
                     else counters["late"] / max(counters["sent"], 1))
    fit = arrival_fit(sent, intended, process=arrival, rate_rps=rate_rps, late_fraction=late_fraction, rng=rng,
                      segments=segments)
    checks.append(arrivals_check(fit))

    st = stationarity(intended, lat, precision.percentile, fixed_start_ns=fixed_start_ns)
    checks.append(stationarity_check(st))
    post = np.nonzero(intended >= st.warmup_ns)[0] if len(intended) else np.arange(0)

    # Each percentile is estimated from the post-warm-up samples thinned until *its* indicator is
    # independent (stats/independence.py); the target percentile's thinning is the check.
    post_lat = lat[post]
    pcts: list[Percentile] = []
    per_p: dict[float, dict] = {}
    for p in sorted({*DEFAULT_PERCENTILES, precision.percentile}):
        pc, ind_p, idx = estimate_percentile(post_lat, p, precision.confidence, rng)
        per_p[p] = {"independence": ind_p, "kept": post[idx], "percentile": pc}
        if p in DEFAULT_PERCENTILES:
            pcts.append(pc)
    tgt = per_p[precision.percentile]
    ind, kept, target = tgt["independence"], tgt["kept"], tgt["percentile"]
    checks.append(independence_check(ind, sample_every))
    step = ind.step
    used = np.zeros(full_len, dtype=bool)
    used[kept if kept_idx is None else kept_idx[kept]] = True
    span_s = (intended[-1] - intended[post[0]]) / 1e9 if len(post) else 0.0
    rate_used = len(kept) / span_s if span_s > 0 else None
    conf, needed = confidence_check(target, len(kept), precision.confidence,
                                    target_width_ns(target.value, precision.ci_ns, precision.ci_rel), rate_used)
    checks.append(conf)

    by_name = {c.name: c for c in checks}
    state = "done"
    for step_name, names in (("load", ("rate", "errors", "stalls")), ("arrivals", ("arrivals",)),
                             ("stationarity", ("stationarity",)), ("independence", ("independence",)),
                             ("confidence", ("confidence",))):
        if not all(by_name[n].ok for n in names):
            state = step_name
            break
    details = {
        "warmup_trimmed_s": (st.warmup_ns - int(intended[0])) / 1e9 if len(intended) else 0.0,
        "warmup_trimmed_samples": int(len(lat) - len(post)),
        "masked_samples": int(full_len - len(lat)),
        "stalls": len(stalls),
        "stalls_longest_ns": max((b - a for a, b in stalls), default=0),
        "stall_masked_samples": stall_masked,
        "thinning": step,
        "samples_collected": int(full_len),
        "samples_used": int(len(kept)),
        "n_effective": ind.n_effective,
        "percentile_samples": {f"{p:g}": int(len(v["kept"])) for p, v in per_p.items()},
        "percentile_thinning": {f"{p:g}": v["independence"].step for p, v in per_p.items()},
        "response_mean_ns": response_ns,
        "arrival_pvalue": fit.pvalue,
        "kpss_p": st.kpss_p,
        "adf_p": st.adf_p,
        "tail_concentration": st.concentration,
    }
    return Analysis(checks, state, pcts, target, used, st.warmup_ns if st.ok else None, step, needed, details)
