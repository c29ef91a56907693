"""`tailwise report DIR`: plots (PNG and SVG) and one self-contained HTML page for a results directory.

A run directory gets the latency CCDF on log-log axes (every request, down to 1/count, the
reported percentiles with their CIs, and the queueing model when the target was the built-in
server), the CDF, the send-lag distribution and the per-interval percentiles over time; a packet
run (udp+flow://) its CCDF down to p99.9999 and its loss and reordering over time (render/packets.py)
too. A sweep
directory gets latency vs load with CI bars (knee, saturation, SLO), the points' CCDFs overlaid,
and the run plots of its highest unsaturated point.

The page embeds every plot as a PNG ``data:`` URI: it loads nothing else (no network, no
script), so it can be mailed or archived alone. matplotlib is imported only here, lazily, with
the Agg backend: the CLI starts fast and no display is needed.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from tailwise import __version__, _core
from tailwise.errors import InputError
from tailwise.render import packets as pk
from tailwise.results.files import SWEEP_SCHEMA, load_summary_json as load_summary

#: Customers simulated for the model curve: enough for p99.99 (20 beyond it), ~10 ms of work.
MODEL_CUSTOMERS = 200_000
#: The model's curve is drawn down to 1 − F = this at the least (20 customers beyond it).
MODEL_FLOOR = 20 / MODEL_CUSTOMERS
#: Plots of a run directory, in page order.
RUN_PLOTS = ("ccdf", "cdf", "send_lag", "intervals")
#: A packet run's plots: the run's, then loss and reordering over time.
PACKET_RUN_PLOTS = RUN_PLOTS + ("packets",)
#: Plots of a sweep directory, in page order (then the run plots of one point, prefixed).
SWEEP_PLOTS = ("latency_load", "ccdf_points")
POINT_PREFIX = "point-"
#: Curves are thinned to points this far apart (decades) on log axes: the SVG stays small.
THIN_DECADES = 0.004
PNG_DPI = 110


# ----------------------------------------------------------------------------------- loading

def read_histogram(path: Path) -> _core.Histogram | None:
    """An HdrHistogram written by `tailwise run` (base64 of V2 compressed), or None if absent, corrupt or empty."""
    try:
        h = _core.Histogram.decode(base64.b64decode(path.read_bytes().strip(), validate=True))
    except (OSError, ValueError):  # missing, or not a histogram: the report goes out without it
        return None
    return h if h.total > 0 else None


def histogram_buckets(h: _core.Histogram) -> tuple[np.ndarray, np.ndarray]:
    """(value_ns, count) of each recorded bucket, ascending; the value is the bucket's highest
    equivalent value, so a percentile read off the curve is the one HdrHistogram reports."""
    buckets = np.asarray(h.recorded(), dtype=float).reshape(-1, 2)
    return buckets[:, 0], buckets[:, 1]


def ccdf(h) -> tuple[np.ndarray, np.ndarray]:
    """(x_ns, P(X ≥ x)) from the histogram: from 1 down to the largest value's share (≥ 1/count),
    i.e. exactly as deep as the sample reaches — no point beyond the last request."""
    values, counts = histogram_buckets(h)
    total = counts.sum()
    at_or_above = (total - np.concatenate(([0.0], np.cumsum(counts)[:-1]))) / total
    return values, at_or_above


def cdf(h) -> tuple[np.ndarray, np.ndarray]:
    """(x_ns, F(x) = P(X ≤ x)) from the histogram."""
    values, counts = histogram_buckets(h)
    return values, np.cumsum(counts) / counts.sum()


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


def read_used_latencies(directory: Path) -> np.ndarray | None:
    """Latencies (ns) of the samples that went into the statistics (``used`` = 1, answered), or None."""
    from tailwise.results.rows import Flag
    from tailwise.results.dataset import read_samples

    if not any((directory / f"samples.{ext}").is_file() for ext in ("parquet", "csv")):
        return None
    try:
        df = read_samples(directory, ["latency_ns", "flags", "used"])
    except (OSError, ValueError, KeyError, ImportError):
        return None
    keep = (df["used"].to_numpy() == 1) & ((df["flags"].to_numpy() & int(Flag.CENSORED)) == 0)
    return np.sort(df["latency_ns"].to_numpy()[keep].astype(float))


@dataclass
class Intervals:
    """Every-request percentiles per interval of intended send time (latency.hlog)."""

    start_s: np.ndarray
    length_s: float
    count: np.ndarray
    p50_ns: np.ndarray
    p99_ns: np.ndarray
    max_ns: np.ndarray


def read_intervals(path: Path, summary: dict) -> Intervals | None:
    """latency.hlog as arrays, or None when it is missing, unreadable or empty."""
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    hist = (summary.get("latency") or {}).get("histogram") or {}
    ref = HdrHistogram(hist.get("lowest_ns") or _core.HIST_LOWEST_NS, hist.get("highest_ns") or _core.HIST_MAX_NS,
                       hist.get("significant_digits") or _core.HIST_SIGFIG)
    rows = []
    try:
        reader = HistogramLogReader(str(path), ref)
        while (h := reader.get_next_interval_histogram()) is not None:
            n = h.get_total_count()
            start_s = h.get_start_time_stamp() / 1e3 - (reader.base_time_sec or 0.0)
            length_s = (h.get_end_time_stamp() - h.get_start_time_stamp()) / 1e3
            pick = (lambda p: h.get_value_at_percentile(p)) if n else (lambda p: math.nan)
            rows.append((start_s, length_s, n, pick(50), pick(99), h.get_max_value() if n else math.nan))
    except Exception:  # a truncated or foreign log: plot the intervals read before the damage
        pass
    if not rows:
        return None
    a = np.asarray(rows, dtype=float)
    return Intervals(a[:, 0], float(np.median(a[:, 1])), a[:, 2], a[:, 3], a[:, 4], a[:, 5])


@dataclass
class Run:
    """One run directory, its files read once."""

    directory: Path
    summary: dict
    latency: Any = None  # _core.Histogram of every request, or None
    send_lag: Any = None
    _used: Any = field(default=False, repr=False)

    @classmethod
    def read(cls, directory: Path, summary: dict | None = None) -> "Run":
        d = Path(directory)
        s = summary if summary is not None else load_summary(d)
        return cls(d, s, read_histogram(d / "latency.hdr"), read_histogram(d / "send_lag.hdr"))

    @property
    def used_latencies(self) -> np.ndarray | None:
        if self._used is False:
            self._used = read_used_latencies(self.directory)
        return self._used

    @property
    def packets(self) -> dict | None:
        """The summary's ``packets`` object: a packet run's; None for any other run."""
        return pk.packets_of(self.summary)

    @property
    def plots(self) -> tuple[str, ...]:
        return PACKET_RUN_PLOTS if self.packets else RUN_PLOTS

    @property
    def percentiles(self) -> list[dict]:
        return (self.summary.get("latency") or {}).get("percentiles") or []

    @property
    def confidence(self) -> float:
        return (self.summary.get("latency") or {}).get("confidence") or 0.95


# ------------------------------------------------------------------------------------- model

def model_for(summary: dict, ps: Iterable[float]) -> dict:
    """The queueing model's percentiles for a run against the built-in server (`tailwise serve`).

    Returns {"model": result of model_percentiles | None, "note": one line saying which model
    at which load, or why there is none}. The load is the server's measured utilisation (its
    own overhead stretches short services, tailwise.measure.server.server_stats), else rate × mean
    service. Several workers are separate queues (each connection belongs to one worker), so
    each is an M/G/1 at the per-worker utilisation — not an M/G/k."""
    from tailwise import _core
    from tailwise.stats.model import model_percentiles

    cfg = summary.get("config") or {}
    server = cfg.get("builtin_server")
    if not server or not server.get("service"):
        return {"model": None, "note": "no queueing model: the target is not the built-in server"}
    service, workers = server["service"], int(server.get("workers") or 1)
    stats = summary.get("target_stats") or {}
    load, how = stats.get("utilisation"), "the server's measured utilisation"
    if load is None:
        try:
            _, mean_ns = _core.parse_dist(service)
        except InputError:
            return {"model": None, "note": f"no queueing model: service {service} cannot be parsed"}
        rate = (summary.get("rate") or {}).get("achieved_rps") or cfg.get("rate_rps") or 0.0
        load, how = rate * mean_ns / 1e9 / workers, "rate × mean service"
    if not load or not 0.0 < load < 1.0:
        return {"model": None, "note": f"no queueing model: load {load or 0:.2f} ({how}) has no steady state below 1"}
    try:
        m = model_percentiles(service, load, workers=1, ps=list(ps), n=MODEL_CUSTOMERS, seed=1)
    except InputError as e:
        return {"model": None, "note": f"no queueing model: {e.line()}"}
    shape = "M/G/1" if workers == 1 else f"{workers} × M/G/1 (one queue per worker)"
    m["shape"] = shape.split(" (")[0]
    return {"model": m, "note": f"{shape}, service {service}, load ρ = {load:.3f} ({how}), "
                                f"{MODEL_CUSTOMERS:,} simulated customers: an ideal FIFO server with no network; "
                                "the gap to the measurement is the stack's and the server's overhead"}


def model_curve_ps(floor: float) -> list[float]:
    """Percentiles (in %) whose 1 − p/100 run log-evenly from 0.9 down to ``floor``."""
    floor = max(floor, MODEL_FLOOR)
    # From p10: an exponential service puts the model's lowest percentiles near 0, off the data.
    tails = np.logspace(math.log10(0.9), math.log10(floor), 60)
    return sorted({round(100.0 * (1.0 - t), 8) for t in tails})


# ------------------------------------------------------------------------------------ figures

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


def draw_percentile_marks(ax, percentiles: list[dict], colour, label: str | None) -> None:
    """The reported percentiles at height 1 − p/100 with their CI as horizontal error bars;
    a value without an interval is a hollow marker, a censored one (a lower bound) points right,
    an unsupported one (null) is left out."""
    first = True
    for p in percentiles:
        v = p.get("value_ns")
        if v is None:
            continue
        lo, hi = p.get("low_ns"), p.get("high_ns")
        y = 1.0 - p["p"] / 100.0
        if y <= 0:
            continue
        bounded = lo is not None and hi is not None
        xerr = [[max(v - lo, 0) / 1e3], [max(hi - v, 0) / 1e3]] if bounded else None
        marker = ">" if p.get("censored") else "o"  # censored: a lower bound, the truth is to the right
        bars = ax.errorbar([v / 1e3], [y], xerr=xerr, fmt=marker, ms=5, capsize=4, color=colour, zorder=5,
                           mfc=colour if bounded else "white", label=label if first else None)
        bars[0].set_gid(f"percentile-p{p['p']:g}")
        first = False


def _ccdf_floor(hists: Iterable) -> float:
    return min((1.0 / h.total for h in hists if h is not None), default=1e-4)


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
    ax.set_title(f"{what} — {run.summary.get('target', '')}", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    return fig


def packet_ccdf_marks(ax, run: Run, n: int) -> None:
    """A packet run's CCDF: how deep its packets reach (1/count, the axis goes on to 1e-6), and,
    when packets were lost, the timeout they are counted at (a lower bound of their latency)."""
    ax.axhline(1.0 / n, color="0.5", lw=0.8, ls=":", gid="ccdf-depth",
               label=f"one packet in {n:,}: the deepest this run reaches")
    lost = (run.packets or {}).get("lost") or 0
    timeout_ns = (run.summary.get("config") or {}).get("timeout_ns")
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
    sl = run.summary.get("send_lag") or {}
    late_ns = sl.get("late_threshold_ns")
    if late_ns:
        counters = run.summary.get("counters") or {}
        late, sent = counters.get("late"), counters.get("sent") or h.total
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
    window = ((run.summary.get("methodology") or {}).get("window_ns")) or None
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


def _target_value(point: dict) -> tuple[float | None, float | None, float | None]:
    t = point.get("target") or {}
    return t.get("value_ns"), t.get("low_ns"), t.get("high_ns")


def _slo_limit_ns(doc: dict) -> float | None:
    for p in doc.get("points") or []:
        if p.get("slo") and p["slo"].get("limit_ns") is not None:
            return p["slo"]["limit_ns"]
    return None


def latency_load_figure(doc: dict, model_points: list[tuple[float, float]]):
    """The sweep's percentile vs offered load with CI bars; knee, saturation, SLO marked."""
    fig, ax = _figure(7.5, 4.8)
    pct = doc.get("percentile") or 99.0
    points = sorted(doc.get("points") or [], key=lambda p: p["rate_rps"])
    if not points:
        _no_data(ax, "the sweep has no points yet")
        return fig
    for measurable in (True, False):
        # An imprecise point is a measured point with its interval (issue 32).
        sel = [p for p in points if (p.get("verdict") in ("ok", "imprecise")) == measurable
               and _target_value(p)[0] is not None]
        if not sel:
            continue
        xs = [p["rate_rps"] for p in sel]
        vs = [_target_value(p)[0] / 1e3 for p in sel]
        lo = [(v - (_target_value(p)[1] / 1e3 if _target_value(p)[1] is not None else v)) for p, v in zip(sel, vs)]
        hi = [((_target_value(p)[2] / 1e3 if _target_value(p)[2] is not None else v) - v) for p, v in zip(sel, vs)]
        bars = ax.errorbar(xs, vs, yerr=[np.maximum(lo, 0), np.maximum(hi, 0)], fmt="o" if measurable else "s",
                           mfc="C0" if measurable else "white", color="C0" if measurable else "C3", capsize=4, ms=6,
                           label=f"p{pct:g}, CI ({'verdict ok' if measurable else 'not measurable'})")
        bars[0].set_gid("load-points-ok" if measurable else "load-points-not-measurable")
    line = [(p["rate_rps"], _target_value(p)[0] / 1e3) for p in points if _target_value(p)[0] is not None]
    if line:
        ax.plot(*zip(*line), color="C0", lw=0.8, alpha=0.5)
    p50 = [(p["rate_rps"], q["value_ns"] / 1e3) for p in points for q in p.get("percentiles") or []
           if q["p"] == 50.0 and q.get("value_ns") is not None]
    if p50 and pct != 50.0:
        ax.plot(*zip(*p50), marker=".", color="0.5", lw=0.8, label="p50")
    missing = [p["rate_rps"] for p in points if _target_value(p)[0] is None]
    for i, x in enumerate(missing):
        ax.axvline(x, color="C3", lw=0.6, ls=":", alpha=0.7, gid=f"load-unsupported-{i}")
    if missing:
        ax.plot([], [], color="C3", lw=0.6, ls=":", label=f"p{pct:g} not supported by the sample")
    if model_points:
        ax.plot(*zip(*[(x, v / 1e3) for x, v in model_points]), "--", marker="x", color="C2", lw=1, gid="model-curve",
                label=f"queueing model p{pct:g} (at measured utilisation)")
    knee, sat, slo = doc.get("knee"), doc.get("saturation"), doc.get("slo")
    if knee and knee.get("rate_rps") is not None:
        ax.axvline(knee["rate_rps"], color="C1", ls="--", lw=1.2, label=f"knee {knee['rate_rps']:,.0f} req/s", gid="knee")
    top = max(p["rate_rps"] for p in points)
    ax.set_xlim(min(p["rate_rps"] for p in points) - 0.06 * top, top * 1.08)
    if sat and sat.get("rate_rps") is not None:  # saturated from there on: shade to the edge
        ax.axvspan(sat["rate_rps"], top * 1.08, color="C3", alpha=0.12, lw=0, gid="saturation",
                   label=f"saturated from {sat['rate_rps']:,.0f} req/s")
    limit = _slo_limit_ns(doc)
    if slo:
        if limit is not None:
            ax.axhline(limit / 1e3, color="C5", ls="-.", lw=1.2, label=f"SLO {slo.get('threshold', '')}", gid="slo")
        if slo.get("rate_rps") is not None:
            ax.axvline(slo["rate_rps"], color="C5", ls=":", lw=1.4, label=f"meets SLO up to {slo['rate_rps']:,.0f} req/s")
    ax.set_yscale("log")
    _plain_log_y(ax)
    ax.set_xlabel("offered load (req/s)")
    _rate_axis(ax)
    ax.set_ylabel(f"p{pct:g} latency (µs)")
    ax.grid(True, alpha=0.3)
    ax.set_title(f"latency vs load — {doc.get('target', '')}", fontsize=10)
    ax.legend(fontsize=7.5, loc="upper left")
    return fig


def ccdf_overlay_figure(curves: list[tuple[str, Any, dict]], title: str, percentiles: bool = True):
    """Several CCDFs on one log-log plot (KBNets Fig. 3 style): (label, histogram, style) each,
    the reported percentiles of each with CIs in the curve's colour when given in style."""
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


# ------------------------------------------------------------------------------------- HTML

def fmt_ns(v: float | None) -> str:
    from tailwise.render.output import fmt_ns as _fmt

    return _fmt(v)


def value_text(p: dict) -> str:
    """A percentile as a figure, or what it would need: never a number the sample cannot support."""
    from tailwise.render.output import percentile_text

    return percentile_text(p)


@lru_cache(maxsize=1)
def _templates():
    """The pages' Jinja2 templates (render/templates): autoescaped, so every value from the JSON is
    text; None renders empty."""
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
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


def verdict(summary: dict) -> dict:
    """The verdict and what to say first when the run is not measurable."""
    name = summary.get("verdict") or "unknown"
    return {"verdict": name, "ok": name == "ok" and not summary.get("error"), "not_measurable": name == "not-measurable",
            "imprecise": name == "imprecise" and not summary.get("error"),
            "precision": (summary.get("precision") or {}).get("detail"),
            "failed": [c.get("name") for c in summary.get("checks") or [] if not c.get("ok")],
            "error": summary.get("error"), "interrupted": summary.get("interrupted")}


def percentile_table(summary: dict, model: dict | None) -> dict:
    lat = summary.get("latency") or {}
    window = {p["p"]: p.get("value_ns") for p in (lat.get("window") or {}).get("percentiles") or []}
    mvals = {q["p"]: q["value_ns"] for q in ((model or {}).get("model") or {}).get("percentiles") or []}
    headers = ["percentile", "value", "CI low", "CI high", "n_eff", "every request, same window"]
    if mvals:
        headers.append("queueing model")
    rows = []
    for p in lat.get("percentiles") or []:
        n_eff = p.get("n_effective")
        row = [f"p{p['p']:g}", value_text(p), fmt_ns(p.get("low_ns")), fmt_ns(p.get("high_ns")),
               "—" if n_eff is None else f"{n_eff:,.0f}", fmt_ns(window.get(p["p"]))]
        if mvals:
            row.append(fmt_ns(next((v for q, v in mvals.items() if abs(q - p["p"]) < 1e-9), None)))
        rows.append(row)
    conf, used = lat.get("confidence") or 0.95, lat.get("samples") or 0
    return {"source": lat.get("source"), "used": f"{used:,}", "confidence": f"{conf:.0%}",
            "table": table(headers, rows, table_id="percentiles")}


def checks_table(summary: dict) -> dict:
    checks = summary.get("checks") or []
    rows = [[c.get("name"), [{"ok": "ok"}] if c.get("ok") else [{"bad": "FAILED"}], c.get("detail"), c.get("remedy") or ""]
            for c in checks]
    return table(["check", "result", "detail", "remedy"], rows, text_cols=(0, 1, 2, 3),
                 row_classes=["" if c.get("ok") else "fail" for c in checks], table_id="checks")


def thresholds_table(summary: dict) -> dict:
    rows = [[t.get("threshold"), t.get("status"), t.get("detail")] for t in summary.get("thresholds") or []]
    return table(["threshold", "status", "detail"], rows, text_cols=(0, 1, 2), table_id="thresholds")


def agents_table(summary: dict) -> dict:
    """A run on agents: each agent's address, role, share, achieved rate, clock offset, errors and
    timeouts, and why it failed (render/output.py, ``agent_cells``); no rows otherwise."""
    from tailwise.render.output import AGENT_COLUMNS, agent_cells

    agents = summary.get("agents") or []
    return table(list(AGENT_COLUMNS), [agent_cells(a) for a in agents], text_cols=(0, 1, 6),
                 row_classes=["fail" if a.get("error") else "" for a in agents], table_id="agents")


def barrier_facts(summary: dict) -> list:
    """How together the agents started (no line without agents)."""
    from tailwise.render.output import barrier_text

    b = summary.get("barrier")
    return [f"start barrier: {barrier_text(b)}"] if summary.get("agents") and b else []


def run_facts(summary: dict) -> list:
    """The run's load and target, one line each."""
    r = summary.get("rate") or {}
    cfg = summary.get("config") or {}
    lines: list = [f"offered {_rps(r.get('target_rps'))}, sent {_rps(r.get('achieved_rps'))}, "
                   f"completed {_rps(r.get('completed_rps'))} over {_num(r.get('duration_s'), '{:.2f} s')}"]
    if cfg.get("builtin_server"):
        b = cfg["builtin_server"]
        lines.append(["built-in server: service ", {"code": b.get("service")}, f", {_text(b.get('workers'))} worker(s)"])
    ts = summary.get("target_stats") or {}
    if ts.get("utilisation") is not None:
        lines.append(f"server utilisation {ts['utilisation']:.3f}, effective service {fmt_ns(ts.get('effective_service_ns'))}")
    if cfg.get("command"):
        lines.append(["command: ", {"code": cfg["command"]}])
    return lines


def _text(v) -> str:
    return "" if v is None else str(v)


def _rps(v) -> str:
    return "—" if v is None else f"{v:,.0f} req/s"


def _num(v, fmt: str) -> str:
    return "—" if v is None else fmt.format(v)


def run_page(run: Run, model: dict) -> dict:
    """What a run's section of a page shows: verdict, facts, percentiles, checks, thresholds,
    for a run on agents the agents and their start barrier, for a packet run its packets block."""
    return {"verdict": verdict(run.summary), "facts": run_facts(run.summary),
            "percentiles": percentile_table(run.summary, model), "model_note": model["note"],
            "checks": checks_table(run.summary), "thresholds": thresholds_table(run.summary),
            "agents": agents_table(run.summary), "barrier": barrier_facts(run.summary),
            "packets": pk.report_lines(run.directory, run.summary)}


# --------------------------------------------------------------------------------- the report

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


def caption(run: Run, name: str) -> str:
    return PACKET_CCDF_CAPTION if name == "ccdf" and run.packets else CAPTIONS[name]


def run_plots(run: Run, out_dir: Path, prefix: str = "", with_model: bool = True) -> tuple[list[tuple[str, Path]], dict]:
    """Write a run's plots; returns ([(name, png path)], model dict)."""
    model = {"model": None, "note": "model not asked for"}
    if with_model:
        floor = 1.0 / run.latency.total if run.latency is not None else 1e-4
        # The curve's percentiles and the reported ones (for the table), in one simulation.
        ps = set(model_curve_ps(floor)) | {p["p"] for p in run.percentiles if 0 < p["p"] < 100}
        model = model_for(run.summary, sorted(ps))
    makers: dict[str, Callable[[], Any]] = {
        "ccdf": lambda: ccdf_figure(run, model),
        "cdf": lambda: cdf_figure(run),
        "send_lag": lambda: send_lag_figure(run),
        "intervals": lambda: intervals_figure(run),
        "packets": lambda: packet_loss_figure(run),
    }
    out = []
    for name in run.plots:
        png, _ = save_figure(makers[name](), out_dir, prefix + name)
        out.append((name, png))
    return out, model


def run_report(directory: Path, out_dir: Path, summary: dict, with_model: bool = True) -> list[Path]:
    """Plots and report.html for one run directory."""
    run = Run.read(directory, summary)
    plots, model = run_plots(run, out_dir, with_model=with_model)
    html_path = out_dir / "report.html"
    html_path.write_text(render("run.html.j2", f"tailwise report: {summary.get('target', '')}", summary=summary,
                                tool_version=(summary.get("tool") or {}).get("version"), directory=directory,
                                run=run_page(run, model), figures=[figure(png, name, caption(run, name)) for name, png in plots]))
    return [p for _, png in plots for p in (png, png.with_suffix(".svg"))] + [html_path]


def _point_dir(directory: Path, point: dict) -> Path:
    return directory / str(point.get("dir") or "")


def _point_summary(directory: Path, point: dict) -> dict | None:
    try:
        return load_summary(_point_dir(directory, point))
    except InputError:
        return None


def sweep_model_points(directory: Path, doc: dict) -> list[tuple[float, float]]:
    """(rate, model value of the sweep's percentile) at each point's measured utilisation."""
    pct = doc.get("percentile") or 99.0
    out = []
    for p in sorted(doc.get("points") or [], key=lambda p: p["rate_rps"]):
        s = _point_summary(directory, p)
        m = model_for(s, [pct]).get("model") if s else None
        if m and m["percentiles"][0]["value_ns"] is not None:
            out.append((p["rate_rps"], m["percentiles"][0]["value_ns"]))
    return out


def highest_unsaturated(directory: Path, doc: dict) -> dict | None:
    """The point at the highest load that did not saturate and has its directory."""
    ok = [p for p in doc.get("points") or [] if not p.get("saturated") and (_point_dir(directory, p) / "summary.json").is_file()]
    return max(ok, key=lambda p: p["rate_rps"], default=None)


def points_table(doc: dict) -> dict:
    pct = doc.get("percentile") or 99.0
    rows, classes = [], []
    for p in sorted(doc.get("points") or [], key=lambda p: p["rate_rps"]):
        t = p.get("target") or {}
        p50 = next((q for q in p.get("percentiles") or [] if q["p"] == 50.0), {})
        slo = {True: "yes", False: "no", None: "—"}[p.get("meets_slo")]
        rows.append([p.get("index"), _rps(p.get("rate_rps")), _rps(p.get("achieved_rps")), p.get("verdict"),
                     value_text(t), f"[{fmt_ns(t.get('low_ns'))}, {fmt_ns(t.get('high_ns'))}]", value_text(p50),
                     p.get("saturation_reason") or "no", slo, ", ".join(p.get("failed_checks") or []) or "—",
                     [{"code": p.get("dir")}]])
        classes.append("fail" if p.get("saturated") or p.get("verdict") == "not-measurable" else "")
    return table(["#", "offered", "sent", "verdict", f"p{pct:g}", "CI", "p50", "saturated", "meets SLO",
                  "failed checks", "directory"], rows, text_cols=(3, 7, 9, 10), row_classes=classes, table_id="points")


def sweep_facts(doc: dict) -> list:
    """The sweep's mode, knee, saturation, capacity and SLO, one line each."""
    from tailwise.render.sweep import capacity_text, knee_text

    lines: list = [f"mode {_text(doc.get('mode'))}, stopped: {_text(doc.get('stopped'))}, "
                   f"complete: {_text(doc.get('complete'))}"]
    knee, sat, slo = doc.get("knee"), doc.get("saturation"), doc.get("slo")
    lines.append(knee_text(doc) if knee else "knee: none found")
    lines.append(f"saturated at {_rps(sat.get('rate_rps'))}: {_text(sat.get('reason'))}" if sat else "saturation: not reached")
    if (capacity := capacity_text(doc)) is not None:
        lines.append(capacity)
    if slo:
        lines.append(f"SLO {_text(slo.get('threshold'))}: {_text(slo.get('detail'))}")
    if doc.get("error"):
        lines.append([{"bad": f"error: {doc['error']}"}])
    if doc.get("interrupted"):
        lines.append([{"bad": "the sweep was interrupted: the points are partial"}])
    cmd = (doc.get("config") or {}).get("command")
    if cmd:
        lines.append(["command: ", {"code": cmd}])
    return lines


def sweep_report(directory: Path, out_dir: Path, doc: dict, with_model: bool = True) -> list[Path]:
    """Plots and report.html for a sweep directory."""
    points = sorted(doc.get("points") or [], key=lambda p: p["rate_rps"])
    model_points = sweep_model_points(directory, doc) if with_model else []
    written: list[tuple[str, Path]] = []
    written.append(("latency_load", save_figure(latency_load_figure(doc, model_points), out_dir, "latency_load")[0]))
    import matplotlib

    cmap = matplotlib.colormaps["viridis"]
    curves = []
    for i, p in enumerate(points):
        h = read_histogram(_point_dir(directory, p) / "latency.hdr")
        label = f"{p['rate_rps']:,.0f} req/s" + (" (saturated)" if p.get("saturated") else "")
        curves.append((label, h, {"color": cmap(i / max(len(points) - 1, 1) * 0.9), "ls": "--" if p.get("saturated") else "-"}))
    written.append(("ccdf_points", save_figure(ccdf_overlay_figure(curves, "latency CCDF at each load"), out_dir, "ccdf_points")[0]))
    figures = [figure(png, name, CAPTIONS[name]) for name, png in written]
    best, point = highest_unsaturated(directory, doc), None
    if best is not None:
        run = Run.read(_point_dir(directory, best))
        plots, model = run_plots(run, out_dir, prefix=POINT_PREFIX, with_model=with_model)
        point = run_page(run, model) | {
            "rate": _rps(best["rate_rps"]), "dir": best.get("dir"), "directory": _point_dir(directory, best),
            "figures": [figure(png, POINT_PREFIX + name, caption(run, name)) for name, png in plots]}
        written += [(POINT_PREFIX + name, png) for name, png in plots]
    html_path = out_dir / "report.html"
    html_path.write_text(render("sweep.html.j2", f"tailwise sweep report: {doc.get('target', '')}", doc=doc,
                                tool_version=(doc.get("tool") or {}).get("version"), directory=directory,
                                sweep_facts=sweep_facts(doc), points=points_table(doc), figures=figures, best=point))
    return [p for _, png in written for p in (png, png.with_suffix(".svg"))] + [html_path]


def prepare_out(out_dir: Path) -> Path:
    from tailwise.results.files import check_out_dir

    return check_out_dir(out_dir, "write the report into", "give --out a writable directory")


def write_report(directory: str | Path, out_dir: str | Path | None = None, with_model: bool = True) -> list[Path]:
    """The report of a run or sweep directory, written into out_dir (default: the directory itself).
    Returns the paths written: every plot's PNG and SVG, then report.html."""
    d = Path(directory)
    doc = load_summary(d)
    out = prepare_out(Path(out_dir) if out_dir is not None else d)
    if doc["schema"] == SWEEP_SCHEMA:
        return sweep_report(d, out, doc, with_model)
    return run_report(d, out, doc, with_model)
