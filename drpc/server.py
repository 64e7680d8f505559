"""``squall drpc``: the DRPC server daemon (Storm's ``DRPCServer`` with ``DRPC``).

Two gRPC ports (``proto/drpc.proto``): ``drpc.port`` serves clients' ``Execute``,
``drpc.invocations.port`` serves topologies' ``FetchRequest``, ``Result`` and
``FailRequest``. An Execute queues its request in the :class:`~.requests.RequestTable`
and blocks its server thread until the request's result or failure arrives, or
``drpc.request.timeout.secs`` passes; so ``drpc.worker.threads`` bounds the requests in
flight. Authentication is Nimbus's: with ``squall.tls.*`` both ports are mutual TLS; without,
they listen only on loopback unless ``--insecure``. Who may use which port:
:mod:`.authorizer`. Arguments and results are strings: nothing from the network is
unpickled or evaluated.

Errors become status codes in one place (:func:`_abort`), with a message naming the
function, the request id and what to do; a failed Execute carries the request id in
trailing metadata.
"""

from __future__ import annotations

import functools
import logging
from concurrent import futures
from typing import Any, Mapping

import grpc

from ..client import config as cfg
from ..client import tls
from ..client.daemon import Daemon
from ..client.drpc.client import REQUEST_ID_METADATA
from ..client.errors import PermissionDenied
from ..client.rpc import Undecodable, add_tolerant
from ..proto import drpc_pb2 as pb
from ..proto import drpc_pb2_grpc as pb_grpc
from .authorizer import DRPCAuthorizer
from .requests import (Cancelled, Failed, RequestTable, Returned, ServerClosed, ShutDown,
                       TimedOut, TooMany, Unserved)

log = logging.getLogger("squall.drpc")

#: Longest function name, in UTF-8 bytes (names are log lines and queue keys).
MAX_FUNCTION_BYTES = 128


def _abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str,
           request_id: str | None = None):
    if request_id is not None:
        context.set_trailing_metadata(((REQUEST_ID_METADATA, request_id),))
    context.abort(code, message)


def _decoded(context: grpc.ServicerContext, request: Any, op: str) -> Any:
    """The request, or INVALID_ARGUMENT for bytes that are not a message of the call."""
    if isinstance(request, Undecodable):
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT, request.message(op, "drpc.proto"))
    return request


def _function(context: grpc.ServicerContext, name: str) -> str:
    if not name or len(name.encode("utf-8", "surrogatepass")) > MAX_FUNCTION_BYTES:
        _abort(context, grpc.StatusCode.INVALID_ARGUMENT,
               f"a DRPC function name must be 1 to {MAX_FUNCTION_BYTES} bytes, got "
               f"{name[:40]!r}{'...' if len(name) > 40 else ''}")
    return name


class _Servicer:
    """Shared by both services: names the caller and asks the authorizer."""

    def __init__(self, table: RequestTable, authz: DRPCAuthorizer, secure: bool):
        self.table, self.authz, self.secure = table, authz, secure

    def _authorize(self, context: grpc.ServicerContext, verb: str, function: str) -> str:
        """The caller's name ('' on a plain port), once the authorizer let it through."""
        if not self.secure:
            return ""
        principal = tls.principal_of(context)
        if principal is None:  # require_client_auth makes this unreachable; refuse anyway
            _abort(context, grpc.StatusCode.UNAUTHENTICATED,
                   "no client certificate: DRPC needs one signed by the cluster's CA")
        try:
            self.authz.check(verb, principal, function)
        except PermissionDenied as e:
            log.info("%s refused: %s", verb, e)
            _abort(context, grpc.StatusCode.PERMISSION_DENIED, str(e))
        return principal.name


class DistributedRPCServicer(_Servicer, pb_grpc.DistributedRPCServicer):
    """``drpc.port``: clients' Execute."""

    def __init__(self, table: RequestTable, authz: DRPCAuthorizer, secure: bool,
                 timeout: float):
        super().__init__(table, authz, secure)
        self.timeout = timeout

    def Execute(self, request, context):
        request = _decoded(context, request, "Execute")
        function = _function(context, request.function_name)
        principal = self._authorize(context, "execute", function)
        try:
            req = self.table.submit(function, request.func_args, principal)
        except ServerClosed as e:
            _abort(context, grpc.StatusCode.UNAVAILABLE,
                   f"the DRPC server is shutting down ({e}); retry on another of drpc.servers")
        except Unserved as e:
            _abort(context, grpc.StatusCode.NOT_FOUND, str(e))
        except TooMany as e:
            _abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED, str(e))
        # A client that goes away (cancel, its own deadline) frees this thread at once.
        context.add_callback(functools.partial(self.table.cancel, req.id))
        log.debug("request %s for %s queued", req.id, function)
        outcome = self.table.wait(req, self.timeout)
        what = f"DRPC request {req.id} for function {function!r}"
        if isinstance(outcome, Returned):
            return pb.ExecuteResponse(result=outcome.result, request_id=req.id)
        if isinstance(outcome, TimedOut):
            why = ("a topology fetched it but returned no result (is it slow, or did its "
                   "ReturnResults fail?)" if outcome.fetched else
                   f"no topology fetched it: is a topology serving {function!r} running, "
                   "with this server in its drpc.servers?")
            log.info("%s timed out after %g s", what, outcome.secs)
            _abort(context, grpc.StatusCode.DEADLINE_EXCEEDED,
                   f"{what} timed out after {outcome.secs:g} s "
                   f"({cfg.DRPC_REQUEST_TIMEOUT_SECS}): {why}", req.id)
        if isinstance(outcome, Failed):
            _abort(context, grpc.StatusCode.ABORTED,
                   f"{what} failed in the topology: "
                   f"{outcome.message or 'the topology failed it (failRequest)'}", req.id)
        if isinstance(outcome, ShutDown):
            _abort(context, grpc.StatusCode.UNAVAILABLE,
                   f"{what} was dropped: the DRPC server is shutting down ({outcome.reason})",
                   req.id)
        if isinstance(outcome, Cancelled):
            _abort(context, grpc.StatusCode.CANCELLED, f"{what} was cancelled by its client",
                   req.id)
        raise TypeError(outcome)


class DistributedRPCInvocationsServicer(_Servicer, pb_grpc.DistributedRPCInvocationsServicer):
    """``drpc.invocations.port``: topologies' FetchRequest, Result, FailRequest."""

    def FetchRequest(self, request, context):
        request = _decoded(context, request, "FetchRequest")
        function = _function(context, request.function_name)
        self._authorize(context, "fetchRequest", function)
        req = self.table.fetch(function, request.wait_ms / 1000)
        if req is None:
            return pb.DRPCRequest()
        log.debug("request %s for %s fetched", req.id, function)
        return pb.DRPCRequest(func_args=req.args, request_id=req.id)

    def Result(self, request, context):
        request = _decoded(context, request, "Result")
        function = self.table.function_of(request.request_id) or "?"
        self._authorize(context, "result", function)
        if not self.table.result(request.request_id, request.result):
            log.debug("result for unknown or finished request %s ignored", request.request_id)
        return pb.Done()

    def FailRequest(self, request, context):
        request = _decoded(context, request, "FailRequest")
        function = self.table.function_of(request.request_id) or "?"
        self._authorize(context, "failRequest", function)
        if self.table.fail(request.request_id, request.message):
            log.info("request %s for %s failed by the topology: %s", request.request_id,
                     function, request.message or "failRequest")
        return pb.Done()


def serve(servicer: Any, add: Any, conf: Mapping[str, Any], host: str, port: int, threads: int,
          name: str, insecure: bool = False) -> tuple[grpc.Server, int]:
    """Start one gRPC server for ``servicer`` on ``host:port`` (0: any free port); returns it
    and the bound port. Nimbus's rules (nimbus/servicer.py ``serve``): mutual TLS with
    ``squall.tls.*``; without, loopback only unless ``insecure``; a port in use is an error."""
    secure = tls.refuse_plaintext(conf, host, port, "the DRPC server", cfg.DRPC_BIND_HOST,
                                  insecure)
    if secure:
        tls.check_serving(conf, host, port, f"the DRPC server ({name})")
    address = f"{host}:{port}"
    queue = int(cfg.get(conf, cfg.DRPC_QUEUE_SIZE))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=threads,
                                                    thread_name_prefix=f"drpc-{name}"),
                         options=tls.server_options(),
                         maximum_concurrent_rpcs=threads + queue)
    add_tolerant(add, servicer, server)
    try:
        bound = (server.add_secure_port(address, tls.server_credentials(conf)) if secure
                 else server.add_insecure_port(address))
    except RuntimeError:  # grpc >= 1.6x raises where older ones returned 0
        bound = 0
    if bound == 0:
        server.stop(None)
        raise OSError(f"the DRPC server cannot listen on {address} ({name}): the port is in "
                      "use (another DRPC server?) or the address is not one of this host's")
    server.start()
    if secure:
        log.info("DRPC %s listening on %s:%d (mutual TLS, authorizer %s)", name, host, bound,
                 "simple" if servicer.authz.enabled else "none")
    else:
        log.warning("DRPC %s listening on %s:%d WITHOUT authentication%s", name, host, bound,
                    "" if tls.loopback(host) else " (--insecure): anyone who reaches it may "
                    "read and answer every request")
    return server, bound


class DRPCServer(Daemon):
    """The DRPC daemon. Example::

        with DRPCServer(conf, host="127.0.0.1", port=0, invocations_port=0) as drpc:
            conf["drpc.port"], conf["drpc.invocations.port"] = drpc.port, drpc.invocations_port

    ``host`` defaults to ``drpc.bind.host``, the ports to ``drpc.port`` and
    ``drpc.invocations.port`` (0: a free port; the bound ones are the attributes).
    """

    def __init__(self, conf: Mapping[str, Any], host: str | None = None,
                 port: int | None = None, invocations_port: int | None = None,
                 insecure: bool = False):
        super().__init__()
        self.conf = dict(conf)
        self.host = host if host is not None else str(cfg.get(conf, cfg.DRPC_BIND_HOST))
        self.port = int(cfg.get(conf, cfg.DRPC_PORT)) if port is None else port
        self.invocations_port = (int(cfg.get(conf, cfg.DRPC_INVOCATIONS_PORT))
                                 if invocations_port is None else invocations_port)
        self.insecure = insecure
        self.timeout = float(cfg.get(conf, cfg.DRPC_REQUEST_TIMEOUT_SECS))
        if self.timeout <= 0:
            raise cfg.ConfigError(cfg.DRPC_REQUEST_TIMEOUT_SECS, f"must be > 0, got "
                                                                 f"{self.timeout:g}")
        # One principal may keep half the execute threads waiting, not all of them.
        self.table = RequestTable(
            max_per_principal=max(1, int(cfg.get(self.conf, cfg.DRPC_WORKER_THREADS)) // 2))
        self._servers: list[grpc.Server] = []

    def start_unsafe(self) -> None:
        authz = DRPCAuthorizer(self.conf)
        secure = tls.enabled(self.conf)
        server, self.port = serve(
            DistributedRPCServicer(self.table, authz, secure, self.timeout),
            pb_grpc.add_DistributedRPCServicer_to_server, self.conf, self.host, self.port,
            int(cfg.get(self.conf, cfg.DRPC_WORKER_THREADS)), "execute", self.insecure)
        self._servers.append(server)
        server, self.invocations_port = serve(
            DistributedRPCInvocationsServicer(self.table, authz, secure),
            pb_grpc.add_DistributedRPCInvocationsServicer_to_server, self.conf, self.host,
            self.invocations_port, int(cfg.get(self.conf, cfg.DRPC_INVOCATIONS_THREADS)),
            "invocations", self.insecure)
        self._servers.append(server)
        log.info("DRPC server running: execute on %s:%d, invocations on %s:%d, requests time "
                 "out after %g s", self.host, self.port, self.host, self.invocations_port,
                 self.timeout)

    def close_unsafe(self, reason: str) -> None:
        dropped = self.table.close(reason)  # wakes every waiting Execute and FetchRequest
        if dropped:
            log.warning("DRPC server closing (%s): %d requests dropped", reason, dropped)
        for server in self._servers:
            server.stop(grace=1).wait(5)
        self._servers.clear()
