"""What an agent may be asked to do: its ``Limits`` and the fences a configuration is checked
against before anything connects.

Targets inside ``--allow-targets`` (``Allowed``: a network and its ports; loopback only by
default), the rate, the connections and the duration at most the agent's maxima, and what any
agent holds (``MAX_OUTSTANDING``, ``MAX_TIMEOUT_NS``, ``MAX_CONNECT_TIMEOUT_NS``); each refusal an
``InputError`` naming the figure, the limit and what to do, which the service (agents/server.py)
sends back as INVALID_ARGUMENT with its kind and remedy (``wire.abort``).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from tailwise.agents.held import BASE_MEMORY, DEFAULT_MAX_ROWS, MIN_MEMORY, MIN_ROWS, RINGS_MEMORY, ROW_COST
from tailwise.agents.proto import agent_pb2 as pb
from tailwise.errors import InputError
from tailwise.spec.load import LoadSpec
from tailwise.spec.units import fmt_bytes, fmt_ns

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True)
class Allowed:
    """One entry of --allow-targets: a network and the ports on it (all of them by default)."""

    net: IPNetwork
    low_port: int = 1
    high_port: int = 65535

    def admits(self, ip, port: int) -> bool:
        return ip in self.net and self.low_port <= port <= self.high_port

    def __str__(self) -> str:
        if (self.low_port, self.high_port) == (1, 65535):
            return str(self.net)
        net = f"[{self.net}]" if self.net.version == 6 else str(self.net)
        ports = str(self.low_port) if self.low_port == self.high_port else f"{self.low_port}-{self.high_port}"
        return f"{net}:{ports}"

    @classmethod
    def parse(cls, text: str) -> Allowed:
        """``CIDR[:PORT|:LOW-HIGH]``; an IPv6 network with ports in brackets (``[fd00::/64]:11211``).
        A ValueError names what is wrong."""
        text = text.strip()
        ports = None
        if text.startswith("["):
            net, close, rest = text[1:].partition("]")
            if not close or (rest and not rest.startswith(":")):
                raise ValueError("an IPv6 network with ports is written [NETWORK]:PORT")
            ports = rest[1:] or None
        elif text.count(":") == 1:  # an IPv4 network and its ports
            net, _, ports = text.partition(":")
        else:
            net = text
        network = ipaddress.ip_network(net, strict=False)
        if ports is None:
            return cls(network)
        low, dash, high = ports.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"'{ports}' is not a port or a LOW-HIGH range")
        lo, hi = int(low), int(high) if dash else int(low)
        if not 1 <= lo <= hi <= 65535:
            raise ValueError(f"ports {ports} are not within 1–65535, low to high")
        return cls(network, lo, hi)


#: Where an agent may send when not told otherwise: this host only, any port.
LOOPBACK: tuple[Allowed, ...] = (Allowed(ipaddress.ip_network("127.0.0.0/8")), Allowed(ipaddress.ip_network("::1/128")))
DEFAULT_LEASE_NS = 5_000_000_000
ROLES = ("symmetric", "load", "probe")
#: What an agent holds, whatever its flags: requests in flight per connection (a slot each;
#: mutilate's --depth and memtier's --pipeline go to a few hundred), how long a request may take
#: (every flow's ring holds rate × timeout: packet/flows.rs), and a connect.
MAX_OUTSTANDING = 1024
MAX_TIMEOUT_NS = 300 * 1_000_000_000
MAX_CONNECT_TIMEOUT_NS = 60 * 1_000_000_000


@dataclass(frozen=True)
class Limits:
    """What this agent may be asked to do (0: no limit), and its lease."""

    allow_targets: tuple[Allowed, ...] = LOOPBACK
    max_rate_rps: float = 0.0
    max_conns: int = 0
    max_duration_ns: int = 0
    lease_ns: int = DEFAULT_LEASE_NS
    #: The memory the agent keeps within, bytes (0: none given: ``DEFAULT_MAX_ROWS``), and where
    #: it comes from: "--max-memory" or "cgroup" (its memory.max).
    max_memory: int = 0
    memory_from: str = ""

    def message(self) -> pb.Limits:
        return pb.Limits(allow_targets=[str(n) for n in self.allow_targets], max_rate_rps=self.max_rate_rps,
                         max_conns=self.max_conns, max_duration_ns=self.max_duration_ns, lease_ns=self.lease_ns,
                         max_memory_bytes=self.max_memory, max_rows=self.max_rows())

    def max_rows(self, config: dict[str, Any] | None = None) -> int:
        """Sampled rows held between two snapshots at most: what ``max_memory`` leaves after
        ``BASE_MEMORY`` (and ``RINGS_MEMORY`` for a udp+flow ``config``), at ``ROW_COST`` a row;
        ``DEFAULT_MAX_ROWS`` at most (and without a bound)."""
        if not self.max_memory:
            return DEFAULT_MAX_ROWS
        rings = RINGS_MEMORY if config is not None and _is_packet(config) else 0
        return max(0, min(DEFAULT_MAX_ROWS, (self.max_memory - BASE_MEMORY - rings) // ROW_COST))

    def memory_text(self) -> str:
        """The bound as the agent's lines name it: "--max-memory 512 MiB", "the cgroup's 2.00 GiB"."""
        size = fmt_bytes(self.max_memory)
        return f"the cgroup's {size} (memory.max)" if self.memory_from == "cgroup" else f"--max-memory {size}"

    def check(self, config: dict[str, Any], cpus: int) -> None:
        """Refuse (``InputError``) a canonical engine configuration beyond these limits, or beyond
        what an agent with ``cpus`` CPUs holds (``MAX_OUTSTANDING``, ``MAX_TIMEOUT_NS``,
        ``MAX_CONNECT_TIMEOUT_NS``)."""
        for target in config["targets"]:
            self._check_target(target)
        probe = config.get("probe") or {}
        with_probe = " (load + probe)" if probe else ""
        rate = config["rate_rps"] + probe.get("rate_rps", 0.0)
        if self.max_rate_rps and rate > self.max_rate_rps:
            raise InputError(f"rate {rate:,.0f} req/s{with_probe} is over this agent's --max-rate "
                             f"{self.max_rate_rps:,.0f} req/s",
                             "lower --rate or add agents (or start the agent with a higher --max-rate)")
        # Every socket counts: a flow of udp+flow is one of its own, as a probe's connection is.
        flows = config["protocol"].get("flows") if config["protocol"].get("scheme") == "udp+flow" else None
        sockets = (flows if flows is not None else config["conns"]) + probe.get("conns", 0)
        what = f"{flows} flows" if flows is not None else f"{config['conns']} connections"
        if probe:
            what += f" and {probe.get('conns', 0)} probe connections"
        if self.max_conns and sockets > self.max_conns:
            raise InputError(f"{what} ({sockets} sockets) are over this agent's --max-conns {self.max_conns}",
                             "lower --conns (or the flows) or add agents (or start the agent with a higher "
                             "--max-conns)")
        if config["threads"] > cpus:
            raise InputError(f"{config['threads']} threads are over this agent's {cpus} CPUs (--cpus)",
                             "lower --threads or add agents (or give the agent more --cpus)")
        for name, value, most, how in (("outstanding", config["outstanding"], MAX_OUTSTANDING, "--outstanding"),
                                       ("timeout", config["timeout_ns"], MAX_TIMEOUT_NS, "--timeout"),
                                       ("connect timeout", config["connect_timeout_ns"], MAX_CONNECT_TIMEOUT_NS,
                                        "the configuration's connect_timeout_ns")):
            if value > most:
                shown = (f"{value:,}", f"{most:,}") if name == "outstanding" else (fmt_ns(value), fmt_ns(most))
                raise InputError(f"{name} {shown[0]} is over the {shown[1]} an agent holds",
                                 f"give {how} of at most {shown[1]}")
        if self.max_duration_ns and config["duration_ns"] > self.max_duration_ns:
            raise InputError(f"duration {fmt_ns(config['duration_ns'])} is over this agent's --max-duration "
                             f"{fmt_ns(self.max_duration_ns)}",
                             "ask for a shorter run (--duration, --max-time) or start the agent with a longer "
                             "--max-duration")
        if self.max_memory and self.max_rows(config) < MIN_ROWS:
            # Only a packet run can get here: the agent refused to start with less than MIN_MEMORY.
            raise InputError(f"udp+flow's rings may take {fmt_bytes(RINGS_MEMORY)}, which leaves too little of "
                             f"this agent's {self.memory_text()} for the rows it holds",
                             f"give the agent --max-memory {fmt_bytes(MIN_MEMORY + RINGS_MEMORY)} or more, or use "
                             f"another agent")

    def _check_target(self, target: str) -> None:
        ip, port = target_ip(target), target_port(target)
        if any(a.admits(ip, port) for a in self.allow_targets):
            return
        allowed = ",".join(str(a) for a in self.allow_targets)
        if any(ip in a.net for a in self.allow_targets):
            where = str(Allowed(ipaddress.ip_network(ip), port, port))
            raise InputError(f"target {target}: port {port} is outside this agent's --allow-targets {allowed}",
                             f"start the agent with --allow-targets {where} (that port of that host) added, or aim at "
                             f"a port it allows")
        net = ipaddress.ip_network(f"{ip}/{24 if ip.version == 4 else 64}", strict=False)
        raise InputError(f"target {target} is outside this agent's --allow-targets {allowed}",
                         f"start the agent with --allow-targets {net} (the target's network), or aim at a "
                         f"network it allows")


def _is_packet(config: dict[str, Any]) -> bool:
    return config["protocol"].get("scheme") == "udp+flow"


def target_port(target: str) -> int:
    """A configuration's target ("IP:PORT", "[IPv6]:PORT") as its port."""
    port = target.rsplit(":", 1)[-1]
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        raise InputError(f"target {target} is not IP:PORT", "the coordinator sends each target as IP:PORT")
    return int(port)


def target_ip(target: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """A configuration's target ("IP:PORT", "[IPv6]:PORT") as its address; an IPv4 address
    mapped into IPv6 as the IPv4 address it is."""
    host = target.rsplit(":", 1)[0].strip("[]").split("%")[0]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        raise InputError(f"target {target} is not IP:PORT", "the coordinator resolves names before it sends them") from None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _for_role(config: dict[str, Any], role: str) -> dict[str, Any]:
    """The configuration as ``role`` runs it: a load agent counts its requests, not times them; a
    probe agent is given the run's probe and runs it alone (``LoadSpec.probe_only``: its
    connections, one request outstanding each, Poisson, every request kept), so that its limits
    are checked, and its counters and samples kept, on what it sends."""
    if role not in ROLES:
        raise InputError(f"role {role!r} is not one of {', '.join(ROLES)}",
                         "run the same tailwise version on the coordinator and the agents")
    if role == "load":
        if config.get("probe"):
            raise InputError("a load agent was given a probe", "give the probe to a probe or symmetric agent")
        return config | {"timed": False}
    if role == "probe":
        if not config.get("probe"):
            raise InputError("a probe agent was given no probe", "set the configuration's probe (its conns and rate_rps)")
        return LoadSpec.from_engine_config(config).probe_only().engine_config()
    return config
