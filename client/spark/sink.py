"""A parquet sink for the Spark bridge: ``fn(df, batch_id)`` that writes the batch.

``mode="overwrite"`` (for Trident, through :func:`~squall.client.spark.foreach_batch`):
the batch replaces the ``batch_id=<txid>`` partition under ``path`` with Spark's dynamic
partition overwrite, so a batch retried under the same txid (after a failure, a killed
worker, a replay) is there once. Only Trident's txids survive a retry, so the bridge bolt
refuses this mode (``needs_txid``).

``mode="append"`` (for :class:`~squall.client.spark.SparkBridgeBolt`): every call adds a
partition ``batch=<unique>``; a batch replayed after a failure may be written again
(at-least-once). Each write goes to its own partition through the same dynamic overwrite,
because two plain appends into one directory at once (two bridge tasks, two workers)
share Hadoop's ``_temporary`` directory and the first to commit deletes the other's files.

Read either back with ``spark.read.parquet(path)``; the partition column comes along.
"""

from __future__ import annotations

import uuid
from typing import Any

MODES = ("overwrite", "append")


class ParquetSink:
    """Writes each batch's DataFrame as parquet under ``path`` (any Hadoop path: a local
    directory, ``hdfs://...``, ``s3a://...``)."""

    def __init__(self, path: str, mode: str = "overwrite"):
        if mode not in MODES:
            raise ValueError(f"ParquetSink mode must be one of {MODES}, got {mode!r}")
        if not isinstance(path, str) or not path:
            raise ValueError(f"ParquetSink needs a path, got {path!r}")
        self.path = path
        self.mode = mode

    @property
    def needs_txid(self) -> bool:
        """Overwriting by batch id is only right where a retry keeps its id (Trident)."""
        return self.mode == "overwrite"

    @property
    def partition_column(self) -> str:
        return "batch_id" if self.mode == "overwrite" else "batch"

    def __call__(self, df: Any, batch_id: int) -> None:
        from pyspark.sql import functions as F

        if self.mode == "overwrite":
            value = F.lit(int(batch_id)).cast("long")
        else:
            value = F.lit(f"{int(batch_id)}-{uuid.uuid4().hex}")
        (df.withColumn(self.partition_column, value)
           .write.mode("overwrite")
           .option("partitionOverwriteMode", "dynamic")
           .partitionBy(self.partition_column)
           .parquet(self.path))

    def __repr__(self) -> str:
        return f"ParquetSink({self.path!r}, mode={self.mode!r})"
