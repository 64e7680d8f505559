"""A private NATS server with JetStream for development and tests, run from Debian's
``nats-server`` package.

:class:`LocalNats` starts ``nats-server -js`` bound to a free loopback port, its JetStream
store in its own directory, in its own session, and waits -- bounded -- until the server
on the port is ours: a NATS server greets every client with an ``INFO`` line naming the
server, and ours is started with a name no other server has (``squall-<pid>-<random>``).
It is stopped by pid: SIGTERM, then SIGKILL after a bound, then the exit is reaped. The
server's log goes to ``nats.log`` in its directory; :meth:`LocalNats.log_tail` returns
its end for error messages.

The NATS counterpart of :mod:`squall.deploy.redis`; Debian's packaged service is not used.
Streams are kept in files under the directory, so a server started again on a given
directory has them back. Run one by hand with ``python -m squall.deploy.nats --port 4222``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
from typing import Any, Sequence

from ..connectors.nats.config import NatsUnavailable
from .server import LocalServer, dies_with_parent, find_program, run_foreground

#: Where Debian's ``nats-server`` package puts the server.
DEBIAN_NATS_SERVER = "/usr/sbin/nats-server"
#: Overrides the server binary (e.g. a release downloaded from nats.io).
SERVER_ENV = "SQUALL_NATS_SERVER"
INSTALL_HINT = "install Debian's nats-server package: bash scripts/setup.sh"
LOG_FILE = "nats.log"


def installation() -> str:
    """The ``nats-server`` to run, or :class:`NatsUnavailable` naming what is missing."""
    path, tried = find_program(SERVER_ENV, DEBIAN_NATS_SERVER, "nats-server")
    if path:
        return path
    raise NatsUnavailable(None, f"NATS cannot be started: missing {tried}; {INSTALL_HINT}")


class LocalNats(LocalServer):
    """One NATS server with JetStream on ``127.0.0.1``, owned by this process.

    Example::

        with LocalNats() as server:
            server.create_stream("events", ["events.>"])
            spout = JetStreamSpout("events", config=NatsConfig(server.url))

    ``data_dir=None`` uses a fresh temporary directory, removed by :meth:`stop`; a given
    directory is kept, with the JetStream store in it (``jetstream/``), so a server started
    again on it (and on the same ``port``) has its streams, messages and consumers back.
    ``port=None`` picks a free port.
    """

    NAME = "NATS"
    LOG_FILE = LOG_FILE
    DIR_PREFIX = "squall-nats-"
    POLL_SECS = 0.05

    def __init__(self, data_dir: str | None = None, port: int | None = None, *,
                 start_timeout: float = 15.0, host: str = "127.0.0.1"):
        super().__init__(data_dir, port, start_timeout=start_timeout, host=host)
        #: The name ours answers with in its INFO greeting (set at each start).
        self.server_name: str | None = None

    @property
    def url(self) -> str:
        """``nats://host:port``."""
        return f"nats://{self.address}"

    def conf(self) -> dict[str, Any]:
        """The config key that points the NATS connectors at this server."""
        from ..client import config as cfg
        return {cfg.NATS_SERVERS: self.url}

    def banner(self) -> str:
        return f"nats.servers={self.url}"

    # --- JetStream administration (what squall local and the tests need) -------------------
    def create_stream(self, name: str, subjects: Sequence[str], *, storage: str = "file",
                      **config: Any) -> dict:
        """Create (or update) stream ``name`` on ``subjects``; its info as a dict. File
        storage unless ``storage="memory"``; other keys are JetStream's StreamConfig's."""
        from nats.js.api import StorageType, StreamConfig

        async def run(js):
            info = await js.add_stream(StreamConfig(
                name=name, subjects=list(subjects), storage=StorageType(storage), **config))
            return info.as_dict()
        return self.jetstream(run)

    def delete_stream(self, name: str) -> None:
        async def run(js):
            await js.delete_stream(name)
        self.jetstream(run)

    def stream_info(self, name: str) -> dict:
        async def run(js):
            return (await js.stream_info(name)).as_dict()
        return self.jetstream(run)

    def consumer_info(self, stream: str, consumer: str) -> dict:
        async def run(js):
            return (await js.consumer_info(stream, consumer)).as_dict()
        return self.jetstream(run)

    def publish(self, subject: str, payloads: Sequence[bytes]) -> list[int]:
        """Publish ``payloads`` to ``subject`` through JetStream; their stream sequences."""
        async def run(js):
            futures = [await js.publish_async(subject, p) for p in payloads]
            return [(await f).seq for f in futures]
        return self.jetstream(run)

    def jetstream(self, fn: Any) -> Any:
        """``await fn(jetstream_context)`` on a connection of its own, closed after."""
        import nats

        async def main():
            nc = await nats.connect(self.url, connect_timeout=2, allow_reconnect=False)
            try:
                return await fn(nc.jetstream(timeout=10))
            finally:
                await nc.close()
        return asyncio.run(main())

    # --- LocalServer's hooks ---------------------------------------------------------------
    def _program(self) -> str:
        return installation()

    def _unavailable(self, message: str) -> Exception:
        return NatsUnavailable(None if self.port is None else self.address, message)

    def _spawn(self, server: str) -> subprocess.Popen:
        assert self.dir is not None
        self.server_name = f"squall-{os.getpid()}-{secrets.token_hex(6)}"
        cmd = [server, "-a", self.host, "-p", str(self.port), "-n", self.server_name,
               "-js", "-sd", self.dir]  # the server adds jetstream/
        with open(self.log_path(), "ab") as out:
            return subprocess.Popen(dies_with_parent(cmd), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                                    start_new_session=True)

    def _serving(self) -> bool:
        # A server already on the port would greet us too: it must be ours, by name, and
        # have JetStream on.
        info = self.greeting()
        return bool(info) and info.get("server_name") == self.server_name \
            and bool(info.get("jetstream"))

    def greeting(self) -> dict | None:
        """The INFO a server on our port greets a client with (None: nothing answers)."""
        if self.port is None:
            return None
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as s:
                line = s.makefile("rb").readline(65536)
        except OSError:
            return None
        if not line.startswith(b"INFO "):
            return None
        try:
            return json.loads(line[5:])
        except ValueError:
            return None


def main(argv: list[str] | None = None) -> int:
    """Run a LocalNats (JetStream on) in the foreground until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m squall.deploy.nats", description=main.__doc__)
    parser.add_argument("--port", type=int, default=4222,
                        help="port (default 4222; 0 = any free port)")
    parser.add_argument("--dir", default=None,
                        help="directory to keep, with the JetStream store (default: temporary)")
    args = parser.parse_args(argv)
    return run_foreground(LocalNats(args.dir, args.port or None), NatsUnavailable)


if __name__ == "__main__":
    sys.exit(main())
