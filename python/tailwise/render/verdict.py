"""The verdict of a run in one sentence: what it means, the most likely cause — the client, the
host or the target (or the run's length, or tailwise itself) — and the fix, read from its summary:
the checks that failed and their remedies, the precision report, the host's pauses, the error.

Who is behind it is read from the summary's fields (the rates and counters, the host's pauses, the
precision report's width), never from a message's words; the fix is the failed check's remedy (or
the precision report's), quoted as methodology/words.py wrote it."""

from __future__ import annotations

from dataclasses import dataclass

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


def _paused(s: dict) -> bool:
    """The host paused the client and the target together (analysis' host_pauses)."""
    return bool((s.get("host_pauses") or {}).get("paused_both"))


def _rate_cause(s: dict) -> tuple[str, str | None]:
    """Whose the shortfall of the rate check is, from the rates and counters (as the check itself
    judges it: requests never sent for want of a free slot are the target's, issue 32)."""
    r, c = s.get("rate") or {}, s.get("counters") or {}
    target, sent, done = r.get("target_rps") or 0.0, r.get("achieved_rps") or 0.0, r.get("completed_rps") or 0.0
    if not sent or not target:
        return "no request was sent", "target"
    from tailwise.methodology.checks import LITTLE_HEADROOM, little_need

    cfg, response = s.get("config") or {}, (s.get("methodology") or {}).get("response_mean_ns")
    slots = (cfg.get("conns") or 0) * (cfg.get("outstanding") or 0)
    if response and slots and slots < little_need(target, response) * LITTLE_HEADROOM:
        return ("too few requests in flight for this rate (Little's law): the client ran a closed loop",
                "client")
    if sent > target:
        return "more requests were sent than scheduled", "tailwise"
    missing = (target - sent) * (r.get("duration_s") or 0.0)
    if missing and (c.get("never_sent") or 0) >= 0.5 * missing:
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


def check_cause(ch: dict, s: dict) -> Cause:
    """What a failed check means and who is most likely behind it, from the summary's fields (the
    rates and counters, the host's pauses, the precision report): never from a message's words.
    The fix is the check's remedy, quoted."""
    name = ch["name"]
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
        return precision_cause(s) or Cause(f"the {name} check failed", name, None, ch.get("remedy"))
    else:
        what, who = f"the {name} check failed", None
    return Cause(what, name, who, ch.get("remedy"))


def precision_cause(s: dict) -> Cause | None:
    """Why the asked percentile's interval is wider than --ci (an imprecise run): the client's own
    stalls, the host's pauses, the target's clustered tail, or too few samples yet."""
    pr = s.get("precision") or {}
    width, remedy = pr.get("width") or {}, (pr.get("remedy") or {}).get("words")
    if not width:
        return None
    asked = pr.get("asked") or {}
    what = f"p{asked.get('percentile', 99):g}'s interval is wider than asked"
    if width.get("dominated_by") == "client-stalls":
        return Cause(what + ": the client's own stalls widen it", "stalls", "client", remedy)
    if width.get("cause") == "host-pauses":
        return Cause(what + ": its tail comes in clusters, with the host's pauses", "confidence", "host", remedy)
    if width.get("cause") == "queueing":
        return Cause(what + ": its tail comes in clusters (queueing)", "confidence", "target", remedy)
    return Cause(what + ": too few effective samples", "confidence", "run", remedy)


def cause_of(s: dict) -> Cause | None:
    """The most likely cause of a run's verdict; None for ok."""
    if s.get("interrupted"):
        return Cause("the run was interrupted before it concluded", None, None, "run it to its end")
    if s.get("error"):
        answered = (s.get("counters") or {}).get("received")
        return Cause(f"the run stopped early: {s['error']}", None, "target" if answered == 0 else None, None)
    from tailwise.methodology.verdict import INFORMATION, PRECISION, VALIDITY

    failed = {ch["name"]: ch for ch in s.get("checks") or [] if not ch["ok"]}
    # The first validity check in the verdict's own order: what the load did comes first.
    for name in VALIDITY:
        if name in failed:
            return check_cause(failed[name], s)
    for name, ch in failed.items():
        if name not in (*PRECISION, *INFORMATION):  # a check unknown here: the verdict counts it as validity
            return check_cause(ch, s)
    if s.get("verdict") == "imprecise":
        return precision_cause(s) or (check_cause(next(iter(failed.values())), s) if failed else None)
    return None


def verdict_sentence(s: dict) -> str:
    """The verdict in one sentence: what it means and, for a run that is not ok, its most likely
    cause (``cause_of``) with the fix."""
    verdict = s.get("verdict")
    pr = s.get("precision") or {}
    if verdict == "ok":
        asked = pr.get("asked") or {}
        how = (f"p{asked.get('percentile', 99):g}'s interval is as narrow as asked" if pr.get("reached") and asked
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
