"""Trident word count: exactly-once counts of the words of text files, kept in Redis.

    lines (TransactionalLineFiles) -> each(Split) -> group_by(word)
        -> persistent_aggregate(RedisMapState, Count)

Each batch is a byte range of lines per file; the master coordinator commits the
batches strictly in txid order and the transactional map skips an update its
txid already made, so a replayed batch (a failure, a killed worker) never counts
a word twice.

Run it:  squall local examples/trident_word_count.py --duration 20
         (starts nothing but Squall's daemons: run a Redis first, e.g.
          `python -m squall.deploy.redis --port 6379`)
On a cluster:  squall jar examples trident_word_count -c trident.input=/data/books
Settings: -c trident.input=FILE_OR_DIR (default: a generated sample),
          -c trident.batch.lines=N, -c trident.state=transactional|opaque.
"""

from __future__ import annotations

import os

from squall.client.trident.line_files import OpaqueLineFiles, TransactionalLineFiles
from squall.client.trident.operation import Count, Function
from squall.client.trident.state.redis_map import RedisMapState
from squall.client.trident.stream import TridentTopology

NAME = "trident-word-count"
CONF = {"topology.workers": 2, "topology.max.spout.pending": 4,
        "topology.trident.batch.emit.interval.millis": 50}


class Split(Function):
    def execute(self, tup, collector):
        for word in tup[0].split():
            collector.emit([word])


def input_files(path: str) -> list[str]:
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".txt"))
    return [path]


def topology(files: list[str] | None = None, batch_lines: int = 100, state: str = "transactional",
             redis_conf: dict | None = None, name: str = "word-counts"):
    t = TridentTopology()
    spout_class = OpaqueLineFiles if state == "opaque" else TransactionalLineFiles
    factory = (RedisMapState.opaque if state == "opaque" else RedisMapState.transactional)
    lines = t.new_stream("lines", spout_class(files or input_files(sample()), batch_lines))
    (lines.each(["line"], Split(), ["word"])
          .group_by(["word"])
          .persistent_aggregate(factory(redis_conf, name), Count(), ["count"])
          .parallelism_hint(2))
    return t.build()


def sample() -> str:
    """A small generated input beside this file (the word count's sentences)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "trident_sample.txt")
    if not os.path.exists(path):
        from word_count import make_pool
        with open(path + ".tmp", "w") as fh:
            fh.writelines(s + "\n" for s in make_pool()[:2000])
        os.replace(path + ".tmp", path)
    return path


def main(args: list[str]) -> None:
    """``squall jar examples trident_word_count [NAME]``."""
    from squall.client.submitter import submit_topology
    submit_topology(args[0] if args else NAME, CONF, topology())
