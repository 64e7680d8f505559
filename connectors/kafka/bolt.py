"""The Kafka sink bolt: Storm's ``KafkaBolt`` on confluent-kafka's producer.

Each input tuple becomes one record: a topic selector picks the topic (None: the tuple
is acked and skipped, as Storm does), a mapper picks the key and the value. The input is
acked only once the broker confirmed the write (the delivery report) and failed when the
write failed, so the spout replays it; ``fire_and_forget`` acks at once instead. The
producer is idempotent by default (a retried send is not written twice) and partitions
keys as Java's producer does (murmur2), so records with one key land where a Java
producer would put them.

Delivery reports come from librdkafka's poll. The bolt polls (without waiting) after each
write and settles the reports there, on its executor thread; a helper thread polls only
when the bolt has been idle for :data:`IDLE_POLL_SECS` and hands what it got back to the
executor thread. (A helper woken by every report would take the GIL from the worker's loop
hundreds of times a second.)
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Mapping

from ...client import extras

extras.require("kafka", "squall.connectors.kafka")

from confluent_kafka import KafkaException, Producer  # noqa: E402

from ...client.components import Bolt  # noqa: E402
from ...client.tuple import Tuple  # noqa: E402
from .config import brokers  # noqa: E402
from .translator import KafkaConfigError  # noqa: E402

log = logging.getLogger("squall.connectors.kafka")

#: Seconds without a write after which the helper thread polls for delivery reports.
IDLE_POLL_SECS = 0.01


class FieldNameBasedTupleToKafkaMapper:
    """Key and value from two fields (Storm's default: ``key`` and ``message``); a tuple
    without the key field gives a record without a key."""

    def __init__(self, key_field: str = "key", message_field: str = "message"):
        self.key_field = key_field
        self.message_field = message_field

    def key(self, tup: Tuple) -> Any:
        return tup.get(self.key_field) if tup.contains(self.key_field) else None

    def message(self, tup: Tuple) -> Any:
        return tup[self.message_field]


class DefaultTopicSelector:
    """Every record to one topic."""

    def __init__(self, topic: str):
        self.topic = topic

    def __call__(self, tup: Tuple) -> str | None:
        return self.topic


class FieldNameTopicSelector:
    """The topic named by a field of the tuple, or ``default_topic`` when it is empty."""

    def __init__(self, field: str, default_topic: str | None = None):
        self.field = field
        self.default_topic = default_topic

    def __call__(self, tup: Tuple) -> str | None:
        return tup.get(self.field) or self.default_topic


def to_bytes(value: Any) -> bytes | str | None:
    """The default serializer: bytes and text as they are, numbers as text."""
    if value is None or isinstance(value, (bytes, str)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise TypeError(f"cannot write a {type(value).__name__} to Kafka: give the bolt a "
                    "value_serializer (json.dumps, say)")


class KafkaBolt(Bolt):
    """Writes each tuple to Kafka and acks it once the broker has it.

    Example::

        from squall.connectors.kafka import KafkaBolt
        builder.set_bolt("to-kafka", KafkaBolt("127.0.0.1:9092", topic="counts"), 1) \\
            .shuffle_grouping("count")

    The default mapper reads the fields ``key`` and ``message``. ``bootstrap_servers=None``
    reads the topology conf's ``kafka.bootstrap.servers``.
    """

    requires_extras = ("kafka",)

    def __init__(self, bootstrap_servers: str | None = None, topic: str | None = None, *,
                 topic_selector: Callable[[Tuple], str | None] | None = None,
                 mapper: Any = None, fire_and_forget: bool = False,
                 props: Mapping[str, Any] | None = None,
                 key_serializer: Callable[[Any], Any] = to_bytes,
                 value_serializer: Callable[[Any], Any] = to_bytes):
        if bootstrap_servers is not None and (not bootstrap_servers
                                              or not isinstance(bootstrap_servers, str)):
            raise KafkaConfigError("KafkaBolt's bootstrap_servers must be 'host:port[,...]' or "
                                   f"None (kafka.bootstrap.servers), got {bootstrap_servers!r}")
        if (topic is None) == (topic_selector is None):
            raise KafkaConfigError("KafkaBolt takes exactly one of topic='name' and "
                              "topic_selector=...")
        self.bootstrap_servers = bootstrap_servers
        self.topic_selector = topic_selector or DefaultTopicSelector(topic)
        self.mapper = mapper or FieldNameBasedTupleToKafkaMapper()
        self.fire_and_forget = fire_and_forget
        self.props = dict(props or {})
        if "bootstrap.servers" in self.props:
            raise KafkaConfigError("KafkaBolt props set 'bootstrap.servers': give it as the first "
                              "argument")
        self.key_serializer = key_serializer
        self.value_serializer = value_serializer

    def producer_props(self, conf: Mapping[str, Any]) -> dict[str, Any]:
        props = {"bootstrap.servers": brokers(self.bootstrap_servers, conf, "KafkaBolt"),
                 "enable.idempotence": True,
                 # Java's producer's partitioner, so a key lands where Java would put it.
                 "partitioner": "murmur2_random",
                 # A write that cannot be delivered fails well within the message timeout,
                 # so the spout replays it rather than timing the tree out.
                 "message.timeout.ms": 30_000,
                 "linger.ms": 5}
        props.update(self.props)
        return props

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.where = f"{context.this_component_id}:{context.this_task_id}"
        self.topology_id = context.topology_id
        self.producer = Producer(self.producer_props(conf))
        #: Delivery reports not settled yet: (tuple, error or None). librdkafka calls back
        #: from whichever thread polls, so appends hold the lock.
        self._reports: list[tuple[Tuple, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._handed = False  # a settle is queued on the executor thread
        self.last_poll = time.monotonic()
        self.in_flight = 0
        self._poller = threading.Thread(target=self._poll_loop, daemon=True,
                                        name=f"kafka-bolt-{self.where}")
        self._poller.start()

    def execute(self, tup: Tuple) -> None:
        if tup.is_tick:  # as Storm's KafkaBolt: a tick (a topology-wide tick freq) is no record
            self.collector.ack(tup)
            return
        try:
            topic = self.topic_selector(tup)
        except Exception as e:
            return self._failed(tup, f"choosing the topic failed: {type(e).__name__}: {e}")
        if topic is None:
            log.warning("topology=%s %s: no topic for %r: acked and skipped",
                        self.topology_id, self.where, tup)
            self.collector.ack(tup)
            return
        try:
            key = self.key_serializer(self.mapper.key(tup))
            value = self.value_serializer(self.mapper.message(tup))
        except Exception as e:
            return self._failed(tup, f"mapping {tup!r} to a record failed: "
                                     f"{type(e).__name__}: {e}")
        on_delivery = None if self.fire_and_forget else \
            (lambda err, msg, tup=tup: self._delivered(tup, err))
        while True:
            try:
                self.producer.produce(topic, value, key, on_delivery=on_delivery)
                break
            except BufferError:
                # librdkafka's queue is full: wait for deliveries (backpressure upstream).
                self.producer.poll(0.05)
            except (KafkaException, TypeError, ValueError) as e:
                return self._failed(tup, f"writing to topic {topic!r} failed: {e}")
        if self.fire_and_forget:
            self.collector.ack(tup)
        else:
            self.in_flight += 1
        self.producer.poll(0)
        self.last_poll = time.monotonic()
        if self._reports:
            self._settle()

    def _failed(self, tup: Tuple, why: str) -> None:
        self.collector.report_error(f"KafkaBolt {self.where}: {why}")
        self.collector.fail(tup)

    def _delivered(self, tup: Tuple, err: Any) -> None:
        # On the poll thread (librdkafka calls back from poll): gather, hand back in batches.
        with self._lock:
            self._reports.append((tup, err))

    def _poll_loop(self) -> None:
        while not self._stop.wait(IDLE_POLL_SECS):
            if time.monotonic() - self.last_poll >= IDLE_POLL_SECS:
                self.producer.poll(0)
            if self._reports and not self._handed:
                self._handed = True
                self.collector.call_soon_threadsafe(self._settle)

    def _settle(self) -> None:
        """On the executor thread: ack what the broker has, fail what it refused."""
        with self._lock:
            reports, self._reports = self._reports, []
            self._handed = False
        ack, fail = self.collector.ack, self.collector.fail
        for tup, err in reports:
            self.in_flight -= 1
            if err is None:
                ack(tup)
            else:
                self.collector.report_error(f"KafkaBolt {self.where}: delivery failed: {err.str()}")
                fail(tup)

    def cleanup(self) -> None:
        remaining = self.producer.flush(10)
        self._stop.set()
        self._poller.join(1)
        if remaining:
            log.warning("topology=%s %s: %d records not confirmed at shutdown (their tuples "
                        "time out and are replayed)", self.topology_id, self.where, remaining)
