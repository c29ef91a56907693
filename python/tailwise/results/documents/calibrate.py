"""The calibration (``tailwise.calibrate/1``): ``tailwise calibrate --json`` and summary.json under
its --out.

One definition: measure/calibrate.calibrate writes it through these models, and
docs/schema/calibrate.schema.json is generated from them (``python -m tailwise.results.documents``).
The class names are the schema's $defs (``Path`` is a measured network path, not a file's).
"""

from __future__ import annotations

from typing import Literal

from tailwise.results.documents.base import Doc, F, Int, Num
from tailwise.results.documents.config import Host
from tailwise.results.files import CALIBRATE_SCHEMA


def _when_measured(*required: str) -> dict:
    """The figures' keys beside n are there whenever a request was (n ≥ 1)."""
    return {"json_schema_extra": {"if": {"properties": {"n": {"minimum": 1}}, "required": ["n"]},
                                  "then": {"required": list(required)}}}


class Figures(Doc):
    """Exact order statistics of per-request round trips (ns); only n when there were none."""

    model_config = _when_measured("min_ns", "p50_ns", "p99_ns", "p99.9_ns", "max_ns")
    n: Int = F(minimum=0)
    min_ns: Int = None
    p50_ns: Int = None
    p99_ns: Int = None
    p99_9_ns: Int = F(None, alias="p99.9_ns")
    max_ns: Int = None


class Bias(Doc):
    """A per-request difference against the best source on the same requests (ns): its median and p99; only n when there were none."""

    model_config = _when_measured("p50_ns", "p99_ns")
    n: Int = F(minimum=0)
    p50_ns: Int = None
    p99_ns: Int = None


class BiasVsNic(Doc):
    min_ns: Int | None = None
    p50_ns: Int | None = None
    p99_ns: Int | None = None


class KernelSource(Doc):
    rtt: Figures = F(description="Round trip from the kernel's transmit stamp to its receive stamp.")
    bias_vs_nic: BiasVsNic = F(None, description="Where the NIC was measured too: the kernel's min, p50 and p99 round trip minus the NIC's (ns), from separate runs of the same traffic (one socket's sends carry kernel or NIC stamps, not both).")


class UserSource(Doc):
    rtt: Figures = F(description="Round trip by the clock around the system calls.")
    bias: Bias = F(description="user rtt − kernel rtt.")
    send_side: Bias = F(description="Kernel transmit stamp − the clock before the write.")
    receive_side: Bias = F(description="The clock after the read − kernel receive stamp.")


class NicSource(Doc):
    model_config = {"json_schema_extra": {"if": {"properties": {"available": {"const": True}}, "required": ["available"]},
                                          "then": {"required": ["requests", "stamped", "rtt", "user_bias"]}}}
    available: bool = F(description="Whether the interface's driver stamps every packet in hardware and this process may switch it to and read its PTP clock.")
    reason: str | None = F(description="Why hardware stamps are not used (null when available).")
    requests: Int = F(None, description="Available: requests answered after the warm-up in the NIC run.", minimum=0)
    stamped: Int = F(None, description="Available: of those, with both NIC stamps.", minimum=0)
    rtt: Figures = F(None, description="Available: round trip from the NIC's transmit stamp to its receive stamp.")
    user_bias: Bias = F(None, description="Available: user rtt − NIC rtt on the NIC run's requests.")


class TlsPing(Doc):
    """The loopback ping again over TLS: the built-in server with TLS (tailwise serve --tls-cert/--tls-key, the
    crate's test certificate) and the engine trusting its CA, kernel stamps on."""

    model_config = {"json_schema_extra": {
        "if": {"properties": {"tried": {"const": True}}, "required": ["tried"]},
        "then": {"required": ["target", "requests", "kernel_stamped", "rtt", "user_rtt", "adds_p50_ns",
                              "user_adds_p50_ns", "note"]},
        "else": {"required": ["reason"]}}}
    tried: bool
    reason: str = F(None, description="Why the ping over TLS was not measured (tried false).")
    target: str = F(None, description="The reflector over TLS (synthetic+tls://).")
    requests: Int = F(None, description="Requests answered after the warm-up.", minimum=0)
    kernel_stamped: Int = F(None, description="Of those, with both kernel stamps (the figures' requests).", minimum=0)
    rtt: Figures = F(None, description="Round trip over TLS from the kernel's transmit stamp (the request's last encrypted byte) to its receive stamp.")
    user_rtt: Figures = F(None, description="Round trip over TLS by the clock around the system calls (after the encryption, before the decryption).")
    adds_p50_ns: Int | None = F(None, description="rtt p50 over TLS − the plaintext kernel rtt p50 of the same path: what TLS adds to a round trip here (the server's record work, the longer segments); null when either has no requests.")
    user_adds_p50_ns: Int | None = F(None, description="The same with user-space stamps.")
    note: str = F(None, description="What the figures include and what they leave to the tls entry.")


class Path(Doc):
    """One network path: its sources' figures when tried, else why it was not."""

    model_config = {"json_schema_extra": {
        "if": {"properties": {"tried": {"const": True}}, "required": ["tried"]},
        "then": {"required": ["target", "interface", "rate_rps", "seconds", "best", "requests", "kernel_stamped",
                              "kernel", "user", "nic"]},
        "else": {"required": ["reason"]}}}
    path: str = F(description="loopback, veth or target.")
    tried: bool
    reason: str = F(None, description="Why the path was not tried (tried false).")
    target: str = F(None, description="The reflector measured against.")
    interface: str = F(None, description="The interface that routes to it.")
    rate_rps: Num = F(None, description="Ping-pong rate (one connection, one request outstanding).", exclusiveMinimum=0)
    seconds: Num = F(None, description="Traffic per path (--duration).", exclusiveMinimum=0)
    best: Literal["kernel", "nic"] = F(None, description="The best source measured on this path: nic where the interface can stamp every packet in hardware, else kernel.")
    requests: Int = F(None, description="Requests answered after the warm-up.", minimum=0)
    kernel_stamped: Int = F(None, description="Of those, with both kernel stamps (the figures' requests).", minimum=0)
    kernel: KernelSource = None
    user: UserSource = None
    nic: NicSource = None
    namespaces: list[str] = F(None, description="veth: the client's and the server's network namespaces.")
    tls: TlsPing = F(None, description="loopback: the same ping over TLS, next to this plaintext one.")


class MinusModel(Doc):
    """Measured − model (ns); null where the measured one is."""

    p50_ns: Num | None
    p99_ns: Num | None
    p99_9_ns: Num | None = F(alias="p99.9_ns")


class ServerStallsLeftOut(Doc):
    server_stalls: Int = F(minimum=0)
    requests_left_out: Int = F(minimum=0)
    minus_model: MinusModel


class SourceBias(Doc):
    """The model run measured with one timestamp source."""

    samples: Int = F(minimum=0)
    verdict_state: str = F(description="The methodology's state for that run (done, or the first failed step).")
    p50_ns: Num | None = F(description="Measured percentile; null when unsupported.")
    p99_ns: Num | None = F(description="Measured percentile; null when unsupported.")
    p99_9_ns: Num | None = F(alias="p99.9_ns", description="Measured percentile; null when unsupported.")
    minus_model: MinusModel = F(description="Measured − model; null when the measured one is.")
    server_stalls_left_out: ServerStallsLeftOut = F(description="The same with the requests outstanding during the built-in server's own stalls left out (the reference's stalls, not the client's).")


class Sources(Doc):
    """Per timestamp source: the model run measured with it."""

    open_keys = True
    __pydantic_extra__: dict[str, SourceBias]
    kernel: SourceBias
    user: SourceBias


class ModelPercentiles(Doc):
    p50_ns: Num
    p99_ns: Num
    p99_9_ns: Num = F(alias="p99.9_ns")


class Goal(Doc):
    with_: str = F(alias="with", description="The source the goal is judged with.")
    within_ns: dict[str, Num] = F(description="Per percentile (its key, p50_ns …): the largest distance from the model the goal allows.")
    met: bool = F(description="Every goal percentile with that source is within its bound of the model.")


class ModelBias(Doc):
    service: str
    load: Num = F(description="Utilisation ρ.", exclusiveMinimum=0, exclusiveMaximum=1)
    rate_rps: Num
    seconds: Num
    model: str = F(description="The queueing model simulated.")
    model_ns: ModelPercentiles = F(description="The model's sojourn-time percentiles.")
    sources: Sources
    goal: Goal
    note: str


class Clock(Doc):
    monotonic_read_ns: Num = F(description="One CLOCK_MONOTONIC read.", minimum=0)
    realtime_read_ns: Num = F(description="One CLOCK_REALTIME read.", minimum=0)


class TlsCost(Doc):
    """TLS record protection on this host, in memory: a rustls client (the engine's, engine/tls.rs) and server
    (tailwise serve's) joined by buffers, no network; per call, the monotonic clock read before and after it."""

    version: str = F(description="The TLS version they negotiated (TLSv1.3 or TLSv1.2).")
    cipher: str = F(description="The cipher suite they negotiated (its IANA name, e.g. TLS13_AES_256_GCM_SHA384).")
    iterations: Int = F(description="Calls timed, each way.", minimum=1)
    request_bytes: Int = F(description="The request's plaintext, encrypted into one record.", minimum=1)
    reply_bytes: Int = F(description="The reply's plaintext, decrypted from one record.", minimum=1)
    encrypt: Figures = F(description="The engine's encrypt of a request into its write buffer (ns per call, one clock read included).")
    decrypt: Figures = F(description="The engine's decrypt of a reply record into its read buffer (ns per call, one clock read included).")
    note: str


class NotTried(Doc):
    what: str = F(description="nic, tls, or a path's name.")
    why: str
    path: str = F(None, description="For nic: the path it was tried on.")


class Calibration(Doc):
    """`tailwise calibrate --json` (and summary.json under its --out): what each timestamp source (kernel, user, nic) reports for the same ping-pong traffic on this machine, per path (loopback, veth, or a given reflector), the loopback ping over TLS and TLS's record protection cost, and the whole tool's bias against the queueing model. Written by python/tailwise/measure/calibrate.py through the models of python/tailwise/results/documents/calibrate.py, which this schema is generated from. Versioning: later versions add fields, never rename or retype one; additional properties are allowed. Unknown values are null, never NaN. Units are in the names: _ns nanoseconds, _s seconds, _rps requests per second; p99.9_ns is the 99.9th percentile."""

    schema_: Literal["tailwise.calibrate/1"] = F(alias="schema", description="This document's schema and its version.")
    host: Host = F(description="The machine calibrated.")
    clock: Clock = F(description="The cost of reading the clock here.")
    paths: list[Path] = F(description="One entry per path: without a target, loopback and veth (veth only where this process may create network namespaces; else tried is false with the reason); with a target, that reflector.", minItems=1)
    model_bias: ModelBias | None = F(description="The whole tool against the M/D/1 model (tailwise serve fixed:10us at 20 % load, measured as `tailwise run --duration` does, once per source); null with --no-model or a target.")
    not_tried: list[NotTried] = F(description="What could not be measured, and why: the NIC source on each tried path, each path not tried, and the ping over TLS where it failed.")
    tls: TlsCost = F(None, description="What TLS record protection costs on this host (absent in documents before issue 36).")


SCHEMA_FILE = ("calibrate.schema.json", Calibration, "urn:tailwise:schema:calibrate:1",
               f"tailwise calibrate output ({CALIBRATE_SCHEMA})")
