"""Kafka for Trident: storm-kafka-client's Trident spouts and a Kafka state, exactly once.

- :class:`KafkaTridentSpoutTransactional` (Storm's ``KafkaTridentSpoutTransactional``): a
  txid always replays the same records of each partition, the offsets its batch took;
- :class:`KafkaTridentSpoutOpaque` (``KafkaTridentSpoutOpaque``): each batch of a partition
  starts after the last one that committed, so a replay may take more records.

Both are Trident partitioned spouts (client/trident/spout.py): the coordinator lists the
subscribed topics' partitions (refreshed every ``partition_refresh_period_ms``), the emitters
deal them round robin, and each batch's metadata per partition is Storm's
``KafkaTridentSpoutBatchMetadata`` (``firstOffset``, ``lastOffset``, ``topologyId``) in the
transactional state. The first-poll strategy applies as Storm applies it: EARLIEST and
LATEST only when the stored metadata is another topology's (a resubmission), the
UNCOMMITTED ones only when there is none; TIMESTAMP and UNCOMMITTED_TIMESTAMP (Trident only,
as in Storm) start at the first record at or after ``start_timestamp_ms``. Nothing is
committed to the consumer group: Trident's own state holds where each partition is.

:class:`KafkaStateFactory` (``TridentKafkaStateFactory``) writes ``partition_persist`` tuples to
a topic. With ``transactional=True`` (the default) every batch is one Kafka transaction whose
commit also records the txid (as the committed offset of a consumer group of the state's own),
so a replay of a txid that reached Kafka writes nothing, and a ``read_committed`` consumer sees
each record once, across a worker's kill -9 (a restarted producer with the same
``transactional.id`` aborts what the dead one left open). That needs a spout that replays a
txid's exact batch (the transactional one), and, with several state partitions, a
deterministic partitioning in front of ``partition_persist`` (``partition_by`` or
``global_``, never ``shuffle``): each partition skips a replay by what it wrote itself, so
a replay's tuples must reach the partitions the first attempt's did.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

from ...client import extras

extras.require("kafka", "squall.connectors.kafka")

from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError,  # noqa: E402
                             KafkaException, TopicPartition)

from ...client.trident.persist import StateUpdater  # noqa: E402
from ...client.trident.spout import OpaquePartitionedSpout, PartitionedSpout  # noqa: E402
from ...client.trident.state.base import State, StateError, StateFactory, StateType  # noqa: E402
from .config import KafkaSpoutConfig, brokers  # noqa: E402
from .translator import KafkaConfigError  # noqa: E402
from .txn import TxnError, TxnWriter  # noqa: E402

log = logging.getLogger("squall.connectors.kafka")

#: FirstPollOffsetStrategy values only Trident's Kafka spouts take (as in Storm).
TIMESTAMP, UNCOMMITTED_TIMESTAMP = "TIMESTAMP", "UNCOMMITTED_TIMESTAMP"


@dataclass(frozen=True)
class KafkaTridentSpoutConfig:
    """Storm's ``KafkaTridentSpoutConfig``: the settings of :class:`KafkaSpoutConfig` that
    apply to Trident (brokers, topics or pattern, first-poll strategy, translator,
    deserializers, consumer properties, partition refresh) and a batch's size.

    ``first_poll_offset_strategy`` also takes ``"TIMESTAMP"`` and ``"UNCOMMITTED_TIMESTAMP"``
    with ``start_timestamp_ms``. The translator's streams must be the default one (Trident
    spouts emit one stream).
    """

    spout: KafkaSpoutConfig
    #: Most records of one partition in one batch (Storm: the consumer's max.poll.records).
    max_batch_records: int = 500
    #: Longest a batch waits for records it knows the log has (they are being fetched).
    poll_timeout_ms: float = 200
    start_timestamp_ms: int = 0
    first_poll_offset_strategy: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.spout, KafkaSpoutConfig):
            raise KafkaConfigError("KafkaTridentSpoutConfig takes a KafkaSpoutConfig (its "
                                   "brokers, topics, translator, ...)")
        strategy = self.first_poll_offset_strategy or self.spout.first_poll_offset_strategy.value
        if strategy not in ("EARLIEST", "LATEST", "UNCOMMITTED_EARLIEST", "UNCOMMITTED_LATEST",
                            TIMESTAMP, UNCOMMITTED_TIMESTAMP):
            raise KafkaConfigError(f"first_poll_offset_strategy {strategy!r} is not a Kafka "
                                   "first-poll strategy")
        object.__setattr__(self, "first_poll_offset_strategy", strategy)
        if not isinstance(self.max_batch_records, int) or self.max_batch_records < 1:
            raise KafkaConfigError(f"max_batch_records must be >= 1, got "
                                   f"{self.max_batch_records!r}")
        streams = dict(self.spout.record_translator.streams())
        if list(streams) != ["default"]:
            raise KafkaConfigError(f"a Trident Kafka spout emits one stream; its translator "
                                   f"routes to {sorted(streams)}")


@dataclass(frozen=True)
class KafkaPartition:
    """One topic partition, as Trident's partitioned spouts see it."""

    topic: str
    partition: int

    @property
    def id(self) -> str:
        """Stable across restarts and a ZooKeeper node name (Storm's ``topic@partition``)."""
        return f"{self.topic}@{self.partition}"


class _KafkaTridentSpout:
    """What both Trident spouts share: the partitions and reading a partition's range."""

    requires_extras = ("kafka",)

    def __init__(self, config: KafkaTridentSpoutConfig | KafkaSpoutConfig, **kwargs: Any):
        if isinstance(config, KafkaSpoutConfig):
            config = KafkaTridentSpoutConfig(config, **kwargs)
        elif kwargs:
            config = replace(config, **kwargs)
        self.config = config
        self._consumer: Any = None
        self._partitions: list[list] | None = None
        self._refreshed = 0.0
        self.topology_id = ""
        self.conf: Mapping[str, Any] = {}
        #: (topic, partition) -> the offset this task first read it at (Storm's
        #: tpToFirstSeekOffset): its first poll since the executor started.
        self._first_seek: dict[tuple[str, int], int] = {}

    def __getstate__(self) -> dict:  # what is pickled into the topology: the settings only
        return {"config": self.config}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["config"])

    # -- PartitionedSpout --------------------------------------------------------------------
    def open(self, conf: Mapping[str, Any], context: Any) -> None:
        self.conf = conf
        self.topology_id = getattr(context, "topology_id", "") or ""

    def output_fields(self) -> list[str]:
        return list(self.config.spout.record_translator.streams()["default"])

    def component_configuration(self) -> dict[str, Any]:
        return {}

    def partitions(self, conf: Mapping[str, Any]) -> list[list]:
        """Every partition of the subscribed topics as ``[topic, partition]``, sorted; read
        from the broker at most every ``partition_refresh_period_ms``."""
        c = self.config.spout
        now = time.monotonic()
        if self._partitions is not None and \
                now - self._refreshed < c.partition_refresh_period_ms / 1000:
            return self._partitions
        md = self._client(conf).list_topics(timeout=c.request_timeout_secs)
        if c.topics is not None:
            missing = [t for t in c.topics if t not in md.topics]
            if missing:
                raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART,
                                                f"topic(s) {', '.join(missing)} not found"))
            topics = list(c.topics)
        else:
            pattern = re.compile(c.topic_pattern)
            topics = [t for t in md.topics if pattern.fullmatch(t) and not t.startswith("__")]
        self._partitions = sorted([t, p] for t in topics for p in md.topics[t].partitions)
        self._refreshed = now
        return self._partitions

    def ordered_partitions(self, description: Any) -> list[KafkaPartition]:
        return [KafkaPartition(t, int(p)) for t, p in description]

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    # -- reading --------------------------------------------------------------------------------
    def _client(self, conf: Mapping[str, Any]) -> Any:
        if self._consumer is None:
            c = self.config.spout
            props = c.consumer_props(f"squall-trident-{uuid.uuid4().hex[:12]}",
                                     brokers(c.bootstrap_servers, conf or self.conf,
                                             "KafkaTridentSpoutConfig"))
            self._consumer = Consumer(props)
        return self._consumer

    def _start(self, p: KafkaPartition, last_meta: Mapping[str, Any] | None) -> int:
        """Where a new batch of ``p`` starts (Storm's KafkaTridentSpoutEmitter.seek)."""
        key = (p.topic, p.partition)
        strategy = self.config.first_poll_offset_strategy
        if key in self._first_seek and last_meta is not None:
            return int(last_meta["lastOffset"]) + 1
        if key in self._first_seek:  # every batch so far failed: start where this task did
            return self._first_seek[key]
        first_deployed = last_meta is None or last_meta.get("topologyId") != self.topology_id
        if strategy == "EARLIEST" and first_deployed:
            start = OFFSET_BEGINNING
        elif strategy == "LATEST" and first_deployed:
            start = OFFSET_END
        elif strategy == TIMESTAMP and first_deployed:
            start = self._offset_at_time(p)
        elif last_meta is not None:
            start = int(last_meta["lastOffset"]) + 1
        elif strategy in ("UNCOMMITTED_EARLIEST", "EARLIEST"):
            start = OFFSET_BEGINNING
        elif strategy in ("UNCOMMITTED_LATEST", "LATEST"):
            start = OFFSET_END
        else:
            start = self._offset_at_time(p)
        start = self._resolve(p, start)
        self._first_seek[key] = start
        return start

    def _offset_at_time(self, p: KafkaPartition) -> int:
        got = self._client(self.conf).offsets_for_times(
            [TopicPartition(p.topic, p.partition, self.config.start_timestamp_ms)],
            timeout=self.config.spout.request_timeout_secs)
        off = got[0].offset
        return off if off >= 0 else OFFSET_END  # no record that late: from the end

    def _resolve(self, p: KafkaPartition, start: int) -> int:
        """OFFSET_BEGINNING / OFFSET_END as numbers (the batch metadata keeps numbers)."""
        if start >= 0:
            return start
        low, high = self._client(self.conf).get_watermark_offsets(
            TopicPartition(p.topic, p.partition), timeout=self.config.spout.request_timeout_secs,
            cached=False)
        return low if start == OFFSET_BEGINNING else high

    def _read(self, p: KafkaPartition, start: int, stop: int | None) -> list:
        """Records of ``p`` from ``start``: up to ``stop`` inclusive (a replay: all of them,
        or an error), else what the log has, at most ``max_batch_records``."""
        c = self._client(self.conf)
        timeout = self.config.spout.request_timeout_secs
        tp = TopicPartition(p.topic, p.partition)
        if stop is None:
            _, high = c.get_watermark_offsets(tp, timeout=timeout, cached=False)
            end = min(high, start + self.config.max_batch_records)
        else:
            end = stop + 1
        if start >= end:
            return []
        c.assign([TopicPartition(p.topic, p.partition, start)])
        out: list = []
        nxt = start
        wait = (self.config.poll_timeout_ms / 1000) if stop is None else timeout
        deadline = time.monotonic() + wait
        while nxt < end:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for m in c.consume(min(end - nxt, 1000), remaining):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(err)
                if m.topic() != p.topic or m.partition() != p.partition or m.offset() < nxt:
                    continue
                if m.offset() >= end:
                    nxt = end
                    break
                out.append(m)
                nxt = m.offset() + 1
        if stop is not None and nxt < end:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT,
                                            f"replaying {p.id} {start}..{stop}: only up to "
                                            f"{nxt - 1} arrived within {timeout:g} s"))
        return out

    def _emit(self, collector: Any, records: list) -> None:
        translate = self.config.spout.translate
        for m in records:
            values, _ = translate(m)
            if values is not None:
                collector.emit(values)

    def _emit_new(self, collector: Any, p: KafkaPartition, last_meta: Any) -> dict:
        start = self._start(p, last_meta)
        records = self._read(p, start, None)
        self._emit(collector, records)
        if not records:  # empty: first > last, and the next batch starts at ``start``
            return {"firstOffset": start, "lastOffset": start - 1,
                    "topologyId": self.topology_id}
        return {"firstOffset": records[0].offset(), "lastOffset": records[-1].offset(),
                "topologyId": self.topology_id}


class KafkaTridentSpoutTransactional(_KafkaTridentSpout, PartitionedSpout):
    """A txid replays exactly the offsets its first attempt read (Storm's
    ``KafkaTridentSpoutTransactional``): with a transactional state, exactly once.

    Example::

        spout = KafkaTridentSpoutTransactional(KafkaSpoutConfig(topics=["sentences"],
            record_translator=SimpleRecordTranslator(lambda r: [r.value.decode()], ["line"])))
        topology.new_stream("kafka-lines", spout)
    """

    def emit_new(self, attempt: Any, collector: Any, partition: KafkaPartition,
                 last_meta: Any) -> dict:
        return self._emit_new(collector, partition, last_meta)

    def emit_again(self, attempt: Any, collector: Any, partition: KafkaPartition,
                   meta: Any) -> None:
        if meta.get("topologyId") != self.topology_id and \
                self.config.first_poll_offset_strategy in ("EARLIEST", "LATEST"):
            return  # another deployment's batch, which this strategy does not read again
        first, last = int(meta["firstOffset"]), int(meta["lastOffset"])
        if last < first:
            return  # an empty batch
        self._first_seek.setdefault((partition.topic, partition.partition), first)
        self._emit(collector, self._read(partition, first, last))


class KafkaTridentSpoutOpaque(_KafkaTridentSpout, OpaquePartitionedSpout):
    """Each batch starts after the partition's last committed one (Storm's
    ``KafkaTridentSpoutOpaque``): exactly once with an opaque state."""

    def emit(self, attempt: Any, collector: Any, partition: KafkaPartition,
             last_meta: Any) -> dict:
        return self._emit_new(collector, partition, last_meta)

    def emit_new(self, attempt: Any, collector: Any, partition: KafkaPartition,
                 last_meta: Any) -> dict:
        return self._emit_new(collector, partition, last_meta)


# --- the state -------------------------------------------------------------------------------
def _default_mapper(values: Sequence[Any]) -> tuple[Any, Any]:
    """``(key, message)`` from a tuple of two fields (Storm's FieldNameBasedTupleToKafkaMapper
    with its default fields ``key`` and ``message``)."""
    return values[0], values[1]


@dataclass(frozen=True)
class KafkaStateFactory(StateFactory):
    """Storm's ``TridentKafkaStateFactory``: ``partition_persist`` to a Kafka topic.

    Example::

        stream.partition_persist(KafkaStateFactory(topic="counts"), KafkaStateUpdater(),
                                 ["word", "count"])

    ``mapper(tuple) -> (key, value)``: default, the tuple's first two fields. ``transactional``
    (default): each batch is a Kafka transaction that also records its txid, so a replayed
    txid is not written twice; False: plain idempotent writes, at least once.
    ``state_id`` names the state's producer and its txid record: keep it when the topology
    is resubmitted (default: the topic).
    """

    topic: str
    bootstrap_servers: str | None = None
    mapper: Callable[[Sequence[Any]], tuple[Any, Any]] = _default_mapper
    transactional: bool = True
    state_id: str = ""
    props: Mapping[str, Any] = field(default_factory=dict)
    timeout_secs: float = 30.0

    requires_extras = ("kafka",)

    @property
    def state_type(self) -> StateType:
        return StateType.TRANSACTIONAL if self.transactional else StateType.NON_TRANSACTIONAL

    def make_state(self, conf: Mapping[str, Any], partition_index: int,
                   num_partitions: int) -> "KafkaState":
        return KafkaState(self, conf, partition_index)


class KafkaStateUpdater(StateUpdater):
    """Storm's ``TridentKafkaStateUpdater``: every tuple of the batch becomes a record."""

    def update_state(self, state: "KafkaState", tuples: list, collector: Any) -> None:
        state.update_state(tuples, collector)


class KafkaState(State):
    """One partition of a :class:`KafkaStateFactory`'s state: a writer of its own."""

    def __init__(self, factory: KafkaStateFactory, conf: Mapping[str, Any], index: int):
        self.factory = factory
        servers = brokers(factory.bootstrap_servers, conf, "KafkaStateFactory")
        name = conf.get("topology.name") or "topology"
        self.id = f"squall-{name}-{factory.state_id or factory.topic}-{index}"
        self.skipping = False
        self.writer = self._guard(TxnWriter, servers, self.id, factory.topic, factory.props,
                                  factory.timeout_secs, factory.transactional)

    def begin_commit(self, txid: int | None) -> None:
        self.skipping = txid is not None and self.writer.has(txid)
        if self.skipping:
            log.info("Kafka state %s: txid %s is in Kafka already: its replay writes nothing",
                     self.id, txid)
        else:
            self._guard(self.writer.begin)

    def update_state(self, tuples: list, collector: Any) -> None:
        if self.skipping:
            return
        mapper, topic, produce = self.factory.mapper, self.factory.topic, self.writer.produce
        for t in tuples:
            key, value = mapper(t.values)
            produce(topic, key, value)

    def commit(self, txid: int | None) -> None:
        if not self.skipping:
            self._guard(self.writer.commit, -1 if txid is None else int(txid))

    def _guard(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except TxnError as e:
            raise StateError(str(e), self.id) from None

    def close(self) -> None:
        self.writer.close()
