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

Each batch's progress (rows, input and processed rows/s, its duration and the conversion's
and fn's shares, as Structured Streaming's query progress) goes to the worker log (a line
at most every few seconds, :mod:`.progress`), to the task's metrics (Prometheus:
``squall_user_spark_*``) and with the task's counters to Nimbus (the UI's component page).

Spark's start (a JVM, and on a cluster the executors: tens of seconds when cold) must not
fail by the message timeout the tuples that wait for it: until the task's first batch is
through ``fn``, and then the batches that collected meanwhile (at most :data:`HOLD_SECS`
in all), the bolt refreshes the timeouts of every tuple it holds (Storm's
``resetTimeout``) each third of ``topology.message.timeout.secs``.
Spark that cannot be used (an unreachable ``spark://`` master, a session that does not
start) stops the worker with :class:`~.session.SparkUnavailable`, as a component that
raises does: checked when the bolt is prepared, and when a session starts.
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
from .progress import Progress, Timings
from .schema import SchemaError, StreamSchema
from .session import SparkUnavailable

log = logging.getLogger("squall.spark")

#: Longest a task holds its tuples' timeouts while waiting for its first batch to get
#: through fn (Spark starting), seconds; after that the message timeout applies again.
HOLD_SECS = 600.0

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
        # An unreachable master is found now, before any tuple waits for it (seconds, not
        # the minute Spark takes to give up): the worker stops with the reason.
        master = session.master_of(conf)
        session.check_master(master)
        self.conf = conf
        #: The master's task threads when local (a batch's partitions), None on a cluster.
        self.local_threads = session.local_threads(master)
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
        self.timeout_secs = float(conf.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30))
        self.progress = Progress(self.timeout_secs)
        self._register_metrics(context)
        #: Holding the held tuples' timeouts while Spark starts; the monotonic time of the
        #: next refresh; when the first batch closed; once the first batch is through fn, the
        #: last batch that collected tuples meanwhile (the hold ends when it is through).
        self._holding = bool(conf.get(cfg.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True))
        self._next_hold = 0.0
        self._first_closed: float | None = None
        self._hold_until: int | None = None
        self._held_said = False
        self.pool = ThreadPoolExecutor(self.max_in_flight,
                                       thread_name_prefix=f"spark-bridge-{context.this_task_id}")
        session.acquire()

    def _register_metrics(self, context: Any) -> None:
        """The latest batch's figures as task metrics (``squall_user_spark_*``)."""
        m = context.metrics
        self.batches_metric = m.counter("spark_batches")
        self.rows_metric = m.counter("spark_rows")

        def latest(key: str) -> Callable[[], float]:
            return lambda: self.progress.latest[key]  # raises before the first: left out
        for name, key in (("spark_batch_id", "batch_id"),
                          ("spark_batch_rows", "num_input_rows"),
                          ("spark_input_rows_per_second", "input_rows_per_second"),
                          ("spark_processed_rows_per_second", "processed_rows_per_second"),
                          ("spark_batch_duration_ms", "duration_ms"),
                          ("spark_conversion_ms", "conversion_ms"),
                          ("spark_fn_ms", "fn_ms")):
            m.gauge(name, latest(key))
        self._task_metrics = m

    def execute_batch(self, tuples: list) -> None:
        """A whole step of the executor's queue in one call (see Bolt): the tuples that fit
        the open batch join it together; a tick, or one that opens or closes a batch, goes
        through :meth:`execute`."""
        now = time.monotonic()
        if len(tuples) == 1 or any(t.is_tick for t in tuples):  # ticks come one a call
            for t in tuples:
                self._execute(t, now)
            return
        extend = self.batcher.extend
        rows = [t.values for t in tuples]
        i, n = 0, len(tuples)
        while i < n:
            k = extend(tuples, rows, now, i)
            if k:
                i += k
            else:
                self._execute(tuples[i], now)
                i += 1

    def execute(self, tup: Any) -> None:
        self._execute(tup, time.monotonic())

    def _execute(self, tup: Any, now: float) -> None:
        if tup.is_tick:
            self._apply(self.batcher.handle(Tick(now)))
            if self._holding:
                self._hold_timeouts(now)
        elif not self.batcher.append(tup, tup.values, now):
            self.progress.seen(now)  # the first tuple always takes this path
            self._apply(self.batcher.handle(Add(tup, tup.values, now)))

    def _hold_timeouts(self, now: float) -> None:
        """While Spark starts: refresh the timeouts of the tuples held, each third of the
        message timeout (the spout fails a tree between one and two timeouts after its last
        refresh), until the batches that waited for Spark are through fn or HOLD_SECS
        passed."""
        if self._first_closed is not None and now - self._first_closed > HOLD_SECS:
            self._holding = False
            log.warning("%s the batches waiting for Spark to start have not got through fn "
                        "in %.0f s; the message timeout applies to their tuples again "
                        "(topology.message.timeout.secs=%g)", self.where, HOLD_SECS,
                        self.timeout_secs)
            return
        if now < self._next_hold:
            return
        self._next_hold = now + self.timeout_secs / 3
        reset = self.collector.reset_timeout
        n = 0
        for t in self.batcher.held():
            reset(t)
            n += 1
        if n and not self._held_said and self._first_closed is not None:
            self._held_said = True
            log.info("%s holding the timeouts of the tuples waiting for Spark to start (%d "
                     "now) until their batches are through fn", self.where, n)

    def _apply(self, instructions: list) -> None:
        for ins in instructions:
            kind = type(ins)
            if kind is RunBatch:
                with self._turn:
                    self._order.append(ins.batch_id)
                now = time.monotonic()
                self.progress.closed(ins.batch_id, now)
                if self._first_closed is None:
                    self._first_closed = now
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
        clock = time.monotonic
        started = clock()
        rejected: list[tuple[int, str]] = []
        conversion = session_secs = wait = fn_secs = 0.0
        fn_started = None
        df = None
        try:
            try:
                table, rejected = self.schema.table(run.rows)
                if table.num_rows:  # every row rejected: no DataFrame, fn is not called
                    t = clock()
                    spark = session.get(self.conf, self.app_name)
                    session_secs = clock() - t
                    df = session.dataframe(spark, table, self.local_threads)
                conversion = clock() - started - session_secs
            finally:
                t = clock()
                self._wait_turn(run.batch_id)  # converted meanwhile; fn in batch order
                wait = clock() - t
            if self.stopping:
                raise _Stopping()
            if df is not None:
                fn_started = clock()
                self.fn(df, run.batch_id)
                fn_secs = clock() - fn_started
        except SparkUnavailable as e:  # no Spark for any batch: the worker stops with it
            if not self.stopping:
                self.collector.call_soon_threadsafe(lambda e=e: self._unavailable(e))
            return
        except BaseException as e:  # fn's failure is the batch's: fail it, never the worker
            if self.stopping:  # the session was stopped under it: not fn's fault
                log.info("%s batch %d (%d tuples) cut short by the worker stopping; its "
                         "tuples will be replayed", self.where, run.batch_id, len(run.rows))
                return
            log.error("%s batch %d (%d tuples) failed after %.2f s", self.where, run.batch_id,
                      len(run.rows), clock() - started, exc_info=True)
            if fn_started is not None:
                fn_secs = clock() - fn_started
            ev: Done | Failed = Failed(run.batch_id, e)
        else:
            ev = Done(run.batch_id, tuple(i for i, _ in rejected))
        finally:
            self._end_turn(run.batch_id)
        timings = Timings(conversion, session_secs, wait, fn_secs)
        self.collector.call_soon_threadsafe(
            lambda: self._finished(ev, rejected, len(run.rows), timings))

    @staticmethod
    def _unavailable(e: SparkUnavailable) -> None:
        """On the executor's thread: raise, so the worker stops as when a component raises
        (the error in the topology's errors; the tuples held time out and are replayed)."""
        raise e

    def _wait_turn(self, batch_id: int) -> None:
        with self._turn:
            while self._order and self._order[0] != batch_id and not self.stopping:
                self._turn.wait()

    def _end_turn(self, batch_id: int) -> None:
        with self._turn:
            if batch_id in self._order:
                self._order.remove(batch_id)
            self._turn.notify_all()

    def _finished(self, ev: Done | Failed, rejected: list[tuple[int, str]], rows: int,
                  timings: Timings) -> None:
        held = self._holding
        if self._holding:
            if self._hold_until is None:  # the first batch is through fn: Spark is up; the
                self._hold_until = self.batcher.last_id  # batches that waited for it go on
            if ev.batch_id >= self._hold_until:
                self._holding = False
        record, line = self.progress.finished(ev.batch_id, rows, isinstance(ev, Done), timings,
                                              time.monotonic(), time.time(), held)
        self._task_metrics.report_progress(record)
        self.batches_metric.inc()
        self.rows_metric.inc(rows)
        if line is not None:
            log.info("%s %s", self.where, line)
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
        if getattr(self, "pool", None) is None:
            return  # prepare did not get through: nothing started
        self.stopping = True
        with self._turn:
            self._turn.notify_all()
        self.pool.shutdown(wait=False, cancel_futures=True)
        session.release()
