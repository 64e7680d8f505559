"""Topologies of the Redis bolts' tests (tests/integration/test_redis_bolts.py)."""

from __future__ import annotations

from squall.client import BasicBolt, TopologyBuilder
from squall.connectors.redis import (FieldFilterMapper, FieldLookupMapper, FieldStoreMapper,
                                     RedisConfig, RedisFilterBolt, RedisLookupBolt,
                                     RedisStoreBolt)
from topos import NumberSpout, RecordingBolt

#: Conf key: the prefix of every Redis key a topology of these tests writes or reads.
PREFIX = "trident.redis.key.prefix"


class KeyValue(BasicBolt):
    """``[i]`` -> ``[<prefix>n<i>, i]``: a Redis key of the test's own and a value."""

    def prepare(self, conf, context):
        self.prefix = conf[PREFIX]

    def execute(self, tup, collector):
        i = tup.values[0]
        collector.emit([f"{self.prefix}n{i}", i])

    def declare_output_fields(self, declarer):
        declarer.declare(["key", "value"])


def store(config: RedisConfig | None = None, parallelism: int = 2) -> TopologyBuilder:
    """numbers -> (key, value) -> RedisStoreBolt(STRING): SET <prefix>n<i> i."""
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("kv", KeyValue(), 2).shuffle_grouping("numbers")
    b.set_bolt("store", RedisStoreBolt(config, FieldStoreMapper("string", "key", "value")),
               parallelism).shuffle_grouping("kv")
    return b


def filter_then_lookup(allowed: str, values: str) -> TopologyBuilder:
    """numbers -> (key, value) -> only keys in the set ``allowed`` -> each one's field in the
    hash ``values`` -> recorded as ``got <key> <value>``."""
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("kv", KeyValue(), 2).shuffle_grouping("numbers")
    b.set_bolt("allowed", RedisFilterBolt(None, FieldFilterMapper(
        "set", "key", ["key", "value"], additional_key=allowed)), 2).shuffle_grouping("kv")
    b.set_bolt("lookup", RedisLookupBolt(None, FieldLookupMapper(
        "hash", "key", ("key", "looked_up"), additional_key=values)), 2
    ).shuffle_grouping("allowed")
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("lookup")
    return b


class EntryRecorder(BasicBolt):
    """Records each entry's id (``got <id>``); fails the first attempt of the entries whose
    ``n`` field is a multiple of ``test.fail.every`` (0: none)."""

    def prepare(self, conf, context):
        from topos import Recorder
        self.rec = Recorder(conf, context)
        self.every = int(conf.get("test.fail.every", 0))
        self.failed_once = set()

    def execute(self, tup, collector):
        from squall.client import FailedException
        entry_id, fields = tup.values
        n = int(fields["n"])
        if self.every and n % self.every == 0 and n not in self.failed_once:
            self.failed_once.add(n)
            self.rec("failing", entry_id)
            raise FailedException(f"failing entry {entry_id} once")
        self.rec("got", entry_id)

    def declare_output_fields(self, declarer):
        pass


def stream_reader(stream: str, tasks: int = 2) -> TopologyBuilder:
    """RedisStreamSpout(stream) -> EntryRecorder."""
    from squall.connectors.redis import RedisStreamSpout
    b = TopologyBuilder()
    b.set_spout("entries", RedisStreamSpout(stream, batch=50), tasks)
    b.set_bolt("sink", EntryRecorder(), 2).shuffle_grouping("entries")
    return b


def stream_to_hash(stream: str, out_hash: str) -> TopologyBuilder:
    """RedisStreamSpout(stream) -> RedisStoreBolt: HSET <out_hash> <n> <text> per entry (a
    replayed entry writes the same field again)."""
    from squall.connectors.redis import EntryTranslator, RedisStreamSpout
    b = TopologyBuilder()
    b.set_spout("entries", RedisStreamSpout(stream, batch=100,
                                            translator=EntryTranslator(["n", "text"])), 2)
    b.set_bolt("store", RedisStoreBolt(None, FieldStoreMapper("hash", "n", "text",
                                                             additional_key=out_hash)), 2
               ).shuffle_grouping("entries")
    return b
