"""Components for the integration tests: they record what happens to them in event files.

Each task appends ``<kind> <payload>`` lines to ``<events dir>/<component>-<task>.log``
(the dir comes from the ``test.events.dir`` conf key), so a test reads back
exactly what user code saw: emits, acks, fails, executed tuples.
Workers import this module by name (``topos``), so it must stay importable
from its own directory.
"""

from __future__ import annotations

import os
import time

from squall.client import BasicBolt, Bolt, FailedException, Spout

EVENTS = "test.events.dir"


class Recorder:
    def __init__(self, conf, context):
        d = conf[EVENTS]
        self.path = os.path.join(d, f"{context.this_component_id}-{context.this_task_id}.log")
        self.fh = open(self.path, "a", buffering=1)

    def __call__(self, kind, payload=""):
        self.fh.write(f"{kind} {payload}\n")


def read_events(events_dir: str) -> dict[tuple[str, int], list[tuple[str, str]]]:
    """(component, task) -> [(kind, payload), ...] in the order the task wrote them."""
    out = {}
    for name in os.listdir(events_dir):
        if not name.endswith(".log"):
            continue
        comp, _, task = name[:-4].rpartition("-")
        with open(os.path.join(events_dir, name)) as fh:
            out[(comp, int(task))] = [tuple((line.rstrip("\n").split(" ", 1) + [""])[:2])
                                      for line in fh if line.strip()]
    return out


def events_of(events_dir: str, component: str, kind: str) -> list[str]:
    return [p for (c, _), evs in read_events(events_dir).items() if c == component
            for k, p in evs if k == kind]


class NumberSpout(Spout):
    """Emits ``[i]`` with msg_id ``i`` for i in its share of 0..count-1; replays failures.

    Conf: ``test.spout.count`` (how many), ``test.spout.replay`` (re-emit failed ids).
    """

    def open(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        tasks = context.component_tasks(context.this_component_id)
        self.next = context.this_task_index
        self.step = len(tasks)
        self.count = int(conf.get("test.spout.count", 100))
        self.replay_failed = bool(conf.get("test.spout.replay", True))
        self.replays = []

    def take(self):
        """This task's next fresh index, or None when its share is emitted."""
        if self.next >= self.count:
            return None
        i = self.next
        self.next += self.step
        return i

    def next_tuple(self):
        if self.replays:
            i = self.replays.pop(0)
            self.rec("replay", i)
        else:
            i = self.take()
            if i is None:
                return
        self.rec("emit", i)
        self.collector.emit([i], msg_id=i)

    def ack(self, msg_id):
        self.rec("ack", msg_id)

    def fail(self, msg_id):
        self.rec("fail", msg_id)
        if self.replay_failed:
            self.replays.append(msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class KeySpout(NumberSpout):
    """Emits ``[key, i]`` where key cycles over ``test.keys`` distinct keys."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.keys = int(conf.get("test.keys", 50))

    def next_tuple(self):
        i = self.take()
        if i is None:
            return
        self.rec("emit", i)
        self.collector.emit([f"k{i % self.keys}", i], msg_id=i)

    def declare_output_fields(self, declarer):
        declarer.declare(["key", "n"])


class DirectSpout(NumberSpout):
    """Emits ``[i, target]`` directly to task ``target`` of the subscriber."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.targets = context.component_tasks("sink")

    def next_tuple(self):
        i = self.take()
        if i is None:
            return
        target = self.targets[i % len(self.targets)]
        self.rec("emit", i)
        self.collector.emit_direct(target, [i, target], msg_id=i)

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "target"], direct=True)


class FastSpout(NumberSpout):
    """Like NumberSpout with a payload of ``test.payload.bytes`` to make queues heavy."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.payload = "x" * int(conf.get("test.payload.bytes", 1000))

    def next_tuple(self):
        i = self.take()
        if i is None:
            return
        self.rec("emit", i)
        self.collector.emit([i, self.payload], msg_id=i)

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "payload"])


class SleepySpout(Spout):
    """Storm's TestWordSpout's habit: sleeps ``test.sleep.secs`` in every next_tuple, then
    emits ``[i]`` with msg_id ``i`` (``test.spout.count`` of them); records each emit and
    ack with its CLOCK_MONOTONIC time (one clock for every process of the host)."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.sleep = float(conf.get("test.sleep.secs", 0.1))
        self.count = int(conf.get("test.spout.count", 10))
        self.i = 0

    def next_tuple(self):
        time.sleep(self.sleep)
        if self.i < self.count:
            self.rec("emit", f"{self.i} {time.monotonic()}")
            self.collector.emit([self.i], msg_id=self.i)
            self.i += 1

    def ack(self, msg_id):
        self.rec("ack", f"{msg_id} {time.monotonic()}")

    def declare_output_fields(self, declarer):
        declarer.declare(["i"])


class StuckSpout(SleepySpout):
    """A spout whose first next_tuple does not return for ``test.block.secs`` (a socket read
    without a timeout, say), then emits as SleepySpout does without sleeping."""

    def next_tuple(self):
        if self.i == 0 and not getattr(self, "unblocked", False):
            time.sleep(float(self.conf_block))
            self.unblocked = True
        super().next_tuple()

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.sleep = 0.0
        self.conf_block = float(conf.get("test.block.secs", 3600))


class RecordingBolt(Bolt):
    """Records every tuple's first value and acks it; ``test.sleep.secs`` slows it down."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.sleep = float(conf.get("test.sleep.secs", 0))

    def execute(self, tup):
        if self.sleep:
            time.sleep(self.sleep)
        self.rec("got", " ".join(str(v) for v in tup.values[:2]))
        self.collector.ack(tup)


class BatchRecordingBolt(Bolt):
    """execute_batch only: records each batch's size and every tuple, emits each value
    anchored, acks every tuple but fails the first attempt of multiples of
    ``test.fail.every`` (0: none)."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.every = int(conf.get("test.fail.every", 0))
        self.failed_once: set = set()

    def execute_batch(self, tuples):
        self.rec("batch", str(len(tuples)))
        for tup in tuples:
            n = tup.values[0]
            if self.every and n % self.every == 0 and n not in self.failed_once:
                self.failed_once.add(n)
                self.collector.fail(tup)
                continue
            self.rec("got", str(n))
            self.collector.emit([n], anchors=tup)
            self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class SlowFirstTask(Bolt):
    """Records and acks every tuple; its first task sleeps ``test.sleep.secs`` per tuple."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.sleep = float(conf.get("test.sleep.secs", 0.002)) \
            if context.this_task_index == 0 else 0.0

    def execute(self, tup):
        if self.sleep:
            time.sleep(self.sleep)
        self.rec("got", str(tup.values[0]))
        self.collector.ack(tup)


class FailEvery(BasicBolt):
    """Fails the first attempt of every tuple whose value is a multiple of ``test.fail.every``."""

    def prepare(self, conf, context):
        self.rec = Recorder(conf, context)
        self.every = int(conf.get("test.fail.every", 5))
        self.failed_once = set()

    def execute(self, tup, collector):
        n = tup.values[0]
        if n % self.every == 0 and n not in self.failed_once:
            self.failed_once.add(n)
            self.rec("failing", n)
            raise FailedException(f"failing {n} once")
        collector.emit([n])

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class FailAll(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.fail(tup)


class AckTwice(Bolt):
    """Acks every tuple twice (a user's mistake: the second ack used to leave every tree to
    time out, silently)."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.ack(tup)
        self.collector.ack(tup)


class TupleEmitter(BasicBolt):
    """Emits its input as a Python tuple ``(i, i * 2)``, as streamparse users write it."""

    def execute(self, tup, collector):
        collector.emit((tup.values[0], tup.values[0] * 2))

    def declare_output_fields(self, declarer):
        declarer.declare(["i", "double"])


class EmitsASet(Bolt):
    """Emits a set in its ``tags`` field: a value msgpack cannot carry."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.emit([tup.values[0], {"a", "b"}], anchors=tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "tags"])


class NeverAck(Bolt):
    """Holds every tuple without acking (so its tree times out)."""

    def prepare(self, conf, context, collector):
        self.rec = Recorder(conf, context)

    def execute(self, tup):
        self.rec("got", tup.values[0])


class SlowResetBolt(Bolt):
    """Acks each tuple after ``test.hold.secs``, calling reset_timeout while it waits."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.hold = float(conf.get("test.hold.secs", 3))
        self.held = []

    def execute(self, tup):
        if tup.is_tick:
            now = time.monotonic()
            keep = []
            for t0, t in self.held:
                if now - t0 >= self.hold:
                    self.collector.ack(t)
                else:
                    self.collector.reset_timeout(t)
                    keep.append((t0, t))
            self.held = keep
            return
        self.held.append((time.monotonic(), tup))


class SplitTwo(BasicBolt):
    """Emits each number twice, anchored (a tree with several children)."""

    def execute(self, tup, collector):
        n = tup.values[0]
        collector.emit([n * 10])
        collector.emit([n * 10 + 1])

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class FanOut(BasicBolt):
    """Emits ``[n, k]`` for k in 0..test.fanout-1 (default 10) per number: a split bolt."""

    def prepare(self, conf, context):
        self.fanout = int(conf.get("test.fanout", 10))

    def execute(self, tup, collector):
        n = tup.values[0]
        for k in range(self.fanout):
            collector.emit([n, k])

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "k"])


class Crasher(Bolt):
    """Raises on the value ``test.crash.on``."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.on = int(conf.get("test.crash.on", 3))

    def execute(self, tup):
        if tup.values[0] == self.on:
            raise RuntimeError(f"boom on tuple {self.on}")
        self.collector.ack(tup)


class TickCounter(Bolt):
    def prepare(self, conf, context, collector):
        self.rec = Recorder(conf, context)
        self.collector = collector

    def execute(self, tup):
        if tup.is_tick:
            self.rec("tick", tup.values[0])
        else:
            self.collector.ack(tup)


class PairUp(Bolt):
    """Emits ``[a, b]`` anchored to *both* inputs once two have arrived (multi-anchoring)."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.held = None

    def execute(self, tup):
        if self.held is None:
            self.held = tup
            return
        first, self.held = self.held, None
        self.collector.emit([first.values[0], tup.values[0]], anchors=[first, tup])
        self.collector.ack(first)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(["a", "b"])


class JudgePairs(Bolt):
    """Fails a pair the first time it holds a multiple of 5; acks the rest."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.failed_values = set()

    def execute(self, tup):
        a, b = tup.values
        bad = [v for v in (a, b) if v % 5 == 0 and v not in self.failed_values]
        if bad:
            self.failed_values.update(bad)
            self.rec("failpair", f"{a} {b}")
            self.collector.fail(tup)
        else:
            self.collector.ack(tup)


class TimedNumberSpout(NumberSpout):
    """NumberSpout whose emit and fail events carry the wall time: ``<i> <time>``."""

    def next_tuple(self):
        i = self.take()
        if i is None:
            return
        self.rec("emit", f"{i} {time.time()}")
        self.collector.emit([i], msg_id=i)

    def fail(self, msg_id):
        self.rec("fail", f"{msg_id} {time.time()}")


class LifecycleSpout(NumberSpout):
    """NumberSpout that records ``open``, ``activate`` and ``deactivate``."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.rec("open")

    def activate(self):
        self.rec("activate")

    def deactivate(self):
        self.rec("deactivate")


class HoldThenAck(Bolt):
    """Holds every tuple ``test.hold.secs`` (checked on ticks), then acks it; never resets
    its timeout. Records ``prepare`` and ``got <n>``."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.hold = float(conf.get("test.hold.secs", 3))
        self.held = []
        self.rec("prepare")

    def execute(self, tup):
        if tup.is_tick:
            now = time.monotonic()
            due = [t for t0, t in self.held if now - t0 >= self.hold]
            self.held = [(t0, t) for t0, t in self.held if now - t0 < self.hold]
            for t in due:
                self.collector.ack(t)
            return
        self.rec("got", tup.values[0])
        self.held.append((time.monotonic(), tup))

    def get_component_configuration(self):
        return {"topology.tick.tuple.freq.secs": 0.2}


class Point:
    """A tuple value msgpack cannot carry: it travels by its registered serializer."""

    def __init__(self, x, y):
        self.x, self.y = x, y

    def __str__(self):
        return f"P({self.x},{self.y})"


class PointSerializer:
    @staticmethod
    def pack(p):
        return [p.x, p.y]

    @staticmethod
    def unpack(v):
        return Point(*v)


#: The ``topology.serializers`` entry for :class:`Point`.
POINT_SERIALIZERS = {"topos.Point": "topos.PointSerializer"}


class PointSpout(NumberSpout):
    """Emits ``[Point(i, -i)]`` with msg_id ``i``."""

    def next_tuple(self):
        i = self.take()
        if i is None:
            return
        self.rec("emit", i)
        self.collector.emit([Point(i, -i)], msg_id=i)

    def declare_output_fields(self, declarer):
        declarer.declare(["point"])


class PacedSpout(NumberSpout):
    """NumberSpout emitting at most ``test.spout.rate`` tuples per second per task, so a
    topology keeps running while a test does something else."""

    def open(self, conf, context, collector):
        super().open(conf, context, collector)
        self.interval = 1.0 / float(conf.get("test.spout.rate", 200))
        self.due = time.monotonic()

    def next_tuple(self):
        if time.monotonic() < self.due:
            return
        self.due += self.interval
        super().next_tuple()


class MapBolt(BasicBolt):
    """Emits ``[fn(n)]`` for each ``[n]``: ``fn`` is whatever the topology's author passed,
    a lambda or a closure included (they travel with cloudpickle)."""

    def __init__(self, fn):
        self.fn = fn

    def execute(self, tup, collector):
        collector.emit([self.fn(tup.values[0])])

    def declare_output_fields(self, declarer):
        declarer.declare(["v"])


class ChattyBolt(Bolt):
    """Writes a 1 KB line to stderr (its worker's log) for every tuple, and acks it."""

    def prepare(self, conf, context, collector):
        import sys
        self.collector, self.err = collector, sys.stderr

    def execute(self, tup):
        self.err.write(f"chatty {tup.values[0]} " + "x" * 1000 + "\n")
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        pass
