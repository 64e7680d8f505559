"""One topology's workers as processes on this machine, with a fixed assignment and no daemons.

The data plane's test harness and the benchmark's runner: it numbers the
topology's tasks, deals the executors round-robin over ``topology.workers``
worker processes (Storm's even scheduler), writes each worker's directory as a
supervisor would, and starts, observes (``heartbeat.json``), deactivates,
drains and stops them by pid. Without ZooKeeper, Nimbus or supervisors, a
crashed worker stays down. ``squall local`` runs the real daemons instead
(:mod:`squall.deploy.local`).
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..client import config as cfg
from ..client.contract import (EXIT_USER_CODE, TOPOLOGY_FILE, WorkerAssignment, WorkerHeartbeat,
                               WorkerStatus, write_status)
from ..client.curve import topology_keys
from ..client.topology import Topology, assign_task_ids, executors_of, system_topology
from ..client.topology_proto import to_bytes
from ..supervisor.supervisor import worker_environment
from .net import free_ports

log = logging.getLogger("squall.static")

#: The counter in a StaticCluster's topology id (see StaticCluster.__init__).
_RUNS = itertools.count(1)


def even_assignment(topology: Topology, worker_ids: list[str]) -> dict[str, list[int]]:
    """Executors dealt round-robin over workers (so each component spreads across them)."""
    task_ids = assign_task_ids(topology)
    out: dict[str, list[int]] = {w: [] for w in worker_ids}
    for i, (_, tasks) in enumerate(executors_of(topology, task_ids)):
        out[worker_ids[i % len(worker_ids)]].extend(tasks)
    return out


@dataclass
class WorkerProc:
    worker_id: str
    dir: str
    proc: subprocess.Popen
    log_path: str
    exit_code: int | None = None


@dataclass
class RunResult:
    exit_code: int
    heartbeats: dict[str, dict] = field(default_factory=dict)
    crashed: list[str] = field(default_factory=list)


class StaticCluster:
    """Workers of one topology on this machine, as processes.

    Example::

        with StaticCluster("wc", topology, {"topology.workers": 2}) as lc:
            lc.wait_for(lambda hb: lc.total("acked") >= 1000, timeout=30)
    """

    def __init__(self, name: str, topology: Topology, conf: Mapping[str, Any] | None = None,
                 cli_overrides: Mapping[str, Any] | None = None,
                 code_paths: list[str] | None = None, base_dir: str | None = None,
                 stdout: Any = None, host: str = "127.0.0.1",
                 initial_status: WorkerStatus = WorkerStatus.ACTIVE, ipc: bool = True):
        self.name = name
        self.cli_overrides = cfg.normalize(dict(cli_overrides or {}))
        self.conf = cfg.layered(cfg.load_yaml(cfg.find_yaml()), conf, self.cli_overrides)
        self.conf[cfg.TOPOLOGY_NAME] = name
        if cfg.get(self.conf, cfg.STORM_MESSAGING_CURVE):  # as Nimbus does at submit
            self.conf.update(topology_keys())
        self.topology = topology
        self.code_paths = list(code_paths or [])
        self.base_dir = base_dir or tempfile.mkdtemp(prefix=f"squall-local-{name}-")
        self.own_base = base_dir is None
        self.stdout = stdout
        self.host = host
        self.initial_status = WorkerStatus(initial_status)
        #: Workers talk over ipc:// (one host); False: over tcp:// as across hosts.
        self.ipc = ipc
        # Storm's name-counter-timestamp, counted per process as Nimbus counts: two runs of
        # one topology started within a second are two topologies (a Kafka spout tells its
        # own commits from another's by this id).
        self.topology_id = f"{name}-{next(_RUNS)}-{int(time.time())}"
        self.workers: list[WorkerProc] = []
        self.assignment: dict[str, list[int]] = {}

    # -- start -------------------------------------------------------------------
    def start(self) -> "StaticCluster":
        n = int(self.conf[cfg.TOPOLOGY_WORKERS])
        ports = free_ports(n, self.host)
        worker_ids = [f"{self.host}:{p}" for p in ports]
        sys_topo = system_topology(self.topology, self.conf)
        self.assignment = even_assignment(sys_topo, worker_ids)
        topo_dir = os.path.join(self.base_dir, "topology")
        os.makedirs(topo_dir, exist_ok=True)
        with open(os.path.join(topo_dir, TOPOLOGY_FILE), "wb") as fh:
            fh.write(to_bytes(self.topology))
        ipc_dir = tempfile.mkdtemp(prefix="sq-", dir="/tmp") if self.ipc else None
        self._ipc_dir = ipc_dir
        env = worker_environment(self.topology_id, self.conf)
        for w, port in zip(worker_ids, ports):
            wdir = os.path.join(self.base_dir, f"worker-{port}")
            os.makedirs(wdir, exist_ok=True)
            WorkerAssignment(self.topology_id, w, self.host, port, self.assignment, self.conf,
                             ipc_dir, self.cli_overrides, self.code_paths).write(wdir)
            write_status(wdir, self.initial_status)
            log_path = os.path.join(wdir, "worker.log")
            logf = open(log_path, "ab")
            proc = subprocess.Popen(
                [sys.executable, "-m", "squall.worker", "--topology-dir", topo_dir,
                 "--worker-dir", wdir, "--exit-with-parent"],
                stdout=self.stdout, stderr=logf, env=env, start_new_session=True)
            logf.close()
            self.workers.append(WorkerProc(w, wdir, proc, log_path))
        return self

    def __enter__(self) -> "StaticCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop(drain_secs=0)

    # -- observe -------------------------------------------------------------------
    def heartbeats(self) -> dict[str, dict]:
        """worker id -> its latest heartbeat.json (the contract's WorkerHeartbeat, as JSON)."""
        out = {}
        for w in self.workers:
            hb = WorkerHeartbeat.read(w.dir)
            if hb is not None:
                out[w.worker_id] = hb.to_json()
        return out

    def task_stats(self, component: str | None = None) -> list[dict]:
        """Every task's stats from the latest heartbeats, optionally of one component."""
        out = []
        for hb in self.heartbeats().values():
            for s in hb.get("tasks", {}).values():
                if component is None or s["component"] == component:
                    out.append(s)
        return out

    def total(self, key: str, component: str | None = None, kind: str = "spout") -> int:
        """Sum of a counter (``acked``, ``failed``, ``pending``...) over spout tasks, or one component."""
        if component is None:
            spouts = {c.id for c in self.topology.spouts()}
            return sum(s.get(key, 0) for s in self.task_stats() if s["component"] in spouts)
        return sum(s.get(key, 0) for s in self.task_stats(component))

    def wait_for(self, predicate: Callable[[], bool], timeout: float,
                 interval: float = 0.1, what: str = "condition") -> None:
        """Poll ``predicate`` until true; raise TimeoutError (with worker logs) after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            crashed = self.crashed()
            if crashed:
                raise RuntimeError(f"worker(s) exited while waiting for {what}:\n" +
                                   "\n".join(self.describe_exit(w) for w in crashed))
            time.sleep(interval)
        raise TimeoutError(f"timed out after {timeout}s waiting for {what}")

    def crashed(self) -> list[WorkerProc]:
        out = []
        for w in self.workers:
            if w.exit_code is None:
                w.exit_code = w.proc.poll()
            if w.exit_code is not None:
                out.append(w)
        return out

    def log_tail(self, w: WorkerProc, lines: int = 25) -> str:
        try:
            with open(w.log_path, errors="replace") as fh:
                return "".join(fh.readlines()[-lines:])
        except OSError:
            return ""

    def describe_exit(self, w: WorkerProc) -> str:
        why = {EXIT_USER_CODE: "user code raised"}.get(w.exit_code or 0, "exited")
        return (f"worker {w.worker_id} (pid {w.proc.pid}) {why}: exit code {w.exit_code}; "
                f"last lines of {w.log_path}:\n{self.log_tail(w)}")

    # -- control -------------------------------------------------------------------
    def set_status(self, status: str | WorkerStatus) -> None:
        """ACTIVE, INACTIVE or KILLED for every worker (spouts follow within ~0.2 s)."""
        for w in self.workers:
            write_status(w.dir, WorkerStatus(status))

    def drain(self, timeout: float) -> bool:
        """Deactivate spouts and wait until no spout task has pending trees."""
        self.set_status(WorkerStatus.INACTIVE)
        since = time.time()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hbs = self.heartbeats()
            fresh = [hb for hb in hbs.values() if hb.get("time", 0) > since + 0.05]
            if len(fresh) == len([w for w in self.workers if w.proc.poll() is None]):
                if self.total("pending") == 0:
                    return True
            if self.crashed():
                return False
            time.sleep(0.1)
        return False

    def _quiesce(self) -> None:
        """After a drain, let tick-driven bolts fire once more so they flush what they hold."""
        ticks = [c.conf.get(cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS) for c in self.topology.components.values()]
        ticks.append(self.conf.get(cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS))
        longest = max((float(t) for t in ticks if t), default=0.0)
        if longest:
            time.sleep(min(longest, 10.0) + 0.3)

    def stop(self, drain_secs: float = 0.0, grace: float = 10.0) -> RunResult:
        """Drain (optional), then SIGTERM every worker by pid; SIGKILL after ``grace``."""
        if drain_secs > 0 and not self.crashed():
            if self.drain(drain_secs):
                self._quiesce()
        for w in self.workers:
            if w.proc.poll() is None:
                try:
                    w.proc.send_signal(signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for w in self.workers:
            try:
                w.proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.warning("worker %s (pid %d) did not stop in %.0fs: killing it",
                            w.worker_id, w.proc.pid, grace)
                w.proc.kill()
                w.proc.wait()
        result = RunResult(0, self.heartbeats())
        for w in self.workers:
            if w.exit_code is None:
                w.exit_code = w.proc.returncode
        result.crashed = [w.worker_id for w in self.workers
                          if w.exit_code not in (0, -signal.SIGTERM, None)]
        result.exit_code = 1 if result.crashed else 0
        shutil.rmtree(getattr(self, "_ipc_dir", None) or "", ignore_errors=True)
        return result

    def cleanup(self) -> None:
        if self.own_base:
            shutil.rmtree(self.base_dir, ignore_errors=True)
