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
import atexit
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from ..client.cluster_state import ZooKeeperUnavailable
from .net import free_port

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


class LocalZooKeeper:
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
    default 500 ms allows sessions of 1..10 s — quick expiry in tests.
    """

    def __init__(self, data_dir: str | None = None, port: int | None = None, *,
                 tick_time_ms: int = 500, start_timeout: float = 30.0, host: str = "127.0.0.1"):
        #: The loopback address the server binds to.
        self.host = host
        #: The client port; known before :meth:`start` only if given.
        self.port: int | None = port
        self.tick_time_ms = tick_time_ms
        self.start_timeout = start_timeout
        self._fixed_port = port is not None
        self._given_dir = os.path.abspath(data_dir) if data_dir is not None else None
        #: Directory holding ``zoo.cfg``, the snapshots/logs (``data/``) and ``zookeeper.out``.
        self.dir: str | None = None
        self._proc: subprocess.Popen | None = None
        self._last_log = ""

    # --- public surface ----------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The server JVM's pid while it runs (``None`` before start / after stop)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def connect_string(self) -> str:
        """``host:port`` for kazoo (``KazooClient(hosts=...)``)."""
        if self.port is None:
            raise ZooKeeperUnavailable(None, "LocalZooKeeper is not started")
        return f"{self.host}:{self.port}"

    def conf(self, root: str | None = None) -> dict:
        """The Storm config keys that point a Squall daemon at this server."""
        conf = {"storm.zookeeper.servers": [self.host], "storm.zookeeper.port": self.port}
        if root is not None:
            conf["storm.zookeeper.root"] = root
        return conf

    def running(self) -> bool:
        """Whether the server process is alive (it may not be serving yet)."""
        return self._proc is not None and self._proc.poll() is None

    def ruok(self) -> bool:
        """Whether the server answers ``ruok`` with ``imok`` right now."""
        if self.port is None:
            return False
        try:
            return four_letter_word(self.host, self.port, "ruok", timeout=1.0) == "imok"
        except OSError:
            return False

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

    def start(self) -> "LocalZooKeeper":
        """Start the server and return once it serves; idempotent while it runs.

        Raises :class:`ZooKeeperUnavailable` if java or the jars are missing,
        or if the server exits or does not answer within ``start_timeout``
        (the message carries the tail of its log).
        """
        if self.running():
            return self
        java, classpath = installation()
        self.dir = self._given_dir or tempfile.mkdtemp(prefix="squall-zk-")
        os.makedirs(os.path.join(self.dir, "data"), exist_ok=True)
        with open(os.path.join(self.dir, "log4j.properties"), "w") as f:
            f.write(_LOG4J)
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            if not self._fixed_port:
                self.port = free_port(self.host)
            self._spawn(java, classpath)
            try:
                self._wait_serving()
                atexit.register(self.stop)
                return self
            except ZooKeeperUnavailable:
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
        """The last ``lines`` lines of the server's console log ('' if there is none yet)."""
        path = os.path.join(self.dir, LOG_FILE) if self.dir else None
        if path is None or not os.path.exists(path):
            return "\n".join(self._last_log.splitlines()[-lines:])
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> "LocalZooKeeper":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running() else "stopped"
        return f"<LocalZooKeeper {self.host}:{self.port} pid={self.pid} {state}>"

    # --- internals ----------------------------------------------------------
    def _spawn(self, java: str, classpath: str) -> None:
        assert self.dir is not None
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
        with open(os.path.join(self.dir, LOG_FILE), "ab") as out:
            # Its own session: a Ctrl-C at the terminal must not stop ZooKeeper under the
            # daemons still draining; stop() ends it by pid.
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, cwd=self.dir,
                                          start_new_session=True)

    def _wait_serving(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        while not self._serving():
            if time.monotonic() > deadline:
                raise ZooKeeperUnavailable(
                    self.connect_string,
                    f"ZooKeeper (pid {self._proc.pid}) did not answer 'ruok' on {self.connect_string} "
                    f"within {self.start_timeout:.0f} s; log tail:\n{self.log_tail()}")
            try:
                # Doubles as the poll interval and notices an early exit at once.
                code = self._proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                continue
            raise ZooKeeperUnavailable(
                self.connect_string,
                f"ZooKeeper exited with code {code} before serving on {self.connect_string}; "
                f"log tail:\n{self.log_tail()}")

    def _remove_dir(self) -> None:
        if self.dir is not None and self._given_dir is None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def main(argv: list[str] | None = None) -> int:
    """Run a LocalZooKeeper in the foreground until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m squall.deploy.zookeeper", description=main.__doc__)
    parser.add_argument("--port", type=int, default=2181, help="client port (default 2181; 0 = any free port)")
    parser.add_argument("--dir", default=None, help="data directory to keep (default: temporary)")
    args = parser.parse_args(argv)
    stopping = threading.Event()
    # The handler only sets an event; the loop below does the stopping.
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    try:
        with LocalZooKeeper(args.dir, args.port or None) as zk:
            print(f"ZooKeeper serving on {zk.connect_string} (pid {zk.pid}, dir {zk.dir}); Ctrl-C stops it",
                  flush=True)
            while zk.running() and not stopping.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    except ZooKeeperUnavailable as e:
        print(e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
