"""Where the coordinator — the Python thread that drives a run — runs while the engine's schedule
runs (issue 37 goal 4: nothing of the coordinator's may delay a send).

With a CPU that neither the engine, the built-in server nor a loopback target uses, the coordinator
moves there (`pin_coordinator`). Without one, when it can run only where the engine runs — every
client on one CPU, as `taskset -c N tailwise run` and bench/run place it — it takes that CPU under
SCHED_IDLE while the schedule runs: a `--poll block` engine sleeps between sends, and when it wakes
it preempts an idle-policy thread at once (sched(7)), where a normal one could hold the CPU for
the rest of its slice. Measured (BENCHMARKS.md, `bench/engine/poll_block.py --only coordinator`,
20k req/s): most of the send lag is the engine's own loop either way, but a send lag p99 of
100 µs or more came in 4 of 21 runs with the coordinator as it was and in none of 21 yielding.
A spinning thread never sleeps, so an idle-policy coordinator beside it would never run: it yields
only to a blocking engine, and only where no server of tailwise's spins. Each methodology round returns it to the normal policy (`normal`), the
schedule paused for the round, and a run's end does too (`release`).
"""

from __future__ import annotations

import os


def pin_coordinator(busy_cpus: set[int]) -> bool:
    """Move this (the coordinator's) thread to a CPU that no spinning thread of tailwise uses, if
    there is one. Call after the engine and the server pinned themselves."""
    try:
        free = set(os.sched_getaffinity(0)) - busy_cpus
        if not free:
            return False
        os.sched_setaffinity(0, free)
        return True
    except OSError:
        return False


class Placement:
    """The coordinator's CPU and scheduling policy for one run: `take` once the engine has pinned
    its threads, `release` at the end (both for this thread only: pid 0 in sched_setaffinity(2)
    and sched_setscheduler(2) is the calling thread; threads it starts meanwhile inherit them)."""

    def __init__(self, busy_cpus: set[int] | None, engine_cpus: tuple[int, ...] | None, spinning: bool):
        """``busy_cpus``: the CPUs of the engine, the built-in server and a loopback target (None: not
        pinned); ``spinning``: a thread of tailwise's busy-polls (--poll spin, a spinning built-in server)."""
        self.busy_cpus, self.engine_cpus, self.spinning = busy_cpus, engine_cpus, spinning
        #: It has a CPU of its own (no round need pause the schedule).
        self.own_core = False
        #: It shares the engine's CPU and yields to it while the schedule runs.
        self.yielding = False
        self._affinity: set[int] | None = None

    def take(self) -> None:
        if self.busy_cpus is None:  # not pinned (--pin off, or agents): the scheduler places everything
            return
        self._affinity = os.sched_getaffinity(0)
        self.own_core = pin_coordinator(self.busy_cpus)
        self.yielding = (not self.own_core and not self.spinning and bool(self.engine_cpus)
                         and self._affinity <= set(self.engine_cpus))
        self.idle()

    def idle(self) -> None:
        """The schedule runs: yield to the engine (when `take` found it must)."""
        if self.yielding:
            _policy(os.SCHED_IDLE)

    def normal(self) -> None:
        """The schedule is paused or over: the normal policy, so that the analysis is not starved."""
        if self.yielding:
            _policy(os.SCHED_OTHER)

    def release(self) -> None:
        self.normal()
        if self.own_core and self._affinity:
            try:
                os.sched_setaffinity(0, self._affinity)
            except OSError:
                pass

    def words(self) -> str:
        """How the coordinator ran, for the summary's ``methodology.coordinator``."""
        if self.own_core:
            return "a CPU of its own"
        if self.yielding:
            return ("shares the engine's CPU, yielding to it (SCHED_IDLE) while the schedule ran; each round "
                    "paused the schedule while it computed")
        return "shares the CPUs: each round paused the schedule while it computed"


def _policy(policy: int) -> None:
    try:
        os.sched_setscheduler(0, policy, os.sched_param(0))
    except OSError:
        pass  # refused (a seccomp profile, say): the coordinator runs as it would have
