"""A sweep's search and conclusions, pure functions of the points measured: which load next, the
knee of the latency–load curve, saturation, capacity, and the highest load that meets an SLO.

The plan and the search are pure functions of the points measured so far (`next_index`), so a
sweep that was killed resumes by reading its directory back and asking the same question again:
the same points come out, none twice.

**Knee mode** (no ``--slo``) measures the loads in increasing order and stops at the first point
where the target saturates: the rate check fails (the load was not sent or not completed on time;
against the built-in server, not where its own stalls explain the missing replies while it was
not busy — `host_shortfall`),
requests time out or fail, or the latency diverges — the median above ``DIVERGE`` times the lowest
load's, which an M/M/1 queue reaches at ρ = 0.95 (its mean sojourn is S/(1−ρ)). The knee of the
curve of the chosen percentile against load is found with Kneedle (Satopää, Albrecht, Irwin and
Raghavan, "Finding a 'Kneedle' in a Haystack", ICDCS Workshops 2011): on the unsaturated points
whose percentile has a CI, ended by the first saturated point's every-request figure (never the
knee itself), both axes scaled to [0, 1], the point farthest from the curve's chord — for a convex
rising curve the largest x − y; the knee's range is the measured loads around those whose CIs
allow the knee (`knee_candidates`). The server's capacity is the highest completed rate at a
point where the server (not the client's window) saturated: an
open-loop client beyond capacity measures exactly the server's throughput — a lower bound only,
said so, where that point completed what it was offered (its latency diverged first).

**SLO mode** (``--slo 'p99<200us'``) bisects the load grid. Each point's outcome is *met* (the
percentile's whole confidence interval meets the SLO, threshold.py, and the target did not
saturate), *not met* (the whole CI misses it, or the target saturated) or *undetermined* (the CI
straddles the limit or the samples cannot bound the percentile, or the client's own window was
the limit): an undetermined point is never counted as failing. An inconclusive CI is measured
again, at most ``MAX_ATTEMPTS`` times in all (see there). The lowest load is measured first (if
its whole CI misses, no load meets), then the highest, then the middle of the bracket between the
highest load met and the lowest not met above it, until it is one grid step wide; undetermined
points split the bracket, and the search goes on either side of them. The answer is the highest
load measured to meet the SLO, with its CI — or, without one, "not met at any load measured" (only
when the lowest load's whole CI misses) or "undetermined" with the reason.

**The client's window.** By Little's law (L = λW) a client with ``conns × outstanding`` slots
completes at most ``slots / response time`` requests per second. A sweep sizes that window for
its highest load when ``--conns``/``--outstanding`` are not given (`size_window`) and refuses a
given window that cannot hold it; a point that saturates while the window was full and the server
could have been starved by it (`client_limited`) is the client's limit, never the server's
capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tailwise.errors import InputError
from tailwise.results.documents.run import Summary, ThresholdResult
from tailwise.results.documents.sweep import Attempt, Disturbed, Knee, Point, Saturation, SloAnswer
from tailwise.spec.threshold import FAIL, PASS, Threshold
from tailwise.spec.units import parse_rate
from tailwise.spec.workload import DEFAULTS

STEPS = ("linear", "log")
#: Latency diverges when the median exceeds this multiple of the lowest load's median.
DIVERGE = 20.0
#: Requests sent this far short of those the schedule made due, or replies this far short of the
#: requests sent, saturate a point even when the rate check's own tolerance (shorter runs: wider)
#: would let it pass. Judged against the schedule's own draw, not the target rate: with Poisson
#: arrivals a 1 s point at 1k req/s draws 1,000 ± 32 requests, and 5 % below the target is then
#: chance one time in 18 (seen in a test here: "achieved 949 req/s of 1,000", a knee at an idle server).
SHORTFALL = 0.05
#: A sweep measures at most this many loads.
MAX_POINTS = 200
#: SLO mode measures a load whose CI is inconclusive at most this many times in all. A CI pass
#: is wrong with probability at most (1 − confidence)/2 (its upper tail) per attempt, so two
#: attempts keep the chance of a false "met" within 1 − confidence, the level every percentile is
#: stated at; and a second attempt clears a transient disturbance (a host stall), while a load whose
#: percentile truly lies at the limit stays inconclusive however often it is measured.
MAX_ATTEMPTS = 2
#: The response time a sweep assumes when it sizes the client's window (Little's law): tailwise is
#: for µs-scale services, whose round trip on loopback here is 20–70 µs under load; 500 µs is 7–25×
#: that — a point whose median reaches 20× the lowest load's counts as diverging anyway — and the
#: window gets LITTLE_HEADROOM (2×) on top for Poisson bursts, as the rate check asks.
ASSUMED_RESPONSE_NS = 500_000
#: Connections a sized window opens at most (file descriptors, one engine loop); beyond, more
#: requests in flight per connection.
MAX_CONNS = 256
#: Default window of `run` (spec/workload.py).
DEFAULT_CONNS, DEFAULT_OUTSTANDING = DEFAULTS["conns"], DEFAULTS["outstanding"]


def parse_rates(text: str, steps: str = "linear") -> list[float]:
    """``10k:400k:12`` → 12 loads from 10k to 400k, linear or log-spaced; ``10k,20k,50k`` → those."""
    if steps not in STEPS:
        raise InputError(f"--steps {steps} is unknown", "use --steps linear or --steps log")
    t = text.strip()
    if "," in t or ":" not in t:
        rates = [parse_rate(x.strip(), what="--rates") for x in t.split(",") if x.strip()]
        if not rates:
            raise InputError(f"--rates {text!r} gives no load", "write START:STOP:N, e.g. --rates 10k:400k:12")
        return sorted(set(rates))
    parts = t.split(":")
    if len(parts) != 3 or not parts[2].strip().isdigit():
        raise InputError(f"--rates {text!r} is not START:STOP:N",
                         "write e.g. --rates 10k:400k:12 (12 loads) or a list, --rates 10k,20k,50k")
    start, stop, n = parse_rate(parts[0], what="--rates"), parse_rate(parts[1], what="--rates"), int(parts[2])
    if not 2 <= n <= MAX_POINTS:
        raise InputError(f"--rates {text!r}: {n} loads", f"give between 2 and {MAX_POINTS} loads")
    if stop <= start:
        raise InputError(f"--rates {text!r}: the last load is not above the first", "write START:STOP:N with START < STOP")
    grid = np.geomspace(start, stop, n) if steps == "log" else np.linspace(start, stop, n)
    return [float(round(r, 3)) for r in grid]


@dataclass(frozen=True)
class Outcome:
    """What the search needs to know of a measured point."""

    saturated: bool
    #: SLO mode: True met (whole CI, not saturated), False not met, None undetermined.
    meets: bool | None
    #: SLO mode: inconclusive CI with attempts left: measure this load again.
    retry: bool = False


def next_index(n: int, done: dict[int, Outcome], slo: bool) -> int | None:
    """The next grid index to measure (again, when it is in ``done``), or None when the sweep is over."""
    if not slo:
        if any(o.saturated for o in done.values()):
            return None
        return next((i for i in range(n) if i not in done), None)
    # An inconclusive point is settled (within MAX_ATTEMPTS) before the search moves on.
    if again := [i for i, o in done.items() if o.retry]:
        return min(again)
    if 0 not in done:
        return 0
    if done[0].meets is False:  # the lowest load is not met: no higher one is
        return None
    if n - 1 not in done:
        return n - 1
    lo = max((i for i, o in done.items() if o.meets is True), default=-1)
    hi = min((i for i, o in done.items() if o.meets is False and i > lo), default=n)
    # Undetermined points inside the bracket split it but bound nothing: bisect the part above the
    # highest load met, then the part below the lowest not met, then the parts between them (at
    # most every load of the bracket, each at most MAX_ATTEMPTS times).
    edges = [lo, *sorted(i for i, o in done.items() if o.meets is None and lo < i < hi), hi]
    gaps = list(zip(edges, edges[1:]))
    for a, b in [gaps[0], gaps[-1], *gaps[1:-1]]:
        if b - a > 1:
            return (a + b) // 2
    return None


def points_left(n: int, done: dict[int, Outcome], slo: bool) -> int:
    """At most how many points the sweep still measures (retries of inconclusive points aside)."""
    if next_index(n, done, slo) is None:
        return 0
    if not slo:
        return n - len(done)
    return max(1, math.ceil(math.log2(max(n - len(done), 2)))) + (0 if 0 in done else 1)


def window_needed(top_rps: float) -> int:
    """Slots (conns × outstanding) that hold ``top_rps`` by Little's law at ASSUMED_RESPONSE_NS,
    with LITTLE_HEADROOM for bursts."""
    from tailwise.methodology.checks import LITTLE_HEADROOM, little_need

    return math.ceil(LITTLE_HEADROOM * little_need(top_rps, ASSUMED_RESPONSE_NS))


def size_window(top_rps: float, conns: int | None, outstanding: int | None, threads: int) -> tuple[int, int, str | None]:
    """The client's window for a sweep whose highest load is ``top_rps``: (conns, outstanding, a
    note saying what was chosen and why, or None when the default holds it). ``conns`` and
    ``outstanding`` are None when not given; the one not given is sized, and a window given whole
    that cannot hold the top load is refused in one line with the numbers."""
    need = window_needed(top_rps)
    law = (f"{top_rps:,.0f} req/s × {ASSUMED_RESPONSE_NS / 1e3:g} µs assumed response time × 2 for bursts = "
           f"{need:,} requests in flight (Little's law)")
    if conns is not None and outstanding is not None:
        if conns * outstanding < need:
            raise InputError(
                f"--conns {conns} × --outstanding {outstanding} = {conns * outstanding:,} slots cannot hold the top "
                f"load: {law}, so the client, not the server, would limit the sweep",
                f"use --conns {math.ceil(need / outstanding)} (or --outstanding {math.ceil(need / conns)}), "
                "lower the top of --rates, or leave both out to have the window sized")
        return conns, outstanding, None
    if conns is not None:
        sized = (conns, max(DEFAULT_OUTSTANDING, math.ceil(need / conns)))
    elif outstanding is not None:
        sized = (max(DEFAULT_CONNS, threads, math.ceil(need / outstanding)), outstanding)
    else:
        c = max(DEFAULT_CONNS, threads, min(MAX_CONNS, math.ceil(need / DEFAULT_OUTSTANDING)))
        sized = (c, max(DEFAULT_OUTSTANDING, math.ceil(need / c)))
    if sized == (conns or DEFAULT_CONNS, outstanding or DEFAULT_OUTSTANDING):
        return *sized, None
    return *sized, (f"client window sized to {sized[0]} conns × {sized[1]} outstanding = {sized[0] * sized[1]:,} "
                    f"slots for the top load: {law}")


def host_shortfall(point: Summary) -> str | None:
    """Why a point's completed rate fell short because the host stalled the built-in server, not
    because the server ran out of capacity; None otherwise (and for any other target).

    The client sent its load (within the rate check's tolerance) and the server was busy less than
    1 − SHORTFALL of the time, yet fewer replies came back within the window than were offered:
    a stall near the window's end pushes the replies to the requests it and its backlog delayed
    past the end, and those are at most ``host_stall_share`` of them. A saturated server is busy
    all the time; this one was not."""
    from tailwise.methodology.checks import rate_tolerance

    r, share, server = point.rate, host_stall_share(point), _builtin(point)
    rho = server.utilisation if server else None
    target, sent, done = r.target_rps, r.achieved_rps, r.completed_rps
    if share is None or rho is None or rho >= 1 - SHORTFALL or not sent or done is None or not target:
        return None
    if abs(sent / target - 1) > rate_tolerance(target, r.duration_s):
        return None
    short = 1 - done / sent
    # Nothing to explain (neither `saturation` test fires: the rate check's tolerance is at least
    # RATE_TOLERANCE = SHORTFALL), or more than the stalls can.
    if short <= SHORTFALL or short > share:
        return None
    return (f"completed {short:.1%} short of the load, within the {share:.0%} of requests the host's stalls of the "
            f"built-in server can have delayed past the window; the server was busy {rho:.0%} of the time: not saturated by "
            "its rate")


def saturation(point: Summary, base_p50_ns: float | None, limited: str | None = None) -> str | None:
    """Why a point's summary shows the target saturated, or None. ``limited``: why the client's
    window was the limit (`client_limited`), which then is the reason."""
    r, target = point.rate, point.rate.target_rps
    rate = next((c for c in point.checks if c.name == "rate"), None)
    host = host_shortfall(point)
    if rate is not None and not rate.ok and host is None:
        if limited:
            return limited
        if not r.achieved_rps or r.completed_rps is None:
            return f"rate: {rate.detail}"
        # The figures alone: a closed-loop law the rate check may state takes the mean response,
        # which a saturated server's own queue inflates — the window was full because the server
        # fell behind (client_limited said the window held what the server needs).
        from tailwise.methodology.checks import rate_figures, rate_tolerance

        figures = rate_figures(target, r.achieved_rps, r.completed_rps, r.duration_s)
        tol = rate_tolerance(target, r.duration_s)
        within = all(abs(x / target - 1.0) <= tol for x in (r.achieved_rps, r.completed_rps))
        if within:
            # Both rates within tolerance: the rule that fired is Little's law's (checks.rate_check)
            # — the server's queue lengthened each response until the window could not carry the rate.
            return "rate: " + _queue_rule(point, target) + "; " + figures
        return "rate: " + figures
    c = point.counters
    if c.intended and c.sent < (1 - SHORTFALL) * c.intended:
        return limited or (f"achieved {r.achieved_rps or 0:,.0f} req/s of {target:,.0f} "
                           f"(sent {c.sent:,} of {c.intended:,} due)")
    sent, done = r.achieved_rps, r.completed_rps
    if sent and done is not None and done < (1 - SHORTFALL) * sent and not host:
        return limited or f"completed {done:,.0f} req/s of the {sent:,.0f} sent"
    if c.timeouts or c.errors:
        return f"{c.timeouts:,} timeouts and {c.errors:,} errors of {c.sent:,} requests"
    p50 = _p50(point)
    if base_p50_ns and p50 and p50 > DIVERGE * base_p50_ns:
        return f"latency diverges: p50 {p50 / 1e3:,.1f} µs > {DIVERGE:g} × {base_p50_ns / 1e3:,.1f} µs at the lowest load"
    return None


def _queue_rule(point: Summary, target: float) -> str:
    """The closed-loop rule in words, for a point whose rates were within tolerance."""
    from tailwise.methodology.checks import little_need

    response = response_ns(point)
    conns, outstanding = point.config.conns, point.config.outstanding
    if not response or not conns or not outstanding:
        return "the server's queue made the response time too long for the client's window to carry the rate"
    return (f"responses slowed to {response / 1e3:,.1f} µs on average, so carrying {target:,.0f} req/s needs "
            f"{little_need(target, response):,.1f} in flight (Little's law), more than {conns} conns × {outstanding} "
            f"outstanding allow: the server's queue, not the client")


def response_ns(point: Summary) -> float | None:
    """A point's mean response time (send to reply) of its answered requests."""
    return point.methodology.response_mean_ns


def client_limited(point: Summary, base_response_ns: float | None) -> str | None:
    """Why the client's window (conns × outstanding), not the server, limited a point's rate; None
    when it did not.

    Requests waited for a free slot (sent late or never sent: at least SHORTFALL of them) and the
    window held less than LITTLE_HEADROOM × what the offered rate needs in flight by Little's law
    at the response time of the lowest load (no queue at the server: a saturated server's own queue
    inflates the response time, and a full window then only means the server fell behind). Below
    that headroom a full window caps the completed rate at slots / response time, and a refill the
    client is late with leaves the server idle: the rate completed is the client's."""
    from tailwise.methodology.checks import LITTLE_HEADROOM, little_need

    c, r = point.counters, point.rate
    conns, outstanding = point.config.conns, point.config.outstanding
    response = base_response_ns or response_ns(point)
    target = r.target_rps
    if not conns or not outstanding or not response or not target:
        return None
    waited, intended = (c.late or 0) + (c.never_sent or 0), max(c.intended or 0, 1)
    window, need = conns * outstanding, little_need(target, response)
    if waited < SHORTFALL * intended or window >= LITTLE_HEADROOM * need:
        return None
    done = f"{r.completed_rps:,.0f}" if r.completed_rps is not None else "—"
    # A host that stalls the built-in server lengthens every response: said, since a quieter host
    # then needs a smaller window.
    share = host_stall_share(point)
    host = (f" (the host's stalls of the built-in server can have delayed {share:.0%} of the requests: the response "
            "time, and so the window needed, is partly the host's)" if share is not None and share >= 0.1 else "")
    return (f"the client's window was the limit, not the server: {conns} conns × {outstanding} outstanding = {window:,} "
            f"slots, {waited:,} of {intended:,} requests waited for a free slot (sent late or never sent), "
            f"{done} req/s completed; carrying {target:,.0f} req/s at {response / 1e3:,.1f} µs per response (the "
            f"lowest load's) needs {need:,.1f} in flight (Little's law), more than half the window{host}: give --conns "
            f"{math.ceil(LITTLE_HEADROOM * need / outstanding)} or more")


def _p50(point: Summary) -> float | None:
    """The median of every request in the window (never null, unlike a reported figure)."""
    return next((p.value_ns for p in point.latency.window.percentiles or () if p.p == 50.0), None)


def _every(point: Summary, p: float) -> float | None:
    """Percentile ``p`` (or the nearest one reported) over every request of the window."""
    near = min(point.latency.window.percentiles or (), key=lambda r: abs(r.p - p), default=None)
    return near.value_ns if near else None


def rising(ys: list[float], widths: list[float]) -> list[float]:
    """The curve Kneedle reads: the closest non-decreasing one (isotonic regression, each point
    weighted by 1/width² of its interval). Latency does not fall as an open loop's load rises
    (a queue's sojourn time grows with ρ), so a point above the loads after it is noise — a host
    stall that owns one point's p99 — and a wide interval says how little it weighs; without
    this, one such point at 40 % load became the knee (Kneedle, Satopää et al. 2011, smooths
    the curve first for the same reason)."""
    if len(ys) < 2:
        return list(ys)
    from scipy.optimize import isotonic_regression  # ~0.2 s: not before the first point

    fit = isotonic_regression(np.asarray(ys, float), weights=1.0 / np.square(np.asarray(widths, float)))
    return [float(v) for v in fit.x]


def kneedle(x: list[float], y: list[float]) -> int | None:
    """Index of the knee of a rising convex curve (Kneedle): the largest x̂ − ŷ, both scaled to
    [0, 1]; None with fewer than three points or a flat curve."""
    if len(x) < 3:
        return None
    xs, ys = np.asarray(x, float), np.asarray(y, float)
    if np.ptp(xs) <= 0 or np.ptp(ys) <= 0:
        return None
    d = (xs - xs.min()) / np.ptp(xs) - (ys - ys.min()) / np.ptp(ys)
    i = int(np.argmax(d))
    return i if d[i] > 0 else None


def _builtin(s: Summary):
    """The built-in server's own view of a point (documents/counts.BuiltinServerStats), or None."""
    ts = s.target_stats
    return ts if ts is not None and ts.source == "builtin-server" else None


def host_stall_share(s: Summary) -> float | None:
    """The share of a point's requests that stalls of the built-in server (the host took a
    worker's CPU for ≥ 200 µs) can have delayed; None where the server's own stalls are not seen
    (any other target).

    A stall of D seconds at utilisation ρ delays the requests that arrive during it and while the
    backlog it left drains: the server clears ρ·D of work at a net rate of 1 − ρ, so the
    disturbance lasts D + ρ·D/(1 − ρ) = D/(1 − ρ). Over a run of T worker-seconds that is a share
    ΣD / ((1 − ρ)·T) of the arrivals (ρ capped at 0.95: beyond, the point saturates anyway). Where
    the share reaches 1 − p/100, the point's p-th percentile can be the host's rather than the
    load's."""
    ts = _builtin(s)
    if ts is None:
        return None
    rho, busy, stalled = ts.utilisation, ts.busy_s, ts.stalled_s
    if not rho or not busy or stalled is None:
        return None
    worker_s = busy / rho
    return min(1.0, stalled / ((1 - min(rho, 0.95)) * worker_s))




def point_row(index: int, rate_rps: float, dirname: str, s: Summary, percentile: float, reason: str | None,
              slo: Threshold | None, thresholds: list[ThresholdResult], limited: str | None = None,
              attempts: list[Attempt] | None = None) -> Point:
    """One point as the sweep's summary lists it. ``limited``: why the client's window was the
    limit (the point is then saturated by it); ``attempts``: the earlier measurements of this load."""
    target = next((p for p in s.latency.percentiles if abs(p.p - percentile) < 1e-9), None)
    judged = slo.evaluate(s.latency.percentiles) if slo else None
    # The window caps the rate: it is the limit only where the rate is what saturated.
    limited = limited if limited is not None and reason == limited else None
    outcome = None
    if judged is not None:
        if limited:  # the client's limit says nothing of the server's percentile at this load
            outcome = "undetermined"
        elif reason is not None or judged.status == FAIL:
            outcome = "not-met"
        else:
            outcome = "met" if judged.status == PASS else "undetermined"
    return Point(
        index=index,
        rate_rps=rate_rps,
        dir=f"points/{dirname}",
        verdict=s.verdict,
        achieved_rps=s.rate.achieved_rps,
        completed_rps=s.rate.completed_rps,
        duration_s=s.rate.duration_s,
        percentiles=s.latency.percentiles,
        target=target,
        p50_every_ns=_p50(s),
        # The sweep's percentile over every request of the window (never null, even saturated).
        every_ns=_every(s, percentile),
        saturated=reason is not None,
        saturation_reason=reason,
        client_limited=limited,
        slo=judged,
        meets_slo={"met": True, "not-met": False}.get(outcome),
        slo_outcome=outcome,
        attempts=[*(attempts or []), Attempt(dir=f"points/{dirname}", slo_status=judged.status if judged else None,
                                             saturated=reason is not None)],
        thresholds=thresholds,
        failed_checks=[c.name for c in s.checks if not c.ok],
        host_stall_share=host_stall_share(s),
        host_shortfall=host_shortfall(s),
    )


def supported(row: Point) -> bool:
    """The point's percentile has a confidence interval (the samples bound it)."""
    t = row.target
    return bool(t) and None not in (t.value_ns, t.low_ns, t.high_ns)


def outcomes(rows: list[Point]) -> dict[int, Outcome]:
    """The search's view of the points: an inconclusive CI (not the client's limit) with attempts
    left is measured again."""
    return {r.index: Outcome(r.saturated, r.meets_slo,
                             r.slo_outcome == "undetermined" and not r.client_limited
                             and len(r.attempts) < MAX_ATTEMPTS)
            for r in rows}


def capacity_of(rows: list[Point]) -> tuple[float | None, bool]:
    """The highest completed rate at a saturated point, and whether it is only a lower bound.

    Beyond capacity an open-loop client measures the server's throughput — where the server fell
    behind. A point that saturated by its latency (or by timeouts) while it completed what it was
    offered (sent), within ``SHORTFALL``, shows only that the throughput is at least that much: a host
    that takes the server's CPU now and then makes the queue diverge below capacity."""
    top = max((r for r in rows if r.saturated and r.completed_rps and not r.client_limited),
              key=lambda r: r.completed_rps, default=None)
    if top is None:
        return None, False
    return top.completed_rps, top.completed_rps >= (1 - SHORTFALL) * (top.achieved_rps or top.rate_rps)



def knee_candidates(xs: list[float], ys: list[float], lows: list[float], highs: list[float], k: int) -> list[int]:
    """The points (of the first len(lows)) that could be the knee given their CIs: Kneedle's
    difference x̂ − ŷ at its most (ŷ at the CI's low end) reaches the knee's at its least (at the
    CI's high end), the scale fixed by the point estimates."""
    xs_, ys_ = np.asarray(xs, float), np.asarray(ys, float)
    xh = (xs_ - xs_.min()) / np.ptp(xs_)
    scale = lambda v: (np.asarray(v, float) - ys_.min()) / np.ptp(ys_)  # noqa: E731
    d_hi, d_lo = xh[:len(lows)] - scale(lows), xh[:len(highs)] - scale(highs)
    return [i for i in range(len(lows)) if d_hi[i] >= d_lo[k]]


def slo_answer(rows: list[Point], grid: list[float], slo: Threshold) -> SloAnswer:
    """The SLO search's answer from its points: met up to a load, not met at any load measured
    (only when the lowest load's whole CI misses), or undetermined with the reason."""
    rows = sorted(rows, key=lambda r: r.rate_rps)
    best = max((r for r in rows if r.slo_outcome == "met"), key=lambda r: r.rate_rps, default=None)
    higher = [r for r in rows if best is None or r.rate_rps > best.rate_rps]
    above = next((r for r in higher if r.slo_outcome == "not-met"), None)
    undetermined = [r for r in higher if r.slo_outcome == "undetermined"
                    and (above is None or r.rate_rps < above.rate_rps)]
    lowest = next((r for r in rows if r.index == 0), None)

    def why(r: Point) -> str:
        tries = len(r.attempts)
        tried = f" after {tries} attempts" if tries > 1 else ""
        if r.client_limited:
            return f"{r.rate_rps:,.0f} req/s undetermined: {r.client_limited}"
        return f"{r.rate_rps:,.0f} req/s undetermined{tried} ({r.slo.detail})"

    if best is not None:
        outcome = "met"
        detail = f"met up to {best.rate_rps:,.0f} req/s ({best.slo.detail})"
        if above is not None:
            detail += f"; {above.rate_rps:,.0f} req/s does not ({above.slo.status}: {above.slo.detail})"
        elif best.index == len(grid) - 1:
            detail += ": every load measured meets it; give higher --rates to find the limit"
        if undetermined:
            detail += "; " + "; ".join(why(r) for r in undetermined)
    elif lowest is not None and lowest.slo.status == FAIL:
        outcome = "not-met"
        detail = (f"not met at any load measured: at the lowest, {lowest.rate_rps:,.0f} req/s, "
                  f"{lowest.slo.detail}")
    elif lowest is None:
        outcome, detail = "undetermined", "not searched yet"
    else:
        outcome = "undetermined"
        reasons = [why(r) for r in rows if r.slo_outcome == "undetermined"]
        if lowest.slo_outcome == "not-met":  # saturated, its CI not missing as a whole
            reasons.insert(0, f"the lowest load, {lowest.rate_rps:,.0f} req/s, saturated the target "
                              f"({lowest.saturation_reason}) without its CI missing the SLO")
        detail = (f"undetermined: no load measured meets {slo.text} as a whole CI, and the lowest does not miss it "
                  f"as a whole — {'; '.join(reasons)}; measure longer (--max-time, --duration) or ask a narrower "
                  "--ci, or add lower --rates")
    return SloAnswer(
        threshold=slo.text,
        outcome=outcome,
        rate_rps=best.rate_rps if best else None,
        percentile=best.slo if best else None,
        next_rate_rps=above.rate_rps if above else None,
        next=above.slo if above else None,
        resolution_rps=(above.rate_rps - best.rate_rps) if best and above else None,
        undetermined_rps=[r.rate_rps for r in undetermined] if best else
                         [r.rate_rps for r in rows if r.slo_outcome == "undetermined"],
        detail=detail,
    )


@dataclass(frozen=True)
class Conclusions:
    """What a sweep concludes from its points (the sweep summary's fields of the same names)."""

    knee: Knee | None
    saturation: Saturation | None
    capacity_rps: float | None
    capacity_lower_bound: bool
    slo: SloAnswer | None


def conclude(rows: list[Point], grid: list[float], slo: Threshold | None, percentile: float) -> Conclusions:
    """The sweep's answers from its points: knee, saturation, capacity, and the SLO result."""
    rows = sorted(rows, key=lambda r: r.index)
    sat = next((r for r in rows if r.saturated), None)
    # The knee comes only from points whose percentile has an interval.
    ok = [r for r in rows if not r.saturated and (sat is None or r.index < sat.index) and supported(r)]
    knee = None
    # The curve runs up to the first saturated point (its every-request figure: the statistics
    # may not support one; never the knee itself), so that the knee is where latency leaves the
    # low-load level for the blow-up; the endpoints are never the knee (Kneedle's difference is 0 there).
    xs, ys = [r.rate_rps for r in ok], [r.target.value_ns for r in ok]
    widths = [max(r.target.high_ns - r.target.low_ns, 1.0) for r in ok]
    if sat is not None and sat.every_ns is not None and not sat.client_limited:
        xs, ys = xs + [sat.rate_rps], ys + [sat.every_ns]
        widths.append(min(widths, default=1.0))
    ys = rising(ys, widths)
    k = kneedle(xs, ys)
    if k is not None and k < len(ok):
        cands = knee_candidates(xs, ys, [r.target.low_ns for r in ok], [r.target.high_ns for r in ok], k)
        method = "kneedle"
    elif ok and sat is not None:
        k, cands, method = len(ok) - 1, [len(ok) - 1], "last load before saturation"
    if k is not None and k < len(ok):
        # Its own uncertainty: the loads whose CIs allow the knee there, widened to the measured
        # loads either side (the grid's spacing: the curve between them is not measured).
        first, last = min(cands), max(cands)
        at = ok[k]
        knee = Knee(rate_rps=at.rate_rps, index=at.index, method=method, percentile=at.target,
                    candidates_rps=[xs[i] for i in cands],
                    low_rps=xs[first - 1] if first > 0 else xs[first],
                    high_rps=xs[last + 1] if last + 1 < len(xs) else xs[last],
                    # The rise after the knee is what places it: where the host's stalls of the server can
                    # own the percentile at those loads, the knee may be the host's and earlier than the load's.
                    disturbed=[Disturbed(rate_rps=r.rate_rps, host_stall_share=r.host_stall_share)
                               for r in ok if r.rate_rps > at.rate_rps
                               and (r.host_stall_share or 0) >= 1 - percentile / 100])
    capacity, lower_bound = capacity_of(rows)
    return Conclusions(
        knee=knee,
        saturation=None if sat is None else Saturation(rate_rps=sat.rate_rps, index=sat.index,
                                                       reason=sat.saturation_reason, client_limited=sat.client_limited),
        capacity_rps=capacity,
        capacity_lower_bound=lower_bound,
        slo=slo_answer(rows, grid, slo) if slo is not None else None,
    )


def why_stopped(rows: list[Point], slo: Threshold | None, grid: list[float]) -> str:
    if slo is not None:
        return {"met": "slo-found", "not-met": "slo-not-met"}.get(slo_answer(rows, grid, slo).outcome,
                                                                   "slo-undetermined")
    return "saturated" if any(r.saturated for r in rows) else "end-of-rates"
