"""The bridge bolt: batches of its input stream go to ``fn(df, batch_id)`` in Spark.

As Structured Streaming's ``foreachBatch``: tuples collect into batches (closed by
``max_batch_size`` tuples or ``max_batch_secs`` of age, see :mod:`.batcher`), each batch
becomes a ``pyspark.sql.DataFrame`` through Arrow (:mod:`.schema`), and ``fn`` runs on it
on a runner thread, so the worker keeps receiving while Spark works. ``fn`` is called one
batch at a time, in batch-id order, as Spark calls ``foreachBatch``; with ``max_in_flight``
2 (the default) the next batch is converted while ``fn`` works on the current one. A
batch's tuples are acked when ``fn`` returns and all failed (the spout replays them) when
it raises, with the error in the topology's errors. Rows that do not fit the stream's schema are left out of
the DataFrame and failed one by one, each with the reason.

Batch ids count from 1 per task and start again with the worker: a replayed tuple lands
in another batch, so this bolt is at-least-once and ``fn`` should append. For batches
retried under the same id (exactly-once output), use the Trident state in :mod:`.trident`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, Sequence

from .. import config as cfg
from ..components import Bolt
from . import session
from .batcher import (AckTuples, Add, Batcher, Done, Failed, FailTuples, ReportError, RunBatch,
                      Tick)
from .schema import SchemaError, StreamSchema

log = logging.getLogger("squall.spark")

#: Characters of an error (Spark's carry a Java stack trace) kept in the topology's errors.
ERROR_CHARS = 1500


def describe(error: BaseException | str) -> str:
    """An error as one bounded string: type and message (a Py4J error's Java trace cut)."""
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    text = text.strip()
    return text if len(text) <= ERROR_CHARS else text[:ERROR_CHARS] + " ..."


class _Stopping(Exception):
    """The worker stopped before this batch's turn: neither acked nor failed (replayed)."""


class SparkBridgeBolt(Bolt):
    """Feeds its input stream to ``fn(df, batch_id)`` in batches.

    ``types`` maps field names to types ("long", "double", "string", "boolean", "binary",
    "array<T>", "map<string,V>", Python types or pyarrow types); fields not named are
    inferred from the first batch with a value for them, then fixed. Every input stream
    must declare the same fields. Up to ``max_in_flight`` batches are taken at once: one in
    ``fn`` (never two: ``fn`` sees the batches in order, one at a time) and the others
    converted to DataFrames meanwhile, waiting their turn.
    ``fn`` may be an object with a ``prepare(conf)`` method, called with the topology conf
    in the worker before the first batch.

    Example::

        def fn(df, batch_id):
            df.groupBy("word").count().write.mode("append").parquet("/data/counts")

        builder.set_bolt("spark", SparkBridgeBolt(fn, max_batch_size=10_000,
                                                  max_batch_secs=2.0)).shuffle_grouping("split")
    """

    #: pyspark and pyarrow on the cluster's hosts (Nimbus checks at submit).
    requires_extras = ("spark",)

    def __init__(self, fn: Callable[[Any, int], Any], types: Mapping[str, Any] | None = None,
                 max_batch_size: int = 10_000, max_batch_secs: float = 1.0,
                 max_in_flight: int = 2):
        if not callable(fn):
            raise TypeError(f"SparkBridgeBolt needs a callable fn(df, batch_id), got {fn!r}")
        if getattr(fn, "needs_txid", False):
            raise ValueError(f"{fn!r} replaces each batch id's output, which needs batch ids "
                             "that a retry keeps (Trident's txids): use it with "
                             "squall.client.spark.foreach_batch on a Trident stream, or write "
                             "with mode='append' from SparkBridgeBolt")
        Batcher(max_batch_size, max_batch_secs, max_in_flight)  # refuses bad limits now
        self.fn = fn
        self.types = dict(types or {})
        self.max_batch_size = max_batch_size
        self.max_batch_secs = float(max_batch_secs)
        self.max_in_flight = max_in_flight

    # -- at submit ---------------------------------------------------------------------------
    def check_inputs(self, inputs: Sequence[tuple[str, str, list[str]]]) -> None:
        """Refuse inputs that cannot make one schema (called when the topology is built)."""
        if not inputs:
            return
        c0, s0, fields = inputs[0]
        for c, s, f in inputs[1:]:
            if list(f) != list(fields):
                raise ValueError(f"a Spark bridge's input streams must declare the same "
                                 f"fields: {c!r} stream {s!r} declares {list(f)}, {c0!r} "
                                 f"stream {s0!r} declares {list(fields)}")
        try:
            StreamSchema(fields, self.types)
        except SchemaError as e:
            raise ValueError(f"input {c0!r} stream {s0!r}: {e}") from None

    def get_component_configuration(self) -> dict[str, Any]:
        # Ticks close batches by age: often enough that a batch is at most 10% late.
        return {cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS: max(0.01, min(1.0, self.max_batch_secs / 10))}

    # -- in the worker -----------------------------------------------------------------------
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.conf = conf
        self.collector = collector
        component, stream = context.this_sources()[0]
        self.fields = list(context.component_output_fields(component, stream))
        self.schema = StreamSchema(self.fields, self.types)
        self.batcher = Batcher(self.max_batch_size, self.max_batch_secs, self.max_in_flight)
        self.app_name = f"squall-{context.topology_id or conf.get(cfg.TOPOLOGY_NAME) or 'topology'}"
        self.where = (f"topology={context.topology_id} component={context.this_component_id} "
                      f"task={context.this_task_id}")
        prepare_fn = getattr(self.fn, "prepare", None)
        if callable(prepare_fn):  # fn objects may read the topology conf (an output path)
            prepare_fn(conf)
        self.stopping = False
        #: Batch ids handed to runners, in order: fn runs for the first one only.
        self._order: deque[int] = deque()
        self._turn = threading.Condition()
        self.pool = ThreadPoolExecutor(self.max_in_flight,
                                       thread_name_prefix=f"spark-bridge-{context.this_task_id}")
        session.acquire()

    def execute(self, tup: Any) -> None:
        now = time.monotonic()
        if tup.is_tick:
            self._apply(self.batcher.handle(Tick(now)))
        elif not self.batcher.append(tup, tup.values, now):
            self._apply(self.batcher.handle(Add(tup, tup.values, now)))

    def _apply(self, instructions: list) -> None:
        for ins in instructions:
            kind = type(ins)
            if kind is RunBatch:
                with self._turn:
                    self._order.append(ins.batch_id)
                self.pool.submit(self._run_batch, ins)
            elif kind is AckTuples:
                ack = self.collector.ack
                for t in ins.ids:
                    ack(t)
            elif kind is FailTuples:
                fail = self.collector.fail
                for t in ins.ids:
                    fail(t)
            elif kind is ReportError:
                self.collector.report_error(
                    f"Spark bridge batch {ins.batch_id}: fn raised; its tuples were failed and "
                    f"will be replayed: {describe(ins.error)}")

    def _run_batch(self, run: RunBatch) -> None:
        """On a runner thread: the batch as a DataFrame through ``fn``; the outcome goes back
        to the executor's thread (the collector is not thread-safe)."""
        started = time.monotonic()
        rejected: list[tuple[int, str]] = []
        try:
            try:
                table, rejected = self.schema.table(run.rows)
                # every row rejected: no DataFrame, fn is not called
                df = session.get(self.conf, self.app_name).createDataFrame(table) \
                    if table.num_rows else None
            finally:
                self._wait_turn(run.batch_id)  # converted meanwhile; fn in batch order
            if self.stopping:
                raise _Stopping()
            if df is not None:
                self.fn(df, run.batch_id)
        except BaseException as e:  # fn's failure is the batch's: fail it, never the worker
            if self.stopping:  # the session was stopped under it: not fn's fault
                log.info("%s batch %d (%d tuples) cut short by the worker stopping; its "
                         "tuples will be replayed", self.where, run.batch_id, len(run.rows))
                return
            log.error("%s batch %d (%d tuples) failed after %.2f s", self.where, run.batch_id,
                      len(run.rows), time.monotonic() - started, exc_info=True)
            ev: Done | Failed = Failed(run.batch_id, e)
        else:
            log.debug("%s batch %d: %d rows through fn in %.2f s", self.where, run.batch_id,
                      len(run.rows) - len(rejected), time.monotonic() - started)
            ev = Done(run.batch_id, tuple(i for i, _ in rejected))
        finally:
            self._end_turn(run.batch_id)
        self.collector.call_soon_threadsafe(lambda: self._finished(ev, rejected))

    def _wait_turn(self, batch_id: int) -> None:
        with self._turn:
            while self._order and self._order[0] != batch_id and not self.stopping:
                self._turn.wait()

    def _end_turn(self, batch_id: int) -> None:
        with self._turn:
            if batch_id in self._order:
                self._order.remove(batch_id)
            self._turn.notify_all()

    def _finished(self, ev: Done | Failed, rejected: list[tuple[int, str]]) -> None:
        if rejected:
            first = "; ".join(why for _, why in rejected[:3])
            more = f" (and {len(rejected) - 3} more)" if len(rejected) > 3 else ""
            self.collector.report_error(
                f"Spark bridge batch {ev.batch_id}: {len(rejected)} tuple(s) do not fit the "
                f"schema and were failed: {first}{more}")
        self._apply(self.batcher.handle(ev))

    def cleanup(self) -> None:
        # Tuples still held are neither acked nor failed: their trees time out and replay.
        # A batch inside fn is not waited for (a stopping worker has seconds).
        self.stopping = True
        with self._turn:
            self._turn.notify_all()
        self.pool.shutdown(wait=False, cancel_futures=True)
        session.release()
