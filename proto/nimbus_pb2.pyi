from . import topology_pb2 as _topology_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BeginUploadRequest(_message.Message):
    __slots__ = ("file_name", "total_size")
    FILE_NAME_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    file_name: str
    total_size: int
    def __init__(self, file_name: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class UploadLocation(_message.Message):
    __slots__ = ("location",)
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    location: str
    def __init__(self, location: _Optional[str] = ...) -> None: ...

class Chunk(_message.Message):
    __slots__ = ("location", "data", "offset")
    LOCATION_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    location: str
    data: bytes
    offset: int
    def __init__(self, location: _Optional[str] = ..., data: _Optional[bytes] = ..., offset: _Optional[int] = ...) -> None: ...

class NameRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class IdRequest(_message.Message):
    __slots__ = ("id", "include_secrets")
    ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SECRETS_FIELD_NUMBER: _ClassVar[int]
    id: str
    include_secrets: bool
    def __init__(self, id: _Optional[str] = ..., include_secrets: _Optional[bool] = ...) -> None: ...

class TopologyRef(_message.Message):
    __slots__ = ("name", "id", "window_secs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SECS_FIELD_NUMBER: _ClassVar[int]
    name: str
    id: str
    window_secs: int
    def __init__(self, name: _Optional[str] = ..., id: _Optional[str] = ..., window_secs: _Optional[int] = ...) -> None: ...

class SubmitOptions(_message.Message):
    __slots__ = ("initial_status", "owner")
    class InitialStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        ACTIVE: _ClassVar[SubmitOptions.InitialStatus]
        INACTIVE: _ClassVar[SubmitOptions.InitialStatus]
    ACTIVE: SubmitOptions.InitialStatus
    INACTIVE: SubmitOptions.InitialStatus
    INITIAL_STATUS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    initial_status: SubmitOptions.InitialStatus
    owner: str
    def __init__(self, initial_status: _Optional[_Union[SubmitOptions.InitialStatus, str]] = ..., owner: _Optional[str] = ...) -> None: ...

class SubmitRequest(_message.Message):
    __slots__ = ("name", "uploaded_location", "json_conf", "topology", "options")
    NAME_FIELD_NUMBER: _ClassVar[int]
    UPLOADED_LOCATION_FIELD_NUMBER: _ClassVar[int]
    JSON_CONF_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    uploaded_location: str
    json_conf: str
    topology: _topology_pb2.StormTopology
    options: SubmitOptions
    def __init__(self, name: _Optional[str] = ..., uploaded_location: _Optional[str] = ..., json_conf: _Optional[str] = ..., topology: _Optional[_Union[_topology_pb2.StormTopology, _Mapping]] = ..., options: _Optional[_Union[SubmitOptions, _Mapping]] = ...) -> None: ...

class SubmitResponse(_message.Message):
    __slots__ = ("topology_id", "warnings")
    TOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    WARNINGS_FIELD_NUMBER: _ClassVar[int]
    topology_id: str
    warnings: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topology_id: _Optional[str] = ..., warnings: _Optional[_Iterable[str]] = ...) -> None: ...

class KillRequest(_message.Message):
    __slots__ = ("name", "wait_secs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECS_FIELD_NUMBER: _ClassVar[int]
    name: str
    wait_secs: int
    def __init__(self, name: _Optional[str] = ..., wait_secs: _Optional[int] = ...) -> None: ...

class RebalanceRequest(_message.Message):
    __slots__ = ("name", "wait_secs", "num_workers", "executors")
    class ExecutorsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    WAIT_SECS_FIELD_NUMBER: _ClassVar[int]
    NUM_WORKERS_FIELD_NUMBER: _ClassVar[int]
    EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    name: str
    wait_secs: int
    num_workers: int
    executors: _containers.ScalarMap[str, int]
    def __init__(self, name: _Optional[str] = ..., wait_secs: _Optional[int] = ..., num_workers: _Optional[int] = ..., executors: _Optional[_Mapping[str, int]] = ...) -> None: ...

class LogLevel(_message.Message):
    __slots__ = ("level", "reset_at_secs", "timeout_secs")
    LEVEL_FIELD_NUMBER: _ClassVar[int]
    RESET_AT_SECS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_SECS_FIELD_NUMBER: _ClassVar[int]
    level: str
    reset_at_secs: int
    timeout_secs: int
    def __init__(self, level: _Optional[str] = ..., reset_at_secs: _Optional[int] = ..., timeout_secs: _Optional[int] = ...) -> None: ...

class SetLogConfigRequest(_message.Message):
    __slots__ = ("name", "levels", "remove")
    class LevelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: LogLevel
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[LogLevel, _Mapping]] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    LEVELS_FIELD_NUMBER: _ClassVar[int]
    REMOVE_FIELD_NUMBER: _ClassVar[int]
    name: str
    levels: _containers.MessageMap[str, LogLevel]
    remove: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., levels: _Optional[_Mapping[str, LogLevel]] = ..., remove: _Optional[_Iterable[str]] = ...) -> None: ...

class LogConfig(_message.Message):
    __slots__ = ("levels",)
    class LevelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: LogLevel
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[LogLevel, _Mapping]] = ...) -> None: ...
    LEVELS_FIELD_NUMBER: _ClassVar[int]
    levels: _containers.MessageMap[str, LogLevel]
    def __init__(self, levels: _Optional[_Mapping[str, LogLevel]] = ...) -> None: ...

class ProfileRequest(_message.Message):
    __slots__ = ("name", "worker", "action", "secs", "id", "time_secs", "expires_secs", "topology_id")
    NAME_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    SECS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    TIME_SECS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_SECS_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    worker: str
    action: str
    secs: int
    id: str
    time_secs: float
    expires_secs: float
    topology_id: str
    def __init__(self, name: _Optional[str] = ..., worker: _Optional[str] = ..., action: _Optional[str] = ..., secs: _Optional[int] = ..., id: _Optional[str] = ..., time_secs: _Optional[float] = ..., expires_secs: _Optional[float] = ..., topology_id: _Optional[str] = ...) -> None: ...

class ProfileRequests(_message.Message):
    __slots__ = ("requests", "active")
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[ProfileRequest]
    active: _containers.RepeatedCompositeFieldContainer[ProfileRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[ProfileRequest, _Mapping]]] = ..., active: _Optional[_Iterable[_Union[ProfileRequest, _Mapping]]] = ...) -> None: ...

class DebugRequest(_message.Message):
    __slots__ = ("name", "component", "enable", "sampling_pct")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    ENABLE_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_PCT_FIELD_NUMBER: _ClassVar[int]
    name: str
    component: str
    enable: bool
    sampling_pct: float
    def __init__(self, name: _Optional[str] = ..., component: _Optional[str] = ..., enable: _Optional[bool] = ..., sampling_pct: _Optional[float] = ...) -> None: ...

class DebugOptions(_message.Message):
    __slots__ = ("enable", "sampling_pct")
    ENABLE_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_PCT_FIELD_NUMBER: _ClassVar[int]
    enable: bool
    sampling_pct: float
    def __init__(self, enable: _Optional[bool] = ..., sampling_pct: _Optional[float] = ...) -> None: ...

class ComponentDebug(_message.Message):
    __slots__ = ("component_debug",)
    class ComponentDebugEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: DebugOptions
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[DebugOptions, _Mapping]] = ...) -> None: ...
    COMPONENT_DEBUG_FIELD_NUMBER: _ClassVar[int]
    component_debug: _containers.MessageMap[str, DebugOptions]
    def __init__(self, component_debug: _Optional[_Mapping[str, DebugOptions]] = ...) -> None: ...

class SupervisorSummary(_message.Message):
    __slots__ = ("id", "host", "uptime_secs", "num_slots", "num_used_slots")
    ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECS_FIELD_NUMBER: _ClassVar[int]
    NUM_SLOTS_FIELD_NUMBER: _ClassVar[int]
    NUM_USED_SLOTS_FIELD_NUMBER: _ClassVar[int]
    id: str
    host: str
    uptime_secs: int
    num_slots: int
    num_used_slots: int
    def __init__(self, id: _Optional[str] = ..., host: _Optional[str] = ..., uptime_secs: _Optional[int] = ..., num_slots: _Optional[int] = ..., num_used_slots: _Optional[int] = ...) -> None: ...

class TopologySummary(_message.Message):
    __slots__ = ("id", "name", "status", "num_workers", "num_executors", "num_tasks", "uptime_secs", "owner", "recent_restarts", "restart_window_secs", "last_error", "live_workers", "health_known", "stalled")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    NUM_WORKERS_FIELD_NUMBER: _ClassVar[int]
    NUM_EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RECENT_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    RESTART_WINDOW_SECS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    LIVE_WORKERS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_KNOWN_FIELD_NUMBER: _ClassVar[int]
    STALLED_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    status: str
    num_workers: int
    num_executors: int
    num_tasks: int
    uptime_secs: int
    owner: str
    recent_restarts: int
    restart_window_secs: int
    last_error: ErrorInfo
    live_workers: int
    health_known: bool
    stalled: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., status: _Optional[str] = ..., num_workers: _Optional[int] = ..., num_executors: _Optional[int] = ..., num_tasks: _Optional[int] = ..., uptime_secs: _Optional[int] = ..., owner: _Optional[str] = ..., recent_restarts: _Optional[int] = ..., restart_window_secs: _Optional[int] = ..., last_error: _Optional[_Union[ErrorInfo, _Mapping]] = ..., live_workers: _Optional[int] = ..., health_known: _Optional[bool] = ..., stalled: _Optional[_Iterable[str]] = ...) -> None: ...

class BatchProgress(_message.Message):
    __slots__ = ("batch_id", "timestamp_secs", "num_input_rows", "input_rows_per_second", "processed_rows_per_second", "duration_ms", "conversion_ms", "session_ms", "wait_ms", "fn_ms", "batches", "rows", "failed_batches")
    BATCH_ID_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_SECS_FIELD_NUMBER: _ClassVar[int]
    NUM_INPUT_ROWS_FIELD_NUMBER: _ClassVar[int]
    INPUT_ROWS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    PROCESSED_ROWS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    CONVERSION_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_MS_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    FN_MS_FIELD_NUMBER: _ClassVar[int]
    BATCHES_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    FAILED_BATCHES_FIELD_NUMBER: _ClassVar[int]
    batch_id: int
    timestamp_secs: float
    num_input_rows: int
    input_rows_per_second: float
    processed_rows_per_second: float
    duration_ms: float
    conversion_ms: float
    session_ms: float
    wait_ms: float
    fn_ms: float
    batches: int
    rows: int
    failed_batches: int
    def __init__(self, batch_id: _Optional[int] = ..., timestamp_secs: _Optional[float] = ..., num_input_rows: _Optional[int] = ..., input_rows_per_second: _Optional[float] = ..., processed_rows_per_second: _Optional[float] = ..., duration_ms: _Optional[float] = ..., conversion_ms: _Optional[float] = ..., session_ms: _Optional[float] = ..., wait_ms: _Optional[float] = ..., fn_ms: _Optional[float] = ..., batches: _Optional[int] = ..., rows: _Optional[int] = ..., failed_batches: _Optional[int] = ...) -> None: ...

class StreamCount(_message.Message):
    __slots__ = ("emitted", "transferred")
    EMITTED_FIELD_NUMBER: _ClassVar[int]
    TRANSFERRED_FIELD_NUMBER: _ClassVar[int]
    emitted: int
    transferred: int
    def __init__(self, emitted: _Optional[int] = ..., transferred: _Optional[int] = ...) -> None: ...

class Histogram(_message.Message):
    __slots__ = ("buckets", "sum", "n")
    class BucketsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: int
        def __init__(self, key: _Optional[int] = ..., value: _Optional[int] = ...) -> None: ...
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    SUM_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    buckets: _containers.ScalarMap[int, int]
    sum: float
    n: int
    def __init__(self, buckets: _Optional[_Mapping[int, int]] = ..., sum: _Optional[float] = ..., n: _Optional[int] = ...) -> None: ...

class NimbusSummary(_message.Message):
    __slots__ = ("host", "port", "uptime_secs", "is_leader", "version")
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECS_FIELD_NUMBER: _ClassVar[int]
    IS_LEADER_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    host: str
    port: int
    uptime_secs: int
    is_leader: bool
    version: str
    def __init__(self, host: _Optional[str] = ..., port: _Optional[int] = ..., uptime_secs: _Optional[int] = ..., is_leader: _Optional[bool] = ..., version: _Optional[str] = ...) -> None: ...

class ClusterSummary(_message.Message):
    __slots__ = ("supervisors", "topologies", "nimbus_uptime_secs", "nimbuses")
    SUPERVISORS_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGIES_FIELD_NUMBER: _ClassVar[int]
    NIMBUS_UPTIME_SECS_FIELD_NUMBER: _ClassVar[int]
    NIMBUSES_FIELD_NUMBER: _ClassVar[int]
    supervisors: _containers.RepeatedCompositeFieldContainer[SupervisorSummary]
    topologies: _containers.RepeatedCompositeFieldContainer[TopologySummary]
    nimbus_uptime_secs: int
    nimbuses: _containers.RepeatedCompositeFieldContainer[NimbusSummary]
    def __init__(self, supervisors: _Optional[_Iterable[_Union[SupervisorSummary, _Mapping]]] = ..., topologies: _Optional[_Iterable[_Union[TopologySummary, _Mapping]]] = ..., nimbus_uptime_secs: _Optional[int] = ..., nimbuses: _Optional[_Iterable[_Union[NimbusSummary, _Mapping]]] = ...) -> None: ...

class ExecutorSummary(_message.Message):
    __slots__ = ("component_id", "task_start", "task_end", "host", "port", "uptime_secs", "emitted", "transferred", "acked", "failed", "complete_latency_ms", "executed", "pending", "stats_time_secs", "execute_latency_ms", "process_latency_ms", "capacity", "complete_latency_p50_ms", "complete_latency_p99_ms", "streams", "timed_out", "progress")
    class StreamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: StreamCount
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[StreamCount, _Mapping]] = ...) -> None: ...
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_START_FIELD_NUMBER: _ClassVar[int]
    TASK_END_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECS_FIELD_NUMBER: _ClassVar[int]
    EMITTED_FIELD_NUMBER: _ClassVar[int]
    TRANSFERRED_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    STATS_TIME_SECS_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_LATENCY_P50_MS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_LATENCY_P99_MS_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    task_start: int
    task_end: int
    host: str
    port: int
    uptime_secs: int
    emitted: int
    transferred: int
    acked: int
    failed: int
    complete_latency_ms: float
    executed: int
    pending: int
    stats_time_secs: float
    execute_latency_ms: float
    process_latency_ms: float
    capacity: float
    complete_latency_p50_ms: float
    complete_latency_p99_ms: float
    streams: _containers.MessageMap[str, StreamCount]
    timed_out: int
    progress: BatchProgress
    def __init__(self, component_id: _Optional[str] = ..., task_start: _Optional[int] = ..., task_end: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., uptime_secs: _Optional[int] = ..., emitted: _Optional[int] = ..., transferred: _Optional[int] = ..., acked: _Optional[int] = ..., failed: _Optional[int] = ..., complete_latency_ms: _Optional[float] = ..., executed: _Optional[int] = ..., pending: _Optional[int] = ..., stats_time_secs: _Optional[float] = ..., execute_latency_ms: _Optional[float] = ..., process_latency_ms: _Optional[float] = ..., capacity: _Optional[float] = ..., complete_latency_p50_ms: _Optional[float] = ..., complete_latency_p99_ms: _Optional[float] = ..., streams: _Optional[_Mapping[str, StreamCount]] = ..., timed_out: _Optional[int] = ..., progress: _Optional[_Union[BatchProgress, _Mapping]] = ...) -> None: ...

class ComponentStats(_message.Message):
    __slots__ = ("component_id", "type", "num_executors", "num_tasks", "emitted", "transferred", "executed", "acked", "failed", "complete_latency_ms", "pending", "execute_latency_ms", "process_latency_ms", "capacity", "complete_latency_p50_ms", "complete_latency_p99_ms", "streams", "timed_out", "progress")
    class StreamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: StreamCount
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[StreamCount, _Mapping]] = ...) -> None: ...
    COMPONENT_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NUM_EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    EMITTED_FIELD_NUMBER: _ClassVar[int]
    TRANSFERRED_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    PROCESS_LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_LATENCY_P50_MS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_LATENCY_P99_MS_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    component_id: str
    type: str
    num_executors: int
    num_tasks: int
    emitted: int
    transferred: int
    executed: int
    acked: int
    failed: int
    complete_latency_ms: float
    pending: int
    execute_latency_ms: float
    process_latency_ms: float
    capacity: float
    complete_latency_p50_ms: float
    complete_latency_p99_ms: float
    streams: _containers.MessageMap[str, StreamCount]
    timed_out: int
    progress: BatchProgress
    def __init__(self, component_id: _Optional[str] = ..., type: _Optional[str] = ..., num_executors: _Optional[int] = ..., num_tasks: _Optional[int] = ..., emitted: _Optional[int] = ..., transferred: _Optional[int] = ..., executed: _Optional[int] = ..., acked: _Optional[int] = ..., failed: _Optional[int] = ..., complete_latency_ms: _Optional[float] = ..., pending: _Optional[int] = ..., execute_latency_ms: _Optional[float] = ..., process_latency_ms: _Optional[float] = ..., capacity: _Optional[float] = ..., complete_latency_p50_ms: _Optional[float] = ..., complete_latency_p99_ms: _Optional[float] = ..., streams: _Optional[_Mapping[str, StreamCount]] = ..., timed_out: _Optional[int] = ..., progress: _Optional[_Union[BatchProgress, _Mapping]] = ...) -> None: ...

class ErrorInfo(_message.Message):
    __slots__ = ("component", "error", "time_secs", "host", "port", "task")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TIME_SECS_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    component: str
    error: str
    time_secs: int
    host: str
    port: int
    task: int
    def __init__(self, component: _Optional[str] = ..., error: _Optional[str] = ..., time_secs: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., task: _Optional[int] = ...) -> None: ...

class TopologyInfo(_message.Message):
    __slots__ = ("id", "name", "status", "uptime_secs", "executors", "components", "errors", "owner", "window_secs", "recent_restarts", "restart_window_secs", "component_debug")
    class ComponentDebugEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: DebugOptions
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[DebugOptions, _Mapping]] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECS_FIELD_NUMBER: _ClassVar[int]
    EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    COMPONENTS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    WINDOW_SECS_FIELD_NUMBER: _ClassVar[int]
    RECENT_RESTARTS_FIELD_NUMBER: _ClassVar[int]
    RESTART_WINDOW_SECS_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_DEBUG_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    status: str
    uptime_secs: int
    executors: _containers.RepeatedCompositeFieldContainer[ExecutorSummary]
    components: _containers.RepeatedCompositeFieldContainer[ComponentStats]
    errors: _containers.RepeatedCompositeFieldContainer[ErrorInfo]
    owner: str
    window_secs: int
    recent_restarts: int
    restart_window_secs: int
    component_debug: _containers.MessageMap[str, DebugOptions]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., status: _Optional[str] = ..., uptime_secs: _Optional[int] = ..., executors: _Optional[_Iterable[_Union[ExecutorSummary, _Mapping]]] = ..., components: _Optional[_Iterable[_Union[ComponentStats, _Mapping]]] = ..., errors: _Optional[_Iterable[_Union[ErrorInfo, _Mapping]]] = ..., owner: _Optional[str] = ..., window_secs: _Optional[int] = ..., recent_restarts: _Optional[int] = ..., restart_window_secs: _Optional[int] = ..., component_debug: _Optional[_Mapping[str, DebugOptions]] = ...) -> None: ...

class JsonConf(_message.Message):
    __slots__ = ("json_conf",)
    JSON_CONF_FIELD_NUMBER: _ClassVar[int]
    json_conf: str
    def __init__(self, json_conf: _Optional[str] = ...) -> None: ...

class ExecutorInfo(_message.Message):
    __slots__ = ("task_start", "task_end")
    TASK_START_FIELD_NUMBER: _ClassVar[int]
    TASK_END_FIELD_NUMBER: _ClassVar[int]
    task_start: int
    task_end: int
    def __init__(self, task_start: _Optional[int] = ..., task_end: _Optional[int] = ...) -> None: ...

class LatencyStats(_message.Message):
    __slots__ = ("mean", "p50", "p99", "n")
    MEAN_FIELD_NUMBER: _ClassVar[int]
    P50_FIELD_NUMBER: _ClassVar[int]
    P99_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    mean: float
    p50: float
    p99: float
    n: int
    def __init__(self, mean: _Optional[float] = ..., p50: _Optional[float] = ..., p99: _Optional[float] = ..., n: _Optional[int] = ...) -> None: ...

class TaskStats(_message.Message):
    __slots__ = ("task", "component", "emitted", "transferred", "executed", "acked", "failed", "timed_out", "pending", "complete_latency", "streams", "complete_hist", "execute_hist", "busy_secs", "progress")
    class StreamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: StreamCount
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[StreamCount, _Mapping]] = ...) -> None: ...
    TASK_FIELD_NUMBER: _ClassVar[int]
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    EMITTED_FIELD_NUMBER: _ClassVar[int]
    TRANSFERRED_FIELD_NUMBER: _ClassVar[int]
    EXECUTED_FIELD_NUMBER: _ClassVar[int]
    ACKED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_LATENCY_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_HIST_FIELD_NUMBER: _ClassVar[int]
    EXECUTE_HIST_FIELD_NUMBER: _ClassVar[int]
    BUSY_SECS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    task: int
    component: str
    emitted: int
    transferred: int
    executed: int
    acked: int
    failed: int
    timed_out: int
    pending: int
    complete_latency: LatencyStats
    streams: _containers.MessageMap[str, StreamCount]
    complete_hist: Histogram
    execute_hist: Histogram
    busy_secs: float
    progress: BatchProgress
    def __init__(self, task: _Optional[int] = ..., component: _Optional[str] = ..., emitted: _Optional[int] = ..., transferred: _Optional[int] = ..., executed: _Optional[int] = ..., acked: _Optional[int] = ..., failed: _Optional[int] = ..., timed_out: _Optional[int] = ..., pending: _Optional[int] = ..., complete_latency: _Optional[_Union[LatencyStats, _Mapping]] = ..., streams: _Optional[_Mapping[str, StreamCount]] = ..., complete_hist: _Optional[_Union[Histogram, _Mapping]] = ..., execute_hist: _Optional[_Union[Histogram, _Mapping]] = ..., busy_secs: _Optional[float] = ..., progress: _Optional[_Union[BatchProgress, _Mapping]] = ...) -> None: ...

class WorkerHeartbeat(_message.Message):
    __slots__ = ("topology_id", "port", "time_secs", "executors", "tasks", "uptime_secs", "state", "stalled")
    TOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TIME_SECS_FIELD_NUMBER: _ClassVar[int]
    EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STALLED_FIELD_NUMBER: _ClassVar[int]
    topology_id: str
    port: int
    time_secs: float
    executors: _containers.RepeatedCompositeFieldContainer[ExecutorInfo]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskStats]
    uptime_secs: int
    state: str
    stalled: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topology_id: _Optional[str] = ..., port: _Optional[int] = ..., time_secs: _Optional[float] = ..., executors: _Optional[_Iterable[_Union[ExecutorInfo, _Mapping]]] = ..., tasks: _Optional[_Iterable[_Union[TaskStats, _Mapping]]] = ..., uptime_secs: _Optional[int] = ..., state: _Optional[str] = ..., stalled: _Optional[_Iterable[str]] = ...) -> None: ...

class SupervisorWorkerHeartbeats(_message.Message):
    __slots__ = ("supervisor_id", "worker_heartbeats", "errors", "restarts", "topology_stats")
    SUPERVISOR_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_HEARTBEATS_FIELD_NUMBER: _ClassVar[int]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    RESTARTS_FIELD_NUMBER: _ClassVar[int]
    TOPOLOGY_STATS_FIELD_NUMBER: _ClassVar[int]
    supervisor_id: str
    worker_heartbeats: _containers.RepeatedCompositeFieldContainer[WorkerHeartbeat]
    errors: _containers.RepeatedCompositeFieldContainer[WorkerError]
    restarts: _containers.RepeatedCompositeFieldContainer[WorkerRestart]
    topology_stats: _containers.RepeatedCompositeFieldContainer[TopologyStats]
    def __init__(self, supervisor_id: _Optional[str] = ..., worker_heartbeats: _Optional[_Iterable[_Union[WorkerHeartbeat, _Mapping]]] = ..., errors: _Optional[_Iterable[_Union[WorkerError, _Mapping]]] = ..., restarts: _Optional[_Iterable[_Union[WorkerRestart, _Mapping]]] = ..., topology_stats: _Optional[_Iterable[_Union[TopologyStats, _Mapping]]] = ...) -> None: ...

class TopologyStats(_message.Message):
    __slots__ = ("topology_id", "workers")
    TOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    topology_id: str
    workers: _containers.RepeatedCompositeFieldContainer[WorkerStats]
    def __init__(self, topology_id: _Optional[str] = ..., workers: _Optional[_Iterable[_Union[WorkerStats, _Mapping]]] = ...) -> None: ...

class WorkerStats(_message.Message):
    __slots__ = ("worker_id", "time_secs", "uptime_secs", "tasks")
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    TIME_SECS_FIELD_NUMBER: _ClassVar[int]
    UPTIME_SECS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    time_secs: float
    uptime_secs: int
    tasks: _containers.RepeatedCompositeFieldContainer[TaskStats]
    def __init__(self, worker_id: _Optional[str] = ..., time_secs: _Optional[float] = ..., uptime_secs: _Optional[int] = ..., tasks: _Optional[_Iterable[_Union[TaskStats, _Mapping]]] = ...) -> None: ...

class WorkerRestart(_message.Message):
    __slots__ = ("topology_id", "port", "time_secs", "reason")
    TOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    TIME_SECS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    topology_id: str
    port: int
    time_secs: float
    reason: str
    def __init__(self, topology_id: _Optional[str] = ..., port: _Optional[int] = ..., time_secs: _Optional[float] = ..., reason: _Optional[str] = ...) -> None: ...

class WorkerError(_message.Message):
    __slots__ = ("topology_id", "error")
    TOPOLOGY_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    topology_id: str
    error: ErrorInfo
    def __init__(self, topology_id: _Optional[str] = ..., error: _Optional[_Union[ErrorInfo, _Mapping]] = ...) -> None: ...
