"""What tailwise warns of, as values: one frozen dataclass per kind, holding the figures that make
it, as hyperfine's ``output/warnings.rs`` holds its warnings in one enum. The words are composed
only when a warning is shown (render/warning.py), so that a caller can test for a kind, and a
changed sentence changes one place.

Every warning is about what the figures of a run can carry, never a failed check: the checks and
their remedies are the methodology's (methodology/remedies.py, words.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class TimeCapped:
    """``env`` (the test suite's cap, ``value`` as given) shortened the run to ``cap_s``."""

    env: str
    value: str
    cap_s: float


@dataclass(frozen=True)
class ServerShares:
    """The built-in server's workers and the spinning engine threads are more than the CPUs: the
    server sleeps between requests, and the tail holds its wake-ups and preemptions."""

    spinning: int
    workers: int
    cores: int


@dataclass(frozen=True)
class SpinnersShare:
    """More spinning engine threads than CPUs (a target elsewhere)."""

    spinning: int
    cores: int


@dataclass(frozen=True)
class HostKnob:
    """A knob of the host (host/doctor.py) in warn state that matters for this run's shape."""

    name: str
    detail: str
    fix: str


@dataclass(frozen=True)
class SamplesNotKept:
    """The disk refused the rows the run kept as it went (``why``): the results directory ``out``
    holds the statistics' rows only; the figures are whole."""

    out: str
    why: str


@dataclass(frozen=True)
class JournalGivenUp:
    """A run on agents could not keep what they sent on disk as it came (``why``): had the
    coordinator died, the run would have been lost; the figures are whole."""

    out: str
    why: str


#: Every kind of warning.
AnyWarning = TimeCapped | ServerShares | SpinnersShare | HostKnob | SamplesNotKept | JournalGivenUp
#: Who is told of a warning (the command's printer, or a sweep's event).
Warn = Callable[[AnyWarning], None]
