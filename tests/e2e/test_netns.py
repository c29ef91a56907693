"""tailwise.measure.netns with real namespaces: traffic crosses the veth, and the namespaces always go."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tailwise.measure import netns
from tailwise.errors import TailwiseError

pytestmark = pytest.mark.skipif(netns.can_create() is not None, reason=str(netns.can_create()))

PORT = 47001
TIMEOUT_S = 10

# UDP echo on argv[1]:PORT; exits by itself after 10 s without traffic.
ECHO_SERVER = f"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], {PORT}))
s.settimeout(10)
while True:
    data, peer = s.recvfrom(2048)
    s.sendto(b"echo:" + data, peer)
"""

# Sends until the reply comes: the server may not be bound yet when the first datagram leaves.
ECHO_CLIENT = f"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(0.1)
for _ in range(50):
    s.sendto(b"ping", (sys.argv[1], {PORT}))
    try:
        print(s.recvfrom(2048)[0].decode())
        break
    except TimeoutError:
        pass
else:
    sys.exit("no reply")
"""


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True,
                         timeout=TIMEOUT_S).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_udp_crosses_the_veth():
    with netns.veth_pair() as pair:
        server = subprocess.Popen(pair.argv(pair.server_ns, [sys.executable, "-c", ECHO_SERVER, pair.server_ip]))
        try:
            done = subprocess.run(pair.argv(pair.client_ns, [sys.executable, "-c", ECHO_CLIENT, pair.server_ip]),
                                  capture_output=True, text=True, timeout=TIMEOUT_S)
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == "echo:ping"
            assert server.poll() is None, "the echo server died"
        finally:
            server.kill()
            server.wait(timeout=TIMEOUT_S)


def test_namespaces_are_deleted_on_exit():
    with netns.veth_pair() as pair:
        assert {pair.client_ns, pair.server_ns} <= namespaces()
    assert not {pair.client_ns, pair.server_ns} & namespaces()


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_namespaces_are_deleted_when_the_body_raises(exc):
    with pytest.raises(exc):
        with netns.veth_pair() as pair:
            raise exc("body failed")
    assert not {pair.client_ns, pair.server_ns} & namespaces()


def test_two_pairs_at_once_differ():
    with netns.veth_pair() as a, netns.veth_pair() as b:
        names_a = {a.client_ns, a.server_ns, a.client_if, a.server_if}
        names_b = {b.client_ns, b.server_ns, b.client_if, b.server_if}
        assert len(names_a) == 4 and not names_a & names_b
        assert {a.client_ip, a.server_ip}.isdisjoint({b.client_ip, b.server_ip})
        assert all(len(name) <= 15 for name in (a.client_if, a.server_if, b.client_if, b.server_if))
        # Both live, each end in its own namespace with its address.
        for pair in (a, b):
            for ns, ifname, ip in ((pair.client_ns, pair.client_if, pair.client_ip),
                                   (pair.server_ns, pair.server_if, pair.server_ip)):
                out = subprocess.run(["ip", "-n", ns, "-br", "addr", "show", "dev", ifname],
                                     capture_output=True, text=True, check=True, timeout=TIMEOUT_S).stdout
                assert f"{ip}/30" in out and " UP " in out
    assert not (names_a | names_b) & namespaces()


def test_client_namespace_cannot_reach_root_loopback():
    # A listener on the root namespace's 127.0.0.1 is invisible from the client namespace,
    # whose own loopback has nothing on that port.
    probe = ("import socket, sys\n"
             "try:\n"
             "    socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=2)\n"
             "    print('connected')\n"
             "except ConnectionRefusedError:\n"
             "    print('refused')\n")
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # reachable from here
        with netns.veth_pair() as pair:
            done = subprocess.run(pair.argv(pair.client_ns, [sys.executable, "-c", probe, str(port)]),
                                  capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "refused"


def test_ip_failure_is_a_tailwise_error():
    with pytest.raises(TailwiseError) as info:
        netns._ip("-n", "tw-no-such-namespace", "link")
    assert "ip -n tw-no-such-namespace link" in info.value.problem
    assert "No such file" in info.value.problem
