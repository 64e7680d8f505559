"""Two independent pipelines for the backpressure tests (workers import this by name):
``steady`` (a paced spout into a cheap bolt) and ``flood`` (a spout as fast as it can go
into a slow bolt, which is congested all the time)."""

from __future__ import annotations

import time

from squall.client import BasicBolt, Spout


class PacedSpout(Spout):
    """Emits ``test.rate`` numbers a second per task (a token bucket), unanchored."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.rate = float(conf.get("test.rate", 1000))
        self.t0 = time.monotonic()
        self.sent = 0

    def next_tuple(self):
        if self.sent < (time.monotonic() - self.t0) * self.rate:
            self.collector.emit([self.sent])
            self.sent += 1

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class FloodSpout(Spout):
    def open(self, conf, context, collector):
        self.collector = collector
        self.n = 0

    def next_tuple(self):
        self.collector.emit([self.n])
        self.n += 1

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class Cheap(BasicBolt):
    def execute(self, tup, collector):
        pass


class Slow(BasicBolt):
    """Sleeps ``test.slow.secs`` per tuple (run it on a thread of its own)."""

    def prepare(self, conf, context):
        self.secs = float(conf.get("test.slow.secs", 0.002))

    def execute(self, tup, collector):
        time.sleep(self.secs)
