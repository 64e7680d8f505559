"""Backing maps: the storage a Trident map state reads and writes a batch of keys at a time.

Storm's ``IBackingMap`` (``multiGet`` / ``multiPut``), ``CachedMap`` and the
values the map states store: :class:`TransactionalValue` (txid, value) and
:class:`OpaqueValue` (txid, current, previous). A key is a tuple of group-by
values; it is stored as its JSON text (:func:`encode_key`). Values cross the
storage boundary through a :class:`Codec` with Storm's JSON layouts
(``JSONTransactionalSerializer``'s ``[txid, val]``, ``JSONOpaqueSerializer``'s
``[currTxid, curr, prev]``), so user values must be JSON-able and come back as
JSON types (a tuple comes back a list).
"""

from __future__ import annotations

import abc
import functools
import json
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Generic, Sequence, TypeVar

from .base import BatchBehindState, StateError, StateType

V = TypeVar("V")
#: A key of a map state: the group-by values of a tuple, e.g. ``("the",)`` or ``("us", 2024)``.
Key = Sequence[Any]


def encode_key(key: Key) -> str:
    """The storage form of ``key``: compact JSON, so ``("a,b",)`` and ``("a", "b")`` stay apart."""
    if type(key) is tuple:  # the usual case, and a batch's keys repeat: remember them
        try:
            return _encode_tuple(key)
        except TypeError:  # an unhashable member (a list): encode it every time
            return _dumps(list(key))
    if isinstance(key, (str, bytes)) or not isinstance(key, Sequence):
        raise TypeError(f"a state key is a tuple of group-by values, got {type(key).__name__} {key!r}")
    return _dumps(list(key))


@functools.lru_cache(maxsize=1 << 16)
def _encode_tuple(key: tuple) -> str:
    return _dumps(list(key))


# sort_keys: equal dicts give equal text (keys compare as text); allow_nan=False: Redis values
# stay strict JSON that another language (Storm's Java) can read. One encoder: json.dumps with
# options builds a new one per call, which shows in a batch of thousands of keys.
_ENCODER = json.JSONEncoder(separators=(",", ":"), sort_keys=True, ensure_ascii=False,
                            allow_nan=False)


def _dumps(value: Any) -> str:
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as e:
        raise StateError(f"state values must be JSON-able: {e}") from None


# --- stored values -------------------------------------------------------------------

@dataclass(frozen=True)
class TransactionalValue(Generic[V]):
    """A value with the txid of the batch that last wrote it (Storm's ``TransactionalValue``)."""

    txid: int | None
    val: V


@dataclass(frozen=True)
class OpaqueValue(Generic[V]):
    """The value a batch wrote, its txid, and the value before that batch (Storm's ``OpaqueValue``).

    ``prev`` is what a replay of ``curr_txid`` — possibly with different tuples,
    as an opaque spout may send — starts from again.
    """

    curr_txid: int | None
    curr: V
    prev: V | None = None

    def _relation(self, txid: int | None) -> str:
        # None on either side means "outside a batch": the stored value is simply current.
        if txid is None or self.curr_txid is None or self.curr_txid < txid:
            return "newer"
        if txid == self.curr_txid:
            return "replay"
        raise BatchBehindState(txid, self.curr_txid)

    def get(self, txid: int | None) -> V | None:
        """The value batch ``txid`` should start from: ``prev`` on a replay, else ``curr``."""
        return self.prev if self._relation(txid) == "replay" else self.curr

    def update(self, txid: int | None, new_val: V) -> "OpaqueValue[V]":
        """The value after batch ``txid`` wrote ``new_val``: a new batch shifts curr to prev."""
        prev = self.prev if self._relation(txid) == "replay" else self.curr
        return OpaqueValue(txid, new_val, prev)


# --- codecs --------------------------------------------------------------------------

class Codec(abc.ABC):
    """Turns a stored value into text for a backend and back."""

    @abc.abstractmethod
    def encode(self, value: Any) -> str: ...

    @abc.abstractmethod
    def decode(self, text: str | bytes) -> Any: ...


class JsonCodec(Codec):
    """The value itself as JSON (non-transactional states)."""

    def encode(self, value: Any) -> str:
        return _dumps(value)

    def decode(self, text: str | bytes) -> Any:
        return json.loads(text)


class TransactionalCodec(Codec):
    """:class:`TransactionalValue` as ``[txid, val]``."""

    def encode(self, value: TransactionalValue) -> str:
        return _dumps([value.txid, value.val])

    def decode(self, text: str | bytes) -> TransactionalValue:
        txid, val = json.loads(text)
        return TransactionalValue(txid, val)


class OpaqueCodec(Codec):
    """:class:`OpaqueValue` as ``[curr_txid, curr, prev]``."""

    def encode(self, value: OpaqueValue) -> str:
        return _dumps([value.curr_txid, value.curr, value.prev])

    def decode(self, text: str | bytes) -> OpaqueValue:
        txid, curr, prev = json.loads(text)
        return OpaqueValue(txid, curr, prev)


#: The codec for each state type's stored values.
CODECS: dict[StateType, Codec] = {
    StateType.NON_TRANSACTIONAL: JsonCodec(),
    StateType.TRANSACTIONAL: TransactionalCodec(),
    StateType.OPAQUE: OpaqueCodec(),
}


# --- backing maps --------------------------------------------------------------------

class BackingMap(abc.ABC, Generic[V]):
    """Batch reads and writes of stored values by key (Storm's ``IBackingMap``).

    Each call should be one round trip to the store; a missing key reads as ``None``.
    """

    @abc.abstractmethod
    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        """The stored value of each key, in order (``None`` where there is none)."""

    @abc.abstractmethod
    def multi_put(self, keys: Sequence[Key], values: Sequence[V]) -> None:
        """Store ``values[i]`` under ``keys[i]``."""

    def multi_remove(self, keys: Sequence[Key]) -> None:
        """Delete the keys (Storm's ``multiRemove``); a store that cannot says so."""
        raise StateError(f"{type(self).__name__} cannot remove keys")

    def close(self) -> None:
        """Release connections; the default holds none."""


class MemoryBackingMap(BackingMap[V]):
    """A dict, for unit tests and local mode; counts calls so tests can check round trips.

    With a ``codec`` it stores encoded text, exactly what Redis would hold, so
    values that are not JSON-able fail here too. ``store`` lets two maps share
    one dict (a restarted task seeing what the old one wrote).

    Example::

        backing = MemoryBackingMap(CODECS[StateType.TRANSACTIONAL])
        backing.multi_put([("a",)], [TransactionalValue(1, 5)])
        assert backing.multi_get([("a",), ("b",)]) == [TransactionalValue(1, 5), None]
    """

    def __init__(self, codec: Codec | None = None, store: dict[str, Any] | None = None):
        #: Encoded key -> stored value (encoded text when there is a codec).
        self.store: dict[str, Any] = {} if store is None else store
        self.codec = codec
        #: Calls of :meth:`multi_get` / :meth:`multi_put` so far.
        self.get_calls = 0
        self.put_calls = 0

    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        self.get_calls += 1
        raw = [self.store.get(encode_key(k)) for k in keys]
        if self.codec is None:
            return raw
        return [None if r is None else self.codec.decode(r) for r in raw]

    def multi_put(self, keys: Sequence[Key], values: Sequence[V]) -> None:
        check_lengths(keys, values)
        self.put_calls += 1
        encoded = [v if self.codec is None else self.codec.encode(v) for v in values]
        # Encode all first: a value that cannot be stored leaves the map untouched.
        self.store.update(zip((encode_key(k) for k in keys), encoded))

    def multi_remove(self, keys: Sequence[Key]) -> None:
        self.put_calls += 1
        for k in keys:
            self.store.pop(encode_key(k), None)


class CachedMap(BackingMap[V]):
    """An LRU cache of up to ``size`` values in front of another backing map (Storm's ``CachedMap``).

    Sound because Trident routes each key to one partition, whose state object
    is the only writer; reads of cached keys skip the store. Puts write through.
    Updaters must not mutate the old value in place: it may be the cached object.
    """

    def __init__(self, delegate: BackingMap[V], size: int):
        if size < 1:
            raise ValueError(f"cache size must be >= 1, got {size}")
        self.delegate = delegate
        self.size = size
        self._cache: OrderedDict[str, V | None] = OrderedDict()

    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        encoded = [encode_key(k) for k in keys]
        missing = [i for i, e in enumerate(encoded) if e not in self._cache]
        fetched = self.delegate.multi_get([keys[i] for i in missing]) if missing else []
        out: dict[int, V | None] = dict(zip(missing, fetched))
        # Hits first: remembering the fetched values may evict them.
        for i, e in enumerate(encoded):
            if i not in out:
                self._cache.move_to_end(e)
                out[i] = self._cache[e]
        for i in missing:
            self._remember(encoded[i], out[i])
        return [out[i] for i in range(len(keys))]

    def multi_remove(self, keys: Sequence[Key]) -> None:
        self.delegate.multi_remove(keys)
        for k in keys:
            self._cache.pop(encode_key(k), None)

    def multi_put(self, keys: Sequence[Key], values: Sequence[V]) -> None:
        check_lengths(keys, values)
        self.delegate.multi_put(keys, values)
        for k, v in zip(keys, values):
            self._remember(encode_key(k), v)

    def close(self) -> None:
        self.delegate.close()

    def _remember(self, encoded: str, value: V | None) -> None:
        self._cache[encoded] = value
        self._cache.move_to_end(encoded)
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)


def check_lengths(keys: Sequence[Key], values: Sequence[Any]) -> None:
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
