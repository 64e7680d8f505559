# cython: annotation_typing=False
"""PendingMap: the spout's pending trees, ``root -> (msg_id, emit time)``, in flat arrays.

A spout task remembers each tree it emitted until the acker acks or fails it, or it
times out. As a :class:`~squall.acker.rotating_map.RotatingMap` of tuples that costs
about 218 bytes a tree (the root int, a 2-tuple, a float, the dict slot). Here each
bucket is an open-addressing table over ``array`` columns: the 64-bit root, the emit time
as a double, and the message id inline when it is an int that fits in 64 bits (the usual
case: an offset, a sequence number); any other message id is kept by reference in a
column that exists only once a bucket has seen one. That is 24 bytes a slot at most 70%
full: 34-69 bytes a tree with int ids.

Semantics are RotatingMap's, so the two are tested against each other: ``put`` moves a
key to the newest bucket (resetting its timeout), ``rotate`` drops the oldest and calls
``expired(root, (msg_id, t0))`` for each of its entries. An int message id comes back
equal, not identical (it was stored by value). Keys are the spout's random non-zero
64-bit roots; 0 and 1 mark empty and deleted slots, so those two keys live in a side
dict. Not thread-safe: one owner (a spout task).
"""

from __future__ import annotations

from array import array
from collections import deque
from typing import Any, Callable, Iterator

from .compact_map import RESERVED, OpenTable, age_odd

_MIN_CAP = 256
_I64_MIN = -(1 << 63)
_I64_MAX = (1 << 63) - 1
_KEY_END = 1 << 64

try:
    import cython
    _COMPILED = cython.compiled
except ImportError:  # installed without Cython: this source runs as plain Python
    _COMPILED = False


def _wire_key(key: Any) -> int:
    """A root off the wire as a table key: the int itself when it is one of 64 bits above
    the reserved keys, else 0 (the side dict answers for it)."""
    if _COMPILED:
        return _table_key(key)  # noqa: F821
    return key if type(key) is int and RESERVED < key < _KEY_END else 0


class PendingBucket(OpenTable):
    """One table of root -> (msg_id, t0)."""

    __slots__ = ("ids", "times", "objs")

    def __init__(self, cap: int = _MIN_CAP):
        self._init_keys(cap)
        self.ids = array("q", bytes(8 * cap))
        self.times = array("d", bytes(8 * cap))
        #: Message ids that are not 64-bit ints, by slot; None until the first one.
        self.objs: list | None = None

    def insert(self, key: int, msg_id: Any, t0: float) -> None:
        """Add ``key`` (known absent)."""
        i = self._claim(key)
        self.times[i] = t0
        if type(msg_id) is int and _I64_MIN <= msg_id <= _I64_MAX:
            self.ids[i] = msg_id
            if self.objs is not None:
                self.objs[i] = None
        else:
            if self.objs is None:
                self.objs = [None] * (self.mask + 1)
            self.objs[i] = msg_id

    def entry(self, i: int) -> tuple[Any, float]:
        objs = self.objs
        if objs is not None:
            o = objs[i]
            if o is not None:
                return o, self.times[i]
        return self.ids[i], self.times[i]

    def delete(self, i: int) -> None:
        OpenTable.delete(self, i)
        if self.objs is not None:
            self.objs[i] = None  # drop the reference now, not at the next resize

    def _resize(self) -> None:
        keys, ids, times, objs = self.keys, self.ids, self.times, self.objs
        self.__init__(self._grown_cap())  # type: ignore[misc]
        for i in range(len(keys)):  # by index: a C loop in the compiled build
            if keys[i] > RESERVED:
                o = None if objs is None else objs[i]
                self.insert(keys[i], ids[i] if o is None else o, times[i])

    def items(self) -> Iterator[tuple[int, tuple[Any, float]]]:
        for i, k in enumerate(self.keys):
            if k > RESERVED:
                yield k, self.entry(i)

    def nbytes(self) -> int:
        return (self.mask + 1) * (24 if self.objs is None else 32)


class PendingMap:
    """A spout task's pending trees with RotatingMap's interface; values are (msg_id, t0).

    Example::

        pending = PendingMap(3, expired=lambda root, e: spout.fail(e[0]))
        pending.add(root, msg_id, time.monotonic())
        msg_id, t0 = pending.pop(root)
        pending.rotate()   # on every tick
    """

    def __init__(self, num_buckets: int = 3,
                 expired: Callable[[int, tuple[Any, float]], None] | None = None):
        if num_buckets < 2:
            raise ValueError(f"num_buckets must be >= 2, got {num_buckets}")
        #: Newest bucket first; buckets[-1] is death row.
        self.buckets: deque[PendingBucket] = deque(PendingBucket()
                                                   for _ in range(num_buckets))
        #: Keys 0 and 1 (reserved in the tables): key -> [bucket age, (msg_id, t0)].
        self._odd: dict[int, list] = {}
        self.expired = expired

    def __len__(self) -> int:
        n = len(self._odd)  # a loop, not sum() over a generator: the executor asks per call
        for b in self.buckets:
            n += b.live
        return n

    def _locate(self, key: int) -> tuple[PendingBucket | None, int]:
        for b in self.buckets:
            i = b.find(key)
            if i >= 0:
                return b, i
        return None, -1

    def __contains__(self, key: object) -> bool:
        if type(key) is not int or key < 0 or key >> 64:
            return False
        if key <= RESERVED:
            return key in self._odd
        return self._locate(key)[0] is not None

    def add(self, key: int, msg_id: Any, t0: float) -> None:
        """Remember a fresh root (known absent: a new random id) in the newest bucket."""
        if key <= RESERVED:
            self._odd[key] = [0, (msg_id, t0)]
        else:
            b = self.buckets[0]  # (typed: its insert a C call)
            b.insert(key, msg_id, t0)

    def put_new(self, key: int, value: tuple[Any, float]) -> None:
        self.add(key, value[0], value[1])

    def put(self, key: int, value: tuple[Any, float]) -> None:
        """Set ``key`` in the newest bucket, removing it from older ones (resets its timeout)."""
        if key <= RESERVED:
            self._odd[key] = [0, value]
            return
        b, i = self._locate(key)
        if b is not None:
            b.delete(i)
        self.buckets[0].insert(key, value[0], value[1])

    def get(self, key: int, default: Any = None) -> Any:
        k = _wire_key(key)
        if k <= RESERVED:  # no 64-bit table key: only the side dict may have it
            e = self._odd.get(key)
            return default if e is None else e[1]
        b, i = self._locate(k)
        return default if b is None else b.entry(i)

    def pop(self, key: int, default: Any = None) -> Any:
        """Remove ``key`` and return its (msg_id, t0), or ``default``."""
        # (an ack's root comes from the wire: anything but a table key is the side dict's)
        k = _wire_key(key)
        if k <= RESERVED:
            e = self._odd.pop(key, None)
            return default if e is None else e[1]
        buckets = self.buckets
        for j in range(len(buckets)):  # by index: no iterator (3 buckets, the first usual)
            b = buckets[j]
            i = b.find(k)
            if i >= 0:
                e = b.entry(i)
                b.delete(i)
                return e
        return default

    remove = pop

    def rotate(self) -> dict[int, tuple[Any, float]]:
        """Expire the oldest bucket: call ``expired`` for each entry and return them."""
        dead_bucket = self.buckets.pop()
        self.buckets.appendleft(PendingBucket())
        dead = dict(dead_bucket.items())
        dead.update(age_odd(self._odd, len(self.buckets)))
        if self.expired is not None:
            for k, v in dead.items():
                self.expired(k, v)
        return dead

    def items(self) -> Iterator[tuple[int, tuple[Any, float]]]:
        for b in self.buckets:
            yield from b.items()
        for k, e in self._odd.items():
            yield k, e[1]

    def nbytes(self) -> int:
        """Bytes held by the tables' arrays."""
        return sum(b.nbytes() for b in self.buckets)
