"""Topologies feeding Spark for the integration tests (importable by worker processes).

Every ``fn`` call is logged to ``<output>/_calls`` (one line per call: kind, batch id, pid),
so a test sees what reached Spark, and how often, after the workers are gone.
"""

from __future__ import annotations

import os

from squall.client.spark import ParquetSink, foreach_batch
from squall.client.trident.stream import TridentTopology
from trident_topos import Split

OUTPUT_KEY = "spark_test.output"
FAIL_KEY = "spark_test.fail_batch"


def log_call(path: str, kind: str, batch_id: int) -> None:
    with open(os.path.join(path, "_calls"), "a") as fh:  # O_APPEND: one line per write
        fh.write(f"{kind} {batch_id} {os.getpid()}\n")


def calls(path: str) -> list[tuple[str, int]]:
    try:
        with open(os.path.join(path, "_calls")) as fh:
            return [(k, int(b)) for k, b, _ in (line.split() for line in fh)]
    except FileNotFoundError:
        return []


def first_time(path: str, batch_id: int) -> bool:
    try:
        os.close(os.open(os.path.join(path, f"_failed_{batch_id}"),
                         os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        return True
    except FileExistsError:
        return False


class TridentWords:
    """fn(df, txid): the batch's word counts overwrite partition batch_id=<txid>. The first
    attempt of txid ``spark_test.fail_batch`` raises *after* its write reached parquet, so
    the retry must overwrite it, not add to it."""

    def prepare(self, conf):
        self.path = conf[OUTPUT_KEY]
        os.makedirs(self.path, exist_ok=True)
        self.sink = ParquetSink(self.path)
        self.fail = int(conf.get(FAIL_KEY, 0))

    def __call__(self, df, txid):
        self.sink(df.groupBy("word").count(), txid)
        log_call(self.path, "trident", txid)
        if txid == self.fail and first_time(self.path, txid):
            raise RuntimeError(f"txid {txid} fails once after writing")


def trident_words(spout):
    t = TridentTopology()
    words = t.new_stream("lines", spout).each(["line"], Split(), ["word"])
    foreach_batch(words, TridentWords(), fields=["word"], types={"word": "string"})
    return t.build()


class PlainCounts:
    """fn(df, batch_id): the batch's word counts appended to parquet (the example's fn)."""

    def prepare(self, conf):
        self.path = conf[OUTPUT_KEY]
        os.makedirs(self.path, exist_ok=True)
        self.sink = ParquetSink(self.path, mode="append")

    def __call__(self, df, batch_id):
        self.sink(df.groupBy("word").count(), batch_id)
        log_call(self.path, "plain", batch_id)


#: Conf of the plain topology: the word_count_spark example's.
PLAIN_CONF = {"topology.workers": 2, "wordcount.sentences": 5000,
              "topology.max.spout.pending": 2000, "topology.message.timeout.secs": 60,
              "spark.sql.shuffle.partitions": 4}


def plain_words(parallelism: int = 2, max_batch_size: int = 5000):
    """sentences -> split -> ``parallelism`` bridge executors (examples/word_count.py's
    spout and split: copy it beside this file)."""
    from squall.client import TopologyBuilder
    from squall.client.spark import SparkBridgeBolt
    from word_count import SentenceSpout, SplitSentence

    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(), 1)
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    b.set_bolt("spark", SparkBridgeBolt(PlainCounts(), types={"word": "string"},
                                        max_batch_size=max_batch_size, max_batch_secs=1.0),
               parallelism).shuffle_grouping("split")
    return b


def main(args):
    """``squall jar <pkg> spark_topos plain`` or ``... trident <input dir> <batch lines>``."""
    import glob

    from squall.client.submitter import submit_topology
    from squall.client.trident.line_files import TransactionalLineFiles

    if args[0] == "plain":
        submit_topology("spark-plain", PLAIN_CONF, plain_words())
    else:
        files = sorted(glob.glob(os.path.join(args[1], "*.txt")))
        submit_topology("spark-trident", {"topology.workers": 2},
                        trident_words(TransactionalLineFiles(files, int(args[2]))))
