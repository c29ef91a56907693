"""The checks of the methodology, each a pure function returning a ``Check``: its figure, whether
it passed and, when it did not, the remedy — a value (remedies.py), put in words only where the
check is shown (``Check.as_json``, words.py). The statistics behind them live in ``tailwise.stats``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tailwise import _core
from tailwise.methodology.remedies import (
    AddConnections,
    Advice,
    Longer,
    OverloadedAgents,
    QuieterClient,
    Remedy,
    RunLonger,
    Setting,
)
from tailwise.methodology.words import remedy_words
from tailwise.stats.arrivals import DISTANCE_MAX, LATE_LIMIT, ArrivalFit
from tailwise.stats.independence import Independence
from tailwise.stats.quantiles import Percentile, samples_needed
from tailwise.stats.stationarity import Stationarity

#: The shortest stall the engine logs (time/stall.rs), as the checks name it.
MASK_STALL_US: float = _core.MASK_STALL_NS / 1_000

#: The engine must deliver the target rate to within 5 % (issue 2); for short runs the Poisson
#: count's own spread (3 standard deviations of a count of rate × duration) is allowed on top.
RATE_TOLERANCE = 0.05
#: Connections × outstanding must exceed Little's-law need (rate × response time) by this factor,
#: so that Poisson bursts rarely find every slot taken.
LITTLE_HEADROOM = 2.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    remedy: Remedy | None = None
    statistic: float | None = None

    def as_json(self) -> dict:
        stat = self.statistic
        if stat is not None and not math.isfinite(stat):
            stat = None
        remedy = None if self.remedy is None else remedy_words(self.remedy)
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "remedy": remedy, "statistic": stat}


def rate_tolerance(target_rps: float, duration_s: float) -> float:
    expected = max(target_rps * duration_s, 1.0)
    return max(RATE_TOLERANCE, 3.0 / math.sqrt(expected))


def little_need(target_rps: float, response_ns: float) -> float:
    """Requests in flight that Little's law (L = λW) needs at this rate and response time."""
    return target_rps * response_ns / 1e9


def rate_figures(target_rps: float, achieved_rps: float, completed_rps: float, duration_s: float) -> str:
    """The rates sent and completed against the target, with the tolerance they are judged by."""
    tol = rate_tolerance(target_rps, duration_s)
    return (f"sent {achieved_rps:,.0f} req/s and completed {completed_rps:,.0f} req/s of {target_rps:,.0f} "
            f"({achieved_rps / target_rps - 1.0:+.1%} / {completed_rps / target_rps - 1.0:+.1%}; tolerance ±{tol:.1%})")


def rate_check(target_rps: float, achieved_rps: float | None, completed_rps: float | None, duration_s: float, *,
               conns: int, outstanding: int, response_ns: float | None, never_sent: int = 0) -> Check:
    """The load offered and carried, within ``rate_tolerance``. A shortfall in what was sent that the
    requests never sent explain is the target's (a request waits in the client's backlog only for a
    free slot: every slot was held by requests it had not answered), never the client's (issue 32)."""
    if not achieved_rps or completed_rps is None:
        return Check("rate", False, "no request was sent", Advice.NOTHING_SENT)
    tol = rate_tolerance(target_rps, duration_s)
    sent_dev = achieved_rps / target_rps - 1.0
    done_dev = completed_rps / target_rps - 1.0
    detail = rate_figures(target_rps, achieved_rps, completed_rps, duration_s)
    capacity = conns * outstanding
    if response_ns:
        need = little_need(target_rps, response_ns)
        if capacity < need * LITTLE_HEADROOM and (abs(sent_dev) > tol or abs(done_dev) > tol or capacity < need):
            conns_needed = math.ceil(need * LITTLE_HEADROOM / outstanding)
            return Check(
                "rate", False,
                f"closed loop: too few connections: {target_rps:,.0f} req/s × {response_ns / 1e3:.1f} µs response time "
                f"needs {need:,.1f} requests in flight (Little's law), but {conns} conns × {outstanding} outstanding "
                f"allow {capacity}; {detail}",
                AddConnections(conns_needed, outstanding),
                sent_dev,
            )
    if abs(sent_dev) > tol:
        remedy = Advice.CLIENT_COULD_NOT_SEND if sent_dev < 0 else Advice.REPORT_OVERSHOOT
        missing = (target_rps - achieved_rps) * duration_s
        if sent_dev < 0 and never_sent >= 0.5 * missing:
            remedy = Advice.SERVER_BEHIND
            detail += (f"; {never_sent:,} requests never sent: every slot (--conns × --outstanding) was held by "
                       "requests the target had not answered")
        return Check("rate", False, detail, remedy, sent_dev)
    if abs(done_dev) > tol:
        return Check("rate", False, detail, Advice.SERVER_BEHIND, done_dev)
    return Check("rate", True, detail, None, sent_dev)


@dataclass(frozen=True)
class AgentFigures:
    """One agent of a run on several, against its own share (analysis.agent_figures)."""

    address: str
    role: str
    share_rps: float
    achieved_rps: float | None
    #: The rate check's tolerance for this share over this run (``rate_tolerance``).
    tolerance: float
    #: The arrivals test on its own samples in the window; None: not timed (a load agent).
    arrivals: ArrivalFit | None
    #: Its share of sends later than --late (its samples', or its counters' when it keeps none).
    late_fraction: float
    #: Why it failed the run (then it is not judged: the run's error names it).
    error: str | None = None

    @property
    def deviation(self) -> float | None:
        if not self.share_rps or self.achieved_rps is None:
            return None
        return self.achieved_rps / self.share_rps - 1.0

    @property
    def behind(self) -> bool:
        """Sent less than its share (or nothing to judge it by)."""
        dev = self.deviation
        return dev is None or dev < -self.tolerance

    @property
    def ahead(self) -> bool:
        dev = self.deviation
        return dev is not None and dev > self.tolerance

    @property
    def late(self) -> bool:
        return self.late_fraction > LATE_LIMIT

    @property
    def off_schedule(self) -> bool:
        """Its arrivals fail the test with a figure (too few sends to test is no finding)."""
        fit = self.arrivals
        return fit is not None and not fit.ok and (fit.statistic is not None or self.late)

    @property
    def overloaded(self) -> bool:
        return self.error is None and (self.behind or self.late or self.off_schedule)

    def words(self) -> str:
        """Its figures in one clause."""
        who = f"{self.address} ({self.role})"
        if self.error is not None:
            return f"{who} failed: {self.error}"
        dev = self.deviation
        sent = (f"sent {self.achieved_rps:,.0f} of its {self.share_rps:,.0f} req/s "
                f"({'?' if dev is None else f'{dev:+.1%}'}; tolerance ±{self.tolerance:.1%})"
                if self.achieved_rps is not None else f"sent nothing of its {self.share_rps:,.0f} req/s")
        fit = self.arrivals
        if fit is None:
            return f"{who} {sent}, {self.late_fraction:.1%} sent late (not timed: its rate and lateness only)"
        if fit.ok:
            return f"{who} {sent}, arrivals follow its schedule (W₁ = {fit.distance:.3f}, {self.late_fraction:.1%} late)"
        if not self.off_schedule:
            return f"{who} {sent}, too few of its sends kept to test its arrivals ({fit.gaps:,} gaps)"
        why = []
        if fit.distance is not None and fit.distance > DISTANCE_MAX:
            why.append(f"sent gaps W₁ = {fit.distance:.3f} > {DISTANCE_MAX}")
        if self.late:
            why.append(f"{self.late_fraction:.1%} sent late > {LATE_LIMIT:.0%}")
        return f"{who} {sent}, arrivals fail ({'; '.join(why) or f'its schedule does not fit {fit.process}'})"


def agents_check(rows: list[AgentFigures]) -> Check:
    """A run on several agents: each agent's own send rate within the rate check's tolerance of
    its share, and its own arrivals through the arrivals test (analysis.agent_figures). One that
    falls behind, sends late or off its schedule is an overloaded client machine, and is named; an
    agent that failed the run is not judged here (the run's error names it)."""
    judged = [r for r in rows if r.error is None]
    detail = "; ".join(r.words() for r in rows)
    # The statistic: the largest relative deviation of an agent's send rate from its share, signed.
    worst = max((r.deviation for r in judged if r.deviation is not None), key=abs, default=None)
    bad = [r for r in judged if r.overloaded]
    if bad:
        names = ", ".join(r.address for r in bad)
        return Check("agents", False, f"{_n(len(bad), 'agent')} could not keep up ({names}): {detail}",
                     OverloadedAgents(tuple(r.address for r in bad)), worst)
    if any(r.ahead for r in judged):
        return Check("agents", False, f"an agent sent more than its share: {detail}", Advice.REPORT_OVERSHOOT, worst)
    return Check("agents", True, f"each agent sent its share on its schedule: {detail}", None, worst)


def errors_check(counters: dict, reasons: list[tuple[str, int]]) -> Check:
    """Errors and timeouts fail the run; requests never sent or still outstanding when it stopped
    are not errors, and are said (all of them are in the statistics, censored)."""
    errors, timeouts = counters.get("errors", 0), counters.get("timeouts", 0)
    sent, received = counters["sent"], counters.get("received", 0)
    never, unfinished = counters.get("never_sent", 0), counters.get("unfinished", 0)
    # Packet mode: a packet never answered is lost, which the loss check judges (analysis.py's
    # _errors gives its timeouts as 0); 0 for the other protocols.
    lost = counters.get("lost", 0)
    outstanding = max(sent - received - errors - timeouts - unfinished - lost, 0)
    notes = [f"{lost:,} packets lost: the loss check"] if lost else []
    if unfinished:
        notes.append(f"{unfinished:,} outstanding when the run was stopped")
    if outstanding:
        notes.append(f"{outstanding:,} in flight")
    if never:
        notes.append(f"{never:,} never sent")
    tail = f" ({'; '.join(notes)}: in the statistics at the time they waited)" if notes else ""
    if errors + timeouts == 0:
        return Check("errors", True, f"{received:,} of {sent:,} sent requests answered, no errors or timeouts{tail}",
                     None, 0.0)
    why = "; ".join(f"{r} ×{n}" for r, n in reasons) or "no reply in time"
    return Check(
        "errors", False,
        f"{errors:,} errors and {timeouts:,} timeouts among {sent:,} sent requests ({why}){tail}",
        Advice.FIX_SERVER,
        (errors + timeouts) / max(sent, 1),
    )


def loss_check(counters: dict, max_loss: float) -> Check:
    """Packet mode: the share of packets sent that were never answered (by their timeout or the
    drain's end) against --max-loss. Reordering and duplicates are said, never failed."""
    sent, lost = counters["sent"], counters.get("lost", 0)
    ratio = lost / sent if sent else 0.0
    also = (f"; {counters.get('reordered', 0):,} reordered (by up to {counters.get('reorder_max', 0):,}), "
            f"{counters.get('duplicates', 0):,} duplicates")
    if ratio > max_loss:
        return Check("loss", False, f"lost {lost:,} of {sent:,} sent ({ratio:.3%}), above --max-loss {max_loss:.3%}{also}",
                     Advice.FIND_LOSS, ratio)
    return Check("loss", True, f"lost {lost:,} of {sent:,} sent ({ratio:.3%}), within --max-loss {max_loss:.3%}{also}",
                 None, ratio)


def stalls_check(engine_stalls, target_stalls, *, sent_late: int, across: int, window: int, target: Percentile,
                 behind: int = 0,
                 width_target_ns: float | None, setting: Setting | None = None, host_pause: str | None = None,
                 bounded: bool = True, flagged: int = 0) -> Check:
    """Stalls (≥ 200 µs without running, time/stall.rs) of the engine threads and what they did to the
    requests — sent late, or outstanding across one — which stay in the statistics as intervals
    (stats/bounds.py); and stalls of the built-in server (the target's own: host noise). Fails only
    when the widening those intervals cause alone makes the asked percentile's interval miss --ci:
    sampling alone would meet it, or the widening by itself exceeds it."""
    p = target.p
    delayed = sent_late + across + behind
    share = delayed / window if window else 0.0
    if engine_stalls:
        longest = max(b - a for a, b in engine_stalls) / 1e6
        what = f"{_n(len(engine_stalls), 'stall')} of the engine ≥ {MASK_STALL_US:g} µs (longest {longest:.2f} ms)"
    else:
        what = f"no stall of the engine ≥ {MASK_STALL_US:g} µs"
    if not bounded and flagged:
        what += f": {flagged:,} requests they delayed kept as measured (--keep-stalls)"
    elif delayed:
        queued = f", {behind:,} queued behind one in their busy period" if behind else ""
        what += (f": {sent_late:,} requests sent late by the client, {across:,} outstanding across a stall{queued}, "
                 f"{share:.2%} of the {window:,} in the window, in the statistics between a lower bound and their "
                 f"measured latency")
    elif engine_stalls:
        what += ": no request in the window delayed by them"
    parts = [what]
    widening = target.widening
    if bounded and delayed and widening is not None:
        parts.append(f"they widen p{p:g}'s interval by {_us(widening)} to [{_us(target.low)}, {_us(target.high)}] "
                     f"(sampling alone: [{_us(target.sampling_low)}, {_us(target.sampling_high)}])")
    if target_stalls:
        longest = max(b - a for a, b in target_stalls) / 1e6
        parts.append(f"{_n(len(target_stalls), 'stall')} of the built-in server ≥ {MASK_STALL_US:g} µs (longest {longest:.2f} ms), kept: "
                     "host noise in the target's own latency")
    if host_pause:
        parts.append(host_pause)
    detail = "; ".join(parts)
    if width_target_ns is not None and widening and target.low is not None and target.high is not None \
            and target.sampling_low is not None and target.sampling_high is not None:
        total = target.high - target.low
        sampling = target.sampling_high - target.sampling_low
        if total > width_target_ns and (sampling <= width_target_ns or widening > width_target_ns):
            return Check(
                "stalls", False,
                f"p{p:g} lies in [{_us(target.low)}, {_us(target.high)}], wider than the {_us(width_target_ns)} asked: "
                f"{share:.2%} of requests were delayed by the client's own stalls (sampling alone gives "
                f"[{_us(target.sampling_low)}, {_us(target.sampling_high)}]); {detail}",
                QuieterClient(setting or Setting(), p), share)
    return Check("stalls", True, detail, None, share)


def exclusions_check(*, warmup_samples: int, warmup_s: float, window: int, delayed: int) -> Check:
    """What leaves the statistics: the warm-up only, by the clock. The requests the client delayed
    are in, as intervals (the stalls check). Information: it cannot fail."""
    warm = (f"the warm-up ({warmup_s:.2f} s, {warmup_samples:,} samples, fixed by the clock)" if warmup_samples
            else "nothing")
    kept = f"; the {delayed:,} requests the client delayed are in as intervals (stalls)" if delayed else ""
    return Check("exclusions", True, f"{warm} left out; all {window:,} requests in the window are in the statistics{kept}",
                 None, 0.0)


def consistency_check(rows: list[dict], sample_every: int, have_every: bool) -> Check:
    """The reported percentiles against the every-request histogram of the same window."""
    if not have_every:
        return Check("consistency", False, "no every-request histogram of the window: the reported percentiles "
                     "cannot be compared with every request", Advice.REPORT_NO_WINDOW, None)
    if not rows:
        return Check("consistency", True, "no percentile supported yet to compare with every request", None, None)
    bad = [r for r in rows if not r["ok"]]
    sampled = f" (samples 1 in {sample_every})" if sample_every > 1 else ""
    if bad:
        r = bad[0]
        return Check(
            "consistency", False,
            f"p{r['p']:g} = {r['value_ns'] / 1e3:,.1f} µs (99.9 % interval {_us(r['low_ns'])}–{_us(r['high_ns'])}) but "
            f"every request in the same window gives {r['every_request_ns'] / 1e3:,.1f} µs{sampled}",
            Advice.REPORT_SAMPLES, None)
    worst = max(rows, key=lambda r: r["p"])
    ps = "/".join(f"p{r['p']:g}" for r in rows)
    return Check("consistency", True,
                 f"{ps} {'agrees' if len(rows) == 1 else 'agree'} with every request in the same window{sampled} "
                 f"(p{worst['p']:g}: {worst['value_ns'] / 1e3:,.1f} µs reported, "
                 f"{worst['every_request_ns'] / 1e3:,.1f} µs every request)", None, None)


def _n(count: int, noun: str) -> str:
    """'1 stall', '3 stalls'."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def _us(v: float | None) -> str:
    return "∞" if v is None else f"{v / 1e3:,.1f} µs"


def arrivals_check(fit: ArrivalFit) -> Check:
    if fit.ok:
        return Check("arrivals", True, fit.detail, None, fit.statistic)
    remedy: Remedy
    if fit.late_fraction > 0.05:
        remedy = Advice.CLIENT_BEHIND_SCHEDULE
    elif fit.statistic is None:
        remedy = RunLonger(Longer.SENDS)
    elif fit.distance is not None and fit.distance > 0.1:
        remedy = Advice.CLIENT_CONTENTION
    else:
        remedy = Advice.REPORT_SCHEDULE_MISFIT
    return Check("arrivals", False, fit.detail, remedy, fit.statistic)


def stationarity_check(st: Stationarity) -> Check:
    if st.ok:
        return Check("stationarity", True, st.detail, None, st.kpss_stat)
    remedy: Remedy
    if st.transient:
        remedy = Advice.FIND_PAUSE
    elif st.kpss_stat is None and st.level_drift is None:
        remedy = RunLonger(Longer.PLAIN)
    else:
        remedy = Advice.WARM_UP_LONGER
    return Check("stationarity", False, st.detail, remedy, st.concentration if st.transient else st.kpss_stat)


def independence_check(ind: Independence, sample_every: int) -> Check:
    """The target percentile's indicator autocorrelation must be estimable: its variance inflation
    (τ, n_eff = n/τ) widens the interval instead of thinning the samples."""
    if ind.ok:
        return Check("independence", True, f"{ind.detail}; engine sampling 1 in {sample_every}", None, ind.tau)
    return Check("independence", False, ind.detail, RunLonger(Longer.DECAY), ind.tau)


def target_width_ns(value_ns: float | None, ci_ns: float | None, ci_rel: float | None) -> float | None:
    """The allowed CI width: absolute, or relative to the percentile's value."""
    if ci_ns is not None:
        return ci_ns
    if ci_rel is not None and value_ns is not None:
        return ci_rel * value_ns
    return None


def _time_more(samples: float, samples_per_s: float) -> str:
    """How long ``samples`` more take at ``samples_per_s``, as a person would say it; beyond a day
    the figure means nothing (the width shrinks as 1/√n: the target is out of reach)."""
    s = samples / samples_per_s
    if s > 86_400:
        return "more than a day at this sampling rate"
    return f"~{s:,.0f} s more at this sampling rate" if s < 600 else f"~{s / 3600:,.1f} h more at this sampling rate"


def confidence_check(pc: Percentile, n: int, confidence: float, width_target_ns: float | None,
                     samples_per_s: float | None = None, asked: bool = True) -> tuple[Check, int | None]:
    """Does the CI of the target percentile meet the width asked? Returns the check and the sample
    count estimated to meet it (an order-statistic interval narrows as 1/√n). ``asked`` False (a
    --duration run without --ci): no precision was asked, so nothing can fall short of it — the
    check says what the samples give and passes (methodology/verdict.py)."""
    check, need = _confidence(pc, n, confidence, width_target_ns, samples_per_s)
    if not asked and not check.ok:
        return Check("confidence", True, f"no precision asked (no --ci): {check.detail}", None, check.statistic), None
    return check, need


def _confidence(pc: Percentile, n: int, confidence: float, width_target_ns: float | None,
                samples_per_s: float | None) -> tuple[Check, int | None]:
    n_eff = pc.n_effective if pc.n_effective is not None else float(n)
    scale = n / n_eff if n_eff else 1.0  # samples per effective sample
    if pc.value is not None and pc.low is None and pc.high is None and pc.n_effective is None:
        # The value stands but the correlation could not be estimated (independence failed).
        return Check("confidence", False,
                     f"p{pc.p:g} = {pc.value / 1e3:,.1f} µs from {n:,} samples, no interval: whether a sample lies "
                     f"above it stays correlated beyond every lag tried, so its uncertainty cannot be estimated "
                     f"(the independence check says how far)",
                     RunLonger(Longer.CORRELATION),
                     float("nan")), None
    if pc.value is not None and pc.low is not None and pc.high is None:
        return Check("confidence", False,
                     f"p{pc.p:g} ≥ {pc.value / 1e3:,.1f} µs (lower bound {pc.low / 1e3:,.1f} µs) from {n:,} samples "
                     f"(n_eff ≈ {n_eff:,.0f}): requests that timed out, were never sent or were still in flight "
                     f"reach it, so it has no upper bound",
                     Advice.FIND_UNANSWERED, float("nan")), None
    if pc.value is None or pc.low is None or pc.high is None:
        need_eff = pc.samples_needed or samples_needed(pc.p, confidence)
        need = int(math.ceil(max(need_eff * 1.2, need_eff + 1) * scale))
        eta = f" ({_time_more(need - n, samples_per_s)})" if samples_per_s else ""
        # What the samples do say: the one-sided lower bound (quantiles.py), at 1 − α/2.
        floor = (f"; they do show p{pc.p:g} ≥ {pc.lower_bound / 1e3:,.1f} µs at {1 - (1 - confidence) / 2:.1%} "
                 "(one-sided)" if pc.lower_bound is not None else "")
        return Check("confidence", False,
                     f"{n:,} samples (n_eff ≈ {n_eff:,.0f}) cannot bound p{pc.p:g} at {confidence:.0%}: at least "
                     f"{need_eff:,} effective samples are needed{eta}{floor}",
                     RunLonger(Longer.SAMPLES), float("nan")), need
    width = pc.high - pc.low
    at_least = "≥ " if getattr(pc, "at_least", False) else ""
    ci = (f"p{pc.p:g} = {at_least}{pc.value / 1e3:,.1f} µs, {confidence:.0%} CI [{pc.low / 1e3:,.1f}, "
          f"{pc.high / 1e3:,.1f}] µs, width {width / 1e3:,.1f} µs")
    from_n = f"from {n:,} samples (n_eff ≈ {n_eff:,.0f})"
    if width_target_ns is None:
        return Check("confidence", True, f"{ci} {from_n}", None, width), None
    if width <= width_target_ns:
        return Check("confidence", True, f"{ci} ≤ target {width_target_ns / 1e3:,.1f} µs {from_n}", None, width), None
    # The part of the width that more samples shrink, and the part the client's delays add (the
    # stalls check judges that one: sampling within the target leaves the verdict to it).
    widening = pc.widening or 0.0
    sampling = (pc.sampling_high - pc.sampling_low if pc.sampling_low is not None and pc.sampling_high is not None
                else width)
    if widening and sampling <= width_target_ns:
        return Check("confidence", True,
                     f"sampling alone gives p{pc.p:g} a {confidence:.0%} CI of width {sampling / 1e3:,.1f} µs ≤ target "
                     f"{width_target_ns / 1e3:,.1f} µs {from_n}; the client's delays widen it to {width / 1e3:,.1f} µs "
                     f"(the stalls check)", None, sampling), None
    # Beyond the target the widening alone fails the stalls check, and no sample count is enough.
    goal = width_target_ns - widening if widening < width_target_ns else width_target_ns
    need = int(math.ceil(n * (sampling / goal) ** 2 * 1.1))
    eta = f", {_time_more(need - n, samples_per_s)}" if samples_per_s else ""
    needed = f"about {need:,}" if need <= 1_000 * n else f"over {1_000 * n:,}"
    return Check("confidence", False,
                 f"{ci} > target {width_target_ns / 1e3:,.1f} µs {from_n} ({needed} needed{eta})",
                 Advice.LOOSEN_PRECISION, width), need
