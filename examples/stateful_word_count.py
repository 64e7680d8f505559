"""Stateful word count with exactly-once barrier checkpoints, and a windowed view of it.

    sentences (CheckpointedSpout) --shuffle--> split --fields(word)--> count (StatefulBolt)
                                                     \\--shuffle--> per_window (WindowedBolt)

``count`` keeps its counts in a KeyValueState saved at every checkpoint
(``topology.state.checkpoint.mode: barrier``): after a worker failure every spout
rewinds to the last completed checkpoint and every count restores it, so each word
counts once. ``per_window`` prints how many words went by in each 2-second tumbling
window (processing time). At the end each count task prints its totals, checked against
the expected counts of its share of the words.

Run it:  squall local examples/stateful_word_count.py --duration 15
With Redis state (survives worker restarts):  -c topology.state.provider=redis
Settings: -c wordcount.sentences=N, -c topology.state.checkpoint.mode=acker (Storm's).
"""

from __future__ import annotations

import zlib

from squall.client import (BasicBolt, CheckpointedSpout, Duration, StatefulBolt, TopologyBuilder,
                           WindowedBolt)

try:
    from squall.examples.word_count import POOL_SIZE, SENTENCES_KEY, expected_counts, make_pool
except ImportError:  # run from the examples folder (squall jar examples ...)
    from word_count import POOL_SIZE, SENTENCES_KEY, expected_counts, make_pool  # type: ignore


class Sentences(CheckpointedSpout):
    """Sentence i of the pool for i in this task's share; rewinds to a checkpoint's offset."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.pool = make_pool()
        self.total = int(conf.get(SENTENCES_KEY, 20_000))
        self.step = len(context.component_tasks(context.this_component_id))
        self.start = self.next = context.this_task_index

    def next_tuple(self):
        if self.next < self.total:
            self.collector.emit([self.pool[self.next % POOL_SIZE]], msg_id=self.next)
            self.next += self.step

    def snapshot(self):
        return self.next

    def restore(self, offsets):
        self.next = self.start if offsets is None else offsets

    def fail(self, msg_id):  # the acker mode replays; barrier mode never fails tuples
        self.next = min(self.next, msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])


class Split(BasicBolt):
    def execute(self, tup, collector):
        for word in tup["sentence"].split(" "):
            collector.emit([word])

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class Count(StatefulBolt):
    def prepare(self, conf, context, collector):
        self.collector = collector
        self.sentences = int(conf.get(SENTENCES_KEY, 20_000))
        self.task, self.tasks = context.this_task_index, len(context.component_tasks(
            context.this_component_id))

    def init_state(self, state):
        self.counts = state

    def execute(self, tup):
        word = tup["word"]
        self.counts.put(word, self.counts.get(word, 0) + 1)
        self.collector.ack(tup)

    def cleanup(self):
        mine = dict(self.counts.items())
        # The words this task owns: the fields grouping's hash (CRC32 of the word).
        want = {w: c for w, c in expected_counts(make_pool(), self.sentences).items()
                if zlib.crc32(w.encode()) % self.tasks == self.task}
        print(f"[stateful_word_count] count task {self.task}: {sum(mine.values())} words, "
              f"{len(mine)} distinct; exact: {'yes' if mine == want else 'NO'}", flush=True)

    def declare_output_fields(self, declarer):
        pass


class PerWindow(WindowedBolt):
    def execute(self, window):
        print(f"[stateful_word_count] window ending {window.end_timestamp}: "
              f"{len(window)} words", flush=True)

    def declare_output_fields(self, declarer):
        pass


NAME = "stateful-word-count"
CONF = {"topology.workers": 2, "topology.state.checkpoint.mode": "barrier",
        "topology.state.checkpoint.interval.ms": 1000}


def topology() -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences(), 2)
    b.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", Count(), 2).fields_grouping("split", ["word"])
    b.set_bolt("per_window", PerWindow().with_tumbling_window(Duration.seconds(2))) \
        .shuffle_grouping("split")
    return b


def main(args: list[str]) -> None:
    """``squall jar examples stateful_word_count [NAME]``: submit to the cluster in squall.yaml."""
    from squall.client.submitter import submit_topology
    submit_topology(args[0] if args else NAME, CONF, topology())
