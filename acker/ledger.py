# cython: annotation_typing=False
"""The acker's pure XOR ledger: Storm's Acker bolt logic without any IO.

Per root (spout tuple tree) id the ledger keeps the 64-bit XOR ack value and
32 bits of metadata: the spout task that emitted the root (+1, so 0 means
its ``__ack_init`` has not arrived yet) and a failed flag. Entries live in a
:class:`~squall.acker.compact_map.CompactRotatingMap` (RotatingMap semantics in
flat arrays, ~30-60 bytes a pending tree) rotated on ticks, so trees whose
acks never arrive are forgotten; the spout's own pending map fails them.

Messages may arrive in any order (an ``__ack_ack`` can overtake its
``__ack_init``): the tree completes when the init has been seen and the value
is 0, or fails when the init has been seen and a fail arrived.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .compact_map import CompactRotatingMap

try:
    import cython
    _COMPILED = cython.compiled
except ImportError:  # installed without Cython: this source runs as plain Python
    _COMPILED = False

# Instructions are plain slotted dataclasses (not frozen: a frozen dataclass is several
# times slower to build, and one is built per completed tree).
_VAL_MASK = (1 << 64) - 1
_TASK_MASK = (1 << 31) - 1
_FAILED = 1 << 31


@dataclass(slots=True)
class TreeAcked:
    """Every tuple of the tree was acked: tell ``spout_task`` on ``__ack_ack``."""

    root: int
    spout_task: int


@dataclass(slots=True)
class TreeFailed:
    """A tuple of the tree failed: tell ``spout_task`` on ``__ack_fail``."""

    root: int
    spout_task: int


@dataclass(slots=True)
class TimeoutReset:
    """A bolt asked for more time: tell ``spout_task`` on ``__ack_reset_timeout``."""

    root: int
    spout_task: int


Instruction = TreeAcked | TreeFailed | TimeoutReset


def _u64(val: int) -> int:
    """A value off the wire as its low 64 bits (without making the masked int, compiled)."""
    return _mask64(val) if _COMPILED else val & _VAL_MASK  # noqa: F821


def _instruction(root: int, code: int) -> Instruction | None:
    """A core's answer (``spout_task << 1 | failed``, or -1) as an instruction."""
    if code < 0:
        return None
    return TreeFailed(root, code >> 1) if code & 1 else TreeAcked(root, code >> 1)


def _code(r: Instruction | None) -> int:
    """The other way round, for the reserved roots' generic path."""
    if r is None:
        return -1
    return r.spout_task << 1 | (type(r) is TreeFailed)


def _settled(code: int, root: int, acked: dict[int, list], failed: dict[int, list]) -> bool:
    """Append a settled tree's root to its spout task's list, acked or failed (which it
    answers)."""
    out = failed if code & 1 else acked
    roots = out.get(code >> 1)
    if roots is None:
        roots = out[code >> 1] = []
    roots.append(root)
    return bool(code & 1)


class AckerLedger:
    """Tracks tuple trees by XOR.

    Example::

        ledger = AckerLedger()
        ledger.init(root=7, val=0b1010, spout_task=3)     # -> None
        ledger.ack(root=7, val=0b1010)                      # -> TreeAcked(7, 3)
    """

    def __init__(self, num_buckets: int = 3):
        self.pending = CompactRotatingMap(num_buckets)

    def __len__(self) -> int:
        return len(self.pending)

    def _apply(self, root: int, xor: int, meta_or: int, task: int | None,
               reset: bool = False, refresh: bool = False) -> Instruction | None:
        """XOR ``xor`` into the tree, OR ``meta_or`` into its flags, set its task; then settle."""
        pending = self.pending
        if root <= 1:  # reserved table keys: the slow, generic path
            packed = pending.get(root, 0) ^ xor
            meta = (packed >> 64) | meta_or
            if task is not None:
                meta = (meta & ~_TASK_MASK) | (task + 1)
            packed = (packed & _VAL_MASK) | meta << 64
            pending.put(root, packed) if refresh else pending.update(root, packed)
            return self._settle(root, packed & _VAL_MASK, meta, reset, lambda: pending.pop(root))
        loc = pending.locate(root)
        if loc is None:
            meta = meta_or if task is None else meta_or | (task + 1)
            b = pending.buckets[0]
            i = b.insert(root, xor, meta)
            return self._settle(root, xor, meta, reset, lambda: b.delete(i))
        b, i = loc
        val = b.vals[i] ^ xor
        meta = b.meta[i] | meta_or
        if task is not None:
            meta = (meta & ~_TASK_MASK) | (task + 1)
        if refresh and b is not pending.buckets[0]:
            b.delete(i)
            b = pending.buckets[0]
            i = b.insert(root, val, meta)
        else:
            b.vals[i] = val
            b.meta[i] = meta
        return self._settle(root, val, meta, reset, lambda: b.delete(i))

    @staticmethod
    def _settle(root: int, val: int, meta: int, reset: bool, remove) -> Instruction | None:
        task_plus_1 = meta & _TASK_MASK
        if not task_plus_1:
            return None
        if not val:
            remove()
            return TreeAcked(root, task_plus_1 - 1)
        if meta & _FAILED:
            remove()
            return TreeFailed(root, task_plus_1 - 1)
        if reset:
            return TimeoutReset(root, task_plus_1 - 1)
        return None

    def init(self, root: int, val: int, spout_task: int) -> Instruction | None:
        """``__ack_init``: the spout emitted root ``root`` with edge ids XORing to ``val``."""
        if root <= 1:
            return self._apply(root, val & _VAL_MASK, 0, spout_task)
        return _instruction(root, self._init1(root, _u64(val), spout_task))

    def ack(self, root: int, val: int) -> Instruction | None:
        """``__ack_ack``: XOR ``val`` (acked ids and newly anchored ids) into the tree."""
        if root <= 1:
            return self._apply(root, val & _VAL_MASK, 0, None)
        return _instruction(root, self._ack1(root, _u64(val)))

    # The two cores answer a settled tree as ``spout_task << 1 | failed`` and a pending one
    # as -1: the batched calls below append its root to a list and make no object for it.
    def _init1(self, root: int, uval: int, spout_task: int) -> int:
        task = spout_task + 1
        buckets = self.pending.buckets
        for j in range(len(buckets)):  # by index: no iterator (an empty bucket's find is
            b = buckets[j]              # one test, and an init misses all three)
            i = b.find(root)
            if i >= 0:  # acks overtook the init
                v = b.vals[i] ^ uval
                m = (b.meta[i] & _FAILED) | task
                if not v:
                    b.delete(i)
                    return spout_task << 1
                if m & _FAILED:
                    b.delete(i)
                    return spout_task << 1 | 1
                b.vals[i] = v
                b.meta[i] = m
                return -1
        if not uval:  # a spout tuple with no subscriber: complete at once
            return spout_task << 1
        b = self.pending.buckets[0]  # (typed: its insert a C call)
        b.insert(root, uval, task)
        return -1

    def _ack1(self, root: int, uval: int) -> int:
        buckets = self.pending.buckets
        for j in range(len(buckets)):  # as _init1
            b = buckets[j]
            i = b.find(root)
            if i >= 0:
                v = b.vals[i] ^ uval
                m = b.meta[i]
                task_plus_1 = m & _TASK_MASK
                if task_plus_1:
                    if not v:
                        b.delete(i)
                        return (task_plus_1 - 1) << 1
                    if m & _FAILED:
                        b.delete(i)
                        return (task_plus_1 - 1) << 1 | 1
                b.vals[i] = v
                return -1
        b = self.pending.buckets[0]
        b.insert(root, uval, 0)  # before its init: wait for it
        return -1

    def init_all(self, flat: Sequence[int], acked: dict[int, list],
                 failed: dict[int, list]) -> tuple[int, int]:
        """:meth:`init` for each ``root, val, spout_task`` triple of a batched
        ``__ack_init`` tuple's flat list: the roots of the trees that completed are appended
        to ``acked[spout_task]``, of those that failed to ``failed[spout_task]`` (the lists
        the acker sends); answers how many of each."""
        n = n_failed = 0
        for i in range(0, len(flat) - 2, 3):
            root = flat[i]
            if root <= 1:
                code = _code(self.init(root, flat[i + 1], flat[i + 2]))
            else:
                code = self._init1(root, _u64(flat[i + 1]), flat[i + 2])
            if code >= 0:
                n += 1
                n_failed += _settled(code, root, acked, failed)
        return n - n_failed, n_failed

    def ack_all(self, flat: Sequence[int], acked: dict[int, list],
                failed: dict[int, list]) -> tuple[int, int]:
        """:meth:`ack` for each ``root, val`` pair of a batched ``__ack_ack`` tuple's flat
        list, settled trees appended as :meth:`init_all` does."""
        n = n_failed = 0
        for i in range(0, len(flat) - 1, 2):
            root = flat[i]
            if root <= 1:
                code = _code(self.ack(root, flat[i + 1]))
            else:
                code = self._ack1(root, _u64(flat[i + 1]))
            if code >= 0:
                n += 1
                n_failed += _settled(code, root, acked, failed)
        return n - n_failed, n_failed

    def fail(self, root: int) -> Instruction | None:
        """``__ack_fail``: mark the tree failed (and refresh its timeout, as Storm does)."""
        return self._apply(root, 0, _FAILED, None, refresh=True)

    def reset_timeout(self, root: int) -> Instruction | None:
        """``__ack_reset_timeout``: refresh the tree's timeout and tell its spout."""
        if root not in self.pending:
            return None  # not seen yet: nothing to time out later
        return self._apply(root, 0, 0, None, reset=True, refresh=True)

    def rotate(self) -> int:
        """On a tick: forget the oldest bucket of trees; returns how many expired."""
        return self.pending.rotate()

    def validate_state(self) -> None:
        """Invariant: no settled tree stays pending."""
        for root, packed in self.pending.items():
            meta = packed >> 64
            if meta & _TASK_MASK:
                assert packed & _VAL_MASK and not meta & _FAILED, (root, packed)
