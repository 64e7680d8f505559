"""The Worker process: runs the executors of its tasks and reports through local files.

Storm's worker in one class. It reads its assignment and the topology from
disk, starts one thread per executor plus the receive thread, and then its
main thread owns the slow loop: write the heartbeat file (stats, queue
depths, recent errors), follow the ``status`` file (ACTIVE / INACTIVE /
KILLED), broadcast backpressure changes to the other workers, and exit when
told to or when user code crashed.

Files in the worker directory, as :mod:`squall.client.contract` defines them:

* ``assignment.json`` -- :class:`~squall.client.contract.WorkerAssignment` (read, and
  followed when other workers' tasks move).
* ``status`` -- :class:`~squall.client.contract.WorkerStatus` (read, optional).
* ``heartbeat.json`` -- :class:`~squall.client.contract.WorkerHeartbeat`, written every
  ``topology.stats.freq.secs`` (atomic rename).
* ``profiler.json``, ``debug.json`` -- ``squall profile`` requests and ``squall debug``
  options (client/profiling.py; read by mtime): dumps and the events log go into the
  directory of the worker's log (:mod:`.profiler`).

Exit codes (the contract's): 0 stopped on request, ``EXIT_USER_CODE`` user code raised,
``EXIT_PARENT_GONE`` the launching process died, ``EXIT_STARTUP_FAILED`` startup failure.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import sys
import threading
import time
from time import perf_counter
from typing import Any

import zmq

from ..client import config as cfg
from ..client import log_levels
from ..client import profiling as prof
from ..client.contract import (ASSIGNMENT_FILE, EXIT_PARENT_GONE, EXIT_STARTUP_FAILED,
                               EXIT_USER_CODE, STATUS_FILE, TOPOLOGY_FILE, ContractError,
                               HeartbeatState, WorkerAssignment, WorkerHeartbeat, WorkerStatus,
                               read_status, resources_dir)
from ..client.topology import executors_of, system_topology
from ..client.tuple import TM_REPORT_STREAM_ID, TOPOLOGY_MASTER_ID
from ..client.topology_proto import from_bytes
from .executor import Executor, executor_for
from .frame import Codec
from .logfile import bound_log, stderr_dir
from .loop import EventLoop
from .profiler import EventLog, Profiler
from .state import WorkerState
from .supervision import SupervisorWatch
from .topology_master import upstream_spouts

log = logging.getLogger("squall.worker")

#: Seconds between two load reports to peers (Storm refreshes its load mapping each second;
#: a co-tenant's burst needs a quicker answer).
LOAD_SECS = 0.2
#: Queued work counted as fully loaded, in seconds: a queue's length times its executor's
#: recent seconds a tuple (the queue's delay, whatever the bolt's speed) ...
LOAD_FULL_SECS = 0.01
#: ... or, for executors that have not timed any tuple yet (spouts, ackers), in items.
LOAD_FULL = 1000


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


class Worker:
    """One worker process of one topology.

    Example (what ``python -m squall.worker`` does)::

        w = Worker(topology_dir, worker_dir)
        w.start()
        sys.exit(w.run())
    """

    def __init__(self, topology_dir: str, worker_dir: str,
                 supervision: SupervisorWatch | None = None, log_dir: str | None = None):
        self.topology_dir = topology_dir
        self.worker_dir = worker_dir
        #: Where its dumps and events log go: beside its log (the logviewer serves them).
        self.log_dir = log_dir or worker_dir
        #: Whether it still has a supervisor (None: nobody watched, as in tests).
        self.supervision = supervision
        self.assignment = WorkerAssignment.read(worker_dir)
        for p in reversed(self.assignment.code_paths):
            if p not in sys.path:
                sys.path.insert(0, p)
        with open(os.path.join(topology_dir, TOPOLOGY_FILE), "rb") as fh:
            user_topology = from_bytes(fh.read())
        conf = cfg.layered(self.assignment.conf)
        self.assignment.conf = conf
        self.ws = WorkerState(system_topology(user_topology, conf), self.assignment)
        self.ws.code_dir = resources_dir(topology_dir, self.assignment.code_paths)
        self.ws.pid_dir = os.path.join(worker_dir, "pids")
        self._wake = threading.Event()
        self.ws.bp.on_change = lambda congested: self._wake.set()
        self.ws.on_fatal = self._wake.set
        self.ws.on_hello = self._wake.set
        self._hello_at = 0.0
        self._load_at = 0.0
        self._own_load: dict[int, float] = {}
        #: Executor name -> (busy seconds, tuples executed, seconds a tuple) at the last look.
        self._timing: dict[str, tuple[float, int, float]] = {}
        self.executors: list[Executor] = []
        #: Executors whose stall was logged (once each, until they move again).
        self._stall_logged: set[str] = set()
        self.loop: EventLoop | None = None
        self._stop_reason: str | None = None
        self._status_mtime = 0.0
        #: Dynamic log levels (squall set_log_level): the file's mtime, its config, who applies.
        self._log_mtime = 0.0
        self._log_config: dict = {}
        self._log_levels = log_levels.Applier()
        #: squall profile and squall debug (client/profiling.py), followed like log levels.
        self.profiler = Profiler(worker_dir, self.log_dir, self.assignment.topology_id,
                                 self.assignment.port, self.assignment.worker_id,
                                 self._executor_lines)
        self._debug_mtime = 0.0
        self._debug_pct: dict[str, float] = {}
        self.events: EventLog | None = None
        self._assignment_mtime = self._mtime(ASSIGNMENT_FILE)
        self._peers: dict[str, zmq.Socket] = {}
        self._codec = Codec()
        self._bp_sent_at = 0.0
        self._bp_last: Any = None
        self._bp_via_master = bool(conf.get(cfg.TOPOLOGY_BACKPRESSURE_VIA_MASTER)) and \
            TOPOLOGY_MASTER_ID in self.ws.component_tasks
        if self._bp_via_master:
            self.ws.bp.pause_on_local = False

    # -- lifecycle ------------------------------------------------------------
    def start(self) -> None:
        ws = self.ws
        mine = set(self.assignment.tasks)
        self.loop = EventLoop(ws)
        for component, local in self._executor_tasks():
            if local:
                ex = executor_for(ws, component, local, self.loop)
                self.executors.append(ex)
                if not ex.threaded:
                    self.loop.executors.append(ex)
        if self._bp_via_master:
            self._hold_upstream_on_congestion()
        self._read_status()
        for w in ws.live_workers:  # connect early: the first backpressure signal must not wait
            if w != ws.worker_id:
                self._peer(w)
        # Tuples and acks are not cyclic garbage: collect rarely, and never scan start-up state.
        gc.collect()
        gc.freeze()
        gc.set_threshold(100_000, 50, 100)
        threaded = [ex for ex in self.executors if ex.threaded]  # before the loop moves any
        self.loop.start()
        for ex in threaded:
            ex.start_thread()
        log.info("worker %s of topology %s started: pid %d, %d executors, tasks %s",
                 ws.worker_id, ws.topology_id, os.getpid(), len(self.executors),
                 sorted(mine))

    def _executor_tasks(self) -> list[tuple[str, list[int]]]:
        """(component, this worker's tasks) of each executor: Nimbus's grouping when given."""
        ws = self.ws
        if self.assignment.executors:
            return [(ws.task_component[g[0]], list(g)) for g in self.assignment.executors]
        mine = set(self.assignment.tasks)
        return [(c, [t for t in tasks if t in mine])
                for c, tasks in executors_of(ws.topology, ws.component_tasks)]

    def request_stop(self, reason: str) -> None:
        """Thread- and signal-safe: ask the main loop to stop."""
        if self._stop_reason is None:
            self._stop_reason = reason
        self._wake.set()

    def run(self) -> int:
        """The main loop; returns the process exit code."""
        freq = float(self.ws.conf.get(cfg.TOPOLOGY_STATS_FREQ_SECS, 1.0))
        next_beat = 0.0
        while True:
            if self.ws.fatal is not None:
                return self._die()
            if self._stop_reason is not None:
                return self._shutdown()
            orphaned = self.supervision.check() if self.supervision is not None else None
            if orphaned is not None:
                log.error("worker %s: %s; exiting", self.ws.worker_id, orphaned)
                self._stop_reason = orphaned
                self._shutdown()
                return EXIT_PARENT_GONE
            self._read_status()
            self._read_assignment()
            if self.loop is not None:
                self.loop.rescue(perf_counter())  # a spout stuck in a call frees the loop
            self._handshake()
            self._broadcast_backpressure()
            self._share_load()
            now = time.monotonic()
            self._follow_profiling()
            if now >= next_beat:
                self._follow_log_levels()
                self.write_heartbeat()
                next_beat = now + freq
            self._wake.wait(0.2 if self.ws.connected else 0.1)
            self._wake.clear()

    def _die(self) -> int:
        component, exc, tb = self.ws.fatal  # type: ignore[misc]
        sys.stderr.write(f"worker {self.ws.worker_id} of topology {self.ws.topology_id}: "
                         f"component {component!r} raised {type(exc).__name__}: {exc}\n{tb}")
        sys.stderr.flush()
        self.write_heartbeat(HeartbeatState.CRASHED)
        return EXIT_USER_CODE

    def _shutdown(self) -> int:
        log.info("worker %s stopping: %s", self.ws.worker_id, self._stop_reason)
        self.profiler.close()
        self.ws.active = False
        for ex in self.executors:
            ex.stop()  # a shared one the loop moves to a thread meanwhile stops at once
        deadline = time.monotonic() + 5.0
        waits = []
        if self.loop is not None:
            self.loop.stop()
            waits.append(("event loop", self.loop.stopped))
        for name, stopped in waits:
            stopped.wait(max(0.0, deadline - time.monotonic()))
        # Threaded executors, counted once the loop stopped moving executors to threads.
        waits += [(ex.name, ex.stopped) for ex in self.executors if ex.threaded]
        for name, stopped in waits:
            stopped.wait(max(0.0, deadline - time.monotonic()))
            if not stopped.is_set():
                log.warning("worker %s: %s did not stop within 5 s (stuck in user code?); "
                            "exiting anyway", self.ws.worker_id, name)
        if self.ws.fatal is not None:
            return self._die()
        self.write_heartbeat(HeartbeatState.STOPPED)
        if self.events is not None:
            self.events.close()
        for s in self._peers.values():
            s.close(0)
        if self.ws.membership is not None:
            self.ws.membership.close()
        return 0

    # -- status, backpressure, heartbeat --------------------------------------------
    def _read_status(self) -> None:
        mtime = self._mtime(STATUS_FILE)
        if mtime == self._status_mtime:
            return
        self._status_mtime = mtime
        status = read_status(self.worker_dir)
        if status is None:
            return
        active = status is WorkerStatus.ACTIVE
        if active != self.ws.active:
            log.info("worker %s: topology %s is now %s", self.ws.worker_id,
                     self.ws.topology_id, status.value)
        self.ws.active = active
        for ex in self.executors:
            ex.queue.wake()

    def _follow_log_levels(self) -> None:
        """Apply logconfig.json (the supervisor copies set_log_level's levels there) and
        restore levels whose timeout passed."""
        mtime = self._mtime(log_levels.LOG_CONFIG_FILE)
        if mtime != self._log_mtime:
            self._log_mtime = mtime
            self._log_config = log_levels.read_config(self.worker_dir) or {}
        changes = self._log_levels.apply(self._log_config, time.time())
        if changes:
            log.warning("worker %s of topology %s: log levels %s", self.ws.worker_id,
                        self.ws.topology_id, ", ".join(changes))

    def _follow_profiling(self) -> None:
        """Start new profiler requests (profiler.json), follow the debug options
        (debug.json) and write the sampled events out: every round, a stat each."""
        try:
            self.profiler.poll()
        except Exception:  # noqa: BLE001 - profiling must never stop the worker
            log.exception("worker %s: profiler requests failed", self.ws.worker_id)
        mtime = self._mtime(prof.DEBUG_FILE)
        if mtime != self._debug_mtime:
            self._debug_mtime = mtime
            self._apply_debug(prof.read_debug(self.worker_dir))
        if self.events is not None:
            self.events.flush()

    def _apply_debug(self, options: dict) -> None:
        """Each executor samples its component's share of emits into the events log."""
        changed = []
        for ex in self.executors:
            pct = prof.sampling_pct(options, ex.component_id)
            if pct > 0 and self.events is None:
                self.events = EventLog(os.path.join(self.log_dir, prof.events_name(
                    self.ws.topology_id, self.assignment.port)))
            ex.set_debug(pct, self.events)
            if self._debug_pct.get(ex.component_id, 0.0) != pct:
                self._debug_pct[ex.component_id] = pct
                changed.append(f"{ex.component_id} {pct:g}%" if pct else
                               f"{ex.component_id} off")
        if changed:
            log.warning("worker %s of topology %s: debug sampling %s", self.ws.worker_id,
                        self.ws.topology_id, ", ".join(sorted(set(changed))))

    def _executor_lines(self) -> list[str]:
        """The executors and the user code each is in, for a thread dump."""
        now = perf_counter()
        out = ["Executors (thread: their own, else the event loop's):"]
        for ex in self.executors:
            thread = ex.thread.name if ex.thread is not None else "event loop"
            since = ex.calling
            what = f"in {ex.phase} for {now - since:.3f} s" if since else "between steps"
            out.append(f"  {ex.name} [{thread}]: {what}, queue {len(ex.queue)}")
        return out

    def _mtime(self, name: str) -> float:
        try:
            return os.stat(os.path.join(self.worker_dir, name)).st_mtime
        except FileNotFoundError:
            return 0.0

    def _read_assignment(self) -> None:
        """Follow assignment.json when other workers' tasks move (our own tasks never change
        here: the supervisor restarts the worker for that)."""
        mtime = self._mtime(ASSIGNMENT_FILE)
        if mtime == self._assignment_mtime:
            return
        self._assignment_mtime = mtime
        try:
            new = WorkerAssignment.read(self.worker_dir)
        except (OSError, ContractError) as e:
            log.warning("worker %s: unreadable new assignment (%s); keeping the current one",
                        self.ws.worker_id, e)
            return
        if sorted(new.workers.get(self.ws.worker_id, [])) != sorted(self.assignment.tasks):
            self.request_stop("its own tasks were reassigned")
            return
        gone = self.ws.update_peers(new.workers)
        for w in gone:
            s = self._peers.pop(w, None)
            if s is not None:
                s.close(0)
        log.info("worker %s of topology %s: new assignment, %d workers; departed: %s",
                 self.ws.worker_id, self.ws.topology_id, len(new.workers), gone or "none")
        for ex in self.executors:
            ex.queue.wake()  # executors flush, and so drop what they hold for departed peers

    def _peer(self, w: str) -> zmq.Socket:
        s = self._peers.get(w)
        if s is None:
            s = self._peers[w] = self.ws.zctx.socket(zmq.PUSH)
            s.setsockopt(zmq.LINGER, 0)
            s.setsockopt(zmq.SNDHWM, 100)
            if self.ws.membership is not None:
                self.ws.membership.dial(s)
            s.connect(self.ws.endpoints[w])
        return s

    def _handshake(self) -> None:
        """Greet peers not heard from yet (every 0.1 s) and answer greetings."""
        ws = self.ws
        for w in list(ws.hello_replies_due):
            ws.hello_replies_due.discard(w)
            self._send_control(w, self._codec.hello(ws.worker_id, True))
        now = time.monotonic()
        if ws.connected or now - self._hello_at < 0.1:
            return
        self._hello_at = now
        frame = self._codec.hello(ws.worker_id, False)
        for w in ws.live_workers:
            if w != ws.worker_id and w not in ws.peers_heard:
                self._send_control(w, frame)

    def _send_control(self, w: str, frame: bytes) -> None:
        try:
            self._peer(w).send(frame, zmq.NOBLOCK)
        except zmq.Again:
            pass  # the peer is not reading; the next round retries

    def _share_load(self) -> None:
        """Every LOAD_SECS: this worker's task loads (the seconds of work queued for each
        executor over LOAD_FULL_SECS, smoothed) to every peer, and the load-aware shuffles'
        map from them and the peers'."""
        ws = self.ws
        now = time.monotonic()
        if ws.load is None or now - self._load_at < LOAD_SECS:
            return
        self._load_at = now
        mine: dict[int, float] = {}
        for ex in self.executors:
            stats = [ws.stats[t] for t in ex.tasks if t in ws.stats]
            busy = sum(st.busy_secs for st in stats)
            done = sum(st.executed for st in stats)
            b0, d0, per = self._timing.get(ex.name, (0.0, 0, 0.0))
            if done > d0:
                per = (busy - b0) / (done - d0)
            self._timing[ex.name] = (busy, done, per)
            queued = len(ex.queue)
            level = min(1.0, queued * per / LOAD_FULL_SECS if per else queued / LOAD_FULL)
            for t in ex.tasks:
                mine[t] = 0.5 * self._own_load.get(t, 0.0) + 0.5 * level
        self._own_load = mine
        peers = [w for w in ws.live_workers if w != ws.worker_id]
        if peers:
            frame = self._codec.load(ws.worker_id, {t: round(v * 1000) for t, v in mine.items()})
            for w in peers:
                self._send_control(w, frame)
        live = ws.live_workers  # a departed worker's late frame must not count
        merged = {t: v for w, loads in list(ws.peer_loads.items()) if w in live
                  for t, v in loads.items()}
        merged.update(mine)
        ws.load.set(merged)

    #: How long local congestion pauses this worker's upstream spouts; the main loop renews
    #: it every round (at most 0.2 s apart) while the congestion lasts.
    LOCAL_HOLD_SECS = 0.5

    def _hold_upstream_on_congestion(self) -> None:
        """Each executor's queue, as it becomes congested, pauses this worker's spout
        executors upstream of it at once (the master then pauses the other workers')."""
        spouts = [ex for ex in self.executors if self.ws.topology.components[
            ex.component_id].kind == "spout" and not ex.component_id.startswith("__")]
        for ex in self.executors:
            upstream = upstream_spouts(self.ws.topology, {ex.component_id})
            held = [s for s in spouts if s.component_id in upstream]
            if held:
                def hold(held=held) -> None:
                    until = time.monotonic() + self.LOCAL_HOLD_SECS
                    for s in held:
                        s.held_until = max(getattr(s, "held_until", 0.0), until)
                ex.queue.on_congested = hold

    def _report_congestion(self) -> None:
        """``topology.backpressure.via.master``: tell the Topology Master which components
        here are congested (on change, and every second while any is), instead of telling
        every peer. A full pipe to a peer is congestion of no component here: "*"."""
        if not self.executors:
            return
        congested = sorted({ex.component_id for ex in self.executors if ex.queue.congested})
        if not congested and self.ws.bp.local_congested:
            congested = ["*"]
        now = time.monotonic()
        if congested and self.ws.bp.enabled:  # this worker's own spouts pause at once,
            upstream = upstream_spouts(self.ws.topology, set(congested))  # renewed each round
            for ex in self.executors:
                if ex.component_id in upstream:
                    ex.held_until = max(getattr(ex, "held_until", 0.0), now + self.LOCAL_HOLD_SECS)
        elif self._bp_last:  # congestion here just cleared: let this worker's spouts go now
            for ex in self.executors:
                if getattr(ex, "held_until", 0.0):
                    ex.held_until = 0.0
        if congested == self._bp_last and not (congested and now - self._bp_sent_at >= 1.0):
            return
        self._bp_last = congested
        self._bp_sent_at = now
        self._to_master(["bp", self.ws.worker_id, congested])

    def _broadcast_backpressure(self) -> None:
        if self._bp_via_master:
            return self._report_congestion()
        congested = self.ws.bp.local_congested
        now = time.monotonic()
        # Send on change, and re-assert every second while congested (a restarted peer forgets).
        if congested == self._bp_last and not (congested and now - self._bp_sent_at >= 1.0):
            return
        self._bp_last = congested
        self._bp_sent_at = now
        frame = self._codec.backpressure(self.ws.worker_id, congested)
        for w in self.ws.live_workers:
            if w != self.ws.worker_id:
                self._send_control(w, frame)

    def _master(self) -> Any:
        """This worker's Topology Master (worker/topology_master.py), or None."""
        for ex in self.executors:
            if ex.component_id == TOPOLOGY_MASTER_ID:
                return getattr(ex, "master", None)  # None until its thread set it up
        return None

    def _to_master(self, event: list) -> None:
        """Send ``event`` to the Topology Master through the first executor's thread (the
        data plane: authenticated, and nothing for the supervisor to relay)."""
        tm = self.ws.component_tasks[TOPOLOGY_MASTER_ID][0]
        ex = self.executors[0]
        ex.call_soon_threadsafe(
            lambda: ex.send_system(tm, ex.tasks[0], TM_REPORT_STREAM_ID, [event]))

    def _send_stats(self, hb: WorkerHeartbeat) -> None:
        """The heartbeat's task counters to the Topology Master."""
        if TOPOLOGY_MASTER_ID in self.ws.component_tasks and self.executors and \
                self.ws.connected:
            self._to_master(["stats", self.ws.worker_id,
                             {"time": hb.time, "uptime": hb.uptime_secs, "tasks": hb.tasks}])

    def heartbeat(self, state: HeartbeatState = HeartbeatState.RUNNING) -> WorkerHeartbeat:
        ws = self.ws
        master = self._master()
        return WorkerHeartbeat(
            time=time.time(), pid=os.getpid(), state=state, topology_id=ws.topology_id,
            worker_id=ws.worker_id, uptime_secs=time.time() - ws.start_time, active=ws.active,
            connected=ws.connected,
            tasks={str(t): s.snapshot() for t, s in ws.stats.items()},
            executors={ex.name: {"queue": len(ex.queue), "queue_max": ex.queue.max_len,
                                 "congested": ex.queue.congested, "component": ex.component_id,
                                 "task": ex.tasks[0]} for ex in self.executors},
            throttled=ws.bp.throttled, dropped_frames=ws.dropped_frames,
            dropped_tuples=ws.dropped_tuples, dropped_batches=ws.dropped_batches,
            errors=list(ws.errors), rss_bytes=_rss_bytes(),
            gc_collections=[g["collections"] for g in gc.get_stats()],
            stats_via_master=TOPOLOGY_MASTER_ID in ws.component_tasks,
            topology_summary=master.summary() if master is not None else {},
            stalled=self._stalled())

    def _stalled(self) -> list[str]:
        """Executors stuck in user code (Executor.stalled), logged once per stall."""
        now = perf_counter()
        out = []
        for ex in self.executors:
            what = ex.stalled(now)
            if what is None:
                self._stall_logged.discard(ex.name)
                continue
            out.append(what)
            if ex.name not in self._stall_logged:
                self._stall_logged.add(ex.name)
                log.warning("topology=%s %s: stalled: %s (a thread dump: py-spy dump --pid "
                            "%d)", self.ws.topology_id, ex.name, what, os.getpid())
        return out

    def write_heartbeat(self, state: HeartbeatState = HeartbeatState.RUNNING) -> None:
        try:
            hb = self.heartbeat(state)
            hb.write(self.worker_dir)
            if state == HeartbeatState.RUNNING:
                self._send_stats(hb)
        except (OSError, RuntimeError) as exc:  # RuntimeError: a dict changed during iteration
            log.warning("worker %s: could not write heartbeat: %s", self.ws.worker_id, exc)


def main(argv: list[str] | None = None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="python -m squall.worker",
                                description="Run one Squall worker process.")
    p.add_argument("--topology-dir", required=True, help="holds topology.pb")
    p.add_argument("--worker-dir", required=True,
                   help="holds assignment.json; heartbeat.json is written here")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="exit when the launching process dies")
    p.add_argument("--adopt-secs", type=float, default=None, metavar="SECS",
                   help="follow the supervisor named in the worker dir's supervisor.json; "
                        "once it is gone, run on SECS seconds for a restarted one to take "
                        "this worker back, then exit")
    a = p.parse_args(argv)
    supervision = None
    if a.adopt_secs is not None:
        supervision = SupervisorWatch(a.worker_dir, os.getppid(), max(0.0, a.adopt_secs))
    elif a.exit_with_parent:
        supervision = SupervisorWatch(a.worker_dir, os.getppid(), None)
    try:
        assignment = WorkerAssignment.read(a.worker_dir)
        tid, conf = assignment.topology_id, assignment.conf
    except (OSError, ContractError):
        tid, conf = "?", {}
    log_dir = stderr_dir()  # before bound_log puts a pipe on fd 2
    # Bounded before anything is logged; drained (finish) before every exit below.
    finish = bound_log(int(cfg.get(conf, cfg.WORKER_LOG_MAX_BYTES)),
                       int(cfg.get(conf, cfg.WORKER_LOG_BACKUPS))) or (lambda: None)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format=f"%(asctime)s %(levelname)s [{tid} pid={os.getpid()}] %(name)s: %(message)s")
    try:
        worker = Worker(a.topology_dir, a.worker_dir, supervision, log_dir)
    except Exception as exc:
        log.exception("worker failed to start: %s", exc)
        finish()
        return EXIT_STARTUP_FAILED
    signal.signal(signal.SIGTERM, lambda s, f: worker.request_stop(f"signal {s}"))
    signal.signal(signal.SIGINT, lambda s, f: worker.request_stop(f"signal {s}"))
    worker.start()
    code = worker.run()
    logging.shutdown()
    finish()
    # Executor threads stuck in user code must not keep the process alive.
    os._exit(code)
