"""Barrier checkpointing in the tasks: spouts inject barriers, bolts align and snapshot.

The seed's exactly-once (JStorm's, Flink's aligned checkpoints). The Topology Master
(worker/topology_master.py) drives it; here is what each task does:

- a spout task, on ``trigger(N, epoch)``: snapshot its offsets into its state, prepare
  transaction N, and send barrier N on ``$checkpoint`` to every task downstream. Its
  barrier follows the tuples it emitted before, on the same ordered channel;
- a bolt task, on barrier N from an input channel (an upstream task): hold that
  channel's later tuples until barrier N has come from every channel (alignment), then
  prepare its state (stateful bolts), send barrier N on and replay the held tuples.
  Without alignment (``barrier-at-least-once``) it snapshots at the first copy and holds
  nothing: tuples from faster channels land in the snapshot, so a recovery may count
  them twice;
- every task reports ``prepared N`` to the master, which commits N everywhere once all did;
- recovery (a worker restarted, a checkpoint timed out, frames were dropped): the master
  starts a new epoch; spouts restore the last completed checkpoint's offsets and state
  and send a ``RESTORE`` marker down every channel. A bolt restores its state at the first
  marker of the new epoch and drops each channel's tuples until that channel's marker
  (they belong to the abandoned run), so nothing is counted twice.

There is no acker: a tuple costs no ack traffic, only the channel check below.
"""

from __future__ import annotations

import logging
import random
from typing import Any, Callable

from ..client.state import State, get_state
from ..client.stateful import (BARRIER, CHECKPOINT_STREAM_ID, RESTORE, CheckpointedSpout,
                               is_stateful)
from .checkpoint import task_state, upstream_tasks
from ..client.tuple import TM_CONTROL_STREAM_ID, TM_REPORT_STREAM_ID, TOPOLOGY_MASTER_ID, Tuple

log = logging.getLogger(__name__)

#: A spout's offsets in its state.
OFFSETS_KEY = "__offsets"
#: A windowed bolt's window contents in its window state.
WINDOW_KEY = "window"
#: Seconds between two hellos of a task to the master.
HELLO_SECS = 0.5


class _Reporter:
    """Sends this task's reports to the Topology Master (``__tm``)."""

    def __init__(self, executor: Any, task: int):
        self.executor = executor
        self.task = task
        self.master = executor.ws.component_tasks[TOPOLOGY_MASTER_ID][0]
        self.incarnation = random.getrandbits(62)
        self.ws = executor.ws

    def drops(self) -> int:
        ws = self.ws
        return ws.dropped_batches + ws.dropped_tuples + ws.dropped_frames

    def send(self, *event: Any) -> None:
        self.executor.send_system(self.master, self.task, TM_REPORT_STREAM_ID, [list(event)])

    def hello(self, epoch: int | None) -> None:
        self.send("hello", self.incarnation, -1 if epoch is None else epoch, self.drops())

    def prepared(self, txid: int, epoch: int) -> None:
        self.send("prepared", txid, epoch, self.drops())

    def restored(self, epoch: int) -> None:
        self.send("restored", epoch, self.drops())

    def failed(self, epoch: int) -> None:
        self.send("failed", epoch, self.drops())


class _TaskState:
    """A task's state across checkpoints (stateful bolts and spouts)."""

    def __init__(self, state: State, before_commit: Callable[[int], Any] | None = None,
                 after_commit: Callable[[int], Any] | None = None):
        self.state = state
        self.prepared: int | None = None
        #: The component's hooks (a bolt's pre_commit, a spout's checkpoint_committed), run
        #: on every commit: the master's, or the one a later barrier implies.
        self.before_commit = before_commit
        self.after_commit = after_commit

    def commit_through(self, txid: int) -> None:
        """Commit the prepared transaction if it is ``txid`` or older (a later barrier or
        the master's commit proves it completed)."""
        if self.prepared is not None and self.prepared <= txid:
            done = self.prepared
            if self.before_commit is not None:
                self.before_commit(done)
            self.state.commit(done)
            self.prepared = None
            if self.after_commit is not None:
                self.after_commit(done)

    def prepare(self, txid: int) -> None:
        if self.prepared is not None:  # barrier N+1 proves N completed everywhere
            self.commit_through(txid - 1)
        self.state.prepare_commit(txid)
        self.prepared = txid

    def restore(self, txid: int) -> None:
        # Restoring may commit the prepared checkpoint whose commit never arrived: the
        # hooks run then too (as Storm's preCommit runs for a recovery's COMMIT).
        committing = self.state.prepared_txid() == txid
        if committing and self.before_commit is not None:
            self.before_commit(txid)
        self.state.restore(txid)
        self.prepared = None
        if committing and self.after_commit is not None:
            self.after_commit(txid)


class BoltBarrier:
    """One bolt task under barrier checkpointing: wraps its execute."""

    def __init__(self, executor: Any, task: int, execute: Callable[[Tuple], Any], out: Any,
                 context: Any, conf: Any, bolt: Any, aligned: bool, window: Any = None):
        self.execute = execute
        self.out = out
        self.bolt = bolt
        self.aligned = aligned
        self.channels = upstream_tasks(context)
        self.report = _Reporter(executor, task)
        self.name = f"{context.this_component_id}:{task}"
        self.store = _TaskState(task_state(bolt, f"{context.this_component_id}-{task}", conf,
                                           context),
                                before_commit=bolt.pre_commit) if is_stateful(bolt) else None
        #: A windowed bolt's window host: its contents are checkpointed in a state of their own.
        self.window = window
        self.window_store = None if window is None else _TaskState(
            get_state(f"{context.this_component_id}-{task}-window", conf, context))
        self.initialized = False
        self.epoch: int | None = None
        #: Channels whose RESTORE marker of this epoch arrived (their tuples count).
        self.live: set[int] = set()
        #: Aligning: the checkpoint, and the channels whose barrier came with the tuples
        #: they sent since (held until every channel's barrier has come).
        self.aligning: int | None = None
        self.held: dict[int, list[Tuple]] = {}
        #: Held tuples, bounded like the receive queue they came from: at its high water
        #: mark the queue is pinned congested, so spouts pause (backpressure) until the
        #: slow channels' barriers come.
        self.held_count = 0
        self.queue = executor.queue
        self.pinned = False
        self.last_snapshot = -1
        #: True when every channel is live and none is blocked: tuples go straight through.
        self.normal = False
        self.discarded = 0
        #: The task's failed count when this epoch began, and whether a failure of this
        #: epoch went to the master: a failed tuple has no acker to replay it, so the
        #: master starts a recovery (the spouts rewind to the last checkpoint).
        self.failed_base = self._failed()
        self.failure_sent = False
        executor.add_timer(HELLO_SECS, self._beat)
        self.report.hello(None)

    def _failed(self) -> int:
        stats = getattr(self.out, "stats", None)
        return int(getattr(stats, "failed", 0))

    def _beat(self) -> None:
        self.report.hello(self.epoch)
        self._check_failed()

    def _check_failed(self) -> bool:
        """Whether a tuple of this epoch failed; if so, tell the master (at each call until
        the recovery's new epoch comes)."""
        if self.epoch is None or self._failed() <= self.failed_base:
            return False
        if not self.failure_sent:
            self.failure_sent = True
            log.warning("%s: epoch %d: %d tuple(s) failed; asking the topology master for a "
                        "recovery from the last checkpoint", self.name, self.epoch,
                        self._failed() - self.failed_base)
        # Said again at every beat until the recovery's new epoch comes: a master that was
        # restarting (or still waiting for every task) when it first came does not lose it.
        self.report.failed(self.epoch)
        return True

    def run(self, tup: Tuple) -> Any:
        stream = tup.source_stream
        if stream == CHECKPOINT_STREAM_ID:
            return self.on_checkpoint(tup)
        if stream == TM_CONTROL_STREAM_ID:
            return self.on_control(tup.values[0])
        if self.normal:
            return self.execute(tup)
        c = tup.source_task
        if c in self.channels:
            if c not in self.live:  # sent before this channel's restore: abandoned
                self.discarded += 1
                return None
            held = self.held.get(c)
            if held is not None:
                held.append(tup)
                self.held_count += 1
                if self.held_count >= self.queue.high and not self.pinned:
                    self.pinned = True
                    self.queue.pin(True)
                    log.info("%s: holding %d tuples while checkpoint %s waits for barriers "
                             "from tasks %s: backpressure until they come", self.name,
                             self.held_count, self.aligning,
                             sorted(self.channels - self.held.keys()))
                return None
        elif self.epoch is None:  # tick tuples too wait for the state
            return None
        return self.execute(tup)

    def _update(self) -> None:
        self.normal = self.aligning is None and self.live >= self.channels

    def on_control(self, event: list) -> None:
        if event[0] != "commit":
            return
        txid = event[1]
        if self.store is not None:
            self.store.commit_through(txid)
        if self.window_store is not None:
            self.window_store.commit_through(txid)

    def on_checkpoint(self, tup: Tuple) -> None:
        txid, action, epoch = tup.values
        c = tup.source_task
        if action == RESTORE:
            self.on_restore(c, txid, epoch)
        elif action == BARRIER and epoch == self.epoch and c in self.live:
            self.on_barrier(c, txid)

    def on_restore(self, c: int, txid: int, epoch: int) -> None:
        if self.epoch is not None and epoch < self.epoch:
            return
        if self.epoch is None or epoch > self.epoch:
            log.info("%s: epoch %d: restoring checkpoint %d (%d tuples of the last epoch "
                     "discarded)", self.name, epoch, txid, self.discarded)
            self.epoch = epoch
            self.failed_base, self.failure_sent = self._failed(), False
            self.live = set()
            self.aligning, self.held = None, {}
            self._released()
            self.last_snapshot = txid
            if self.store is not None:
                if self.initialized:
                    self.bolt.pre_rollback()
                self.store.restore(txid)
                if not self.initialized:
                    self.bolt.init_state(self.store.state)
                    self.initialized = True
            if self.window is not None:
                self.window_store.restore(txid)
                self.window.restore(self.window_store.state.get(WINDOW_KEY))
            self.out.emit([txid, RESTORE, epoch], CHECKPOINT_STREAM_ID)
        self.live.add(c)
        if self.live >= self.channels:
            self.report.restored(epoch)
        self._update()

    def on_barrier(self, c: int, txid: int) -> None:
        if not self.aligned:
            if txid > self.last_snapshot:
                self.snapshot(txid)
            return
        if self.aligning is None:
            if txid <= self.last_snapshot:
                return
            self.aligning = txid
        self.held.setdefault(c, [])
        self._update()
        if self.held.keys() >= self.channels:
            self.snapshot(txid)
            held, self.held, self.aligning = self.held, {}, None
            self._released()
            self._update()
            for tuples in held.values():
                for t in tuples:
                    self.run(t)

    def _released(self) -> None:
        self.held_count = 0
        if self.pinned:
            self.pinned = False
            self.queue.pin(False)

    def snapshot(self, txid: int) -> None:
        self.last_snapshot = txid
        flush = getattr(self.bolt, "flush_before_checkpoint", None)
        if flush is not None:
            flush(txid)  # a batching sink writes what it holds: the checkpoint covers it
        if self._check_failed():
            return  # no checkpoint of this epoch completes: the master recovers
        if self.store is not None:
            self.bolt.pre_prepare(txid)
            self.store.prepare(txid)
        if self.window is not None:
            self.window_store.state.put(WINDOW_KEY, self.window.snapshot())
            self.window_store.prepare(txid)
        self.out.emit([txid, BARRIER, self.epoch], CHECKPOINT_STREAM_ID)
        self.report.prepared(txid, self.epoch)


class SpoutBarrier:
    """One spout task under barrier checkpointing: snapshots, barriers and restores."""

    def __init__(self, executor: Any, task: int, spout: Any):
        self.executor = executor
        self.task = task
        self.spout = spout
        self.report = _Reporter(executor, task)
        self.collector: Any = None
        self.store: _TaskState | None = None
        self.epoch: int | None = None
        #: next_tuple runs only once the spout restored an epoch.
        self.ready = False
        self.pending_restore: tuple[int, int] | None = None
        executor.add_timer(HELLO_SECS, lambda: self.report.hello(self.epoch))

    def opened(self, collector: Any, conf: Any, context: Any) -> None:
        if not isinstance(self.spout, CheckpointedSpout):
            raise TypeError(
                f"spout {context.this_component_id!r} is a {type(self.spout).__name__}: "
                "barrier checkpointing rewinds spouts after a failure, so every spout must be "
                "a squall.client.CheckpointedSpout (snapshot/restore)")
        self.collector = collector
        self.store = _TaskState(get_state(f"{context.this_component_id}-{self.task}", conf,
                                          context),
                                after_commit=self.spout.checkpoint_committed)
        self.report.hello(None)
        if self.pending_restore is not None:
            self.restore(*self.pending_restore)

    def on_control(self, event: list) -> None:
        kind = event[0]
        if kind == "restore":
            if self.store is None:
                self.pending_restore = (event[1], event[2])
            else:
                self.restore(event[1], event[2])
        elif kind == "trigger":
            if self.ready and event[2] == self.epoch:
                self.trigger(event[1])
        elif kind == "commit" and self.store is not None:
            self.store.commit_through(event[1])

    def restore(self, txid: int, epoch: int) -> None:
        if self.epoch is not None and epoch <= self.epoch:
            return
        self.pending_restore = None
        self.store.restore(txid)
        offsets = self.store.state.get(OFFSETS_KEY)
        log.info("spout task %d: epoch %d: rewinding to checkpoint %d (offsets %r)", self.task,
                 epoch, txid, offsets)
        self.spout.restore(offsets)
        self.epoch = epoch
        self.collector.emit([txid, RESTORE, epoch], CHECKPOINT_STREAM_ID)
        self.report.restored(epoch)
        self.ready = True

    def trigger(self, txid: int) -> None:
        self.store.state.put(OFFSETS_KEY, self.spout.snapshot())
        self.store.prepare(txid)
        self.collector.emit([txid, BARRIER, self.epoch], CHECKPOINT_STREAM_ID)
        self.report.prepared(txid, self.epoch)
