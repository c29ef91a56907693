"""The run summary (``tailwise.summary/1``): summary.json of a run directory and ``run --json``.

One definition: methodology/summarize.build_summary writes it through these models, and
docs/schema/summary.schema.json is generated from them (``python -m tailwise.results.documents``).
The models it is made of are by concern: documents/latency.py (the statistics), methodology.py (how
the coordinator decided), counts.py (the counters, the engine, the target's own counts) and
config.py (what was asked, the host).
"""

from __future__ import annotations

from typing import Literal

from tailwise.results.documents.base import Count, Doc, F, Int, Num, UtcTime
from tailwise.results.documents.config import Config, Host
from tailwise.results.documents.counts import (BuiltinServerStats, Counters, Engine, ErrorReason, Packets, Probe,
                                               ServerStats, ServerStatsCombined, Tls)
from tailwise.results.documents.latency import (Delayed, Exclusions, HostPauses, KindLatency, Latency, PrecisionReport,
                                                Rate, SendLag, Warmup)
from tailwise.results.documents.methodology import Check, Methodology
from tailwise.results.files import RUN_SCHEMA

CHECK_NAMES = ("rate", "errors", "stalls", "exclusions", "arrivals", "stationarity", "independence", "confidence",
               "consistency")


class Tool(Doc):
    """The tool that wrote the document."""

    name: Literal["tailwise"]
    version: str = F(description="tailwise's version (the Python package's).")


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
    by_request: list[KindLatency] | None = F(None, description="Latency per kind of request, when a run has several: gets and sets (memcached, Redis with --mix), or each request of an http:// requests file, in their order (the samples' request column is the index). Each kind's percentiles are computed as the whole run's, on its samples alone; information: the verdict stays on the whole run. null with one kind; absent in summaries written before it existed. Added by issue 36.")
    warmup: Warmup = F(description="The warm-up left out of the statistics: whole 100 ms intervals, at most --warmup and at most max_share of the run.")
    exclusions: Exclusions = F(description="Samples left out of the statistics: none since issue 18 (see delayed).")
    delayed: Delayed = F(None, description="The requests tailwise itself delayed, in the statistics as intervals (issue 18).")
    precision: PrecisionReport = F(None, description="What precision was asked and reached, what made the asked percentile's width, and what would help (issue 32); absent in summaries written before it existed.")
    host_pauses: HostPauses = F(None, description="Whether the host paused the client and the target together (issue 18): information, never a failed check.")
    send_lag: SendLag = F(description="Send lag (actual send time − intended send time) of every request sent: how late the client itself was. HDR precision.")
    counters: Counters = F(description="The engine's counts for the whole run (every request, not only the sampled).")
    packets: Packets | None = F(None, description="Packet mode (udp+flow://): packets sent, answered, lost, reordered and duplicated, the packet and bit rates, the histogram's resolution; null for other protocols; absent in summaries written before it existed.")
    probe: Probe | None = F(description="The latency probe (--probe): its settings and its own counters; null without --probe. With a probe only its requests are timed.")
    tls: Tls | None = F(None, description="TLS to the target (https://, …+tls://): the handshakes — full, resumed, failed and their p50/p99, timed apart from the requests — and how the server was verified; null in the clear; absent in summaries written before issue 36.")
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
