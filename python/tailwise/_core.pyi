"""Type stubs of ``tailwise._core``, the Rust data plane (crates/tailwise-py/src/lib.rs, model.rs, hist.rs).

Kept by hand; tests/test_core_stub.py fails when a name, a class's methods or a signature's
parameters here differ from the extension's.
"""

from typing import Final, TypedDict, final

__all__ = [
    "SAMPLE_FLAGS", "SAMPLE_FIELDS", "SAMPLE_BYTES", "HIST_LOWEST_NS", "HIST_MAX_NS", "HIST_SIGFIG", "INTERVAL_NS",
    "INTERVAL_SIGFIG", "STALL_NS", "MASK_STALL_NS", "ECHO_MIN_DATAGRAM", "ECHO_MAX_DATAGRAM", "PROTOCOLS",
    "MODEL_MAX_CUSTOMERS", "MODEL_MAX_WORKERS", "TEST_HOOKS", "ENGINE_DEFAULTS", "UDP_SIZE", "PACKET_SIZE",
    "PACKET_SIZE_MIN", "PACKET_SIZE_MAX", "PACKET_FLOWS", "PACKET_FLOWS_MAX", "TLS_CALIBRATE_PEM", "parse_dist",
    "packet_payload_len", "check_engine_config", "check_protocol", "route_interface", "hardware_timestamping", "now_ns",
    "clock_cost_ns", "tls_record_cost_ns", "histogram_params", "interval_params", "measure_stalls", "check_workload",
    "parse_arrival", "preload", "model_sojourn", "model_summary", "Server", "UdpFunction", "Engine", "Intervals", "Histogram",
    "__version__",
]

__version__: Final[str]

# Constants, each from its one definition in tailwise-core.

#: A sample's flags by name → bit, in bit order (record/flags.rs): Python's ``agent.Flag``.
SAMPLE_FLAGS: Final[dict[str, int]]
#: The 64-byte sample row, field by field: (name, byte offset, NumPy type code): ``agent.SAMPLE_DTYPE``.
SAMPLE_FIELDS: Final[list[tuple[str, int, str]]]
#: Bytes per sample row.
SAMPLE_BYTES: Final[int]
#: The run histograms' range and precision (also ``histogram_params()``).
HIST_LOWEST_NS: Final[int]
HIST_MAX_NS: Final[int]
HIST_SIGFIG: Final[int]
#: The every-request interval histograms' width in intended send time and precision (also
#: ``interval_params()``).
INTERVAL_NS: Final[int]
INTERVAL_SIGFIG: Final[int]
#: A timing-loop iteration longer than this counts as a stall (``join()["stalls"]``).
STALL_NS: Final[int]
#: A gap of a spinning thread's clock reads at least this long is a logged stall (time/stall.rs).
MASK_STALL_NS: Final[int]
#: The udp:// echo datagram's size bounds, in bytes.
ECHO_MIN_DATAGRAM: Final[int]
ECHO_MAX_DATAGRAM: Final[int]
#: Every target scheme, in the command line's order, with whether its requests carry keys and
#: whether it sends one request per datagram.
PROTOCOLS: Final[dict[str, _ProtocolTraits]]
#: The queueing model's bounds.
MODEL_MAX_CUSTOMERS: Final[int]
MODEL_MAX_WORKERS: Final[int]
#: Whether the engine's test hook is built in (cargo feature ``test-hooks``): without it a
#: configuration with ``test_stall`` raises ``InputError``.
TEST_HOOKS: Final[bool]
#: Every field of an engine configuration with its default (EngineConfig::default, engine/config.rs):
#: the one definition of the engine's defaults, which ``spec.load.LoadSpec`` reads.
ENGINE_DEFAULTS: Final[dict[str, object]]
#: A udp:// datagram's bytes when its URL gives no ``?size=``.
UDP_SIZE: Final[int]
#: udp+flow (packet mode, protocol/flow.rs): the Ethernet frame size's default and bounds (bytes), the
#: flows' default and maximum.
PACKET_SIZE: Final[int]
PACKET_SIZE_MIN: Final[int]
PACKET_SIZE_MAX: Final[int]
PACKET_FLOWS: Final[int]
PACKET_FLOWS_MAX: Final[int]
#: ``calibrate``'s TLS identity on loopback (engine/tls_cost.rs: the crate's test certificates, which
#: never meet a network): "ca", "cert", "key" → PEM text.
TLS_CALIBRATE_PEM: Final[dict[str, str]]

class _ProtocolTraits(TypedDict):
    keys: bool
    datagram: bool

class _PreloadResult(TypedDict):
    stored: int
    errors: int
    error_reasons: list[tuple[str, int]]
    elapsed_ns: int
    bytes: int

class _StallMeasurement(TypedDict):
    duration_ns: int
    count: int
    lost_ns: int
    max_ns: int

class _TlsRecordCost(TypedDict):
    encrypt_ns: list[int]
    decrypt_ns: list[int]
    version: str
    cipher: str

class _ModelSummary(TypedDict):
    percentiles: list[float]
    mean_ns: float
    customers: int
    arrival_rate_per_ns: float
    mean_service_ns: float
    service: str

class _Snapshot(TypedDict):
    elapsed_ns: int
    intended: int
    sent: int
    late: int
    received: int
    errors: int
    timeouts: int
    never_sent: int
    reconnects: int
    received_in_window: int

class _TlsStats(TypedDict):
    #: The engine's TLS handshakes since its start (initial and reconnects): full and resumed
    #: (``full + resumed`` exact), reconnect handshakes that failed or timed out, and each one's
    #: duration in ns (the first 65,536).
    full: int
    resumed: int
    failed: int
    handshake_ns: list[int]

class _Taken(TypedDict):
    samples: bytes
    pending: bytes
    snap_ns: int
    complete: bool
    counters: _Snapshot
    #: The level samples and pending were thinned to by the subsample's keys (0 but after
    #: ``Engine.thin_rows``).
    thinned_level: int
    #: With TLS (the configuration's ``tls``): every handshake so far; None for plaintext.
    tls: _TlsStats | None

class _Counters(TypedDict):
    intended: int
    sent: int
    received: int
    late: int
    never_sent: int
    errors: int
    timeouts: int
    unfinished: int
    rx_kernel: int
    tx_kernel: int
    reconnects: int
    resent: int
    gets: int
    sets: int
    hits: int
    misses: int
    stored: int
    #: Packet mode (udp+flow; 0 otherwise): never answered by their timeout or the drain's end,
    #: answered after a later seq of their flow, the largest such displacement, answered twice.
    lost: int
    reordered: int
    reorder_max: int
    duplicates: int

class _PacketHist(TypedDict):
    bin_ns: int
    range_ns: int
    #: The 100 ns bins up to the last one counted, little-endian u64.
    counts: bytes
    above: int

class _Joined(TypedDict):
    counters: _Counters
    probe_counters: _Counters | None
    start_mono_ns: int
    elapsed_ns: int
    received_in_window: int
    latency_hist: bytes
    send_lag_hist: bytes
    send_lag_unstalled_hist: bytes
    #: Packet mode: every answered packet at 100 ns; None for other protocols.
    packet_hist: _PacketHist | None
    stalls: int
    stalled_ns: int
    stall_intervals: list[tuple[int, int]]
    samples: bytes
    thinned_level: int
    #: Why the run ended early (the problem), and what to do about it ("" when nothing).
    error: str | None
    error_remedy: str | None
    error_reasons: list[tuple[str, int]]
    pinned_cpus: list[int | None]
    cpu_ns: int
    preemptions: int
    sample_bytes: int
    #: With TLS: every handshake of the run; None for plaintext.
    tls: _TlsStats | None

# The data plane's problems are raised as tailwise.errors classes carrying problem and remedy:
# InputError (parse_dist, parse_arrival, check_workload, model_*; preload's workload), HostError
# (route_interface, hardware_timestamping), TargetError (preload's target). An address that does
# not resolve is a ValueError.
def parse_dist(spec: str) -> tuple[str, float]: ...
def parse_arrival(text: str) -> str: ...
def route_interface(target: str) -> str: ...
#: An engine configuration (JSON) checked as ``Engine`` would before it connects, returned whole
#: with every default filled in; InputError naming the field otherwise.
def check_engine_config(config: str) -> str: ...
#: A configuration's ``protocol`` (JSON) checked as the engine builds it (an http target's requests
#: as protocol/http.rs's ``Requests::new`` checks them), returned as the engine writes it;
#: InputError naming the problem otherwise.
def check_protocol(protocol: str) -> str: ...
#: Returns when the interface can stamp every packet in hardware for this process, else raises
#: HostError saying why.
def hardware_timestamping(ifname: str) -> None: ...
def check_workload(keys: int, key_size: str, value_size: str, popularity: str, set_fraction: float) -> tuple[float, float]: ...
def preload(
    target: str,
    scheme: str,
    *,
    keys: int,
    key_size: str,
    value_size: str,
    conns: int = 4,
    depth: int = 64,
    timeout_ns: int = 2_000_000_000,
    protocol: str | None = None,
    tls: str | None = None,
) -> _PreloadResult: ...
def packet_payload_len(size: int, ipv6: bool) -> int: ...
def now_ns() -> int: ...
def clock_cost_ns(per_batch: int = 10_000) -> tuple[float, float]: ...
def tls_record_cost_ns(iterations: int, request_bytes: int, reply_bytes: int) -> _TlsRecordCost: ...
def histogram_params() -> tuple[int, int, int]: ...
def interval_params() -> tuple[int, int]: ...
def measure_stalls(duration_ns: int, threshold_ns: int = 5_000, cpu: int | None = None) -> _StallMeasurement: ...
def model_sojourn(service: str, load: float, workers: int = 1, *, n: int, seed: int = 1, warmup: int = 0) -> bytes: ...
def model_summary(
    service: str, load: float, workers: int = 1, *, ps: list[float], n: int, seed: int = 1, warmup: int = 0
) -> _ModelSummary: ...
@final
class Server:
    def __new__(
        cls, listen: str, workers: int = 1, service: str = "fixed:10us", seed: int = 1, pin: bool = True, busy_poll: bool = False,
        tls_cert: str | None = None, tls_key: str | None = None,
    ) -> Server: ...
    @property
    def addr(self) -> str: ...
    def served(self) -> int: ...
    def busy_ns(self) -> int: ...
    def take_stalls(self) -> list[tuple[int, int]]: ...
    def stop(self) -> None: ...

class _UdpCounters(TypedDict):
    received: int
    sent: int
    dropped: int
    reordered: int
    duplicated: int
    held_alone: int
    returned: int
    failed: int

@final
class UdpFunction:
    """A UDP reflector (mode "reflect") or forwarder to ``to`` (mode "forward"), impairing every
    N-th datagram exactly (tailwise-core server/udp.rs, server/impair.rs)."""

    def __new__(
        cls,
        listen: str,
        mode: str = "reflect",
        to: str | None = None,
        drop_every: int | None = None,
        reorder_every: int | None = None,
        duplicate_every: int | None = None,
        workers: int = 1,
        pin: bool = True,
        busy_poll: bool = False,
    ) -> UdpFunction: ...
    def addr(self) -> str: ...
    def counters(self) -> _UdpCounters: ...
    def stop(self) -> None: ...

@final
class Intervals:
    def window(self, first: int, last: int, with_pending: bool = True) -> bytes: ...
    def counts(self, pending: bool = False) -> list[tuple[int, int]]: ...
    def encoded(self, indices: list[int], pending: bool = False) -> list[bytes]: ...
    def log(self) -> list[tuple[int, bytes]]: ...

@final
class Histogram:
    """The ``hdrhistogram`` crate's histogram of u64 counts (hist.rs)."""

    def __new__(cls, lowest: int, highest: int, digits: int) -> Histogram: ...
    @staticmethod
    def decode(raw: bytes) -> Histogram: ...
    def encode(self) -> bytes: ...
    def record(self, value: int, count: int = 1) -> None: ...
    def record_values(self, values: list[int]) -> None: ...
    def add(self, other: Histogram) -> None: ...
    def subtract(self, other: Histogram) -> None: ...
    def copy(self) -> Histogram: ...
    @property
    def total(self) -> int: ...
    @property
    def min(self) -> int: ...
    @property
    def max(self) -> int: ...
    @property
    def lowest(self) -> int: ...
    @property
    def highest(self) -> int: ...
    @property
    def digits(self) -> int: ...
    def value_at_percentile(self, p: float) -> int: ...
    def values_at_percentiles(self, ps: list[float]) -> list[int]: ...
    def lowest_equivalent(self, value: int) -> int: ...
    def highest_equivalent(self, value: int) -> int: ...
    def recorded(self) -> list[tuple[int, int]]: ...

@final
class Engine:
    #: ``config``: an engine configuration, JSON (``LoadSpec.to_json()``; every field and its
    #: default in ``ENGINE_DEFAULTS``).
    def __new__(cls, config: str) -> Engine: ...
    @property
    def start_mono_ns(self) -> int: ...
    def snapshot(self) -> _Snapshot: ...
    def take(self, wait_ns: int = 1_000_000_000, pending: bool = True) -> _Taken: ...
    def thin_rows(self, max_rows: int, source_base: int) -> None: ...
    def intervals(self) -> Intervals: ...
    def take_stalls(self) -> list[tuple[int, int]]: ...
    def packet_intervals(self) -> list[tuple[int, int, int, int, int, int]]: ...
    def is_finished(self) -> bool: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def in_flight(self) -> int: ...
    def stop(self) -> None: ...
    def join(self) -> _Joined: ...
