"""Two network namespaces joined by a veth pair (`veth_pair`), or several joined by a bridge
(`lan`): stand-ins for machines on one box.

`tailwise calibrate` and the tests use it so that client and server talk through a real network
device (veth) with its own addresses and routing, instead of through loopback, which the kernel
short-cuts in ways a NIC path does not.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tailwise.errors import TailwiseError

#: Every `ip` call is bounded in time.
IP_TIMEOUT_S = 10
#: How long to wait for both veth ends to come up.
UP_TIMEOUT_S = 2.0
#: Where iproute2 keeps the named network namespaces (`ip netns add` mounts one file each).
NETNS_DIR = Path("/run/netns")
#: Pairs take /30s out of this range: .1 is the client, .2 the server.
SUBNET = ipaddress.IPv4Network("10.201.0.0/16")
#: LANs take /24s out of this range: host i is .i+1.
LAN_SUBNET = ipaddress.IPv4Network("10.202.0.0/16")

_CAP_SYS_ADMIN = 21
_counter = itertools.count()
_counter_lock = threading.Lock()


def can_create() -> str | None:
    """None when this process can make namespaces, else why not and what to do, in one line.

    Callers skip the veth path with this reason rather than fail halfway through setting it up.
    """
    if not _has_cap_sys_admin():
        return "network namespaces need root (CAP_SYS_ADMIN): run as root, or skip the veth path"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is missing: apt-get install iproute2"
    return None


def _has_cap_sys_admin() -> bool:
    # CapEff is what counts: root in a container may lack CAP_SYS_ADMIN, and a non-root
    # process may have it. Fall back to euid only where /proc cannot tell.
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) >> _CAP_SYS_ADMIN & 1)
    except (OSError, ValueError, IndexError):
        pass
    return os.geteuid() == 0


@dataclass(frozen=True)
class VethPair:
    """Names and addresses of a pair made by `veth_pair()`."""

    client_ns: str
    server_ns: str
    client_ip: str
    server_ip: str
    client_if: str
    server_if: str

    def argv(self, ns: str, argv: list[str]) -> list[str]:
        """`argv` run inside namespace `ns` (`ip netns exec` execs it: the pid is the program's)."""
        return ["ip", "netns", "exec", ns, *argv]


@contextmanager
def veth_pair(prefix: str = "tw") -> Iterator[VethPair]:
    """Make two namespaces joined by a veth pair, both ends up; always delete them on exit.

    Names and addresses are unique to this process and call, so concurrent pairs (in one
    process or several) do not collide. Deleting a namespace removes its veth end too.
    """
    with _counter_lock:
        n = next(_counter)
    pid = os.getpid()
    # The /30 only has to differ between pairs of this process (each namespace has its own
    # routes), but mixing in the pid makes addresses in logs tell processes apart.
    block = (pid * 64 + n) % (SUBNET.num_addresses // 4)
    base = SUBNET.network_address + 4 * block
    pair = VethPair(
        client_ns=f"{prefix}{pid}-{n}a",
        server_ns=f"{prefix}{pid}-{n}b",
        client_ip=str(base + 1),
        server_ip=str(base + 2),
        # Interface names must fit in 15 characters (IFNAMSIZ - 1).
        client_if=f"tw{pid % 100000}{n % 1000}a",
        server_if=f"tw{pid % 100000}{n % 1000}b",
    )
    try:
        _ip("netns", "add", pair.client_ns)
        _ip("netns", "add", pair.server_ns)
        # Create each end directly inside its namespace: the names never exist in the root
        # namespace, so they cannot clash with other processes' interfaces there.
        _ip("link", "add", pair.client_if, "netns", pair.client_ns,
            "type", "veth", "peer", "name", pair.server_if, "netns", pair.server_ns)
        for ns, ifname, ip in ((pair.client_ns, pair.client_if, pair.client_ip),
                               (pair.server_ns, pair.server_if, pair.server_ip)):
            _ip("-n", ns, "addr", "add", f"{ip}/30", "dev", ifname)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", ifname, "up")
        _wait_up(pair)
        yield pair
    finally:
        _delete(pair.client_ns, pair.server_ns)


@dataclass(frozen=True)
class Lan:
    """Hosts made by `lan()`: each a namespace with one address on a shared bridge."""

    namespaces: dict[str, str]
    ips: dict[str, str]

    def argv(self, host: str, argv: list[str]) -> list[str]:
        """`argv` run on ``host`` (`ip netns exec` execs it: the pid is the program's)."""
        return ["ip", "netns", "exec", self.namespaces[host], *argv]


@contextmanager
def lan(hosts: list[str], prefix: str = "tl") -> Iterator[Lan]:
    """Make one namespace per host and a switch namespace whose bridge joins them by veth pairs,
    every link up; always delete them all on exit (a host's veth end goes with its namespace)."""
    with _counter_lock:
        n = next(_counter)
    pid = os.getpid()
    net = list(LAN_SUBNET.subnets(new_prefix=24))[(pid * 16 + n) % 256]
    tag = f"{pid % 100000}{n % 100}"
    switch = f"{prefix}{tag}sw"
    spaces = {h: f"{prefix}{tag}h{i}" for i, h in enumerate(hosts)}
    made = [switch]
    try:
        _ip("netns", "add", switch)
        _ip("-n", switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", switch, "link", "set", "br0", "up")
        ips = {}
        for i, (host, ns) in enumerate(spaces.items()):
            _ip("netns", "add", ns)
            made.append(ns)
            port, eth = f"p{tag}{i}", f"e{tag}{i}"
            _ip("link", "add", eth, "netns", ns, "type", "veth", "peer", "name", port, "netns", switch)
            _ip("-n", switch, "link", "set", port, "master", "br0")
            _ip("-n", switch, "link", "set", port, "up")
            ips[host] = str(net.network_address + i + 1)
            _ip("-n", ns, "addr", "add", f"{ips[host]}/24", "dev", eth)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", ns, "link", "set", eth, "up")
        yield Lan(spaces, ips)
    finally:
        _delete(*made)


def _wait_up(pair: VethPair) -> None:
    # IPv4 has no duplicate-address detection, so once both ends report UP the server address
    # answers. The carrier comes up within milliseconds; the bound is for a sick kernel.
    deadline = time.monotonic() + UP_TIMEOUT_S
    while True:
        states = [_ip("-n", ns, "-o", "link", "show", "dev", ifname)
                  for ns, ifname in ((pair.client_ns, pair.client_if), (pair.server_ns, pair.server_if))]
        if all(" state UP " in s for s in states):
            return
        if time.monotonic() > deadline:
            raise TailwiseError(
                f"veth {pair.client_if}/{pair.server_if} not up after {UP_TIMEOUT_S:g} s: "
                + " | ".join(s.strip() for s in states),
                "check `ip link` in the namespaces; the kernel may lack veth support")
        time.sleep(0.01)


def _delete(*namespaces: str) -> None:
    """Delete every namespace, ignoring ones already gone; report other failures after trying all."""
    failures = []
    for ns in namespaces:
        if not (NETNS_DIR / ns).exists():  # gone already (or never made)
            continue
        try:
            _ip("netns", "delete", ns)
        except TailwiseError as e:
            failures.append(e)
    if failures:
        raise failures[0]


def _ip(*args: str) -> str:
    """Run `ip ARGS`; its stdout, or a TailwiseError naming the command and its first stderr line."""
    cmd = ["ip", *args]
    shown = " ".join(cmd)
    remedy = "run as root with iproute2 installed; `ip netns list` shows leftover namespaces"
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    except FileNotFoundError:
        raise TailwiseError("the `ip` command (iproute2) is missing", "apt-get install iproute2") from None
    except subprocess.TimeoutExpired:
        raise TailwiseError(f"`{shown}` did not finish in {IP_TIMEOUT_S} s", remedy) from None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[0]
        raise TailwiseError(f"`{shown}` failed: {first}", remedy)
    return done.stdout
