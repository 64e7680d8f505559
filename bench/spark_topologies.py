"""The Spark bridge bench topology (importable by the worker processes).

    words (reliable spout, fields word, ts) --shuffle--> spark (SparkBridgeBolt, 1 executor)

The spout emits the word count's words (the sentences of ``bench/topologies.py``'s seeded
pool, split, in order), one tuple tree per word: ``[word, time.time()]`` with a msg id;
failed ids are emitted again (with a fresh ``ts``). The bridge's ``fn`` (:class:`BatchStats`)
does one Spark job per batch -- group by word, count, min/max of ``ts``, collect -- and
appends one JSON line per batch to ``conf["bench.spark.out"]``: the tuples in the batch,
the oldest and newest emit time, when ``fn`` started and ended (``time.time()``, the same
clock as the spout's: one machine).
"""

from __future__ import annotations

import json
import os
import time

from squall.client import Spout, TopologyBuilder
from squall.client.spark import SparkBridgeBolt

try:
    from squall.bench.topologies import make_pool
except ImportError:  # squall installed without bench/: imported by path (code_paths)
    from topologies import make_pool  # type: ignore[no-redef]

SPOUT = "words"
BRIDGE = "spark"
OUT_KEY = "bench.spark.out"
TYPES = {"word": "string", "ts": "double"}


def word_stream() -> list[str]:
    """The acker word count's words, in the order its split bolt emits them."""
    return [w for s in make_pool() for w in s.split(" ")]


class TimedWordSpout(Spout):
    def open(self, conf, context, collector):
        self.emit = collector.emit
        self.words = word_stream()
        self.n = len(self.words)
        self.next = 0
        self.replay: list[int] = []

    def next_tuple(self):
        if self.replay:
            i = self.replay.pop()
        else:
            i = self.next
            self.next += 1
        self.emit([self.words[i % self.n], time.time()], msg_id=i)

    def fail(self, msg_id):
        self.replay.append(msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "ts"])


class BatchStats:
    """fn(df, batch_id): one Spark job over the batch, its figures appended as a JSON line.

    ``grouped``: count, min ts and max ts per word (a shuffle: a user's typical job);
    ``total``: the same over the whole batch (Spark still reads every row; no shuffle), to
    show what moving the tuples into Spark costs apart from the job.
    """

    def __init__(self, job: str = "grouped"):
        if job not in ("grouped", "total"):
            raise ValueError(f"job {job!r}: grouped or total")
        self.job = job

    def prepare(self, conf):
        self.path = conf[OUT_KEY]
        self.first = True

    def __call__(self, df, batch_id):
        from pyspark.sql import functions as F

        start = time.time()
        aggs = (F.count("*").alias("n"), F.min("ts").alias("oldest"), F.max("ts").alias("newest"))
        if self.job == "grouped":
            rows = df.groupBy("word").agg(*aggs).collect()
            distinct = len(rows)
        else:
            rows = df.agg(*aggs).collect()
            distinct = None  # a count of distinct words would be a shuffle again
        end = time.time()
        rec = {"batch_id": batch_id, "n": sum(r["n"] for r in rows), "distinct": distinct,
               "oldest": min(r["oldest"] for r in rows), "newest": max(r["newest"] for r in rows),
               "start": start, "end": end, "fn_secs": end - start, "pid": os.getpid()}
        if self.first:  # when the SparkContext (the JVM's side) came up
            self.first = False
            try:
                rec["spark_started"] = df.sparkSession.sparkContext.startTime / 1000.0
            except Exception:  # noqa: BLE001 (Spark Connect has no SparkContext)
                pass
        with open(self.path, "a") as fh:  # O_APPEND, one line per write
            fh.write(json.dumps(rec) + "\n")


def bridge_topology(max_batch_size: int, max_batch_secs: float,
                    max_in_flight: int = 2, job: str = "grouped") -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout(SPOUT, TimedWordSpout(), 1)
    b.set_bolt(BRIDGE, SparkBridgeBolt(BatchStats(job), types=TYPES, max_batch_size=max_batch_size,
                                       max_batch_secs=max_batch_secs, max_in_flight=max_in_flight),
               1).shuffle_grouping(SPOUT)
    return b
