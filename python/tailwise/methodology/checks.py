"""The checks of the methodology, each a pure function returning a ``Check``: its figure, whether
it passed and, when it did not, the remedy. The statistics behind them live in ``tailwise.stats``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tailwise.stats.arrivals import ArrivalFit
from tailwise.stats.independence import Independence
from tailwise.stats.quantiles import Percentile
from tailwise.stats.stationarity import Stationarity

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
    remedy: str | None = None
    statistic: float | None = None

    def as_json(self) -> dict:
        stat = self.statistic
        if stat is not None and not math.isfinite(stat):
            stat = None
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "remedy": self.remedy, "statistic": stat}


def rate_tolerance(target_rps: float, duration_s: float) -> float:
    expected = max(target_rps * duration_s, 1.0)
    return max(RATE_TOLERANCE, 3.0 / math.sqrt(expected))


def little_need(target_rps: float, response_ns: float) -> float:
    """Requests in flight that Little's law (L = λW) needs at this rate and response time."""
    return target_rps * response_ns / 1e9


def rate_check(target_rps: float, achieved_rps: float | None, completed_rps: float | None, duration_s: float, *,
               conns: int, outstanding: int, response_ns: float | None) -> Check:
    if not achieved_rps or completed_rps is None:
        return Check("rate", False, "no request was sent", "check that the target answers and that the run lasted")
    tol = rate_tolerance(target_rps, duration_s)
    sent_dev = achieved_rps / target_rps - 1.0
    done_dev = completed_rps / target_rps - 1.0
    detail = (f"sent {achieved_rps:,.0f} req/s and completed {completed_rps:,.0f} req/s of {target_rps:,.0f} "
              f"({sent_dev:+.1%} / {done_dev:+.1%}; tolerance ±{tol:.1%})")
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
                f"use --conns {conns_needed} or more (at --outstanding {outstanding}), or raise --outstanding",
                sent_dev,
            )
    if abs(sent_dev) > tol:
        remedy = ("the client could not send on time: add --threads, --conns or --outstanding, or lower --rate"
                  if sent_dev < 0 else "the schedule overshot: report this as a bug")
        return Check("rate", False, detail, remedy, sent_dev)
    if abs(done_dev) > tol:
        return Check("rate", False, detail,
                     "the server did not keep up with the rate: lower --rate or give the server more capacity", done_dev)
    return Check("rate", True, detail, None, sent_dev)


def errors_check(counters: dict, reasons: list[tuple[str, int]]) -> Check:
    bad = counters["errors"] + counters["timeouts"]
    sent = counters["sent"]
    if bad == 0:
        return Check("errors", True, f"all {sent:,} sent requests answered", None, 0.0)
    why = "; ".join(f"{r} ×{n}" for r, n in reasons) or "no reply in time"
    return Check(
        "errors", False,
        f"{counters['errors']:,} errors and {counters['timeouts']:,} timeouts among {sent:,} sent requests ({why})",
        "latencies of failed requests are missing from the distribution: fix the server or lower the rate",
        bad / max(sent, 1),
    )


#: Stall masks may leave out at most this share of the samples; beyond, the run measured the
#: machine's preemptions more than the target.
MAX_STALL_MASKED = 0.2


def stalls_check(stalls: list[tuple[int, int]], masked_samples: int, samples: int, *, masked: bool = True) -> Check:
    """Stalls of tailwise's own threads (stall.rs: ≥ 200 µs without running) and the samples
    left out around them."""
    if not stalls:
        return Check("stalls", True, "no stall of tailwise's threads (≥ 200 µs without running)", None, 0.0)
    longest_ms = max(b - a for a, b in stalls) / 1e6
    what = f"{len(stalls):,} stalls of tailwise's threads ≥ 200 µs (longest {longest_ms:.2f} ms)"
    if not masked:
        return Check("stalls", True, f"{what}, kept in the statistics (--keep-stalls)", None, 0.0)
    share = masked_samples / max(samples, 1)
    detail = f"{what}: the {masked_samples:,} samples they disturbed ({share:.1%}) left out"
    if share <= MAX_STALL_MASKED:
        return Check("stalls", True, detail, None, share)
    return Check("stalls", False, detail,
                 "the machine took the CPUs of tailwise's spinning threads too often: give them CPUs of their own "
                 "(fewer --threads or --workers, no other load on the host), or measure the stalls with --keep-stalls",
                 share)


def arrivals_check(fit: ArrivalFit) -> Check:
    if fit.ok:
        return Check("arrivals", True, fit.detail, None, fit.statistic)
    if fit.late_fraction > 0.05:
        remedy = "the client fell behind its schedule: add --threads or --conns, use --poll spin, or lower --rate"
    elif fit.statistic is None:
        remedy = "run longer so that enough sends are kept"
    else:
        remedy = ("sends did not follow the requested process: check for CPU contention on the client "
                  "(other processes, --threads above the free cores) or use --poll spin")
    return Check("arrivals", False, fit.detail, remedy, fit.statistic)


def stationarity_check(st: Stationarity) -> Check:
    if st.ok:
        return Check("stationarity", True, st.detail, None, st.kpss_stat)
    if st.concentration is not None and st.concentration >= 1:
        remedy = ("something paused the server or the client during the run (a stall, a GC, another process): "
                  "find it (tailwise doctor) and measure again")
    elif st.kpss_stat is None:
        remedy = "run longer (--max-time or --duration)"
    else:
        remedy = ("the latency level changed during the run: let the server warm up longer, or find what changed "
                  "(other load on the server or client machine)")
    return Check("stationarity", False, st.detail, remedy, st.kpss_stat if st.concentration is None else st.concentration)


def independence_check(ind: Independence, sample_every: int) -> Check:
    if ind.ok:
        return Check("independence", True,
                     f"{ind.detail}; effective sampling 1 in {sample_every * ind.step}", None, ind.rho_at_step)
    return Check("independence", False, ind.detail,
                 "run longer: the samples must be thinned further than this run allows (--max-time or --duration)",
                 ind.rho_at_step)


def target_width_ns(value_ns: float | None, ci_ns: float | None, ci_rel: float | None) -> float | None:
    """The allowed CI width: absolute, or relative to the percentile's value."""
    if ci_ns is not None:
        return ci_ns
    if ci_rel is not None and value_ns is not None:
        return ci_rel * value_ns
    return None


def confidence_check(pc: Percentile, n: int, confidence: float, width_target_ns: float | None,
                     samples_per_s: float | None = None) -> tuple[Check, int | None]:
    """Does the CI of the target percentile meet the width asked? Returns the check and the sample
    count estimated to meet it (CI width shrinks as 1/√n for an order-statistic interval)."""
    q = pc.p / 100.0
    need_min = math.ceil(math.log((1 - confidence) / 2) / math.log(q)) if q > 0.5 else math.ceil(
        math.log((1 - confidence) / 2) / math.log(1 - q))
    if pc.low is None or pc.high is None:
        need = max(need_min, int(need_min * 1.2))
        eta = f" (~{(need - n) / samples_per_s:,.0f} s more at this sampling rate)" if samples_per_s else ""
        return Check("confidence", False,
                     f"{n:,} independent samples cannot bound p{pc.p:g} at {confidence:.0%}: at least {need_min:,} are needed{eta}",
                     "run longer (--max-time or --duration) or at a higher --rate", float("nan")), need
    width = pc.high - pc.low
    ci = f"p{pc.p:g} = {pc.value / 1e3:,.1f} µs, {confidence:.0%} CI [{pc.low / 1e3:,.1f}, {pc.high / 1e3:,.1f}] µs, width {width / 1e3:,.1f} µs"
    if width_target_ns is None:
        return Check("confidence", True, f"{ci} from {n:,} independent samples", None, width), None
    if width <= width_target_ns:
        return Check("confidence", True, f"{ci} ≤ target {width_target_ns / 1e3:,.1f} µs ({n:,} samples)", None, width), None
    need = int(math.ceil(n * (width / width_target_ns) ** 2 * 1.1))
    eta = f", ~{(need - n) / samples_per_s:,.0f} s more at this sampling rate" if samples_per_s else ""
    return Check("confidence", False,
                 f"{ci} > target {width_target_ns / 1e3:,.1f} µs with {n:,} samples (about {need:,} needed{eta})",
                 "the tail is too variable for this precision in the time allowed: widen --ci, raise --max-time, "
                 "or choose a lower --percentile", width), need
