# cython: annotation_typing=False
"""An executor's receive queue with high/low water marks, and the worker's backpressure state.

Producers (other executors of the worker, the receive thread) never block: a
put appends to a deque and, when the queue crosses its high water mark, marks
the executor congested. The consumer clears the mark once it drains below the
low water mark. While any executor of the topology is congested, spouts stop
calling ``next_tuple`` (they keep processing acks), so the tuples in flight,
and with them every queue, stay bounded; nothing ever waits on a full queue,
so cycles (spout -> acker -> spout) cannot deadlock. This is JStorm's
water-mark backpressure with Storm 1.x's topology-wide throttle.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Callable


class Backpressure:
    """Which executors here, and which other workers, are congested. Thread-safe."""

    def __init__(self, enabled: bool = True,
                 on_change: Callable[[bool], None] | None = None):
        self.enabled = enabled
        #: False under topology.backpressure.via.master: local congestion pauses only the
        #: spouts upstream of it (the worker sets their executors' ``held_until``).
        self.pause_on_local = True
        self._lock = threading.Lock()
        self._local = 0
        self._remote: set[str] = set()
        #: Read without a lock on the spouts' hot path (a bool read is atomic).
        self.throttled = False
        self.on_change = on_change

    @property
    def local_congested(self) -> bool:
        return self._local > 0

    def _recompute(self) -> None:
        self.throttled = self.enabled and ((self.pause_on_local and self._local > 0) or
                                           bool(self._remote))

    def local(self, congested: bool) -> None:
        with self._lock:
            before = self._local > 0
            self._local += 1 if congested else -1
            after = self._local > 0
            self._recompute()
        if before != after and self.on_change is not None:
            self.on_change(after)

    def remote(self, worker_id: str, congested: bool) -> None:
        with self._lock:
            if congested:
                self._remote.add(worker_id)
            else:
                self._remote.discard(worker_id)
            self._recompute()

    def remote_congested(self) -> set[str]:
        with self._lock:
            return set(self._remote)


class SleepFlag:
    """Whether a queue's consumer sleeps: set by the consumer around its wait, read by every
    put (a C field compiled, so a put reads it without an attribute lookup)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


class Version:
    """A number one thread bumps and others compare, as a C field compiled: the worker's
    assignment version, which a Transfer's per-task cache of outboxes follows."""

    __slots__ = ("n",)

    def __init__(self) -> None:
        self.n = 0


class ThreadWaker:
    """Wakes one sleeping consumer thread (an executor with its own thread)."""

    def __init__(self) -> None:
        self.flag = SleepFlag()
        self.event = threading.Event()

    @property
    def sleeping(self) -> bool:
        return self.flag.on

    @sleeping.setter
    def sleeping(self, on: bool) -> None:
        self.flag.on = on

    def wake(self) -> None:
        self.event.set()

    def wait(self, timeout: float | None, ready: Any) -> None:
        """Sleep until ``wake`` or ``timeout``, unless ``ready()`` already holds."""
        self.sleeping = True
        if not ready():
            self.event.wait(timeout)
        self.sleeping = False
        self.event.clear()


class InQueue:
    """An executor's receive queue: many producers, one consumer.

    ``waker`` is whoever consumes it: a :class:`ThreadWaker` for an executor
    with its own thread, or the worker's event loop for shared executors; either has a
    :class:`SleepFlag` ``flag``, on while it sleeps.
    Thread-safety: ``put`` may be called from any thread; ``drain_done`` only
    from the consumer.
    """

    def __init__(self, capacity: int, high: float, low: float, bp: Backpressure,
                 waker: Any):
        self.dq: deque[Any] = deque()
        #: dq.append, bound once: a put calls it without looking the method up.
        self._append = self.dq.append
        self.high = max(1, int(capacity * high))
        self.low = int(capacity * low)
        self.bp = bp
        self.congested = False
        self.waker = waker
        self.flag = waker.flag
        #: Largest length seen (for stats and the bounded-memory test).
        self.max_len = 0
        #: Called (in the producer's thread) when the queue becomes congested: backpressure
        #: through the master pauses this worker's upstream spouts at once with it.
        self.on_congested: Callable[[], None] | None = None
        #: Consumers holding back tuples they took (barrier alignment): congested meanwhile.
        self.pins = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.dq)

    def put(self, item: Any) -> None:
        self._append(item)
        if len(self.dq) > self.high:
            self._over()
        if self.flag.on:
            self.waker.wake()

    def _over(self) -> None:
        n = len(self.dq)
        if n > self.max_len:
            self.max_len = n
        if not self.congested:
            with self._lock:
                if not self.congested:
                    self.congested = True
                    self.bp.local(True)
                    if self.on_congested is not None:
                        self.on_congested()

    def drain_done(self) -> None:
        """Consumer: after a batch, lift congestion once below the low water mark."""
        n = len(self.dq)
        if n > self.max_len:
            self.max_len = n
        if self.congested and n <= self.low and not self.pins:
            with self._lock:
                if self.congested:
                    self.congested = False
                    self.bp.local(False)

    def pin(self, on: bool) -> None:
        """Consumer: count this queue congested whatever its length while a consumer holds
        back as many tuples as it may queue (``on``), then lift that as drain_done does (at
        once: with the spouts paused, no batch may come to call it)."""
        self.pins += 1 if on else -1
        if on:
            self._over()
        else:
            self.drain_done()

    def wake(self) -> None:
        self.waker.wake()
