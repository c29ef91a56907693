"""One pass of every check over a consistent snapshot of a run: a pure function of the data.

The order is the methodology's (Lancet Fig. 4, completed): load → arrivals → stationarity →
independence → confidence → consistency. A run on several agents (agents/group.py) adds one check
to the load step, ``agents``: each agent's own send rate and arrivals (``agent_figures``). ``Analysis.state`` names the first step that failed, or
``done``; the controller decides from it whether to collect more or conclude.

The steps themselves — the exclusion rule, the delayed requests' lower bounds, the estimates,
host-wide pauses, the consistency comparison — and what is left out and what is bounded
(ARCHITECTURE.md, "Every request, as an interval") are in methodology/steps.py; what the analysis
reads (``RunPlan``, ``AnalysisInput``) in methodology/plan.py.
"""

from __future__ import annotations

from functools import cached_property
from typing import Callable

import numpy as np

from tailwise import _core
from tailwise.methodology.checks import (
    AgentFigures,
    Check,
    agents_check,
    arrivals_check,
    confidence_check,
    consistency_check,
    errors_check,
    loss_check,
    exclusions_check,
    independence_check,
    rate_check,
    rate_tolerance,
    stalls_check,
    stationarity_check,
)
from tailwise.methodology.kinds import KindLatency, by_kind
from tailwise.methodology.plan import AnalysisInput
from tailwise.methodology.result import Analysis, Delayed, StallCounts, Warmup
from tailwise.methodology.steps import (INTERVAL_NS, WARMUP_MAX_SHARE, bound_delays, consistency, estimate,
                                        exclude_warmup, host_pauses, probe_correlation)
from tailwise.methodology.verdict import Context, precision_report
from tailwise.methodology.words import client_words
from tailwise.stats.arrivals import ArrivalFit, arrival_fit
from tailwise.stats.bounds import stall_time, stall_union
from tailwise.stats.histogram import Buckets
from tailwise.stats.stationarity import Stationarity, stationarity

#: --late's default (the engine's): a send later than this after its intended time is late.
DEFAULT_LATE_NS: int = _core.ENGINE_DEFAULTS["late_ns"]


class Facts:
    """What the checks read: the input, the exclusion rule's window, the delays' bounds and the
    estimates; and, each computed once when a check first reads it, the figures of later steps."""

    def __init__(self, inp: AnalysisInput):
        self.inp = inp
        self.plan = inp.plan
        s = inp.samples
        self.t = s["intended_ns"].astype(np.int64)
        self.lat = s["latency_ns"].astype(np.int64)
        self.sent = s["sent_ns"].astype(np.int64)
        self.cut = exclude_warmup(self.t, inp.end_ns, self.plan.precision.warmup_ns)
        self.delays = bound_delays(s, self.cut.used, self.plan.bound_delays, self.plan.bounds, inp.engine_stalls)
        used = self.cut.used
        self.est = estimate(self.lat[used], self.delays.censored[used], self.delays.lower_used, self.plan.precision)
        self.target, self.independence = self.est.by_p[self.plan.precision.percentile]

    @cached_property
    def answered(self) -> np.ndarray:
        return self.cut.used & ~self.delays.censored & (self.sent > 0)

    @cached_property
    def response_ns(self) -> float | None:
        """The mean response time (reply − send) of the window's answered requests."""
        a, t, sent = self.answered, self.t, self.sent
        return float(np.mean(self.lat[a] - (sent[a] - t[a]))) if a.any() else None

    @cached_property
    def delayed_counts(self) -> tuple[int, int, int]:
        """The window's bounded requests: sent late, outstanding across a stall, and (busy rule)
        behind a stall in their busy period with neither flag."""
        d = self.delays
        return (int((d.delayed & d.sent_late).sum()), int((d.delayed & d.across).sum()),
                int((d.delayed & d.behind).sum()))

    @cached_property
    def probe(self) -> dict | None:
        """The requests just before each engine stall against the asked percentile (information)."""
        c, target = self.cut, self.target
        share = 1.0 - self.plan.precision.percentile / 100.0
        starts = [a for a, _ in self.inp.engine_stalls if c.start_ns <= a < c.end_ns]
        if target.value is None:
            return None
        return probe_correlation(self.t, self.lat, c.used & ~self.delays.delayed, starts, target.value, share)

    @cached_property
    def host_pauses(self) -> dict:
        return host_pauses(self.inp.engine_stalls, self.inp.target_stalls, self.probe, self.cut.start_ns,
                           self.cut.end_ns, self.plan.precision.percentile)

    @cached_property
    def arrivals(self) -> ArrivalFit:
        """What the server saw: every request sent in the window, against the schedule's process."""
        return self.arrivals_of(self.cut.used, self.plan.arrival, self.plan.rate_rps, self.inp.counters, self.inp.rng)

    @cached_property
    def own_sent(self) -> np.ndarray | None:
        """Each request's send time less the lateness that is not the client's own doing (issue 32:
        each cause judged once): the client's stall time in its busy period up to the send — which
        the bounds already carry — and the time every slot was held by requests the target had not
        answered (``slot_wait_ns``: a target that stops holds the client's window, as a closed loop
        would; the rate check judges that). What remains is the client falling behind by its own
        work (CPU, too few threads). None for samples without those fields (an older engine)."""
        s = self.inp.samples
        names = s.dtype.names or ()
        if "busy_from_ns" not in names or "slot_wait_ns" not in names:
            return None
        lag = np.maximum(self.sent - self.t, 0)
        explained = (s["slot_wait_ns"].astype(np.int64)
                     + stall_time(stall_union(self.inp.engine_stalls), s["busy_from_ns"].astype(np.int64), self.sent))
        return self.t + np.clip(lag - explained, 0, lag)

    def arrivals_of(self, kept: np.ndarray, process: str, rate_rps: float, counters: dict,
                    rng: np.random.Generator) -> ArrivalFit:
        """The arrivals test (stats/arrivals.py) over the samples ``kept`` marks: the pooled ones
        of the window (the arrivals check), or one agent's (the agents check) — on the sends as the
        client alone would have made them (``own_sent``), the lateness as measured said beside."""
        t, sent = self.t, self.sent
        was_sent = kept & (sent > 0)
        late_ns = self.plan.late_ns
        own = self.own_sent
        measured_late = None
        if own is not None and was_sent.any():
            threshold = late_ns if late_ns is not None else DEFAULT_LATE_NS
            measured_late = float(np.mean((sent[was_sent] - t[was_sent]) > threshold))
            late_fraction = float(np.mean((own[was_sent] - t[was_sent]) > threshold))
            sent = own
        else:
            late_fraction = (float(np.mean((sent[was_sent] - t[was_sent]) > late_ns))
                             if late_ns is not None and was_sent.any()
                             else counters.get("late", 0) / max(counters.get("sent", 0), 1))
        # Gaps across a pause are the coordinator's, not the process's. Segments end where a pause
        # ends: an engine thread that noticed the pause late (a stall) still sent, at their own times,
        # requests due after the pause began, and its schedule resumes only after the pause's end.
        pause_ends = np.sort(np.array([b for _, b in self.inp.pauses], dtype=np.int64))
        segments = np.searchsorted(pause_ends, t[was_sent], side="right") if len(pause_ends) else None
        return arrival_fit(sent[was_sent], t[was_sent], process=process, rate_rps=rate_rps,
                           late_fraction=late_fraction, rng=rng, segments=segments, measured_late=measured_late)

    @cached_property
    def agents(self) -> list[AgentFigures]:
        """Each agent's own figures (a run on several agents; empty otherwise): ``agent_figures``."""
        return agent_figures(self)

    @cached_property
    def stationarity(self) -> Stationarity:
        # The level is judged on the measured values; the tail's transients, under the busy-period
        # rule, on the lower bounds: what the client's stalls may have added to the tail is taken
        # off each request (the intervals carry it: judged once), and a freeze of the target stays
        # whole (a request waiting 200 ms in it with a 3 ms stall of the client inside keeps
        # ≥ 197 ms), so host pauses that stall the engine fail no transient test for the backlog
        # they left. Not the level: a lower bound clamped at the floor lowers the windows that held
        # a stall, which the level tests would read as a drift (3 of 10 runs at 20k req/s against
        # memcached, BENCHMARKS.md). Under the floor rule (an engine stall inside a freeze would
        # make the freeze vanish at the floor) and with --keep-stalls, both on the measured values.
        used = self.cut.used
        d = self.delays
        tail = d.lower_used if d.rule == "busy" and d.lower_used is not None else None
        return stationarity(self.t[used], self.lat[used], self.plan.precision.percentile, tail_ns=tail)

    @cached_property
    def confidence(self) -> tuple[Check, int | None]:
        """The confidence check and the samples the asked percentile's CI needs."""
        c = self.cut
        paused_ns = sum(max(0, min(b, c.end_ns) - max(a, c.start_ns)) for a, b in self.inp.pauses)
        span_s = (c.end_ns - c.start_ns - paused_ns) / 1e9
        rate_used = c.used.sum() / span_s if span_s > 0 else None
        pr = self.plan.precision
        return confidence_check(self.target, c.window_samples, pr.confidence, self.est.width_target_ns, rate_used,
                                asked=pr.ci_ns is not None or pr.ci_rel is not None)

    @cached_property
    def every(self) -> Buckets | None:
        """Every request of the window (the engine's interval histograms)."""
        if self.inp.every_request is None:
            return None
        return self.inp.every_request(self.cut.start_ns // INTERVAL_NS, -(-self.cut.end_ns // INTERVAL_NS))

    @cached_property
    def consistency(self) -> list[dict]:
        return consistency(self.every, self.plan.sample_every, self.est.used_sorted, self.est.by_p)


def agent_figures(f: Facts) -> list[AgentFigures]:
    """Each agent against its own share: its send rate over the schedule's time (the run's
    ``elapsed_s``) within the rate check's tolerance of its share (``rate_tolerance``), and its own
    samples in the window through the arrivals test, against its own schedule's process (a load
    agent keeps no samples: its late share comes from its counters, the arrivals test's third
    criterion). The exclusion rule and the delays' bounds stay per request — the window is the
    run's, and the engine's flags are each agent's own — so nothing here leaves anything out."""
    inp = f.inp
    elapsed_s = inp.elapsed_s
    owner = inp.owner
    rows = []
    for i, a in enumerate(inp.agents):
        achieved = a.achieved_rps(elapsed_s)
        fit = None
        if a.timed and owner is not None:
            rng = np.random.default_rng([AGENTS_RNG, i])
            fit = f.arrivals_of(f.cut.used & (owner == i), a.arrival, a.rate_rps, a.counters, rng)
        late = fit.late_fraction if fit is not None else a.counters.get("late", 0) / max(a.counters.get("sent", 0), 1)
        rows.append(AgentFigures(a.address, a.role, a.rate_rps, achieved, rate_tolerance(a.rate_rps, elapsed_s), fit,
                                 late, a.error))
    return rows


#: The agents check's own random stream (the arrivals test subsamples), apart from the run's.
AGENTS_RNG = 0xA6E7


# --- the checks, each a step of the methodology -------------------------------------------------

def _rate(f: Facts) -> Check:
    inp = f.inp
    achieved = inp.counters["sent"] / inp.elapsed_s if inp.elapsed_s > 0 else None
    completed = inp.received_in_window / inp.elapsed_s if inp.elapsed_s > 0 else None
    return rate_check(f.plan.rate_rps, achieved, completed, inp.elapsed_s, conns=f.plan.conns,
                      never_sent=inp.counters.get("never_sent", 0),
                      outstanding=f.plan.outstanding, response_ns=f.response_ns)


def _agents(f: Facts) -> Check | None:
    """Present only for a run on agents."""
    return agents_check(f.agents) if f.inp.agents else None


def _errors(f: Facts) -> Check:
    c = f.inp.counters
    if f.plan.precision.max_loss is not None:
        # Packet mode: a packet unanswered is lost, judged by the loss check, not an error.
        c = c | {"timeouts": 0, "unfinished": 0}
    return errors_check(c, list(f.inp.reasons))


def _loss(f: Facts) -> Check | None:
    """Present only for a packet run (udp+flow://)."""
    max_loss = f.plan.precision.max_loss
    return None if max_loss is None else loss_check(f.inp.counters, max_loss)


def _stalls(f: Facts) -> Check:
    n_late, n_across, n_behind = f.delayed_counts
    d, used = f.delays, f.cut.used
    return stalls_check(f.inp.engine_stalls, f.inp.target_stalls, sent_late=n_late, across=n_across, behind=n_behind,
                        window=f.cut.window_samples, target=f.target, width_target_ns=f.est.width_target_ns,
                        setting=f.plan.setting, host_pause=f.host_pauses["note"], bounded=f.plan.bound_delays,
                        flagged=int((used & (d.sent_late | d.across)).sum()))


def _exclusions(f: Facts) -> Check:
    return exclusions_check(warmup_samples=int(f.cut.warm.sum()), warmup_s=f.cut.start_ns / 1e9,
                            window=f.cut.window_samples, delayed=sum(f.delayed_counts))


def _arrivals(f: Facts) -> Check:
    return arrivals_check(f.arrivals)


def _stationarity(f: Facts) -> Check:
    return stationarity_check(f.stationarity)


def _independence(f: Facts) -> Check:
    return independence_check(f.independence, f.plan.sample_every)


def _confidence(f: Facts) -> Check:
    return f.confidence[0]


def _consistency(f: Facts) -> Check:
    return consistency_check(f.consistency, f.plan.sample_every, f.every is not None)


#: The methodology's checks in step order (Lancet Fig. 4, completed): (step, check, the check).
#: A check that does not apply to a run (``agents`` on one machine) returns None.
CHECKS: tuple[tuple[str, str, Callable[[Facts], Check | None]], ...] = (
    ("load", "rate", _rate),
    ("load", "agents", _agents),
    ("load", "errors", _errors),
    ("load", "loss", _loss),
    # Precision, not validity (methodology/verdict.py): the client's stalls only widen the intervals.
    ("confidence", "stalls", _stalls),
    ("load", "exclusions", _exclusions),
    ("arrivals", "arrivals", _arrivals),
    ("stationarity", "stationarity", _stationarity),
    ("independence", "independence", _independence),
    ("confidence", "confidence", _confidence),
    ("consistency", "consistency", _consistency),
)
#: Each step with its checks, in the methodology's order; ``Analysis.state`` is the first that fails.
STEPS: dict[str, tuple[str, ...]] = {step: () for step in
                                     ("load", "arrivals", "stationarity", "independence", "confidence", "consistency")}
for _step, _name, _ in CHECKS:
    STEPS[_step] = (*STEPS.get(_step, ()), _name)
STATES = tuple(STEPS)


def first_failing(checks: list[Check]) -> str:
    """The first step with a failed check, or ``done``."""
    failed = {c.name for c in checks if not c.ok}
    return next((step for step, names in STEPS.items() if failed.intersection(names)), "done")


def analyse(inp: AnalysisInput) -> Analysis:
    """Every check, in step order, on one snapshot: a pure function of ``inp``."""
    f = Facts(inp)
    checks = [c for c in (check(f) for _, _, check in CHECKS) if c is not None]
    return _result(f, checks)


def _result(f: Facts, checks: list[Check]) -> Analysis:
    """The analysis' typed result, from the facts the checks read."""
    c, d, inp = f.cut, f.delays, f.inp
    warm = c.warm
    warm_p99 = float(np.percentile(f.lat[warm], 99, method="inverted_cdf")) if warm.any() else None
    every = f.every
    ps = list(f.est.by_p)
    n_late, n_across, n_behind = f.delayed_counts
    pauses = inp.pauses
    stalls = StallCounts.of(inp.engine_stalls, inp.target_stalls)
    precision = precision_report(
        f.est.percentiles, f.target, f.plan.precision, {p: ind for p, (_, ind) in f.est.by_p.items()},
        Context(measured_s=inp.elapsed_s, max_time_s=f.plan.precision.max_time_s, fixed=f.plan.fixed,
                engine_stalls=stalls.engine, engine_longest_ns=stalls.engine_longest_ns, target_stalls=stalls.target,
                target_longest_ns=stalls.target_longest_ns, host_pause=f.host_pauses["note"],
                quieter=client_words(f.plan.setting, f.plan.precision.percentile)))
    return Analysis(
        checks=checks, state=first_failing(checks), percentiles=f.est.percentiles, target=f.target,
        used_mask=c.used, window=(c.start_ns, c.end_ns), samples_needed=f.confidence[1],
        warmup=Warmup(c.start_ns / 1e9, f.plan.precision.warmup_ns / 1e9, WARMUP_MAX_SHARE, int(warm.sum()),
                      warm_p99),
        delayed=Delayed(bool(f.plan.bound_delays), n_late, n_across, c.window_samples, d.floor,
                        tuple(f.est.percentiles), behind_stall=n_behind, rule=d.rule),
        host_pauses=f.host_pauses, probe=f.probe, consistency=f.consistency,
        every_request=None if every is None else (int(every.total), [(p, every.value_at(p)) for p in ps]),
        pauses=(len(pauses), sum(b - a for a, b in pauses) / 1e9),
        stalls=stalls, precision=precision,
        samples_collected=int(len(inp.samples)), samples_used=c.window_samples,
        inflated_samples=int((c.used & d.across).sum()), censored_samples=int((c.used & d.censored).sum()),
        independence={p: ind for p, (_, ind) in f.est.by_p.items()},
        response_mean_ns=f.response_ns, arrivals=f.arrivals, stationarity=f.stationarity,
        by_request=_by_request(f))


def _by_request(f: Facts) -> list[KindLatency] | None:
    """Each kind's percentiles, by the whole run's rules on its samples (methodology/kinds.py):
    in the final analysis of a run with several kinds; information beside the verdict."""
    kinds = f.plan.kinds
    if kinds is None or not f.inp.per_kind:
        return None
    return by_kind(kinds, f.inp.samples, f.cut.used, f.lat, f.delays.censored, f.delays.lower_used,
                   f.plan.precision)
