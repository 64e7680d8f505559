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


def _instruction(root: int, code: int) -> Instruction | None:
    if code > 0:
        return TreeAcked(root, code - 1)
    if code < 0:
        return TreeFailed(root, -code - 1)
    return None


def _code(instruction: Instruction | None) -> int:
    """An init's or ack's instruction (the reserved roots' path) as its settle code."""
    if instruction is None:
        return 0
    task = instruction.spout_task + 1
    return task if type(instruction) is TreeAcked else -task


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
        return _instruction(root, self._init(root, val, spout_task))

    def ack(self, root: int, val: int) -> Instruction | None:
        """``__ack_ack``: XOR ``val`` (acked ids and newly anchored ids) into the tree."""
        return _instruction(root, self._ack(root, val))

    # The two above as settle codes, so a batch settles without an object per tree:
    # 0 nothing yet, spout task + 1 the tree completed, -(spout task + 1) it failed.
    def _init(self, root: int, val: int, spout_task: int) -> int:
        if root <= 1:
            return _code(self._apply(root, val & _VAL_MASK, 0, spout_task))
        uval = val & _VAL_MASK  # a C integer in the compiled build (ledger.pxd)
        task = spout_task + 1
        for b in self.pending.buckets:
            i = b.find(root)
            if i >= 0:  # acks overtook the init
                v = b.vals[i] ^ uval
                m = (b.meta[i] & _FAILED) | task
                if not v:
                    b.delete(i)
                    return task
                if m & _FAILED:
                    b.delete(i)
                    return -task
                b.vals[i] = v
                b.meta[i] = m
                return 0
        if not uval:  # a spout tuple with no subscriber: complete at once
            return task
        self.pending.buckets[0].insert(root, uval, task)
        return 0

    def _ack(self, root: int, val: int) -> int:
        if root <= 1:
            return _code(self._apply(root, val & _VAL_MASK, 0, None))
        uval = val & _VAL_MASK
        for b in self.pending.buckets:
            i = b.find(root)
            if i >= 0:
                v = b.vals[i] ^ uval
                m = b.meta[i]
                task_plus_1 = m & _TASK_MASK
                if task_plus_1:
                    if not v:
                        b.delete(i)
                        return task_plus_1
                    if m & _FAILED:
                        b.delete(i)
                        return -task_plus_1
                b.vals[i] = v
                return 0
        self.pending.buckets[0].insert(root, uval, 0)  # before its init: wait for it
        return 0

    def settle_all(self, flat: Sequence[int], inits: bool, acked: dict[int, list],
                   failed: dict[int, list]) -> tuple[int, int]:
        """:meth:`init_all` (``inits``) or :meth:`ack_all` as the acker runs them: the roots
        of the trees that completed appended to ``acked[spout_task]``, of those that failed
        to ``failed[spout_task]``, without an instruction object per tree; returns how many
        of each."""
        n_acked = 0
        n_failed = 0
        step = 3 if inits else 2
        for i in range(0, len(flat) - step + 1, step):
            root = flat[i]
            code = self._init(root, flat[i + 1], flat[i + 2]) if inits \
                else self._ack(root, flat[i + 1])
            if code > 0:
                roots = acked.get(code - 1)
                if roots is None:
                    roots = acked[code - 1] = []
                roots.append(root)
                n_acked += 1
            elif code < 0:
                roots = failed.get(-code - 1)
                if roots is None:
                    roots = failed[-code - 1] = []
                roots.append(root)
                n_failed += 1
        return n_acked, n_failed

    def init_all(self, flat: Sequence[int]) -> list[Instruction]:
        """:meth:`init` for each ``root, val, spout_task`` triple of a batched
        ``__ack_init`` tuple's flat list; the instructions that came of them."""
        out = []
        for i in range(0, len(flat) - 2, 3):
            r = self.init(flat[i], flat[i + 1], flat[i + 2])
            if r is not None:
                out.append(r)
        return out

    def ack_all(self, flat: Sequence[int]) -> list[Instruction]:
        """:meth:`ack` for each ``root, val`` pair of a batched ``__ack_ack`` tuple's flat
        list; the instructions that came of them."""
        out = []
        for i in range(0, len(flat) - 1, 2):
            r = self.ack(flat[i], flat[i + 1])
            if r is not None:
                out.append(r)
        return out

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
