"""Map states: exactly-once updates of keyed values over a backing map, per Trident batch.

Python versions of Storm's ``TransactionalMap``, ``OpaqueMap``,
``NonTransactionalMap``, ``SnapshottableMap`` and ``CachedBatchReadsMap``
(``org.apache.storm.trident.state.map``); :mod:`.factory` builds them in the worker.

How a replayed batch stays exactly-once (Trident's batches carry a txid, and a
failed batch is replayed with the same txid):

* transactional — the stored value carries the txid that wrote it; an update
  from a batch with the same txid already happened and is skipped. Needs a
  transactional spout (a replayed txid has exactly the same tuples).
* opaque — the stored value also keeps the value before that txid; an update
  from the same txid is recomputed from that previous value, so a replay with
  *different* tuples (an opaque spout) still counts each tuple once.

Within one batch, keys written earlier in the batch are read back from a
per-batch cache and always updated again (a batch may update a key twice).
"""

from __future__ import annotations

import abc
import functools
from typing import Any, Callable, Generic, Sequence

from .backing import BackingMap, Key, OpaqueValue, TransactionalValue, V, check_lengths, encode_key
from .base import BatchBehindState, State

#: Storm's ``ValueUpdater``: the stored value (``None`` if there is none) -> the new value.
Updater = Callable[[Any], Any]
#: The key :class:`SnapshottableMap` keeps its single value under.
GLOBAL_KEY: tuple = ("$SQUALL-MAP-STATE-GLOBAL$",)


class MapState(State, Generic[V]):
    """A keyed state updated in batches (Storm's ``MapState``); keys are tuples of group-by values."""

    @abc.abstractmethod
    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        """The value of each key as the current batch should see it (``None`` if unset)."""

    @abc.abstractmethod
    def multi_update(self, keys: Sequence[Key], updaters: Sequence[Updater]) -> list[V]:
        """Apply ``updaters[i]`` to the value of ``keys[i]``; return the new values."""

    @abc.abstractmethod
    def multi_put(self, keys: Sequence[Key], values: Sequence[V]) -> None:
        """Set each key's value, whatever it was."""

    def multi_remove(self, keys: Sequence[Key]) -> None:
        """Remove the keys (Storm's ``RemovableMapState.multiRemove``): they read as unset
        from this batch on."""
        raise NotImplementedError(f"{type(self).__name__} cannot remove keys")


class _BatchReads:
    """Storm's ``CachedBatchReadsMap``: what this batch wrote, served back with ``cached=True``."""

    def __init__(self, backing: BackingMap):
        self.backing = backing
        self._written: dict[str, Any] = {}

    def reset(self) -> None:
        self._written.clear()

    def multi_get(self, keys: Sequence[Key]) -> list[tuple[Any, bool]]:
        encoded = [encode_key(k) for k in keys]
        # Unlike Storm, keys written in this batch are not read again from the store.
        missing = [i for i, e in enumerate(encoded) if e not in self._written]
        fetched = dict(zip(missing, self.backing.multi_get([keys[i] for i in missing]) if missing else []))
        return [(fetched[i], False) if i in fetched else (self._written[e], True)
                for i, e in enumerate(encoded)]

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        self.backing.multi_put(keys, values)
        self._written.update(zip((encode_key(k) for k in keys), values))


class _BatchedMap(MapState[V]):
    """The txid bookkeeping shared by the transactional and the opaque map."""

    def __init__(self, backing: BackingMap, name: str | None = None):
        #: The state's name, for error messages.
        self.name = name
        self._reads = _BatchReads(backing)
        #: The txid of the batch in progress; ``None`` outside a batch.
        self.current_txid: int | None = None
        #: Keys removed by the batch of ``_removed_txid``: deleted from the store when the
        #: next txid begins (Storm's MemoryMapState); a replay of that batch still reads
        #: them as the unset values it wrote.
        self._removed: list[Key] = []
        self._removed_txid: int | None = None

    def begin_commit(self, txid: int | None) -> None:
        if self._removed and (txid is None or txid != self._removed_txid):
            self._reads.backing.multi_remove(self._removed)
        self._removed = []  # a replay of the batch removes its keys again
        self.current_txid = txid
        self._reads.reset()

    def multi_remove(self, keys: Sequence[Key]) -> None:
        keys = list(keys)
        self.multi_put(keys, [None] * len(keys))
        self._removed.extend(keys)
        self._removed_txid = self.current_txid

    def commit(self, txid: int | None) -> None:
        self.current_txid = None
        self._reads.reset()

    def close(self) -> None:
        self._reads.backing.close()


class TransactionalMap(_BatchedMap[V]):
    """Stores ``TransactionalValue(txid, value)``; skips an update the same txid already made.

    Example::

        state = TransactionalMap(MemoryBackingMap())
        state.begin_commit(1)
        state.multi_update([("a",)], [lambda old: (old or 0) + 1])   # -> [1]
        state.commit(1)
    """

    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        return [None if stored is None else stored.val for stored, _ in self._reads.multi_get(keys)]

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[Updater]) -> list[V]:
        check_lengths(keys, updaters)
        txid = self.current_txid
        out: list[V] = []
        put_keys: list[Key] = []
        put_values: list[TransactionalValue] = []
        for key, (stored, cached), updater in zip(keys, self._reads.multi_get(keys), updaters):
            if stored is not None and not cached and txid is not None and stored.txid == txid:
                new = stored  # written by this very txid before a replay: already counted
            else:
                new = TransactionalValue(txid, updater(None if stored is None else stored.val))
                put_keys.append(key)
                put_values.append(new)
            out.append(new.val)
        if put_keys:
            self._reads.multi_put(put_keys, put_values)
        return out

    def multi_put(self, keys: Sequence[Key], values: Sequence[V]) -> None:
        check_lengths(keys, values)
        self._reads.multi_put(keys, [TransactionalValue(self.current_txid, v) for v in values])


class OpaqueMap(_BatchedMap[V]):
    """Stores ``OpaqueValue(txid, value, previous)``; a replayed txid recomputes from ``previous``.

    Raises :class:`BatchBehindState` for a batch older than the stored txid.
    """

    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        return [self._base(key, stored, cached)
                for key, (stored, cached) in zip(keys, self._reads.multi_get(keys))]

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[Updater]) -> list[V]:
        check_lengths(keys, updaters)
        txid = self.current_txid
        out: list[V] = []
        new_values: list[OpaqueValue] = []
        for key, (stored, cached), updater in zip(keys, self._reads.multi_get(keys), updaters):
            value = updater(self._base(key, stored, cached))
            out.append(value)
            # A cached value has curr_txid == txid, so update() keeps its pre-batch prev.
            new_values.append(OpaqueValue(txid, value) if stored is None
                              else self._guard(key, stored.update, txid, value))
        if keys:
            self._reads.multi_put(keys, new_values)
        return out

    def multi_put(self, keys: Sequence[Key], values: Sequence[V]) -> None:
        check_lengths(keys, values)
        self.multi_update(keys, [functools.partial(_replace, v) for v in values])

    def _base(self, key: Key, stored: OpaqueValue | None, cached: bool) -> Any:
        if stored is None:
            return None
        return stored.curr if cached else self._guard(key, stored.get, self.current_txid)

    def _guard(self, key: Key, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except BatchBehindState as e:
            raise BatchBehindState(e.txid, e.stored_txid, tuple(key), self.name) from None


def _replace(value: Any, _old: Any) -> Any:
    return value


class NonTransactionalMap(MapState[V]):
    """Stores bare values and applies every update, replays included (Storm's ``NonTransactionalMap``)."""

    def __init__(self, backing: BackingMap, name: str | None = None):
        self.backing = backing
        self.name = name

    def begin_commit(self, txid: int | None) -> None:
        pass

    def commit(self, txid: int | None) -> None:
        pass

    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        return self.backing.multi_get(keys)

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[Updater]) -> list[V]:
        check_lengths(keys, updaters)
        out = [u(old) for old, u in zip(self.backing.multi_get(keys), updaters)]
        self.backing.multi_put(keys, out)
        return out

    def multi_put(self, keys: Sequence[Key], values: Sequence[V]) -> None:
        self.backing.multi_put(keys, values)

    def multi_remove(self, keys: Sequence[Key]) -> None:
        self.backing.multi_remove(keys)

    def close(self) -> None:
        self.backing.close()


class SnapshottableMap(MapState[V]):
    """A map state that also holds one global value under ``global_key`` (Storm's ``SnapshottableMap``).

    What a factory returns, so one state serves both a grouped
    ``persistent_aggregate`` (the ``multi_*`` calls) and a global one
    (:meth:`get` / :meth:`update` / :meth:`set`).
    """

    def __init__(self, delegate: MapState[V], global_key: Key = GLOBAL_KEY):
        self.delegate = delegate
        self.global_key = tuple(global_key)

    def begin_commit(self, txid: int | None) -> None:
        self.delegate.begin_commit(txid)

    def commit(self, txid: int | None) -> None:
        self.delegate.commit(txid)

    def close(self) -> None:
        self.delegate.close()

    def multi_get(self, keys: Sequence[Key]) -> list[V | None]:
        return self.delegate.multi_get(keys)

    def multi_update(self, keys: Sequence[Key], updaters: Sequence[Updater]) -> list[V]:
        return self.delegate.multi_update(keys, updaters)

    def multi_put(self, keys: Sequence[Key], values: Sequence[V]) -> None:
        self.delegate.multi_put(keys, values)

    def multi_remove(self, keys: Sequence[Key]) -> None:
        self.delegate.multi_remove(keys)

    def get(self) -> V | None:
        """The global value."""
        return self.multi_get([self.global_key])[0]

    def update(self, updater: Updater) -> V:
        """Update the global value; returns the new one."""
        return self.multi_update([self.global_key], [updater])[0]

    def set(self, value: V) -> None:
        """Set the global value."""
        self.multi_put([self.global_key], [value])
