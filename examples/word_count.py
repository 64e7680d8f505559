"""Word count: the classic Storm topology, reliable end to end.

    sentences (reliable spout) --shuffle--> split --fields(word)--> count --global--> report

Every sentence is emitted with a message id and tracked by the acker; a
failed or timed-out sentence is replayed. ``count`` sends its per-word
increments to ``report`` once a second (tick tuples); ``report`` prints the
top words while the topology runs and the totals, checked against the exact
expected counts, when it stops.

Run it:  squall local examples/word_count.py --duration 20
On a cluster:  squall jar examples word_count -c wordcount.sentences=0
Settings: -c wordcount.sentences=N (how many sentences; 0 = endless),
          -c topology.workers=N, -c topology.acker.executors=0 (no acking).
"""

from __future__ import annotations

import random
import string
from collections import Counter

from squall.client import BasicBolt, Bolt, Spout, TopologyBuilder

SENTENCES_KEY = "wordcount.sentences"
VOCAB_SIZE = 1000
POOL_SIZE = 10_000
WORDS_PER_SENTENCE = 10


def make_pool(seed: int = 20240611, vocab_size: int = VOCAB_SIZE,
              pool_size: int = POOL_SIZE) -> list[str]:
    """A fixed pool of 10-word sentences over a 1,000-word vocabulary (as the peers' workload;
    bench/scale.py asks for a larger vocabulary and pool)."""
    rng = random.Random(seed)
    vocab: list[str] = []
    seen: set[str] = set()
    while len(vocab) < vocab_size:
        w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    return [" ".join(rng.choice(vocab) for _ in range(WORDS_PER_SENTENCE))
            for _ in range(pool_size)]


def expected_counts(pool: list[str], n: int) -> Counter:
    """Exact word counts of sentences 0..n-1."""
    full, rem = divmod(n, len(pool))
    once: Counter = Counter()
    for s in pool:
        once.update(s.split(" "))
    out = Counter({w: c * full for w, c in once.items()})
    for s in pool[:rem]:
        out.update(s.split(" "))
    return +out


class SentenceSpout(Spout):
    """Emits sentence i with msg_id i; replays failed ids first. Each task takes its share."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.pool = make_pool()
        self.total = int(conf.get(SENTENCES_KEY, 20_000))
        tasks = context.component_tasks(context.this_component_id)
        self.step = len(tasks)
        self.next = context.this_task_index
        self.replay: list[int] = []

    def next_tuple(self):
        if self.replay:
            i = self.replay.pop()
        elif self.total == 0 or self.next < self.total:
            i = self.next
            self.next += self.step
        else:
            return
        self.collector.emit([self.pool[i % POOL_SIZE]], msg_id=i)

    def fail(self, msg_id):
        self.replay.append(msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])


class SplitSentence(BasicBolt):
    def execute(self, tup, collector):
        for word in tup.values[0].split(" "):
            collector.emit([word])

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class WordCount(Bolt):
    """Counts words; every tick sends the increments since the last one to ``report``."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.delta: Counter = Counter()

    def execute(self, tup):
        if tup.is_tick:
            if self.delta:
                self.collector.emit([dict(self.delta)], stream="increments")
                self.delta = Counter()
            return
        self.delta[tup.values[0]] += 1
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare_stream("increments", ["counts"])

    def get_component_configuration(self):
        return {"topology.tick.tuple.freq.secs": 1}


class RunningCount(Bolt):
    """Each word's count so far, emitted anchored to the word that raised it."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.counts: Counter = Counter()

    def execute(self, tup):
        word = tup.values[0]
        self.counts[word] += 1
        self.collector.emit([word, self.counts[word]], anchors=[tup])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])


class Report(Bolt):
    """Merges the counters; prints the top words every few seconds and the totals at the end."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.counts: Counter = Counter()
        self.sentences = int(conf.get(SENTENCES_KEY, 20_000))
        # User metrics (Storm's metrics v2): on the supervisor's /metrics as
        # squall_user_distinct_words and squall_user_increments_total.
        context.register_gauge("distinct_words", lambda: len(self.counts))
        self.increments = context.register_counter("increments")

    def execute(self, tup):
        if tup.is_tick:
            top = ", ".join(f"{w}={c}" for w, c in self.counts.most_common(5))
            print(f"[word_count] {sum(self.counts.values())} words so far; top: {top}", flush=True)
            return
        self.counts.update(tup.values[0])
        self.increments.inc()
        self.collector.ack(tup)

    def cleanup(self):
        total = sum(self.counts.values())
        print(f"[word_count] final: {total} words, {len(self.counts)} distinct; top 10:", flush=True)
        for w, c in self.counts.most_common(10):
            print(f"[word_count]   {w:<10} {c}", flush=True)
        if self.sentences:
            ok = self.counts == expected_counts(make_pool(), self.sentences)
            print(f"[word_count] counts match the expected totals for {self.sentences} "
                  f"sentences: {'yes' if ok else 'NO'}", flush=True)

    def get_component_configuration(self):
        return {"topology.tick.tuple.freq.secs": 3}


NAME = "word-count"
CONF = {"topology.workers": 2, "topology.max.spout.pending": 2000}


def topology() -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(), 2)
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", WordCount(), 2).fields_grouping("split", ["word"])
    b.set_bolt("report", Report(), 1).global_grouping("count", "increments")
    return b


def main(args: list[str]) -> None:
    """``squall jar examples word_count [NAME]``: submit to the cluster in squall.yaml."""
    from squall.client.submitter import submit_topology
    submit_topology(args[0] if args else NAME, CONF, topology())
