"""`tailwise doctor`: the host's sources of jitter that move a µs-scale tail, one class per knob,
as pyperf's ``_system.py`` has one ``Operation`` per setting: the processor's and the kernel's
(host/cpu_knobs.py) and the network's (host/net_knobs.py), each reading its files under a root
and saying what it read as a typed ``Fact`` (host/reading.py).

Nothing here prints (render/doctor.py does). ``measure/point.prepare`` puts the facts in every
summary's ``host`` and warns about those in ``warn`` state that matter for the run it prepares
(``Knob.matters``).
"""

from __future__ import annotations

from pathlib import Path

from tailwise.host.cpu_knobs import Clocksource, CStates, Governor, Isolation, OtherLoad, Smt, Steal, Thp, Turbo
from tailwise.host.net_knobs import BusyPoll, Coalescing, IrqAffinity, NicNuma
from tailwise.host.reading import SAMPLE_S, Context, CpuSample, Fact, Knob, RunShape, State, Unreadable, read_text

#: Every knob, in the order `tailwise doctor` shows them.
KNOBS: tuple[type[Knob], ...] = (Governor, CStates, Turbo, Smt, Isolation, NicNuma, Thp, Coalescing, IrqAffinity,
                                 BusyPoll, Clocksource, Steal, OtherLoad)


class Doctor:
    """Every knob of this host (or of a fake tree at ``root``), reading them once."""

    def __init__(self, root: str | Path = "/", iface: str | None = None, cpus=(), sample_s: float = SAMPLE_S,
                 iface_note: str | None = None):
        self.sample = CpuSample(root, sample_s)
        ctx = Context(iface=iface, iface_note=iface_note, cpus=frozenset(cpus), sample=self.sample)
        self.knobs = [k(root, ctx) for k in KNOBS]
        self._facts: list[Fact] | None = None

    def facts(self) -> list[Fact]:
        if self._facts is None:
            self._facts = [k.read() for k in self.knobs]
        return self._facts

    def warnings(self, shape: RunShape) -> list[Fact]:
        """The facts in warn state whose knob matters for a run of this shape."""
        return [f for k, f in zip(self.knobs, self.facts()) if f.state is State.WARN and k.matters(shape)]


def default_interface(root: str | Path = "/") -> str | None:
    """The interface of the default IPv4 route (/proc/net/route), None when there is none."""
    try:
        lines = read_text(Path(root) / "proc" / "net" / "route").splitlines()[1:]
    except Unreadable:
        return None
    for line in lines:
        f = line.split()
        if len(f) > 7 and f[1] == "00000000" and f[7] == "00000000":
            return f[0]
    return None


def route_interface(addr: str) -> tuple[str | None, str | None]:
    """(the interface the kernel routes ``addr`` (IP:PORT) through, None) or (None, why not)."""
    from tailwise import _core
    from tailwise.errors import HostError

    try:
        return _core.route_interface(addr), None
    except ValueError as e:
        return None, f"no route to {addr}: {e}"
    except HostError as e:
        return None, f"no route to {addr}: {e.line()}"
