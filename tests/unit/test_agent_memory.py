"""Issue 33, item 3: an agent's memory — its bound (--max-memory, or its cgroup's limit), the
ceiling of rows it derives from it, and how it says it thinned (agents/held.py, agents/limits.py,
host/facts.py). The rows' thinning itself, and the coordinator's pooling of it:
tests/unit/test_subsample.py."""

from __future__ import annotations

import numpy as np
import pytest

from tailwise import _core
from tailwise.agents.events import Thinned
from tailwise.host.facts import cgroup_memory_max
from tailwise.agents.held import (BASE_MEMORY, DEFAULT_MAX_ROWS, KEEP_S, MIN_KEEP_S, MIN_MEMORY, MIN_ROWS, PILE_SHARE,
                                 RINGS_MEMORY, ROW_COST, Held, rows_per_s)
from tailwise.agents.limits import Limits
from tailwise.errors import InputError
from tailwise.render.agent import event_line, limits_text
from tailwise.render.output import agent_lines
from tailwise.results.documents.methodology import Methodology
from tailwise.results.documents.methodology import Subsample as SubsampleDoc
from tailwise.results.documents.run import AgentReport, Summary
from tailwise.spec.units import fmt_bytes, parse_size

MiB = 1 << 20


@pytest.mark.parametrize("text,size", [("512Mi", 512 * MiB), ("2Gi", 2 << 30), ("2GiB", 2 << 30), ("2G", 2 * 10**9),
                                       ("1.5Gi", 3 << 29), ("300000000", 300_000_000), ("64k", 64_000)])
def test_sizes_are_written_as_kubernetes_writes_them(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["lots", "0", "-1Mi", "2Xi", "Mi", "5iB"])
def test_a_size_that_is_none_is_refused_in_one_line(text):
    with pytest.raises(InputError, match="--max-memory"):
        parse_size(text)


def test_the_cgroup_limit_is_the_least_of_the_cgroup_and_those_above_it(tmp_path):
    root = tmp_path / "cgroup"
    proc = tmp_path / "proc-self-cgroup"
    # cgroup v2, a systemd unit under a slice: the slice's limit is the lower one.
    unit = root / "system.slice" / "tailwise-agent@7100.service"
    unit.mkdir(parents=True)
    (unit / "memory.max").write_text("2147483648\n")
    (root / "system.slice" / "memory.max").write_text("1073741824\n")
    proc.write_text("0::/system.slice/tailwise-agent@7100.service\n")
    assert cgroup_memory_max(str(root), str(proc)) == 1 << 30
    (root / "system.slice" / "memory.max").write_text("max\n")
    assert cgroup_memory_max(str(root), str(proc)) == 2 << 30
    # A container with its own cgroup namespace: its limit is the root's file.
    proc.write_text("0::/\n")
    (root / "memory.max").write_text("536870912\n")
    assert cgroup_memory_max(str(root), str(proc)) == 512 * MiB
    (root / "memory.max").write_text("max\n")
    assert cgroup_memory_max(str(root), str(proc)) is None
    # The memory controller on cgroup v1 (a hybrid host): "no limit" is a huge figure.
    v1 = root / "memory" / "pod"
    v1.mkdir(parents=True)
    (v1 / "memory.limit_in_bytes").write_text("805306368\n")
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    proc.write_text("4:memory:/pod\n0::/\n")
    assert cgroup_memory_max(str(root), str(proc)) == 768 * MiB
    proc.write_text("")
    assert cgroup_memory_max(str(root), str(proc)) is None


def test_the_ceiling_of_rows_is_what_the_bound_leaves_at_row_cost():
    assert ROW_COST == 4 * _core.SAMPLE_BYTES and MIN_MEMORY == BASE_MEMORY + MIN_ROWS * ROW_COST
    tcp = {"protocol": {"scheme": "memcached"}}
    flows = {"protocol": {"scheme": "udp+flow", "size": 64, "flows": 8}}
    assert Limits().max_rows(tcp) == DEFAULT_MAX_ROWS, "no bound: the fixed ceiling"
    at_128 = Limits(max_memory=128 * MiB)
    assert at_128.max_rows(tcp) == (128 - 96) * MiB // 256 == 131_072
    assert at_128.max_rows(flows) == 0, "the rings' budget leaves nothing: Configure refuses it"
    two_gib = Limits(max_memory=2 << 30)
    assert two_gib.max_rows() == ((2 << 30) - BASE_MEMORY) // ROW_COST == 7_995_392
    assert two_gib.max_rows(flows) == ((2 << 30) - BASE_MEMORY - RINGS_MEMORY) // ROW_COST
    assert Limits(max_memory=64 << 30).max_rows() == DEFAULT_MAX_ROWS, "never above the fixed ceiling"


def test_rows_a_second_are_the_timed_ones():
    base = {"rate_rps": 100_000.0, "sample_every": 10, "timed": True, "probe": None}
    assert rows_per_s(base) == 10_000.0
    assert rows_per_s(base | {"timed": False}) == 0.0, "a load agent keeps no rows"
    assert rows_per_s(base | {"probe": {"conns": 4, "rate_rps": 2_000.0}}) == 2_000.0, "the probe's, every one"


def test_the_keeper_takes_sooner_when_rows_come_fast_for_the_room():
    assert Held(0, 131_072, rows_per_s=1_000.0).every_s == KEEP_S
    # What the engine gathers meanwhile within an eighth of the ceiling.
    assert Held(0, 1 << 20, rows_per_s=400_000.0).every_s * 400_000 == pytest.approx((1 << 20) / PILE_SHARE)
    assert Held(0, 131_072, rows_per_s=200_000.0).every_s == MIN_KEEP_S, "as often as the watchdog looks, no more"


def test_held_rows_come_back_whole_until_the_ceiling_then_at_a_level():
    from tailwise.results.rows import SAMPLE_DTYPE
    from tailwise.stats.subsample import AGENT_THREADS, kept

    rows = np.zeros(10_000, dtype=SAMPLE_DTYPE)
    rows["intended_ns"] = np.arange(10_000) * 1_000
    held = Held(3, 4_000, rows_per_s=0.0)
    same, pending, level = held.hand_over(rows, rows[:5])
    assert same is rows and pending.shape == (5,) and level == 0, "nothing held: the batch as it came"
    held.add(rows[:3_000])
    got, pending, level = held.hand_over(rows[3_000:], rows[:100])
    assert level == 2 and len(got) <= 4_000
    source = np.full(10_000, 3 * AGENT_THREADS, np.uint64)
    assert np.array_equal(np.sort(got["intended_ns"]), rows["intended_ns"][kept(rows["intended_ns"], 2, source)])
    assert np.array_equal(pending["intended_ns"], rows["intended_ns"][:100][kept(rows["intended_ns"][:100], 2, source[:100])])
    assert held.level == 0 and held.hand_over(rows[:0], rows[:0])[2] == 0, "empty again, at level 0"


def test_rows_the_engine_thinned_are_held_and_handed_over_at_its_level():
    """Past ``Held.engine_rows`` between two takes an engine thread thins its rows itself
    (``Engine.thin_rows``) and the take says the level: the keeper raises what it holds to it, a
    Snapshot hands the rows (and the outstanding) over at it even with nothing held."""
    from tailwise.results.rows import SAMPLE_DTYPE
    from tailwise.agents.held import ENGINE_SHARE
    from tailwise.stats.subsample import AGENT_THREADS, kept

    rows = np.zeros(10_000, dtype=SAMPLE_DTYPE)
    rows["intended_ns"] = np.arange(10_000) * 1_000
    source = np.full(10_000, 3 * AGENT_THREADS, np.uint64)
    at = {d: rows[kept(rows["intended_ns"], d, source)] for d in (1, 2, 3)}
    held = Held(3, 8_000, rows_per_s=0.0)
    assert held.engine_rows == 8_000 // ENGINE_SHARE == 2 * 8_000 // PILE_SHARE, "a take's share, and a late one's"
    got, pending, level = held.hand_over(at[2], rows[:100], 2)
    assert level == 2 and np.array_equal(got, at[2]), "nothing held: the batch, at the engine's level"
    assert np.array_equal(pending, rows[:100][kept(rows["intended_ns"][:100], 2, source[:100])])
    assert held.level == 0
    held.add(rows[:5_000])
    held.add(at[3][at[3]["intended_ns"] >= 5_000_000], 3)
    assert held.level == 3, "raised to the engine's level"
    got, _, level = held.hand_over(rows[:0], rows[:0], 1)
    assert level == 3 and np.array_equal(np.sort(got["intended_ns"]), at[3]["intended_ns"]), "one level's rows, whole"


def test_the_engine_thins_by_the_subsamples_keys():
    """The keys crates/tailwise-core/src/record/thin.rs computes (its test holds these figures)."""
    from tailwise.stats.subsample import keys

    times = np.array([0, 1, 123_456_789, 10**12, 2**63 + 5], dtype=np.uint64)
    for source, want in ((0, [0xe220a8397b1dcdaf, 0x910a2dec89025cc1, 0x223c74d93deb7679, 0xf321eacbea530978,
                               0x54a64d19d7534f30]),
                         (1, [0x08b4fda8c892b50e, 0xe9fd6049d65af21e, 0xde59600dbe390422, 0xeb178fc5c9b6300d,
                              0xba16740d528574fa]),
                         (65536 * 3 + 2, [0x5862499c9f38aa24, 0x3df40a6206a43336, 0xc76401911d89587a,
                                          0x6cb7eb79d97dde1a, 0x051c71c031c8a97f])):
        assert [int(k) for k in keys(times, np.full(5, source, np.uint64))] == want, source


def test_the_agent_says_its_bound_and_that_it_thinned():
    text = limits_text(["127.0.0.0/8"], 0.0, 0, 0, 5 * 10**9, [0, 1], 128 * MiB, "--max-memory", 131_072)
    assert "max memory 128 MiB (rows held between snapshots ≤ 131,072)" in text
    assert "max memory 2.00 GiB from the cgroup" in limits_text([], 0.0, 0, 0, 1, [0], 2 << 30, "cgroup", 7_995_392)
    assert "max memory no limit (rows held between snapshots ≤ 8,388,608)" in limits_text([], 0.0, 0, 0, 1, [0], 0, "",
                                                                                        DEFAULT_MAX_ROWS)
    line = event_line(Thinned("r1", 4, 131_072, 1_500_000_000, 128 * MiB, "--max-memory"))
    assert line == ("run r1: rows not collected for 1.50 s passed this agent's ceiling of 131,072 (128 MiB): it keeps "
                    "1 in 4 of them (more if they pile up), by the coordinator's own keys, and tells it; the samples "
                    "file will lack the rest")
    assert "(no --max-memory: the fixed ceiling)" in event_line(Thinned("r1", 2, DEFAULT_MAX_ROWS, 1, 0, ""))
    assert fmt_bytes(MIN_MEMORY) == "112 MiB"


def test_the_summary_names_the_agents_that_thinned():
    doc = {"one_in": 8, "limit": 1 << 20, "collected": 10, "kept": 5,
           "agents_thinned": [{"address": "10.0.0.2:7100", "one_in": 8}]}
    assert SubsampleDoc.model_validate(doc).to_json() == doc
    alone = {k: v for k, v in doc.items() if k != "agents_thinned"}
    assert SubsampleDoc.model_validate(alone).to_json() == alone, "absent when no agent thinned"
    agents = [AgentReport(address=address, role="symmetric", rate_rps=5e3, achieved_rps=5e3, threads=1, conns=8,
                          timed=True, clock_offset_ns=0, clock_rtt_ns=1_000, counters={}, error=None)
              for address in ("10.0.0.2:7100", "10.0.0.3:7100")]
    summary = Summary.model_construct(agents=agents, barrier=None,
                                      methodology=Methodology.model_construct(subsample=SubsampleDoc.model_validate(doc)))
    first, second = agent_lines(summary)
    assert "thinned to 1 in 8 there" in first and "thinned" not in second
