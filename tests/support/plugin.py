"""The tests' pytest plugin, loaded by tests/conftest.py (``pytest_plugins``): fixtures that start
real servers on free loopback ports and always stop them.

``memcached``, ``memcached_udp``, ``redis``, ``nginx`` (tests/support/servers.py) skip when the
Debian binary is missing, unless ``CI=true``, where a missing binary is a failure; ``udp_echo``,
``garbage``, ``closing``, ``silent`` are Python servers in the test process; ``serve`` starts
`tailwise serve` (tests/support/cli.py), ``udp_reflector`` and ``udp_forwarder`` its UDP functions.
"""

from __future__ import annotations

import signal

import pytest

from support import servers
from support.cli import ServeProcess, start_serve, start_udp_function
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
            "udp_reflector", "udp_forwarder")


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
