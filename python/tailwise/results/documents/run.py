"""The run summary (``tailwise.summary/1``): summary.json of a run directory and ``run --json``.

One definition: methodology/summarize.build_summary writes it through these models, and
docs/schema/summary.schema.json is generated from them (``python -m tailwise.results.documents``).
"""

from __future__ import annotations

from typing import Literal

from tailwise.results.documents.base import Count, Doc, F, Int, Num, UtcTime
from tailwise.results.files import RUN_SCHEMA

CHECK_NAMES = ("rate", "errors", "stalls", "exclusions", "arrivals", "stationarity", "independence", "confidence",
               "consistency")


class Tool(Doc):
    """The tool that wrote the document."""

    name: Literal["tailwise"]
    version: str = F(description="tailwise's version (the Python package's).")


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


def _count(description: str):
    return F(description=description, minimum=0)


class Counters(Doc):
    """Counts of requests (integers). Later versions may add counters."""

    open_keys = True
    __pydantic_extra__: dict[str, Count]
    intended: Int = _count("Requests the schedule made due.")
    sent: Int = _count("Requests sent.")
    received: Int = _count("Replies received.")
    late: Int = _count("Requests sent later than --late after their intended time.")
    never_sent: Int = _count("Requests due that could not be sent within --timeout.")
    errors: Int = _count("Requests answered with an error or failed (see error_reasons).")
    timeouts: Int = _count("Requests unanswered after --timeout.")
    unfinished: Int = _count("Requests still outstanding when the run ended.")
    rx_kernel: Int = _count("Replies with a kernel receive stamp.")
    tx_kernel: Int = _count("Requests with a kernel transmit stamp.")
    reconnects: Int = _count("Connections re-established.")
    resent: Int = _count("Requests sent again after a reconnect.")
    gets: Int = _count("Get requests (memcached, redis).")
    sets: Int = _count("Set requests.")
    hits: Int = _count("Gets answered with a value.")
    misses: Int = _count("Gets answered without a value.")
    stored: Int = _count("Sets the server stored.")
    lost: Int = F(None, description="Packet mode (udp+flow): packets never answered by their timeout or the drain's end (sent = received + lost); 0 for other protocols; absent in summaries written before it existed.", minimum=0)
    reordered: Int = F(None, description="Packet mode: first answers that came after an answer of a later seq of their flow; 0 otherwise.", minimum=0)
    reorder_max: Int = F(None, description="Packet mode: the largest reordering displacement, in packets (highest seq answered − the seq); 0 otherwise.", minimum=0)
    duplicates: Int = F(None, description="Packet mode: answers of a seq already answered (not in received); 0 otherwise.", minimum=0)


class PacketHistogram(Doc):
    """Packet mode: every answered packet at bin_ns (100 ns, the granularity KBNets'17 §3 gives its software tools) from 0 to range_ns; the counted bins are in the results directory's packets-hist.csv. Answers at or above range_ns are counted in above (latency.histogram has them at HDR precision)."""

    bin_ns: Int = F(description="Each bin's width.", minimum=1)
    range_ns: Int = F(description="The range binned at bin_ns, from 0.", minimum=1)
    count: Int = _count("Answered packets in it (= packets.received for a run on one host).")
    above: Int = _count("Answered packets at or above range_ns.")
    max_ns: Int | None = F(description="The top of the highest bin counted; null when an answer is above range_ns or none came.")
    percentiles: list[HistPercentile] = F(description="Every-packet percentiles (no CI: latency.percentiles has those), each the highest value of the bin of the ⌈p/100 × count⌉-th smallest answer: at most bin_ns − 1 above it, never below; null where that answer is above range_ns.")


class Packets(Doc):
    """Packet mode (udp+flow://): the packets, their loss, reordering and duplicates, the rates achieved. Bits per second count Ethernet frame bits (--size per packet: header, IP, UDP, payload and FCS, as RFC 2544)."""

    size_bytes: Int = F(description="--size: each packet's Ethernet frame size (RFC 2544's count).", minimum=64)
    payload_bytes: Int = F(description="Its UDP payload: size − 46 over IPv4, size − 66 over IPv6.", minimum=0)
    flows: Int = F(description="--flows: UDP flows, one socket (source port) each.", minimum=1)
    sent: Int = _count("Packets sent.")
    received: Int = _count("Packets answered (each packet's first answer, duplicates not counted).")
    lost: Int = _count("Packets never answered by their timeout or the drain's end: sent = received + lost.")
    loss_ratio: Num | None = F(description="lost / sent; null when nothing was sent.", minimum=0, maximum=1)
    reordered: Int = _count("Answers that came after an answer of a later seq of their flow.")
    reorder_max: Int = _count("The largest reordering displacement, in packets.")
    duplicates: Int = _count("Answers of a seq already answered.")
    rate_pps: Num | None = F(description="Packets answered per second of the schedule's time (received / elapsed); null when no time elapsed.", minimum=0)
    sent_pps: Num | None = F(description="Packets sent per second of the schedule's time; null when no time elapsed.", minimum=0)
    bits_per_s: Num | None = F(description="Frame bits answered per second (rate_pps × size_bytes × 8); null when no time elapsed.", minimum=0)
    resolution_ns: Int | None = F(description="The every-packet histogram's bin width at the largest answer: histogram.bin_ns (100) when every answer is below histogram.range_ns, else latency.histogram's bucket width there (HDR, 3 significant digits: ≤ 64 ns below 131 µs, 0.1 % above); null without an answer.", minimum=1)
    histogram: PacketHistogram | None = F(None, description="Every answered packet at 100 ns; null on a run on agents (latency.histogram has them at HDR precision). Added after issue 22.")
    max_loss: Num = F(description="--max-loss: the loss ratio the loss check allows.", minimum=0)


class Probe(Doc):
    """The latency probe (--probe): its settings and its own counters; null without --probe. With a probe only its requests are timed."""

    conns: Int = F(minimum=1)
    rate_rps: Num = F(minimum=0)
    counters: Counters | None


class ErrorReason(Doc):
    reason: str
    count: Int = F(minimum=0)


class Check(Doc):
    name: str = F(description="The check's name (see checks).", minLength=1)
    ok: bool = F(description="The check passed.")
    detail: str = F(description="What was found, in figures.")
    remedy: str | None = F(description="What to do about a failure; null when it passed (or there is none).")
    statistic: Num | None = F(description="The check's main figure (its meaning is the check's); null when none.")


class Round(Doc):
    round: Int = F(minimum=1)
    elapsed_s: Num = F(description="Schedule time measured so far.")
    state: Literal["load", "arrivals", "stationarity", "independence", "confidence", "consistency", "done"] = F(description="The first methodology step that failed, or done.")
    samples: Int = F(minimum=0)
    used: Int = F(minimum=0)
    ci_width_ns: Num | None = F(description="Width of the target percentile's CI; null when unbounded.")
    ci_target_ns: Num | None = F(description="The width asked for (--ci).")
    failed: list[str] = F(description="Names of the checks that failed.")
    percentile: Num
    eta_s: Num | None = F(description="At most how long the coordinator still needed.")


class Pauses(Doc):
    count: Int = F(minimum=0)
    total_s: Num = F(minimum=0)


class Consistency(Doc):
    p: Num
    value_ns: Int | None = F(description="The reported value.")
    low_ns: Int | None = F(description="Lower bound of the wider (99.9 %) interval it is checked with.")
    high_ns: Int | None
    every_request_ns: Int | None = F(description="The percentile of every request kept.")
    with_excluded_ns: Int | None = F(description="The percentile of every request, excluded ones included.")
    ok: bool


_PAIR = {"prefixItems": [{"type": "integer"}, {"type": "integer"}], "minItems": 2, "maxItems": 2}
_ADAPTIVE = ["round_s", "coordinator", "pauses_ns", "masked_s", "history"]


class AgentThinned(Doc):
    """An agent that thinned the rows it held while its coordinator did not collect them (issue 33)."""

    address: str = F(description="The agent, HOST:PORT as given to --agents.")
    one_in: Int = F(description="The most it thinned to: it kept 1 in one_in of its rows (a power of 2) while they piled up, by the same keys as the subsample (its one_in is at least this).", minimum=2)


class Subsample(Doc):
    """The bounded subsample the statistics used (stats/subsample.py): a random 1 in one_in of the rows the engine kept, so that memory does not grow with the run's length."""

    one_in: Int = F(description="Each row the engine kept went into the statistics with probability 1/one_in (a power of 2; 1: every row), by a hash of its intended time.", minimum=1)
    limit: Int = F(description="Rows kept for the statistics at most.", minimum=1)
    collected: Int = F(description="Rows the engine kept over the run (all in the samples file); on agents, the rows that reached the coordinator.", minimum=0)
    kept: Int = F(description="Rows in the subsample at the run's end.", minimum=0)
    agents_thinned: list[AgentThinned] = F(None, description="A run on agents: those that held more rows than their ceiling (tailwise agent --max-memory, or the cgroup's limit) while the coordinator did not collect them, and thinned them by the subsample's own keys — unbiased, the subsample raised to their level; the samples file lacks the rows they left out. Absent when none did. Added by issue 33.")


class Methodology(Doc):
    """How the coordinator decided: the mode, its rounds and why it stopped, and the figures of the final analysis."""

    model_config = {"json_schema_extra": {"if": {"properties": {"mode": {"const": "adaptive"}}},
                                          "then": {"required": _ADAPTIVE}}}
    mode: Literal["fixed", "adaptive"] = F(description="fixed: --duration, one analysis at the end; adaptive: rounds until the CI is as narrow as asked or --max-time.")
    rounds: Int = F(description="Analyses made (1 in fixed mode).", minimum=0)
    round_s: Num = F(None, description="Adaptive mode: the first round's length (each next one is longer).")
    stopped: str = F(description="Why the measurement ended: duration, max-time, interrupted, precision reached in round N, or which checks failed.")
    coordinator: str = F(None, description="Adaptive mode: whether the coordinator had a CPU of its own or paused the schedule for its rounds.")
    pauses_ns: list[list[Int]] = F(None, description="Adaptive mode: the schedule's pauses as [start, end] ns since the engine's start.", items={"type": "array", **_PAIR})
    masked_s: Num = F(None, description="Adaptive mode: kept from earlier summaries; always 0.")
    sample_every: Int = F(description="The engine's 1-in-K sampling of requests (--sample-every or automatic).", minimum=1)
    effective_sample_every: Int = F(description="sample_every × subsample.one_in × thinning.", minimum=1)
    subsample: Subsample | None = F(None, description="The bounded subsample of the kept rows the statistics used (stats/subsample.py); on agents, of every agent's rows pooled (agents_thinned: those that thinned their own first). Added by issue 23.")
    history: list[Round] = F(None, description="Adaptive mode: one entry per round.")
    window_ns: list[Int] = F(description="[start, end) of intended time the statistics used (= latency.window).", **_PAIR)
    window_every_request: WindowEveryRequest = F(description="The every-request count and percentiles of the window (latency.window); empty without interval histograms.")
    warmup: Warmup = F(description="As the top-level warmup.")
    pauses: Pauses
    exclusions: Exclusions
    delayed: Delayed = F(None, description="As the top-level delayed.")
    precision: PrecisionReport = F(None, description="What precision was asked and reached, what made the asked percentile's width, and what would help (issue 32); absent in summaries written before it existed.")
    host_pauses: HostPauses = F(None, description="As the top-level host_pauses.")
    consistency: list[Consistency] = F(description="Each supported percentile against every request of the same window less the excluded ones.")
    warmup_trimmed_s: Num = None
    warmup_trimmed_samples: Int = F(None, minimum=0)
    masked_samples: Int = F(None, minimum=0)
    delayed_samples: Int = F(None, description="Requests in the window tailwise itself delayed, in the statistics as intervals (delayed.samples).", minimum=0)
    stalls: Int = F(None, description="Stalls (≥ 200 µs) of the engine threads.", minimum=0)
    stalls_longest_ns: Int = F(None, minimum=0)
    stall_masked_samples: Int = F(None, minimum=0)
    target_stalls: Int = F(None, description="Stalls of the built-in server's workers (kept in the statistics).", minimum=0)
    target_stalls_longest_ns: Int = F(None, minimum=0)
    inflated_samples: Int = F(None, description="Kept samples outstanding across an engine stall (possibly inflated).", minimum=0)
    censored_samples: Int = F(None, description="Kept samples without a reply, at the time they waited.", minimum=0)
    thinning: Int = F(description="The target percentile's thinning to independence.", minimum=1)
    samples_collected: Int = F(minimum=0)
    samples_used: Int = F(minimum=0)
    n_effective: Num | None = F(description="Effective sample size of the target percentile.", minimum=0)
    percentile_samples: dict[str, Int] = F(description="Per percentile (key: p as text, \"99.9\"): samples used.")
    percentile_n_effective: dict[str, Num | None]
    percentile_thinning: dict[str, Int]
    response_mean_ns: Num | None = F(description="Mean response time (reply − actual send) of the answered kept samples.")
    arrival_distance: Num | None = F(description="W1 distance of sent gaps to intended gaps, per mean intended gap.")
    arrival_pvalue: Num | None
    kpss_p: Num | None
    adf_p: Num | None
    tail_concentration: Num | None


class Engine(Doc):
    """The engine's own conduct: its CPUs, CPU time and stalls."""

    pinned_cpus: list[Int | None] = F(description="The CPU each engine thread was pinned to (null: not pinned).")
    cpu_s: Num = F(description="CPU time of the engine threads.", minimum=0)
    cpu_ns_per_request: Num | None = F(description="Engine CPU time per request sent; null when none was sent.", minimum=0)
    preemptions: Int = F(description="Involuntary context switches of the engine threads.", minimum=0)
    stalls: Int = F(description="Timing-loop iterations longer than stall_threshold_ns (not the ≥ 200 µs stalls the methodology leaves out: methodology.stalls).", minimum=0)
    stalled_s: Num = F(description="Time spent in those iterations.", minimum=0)
    stall_threshold_ns: Int = F(description="An iteration longer than this counts as a stall.", minimum=1)
    host_steal_s: Num | None = F(description="Hypervisor steal time over the host's CPUs during the run (/proc/stat); null when unreadable.", minimum=0)


class BuiltinServer(Doc):
    service: str = F(description="Its service-time distribution (fixed:10us).")
    workers: Int = F(minimum=1)
    busy_poll: bool = F(None, description="Its workers busy-polled (each spinning thread had a CPU of its own).")


class Workload(Doc):
    keys: Int = F(minimum=1)
    key_size: str
    value_size: str
    popularity: str
    set_fraction: Num = F(minimum=0, maximum=1)
    mean_key_bytes: Num
    mean_value_bytes: Num


class ProbeSettings(Doc):
    conns: Int
    rate_rps: Num


class Spec(Doc):
    """The resolved settings (flags over the workload file over the defaults), named as the flags with _ for -: what `tailwise sweep --resume` and RunSpec.from_json read back. Values are as given: a time or a rate may be a string with its unit ("20k", "1s") or a plain number."""

    targets: list[str] | None
    rate: str | Num
    arrival: str
    threads: Int
    conns: Int
    outstanding: Int
    keys: Int
    key_size: str | Int
    value_size: str | Int
    popularity: str
    mix: str
    percentile: Num
    percentiles: str | list | None = F(None, description="--percentiles as given (null: the defaults) or, once resolved, the list reported.")
    ci: str | Num | None
    confidence: Num
    max_time: str | Num
    duration: str | Num | None
    timeout: str | Num
    late: str | Num
    warmup: str | Num
    poll: Literal["spin", "block"]
    timestamps: Literal["auto", "nic", "kernel", "user"]
    sample_every: Int | None
    seed: Int = F(description="Always set: the seed chosen when none was given.")
    service: str | None
    workers: Int
    probe: bool
    probe_conns: Int
    probe_rate: str | Num
    pin: bool = None
    keep_stalls: bool = None
    bounds: Literal["busy", "floor"] = F(None, description="--bounds: how a request tailwise delayed is bounded below (busy: its measured latency less the client's stall time in its busy period; floor: the run's least latency). Added by issue 32.")
    workload_file: str | None = None
    size: Int | None = F(None, description="--size (udp+flow://); null: the default.")
    flows: Int | None = F(None, description="--flows (udp+flow://); null: the default.")
    max_loss: Num = F(None, description="--max-loss (udp+flow://).")


class PacketSettings(Doc):
    """Packet mode's settings (udp+flow://)."""

    size_bytes: Int = F(description="--size: the Ethernet frame size.", minimum=64)
    flows: Int = F(description="--flows.", minimum=1)
    max_loss: Num = F(description="--max-loss.", minimum=0)


class Config(Doc):
    """What was asked, in the units the tool uses (also the run directory's config.json). spec holds the resolved settings, named as the flags, that parse back to the same run."""

    model_config = {"json_schema_extra": {"if": {"properties": {"mode": {"const": "fixed"}}},
                                          "then": {"properties": {"duration_s": {"type": "number"}}},
                                          "else": {"properties": {"duration_s": {"type": "null"}}}}}
    command: str = F(description="The command line as given.")
    workload_file: str | None = F(description="--workload, or null.")
    target: str | None = F(description="The first target's URL; null for the built-in server.")
    targets: list[str] = F(description="Every target's URL (empty for the built-in server).")
    protocol: Literal["synthetic", "memcached", "memcached+binary", "memcached+udp", "redis", "http", "udp", "udp+flow"]
    builtin_server: BuiltinServer | None = F(description="The built-in server started for the run; null with a target.")
    rate_rps: Num = F(description="--rate.", minimum=0)
    mode: Literal["fixed", "adaptive"]
    duration_s: Num | None = F(description="--duration (fixed mode); null in adaptive mode.")
    percentile: Num = F(description="--percentile: the percentile whose CI must meet --ci.", exclusiveMinimum=0, exclusiveMaximum=100)
    percentiles: list[Num] = F(None, description="The percentiles reported (--percentiles, with --percentile and every --threshold's/--slo's added), ascending; absent in summaries written before it existed.")
    ci_ns: Num | None = F(description="--ci as a time; null when relative or not given.")
    ci_rel: Num | None = F(description="--ci as a share of the value (0.1 = 10 %); null when a time or not given.")
    confidence: Num = F(exclusiveMinimum=0, exclusiveMaximum=1)
    max_time_s: Num = F(exclusiveMinimum=0)
    threads: Int = F(minimum=1)
    conns: Int = F(minimum=1)
    outstanding: Int = F(minimum=1)
    arrival: str = F(description="Inter-arrival process: exp, fixed, uniform, lognormal:SIGMA.")
    workload: Workload | None = F(description="Keys and values (memcached, redis); null for other protocols.")
    service: str | None = F(description="Service time: the built-in server's distribution, or the fixed time carried in each request to a synthetic:// target; null otherwise.")
    sample_every: Int = F(minimum=1)
    timeout_ns: Int = F(minimum=1)
    late_ns: Int = F(minimum=0)
    warmup_ns: Int = F(minimum=0)
    poll: Literal["spin", "block"]
    probe: ProbeSettings | None = F(description="The latency probe's settings; null without --probe.")
    packet: PacketSettings | None = F(None, description="Packet mode's settings (udp+flow://); null for other protocols; absent in summaries written before it existed.")
    timestamps: Literal["nic", "kernel", "user"] = F(description="The timestamp source used (--timestamps decided for the target's interface).")
    timestamps_note: str | None
    pin: bool
    keep_stalls: bool
    bounds: Literal["busy", "floor"] = F(None, description="--bounds (see delayed.rule). Added by issue 32.")
    seed: Int = F(description="The random seed (chosen when not given).")
    spec: Spec


KNOB_STATES = ("ok", "warn", "unreadable", "not-applicable")


class Knob(Doc):
    """One of the host's sources of jitter as `tailwise doctor` read it (python/tailwise/host/doctor.py, one class per knob): what it read, whether that is fine for the tail, why it matters and the command that would fix it. A file that is missing or unreadable makes the knob unreadable with the reason, never ok."""

    name: str = F(description="The knob: governor, cstates, turbo, smt, isolation, nic-numa, thp, coalescing, irq-affinity, busy-poll, clocksource, steal, other-load (later versions may add knobs).", minLength=1)
    state: Literal[KNOB_STATES] = F(description="ok: fine for the tail; warn: it can move the tail (detail says how, fix what to do); unreadable: a file or system call could not be read (detail says which and why); not-applicable: it does not apply here (detail says why: a loopback target has no NIC, one NUMA node no remote one).")
    value: str = F(description="What it read, in a few words.")
    detail: str | None = F(description="warn: what is wrong; unreadable: why it could not be read; not-applicable: why not; else null or a note.")
    why: str = F(description="Why the knob matters for the tail, in one line, with its source (KBNets'17 §3/§4.2, Lancet §5, pyperf's system tune).")
    fix: str | None = F(description="The command that would set the tail-friendly value; null when it has it already or nothing was read.")
    source: str = F(description="The files or system calls read (under / on the machine).")
    readings: dict = F(description="The figures read, by name (per CPU keyed by the CPU's number); empty when nothing was read.")


class Host(Doc):
    """The machine measured from (also the directory's host.json)."""

    hostname: str
    kernel: str = F(description="Kernel release (uname -r).")
    cpu_model: str | None
    cores: Int | None = F(description="CPUs of the machine.", minimum=1)
    usable_cores: Int = F(description="CPUs this process may run on (its affinity).", minimum=1)
    clocksource: str | None = F(description="The kernel's clock source (tsc, kvm-clock, ...).")
    python: str
    knobs: list[Knob] = F(None, description="The host's sources of jitter as `tailwise doctor` reads them, one entry per knob, read before the run (run and sweep; not in tailwise calibrate's document).")


class BuiltinServerStats(Doc):
    """The built-in server's own view of the run."""

    source: Literal["builtin-server"]
    served: Int = F(description="Requests served.", minimum=0)
    busy_s: Num = F(description="Time the workers spent serving.", minimum=0)
    effective_service_ns: Num | None = F(description="busy / served: the service time really given (the server's own work included); null when none served.")
    service_overhead_ns: Num | None = F(description="effective_service_ns − the distribution's mean.")
    utilisation: Num | None = F(description="busy / (elapsed × workers): the load really offered, to compare with a queueing model.", minimum=0)
    stalls: Int = F(description="Stalls of the workers (the host took a worker's CPU while it served); they stay in the tail.", minimum=0)
    stalled_s: Num = F(minimum=0)
    stalls_longest_ns: Int | None = F(description="null without stalls.", minimum=0)


class ServerCounts(Doc):
    gets: Int | None
    sets: Int | None
    hits: Int | None
    misses: Int | None
    connections: Int | None = F(None, description="Includes the after-reading's own connection (+1).")


class ServerDelta(ServerCounts):
    connections: Int | None = F(description="Includes the after-reading's own connection (+1).")


class ServerStats(Doc):
    """One server's counters (memcached stats, redis INFO) before and after the run, and their differences (null when a reading failed or the server restarted; error then says why)."""

    target: str
    source: Literal["memcached stats", "redis INFO"]
    before: dict[str, Num] = F(description="The server's raw counters (its own field names) before the run.")
    after: dict[str, Num]
    delta: ServerDelta
    error: str = F(None, description="Present only when a reading failed or a difference is unknown.")
    ours: ServerCounts = F(None, description="tailwise's own counts for the same names.")
    agrees: bool | None = F(None, description="gets, sets, hits and misses all equal the server's; null when a server value is unknown.")


class ServerStatsCombined(Doc):
    """Several servers: one block each, and the sums."""

    source: str
    targets: list[ServerStats] = F(minItems=2)
    delta: ServerCounts
    error: str = None
    ours: ServerCounts = None
    agrees: bool | None = None


class ThresholdResult(Doc):
    """A threshold (--threshold, --slo) judged on the percentile's CI: pass when the whole CI meets it, fail when the whole CI misses it, inconclusive otherwise (straddling, or not bounded). An unsupported percentile is judged on its one-sided lower_bound_ns as the CI's low end with no high end (the detail says so)."""

    threshold: str = F(description="As given, e.g. p99<200us.")
    p: Num = F(exclusiveMinimum=0, exclusiveMaximum=100)
    op: Literal["<", "<=", ">", ">="]
    limit_ns: Int = F(minimum=0)
    status: Literal["pass", "fail", "inconclusive"]
    value_ns: Int | None
    low_ns: Int | None
    high_ns: Int | None
    detail: str


class SweepPlace(Doc):
    """Only in a sweep's points/NNN-RATErps[-ATTEMPT]/summary.json: where the point lies in the sweep."""

    index: Int = F(description="Index of the load in the sweep's grid (rates_rps).", minimum=0)
    rate_rps: Num = F(description="The load of this point.", minimum=0)
    grid_size: Int = F(description="Loads in the grid.", minimum=1)
    attempt: Int = F(None, description="Which measurement of this load it is: 1, or 2 for a load whose CI was inconclusive, measured again (points/NNN-RATErps-2/). Added by issue 19.", minimum=1)


class AgentReport(Doc):
    """One agent of a run on several client machines (run --agents)."""

    address: str = F(description="The agent's HOST:PORT.")
    role: Literal["symmetric", "load", "probe"] = F(description="symmetric: loads and measures; load: loads only (its requests counted, not timed); probe: the latency probe.")
    rate_rps: Num = F(description="The rate this agent was asked to send: its share, in proportion to its engine threads (a probe agent: the probe's rate; with --probe, the share of the load and the probe together).", minimum=0)
    achieved_rps: Num | None = F(description="What it sent per second over the run's duration_s (the coordinator's pauses left out); the agents check judges it against rate_rps with the rate check's tolerance. null: it sent nothing it could report.", minimum=0)
    threads: Int = F(description="Its engine threads.", minimum=0)
    conns: Int = F(description="Its connections.", minimum=0)
    timed: bool = F(description="Whether its requests are timed (in the statistics).")
    clock_offset_ns: Int | None = F(description="Its CLOCK_MONOTONIC minus the coordinator's, from the clock exchange with the shortest round trip.")
    clock_rtt_ns: Int | None = F(description="That exchange's round trip: the offset is known to within half of it.", minimum=0)
    counters: dict[str, Count] = F(description="Its own counts, as of its end or, for an agent that failed, its last answer (the run's counters are the sum).")
    error: str | None = F(description="Why this agent failed the run (unreachable, no answer, refused); null when it did not.")


class Barrier(Doc):
    """How together the agents started (run --agents)."""

    asked_ns: Int = F(description="The common start asked of every agent, on the coordinator's CLOCK_MONOTONIC.")
    spread_ns: Int = F(description="Latest minus earliest of the agents' real starts, on the coordinator's clock.", minimum=0)
    clock_uncertainty_ns: Int = F(description="Half the largest clock-exchange round trip: how well the offsets, and so the spread, are known.", minimum=0)
    late_ns: Int = F(description="How long after the asked instant the last agent started (0: every agent had connected in time).")


class Summary(Doc):
    """The summary of one measurement: `tailwise run --json` on stdout, summary.json in a `tailwise run --out DIR` directory, and points/NNN-RATErps/summary.json of a sweep. Written by python/tailwise/methodology/summarize.py build_summary through the models of python/tailwise/results/documents/run.py, which this schema is generated from; see docs/results.md. Versioning: later versions of schema 1 add fields, never rename or retype one, so additional properties are allowed everywhere. A value that is unknown is null, never NaN and never 0. Units are in the field names: _ns nanoseconds, _s seconds, _rps requests per second; p is a percentile in percent (0-100)."""

    schema_: Literal["tailwise.summary/1"] = F(alias="schema", description="This document's schema and its version.")
    tool: Tool = F(description="The tool that wrote the document.")
    target: str = F(description="The target measured: its URL (synthetic://127.0.0.1:PORT for the built-in server), or the URLs joined with \", \" for several targets.", minLength=1)
    started_at: UtcTime = F(description="When the engine started sending (UTC, to the second).")
    verdict: Literal["ok", "imprecise", "not-measurable"] = F(description="ok: every methodology check passed and the asked precision was reached (no error, no interrupt) — exit status 0; imprecise: every validity check passed, but the asked percentile's interval is wider than --ci (the confidence or stalls check failed; every interval is still sound) — see precision, exit status 4; not-measurable: a validity check failed (rate, agents, errors, loss, arrivals, stationarity, independence, consistency), or the engine stopped with an error or was interrupted — see checks, exit status 1.")
    error: str | None = F(description="Why the engine stopped early (e.g. the target became unreachable); null when it did not. Exit status 2.")
    interrupted: bool = F(description="The run was interrupted (SIGINT) before its end; the figures cover what was measured.")
    rate: Rate = F(description="The offered load and what was sent and answered.")
    latency: Latency = F(description="Latency, counted from each request's intended send time (no coordinated omission).")
    warmup: Warmup = F(description="The warm-up left out of the statistics: whole 100 ms intervals, at most --warmup and at most max_share of the run.")
    exclusions: Exclusions = F(description="Samples left out of the statistics: none since issue 18 (see delayed).")
    delayed: Delayed = F(None, description="The requests tailwise itself delayed, in the statistics as intervals (issue 18).")
    precision: PrecisionReport = F(None, description="What precision was asked and reached, what made the asked percentile's width, and what would help (issue 32); absent in summaries written before it existed.")
    host_pauses: HostPauses = F(None, description="Whether the host paused the client and the target together (issue 18): information, never a failed check.")
    send_lag: SendLag = F(description="Send lag (actual send time − intended send time) of every request sent: how late the client itself was. HDR precision.")
    counters: Counters = F(description="The engine's counts for the whole run (every request, not only the sampled).")
    packets: Packets | None = F(None, description="Packet mode (udp+flow://): packets sent, answered, lost, reordered and duplicated, the packet and bit rates, the histogram's resolution; null for other protocols; absent in summaries written before it existed.")
    probe: Probe | None = F(description="The latency probe (--probe): its settings and its own counters; null without --probe. With a probe only its requests are timed.")
    hit_ratio: Num | None = F(description="Gets answered with a value / gets answered (memcached, redis); null without gets.", minimum=0, maximum=1)
    error_reasons: list[ErrorReason] = F(description="Failed requests by reason.")
    checks: list[Check] = F(description="Every methodology check, in the methodology's order (load: rate, agents (only for a run on agents, --agents: each agent's own send rate against its share and its own arrivals, naming an overloaded client machine), errors, stalls — the requests tailwise delayed and the widening they cause, failing only when that alone misses --ci — and exclusions — what is left out: the warm-up, information; then arrivals, stationarity, independence, confidence, consistency). The verdict is ok only when all pass; imprecise when only confidence or stalls (precision) failed. Later versions may add checks; these names stay.",
                            allOf=[{"contains": {"properties": {"name": {"const": n}}}} for n in CHECK_NAMES])
    methodology: Methodology = F(description="How the coordinator decided, and the final analysis's figures.")
    engine: Engine = F(description="The engine's own conduct: its CPUs, CPU time and stalls.")
    config: Config = F(description="What was asked (also the run directory's config.json).")
    host: Host = F(description="The machine measured from (also the run directory's host.json).")
    target_stats: BuiltinServerStats | ServerStats | ServerStatsCombined | None = F(description="What the target itself counted: the built-in server's own view, or memcached stats / redis INFO read before and after the run and their difference; null for targets without statistics (synthetic://, http://, udp://).")
    thresholds: list[ThresholdResult] = F(description="Each --threshold judged on its percentile's confidence interval (empty without --threshold). A failed or inconclusive one makes the exit status 3.")
    sweep: SweepPlace = F(None, description="Only in a sweep's points/NNN-RATErps[-ATTEMPT]/summary.json: where the point lies in the sweep.")
    agents: list[AgentReport] = F(None, description="Only for a run on agents (--agents): each agent's share, clock offset and counters.")
    barrier: Barrier = F(None, description="Only for a run on agents (--agents): how together they started.")


SCHEMA_FILE = ("summary.schema.json", Summary, "urn:tailwise:schema:summary:1", f"tailwise run summary ({RUN_SCHEMA})")
