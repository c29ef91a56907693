from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HealthRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Limits(_message.Message):
    __slots__ = ("allow_targets", "max_rate_rps", "max_conns", "max_duration_ns", "lease_ns", "max_memory_bytes", "max_rows")
    ALLOW_TARGETS_FIELD_NUMBER: _ClassVar[int]
    MAX_RATE_RPS_FIELD_NUMBER: _ClassVar[int]
    MAX_CONNS_FIELD_NUMBER: _ClassVar[int]
    MAX_DURATION_NS_FIELD_NUMBER: _ClassVar[int]
    LEASE_NS_FIELD_NUMBER: _ClassVar[int]
    MAX_MEMORY_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_FIELD_NUMBER: _ClassVar[int]
    allow_targets: _containers.RepeatedScalarFieldContainer[str]
    max_rate_rps: float
    max_conns: int
    max_duration_ns: int
    lease_ns: int
    max_memory_bytes: int
    max_rows: int
    def __init__(self, allow_targets: _Optional[_Iterable[str]] = ..., max_rate_rps: _Optional[float] = ..., max_conns: _Optional[int] = ..., max_duration_ns: _Optional[int] = ..., lease_ns: _Optional[int] = ..., max_memory_bytes: _Optional[int] = ..., max_rows: _Optional[int] = ...) -> None: ...

class HealthReply(_message.Message):
    __slots__ = ("version", "hostname", "cpus", "state", "run_id", "limits")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    HOSTNAME_FIELD_NUMBER: _ClassVar[int]
    CPUS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    version: str
    hostname: str
    cpus: _containers.RepeatedScalarFieldContainer[int]
    state: str
    run_id: str
    limits: Limits
    def __init__(self, version: _Optional[str] = ..., hostname: _Optional[str] = ..., cpus: _Optional[_Iterable[int]] = ..., state: _Optional[str] = ..., run_id: _Optional[str] = ..., limits: _Optional[_Union[Limits, _Mapping]] = ...) -> None: ...

class ClockRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ClockReply(_message.Message):
    __slots__ = ("mono_ns", "realtime_ns")
    MONO_NS_FIELD_NUMBER: _ClassVar[int]
    REALTIME_NS_FIELD_NUMBER: _ClassVar[int]
    mono_ns: int
    realtime_ns: int
    def __init__(self, mono_ns: _Optional[int] = ..., realtime_ns: _Optional[int] = ...) -> None: ...

class ConfigureRequest(_message.Message):
    __slots__ = ("run_id", "role", "engine_config", "agent_index")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    ENGINE_CONFIG_FIELD_NUMBER: _ClassVar[int]
    AGENT_INDEX_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    role: str
    engine_config: str
    agent_index: int
    def __init__(self, run_id: _Optional[str] = ..., role: _Optional[str] = ..., engine_config: _Optional[str] = ..., agent_index: _Optional[int] = ...) -> None: ...

class ConfigureReply(_message.Message):
    __slots__ = ("engine_config", "lease_key")
    ENGINE_CONFIG_FIELD_NUMBER: _ClassVar[int]
    LEASE_KEY_FIELD_NUMBER: _ClassVar[int]
    engine_config: str
    lease_key: str
    def __init__(self, engine_config: _Optional[str] = ..., lease_key: _Optional[str] = ...) -> None: ...

class StartRequest(_message.Message):
    __slots__ = ("run_id", "start_at_mono_ns", "lease_key")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    START_AT_MONO_NS_FIELD_NUMBER: _ClassVar[int]
    LEASE_KEY_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    start_at_mono_ns: int
    lease_key: str
    def __init__(self, run_id: _Optional[str] = ..., start_at_mono_ns: _Optional[int] = ..., lease_key: _Optional[str] = ...) -> None: ...

class StartReply(_message.Message):
    __slots__ = ("start_mono_ns",)
    START_MONO_NS_FIELD_NUMBER: _ClassVar[int]
    start_mono_ns: int
    def __init__(self, start_mono_ns: _Optional[int] = ...) -> None: ...

class RunRef(_message.Message):
    __slots__ = ("run_id", "lease_key")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    LEASE_KEY_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    lease_key: str
    def __init__(self, run_id: _Optional[str] = ..., lease_key: _Optional[str] = ...) -> None: ...

class ProgressReply(_message.Message):
    __slots__ = ("counters", "finished", "in_flight", "elapsed_ns")
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_NS_FIELD_NUMBER: _ClassVar[int]
    counters: str
    finished: bool
    in_flight: int
    elapsed_ns: int
    def __init__(self, counters: _Optional[str] = ..., finished: _Optional[bool] = ..., in_flight: _Optional[int] = ..., elapsed_ns: _Optional[int] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("meta", "part")
    META_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    meta: str
    part: Part
    def __init__(self, meta: _Optional[str] = ..., part: _Optional[_Union[Part, _Mapping]] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ("name", "data")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    name: str
    data: bytes
    def __init__(self, name: _Optional[str] = ..., data: _Optional[bytes] = ...) -> None: ...
