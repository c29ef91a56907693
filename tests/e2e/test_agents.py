"""Many client machines on one box (issue 21): network namespaces joined by a bridge — a server
host (memcached), agent hosts (`tailwise agent`) and a coordinator host (`tailwise run --agents`).

What must hold: the agents' counts add up to the server's own; the merged every-request
histogram and the pooled raw records agree; the start barrier held and is reported; an agent
killed mid-run is named, what was measured is kept, and no load generator is left running. A
probe agent alone times its requests beside load agents; the results directory holds each
agent's tagged interval log and `report` shows the agents; an agent that refuses the target ends
the run in one line naming it; a sweep measures every point through the agents.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

import numpy as np
import pytest

from support.cli import MEASURED
from support.tls import write_pair
from tailwise.measure import netns

pytestmark = pytest.mark.skipif(netns.can_create() is not None, reason=str(netns.can_create()))

AGENT_PORT = 7100
MEMCACHED_PORT = 11211
#: Every process and wait here is bounded.
START_S = 30.0
RUN_S = 120.0
TOKEN = "tok-" + "0123456789abcdef" * 2
#: The agents' lease here: a run nobody drives is stopped, and one nobody starts dropped, this soon.
LEASE_S = 2.0

# Polls each agent's Health (with the token) until all answer: run on the coordinator's host.
WAIT_AGENTS = """
import sys, time
from tailwise.agents.client import RemoteAgent
from tailwise.errors import TailwiseError
from tailwise.agents.wire import ClientTls
token, tls, addrs = open(sys.argv[1]).read().strip(), ClientTls(ca=open(sys.argv[2], "rb").read()), sys.argv[3:]
deadline = time.monotonic() + 30
for a in addrs:
    agent = RemoteAgent(a, token, tls, call_s=1.0)
    while True:
        try:
            print(a, agent.health().state, flush=True)
            break
        except TailwiseError as e:
            if time.monotonic() > deadline:
                sys.exit(f"agent {a} never answered: {e.line()}")
            time.sleep(0.2)
"""

# Prints each agent's state (Health) as JSON: run on the coordinator's host.
AGENT_STATES = """
import json, sys
from tailwise.agents.client import RemoteAgent
from tailwise.agents.wire import ClientTls
from tailwise.errors import TailwiseError
token, tls, addrs = open(sys.argv[1]).read().strip(), ClientTls(ca=open(sys.argv[2], "rb").read()), sys.argv[3:]
out = {}
for a in addrs:
    try:
        out[a] = RemoteAgent(a, token, tls, call_s=2.0).health().state
    except TailwiseError as e:
        out[a] = "unreachable: " + e.line()
print(json.dumps(out))
"""


@contextmanager
def lan_with_agents(tmp_path: Path, agents: int, allow: dict[int, str] | None = None):
    """The hosts, memcached on `server`, `tailwise agent` on each agent host; all stopped after.
    Each agent may send to the server only, or to what ``allow`` gives it (by its index)."""
    if not shutil.which("memcached"):
        if os.environ.get("CI"):
            pytest.fail("memcached is missing (CI=true: a failure, not a skip)")
        pytest.skip("memcached is not installed")
    names = ["coord", "server", *[f"a{i}" for i in range(agents)]]
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    with netns.lan(names) as lan, ExitStack() as stack:
        procs: dict[str, subprocess.Popen] = {}
        # TLS between the hosts (issue 33: no token in the clear beyond loopback): one self-signed
        # certificate naming every agent's address, its own CA (_auth gives the coordinator it).
        cert, key = write_pair(tmp_path / "tls", tuple(lan.ips[f"a{i}"] for i in range(agents)))

        def start(host: str, argv: list[str]) -> subprocess.Popen:
            log = open(tmp_path / f"{host}.log", "w")
            stack.callback(log.close)
            p = subprocess.Popen(lan.argv(host, argv), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            stack.callback(_kill, p)
            procs[host] = p
            return p

        start("server", ["memcached", "-l", "0.0.0.0", "-p", str(MEMCACHED_PORT), "-U", "0", "-t", "1", "-m", "64",
                         "-u", "root"])
        for i in range(agents):
            nets = (allow or {}).get(i, f"{lan.ips['server']}/32")
            start(f"a{i}", [sys.executable, "-m", "tailwise", "agent", "--listen", f"0.0.0.0:{AGENT_PORT}",
                            "--token-file", str(token), "--tls-cert", str(cert), "--tls-key", str(key),
                            "--allow-targets", nets, "--lease", f"{LEASE_S:g}s"])
        addrs = [f"{lan.ips[f'a{i}']}:{AGENT_PORT}" for i in range(agents)]
        ready = subprocess.run(lan.argv("coord", [sys.executable, "-c", WAIT_AGENTS, str(token), str(cert), *addrs]),
                               capture_output=True, text=True, timeout=START_S + 10)
        assert ready.returncode == 0, ready.stderr + _logs(tmp_path)
        yield lan, token, addrs, procs


def _ca(token: Path) -> str:
    return str(token.parent / "tls" / "cert.pem")


def _auth(token: Path) -> list[str]:
    """The coordinator's flags for the agents: their token and the CA of their certificate."""
    return ["--token-file", str(token), "--agent-tls-ca", _ca(token)]


def _kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait(timeout=10)


def _logs(tmp_path: Path) -> str:
    return "".join(f"\n--- {f.name}\n{f.read_text()[-2000:]}" for f in sorted(tmp_path.glob("*.log")))


def _states(lan, token: Path, addrs: list[str]) -> dict[str, str]:
    done = subprocess.run(lan.argv("coord", [sys.executable, "-c", AGENT_STATES, str(token), _ca(token), *addrs]),
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _run(lan, token: Path, addrs: list[str], *flags: str, timeout_s: float = RUN_S) -> subprocess.CompletedProcess:
    target = f"memcached://{lan.ips['server']}:{MEMCACHED_PORT}"
    argv = [sys.executable, "-m", "tailwise", "run", target, "--agents", ",".join(addrs), *_auth(token),
            "--json", "--no-pin", "--poll", "block", *flags]
    return subprocess.run(lan.argv("coord", argv), capture_output=True, text=True, timeout=timeout_s)


def test_a_coordinated_run_adds_up(tmp_path):
    with lan_with_agents(tmp_path, agents=2) as (lan, token, addrs, _):
        out = tmp_path / "out"
        done = _run(lan, token, addrs, "--rate", "4k", "--duration", "3", "--conns", "4", "--outstanding", "2",
                    "--sample-every", "1", "--out", str(out))
        assert done.returncode in MEASURED, done.stderr + _logs(tmp_path)
        s = json.loads(done.stdout)
        agents = s["agents"]
        assert [a["address"] for a in agents] == addrs and all(a["role"] == "symmetric" for a in agents)
        assert sum(a["rate_rps"] for a in agents) == pytest.approx(4000.0)
        # The agents' counts add up to the run's, and to memcached's own.
        for k in ("intended", "sent", "received", "gets"):
            assert s["counters"][k] == sum(a["counters"][k] for a in agents), k
        assert s["counters"]["sent"] > 0.8 * 4000 * 3
        assert s["target_stats"]["agrees"] is True, s["target_stats"]
        # The barrier held: the agents' schedules began within a few ms of each other, reported.
        b = s["barrier"]
        assert 0 <= b["spread_ns"] < 20_000_000 and b["clock_uncertainty_ns"] < 10_000_000, b
        # The merged every-request histogram and the pooled records (every request kept) agree.
        samples = np.loadtxt(out / "samples.csv", delimiter=",", skiprows=1, usecols=_column(out, "latency_ns"))
        assert len(samples) == s["counters"]["intended"]
        p99 = s["latency"]["histogram"]["percentiles"]
        pooled = np.percentile(samples, 99.0, method="inverted_cdf")
        got = next(p["value_ns"] for p in p99 if p["p"] == 99.0)
        assert got == pytest.approx(pooled, rel=0.01)
        assert not (out / "collected").exists()  # the results replace what was collected on the way


def _column(out: Path, name: str) -> int:
    return (out / "samples.csv").read_text().split("\n", 1)[0].replace('"', "").split(",").index(name)


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "hung"])
def test_an_agent_killed_or_hung_mid_run_is_named_and_nothing_keeps_sending(tmp_path, sig):
    """An agent that dies (SIGKILL) or stops answering (SIGSTOP: alive, silent, caught by its
    call's deadline) ends the run, named; the other agent is stopped and what was measured is
    written."""
    with lan_with_agents(tmp_path, agents=2) as (lan, token, addrs, procs):
        out = tmp_path / "out"
        target = f"memcached://{lan.ips['server']}:{MEMCACHED_PORT}"
        argv = [sys.executable, "-m", "tailwise", "run", target, "--agents", ",".join(addrs), *_auth(token),
                "--json", "--no-pin", "--poll", "block", "--rate", "2k", "--duration", "8", "--out", str(out)]
        run = subprocess.Popen(lan.argv("coord", argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            # Mid-run: once both run (a loaded machine may take seconds to start the coordinator).
            deadline = time.monotonic() + START_S
            while set(_states(lan, token, addrs).values()) != {"running"}:
                assert time.monotonic() < deadline and run.poll() is None, "the run never started" + _logs(tmp_path)
                time.sleep(0.3)
            time.sleep(1.5)
            os.killpg(procs["a1"].pid, sig)
            stdout, stderr = run.communicate(timeout=RUN_S)
        finally:
            _kill(run)
        assert stdout.strip(), f"exit {run.returncode}: {stderr}"
        s = json.loads(stdout)
        assert addrs[1] in (s["error"] or ""), (s["error"], stderr)
        assert s["counters"]["sent"] > 0 and (out / "summary.json").exists()
        # The agent left is not sending: the coordinator stopped it (and its lease would have).
        assert _states(lan, token, addrs[:1])[addrs[0]] in ("idle", "finished"), _logs(tmp_path)


def test_with_no_target_the_agents_load_the_builtin_server_here(tmp_path):
    """No TARGET: the coordinator's host runs the built-in server, on the address facing the agents."""
    with lan_with_agents(tmp_path, agents=1, allow={0: str(netns.LAN_SUBNET)}) as (lan, token, addrs, _):
        argv = [sys.executable, "-m", "tailwise", "run", "--agents", addrs[0], *_auth(token), "--json",
                "--no-pin", "--poll", "block", "--rate", "2k", "--duration", "2"]
        done = subprocess.run(lan.argv("coord", argv), capture_output=True, text=True, timeout=RUN_S)
        assert done.returncode in MEASURED, done.stderr + _logs(tmp_path)
        s = json.loads(done.stdout)
        assert s["target"].startswith(f"synthetic://{lan.ips['coord']}:"), s["target"]
        assert s["counters"]["sent"] > 0 and s["target_stats"]["served"] == s["counters"]["sent"], s["target_stats"]
        assert s["agents"][0]["address"] == addrs[0]


def test_an_orphan_stops_on_its_lease_and_what_was_collected_is_on_disk(tmp_path):
    """The coordinator dies (SIGKILL): its agent stops on its lease, and what the coordinator had
    collected is in DIR/collected/ (written as it arrived: results/journal.py)."""
    with lan_with_agents(tmp_path, agents=1) as (lan, token, addrs, _):
        out = tmp_path / "out"
        target = f"memcached://{lan.ips['server']}:{MEMCACHED_PORT}"
        argv = [sys.executable, "-m", "tailwise", "run", target, "--agents", addrs[0], *_auth(token),
                "--json", "--no-pin", "--poll", "block", "--rate", "2k", "--duration", "30", "--sample-every", "1",
                "--out", str(out)]
        run = subprocess.Popen(lan.argv("coord", argv), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
        try:
            deadline = time.monotonic() + START_S
            while _states(lan, token, addrs)[addrs[0]] != "running":
                assert time.monotonic() < deadline, "the run never started" + _logs(tmp_path)
                time.sleep(0.3)
            time.sleep(2.5)  # past the common start, a few snapshots collected
        finally:
            _kill(run)  # the coordinator dies without a word to its agent
        deadline = time.monotonic() + LEASE_S + 5.0  # the lease, and room
        while _states(lan, token, addrs)[addrs[0]] == "running":
            assert time.monotonic() < deadline, "the orphaned agent kept sending past its lease" + _logs(tmp_path)
            time.sleep(0.3)
        from tailwise.results.journal import read_samples

        assert not (out / "summary.json").exists()
        rows = read_samples(out / "collected")[addrs[0]]
        assert len(rows) > 500, len(rows)  # ~2k/s for ≥ 1 s, every request kept
        # Rows in the order they finished; each a request of the first seconds, timed.
        assert np.all(rows["intended_ns"] < 10 * 10**9) and np.all(rows["latency_ns"] > 0)
        counters = [json.loads(x) for x in (out / "collected" / "counters.jsonl").read_text().splitlines()]
        assert counters and counters[-1]["counters"]["received"] >= len(rows) * 0.5, counters[-1]
        tag = _tag(addrs[0])
        assert _log_totals(out / "collected" / f"latency-{tag}.hlog", tag)[0] > 0


def test_a_stop_signal_stops_the_agents_and_keeps_what_was_measured(tmp_path):
    with lan_with_agents(tmp_path, agents=2) as (lan, token, addrs, _):
        out = tmp_path / "out"
        target = f"memcached://{lan.ips['server']}:{MEMCACHED_PORT}"
        argv = [sys.executable, "-m", "tailwise", "run", target, "--agents", ",".join(addrs), *_auth(token),
                "--json", "--no-pin", "--poll", "block", "--rate", "2k", "--duration", "20", "--out", str(out)]
        run = subprocess.Popen(lan.argv("coord", argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + START_S
            while set(_states(lan, token, addrs).values()) != {"running"}:
                assert time.monotonic() < deadline and run.poll() is None, "the run never started" + _logs(tmp_path)
                time.sleep(0.3)
            time.sleep(1.5)  # past the common start (START_AHEAD_NS): requests were sent
            run.send_signal(signal.SIGINT)  # `ip netns exec` runs the command in its own place
            stdout, stderr = run.communicate(timeout=RUN_S)
        finally:
            _kill(run)
        assert run.returncode == 128 + signal.SIGINT, stderr
        assert stdout, stderr
        s = json.loads(stdout)
        assert s["interrupted"] is True and s["error"] is None and s["rate"]["duration_s"] < 15
        assert (out / "summary.json").is_file() and s["counters"]["sent"] > 0
        assert set(_states(lan, token, addrs).values()) <= {"idle", "finished"}, _logs(tmp_path)


def _tag(address: str) -> str:
    return address.replace(":", "-")


def _log_totals(path: Path, tag: str | None) -> tuple[int, int]:
    """(requests, intervals) of an interval log, read with Python's hdrh; every line has ``tag``."""
    from hdrh.histogram import HdrHistogram
    from hdrh.log import HistogramLogReader

    reader = HistogramLogReader(str(path), HdrHistogram(1, 3_600_000_000_000, 2))
    total, intervals = 0, 0
    while (h := reader.get_next_interval_histogram()) is not None:
        assert h.get_tag() == tag, path
        total += h.get_total_count()
        intervals += 1
    return total, intervals


def test_a_probe_agent_times_while_the_load_agents_only_load(tmp_path):
    with lan_with_agents(tmp_path, agents=3) as (lan, token, addrs, _):
        out = tmp_path / "out"
        load, probe = addrs[:2], addrs[2]
        done = _run(lan, token, load, "--probe-agent", probe, "--probe-rate", "1k", "--rate", "2k", "--duration", "3",
                    "--conns", "4", "--out", str(out))
        assert done.returncode in MEASURED, done.stderr + _logs(tmp_path)
        s = json.loads(done.stdout)
        agents = s["agents"]
        assert [(a["address"], a["role"], a["timed"]) for a in agents] == \
            [(load[0], "load", False), (load[1], "load", False), (probe, "probe", True)]
        assert sum(a["rate_rps"] for a in agents[:2]) == pytest.approx(2000.0) and agents[2]["rate_rps"] == 1000.0
        # The target was offered the load and the probe; the load agents' requests were sent and counted.
        assert s["rate"]["target_rps"] == pytest.approx(3000.0)
        assert all(a["counters"]["sent"] > 0.8 * 1000 * 3 for a in agents[:2])
        assert s["counters"]["sent"] == sum(a["counters"]["sent"] for a in agents)
        # Only the probe's requests are timed: every one of them is a sample (1 in 1), and nothing else.
        samples = (out / "samples.csv").read_text().splitlines()[1:]
        assert len(samples) == agents[2]["counters"]["intended"] > 0.8 * 1000 * 3
        assert s["latency"]["histogram"]["count"] == agents[2]["counters"]["intended"]
        # Each agent judged on its own share; only the probe keeps an interval log of its own.
        check = next(c for c in s["checks"] if c["name"] == "agents")
        assert all(a in check["detail"] for a in addrs), check
        assert sorted(p.name for p in out.glob("latency-*.hlog")) == [f"latency-{_tag(probe)}.hlog"]


def test_each_agent_has_its_interval_log_and_the_report_shows_the_agents(tmp_path):
    with lan_with_agents(tmp_path, agents=2) as (lan, token, addrs, _):
        out = tmp_path / "out"
        done = _run(lan, token, addrs, "--rate", "4k", "--duration", "2", "--conns", "4", "--out", str(out))
        assert done.returncode in MEASURED, done.stderr + _logs(tmp_path)
    s = json.loads((out / "summary.json").read_text())
    whole, intervals = _log_totals(out / "latency.hlog", None)
    assert whole == s["counters"]["intended"] and 18 <= intervals <= 22
    assert not (out / "latency-local.hlog").exists()
    per_agent = []
    for a in s["agents"]:
        total, _ = _log_totals(out / f"latency-{_tag(a['address'])}.hlog", _tag(a["address"]))
        assert total == a["counters"]["intended"] > 0
        per_agent.append(total)
    assert sum(per_agent) == whole
    # The report: the agents in report.html (their table and the barrier) and on the terminal.
    r = subprocess.run([sys.executable, "-m", "tailwise", "report", str(out), "--no-model"], capture_output=True,
                       text=True, timeout=RUN_S)
    assert r.returncode == 0, r.stderr
    assert all(Path(line).is_file() for line in r.stdout.splitlines())
    page = (out / "report.html").read_text()
    assert 'id="agents"' in page and 'id="barrier"' in page and "start barrier" in page
    for a in addrs:
        assert a in page
        assert any(line.startswith(f"agent {a} (symmetric): share 2,000 req/s, sent ") for line in r.stderr.splitlines()), \
            r.stderr
    assert "barrier: the agents started within" in r.stderr


def test_an_agent_refusing_the_target_ends_the_run_in_one_line(tmp_path):
    # a1 may send only to a network the server is not on.
    with lan_with_agents(tmp_path, agents=2, allow={1: "192.0.2.0/24"}) as (lan, token, addrs, _):
        out = tmp_path / "out"
        done = _run(lan, token, addrs, "--rate", "2k", "--duration", "3", "--out", str(out))
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert len(lines) == 1, lines
        assert lines[0].startswith(f"tailwise: agent {addrs[1]}: target {lan.ips['server']}:{MEMCACHED_PORT} is outside "
                                   f"this agent's --allow-targets 192.0.2.0/24: start the agent with --allow-targets "), lines
        assert not out.exists()
        # Nothing runs: the agent that accepted was never started, and its lease drops the run.
        assert "running" not in _states(lan, token, addrs).values()
        deadline = time.monotonic() + LEASE_S + 5.0
        while set(_states(lan, token, addrs).values()) != {"idle"}:
            assert time.monotonic() < deadline, _logs(tmp_path)
            time.sleep(0.3)


def test_a_sweep_measures_every_point_through_the_agents(tmp_path):
    with lan_with_agents(tmp_path, agents=2) as (lan, token, addrs, _):
        out = tmp_path / "sweep"
        target = f"memcached://{lan.ips['server']}:{MEMCACHED_PORT}"
        argv = [sys.executable, "-m", "tailwise", "sweep", target, "--agents", ",".join(addrs), *_auth(token),
                "--json", "--no-pin", "--poll", "block", "--rates", "1k,2k", "--duration", "1",
                "--conns", "4", "--out", str(out)]
        done = subprocess.run(lan.argv("coord", argv), capture_output=True, text=True, timeout=RUN_S)
        assert done.returncode in MEASURED, done.stderr + _logs(tmp_path)
    doc = json.loads(done.stdout)
    points = sorted(doc["points"], key=lambda p: p["rate_rps"])
    assert [p["rate_rps"] for p in points] == [1000.0, 2000.0], (doc["stopped"], doc["error"], done.stderr)
    for p in points:
        s = json.loads((out / p["dir"] / "summary.json").read_text())
        assert [a["address"] for a in s["agents"]] == addrs
        assert sum(a["rate_rps"] for a in s["agents"]) == pytest.approx(p["rate_rps"])
        assert s["counters"]["sent"] == sum(a["counters"]["sent"] for a in s["agents"]) > 0.8 * p["rate_rps"]
        assert all((out / p["dir"] / f"latency-{_tag(a)}.hlog").is_file() for a in addrs)


# Asks one agent's Health in the clear, as --insecure-plaintext allows: run on the coordinator's host.
PLAIN_HEALTH = """
import sys, time
from tailwise.agents.client import RemoteAgent
from tailwise.agents.wire import ClientTls
from tailwise.errors import InputError, TailwiseError
token, address = open(sys.argv[1]).read().strip(), sys.argv[2]
try:
    RemoteAgent(address, token)
    sys.exit("a plain client to " + address + " was made without being told")
except InputError as e:
    print("refused:", e.line())
deadline = time.monotonic() + 30
agent = RemoteAgent(address, token, ClientTls.plain(), call_s=1.0)
while True:
    try:
        print("state:", agent.health().state)
        break
    except TailwiseError as e:
        if time.monotonic() > deadline:
            sys.exit(f"agent {address} never answered: {e.line()}")
        time.sleep(0.2)
"""


def test_plaintext_on_a_network_address_needs_the_flag_on_both_sides(tmp_path):
    """Issue 33: an agent asked to listen on its network address without TLS refuses to start,
    in one line naming the way out; with --insecure-plaintext it serves and says so, and the
    coordinator's client talks to it in the clear only when told the same."""
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    token.chmod(0o600)
    with netns.lan(["coord", "a0"]) as lan, ExitStack() as stack:
        listen = f"{lan.ips['a0']}:{AGENT_PORT}"
        agent = [sys.executable, "-m", "tailwise", "agent", "--listen", listen, "--token-file", str(token)]
        r = subprocess.run(lan.argv("a0", agent), capture_output=True, text=True, timeout=START_S + 30)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert f"--listen {listen} without TLS" in lines[0] and "--insecure-plaintext" in lines[0], lines
        log = open(tmp_path / "a0.log", "w")
        stack.callback(log.close)
        p = subprocess.Popen(lan.argv("a0", [*agent, "--insecure-plaintext"]), stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        stack.callback(_kill, p)
        done = subprocess.run(lan.argv("coord", [sys.executable, "-c", PLAIN_HEALTH, str(token), listen]),
                              capture_output=True, text=True, timeout=START_S + 30)
        assert done.returncode == 0, done.stderr + _logs(tmp_path)
        assert "refused:" in done.stdout and "--insecure-plaintext" in done.stdout and "state: idle" in done.stdout
    said = (tmp_path / "a0.log").read_text()
    assert "(no TLS)" in said and "warning: --insecure-plaintext" in said, said
