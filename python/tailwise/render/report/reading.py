"""What `tailwise report` reads of a results directory, and what it computes from it: the summary
(its model: results/documents), the every-request and send-lag histograms, the samples the
statistics used, the interval log, and the queueing model's curve for a run against the
built-in server. A sweep's points are read from their own directories.

pandas is imported only when the samples file is read (``read_used_latencies``): it is the
heaviest import of the report and a page without the CDF's samples does not need it.
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from tailwise import _core
from tailwise.errors import InputError
from tailwise.results.documents.counts import BuiltinServerStats, Packets
from tailwise.results.documents.latency import Percentile
from tailwise.results.documents.run import Summary
from tailwise.results.documents.sweep import Point, SweepSummary
from tailwise.results.rows import Flag
from tailwise.results.summary import load_summary
from tailwise.stats.model import model_percentiles

#: Customers simulated for the model curve: enough for p99.99 (20 beyond it), ~10 ms of work.
MODEL_CUSTOMERS = 200_000
#: The model's curve is drawn down to 1 − F = this at the least (20 customers beyond it).
MODEL_FLOOR = 20 / MODEL_CUSTOMERS
#: Plots of a run directory, in page order.
RUN_PLOTS = ("ccdf", "cdf", "send_lag", "intervals")
#: A packet run's plots: the run's, then loss and reordering over time.
PACKET_RUN_PLOTS = RUN_PLOTS + ("packets",)


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


def read_used_latencies(directory: Path) -> np.ndarray | None:
    """Latencies (ns) of the samples that went into the statistics (``used`` = 1, answered), or None."""
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


def read_intervals(path: Path, summary: Summary) -> Intervals | None:
    """latency.hlog as arrays, or None when it is missing, unreadable or empty."""
    hist = summary.latency.histogram
    ref = HdrHistogram(hist.lowest_ns, hist.highest_ns, hist.significant_digits)
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
    summary: Summary
    latency: Any = None  # _core.Histogram of every request, or None
    send_lag: Any = None
    _used: Any = field(default=False, repr=False)

    @classmethod
    def read(cls, directory: Path, summary: Summary | None = None) -> "Run":
        d = Path(directory)
        s = summary if summary is not None else load_summary(d)
        return cls(d, s, read_histogram(d / "latency.hdr"), read_histogram(d / "send_lag.hdr"))

    @property
    def used_latencies(self) -> np.ndarray | None:
        if self._used is False:
            self._used = read_used_latencies(self.directory)
        return self._used

    @property
    def packets(self) -> Packets | None:
        """The summary's ``packets`` block: a packet run's; None for any other run."""
        return self.summary.packets

    @property
    def plots(self) -> tuple[str, ...]:
        return PACKET_RUN_PLOTS if self.packets else RUN_PLOTS

    @property
    def percentiles(self) -> list[Percentile]:
        return self.summary.latency.percentiles

    @property
    def confidence(self) -> float:
        return self.summary.latency.confidence


# ------------------------------------------------------------------------------------- model

def model_for(summary: Summary, ps: Iterable[float]) -> dict:
    """The queueing model's percentiles for a run against the built-in server (`tailwise serve`).

    Returns {"model": result of model_percentiles | None, "note": one line saying which model
    at which load, or why there is none}. The load is the server's measured utilisation (its
    own overhead stretches short services, tailwise.measure.server.server_stats), else rate × mean
    service. Several workers are separate queues (each connection belongs to one worker), so
    each is an M/G/1 at the per-worker utilisation — not an M/G/k."""
    cfg = summary.config
    server = cfg.builtin_server
    if not server or not server.service:
        return {"model": None, "note": "no queueing model: the target is not the built-in server"}
    service, workers = server.service, int(server.workers or 1)
    stats = summary.target_stats
    load = stats.utilisation if isinstance(stats, BuiltinServerStats) else None
    how = "the server's measured utilisation"
    if load is None:
        try:
            _, mean_ns = _core.parse_dist(service)
        except InputError:
            return {"model": None, "note": f"no queueing model: service {service} cannot be parsed"}
        rate = summary.rate.achieved_rps or cfg.rate_rps or 0.0
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


def run_model(run: Run, with_model: bool = True) -> dict:
    """The model for a run's plots and table ({"model", "note"}: ``model_for``), or a note that
    it was not asked for."""
    if not with_model:
        return {"model": None, "note": "model not asked for"}
    floor = 1.0 / run.latency.total if run.latency is not None else 1e-4
    # The curve's percentiles and the reported ones (for the table), in one simulation.
    ps = set(model_curve_ps(floor)) | {p.p for p in run.percentiles if 0 < p.p < 100}
    return model_for(run.summary, sorted(ps))


# ------------------------------------------------------------------------------------ a sweep

def sorted_points(doc: SweepSummary) -> list[Point]:
    """The sweep's points by increasing load."""
    return sorted(doc.points, key=lambda p: p.rate_rps)


def point_dir(directory: Path, point: Point) -> Path:
    return directory / point.dir


def point_summary(directory: Path, point: Point) -> Summary | None:
    """A point's own summary, or None when its directory has none (or not a valid one)."""
    try:
        return load_summary(point_dir(directory, point))
    except InputError:
        return None


def sweep_model_points(directory: Path, doc: SweepSummary) -> list[tuple[float, float]]:
    """(rate, model value of the sweep's percentile) at each point's measured utilisation."""
    pct = doc.percentile
    out = []
    for p in sorted_points(doc):
        s = point_summary(directory, p)
        m = model_for(s, [pct]).get("model") if s else None
        if m and m["percentiles"][0]["value_ns"] is not None:
            out.append((p.rate_rps, m["percentiles"][0]["value_ns"]))
    return out


def highest_unsaturated(directory: Path, doc: SweepSummary) -> Point | None:
    """The point at the highest load that did not saturate and has its directory."""
    ok = [p for p in doc.points if not p.saturated and (point_dir(directory, p) / "summary.json").is_file()]
    return max(ok, key=lambda p: p.rate_rps, default=None)
