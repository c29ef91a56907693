"""`LoadSpec`: what one agent is asked to do — the engine's whole configuration, as the
coordinator gives it (`RunSpec.load_spec`) and an agent receives it."""

from __future__ import annotations

from dataclasses import dataclass, field

from tailwise.spec.workload import Workload


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
    #: A target that stays unreachable this long (refused, or closing before replying) ends the run.
    unreachable_ns: int = 2_000_000_000
    #: Tests only: (at_ns, for_ns, every_ns, count) — each engine thread stops, as a preemption would.
    test_stall_ns: tuple[int, int, int, int] | None = None
    #: Receive times: "kernel" (SO_TIMESTAMPING software stamps) or "user" (the clock after read).
    timestamps: str = "user"
    service_ns: int | None = None  # carried in each synthetic request; None: the server chooses
    scheme: str = "synthetic"
    http_host: str = ""  # Host header of http:// requests
    http_path: str = "/"
    udp_size: int = 64  # udp:// datagram bytes
    workload: Workload = field(default_factory=Workload)
    #: The latency probe (--probe; engine/mod.rs, `Probe`): its own connections with one request
    #: outstanding each, Poisson at its own rate; 0 connections: no probe.
    probe_conns: int = 0
    probe_rate_rps: float = 0.0

    # What the statistics see. With a probe, the timed requests are the probe's (Poisson, every
    # one kept) while the target is offered the load and the probe together.
    @property
    def offered_rps(self) -> float:
        return self.rate_rps + (self.probe_rate_rps if self.probe_conns else 0.0)

    @property
    def timed_arrival(self) -> str:
        return "exp" if self.probe_conns else self.arrival

    @property
    def timed_sample_every(self) -> int:
        return 1 if self.probe_conns else self.sample_every
