"""What a Kafka spout may commit, when it retries, and which partitions it owns: pure logic.

The three decisions of storm-kafka-client's spout, without a consumer, a clock or a
socket, so each is tested by feeding events (tests/unit/test_kafka_offsets.py):

- :class:`PartitionOffsets` is Storm's ``OffsetManager``: the offsets of one partition
  emitted and acked since the last commit, and the next offset that may be committed,
  which is the end of the contiguous run of acked offsets. Offsets the spout never saw
  (compacted away, transaction markers, aborted records under ``read_committed``) are
  stepped over when the next offset it did emit is acked, as Storm does. One byte per
  offset between the commit and the newest emit, not a set entry: the spout's memory per
  in-flight offset stays small.
- :class:`RetrySchedule` is ``KafkaSpoutRetryExponentialBackoff``: a failed message is
  due again after the initial delay, then the period times 2^(fails - 1), capped at the
  maximum delay, until it has failed more than the maximum retries.
- :func:`assign_round_robin` is ``RoundRobinManualPartitioner``: every partition of the
  subscribed topics, sorted, dealt to the spout's tasks by index.
"""

from __future__ import annotations

import heapq
import re
from typing import Hashable, Iterable, Sequence

#: States of an offset in a :class:`PartitionOffsets` window.
NOT_EMITTED, EMITTED, ACKED = 0, 1, 2
# The prefix a commit may pass over: acked offsets and offsets never emitted.
_COMMITTABLE = re.compile(rb"[\x00\x02]*")


class PartitionOffsets:
    """Storm's ``OffsetManager`` for one partition.

    Example::

        p = PartitionOffsets(committed=100)
        p.emitted(100); p.emitted(101); p.emitted(102)
        p.acked(100); p.acked(102)
        p.next_commit_offset()   # 101: offset 101 is still in flight
        p.acked(101)
        p.next_commit_offset()   # 103
        p.committed(103)
    """

    __slots__ = ("base", "states", "uncommitted")

    def __init__(self, committed: int):
        #: The committed offset: the first offset not yet processed.
        self.base = committed
        #: State of offsets base, base + 1, ... (NOT_EMITTED, EMITTED, ACKED).
        self.states = bytearray()
        #: Offsets emitted and not yet committed (Storm's getNumUncommittedOffsets).
        self.uncommitted = 0

    def emitted(self, offset: int) -> None:
        """The record at ``offset`` was emitted (again, for a retry: no change)."""
        idx = offset - self.base
        if idx < 0:
            raise ValueError(f"offset {offset} is below the committed offset {self.base}: it "
                             "was committed already and must not be emitted again")
        states = self.states
        if idx >= len(states):
            if not self.uncommitted:
                # Nothing in flight: what lies between is gone from the log (retention,
                # compaction), so the window starts here rather than holding a byte for each.
                self.base, self.states, idx = offset, bytearray(), 0
                states = self.states
            states.extend(bytes(idx + 1 - len(states)))
        if states[idx] == NOT_EMITTED:
            states[idx] = EMITTED
            self.uncommitted += 1

    def emit_next(self, offset: int) -> bool:
        """The usual emit, in one step: if ``offset`` is the one after the newest tracked
        (the committed offset when nothing is), mark it emitted and answer True; else
        change nothing and answer False (:meth:`state` and :meth:`emitted` decide)."""
        states = self.states
        if offset - self.base != len(states):
            return False
        states.append(EMITTED)
        self.uncommitted += 1
        return True

    def acked(self, offset: int) -> bool:
        """The record at ``offset`` is fully processed; False if it was not in flight."""
        idx = offset - self.base
        if 0 <= idx < len(self.states) and self.states[idx] == EMITTED:
            self.states[idx] = ACKED
            return True
        return False

    def state(self, offset: int) -> int:
        """NOT_EMITTED, EMITTED or ACKED (committed offsets count as ACKED)."""
        idx = offset - self.base
        if idx < 0:
            return ACKED
        return self.states[idx] if idx < len(self.states) else NOT_EMITTED

    def next_commit_offset(self) -> int | None:
        """The offset to commit (one past the contiguous acked run), or None: nothing new."""
        states = self.states
        end = _COMMITTABLE.match(states).end()
        last = states.rfind(ACKED, 0, end)
        return None if last < 0 else self.base + last + 1

    def committed(self, offset: int) -> None:
        """``offset`` was committed: forget what lies below it."""
        n = offset - self.base
        if n <= 0:
            return
        states = self.states
        gone = states[:n]
        self.uncommitted -= len(gone) - gone.count(NOT_EMITTED)
        del states[:n]
        self.base = offset

    def nth_uncommitted(self, n: int) -> int | None:
        """The offset of the ``n``-th (1-based) emitted, uncommitted offset (Storm's
        getNthUncommittedOffsetAfterCommittedOffset), or None if there are fewer."""
        if n > self.uncommitted:
            return None
        states = self.states
        pos, seen = _next_emitted(states, 0), 0
        while True:
            gap = states.find(NOT_EMITTED, pos)
            run_end = len(states) if gap < 0 else gap
            if seen + (run_end - pos) >= n:
                return self.base + pos + (n - seen) - 1
            seen += run_end - pos
            pos = _next_emitted(states, run_end)

    def __len__(self) -> int:
        return self.uncommitted

    def __repr__(self) -> str:
        return (f"PartitionOffsets(committed={self.base}, uncommitted={self.uncommitted}, "
                f"next_commit={self.next_commit_offset()})")


def _next_emitted(states: bytearray, pos: int) -> int:
    a, b = states.find(EMITTED, pos), states.find(ACKED, pos)
    return min(x for x in (a, b) if x >= 0)


class RetrySchedule:
    """Storm's ``KafkaSpoutRetryExponentialBackoff`` over keys (a message's partition and
    offset); times are seconds on a clock the caller passes in.

    ``schedule(key, now)`` counts a failure and answers whether the key will be retried
    (False once it failed more than ``max_retries`` times: the spout then acks it, as
    Storm does, so the partition's commits go on). A retried message keeps its count
    until :meth:`forget` (acked, or its partition lost).
    """

    def __init__(self, initial_delay: float = 0.0, delay_period: float = 0.002,
                 max_retries: int | None = None, max_delay: float = 10.0):
        if initial_delay < 0 or delay_period < 0 or max_delay < 0:
            raise ValueError("retry delays must not be negative")
        if max_retries is not None and max_retries < 0:
            raise ValueError(f"max_retries must be >= 0 or None (no bound), got {max_retries}")
        self.initial_delay = initial_delay
        self.delay_period = delay_period
        self.max_retries = max_retries
        self.max_delay = max_delay
        #: key -> failures so far.
        self.fails: dict[Hashable, int] = {}
        #: key -> when it is due; scheduled keys only.
        self.due: dict[Hashable, float] = {}
        self._heap: list[tuple[float, int, Hashable]] = []
        self._seq = 0

    def delay(self, fails: int) -> float:
        """Seconds from the ``fails``-th failure to the retry."""
        d = self.initial_delay if fails == 1 else self.delay_period * 2.0 ** (fails - 1)
        return min(d, self.max_delay)

    def schedule(self, key: Hashable, now: float) -> bool:
        fails = self.fails.get(key, 0) + 1
        if self.max_retries is not None and fails > self.max_retries:
            self.forget(key)
            return False
        self.fails[key] = fails
        when = now + self.delay(fails)
        self.due[key] = when
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, key))
        return True

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self.due

    def is_ready(self, key: Hashable, now: float) -> bool:
        when = self.due.get(key)
        return when is not None and when <= now

    def retrying(self, key: Hashable) -> None:
        """The key is emitted again: no longer scheduled, its failures still counted."""
        self.due.pop(key, None)

    def forget(self, key: Hashable) -> None:
        """The message was acked (or its partition lost): drop everything about it."""
        self.fails.pop(key, None)
        self.due.pop(key, None)

    def forget_where(self, pred) -> None:
        """Forget every key for which ``pred(key)`` holds (a lost partition's)."""
        for key in [k for k in self.fails if pred(k)]:
            self.forget(key)

    def ready(self, now: float) -> list[Hashable]:
        """Keys due by ``now``, earliest first."""
        heap = self._heap
        # Stale heap entries (rescheduled, retried, forgotten) are dropped as they surface.
        while heap and self.due.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        if not heap or heap[0][0] > now:
            return []
        return sorted((k for k, when in self.due.items() if when <= now),
                      key=lambda k: self.due[k])

    def next_due(self) -> float | None:
        return min(self.due.values()) if self.due else None

    def __len__(self) -> int:
        return len(self.due)


def assign_round_robin(partitions: Iterable[tuple[str, int]], task_index: int,
                       n_tasks: int) -> list[tuple[str, int]]:
    """The (topic, partition)s task ``task_index`` of ``n_tasks`` owns: every partition
    sorted by topic and number, the i-th to task i mod n (Storm's
    RoundRobinManualPartitioner)."""
    if not 0 <= task_index < n_tasks:
        raise ValueError(f"task index {task_index} is not in 0..{n_tasks - 1}")
    ordered: Sequence[tuple[str, int]] = sorted(set(partitions))
    return [tp for i, tp in enumerate(ordered) if i % n_tasks == task_index]
