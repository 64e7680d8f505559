"""What a private server process owned by this process needs: :class:`LocalServer`.

The shared half of :class:`~squall.deploy.zookeeper.LocalZooKeeper` and
:class:`~squall.deploy.redis.LocalRedis`: a directory of its own (temporary
unless given), a free loopback port (another one if the server loses the race
for it), a bounded wait until the server answers -- and answers as *this*
process (something else may hold the port), a log whose tail goes into every
error, and a stop by pid (SIGTERM, SIGKILL after a bound, reaped), also at exit;
and if this process is killed outright (SIGKILL skips every exit hook), the server
gets SIGTERM from the kernel (:func:`dies_with_parent`). Subclasses say how to find
the program, write its config and start it, and how to tell that it serves.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

from .net import free_port


# Runs between our fork and the server's exec, in a fresh interpreter (never Python code in
# the forked child of a threaded process): ask the kernel for SIGTERM when the parent dies,
# give up if it already has, then become the server (the pid stays the same).
# As another user (argv[2] = "uid:gid", or "-"): the switch comes first, since changing
# credentials clears the parent-death signal, and this interpreter (ours, maybe under
# /root) may be closed to that user, whereas the server's program is not.
_DIE_WITH_PARENT = ("import ctypes,os,signal,sys\n"
                    "if sys.argv[2] != '-':\n"
                    " uid, gid = map(int, sys.argv[2].split(':'))\n"
                    " os.setgroups([]); os.setgid(gid); os.setuid(uid)\n"
                    "ctypes.CDLL(None).prctl(1, signal.SIGTERM)\n"  # PR_SET_PDEATHSIG
                    "os.getppid() == int(sys.argv[1]) or sys.exit(1)\n"
                    "os.execvp(sys.argv[3], sys.argv[3:])")


def dies_with_parent(cmd: list[str], as_user: tuple[int, int] | None = None) -> list[str]:
    """``cmd`` started so that it gets SIGTERM when this process dies, even by SIGKILL
    (Linux; elsewhere ``cmd`` unchanged), run as ``as_user`` (uid, gid) when given (we are
    root). Start it from a thread that lives as long as the server: the kernel ties the
    signal to the creating thread."""
    if not sys.platform.startswith("linux"):
        if as_user is not None:
            raise OSError("running a server as another user needs Linux")
        return cmd
    who = "-" if as_user is None else f"{as_user[0]}:{as_user[1]}"
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), who, *cmd]


def find_program(env_var: str, default: str, name: str) -> tuple[str | None, str]:
    """The program to run: ``$env_var`` when set, else ``default`` (a Debian package's path)
    or ``name`` on PATH; and what was tried, for the error when there is none."""
    given = os.environ.get(env_var)
    candidates = [given] if given else [default, shutil.which(name)]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path, ""
    tried = f"${env_var}={given}" if given else f"{default} (none on PATH either)"
    return None, tried


class LocalServer:
    #: Shown in messages ("ZooKeeper", "Redis").
    NAME = "server"
    #: The server's console log in its directory.
    LOG_FILE = "server.log"
    #: Prefix of the temporary directory.
    DIR_PREFIX = "squall-server-"
    #: Seconds between two checks while starting.
    POLL_SECS = 0.1

    def __init__(self, data_dir: str | None = None, port: int | None = None, *,
                 start_timeout: float = 30.0, host: str = "127.0.0.1"):
        #: The loopback address the server binds to.
        self.host = host
        #: The port; known before :meth:`start` only if given.
        self.port: int | None = port
        self.start_timeout = start_timeout
        self._fixed_port = port is not None
        self._given_dir = os.path.abspath(data_dir) if data_dir is not None else None
        #: The server's directory (config, data, log).
        self.dir: str | None = None
        self._proc: subprocess.Popen | None = None
        self._last_log = ""

    # --- what a subclass provides ---------------------------------------------------------
    def _program(self) -> Any:
        """What :meth:`_spawn` runs; raises :meth:`_unavailable` naming what is missing."""
        raise NotImplementedError

    def _spawn(self, program: Any) -> subprocess.Popen:
        """Write the config for :attr:`port` into :attr:`dir` and start the server, output to
        :meth:`log_path`, in its own session (a Ctrl-C at the terminal must not stop it under
        daemons still using it: :meth:`stop` ends it by pid)."""
        raise NotImplementedError

    def _serving(self) -> bool:
        """Whether the server answers now and is ours."""
        raise NotImplementedError

    def _unavailable(self, message: str) -> Exception:
        raise NotImplementedError

    # --- the shared lifecycle -------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """The server's pid while it runs (``None`` before start / after stop)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def address(self) -> str:
        """``host:port``."""
        if self.port is None:
            raise self._unavailable(f"Local{self.NAME} is not started")
        return f"{self.host}:{self.port}"

    def log_path(self) -> str:
        assert self.dir is not None
        return os.path.join(self.dir, self.LOG_FILE)

    def running(self) -> bool:
        """Whether the server process is alive (it may not be serving yet)."""
        return self._proc is not None and self._proc.poll() is None

    def start(self):
        """Start the server and return once it serves; idempotent while it runs. Raises the
        subclass's unavailable error if the program is missing, or if the server exits or does
        not answer within ``start_timeout`` (with the tail of its log)."""
        if self.running():
            return self
        program = self._program()
        self.dir = self._given_dir or tempfile.mkdtemp(prefix=self.DIR_PREFIX)
        os.makedirs(self.dir, exist_ok=True)
        attempts = 1 if self._fixed_port else 3
        for attempt in range(attempts):
            if not self._fixed_port:
                self.port = free_port(self.host)
            self._proc = self._spawn(program)
            try:
                self._wait_serving()
                atexit.register(self.stop)
                return self
            except Exception:
                exited = not self.running()
                self.stop(_keep_dir=True)
                # Only a lost race for the port is worth another try.
                if attempt + 1 < attempts and exited and "address already in use" in self._last_log.lower():
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
        path = self.log_path() if self.dir else None
        if path is None or not os.path.exists(path):
            return "\n".join(self._last_log.splitlines()[-lines:])
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            text = f.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def banner(self) -> str:
        """What ``python -m squall.deploy.<server>`` prints under its address ('' for none)."""
        return ""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running() else "stopped"
        return f"<{type(self).__name__} {self.host}:{self.port} pid={self.pid} {state}>"

    def _wait_serving(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.start_timeout
        while not self._serving():
            if time.monotonic() > deadline:
                raise self._unavailable(
                    f"{self.NAME} (pid {self._proc.pid}) did not answer on {self.address} "
                    f"within {self.start_timeout:.0f} s; log tail:\n{self.log_tail()}")
            try:
                # Doubles as the poll interval and notices an early exit at once.
                code = self._proc.wait(timeout=self.POLL_SECS)
            except subprocess.TimeoutExpired:
                continue
            raise self._unavailable(f"{self.NAME} exited with code {code} before serving on "
                                    f"{self.address}; log tail:\n{self.log_tail()}")

    def _remove_dir(self) -> None:
        if self.dir is not None and self._given_dir is None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


def run_foreground(server: LocalServer, unavailable: type[Exception]) -> int:
    """``python -m squall.deploy.<server>``: start it, say where, run until Ctrl-C or SIGTERM
    (the handler only sets an event; this loop stops the server); 1 if it cannot start."""
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    try:
        with server:
            print(f"{server.NAME} serving on {server.address} (pid {server.pid}, dir "
                  f"{server.dir}); Ctrl-C stops it", flush=True)
            if server.banner():
                print(server.banner(), flush=True)
            while server.running() and not stopping.wait(0.5):
                pass
    except KeyboardInterrupt:
        pass
    except unavailable as e:
        print(e, file=sys.stderr)
        return 1
    return 0
