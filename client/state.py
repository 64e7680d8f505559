"""Bolt state: :class:`KeyValueState` in memory or in Redis, and the providers that make it.

Storm's ``org.apache.storm.state`` (State, KeyValueState, InMemoryKeyValueState,
StateProvider, StateFactory) and storm-redis's RedisKeyValueState. A stateful bolt's
state has one namespace per task (``<component>-<task>``) and a two-phase commit:
``prepare_commit(txid)`` freezes what the next ``commit(txid)`` saves, ``rollback()``
returns to the last commit. The checkpointing (client/stateful.py, worker/checkpoint.py)
drives those calls; a bolt only puts and gets.

Which provider a topology gets (``topology.state.provider``):

- ``"memory"``: :class:`InMemoryKeyValueState`, lost with its worker (tests, ``squall local``);
- ``"redis"``: :class:`RedisKeyValueState`, which survives worker restarts;
- ``"postgres"``: the JDBC connector's state in PostgreSQL (connectors/jdbc/state.py);
- a dotted ``module.Class`` of the user's code: a :class:`StateProvider` made in the worker;
- unset: Redis when ``topology.state.provider.config`` is set, memory otherwise.

Values in Redis are msgpack, never pickle: state read back from a server is data only.
Values come back as msgpack gives them: tuples as lists; keys that are lists
or tuples as tuples (a key must be hashable).
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import json
from typing import Any, Iterator, Mapping

import msgpack

from . import config as cfg
from .errors import SquallError

#: Storm's provider class names, read as ours (a Storm topology's conf keeps working).
PROVIDER_ALIASES = {
    "org.apache.storm.state.InMemoryKeyValueStateProvider": "memory",
    "org.apache.storm.redis.state.RedisKeyValueStateProvider": "redis",
    # The JDBC connector's (a name only: the worker imports it, client/ never does).
    "postgres": "squall.connectors.jdbc.state.JdbcKeyValueStateProvider",
}


class StateError(SquallError):
    """A state cannot be made, read or saved; the message says which and why."""


class State(abc.ABC):
    """What checkpointing needs of a state (Storm's State)."""

    @abc.abstractmethod
    def prepare_commit(self, txid: int) -> None:
        """Freeze the current contents as transaction ``txid`` (not yet visible as committed)."""

    @abc.abstractmethod
    def commit(self, txid: int | None = None) -> None:
        """Make the prepared ``txid`` the committed state; ``None``: commit the contents now."""

    @abc.abstractmethod
    def rollback(self) -> None:
        """Drop what was not committed: the contents become the last committed state."""

    def restore(self, txid: int) -> None:
        """Make the contents checkpoint ``txid``, which completed everywhere: commit it if it
        is the prepared transaction (its commit had not arrived), then drop the rest."""
        if self.prepared_txid() == txid:
            self.commit(txid)
        self.rollback()  # what changed after the checkpoint belongs to the abandoned run

    def prepared_txid(self) -> int | None:
        """The transaction prepared and not yet committed or rolled back, or None."""
        return None


class KeyValueState(State):
    """A key-value state (Storm's KeyValueState). Keys and values must be msgpack-able
    for Redis (str, int, float, bool, None, bytes, lists and dicts of them)."""

    @abc.abstractmethod
    def put(self, key: Any, value: Any) -> None: ...

    @abc.abstractmethod
    def get(self, key: Any, default: Any = None) -> Any: ...

    @abc.abstractmethod
    def delete(self, key: Any) -> Any:
        """Remove ``key``; returns its value (or None)."""

    @abc.abstractmethod
    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every (key, value) of the current contents."""

    def __iter__(self) -> Iterator[tuple[Any, Any]]:
        return self.items()


def _freeze(key: Any) -> Any:
    """Keys as msgpack gives them back (lists -> tuples), so a dict can hold them."""
    if isinstance(key, list):
        return tuple(_freeze(k) for k in key)
    return key


class InMemoryKeyValueState(KeyValueState):
    """The state in this process only (Storm's InMemoryKeyValueState): gone with the worker."""

    def __init__(self) -> None:
        self._state: dict[Any, Any] = {}
        self._prepared: tuple[int, dict[Any, Any]] | None = None
        self._committed: tuple[int, dict[Any, Any]] | None = None

    def put(self, key: Any, value: Any) -> None:
        self._state[_freeze(key)] = value

    def get(self, key: Any, default: Any = None) -> Any:
        return self._state.get(_freeze(key), default)

    def delete(self, key: Any) -> Any:
        return self._state.pop(_freeze(key), None)

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(list(self._state.items()))

    def __len__(self) -> int:
        return len(self._state)

    def prepare_commit(self, txid: int) -> None:
        if self._prepared is not None and txid > self._prepared[0]:
            raise StateError(f"cannot prepare transaction {txid}: transaction "
                             f"{self._prepared[0]} is prepared and not committed")
        self._prepared = (txid, dict(self._state))

    def commit(self, txid: int | None = None) -> None:
        if txid is None:
            self._committed = (-1, dict(self._state))
            return
        if self._prepared is None and (self._committed is None or self._committed[0] == txid):
            return  # restarted (nothing prepared here), or committed already (a resent COMMIT)
        if self._prepared is None or self._prepared[0] != txid:
            raise StateError(f"cannot commit transaction {txid}: the prepared one is "
                             f"{None if self._prepared is None else self._prepared[0]}")
        self._committed, self._prepared = self._prepared, None

    def rollback(self) -> None:
        self._prepared = None
        self._state = dict(self._committed[1]) if self._committed else {}

    def prepared_txid(self) -> int | None:
        return None if self._prepared is None else self._prepared[0]


_TOMBSTONE = object()


def _pack(value: Any) -> bytes:
    try:
        return msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise StateError(f"state value {value!r:.80} cannot be saved: {exc} (keys and values "
                         "must be str, int, float, bool, None, bytes, or lists/dicts of them)"
                         ) from None


def _unpack(raw: bytes) -> Any:
    return msgpack.unpackb(raw, raw=False, strict_map_key=False)


def _unpack_key(raw: bytes) -> Any:
    return _freeze(msgpack.unpackb(raw, raw=False, strict_map_key=False, use_list=False))


class StoredKeyValueState(KeyValueState):
    """What a key-value state kept in a store shares (Redis here, PostgreSQL in the JDBC
    connector): writes since the last prepare, the prepared transaction's writes, and the
    committed values read so far, layered in that order; keys and values stored as msgpack.
    A subclass reads one committed key (:meth:`_read_committed`) or them all
    (:meth:`_read_all_committed`) and does prepare, commit and rollback in its store. Reads
    are cached: a namespace belongs to one task, so nobody else writes it."""

    def __init__(self) -> None:
        #: Writes since the last prepare (a value, or _TOMBSTONE for a delete).
        self._pending: dict[Any, Any] = {}
        #: Writes of the prepared transaction, until it commits or rolls back.
        self._prepared: dict[Any, Any] = {}
        #: Committed values read so far (key -> value or _TOMBSTONE for absent).
        self._cache: dict[Any, Any] = {}
        self._prepared_txid: int | None = None

    @abc.abstractmethod
    def _read_committed(self, packed_key: bytes) -> bytes | None:
        """The committed value of a key (both msgpack), None if there is none."""

    @abc.abstractmethod
    def _read_all_committed(self) -> Iterator[tuple[bytes, bytes]]:
        """Every committed (key, value), msgpack."""

    def _committed_value(self, key: Any) -> Any:
        hit = self._cache.get(key, None)
        if hit is not None or key in self._cache:
            return hit
        raw = self._read_committed(_pack(key))
        value = _TOMBSTONE if raw is None else _unpack(raw)
        self._cache[key] = value
        return value

    def put(self, key: Any, value: Any) -> None:
        _pack(value)  # a value that cannot be saved fails here, in the bolt's execute
        self._pending[_freeze(key)] = value

    def get(self, key: Any, default: Any = None) -> Any:
        key = _freeze(key)
        for layer in (self._pending, self._prepared):
            if key in layer:
                v = layer[key]
                return default if v is _TOMBSTONE else v
        v = self._committed_value(key)
        return default if v is _TOMBSTONE else v

    def delete(self, key: Any) -> Any:
        old = self.get(key)
        self._pending[_freeze(key)] = _TOMBSTONE
        return old

    def items(self) -> Iterator[tuple[Any, Any]]:
        merged = {_unpack_key(k): _unpack(v) for k, v in self._read_all_committed()}
        for layer in (self._prepared, self._pending):
            for k, v in layer.items():
                if v is _TOMBSTONE:
                    merged.pop(k, None)
                else:
                    merged[k] = v
        return iter(list(merged.items()))

    def prepared_txid(self) -> int | None:
        return self._prepared_txid

    def _applied(self) -> None:
        """The prepared writes are committed: they become what the cache knows."""
        self._cache.update(self._prepared)
        self._prepared = {}
        self._prepared_txid = None

    def _dropped(self) -> None:
        """Rolled back: what was written and prepared is gone."""
        self._pending = {}
        self._prepared = {}
        self._prepared_txid = None


class RedisKeyValueState(StoredKeyValueState):
    """The state in a Redis hash (storm-redis's RedisKeyValueState, atomic commits).

    Keys of one namespace ``ns`` (under the prefix): ``ns`` is the committed hash,
    ``ns$prepare`` the prepared changes, ``ns$txid`` the last prepared and committed
    transaction ids. ``commit`` applies the prepared changes in one MULTI/EXEC, so a
    worker killed mid-commit leaves either the old state or the new one.
    """

    def __init__(self, namespace: str, client: Any, prefix: str = ""):
        super().__init__()
        self.key = f"{prefix}{namespace}"
        self.prepare_key = self.key + "$prepare"
        self.txid_key = self.key + "$txid"
        self.redis = client
        # A prepared transaction left by a dead worker stays until the checkpoint spout
        # says commit (it was prepared everywhere) or rollback.
        for raw_k, raw_v in self._hgetall(self.prepare_key).items():
            self._prepared[_unpack_key(raw_k)] = _TOMBSTONE if raw_v == b"" else _unpack(raw_v)
        txids = self.txids()
        self._prepared_txid = txids["prepare"] \
            if txids.get("prepare", -2) > txids.get("commit", -2) else None

    @contextlib.contextmanager
    def _redis(self, doing: str, key: str | None = None) -> Iterator[None]:
        """redis-py's errors (connection, auth, wrong type) as a StateError: ``doing`` says
        what failed, with the hash's name for ``{}``."""
        try:
            yield
        except Exception as exc:
            raise StateError(f"cannot {doing.format(repr(key or self.key))}: {exc}") from None

    def _hgetall(self, key: str) -> dict[bytes, bytes]:
        with self._redis("read state {} from Redis", key):
            return self.redis.hgetall(key)

    def _read_committed(self, packed_key: bytes) -> bytes | None:
        with self._redis("read state {} from Redis"):
            return self.redis.hget(self.key, packed_key)

    def _read_all_committed(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(self._hgetall(self.key).items())

    def txids(self) -> dict[str, int]:
        """The last prepared and committed transaction ids Redis holds (``prepare``, ``commit``)."""
        return {k.decode(): int(v) for k, v in self._hgetall(self.txid_key).items()}

    def prepare_commit(self, txid: int) -> None:
        self._prepared.update(self._pending)
        self._pending = {}
        fields = {_pack(k): (b"" if v is _TOMBSTONE else _pack(v))
                  for k, v in self._prepared.items()}
        with self._redis("prepare state {} in Redis"), \
                self.redis.pipeline(transaction=True) as p:
            p.delete(self.prepare_key)
            if fields:
                p.hset(self.prepare_key, mapping=fields)
            p.hset(self.txid_key, "prepare", txid)
            p.execute()
        self._prepared_txid = txid

    def commit(self, txid: int | None = None) -> None:
        if txid is None:  # commit the contents now (Storm's commit())
            self._prepared.update(self._pending)
            self._pending = {}
            txid = -1
        puts = {_pack(k): _pack(v) for k, v in self._prepared.items() if v is not _TOMBSTONE}
        dels = [_pack(k) for k, v in self._prepared.items() if v is _TOMBSTONE]
        with self._redis("commit state {} to Redis"), \
                self.redis.pipeline(transaction=True) as p:
            if puts:
                p.hset(self.key, mapping=puts)
            if dels:
                p.hdel(self.key, *dels)
            p.delete(self.prepare_key)
            p.hset(self.txid_key, "commit", txid)
            p.execute()
        self._applied()

    def rollback(self) -> None:
        self._dropped()
        with self._redis("roll back state {} in Redis"):
            self.redis.delete(self.prepare_key)


class StateProvider(abc.ABC):
    """Makes a task's state (Storm's StateProvider). Name a subclass in
    ``topology.state.provider`` as ``package.module.Class``; it is imported and
    instantiated (no arguments) in the worker that runs the bolt."""

    @abc.abstractmethod
    def new_state(self, namespace: str, conf: Mapping[str, Any], context: Any) -> State: ...


class InMemoryKeyValueStateProvider(StateProvider):
    def new_state(self, namespace: str, conf: Mapping[str, Any], context: Any) -> State:
        return InMemoryKeyValueState()


def redis_settings(conf: Mapping[str, Any]) -> dict[str, Any]:
    """Where Redis state lives: Storm's ``topology.state.provider.config`` JSON
    (``{"jedisPoolConfig": {"host", "port", "database", "password", "timeOut"},
    "keyPrefix"}``) over the ``trident.redis.*`` keys."""
    out = {"host": conf.get(cfg.TRIDENT_REDIS_HOST, "127.0.0.1"),
           "port": int(conf.get(cfg.TRIDENT_REDIS_PORT, 6379)),
           "db": int(conf.get(cfg.TRIDENT_REDIS_DB, 0)),
           "password": conf.get(cfg.TRIDENT_REDIS_PASSWORD),
           "timeout": float(conf.get(cfg.TRIDENT_REDIS_TIMEOUT_SECS, 5)),
           "prefix": conf.get(cfg.TRIDENT_REDIS_KEY_PREFIX, "squall:trident:") + "state:"}
    raw = conf.get(cfg.TOPOLOGY_STATE_PROVIDER_CONFIG)
    if raw:
        try:
            given = json.loads(raw) if isinstance(raw, str) else dict(raw)
        except (ValueError, TypeError) as exc:
            raise StateError(f"{cfg.TOPOLOGY_STATE_PROVIDER_CONFIG} is not JSON: {exc}") from None
        pool = given.get("jedisPoolConfig") or {}
        for ours, storms in (("host", "host"), ("port", "port"), ("db", "database"),
                             ("password", "password")):
            if storms in pool:
                out[ours] = pool[storms]
        if "timeOut" in pool:  # Storm's is milliseconds
            out["timeout"] = float(pool["timeOut"]) / 1000
        if "keyPrefix" in given:
            out["prefix"] = str(given["keyPrefix"])
    return out


class RedisKeyValueStateProvider(StateProvider):
    def new_state(self, namespace: str, conf: Mapping[str, Any], context: Any) -> State:
        from .extras import require
        require("trident-redis", "Redis bolt state (RedisKeyValueState)")
        import redis

        s = redis_settings(conf)
        client = redis.Redis(host=s["host"], port=s["port"], db=s["db"], password=s["password"],
                             socket_timeout=s["timeout"], socket_connect_timeout=s["timeout"])
        return RedisKeyValueState(namespace, client, s["prefix"])


def provider_name(conf: Mapping[str, Any]) -> str:
    """``memory``, ``redis`` or a dotted class name: what :func:`get_state` will use."""
    name = conf.get(cfg.TOPOLOGY_STATE_PROVIDER)
    if not name:
        return "redis" if conf.get(cfg.TOPOLOGY_STATE_PROVIDER_CONFIG) else "memory"
    return PROVIDER_ALIASES.get(name, name)


def provider_problem(conf: Mapping[str, Any]) -> str | None:
    """Why ``topology.state.provider`` cannot name a provider, or None (checked at submit,
    without importing anything)."""
    name = provider_name(conf)
    if name in ("memory", "redis"):
        return None
    parts = str(name).rsplit(".", 1)
    if len(parts) != 2 or not all(p.replace(".", "").replace("_", "").isalnum() for p in parts):
        return (f"{cfg.TOPOLOGY_STATE_PROVIDER} is {name!r}: give memory, redis or a "
                "StateProvider's dotted class name (package.module.Class)")
    return None


def get_state(namespace: str, conf: Mapping[str, Any], context: Any = None) -> State:
    """The state of one namespace from the topology's provider (Storm's StateFactory.getState)."""
    name = provider_name(conf)
    if name == "memory":
        provider: StateProvider = InMemoryKeyValueStateProvider()
    elif name == "redis":
        provider = RedisKeyValueStateProvider()
    else:
        module, _, cls = name.rpartition(".")
        try:
            obj = getattr(importlib.import_module(module), cls)()
        except (ImportError, AttributeError) as exc:
            raise StateError(f"{cfg.TOPOLOGY_STATE_PROVIDER} {name!r} cannot be loaded: {exc}"
                             ) from None
        if not isinstance(obj, StateProvider):
            raise StateError(f"{cfg.TOPOLOGY_STATE_PROVIDER} {name!r} is not a "
                             "squall.client.state.StateProvider")
        provider = obj
    return provider.new_state(namespace, conf, context)
