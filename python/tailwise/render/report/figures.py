"""The report's matplotlib figures, one function each: a run's CCDF, CDF, send lag, percentiles
over time and (a packet run) loss over time; a sweep's latency vs load and its points' CCDFs;
several CCDFs overlaid (also `tailwise compare`'s). ``save_figure`` writes one as PNG and SVG.

matplotlib is imported inside the functions that need it, with the Agg backend and without
pyplot: importing the report costs no matplotlib until a plot is drawn, and no display is needed.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from tailwise.render import packets as pk
from tailwise.render.report.reading import Run, ccdf, cdf, point_dir, read_histogram, read_intervals, sorted_points
from tailwise.results.documents.latency import Percentile
from tailwise.results.documents.sweep import Point, SweepSummary

#: Curves are thinned to points this far apart (decades) on log axes: the SVG stays small.
THIN_DECADES = 0.004
PNG_DPI = 110


def thin(x: np.ndarray, y: np.ndarray, log_y: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Drop points closer than THIN_DECADES to the last kept one (the first and last stay): the
    curve looks the same and its SVG is a fraction of the size."""
    if len(x) <= 2:
        return x, y
    lx = np.log10(np.maximum(x, 1e-9))
    ly = np.log10(np.maximum(y, 1e-300)) if log_y else y * 10  # linear y: steps of 0.0004
    keep, last = [0], 0
    for i in range(1, len(x) - 1):
        if abs(lx[i] - lx[last]) > THIN_DECADES or abs(ly[i] - ly[last]) > THIN_DECADES:
            keep.append(i)
            last = i
    keep.append(len(x) - 1)
    return x[keep], y[keep]


def _figure(width_in: float = 7.5, height_in: float = 4.6):
    """A matplotlib Figure on the Agg backend, without pyplot's global state."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), layout="constrained")
    return fig, fig.add_subplot()


def save_figure(fig, out_dir: Path, name: str) -> list[Path]:
    """NAME.png and NAME.svg in out_dir; the paths written."""
    import matplotlib

    png, svg = out_dir / f"{name}.png", out_dir / f"{name}.svg"
    fig.savefig(png, dpi=PNG_DPI, metadata={"Software": None})
    with matplotlib.rc_context({"svg.hashsalt": "tailwise"}):  # stable ids: the same data, the same SVG
        fig.savefig(svg, metadata={"Date": None})
    return [png, svg]


def _us(ns):
    return np.asarray(ns, dtype=float) / 1e3


def _no_data(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _tail_axis(ax, floor: float) -> None:
    """Log y from 1 down just below ``floor`` (1/count: the deepest the sample reaches), ticks at
    powers of ten labelled with their percentile."""
    low = max(floor, 1e-12) / 3
    ax.set_yscale("log")
    ax.set_ylim(low, 1.5)
    ticks = [10.0 ** -k for k in range(0, int(math.floor(-math.log10(low))) + 1)]
    labels = ["1"] + [f"{t:g}\n(p{100 * (1 - t):g})" for t in ticks[1:]]
    ax.set_yticks(ticks, labels)
    ax.minorticks_off()
    ax.set_ylabel("1 − F(latency)  (share of requests at or above)")
    ax.grid(True, which="major", alpha=0.3)


def _plain(v: float, _pos=None) -> str:
    return f"{v:,.0f}" if v >= 1 else f"{v:g}"


def _plain_log_y(ax) -> None:
    """Latency ticks as plain numbers (40, 1,000), not 4×10¹; the minor ticks labelled too when
    the axis spans under ~1.5 decades (otherwise a narrow range would show one label or none)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    low, high = ax.get_ylim()
    ax.yaxis.set_major_formatter(FuncFormatter(_plain))
    narrow = low > 0 and math.log10(high / low) < 1.5
    ax.yaxis.set_minor_formatter(FuncFormatter(_plain) if narrow else NullFormatter())


def _rate_axis(ax) -> None:
    """Req/s ticks as 10k, 1.5M: a sweep's rates read at a glance."""
    from matplotlib.ticker import FuncFormatter

    def short(v, _pos):
        for div, unit in ((1e6, "M"), (1e3, "k")):
            if abs(v) >= div:
                return f"{v / div:g}{unit}"
        return f"{v:g}"

    ax.xaxis.set_major_formatter(FuncFormatter(short))


def draw_percentile_marks(ax, percentiles: list[Percentile], colour, label: str | None) -> None:
    """The reported percentiles at height 1 − p/100 with their CI as horizontal error bars;
    a value without an interval is a hollow marker, a censored one (a lower bound) points right,
    an unsupported one (null) is left out."""
    first = True
    for p in percentiles:
        v = p.value_ns
        if v is None:
            continue
        lo, hi = p.low_ns, p.high_ns
        y = 1.0 - p.p / 100.0
        if y <= 0:
            continue
        bounded = lo is not None and hi is not None
        xerr = [[max(v - lo, 0) / 1e3], [max(hi - v, 0) / 1e3]] if bounded else None
        marker = ">" if p.censored else "o"  # censored: a lower bound, the truth is to the right
        bars = ax.errorbar([v / 1e3], [y], xerr=xerr, fmt=marker, ms=5, capsize=4, color=colour, zorder=5,
                           mfc=colour if bounded else "white", label=label if first else None)
        bars[0].set_gid(f"percentile-p{p.p:g}")
        first = False


def _ccdf_floor(hists: Iterable) -> float:
    return min((1.0 / h.total for h in hists if h is not None), default=1e-4)


# ------------------------------------------------------------------------------------ a run

def run_figure(run: Run, name: str, model: dict):
    """One of a run's plots (``run.plots``), by its name."""
    makers: dict[str, Callable[[], Any]] = {
        "ccdf": lambda: ccdf_figure(run, model),
        "cdf": lambda: cdf_figure(run),
        "send_lag": lambda: send_lag_figure(run),
        "intervals": lambda: intervals_figure(run),
        "packets": lambda: packet_loss_figure(run),
    }
    return makers[name]()


def ccdf_figure(run: Run, model: dict | None):
    """Latency CCDF, log-log: every request, the reported percentiles with CIs, the model."""
    fig, ax = _figure()
    if run.latency is None:
        _no_data(ax, "no every-request histogram (latency.hdr) in this directory")
        return fig
    x, y = thin(*ccdf(run.latency))
    n = run.latency.total
    ax.plot(_us(x), y, drawstyle="steps-pre", lw=1.6, color="C0", label=f"every request ({n:,})", gid="ccdf-every-request")
    draw_percentile_marks(ax, run.percentiles, "C3",
                          f"reported percentiles, {run.confidence:.0%} CI (samples used)")
    m = (model or {}).get("model")
    if m:
        pts = [(q["value_ns"], 1 - q["p"] / 100) for q in m["percentiles"] if q["value_ns"] is not None]
        if pts:
            mx, my = zip(*pts)
            ax.plot(_us(mx), my, "--", color="C2", lw=1.4, gid="model-curve",
                    label=f"model: {m['shape']} at ρ = {m['load']:.2f}")
    ax.set_xscale("log")
    ax.set_xlabel("latency from intended send time (µs)")
    packets = run.packets
    if packets:
        packet_ccdf_marks(ax, run, n)
    _tail_axis(ax, min(1.0 / n, pk.CCDF_DEPTH) if packets else 1.0 / n)
    what = "packet latency CCDF" if packets else "latency CCDF"
    ax.set_title(f"{what} — {run.summary.target}", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def packet_ccdf_marks(ax, run: Run, n: int) -> None:
    """A packet run's CCDF: how deep its packets reach (1/count, the axis goes on to 1e-6), and,
    when packets were lost, the timeout they are counted at (a lower bound of their latency)."""
    ax.axhline(1.0 / n, color="0.5", lw=0.8, ls=":", gid="ccdf-depth",
               label=f"one packet in {n:,}: the deepest this run reaches")
    lost = run.packets.lost if run.packets else 0
    timeout_ns = run.summary.config.timeout_ns
    if lost and timeout_ns:
        ax.axvline(timeout_ns / 1e3, color="C3", lw=0.9, ls="--", gid="ccdf-timeout",
                   label=f"timeout {timeout_ns / 1e3:,.0f} µs: {lost:,} lost packets counted here (a lower bound)")


def packet_loss_figure(run: Run):
    """Lost, reordered and duplicated packets per 100 ms (packets.csv)."""
    fig, ax = _figure(7.5, 4.0)
    iv, problem = pk.read_packets_csv(run.directory)
    pk.loss_figure(fig, ax, iv, problem, _no_data)
    return fig


def cdf_figure(run: Run):
    """Latency CDF: every request, and the samples the statistics used."""
    fig, ax = _figure()
    if run.latency is None:
        _no_data(ax, "no every-request histogram (latency.hdr) in this directory")
        return fig
    x, y = thin(*cdf(run.latency), log_y=False)
    ax.plot(_us(x), y, drawstyle="steps-post", lw=1.6, color="C0", label=f"every request ({run.latency.total:,})")
    used = run.used_latencies
    if used is not None and len(used):
        idx = np.unique(np.linspace(0, len(used) - 1, min(len(used), 4000)).astype(int))
        ax.plot(_us(used[idx]), (idx + 1) / len(used), lw=1.2, color="C1", alpha=0.9,
                label=f"samples used in the statistics ({len(used):,})")
    for q in (0.5, 0.9, 0.99):
        ax.axhline(q, color="0.7", lw=0.7, ls=":")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.01)
    ax.set_xlabel("latency from intended send time (µs)")
    ax.set_ylabel("F(latency)  (share of requests at or below)")
    ax.grid(True, alpha=0.3)
    ax.set_title("latency CDF", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return fig


def send_lag_figure(run: Run):
    """Send lag (sent − intended) CCDF: how late the engine sent, with the 'late' threshold."""
    fig, ax = _figure()
    h = run.send_lag
    if h is None:
        _no_data(ax, "no send-lag histogram (send_lag.hdr) in this directory")
        return fig
    x, y = thin(*ccdf(h))
    ax.plot(_us(x), y, drawstyle="steps-pre", lw=1.6, color="C4", label=f"every request ({h.total:,})")
    late_ns = run.summary.send_lag.late_threshold_ns
    if late_ns:
        counters = run.summary.counters
        late, sent = counters.late, counters.sent or h.total
        share = f": {late / sent:.2%} of requests later" if late is not None and sent else ""
        ax.axvline(late_ns / 1e3, color="C3", ls="--", lw=1, label=f"late threshold {late_ns / 1e3:g} µs{share}")
    ax.set_xscale("log")
    ax.set_xlabel("send lag: actual − intended send time (µs)")
    _tail_axis(ax, 1.0 / h.total)
    ax.set_ylabel("1 − F(send lag)")
    ax.set_title("send lag (open-loop schedule kept?)", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def intervals_figure(run: Run):
    """p50/p99/max per interval of intended send time (every request), the statistics' window shaded."""
    fig, ax = _figure(7.5, 4.0)
    iv = read_intervals(run.directory / "latency.hlog", run.summary)
    if iv is None:
        _no_data(ax, "no interval log (latency.hlog) in this directory")
        return fig
    t = iv.start_s + iv.length_s / 2
    for series, name, colour in ((iv.max_ns, "max", "0.55"), (iv.p99_ns, "p99", "C3"), (iv.p50_ns, "p50", "C0")):
        ax.plot(t, _us(series), marker=".", ms=3, lw=1.1, color=colour, label=name)
    window = run.summary.methodology.window_ns or None
    if window and len(window) == 2 and window[0]:
        ax.axvspan(0, window[0] / 1e9, color="0.85", alpha=0.6, lw=0, label="warm-up (left out)")
    ax.set_yscale("log")
    _plain_log_y(ax)
    ax.set_xlabel(f"intended send time (s), one point per {iv.length_s * 1e3:.0f} ms")
    ax.set_ylabel("latency (µs)")
    ax.grid(True, alpha=0.3)
    ax.set_title("per-interval percentiles over time (every request)", fontsize=10)
    ax.legend(fontsize=8, loc="upper right", ncols=4)
    return fig


# ---------------------------------------------------------------------------------- a sweep

def _target_value(point: Point) -> tuple[float | None, float | None, float | None]:
    t = point.target
    return (t.value_ns, t.low_ns, t.high_ns) if t else (None, None, None)


def _slo_limit_ns(doc: SweepSummary) -> float | None:
    for p in doc.points:
        if p.slo and p.slo.limit_ns is not None:
            return p.slo.limit_ns
    return None


def latency_load_figure(doc: SweepSummary, model_points: list[tuple[float, float]]):
    """The sweep's percentile vs offered load with CI bars; knee, saturation, SLO marked."""
    fig, ax = _figure(7.5, 4.8)
    pct = doc.percentile
    points = sorted_points(doc)
    if not points:
        _no_data(ax, "the sweep has no points yet")
        return fig
    for measurable in (True, False):
        # An imprecise point is a measured point with its interval (issue 32).
        sel = [p for p in points if (p.verdict in ("ok", "imprecise")) == measurable
               and _target_value(p)[0] is not None]
        if not sel:
            continue
        xs = [p.rate_rps for p in sel]
        vs = [_target_value(p)[0] / 1e3 for p in sel]
        lo = [(v - (_target_value(p)[1] / 1e3 if _target_value(p)[1] is not None else v)) for p, v in zip(sel, vs)]
        hi = [((_target_value(p)[2] / 1e3 if _target_value(p)[2] is not None else v) - v) for p, v in zip(sel, vs)]
        bars = ax.errorbar(xs, vs, yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], fmt="o" if measurable else "s",
                           mfc="C0" if measurable else "white", color="C0" if measurable else "C3", capsize=4, ms=6,
                           label=f"p{pct:g}, CI ({'verdict ok' if measurable else 'not measurable'})")
        bars[0].set_gid("load-points-ok" if measurable else "load-points-not-measurable")
    line = [(p.rate_rps, _target_value(p)[0] / 1e3) for p in points if _target_value(p)[0] is not None]
    if line:
        ax.plot(*zip(*line), color="C0", lw=0.8, alpha=0.5)
    p50 = [(p.rate_rps, q.value_ns / 1e3) for p in points for q in p.percentiles
           if q.p == 50.0 and q.value_ns is not None]
    if p50 and pct != 50.0:
        ax.plot(*zip(*p50), marker=".", color="0.5", lw=0.8, label="p50")
    missing = [p.rate_rps for p in points if _target_value(p)[0] is None]
    for i, x in enumerate(missing):
        ax.axvline(x, color="C3", lw=0.6, ls=":", alpha=0.7, gid=f"load-unsupported-{i}")
    if missing:
        ax.plot([], [], color="C3", lw=0.6, ls=":", label=f"p{pct:g} not supported by the sample")
    if model_points:
        ax.plot(*zip(*[(x, v / 1e3) for x, v in model_points]), "--", marker="x", color="C2", lw=1, gid="model-curve",
                label=f"queueing model p{pct:g} (at measured utilisation)")
    knee, sat, slo = doc.knee, doc.saturation, doc.slo
    if knee and knee.rate_rps is not None:
        ax.axvline(knee.rate_rps, color="C1", ls="--", lw=1.2, label=f"knee {knee.rate_rps:,.0f} req/s", gid="knee")
    top = max(p.rate_rps for p in points)
    ax.set_xlim(min(p.rate_rps for p in points) - 0.06 * top, top * 1.08)
    if sat and sat.rate_rps is not None:  # saturated from there on: shade to the edge
        ax.axvspan(sat.rate_rps, top * 1.08, color="C3", alpha=0.12, lw=0, gid="saturation",
                   label=f"saturated from {sat.rate_rps:,.0f} req/s")
    limit = _slo_limit_ns(doc)
    if slo:
        if limit is not None:
            ax.axhline(limit / 1e3, color="C5", ls="-.", lw=1.2, label=f"SLO {slo.threshold}", gid="slo")
        if slo.rate_rps is not None:
            ax.axvline(slo.rate_rps, color="C5", ls=":", lw=1.4, label=f"meets SLO up to {slo.rate_rps:,.0f} req/s")
    ax.set_yscale("log")
    _plain_log_y(ax)
    ax.set_xlabel("offered load (req/s)")
    _rate_axis(ax)
    ax.set_ylabel(f"p{pct:g} latency (µs)")
    ax.grid(True, alpha=0.3)
    ax.set_title(f"latency vs load — {doc.target}", fontsize=10)
    ax.legend(fontsize=7.5, loc="upper left")
    return fig


def ccdf_points_figure(directory: Path, doc: SweepSummary):
    """Every point's CCDF (every request), one curve per offered load in viridis order; dashed:
    saturated."""
    import matplotlib

    points = sorted_points(doc)
    cmap = matplotlib.colormaps["viridis"]
    curves = []
    for i, p in enumerate(points):
        h = read_histogram(point_dir(directory, p) / "latency.hdr")
        label = f"{p.rate_rps:,.0f} req/s" + (" (saturated)" if p.saturated else "")
        curves.append((label, h, {"color": cmap(i / max(len(points) - 1, 1) * 0.9), "ls": "--" if p.saturated else "-"}))
    return ccdf_overlay_figure(curves, "latency CCDF at each load")


def ccdf_overlay_figure(curves: list[tuple[str, Any, dict]], title: str, percentiles: bool = True):
    """Several CCDFs on one log-log plot (KBNets Fig. 3 style): (label, histogram, style) each,
    the reported percentiles of each with CIs in the curve's colour when given in style (a list
    of the summaries' ``Percentile``)."""
    fig, ax = _figure(7.5, 4.8)
    drawn = [(label, h, style) for label, h, style in curves if h is not None]
    if not drawn:
        _no_data(ax, "no every-request histogram (latency.hdr) in these directories")
        return fig
    for i, (label, h, style) in enumerate(drawn):
        x, y = thin(*ccdf(h))
        colour = style.get("color")
        ax.plot(_us(x), y, drawstyle="steps-pre", lw=1.5, color=colour, ls=style.get("ls", "-"), label=label,
                gid=f"ccdf-{i}")
        if percentiles and style.get("percentiles"):
            draw_percentile_marks(ax, style["percentiles"], colour, None)
    ax.set_xscale("log")
    ax.set_xlabel("latency from intended send time (µs)")
    _tail_axis(ax, _ccdf_floor(h for _, h, _ in drawn))
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    return fig
