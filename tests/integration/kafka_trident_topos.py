"""Trident topologies reading Kafka, for tests/integration/test_kafka_trident.py (workers
import this module by name)."""

from __future__ import annotations

from squall.client.trident.stream import TridentTopology
from squall.connectors.kafka import (KafkaSpoutConfig, KafkaStateFactory, KafkaStateUpdater,
                                     KafkaTridentSpoutOpaque, KafkaTridentSpoutTransactional,
                                     SimpleRecordTranslator)
from trident_topos import FlakySplit, RecordingStateFactory


def line(record):
    return [record.value.decode()]


def kafka_lines(kind: str, servers: str | None, topic: str, batch: int = 10):
    cls = KafkaTridentSpoutTransactional if kind == "transactional" else KafkaTridentSpoutOpaque
    return cls(KafkaSpoutConfig(servers, topics=[topic], first_poll_offset_strategy="EARLIEST",
                                record_translator=SimpleRecordTranslator(line, ["line"])),
               max_batch_records=batch)


def words_to_kafka(servers: str | None, src: str, dst: str, fail_split=(), fail_commits=(),
                   batch: int = 10, parallelism: int = 2):
    """Kafka lines -> split -> every word a record of ``dst``, each batch one Kafka
    transaction (KafkaStateFactory), recorded and failed as trident_topos's word count."""
    t = TridentTopology()
    words = (t.new_stream("lines", kafka_lines("transactional", servers, src, batch))
              .each(["line"], FlakySplit(fail_split), ["word"]))
    state = RecordingStateFactory(KafkaStateFactory(topic=dst, bootstrap_servers=servers,
                                                    mapper=lambda v: (v[0], v[0])),
                                  fail_commits=fail_commits)
    # partition_by: a replayed batch's tuples reach the same state partitions as its first
    # attempt did (a shuffle would deal them anew, and a partition that wrote the first
    # attempt's share would skip a different share).
    (words.partition_by(["word"])
          .partition_persist(state, KafkaStateUpdater(), ["word"])
          .parallelism_hint(parallelism))
    return t.build()


def word_count(kind, servers, topic, state_factory, fail_split=(), fail_commits=()):
    from trident_topos import word_count_recorded
    return word_count_recorded(kafka_lines(kind, servers, topic), state_factory,
                               fail_split=fail_split, fail_commits=fail_commits)
