"""Real servers over TLS for issue 36's tests, each with certificates the test makes (trustme): a
CA, a server certificate for localhost and 127.0.0.1 signed by it, a client certificate, and a
stranger CA that signed none of them.

nginx over HTTPS (``keepalive_requests`` configurable; every request logged with its custom
headers and body length; a variant that asks for a client certificate, ``ssl_verify_client on``),
redis-server on ``--tls-port`` only, memcached ``-Z`` — each on a free port, checked to be ours
over TLS by Python's ``ssl`` module, always stopped (servers.py's ``_start_process``).
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from support.servers import HOST, ProcessServer, _body, _exchange, _require, _send_and_read, _start_process, resp


@dataclass(frozen=True)
class Pki:
    """PEM files in one directory: ``ca`` (trusted), ``cert``/``key`` (the servers', for localhost
    and 127.0.0.1), ``client_cert``/``client_key`` (a client's, signed by ``ca``), ``stranger``
    (a CA that signed nothing here: a wrong --tls-ca)."""

    ca: Path
    cert: Path
    key: Path
    client_cert: Path
    client_key: Path
    stranger: Path


def make_pki(where: Path) -> Pki:
    import trustme

    where.mkdir(parents=True, exist_ok=True)
    ca, stranger = trustme.CA(), trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("tailwise-client@example.com")
    paths = {name: where / f"{name}.pem" for name in ("ca", "cert", "key", "client_cert", "client_key", "stranger")}
    ca.cert_pem.write_to_path(str(paths["ca"]))
    stranger.cert_pem.write_to_path(str(paths["stranger"]))
    # The chain, the server's own certificate first.
    paths["cert"].write_bytes(b"".join(blob.bytes() for blob in server.cert_chain_pems))
    server.private_key_pem.write_to_path(str(paths["key"]))
    paths["client_cert"].write_bytes(b"".join(blob.bytes() for blob in client.cert_chain_pems))
    client.private_key_pem.write_to_path(str(paths["client_key"]))
    for name in ("key", "client_key"):
        paths[name].chmod(0o600)
    return Pki(**paths)


def client_context(pki: Pki, with_cert: bool = False) -> ssl.SSLContext:
    """Python's TLS client trusting ``pki.ca`` (with the client certificate when asked)."""
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    if with_cert:
        ctx.load_cert_chain(str(pki.client_cert), str(pki.client_key))
    return ctx


def tls_exchange(port: int, request: bytes, done: Callable[[bytes], bool], ctx: ssl.SSLContext,
                 timeout_s: float = 1.0, host: str = HOST, name: str = "localhost") -> bytes:
    """Send ``request`` over a new TLS connection (verifying ``name``); read until ``done(reply)``
    or EOF; bounded in time."""
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        with ctx.wrap_socket(raw, server_hostname=name) as s:
            return _send_and_read(s, request, done, deadline)


def memcached_stats(port: int, ctx: ssl.SSLContext) -> dict[str, str]:
    raw = tls_exchange(port, b"stats\r\n", lambda b: b.endswith(b"END\r\n"), ctx)
    return {p[1]: p[2] for p in (line.split(" ", 2) for line in raw.decode("latin-1").split("\r\n"))
            if len(p) == 3 and p[0] == "STAT"}


def redis_info(port: int, ctx: ssl.SSLContext, section: str = "commandstats") -> dict[str, str]:
    """INFO SECTION over TLS as key → value."""
    cmd = f"*2\r\n$4\r\nINFO\r\n${len(section)}\r\n{section}\r\n".encode()
    raw = tls_exchange(port, cmd, _bulk_done, ctx)
    out = {}
    for line in raw.decode("latin-1").split("\r\n")[1:]:
        k, sep, v = line.partition(":")
        if sep:
            out[k] = v
    return out


def _bulk_done(b: bytes) -> bool:
    head, _, rest = b.partition(b"\r\n")
    return head.startswith(b"$") and len(rest) >= int(head[1:]) + 2


# --------------------------------------------------------------------------- nginx over HTTPS

_NGINX_TLS_CONF = """\
daemon off;
master_process off;
worker_processes 1;
error_log {tmp}/error.log;
pid {tmp}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    default_type text/plain;
    # Every request as nginx read it: method, URI, the custom headers the tests send, the body's
    # length, whether the TLS session was reused (r: resumed, .: full) and the client certificate's check.
    log_format requests '$request_method $request_uri x_test=$http_x_test x_tailwise=$http_x_tailwise '
                        'body=$content_length len=$request_length reused=$ssl_session_reused verify=$ssl_client_verify';
{access_log}{keepalive}    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen {host}:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        # Resumption: TLS 1.3 tickets (and 1.2 session ids from the cache).
        ssl_session_cache shared:tls:1m;
        ssl_session_tickets on;
{verify}        root {tmp}/html;
        location = /fixed {{ }}
        # Any method, its body read and dropped.
        location = /echo {{ return 200 "ok\\n"; }}
    }}
}}
"""


@contextmanager
def nginx_tls_server(pki: Pki, *, keepalive_requests: int | None = None, verify_client: bool = False,
                     body_bytes: int = 200, access_log: bool = True) -> Iterator[ProcessServer]:
    """nginx over HTTPS on a free port with ``pki``'s server certificate: ``/fixed`` (``body_bytes``),
    ``/echo`` (any method, ``ok``); every request in ``requests.log`` (``.requests()``). With
    ``verify_client``, a client certificate signed by ``pki.ca`` is required. ``.url`` is the
    ``/fixed`` https URL, ``.base_url`` without the path. Without ``access_log`` nothing is logged,
    as servers.nginx_server logs nothing for ``/fixed``: a benchmark compares the two, and a log
    line costs nginx a write a request."""
    binary = _require("nginx")
    body = _body(body_bytes)
    keepalive = f"    keepalive_requests {keepalive_requests};\n" if keepalive_requests else ""
    verify = (f"        ssl_verify_client on;\n        ssl_client_certificate {pki.ca};\n" if verify_client else "")
    log = "    access_log {tmp}/requests.log requests;\n" if access_log else "    access_log off;\n"

    def prepare(port: int, tmp: str) -> None:
        os.makedirs(os.path.join(tmp, "html"))
        with open(os.path.join(tmp, "html", "fixed"), "wb") as f:
            f.write(body)
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(_NGINX_TLS_CONF.format(tmp=tmp, host=HOST, port=port, keepalive=keepalive, verify=verify,
                                           cert=pki.cert, key=pki.key, access_log=log.format(tmp=tmp)))

    def argv(_port: int, tmp: str) -> list[str]:
        return [binary, "-p", tmp + "/", "-c", os.path.join(tmp, "nginx.conf"), "-e", os.path.join(tmp, "error.log")]

    ctx = client_context(pki, with_cert=verify_client)

    def is_ours(s: ProcessServer) -> bool:
        with open(os.path.join(s.tmpdir, "nginx.pid")) as f:
            if f.read().strip() != str(s.pid):
                return False
        req = f"GET /fixed HTTP/1.1\r\nHost: localhost:{s.port}\r\nConnection: close\r\n\r\n".encode()
        got = tls_exchange(s.port, req, lambda b: False, ctx)
        return got.startswith(b"HTTP/1.1 200") and got.endswith(body)

    server = _start_process("nginx-tls", argv, is_ours, lambda p: f"https://localhost:{p}/fixed", prepare=prepare)
    server.base_url = f"https://localhost:{server.port}"
    server.body = body

    def requests(at_least: int = 0, wait_s: float = 5.0) -> list[str]:
        """requests.log's lines (those of the readiness check included), waiting (bounded) for
        ``at_least`` of them: nginx writes a request's line when it has finished with it."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                lines = Path(server.tmpdir, "requests.log").read_text().splitlines()
            except FileNotFoundError:
                lines = []
            if len(lines) >= at_least or time.monotonic() > deadline:
                return lines
            time.sleep(0.02)

    server.requests = requests
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- redis over TLS

@contextmanager
def redis_tls_server(pki: Pki, password: str | None = None) -> Iterator[ProcessServer]:
    """redis-server with TLS only (``--port 0 --tls-port``), clients not asked for certificates;
    ``password``: ``--requirepass`` (``.password``; None: no AUTH)."""
    binary = _require("redis-server")
    ctx = client_context(pki)

    def argv(port: int, tmp: str) -> list[str]:
        return [binary, "--port", "0", "--tls-port", str(port), "--bind", HOST, "--tls-cert-file", str(pki.cert),
                "--tls-key-file", str(pki.key), "--tls-ca-cert-file", str(pki.ca), "--tls-auth-clients", "no",
                "--save", "", "--appendonly", "no", "--daemonize", "no", "--protected-mode", "no", "--dir", tmp,
                "--logfile", "", *(["--requirepass", password] if password else [])]

    def is_ours(s: ProcessServer) -> bool:
        info = redis_call(s.port, ctx, "INFO", "server", password=password)
        return f"process_id:{s.pid}\r\n".encode() in info

    server = _start_process("redis-tls", argv, is_ours, lambda p: f"redis+tls://localhost:{p}")
    server.password = password
    try:
        yield server
    finally:
        server.stop()


def redis_call(port: int, ctx: ssl.SSLContext | None, *words: str, password: str | None = None, db: int | None = None,
               timeout_s: float = 5.0) -> bytes:
    """One command on a connection of the test's own (over TLS with ``ctx``, else in the clear),
    after ``AUTH password`` and ``SELECT db`` when given (each answered +OK): its reply, a bulk's
    bytes or the line."""
    first = (resp("AUTH", password) if password is not None else b"") + (resp("SELECT", str(db)) if db is not None else b"")
    skip = (password is not None) + (db is not None)  # one +OK per command said first

    def after_ok(b: bytes) -> bytes | None:
        for _ in range(skip):
            line, sep, b = b.partition(b"\r\n")
            if not sep:
                return None
            assert line == b"+OK", line
        return b

    def done(b: bytes) -> bool:
        rest = after_ok(b)
        return rest is not None and (_bulk_done(rest) or (rest[:1] in (b"+", b"-", b":") and rest.endswith(b"\r\n")))

    request = first + resp(*words)
    raw = (_exchange(port, request, done, timeout_s) if ctx is None
           else tls_exchange(port, request, done, ctx, timeout_s))
    rest = after_ok(raw) or b""
    head, _, body = rest.partition(b"\r\n")
    return body[:int(head[1:])] if head.startswith(b"$") else head


# --------------------------------------------------------------------------- memcached -Z

def memcached_tls_support() -> str | None:
    """Why this memcached cannot serve TLS (None: it can): Debian's is built with it."""
    import subprocess

    binary = _require("memcached")
    text = subprocess.run([binary, "-h"], capture_output=True, text=True, timeout=30).stdout
    if "--enable-ssl" not in text or "ssl_chain_cert" not in text:
        return f"{binary} is built without TLS (no -Z/--enable-ssl in `memcached -h`)"
    return None


@contextmanager
def memcached_tls_server(pki: Pki, threads: int = 1, memory_mb: int = 64) -> Iterator[ProcessServer]:
    """memcached with every listener over TLS (``-Z``), the server certificate and key from ``pki``."""
    binary = _require("memcached")
    as_root = ["-u", "root"] if os.geteuid() == 0 else []
    ctx = client_context(pki)

    def argv(port: int, _tmp: str) -> list[str]:
        return [binary, "-l", HOST, "-p", str(port), "-U", "0", "-t", str(threads), "-m", str(memory_mb), "-Z",
                "-o", f"ssl_chain_cert={pki.cert},ssl_key={pki.key}", *as_root]

    def is_ours(s: ProcessServer) -> bool:
        return memcached_stats(s.port, ctx).get("pid") == str(s.pid)

    server = _start_process("memcached-tls", argv, is_ours, lambda p: f"memcached+tls://localhost:{p}",
                            stop_signal=signal.SIGKILL)
    try:
        yield server
    finally:
        server.stop()
