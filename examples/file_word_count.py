"""Word count into files, exactly once: each word's running count as a ``word,count`` line.

    sentences (CheckpointedSpout) --shuffle--> split --fields(word)--> count (StatefulBolt)
        --fields(word)--> files (FileSinkBolt)

Barrier checkpoints (``topology.state.checkpoint.mode: barrier``) every second: ``files``
writes into hidden in-progress files and publishes a file, by an atomic rename, only when
the checkpoint holding its lines commits; after a worker failure every spout rewinds to the
last completed checkpoint, the counts restore it and the sink cuts its files back to it, so
each count appears once. Files rotate at 1 MB, or 2 seconds after they were opened, so the
last lines are published soon after the input ends.

The files go into ``$FILE_WORD_COUNT_OUT`` (default ``./file-word-count-out``), or any fsspec
URL there (``memory://``, ``s3://bucket/dir`` with s3fs). ``report`` reads the published
files back: one line per word of the input, each word's last count its total.

Run it:  squall local examples/file_word_count.py --duration 10
On a cluster (a directory every worker host sees):
    FILE_WORD_COUNT_OUT=/shared/out squall jar examples file_word_count
Settings: -c wordcount.sentences=N (sentences the spout emits; default 20000).
"""

from __future__ import annotations

import os

from squall.client import StatefulBolt, TopologyBuilder
from squall.connectors.files import (AnyRotationPolicy, DelimitedRecordFormat, FileSinkBolt,
                                     FileSizeRotationPolicy, TimedRotationPolicy, Units)

try:
    from squall.examples.stateful_word_count import Sentences, Split
    from squall.examples.word_count import SENTENCES_KEY, expected_counts, make_pool
except ImportError:  # run from the examples folder (squall jar examples ...)
    from stateful_word_count import Sentences, Split  # type: ignore
    from word_count import SENTENCES_KEY, expected_counts, make_pool  # type: ignore

NAME = "file-word-count"
CONF = {"topology.workers": 2, "topology.state.checkpoint.mode": "barrier",
        "topology.state.checkpoint.interval.ms": 1000}


def out_dir() -> str:
    """Where the files go: resolved where the topology is built (workers run elsewhere)."""
    where = os.environ.get("FILE_WORD_COUNT_OUT", "file-word-count-out")
    return where if "://" in where else os.path.abspath(where)


class Count(StatefulBolt):
    """Each word's count in the task's state; emits ``[word, count]`` for each word."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.counts = state

    def execute(self, tup):
        word = tup["word"]
        n = self.counts.get(word, 0) + 1
        self.counts.put(word, n)
        self.collector.emit([word, n], anchors=[tup])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])


def topology() -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences(), 2)
    b.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", Count(), 2).fields_grouping("split", ["word"])
    sink = (FileSinkBolt(out_dir())
            .with_record_format(DelimitedRecordFormat(["word", "count"]))
            .with_rotation_policy(AnyRotationPolicy(FileSizeRotationPolicy(1, Units.MB),
                                                    TimedRotationPolicy(2))))
    b.set_bolt("files", sink, 2).fields_grouping("count", ["word"])
    return b


def report(conf: dict) -> None:
    """What ``squall local`` prints when it stops: the published lines against the input."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(out_dir())
    names = sorted(p for p in fs.ls(root, detail=False)
                   if not os.path.basename(p.rstrip("/")).startswith("."))
    lines: list[tuple[str, int]] = []
    for p in names:
        for line in fs.cat_file(p).decode().splitlines():
            word, count = line.split(",")
            lines.append((word, int(count)))
    expected = expected_counts(make_pool(), int(conf.get(SENTENCES_KEY, 20_000)))
    last: dict[str, int] = {}
    for word, count in lines:
        last[word] = max(count, last.get(word, 0))
    once = len(lines) == len(set(lines))
    print(f"[file_word_count] {len(lines)} lines in {len(names)} published files in "
          f"{out_dir()}; {len(last)} distinct words; every line once: "
          f"{'yes' if once else 'NO'}", flush=True)
    print(f"[file_word_count] last counts match the input exactly: "
          f"{'yes' if last == dict(expected) and len(lines) == sum(expected.values()) else 'NO'}",
          flush=True)


def main(args: list[str]) -> None:
    """``squall jar examples file_word_count [NAME]``: submit to the cluster in squall.yaml."""
    from squall.client.submitter import submit_topology
    submit_topology(args[0] if args else NAME, CONF, topology())
