"""The Nimbus daemon: submission, the topology lifecycle and assignments, kept in ZooKeeper.

Mirrors Storm's ``org.apache.storm.daemon.nimbus.Nimbus``: it validates a submitted
topology again, stores its package under ``storm.local.dir``/nimbus/stormdist
(:mod:`.package_store`), schedules it over the free slots of the registered supervisors
(:func:`.scheduler.schedule`), and drives the lifecycle state machine
(:func:`.lifecycle.transition`) by executing the instructions it returns. One
:class:`Nimbus` owns one loop thread: it runs the leader election and, while leader,
fires due :class:`~.lifecycle.ScheduleCheck` timers and the monitor round every
``nimbus.monitor.freq.secs``. Requests (from the gRPC servicer's threads) and the loop
serialize on one lock. Only the leader accepts writes (:class:`NotALeader` otherwise).

What Nimbus reads and writes in ZooKeeper (through :class:`~squall.client.cluster_state.ClusterState`):

=========================  ====================================================================
``/supervisors/<sup-id>``  written by each supervisor (ephemeral), read here:
                           :class:`~squall.client.contract.SupervisorInfo`.
``/storms/<id>``           :meth:`TopologyState.to_json` (status values are lowercase:
                           "active", "inactive", "killed", "rebalancing").
``/assignments/<id>``      written here, read by supervisors:
                           :class:`~squall.client.contract.Assignment` (its ``revision``
                           counts this topology's writes).
``/nimbuses/<host:port>``  ephemeral: {"host", "port", "start_time_secs", "version"}.
=========================  ====================================================================

The topology's conf and user topology are in stormdist (``GetTopologyConf``,
``GetUserTopology``), not in ZooKeeper, as Storm keeps them in its blob store.

Worker liveness is :mod:`.liveness` (heartbeats in memory, never in ZooKeeper); what
Nimbus shows (cluster summary, topology info) is :mod:`.views`.
"""

from __future__ import annotations

import getpass
import heapq
import itertools
import json
import logging
import os
import secrets
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Mapping

from ..client import __version__
from ..client import config as cfg
from ..client import profiling
from ..client.cluster_state import NO_NODE, ClusterState, ClusterStateError, VersionConflict
from ..client.contract import (MAX_COMPONENT_CHARS, Assignment, SupervisorInfo, cut_error,
                               host_port)
from ..client.curve import topology_keys
from ..client.daemon import Daemon
from ..client.errors import (ConfigError, InvalidRequest, InvalidTopology, LimitExceeded,
                             NotALeader, SquallError, TopologyAlreadyExists, TopologyNotFound)
from ..client.extras import MissingExtra, check_extras
from ..client.log_levels import level_number
from ..client.shell import extend_path, missing_interpreters, serializer_name
from ..client.topology import (Topology, assign_task_ids, executors_of, system_topology,
                               topology_name_problem, validate, validate_with_conf)
from ..client.topology_proto import from_bytes, from_proto
from ..proto import topology_pb2
from . import lifecycle as lc
from . import views
from .authorizer import TopologyAcl
from .code_sync import CodeSync
from .index import TopologyIndex
from .liveness import Liveness
from .metrics import NimbusMetrics
from .package_store import PackageStore
from .scheduler import NotEnoughSlots, Slot, edges_of, schedule

log = logging.getLogger("squall.nimbus")

#: Called with a topology's ACL before a change to it; raises to refuse (the servicer's
#: authorization, run under Nimbus's lock on the very topology changed).
Guard = Callable[[TopologyAcl], None]

VERSION = __version__
#: A topology's log config (one ZooKeeper node every worker reads): loggers set at once, a
#: logger name's length, and a level's timeout (Storm's is an int of seconds).
MAX_LOGGERS = 256
MAX_LOGGER_NAME = 256
MAX_LOG_TIMEOUT_SECS = cfg.MAX_WAIT_SECS


class Nimbus(Daemon):
    """Storm's Nimbus: one per process, leader-elected among the Nimbuses of a cluster.

    Example::

        nimbus = Nimbus(conf)           # connects to ZooKeeper (storm.zookeeper.*)
        nimbus.start()                  # registers in /nimbuses, runs the election
        server = serve(nimbus, "0.0.0.0", nimbus.port)  # nimbus/servicer.py
        ...
        server.stop(grace=1); nimbus.close(reason="signal-15")

    Thread-safe: every public method may be called from any thread.
    """

    def __init__(self, conf: Mapping[str, Any], cluster_state: ClusterState | None = None,
                 package_store: PackageStore | None = None):
        super().__init__()
        self.conf = dict(conf)
        if cluster_state is None:
            from ..client.zk_cluster_state import KazooClusterState
            cluster_state = KazooClusterState(self.conf)
        #: The cluster state; closed by :meth:`close`.
        self.cluster_state = cluster_state
        #: Packages, topologies and confs on local disk.
        self.package_store = package_store or PackageStore(self.conf)
        self.host = self.conf.get(cfg.STORM_LOCAL_HOSTNAME) or "127.0.0.1"
        self.port = int(self.conf.get(cfg.NIMBUS_GRPC_PORT) or 6627)
        #: ``host:port`` this Nimbus registers as.
        self.address = f"{self.host}:{self.port}"
        self.monitor_secs = float(self.conf.get(cfg.NIMBUS_MONITOR_FREQ_SECS) or 10)
        self.start_time = time.time()
        #: topology id -> its newest error row (views.error_row), or None: none so far.
        self._last_errors: dict[str, dict[str, Any] | None] = {}
        #: Worker heartbeats and supervisor reports: which slots are alive.
        self.liveness = Liveness(self.conf, self.start_time)
        #: Names, owners and assignments of live topologies, kept while leading.
        self.index = TopologyIndex()
        self._lock = threading.RLock()
        self._wake = threading.Condition(self._lock)
        self._timers: list[tuple[float, str]] = []
        self._counter = itertools.count(1)
        self._leader = threading.Event()
        self._stopping = threading.Event()
        self._election = None
        self._thread: threading.Thread | None = None
        #: Prometheus (nimbus/metrics.py), served on nimbus.metrics.port when set.
        self.metrics = NimbusMetrics(lambda: self.is_leader, lambda: self.index.count())
        self._metrics_server: Any = None
        #: Followers copy every live topology's files from the leader.
        self.code_sync = CodeSync(self, lambda: not self.is_leader and
                                  not self.cluster_state.suspended, self._leader_address)

    # --- lifecycle of the daemon ---
    def start_unsafe(self) -> None:
        """Register in /nimbuses and start the loop (election, then timers and monitor)."""
        self.cluster_state.register_nimbus(self.address, {
            "host": self.host, "port": self.port, "start_time_secs": self.start_time,
            "version": VERSION})
        port = self.conf.get(cfg.NIMBUS_METRICS_PORT)
        if port is not None:
            from ..client.web import metrics_server
            self._metrics_server = metrics_server(self.metrics.registry, self.conf, port,
                                                  "nimbus metrics")
            log.info("Nimbus %s: Prometheus metrics on %s/metrics", self.address,
                     self._metrics_server.url)
        self._thread = threading.Thread(target=self._run, name="squall-nimbus", daemon=True)
        self._thread.start()
        self.code_sync.start()

    def wait_for_leadership(self, timeout: float) -> bool:
        """Block until this Nimbus leads (True) or ``timeout`` seconds pass (False)."""
        return self._leader.wait(timeout)

    @property
    def is_leader(self) -> bool:
        return self._leader.is_set() and not self.cluster_state.suspended

    def close_unsafe(self, reason: str) -> None:
        """Stop the loop, leave the election and close the cluster state."""
        with self._lock:
            self._stopping.set()
            self._wake.notify_all()
            election = self._election
        log.info("Nimbus %s closing: %s", self.address, reason)
        if election is not None:
            election.cancel()
        self.code_sync.stop()
        if self._metrics_server is not None:
            self._metrics_server.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.cluster_state.close()

    def _run(self) -> None:
        """The loop thread: contend for leadership until closed; lead while connected."""
        while not self._stopping.is_set():
            if self.cluster_state.suspended:
                self._stopping.wait(0.2)
                continue
            try:
                election = self.cluster_state.leader_election(self.address)
                with self._lock:  # close() cancels what it finds here; cancel-before-run holds
                    if self._stopping.is_set():
                        return
                    self._election = election
                election.run(self._lead)
            except Exception:  # noqa: BLE001 - the loop must survive ZK trouble and retry
                log.exception("Nimbus %s: leader election failed; retrying", self.address)
                self._stopping.wait(1.0)

    def _lead(self) -> None:
        """Run while leader: resume stored topologies, then timers and monitor rounds."""
        if self._stopping.is_set():
            return
        log.info("Nimbus %s is the leader", self.address)
        self.liveness.leading_since(time.time())
        self._last_errors.clear()  # kept while leading only: re-read from ZooKeeper
        try:
            with self._lock:
                self._timers.clear()
                self.index.rebuild(self.cluster_state)
                self._remove_orphan_files()
                self._leader.set()  # only now: requests rely on the index (names, limits)
                self._for_each_storm(lambda tid: lc.Startup(now=time.time(),
                                                            stimulus_id="leader-startup"))
            next_monitor = time.monotonic() + self.monitor_secs
            while not self._stopping.is_set() and not self.cluster_state.suspended:
                with self._lock:
                    self._fire_due_timers()
                    if time.monotonic() >= next_monitor:
                        self._monitor()
                        next_monitor = time.monotonic() + self.monitor_secs
                    wait = next_monitor - time.monotonic()
                    if self._timers:
                        wait = min(wait, self._timers[0][0] - time.time())
                    if not self._stopping.is_set():
                        self._wake.wait(max(0.01, min(wait, 1.0)))
        finally:
            self._leader.clear()
            with self._lock:
                self.index.clear()
            log.info("Nimbus %s stops leading", self.address)

    def _remove_orphan_files(self) -> None:
        """Delete stormdist entries no topology in ZooKeeper names (Storm's cleanup of code
        for gone topologies): a Nimbus that died between a removal's two steps (ZooKeeper, then
        the files) or a submission's (the files, then ZooKeeper) left them behind."""
        live = set(self.cluster_state.storm_ids())
        for tid in self.package_store.topology_ids():
            if tid not in live:
                log.info("Nimbus %s: removing files of topology %s (not in ZooKeeper)",
                         self.address, tid)
                self.package_store.remove(tid)

    # --- timers and monitor (loop thread, lock held) ---
    def _fire_due_timers(self) -> None:
        now = time.time()
        while self._timers and self._timers[0][0] <= now:
            _, tid = heapq.heappop(self._timers)
            self._feed_safely(tid, lc.Tick(now=now, stimulus_id="schedule-check"))

    def _monitor(self) -> None:
        """Storm's ``doRebalance``/``mkAssignments`` round: due transitions, unassigned topologies,
        and slots whose supervisor is gone; abandoned uploads expire."""
        now = time.time()
        t0 = time.perf_counter()
        try:
            self._monitor_round(now)
        finally:
            self.metrics.zookeeper("monitor_round", time.perf_counter() - t0)

    def _monitor_round(self, now: float) -> None:
        self.package_store.expire()
        self._for_each_storm(lambda tid: lc.Tick(now=now, stimulus_id="monitor"))
        try:
            supervisors = self._live_supervisors(now)
            tids = self.cluster_state.storm_ids()
        except ClusterStateError as e:
            log.warning("monitor round: %s", e)
            return
        for tid in tids:
            try:
                self._repair(tid, supervisors, now)
            except (SquallError, OSError) as e:  # one topology's trouble must not stop the rest
                log.warning("monitor round, topology %s: %s", tid, e)

    def _repair(self, tid: str, supervisors: Mapping[str, SupervisorInfo], now: float) -> None:
        """Assign ``tid`` if it has no workers, or move the executors of its dead slots."""
        state = self._state(tid)
        if state is None or state.status not in (lc.TopologyStatus.ACTIVE,
                                                 lc.TopologyStatus.INACTIVE):
            return
        record = self._stored_assignment(tid)[0]
        dead = self.liveness.dead_slots(record, supervisors, now) if record else set()
        if record is None or not record.workers or dead:
            if dead:
                log.warning("topology %s: dead worker slot(s) %s; moving their executors",
                            tid, sorted(f"{d.host}:{d.port}" for d in dead))
            self._assign(tid, state.num_workers, state.component_executors,
                         stimulus_id="monitor")

    def _for_each_storm(self, make_event) -> None:
        try:
            ids = self.cluster_state.storm_ids()
        except ClusterStateError as e:
            log.warning("cannot list topologies: %s", e)
            return
        for tid in ids:
            self._feed_safely(tid, make_event(tid))

    def _feed_safely(self, tid: str, event: lc.Event) -> None:
        try:
            self._feed(tid, event)
        except SquallError as e:
            log.warning("topology %s: %s failed: %s", tid, event.stimulus_id, e)

    # --- the lifecycle, executed ---
    def _state(self, tid: str) -> lc.TopologyState | None:
        data = self.cluster_state.get_storm(tid)
        return None if data is None else lc.TopologyState.from_json(data)

    def _feed(self, tid: str, event: lc.Event) -> None:
        """Apply one lifecycle event to topology ``tid`` and execute the instructions."""
        with self._lock:
            state = self._state(tid)
            if state is None:
                return
            try:
                _, instructions = lc.transition(state, event)
            except ValueError as e:
                raise InvalidRequest(str(e)) from None
            for inst in instructions:
                self._execute(tid, inst, event.stimulus_id)

    def _execute(self, tid: str, inst: lc.Instruction, stimulus_id: str) -> None:
        if isinstance(inst, lc.Persist):
            self.cluster_state.set_storm(tid, inst.state.to_json())
            self.index.put_state(inst.state)
            log.info("topology %s is %s (%s)", tid, inst.state.status.value, stimulus_id)
        elif isinstance(inst, lc.RemoveTopology):
            self.cluster_state.remove_storm(inst.topology_id)
            self.index.remove(inst.topology_id)
            self.package_store.remove(inst.topology_id)
            self.liveness.forget(inst.topology_id)
            self._last_errors.pop(inst.topology_id, None)
            self._timers = [t for t in self._timers if t[1] != inst.topology_id]
            heapq.heapify(self._timers)
            log.info("topology %s removed (%s)", inst.topology_id, stimulus_id)
        elif isinstance(inst, lc.Reassign):
            self._assign(inst.topology_id, inst.num_workers, inst.executors, stimulus_id)
        elif isinstance(inst, lc.ScheduleCheck):
            heapq.heappush(self._timers, (inst.at_secs, tid))
            self._wake.notify_all()
        else:
            raise TypeError(inst)

    # --- scheduling ---
    def _executors(self, tid: str, component_executors: Mapping[str, int] | None = None
                   ) -> tuple[Topology, list[tuple[str, list[int]]]]:
        """The running (system) topology of ``tid`` and its executors, with executor counts
        overridden by ``component_executors`` (task ids never change after submission)."""
        topology = from_bytes(self.package_store.read_topology(tid))
        return _executors(topology, self.package_store.read_conf(tid), component_executors)

    def _stored_assignment(self, tid: str) -> tuple[Assignment | None, int]:
        """The topology's assignment and its node version (None, NO_NODE when there is none)."""
        found = self.cluster_state.get_assignment(tid)
        if found is None:
            return None, NO_NODE
        return Assignment.from_json(found[0]), found[1]

    def _assign(self, tid: str, num_workers: int, component_executors: Mapping[str, int],
                stimulus_id: str, retry: bool = True) -> None:
        """Schedule ``tid`` over the free slots and write /assignments/<id> (Storm's mkAssignments)."""
        t0 = time.perf_counter()
        try:
            self._assign_now(tid, num_workers, component_executors, stimulus_id, retry)
        finally:
            secs = time.perf_counter() - t0
            self.metrics.rounds.inc()
            self.metrics.round_secs.observe(secs)
            self.metrics.zookeeper("assign", secs)

    def _assign_now(self, tid: str, num_workers: int, component_executors: Mapping[str, int],
                    stimulus_id: str, retry: bool) -> None:
        sys_topo, executors = self._executors(tid, component_executors)
        now = time.time()
        supervisors = self._live_supervisors(now)
        old, version = self._stored_assignment(tid)
        current = _current(old)
        slots = self._free_slots(supervisors, exclude=tid) | set(current.values())
        dead = self.liveness.dead_slots(old, supervisors, now) if old else set()
        assignment = schedule(executors, slots, current, dead, num_workers=num_workers,
                              edges=edges_of(sys_topo))
        record = _assignment_record(tid, executors, assignment, old, time.time())
        try:
            self.cluster_state.set_assignment(tid, record.to_json(), expected_version=version)
        except VersionConflict:
            # Only the leader writes assignments; a conflict means a previous leader did.
            if not retry:
                raise
            log.warning("topology %s: assignment changed under us; retrying once", tid)
            return self._assign(tid, num_workers, component_executors, stimulus_id, False)
        self.index.put_assignment(tid, record)
        log.info("topology %s assigned to %s (%s)", tid, sorted(record.workers), stimulus_id)

    def _free_slots(self, supervisors: Mapping[str, SupervisorInfo], exclude: str) -> set[Slot]:
        used: set[tuple[str, str]] = set()  # (supervisor id, "host:port")
        if self.index.ready:
            records = [a for t, a in self.index.assignments().items() if t != exclude]
        else:
            records = [self._stored_assignment(t)[0]
                       for t in self.cluster_state.assignment_ids() if t != exclude]
        for record in records:
            if record is not None:
                used.update((sid, hp) for hp, sid in record.slots.items())
        return {Slot(sid, info.host, port) for sid, info in supervisors.items()
                for port in info.slots if (sid, f"{info.host}:{port}") not in used}

    def _live_supervisors(self, now: float) -> dict[str, SupervisorInfo]:
        return self.liveness.live_supervisors(self.cluster_state.supervisors(), now)

    # --- requests (any thread) ---
    def require_leader(self) -> None:
        """Raise NotALeader (naming the leader when known) unless this Nimbus leads."""
        if not self.is_leader:
            leader = self._leader_address()
            where = f"the leader is {leader}" if leader else "no leader is known yet"
            raise NotALeader(f"Nimbus {self.address} is not the leader ({where}); retry there "
                             "or in a few seconds", leader)

    def _leader_address(self) -> str | None:
        try:
            election = self._election
            contenders = election.contenders() if election is not None else []
            return contenders[0] if contenders else None
        except Exception:  # noqa: BLE001 - only a hint for the message
            return None

    def submit(self, name: str, location: str, conf_json: str,
               topology_pb: topology_pb2.StormTopology, initial_status: str = "ACTIVE",
               owner: str = "", warn: Callable[[str], Any] | None = None) -> str:
        """Validate, store and schedule a topology; returns its id (Storm's submitTopologyWithOpts).

        Every check runs before anything is written to ZooKeeper or stormdist; a refused
        submit also drops its upload from the inbox. ``warn`` gets what the submitter should
        tell the user (conf keys Squall does not implement or know); they are logged at info.
        """
        try:
            return self._submit(name, location, conf_json, topology_pb, initial_status, owner,
                                warn)
        except BaseException:
            if location:  # committed uploads are gone from the inbox already
                self.package_store.discard(location, owner or None)  # never someone else's
            raise

    def _submit(self, name: str, location: str, conf_json: str,
                topology_pb: topology_pb2.StormTopology, initial_status: str,
                owner: str, warn: Callable[[str], Any] | None) -> str:
        owner = owner or getpass.getuser()
        problem = topology_name_problem(name)
        if problem:
            shown = str(name)[:60] + ("..." if len(str(name)) > 60 else "")
            raise InvalidRequest(f"invalid topology name {shown!r}: {problem}")
        try:
            conf = json.loads(conf_json) if conf_json else {}
        except ValueError as e:
            raise InvalidRequest(f"topology conf is not JSON: {e}") from None
        except RecursionError:
            raise InvalidRequest(f"topology conf is nested deeper than "
                                 f"{cfg.MAX_CONF_DEPTH} levels") from None
        if not isinstance(conf, dict):
            raise InvalidRequest(f"topology conf must be a JSON object, got {type(conf).__name__}")
        conf = cfg.normalize(conf)
        conf[cfg.TOPOLOGY_NAME] = name
        try:
            cfg.validate(conf)
        except ConfigError as e:
            raise InvalidRequest(f"topology {name}: {e}") from None
        try:
            topology = from_proto(topology_pb)
        except InvalidTopology:
            raise
        except Exception as e:  # noqa: BLE001 - a malformed message can fail in many ways
            raise InvalidTopology(f"topology {name} cannot be read: {type(e).__name__}: {e}") from None
        validate(topology)
        try:
            validate_with_conf(topology, conf)
        except InvalidTopology as e:
            raise InvalidTopology(f"topology {name}: {e}", component=e.component) from None
        self._check_size(name, conf, topology)
        for c in topology.components.values():
            try:
                check_extras(c.extras, f"component {c.id!r} of topology {name}",
                             where=f"the Nimbus host {self.host}")
            except MissingExtra as e:
                raise InvalidTopology(str(e), component=c.id) from None
        self._check_shell(name, conf, topology)
        warnings = cfg.conf_warnings(conf, f"topology {name}") + [
            w for c in topology.components.values()
            for w in cfg.conf_warnings(c.conf, f"topology {name} component {c.id!r}")]
        if conf.get(cfg.TOPOLOGY_FALL_BACK_ON_PICKLE):
            warnings.append(
                f"topology {name}: {cfg.TOPOLOGY_FALL_BACK_ON_PICKLE} is on: workers unpickle "
                "tuple values, and unpickling runs whatever the bytes say; they accept pickled "
                "values only over encrypted worker traffic. Prefer registering the types in "
                f"{cfg.TOPOLOGY_SERIALIZERS}")
        # Credentials are the cluster's to hand out: never ones a client sent (its CurveZMQ
        # pair, its workers' ZooKeeper identity).
        for key in (cfg.TOPOLOGY_CURVE_PUBLIC_KEY, cfg.TOPOLOGY_CURVE_SECRET_KEY,
                    *DAEMON_ONLY_KEYS):
            if conf.pop(key, None) is not None and key in DAEMON_ONLY_KEYS:
                warnings.append(f"topology {name}: {key} in a topology's conf is ignored "
                                "(the cluster sets it)")
        if cfg.get(conf, cfg.STORM_MESSAGING_CURVE):
            conf.update(topology_keys())
        conf[cfg.TOPOLOGY_SUBMITTER_USER] = owner  # the principal (workers' ZooKeeper identity)
        _, executors = _executors(topology, conf)
        status = {"ACTIVE": lc.TopologyStatus.ACTIVE,
                  "INACTIVE": lc.TopologyStatus.INACTIVE}.get(str(initial_status).upper())
        if status is None:
            raise InvalidRequest(f"initial status must be ACTIVE or INACTIVE, got {initial_status!r}")
        with self._lock:
            self.require_leader()
            live = self._find(name)
            if live is not None:
                raise TopologyAlreadyExists(
                    f"topology {name!r} is already running (id {live.topology_id}); kill it first "
                    "or pick another name", name, live.topology_id)
            self._check_count(name, owner)
            self.package_store.check_ready(location, owner)  # the uploader's own upload
            now = int(time.time())
            tid = f"{name}-{next(self._counter)}-{now}"
            while self.cluster_state.get_storm(tid) is not None:
                tid = f"{name}-{next(self._counter)}-{now}"
            event = lc.Submit(tid, name, owner, status, now,
                              int(conf.get(cfg.TOPOLOGY_WORKERS) or 1), _counts(executors),
                              stimulus_id=f"submit-{name}")
            _, instructions = lc.transition(None, event)
            # The code first (Storm's blob store): the topology exists once /storms has it.
            self.package_store.commit(location, tid,
                                      topology_pb.SerializeToString(deterministic=True),
                                      json.dumps(conf, sort_keys=True))
            persisted = False
            try:
                for inst in instructions:
                    try:
                        self._execute(tid, inst, event.stimulus_id)
                    except NotEnoughSlots as e:
                        log.warning("topology %s: %s; the monitor assigns it once slots appear",
                                    tid, e)
                    if isinstance(inst, lc.Persist):
                        persisted = True
                        log.info("topology %s submitted as %s (%s, %d executors)", name, tid,
                                 status.value, len(executors))
                        for w in warnings:
                            log.info("topology %s: %s", tid, w)  # the submitter shows it
                            if warn is not None:
                                warn(w)
            except BaseException:
                if not persisted:  # nothing points at the stored code: drop it
                    self.package_store.remove(tid)
                raise
            return tid

    def _check_shell(self, name: str, conf: Mapping[str, Any], topology: Topology) -> None:
        """Shell components: a known serializer, and programs this host has (Nimbus's host
        runs the cluster's software image; a missing node or ruby fails here, not in every
        worker)."""
        shells = [c for c in topology.components.values() if c.shell is not None]
        if not shells:
            return
        try:
            serializer_name(conf.get(cfg.TOPOLOGY_MULTILANG_SERIALIZER))
        except ConfigError as e:
            raise InvalidRequest(f"topology {name}: {e}") from None
        env_path = os.environ.get("PATH", "")
        # Workers run with topology.environment over the supervisor's environment.
        topology_env = conf.get(cfg.TOPOLOGY_ENVIRONMENT) or {}
        if topology_env.get("PATH"):
            env_path = str(topology_env["PATH"]) + os.pathsep + env_path
        for c in shells:
            for problem in missing_interpreters([(c.id, c.shell.argv)],
                                                extend_path(env_path, c.shell.env),
                                                f"the Nimbus host {self.host}"):
                raise InvalidTopology(f"topology {name}: {problem}", component=c.id)

    def _check_size(self, name: str, conf: Mapping[str, Any], topology: Topology) -> None:
        """Storm's nimbus.slots.perTopology and nimbus.executors.perTopology, from Nimbus's
        conf (a topology cannot raise them), checked before any executor is built."""
        workers = int(conf.get(cfg.TOPOLOGY_WORKERS) or 1)
        max_workers = int(cfg.get(self.conf, cfg.NIMBUS_SLOTS_PER_TOPOLOGY))
        if workers > max_workers:
            raise LimitExceeded(f"topology {name} asks for {workers} workers; this cluster allows "
                                f"{max_workers} per topology ({cfg.NIMBUS_SLOTS_PER_TOPOLOGY})")
        # The running topology's: topology.acker.executors adds tasks too.
        tasks = sum(c.task_count for c in system_topology(topology, conf).components.values())
        max_tasks = int(cfg.get(self.conf, cfg.NIMBUS_EXECUTORS_PER_TOPOLOGY))
        if tasks > max_tasks:
            raise LimitExceeded(f"topology {name} has {tasks} tasks; this cluster allows "
                                f"{max_tasks} executors and tasks per topology "
                                f"({cfg.NIMBUS_EXECUTORS_PER_TOPOLOGY})")

    def _check_count(self, name: str, owner: str) -> None:
        """nimbus.topologies.max and nimbus.topologies.per.user.max (leader, lock held)."""
        limit = int(cfg.get(self.conf, cfg.NIMBUS_TOPOLOGIES_MAX))
        live = self.index.count() if self.index.ready else len(self.cluster_state.storm_ids())
        if live >= limit:
            raise LimitExceeded(f"topology {name}: the cluster runs {live} topologies, its limit "
                                f"({cfg.NIMBUS_TOPOLOGIES_MAX}); kill one first")
        limit = int(cfg.get(self.conf, cfg.NIMBUS_TOPOLOGIES_PER_USER_MAX))
        if self.index.ready and self.index.owned_by(owner) >= limit:
            raise LimitExceeded(f"topology {name}: {owner} owns {limit} live topologies, the "
                                f"limit per user ({cfg.NIMBUS_TOPOLOGIES_PER_USER_MAX}); kill "
                                "one first")

    def _find(self, name: str) -> lc.TopologyState | None:
        if self.index.ready:  # the leader: one read, whatever the number of topologies
            tid = self.index.topology_id(name)
            state = self._state(tid) if tid is not None else None
            return state if state is not None and state.name == name else None
        for tid in self.cluster_state.storm_ids():
            state = self._state(tid)
            if state is not None and state.name == name:
                return state
        return None

    def _by_name(self, name: str) -> lc.TopologyState:
        state = self._find(name)
        if state is None:
            raise TopologyNotFound(f"no live topology named {name!r}; `squall list` shows the "
                                   "running ones")
        return state

    def _guarded(self, name: str, guard: Guard | None) -> lc.TopologyState:
        """The live topology ``name`` (lock held), once ``guard`` allowed its ACL: the check
        and the action see the same topology, even if one of that name is replaced."""
        state = self._by_name(name)
        if guard is not None:
            guard(self._acl_of(state))
        return state

    def _request(self, name: str, event: lc.Event, guard: Guard | None) -> None:
        with self._lock:
            self.require_leader()
            self._feed(self._guarded(name, guard).topology_id, event)

    def kill(self, name: str, wait_secs: float | None = None, guard: Guard | None = None
             ) -> None:
        """Deactivate now, remove after ``wait_secs`` (unset: topology.message.timeout.secs).
        ``guard(acl)`` (authorization) may refuse, before anything changes."""
        with self._lock:
            self.require_leader()
            state = self._guarded(name, guard)
            if wait_secs is None:
                try:
                    conf = self.package_store.read_conf(state.topology_id)
                except (SquallError, OSError, ValueError):
                    conf = {}  # its files are missing here: the kill must still work
                wait_secs = float(conf.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30))
            if not 0 <= wait_secs <= cfg.MAX_WAIT_SECS:
                raise InvalidRequest(f"kill wait must be 0..{cfg.MAX_WAIT_SECS} seconds, got "
                                     f"{wait_secs}")
            self._feed(state.topology_id, lc.Kill(wait_secs, now=time.time(),
                                                  stimulus_id=f"kill-{name}"))

    def activate(self, name: str, guard: Guard | None = None) -> None:
        self._request(name, lc.Activate(stimulus_id=f"activate-{name}"), guard)

    def deactivate(self, name: str, guard: Guard | None = None) -> None:
        self._request(name, lc.Deactivate(stimulus_id=f"deactivate-{name}"), guard)

    def rebalance(self, name: str, wait_secs: float | None = None, num_workers: int | None = None,
                  executors: Mapping[str, int] | None = None, guard: Guard | None = None
                  ) -> None:
        """REBALANCING for ``wait_secs``, then reassign with the new worker/executor counts."""
        executors = dict(executors or {})
        with self._lock:
            self.require_leader()
            state = self._guarded(name, guard)
            tid = state.topology_id
            if wait_secs is None:
                wait_secs = float(self.package_store.read_conf(tid).get(
                    cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30))
            if not 0 <= wait_secs <= cfg.MAX_WAIT_SECS or \
                    (num_workers is not None and num_workers < 1):
                raise InvalidRequest(f"rebalance {name}: wait must be 0..{cfg.MAX_WAIT_SECS} "
                                     "and workers >= 1 "
                                     f"(got wait {wait_secs}, workers {num_workers})")
            max_workers = int(cfg.get(self.conf, cfg.NIMBUS_SLOTS_PER_TOPOLOGY))
            if num_workers is not None and num_workers > max_workers:
                raise LimitExceeded(f"rebalance {name} to {num_workers} workers: this cluster "
                                    f"allows {max_workers} per topology "
                                    f"({cfg.NIMBUS_SLOTS_PER_TOPOLOGY})")
            sys_topo, _ = self._executors(tid)
            for comp, n in executors.items():
                c = sys_topo.components.get(comp)
                if c is None:
                    raise InvalidRequest(f"topology {name} has no component {comp!r} "
                                         f"(components: {', '.join(sorted(sys_topo.components))})")
                if not 1 <= n <= c.task_count:
                    raise InvalidRequest(f"component {comp!r} of {name} has {c.task_count} tasks; "
                                         f"its executor count must be 1..{c.task_count}, got {n}")
            self._feed(tid, lc.Rebalance(wait_secs, now=time.time(), num_workers=num_workers,
                                         executors=executors, stimulus_id=f"rebalance-{name}"))

    def set_log_config(self, name: str, levels: Mapping[str, tuple[str, int]],
                       remove: list[str], guard: Guard | None = None) -> dict[str, dict]:
        """Merge ``levels`` (logger -> (level, timeout_secs; 0 never)) into the topology's
        log config, drop ``remove``, store it in ZooKeeper for the supervisors; returns the
        result. Timeouts count on this clock (Storm's setLogConfig does the same)."""
        if len(levels) + len(remove) > MAX_LOGGERS:
            raise InvalidRequest(f"{len(levels) + len(remove)} loggers in one request; at most "
                                 f"{MAX_LOGGERS} may be set or removed at a time")
        for logger in list(levels) + list(remove):
            if not logger or len(logger) > MAX_LOGGER_NAME:
                raise InvalidRequest(f"logger name {logger[:40]!r}... is {len(logger)} "
                                     f"characters; a name has 1 to {MAX_LOGGER_NAME}")
        for logger, (level, timeout) in levels.items():
            try:
                level_number(level)
            except ValueError as e:
                raise InvalidRequest(f"logger {logger!r}: {e}") from None
            if not 0 <= timeout <= MAX_LOG_TIMEOUT_SECS:
                raise InvalidRequest(f"logger {logger!r}: a timeout is 0 (never) to "
                                     f"{MAX_LOG_TIMEOUT_SECS} seconds, got {timeout}")
        with self._lock:  # one read-modify-write at a time
            self.require_leader()
            tid = self._guarded(name, guard).topology_id
            config = self.cluster_state.get_log_config(tid)
            for logger in remove:
                config.pop(logger, None)
            now = time.time()
            for logger, (level, timeout) in levels.items():
                config[logger] = {"level": level.upper(),
                                  "reset_at": int(now + timeout) if timeout else 0}
            # Entries whose timeout passed are reverted by the workers already: drop them.
            config = {k: v for k, v in config.items()
                      if not v.get("reset_at") or v["reset_at"] > now}
            if len(config) > MAX_LOGGERS:
                raise InvalidRequest(f"topology {name} would have {len(config)} loggers set; "
                                     f"at most {MAX_LOGGERS} (remove some first)")
            self.cluster_state.set_log_config(tid, config)
        log.info("topology %s: log levels %s", tid, config or "reset")
        return config

    # --- profiling and debugging (Storm's setWorkerProfiler and debug) ---
    def set_worker_profiler(self, name: str, worker: str, action: str, secs: float = 0,
                            guard: Guard | None = None) -> dict[str, Any]:
        """Store a profiler request for one of the topology's workers in ZooKeeper, where its
        supervisor finds it (client/profiling.py); returns the stored request. Expired
        requests are dropped as this one is added; too many unexpired ones are refused."""
        try:
            action = profiling.canonical_action(action)
            secs = profiling.check_secs(action, secs)
        except ValueError as e:
            raise InvalidRequest(str(e)) from None
        with self._lock:  # one read-modify-write at a time
            self.require_leader()
            tid = self._guarded(name, guard).topology_id
            found = self.cluster_state.get_assignment(tid)
            workers = sorted(found[0].get("workers", {})) if found else []
            if worker not in workers:
                raise InvalidRequest(f"topology {name} has no worker {worker[:80]!r}; its "
                                     f"workers: {', '.join(workers) or 'none yet'}")
            now = time.time()
            live = profiling.live_requests(self.cluster_state.get_profile_requests(tid), now)
            mine = [r for r in live if r.get("worker") == worker]
            if len(mine) >= profiling.MAX_PENDING_PER_WORKER or \
                    len(live) >= profiling.MAX_PENDING_PER_TOPOLOGY:
                raise LimitExceeded(
                    f"topology {name}: worker {worker} has {len(mine)} and the topology "
                    f"{len(live)} profiler requests not yet expired (at most "
                    f"{profiling.MAX_PENDING_PER_WORKER} and "
                    f"{profiling.MAX_PENDING_PER_TOPOLOGY}); retry in "
                    f"{profiling.PICKUP_SECS} s")
            request = {"id": secrets.token_hex(6), "worker": worker, "action": action,
                       "secs": secs, "time": round(now, 3)}
            self.cluster_state.set_profile_requests(tid, live + [request])
        log.info("topology %s: profiler request %s: %s of %s%s", tid, request["id"], action,
                 worker, f" for {secs} s" if secs else "")
        return dict(request, expires=profiling.expires_at(request), topology_id=tid)

    def pending_profile_actions(self, name: str | None = None,
                                topology_id: str | None = None) -> dict[str, Any]:
        """The topology's unexpired profiler requests and the CPU profiles still sampling
        (Storm's getComponentPendingProfileActions and profilerActive)."""
        state = self._by_name(name) if name is not None else self._state(topology_id or "")
        if state is None:
            raise TopologyNotFound(f"no live topology with id {topology_id!r}; `squall list` "
                                   "shows the running ones")
        tid = state.topology_id
        reqs = self.cluster_state.get_profile_requests(tid)
        now = time.time()
        return {"topology_id": tid, "requests": profiling.live_requests(reqs, now),
                "active": profiling.active_profiles(reqs, now)}

    def debug(self, name: str, component: str, enable: bool, pct: float,
              guard: Guard | None = None) -> dict[str, dict]:
        """Turn debug sampling on (``pct`` percent of the emits logged) or off, for one
        component or (``component`` empty) the whole topology, as Storm's ``debug``: a
        component's own setting wins over the topology's; the topology's off drops them
        all. Stored in ZooKeeper for the supervisors; returns the topology's options."""
        try:
            pct = profiling.check_pct(pct) if enable else 0.0
        except ValueError as e:
            raise InvalidRequest(str(e)) from None
        enable = bool(enable) and pct > 0  # Storm's UI sends 0 to mean off
        with self._lock:
            self.require_leader()
            tid = self._guarded(name, guard).topology_id
            if component:
                sys_topo, _ = self._executors(tid)
                if component not in sys_topo.components:
                    raise InvalidRequest(
                        f"topology {name} has no component {component[:80]!r} (components: "
                        f"{', '.join(sorted(sys_topo.components))})")
            options = self.cluster_state.get_debug_options(tid)
            if not component and not enable:
                options = {}
            else:
                options[component or profiling.ALL_COMPONENTS] = {"enable": enable, "pct": pct}
            self.cluster_state.set_debug_options(tid, options)
        log.info("topology %s: debug %s %s", tid, component or "(all components)",
                 f"on, {pct:g}% sampled" if enable else "off")
        return options

    def component_debug(self, topology_id: str) -> dict[str, dict]:
        """The topology's debug options as TopologyInfo's component_debug."""
        try:
            options = self.cluster_state.get_debug_options(topology_id)
        except ClusterStateError as e:
            log.warning("topology %s: cannot read its debug options: %s", topology_id, e)
            return {}
        return {c: {"enable": bool(o.get("enable")), "sampling_pct": float(o.get("pct", 0))}
                for c, o in options.items() if isinstance(o, dict)}

    def record_heartbeats(self, supervisor_id: str, heartbeats: list[Any],
                          errors: list[Any] = (), restarts: list[Any] | None = None,
                          topology_stats: list[Any] = ()) -> None:
        """Keep the supervisor's worker heartbeats in memory (never in ZooKeeper); the leader
        stores the forwarded worker ``errors`` (WorkerError) under /errors, one write each.
        ``topology_stats`` are Topology Masters' summaries (TopologyStats): the task counters
        of every worker of a topology, whichever supervisor runs it. Only the leader takes
        them (NotALeader otherwise)."""
        self.require_leader()  # a follower's view would go unused: the supervisor finds the leader
        if self.index.ready:  # a removed topology's late heartbeats would be kept forever
            heartbeats = [hb for hb in heartbeats if self.index.live(hb.topology_id)]
            topology_stats = [s for s in topology_stats if self.index.live(s.topology_id)]
        now = time.time()
        self.liveness.record(supervisor_id, heartbeats, now, restarts)
        assignments = self.index.assignments() if topology_stats else {}
        for summary in topology_stats:
            record = assignments.get(summary.topology_id)
            if record is not None:
                self.liveness.record_stats(record, list(summary.workers), now)
        if errors:  # outside the lock: ZooKeeper writes must not stall the loop
            self._store_errors(errors)

    def _store_errors(self, errors: list[Any]) -> None:
        """Errors of live topologies to ZooKeeper; a failure is logged, the heartbeat still counts."""
        for we in errors:
            e = we.error
            # A supervisor cuts its workers' errors; a daemon of an older version may not.
            e.error = cut_error(e.error)
            e.component = e.component[:MAX_COMPONENT_CHARS]
            if self._state(we.topology_id) is None:
                continue  # a removed topology: its /errors subtree would never be deleted
            if we.topology_id in self._last_errors:
                prev = self._last_errors[we.topology_id]
                if prev is None or e.time_secs >= prev["time_secs"]:
                    self._last_errors[we.topology_id] = {
                        "component": e.component, "error": e.error, "time_secs": e.time_secs,
                        "host": e.host, "port": e.port, "task": e.task}
            try:
                self.cluster_state.report_error(we.topology_id, e.component, e.error,
                                                e.time_secs, host=e.host, port=e.port,
                                                task=e.task)
            except ClusterStateError as exc:
                log.warning("topology %s: cannot store a worker error: %s", we.topology_id, exc)

    # --- views (any Nimbus answers; nimbus/views.py) ---
    def cluster_info(self) -> dict[str, Any]:
        """Supervisors, topologies and Nimbuses, as plain dicts (Storm's getClusterInfo)."""
        topologies = [t for t in map(self._state, self.cluster_state.storm_ids()) if t]
        return views.cluster_info(self.cluster_state, topologies, self.nimbuses(),
                                  time.time() - self.start_time,
                                  self.liveness if self.is_leader else None, self._last_error)

    def _last_error(self, tid: str) -> dict[str, Any] | None:
        """The topology's newest error: read from ZooKeeper once, then kept up to date as
        supervisors forward errors (so `squall list` costs no reads per topology)."""
        if tid not in self._last_errors or not self.is_leader:
            try:
                errs = self.cluster_state.errors(tid)
            except ClusterStateError:
                return None
            row = views.error_row(errs[-1]) if errs else None
            if not self.is_leader:
                return row  # only the leader stores errors, so only its cache stays current
            self._last_errors[tid] = row
        return self._last_errors[tid]

    def nimbuses(self) -> list[dict[str, Any]]:
        leader = self.address if self.is_leader else self._leader_address()
        return views.nimbus_rows(self.cluster_state, leader)

    def topology_info(self, name: str | None = None, topology_id: str | None = None,
                      window_secs: float = 0) -> dict[str, Any]:
        """One topology's executors, component totals and errors (Storm's getTopologyInfo)."""
        state = self._by_name(name) if name is not None else self._state(topology_id or "")
        if state is None:
            raise TopologyNotFound(f"no live topology with id {topology_id!r}; `squall list` "
                                   "shows the running ones")
        info = views.topology_info(self.cluster_state, self.package_store, self.liveness, state,
                                   window_secs)
        info["component_debug"] = self.component_debug(state.topology_id)
        return info

    def topology_acl(self, name: str | None = None, topology_id: str | None = None
                     ) -> TopologyAcl:
        """Who may manage the topology: its owner and its conf's topology.users/groups."""
        state = self._by_name(name) if name is not None else self._state(topology_id or "")
        if state is None:
            raise TopologyNotFound(f"no live topology with id {topology_id!r}; `squall list` "
                                   "shows the running ones")
        return self._acl_of(state)

    def _acl_of(self, state: lc.TopologyState) -> TopologyAcl:
        try:
            conf = self.package_store.read_conf(state.topology_id)
        except (SquallError, OSError, ValueError):
            conf = {}  # a follower still copying it: the owner alone
        return TopologyAcl.of(state.name, state.owner, conf)

    def topology_conf(self, topology_id: str) -> str:
        """The topology's conf as a JSON object string."""
        return self.package_store.read_conf_json(topology_id)

    def user_topology(self, topology_id: str) -> bytes:
        """The serialized user StormTopology as submitted."""
        return self.package_store.read_topology(topology_id)


# --- pure helpers ------------------------------------------------------------------

#: ZooKeeper credentials only daemons set: a submitted conf never carries them to workers.
DAEMON_ONLY_KEYS = (cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD, cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD,
                    "storm.zookeeper.superACL")


def _executors(topology: Topology, conf: Mapping[str, Any],
               component_executors: Mapping[str, int] | None = None
               ) -> tuple[Topology, list[tuple[str, list[int]]]]:
    sys_topo = system_topology(topology, conf)
    if component_executors:
        comps = dict(sys_topo.components)
        for cid, n in component_executors.items():
            if cid in comps:
                c = comps[cid]
                comps[cid] = replace(c, parallelism=n, num_tasks=c.task_count)
        sys_topo = Topology(comps)
    return sys_topo, executors_of(sys_topo, assign_task_ids(sys_topo))


def _counts(executors: list[tuple[str, list[int]]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for comp, _ in executors:
        out[comp] = out.get(comp, 0) + 1
    return out


def _current(record: Assignment | None) -> dict[tuple[int, ...], Slot]:
    """The executor -> slot mapping of a stored assignment."""
    if record is None:
        return {}
    worker_of = record.worker_of_task()
    out = {}
    for _, tasks in record.executors:
        hp = worker_of.get(tasks[0])
        sid = record.slots.get(hp) if hp else None
        if sid is not None:
            host, port = host_port(hp)
            out[tuple(tasks)] = Slot(sid, host, port)
    return out


def _assignment_record(tid: str, executors: list[tuple[str, list[int]]], assignment,
                       old: Assignment | None, now: float) -> Assignment:
    workers: dict[str, tuple[int, ...]] = {}
    slots: dict[str, str] = {}
    for slot, execs in assignment.by_slot().items():
        hp = f"{slot.host}:{slot.port}"
        workers[hp] = tuple(sorted(t for e in execs for t in e))
        slots[hp] = slot.supervisor_id
    old_workers = old.workers if old else {}
    old_starts = old.start_times if old else {}
    starts = {hp: (old_starts[hp] if old_workers.get(hp) == tasks and hp in old_starts else now)
              for hp, tasks in workers.items()}
    return Assignment(tid, workers, slots, tuple((c, tuple(t)) for c, t in executors), starts,
                      (old.revision if old else 0) + 1)
