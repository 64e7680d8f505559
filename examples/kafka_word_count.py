"""Word count from Kafka to Kafka: sentences in one topic, running counts out to another.

    KafkaSpout(sentences) --shuffle--> split --fields(word)--> count --shuffle--> KafkaBolt(word-counts)

The spout reads the ``sentences`` topic with storm-kafka-client's at-least-once guarantee
(offsets committed once their tuple trees are acked); ``count`` emits each word's new
count anchored to the word, and the KafkaBolt acks a count only once the broker has it,
so every sentence's tree completes only when its ten counts are in Kafka.

``squall local`` starts a Kafka broker for it (the file's KAFKA_TOPICS), ``setup`` fills
``sentences`` when it is empty, and ``report`` reads ``word-counts`` back with a
``read_committed`` consumer: the last count of every word must be its exact total.

Run it:  squall local examples/kafka_word_count.py --duration 20
On a cluster:  squall jar examples kafka_word_count -c kafka.bootstrap.servers=HOST:9092
Settings: -c wordcount.sentences=N (sentences setup writes; default 20000).
"""

from __future__ import annotations

from squall.client import TopologyBuilder
from squall.connectors.kafka import (FieldNameBasedTupleToKafkaMapper, FirstPollOffsetStrategy,
                                     KafkaBolt, KafkaSpout, KafkaSpoutConfig,
                                     SimpleRecordTranslator)
from word_count import (SENTENCES_KEY, RunningCount, SplitSentence, expected_counts,
                        make_pool)

NAME = "kafka-word-count"
SENTENCES, COUNTS = "sentences", "word-counts"
KAFKA_TOPICS = {SENTENCES: 4, COUNTS: 4}
CONF = {"topology.workers": 2, "topology.max.spout.pending": 2000}


def sentence(record):
    return [record.value.decode()]


def topology() -> TopologyBuilder:
    spout = KafkaSpout(KafkaSpoutConfig(  # brokers: kafka.bootstrap.servers
        topics=[SENTENCES], group_id=NAME,
        first_poll_offset_strategy=FirstPollOffsetStrategy.EARLIEST,
        offset_commit_period_ms=2_000,
        record_translator=SimpleRecordTranslator(sentence, ["sentence"])))
    b = TopologyBuilder()
    b.set_spout("sentences", spout, 2)
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", RunningCount(), 2).fields_grouping("split", ["word"])
    b.set_bolt("to-kafka", KafkaBolt(topic=COUNTS,
                                     mapper=FieldNameBasedTupleToKafkaMapper("word", "count")),
               2).shuffle_grouping("count")
    return b


def _sentences(conf) -> int:
    return int(conf.get(SENTENCES_KEY, 20_000))


def setup(conf) -> None:
    """Fill the sentences topic when it is empty (a second run reads what the first wrote)."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    servers = conf["kafka.bootstrap.servers"]
    c = Consumer({"bootstrap.servers": servers, "group.id": f"{NAME}-setup"})
    try:
        written = sum(c.get_watermark_offsets(TopicPartition(SENTENCES, p), timeout=10)[1]
                      for p in range(KAFKA_TOPICS[SENTENCES]))
    finally:
        c.close()
    if written:
        print(f"[kafka_word_count] {SENTENCES} holds {written} records already", flush=True)
        return
    n = _sentences(conf)
    pool = make_pool()
    p = Producer({"bootstrap.servers": servers, "enable.idempotence": True, "linger.ms": 20})
    for i in range(n):
        while True:
            try:
                p.produce(SENTENCES, pool[i % len(pool)].encode(), str(i).encode())
                break
            except BufferError:
                p.poll(0.1)
    left = p.flush(60)
    if left:
        raise RuntimeError(f"{left} sentences were not written to {SENTENCES}")
    print(f"[kafka_word_count] wrote {n} sentences to {SENTENCES}", flush=True)


def report(conf) -> None:
    """Read word-counts (read_committed) and check every word's last count."""
    import time
    import uuid

    from confluent_kafka import Consumer, TopicPartition
    servers = conf["kafka.bootstrap.servers"]
    c = Consumer({"bootstrap.servers": servers, "group.id": f"{NAME}-report-{uuid.uuid4().hex}",
                  "isolation.level": "read_committed", "enable.auto.commit": False})
    last: dict[str, int] = {}
    records = 0
    try:
        parts = range(KAFKA_TOPICS[COUNTS])
        ends = {p: c.get_watermark_offsets(TopicPartition(COUNTS, p), timeout=10)[1]
                for p in parts}
        c.assign([TopicPartition(COUNTS, p, 0) for p in parts])
        position = {p: 0 for p in parts}
        deadline = time.monotonic() + 60
        while any(position[p] < ends[p] for p in parts) and time.monotonic() < deadline:
            for m in c.consume(5000, 0.5):
                if m.error() is None:
                    records += 1
                    position[m.partition()] = m.offset() + 1
                    word, count = m.key().decode(), int(m.value())
                    last[word] = max(last.get(word, 0), count)  # one key, one partition: in order
    finally:
        c.close()
    expected = expected_counts(make_pool(), _sentences(conf))
    print(f"[kafka_word_count] {records} count records in {COUNTS}: {sum(last.values())} "
          f"words, {len(last)} distinct", flush=True)
    print(f"[kafka_word_count] last counts match the expected totals: "
          f"{'yes' if last == dict(expected) else 'NO'}", flush=True)
