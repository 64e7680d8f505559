"""Components for the Kafka tests (workers import this module by name, ``kafka_topos``)."""

from __future__ import annotations

import time

from squall.client import BasicBolt, Bolt
from topos import Recorder


class OffsetRecorder(Bolt):
    """Records ``got <topic>/<partition>@<offset> <monotonic time>`` and acks.

    Conf: ``test.kafka.fail.first`` fails the first attempt of offsets divisible by it;
    ``test.kafka.fail.always`` fails that offset every time; ``test.kafka.hold`` never
    acks that offset (it stays in flight)."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.rec = Recorder(conf, context)
        self.fail_first = int(conf.get("test.kafka.fail.first", 0))
        self.fail_always = conf.get("test.kafka.fail.always")
        self.hold = conf.get("test.kafka.hold")
        self.failed = set()

    def execute(self, tup):
        topic, partition, offset = tup.values[:3]
        key = (topic, partition, offset)
        self.rec("got", f"{topic}/{partition}@{offset} {time.monotonic():.4f}")
        if offset == self.hold:
            return
        if offset == self.fail_always or (self.fail_first and offset % self.fail_first == 0
                                          and key not in self.failed):
            self.failed.add(key)
            self.collector.fail(tup)
            return
        self.collector.ack(tup)


class ToRecord(BasicBolt):
    """``(topic, partition, offset, key, value)`` -> ``(key, message)``: the value upper-cased."""

    def execute(self, tup, collector):
        collector.emit([tup.values[3], tup.values[4].upper()])

    def declare_output_fields(self, declarer):
        declarer.declare(["key", "message"])


class SplitValue(BasicBolt):
    """The record's value (field 4 of the default translator), split into words."""

    def execute(self, tup, collector):
        for word in tup.values[4].decode().split():
            collector.emit([word])

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])



class ValueToRecord(BasicBolt):
    """``(topic, partition, offset, key, value)`` -> ``(key, message)``: the value as it is."""

    def execute(self, tup, collector):
        collector.emit([tup.values[3], tup.values[4]])

    def declare_output_fields(self, declarer):
        declarer.declare(["key", "message"])


class HoldAll(Bolt):
    """Records each tuple and never acks it: every tree stays pending."""

    def prepare(self, conf, context, collector):
        self.rec = Recorder(conf, context)

    def execute(self, tup):
        self.rec("held", tup.values[2])
