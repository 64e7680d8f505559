"""Knowing when every tuple of one request has arrived: Storm's ``CoordinatedBolt`` and
batch bolts (``IBatchBolt``, ``BaseBatchBolt``, ``BatchBoltExecutor``).

The first value of every tuple a coordinated bolt sees is the request id. For each id a
:class:`CoordinatedBolt` counts the tuples its bolt emitted to each downstream task and,
once its own input for the id is complete, tells every downstream task on the direct
``$coord`` stream how many tuples of that id it sent it. A downstream task knows its input
for the id is complete when it has heard from all its upstream reporters and acked as
many tuples as they announced; then a :class:`BatchBolt`'s ``finish_batch`` runs. The last
bolt also waits for the request's id from ``prepare-request`` (Storm's ``IdStreamSpec``),
so only the task that owns the id (fields grouping) finishes it and the spout's tuple tree
stays open until it has. Storm's stream is ``__coord``; ids starting with ``__`` are the
system's here, hence ``$coord`` (as Trident's ``$batch``).

Everything here runs on the bolt's executor thread: no locks (Storm's ``synchronized``
guards its executor's threads, which Squall does not have).
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from .. import config as cfg
from ..components import BasicBolt, Bolt, Component
from ..errors import FailedException
from ..tuple import Tuple

log = logging.getLogger("squall.drpc")

#: Storm's ``Constants.COORDINATED_STREAM_ID`` (``__coord``), renamed: see the module doc.
COORDINATED_STREAM_ID = "$coord"
COORDINATED_FIELDS = ("id", "count")


class BatchOutputCollector:
    """What a :class:`BatchBolt` emits through (Storm's ``BatchOutputCollector``): emits are
    not anchored, as in Storm; the coordination tracks the request instead."""

    def __init__(self, out: Any):
        self._out = out

    def emit(self, values: list, stream: str = "default") -> list[int]:
        return self._out.emit(values, stream=stream)

    def emit_direct(self, task: int, values: list, stream: str = "default") -> None:
        self._out.emit_direct(task, values, stream=stream)

    def report_error(self, error: BaseException | str) -> None:
        self._out.report_error(error)


class BatchBolt(Component):
    """A bolt that sees all tuples of one request (batch), then finishes it (Storm's
    ``IBatchBolt``/``BaseBatchBolt``). A fresh copy of the object serves each request id.

    Example (storm-starter's ``CountAggregator``)::

        class CountAggregator(BatchBolt):
            def prepare(self, conf, context, collector, id):
                self.collector, self.id, self.count = collector, id, 0
            def execute(self, tup):
                self.count += tup[1]
            def finish_batch(self):
                self.collector.emit([self.id, self.count])
            def declare_output_fields(self, declarer):
                declarer.declare(["id", "reach"])

    Raise :class:`~squall.client.errors.FailedException` from ``execute`` to fail the tuple
    (and so the request).
    """

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: BatchOutputCollector,
                id: Any) -> None:
        self.collector = collector
        self.id = id

    def execute(self, tup: Tuple) -> None:
        raise NotImplementedError

    def finish_batch(self) -> None:
        """Every tuple of this request has been executed."""


class _BatchRunner:
    """Storm's ``BatchBoltExecutor``: one copy of the user's batch bolt per open id."""

    def __init__(self, bolt: BatchBolt):
        #: Never prepared: each id gets a deep copy (Storm deserializes a fresh one). The
        #: object travels inside the topology's own pickle, so a class defined in a script's
        #: __main__ still reaches the worker (cloudpickle copies it by value).
        self._prototype = bolt
        self._open: dict[Any, BatchBolt] = {}

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self._conf, self._context = conf, context
        self._collector = collector
        self._batch_collector = BatchOutputCollector(collector)

    def _bolt(self, id: Any) -> BatchBolt:
        bolt = self._open.get(id)
        if bolt is None:
            bolt = copy.deepcopy(self._prototype)
            bolt.prepare(self._conf, self._context, self._batch_collector, id)
            self._open[id] = bolt
        return bolt

    def execute(self, tup: Tuple) -> None:
        try:
            self._bolt(tup.values[0]).execute(tup)
        except FailedException as e:
            log.warning("batch bolt failed a tuple of request %s: %s", tup.values[0], e)
            self._collector.fail(tup)
            return
        self._collector.ack(tup)

    def finished_id(self, id: Any) -> None:
        bolt = self._bolt(id)
        del self._open[id]
        bolt.finish_batch()

    def timeout_id(self, id: Any) -> None:
        self._open.pop(id, None)

    def cleanup(self) -> None:
        self._open.clear()


class _BasicRunner:
    """A BasicBolt under coordination: emits anchored to the input, input acked after."""

    def __init__(self, bolt: BasicBolt):
        self.bolt = bolt

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self._collector = collector
        self._basic = _AnchoredCollector(collector)
        self.bolt.prepare(conf, context)

    def execute(self, tup: Tuple) -> None:
        self._basic.input = tup
        try:
            self.bolt.execute(tup, self._basic)
        except FailedException as e:
            log.warning("bolt failed a tuple of request %s: %s", tup.values[0], e)
            self._collector.fail(tup)
            return
        self._collector.ack(tup)

    def cleanup(self) -> None:
        self.bolt.cleanup()


class _RichRunner:
    """A Bolt under coordination: it acks and fails through the counting collector."""

    def __init__(self, bolt: Bolt):
        self.bolt = bolt

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.bolt.prepare(conf, context, collector)

    def execute(self, tup: Tuple) -> None:
        self.bolt.execute(tup)

    def cleanup(self) -> None:
        self.bolt.cleanup()


class _AnchoredCollector:
    """A BasicBolt's collector over the counting one (Storm's BasicOutputCollector)."""

    def __init__(self, out: Any):
        self.out = out
        self.input: Tuple | None = None

    def emit(self, values: list, stream: str = "default") -> list[int]:
        return self.out.emit(values, stream=stream, anchors=[self.input])

    def emit_direct(self, task: int, values: list, stream: str = "default") -> list[int]:
        return self.out.emit_direct(task, values, stream=stream, anchors=[self.input])

    def report_error(self, error: BaseException | str) -> None:
        self.out.report_error(error)


@dataclass
class _Track:
    """One request id at one task (Storm's ``TrackingInfo``)."""

    created: float
    received_id: bool
    report_count: int = 0
    expected: int = 0
    received: int = 0
    failed: bool = False
    #: task -> tuples of this id this task emitted to it.
    emitted: dict[int, int] = field(default_factory=dict)
    #: Coordination (or id) tuples whose ack waits for the finish: they keep the tree open.
    held: list[Tuple] = field(default_factory=list)


REGULAR, ID, COORD = "regular", "id", "coord"


class CoordinatedBolt(Bolt):
    """Wraps a bolt, a basic bolt or a batch bolt of a linear DRPC topology (Storm's
    ``CoordinatedBolt``); :class:`~squall.client.drpc.LinearDRPCTopologyBuilder` builds it.

    ``sources`` maps each upstream coordinated component to True when one of its tasks
    reports per id (Storm's ``SourceArgs.single()``: the first bolt, which gets each request
    from one task) or False when all its tasks do (``SourceArgs.all()``); ``id_stream``
    is the ``(component, stream)`` the request ids come from for the last bolt.
    """

    def __init__(self, delegate: Bolt | BasicBolt | BatchBolt,
                 sources: Mapping[str, bool] | None = None,
                 id_stream: tuple[str, str] | None = None):
        if isinstance(delegate, BatchBolt):
            self._runner: Any = _BatchRunner(delegate)
        elif isinstance(delegate, BasicBolt):
            self._runner = _BasicRunner(delegate)
        elif isinstance(delegate, Bolt):
            self._runner = _RichRunner(delegate)
        else:
            raise TypeError(f"a DRPC bolt must be a Bolt, BasicBolt or BatchBolt, got "
                            f"{type(delegate).__name__}")
        self.delegate = delegate
        self.sources = dict(sources or {})
        self.id_stream = tuple(id_stream) if id_stream else None

    # --- declaration -------------------------------------------------------------------
    def declare_output_fields(self, declarer: Any) -> None:
        self.delegate.declare_output_fields(declarer)
        declarer.declare_stream(COORDINATED_STREAM_ID, list(COORDINATED_FIELDS), direct=True)

    def get_component_configuration(self) -> Mapping[str, Any] | None:
        return self.delegate.get_component_configuration()

    # --- runtime -----------------------------------------------------------------------
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self._out = collector
        self._tracked: dict[Any, _Track] = {}
        #: Storm keeps tracking entries a message timeout (its TimeCacheMap): a request not
        #: finished by then has failed at the spout anyway.
        self._expiry = float(cfg.get(conf, cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
        self._next_sweep = time.monotonic() + self._expiry
        self._count_out_tasks = [t for c in context.this_targets(COORDINATED_STREAM_ID)
                                 for t in context.component_tasks(c)]
        self._num_reports = sum(1 if single else len(context.component_tasks(src))
                                for src, single in self.sources.items())
        self._runner.prepare(conf, context, _CountingCollector(self, collector))

    def _type(self, tup: Tuple) -> str:
        if self.id_stream is not None and \
                (tup.source_component, tup.source_stream) == self.id_stream:
            return ID
        if self.sources and tup.source_stream == COORDINATED_STREAM_ID:
            return COORD
        return REGULAR

    def execute(self, tup: Tuple) -> None:
        if tup.is_tick:
            self._out.ack(tup)
            return
        now = time.monotonic()
        if now >= self._next_sweep:
            self._sweep(now)
        id = tup.values[0]
        track = self._tracked.get(id)
        if track is None:
            track = self._tracked[id] = _Track(now, received_id=self.id_stream is None)
        kind = self._type(tup)
        if kind == ID:
            track.received_id = True
            self._check_finish(tup, kind)
        elif kind == COORD:
            track.report_count += 1
            track.expected += int(tup.values[1])
            self._check_finish(tup, kind)
        else:
            self._runner.execute(tup)

    def _check_finish(self, tup: Tuple, kind: str) -> bool:
        """Finish the id when its input is complete; returns True when the id has failed."""
        id = tup.values[0]
        track = self._tracked.get(id)
        if track is None:  # finished, failed or expired already: a straggler
            if kind != REGULAR:
                self._out.fail(tup)
            return False
        held = (self.id_stream is None and kind == COORD) or \
            (self.id_stream is not None and kind == ID)
        if held:
            track.held.append(tup)
        failed = track.failed
        try:
            if failed:
                for t in track.held:
                    self._out.fail(t)
                self._forget(id)
            elif track.received_id and (not self.sources or (
                    track.report_count == self._num_reports and
                    track.expected == track.received)):
                finished_id = getattr(self._runner, "finished_id", None)
                if finished_id is not None:
                    finished_id(id)
                for task in self._count_out_tasks:
                    self._out.emit_direct(task, [id, track.emitted.get(task, 0)],
                                          stream=COORDINATED_STREAM_ID, anchors=[tup])
                for t in track.held:
                    self._out.ack(t)
                del self._tracked[id]
        except FailedException as e:
            log.warning("finishing request %s failed: %s", id, e)
            for t in track.held:
                self._out.fail(t)
            self._forget(id)
            failed = True
        if not held and kind != REGULAR:
            (self._out.fail if failed else self._out.ack)(tup)
        return failed

    def _sweep(self, now: float) -> None:
        """Forget ids older than the message timeout (Storm's TimeCacheMap expiry)."""
        self._next_sweep = now + self._expiry / 2
        old = [id for id, t in self._tracked.items() if now - t.created > self._expiry]
        for id in old:
            for t in self._tracked[id].held:
                self._out.fail(t)
            self._forget(id)

    def _forget(self, id: Any) -> None:
        """Drop a failed or expired id, and a batch bolt's open batch for it."""
        self._tracked.pop(id, None)
        timeout_id = getattr(self._runner, "timeout_id", None)
        if timeout_id is not None:
            timeout_id(id)

    def cleanup(self) -> None:
        self._runner.cleanup()

    # --- the counting collector's callbacks ----------------------------------------------
    def _count(self, id: Any, tasks: list[int]) -> None:
        track = self._tracked.get(id)
        if track is not None:
            for t in tasks:
                track.emitted[t] = track.emitted.get(t, 0) + 1

    def _acked(self, tup: Tuple) -> bool:
        track = self._tracked.get(tup.values[0])
        if track is not None:
            track.received += 1
        return self._check_finish(tup, REGULAR)

    def _failed(self, tup: Tuple) -> None:
        track = self._tracked.get(tup.values[0])
        if track is not None:
            track.failed = True
        self._check_finish(tup, REGULAR)


class _CountingCollector:
    """The collector the wrapped bolt sees (Storm's ``CoordinatedOutputCollector``): it counts
    emits per target task and id, and turns acks into coordination progress."""

    def __init__(self, bolt: CoordinatedBolt, out: Any):
        self._bolt, self._out = bolt, out

    def emit(self, values: list, stream: str = "default", anchors: Any = None,
             direct_task: int | None = None) -> list[int]:
        tasks = self._out.emit(values, stream=stream, anchors=anchors, direct_task=direct_task)
        self._bolt._count(values[0], tasks)
        return tasks

    def emit_direct(self, task: int, values: list, stream: str = "default",
                    anchors: Any = None) -> list[int]:
        return self.emit(values, stream=stream, anchors=anchors, direct_task=task)

    def ack(self, tup: Tuple) -> None:
        if self._bolt._acked(tup):
            self._out.fail(tup)
        else:
            self._out.ack(tup)

    def fail(self, tup: Tuple) -> None:
        self._bolt._failed(tup)
        self._out.fail(tup)

    def reset_timeout(self, tup: Tuple) -> None:
        self._out.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        self._out.report_error(error)

    def flush(self) -> None:
        self._out.flush()

    def call_soon_threadsafe(self, fn: Any) -> None:
        self._out.call_soon_threadsafe(fn)
