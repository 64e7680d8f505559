"""The supervisor's reports to Nimbus: its workers' heartbeats and the errors they reported.

Storm 2's ``SupervisorHeartbeat``/``sendSupervisorWorkerHeartbeats``: every
``supervisor.heartbeat.frequency.secs`` one ``SupervisorWorkerHeartbeats`` message carries
the fresh heartbeat (:class:`~squall.client.contract.WorkerHeartbeat`) of each running worker
and the errors they reported since the last report. Errors wait in a bounded outbox while
Nimbus is unreachable (the oldest go first when it is full) and are sent again after a failed
send; a worker that exits leaves its last errors (a crash's) in the outbox before its
relaunch overwrites the file. Nothing here writes to ZooKeeper.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable, Iterable, Protocol

from ..client import histogram
from ..client.contract import MAX_COMPONENT_CHARS, WorkerHeartbeat, cut_error
from ..proto import nimbus_pb2 as pb

log = logging.getLogger("squall.supervisor")

#: Worker errors kept for Nimbus while it is unreachable; older ones are dropped first.
MAX_UNSENT_ERRORS = 200
#: Worker failures (crash, hang) reported to Nimbus for this long, seconds.
RESTART_REPORT_SECS = 600.0
#: ... and at most this many (a crash loop with backoff stays far below).
MAX_RESTARTS = 500
#: A report's size bound, under gRPC's 4 MiB message limit: errors that would take it past
#: this are dropped from the report (logged), never sent again whole (they would fail again).
MAX_REPORT_BYTES = 2 * 1024 * 1024
#: Counters of a worker heartbeat's tasks that travel to Nimbus.
TASK_COUNTERS = ("emitted", "transferred", "executed", "acked", "failed", "timed_out", "pending")
#: A Topology Master's summary leaves out the tasks whose counters did not change since the
#: last report Nimbus took, except in every FULL_STATS_EVERY-th report (a Nimbus that
#: started leading since, or lost a report, gets everything back).
FULL_STATS_EVERY = 10


class Worker(Protocol):
    """What the outbox needs of a running worker (the supervisor's process record)."""

    topology_id: str
    port: int
    pid: int
    worker_dir: str
    tasks: tuple[int, ...]


class Outbox:
    """Builds and sends the reports; thread-safe (the supervisor's loop takes a dead worker's
    errors while its heartbeat thread sends)."""

    def __init__(self, supervisor_id: str, host: str,
                 send: Callable[[Any], None] | None = None,
                 make_sender: Callable[[], Callable[[Any], None]] | None = None,
                 max_unsent: int = MAX_UNSENT_ERRORS,
                 on_send_error: Callable[[], Any] | None = None):
        self.supervisor_id = supervisor_id
        self.host = host
        #: ``send(SupervisorWorkerHeartbeats)``; made by ``make_sender`` on first use.
        self.send = send
        self.make_sender = make_sender
        self.on_send_error = on_send_error
        #: pid -> (newest error time, how many with that time) taken from its heartbeat.json.
        self._marks: dict[int, tuple[float, int]] = {}
        #: Errors taken from heartbeat files that Nimbus has not accepted yet (bounded).
        self._errors: collections.deque = collections.deque(maxlen=max_unsent)
        #: (time, topology id, port, reason) of recent worker failures, oldest first.
        self._restarts: collections.deque = collections.deque(maxlen=MAX_RESTARTS)
        self._lock = threading.Lock()
        #: (topology id, worker id, task) -> the TaskStats bytes Nimbus last took.
        self._sent_stats: dict[tuple[str, str, int], bytes] = {}
        #: What the report being sent would make ``_sent_stats`` (applied once it went).
        self._sending_stats: dict[tuple[str, str, int], bytes] = {}
        self._reports = 0

    @property
    def unsent_errors(self) -> list:
        with self._lock:
            return list(self._errors)

    def message(self, workers: Iterable[Worker]) -> Any:
        """One SupervisorWorkerHeartbeats from the workers' fresh heartbeats (their new
        errors move into the outbox, which :meth:`report` sends)."""
        msg = pb.SupervisorWorkerHeartbeats(supervisor_id=self.supervisor_id)
        full = self._reports % FULL_STATS_EVERY == 0
        self._sending_stats = {}
        for w in sorted(workers, key=lambda w: w.port):
            hb = WorkerHeartbeat.read(w.worker_dir, w.pid)
            if hb is None:
                continue  # not started yet, or the file is left by an earlier process
            self._take_errors(w, hb)
            before = len(msg.worker_heartbeats)
            before_stats = len(msg.topology_stats)
            sending = dict(self._sending_stats) if hb.topology_summary else None
            try:
                _add_worker_heartbeat(msg, w, hb)
                if hb.topology_summary:
                    self._add_topology_stats(msg, w.topology_id, hb.topology_summary, full)
                if msg.ByteSize() > MAX_REPORT_BYTES // 2:  # half: the rest is the errors'
                    raise ValueError(f"it would take the report past {MAX_REPORT_BYTES // 2} "
                                     "bytes")
            except (TypeError, ValueError, AttributeError, OverflowError) as e:
                del msg.topology_stats[before_stats:]
                if sending is not None:
                    self._sending_stats = sending  # its stats did not go
                # A worker's file is not trusted: one that does not fit the message is left
                # out of this report (Nimbus times the worker out if it keeps doing so),
                # and every other worker is still reported.
                del msg.worker_heartbeats[before:]
                log.warning("supervisor %s: worker of topology %s on port %d wrote a heartbeat "
                            "that does not fit the report (%s); leaving it out",
                            self.supervisor_id, w.topology_id, w.port, e)
        return msg

    def _add_topology_stats(self, msg: Any, topology_id: str, summary: dict,
                            full: bool) -> None:
        """A Topology Master's summary: each worker's tasks that changed (all when ``full``)."""
        out = msg.topology_stats.add(topology_id=topology_id)
        sending: dict[tuple[str, str, int], bytes] = {}
        for worker_id, ws in sorted(summary.items()):
            # Every worker goes, with its time (Nimbus shows how fresh its stats are); of
            # its tasks only those whose counters changed.
            entry = out.workers.add(worker_id=str(worker_id), time_secs=float(ws["time"]),
                                    uptime_secs=int(ws.get("uptime", 0)))
            for task, st in sorted(dict(ws.get("tasks") or {}).items(), key=lambda kv: int(kv[0])):
                ts = pb.TaskStats()
                _fill_task_stats(ts, int(task), st)
                raw = ts.SerializeToString(deterministic=True)
                key = (topology_id, str(worker_id), int(task))
                sending[key] = raw
                if full or self._sent_stats.get(key) != raw:
                    entry.tasks.append(ts)
        self._sending_stats.update(sending)  # only once the whole summary is in the message

    def worker_exited(self, w: Worker) -> None:
        """A worker is gone: keep what its final heartbeat reported (a crash's error) before
        a relaunch replaces the file."""
        hb = WorkerHeartbeat.read(w.worker_dir, w.pid)
        if hb is not None:
            self._take_errors(w, hb, last=True)
        else:
            with self._lock:
                self._marks.pop(w.pid, None)

    def supervisor_error(self, topology_id: str, text: str, now: float | None = None) -> None:
        """An error of the supervisor's own about a topology (its package cannot be fetched
        or extracted): shown with the topology's errors, as component ``__supervisor``."""
        with self._lock:
            self._errors.append(pb.WorkerError(topology_id=topology_id, error=pb.ErrorInfo(
                component="__supervisor", error=cut_error(text),
                time_secs=int(time.time() if now is None else now), host=self.host)))

    def worker_failed(self, topology_id: str, port: int, reason: str,
                      now: float | None = None) -> None:
        """A worker crashed or hung and will be launched again: every report for the next
        RESTART_REPORT_SECS carries it (Nimbus shows crash loops from these)."""
        with self._lock:
            self._restarts.append((time.time() if now is None else now, topology_id, port,
                                   reason))

    def _recent_restarts(self, now: float) -> list:
        with self._lock:
            while self._restarts and now - self._restarts[0][0] > RESTART_REPORT_SECS:
                self._restarts.popleft()
            return [pb.WorkerRestart(topology_id=tid, port=port, time_secs=t, reason=reason)
                    for t, tid, port, reason in self._restarts]

    def report(self, workers: Iterable[Worker]) -> None:
        """Send one report; a failure is logged, never raised, and its errors go again."""
        errors: list = []
        try:
            if self.send is None and self.make_sender is not None:
                self.send = self.make_sender()
            msg = self.message(workers)
            with self._lock:
                errors = list(self._errors)
                self._errors.clear()
            msg.restarts.extend(self._recent_restarts(time.time()))
            self._add_errors(msg, errors)
            if self.send is not None:
                self.send(msg)
                self._reports += 1
                # What Nimbus now has: later reports leave out what did not change.
                self._sent_stats = self._sending_stats
        except Exception as e:  # noqa: BLE001 - Nimbus away must not stop the supervisor
            with self._lock:  # oldest first again; the deque's bound drops the oldest
                self._errors.extendleft(reversed(errors))
            log.warning("supervisor %s: cannot send worker heartbeats to Nimbus: %s",
                        self.supervisor_id, e)
            if self.on_send_error is not None:
                self.on_send_error()

    def _add_errors(self, msg: Any, errors: list) -> None:
        """Add ``errors`` (oldest first) while the report stays under MAX_REPORT_BYTES; the
        oldest of those that do not fit are dropped, with a log line saying how many."""
        room = MAX_REPORT_BYTES - msg.ByteSize()
        keep: list = []
        for e in reversed(errors):  # the newest first: they say what is wrong now
            size = e.ByteSize() + 8  # the field's tag and length
            if size > room:
                break
            room -= size
            keep.append(e)
        dropped = len(errors) - len(keep)
        if dropped:
            log.warning("supervisor %s: %d worker error(s) left out of the report to Nimbus "
                        "(it would pass %d bytes); the workers' logs have them",
                        self.supervisor_id, dropped, MAX_REPORT_BYTES)
            errors[:] = errors[dropped:]  # a failed send requeues only what was in it
        msg.errors.extend(reversed(keep))

    def close(self) -> None:
        close = getattr(self.send, "close", None)
        if close is not None:
            close()

    def _take_errors(self, w: Worker, hb: WorkerHeartbeat, last: bool = False) -> None:
        """Move the errors of ``hb`` not taken before into the outbox (``last``: the process
        has exited, forget its mark)."""
        with self._lock:
            mark = self._marks.pop(w.pid, (0.0, 0))
            new, mark = unsent_errors(hb.errors, mark)
            if not last:
                self._marks[w.pid] = mark
            for e in new:
                # The file is the worker's (user code): its sizes are not trusted.
                self._errors.append(pb.WorkerError(
                    topology_id=w.topology_id, error=pb.ErrorInfo(
                        component=str(e.get("component", ""))[:MAX_COMPONENT_CHARS],
                        error=cut_error(str(e.get("error", ""))),
                        time_secs=int(e.get("time", 0)), host=self.host, port=w.port,
                        task=int(e.get("task", 0)))))


def unsent_errors(errors: list[dict], mark: tuple[float, int]
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


def _add_worker_heartbeat(msg: Any, w: Worker, hb: WorkerHeartbeat) -> None:
    out = msg.worker_heartbeats.add(
        topology_id=w.topology_id, port=w.port, time_secs=hb.time,
        uptime_secs=int(hb.uptime_secs), state=hb.state.value)
    for t in w.tasks:
        out.executors.add(task_start=int(t), task_end=int(t))
    out.stalled.extend(cut_error(str(x), 256) for x in hb.stalled[:16])
    if hb.stats_via_master:
        return  # the Topology Master's summary carries them
    for task, st in sorted(hb.tasks.items(), key=lambda kv: int(kv[0])):
        _fill_task_stats(out.tasks.add(), int(task), st)


def _fill_task_stats(ts: Any, task: int, st: dict) -> None:
    """One heartbeat.json ``tasks`` entry into a TaskStats message."""
    ts.task = task
    ts.component = str(st.get("component", ""))
    for f in TASK_COUNTERS:
        setattr(ts, f, int(st.get(f, 0)))
    lat = st.get("complete_latency_ms")
    if lat:
        ts.complete_latency.mean = float(lat.get("mean", 0))
        ts.complete_latency.p50 = float(lat.get("p50", 0))
        ts.complete_latency.p99 = float(lat.get("p99", 0))
        ts.complete_latency.n = int(lat.get("n", 0))
    streams = st.get("streams")
    if isinstance(streams, dict):
        for name, pair in streams.items():
            try:
                ts.streams[str(name)].emitted = int(pair[0])
                ts.streams[str(name)].transferred = int(pair[1])
            except (TypeError, ValueError, IndexError):
                continue  # a heartbeat from a worker of another version: skip the stream
    for key, target in (("complete_hist", ts.complete_hist),
                        ("execute_hist", ts.execute_hist)):
        counts, total, n = histogram.parse(st.get(key))
        if n:
            target.buckets.update(counts)
            target.sum = total
            target.n = n
    ts.busy_secs = float(st.get("busy_secs", 0.0) or 0.0)
    progress = st.get("progress")
    if isinstance(progress, dict):
        _fill_progress(ts.progress, progress)


def _fill_progress(msg: Any, record: dict) -> None:
    """A task's batch progress record (the Spark bridge's) into a BatchProgress message:
    the message's fields by name; values that are not numbers are left out."""
    msg.SetInParent()
    for f in msg.DESCRIPTOR.fields:
        v = record.get(f.name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                setattr(msg, f.name, int(v) if f.type == f.TYPE_INT64 else float(v))
            except (ValueError, OverflowError):
                continue  # a NaN or an int64 overflow: that figure is left out, not the rest
