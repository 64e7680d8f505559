"""A worker's log, bounded: what it writes to stderr (and stdout, when that is the same
file) rotates by size, so a chatty bolt cannot fill the disk.

The supervisor starts a worker with its stderr on the log file. :func:`bound_log` puts a
pipe in its place (fd 2, which child processes such as Spark's JVM inherit too) and a
thread copies the pipe into the file, moving it to ``<log>.1`` (``.2``, ...) when it
passes ``worker.log.max.bytes`` and keeping ``worker.log.backups`` old files. Python's
``sys.stderr`` writes to fd 2 and so goes the same way; nothing else changes.
"""

from __future__ import annotations

import os
import stat
import sys
import threading
from typing import Callable


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
    r, w = os.pipe()
    sys.stderr.flush()
    sys.stdout.flush()
    os.dup2(w, 2)
    if same_out:
        os.dup2(w, 1)
    os.close(w)

    def pump() -> None:
        while True:
            data = os.read(r, 65536)
            if not data:
                break
            sink.write(data)
        os.close(r)
        sink.close()

    t = threading.Thread(target=pump, name="squall-worker-log", daemon=True)
    t.start()

    def finish() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        devnull = os.open(os.devnull, os.O_WRONLY)  # our ends of the pipe close; EOF follows
        os.dup2(devnull, 2)
        if same_out:
            os.dup2(devnull, 1)
        os.close(devnull)
        t.join(timeout=0.5)  # what is in the pipe is read at once; a child may hold it open
    return finish
