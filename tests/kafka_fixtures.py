"""Kafka fixtures: a real Kafka-protocol broker for the session, and topics of its own per test.

``kafka_broker``  session-scoped :class:`~squall.deploy.kafka.LocalKafka` (noida-db, or Tansu
                  with ``SQUALL_KAFKA_BROKER=tansu``), started once on a free loopback port and
                  stopped by pid at the end.
``kafka_topic``   ``kafka_topic(partitions=1, fill=[...])`` creates a topic with a unique name
                  (``t-<test>-<hex>``), optionally filled with records, and returns its name;
                  on failure the broker's log tail is printed.

Helpers to import (``from kafka_fixtures import produce, read_all, committed``), and for the
tests on a real local cluster: :func:`local_cluster` (ZooKeeper, Nimbus, a supervisor that
restarts killed workers, pointed at the session's broker); cluster_helpers.py has what to
do with one.
"""

from __future__ import annotations

import contextlib
import re
import time
import uuid

import pytest

from squall.deploy.kafka import KafkaUnavailable, LocalKafka, broker_kind, installation


#: What each broker gets wrong (deploy/kafka.py; the README's "Kafka" section): a test of
#: Squall's own behaviour that reads one of these back from the broker checks it only where
#: the broker gets it right.
BROKER_GAPS = {"noida": frozenset(),
               "tansu": frozenset({"watermarks", "commit-metadata", "offsets-by-time",
                                   "restart"})}


def broker_gets_right(feature: str) -> bool:
    return feature not in BROKER_GAPS[broker_kind()]


def produce(bootstrap: str, topic: str, records, partitions: int | None = None,
            timeout: float = 30.0) -> dict[int, int]:
    """Write ``records`` (values, or (key, value) pairs), the i-th to partition i mod
    ``partitions`` when given (else as the producer's partitioner puts them); wait until
    every one is acked. Returns partition -> the offset after its last record written, from
    the delivery reports (not the broker's watermarks, which Tansu gets wrong)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "enable.idempotence": True})
    errors: list = []
    ends: dict[int, int] = {}

    def delivered(err, msg):
        if err is not None:
            errors.append(err)
        else:
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)
    for i, r in enumerate(records):
        key, value = r if isinstance(r, tuple) else (None, r)
        kwargs = {} if partitions is None else {"partition": i % partitions}
        while True:
            try:
                p.produce(topic, value, key, on_delivery=delivered, **kwargs)
                break
            except BufferError:
                p.poll(0.1)
    left = p.flush(timeout)
    assert left == 0 and not errors, f"{left} records not delivered; errors {errors[:3]}"
    return ends


def read_all(bootstrap: str, topic: str, expect: int, timeout: float,
             isolation: str = "read_committed") -> list:
    """Every record of ``topic`` as (partition, offset, key, value), read until ``expect`` came
    or ``timeout`` passed (then what came)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{uuid.uuid4().hex}",
                  "enable.auto.commit": False, "isolation.level": isolation})
    try:
        md = c.list_topics(topic, timeout=10)
        c.assign([TopicPartition(topic, p, 0) for p in md.topics[topic].partitions])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < expect and time.monotonic() < deadline:
            for m in c.consume(1000, 0.2):
                if m.error() is None:
                    out.append((m.partition(), m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, tuple]:
    """partition -> (committed offset, metadata) of ``group`` on ``topic``."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: (tp.offset, tp.metadata) for tp in got}
    finally:
        c.close()


def log_end(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """partition -> the offset after its last record (the high watermark)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)}
    finally:
        c.close()


@contextlib.contextmanager
def local_cluster(base_dir: str, kafka: LocalKafka, web: bool = False):
    """A LocalCluster whose topologies get the broker as ``kafka.bootstrap.servers``; closed
    (every process it started stopped) at the end."""
    from squall.deploy.local import LocalCluster
    lc = LocalCluster({"topology.stats.freq.secs": 0.2,
                       "kafka.bootstrap.servers": kafka.bootstrap_servers},
                      slots=4, base_dir=base_dir, web=web)
    try:
        lc.start()
        yield lc
    finally:
        lc.close("test done")


@pytest.fixture(scope="session")
def kafka_broker():
    """One LocalKafka for the whole test session."""
    try:
        installation(broker_kind())
    except KafkaUnavailable as e:
        pytest.skip(str(e))
    server = LocalKafka()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def kafka_topic(request, kafka_broker):
    """``kafka_topic(partitions=1, fill=None)`` -> a new topic's name."""
    failed_before = request.session.testsfailed
    base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:40].strip("-")

    def make(partitions: int = 1, fill=None) -> str:
        name = f"t-{base}-{uuid.uuid4().hex[:8]}"
        kafka_broker.create_topic(name, partitions)
        if fill:
            produce(kafka_broker.bootstrap_servers, name, fill)
        return name

    yield make
    if request.session.testsfailed > failed_before:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"\n--- Kafka ({kafka_broker.kind}) {kafka_broker.address} log "
                                f"tail ({request.node.nodeid}) ---\n{kafka_broker.log_tail(30)}")
