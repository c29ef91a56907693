"""Several agents as one: the coordinator's side of a run on many client machines.

``AgentGroup`` has the ``Agent`` interface and ``GroupSession`` the ``Session`` one
(driver/local.py), so that the controller and the methodology run unchanged on one machine or
many (Lancet, ATC'19, §4: a coordinator drives throughput, latency and symmetric agents).

* The rate (and the connections) are split over the agents that load, in proportion to their
  engine threads; each agent gets its own seed. With a probe agent, the others only load
  (``timed`` false: counted, not timed) and the probe agent alone measures, Poisson, one request
  outstanding per connection (engine/config.rs, ``Probe``).
* Start: the coordinator estimates each agent's clock offset (agents/client.py) and gives each the
  same future instant on its own clock; what each really started at, converted back, gives the
  barrier's spread, reported with the offsets.
* Snapshots and the end (agents/merge.py): counters are added, histograms merged bucket by bucket
  (never percentiles averaged), the sampled records pooled into one bounded subsample
  (stats/subsample.py, as one agent's are; every row goes to the journal's files, which the samples
  file is written from). An agent's sample times count from its own time zero; the barrier makes
  those zeros one instant to within the spread. An agent that held its rows past its ceiling while
  the coordinator did not collect them (agents/held.py, ``Held``) sends them thinned to a level,
  keyed as here (it is told its index): the subsample is raised to that level before they are added,
  so that it stays one level's rows of every agent, and the summary names the agent
  (``methodology.subsample.agents_thinned``). What each agent did stays known: its counters, its
  interval histograms (``MergedIntervals.member``) and which pooled rows are its own (``owner``,
  beside the engine's 64-byte rows), so that the agents check (methodology/analysis.py) judges each
  one's rate and arrivals and names an overloaded machine.
* An agent that fails (dies, hangs past its deadline, cannot be reached) ends the run: the others
  are stopped, what was collected is kept, and the result's error names the agent. A heartbeat
  keeps every agent's lease while the coordinator analyses; an agent that loses it stops on its own.
"""

from __future__ import annotations

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np

from tailwise import _core, signals
from tailwise.driver.local import StallSource, Taken, run_to_end
from tailwise.results.measured import AgentResult, AgentShare
from tailwise.results.rows import decode_samples
from tailwise.agents.client import ClockOffset, RemoteAgent
from tailwise.agents.merge import (OWNED_DTYPE, OWNER_DTYPE, MergedIntervals, _add, _add_reasons, _concat, _counters,
                                   _merge_hist, _numbered, _owned, _packet_hist, _packet_intervals, _unowned, merged_tls)
from tailwise.agents.wire import ClientTls
from tailwise.errors import TailwiseError
from tailwise.spec.load import LoadSpec, Probe
from tailwise.stats.subsample import Subsample

#: How far ahead the common start is put: every agent must have connected before it.
START_AHEAD_NS = 500_000_000
#: The heartbeat's period: well inside the agents' lease (5 s by default).
HEARTBEAT_S = 1.0


@dataclass
class Member:
    """One agent of the run, as the coordinator sees it."""

    agent: RemoteAgent
    role: str
    spec: LoadSpec | None = None
    offset: ClockOffset | None = None
    #: The schedule's time zero on the agent's clock, and on the coordinator's.
    start_mono_ns: int = 0
    start_local_ns: int = 0
    counters: dict = field(default_factory=dict)
    error: str | None = None

    def share(self) -> AgentShare:
        """This agent as the analysis and the summary read it (driver/local.py, ``AgentShare``)."""
        spec = self.spec
        return AgentShare(
            address=self.agent.address, role=self.role, rate_rps=spec.offered_rps if spec else 0.0,
            threads=spec.threads if spec else 0, conns=spec.conns if spec else 0, timed=bool(spec and spec.timed),
            arrival=spec.timed_arrival if spec else "exp",
            clock_offset_ns=self.offset.offset_ns if self.offset else None,
            clock_rtt_ns=self.offset.rtt_ns if self.offset else None, counters=dict(self.counters), error=self.error)


def shares(spec: LoadSpec, threads: list[int]) -> list[LoadSpec]:
    """``spec`` split over agents with these engine threads: rate, connections and the probe's
    rate in proportion to threads (connections at least one per thread), a seed each."""
    total = sum(threads)
    out = []
    for i, t in enumerate(threads):
        share = t / total
        probe = spec.probe and Probe(max(1, round(spec.probe.conns * share)), spec.probe.rate_rps * share)
        out.append(replace(spec, rate_rps=spec.rate_rps * share, threads=t, conns=max(t, round(spec.conns * share)),
                           seed=spec.seed + i, probe=probe))
    return out


def probe_spec(spec: LoadSpec) -> LoadSpec:
    """What a probe agent runs: the probe's connections, one request outstanding each, Poisson at
    the probe's rate, every request kept, spinning (``LoadSpec.probe_only``; engine/control.rs,
    ``probe_config``)."""
    return spec.probe_only()


class Journal(Protocol):
    """Where a run on agents writes what it collects as it arrives (results/journal.py): so that a
    coordinator that dies keeps what it had."""

    #: Why it was given up during the run (the disk full); None: it was not.
    error: str | None

    def begin(self, run_id: str, agents: list[tuple[str, str]], wall_start_s: float) -> None: ...
    def samples(self, member: int, rows: np.ndarray) -> None: ...
    def intervals(self, member: int, done: dict[int, _core.Histogram]) -> None: ...
    def counters(self, address: str, counters: dict | None = None, error: str | None = None) -> None: ...
    def close(self) -> None: ...
    def sample_files(self) -> list[Path] | None: ...


class AgentGroup:
    """Agents at ``addresses`` (symmetric, or load agents beside one probe agent)."""

    #: A fixed-length run's polling period: each poll is a call to every agent.
    poll_s = 0.25

    def __init__(self, addresses: list[str], token: str, probe: str | None = None, tls: ClientTls | None = None):
        role = "load" if probe else "symmetric"
        self.members = [Member(RemoteAgent(a, token, tls), role) for a in addresses]
        if probe:
            self.members.append(Member(RemoteAgent(probe, token, tls), "probe"))

    def start(self, spec: LoadSpec, stall_sources: tuple[StallSource, ...] = (),
              journal: Journal | None = None) -> GroupSession:
        """Configure and start the agents; a stop signal from now on stops them (signals.py), and
        the run ends interrupted, its results written. What is collected goes to ``journal`` too,
        as it arrives."""
        session = GroupSession(self.members, spec, journal)
        signals.attach(session.interrupt)
        return session

    def run(self, spec: LoadSpec, progress: Callable[[dict], None] | None = None,
            stall_sources: tuple[StallSource, ...] = (), on_start: Callable[[GroupSession], None] | None = None,
            journal: Journal | None = None) -> AgentResult:
        """A fixed-length run: start, poll (collecting snapshots, so the agents hold little), finish."""
        return run_to_end(self.start(spec, journal=journal), self.poll_s, progress, on_start)


class GroupSession:
    """A run on several agents, behind the ``Session`` interface."""

    def __init__(self, members: list[Member], spec: LoadSpec, journal: Journal | None = None):
        self.members, self.spec, self.run_id = members, spec, uuid.uuid4().hex[:12]
        self.journal = journal
        self.intervals = MergedIntervals()
        self.engine_stalls: list[tuple[int, int]] = []
        self.target_stalls: list[tuple[int, int]] = []
        #: Sampled rows as collected, each with its agent's index (``owner``): a bounded subsample.
        self._kept = Subsample(OWNED_DTYPE)
        #: The subsample's rows last split into engine rows and owners (``_pooled``).
        self._split: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        #: The highest level each agent thinned its rows to (agents/held.py, ``Held``), by index.
        self.thinned: dict[int, int] = {}
        self._failed: str | None = None
        #: The coordinator stopped the agents (its rounds concluded, another agent failed, a
        #: signal): their "interrupted" is then the coordinator's to say, not theirs.
        self._stopped = False
        #: The survivors' results, collected as soon as an agent failed the run (``_fail``).
        self._early: list[tuple[Member, dict, dict]] | None = None
        self._finish_lock = threading.Lock()
        self._interrupted = False
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=2 * len(members) + 2)  # the run's calls and the heartbeat's at once
        self.wall_start_s = time.time()
        self._configure()
        self._start()
        self._beat = threading.Event()
        threading.Thread(target=self._heartbeat, name="tw-heartbeat", daemon=True).start()

    # -- starting ------------------------------------------------------------------------------

    def _configure(self) -> None:
        health = self._each(lambda m: m.agent.health())
        loaders = [m for m in self.members if m.role != "probe"]
        threads = [max(1, min(self.spec.threads, len(h.cpus) or self.spec.threads))
                   for m, h in zip(self.members, health) if m.role != "probe"]
        for m, s in zip(loaders, shares(self.spec if not self._has_probe_agent() else replace(self.spec, probe=None),
                                        threads)):
            m.spec = replace(s, timed=m.role != "load")
        for m in self.members:
            if m.role == "probe":
                m.spec = probe_spec(self.spec)
        # A probe agent is given the run's probe and runs it alone (agents/limits.py, ``_for_role``).
        # Its index is the one its rows are numbered with (``_numbered``): it keys them as here.
        self._each(lambda m: m.agent.configure(self.run_id, m.role,
                                               (self.spec if m.role == "probe" else m.spec).engine_config(),
                                               self.members.index(m)))

    def _has_probe_agent(self) -> bool:
        return any(m.role == "probe" for m in self.members)

    def _start(self) -> None:
        offsets = self._each(lambda m: m.agent.clock_offset())
        at = _core.now_ns() + START_AHEAD_NS + 2 * max(o.rtt_ns for o in offsets)
        for m, o in zip(self.members, offsets):
            m.offset = o
        try:
            starts = self._each(lambda m: m.agent.start(self.run_id, at + m.offset.offset_ns))
        except TailwiseError:
            # Those that did start must not load alone (their lease would stop them, later).
            self._stop_quietly([m for m in self.members if m.error is None])
            raise
        for m, s in zip(self.members, starts):
            m.start_mono_ns, m.start_local_ns = s, s - m.offset.offset_ns
        self._start_mono_ns = min(m.start_local_ns for m in self.members)
        self.start_at_ns = at
        if self.journal is not None:
            self.journal.begin(self.run_id, [(m.agent.address, m.role) for m in self.members], self.wall_start_s)

    def barrier(self) -> dict[str, Any]:
        """How together the agents started: the spread of their time zeros on the coordinator's
        clock, and how well the clocks are known (half the largest round trip)."""
        local = [m.start_local_ns for m in self.members]
        return {"asked_ns": self.start_at_ns, "spread_ns": max(local) - min(local),
                "clock_uncertainty_ns": max(m.offset.rtt_ns for m in self.members) // 2,
                "late_ns": max(local) - self.start_at_ns}

    # -- while it runs --------------------------------------------------------------------------

    def _each(self, call: Callable[[Member], Any], members: list[Member] | None = None) -> list[Any]:
        """``call`` on every member at once; the first agent that fails fails the run (raised)."""
        targets = members if members is not None else self.members
        futures = [self._pool.submit(call, m) for m in targets]
        out, first = [], None
        for m, f in zip(targets, futures):
            try:
                out.append(f.result())
            except TailwiseError as e:
                m.error = e.line()
                first = first or e
                out.append(None)
        if first is not None:
            raise first
        return out

    def _guard(self, call: Callable[[Member], Any]) -> list[Any] | None:
        """``_each`` during the run: a failure ends the run (the others stopped), not the coordinator."""
        if self._failed:
            return None
        try:
            return self._each(call)
        except TailwiseError as e:
            self._fail(e)
            return None

    def _fail(self, e: TailwiseError) -> None:
        with self._lock:
            if self._failed:
                return
            self._failed = e.line()
        if self.journal is not None:
            for m in self.members:
                if m.error is not None:
                    self.journal.counters(m.agent.address, error=m.error)
        self._stopped = True
        alive = [m for m in self.members if m.error is None]
        self._stop_quietly(alive)
        # Collected now, not when the coordinator gets to its end: a call still waiting on the
        # failed agent may outlast the others' lease, after which they drop the run.
        with self._finish_lock:
            if self._early is None:
                self._early = self._results([m for m in alive if m.error is None])

    def _stop_quietly(self, members: list[Member]) -> None:
        """Stop these agents' load; one that cannot be told is named in its member (its lease stops it)."""
        try:
            self._each(lambda m: m.agent.progress(self.run_id, "Stop"), members)
        except TailwiseError:
            pass

    def _heartbeat(self) -> None:
        while not self._beat.wait(HEARTBEAT_S):
            if self._guard(lambda m: m.agent.progress(self.run_id)) is None:
                return

    def _progress(self) -> list[dict] | None:
        got = self._guard(lambda m: m.agent.progress(self.run_id))
        if got is not None:
            for m, p in zip(self.members, got):
                m.counters = p["counters"]
        return got

    def snapshot(self) -> dict:
        got = self._progress() or []
        return _add([p["counters"] for p in got])

    def pause(self) -> None:
        self._guard(lambda m: m.agent.progress(self.run_id, "Pause"))

    def resume(self) -> None:
        self._guard(lambda m: m.agent.progress(self.run_id, "Resume"))

    def stop(self) -> None:
        self._stopped = True
        self._guard(lambda m: m.agent.progress(self.run_id, "Stop"))

    def interrupt(self) -> None:
        """A stop signal: stop the agents (from a thread: the signal handler must not wait on the
        network); the run ends interrupted."""
        self._interrupted = True
        threading.Thread(target=self.stop, name="tw-interrupt", daemon=True).start()

    def in_flight(self) -> int:
        return sum(p["in_flight"] for p in self._progress() or [])

    def is_finished(self) -> bool:
        got = self._progress()
        return got is None or all(p["finished"] for p in got)

    def elapsed_ns(self) -> int:
        return _core.now_ns() - self._start_mono_ns

    def _collect(self, member: int, meta: dict, parts: dict[str, bytes]) -> None:
        """One agent's snapshot or end: its new rows, finished intervals and counters kept (and
        written to the journal)."""
        rows = _numbered(decode_samples(parts.get("samples", b"")), member)
        if level := int(meta.get("thinned_level") or 0):
            # The agent kept the rows whose keys have ``level`` leading zero bits: so does the pool
            # from now on (the levels nest: every agent's rows, one rule).
            self.thinned[member] = max(self.thinned.get(member, 0), level)
            self._kept.raise_to(level)
        if len(rows):
            self._kept.add(_owned(rows, member))
        new_intervals = self.intervals.update(member, meta, parts)
        self.members[member].counters = meta["counters"]
        if self.journal is not None:
            self.journal.samples(member, rows)
            self.journal.intervals(member, new_intervals)
            self.journal.counters(self.members[member].agent.address, meta["counters"])

    def finished(self) -> np.ndarray:
        """Every sampled row collected so far, of every agent — of the bounded subsample — sorted
        by intended time."""
        return self._pooled()[0]

    def finished_owner(self) -> np.ndarray:
        """Which agent each row of ``finished()`` is (its index in ``members``)."""
        return self._pooled()[1]

    def _pooled(self) -> tuple[np.ndarray, np.ndarray]:
        kept = self._kept.rows()
        if self._split is None or self._split[0] is not kept:
            self._split = (kept, *_unowned(kept))
        return self._split[1], self._split[2]

    def take(self, merge: bool = True) -> Taken | None:
        got = self._guard(lambda m: m.agent.snapshot(self.run_id)) or []
        for i, (meta, parts) in enumerate(got):
            self._collect(i, meta, parts)
            self.engine_stalls.extend(tuple(s) for s in meta.get("engine_stalls", []))
        # The outstanding rows at the level every agent's finished rows are at now (one may have
        # raised it after another's were collected).
        pending, pending_owner = [], []
        for i, (meta, parts) in enumerate(got):
            rows, owner = _unowned(self._kept.select(_owned(_numbered(decode_samples(parts.get("pending", b"")), i), i)))
            pending.append(rows)
            pending_owner.append(owner)
        if not merge:
            return None
        metas = [meta for meta, _ in got]
        finished, owner = self._pooled()
        return Taken(finished, _concat(pending), min((m["snap_ns"] for m in metas), default=0),
                     bool(metas) and all(m["complete"] for m in metas) and not self._failed,
                     _add([m["counters"] for m in metas]), finished_owner=owner,
                     pending_owner=np.concatenate(pending_owner) if pending_owner else np.zeros(0, OWNER_DTYPE),
                     agents=tuple(m.share() for m in self.members), one_in=self._kept.one_in)

    # -- the end --------------------------------------------------------------------------------

    def finish(self, interrupted: bool = False) -> AgentResult:
        """Wait for every agent's end and merge; an agent that failed is named in ``error``."""
        self._beat.set()
        signals.detach()
        with self._finish_lock:
            if self._early is None:
                self._early = self._results([m for m in self.members if m.error is None])
            results = self._early
        self._pool.shutdown(wait=False)
        return self._merge(results, interrupted)

    def _results(self, members: list[Member]) -> list[tuple[Member, dict, dict]]:
        """Each agent's whole result (Finish), waiting for its end; one that fails is named."""
        wait_s = (self.spec.duration_ns + self.spec.timeout_ns) / 1e9 + 30.0
        results: list[tuple[Member, dict, dict]] = []
        for m, f in [(m, self._pool.submit(m.agent.finish, self.run_id, wait_s)) for m in members]:
            try:
                meta, parts = f.result()
                results.append((m, meta, parts))
                m.counters = meta["counters"]
            except TailwiseError as e:
                m.error = e.line()
                self._failed = self._failed or e.line()
        return results

    def _merge(self, results: list[tuple[Member, dict, dict]], interrupted: bool) -> AgentResult:
        for m, meta, parts in results:
            # Nothing is outstanding at the end: every request is in a finished interval.
            self._collect(self.members.index(m), {**meta, "pending": []}, parts)
        if self.journal is not None:
            self.journal.close()
        metas = [meta for _, meta, _ in results]
        errors = [f"agent {m.agent.address}: {meta['error']}" for m, meta, _ in results if meta.get("error")]
        samples, owner = self._pooled()
        return AgentResult(
            counters=_counters([m.counters for m in self.members]),
            elapsed_ns=max((meta["elapsed_ns"] for meta in metas), default=0),
            received_in_window=sum(meta["received_in_window"] for meta in metas),
            latency_hist=_merge_hist([p.get("latency_hist") for _, _, p in results]),
            send_lag_hist=_merge_hist([p.get("send_lag_hist") for _, _, p in results]),
            send_lag_unstalled_hist=_merge_hist([p.get("send_lag_unstalled_hist") for _, _, p in results]),
            stalls=sum(meta["stalls"] for meta in metas), stalled_ns=sum(meta["stalled_ns"] for meta in metas),
            samples=samples,
            error=self._failed or (errors[0] if errors else None),
            error_reasons=_add_reasons([meta["error_reasons"] for meta in metas]),
            pinned_cpus=[c for meta in metas for c in meta["pinned_cpus"]],
            cpu_ns=sum(meta["cpu_ns"] for meta in metas), preemptions=sum(meta["preemptions"] for meta in metas),
            sleeps=sum(meta.get("sleeps", 0) for meta in metas),
            # An agent stopped early by anything but this coordinator (its own signal, its lease).
            interrupted=interrupted or self._interrupted
            or (not self._stopped and any(meta.get("interrupted") for meta in metas)),
            wall_start_s=self.wall_start_s,
            engine_stalls_ns=sorted({tuple(s) for meta in metas for s in meta.get("engine_stalls_ns", [])}
                                    | set(self.engine_stalls)),
            intervals=self.intervals, agents=[m.share() for m in self.members], barrier=self.barrier(), owner=owner,
            packet_intervals=_packet_intervals([meta.get("packet_intervals") or [] for meta in metas]),
            packet_hist=_packet_hist([(meta.get("packet_hist"), p.get("packet_hist")) for _, meta, p in results]),
            tls=merged_tls([meta.get("tls") for meta in metas]),
            subsample=self._kept.report() | self._thinned_report(),
            # Every row, as it came: the journal's files (None without --out, or given up).
            samples_file=self.journal.sample_files() if self.journal is not None else None,
            journal_error=self.journal.error if self.journal is not None else None,
        )

    def _thinned_report(self) -> dict:
        """``methodology.subsample.agents_thinned``: the agents that thinned their rows, each to
        its highest 1 in 2^level (absent when none did)."""
        if not self.thinned:
            return {}
        return {"agents_thinned": [{"address": self.members[i].agent.address, "one_in": 1 << level}
                                   for i, level in sorted(self.thinned.items())]}
