"""This process's stderr through a pipe to a Python sink: what a worker's rotating log
(:mod:`squall.worker.logfile`) and a report's JVM filter (:mod:`squall.deploy.report`)
share.

fd 2 (and fd 1 when asked), which child processes such as Spark's JVM inherit, becomes a
pipe; Python's ``sys.stderr`` writes to fd 2 and so goes the same way. A thread hands each
chunk read (up to 64 KiB, writes may coalesce) to ``sink``. ``finish()`` lets it drain
before the process exits: what is in the pipe is read at once, but a child may hold the
pipe open, so the wait is bounded.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from typing import Callable


def pump_stderr(sink: Callable[[bytes], None], *, also_stdout: bool = False,
                done: Callable[[], None] | None = None, name: str = "squall-stderr",
                drain_secs: float = 0.5) -> Callable[[], None]:
    """Route fd 2 (and fd 1 if ``also_stdout``) to ``sink``; ``done()`` runs after the
    last chunk. Returns ``finish()``."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    r, w = os.pipe()
    os.dup2(w, 2)
    if also_stdout:
        os.dup2(w, 1)
    os.close(w)

    def pump() -> None:
        try:
            while data := os.read(r, 65536):
                sink(data)
        finally:
            os.close(r)
            if done is not None:
                done()

    t = threading.Thread(target=pump, name=name, daemon=True)
    t.start()

    def finish() -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        devnull = os.open(os.devnull, os.O_WRONLY)  # our ends of the pipe close; EOF follows
        os.dup2(devnull, 2)
        if also_stdout:
            os.dup2(devnull, 1)
        os.close(devnull)
        t.join(timeout=drain_secs)
    return finish
