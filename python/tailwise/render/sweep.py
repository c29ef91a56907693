"""What `tailwise sweep` prints: the lines as it goes (its events), the table of its points, and the
knee, saturation, capacity and SLO lines (also in the report's page)."""

from __future__ import annotations

import sys
from pathlib import Path

from rich.console import Console

from tailwise.render.output import (TimeUnit, err_console, fmt_ns, fold, in_unit, print_table, stdout_console,
                                    unit_for)
from tailwise.render.warning import warn
from tailwise.sweep.events import Event, PointDone, Resuming, Warned
from tailwise.results.documents.sweep import Point, SweepSummary
from tailwise.sweep.search import MAX_ATTEMPTS


def capacity_text(doc: SweepSummary) -> str | None:
    """The capacity line of a sweep's summary, or None without a saturated point."""
    if not doc.capacity_rps:
        return None
    if doc.capacity_lower_bound:
        return (f"capacity: ≥ {doc.capacity_rps:,.0f} req/s (the saturated point completed what it was offered: "
                "it saturated before the server fell behind, so the throughput is at least this)")
    return f"capacity: {doc.capacity_rps:,.0f} req/s completed at saturation"


def knee_text(doc: SweepSummary) -> str | None:
    """The knee line of a sweep's summary, with its own uncertainty and the points after it the
    host disturbed; None without a knee."""
    k = doc.knee
    if not k:
        return None
    line = f"knee: {k.rate_rps:,.0f} req/s ({k.method})"
    if k.low_rps is not None and k.high_rps is not None and k.low_rps < k.high_rps:
        cands = k.candidates_rps or [k.rate_rps]
        allow = ("" if len(cands) < 2 else
                 f"; the CIs allow it at {', '.join(f'{c:,.0f}' for c in cands)} req/s")
        line += f", between {k.low_rps:,.0f} and {k.high_rps:,.0f} req/s (the loads measured either side{allow})"
    if k.disturbed:
        loads = ", ".join(f"{d.rate_rps:,.0f} ({d.host_stall_share:.0%})" for d in k.disturbed)
        line += (f" — uncertain: above it, the host's stalls of the built-in server can have delayed at least "
                 f"{100 - doc.percentile:g} % of the requests at {loads} req/s (each with its share): the "
                 f"p{doc.percentile:g} there may be the host's rather than the load's, and the load's knee higher; "
                 "re-run the sweep on a quieter host (see `tailwise doctor`: isolation, other-load, steal), or with a "
                 "lower --percentile")
    return line


def saturation_text(doc: SweepSummary) -> str | None:
    """The saturation line of a sweep's summary, or None without a saturated point."""
    sat = doc.saturation
    if not sat:
        return None
    if sat.client_limited:
        return f"saturated at {sat.rate_rps:,.0f} req/s, no capacity from it: {sat.client_limited}"
    return f"saturated at {sat.rate_rps:,.0f} req/s: {sat.reason}"


def fmt_s(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min"


def point_line(row: Point, n_done: int, elapsed_s: float) -> str:
    """One line per completed point."""
    t = row.target
    fig = f"p{t.p:g} {fmt_ns(t.value_ns)} [{fmt_ns(t.low_ns)}, {fmt_ns(t.high_ns)}]" if t else "—"
    achieved = f"{row.achieved_rps:,.0f} req/s" if row.achieved_rps is not None else "—"
    state = f"saturated ({row.saturation_reason})" if row.saturated else row.verdict
    if row.client_limited:
        state = f"saturated on the client's window, not the server ({row.client_limited})"
    if row.host_shortfall and not row.saturated:
        state += f" ({row.host_shortfall})"
    slo = f" · SLO {row.slo.status} ({row.slo_outcome})" if row.slo else ""
    return (f"point {n_done} · {row.rate_rps:,.0f} req/s (sent {achieved}) · {fig} · {state}{slo} · "
            f"elapsed {fmt_s(elapsed_s)}")


def sweep_unit(doc: SweepSummary) -> TimeUnit:
    """The unit of a sweep's screen: from its table's figures (each point's percentile and CI)."""
    return unit_for([v for p in doc.points if p.target for v in (p.target.value_ns, p.target.low_ns, p.target.high_ns)])


def print_sweep(doc: SweepSummary, console: Console | None = None) -> None:
    """The sweep's points as a table on stdout, then its answers: knee, saturation, capacity, SLO;
    at the screen's width (``screen_width``), every latency in one unit (the table's, in its headers)."""
    from rich.table import Table

    console = console or stdout_console()
    unit = sweep_unit(doc)
    fold(console, f"tailwise sweep · {doc.target} · p{doc.percentile:g} with its CI", markup=False)
    # Plain columns (as the run's table): no box, so that it fits 80 columns; nothing is cut —
    # a verdict ("not-measurable", "undetermined (2 attempts)") or a header never ends in "…";
    # a cell wraps at its spaces, never inside a word (print_table).
    t = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 1))
    cols = ["load req/s", "sent req/s", f"p{doc.percentile:g} ({unit.name})", f"CI ({unit.name})", "verdict",
            "saturated"]
    if doc.slo:
        cols.append("SLO")
    for col in cols:
        t.add_column(col, justify="right" if "req/s" in col else "left", overflow="fold")

    def number(v: float | None) -> str:
        return "—" if v is None else unit.number(v)

    for p in doc.points:
        x = p.target
        sat = ("client" if p.client_limited else "yes") if p.saturated else ""
        value = number(x.value_ns if x else None)
        ci = "—" if x is None or (x.low_ns is None and x.high_ns is None) else f"[{number(x.low_ns)}, {number(x.high_ns)}]"
        row = [f"{p.rate_rps:,.0f}", f"{p.achieved_rps:,.0f}" if p.achieved_rps else "—", value, ci, p.verdict, sat]
        if doc.slo:
            tries = len(p.attempts or ())
            row.append((p.slo_outcome or "—") + (f" ({tries} attempts)" if tries > 1 else ""))
        t.add_row(*row)
    print_table(console, t)
    for line in (knee_text(doc), saturation_text(doc), capacity_text(doc),
                 f"SLO {doc.slo.threshold}: {doc.slo.detail}" if doc.slo else None):
        if line is not None:
            fold(console, in_unit(line, unit), markup=False)


def show_event(event: Event) -> None:
    """A running sweep's event, as one line on stderr."""
    if isinstance(event, Warned):
        warn(event.warning)
        return
    if isinstance(event, Resuming):
        line = f"resuming {event.out}: {event.n_points} point(s) already measured"
    elif isinstance(event, PointDone):
        line = point_line(event.row, event.n_done, event.elapsed_s)
        if event.again is not None:
            line += f" · inconclusive: measuring it again (attempt {event.again} of {MAX_ATTEMPTS})"
        if event.eta_s is not None:
            line += f" · ETA ≤ {fmt_s(event.eta_s)}"
    else:
        raise TypeError(f"not a sweep event: {event!r}")
    print(line, file=sys.stderr, flush=True)


def print_start(rates_rps: list[float], slo: str | None, out: Path, window_note: str | None) -> None:
    """What a new sweep is about to do, and the client's window when it was sized."""
    what = f"the highest load meeting {slo}" if slo else "the knee"
    print(f"sweeping {len(rates_rps)} loads from {rates_rps[0]:,.0f} to {rates_rps[-1]:,.0f} req/s "
          f"for {what}; results in {out}/ (resume with: tailwise sweep --resume {out})", file=sys.stderr, flush=True)
    if window_note:
        print(window_note, file=sys.stderr, flush=True)


def print_nothing_to_do(out: Path, doc: SweepSummary) -> None:
    err_console.print(f"tailwise: nothing to do: the sweep in {out}/ is complete ({doc.stopped}); its result:")


def print_interrupted(doc: SweepSummary, out: Path, signal_name: str) -> None:
    kept = (f"{len(doc.points)} point(s) kept in {out}/: continue with `tailwise sweep --resume {out}`"
            if out.is_dir() else "nothing was measured")
    err_console.print(f"tailwise: sweep interrupted ({signal_name}); {kept}")


def print_error(doc: SweepSummary, out: Path) -> None:
    err_console.print(f"tailwise: {doc.error} (points so far in {out}/; continue with --resume {out})")
