"""Bench-only topologies reading Kafka (bench/kafka.py).

* ``spout_only(servers, topic, guarantee)``: a KafkaSpout task and a sink that acks each
  record: the spout's own cost per record.
* ``word_count(servers, src, dst, parallelism)``: the bench word count (bench/topologies.py)
  with its sentences read from ``src`` and its counts written to ``dst``: the count tasks
  emit each word's count once per tick, anchored to the words counted since the last tick
  (so a sentence's tree completes once its words' counts are in Kafka), and a KafkaBolt
  in the same worker writes them.
"""

from __future__ import annotations

from squall.client import Bolt, TopologyBuilder
from squall.connectors.kafka import (FieldNameBasedTupleToKafkaMapper, KafkaBolt, KafkaSpout,
                                     KafkaSpoutConfig, SimpleRecordTranslator)

try:
    from squall.bench.topologies import SplitSentence
except ImportError:
    from topologies import SplitSentence  # type: ignore[no-redef]

SPOUT, SINK, SPLIT, COUNT, OUT = "kafka", "sink", "split", "count", "to-kafka"


class AckSink(Bolt):
    def prepare(self, conf, context, collector):
        self.ack = collector.ack

    def execute(self, tup):
        self.ack(tup)


def spout_only(servers: str, topic: str, guarantee: str) -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout(SPOUT, KafkaSpout(KafkaSpoutConfig(
        servers, topics=[topic], group_id=f"bench-{topic}-{guarantee}",
        processing_guarantee=guarantee, first_poll_offset_strategy="EARLIEST")), 1)
    b.set_bolt(SINK, AckSink(), 1).shuffle_grouping(SPOUT)
    return b


def _sentence(record):
    return [record.value.decode()]


class TickCounts(Bolt):
    """Counts words; at each tick emits every word counted since the last one with its
    total, anchored to those words' tuples, then acks them."""

    def prepare(self, conf, context, collector):
        self.collector = collector
        self.counts: dict[str, int] = {}
        self.held: dict[str, list] = {}

    def execute(self, tup):
        if tup.is_tick:
            emit, ack = self.collector.emit, self.collector.ack
            counts = self.counts
            for word, tuples in self.held.items():
                emit([word, counts[word]], anchors=tuples)
                for t in tuples:
                    ack(t)
            self.held = {}
            return
        w = tup.values[0]
        self.counts[w] = self.counts.get(w, 0) + 1
        held = self.held.get(w)
        if held is None:
            self.held[w] = [tup]
        else:
            held.append(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])

    def get_component_configuration(self):
        return {"topology.tick.tuple.freq.secs": 0.1}


def word_count(servers: str, src: str, dst: str, parallelism: int = 2) -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout(SPOUT, KafkaSpout(KafkaSpoutConfig(
        servers, topics=[src], group_id=f"bench-wc-{src}", first_poll_offset_strategy="EARLIEST",
        record_translator=SimpleRecordTranslator(_sentence, ["sentence"]))), parallelism)
    b.set_bolt(SPLIT, SplitSentence(), parallelism).shuffle_grouping(SPOUT)
    b.set_bolt(COUNT, TickCounts(), parallelism).fields_grouping(SPLIT, ["word"])
    # The writer takes the counts of its own worker (local or shuffle, as a Storm user puts a
    # sink): a count tuple carries an edge id for every sentence it counted (a few dozen),
    # and shipping it to the other worker only to write it out costs its msgpack both ways.
    b.set_bolt(OUT, KafkaBolt(servers, topic=dst,
                              mapper=FieldNameBasedTupleToKafkaMapper("word", "count")),
               parallelism).local_or_shuffle_grouping(COUNT)
    return b
