"""The gRPC face of :class:`~squall.nimbus.nimbus.Nimbus` (``proto/nimbus.proto``'s ``Nimbus`` service).

Thin on purpose, as Storm's ``Nimbus`` Thrift handler methods are over its internals: each
RPC unpacks the request, calls Nimbus and packs the answer. :func:`_rpc` is the one place
errors become gRPC status codes (the table is in the proto's header): it logs the op name
and the error, and sends the error's message as details — never a traceback; anything
unexpected is INTERNAL with "see the Nimbus log". :func:`serve` starts a server.
"""

from __future__ import annotations

import functools
import inspect
import logging
from concurrent import futures

import grpc

from ..client.cluster_state import ClusterStateError, ZooKeeperUnavailable
from ..client.errors import (LEADER_METADATA, InvalidTopology, NimbusError, NimbusUnavailable,
                             NotALeader, SquallError)
from ..client.transitions import InvalidTransition
from ..proto import nimbus_pb2 as pb
from ..proto import nimbus_pb2_grpc as pb_grpc
from ..proto import topology_pb2
from .nimbus import Nimbus

log = logging.getLogger("squall.nimbus.servicer")


def status_of(exc: BaseException) -> grpc.StatusCode:
    """The gRPC status code an error travels as."""
    if isinstance(exc, NimbusError):
        return getattr(grpc.StatusCode, exc.grpc_code)
    if isinstance(exc, InvalidTopology):
        return grpc.StatusCode.INVALID_ARGUMENT
    if isinstance(exc, InvalidTransition):
        return grpc.StatusCode.FAILED_PRECONDITION
    if isinstance(exc, ZooKeeperUnavailable):
        return grpc.StatusCode.UNAVAILABLE
    return grpc.StatusCode.INTERNAL


def _fail(op: str, context: grpc.ServicerContext, exc: BaseException):
    code = status_of(exc)
    if isinstance(exc, SquallError) and code is not grpc.StatusCode.INTERNAL:
        log.info("%s refused (%s): %s", op, code.name, exc)
        message = str(exc)
    elif isinstance(exc, ClusterStateError):
        log.error("%s failed: %s", op, exc)
        message = f"{op} failed in ZooKeeper: {exc}"
    else:
        log.exception("%s failed with a bug", op)
        message = f"{op} failed inside Nimbus ({type(exc).__name__}); see the Nimbus log"
    if isinstance(exc, NotALeader) and exc.leader:
        # Where to retry, machine-readable: NimbusClient follows it (Storm's leader discovery).
        context.set_trailing_metadata(((LEADER_METADATA, exc.leader),))
    context.abort(code, message)


def _rpc(method):
    """Map errors of one RPC (unary or server-streaming) to a status code, with the op name."""
    op = method.__name__
    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def stream(self, request, context):
            try:
                yield from method(self, request, context)
            except Exception as exc:  # noqa: BLE001 - the one translation point
                _fail(op, context, exc)
        return stream

    @functools.wraps(method)
    def unary(self, request, context):
        try:
            return method(self, request, context)
        except Exception as exc:  # noqa: BLE001 - the one translation point
            _fail(op, context, exc)
    return unary


def _opt(msg, field: str):
    return getattr(msg, field) if msg.HasField(field) else None


class NimbusServicer(pb_grpc.NimbusServicer):
    """Serves one :class:`Nimbus`. Example: ``pb_grpc.add_NimbusServicer_to_server(NimbusServicer(n), server)``."""

    def __init__(self, nimbus: Nimbus):
        self.nimbus = nimbus

    # --- upload / download ---
    @_rpc
    def BeginFileUpload(self, request, context):
        self.nimbus.require_leader()  # the submit that follows goes to the leader
        return pb.UploadLocation(location=self.nimbus.package_store.begin(
            request.file_name, request.total_size))

    @_rpc
    def UploadChunk(self, request, context):
        self.nimbus.package_store.append(request.location, request.offset, request.data)
        return topology_pb2.Empty()

    @_rpc
    def FinishFileUpload(self, request, context):
        self.nimbus.package_store.finish(request.location)
        return topology_pb2.Empty()

    @_rpc
    def UploadPackage(self, request_iterator, context):
        self.nimbus.require_leader()
        store = self.nimbus.package_store
        location = store.begin("", 0)
        for chunk in request_iterator:
            store.append(location, chunk.offset, chunk.data)
        store.finish(location)
        return pb.UploadLocation(location=location)

    @_rpc
    def DownloadPackage(self, request, context):
        for offset, data in self.nimbus.package_store.read_package(request.id):
            yield pb.Chunk(location=request.id, data=data, offset=offset)

    # --- submit and lifecycle ---
    @_rpc
    def SubmitTopology(self, request, context):
        status = pb.SubmitOptions.InitialStatus.Name(request.options.initial_status)
        warnings: list[str] = []
        tid = self.nimbus.submit(request.name, request.uploaded_location, request.json_conf,
                                 request.topology, status, request.options.owner,
                                 warn=warnings.append)
        return pb.SubmitResponse(topology_id=tid, warnings=warnings)

    @_rpc
    def KillTopology(self, request, context):
        self.nimbus.kill(request.name, _opt(request, "wait_secs"))
        return topology_pb2.Empty()

    @_rpc
    def Activate(self, request, context):
        self.nimbus.activate(request.name)
        return topology_pb2.Empty()

    @_rpc
    def Deactivate(self, request, context):
        self.nimbus.deactivate(request.name)
        return topology_pb2.Empty()

    @_rpc
    def Rebalance(self, request, context):
        self.nimbus.rebalance(request.name, _opt(request, "wait_secs"),
                              _opt(request, "num_workers"), dict(request.executors))
        return topology_pb2.Empty()

    # --- views ---
    @_rpc
    def GetClusterInfo(self, request, context):
        info = self.nimbus.cluster_info()
        return pb.ClusterSummary(
            supervisors=[pb.SupervisorSummary(**s) for s in info["supervisors"]],
            topologies=[pb.TopologySummary(**t) for t in info["topologies"]],
            nimbus_uptime_secs=info["nimbus_uptime_secs"],
            nimbuses=[pb.NimbusSummary(**n) for n in info["nimbuses"]])

    @_rpc
    def GetTopologyInfo(self, request, context):
        which = request.WhichOneof("ref")
        info = (self.nimbus.topology_info(name=request.name) if which == "name"
                else self.nimbus.topology_info(topology_id=request.id))
        errors = [pb.ErrorInfo(component=e.get("component", ""), error=e.get("error", ""),
                               time_secs=int(e.get("time") or 0), host=e.get("host") or "",
                               port=int(e.get("port") or 0), task=int(e.get("task") or 0))
                  for e in info["errors"]]
        return pb.TopologyInfo(id=info["id"], name=info["name"], status=info["status"],
                               uptime_secs=info["uptime_secs"], owner=info["owner"],
                               executors=[pb.ExecutorSummary(**e) for e in info["executors"]],
                               components=[pb.ComponentStats(**c) for c in info["components"]],
                               errors=errors)

    @_rpc
    def GetTopologyConf(self, request, context):
        return pb.JsonConf(json_conf=self.nimbus.topology_conf(request.id))

    @_rpc
    def GetUserTopology(self, request, context):
        msg = topology_pb2.StormTopology()
        msg.ParseFromString(self.nimbus.user_topology(request.id))
        return msg

    @_rpc
    def GetLeader(self, request, context):
        for n in self.nimbus.nimbuses():
            if n["is_leader"]:
                return pb.NimbusSummary(**n)
        raise NimbusUnavailable("no Nimbus leads right now; retry in a few seconds")

    @_rpc
    def SendSupervisorWorkerHeartbeats(self, request, context):
        self.nimbus.record_heartbeats(request.supervisor_id, list(request.worker_heartbeats),
                                      list(request.errors))
        return topology_pb2.Empty()


def serve(nimbus: Nimbus, host: str, port: int, max_workers: int = 16) -> grpc.Server:
    """Start a gRPC server for ``nimbus`` on ``host:port``; stop it with ``server.stop(grace)``."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="nimbus-grpc"))
    pb_grpc.add_NimbusServicer_to_server(NimbusServicer(nimbus), server)
    address = f"{host}:{port}"
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError as e:
        raise OSError(f"Nimbus cannot listen on {address}: {e}") from None
    if bound == 0:
        raise OSError(f"Nimbus cannot listen on {address} (in use?)")
    server.start()
    log.info("Nimbus gRPC listening on %s", address)
    return server
