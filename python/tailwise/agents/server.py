"""The agent service (agents/proto/agent.proto): ``AgentServer`` runs a coordinator's load with one
``LocalAgent`` session at a time, closed to strangers.

* Every call carries the shared token (``TokenCheck``, a server interceptor: UNAUTHENTICATED
  otherwise, with no hint of the token, before the call's body is read: a stranger's half-open
  call holds no thread). Refusals are said at most once a second per address, naming it.
* The lease is renewed only by a call that succeeds and carries the run's ``lease_key`` (drawn
  by Configure, never shown by Health): no other token holder keeps an orphaned load going.
* Calls a peer address may have in progress at once are bounded (``MAX_CALLS_PER_PEER``), and
  the server's streams per connection, keep-alive, idle and age limits are set (``serve``).
* A configuration is checked against the agent's ``Limits`` before anything connects: targets
  inside ``--allow-targets`` (loopback only by default), the rate, the connections and the
  duration at most the agent's maxima; each refusal an ``InputError`` naming the figure, the limit
  and what to do, sent back as INVALID_ARGUMENT with its kind and remedy (``wire.abort``).
* The lease: a watchdog stops a running load whose coordinator made no call for ``lease_ns``
  (no orphaned load generator), and drops a run nobody collects within another lease, so that
  the agent is reusable.
* Snapshots leave nothing behind in the agent: the sampled rows and the interval histograms
  changed since the last one go to the coordinator, which keeps them.
* The rows a silent coordinator leaves are bounded (issue 33, item 3): when it has not taken them
  for ``KEEP_S``, the watchdog takes them from the engine itself into ``Held``, at most
  ``Limits.max_rows`` (derived from --max-memory or the cgroup's limit), past which they are
  thinned by the coordinator's own subsample and keys (stats/subsample.py); the next Snapshot or
  Finish hands them over with their level (``thinned_level``), and the agent says it once
  (``Thinned``). The keeper takes no pending rows, and an engine thread that gathers more than
  ``Held.engine_rows`` between two takes (far behind its schedule, it ends millions of requests at
  once) thins them itself by the same keys (``Engine.thin_rows``): each take says the level.

The engine's calls all run under one lock: ``Engine.take`` holds the engine while it waits for its
threads, and an engine call from another thread meanwhile would wait for it holding the
interpreter. Nothing here prints: what happens is told to ``on_event`` (agents/events.py).
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import math
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any

import grpc
import numpy as np

from tailwise import _core
from tailwise.agents import wire
from tailwise.agents.events import (Closing, Configured, Dropped, Event, Finished, LeaseExpired, Refused, Started,
                                   Stopped, Thinned)
from tailwise.driver.local import LocalAgent, Session
from tailwise.results.measured import AgentResult
from tailwise.results.rows import SAMPLE_DTYPE, decode_samples
from tailwise.agents.proto import agent_pb2 as pb
from tailwise.agents.proto import agent_pb2_grpc
from tailwise.errors import HostError, InputError, TailwiseError
from tailwise.spec.load import LoadSpec
from tailwise.spec.units import fmt_bytes, fmt_ns
from tailwise.stats.subsample import AGENT_THREADS, Subsample

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
#: Finish waits for the schedule, the drain (the run's timeout) and this much more; then it stops
#: the engine, and gives up after as long again.
FINISH_MARGIN_NS = 10_000_000_000
#: A start further ahead than this on the agent's clock is a coordinator's mistake (its clock
#: offset), not a barrier.
MAX_START_AHEAD_NS = 60_000_000_000
#: How often Finish looks whether the engine ended, and the watchdog at most.
POLL_S = 0.05
#: What an agent holds, whatever its flags: requests in flight per connection (a slot each;
#: mutilate's --depth and memtier's --pipeline go to a few hundred), how long a request may take
#: (every flow's ring holds rate × timeout: packet/flows.rs), and a connect.
MAX_OUTSTANDING = 1024
MAX_TIMEOUT_NS = 300 * 1_000_000_000
MAX_CONNECT_TIMEOUT_NS = 60 * 1_000_000_000
#: Calls one peer address may have in progress at once: a coordinator makes one or two (a
#: Finish that waits, a Progress); more is someone holding the pool's threads.
MAX_CALLS_PER_PEER = 8
#: A refused token is said at most once this often per address (the rest counted in the next line).
REFUSED_SAY_S = 1.0
MAX_PEERS_REMEMBERED = 1024
#: gRPC server limits (grpc/include/grpc/impl/channel_arg_names.h): streams per connection; a
#: connection with no call for 5 min is closed; one is pinged after 60 s without traffic and
#: closed if silent 20 s more (a vanished peer); a connection is closed after 1 h, its calls given
#: as long as a run may take to end (the coordinator reconnects on its next call).
SERVER_OPTIONS = (
    ("grpc.max_concurrent_streams", MAX_CALLS_PER_PEER),
    ("grpc.max_connection_idle_ms", 300_000),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.max_connection_age_ms", 3_600_000),
    ("grpc.max_connection_age_grace_ms", 24 * 3_600_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
)
#: The agent's memory (issue 33, item 3). Within --max-memory, or the cgroup's limit, the rows it
#: holds for a coordinator that does not collect them get what is left after the rest of the agent:
#: the interpreter, numpy, gRPC, the engine's histograms and buffers, and what grows with a run (its
#: interval histograms, gRPC's buffers) — an idle agent is 65 MiB resident on the project's machine,
#: 78–89 MiB once a run has started (bench/agents/memory.py) —
BASE_MEMORY = 96 << 20
#: and udp+flow's rings, at most the engine's RINGS_BUDGET: 2²² slots of 40 bytes (packet/flows.rs;
#: the figure copied for this sum only): a packet run's ceiling of rows is that much lower.
RINGS_MEMORY = 160 << 20
#: What a row held costs of the bound, 4 × 64 bytes: its 64 bytes in the agent's subsample, 64 more
#: for the copy it is sent from, and room for what the engine gathers between two of the keeper's
#: takes — at most an eighth of the ceiling (``PILE_SHARE``), at 3 × 64 bytes a row once taken
#: (the engine's rows, the bytes they are handed over in, the subsample's copy), and as much again
#: for a late take: a take of a million rows is ~0.3 s late on the project's machine
#: (bench/agents/memory.py).
ROW_COST = 4 * _core.SAMPLE_BYTES
PILE_SHARE = 8
#: What an engine thread far behind its schedule gathers at once is bounded too: it ends millions
#: of requests (never sent) in a moment after seconds of sending (bench/agents/memory.py at an
#: offered rate far above what the machine sends), more than any take's cadence holds. Past the
#: room ROW_COST leaves it — twice ``PILE_SHARE``'s share: a take, and a late one — the engine
#: thins them by the same keys (``Engine.thin_rows``) and says the level.
ENGINE_SHARE = PILE_SHARE // 2
#: The ceiling of rows without a bound (no --max-memory, no cgroup limit): 8 Mi rows, 512 MiB held
#: (2 GiB at ROW_COST, the Kubernetes manifests' limit); 8× what a coordinator keeps for its
#: statistics (stats/subsample.py LIMIT).
DEFAULT_MAX_ROWS = 1 << 23
#: Fewer rows than this between two snapshots is too little to run at all: the least --max-memory.
MIN_ROWS = 1 << 16
MIN_MEMORY = BASE_MEMORY + MIN_ROWS * ROW_COST
#: The keeper takes the engine's rows itself when they were not taken for this long (the
#: coordinator of a fixed-length run takes them every 0.25 s), or sooner when they come fast for
#: the ceiling (``Held.every_s``), but not more often than the watchdog looks.
KEEP_S = 1.0
MIN_KEEP_S = 2 * POLL_S
#: The result's fields that travel as parts of their own (bytes), not in the meta JSON.
BINARY_FIELDS = frozenset({"latency_hist", "send_lag_hist", "send_lag_unstalled_hist", "samples", "intervals",
                           "packet_hist"})


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


def rows_per_s(config: dict[str, Any]) -> float:
    """Sampled rows a canonical configuration keeps a second: the probe's requests (every one),
    else the timed load's 1 in ``sample_every``; none for a load agent."""
    probe = config.get("probe")
    if probe:
        return float(probe["rate_rps"])
    return config["rate_rps"] / max(1, config["sample_every"]) if config.get("timed", True) else 0.0


class Held:
    """The rows an agent took from its engine for a coordinator that did not (issue 33, item 3):
    at most ``max_rows``, past which the coordinator's own subsample thins them (stats/subsample.py),
    each keyed as the coordinator keys it — its thread + the agent's index × ``AGENT_THREADS`` —
    so that the coordinator, raising its level to theirs, pools exactly one level's rows of every
    agent. A Snapshot or Finish hands them over with their level and leaves it empty, at level 0:
    the agent thins only while rows pile up.

    ``lock`` is held from the engine's take to the rows' add (the keeper takes it under the
    agent's lock, without waiting), so that a hand-over after a take includes it; the thinning
    itself runs outside the agent's lock (Health never waits for it)."""

    def __init__(self, agent_index: int, max_rows: int, rows_per_s: float):
        self.max_rows = max_rows
        self._rows = Subsample(SAMPLE_DTYPE, limit=max_rows, source_base=agent_index * AGENT_THREADS)
        self.lock = threading.Lock()
        #: When the engine's rows were last taken (time.monotonic()): by a Snapshot or the keeper;
        #: and by the coordinator (a Snapshot, or the start).
        self.taken_at = self.collected_at = time.monotonic()
        #: How often the keeper takes them: KEEP_S, or sooner, so that the engine gathers
        #: meanwhile (rows_per_s × every_s) at most max_rows / PILE_SHARE (small takes: a late one
        #: costs little); never more often than MIN_KEEP_S.
        room_s = max_rows / PILE_SHARE / rows_per_s if rows_per_s else KEEP_S
        self.every_s = min(KEEP_S, max(MIN_KEEP_S, room_s))
        #: The agent said it thinned (once a run).
        self.said = False
        #: The rows the engine may gather between two takes before it thins them itself.
        self.engine_rows = max(1, max_rows // ENGINE_SHARE)

    @property
    def level(self) -> int:
        return self._rows.level

    def add(self, rows: np.ndarray, level: int = 0) -> None:
        """Rows the keeper took (with ``lock`` held), which the engine thinned to ``level``."""
        self._rows.raise_to(level)
        self._rows.add(rows)

    def hand_over(self, rows: np.ndarray, pending: np.ndarray, level: int = 0) -> tuple[np.ndarray, np.ndarray, int]:
        """The engine's newest rows (thinned there to ``level``) with those held, and the rows
        outstanding, both at the level they were thinned to: (rows, pending, level). Empty after,
        at level 0."""
        with self.lock:
            if not len(self._rows) and not level:
                return rows, pending, 0  # nothing held: this batch as the engine gave it
            self._rows.raise_to(level)
            self._rows.add(rows)
            level, pending = self._rows.level, self._rows.select(pending)
            return self._rows.drain(), pending, level


def _bytes_of(rows: np.ndarray) -> np.ndarray:
    """Rows as the bytes a part carries (a view, no copy: wire.chunks cuts it)."""
    return np.ascontiguousarray(rows).view(np.uint8)


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


@dataclass
class _Run:
    """The one run an agent holds: configured, then running (a session), then finished."""

    run_id: str
    role: str
    #: The canonical engine configuration (every default filled in).
    config: dict[str, Any]
    session: Session | None = None
    #: Stopped early (Stop, the lease, a signal): the result says interrupted.
    stopped: bool = False
    expired: bool = False
    #: When the engine was seen finished (time.monotonic()).
    finished_at: float | None = None
    #: Pauses (the coordinator's rounds) move the schedule's end: CLOCK_MONOTONIC ns.
    paused_at: int | None = None
    paused_ns: int = 0
    #: Each interval's finished count as last sent, and how many stalls were sent.
    done_sent: dict[int, int] = field(default_factory=dict)
    stalls_sent: int = 0
    #: The secret a call must carry to renew the lease (ConfigureReply.lease_key).
    lease_key: str = field(default_factory=lambda: secrets.token_hex(16))
    #: Its index among the run's agents (ConfigureRequest.agent_index): the rows' keys.
    agent_index: int = 0
    #: The rows taken from the engine for the coordinator meanwhile, from the start; None for a
    #: run that keeps none (a load agent).
    held: Held | None = None

    def keyed(self, request) -> bool:
        """Does ``request`` name this run with its lease key?"""
        return (getattr(request, "run_id", None) == self.run_id
                and secrets.compare_digest(getattr(request, "lease_key", ""), self.lease_key))

    def end_by_ns(self) -> int:
        """When the engine should have ended, on CLOCK_MONOTONIC: the schedule, its pauses, the
        drain (the timeout) and a margin."""
        assert self.session is not None
        paused = self.paused_ns + (_core.now_ns() - self.paused_at if self.paused_at is not None else 0)
        return (self.session.start_mono_ns + self.config["duration_ns"] + paused + self.config["timeout_ns"]
                + FINISH_MARGIN_NS)


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


def _answers(call: str):
    """A unary call: a TailwiseError goes back as its status (``wire.abort``), said once; one that
    succeeds with the run's lease key renews the lease."""
    def wrap(fn):
        @functools.wraps(fn)
        def handler(self: AgentServer, request, context: grpc.ServicerContext):
            with self._admitted(context):
                try:
                    reply = fn(self, request, context)
                except TailwiseError as e:
                    self._refuse(call, request, context, e)
                self._renew_for(request)
                return reply
        return handler
    return wrap


def _streams(call: str):
    """A streaming call: the method returns (meta, parts), sent in chunks after every lock is
    released; None: the caller went away, nothing to send."""
    def wrap(fn):
        @functools.wraps(fn)
        def handler(self: AgentServer, request, context: grpc.ServicerContext) -> Iterator[pb.Chunk]:
            with self._admitted(context):
                try:
                    answer = fn(self, request, context)
                except TailwiseError as e:
                    self._refuse(call, request, context, e)
                    return
                self._renew_for(request)
            if answer is not None:
                yield from wire.chunks(*answer)
        return handler
    return wrap


def peer_host(peer: str) -> str:
    """gRPC's peer name (``ipv4:10.0.0.7:51234``, ``ipv6:[::1]:51234``) without its port."""
    return peer.rsplit(":", 1)[0] if peer.startswith(("ipv4:", "ipv6:")) else peer


class AgentServer(agent_pb2_grpc.AgentServicer):
    """The agent service's calls (agent.proto says what each does) around one session at a time."""

    def __init__(self, limits: Limits = Limits(), cpus: list[int] | None = None,
                 on_event: Callable[[Event], None] | None = None):
        self.limits = limits
        self.cpus = sorted(os.sched_getaffinity(0) if cpus is None else cpus)
        self._on_event = on_event
        self._lock = threading.Lock()
        self._run: _Run | None = None
        self._last_call = time.monotonic()
        # Calls in progress and refusals said, by peer address (under their own lock: Health and
        # a refusal never wait for the engine's).
        self._peers_lock = threading.Lock()
        self._calls: dict[str, int] = {}
        self._refusals: dict[str, tuple[float, int]] = {}
        self._closing = threading.Event()
        self._watchdog = threading.Thread(target=self._watch, name="tailwise-agent-lease", daemon=True)
        self._watchdog.start()

    # ------------------------------------------------------------------ plumbing

    def renew(self) -> None:
        """The run's coordinator called: the lease starts again."""
        self._last_call = time.monotonic()

    def _refuse(self, call: str, request, context: grpc.ServicerContext, e: TailwiseError) -> None:
        """Say the refusal once, then end the call with it (``wire.abort`` raises)."""
        self._emit(Refused(call, getattr(request, "run_id", ""), e.line(), context.peer()))
        wire.abort(context, e)

    def _renew_for(self, request) -> None:
        """Renew the lease if ``request`` (which succeeded) carries the current run's lease key."""
        run = self._run
        if run is not None and run.keyed(request):
            self.renew()

    @contextlib.contextmanager
    def _admitted(self, context: grpc.ServicerContext):
        """Count the call against its peer's ``MAX_CALLS_PER_PEER``; over it, RESOURCE_EXHAUSTED."""
        peer = peer_host(context.peer())
        with self._peers_lock:
            held = self._calls.get(peer, 0)
            if held < MAX_CALLS_PER_PEER:
                self._calls[peer] = held + 1
        if held >= MAX_CALLS_PER_PEER:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                          f"{held} calls from {peer} are in progress already, the most one address may have "
                          f"({MAX_CALLS_PER_PEER}); wait for them to end")
        try:
            yield
        finally:
            with self._peers_lock:
                self._calls[peer] -= 1
                if not self._calls[peer]:
                    del self._calls[peer]

    def refused_token(self, method: str, peer: str) -> None:
        """Say a refused token, at most once every ``REFUSED_SAY_S`` per address, with the count of
        those not said since."""
        host, now = peer_host(peer), time.monotonic()
        with self._peers_lock:
            said_at, unsaid = self._refusals.get(host, (-math.inf, 0))
            if now - said_at < REFUSED_SAY_S:
                self._refusals[host] = (said_at, unsaid + 1)
                return
            self._refusals[host] = (now, 0)
            if len(self._refusals) > MAX_PEERS_REMEMBERED:  # many addresses: forget the oldest
                del self._refusals[min(self._refusals, key=lambda h: self._refusals[h][0])]
        self._emit(Refused(method.rsplit("/", 1)[-1], "", "missing or wrong token", peer, unsaid))

    def _emit(self, event: Event) -> None:
        if self._on_event is not None:
            self._on_event(event)

    def _state(self) -> str:
        """idle, configured, running or finished (under the lock)."""
        run = self._run
        if run is None:
            return "idle"
        if run.session is None:
            return "configured"
        if run.session.is_finished():
            if run.finished_at is None:
                run.finished_at = time.monotonic()
            return "finished"
        return "running"

    def _current(self, run_id: str, *states: str) -> _Run:
        """The run ``run_id`` names, in one of ``states`` (under the lock); else InputError."""
        run = self._run
        if run is None or run.run_id != run_id:
            holds = "is idle" if run is None else f"holds run {run.run_id!r}"
            raise InputError(f"no run {run_id!r} on this agent (it {holds})",
                             "Configure the run first (an agent drops a run whose coordinator was silent for its lease)")
        state = self._state()
        if state not in states:
            raise InputError(f"run {run_id!r} is {state}, not {' or '.join(states)}",
                             "call Configure, Start, then Progress/Snapshot/Pause/Resume/Stop, then Finish")
        return run

    # ------------------------------------------------------------------ calls without a run

    def Health(self, request, context):
        with self._lock:
            state = self._state()
            run_id = self._run.run_id if self._run else ""
        return pb.HealthReply(version=_core.__version__, hostname=socket.gethostname(), cpus=self.cpus, state=state,
                              run_id=run_id, limits=self.limits.message())

    def Clock(self, request, context):
        return pb.ClockReply(mono_ns=_core.now_ns(), realtime_ns=time.time_ns())

    @_answers("Configure")
    def Configure(self, request, context):
        if not request.run_id:
            raise InputError("Configure names no run", "the coordinator gives every run an id")
        config = _for_role(json.loads(_core.check_engine_config(request.engine_config)), request.role)
        self.limits.check(config, len(self.cpus))
        canonical = _core.check_engine_config(json.dumps(config))
        config = json.loads(canonical)
        LoadSpec.from_engine_config(config)  # what Start will run
        if request.agent_index >= AGENT_THREADS:
            raise InputError(f"agent index {request.agent_index:,} is over the {AGENT_THREADS - 1:,} a run may number",
                             "the coordinator numbers its agents from 0")
        with self._lock:
            state = self._state()
            if state in ("running", "finished"):
                held = self._run.run_id if self._run else ""
                raise InputError(f"this agent is busy with run {held!r} ({state})",
                                 "one run at a time: Finish or Stop that run, wait for its lease to end, "
                                 "or use another agent")
            self._run = run = _Run(request.run_id, request.role, config, agent_index=request.agent_index)
            self.renew()
        probe = config.get("probe") or {}
        self._emit(Configured(request.run_id, request.role, config["rate_rps"], probe.get("rate_rps", 0.0),
                              tuple(config["targets"]), config["conns"] + probe.get("conns", 0), config["duration_ns"]))
        return pb.ConfigureReply(engine_config=canonical, lease_key=run.lease_key)

    # ------------------------------------------------------------------ a run's calls

    @_answers("Start")
    def Start(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "configured")
            now = _core.now_ns()
            at = request.start_at_mono_ns or run.config.get("start_at_ns") or 0
            if at and at - now > MAX_START_AHEAD_NS:
                raise InputError(f"start at {fmt_ns(at - now)} from now on this agent's clock is over "
                                 f"{fmt_ns(MAX_START_AHEAD_NS)} ahead",
                                 "start at the agent's CLOCK_MONOTONIC (the Clock call gives it) plus a short barrier")
            config = run.config | {"start_at_ns": at or None}
            # The agent process handles its own signals: the session is not the signal handler's.
            run.session = LocalAgent().start(LoadSpec.from_engine_config(config), on_signal=False)
            # The rows are bounded by ``Held`` (or by the coordinator): Finish sends every row not yet taken.
            run.session.unbounded()
            if per_s := rows_per_s(run.config):
                run.held = Held(run.agent_index, self.limits.max_rows(run.config), per_s)
                run.session.thin_rows(run.held.engine_rows, run.agent_index * AGENT_THREADS)
            start = run.session.start_mono_ns
            now = _core.now_ns()
        self._emit(Started(run.run_id, start, max(0, start - now)))
        return pb.StartReply(start_mono_ns=start)

    def _progress(self, run: _Run) -> pb.ProgressReply:
        """The run's live counters (under the lock)."""
        s = run.session
        assert s is not None
        counters = dict(s.snapshot())
        finished = s.is_finished()
        elapsed = counters.get("elapsed_ns", 0) if finished else s.elapsed_ns()
        return pb.ProgressReply(counters=json.dumps(counters), finished=finished, in_flight=s.in_flight(),
                                elapsed_ns=max(0, elapsed))

    @_answers("Progress")
    def Progress(self, request, context):
        with self._lock:
            return self._progress(self._current(request.run_id, "running", "finished"))

    @_answers("Pause")
    def Pause(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "running")
            run.session.pause()
            if run.paused_at is None:
                run.paused_at = _core.now_ns()
            return self._progress(run)

    @_answers("Resume")
    def Resume(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "running", "finished")
            run.session.resume()
            if run.paused_at is not None:
                run.paused_ns += _core.now_ns() - run.paused_at
                run.paused_at = None
            return self._progress(run)

    @_answers("Stop")
    def Stop(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "running", "finished")
            stopping = self._state() == "running" and not run.stopped
            run.session.stop()
            run.stopped = run.stopped or stopping
            reply = self._progress(run)
        if stopping:
            self._emit(Stopped(run.run_id))
        return reply

    def _intervals(self, run: _Run, pending: bool) -> tuple[list[int], list[tuple[str, bytes]]]:
        """The interval histograms to send (under the lock): finished requests' of every interval
        whose count changed since the last time, or those of every interval with requests
        outstanding now."""
        intervals = run.session.intervals
        counts = dict(intervals.counts(pending=pending))
        if pending:
            indices = sorted(i for i, n in counts.items() if n)
        else:
            indices = sorted(i for i, n in counts.items() if run.done_sent.get(i) != n)
            run.done_sent.update((i, counts[i]) for i in indices)
        kind = "pending" if pending else "done"
        return indices, [(f"{kind}:{i}", h) for i, h in zip(indices, intervals.encoded(indices, pending=pending))]

    @_streams("Snapshot")
    def Snapshot(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "running", "finished")
            raw = run.session.take_batch()
            if run.held is not None:
                run.held.taken_at = run.held.collected_at = time.monotonic()
            stalls = run.session.engine_stalls[run.stalls_sent:]
            run.stalls_sent += len(stalls)
            done, done_parts = self._intervals(run, pending=False)
            pending, pending_parts = self._intervals(run, pending=True)
        rows, outstanding, level = decode_samples(raw["samples"]), decode_samples(raw["pending"]), 0
        if run.held is not None:
            rows, outstanding, level = run.held.hand_over(rows, outstanding, raw.get("thinned_level", 0))
        meta = {"snap_ns": raw["snap_ns"], "complete": raw["complete"], "counters": dict(raw["counters"]),
                "engine_stalls": [list(p) for p in stalls], "done": done, "pending": pending,
                "thinned_level": level}
        return meta, [("samples", _bytes_of(rows)), ("pending", _bytes_of(outstanding)), *done_parts, *pending_parts]

    @_streams("Finish")
    def Finish(self, request, context):
        with self._lock:
            run = self._current(request.run_id, "running", "finished")
        if not self._await_end(run, context, renews=run.keyed(request)):
            return None  # the coordinator went away: the run waits for another Finish, or its lease
        with self._lock:
            if self._run is not run:
                raise InputError(f"run {run.run_id!r} was dropped while Finish waited", "run it again")
            result = run.session.finish(interrupted=run.stopped)
            done, done_parts = self._intervals(run, pending=False)
            self._run = None
        self._emit(Finished(run.run_id, result.counters.get("sent", 0), result.counters.get("received", 0),
                            result.error, result.interrupted))
        rows, level = result.samples, 0
        if run.held is not None:
            rows, _, level = run.held.hand_over(rows, rows[:0], run.session.thinned_level)
        meta = result_meta(result) | {"start_mono_ns": run.session.start_mono_ns, "done": done, "thinned_level": level}
        parts = [("latency_hist", result.latency_hist), ("send_lag_hist", result.send_lag_hist),
                 ("send_lag_unstalled_hist", result.send_lag_unstalled_hist),
                 ("samples", _bytes_of(rows)), *done_parts]
        if (fine := result.packet_hist) is not None:
            # Packet mode: the 100 ns bins go as a part of their own, their shape in the meta.
            meta["packet_hist"] = {k: v for k, v in fine.items() if k != "counts"}
            parts.append(("packet_hist", fine["counts"]))
        return meta, parts

    def _await_end(self, run: _Run, context: grpc.ServicerContext, renews: bool) -> bool:
        """Wait until ``run``'s engine ended, renewing the lease while the caller (with the run's
        lease key: ``renews``) waits; False when
        the caller went away first. Bounded: past the schedule's end, the drain and a margin the
        engine is stopped, and after as long again HostError."""
        stopped_at: int | None = None
        while True:
            with self._lock:
                if self._run is not run or run.session.is_finished():
                    return True
                now = _core.now_ns()
                if stopped_at is None and now > run.end_by_ns():
                    run.session.stop()
                    run.stopped, stopped_at = True, now
                elif stopped_at is not None and now - stopped_at > run.config["timeout_ns"] + FINISH_MARGIN_NS:
                    raise HostError(f"run {run.run_id!r}: the engine did not end {fmt_ns(now - stopped_at)} after "
                                    f"it was stopped", "restart the agent (and report this)")
            if not context.is_active():
                return False
            if renews:
                self.renew()
            time.sleep(POLL_S)

    # ------------------------------------------------------------------ the lease

    def _watch(self) -> None:
        tick = min(POLL_S * 2, self.limits.lease_ns / 1e9 / 10)
        while not self._closing.wait(tick):
            with self._lock:
                event = self._check_lease()
            if event is not None:
                self._emit(event)
            try:
                event = self._keep()
            except TailwiseError:
                event = None  # the engine's problem: the coordinator's next call meets it
            if event is not None:
                self._emit(event)

    def _keep(self) -> Event | None:
        """The keeper: take a running engine's rows into ``Held`` when nobody has for its
        ``every_s``; the first time they are thinned, say so."""
        with self._lock:
            run = self._run
            held = run.held if run is not None else None
            if held is None or self._state() != "running" or time.monotonic() - held.taken_at < held.every_s:
                return None
            if not held.lock.acquire(blocking=False):
                return None  # a Snapshot is handing the rows over: they are being taken
            try:
                # Only the finished rows: the keeper holds no pending ones (a Snapshot takes its
                # own), and a thread far behind would censor up to a ring of packets into them.
                raw = run.session.take_batch(pending=False)
            except BaseException:
                held.lock.release()
                raise
            held.taken_at = time.monotonic()
        try:
            held.add(decode_samples(raw["samples"]), raw.get("thinned_level", 0))
            if not held.level or held.said:
                return None
            held.said, one_in = True, 1 << held.level
        finally:
            held.lock.release()
        return Thinned(run.run_id, one_in, held.max_rows, int((time.monotonic() - held.collected_at) * 1e9),
                       self.limits.max_memory, self.limits.memory_from)

    def _check_lease(self) -> Event | None:
        """Stop a running load whose coordinator is silent for the lease; drop a run nobody
        collects (or starts) within a lease (under the lock)."""
        run = self._run
        if run is None:
            return None
        now = time.monotonic()
        lease_s = self.limits.lease_ns / 1e9
        silent = now - self._last_call
        state = self._state()
        if state == "running" and silent > lease_s and not run.expired:
            run.session.stop()
            run.stopped = run.expired = True
            return LeaseExpired(run.run_id, int(silent * 1e9), self.limits.lease_ns)
        if state == "configured" and silent > lease_s:
            self._run = None
            return Dropped(run.run_id, state, self.limits.lease_ns)
        if state == "finished" and now - max(self._last_call, run.finished_at or now) > lease_s:
            run.session.finish(interrupted=run.stopped)  # joins the engine's threads: nothing left behind
            self._run = None
            return Dropped(run.run_id, state, self.limits.lease_ns)
        return None

    # ------------------------------------------------------------------ shutting down

    def stop_load(self, why: str) -> None:
        """Stop a running load and wait for its end (bounded): before the agent goes away."""
        with self._lock:
            run = self._run
            if run is not None and run.session is not None:
                run.session.stop()
                run.stopped = True
        self._emit(Closing(why, run.run_id if run else None))
        if run is None or run.session is None:
            return
        deadline = time.monotonic() + (run.config["timeout_ns"] + FINISH_MARGIN_NS) / 1e9
        while time.monotonic() < deadline:
            with self._lock:
                if self._run is not run or run.session.is_finished():
                    return
            time.sleep(POLL_S)

    def close(self) -> None:
        """The watchdog stopped and a finished engine joined; the server is gone by then."""
        self._closing.set()
        self._watchdog.join(timeout=5)
        with self._lock:
            run, self._run = self._run, None
            if run is not None and run.session is not None and run.session.is_finished():
                run.session.finish(interrupted=True)


def result_meta(result: AgentResult) -> dict[str, Any]:
    """Every field of an agent's result but the binary ones (sent as parts), as JSON values."""
    return {f.name: getattr(result, f.name) for f in fields(AgentResult) if f.name not in BINARY_FIELDS}


class TokenCheck(grpc.ServerInterceptor):
    """No token, no service: a call without the agent's token (``wire.token_matches``, constant
    time) ends UNAUTHENTICATED before it reaches the service — and before its body is read: the
    refusal is a stream-request handler that never reads its request, where a unary one would hold
    a pool thread until the body came (16 half-open calls held all 16 and froze Health)."""

    def __init__(self, token: str, on_refused: Callable[[str, str], None]):
        self._token = token
        self._on_refused = on_refused

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if wire.token_matches(handler_call_details.invocation_metadata or (), self._token):
            return handler
        if handler is None:
            return None
        method = handler_call_details.method

        def deny(requests, context):
            self._on_refused(method, context.peer())
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong token")

        if handler.response_streaming:
            return grpc.stream_stream_rpc_method_handler(deny)
        return grpc.stream_unary_rpc_method_handler(deny)


def serve(servicer: AgentServer, token: str, listen: str, tls: tuple[bytes, bytes, bytes | None] | None = None,
          max_workers: int = 16) -> tuple[grpc.Server, int]:
    """Start the gRPC server for ``servicer`` on ``listen`` (HOST:PORT; port 0: a free one), with
    TLS from (certificate chain, private key, client CA or None) PEM when given: with a client CA,
    mutual TLS (a client without a certificate that chains to it is refused in the handshake, as
    kubelet's --client-ca-file does). Returns the server and its port."""
    server = grpc.server(
        ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tailwise-agent"),
        interceptors=[TokenCheck(token, servicer.refused_token)],
        # Two agents on one port must not share it (gRPC sets SO_REUSEPORT by default).
        options=[("grpc.so_reuseport", 0), *SERVER_OPTIONS],
        maximum_concurrent_rpcs=4 * max_workers)
    agent_pb2_grpc.add_AgentServicer_to_server(servicer, server)
    try:
        if tls is None:
            port = server.add_insecure_port(listen)
        else:
            cert, key, client_ca = tls
            port = server.add_secure_port(listen, grpc.ssl_server_credentials(
                [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None))
    except RuntimeError:
        port = 0
    if not port:
        why = "in use, or not an address of this host" + (", or a TLS key that is not the certificate's" if tls else "")
        raise HostError(f"cannot listen on {listen} ({why})",
                        "choose another --listen HOST:PORT (agents on one host need ports of their own)"
                        + (" and check --tls-cert and --tls-key" if tls else ""))
    server.start()
    return server, port
