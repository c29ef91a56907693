"""The summary of a run (schema ``tailwise.summary/1``) and the files written to ``--out``.

Field names are a contract: later versions add fields, never rename them. Unknown values are
``null``, never 0 and never NaN (which is not JSON).
"""

from __future__ import annotations

import base64
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from hdrh.histogram import HdrHistogram

from tailwise import __version__
from tailwise.agent import AgentResult, Flag
from tailwise.files import STAGE, check_out_dir, install, write_json
from tailwise.stats.quantiles import DEFAULT_PERCENTILES

if TYPE_CHECKING:
    from tailwise.methodology.analysis import Analysis

SCHEMA = "tailwise.summary/1"
#: A timing-loop iteration longer than this counts as a stall (engine/thread.rs STALL_NS).
STALL_NS = 20_000
SAMPLE_FORMATS = ("csv", "parquet")


def decode_histogram(raw: bytes) -> HdrHistogram:
    """HdrHistogram V2 compressed bytes (from the engine) → an hdrh histogram."""
    return HdrHistogram.decode(base64.b64encode(raw))


def write_interval_log(path: Path, intervals, wall_start_s: float, tag: str = "local") -> int:
    """The every-request histograms, one per 100 ms of *intended* send time, as an HdrHistogram
    interval log (``HistogramLogWriter``: one line per interval, tagged with the agent). Returns
    the number of intervals written."""
    from hdrh.log import HistogramLogWriter

    from tailwise import _core

    interval_ns, _ = _core.interval_params()
    rows = intervals.log() if intervals is not None else []
    with open(path, "w") as f:
        w = HistogramLogWriter(f)
        w.output_comment("tailwise every-request latency (ns), one histogram per interval of intended send time")
        # The header lines of the HdrHistogram log format, written here: hdrh 0.10's
        # output_start_time takes the epoch in ms for seconds and fails.
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(wall_start_s))
        f.write(f"#[StartTime: {wall_start_s:.3f} (seconds since epoch), {when} UTC]\n")
        f.write(f"#[BaseTime: {wall_start_s:.3f} (seconds since epoch)]\n")
        w.output_legend()
        for index, raw in rows:
            # Each line written here, tagged with the agent ("Tag=local,start,length,max,histogram",
            # max in µs): hdrh 0.10's writer drops the tag, and takes a start of 0 for "unset".
            h = decode_histogram(raw)
            f.write(f"Tag={tag},{index * interval_ns / 1e9:.3f},{interval_ns / 1e9:.3f},"
                    f"{h.get_max_value() / 1e3:.3f},{h.encode().decode()}\n")
    return len(rows)


def _hist_json(h: HdrHistogram, ps=DEFAULT_PERCENTILES) -> dict:
    n = h.get_total_count()
    if n == 0:
        return {"count": 0, "min_ns": None, "mean_ns": None, "max_ns": None,
                "percentiles": [{"p": p, "value_ns": None} for p in ps]}
    return {
        "count": n,
        "min_ns": h.get_min_value(),
        "mean_ns": h.get_mean_value(),
        "max_ns": h.get_max_value(),
        "percentiles": [{"p": p, "value_ns": h.get_value_at_percentile(p)} for p in ps],
    }


def _hist_params() -> dict:
    """The HDR histogram's parameters, so that latency.hdr can be read back exactly."""
    from tailwise import _core

    lowest, highest, digits = _core.histogram_params()
    return {"unit": "ns", "lowest_ns": lowest, "highest_ns": highest, "significant_digits": digits}


def build_summary(*, target: str, config: dict, host: dict, result: AgentResult, analysis: Analysis,
                  methodology: dict) -> dict:
    c = result.counters
    d = analysis.details
    # The schedule's own time: the coordinator's pauses (no request due) left out.
    paused_s = (d.get("pauses") or {}).get("total_s", 0.0)
    elapsed_s = result.elapsed_ns / 1e9 - paused_s
    achieved = c["sent"] / elapsed_s if elapsed_s > 0 else None
    completed = result.received_in_window / elapsed_s if elapsed_s > 0 else None
    lat_hist = decode_histogram(result.latency_hist)
    lag_hist = decode_histogram(result.send_lag_hist)
    ok = analysis.ok and not result.error and not result.interrupted
    requests = max(c["sent"], 1)
    return {
        "schema": SCHEMA,
        "tool": {"name": "tailwise", "version": __version__},
        "target": target,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(result.wall_start_s)),
        "verdict": "ok" if ok else "not-measurable",
        "error": result.error,
        "interrupted": result.interrupted,
        "rate": {
            # What the target was offered: the load and, with --probe, the probe's requests.
            "target_rps": float(config["rate_rps"]) + (config.get("probe") or {}).get("rate_rps", 0.0),
            "achieved_rps": achieved,
            "completed_rps": completed,
            "duration_s": elapsed_s,
            "paused_s": paused_s,
        },
        "latency": {
            # Where each reply's receive time came from (spec.timestamp_source), and why not a better one.
            "source": config.get("timestamps", "user"),
            "source_note": config.get("timestamps_note"),
            "kernel_stamped_replies": result.counters.get("rx_kernel", 0),
            # Replies whose request carries the kernel's transmit stamp (samples: sent_ns).
            "kernel_stamped_sends": result.counters.get("tx_kernel", 0),
            # Samples behind the percentiles: every one after the warm-up.
            "samples": analysis.details["samples_used"],
            "sample_every": methodology["effective_sample_every"],
            "confidence": config["confidence"],
            "percentiles": [p.as_json() for p in analysis.percentiles],
            "target": analysis.target.as_json() if analysis.target else None,
            # Every request of the run (warm-up included; censored ones at the time they waited).
            "histogram": _hist_json(lat_hist) | _hist_params(),
            # Every request intended in the window the statistics used (those left out included).
            "window": {"start_ns": analysis.window[0], "end_ns": analysis.window[1]} | d.get("window_every_request", {}),
        },
        "warmup": d["warmup"],
        # Nothing leaves the statistics but the warm-up (kept for the fields' sake: 0 left out).
        "exclusions": d["exclusions"],
        # The requests tailwise itself delayed, in the statistics as intervals (stats/bounds.py):
        # how many, why, the floor their lower bounds start from, and what they do to each percentile.
        "delayed": d["delayed"],
        # Whether the host paused the client and the target together (information).
        "host_pauses": d["host_pauses"],
        "send_lag": _hist_json(lag_hist) | {
            "late_threshold_ns": config.get("late_ns"),
            # The same, for requests whose wait no stall of an engine thread overlapped: the
            # client's own lag when it is not preempted.
            "unstalled": _hist_json(decode_histogram(result.send_lag_unstalled_hist)),
        },
        "counters": dict(c),
        # The latency probe (--probe): its requests are the only ones timed; its own counters.
        "probe": None if not config.get("probe") else config["probe"] | {"counters": result.probe_counters},
        # Gets answered with a value / all gets answered (memcached, redis); null without gets.
        "hit_ratio": c["hits"] / (c["hits"] + c["misses"]) if c.get("hits", 0) + c.get("misses", 0) else None,
        "error_reasons": [{"reason": r, "count": n} for r, n in result.error_reasons],
        "checks": [ch.as_json() for ch in analysis.checks],
        "methodology": methodology,
        "engine": {
            "pinned_cpus": result.pinned_cpus,
            "cpu_s": result.cpu_ns / 1e9,
            "cpu_ns_per_request": result.cpu_ns / requests if c["sent"] else None,
            "preemptions": result.preemptions,
            "stalls": result.stalls,
            "stalled_s": result.stalled_ns / 1e9,
            "stall_threshold_ns": STALL_NS,
            "host_steal_s": result.steal_s,
        },
        "config": config,
        "host": host,
    }


def sample_columns(samples: np.ndarray) -> dict[str, np.ndarray]:
    """The samples file's columns, from engine rows (``SAMPLE_DTYPE``): per request its intended,
    sent and received times (ns since the engine's start) with the best stamp each has — ``sent_ns``
    the kernel's transmit stamp when there is one, ``received_ns`` the reply time the latency counts
    to (the kernel's receive stamp when flags say KERNEL_RX; 0 without a reply) — and the user-space
    clock around the system calls beside them, so that send lag (sent − intended) and response time
    (received − sent) can be derived per source."""
    answered = (samples["flags"] & int(Flag.CENSORED)) == 0
    tx = samples["tx_ns"]
    return {
        "intended_ns": samples["intended_ns"],
        "sent_ns": np.where(tx > 0, tx, samples["sent_ns"]),
        "received_ns": np.where(answered, samples["intended_ns"] + samples["latency_ns"], 0).astype(np.uint64),
        "latency_ns": samples["latency_ns"],
        "flags": samples["flags"],
        "inflation_ns": samples["inflation_ns"],
        "sent_user_ns": samples["sent_ns"],
        "received_user_ns": samples["rx_user_ns"],
    }


#: The .hgrm percentile distribution is written in microseconds (values to the ns, 3 decimals).
HGRM_UNIT_NS = 1_000


def write_hgrm(path: Path, raw_hist: bytes) -> None:
    """The every-request latency histogram as HdrHistogram's percentile-distribution text
    (``output_percentile_distribution``, the format of wrk2 and the HdrHistogram plotter), in µs."""
    with open(path, "wb") as f:
        decode_histogram(raw_hist).output_percentile_distribution(f, HGRM_UNIT_NS)


def write_out(out_dir: str | Path, summary: dict, result: AgentResult, used: np.ndarray | None = None,
              samples_format: str = "csv", tag: str = "local") -> list[Path]:
    """One measurement's results directory (docs/results.md): the raw samples (with a ``used``
    column: 1 where the sample went into the statistics), both histograms, the .hgrm percentile
    distribution, the interval log tagged with the agent, the config and the host facts — and
    summary.json last, so that a directory with a summary.json is complete. Returns the paths.

    The files are written into a hidden stage inside the directory and then moved in, replacing
    whole whatever tailwise wrote there before (files.install): never a new summary beside an old
    report. Whether an existing directory may be replaced is the command's to decide (--force)."""
    final = check_out_dir(out_dir)
    out = final / STAGE
    if out.exists():
        shutil.rmtree(out)  # a stage left by a write that was killed
    out.mkdir()
    import pyarrow as pa

    columns = sample_columns(result.samples)
    if used is not None and len(used) == len(result.samples):
        columns["used"] = used.astype(np.uint8)
    table = pa.table(columns)
    samples = out / f"samples.{samples_format}"
    if samples_format == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, samples)
    else:
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, samples)
    (out / "latency.hdr").write_bytes(base64.b64encode(result.latency_hist) + b"\n")
    (out / "send_lag.hdr").write_bytes(base64.b64encode(result.send_lag_hist) + b"\n")
    write_hgrm(out / "latency.hgrm", result.latency_hist)
    write_interval_log(out / "latency.hlog", result.intervals, result.wall_start_s, tag)
    write_json(out / "config.json", summary["config"])
    write_json(out / "host.json", summary["host"])
    write_json(out / "summary.json", summary)
    install(out, final)
    return [final / name for name in ("summary.json", samples.name, "latency.hdr", "send_lag.hdr", "latency.hgrm",
                                      "latency.hlog", "config.json", "host.json")]
