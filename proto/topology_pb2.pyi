from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Empty(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FieldList(_message.Message):
    __slots__ = ("fields",)
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, fields: _Optional[_Iterable[str]] = ...) -> None: ...

class StreamDef(_message.Message):
    __slots__ = ("fields", "direct")
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    DIRECT_FIELD_NUMBER: _ClassVar[int]
    fields: _containers.RepeatedScalarFieldContainer[str]
    direct: bool
    def __init__(self, fields: _Optional[_Iterable[str]] = ..., direct: _Optional[bool] = ...) -> None: ...

class GlobalStreamId(_message.Message):
    __slots__ = ("component", "stream")
    COMPONENT_FIELD_NUMBER: _ClassVar[int]
    STREAM_FIELD_NUMBER: _ClassVar[int]
    component: str
    stream: str
    def __init__(self, component: _Optional[str] = ..., stream: _Optional[str] = ...) -> None: ...

class Grouping(_message.Message):
    __slots__ = ("fields", "shuffle", "all", "none", "direct", "local_or_shuffle", "partial_key", "custom_serialized")
    FIELDS_FIELD_NUMBER: _ClassVar[int]
    SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    GLOBAL_FIELD_NUMBER: _ClassVar[int]
    NONE_FIELD_NUMBER: _ClassVar[int]
    DIRECT_FIELD_NUMBER: _ClassVar[int]
    LOCAL_OR_SHUFFLE_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_KEY_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_SERIALIZED_FIELD_NUMBER: _ClassVar[int]
    fields: FieldList
    shuffle: Empty
    all: Empty
    none: Empty
    direct: Empty
    local_or_shuffle: Empty
    partial_key: FieldList
    custom_serialized: bytes
    def __init__(self, fields: _Optional[_Union[FieldList, _Mapping]] = ..., shuffle: _Optional[_Union[Empty, _Mapping]] = ..., all: _Optional[_Union[Empty, _Mapping]] = ..., none: _Optional[_Union[Empty, _Mapping]] = ..., direct: _Optional[_Union[Empty, _Mapping]] = ..., local_or_shuffle: _Optional[_Union[Empty, _Mapping]] = ..., partial_key: _Optional[_Union[FieldList, _Mapping]] = ..., custom_serialized: _Optional[bytes] = ..., **kwargs) -> None: ...

class InputDef(_message.Message):
    __slots__ = ("source", "grouping")
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    GROUPING_FIELD_NUMBER: _ClassVar[int]
    source: GlobalStreamId
    grouping: Grouping
    def __init__(self, source: _Optional[_Union[GlobalStreamId, _Mapping]] = ..., grouping: _Optional[_Union[Grouping, _Mapping]] = ...) -> None: ...

class ShellComponent(_message.Message):
    __slots__ = ("command", "script", "env", "keep_worker_cwd")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    SCRIPT_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    KEEP_WORKER_CWD_FIELD_NUMBER: _ClassVar[int]
    command: _containers.RepeatedScalarFieldContainer[str]
    script: str
    env: _containers.ScalarMap[str, str]
    keep_worker_cwd: bool
    def __init__(self, command: _Optional[_Iterable[str]] = ..., script: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., keep_worker_cwd: _Optional[bool] = ...) -> None: ...

class ComponentObject(_message.Message):
    __slots__ = ("serialized_python", "shell")
    SERIALIZED_PYTHON_FIELD_NUMBER: _ClassVar[int]
    SHELL_FIELD_NUMBER: _ClassVar[int]
    serialized_python: bytes
    shell: ShellComponent
    def __init__(self, serialized_python: _Optional[bytes] = ..., shell: _Optional[_Union[ShellComponent, _Mapping]] = ...) -> None: ...

class ComponentCommon(_message.Message):
    __slots__ = ("inputs", "streams", "parallelism_hint", "num_tasks", "json_conf", "required_extras")
    class StreamsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: StreamDef
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[StreamDef, _Mapping]] = ...) -> None: ...
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    PARALLELISM_HINT_FIELD_NUMBER: _ClassVar[int]
    NUM_TASKS_FIELD_NUMBER: _ClassVar[int]
    JSON_CONF_FIELD_NUMBER: _ClassVar[int]
    REQUIRED_EXTRAS_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedCompositeFieldContainer[InputDef]
    streams: _containers.MessageMap[str, StreamDef]
    parallelism_hint: int
    num_tasks: int
    json_conf: str
    required_extras: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, inputs: _Optional[_Iterable[_Union[InputDef, _Mapping]]] = ..., streams: _Optional[_Mapping[str, StreamDef]] = ..., parallelism_hint: _Optional[int] = ..., num_tasks: _Optional[int] = ..., json_conf: _Optional[str] = ..., required_extras: _Optional[_Iterable[str]] = ...) -> None: ...

class SpoutSpec(_message.Message):
    __slots__ = ("spout_object", "common")
    SPOUT_OBJECT_FIELD_NUMBER: _ClassVar[int]
    COMMON_FIELD_NUMBER: _ClassVar[int]
    spout_object: ComponentObject
    common: ComponentCommon
    def __init__(self, spout_object: _Optional[_Union[ComponentObject, _Mapping]] = ..., common: _Optional[_Union[ComponentCommon, _Mapping]] = ...) -> None: ...

class BoltSpec(_message.Message):
    __slots__ = ("bolt_object", "common")
    BOLT_OBJECT_FIELD_NUMBER: _ClassVar[int]
    COMMON_FIELD_NUMBER: _ClassVar[int]
    bolt_object: ComponentObject
    common: ComponentCommon
    def __init__(self, bolt_object: _Optional[_Union[ComponentObject, _Mapping]] = ..., common: _Optional[_Union[ComponentCommon, _Mapping]] = ...) -> None: ...

class StormTopology(_message.Message):
    __slots__ = ("spouts", "bolts")
    class SpoutsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: SpoutSpec
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[SpoutSpec, _Mapping]] = ...) -> None: ...
    class BoltsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: BoltSpec
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[BoltSpec, _Mapping]] = ...) -> None: ...
    SPOUTS_FIELD_NUMBER: _ClassVar[int]
    BOLTS_FIELD_NUMBER: _ClassVar[int]
    spouts: _containers.MessageMap[str, SpoutSpec]
    bolts: _containers.MessageMap[str, BoltSpec]
    def __init__(self, spouts: _Optional[_Mapping[str, SpoutSpec]] = ..., bolts: _Optional[_Mapping[str, BoltSpec]] = ...) -> None: ...
