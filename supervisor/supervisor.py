"""The Supervisor daemon: runs the worker processes Nimbus assigned to this node's slots.

Python counterpart of Storm's ``Supervisor`` (its ``ReadClusterState`` sync and
``Slot`` state machines, collapsed into one loop as Heron's executor does).
It registers an ephemeral ``/supervisors/<id>`` node with its slots
(:class:`~squall.client.contract.SupervisorInfo`), then follows ``/assignments``
(:class:`~squall.client.contract.Assignment`) through watches (which only wake the loop)
and a full re-read every ``supervisor.monitor.frequency.secs``: it fetches each assigned
topology and writes every worker's directory (:mod:`.local_files`, with the contract's
files, as :class:`~squall.deploy.static.StaticCluster` does), and applies
:func:`~squall.supervisor.reconcile.plan` to its own process table. Between
full syncs a short local tick reaps dead workers and relaunches them once the
:class:`~squall.supervisor.reconcile.RestartPolicy` backoff allows. Worker
liveness stays on this host (``heartbeat.json``); nothing is written to
ZooKeeper per heartbeat. Every ``supervisor.heartbeat.frequency.secs`` the
:mod:`.outbox` sends Nimbus the running workers' heartbeats and their errors
(default: gRPC; failures logged, never fatal). The workers of a topology that ships Python
requirements are launched once its virtualenv is ready, with its interpreter
(:mod:`.venvs` builds it on another thread; a failed build is the topology's error).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from hashlib import blake2b
from typing import Any, Callable, Mapping

from ..client import config as cfg
from ..client import log_levels, profiling
from ..client.cluster_state import ClusterState, ClusterStateError, Paths, WatchEvent
from ..client.contract import (HEARTBEAT_FILE, Assignment, ContractError, SupervisorInfo,
                               SupervisorMark, WorkerAssignment, WorkerHeartbeat, WorkerStatus,
                               process_start_time)
from ..client.daemon import Daemon
from .local_files import FetchTopology, LocalFiles
from .metrics import SupervisorMetrics
from .outbox import Outbox
from .reconcile import (KillWorker, LaunchWorker, RestartPolicy, RunningWorker, WorkerSpec,
                        plan)
from .venvs import PythonEnvs

log = logging.getLogger("squall.supervisor")

Spawn = Callable[[list, str, dict], Any]


@dataclass(frozen=True)
class WorkerEvent:
    """A worker launched (``exit_code`` None) or gone (its exit code), for observers such as
    ``squall local``, which shows pids and stops on a crash."""

    #: "launched", "adopted" (taken back after a restart), "exited" (on its own) or
    #: "stopped" (by this supervisor)
    kind: str
    topology_id: str
    port: int
    pid: int
    log_path: str
    exit_code: int | None = None
    tasks: tuple[int, ...] = ()


def spawn_worker(cmd: list, env: dict, stdout: Any, stderr: Any) -> subprocess.Popen:
    """Start a worker in a session of its own: a Ctrl-C meant for the supervisor's terminal
    must not hit workers directly (the supervisor stops them, or they outlive it to be taken
    back, worker/supervision.py), and its process group is what :func:`kill_leftovers` ends."""
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, env=env, start_new_session=True)
    proc.own_group = True  # type: ignore[attr-defined]  # its pid is its process group's id
    return proc


def default_spawn(cmd: list, log_path: str, env: dict) -> subprocess.Popen:
    """Start a worker with stdout and stderr appended to ``log_path``."""
    with open(log_path, "ab") as logf:
        return spawn_worker(cmd, env, logf, subprocess.STDOUT)


class AdoptedProcess:
    """A worker an earlier process of this supervisor launched, taken back after a restart.

    It is not this process's child: it cannot be waited for and its exit code is unknown
    (its new parent reaps it). It is followed by pid and start time, so a later process
    given the same pid is never taken for it or signalled. Popen's interface, as far as
    the supervisor uses it.
    """

    def __init__(self, pid: int, start_time: str):
        self.pid = pid
        self.start_time = start_time
        self.returncode: int | None = None  # never known
        #: It has exited (poll() found it gone).
        self.gone = False
        try:
            self.own_group = os.getpgid(pid) == pid  # launched by spawn_worker
        except ProcessLookupError:
            self.own_group, self.gone = False, True

    def poll(self) -> None:
        """Always None (the exit code is unknown); sets :attr:`gone` once it has exited."""
        if not self.gone and process_start_time(self.pid) != self.start_time:
            self.gone = True
        return None

    def wait(self, timeout: float | None = None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not exited(self):
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout or 0.0)
            time.sleep(0.02)
        return None

    def send_signal(self, sig: int) -> None:
        if not exited(self):
            os.kill(self.pid, sig)

    def kill(self) -> None:
        try:
            self.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass


def exited(proc: Any) -> bool:
    """The process has exited (a child reaped by poll(), or an adopted one gone)."""
    return proc.poll() is not None or getattr(proc, "gone", False)


def worker_process(worker_dir: str) -> tuple[int, str] | None:
    """(pid, start time) of the worker process running in ``worker_dir``: the pid its
    heartbeat names, if that process is a Squall worker of this very directory (a later
    process given the pid is not); None when none runs."""
    hb = WorkerHeartbeat.read(worker_dir)
    if hb is None:
        return None
    start = process_start_time(hb.pid)
    try:
        with open(f"/proc/{hb.pid}/cmdline", "rb") as fh:
            args = fh.read().split(b"\0")
        i = args.index(b"--worker-dir")
        ours = os.path.realpath(os.fsdecode(args[i + 1])) == os.path.realpath(worker_dir)
    except (OSError, ValueError, IndexError):
        return None
    if start is None or b"squall.worker" not in args or not ours \
            or process_start_time(hb.pid) != start:
        return None
    return hb.pid, start


def kill_leftovers(proc: subprocess.Popen) -> None:
    """After a worker exited: SIGKILL what is left of its process group (shell components'
    children, a Spark JVM) so nothing of a dead worker runs on. Only for workers started in
    a group of their own (spawn_worker): no other process is in that group."""
    if getattr(proc, "own_group", False) and exited(proc):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


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

    # What the outbox reads of a worker (supervisor/outbox.py's Worker).
    @property
    def topology_id(self) -> str:
        return self.spec.topology_id

    @property
    def port(self) -> int:
        return self.spec.port

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def tasks(self) -> tuple[int, ...]:
        return self.spec.tasks


def worker_spec(a: WorkerAssignment) -> WorkerSpec:
    """The spec of the worker ``a`` describes: restarted when its own tasks, conf or code
    change; a new peer map travels in assignment.json, which the worker follows (as it
    does its status) without a restart."""
    return WorkerSpec.of(a.topology_id, a.port, a.tasks, payload=a,
                         version_data={k: v for k, v in a.to_json().items() if k != "workers"})


def worker_hash_seed(topology_id: str, conf: Mapping[str, Any]) -> str:
    """PYTHONHASHSEED for a topology's workers: one value for all of them and every
    restart, so a bolt iterating a set of strings emits in the same order when a message
    is replayed (exactly-once acker checkpointing names tuples by what was emitted before
    them, worker/lineage.py). Keyed by the topology's secret when it has one, so that
    input crafted to collide in its dicts cannot be made outside (the seed is 32 bits:
    PYTHONHASHSEED's range). It replaces the supervisor's own, so every node agrees; one
    in ``topology.environment`` wins (a resubmitted topology has a new id and secret, so
    a seed that must outlive resubmissions goes there)."""
    secret = str(conf.get(cfg.TOPOLOGY_CURVE_SECRET_KEY) or "").encode()
    digest = blake2b(topology_id.encode(), key=secret[:64], digest_size=4).digest()
    return str(int.from_bytes(digest, "little"))


def worker_environment(topology_id: str, conf: Mapping[str, Any]) -> dict[str, str]:
    """A worker process's environment: this process's, the topology's hash seed, then
    ``topology.environment`` over both."""
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = worker_hash_seed(topology_id, conf)
    env.update({str(k): str(v) for k, v in (conf.get(cfg.TOPOLOGY_ENVIRONMENT) or {}).items()})
    return env


def terminate(procs: list, grace: float,
              on_sigkill: Callable[[Any], None] | None = None) -> list[int | None]:
    """SIGTERM every process, wait up to ``grace`` seconds for all, then SIGKILL those left
    (``on_sigkill(proc)`` for each) and what is left of every process group; returns the
    exit codes (None: unknown, a worker taken back)."""
    for proc in procs:
        if not exited(proc):
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + grace
    codes = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if on_sigkill is not None:
                on_sigkill(proc)
            proc.kill()
            codes.append(proc.wait())
        kill_leftovers(proc)
    return codes


def kill_workers(conf: Mapping[str, Any]) -> list[str]:
    """Stop every worker running under this host's ``storm.local.dir`` (Storm's ``storm
    kill_workers``), with or without its supervisor: SIGTERM, SIGKILL after
    ``supervisor.worker.shutdown.sleep.secs``. Returns a line per worker stopped."""
    conf = cfg.layered(conf)
    files = LocalFiles(conf[cfg.STORM_LOCAL_DIR], None)
    found = [(tid, port, AdoptedProcess(*pw)) for tid, port, wdir in files.worker_dirs()
             if (pw := worker_process(wdir)) is not None]
    killed: set[int] = set()
    terminate([proc for _, _, proc in found],
              float(conf[cfg.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS]),
              lambda proc: killed.add(proc.pid))
    return [f"worker of topology {tid} on port {port} (pid {proc.pid}): "
            f"{'killed (it ignored SIGTERM)' if proc.pid in killed else 'stopped'}"
            for tid, port, proc in found]


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
        #: The local directory tree: id, topology cache, worker dirs, logs.
        self.files = LocalFiles(self.conf[cfg.STORM_LOCAL_DIR], fetch_topology,
                                on_fetch_failed=self._fetch_failed)
        self.local_dir = self.files.local_dir
        self.id = self.files.load_id()
        self._own_state = cluster_state is None
        if cluster_state is None:
            from ..client.zk_cluster_state import KazooClusterState
            cluster_state = KazooClusterState(self.conf)
        self.state = cluster_state
        self.spawn = spawn or default_spawn
        self.clock = clock
        self.policy = policy or RestartPolicy()
        self.monitor_secs = float(self.conf[cfg.SUPERVISOR_MONITOR_FREQUENCY_SECS])
        self.hb_timeout = float(self.conf[cfg.SUPERVISOR_WORKER_TIMEOUT_SECS])
        self.start_timeout = float(self.conf[cfg.SUPERVISOR_WORKER_START_TIMEOUT_SECS])
        self.kill_grace = float(self.conf[cfg.SUPERVISOR_WORKER_SHUTDOWN_SLEEP_SECS])
        #: > 0: workers outlive this process that long, for a restarted one to take them
        #: back (worker/supervision.py); 0: they exit with it.
        self.adopt_secs = max(0.0, float(self.conf[cfg.SUPERVISOR_WORKER_ADOPT_SECS]))
        #: close() stops the workers (False: leaves them to be taken back, adopt_secs > 0).
        self.stop_workers_on_close = True
        self.heartbeat_secs = float(self.conf[cfg.SUPERVISOR_HEARTBEAT_FREQUENCY_SECS])
        #: Worker heartbeats and errors to Nimbus; ``send_heartbeats`` default: gRPC.
        #: Prometheus: this supervisor's metrics and its workers' (supervisor/metrics.py).
        self.metrics = SupervisorMetrics(
            self.id, self.host, lambda: list(self.procs.values()), lambda: self.hb_timeout,
            lambda: [(spec.topology_id, port) for port, spec in list(self.desired.items())])
        self.metrics.workers.set_function(lambda: len(self.procs))
        self._metrics_server: Any = None
        self.outbox = Outbox(self.id, self.host, send=send_heartbeats,
                             make_sender=self._grpc_sender,
                             on_send_error=self.metrics.send_errors.inc)
        self.on_worker_event = on_worker_event
        #: Topologies' own Python environments (topology.python.requirements), built off
        #: this loop; a finished build wakes it.
        self.envs = PythonEnvs(self.conf, on_failed=self._env_failed,
                               on_change=lambda: self._wake.set())
        self._hb_thread: threading.Thread | None = None
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

    def _grpc_sender(self) -> Callable[[Any], None]:
        from .fetch import grpc_heartbeat_sender
        # A report older than its period is stale anyway: do not wait longer than two periods
        # for one (a partitioned Nimbus would otherwise hold the sender 5 s per attempt).
        period = float(cfg.get(self.conf, cfg.SUPERVISOR_HEARTBEAT_FREQUENCY_SECS))
        return grpc_heartbeat_sender(self.conf, timeout=max(1.0, min(5.0, 2 * period)))

    # -- identity and registration ----------------------------------------------------
    def used_slots(self) -> list[int]:
        return sorted(self.procs)

    def register(self) -> None:
        """Write the ephemeral supervisor node (again only when the used slots changed)."""
        used = self.used_slots()
        now = self.clock()
        self.state.register_supervisor(self.id, SupervisorInfo(
            self.host, tuple(self.ports), tuple(used), now - self._started_at, now).to_json())
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
        """Take back the workers an earlier run left, register, and start the sync loop and
        the heartbeat thread."""
        self.adopt()
        self.register()
        self._dirty.set()
        self._thread = threading.Thread(target=self._run, name=f"supervisor-{self.id[:8]}",
                                        daemon=True)
        self._thread.start()
        self._hb_thread = threading.Thread(target=self._heartbeat_loop,
                                           name=f"supervisor-hb-{self.id[:8]}", daemon=True)
        self._hb_thread.start()
        port = self.conf.get(cfg.SUPERVISOR_METRICS_PORT)
        if port is not None:
            from ..client.web import metrics_server
            self._metrics_server = metrics_server(self.metrics.registry, self.conf, port,
                                                  f"supervisor {self.id[:8]} metrics")
            log.info("supervisor %s: Prometheus metrics on %s/metrics", self.id,
                     self._metrics_server.url)
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

    # -- worker heartbeats to Nimbus (supervisor/outbox.py) --------------------------------
    def report_heartbeats(self) -> None:
        """Send one report of the running workers to Nimbus (failures logged, never raised)."""
        self.outbox.report(list(self.procs.values()))

    def _heartbeat_loop(self) -> None:
        while not self._stopping.wait(self.heartbeat_secs):
            self.report_heartbeats()

    def sync(self, full: bool = True) -> None:
        """One round: reap, (full: re-read ZooKeeper and write worker dirs), then apply the plan."""
        self.reap()
        if full:
            try:
                t0 = time.perf_counter()
                self.desired = self.read_assignments()
                self.metrics.zookeeper("read_assignments", time.perf_counter() - t0)
            except ClusterStateError as e:
                # Keep the workers we have: ZooKeeper being away says nothing about them.
                log.warning("supervisor %s: cannot read assignments (%s); keeping %d worker(s)",
                            self.id, e, len(self.procs))
        now = self.clock()
        self.policy.retain(s.key for s in self.desired.values())
        for inst in plan(self.desired, self.running(), now, self.hb_timeout, self.policy,
                         start_timeout=self.start_timeout, held=self.envs_not_ready()):
            if isinstance(inst, KillWorker):
                self.kill(inst)
            elif isinstance(inst, LaunchWorker):
                self.launch(inst.spec)
            else:
                raise TypeError(inst)
        if full:
            self.envs.collect([s.topology_id for s in self.desired.values()] +
                              [p.spec.topology_id for p in self.procs.values()])
            self.files.clean([s.key for s in self.desired.values()] +
                             [p.spec.key for p in self.procs.values()],
                             [s.topology_id for s in self.desired.values()] +
                             [p.spec.topology_id for p in self.procs.values()],
                             60 * float(cfg.get(self.conf, cfg.LOGVIEWER_CLEANUP_AGE_MINS)))
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
            try:
                assignment = Assignment.from_json(found[0])
            except ContractError as e:
                log.error("supervisor %s: topology %s: %s; skipping it", self.id, tid, e)
                continue
            mine = assignment.workers_of(self.id, self.host, self.ports)
            if not mine:
                continue
            storm = self.state.get_storm(tid, watch=self._watch(paths.storm(tid))) or {}
            levels = self.state.get_log_config(tid, watch=self._watch(paths.log_config(tid)))
            # squall profile / squall debug reach the workers the way log levels do.
            requests = self.state.get_profile_requests(
                tid, watch=self._watch(paths.profiler_config(tid)))
            debug = self.state.get_debug_options(tid, watch=self._watch(paths.debug_options(tid)))
            topo_dir = self.files.ensure_topology(tid)
            if topo_dir is None:
                continue
            conf = self.files.worker_conf(topo_dir, self.conf, storm.get("name"))
            workers = {w: sorted(ts) for w, ts in assignment.workers.items()}
            status = WorkerStatus.for_topology(storm.get("status", ""))
            for port in mine:
                wid = f"{self.host}:{port}"
                a = WorkerAssignment(tid, wid, self.host, port, workers, conf,
                                     code_paths=self.files.code_paths(topo_dir),
                                     executors=assignment.executors_on(wid))
                wdir = self.files.write_worker_dir(a, status)
                log_levels.write_config(wdir, levels)
                profiling.write_worker_files(
                    wdir, [r for r in requests if r.get("worker") == wid], debug)
                out[port] = worker_spec(a)
        return out

    def envs_not_ready(self) -> set[str]:
        """The assigned topologies with requirements whose environment is not ready: their
        workers wait (the first ask starts the build, on another thread)."""
        confs = {s.topology_id: getattr(s.payload, "conf", None) for s in self.desired.values()}
        return {tid for tid, conf in confs.items() if PythonEnvs.wanted(conf) and
                self.envs.python(tid, self.files.topology_dir(tid), conf) is None}

    def _env_failed(self, tid: str, failures: int, why: str, retry_in: float) -> None:
        """A failed build is the topology's error (squall list, the UI), as a failed fetch is."""
        self.outbox.supervisor_error(
            tid, f"supervisor {self.id} on {self.host} cannot install the topology's Python "
                 f"requirements: {why} (tried {failures} time(s); again in {retry_in:.0f} s, "
                 "or at once for a resubmission)")

    def _fetch_failed(self, tid: str, count: int, why: str) -> None:
        """Each failed fetch of a topology's package goes to Nimbus (squall list shows it as
        the topology's last error)."""
        self.outbox.supervisor_error(tid, f"supervisor {self.id} on {self.host} cannot fetch "
                                          f"the topology's package ({why}); tried {count} "
                                          "time(s), trying again later")

    # -- processes ----------------------------------------------------------------------
    def running(self) -> dict[int, RunningWorker]:
        """The process table as :class:`RunningWorker` s, with their latest heartbeat."""
        out = {}
        for port, p in self.procs.items():
            # A heartbeat left by an earlier process on that port is not this one's.
            hb = WorkerHeartbeat.read(p.worker_dir, p.proc.pid)
            out[port] = RunningWorker(
                p.spec.topology_id, port, p.proc.pid, p.spec.version, p.started_at,
                hb.time if hb else None, hb.state.value if hb else "starting")
        return out

    def adopt(self) -> None:
        """Take back the workers an earlier process of this supervisor left running on its
        slots (Storm's supervisor does the same after a restart): each is followed by pid as
        if launched now, and judged by the first sync like any other (kept if still assigned
        with the same version and heartbeating, else stopped). Until a sync reads the
        assignments they count as desired, so a ZooKeeper that is away kills none."""
        for tid, port, wdir in self.files.worker_dirs():
            found = worker_process(wdir) if port in self.ports else None
            if found is None or port in self.procs:
                continue
            try:
                spec = worker_spec(WorkerAssignment.read(wdir))
            except (OSError, ContractError) as e:
                log.warning("supervisor %s: worker pid %d in %s runs on, but its assignment "
                            "is unreadable (%s); stopping it", self.id, found[0], wdir, e)
                self._terminate([AdoptedProcess(*found)])
                continue
            SupervisorMark.of_this_process(self.id).write(wdir)
            now = self.clock()
            self.procs[port] = _Proc(spec, AdoptedProcess(*found), now,
                                     self.files.log_path(tid, port), wdir)
            self.desired[port] = spec
            self.policy.on_launch(spec.key, now, spec.version)
            log.info("supervisor %s: took back worker of topology %s on port %d: pid %d, "
                     "tasks %s", self.id, tid, port, found[0], list(spec.tasks))
            self._notify("adopted", self.procs[port])

    def launch(self, spec: WorkerSpec) -> None:
        tid, port = spec.key
        wdir = self.files.worker_dir(tid, port)
        try:
            os.unlink(os.path.join(wdir, HEARTBEAT_FILE))
        except FileNotFoundError:
            pass
        SupervisorMark.of_this_process(self.id).write(wdir)
        follow = (["--adopt-secs", f"{self.adopt_secs:g}"] if self.adopt_secs > 0
                  else ["--exit-with-parent"])
        # The topology's own environment when it has requirements (it is ready: plan()
        # holds its launches until then), else the cluster's interpreter.
        python = self.envs.python_of(tid) or sys.executable
        cmd = [python, "-m", "squall.worker", "--topology-dir",
               self.files.topology_dir(tid), "--worker-dir", wdir, *follow]
        env = worker_environment(tid, spec.payload.conf)
        if python != sys.executable:
            # As an activated virtualenv: shell components' `python` and console scripts
            # are the environment's.
            env_dir = os.path.dirname(os.path.dirname(python))
            env["VIRTUAL_ENV"] = env_dir
            env["PATH"] = os.pathsep.join([os.path.join(env_dir, "bin"),
                                           env.get("PATH", os.defpath)])
        log_path = self.files.log_path(tid, port)
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
        self.outbox.worker_exited(p)
        self._notify("stopped", p, code)
        if inst.failed:
            d = self.policy.on_exit(p.spec.key, self.clock(), code)
            self.outbox.worker_failed(inst.topology_id, inst.port, d.reason)
            self.metrics.restarted(inst.topology_id)
            log.warning("supervisor %s: %s (pid %d); last lines of %s:\n%s", self.id, d.reason,
                        inst.pid, p.log_path, log_tail(p.log_path))

    def _terminate(self, procs: list) -> list[int | None]:
        """:func:`terminate` with this supervisor's grace period; a SIGKILL is logged."""
        return terminate(procs, self.kill_grace, lambda proc: log.warning(
            "supervisor %s: worker pid %d ignored SIGTERM for %gs: SIGKILL", self.id, proc.pid,
            self.kill_grace))

    def reap(self) -> None:
        """Collect workers that exited on their own and schedule their restart (with backoff)."""
        for port, p in list(self.procs.items()):
            # Popen.poll waits for this pid only: children we did not launch are never reaped.
            if not exited(p.proc):
                continue
            code = p.proc.poll()  # None for a worker taken back: its exit code is unknown
            kill_leftovers(p.proc)
            del self.procs[port]
            self.outbox.worker_exited(p)
            d = self.policy.on_exit(p.spec.key, self.clock(), code)
            self.outbox.worker_failed(p.spec.topology_id, port, d.reason)
            self.metrics.restarted(p.spec.topology_id)
            log.warning("supervisor %s: %s (pid %d); last lines of %s:\n%s",
                        self.id, d.reason, p.proc.pid, p.log_path, log_tail(p.log_path))
            self._notify("exited", p, code)

    # -- shutdown -----------------------------------------------------------------------
    def close_unsafe(self, reason: str) -> None:
        """Stop the loop and, unless they are left to be taken back
        (``stop_workers_on_close``), every worker this supervisor runs; then unregister."""
        leave = not self.stop_workers_on_close and self.adopt_secs > 0
        if leave:
            log.info("supervisor %s closing (%s): its %d worker(s) run on for %g s, for a "
                     "restarted supervisor to take them back", self.id, reason,
                     len(self.procs), self.adopt_secs)
        else:
            log.info("supervisor %s closing (%s): stopping %d worker(s)", self.id, reason,
                     len(self.procs))
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if self._hb_thread is not None:
            self._hb_thread.join(timeout=10)
        self.envs.close()
        self.outbox.close()
        if self._metrics_server is not None:
            self._metrics_server.stop()
        if not leave:
            self._terminate([p.proc for p in self.procs.values()])
        self.procs.clear()
        try:
            if self._own_state:
                self.state.close()  # our session's ephemeral node goes with it
            else:
                self.state.unregister_supervisor(self.id)
        except ClusterStateError as e:
            log.warning("supervisor %s: could not unregister: %s", self.id, e)

