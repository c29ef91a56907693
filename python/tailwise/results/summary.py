"""The summary of a run (schema ``tailwise.summary/1``) and the files written to ``--out``.

Field names are a contract: later versions add fields, never rename them. Unknown values are
``null``, never 0 and never NaN (which is not JSON).
"""

from __future__ import annotations

import base64
import contextlib
import heapq
import itertools
import math
import re
import shutil
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Iterator

import numpy as np
from hdrh.histogram import HdrHistogram
from hdrh.iterators import PercentileIterator

from tailwise import __version__, _core
from tailwise.results.measured import AgentResult
from tailwise.results.rows import Flag
from tailwise.results.documents import base as documents_base
from tailwise.results.documents.run import Summary
from tailwise.results.files import (RUN_SCHEMA, SAMPLE_COLUMN_DTYPES, STAGE, check_out_dir, install,
                                    release_freed_memory, write_json, write_packet_hist_csv, write_packets_csv)
from tailwise.stats.histogram import LinearHistogram, decode, java_rank
from tailwise.stats.quantiles import DEFAULT_PERCENTILES

SCHEMA = RUN_SCHEMA
#: A timing-loop iteration longer than this counts as a stall (the engine's own: engine/thread.rs).
STALL_NS: int = _core.STALL_NS
SAMPLE_FORMATS = ("csv", "parquet")


def decode_histogram(raw: bytes) -> HdrHistogram:
    """HdrHistogram V2 compressed bytes (from the engine) → an hdrh histogram."""
    return HdrHistogram.decode(base64.b64encode(raw))


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
    ``log()`` gives, never all of them at once); a run on agents' (agents/group.MemberIntervals,
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


def values_at_percentiles(h: HdrHistogram, ps) -> list[int]:
    """Percentiles p (0–100) of a histogram as Java HdrHistogram's ``getValueAtPercentile`` reads
    them (and its log processor, and stats/histogram.py): the highest value equivalent to the
    ⌈p/100 · N⌉-th smallest (the lowest for p = 0); 0 when empty. hdrh 0.10 rounds that rank to the
    nearest instead, which can give the value one request lower: a percentile better than the
    requests measured. One walk of the histogram for all of them."""
    n = h.get_total_count()
    ranks = [java_rank(p, n) for p in ps]
    values = [0] * len(ps)
    pending = sorted(range(len(ps)), key=lambda i: ranks[i])
    if n == 0:
        return values
    for item in h.get_recorded_iterator():
        while pending and item.total_count_to_this_value >= ranks[pending[0]]:
            i = pending.pop(0)
            v = item.value_iterated_to
            values[i] = h.get_lowest_equivalent_value(v) if ps[i] == 0 else h.get_highest_equivalent_value(v)
        if not pending:
            break
    return values


def value_at_percentile(h: HdrHistogram, p: float) -> int:
    """One percentile, as ``values_at_percentiles`` reads it."""
    return values_at_percentiles(h, [p])[0]


def hist_json(h: HdrHistogram, ps=DEFAULT_PERCENTILES) -> dict:
    n = h.get_total_count()
    if n == 0:
        return {"count": 0, "min_ns": None, "mean_ns": None, "max_ns": None,
                "percentiles": [{"p": p, "value_ns": None} for p in ps]}
    return {
        "count": n,
        "min_ns": h.get_min_value(),
        "mean_ns": h.get_mean_value(),
        "max_ns": h.get_max_value(),
        "percentiles": [{"p": p, "value_ns": v} for p, v in zip(ps, values_at_percentiles(h, ps))],
    }


def hist_params() -> dict:
    """The HDR histogram's parameters, so that latency.hdr can be read back exactly."""
    lowest, highest, digits = _core.histogram_params()
    return {"unit": "ns", "lowest_ns": lowest, "highest_ns": highest, "significant_digits": digits}


def amend(summary: dict, **fields) -> dict:
    """Add to a built summary what is known only after it (``target_stats``, ``thresholds``,
    ``sweep``), each validated as the model declares it."""
    return documents_base.amend(summary, Summary, **fields)


#: Columns of the samples file that hold ns: int64 (files.SAMPLE_COLUMN_DTYPES).
SIGNED_NS_COLUMNS = tuple(name for name, dtype in SAMPLE_COLUMN_DTYPES.items() if dtype == "int64")


def sample_columns(samples: np.ndarray) -> dict[str, np.ndarray]:
    """The samples file's columns, from engine rows (``SAMPLE_DTYPE``): per request its intended,
    sent and received times (ns since the engine's start) with the best stamp each has — ``sent_ns``
    the kernel's transmit stamp when there is one, ``received_ns`` the reply time the latency counts
    to (the kernel's receive stamp when flags say KERNEL_RX; 0 without a reply) — and the user-space
    clock around the system calls beside them, so that send lag (sent − intended) and response time
    (received − sent) can be derived per source; then the instant the whole client was last idle
    (``busy_from_ns``), the wait for a slot the target held (``slot_wait_ns``) and the engine
    thread. Times are int64 (``SIGNED_NS_COLUMNS``), ``flags`` and ``thread`` uint32."""
    ns = {name: samples[name].astype(np.int64) for name in ("intended_ns", "sent_ns", "tx_ns", "rx_user_ns",
                                                            "latency_ns", "inflation_ns", "busy_from_ns",
                                                            "slot_wait_ns")}
    answered = (samples["flags"] & int(Flag.CENSORED)) == 0
    return {
        "intended_ns": ns["intended_ns"],
        "sent_ns": np.where(ns["tx_ns"] > 0, ns["tx_ns"], ns["sent_ns"]),
        "received_ns": np.where(answered, ns["intended_ns"] + ns["latency_ns"], 0),
        "latency_ns": ns["latency_ns"],
        "flags": samples["flags"],
        "inflation_ns": ns["inflation_ns"],
        "sent_user_ns": ns["sent_ns"],
        "received_user_ns": ns["rx_user_ns"],
        "busy_from_ns": ns["busy_from_ns"],
        "slot_wait_ns": ns["slot_wait_ns"],
        "thread": samples["thread"],
    }


def _write_samples(path: Path, fmt: str, summary: dict, result: AgentResult, used: np.ndarray | None) -> None:
    """The samples file: from the rows the run appended to disk (``result.samples_file``: a file,
    or one per agent), in bounded memory (results/samples.py), or from the rows in memory (none
    was kept on disk)."""
    from tailwise.results import samples as files

    spool = result.samples_file
    paths = [Path(p) for p in (spool if isinstance(spool, list) else [spool])] if spool is not None else []
    if paths and all(p.exists() for p in paths):
        window = summary["latency"]["window"]
        one_in = (summary["methodology"].get("subsample") or {}).get("one_in", 1)
        pieces = files.sorted_rows(paths, result.samples.dtype)
        used_of = files.used_rule(window["start_ns"], window["end_ns"], one_in)
    else:
        pieces = iter([result.samples])
        ok = used is not None and len(used) == len(result.samples)
        used_of = files.used_in_order(used) if ok else (lambda rows: np.zeros(len(rows), np.uint8))
    files.write_samples(path, fmt, pieces, sample_columns, used_of, result.samples.dtype)


#: The .hgrm percentile distribution is written in microseconds (values to the ns, 3 decimals).
HGRM_UNIT_NS = 1_000
#: Rows per halving of the distance to 100 % (HdrHistogram's and wrk2's default).
HGRM_TICKS_PER_HALF = 5


class JavaPercentileIterator(PercentileIterator):
    """hdrh's percentile iterator with Java HdrHistogram's ticks: ``ticks_per_half`` steps per
    halving of the distance to 100 %, the halvings counted in whole powers of 2 (hdrh 0.10 takes the
    fractional power, so its rows fall at other percentiles than Java's and wrk2's)."""

    def increment_iteration_level(self):
        self.percentile_to_iterate_from = self.percentile_to_iterate_to
        gap = 100.0 - self.percentile_to_iterate_to
        if gap:
            # As Java computes it: (long) (Math.log(100 / gap) / Math.log(2)).
            halvings = int(math.log(100.0 / gap) / math.log(2))
            self.percentile_to_iterate_to += 100.0 / (self.percentile_ticks_per_half_distance * 2 ** (halvings + 1))


def _java_f(x: float, decimals: int, width: int = 0) -> str:
    """``String.format("%W.Df", x)`` as Java writes it: the shortest decimal of x rounded half up
    (Python's % rounds the binary value half to even: 0.9997802734375 → …437, Java's …438)."""
    rounded = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    return format(rounded, "f").rjust(width)


def write_hgrm(path: Path, raw_hist: bytes) -> None:
    """The every-request latency histogram as HdrHistogram's percentile-distribution text, in µs,
    exactly as Java's ``outputPercentileDistribution(out, 5, 1000.0)`` writes it (the format of
    wrk2 and the HdrHistogram plotter): Java's percentile ticks, and a footer whose Mean,
    StdDeviation and Max are in µs like the rows (hdrh 0.10 writes other ticks and StdDeviation
    in ns)."""
    h = decode_histogram(raw_hist)
    d = h.significant_figures
    lines = [f"{'Value':>12} {'Percentile':>14} {'TotalCount':>10} {'1/(1-Percentile)':>14}\n", "\n"]
    for it in JavaPercentileIterator(h, HGRM_TICKS_PER_HALF):
        q = it.percentile_level_iterated_to / 100.0
        row = (f"{_java_f(it.value_iterated_to / HGRM_UNIT_NS, d, 12)} {_java_f(q, 12, 2)} "
               f"{it.total_count_to_this_value:10d}")
        last = it.percentile_level_iterated_to == 100.0
        lines.append(row + ("\n" if last else f" {_java_f(1.0 / (1.0 - q), 2, 14)}\n"))
    mean_us, stddev_us = h.get_mean_value() / HGRM_UNIT_NS, h.get_stddev() / HGRM_UNIT_NS
    lines.append(f"#[Mean    = {_java_f(mean_us, d, 12)}, StdDeviation   = {_java_f(stddev_us, d, 12)}]\n")
    lines.append(f"#[Max     = {_java_f(h.get_max_value() / HGRM_UNIT_NS, d, 12)}, "
                 f"Total count    = {h.get_total_count():12d}]\n")
    lines.append(f"#[Buckets = {h.bucket_count:12d}, SubBuckets     = {h.sub_bucket_count:12d}]\n")
    Path(path).write_text("".join(lines))


def write_out(out_dir: str | Path, summary: dict, result: AgentResult, used: np.ndarray | None = None,
              samples_format: str = "csv", tag: str = "local") -> list[Path]:
    """One measurement's results directory (docs/results.md): the raw samples (with a ``used``
    column: 1 where the sample went into the statistics), both histograms, the .hgrm percentile
    distribution, the interval logs (the whole run's, untagged, and each agent's, tagged: ``tag``
    for the in-process one, ``agent_tag`` of each agent's address on a run on agents), the config
    and the host facts — and summary.json last, so that a directory with a summary.json is
    complete. Returns the paths.

    The files are written into a hidden stage inside the directory and then moved in, replacing
    whole whatever tailwise wrote there before (files.install): never a new summary beside an old
    report. Whether an existing directory may be replaced is the command's to decide (--force)."""
    final = check_out_dir(out_dir)
    out = final / STAGE
    if out.exists():
        shutil.rmtree(out)  # a stage left by a write that was killed
    out.mkdir()
    samples = out / f"samples.{samples_format}"
    _write_samples(samples, samples_format, summary, result, used)
    release_freed_memory()  # the merge's pieces and their columns, before the interval logs
    (out / "latency.hdr").write_bytes(base64.b64encode(result.latency_hist) + b"\n")
    (out / "send_lag.hdr").write_bytes(base64.b64encode(result.send_lag_hist) + b"\n")
    write_hgrm(out / "latency.hgrm", result.latency_hist)
    hlogs = write_interval_logs(out, agent_intervals(result, tag), result.wall_start_s)
    if summary.get("packets"):
        write_packets_csv(out / "packets.csv", result.packet_intervals)
        hlogs.append(out / "packets.csv")
        if (fine := LinearHistogram.from_engine(result.packet_hist)) is not None:
            write_packet_hist_csv(out / "packets-hist.csv", fine)
            hlogs.append(out / "packets-hist.csv")
    write_json(out / "config.json", summary["config"])
    write_json(out / "host.json", summary["host"])
    write_json(out / "summary.json", summary)
    install(out, final)
    return [final / name for name in ("summary.json", samples.name, "latency.hdr", "send_lag.hdr", "latency.hgrm",
                                      "config.json", "host.json")] + [final / p.name for p in hlogs]
