"""Exclamation: Storm's first example. Words get '!!!' appended, twice.

    words --shuffle--> exclaim1 --shuffle--> exclaim2 (prints a sample)

Run it:  squall local examples/exclamation.py --duration 10
"""

from __future__ import annotations

import random
import time

from squall.client import BasicBolt, Spout, TopologyBuilder

WORDS = ["nathan", "mike", "jackson", "golda", "bertels"]


class WordSpout(Spout):
    """Emits random words, reliably (msg_id = a counter), at most ~1000 per second.

    It paces itself without sleeping: next_tuple returns at once when the next word is not
    due yet, and the executor waits a little before calling again (sleeping in next_tuple
    would hold the spout's acks and fails back meanwhile)."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.rng = random.Random(context.this_task_id)
        self.i = 0
        self.due = time.monotonic()

    def next_tuple(self):
        now = time.monotonic()
        if now < self.due:
            return
        self.due = max(self.due + 0.001, now - 0.1)  # catch up on at most 0.1 s
        self.i += 1
        self.collector.emit([self.rng.choice(WORDS)], msg_id=self.i)

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class Exclaim(BasicBolt):
    """Appends '!!!'; with print_every set, prints one in that many results."""

    def __init__(self, print_every: int = 0):
        self.print_every = print_every
        self.seen = 0

    def execute(self, tup, collector):
        out = tup.values[0] + "!!!"
        self.seen += 1
        if self.print_every and self.seen % self.print_every == 0:
            print(f"[exclamation] {out}", flush=True)
        collector.emit([out])

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


CONF = {"topology.workers": 2}


def topology() -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout("words", WordSpout(), 2)
    b.set_bolt("exclaim1", Exclaim(), 3).shuffle_grouping("words")
    b.set_bolt("exclaim2", Exclaim(print_every=500), 2).shuffle_grouping("exclaim1")
    return b
