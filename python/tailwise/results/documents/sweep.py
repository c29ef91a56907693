"""The sweep summary (``tailwise.sweep/1``): summary.json at the top of a sweep directory and
``sweep --json``. Each point's own summary.json is a run summary (documents/run.py).

One definition: sweep/run.Sweep.summary writes it through these models, and
docs/schema/sweep.schema.json is generated from them (``python -m tailwise.results.documents``).
"""

from __future__ import annotations

from typing import Literal

from tailwise.results.documents.base import Doc, F, Int, Num, UtcTime
from tailwise.results.documents.config import Host, Spec
from tailwise.results.documents.latency import Percentile
from tailwise.results.documents.run import ThresholdResult, Tool
from tailwise.results.files import SWEEP_SCHEMA


class ClientWindow(Doc):
    """The client's window every point shares, and what the top load needs of it by Little's law (L = λW): rates_rps' highest × assumed_response_ns × 2 for bursts. Without --conns/--outstanding the sweep sizes the window to hold it (sized true); a given window that cannot is refused. Added by issue 19."""

    conns: Int = F(minimum=1)
    outstanding: Int = F(minimum=1)
    slots: Int = F(description="conns × outstanding.", minimum=1)
    needed_slots: Int = F(description="Requests in flight the top load needs at the assumed response time, × 2.", minimum=0)
    assumed_response_ns: Int = F(description="The response time the window is sized for (a µs-scale service's round trip several times over).", minimum=0)
    sized: bool = F(description="The sweep chose conns/outstanding (not given).")


class Attempt(Doc):
    dir: str = F(description="Its results directory, relative to the sweep's (points/NNN-RATErps, then points/NNN-RATErps-2 …).")
    slo_status: Literal["pass", "fail", "inconclusive", None]
    saturated: bool


class Point(Doc):
    """One measured load; its directory (dir) is a full run directory whose summary.json follows summary.schema.json."""

    model_config = {"json_schema_extra": {"allOf": [{
        "if": {"properties": {"saturated": {"const": True}}, "required": ["saturated"]},
        "then": {"properties": {"saturation_reason": {"type": "string"}}},
        "else": {"properties": {"saturation_reason": {"type": "null"}}}}]}}
    index: Int = F(description="Index of the load in rates_rps.", minimum=0)
    rate_rps: Num = F(description="The load offered.", minimum=0)
    dir: str = F(description="The point's run directory, relative to the sweep directory (a load measured again: NNN-RATErps-2, its latest attempt).", pattern="^points/[0-9]{3,}-[0-9]+rps(-[0-9]+)?$")
    verdict: Literal["ok", "imprecise", "not-measurable"] = F(description="The point's verdict: ok, imprecise (valid, its interval wider than --ci: a measured point all the same) or not-measurable.")
    achieved_rps: Num | None = F(description="As the point's rate.achieved_rps.")
    completed_rps: Num | None
    duration_s: Num
    percentiles: list[Percentile] = F(description="The point's latency.percentiles.", minItems=1)
    target: Percentile | None = F(description="The sweep's percentile at this point, with its CI.")
    p50_every_ns: Num | None = F(description="Median of every request in the point's window (the divergence test's figure).")
    every_ns: Num | None = F(description="The sweep's percentile (or the nearest one reported) over every request of the point's window: never null while requests were sent, even at saturation (the knee's last point).")
    saturated: bool
    saturation_reason: str | None = F(description="Why the point counts as saturated; null when it does not.")
    client_limited: str | None = F(None, description="Why the client's window, not the server, limited the point (requests waited for a free slot and the window held less than twice what the offered rate needs in flight at the lowest load's response time, by Little's law), with the figures; null otherwise. Added by issue 19.")
    slo: ThresholdResult | None = F(description="SLO mode: the SLO judged on this point's CI; null in knee mode.")
    meets_slo: bool | None = F(description="SLO mode: true when the SLO passes as a whole CI and the point did not saturate; false when its whole CI misses the SLO or the target saturated; null when undetermined (an inconclusive CI, or the client's window was the limit) and in knee mode. Null since issue 19 where it was false.")
    slo_outcome: Literal["met", "not-met", "undetermined", None] = F(None, description="SLO mode: meets_slo in words; null in knee mode. Added by issue 19.")
    attempts: list[Attempt] = F(None, description="Every measurement of this load in order, the last being the point's (SLO mode measures a load whose CI is inconclusive again, at most max_attempts in all). Added by issue 19.", minItems=1)
    thresholds: list[ThresholdResult] = F(description="Each --threshold at this point.")
    failed_checks: list[str] = F(description="Names of the point's failed methodology checks.")
    host_stall_share: Num | None = F(description="The share of the point's requests that stalls of the built-in server (the host took a worker's CPU for ≥ 200 µs) can have delayed: Σ stall / ((1 − ρ) × worker time), ρ the server's utilisation (capped at 0.95); null for any other target, whose stalls are not seen.", minimum=0, maximum=1)
    host_shortfall: str | None = F(description="Against the built-in server: why the point's completed rate fell short of its load because the host stalled the server, not because the server ran out of capacity (the client sent its load, the server was busy less than 95 % of the time, and the shortfall is within host_stall_share) — such a point is not saturated; null otherwise.")


class Disturbed(Doc):
    rate_rps: Num
    host_stall_share: Num = F(minimum=0, maximum=1)


class Knee(Doc):
    """The knee of the curve of the percentile against load (Kneedle on the unsaturated points whose percentile has a CI, read as the closest non-decreasing curve with each point weighted by 1/width² of its CI, up to the first saturated point's every-request figure, which is never the knee), or the last such load before saturation when Kneedle finds none. Its uncertainty: candidates_rps, low_rps, high_rps."""

    rate_rps: Num
    index: Int = F(minimum=0)
    method: Literal["kneedle", "last load before saturation"]
    percentile: Percentile = F(description="The percentile at the knee, with its CI.")
    candidates_rps: list[Num] = F(None, description="The loads (with a CI) whose intervals allow the knee there: Kneedle's difference at its most (the percentile at its CI's low end) reaches the knee's at its least. Added by issue 19.")
    low_rps: Num = F(None, description="The knee lies at or above this measured load: the one below the lowest candidate (the curve between measured loads is not known). Added by issue 19.")
    high_rps: Num = F(None, description="The knee lies at or below this measured load: the one above the highest candidate. Added by issue 19.")
    disturbed: list[Disturbed] = F(description="The loads above the knee (before saturation) whose host_stall_share reaches 1 − percentile/100: their percentile can be the host's rather than the load's, so the knee is uncertain (the load's knee may be higher). Empty when none.")


class Saturation(Doc):
    """The first point where the target saturated (rate not sent or not completed, timeouts or errors, or latency diverging)."""

    rate_rps: Num
    index: Int = F(minimum=0)
    reason: str
    client_limited: str | None = F(None, description="Why the client's window (conns × outstanding), not the server, was the limit at that point, with the figures; such a point gives no capacity_rps. Null when the server saturated. Added by issue 19.")


class SloAnswer(Doc):
    """SLO mode: the answer of the search."""

    threshold: str = F(description="--slo as given.")
    outcome: Literal["met", "not-met", "undetermined"] = F(None, description="met: some load meets the SLO as a whole CI (rate_rps); not-met: the lowest load's whole CI misses it; undetermined: neither — inconclusive CIs (after max_attempts), or the client's window was the limit; detail says why. Added by issue 19.")
    rate_rps: Num | None = F(description="The highest load measured to meet the SLO (whole CI); null when none does (outcome not-met or undetermined).")
    percentile: ThresholdResult | None = F(description="The SLO judged at that load.")
    next_rate_rps: Num | None = F(description="The lowest measured load above it that does not meet the SLO; null when none.")
    next: ThresholdResult | None = F(description="The SLO judged at that load.")
    resolution_rps: Num | None = F(description="next_rate_rps − rate_rps: how precisely the limit is known.")
    undetermined_rps: list[Num] = F(None, description="Loads whose outcome stayed undetermined: between rate_rps and next_rate_rps when a load met the SLO, else every one. Added by issue 19.")
    detail: str


class SweepPlan(Doc):
    rates_rps: list[Num] = F(minItems=1)
    rates: str = F(description="--rates as given.")
    steps: Literal["linear", "log"]
    slo: str | None = F(description="--slo as given.")
    thresholds: list[str] = F(description="Each --threshold as given.")
    samples_format: Literal["csv", "parquet"]
    window_sized: bool = F(None, description="The client's window was sized for the top load (no --conns/--outstanding given). Added by issue 19.")


class Invocation(Doc):
    command: str
    started_at: UtcTime | None = F(description="UTC; null for a sweep started before history was kept.")


class SweepConfig(Doc):
    """What the sweep was asked (also the sweep directory's config.json, which --resume reads): the command, the run settings every point shares and the sweep's own."""

    command: str = F(description="The command line that started the sweep (a resume keeps it; history lists every invocation).")
    spec: Spec
    sweep: SweepPlan
    history: list[Invocation] = F(None, description="Every invocation of the sweep in order: the one that started it, then each --resume. Added by issue 19.")


class SweepSummary(Doc):
    """The summary of a sweep: `tailwise sweep --json` on stdout and summary.json at the top of a sweep directory (rewritten atomically after every point, so it may describe a sweep still running: complete false, stopped null). Written by python/tailwise/sweep/run.py (Sweep.summary) through the models of python/tailwise/results/documents/sweep.py, which this schema is generated from; see docs/results.md. Each point's own summary.json (points/NNN-RATErps/) follows summary.schema.json, whose definitions (percentile, threshold_result, spec, host) it shares. Versioning: later versions add fields, never rename or retype one; additional properties are allowed. Unknown values are null, never NaN. Units are in the names: _ns nanoseconds, _s seconds, _rps requests per second."""

    model_config = {"json_schema_extra": {"allOf": [{
        "if": {"properties": {"mode": {"const": "slo"}}, "required": ["mode"]},
        "then": {"properties": {"slo": {"type": "object"}}},
        "else": {"properties": {"slo": {"type": "null"}}}}]}}
    schema_: Literal["tailwise.sweep/1"] = F(alias="schema", description="This document's schema and its version.")
    tool: Tool = F(description="The tool that wrote the document.")
    target: str = F(description="The target's URL, or \"synthetic (built-in server, SERVICE)\" for the built-in server (each point's summary names the server's address).", minLength=1)
    started_at: UtcTime = F(description="When this invocation of the sweep started (a resumed sweep: when it was resumed), UTC.")
    mode: Literal["knee", "slo"] = F(description="knee: every load in increasing order until the target saturates; slo: bisection for the highest load meeting --slo.")
    complete: bool = F(description="The sweep reached its end (stopped is slo-found, slo-not-met, slo-undetermined, saturated or end-of-rates); false while running, after an interrupt or an error: `tailwise sweep --resume DIR` continues it.")
    stopped: Literal[None, "slo-found", "slo-not-met", "saturated", "end-of-rates", "interrupted", "error", "slo-undetermined"] = F(description="Why the sweep ended: slo-found (SLO mode: the search is over and a load meets it), slo-not-met (SLO mode: the lowest load's whole CI misses it), slo-undetermined (SLO mode: the search is over, no load met it and the lowest did not miss it as a whole — added by issue 19), saturated (knee mode: a point saturated), end-of-rates, interrupted, error; null while it is still running.")
    interrupted: bool = F(description="The sweep was interrupted (SIGINT); the completed points are kept: continue with --resume.")
    error: str | None = F(description="The error that ended the sweep (a point's engine error at a load that did not saturate); null otherwise.")
    percentile: Num = F(description="The percentile the sweep decides on (--percentile, or the SLO's).", exclusiveMinimum=0, exclusiveMaximum=100)
    rates_rps: list[Num] = F(description="The grid of loads (--rates), in increasing order; a point's index refers to it.", minItems=1, items={"type": "number", "minimum": 0})
    steps: Literal["linear", "log"] = F(description="Spacing of START:STOP:N (--steps).")
    client_window: ClientWindow = F(None, description="The client's window every point shares (issue 19).")
    max_attempts: Int = F(None, description="SLO mode: how many times a load whose CI is inconclusive is measured in all (2: each attempt can pass falsely with probability at most (1 − confidence)/2, so two keep it within 1 − confidence); 1 in knee mode. Added by issue 19.", minimum=1)
    points: list[Point] = F(description="The points measured so far, by increasing load (SLO mode measures only some of the grid).")
    knee: Knee | None = F(description="The knee of the curve of the percentile against load; null when there is none.")
    saturation: Saturation | None = F(description="The first point where the target saturated; null when none did.")
    capacity_rps: Num | None = F(description="The highest completed rate at a point where the server (not the client's window) saturated: the server's throughput; null without one.", minimum=0)
    capacity_lower_bound: bool = F(description="True when the point that gives capacity_rps completed what it was offered (within 5 %): it saturated by its latency or by timeouts before the server fell behind, so the throughput is at least capacity_rps.")
    slo: SloAnswer | None = F(description="SLO mode: the answer of the search; null in knee mode.")
    config: SweepConfig = F(description="What was asked (also the sweep directory's config.json).")
    host: Host = F(description="The machine measured from (also the sweep directory's host.json).")


SCHEMA_FILE = ("sweep.schema.json", SweepSummary, "urn:tailwise:schema:sweep:1", f"tailwise sweep summary ({SWEEP_SCHEMA})")
