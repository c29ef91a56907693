"""Parsing of the quantities users type — rates (``50k``, ``1.5M``), times (``3``, ``500ms``,
``2m``) and sizes (``512Mi``, ``2G``) — in one place, for every option and every workload file."""

from __future__ import annotations

import math
import re

from tailwise import _core
from tailwise.errors import InputError

_NUMBER = r"([+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
_RATE = re.compile(rf"^\s*{_NUMBER}\s*([kKM]?)\s*(?:rps|/s|req/s)?\s*$")
_RATE_SCALE = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6}
_TIME = re.compile(rf"^\s*{_NUMBER}\s*(\S*)\s*$")
UNITS_TEXT = "ns, us (µs), ms, s, m, h"
_SIZE = re.compile(rf"^\s*{_NUMBER}\s*([kKMGT]?)(i?)[bB]?\s*$")
#: Sizes as Kubernetes writes them (its resource quantities): Ki, Mi, Gi, Ti are powers of 1024,
#: k/K, M, G, T powers of 1000; a trailing B is allowed (MiB, GB).
_SIZE_POWER = {"": 0, "k": 1, "K": 1, "M": 2, "G": 3, "T": 4}


def parse_rate(text: str | float, *, what: str = "--rate") -> float:
    """``5000``, ``50k``, ``1.5M`` → requests per second (> 0)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = _RATE.match(str(text))
        if not m:
            hint = " (M for millions)" if str(text).rstrip().endswith("m") else ""
            raise InputError(f"{what} {text} is not a rate{hint}",
                             f"write requests per second, e.g. {what} 5000, {what} 50k or {what} 1.5M")
        value = float(m.group(1)) * _RATE_SCALE[m.group(2)]
    if not math.isfinite(value):
        raise InputError(f"{what} {text} is not a finite rate", f"give e.g. {what} 5000")
    if value <= 0:
        raise InputError(f"{what} {text} must be positive", f"give requests per second above zero, e.g. {what} 5000")
    return value


def parse_size(text: str, *, what: str = "--max-memory") -> int:
    """``512Mi`` (MiB), ``2Gi``, ``2G`` (10⁹), ``1500000000`` (bytes) → bytes (> 0)."""
    m = _SIZE.match(str(text))
    if not m or (m.group(3) and not m.group(2)):
        raise InputError(f"{what} {text} is not a size",
                         f"write bytes with a unit as Kubernetes does, e.g. {what} 512Mi, {what} 2Gi or {what} 2G")
    number, unit, binary = m.groups()
    value = float(number) * (1024 if binary else 1000) ** _SIZE_POWER[unit]
    if not math.isfinite(value) or value < 1:
        raise InputError(f"{what} {text} must be positive", f"give e.g. {what} 512Mi")
    return int(value)


def fmt_bytes(n: int) -> str:
    """A size in bytes as people read it: MiB below a GiB, else GiB."""
    if n < 1 << 30:
        return f"{n / (1 << 20):,.0f} MiB"
    return f"{n / (1 << 30):,.2f} GiB"


def parse_time_ns(text: str | float, *, what: str = "--duration", allow_zero: bool = False,
                  unit_required: bool = False) -> int:
    """A time as users type it → integer nanoseconds: ``3`` (plain seconds), ``3s``, ``500ms``,
    ``10us``/``10µs``, ``250ns``, ``2m``, ``1h``; above zero (or zero with ``allow_zero``).
    ``unit_required``: a plain number is refused (where seconds would be absurd: ``--late 50``).
    The units are the data plane's own (load/dist.rs ``parse_duration_ns``, through ``fixed:T``): one
    parser for service times, options and workload files."""
    m = _TIME.match(str(text))
    if not m:
        raise InputError(f"{what} {text} is not a time", f"write a number and a unit ({UNITS_TEXT}), e.g. 3s or 500ms")
    number, unit = m.groups()
    if float(number) < 0:
        raise InputError(f"{what} {text} must be positive", "give a time above zero, e.g. 3s or 500ms")
    if not unit:
        if unit_required and float(number) != 0:
            raise InputError(f"{what} {text} has no unit", f"write e.g. {what} {number}us or {number}ms ({UNITS_TEXT})")
        unit = "s"
    try:
        _, ns = _core.parse_dist(f"fixed:{number}{unit}")
    except InputError as e:
        raise InputError(f"{what} {text}: {e.problem}", e.remedy or f"write a number and a unit ({UNITS_TEXT})") from None
    if ns == 0 and not allow_zero:
        raise InputError(f"{what} {text} must be positive", "give a time above zero, e.g. 3s or 500ms")
    return int(round(ns))


def parse_dist(spec: str, *, what: str = "--service") -> tuple[str, float]:
    """Validate a distribution (``fixed:10us`` …); returns (canonical spec, mean ns)."""
    try:
        return _core.parse_dist(spec)
    except InputError as e:
        raise InputError(f"{what} {spec}: {e.problem}", e.remedy) from None


def parse_arrival(text: str) -> str:
    """Validate an inter-arrival process (exp, fixed, uniform, lognormal:SIGMA); its canonical name."""
    try:
        return _core.parse_arrival(str(text))
    except InputError as e:
        raise InputError(f"--arrival {text}: {e.problem}", e.remedy) from None


def fmt_ns(v: float | None) -> str:
    """A time in ns as people read it: ns, µs, ms or s, with the digits that matter."""
    if v is None:
        return "—"
    if v < 1_000:
        return f"{v:.0f} ns"
    if v < 1_000_000:
        return f"{v / 1e3:.1f} µs"
    if v < 1_000_000_000:
        return f"{v / 1e6:.2f} ms"
    return f"{v / 1e9:.2f} s"
