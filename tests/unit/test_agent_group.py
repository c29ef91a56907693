"""The coordinator's arithmetic over several agents (agents/group.py, agents/merge.py): shares of
the load, the probe agent's shape, histograms merged bucket by bucket, counters added (issue 21)."""

from __future__ import annotations

import numpy as np
import pytest

from tailwise import _core
from tailwise.agents.group import probe_spec, shares
from tailwise.agents.merge import MergedIntervals, _add, _counters, _packet_hist, _packet_intervals
from tailwise.spec.load import LoadSpec, Probe


def test_the_rate_and_connections_split_in_proportion_to_threads():
    spec = LoadSpec(targets=["127.0.0.1:9"], rate_rps=90_000.0, duration_ns=1, conns=12, seed=7,
                    probe=Probe(4, 3_000.0))
    parts = shares(spec, [1, 2])
    assert sum(p.rate_rps for p in parts) == pytest.approx(90_000.0)
    assert [p.rate_rps for p in parts] == pytest.approx([30_000.0, 60_000.0])
    assert [p.threads for p in parts] == [1, 2] and [p.conns for p in parts] == [4, 8]
    assert len({p.seed for p in parts}) == 2
    assert sum(p.probe.rate_rps for p in parts) == pytest.approx(3_000.0) and all(p.probe.conns >= 1 for p in parts)
    # Never fewer connections than threads.
    assert [p.conns for p in shares(spec.__class__(targets=[], rate_rps=1.0, duration_ns=1, conns=1), [2, 2])] == [2, 2]


def test_a_probe_agent_sends_what_the_local_probe_sends():
    spec = LoadSpec(targets=["127.0.0.1:9"], rate_rps=50_000.0, duration_ns=1, threads=2, conns=8, outstanding=4,
                    arrival="fixed", sample_every=10, busy_poll=False, probe=Probe(4, 2_000.0))
    p = probe_spec(spec)
    assert (p.rate_rps, p.threads, p.conns, p.outstanding, p.arrival, p.sample_every, p.busy_poll, p.probe) == \
        (2_000.0, 1, 4, 1, "exp", 1, True, None)
    # The methodology sees the same offered load and timed process as with a local probe.
    assert spec.offered_rps == 52_000.0 and spec.timed_arrival == "exp" and spec.timed_sample_every == 1


def _hist(values) -> _core.Histogram:
    h = _core.Histogram(_core.HIST_LOWEST_NS, _core.HIST_MAX_NS, _core.INTERVAL_SIGFIG)
    h.record_values(list(values))
    return h


def test_interval_histograms_merge_bucket_by_bucket():
    rng = np.random.default_rng(3)
    a = {i: rng.integers(1_000, 10**6, 500) for i in range(3)}
    b = {i: rng.integers(1_000, 10**7, 300) for i in range(1, 4)}
    m = MergedIntervals()
    m.update(0, {"done": list(a), "pending": [3]}, {**{f"done:{i}": _hist(v).encode() for i, v in a.items()},
                                                    "pending:3": _hist([5_000_000]).encode()})
    m.update(1, {"done": list(b), "pending": []}, {f"done:{i}": _hist(v).encode() for i, v in b.items()})
    every = np.concatenate([*a.values(), *b.values()])
    merged = _core.Histogram.decode(m.window(0, 10, with_pending=False))
    assert merged.total == len(every)
    assert merged.value_at_percentile(99.0) == _hist(every).value_at_percentile(99.0)
    assert _core.Histogram.decode(m.window(0, 10, with_pending=True)).total == len(every) + 1
    assert [i for i, _ in m.log()] == [0, 1, 2, 3]
    # A window inside the run is added from its intervals alone.
    assert _core.Histogram.decode(m.window(1, 3, with_pending=False)).total == 500 * 2 + 300 * 2
    # A later snapshot replaces an interval's histogram and the agent's pending ones.
    m.update(0, {"done": [0], "pending": []}, {"done:0": _hist(a[0][:10]).encode()})
    assert _core.Histogram.decode(m.window(0, 1, with_pending=True)).total == 10
    assert _core.Histogram.decode(m.window(0, 10, with_pending=True)).total == len(every) - 490
    # Kept as they came (V2 bytes), not decoded: ~200 B an interval instead of ~36 KB.
    assert all(isinstance(raw, bytes) for raw in m.done.values())


def test_the_interval_logs_of_several_agents_add_up_interval_by_interval(tmp_path):
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    from tailwise.results.export.intervals import write_interval_logs

    rng = np.random.default_rng(5)
    a = {i: rng.integers(1_000, 10**6, 50 + i) for i in (0, 1, 3)}
    b = {i: rng.integers(1_000, 10**6, 80 + i) for i in (1, 2, 3)}
    m = MergedIntervals()
    for member, got in enumerate((a, b)):
        new = m.update(member, {"done": list(got)}, {f"done:{i}": _hist(v).encode() for i, v in got.items()})
        assert sorted(new) == sorted(got) and all(h.total == len(got[i]) for i, h in new.items())
    assert m.update(0, {"done": [0]}, {"done:0": _hist(a[0]).encode()}) == {}, "an interval again, unchanged"
    paths = write_interval_logs(tmp_path, {"a": m.member(0), "b": m.member(1)}, 1_700_000_000.0)
    assert [p.name for p in paths] == ["latency.hlog", "latency-a.hlog", "latency-b.hlog"]

    def totals(path):
        reader = HistogramLogReader(str(path), HdrHistogram(1, 3_600_000_000_000, 2))
        out = []
        while (h := reader.get_next_interval_histogram()) is not None:
            out.append(h.get_total_count())
        return out

    assert totals(paths[0]) == [50, 51 + 81, 82, 53 + 83]
    assert totals(paths[1]) == [50, 51, 53] and totals(paths[2]) == [81, 82, 83]
    assert all(line.startswith(("#", "\"", "Tag=a,")) for line in paths[1].read_text().splitlines())
    assert [i for i, _ in m.log()] == [0, 1, 2, 3]


def test_the_pooled_rows_are_a_bounded_subsample_and_each_keeps_its_agent():
    from tailwise.agents.merge import OWNED_DTYPE, _owned, _unowned
    from tailwise.results.rows import SAMPLE_DTYPE
    from tailwise.stats.subsample import Subsample, kept, source_of

    rng = np.random.default_rng(9)
    pool = Subsample(OWNED_DTYPE, limit=4_000)
    rows = {}
    for member in (0, 1, 2):
        r = np.zeros(5_000, dtype=SAMPLE_DTYPE)
        r["intended_ns"] = np.sort(rng.integers(0, 10**10, 5_000))
        r["latency_ns"] = member * 1_000_000 + rng.integers(1, 1_000, 5_000)  # which agent, in the value
        rows[member] = r
        pool.add(_owned(r, member))
    got, owner = _unowned(pool.rows())
    assert got.dtype == SAMPLE_DTYPE and len(got) <= 4_000 and pool.seen == 15_000
    assert np.all(np.diff(got["intended_ns"].astype(np.int64)) >= 0)
    assert np.array_equal(owner, got["latency_ns"] // 1_000_000), "each row keeps its own agent"
    # The same rows a subsample of one agent's would keep: a function of the row alone.
    every = np.concatenate(list(rows.values()))
    assert len(got) == int(kept(every["intended_ns"], pool.level, source_of(every)).sum())


def test_counters_add_and_times_take_the_latest():
    got = _add([{"sent": 3, "elapsed_ns": 10, "x": True}, {"sent": 4, "elapsed_ns": 12}, {}])
    assert got == {"sent": 7, "elapsed_ns": 12}


def test_packet_counts_add_and_the_largest_displacement_is_kept():
    got = _counters([{"sent": 10, "lost": 2, "duplicates": 1, "reordered": 3, "reorder_max": 2},
                     {"sent": 5, "lost": 1, "reordered": 1, "reorder_max": 4}])
    assert (got["sent"], got["lost"], got["duplicates"], got["reordered"], got["reorder_max"]) == (15, 3, 1, 4, 4)
    # Interval by interval, whichever agent saw an interval.
    rows = _packet_intervals([[[0, 10, 9, 1, 0, 0], [1, 10, 10, 0, 1, 2]], [[1, 5, 4, 1, 0, 0], [2, 5, 5, 0, 0, 0]]])
    assert rows == [(0, 10, 9, 1, 0, 0), (1, 15, 14, 1, 1, 2), (2, 5, 5, 0, 0, 0)]


def test_packet_histograms_come_as_a_shape_and_bins_and_merge():
    shape = {"bin_ns": 100, "range_ns": 10_000_000, "above": 1}
    a, b = np.array([0, 2, 1], dtype="<u8"), np.array([1], dtype="<u8")
    got = _packet_hist([(shape, a.tobytes()), (shape | {"above": 0}, b.tobytes()), (None, None)])
    assert np.frombuffer(got["counts"], dtype="<u8").tolist() == [1, 2, 1] and got["above"] == 1
    assert _packet_hist([(None, None)]) is None
    # Agents that bin differently (other versions): no merged bins, and no exception after the run.
    assert _packet_hist([(shape, a.tobytes()), (shape | {"bin_ns": 1_000}, b.tobytes())]) is None
