"""Spark bridge: batches of a stream go to ``fn(df, batch_id)`` in PySpark.

Like Structured Streaming's ``foreachBatch``. :class:`SparkBridgeBolt` is the bolt
(at-least-once: a batch's tuples are acked when ``fn`` returns, failed and replayed when
it raises); :func:`foreach_batch` is the Trident state (``batch_id`` is the txid, so a
retried batch keeps its id and :class:`ParquetSink` writes it once). :mod:`.batcher`
decides when batches close and what to ack or fail (pure, no IO, no clock);
:mod:`.schema` turns a batch's rows into a ``pyarrow.Table`` column by column;
:mod:`.session` keeps one lazily started SparkSession per worker (and says in seconds when
Spark cannot be reached: :class:`SparkUnavailable`); :mod:`.progress` reports each batch as
Structured Streaming reports a query's progress. pyspark itself is only imported when a
batch reaches Spark.
"""

from ..extras import require

require("spark", "the Spark bridge (squall.client.spark)")

from .bridge import SparkBridgeBolt  # noqa: E402
from .schema import SchemaError, StreamSchema  # noqa: E402
from .session import SparkUnavailable  # noqa: E402
from .sink import ParquetSink  # noqa: E402
from .trident import SparkStateFactory, SparkUpdater, foreach_batch  # noqa: E402

__all__ = ["SparkBridgeBolt", "ParquetSink", "foreach_batch", "SparkStateFactory",
           "SparkUpdater", "SchemaError", "StreamSchema", "SparkUnavailable"]
