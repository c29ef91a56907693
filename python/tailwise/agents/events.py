"""What an agent service tells its caller, as values: `tailwise agent` (cli/agent.py) shows them,
one line each (render/agent.py), so the service itself (agents/server.py) prints nothing."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Configured:
    """A coordinator configured a run (nothing connected yet)."""

    run_id: str
    role: str
    rate_rps: float
    #: The probe's own rate (role probe, or a symmetric agent with a probe); 0: none.
    probe_rps: float
    targets: tuple[str, ...]
    conns: int
    duration_ns: int


@dataclass(frozen=True)
class Started:
    """The engine connected; its schedule starts at ``start_mono_ns`` (``in_ns`` from now)."""

    run_id: str
    start_mono_ns: int
    in_ns: int


@dataclass(frozen=True)
class Stopped:
    """The coordinator stopped the run early (Stop)."""

    run_id: str


@dataclass(frozen=True)
class LeaseExpired:
    """No call came for the lease while the run ran: the agent stopped its load on its own."""

    run_id: str
    silent_ns: int
    lease_ns: int


@dataclass(frozen=True)
class Thinned:
    """The rows held for a coordinator that has not collected them passed the agent's ceiling: it
    keeps 1 in ``one_in`` of them from now on, by the coordinator's own keys, and tells it (said
    once a run)."""

    run_id: str
    one_in: int
    max_rows: int
    #: Since the coordinator last collected the rows.
    silent_ns: int
    #: The memory the ceiling comes from (bytes; 0: none given, the fixed ceiling) and its source.
    max_memory: int
    memory_from: str


@dataclass(frozen=True)
class Finished:
    """The coordinator collected the run (Finish); the agent is idle again."""

    run_id: str
    sent: int
    received: int
    #: Why the engine ended the run early (one line), or None.
    error: str | None
    interrupted: bool


@dataclass(frozen=True)
class Dropped:
    """A run nobody collected within a lease (its coordinator is gone) was dropped: idle again."""

    run_id: str
    #: "configured" (never started) or "finished" (never collected).
    state: str
    lease_ns: int


@dataclass(frozen=True)
class Refused:
    """A call refused: a problem with the request (its limits, its state) or a missing token."""

    call: str
    run_id: str
    #: The problem and its remedy, one line (never the token).
    line: str
    #: The caller's address as gRPC names it (``ipv4:10.0.0.7:51234``), when known.
    peer: str = ""
    #: Refusals of a missing token from the same address not said since the last line (one line a
    #: second an address at most: a stranger cannot flood the log).
    unsaid: int = 0


@dataclass(frozen=True)
class Closing:
    """The agent is shutting down (a signal); a running load is stopped first."""

    signal: str
    run_id: str | None


#: What ``AgentServer`` emits.
Event = Configured | Started | Stopped | LeaseExpired | Thinned | Finished | Dropped | Refused | Closing
