"""The run summary's statistics (documents/run.py, ``Summary``): the rate, the latency and its
percentiles with their intervals, the warm-up, the exclusions, the requests tailwise delayed, the
precision asked and reached, host-wide pauses and the send lag.
"""

from __future__ import annotations

from typing import Literal

from tailwise.results.documents.base import Count, Doc, F, Int, Num

class Rate(Doc):
    """The offered load and what was sent and answered."""

    target_rps: Num = F(description="The load offered to the target: --rate plus, with --probe, --probe-rate.", minimum=0)
    achieved_rps: Num | None = F(description="Requests sent per second of the schedule's time (pauses left out); null when no time elapsed.", minimum=0)
    completed_rps: Num | None = F(description="Replies received within the schedule per second of the schedule's time; null when no time elapsed.", minimum=0)
    duration_s: Num = F(description="The schedule's own time: the engine's elapsed time less the coordinator's pauses.")
    paused_s: Num = F(description="Total time the coordinator paused the schedule for its analyses (adaptive mode on a machine without a spare CPU); 0 otherwise.", minimum=0)


class Percentile(Doc):
    """A percentile of the latency with its confidence interval, from the kept samples (order statistics, effective sample size for autocorrelation). Unsupported (too few effective samples for both bounds): value_ns, low_ns and high_ns are null, samples_needed says how many effective samples would bound it, and lower_bound_ns is what the samples do show: a one-sided lower bound."""

    p: Num = F(description="The percentile, in percent (99.9).", exclusiveMinimum=0, exclusiveMaximum=100)
    value_ns: Int | None = F(description="Point estimate; null when unsupported.")
    low_ns: Int | None = F(description="Lower bound of the CI at latency.confidence; null when the samples cannot give it.")
    high_ns: Int | None = F(description="Upper bound of the CI; null when the samples cannot give it (too few, or censored requests above it).")
    n_effective: Num | None = F(description="Effective number of independent samples for this percentile's indicator.", minimum=0)
    samples_needed: Int | None = F(description="Effective samples needed to bound this percentile; null when it is bounded.", minimum=1)
    censored: bool = F(description="Unanswered (censored) requests reach the value, which is then only a lower bound of the true percentile.")
    value_low_ns: Int | None = F(None, description="The percentile with every request tailwise itself delayed at its lower bound (value_ns has them as measured): the least the target's own percentile can be, before sampling. Equal to value_ns when none was delayed; null when unsupported. Added by issue 18.")
    sampling_low_ns: Int | None = F(None, description="The CI's low end from sampling alone (the measured values' order-statistic interval); low_ns is below it by the widening the delayed requests cause (delayed.percentiles). Added by issue 18.")
    sampling_high_ns: Int | None = F(None, description="The CI's high end from sampling alone; equal to high_ns. Added by issue 18.")
    lower_bound_ns: Int | None = F(None, description="Unsupported percentile (value_ns null): the one-sided lower bound the samples give, at 1 − (1 − confidence)/2 (97.5 % for a 95 % interval) — 'p99.99 is at least this'; null when the percentile is supported (low_ns is its bound then) or when even this is out of reach. Added after issue 22.")


class KindLatency(Doc):
    """One kind of request's latency: gets or sets (memcached, Redis), or one request of an http:// requests file. Its percentiles are computed exactly as the whole run's (the same window, censoring, bounds of the requests tailwise delayed, effective sample size, and unsupported percentiles when its samples are too few) on its own samples. Information beside the whole run: the verdict, the checks and --threshold stay on the whole run."""

    name: str = F(description="get or set (memcached, Redis); for http:// the request's \"METHOD path\" as the requests file has it, with \" #INDEX\" (its request index) after a name two requests share.", minLength=1)
    share: Num = F(description="Its share of the samples behind the whole run's percentiles (latency.samples).", minimum=0, maximum=1)
    count: Int = F(description="Its samples behind its percentiles (its part of latency.samples; with --sample-every 1, every request of this kind in the window).", minimum=0)
    percentiles: list[Percentile] = F(description="The same percentiles as latency.percentiles, on its samples alone.")


class HistPercentile(Doc):
    p: Num = F(exclusiveMinimum=0, maximum=100)
    value_ns: Int | None = F(description="The value at p, HDR precision: the highest value equivalent to the ⌈p/100 × count⌉-th smallest, as Java HdrHistogram's getValueAtPercentile and its log processor read it; null for an empty histogram.")


class Histogram(Doc):
    """Figures of an HdrHistogram of every request (no sampling, no CI); min/mean/max and every value are null when count is 0."""

    count: Int = F(minimum=0)
    min_ns: Int | None
    mean_ns: Num | None
    max_ns: Int | None
    percentiles: list[HistPercentile]


class RunHistogram(Histogram):
    """HdrHistogram of every request of the run (warm-up included; unanswered ones at the time they waited), with its parameters, so that latency.hdr can be decoded exactly. Figures read from it have HDR precision (significant_digits), not the samples' exactness."""

    unit: Literal["ns"]
    lowest_ns: Int = F(description="Lowest discernible value of the histogram.", minimum=1)
    highest_ns: Int = F(description="Highest trackable value of the histogram.", minimum=1)
    significant_digits: Int = F(description="Significant decimal digits kept (HDR precision).", minimum=1, maximum=5)


class WindowEveryRequest(Doc):
    """Every request intended in the window (when the engine kept interval histograms)."""

    model_config = {"json_schema_extra": {"dependentRequired": {"count": ["percentiles"], "percentiles": ["count"]}}}
    count: Int = F(None, description="Requests intended in the window (every request, not only the sampled).", minimum=0)
    percentiles: list[HistPercentile] = F(None, description="Percentiles of every request in the window (HDR precision, no CI).")


class Window(Doc):
    """The intended-time window the statistics used, and (when the engine kept interval histograms) every request intended in it, excluded ones included."""

    model_config = WindowEveryRequest.model_config
    start_ns: Int = F(description="Start of the window, ns of intended time since the engine's start (the end of the warm-up).", minimum=0)
    end_ns: Int = F(description="End of the window (exclusive), ns since the engine's start.", minimum=0)
    count: Int = WindowEveryRequest.model_fields["count"]
    percentiles: list[HistPercentile] = WindowEveryRequest.model_fields["percentiles"]


class Latency(Doc):
    """Latency, counted from each request's intended send time (no coordinated omission)."""

    source: Literal["nic", "kernel", "user"] = F(description="Where reply times come from: the NIC's hardware stamps (SO_TIMESTAMPING RAW_HARDWARE, its PTP clock converted to CLOCK_MONOTONIC), kernel software stamps (SO_TIMESTAMPING) or the user-space clock around the system calls (--timestamps).")
    source_note: str | None = F(description="Why a better source was not used (e.g. the interface cannot stamp in hardware); null when the source was asked for explicitly.")
    kernel_stamped_replies: Int = F(description="Replies whose receive time is a stamp of the source (the kernel's, or with source nic the NIC's).", minimum=0)
    kernel_stamped_sends: Int = F(description="Replies whose request carries the source's transmit stamp (the kernel's, or the NIC's; the samples' sent_ns).", minimum=0)
    samples: Int = F(description="Raw samples behind the percentiles: after the warm-up, with exclusions left out.", minimum=0)
    sample_every: Int = F(description="The effective sampling: the engine's 1-in-K times the methodology's thinning to independence (methodology.effective_sample_every).", minimum=1)
    confidence: Num = F(description="Confidence level of every interval (--confidence).", exclusiveMinimum=0, exclusiveMaximum=1)
    percentiles: list[Percentile] = F(description="The reported percentiles (--percentiles: p50, p90, p95, p99, p99.9, p99.99 by default, with --percentile and every --threshold's added), ascending, with their distribution-free confidence intervals.", minItems=1)
    target: Percentile | None = F(description="The percentile the run's precision was asked for (--percentile), with its CI; null only if none was estimated.")
    histogram: RunHistogram
    window: Window


class Warmup(Doc):
    """The warm-up left out of the statistics: whole 100 ms intervals, at most --warmup and at most max_share of the run."""

    span_s: Num = F(description="The warm-up actually left out.", minimum=0)
    bound_s: Num = F(description="--warmup.", minimum=0)
    max_share: Num = F(description="The largest share of the run the warm-up may take.")
    samples: Int = F(description="Samples intended in the warm-up.", minimum=0)
    p99_ns: Int | None = F(description="p99 of the warm-up's samples (to see what was left out); null without any.")


class Correlation(Doc):
    requests: Int = F(minimum=0)
    above: Int = F(description="Of those, how many exceed the target percentile.", minimum=0)
    ratio: Num | None = F(description="How many times more often than expected.")
    pvalue: Num | None = F(minimum=0, maximum=1)
    correlated: bool


class ExclusionCauses(Doc):
    """Samples left out per cause."""

    open_keys = True
    __pydantic_extra__: dict[str, Count]
    engine_stall: Int = F(minimum=0)


class Exclusions(Doc):
    """Samples left out of the statistics for a cause on tailwise's side. Since issue 18 none is (samples 0, budget 0): the requests tailwise delayed are in, as intervals (delayed); only the warm-up, fixed by the clock, is left out (warmup). The fields stay for the contract."""

    budget: Num = F(description="The largest share of the window's samples all exclusions may take: 0 since issue 18 (nothing is left out).", minimum=0, maximum=1)
    samples: Int = F(description="Samples left out.", minimum=0)
    window_samples: Int = F(description="Samples intended in the window.", minimum=0)
    share: Num = F(description="samples / window_samples (0 with an empty window).", minimum=0, maximum=1)
    causes: ExclusionCauses
    correlation: dict[str, Correlation] = F(description="Per cause: the requests intended just before each engine stall against the target percentile; a correlation is a host pause of client and target together (host_pauses), information since issue 18, never a failure.")


class DelayedCauses(Doc):
    open_keys = True
    __pydantic_extra__: dict[str, Count]
    sent_late: Int = F(minimum=0)
    outstanding_across: Int = F(minimum=0)
    behind_stall: Int = F(None, description="--bounds busy: requests neither flag marks whose busy period (since the client last had nothing outstanding) held a stall of the client — they may have queued behind its burst. Added by issue 32.", minimum=0)


class DelayedPercentile(Doc):
    p: Num
    value_ns: Num | None
    value_low_ns: Num | None
    low_ns: Num | None
    sampling_low_ns: Num | None
    widening_ns: Num | None = F(minimum=0)


class Delayed(Doc):
    """The requests tailwise itself delayed (issue 18, issue 32): sent late (due in a stall of its engine thread or the guard after it, or behind such a request in its backlog), outstanding across a stall with a reply possibly read late, or (rule busy) queued behind a stall in their busy period. They are in the statistics as intervals: at most the measured latency, at least what the target can be shown to have taken (rule busy: the latency less the client's stall time since the client last had nothing outstanding, at least floor_ns; rule floor: floor_ns for one sent late, the latency less the stall it spans for one outstanding across). Decided per request by the engine and the clock, never by latency."""

    bounded: bool = F(description="false with --keep-stalls: the delayed requests taken as measured, no lower bound.")
    samples: Int = F(description="Delayed samples in the window.", minimum=0)
    window_samples: Int = F(minimum=0)
    share: Num = F(minimum=0, maximum=1)
    causes: DelayedCauses
    rule: Literal["busy", "floor"] = F(None, description="--bounds: busy — every request whose busy period held a stall of the client is bounded below by its latency less the stall time in that period (a FIFO target's departures move by at most the client's delays: stats/bounds.py), never below floor_ns; floor — only the requests the engine flagged, one sent late at floor_ns. Added by issue 32.")
    floor_ns: Num = F(description="The least latency of a request the client did not delay: where every lower bound stops (busy rule), the lower bound of one sent late (floor rule).", minimum=0)
    percentiles: list[DelayedPercentile] = F(description="Per reported percentile: the value as measured and at the lower bounds, the CI's low end and sampling's, and the widening between them.")


class PrecisionAsked(Doc):
    """What the user asked of the statistics."""

    percentile: Num = F(description="--percentile: the percentile whose interval must be as narrow as --ci.", exclusiveMinimum=0, exclusiveMaximum=100)
    ci_ns: Num | None = F(description="--ci as an absolute width; null when relative or not given.", minimum=0)
    ci_rel: Num | None = F(description="--ci as a share of the percentile's value (0.1 for 10%); null when absolute or not given.", minimum=0)
    confidence: Num = F(description="--confidence.", exclusiveMinimum=0, exclusiveMaximum=1)


class PrecisionPercentile(Doc):
    """One reported percentile against the asked precision."""

    p: Num = F(exclusiveMinimum=0, exclusiveMaximum=100)
    width_ns: Num | None = F(description="Its interval's width (high − low); null when unsupported.", minimum=0)
    allowed_ns: Num | None = F(description="The width --ci allows it (relative --ci: of its own value); null without --ci.", minimum=0)
    met: bool | None = F(description="Whether its interval is as narrow as asked; null when no precision was asked.")


class PrecisionWidth(Doc):
    """What made the asked percentile's interval as wide as it is."""

    dominated_by: Literal["sampling", "client-stalls"] = F(description="sampling: too few effective samples for the width (more time narrows it); client-stalls: the widening of the low end by the requests tailwise itself delayed exceeds sampling's part (more time does not narrow it).")
    sampling_ns: Num | None = F(description="Sampling's part: the measured values' own interval width; null when unsupported.", minimum=0)
    widening_ns: Num | None = F(description="The client's stalls' part: how far the delayed requests' lower bounds pull the low end down; null when none.", minimum=0)
    tau: Num | None = F(description="The percentile indicator's integrated autocorrelation time: how clustered the tail is (n_effective = samples / tau).", minimum=0)
    n_effective: Num | None = F(minimum=0)
    cause: Literal["host-pauses", "queueing"] | None = F(description="The likely cause of a clustered tail (tau ≥ 2): host-pauses when the engine or the built-in server stalled, else queueing; null when not clustered.")
    words: str = F(description="The same in one clause, as the terminal shows it.")


class PrecisionRemedy(Doc):
    """The one change that helps most."""

    kind: Literal["more-time", "lower-percentile", "wider-ci", "quieter-host", "doctor"]
    words: str


class PrecisionReport(Doc):
    """The asked precision and what the run reached (issue 32): the verdict is imprecise when every validity check passed but the asked percentile's interval is wider than --ci."""

    asked: PrecisionAsked
    reached: bool | None = F(description="Whether the asked percentile's interval is as narrow as --ci; null when no --ci was given (--duration alone).")
    percentiles: list[PrecisionPercentile] = F(description="Each reported percentile: its width against what --ci allows.")
    width: PrecisionWidth | None = F(description="What made the asked percentile's width; null when no precision was asked.")
    remedy: PrecisionRemedy | None = F(description="When it was not reached: the one change that helps most.")
    detail: str | None = F(description="The verdict's explanation in one line, as the terminal shows it.")


class HostPauses(Doc):
    """Whether the host paused the client and the target together (issue 18): engine stalls that overlap stalls of the built-in server, or requests just before the engine's stalls far above the percentile. A single host cannot separate them; the intervals' upper ends carry them. Information, never a failed check."""

    engine_stalls: Int = F(description="Engine stalls in the window.", minimum=0)
    with_target_stall: Int = F(description="Of those, how many overlap a stall of the built-in server.", minimum=0)
    probe: Correlation | None = F(description="The requests intended just before the engine's stalls against the target percentile (as exclusions.correlation).")
    paused_both: bool
    note: str | None = F(description="The one line the terminal shows; null when nothing was seen.")


class SendLag(Histogram):
    """Send lag (actual send time − intended send time) of every request sent: how late the client itself was. HDR precision."""

    late_threshold_ns: Int | None = F(description="--late: a request sent this late counts in counters.late.")
    unstalled: Histogram = F(description="The same for requests whose wait no stall of an engine thread overlapped: the client's own lag when not preempted.")
