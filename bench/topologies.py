"""Bench-only topologies: the peers' word-count workload on Squall.

    sentences --shuffle--> split --fields(word)--> count

The sentences come from the seeded pool of ``examples/word_count.py`` (10-word
sentences over a 1,000-word vocabulary, the same generator and seed as the
peers' ``workload.py``). Sentence ``i`` is ``pool[i % POOL_SIZE]``; spout task
``k`` of ``P`` emits ``i = k, k + P, k + 2P, ...``.

Spout modes (``bench.mode`` in the topology conf):

* ``fixed``: emit ``bench.sentences`` sentences as fast as the runtime lets it,
  with a msg_id when ``bench.reliable`` (failed ids are replayed), then stop.
* ``rate``: emit without end at ``bench.rate`` sentences/s in total (a token
  bucket per task, ``bench.rate / P`` each), always with msg_ids. The spout
  measures the complete latency of the sentences it emitted inside the window
  ``[bench.warmup_secs, bench.warmup_secs + bench.measure_secs)`` after its
  first emit itself (emit call -> ``ack`` callback) and writes them to
  ``bench.out_dir/lat-<task>.json`` when deactivated.
* ``idle``: ``next_tuple`` returns at once, emitting nothing.

The count bolt has no tick tuples, so the ``executed`` counter of its tasks in
the heartbeat is exactly the number of words counted.
"""

from __future__ import annotations

import json
import os
import time

from squall.client import BasicBolt, Bolt, Spout, TopologyBuilder
from squall.client.stateful import CheckpointedSpout, StatefulBolt

try:  # the example's seeded pool generator (same seed and draws as the peers' workload.py)
    from squall.examples.word_count import POOL_SIZE, make_pool
except ImportError:  # squall installed without examples/: the same generator, copied
    import random
    import string

    POOL_SIZE = 10_000

    def make_pool(seed: int = 20240611, vocab_size: int = 1000,
                  pool_size: int = POOL_SIZE) -> list[str]:
        rng = random.Random(seed)
        vocab: list[str] = []
        seen: set[str] = set()
        while len(vocab) < vocab_size:
            w = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(3, 9)))
            if w not in seen:
                seen.add(w)
                vocab.append(w)
        return [" ".join(rng.choice(vocab) for _ in range(10)) for _ in range(pool_size)]

SPOUT = "sentences"
SPLIT = "split"
COUNT = "count"


def _apply_diagnostics(conf) -> None:
    """Bench-only process-wide knobs, applied by the spout's ``open`` in each worker.

    ``bench.switch_interval``: the GIL switch interval (seconds);
    ``bench.gc_threshold``: ``"off"`` (gc.disable) or ``"g0,g1,g2"`` for gc.set_threshold,
    after a gc.freeze() of everything allocated at start-up.
    """
    si = conf.get("bench.switch_interval")
    if si:
        import sys
        sys.setswitchinterval(float(si))
    th = conf.get("bench.gc_threshold")
    if th:
        import gc
        gc.collect()
        gc.freeze()
        if str(th) == "off":
            gc.disable()
        else:
            gc.set_threshold(*(int(x) for x in str(th).split(",")))


class BenchSentenceSpout(Spout):
    def open(self, conf, context, collector):
        _apply_diagnostics(conf)
        self.collector = collector
        self.emit = collector.emit
        self.mode = str(conf.get("bench.mode", "fixed"))
        vocab = int(conf.get("bench.vocab", 0))
        # A larger vocabulary (bench/scale.py) gets a pool with a sentence per word at least.
        self.pool = make_pool(vocab_size=vocab, pool_size=max(POOL_SIZE, vocab)) if vocab \
            else make_pool()
        self.pool_n = len(self.pool)
        self.total = int(conf.get("bench.sentences", 0))
        self.reliable = bool(conf.get("bench.reliable", True))
        tasks = context.component_tasks(context.this_component_id)
        self.task = context.this_task_id
        self.step = len(tasks)
        self.next = self.first = context.this_task_index
        self.replay: list[int] = []
        # rate mode
        self.rate = float(conf.get("bench.rate", 0)) / self.step
        self.burst = max(1.0, self.rate * 0.01)  # at most 10 ms worth of catch-up at once
        self.warmup = float(conf.get("bench.warmup_secs", 3.0))
        self.measure = float(conf.get("bench.measure_secs", 10.0))
        self.out_dir = conf.get("bench.out_dir")
        #: First emit (monotonic): the latency window and GC recording count from it.
        self.t_origin: float | None = None
        #: Token-bucket origin (moves forward when a stall would cause a big burst).
        self.t_start: float | None = None
        self.sent = 0
        self.tracked: dict[int, float] = {}
        self.latencies: list[float] = []
        self.window_emitted = 0
        self.written = False
        #: Diagnostic (``bench.latency_trace``): (emit time since start, latency ms) pairs.
        self.trace: list | None = [] if conf.get("bench.latency_trace") else None
        #: Diagnostic: this worker's GC pauses (generation, ms) after the first emit (fixed
        #: mode) or inside the latency window (rate mode); written with the latency file.
        self.gc_pauses: list[tuple[int, float]] = []
        self._gc_t0 = 0.0
        if self.mode == "idle":
            self.next_tuple = self._idle  # type: ignore[method-assign]
            return
        if self.mode == "rate":
            self.next_tuple = self._rated  # type: ignore[method-assign]
        import gc
        gc.callbacks.append(self._gc_cb)

    def _gc_cb(self, phase, info):
        now = time.perf_counter()
        if phase == "start":
            self._gc_t0 = now
            return
        if self.t_origin is None or self.written:
            return
        if self.mode == "rate":
            since = time.monotonic() - self.t_origin
            if not self.warmup <= since < self.warmup + self.measure:
                return
        self.gc_pauses.append((info["generation"], (now - self._gc_t0) * 1000.0))

    # -- fixed N -------------------------------------------------------------------
    def next_tuple(self):
        if self.t_origin is None:
            self.t_origin = time.monotonic()
        if self.replay:
            i = self.replay.pop()
        elif self.next < self.total:
            i = self.next
            self.next += self.step
        else:
            return
        if self.reliable:
            self.emit([self.pool[i % self.pool_n]], msg_id=i)
        else:
            self.emit([self.pool[i % self.pool_n]])

    def fail(self, msg_id):
        if self.mode == "fixed":
            self.replay.append(msg_id)

    # -- rate-limited ----------------------------------------------------------------
    def _rated(self):
        now = time.monotonic()
        if self.t_start is None:
            self.t_start = self.t_origin = now
        allowed = (now - self.t_start) * self.rate - self.sent
        if allowed < 1.0:
            return
        if allowed > self.burst:  # we fell behind (stall): do not dump the backlog at once
            self.t_start += (allowed - self.burst) / self.rate
        i = self.next
        self.next += self.step
        self.sent += 1
        since = now - self.t_origin
        self.emit([self.pool[i % self.pool_n]], msg_id=i)
        if self.warmup <= since < self.warmup + self.measure:
            self.tracked[i] = now
            self.window_emitted += 1

    def ack(self, msg_id):
        if self.mode == "rate":
            t0 = self.tracked.pop(msg_id, None)
            if t0 is not None:
                now = time.monotonic()
                self.latencies.append((now - t0) * 1000.0)
                if self.trace is not None:
                    self.trace.append((t0 - self.t_origin, (now - t0) * 1000.0))

    def deactivate(self):
        if self.mode != "idle" and self.out_dir and not self.written:
            self.written = True
            now = time.monotonic()
            path = os.path.join(self.out_dir, f"lat-{self.task}.json")
            with open(path + ".tmp", "w") as fh:
                json.dump({"task": self.task, "latencies_ms": self.latencies,
                           "window_emitted": self.window_emitted,
                           "unacked_in_window": len(self.tracked),
                           # trees of the window still pending: their age so far (a lower
                           # bound of their latency), so an overloaded run is not flattered
                           "unacked_age_ms": [(now - t0) * 1000.0 for t0 in self.tracked.values()],
                           "since_first_emit_s": now - self.t_origin if self.t_origin else None,
                           "gc_pauses": self.gc_pauses, "trace": self.trace,
                           "measure_secs": self.measure, "rate_per_task": self.rate}, fh)
            os.replace(path + ".tmp", path)

    # -- idle ------------------------------------------------------------------------
    def _idle(self):
        return

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])


class SplitSentence(BasicBolt):
    def execute(self, tup, collector):
        emit = collector.emit
        for word in tup.values[0].split(" "):
            emit([word])

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class CountWords(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector
        self.ack = collector.ack
        self.counts: dict[str, int] = {}

    def execute(self, tup):
        w = tup.values[0]
        counts = self.counts
        counts[w] = counts.get(w, 0) + 1
        self.ack(tup)

    def declare_output_fields(self, declarer):
        pass


def word_count(parallelism: int = 2) -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout(SPOUT, BenchSentenceSpout(), parallelism)
    b.set_bolt(SPLIT, SplitSentence(), parallelism).shuffle_grouping(SPOUT)
    b.set_bolt(COUNT, CountWords(), parallelism).fields_grouping(SPLIT, ["word"])
    return b


class BenchCheckpointedSpout(CheckpointedSpout, BenchSentenceSpout):
    """The fixed-N sentence spout that rewinds (barrier checkpointing): its offset is the
    next sentence index."""

    def snapshot(self):
        return self.next

    def restore(self, offsets):
        # None: no checkpoint completed yet, so from the start.
        self.next = offsets if offsets is not None else self.first


class StatefulCountWords(StatefulBolt):
    """The count bolt with its counts in a KeyValueState (bench/stateful.py)."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.ack = collector.ack

    def init_state(self, state):
        self.counts = state
        self.get = state.get
        self.put = state.put

    def execute(self, tup):
        w = tup.values[0]
        self.put(w, self.get(w, 0) + 1)
        self.ack(tup)

    def declare_output_fields(self, declarer):
        pass


def stateful_word_count(rewinding: bool):
    """The word count with a stateful count bolt (``rewinding``: a CheckpointedSpout)."""
    def build(parallelism: int = 2) -> TopologyBuilder:
        b = TopologyBuilder()
        spout = BenchCheckpointedSpout() if rewinding else BenchSentenceSpout()
        b.set_spout(SPOUT, spout, parallelism)
        b.set_bolt(SPLIT, SplitSentence(), parallelism).shuffle_grouping(SPOUT)
        b.set_bolt(COUNT, StatefulCountWords(), parallelism).fields_grouping(SPLIT, ["word"])
        return b
    return build


class Hold(Bolt):
    """Never acks: every tree its spout starts stays pending (bench.py's worker RSS figure)."""

    def execute(self, tup):
        pass

    def declare_output_fields(self, declarer):
        pass


def pending_trees(parallelism: int = 1) -> TopologyBuilder:
    """The sentence spout into a bolt that never acks: the pending trees pile up."""
    b = TopologyBuilder()
    b.set_spout(SPOUT, BenchSentenceSpout(), parallelism)
    b.set_bolt("hold", Hold(), parallelism).shuffle_grouping(SPOUT)
    return b


# -- bench/metrics.py: the same word count with user metrics (Storm metrics v2) -------------

class SplitSentenceMetrics(BasicBolt):
    """SplitSentence plus a counter (sentences) and a histogram (words per sentence)."""

    def prepare(self, conf, context):
        self.sentences = context.register_counter("sentences")
        self.words_per_sentence = context.register_histogram("words_per_sentence")

    def execute(self, tup, collector):
        emit = collector.emit
        words = tup.values[0].split(" ")
        for word in words:
            emit([word])
        self.sentences.inc()
        self.words_per_sentence.update(len(words))

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class CountWordsMetrics(CountWords):
    """CountWords plus a counter (words) and a gauge (distinct words seen by this task)."""

    def prepare(self, conf, context, collector):
        super().prepare(conf, context, collector)
        self.words = context.register_counter("words")
        context.register_gauge("distinct_words", lambda: len(self.counts))

    def execute(self, tup):
        w = tup.values[0]
        counts = self.counts
        counts[w] = counts.get(w, 0) + 1
        self.words.inc()
        self.ack(tup)


def word_count_metrics(parallelism: int = 2) -> TopologyBuilder:
    """``word_count`` with SplitSentenceMetrics and CountWordsMetrics; same groupings."""
    b = TopologyBuilder()
    b.set_spout(SPOUT, BenchSentenceSpout(), parallelism)
    b.set_bolt(SPLIT, SplitSentenceMetrics(), parallelism).shuffle_grouping(SPOUT)
    b.set_bolt(COUNT, CountWordsMetrics(), parallelism).fields_grouping(SPLIT, ["word"])
    return b
