"""The Squall components a Trident topology compiles to (planner.py wires them).

* :class:`MasterBatchCoordinatorSpout` -- Storm's ``MasterBatchCoordinator``: runs
  :class:`~squall.client.trident.coordinator.MasterCoordinator` and does its IO:
  ``$batch`` and ``$commit`` tuples tracked by the acker (message id = the attempt),
  ``$success`` untracked, the current txid and attempt ids in the transactional state.
* :class:`SpoutCoordinatorBolt` -- Storm's ``TridentSpoutCoordinator``: each txid's
  metadata from the spout's :class:`~squall.client.trident.spout.BatchCoordinator`,
  kept per txid so a replay gets the same.
* :class:`BatchBolt` -- Storm's ``TridentBoltExecutor``: drives a
  :class:`~squall.client.trident.batch_tracker.BatchTracker` for what it hosts: the
  spout's emitter (:class:`SpoutBatch`) or a chain of operations (:mod:`.processors`).
  Every tuple it emits is anchored to the input being processed (or, when a batch
  finishes, to the tuple that completed it), so the master's ``$batch`` tree
  completes only when the whole batch went through, and ``$commit``'s only when
  every committer finished it.
"""

from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

from .. import config as cfg
from ..components import Bolt, Spout
from ..errors import FailedException, ReportedFailedException
from . import batch_tracker as bt
from . import coordinator as mc
from .attempt import (BATCH_STREAM, COMMIT_STREAM, ID_FIELD, SUCCESS_STREAM, TransactionAttempt,
                      coord_stream)
from .tx_state import RotatingTransactionalState, make_tx_state

#: Where the master keeps its progress in each spout's transactional state (Storm's names).
CURRENT_TX, CURRENT_ATTEMPTS = "currtx", "currattempts"
#: Seconds between tick tuples of batch executors (they expire stale batches on ticks).
TICK_SECS = 5


class MasterBatchCoordinatorSpout(Spout):
    """One per batch group; ``spouts`` maps each transactional id to its TridentSpout."""

    def __init__(self, spouts: Mapping[str, Any]):
        self.spouts = dict(spouts)

    def open(self, conf, context, collector):
        self.collector = collector
        self.states = {txid: make_tx_state(txid, conf) for txid in self.spouts}
        coords = [s.get_coordinator(txid, conf, context) for txid, s in self.spouts.items()]
        self.coordinators = coords
        self.machine = mc.MasterCoordinator.from_conf(
            conf, spouts_ready=lambda txid: any(c.is_ready(txid) for c in coords))
        stored = [(st.get_data(CURRENT_TX), st.get_data(CURRENT_ATTEMPTS))
                  for st in self.states.values()]
        self._run(self.machine.handle(mc.Restore.merged(stored, stimulus_id="open")))

    def next_tuple(self):
        self._run(self.machine.handle(mc.Sync(now=time.monotonic(), stimulus_id="next")))

    def ack(self, msg_id):
        attempt = TransactionAttempt(*msg_id)
        self._run(self.machine.handle(mc.Ack(attempt, now=time.monotonic(),
                                             stimulus_id=f"ack-{attempt}")))

    def fail(self, msg_id):
        attempt = TransactionAttempt(*msg_id)
        self._run(self.machine.handle(mc.Fail(attempt, now=time.monotonic(),
                                              stimulus_id=f"fail-{attempt}")))

    def activate(self):
        self._run(self.machine.handle(mc.Activate(stimulus_id="activate")))

    def deactivate(self):
        self._run(self.machine.handle(mc.Deactivate(stimulus_id="deactivate")))

    def _run(self, instructions: list) -> None:
        for inst in instructions:
            if isinstance(inst, mc.EmitBatch):
                a = inst.attempt
                self.collector.emit([a.to_list()], stream=BATCH_STREAM, msg_id=(a.txid, a.attempt_id))
            elif isinstance(inst, mc.EmitCommit):
                a = inst.attempt
                self.collector.emit([a.to_list()], stream=COMMIT_STREAM,
                                    msg_id=(a.txid, a.attempt_id))
            elif isinstance(inst, mc.EmitSuccess):
                self.collector.emit([inst.attempt.to_list()], stream=SUCCESS_STREAM)
            elif isinstance(inst, mc.PersistCurrentTx):
                for st in self.states.values():
                    st.set_data(CURRENT_TX, inst.txid)
            elif isinstance(inst, mc.PersistAttempts):
                for st in self.states.values():
                    st.set_data(CURRENT_ATTEMPTS, inst.to_json())
            else:
                raise TypeError(inst)

    def close(self):
        for c in self.coordinators:
            c.close()
        for st in self.states.values():
            st.close()

    def declare_output_fields(self, declarer):
        for stream in (BATCH_STREAM, COMMIT_STREAM, SUCCESS_STREAM):
            declarer.declare_stream(stream, [ID_FIELD])


class SpoutCoordinatorBolt(Bolt):
    """Turns the master's ``$batch`` into ``$batch`` [attempt, metadata] for the spout's tasks."""

    def __init__(self, txid: str, spout: Any):
        self.txid, self.spout = txid, spout

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.coordinator = self.spout.get_coordinator(self.txid, conf, context)
        self.state = make_tx_state(self.txid, conf)
        self.metas = RotatingTransactionalState(self.state, "meta")

    def execute(self, tup):
        attempt = TransactionAttempt.from_list(tup.values[0])
        if tup.source_stream == SUCCESS_STREAM:
            self.metas.cleanup_before(attempt.txid)
            self.coordinator.success(attempt.txid)
        else:
            txid = attempt.txid
            meta = self.coordinator.initialize_transaction(
                txid, self.metas.previous_state(txid), self.metas.get_state(txid))
            self.metas.override_state(txid, meta)
            self.collector.emit([attempt.to_list(), meta], stream=BATCH_STREAM, anchors=tup)
        self.collector.ack(tup)

    def cleanup(self):
        self.coordinator.close()
        self.state.close()

    def declare_output_fields(self, declarer):
        declarer.declare_stream(BATCH_STREAM, [ID_FIELD, "metadata"])


class BatchCollector:
    """What hosted code emits into: the current batch's output, anchored and counted."""

    def __init__(self, bolt: "BatchBolt"):
        self.bolt = bolt
        self.anchor: Any = None
        self.batch: TransactionAttempt | None = None
        self.emitted: list[int] = []
        self._id: list[int] | None = None

    def start(self, batch: TransactionAttempt, anchor: Any) -> None:
        """Emits from now on belong to ``batch`` and are anchored on ``anchor``."""
        self.batch, self.anchor, self.emitted = batch, anchor, []
        self._id = batch.to_list()  # shared by the batch's tuples: nobody mutates it

    def emit_to(self, stream: str, values: Sequence[Any]) -> None:
        tasks = self.bolt.collector.emit([self._id, *values], stream=stream,
                                         anchors=self.anchor)
        self.emitted.extend(tasks)

    def report_error(self, error: BaseException | str) -> None:
        self.bolt.collector.report_error(error)


class BatchBolt(Bolt):
    """Storm's ``TridentBoltExecutor`` around ``hosted`` (a :class:`SpoutBatch` or a
    :class:`~squall.client.trident.processors.Subtopology`).

    ``batch_group`` names the coordination stream; ``upstream`` are the batch components
    reporting to it (none for a spout executor); ``committer`` waits for ``$commit``.
    """

    def __init__(self, hosted: Any, batch_group: str, upstream: Sequence[str],
                 committer: bool, outputs: Mapping[str, list[str]]):
        self.hosted = hosted
        self.batch_group = batch_group
        self.upstream = list(upstream)
        self.committer = committer
        #: stream id -> fields (without the leading batch id) this component emits.
        self.outputs = dict(outputs)

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.coord = coord_stream(self.batch_group)
        me = context.this_component_id
        targets = sorted({t for s in self.outputs for c in context.this_targets(s)
                          for t in context.component_tasks(c)})
        condition = bt.CoordCondition.from_upstream(
            {c: len(context.component_tasks(c)) for c in self.upstream},
            committer=self.committer, target_tasks=targets)
        timeout = float(conf.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30))
        self.tracker = bt.BatchTracker(condition, message_timeout_secs=timeout)
        self.out = BatchCollector(self)
        self.tuples: dict[int, Any] = {}
        #: tuple id -> its batch attempt, to let go of a dropped attempt's tuples.
        self.batch_of: dict[int, TransactionAttempt] = {}
        self.batch_states: dict[int, Any] = {}
        self._next_id = 0
        self._last_raw: Any = None
        self._last_batch: TransactionAttempt | None = None
        self.hosted.prepare(conf, context, self.out, me)

    # -- input ---------------------------------------------------------------------------
    def execute(self, tup):
        if tup.is_tick:
            self._run(self.tracker.handle(bt.Tick(time.monotonic(), stimulus_id="tick")))
            return
        stream = tup.source_stream
        if self.hosted.is_control(tup):  # a spout's $commit / $success: not a batch tuple
            self.hosted.control(tup)
            self.collector.ack(tup)
            return
        raw = tup.values[0]
        if raw != self._last_raw:  # a batch's tuples come in runs: decode its id once per run
            self._last_raw, self._last_batch = raw, TransactionAttempt.from_list(raw)
        batch = self._last_batch
        if stream != self.coord and stream != COMMIT_STREAM:
            t = self.tracker.accept_data(batch)
            if t is not None:
                self._execute_tracked(t, batch, tup)
                return
        tid = self._hold(tup, batch)
        sid = stream  # the history keys transitions by txid already; no string per tuple
        if stream == self.coord:
            ev = bt.CoordTuple(batch, int(tup.values[1]), tid, stimulus_id=sid)
        elif stream == COMMIT_STREAM:
            ev = bt.CommitTuple(batch, tid, stimulus_id=sid)
        else:
            ev = bt.DataTuple(batch, tid, stimulus_id=sid)
        self._run(self.tracker.handle(ev))
        tracked = self.tracker.batches.get(batch.txid)
        if tid in self.tuples and (tracked is None or tracked.batch != batch):
            self._forget(tid)  # an older attempt's tuple: ignored; its tree times out

    def _execute_tracked(self, t: Any, batch: TransactionAttempt, tup: Any) -> None:
        """A data tuple of a batch in progress (BatchTracker.accept_data): run it, count its
        emits, ack it; the same as the full path's Execute / Emitted / Executed / AckTuple."""
        out = self.out
        out.start(batch, tup)
        try:
            self.hosted.execute(self.batch_states.get(batch.txid), tup, out)
        except FailedException as e:
            failed: FailedException | None = e
        else:
            failed = None
        self.tracker.add_emitted(t, out.emitted)
        if failed is None:
            self.collector.ack(tup)
            return
        tid = self._hold(tup, batch)  # the tracker fails it with its batch
        self._run(self.tracker.handle(bt.ExecuteFailed(batch, tid, self._report(failed),
                                                       stimulus_id="execute")))

    def _hold(self, tup: Any, batch: TransactionAttempt) -> int:
        """Keep ``tup`` under a new id the tracker's events and instructions name."""
        self._next_id += 1
        tid = self._next_id
        self.tuples[tid] = tup
        self.batch_of[tid] = batch
        return tid

    def _report(self, failed: BaseException | None) -> bool:
        """Report a ReportedFailedException to the topology's errors; whether it was one."""
        report = isinstance(failed, ReportedFailedException)
        if report:
            self.collector.report_error(failed)
        return report

    def _forget(self, tid: int) -> Any:
        self.batch_of.pop(tid, None)
        return self.tuples.pop(tid)

    def _run(self, instructions: list) -> None:
        for inst in instructions:
            if isinstance(inst, bt.StartBatch):
                self.batch_states[inst.batch.txid] = self.hosted.init_batch(inst.batch)
            elif isinstance(inst, bt.Execute):
                self._call(inst.batch, self.tuples[inst.tuple_id], inst.tuple_id)
            elif isinstance(inst, bt.FinishBatch):
                self._call(inst.batch, None, None)
            elif isinstance(inst, bt.SendCoord):
                anchor = self.tuples.get(inst.anchor)
                for task, n in inst.task_counts.items():
                    self.collector.emit_direct(task, [inst.batch.to_list(), n],
                                               stream=self.coord, anchors=anchor)
            elif isinstance(inst, bt.AckTuple):
                self.collector.ack(self._forget(inst.tuple_id))
            elif isinstance(inst, bt.FailTuple):
                self.collector.fail(self._forget(inst.tuple_id))
            elif isinstance(inst, bt.FailBatch):
                self.batch_states.pop(inst.batch.txid, None)
            elif isinstance(inst, bt.DropBatch):
                # Superseded or expired: what it still held is neither acked nor failed (its
                # tree times out, as in Storm); only our references go.
                self.batch_states.pop(inst.batch.txid, None)
                for tid in [t for t, b in self.batch_of.items() if b == inst.batch]:
                    self._forget(tid)
            else:
                raise TypeError(inst)

    def _call(self, batch: TransactionAttempt, tup: Any, tid: int | None) -> None:
        """Run hosted code for one input (``tup``) or the batch's finish (``tup`` None) and
        feed the tracker what it emitted and how it ended."""
        out = self.out
        t = self.tracker.batches.get(batch.txid)
        out.start(batch, tup if tup is not None else self.tuples.get(t.anchor if t else None))
        state = self.batch_states.get(batch.txid)
        failed: BaseException | None = None
        try:
            if tup is None:
                self.hosted.finish_batch(state, out)
            else:
                self.hosted.execute(state, tup, out)
        except FailedException as e:
            failed = e
        counts: dict[int, int] = {}
        for task in out.emitted:
            counts[task] = counts.get(task, 0) + 1
        events: list = [bt.Emitted(batch, task, n, stimulus_id="emit")
                        for task, n in counts.items()]
        sid = "finish" if tup is None else "execute"
        report = self._report(failed)
        if tup is None:
            events.append(bt.FinishFailed(batch, report, stimulus_id=sid) if failed
                          else bt.Finished(batch, stimulus_id=sid))
        else:
            events.append(bt.ExecuteFailed(batch, tid, report, stimulus_id=sid) if failed
                          else bt.Executed(batch, tid, stimulus_id=sid))
        for ev in events:
            self._run(self.tracker.handle(ev))
        if tup is None and not failed:
            self.batch_states.pop(batch.txid, None)

    def cleanup(self):
        self.hosted.cleanup()

    def declare_output_fields(self, declarer):
        for stream, fields in self.outputs.items():
            declarer.declare_stream(stream, [ID_FIELD, *fields])
        declarer.declare_stream(coord_stream(self.batch_group), [ID_FIELD, "count"], direct=True)

    @property
    def requires_extras(self) -> tuple[str, ...]:
        """The extras (client/extras.py) of what it hosts: the spout, operations, states."""
        parts: list[Any] = [getattr(self.hosted, "spout", None)]
        for n in getattr(self.hosted, "nodes", ()):
            state = n.state.state if n.kind == "query" else n.state  # a query names its persist
            parts += [n.op, state]
        return tuple(sorted({e for p in parts if p is not None
                             for e in getattr(p, "requires_extras", ())}))

    def get_component_configuration(self):
        conf: dict = {cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS: TICK_SECS}
        # A state whose updates block for seconds (the Spark bridge's) gets a thread of its
        # own, so the worker's event loop (and the ackers on it) keeps running meanwhile.
        if any(getattr(n.state, "blocking", False) for n in getattr(self.hosted, "nodes", ())
               if getattr(n, "state", None) is not None):
            conf[cfg.TOPOLOGY_EXECUTOR_THREADED] = True
        return conf


class _StreamOut:
    """A TridentCollector emitting on one stream of the batch being processed."""

    def __init__(self, out: BatchCollector, stream: str):
        self.out, self.stream = out, stream
        self.batch = out.batch

    def emit(self, values: Sequence[Any]) -> None:
        self.out.emit_to(self.stream, values)

    def report_error(self, error: BaseException | str) -> None:
        self.out.report_error(error)


class SpoutBatch:
    """What a spout executor hosts: the spout's emitter (Storm's ``TridentSpoutExecutor``)."""

    def __init__(self, txid: str, spout: Any, stream: str):
        self.txid, self.spout, self.stream = txid, spout, stream

    def prepare(self, conf, context, out: BatchCollector, component: str) -> None:
        self.emitter = self.spout.get_emitter(self.txid, conf, context)

    def is_control(self, tup) -> bool:
        return tup.source_stream in (COMMIT_STREAM, SUCCESS_STREAM)

    def control(self, tup) -> None:
        attempt = TransactionAttempt.from_list(tup.values[0])
        if tup.source_stream == COMMIT_STREAM:
            self.emitter.commit(attempt)
        else:
            self.emitter.success(attempt)

    def init_batch(self, batch: TransactionAttempt) -> Any:
        return None

    def execute(self, state: Any, tup, out: BatchCollector) -> None:
        self.emitter.emit_batch(out.batch, tup.values[1], _StreamOut(out, self.stream))

    def finish_batch(self, state: Any, out: BatchCollector) -> None:
        pass

    def cleanup(self) -> None:
        self.emitter.close()
