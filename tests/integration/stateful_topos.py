"""Stateful and windowed components for the integration tests (workers import this by name).

The word count's input is a function of the message id, so a test knows the exact counts:
message ``i`` is the sentence :func:`sentence` (i), and every word of it is counted once.
"""

from __future__ import annotations

import collections
import time

from squall.client import BasicBolt, Spout
from squall.client.stateful import CheckpointedSpout, StatefulBolt, StatefulWindowedBolt
from squall.client.windowing import WindowedBolt
from topos import Recorder

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "yuzu", "sloe", "quince", "lemon"]


def sentence(i: int) -> str:
    return " ".join(WORDS[(i * k + k) % len(WORDS)] for k in (1, 3, 7))


def expected_counts(n: int) -> dict[str, int]:
    c = collections.Counter()
    for i in range(n):
        c.update(sentence(i).split())
    return dict(c)


class SentenceSpout(Spout):
    """Emits message ids 0..``test.spout.count``-1 (its share) as sentences; replays failures.

    Throttled by ``test.spout.rate`` sentences a second per task (0: as fast as it can),
    so a kill lands mid-run. Restarted, it emits its share again from the start: id i is
    always sentence i.
    """

    stable_message_ids = True

    def open(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.next = self.first = context.this_task_index
        self.step = len(context.component_tasks(context.this_component_id))
        self.count = int(conf.get("test.spout.count", 1000))
        self.rate = float(conf.get("test.spout.rate", 0))
        self.started = time.monotonic()
        self.emitted = 0
        self.replays = collections.deque()

    def next_tuple(self):
        if self.replays:
            i = self.replays.popleft()
        else:
            if self.next >= self.count:
                return
            if self.rate and self.emitted > (time.monotonic() - self.started) * self.rate:
                return
            i = self.next
            self.next += self.step
            self.emitted += 1
        self.collector.emit([sentence(i)], msg_id=i)

    def ack(self, msg_id):
        self.rec("ack", msg_id)

    def fail(self, msg_id):
        self.rec("fail", msg_id)
        self.replays.append(msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])


class CheckpointedSentences(CheckpointedSpout, SentenceSpout):
    """SentenceSpout that rewinds (barrier checkpointing): its offset is its next id."""

    def snapshot(self):
        return self.next

    def restore(self, offsets):
        self.rec("restore", offsets)
        self.replays.clear()
        # None: no checkpoint completed yet, so from the start (a recovery before the first
        # checkpoint rewinds there too).
        self.next = offsets if offsets is not None else self.first


class Split(BasicBolt):
    def execute(self, tup, collector):
        for w in tup[0].split():
            collector.emit([w])

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class StatefulCount(StatefulBolt):
    """Counts words in its KeyValueState; records how many tuples each transaction held."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.since = 0

    def init_state(self, state):
        self.counts = state
        self.rec("init", sum(v for _, v in state.items()))

    def execute(self, tup):
        w = tup[0]
        self.counts.put(w, self.counts.get(w, 0) + 1)
        self.since += 1
        self.collector.emit([w, self.counts.get(w)], anchors=[tup])
        self.collector.ack(tup)

    def pre_prepare(self, txid):
        self.rec("prepare", f"{txid} {self.since}")
        self.since = 0

    def pre_rollback(self):
        self.rec("rollback", self.since)
        self.since = 0

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])


class WindowRecorder(WindowedBolt):
    """Records each window it runs: ``window <start> <end> <n values...>``; emits its size."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)

    def execute(self, window):
        vals = " ".join(str(t[0]) for t in window.get())
        self.rec("window", f"{window.start_timestamp} {window.end_timestamp} {vals}")
        self.collector.emit([len(window)])

    def declare_output_fields(self, declarer):
        declarer.declare(["size"])


class TimedNumbers(Spout):
    """Event time: emits ``[i, ts]`` for i in 0..``test.spout.count``-1 (one task), where ts
    comes from ``test.timestamps`` (a list); reliable (msg id i)."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.ts = list(conf["test.timestamps"])
        self.i = 0

    def next_tuple(self):
        if self.i >= len(self.ts):
            return
        self.collector.emit([self.i, self.ts[self.i]], msg_id=self.i)
        self.i += 1

    def ack(self, msg_id):
        self.rec("ack", msg_id)

    def fail(self, msg_id):
        self.rec("fail", msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "ts"])


class PhasedTimedNumbers(TimedNumbers):
    """TimedNumbers that holds back the ids in ``test.pause.before`` until
    ``test.pause.secs`` have passed since it emitted everything before them (so the
    watermark has moved past their timestamps: they are late for certain)."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.pause_before = set(conf.get("test.pause.before", []))
        self.pause = float(conf.get("test.pause.secs", 0))
        self.resume_at = None

    def next_tuple(self):
        if self.i in self.pause_before and self.i < len(self.ts):
            now = time.monotonic()
            if self.resume_at is None:
                self.resume_at = now + self.pause
            if now < self.resume_at:
                return
            self.pause_before.discard(self.i)
            self.resume_at = None
        super().next_tuple()


class LateRecorder(BasicBolt):
    def prepare(self, conf, context):
        self.rec = Recorder(conf, context)

    def execute(self, tup, collector):
        self.rec("late", tup[0][0])


class SlowSplit(Split):
    """Split whose second task sleeps ``test.split.sleep`` seconds per sentence: a slow
    input channel for the counts (run it with topology.executor.threaded)."""

    def prepare(self, conf, context):
        self.sleep = float(conf.get("test.split.sleep", 0)) if context.this_task_index == 1 else 0

    def execute(self, tup, collector):
        if self.sleep:
            time.sleep(self.sleep)
        super().execute(tup, collector)


class CheckpointedTimed(CheckpointedSpout):
    """Event time, rewindable: emits ``[i, BASE + 10 * i]`` for i < ``test.spout.count`` at
    ``test.spout.rate`` tuples a second (one task)."""

    BASE = 1_700_000_000_000

    def open(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.count = int(conf.get("test.spout.count", 1000))
        self.rate = float(conf.get("test.spout.rate", 0))
        self.started = time.monotonic()
        self.emitted = 0
        self.i = 0

    def next_tuple(self):
        if self.i >= self.count:
            return
        if self.rate and self.emitted > (time.monotonic() - self.started) * self.rate:
            return
        self.collector.emit([self.i, self.BASE + 10 * self.i])
        self.i += 1
        self.emitted += 1

    def snapshot(self):
        return self.i

    def restore(self, offsets):
        self.rec("restore", offsets)
        self.i = offsets or 0

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "ts"])


class WindowSum(WindowedBolt):
    def execute(self, window):
        self.collector.emit([window.end_timestamp, sum(t[0] for t in window.get())])

    def declare_output_fields(self, declarer):
        declarer.declare(["end", "sum"])


class WindowTotals(StatefulBolt):
    """Adds each window's sum to its end's total: a window run twice shows twice."""

    def init_state(self, state):
        self.totals = state

    def execute(self, tup):
        end, s = tup[0], tup[1]
        self.totals.put(end, self.totals.get(end, 0) + s)

    def declare_output_fields(self, declarer):
        pass


class StatefulWindowSum(StatefulWindowedBolt):
    """A StatefulWindowedBolt: adds each window's sum to its end's total in its own state."""

    def init_state(self, state):
        self.totals = state

    def execute(self, window):
        end = window.end_timestamp
        self.totals.put(end, self.totals.get(end, 0) + sum(t[0] for t in window.get()))

    def declare_output_fields(self, declarer):
        pass


class FailOnceSplit(Split):
    """Split that fails the sentence ``test.fail.sentence`` (an index) the first time any
    task sees it: a file in ``test.events.dir`` remembers it across epochs and workers."""

    def prepare(self, conf, context):
        import os
        self.target = sentence(int(conf["test.fail.sentence"]))
        self.marker = os.path.join(conf["test.events.dir"], "failed-once")

    def execute(self, tup, collector):
        import os
        from squall.client import FailedException
        if tup[0] == self.target:
            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.close(fd)
                raise FailedException(f"failing sentence {tup[0]!r} once")
        super().execute(tup, collector)
