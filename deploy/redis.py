"""A private Redis for development and tests, run from Debian's ``redis-server`` package.

:class:`LocalRedis` writes a ``redis.conf`` for a server bound to a free
loopback port with its own directory (no snapshots, no append-only file unless
asked), starts ``redis-server`` in its own session and waits — bounded, by
polling ``INFO server`` until the answering process is ours — until it serves.
It is stopped by pid: SIGTERM, then SIGKILL after a bound, then the exit is
reaped. The server's log goes to ``redis.log`` in its directory;
:meth:`LocalRedis.log_tail` returns its end for error messages.

The Redis counterpart of :mod:`squall.deploy.zookeeper`; Debian's packaged
``redis-server`` service is not used. Run one by hand with
``python -m squall.deploy.redis --port 6379``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..client import config as cfg
from ..client.trident.state.base import RedisUnavailable
from .net import free_port
from .server import LocalServer, dies_with_parent, find_program, run_foreground

#: Where Debian's ``redis-server`` package puts the server.
DEBIAN_REDIS_SERVER = "/usr/bin/redis-server"
#: Overrides the server binary (e.g. one built from source).
SERVER_ENV = "SQUALL_REDIS_SERVER"
INSTALL_HINT = "install Debian's redis-server package: bash scripts/setup.sh"
LOG_FILE = "redis.log"
CONF_FILE = "redis.conf"


def installation() -> str:
    """The ``redis-server`` to run, or :class:`RedisUnavailable` naming what is missing."""
    path, tried = find_program(SERVER_ENV, DEBIAN_REDIS_SERVER, "redis-server")
    if path:
        return path
    raise RedisUnavailable(None, f"Redis cannot be started: missing {tried}; {INSTALL_HINT}")


class LocalRedis(LocalServer):
    """One Redis server on ``127.0.0.1``, owned by this process.

    Example::

        with LocalRedis() as server:
            state = RedisMapState.opaque(server.conf(), "counts").make_state({}, 0, 1)
            ...

    ``data_dir=None`` uses a fresh temporary directory, removed by :meth:`stop`;
    a given directory is kept. ``port=None`` picks a free port (and retries
    with another if the server loses the race for it). ``persistent=True``
    turns on the append-only file, so a restarted server keeps its data.
    """

    NAME = "Redis"
    LOG_FILE = LOG_FILE
    DIR_PREFIX = "squall-redis-"
    POLL_SECS = 0.05

    def __init__(self, data_dir: str | None = None, port: int | None = None, *,
                 persistent: bool = False, start_timeout: float = 15.0, host: str = "127.0.0.1",
                 cluster: bool = False):
        if cluster and port is None:
            port = _cluster_port(host)
        super().__init__(data_dir, port, start_timeout=start_timeout, host=host)
        self.persistent = persistent
        #: A one-node Redis Cluster holding every slot (for clients that speak the cluster
        #: protocol: RedisConfig(nodes=[...]) of the Redis connectors).
        self.cluster = cluster

    def start(self):
        super().start()
        if self.cluster:
            self._own_every_slot()
        return self

    def _own_every_slot(self) -> None:
        """Assign the 16,384 slots to this node and wait until the cluster says ok."""
        c = self.client()
        try:
            if int(c.cluster("INFO").get("cluster_slots_assigned", 0)) == 0:
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
            deadline = time.monotonic() + self.start_timeout
            while c.cluster("INFO").get("cluster_state") != "ok":
                if time.monotonic() > deadline:
                    raise self._unavailable(f"the one-node cluster on port {self.port} is not "
                                            f"ok after {self.start_timeout:g} s")
                time.sleep(self.POLL_SECS)
        finally:
            c.close()

    def conf(self, key_prefix: str | None = None, db: int | None = None) -> dict:
        """The config keys that point Trident's Redis map states at this server."""
        conf = {cfg.TRIDENT_REDIS_HOST: self.host, cfg.TRIDENT_REDIS_PORT: self.port}
        if key_prefix is not None:
            conf[cfg.TRIDENT_REDIS_KEY_PREFIX] = key_prefix
        if db is not None:
            conf[cfg.TRIDENT_REDIS_DB] = db
        return conf

    def client(self, **kwargs) -> redis.Redis:
        """A redis-py client for this server (the caller closes it)."""
        kwargs.setdefault("socket_timeout", 5.0)
        return redis.Redis(host=self.host, port=self.port, **kwargs)

    def ping(self) -> bool:
        """Whether something answers PING on our port right now."""
        return self._server_pid() is not None

    # --- LocalServer's hooks ----------------------------------------------------------------
    def _program(self) -> str:
        return installation()

    def _unavailable(self, message: str) -> Exception:
        return RedisUnavailable(None if self.port is None else f"{self.host}:{self.port}",
                                message)

    def _spawn(self, server: str) -> subprocess.Popen:
        assert self.dir is not None
        conf = os.path.join(self.dir, CONF_FILE)
        with open(conf, "w") as f:
            f.write(f"bind {self.host}\n"
                    f"port {self.port}\n"
                    f"dir {_quote(self.dir)}\n"
                    "daemonize no\n"
                    "supervised no\n"
                    'logfile ""\n'  # stdout, which goes to redis.log below
                    'save ""\n'
                    f"appendonly {'yes' if self.persistent else 'no'}\n"
                    + ("cluster-enabled yes\ncluster-config-file nodes.conf\n"
                       if self.cluster else ""))
        with open(self.log_path(), "ab") as out:
            return subprocess.Popen(dies_with_parent([server, conf]), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                                    start_new_session=True)

    def _serving(self) -> bool:
        # A server already on the port would answer too: it must be ours, by pid.
        return self._proc is not None and self._server_pid() == self._proc.pid

    def _server_pid(self) -> int | None:
        if self.port is None:
            return None
        # No retries: a probe answers now or not at all (redis-py retries with backoff by default).
        client = self.client(socket_timeout=1.0, socket_connect_timeout=1.0, retry=Retry(NoBackoff(), 0))
        try:
            return int(client.info("server")["process_id"])
        except (redis.RedisError, OSError, KeyError, ValueError):
            return None
        finally:
            client.close()


#: A cluster node also listens on its port + 10,000 (the cluster bus).
CLUSTER_BUS_OFFSET = 10_000


def _cluster_port(host: str) -> int:
    """A free port whose cluster bus port (+10,000) is free too and under 65,536."""
    import socket
    for _ in range(200):
        port = free_port(host)
        if port + CLUSTER_BUS_OFFSET > 65535:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port + CLUSTER_BUS_OFFSET))
            except OSError:
                continue
        return port
    raise RedisUnavailable(None, "no free pair of ports (port and port + 10,000) for a "
                                 "Redis Cluster node")


def _quote(path: str) -> str:
    # redis.conf strings: double quotes with backslash escapes.
    return '"' + path.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main(argv: list[str] | None = None) -> int:
    """Run a LocalRedis in the foreground until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m squall.deploy.redis", description=main.__doc__)
    parser.add_argument("--port", type=int, default=6379, help="port (default 6379; 0 = any free port)")
    parser.add_argument("--dir", default=None, help="directory to keep (default: temporary)")
    parser.add_argument("--persistent", action="store_true",
                        help="keep data across restarts (append-only file in --dir)")
    args = parser.parse_args(argv)
    return run_foreground(LocalRedis(args.dir, args.port or None, persistent=args.persistent), RedisUnavailable)

if __name__ == "__main__":
    sys.exit(main())
