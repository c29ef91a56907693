"""Checks on a run: each a pure function returning a ``Check`` that says why it failed and what to do.

The methodology adds more (arrivals, stationarity, independence, confidence); these are the ones
every run gets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tailwise.stats.quantiles import order_statistic_ranks

#: The engine must deliver the target rate to within 5 % (issue 2); for short runs the Poisson
#: count's own spread (3 standard deviations of a count of rate × duration) is allowed on top.
RATE_TOLERANCE = 0.05


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    remedy: str | None = None
    statistic: float | None = None

    def as_json(self) -> dict:
        return {"name": self.name, "ok": self.ok, "detail": self.detail, "remedy": self.remedy, "statistic": self.statistic}


def rate_tolerance(target_rps: float, duration_s: float) -> float:
    expected = max(target_rps * duration_s, 1.0)
    return max(RATE_TOLERANCE, 3.0 / math.sqrt(expected))


def rate_check(target_rps: float, achieved_rps: float | None, completed_rps: float | None, duration_s: float, counters: dict) -> Check:
    if not achieved_rps or completed_rps is None:
        return Check("rate", False, "no request was sent", "check that the target answers and that the run lasted")
    tol = rate_tolerance(target_rps, duration_s)
    sent_dev = achieved_rps / target_rps - 1.0
    done_dev = completed_rps / target_rps - 1.0
    detail = (f"sent {achieved_rps:,.0f} req/s and completed {completed_rps:,.0f} req/s of {target_rps:,.0f} "
              f"({sent_dev:+.1%} / {done_dev:+.1%}; tolerance ±{tol:.1%})")
    if abs(sent_dev) > tol:
        remedy = ("the client could not send on time: add --threads, --conns or --outstanding, "
                  "or lower --rate" if sent_dev < 0 else "the schedule overshot: report this as a bug")
        return Check("rate", False, detail, remedy, sent_dev)
    if abs(done_dev) > tol:
        return Check("rate", False, detail, "the server did not keep up with the rate: lower --rate or give the server more capacity", done_dev)
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


def samples_check(n: int, p: float, confidence: float, sample_every: int) -> Check:
    _, k = order_statistic_ranks(max(n, 0), p / 100.0, confidence) if n else (None, None)
    need = math.ceil(math.log((1 - confidence) / 2) / math.log(p / 100.0))
    if k is not None:
        return Check("samples", True, f"{n:,} samples bound p{p:g} at {confidence:.0%} (≥ {need:,} needed)", None, float(n))
    return Check(
        "samples", False,
        f"{n:,} samples cannot bound p{p:g} at {confidence:.0%}: at least {need:,} are needed",
        f"run longer (--duration) or keep more samples (--sample-every below {sample_every})" if sample_every > 1
        else "run longer (--duration) or at a higher --rate",
        float(n),
    )
