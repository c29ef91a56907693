"""The agent service (agents/proto/agent.proto): ``AgentServer`` runs a coordinator's load with one
``LocalAgent`` session at a time, closed to strangers.

* Every call carries the shared token (agents/serving.py, ``TokenCheck``); refusals are said at
  most once a second per address, naming it.
* The lease is renewed only by a call that succeeds and carries the run's ``lease_key`` (drawn
  by Configure, never shown by Health): no other token holder keeps an orphaned load going.
* Calls a peer address may have in progress at once are bounded (``MAX_CALLS_PER_PEER``), and
  the server's streams per connection, keep-alive, idle and age limits are set (agents/serving.py,
  ``serve``).
* A configuration is checked against the agent's ``Limits`` (agents/limits.py) before anything
  connects; each refusal goes back as INVALID_ARGUMENT with its kind and remedy (``wire.abort``).
* The lease: a watchdog stops a running load whose coordinator made no call for ``lease_ns``
  (no orphaned load generator), and drops a run nobody collects within another lease, so that
  the agent is reusable.
* Snapshots leave nothing behind in the agent: the sampled rows and the interval histograms
  changed since the last one go to the coordinator, which keeps them.
* The rows a silent coordinator leaves are bounded (issue 33, item 3): the watchdog takes them
  into ``Held`` (agents/held.py), thinned past the agent's ceiling, and the next Snapshot or
  Finish hands them over with their level.

The engine's calls all run under one lock: ``Engine.take`` holds the engine while it waits for its
threads, and an engine call from another thread meanwhile would wait for it holding the
interpreter. Nothing here prints: what happens is told to ``on_event`` (agents/events.py).
"""

from __future__ import annotations

import contextlib
import functools
import math
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from typing import Any

import grpc
import numpy as np

from tailwise import _core
from tailwise.agents import wire
from tailwise.agents.events import (Closing, Configured, Dropped, Event, Finished, LeaseExpired, Refused, Started,
                                   Stopped, Thinned)
from tailwise.agents.held import POLL_S, Held, rows_per_s
from tailwise.agents.limits import Limits, _for_role
from tailwise.driver.local import LocalAgent, Session
from tailwise.results.measured import AgentResult
from tailwise.results.rows import decode_samples
from tailwise.agents.proto import agent_pb2 as pb
from tailwise.agents.proto import agent_pb2_grpc
from tailwise.errors import HostError, InputError, TailwiseError
from tailwise.spec.load import LoadSpec, redacted
from tailwise.spec.units import fmt_ns
from tailwise.stats.subsample import AGENT_THREADS

#: Finish waits for the schedule, the drain (the run's timeout) and this much more; then it stops
#: the engine, and gives up after as long again.
FINISH_MARGIN_NS = 10_000_000_000
#: A start further ahead than this on the agent's clock is a coordinator's mistake (its clock
#: offset), not a barrier.
MAX_START_AHEAD_NS = 60_000_000_000
#: Calls one peer address may have in progress at once: a coordinator makes one or two (a
#: Finish that waits, a Progress); more is someone holding the pool's threads.
MAX_CALLS_PER_PEER = 8
#: A refused token is said at most once this often per address (the rest counted in the next line).
REFUSED_SAY_S = 1.0
MAX_PEERS_REMEMBERED = 1024
#: The result's fields that travel as parts of their own (bytes), not in the meta JSON.
BINARY_FIELDS = frozenset({"latency_hist", "send_lag_hist", "send_lag_unstalled_hist", "samples", "intervals",
                           "packet_hist"})


def _bytes_of(rows: np.ndarray) -> np.ndarray:
    """Rows as the bytes a part carries (a view, no copy: wire.chunks cuts it)."""
    return np.ascontiguousarray(rows).view(np.uint8)


@dataclass
class _Run:
    """The one run an agent holds: configured, then running (a session), then finished."""

    run_id: str
    role: str
    #: The canonical engine configuration (every default filled in).
    config: dict[str, Any]
    session: Session | None = None
    #: Stopped early (Stop, the lease, a signal): the result says interrupted.
    stopped: bool = False
    expired: bool = False
    #: When the engine was seen finished (time.monotonic()).
    finished_at: float | None = None
    #: Pauses (the coordinator's rounds) move the schedule's end: CLOCK_MONOTONIC ns.
    paused_at: int | None = None
    paused_ns: int = 0
    #: Each interval's finished count as last sent, and how many stalls were sent.
    done_sent: dict[int, int] = field(default_factory=dict)
    stalls_sent: int = 0
    #: The secret a call must carry to renew the lease (ConfigureReply.lease_key).
    lease_key: str = field(default_factory=lambda: secrets.token_hex(16))
    #: Its index among the run's agents (ConfigureRequest.agent_index): the rows' keys.
    agent_index: int = 0
    #: The rows taken from the engine for the coordinator meanwhile, from the start; None for a
    #: run that keeps none (a load agent).
    held: Held | None = None

    def keyed(self, request) -> bool:
        """Does ``request`` name this run with its lease key?"""
        return (getattr(request, "run_id", None) == self.run_id
                and secrets.compare_digest(getattr(request, "lease_key", ""), self.lease_key))

    def end_by_ns(self) -> int:
        """When the engine should have ended, on CLOCK_MONOTONIC: the schedule, its pauses, the
        drain (the timeout) and a margin."""
        assert self.session is not None
        paused = self.paused_ns + (_core.now_ns() - self.paused_at if self.paused_at is not None else 0)
        return (self.session.start_mono_ns + self.config["duration_ns"] + paused + self.config["timeout_ns"]
                + FINISH_MARGIN_NS)


def _answers(call: str):
    """A unary call: a TailwiseError goes back as its status (``wire.abort``), said once; one that
    succeeds with the run's lease key renews the lease."""
    def wrap(fn):
        @functools.wraps(fn)
        def handler(self: AgentServer, request, context: grpc.ServicerContext):
            with self._admitted(context):
                try:
                    reply = fn(self, request, context)
                except TailwiseError as e:
                    self._refuse(call, request, context, e)
                self._renew_for(request)
                return reply
        return handler
    return wrap


def _streams(call: str):
    """A streaming call: the method returns (meta, parts), sent in chunks after every lock is
    released; None: the caller went away, nothing to send."""
    def wrap(fn):
        @functools.wraps(fn)
        def handler(self: AgentServer, request, context: grpc.ServicerContext) -> Iterator[pb.Chunk]:
            with self._admitted(context):
                try:
                    answer = fn(self, request, context)
                except TailwiseError as e:
                    self._refuse(call, request, context, e)
                    return
                self._renew_for(request)
            if answer is not None:
                yield from wire.chunks(*answer)
        return handler
    return wrap


def peer_host(peer: str) -> str:
    """gRPC's peer name (``ipv4:10.0.0.7:51234``, ``ipv6:[::1]:51234``) without its port."""
    return peer.rsplit(":", 1)[0] if peer.startswith(("ipv4:", "ipv6:")) else peer


class AgentServer(agent_pb2_grpc.AgentServicer):
    """The agent service's calls (agent.proto says what each does) around one session at a time."""

    def __init__(self, limits: Limits = Limits(), cpus: list[int] | None = None,
                 on_event: Callable[[Event], None] | None = None):
        self.limits = limits
        self.cpus = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
        self._on_event = on_event
        self._lock = threading.Lock()
        self._run: _Run | None = None
        self._last_call = time.monotonic()
        # Calls in progress and refusals said, by peer address (under their own lock: Health and
        # a refusal never wait for the engine's).
        self._peers_lock = threading.Lock()
        self._calls: dict[str, int] = {}
        self._refusals: dict[str, tuple[float, int]] = {}
        self._closing = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, name="tailwise-agent-lease", daemon=True)
        self._watchdog.start()

    # ------------------------------------------------------------------ plumbing

    def renew(self) -> None:
        """The run's coordinator called: the lease starts again."""
        self._last_call = time.monotonic()

    def _refuse(self, call: str, request, context: grpc.ServicerContext, e: TailwiseError) -> None:
        """Say the refusal once, then end the call with it (``wire.abort`` raises)."""
        self._emit(Refused(call, getattr(request, "run_id", ""), e.line(), context.peer()))
        wire.abort(context, e)

    def _renew_for(self, request) -> None:
        """Renew the lease if ``request`` (which succeeded) carries the current run's lease key."""
        run = self._run
        if run is not None and run.keyed(request):
            self.renew()

    @contextlib.contextmanager
    def _admitted(self, context: grpc.ServicerContext):
        """Count the call against its peer's ``MAX_CALLS_PER_PEER``; over it, RESOURCE_EXHAUSTED."""
        peer = peer_host(context.peer())
        with self._peers_lock:
            held = self._calls.get(peer, 0)
            if held < MAX_CALLS_PER_PEER:
                self._calls[peer] = held + 1
        if held >= MAX_CALLS_PER_PEER:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"{held} calls from {peer} are in progress already, the most one address may have "
                          f"({MAX_CALLS_PER_PEER}); wait for them to end")
        try:
            yield
        finally:
            with self._peers_lock:
                self._calls[peer] -= 1
                if not self._calls[peer]:
                    del self._calls[peer]

    def refused_token(self, method: str, peer: str) -> None:
        """Say a refused token, at most once every ``REFUSED_SAY_S`` per address, with the count of
        those not said since."""
        host, now = peer_host(peer), time.monotonic()
        with self._peers_lock:
            said_at, unsaid = self._refusals.get(host, (-math.inf, 0))
            if now - said_at < REFUSED_SAY_S:
                self._refusals[host] = (said_at, unsaid + 1)
                return
            self._refusals[host] = (now, 0)
            if len(self._refusals) > MAX_PEERS_REMEMBERED:  # many addresses: forget the oldest
                del self._refusals[min(self._refusals, key=lambda h: self._refusals[h][0])]
        self._emit(Refused(method.rsplit("/", 1)[-1], "", "missing or wrong token", peer, unsaid))

    def _emit(self, event: Event) -> None:
        if self._on_event is not None:
            self._on_event(event)

    def _state(self) -> str:
        """idle, configured, running or finished (under the lock)."""
        run = self._run
        if run is None:
            return "idle"
        if run.session is None:
            return "configured"
        if run.session.is_finished():
            if run.finished_at is None:
                run.finished_at = time.monotonic()
            return "finished"
        return "running"

    def _current(self, run_id: str, *states: str) -> _Run:
        """The run ``run_id`` names, in one of ``states`` (under the lock); else InputError."""
        run = self._run
        if run is None or run.run_id != run_id:
            holds = "is idle" if run is None else f"holds run {run.run_id!r}"
            raise InputError(f"no run {run_id!r} on this agent (it {holds})",
                             "Configure the run first (an agent drops a run whose coordinator was silent for its lease)")
        state = self._state()
        if state not in states:
            raise InputError(f"run {run_id!r} is {state}, not {' or '.join(states)}",
                             "call Configure, Start, then Progress/Snapshot/Pause/Resume/Stop, then Finish")
        return run

    # ------------------------------------------------------------------ calls without a run

    def Health(self, request, context):
        with self._lock:
            state = self._state()
            run_id = self._run.run_id if self._run else ""
        return pb.HealthReply(version=_core.__version__, hostname=socket.gethostname(), cpus=self.cpus, state=state,
                              run_id=run_id, limits=self.limits.message())

    def Clock(self, request, context):
        return pb.ClockReply(mono_ns=_core.now_ns(), realtime_ns=time.time_ns())

    @_answers("Configure")
    def Configure(self, request, context):
        if not request.run_id:
            raise InputError("Configure names no run", "the coordinator gives every run an id")
        config = _for_role(json.loads(_core.check_engine_config(request.engine_config)), request.role)
        self.limits.check(config, len(self.cpus))
        canonical = _core.check_engine_config(json.dumps(config))
        config = json.loads(canonical)
        LoadSpec.from_engine_config(config)  # what Start will run
        if request.agent_index >= AGENT_THREADS:
            raise InputError(f"agent index {request.agent_index:,} is over the {AGENT_THREADS - 1:,} a run may number",
                             "the coordinator numbers its agents from 0")
        with self._lock:
            state = self._state()
            if state in ("running", "finished"):
                held = self._run.run_id if self._run else ""
                raise InputError(f"this agent is busy with run {held!r} ({state})",
                                 "one run at a time: Finish or Stop that run, wait for its lease to end, "
                                 "or use another agent")
            self._run = run = _Run(request.run_id, request.role, config, agent_index=request.agent_index)
            self.renew()
        probe = config.get("probe") or {}
        self._emit(Configured(request.run_id, request.role, config["rate_rps"], probe.get("rate_rps", 0.0),
                              tuple(config["targets"]), config["conns"] + probe.get("conns", 0), config["duration_ns"]))
        # What the coordinator may show or keep: a redis password is not sent back (spec/load.py).
        return pb.ConfigureReply(engine_config=json.dumps(redacted(config)), lease_key=run.lease_key)

    # ------------------------------------------------------------------ a run's calls

    @_answers("Start")
    def Start(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "configured")
            now = _core.now_ns()
            at = request.start_at_mono_ns or run.config.get("start_at_ns") or 0
            if at and at - now > MAX_START_AHEAD_NS:
                raise InputError(f"start at {fmt_ns(at - now)} from now on this agent's clock is over "
                                 f"{fmt_ns(MAX_START_AHEAD_NS)} ahead",
                                 "start at the agent's CLOCK_MONOTONIC (the Clock call gives it) plus a short barrier")
            config = run.config | {"start_at_ns": at or None}
            # The agent process handles its own signals: the session is not the signal handler's.
            run.session = LocalAgent().start(LoadSpec.from_engine_config(config), on_signal=False)
            # The rows are bounded by ``Held`` (or by the coordinator): Finish sends every row not yet taken.
            run.session.unbounded()
            if per_s := rows_per_s(run.config):
                run.held = Held(run.agent_index, self.limits.max_rows(run.config), per_s)
                run.session.thin_rows(run.held.engine_rows, run.agent_index * AGENT_THREADS)
            start = run.session.start_mono_ns
            now = _core.now_ns()
        self._emit(Started(run.run_id, start, max(0, start - now)))
        return pb.StartReply(start_mono_ns=start)

    def _progress(self, run: _Run) -> pb.ProgressReply:
        """The run's live counters (under the lock)."""
        s = run.session
        assert s is not None
        counters = dict(s.snapshot())
        finished = s.is_finished()
        elapsed = counters.get("elapsed_ns", 0) if finished else s.elapsed_ns()
        return pb.ProgressReply(counters=json.dumps(counters), finished=finished, in_flight=s.in_flight(),
                                elapsed_ns=max(0, elapsed))

    @_answers("Progress")
    def Progress(self, request, context):
        with self._lock:
            return self._progress(self._current(request.run_id, "running", "finished"))

    @_answers("Pause")
    def Pause(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "running")
            run.session.pause()
            if run.paused_at is None:
                run.paused_at = _core.now_ns()
            return self._progress(run)

    @_answers("Resume")
    def Resume(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "running", "finished")
            run.session.resume()
            if run.paused_at is not None:
                run.paused_ns += _core.now_ns() - run.paused_at
                run.paused_at = None
            return self._progress(run)

    @_answers("Stop")
    def Stop(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "running", "finished")
            stopping = self._state() == "running" and not run.stopped
            run.session.stop()
            run.stopped = run.stopped or stopping
            reply = self._progress(run)
        if stopping:
            self._emit(Stopped(run.run_id))
        return reply

    def _intervals(self, run: _Run, pending: bool) -> tuple[list[int], list[tuple[str, bytes]]]:
        """The interval histograms to send (under the lock): finished requests' of every interval
        whose count changed since the last time, or those of every interval with requests
        outstanding now."""
        intervals = run.session.intervals
        counts = dict(intervals.counts(pending=pending))
        if pending:
            indices = sorted(i for i, n in counts.items() if n)
        else:
            indices = sorted(i for i, n in counts.items() if run.done_sent.get(i) != n)
            run.done_sent.update((i, counts[i]) for i in indices)
        kind = "pending" if pending else "done"
        return indices, [(f"{kind}:{i}", h) for i, h in zip(indices, intervals.encoded(indices, pending=pending))]

    @_streams("Snapshot")
    def Snapshot(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "running", "finished")
            raw = run.session.take_batch()
            if run.held is not None:
                run.held.taken_at = run.held.collected_at = time.monotonic()
            stalls = run.session.engine_stalls[run.stalls_sent:]
            run.stalls_sent += len(stalls)
            done, done_parts = self._intervals(run, pending=False)
            pending, pending_parts = self._intervals(run, pending=True)
        rows, outstanding, level = decode_samples(raw["samples"]), decode_samples(raw["pending"]), 0
        if run.held is not None:
            rows, outstanding, level = run.held.hand_over(rows, outstanding, raw.get("thinned_level", 0))
        meta = {"snap_ns": raw["snap_ns"], "complete": raw["complete"], "counters": dict(raw["counters"]),
                "engine_stalls": [list(p) for p in stalls], "done": done, "pending": pending,
                "thinned_level": level}
        return meta, [("samples", _bytes_of(rows)), ("pending", _bytes_of(outstanding)), *done_parts, *pending_parts]

    @_streams("Finish")
    def Finish(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "running", "finished")
        if not self._await_end(run, context, renews=run.keyed(request)):
            return None  # the coordinator went away: the run waits for another Finish, or its lease
        with self._lock:
            if self._run is not run:
                raise InputError(f"run {run.run_id!r} was dropped while Finish waited", "run it again")
            result = run.session.finish(interrupted=run.stopped)
            done, done_parts = self._intervals(run, pending=False)
            self._run = None
        self._emit(Finished(run.run_id, result.counters.get("sent", 0), result.counters.get("received", 0),
                            result.error, result.interrupted))
        rows, level = result.samples, 0
        if run.held is not None:
            rows, _, level = run.held.hand_over(rows, rows[:0], run.session.thinned_level)
        meta = result_meta(result) | {"start_mono_ns": run.session.start_mono_ns, "done": done, "thinned_level": level}
        parts = [("latency_hist", result.latency_hist), ("send_lag_hist", result.send_lag_hist),
                 ("send_lag_unstalled_hist", result.send_lag_unstalled_hist),
                 ("samples", _bytes_of(rows)), *done_parts]
        if (fine := result.packet_hist) is not None:
            # Packet mode: the 100 ns bins go as a part of their own, their shape in the meta.
            meta["packet_hist"] = {k: v for k, v in fine.items() if k != "counts"}
            parts.append(("packet_hist", fine["counts"]))
        return meta, parts

    def _await_end(self, run: _Run, context: grpc.ServicerContext, renews: bool) -> bool:
        """Wait until ``run``'s engine ended, renewing the lease while the caller (with the run's
        lease key: ``renews``) waits; False when
        the caller went away first. Bounded: past the schedule's end, the drain and a margin the
        engine is stopped, and after as long again HostError."""
        stopped_at: int | None = None
        while True:
            with self._lock:
                if self._run is not run or run.session.is_finished():
                    return True
                now = _core.now_ns()
                if stopped_at is None and now > run.end_by_ns():
                    run.session.stop()
                    run.stopped, stopped_at = True, now
                elif stopped_at is not None and now - stopped_at > run.config["timeout_ns"] + FINISH_MARGIN_NS:
                    raise HostError(f"run {run.run_id!r}: the engine did not end {fmt_ns(now - stopped_at)} after "
                                    f"it was stopped", "restart the agent (and report this)")
            if not context.is_active():
                return False
            if renews:
                self.renew()
            time.sleep(POLL_S)

    # ------------------------------------------------------------------ the lease

    def _watch(self) -> None:
        tick = min(POLL_S * 2, self.limits.lease_ns / 1e9 / 10)
        while not self._closing.wait(tick):
            with self._lock:
                event = self._check_lease()
            if event is not None:
                self._emit(event)
            try:
                event = self._keep()
            except TailwiseError:
                event = None  # the engine's problem: the coordinator's next call meets it
            if event is not None:
                self._emit(event)

    def _keep(self) -> Event | None:
        """The keeper: take a running engine's rows into ``Held`` when nobody has for its
        ``every_s``; the first time they are thinned, say so."""
        with self._lock:
            run = self._run
            held = run.held if run is not None else None
            if held is None or self._state() != "running" or time.monotonic() - held.taken_at < held.every_s:
                return None
            if not held.lock.acquire(blocking=False):
                return None  # a Snapshot is handing the rows over: they are being taken
            try:
                # Only the finished rows: the keeper holds no pending ones (a Snapshot takes its
                # own), and a thread far behind would censor up to a ring of packets into them.
                raw = run.session.take_batch(pending=False)
            except BaseException:
                held.lock.release()
                raise
            held.taken_at = time.monotonic()
        try:
            held.add(decode_samples(raw["samples"]), raw.get("thinned_level", 0))
            if not held.level or held.said:
                return None
            held.said, one_in = True, 1 << held.level
        finally:
            held.lock.release()
        return Thinned(run.run_id, one_in, held.max_rows, int((time.monotonic() - held.collected_at) * 1e9),
                       self.limits.max_memory, self.limits.memory_from)

    def _check_lease(self) -> Event | None:
        """Stop a running load whose coordinator is silent for the lease; drop a run nobody
        collects (or starts) within a lease (under the lock)."""
        run = self._run
        if run is None:
            return None
        now = time.monotonic()
        lease_s = self.limits.lease_ns / 1e9
        silent = now - self._last_call
        state = self._state()
        if state == "running" and silent > lease_s and not run.expired:
            run.session.stop()
            run.stopped = run.expired = True
            return LeaseExpired(run.run_id, int(silent * 1e9), self.limits.lease_ns)
        if state == "configured" and silent > lease_s:
            self._run = None
            return Dropped(run.run_id, state, self.limits.lease_ns)
        if state == "finished" and now - max(self._last_call, run.finished_at or now) > lease_s:
            run.session.finish(interrupted=run.stopped)  # joins the engine's threads: nothing left behind
            self._run = None
            return Dropped(run.run_id, state, self.limits.lease_ns)
        return None

    # ------------------------------------------------------------------ shutting down

    def stop_load(self, why: str) -> None:
        """Stop a running load and wait for its end (bounded): before the agent goes away."""
        with self._lock:
            run = self._run
            if run is not None and run.session is not None:
                run.session.stop()
                run.stopped = True
        self._emit(Closing(why, run.run_id if run else None))
        if run is None or run.session is None:
            return
        deadline = time.monotonic() + (run.config["timeout_ns"] + FINISH_MARGIN_NS) / 1e9
        while time.monotonic() < deadline:
            with self._lock:
                if self._run is not run or run.session.is_finished():
                    return
            time.sleep(POLL_S)

    def close(self) -> None:
        """The watchdog stopped and a finished engine joined; the server is gone by then."""
        self._closing.set()
        self._watchdog.join(timeout=5)
        with self._lock:
            run, self._run = self._run, None
            if run is not None and run.session is not None and run.session.is_finished():
                run.session.finish(interrupted=True)


def result_meta(result: AgentResult) -> dict[str, Any]:
    """Every field of an agent's result but the binary ones (sent as parts), as JSON values."""
    return {f.name: getattr(result, f.name) for f in fields(AgentResult) if f.name not in BINARY_FIELDS}
