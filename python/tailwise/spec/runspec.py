"""One run's specification: every setting of `tailwise run`, parsed once and validated.

Settings come from flags over a workload file over defaults (`workload.resolve`), named as the
flags. `RunSpec.parse` turns them into checked values — every problem one `InputError` naming the
fix — and keeps the resolved settings themselves (with the seed chosen), so that a spec written
as JSON (`to_json`) parses back to the same spec (`from_json`) and a run can be repeated or
resumed from its summary's `config.spec`. `run` uses it, and so will `sweep` and the agents; the
CLI only maps flags onto it.
"""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass, field
from typing import Any

from tailwise.spec.load import ENGINE, LoadSpec, Probe, TestStall, protocol
from tailwise.spec.requests import HttpRequest, draw, http_requests
from tailwise.errors import HostError, InputError
from tailwise import _core
from tailwise.spec.target import KEYED, PACKET, REDIS, UDP_SIZE, Target, parse_targets, redact, with_password
from tailwise.spec.tls import TlsSpec, tls_settings
from tailwise.spec.units import parse_arrival, parse_dist, parse_rate, parse_time_ns
from tailwise.spec.workload import DEFAULT_CI, DEFAULTS, Workload, load_file, resolve
from tailwise.stats import DEFAULT_PERCENTILES, PACKET_PERCENTILES
from tailwise.warning import TimeCapped

#: An upper bound on --duration and --max-time from the environment (the README test sets it).
TIME_CAP_ENV = "TAILWISE_TIME_CAP"
#: Without --sample-every, the engine keeps at most this many raw samples per second, so that a
#: methodology round on everything collected stays around a second.
AUTO_SAMPLES_PER_S = 20_000
#: The built-in server's service time without --service.
BUILTIN_SERVICE = "fixed:10us"
#: A target refusing connections (or closing them before any reply) this long (the engine's
#: default), or twice --timeout if longer, ends the run: a restart takes less, a dead server more.
UNREACHABLE_NS: int = ENGINE["unreachable_ns"]
TIMESTAMPS = ("auto", "nic", "kernel", "user")
#: --poll: spin (busy-poll), block (sleep to each send; a reply wakes the engine), lean (block, and
#: a reply whose stamp is exact however late it is read waits for the next send's wake-up).
POLLS = ("spin", "block", "lean")
#: --bounds: how a request tailwise delayed is bounded below (stats/bounds.py).
BOUNDS = ("busy", "floor")


def check_choices(st: dict[str, Any]) -> str:
    """The settings that name one of a few choices (--poll, --timestamps, --bounds), checked; the
    bounds rule (None: busy)."""
    if st["poll"] not in POLLS:
        raise InputError(f"poll = {st['poll']!r} is unknown", f"use one of {', '.join(POLLS)}")
    if st["timestamps"] not in TIMESTAMPS:
        raise InputError(f"--timestamps {st['timestamps']} is unknown", f"use one of {', '.join(TIMESTAMPS)}")
    bounds = str(st.get("bounds") or "busy")
    if bounds not in BOUNDS:
        raise InputError(f"--bounds {bounds} is unknown", "use busy (the default: the client's stall time in each "
                         "request's busy period) or floor (the run's least latency)")
    return bounds
#: Flags that only apply to keyed protocols (memcached, redis).
KEY_FLAGS = {"keys": "--keys", "key_size": "--key-size", "value_size": "--value-size", "popularity": "--popularity",
             "mix": "--mix"}
#: Flags that only apply to packet mode (udp+flow://).
PACKET_FLAGS = {"size": "--size", "flows": "--flows", "max_loss": "--max-loss"}


def default_percentiles(st: dict[str, Any]) -> tuple[float, ...]:
    """The percentiles reported without --percentiles: a packet run's reach to p99.9999."""
    targets = st.get("targets") or ()
    if isinstance(targets, str):
        targets = [targets]
    packet = any(str(t).lower().startswith(f"{PACKET}://") for t in targets)
    return PACKET_PERCENTILES if packet else DEFAULT_PERCENTILES


def packet_settings(st: dict[str, Any], scheme: str | None, given: set[str] | frozenset[str]
                    ) -> tuple[int | None, int | None, float | None]:
    """--size, --flows and --max-loss of a udp+flow:// run (None, None, None for other schemes;
    given for one, refused in one line: ``scheme`` None is the built-in server)."""
    if scheme != PACKET:
        flag = next((f for name, f in PACKET_FLAGS.items() if name in given), None)
        if flag and scheme is None:
            raise InputError(f"{flag} needs a udp+flow://HOST:PORT target: there is no built-in reflector",
                             "start `tailwise serve --udp-reflect` (or another reflector) and give its address")
        if flag:
            raise InputError(f"{flag} does not apply to {scheme}://", "it is for udp+flow:// (packet mode) targets")
        return None, None, None
    size = int(st["size"]) if st.get("size") is not None else _core.PACKET_SIZE
    flows = int(st["flows"]) if st.get("flows") is not None else _core.PACKET_FLOWS
    max_loss = float(st.get("max_loss", DEFAULTS["max_loss"]))
    low, high = _core.PACKET_SIZE_MIN, _core.PACKET_SIZE_MAX
    if not low <= size <= high:
        raise InputError(f"--size {size} is outside {low}..{high} bytes",
                         f"give the Ethernet frame size from {low} (the minimum frame) to {high} (a jumbo frame)")
    if not 1 <= flows <= _core.PACKET_FLOWS_MAX:
        raise InputError(f"--flows {flows} is outside 1..{_core.PACKET_FLOWS_MAX}",
                         f"give from 1 to {_core.PACKET_FLOWS_MAX} flows")
    if not 0.0 <= max_loss <= 1.0:
        raise InputError(f"--max-loss {max_loss} is outside [0, 1]", "give a ratio, e.g. --max-loss 0.001 (0.1 %)")
    return size, flows, max_loss


def positive(name: str, value: int) -> int:
    if value < 1:
        raise InputError(f"{name} {value} must be at least 1", f"give {name} 1 or more")
    return value


def confidence_level(value: float) -> float:
    if not 0.5 <= value < 1.0:
        raise InputError(f"--confidence {value} is outside [0.5, 1)", "give e.g. --confidence 0.95")
    return value


def parse_percentiles(value: Any) -> tuple[float, ...] | None:
    """--percentiles: "50,95,99,99.9" (or a TOML list of numbers) → (50.0, 95.0, 99.0, 99.9);
    None: the defaults. Each in (0, 100); order and repeats do not matter."""
    if value is None:
        return None
    items = value if isinstance(value, (list, tuple)) else str(value).replace(" ", "").split(",")
    out = set()
    for x in items:
        try:
            p = float(str(x).removeprefix("p"))
        except ValueError:
            raise InputError(f"--percentiles {value}: {x!r} is not a number",
                             "give percents separated by commas, e.g. --percentiles 50,95,99,99.9") from None
        if not 0.0 < p < 100.0:
            raise InputError(f"--percentiles {value}: {x} is outside (0, 100)", "give e.g. --percentiles 50,95,99,99.9")
        out.add(p)
    if not out:
        raise InputError("--percentiles is empty", "give e.g. --percentiles 50,95,99,99.9")
    return tuple(sorted(out))


def parse_ci(text: str | None) -> tuple[float | None, float | None]:
    """--ci: "10us" → (10000.0, None); "5%" → (None, 0.05)."""
    if text is None:
        return None, None
    t = text.strip()
    if t.endswith("%"):
        try:
            rel = float(t[:-1]) / 100.0
        except ValueError:
            raise InputError(f"--ci {text} is not a percentage", "give e.g. --ci 5% or --ci 10us") from None
        if not 0.0 < rel < 1.0:
            raise InputError(f"--ci {text}: a share of the percentile's value must lie between 0 and 100 %",
                             "give e.g. --ci 5% or a time, --ci 10us")
        return None, rel
    return float(parse_time_ns(t, what="--ci", unit_required=True)), None


def hardware_stamping(addr: str) -> tuple[str, str | None]:
    """(the interface that routes to ``addr``, why NIC stamps cannot be used there, or None when
    they can). Only the driver can tell (SIOCGHWTSTAMP, ETHTOOL_GET_TS_INFO: a socket option alone
    is accepted silently and no stamp comes), and this process must be allowed to switch the
    interface to stamp every packet and to read its PTP clock (stamp/nic.rs)."""
    from tailwise import _core

    iface = "?"
    try:
        iface = _core.route_interface(addr)
        _core.hardware_timestamping(iface)
    except ValueError as e:  # addr does not resolve
        return iface, f"{iface} cannot stamp in hardware: {e}"
    except HostError as e:
        return iface, f"{iface} cannot stamp in hardware: {e.line()}"
    return iface, None


def timestamp_source(choice: str, addr: str) -> tuple[str, str | None]:
    """--timestamps (one of ``TIMESTAMPS``) → (the engine's source, "nic", "kernel" or "user"; why
    not a better one, or None): ``nic`` fails with the reason where the NIC cannot, ``auto`` takes
    the NIC where it can and falls back to kernel stamps otherwise, saying why."""
    if choice in ("kernel", "user"):
        return choice, None
    _, why = hardware_stamping(addr)
    if why is None:
        return "nic", None
    if choice == "nic":
        raise InputError(f"--timestamps nic: the interface to {addr}, {why}",
                         "use --timestamps kernel (software stamps taken on arrival) or auto")
    return "kernel", f"nic: {why}; kernel software stamps used"


def password_file(st: dict[str, Any], scheme: str, given: set[str] | frozenset[str]) -> str | None:
    """--redis-password-file for a redis target; given with another, passed on to be refused."""
    return st.get("redis_password_file") if scheme in REDIS or "redis_password_file" in given else None


@dataclass(frozen=True)
class RunSpec:
    """A validated run: the resolved ``settings`` (JSON-able, named as the flags) and what they
    mean, in the units the engine and the statistics take."""

    #: As given: a redis target's URL may hold its password (not in the repr; ``to_json`` hides it).
    settings: dict[str, Any] = field(repr=False)
    targets: tuple[Target, ...]
    scheme: str
    rate_rps: float
    duration_ns: int | None
    max_time_ns: int
    timeout_ns: int
    late_ns: int
    warmup_ns: int
    percentile: float
    ci_ns: float | None
    ci_rel: float | None
    confidence: float
    threads: int
    conns: int
    outstanding: int
    workers: int
    arrival: str
    busy_poll: bool
    replies_wait: bool  # --poll lean
    timestamps: str  # the choice (auto|nic|kernel|user); the engine's source is decided per target
    probe_conns: int
    probe_rate_rps: float
    sample_every: int
    workload: Workload
    service: str  # the built-in server's distribution
    service_ns: int | None  # carried in each synthetic request to an external server
    seed: int
    pin: bool
    keep_stalls: bool
    workload_file: str | None
    #: How the requests tailwise delayed are bounded below: "busy" or "floor" (stats/bounds.py).
    bounds: str = "busy"
    #: The percentiles to report, ``percentile`` among them (sorted).
    percentiles: tuple[float, ...] = ()
    #: A warning to give before the run (the time cap), or None.
    capped: TimeCapped | None = None
    #: Packet mode (udp+flow://): the frame size, the flows and the loss the loss check allows;
    #: None for other protocols.
    size: int | None = None
    flows: int | None = None
    max_loss: float | None = None
    #: http://: the requests (spec/requests.py); empty: GET of the target's path.
    requests: tuple[HttpRequest, ...] = ()
    #: TLS to the target (spec/tls.py); None: plaintext.
    tls: TlsSpec | None = None

    @classmethod
    def from_flags(cls, flags: dict[str, Any], workload_file: str | None, *, pin: bool | None = None,
                   keep_stalls: bool | None = None, also_report: tuple[float, ...] = ()) -> RunSpec:
        """Flags (None: not given) over the workload file over the defaults. ``also_report``: the
        percentiles that thresholds and SLOs judge, reported whatever --percentiles says."""
        flags = flags | {"pin": pin, "keep_stalls": keep_stalls}
        st = resolve(flags, load_file(workload_file))
        if also_report:
            st["percentiles"] = sorted({*(parse_percentiles(st["percentiles"]) or default_percentiles(st)), *also_report})
        given = {name for name, v in flags.items() if v is not None}
        return cls.parse(st | {"workload_file": workload_file}, given=given)

    @classmethod
    def from_json(cls, settings: dict[str, Any]) -> RunSpec:
        """A spec written by `to_json`, validated again."""
        return cls.parse(dict(settings))

    def to_json(self) -> dict[str, Any]:
        """The settings as written (a summary's ``config.spec``): a password in a target's URL
        as ``***``, which ``from_json`` reads as "from --redis-password-file or the environment"."""
        targets = self.settings.get("targets")
        if isinstance(targets, str):
            targets = redact(targets)
        elif targets:
            targets = [redact(t) for t in targets]
        return dict(self.settings) | {"targets": targets}

    @classmethod
    def parse(cls, st: dict[str, Any], given: set[str] | frozenset[str] = frozenset()) -> RunSpec:
        """Validate resolved settings; ``given``: the names set on the command line (a key flag
        given for a protocol without keys is refused; the same from a shared workload file is not)."""
        rate_rps = parse_rate(st["rate"])
        duration = st["duration"]
        duration_ns = parse_time_ns(str(duration), what="--duration") if duration is not None else None
        max_time_ns = parse_time_ns(str(st["max_time"]), what="--max-time")
        timeout_ns = parse_time_ns(str(st["timeout"]), what="--timeout")
        capped = None
        if cap := os.environ.get(TIME_CAP_ENV):
            # For the test that runs every README example as written, in seconds rather than minutes.
            cap_ns = parse_time_ns(cap, what=TIME_CAP_ENV)
            if (duration_ns or max_time_ns) > cap_ns:
                capped = TimeCapped(TIME_CAP_ENV, cap, cap_ns / 1e9)
            duration_ns = min(duration_ns, cap_ns) if duration_ns else None
            max_time_ns = min(max_time_ns, cap_ns)
        late_ns = parse_time_ns(str(st["late"]), what="--late", unit_required=True)
        warmup_ns = parse_time_ns(str(st["warmup"]), what="--warmup", allow_zero=True, unit_required=True)
        ci = st["ci"]
        ci_ns, ci_rel = parse_ci(str(ci) if ci is not None else (DEFAULT_CI if duration is None else None))
        percentile, confidence = float(st["percentile"]), float(st["confidence"])
        threads, conns, outstanding, workers = st["threads"], st["conns"], st["outstanding"], st["workers"]
        arrival = parse_arrival(st["arrival"])
        bounds = check_choices(st)
        if not 0.0 < percentile < 100.0:
            raise InputError(f"--percentile {percentile} is outside (0, 100)", "give e.g. --percentile 99")
        percentiles = tuple(sorted({*(parse_percentiles(st.get("percentiles")) or default_percentiles(st)), percentile}))
        probe_on = bool(st["probe"])
        probe_conns = int(st["probe_conns"]) if probe_on else 0
        probe_rps = parse_rate(st["probe_rate"], what="--probe-rate") if probe_on else 0.0
        if probe_on:
            positive("--probe-conns", probe_conns)
        sample_every = st["sample_every"]
        if sample_every is None:
            sample_every = max(1, math.ceil(rate_rps / AUTO_SAMPLES_PER_S))
        for name, v in (("--threads", threads), ("--conns", conns), ("--outstanding", outstanding),
                        ("--workers", workers), ("--sample-every", sample_every)):
            positive(name, v)
        confidence_level(confidence)
        tgts = tuple(parse_targets(st["targets"])) if st["targets"] else ()
        tgts, requests = http_requests(st, tgts, given)
        scheme = tgts[0].scheme if tgts else "synthetic"
        tgts = tuple(with_password(list(tgts), password_file(st, scheme, given)))
        tls = tls_settings(st, tgts, given)
        size, flows, max_loss = packet_settings(st, scheme if tgts else None, given)
        feeds, n = ("--flows", flows) if flows is not None else ("--conns", conns)  # each thread its own
        if n < threads:
            raise InputError(f"{feeds} {n} is below --threads {threads}", f"use {feeds} {threads} or more")
        work = Workload.from_settings(st)
        if tgts and not tgts[0].keyed:
            flags_given = [flag for name, flag in KEY_FLAGS.items() if name in given]
            if flags_given:
                raise InputError(f"{flags_given[0]} does not apply to {scheme}://",
                                 "key and value settings are for memcached and redis targets")
        service = st["service"]
        service_ns = None
        if tgts and service is not None:
            if scheme != "synthetic":
                raise InputError(f"--service with a {scheme}:// target", "the server decides its own service time: drop --service")
            dist, mean = parse_dist(service)
            if not dist.startswith("fixed:"):
                raise InputError(
                    f"--service {service} with an external server",
                    "a running server draws from its own distribution: give `tailwise serve --service` there, or --service fixed:T here",
                )
            service_ns = int(mean)
        service = service or BUILTIN_SERVICE
        parse_dist(service)
        seed = st["seed"] if st["seed"] is not None else random.SystemRandom().randrange(1, 2**63)
        return cls(
            settings=st | {"seed": seed}, targets=tgts, scheme=scheme, rate_rps=rate_rps, duration_ns=duration_ns,
            max_time_ns=max_time_ns, timeout_ns=timeout_ns, late_ns=late_ns, warmup_ns=warmup_ns,
            percentile=percentile, ci_ns=ci_ns, ci_rel=ci_rel, confidence=confidence, threads=threads, conns=conns,
            outstanding=outstanding, workers=workers, arrival=arrival, busy_poll=st["poll"] == "spin",
            replies_wait=st["poll"] == "lean", timestamps=str(st["timestamps"]), probe_conns=probe_conns, probe_rate_rps=probe_rps,
            sample_every=sample_every, workload=work, service=service, service_ns=service_ns, seed=seed,
            pin=bool(st.get("pin", True)), keep_stalls=bool(st.get("keep_stalls", False)),
            workload_file=st.get("workload_file"), capped=capped, percentiles=percentiles, bounds=bounds,
            size=size, flows=flows, max_loss=max_loss, requests=requests, tls=tls,
        )

    @property
    def builtin(self) -> bool:
        """No target: the built-in server, started for the run."""
        return not self.targets

    def precision(self):
        from tailwise.spec.precision import Precision

        return Precision(percentile=self.percentile, ci_ns=self.ci_ns, ci_rel=self.ci_rel, confidence=self.confidence,
                         max_time_s=self.max_time_ns / 1e9, warmup_ns=self.warmup_ns, percentiles=self.percentiles,
                         max_loss=self.max_loss)

    def load_spec(self, addrs: list[str], timestamps: str, test_stall: TestStall | None = None) -> LoadSpec:
        """What the engine is asked to do, once the target's addresses and the timestamp source
        (decided by the interface that routes to it) are known."""
        first = self.targets[0] if self.targets else None
        proto = protocol(self.scheme, service_ns=self.service_ns, host=first.netloc if first else "",
                         path=first.path if first and first.path else "/",
                         size=self.size if self.size is not None else (first.udp_size if first else UDP_SIZE), flows=self.flows,
                         requests=[r.spec() for r in self.requests] or None, draw=draw(list(self.requests)),
                         auth=first.protocol_auth() if first else None)
        return LoadSpec(
            targets=addrs, rate_rps=self.rate_rps, duration_ns=self.duration_ns or self.max_time_ns,
            threads=self.threads, conns=self.conns, outstanding=self.outstanding, arrival=self.arrival,
            sample_every=self.sample_every, timeout_ns=self.timeout_ns, late_ns=self.late_ns, seed=self.seed,
            pin=self.pin, busy_poll=self.busy_poll, replies_wait=self.replies_wait, protocol=proto, workload=self.workload,
            unreachable_ns=max(UNREACHABLE_NS, 2 * self.timeout_ns), test_stall=test_stall, timestamps=timestamps,
            probe=Probe(self.probe_conns, self.probe_rate_rps) if self.probe_conns else None,
            tls=self.tls.engine() if self.tls else None,
        )

    def config(self, command: str) -> dict[str, Any]:
        """The summary's ``config``: what was asked, in the units the tool uses, and ``spec``, the
        settings that parse back to this spec."""
        tgts = self.targets
        return {
            "command": command,
            "workload_file": self.workload_file,
            "target": tgts[0].url if tgts else None,
            "targets": [t.url for t in tgts],
            "protocol": self.scheme,
            "builtin_server": None if tgts else {"service": self.service, "workers": self.workers},
            "rate_rps": self.rate_rps,
            "mode": "fixed" if self.duration_ns else "adaptive",
            "duration_s": self.duration_ns / 1e9 if self.duration_ns else None,
            "percentile": self.percentile,
            "percentiles": list(self.percentiles),
            "ci_ns": self.ci_ns,
            "ci_rel": self.ci_rel,
            "confidence": self.confidence,
            "max_time_s": self.max_time_ns / 1e9,
            "threads": self.threads,
            "conns": self.conns,
            "outstanding": self.outstanding,
            "arrival": self.arrival,
            "workload": self.workload.as_json() if self.scheme in KEYED else None,
            "service": self.service if not tgts or self.service_ns is not None else None,
            "sample_every": self.sample_every,
            "timeout_ns": self.timeout_ns,
            "late_ns": self.late_ns,
            "warmup_ns": self.warmup_ns,
            "poll": self.settings["poll"],
            "probe": {"conns": self.probe_conns, "rate_rps": self.probe_rate_rps} if self.probe_conns else None,
            "packet": None if self.flows is None else {"size_bytes": self.size, "flows": self.flows,
                                                       "max_loss": self.max_loss},
            "timestamps": None,  # set once the target's interface is known (timestamp_source)
            "timestamps_note": None,
            "pin": self.pin,
            "keep_stalls": self.keep_stalls,
            "bounds": self.bounds,
            "seed": self.seed,
            "tls": self.tls.engine() if self.tls else None,
            "spec": self.to_json(),
        }
