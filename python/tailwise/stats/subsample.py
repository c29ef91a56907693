"""A bounded subsample of the kept requests, so that a run's memory does not grow with its length.

The engine keeps a random 1 in ``sample_every`` of the requests (record/sampler.rs: each request
independently, by geometric skips). A long run keeps too many for memory (50k req/s keep ~17k
rows a second: 3 GB an hour), so the statistics work on at most ``LIMIT`` of them, chosen here.

The method: adaptive sampling (Wegman; Flajolet, "On adaptive sampling", Computing 43, 1990).
Each row gets a key, a 64-bit hash of its intended send time and its source — its engine thread
and agent, so that two threads or agents on the same schedule are chosen independently (SplitMix64:
Steele, Lea & Flood, "Fast splittable pseudorandom number generators", OOPSLA 2014) — a
pseudo-random number that does not depend on anything the request measured. At level ``d`` a row is kept iff its key's top ``d``
bits are zero, probability 2^−d; when the rows kept exceed ``LIMIT``, ``d`` goes up by one and
the rows kept are filtered again (about half stay), so between LIMIT/2 and LIMIT are kept.

Why the intervals keep their coverage: the choice is a function of the key only, and the key is
independent of every latency, so the rows kept are an independent Bernoulli(2^−d) thinning of the
engine's sample — itself an independent Bernoulli(1/k) thinning of the requests — hence a random
1 in k·2^d of the requests, each chosen independently of its latency and of the others. Given the
count n kept, they are a simple random sample of the run's requests (in the window: the warm-up
rule is by the clock), so the order-statistic intervals of stats/quantiles.py hold at that n, as
they hold at the engine's 1 in k (Le Boudec, Performance Evaluation of Computer and Communication
Systems, 2010, §2.2): the interval is only as wide as n asks. The autocorrelation correction
(stats/independence.py) is estimated on the rows kept, whose lag-1 neighbours are 2^d times
farther apart in send order: τ can only shrink, and is measured, never assumed. A Bernoulli
thinning of a Poisson process is a Poisson process (Kingman, Poisson Processes, 1993, §5.1), so
the arrivals check still tests an exponential schedule (a fixed 1-in-m would turn it into
Erlang-m). tests/unit/test_subsample.py checks the coverage by simulation.

What is reported: ``methodology.subsample`` (its 1-in-2^d, the limit, rows collected and kept);
``latency.samples`` counts the rows the percentiles used; the results directory's samples file
still holds every row the engine kept, ``used`` marking those in the statistics.

An agent whose coordinator does not collect its rows holds them in a subsample of its own
(agents/held.py, issue 33), keyed as the coordinator keys them (``source_base``: its index ×
``AGENT_THREADS``). The levels nest — a row kept at d + 1 is kept at d — so a batch an agent
thinned to level d, added after the coordinator's level is raised to at least d (``raise_to``),
leaves the pool exactly "every row whose key has the pool's level of leading zero bits", across
all agents: still a function of the key alone. The samples file then lacks the rows the agent
left out (``methodology.subsample.agents_thinned`` says which agents, and to what).
"""

from __future__ import annotations

import numpy as np

#: On several agents a row's ``thread`` is its agent's index times this plus its engine thread.
AGENT_THREADS = 1 << 16
#: Rows kept for the statistics at most: between LIMIT/2 and LIMIT once the run has more. At ~150
#: bytes a row while a round is analysed (the row, its columns as int64, masks, sorted copies),
#: ~150 MB at most.
LIMIT = 1 << 20
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = z + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def keys(intended_ns: np.ndarray, source: np.ndarray | None = None) -> np.ndarray:
    """SplitMix64's output for each intended time and the request's ``source`` (its engine thread
    and agent, one integer): the rows' uniform 64-bit keys. Two threads or agents on the same
    schedule (agents started with one seed; fixed arrivals) have equal intended times: keyed by
    time alone, such rows would be kept or dropped together (issue 32)."""
    z = _mix(np.asarray(intended_ns).astype(np.uint64))
    if source is None:
        return z
    # Source 0 (a run's first thread, on one machine) keeps the time's own key.
    src = np.asarray(source).astype(np.uint64)
    return np.where(src == 0, z, _mix(z ^ src))


def source_of(rows: np.ndarray) -> np.ndarray | None:
    """A row's source for ``keys``: its ``thread`` — on several agents the coordinator numbers them
    apart (agents/merge.py: the agent's index × ``AGENT_THREADS`` + the thread), so that the same key
    is read from the subsample, the journal's files and the samples file alike. None for rows
    without it (an older engine)."""
    return rows["thread"].astype(np.uint64) if "thread" in (rows.dtype.names or ()) else None


def kept(intended_ns: np.ndarray, level: int, source: np.ndarray | None = None) -> np.ndarray:
    """Which rows a subsample at ``level`` keeps (probability 2^−level each)."""
    if level <= 0:
        return np.ones(len(intended_ns), dtype=bool)
    return (keys(intended_ns, source) >> np.uint64(64 - level)) == 0


class Subsample:
    """The rows kept so far, at most ``limit``: ``add`` each batch as it comes, ``rows()`` sorted
    by intended time; ``select`` applies the current level to rows not kept here (a snapshot's
    outstanding requests). ``source_base`` is added to each row's ``thread`` for its key: an
    agent's index × ``AGENT_THREADS``, so that an agent keys its rows as its coordinator will."""

    def __init__(self, dtype: np.dtype, limit: int = LIMIT, source_base: int = 0):
        self.limit = limit
        self.level = 0
        self.seen = 0
        self._dtype = dtype
        self._base = np.uint64(source_base)
        self._parts: list[np.ndarray] = []
        self._count = 0

    @property
    def one_in(self) -> int:
        return 1 << self.level

    def __len__(self) -> int:
        return self._count

    def select(self, rows: np.ndarray) -> np.ndarray:
        if self.level == 0:
            return rows
        source = source_of(rows)
        if self._base:
            source = (source if source is not None else np.zeros(len(rows), np.uint64)) + self._base
        return rows[kept(rows["intended_ns"], self.level, source)]

    def add(self, rows: np.ndarray) -> None:
        self.seen += len(rows)
        rows = self.select(rows)
        if len(rows):
            self._parts.append(rows)
            self._count += len(rows)
        while self._count > self.limit:
            self._raise(self.level + 1)

    def raise_to(self, level: int) -> None:
        """At least ``level`` from now on (rows kept so far filtered again): before adding a batch
        an agent thinned to ``level`` (the levels nest, so the pool stays one level's rows)."""
        if level > self.level:
            self._raise(level)

    def _raise(self, level: int) -> None:
        # Part by part: a merged copy of every row would double the memory at the moment it peaks.
        self.level = level
        self._parts = [p for p in (self.select(p) for p in self._parts) if len(p)]
        self._count = sum(len(p) for p in self._parts)

    def drain(self) -> np.ndarray:
        """Every row kept, in no particular order (no sort: an agent hands them on), and the
        subsample empty again at level 0."""
        parts, self._parts, self._count, self.level = self._parts, [], 0, 0
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=self._dtype)

    def rows(self) -> np.ndarray:
        """Every row kept, sorted by intended time (merged on demand)."""
        if len(self._parts) != 1:
            merged = np.concatenate(self._parts) if self._parts else np.zeros(0, dtype=self._dtype)
            merged.sort(order="intended_ns", kind="stable")
            self._parts = [merged]
        return self._parts[0]

    def report(self) -> dict:
        """What ``methodology.subsample`` says (results/documents/methodology.py)."""
        return {"one_in": self.one_in, "limit": self.limit, "collected": self.seen, "kept": self._count}
