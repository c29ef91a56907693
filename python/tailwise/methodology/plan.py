"""What the analysis reads (methodology/analysis.py): a run's plan, the same every round
(``RunPlan``), and a consistent snapshot of the run with its plan (``AnalysisInput``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from tailwise.methodology.checks import Setting
from tailwise.methodology.kinds import Kinds
from tailwise.results.measured import AgentShare
from tailwise.spec.precision import Precision
from tailwise.stats.histogram import Buckets

@dataclass(frozen=True)
class RunPlan:
    """What a run asks for and how it runs: the same for every analysis of it."""

    precision: Precision
    rate_rps: float
    #: The schedule's process (``exp``, ``fixed``, …): what the arrivals check tests.
    arrival: str
    conns: int
    outstanding: int
    #: The engine's sampling: one request in ``sample_every``.
    sample_every: int
    #: --late: a send later than this after its intended time is late (None: the engine's count).
    late_ns: int | None = None
    #: False (--keep-stalls): the requests the client delayed are taken as measured.
    bound_delays: bool = True
    #: How the client ran, for remedies that never recommend what is already so.
    setting: Setting | None = None
    #: --bounds: "busy" (the client's stall time in each request's busy period) or "floor".
    bounds: str = "busy"
    #: --duration: one fixed-length run (more time means a longer --duration, not --max-time).
    fixed: bool = False
    #: Its kinds of request (gets and sets, or several http:// requests; methodology/kinds.py),
    #: each with its own percentiles in the final analysis; None: one kind.
    kinds: Kinds | None = None


@dataclass(frozen=True)
class AnalysisInput:
    """A consistent snapshot of a run, and its plan: everything ``analyse`` reads.

    ``samples``: SAMPLE_DTYPE records sorted by intended send time — every sampled request,
    finished or censored (outstanding ones at ``end_ns``, the snapshot time; None: after the last
    intended time). ``elapsed_s``: the time the schedule ran, pauses left out. ``pauses``: the
    coordinator's pauses of the schedule (ns since the start; no request is intended in them);
    ``engine_stalls`` and ``target_stalls``: the stalls of the engine threads and of an in-process
    server (their effect on requests is in the samples' flags). ``every_request(first, last)``: the
    every-request histogram of intervals first … last − 1."""

    plan: RunPlan
    samples: np.ndarray
    counters: dict
    elapsed_s: float
    received_in_window: int
    rng: np.random.Generator
    reasons: Sequence[tuple[str, int]] = ()
    end_ns: int | None = None
    pauses: Sequence[tuple[int, int]] = ()
    engine_stalls: Sequence[tuple[int, int]] = ()
    target_stalls: Sequence[tuple[int, int]] = ()
    every_request: Callable[[int, int], Buckets | None] | None = None
    #: A run on several agents: each agent's share and counters (driver/local.py, ``AgentShare``),
    #: and which of them each sample is (an index into ``agents``, aligned with ``samples``).
    agents: Sequence[AgentShare] = ()
    owner: np.ndarray | None = None
    #: The final analysis: each of the plan's kinds of request gets its percentiles too (a round's
    #: analysis, which only decides, leaves them out).
    per_kind: bool = False
