"""Parsing of the quantities users type: rates (``50k``), durations (``3``, ``500ms``)."""

from __future__ import annotations

import math
import re

from tailwise import _core
from tailwise.errors import InputError

_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmM]?)\s*(?:rps|/s)?\s*$")
_SCALE = {"": 1.0, "k": 1e3, "m": 1e6}


def parse_rate(text: str | float) -> float:
    """``5000``, ``50k``, ``1.5M`` → requests per second (> 0)."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        m = _RATE.match(str(text))
        if not m:
            raise InputError(f"rate '{text}' is not a number", "write requests per second, e.g. --rate 5000 or --rate 50k")
        value = float(m.group(1)) * _SCALE[m.group(2).lower()]
    if not (value > 0 and math.isfinite(value)):
        raise InputError(f"rate {text} must be above zero", "give a positive rate, e.g. --rate 5000")
    return value


def parse_time_ns(text: str | float, *, default_unit: str = "s", what: str = "duration", allow_zero: bool = False) -> int:
    """``3`` (in ``default_unit``), ``3s``, ``500ms``, ``10us`` → integer nanoseconds (> 0, or ≥ 0
    with ``allow_zero``)."""
    t = str(text).strip()
    if re.fullmatch(r"[0-9]*\.?[0-9]+", t):
        t += default_unit
    try:
        _, ns = _core.parse_dist(f"fixed:{t}")
    except ValueError as e:
        raise InputError(f"{what} '{text}' is not a time ({e})", "write e.g. 3s, 500ms or 10us") from None
    if not (ns > 0 or (allow_zero and ns == 0)):
        raise InputError(f"{what} '{text}' must be above zero", "give a positive time, e.g. 3s")
    return int(round(ns))


def parse_dist(spec: str, *, what: str = "--service") -> tuple[str, float]:
    """Validate a distribution (``fixed:10us`` …); returns (canonical spec, mean ns)."""
    try:
        return _core.parse_dist(spec)
    except ValueError as e:
        raise InputError(f"{what} {spec}: {e}") from None


def parse_arrival(text: str) -> str:
    """Validate an inter-arrival process (exp, fixed, uniform, lognormal:SIGMA); its canonical name."""
    try:
        return _core.parse_arrival(str(text))
    except ValueError as e:
        problem, _, remedy = str(e).partition(": use ")
        raise InputError(f"--arrival {text}: {problem}", f"use {remedy}" if remedy else "") from None
