"""Exactly-once output to Kafka from checkpointed topologies: :class:`TransactionalKafkaBolt`.

A :class:`~squall.client.StatefulBolt` that makes each checkpoint's output one Kafka
transaction, committed as part of the checkpoint's commit (a write-ahead sink):

- ``execute`` keeps the tuple's record in memory;
- ``pre_prepare(N)`` (the checkpoint's barrier reached the task) puts the records since the
  last checkpoint into the task's state, which checkpoint N then saves;
- ``pre_commit(N)`` (checkpoint N completed everywhere) writes them as one Kafka
  transaction that also records N (connectors/kafka/txn.py);
- after a crash, the restored state holds the last completed checkpoint's records, and
  ``init_state`` writes them unless Kafka already has that txid.

So a ``read_committed`` consumer sees each record once across a worker's kill -9: a record
of a checkpoint that never completed is never committed (its input is replayed into a later
one), and a completed checkpoint's records are committed exactly once. The price is latency
(records appear when their checkpoint completes, every
``topology.state.checkpoint.interval.ms``) and the state holding one checkpoint's records.
Meant for barrier checkpointing; Storm's checkpointing over the acker calls the same hooks.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping

from ...client import extras

extras.require("kafka", "squall.connectors.kafka")

from ...client.stateful import StatefulBolt  # noqa: E402
from ...client.tuple import Tuple  # noqa: E402
from .bolt import DefaultTopicSelector, FieldNameBasedTupleToKafkaMapper, to_bytes  # noqa: E402
from .config import brokers  # noqa: E402
from .translator import KafkaConfigError  # noqa: E402
from .txn import TxnWriter  # noqa: E402

log = logging.getLogger("squall.connectors.kafka")

#: The task's state key of the last prepared checkpoint's records: [txid, [[topic, key, value]]].
OUT_KEY = "__kafka_out"


class TransactionalKafkaBolt(StatefulBolt):
    """Writes each tuple to Kafka exactly once, a checkpoint at a time.

    Example (barrier checkpointing, counts written once each)::

        conf = {"topology.state.checkpoint.mode": "barrier", "topology.state.provider": "redis"}
        builder.set_bolt("out", TransactionalKafkaBolt(topic="counts"), 2) \\
            .shuffle_grouping("count")

    Takes what :class:`~squall.connectors.kafka.KafkaBolt` takes (a topic or a topic selector,
    a mapper, serializers, producer properties). ``writer_id`` names the producer's
    ``transactional.id`` prefix (default ``squall-<topology name>-<component>``; the task
    index follows): keep it stable across resubmissions. With a topic selector give
    ``marker_topic``, any topic with a partition 0, where the writer records its txids.
    """

    requires_extras = ("kafka",)

    def __init__(self, bootstrap_servers: str | None = None, topic: str | None = None, *,
                 topic_selector: Callable[[Tuple], str | None] | None = None,
                 mapper: Any = None, props: Mapping[str, Any] | None = None,
                 key_serializer: Callable[[Any], Any] = to_bytes,
                 value_serializer: Callable[[Any], Any] = to_bytes,
                 writer_id: str | None = None, marker_topic: str | None = None,
                 timeout_secs: float = 30.0):
        if (topic is None) == (topic_selector is None):
            raise KafkaConfigError("TransactionalKafkaBolt takes exactly one of topic='name' and "
                                   "topic_selector=...")
        if topic is None and marker_topic is None:
            raise KafkaConfigError("TransactionalKafkaBolt with a topic_selector needs "
                                   "marker_topic=..., a topic where it records its txids")
        self.bootstrap_servers = bootstrap_servers
        self.topic_selector = topic_selector or DefaultTopicSelector(topic)
        self.marker_topic = marker_topic or topic
        self.mapper = mapper or FieldNameBasedTupleToKafkaMapper()
        self.props = dict(props or {})
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer
        self.writer_id = writer_id
        self.timeout_secs = timeout_secs

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        name = self.writer_id or f"squall-{conf.get('topology.name') or 'topology'}-" \
                                 f"{context.this_component_id}"
        self.where = f"{context.this_component_id}:{context.this_task_id}"
        self.writer = TxnWriter(brokers(self.bootstrap_servers, conf, "TransactionalKafkaBolt"),
                                f"{name}-{context.this_task_index}", self.marker_topic,
                                self.props, self.timeout_secs)
        #: Records since the last checkpoint: [topic, key, value].
        self.buffer: list[list] = []
        #: Prepared checkpoints' records, by txid, until their commit.
        self.prepared: dict[int, list[list]] = {}
        self.state: Any = None

    def init_state(self, state: Any) -> None:
        self.state = state
        out = state.get(OUT_KEY)
        if out:
            txid, records = int(out[0]), out[1]
            if self.writer.write(txid, records):
                log.info("%s: checkpoint %d's %d records written after the restart",
                         self.where, txid, len(records))

    def execute(self, tup: Tuple) -> None:
        topic = self.topic_selector(tup)
        if topic is not None:
            self.buffer.append([topic, self.key_serializer(self.mapper.key(tup)),
                                self.value_serializer(self.mapper.message(tup))])
        self.collector.ack(tup)

    def pre_prepare(self, txid: int) -> None:
        records, self.buffer = self.buffer, []
        self.prepared[txid] = records
        self.state.put(OUT_KEY, [txid, records])

    def pre_commit(self, txid: int) -> None:
        for t in sorted(t for t in self.prepared if t <= txid):
            self.writer.write(t, self.prepared.pop(t))

    def pre_rollback(self) -> None:
        # Records since the last checkpoint belong to a run that is abandoned; a prepared
        # checkpoint may still commit (the restore commits it if it completed).
        self.buffer = []

    def cleanup(self) -> None:
        self.writer.close()
