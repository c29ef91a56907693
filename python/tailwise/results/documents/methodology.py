"""The run summary's account of how the coordinator decided (documents/run.py, ``Summary``): the
checks, the rounds, the consistency comparison, the bounded subsample and ``Methodology``.
"""

from __future__ import annotations

from typing import Literal

from tailwise.results.documents.base import Doc, F, Int, Num
from tailwise.results.documents.latency import (Delayed, Exclusions, HostPauses, PrecisionReport, Warmup,
                                                WindowEveryRequest)

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
