"""The verdict of a run in one sentence: what it means, the most likely cause — the client, the
host or the target (or the run's length, or tailwise itself) — and the fix, read from its summary:
the checks that failed and their remedies, the precision report, the host's pauses, the error.

Who is behind it is read from the summary's fields (the rates and counters, the host's pauses, the
precision report's width), never from a message's words; the fix is the failed check's remedy (or
the precision report's), quoted as methodology/words.py wrote it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tailwise.results.documents.methodology import Check
    from tailwise.results.documents.run import Summary

#: Who is most likely behind a verdict, as the sentence names them.
WHO = {
    "client": "the client",
    "host": "the host (its pauses reach client and target alike)",
    "target": "the target",
    "run": "too few samples in the time the run had",
    "tailwise": "tailwise itself",
}



@dataclass(frozen=True)
class Cause:
    """Why a run got its verdict: what went wrong (``what``), the check that saw it, who is most
    likely behind it (a key of ``WHO``, or None when nothing says) and the fix in words."""

    what: str
    check: str | None
    who: str | None
    fix: str | None


def _paused(s: Summary) -> bool:
    """The host paused the client and the target together (analysis' host_pauses)."""
    return bool(s.host_pauses and s.host_pauses.paused_both)


def _rate_cause(s: Summary) -> tuple[str, str | None]:
    """Whose the shortfall of the rate check is, from the rates and counters (as the check itself
    judges it: requests never sent for want of a free slot are the target's, issue 32)."""
    r, c = s.rate, s.counters
    target, sent, done = r.target_rps or 0.0, r.achieved_rps or 0.0, r.completed_rps or 0.0
    if not sent or not target:
        return "no request was sent", "target"
    from tailwise.methodology.checks import LITTLE_HEADROOM, little_need

    response = s.methodology.response_mean_ns
    slots = (s.config.conns or 0) * (s.config.outstanding or 0)
    if response and slots and slots < little_need(target, response) * LITTLE_HEADROOM:
        return ("too few requests in flight for this rate (Little's law): the client ran a closed loop",
                "client")
    if sent > target:
        return "more requests were sent than scheduled", "tailwise"
    missing = (target - sent) * (r.duration_s or 0.0)
    if missing and (c.never_sent or 0) >= 0.5 * missing:
        return "the target held every slot of the client: requests waited unsent", "target"
    if sent - done > target - sent:
        return "the target did not keep up with the load asked", "target"
    return "the client did not send the load asked", "client"


#: What a failed validity check means, and who is most likely behind it, when the check alone says.
MEANS = {
    "agents": ("an agent could not send its share on schedule", "client"),
    "errors": ("the target failed or timed out requests", "target"),
    "loss": ("more packets were lost than --max-loss allows (the network function or the path)", "target"),
    "arrivals": ("the client did not send on its schedule", "client"),
    "consistency": ("the samples disagree with every request", "tailwise"),
}


def check_cause(ch: Check, s: Summary) -> Cause:
    """What a failed check means and who is most likely behind it, from the summary's fields (the
    rates and counters, the host's pauses, the precision report): never from a message's words.
    The fix is the check's remedy, quoted."""
    name = ch.name
    if name == "rate":
        what, who = _rate_cause(s)
    elif name in MEANS:
        what, who = MEANS[name]
    elif name == "stationarity":
        what, who = "the latency was not steady during the run", "host" if _paused(s) else "target"
    elif name == "independence":
        what = "the samples stayed correlated through the run, so no interval can be trusted"
        who = "host" if _paused(s) else "target"
    elif name in ("confidence", "stalls"):
        return precision_cause(s) or Cause(f"the {name} check failed", name, None, ch.remedy)
    else:
        what, who = f"the {name} check failed", None
    return Cause(what, name, who, ch.remedy)


def precision_cause(s: Summary) -> Cause | None:
    """Why the asked percentile's interval is wider than --ci (an imprecise run): the client's own
    stalls, the host's pauses, the target's clustered tail, or too few samples yet."""
    pr = s.precision
    if pr is None or pr.width is None:
        return None
    width, remedy = pr.width, pr.remedy.words if pr.remedy else None
    what = f"p{pr.asked.percentile:g}'s interval is wider than asked"
    if width.dominated_by == "client-stalls":
        return Cause(what + ": the client's own stalls widen it", "stalls", "client", remedy)
    if width.cause == "host-pauses":
        return Cause(what + ": its tail comes in clusters, with the host's pauses", "confidence", "host", remedy)
    if width.cause == "queueing":
        return Cause(what + ": its tail comes in clusters (queueing)", "confidence", "target", remedy)
    return Cause(what + ": too few effective samples", "confidence", "run", remedy)


def cause_of(s: Summary) -> Cause | None:
    """The most likely cause of a run's verdict; None for ok."""
    if s.interrupted:
        return Cause("the run was interrupted before it concluded", None, None, "run it to its end")
    if s.error:
        answered = s.counters.received
        return Cause(f"the run stopped early: {s.error}", None, "target" if answered == 0 else None, None)
    from tailwise.methodology.verdict import INFORMATION, PRECISION, VALIDITY

    failed = {ch.name: ch for ch in s.checks if not ch.ok}
    # The first validity check in the verdict's own order: what the load did comes first.
    for name in VALIDITY:
        if name in failed:
            return check_cause(failed[name], s)
    for name, ch in failed.items():
        if name not in (*PRECISION, *INFORMATION):  # a check unknown here: the verdict counts it as validity
            return check_cause(ch, s)
    if s.verdict == "imprecise":
        return precision_cause(s) or (check_cause(next(iter(failed.values())), s) if failed else None)
    return None


def verdict_sentence(s: Summary) -> str:
    """The verdict in one sentence: what it means and, for a run that is not ok, its most likely
    cause (``cause_of``) with the fix."""
    verdict = s.verdict
    pr = s.precision
    if verdict == "ok":
        how = (f"p{pr.asked.percentile:g}'s interval is as narrow as asked" if pr and pr.reached
               else "no --ci was asked: each interval is as measured")
        return f"ok — every check passed and {how}; the figures below are the target's latency at this load"
    means = ("valid, every interval sound but wider than asked" if verdict == "imprecise"
             else "the figures below do not describe this load")
    cause = cause_of(s)
    if cause is None:
        return f"{verdict} — {means}"
    seen = f" ({cause.check})" if cause.check else ""
    who = f"; most likely {WHO[cause.who]}" if cause.who else ""
    return f"{verdict} — {means}: {cause.what}{seen}{who}" + (f" — fix: {cause.fix}" if cause.fix else "")
