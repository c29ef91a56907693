"""bench/memory/agent_intervals: what a run on agents' every-request interval histograms cost the
coordinator, by the run's length (agents/merge.MergedIntervals, results/export/intervals.write_interval_logs).

An agent sends each finished 100 ms interval as HdrHistogram V2 bytes. The coordinator keeps them
as they came (~300 B each at 25k req/s an agent) and adds each into one histogram of the whole run
as it arrives. Decoded, each would be ~36 KB: a 1-hour run on two agents ~2.6 GB. This replays a
run's intervals into ``MergedIntervals`` (50 distinct histograms of 2,500 lognormal latencies,
each interval its own bytes object, as they come off the wire), then asks what a run asks: the
whole-run window (the live line, the rounds), the window past a warm-up (the final analysis) and
the interval logs (``write_interval_logs``, into a scratch directory).

    python bench/memory/agent_intervals.py [--minutes 60] [--agents 2] [--out FILE | --no-out]

Prints one line and writes the figures as JSON (default bench/out/agent-intervals.json). Not a
test: nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))


def _status_mb(key: str) -> float:
    text = Path("/proc/self/status").read_text()
    return int(re.search(rf"^{key}:\s+(\d+) kB", text, re.M).group(1)) / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--agents", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "bench/out/agent-intervals.json"))
    ap.add_argument("--no-out", action="store_true")
    args = ap.parse_args()

    from tailwise import _core
    from tailwise.agents.merge import MergedIntervals
    from tailwise.results.export.intervals import write_interval_logs

    rng = np.random.default_rng(1)
    shapes = []
    for _ in range(50):
        h = _core.Histogram(_core.HIST_LOWEST_NS, _core.HIST_MAX_NS, _core.INTERVAL_SIGFIG)
        h.record_values(list((20_000 + rng.lognormal(9, 1.2, 2_500)).astype(int)))
        shapes.append(h.encode())
    intervals = int(args.minutes * 600)
    merged = MergedIntervals()
    rss0, cpu = _status_mb("VmRSS"), time.process_time()
    for i in range(intervals):
        for member in range(args.agents):
            raw = bytes(bytearray(shapes[(i * 7 + member) % len(shapes)]))  # its own object, as received
            merged.update(member, {"done": [i], "pending": []}, {f"done:{i}": raw})
    held_mb, update_s = _status_mb("VmRSS") - rss0, time.process_time() - cpu
    cpu = time.process_time()
    whole = _core.Histogram.decode(merged.window(0, intervals, False))
    whole_ms = (time.process_time() - cpu) * 1e3
    cpu = time.process_time()
    _core.Histogram.decode(merged.window(100, intervals, False))
    cut_s = time.process_time() - cpu
    with tempfile.TemporaryDirectory() as d:
        cpu = time.process_time()
        write_interval_logs(Path(d), {f"agent{m}": merged.member(m) for m in range(args.agents)}, time.time())
        logs_s = time.process_time() - cpu
    figures = {
        "machine": platform.node(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "minutes": args.minutes, "agents": args.agents, "intervals_per_agent": intervals,
        "encoded_bytes_mean": float(np.mean([len(s) for s in shapes])), "requests": int(whole.total),
        "held_mb": round(held_mb, 1), "update_cpu_s": round(update_s, 2), "whole_window_ms": round(whole_ms, 2),
        "window_past_warmup_s": round(cut_s, 2), "interval_logs_s": round(logs_s, 2),
        "peak_rss_mb": round(_status_mb("VmHWM"), 1),
    }
    print(f"{args.minutes:g} min on {args.agents} agents ({intervals:,} intervals each): "
          f"{figures['held_mb']} MB held, peak RSS {figures['peak_rss_mb']} MB; update {figures['update_cpu_s']} s CPU, "
          f"whole-run window {figures['whole_window_ms']} ms, past warm-up {figures['window_past_warmup_s']} s, "
          f"interval logs {figures['interval_logs_s']} s")
    if not args.no_out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
