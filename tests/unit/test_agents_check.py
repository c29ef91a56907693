"""A run on several agents, judged agent by agent (issue 21): each agent's own send rate against
its share and its own arrivals, on synthetic snapshots (no sockets); the pooled rows keep their
agent; the results name each agent's interval log; the summary's lines show the agents."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tailwise.agents.merge import OWNED_DTYPE, OWNER_DTYPE, _owned, _unowned
from tailwise.stats.subsample import Subsample
from tailwise.driver.local import Taken
from tailwise.results.measured import AgentShare
from tailwise.results.rows import SAMPLE_DTYPE
from tailwise.methodology.analysis import analyse
from tailwise.methodology.plan import AnalysisInput, RunPlan
from tailwise.methodology.remedies import Advice, OverloadedAgents
from tailwise.methodology.words import remedy_words
from tailwise.render.output import agent_lines
from tailwise.results.documents.run import Summary
from tailwise.results.export.intervals import AGENT_TAG, agent_tag
from tailwise.spec.precision import Precision

SHARE_RPS = 5_000.0
SPAN_S = 4.0


def _summary_with(**fields) -> dict:
    """A real run's summary (tests/unit/screens/run-ok.json) with ``fields`` in place of its own."""
    return json.loads((Path(__file__).parent / "screens" / "run-ok.json").read_text()) | fields
A0, A1, A2 = "10.0.0.2:7100", "10.0.0.3:7100", "10.0.0.4:7100"


def _agent_rows(rng, rate_rps: float, lag_ns: int = 300) -> np.ndarray:
    """One agent's samples (every request kept): Poisson intended times over SPAN_S, each sent
    ``lag_ns`` after it was due and answered 20–40 µs later."""
    n = int(rate_rps * SPAN_S * 1.2)
    t = np.cumsum(rng.exponential(1e9 / rate_rps, n)).astype(np.int64)
    t = t[t < SPAN_S * 1e9]
    s = np.zeros(len(t), dtype=SAMPLE_DTYPE)
    s["intended_ns"] = t
    s["sent_ns"] = t + lag_ns
    s["latency_ns"] = (lag_ns + 20_000 + rng.exponential(10_000, len(t))).astype(np.int64)
    s["rx_user_ns"] = t + s["latency_ns"].astype(np.int64)
    return s


def _counters(sent: int, late: int = 0) -> dict:
    return {"intended": sent, "sent": sent, "received": sent, "late": late, "never_sent": 0, "errors": 0,
            "timeouts": 0, "unfinished": 0}


def _share(address: str, counters: dict, role: str = "symmetric", rate_rps: float = SHARE_RPS) -> AgentShare:
    return AgentShare(address=address, role=role, rate_rps=rate_rps, threads=1, conns=4, timed=role != "load",
                      arrival="exp", clock_offset_ns=1_000, clock_rtt_ns=80_000, counters=counters)


def _pooled(per_agent: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of several agents pooled as a run on agents pools them (agents/group.GroupSession)."""
    pool = Subsample(OWNED_DTYPE)
    for i, rows in enumerate(per_agent):
        pool.add(_owned(rows, i))
    return _unowned(pool.rows())


def _analyse(rng, per_agent: list[np.ndarray], shares: list[AgentShare]):
    rows, owner = _pooled(per_agent)
    counters: dict = {}
    for a in shares:
        for k, v in a.counters.items():
            counters[k] = counters.get(k, 0) + v
    plan = RunPlan(Precision(ci_rel=0.5), rate_rps=sum(a.rate_rps for a in shares), arrival="exp", conns=8,
                   outstanding=4, sample_every=1, late_ns=50_000)
    return analyse(AnalysisInput(plan, rows, counters, elapsed_s=SPAN_S, received_in_window=counters["received"],
                                 rng=rng, end_ns=int(SPAN_S * 1e9), agents=tuple(shares), owner=owner))


def _check(a, name: str):
    return next(c for c in a.checks if c.name == name)


def test_agents_that_each_send_their_share_pass_and_the_check_follows_rate():
    rng = np.random.default_rng(21)
    per_agent = [_agent_rows(rng, SHARE_RPS) for _ in range(2)]
    a = _analyse(rng, per_agent, [_share(A0, _counters(len(per_agent[0]))), _share(A1, _counters(len(per_agent[1])))])
    names = [c.name for c in a.checks]
    assert names.index("agents") == names.index("rate") + 1
    c = _check(a, "agents")
    assert c.ok and c.remedy is None, c.detail
    assert A0 in c.detail and A1 in c.detail and "arrivals follow its schedule" in c.detail


def test_an_overloaded_agent_is_named_with_its_figure_and_the_remedy():
    rng = np.random.default_rng(22)
    good = _agent_rows(rng, SHARE_RPS)
    # A1's machine could not keep up: 70 % of its share sent, every send 2 ms behind its schedule.
    slow = _agent_rows(rng, SHARE_RPS, lag_ns=2_000_000)
    sent = int(0.7 * SHARE_RPS * SPAN_S)
    a = _analyse(rng, [good, slow], [_share(A0, _counters(len(good))), _share(A1, _counters(sent, late=sent))])
    c = _check(a, "agents")
    assert not c.ok and a.state == "load"
    assert c.remedy == OverloadedAgents((A1,))
    assert remedy_words(c.remedy) == f"add agents or threads on {A1}, or lower --rate"
    assert f"could not keep up ({A1})" in c.detail and A0 not in c.detail.split(":", 1)[0]
    assert "sent 3,500 of its 5,000 req/s (-30.0%" in c.detail and "sent late" in c.detail
    assert c.statistic == pytest.approx(-0.3)


def test_an_agent_off_its_schedule_fails_by_the_arrivals_test():
    """The right count, sent late: its own arrivals fail, though the rate is met."""
    rng = np.random.default_rng(23)
    good = _agent_rows(rng, SHARE_RPS)
    late = _agent_rows(rng, SHARE_RPS, lag_ns=400_000)
    a = _analyse(rng, [good, late], [_share(A0, _counters(len(good))), _share(A1, _counters(len(late)))])
    c = _check(a, "agents")
    assert not c.ok and c.remedy == OverloadedAgents((A1,)), c.detail
    assert "arrivals fail" in c.detail and "sent late > 5%" in c.detail


def test_a_load_agent_is_judged_by_its_rate_and_its_late_share():
    rng = np.random.default_rng(24)
    probe = _agent_rows(rng, 1_000.0)
    shares = [_share(A0, _counters(20_000)), _share(A1, _counters(20_000, late=5_000)),
              _share(A2, _counters(len(probe)), role="probe", rate_rps=1_000.0)]
    shares = [AgentShare(**{**s.__dict__, "role": "load", "timed": False}) if s.address != A2 else s for s in shares]
    empty = np.zeros(0, SAMPLE_DTYPE)
    a = _analyse(rng, [empty, empty, probe], shares)
    c = _check(a, "agents")
    assert not c.ok and c.remedy == OverloadedAgents((A1,)), c.detail
    assert "not timed: its rate and lateness only" in c.detail and "25.0% sent late" in c.detail


def test_an_agent_that_failed_is_left_to_the_run_error_and_overshoot_is_a_bug():
    rng = np.random.default_rng(25)
    rows = [_agent_rows(rng, SHARE_RPS) for _ in range(2)]
    dead = AgentShare(**{**_share(A1, _counters(100)).__dict__, "error": f"agent {A1} cannot be reached"})
    c = _check(_analyse(rng, rows, [_share(A0, _counters(len(rows[0]))), dead]), "agents")
    assert c.ok and f"{A1} (symmetric) failed" in c.detail
    over = _check(_analyse(rng, rows, [_share(A0, _counters(len(rows[0]))), _share(A1, _counters(30_000))]),
                  "agents")
    assert not over.ok and over.remedy is Advice.REPORT_OVERSHOOT


def test_one_machine_has_no_agents_check():
    rng = np.random.default_rng(26)
    s = _agent_rows(rng, SHARE_RPS)
    plan = RunPlan(Precision(ci_rel=0.5), rate_rps=SHARE_RPS, arrival="exp", conns=8, outstanding=4, sample_every=1)
    a = analyse(AnalysisInput(plan, s, _counters(len(s)), elapsed_s=SPAN_S, received_in_window=len(s), rng=rng,
                              end_ns=int(SPAN_S * 1e9)))
    assert "agents" not in [c.name for c in a.checks]


def test_pooled_rows_keep_their_agent_through_a_snapshot():
    rng = np.random.default_rng(27)
    a, b = _agent_rows(rng, 2_000.0), _agent_rows(rng, 3_000.0)
    rows, owner = _pooled([a, b])
    assert np.all(np.diff(rows["intended_ns"].astype(np.int64)) >= 0)
    assert np.array_equal(np.sort(rows["intended_ns"][owner == 1]), np.sort(b["intended_ns"]))
    pend = _agent_rows(rng, 100.0)[:5]
    taken = Taken(rows, pend, 0, True, {}, finished_owner=owner, pending_owner=np.full(5, 1, OWNER_DTYPE))
    s, o = taken.samples(), taken.owners()
    assert len(s) == len(o) == len(rows) + 5 and np.all(np.diff(s["intended_ns"].astype(np.int64)) >= 0)
    assert set(s["intended_ns"][o == 1]) == set(b["intended_ns"]) | set(pend["intended_ns"])
    assert Taken(rows, pend, 0, True, {}).owners() is None


def test_agent_tags_are_file_and_log_safe():
    assert agent_tag("10.0.0.2:7100") == "10.0.0.2-7100"
    assert agent_tag("[fd00::2]:7100") == "fd00--2-7100"
    assert agent_tag("host name/x:1") == "host-name-x-1"
    assert all(AGENT_TAG.fullmatch(agent_tag(a)) for a in ("a:1", "[::1]:2", "x y,z:3"))


def test_the_summary_shows_one_line_per_agent_and_the_barrier():
    s = Summary.model_validate(_summary_with(
        agents=[_share(A0, _counters(20_000)).report(SPAN_S),
                {**_share(A1, _counters(100) | {"timeouts": 3}).report(SPAN_S), "error": "gone"}],
        barrier={"asked_ns": 1, "spread_ns": 1_500_000, "clock_uncertainty_ns": 40_000, "late_ns": 0}))
    lines = agent_lines(s)
    assert len(lines) == 3
    assert lines[0].startswith(f"agent {A0} (symmetric): share 5,000 req/s, sent 5,000 req/s, clock offset +1.0 µs ± 40.0 µs")
    assert "0 / 3 errors / timeouts — failed: gone" in lines[1]
    assert lines[2] == ("barrier: the agents started within 1.50 ms of each other (clocks known to ± 40.0 µs), the "
                        "last 0 ns after the instant asked")
    assert agent_lines(Summary.model_validate(_summary_with())) == []  # a run on this host: no agents
