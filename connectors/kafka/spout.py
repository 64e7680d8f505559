"""The Kafka spout: storm-kafka-client's ``KafkaSpout`` on confluent-kafka (librdkafka).

Partitions are assigned by hand, never by a consumer group's rebalance: every
``partition_refresh_period_ms`` a helper thread reads the topics' partitions, deals them
round robin over the spout's tasks (:func:`~.offsets.assign_round_robin`) and fetches
the committed offsets of the ones this task gains; the spout's own thread then applies
the change. The helper owns every call that can wait on a broker (metadata, committed
offsets), so a slow or absent broker never holds the worker's loop: ``next_tuple`` only
polls what librdkafka has fetched in the background (``poll_timeout_ms``, default 0).

Under ``AT_LEAST_ONCE`` a record's tuple carries a message id naming its partition and
offset; :class:`~.offsets.PartitionOffsets` keeps which were emitted and acked, and every
``offset_commit_period_ms`` (and on deactivate, close and the loss of a partition) the
contiguous run of acked offsets is committed, with metadata naming the topology and task
(Storm's ``CommitMetadata``): that is how the first-poll strategy tells this topology's
commits from another's. A failed tuple is retried on :class:`~.offsets.RetrySchedule`'s
exponential back-off by seeking its partition back; a partition with
``max_uncommitted_offsets`` emitted and uncommitted is paused, except to retry within the
bound.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections import deque
from typing import Any

from ...client import extras

extras.require("kafka", "squall.connectors.kafka")

from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError,  # noqa: E402
                             KafkaException, TopicPartition)

from ...client import config as cfg  # noqa: E402
from ...client.stateful import CheckpointedSpout, barrier_mode  # noqa: E402
from ...client.tuple import DEFAULT_STREAM  # noqa: E402
from ...client.config import kafka_group_id  # noqa: E402
from .config import FirstPollOffsetStrategy, KafkaSpoutConfig, OnBadRecord  # noqa: E402
from .config import ProcessingGuarantee as PG  # noqa: E402
from .offsets import (ACKED, EMITTED, PartitionOffsets, RetrySchedule,  # noqa: E402
                      assign_round_robin)

log = logging.getLogger("squall.connectors.kafka")

# A message id is an int while it fits in 63 bits (the spout's pending map keeps such ids
# inline, with no object): the partition's key above the offset's 44 bits. The key is the
# topic's index in the configured (sorted) topic list and the partition number, so it
# names the same record after a restart. Anything larger is a (topic, partition, offset)
# tuple.
_OFFSET_BITS = 44
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
_PARTITION_BITS = 11
_TOPIC_INDEXES = 1 << (63 - _OFFSET_BITS - _PARTITION_BITS)
#: Seconds between two reports of the same kind of error.
_REPORT_EVERY = 10.0
#: Seconds between the spout's housekeeping (applying assignments, commits, errors).
_HOUSEKEEPING_SECS = 0.05
#: Records one next_tuple may emit (within topology.max.spout.pending): a consume batch goes
#: out in a few calls instead of one call per record, and the executor's step, which
#: counts emits, still ends often enough to interleave acks.
_BURST = 64


class _Partition:
    """One assigned partition: its offsets and its message-id key."""

    __slots__ = ("topic", "partition", "key", "tp", "offsets", "paused", "limit", "seeked",
                 "committed", "position", "start")

    def __init__(self, topic: str, partition: int, key: int | None, offsets: PartitionOffsets):
        self.topic = topic
        self.partition = partition
        #: The int message ids' partition key (None: ids are tuples).
        self.key = key
        self.tp = TopicPartition(topic, partition)
        self.offsets = offsets
        self.paused = False
        #: Over max_uncommitted_offsets: the last offset that may be emitted (retries only).
        self.limit: int | None = None
        #: The offset a retry sought back to, until a record from there arrives: seeking
        #: again at every poll would restart the fetch before it returns anything.
        self.seeked: int | None = None
        #: The group's committed offset as this task last saw or made it (-1: none).
        self.committed = -1
        #: Barrier checkpointing: the offset after the last record emitted (where a
        #: checkpoint taken now would restart), or where the partition starts.
        self.position = -1
        #: Where the partition started (an offset, or librdkafka's logical beginning or end):
        #: a rewind to a checkpoint that has no position for it goes back here.
        self.start = -1


class KafkaSpout(CheckpointedSpout):
    """Reads Kafka topics with storm-kafka-client's guarantees.

    Example::

        from squall.connectors.kafka import KafkaSpout, KafkaSpoutConfig
        builder.set_spout("kafka", KafkaSpout(KafkaSpoutConfig(
            "127.0.0.1:9092", topics=["sentences"])), 2)

    It emits ``(topic, partition, offset, key, value)`` unless its config's
    ``record_translator`` says otherwise. Give the topology ``topology.max.spout.pending``
    to bound the records in flight; each task reads the partitions dealt to it.

    Under barrier checkpointing (``topology.state.checkpoint.mode: barrier``) there is no
    acker: the spout's position in each partition is part of every checkpoint
    (``snapshot``/``restore``), a recovery rewinds to the last completed one, and the group's
    offsets are committed when a checkpoint completes. With stateful bolts and a
    :class:`~squall.connectors.kafka.TransactionalKafkaBolt`, each record then counts once.
    """

    requires_extras = ("kafka",)
    #: Message ids name (topic, partition, offset): the same record after a restart.
    stable_message_ids = True

    def __init__(self, config: KafkaSpoutConfig):
        if not isinstance(config, KafkaSpoutConfig):
            raise TypeError(f"KafkaSpout takes a KafkaSpoutConfig, got {type(config).__name__}")
        self.config = config

    def declare_output_fields(self, declarer: Any) -> None:
        self.config.record_translator.declare(declarer)

    def get_component_configuration(self) -> dict[str, Any]:
        """What the UI's lag monitor needs, as Storm's KafkaSpout publishes it: the topics,
        the group, the brokers and the consumer properties (secrets left out)."""
        c = self.config
        p = cfg.KAFKA_SPOUT_CONF_PREFIX
        out: dict[str, Any] = {}
        if c.topics is not None:
            out[p + "topics"] = ",".join(c.topics)
        else:
            out[p + "topics.pattern"] = c.topic_pattern
        if c.group_id is not None:
            out[p + "groupid"] = c.group_id
        if c.bootstrap_servers is not None:
            out[p + "bootstrap.servers"] = c.bootstrap_servers
        for key, value in c.props.items():
            if isinstance(value, (str, int, float, bool)) and not cfg.is_secret_key(key):
                out[p + key] = value
        return out

    # -- lifecycle ---------------------------------------------------------------------------
    def open(self, conf: Any, context: Any, collector: Any) -> None:
        c = self.config
        self.collector = collector
        self.context = context
        self.component = context.this_component_id
        self.task = context.this_task_id
        self.task_index = context.this_task_index
        self.n_tasks = len(context.component_tasks(self.component))
        name = conf.get("topology.name") or context.topology_id
        self.group_id = c.group_id or kafka_group_id(name, self.component)
        self.topology_id = context.topology_id
        #: The task's metric registry (None under a test's bare context).
        self.metrics = getattr(context, "metrics", None)
        self.commit_metadata = json.dumps({"topologyId": self.topology_id, "taskId": self.task,
                                           "threadName": f"{self.component}:{self.task}"})
        self.guarantee = c.processing_guarantee
        #: Barrier checkpointing: positions go into checkpoints; nothing is tracked.
        self.barrier = barrier_mode(conf)
        #: Barrier checkpointing: "topic/partition" -> offset of the restored checkpoint, and
        #: the last snapshot taken (committed to the group when its checkpoint completes).
        self.restored: dict[str, int] = {}
        self.last_snapshot: dict[str, int] | None = None
        self.tracked = self.guarantee is PG.AT_LEAST_ONCE or c.tuple_tracking_enforced
        #: Acked offsets are what the spout commits (at-least-once without barriers).
        self.alo = self.guarantee is PG.AT_LEAST_ONCE and not self.barrier
        self.max_pending = conf.get(cfg.TOPOLOGY_MAX_SPOUT_PENDING) if self.tracked else None
        self.retry = RetrySchedule(c.retry.initial_delay_ms / 1000, c.retry.delay_period_ms / 1000,
                                   c.retry.max_retries, c.retry.max_delay_ms / 1000)
        self.topic_index = {t: i for i, t in enumerate(c.topics)} \
            if c.topics is not None and len(c.topics) <= _TOPIC_INDEXES else {}
        #: (topic, partition) -> _Partition, and int key -> _Partition.
        self.parts: dict[tuple[str, int], _Partition] = {}
        self.by_key: dict[int, _Partition] = {}
        self.waiting: deque = deque()
        #: NO_GUARANTEE: (topic, partition) -> the position after the last record polled.
        self._consumed: dict[tuple[str, int], int] = {}
        self.poll_timeout = c.poll_timeout_ms / 1000
        self.commit_period = c.offset_commit_period_ms / 1000
        now = time.monotonic()
        self.next_commit = now + self.commit_period
        self.next_housekeeping = now
        self.reported: dict[str, float] = {}
        #: Counters the tests and the UI read (records polled, emitted, skipped, ...).
        self.counts = {"polled": 0, "emitted": 0, "acked": 0, "failed": 0, "retried": 0,
                       "bad_records": 0, "max_retries_reached": 0, "commits": 0}
        self.servers = c.servers(conf)
        props = c.consumer_props(self.group_id, self.servers)
        props["on_commit"] = self._on_commit
        props["error_cb"] = self._on_client_error
        self.consumer = Consumer(props)
        self.refresher = _Refresher(self, props)
        self.refresher.start()
        log.info("topology=%s %s:%d Kafka spout on %s, group %s, %s, %s", self.topology_id,
                 self.component, self.task, self.servers, self.group_id,
                 self.guarantee.value, c.first_poll_offset_strategy.value)

    def activate(self) -> None:
        self.next_housekeeping = 0.0

    def deactivate(self) -> None:
        self._commit(sync=True)
        log.info("topology=%s %s:%d deactivated: no polls until activated; committed %s",
                 self.topology_id, self.component, self.task,
                 ", ".join(f"{p.topic}/{p.partition}@{p.committed}"
                           for p in self.parts.values()) or "nothing")

    def close(self) -> None:
        self.refresher.stop()
        try:
            self._commit(sync=True)
        finally:
            self.consumer.close()

    # -- next_tuple ---------------------------------------------------------------------------
    def next_tuple(self) -> None:
        now = time.monotonic()
        if now >= self.next_housekeeping:
            self._housekeeping(now)
        budget = _BURST
        if self.max_pending is not None:
            budget = min(budget, max(self.max_pending - self.collector.get_pending_count(), 1))
        for _ in range(2):  # at most two polls a call: next_tuple stays short
            if self.waiting:
                budget -= self._emit_waiting(budget, now)
                if budget <= 0:
                    return
            if not self._poll(now):
                return

    def _housekeeping(self, now: float) -> None:
        self.next_housekeeping = now + _HOUSEKEEPING_SECS
        refresher = self.refresher
        while refresher.errors:
            kind, text = refresher.errors.popleft()
            self._report(kind, text)
        while refresher.updates:
            self._apply_assignment(*refresher.updates.popleft())
        if now >= self.next_commit:
            self.next_commit = now + self.commit_period
            self._commit(sync=False)

    def _poll(self, now: float) -> bool:
        """Poll once (pausing partitions at their bound, seeking back for retries); False
        if nothing came."""
        if not self.parts:
            return False
        if self.guarantee is PG.AT_LEAST_ONCE and not self.barrier:
            self._prepare_partitions(now)
        try:
            msgs = self.consumer.consume(self.config.max_poll_records, self.poll_timeout)
        except KafkaException as e:
            self._report("poll", f"polling {self._where()} failed: {e}")
            return False
        if not msgs:
            return False
        self.counts["polled"] += len(msgs)
        if self.barrier:
            pass  # the checkpoints say where the spout is
        elif self.guarantee is PG.AT_MOST_ONCE:
            # Committed before a tuple leaves: a failure loses records, never repeats them.
            self._commit_consumed(msgs)
        elif self.guarantee is PG.NO_GUARANTEE:
            self._consumed_positions(msgs, self._consumed)
        self.waiting.extend(msgs)
        return True

    def _prepare_partitions(self, now: float) -> None:
        """Pause partitions at max_uncommitted_offsets; seek back to retries that are due."""
        ready: dict[_Partition, int] = {}
        retry = self.retry
        if retry.due:
            for key in retry.ready(now):
                part, off = self._decode(key)
                if part is not None and (part not in ready or off < ready[part]):
                    ready[part] = off
        bound = self.config.max_uncommitted_offsets
        pause, resume = [], []
        for part in self.parts.values():
            limit = None
            blocked = False
            if part.offsets.uncommitted >= bound:
                limit = part.offsets.nth_uncommitted(bound)
                first_retry = ready.get(part)
                blocked = first_retry is None or limit is None or first_retry > limit
            part.limit = limit
            if blocked != part.paused:
                part.paused = blocked
                (pause if blocked else resume).append(part.tp)
        if pause:
            self.consumer.pause(pause)
            log.info("topology=%s %s:%d paused %s: %d offsets emitted and not committed "
                     "(max_uncommitted_offsets)", self.topology_id, self.component, self.task,
                     ", ".join(f"{tp.topic}/{tp.partition}" for tp in pause), bound)
        if resume:
            self.consumer.resume(resume)
        for part, off in ready.items():
            if not part.paused and (part.seeked is None or off < part.seeked):
                self._seek(part, off)

    def _seek(self, part: _Partition, offset: int) -> None:
        try:
            self.consumer.seek(TopicPartition(part.topic, part.partition, offset))
            part.seeked = offset
        except KafkaException as e:
            self._report("seek", f"seeking {part.topic}/{part.partition} to {offset} failed "
                                 f"({e}); retrying at the next poll")

    # -- emitting ----------------------------------------------------------------------------
    def _emit_waiting(self, budget: int, now: float) -> int:
        """Emit waiting records until ``budget`` tuples went out or none wait; returns how
        many went out. The usual record (the next offset of a partition in a plain run, no
        retry or bound in the way) takes the short path here; any other goes through
        :meth:`_emit`."""
        waiting = self.waiting
        n = 0
        if self.barrier:
            while waiting and n < budget:
                if self._emit(waiting.popleft(), now):
                    n += 1
            return n
        emit = self.collector.emit
        parts = self.parts
        alo = self.alo
        plain = self.config.plain
        tracked = self.tracked
        short = 0  # emitted here (the full path counts its own)
        while waiting and n < budget:
            msg = waiting.popleft()
            if msg.error() is not None:
                self._emit(msg, now)  # reported there (end of partition is not an error)
                continue
            topic = msg.topic()
            partition = msg.partition()
            part = parts.get((topic, partition))
            if part is None:
                continue  # fetched before the partition was given up
            offset = msg.offset()
            # An int id as _key makes it: a partition key and an offset that fits its bits.
            fast = plain and (not tracked or part.key is not None and offset <= _OFFSET_MASK)
            if fast and alo:
                fast = part.limit is None and part.seeked is None and \
                    part.offsets.emit_next(offset)
            if not fast:  # a translator, a wide id, or an offset with a history
                if self._emit(msg, now):
                    n += 1
                continue
            emit([topic, partition, offset, msg.key(), msg.value()], DEFAULT_STREAM,
                 msg_id=(part.key << _OFFSET_BITS) | offset if tracked else None)
            n += 1
            short += 1
        self.counts["emitted"] += short
        return n

    def _emit(self, msg: Any, now: float) -> bool:
        """Emit the record's tuple if it is due; True if a tuple went out."""
        err = msg.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                self._report(f"consume-{err.code()}", f"{self._where()}: {err.str()} "
                                                      f"(topic {msg.topic()}, partition "
                                                      f"{msg.partition()})")
            return False
        topic = msg.topic()
        partition = msg.partition()
        part = self.parts.get((topic, partition))
        if part is None:
            return False  # fetched before the partition was given up
        offset = msg.offset()
        if self.barrier:
            return self._emit_checkpointed(part, msg, offset)
        if self.guarantee is not PG.AT_LEAST_ONCE:
            return self._emit_untracked(part, msg, offset)
        if part.seeked is not None and offset >= part.seeked:
            part.seeked = None
        offsets = part.offsets
        state = offsets.state(offset)
        retrying = False
        if state == ACKED:
            return False
        if state == EMITTED:
            key = self._key(part, offset)
            if not self.retry.is_ready(key, now):
                return False  # in flight, or its retry is not due
            self.retry.retrying(key)
            retrying = True
        elif part.limit is not None and offset > part.limit:
            return False  # beyond max_uncommitted_offsets: the next poll fetches it again
        msg_id = self._key(part, offset)
        try:
            values, stream = self.config.translate(msg)
        except Exception as e:  # the user's deserializer or translator
            self._bad_record(part, offset, msg_id, e, now)
            return False
        offsets.emitted(offset)
        if values is None:  # nothing to emit: done with, as if acked
            offsets.acked(offset)
            self.retry.forget(msg_id)
            return False
        self.collector.emit(values, stream, msg_id=msg_id)
        self.counts["emitted"] += 1
        if retrying:
            self.counts["retried"] += 1
        return True

    def _emit_untracked(self, part: _Partition, msg: Any, offset: int) -> bool:
        try:
            values, stream = self.config.translate(msg)
        except Exception as e:
            self._skip_bad_record(part, offset, e, f"{self.guarantee.value} retries nothing")
            return False
        if values is None:
            return False
        self.collector.emit(values, stream,
                            msg_id=self._key(part, offset) if self.tracked else None)
        self.counts["emitted"] += 1
        return True

    def _emit_checkpointed(self, part: _Partition, msg: Any, offset: int) -> bool:
        if offset < part.position:
            return False  # fetched before a rewind
        part.position = offset + 1
        try:
            values, stream = self.config.translate(msg)
        except Exception as e:
            self._skip_bad_record(part, offset, e, "a checkpoint's input is never retried")
            return False
        if values is None:
            return False
        self.collector.emit(values, stream)
        self.counts["emitted"] += 1
        return True

    # -- barrier checkpointing (CheckpointedSpout) -----------------------------------------------
    def snapshot(self) -> dict[str, int]:
        """Where each partition restarts: the offset after the last record emitted."""
        snap = {f"{p.topic}/{p.partition}": p.position for p in self.parts.values()}
        # A partition this task does not read now keeps its restored position.
        for key, off in self.restored.items():
            snap.setdefault(key, off)
        self.last_snapshot = snap
        return snap

    def restore(self, offsets: Any) -> None:
        """Rewind every partition to ``offsets`` (None: no checkpoint yet, where the
        first-poll strategy says)."""
        self.restored = {str(k): int(v) for k, v in (offsets or {}).items()}
        self.waiting.clear()
        for part in self.parts.values():
            off = self.restored.get(f"{part.topic}/{part.partition}", -1)
            # No position in the checkpoint: nothing of it was emitted by then, so what was
            # emitted since is abandoned too: back to where the partition started.
            target = off if off >= 0 else part.start
            part.position = off
            try:
                self.consumer.seek(TopicPartition(part.topic, part.partition, target))
            except KafkaException:  # not fetching yet: assign anew at the offset
                self.consumer.incremental_unassign([part.tp])
                self.consumer.incremental_assign([TopicPartition(part.topic, part.partition,
                                                                 target)])
        log.info("topology=%s %s:%d rewound to %s", self.topology_id, self.component,
                 self.task, self.restored or "the first-poll strategy's start")

    def checkpoint_committed(self, txid: int) -> None:
        """A checkpoint completed: its positions become the group's committed offsets (the
        lag monitor's figures, and where a new deployment starts)."""
        snap = self.last_snapshot
        if not snap:
            return
        offsets = []
        for key, off in snap.items():
            topic, _, partition = key.rpartition("/")
            if off >= 0 and (topic, int(partition)) in self.parts:
                offsets.append(TopicPartition(topic, int(partition), off,
                                              metadata=self.commit_metadata))
        if offsets:
            try:
                self.consumer.commit(offsets=offsets, asynchronous=True)
            except KafkaException as e:
                self._report("commit", f"committing checkpoint {txid}'s offsets failed: {e}")

    def _skip_bad_record(self, part: _Partition, offset: int, error: Exception,
                         why: str) -> None:
        if self.config.on_bad_record is OnBadRecord.RAISE:
            raise error
        self.counts["bad_records"] += 1
        self._report("bad-record", f"record {part.topic}/{part.partition}@{offset} could not "
                                   f"be read ({type(error).__name__}: {error}); skipped ({why})")

    def _bad_record(self, part: _Partition, offset: int, msg_id: Any, error: Exception,
                    now: float) -> None:
        if self.config.on_bad_record is OnBadRecord.RAISE:
            raise error
        self.counts["bad_records"] += 1
        part.offsets.emitted(offset)
        retried = self.retry.schedule(msg_id, now)
        fate = "failed; retried on the retry schedule" if retried else \
            "failed past max_retries; skipped (acked)"
        self._report("bad-record", f"record {part.topic}/{part.partition}@{offset} could not "
                                   f"be read ({type(error).__name__}: {error}): {fate}")
        if not retried:
            part.offsets.acked(offset)
            self.counts["max_retries_reached"] += 1

    # -- acks and fails -------------------------------------------------------------------------
    def _key(self, part: _Partition, offset: int) -> Any:
        if part.key is not None and offset <= _OFFSET_MASK:
            return (part.key << _OFFSET_BITS) | offset
        return (part.topic, part.partition, offset)

    def _decode(self, msg_id: Any) -> tuple[_Partition | None, int]:
        if type(msg_id) is int:
            return self.by_key.get(msg_id >> _OFFSET_BITS), msg_id & _OFFSET_MASK
        topic, partition, offset = msg_id
        return self.parts.get((topic, partition)), offset

    def ack(self, msg_id: Any) -> None:
        if self.guarantee is not PG.AT_LEAST_ONCE:
            self.counts["acked"] += 1
            return
        if type(msg_id) is int:  # _decode, inline: once per record
            part, offset = self.by_key.get(msg_id >> _OFFSET_BITS), msg_id & _OFFSET_MASK
        else:
            part, offset = self._decode(msg_id)
        if part is None:
            return  # its partition was given up: its new owner reads it again
        if part.offsets.acked(offset):
            self.counts["acked"] += 1
            if self.retry.fails:
                self.retry.forget(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.counts["failed"] += 1
        if self.guarantee is not PG.AT_LEAST_ONCE:
            return
        part, offset = self._decode(msg_id)
        if part is None or part.offsets.state(offset) != EMITTED:
            return
        if not self.retry.schedule(msg_id, time.monotonic()):
            self.counts["max_retries_reached"] += 1
            log.warning("topology=%s %s:%d record %s/%d@%d failed more than max_retries=%s "
                        "times: acked without success", self.topology_id, self.component,
                        self.task, part.topic, part.partition, offset,
                        self.config.retry.max_retries)
            part.offsets.acked(offset)

    # -- assignment -------------------------------------------------------------------------------
    def _apply_assignment(self, owned: list[tuple[str, int]],
                          committed: dict[tuple[str, int], tuple[int, str | None]]) -> None:
        owned_set = set(owned)
        lost = [tp for tp in self.parts if tp not in owned_set]
        gained = [tp for tp in owned if tp not in self.parts]
        if lost:
            self._commit(sync=True, only=lost)
            gone = [self.parts.pop(tp) for tp in lost]
            for part in gone:
                if part.key is not None:
                    self.by_key.pop(part.key, None)
                if self.metrics is not None:
                    self.metrics.remove_family_gauges("kafka_", topic=part.topic,
                                                      partition=str(part.partition))
            lost_set = set(lost)
            self.retry.forget_where(lambda k: (self._decode(k)[0] is None) if type(k) is int
                                    else (k[0], k[1]) in lost_set)
            self.waiting = deque(m for m in self.waiting
                                 if (m.topic(), m.partition()) not in lost_set)
            self.consumer.incremental_unassign([p.tp for p in gone])
        assign = []
        for topic, partition in gained:
            offset, metadata = committed.get((topic, partition), (-1, None))
            start, base = self._first_offset(offset, metadata)
            restored = self.restored.get(f"{topic}/{partition}", -1) if self.barrier else -1
            if restored >= 0:  # the checkpoint's position wins over commits and strategies
                start = base = restored
            idx = self.topic_index.get(topic)
            key = (idx << _PARTITION_BITS) | partition \
                if idx is not None and partition < (1 << _PARTITION_BITS) else None
            part = _Partition(topic, partition, key, PartitionOffsets(base))
            part.committed = offset if offset >= 0 else -1
            part.position = start if start >= 0 else -1
            part.start = start
            self.parts[(topic, partition)] = part
            self._register_metrics(part)
            if key is not None:
                self.by_key[key] = part
            assign.append(TopicPartition(topic, partition, start))
        if assign:
            self.consumer.incremental_assign(assign)
        if lost or gained:
            log.info("topology=%s %s:%d task %d of %d now reads %s (gained %s, lost %s)",
                     self.topology_id, self.component, self.task, self.task_index + 1,
                     self.n_tasks, _tps(owned), _tps(gained), _tps(lost))

    def _register_metrics(self, part: _Partition) -> None:
        """Storm's per-partition Kafka offset metrics, as ``squall_kafka_*`` gauges."""
        if self.metrics is None:
            return
        tp = (part.topic, part.partition)
        refresher = self.refresher

        def mark(i: int) -> int:
            return refresher.watermarks[tp][i]
        labels = {"topic": part.topic, "partition": str(part.partition)}
        gauges = {
            "kafka_log_start_offset": lambda: mark(0),
            "kafka_log_end_offset": lambda: mark(1),
            "kafka_records_in_partition": lambda: mark(1) - mark(0),
            "kafka_committed_offset": lambda: _known(part.committed),
            "kafka_lag": lambda: mark(1) - _known(part.committed),
            # The window's last offset (below the window: the commit covers it).
            "kafka_emitted_offset": lambda: _known(part.offsets.base
                                                   + len(part.offsets.states) - 1),
        }
        for family, fn in gauges.items():
            self.metrics.family_gauge(family, labels, fn)

    def _first_offset(self, committed: int, metadata: str | None) -> tuple[int, int]:
        """Where a gained partition starts (Storm's doSeek), and the offsets' base."""
        strategy = self.config.first_poll_offset_strategy
        earliest = strategy in (FirstPollOffsetStrategy.EARLIEST,
                                FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST)
        if committed >= 0:
            if self._committed_by_this_topology(metadata) or strategy in (
                    FirstPollOffsetStrategy.UNCOMMITTED_EARLIEST,
                    FirstPollOffsetStrategy.UNCOMMITTED_LATEST):
                return committed, committed
        # The offsets' window starts at the first record emitted (PartitionOffsets rebases).
        return (OFFSET_BEGINNING if earliest else OFFSET_END), 0

    def _committed_by_this_topology(self, metadata: str | None) -> bool:
        try:
            return json.loads(metadata or "")["topologyId"] == self.topology_id
        except (ValueError, KeyError, TypeError):
            return False

    # -- commits -------------------------------------------------------------------------------------
    def _commit(self, sync: bool, only: list[tuple[str, int]] | None = None) -> None:
        if self.barrier:
            return  # checkpoint_committed commits what a completed checkpoint holds
        if self.guarantee is PG.AT_LEAST_ONCE:
            offsets = []
            for tp in (only if only is not None else list(self.parts)):
                part = self.parts.get(tp)
                nxt = part.offsets.next_commit_offset() if part is not None else None
                if nxt is not None:
                    offsets.append(TopicPartition(part.topic, part.partition, nxt,
                                                  metadata=self.commit_metadata))
        elif self.guarantee is PG.NO_GUARANTEE:
            # Only the partitions asked for leave the table: a partition given up commits
            # its position without dropping the others'.
            chosen = {tp: self._consumed.pop(tp) for tp in list(self._consumed)
                      if only is None or tp in only}
            offsets = [TopicPartition(t, p, o, metadata=self.commit_metadata)
                       for (t, p), o in chosen.items() if (t, p) in self.parts]
        else:
            return  # AT_MOST_ONCE committed at each poll
        if not offsets:
            return
        try:
            if sync:
                self._committed(self.consumer.commit(offsets=offsets, asynchronous=False))
            else:
                self.consumer.commit(offsets=offsets, asynchronous=True)
        except KafkaException as e:
            self._report("commit", f"committing offsets of {self._where()} failed: {e}; "
                                   "the next commit carries them")

    def _commit_consumed(self, msgs: list) -> None:
        positions = self._consumed_positions(msgs, {})
        offsets = [TopicPartition(t, p, o, metadata=self.commit_metadata)
                   for (t, p), o in positions.items()]
        try:
            self._committed(self.consumer.commit(offsets=offsets, asynchronous=False))
        except KafkaException as e:
            self._report("commit", f"committing offsets of {self._where()} failed: {e}")

    @staticmethod
    def _consumed_positions(msgs: list, into: dict) -> dict:
        for m in msgs:
            if m.error() is None:
                key = (m.topic(), m.partition())
                if m.offset() + 1 > into.get(key, -1):
                    into[key] = m.offset() + 1
        return into

    def _on_commit(self, err: Any, partitions: list) -> None:
        # librdkafka calls this from consume() on this thread: a commit finished.
        if err is not None:
            self._report("commit", f"committing offsets of {self._where()} failed: {err}; "
                                   "the next commit carries them")
            return
        self._committed(partitions)

    def _committed(self, partitions: list | None) -> None:
        self.counts["commits"] += 1
        if self.guarantee is not PG.AT_LEAST_ONCE or self.barrier:
            for tp in partitions or ():
                part = self.parts.get((tp.topic, tp.partition))
                if part is not None and tp.error is None:
                    part.committed = tp.offset
            return
        for tp in partitions or ():
            if tp.error is not None:
                self._report("commit", f"committing {tp.topic}/{tp.partition} failed: "
                                       f"{tp.error}")
                continue
            part = self.parts.get((tp.topic, tp.partition))
            if part is not None:
                part.offsets.committed(tp.offset)
                part.committed = tp.offset

    # -- errors -------------------------------------------------------------------------------------
    def _on_client_error(self, err: Any) -> None:
        # librdkafka's own errors (all brokers down, authentication, ...), from consume().
        self._report(f"client-{err.code()}", f"{self._where()}: {err.str()}")

    def _report(self, kind: str, text: str) -> None:
        now = time.monotonic()
        if now - self.reported.get(kind, -_REPORT_EVERY) < _REPORT_EVERY:
            log.debug("%s", text)
            return
        self.reported[kind] = now
        self.collector.report_error(f"KafkaSpout: {text}")

    def _where(self) -> str:
        return f"bootstrap.servers={self.servers}"


class _Refresher:
    """The spout's helper thread: topic metadata, this task's partitions and their
    committed offsets, at every partition refresh, with bounded calls. It hands results
    to the spout's thread through two deques (appends and pops are atomic)."""

    def __init__(self, spout: KafkaSpout, props: dict):
        self.spout = spout
        c = spout.config
        self.period = c.partition_refresh_period_ms / 1000
        self.timeout = c.request_timeout_secs
        self.props = {k: v for k, v in props.items() if k not in ("on_commit", "error_cb")}
        self.updates: deque = deque()
        self.errors: deque = deque()
        self.published: list[tuple[str, int]] | None = None
        #: (topic, partition) -> (log start, log end) of this task's partitions, read at
        #: every refresh (the offset metrics); replaced whole, never changed in place.
        self.watermarks: dict[tuple[str, int], tuple[int, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"kafka-refresh-{spout.component}:{spout.task}")
        self._pattern = re.compile(c.topic_pattern) if c.topic_pattern is not None else None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.timeout + 1)

    def _run(self) -> None:
        client = Consumer(self.props)
        try:
            while not self._stop.is_set():
                try:
                    self.refresh(client)
                except KafkaException as e:
                    self.errors.append(("metadata", f"cannot read topic metadata from "
                                                    f"{self.spout._where()}: {e.args[0]}"))
                except Exception as e:  # a bug here must not end the refreshes silently
                    log.exception("Kafka partition refresh failed")
                    self.errors.append(("refresh", f"partition refresh failed: {e!r}"))
                self._stop.wait(self.period)
        finally:
            client.close()

    def refresh(self, client: Any) -> None:
        c = self.spout.config
        md = client.list_topics(timeout=self.timeout)
        if c.topics is not None:
            names = [t for t in c.topics if t in md.topics and md.topics[t].error is None]
            missing = [t for t in c.topics if t not in names]
            if missing:
                self.errors.append(("unknown-topic", f"topic(s) {', '.join(missing)} not found "
                                                     f"on {self.spout._where()}: create them, "
                                                     "or correct KafkaSpoutConfig.topics"))
        else:
            names = sorted(t for t in md.topics if self._pattern.fullmatch(t)
                           and not t.startswith("__"))
        every = [(t, p) for t in names for p in md.topics[t].partitions]
        owned = assign_round_robin(every, self.spout.task_index, self.spout.n_tasks) \
            if every else []
        self.read_watermarks(client, owned)
        if owned == self.published:
            return
        gained = [tp for tp in owned if tp not in set(self.published or ())]
        committed: dict[tuple[str, int], tuple[int, str | None]] = {}
        if gained:
            got = client.committed([TopicPartition(t, p) for t, p in gained],
                                   timeout=self.timeout)
            for tp in got:
                if tp.error is not None:
                    raise KafkaException(tp.error)
                committed[(tp.topic, tp.partition)] = (tp.offset, tp.metadata)
        self.updates.append((owned, committed))
        self.published = owned


    def read_watermarks(self, client: Any, owned: list[tuple[str, int]]) -> None:
        marks = {}
        for t, p in owned:
            try:
                marks[(t, p)] = client.get_watermark_offsets(TopicPartition(t, p),
                                                             timeout=self.timeout, cached=False)
            except KafkaException:
                continue  # the metric goes without this partition until the next refresh
        self.watermarks = marks


def _known(offset: int) -> int:
    if offset < 0:
        raise ValueError("no offset yet")  # the gauge is left out of the snapshot
    return offset


def _tps(tps: list[tuple[str, int]]) -> str:
    return "[" + ", ".join(f"{t}/{p}" for t, p in tps) + "]" if tps else "[]"
