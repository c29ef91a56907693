"""The test servers (tests/support/servers.py, their fixtures in tests/support/plugin.py) and
tailwise.measure.serverstats, against the real Debian servers."""

from __future__ import annotations

import os
import signal
import socket
import struct
import time
from pathlib import Path

import pytest
from support import servers
from support.plugin import FIXTURES, skip_unless_installed
from support.servers import (
    GARBAGE_REPLY,
    MEMCACHED_VALUE_REPLY,
    closing_server,
    free_port,
    http_get,
    memcached_server,
    nginx_server,
    redis_server,
)
from tailwise.measure import serverstats
from tailwise.spec.target import Target


def _talk(port: int, request: bytes, until: bytes, timeout_s: float = 2.0) -> bytes:
    """Send on a new connection, read until the reply ends with ``until``."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        s.sendall(request)
        reply = b""
        while not reply.endswith(until):
            chunk = s.recv(65536)
            assert chunk, f"closed after {reply!r}"
            reply += chunk
        return reply


def _resp(*args: str) -> bytes:
    out = f"*{len(args)}\r\n"
    for a in args:
        out += f"${len(a.encode())}\r\n{a}\r\n"
    return out.encode()


def _is_gone(pid: int) -> bool:
    """Reaped: no /proc entry (a zombie or a live process still has one)."""
    return not os.path.exists(f"/proc/{pid}")


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    except ConnectionRefusedError:
        return True
    return False


# --------------------------------------------------------------------------- each server answers

def test_memcached_answers(memcached):
    assert memcached.url == f"memcached://127.0.0.1:{memcached.port}"
    assert memcached.udp_url is None
    assert _talk(memcached.port, b"version\r\n", b"\r\n").startswith(b"VERSION ")
    assert not _is_gone(memcached.pid)


def test_memcached_udp_answers_over_udp(memcached_udp):
    assert memcached_udp.udp_url == f"memcached+udp://127.0.0.1:{memcached_udp.port}"
    # memcached's UDP frame: request id, sequence number, datagram count, reserved.
    frame = struct.pack("!HHHH", 7, 0, 1, 0)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(2.0)
        u.sendto(frame + b"version\r\n", ("127.0.0.1", memcached_udp.port))
        reply = u.recv(2048)
    assert struct.unpack("!HHHH", reply[:8])[0] == 7
    assert reply[8:].startswith(b"VERSION ")


def test_memcached_options_are_applied():
    skip_unless_installed("memcached")
    with memcached_server(threads=2, memory_mb=16) as mc:
        stats = serverstats.fetch("memcached", mc.host, mc.port)
    assert stats["threads"] == 2
    assert stats["limit_maxbytes"] == 16 * 1024 * 1024


def test_redis_answers(redis):
    assert redis.url == f"redis://127.0.0.1:{redis.port}"
    assert _talk(redis.port, _resp("PING"), b"\r\n") == b"+PONG\r\n"
    # No persistence, and nothing written outside its temp dir.
    assert _talk(redis.port, _resp("CONFIG", "GET", "dir"), b"\r\n").count(redis.tmpdir.encode()) == 1


def test_nginx_fixed_has_content_length_and_keeps_alive(nginx):
    assert nginx.url == f"http://127.0.0.1:{nginx.port}/fixed"
    status, headers, body = http_get(nginx.port, "/fixed")
    assert status == 200 and headers["content-length"] == "200" and len(body) == 200
    # Two requests on one connection: keep-alive is on.
    req = f"GET /fixed HTTP/1.1\r\nHost: 127.0.0.1:{nginx.port}\r\n\r\n".encode()
    with socket.create_connection(("127.0.0.1", nginx.port), timeout=2.0) as s:
        for _ in range(2):
            s.sendall(req)
            reply = b""
            while not reply.endswith(nginx.body):
                reply += s.recv(65536)
            assert reply.startswith(b"HTTP/1.1 200")


def test_nginx_chunked(nginx):
    assert nginx.chunked_url == f"http://127.0.0.1:{nginx.port}/chunked"
    status, headers, body = http_get(nginx.port, "/chunked")
    assert status == 200
    assert headers["transfer-encoding"] == "chunked" and "content-length" not in headers
    assert body == nginx.body


def test_nginx_body_size():
    skip_unless_installed("nginx")
    with nginx_server(body_bytes=5000) as ng:
        status, headers, body = http_get(ng.port, "/fixed")
        assert (status, headers["content-length"], len(body)) == (200, "5000", 5000)
        assert http_get(ng.port, "/chunked")[2] == body


def test_udp_echo(udp_echo):
    assert udp_echo.url == f"udp://127.0.0.1:{udp_echo.port}" and udp_echo.pid is None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.settimeout(2.0)
        for i in range(3):
            u.sendto(b"ping %d" % i, ("127.0.0.1", udp_echo.port))
            assert u.recv(100) == b"ping %d" % i
    assert udp_echo.echoed == 3


# --------------------------------------------------------------------------- faulty servers

def test_garbage_server_answers_garbage(garbage):
    assert garbage.url_for("redis") == f"redis://127.0.0.1:{garbage.port}"
    assert garbage.url == f"memcached://127.0.0.1:{garbage.port}"
    assert _talk(garbage.port, b"get k\r\n", GARBAGE_REPLY) == GARBAGE_REPLY
    assert garbage.bytes_received == 7 and garbage.connections == 1


def test_closing_server_sends_a_partial_reply_then_closes(closing):
    with socket.create_connection(("127.0.0.1", closing.port), timeout=2.0) as s:
        s.sendall(b"get k\r\n")
        reply = b""
        while chunk := s.recv(65536):  # until EOF (a reset would raise)
            reply += chunk
    assert reply == MEMCACHED_VALUE_REPLY[:5] == b"VALUE"
    assert closing.replied == 1 and closing.bytes_received == 7


def test_closing_server_after_bytes():
    with closing_server(after_bytes=20) as srv, socket.create_connection(("127.0.0.1", srv.port), timeout=2.0) as s:
        s.sendall(b"get k\r\n")
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    assert reply == MEMCACHED_VALUE_REPLY[:20]


def test_silent_server_reads_but_never_answers(silent):
    with socket.create_connection(("127.0.0.1", silent.port), timeout=0.3) as s:
        s.sendall(b"get k\r\n")
        with pytest.raises(socket.timeout):
            s.recv(100)
    assert silent.bytes_received == 7


# --------------------------------------------------------------------------- stopping

@pytest.mark.parametrize("start", [memcached_server, redis_server, nginx_server])
def test_stopped_server_is_gone(start):
    skip_unless_installed({memcached_server: "memcached", redis_server: "redis-server"}.get(start, "nginx"))
    with start() as srv:
        pid, port, tmpdir = srv.pid, srv.port, srv.tmpdir
        os.kill(pid, signal.SIGSTOP)  # a stopped server must still be stopped for good
    assert srv.proc.returncode is not None
    assert _is_gone(pid), "reaped: no zombie left"
    assert _refused(port)
    assert not os.path.exists(tmpdir)
    assert srv.stop() == srv.proc.returncode  # idempotent


def test_server_stopped_even_when_the_test_fails():
    skip_unless_installed("memcached")
    pid = None
    with pytest.raises(ZeroDivisionError), memcached_server() as mc:
        pid = mc.pid
        1 / 0  # noqa: B018
    assert _is_gone(pid)


@pytest.mark.parametrize("start", [servers.udp_echo_server, servers.garbage_server, servers.closing_server,
                                   servers.silent_server])
def test_stopped_thread_server_is_gone(start):
    with start() as srv:
        port = srv.port
        if start is not servers.udp_echo_server:
            socket.create_connection(("127.0.0.1", port), timeout=1.0).close()
    assert all(not t.is_alive() for t in srv._threads)
    if start is not servers.udp_echo_server:
        assert _refused(port)


# --------------------------------------------------------------------------- startup

def test_free_port_is_bindable():
    port = free_port(udp_too=True)
    with socket.socket() as s, socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        s.bind(("127.0.0.1", port))
        u.bind(("127.0.0.1", port))


def test_taken_port_is_retried(monkeypatch):
    """A port taken between choosing and binding: the start moves on, and never adopts the other server."""
    skip_unless_installed("memcached")
    skip_unless_installed("nginx")
    with memcached_server() as other, socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen(1)
        real = servers.free_port
        ports = iter([other.port, squatter.getsockname()[1]])
        monkeypatch.setattr(servers, "free_port", lambda **kw: next(ports, None) or real(**kw))
        with memcached_server() as mc:
            assert mc.port not in (other.port, squatter.getsockname()[1])
            assert serverstats.fetch("memcached", mc.host, mc.port)["pid"] == mc.pid
        ports = iter([squatter.getsockname()[1]])
        with nginx_server() as ng:
            assert ng.port != squatter.getsockname()[1]
            assert http_get(ng.port)[0] == 200


def test_missing_binary_skips_or_fails_under_ci(monkeypatch):
    monkeypatch.setattr(servers, "find_binary", lambda name: None)
    monkeypatch.setenv("CI", "false")
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y nginx-light"):
        skip_unless_installed("nginx")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        skip_unless_installed("memcached")
    # The plain helpers, outside pytest, raise.
    with pytest.raises(FileNotFoundError, match="redis-server"), redis_server():
        pass


def test_failed_start_raises_with_the_servers_output():
    skip_unless_installed("memcached")
    expected = r"memcached did not start \(exited.*\n--- its output ---\n.*thread"
    with pytest.raises(RuntimeError, match=expected), memcached_server(threads=0):
        pass


# --------------------------------------------------------------------------- serverstats

def test_serverstats_memcached_counts(memcached):
    before = serverstats.fetch("memcached", memcached.host, memcached.port)
    assert isinstance(before["cmd_get"], int) and isinstance(before["rusage_user"], float)
    assert "version" not in before  # numbers only
    with socket.create_connection(("127.0.0.1", memcached.port), timeout=2.0) as s:
        for key in ("k1", "k2"):
            s.sendall(f"set {key} 0 0 3\r\nabc\r\n".encode())
            assert s.recv(100) == b"STORED\r\n"
        for key, hit in (("k1", True), ("k2", True), ("nope", False)):
            s.sendall(f"get {key}\r\n".encode())
            reply = b""
            while not reply.endswith(b"END\r\n"):
                reply += s.recv(100)
            assert reply.startswith(b"VALUE") == hit
    for scheme in ("memcached", "memcached+binary", "memcached+udp"):  # all read over TCP
        after = serverstats.fetch(scheme, memcached.host, memcached.port)
        block = serverstats.delta(scheme, before, after)
        assert block["source"] == "memcached stats"
        assert "error" not in block
        assert block["before"]["cmd_get"] == before["cmd_get"] and block["after"]["cmd_get"] == after["cmd_get"]
    # The last `after` followed 3 earlier stats connections (1 in before's count): our client + 3.
    assert block["delta"] == {"gets": 3, "sets": 2, "hits": 2, "misses": 1, "connections": 4}
    one_query = serverstats.delta("memcached", before, serverstats.fetch("memcached", memcached.host, memcached.port))
    assert one_query["delta"]["connections"] == 5


def test_serverstats_redis_counts(redis):
    before = serverstats.fetch("redis", redis.host, redis.port)
    assert before["cmdstat_get_calls"] == before["cmdstat_set_calls"] == 0  # never called: listed as 0
    assert isinstance(before["redis_version"], str) and isinstance(before["connected_clients"], int)
    with socket.create_connection(("127.0.0.1", redis.port), timeout=2.0) as s:
        for key in ("k1", "k2"):
            s.sendall(_resp("SET", key, "abc"))
            assert s.recv(100) == b"+OK\r\n"
        for key, reply in (("k1", b"$3\r\nabc\r\n"), ("k2", b"$3\r\nabc\r\n"), ("nope", b"$-1\r\n")):
            s.sendall(_resp("GET", key))
            got = b""
            while len(got) < len(reply):
                got += s.recv(100)
            assert got == reply
        after = serverstats.fetch("redis", redis.host, redis.port)
        assert after["connected_clients"] == 2  # our client and the INFO connection
    for key in ("keyspace_hits", "keyspace_misses", "total_commands_processed", "total_connections_received",
                "cmdstat_get_usec", "db0_keys"):
        assert isinstance(after[key], int), key
    block = serverstats.delta("redis", before, after)
    assert block["source"] == "redis INFO" and "error" not in block
    assert block["delta"] == {"gets": 3, "sets": 2, "hits": 2, "misses": 1, "connections": 2}
    assert set(block["after"]) >= {"cmdstat_get_calls", "keyspace_hits", "total_connections_received",
                                   "connected_clients", "total_commands_processed"}


def test_serverstats_fetch_all_and_compare_all(memcached, redis):
    mc_tcp = Target("memcached", memcached.host, memcached.port)
    mc_udp = Target("memcached+udp", memcached.host, memcached.port)  # the same server: read once
    rd = Target("redis", redis.host, redis.port)
    http = Target("http", "127.0.0.1", 1, "/fixed")
    before = serverstats.fetch_all([mc_tcp, mc_udp, rd, http])
    assert before[0] is before[1] and before[2]["cmdstat_get_calls"] == 0 and before[3] is None
    _talk(memcached.port, b"get a\r\nget b\r\n", b"END\r\nEND\r\n")
    _talk(redis.port, _resp("GET", "a"), b"\r\n")

    one = serverstats.compare_all([mc_tcp, http], [before[0], None], {"gets": 2, "sets": 0, "hits": 0, "misses": 2})
    assert one["target"] == mc_tcp.url and one["source"] == "memcached stats"
    assert one["agrees"] is True and one["ours"]["gets"] == 2 and one["delta"]["gets"] == 2

    both = serverstats.compare_all([mc_tcp, mc_udp, rd], before[:3], {"gets": 3, "sets": 0, "hits": 0, "misses": 3})
    assert [b["target"] for b in both["targets"]] == [mc_tcp.url, rd.url]
    assert both["source"] == "memcached stats + redis INFO" and both["agrees"] is True
    assert both["delta"]["gets"] == 3 and both["delta"]["misses"] == 3

    wrong = serverstats.compare_all([rd], [before[2]], {"gets": 5, "sets": 0, "hits": 0, "misses": 5})
    assert wrong["agrees"] is False
    assert serverstats.compare_all([http], [None], {"gets": 1}) is None


def test_serverstats_other_schemes_have_none():
    assert serverstats.fetch("http", "127.0.0.1", 1) is None
    assert serverstats.fetch("synthetic", "127.0.0.1", 1) is None
    with pytest.raises(ValueError):
        serverstats.delta("http", {}, {})


def test_serverstats_failures_are_reported_not_raised(garbage, closing, silent):
    port = free_port()
    assert "refused" in serverstats.fetch("memcached", "127.0.0.1", port)["error"]
    assert "refused" in serverstats.fetch("redis", "127.0.0.1", port)["error"]
    assert "unexpected reply" in serverstats.fetch("memcached", "127.0.0.1", garbage.port)["error"]
    assert "not a redis reply" in serverstats.fetch("redis", "127.0.0.1", garbage.port)["error"]
    assert "closed after" in serverstats.fetch("memcached", "127.0.0.1", closing.port)["error"]
    t0 = time.monotonic()
    err = serverstats.fetch("redis", "127.0.0.1", silent.port, timeout_s=0.3)["error"]
    assert "did not answer within 0.3 s" in err and time.monotonic() - t0 < 1.0
    assert "error" in serverstats.fetch("memcached", "no-such-host.invalid", 11211, timeout_s=0.5)


def test_serverstats_against_the_wrong_server(memcached, redis):
    assert "error" in serverstats.fetch("redis", memcached.host, memcached.port, timeout_s=0.5)
    assert "error" in serverstats.fetch("memcached", redis.host, redis.port, timeout_s=0.5)


def test_serverstats_delta_with_failed_or_restarted_readings():
    good = {"cmd_get": 5, "cmd_set": 1, "get_hits": 4, "get_misses": 1, "total_connections": 10, "uptime": 9,
            "pid": 100}
    failed = serverstats.delta("memcached", good, {"error": "connection refused"})
    assert failed["delta"] == dict.fromkeys(("gets", "sets", "hits", "misses", "connections"))
    assert failed["error"] == "after: connection refused"
    assert serverstats.delta("memcached", None, good)["error"].startswith("cmd_get, cmd_set")
    restarted = serverstats.delta("memcached", good, {**good, "cmd_get": 9, "uptime": 2})
    assert restarted["delta"]["gets"] is None and "restarted" in restarted["error"]
    new_pid = serverstats.delta("memcached", good, {**good, "pid": 101})
    assert new_pid["delta"]["gets"] is None and "restarted" in new_pid["error"]
    backwards = serverstats.delta("memcached", good, {**good, "cmd_get": 1})
    assert backwards["delta"]["gets"] is None and backwards["delta"]["sets"] == 0
    assert "cmd_get" in backwards["error"]


def test_the_plugin_brings_the_fixtures(request):
    """tests/conftest.py loads support.plugin (``pytest_plugins``, no star import): every server
    fixture is registered for every test, and the conftest itself defines none."""
    plugin = request.config.pluginmanager.get_plugin("support.plugin")
    assert plugin is not None, "tests/conftest.py does not load support.plugin"
    assert all(callable(getattr(plugin, name)) for name in FIXTURES)
    conftest = request.config.pluginmanager.get_plugin(str(Path(__file__).resolve().parents[1] / "conftest.py"))
    assert conftest is not None and not any(hasattr(conftest, name) for name in FIXTURES)
