"""What every knob of `tailwise doctor` shares: the typed ``Fact`` it reads, the files it reads
under a root, the one /proc/stat sample, and the ``Knob`` base class (host/doctor.py runs them).

Each knob reads its files under a root (``/``; a fake sysfs/procfs tree in tests), never needing
root, and says as a typed ``Fact`` what it read, its state (ok, warn, unreadable, not-applicable),
why it matters for the tail in one line with its source (How to Measure the Killer Microsecond,
KBNets'17 §3 and §4.2; Lancet, ATC'19 §5; pyperf's system tune), the command that would fix it,
and which files or system calls it read. A file that is missing or unreadable makes the knob
``unreadable`` with the reason, never ok. ``not-applicable`` is a fact read too: a loopback
target has no NIC, one NUMA node has no remote node.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, ClassVar

from tailwise.host.facts import cpu_list

#: How long `tailwise doctor` samples /proc/stat (steal, other tenants' CPU, SMT siblings' load).
SAMPLE_S = 0.5


class State(str, Enum):
    OK = "ok"
    WARN = "warn"
    UNREADABLE = "unreadable"
    NOT_APPLICABLE = "not-applicable"


@dataclass(frozen=True)
class Fact:
    """What one knob read."""

    name: str
    state: State
    #: What it read, in a few words.
    value: str
    #: Why the knob matters for the tail, in one line, with its source.
    why: str
    #: The command that would set the tail-friendly value (None: it has it already).
    fix: str | None
    #: The files or system calls read.
    source: str
    #: warn: what is wrong; unreadable: why it could not be read; not-applicable: why not.
    detail: str | None = None
    #: The figures read, by name (JSON values).
    readings: dict = field(default_factory=dict)

    def as_json(self) -> dict:
        return {"name": self.name, "state": self.state.value, "value": self.value, "detail": self.detail,
                "why": self.why, "fix": self.fix, "source": self.source, "readings": self.readings}


class Unreadable(Exception):
    """A knob's file or system call could not be read; the message is the reason."""


class NotApplicable(Exception):
    """The knob does not apply here (no NIC behind the interface, one NUMA node); the message says why."""


def read_text(path: Path) -> str:
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        raise Unreadable(f"{path} does not exist") from None
    except PermissionError:
        raise Unreadable(f"{path} is not readable by this user") from None
    except OSError as e:
        raise Unreadable(f"{path}: {e.strerror}") from None


def cpu_text(cpus) -> str:
    """A set of CPUs as the kernel writes a list ("0-3,6"); "" for none."""
    out, run = [], []
    for c in sorted(cpus):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def grouped(by_cpu: dict[int, str]) -> str:
    """Values per CPU, each value once with its CPUs: "performance (CPU 0-3), powersave (CPU 4)"."""
    cpus: dict[str, set[int]] = {}
    for c, v in by_cpu.items():
        cpus.setdefault(v, set()).add(c)
    if len(cpus) == 1:
        return next(iter(cpus))
    return ", ".join(f"{v} (CPU {cpu_text(cs)})" for v, cs in cpus.items())


def cmdline(text: str) -> dict[str, str]:
    """The kernel's parameters (/proc/cmdline): name → value ("" for a bare flag); what follows
    "--" is init's, not the kernel's."""
    out: dict[str, str] = {}
    for word in text.split():
        if word == "--":
            break
        name, _, value = word.partition("=")
        out[name] = value
    return out


def selected(text: str) -> str:
    """The bracketed choice of a sysfs list ("always [madvise] never" → "madvise")."""
    m = re.search(r"\[([^\]]+)\]", text)
    return m.group(1) if m else text.strip()


# --------------------------------------------------------------------------- the /proc/stat sample

@dataclass(frozen=True)
class CpuShare:
    """A CPU's time between two readings of /proc/stat, as shares of its ticks."""

    busy: float  # user, nice, system, irq, softirq (guest time is counted in user already)
    steal: float
    ticks: int


#: /proc/stat's cpu columns up to steal (proc(5)): user nice system idle iowait irq softirq steal.
_STAT_COLUMNS = 8


def parse_stat(text: str) -> dict[str, list[int]]:
    """The cpu lines of /proc/stat: "cpu" (all of them) and "cpuN" → their tick counters."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if f and f[0].startswith("cpu"):
            if len(f) - 1 < _STAT_COLUMNS:
                raise Unreadable(f"/proc/stat's {f[0]} line has no steal column (a kernel before 2.6.11)")
            out[f[0]] = [int(x) for x in f[1:]]
    if "cpu" not in out:
        raise Unreadable("/proc/stat has no cpu line")
    return out


def stat_shares(before: dict[str, list[int]], after: dict[str, list[int]]) -> dict[str, CpuShare]:
    """Each CPU's busy and steal share of the ticks between two readings (``parse_stat``)."""
    out = {}
    for name, b in before.items():
        a = after.get(name)
        if a is None:
            continue
        d = [x - y for x, y in zip(a[:_STAT_COLUMNS], b[:_STAT_COLUMNS])]
        total = sum(d)
        if total > 0:
            out[name] = CpuShare(busy=(d[0] + d[1] + d[2] + d[5] + d[6]) / total, steal=d[7] / total, ticks=total)
    if "cpu" not in out:
        raise Unreadable("no CPU time passed between the two readings of /proc/stat")
    return out


class CpuSample:
    """/proc/stat read twice, ``seconds`` apart while tailwise sleeps (so that every busy tick is
    someone else's); taken once, when a knob first asks, and shared by the knobs that need it."""

    def __init__(self, root: str | Path = "/", seconds: float = SAMPLE_S, wait: Callable[[float], None] = time.sleep):
        self.path = Path(root) / "proc" / "stat"
        self.seconds = seconds
        self.wait = wait
        self._result: dict[str, CpuShare] | Unreadable | None = None

    def shares(self) -> dict[str, CpuShare]:
        if self._result is None:
            try:
                before = parse_stat(read_text(self.path))
                self.wait(self.seconds)
                self._result = stat_shares(before, parse_stat(read_text(self.path)))
            except Unreadable as e:
                self._result = e
        if isinstance(self._result, Unreadable):
            raise self._result
        return self._result


# --------------------------------------------------------------------------- the knobs

@dataclass(frozen=True)
class Context:
    """What the knobs share: the interface to the target, the CPUs tailwise would pin its threads
    to (empty: not pinned), the /proc/stat sample."""

    iface: str | None = None
    #: Why there is no interface (no route to the target, no default route).
    iface_note: str | None = None
    cpus: frozenset[int] = frozenset()
    sample: CpuSample | None = None


@dataclass(frozen=True)
class RunShape:
    """What a run about to start does on this host, for ``Knob.matters``."""

    #: The engine busy-polls (--poll spin).
    spinning: bool = True
    #: A thread of tailwise here sleeps between requests (--poll block, the built-in server's workers).
    sleeping: bool = False
    #: The target is reached through a NIC (not loopback).
    nic: bool = False


class Knob:
    """One source of jitter: ``read()`` → a ``Fact``; ``matters(shape)``: whether its warning
    concerns a run of that shape."""

    name: ClassVar[str]
    why: ClassVar[str]
    source: ClassVar[str]

    def __init__(self, root: str | Path = "/", context: Context | None = None):
        self.root = Path(root)
        self.ctx = context or Context()
        self.sample = self.ctx.sample or CpuSample(self.root)

    def read(self) -> Fact:
        try:
            return self.examine()
        except Unreadable as e:
            return self.fact(State.UNREADABLE, "not read", detail=str(e))
        except NotApplicable as e:
            return self.fact(State.NOT_APPLICABLE, "does not apply", detail=str(e))

    def examine(self) -> Fact:
        raise NotImplementedError

    def matters(self, shape: RunShape) -> bool:
        return True

    def fact(self, state: State, value: str, detail: str | None = None, fix: str | None = None, **readings) -> Fact:
        return Fact(self.name, state, value, self.why, fix, self.source, detail, readings)

    # helpers -----------------------------------------------------------------------------
    def path(self, rel: str) -> Path:
        return self.root / rel

    def text(self, rel: str) -> str:
        return read_text(self.path(rel))

    def optional(self, rel: str) -> str | None:
        """A secondary reading: None when the file does not exist (unreadable still raises)."""
        return self.text(rel) if self.path(rel).exists() else None

    def online(self) -> set[int]:
        return cpu_list(self.text("sys/devices/system/cpu/online"))

    def ours(self) -> set[int]:
        """The CPUs tailwise would use: the pinned ones, else every online CPU."""
        return set(self.ctx.cpus) or self.online()

    def device(self) -> Path:
        """The device behind the interface to the target."""
        iface = self.ctx.iface
        if iface is None:
            raise NotApplicable(self.ctx.iface_note or "no interface: no TARGET given and no default route")
        net = self.path(f"sys/class/net/{iface}")
        if not net.exists():
            raise Unreadable(f"{net} does not exist")
        if not (net / "device").exists():
            raise NotApplicable(f"{iface} is virtual (no device behind it): no NIC, no interrupts")
        return (net / "device").resolve()

    def up(self, dev: Path, name: str) -> Path | None:
        """``name`` in the device's directory or the nearest parent's (a virtio NIC's PCI device)."""
        top = self.path("sys").resolve()
        for d in (dev, *dev.parents):
            if (d / name).exists():
                return d / name
            if d == top or top not in d.parents:
                return None
        return None
