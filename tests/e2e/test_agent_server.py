"""Issue 21: the agent service (agents/server.py, `tailwise agent`) through real gRPC on 127.0.0.1.

A small client written here from agent.proto and agents/wire.py only (the coordinator's own client
is not used), against the real engine and the built-in server:

* a whole run: Health, Clock, Configure, Start at a future instant (the schedule starts exactly
  then), Progress, two Snapshots (rows decode as SAMPLE_DTYPE; each snapshot's rows and interval
  histograms agree with its counters), Finish (the counters add up; every request of a
  sample-every-1 run is in exactly one snapshot or the result); a load agent counts, keeps no
  samples;
* the fences: a wrong or missing token (UNAUTHENTICATED, no hint of the token), a target outside
  --allow-targets, a rate, connections or duration over the agent's limits (INVALID_ARGUMENT,
  with the figure, the limit, the kind and the remedy), a second run while one runs;
* the lease: a coordinator that goes silent has its load stopped, then the run dropped;
* `tailwise agent` as users start it: Health with the token, SIGTERM, bad flags (exit 2, one
  line), the token never in its output or its command line; TLS.

Everything is bounded in time; no assertion depends on how fast this machine is.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import numpy as np
import pytest

from support.agents import TOKEN, agent_process, token_file
from support.cli import run_cli
from support.servers import free_port
from support.tls import self_signed, write_pair
from tailwise import _core
from tailwise.agents import wire
from tailwise.agents.events import Dropped, LeaseExpired, Refused
from tailwise.results.rows import SAMPLE_DTYPE
from tailwise.agents.proto import agent_pb2 as pb
from tailwise.agents.proto import agent_pb2_grpc
from tailwise.agents.client import RemoteAgent
from tailwise.agents.limits import Allowed, Limits
from tailwise.agents.server import MAX_CALLS_PER_PEER, AgentServer
from tailwise.agents.serving import serve
from tailwise.measure.server import builtin_server
from tailwise.render.agent import event_line
from tailwise.spec.load import LoadSpec, Probe, protocol

CALL_S = 10.0
FINISH_S = 60.0
SEC = 1_000_000_000


# --------------------------------------------------------------------------- the test's own client

@dataclass
class Agent:
    """An agent service in this process, and a client of it."""

    servicer: AgentServer
    server: grpc.Server
    port: int
    channel: grpc.Channel
    events: list = field(default_factory=list)
    #: Each run's lease key from Configure: calls naming the run carry it unless told not to.
    keys: dict = field(default_factory=dict)

    @property
    def stub(self) -> agent_pb2_grpc.AgentStub:
        return agent_pb2_grpc.AgentStub(self.channel)

    def call(self, name: str, request, token: str | None = TOKEN, keyed: bool = True):
        metadata = wire.bearer(token) if token is not None else None
        if keyed and isinstance(request, (pb.RunRef, pb.StartRequest)) and not request.lease_key:
            request.lease_key = self.keys.get(request.run_id, "")
        return getattr(self.stub, name)(request, metadata=metadata, timeout=CALL_S)

    def chunks(self, name: str, run_id: str, timeout: float = CALL_S) -> tuple[dict, dict[str, bytes]]:
        ref = pb.RunRef(run_id=run_id, lease_key=self.keys.get(run_id, ""))
        return wire.unchunk(getattr(self.stub, name)(ref, metadata=wire.bearer(TOKEN), timeout=timeout))

    def configure(self, run_id: str, spec: LoadSpec | dict, role: str = "symmetric") -> dict:
        config = spec.to_json() if isinstance(spec, LoadSpec) else json.dumps(spec)
        reply = self.call("Configure", pb.ConfigureRequest(run_id=run_id, role=role, engine_config=config))
        self.keys[run_id] = reply.lease_key
        return json.loads(reply.engine_config)

    def health(self) -> pb.HealthReply:
        return self.call("Health", pb.HealthRequest())

    def wait_for(self, kind: type, within_s: float):
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline:
            found = [e for e in list(self.events) if isinstance(e, kind)]
            if found:
                return found[0]
            time.sleep(0.05)
        pytest.fail(f"no {kind.__name__} within {within_s} s; events: {self.events}")


@contextmanager
def agent_service(limits: Limits = Limits(), tls: tuple[bytes, bytes, bytes | None] | None = None):
    events: list = []
    lock = threading.Lock()

    def on_event(e):
        with lock:
            events.append(e)

    servicer = AgentServer(limits, on_event=on_event)
    server, port = serve(servicer, TOKEN, "127.0.0.1:0", tls)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield Agent(servicer, server, port, channel, events)
    finally:
        channel.close()
        servicer.stop_load("test over")
        server.stop(grace=0).wait()
        servicer.close()


@pytest.fixture
def target():
    """The built-in server (one worker, unpinned): the agents' target."""
    with builtin_server(service="fixed:10us", workers=1, pin=False) as srv:
        yield srv


def spec_for(addr: str, **kw) -> LoadSpec:
    """A small run that leaves this 2-CPU machine room: 2k req/s, no spinning, no pinning."""
    base = dict(targets=[addr], rate_rps=2000.0, duration_ns=SEC, threads=1, conns=2, pin=False, busy_poll=False,
                timeout_ns=200_000_000, sample_every=1)
    return LoadSpec(**(base | kw))


def code_of(excinfo) -> grpc.StatusCode:
    return excinfo.value.code()


def trailers(excinfo) -> dict:
    return dict(excinfo.value.trailing_metadata() or ())


def finished_count(c: dict) -> int:
    return c["received"] + c["errors"] + c["timeouts"] + c["never_sent"]


def hist_total(raw: bytes) -> int:
    return _core.Histogram.decode(raw).total if raw else 0


# --------------------------------------------------------------------------- a whole run

def test_a_whole_run_through_the_stubs(target):
    with agent_service() as a:
        h = a.health()
        assert h.version == _core.__version__ and h.state == "idle" and h.run_id == ""
        assert list(h.cpus) == sorted(os.sched_getaffinity(0)) and h.hostname
        assert list(h.limits.allow_targets) == ["127.0.0.0/8", "::1/128"] and h.limits.lease_ns == 5 * SEC
        clock = a.call("Clock", pb.ClockRequest())
        assert clock.mono_ns > 0 and abs(clock.realtime_ns - time.time_ns()) < 60 * SEC

        config = a.configure("run-1", spec_for(target.addr, duration_ns=2 * SEC))
        assert config["rate_rps"] == 2000.0 and config["timed"] is True and set(config) == set(_core.ENGINE_DEFAULTS)
        assert a.health().state == "configured" and a.health().run_id == "run-1"

        at = a.call("Clock", pb.ClockRequest()).mono_ns + 200_000_000
        start = a.call("Start", pb.StartRequest(run_id="run-1", start_at_mono_ns=at))
        assert start.start_mono_ns == at, "the schedule starts at the instant asked for"
        assert a.health().state == "running"

        seen_rows, latest = [], {}
        for _ in range(2):
            while a.call("Progress", pb.RunRef(run_id="run-1")).elapsed_ns < 300_000_000:
                time.sleep(0.05)
            progress = a.call("Progress", pb.RunRef(run_id="run-1"))
            assert json.loads(progress.counters)["sent"] > 0
            meta, parts = a.chunks("Snapshot", "run-1")
            rows = np.frombuffer(parts["samples"], dtype=SAMPLE_DTYPE)
            pending = np.frombuffer(parts.get("pending", b""), dtype=SAMPLE_DTYPE)
            seen_rows.append(rows)
            # Every request is sampled: the rows finished so far are the requests finished so far,
            # and the interval histograms sent so far hold them all.
            total = sum(len(r) for r in seen_rows)
            assert total == finished_count(meta["counters"]), (total, meta["counters"])
            latest |= {i: hist_total(parts[f"done:{i}"]) for i in meta["done"]}
            assert sum(latest.values()) == total
            assert meta["complete"] and meta["snap_ns"] > 0 and isinstance(meta["engine_stalls"], list)
            assert len(pending) == sum(hist_total(parts[f"pending:{i}"]) for i in meta["pending"])
            assert (rows["intended_ns"] <= meta["snap_ns"]).all()
            time.sleep(0.1)
        assert len(seen_rows[1]) > 0, "the second snapshot holds only what finished since the first"

        meta, parts = a.chunks("Finish", "run-1", timeout=FINISH_S)
        c = meta["counters"]
        assert c["received"] + c["errors"] + c["timeouts"] == c["sent"] and c["sent"] > 0
        assert c["intended"] == c["sent"] + c["never_sent"]
        rows = np.frombuffer(parts["samples"], dtype=SAMPLE_DTYPE)
        assert sum(len(r) for r in seen_rows) + len(rows) == c["intended"], "every request sent once, in one place"
        latest |= {i: hist_total(parts[f"done:{i}"]) for i in meta["done"]}
        assert sum(latest.values()) == c["intended"]
        assert hist_total(parts["latency_hist"]) == c["intended"]
        assert meta["start_mono_ns"] == at and not meta["interrupted"] and meta["error"] is None
        assert {"elapsed_ns", "received_in_window", "stalls", "stalled_ns", "error_reasons", "pinned_cpus", "cpu_ns",
                "preemptions", "probe_counters", "steal_s", "wall_start_s", "engine_stalls_ns",
                "target_stalls_ns"} <= set(meta)
        assert a.health().state == "idle", "collected: the agent is free for the next run"


def test_a_load_agent_counts_and_keeps_no_samples(target):
    with agent_service() as a:
        assert a.configure("load-1", spec_for(target.addr), role="load")["timed"] is False
        a.call("Start", pb.StartRequest(run_id="load-1"))
        time.sleep(0.4)
        meta, parts = a.chunks("Snapshot", "load-1")
        assert meta["counters"]["sent"] > 0 and parts.get("samples", b"") == b""
        meta, parts = a.chunks("Finish", "load-1", timeout=FINISH_S)
        c = meta["counters"]
        assert c["sent"] > 0 and c["received"] + c["errors"] + c["timeouts"] == c["sent"]
        assert parts.get("samples", b"") == b"" and meta["done"] == []


def test_a_probe_agent_needs_a_probe_and_a_load_agent_none(target):
    with agent_service() as a:
        with pytest.raises(grpc.RpcError) as e:
            a.configure("p", spec_for(target.addr), role="probe")
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT and "probe" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            a.configure("l", spec_for(target.addr, probe=Probe(1, 100.0)), role="load")
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT
        with pytest.raises(grpc.RpcError) as e:
            a.configure("x", spec_for(target.addr), role="leader")
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT and "leader" in e.value.details()
        # A probe agent runs the probe alone: what it will run comes back (limits judged on it).
        ran = a.configure("p", spec_for(target.addr, probe=Probe(1, 100.0)), role="probe")
        assert (ran["probe"], ran["rate_rps"], ran["conns"], ran["outstanding"], ran["arrival"], ran["sample_every"]) == \
            (None, 100.0, 1, 1, "exp", 1)


def test_one_run_at_a_time_and_calls_name_their_run(target):
    with agent_service() as a:
        a.configure("first", spec_for(target.addr, duration_ns=3 * SEC))
        with pytest.raises(grpc.RpcError) as e:
            a.call("Progress", pb.RunRef(run_id="other"))
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT and "first" in e.value.details()
        a.call("Start", pb.StartRequest(run_id="first"))
        with pytest.raises(grpc.RpcError) as e:
            a.configure("second", spec_for(target.addr))
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT and "'first'" in e.value.details()
        assert trailers(e)[wire.KIND_KEY] == "input" and trailers(e)[wire.REMEDY_KEY]
        a.call("Pause", pb.RunRef(run_id="first"))
        a.call("Resume", pb.RunRef(run_id="first"))
        stopped = a.call("Stop", pb.RunRef(run_id="first"))
        assert json.loads(stopped.counters)["sent"] >= 0
        meta, _ = a.chunks("Finish", "first", timeout=FINISH_S)
        assert meta["interrupted"] is True
        a.configure("second", spec_for(target.addr))


def test_a_finish_whose_caller_gives_up_leaves_the_run_to_collect(target):
    with agent_service() as a:
        a.configure("long", spec_for(target.addr, duration_ns=2 * SEC))
        a.call("Start", pb.StartRequest(run_id="long"))
        with pytest.raises(grpc.RpcError) as e:
            a.chunks("Finish", "long", timeout=0.3)
        assert code_of(e) == grpc.StatusCode.DEADLINE_EXCEEDED
        assert a.health().state in ("running", "finished")
        meta, parts = a.chunks("Finish", "long", timeout=FINISH_S)
        assert meta["counters"]["sent"] > 0 and not meta["interrupted"]
        assert len(parts["samples"]) // SAMPLE_DTYPE.itemsize == meta["counters"]["intended"]


def test_a_target_that_refuses_connections_fails_start_as_a_target_problem():
    with agent_service() as a:
        a.configure("r", spec_for(f"127.0.0.1:{free_port()}", connect_timeout_ns=SEC))
        with pytest.raises(grpc.RpcError) as e:
            a.call("Start", pb.StartRequest(run_id="r"))
        assert code_of(e) == grpc.StatusCode.FAILED_PRECONDITION, e.value.details()
        assert trailers(e)[wire.KIND_KEY] == "target" and trailers(e)[wire.REMEDY_KEY]
        assert a.health().state == "configured", "nothing runs; the coordinator may try again"


# --------------------------------------------------------------------------- the fences

@pytest.mark.parametrize("call", ["Health", "Configure", "Snapshot"])
@pytest.mark.parametrize("token", ["wrong-token-0123456789abcdef", None], ids=["wrong", "missing"])
def test_no_token_no_service(call, token):
    requests = {"Health": pb.HealthRequest(), "Configure": pb.ConfigureRequest(run_id="x", role="load"),
                "Snapshot": pb.RunRef(run_id="x")}
    with agent_service() as a:
        with pytest.raises(grpc.RpcError) as e:
            answer = a.call(call, requests[call], token=token)
            list(answer) if call == "Snapshot" else None
        assert code_of(e) == grpc.StatusCode.UNAUTHENTICATED
        assert e.value.details() == "missing or wrong token"
        assert TOKEN not in str(e.value) and TOKEN not in repr(trailers(e))
        assert a.health().state == "idle"


def test_a_target_outside_allow_targets_is_refused():
    with agent_service() as a:
        with pytest.raises(grpc.RpcError) as e:
            a.configure("out", spec_for("10.1.2.3:11211"))
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT
        assert "10.1.2.3:11211" in e.value.details() and "127.0.0.0/8" in e.value.details()
        t = trailers(e)
        assert t[wire.KIND_KEY] == "input" and "--allow-targets 10.1.2.0/24" in t[wire.REMEDY_KEY]
        assert a.health().state == "idle"
    nets = (Allowed(ipaddress.ip_network("10.1.2.0/24")),)
    with agent_service(Limits(allow_targets=nets)) as a:
        assert a.configure("in", spec_for("10.1.2.3:11211"))["targets"] == ["10.1.2.3:11211"]
        with pytest.raises(grpc.RpcError) as e:
            a.configure("lo", spec_for("127.0.0.1:11211"))
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT, "given networks replace loopback"


def test_a_tls_target_goes_through_an_agent_as_any_other_and_no_key_material_leaves_it(pki, serve_tls):
    """Issue 36: a TLS target is allowed or refused by the target's address, as in the clear; the
    handshakes come back with the result; the configuration carries file names, never keys."""
    port = serve_tls.addr.rsplit(":", 1)[1]
    # A client certificate and key too (the server asks for none): the engine reads them.
    tls = {"ca_file": str(pki.ca), "insecure": False, "cert_file": str(pki.client_cert),
           "key_file": str(pki.client_key), "sni": "localhost", "alpn": [], "resume": True}
    with agent_service() as a:
        config = a.configure("tls-1", spec_for(f"127.0.0.1:{port}", tls=tls, protocol=protocol("synthetic")))
        assert config["tls"]["ca_file"] == str(pki.ca)
        a.call("Start", pb.StartRequest(run_id="tls-1"))
        meta, _ = a.chunks("Finish", "tls-1", timeout=FINISH_S)
        c = meta["counters"]
        assert meta["error"] is None and c["received"] == c["sent"] > 0, (meta["error"], c)
        assert meta["tls"]["full"] + meta["tls"]["resumed"] == len(meta["tls"]["handshake_ns"]) >= 2
        key = pki.client_key.read_text().strip().splitlines()[1]  # a line of the key itself
        assert config["tls"]["key_file"] == str(pki.client_key)
        assert key not in json.dumps(config) + json.dumps(meta) + repr(a.events)
    with agent_service() as a:
        with pytest.raises(grpc.RpcError) as e:
            a.configure("out", spec_for("10.1.2.3:443", tls=tls))
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT and "10.1.2.3:443" in e.value.details()


def test_a_port_outside_allow_targets_is_refused_and_a_cidr_without_one_allows_any():
    """Issue 33: --allow-targets takes ports; 127.0.0.1:22 is refused by an agent that allows
    memcached's port only, with the figure and the flag that would allow it."""
    memcached_only = (Allowed.parse("127.0.0.0/8:11211"), Allowed.parse("[::1/128]:11000-11299"))
    with agent_service(Limits(allow_targets=memcached_only)) as a:
        assert list(a.health().limits.allow_targets) == ["127.0.0.0/8:11211", "[::1/128]:11000-11299"]
        assert a.configure("ok", spec_for("127.0.0.1:11211"))["targets"] == ["127.0.0.1:11211"]
    for target, port in (("127.0.0.1:22", 22), ("[::1]:6379", 6379)):
        with agent_service(Limits(allow_targets=memcached_only)) as a:
            with pytest.raises(grpc.RpcError) as e:
                a.configure("ssh", spec_for(target))
            assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT
            assert f"port {port} is outside this agent's --allow-targets" in e.value.details(), e.value.details()
            assert "--allow-targets" in trailers(e)[wire.REMEDY_KEY] and str(port) in trailers(e)[wire.REMEDY_KEY]
            assert a.health().state == "idle"
    # The default, loopback: any port.
    with agent_service() as a:
        assert a.configure("any", spec_for("127.0.0.1:22"))["targets"] == ["127.0.0.1:22"]


@pytest.mark.parametrize("field,value,said", [
    ("host", "x\r\nX-Injected: 1\r\n\r\nSET pwned 1\r\nFLUSHALL\r\n", "host has a control character (0x0d) at position 1"),
    ("path", "/x\r\nX-Injected: 1", "path has a control character (0x0d) at position 2"),
    ("path", "/a b", "path has a space at position 2"),
    ("host", "h" * 300, "host is 300 bytes long, over 261"),
])
def test_an_injected_http_host_or_path_is_refused_by_an_agent(field, value, said):
    """Issue 33: a token holder's configuration with CR LF in an http target's host or path is
    refused before anything is sent (the engine's own check, protocol/http.rs), in one line."""
    config = json.loads(spec_for("127.0.0.1:8080").to_json())
    config["protocol"] = {"scheme": "http", "host": "127.0.0.1:8080", "path": "/"} | {field: value}
    with agent_service() as a:
        with pytest.raises(grpc.RpcError) as e:
            a.configure("inject", config)
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT
        assert said in e.value.details() and "\n" not in e.value.details(), e.value.details()
        assert "percent-encode" in trailers(e)[wire.REMEDY_KEY]
        assert a.health().state == "idle"


@pytest.mark.parametrize("target,said", [
    ("http://127.0.0.1:9/x\r\nX-Injected: 1", "has a control character (\\r) at position 20"),
    ("http://127.0.0.1:9/a b", "has a space at position 20"),
])
def test_tailwise_run_refuses_an_injected_target_in_one_line(target, said):
    """Issue 33: `tailwise run` itself, before anything is sent: exit 2, one line naming the character."""
    r = run_cli("run", target, "--duration", "1")
    assert r.returncode == 2 and said in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "\r" not in r.stderr.replace("\\r", "")


def _vm_data_bytes() -> int:
    """This process's data segment (heap and anonymous mappings, touched or not), from /proc."""
    text = Path("/proc/self/status").read_text()
    return int(re.search(r"VmData:\s+(\d+) kB", text).group(1)) * 1024


def test_the_flows_rings_stay_within_their_budget(udp_reflector):
    """Issue 33: 64 flows of a 60 s timeout at 100k packets/s — each flow's ring sized by rate ×
    timeout would take 10 MiB, 640 MiB in all — take at most the rings' budget together (2²² slots
    of 40 bytes: 160 MiB; packet/flows.rs ``RINGS_BUDGET``), read from /proc while the run goes."""
    refl = udp_reflector()
    config = json.loads(spec_for(refl.addr, rate_rps=100_000.0, duration_ns=2 * SEC, timeout_ns=60 * SEC).to_json())
    config["protocol"] = {"scheme": "udp+flow", "size": 64, "flows": 64}
    with agent_service() as a:
        before = _vm_data_bytes()
        a.configure("rings", config)
        a.call("Start", pb.StartRequest(run_id="rings"))
        time.sleep(0.5)
        grown = _vm_data_bytes() - before
        assert a.health().state == "running"
        a.call("Stop", pb.RunRef(run_id="rings"))
    assert grown < 160 * 2**20 + 64 * 2**20, f"{grown / 2**20:.0f} MiB"


def _rss_bytes(pid: int) -> int:
    """A process's resident set, from /proc (0 once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return int(re.search(r"VmRSS:\s+(\d+) kB", text).group(1)) * 1024


def _silent_coordinator(proc, port: int, spec: LoadSpec, enough) -> tuple[list[int], object, object, dict]:
    """A real coordinator (``GroupSession``, not AgentGroup.start: no signal handler in pytest) that
    keeps the agent's lease — its heartbeat's and these Progress calls — but takes no rows until
    ``enough(progress)`` (or 20 s); then one take, stop and finish. The agent's resident set is read
    from /proc every 50 ms all along. Returns (RSS samples, the take, the result, the last progress)."""
    from tailwise.agents.group import AgentGroup, GroupSession

    rss = [_rss_bytes(proc.pid)]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.05):
            rss.append(_rss_bytes(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    group = AgentGroup([f"127.0.0.1:{port}"], TOKEN)
    session = GroupSession(group.members, spec)
    try:
        t0 = time.monotonic()
        while not enough(progress := session.snapshot()) and time.monotonic() - t0 < 20:
            time.sleep(0.25)
        taken = session.take()
        session.stop()
        result = session.finish()
    finally:
        sampling.set()
        sampler.join(5)
        group.members[0].agent.close()
    return rss, taken, result, progress


def test_a_silent_coordinator_leaves_the_agent_within_its_max_memory(tmp_path, udp_reflector):
    """Issue 33: an agent started with --max-memory 128Mi (a ceiling of 131,072 rows held) runs
    a UDP load whose every request is sampled (64 bytes a row) while its coordinator — the real
    one, ``GroupSession`` — keeps the lease (its heartbeat) but takes no snapshot until the rows
    sent would alone have taken the agent well past its bound (or 20 s). The agent's resident set,
    read from /proc all along (the snapshot and the end too), stays under the bound; it says once
    that it thinned; the coordinator's snapshot then holds rows at the agent's level at least, and
    its result names the agent (``agents_thinned``). Before this, the rows piled up in the engine."""
    bound = 128 << 20
    refl = udp_reflector()
    with agent_process("--token-file", str(token_file(tmp_path)), "--max-memory", "128Mi") as (proc, port, lines):
        assert "max memory 128 MiB (rows held between snapshots ≤ 131,072)" in lines[-1], lines[-1]
        spec = LoadSpec(targets=[refl.addr], rate_rps=200_000.0, duration_ns=60 * SEC, threads=1, conns=4,
                        outstanding=64, pin=False, timeout_ns=200_000_000, sample_every=1,
                        protocol={"scheme": "udp", "size": 16})
        start = _rss_bytes(proc.pid)
        # Silent until the rows sent would alone have taken the agent 1.5 × past its room.
        rss, taken, result, progress = _silent_coordinator(
            proc, port, spec, lambda p: p.get("sent", 0) * SAMPLE_DTYPE.itemsize >= 1.5 * (bound - start))
        sent = progress.get("sent", 0)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    peak = max(rss)
    assert sent > 131_072 and peak < bound, f"{sent:,} rows sent, peak {peak / 2**20:.0f} MiB (start {rss[0] / 2**20:.0f})"
    assert taken.one_in >= 2 and len(taken.finished) <= 131_072 + sent // 2, (taken.one_in, len(taken.finished))
    thinned = result.subsample.get("agents_thinned")
    assert thinned == [{"address": f"127.0.0.1:{port}", "one_in": thinned[0]["one_in"]}] and thinned[0]["one_in"] >= 2
    assert result.subsample["one_in"] >= thinned[0]["one_in"]
    said = [line for line in ("".join(lines) + out).splitlines() if "passed this agent's ceiling" in line]
    assert len(said) == 1 and "of 131,072 (128 MiB)" in said[0] and "keeps 1 in" in said[0], said


def test_a_silent_coordinator_leaves_the_agent_within_its_max_memory_at_a_rate_far_above_what_it_sends(
        tmp_path, udp_reflector):
    """Issue 33 at an offered rate far above what the machine sends (udp+flow at 1 M packets/s, every
    one a row, sent or not): an engine thread that far behind sends a ring of packets for seconds,
    then ends millions at once (never sent: its ring full) — more rows than any take's cadence
    holds. With --max-memory 320Mi (a ceiling of 262,144 rows once the rings' budget is set aside)
    and a coordinator that keeps the lease but takes nothing until the rows would alone be 1.5 × the
    bound (or 20 s), the agent's resident set stays under the bound all along: the engine thins past
    its share by the subsample's keys (before, it went past 500 MiB). The rows the coordinator then
    gets are one level's, by its own keys."""
    from tailwise.stats.subsample import kept

    bound = 320 << 20
    refl = udp_reflector()
    with agent_process("--token-file", str(token_file(tmp_path)), "--max-memory", "320Mi") as (proc, port, lines):
        spec = LoadSpec(targets=[refl.addr], rate_rps=1_000_000.0, duration_ns=60 * SEC, threads=1, conns=4,
                        outstanding=64, pin=False, timeout_ns=200_000_000, sample_every=1,
                        protocol={"scheme": "udp+flow", "size": 64, "flows": 1})
        # Silent until the rows would alone have taken the agent well past its bound.
        rss, taken, result, progress = _silent_coordinator(
            proc, port, spec, lambda p: p.get("intended", 0) * SAMPLE_DTYPE.itemsize >= 1.5 * bound)
        intended = progress.get("intended", 0)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    peak = max(rss)
    assert intended * SAMPLE_DTYPE.itemsize > bound, f"{intended:,} rows: not enough to show the bound"
    assert peak < bound, f"{intended:,} rows, peak {peak / 2**20:.0f} MiB (start {rss[0] / 2**20:.0f})"
    level = taken.one_in.bit_length() - 1
    assert level >= 2 and len(taken.finished), taken.one_in
    rows = taken.finished
    assert kept(rows["intended_ns"], level, rows["thread"].astype(np.uint64)).all(), "one level's rows, by its keys"
    assert result.subsample["agents_thinned"][0]["one_in"] >= 2
    said = [line for line in ("".join(lines) + out).splitlines() if "passed this agent's ceiling" in line]
    assert len(said) == 1 and "of 262,144 (320 MiB)" in said[0], said


def test_a_packet_run_that_leaves_too_little_memory_for_rows_is_refused():
    """Issue 33: udp+flow's rings may take 160 MiB of the bound (packet/flows.rs): under
    --max-memory 200Mi that leaves too little for the rows, and Configure says so with the figure."""
    limits = Limits(max_memory=200 << 20, memory_from="--max-memory")
    config = json.loads(spec_for("127.0.0.1:9").to_json())
    with agent_service(limits) as a:
        assert a.health().limits.max_memory_bytes == 200 << 20 and a.health().limits.max_rows == 425_984
        a.configure("tcp", config)  # room enough without the rings
    with agent_service(limits) as a:
        with pytest.raises(grpc.RpcError) as e:
            a.configure("flows", config | {"protocol": {"scheme": "udp+flow", "size": 64, "flows": 4}})
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT
        assert "udp+flow's rings may take 160 MiB" in e.value.details() and "--max-memory 200 MiB" in e.value.details()
        assert "--max-memory 272 MiB" in trailers(e)[wire.REMEDY_KEY]


LIMITS = Limits(max_rate_rps=10_000.0, max_conns=8, max_duration_ns=2 * SEC)
OVER = {
    "rate": ({"rate_rps": 20_000.0}, ["20,000 req/s", "--max-rate 10,000 req/s"]),
    "rate with the probe": ({"rate_rps": 9_000.0, "probe": Probe(1, 2_000.0)}, ["11,000 req/s (load + probe)"]),
    "conns": ({"conns": 16}, ["16 connections", "--max-conns 8"]),
    "probe connections": ({"conns": 6, "probe": Probe(4, 1_000.0)},
                          ["6 connections and 4 probe connections (10 sockets)", "--max-conns 8"]),
    "flows": ({"protocol": {"scheme": "udp+flow", "size": 64, "flows": 64}}, ["64 flows (64 sockets)", "--max-conns 8"]),
    "duration": ({"duration_ns": 5 * SEC}, ["5.00 s", "--max-duration 2.00 s"]),
    "threads": ({"threads": len(os.sched_getaffinity(0)) + 1, "conns": 8},
                [f"{len(os.sched_getaffinity(0)) + 1} threads are over this agent's", "CPUs (--cpus)"]),
    "outstanding": ({"outstanding": 1_000_000}, ["outstanding 1,000,000 is over the 1,024 an agent holds"]),
    "timeout": ({"timeout_ns": 2**64 - 1}, ["timeout", "is over the 300.00 s an agent holds"]),
    "connect timeout": ({"connect_timeout_ns": 3600 * SEC}, ["connect timeout", "is over the 60.00 s an agent holds"]),
}


@pytest.mark.parametrize("over", OVER, ids=list(OVER))
def test_over_a_limit_is_refused_with_its_figure(over):
    given, said = OVER[over]
    with agent_service(LIMITS) as a:
        with pytest.raises(grpc.RpcError) as e:
            a.configure("big", spec_for("127.0.0.1:11211", **given))
        assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT
        for words in said:
            assert words in e.value.details(), e.value.details()
        assert trailers(e)[wire.KIND_KEY] == "input" and trailers(e)[wire.REMEDY_KEY]
        a.configure("small", spec_for("127.0.0.1:11211"))  # within every limit


# --------------------------------------------------------------------------- the lease

def test_a_silent_coordinator_loses_its_load_then_its_run(target):
    lease_s = 1.5
    with agent_service(Limits(lease_ns=int(lease_s * SEC))) as a:
        a.configure("orphan", spec_for(target.addr, duration_ns=60 * SEC))
        a.call("Start", pb.StartRequest(run_id="orphan"))
        time.sleep(0.3)
        assert target.served() > 0
        # The coordinator goes silent: within the lease and a margin the agent stops the load.
        expired = a.wait_for(LeaseExpired, lease_s + 3)
        assert expired.run_id == "orphan" and expired.silent_ns >= lease_s * SEC
        deadline = time.monotonic() + 5
        while a.health().state == "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert a.health().state == "finished"
        before = json.loads(a.call("Progress", pb.RunRef(run_id="orphan")).counters)
        served = target.served()
        time.sleep(0.3)
        assert json.loads(a.call("Progress", pb.RunRef(run_id="orphan")).counters)["sent"] == before["sent"]
        assert target.served() == served, "no request reaches the target any more"
        # Nobody collects it: after another lease it is dropped and the agent is free.
        dropped = a.wait_for(Dropped, lease_s + 3)
        assert dropped.run_id == "orphan" and dropped.state == "finished"
        assert a.health().state == "idle"
        a.configure("next", spec_for(target.addr))


def test_only_the_runs_own_successful_calls_renew_its_lease(target):
    """Issue 33: a call that fails (a run that is not there) or that does not carry the run's
    lease key (another token holder, who can read the run id from Health) keeps nothing alive;
    the coordinator's own calls, with the key Configure gave it, do."""
    lease_s = 1.5
    with agent_service(Limits(lease_ns=int(lease_s * SEC))) as a:
        a.configure("orphan", spec_for(target.addr, duration_ns=60 * SEC))
        a.call("Start", pb.StartRequest(run_id="orphan"))
        assert a.health().run_id == "orphan"  # anyone with the token sees the id, never the key
        t0 = time.monotonic()
        while not any(isinstance(e, LeaseExpired) for e in list(a.events)) and time.monotonic() - t0 < lease_s + 3:
            with pytest.raises(grpc.RpcError):
                a.call("Progress", pb.RunRef(run_id="bogus"))
            a.call("Progress", pb.RunRef(run_id="orphan"), keyed=False)
            a.call("Progress", pb.RunRef(run_id="orphan", lease_key="0" * 32), keyed=False)
            time.sleep(0.2)
        expired = a.wait_for(LeaseExpired, 0.1)
        assert expired.run_id == "orphan" and expired.silent_ns >= lease_s * SEC
    # The run's own calls keep it: 3 s of keyed Progress under a 1.5 s lease, and it runs on.
    with agent_service(Limits(lease_ns=int(lease_s * SEC))) as a:
        a.configure("kept", spec_for(target.addr, duration_ns=60 * SEC))
        a.call("Start", pb.StartRequest(run_id="kept"))
        t0 = time.monotonic()
        while time.monotonic() - t0 < 2 * lease_s:
            a.call("Progress", pb.RunRef(run_id="kept"))
            time.sleep(0.2)
        assert a.health().state == "running" and not any(isinstance(e, LeaseExpired) for e in a.events), a.events
        a.call("Stop", pb.RunRef(run_id="kept"))


def _half_open(port: int, n: int, token: str | None) -> tuple[list, threading.Event, list[grpc.Channel]]:
    """``n`` calls of Progress whose headers are sent and whose body never comes, spread over
    connections of their own (8 a connection: the agent's streams per connection); returns their
    futures, the event that lets their bodies go, and the channels."""
    release = threading.Event()

    def body():
        release.wait(30)
        yield pb.RunRef(run_id="x").SerializeToString()

    channels, futures = [], []
    metadata = wire.bearer(token) if token is not None else None
    for i in range(0, n, 8):
        ch = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
        channels.append(ch)
        call = ch.stream_unary("/tailwise.agent.v1.Agent/Progress", request_serializer=lambda b: b,
                               response_deserializer=pb.ProgressReply.FromString)
        futures += [call.future(body(), metadata=metadata, timeout=30) for _ in range(min(8, n - i))]
    return futures, release, channels


def test_half_open_calls_from_a_stranger_leave_health_answering():
    """Issue 33: 64 unauthenticated calls that send their headers and never their body are
    refused at once (before the body is read: no pool thread held), the coordinator's Health
    answers within 1 s meanwhile, and the refusals are said once a second at most, naming the
    address."""
    with agent_service() as a:
        futures, release, channels = _half_open(a.port, 64, token=None)
        try:
            for f in futures:
                with pytest.raises(grpc.RpcError) as e:
                    f.result(timeout=10)
                assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
            # Within 1 s: the coordinator's own deadline (a call past it fails, DEADLINE_EXCEEDED).
            coordinator = RemoteAgent(f"127.0.0.1:{a.port}", TOKEN, call_s=1.0)
            assert coordinator.health().state == "idle"
            coordinator.close()
        finally:
            release.set()
            for ch in channels:
                ch.close()
        refused = [e for e in a.events if isinstance(e, Refused)]
        assert 1 <= len(refused) <= 3, refused
        assert all(e.peer.startswith("ipv4:127.0.0.1:") for e in refused)
        # The next refusal a second later carries the count of those not said.
        time.sleep(1.1)
        with pytest.raises(grpc.RpcError):
            a.call("Health", pb.HealthRequest(), token="wrong")
        last = [e for e in a.events if isinstance(e, Refused)][-1]
        assert last.unsaid == 64 - len(refused), last
        assert "from ipv4:127.0.0.1:" in event_line(last) and "more from there" in event_line(last)


def test_one_address_may_hold_only_so_many_calls(target):
    """Issue 33: a token holder's calls that wait (Finish on a running load) are bounded per
    address: past ``MAX_CALLS_PER_PEER`` the next is RESOURCE_EXHAUSTED, and Health still answers."""
    with agent_service() as a:
        a.configure("long", spec_for(target.addr, duration_ns=20 * SEC))
        a.call("Start", pb.StartRequest(run_id="long"))
        ref = pb.RunRef(run_id="long", lease_key=a.keys["long"])
        channels = [grpc.insecure_channel(f"127.0.0.1:{a.port}", options=[("grpc.use_local_subchannel_pool", 1)])
                    for _ in range(2)]
        waits = []
        try:
            waits = [agent_pb2_grpc.AgentStub(channels[i % 2]).Finish(ref, metadata=wire.bearer(TOKEN), timeout=30)
                     for i in range(MAX_CALLS_PER_PEER)]
            deadline = time.monotonic() + 5
            while sum(a.servicer._calls.values()) < MAX_CALLS_PER_PEER and time.monotonic() < deadline:
                time.sleep(0.05)
            with pytest.raises(grpc.RpcError) as e:
                a.chunks("Finish", "long")
            assert code_of(e) == grpc.StatusCode.RESOURCE_EXHAUSTED and "the most one address may have" in e.value.details()
            assert a.health().state == "running"
        finally:
            for w in waits:
                w.cancel()
            deadline = time.monotonic() + 5
            while a.servicer._calls and time.monotonic() < deadline:  # the cancelled Finishes let go
                time.sleep(0.05)
            a.call("Stop", pb.RunRef(run_id="long"))
            for ch in channels:
                ch.close()


# --------------------------------------------------------------------------- `tailwise agent`

def test_the_agent_command_serves_and_stops_on_sigterm(tmp_path):
    path = token_file(tmp_path)
    with agent_process("--token-file", str(path), "--max-rate", "50k", "--lease", "3s") as (proc, port, lines):
        assert "no TLS" in lines[-1] and "max rate 50,000 req/s" in lines[-1] and "lease 3.00 s" in lines[-1]
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = agent_pb2_grpc.AgentStub(channel)
            h = stub.Health(pb.HealthRequest(), metadata=wire.bearer(TOKEN), timeout=CALL_S)
            assert h.state == "idle" and h.limits.max_rate_rps == 50_000 and h.limits.lease_ns == 3 * SEC
            with pytest.raises(grpc.RpcError) as e:
                stub.Configure(pb.ConfigureRequest(run_id="far", role="load",
                                                   engine_config=spec_for("10.9.9.9:80").to_json()),
                               metadata=wire.bearer(TOKEN), timeout=CALL_S)
            assert code_of(e) == grpc.StatusCode.INVALID_ARGUMENT
            with pytest.raises(grpc.RpcError):
                stub.Health(pb.HealthRequest(), metadata=wire.bearer("not-the-token-at-all"), timeout=CALL_S)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
    output = "".join(lines) + out + err
    assert re.search(r"refused Configure from ipv4:127\.0\.0\.1:\d+ \(run far\): target 10\.9\.9\.9:80 is outside", output)
    assert re.search(r"refused Health from ipv4:127\.0\.0\.1:\d+: missing or wrong token", output)
    # Loopback without TLS: nothing crosses a network, so no warning (--insecure-plaintext beyond
    # loopback warns: test_agents.py).
    assert "in the clear" not in err, err
    assert "SIGTERM" in output and "Traceback" not in output
    assert TOKEN not in output and TOKEN.encode() not in cmdline and str(path).encode() in cmdline


def test_the_help_shows_the_servers_defaults():
    from tailwise.agents.limits import DEFAULT_LEASE_NS, LOOPBACK
    from tailwise.cli import agent as command
    from tailwise.spec.units import parse_time_ns

    assert parse_time_ns(command.DEFAULT_LEASE, what="--lease") == DEFAULT_LEASE_NS
    assert command.LOOPBACK_TEXT == ",".join(map(str, LOOPBACK))


def test_sigterm_stops_a_running_load_first(tmp_path, target):
    with agent_process("--token-file", str(token_file(tmp_path))) as (proc, port, lines):
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = agent_pb2_grpc.AgentStub(channel)
            md = wire.bearer(TOKEN)
            stub.Configure(pb.ConfigureRequest(run_id="long", role="symmetric",
                                               engine_config=spec_for(target.addr, duration_ns=60 * SEC).to_json()),
                           metadata=md, timeout=CALL_S)
            stub.Start(pb.StartRequest(run_id="long"), metadata=md, timeout=CALL_S)
            deadline = time.monotonic() + 10
            while target.served() == 0 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert target.served() > 0
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        served = target.served()
        time.sleep(0.3)
        assert target.served() == served, "the agent's load ended with it"
    output = "".join(lines) + out
    assert "run long started" in output and "SIGTERM: shutting down; stopping run long first" in output


def test_a_port_in_use_or_a_key_of_another_certificate_is_one_line(tmp_path):
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        r = run_cli("agent", "--token-file", str(token_file(tmp_path)), "--listen",
                    f"127.0.0.1:{taken.getsockname()[1]}", timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "cannot listen" in r.stderr, r.stderr
    cert, _ = self_signed(tmp_path)
    (tmp_path / "other").mkdir()
    _, other_key = self_signed(tmp_path / "other")
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(other_key)
    (tmp_path / "key.pem").chmod(0o600)
    r = run_cli("agent", "--token-file", str(token_file(tmp_path)), "--listen", "127.0.0.1:0",
                "--tls-cert", str(tmp_path / "cert.pem"), "--tls-key", str(tmp_path / "key.pem"), timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--tls-key" in r.stderr, r.stderr


BAD_FLAGS = {
    "missing token file": (["--token-file", "{tmp}/none"], "does not exist"),
    "short token": (["--token-file", "{short}"], "too short"),
    "no token file": ([], "--token-file"),
    "bad network": (["--token-file", "{token}", "--allow-targets", "10.0.0.0/24,lan"], "--allow-targets"),
    "cert without key": (["--token-file", "{token}", "--tls-cert", "{token}"], "--tls-key"),
    "short lease": (["--token-file", "{token}", "--lease", "10ms"], "--lease"),
    "bad rate": (["--token-file", "{token}", "--max-rate", "lots"], "--max-rate"),
    "bad cpus": (["--token-file", "{token}", "--cpus", "9999"], "--cpus"),
    "bad listen": (["--token-file", "{token}", "--listen", "7100"], "--listen"),
    # Issue 33: every address, in the clear, only when told so.
    "plaintext beyond loopback": (["--token-file", "{token}", "--listen", "0.0.0.0:0"], "--insecure-plaintext"),
    "client CA without TLS": (["--token-file", "{token}", "--tls-client-ca", "{token}"], "--tls-client-ca"),
    "bad memory": (["--token-file", "{token}", "--max-memory", "lots"], "--max-memory lots is not a size"),
    "small memory": (["--token-file", "{token}", "--max-memory", "64Mi"], "--max-memory 64Mi is too small"),
}


@pytest.mark.parametrize("bad", BAD_FLAGS, ids=list(BAD_FLAGS))
def test_bad_flags_exit_2_with_one_line(tmp_path, bad):
    args, named = BAD_FLAGS[bad]
    short = tmp_path / "short"
    short.write_text("tiny\n")
    short.chmod(0o600)
    paths = {"tmp": tmp_path, "short": short, "token": token_file(tmp_path)}
    r = run_cli("agent", *[a.format(**paths) for a in args], timeout=60)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tailwise: ") and named in lines[0], r.stderr
    assert TOKEN not in r.stdout + r.stderr


# --------------------------------------------------------------------------- TLS

@pytest.mark.parametrize("which", ["token", "key"])
def test_a_secret_file_others_may_read_is_refused_with_the_chmod(tmp_path, which):
    """Issue 33: a token or TLS key file readable by its group or by others is refused at start
    (as ssh refuses such a private key), in one line with the chmod that fixes it; 0600 starts."""
    token = token_file(tmp_path)
    cert, key = self_signed(tmp_path)
    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    (tmp_path / "key.pem").chmod(0o600)
    loose = token if which == "token" else tmp_path / "key.pem"
    loose.chmod(0o644)
    args = ("agent", "--token-file", str(token), "--listen", "127.0.0.1:0", "--tls-cert", str(tmp_path / "cert.pem"),
            "--tls-key", str(tmp_path / "key.pem"))
    r = run_cli(*args, timeout=60)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"may be read by others (mode 0644)" in r.stderr and f"chmod 600 {loose}" in r.stderr, r.stderr
    # The coordinator refuses its copy of the token the same way.
    if which == "token":
        r = run_cli("run", "--agents", "127.0.0.1:9", "--token-file", str(token), "--duration", "1", timeout=60)
        assert r.returncode == 2 and f"chmod 600 {token}" in r.stderr, r.stderr


def test_tls_admits_a_client_with_the_ca_and_no_plain_one(tmp_path):
    cert, key = self_signed(tmp_path)
    with agent_service(tls=(cert, key, None)) as a:
        creds = grpc.ssl_channel_credentials(root_certificates=cert)
        with grpc.secure_channel(f"127.0.0.1:{a.port}", creds,
                                 options=[("grpc.ssl_target_name_override", "localhost")]) as channel:
            h = agent_pb2_grpc.AgentStub(channel).Health(pb.HealthRequest(), metadata=wire.bearer(TOKEN), timeout=CALL_S)
            assert h.state == "idle"
        with pytest.raises(grpc.RpcError) as e:
            a.health()  # a.channel is a plain one
        assert code_of(e) == grpc.StatusCode.UNAVAILABLE
        (tmp_path / "other").mkdir()
        other = grpc.ssl_channel_credentials(root_certificates=self_signed(tmp_path / "other")[0])
        with grpc.secure_channel(f"127.0.0.1:{a.port}", other,
                                 options=[("grpc.ssl_target_name_override", "localhost")]) as channel:
            with pytest.raises(grpc.RpcError) as e:
                agent_pb2_grpc.AgentStub(channel).Health(pb.HealthRequest(), metadata=wire.bearer(TOKEN), timeout=CALL_S)
            assert code_of(e) == grpc.StatusCode.UNAVAILABLE, "a certificate the client does not trust"

    (tmp_path / "cert.pem").write_bytes(cert)
    (tmp_path / "key.pem").write_bytes(key)
    (tmp_path / "key.pem").chmod(0o600)
    with agent_process("--token-file", str(token_file(tmp_path)), "--tls-cert", str(tmp_path / "cert.pem"),
                       "--tls-key", str(tmp_path / "key.pem")) as (proc, port, lines):
        assert "(TLS)" in lines[-1]
        creds = grpc.ssl_channel_credentials(root_certificates=cert)
        with grpc.secure_channel(f"127.0.0.1:{port}", creds,
                                 options=[("grpc.ssl_target_name_override", "localhost")]) as channel:
            assert agent_pb2_grpc.AgentStub(channel).Health(pb.HealthRequest(), metadata=wire.bearer(TOKEN),
                                                            timeout=CALL_S).state == "idle"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "in the clear" not in err


def test_mutual_tls_refuses_a_coordinator_without_a_certificate(tmp_path):
    """Issue 33: an agent with --tls-client-ca completes the handshake only with a client that
    shows a certificate chaining to that CA; the coordinator's ClientTls shows one."""
    from tailwise.agents.wire import ClientTls, client_tls
    from tailwise.errors import TailwiseError

    server_cert, server_key = write_pair(tmp_path / "agent")
    client_cert, client_key = write_pair(tmp_path / "coordinator")
    stranger_cert, stranger_key = write_pair(tmp_path / "stranger")
    with agent_process("--token-file", str(token_file(tmp_path)), "--tls-cert", str(server_cert), "--tls-key",
                       str(server_key), "--tls-client-ca", str(client_cert)) as (_, port, lines):
        assert "(TLS, client certificates required)" in lines[-1], lines
        address = f"127.0.0.1:{port}"
        refused = {"no certificate": ClientTls(ca=server_cert.read_bytes()),
                   "another CA's": client_tls(str(server_cert), str(stranger_cert), str(stranger_key), False)}
        for what, tls in refused.items():
            agent = RemoteAgent(address, TOKEN, tls, call_s=CALL_S)
            try:
                with pytest.raises(TailwiseError) as e:
                    agent.health()
                assert "cannot be reached" in e.value.problem and "--agent-tls-cert" in e.value.remedy, (what, e.value)
            finally:
                agent.close()
        agent = RemoteAgent(address, TOKEN, client_tls(str(server_cert), str(client_cert), str(client_key), False),
                            call_s=CALL_S)
        try:
            assert agent.health().state == "idle"
        finally:
            agent.close()


def test_the_coordinator_sends_no_token_in_the_clear_beyond_loopback(tmp_path):
    """Issue 33: `run --agents` to an address other than loopback without TLS is refused before
    anything is sent, naming the agent and the two ways out; so is the library's client."""
    from tailwise.errors import InputError

    token = token_file(tmp_path)
    for agents in ("192.0.2.7:7100", "[2001:db8::7]:7100", "agents.example:7100"):
        r = run_cli("run", "--agents", agents, "--token-file", str(token), "--duration", "1", timeout=60)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert agents in lines[0] and "--agent-tls-ca" in lines[0] and "--insecure-plaintext" in lines[0], lines
    with pytest.raises(InputError):
        RemoteAgent("192.0.2.7:7100", TOKEN)
