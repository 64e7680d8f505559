"""Trident spouts: what a user implements, and the adapters that make partitioned spouts
transactional or opaque.

Storm's ``ITridentSpout`` (a :class:`BatchCoordinator` on one task decides each
txid's metadata; an :class:`Emitter` on every spout task emits the txid's batch),
``ICommitterTridentSpout`` (:attr:`TridentSpout.committer`: the emitter also gets
``commit(attempt)`` when the batch commits), ``IPartitionedTridentSpout``
(:class:`PartitionedSpout`: a txid always replays the same batch) and
``IOpaquePartitionedTridentSpout`` (:class:`OpaquePartitionedSpout`: a replay may
differ; each batch starts where the last successful one of its partition ended).
The adapters keep each partition's batch metadata per txid in the transactional
state (:class:`~squall.client.trident.tx_state.RotatingTransactionalState`), so a
replay after a worker restart reads the same metadata.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol, Sequence

from .tx_state import RotatingTransactionalState, TransactionalState


class TridentCollector(Protocol):
    """What an emitter or a Trident function emits into (values of the declared fields)."""

    def emit(self, values: Sequence[Any]) -> None: ...

    def report_error(self, error: BaseException | str) -> None: ...


# --- the general interface ---------------------------------------------------------------
class BatchCoordinator:
    """Runs on the spout's coordinator task (one per spout): decides each txid's metadata."""

    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        """The metadata the emitters get for ``txid`` (``curr_metadata`` on a replay)."""
        return None

    def success(self, txid: int) -> None:
        """``txid`` committed everywhere."""

    def is_ready(self, txid: int) -> bool:
        """Whether a batch for ``txid`` may start now (e.g. the source has data)."""
        return True

    def close(self) -> None:
        pass


class Emitter:
    """Runs on every spout task: emits its part of a txid's batch."""

    def emit_batch(self, attempt: Any, metadata: Any, collector: TridentCollector) -> None:
        raise NotImplementedError

    def success(self, attempt: Any) -> None:
        """The batch committed: what it read will not be asked for again."""

    def commit(self, attempt: Any) -> None:
        """Committer spouts only: the batch is being committed (in txid order)."""

    def close(self) -> None:
        pass


class TridentSpout:
    """Storm's ``ITridentSpout``. Objects are pickled with the topology: open connections in
    ``get_coordinator``/``get_emitter``, not in ``__init__``."""

    #: True for Storm's ICommitterTridentSpout: the emitter's ``commit`` is called.
    committer = False

    def get_coordinator(self, tx_state_id: str, conf: Mapping[str, Any],
                        context: Any) -> BatchCoordinator:
        return BatchCoordinator()

    def get_emitter(self, tx_state_id: str, conf: Mapping[str, Any], context: Any) -> Emitter:
        raise NotImplementedError

    def output_fields(self) -> list[str]:
        raise NotImplementedError

    def component_configuration(self) -> dict[str, Any]:
        return {}


# --- partitioned spouts --------------------------------------------------------------------
class Partition(Protocol):
    """A unit of input (a file, a Kafka partition) with an id stable across restarts."""

    @property
    def id(self) -> str: ...


class PartitionedSpout:
    """Storm's ``IPartitionedTridentSpout``: a txid replays exactly the batch it had.

    ``partitions()`` runs on the coordinator and describes the input (JSON-able);
    ``ordered_partitions(description)`` turns it into partitions on the emitters.
    ``emit_new(attempt, collector, partition, last_meta)`` emits the next batch of a
    partition and returns the metadata to replay it; ``emit_again(attempt, collector,
    partition, meta)`` emits that same batch again.
    """

    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        """Called in the worker before the first ``partitions`` (coordinator) or emit
        (emitter) call of this task, with its conf and context (a Kafka spout learns the
        topology id here)."""

    def partitions(self, conf: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    def ordered_partitions(self, description: Any) -> list[Any]:
        raise NotImplementedError

    def emit_new(self, attempt: Any, collector: TridentCollector, partition: Any,
                 last_meta: Any) -> Any:
        raise NotImplementedError

    def emit_again(self, attempt: Any, collector: TridentCollector, partition: Any,
                   meta: Any) -> None:
        raise NotImplementedError

    def is_ready(self, txid: int) -> bool:
        return True

    def output_fields(self) -> list[str]:
        raise NotImplementedError

    def component_configuration(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        pass


class OpaquePartitionedSpout(PartitionedSpout):
    """Storm's ``IOpaquePartitionedTridentSpout``: ``emit(attempt, collector, partition,
    last_meta)`` emits the batch after the last *successful* one of the partition and returns
    its metadata; a replay of a txid may differ from the first attempt."""

    def emit(self, attempt: Any, collector: TridentCollector, partition: Any,
             last_meta: Any) -> Any:
        raise NotImplementedError


def partitions_for_task(partitions: Sequence[Any], task_index: int, num_tasks: int) -> list[Any]:
    """Partition i goes to task i mod num_tasks (Storm's default getPartitionsForTask)."""
    return [p for i, p in enumerate(partitions) if i % num_tasks == task_index]


class _PartitionCoordinator(BatchCoordinator):
    def __init__(self, spout: PartitionedSpout, conf: Mapping[str, Any]):
        self.spout, self.conf = spout, conf

    def initialize_transaction(self, txid: int, prev_metadata: Any, curr_metadata: Any) -> Any:
        return curr_metadata if curr_metadata is not None else self.spout.partitions(self.conf)

    def is_ready(self, txid: int) -> bool:
        return self.spout.is_ready(txid)


class _PartitionedEmitter(Emitter):
    """Storm's ``PartitionedTridentSpoutExecutor.Emitter`` (transactional) and, with
    ``opaque``, ``OpaquePartitionedTridentSpoutExecutor.Emitter``."""

    def __init__(self, spout: PartitionedSpout, state: TransactionalState, task_index: int,
                 num_tasks: int, opaque: bool):
        self.spout, self.state, self.opaque = spout, state, opaque
        self.task_index, self.num_tasks = task_index, num_tasks
        self._description: Any = object()  # never equal to a real one
        self.states: dict[str, tuple[Any, RotatingTransactionalState]] = {}
        #: Opaque only: txid -> {partition id: meta} emitted and not committed yet.
        self.cached: dict[int, dict[str, Any]] = {}

    def _refresh(self, description: Any) -> None:
        if description == self._description:
            return
        mine = partitions_for_task(self.spout.ordered_partitions(description),
                                   self.task_index, self.num_tasks)
        self.states = {p.id: (p, RotatingTransactionalState(self.state, p.id)) for p in mine}
        self._description = description

    def emit_batch(self, attempt: Any, metadata: Any, collector: TridentCollector) -> None:
        self._refresh(metadata)
        if self.opaque:
            self._emit_opaque(attempt, collector)
            return
        for partition, rotating in self.states.values():
            emit_new: Callable[[int, Any], Any] = \
                lambda t, last, p=partition: self.spout.emit_new(attempt, collector, p, last)
            meta = rotating.get_state_or_create(attempt.txid, emit_new)
            if meta is not None:  # seen before: emit that same batch again
                self.spout.emit_again(attempt, collector, partition, meta)

    def _emit_opaque(self, attempt: Any, collector: TridentCollector) -> None:
        """Each partition continues after the previous txid's batch: the one emitted just
        before (still in flight) if any, else the last committed one."""
        txid = attempt.txid
        earlier = [t for t in self.cached if t < txid]
        prev = self.cached[max(earlier)] if earlier else {}
        metas = self.cached[txid] = {}
        for pid, (partition, rotating) in self.states.items():
            rotating.remove_state(txid)
            last = prev.get(pid)
            if last is None:
                last = rotating.last_state()
            metas[pid] = self.spout.emit(attempt, collector, partition, last)

    def commit(self, attempt: Any) -> None:
        """Opaque: the committed batch's metadata becomes durable (where replays start)."""
        for pid, meta in self.cached.pop(attempt.txid, {}).items():
            if pid in self.states:
                self.states[pid][1].override_state(attempt.txid, meta)

    def success(self, attempt: Any) -> None:
        for _, rotating in self.states.values():
            rotating.cleanup_before(attempt.txid)
        for t in [t for t in self.cached if t < attempt.txid]:
            del self.cached[t]

    def close(self) -> None:
        self.state.close()
        self.spout.close()


class PartitionedSpoutExecutor(TridentSpout):
    """Adapts a :class:`PartitionedSpout` (transactional) or :class:`OpaquePartitionedSpout`
    to :class:`TridentSpout`; ``make_state(tx_state_id, conf)`` opens the transactional state
    (ZooKeeper in a worker)."""

    def __init__(self, spout: PartitionedSpout,
                 make_state: Callable[[str, Mapping[str, Any]], TransactionalState]):
        self.spout = spout
        self.make_state = make_state
        self.opaque = isinstance(spout, OpaquePartitionedSpout)
        #: The opaque adapter stores a batch's metadata when it commits (Storm's is a committer).
        self.committer = self.opaque

    def get_coordinator(self, tx_state_id: str, conf: Mapping[str, Any],
                        context: Any) -> BatchCoordinator:
        self.spout.open(conf, context)
        return _PartitionCoordinator(self.spout, conf)

    def get_emitter(self, tx_state_id: str, conf: Mapping[str, Any], context: Any) -> Emitter:
        self.spout.open(conf, context)
        tasks = context.component_tasks(context.this_component_id)
        return _PartitionedEmitter(self.spout, self.make_state(tx_state_id, conf),
                                   context.this_task_index, len(tasks), self.opaque)

    def output_fields(self) -> list[str]:
        return self.spout.output_fields()

    def component_configuration(self) -> dict[str, Any]:
        return self.spout.component_configuration()

    @property
    def requires_extras(self) -> tuple[str, ...]:
        return tuple(getattr(self.spout, "requires_extras", ()))
