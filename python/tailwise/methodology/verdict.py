"""The verdict of a measurement, one rule in every mode: ``ok``, ``imprecise`` or ``not-measurable``.

A measurement can fail in two different ways, and a user must be able to tell them apart (Lancet,
ATC'19 §4.3, keeps an experiment that "cannot be executed because some of the assumptions are
violated" apart from one that "is not conclusive", reported "along with the collected results so
far"):

* an assumption broke — the load was not offered or not carried, requests failed, the client fell
  behind its schedule by its own doing, the latency was not steady, its correlation never decayed,
  the samples disagree with every request, packets were lost beyond --max-loss, an agent was
  overloaded. The figures then describe something other than the workload asked: **not-measurable**
  (``VALIDITY``: any of these checks failed);
* every assumption held, but the asked percentile's interval is wider than --ci when the run ended
  — at --max-time, stopped early as out of reach, or at the end of --duration. Every interval is
  still sound; it is only wider than asked: **imprecise** (``PRECISION``: sampling, the
  ``confidence`` check, or the client's own stalls, the ``stalls`` check, made it so). A wide
  interval is an answer ("p99 lies between 80 µs and 1.6 ms");
* everything held and the precision was reached: **ok**.

Each cause is judged once: the lateness and the delays that the intervals already carry widen them
(precision), and fail no validity check. A run without --ci (``--duration`` alone) asked for no
precision: it is ok or not-measurable. An engine error or an interrupt keeps ``not-measurable``
(the schedule did not run as asked); their exit statuses (2, 128 + n) say more.

``precision_report`` is the summary's ``precision`` object: what was asked, which reported
percentiles reached it, what made the asked one's width (sampling — with the tail's clustering and
its likely cause — or the client's stalls), and the one change that helps most.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from tailwise.methodology.checks import Check, target_width_ns
from tailwise.spec.precision import Precision
from tailwise.stats.quantiles import Percentile

#: Checks whose failure means an assumption of the measurement broke.
VALIDITY = ("rate", "agents", "errors", "loss", "arrivals", "stationarity", "independence", "consistency")
#: Checks whose failure means only that the asked percentile's interval is wider than --ci.
PRECISION = ("confidence", "stalls")
#: Checks that inform and never fail.
INFORMATION = ("exclusions",)
#: More time is the remedy while it is at most this multiple of the time the run had.
MORE_TIME_MAX = 4.0


class Verdict(str, Enum):
    OK = "ok"
    IMPRECISE = "imprecise"
    NOT_MEASURABLE = "not-measurable"


def verdict_of(checks: list[Check], *, error: str | None = None, interrupted: bool = False) -> Verdict:
    """The verdict from the failed checks (module doc). A check unknown here counts as validity:
    a new check must be placed, never silently ignored."""
    failed = {c.name for c in checks if not c.ok} - set(INFORMATION)
    if error or interrupted or failed - set(PRECISION):
        return Verdict.NOT_MEASURABLE
    return Verdict.IMPRECISE if failed else Verdict.OK


def allowed_width_ns(pc: Percentile, precision: Precision) -> float | None:
    """The width --ci allows percentile ``pc`` (absolute, or relative to its own value)."""
    return target_width_ns(pc.value, precision.ci_ns, precision.ci_rel)


def met(pc: Percentile, precision: Precision) -> bool | None:
    """Whether ``pc``'s interval is as narrow as --ci asks; None when no precision was asked."""
    allowed = allowed_width_ns(pc, precision)
    if precision.ci_ns is None and precision.ci_rel is None:
        return None
    if not pc.supported or allowed is None:
        return False
    return pc.high - pc.low <= allowed


@dataclass(frozen=True)
class Context:
    """What the precision report reads besides the analysis: how long the run measured, what it
    could have had, whether it was --duration, and the host's pauses (engine and target stalls)."""

    measured_s: float
    max_time_s: float
    fixed: bool
    engine_stalls: int = 0
    engine_longest_ns: int = 0
    target_stalls: int = 0
    target_longest_ns: int = 0
    #: The host paused client and target together (analysis.host_pauses' note), or None.
    host_pause: str | None = None
    #: The words of the client's remedy when its stalls dominate (methodology/words.client_words).
    quieter: str | None = None


def _fmt(ns: float | None) -> str:
    if ns is None:
        return "∞"
    if ns >= 1e6:
        return f"{ns / 1e6:,.2f} ms"
    return f"{ns / 1e3:,.1f} µs"


def _asked_words(precision: Precision) -> str:
    if precision.ci_ns is not None:
        return f"±{_fmt(precision.ci_ns / 2)} (--ci {_fmt(precision.ci_ns)})"
    return f"a width of {precision.ci_rel:.0%} of its value (--ci {precision.ci_rel:.0%})"


def precision_report(percentiles: list[Percentile], target: Percentile | None, precision: Precision,
                     independence: dict, ctx: Context) -> dict:
    """The summary's ``precision`` object (module doc)."""
    asked = precision.ci_ns is not None or precision.ci_rel is not None
    rows = []
    for pc in percentiles:
        allowed = allowed_width_ns(pc, precision) if asked else None
        width = pc.high - pc.low if pc.supported else None
        rows.append({"p": pc.p, "width_ns": width, "allowed_ns": allowed, "met": met(pc, precision)})
    doc = {
        "asked": {"percentile": precision.percentile, "ci_ns": precision.ci_ns, "ci_rel": precision.ci_rel,
                  "confidence": precision.confidence},
        "reached": None, "percentiles": rows, "width": None, "remedy": None, "detail": None,
    }
    if not asked or target is None:
        doc["detail"] = "no precision was asked (no --ci): every interval is reported as measured"
        return doc
    reached = bool(met(target, precision))
    doc["reached"] = reached
    width = _width(target, independence.get(target.p), allowed_width_ns(target, precision), ctx)
    doc["width"] = width
    met_ps = [r["p"] for r in rows if r["met"]]
    missed = [r["p"] for r in rows if r["met"] is False]
    which = (f"{_ps(met_ps)} met it" + (f", {_ps(missed)} did not" if missed else "") if met_ps else
             f"none of {_ps(missed)} met it")
    if reached:
        doc["detail"] = f"p{target.p:g} reached {_asked_words(precision)}; {which}"
        return doc
    remedy = _remedy(target, width, rows, precision, ctx)
    doc["remedy"] = remedy
    span = (f"[{_fmt(target.low)}, {_fmt(target.high)}]" if target.supported else
            f"≥ {_fmt(target.lower_bound)} (no upper bound)" if target.lower_bound is not None else "unbounded")
    doc["detail"] = (f"p{target.p:g} {span} is wider than {_asked_words(precision)}; {which}; the width: "
                     f"{width['words']}; what helps most: {remedy['words']}")
    return doc


def _ps(ps: list[float]) -> str:
    return "/".join(f"p{p:g}" for p in ps)


def _width(pc: Percentile, ind, allowed: float | None, ctx: Context) -> dict:
    """What made the asked percentile's width: sampling (its clustering, and a likely cause) or the
    client's own stalls (the widening of its low end, stats/bounds.py) — theirs when sampling alone
    is within what is allowed, or their widening alone is not, as the stalls check judges."""
    tau = getattr(ind, "tau", None)
    n_eff = pc.n_effective
    sampling = (pc.sampling_high - pc.sampling_low if pc.sampling_low is not None and pc.sampling_high is not None
                else None)
    widening = pc.widening if pc.supported else None
    if not pc.supported:
        dominated = "sampling"
        what = (f"too few effective samples to bound p{pc.p:g} from above (n_eff ≈ {n_eff:,.0f}, "
                f"{pc.samples_needed:,} needed)" if n_eff is not None and pc.samples_needed else
                f"too few effective samples to bound p{pc.p:g}")
    elif widening and sampling is not None and allowed is not None and (sampling <= allowed or widening >= allowed):
        dominated = "client-stalls"
        what = (f"the client's own stalls: they widen the low end by {_fmt(widening)} (sampling alone "
                f"{_fmt(sampling)})")
    else:
        dominated = "sampling"
        what = f"sampling ({_fmt(sampling)} from n_eff ≈ {n_eff:,.0f})" if n_eff is not None else "sampling"
        if widening and sampling and widening >= 0.01 * sampling:  # a widening of a few ns says nothing
            what += f", plus {_fmt(widening)} from the client's own stalls"
    clustered = tau is not None and tau >= 2.0
    cause = None
    if clustered:
        what += f"; the tail comes in clusters (τ = {tau:,.1f}: each {tau:,.1f} samples count as one)"
        if ctx.engine_stalls or ctx.target_stalls or ctx.host_pause:
            cause = "host-pauses"
            parts = []
            if ctx.engine_stalls:
                parts.append(f"the engine stalled {ctx.engine_stalls:,} times ≥ 200 µs, longest "
                             f"{_fmt(ctx.engine_longest_ns)}")
            if ctx.target_stalls:
                parts.append(f"the built-in server {ctx.target_stalls:,} times, longest {_fmt(ctx.target_longest_ns)}")
            what += ", likely host pauses (" + "; ".join(parts or ["the client and the target paused together"]) + ")"
        else:
            cause = "queueing"
    return {"dominated_by": dominated, "sampling_ns": sampling, "widening_ns": widening or None,
            "tau": tau, "n_effective": n_eff, "cause": cause, "words": what}


def _remedy(pc: Percentile, width: dict, rows: list[dict], precision: Precision, ctx: Context) -> dict:
    """The one change that helps most: more time when sampling dominates and it fits; else a lower
    percentile that met the precision; else a wider --ci; a quieter host when the client's stalls
    dominate (more samples do not narrow that part)."""
    allowed = allowed_width_ns(pc, precision)
    flag = "--duration" if ctx.fixed else "--max-time"
    if width["dominated_by"] == "client-stalls":
        return {"kind": "quieter-host",
                "words": ctx.quieter or "a quieter host for the client (see `tailwise doctor`)"}
    grow = None
    if pc.supported and allowed and width["sampling_ns"]:
        room = allowed - (width["widening_ns"] or 0.0)
        grow = (width["sampling_ns"] / room) ** 2 if room > 0 else None  # width shrinks as 1/√n
    elif not pc.supported and pc.samples_needed and pc.n_effective:
        grow = pc.samples_needed / pc.n_effective * 1.2
    needed_s = ctx.measured_s * grow * 1.1 if grow is not None else None
    if needed_s is not None and 0 < needed_s <= MORE_TIME_MAX * max(ctx.measured_s, ctx.max_time_s):
        seconds = math.ceil(needed_s)
        return {"kind": "more-time", "words": f"more time with the same load: {flag} {seconds}s (about {seconds:,} s)"}
    lower = [r["p"] for r in rows if r["met"] and r["p"] < pc.p]
    if lower:
        p = max(lower)
        return {"kind": "lower-percentile", "words": f"a lower percentile: p{p:g} met it (--percentile {p:g})"}
    if pc.supported and pc.value:
        rel = (pc.high - pc.low) / pc.value
        ci = f"{math.ceil(rel * 100):d}%" if precision.ci_rel is not None else _fmt(pc.high - pc.low).replace(" ", "")
        return {"kind": "wider-ci", "words": f"a wider --ci: this run's p{pc.p:g} interval is --ci {ci} wide"}
    return {"kind": "doctor", "words": f"a quieter host ({ctx.quieter or 'see `tailwise doctor`'}) or a lower --percentile"}
