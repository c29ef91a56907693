"""`tailwise compare DIR DIR ...`: several runs overlaid (KBNets Fig. 3 style) and one table.

One CCDF plot with a curve per run (every request, log-log) and its reported percentiles with
CIs, and one table: per reported percentile, each run's value with its CI, the difference to
the first run (absolute and relative) and whether the two CIs overlap. Two CIs that do not
overlap mean the difference is significant at the intervals' level (a conservative test:
overlapping CIs do not prove the runs equal) — but only between runs that are ``ok`` or
``imprecise``: a difference to a run with any other verdict is not judged (its ``ci_overlap`` is
null, the table says "not judged", and one line per such run says why). The JSON document
(schema ``tailwise.compare/1``, docs/schema/compare.schema.json) carries the same table.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from tailwise import __version__
from tailwise.errors import InputError
from tailwise.render.output import percentile_text
from tailwise.render.report import (ccdf_overlay_figure, figure, fmt_ns, prepare_out, read_histogram, render, save_figure,
                                    table)
from tailwise.results.documents.compare import Comparison, ComparedRun, Difference, RunPercentile
from tailwise.results.documents.latency import Percentile
from tailwise.results.documents.run import Summary
from tailwise.results.documents.sweep import SweepSummary
from tailwise.results.export import jsonfiles
from tailwise.results.files import COMPARE_SCHEMA, RUN_SCHEMA, SWEEP_SCHEMA
from tailwise.results.summary import load_summary

SCHEMA = COMPARE_SCHEMA
NOTE = ("CIs overlap = no: the two intervals are disjoint, so the difference is significant at the intervals' "
        "confidence level; yes: not shown to differ (overlapping intervals do not prove the runs equal); "
        "— : a value or a bound is missing (the sample does not support that percentile).")
FILES = ("compare.png", "compare.svg", "compare.html", "summary.json")
#: The verdicts whose intervals are sound: a difference is judged only between runs with one of them.
JUDGED = ("ok", "imprecise")
NOT_JUDGED = "not judged"


@dataclass
class Entry:
    """One compared run: where it is, what to call it, its summary."""

    directory: Path
    label: str
    summary: Summary


def default_labels(dirs: list[str]) -> list[str]:
    """Each directory's name, or the path as given where two names clash (a/run, b/run)."""
    names = [Path(d).resolve().name or str(d) for d in dirs]
    return [n if names.count(n) == 1 else str(d).rstrip("/") or str(d) for n, d in zip(names, dirs)]


def load_runs(dirs: list[str], labels: list[str] | None) -> list[Entry]:
    """The runs to compare; InputError for a missing directory, a sweep, or a label count that does not match."""
    if len(dirs) < 2:
        raise InputError("tailwise compare needs two or more directories", "give e.g. tailwise compare base/ new/")
    if labels and len(labels) != len(dirs):
        raise InputError(f"{len(labels)} --label for {len(dirs)} directories",
                         "give one --label per directory, in the same order, or none")
    entries = []
    for d, label in zip(dirs, labels or default_labels(dirs)):
        s = load_summary(d)
        if isinstance(s, SweepSummary):
            raise InputError(f"{d} is a sweep: tailwise compare overlays runs",
                             f"compare points of the sweeps (e.g. {Path(d) / 'points' / '001-30000rps'}), "
                             "or see each sweep with tailwise report")
        entries.append(Entry(Path(d), label, s))
    return entries


def ci_overlap(a: RunPercentile, b: RunPercentile) -> bool | None:
    """Whether [low, high] of a and of b share a point; None when a bound is missing."""
    bounds = (a.low_ns, a.high_ns, b.low_ns, b.high_ns)
    if any(x is None for x in bounds):
        return None
    a_lo, a_hi, b_lo, b_hi = bounds
    return a_lo <= b_hi and b_lo <= a_hi


def _percentiles(entry: Entry) -> dict[float, Percentile]:
    return {p.p: p for p in entry.summary.latency.percentiles}


def judged(verdicts: list) -> list[bool]:
    """For each run after the first, whether its difference to the first may be called significant:
    both verdicts ok or imprecise (an imprecise run's intervals are sound, only wider than asked)."""
    return [verdicts[0] in JUDGED and v in JUDGED for v in verdicts[1:]]


def not_judged_lines(runs: list[ComparedRun]) -> list[str]:
    """One line per run that is neither ok nor imprecise, naming its verdict and the differences
    that are therefore not called significant."""
    lines = []
    for i, r in enumerate(runs):
        if r.verdict in JUDGED:
            continue
        verdict = f"is {r.verdict}" if r.verdict else "has no verdict"
        which = "no difference to it is" if i == 0 else f"its difference to {runs[0].label} is not"
        lines.append(f"{NOT_JUDGED}: {r.label} {verdict}, so {which} called significant, whatever the CIs "
                     f"(why: tailwise report {shlex.quote(r.dir)})")
    return lines


def _cell(p: Percentile | None) -> RunPercentile:
    """One run's figure of a percentile in the comparison (all null where it does not report it)."""
    if p is None:
        return RunPercentile(value_ns=None, low_ns=None, high_ns=None, censored=False, samples_needed=None)
    return RunPercentile(value_ns=p.value_ns, low_ns=p.low_ns, high_ns=p.high_ns, censored=bool(p.censored),
                         samples_needed=p.samples_needed)


def compare_doc(entries: list[Entry]) -> Comparison:
    """The comparison as its document (schema tailwise.compare/1). A difference between runs
    that are not both ok or imprecise is not judged: ci_overlap null, the reasons in the note."""
    by_run = [_percentiles(x) for x in entries]
    fair = judged([x.summary.verdict for x in entries])
    ps = sorted({p for r in by_run for p in r})
    rows = []
    for p in ps:
        runs = [_cell(by_run[i].get(p)) for i in range(len(entries))]
        base = runs[0]
        diffs = []
        for i in range(1, len(entries)):
            v, b = runs[i].value_ns, base.value_ns
            diff = None if v is None or b is None else v - b
            diffs.append(Difference(run=i, label=entries[i].label, vs=0, diff_ns=diff,
                                    diff_rel=None if diff is None or not b else diff / b,
                                    ci_overlap=ci_overlap(runs[i], base) if fair[i - 1] else None))
        rows.append({"p": p, "runs": runs, "diffs": diffs})
    info = [_run_info(x) for x in entries]
    return Comparison.model_validate({
        "schema": SCHEMA,
        "tool": {"name": "tailwise", "version": __version__},
        "runs": info,
        "percentiles": rows,
        "note": " ".join([NOTE, *(f"{line[0].upper()}{line[1:]}." for line in not_judged_lines(info))]),
    })


def _run_info(x: Entry) -> ComparedRun:
    s = x.summary
    return ComparedRun(dir=str(x.directory), label=x.label, target=s.target, verdict=s.verdict,
                       confidence=s.latency.confidence, target_rps=s.rate.target_rps,
                       achieved_rps=s.rate.achieved_rps, service=s.config.service, started_at=s.started_at)


# ------------------------------------------------------------------------------------- output

def diff_text(d: Difference, unit=None) -> str:
    """The difference to the first run and its share of it; ``unit``: the screen's (render/output.TimeUnit)."""
    if d.diff_ns is None:
        return "—"
    sign = "+" if d.diff_ns >= 0 else "−"
    rel = "" if d.diff_rel is None else f" ({sign}{abs(d.diff_rel):.1%})"
    return f"{sign}{unit.number(abs(d.diff_ns)) if unit else fmt_ns(abs(d.diff_ns))}{rel}"


def overlap_text(d: Difference) -> str:
    return {True: "yes", False: "no", None: "—"}[d.ci_overlap]


HEADERS = ["percentile", "run", "value", "CI", "Δ vs first", "CIs overlap"]


def table_rows(doc: Comparison, unit=None) -> list[list[list[str]]]:
    """The comparison as plain text, one group of rows per percentile and one row per run (the
    terminal and the HTML share them): a fixed six columns, however many runs. ``unit``: the
    terminal's one unit (its cells are then plain numbers, the unit in the headers). A difference
    not judged says so in the overlap column."""
    fair = judged([r.verdict for r in doc.runs])

    def t(v):
        return "—" if v is None else unit.number(v) if unit else fmt_ns(v)

    groups = []
    for row in doc.percentiles:
        rows = []
        for i, (info, run) in enumerate(zip(doc.runs, row.runs)):
            bounded = run.value_ns is not None
            ci = f"[{t(run.low_ns)}, {t(run.high_ns)}]" if bounded else "—"
            value = (("≥ " if run.censored else "") + t(run.value_ns) if unit and bounded
                     else percentile_text(run))
            d = row.diffs[i - 1] if i else None
            rows.append([f"p{row.p:g}" if i == 0 else "", info.label, value, ci,
                         "(first)" if d is None else diff_text(d, unit),
                         "" if d is None else overlap_text(d) if fair[i - 1] else NOT_JUDGED])
        groups.append(rows)
    return groups


def compare_unit(doc: Comparison):
    """The one unit of the comparison's screen, from its table's figures."""
    from tailwise.render.output import unit_for

    return unit_for([v for row in doc.percentiles for r in row.runs for v in (r.value_ns, r.low_ns, r.high_ns)])


def print_compare(doc: Comparison, console=None) -> None:
    """The runs and the table, as a person reads them, at the screen's width (render/output's
    ``screen_width``): a line per run, then the table — no box, the percentile on its group's
    first row, every latency in one unit (in the headers) — and the note, folded at spaces."""
    from rich.markup import escape
    from rich.table import Table

    from tailwise.render.output import VERDICT_COLOUR, fold, print_table, stdout_console

    console = console or stdout_console()
    unit = compare_unit(doc)
    for i, r in enumerate(doc.runs):
        colour = VERDICT_COLOUR.get(r.verdict, "red")
        rate = "—" if r.achieved_rps is None else f"{r.achieved_rps:,.0f} req/s sent"
        fold(console, f"[bold]{i}. {escape(r.label)}[/] · {escape(r.dir)} · {escape(str(r.target))} · "
                      f"{rate} · verdict [{colour}]{escape(str(r.verdict))}[/]")
    confs = {r.confidence for r in doc.runs}
    conf = f"{confs.pop():.0%} CI" if len(confs) == 1 and None not in confs else "CIs at differing levels"
    fold(console, f"latency percentiles ({conf}) in {unit.name}; differences to {escape(doc.runs[0].label)}")
    t = Table(box=None, pad_edge=False, show_edge=False, padding=(0, 1))
    for h in HEADERS:
        header = f"{h} ({unit.name})" if h in ("value", "CI", "Δ vs first") else h
        # Cells wrap at their spaces, never inside a word (print_table); a label stays whole.
        t.add_column(header, justify="left" if h == "run" else "right", overflow="fold")
    for rows in table_rows(doc, unit):
        for cells in rows:
            styled = [escape(c) for c in cells]
            if cells[5] == "no":
                styled[4], styled[5] = f"[bold]{styled[4]}[/]", "[bold]no[/]"
            t.add_row(*styled)
    print_table(console, t)
    fold(console, NOTE, markup=False)
    for line in not_judged_lines(doc.runs):
        fold(console, f"[red]{escape(line)}[/]")
    if "CIs at differing" in conf:
        fold(console, "[yellow]the runs' confidence levels differ: the overlap test mixes levels[/]")


def compare_html(doc: Comparison, png: Path) -> str:
    """compare.html: the runs, the overlay plot inline and the table — self-contained."""
    runs = [[i, r.label, [{"code": r.dir}], r.target, r.verdict, _rate(r.target_rps), _rate(r.achieved_rps),
             r.service or "—"] for i, r in enumerate(doc.runs)]
    rows = [r for group in table_rows(doc) for r in group]
    return render("compare.html.j2", "tailwise compare", labels=[r.label for r in doc.runs],
                  tool_version=doc.tool.version, note=doc.note,
                  # An imprecise run's intervals are sound (wider than asked): compared as they are.
                  not_measurable=[r.label for r in doc.runs if r.verdict not in ("ok", "imprecise")],
                  runs=table(["#", "label", "directory", "target", "verdict", "offered", "sent", "service"], runs,
                             text_cols=(1, 2, 3, 4, 7), row_classes=["" if r.verdict in ("ok", "imprecise") else "fail" for r in doc.runs],
                             table_id="runs"),
                  percentiles=table(HEADERS, rows, text_cols=(1,), row_classes=["first" if r[0] else "" for r in rows],
                                    table_id="compare"),
                  figure_=figure(png, "compare", "Latency CCDF of each run (every request, down to 1/count) with its "
                                                 "reported percentiles and their confidence intervals."))


def _rate(v) -> str:
    return "—" if v is None else f"{v:,.0f} req/s"


def overlay_figure(entries: list[Entry]):
    curves = []
    for i, x in enumerate(entries):
        label = x.label + ("" if x.summary.verdict == "ok" else f" ({x.summary.verdict})")
        curves.append((label, read_histogram(x.directory / "latency.hdr"),
                       {"color": f"C{i % 10}", "percentiles": x.summary.latency.percentiles}))
    return ccdf_overlay_figure(curves, "latency CCDF per run (markers: reported percentiles with CIs)")


def check_out(out: Path, entries: list[Entry]) -> None:
    """--out must not be a compared directory, nor hold a run's or sweep's summary.json (it would be lost)."""
    target = out.resolve()
    for x in entries:
        if x.directory.resolve() == target:
            raise InputError(f"--out {out} is one of the compared directories: its summary.json would be overwritten",
                             "give --out a new directory")
    existing = out / "summary.json"
    if existing.is_file():
        try:
            schema = json.loads(existing.read_text()).get("schema")
        except (OSError, ValueError, AttributeError):
            schema = None
        if schema in (RUN_SCHEMA, SWEEP_SCHEMA):
            raise InputError(f"--out {out} holds a tailwise run or sweep: its summary.json would be overwritten",
                             "give --out a new directory")


def write_compare(doc: Comparison, entries: list[Entry], out_dir: str | Path) -> list[Path]:
    """compare.png/.svg, compare.html and summary.json (the JSON document) in out_dir; the paths."""
    out = Path(out_dir)
    check_out(out, entries)
    prepare_out(out)
    png, svg = save_figure(overlay_figure(entries), out, "compare")
    html_path = out / "compare.html"
    html_path.write_text(compare_html(doc, png))
    return [png, svg, html_path, jsonfiles.SUMMARY.write_doc(out, doc)]
