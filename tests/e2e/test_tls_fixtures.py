"""The TLS servers the tests start (tests/support/tls_servers.py) do what test_tls.py relies on,
checked with Python's ``ssl`` module: each answers over TLS with the test's certificate and
refuses a client that trusts another CA; nginx logs custom headers and body lengths and asks for
client certificates when told; `tailwise serve --tls-cert/--tls-key` answers synthetic and
memcached requests over TLS and resumes sessions; the target's own counts (serverstats) are read
over TLS as a run reads them."""

from __future__ import annotations

import socket
import ssl
import struct

import pytest

from support.tls_servers import client_context, memcached_stats, redis_info, tls_exchange
from tailwise.measure import serverstats
from tailwise.spec.tls import TlsSpec

PING = b"*1\r\n$4\r\nPING\r\n"


def spec_for(pki, **kw) -> TlsSpec:
    """What a run's --tls-ca names (spec/tls.py), as serverstats reads the target's counts with it."""
    return TlsSpec(**{"ca_file": str(pki.ca), "insecure": False, "cert_file": None, "key_file": None,
                      "sni": "localhost", "alpn": (), "resume": True, **kw})


def test_a_client_trusting_another_ca_is_refused_by_name(pki, redis_tls):
    stranger = ssl.create_default_context(cafile=str(pki.stranger))
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        tls_exchange(redis_tls.port, PING, lambda b: b.endswith(b"\r\n"), stranger)


def test_redis_serves_tls_only_and_counts_what_it_is_sent(pki, redis_tls):
    ctx = client_context(pki)
    assert tls_exchange(redis_tls.port, PING, lambda b: b.endswith(b"\r\n"), ctx) == b"+PONG\r\n"
    assert int(redis_info(redis_tls.port, ctx)["cmdstat_ping"].split("calls=")[1].split(",")[0]) == 1
    with socket.create_connection(("127.0.0.1", redis_tls.port), timeout=2) as s:  # plaintext: no answer
        s.sendall(PING)
        s.settimeout(1.0)
        try:
            assert not s.recv(64).startswith(b"+PONG")
        except (TimeoutError, ConnectionResetError):
            pass
    # What a run reads before and after (the summary's target_stats), over TLS as the run's own.
    stats = serverstats.fetch("redis", "127.0.0.1", redis_tls.port, tls=spec_for(pki))
    assert "error" not in stats and stats["process_id"] == redis_tls.pid
    refused = serverstats.fetch("redis", "127.0.0.1", redis_tls.port, tls=spec_for(pki, ca_file=str(pki.stranger)))
    assert "certificate verify failed" in refused["error"]


def test_memcached_serves_tls_and_its_stats_are_read_over_it(pki, memcached_tls):
    ctx = client_context(pki)
    got = tls_exchange(memcached_tls.port, b"set k 0 0 1\r\nv\r\nget k\r\n", lambda b: b.endswith(b"END\r\n"), ctx)
    assert got == b"STORED\r\nVALUE k 0 1\r\nv\r\nEND\r\n"
    assert memcached_stats(memcached_tls.port, ctx)["cmd_set"] == "1"
    # An IP target sends no SNI: the certificate's IP address is what is verified.
    stats = serverstats.fetch("memcached", "127.0.0.1", memcached_tls.port, tls=spec_for(pki, sni=None))
    assert stats["cmd_get"] == 1 and stats["pid"] == memcached_tls.pid


def test_nginx_over_https_logs_custom_headers_and_body_lengths(pki, nginx_tls):
    n = nginx_tls()
    req = (f"POST /echo HTTP/1.1\r\nHost: localhost:{n.port}\r\nX-Test: one\r\nX-Tailwise: two\r\n"
           "Content-Length: 5\r\nConnection: close\r\n\r\nhello").encode()
    got = tls_exchange(n.port, req, lambda b: False, client_context(pki))
    assert got.startswith(b"HTTP/1.1 200") and got.endswith(b"ok\n")
    assert "POST /echo x_test=one x_tailwise=two body=5" in n.requests(at_least=2)[-1]


def test_nginx_asks_for_a_client_certificate_when_told(pki, nginx_tls):
    n = nginx_tls(verify_client=True)
    req = f"GET /fixed HTTP/1.1\r\nHost: localhost:{n.port}\r\nConnection: close\r\n\r\n".encode()
    assert tls_exchange(n.port, req, lambda b: False, client_context(pki)).startswith(b"HTTP/1.1 400")
    assert tls_exchange(n.port, req, lambda b: False, client_context(pki, with_cert=True)).startswith(b"HTTP/1.1 200")
    logged = n.requests(at_least=3)
    assert logged[-2].endswith("verify=NONE") and logged[-1].endswith("verify=SUCCESS")


def test_nginx_resumes_sessions_and_closes_after_its_keepalive_limit(pki, nginx_tls):
    n = nginx_tls(keepalive_requests=3)
    ctx = client_context(pki)
    session = None
    for _ in range(2):
        with socket.create_connection(("127.0.0.1", n.port), timeout=2) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
                got = b""
                s.sendall(f"GET /fixed HTTP/1.1\r\nHost: localhost:{n.port}\r\n\r\n".encode() * 4)
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                assert got.count(b"HTTP/1.1 200") == 3  # the third reply closes the connection
                session = s.session
    logged = n.requests(at_least=7)
    assert logged[-1].split("reused=")[1].startswith("r"), logged


def test_serve_answers_synthetic_and_memcached_requests_over_tls(pki, serve_tls):
    ctx = client_context(pki)
    port = int(serve_tls.addr.rsplit(":", 1)[1])
    # The synthetic protocol (protocol/synthetic.rs): magic, service_ns (0), reply pad, 0, id.
    req = bytes([0xA7, ord("T"), ord("W"), 0x01]) + struct.pack("<IIIQ", 0, 0, 0, 42)
    reply = tls_exchange(port, req, lambda b: len(b) >= 24, ctx)
    assert reply[:4] == req[:4] and struct.unpack("<Q", reply[16:24])[0] == 42
    assert tls_exchange(port, b"version\r\n", lambda b: b.endswith(b"\r\n"), ctx).startswith(b"VERSION")
    with socket.create_connection(("127.0.0.1", port), timeout=2) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(b"set a 0 0 2\r\nhi\r\nget a\r\n")
            got = b""
            while not got.endswith(b"END\r\n"):
                got += s.recv(4096)
            assert got == b"STORED\r\nVALUE a 0 2\r\nhi\r\nEND\r\n"
            first = s.session
    with socket.create_connection(("127.0.0.1", port), timeout=2) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost", session=first) as s:
            s.sendall(b"get a\r\n")
            got = b""
            while not got.endswith(b"END\r\n"):
                got += s.recv(4096)
            assert s.session_reused, "the built-in server resumes a session (its tickets)"
