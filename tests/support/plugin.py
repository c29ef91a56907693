"""The tests' pytest plugin, loaded by tests/conftest.py (``pytest_plugins``): fixtures that start
real servers on free loopback ports and always stop them.

``memcached``, ``memcached_udp``, ``redis``, ``nginx`` (tests/support/servers.py) skip when the
Debian binary is missing, unless ``CI=true``, where a missing binary is a failure; ``udp_echo``,
``garbage``, ``closing``, ``silent`` are Python servers in the test process; ``serve`` starts
`tailwise serve` (tests/support/cli.py), ``udp_reflector`` and ``udp_forwarder`` its UDP functions.
Over TLS (tests/support/tls_servers.py, issue 36), with the certificates of ``pki``: ``nginx_tls``
(a factory: keep-alive limit, client certificates required), ``redis_tls``, ``memcached_tls``
(skipped, with the reason, only where memcached is built without TLS), ``serve_tls``.
"""

from __future__ import annotations

import signal
from contextlib import ExitStack

import pytest

from support import servers
from support.cli import ServeProcess, start_serve, start_udp_function
from support.tls_servers import (Pki, make_pki, memcached_tls_server, memcached_tls_support, nginx_tls_server,
                                 redis_tls_server)
from support.servers import (
    closing_server,
    garbage_server,
    memcached_server,
    nginx_server,
    redis_server,
    silent_server,
    udp_echo_server,
)

#: The server fixtures this plugin defines (tests/e2e/test_servers.py checks each is there).
FIXTURES = ("memcached", "memcached_udp", "redis", "nginx", "udp_echo", "garbage", "closing", "silent",
            "udp_reflector", "udp_forwarder", "pki", "nginx_tls", "redis_tls", "memcached_tls", "serve_tls")


def skip_unless_installed(binary: str) -> None:
    """Skip the calling test when ``binary`` is missing; fail instead under CI=true."""
    # Through the module: a test that patches servers.find_binary patches this check too.
    if servers.find_binary(binary) is not None:
        return
    pkg = "nginx-light" if binary == "nginx" else binary
    msg = f"'{binary}' is not installed: apt-get install -y {pkg}"
    if servers.in_ci():
        pytest.fail(f"{msg} (CI=true: a missing server is a failure, not a skip)")
    pytest.skip(msg)


@pytest.fixture
def memcached():
    """memcached over TCP (1 thread, 64 MB): .host .port .url .pid .stop()."""
    skip_unless_installed("memcached")
    with memcached_server() as s:
        yield s


@pytest.fixture
def memcached_udp():
    """memcached with UDP on the same port: also .udp_url."""
    skip_unless_installed("memcached")
    with memcached_server(udp=True) as s:
        yield s


@pytest.fixture
def redis():
    skip_unless_installed("redis-server")
    with redis_server() as s:
        yield s


@pytest.fixture
def nginx():
    """nginx with 200-byte /fixed (.url) and /chunked (.chunked_url)."""
    skip_unless_installed("nginx")
    with nginx_server() as s:
        yield s


@pytest.fixture
def udp_echo():
    with udp_echo_server() as s:
        yield s


@pytest.fixture
def garbage():
    with garbage_server() as s:
        yield s


@pytest.fixture
def closing():
    with closing_server() as s:
        yield s


@pytest.fixture
def silent():
    with silent_server() as s:
        yield s


def _started(start):
    """A factory fixture's body: ``start`` wrapped so that every process it starts is killed at
    teardown."""
    started: list[ServeProcess] = []

    def _start(*args: str, **kwargs) -> ServeProcess:
        s = start(*args, **kwargs)
        started.append(s)
        return s

    yield _start
    for s in started:
        s.stop(signal.SIGKILL)


@pytest.fixture
def serve():
    """Factory fixture: start `tailwise serve` with the given flags; all are stopped at teardown."""
    yield from _started(start_serve)


@pytest.fixture
def udp_reflector():
    """Factory fixture: `tailwise serve --udp-reflect` with the given flags (e.g. "--drop-every",
    "10") on a free loopback port (``cpu=N``: run on CPU N only, with --no-pin): .addr, .url
    (udp+flow://), .stop(), then .counters(). All are stopped at teardown."""
    yield from _started(lambda *args, **kw: start_udp_function("--udp-reflect", *args, **kw))


@pytest.fixture
def udp_forwarder():
    """Factory fixture: `tailwise serve --udp-forward TO` with the given flags (TO first), as
    ``udp_reflector``."""
    yield from _started(lambda to, *args: start_udp_function("--udp-forward", to, *args))


@pytest.fixture
def pki(tmp_path) -> Pki:
    """A CA, a server certificate for localhost and 127.0.0.1, a client certificate and a stranger
    CA (PEM files, trustme)."""
    pytest.importorskip("trustme", reason="pip install -e '.[test]' (trustme makes the tests' certificates)")
    return make_pki(tmp_path / "pki")


@pytest.fixture
def nginx_tls(pki):
    """Factory fixture: nginx over HTTPS (``keepalive_requests=N``, ``verify_client=True``); every
    one started is stopped at teardown."""
    skip_unless_installed("nginx")
    with ExitStack() as stack:
        yield lambda **kw: stack.enter_context(nginx_tls_server(pki, **kw))


@pytest.fixture
def redis_tls(pki):
    """redis-server on --tls-port only (certificates from ``pki``; clients not asked for one)."""
    skip_unless_installed("redis-server")
    with redis_tls_server(pki) as s:
        yield s


@pytest.fixture
def memcached_tls(pki):
    """memcached -Z (every listener over TLS, certificates from ``pki``)."""
    skip_unless_installed("memcached")
    why = memcached_tls_support()
    if why is not None:
        pytest.skip(why)  # the one skip issue 36 allows: a memcached built without TLS cannot be asked
    with memcached_tls_server(pki) as s:
        yield s


@pytest.fixture
def serve_tls(pki):
    """`tailwise serve --tls-cert --tls-key` (``pki``'s server certificate) on a free port:
    ``.url`` is its synthetic+tls:// URL (by name: localhost, which the certificate is for)."""
    s = start_serve("--tls-cert", str(pki.cert), "--tls-key", str(pki.key), address=r"listening on synthetic\+tls://(\S+)")
    try:
        yield s
    finally:
        s.stop(signal.SIGKILL)
