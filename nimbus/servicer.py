"""The gRPC face of :class:`~squall.nimbus.nimbus.Nimbus` (``proto/nimbus.proto``'s ``Nimbus`` service).

Thin on purpose, as Storm's ``Nimbus`` Thrift handler methods are over its internals: each
RPC unpacks the request, calls Nimbus and packs the answer. :func:`_rpc` is the one place
errors become gRPC status codes (the table is in the proto's header): it logs the op name
and the error, and sends the error's message as details — never a traceback; anything
unexpected is INTERNAL with "see the Nimbus log". :func:`serve` starts a server.

On a TLS server every RPC first names its caller (the client certificate's principal,
:mod:`squall.client.tls`) and asks the :class:`~.authorizer.Authorizer` whether that
principal may do the verb; the principal, not the request, is a topology's owner. On a
plain server (loopback, or ``--insecure``) there are no principals and no authorization.
"""

from __future__ import annotations

import collections
import functools
import inspect
import json
import logging
import threading
import time
from concurrent import futures

import grpc
from google.protobuf import json_format

from ..client import config as cfg
from ..client import tls
from ..client.cluster_state import ClusterStateError, ZooKeeperUnavailable
from ..client.errors import (LEADER_METADATA, InvalidRequest, InvalidTopology, LimitExceeded,
                             NimbusError,
                             NimbusUnavailable, NotALeader, SquallError, Unauthenticated)
from ..client.profiling import expires_at
from ..client.rpc import Undecodable, add_tolerant
from ..client.tls import Principal
from ..client.transitions import InvalidTransition
from ..proto import nimbus_pb2 as pb
from ..proto import nimbus_pb2_grpc as pb_grpc
from ..proto import topology_pb2
from .authorizer import Authorizer
from .nimbus import Nimbus

log = logging.getLogger("squall.nimbus.servicer")

#: Requests that do not decode are named against this proto file.
PROTO = "nimbus.proto"
#: A streaming upload holds one of the server's threads while it lasts: one that sends less
#: than STREAM_MIN_BYTES in STREAM_IDLE_SECS (silent, or trickling) is cancelled ...
STREAM_IDLE_SECS = 30.0
STREAM_MIN_BYTES = 64 * 1024
#: ... and a principal has at most this many open at once, all principals together at
#: most a quarter of the threads: the rest stay for other calls (supervisors' heartbeats).
STREAMS_PER_PRINCIPAL = 2
#: RPCs in flight or queued beyond the threads; more are refused (RESOURCE_EXHAUSTED).
MAX_CONCURRENT_RPCS = 64


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
    """Map errors of one RPC (unary or server-streaming) to a status code, with the op name;
    count it by method and status (nimbus/metrics.py)."""
    op = method.__name__
    if inspect.isgeneratorfunction(method):
        @functools.wraps(method)
        def stream(self, request, context):
            t0, code = time.perf_counter(), "OK"
            try:
                if isinstance(request, Undecodable):
                    raise InvalidRequest(request.message(op, PROTO))
                yield from method(self, request, context)
            except Exception as exc:  # noqa: BLE001 - the one translation point
                code = status_of(exc).name
                _fail(op, context, exc)
            finally:
                self.nimbus.metrics.rpc(op, code, time.perf_counter() - t0)
        return stream

    @functools.wraps(method)
    def unary(self, request, context):
        t0, code = time.perf_counter(), "OK"
        try:
            if isinstance(request, Undecodable):
                raise InvalidRequest(request.message(op, PROTO))
            return method(self, request, context)
        except Exception as exc:  # noqa: BLE001 - the one translation point
            code = status_of(exc).name
            _fail(op, context, exc)
        finally:
            self.nimbus.metrics.rpc(op, code, time.perf_counter() - t0)
    return unary


def _message(cls, row: dict):
    """A view's dict (nimbus/views.py, proto field names) as a message, nested parts too."""
    return json_format.ParseDict(row, cls())


def _opt(msg, field: str):
    return getattr(msg, field) if msg.HasField(field) else None


class NimbusServicer(pb_grpc.NimbusServicer):
    """Serves one :class:`Nimbus`. Example: ``pb_grpc.add_NimbusServicer_to_server(NimbusServicer(n), server)``."""

    def __init__(self, nimbus: Nimbus, secure: bool = False, threads: int = 16):
        self.nimbus = nimbus
        #: Callers present verified client certificates (a TLS port).
        self.secure = secure
        self.authz = Authorizer(nimbus.conf)
        #: Open UploadPackage streams by principal, bounded (see STREAMS_PER_PRINCIPAL).
        self._streams: collections.Counter[str] = collections.Counter()
        self._streams_lock = threading.Lock()
        self._max_streams = max(1, threads // 4)

    def _caller(self, context: grpc.ServicerContext, verb: str) -> Principal | None:
        """Who calls (None on a plain port: nobody is known)."""
        if not self.secure:
            return None
        p = tls.principal_of(context)
        if p is None:  # TLS with require_client_auth makes this unreachable; be strict anyway
            raise Unauthenticated(f"{verb} needs a client certificate signed by the cluster's CA")
        return p

    def _allow(self, context: grpc.ServicerContext, verb: str, name: str | None = None,
               topology_id: str | None = None) -> Principal | None:
        """The caller, once allowed to ``verb``."""
        p = self._caller(context, verb)
        if p is not None:
            self.authz.check(verb, p, lambda: self.nimbus.topology_acl(name, topology_id))
        return p

    def _guard(self, context: grpc.ServicerContext, verb: str):
        """For a change to a topology named in the request: authenticate now, authorize
        inside Nimbus's lock against the topology actually changed (None on a plain port)."""
        p = self._caller(context, verb)
        return None if p is None else (lambda acl: self.authz.check(verb, p, acl))

    # --- upload / download ---
    @_rpc
    def BeginFileUpload(self, request, context):
        p = self._allow(context, "fileUpload")
        self.nimbus.require_leader()  # the submit that follows goes to the leader
        return pb.UploadLocation(location=self.nimbus.package_store.begin(
            request.file_name, request.total_size, p.name if p else ""))

    @_rpc
    def UploadChunk(self, request, context):
        p = self._allow(context, "fileUpload")
        self.nimbus.package_store.append(request.location, request.offset, request.data,
                                         p.name if p else None)
        return topology_pb2.Empty()

    @_rpc
    def FinishFileUpload(self, request, context):
        p = self._allow(context, "fileUpload")
        self.nimbus.package_store.finish(request.location, p.name if p else None)
        return topology_pb2.Empty()

    @_rpc
    def AbandonFileUpload(self, request, context):
        p = self._allow(context, "fileUpload")
        self.nimbus.package_store.abandon(request.location, p.name if p else None)
        return topology_pb2.Empty()

    @_rpc
    def UploadPackage(self, request_iterator, context):
        p = self._allow(context, "fileUpload")
        self.nimbus.require_leader()
        who = p.name if p else ""
        with self._streams_lock:
            if self._streams[who] >= STREAMS_PER_PRINCIPAL or \
                    sum(self._streams.values()) >= self._max_streams:
                raise LimitExceeded(
                    f"{who or 'this client'} has {self._streams[who]} upload streams open and "
                    f"Nimbus {sum(self._streams.values())} (at most {STREAMS_PER_PRINCIPAL} "
                    f"per user, {self._max_streams} in all); retry when they finish")
            self._streams[who] += 1
        try:
            return self._upload_stream(request_iterator, context, who)
        finally:
            with self._streams_lock:
                self._streams[who] -= 1

    def _upload_stream(self, request_iterator, context, who: str):
        store = self.nimbus.package_store
        location = store.begin("", 0, who)
        idle = _IdleLimit(context, STREAM_IDLE_SECS, STREAM_MIN_BYTES)
        try:
            for chunk in idle.watch(request_iterator):
                store.append(location, chunk.offset, chunk.data)
        except Exception:
            store.discard(location)
            if not idle.fired:
                raise
        if idle.fired:  # the cancelled stream raised, or (as gRPC may) just ended
            store.discard(location)
            raise InvalidRequest(f"upload stream sent less than {STREAM_MIN_BYTES} bytes in "
                                 f"{STREAM_IDLE_SECS:g} s; cancelled (send chunks without "
                                 "pauses)")
        store.finish(location)
        return pb.UploadLocation(location=location)

    @_rpc
    def DownloadPackage(self, request, context):
        self._allow(context, "fileDownload")
        for offset, data in self.nimbus.package_store.read_package(request.id):
            yield pb.Chunk(location=request.id, data=data, offset=offset)

    # --- submit and lifecycle ---
    @_rpc
    def SubmitTopology(self, request, context):
        p = self._allow(context, "submitTopology")
        status = pb.SubmitOptions.InitialStatus.Name(request.options.initial_status)
        warnings: list[str] = []
        # Who submitted is who authenticated; the request's owner counts only on a plain port.
        owner = p.name if p is not None else request.options.owner
        tid = self.nimbus.submit(request.name, request.uploaded_location, request.json_conf,
                                 request.topology, status, owner, warn=warnings.append)
        return pb.SubmitResponse(topology_id=tid, warnings=warnings)

    @_rpc
    def KillTopology(self, request, context):
        self.nimbus.kill(request.name, _opt(request, "wait_secs"),
                         guard=self._guard(context, "killTopology"))
        return topology_pb2.Empty()

    @_rpc
    def SetLogConfig(self, request, context):
        config = self.nimbus.set_log_config(
            request.name, {k: (v.level, v.timeout_secs) for k, v in request.levels.items()},
            list(request.remove), guard=self._guard(context, "setLogConfig"))
        return pb.LogConfig(levels={k: pb.LogLevel(level=v["level"],
                                                   reset_at_secs=int(v.get("reset_at") or 0))
                                    for k, v in config.items()})

    # --- profiling and debugging ---
    @_rpc
    def SetWorkerProfiler(self, request, context):
        r = self.nimbus.set_worker_profiler(
            request.name, request.worker, request.action, request.secs,
            guard=self._guard(context, "setWorkerProfiler"))
        return _profile_request(request.name, r)

    @_rpc
    def GetComponentPendingProfileActions(self, request, context):
        which = request.WhichOneof("ref")
        if which == "name":
            self._allow(context, "getComponentPendingProfileActions", name=request.name)
            found = self.nimbus.pending_profile_actions(name=request.name)
        else:
            self._allow(context, "getComponentPendingProfileActions", topology_id=request.id)
            found = self.nimbus.pending_profile_actions(topology_id=request.id)
        name = request.name if which == "name" else ""
        return pb.ProfileRequests(
            requests=[_profile_request(name, dict(r, topology_id=found["topology_id"]))
                      for r in found["requests"]],
            active=[_profile_request(name, dict(r, topology_id=found["topology_id"]))
                    for r in found["active"]])

    @_rpc
    def Debug(self, request, context):
        options = self.nimbus.debug(request.name, request.component, request.enable,
                                    request.sampling_pct, guard=self._guard(context, "debug"))
        return pb.ComponentDebug(component_debug={
            c: pb.DebugOptions(enable=bool(o.get("enable")), sampling_pct=float(o.get("pct", 0)))
            for c, o in options.items()})

    @_rpc
    def Activate(self, request, context):
        self.nimbus.activate(request.name, guard=self._guard(context, "activate"))
        return topology_pb2.Empty()

    @_rpc
    def Deactivate(self, request, context):
        self.nimbus.deactivate(request.name, guard=self._guard(context, "deactivate"))
        return topology_pb2.Empty()

    @_rpc
    def Rebalance(self, request, context):
        self.nimbus.rebalance(request.name, _opt(request, "wait_secs"),
                              _opt(request, "num_workers"), dict(request.executors),
                              guard=self._guard(context, "rebalance"))
        return topology_pb2.Empty()

    # --- views ---
    @_rpc
    def GetClusterInfo(self, request, context):
        self._allow(context, "getClusterInfo")
        info = self.nimbus.cluster_info()
        return pb.ClusterSummary(
            supervisors=[pb.SupervisorSummary(**s) for s in info["supervisors"]],
            topologies=[_message(pb.TopologySummary, t) for t in info["topologies"]],
            nimbus_uptime_secs=info["nimbus_uptime_secs"],
            nimbuses=[pb.NimbusSummary(**n) for n in info["nimbuses"]])

    @_rpc
    def GetTopologyInfo(self, request, context):
        which = request.WhichOneof("ref")
        if request.window_secs < 0:
            raise InvalidRequest(f"window_secs must be 0 (all time) or positive, got "
                                 f"{request.window_secs}")
        if which == "name":
            self._allow(context, "getTopologyInfo", name=request.name)
            info = self.nimbus.topology_info(name=request.name, window_secs=request.window_secs)
        else:
            self._allow(context, "getTopologyInfo", topology_id=request.id)
            info = self.nimbus.topology_info(topology_id=request.id,
                                             window_secs=request.window_secs)
        return _message(pb.TopologyInfo, info)

    @_rpc
    def GetTopologyConf(self, request, context):
        self._allow(context, "getTopologyConf", topology_id=request.id)
        conf_json = self.nimbus.topology_conf(request.id)
        if request.include_secrets:  # what workers need; a plain port cannot tell who asks
            self._allow(context, "getTopologyConfSecrets")  # supervisors and Nimbuses
            return pb.JsonConf(json_conf=conf_json)
        return pb.JsonConf(json_conf=json.dumps(self._redact(json.loads(conf_json)),
                                                sort_keys=True))

    def _redact(self, conf: dict) -> dict:
        return cfg.redact(conf, cfg.get(self.nimbus.conf, cfg.SQUALL_SECRET_KEYS) or ())

    @_rpc
    def GetUserTopology(self, request, context):
        p = self._allow(context, "getUserTopology", topology_id=request.id)
        msg = topology_pb2.StormTopology()
        msg.ParseFromString(self.nimbus.user_topology(request.id))
        if p is not None and not self.authz.is_daemon(p):  # workers need component secrets
            for spec in [*msg.spouts.values(), *msg.bolts.values()]:
                if spec.common.json_conf:
                    spec.common.json_conf = json.dumps(
                        self._redact(json.loads(spec.common.json_conf)), sort_keys=True)
        return msg

    @_rpc
    def GetLeader(self, request, context):
        self._allow(context, "getLeader")
        for n in self.nimbus.nimbuses():
            if n["is_leader"]:
                return pb.NimbusSummary(**n)
        raise NimbusUnavailable("no Nimbus leads right now; retry in a few seconds")

    @_rpc
    def SendSupervisorWorkerHeartbeats(self, request, context):
        self._allow(context, "sendSupervisorWorkerHeartbeats")
        self.nimbus.record_heartbeats(request.supervisor_id, list(request.worker_heartbeats),
                                      list(request.errors), list(request.restarts),
                                      list(request.topology_stats))
        return topology_pb2.Empty()


def _profile_request(name: str, r: dict) -> pb.ProfileRequest:
    return pb.ProfileRequest(name=name, worker=r["worker"], action=r["action"],
                             secs=int(r.get("secs", 0)), id=r["id"],
                             time_secs=float(r["time"]), expires_secs=expires_at(r),
                             topology_id=r.get("topology_id", ""))


class _IdleLimit:
    """Cancels a client stream that sends less than ``min_bytes`` in ``secs`` (a silent or
    trickling stream would hold a server thread as long as it likes)."""

    def __init__(self, context: grpc.ServicerContext, secs: float, min_bytes: int = 1):
        self.context, self.secs, self.fired = context, secs, False
        self.min_bytes = min_bytes
        self._timer: threading.Timer | None = None

    def _fire(self) -> None:
        self.fired = True
        self.context.cancel()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = threading.Timer(self.secs, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, iterator):
        self._arm()
        got = 0
        try:
            for item in iterator:
                if isinstance(item, Undecodable):
                    raise InvalidRequest(item.message("UploadPackage", PROTO))
                got += len(getattr(item, "data", b"")) or 1
                if got >= self.min_bytes:  # enough in this window: a new one starts
                    got = 0
                    self._arm()
                yield item
        finally:
            if self._timer is not None:
                self._timer.cancel()


def serve(nimbus: Nimbus, host: str, port: int, max_workers: int = 16,
          insecure: bool = False) -> grpc.Server:
    """Start a gRPC server for ``nimbus`` on ``host:port``; stop it with ``server.stop(grace)``.

    With ``squall.tls.*`` in Nimbus's conf the port is mutual TLS. Without, it listens only
    on a loopback address unless ``insecure`` (``squall nimbus --insecure``): anyone who
    reaches a plain port may do anything. A port in use is an error (no SO_REUSEPORT: a
    second Nimbus on one port must not start silently).
    """
    secure = tls.refuse_plaintext(nimbus.conf, host, port, "Nimbus", cfg.NIMBUS_BIND_HOST,
                                  insecure)
    if secure:
        tls.check_serving(nimbus.conf, host, port, "Nimbus")
    address = f"{host}:{port}"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers,
                                                    thread_name_prefix="nimbus-grpc"),
                         options=tls.server_options(),
                         maximum_concurrent_rpcs=MAX_CONCURRENT_RPCS)
    servicer = NimbusServicer(nimbus, secure, max_workers)
    add_tolerant(pb_grpc.add_NimbusServicer_to_server, servicer, server)
    try:
        bound = (server.add_secure_port(address, tls.server_credentials(nimbus.conf)) if secure
                 else server.add_insecure_port(address))
    except RuntimeError:  # grpc >= 1.6x raises where older ones returned 0
        bound = 0
    if bound == 0:
        raise OSError(f"Nimbus cannot listen on {address}: the port is in use (another "
                      "Nimbus?) or the address is not one of this host's")
    server.start()
    if secure:
        log.info("Nimbus gRPC listening on %s (mutual TLS, authorizer %s)", address,
                 "simple" if servicer.authz.enabled else "none")
    else:
        log.warning("Nimbus gRPC listening on %s WITHOUT authentication%s", address,
                    "" if tls.loopback(host) else " (--insecure): anyone who reaches it may "
                    "submit, kill and read every topology")
    return server
