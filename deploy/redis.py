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
import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..client import config as cfg
from ..client.trident.state.base import RedisUnavailable
from .net import free_port

#: Where Debian's ``redis-server`` package puts the server.
DEBIAN_REDIS_SERVER = "/usr/bin/redis-server"
#: Overrides the server binary (e.g. one built from source).
SERVER_ENV = "SQUALL_REDIS_SERVER"
INSTALL_HINT = "install Debian's redis-server package: bash scripts/setup.sh"
LOG_FILE = "redis.log"
CONF_FILE = "redis.conf"


def installation() -> str:
    """The ``redis-server`` to run, or :class:`RedisUnavailable` naming what is missing."""
    given = os.environ.get(SERVER_ENV)
    candidates = [given] if given else [DEBIAN_REDIS_SERVER, shutil.which("redis-server")]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    tried = f"${SERVER_ENV}={given}" if given else DEBIAN_REDIS_SERVER
    raise RedisUnavailable(None, f"Redis cannot be started: missing {tried} (none on PATH either); "
                                 f"{INSTALL_HINT}")


class LocalRedis:
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

    def __init__(self, data_dir: str | None = None, port: int | None = None, *,
                 persistent: bool = False, start_timeout: float = 15.0, host: str = "127.0.0.1"):
        #: The loopback address the server binds to.
        self.host = host
        #: The port; known before :meth:`start` only if given.
        self.port: int | None = port
        self.persistent = persistent
        self.start_timeout = start_timeout
        self._fixed_port = port is not None
        self._given_dir = os.path.abspath(data_dir) if data_dir is not None else None
        #: Directory holding ``redis.conf``, ``redis.log`` and any data files.
        self.dir: str | None = None
        self._proc: subprocess.Popen | None = None
        self._last_log = ""

    # --- public surface ----------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The server's pid while it runs (``None`` before start / after stop)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def address(self) -> str:
        """``host:port``."""
        if self.port is None:
            raise RedisUnavailable(None, "LocalRedis is not started")
        return f"{self.host}:{self.port}"

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

    def running(self) -> bool:
        """Whether the server process is alive (it may not be serving yet)."""
        return self._proc is not None and self._proc.poll() is None

    def ping(self) -> bool:
        """Whether something answers PING on our port right now."""
        return self._server_pid() is not None

    def start(self) -> "LocalRedis":
        """Start the server and return once it serves; idempotent while it runs.

        Raises :class:`RedisUnavailable` if ``redis-server`` is missing, or if the
        server exits or does not answer within ``start_timeout`` (the message
        carries the tail of its log).
        """
        if self.running():
            return self
        server = installation()
        self.dir = self._given_dir or tempfile.mkdtemp(prefix="squall-redis-")
        os.makedirs(self.dir, exist_ok=True)
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            if not self._fixed_port:
                self.port = free_port(self.host)
            self._spawn(server)
            try:
                self._wait_serving()
                atexit.register(self.stop)
                return self
            except RedisUnavailable:
                exited = not self.running()
                self.stop(_keep_dir=True)
                # Only a lost race for the port is worth another try.
                if attempt + 1 < attempts and exited and "Address already in use" in self._last_log:
                    continue
                self._remove_dir()
                raise
        raise AssertionError("unreachable")

    def stop(self, grace: float = 5.0, *, _keep_dir: bool = False) -> None:
        """Stop the server by pid (SIGTERM, SIGKILL after ``grace`` s) and reap it; idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None:
            atexit.unregister(self.stop)
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
                try:
                    proc.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=grace)
            self._last_log = self.log_tail(200)
        if not _keep_dir:
            self._remove_dir()

    def log_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the server's log ('' if there is none yet)."""
        path = os.path.join(self.dir, LOG_FILE) if self.dir else None
        if path is None or not os.path.exists(path):
            return "\n".join(self._last_log.splitlines()[-lines:])
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> "LocalRedis":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running() else "stopped"
        return f"<LocalRedis {self.host}:{self.port} pid={self.pid} {state}>"

    # --- internals ----------------------------------------------------------
    def _spawn(self, server: str) -> None:
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
                    f"appendonly {'yes' if self.persistent else 'no'}\n")
        with open(os.path.join(self.dir, LOG_FILE), "ab") as out:
            # Its own session: a Ctrl-C at the terminal must not stop Redis under the
            # daemons still committing state; stop() ends it by pid.
            self._proc = subprocess.Popen([server, conf], stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, cwd=self.dir,
                                          start_new_session=True)

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

    def _wait_serving(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        # A server already on the port would answer too: it must be ours, by pid.
        while self._server_pid() != self._proc.pid:
            if time.monotonic() > deadline:
                raise RedisUnavailable(
                    self.address, f"Redis (pid {self._proc.pid}) did not answer on {self.address} "
                                  f"within {self.start_timeout:.0f} s; log tail:\n{self.log_tail()}")
            try:
                # Doubles as the poll interval and notices an early exit at once.
                code = self._proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                continue
            raise RedisUnavailable(
                self.address, f"Redis exited with code {code} before serving on {self.address}; "
                              f"log tail:\n{self.log_tail()}")

    def _remove_dir(self) -> None:
        if self.dir is not None and self._given_dir is None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


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
    stopping = threading.Event()
    # The handler only sets an event; the loop below does the stopping.
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    try:
        with LocalRedis(args.dir, args.port or None, persistent=args.persistent) as server:
            print(f"Redis serving on {server.address} (pid {server.pid}, dir {server.dir}); Ctrl-C stops it",
                  flush=True)
            while server.running() and not stopping.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    except RedisUnavailable as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
