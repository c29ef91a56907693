"""What one measurement shows while it runs (measure/point.py's `Display`): the 'measuring' line,
then on a terminal the live line (live.py), off it one line per methodology round; nothing with
--quiet."""

from __future__ import annotations

import sys

from tailwise.render.live import LiveLine
from tailwise.render.output import err_console
from tailwise.spec.units import fmt_ns


class PointDisplay:
    """The display of `tailwise run`. ``live``: the live line may be drawn (not with --json)."""

    def __init__(self, *, quiet: bool, live: bool, rate_rps: float, span_s: float, fixed: bool, percentile: float):
        self.quiet = quiet
        self.live = (LiveLine(err_console, rate_rps=rate_rps, span_s=span_s, fixed=fixed, percentile=percentile)
                     if live and not quiet and err_console.is_terminal else None)
        # On a terminal the live line stands for the round lines.
        self.round = None if quiet else self.live.round if self.live else round_line

    def __enter__(self) -> PointDisplay:
        if self.live:
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live:
            self.live.__exit__(*exc)

    def measuring(self, target_url: str, rate_rps: float, goal: str) -> None:
        if not self.quiet:
            print(f"measuring {target_url} at {rate_rps:,.0f} req/s {goal}", file=sys.stderr, flush=True)

    def started(self, session) -> None:
        if self.live:
            self.live.attach(session)


def round_line(r) -> None:
    """One line per methodology round on stderr off a terminal (a log; on a terminal the live line
    stands for it): where the CI stands, the time so far and an estimate of the time still needed —
    said to be one: the samples a percentile needs grow with the correlation found, so it can grow
    from round to round (--max-time is the bound)."""
    width = fmt_ns(r.ci_width_ns) if r.ci_width_ns is not None else "unbounded"
    target = fmt_ns(r.ci_target_ns) if r.ci_target_ns is not None else "—"
    failing = ", ".join(r.failed) if r.failed else "none"
    eta = f" · est. {r.eta_s:.0f} s more" if r.eta_s else ""
    line = (f"round {r.round} · elapsed {r.elapsed_s:.1f} s{eta} · {r.samples:,} samples ({r.used:,} used) · "
            f"p{r.percentile:g} CI width {width} / target {target} · failing: {failing}")
    print(line, file=sys.stderr, flush=True)
