"""Stateful bolts and Storm's checkpointing: :class:`StatefulBolt` and the checkpoint spout.

Storm's IStatefulBolt / BaseStatefulBolt and CheckpointSpout. When a topology has a
stateful bolt, :class:`~squall.client.topology.TopologyBuilder` adds the
``$checkpointspout`` and wires its ``$checkpoint`` stream through every bolt (all
grouping, from the checkpoint spout to the bolts that read spouts, and from each bolt to
the bolts that read it). The spout runs a three-phase commit over that stream, riding
the acker: every ``topology.state.checkpoint.interval.ms`` it sends PREPARE then COMMIT
for the next transaction id; after a failure (a checkpoint tuple failed or timed out, or
at start) ROLLBACK or COMMIT of the pending transaction, then INITSTATE.

In the worker (worker/checkpoint.py) a stateful bolt's acks are held until the commit
that saves the state they changed, so a tuple whose effect is not committed is replayed
by its spout after a failure; other bolts just forward the checkpoint tuples. That much
is Storm's, and at-least-once (``acker-at-least-once``): a tuple whose effect committed
can still be replayed when its acks die. The ``acker`` mode adds derived edge ids
(worker/lineage.py) and the keys each stateful task saved (worker/dedupe.py), so such a
replay leaves the state as it is: exactly-once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

from . import config as cfg
from .components import Component, Spout
from .windowing import WindowedBolt

CHECKPOINT_STREAM_ID = "$checkpoint"
CHECKPOINT_COMPONENT_ID = "$checkpointspout"
CHECKPOINT_FIELDS = ("txid", "action")

PREPARE = "PREPARE"
COMMIT = "COMMIT"
ROLLBACK = "ROLLBACK"
INITSTATE = "INITSTATE"

COMMITTED = "COMMITTED"
COMMITTING = "COMMITTING"
PREPARING = "PREPARING"

#: topology.state.checkpoint.mode values.
MODE_ACKER = "acker"
MODE_ACKER_AT_LEAST_ONCE = "acker-at-least-once"
MODE_BARRIER = "barrier"
MODE_BARRIER_AT_LEAST_ONCE = "barrier-at-least-once"
MODES = (MODE_ACKER, MODE_ACKER_AT_LEAST_ONCE, MODE_BARRIER, MODE_BARRIER_AT_LEAST_ONCE)

#: Barrier mode's messages on $checkpoint (values [txid, action, epoch]): a checkpoint's
#: barrier, and the marker after which a channel carries the restored epoch's tuples.
BARRIER = "BARRIER"
RESTORE = "RESTORE"


def checkpoint_mode(conf: Mapping[str, Any]) -> str:
    """The topology's checkpoint mode (ValueError naming the choices for another)."""
    mode = conf.get(cfg.TOPOLOGY_STATE_CHECKPOINT_MODE) or MODE_ACKER
    if mode not in MODES:
        raise ValueError(f"{cfg.TOPOLOGY_STATE_CHECKPOINT_MODE} is {mode!r}; choose one of "
                         f"{', '.join(MODES)}")
    return mode


def deduplicating(conf: Mapping[str, Any]) -> bool:
    """Storm's checkpointing made exactly-once: stateful bolts recognise replays of the
    tuples their committed state already holds (worker/lineage.py, worker/dedupe.py)."""
    return (conf.get(cfg.TOPOLOGY_STATE_CHECKPOINT_MODE) or MODE_ACKER) == MODE_ACKER


def barrier_mode(conf: Mapping[str, Any]) -> bool:
    return (conf.get(cfg.TOPOLOGY_STATE_CHECKPOINT_MODE) or MODE_ACKER) in \
        (MODE_BARRIER, MODE_BARRIER_AT_LEAST_ONCE)


def failures_rewind(conf: Mapping[str, Any], context: Any) -> bool:
    """Whether a tuple this bolt task fails rewinds every spout to the last checkpoint
    (barrier checkpointing of a checkpointed topology: there is no acker to replay the one
    tuple; worker/barrier.py). A tuple that can never succeed, a record that does not map,
    would then fail again on every replay: such a bolt reports it and acks it instead."""
    if not barrier_mode(conf):
        return False
    try:
        return any(stream == CHECKPOINT_STREAM_ID for _, stream in context.this_sources())
    except (AttributeError, TypeError):
        return False


#: The checkpoint spout's key in its own state.
TX_STATE_KEY = "__state"


@dataclass(frozen=True)
class CheckPointState:
    """The checkpoint spout's transaction: its id and phase (Storm's CheckPointState)."""

    txid: int
    state: str

    def next_state(self, recovering: bool) -> "CheckPointState":
        if self.state == PREPARING:
            return CheckPointState(self.txid - 1, COMMITTED) if recovering \
                else CheckPointState(self.txid, COMMITTING)
        if self.state == COMMITTING:
            return CheckPointState(self.txid, COMMITTED)
        if self.state == COMMITTED:
            return self if recovering else CheckPointState(self.txid + 1, PREPARING)
        raise ValueError(f"unknown checkpoint state {self.state!r}")

    def next_action(self, recovering: bool) -> str:
        if self.state == PREPARING:
            return ROLLBACK if recovering else PREPARE
        if self.state == COMMITTING:
            return COMMIT
        if self.state == COMMITTED:
            return INITSTATE if recovering else PREPARE
        raise ValueError(f"unknown checkpoint state {self.state!r}")


class CheckpointCoordinator:
    """The checkpoint spout's logic without a clock or a collector: a pure state machine.

    ``poll(now_ms)`` returns ``(txid, action)`` to emit or None; ``ack(txid)`` and
    ``fail(txid)`` are the checkpoint tuple's outcome. ``saved`` is the transaction state
    to persist after each call that changed it.
    """

    def __init__(self, tx: CheckPointState, interval_ms: float):
        self.tx = tx
        self.interval_ms = max(100.0, float(interval_ms))
        self.recovering = True
        self.in_progress = False
        self.last_checkpoint_ms: float | None = None
        self.saved: list[CheckPointState] = []

    def _save(self, tx: CheckPointState) -> None:
        self.tx = tx
        self.saved.append(tx)

    def poll(self, now_ms: float) -> tuple[int, str] | None:
        if self.in_progress:
            return None
        if self.recovering:
            self.in_progress = True
            return self.tx.txid, self.tx.next_action(True)
        due = self.last_checkpoint_ms is None or now_ms - self.last_checkpoint_ms > self.interval_ms
        if self.tx.state != COMMITTED or due:
            if self.tx.state == COMMITTED:
                self._save(self.tx.next_state(False))
                self.last_checkpoint_ms = now_ms
            self.in_progress = True
            return self.tx.txid, self.tx.next_action(False)
        return None

    def ack(self, txid: int) -> None:
        if txid == self.tx.txid:
            if self.recovering:
                nxt = self.tx.next_state(True)
                if nxt != self.tx:
                    self._save(nxt)
                else:
                    self.recovering = False
            else:
                self._save(self.tx.next_state(False))
        self.in_progress = False

    def fail(self, txid: int) -> None:
        self.recovering = True
        self.in_progress = False


class CheckpointSpout(Spout):
    """The ``$checkpointspout`` the builder adds (Storm's CheckpointSpout). Its transaction
    state lives in the topology's state provider, so a restarted topology recovers."""

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        from .state import get_state

        self.collector = collector
        self.state = get_state(f"{context.this_component_id}-{context.this_task_id}", conf,
                               context)
        raw = self.state.get(TX_STATE_KEY)
        if raw is None:
            tx = CheckPointState(-1, COMMITTED)
            self.state.put(TX_STATE_KEY, [tx.txid, tx.state])
            self.state.commit()
        else:
            tx = CheckPointState(int(raw[0]), str(raw[1]))
        self.coordinator = CheckpointCoordinator(
            tx, float(conf.get(cfg.TOPOLOGY_STATE_CHECKPOINT_INTERVAL) or 1000))

    def _persist(self) -> None:
        c = self.coordinator
        if c.saved:
            self.state.put(TX_STATE_KEY, [c.tx.txid, c.tx.state])
            self.state.commit()
            c.saved.clear()

    def next_tuple(self) -> None:
        step = self.coordinator.poll(time.monotonic() * 1000)
        self._persist()
        if step is not None:
            txid, action = step
            self.collector.emit([txid, action], stream=CHECKPOINT_STREAM_ID, msg_id=txid)

    def ack(self, msg_id: Any) -> None:
        self.coordinator.ack(int(msg_id))
        self._persist()

    def fail(self, msg_id: Any) -> None:
        self.coordinator.fail(int(msg_id))

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare_stream(CHECKPOINT_STREAM_ID, list(CHECKPOINT_FIELDS))


class CheckpointedSpout(Spout):
    """A spout that can rewind, for barrier checkpointing (the seed's contract).

    At each checkpoint the runtime calls ``snapshot()`` just before the spout's barrier
    goes out: return where the spout is (offsets, msgpack-able). After a failure every
    spout rewinds with ``restore(offsets)`` to the last completed checkpoint's snapshot
    (``None``: there is none yet, start from the beginning) and emits from there; the
    stateful bolts restore the same checkpoint, so each input counts exactly once.
    ``checkpoint_committed(txid)`` says a checkpoint completed everywhere (a source with
    an external position, a Kafka consumer group say, commits it there).

    Example::

        class Lines(CheckpointedSpout):
            def open(self, conf, context, collector):
                self.collector, self.pos = collector, 0
            def next_tuple(self):
                if self.pos < len(LINES):
                    self.collector.emit([LINES[self.pos]])
                    self.pos += 1
            def snapshot(self):
                return self.pos
            def restore(self, offsets):
                self.pos = offsets or 0
    """

    def snapshot(self) -> Any:
        raise NotImplementedError

    def restore(self, offsets: Any) -> None:
        raise NotImplementedError

    def checkpoint_committed(self, txid: int) -> None:
        """Checkpoint ``txid`` completed in every task."""


class StatefulComponent:
    """What checkpointing calls on a stateful bolt or windowed bolt (Storm's
    IStatefulComponent): the state once, and hooks around each commit."""

    def new_state(self, namespace: str, conf: Mapping[str, Any], context: Any) -> Any:
        """The task's :class:`~squall.client.state.State` when the component keeps its own
        (a file sink keeps a manifest beside its files, which must survive the worker
        whatever ``topology.state.provider`` is); None, the default: the provider's."""
        return None

    def init_state(self, state: Any) -> None:
        """Called once with the task's state (restored from the last commit)."""

    def pre_prepare(self, txid: int) -> None:
        """Just before the state is prepared for commit ``txid``."""

    def pre_commit(self, txid: int) -> None:
        """Just before the state is committed."""

    def pre_rollback(self) -> None:
        """Just before the state rolls back to the last commit."""


class StatefulBolt(StatefulComponent, Component):
    """A bolt whose state is saved at each checkpoint and restored after a failure
    (Storm's BaseStatefulBolt).

    Example, a word count that survives a worker crash::

        class WordCount(StatefulBolt):
            def init_state(self, state):
                self.counts = state          # a KeyValueState
            def execute(self, tup):
                word = tup.values[0]
                self.counts.put(word, self.counts.get(word, 0) + 1)
                self.collector.emit([word], anchors=[tup])
                self.collector.ack(tup)

    ``init_state`` runs before the first ``execute`` (tuples that arrive earlier wait).
    Ack each input as usual: the runtime holds the ack until the state that includes the
    tuple is committed, so an input is acked only once its effect is saved. Emits must be
    anchored. Choose where state lives with ``topology.state.provider``.
    """

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, tup: Any) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        pass


class StatefulWindowedBolt(StatefulComponent, WindowedBolt):
    """A windowed bolt with state (Storm's BaseStatefulWindowedBolt): ``init_state`` gets
    the task's state, and the window's position survives a worker restart."""


def is_stateful(obj: Any) -> bool:
    return isinstance(obj, StatefulComponent)
