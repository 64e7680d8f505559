"""A thin client of Nimbus's gRPC service, for the CLI and the submitter.

Storm's ``NimbusClient`` plus the upload half of ``StormSubmitter``: it connects to
``nimbus.seeds[0]``:``nimbus.grpc.port`` (moving to the leader when a Nimbus refuses and
names it, and to the next seed when one is unreachable), bounds every call with a deadline,
uploads a package in 1 MiB chunks, and turns gRPC errors into :mod:`squall.client.errors`
types carrying the server's message (for UNAVAILABLE from the channel itself, the address
tried: "cannot reach Nimbus at 127.0.0.1:6627: ...").
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any, Callable, Mapping

import grpc

from ..proto import nimbus_pb2 as pb
from ..proto import nimbus_pb2_grpc as pb_grpc
from ..proto import topology_pb2
from . import config as cfg
from . import tls
from .errors import BY_CODE, LEADER_METADATA, NimbusError, NimbusUnavailable

log = logging.getLogger("squall.client")


def _unreachable(e: grpc.RpcError) -> bool:
    """UNAVAILABLE from the channel (connection refused, DNS), not a Nimbus's own refusal:
    the server's UNAVAILABLE messages name what to do (Nimbus, ZooKeeper, the leader)."""
    code = e.code() if hasattr(e, "code") else None
    details = (e.details() if hasattr(e, "details") else None) or ""
    return code is grpc.StatusCode.UNAVAILABLE and not any(
        w in details for w in ("Nimbus", "ZooKeeper", "leader"))


def _not_connected(e: grpc.RpcError) -> bool:
    """The call failed before it left: no connection could be made (refused, a handshake that
    did not finish). Only such a call is safe to make again."""
    details = (e.details() if hasattr(e, "details") else None) or ""
    return _unreachable(e) and "failed to connect" in details


#: Bytes per uploaded chunk (gRPC's default message limit is 4 MiB).
CHUNK_SIZE = 1024 * 1024
#: gRPC backs off reconnecting up to 120 s by default: after a partition heals, a supervisor
#: would stay unheard that long. A control plane retries every second or two.
CHANNEL_OPTIONS = (("grpc.initial_reconnect_backoff_ms", 200),
                   ("grpc.min_reconnect_backoff_ms", 200),
                   ("grpc.max_reconnect_backoff_ms", 2000))


class NimbusClient:
    """Calls one Nimbus. Example::

        with NimbusClient(conf) as nimbus:
            location = nimbus.upload("wc.zip", progress=lambda sent, total: ...)
            topology_id = nimbus.submit("wc", location, conf, topology)
            nimbus.kill("wc", wait_secs=5)
    """

    def __init__(self, conf: Mapping[str, Any], timeout: float = 30.0,
                 address: str | None = None):
        port = conf.get(cfg.NIMBUS_GRPC_PORT) or 6627
        #: Addresses to try, in order: ``nimbus.seeds`` (or just ``address``).
        self.seeds = [address] if address is not None else \
            [f"{h}:{port}" for h in (conf.get(cfg.NIMBUS_SEEDS) or ["127.0.0.1"])]
        #: Seconds each call may take.
        self.timeout = timeout
        #: Retries of a call whose connection could not be made (storm.nimbus.retry.*).
        self.retry_times = int(cfg.get(conf, cfg.STORM_NIMBUS_RETRY_TIMES))
        self.retry_secs = float(cfg.get(conf, cfg.STORM_NIMBUS_RETRY_INTERVAL_MILLIS)) / 1000
        self.retry_ceiling_secs = \
            float(cfg.get(conf, cfg.STORM_NIMBUS_RETRY_INTERVALCEILING_MILLIS)) / 1000
        #: Mutual TLS with the certificate of ``squall.tls.*`` (None: plain, insecure).
        self._credentials = tls.channel_credentials(conf) if tls.enabled(conf) else None
        self._connect(self.seeds[0])

    def _connect(self, address: str) -> None:
        #: ``host:port`` of the Nimbus called.
        self.address = address
        self._channel = (grpc.secure_channel(address, self._credentials, CHANNEL_OPTIONS)
                         if self._credentials is not None
                         else grpc.insecure_channel(address, CHANNEL_OPTIONS))
        self._stub = pb_grpc.NimbusStub(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "NimbusClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _call(self, method: str, request, stream: bool = False, **kw):
        """Call ``method`` on the Nimbus that can answer: a refusal naming the leader moves this
        client to the leader, an unreachable Nimbus to the next seed (Storm's NimbusClient
        discovery); each address is tried once per round, and a round whose every connection
        failed is tried again ``storm.nimbus.retry.times`` (the call never left: no call is
        made twice)."""
        tried: list[str] = []
        retries, wait = 0, self.retry_secs
        while True:
            try:
                result = getattr(self._stub, method)(request, timeout=self.timeout, **kw)
                return list(result) if stream else result
            except grpc.RpcError as e:
                err = self._translate(e)
                tried.append(self.address)
                nxt = self._redirect(e, err, tried)
                if nxt is None:
                    if retries >= self.retry_times or not _not_connected(e):
                        raise err from None
                    retries += 1
                    log.info("Nimbus call %s: %s; again in %.1f s (retry %d of %d)", method,
                             err, wait, retries, self.retry_times)
                    time.sleep(wait)
                    wait = min(wait * 2, self.retry_ceiling_secs)
                    tried, nxt = [], self.seeds[0]
                self.close()
                self._connect(nxt)

    def _redirect(self, e: grpc.RpcError, err: NimbusError, tried: list[str]) -> str | None:
        """Where to retry after ``err``, or None."""
        meta = dict(e.trailing_metadata() or ()) if hasattr(e, "trailing_metadata") else {}
        leader = meta.get(LEADER_METADATA)
        if leader:
            return leader if leader not in tried else None
        if _unreachable(e):
            return next((a for a in self.seeds if a not in tried), None)
        return None

    def _translate(self, e: grpc.RpcError) -> NimbusError:
        code = e.code() if hasattr(e, "code") else grpc.StatusCode.UNKNOWN
        details = (e.details() if hasattr(e, "details") else None) or str(code)
        if code is grpc.StatusCode.DEADLINE_EXCEEDED:
            return NimbusUnavailable(f"Nimbus at {self.address} did not answer within "
                                     f"{self.timeout:g} s", self.address)
        cls = BY_CODE.get(code.name, NimbusError)
        if cls is NimbusUnavailable:
            if not _unreachable(e):  # the server's own (not the leader, ZooKeeper away)
                return NimbusUnavailable(details, self.address)
            hint = ("is it running, and do its certificate and ours come from the same CA "
                    "(squall.tls.*)?" if self._credentials is not None else
                    "is it running? If it uses TLS, set squall.tls.* here too")
            return NimbusUnavailable(f"cannot reach Nimbus at {self.address}: {details}; "
                                     f"{hint} (check nimbus.seeds / nimbus.grpc.port)",
                                     self.address)
        return cls(details)

    # --- upload ---
    def upload(self, path_or_bytes: str | os.PathLike | bytes,
               progress: Callable[[int, int], Any] | None = None) -> str:
        """Upload a package file (or bytes) in chunks; returns the location for :meth:`submit`.

        ``progress(sent, total)`` is called after each chunk.
        """
        if isinstance(path_or_bytes, (bytes, bytearray)):
            data, name = bytes(path_or_bytes), "package"
        else:
            with open(path_or_bytes, "rb") as f:
                data = f.read()
            name = os.path.basename(os.fspath(path_or_bytes))
        location = self._call("BeginFileUpload",
                              pb.BeginUploadRequest(file_name=name, total_size=len(data))).location
        try:
            for offset in range(0, len(data), CHUNK_SIZE):
                piece = data[offset:offset + CHUNK_SIZE]
                self._call("UploadChunk", pb.Chunk(location=location, data=piece, offset=offset))
                if progress is not None:
                    progress(offset + len(piece), len(data))
            self._call("FinishFileUpload", pb.UploadLocation(location=location))
        except BaseException:
            try:  # a broken upload must not keep the user's room in the inbox for an hour
                self.abandon_upload(location)
            except Exception:  # noqa: BLE001 - the first error is the one to report
                pass
            raise
        return location

    def abandon_upload(self, location: str) -> None:
        """Delete an upload that will not be submitted (frees its room in Nimbus's inbox)."""
        self._call("AbandonFileUpload", pb.UploadLocation(location=location))

    def download(self, topology_id: str) -> bytes:
        """A topology's package (what supervisors fetch)."""
        chunks = self._call("DownloadPackage", pb.IdRequest(id=topology_id), stream=True)
        return b"".join(c.data for c in chunks)

    # --- submit and lifecycle ---
    def submit(self, name: str, location: str, conf_json: str,
               topology: topology_pb2.StormTopology, initial_status: str = "ACTIVE",
               owner: str = "", warn: Callable[[str], Any] | None = None) -> str:
        """Submit a topology; returns its id. ``conf_json`` is the topology conf as a JSON
        object. ``warn`` gets each warning Nimbus answers with (default: logged)."""
        options = pb.SubmitOptions(
            initial_status=pb.SubmitOptions.InitialStatus.Value(initial_status.upper()),
            owner=owner)
        reply = self._call("SubmitTopology", pb.SubmitRequest(
            name=name, uploaded_location=location, json_conf=conf_json, topology=topology,
            options=options))
        for w in reply.warnings:
            (warn or log.warning)(w)
        return reply.topology_id

    def kill(self, name: str, wait_secs: int | None = None) -> None:
        req = pb.KillRequest(name=name)
        if wait_secs is not None:
            req.wait_secs = int(wait_secs)
        self._call("KillTopology", req)

    def activate(self, name: str) -> None:
        self._call("Activate", pb.NameRequest(name=name))

    def deactivate(self, name: str) -> None:
        self._call("Deactivate", pb.NameRequest(name=name))

    def rebalance(self, name: str, wait_secs: int | None = None, num_workers: int | None = None,
                  executors: Mapping[str, int] | None = None) -> None:
        req = pb.RebalanceRequest(name=name, executors=dict(executors or {}))
        if wait_secs is not None:
            req.wait_secs = int(wait_secs)
        if num_workers is not None:
            req.num_workers = int(num_workers)
        self._call("Rebalance", req)

    # --- views ---
    def list(self) -> pb.ClusterSummary:
        """Supervisors, topologies and Nimbuses (``squall list``)."""
        return self._call("GetClusterInfo", topology_pb2.Empty())

    def topology_info(self, name: str | None = None, topology_id: str | None = None,
                      window_secs: int = 0) -> pb.TopologyInfo:
        """Executors, components and errors; counters over the last ``window_secs`` (Storm's
        600, 10800, 86400), 0 = since each worker started."""
        ref = pb.TopologyRef(id=topology_id) if topology_id is not None else pb.TopologyRef(name=name)
        ref.window_secs = window_secs
        return self._call("GetTopologyInfo", ref)

    def topology_conf(self, topology_id: str, include_secrets: bool = False) -> str:
        """The topology's conf as JSON; secret values redacted unless ``include_secrets``
        (which Nimbus grants supervisors and Nimbuses only)."""
        return self._call("GetTopologyConf", pb.IdRequest(
            id=topology_id, include_secrets=include_secrets)).json_conf

    def user_topology(self, topology_id: str) -> topology_pb2.StormTopology:
        """The user topology as submitted (what supervisors write as ``topology.pb``)."""
        return self._call("GetUserTopology", pb.IdRequest(id=topology_id))

    def set_log_config(self, name: str, levels: Mapping[str, tuple[str, int]],
                       remove: list[str] = ()) -> pb.LogConfig:
        """Set loggers' levels (logger -> (level, timeout_secs; 0 never)) in a running
        topology, and drop ``remove``; answers the topology's levels afterwards."""
        return self._call("SetLogConfig", pb.SetLogConfigRequest(
            name=name, levels={k: pb.LogLevel(level=lv, timeout_secs=int(secs))
                               for k, (lv, secs) in levels.items()}, remove=list(remove)))

    def set_worker_profiler(self, name: str, worker: str, action: str,
                            secs: int = 0) -> pb.ProfileRequest:
        """Ask worker ``host:port`` of topology ``name`` for ``threads``, ``memory``,
        ``cpu`` (for ``secs``) or ``stop`` (Storm's setWorkerProfiler); answers the stored
        request (its id, when it expires)."""
        return self._call("SetWorkerProfiler", pb.ProfileRequest(
            name=name, worker=worker, action=action, secs=int(secs)))

    def pending_profile_actions(self, name: str | None = None,
                                topology_id: str | None = None) -> pb.ProfileRequests:
        """The topology's unexpired profiler requests and its CPU profiles still sampling."""
        ref = pb.TopologyRef(id=topology_id) if topology_id is not None \
            else pb.TopologyRef(name=name)
        return self._call("GetComponentPendingProfileActions", ref)

    def debug(self, name: str, component: str = "", enable: bool = True,
              sampling_pct: float = 100.0) -> pb.ComponentDebug:
        """Turn debug sampling of topology ``name`` (or one ``component``) on or off
        (Storm's debug); answers the topology's debug options."""
        return self._call("Debug", pb.DebugRequest(name=name, component=component,
                                                   enable=enable, sampling_pct=sampling_pct))

    def leader(self) -> pb.NimbusSummary:
        return self._call("GetLeader", topology_pb2.Empty())

    def prefer_leader(self) -> None:
        """Move to the leader: followers answer reads too, but only the leader receives the
        workers' heartbeats, so only its counters move (the UI reads there)."""
        lead = self.leader()
        address = f"{lead.host}:{lead.port}"
        if address != self.address and lead.host:
            self.close()
            self._connect(address)

    def send_heartbeats(self, message: pb.SupervisorWorkerHeartbeats) -> None:
        """A supervisor's report of its workers' heartbeats (Storm's sendSupervisorWorkerHeartbeats)."""
        self._call("SendSupervisorWorkerHeartbeats", message)
