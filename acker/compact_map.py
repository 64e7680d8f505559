# cython: annotation_typing=False
"""CompactRotatingMap: RotatingMap's semantics for the acker, in flat arrays.

A pending tuple tree is one 64-bit root id, one 64-bit XOR value and 32 bits
of metadata (the spout task and a failed flag). In a dict that costs ~114
bytes a tree (two int objects plus the slot); here each bucket is an
open-addressing hash table over three ``array`` columns (8 + 8 + 4 bytes a
slot, at most 70% full), about 30-60 bytes a tree. Buckets rotate exactly
like :class:`~squall.acker.rotating_map.RotatingMap`'s: ``put`` moves a key to
the newest bucket, ``rotate`` drops the oldest; a new bucket starts small and
grows with its load, so memory follows the number of pending trees.

Keys are the random 64-bit root ids; 0 and 1 mark empty and deleted slots,
so those two keys (never drawn by a spout) live in a small side dict.
Not thread-safe: one owner (an acker task).
"""

from __future__ import annotations

from array import array
from collections import deque
from typing import Any, Iterator

_EMPTY = 0
_TOMB = 1
#: The largest key the tables reserve (0 marks an empty slot, 1 a deleted one): keys up to
#: it live in a side dict (C constants in the compiled build; this one is for other modules).
RESERVED = _TOMB
_MAX_LOAD = 0.7
_MIN_CAP = 1024


def age_odd(odd: dict[int, list], n: int) -> list[tuple[int, Any]]:
    """One rotation for the side dict of keys 0 and 1 (``key -> [age, value]``): age every
    entry, remove those ``n`` rotations old and return them as (key, value)."""
    gone = []
    for key in list(odd):
        e = odd[key]
        e[0] += 1
        if e[0] >= n:
            del odd[key]
            gone.append((key, e[1]))
    return gone


class OpenTable:
    """Open addressing (linear probing) over a column of 64-bit keys; subclasses keep their
    values in columns of their own, indexed by the slot (here and in pending_map.py)."""

    __slots__ = ("keys", "mask", "live", "filled", "limit")

    def _init_keys(self, cap: int) -> None:
        self.keys = array("Q", bytes(8 * cap))
        self.mask = cap - 1
        self.live = 0
        self.filled = 0  # live + tombstones
        self.limit = int(cap * _MAX_LOAD)

    def find(self, key: int) -> int:
        """Slot of ``key``, or -1."""
        if not self.live:  # a drained table may be all tombstones: a miss would walk them
            return -1
        # self.keys read in place, not bound to a local: compiled, a local copy of a typed
        # memoryview takes and drops a reference with two atomic operations (half the call).
        mask = self.mask
        i = key & mask
        while True:
            k = self.keys[i]
            if k == key:
                return i
            if k == _EMPTY:
                return -1
            i = (i + 1) & mask

    def _claim(self, key: int) -> int:
        """Put ``key`` (known absent) in a free slot, growing first if full; returns it."""
        if self.filled >= self.limit:
            self._resize()
        mask = self.mask  # (self.keys in place: see find)
        i = key & mask
        while self.keys[i] > _TOMB:
            i = (i + 1) & mask
        if self.keys[i] == _EMPTY:
            self.filled += 1
        self.keys[i] = key
        self.live += 1
        return i

    def delete(self, i: int) -> None:
        mask = self.mask  # (self.keys in place: see find)
        self.live -= 1
        if self.keys[(i + 1) & mask] != _EMPTY:
            self.keys[i] = _TOMB  # a probe for a later key may pass here
            return
        # No probe passes an empty slot: this slot and the tombstones just before it end
        # every chain through them, so they become empty (short chains under churn).
        self.keys[i] = _EMPTY
        self.filled -= 1
        i = (i - 1) & mask
        while self.keys[i] == _TOMB:
            self.keys[i] = _EMPTY
            self.filled -= 1
            i = (i - 1) & mask

    def _grown_cap(self) -> int:
        """Mostly tombstones: rehash at the same size; otherwise double."""
        cap = self.mask + 1
        return cap if self.live < cap * _MAX_LOAD / 2 else cap * 2

    def _resize(self) -> None:
        raise NotImplementedError


class Bucket(OpenTable):
    """One table of key -> (val, meta)."""

    __slots__ = ("vals", "meta")

    def __init__(self, cap: int = _MIN_CAP):
        self._init_keys(cap)
        self.vals = array("Q", bytes(8 * cap))
        self.meta = array("I", bytes(4 * cap))

    def insert(self, key: int, val: int, meta: int) -> int:
        """Add ``key`` (known absent); returns its slot."""
        i = self._claim(key)
        self.vals[i] = val
        self.meta[i] = meta
        return i

    def _resize(self) -> None:
        keys, vals, meta = self.keys, self.vals, self.meta
        self.__init__(self._grown_cap())  # type: ignore[misc]
        for i in range(len(keys)):  # by index: a C loop in the compiled build
            if keys[i] > _TOMB:
                self.insert(keys[i], vals[i], meta[i])

    def items(self) -> Iterator[tuple[int, int, int]]:
        for k, v, m in zip(self.keys, self.vals, self.meta):
            if k > _TOMB:
                yield k, v, m

    def nbytes(self) -> int:
        return (self.mask + 1) * 20


class CompactRotatingMap:
    """Rotating map of int keys to (64-bit value, 32-bit meta), stored in arrays.

    Values are exchanged as one packed int, ``value | meta << 64``.

    Example::

        m = CompactRotatingMap(3)
        m.put(root, val | task << 64)
        m.get(root)      # -> the packed int
        m.rotate()       # drops the oldest bucket
    """

    def __init__(self, num_buckets: int = 3):
        if num_buckets < 2:
            raise ValueError(f"num_buckets must be >= 2, got {num_buckets}")
        #: Newest bucket first.
        self.buckets: deque[Bucket] = deque(Bucket() for _ in range(num_buckets))
        #: Keys 0 and 1 (reserved in the tables): key -> [bucket age, packed].
        self._odd: dict[int, list[int]] = {}

    # -- low-level access for the ledger's hot path ---------------------------------------
    def locate(self, key: int) -> tuple[Bucket, int] | None:
        """(bucket, slot) of ``key``, newest bucket first, or None."""
        for b in self.buckets:
            i = b.find(key)
            if i >= 0:
                return b, i
        return None

    # -- the RotatingMap interface ----------------------------------------------------------
    def __len__(self) -> int:
        return sum(b.live for b in self.buckets) + len(self._odd)

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, int) or key >> 64:
            return False  # (the compiled tables take 64-bit keys only)
        if key <= _TOMB:
            return key in self._odd
        return self.locate(key) is not None

    def get(self, key: int, default: int | None = None) -> int | None:
        if key <= _TOMB or key >> 64:  # no 64-bit table key: only the side dict may have it
            e = self._odd.get(key)
            return default if e is None else e[1]
        loc = self.locate(key)
        if loc is None:
            return default
        b, i = loc
        return b.vals[i] | b.meta[i] << 64

    def _split(self, packed: int) -> tuple[int, int]:
        return packed & 0xFFFF_FFFF_FFFF_FFFF, (packed >> 64) & 0xFFFF_FFFF

    def update(self, key: int, packed: int) -> None:
        """Set ``key`` where it is (keeping its age); a new key goes to the newest bucket."""
        if key <= _TOMB:
            e = self._odd.setdefault(key, [0, 0])
            e[1] = packed
            return
        val, meta = self._split(packed)
        loc = self.locate(key)
        if loc is None:
            self.buckets[0].insert(key, val, meta)
        else:
            b, i = loc
            b.vals[i] = val
            b.meta[i] = meta

    def put(self, key: int, packed: int) -> None:
        """Set ``key`` in the newest bucket (resetting its timeout)."""
        if key <= _TOMB:
            self._odd[key] = [0, packed]
            return
        val, meta = self._split(packed)
        loc = self.locate(key)
        if loc is not None:
            loc[0].delete(loc[1])
        self.buckets[0].insert(key, val, meta)

    def pop(self, key: int, default: int | None = None) -> int | None:
        if key <= _TOMB or key >> 64:
            e = self._odd.pop(key, None)
            return default if e is None else e[1]
        loc = self.locate(key)
        if loc is None:
            return default
        b, i = loc
        packed = b.vals[i] | b.meta[i] << 64
        b.delete(i)
        return packed

    remove = pop

    def rotate(self) -> int:
        """Drop the oldest bucket; returns how many entries expired.

        (RotatingMap returns the expired entries; the acker only forgets them,
        and building a dict of a large bucket would stall the acker.)
        """
        dead = self.buckets.pop()
        self.buckets.appendleft(Bucket())
        expired = dead.live
        return expired + len(age_odd(self._odd, len(self.buckets)))

    def items(self) -> Iterator[tuple[int, int]]:
        for b in self.buckets:
            for k, v, m in b.items():
                yield k, v | m << 64
        for k, e in self._odd.items():
            yield k, e[1]

    def nbytes(self) -> int:
        """Bytes held by the tables' arrays."""
        return sum(b.nbytes() for b in self.buckets)
