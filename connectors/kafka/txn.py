"""A Kafka transactional producer that remembers, in Kafka, the last txid it committed.

What exactly-once output needs from Kafka, shared by the Trident state (trident.py) and the
checkpointed bolt (exactly_once.py): each txid's records are one Kafka transaction, and the
same transaction records the txid as the committed offset (txid + 1) of a consumer group of
the writer's own, on partition 0 of its topic (``send_offsets_to_transaction``). The write
and the record of it commit together, so after any crash :attr:`TxnWriter.done` says whether
a txid's records are in Kafka: a replay of it writes nothing. The ``transactional.id`` stays
the same across restarts, so a restarted writer fences the one that died and Kafka aborts
what that one left open; ``read_committed`` consumers never see it.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Iterable, Mapping

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from ...client.errors import SquallError

log = logging.getLogger("squall.connectors.kafka")


class TxnError(SquallError):
    """A transactional write to Kafka failed (and was aborted)."""


class TxnWriter:
    """Transactions of one writer (``transactional_id``), each recording its txid
    (``transactional=False``: the same calls over plain idempotent writes).

    Example::

        w = TxnWriter("127.0.0.1:9092", "squall-wc-out-0", "counts")
        if not w.has(txid):
            w.write(txid, [("counts", b"word", b"3")])
    """

    def __init__(self, servers: str, transactional_id: str, marker_topic: str,
                 props: Mapping[str, Any] | None = None, timeout: float = 30.0,
                 transactional: bool = True):
        self.servers = servers
        self.id = transactional_id
        self.marker_topic = marker_topic
        self.timeout = timeout
        #: False: plain idempotent writes, flushed at each commit (at least once).
        self.transactional = transactional
        extra = {"transactional.id": transactional_id} if transactional else {}
        self.producer = Producer({"bootstrap.servers": servers, "enable.idempotence": True,
                                  "partitioner": "murmur2_random", "linger.ms": 5,
                                  **(props or {}), **extra})
        self.errors: list = []
        #: The last txid whose records are in Kafka; -1: none (never known untransacted).
        self.done = -1
        if transactional:
            self.marker = Consumer({"bootstrap.servers": servers, "group.id": transactional_id,
                                    "enable.auto.commit": False})
            self._call("init_transactions", timeout)
            self.done = self._read_done()

    def _call(self, method: str, *args: Any) -> Any:
        try:
            return getattr(self.producer, method)(*args)
        except KafkaException as e:
            raise TxnError(f"Kafka writer {self.id} on {self.servers}: {method} failed: "
                           f"{e.args[0]}") from None

    def _read_done(self) -> int:
        try:
            got = self.marker.committed([TopicPartition(self.marker_topic, 0)],
                                        timeout=self.timeout)
        except KafkaException as e:
            raise TxnError(f"Kafka writer {self.id}: reading its last txid from "
                           f"{self.servers} failed: {e.args[0]}") from None
        return got[0].offset - 1 if got[0].offset >= 0 else -1

    def has(self, txid: int) -> bool:
        """Whether ``txid``'s records are in Kafka already."""
        return txid <= self.done

    def begin(self) -> None:
        self.errors = []
        if self.transactional:
            self._call("begin_transaction")

    def produce(self, topic: str, key: Any, value: Any) -> None:
        while True:
            try:
                self.producer.produce(topic, to_wire(value), to_wire(key),
                                      on_delivery=self._delivered)
                return
            except BufferError:
                self.producer.poll(0.05)

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.errors.append(err)

    def commit(self, txid: int) -> None:
        """Commit the open transaction with ``txid`` recorded in it; abort it on failure.
        Untransacted: wait until every record is confirmed."""
        if not self.transactional:
            left = self.producer.flush(self.timeout)
            if left or self.errors:
                raise TxnError(f"Kafka writer {self.id}: {left} records unconfirmed, errors "
                               f"{self.errors[:3]}")
            return
        try:
            self.producer.flush(self.timeout)
            if self.errors:
                raise KafkaException(self.errors[0])
            self.producer.send_offsets_to_transaction(
                [TopicPartition(self.marker_topic, 0, int(txid) + 1)],
                self.marker.consumer_group_metadata(), self.timeout)
            self.producer.commit_transaction(self.timeout)
        except KafkaException as e:
            self.abort()
            raise TxnError(f"Kafka writer {self.id}: the transaction of txid {txid} failed "
                           f"and was aborted: {e.args[0]}") from None
        self.done = int(txid)

    def abort(self) -> None:
        try:
            self.producer.abort_transaction(self.timeout)
        except KafkaException:
            pass  # the transaction is gone either way (fenced, timed out)

    def write(self, txid: int, records: Iterable[tuple[str, Any, Any]]) -> bool:
        """``records`` (topic, key, value) as txid's transaction, unless it is in Kafka
        already; True if it wrote them."""
        if self.has(txid):
            return False
        self.begin()
        for topic, key, value in records:
            self.produce(topic, key, value)
        self.commit(txid)
        return True

    def close(self) -> None:
        self.producer.flush(5)
        if self.transactional:
            self.marker.close()


def to_wire(v: Any) -> Any:
    """A key or value as Kafka takes it: bytes and text as they are, numbers as text, other
    JSON-able values as JSON."""
    if v is None or isinstance(v, (bytes, str)):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return json.dumps(v)
