"""The rows an agent keeps for a coordinator that does not collect them (issue 33, item 3), and
the memory they may take.

When the coordinator has not taken the engine's rows for ``KEEP_S``, the agent's watchdog
(agents/server.py) takes them from the engine itself into ``Held``, at most ``Limits.max_rows``
(agents/limits.py: derived from --max-memory or the cgroup's limit, at ``ROW_COST`` a row), past
which they are thinned by the coordinator's own subsample and keys (stats/subsample.py); the next
Snapshot or Finish hands them over with their level (``thinned_level``), and the agent says it
once (``Thinned``). The keeper takes no pending rows, and an engine thread that gathers more than
``Held.engine_rows`` between two takes (far behind its schedule, it ends millions of requests at
once) thins them itself by the same keys (``Engine.thin_rows``): each take says the level.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from tailwise import _core
from tailwise.results.rows import SAMPLE_DTYPE
from tailwise.stats.subsample import AGENT_THREADS, Subsample

#: How often Finish looks whether the engine ended, and the watchdog at most (agents/server.py).
POLL_S = 0.05
#: The agent's memory (issue 33, item 3). Within --max-memory, or the cgroup's limit, the rows it
#: holds for a coordinator that does not collect them get what is left after the rest of the agent:
#: the interpreter, numpy, gRPC, the engine's histograms and buffers, and what grows with a run (its
#: interval histograms, gRPC's buffers) — an idle agent is 65 MiB resident on the project's machine,
#: 78–89 MiB once a run has started (bench/agents/memory.py) —
BASE_MEMORY = 96 << 20
#: and udp+flow's rings, at most the engine's RINGS_BUDGET: 2²² slots of 40 bytes (packet/flows.rs;
#: the figure copied for this sum only): a packet run's ceiling of rows is that much lower.
RINGS_MEMORY = 160 << 20
#: What a row held costs of the bound, 4 × 64 bytes: its 64 bytes in the agent's subsample, 64 more
#: for the copy it is sent from, and room for what the engine gathers between two of the keeper's
#: takes — at most an eighth of the ceiling (``PILE_SHARE``), at 3 × 64 bytes a row once taken
#: (the engine's rows, the bytes they are handed over in, the subsample's copy), and as much again
#: for a late take: a take of a million rows is ~0.3 s late on the project's machine
#: (bench/agents/memory.py).
ROW_COST = 4 * _core.SAMPLE_BYTES
PILE_SHARE = 8
#: What an engine thread far behind its schedule gathers at once is bounded too: it ends millions
#: of requests (never sent) in a moment after seconds of sending (bench/agents/memory.py at an
#: offered rate far above what the machine sends), more than any take's cadence holds. Past the
#: room ROW_COST leaves it — twice ``PILE_SHARE``'s share: a take, and a late one — the engine
#: thins them by the same keys (``Engine.thin_rows``) and says the level.
ENGINE_SHARE = PILE_SHARE // 2
#: The ceiling of rows without a bound (no --max-memory, no cgroup limit): 8 Mi rows, 512 MiB held
#: (2 GiB at ROW_COST, the Kubernetes manifests' limit); 8× what a coordinator keeps for its
#: statistics (stats/subsample.py LIMIT).
DEFAULT_MAX_ROWS = 1 << 23
#: Fewer rows than this between two snapshots is too little to run at all: the least --max-memory.
MIN_ROWS = 1 << 16
MIN_MEMORY = BASE_MEMORY + MIN_ROWS * ROW_COST
#: The keeper takes the engine's rows itself when they were not taken for this long (the
#: coordinator of a fixed-length run takes them every 0.25 s), or sooner when they come fast for
#: the ceiling (``Held.every_s``), but not more often than the watchdog looks.
KEEP_S = 1.0
MIN_KEEP_S = 2 * POLL_S


def rows_per_s(config: dict[str, Any]) -> float:
    """Sampled rows a canonical configuration keeps a second: the probe's requests (every one),
    else the timed load's 1 in ``sample_every``; none for a load agent."""
    probe = config.get("probe")
    if probe:
        return float(probe["rate_rps"])
    return config["rate_rps"] / max(1, config["sample_every"]) if config.get("timed", True) else 0.0


class Held:
    """The rows an agent took from its engine for a coordinator that did not (issue 33, item 3):
    at most ``max_rows``, past which the coordinator's own subsample thins them (stats/subsample.py),
    each keyed as the coordinator keys it — its thread + the agent's index × ``AGENT_THREADS`` —
    so that the coordinator, raising its level to theirs, pools exactly one level's rows of every
    agent. A Snapshot or Finish hands them over with their level and leaves it empty, at level 0:
    the agent thins only while rows pile up.

    ``lock`` is held from the engine's take to the rows' add (the keeper takes it under the
    agent's lock, without waiting), so that a hand-over after a take includes it; the thinning
    itself runs outside the agent's lock (Health never waits for it)."""

    def __init__(self, agent_index: int, max_rows: int, rows_per_s: float):
        self.max_rows = max_rows
        self._rows = Subsample(SAMPLE_DTYPE, limit=max_rows, source_base=agent_index * AGENT_THREADS)
        self.lock = threading.Lock()
        #: When the engine's rows were last taken (time.monotonic()): by a Snapshot or the keeper;
        #: and by the coordinator (a Snapshot, or the start).
        self.taken_at = self.collected_at = time.monotonic()
        #: How often the keeper takes them: KEEP_S, or sooner, so that the engine gathers
        #: meanwhile (rows_per_s × every_s) at most max_rows / PILE_SHARE (small takes: a late one
        #: costs little); never more often than MIN_KEEP_S.
        room_s = max_rows / PILE_SHARE / rows_per_s if rows_per_s else KEEP_S
        self.every_s = min(KEEP_S, max(MIN_KEEP_S, room_s))
        #: The agent said it thinned (once a run).
        self.said = False
        #: The rows the engine may gather between two takes before it thins them itself.
        self.engine_rows = max(1, max_rows // ENGINE_SHARE)

    @property
    def level(self) -> int:
        return self._rows.level

    def add(self, rows: np.ndarray, level: int = 0) -> None:
        """Rows the keeper took (with ``lock`` held), which the engine thinned to ``level``."""
        self._rows.raise_to(level)
        self._rows.add(rows)

    def hand_over(self, rows: np.ndarray, pending: np.ndarray, level: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
        """The engine's newest rows (thinned there to ``level``) with those held, and the rows
        outstanding, both at the level they were thinned to: (rows, pending, level). Empty after,
        at level 0."""
        with self.lock:
            if not len(self._rows) and not level:
                return rows, pending, 0  # nothing held: this batch as the engine gave it
            self._rows.raise_to(level)
            self._rows.add(rows)
            level, pending = self._rows.level, self._rows.select(pending)
            return self._rows.drain(), pending, level
