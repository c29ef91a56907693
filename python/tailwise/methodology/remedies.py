"""What a failed check advises, as values without words: an ``Advice`` member for each kind that
needs no figure, a small frozen dataclass for each that does, holding them. ``words.remedy_words``
says them (as hyperfine's ``output/warnings.rs`` keeps its warnings an enum and writes them only in
``Display``), so that code decides on a remedy's type, never on its text."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


@dataclass(frozen=True)
class Setting:
    """How the client ran, for remedies that never recommend what is already the case."""

    #: "spin" (busy-poll), "block" (sleep until just before each send) or "lean" (block, woken by fewer replies).
    poll: str = "spin"
    #: The CPUs the engine threads are pinned to (None: not pinned).
    engine_cpus: tuple[int, ...] | None = None
    #: Every spinning thread of tailwise (engine, built-in server) has a CPU of its own.
    own_cpus: bool = False
    #: The kernel isolates CPUs from the scheduler (isolcpus), and the engine's are among them.
    isolated: bool = False
    #: The target is on this host (loopback or the built-in server).
    local_target: bool = True
    builtin: bool = False


@dataclass(frozen=True)
class HeldSlots:
    """Datagrams never answered held their slots until --timeout (controller.held_slots): the
    figures of what limited the rate."""

    lost: int
    timeout_s: float
    #: Slots held on average (Little's law).
    held: float
    slots: int
    conns: int
    outstanding: int


class Remedy:
    """Base of every remedy below (for ``isinstance`` and type hints)."""

    __slots__ = ()


class Advice(Remedy, Enum):
    """The remedies that need no figure (hyperfine's unit variants)."""

    NOTHING_SENT = "nothing-sent"  # rate: no request was sent
    CLIENT_COULD_NOT_SEND = "client-could-not-send"  # rate: sent too few
    SERVER_BEHIND = "server-behind"  # rate: completed too few
    FIX_SERVER = "fix-server"  # errors
    CLIENT_BEHIND_SCHEDULE = "client-behind-schedule"  # arrivals: sent late
    CLIENT_CONTENTION = "client-contention"  # arrivals: sends off the schedule
    FIND_PAUSE = "find-pause"  # stationarity: a transient
    WARM_UP_LONGER = "warm-up-longer"  # stationarity: the level moved
    FIND_UNANSWERED = "find-unanswered"  # confidence: censored requests reach the percentile
    LOOSEN_PRECISION = "loosen-precision"  # confidence: out of reach in the time allowed
    TARGET_GONE = "target-gone"  # the engine's error: the target stopped answering
    REPORT_OVERSHOOT = "report-overshoot"  # rate: more sent than scheduled (a bug)
    REPORT_NO_WINDOW = "report-no-window"  # consistency: no every-request histogram (a bug)
    REPORT_SCHEDULE_MISFIT = "report-schedule-misfit"  # arrivals: the schedule is not the process asked (a bug)
    REPORT_SAMPLES = "report-samples"  # consistency: the samples do not represent the requests
    FIND_LOSS = "find-loss"  # loss: more packets lost than --max-loss allows


class Longer(Enum):
    """Why running longer helps: each check that asks for it has its own reason."""

    SENDS = "sends"  # arrivals: too few gaps kept to test
    PLAIN = "plain"  # stationarity: too few samples to test
    DECAY = "decay"  # independence: the correlation must decay within the run
    CORRELATION = "correlation"  # confidence: no interval while the correlation lasts
    SAMPLES = "samples"  # confidence: too few samples (a higher rate gives them too)


@dataclass(frozen=True)
class RunLonger(Remedy):
    why: Longer = Longer.PLAIN

    @property
    def or_higher_rate(self) -> bool:
        """A higher --rate helps as much: what is missing is samples."""
        return self.why is Longer.SAMPLES


@dataclass(frozen=True)
class AddConnections(Remedy):
    """Little's law needs more requests in flight: ``conns`` connections at ``outstanding``."""

    conns: int
    outstanding: int


@dataclass(frozen=True)
class OverloadedAgents(Remedy):
    """These agents (HOST:PORT) could not send their share on schedule: their machines are the
    limit (the agents check)."""

    addresses: tuple[str, ...]


@dataclass(frozen=True)
class QuieterClient(Remedy):
    """The client's own stalls widened p``p``'s interval: what helps, given ``setting``."""

    setting: Setting
    p: float


@dataclass(frozen=True)
class FreeHeldSlots(Remedy):
    held: HeldSlots


@dataclass(frozen=True)
class RunToEnd(Remedy):
    """The run was interrupted after ``measured_s``."""

    measured_s: float


@dataclass(frozen=True)
class RaiseMaxTime(Remedy):
    """The run used all of --max-time ``seconds``."""

    seconds: float
    or_higher_rate: bool = False
