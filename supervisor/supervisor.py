"""The Supervisor daemon: runs the worker processes Nimbus assigned to this node's slots.

Python counterpart of Storm's ``Supervisor`` (its ``ReadClusterState`` sync and
``Slot`` state machines, collapsed into one loop as Heron's executor does).
It registers an ephemeral ``/supervisors/<id>`` node with its slots, then
follows ``/assignments`` through watches (which only wake the loop) and a full
re-read every ``supervisor.monitor.frequency.secs``: it fetches each assigned
topology into ``storm.local.dir``/supervisor/stormdist/<id>, writes every
worker's directory (``assignment.json``, ``status``) as
:class:`~squall.deploy.static.StaticCluster` does, and applies
:func:`~squall.supervisor.reconcile.plan` to its own process table. Between
full syncs a short local tick reaps dead workers and relaunches them once the
:class:`~squall.supervisor.reconcile.RestartPolicy` backoff allows. Worker
liveness stays on this host (``heartbeat.json``); nothing is written to
ZooKeeper per heartbeat. Every ``supervisor.heartbeat.frequency.secs`` one
SupervisorWorkerHeartbeats message with the running workers' heartbeats goes to
Nimbus through ``send_heartbeats`` (default: gRPC; failures logged, never fatal).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..client import config as cfg
from ..client.cluster_state import ClusterState, ClusterStateError, Paths, WatchEvent
from ..client.daemon import Daemon
from ..worker.state import Assignment
from ..worker.worker import (ASSIGNMENT_FILE, HEARTBEAT_FILE, STATUS_FILE, TOPOLOGY_FILE,
                             write_json_atomic)
from .reconcile import (KillWorker, LaunchWorker, RestartPolicy, RunningWorker, WorkerSpec,
                        plan)

log = logging.getLogger("squall.supervisor")

#: Storm's keys for worker liveness on the supervisor (seconds; Storm's defaults).
SUPERVISOR_WORKER_TIMEOUT_SECS = "supervisor.worker.timeout.secs"              # 30
SUPERVISOR_WORKER_START_TIMEOUT_SECS = "supervisor.worker.start.timeout.secs"  # 120
SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS = "supervisor.worker.shutdown.sleep.secs"  # 3
#: Keys of the supervisor's conf its workers get beneath the topology conf.
WORKER_INHERITED_PREFIXES = ("storm.zookeeper.", "transactional.zookeeper.", "trident.")
#: Worker errors kept for Nimbus while it is unreachable; older ones are dropped first.
MAX_UNSENT_ERRORS = 200
#: The conf file a fetcher writes next to ``topology.pb``.
CONF_FILE = "conf.json"
#: Where a fetcher may put the topology's code; whichever exists goes on the worker's sys.path.
PACKAGE_NAMES = ("package", "package.zip", "package.pyz")
#: /storms/<id> status -> the worker's ``status`` file (rebalancing pauses spouts, as in Storm).
STATUS_FILE_VALUES = {"active": "ACTIVE", "inactive": "INACTIVE", "killed": "KILLED",
                      "rebalancing": "INACTIVE"}

FetchTopology = Callable[[str, str], None]
Spawn = Callable[[list, str, dict], Any]


@dataclass(frozen=True)
class WorkerEvent:
    """A worker launched (``exit_code`` None) or gone (its exit code), for observers such as
    ``squall local``, which shows pids and stops on a crash."""

    kind: str  # "launched", "exited" (on its own) or "stopped" (by this supervisor)
    topology_id: str
    port: int
    pid: int
    log_path: str
    exit_code: int | None = None
    tasks: tuple[int, ...] = ()


def default_spawn(cmd: list, log_path: str, env: dict) -> subprocess.Popen:
    """Start a worker with stdout and stderr appended to ``log_path``, in its own session."""
    with open(log_path, "ab") as logf:
        # Its own session: a Ctrl-C meant for the supervisor's terminal must not hit workers
        # directly; the supervisor stops them (and they exit with it, --exit-with-parent).
        return subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def log_tail(path: str, lines: int = 20) -> str:
    """The last ``lines`` lines of a worker log ('' if unreadable)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 16384))
            return b"".join(fh.read().splitlines(keepends=True)[-lines:]).decode(errors="replace")
    except OSError:
        return ""


@dataclass
class _Proc:
    """A worker process this supervisor launched and has not reaped."""

    spec: WorkerSpec
    proc: Any  # Popen-like: pid, poll(), wait(timeout), send_signal(sig), kill()
    started_at: float
    log_path: str
    worker_dir: str


class Supervisor(Daemon):
    """One node's supervisor: ``start()`` registers and runs the sync loop in a thread.

    Example::

        sup = Supervisor(conf, fetch_topology=download)   # KazooClusterState(conf) by default
        sup.start()
        ...
        sup.close("signal-15")   # stops its workers, unregisters

    ``spawn(cmd, log_path, env)`` is the one seam that starts a process (tests
    return fakes); :meth:`sync` runs one round and is what the loop calls.
    """

    #: Seconds between local rounds (reap, relaunch after backoff, heartbeat check).
    poll_interval = 0.5

    def __init__(self, conf: Mapping[str, Any], cluster_state: ClusterState | None = None,
                 fetch_topology: FetchTopology | None = None, spawn: Spawn | None = None,
                 clock: Callable[[], float] = time.time, policy: RestartPolicy | None = None,
                 send_heartbeats: Callable[[Any], None] | None = None,
                 on_worker_event: Callable[[WorkerEvent], None] | None = None):
        super().__init__()
        self.conf = cfg.layered(conf)
        self.host = self.conf.get(cfg.STORM_LOCAL_HOSTNAME) or "127.0.0.1"
        self.ports = sorted(int(p) for p in self.conf[cfg.SUPERVISOR_SLOTS_PORTS])
        self.local_dir = os.path.abspath(self.conf[cfg.STORM_LOCAL_DIR])
        self.stormdist = os.path.join(self.local_dir, "supervisor", "stormdist")
        self.workers_dir = os.path.join(self.local_dir, "workers")
        self.logs_dir = os.path.join(self.local_dir, "logs")
        for d in (self.stormdist, self.workers_dir, self.logs_dir):
            os.makedirs(d, exist_ok=True)
        self.id = self._load_id()
        self._own_state = cluster_state is None
        if cluster_state is None:
            from ..client.zk_cluster_state import KazooClusterState
            cluster_state = KazooClusterState(self.conf)
        self.state = cluster_state
        self.fetch_topology = fetch_topology
        self.spawn = spawn or default_spawn
        self.clock = clock
        self.policy = policy or RestartPolicy()
        self.monitor_secs = float(self.conf.get(cfg.SUPERVISOR_MONITOR_FREQUENCY_SECS, 10))
        self.hb_timeout = float(self.conf.get(SUPERVISOR_WORKER_TIMEOUT_SECS, 30))
        self.start_timeout = float(self.conf.get(SUPERVISOR_WORKER_START_TIMEOUT_SECS, 120))
        self.kill_grace = float(self.conf.get(SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS, 3))
        self.heartbeat_secs = float(self.conf.get(cfg.SUPERVISOR_HEARTBEAT_FREQUENCY_SECS) or 5)
        #: ``send_heartbeats(SupervisorWorkerHeartbeats)``; default: NimbusClient over gRPC.
        self.send_heartbeats = send_heartbeats
        self.on_worker_event = on_worker_event
        self._hb_thread: threading.Thread | None = None
        #: pid -> (newest error time, how many with that time) taken from its heartbeat.json.
        self._error_marks: dict[int, tuple[float, int]] = {}
        #: Errors taken from heartbeat files that Nimbus has not accepted yet (bounded).
        self._error_outbox: collections.deque = collections.deque(maxlen=MAX_UNSENT_ERRORS)
        self._errors_lock = threading.Lock()  # heartbeat thread (send) vs loop thread (reap)
        #: port -> the process running there (only pids this supervisor launched).
        self.procs: dict[int, _Proc] = {}
        #: What the last full sync read: port -> spec (kept while ZooKeeper is unreachable).
        self.desired: dict[int, WorkerSpec] = {}
        self._armed: set[str] = set()  # paths with a pending watch (ZooKeeper watches are one-shot)
        self._dirty = threading.Event()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at = clock()
        self._used_reported: list[int] | None = None
        self.state.add_listener(self._on_connection)

    # -- identity and registration ----------------------------------------------------
    def _load_id(self) -> str:
        """The id kept in ``storm.local.dir``/supervisor/id, so a restart keeps its slots' owner."""
        path = os.path.join(self.local_dir, "supervisor", "id")
        try:
            with open(path) as fh:
                sid = fh.read().strip()
            if sid:
                return sid
        except FileNotFoundError:
            pass
        sid = str(uuid.uuid4())
        with open(path + ".tmp", "w") as fh:
            fh.write(sid + "\n")
        os.replace(path + ".tmp", path)
        return sid

    def used_slots(self) -> list[int]:
        return sorted(self.procs)

    def register(self) -> None:
        """Write the ephemeral supervisor node (again only when the used slots changed)."""
        used = self.used_slots()
        now = self.clock()
        self.state.register_supervisor(self.id, {
            "host": self.host, "slots": self.ports, "used_slots": used,
            "uptime_secs": now - self._started_at, "time_secs": now})
        self._used_reported = used

    # -- watches (ZooKeeper's thread: flag and wake only) ---------------------------------
    def _on_watch(self, event: WatchEvent) -> None:
        self._armed.discard(event.path)
        self._dirty.set()
        self._wake.set()

    def _on_connection(self, state: str) -> None:
        # After a lost session the server forgot our watches: re-arm them all on the next read.
        if state in ("LOST", "CONNECTED"):
            self._armed.clear()
            self._dirty.set()
            self._wake.set()

    def _watch(self, path: str):
        if path in self._armed:
            return None  # one pending watch per path; a second would only fire twice
        self._armed.add(path)
        return self._on_watch

    # -- the loop ---------------------------------------------------------------------
    def start_unsafe(self) -> None:
        """Register and start the sync loop and the heartbeat thread."""
        self.register()
        self._dirty.set()
        self._thread = threading.Thread(target=self._run, name=f"supervisor-{self.id[:8]}",
                                        daemon=True)
        self._thread.start()
        self._hb_thread = threading.Thread(target=self._heartbeat_loop,
                                           name=f"supervisor-hb-{self.id[:8]}", daemon=True)
        self._hb_thread.start()
        log.info("supervisor %s on %s started: slots %s, local dir %s", self.id, self.host,
                 self.ports, self.local_dir)

    def _run(self) -> None:
        next_full = 0.0
        while not self._stopping.is_set():
            now = time.monotonic()
            full = self._dirty.is_set() or now >= next_full
            if full:
                self._dirty.clear()
                next_full = now + self.monitor_secs
            try:
                self.sync(full=full)
            except Exception:  # the loop must outlive one bad round; the next one retries
                log.exception("supervisor %s: sync round failed", self.id)
            wait = min(self.poll_interval, max(0.0, next_full - time.monotonic()))
            due = self.policy.next_restart_at(self.clock())
            if due is not None:
                wait = min(wait, max(0.0, due - self.clock()))
            self._wake.wait(wait)
            self._wake.clear()

    # -- worker heartbeats to Nimbus (Storm 2's sendSupervisorWorkerHeartbeats) ------------
    def worker_heartbeats(self) -> Any:
        """One SupervisorWorkerHeartbeats message from the running workers' heartbeat.json
        (taking their new errors into the outbox, which :meth:`report_heartbeats` sends)."""
        from ..proto import nimbus_pb2 as pb
        msg = pb.SupervisorWorkerHeartbeats(supervisor_id=self.id)
        for port, p in sorted(dict(self.procs).items()):
            hb = self._read_heartbeat(p)
            if hb is None:
                continue  # not started yet, or the file is left by an earlier process
            self._take_errors(p, hb)
            self._add_worker_heartbeat(msg, port, p, hb)
        return msg

    @staticmethod
    def _read_heartbeat(p: _Proc) -> dict | None:
        hb = _read_json(os.path.join(p.worker_dir, HEARTBEAT_FILE))
        fresh = isinstance(hb, dict) and hb.get("pid") == p.proc.pid and "time" in hb
        return hb if fresh else None

    def _take_errors(self, p: _Proc, hb: dict, last: bool = False) -> None:
        """Move the errors of ``hb`` not taken before into the outbox (``last``: the process
        has exited, forget its mark)."""
        from ..proto import nimbus_pb2 as pb
        with self._errors_lock:
            mark = self._error_marks.pop(p.proc.pid, (0.0, 0))
            new, mark = self._unsent_errors(hb.get("errors") or [], mark)
            if not last:
                self._error_marks[p.proc.pid] = mark
            for e in new:
                self._error_outbox.append(pb.WorkerError(
                    topology_id=p.spec.topology_id, error=pb.ErrorInfo(
                        component=str(e.get("component", "")), error=str(e.get("error", "")),
                        time_secs=int(e.get("time", 0)), host=self.host, port=p.spec.port,
                        task=int(e.get("task", 0)))))

    def _exited(self, p: _Proc) -> None:
        """A worker is gone: keep what its final heartbeat reported (a crash's error) before a
        relaunch replaces the file."""
        hb = self._read_heartbeat(p)
        if hb is not None:
            self._take_errors(p, hb, last=True)
        else:
            with self._errors_lock:
                self._error_marks.pop(p.proc.pid, None)

    @staticmethod
    def _unsent_errors(errors: list[dict], mark: tuple[float, int]
                       ) -> tuple[list[dict], tuple[float, int]]:
        """The errors after ``mark`` = (time, how many with that time were sent), and the mark
        after them. Several errors can share a time; the worker keeps its last 20, oldest first."""
        t, n = mark
        new = [e for e in errors if e.get("time") == t][n:] + \
            [e for e in errors if float(e.get("time", 0)) > t]
        if not new:
            return [], mark
        last = max(float(e["time"]) for e in new)
        return new, (last, sum(1 for e in errors if e.get("time") == last))

    @staticmethod
    def _add_worker_heartbeat(msg: Any, port: int, p: _Proc, hb: dict) -> None:
        w = msg.worker_heartbeats.add(
            topology_id=p.spec.topology_id, port=port, time_secs=float(hb["time"]),
            uptime_secs=int(hb.get("uptime_secs", 0)), state=str(hb.get("state", "running")))
        for t in p.spec.tasks:
            w.executors.add(task_start=int(t), task_end=int(t))
        for task, st in sorted((hb.get("tasks") or {}).items(), key=lambda kv: int(kv[0])):
            ts = w.tasks.add(task=int(task), component=str(st.get("component", "")))
            for f in ("emitted", "transferred", "executed", "acked", "failed",
                      "timed_out", "pending"):
                setattr(ts, f, int(st.get(f, 0)))
            lat = st.get("complete_latency_ms")
            if lat:
                ts.complete_latency.mean = float(lat.get("mean", 0))
                ts.complete_latency.p50 = float(lat.get("p50", 0))
                ts.complete_latency.p99 = float(lat.get("p99", 0))
                ts.complete_latency.n = int(lat.get("n", 0))

    def report_heartbeats(self) -> None:
        """Send one report to Nimbus; a failure is logged, never raised, and its errors go again."""
        errors: list = []
        try:
            if self.send_heartbeats is None:
                from .fetch import grpc_heartbeat_sender
                self.send_heartbeats = grpc_heartbeat_sender(self.conf)
            msg = self.worker_heartbeats()
            with self._errors_lock:
                errors = list(self._error_outbox)
                self._error_outbox.clear()
            msg.errors.extend(errors)
            self.send_heartbeats(msg)
        except Exception as e:  # noqa: BLE001 - Nimbus away must not stop the supervisor
            with self._errors_lock:  # oldest first again; the deque's bound drops the oldest
                self._error_outbox.extendleft(reversed(errors))
            log.warning("supervisor %s: cannot send worker heartbeats to Nimbus: %s", self.id, e)

    def _heartbeat_loop(self) -> None:
        while not self._stopping.wait(self.heartbeat_secs):
            self.report_heartbeats()

    def sync(self, full: bool = True) -> None:
        """One round: reap, (full: re-read ZooKeeper and write worker dirs), then apply the plan."""
        self.reap()
        if full:
            try:
                self.desired = self.read_assignments()
            except ClusterStateError as e:
                # Keep the workers we have: ZooKeeper being away says nothing about them.
                log.warning("supervisor %s: cannot read assignments (%s); keeping %d worker(s)",
                            self.id, e, len(self.procs))
        now = self.clock()
        self.policy.retain(s.key for s in self.desired.values())
        for inst in plan(self.desired, self.running(), now, self.hb_timeout, self.policy,
                         start_timeout=self.start_timeout):
            if isinstance(inst, KillWorker):
                self.kill(inst)
            elif isinstance(inst, LaunchWorker):
                self.launch(inst.spec)
            else:
                raise TypeError(inst)
        if full:
            self._clean_local_files()
        if self.used_slots() != self._used_reported:
            try:
                self.register()
            except ClusterStateError as e:
                log.warning("supervisor %s: cannot update used slots: %s", self.id, e)

    # -- reading the cluster state --------------------------------------------------------
    def read_assignments(self) -> dict[int, WorkerSpec]:
        """port -> spec for every worker Nimbus assigned to this supervisor; writes their dirs."""
        out: dict[int, WorkerSpec] = {}
        paths: Paths = self.state.paths
        for tid in self.state.assignment_ids(watch=self._watch(paths.dir(Paths.ASSIGNMENTS))):
            found = self.state.get_assignment(tid, watch=self._watch(paths.assignment(tid)))
            if found is None:
                continue
            mine = self._my_workers(found[0])
            if not mine:
                continue
            storm = self.state.get_storm(tid, watch=self._watch(paths.storm(tid))) or {}
            topo_dir = self.ensure_topology(tid)
            if topo_dir is None:
                continue
            conf = self._topology_conf(topo_dir, storm)
            workers = {w: sorted(int(t) for t in ts) for w, ts in found[0]["workers"].items()}
            status = STATUS_FILE_VALUES.get(str(storm.get("status", "")).lower(), "INACTIVE")
            for port in mine:
                wid = f"{self.host}:{port}"
                mine_tasks = set(workers[wid])
                groups = [[int(t) for t in ts] for _, ts in found[0].get("executors") or []
                          if ts and int(ts[0]) in mine_tasks]
                a = Assignment(tid, wid, self.host, port, workers, conf,
                               code_paths=self._code_paths(topo_dir), executors=groups)
                # Restart when its own tasks, conf or code change; a new peer map travels in
                # assignment.json, which the worker follows (as status does) without a restart.
                payload = a.to_json()
                spec = WorkerSpec.of(tid, port, workers[wid], payload=payload,
                                     version_data={k: v for k, v in payload.items()
                                                   if k != "workers"})
                self._write_worker_dir(spec, status)
                out[port] = spec
        return out

    def _my_workers(self, assignment: Mapping[str, Any]) -> list[int]:
        """Ports of the assignment's workers that belong to this supervisor."""
        slots = assignment.get("slots") or {}
        ports = []
        for wid in assignment.get("workers", {}):
            host, _, port = wid.rpartition(":")
            owner = slots.get(wid)
            if (owner == self.id if owner is not None else host == self.host) \
                    and int(port) in self.ports:
                ports.append(int(port))
        return sorted(ports)

    def ensure_topology(self, tid: str) -> str | None:
        """The topology's local dir, fetched first if missing; None if the fetch failed."""
        dest = os.path.join(self.stormdist, tid)
        if os.path.exists(os.path.join(dest, TOPOLOGY_FILE)):
            return dest
        if self.fetch_topology is None:
            log.error("supervisor %s: topology %s is assigned here but no fetcher is configured",
                      self.id, tid)
            return None
        # Fetch into a temporary dir and rename: a half-written dir must never look complete.
        tmp = os.path.join(self.stormdist, f".tmp-{tid}-{uuid.uuid4().hex[:8]}")
        os.makedirs(tmp)
        try:
            self.fetch_topology(tid, tmp)
            if not os.path.exists(os.path.join(tmp, TOPOLOGY_FILE)):
                raise FileNotFoundError(f"the fetcher wrote no {TOPOLOGY_FILE}")
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(tmp, dest)
        except Exception as e:  # any fetcher failure: skip this topology, retry next round
            log.error("supervisor %s: cannot fetch topology %s: %s", self.id, tid, e)
            shutil.rmtree(tmp, ignore_errors=True)
            return None
        log.info("supervisor %s: fetched topology %s into %s", self.id, tid, dest)
        return dest

    def _topology_conf(self, topo_dir: str, storm: Mapping[str, Any]) -> dict:
        """The worker's conf: the topology conf over this node's cluster keys (as a Storm worker
        gets the daemon conf under the topology's), so Trident finds ZooKeeper and Redis."""
        try:
            with open(os.path.join(topo_dir, CONF_FILE)) as fh:
                conf = json.load(fh)
        except FileNotFoundError:
            conf = {}
        cluster = {k: v for k, v in self.conf.items() if k.startswith(WORKER_INHERITED_PREFIXES)}
        conf = {**cluster, **conf}
        if storm.get("name") and cfg.TOPOLOGY_NAME not in conf:
            conf[cfg.TOPOLOGY_NAME] = storm["name"]
        return conf

    @staticmethod
    def _code_paths(topo_dir: str) -> list[str]:
        return [p for p in (os.path.join(topo_dir, n) for n in PACKAGE_NAMES) if os.path.exists(p)]

    def worker_dir(self, tid: str, port: int) -> str:
        return os.path.join(self.workers_dir, f"{tid}-{port}")

    def log_path(self, tid: str, port: int) -> str:
        return os.path.join(self.logs_dir, f"{tid}-{port}.log")

    def _write_worker_dir(self, spec: WorkerSpec, status: str) -> None:
        wdir = self.worker_dir(spec.topology_id, spec.port)
        os.makedirs(wdir, exist_ok=True)
        path = os.path.join(wdir, ASSIGNMENT_FILE)
        if _read_json(path) != spec.payload:
            write_json_atomic(path, spec.payload)
        status_path = os.path.join(wdir, STATUS_FILE)
        try:
            with open(status_path) as fh:
                current = fh.read().strip()
        except FileNotFoundError:
            current = None
        if current != status:  # rewrite only on change: the worker follows the file's mtime
            with open(status_path + ".tmp", "w") as fh:
                fh.write(status + "\n")
            os.replace(status_path + ".tmp", status_path)

    # -- processes ----------------------------------------------------------------------
    def running(self) -> dict[int, RunningWorker]:
        """The process table as :class:`RunningWorker` s, with their latest heartbeat."""
        out = {}
        for port, p in self.procs.items():
            hb = _read_json(os.path.join(p.worker_dir, HEARTBEAT_FILE)) or {}
            fresh = hb.get("pid") == p.proc.pid  # a heartbeat left by an earlier process is not its
            out[port] = RunningWorker(
                p.spec.topology_id, port, p.proc.pid, p.spec.version, p.started_at,
                float(hb["time"]) if fresh and "time" in hb else None,
                str(hb.get("state", "running")) if fresh else "starting")
        return out

    def launch(self, spec: WorkerSpec) -> None:
        tid, port = spec.key
        wdir = self.worker_dir(tid, port)
        try:
            os.unlink(os.path.join(wdir, HEARTBEAT_FILE))
        except FileNotFoundError:
            pass
        cmd = [sys.executable, "-m", "squall.worker", "--topology-dir",
               os.path.join(self.stormdist, tid), "--worker-dir", wdir, "--exit-with-parent"]
        env = dict(os.environ)
        topo_env = (spec.payload or {}).get("conf", {}).get(cfg.TOPOLOGY_ENVIRONMENT) or {}
        env.update({str(k): str(v) for k, v in topo_env.items()})
        log_path = self.log_path(tid, port)
        now = self.clock()
        proc = self.spawn(cmd, log_path, env)
        self.procs[port] = _Proc(spec, proc, now, log_path, wdir)
        self.policy.on_launch(spec.key, now, spec.version)
        log.info("supervisor %s: launched worker of topology %s on port %d: pid %d, tasks %s, "
                 "log %s", self.id, tid, port, proc.pid, list(spec.tasks), log_path)
        self._notify("launched", self.procs[port])

    def _notify(self, kind: str, p: _Proc, code: int | None = None) -> None:
        if self.on_worker_event is None:
            return
        try:
            self.on_worker_event(WorkerEvent(kind, p.spec.topology_id, p.spec.port, p.proc.pid,
                                             p.log_path, code, tuple(p.spec.tasks)))
        except Exception:  # an observer's bug must not stop the supervisor
            log.exception("supervisor %s: worker event observer failed", self.id)

    def kill(self, inst: KillWorker) -> None:
        """Stop the worker on ``inst.port`` by pid: SIGTERM, SIGKILL after the grace period."""
        p = self.procs.get(inst.port)
        if p is None or p.proc.pid != inst.pid:
            return
        log.info("supervisor %s: stopping worker of topology %s on port %d (pid %d): %s",
                 self.id, inst.topology_id, inst.port, inst.pid, inst.reason)
        code = self._terminate([p.proc])[0]
        del self.procs[inst.port]
        self._exited(p)
        self._notify("stopped", p, code)
        if inst.failed:
            d = self.policy.on_exit(p.spec.key, self.clock(), code)
            log.warning("supervisor %s: %s (pid %d); last lines of %s:\n%s", self.id, d.reason,
                        inst.pid, p.log_path, log_tail(p.log_path))

    def _terminate(self, procs: list) -> list[int | None]:
        """SIGTERM every process, wait up to the grace period, then SIGKILL; returns exit codes."""
        for proc in procs:
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + self.kill_grace
        codes = []
        for proc in procs:
            try:
                codes.append(proc.wait(timeout=max(0.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                log.warning("supervisor %s: worker pid %d ignored SIGTERM for %gs: SIGKILL",
                            self.id, proc.pid, self.kill_grace)
                proc.kill()
                codes.append(proc.wait())
        return codes

    def reap(self) -> None:
        """Collect workers that exited on their own and schedule their restart (with backoff)."""
        for port, p in list(self.procs.items()):
            # Popen.poll waits for this pid only: children we did not launch are never reaped.
            code = p.proc.poll()
            if code is None:
                continue
            del self.procs[port]
            self._exited(p)
            d = self.policy.on_exit(p.spec.key, self.clock(), code)
            log.warning("supervisor %s: %s (pid %d); last lines of %s:\n%s",
                        self.id, d.reason, p.proc.pid, p.log_path, log_tail(p.log_path))
            self._notify("exited", p, code)

    def _clean_local_files(self) -> None:
        """Remove worker dirs and topology dirs nothing here uses any more."""
        keep_workers = {f"{s.topology_id}-{s.port}" for s in self.desired.values()}
        keep_workers |= {f"{p.spec.topology_id}-{port}" for port, p in self.procs.items()}
        keep_topos = {s.topology_id for s in self.desired.values()}
        keep_topos |= {p.spec.topology_id for p in self.procs.values()}
        for name in os.listdir(self.workers_dir):
            if name not in keep_workers:
                shutil.rmtree(os.path.join(self.workers_dir, name), ignore_errors=True)
        for name in os.listdir(self.stormdist):
            if name not in keep_topos and not name.startswith(".tmp-"):
                log.info("supervisor %s: removing local files of topology %s", self.id, name)
                shutil.rmtree(os.path.join(self.stormdist, name), ignore_errors=True)

    # -- shutdown -----------------------------------------------------------------------
    def close_unsafe(self, reason: str) -> None:
        """Stop the loop and every worker this supervisor launched, then unregister."""
        log.info("supervisor %s closing (%s): stopping %d worker(s)", self.id, reason,
                 len(self.procs))
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._hb_thread is not None:
            self._hb_thread.join(timeout=10)
        close_sender = getattr(self.send_heartbeats, "close", None)
        if close_sender is not None:
            close_sender()
        self._terminate([p.proc for p in self.procs.values()])
        self.procs.clear()
        try:
            if self._own_state:
                self.state.close()  # our session's ephemeral node goes with it
            else:
                self.state.unregister_supervisor(self.id)
        except ClusterStateError as e:
            log.warning("supervisor %s: could not unregister: %s", self.id, e)


def _read_json(path: str) -> Any:
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None
