"""Agents run load and measure. The controller talks to the ``Agent`` interface only.

``LocalAgent`` drives the in-process Rust engine; a remote agent (gRPC, later) wraps a
``LocalAgent`` on another host behind the same interface.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from tailwise import _core
from tailwise.errors import InputError, TargetError
from tailwise.host import steal_ticks
from tailwise.workload import Workload

#: One raw sample: times in ns since the schedule's start; latency from the intended send time.
SAMPLE_DTYPE = np.dtype([("intended_ns", "<u8"), ("sent_ns", "<u8"), ("latency_ns", "<u8")])


@dataclass(frozen=True)
class LoadSpec:
    """What one agent is asked to do."""

    targets: list[str]  # "ip:port"
    rate_rps: float
    duration_ns: int
    threads: int = 1
    conns: int = 8
    outstanding: int = 4
    arrival: str = "exp"
    sample_every: int = 1
    timeout_ns: int = 1_000_000_000
    late_ns: int = 50_000
    seed: int = 1
    pin: bool = True
    busy_poll: bool = True
    service_ns: int | None = None  # carried in each synthetic request; None: the server chooses
    scheme: str = "synthetic"
    http_host: str = ""  # Host header of http:// requests
    http_path: str = "/"
    udp_size: int = 64  # udp:// datagram bytes
    workload: Workload = field(default_factory=Workload)


@dataclass
class AgentResult:
    counters: dict
    elapsed_ns: int
    received_in_window: int
    latency_hist: bytes  # HdrHistogram V2 compressed
    send_lag_hist: bytes
    send_lag_unstalled_hist: bytes  # send lag of requests no engine stall (> 20 µs iteration) delayed
    stalls: int
    stalled_ns: int
    samples: np.ndarray  # SAMPLE_DTYPE, sorted by intended send time
    error: str | None
    error_reasons: list[tuple[str, int]]
    pinned_cpus: list[int | None]
    cpu_ns: int
    preemptions: int = 0
    steal_s: float | None = None  # hypervisor steal time across the host's CPUs during the run
    interrupted: bool = False
    wall_start_s: float = field(default=0.0)
    #: Stalls (≥ 200 µs without running) of the engine threads and of any in-process server, as
    #: (start, end) ns after the schedule's start: the coordinator masks the samples around them.
    stall_intervals_ns: list[tuple[int, int]] = field(default_factory=list)


def decode_samples(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype=SAMPLE_DTYPE)


#: Something else in this process that logs its stalls: returns (start, end) pairs of
#: CLOCK_MONOTONIC ns since its last call (the built-in server's ``take_stalls``).
StallSource = Callable[[], list[tuple[int, int]]]


class Session:
    """A running measurement on one agent: poll it, take its samples while it runs, stop it."""

    def __init__(self, engine, spec: LoadSpec, stall_sources: tuple[StallSource, ...] = ()):
        self._engine = engine
        self.spec = spec
        self._taken: list[np.ndarray] = []
        self._start_mono_ns = engine.start_mono_ns
        self._sources: tuple[StallSource, ...] = (engine.take_stalls, *stall_sources)
        self._stalls: list[tuple[int, int]] = []
        self._steal0 = steal_ticks()
        self.wall_start_s = time.time()

    def take_stalls(self, *, engine_rest: list[tuple[int, int]] = ()) -> list[tuple[int, int]]:
        """Stalls logged since the last take, as (start, end) ns after the schedule's start."""
        t0 = self._start_mono_ns
        new = [(a - t0, b - t0) for src in self._sources for a, b in src()]
        new += [(a - t0, b - t0) for a, b in engine_rest]
        new = [(a, b) for a, b in new if b > 0]  # before the schedule started: nothing to mask
        self._stalls.extend(new)
        return new

    def snapshot(self) -> dict:
        return self._engine.snapshot()

    def take(self) -> np.ndarray:
        """Samples kept since the last take (unsorted across threads)."""
        batch = decode_samples(self._engine.take()).copy()
        self._taken.append(batch)
        return batch

    def is_finished(self) -> bool:
        return self._engine.is_finished()

    def stop(self) -> None:
        self._engine.stop()

    def finish(self, interrupted: bool = False) -> AgentResult:
        """Wait for the end; the result holds every sample of the run, sorted by intended time."""
        raw = self._engine.join()
        self.take_stalls(engine_rest=raw["stall_intervals"])
        steal1 = steal_ticks()
        samples = np.concatenate([*self._taken, decode_samples(raw["samples"])])
        samples.sort(order="intended_ns", kind="stable")
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
            error=raw["error"],
            error_reasons=[tuple(r) for r in raw["error_reasons"]],
            pinned_cpus=list(raw["pinned_cpus"]),
            cpu_ns=raw["cpu_ns"],
            preemptions=raw["preemptions"],
            steal_s=None if self._steal0 is None or steal1 is None else (steal1 - self._steal0) / os.sysconf("SC_CLK_TCK"),
            interrupted=interrupted,
            wall_start_s=self.wall_start_s,
            stall_intervals_ns=sorted(self._stalls),
        )


class Agent(Protocol):
    def start(self, spec: LoadSpec, stall_sources: tuple[StallSource, ...] = ()) -> Session: ...

    def run(self, spec: LoadSpec, progress: Callable[[dict], None] | None = None,
            stall_sources: tuple[StallSource, ...] = ()) -> AgentResult: ...


class LocalAgent:
    """Runs the engine in this process; Python only starts it, polls counters and collects."""

    poll_s = 0.1

    def start(self, spec: LoadSpec, stall_sources: tuple[StallSource, ...] = ()) -> Session:
        try:
            engine = _core.Engine(
                spec.targets,
                spec.rate_rps,
                spec.duration_ns,
                threads=spec.threads,
                conns=spec.conns,
                outstanding=spec.outstanding,
                arrival=spec.arrival,
                sample_every=spec.sample_every,
                timeout_ns=spec.timeout_ns,
                late_ns=spec.late_ns,
                seed=spec.seed,
                pin=spec.pin,
                busy_poll=spec.busy_poll,
                service_ns=spec.service_ns,
                scheme=spec.scheme,
                http_host=spec.http_host,
                http_path=spec.http_path,
                udp_size=spec.udp_size,
                keys=spec.workload.keys,
                key_size=spec.workload.key_size,
                value_size=spec.workload.value_size,
                popularity=spec.workload.popularity,
                set_fraction=spec.workload.set_fraction,
            )
        except ConnectionError as e:
            raise TargetError(str(e).split(" — ")[0], _remedy(str(e))) from None
        except ValueError as e:  # the engine's own validation: its message names the fix
            problem, _, remedy = str(e).partition(": ")
            raise InputError(problem, remedy) from None
        return Session(engine, spec, stall_sources)

    def run(self, spec: LoadSpec, progress: Callable[[dict], None] | None = None,
            stall_sources: tuple[StallSource, ...] = ()) -> AgentResult:
        """A fixed-length run: start, poll (taking samples as they come), finish."""
        session = self.start(spec, stall_sources)
        interrupted = False
        try:
            while not session.is_finished():
                time.sleep(self.poll_s)
                session.take()
                if progress is not None:
                    progress(session.snapshot())
        except KeyboardInterrupt:
            interrupted = True
            session.stop()
        return session.finish(interrupted)


def _remedy(message: str) -> str:
    if " — " in message:
        return message.split(" — ", 1)[1]
    return "check the target address and that the server runs"
