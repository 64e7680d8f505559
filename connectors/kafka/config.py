"""The Kafka spout's settings: Storm's ``KafkaSpoutConfig`` as a Python dataclass.

Storm builds a ``KafkaSpoutConfig`` with a builder; here the settings are keyword
arguments with Storm's defaults, checked when the config is made (a wrong setting is an
error at topology build time, not in a worker). The README's "Kafka" section has the
table of Storm's builder methods and their names here. Consumer properties are
librdkafka's (``props``); the spout owns ``enable.auto.commit``, ``group.id`` and
``bootstrap.servers``.
"""

from __future__ import annotations

import enum
import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ...client.config import KAFKA_BOOTSTRAP_SERVERS
from ...client.tuple import DEFAULT_STREAM
from .translator import (DefaultRecordTranslator, KafkaConfigError, KafkaRecord, KafkaTuple,
                         RecordTranslator)


class ProcessingGuarantee(str, enum.Enum):
    """Storm's ``KafkaSpoutConfig.ProcessingGuarantee``."""

    #: Every record is processed at least once: offsets are committed only once the
    #: record's tuple tree is acked, and failed records are retried.
    AT_LEAST_ONCE = "AT_LEAST_ONCE"
    #: Offsets are committed as soon as the records are polled, before they are emitted:
    #: a failure loses them, never repeats them.
    AT_MOST_ONCE = "AT_MOST_ONCE"
    #: Offsets are committed every ``offset_commit_period_ms`` whatever became of the
    #: records: neither repeats nor losses are ruled out.
    NO_GUARANTEE = "NO_GUARANTEE"


class FirstPollOffsetStrategy(str, enum.Enum):
    """Storm's ``FirstPollOffsetStrategy``: where a partition starts the first time a
    topology (by its id) reads it. A commit made by this topology always wins."""

    #: From the beginning of the partition, ignoring other topologies' commits.
    EARLIEST = "EARLIEST"
    #: From the end, ignoring other topologies' commits.
    LATEST = "LATEST"
    #: From the group's committed offset, or the beginning if there is none.
    UNCOMMITTED_EARLIEST = "UNCOMMITTED_EARLIEST"
    #: From the group's committed offset, or the end if there is none.
    UNCOMMITTED_LATEST = "UNCOMMITTED_LATEST"


class OnBadRecord(str, enum.Enum):
    """What the spout does with a record its deserializers or translator raise on."""

    #: Report it (topic, partition, offset, error) and fail it: it is retried on the
    #: retry schedule and, past ``max_retries``, acked so its partition goes on.
    FAIL = "FAIL"
    #: Raise: the worker dies, as an exception from a spout's code does.
    RAISE = "RAISE"


@dataclass(frozen=True)
class RetryBackoff:
    """Storm's ``KafkaSpoutRetryExponentialBackoff`` (its defaults): a failed record is
    due again ``initial_delay_ms`` after its first failure, then ``delay_period_ms`` times
    2^(fails - 1), never later than ``max_delay_ms``; past ``max_retries`` failures
    (None: no bound) it is acked and not retried."""

    initial_delay_ms: float = 0
    delay_period_ms: float = 2
    max_retries: int | None = None
    max_delay_ms: float = 10_000

    def __post_init__(self) -> None:
        for name in ("initial_delay_ms", "delay_period_ms", "max_delay_ms"):
            if getattr(self, name) < 0:
                raise KafkaConfigError(f"RetryBackoff.{name} must not be negative, got "
                                  f"{getattr(self, name)}")
        if self.max_retries is not None and self.max_retries < 0:
            raise KafkaConfigError(f"RetryBackoff.max_retries must be >= 0 or None (no bound), "
                              f"got {self.max_retries}")


#: librdkafka properties the spout sets itself.
_OWNED_PROPS = {"bootstrap.servers": "bootstrap_servers", "group.id": "group_id"}


@dataclass(frozen=True)
class KafkaSpoutConfig:
    """Everything a :class:`~squall.connectors.kafka.KafkaSpout` needs.

    Example::

        KafkaSpoutConfig("127.0.0.1:9092", topics=["sentences"], group_id="wc",
                         first_poll_offset_strategy=FirstPollOffsetStrategy.EARLIEST,
                         retry=RetryBackoff(max_retries=5))

    Exactly one of ``topics`` (names) and ``topic_pattern`` (a regular expression matched
    against whole topic names) is given. ``bootstrap_servers=None`` reads the brokers from
    the topology conf's ``kafka.bootstrap.servers`` when the spout opens (``squall local``
    sets it to the broker it starts; ``-c kafka.bootstrap.servers=...`` elsewhere).
    """

    bootstrap_servers: str | None = None
    topics: Sequence[str] | None = None
    topic_pattern: str | None = None
    #: The consumer group the offsets are committed under (None: ``squall-<topology
    #: name>-<component>``, the same for every run of the topology).
    group_id: str | None = None
    processing_guarantee: ProcessingGuarantee = ProcessingGuarantee.AT_LEAST_ONCE
    first_poll_offset_strategy: FirstPollOffsetStrategy = \
        FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST
    offset_commit_period_ms: float = 30_000
    max_uncommitted_offsets: int = 10_000_000
    retry: RetryBackoff = field(default_factory=RetryBackoff)
    #: Longest a poll may wait for records. Storm's default is 200 ms, which would hold
    #: every executor of the worker's loop; librdkafka fetches in the background, so 0
    #: returns what has arrived and the executor's idle back-off does the waiting.
    poll_timeout_ms: float = 0
    #: Records asked for in one poll (Kafka's max.poll.records).
    max_poll_records: int = 500
    partition_refresh_period_ms: float = 2_000
    record_translator: RecordTranslator = field(default_factory=DefaultRecordTranslator)
    #: Emit tuples the translator returns as None or empty (else they are acked unseen).
    emit_null_tuples: bool = False
    #: AT_MOST_ONCE and NO_GUARANTEE: emit with message ids anyway, so acks, fails and
    #: latency are counted (nothing is retried).
    tuple_tracking_enforced: bool = False
    key_deserializer: Callable[[bytes | None], Any] | None = None
    value_deserializer: Callable[[bytes | None], Any] | None = None
    on_bad_record: OnBadRecord = OnBadRecord.FAIL
    #: Further librdkafka consumer properties.
    props: Mapping[str, Any] = field(default_factory=dict)
    #: Seconds a metadata or committed-offsets request may take (never on the spout's
    #: own thread: a slow broker does not hold the worker).
    request_timeout_secs: float = 5.0

    def __post_init__(self) -> None:
        if self.bootstrap_servers is not None and (
                not self.bootstrap_servers or not isinstance(self.bootstrap_servers, str)):
            raise KafkaConfigError("KafkaSpoutConfig.bootstrap_servers must be 'host:port[,...]' "
                                   f"or None (kafka.bootstrap.servers), got "
                                   f"{self.bootstrap_servers!r}")
        if (self.topics is None) == (self.topic_pattern is None):
            raise KafkaConfigError("KafkaSpoutConfig takes exactly one of topics=[...] and "
                              "topic_pattern='regex'")
        if self.topics is not None:
            if isinstance(self.topics, str):
                object.__setattr__(self, "topics", (self.topics,))
            topics = tuple(self.topics)
            if not topics or not all(isinstance(t, str) and t for t in topics):
                raise KafkaConfigError(f"KafkaSpoutConfig.topics must be topic names, got "
                                  f"{self.topics!r}")
            object.__setattr__(self, "topics", tuple(sorted(set(topics))))
        else:
            try:
                re.compile(self.topic_pattern)
            except (re.error, TypeError) as e:
                raise KafkaConfigError(f"KafkaSpoutConfig.topic_pattern {self.topic_pattern!r} is "
                                  f"not a regular expression: {e}") from None
        object.__setattr__(self, "processing_guarantee",
                           _enum(ProcessingGuarantee, self.processing_guarantee,
                                 "processing_guarantee"))
        object.__setattr__(self, "first_poll_offset_strategy",
                           _enum(FirstPollOffsetStrategy, self.first_poll_offset_strategy,
                                 "first_poll_offset_strategy"))
        object.__setattr__(self, "on_bad_record",
                           _enum(OnBadRecord, self.on_bad_record, "on_bad_record"))
        for name in ("offset_commit_period_ms", "partition_refresh_period_ms"):
            if not getattr(self, name) > 0:
                raise KafkaConfigError(f"KafkaSpoutConfig.{name} must be > 0, got "
                                  f"{getattr(self, name)}")
        if not 0 <= self.poll_timeout_ms <= 1000:
            raise KafkaConfigError(f"KafkaSpoutConfig.poll_timeout_ms must be within 0..1000 (it "
                              f"holds the worker's loop), got {self.poll_timeout_ms}")
        for name in ("max_uncommitted_offsets", "max_poll_records"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise KafkaConfigError(f"KafkaSpoutConfig.{name} must be a whole number >= 1, "
                                  f"got {getattr(self, name)!r}")
        if not isinstance(self.record_translator, RecordTranslator):
            raise KafkaConfigError("KafkaSpoutConfig.record_translator must be a RecordTranslator "
                              "(SimpleRecordTranslator wraps a function)")
        props = dict(self.props)
        for key, name in _OWNED_PROPS.items():
            if key in props:
                raise KafkaConfigError(f"KafkaSpoutConfig.props sets {key!r}: give it as "
                                  f"KafkaSpoutConfig({name}=...)")
        auto = str(props.get("enable.auto.commit", "false")).lower() in ("true", "1")
        if auto and self.processing_guarantee is ProcessingGuarantee.AT_LEAST_ONCE:
            raise KafkaConfigError("KafkaSpoutConfig: enable.auto.commit commits offsets before "
                              "their tuples are acked, which breaks AT_LEAST_ONCE; drop it "
                              "(the spout commits acked offsets itself) or choose "
                              "processing_guarantee=NO_GUARANTEE")
        if auto:
            raise KafkaConfigError("KafkaSpoutConfig: the spout commits offsets itself for every "
                              "processing guarantee; drop enable.auto.commit")
        object.__setattr__(self, "props", props)

    @property
    def at_least_once(self) -> bool:
        return self.processing_guarantee is ProcessingGuarantee.AT_LEAST_ONCE

    @functools.cached_property
    def plain(self) -> bool:
        """Records become ``(topic, partition, offset, key, value)`` as they come: the
        default translator and no deserializer (the spout's fast path)."""
        return type(self.record_translator) is DefaultRecordTranslator and \
            self.key_deserializer is None and self.value_deserializer is None

    def translate(self, msg: Any) -> tuple[list | None, str]:
        """A consumed message's tuple values and stream (None: nothing to emit), through the
        deserializers and the translator; what they raise propagates."""
        if self.plain:
            return [msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()], \
                DEFAULT_STREAM
        key, value = msg.key(), msg.value()
        if self.key_deserializer is not None:
            key = self.key_deserializer(key)
        if self.value_deserializer is not None:
            value = self.value_deserializer(value)
        ts_type, ts = msg.timestamp()
        values = self.record_translator.translate(KafkaRecord(
            msg.topic(), msg.partition(), msg.offset(), key, value, ts if ts_type else None,
            msg.headers()))
        if values is None or (len(values) == 0 and not self.emit_null_tuples):
            return None, DEFAULT_STREAM
        stream = values.stream if isinstance(values, KafkaTuple) else DEFAULT_STREAM
        return list(values), stream

    def servers(self, conf: Mapping[str, Any]) -> str:
        """The brokers: this config's, else the topology conf's ``kafka.bootstrap.servers``."""
        return brokers(self.bootstrap_servers, conf, "KafkaSpoutConfig")

    def consumer_props(self, group_id: str, servers: str) -> dict[str, Any]:
        """The librdkafka properties of the spout's consumer."""
        props = {"bootstrap.servers": servers, "group.id": group_id,
                 # librdkafka's own offset store and commits stay off: the spout commits
                 # exactly the offsets its guarantee allows.
                 "enable.auto.commit": False, "enable.auto.offset.store": False,
                 "enable.partition.eof": False,
                 # librdkafka stops fetching a partition whose local queue holds
                 # queued.min.messages and looks again only after this backoff (1 s by
                 # default): a spout that drains 100k records in less than that then waits
                 # for data, and polling without blocking (as a spout must) hits it every
                 # time. Measured against Tansu: 330k records/s at the default, 1.7-2.5M here.
                 "fetch.queue.backoff.ms": 10}
        if self.at_least_once:
            # As Storm: an offset gone from the log (retention) restarts at the earliest
            # record kept rather than skipping to the end (Kafka's default).
            props["auto.offset.reset"] = "earliest"
        props.update(self.props)
        return props


def brokers(given: str | None, conf: Mapping[str, Any], what: str) -> str:
    """``given`` brokers, or the topology conf's ``kafka.bootstrap.servers``."""
    servers = given or conf.get(KAFKA_BOOTSTRAP_SERVERS)
    if not servers:
        raise KafkaConfigError(f"{what} has no bootstrap_servers and the topology conf no "
                               f"{KAFKA_BOOTSTRAP_SERVERS}: give one of them (host:port)")
    return str(servers)


def _enum(cls: type[enum.Enum], value: Any, name: str) -> Any:
    try:
        return cls(value)
    except ValueError:
        raise KafkaConfigError(f"KafkaSpoutConfig.{name} {value!r} is not one of "
                          f"{', '.join(m.value for m in cls)}") from None
