# cython: annotation_typing=False, nonecheck=True
"""Stream groupings: what a subscription declares, and the pure routers that apply it.

A grouping *spec* (:class:`Grouping`) is part of the topology; at run time
each emitting task builds one *router* per subscription with
:func:`make_router`, which maps a tuple's values to target task ids. Routers
are plain objects with no IO so they are tested directly.

Hashing must agree across processes, so fields and partial-key groupings use
:func:`stable_hash` (CRC32 for text and bytes, the value itself for integers)
rather than Python's per-process randomized ``hash``.
"""

from __future__ import annotations

import copy
import pickle
import random
import zlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import cloudpickle
import msgpack

SHUFFLE = "shuffle"
FIELDS = "fields"
ALL = "all"
GLOBAL = "global"
NONE = "none"
DIRECT = "direct"
LOCAL_OR_SHUFFLE = "local_or_shuffle"
PARTIAL_KEY = "partial_key"
CUSTOM = "custom"

KINDS = (SHUFFLE, FIELDS, ALL, GLOBAL, NONE, DIRECT, LOCAL_OR_SHUFFLE, PARTIAL_KEY, CUSTOM)


@dataclass
class Grouping:
    """A subscription's grouping: ``kind`` plus ``fields`` or a custom grouping.

    A custom grouping is the user's object (``custom``) where the topology was built, and
    only its pickled bytes (``serialized``) once read back from the wire: Nimbus never
    unpickles what a client sends; a worker, which runs the user's code anyway, does.
    """

    kind: str
    fields: list[str] = field(default_factory=list)
    custom: Any = None
    serialized: bytes | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown grouping {self.kind!r}; one of {KINDS}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Grouping):
            return NotImplemented
        if (self.kind, self.fields) != (other.kind, other.fields):
            return False
        if self.custom is not None and other.custom is not None:
            return bool(self.custom == other.custom)
        return self.custom_bytes() == other.custom_bytes()

    def custom_bytes(self) -> bytes | None:
        """The custom grouping pickled (what travels in the topology), or None."""
        if self.serialized is None and self.custom is not None:
            return cloudpickle.dumps(self.custom, protocol=pickle.HIGHEST_PROTOCOL)
        return self.serialized

    def new_custom(self) -> Any:
        """A fresh copy of the custom grouping object, one per emitting task (worker only)."""
        if self.serialized is not None:
            return pickle.loads(self.serialized)
        return copy.deepcopy(self.custom)


class CustomStreamGrouping:
    """Base for user groupings (Storm's CustomStreamGrouping).

    ``prepare(context, stream, target_tasks)`` is called once per emitting
    task; ``choose_tasks(task_id, values)`` returns the target task ids.
    """

    def prepare(self, context: Any, stream: tuple[str, str], target_tasks: Sequence[int]) -> None:
        self.target_tasks = list(target_tasks)

    def choose_tasks(self, task_id: int, values: list) -> list[int]:
        raise NotImplementedError


_MASK64 = (1 << 64) - 1


def stable_hash(value: Any) -> int:
    """A hash of a field value that every process agrees on."""
    t = type(value)
    if t is str:
        return zlib.crc32(value.encode("utf-8", "surrogatepass"))
    if t is int:
        return value & _MASK64
    if t is bytes:
        return zlib.crc32(value)
    if t is bool or value is None:
        return int(bool(value))
    if t is float and value.is_integer():
        return int(value) & _MASK64
    # Subclasses (StrEnum, IntEnum) hash like the plain value they equal, which is what
    # they become after crossing a worker.
    if isinstance(value, str):
        return zlib.crc32(str.encode(value, "utf-8", "surrogatepass"))
    if isinstance(value, int):
        return int(value) & _MASK64
    if isinstance(value, bytes):
        return zlib.crc32(value)
    return zlib.crc32(msgpack.packb(value, default=repr))


def _hash_values(values: list) -> int:
    if len(values) == 1:
        return stable_hash(values[0])
    h = 0
    for v in values:
        h = (h * 31 + stable_hash(v)) & _MASK64
    return h


class ShuffleRouter:
    """Round-robin over a shuffled list of targets (Storm 2's ShuffleGrouping)."""

    #: One-field fields grouping sets this (see FieldsRouter).
    lists = None

    def __init__(self, targets: Sequence[int], rng: random.Random | None = None):
        self.targets = list(targets)
        (rng or random).shuffle(self.targets)
        self.n = len(self.targets)
        self.i = 0

    def choose(self, values: list) -> list[int]:
        i = self.i
        self.i = i + 1 if i + 1 < self.n else 0
        return [self.targets[i]]


class LoadMapping:
    """Each task's load, 0 (keeping up) to 1 (backed up), as the worker last measured it:
    its own tasks from their receive queues, other workers' from their LOAD frames.
    Replaced whole by :meth:`set` (one thread writes; routers on others read)."""

    def __init__(self) -> None:
        self.loads: dict[int, float] = {}
        #: Bumped by every :meth:`set`: routers rebuild their rings when it moves.
        self.version = 0

    def set(self, loads: dict[int, float]) -> None:
        self.loads = loads
        self.version += 1

    def get(self, task: int) -> float:
        return self.loads.get(task, 0.0)


class LoadAwareShuffleRouter(ShuffleRouter):
    """Storm 2's LoadAwareShuffleGrouping: round robin over a ring in which each target
    has slots in proportion to ``1 - load``, and at least one (a backed-up task stays in
    it). With equal loads, the ring is the targets once each: the plain shuffle."""

    #: Least slots of a weighted ring (Storm's 1000; 10 a target past 100 targets), and the
    #: least weight a task keeps.
    RING = 1000
    FLOOR = 0.05

    def __init__(self, targets: Sequence[int], load: LoadMapping,
                 rng: random.Random | None = None):
        super().__init__(targets, rng)
        self.load = load
        self.rng = rng or random.Random()
        self.seen = load.version
        self.ring = [[t] for t in self.targets]

    def choose(self, values: list) -> list[int]:
        if self.load.version != self.seen:
            self._refresh()
        i = self.i
        self.i = i + 1 if i + 1 < self.n else 0
        return self.ring[i]

    def _refresh(self) -> None:
        self.seen = self.load.version
        get = self.load.get
        weights = [max(self.FLOOR, 1.0 - get(t)) for t in self.targets]
        if max(weights) - min(weights) < 0.02:
            ring = [[t] for t in self.targets]
        else:
            size = max(self.RING, 10 * len(weights))
            total = sum(weights)
            shares = [w * size / total for w in weights]
            slots = [max(1, int(x)) for x in shares]
            # Largest remainders take the slots rounding left over (ties drawn at random,
            # so equal targets are not always served in the same order).
            order = sorted(range(len(shares)),
                           key=lambda k: (slots[k] - shares[k], self.rng.random()))
            for k in order[:max(0, size - sum(slots))]:
                slots[k] += 1
            ring = [[t] for t, k in zip(self.targets, slots) for _ in range(k)]
            self.rng.shuffle(ring)
        # Go on from where the last ring was: restarting at 0 every refresh would favour
        # the ring's first targets.
        self.ring, self.n, self.i = ring, len(ring), self.i % len(ring)


class FieldsRouter:
    """Same values of the grouping fields -> same target task.

    With one grouping field, ``single`` is the field's index and ``lists`` holds one
    one-task list per target (shared: callers never mutate a target list), so an emitter
    routes a str key with one CRC-32 of its ASCII bytes (``zlib.crc32``, C), which
    costs the same for 1,000 keys as for 1,000,000. A cache of keys would not: past the
    CPU's caches its lookups cost three times the hash. Keys of other types go through
    :func:`stable_hash` (a cache for those that need msgpack).
    """

    def __init__(self, targets: Sequence[int], indices: Sequence[int]):
        self.targets = sorted(targets)
        self.n = len(self.targets)
        self.indices = list(indices)
        self.single = self.indices[0] if len(self.indices) == 1 else None
        self.lists: list[list[int]] | None = \
            [[t] for t in self.targets] if self.single is not None else None
        self._packed: dict = {}

    def choose(self, values: list) -> list[int]:
        if self.single is not None:
            key = values[self.single]
            t = type(key)
            if t is str or t is int or t is bytes:
                return self.lists[stable_hash(key) % self.n]
            try:
                return self._packed[key]
            except (KeyError, TypeError):
                pass
            out = self.lists[stable_hash(key) % self.n]
            if len(self._packed) < 100_000:
                try:
                    self._packed[key] = out
                except TypeError:  # unhashable value: no caching
                    pass
            return out
        h = _hash_values([values[i] for i in self.indices])
        return [self.targets[h % self.n]]


class PartialKeyRouter:
    """Key splitting over two candidate tasks, picking the less loaded (Storm's PartialKeyGrouping)."""

    lists = None

    def __init__(self, targets: Sequence[int], indices: Sequence[int]):
        self.targets = sorted(targets)
        self.n = len(self.targets)
        self.indices = list(indices)
        self.load = [0] * self.n

    def choose(self, values: list) -> list[int]:
        key = msgpack.packb([values[i] for i in self.indices], default=repr)
        a = zlib.crc32(key) % self.n
        b = zlib.adler32(key, 0x9E37) % self.n
        pick = a if self.load[a] <= self.load[b] else b
        self.load[pick] += 1
        return [self.targets[pick]]


class AllRouter:
    lists = None

    def __init__(self, targets: Sequence[int]):
        self.targets = sorted(targets)

    def choose(self, values: list) -> list[int]:
        return list(self.targets)


class GlobalRouter:
    """Everything to the lowest task id (Storm's global grouping)."""

    lists = None

    def __init__(self, targets: Sequence[int]):
        self.out = [min(targets)]

    def choose(self, values: list) -> list[int]:
        return list(self.out)


class DirectRouter:
    """A direct subscription: the emitter names the task with ``emit_direct``."""

    lists = None

    def __init__(self, targets: Sequence[int]):
        self.targets = frozenset(targets)

    def choose(self, values: list) -> list[int]:
        return []


class CustomRouter:
    lists = None

    def __init__(self, grouping: CustomStreamGrouping, task_id: int):
        self.grouping = grouping
        self.task_id = task_id
        self.targets = None

    def choose(self, values: list) -> list[int]:
        return list(self.grouping.choose_tasks(self.task_id, values))


def make_router(spec: Grouping, targets: Sequence[int], output_fields: Sequence[str], *,
                local_tasks: frozenset[int] | set[int] = frozenset(), task_id: int = 0,
                context: Any = None, stream: tuple[str, str] = ("", ""),
                fresh_custom: bool = True, load: LoadMapping | None = None):
    """Build the router for one subscription of one emitting task.

    ``targets`` are the subscriber's task ids, ``output_fields`` the emitting
    stream's declared fields, ``local_tasks`` the task ids in this worker; with ``load``,
    shuffle (and none) groupings weigh targets by it (LoadAwareShuffleRouter).
    """
    kind = spec.kind
    if kind in (SHUFFLE, NONE):
        return ShuffleRouter(targets) if load is None else LoadAwareShuffleRouter(targets, load)
    if kind == LOCAL_OR_SHUFFLE:
        local = [t for t in targets if t in local_tasks]
        return ShuffleRouter(local or targets)
    if kind in (FIELDS, PARTIAL_KEY):
        index = {f: i for i, f in enumerate(output_fields)}
        indices = [index[f] for f in spec.fields]
        return FieldsRouter(targets, indices) if kind == FIELDS else PartialKeyRouter(targets, indices)
    if kind == ALL:
        return AllRouter(targets)
    if kind == GLOBAL:
        return GlobalRouter(targets)
    if kind == DIRECT:
        return DirectRouter(targets)
    if kind == CUSTOM:
        grouping = spec.new_custom() if fresh_custom else spec.custom
        grouping.prepare(context, stream, sorted(targets))
        return CustomRouter(grouping, task_id)
    raise TypeError(kind)
