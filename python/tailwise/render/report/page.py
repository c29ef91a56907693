"""report.html and the plot files: what a run's or a sweep's page shows (the verdict, the facts,
the tables) filled into the Jinja2 templates of render/templates (autoescaped), and the writing
of every figure and of the page into the --out directory.

render/sweep (the knee and capacity lines) is imported inside ``sweep_facts``: it brings
scipy.optimize (sweep/search), which a run's page does not need.
"""

from __future__ import annotations

import base64
from functools import lru_cache
from pathlib import Path
from typing import Iterable

import jinja2

from tailwise import __version__
from tailwise.render import packets as pk
from tailwise.render.output import AGENT_COLUMNS, agent_cells, barrier_text, percentile_text
from tailwise.render.report.figures import ccdf_points_figure, latency_load_figure, run_figure, save_figure
from tailwise.render.report.reading import (Run, highest_unsaturated, point_dir, run_model, sorted_points,
                                            sweep_model_points)
from tailwise.results.documents.counts import BuiltinServerStats
from tailwise.results.documents.latency import Percentile
from tailwise.results.documents.run import Summary
from tailwise.results.documents.sweep import SweepSummary
from tailwise.results.files import check_out_dir
from tailwise.results.summary import load_summary
from tailwise.spec.units import fmt_ns

#: Plots of a sweep directory, in page order (then the run plots of one point, prefixed).
SWEEP_PLOTS = ("latency_load", "ccdf_points")
POINT_PREFIX = "point-"
TEMPLATES = Path(__file__).parent.parent / "templates"

CAPTIONS = {
    "ccdf": "Latency CCDF on log-log axes: every request from the histogram, down to 1/count (as deep as the sample "
            "reaches); the reported percentiles with their confidence intervals as horizontal bars (hollow: no interval).",
    "cdf": "Latency CDF: every request, and the samples that went into the statistics (after the warm-up; those "
           "tailwise delayed as measured, the upper end of their intervals).",
    "send_lag": "Send lag (actual − intended send time) CCDF: an open-loop load keeps it far below the latency; the "
                "dashed line is the 'late' threshold.",
    "intervals": "p50, p99 and max of every request per interval of intended send time; the shaded span is the "
                 "warm-up left out of the statistics.",
    "latency_load": "The sweep's percentile at each offered load with its confidence interval; the knee, the saturated "
                    "loads and the SLO are marked.",
    "ccdf_points": "Every point's latency CCDF (every request), one curve per offered load; dashed: saturated.",
    "packets": "Lost, reordered and duplicated packets per 100 ms of intended send time (packets.csv), with their "
               "totals and share of the packets sent; dotted, on the right axis: the packets sent.",
}
#: A packet run's CCDF says how deep it goes.
PACKET_CCDF_CAPTION = ("Packet latency CCDF on log-log axes: every packet from the histogram, the axis down to "
                       "1 − F = 1e-6 (p99.9999), the dotted line the deepest this run's packets reach; the reported "
                       "percentiles with their confidence intervals as horizontal bars (hollow: no interval); lost "
                       "packets count at the timeout.")


# ------------------------------------------------------------------------------ HTML pieces

def value_text(p: Percentile | None) -> str:
    """A percentile as a figure, or what it would need: never a number the sample cannot support
    (render/output.percentile_text); "—" for none."""
    return "—" if p is None else percentile_text(p)


@lru_cache(maxsize=1)
def _templates():
    """The pages' Jinja2 templates (render/templates): autoescaped, so every value from the JSON is
    text; None renders empty."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES),
                              autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                              finalize=lambda v: "" if v is None else v)


def render(template: str, title: str, **context) -> str:
    """A complete HTML document from its template: inline CSS, no script, nothing fetched."""
    return _templates().get_template(template).render(version=__version__, title=title, **context)


def table(headers: list[str], rows: list[list], text_cols: Iterable[int] = (), row_classes: list[str] | None = None,
          table_id: str | None = None) -> dict:
    """An HTML table for the templates (macros.html.j2): each cell text, or a list of parts."""
    return {"headers": headers, "rows": rows, "text_cols": set(text_cols), "row_classes": row_classes, "id": table_id}


def figure(png: Path, name: str, caption: str) -> dict:
    """A plot inlined as a PNG data: URI (so the page is self-contained), with a link to its SVG."""
    return {"name": name, "caption": caption, "data": base64.b64encode(png.read_bytes()).decode("ascii"),
            "svg": png.with_suffix(".svg").name}


def _text(v) -> str:
    return "" if v is None else str(v)


def _rps(v) -> str:
    return "—" if v is None else f"{v:,.0f} req/s"


def _num(v, fmt: str) -> str:
    return "—" if v is None else fmt.format(v)


# ------------------------------------------------------------------------------------ a run

def verdict(summary: Summary) -> dict:
    """The verdict and what to say first when the run is not measurable."""
    name = summary.verdict or "unknown"
    return {"verdict": name, "ok": name == "ok" and not summary.error, "not_measurable": name == "not-measurable",
            "imprecise": name == "imprecise" and not summary.error,
            "precision": summary.precision.detail if summary.precision else None,
            "failed": [c.name for c in summary.checks if not c.ok],
            "error": summary.error, "interrupted": summary.interrupted}


def percentile_table(summary: Summary, model: dict | None) -> dict:
    lat = summary.latency
    window = {p.p: p.value_ns for p in lat.window.percentiles or []}
    mvals = {q["p"]: q["value_ns"] for q in ((model or {}).get("model") or {}).get("percentiles") or []}
    headers = ["percentile", "value", "CI low", "CI high", "n_eff", "every request, same window"]
    if mvals:
        headers.append("queueing model")
    rows = []
    for p in lat.percentiles:
        n_eff = p.n_effective
        row = [f"p{p.p:g}", value_text(p), fmt_ns(p.low_ns), fmt_ns(p.high_ns),
               "—" if n_eff is None else f"{n_eff:,.0f}", fmt_ns(window.get(p.p))]
        if mvals:
            row.append(fmt_ns(next((v for q, v in mvals.items() if abs(q - p.p) < 1e-9), None)))
        rows.append(row)
    conf, used = lat.confidence, lat.samples
    return {"source": lat.source, "used": f"{used:,}", "confidence": f"{conf:.0%}",
            "table": table(headers, rows, table_id="percentiles")}


def kinds_table(summary: Summary) -> dict:
    """Each kind of request (``by_request``: gets and sets, several http:// requests): its share,
    samples and every reported percentile with its interval; no rows with one kind."""
    rows = [[k.name, f"{k.share:.1%}", f"{k.count:,}", f"p{p.p:g}", value_text(p), fmt_ns(p.low_ns),
             fmt_ns(p.high_ns), "—" if p.n_effective is None else f"{p.n_effective:,.0f}"]
            for k in summary.by_request or [] for p in k.percentiles]
    return table(["request", "share", "samples", "percentile", "value", "CI low", "CI high", "n_eff"], rows,
                 text_cols=(0,), table_id="by-request")


def checks_table(summary: Summary) -> dict:
    checks = summary.checks
    rows = [[c.name, [{"ok": "ok"}] if c.ok else [{"bad": "FAILED"}], c.detail, c.remedy or ""] for c in checks]
    return table(["check", "result", "detail", "remedy"], rows, text_cols=(0, 1, 2, 3),
                 row_classes=["" if c.ok else "fail" for c in checks], table_id="checks")


def thresholds_table(summary: Summary) -> dict:
    rows = [[t.threshold, t.status, t.detail] for t in summary.thresholds]
    return table(["threshold", "status", "detail"], rows, text_cols=(0, 1, 2), table_id="thresholds")


def agents_table(summary: Summary) -> dict:
    """A run on agents: each agent's address, role, share, achieved rate, clock offset, errors and
    timeouts, and why it failed (render/output.py, ``agent_cells``); no rows otherwise."""
    agents = summary.agents or []
    return table(list(AGENT_COLUMNS), [agent_cells(a) for a in agents], text_cols=(0, 1, 6),
                 row_classes=["fail" if a.error else "" for a in agents], table_id="agents")


def barrier_facts(summary: Summary) -> list:
    """How together the agents started (no line without agents)."""
    b = summary.barrier
    return [f"start barrier: {barrier_text(b)}"] if summary.agents and b else []


def run_facts(summary: Summary) -> list:
    """The run's load and target, one line each."""
    r, cfg = summary.rate, summary.config
    lines: list = [f"offered {_rps(r.target_rps)}, sent {_rps(r.achieved_rps)}, "
                   f"completed {_rps(r.completed_rps)} over {_num(r.duration_s, '{:.2f} s')}"]
    if b := cfg.builtin_server:
        lines.append(["built-in server: service ", {"code": b.service}, f", {_text(b.workers)} worker(s)"])
    ts = summary.target_stats
    if isinstance(ts, BuiltinServerStats) and ts.utilisation is not None:
        lines.append(f"server utilisation {ts.utilisation:.3f}, effective service {fmt_ns(ts.effective_service_ns)}")
    if cfg.command:
        lines.append(["command: ", {"code": cfg.command}])
    return lines


def run_page(run: Run, model: dict) -> dict:
    """What a run's section of a page shows: verdict, facts, percentiles, checks, thresholds,
    for a run on agents the agents and their start barrier, for a packet run its packets block."""
    return {"verdict": verdict(run.summary), "facts": run_facts(run.summary),
            "percentiles": percentile_table(run.summary, model), "model_note": model["note"],
            "kinds": kinds_table(run.summary),
            "checks": checks_table(run.summary), "thresholds": thresholds_table(run.summary),
            "agents": agents_table(run.summary), "barrier": barrier_facts(run.summary),
            "packets": pk.report_lines(run.directory, run.summary)}


def caption(run: Run, name: str) -> str:
    return PACKET_CCDF_CAPTION if name == "ccdf" and run.packets else CAPTIONS[name]


def run_plots(run: Run, out_dir: Path, prefix: str = "", with_model: bool = True) -> tuple[list[tuple[str, Path]], dict]:
    """Write a run's plots; returns ([(name, png path)], model dict)."""
    model = run_model(run, with_model)
    out = []
    for name in run.plots:
        png, _ = save_figure(run_figure(run, name, model), out_dir, prefix + name)
        out.append((name, png))
    return out, model


def run_report(directory: Path, out_dir: Path, summary: Summary, with_model: bool = True) -> list[Path]:
    """Plots and report.html for one run directory."""
    run = Run.read(directory, summary)
    plots, model = run_plots(run, out_dir, with_model=with_model)
    html_path = out_dir / "report.html"
    html_path.write_text(render("run.html.j2", f"tailwise report: {summary.target}", summary=summary,
                                tool_version=summary.tool.version, directory=directory,
                                run=run_page(run, model), figures=[figure(png, name, caption(run, name)) for name, png in plots]))
    return [p for _, png in plots for p in (png, png.with_suffix(".svg"))] + [html_path]


# ---------------------------------------------------------------------------------- a sweep

def points_table(doc: SweepSummary) -> dict:
    rows, classes = [], []
    for p in sorted_points(doc):
        t = p.target
        p50 = next((q for q in p.percentiles if q.p == 50.0), None)
        slo = {True: "yes", False: "no", None: "—"}[p.meets_slo]
        ci = f"[{fmt_ns(t.low_ns if t else None)}, {fmt_ns(t.high_ns if t else None)}]"
        rows.append([p.index, _rps(p.rate_rps), _rps(p.achieved_rps), p.verdict, value_text(t), ci, value_text(p50),
                     p.saturation_reason or "no", slo, ", ".join(p.failed_checks) or "—", [{"code": p.dir}]])
        classes.append("fail" if p.saturated or p.verdict == "not-measurable" else "")
    return table(["#", "offered", "sent", "verdict", f"p{doc.percentile:g}", "CI", "p50", "saturated", "meets SLO",
                  "failed checks", "directory"], rows, text_cols=(3, 7, 9, 10), row_classes=classes, table_id="points")


def sweep_facts(doc: SweepSummary) -> list:
    """The sweep's mode, knee, saturation, capacity and SLO, one line each."""
    from tailwise.render.sweep import capacity_text, knee_text

    lines: list = [f"mode {_text(doc.mode)}, stopped: {_text(doc.stopped)}, complete: {_text(doc.complete)}"]
    knee, sat, slo = doc.knee, doc.saturation, doc.slo
    lines.append(knee_text(doc) if knee else "knee: none found")
    lines.append(f"saturated at {_rps(sat.rate_rps)}: {_text(sat.reason)}" if sat else "saturation: not reached")
    if (capacity := capacity_text(doc)) is not None:
        lines.append(capacity)
    if slo:
        lines.append(f"SLO {_text(slo.threshold)}: {_text(slo.detail)}")
    if doc.error:
        lines.append([{"bad": f"error: {doc.error}"}])
    if doc.interrupted:
        lines.append([{"bad": "the sweep was interrupted: the points are partial"}])
    if cmd := doc.config.command:
        lines.append(["command: ", {"code": cmd}])
    return lines


def best_point(directory: Path, doc: SweepSummary, out_dir: Path,
               with_model: bool = True) -> tuple[dict | None, list[tuple[str, Path]]]:
    """The section of the sweep's highest unsaturated point (its run's page, plots written with
    ``POINT_PREFIX``) and those plots; (None, []) when every point saturated."""
    best = highest_unsaturated(directory, doc)
    if best is None:
        return None, []
    run = Run.read(point_dir(directory, best))
    plots, model = run_plots(run, out_dir, prefix=POINT_PREFIX, with_model=with_model)
    section = run_page(run, model) | {
        "rate": _rps(best.rate_rps), "dir": best.dir, "directory": point_dir(directory, best),
        "figures": [figure(png, POINT_PREFIX + name, caption(run, name)) for name, png in plots]}
    return section, [(POINT_PREFIX + name, png) for name, png in plots]


def sweep_report(directory: Path, out_dir: Path, doc: SweepSummary, with_model: bool = True) -> list[Path]:
    """Plots and report.html for a sweep directory."""
    model_points = sweep_model_points(directory, doc) if with_model else []
    written: list[tuple[str, Path]] = [
        ("latency_load", save_figure(latency_load_figure(doc, model_points), out_dir, "latency_load")[0]),
        ("ccdf_points", save_figure(ccdf_points_figure(directory, doc), out_dir, "ccdf_points")[0])]
    figures = [figure(png, name, CAPTIONS[name]) for name, png in written]
    point, point_plots = best_point(directory, doc, out_dir, with_model)
    written += point_plots
    html_path = out_dir / "report.html"
    html_path.write_text(render("sweep.html.j2", f"tailwise sweep report: {doc.target}", doc=doc,
                                tool_version=doc.tool.version, directory=directory,
                                sweep_facts=sweep_facts(doc), points=points_table(doc), figures=figures, best=point))
    return [p for _, png in written for p in (png, png.with_suffix(".svg"))] + [html_path]


# --------------------------------------------------------------------------------- the report

def prepare_out(out_dir: Path) -> Path:
    return check_out_dir(out_dir, "write the report into", "give --out a writable directory")


def write_report(directory: str | Path, out_dir: str | Path | None = None, with_model: bool = True) -> list[Path]:
    """The report of a run or sweep directory, written into out_dir (default: the directory itself).
    Returns the paths written: every plot's PNG and SVG, then report.html."""
    d = Path(directory)
    doc = load_summary(d)
    out = prepare_out(Path(out_dir) if out_dir is not None else d)
    if isinstance(doc, SweepSummary):
        return sweep_report(d, out, doc, with_model)
    return run_report(d, out, doc, with_model)
