"""Where the Redis bolts connect: one server (storm-redis's ``JedisPoolConfig``) or a
Redis Cluster (``JedisClusterConfig``).

A single server's settings left unset come from the topology conf's ``trident.redis.*``
keys when the bolt is prepared, the keys Trident's Redis map states read, so a topology
names its Redis once for both. A cluster is named by its seed nodes; redis-py finds the
rest and follows the slots' moves.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...client import config as cfg
from ...client.trident.state.redis_map import connect, redis_settings

import redis  # noqa: E402  (the redis extra: connectors/redis/__init__.py checked it)
from redis.cluster import RedisCluster  # noqa: E402


def _node(spec: Any) -> tuple[str, int]:
    """``"host:port"`` or ``(host, port)``."""
    if isinstance(spec, str):
        host, sep, port = spec.rpartition(":")
        if not sep or not host:
            raise ValueError(f"a cluster node is host:port, not {spec!r}")
        spec = (host.strip("[]"), port)
    try:
        host, port = spec
        port = int(port)
    except (TypeError, ValueError):
        raise ValueError(f"a cluster node is host:port or (host, port), not {spec!r}") from None
    if not 0 < port < 65536:
        raise ValueError(f"cluster node {host}:{port}: the port is out of range")
    return str(host), port


class RedisConfig:
    """The bolts' Redis: ``RedisConfig(host=..., port=...)`` for one server (unset fields
    from the topology's ``trident.redis.*`` keys), ``RedisConfig(nodes=["h1:7000", ...])``
    for a cluster. Checked here, so a mistake surfaces when the topology is built."""

    def __init__(self, host: str | None = None, port: int | None = None, db: int | None = None,
                 password: str | None = None, timeout_secs: float | None = None,
                 nodes: Sequence[Any] | None = None):
        self._args = {"host": host, "port": port, "db": db, "password": password,
                      "timeout_secs": timeout_secs}
        given = {cfg.TRIDENT_REDIS_HOST: host, cfg.TRIDENT_REDIS_PORT: port,
                 cfg.TRIDENT_REDIS_DB: db, cfg.TRIDENT_REDIS_PASSWORD: password,
                 cfg.TRIDENT_REDIS_TIMEOUT_SECS: timeout_secs}
        #: The settings given here; they win over the topology conf's.
        self.given = {k: v for k, v in given.items() if v is not None}
        redis_settings(self.given)  # raises on a bad value
        self.nodes = [_node(n) for n in nodes] if nodes else None
        if self.nodes and (db or host or port):
            raise ValueError("a Redis Cluster is named by its nodes alone (and has one db, 0)")

    def settings(self, conf: Mapping[str, Any] | None) -> dict[str, Any]:
        """The connection settings under the topology conf ``conf``."""
        return redis_settings(conf, self.given)

    def describe(self, conf: Mapping[str, Any] | None) -> str:
        """Where it connects, for errors and logs."""
        if self.nodes:
            return "Redis Cluster " + ",".join(f"{h}:{p}" for h, p in self.nodes)
        s = self.settings(conf)
        return f"Redis {s[cfg.TRIDENT_REDIS_HOST]}:{s[cfg.TRIDENT_REDIS_PORT]}"

    def client(self, conf: Mapping[str, Any] | None) -> redis.Redis | RedisCluster:
        """A redis-py client answering str (Storm's bolts see Strings), which never sends a
        command twice (a spout replays instead); one server's connects on first use, a
        cluster's at once (RedisClusterException when it cannot)."""
        return connect(self.settings(conf), self.nodes, decode_responses=True, retries=False)

    def __repr__(self) -> str:
        if self.nodes:
            return f"RedisConfig(nodes={[f'{h}:{p}' for h, p in self.nodes]})"
        shown = {k: ("***" if k == "password" else v) for k, v in self._args.items()
                 if v is not None}
        return f"RedisConfig({', '.join(f'{k}={v!r}' for k, v in shown.items())})"
