"""What one analysis found (analysis.py), typed; ``Analysis.to_dict`` is its part of the summary
JSON (the ``methodology`` block and, read from it, ``warmup``, ``exclusions``, ``delayed``,
``host_pauses``): the keys and values docs/schema/summary.json describes."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tailwise.methodology.checks import Check
from tailwise.methodology.kinds import KindLatency
from tailwise.methodology.verdict import verdict_of
from tailwise.stats.arrivals import ArrivalFit
from tailwise.stats.independence import Independence
from tailwise.stats.quantiles import Percentile
from tailwise.stats.stationarity import Stationarity


@dataclass(frozen=True)
class Warmup:
    """The exclusion rule's cut, as reported: the leading span left out, by the clock."""

    span_s: float
    bound_s: float
    max_share: float
    samples: int
    p99_ns: float | None

    def to_dict(self) -> dict:
        return {"span_s": self.span_s, "bound_s": self.bound_s, "max_share": self.max_share,
                "samples": self.samples, "p99_ns": self.p99_ns}


@dataclass(frozen=True)
class Delayed:
    """The requests the client delayed, in the statistics as intervals (stats/bounds.py)."""

    bounded: bool
    sent_late: int
    outstanding_across: int
    window_samples: int
    #: The least latency of a request the client did not delay: where lower bounds start.
    floor_ns: float
    percentiles: tuple[Percentile, ...]
    #: Busy-period rule: requests neither flag marks whose busy period held a stall of the client.
    behind_stall: int = 0
    #: "busy" or "floor" (--bounds): how the lower bounds were made (stats/bounds.py).
    rule: str = "busy"

    @property
    def samples(self) -> int:
        return self.sent_late + self.outstanding_across + self.behind_stall

    @property
    def share(self) -> float:
        return self.samples / self.window_samples if self.window_samples else 0.0

    def to_dict(self) -> dict:
        return {
            "bounded": bool(self.bounded),
            "samples": self.samples, "window_samples": self.window_samples, "share": self.share,
            "causes": {"sent_late": self.sent_late, "outstanding_across": self.outstanding_across,
                       "behind_stall": self.behind_stall},
            "rule": self.rule,
            "floor_ns": self.floor_ns,
            "percentiles": [{"p": pc.p, "value_ns": pc.value, "value_low_ns": pc.value_low,
                             "low_ns": pc.low, "sampling_low_ns": pc.sampling_low, "widening_ns": pc.widening}
                            for pc in self.percentiles],
        }


@dataclass(frozen=True)
class StallCounts:
    """The stalls logged over the run: the engine threads' and the built-in server's."""

    engine: int
    engine_longest_ns: int
    target: int
    target_longest_ns: int

    @classmethod
    def of(cls, engine_stalls, target_stalls) -> StallCounts:
        return cls(len(engine_stalls), max((b - a for a, b in engine_stalls), default=0),
                   len(target_stalls), max((b - a for a, b in target_stalls), default=0))


@dataclass(frozen=True)
class Analysis:
    checks: list[Check]
    state: str  # first failing step, or "done"
    percentiles: list[Percentile]
    target: Percentile | None
    used_mask: np.ndarray  # over the samples given: True where a sample went into the statistics
    window: tuple[int, int]  # intended times [start, end) the statistics used (ns since the start)
    samples_needed: int | None
    warmup: Warmup
    delayed: Delayed
    #: host_pauses(): whether the host paused the client and the target together (information).
    host_pauses: dict
    #: The probe of the engine's stalls (probe_correlation), or None.
    probe: dict | None
    #: consistency(): each percentile against every request of the window.
    consistency: list[dict]
    #: Every request of the window: its count and each reported percentile (None: no histogram).
    every_request: tuple[int, list[tuple[float, float | None]]] | None
    #: The coordinator's pauses of the schedule: how many, and their total in s.
    pauses: tuple[int, float]
    stalls: StallCounts
    #: What precision was asked and reached (methodology/verdict.py): the summary's ``precision``.
    precision: dict
    samples_collected: int
    samples_used: int
    inflated_samples: int
    censored_samples: int
    #: Per reported percentile, its indicator's autocorrelation (n_eff, thinning).
    independence: dict[float, Independence]
    response_mean_ns: float | None
    arrivals: ArrivalFit
    stationarity: Stationarity
    #: The final analysis of a run with several kinds of request: each kind's percentiles
    #: (methodology/kinds.py; information, outside the verdict). None: one kind, or a round's.
    by_request: list[KindLatency] | None = None

    @property
    def ok(self) -> bool:
        return self.state == "done"

    def verdict(self, *, error: str | None = None, interrupted: bool = False) -> str:
        """ok, imprecise or not-measurable (methodology/verdict.py)."""
        return verdict_of(self.checks, error=error, interrupted=interrupted).value

    def failed(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def thinning(self) -> int:
        """⌈τ⌉ of the asked percentile: the equivalent thinning (old summary fields)."""
        return self._target_ind.step

    @property
    def _target_ind(self) -> Independence:
        return self.independence[self.target.p if self.target else next(iter(self.independence))]

    def to_dict(self) -> dict:
        """The analysis' fields of the summary, as they have always been named."""
        w0, end = self.window
        every = {} if self.every_request is None else {
            "count": self.every_request[0],
            "percentiles": [{"p": p, "value_ns": v} for p, v in self.every_request[1]]}
        ind = self._target_ind
        return {
            "window_ns": [w0, end],
            "window_every_request": every,
            "warmup": self.warmup.to_dict(),
            "pauses": {"count": self.pauses[0], "total_s": self.pauses[1]},
            # Nothing but the warm-up leaves the statistics; the old fields stay, at their new values.
            "exclusions": {"budget": 0.0, "samples": 0, "window_samples": self.samples_used, "share": 0.0,
                           "causes": {"engine_stall": 0},
                           "correlation": {"engine_stall": self.probe} if self.probe else {}},
            "delayed": self.delayed.to_dict(),
            "host_pauses": self.host_pauses,
            "consistency": self.consistency,
            # Fields kept from earlier summaries (ARCHITECTURE.md, "Summary JSON").
            "warmup_trimmed_s": self.warmup.span_s,
            "warmup_trimmed_samples": self.warmup.samples,
            "masked_samples": 0,
            "delayed_samples": self.delayed.samples,
            "stalls": self.stalls.engine,
            "stalls_longest_ns": self.stalls.engine_longest_ns,
            "stall_masked_samples": 0,
            "target_stalls": self.stalls.target,
            "target_stalls_longest_ns": self.stalls.target_longest_ns,
            "inflated_samples": self.inflated_samples,
            "censored_samples": self.censored_samples,
            "thinning": ind.step,
            "samples_collected": self.samples_collected,
            "samples_used": self.samples_used,
            "n_effective": ind.n_effective,
            "percentile_samples": {f"{p:g}": self.samples_used for p in self.independence},
            "percentile_n_effective": {f"{p:g}": i.n_effective for p, i in self.independence.items()},
            "percentile_thinning": {f"{p:g}": i.step for p, i in self.independence.items()},
            "response_mean_ns": self.response_mean_ns,
            "arrival_distance": self.arrivals.distance,
            "arrival_pvalue": self.arrivals.pvalue,
            "kpss_p": self.stationarity.kpss_p,
            "adf_p": self.stationarity.adf_p,
            "tail_concentration": self.stationarity.concentration,
        }
