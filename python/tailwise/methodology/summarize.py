"""The summary of one measurement, made from its analysis and the engine's result.

The one writer of the summary's keys: it fills results/documents/run.Summary from the analysis (the
percentiles with their intervals, the checks, the verdict, the precision) and from the engine's
plain result (``AgentResult``: counters, histograms, stalls). results/ knows neither the analysis
nor the methodology; what is known only later is added with ``results.summary.amend``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from tailwise import __version__, _core
from tailwise.methodology.analysis import Analysis
from tailwise.results.documents.run import Summary, Tool
from tailwise.results.files import RUN_SCHEMA
from tailwise.results.measured import AgentResult
from tailwise.results.summary import STALL_NS, decode_histogram, hist_json, hist_params
from tailwise.stats import DEFAULT_PERCENTILES, PACKET_PERCENTILES
from tailwise.stats.histogram import LinearHistogram


def build_summary(*, target: str, config: dict, host: dict, result: AgentResult, analysis: Analysis,
                  methodology: dict) -> Summary:
    """The run's summary, written through its model (results/documents/run.Summary): the one
    writer of its keys. What is known only later (the target's counters, thresholds, a sweep
    point's place) is added with ``amend``."""
    c = result.counters
    d = analysis.to_dict()
    return Summary(
        schema=RUN_SCHEMA,
        tool=Tool(name="tailwise", version=__version__),
        target=target,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(result.wall_start_s)),
        verdict=analysis.verdict(error=result.error, interrupted=result.interrupted),
        error=result.error,
        interrupted=result.interrupted,
        rate=_rate(config, result, d),
        latency=_latency(config, result, analysis, methodology, d),
        # Each kind of request (gets and sets, several http:// requests) by the whole run's rules on
        # its own samples: information, outside the verdict (methodology/kinds.py).
        by_request=None if analysis.by_request is None else [k.as_json() for k in analysis.by_request],
        warmup=d["warmup"],
        # Nothing leaves the statistics but the warm-up (kept for the fields' sake: 0 left out).
        exclusions=d["exclusions"],
        # The requests tailwise itself delayed, in the statistics as intervals (stats/bounds.py):
        # how many, why, the floor their lower bounds start from, and what they do to each percentile.
        delayed=d["delayed"],
        # What precision was asked and reached, and what would help (methodology/verdict.py).
        precision=analysis.precision,
        # Whether the host paused the client and the target together (information).
        host_pauses=d["host_pauses"],
        send_lag=hist_json(decode_histogram(result.send_lag_hist)) | {
            "late_threshold_ns": config.get("late_ns"),
            # The same, for requests whose wait no stall of an engine thread overlapped: the
            # client's own lag when it is not preempted.
            "unstalled": hist_json(decode_histogram(result.send_lag_unstalled_hist)),
        },
        counters=dict(c),
        # Packet mode (udp+flow://): loss, reordering, duplicates and the rates; null otherwise.
        packets=_packets(config, result, d, [p.p for p in analysis.percentiles]),
        # The latency probe (--probe): its requests are the only ones timed; its own counters.
        probe=None if not config.get("probe") else config["probe"] | {"counters": result.probe_counters},
        # TLS (https://, …+tls://): the handshakes, timed apart from the requests; null in the clear.
        tls=tls_summary(config.get("tls"), result.tls),
        # Gets answered with a value / all gets answered (memcached, redis); null without gets.
        hit_ratio=c["hits"] / (c["hits"] + c["misses"]) if c.get("hits", 0) + c.get("misses", 0) else None,
        error_reasons=[{"reason": r, "count": n} for r, n in result.error_reasons],
        checks=[ch.as_json() for ch in analysis.checks],
        methodology=methodology,
        engine=_engine(result),
        config=config,
        host=host,
        target_stats=None,
        thresholds=[],
    )


def tls_summary(settings: dict | None, engine: dict | None) -> dict | None:
    """The summary's ``tls`` (documents/counts.Tls) from the engine's configuration's ``tls`` and
    the engine's handshakes (``AgentResult.tls``); None in the clear."""
    if not settings:
        return None
    engine = engine or {}
    times = np.asarray(engine.get("handshake_ns") or (), dtype=np.float64)
    p50, p99 = np.percentile(times, [50, 99]).tolist() if times.size else (None, None)
    ca_file = settings.get("ca_file")
    return {
        "handshake": {"count": int(times.size), "p50_ns": p50, "p99_ns": p99},
        "full": int(engine.get("full", 0)), "resumed": int(engine.get("resumed", 0)),
        "failed": int(engine.get("failed", 0)),
        "resume": bool(settings.get("resume", True)), "insecure": bool(settings.get("insecure")),
        "sni": settings.get("sni"),
        "ca": None if settings.get("insecure") else (Path(ca_file).name if ca_file else "system"),
    }


def _rate(config: dict, result: AgentResult, d: dict) -> dict:
    # The schedule's own time: the coordinator's pauses (no request due) left out.
    paused_s = (d.get("pauses") or {}).get("total_s", 0.0)
    elapsed_s = result.elapsed_ns / 1e9 - paused_s
    return {
        # What the target was offered: the load and, with --probe, the probe's requests.
        "target_rps": float(config["rate_rps"]) + (config.get("probe") or {}).get("rate_rps", 0.0),
        "achieved_rps": result.counters["sent"] / elapsed_s if elapsed_s > 0 else None,
        "completed_rps": result.received_in_window / elapsed_s if elapsed_s > 0 else None,
        "duration_s": elapsed_s,
        "paused_s": paused_s,
    }


def _packets(config: dict, result: AgentResult, d: dict, ps) -> dict | None:
    """The summary's ``packets`` (documents/counts.Packets) of a udp+flow:// run; None otherwise."""
    settings = config.get("packet")
    if not settings:
        return None
    c, size = result.counters, settings["size_bytes"]
    ipv6 = "[" in (config.get("target") or "")
    elapsed_s = _rate(config, result, d)["duration_s"]
    sent, received = c["sent"], c["received"]
    lat = _core.Histogram.decode(result.latency_hist)
    # The resolution where answers are: a lost packet is recorded at its timeout (a lower bound),
    # whose bucket says nothing of how finely the answered ones were measured.
    timeout_ns = config.get("timeout_ns") or 0
    answered = [v for v, _ in lat.recorded() if not timeout_ns or v < timeout_ns] if lat.total else []
    top = max(answered, default=0)
    fine = LinearHistogram.from_engine(result.packet_hist)
    resolution = lat.highest_equivalent(top) - lat.lowest_equivalent(top) + 1 if top else None
    if fine is not None and (not fine.total or fine.max_ns is not None):
        # It knows the answers exactly: none (a lost packet's bucket may start below its
        # timeout), or every one in its 100 ns bins.
        resolution = fine.bin_ns if fine.total else None
    per_s = (lambda n: n / elapsed_s) if elapsed_s > 0 else (lambda n: None)
    return {
        "size_bytes": size,
        "payload_bytes": _core.packet_payload_len(size, ipv6),
        "flows": settings["flows"],
        "sent": sent, "received": received, "lost": c.get("lost", 0),
        "loss_ratio": c.get("lost", 0) / sent if sent else None,
        "reordered": c.get("reordered", 0), "reorder_max": c.get("reorder_max", 0), "duplicates": c.get("duplicates", 0),
        "rate_pps": per_s(received), "sent_pps": per_s(sent),
        "bits_per_s": None if per_s(received) is None else per_s(received) * size * 8,
        "resolution_ns": resolution,
        "max_loss": settings["max_loss"],
        "histogram": None if fine is None else _packethist_json(fine, ps),
    }


def _packethist_json(fine: LinearHistogram, ps) -> dict:
    ps = sorted(set(PACKET_PERCENTILES) | set(ps))
    return {"bin_ns": fine.bin_ns, "range_ns": fine.range_ns, "count": fine.total, "above": fine.above,
            "max_ns": fine.max_ns,
            "percentiles": [{"p": p, "value_ns": v} for p, v in zip(ps, fine.values_at_percentiles(ps))]}


def _latency(config: dict, result: AgentResult, analysis: Analysis, methodology: dict, d: dict) -> dict:
    lat_hist = decode_histogram(result.latency_hist)
    return {
        # Where each reply's receive time came from (spec.timestamp_source), and why not a better one.
        "source": config.get("timestamps", "user"),
        "source_note": config.get("timestamps_note"),
        "kernel_stamped_replies": result.counters.get("rx_kernel", 0),
        # Replies whose request carries the kernel's transmit stamp (samples: sent_ns).
        "kernel_stamped_sends": result.counters.get("tx_kernel", 0),
        # Samples behind the percentiles: every one after the warm-up.
        "samples": analysis.samples_used,
        "sample_every": methodology["effective_sample_every"],
        "confidence": config["confidence"],
        "percentiles": [p.as_json() for p in analysis.percentiles],
        "target": analysis.target.as_json() if analysis.target else None,
        # Every request of the run (warm-up included; censored ones at the time they waited).
        "histogram": hist_json(lat_hist, [p.p for p in analysis.percentiles] or DEFAULT_PERCENTILES) | hist_params(),
        # Every request intended in the window the statistics used (those left out included).
        "window": {"start_ns": analysis.window[0], "end_ns": analysis.window[1]}
                  | d.get("window_every_request", {}),
    }


def _engine(result: AgentResult) -> dict:
    return {
        "pinned_cpus": result.pinned_cpus,
        "cpu_s": result.cpu_ns / 1e9,
        "cpu_ns_per_request": result.cpu_ns / max(result.counters["sent"], 1) if result.counters["sent"] else None,
        "preemptions": result.preemptions,
        "sleeps": result.sleeps,
        "sleeps_per_request": result.sleeps / result.counters["sent"] if result.counters["sent"] else None,
        "stalls": result.stalls,
        "stalled_s": result.stalled_ns / 1e9,
        "stall_threshold_ns": STALL_NS,
        "host_steal_s": result.steal_s,
    }
