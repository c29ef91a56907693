"""`tailwise doctor`: the host's sources of jitter that move a µs-scale tail, one class per knob,
as pyperf's ``_system.py`` has one ``Operation`` per setting.

Each knob reads its files under a root (``/``; a fake sysfs/procfs tree in tests), never needing
root, and says as a typed ``Fact`` what it read, its state (ok, warn, unreadable, not-applicable),
why it matters for the tail in one line with its source (How to Measure the Killer Microsecond,
KBNets'17 §3 and §4.2; Lancet, ATC'19 §5; pyperf's system tune), the command that would fix it,
and which files or system calls it read. A file that is missing or unreadable makes the knob
``unreadable`` with the reason, never ok. ``not-applicable`` is a fact read too: a loopback
target has no NIC, one NUMA node has no remote node.

Nothing here prints (render/doctor.py does). ``measure/point.prepare`` puts the facts in every
summary's ``host`` and warns about those in ``warn`` state that matter for the run it prepares
(``Knob.matters``).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import re
import socket
import struct
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Callable, ClassVar

from tailwise.host.facts import cpu_list

#: How long `tailwise doctor` samples /proc/stat (steal, other tenants' CPU, SMT siblings' load).
SAMPLE_S = 0.5
#: A CPU busy this share of the sample with work that is not tailwise's warns (other-load, smt).
BUSY_SHARE = 0.10
#: Steal above this share of the CPU time warns.
STEAL_SHARE = 0.01
#: The deepest idle state allowed without a warning: its exit latency, µs (C1; C1E is ~10 µs).
CSTATE_MAX_US = 2
#: Clock sources read in the vDSO, without a system call.
VDSO_CLOCKS = ("tsc", "kvm-clock", "hyperv_clocksource_tsc_page", "arch_sys_counter")


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


class Governor(Knob):
    name = "governor"
    why = ("P-states move the clock under a request: KBNets §4.2 cut p99.99 2.6× with power saving off "
           "(P-states, turbo, C-states)")
    source = "/sys/devices/system/cpu/cpuN/cpufreq/{scaling_governor,scaling_min_freq,scaling_max_freq,scaling_cur_freq}"

    def examine(self) -> Fact:
        cpus = sorted(self.ours())
        first = self.path(f"sys/devices/system/cpu/cpu{cpus[0]}/cpufreq")
        if not first.is_dir():
            raise Unreadable(f"{first} does not exist: no cpufreq driver (a VM, or the firmware sets the frequency)")
        gov, lo, hi, cur = {}, {}, {}, {}
        for c in cpus:
            base = f"sys/devices/system/cpu/cpu{c}/cpufreq/scaling_"
            gov[c] = self.text(base + "governor")
            lo[c], hi[c] = int(self.text(base + "min_freq")) // 1000, int(self.text(base + "max_freq")) // 1000
            now = self.optional(base + "cur_freq")
            if now is not None:
                cur[c] = int(now) // 1000
        value = f"{grouped(gov)}; {grouped({c: f'{lo[c]}–{hi[c]} MHz' for c in cpus})}"
        if cur:
            value += f", now {min(cur.values())}–{max(cur.values())} MHz" if len(set(cur.values())) > 1 \
                else f", now {next(iter(cur.values()))} MHz"
        readings = {"governor": {str(c): g for c, g in gov.items()}, "min_mhz": {str(c): v for c, v in lo.items()},
                    "max_mhz": {str(c): v for c, v in hi.items()}, "cur_mhz": {str(c): v for c, v in cur.items()},
                    "driver": self.optional(f"sys/devices/system/cpu/cpu{cpus[0]}/cpufreq/scaling_driver")}
        slow = {c for c, g in gov.items() if g != "performance"}
        if not slow:
            return self.fact(State.OK, value, **readings)
        return self.fact(State.WARN, value, fix=f"sudo cpupower -c {cpu_text(slow)} frequency-set -g performance",
                         detail=f"governor {grouped({c: gov[c] for c in slow})}, not performance, on CPU "
                                f"{cpu_text(slow)}: the clock drops between requests", **readings)


class CStates(Knob):
    name = "cstates"
    why = "waking from a deep C-state adds its exit latency to the request that wakes the CPU: KBNets §4.2 turns C-states off"
    source = "/sys/devices/system/cpu/cpuN/cpuidle/stateM/{name,latency,disable}, /proc/cmdline (max_cstate, idle=)"

    def matters(self, shape: RunShape) -> bool:
        return shape.sleeping

    def examine(self) -> Fact:
        params = cmdline(self.text("proc/cmdline"))
        limits = {k: params[k] for k in ("intel_idle.max_cstate", "processor.max_cstate", "idle", "cpuidle.off")
                  if k in params}
        said = ", ".join(f"{k}={v}" for k, v in limits.items()) or "no C-state limit on the kernel command line"
        if limits.get("idle") == "poll":
            return self.fact(State.OK, f"idle=poll: the CPUs never sleep ({said})", cmdline=limits)
        cpus = sorted(self.ours())
        states = {c: self._states(c) for c in cpus}
        deepest = {c: max(((lat, n) for n, lat, on in st if on), default=(0, "none")) for c, st in states.items()}
        driver = self.optional("sys/devices/system/cpu/cpuidle/current_driver") or "cpuidle"
        shown = ", ".join(f"{n} {lat} µs" + ("" if on else " (disabled)") for n, lat, on in states[cpus[0]])
        value = f"{driver}: {shown}; {said}"
        readings = {"driver": driver, "cmdline": limits,
                    "states": {str(c): [{"name": n, "latency_us": lat, "enabled": on} for n, lat, on in st]
                               for c, st in states.items()}}
        deep = {c for c, (lat, _) in deepest.items() if lat > CSTATE_MAX_US}
        if not deep:
            return self.fact(State.OK, value, **readings)
        worst = max(deepest[c] for c in deep)
        return self.fact(State.WARN, value, detail=f"CPU {cpu_text(deep)} may sleep in {worst[1]} ({worst[0]} µs to wake)",
                         fix=f"sudo cpupower -c {cpu_text(deep)} idle-set -D {CSTATE_MAX_US + 1} (or boot with "
                             f"intel_idle.max_cstate=1 processor.max_cstate=1)", **readings)

    def _states(self, cpu: int) -> list[tuple[str, int, bool]]:
        d = self.path(f"sys/devices/system/cpu/cpu{cpu}/cpuidle")
        if not d.is_dir():
            raise Unreadable(f"{d} does not exist: no cpuidle driver (cpuidle.off=1, or a kernel without cpuidle)")
        dirs = sorted(d.glob("state[0-9]*"), key=lambda p: int(p.name[5:]))
        if not dirs:
            raise Unreadable(f"{d} lists no idle states")
        rel = f"sys/devices/system/cpu/cpu{cpu}/cpuidle/"
        return [(self.text(rel + s.name + "/name"), int(self.text(rel + s.name + "/latency")),
                 self.text(rel + s.name + "/disable") == "0") for s in dirs]


class Turbo(Knob):
    name = "turbo"
    why = ("turbo moves the clock with the load and heat of the other cores: KBNets §3 and Lancet §5 run at "
           "the nominal frequency, turbo off")
    source = "/sys/devices/system/cpu/intel_pstate/no_turbo, else /sys/devices/system/cpu/cpufreq/boost"

    def examine(self) -> Fact:
        no_turbo, boost = "sys/devices/system/cpu/intel_pstate/no_turbo", "sys/devices/system/cpu/cpufreq/boost"
        if self.path(no_turbo).exists():
            on, via, fix = self.text(no_turbo) == "0", "intel_pstate no_turbo", f"echo 1 | sudo tee /{no_turbo}"
        elif self.path(boost).exists():
            on, via, fix = self.text(boost) == "1", "cpufreq boost", f"echo 0 | sudo tee /{boost}"
        else:
            raise Unreadable(f"neither {self.path(no_turbo)} nor {self.path(boost)} exists: no frequency driver here "
                             "exposes turbo")
        value = f"turbo {'on' if on else 'off'} ({via})"
        if not on:
            return self.fact(State.OK, value, turbo=False, via=via)
        return self.fact(State.WARN, value, detail="turbo is on: the clock follows the load", fix=fix, turbo=True, via=via)


class Smt(Knob):
    name = "smt"
    why = ("SMT siblings share a core's pipeline and caches: work on the sibling slows tailwise's thread "
           "(KBNets §3 turns hyperthreading off)")
    source = "/sys/devices/system/cpu/cpuN/topology/thread_siblings_list, /sys/devices/system/cpu/smt/control, /proc/stat"

    def examine(self) -> Fact:
        control = self.optional("sys/devices/system/cpu/smt/control")
        ctl = f"SMT {control}" if control else "no smt/control"
        ours = sorted(self.ours())
        paired = {}
        for c in ours:
            sibs = cpu_list(self.text(f"sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list")) - {c}
            if sibs:
                paired[c] = sibs
        readings = {"control": control, "siblings": {str(c): sorted(s) for c, s in paired.items()}}
        if not paired:
            return self.fact(State.OK, f"no SMT sibling of CPU {cpu_text(ours)}; {ctl}", **readings)
        value = "; ".join(f"CPU {c} shares its core with {cpu_text(s)}" for c, s in paired.items()) + f"; {ctl}"
        fix = "echo off | sudo tee /sys/devices/system/cpu/smt/control"
        try:
            shares = self.sample.shares()
        except Unreadable as e:
            return self.fact(State.WARN, value, detail=f"whether the siblings are busy is unknown: {e}", fix=fix, **readings)
        busy = []
        for c, sibs in paired.items():
            for s in sorted(sibs):
                share = shares.get(f"cpu{s}")
                if s in self.ctx.cpus:
                    busy.append(f"CPU {c}'s sibling {s} is tailwise's too")
                elif share and share.busy >= BUSY_SHARE:
                    busy.append(f"CPU {c}'s sibling {s} was {share.busy:.0%} busy")
        if not busy:
            return self.fact(State.OK, value + f"; siblings idle over {self.sample.seconds:g} s", **readings)
        return self.fact(State.WARN, value, detail="; ".join(busy), fix=fix + " (or keep the siblings idle)", **readings)


class Isolation(Knob):
    name = "isolation"
    why = ("other tasks, the tick and RCU callbacks on tailwise's cores preempt it: KBNets §4.2 isolates the core "
           "(isolcpus, taskset); nohz_full and rcu_nocbs keep the tick and RCU off it")
    source = "/sys/devices/system/cpu/{isolated,nohz_full}, /proc/cmdline (isolcpus, nohz_full, rcu_nocbs)"

    def matters(self, shape: RunShape) -> bool:
        return False  # the client's stalls name it (methodology/words.client_words) when they show

    def examine(self) -> Fact:
        online = self.online()
        isolated = cpu_list(self.text("sys/devices/system/cpu/isolated"))
        nohz = self.optional("sys/devices/system/cpu/nohz_full")
        params = cmdline(self.text("proc/cmdline"))
        rcu = params.get("rcu_nocbs")
        shown = "none (not built in)" if nohz is None else (nohz if nohz not in ("", "(null)") else "none")
        value = f"isolated {cpu_text(isolated) or 'none'}; nohz_full {shown}; rcu_nocbs {rcu or 'none'}"
        readings = {"isolated": sorted(isolated), "nohz_full": nohz, "rcu_nocbs": rcu, "isolcpus": params.get("isolcpus")}
        if len(online) < 2:
            raise NotApplicable("one CPU: nothing to isolate it from")
        ours = self.ours()
        if ours <= isolated:
            return self.fact(State.OK, value, **readings)
        cpus = cpu_text(self.ctx.cpus) if self.ctx.cpus else "CPUS"
        fix = (f"taskset -c {cpu_text(isolated)} tailwise …" if isolated else
               f"boot with isolcpus={cpus} nohz_full={cpus} rcu_nocbs={cpus}, then taskset -c {cpus} tailwise …")
        return self.fact(State.WARN, value, fix=fix, **readings,
                         detail=f"CPU {cpu_text(ours - isolated)} (tailwise's) not isolated: other tasks may run there")


class NicNuma(Knob):
    name = "nic-numa"
    why = ("a NIC on another NUMA node than the cores moves every packet across the socket interconnect: "
           "KBNets §4.2 (local against remote)")
    source = "/sys/class/net/IF/device/numa_node (or its bus device's), /sys/devices/system/node/{online,nodeN/cpulist}"

    def matters(self, shape: RunShape) -> bool:
        return shape.nic

    def examine(self) -> Fact:
        dev = self.device()
        iface = self.ctx.iface
        nodes = cpu_list(self.text("sys/devices/system/node/online"))
        if len(nodes) < 2:
            raise NotApplicable(f"one NUMA node: every CPU is local to {iface}")
        where = self.up(dev, "numa_node")
        if where is None:
            raise Unreadable(f"no numa_node file for {iface}'s device ({dev}) or its parents")
        node = int(read_text(where))
        if node < 0:
            raise Unreadable(f"the firmware gives {iface}'s device no NUMA node ({where}: {node})")
        local = cpu_list(self.text(f"sys/devices/system/node/node{node}/cpulist"))
        ours = self.ours()
        value = f"{iface} on node {node} (CPU {cpu_text(local)}); tailwise's CPU {cpu_text(ours)}"
        readings = {"interface": iface, "node": node, "node_cpus": sorted(local), "nodes": sorted(nodes)}
        remote = ours - local
        if not remote:
            return self.fact(State.OK, value, **readings)
        return self.fact(State.WARN, value, detail=f"CPU {cpu_text(remote)} is remote from {iface}'s node {node}",
                         fix=f"taskset -c {cpu_text(local)} tailwise …", **readings)


class Thp(Knob):
    name = "thp"
    why = ("with transparent huge pages always on, faults compact memory and khugepaged collapses pages: stalls "
           "up to ms (KBNets §3 and Lancet §5 turn THP off)")
    source = "/sys/kernel/mm/transparent_hugepage/{enabled,defrag}"

    def examine(self) -> Fact:
        base = "sys/kernel/mm/transparent_hugepage/"
        enabled, defrag = selected(self.text(base + "enabled")), selected(self.text(base + "defrag"))
        value = f"enabled {enabled}, defrag {defrag}"
        wrong, fixes = [], []
        if enabled == "always":
            wrong.append("every anonymous mapping gets huge pages")
            fixes.append(f"echo madvise | sudo tee /{base}enabled")
        if defrag == "always" and enabled != "never":
            wrong.append("a fault stalls in direct compaction")
            fixes.append(f"echo madvise | sudo tee /{base}defrag")
        if not wrong:
            return self.fact(State.OK, value, enabled=enabled, defrag=defrag)
        return self.fact(State.WARN, value, detail="; ".join(wrong), fix="; ".join(fixes), enabled=enabled, defrag=defrag)


#: struct ethtool_coalesce (linux/ethtool.h) after its cmd: 22 __u32, of which these first 11.
_COALESCE_FIELDS = ("rx_usecs", "rx_frames", "rx_usecs_irq", "rx_frames_irq", "tx_usecs", "tx_frames",
                    "tx_usecs_irq", "tx_frames_irq", "stats_block_usecs", "adaptive_rx", "adaptive_tx")
SIOCETHTOOL = 0x8946
ETHTOOL_GCOALESCE = 0x0E


def ethtool_coalesce(iface: str) -> dict[str, int]:
    """The interface's interrupt coalescing, as `ethtool -c` reads it (SIOCETHTOOL
    ETHTOOL_GCOALESCE: no privilege needed); Unreadable with the reason."""
    buf = ctypes.create_string_buffer(struct.pack("I", ETHTOOL_GCOALESCE), 4 * 23)
    ifreq = struct.pack("16sP", iface.encode()[:15], ctypes.addressof(buf)).ljust(40, b"\0")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            fcntl.ioctl(s.fileno(), SIOCETHTOOL, ifreq)
    except OSError as e:
        what = ("its driver does not report interrupt coalescing" if e.errno == errno.EOPNOTSUPP
                else e.strerror or str(e))
        raise Unreadable(f"ETHTOOL_GCOALESCE on {iface}: {what} (errno {e.errno})") from None
    values = struct.unpack("23I", buf.raw[:92])
    return dict(zip(_COALESCE_FIELDS, values[1:]))


class Coalescing(Knob):
    name = "coalescing"
    why = ("interrupt moderation holds a packet's interrupt for rx-usecs to batch it with others: each packet can "
           "wait that long (KBNets §3 turns it off)")
    source = "ioctl SIOCETHTOOL ETHTOOL_GCOALESCE on IF (what `ethtool -c IF` shows)"
    #: The system call (tests replace it).
    query = staticmethod(ethtool_coalesce)

    def matters(self, shape: RunShape) -> bool:
        return shape.nic

    def examine(self) -> Fact:
        self.device()
        iface = self.ctx.iface
        c = self.query(iface)
        value = (f"{iface}: rx-usecs {c['rx_usecs']}, rx-frames {c['rx_frames']}, adaptive-rx "
                 f"{'on' if c['adaptive_rx'] else 'off'}; tx-usecs {c['tx_usecs']}")
        readings = {"interface": iface, **c}
        if c["adaptive_rx"]:
            detail = "adaptive-rx: the driver stretches the hold with the packet rate"
        elif c["rx_usecs"] > 0 and c["rx_frames"] != 1:
            detail = f"a packet's interrupt waits up to {c['rx_usecs']} µs"
        else:
            return self.fact(State.OK, value, **readings)
        return self.fact(State.WARN, value, detail=detail, fix=f"sudo ethtool -C {iface} adaptive-rx off rx-usecs 0",
                         **readings)


class IrqAffinity(Knob):
    name = "irq-affinity"
    why = ("a NIC interrupt on a core tailwise spins on preempts its thread: steer the queues' interrupts to other "
           "cores of the NIC's node (pyperf system tune; KBNets §4.2 local)")
    source = "/proc/interrupts, /sys/class/net/IF/device/msi_irqs, /proc/irq/N/{smp_affinity_list,effective_affinity_list}"

    def matters(self, shape: RunShape) -> bool:
        return shape.nic

    def examine(self) -> Fact:
        dev = self.device()
        iface = self.ctx.iface
        irqs = self._irqs(dev)
        if not irqs:
            raise Unreadable(f"no interrupt of {iface} in /proc/interrupts or its device's msi_irqs")
        allowed, runs = {}, {}
        for n in sorted(irqs):
            allowed[n] = cpu_list(self.text(f"proc/irq/{n}/smp_affinity_list"))
            runs[n] = cpu_list(self.optional(f"proc/irq/{n}/effective_affinity_list")) or allowed[n]
        value = f"{iface}: " + ", ".join(f"IRQ {n} → CPU {cpu_text(runs[n])}" for n in runs)
        if len({frozenset(a) for a in allowed.values()}) == 1:
            value += f" (allowed {cpu_text(next(iter(allowed.values())))})"
        readings = {"interface": iface, "irqs": {str(n): {"allowed": sorted(allowed[n]), "effective": sorted(runs[n])}
                                                 for n in runs}}
        ours = set(self.ctx.cpus)
        hit = [n for n in runs if runs[n] & ours]
        if not ours:
            return self.fact(State.OK, value, detail="tailwise's threads are not pinned: no CPU of theirs to keep free",
                             **readings)
        if not hit:
            return self.fact(State.OK, value, **readings)
        free = self.online() - ours
        fix = (f"echo {cpu_text(free)} | sudo tee /proc/irq/{{{','.join(map(str, hit))}}}/smp_affinity_list "
               "(with irqbalance stopped)" if free else
               "no CPU is free of tailwise's threads: fewer --threads/--workers, or a machine with more CPUs")
        return self.fact(State.WARN, value, fix=fix, **readings,
                         detail=f"IRQ {','.join(map(str, hit))} of {iface} run on tailwise's CPU {cpu_text(ours)}")

    def _irqs(self, dev: Path) -> set[int]:
        """The device's MSI interrupts (its own or its bus device's) and those /proc/interrupts names
        after the interface, the device or its PCI address."""
        irqs = set()
        msi = self.up(dev, "msi_irqs")
        if msi is not None:
            irqs |= {int(p.name) for p in msi.iterdir() if p.name.isdigit()}
        names = {self.ctx.iface, dev.name} | ({msi.parent.name} if msi is not None else set())
        pattern = re.compile("|".join(rf"(?<![\w]){re.escape(n)}(?![\w])" for n in names if n))
        for line in self.text("proc/interrupts").splitlines()[1:]:
            head, _, rest = line.partition(":")
            if head.strip().isdigit() and pattern.search(rest):
                irqs.add(int(head))
        return irqs


class BusyPoll(Knob):
    name = "busy-poll"
    why = ("net.core.busy_read/busy_poll make blocking socket reads and polls spin on the device queue instead of "
           "sleeping until its interrupt (Lancet's latency agent): information, as --poll spin polls in user space")
    source = "/proc/sys/net/core/{busy_read,busy_poll}"

    def matters(self, shape: RunShape) -> bool:
        return False  # information only: tailwise spins itself, and a server's blocking is its own choice

    def examine(self) -> Fact:
        read, poll = int(self.text("proc/sys/net/core/busy_read")), int(self.text("proc/sys/net/core/busy_poll"))
        value = f"busy_read {read} µs, busy_poll {poll} µs"
        if read or poll:
            return self.fact(State.OK, value, busy_read_us=read, busy_poll_us=poll)
        return self.fact(State.OK, value, detail="off: a blocking read sleeps until the interrupt (information)",
                         fix="sudo sysctl -w net.core.busy_read=50 net.core.busy_poll=50 (for a server here that blocks)",
                         busy_read_us=read, busy_poll_us=poll)


class Clocksource(Knob):
    name = "clocksource"
    why = ("every latency is two clock reads: tsc and kvm-clock are read in the vDSO (~20–40 ns), hpet and acpi_pm "
           "by a system call (µs); a TSC without constant_tsc and nonstop_tsc drifts with the clock or C-states")
    source = "/sys/devices/system/clocksource/clocksource0/{current,available}_clocksource, /proc/cpuinfo flags"

    def examine(self) -> Fact:
        base = "sys/devices/system/clocksource/clocksource0/"
        current = self.text(base + "current_clocksource")
        available = (self.optional(base + "available_clocksource") or "").split()
        flags = None
        for line in self.text("proc/cpuinfo").splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
        tsc = {f: f in flags for f in ("constant_tsc", "nonstop_tsc")} if flags is not None else None
        value = f"{current} (available: {' '.join(available) or '?'})"
        if tsc is not None:
            value += "; TSC " + ", ".join(f if on else f"no {f}" for f, on in tsc.items())
        readings = {"current": current, "available": available, "tsc_flags": tsc}
        wrong, fix = [], None
        if current not in VDSO_CLOCKS:
            wrong.append(f"{current} is read by a system call")
            if "tsc" in available:
                fix = f"echo tsc | sudo tee /{base}current_clocksource"
        if current == "tsc" and tsc is not None and not all(tsc.values()):
            wrong.append("the TSC lacks " + " and ".join(f for f, on in tsc.items() if not on))
        if not wrong:
            return self.fact(State.OK, value, **readings)
        return self.fact(State.WARN, value, detail="; ".join(wrong),
                         fix=fix or "a machine with an invariant TSC (constant_tsc, nonstop_tsc)", **readings)


class Steal(Knob):
    name = "steal"
    why = ("steal is time the hypervisor gave our vCPU to another guest: a request caught in it waits that long, "
           "often ms (KBNets §4.2 measures on cores nothing else uses)")
    source = "/proc/stat (the steal column, read twice over the sample)"

    def examine(self) -> Fact:
        shares = self.sample.shares()
        mine = {c: shares[f"cpu{c}"].steal for c in sorted(self.ours()) if f"cpu{c}" in shares}
        whole = shares["cpu"].steal
        value = f"{whole:.1%} of the CPU time over {self.sample.seconds:g} s"
        if mine:
            value += " (" + ", ".join(f"CPU {c} {s:.1%}" for c, s in mine.items()) + ")"
        readings = {"sample_s": self.sample.seconds, "steal_share": round(whole, 4),
                    "cpus": {str(c): round(s, 4) for c, s in mine.items()}}
        high = {c for c, s in mine.items() if s >= STEAL_SHARE}
        if whole < STEAL_SHARE and not high:
            return self.fact(State.OK, value, **readings)
        return self.fact(State.WARN, value, detail=f"the hypervisor took {max([whole, *mine.values()]):.1%} of a vCPU",
                         fix="a host whose vCPUs are not shared (dedicated or pinned vCPUs), or a quieter time", **readings)


class OtherLoad(Knob):
    name = "other-load"
    why = ("other processes on the cores tailwise uses preempt its threads: KBNets §4.2 isolates the core so that no "
           "other application runs there")
    source = "/proc/stat (busy ticks per CPU, read twice over the sample while tailwise sleeps)"

    def examine(self) -> Fact:
        shares = self.sample.shares()
        mine = {c: shares[f"cpu{c}"].busy for c in sorted(self.ours()) if f"cpu{c}" in shares}
        whole = shares["cpu"].busy
        value = ", ".join(f"CPU {c} {b:.0%} busy" for c, b in mine.items()) + \
            f"; all CPUs {whole:.0%} over {self.sample.seconds:g} s"
        readings = {"sample_s": self.sample.seconds, "busy_share": round(whole, 4),
                    "cpus": {str(c): round(b, 4) for c, b in mine.items()}}
        busy = {c for c, b in mine.items() if b >= BUSY_SHARE}
        if not busy:
            return self.fact(State.OK, value, **readings)
        shown = ", ".join(f"CPU {c} {mine[c]:.0%}" for c in sorted(busy))
        return self.fact(State.WARN, value, detail=f"{shown} busy with other processes' work",
                         fix=f"find it (ps -eo pid,psr,pcpu,comm --sort=-pcpu | head) and move it off CPU "
                             f"{cpu_text(busy)} (taskset -cp), or measure where it is quiet", **readings)


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
