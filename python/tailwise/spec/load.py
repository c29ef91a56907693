"""`LoadSpec`: what one agent is asked to do — the engine's whole configuration, as the
coordinator gives it (`RunSpec.load_spec`) and an agent receives it.

Its fields are the engine configuration's own (``EngineConfig`` in
crates/tailwise-core/src/engine/config.rs), named alike, and their defaults are read from there
(``_core.ENGINE_DEFAULTS``), never written again here: ``to_json()`` is what ``_core.Engine`` and
an agent's ``configure`` take, and tests/unit/test_spec.py holds the two types to the same fields.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tailwise import _core
from tailwise.spec.target import HIDDEN, Secret
from tailwise.spec.workload import Workload

#: Every field of the engine's configuration with its default: the one definition of them.
ENGINE: dict[str, Any] = _core.ENGINE_DEFAULTS
#: The probe's seed is the run's with these bits flipped (engine/control.rs, ``probe_config``).
PROBE_SEED = 0x9B0BE000


@dataclass(frozen=True)
class Probe:
    """The latency probe (--probe; engine/config.rs, ``Probe``): its own connections with one
    request outstanding each, Poisson at its own rate."""

    conns: int
    rate_rps: float


@dataclass(frozen=True)
class TestStall:
    """Tests only (a build with the test-hooks feature): each engine thread stops for ``for_ns``,
    first ``at_ns`` into the schedule, then every ``every_ns``, ``count`` times."""

    __test__ = False  # not a pytest class

    at_ns: int
    for_ns: int
    every_ns: int
    count: int


def protocol(scheme: str, *, service_ns: int | None = None, host: str = "", path: str = "/",
             size: int | None = None, flows: int | None = None, requests: list[dict[str, Any]] | None = None,
             draw: str = "turn", auth: dict[str, Any] | None = None) -> dict[str, Any]:
    """A configuration's ``protocol``: the scheme with the parameters that protocol has. http's
    ``requests`` (``HttpRequest.spec()``, spec/requests.py), when given, replace ``GET path``;
    redis's ``auth`` and ``db`` (``Target.protocol_auth()``) are added as given."""
    if scheme.split("+")[0] == "redis":
        return {"scheme": scheme} | (auth or {})
    if scheme == "udp+flow":
        return {"scheme": scheme, "size": size if size is not None else _core.PACKET_SIZE,
                "flows": flows if flows is not None else _core.PACKET_FLOWS}
    if scheme == "synthetic":
        return {"scheme": scheme, "service_ns": service_ns}
    if scheme == "http" and requests:
        # As the engine writes it back: draw only when not in turn (its default).
        return {"scheme": scheme, "host": host, "requests": requests} | ({"draw": draw} if draw != "turn" else {})
    if scheme == "http":
        return {"scheme": scheme, "host": host, "path": path}
    if scheme == "udp":
        return {"scheme": scheme, "size": size if size is not None else _core.UDP_SIZE}
    return {"scheme": scheme}


def hidden(proto: dict[str, Any]) -> dict[str, Any]:
    """A ``protocol`` whose redis password is a ``Secret``: ``***`` in any repr."""
    auth = proto.get("auth")
    if isinstance(auth, dict) and isinstance(auth.get("password"), str):
        return proto | {"auth": auth | {"password": Secret(auth["password"])}}
    return proto


def redacted(config: dict[str, Any]) -> dict[str, Any]:
    """An engine configuration as it may be shown, written or sent back: its redis password ``***``."""
    proto = config.get("protocol")
    if isinstance(proto, dict) and isinstance(proto.get("auth"), dict):
        return config | {"protocol": proto | {"auth": proto["auth"] | {"password": HIDDEN}}}
    return config


@dataclass(frozen=True)
class LoadSpec:
    """What one agent is asked to do."""

    targets: list[str]  # "ip:port"
    rate_rps: float
    duration_ns: int
    threads: int = ENGINE["threads"]
    conns: int = ENGINE["conns"]
    outstanding: int = ENGINE["outstanding"]
    arrival: str = ENGINE["arrival"]
    sample_every: int = ENGINE["sample_every"]
    timeout_ns: int = ENGINE["timeout_ns"]
    late_ns: int = ENGINE["late_ns"]
    connect_timeout_ns: int = ENGINE["connect_timeout_ns"]
    #: A target that stays unreachable this long (refused, or closing before replying) ends the run.
    unreachable_ns: int = ENGINE["unreachable_ns"]
    seed: int = ENGINE["seed"]
    pin: bool = ENGINE["pin"]
    busy_poll: bool = ENGINE["busy_poll"]
    #: --poll lean: a reply whose stamp is exact however late it is read waits for the next send's wake-up.
    replies_wait: bool = ENGINE["replies_wait"]
    test_stall: TestStall | None = None
    #: Receive times: "kernel" (SO_TIMESTAMPING software stamps), "nic" or "user" (the clock after read).
    timestamps: str = ENGINE["timestamps"]
    #: The scheme and its parameters (``protocol()``).
    protocol: dict[str, Any] = field(default_factory=lambda: dict(ENGINE["protocol"]))
    workload: Workload = field(default_factory=Workload)
    probe: Probe | None = None
    #: False: the requests are counted, not timed (a load agent beside agents that measure).
    timed: bool = ENGINE["timed"]
    #: The schedule's time zero on the engine host's CLOCK_MONOTONIC (agents started together).
    start_at_ns: int | None = None
    #: TLS to the target (spec/tls.py's ``TlsSpec.engine()``: ca_file, insecure, cert_file,
    #: key_file, sni, alpn, resume); None: plaintext.
    tls: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # A redis password, however given, is *** in this spec's repr.
        object.__setattr__(self, "protocol", hidden(self.protocol))

    @classmethod
    def from_engine_config(cls, config: dict[str, Any]) -> LoadSpec:
        """The inverse of ``engine_config`` (an agent's side of the wire)."""
        d = dict(config)
        d["workload"] = Workload(**d["workload"])
        d["probe"] = Probe(**d["probe"]) if d.get("probe") else None
        d["test_stall"] = TestStall(**d["test_stall"]) if d.get("test_stall") else None
        return cls(**d)

    def probe_only(self) -> LoadSpec:
        """What a probe agent runs (agents/group.py, agents/limits.py): the probe alone, as the
        engine's probe thread runs it (engine/control.rs, ``probe_config``) — its connections, one
        request outstanding each, Poisson at the probe's rate, every request kept, spinning."""
        if self.probe is None:
            raise ValueError("probe_only() of a spec without a probe")
        return replace(self, rate_rps=self.probe.rate_rps, threads=1, conns=self.probe.conns, outstanding=1,
                       arrival="exp", sample_every=1, busy_poll=True, probe=None, seed=self.seed ^ PROBE_SEED, timed=True)

    def engine_config(self) -> dict[str, Any]:
        """The engine configuration: every field by its name (``tls`` left out in the clear: absent
        is plaintext, as the engine reads it)."""
        config = asdict(self)
        if config["tls"] is None:
            del config["tls"]
        return config

    def to_json(self) -> str:
        return json.dumps(self.engine_config())

    @property
    def scheme(self) -> str:
        return self.protocol["scheme"]

    # What the statistics see. With a probe, the timed requests are the probe's (Poisson, every
    # one kept) while the target is offered the load and the probe together.
    @property
    def offered_rps(self) -> float:
        return self.rate_rps + (self.probe.rate_rps if self.probe else 0.0)

    @property
    def timed_arrival(self) -> str:
        return "exp" if self.probe else self.arrival

    @property
    def timed_sample_every(self) -> int:
        return 1 if self.probe else self.sample_every
