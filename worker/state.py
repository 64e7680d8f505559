"""WorkerState: what every executor thread of one worker process shares.

Built once from the worker's assignment before any executor starts, then
read-only except for the delivery map (filled while executors are created),
the activity flag, the backpressure state and the peers (:meth:`WorkerState.update_peers`
when Nimbus moves other workers' tasks).
"""

from __future__ import annotations

import collections
import logging
import time
import traceback
from typing import Any, Callable

import zmq

from ..client import config as cfg
from ..client.contract import WorkerAssignment, cut_error
from ..client.grouping import LoadMapping
from ..client.stateful import CHECKPOINT_COMPONENT_ID, deduplicating
from ..client.topology import Topology, assign_task_ids
from ..client.tuple import (ACKER_COMPONENT_ID, SYSTEM_COMPONENT_ID, SYSTEM_TASK_ID,
                            SYSTEM_TICK_STREAM_ID, Fields)
from .queue import Backpressure, Version
from .stats import TaskStats
from ..client.curve import keys_of
from ..client.values import ValueTypes
from .curve import Membership

log = logging.getLogger("squall.worker")


def endpoint_for(worker_id: str, my_host: str, ipc_dir: str | None, topology_id: str) -> str:
    """``ipc://`` to a worker on this host, ``tcp://`` to one on another host."""
    host, _, port = worker_id.rpartition(":")
    if ipc_dir and host == my_host:
        return f"ipc://{ipc_dir}/{topology_id}-{port}.sock"
    return f"tcp://{host}:{port}"


class WorkerState:
    """Shared, mostly read-only state of one worker process."""

    def __init__(self, topology: Topology, assignment: WorkerAssignment):
        self.topology = topology
        self.assignment = assignment
        self.topology_id = assignment.topology_id
        self.worker_id = assignment.worker_id
        self.conf = assignment.conf
        self.component_tasks = assign_task_ids(topology)
        self.task_component: dict[int, str] = {
            t: c for c, ts in self.component_tasks.items() for t in ts}
        self.task_worker: dict[int, str] = {
            t: w for w, ts in assignment.workers.items() for t in ts}
        self.local_tasks = frozenset(assignment.tasks)
        #: Every worker ever assigned -> its address (departed ones stay: a thread may still
        #: hold their id; nothing is sent to them once the threads see ``live_workers``).
        self.endpoints = {w: endpoint_for(w, assignment.host, assignment.ipc_dir, self.topology_id)
                          for w in assignment.workers}
        #: The topology's current workers; replaced whole (readers on other threads see the
        #: old or the new set), with ``peers_version`` bumped (its ``n``: a C field the
        #: transfers read per remote tuple, for their caches of each task's outbox).
        self.live_workers = frozenset(assignment.workers)
        self.peers_version = Version()
        self.acker_tasks = self.component_tasks.get(ACKER_COMPONENT_ID, [])
        self.acking = bool(self.acker_tasks)
        #: Derived edge ids (worker/lineage.py): exactly-once acker checkpointing.
        self.lineage = self.acking and CHECKPOINT_COMPONENT_ID in topology.components and \
            deduplicating(self.conf)
        #: (component, stream) -> Fields, shared by every tuple of that stream.
        self.fields: dict[tuple[str, str], Fields] = {
            (c.id, s): Fields(sd.fields)
            for c in topology.components.values() for s, sd in c.streams.items()}
        self.fields[(SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID)] = Fields(["freq_secs"])
        self.task_component[SYSTEM_TASK_ID] = SYSTEM_COMPONENT_ID
        #: task id -> callable taking a Tuple, for tasks of this worker.
        self.deliver: dict[int, Callable[[Any], None]] = {}
        #: task -> its executor's queue, for the tasks whose deliver is that queue's put.
        self.queues: dict[int, Any] = {}
        self.stats: dict[int, TaskStats] = {}
        self.bp = Backpressure(bool(self.conf.get(cfg.TOPOLOGY_BACKPRESSURE_ENABLE, True)))
        #: Task loads for load-aware shuffles (None: disabled); the worker's main thread sets
        #: them from its queues and its peers' LOAD frames (``peer_loads``, by worker).
        self.load: LoadMapping | None = None if cfg.get(
            self.conf, cfg.TOPOLOGY_DISABLE_LOADAWARE_MESSAGING) else LoadMapping()
        self.peer_loads: dict[str, dict[int, float]] = {}
        #: Spouts call next_tuple only while this is set (topology ACTIVE) ...
        self.active = True
        #: ... and once every peer worker has answered the start-up handshake.
        self.connected = len(assignment.workers) <= 1
        self.peers_heard: set[str] = set()
        #: Peers that greeted us and wait for a reply (sent by the main thread).
        self.hello_replies_due: set[str] = set()
        self.on_hello: Callable[[], None] | None = None
        self.zctx = zmq.Context.instance()
        self.dropped_frames = 0
        #: CurveZMQ with the topology's key pair (None: plain traffic, no keys in the conf).
        keys = keys_of(self.conf)
        self.membership = Membership(self.zctx, keys, self._refused,
                                     f"worker {self.worker_id}") if keys else None
        #: Worker traffic is encrypted and admits only this topology's workers.
        self.channel_authenticated = self.membership is not None
        #: The tuple value types beyond msgpack's (imports the user's serializers).
        self.values = ValueTypes.from_conf(self.conf, self.channel_authenticated)
        self.max_frame_bytes = int(cfg.get(self.conf, cfg.TOPOLOGY_MAX_FRAME_BYTES))
        self.errors: collections.deque = collections.deque(maxlen=20)
        self.fatal: tuple[str, BaseException, str] | None = None
        #: Called (from the dying thread) when user code crashed.
        self.on_fatal: Callable[[], None] | None = None
        self.dropped_tuples = 0
        self.dropped_batches = 0
        self.start_time = time.time()
        #: The package's resources/ folder and the shell children's pid-file folder
        #: (the Worker sets them; "" in tests that build a WorkerState alone).
        self.code_dir = ""
        self.pid_dir = ""

    def _refused(self) -> None:
        """A connection failed the CurveZMQ handshake: whatever it sent is dropped, counted
        with the dropped frames (monitor thread)."""
        self.dropped_frames += 1

    def heard_from(self, worker_id: str, is_reply: bool) -> None:
        """A peer's HELLO arrived (receiver thread)."""
        self.peers_heard.add(worker_id)
        if not is_reply:
            self.hello_replies_due.add(worker_id)
        if not self.connected and self.peers_heard >= self.live_workers - {self.worker_id}:
            self.connected = True
            log.info("worker %s: all %d peer workers answered; spouts may start",
                     self.worker_id, len(self.live_workers) - 1)
        if self.on_hello is not None:
            self.on_hello()

    def update_peers(self, workers: dict[str, list[int]]) -> list[str]:
        """Follow a new assignment in which this worker keeps its tasks (Storm's worker
        refreshing its connections on a rebalance or reassignment): route each task to its
        new worker and forget departed ones; returns their ids. Main thread only; executor
        threads notice ``peers_version`` and drop what they hold for departed workers, whose
        tuple trees then time out and replay."""
        a = self.assignment
        for w in workers:  # addresses first: a thread routing to a new worker needs one
            if w not in self.endpoints:
                self.endpoints[w] = endpoint_for(w, a.host, a.ipc_dir, self.topology_id)
        for w, ts in workers.items():
            for t in ts:
                self.task_worker[t] = w  # one key at a time: readers never miss a task
        gone = sorted(self.live_workers - set(workers))
        self.live_workers = frozenset(workers)
        a.workers = {w: list(ts) for w, ts in workers.items()}
        for w in gone:
            self.bp.remote(w, False)  # its congestion no longer holds our spouts back
            self.peer_loads.pop(w, None)
            self.peers_heard.discard(w)
        self.peers_version.n += 1
        return gone

    def component_conf(self, component: str) -> dict[str, Any]:
        comp = self.topology.components[component]
        return cfg.component_conf(self.conf, comp.conf, self.assignment.cli_overrides)

    def report_error(self, component: str, task: int, error: BaseException | str) -> None:
        text = error if isinstance(error, str) else \
            "".join(traceback.format_exception_only(type(error), error)).strip()
        # Cut before it leaves the process (the supervisor reads the file, Nimbus stores it);
        # the log line below keeps the whole text.
        self.errors.append({"time": time.time(), "component": component, "task": task,
                            "error": cut_error(text)})
        log.error("topology=%s component=%s task=%d error: %s",
                  self.topology_id, component, task, text)

    def die(self, component: str, task: int, exc: BaseException) -> None:
        """User code raised: record it and tell the main thread to exit the worker (as Storm does)."""
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self.report_error(component, task, exc)
        if self.fatal is None:
            self.fatal = (component, exc, tb)
        if self.on_fatal is not None:
            self.on_fatal()
