"""The engine's driver: start the in-process Rust engine, poll it, take snapshots, pause, stop, finish.

The controller talks to the ``Agent`` interface only: ``LocalAgent`` here drives the engine in this
process; a group of agents on other hosts (agents/group.py) stands behind the same interface.
What a run hands back is plain data of results/ (``AgentResult``, rows of ``SAMPLE_DTYPE``).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Callable, Protocol

import numpy as np

from tailwise import _core, signals
from tailwise.errors import TailwiseError
from tailwise.host.facts import steal_ticks
from tailwise.results.measured import AgentResult, AgentShare
from tailwise.results.rows import SAMPLE_DTYPE, decode_samples
from tailwise.spec.load import LoadSpec
from tailwise.stats.subsample import Subsample


@dataclass
class Taken:
    """A snapshot of a running session: ``finished`` holds every sampled request finished so far
    (sorted by intended time), ``pending`` those outstanding at ``snap_ns``, censored."""

    finished: np.ndarray
    pending: np.ndarray
    snap_ns: int
    complete: bool
    counters: dict
    #: A run on several agents: which agent each row of ``finished`` and ``pending`` is (its index
    #: in ``agents``), and each agent's share and counters at this snapshot.
    finished_owner: np.ndarray | None = None
    pending_owner: np.ndarray | None = None
    agents: tuple[AgentShare, ...] = ()
    #: The subsample's level then: ``finished`` and ``pending`` hold 1 in ``one_in`` of the rows.
    one_in: int = 1
    _pooled: tuple[np.ndarray, np.ndarray | None] | None = field(default=None, repr=False, compare=False)

    def samples(self) -> np.ndarray:
        """Finished and pending together, sorted by intended time: what a round analyses."""
        return self._pool()[0]

    def owners(self) -> np.ndarray | None:
        """Which agent each row of ``samples()`` is (None: one agent)."""
        return self._pool()[1]

    def _pool(self) -> tuple[np.ndarray, np.ndarray | None]:
        if self._pooled is None:
            s = np.concatenate([self.finished, self.pending])
            if self.finished_owner is None or self.pending_owner is None:
                s.sort(order="intended_ns", kind="stable")
                self._pooled = (s, None)
            else:
                order = np.argsort(s["intended_ns"], kind="stable")
                self._pooled = (s[order], np.concatenate([self.finished_owner, self.pending_owner])[order])
        return self._pooled


#: Something else in this process that logs its stalls: returns (start, end) pairs of
#: CLOCK_MONOTONIC ns since its last call (the built-in server's ``take_stalls``).
StallSource = Callable[[], list[tuple[int, int]]]


class Session:
    """A running measurement on one agent: poll it, take snapshots while it runs, stop it."""

    def __init__(self, engine, spec: LoadSpec, stall_sources: tuple[StallSource, ...] = (),
                 samples_file: Path | None = None):
        self._engine = engine
        self.spec = spec
        #: The rows the statistics see: at most ``subsample.LIMIT`` (stats/subsample.py).
        self._kept = Subsample(SAMPLE_DTYPE)
        #: Every row, appended as it comes (``AgentResult.samples_file``).
        self.samples_file = samples_file
        self._spool: IO[bytes] | None = None
        #: Why the samples file was given up during the run (``_drop_spool``); None: it was not.
        self.spool_error: str | None = None
        if samples_file is not None:
            Path(samples_file).parent.mkdir(parents=True, exist_ok=True)
            self._spool = open(samples_file, "wb")
        self._start_mono_ns = engine.start_mono_ns
        #: Whether a stop signal stops this session (``LocalAgent.start``'s ``on_signal``).
        self.on_signal = False
        self._target_sources: tuple[StallSource, ...] = stall_sources
        self.engine_stalls: list[tuple[int, int]] = []
        self.target_stalls: list[tuple[int, int]] = []
        self._steal0 = steal_ticks()
        self.wall_start_s = time.time()
        self.intervals = engine.intervals()
        #: The level the engine thinned the rows ``finish`` returns to (0 but after ``thin_rows``).
        self.thinned_level = 0

    def _relative(self, pairs) -> list[tuple[int, int]]:
        t0 = self._start_mono_ns
        return [(a - t0, b - t0) for a, b in pairs if b > t0]  # before the schedule: nothing to say

    def take_stalls(self, engine_rest=()) -> None:
        """Collect the stalls logged since the last call (engine's and in-process target's)."""
        self.engine_stalls.extend(self._relative([*self._engine.take_stalls(), *engine_rest]))
        for src in self._target_sources:
            self.target_stalls.extend(self._relative(src()))

    def snapshot(self) -> dict:
        return self._engine.snapshot()

    def pause(self) -> None:
        """Hold the schedule (no request falls due) while replies are still read."""
        self._engine.pause()

    def resume(self) -> None:
        self._engine.resume()

    def in_flight(self) -> int:
        return self._engine.in_flight()

    @property
    def start_mono_ns(self) -> int:
        """The schedule's time zero on this host's CLOCK_MONOTONIC (sample times are ns after it)."""
        return self._start_mono_ns

    def elapsed_ns(self) -> int:
        """Now, on the engine's clock: ns since the schedule's start."""
        return _core.now_ns() - self._start_mono_ns

    def finished(self) -> np.ndarray:
        """Every sampled request finished so far — of the bounded subsample (stats/subsample.py)
        — sorted by intended time (merged on demand)."""
        return self._kept.rows()

    def _collect(self, raw: bytes) -> None:
        """A batch of finished rows: to the samples file whole, to the subsample."""
        if self._spool is not None and raw:
            try:
                self._spool.write(raw)
                self._spool.flush()
            except OSError as e:
                self._drop_spool(e)
        batch = decode_samples(raw)
        if len(batch):
            self._kept.add(batch.copy())

    def _drop_spool(self, e: OSError) -> None:
        """The disk would not take more rows (full, gone): the run goes on without the samples
        file, whose rows are given up to leave the space to the summary; the statistics keep
        theirs. The results directory then holds the subsample's rows (``spool_error`` says so)."""
        self.spool_error = f"{self.samples_file}: {(e.strerror or str(e)).lower()}"
        with contextlib.suppress(OSError):
            self._spool.close()
        with contextlib.suppress(OSError):
            Path(self.samples_file).unlink()
        self._spool, self.samples_file = None, None

    def take(self, merge: bool = True) -> Taken | None:
        """A snapshot: every thread hands over what it finished and reports what is outstanding.
        With ``merge`` false (a fixed-length run polling), only collect: returns None."""
        raw = self._engine.take()
        self._collect(raw["samples"])
        self.take_stalls()
        if not merge:
            return None
        pending = self._kept.select(decode_samples(raw["pending"])).copy()
        return Taken(self.finished(), pending, raw["snap_ns"], raw["complete"], dict(raw["counters"]),
                     one_in=self._kept.one_in)

    def unbounded(self) -> None:
        """An agent's session: its rows are bounded by the agent (``agents/held.Held``) and its
        coordinator, which thin them by keys of their own; what ``finish`` returns is every row
        not yet taken, none left out here."""
        self._kept.limit = sys.maxsize

    def take_batch(self, pending: bool = True) -> dict:
        """A snapshot as the engine hands it over (``Engine.take``: raw rows of the samples finished
        since the last take and of those outstanding now, snap_ns, complete, counters), kept
        nowhere here: an agent sends it to its coordinator, which keeps the samples. The stalls
        logged meanwhile are collected (``engine_stalls``). With ``pending`` false nothing
        outstanding is reported (no pending rows, no pending interval histograms): for a taker
        that keeps only the finished rows, the agent's keeper."""
        raw = self._engine.take(pending=pending)
        self.take_stalls()
        # Its coordinator keeps (and bounds) the rows: what ``finish`` returns is the rest, all of it.
        self.unbounded()
        return raw

    def thin_rows(self, max_rows: int, source_base: int) -> None:
        """An agent's session: an engine thread that gathers more than ``max_rows`` rows between two
        takes thins them by the subsample's own keys (``Engine.thin_rows``); each take says the
        level (``thinned_level``), and so does ``thinned_level`` here after ``finish``."""
        self._engine.thin_rows(max_rows, source_base)

    def is_finished(self) -> bool:
        return self._engine.is_finished()

    def stop(self) -> None:
        self._engine.stop()

    def finish(self, interrupted: bool = False) -> AgentResult:
        """Wait for the end; the result holds every sample of the run, sorted by intended time."""
        raw = self._engine.join()
        self.thinned_level = raw.get("thinned_level", 0)
        if self.on_signal:
            signals.detach()
        self.take_stalls(engine_rest=raw["stall_intervals"])
        steal1 = steal_ticks()
        self._collect(raw["samples"])
        if self._spool is not None:
            try:
                self._spool.close()
                self._spool = None
            except OSError as e:
                self._drop_spool(e)
        samples = self.finished()
        return AgentResult(
            counters=dict(raw["counters"]),
            elapsed_ns=raw["elapsed_ns"],
            received_in_window=raw["received_in_window"],
            latency_hist=raw["latency_hist"],
            send_lag_hist=raw["send_lag_hist"],
            send_lag_unstalled_hist=raw["send_lag_unstalled_hist"],
            stalls=raw["stalls"],
            stalled_ns=raw["stalled_ns"],
            samples=samples,
            error=_engine_error(raw),
            error_reasons=[tuple(r) for r in raw["error_reasons"]],
            pinned_cpus=list(raw["pinned_cpus"]),
            cpu_ns=raw["cpu_ns"],
            preemptions=raw["preemptions"],
            sleeps=raw["sleeps"],
            probe_counters=None if raw["probe_counters"] is None else dict(raw["probe_counters"]),
            steal_s=None if self._steal0 is None or steal1 is None else (steal1 - self._steal0) / os.sysconf("SC_CLK_TCK"),
            interrupted=interrupted,
            wall_start_s=self.wall_start_s,
            engine_stalls_ns=sorted(self.engine_stalls),
            target_stalls_ns=sorted(self.target_stalls),
            intervals=self.intervals,
            packet_intervals=[tuple(r) for r in self._engine.packet_intervals()],
            packet_hist=raw.get("packet_hist"),
            tls=raw.get("tls"),
            subsample=self._kept.report(),
            samples_file=self.samples_file,
            samples_file_error=self.spool_error,
        )


class Agent(Protocol):
    def start(self, spec: LoadSpec, stall_sources: tuple[StallSource, ...] = ()) -> Session: ...

    def run(self, spec: LoadSpec, progress: Callable[[dict], None] | None = None,
            stall_sources: tuple[StallSource, ...] = (), on_start: Callable[[Session], None] | None = None) -> AgentResult: ...


class LocalAgent:
    """Runs the engine in this process; Python only starts it, polls counters and collects."""

    poll_s = 0.1

    def start(self, spec: LoadSpec, stall_sources: tuple[StallSource, ...] = (), on_signal: bool = True,
              samples_file: Path | None = None) -> Session:
        """Start the engine. ``on_signal``: a stop signal stops it (signals.py, the commands that
        measure); an agent service (agents/server.py) handles its own signals and passes False.
        ``samples_file``: where every row kept is appended as it comes (None: nowhere)."""
        # The engine raises tailwise.errors' classes itself, each with its problem and remedy.
        engine = _core.Engine(spec.to_json())
        session = Session(engine, spec, stall_sources, samples_file)
        if on_signal:
            session.on_signal = True
            signals.attach(session.stop)  # a stop signal from now on stops sending; the run is still written
        return session

    def run(self, spec: LoadSpec, progress: Callable[[dict], None] | None = None,
            stall_sources: tuple[StallSource, ...] = (), on_start: Callable[[Session], None] | None = None,
            samples_file: Path | None = None) -> AgentResult:
        """A fixed-length run: start, poll (taking a snapshot each time), finish."""
        return run_to_end(self.start(spec, stall_sources, samples_file=samples_file), self.poll_s, progress, on_start)


def run_to_end(session, poll_s: float, progress: Callable[[dict], None] | None = None,
               on_start: Callable[[object], None] | None = None) -> AgentResult:
    """A fixed-length run on a started session (this module's ``Session`` or a group's): poll it,
    collecting a snapshot each time so that little waits in the engines, until it ends; finish."""
    if on_start is not None:
        on_start(session)
    interrupted = False
    try:
        while not session.is_finished():
            time.sleep(poll_s)
            session.take(merge=False)
            if progress is not None:
                progress(session.snapshot())
    except KeyboardInterrupt:
        interrupted = True
        session.stop()
    # A stop signal stopped the engines (signals.py): the run ends interrupted, nothing lost.
    return session.finish(interrupted or signals.received() is not None)


def _engine_error(raw: dict) -> str | None:
    """Why the engine ended the run early, in one line: its problem, then its remedy (if any)."""
    if raw["error"] is None:
        return None
    return TailwiseError(raw["error"], raw["error_remedy"] or "").line()
