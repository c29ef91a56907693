"""Issue 19, item 4: the files of a results directory read by the ecosystem's own tools.

* ``latency.hlog`` is the untagged HdrHistogram interval log of the whole run, which Java
  HdrHistogram 2.2.2's ``HistogramLogProcessor`` and Python's ``hdrh`` read; ``latency-local.hlog``
  beside it is the agent's, every line ``Tag=local``. The Java tool's percentiles equal the
  summary's every-request histogram (``latency.hdr``, ``summary.latency.histogram``) at the
  interval log's resolution — exactly, row by row (see ``at_interval_resolution``).
* ``latency.hgrm`` is what Java writes for ``latency.hdr``, byte for byte: its footer's Mean,
  StdDeviation and Max in µs like its rows.
* samples files: times are int64 (differences can be negative), flags unsigned.
* ``load_results``: NaN for percentiles the samples cannot bound; a one-line error for a
  directory that is not a run or a sweep (a ``tailwise compare --out``).

The Java tool: scripts/test downloads the jar (scripts/hdrhistogram-jar) and sets
TAILWISE_HDRHISTOGRAM_JAR; without that variable the Java tests skip, with it they fail when the
jar or ``java`` is missing. Locally: TAILWISE_HDRHISTOGRAM_JAR=path/to/HdrHistogram-2.2.2.jar.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from support.cli import MEASURED, run_cli

JAR_ENV = "TAILWISE_HDRHISTOGRAM_JAR"
JAVA_TIMEOUT_S = 60
#: The percentile distribution's row: value, percentile (a fraction), total count[, 1/(1-p)].
ROW = re.compile(r"^\s*([\d.]+)\s+([\d.]+)\s+(\d+)(?:\s+([\d.]+|Infinity))?\s*$")


# --------------------------------------------------------------------------- fixtures and helpers

@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> tuple[dict, Path]:
    """One run against the built-in server, parquet samples: (summary, directory)."""
    out = tmp_path_factory.mktemp("interop") / "r1"
    r = run_cli("run", "--rate", "5000", "--duration", "1", "--samples-format", "parquet", "--out", str(out), "--json")
    assert r.returncode in MEASURED, r.stderr[-2000:]
    return json.loads((out / "summary.json").read_text()), out


def java_tool() -> tuple[str, str]:
    """(java, jar) for HdrHistogram's Java tools: skip without TAILWISE_HDRHISTOGRAM_JAR, fail
    (in the test, not its set-up) when it is set (scripts/test) and either is missing."""
    jar = os.environ.get(JAR_ENV)
    if not jar:
        pytest.skip(f"{JAR_ENV} is not set: scripts/test downloads HdrHistogram's jar and sets it "
                    f"(or set it to a copy of HdrHistogram-2.2.2.jar)")
    java = shutil.which("java")
    if java is None:
        pytest.fail(f"{JAR_ENV} is set but there is no `java` on PATH: install default-jre-headless "
                    f"(scripts/test does when java is missing)")
    if not Path(jar).is_file():
        pytest.fail(f"{JAR_ENV}={jar} does not exist: scripts/hdrhistogram-jar downloads it from Maven Central "
                    f"(see its message in scripts/test's output)")
    return java, jar


def log_processor(java_jar, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    java, jar = java_jar
    r = subprocess.run([java, "-cp", jar, "org.HdrHistogram.HistogramLogProcessor", *args], cwd=cwd,
                       capture_output=True, text=True, timeout=JAVA_TIMEOUT_S)
    # The processor runs in a thread of its own: an exception there still exits 0.
    assert r.returncode == 0 and "Exception" not in r.stderr and not r.stderr.strip(), \
        f"HistogramLogProcessor {' '.join(args)} failed (exit {r.returncode}): {r.stderr[-2000:]}"
    return r


def parse_distribution(text: str) -> tuple[list[tuple[float, float, int]], dict[str, float]]:
    """Percentile-distribution text (.hgrm, or the log processor's output) → rows (value,
    percentile fraction, total count) and the footer's figures by name."""
    rows, footer = [], {}
    for line in text.splitlines():
        if line.startswith("#[") and "=" in line:
            for part in line.strip("#[]").split(","):
                name, _, value = part.partition("=")
                footer[name.strip()] = float(value)
        elif m := ROW.match(line):
            rows.append((float(m.group(1)), float(m.group(2)), int(m.group(3))))
    return rows, footer


def read_hdr(path: Path) -> HdrHistogram:
    return HdrHistogram.decode(path.read_bytes().strip())


def interval_params() -> tuple[int, int]:
    from tailwise import _core

    return _core.interval_params()


def at_interval_resolution(h: HdrHistogram) -> HdrHistogram:
    """The every-request histogram (3 significant digits) at the interval log's 2 digits.

    Both count every request once, at the same value; HdrHistogram's buckets nest (sub-bucket
    counts 2048 and 256, both powers of 2 from 1 ns), so each 3-digit bucket lies inside one
    2-digit bucket and moving its count there gives exactly the histogram the intervals add up to.
    Percentiles then agree exactly; against the 3-digit figures they agree to the 2-digit bucket
    (1 % at most), the interval log's own resolution."""
    digits = interval_params()[1]
    out = HdrHistogram(h.lowest_trackable_value, h.highest_trackable_value, digits)
    for item in h.get_recorded_iterator():
        out.record_value(item.value_iterated_to, item.count_at_value_iterated_to)
    return out


def data_lines(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if ln and not ln.startswith(("#", '"'))]


# --------------------------------------------------------------------------- latency.hlog

def test_hlog_is_the_untagged_log_of_the_whole_run_with_the_agents_tagged_beside(run_dir):
    summary, out = run_dir
    whole, local = out / "latency.hlog", out / "latency-local.hlog"
    interval_ns, _ = interval_params()
    for path in (whole, local):
        header = [ln for ln in path.read_text().splitlines() if ln.startswith(("#", '"'))]
        assert "#[Histogram log format version 1.3]" in header
        start = [float(m.group(1)) for ln in header if (m := re.match(r"#\[StartTime: ([\d.]+) \(seconds since", ln))]
        base = [float(m.group(1)) for ln in header if (m := re.match(r"#\[BaseTime: ([\d.]+) \(seconds since", ln))]
        # Interval starts are relative to BaseTime, which is the run's StartTime (the engine's start).
        assert len(start) == len(base) == 1 and start == base
        started_at = summary["started_at"]
        assert abs(start[0] - _epoch(started_at)) < 1.5, f"StartTime {start[0]} vs started_at {started_at}"
        assert header[-1] == '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"'
    untagged, tagged = data_lines(whole), data_lines(local)
    assert untagged and all(not ln.startswith("Tag=") for ln in untagged)
    assert all(ln.startswith("Tag=local,") for ln in tagged)
    # One agent: the whole run's intervals are the agent's.
    assert [ln.removeprefix("Tag=local,") for ln in tagged] == untagged
    for ln in untagged:
        start_s, length_s, max_ms, payload = ln.split(",")
        assert float(length_s) == interval_ns / 1e9
        assert float(start_s) / (interval_ns / 1e9) == pytest.approx(round(float(start_s) / (interval_ns / 1e9)))
        # Interval_Max as HdrHistogram's writers put it: the max over 10^6, ns → ms.
        assert float(max_ms) == pytest.approx(HdrHistogram.decode(payload).get_max_value() / 1e6, abs=1e-6)


def _epoch(iso: str) -> float:
    import calendar
    import time

    return calendar.timegm(time.strptime(iso, "%Y-%m-%dT%H:%M:%SZ"))


def test_python_hdrh_reads_the_hlog_as_the_whole_run(run_dir):
    from tailwise.results.summary import value_at_percentile

    summary, out = run_dir
    hist = summary["latency"]["histogram"]
    _, digits = interval_params()
    reader = HistogramLogReader(str(out / "latency.hlog"), HdrHistogram(hist["lowest_ns"], hist["highest_ns"], digits))
    total = HdrHistogram(hist["lowest_ns"], hist["highest_ns"], digits)
    previous_end = None
    while (h := reader.get_next_interval_histogram()) is not None:
        assert h.get_tag() is None
        if previous_end is not None:
            assert h.get_start_time_stamp() >= previous_end - 1e-6  # in order, never overlapping
        previous_end = h.get_end_time_stamp()
        total.add(h)
    assert total.get_total_count() == hist["count"] == summary["counters"]["intended"]
    reference = at_interval_resolution(read_hdr(out / "latency.hdr"))
    for pc in hist["percentiles"]:
        # Exact: the same requests at the same resolution (at_interval_resolution), each read as
        # Java's getValueAtPercentile reads it (the summary's rule).
        at = value_at_percentile(total, pc["p"])
        assert at == value_at_percentile(reference, pc["p"]) == total.get_highest_equivalent_value(pc["value_ns"])
    assert total.get_max_value() == total.get_highest_equivalent_value(hist["max_ns"])


def test_java_log_processor_reads_the_hlog_and_agrees_with_the_summary(run_dir, tmp_path):
    java_jar = java_tool()
    summary, out = run_dir
    hist = summary["latency"]["histogram"]
    # As a user types it (output in ms, HdrHistogram's default): it must just work.
    plain = log_processor(java_jar, "-i", "latency.hlog", cwd=out)
    rows_ms, footer_ms = parse_distribution(plain.stdout)
    assert rows_ms and footer_ms["Total count"] == hist["count"]
    # In ns, to compare value by value.
    ns = log_processor(java_jar, "-i", str(out / "latency.hlog"), "-outputValueUnitRatio", "1", cwd=tmp_path)
    rows, footer = parse_distribution(ns.stdout)
    assert [c for _, _, c in rows_ms] == [c for _, _, c in rows]
    reference = at_interval_resolution(read_hdr(out / "latency.hdr"))
    expected = [(float(it.value_iterated_to), it.percentile_level_iterated_to / 100, it.total_count_to_this_value)
                for it in _java_ticks(reference)]
    assert len(rows) == len(expected), "the Java tool's rows are not the every-request histogram's"
    for (value, q, count), (e_value, e_q, e_count) in zip(rows, expected):
        # Every row exactly the summary's histogram at the log's 2 significant digits.
        assert (value, count) == (e_value, e_count) and q == pytest.approx(e_q, abs=1e-12), (value, q, count)
    assert rows[-1][2] == footer["Total count"] == hist["count"]
    assert footer["Max"] == reference.get_max_value() == reference.get_highest_equivalent_value(hist["max_ns"])
    # The summary's percentiles fall between the Java rows around them (to the 2-digit bucket).
    for pc in hist["percentiles"]:
        at = reference.get_highest_equivalent_value(pc["value_ns"])
        below = [v for v, q, _ in rows if q <= pc["p"] / 100]
        above = [v for v, q, _ in rows if q >= pc["p"] / 100]
        assert below[-1] <= at <= above[0], f"p{pc['p']:g}: {at} ns outside [{below[-1]}, {above[0]}]"
    # Mean to the histograms' resolution (means use each bucket's middle).
    assert footer["Mean"] == pytest.approx(hist["mean_ns"], rel=0.01)
    # Python's hdrh on the same log: the same rows.
    py_total = HdrHistogram(hist["lowest_ns"], hist["highest_ns"], interval_params()[1])
    reader = HistogramLogReader(str(out / "latency.hlog"), py_total)
    while reader.add_next_interval_histogram() is not None:
        pass
    assert py_total.get_total_count() == hist["count"]
    assert [(float(it.value_iterated_to), it.total_count_to_this_value) for it in _java_ticks(py_total)] == \
        [(v, c) for v, _, c in rows]


def test_java_log_processor_reads_the_agents_tagged_log(run_dir, tmp_path):
    java_jar = java_tool()
    summary, out = run_dir
    r = log_processor(java_jar, "-i", str(out / "latency-local.hlog"), "-tag", "local", "-outputValueUnitRatio", "1",
                      cwd=tmp_path)
    rows, footer = parse_distribution(r.stdout)
    assert footer["Total count"] == summary["latency"]["histogram"]["count"]
    whole, _ = parse_distribution(log_processor(java_jar, "-i", str(out / "latency.hlog"), "-outputValueUnitRatio", "1",
                                                cwd=tmp_path).stdout)
    assert rows == whole


def _java_ticks(h: HdrHistogram):
    from tailwise.results.export.histograms import HGRM_TICKS_PER_HALF, JavaPercentileIterator

    return JavaPercentileIterator(h, HGRM_TICKS_PER_HALF)


def test_histogram_percentiles_are_read_as_java_reads_them():
    """The summary's every-request percentiles: the ⌈p/100 · N⌉-th smallest request, as Java's
    getValueAtPercentile (and its log processor) reads them — never one request lower, as hdrh's
    rounding of the rank can be."""
    from tailwise.results.summary import hist_json, value_at_percentile

    h = HdrHistogram(1, 3_600_000_000_000, 3)
    for v in range(1, 11):  # 1 … 10 ns
        h.record_value(v)
    # 14 % of 10 requests: the 2nd smallest (only 10 % are ≤ 1 ns); hdrh 0.10 answers 1 ns.
    assert value_at_percentile(h, 14) == 2 and h.get_value_at_percentile(14) == 1
    assert [value_at_percentile(h, p) for p in (0, 10, 10.0001, 50, 90, 99, 100)] == [1, 1, 2, 5, 9, 10, 10]
    assert [x["value_ns"] for x in hist_json(h, (14, 50, 99))["percentiles"]] == [2, 5, 10]


# --------------------------------------------------------------------------- latency.hgrm

def test_hgrm_footer_is_in_the_units_of_its_rows(run_dir):
    summary, out = run_dir
    hist = summary["latency"]["histogram"]
    h = read_hdr(out / "latency.hdr")
    rows, footer = parse_distribution((out / "latency.hgrm").read_text())
    assert set(footer) == {"Mean", "StdDeviation", "Max", "Total count", "Buckets", "SubBuckets"}
    # µs with 3 decimals: the ns, rounded.
    assert footer["Mean"] == pytest.approx(hist["mean_ns"] / 1e3, abs=5e-4)
    assert footer["StdDeviation"] == pytest.approx(h.get_stddev() / 1e3, abs=5e-4)
    assert footer["Max"] == pytest.approx(hist["max_ns"] / 1e3, abs=5e-4) and rows[-1][0] == footer["Max"]
    assert footer["Total count"] == hist["count"] == rows[-1][2]
    # One unit: the spread is within the span of the rows (a StdDeviation in ns would be 1000×).
    assert footer["StdDeviation"] <= rows[-1][0] - rows[0][0] + 1e-3
    assert rows[0][0] <= footer["Mean"] <= rows[-1][0]


def test_hgrm_is_what_java_writes_for_the_histogram(run_dir, tmp_path):
    """Java's own outputPercentileDistribution(…, 1000.0) of latency.hdr (as a one-interval log)
    is latency.hgrm, byte for byte."""
    java_jar = java_tool()
    _, out = run_dir
    (tmp_path / "one.hlog").write_text(f"0.000,1.000,0.0,{(out / 'latency.hdr').read_text().strip()}\n")
    r = log_processor(java_jar, "-i", "one.hlog", "-outputValueUnitRatio", "1000", cwd=tmp_path)
    assert r.stdout == (out / "latency.hgrm").read_text()


def test_hgrm_of_an_empty_histogram(tmp_path):
    from tailwise.results.export.histograms import write_hgrm

    write_hgrm(tmp_path / "e.hgrm", base64.b64decode(HdrHistogram(1, 3_600_000_000_000, 3).encode()))
    rows, footer = parse_distribution((tmp_path / "e.hgrm").read_text())
    assert rows == [] and footer["Total count"] == 0 and footer["StdDeviation"] == 0


# --------------------------------------------------------------------------- samples

def test_sample_times_are_signed_so_differences_can_be_negative(tmp_path):
    """A request never sent has sent_ns 0: sent_ns − intended_ns is negative, not 2⁶⁴ − x — from
    parquet read by pandas, and from either format read by load_results (dataset.read_samples)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    from tailwise.results.rows import SAMPLE_DTYPE, Flag
    from tailwise.results.dataset import read_samples
    from tailwise.results.files import SAMPLE_COLUMN_DTYPES
    from tailwise.results.export.samples import SIGNED_NS_COLUMNS, sample_columns

    rows = np.zeros(2, dtype=SAMPLE_DTYPE)
    for name, values in {"intended_ns": (1_000, 2_000), "sent_ns": (1_200, 0), "tx_ns": (1_150, 0),
                         "rx_user_ns": (9_000, 0), "latency_ns": (5_000, 1_000_000), "busy_from_ns": (1_000, 500),
                         "flags": (int(Flag.KERNEL_TX | Flag.KERNEL_RX), int(Flag.CENSORED | Flag.NEVER_SENT))}.items():
        rows[name] = values
    columns = sample_columns(rows)
    columns["used"] = np.array([1, 0], dtype=np.uint8)
    table = pa.table(columns)  # as the samples exporter writes them
    (tmp_path / "p").mkdir()
    (tmp_path / "c").mkdir()
    pq.write_table(table, tmp_path / "p" / "samples.parquet")
    pacsv.write_csv(table, tmp_path / "c" / "samples.csv")
    assert set(SIGNED_NS_COLUMNS) == set(SAMPLE_COLUMN_DTYPES) - {"flags", "thread", "request", "used"}
    for df in (pd.read_parquet(tmp_path / "p" / "samples.parquet"), read_samples(tmp_path / "p"),
               read_samples(tmp_path / "c")):
        assert list(df.columns) == list(SAMPLE_COLUMN_DTYPES)
        assert {c: str(t) for c, t in df.dtypes.items()} == SAMPLE_COLUMN_DTYPES
        assert (df["sent_ns"] - df["intended_ns"]).tolist() == [150, -2_000]
        assert (df["received_ns"] - df["sent_ns"]).tolist() == [5_000 - 150, 0]


def test_samples_files_of_a_run_have_signed_times(run_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from tailwise.results.export.samples import SIGNED_NS_COLUMNS

    _, out = run_dir
    schema = pq.read_schema(out / "samples.parquet")
    for name in SIGNED_NS_COLUMNS:
        assert schema.field(name).type == pa.int64(), name
    assert schema.field("flags").type == pa.uint32() and schema.field("used").type == pa.uint8()


# --------------------------------------------------------------------------- load_results

def test_load_results_gives_nan_for_missing_percentiles(run_dir, tmp_path):
    import tailwise

    summary, out = run_dir
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    doc = json.loads((copy / "summary.json").read_text())
    p = doc["latency"]["percentiles"][-1]
    p["value_ns"] = p["low_ns"] = p["high_ns"] = None  # as the JSON has it where the samples cannot bound p
    (copy / "summary.json").write_text(json.dumps(doc))
    res = tailwise.load_results(copy)
    name = f"p{p['p']:g}".replace(".", "_")
    for column in (f"{name}_ns", f"{name}_low_ns", f"{name}_high_ns"):
        assert res.points[column].dtype == np.float64 and math.isnan(res.points[column].iloc[0]), column
        assert res.points[column].isna().all() and not (res.points[column].values == None).any()  # noqa: E711
    # The run as measured: every percentile column float64, NaN exactly where the JSON is null.
    points = tailwise.load_results(out).points
    for pc in summary["latency"]["percentiles"]:
        column = f"p{pc['p']:g}".replace(".", "_") + "_ns"
        assert points[column].dtype == np.float64
        assert math.isnan(points[column].iloc[0]) == (pc["value_ns"] is None)


def test_load_results_refuses_a_compare_directory_in_one_line(run_dir, tmp_path):
    import tailwise
    from tailwise.errors import InputError

    _, out = run_dir
    second = tmp_path / "r2"
    shutil.copytree(out, second)
    cmp = tmp_path / "cmp"
    r = run_cli("compare", str(out), str(second), "--out", str(cmp), timeout=90)
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads((cmp / "summary.json").read_text())["schema"] == "tailwise.compare/1"
    with pytest.raises(InputError) as e:
        tailwise.load_results(cmp)
    line = e.value.line()
    assert "\n" not in line and str(cmp) in line and "tailwise compare" in line
    assert str(out) in line  # the fix: the run directories it compares
    # The report command says the same, in one line, exit 2.
    r = run_cli("report", str(cmp), timeout=60)
    assert r.returncode == 2 and "tailwise compare" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("what", ["empty", "calibrate", "not-json", "points-of-a-sweep"])
def test_load_results_refuses_what_is_not_a_run_or_sweep(tmp_path, what):
    import tailwise
    from tailwise.errors import InputError

    d = tmp_path / what
    d.mkdir()
    if what == "calibrate":
        (d / "summary.json").write_text(json.dumps({"schema": "tailwise.calibrate/1"}))
    elif what == "not-json":
        (d / "summary.json").write_text("{")
    elif what == "points-of-a-sweep":
        (d / "000-10000rps").mkdir()
    with pytest.raises(InputError) as e:
        tailwise.load_results(d)
    line = e.value.line()
    assert "\n" not in line and str(d) in line and "run or sweep" in line
