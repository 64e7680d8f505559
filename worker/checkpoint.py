"""Checkpoint tuples in a bolt task: forwarding them, and committing a stateful bolt's state.

Storm's BaseStatefulBoltExecutor, CheckpointTupleForwarder and StatefulBoltExecutor,
as wrappers of one task's ``execute`` (client/stateful.py has the protocol). A
``$checkpoint`` tuple counts once per input task; when every input task's copy of an
(action, txid) has arrived the task acts on it and sends it on, anchored, to the bolts
downstream; the earlier copies are acked at once.

A stateful task holds its inputs' acks: those acked before a PREPARE are acked when
that transaction commits, and failed (replayed by their spouts) if it rolls back.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from ..client.state import KeyValueState, State, get_state
from ..client.stateful import (CHECKPOINT_STREAM_ID, COMMIT, INITSTATE, PREPARE, ROLLBACK,
                               StatefulBolt, StatefulWindowedBolt)
from ..client.tuple import DEFAULT_STREAM, Tuple
from .dedupe import MutableState, SeenTuples, retention_secs
from .lineage import tuple_key

log = logging.getLogger(__name__)


def upstream_tasks(context: Any) -> frozenset[int]:
    """The tasks whose checkpoint tuples (barriers) this task waits for: every task of each
    component it reads ``$checkpoint`` from."""
    return frozenset(t for c, s in context.this_sources() if s == CHECKPOINT_STREAM_ID
                     for t in context.component_tasks(c))


def task_state(component: Any, namespace: str, conf: Any, context: Any) -> State:
    """A stateful task's state: the component's own (``new_state``) or the provider's."""
    own = getattr(component, "new_state", None)
    state = own(namespace, conf, context) if callable(own) else None
    return state if state is not None else get_state(namespace, conf, context)


class CheckpointGate:
    """Counts the copies of each (action, txid): one per task upstream on ``$checkpoint``."""

    def __init__(self, inputs: int):
        self.inputs = max(1, inputs)
        self.counts: dict[tuple[str, int], int] = {}
        self.last_txid: int | None = None

    @classmethod
    def for_context(cls, context: Any) -> "CheckpointGate":
        return cls(len(upstream_tasks(context)))

    def arrived(self, action: str, txid: int) -> bool:
        """True when this copy is the last one awaited."""
        key = (action, txid)
        n = self.counts.get(key, 0) + 1
        if n < self.inputs:
            self.counts[key] = n
            return False
        self.counts.pop(key, None)
        return True

    def current(self, action: str, txid: int) -> bool:
        """False for an old transaction (Storm ignores those, acking them)."""
        if self.last_txid is not None and txid < self.last_txid:
            return False
        self.last_txid = txid - 1 if action == ROLLBACK else txid
        return True


def _forward(out: Any, tup: Tuple, txid: int, action: str) -> None:
    out.emit([txid, action], CHECKPOINT_STREAM_ID, [tup])
    out.ack_system(tup)


def forwarding(execute: Callable[[Tuple], Any], out: Any, context: Any) -> Callable[[Tuple], Any]:
    """A non-stateful task's execute in a stateful topology: checkpoint tuples pass through."""
    gate = CheckpointGate.for_context(context)

    def run(tup: Tuple) -> Any:
        if tup.source_stream != CHECKPOINT_STREAM_ID:
            return execute(tup)
        txid, action = tup.values
        if gate.arrived(action, txid) and gate.current(action, txid):
            _forward(out, tup, txid, action)
        else:
            out.ack_system(tup)
    return run


class CollectorWrapper:
    """A collector over the executor's OutputCollector that changes how some calls behave;
    the rest go straight through (the wrappers below and worker/windowed.py's)."""

    def __init__(self, out: Any):
        self.out = out

    def emit_direct(self, task: int, values: list, stream: str = DEFAULT_STREAM,
                    anchors: Any = None) -> list[int]:
        return self.emit(values, stream, anchors, task)

    def fail(self, tup: Tuple) -> None:
        self.out.fail(tup)

    def reset_timeout(self, tup: Tuple) -> None:
        self.out.reset_timeout(tup)

    def report_error(self, error: Any) -> None:
        self.out.report_error(error)

    def flush(self) -> None:
        self.out.flush()

    def call_soon_threadsafe(self, fn: Any) -> None:
        self.out.call_soon_threadsafe(fn)


class HoldingCollector(CollectorWrapper):
    """A stateful bolt's collector: acks wait for the commit, and every emit is anchored
    (Storm's AckTrackingOutputCollector and AnchoringOutputCollector)."""

    def __init__(self, out: Any):
        super().__init__(out)
        self.acked: list[Tuple] = []
        #: Exactly-once acker checkpointing: an acked tuple's key is saved with the state.
        self.seen: SeenTuples | None = None

    def take_acked(self) -> list[Tuple]:
        acked, self.acked = self.acked, []
        return acked

    def emit(self, values: list, stream: str = DEFAULT_STREAM, anchors: Any = None,
             direct_task: int | None = None, msg_id: Any = None) -> list[int]:
        if not anchors:
            raise ValueError("a stateful bolt must anchor its emits (anchors=[input]) so a "
                             "rolled-back checkpoint replays them")
        return self.out.emit(values, stream, anchors, direct_task)

    def emit_anchored(self, values: list, stream: str, anchor: Tuple,
                      direct_task: int | None = None) -> list[int]:
        return self.out.emit_anchored(values, stream, anchor, direct_task)

    def ack(self, tup: Tuple) -> None:
        self.acked.append(tup)
        if self.seen is not None and tup.ids:
            self.seen.add(tuple_key(tup.ids))


class StatefulTask:
    """One stateful bolt task: its state, its held acks and the checkpoint actions.

    ``bolt`` needs ``init_state``, ``pre_prepare``, ``pre_commit``, ``pre_rollback`` and a
    ``run(tup)`` (``execute`` for a StatefulBolt, the window host's for a stateful
    window) fed once the state is initialized.

    With ``dedupe`` (exactly-once acker checkpointing, a KeyValueState) the task keeps the
    keys of what it acked (worker/dedupe.py) and runs a replay of a saved tuple with its
    state muted. The bolt must write the state in the ``execute`` of the tuple the write
    belongs to: a write made later (a batch flushed on a tick) escapes the mute.
    """

    def __init__(self, bolt: Any, run: Callable[[Tuple], Any], out: Any,
                 collector: HoldingCollector, context: Any, conf: Any,
                 state: State | None = None, dedupe: bool = False,
                 seen_store: KeyValueState | None = None):
        self.bolt = bolt
        self.run_tuple = run
        self.out = out
        self.collector = collector
        self.gate = CheckpointGate.for_context(context)
        namespace = f"{context.this_component_id}-{context.this_task_id}"
        self.state = state if state is not None else task_state(bolt, namespace, conf, context)
        self.initialized = False
        self.pending: list[Tuple] = []
        self.prepared: list[Tuple] = []
        self.name = f"{context.this_component_id}:{context.this_task_id}"
        self.view: Any = self.state
        self.seen: SeenTuples | None = None
        if dedupe and not isinstance(self.state, KeyValueState):
            log.warning("%s: its state (%s) is not a KeyValueState, whose writes a replay "
                        "can skip: replays of saved tuples apply again (at-least-once)",
                        self.name, type(self.state).__name__)
        elif dedupe:
            store = seen_store if seen_store is not None else get_state(
                namespace + "$seen", conf, context)
            self.seen = SeenTuples(store, retention_secs(conf))  # type: ignore[arg-type]
            collector.seen = self.seen
            self.view = MutableState(self.state)  # type: ignore[arg-type]

    def execute(self, tup: Tuple) -> Any:
        if tup.source_stream == CHECKPOINT_STREAM_ID:
            return self.checkpoint(tup)
        if self.initialized:
            return self.process(tup)
        self.pending.append(tup)  # the state is not restored yet
        return None

    def process(self, tup: Tuple) -> Any:
        seen = self.seen
        ids = tup.ids
        if seen is None or not ids or not seen.known(tuple_key(ids)):
            return self.run_tuple(tup)
        view = self.view  # a replay of a saved tuple: emit and ack again, change nothing
        view.muted = True
        try:
            return self.run_tuple(tup)
        finally:
            view.muted = False

    def checkpoint(self, tup: Tuple) -> None:
        txid, action = tup.values
        if not (self.gate.arrived(action, txid) and self.gate.current(action, txid)):
            self.out.ack_system(tup)  # an earlier copy, or an old transaction
            return
        try:
            if not self.act(action, txid):
                self.out.fail_system(tup)
                return
        except Exception as exc:  # a state that cannot be saved: the spout recovers
            log.error("%s: checkpoint %s %s failed: %s", self.name, action, txid, exc)
            self.out.report_error(exc)
            self.out.fail_system(tup)
            return
        _forward(self.out, tup, txid, action)

    def act(self, action: str, txid: int) -> bool:
        """Do ``action``; False when it cannot be done now (the spout then recovers)."""
        if action == PREPARE:
            if not self.initialized:  # restarted mid-run: recover first (Storm fails it)
                log.info("%s: PREPARE %d before the state was restored; asking for recovery",
                         self.name, txid)
                return False
            self.bolt.pre_prepare(txid)
            self.state.prepare_commit(txid)
            if self.seen is not None:
                self.seen.prepare(txid)
            self.prepared.extend(self.collector.take_acked())
        elif action == COMMIT:
            self.bolt.pre_commit(txid)
            self.state.commit(txid)
            if self.seen is not None:
                self.seen.commit(txid)
                replays = self.seen.take_duplicates()
                if replays:
                    log.info("%s: %d replayed tuples its committed state holds ran without "
                             "changing it (transaction %d)", self.name, replays, txid)
            ack = self.out.ack
            for t in self.prepared:
                ack(t)
            self.prepared = []
        elif action == ROLLBACK:
            self.bolt.pre_rollback()
            self.state.rollback()
            if self.seen is not None:
                self.seen.rollback()
            fail = self.out.fail
            for t in self.prepared + self.collector.take_acked():
                fail(t)
            self.prepared = []
        elif action == INITSTATE:
            if not self.initialized:
                if self.seen is not None:
                    self.seen.restore()
                self.bolt.init_state(self.view)
                self.initialized = True
                log.info("%s: state restored (transaction %d); %d tuples waited for it%s",
                         self.name, txid, len(self.pending),
                         "" if self.seen is None else
                         f"; {len(self.seen)} saved tuples known by key")
                pending, self.pending = self.pending, []
                for t in pending:
                    self.process(t)
        return True


def host_bolt(executor: Any, bolt: Any, conf: Any, context: Any, out: Any) -> Callable[[Tuple], Any]:
    """Prepare a stateful or windowed bolt task and return what runs each of its tuples."""
    from .windowed import WindowHost  # it imports this module

    if isinstance(bolt, StatefulBolt):
        held = HoldingCollector(out)
        bolt.prepare(conf, context, held)
        return StatefulTask(bolt, bolt.execute, out, held, context, conf,
                            dedupe=executor.ws.lineage).execute
    if isinstance(bolt, StatefulWindowedBolt):
        # Evicted tuples are acked when the commit after their eviction saves the state.
        held = HoldingCollector(out)
        window = WindowHost(bolt, conf, context, out, held.ack, executor)
        bolt.prepare(conf, context, window.collector)
        return StatefulTask(bolt, window.execute, out, held, context, conf).execute
    window = WindowHost(bolt, conf, context, out, out.ack, executor)
    bolt.prepare(conf, context, window.collector)
    return window.execute
