"""The Spark bridge as a Trident state: each batch goes to ``fn(df, txid)``.

``foreach_batch(stream, fn)`` sends every Trident batch, whole, to one partition of a
state whose update builds the batch's DataFrame (through Arrow, as the bolt does) and
calls ``fn(df, txid)``. The txid is the batch id, so a batch that fails anywhere and is
retried (replayed by a transactional spout, or after a worker was killed) reaches ``fn``
again under the same id: ``fn`` overwriting what it wrote for that id (the
:class:`~squall.client.spark.sink.ParquetSink` does) writes each batch exactly once.

When ``fn`` raises, or a value does not fit the schema, the batch fails (the error is in
the topology's errors) and Trident retries it, as it does for any failed batch; a batch
that can never fit is retried forever, like any Trident batch that always fails. An empty
batch never calls ``fn``. The state's component runs on a thread of its own (Spark calls
block for seconds), not on the worker's event loop.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Mapping, Sequence

from .. import config as cfg
from ..errors import ReportedFailedException
from ..trident.persist import StateUpdater
from . import session
from .bridge import describe
from .progress import Progress, Timings
from .schema import StreamSchema
from .session import SparkUnavailable

log = logging.getLogger("squall.spark")


class SparkState:
    """One partition's end of the bridge (Storm's ``State``: begin_commit/commit by txid)."""

    def __init__(self, fn: Callable[[Any, int], Any], schema: StreamSchema,
                 conf: Mapping[str, Any], partition: int):
        self.fn = fn
        self.schema = schema
        self.conf = conf
        master = session.master_of(conf)
        #: The master's task threads when local (a batch's partitions), None on a cluster.
        self.local_threads = session.local_threads(master)
        self.partition = partition
        self.txid: int | None = None
        self.app_name = f"squall-{conf.get(cfg.TOPOLOGY_NAME) or 'trident'}"
        # An unreachable master stops the worker now, with the reason (as the bolt does).
        session.check_master(master)
        self.progress = Progress(float(conf.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30)))
        prepare_fn = getattr(fn, "prepare", None)
        if callable(prepare_fn):  # as the bolt does: fn objects may read the topology conf
            prepare_fn(conf)
        session.acquire()

    def begin_commit(self, txid: int) -> None:
        self.txid = txid

    def commit(self, txid: int) -> None:
        pass  # fn's write is the commit: it happened in write()

    def write(self, rows: Sequence[Sequence[Any]]) -> None:
        """``fn(df, txid)`` for the batch's rows; raises ReportedFailedException to fail it."""
        txid = self.txid
        assert txid is not None, "write outside begin_commit/commit"
        if not rows:
            return
        table, rejected = self.schema.table(rows)
        if rejected:
            first = "; ".join(why for _, why in rejected[:3])
            raise ReportedFailedException(
                f"Spark bridge txid {txid}: {len(rejected)} tuple(s) do not fit the schema, "
                f"the batch fails and is retried: {first}")
        clock = time.monotonic
        started = clock()
        self.progress.closed(txid, started)
        spark_secs = fn_secs = 0.0
        try:
            spark = session.get(self.conf, self.app_name)
            spark_secs = clock() - started
            df = session.dataframe(spark, table, self.local_threads)
            t = clock()
            self.fn(df, txid)
            fn_secs = clock() - t
        except SparkUnavailable:
            raise  # no Spark for any batch: the worker stops with it
        except Exception as e:
            log.error("Spark bridge txid %d (%d rows) failed after %.2f s", txid, len(rows),
                      clock() - started, exc_info=True)
            self._progress(txid, len(rows), False, Timings(session=spark_secs))
            raise ReportedFailedException(
                f"Spark bridge txid {txid}: fn raised; the batch fails and is retried with "
                f"the same txid: {describe(e)}") from e
        self._progress(txid, len(rows), True, Timings(
            max(0.0, clock() - started - spark_secs - fn_secs), spark_secs, 0.0, fn_secs))

    def _progress(self, txid: int, rows: int, ok: bool, timings: Timings) -> None:
        """The batch's progress line in the worker log (throttled as the bolt's)."""
        _, line = self.progress.finished(txid, rows, ok, timings, time.monotonic(),
                                         time.time())
        if line is not None:
            log.info("Spark bridge partition %d txid %s", self.partition,
                     line.replace("batch ", "", 1))

    def close(self) -> None:
        session.release()


class SparkStateFactory:
    """Makes a :class:`SparkState` per partition (Storm's ``StateFactory``)."""

    #: Spark calls block: the hosting component gets its own thread (see BatchBolt).
    blocking = True
    #: pyspark and pyarrow on the cluster's hosts (the hosting component carries it).
    requires_extras = ("spark",)

    def __init__(self, fn: Callable[[Any, int], Any], fields: Sequence[str],
                 types: Mapping[str, Any] | None = None):
        if not callable(fn):
            raise TypeError(f"the Spark bridge needs a callable fn(df, txid), got {fn!r}")
        self.fn = fn
        self.fields = list(fields)
        self.types = dict(types or {})
        StreamSchema(self.fields, self.types)  # refuses bad declarations when built

    def make_state(self, conf: Mapping[str, Any], partition_index: int = 0,
                   num_partitions: int = 1) -> SparkState:
        return SparkState(self.fn, StreamSchema(self.fields, self.types), conf, partition_index)


class SparkUpdater(StateUpdater):
    """Hands the batch's tuples (the input fields, in order) to :meth:`SparkState.write`."""

    def update_state(self, state: SparkState, tuples: list, collector: Any) -> None:
        state.write([t.values for t in tuples])


def foreach_batch(stream: Any, fn: Callable[[Any, int], Any],
                  fields: Sequence[str] | None = None,
                  types: Mapping[str, Any] | None = None) -> Any:
    """Send every batch of a Trident ``stream`` (its ``fields``, by default all) to
    ``fn(df, txid)`` in Spark, whole and in txid order; returns the TridentState.

    Example::

        sink = ParquetSink("/data/words")            # overwrites batch_id=<txid>
        foreach_batch(stream.each(["line"], Split(), ["word"]), sink, fields=["word"])
    """
    fields = list(fields) if fields is not None else list(stream.node.fields)
    factory = SparkStateFactory(fn, fields, types)
    # Whole batches, one fn call per txid: Spark is where the batch's work spreads out.
    return stream.global_().partition_persist(factory, SparkUpdater(), input_fields=fields)
