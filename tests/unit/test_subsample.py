"""stats/subsample.py and results/samples.py: the bounded subsample keeps the intervals' coverage,
and the samples file written from disk in bounded memory is the file written from memory."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tailwise.agent.local import SAMPLE_DTYPE
from tailwise.results import samples as files
from tailwise.results.summary import sample_columns
from tailwise.stats.quantiles import percentile_ci
from tailwise.stats.subsample import Subsample, kept, keys


def _rows(intended: np.ndarray, latency: np.ndarray) -> np.ndarray:
    rows = np.zeros(len(intended), dtype=SAMPLE_DTYPE)
    rows["intended_ns"] = intended
    rows["sent_ns"] = intended + 1_000
    rows["rx_user_ns"] = intended + latency
    rows["latency_ns"] = latency
    return rows


def test_keys_are_uniform_and_levels_nest():
    t = np.cumsum(np.random.default_rng(1).exponential(20_000, 200_000)).astype(np.int64)
    k = keys(t)
    # The top bit, and the top 3 bits all zero, at their probabilities (±5 s.d.).
    assert abs((k >> np.uint64(63)).mean() - 0.5) < 5 * (0.25 / len(t)) ** 0.5
    assert abs(kept(t, 3).mean() - 1 / 8) < 5 * (1 / 8 * 7 / 8 / len(t)) ** 0.5
    # A row kept at level d + 1 is kept at level d: raising the level only filters.
    assert not (kept(t, 4) & ~kept(t, 3)).any()
    assert kept(t, 0).all()


def test_subsample_stays_bounded_and_is_the_hash_rule():
    rng = np.random.default_rng(2)
    s = Subsample(SAMPLE_DTYPE, limit=5_000)
    t0 = 0
    seen = []
    for _ in range(40):  # 40 batches of 2,500: 100k rows
        t = t0 + np.cumsum(rng.exponential(10_000, 2_500)).astype(np.int64)
        t0 = int(t[-1])
        batch = _rows(t, rng.exponential(50_000, len(t)).astype(np.int64) + 1)
        rng.shuffle(batch)  # rows arrive in the order requests finished
        seen.append(batch)
        s.add(batch)
        assert len(s.rows()) <= 5_000
    every = np.concatenate(seen)
    assert 2_500 <= len(s.rows()) <= 5_000 and s.one_in == 1 << s.level and s.level >= 4
    assert s.seen == len(every)
    expected = np.sort(every[kept(every["intended_ns"], s.level)], order="intended_ns")
    assert np.array_equal(s.rows(), expected)
    assert np.all(np.diff(s.rows()["intended_ns"]) >= 0)
    assert s.report() == {"one_in": s.one_in, "limit": 5_000, "collected": len(every), "kept": len(expected)}


def test_intervals_keep_their_coverage_under_the_subsample():
    """500 runs of 60k requests from a known distribution (log-normal latencies), subsampled to at
    most 2,000 rows (1 in 32 or 64): the 95 % intervals of p50 and p99 cover the true quantiles in
    95 % ± 3 % of the runs (exact order-statistic intervals are slightly conservative)."""
    rng = np.random.default_rng(23)
    sigma, mu = 0.8, 11.0
    truth = {50.0: np.exp(mu), 99.0: np.exp(mu + sigma * 2.3263478740408408)}
    covered = {p: 0 for p in truth}
    reps, levels = 500, set()
    for _ in range(reps):
        t = np.cumsum(rng.exponential(20_000, 60_000)).astype(np.int64)
        lat = np.exp(rng.normal(mu, sigma, len(t))).astype(np.int64)
        s = Subsample(SAMPLE_DTYPE, limit=2_000)
        for part in np.array_split(_rows(t, lat), 6):
            s.add(part)
        levels.add(s.level)
        x = np.sort(s.rows()["latency_ns"].astype(np.int64))
        for p, q in truth.items():
            ci = percentile_ci(x, p, 0.95)
            covered[p] += ci.low is not None and ci.high is not None and ci.low <= q <= ci.high
    assert levels <= {5, 6} and levels
    for p, c in covered.items():
        assert 0.92 <= c / reps <= 0.99, (p, c / reps)


def _spool(tmp_path, n: int, seed: int = 3):
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.exponential(10_000, n)).astype(np.int64)
    rows = _rows(t, rng.exponential(80_000, n).astype(np.int64) + 1)
    rows["flags"] = rng.integers(0, 4096, n)
    # Finish order: intended + latency, as a run appends them.
    order = np.argsort(rows["intended_ns"] + rows["latency_ns"], kind="stable")
    path = tmp_path / "samples-local.bin"
    path.write_bytes(rows[order].tobytes())
    return path, np.sort(rows, order="intended_ns", kind="stable")


def test_sorted_rows_merges_runs_in_bounded_pieces(tmp_path):
    path, expected = _spool(tmp_path, 20_000)
    pieces = list(files.sorted_rows(path, SAMPLE_DTYPE, run_rows=1_500))  # 14 runs merged
    assert max(len(p) for p in pieces) <= 2 * 1_500
    got = np.concatenate(pieces)
    assert np.array_equal(got["intended_ns"], expected["intended_ns"])
    assert np.array_equal(np.sort(got, order=["intended_ns", "latency_ns"]),
                          np.sort(expected, order=["intended_ns", "latency_ns"]))
    assert not list(tmp_path.glob("*.runs"))  # the scratch file is gone
    one = list(files.sorted_rows(path, SAMPLE_DTYPE, run_rows=50_000))
    assert len(one) == 1 and np.array_equal(one[0]["intended_ns"], expected["intended_ns"])


def test_sorted_rows_of_several_agents_files_are_one_sorted_stream(tmp_path):
    # A run on agents: one file per agent, their rows interleaved in time.
    path, expected = _spool(tmp_path, 20_000)
    rows = np.frombuffer(path.read_bytes(), dtype=SAMPLE_DTYPE)
    agents = [tmp_path / "samples-a.bin", tmp_path / "samples-b.bin"]
    agents[0].write_bytes(rows[0::2].tobytes())
    agents[1].write_bytes(rows[1::2].tobytes())
    for run_rows in (1_500, 50_000):  # an external merge, and one sorted run
        got = np.concatenate(list(files.sorted_rows(agents, SAMPLE_DTYPE, run_rows=run_rows)))
        assert np.array_equal(got["intended_ns"], expected["intended_ns"])
        assert np.array_equal(np.sort(got, order=["intended_ns", "latency_ns"]),
                              np.sort(expected, order=["intended_ns", "latency_ns"]))
    assert not list(tmp_path.glob("*.runs"))


def test_regrouped_keeps_every_row_in_order_in_pieces_of_the_size_asked():
    rows = _rows(np.arange(10_000, dtype=np.uint64), np.arange(10_000, dtype=np.uint64))
    cuts = [0, 1, 1, 700, 4_100, 4_101, 9_999, 10_000]  # an empty piece, tiny ones, one larger than a group
    groups = list(files.regrouped((rows[a:b] for a, b in zip(cuts, cuts[1:])), 1_024))
    assert [len(g) for g in groups] == [1_024] * 9 + [10_000 - 9 * 1_024]
    assert np.array_equal(np.concatenate(groups), rows)


def test_streamed_file_is_the_file_written_from_memory(tmp_path):
    path, rows = _spool(tmp_path, 9_000)
    start, end, one_in = int(rows["intended_ns"][900]), int(rows["intended_ns"][-1]) + 1, 4
    used_of = files.used_rule(start, end, one_in)
    used = (rows["intended_ns"] >= start) & kept(rows["intended_ns"], 2)
    assert np.array_equal(used_of(rows), used)
    table = pa.table(sample_columns(rows) | {"used": used.astype(np.uint8)})
    pacsv.write_csv(table, tmp_path / "memory.csv")
    pq.write_table(table, tmp_path / "memory.parquet")
    for fmt in ("csv", "parquet"):
        n = files.write_samples(tmp_path / f"stream.{fmt}", fmt, files.sorted_rows(path, SAMPLE_DTYPE, run_rows=1_000),
                                sample_columns, used_of, SAMPLE_DTYPE)
        assert n == len(rows)
    assert (tmp_path / "stream.csv").read_bytes() == (tmp_path / "memory.csv").read_bytes()
    streamed = pq.read_table(tmp_path / "stream.parquet")
    assert streamed.schema == table.schema
    # Sorted by intended time; rows that share one are in either order.
    key = ["intended_ns", "latency_ns"]
    assert streamed.sort_by([(k, "ascending") for k in key]).equals(table.sort_by([(k, "ascending") for k in key]))


def test_rows_held_in_memory_keep_their_used_mask_across_row_groups(tmp_path):
    # A run on agents writes its pooled rows from memory: more than one row group's worth, each
    # group with its own slice of the mask (it once got the whole mask, and pyarrow refused).
    n = 2 * files.GROUP_ROWS + 5
    rows = _rows(np.arange(n, dtype=np.uint64), np.arange(n, dtype=np.uint64))
    used = (np.arange(n) % 3 == 0).astype(np.uint8)
    for fmt in ("csv", "parquet"):
        path = tmp_path / f"s.{fmt}"
        assert files.write_samples(path, fmt, iter([rows]), sample_columns, files.used_in_order(used),
                                   SAMPLE_DTYPE) == n
        table = pacsv.read_csv(path) if fmt == "csv" else pq.read_table(path)
        assert np.array_equal(table.column("used").to_numpy(), used)
        assert np.array_equal(table.column("intended_ns").to_numpy(), rows["intended_ns"].astype(np.int64))


def test_an_empty_spool_still_writes_the_columns(tmp_path):
    path = tmp_path / "samples-local.bin"
    path.write_bytes(b"")
    files.write_samples(tmp_path / "s.csv", "csv", files.sorted_rows(path, SAMPLE_DTYPE), sample_columns,
                        files.used_rule(0, 1, 1), SAMPLE_DTYPE)
    assert (tmp_path / "s.csv").read_text().startswith('"intended_ns","sent_ns"')


def test_equal_intended_times_of_two_threads_or_agents_are_chosen_independently():
    """Two threads (or agents, numbered apart by the coordinator) on the same schedule have equal
    intended times: keyed by the time alone they were kept or dropped together (issue 32). Keyed by
    time and thread, each is a Bernoulli(2^−level) draw of its own."""
    from tailwise.stats.subsample import AGENT_THREADS, Subsample, kept, source_of

    dtype = np.dtype([("intended_ns", "<u8"), ("thread", "<u4")])
    t = np.sort(np.random.default_rng(4).integers(0, 10**12, 100_000)).astype(np.uint64)
    a, b = np.zeros(len(t), dtype), np.zeros(len(t), dtype)
    a["intended_ns"] = b["intended_ns"] = t
    b["thread"] = AGENT_THREADS + 0  # agent 1's thread 0
    level = 3
    ka, kb = kept(t, level, source_of(a)), kept(t, level, source_of(b))
    both = int((ka & kb).sum())
    # Independent draws: both kept ~ n/64 (1,563 ± 39); the same draw would keep n/8 together.
    assert abs(ka.mean() - 1 / 8) < 0.005 and abs(kb.mean() - 1 / 8) < 0.005
    assert abs(both - len(t) / 64) < 5 * np.sqrt(len(t) / 64), both
    # The subsample keys by the same source as the samples file's `used` does.
    pool = Subsample(dtype, limit=30_000)
    pool.add(np.concatenate([a, b]))
    kept_rows = pool.rows()
    assert len(kept_rows) == int(kept(t, pool.level, source_of(a)).sum() + kept(t, pool.level, source_of(b)).sum())
