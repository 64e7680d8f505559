"""storm-redis's bolts: look up, store and filter on tuples' keys in Redis.

As Storm's, each input tuple is one Redis command (its key and value from the bolt's
mapper), acked once the command succeeded and failed (its spout replays it) when it did
not. Unlike Storm's, which makes a round trip per tuple, the bolts take a whole executor
step of tuples at once (``execute_batch``, up to 256) and send their commands in one
pipeline: one round trip a step, with each tuple still acked or failed on its own
command's reply.

Errors are reported, at most once a second per kind, with what was wrong and where:
a tuple the mapper cannot map (reported with its key, the tuple failed), a command Redis
refused (a wrong type under the key: that tuple failed) and Redis unreachable (every
tuple of the step failed, replayed once it is back).
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from ...client import config as cfg
from ...client import extras
from ...client.components import Bolt
from ...client.stateful import failures_rewind
from ...client.tuple import DEFAULT_STREAM, Tuple
from ..reports import Reports
from .mapper import (MappingError, RedisDataType, RedisFilterMapper, RedisLookupMapper,
                     RedisStoreMapper, as_text)

extras.require("redis", "squall.connectors.redis")

import redis  # noqa: E402
from redis.exceptions import RedisClusterException  # noqa: E402

from .config import RedisConfig  # noqa: E402

log = logging.getLogger("squall.connectors.redis")

T = RedisDataType


def _text(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}" if not isinstance(e, (MappingError, redis.RedisError)) \
        else str(e)


#: Replies that say the server cannot take the command now, not that it refuses it as it is:
#: the tuple fails (and replays) rather than being dropped as a bad one.
PASSING_REFUSALS = ("READONLY", "OOM", "CLUSTERDOWN", "TRYAGAIN", "NOPERM", "LOADING", "BUSY",
                    "MASTERDOWN", "NOREPLICAS", "MISCONF", "MOVED", "ASK", "NOAUTH",
                    "WRONGPASS", "NOSCRIPT", "UNBLOCKED")


def refused_as_is(reply: BaseException) -> bool:
    """Whether an error reply refuses the command for what it is (``WRONGTYPE``, a value
    out of range), so the same tuple would be refused again."""
    # redis-py turns the codes it knows into classes (and drops the code from the text).
    if isinstance(reply, _PASSING_CLASSES):
        return False
    code = str(reply).split(" ", 1)[0].upper()
    return code not in PASSING_REFUSALS


_PASSING_CLASSES = (redis.exceptions.ReadOnlyError, redis.exceptions.OutOfMemoryError,
                    redis.exceptions.BusyLoadingError, redis.exceptions.AuthenticationError,
                    redis.exceptions.NoPermissionError, redis.exceptions.NoScriptError,
                    redis.exceptions.ClusterError, redis.exceptions.ClusterDownError,
                    redis.exceptions.TryAgainError, redis.exceptions.MovedError,
                    redis.exceptions.AskError, redis.exceptions.MasterDownError)


def _score(value: Any) -> float:
    try:
        if isinstance(value, bool):
            raise TypeError
        return float(value)
    except (TypeError, ValueError):
        raise MappingError(f"a sorted set's value is its score, a number, not {value!r}") from None


def _position(value: Any) -> tuple[float, float]:
    """``(longitude, latitude)``, or Storm's ``"longitude:latitude"``."""
    try:
        lon, lat = value.split(":") if isinstance(value, str) else value
        return float(lon), float(lat)
    except (TypeError, ValueError, AttributeError):
        raise MappingError(f"a geo value is (longitude, latitude) or \"longitude:latitude\", "
                           f"not {value!r}") from None


class _RedisBolt(Bolt):
    """What the three bolts share: the client, the pipeline per step, the reports."""

    #: The hosts running it need redis-py (a cluster without it refuses the topology).
    requires_extras = ("redis",)

    def __init__(self, config: RedisConfig | None, mapper: Any):
        self.config = config if config is not None else RedisConfig()
        self.mapper = mapper
        self.data_type = mapper.description.data_type
        self.additional_key = mapper.description.additional_key

    def get_component_configuration(self) -> dict[str, Any]:
        # A thread of its own: each step waits on a round trip to Redis (the GIL let go),
        # and an unreachable server on its connect timeout; on the worker's shared loop
        # either would hold every other executor of the worker.
        return {cfg.TOPOLOGY_EXECUTOR_THREADED: True}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.component = context.this_component_id
        self.conf = conf
        self.where = self.config.describe(conf)
        #: Made at the first step (a cluster's client connects when made: a cluster that is
        #: down then fails a step, not the worker's start).
        self.client: Any = None
        #: The data type's command, queued on a pipeline (made here: lambdas do not pickle).
        self.op = self.operations()[self.data_type]
        self.reports = Reports(collector, drop_bad=failures_rewind(conf, context))

    def cleanup(self) -> None:
        if getattr(self, "client", None) is not None:
            self.client.close()

    def execute(self, tup: Tuple) -> None:
        self.execute_batch([tup])

    def execute_batch(self, tuples: list) -> None:
        work = []  # (tuple, key)
        try:
            if self.client is None:
                self.client = self.config.client(self.conf)
            pipe = self.client.pipeline(transaction=False)
        except (redis.RedisError, RedisClusterException) as e:
            return self._step_failed([t for t in tuples if not t.is_tick], e)
        try:
            for tup in tuples:
                if tup.is_tick:
                    continue
                key = None
                try:
                    key = as_text(self.mapper.key(tup), "the mapper's key")
                    self.command(pipe, tup, key)
                except Exception as e:  # the user's mapper too: that tuple fails, not the worker
                    shown = f"key {key!r}" if key is not None else "no key"
                    self.reports.bad_tuple(tup, "mapping", f"{self.component}: a tuple from "
                                           f"{tup.component} ({shown}) does not map to Redis "
                                           f"{self.data_type.name}: {_text(e)}")
                    continue
                work.append((tup, key))
            if not work:
                return
            try:
                replies = pipe.execute(raise_on_error=False)
            except (redis.RedisError, RedisClusterException) as e:
                return self._step_failed([t for t, _ in work], e)
        finally:
            pipe.reset()
        for (tup, key), reply in zip(work, replies):
            if isinstance(reply, Exception):
                text = (f"{self.component}: {self.where} refused the command for key {key!r} "
                        f"({self.data_type.name}): {reply}")
                if refused_as_is(reply):
                    self.reports.bad_tuple(tup, "command", text)
                else:  # the server's state, which passes: replayed
                    self.reports.error("command", f"{text}; it was failed and will be replayed")
                    self.collector.fail(tup)
                continue
            try:
                self.settle(tup, key, reply)
            except Exception as e:  # the user's to_values, or its emit
                self.reports.bad_tuple(tup, "mapping", f"{self.component}: the reply for key "
                                       f"{key!r} ({self.data_type.name}) does not map to a "
                                       f"tuple: {_text(e)}")

    def _step_failed(self, tuples: list, e: BaseException) -> None:
        """Redis could not run the step: every tuple of it fails (and replays)."""
        if isinstance(e, redis.AuthenticationError) or \
                any(w in str(e) for w in ("NOAUTH", "WRONGPASS", "NOPERM")):
            what = (f"{self.where} refused the bolt's credentials ({_text(e)}): correct "
                    "trident.redis.password or the bolt's RedisConfig")
        else:
            what = (f"{self.where} is unreachable ({_text(e)}): start Redis or correct "
                    "trident.redis.host/port or the bolt's RedisConfig")
            if self.config.nodes:
                self.client = None  # a cluster's client is made again (it learns the slots)
        self._report("unavailable", f"{self.component}: {what}; the step's {len(tuples)} "
                     "tuple(s) were failed and will be replayed")
        for tup in tuples:
            self.collector.fail(tup)

    def operations(self) -> dict[RedisDataType, Callable]:
        """Each data type's command, queued on a pipeline: ``op(pipe, key[, value])``."""
        raise NotImplementedError

    def command(self, pipe: Any, tup: Tuple, key: Any) -> None:
        """Queue the tuple's command on ``pipe`` (MappingError: it does not map)."""
        raise NotImplementedError

    def settle(self, tup: Tuple, key: Any, reply: Any) -> None:
        """The command succeeded with ``reply``: emit what follows and ack."""
        self.collector.ack(tup)

    def _report(self, kind: str, text: str) -> None:
        self.reports.error(kind, text)


class RedisLookupBolt(_RedisBolt):
    """Reads each tuple's key and emits what the mapper makes of the value, anchored to
    the input (Storm's ``RedisLookupBolt``): STRING ``GET``, LIST ``LPOP`` (it takes the
    head, as Storm's does), HASH ``HGET``, SET ``SCARD``, SORTED_SET ``ZSCORE``,
    HYPER_LOG_LOG ``PFCOUNT``, GEO ``GEOPOS`` ((longitude, latitude) or None).

    Example::

        bolt = RedisLookupBolt(RedisConfig(), FieldLookupMapper("hash", "word",
                               ("word", "count"), additional_key="counts"))
    """

    def __init__(self, config: RedisConfig | None, mapper: RedisLookupMapper):
        super().__init__(config, mapper)

    def operations(self) -> dict[RedisDataType, Callable]:
        add = self.additional_key
        return {
            T.STRING: lambda p, k: p.get(k),
            T.LIST: lambda p, k: p.lpop(k),
            T.HASH: lambda p, k: p.hget(add, k),
            T.SET: lambda p, k: p.scard(k),
            T.SORTED_SET: lambda p, k: p.zscore(add, k),
            T.HYPER_LOG_LOG: lambda p, k: p.pfcount(k),
            T.GEO: lambda p, k: p.geopos(add, k),
        }

    def command(self, pipe: Any, tup: Tuple, key: Any) -> None:
        self.op(pipe, key)

    def settle(self, tup: Tuple, key: Any, reply: Any) -> None:
        if self.data_type is T.GEO:  # [longitude, latitude]: a list wherever it goes
            reply = [float(x) for x in reply[0]] if reply and reply[0] is not None else None
        for values in self.mapper.to_values(tup, reply):
            self.collector.emit(list(values), anchors=tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer: Any) -> None:
        self.mapper.declare_output_fields(declarer)


class RedisStoreBolt(_RedisBolt):
    """Writes each tuple's value under its key (Storm's ``RedisStoreBolt``): STRING
    ``SET``, LIST ``RPUSH``, HASH ``HSET``, SET ``SADD``, SORTED_SET ``ZADD`` (the value is
    the score), HYPER_LOG_LOG ``PFADD``, GEO ``GEOADD`` (the value is (longitude,
    latitude)). Emits nothing; the tuple is acked once Redis took the write.

    Example::

        bolt = RedisStoreBolt(RedisConfig(), FieldStoreMapper("string", "word", "count"))
    """

    def __init__(self, config: RedisConfig | None, mapper: RedisStoreMapper):
        super().__init__(config, mapper)

    def operations(self) -> dict[RedisDataType, Callable]:
        add = self.additional_key
        return {
            T.STRING: lambda p, k, v: p.set(k, as_text(v, "the value")),
            T.LIST: lambda p, k, v: p.rpush(k, as_text(v, "the value")),
            T.HASH: lambda p, k, v: p.hset(add, k, as_text(v, "the value")),
            T.SET: lambda p, k, v: p.sadd(k, as_text(v, "the value")),
            T.SORTED_SET: lambda p, k, v: p.zadd(add, {k: _score(v)}),
            T.HYPER_LOG_LOG: lambda p, k, v: p.pfadd(k, as_text(v, "the value")),
            T.GEO: lambda p, k, v: p.geoadd(add, (*_position(v), k)),
        }

    def command(self, pipe: Any, tup: Tuple, key: Any) -> None:
        self.op(pipe, key, self.mapper.value(tup))


class RedisFilterBolt(_RedisBolt):
    """Lets through the tuples whose key is present and drops the rest (Storm's
    ``RedisFilterBolt``); both are acked. STRING: the key exists; HASH, SORTED_SET, GEO: the
    key is a field or member of ``additional_key``; SET: a member of ``additional_key``;
    HYPER_LOG_LOG: the key's count is above 0. A tuple let through goes on with its values
    unchanged, on ``stream`` (the default stream unless given).

    Example::

        bolt = RedisFilterBolt(RedisConfig(), FieldFilterMapper("set", "user", ["user", "event"],
                               additional_key="allowed-users"))
    """

    def __init__(self, config: RedisConfig | None, mapper: RedisFilterMapper,
                 stream: str = DEFAULT_STREAM):
        super().__init__(config, mapper)
        if self.data_type is T.SET and not self.additional_key:
            raise ValueError("RedisFilterBolt on a SET needs additional_key: the set its keys "
                             "are looked for in")
        if self.data_type is T.LIST:
            raise ValueError("RedisFilterBolt cannot filter on a LIST (Storm's neither): use "
                             "STRING to test that a key exists whatever its type")
        self.stream = stream

    def operations(self) -> dict[RedisDataType, Callable]:
        add = self.additional_key
        return {
            T.STRING: lambda p, k: p.exists(k),
            T.SET: lambda p, k: p.sismember(add, k),
            T.HASH: lambda p, k: p.hexists(add, k),
            T.SORTED_SET: lambda p, k: p.zscore(add, k),
            T.HYPER_LOG_LOG: lambda p, k: p.pfcount(k),
            T.GEO: lambda p, k: p.geopos(add, k),
        }

    def command(self, pipe: Any, tup: Tuple, key: Any) -> None:
        self.op(pipe, key)

    def settle(self, tup: Tuple, key: Any, reply: Any) -> None:
        if self.data_type is T.GEO:
            found = bool(reply) and reply[0] is not None
        elif self.data_type is T.SORTED_SET:
            found = reply is not None
        else:
            found = bool(reply)
        if found:
            self.collector.emit(list(tup.values), stream=self.stream, anchors=tup)
        self.collector.ack(tup)

    def declare_output_fields(self, declarer: Any) -> None:
        self.mapper.declare_output_fields(_OnStream(declarer, self.stream))


class _OnStream:
    """A declarer whose ``declare`` declares ``stream`` (the filter's mapper declares the
    fields; the bolt says on which stream)."""

    def __init__(self, declarer: Any, stream: str):
        self.declarer = declarer
        self.stream = stream

    def declare(self, fields: Any, direct: bool = False, stream: str | None = None) -> None:
        self.declarer.declare_stream(stream or self.stream, fields, direct)

    def declare_stream(self, stream: str, fields: Any, direct: bool = False) -> None:
        self.declarer.declare_stream(stream, fields, direct)
