"""Word count into Spark: words are counted per batch in Spark and written to parquet.

    sentences (reliable spout) --shuffle--> split --shuffle--> spark (SparkBridgeBolt)

The bridge collects words into batches (10,000 words or 2 seconds) and hands each one to
``CountsToParquet`` as a DataFrame: Spark groups it by word and appends the counts to a
parquet directory. A batch's words are acked only once Spark has written them; if the
write fails, the batch's sentences are replayed. When the run ends, ``report`` reads the
parquet back with Spark and checks the totals against the exact expected counts.

Run it:  squall local examples/word_count_spark.py --duration 40
On a cluster:  squall jar examples word_count_spark -c wordcount.spark.output=hdfs://...
Settings: -c wordcount.sentences=N, -c wordcount.spark.output=DIR (default: a new directory
under the system's temp dir), -c spark.master=spark://host:7077 (any spark.* key reaches
the worker's SparkSession), -c wordcount.spark.fail_batch=N (batch N raises once, to see a
replay).

The bridge appends, so the output is at-least-once: a worker killed between Spark's write
and the acks can write a batch twice, and a replayed sentence (its batch failed or timed
out) writes again those of its words that were in a batch already written, so the report's
exact check may then say NO. For output written exactly once, see the Trident version in
squall.client.spark.foreach_batch (ParquetSink overwriting batch_id=<txid>).
"""

from __future__ import annotations

import os
import tempfile
import time

from squall.client import TopologyBuilder
from squall.client.spark import ParquetSink, SparkBridgeBolt
from word_count import SENTENCES_KEY, SentenceSpout, SplitSentence, expected_counts, make_pool

OUTPUT_KEY = "wordcount.spark.output"
FAIL_KEY = "wordcount.spark.fail_batch"

NAME = "word-count-spark"
CONF = {
    "topology.workers": 2,
    SENTENCES_KEY: 5000,
    # Sentences wait in a batch (up to 2 s) and then in Spark: keep enough of them in flight,
    # and room for slow batches (while Spark starts, the bridge holds their timeouts).
    "topology.max.spout.pending": 2000,
    "topology.message.timeout.secs": 60,
    "spark.sql.shuffle.partitions": 4,  # small batches: Spark's default 200 tasks per job is waste
}


class CountsToParquet:
    """fn(df, batch_id): the batch's word counts appended to parquet."""

    def prepare(self, conf):
        self.sink = ParquetSink(conf[OUTPUT_KEY], mode="append")
        self.fail_batch = int(conf.get(FAIL_KEY, 0))

    def __call__(self, df, batch_id):
        if batch_id == self.fail_batch and _first_failure(self.sink.path, batch_id):
            raise RuntimeError(f"batch {batch_id} fails once ({FAIL_KEY}), before writing; "
                               "its sentences are replayed")
        self.sink(df.groupBy("word").count(), batch_id)


def _first_failure(path: str, batch_id: int) -> bool:
    """True once per output directory (a marker file, created atomically)."""
    os.makedirs(path, exist_ok=True)
    try:
        os.close(os.open(os.path.join(path, f"_failed_once_{batch_id}"),
                         os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


def topology():
    # A fresh output directory per run (-c wordcount.spark.output=... replaces it).
    CONF.setdefault(OUTPUT_KEY, os.path.join(
        tempfile.gettempdir(), f"squall-word-count-spark-{time.strftime('%Y%m%d-%H%M%S')}"
                               f"-{os.getpid()}"))
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(), 1)
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    b.set_bolt("spark", SparkBridgeBolt(CountsToParquet(), types={"word": "string"},
                                        max_batch_size=10_000, max_batch_secs=2.0),
               1).shuffle_grouping("split")
    return b


def read_totals(path: str) -> dict[str, int]:
    """The word totals in the parquet output, summed by Spark."""
    from pyspark.sql import SparkSession, functions as F

    spark = (SparkSession.builder.master("local[*]").appName("word-count-spark-report")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    try:
        rows = (spark.read.parquet(path).groupBy("word").agg(F.sum("count").alias("n"))
                .collect())
        return {r["word"]: int(r["n"]) for r in rows}
    finally:
        spark.stop()


def report(conf: dict) -> None:
    """What ``squall local`` prints when it stops: the totals read back from parquet."""
    path = conf[OUTPUT_KEY]
    sentences = int(conf.get(SENTENCES_KEY, 5000))
    if not os.path.isdir(path):
        print(f"[word_count_spark] no output in {path}: no batch reached Spark", flush=True)
        return
    totals = read_totals(path)
    top = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:10]
    print(f"[word_count_spark] parquet {path}: {sum(totals.values())} words, "
          f"{len(totals)} distinct; top: {', '.join(f'{w}={c}' for w, c in top)}", flush=True)
    if sentences:
        ok = totals == dict(expected_counts(make_pool(), sentences))
        print(f"[word_count_spark] totals match the expected counts for {sentences} "
              f"sentences: {'yes' if ok else 'NO'}", flush=True)


def main(args: list[str]) -> None:
    """``squall jar examples word_count_spark [NAME]``: submit to the cluster in squall.yaml."""
    from squall.client.submitter import submit_topology
    submit_topology(args[0] if args else NAME, CONF, topology())
