"""`tailwise serve`: prints its address, speaks memcached ASCII too, stops cleanly on signals."""

import signal
import socket

import pytest
from support.cli import start_serve


def _ask(addr: str, payload: bytes, want_end: bytes) -> bytes:
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(payload)
        buf = b""
        while not buf.endswith(want_end):
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        return buf


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_answers_memcached_and_stops_on_signal(sig):
    srv = start_serve("--service", "exp:5us", "--workers", "2")
    try:
        got = _ask(srv.addr, b"set k 0 0 5\r\nhello\r\nget k\r\n", b"END\r\n")
        assert got == b"STORED\r\nVALUE k 0 5\r\nhello\r\nEND\r\n"
        assert _ask(srv.addr, b"version\r\n", b"\r\n").startswith(b"VERSION tailwise")
    finally:
        code = srv.stop(sig)
    assert code == 0
    rest = srv.proc.stdout.read()
    assert "stopped after 3 requests" in rest, rest


def test_bad_service_is_refused_before_listening():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "tailwise", "serve", "--service", "pareto:1us"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "unknown distribution 'pareto'" in r.stderr
