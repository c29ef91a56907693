"""The self-correcting methodology (Lancet §4.3, done completely): the coordinator decides
warm-up, duration, sampling and sample count, and answers with percentiles and their confidence
intervals or with "not measurable" and every failed check.

The names below load on first use (PEP 562): importing a light module of this package
(``remedies``' `Setting`) must not load the methodology's modules before the first request
(measure/point._drive imports them once the engine has started)."""

from __future__ import annotations

import importlib

#: Each name this package offers, and the module that defines it.
_WHERE = {"analyse": "analysis", "AnalysisInput": "plan", "RunPlan": "plan", "Check": "checks",
          "Controller": "controller", "Analysis": "result", "Precision": None}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _WHERE[name]
    if module is None:
        from tailwise.spec.precision import Precision
        return Precision
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
