"""The interval logs: latency.hlog (the whole run) and latency-AGENT.hlog (each agent's), HdrHistogram
interval logs of every request by 100 ms of intended send time (docs/results.md)."""

from __future__ import annotations

import base64
import contextlib
import heapq
import itertools
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tailwise import __version__, _core
from tailwise.results.export.base import RunFiles
from tailwise.results.measured import AgentResult
from tailwise.stats.histogram import decode


@dataclass(frozen=True)
class IntervalLogs:
    """latency.hlog and one latency-AGENT.hlog per timed agent (``write_interval_logs``)."""

    def write(self, directory: Path, run: RunFiles) -> list[Path]:
        return write_interval_logs(directory, agent_intervals(run.result, run.tag), run.result.wall_start_s)


#: Agent names become interval log tags (``Tag=NAME``) and file names (``latency-NAME.hlog``):
#: HdrHistogram's log readers split lines at commas and white space.
AGENT_TAG = re.compile(r"[A-Za-z0-9_.-]+")
#: The interval log's ``Interval_Max`` column is the histogram's max over this, as HdrHistogram's
#: own writers (Java and Python) do by default: ns values → ms.
HLOG_MAX_UNIT_RATIO = 1_000_000
#: The version of the log format written (Java HdrHistogram 2.2's ``HistogramLogWriter``: tags).
HLOG_FORMAT_VERSION = "1.3"


def interval_log_header(wall_start_s: float, tag: str | None = None) -> str:
    """An interval log's header lines (``write_interval_logs``; results/journal.py, line by line)."""
    if tag is not None and not AGENT_TAG.fullmatch(tag):
        raise ValueError(f"interval log tag {tag!r}: letters, digits, '_', '.' and '-' only")
    interval_ns, _ = _core.interval_params()
    when = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(wall_start_s))
    return (f"#[tailwise {__version__}: every request's latency (ns) from its intended send time, "
            f"one histogram per {interval_ns / 1e9:g} s of intended send time"
            f"{'' if tag is None else ', agent ' + tag}]\n"
            f"#[Histogram log format version {HLOG_FORMAT_VERSION}]\n"
            f"#[StartTime: {wall_start_s:.3f} (seconds since epoch), {when}]\n"
            f"#[BaseTime: {wall_start_s:.3f} (seconds since epoch)]\n"
            '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"\n')


def interval_log_line(index: int, h: _core.Histogram, tag: str | None = None) -> str:
    """One interval's line of an interval log: the ``index``-th 100 ms of intended send time.

    The logs are HdrHistogram interval logs (log format 1.3, as Java's ``HistogramLogWriter``
    writes it): one line per 100 ms of *intended* send time, ``start,length,max,histogram`` with
    start and length in s after ``#[BaseTime]`` (= ``#[StartTime]``, the engine's start) and max in
    ms; untagged, or every line ``Tag=TAG,`` (Java's ``HistogramLogProcessor`` reads only untagged
    lines unless given ``-tag``). The lines are formatted here, the histograms encoded by the
    crate: the crate's ``IntervalLogWriter`` writes Interval_Max to 3 decimals (docs/results.md: 6,
    to the ns), no legend line, and a ``#[MaxValueDivisor]`` line Java's writer does not."""
    interval_ns, _ = _core.interval_params()
    prefix = "" if tag is None else f"Tag={tag},"
    # Max to the ns (6 decimals of ms): readers skip it, people read it.
    return (f"{prefix}{index * interval_ns / 1e9:.3f},{interval_ns / 1e9:.3f},"
            f"{h.max / HLOG_MAX_UNIT_RATIO:.6f},{base64.b64encode(h.encode()).decode()}\n")


def write_interval_logs(out: Path, intervals_by_agent: dict, wall_start_s: float) -> list[Path]:
    """``latency.hlog``, the untagged interval log of the whole run (every agent's requests added
    interval by interval: what HdrHistogram's tools read by default), and beside it one tagged log
    per agent, ``latency-AGENT.hlog`` (``Tag=AGENT``). Returns the paths written.

    The agents' intervals are walked together in index order and each is decoded as its lines are
    written, never all of them at once: a 1-hour run has 36,000 per agent, ~36 KB each decoded."""
    tags = list(intervals_by_agent)
    paths = [out / "latency.hlog", *(out / f"latency-{tag}.hlog" for tag in tags)]
    _, digits = _core.interval_params()
    lowest, highest, _ = _core.histogram_params()
    streams = [_tagged_stream(a, iv) for a, iv in enumerate(intervals_by_agent.values())]
    with contextlib.ExitStack() as files:
        whole, *own = (files.enter_context(open(p, "w")) for p in paths)
        whole.write(interval_log_header(wall_start_s))
        for f, tag in zip(own, tags):
            f.write(interval_log_header(wall_start_s, tag))
        # The same index is the same 100 ms of intended send time after the run's start.
        for index, rows in itertools.groupby(heapq.merge(*streams), key=lambda row: row[0]):
            decoded = [(a, decode(raw)) for _, a, raw in rows]  # at most one per agent
            for a, h in decoded:
                own[a].write(interval_log_line(index, h, tags[a]))
            added = decoded[0][1]
            if len(decoded) > 1:
                added = _core.Histogram(lowest, highest, digits)
                for _, h in decoded:
                    added.add(h)
            whole.write(interval_log_line(index, added))
    return paths


def _tagged_stream(agent: int, intervals) -> Iterator[tuple[int, int, bytes]]:
    for index, raw in encoded_in_order(intervals):
        yield index, agent, raw


#: Interval histograms fetched from the engine at a time for the logs: 100 s of a run, ~0.5 MB
#: encoded at 50k req/s (a 1-hour run's 36,000 were ~15 MB at once, ~20 MB more while copied).
LOG_CHUNK = 1_000


def encoded_in_order(intervals) -> Iterator[tuple[int, bytes]]:
    """An agent's finished interval histograms as (index, V2 bytes), in index order, ``LOG_CHUNK``
    at a time from the engine's store (``_core.Intervals.counts``/``encoded``: the same intervals
    ``log()`` gives, never all of them at once); a run on agents' (agents/merge.MemberIntervals,
    kept encoded in memory) by its ``log()``."""
    if intervals is None:
        return
    if not hasattr(intervals, "encoded"):
        yield from sorted(intervals.log(), key=lambda row: row[0])
        return
    indices = sorted(index for index, _ in intervals.counts())
    for at in range(0, len(indices), LOG_CHUNK):
        chunk = indices[at:at + LOG_CHUNK]
        yield from zip(chunk, intervals.encoded(chunk))


def agent_tag(address: str) -> str:
    """An agent's HOST:PORT as its interval log's tag and file name: ':' → '-', and anything but
    letters, digits, '_', '.' and '-' (an IPv6 address's brackets) dropped or made '-'."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", address.replace("[", "").replace("]", "").replace(":", "-"))


def agent_intervals(result: AgentResult, local_tag: str = "local") -> dict:
    """Each agent that timed its requests, by tag, with its own interval histograms: the in-process
    agent as ``local_tag``; a run on agents (agents/group.py), each timed agent by its address (a
    load agent times nothing and has no log)."""
    if result.agents is None:
        return {local_tag: result.intervals}
    out: dict = {}
    for i, a in enumerate(result.agents):
        if a.timed:
            tag = agent_tag(a.address)
            out[tag if tag not in out else f"{tag}-{i}"] = result.intervals.member(i)
    return out
