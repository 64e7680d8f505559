"""Factories of map states: what a topology holds, and what builds each partition's state in the worker.

Storm's ``StateFactory`` implementations for map states (``MemoryMapState.Factory``,
``RedisMapState.Factory``): :class:`MapStateFactory` stacks
``SnapshottableMap(<type>Map(CachedMap(backing)))`` as Storm does, and
:class:`MemoryMapState` is its in-memory backend
(Redis: :class:`~squall.client.trident.state.redis_map.RedisMapState`).
"""

from __future__ import annotations

import abc
from typing import Any, Mapping

from .backing import CODECS, BackingMap, CachedMap, Codec, Key, MemoryBackingMap
from .base import StateFactory, StateType
from .map_state import GLOBAL_KEY, MapState, NonTransactionalMap, OpaqueMap, SnapshottableMap, TransactionalMap

#: The map class for each state type.
MAP_TYPES: dict[StateType, type[MapState]] = {
    StateType.NON_TRANSACTIONAL: NonTransactionalMap,
    StateType.TRANSACTIONAL: TransactionalMap,
    StateType.OPAQUE: OpaqueMap,
}


class MapStateFactory(StateFactory):
    """Builds ``SnapshottableMap(<type>Map(CachedMap(backing)))`` per partition, as Storm's factories do.

    Holds only plain settings, so it pickles into the topology; subclasses
    open their backend in :meth:`make_backing`, in the worker.
    """

    def __init__(self, state_type: StateType, name: str, *, cache_size: int = 0,
                 global_key: Key = GLOBAL_KEY):
        if not name:
            raise ValueError("a map state needs a name")
        #: How replays are handled.
        self.state_type = StateType(state_type)
        #: The state's name: where the backend keeps it.
        self.name = name
        #: Values kept in a per-partition LRU cache (Storm's ``localCacheSize``); 0 = none.
        self.cache_size = cache_size
        self.global_key = tuple(global_key)

    @abc.abstractmethod
    def make_backing(self, conf: Mapping[str, Any], codec: Codec, partition_index: int,
                     num_partitions: int) -> BackingMap:
        """The backend for one partition, storing values with ``codec``."""

    def make_state(self, conf: Mapping[str, Any], partition_index: int = 0,
                   num_partitions: int = 1) -> SnapshottableMap:
        backing = self.make_backing(conf, CODECS[self.state_type], partition_index, num_partitions)
        if self.cache_size > 0:
            backing = CachedMap(backing, self.cache_size)
        return SnapshottableMap(MAP_TYPES[self.state_type](backing, name=self.name), self.global_key)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    def __hash__(self) -> int:
        return hash((type(self), self.state_type, self.name))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.state_type.value} {self.name!r}>"


#: In-process stores of :class:`MemoryMapState`, by state name.
_MEMORY_STORES: dict[str, dict[str, Any]] = {}


class MemoryMapState(MapStateFactory):
    """In-memory map states for unit tests and local mode (Storm's ``MemoryMapState``).

    Every state made with one name in one process shares a store — like
    Storm's, whose store outlives the state object — so a re-made state (a
    restarted task) sees what the old one committed. Separate processes do not
    share: use Redis there.

    Example::

        factory = MemoryMapState.opaque("word-counts")
        state = factory.make_state({}, 0, 1)
    """

    @classmethod
    def transactional(cls, name: str, **options: Any) -> "MemoryMapState":
        return cls(StateType.TRANSACTIONAL, name, **options)

    @classmethod
    def opaque(cls, name: str, **options: Any) -> "MemoryMapState":
        return cls(StateType.OPAQUE, name, **options)

    @classmethod
    def non_transactional(cls, name: str, **options: Any) -> "MemoryMapState":
        return cls(StateType.NON_TRANSACTIONAL, name, **options)

    def make_backing(self, conf: Mapping[str, Any], codec: Codec, partition_index: int,
                     num_partitions: int) -> MemoryBackingMap:
        return MemoryBackingMap(codec, store=_MEMORY_STORES.setdefault(self.name, {}))

    @staticmethod
    def drop(name: str) -> None:
        """Forget the store of state ``name`` in this process."""
        _MEMORY_STORES.pop(name, None)
