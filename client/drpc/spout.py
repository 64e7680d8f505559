"""A topology's two ends of DRPC: :class:`DRPCSpout` (Storm's ``DRPCSpout``) takes requests
from the DRPC servers, :class:`ReturnResults` (Storm's ``ReturnResults``) hands results back.

The spout emits ``[args, return_info]``: ``return_info`` is Storm's JSON
``{"id", "host", "port"}`` naming the request and the server it came from, which is where
ReturnResults sends the result. Both talk gRPC (:mod:`.client`), with the worker's
``squall.tls.*`` when the conf sets it.

Why threads: an executor shares the worker's event loop, so the spout never calls the
network from ``next_tuple``. One thread per server long-polls ``fetchRequest`` (the server
answers as soon as a request arrives, or after half a second with nothing) and hands
requests over a small queue that ``next_tuple`` drains; ``failRequest`` calls go to one
more thread. ReturnResults blocks on its calls, so it asks for an executor thread of its
own (``topology.executor.threaded``).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Mapping, Sequence

from .. import config as cfg
from ..components import Bolt, Spout
from ..errors import ConfigError, PermissionDenied, SquallError
from ..tuple import Tuple
from .client import UNAVAILABLE, DRPCExecutionException, DRPCInvocationsClient

log = logging.getLogger("squall.drpc")

#: How long one fetchRequest waits at the server for a request (it caps this at 1 s).
FETCH_WAIT_SECS = 0.5
#: Longest pause between attempts to reach a server that does not answer.
MAX_BACKOFF_SECS = 5.0
#: Attempts to return a result (or fail a request) before giving up, as Storm's 3.
MAX_RETRIES = 3


class DRPCSpout(Spout):
    """Emits the requests for ``function`` as ``[args, return_info]`` tuples.

    Servers: ``servers`` (hosts) or the conf's ``drpc.servers``, on ``port`` or the conf's
    ``drpc.invocations.port``. As in Storm, a task polls every server when the spout has
    fewer tasks than there are servers, else server ``task index % servers``. A failed
    tuple tree fails the request at its server (its client's execute raises at once instead
    of waiting for the timeout). Example::

        builder.set_spout("drpc", DRPCSpout("reach"))
    """

    def __init__(self, function: str, servers: Sequence[str] | None = None,
                 port: int | None = None):
        if not isinstance(function, str) or not function:
            raise ValueError("DRPCSpout needs the function name it serves")
        self.function = function
        self.servers = list(servers) if servers else None
        self.port = port

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["args", "return-info"])

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        servers = self.servers or cfg.get(conf, cfg.DRPC_SERVERS)
        if not servers:
            raise ConfigError(cfg.DRPC_SERVERS, f"DRPCSpout({self.function!r}) has no DRPC "
                              "server to fetch requests from: set drpc.servers in the topology "
                              "conf (or pass servers=)")
        port = int(self.port or cfg.get(conf, cfg.DRPC_INVOCATIONS_PORT))
        n = len(context.component_tasks(context.this_component_id))
        mine = list(servers) if n < len(servers) else \
            [servers[context.this_task_index % len(servers)]]
        self._clients = [DRPCInvocationsClient(conf, h, port) for h in mine]
        #: (client index, request id, args) fetched and not yet emitted.
        self._fetched: queue.Queue = queue.Queue(maxsize=max(2, len(mine)))
        self._stop = threading.Event()
        self._active = threading.Event()
        self._active.set()
        #: An error a fetcher thread met, reported from the executor's thread.
        self._error: BaseException | None = None
        self._failer = ThreadPoolExecutor(max_workers=1,
                                          thread_name_prefix=f"drpc-fail-{self.function}")
        self._threads = [threading.Thread(target=self._fetch_loop, args=(i,), daemon=True,
                                          name=f"drpc-fetch-{self.function}-{c.address}")
                         for i, c in enumerate(self._clients)]
        for t in self._threads:
            t.start()

    def _fetch_loop(self, index: int) -> None:
        client = self._clients[index]
        backoff = 0.2
        while not self._stop.is_set():
            if not self._active.wait(0.5):
                continue
            try:
                request = client.fetch_request(self.function, FETCH_WAIT_SECS)
            except (DRPCExecutionException, PermissionDenied) as e:
                if self._stop.is_set():  # close() closed the channel under the call
                    return
                if not isinstance(e, DRPCExecutionException) or e.type != UNAVAILABLE:
                    self._error = e
                log.warning("DRPCSpout(%s): fetchRequest from %s failed: %s; retrying in "
                            "%.1f s", self.function, client.address, e, backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MAX_BACKOFF_SECS)
                continue
            backoff = 0.2
            if request is None:
                continue
            while not self._stop.is_set():
                try:
                    self._fetched.put((index, *request), timeout=0.5)
                    break
                except queue.Full:
                    pass
            else:  # closing with a request in hand: let its client know now
                self._fail_now(index, request[0], "the topology's DRPCSpout closed")

    def next_tuple(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            self.collector.report_error(error)
        for _ in range(self._fetched.qsize()):
            try:
                index, rid, args = self._fetched.get_nowait()
            except queue.Empty:
                return
            client = self._clients[index]
            info = json.dumps({"id": rid, "host": client.host, "port": client.port})
            self.collector.emit([args, info], msg_id=(rid, index))

    def ack(self, msg_id: Any) -> None:
        """The result went back through ReturnResults: nothing left to do."""

    def fail(self, msg_id: Any) -> None:
        rid, index = msg_id
        self._failer.submit(self._fail_now, index, rid,
                            "its tuple tree failed or timed out in the topology")

    def _fail_now(self, index: int, request_id: str, why: str) -> None:
        client = self._clients[index]
        for attempt in range(1, MAX_RETRIES + 1):
            try:
                client.fail_request(request_id, why)
                return
            except SquallError as e:
                if attempt == MAX_RETRIES or isinstance(e, PermissionDenied):
                    log.error("DRPCSpout(%s): cannot fail request %s at %s: %s",
                              self.function, request_id, client.address, e)
                    return

    def activate(self) -> None:
        self._active.set()

    def deactivate(self) -> None:
        self._active.clear()

    def close(self) -> None:
        self._stop.set()
        for t in self._threads:  # a fetch ends within its wait; one stuck on an unreachable
            t.join(timeout=FETCH_WAIT_SECS + 2)  # server is cancelled by closing its channel
        while True:  # fetched, never emitted: their clients need not wait for the timeout
            try:
                index, rid, _ = self._fetched.get_nowait()
            except queue.Empty:
                break
            self._failer.submit(self._fail_now, index, rid, "the topology's DRPCSpout closed")
        self._failer.shutdown(wait=True)
        for c in self._clients:
            c.close()


class ReturnResults(Bolt):
    """Sends each ``[result, return_info]`` tuple's result to the DRPC server that asked
    (Storm's ``ReturnResults``); the input is acked once the server has it, failed (so the
    spout fails the request) when it cannot be delivered."""

    def get_component_configuration(self) -> Mapping[str, Any] | None:
        return {cfg.TOPOLOGY_EXECUTOR_THREADED: True}  # its calls block: a thread of its own

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self._conf = conf
        self._clients: dict[tuple[str, int], DRPCInvocationsClient] = {}

    def execute(self, tup: Tuple) -> None:
        result, info = tup.values[0], tup.values[1]
        if info is None or self.deliver(str(result), info):
            self.collector.ack(tup)
        else:
            self.collector.fail(tup)

    def deliver(self, result: str, info: str) -> bool:
        """Send ``result`` to the server the return ``info`` names (retried); False when it
        cannot be delivered (logged)."""
        try:
            ret = json.loads(info)
            server, rid = (str(ret["host"]), int(ret["port"])), str(ret["id"])
        except (ValueError, TypeError, KeyError) as e:
            log.error("ReturnResults: bad return info %r: %s", info, e)
            return False
        client = self._clients.get(server)
        if client is None:
            client = self._clients[server] = DRPCInvocationsClient(self._conf, *server)
        for attempt in range(1, MAX_RETRIES + 1):
            try:
                client.result(rid, result)
                return True
            except PermissionDenied as e:
                log.error("ReturnResults: not allowed to return results to %s: %s",
                          client.address, e)
                if self.collector is not None:
                    self.collector.report_error(e)
                return False
            except DRPCExecutionException as e:
                if attempt == MAX_RETRIES:
                    log.error("ReturnResults: cannot return request %s's result to %s: %s",
                              rid, client.address, e)
        return False

    def cleanup(self) -> None:
        for c in self._clients.values():
            c.close()
        self._clients.clear()
