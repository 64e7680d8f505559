"""RotatingMap: a map whose entries expire in whole buckets. Python port of Storm's RotatingMap.

The map holds ``num_buckets`` dicts. ``put`` moves a key into the newest
bucket (the nursery), which also resets its timeout; ``rotate`` drops the
oldest bucket (death row), calls the expire callback for each entry in it and
opens a new nursery. An entry put just after a rotation survives
``num_buckets - 1`` rotations and expires at the next one, so rotating every
``T / (num_buckets - 1)`` seconds expires entries between ``T`` and
``T * num_buckets / (num_buckets - 1)`` seconds after their last put.

Not thread-safe: each owner (an acker task, a spout task) uses its own.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Generic, Hashable, Iterator, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

_MISSING = object()


class RotatingMap(Generic[K, V]):
    """A dict split into time buckets.

    Example::

        pending = RotatingMap(3, expired=lambda k, v: print("timed out", k))
        pending.put(root, entry)
        pending.rotate()   # on every tick
    """

    def __init__(self, num_buckets: int = 3,
                 expired: Callable[[K, V], None] | None = None):
        if num_buckets < 2:
            raise ValueError(f"num_buckets must be >= 2, got {num_buckets}")
        #: Newest bucket first; buckets[-1] is death row.
        self.buckets: deque[dict[K, V]] = deque({} for _ in range(num_buckets))
        self.expired = expired

    def __len__(self) -> int:
        return sum(len(b) for b in self.buckets)

    def __contains__(self, key: object) -> bool:
        for b in self.buckets:
            if key in b:
                return True
        return False

    def get(self, key: K, default: V | None = None) -> V | None:
        for b in self.buckets:
            v = b.get(key, _MISSING)
            if v is not _MISSING:
                return v  # type: ignore[return-value]
        return default

    def put(self, key: K, value: V) -> None:
        """Set ``key`` in the nursery, removing it from older buckets (resets its timeout)."""
        it = iter(self.buckets)
        nursery = next(it)
        nursery[key] = value
        for b in it:
            b.pop(key, None)

    def put_new(self, key: K, value: V) -> None:
        """``put`` for a key known to be absent (a fresh random root id): no search."""
        self.buckets[0][key] = value

    def update(self, key: K, value: V) -> None:
        """Set ``key`` in whichever bucket holds it, keeping its age; new keys go to the nursery."""
        for b in self.buckets:
            if key in b:
                b[key] = value
                return
        self.buckets[0][key] = value

    def pop(self, key: K, default: V | None = None) -> V | None:
        """Remove ``key`` and return its value, or ``default``."""
        for b in self.buckets:
            v = b.pop(key, _MISSING)
            if v is not _MISSING:
                return v  # type: ignore[return-value]
        return default

    remove = pop

    def rotate(self) -> dict[K, V]:
        """Expire the oldest bucket: call ``expired`` for each entry and return them."""
        dead = self.buckets.pop()
        self.buckets.appendleft({})
        if self.expired is not None:
            for k, v in dead.items():
                self.expired(k, v)
        return dead

    def items(self) -> Iterator[tuple[K, V]]:
        for b in self.buckets:
            yield from b.items()
