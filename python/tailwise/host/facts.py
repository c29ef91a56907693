"""Metadata of the machine a result was measured on (as pyperf attaches to its results)."""

from __future__ import annotations

import ctypes
import os
import platform
import socket
from pathlib import Path


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def cpu_model() -> str | None:
    text = _read("/proc/cpuinfo") or ""
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def steal_ticks() -> int | None:
    """Total steal time (USER_HZ ticks) from /proc/stat: time the hypervisor took from our vCPUs."""
    text = _read("/proc/stat") or ""
    for line in text.splitlines():
        if line.startswith("cpu "):
            fields = line.split()
            return int(fields[8]) if len(fields) > 8 else None
    return None


def host_info() -> dict:
    return {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "cpu_model": cpu_model(),
        "cores": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource"),
        "python": platform.python_version(),
    }


def cpu_list(text: str | None) -> set[int]:
    """A kernel CPU list ("0-2,5") as a set; empty for None or ""."""
    cpus: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        a, _, b = part.partition("-")
        cpus.update(range(int(a), int(b or a) + 1))
    return cpus


def pinned_cpus(threads: int, workers: int) -> set[int]:
    """The CPUs the engine threads (from the highest allowed CPU down) and the built-in server's
    workers (from the lowest up) pin themselves to (engine/control.rs, server/mod.rs)."""
    cpus = sorted(os.sched_getaffinity(0))
    return {cpus[len(cpus) - 1 - (t % len(cpus))] for t in range(threads)} | {cpus[w % len(cpus)] for w in range(workers)}


def isolated_cpus() -> set[int]:
    """The CPUs the kernel keeps other tasks off (isolcpus)."""
    return cpu_list(_read("/sys/devices/system/cpu/isolated"))


#: A listening socket's state in /proc/net/{tcp,udp}[6] (include/net/tcp_states.h): a TCP socket
#: in LISTEN (0A), a UDP socket bound but not connected (07, TCP_CLOSE) — a UDP server's.
_LISTENING = {"tcp": "0A", "udp": "07"}


def listener_cpus(port: int, proto: str = "tcp") -> set[int] | None:
    """The CPUs the process listening on ``port`` (TCP, or UDP with ``proto="udp"``) on this host may
    run on (its affinity), or None when it cannot be found or read: a loopback target's own pinning,
    so that a remedy does not ask for what is already so."""
    inodes = set()
    for table in (f"/proc/net/{proto}", f"/proc/net/{proto}6"):
        for line in (_read(table) or "").splitlines()[1:]:
            f = line.split()
            # local_address is HEXIP:HEXPORT, then rem_address, then the state.
            if len(f) > 9 and f[3] == _LISTENING[proto] and int(f[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{f[9]}]")
    if not inodes:
        return None
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            if any(os.readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                return set(os.sched_getaffinity(int(pid)))
        except OSError:
            continue
    return None


def restrict_cpus(cpus: set[int]) -> None:
    """Run every thread of this process on ``cpus`` only, and the threads started after (they
    inherit it): an agent's engine pins its threads within them (``--cpus``)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:
            pass  # a thread that ended meanwhile


#: cgroup v1 writes "no limit" as the largest page count in bytes (~9.2e18); anything this large is none.
_V1_UNLIMITED = 1 << 60


def cgroup_memory_max(root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup") -> int | None:
    """The memory this process's cgroup may use, in bytes, or None where none is set: the least
    limit of its cgroup and of those above it (a limit on any ancestor holds too). cgroup v2:
    ``memory.max`` ("max": none; Documentation/admin-guide/cgroup-v2.rst); where the memory
    controller is still on v1 (a hybrid host), ``memory.limit_in_bytes`` under ``memory/``. In a
    container with its own cgroup namespace /proc/self/cgroup says "0::/", and the container's
    limit is the root's file."""
    found = []
    for line in (_read(proc_cgroup) or "").splitlines():
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if line.startswith("0::"):
            found.append((Path(root), path, "memory.max"))
        elif "memory" in controllers.split(","):
            found.append((Path(root) / "memory", path, "memory.limit_in_bytes"))
    limits = []
    for base, path, name in found:
        here = base / path.strip().lstrip("/")
        while base == here or base in here.parents:
            value = _read(str(here / name))
            if value is not None and value.isdigit() and int(value) < _V1_UNLIMITED:
                limits.append(int(value))
            here = here.parent
    return min(limits) if limits else None


#: mallopt(3)'s parameter (glibc's malloc.h) and glibc's own default for it: blocks this large are
#: mmap'ed, and unmapped when freed.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 128 * 1024


def fix_mmap_threshold() -> bool:
    """Hold glibc's mmap threshold at its default, 128 KiB, for the process's life (mallopt(3):
    setting M_MMAP_THRESHOLD turns off its dynamic raise). glibc raises it to the size of each
    mmap'ed block freed, up to 32 MiB: an agent's batches of rows (megabytes, taken and handed on
    every second from threads of their own) then come from the heaps of several arenas, whose
    freed pages stay resident — the agent crept past its --max-memory holding 8 MiB of rows
    (bench/agents/memory.py). Blocks below 128 KiB (the engine's 64 KiB sample chunks) are served
    as before. False where the C library has no mallopt (musl)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
