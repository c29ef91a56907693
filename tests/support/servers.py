"""Real servers for the tests: Debian memcached / redis / nginx, and small Python faulty servers.

Every helper starts its server on a free 127.0.0.1 port, waits (at most ``STARTUP_DEADLINE_S``)
until it answers, and is a context manager that always stops it. Each returns an object with
``.host``, ``.port``, ``.url`` (``scheme://127.0.0.1:PORT``), ``.pid`` (the server process, for
SIGSTOP tests; ``None`` for the Python thread servers, which run in the test process) and
``.stop()``.

A started process is checked to be *ours* (memcached ``stats`` pid, redis ``INFO`` process_id,
nginx pid file) before it is handed out, so a port taken by someone else between choosing it and
binding it can never pass for our server: the start is retried on another port instead.

Processes run in their own process group; ``stop()`` signals the group (SIGTERM, with SIGCONT so a
SIGSTOPped server can act on it, then SIGKILL) and reaps the process. An ``atexit`` hook stops any
server still running when the interpreter exits, so nothing outlives a crashed test session.

The helpers need no pytest: the fixtures that wrap them (``memcached``, ``redis``, …, skipping when
the Debian binary is missing unless ``CI=true``) are in tests/support/plugin.py.
"""

from __future__ import annotations

import atexit
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Self

__all__ = [  # noqa: RUF022 - grouped by kind, not sorted
    "HOST", "STARTUP_DEADLINE_S", "GARBAGE_REPLY", "MEMCACHED_VALUE_REPLY",
    "ProcessServer", "UdpEchoServer", "FaultyTcpServer",
    "find_binary", "free_port", "http_get", "in_ci",
    "memcached_server", "redis_server", "resp", "nginx_server", "udp_echo_server",
    "garbage_server", "closing_server", "silent_server",
]

HOST = "127.0.0.1"
#: Bound on every startup, retries included.
STARTUP_DEADLINE_S = 10.0
#: Bound on a graceful stop before SIGKILL.
STOP_GRACE_S = 3.0
#: Starts retried on a fresh port when the chosen one was taken meanwhile.
PORT_ATTEMPTS = 4
#: Bound on one readiness probe: short, so that a port squatter that accepts but never answers
#: does not hide for long the bind error our server has meanwhile logged (probes are repeated).
PROBE_TIMEOUT_S = 0.25

#: What ``garbage_server`` answers to anything: no protocol's reply starts with NUL.
GARBAGE_REPLY = b"\x00\xffGARBAGE\r\n" + random.Random(20240601).randbytes(54)
#: A valid memcached text reply to ``get k``; ``closing_server`` sends only its first bytes.
MEMCACHED_VALUE_REPLY = b"VALUE k 0 200\r\n" + b"x" * 200 + b"\r\nEND\r\n"


# --------------------------------------------------------------------------- small helpers

def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def find_binary(name: str) -> str | None:
    """The binary on PATH, or in the sbin directories a non-root PATH may lack."""
    found = shutil.which(name)
    if found:
        return found
    for d in ("/usr/sbin", "/sbin", "/usr/local/sbin"):
        candidate = os.path.join(d, name)
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def free_port(host: str = HOST, udp_too: bool = False) -> int:
    """A port free now (bind port 0, read it, close). With ``udp_too``, free for UDP as well.

    Another process can still take it before our server binds it: the starters below retry.
    """
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if not udp_too:
            return port
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
                u.bind((host, port))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port found for both TCP and UDP after 50 tries")


def _exchange(port: int, request: bytes, done: Callable[[bytes], bool], timeout_s: float = 1.0,
              host: str = HOST) -> bytes:
    """Send ``request`` on a new connection; read until ``done(reply)`` or EOF; bounded in time."""
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        return _send_and_read(s, request, done, deadline)


def _send_and_read(s: socket.socket, request: bytes, done: Callable[[bytes], bool], deadline: float) -> bytes:
    """Send ``request`` on ``s`` (a plain or TLS socket); read until ``done(reply)``, EOF or
    ``deadline`` (time.monotonic)."""
    s.sendall(request)
    buf = b""
    while not done(buf):
        s.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
    return buf


def http_get(port: int, path: str = "/fixed", host: str = HOST, timeout_s: float = 2.0
             ) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 GET (Connection: close) → (status, lower-cased headers, decoded body)."""
    request = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
    raw = _exchange(port, request, lambda b: False, timeout_s, host)  # until the server closes
    head, sep, body = raw.partition(b"\r\n\r\n")
    if not sep:
        raise ValueError(f"incomplete HTTP reply: {raw[:200]!r}")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _dechunk(body)
    return status, headers, body


def _dechunk(data: bytes) -> bytes:
    out, pos = b"", 0
    while True:
        eol = data.index(b"\r\n", pos)
        size = int(data[pos:eol].split(b";")[0], 16)
        if size == 0:
            return out
        out += data[eol + 2: eol + 2 + size]
        pos = eol + 2 + size + 2


# --------------------------------------------------------------------------- processes

_LIVE: set = set()  # servers not yet stopped, for the atexit hook
_LIVE_LOCK = threading.Lock()


def _stop_all_at_exit() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for server in live:
        try:
            server.stop()
        except Exception:  # noqa: BLE001, S110 - best effort at interpreter exit
            pass


atexit.register(_stop_all_at_exit)


class ProcessServer:
    """A server process in its own process group, with its temp dir and its output log."""

    def __init__(self, name: str, proc: subprocess.Popen, port: int, url: str, tmpdir: str, log_path: str,
                 stop_signal: int = signal.SIGTERM):
        self.name = name
        self.stop_signal = stop_signal
        self.proc = proc
        self.host = HOST
        self.port = port
        self.url = url
        self.tmpdir = tmpdir
        self.log_path = log_path
        #: redis: the default user's password (redis_server's ``password``), None without.
        self.password: str | None = None
        with _LIVE_LOCK:
            _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_text(self, limit_chars: int = 4000) -> str:
        """The end of its stdout/stderr, and of nginx's error.log when there is one."""
        text = ""
        for path in (self.log_path, os.path.join(self.tmpdir, "error.log")):
            try:
                with open(path, errors="replace") as f:
                    text += f.read()
            except OSError:
                pass
        return text[-limit_chars:]

    def stop(self) -> int:
        """Stop and reap the process (idempotent); return its exit status."""
        try:
            if self.proc.poll() is None:
                self._signal_group(self.stop_signal)
                self._signal_group(signal.SIGCONT)  # a SIGSTOPped server must wake to act on TERM
                try:
                    self.proc.wait(STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    # Not reaped yet, so the group id cannot have been reused.
                    self._signal_group(signal.SIGKILL)
                    self.proc.wait()
            return self.proc.returncode
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self)
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<{self.name} {self.url} pid={self.pid}>"


def _start_process(name: str, make_argv: Callable[[int, str], list[str]], is_ours: Callable[[ProcessServer], bool],
                   make_url: Callable[[int], str], udp_too: bool = False,
                   prepare: Callable[[int, str], None] | None = None,
                   stop_signal: int = signal.SIGTERM, port: int | None = None) -> ProcessServer:
    """Start ``make_argv(port, tmpdir)`` on a free port until ``is_ours(server)``; retry on port clashes.
    With ``port`` (a restart on the port of a server just stopped), that port only.

    ``is_ours`` returns True once the server answers *and* is the process we started; it may raise
    OSError/ValueError while the server is still starting.
    """
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    last_log = ""
    fixed_port = port
    for _attempt in range(PORT_ATTEMPTS):
        port = fixed_port or free_port(udp_too=udp_too)
        tmpdir = tempfile.mkdtemp(prefix=f"tailwise-{name}-")
        log_path = os.path.join(tmpdir, "output.log")
        argv = make_argv(port, tmpdir)
        launch = [*_die_with_parent(), *argv]
        try:
            if prepare is not None:
                prepare(port, tmpdir)
            with open(log_path, "wb") as log:
                proc = subprocess.Popen(launch, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        cwd=tmpdir, start_new_session=True)
        except BaseException:
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise
        server = ProcessServer(name, proc, port, make_url(port), tmpdir, log_path, stop_signal)
        outcome = _wait_ready(server, is_ours, deadline)
        if outcome == "ready":
            return server
        last_log = server.log_text()
        server.stop()
        if outcome == "port-taken" and time.monotonic() < deadline:
            if fixed_port:
                time.sleep(0.05)  # the old server's socket may linger a moment
            continue
        why = {"exited": f"exited with status {proc.returncode}",
               "timeout": f"did not answer within {STARTUP_DEADLINE_S:g} s",
               "port-taken": "could not get a free port"}[outcome]
        raise RuntimeError(f"{name} did not start ({why}): {' '.join(argv)}\n--- its output ---\n{last_log}")
    raise RuntimeError(f"{name} did not start: port taken on {PORT_ATTEMPTS} tries\n--- its output ---\n{last_log}")


def _die_with_parent() -> list[str]:
    """``setpriv --pdeathsig KILL --``: the kernel kills the server if the test process dies
    without stopping it (SIGKILL, a CI timeout), which no finally block or atexit hook survives.

    setpriv execs the server, so the pid stays the server's. The signal fires when the *thread*
    that started the server ends, so it is used only from the main thread.
    """
    setpriv = find_binary("setpriv")  # util-linux: on every Debian
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return []
    return [setpriv, "--pdeathsig", "KILL", "--"]


def _wait_ready(server: ProcessServer, is_ours: Callable[[ProcessServer], bool], deadline: float) -> str:
    """'ready', 'port-taken', 'exited' or 'timeout'."""
    while time.monotonic() < deadline:
        exited = server.proc.poll() is not None
        log = server.log_text()
        if "Address already in use" in log or "address already in use" in log:
            return "port-taken"  # nginx keeps retrying bind() for 2.5 s: do not wait for it
        if exited:
            return "exited"
        try:
            if is_ours(server):
                return "ready"
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    return "timeout"


def _require(binary: str) -> str:
    path = find_binary(binary)
    if path is None:
        raise FileNotFoundError(f"'{binary}' is not installed (Debian: apt-get install -y "
                                f"{'nginx-light' if binary == 'nginx' else binary})")
    return path


# --------------------------------------------------------------------------- memcached

def _memcached_stats(port: int) -> dict[str, str]:
    raw = _exchange(port, b"stats\r\n", lambda b: b.endswith(b"END\r\n"), PROBE_TIMEOUT_S)
    stats = {}
    for line in raw.decode("latin-1").split("\r\n"):
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "STAT":
            stats[parts[1]] = parts[2]
    return stats


@contextmanager
def memcached_server(udp: bool = False, threads: int = 1, memory_mb: int = 64,
                     port: int | None = None) -> Iterator[ProcessServer]:
    """memcached on a free port (TCP; UDP on the same port when ``udp``); ``.udp_url`` when ``udp``.
    With ``port``, on that port (a restart)."""
    binary = _require("memcached")
    as_root = ["-u", "root"] if os.geteuid() == 0 else []  # memcached refuses to run as root without -u

    def argv(port: int, _tmp: str) -> list[str]:
        return [binary, "-l", HOST, "-p", str(port), "-U", str(port if udp else 0),
                "-t", str(threads), "-m", str(memory_mb), *as_root]

    def is_ours(s: ProcessServer) -> bool:
        version = _exchange(s.port, b"version\r\n", lambda b: b.endswith(b"\r\n"), PROBE_TIMEOUT_S)
        if not version.startswith(b"VERSION "):
            raise ValueError(f"unexpected reply to version: {version!r}")
        return _memcached_stats(s.port).get("pid") == str(s.pid)

    # SIGKILL: on SIGTERM memcached waits for its 1 s clock tick, and it has nothing to save.
    server = _start_process("memcached", argv, is_ours, lambda p: f"memcached://{HOST}:{p}", udp_too=udp,
                            stop_signal=signal.SIGKILL, port=port)
    server.udp_url = f"memcached+udp://{HOST}:{server.port}" if udp else None
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- redis

def resp(*args: str | bytes) -> bytes:
    """A RESP command: an array of bulk strings."""
    words = [a.encode() if isinstance(a, str) else a for a in args]
    return b"*%d\r\n" % len(words) + b"".join(b"$%d\r\n%s\r\n" % (len(w), w) for w in words)


@contextmanager
def redis_server(port: int | None = None, *, password: str | None = None,
                 users: tuple[tuple[str, str], ...] = ()) -> Iterator[ProcessServer]:
    """redis-server on a free port (or ``port``), no persistence, working dir in a temp dir. With
    ``password``: ``--requirepass`` (the default user's); ``users``: ACL users (name, password),
    each allowed every key and command. ``.password`` is the default user's (None: no AUTH)."""
    binary = _require("redis-server")
    auth = resp("AUTH", password) if password else b""
    ok = b"+OK\r\n" if password else b""

    def argv(port: int, tmp: str) -> list[str]:
        extra = ["--requirepass", password] if password else []
        for name, secret in users:
            extra += ["--user", name, "on", f">{secret}", "~*", "+@all"]
        return [binary, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no",
                "--daemonize", "no", "--protected-mode", "no", "--dir", tmp, "--logfile", "", *extra]

    def is_ours(s: ProcessServer) -> bool:
        pong = _exchange(s.port, auth + b"*1\r\n$4\r\nPING\r\n", lambda b: b.endswith(b"PONG\r\n"), PROBE_TIMEOUT_S)
        if pong != ok + b"+PONG\r\n":
            raise ValueError(f"unexpected reply to PING: {pong!r}")
        info = _exchange(s.port, auth + b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n", lambda b: b.endswith(b"\r\n\r\n"),
                         PROBE_TIMEOUT_S)
        return f"process_id:{s.pid}\r\n".encode() in info

    server = _start_process("redis", argv, is_ours, lambda p: f"redis://{HOST}:{p}", port=port)
    server.password = password
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- nginx

_NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
error_log {tmp}/error.log;
pid {tmp}/nginx.pid;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    default_type text/plain;
    # /echo's log (requests.log): what each request was, as nginx read it.
    log_format requests '$request_method $request_uri $http_x_test $content_length $request_length';
{keepalive}    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen {host}:{port};
        root {tmp}/html;
        # A static file: nginx sends Content-Length.
        location = /fixed {{ }}
        # The same bytes through the SSI filter, which drops Content-Length, so an HTTP/1.1
        # reply is sent with Transfer-Encoding: chunked.
        location = /chunked {{ ssi on; ssi_types text/plain; chunked_transfer_encoding on; }}
        # Any method, its body read and dropped, each request logged (issue 36: a user's requests).
        location = /echo {{ access_log {tmp}/requests.log requests; return 200 "ok\\n"; }}
    }}
}}
"""


def _body(body_bytes: int) -> bytes:
    return (b"tailwise-" * (body_bytes // 9 + 1))[:body_bytes]


@contextmanager
def nginx_server(body_bytes: int = 200, keepalive_requests: int | None = None,
                 port: int | None = None) -> Iterator[ProcessServer]:
    """nginx in a temp prefix (on a free port, or ``port``): ``/fixed`` and ``/index.html``
    (Content-Length) and ``/chunked`` (chunked), each of ``body_bytes``; ``/echo`` answers any
    method ``ok`` and logs it to ``requests.log`` in ``.tmpdir`` (method, URI, X-Test,
    Content-Length, request length).

    ``.url`` is the ``/fixed`` URL; ``.chunked_url`` and ``.base_url`` too; ``.body`` is the body.
    Keep-alive is nginx's own default (a connection closes after 1000 requests) unless
    ``keepalive_requests`` says otherwise: a load tool must cope with that.
    """
    keepalive = f"    keepalive_requests {keepalive_requests};\n" if keepalive_requests else ""
    binary = _require("nginx")
    body = _body(body_bytes)

    def prepare(port: int, tmp: str) -> None:
        os.makedirs(os.path.join(tmp, "html"))
        for name in ("fixed", "chunked", "index.html"):
            with open(os.path.join(tmp, "html", name), "wb") as f:
                f.write(body)
        with open(os.path.join(tmp, "nginx.conf"), "w") as f:
            f.write(_NGINX_CONF.format(tmp=tmp, host=HOST, port=port, keepalive=keepalive))

    def argv(_port: int, tmp: str) -> list[str]:
        # -e: the error log before the config is read (the default, /var/log/nginx, may not exist).
        return [binary, "-p", tmp + "/", "-c", os.path.join(tmp, "nginx.conf"), "-e", os.path.join(tmp, "error.log")]

    def is_ours(s: ProcessServer) -> bool:
        with open(os.path.join(s.tmpdir, "nginx.pid")) as f:  # written only once it has bound the port
            if f.read().strip() != str(s.pid):
                return False
        status, _, got = http_get(s.port, "/fixed", timeout_s=1.0)
        return status == 200 and got == body

    server = _start_process("nginx", argv, is_ours, lambda p: f"http://{HOST}:{p}/fixed", prepare=prepare,
                            port=port)
    server.base_url = f"http://{HOST}:{server.port}"
    server.chunked_url = f"{server.base_url}/chunked"
    server.body = body
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- Python thread servers

class _ThreadServer:
    """Base of the in-process servers: ``.pid`` is None (never SIGSTOP the test process)."""

    pid = None
    default_scheme = "tcp"

    def __init__(self) -> None:
        self.host = HOST
        self.port = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def url(self) -> str:
        return self.url_for(self.default_scheme)

    def url_for(self, scheme: str) -> str:
        return f"{scheme}://{self.host}:{self.port}"

    def _spawn(self, target: Callable, *args) -> None:
        t = threading.Thread(target=target, args=args, daemon=True, name=f"{type(self).__name__}-{self.port}")
        self._threads.append(t)
        t.start()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class UdpEchoServer(_ThreadServer):
    """Echoes every datagram back to its sender; counts them in ``.echoed``."""

    default_scheme = "udp"

    def __init__(self, port: int = 0) -> None:
        super().__init__()
        self.echoed = 0
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((HOST, port))
        self._sock.settimeout(0.05)  # how quickly stop() is noticed
        self.port = self._sock.getsockname()[1]
        self._spawn(self._serve)

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, addr = self._sock.recvfrom(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            self.echoed += 1  # before sending: a client that has its echo must see it counted
            try:
                self._sock.sendto(data, addr)
            except OSError:
                self.echoed -= 1

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(2.0)
        self._sock.close()


class FaultyTcpServer(_ThreadServer):
    """Accepts TCP connections and runs ``handler(server, conn)`` for each, in its own thread.

    Counts ``.connections`` accepted and ``.bytes_received`` (through ``self.recv``).
    ``.url`` is ``memcached://...``; ``.url_for(scheme)`` gives it for any scheme.
    """

    default_scheme = "memcached"

    def __init__(self, handler: Callable[[FaultyTcpServer, socket.socket], None]) -> None:
        super().__init__()
        self.connections = 0
        self.bytes_received = 0
        self._handler = handler
        self._lock = threading.Lock()
        self._conns: list[socket.socket] = []
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind((HOST, 0))
        self._listener.listen(128)
        self._listener.settimeout(0.05)
        self.port = self._listener.getsockname()[1]
        self._spawn(self._accept_loop)

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(0.05)
            with self._lock:
                self.connections += 1
                self._conns.append(conn)
            self._spawn(self._run_handler, conn)

    def _run_handler(self, conn: socket.socket) -> None:
        try:
            self._handler(self, conn)
        except OSError:
            pass
        finally:
            conn.close()

    def recv(self, conn: socket.socket, max_wait_s: float | None = None) -> bytes | None:
        """Data, b"" at EOF, or None if nothing came within ``max_wait_s`` (or stop() was called)."""
        deadline = None if max_wait_s is None else time.monotonic() + max_wait_s
        while not self._stop.is_set():
            try:
                data = conn.recv(65536)
            except TimeoutError:
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                continue
            with self._lock:
                self.bytes_received += len(data)
            return data
        return None

    def stop(self) -> None:
        self._stop.set()
        self._listener.close()
        for t in self._threads:
            t.join(2.0)
        with self._lock:
            for c in self._conns:
                c.close()


def _garbage_handler(server: FaultyTcpServer, conn: socket.socket) -> None:
    while server.recv(conn):
        conn.sendall(GARBAGE_REPLY)


def _closing_handler(after_bytes: int) -> Callable[[FaultyTcpServer, socket.socket], None]:
    def handle(server: FaultyTcpServer, conn: socket.socket) -> None:
        if not server.recv(conn):
            return
        conn.sendall(MEMCACHED_VALUE_REPLY[:after_bytes])
        server.replied += 1
        # FIN, not RST: read what the client still sends (closing with unread data resets the
        # connection, and the client might then lose the partial reply).
        conn.shutdown(socket.SHUT_WR)
        while server.recv(conn, max_wait_s=1.0):
            pass
    return handle


def _silent_handler(server: FaultyTcpServer, conn: socket.socket) -> None:
    while server.recv(conn):
        pass


@contextmanager
def udp_echo_server(port: int = 0) -> Iterator[UdpEchoServer]:
    server = UdpEchoServer(port)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def garbage_server() -> Iterator[FaultyTcpServer]:
    """Answers every chunk it receives with ``GARBAGE_REPLY``."""
    server = FaultyTcpServer(_garbage_handler)
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def closing_server(after_bytes: int = 5) -> Iterator[FaultyTcpServer]:
    """On the first data of a connection, sends ``MEMCACHED_VALUE_REPLY[:after_bytes]`` and closes it.

    ``.replied`` counts the truncated replies sent.
    """
    server = FaultyTcpServer(_closing_handler(after_bytes))
    server.replied = 0
    server.after_bytes = after_bytes
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def silent_server() -> Iterator[FaultyTcpServer]:
    """Accepts and reads, never answers; closes only when the client does or at stop()."""
    server = FaultyTcpServer(_silent_handler)
    try:
        yield server
    finally:
        server.stop()
