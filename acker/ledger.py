"""The acker's pure XOR ledger: Storm's Acker bolt logic without any IO.

Per root (spout tuple tree) id the ledger keeps one packed integer: the 64-bit
XOR ack value, the spout task that emitted the root (+1, so 0 means its
``__ack_init`` has not arrived yet) and a failed flag. Packing everything into
one int keeps a pending tree to a dict entry plus two int objects.

Messages may arrive in any order (an ``__ack_ack`` can overtake its
``__ack_init``): the tree completes when the init has been seen and the value
is 0, or fails when the init has been seen and a fail arrived. Entries live in
a :class:`~squall.acker.rotating_map.RotatingMap` rotated on ticks, so trees
whose acks never arrive are forgotten; the spout's own pending map fails them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .rotating_map import RotatingMap

_VAL_MASK = (1 << 64) - 1
_TASK_SHIFT = 64
_TASK_MASK = (1 << 32) - 1
_FAILED = 1 << 100


@dataclass(frozen=True, slots=True)
class TreeAcked:
    """Every tuple of the tree was acked: tell ``spout_task`` on ``__ack_ack``."""

    root: int
    spout_task: int


@dataclass(frozen=True, slots=True)
class TreeFailed:
    """A tuple of the tree failed: tell ``spout_task`` on ``__ack_fail``."""

    root: int
    spout_task: int


@dataclass(frozen=True, slots=True)
class TimeoutReset:
    """A bolt asked for more time: tell ``spout_task`` on ``__ack_reset_timeout``."""

    root: int
    spout_task: int


Instruction = TreeAcked | TreeFailed | TimeoutReset


class AckerLedger:
    """Tracks tuple trees by XOR.

    Example::

        ledger = AckerLedger()
        ledger.init(root=7, val=0b1010, spout_task=3)     # -> None
        ledger.ack(root=7, val=0b1010)                      # -> TreeAcked(7, 3)
    """

    def __init__(self, num_buckets: int = 3):
        self.pending: RotatingMap[int, int] = RotatingMap(num_buckets)

    def __len__(self) -> int:
        return len(self.pending)

    def _settle(self, root: int, packed: int, reset: bool = False) -> Instruction | None:
        task_plus_1 = (packed >> _TASK_SHIFT) & _TASK_MASK
        if not task_plus_1:
            return None
        if not packed & _VAL_MASK:
            self.pending.pop(root)
            return TreeAcked(root, task_plus_1 - 1)
        if packed & _FAILED:
            self.pending.pop(root)
            return TreeFailed(root, task_plus_1 - 1)
        if reset:
            return TimeoutReset(root, task_plus_1 - 1)
        return None

    def init(self, root: int, val: int, spout_task: int) -> Instruction | None:
        """``__ack_init``: the spout emitted root ``root`` with edge ids XORing to ``val``."""
        packed = self.pending.get(root, 0) ^ (val & _VAL_MASK)
        packed = (packed & ~(_TASK_MASK << _TASK_SHIFT)) | ((spout_task + 1) << _TASK_SHIFT)
        self.pending.update(root, packed)
        return self._settle(root, packed)

    def ack(self, root: int, val: int) -> Instruction | None:
        """``__ack_ack``: XOR ``val`` (acked ids and newly anchored ids) into the tree."""
        packed = self.pending.get(root, 0) ^ (val & _VAL_MASK)
        self.pending.update(root, packed)
        return self._settle(root, packed)

    def fail(self, root: int) -> Instruction | None:
        """``__ack_fail``: mark the tree failed (and refresh its timeout, as Storm does)."""
        packed = self.pending.get(root, 0) | _FAILED
        self.pending.put(root, packed)
        return self._settle(root, packed)

    def reset_timeout(self, root: int) -> Instruction | None:
        """``__ack_reset_timeout``: refresh the tree's timeout and tell its spout."""
        packed = self.pending.get(root)
        if packed is None:
            return None  # not seen yet: nothing to time out later
        self.pending.put(root, packed)
        return self._settle(root, packed, reset=True)

    def rotate(self) -> int:
        """On a tick: forget the oldest bucket of trees; returns how many expired."""
        return len(self.pending.rotate())

    def validate_state(self) -> None:
        """Invariant: no settled tree stays pending."""
        for root, packed in self.pending.items():
            if (packed >> _TASK_SHIFT) & _TASK_MASK:
                assert packed & _VAL_MASK and not packed & _FAILED, (root, packed)
