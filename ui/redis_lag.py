"""Redis stream spouts' lag for the UI, read from Redis: for each spout whose component
configuration names a stream (``redis.stream.key``, as RedisStreamSpout publishes it), its
consumer group's figures (``XINFO GROUPS``), in the lag endpoint's shape beside Kafka's::

    {"events": {"spoutId": "events", "spoutType": "REDIS_STREAM",
                "spoutLagResult": {"<stream>": {"group": "squall-wc", "length": 100,
                                                "entriesRead": 90, "lag": 10, "pending": 3}}}}

``lag`` is the entries the group has not read yet, ``pending`` those read and not yet
acknowledged. ``errorInfo`` replaces ``spoutLagResult`` when Redis cannot be read; every
call is bounded by the request's deadline. Needs redis-py (``squall[redis]``) on the UI's
host.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from ..client import config as cfg
from ..client.extras import MissingExtra, require
from .spout_lag import LagError, lag_entries, new_deadline, spout_confs


def stream_spouts(topology: Any) -> dict[str, dict]:
    """spout id -> its component configuration, for the spouts that read a Redis stream."""
    return spout_confs(topology, lambda c: bool(c.get(cfg.REDIS_STREAM_KEY)))


def stream_lag(topology: Any, topology_name: str, topology_conf: Mapping[str, Any],
               deadline: float | None = None) -> dict[str, dict]:
    """The lag of every Redis stream spout of ``topology``, read by ``deadline``
    (monotonic; default LAG_DEADLINE_SECS from now)."""
    end = deadline if deadline is not None else new_deadline()
    return lag_entries(stream_spouts(topology), "REDIS_STREAM", lambda sid, conf: _group_lag(
        conf, topology_name, topology_conf, end))


def _group_lag(conf: Mapping[str, Any], topology_name: str, topology_conf: Mapping[str, Any],
               deadline: float) -> dict:
    try:
        require("redis", "the UI's Redis stream lag")
    except MissingExtra as e:
        raise LagError(str(e)) from None
    import redis

    from ..client.trident.state.redis_map import connect, redis_settings

    stream = conf[cfg.REDIS_STREAM_KEY]
    group = conf.get(cfg.REDIS_STREAM_GROUP) or cfg.redis_stream_group(topology_name)
    s = redis_settings(topology_conf, {k: v for k, v in conf.items()
                                       if k.startswith("trident.redis.")})
    s[cfg.TRIDENT_REDIS_TIMEOUT_SECS] = max(0.1, min(float(s[cfg.TRIDENT_REDIS_TIMEOUT_SECS]),
                                                     deadline - time.monotonic()))
    nodes = [n.rsplit(":", 1) for n in conf.get(cfg.REDIS_STREAM_NODES) or []]
    where = ",".join(conf.get(cfg.REDIS_STREAM_NODES) or []) or \
        f"{s[cfg.TRIDENT_REDIS_HOST]}:{s[cfg.TRIDENT_REDIS_PORT]}"
    try:
        client = connect(s, nodes, decode_responses=True)
        try:
            groups = client.xinfo_groups(stream)
            length = client.xlen(stream)
        finally:
            client.close()
    except redis.ResponseError as e:
        if "no such key" in str(e).lower():
            raise LagError(f"stream {stream!r} does not exist on Redis {where}") from None
        raise LagError(f"Redis {where} refused XINFO GROUPS {stream}: {e}") from None
    except redis.RedisError as e:
        raise LagError(f"cannot read stream {stream!r} from Redis {where}: {e}") from None
    for g in groups:
        if g.get("name") == group:
            return {stream: {"group": group, "length": length,
                             "entriesRead": g.get("entries-read"), "lag": g.get("lag"),
                             "pending": g.get("pending")}}
    raise LagError(f"stream {stream!r} on Redis {where} has no consumer group {group!r} "
                    "yet (the spout makes it when it first runs)")
