"""The Topology Master: one system task per topology that drives barrier checkpoints.

JStorm's Topology Master, for the seed's exactly-once: it triggers a checkpoint in every
spout task, commits it everywhere when every task reported it prepared, and starts a
recovery (a new epoch, back to the last completed checkpoint) when a task restarted, a
checkpoint took longer than ``topology.message.timeout.secs`` or a worker dropped frames.
Its own record (the last completed checkpoint and the epoch) is in the state provider,
written before it acts, so a restarted master continues from it.

:class:`BarrierCoordinator` is the logic as a pure state machine (events in, commands
out); :class:`TopologyMaster` runs it on tuples and timers. Tasks' side:
worker/barrier.py.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

from ..client import config as cfg
from ..client.state import get_state
from ..client.stateful import barrier_mode
from ..client.tuple import (ACKER_COMPONENT_ID, TM_CONTROL_STREAM_ID, TM_REPORT_STREAM_ID,
                            TOPOLOGY_MASTER_ID)

log = logging.getLogger(__name__)

WAITING = "waiting"  # for a hello from every task
RECOVERING = "recovering"
RUNNING = "running"


@dataclass(frozen=True)
class Persist:
    committed: int
    epoch: int


@dataclass(frozen=True)
class Send:
    """Send ``event`` to each of ``tasks``."""

    tasks: tuple[int, ...]
    event: tuple


@dataclass
class BarrierCoordinator:
    """Checkpoints and recoveries of one topology. Every method returns the commands to carry
    out, in order (persist before sending what depends on it)."""

    tasks: frozenset[int]
    spouts: frozenset[int]
    committed: int = -1
    epoch: int = 0
    interval: float = 1.0
    timeout: float = 30.0
    phase: str = WAITING
    incarnations: dict[int, int] = field(default_factory=dict)
    drops: dict[int, int] = field(default_factory=dict)
    restored: set[int] = field(default_factory=set)
    #: The checkpoint in flight, the tasks that prepared it, and since when.
    inflight: int | None = None
    prepared: set[int] = field(default_factory=set)
    since: float = 0.0
    last_checkpoint: float = 0.0
    recoveries: int = 0
    completed: int = 0

    def _recover(self, now: float, why: str) -> list:
        self.epoch += 1
        self.phase = RECOVERING
        self.restored = set()
        self.inflight = None
        self.prepared = set()
        self.since = now
        self.recoveries += 1
        log.info("topology master: epoch %d: restoring checkpoint %d (%s)", self.epoch,
                 self.committed, why)
        return [Persist(self.committed, self.epoch),
                Send(tuple(sorted(self.spouts)), ("restore", self.committed, self.epoch))]

    def _drops(self, task: int, drops: int) -> bool:
        """True when ``task``'s worker dropped frames since it last said."""
        before = self.drops.get(task)
        self.drops[task] = drops
        return before is not None and drops > before

    def hello(self, task: int, incarnation: int, epoch: int, drops: int, now: float) -> list:
        if task not in self.tasks:
            return []
        known = self.incarnations.get(task)
        self.incarnations[task] = incarnation
        # A master that lost its record (memory state) must still start epochs after the
        # ones the tasks saw, or they would ignore its recoveries.
        self.epoch = max(self.epoch, epoch)
        if known is not None and known != incarnation:
            self.drops.pop(task, None)
            self.drops[task] = drops
            if self.phase != WAITING:
                return self._recover(now, f"task {task} restarted")
        if self._drops(task, drops) and self.phase != WAITING:
            return self._recover(now, f"the worker of task {task} dropped tuples")
        if self.phase == WAITING and self.tasks <= set(self.incarnations):
            return self._recover(now, "every task is up")
        return []

    def on_restored(self, task: int, epoch: int, drops: int, now: float) -> list:
        if self.phase != RECOVERING or epoch != self.epoch:
            return []
        self._drops(task, drops)
        self.restored.add(task)
        if self.restored >= self.tasks:
            self.phase = RUNNING
            self.last_checkpoint = now
            log.info("topology master: epoch %d running (recovered in %.2f s)", self.epoch,
                     now - self.since)
        return []

    def on_prepared(self, task: int, txid: int, epoch: int, drops: int, now: float) -> list:
        if self.phase != RUNNING or epoch != self.epoch or txid != self.inflight:
            return []
        if self._drops(task, drops):
            return self._recover(now, f"the worker of task {task} dropped tuples")
        self.prepared.add(task)
        if self.prepared < self.tasks:
            return []
        self.committed = txid
        self.inflight = None
        self.completed += 1
        return [Persist(self.committed, self.epoch),
                Send(tuple(sorted(self.tasks)), ("commit", txid))]

    def on_failed(self, task: int, epoch: int, drops: int, now: float) -> list:
        """A bolt task failed a tuple of ``epoch``: with no acker to replay it, the run since
        the last checkpoint is replayed (once per epoch; a failure of an older epoch is
        replayed already)."""
        if task not in self.tasks or self.phase == WAITING or epoch != self.epoch:
            return []
        self._drops(task, drops)
        return self._recover(now, f"task {task} failed a tuple")

    def tick(self, now: float) -> list:
        if self.phase == RECOVERING and now - self.since > self.timeout:
            return self._recover(now, f"recovery of epoch {self.epoch} took over "
                                      f"{self.timeout:g} s")
        if self.phase != RUNNING:
            return []
        if self.inflight is not None:
            if now - self.since > self.timeout:
                return self._recover(now, f"checkpoint {self.inflight} took over "
                                          f"{self.timeout:g} s")
            return []
        if now - self.last_checkpoint < self.interval:
            return []
        self.inflight = self.committed + 1
        self.prepared = set()
        self.since = self.last_checkpoint = now
        return [Send(tuple(sorted(self.spouts)), ("trigger", self.inflight, self.epoch))]


#: The master's record in its state.
RECORD_KEY = "record"
#: Seconds a "throttle" command pauses spouts unless renewed (the master renews every
#: THROTTLE_RENEW_SECS while congestion lasts; a dead master's pause runs out).
THROTTLE_LEASE_SECS = 3.0
THROTTLE_RENEW_SECS = 1.0
#: A worker's congestion report counts this long (workers repeat theirs every second).
CONGESTION_TTL_SECS = 3.0


def upstream_spouts(topology: Any, components: set[str]) -> set[str]:
    """The spouts whose tuples reach any of ``components`` on user streams ("*": all)."""
    comps = topology.components
    spouts = {cid for cid, c in comps.items() if c.kind == "spout" and not cid.startswith("__")}
    if "*" in components:
        return spouts
    seen, todo = set(), [c for c in components if c in comps]
    while todo:
        cid = todo.pop()
        if cid in seen:
            continue
        seen.add(cid)
        todo.extend(i.component for i in comps[cid].inputs
                    if not i.stream.startswith(("__", "$")) and i.component in comps)
    return seen & spouts


class Backpressure:
    """The master's view of congestion: which spouts to pause (pure; the caller sends)."""

    def __init__(self, topology: Any):
        self.topology = topology
        #: worker id -> (when it reported, its congested components)
        self.reports: dict[str, tuple[float, list[str]]] = {}
        self.paused: set[str] = set()
        self.sent_at = 0.0

    def report(self, worker: str, components: list[str], now: float) -> None:
        self.reports[worker] = (now, list(components))

    def tick(self, now: float) -> set[str] | None:
        """The spouts to pause now, when that changed or a renewal is due; else None."""
        live = {c for t, cs in self.reports.values() if now - t <= CONGESTION_TTL_SECS
                for c in cs}
        paused = upstream_spouts(self.topology, live)
        if paused != self.paused or (paused and now - self.sent_at >= THROTTLE_RENEW_SECS):
            self.paused, self.sent_at = paused, now
            return paused
        return None


class TopologyMaster:
    """The master's task: the workers' stats in, one summary out (its worker's heartbeat
    carries it to the supervisor, which sends Nimbus one report per topology); in barrier
    checkpointing also the coordinator: reports in on ``__tm``, commands out on ``__ctl``."""

    def __init__(self, executor: Any):
        self.ex = executor
        self.task = executor.tasks[0]
        #: worker id -> {"time", "uptime", "tasks"}: what each worker last sent.
        self.workers: dict[str, dict] = {}
        self.coordinator: BarrierCoordinator | None = None
        if barrier_mode(executor.conf):
            self._start_coordinator()
        self.backpressure: Backpressure | None = None
        if executor.conf.get(cfg.TOPOLOGY_BACKPRESSURE_VIA_MASTER):
            self.backpressure = Backpressure(executor.ws.topology)
            self._logged: set[str] = set()
            self.spout_tasks = sorted(
                t for c, ts in executor.ws.component_tasks.items()
                if executor.ws.topology.components[c].kind == "spout" for t in ts)
            executor.add_timer(0.1, self._throttle)

    def _throttle(self) -> None:
        paused = self.backpressure.tick(time.monotonic())
        if paused is None:
            return
        if paused and paused != self._logged:  # not at every renewal of the same pause
            log.info("topology master: pausing spouts %s (congested downstream)", sorted(paused))
        self._logged = paused
        event = ["throttle", sorted(paused), THROTTLE_LEASE_SECS]
        for t in self.spout_tasks:
            self.ex.send_system(t, self.task, TM_CONTROL_STREAM_ID, [event])
        self.ex.end_batch()

    def summary(self) -> dict[str, dict]:
        """The live workers' latest stats (read from the worker's main thread: the dict is
        replaced, never changed in place)."""
        live = self.ex.ws.live_workers
        return {w: s for w, s in self.workers.items() if w in live}

    def _start_coordinator(self) -> None:
        ws = self.ex.ws
        executor = self.ex
        system = {TOPOLOGY_MASTER_ID, ACKER_COMPONENT_ID}
        tasks = frozenset(t for c, ts in ws.component_tasks.items() if c not in system
                          for t in ts)
        spouts = frozenset(t for c, ts in ws.component_tasks.items()
                           if c not in system and ws.topology.components[c].kind == "spout"
                           for t in ts)
        conf = executor.conf
        # Named by topology name, as bolt states are by component and task: a topology
        # submitted again continues from its last checkpoint (Storm's namespaces).
        name = conf.get(cfg.TOPOLOGY_NAME) or ws.topology_id
        self.state = get_state(f"{TOPOLOGY_MASTER_ID}-{name}", conf)
        committed, epoch = self.state.get(RECORD_KEY) or (-1, 0)
        self.coordinator = BarrierCoordinator(
            tasks, spouts, committed=int(committed), epoch=int(epoch),
            interval=max(0.1, float(conf.get(cfg.TOPOLOGY_STATE_CHECKPOINT_INTERVAL) or 1000)
                         / 1000),
            timeout=float(conf[cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS]))
        log.info("topology=%s topology master: %d tasks, last checkpoint %d, epoch %d",
                 ws.topology_id, len(tasks), committed, epoch)
        executor.add_timer(0.02, lambda: self.carry_out(self.coordinator.tick(time.monotonic())))

    def dispatch(self, tup: Any) -> None:
        if tup.source_stream != TM_REPORT_STREAM_ID:
            return
        event = tup.values[0]
        kind, task, now = event[0], tup.source_task, time.monotonic()
        if kind == "stats":
            if isinstance(event[2], dict):
                self.workers = {**self.workers, str(event[1]): event[2]}
            return
        if kind == "bp":
            if self.backpressure is not None:
                self.backpressure.report(str(event[1]), list(event[2]), now)
                self._throttle()  # at once: a pause that waits a timer round is late
            return
        c = self.coordinator
        if c is None:
            return
        if kind == "hello":
            self.carry_out(c.hello(task, event[1], event[2], event[3], now))
        elif kind == "restored":
            self.carry_out(c.on_restored(task, event[1], event[2], now))
        elif kind == "prepared":
            self.carry_out(c.on_prepared(task, event[1], event[2], event[3], now))
        elif kind == "failed":
            self.carry_out(c.on_failed(task, event[1], event[2], now))

    def carry_out(self, commands: list) -> None:
        for cmd in commands:
            if isinstance(cmd, Persist):
                self.state.put(RECORD_KEY, [cmd.committed, cmd.epoch])
                self.state.commit()
            else:
                for t in cmd.tasks:
                    self.ex.send_system(t, self.task, TM_CONTROL_STREAM_ID, [list(cmd.event)])
        if commands:
            self.ex.end_batch()
