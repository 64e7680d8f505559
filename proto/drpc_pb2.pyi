from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ExecuteRequest(_message.Message):
    __slots__ = ("function_name", "func_args")
    FUNCTION_NAME_FIELD_NUMBER: _ClassVar[int]
    FUNC_ARGS_FIELD_NUMBER: _ClassVar[int]
    function_name: str
    func_args: str
    def __init__(self, function_name: _Optional[str] = ..., func_args: _Optional[str] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ("result", "request_id")
    RESULT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    result: str
    request_id: str
    def __init__(self, result: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class FetchRequestRequest(_message.Message):
    __slots__ = ("function_name", "wait_ms")
    FUNCTION_NAME_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    function_name: str
    wait_ms: int
    def __init__(self, function_name: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class DRPCRequest(_message.Message):
    __slots__ = ("func_args", "request_id")
    FUNC_ARGS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    func_args: str
    request_id: str
    def __init__(self, func_args: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class ResultRequest(_message.Message):
    __slots__ = ("request_id", "result")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    result: str
    def __init__(self, request_id: _Optional[str] = ..., result: _Optional[str] = ...) -> None: ...

class FailRequestRequest(_message.Message):
    __slots__ = ("request_id", "message")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    message: str
    def __init__(self, request_id: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class Done(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
