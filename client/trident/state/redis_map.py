"""Trident map states in Redis: a backing map on redis-py and the factory that builds it in the worker.

Storm's ``storm-redis`` ``RedisMapState`` (``AbstractRedisMapState`` +
``RedisMapState.Factory``). Each state is one Redis hash, ``<prefix><name>``
(prefix from ``trident.redis.key.prefix``), whose fields are the JSON keys
(:func:`~.backing.encode_key`) and whose values are the JSON values of Storm's
serializers. A hash rather than Storm's default of one string key per entry:
a state is then one Redis key that can be inspected, expired, renamed or
dropped at once (no ``SCAN`` over a prefix), and its entries cannot collide
with other keys in the database; HMGET and multi-field HSET keep each batch
read or write a single command, hence one round trip. What a hash gives up —
spreading one state over a Redis Cluster, per-entry expiry — we do not use.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Mapping, Sequence

from ... import config as cfg
from ...extras import require

require("trident-redis", "Trident's Redis map state (RedisMapState)")

import redis  # noqa: E402

from .backing import BackingMap, Codec, Key, check_lengths, encode_key  # noqa: E402
from .base import REDIS_START_HINT, RedisUnavailable, StateError, StateType  # noqa: E402
from .factory import MapStateFactory  # noqa: E402
from .map_state import GLOBAL_KEY  # noqa: E402

#: The config keys a Redis map state reads.
REDIS_KEYS = (cfg.TRIDENT_REDIS_HOST, cfg.TRIDENT_REDIS_PORT, cfg.TRIDENT_REDIS_DB,
              cfg.TRIDENT_REDIS_PASSWORD, cfg.TRIDENT_REDIS_KEY_PREFIX, cfg.TRIDENT_REDIS_TIMEOUT_SECS)


def redis_settings(*layers: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``trident.redis.*`` keys: defaults < each layer in turn, checked."""
    known = cfg.known_keys()
    out = {k: known[k].default for k in REDIS_KEYS}
    for layer in layers:
        if layer:
            out.update({k: v for k, v in cfg.normalize(layer).items() if k in out})
    for k, v in out.items():
        cfg.check_value(k, v)
    return out


def connect(settings: Mapping[str, Any], nodes: Sequence[tuple[str, int]] | None = None,
            decode_responses: bool = False, retries: bool = True) -> Any:
    """A redis-py client for :func:`redis_settings` (a ``RedisCluster`` of the seed
    ``nodes`` when given); a single server's connects on first use, a cluster's at once, to
    learn its slots.

    ``retries``: redis-py's default retries (with backoff) on connection errors and time-outs,
    which send a command (or a whole pipeline) again. Right for Trident's states (HMGET and
    HSET of the same values are idempotent); wrong for a bolt's LPOP or RPUSH, which would
    pop or push twice: the connectors pass False and let the spout replay instead.
    ``decode_responses`` answers str, a byte that is not UTF-8 as U+FFFD (as Jedis does).
    """
    timeout = settings[cfg.TRIDENT_REDIS_TIMEOUT_SECS]
    extra: dict[str, Any] = {}
    if not retries:
        from redis.backoff import NoBackoff
        from redis.retry import Retry
        extra["retry"] = Retry(NoBackoff(), 0)
    if decode_responses:
        extra.update(decode_responses=True, encoding_errors="replace")
    if nodes:
        from redis.cluster import ClusterNode, RedisCluster
        return RedisCluster(startup_nodes=[ClusterNode(h, int(p)) for h, p in nodes],
                            password=settings[cfg.TRIDENT_REDIS_PASSWORD],
                            socket_timeout=timeout, socket_connect_timeout=timeout, **extra)
    return redis.Redis(host=settings[cfg.TRIDENT_REDIS_HOST], port=settings[cfg.TRIDENT_REDIS_PORT],
                       db=settings[cfg.TRIDENT_REDIS_DB], password=settings[cfg.TRIDENT_REDIS_PASSWORD],
                       socket_timeout=timeout, socket_connect_timeout=timeout, **extra)


class RedisBackingMap(BackingMap):
    """A backing map on one Redis hash: ``multi_get`` is one HMGET, ``multi_put`` one HSET.

    Errors come out as :class:`RedisUnavailable` (cannot connect, timed out) or
    :class:`StateError` (anything else, including a stored value that is not ours).

    Example::

        backing = RedisBackingMap(redis.Redis(port=6379), "squall:trident:counts",
                                  CODECS[StateType.OPAQUE])
    """

    def __init__(self, client: redis.Redis, hash_key: str, codec: Codec, *, name: str | None = None):
        #: The redis-py client; the map closes it in :meth:`close`.
        self.client = client
        #: The Redis key of the hash holding this state.
        self.hash_key = hash_key
        self.codec = codec
        #: The state's name, for error messages.
        self.name = name or hash_key
        kwargs = client.connection_pool.connection_kwargs
        #: ``host:port`` tried, for error messages.
        self.address = f"{kwargs.get('host')}:{kwargs.get('port')}"

    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        if not keys:
            return []
        fields = [encode_key(k) for k in keys]
        with self._errors("HMGET"):
            raw = self.client.hmget(self.hash_key, fields)
        return [None if r is None else self._decode(f, r) for f, r in zip(fields, raw)]

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        check_lengths(keys, values)
        if not keys:
            return
        # Encode everything before the one command: a bad value writes nothing.
        mapping = {encode_key(k): self.codec.encode(v) for k, v in zip(keys, values)}
        with self._errors("HSET"):
            self.client.hset(self.hash_key, mapping=mapping)

    def multi_remove(self, keys: Sequence[Key]) -> None:
        if not keys:
            return
        with self._errors("HDEL"):
            self.client.hdel(self.hash_key, *[encode_key(k) for k in keys])

    def close(self) -> None:
        self.client.close()

    def _decode(self, field: str, raw: bytes) -> Any:
        try:
            return self.codec.decode(raw)
        except (ValueError, TypeError) as e:
            raise StateError(f"state {self.name!r}: the value of {field} in Redis hash {self.hash_key!r} "
                             f"is not a {type(self.codec).__name__} value: {raw[:80]!r} ({e})",
                             self.name) from None

    @contextlib.contextmanager
    def _errors(self, op: str) -> Iterator[None]:
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise RedisUnavailable(self.address, f"state {self.name!r}: Redis at {self.address} "
                                   f"unavailable for {op}: {e}; {REDIS_START_HINT}") from e
        except redis.RedisError as e:
            raise StateError(f"state {self.name!r}: Redis {op} on {self.hash_key!r} failed: {e}",
                             self.name) from e


class RedisMapState(MapStateFactory):
    """Factories of Redis-backed map states (Storm's ``RedisMapState.opaque(...)`` and friends).

    ``conf`` holds ``trident.redis.*`` keys and wins over the topology conf the
    worker passes to :meth:`make_state`; unset keys take the shipped defaults.
    ``cache_size`` is Storm's ``localCacheSize`` (default 1000; 0 = no cache).
    The factory pickles; the client is made in :meth:`make_state`.

    Example::

        counts = RedisMapState.opaque({"trident.redis.port": 6380}, "word-counts")
        state = counts.make_state(topology_conf, partition_index=0, num_partitions=4)
    """

    #: Components hosting it need redis-py on the cluster's hosts.
    requires_extras = ("trident-redis",)

    def __init__(self, state_type: StateType, name: str, conf: Mapping[str, Any] | None = None, *,
                 cache_size: int = 1000, global_key: Key = GLOBAL_KEY):
        super().__init__(state_type, name, cache_size=cache_size, global_key=global_key)
        #: The ``trident.redis.*`` settings given here (checked now, so mistakes surface at build time).
        self.conf = {k: v for k, v in cfg.normalize(conf or {}).items() if k in REDIS_KEYS}
        redis_settings(self.conf)

    @classmethod
    def transactional(cls, conf: Mapping[str, Any] | None, name: str, **options: Any) -> "RedisMapState":
        return cls(StateType.TRANSACTIONAL, name, conf, **options)

    @classmethod
    def opaque(cls, conf: Mapping[str, Any] | None, name: str, **options: Any) -> "RedisMapState":
        return cls(StateType.OPAQUE, name, conf, **options)

    @classmethod
    def non_transactional(cls, conf: Mapping[str, Any] | None, name: str,
                          **options: Any) -> "RedisMapState":
        return cls(StateType.NON_TRANSACTIONAL, name, conf, **options)

    def hash_key(self, conf: Mapping[str, Any] | None = None) -> str:
        """The Redis key of this state's hash under ``conf`` (the topology conf)."""
        return redis_settings(conf, self.conf)[cfg.TRIDENT_REDIS_KEY_PREFIX] + self.name

    def make_backing(self, conf: Mapping[str, Any], codec: Codec, partition_index: int,
                     num_partitions: int) -> RedisBackingMap:
        settings = redis_settings(conf, self.conf)
        # Every partition writes the same hash: Trident gives each key to one partition.
        return RedisBackingMap(connect(settings), settings[cfg.TRIDENT_REDIS_KEY_PREFIX] + self.name,
                               codec, name=self.name)
