"""The two clients of a DRPC server (``proto/drpc.proto``) and the error they raise.

:class:`DRPCClient` is Storm's ``DRPCClient`` (``execute(function, args)`` on
``drpc.port``); :class:`DRPCInvocationsClient` is Storm's ``DRPCInvocationsClient``, what a
topology's :class:`~squall.client.drpc.DRPCSpout` and
:class:`~squall.client.drpc.ReturnResults` call on ``drpc.invocations.port``. Both speak
mutual TLS with ``squall.tls.*`` when the conf sets it (as the Nimbus client does,
:mod:`squall.client.tls`), plain gRPC otherwise, and turn gRPC errors into
:class:`DRPCExecutionException` (or :class:`~squall.client.errors.PermissionDenied`,
Storm's ``AuthorizationException``) carrying the server's message.
"""

from __future__ import annotations

from typing import Any, Mapping

import grpc

from ...proto import drpc_pb2 as pb
from ...proto import drpc_pb2_grpc as pb_grpc
from .. import config as cfg
from .. import tls
from ..errors import PermissionDenied, SquallError

#: Trailing-metadata key of a failed Execute: the id the server gave the request.
REQUEST_ID_METADATA = "squall-drpc-request-id"
#: How long a client waits beyond the server's drpc.request.timeout.secs before giving up
#: itself: the server's own timeout error (which names the request) should arrive first.
CLIENT_MARGIN_SECS = 30.0
#: Same reconnect backoff as the Nimbus client: a restarted server is found within seconds.
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 200),
                   ("grpc.min_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", 2000))

# Storm's DRPCExceptionType names, and two of ours.
SERVER_TIMEOUT = "SERVER_TIMEOUT"
SERVER_SHUTDOWN = "SERVER_SHUTDOWN"
FAILED_REQUEST = "FAILED_REQUEST"
INTERNAL_ERROR = "INTERNAL_ERROR"
#: The server cannot be reached (not running, wrong port, or a TLS mismatch).
UNAVAILABLE = "UNAVAILABLE"
#: The request itself is malformed (empty function name, too long).
INVALID_REQUEST = "INVALID_REQUEST"


class DRPCExecutionException(SquallError):
    """A DRPC request did not return a result (Storm's ``DRPCExecutionException``).

    ``type`` is Storm's ``DRPCExceptionType`` name (``SERVER_TIMEOUT``, ``FAILED_REQUEST``,
    ``SERVER_SHUTDOWN``, ``INTERNAL_ERROR``) or ``UNAVAILABLE``/``INVALID_REQUEST``;
    ``function`` and ``request_id`` (when the server gave one) say which request.
    """

    def __init__(self, message: str, type: str = INTERNAL_ERROR, function: str | None = None,
                 request_id: str | None = None, address: str | None = None):
        self.type = type
        self.function = function
        self.request_id = request_id
        #: host:port called.
        self.address = address
        super().__init__(message)


_TYPE_OF_CODE = {
    grpc.StatusCode.DEADLINE_EXCEEDED: SERVER_TIMEOUT,
    grpc.StatusCode.ABORTED: FAILED_REQUEST,
    grpc.StatusCode.INVALID_ARGUMENT: INVALID_REQUEST,
    grpc.StatusCode.RESOURCE_EXHAUSTED: INTERNAL_ERROR,
}


def _channel(conf: Mapping[str, Any], address: str) -> grpc.Channel:
    if tls.enabled(conf):
        return grpc.secure_channel(address, tls.channel_credentials(conf), CHANNEL_OPTIONS)
    return grpc.insecure_channel(address, CHANNEL_OPTIONS)


def _translate(e: grpc.RpcError, address: str, what: str, function: str | None,
               credentials: bool, own_deadline: float | None = None) -> SquallError:
    """One gRPC error as ours; ``what`` names the service for the unreachable case."""
    code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
    details = (e.details() if hasattr(e, "details") else None) or str(code)
    meta = dict(e.trailing_metadata() or ()) if hasattr(e, "trailing_metadata") else {}
    rid = meta.get(REQUEST_ID_METADATA)
    if code is grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(details)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED and not rid:  # our deadline, not the server's
        return DRPCExecutionException(
            f"the DRPC server at {address} did not answer {what} for function {function!r} "
            f"within {own_deadline:g} s (the client's deadline)", SERVER_TIMEOUT, function,
            None, address)
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED) and not rid:
        if "shutting down" in details:
            return DRPCExecutionException(details, SERVER_SHUTDOWN, function, None, address)
        hint = ("is it running, and do its certificate and ours come from the same CA "
                "(squall.tls.*)?" if credentials else
                "is it running? If it uses TLS, set squall.tls.* here too")
        return DRPCExecutionException(f"cannot reach the DRPC server's {what} at {address}: "
                                      f"{details}; {hint}", UNAVAILABLE, function, None, address)
    if code is grpc.StatusCode.UNAVAILABLE:
        return DRPCExecutionException(details, SERVER_SHUTDOWN, function, rid, address)
    return DRPCExecutionException(details, _TYPE_OF_CODE.get(code, INTERNAL_ERROR), function,
                                  rid, address)


class DRPCClient:
    """Calls DRPC functions on one DRPC server (Storm's ``DRPCClient``). Example::

        with DRPCClient("drpc1.example", conf=conf) as drpc:
            print(drpc.execute("reach", "foo.com/blog/1"))

    ``port`` defaults to the conf's ``drpc.port`` (3772). ``execute`` blocks until the
    topology serving the function returns; the server gives up after its
    ``drpc.request.timeout.secs`` and this client ``timeout`` seconds after the call
    (default: this conf's ``drpc.request.timeout.secs`` plus 30 s). Thread-safe: one client
    may run many requests at once.
    """

    def __init__(self, host: str, port: int | None = None,
                 conf: Mapping[str, Any] | None = None, timeout: float | None = None):
        conf = conf or {}
        port = int(cfg.get(conf, cfg.DRPC_PORT)) if port is None else int(port)
        #: ``host:port`` called.
        self.address = f"{host}:{port}"
        #: Seconds one execute may take, client side.
        self.timeout = (float(cfg.get(conf, cfg.DRPC_REQUEST_TIMEOUT_SECS)) + CLIENT_MARGIN_SECS
                        if timeout is None else float(timeout))
        self._credentials = tls.enabled(conf)
        self._channel = _channel(conf, self.address)
        self._stub = pb_grpc.DistributedRPCStub(self._channel)

    def execute(self, function: str, args: str) -> str:
        """Run ``function`` on ``args`` in the topology serving it and return its result.

        Raises :class:`DRPCExecutionException` (timed out, failed, server away) or
        :class:`~squall.client.errors.PermissionDenied`.
        """
        if not isinstance(function, str) or not isinstance(args, str):
            raise TypeError("DRPC function names and arguments are strings (as in Storm), "
                            f"got {type(function).__name__} and {type(args).__name__}")
        try:
            reply = self._stub.Execute(pb.ExecuteRequest(function_name=function, func_args=args),
                                       timeout=self.timeout)
        except grpc.RpcError as e:
            raise _translate(e, self.address, "execute", function, self._credentials,
                             self.timeout) from None
        return reply.result

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "DRPCClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class DRPCInvocationsClient:
    """A topology's side of one DRPC server (Storm's ``DRPCInvocationsClient``).

    Not thread-safe by contract (gRPC channels are, but the spout and the bolt each keep
    their own). Example::

        c = DRPCInvocationsClient(conf, "drpc1.example")
        request = c.fetch_request("reach", wait_secs=0.5)   # (id, args) or None
        if request:
            c.result(request[0], "16")
        c.close()
    """

    def __init__(self, conf: Mapping[str, Any], host: str, port: int | None = None,
                 timeout: float = 10.0):
        port = int(cfg.get(conf, cfg.DRPC_INVOCATIONS_PORT)) if port is None else int(port)
        self.host, self.port = host, port
        self.address = f"{host}:{port}"
        #: Seconds one call may take beyond its own wait.
        self.timeout = timeout
        self._credentials = tls.enabled(conf)
        self._channel = _channel(conf, self.address)
        self._stub = pb_grpc.DistributedRPCInvocationsStub(self._channel)

    def _call(self, method: str, request: Any, function: str | None, extra: float = 0.0):
        try:
            return getattr(self._stub, method)(request, timeout=self.timeout + extra)
        except grpc.RpcError as e:
            raise _translate(e, self.address, method, function, self._credentials,
                             self.timeout + extra) from None

    def fetch_request(self, function: str, wait_secs: float = 0.0) -> tuple[str, str] | None:
        """The next request for ``function`` as ``(request_id, args)``, or None; waits up to
        ``wait_secs`` (the server caps it at 1 s) for one to arrive."""
        wait_ms = max(0, int(wait_secs * 1000))
        reply = self._call("FetchRequest", pb.FetchRequestRequest(function_name=function,
                                                                  wait_ms=wait_ms),
                           function, wait_ms / 1000)
        return (reply.request_id, reply.func_args) if reply.request_id else None

    def result(self, request_id: str, result: str) -> None:
        """Return ``result`` to the client waiting on ``request_id``."""
        self._call("Result", pb.ResultRequest(request_id=request_id, result=result), None)

    def fail_request(self, request_id: str, message: str = "") -> None:
        """Fail the request: its client's execute raises with ``message``."""
        self._call("FailRequest", pb.FailRequestRequest(request_id=request_id, message=message),
                   None)

    def close(self) -> None:
        self._channel.close()
