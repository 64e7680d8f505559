"""A worker's log, bounded: what it writes to stderr (and stdout, when that is the same
file) rotates by size, so a chatty bolt cannot fill the disk.

The supervisor starts a worker with its stderr on the log file. :func:`bound_log` routes
fd 2 (which child processes such as Spark's JVM inherit too) through a pipe
(:func:`~squall.client.stderr_pump.pump_stderr`) into that file, moving it to ``<log>.1``
(``.2``, ...) when it would pass ``worker.log.max.bytes`` and keeping
``worker.log.backups`` old files.
"""

from __future__ import annotations

import os
import stat
from typing import Callable

from ..client.stderr_pump import pump_stderr


class RotatingFile:
    """Appends bytes to ``path``; a file never passes ``max_bytes``: it becomes ``path.1``
    (older ones shift up, ``backups`` are kept) and a new one starts, cut after a newline
    where one fits (a line longer than the limit is split). Not thread-safe."""

    def __init__(self, path: str, max_bytes: int, backups: int):
        self.path, self.max_bytes, self.backups = path, max_bytes, backups
        self.dropped = 0
        self._open()

    def _open(self) -> None:
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.size = os.fstat(self.fd).st_size

    def write(self, data: bytes) -> None:
        # A chunk read from the pipe may hold many writes (up to 64 KiB): cut it to size.
        while data:
            room = self.max_bytes - self.size
            if len(data) <= room:
                self._append(data)
                return
            cut = data.rfind(b"\n", 0, room) + 1 or (room if self.size == 0 else 0)
            if cut:
                self._append(data[:cut])
                data = data[cut:]
            self._rotate()

    def _append(self, data: bytes) -> None:
        try:
            os.write(self.fd, data)
            self.size += len(data)
        except OSError:  # a full disk must not block the worker: drop, count, go on
            self.dropped += len(data)

    def _rotate(self) -> None:
        os.close(self.fd)
        if self.backups > 0:
            for i in range(self.backups - 1, 0, -1):
                if os.path.exists(f"{self.path}.{i}"):
                    os.replace(f"{self.path}.{i}", f"{self.path}.{i + 1}")
            os.replace(self.path, f"{self.path}.1")
        else:
            os.truncate(self.path, 0)
        self._open()

    def close(self) -> None:
        os.close(self.fd)


def stderr_dir() -> str | None:
    """The directory of the file on this process's stderr (the supervisor opens the worker's
    log there: its dumps and events log go beside it), or None when stderr is not a file."""
    try:
        path = os.readlink("/proc/self/fd/2")  # Linux
        if stat.S_ISREG(os.fstat(2).st_mode) and os.path.isabs(path):
            return os.path.dirname(path)
    except OSError:
        pass
    return None


def bound_log(max_bytes: int, backups: int) -> Callable[[], None] | None:
    """Rotate this process's stderr file (see the module docstring); returns ``finish()``,
    which drains the pipe before the process exits (bounded: a child may hold it open).
    None when there is nothing to bound: no limit, or stderr is not a regular file."""
    if max_bytes <= 0:
        return None
    try:
        err = os.fstat(2)
        path = os.readlink("/proc/self/fd/2")  # Linux: the file the supervisor opened
    except OSError:
        return None
    if not stat.S_ISREG(err.st_mode) or not os.path.isabs(path):
        return None
    try:
        out = os.fstat(1)
        same_out = (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)
    except OSError:
        same_out = False
    sink = RotatingFile(path, max_bytes, backups)
    return pump_stderr(sink.write, also_stdout=same_out, done=sink.close,
                       name="squall-worker-log")
