"""A private, single-node ZooKeeper for development and tests, run from Debian's ``zookeeper`` package.

:class:`LocalZooKeeper` writes a ``zoo.cfg`` for a standalone server on a free
loopback port with its own data directory, starts the JVM
(``QuorumPeerMain``) from the jars the Debian package installs, and waits —
bounded, by polling the ``ruok`` four-letter word — until the server answers.
It is stopped by pid: SIGTERM, then SIGKILL after a bound, then the exit is
reaped. The server's console log goes to ``zookeeper.out`` in its directory;
:meth:`LocalZooKeeper.log_tail` returns the end of it for error messages.

This is the role of kazoo's ``testing/common.py`` (``ManagedZooKeeper``),
trimmed to one standalone server. Run one by hand with
``python -m squall.deploy.zookeeper --port 2181``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys

from ..client import config as cfg
from ..client.cluster_state import ZooKeeperUnavailable
from .server import LocalServer, dies_with_parent, run_foreground

#: Where Debian's ``zookeeper`` package puts its jars. The server jar's manifest
#: ``Class-Path`` pulls in the rest (jute, netty, slf4j-api, ...).
DEBIAN_JAVA_DIR = "/usr/share/java"
ZOOKEEPER_JAR = os.path.join(DEBIAN_JAVA_DIR, "zookeeper.jar")
#: Optional: without them the server runs but logs nothing (slf4j falls back to NOP).
LOGGING_JARS = (os.path.join(DEBIAN_JAVA_DIR, "slf4j-log4j12.jar"),
                os.path.join(DEBIAN_JAVA_DIR, "log4j-1.2.jar"))
#: Overrides the classpath entirely (e.g. a ZooKeeper tarball's ``lib/*``).
CLASSPATH_ENV = "SQUALL_ZOOKEEPER_CLASSPATH"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
INSTALL_HINT = "install Debian's zookeeper package: bash scripts/setup.sh"
LOG_FILE = "zookeeper.out"

_LOG4J = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
"""


def find_java() -> str | None:
    """The ``java`` executable: ``$JAVA_HOME/bin/java`` if set, else the one on ``PATH``."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def installation() -> tuple[str, str]:
    """``(java, classpath)`` for running ZooKeeper, or :class:`ZooKeeperUnavailable` naming what is missing."""
    missing = []
    java = find_java()
    if java is None:
        missing.append("java (no $JAVA_HOME/bin/java, none on PATH)")
    classpath = os.environ.get(CLASSPATH_ENV)
    if not classpath:
        if os.path.isfile(ZOOKEEPER_JAR):
            classpath = os.pathsep.join([ZOOKEEPER_JAR] + [j for j in LOGGING_JARS if os.path.isfile(j)])
        else:
            missing.append(f"{ZOOKEEPER_JAR} (or set ${CLASSPATH_ENV})")
    if missing:
        raise ZooKeeperUnavailable(
            None, f"ZooKeeper cannot be started: missing {', '.join(missing)}; {INSTALL_HINT}")
    return java, classpath  # type: ignore[return-value]


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 1.0) -> str:
    """Send a four-letter command (``ruok``, ``srvr``, ``mntr``) and return the reply ('' if none)."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(word.encode())
        chunks = []
        while True:
            data = s.recv(4096)
            if not data:
                return b"".join(chunks).decode(errors="replace")
            chunks.append(data)


class LocalZooKeeper(LocalServer):
    """One standalone ZooKeeper server on ``127.0.0.1``, owned by this process.

    Example::

        with LocalZooKeeper() as zk:
            conf = {"storm.zookeeper.servers": ["127.0.0.1"],
                    "storm.zookeeper.port": zk.port}
            ...

    ``data_dir=None`` uses a fresh temporary directory, removed by :meth:`stop`;
    a given directory is kept. ``port=None`` picks a free port (and retries
    with another if the server loses the race for it). ``tick_time_ms`` sets
    ZooKeeper's tick; session timeouts are bounded to 2..20 ticks, so the
    default 500 ms allows sessions of 1..10 s — quick expiry in tests. Its
    directory holds ``zoo.cfg``, the snapshots and logs (``data/``) and
    ``zookeeper.out``.
    """

    NAME = "ZooKeeper"
    LOG_FILE = LOG_FILE
    DIR_PREFIX = "squall-zk-"

    def __init__(self, data_dir: str | None = None, port: int | None = None, *,
                 tick_time_ms: int = 500, start_timeout: float = 30.0, host: str = "127.0.0.1"):
        super().__init__(data_dir, port, start_timeout=start_timeout, host=host)
        self.tick_time_ms = tick_time_ms

    @property
    def connect_string(self) -> str:
        """``host:port`` for kazoo (``KazooClient(hosts=...)``)."""
        return self.address

    def conf(self, root: str | None = None) -> dict:
        """The Storm config keys that point a Squall daemon at this server."""
        conf = {cfg.STORM_ZOOKEEPER_SERVERS: [self.host], cfg.STORM_ZOOKEEPER_PORT: self.port}
        if root is not None:
            conf[cfg.STORM_ZOOKEEPER_ROOT] = root
        return conf

    def ruok(self) -> bool:
        """Whether the server answers ``ruok`` with ``imok`` right now."""
        if self.port is None:
            return False
        try:
            return four_letter_word(self.host, self.port, "ruok", timeout=1.0) == "imok"
        except OSError:
            return False

    # --- LocalServer's hooks ----------------------------------------------------------------
    def _program(self) -> tuple[str, str]:
        return installation()

    def _unavailable(self, message: str) -> Exception:
        return ZooKeeperUnavailable(None if self.port is None else f"{self.host}:{self.port}",
                                    message)

    def _serving(self) -> bool:
        # ``ruok`` alone would be answered by whatever server already holds the port:
        # ``conf`` tells whether it is ours by its data directory.
        if not self.ruok():
            return False
        try:
            conf = four_letter_word(self.host, self.port, "conf", timeout=1.0)  # type: ignore[arg-type]
        except OSError:
            return False
        ours = "dataDir=" + os.path.join(self.dir or "", "data")
        return any(line == ours or line.startswith(ours + "/") for line in conf.splitlines())

    def _spawn(self, program: tuple[str, str]) -> subprocess.Popen:
        java, classpath = program
        assert self.dir is not None
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        with open(os.path.join(self.dir, "log4j.properties"), "w") as f:
            f.write(_LOG4J)
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime={self.tick_time_ms}\n"
                    f"dataDir={os.path.join(self.dir, 'data')}\n"
                    f"clientPort={self.port}\n"
                    f"clientPortAddress={self.host}\n"
                    "maxClientCnxns=0\n"
                    "admin.enableServer=false\n"
                    "4lw.commands.whitelist=ruok,srvr,stat,mntr,conf\n")
        cmd = [java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dzookeeper.log.dir={self.dir}",
               f"-Dlog4j.configuration=file:{os.path.join(self.dir, 'log4j.properties')}",
               "-cp", classpath, MAIN_CLASS, cfg]
        with open(self.log_path(), "ab") as out:
            return subprocess.Popen(dies_with_parent(cmd), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, cwd=self.dir,
                                    start_new_session=True)


def main(argv: list[str] | None = None) -> int:
    """Run a LocalZooKeeper in the foreground until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m squall.deploy.zookeeper", description=main.__doc__)
    parser.add_argument("--port", type=int, default=2181, help="client port (default 2181; 0 = any free port)")
    parser.add_argument("--dir", default=None, help="data directory to keep (default: temporary)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to bind and serve on (default 127.0.0.1)")
    args = parser.parse_args(argv)
    return run_foreground(LocalZooKeeper(args.dir, args.port or None, host=args.host),
                          ZooKeeperUnavailable)

if __name__ == "__main__":
    sys.exit(main())
