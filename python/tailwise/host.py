"""Metadata of the machine a result was measured on (as pyperf attaches to its results)."""

from __future__ import annotations

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
