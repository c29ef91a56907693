"""stats/subsample.py and results/samples.py: the bounded subsample keeps the intervals' coverage,
and the samples file written from disk in bounded memory is the file written from memory."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from tailwise.results.rows import SAMPLE_DTYPE
from tailwise.results import samples as files
from tailwise.results.export.samples import sample_columns
from tailwise.stats.quantiles import percentile_ci
from tailwise.stats.subsample import AGENT_THREADS, Subsample, kept, keys


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


# --------------------------------------------------------------------------- agents that thin (issue 33)

class _ThinningAgent:
    """What a coordinator (agents/group.py's ``GroupSession``) sees of an agent that holds its rows
    as agents/held.py does (``Held``: keyed as the coordinator keys them, thinned past
    ``max_rows``), fed by the test instead of an engine: ``finish_tick`` is a batch of rows the
    engine finished, ``keep`` the agent's keeper taking it while the coordinator is silent."""

    def __init__(self, address: str, index: int, max_rows: int):
        from tailwise.agents.held import Held

        self.address, self.index = address, index
        self.held = Held(index, max_rows, rows_per_s=0.0)
        self._engine: list[np.ndarray] = []
        self._pending = np.zeros(0, dtype=SAMPLE_DTYPE)

    def finish_tick(self, rows: np.ndarray, pending: np.ndarray) -> None:
        self._engine.append(rows)
        self._pending = pending

    def _take(self) -> np.ndarray:
        rows, self._engine = self._engine, []
        return np.concatenate(rows) if rows else np.zeros(0, dtype=SAMPLE_DTYPE)

    def keep(self) -> None:
        self.held.add(self._take())

    # The RemoteAgent calls GroupSession makes.
    def health(self):
        from types import SimpleNamespace

        return SimpleNamespace(cpus=[0, 1])

    def clock_offset(self):
        from tailwise.agents.client import ClockOffset

        return ClockOffset(0, 1_000)

    def configure(self, run_id, role, config, agent_index):
        assert agent_index == self.index, "the coordinator tells each agent the index its rows are numbered with"
        return config

    def start(self, run_id, at):
        return at

    def progress(self, run_id, verb="Progress"):
        return {"counters": {}, "finished": False, "in_flight": 0, "elapsed_ns": 0}

    def snapshot(self, run_id):
        rows, pending, level = self.held.hand_over(self._take(), self._pending)
        meta = {"snap_ns": 1, "complete": True, "counters": {}, "engine_stalls": [], "done": [], "pending": [],
                "thinned_level": level}
        return meta, {"samples": rows.tobytes(), "pending": pending.tobytes()}

    def finish(self, run_id, wait_s):
        rows, _, level = self.held.hand_over(self._take(), self._pending[:0])
        meta = {"counters": {}, "elapsed_ns": 1, "received_in_window": 0, "stalls": 0, "stalled_ns": 0,
                "error_reasons": [], "pinned_cpus": [], "cpu_ns": 0, "preemptions": 0, "error": None,
                "interrupted": False, "engine_stalls_ns": [], "done": [], "thinned_level": level}
        return meta, {"samples": rows.tobytes()}


def _by_row(rows: np.ndarray) -> np.ndarray:
    return np.sort(rows[["intended_ns", "thread"]], order=["intended_ns", "thread"])


def test_agents_that_thin_apart_pool_into_exactly_one_levels_rows():
    """Issue 33: three agents on one schedule (equal intended times, two threads each); while the
    coordinator does not collect, each agent's keeper holds its rows and two of them pass their
    ceilings, thinning to levels of their own. Through the coordinator's own ``GroupSession``
    (snapshots, then the end): at every snapshot the pooled rows — and the outstanding ones — are
    exactly every agent's rows so far whose key (time and thread + index × AGENT_THREADS) has the
    pool's level of leading zero bits, the level at least each agent's; and the result names the
    agents that thinned, each with its 1 in 2^d."""
    from tailwise.agents.group import GroupSession, Member
    from tailwise.agents.merge import _numbered
    from tailwise.results.rows import Flag
    from tailwise.spec.load import LoadSpec
    from tailwise.stats.subsample import source_of

    rng = np.random.default_rng(33)
    ticks, per_tick = 20, 2_000
    t = np.cumsum(rng.exponential(10_000, ticks * per_tick)).astype(np.int64)
    agents = [_ThinningAgent(f"10.0.0.{i + 2}:7100", i, max_rows) for i, max_rows in enumerate((100_000, 5_000, 1_500))]
    spec = LoadSpec(targets=["127.0.0.1:9"], rate_rps=1e5, duration_ns=10**9, threads=2, conns=2)
    session = GroupSession([Member(a, "symmetric") for a in agents], spec)
    session._kept.limit = 20_000  # the coordinator thins too, later
    collected = []  # every agent's finished rows so far, numbered as the coordinator numbers them
    try:
        for tick in range(ticks):
            span = slice(tick * per_tick, (tick + 1) * per_tick)
            following = slice((tick + 1) * per_tick, (tick + 1) * per_tick + 200)
            for a in agents:
                rows = _rows(t[span], rng.exponential(50_000, per_tick).astype(np.int64) + 1)
                rows["thread"] = np.arange(per_tick) % 2
                rng.shuffle(rows)  # in the order they finished
                pending = _rows(t[following], np.full(len(t[following]), 1_000))
                pending["thread"] = np.arange(len(pending)) % 2
                pending["flags"] = int(Flag.PENDING)
                a.finish_tick(rows, pending)
                collected.append(_numbered(rows, a.index))
            if tick in (3, 4, 12):
                taken = session.take()
                every = np.concatenate(collected)
                level = session._kept.level
                assert taken.one_in == 1 << level
                assert np.array_equal(_by_row(taken.finished), _by_row(every[kept(every["intended_ns"], level, source_of(every))]))
                outstanding = np.concatenate([_numbered(a._pending, a.index) for a in agents])
                assert np.array_equal(_by_row(taken.pending),
                                      _by_row(outstanding[kept(outstanding["intended_ns"], level, source_of(outstanding))]))
                assert np.array_equal(taken.finished_owner, taken.finished["thread"] // AGENT_THREADS)
                assert all(a.held.level == 0 for a in agents), "handed over: empty again, at level 0"
            else:
                for a in agents:
                    a.keep()  # the coordinator is silent: each agent's keeper takes the rows
        assert agents[2].held.level > 0, "the end hands over rows thinned since the last snapshot"
        result = session.finish()
    finally:
        session._pool.shutdown(wait=False)
    every = np.concatenate(collected)
    level = session._kept.level
    assert set(session.thinned) == {1, 2} and level >= max(session.thinned.values()) >= 2
    assert session.thinned[2] > session.thinned[1], "the smaller ceiling thinned further"
    assert np.array_equal(_by_row(result.samples), _by_row(every[kept(every["intended_ns"], level, source_of(every))]))
    assert np.array_equal(result.owner, result.samples["thread"] // AGENT_THREADS)
    assert result.subsample["agents_thinned"] == [{"address": agents[i].address, "one_in": 1 << session.thinned[i]}
                                                  for i in (1, 2)]
    assert result.subsample["one_in"] == 1 << level


def test_intervals_keep_their_coverage_when_an_agent_thins():
    """Issue 33: the slowest requests finish last, in the stretch where an agent's coordinator is
    silent and the agent thins what it holds (a small ceiling: a level above the pool's own), while
    its other rows and the other agent's come unthinned; pooled as the coordinator pools them (its
    level raised to the agent's first), the 95 % intervals of p50 and p99 still cover the true quantiles in 95 % ± 3 % of 400
    runs: the thinning is a function of the key alone, never of the latency or of when a row came."""
    from tailwise.agents.merge import OWNED_DTYPE, _numbered, _owned
    from tailwise.agents.held import Held

    rng = np.random.default_rng(34)
    sigma, mu = 0.8, 11.0
    truth = {50.0: np.exp(mu), 99.0: np.exp(mu + sigma * 2.3263478740408408)}
    covered = {p: 0 for p in truth}
    reps, levels = 400, set()
    for _ in range(reps):
        pool = Subsample(OWNED_DTYPE, limit=10_000)
        for index in (0, 1):
            n = 30_000
            t = np.cumsum(rng.exponential(20_000, n)).astype(np.int64)
            rows = _rows(t, np.exp(rng.normal(mu, sigma, n)).astype(np.int64))
            # The slowest quarter finishes while the coordinator is silent: agent 1 holds those.
            slow = rows["latency_ns"] >= np.quantile(rows["latency_ns"], 0.75)
            batches = [(rows[~slow], 0), (rows[slow], 0)]
            if index == 1:
                held = Held(index, 500, rows_per_s=0.0)
                held.add(rows[slow])
                got, _, level = held.hand_over(rows[:0], rows[:0])
                batches[1] = (got, level)
                levels.add(level)
            for batch, level in batches:  # as GroupSession._collect adds them
                pool.raise_to(level)
                pool.add(_owned(_numbered(batch, index), index))
        x = np.sort(pool.rows()["latency_ns"].astype(np.int64))
        for p, q in truth.items():
            ci = percentile_ci(x, p, 0.95)
            covered[p] += ci.low is not None and ci.high is not None and ci.low <= q <= ci.high
    # 7,500 slow rows held under a ceiling of 500: above the pool's own level (3, for 60k rows in 10,000).
    assert levels <= {4, 5} and levels, levels
    for p, c in covered.items():
        assert 0.92 <= c / reps <= 0.99, (p, c / reps)
