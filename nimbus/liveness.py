"""Which worker slots are alive: Nimbus's in-memory heartbeat cache (Storm's ``HeartbeatCache``).

Supervisors report their workers' heartbeats every ``supervisor.heartbeat.frequency.secs``
(``SendSupervisorWorkerHeartbeats``). :class:`Liveness` keeps them in memory only, never in
ZooKeeper, with the time a *newer* heartbeat was received (so clock skew between hosts does
not matter), and answers two questions for the scheduler:

* which supervisors are live: registered (their ephemeral node exists), less those that
  reported before but not for ``nimbus.task.timeout.secs``;
* which slots of an assignment are dead: their supervisor is gone (for longer than one
  monitor round: a restarted supervisor replaces the node its earlier session left, and
  that gap is no lost host) or no longer offers the port, or the slot was assigned more
  than ``nimbus.task.launch.secs`` ago and no newer heartbeat arrived for
  ``nimbus.task.timeout.secs`` (counted at the earliest from the assignment and from when
  this Nimbus began to lead, since heartbeats are not persisted).

Thread-safe: the gRPC threads record, the leader's loop asks.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

from ..client import config as cfg
from ..client.contract import Assignment, ContractError, SupervisorInfo, host_port
from .scheduler import Slot
from .stats_windows import Snap, TaskSeries

log = logging.getLogger("squall.nimbus")


class Liveness:
    """Heartbeats by (supervisor id, topology id, port) and supervisors' last reports."""

    def __init__(self, conf: Mapping[str, Any], now: float):
        self.task_timeout_secs = float(cfg.get(conf, cfg.NIMBUS_TASK_TIMEOUT_SECS))
        self.task_launch_secs = float(cfg.get(conf, cfg.NIMBUS_TASK_LAUNCH_SECS))
        #: How long a supervisor may be missing from /supervisors before its slots are dead.
        self.missing_grace_secs = float(cfg.get(conf, cfg.NIMBUS_MONITOR_FREQ_SECS))
        #: supervisor id -> when it was first seen missing (while an assignment names it).
        self.missing_since: dict[str, float] = {}
        #: (supervisor id, topology id, port) -> (received, WorkerHeartbeat message);
        #: ``received`` is when a heartbeat with a newer ``time_secs`` arrived.
        self.heartbeats: dict[tuple[str, str, int], tuple[float, Any]] = {}
        #: When each supervisor last reported (any SendSupervisorWorkerHeartbeats).
        self.supervisor_reports: dict[str, float] = {}
        #: When this Nimbus began to lead: nothing counts as silent from before then.
        self.lead_start = now
        #: (topology id, task) -> (supervisor id, port) -> that slot's history of the task
        #: (stats_windows.py): a task that moved, or a stale worker, keeps its own series.
        self.series: dict[tuple[str, int], dict[tuple[str, int], TaskSeries]] = {}
        #: supervisor id -> its latest list of recent worker restarts (WorkerRestart).
        self.restarts: dict[str, list[Any]] = {}
        #: (supervisor id, topology id, port) -> (time, task -> TaskStats) from Topology
        #: Masters' summaries (record_stats).
        self.master_stats: dict[tuple[str, str, int], tuple[float, dict[int, Any]]] = {}
        self._lock = threading.Lock()

    def leading_since(self, now: float) -> None:
        self.lead_start = now

    def record(self, supervisor_id: str, heartbeats: list[Any], now: float,
               restarts: list[Any] | None = None) -> None:
        """Keep a supervisor's report of its workers' heartbeats (and its recent restarts,
        which replace the ones it sent before)."""
        with self._lock:
            self.supervisor_reports[supervisor_id] = now
            if restarts is not None:
                self.restarts[supervisor_id] = list(restarts)
            for hb in heartbeats:
                key = (supervisor_id, hb.topology_id, int(hb.port))
                prev = self.heartbeats.get(key)
                if prev is not None and hb.time_secs <= prev[1].time_secs:
                    # Not newer: a hung worker's stale file; keep the old receive time.
                    self.heartbeats[key] = (prev[0], hb)
                else:
                    self.heartbeats[key] = (now, hb)
                    slot = (supervisor_id, int(hb.port))
                    for ts in hb.tasks:
                        self._add_to_series(hb.topology_id, slot, ts, now, hb.uptime_secs)

    def record_stats(self, record: Assignment, workers: list[Any], now: float) -> None:
        """A Topology Master's summary (WorkerStats of the workers of ``record``): the task
        counters the workers' own heartbeats leave out. A task missing from a summary did
        not change: its last counters stand."""
        with self._lock:
            for ws in workers:
                sid = record.slots.get(ws.worker_id)
                if sid is None:
                    continue  # a worker no longer assigned
                key = (sid, record.topology_id, host_port(ws.worker_id)[1])
                prev = self.master_stats.get(key)
                # A task left out did not change, also across a worker restart (its reset
                # counters differ, so they are sent).
                tasks = dict(prev[1]) if prev is not None else {}
                for ts in ws.tasks:
                    tasks[ts.task] = ts
                    self._add_to_series(record.topology_id, (sid, key[2]), ts, now,
                                        ws.uptime_secs)
                self.master_stats[key] = (ws.time_secs, tasks)

    def _add_to_series(self, topology_id: str, slot: tuple[str, int], ts: Any, now: float,
                       uptime_secs: float) -> None:
        """A task's new counters into its slot's history (lock held)."""
        by_slot = self.series.setdefault((topology_id, ts.task), {})
        series = by_slot.get(slot)
        if series is None:
            series = by_slot[slot] = TaskSeries()
        series.add(now, ts, float(uptime_secs))

    def live_supervisors(self, registered: Mapping[str, dict], now: float
                         ) -> dict[str, SupervisorInfo]:
        """The registered supervisors (``/supervisors`` records) that are live; a record that
        does not fit the contract is skipped with a warning."""
        out = {}
        with self._lock:
            for sid, data in registered.items():
                last = self.supervisor_reports.get(sid)
                if last is not None and now - max(last, self.lead_start) > self.task_timeout_secs:
                    continue
                try:
                    out[sid] = SupervisorInfo.from_json(data)
                except ContractError as e:
                    log.warning("supervisor %s: %s; not scheduling on it", sid, e)
        return out

    def dead_slots(self, record: Assignment, supervisors: Mapping[str, SupervisorInfo],
                   now: float) -> set[Slot]:
        """Slots of ``record`` whose supervisor is gone or whose worker's heartbeats timed out."""
        dead = set()
        with self._lock:
            for sid in [s for s in self.missing_since if s in supervisors]:
                del self.missing_since[sid]
            for hp, sid in record.slots.items():
                host, port = host_port(hp)
                info = supervisors.get(sid)
                if info is None:
                    if now - self.missing_since.setdefault(sid, now) >= self.missing_grace_secs:
                        dead.add(Slot(sid, host, port))
                    continue
                if port not in info.slots:
                    dead.add(Slot(sid, host, port))
                    continue
                assigned = float(record.start_times.get(hp, now))
                if now - assigned <= self.task_launch_secs:
                    continue
                hb = self.heartbeats.get((sid, record.topology_id, port))
                last = max(hb[0] if hb else 0.0, assigned, self.lead_start)
                if now - last > self.task_timeout_secs:
                    dead.add(Slot(sid, host, port))
        return dead

    def task_stats(self, record: Assignment) -> dict[int, tuple[float, Any]]:
        """task -> (heartbeat time, latest TaskStats) from the heartbeats of the record's slots."""
        out: dict[int, tuple[float, Any]] = {}
        with self._lock:
            for hp, sid in record.slots.items():
                key = (sid, record.topology_id, host_port(hp)[1])
                hb = self.heartbeats.get(key)
                if hb is not None:
                    for ts in hb[1].tasks:
                        out[ts.task] = (hb[1].time_secs, ts)
                summary = self.master_stats.get(key)
                if summary is not None:
                    for task, ts in summary[1].items():
                        out.setdefault(task, (summary[0], ts))
        return out

    def windowed(self, topology_id: str, tasks: list[int], now: float, secs: float
                 ) -> list[tuple[Snap, float]]:
        """Each of ``tasks``' values over the last ``secs`` (0: all), with the span covered."""
        with self._lock:
            return [series.window(now, secs) for t in tasks
                    for series in self.series.get((topology_id, t), {}).values()]

    def recent_restarts(self, topology_id: str, now: float, secs: float) -> int:
        """Worker restarts of the topology within the last ``secs``, on every supervisor."""
        with self._lock:
            return sum(1 for rs in self.restarts.values() for r in rs
                       if r.topology_id == topology_id and now - r.time_secs <= secs)

    def live_workers(self, record: Assignment, now: float) -> int:
        """Slots of ``record`` not counted dead: a fresh heartbeat of a running worker, or
        still within nimbus.task.launch.secs of the assignment (or of this Nimbus's lead),
        as :meth:`dead_slots` judges them."""
        n = 0
        with self._lock:
            for hp, sid in record.slots.items():
                hb = self.heartbeats.get((sid, record.topology_id, host_port(hp)[1]))
                if hb is not None:
                    if now - hb[0] <= self.task_timeout_secs and hb[1].state in ("", "running"):
                        n += 1
                    continue
                since = max(float(record.start_times.get(hp, now)), self.lead_start)
                if now - since <= self.task_launch_secs:
                    n += 1
        return n

    def stalled(self, record: Assignment, now: float) -> list[str]:
        """What the fresh heartbeats of ``record``'s workers name as stuck in user code."""
        out = []
        with self._lock:
            for hp, sid in record.slots.items():
                hb = self.heartbeats.get((sid, record.topology_id, host_port(hp)[1]))
                if hb is not None and now - hb[0] <= self.task_timeout_secs:
                    out.extend(f"{s} (on {hp})" for s in hb[1].stalled)
        return out

    def forget(self, topology_id: str) -> None:
        """Drop what is kept of a removed topology."""
        with self._lock:
            for key in [k for k in self.series if k[0] == topology_id]:
                del self.series[key]
            for key in [k for k in self.heartbeats if k[1] == topology_id]:
                del self.heartbeats[key]
            for key in [k for k in self.master_stats if k[1] == topology_id]:
                del self.master_stats[key]
