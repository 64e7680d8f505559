"""Trident state: exactly-once map states over pluggable backing maps (Storm's ``trident.state``).

``base`` (State, StateFactory, StateType, errors), ``backing`` (backing maps,
stored values, codecs), ``map_state`` (transactional / opaque /
non-transactional maps), ``factory`` (map state factories, the in-memory one)
and ``redis_map`` (the Redis backend, imported on first use so workers without
Redis states do not load redis-py).
"""

from __future__ import annotations

from typing import Any

from .backing import (CODECS, BackingMap, CachedMap, MemoryBackingMap, OpaqueValue,
                      TransactionalValue, encode_key)
from .base import BatchBehindState, RedisUnavailable, State, StateError, StateFactory, StateType
from .factory import MapStateFactory, MemoryMapState
from .map_state import (MapState, NonTransactionalMap, OpaqueMap, SnapshottableMap, TransactionalMap,
                        Updater)

_LAZY = {"RedisBackingMap", "RedisMapState"}

__all__ = ["CODECS", "BackingMap", "CachedMap", "MemoryBackingMap", "OpaqueValue", "TransactionalValue",
           "encode_key", "BatchBehindState", "RedisUnavailable", "State", "StateError", "StateFactory",
           "StateType", "MapState", "MapStateFactory", "MemoryMapState", "NonTransactionalMap",
           "OpaqueMap", "SnapshottableMap", "TransactionalMap", "Updater", *sorted(_LAZY)]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import redis_map
        return getattr(redis_map, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
