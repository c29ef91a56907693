"""results/journal.py: what a run on agents has collected is on disk as it arrives, readable
without tailwise's end of run — and replaced whole by the results directory when the run ends."""

from __future__ import annotations

import json

import numpy as np

from tailwise import _core
from tailwise.results.rows import SAMPLE_DTYPE
from tailwise.results.export import install_results as install
from tailwise.results.files import result_entries
from tailwise.results.journal import COLLECTED, Journal, read_samples

AGENTS = [("10.0.0.2:7100", "symmetric"), ("[fd00::3]:7100", "symmetric")]


def _rows(n: int, start: int) -> np.ndarray:
    rows = np.zeros(n, dtype=SAMPLE_DTYPE)
    rows["intended_ns"] = np.arange(start, start + n) * 1000
    rows["latency_ns"] = 50_000 + np.arange(n)
    return rows


def _hist(*values: int) -> _core.Histogram:
    lowest, highest, _ = _core.histogram_params()
    h = _core.Histogram(lowest, highest, _core.INTERVAL_SIGFIG)
    for v in values:
        h.record(v)
    return h


def test_each_snapshot_is_on_disk_when_it_arrives(tmp_path):
    j = Journal(tmp_path / COLLECTED, {"rate": 1000})
    j.begin("run1", AGENTS, 1_700_000_000.0)
    j.samples(0, _rows(5, 0))
    j.samples(1, _rows(3, 100))
    j.samples(0, _rows(2, 5))
    j.intervals(0, {0: _hist(10_000, 20_000), 1: _hist(30_000)})
    j.intervals(0, {1: _hist(30_000)})  # an interval given again is written once
    j.counters(AGENTS[0][0], {"sent": 7})
    j.counters(AGENTS[1][0], error="agent stopped answering")
    # Read back before close: a coordinator killed now leaves exactly this.
    got = read_samples(tmp_path / COLLECTED)
    assert list(got[AGENTS[0][0]]["intended_ns"]) == [i * 1000 for i in range(7)]
    assert len(got[AGENTS[1][0]]) == 3
    fmt = json.loads((tmp_path / COLLECTED / "format.json").read_text())
    assert fmt["schema"] == "tailwise.collected/1" and fmt["config"] == {"rate": 1000}
    assert [a["tag"] for a in fmt["agents"]] == ["10.0.0.2-7100", "fd00--3-7100"]
    from hdrh.log import HistogramLogReader
    from hdrh.histogram import HdrHistogram

    total = HdrHistogram(1, 3_600_000_000_000, 2)
    reader = HistogramLogReader(str(tmp_path / COLLECTED / "latency-10.0.0.2-7100.hlog"), total)
    counts = []
    while (h := reader.get_next_interval_histogram()) is not None:
        counts.append(h.get_total_count())
    assert counts == [2, 1]
    lines = [json.loads(x) for x in (tmp_path / COLLECTED / "counters.jsonl").read_text().splitlines()]
    assert lines[0]["counters"] == {"sent": 7} and lines[1]["error"] == "agent stopped answering"
    j.close()


def test_the_results_directory_replaces_the_journal_when_the_run_ends(tmp_path):
    j = Journal(tmp_path / COLLECTED, {})
    j.begin("run1", AGENTS[:1], 0.0)
    j.close()
    assert [p.name for p in result_entries(tmp_path)] == [COLLECTED]
    stage = tmp_path / ".tailwise-stage"
    stage.mkdir()
    (stage / "summary.json").write_text("{}")
    install(stage, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_journal_left_by_a_dead_coordinator_is_replaced_by_the_next_run(tmp_path):
    (tmp_path / COLLECTED).mkdir()
    (tmp_path / COLLECTED / "samples-old.bin").write_bytes(b"x")
    j = Journal(tmp_path / COLLECTED, {})
    j.begin("run2", AGENTS[:1], 0.0)
    j.close()
    assert not (tmp_path / COLLECTED / "samples-old.bin").exists()


def test_a_disk_that_refuses_a_write_gives_the_journal_up_not_the_run(tmp_path):
    j = Journal(tmp_path / COLLECTED, {})
    j.begin("run3", AGENTS, 0.0)
    j.samples(0, _rows(4, 0))
    # /dev/full refuses every write with ENOSPC, as a full disk does.
    j._samples[1] = open("/dev/full", "wb")
    j.samples(1, _rows(2, 0))  # no exception: the run goes on
    assert j.error is not None and "no space left on device" in j.error and str(tmp_path / COLLECTED) in j.error
    assert not (tmp_path / COLLECTED).exists(), "its files are removed, to leave the space to the results"
    # What comes later is not written, and nothing raises.
    j.samples(0, _rows(1, 9))
    j.intervals(0, {0: _hist(10_000)})
    j.counters(AGENTS[0][0], {"sent": 1})
    j.close()
    assert not (tmp_path / COLLECTED).exists()
