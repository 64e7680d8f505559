"""The lifecycle every long-running daemon shares (Nimbus, Supervisor, squall local's cluster).

As distributed's ``Server``: one :class:`Status` enum, an idempotent
lock-guarded :meth:`Daemon.start` that runs the subclass's :meth:`~Daemon.start_unsafe`
hook and, if that fails, closes what was started and re-raises the same
error (so a ``SquallError`` still prints as one line) with a note naming the
daemon; an idempotent :meth:`Daemon.close` running :meth:`~Daemon.close_unsafe`
once; :meth:`Daemon.finished` to wait for the close; context-manager support.
Subclasses override the two hooks, never ``start``/``close``.
"""

from __future__ import annotations

import enum
import logging
import threading

log = logging.getLogger("squall.daemon")


class Status(enum.Enum):
    init = "init"
    starting = "starting"
    running = "running"
    closing = "closing"
    closed = "closed"
    failed = "failed"


class Daemon:
    """Base of a daemon that owns threads or processes. Thread-safe: start/close from any thread."""

    def __init__(self) -> None:
        self.status = Status.init
        self._lifecycle_lock = threading.RLock()
        self._finished = threading.Event()

    @property
    def daemon_name(self) -> str:
        return type(self).__name__

    def start(self):
        """Start once (again while running: no-op); a failed start closes and re-raises."""
        with self._lifecycle_lock:
            if self.status is Status.running:
                return self
            if self.status is not Status.init:
                raise RuntimeError(f"{self.daemon_name} is {self.status.value}: it cannot start")
            self.status = Status.starting
            try:
                self.start_unsafe()
            except BaseException as exc:
                exc.add_note(f"while starting {self.daemon_name}")
                self.status = Status.closing
                self._run_close(f"failed to start: {exc}", Status.failed)
                raise
            self.status = Status.running
        return self

    def close(self, reason: str = "close") -> None:
        """Stop everything the daemon started; idempotent, also before start or after a failed one."""
        with self._lifecycle_lock:
            if self.status in (Status.closing, Status.closed, Status.failed):
                return
            self.status = Status.closing
        self._run_close(reason, Status.closed)

    def _run_close(self, reason: str, final: Status) -> None:
        try:
            self.close_unsafe(reason)
        except Exception:  # closing must finish; what broke is logged
            log.exception("%s: error while closing (%s)", self.daemon_name, reason)
        finally:
            self.status = final
            self._finished.set()

    def finished(self, timeout: float | None = None) -> bool:
        """Block until closed (True) or ``timeout`` seconds pass (False)."""
        return self._finished.wait(timeout)

    # --- hooks -------------------------------------------------------------------------
    def start_unsafe(self) -> None:
        """Start threads, connections and processes; may raise (then :meth:`close_unsafe` runs)."""

    def close_unsafe(self, reason: str) -> None:
        """Stop what :meth:`start_unsafe` (or ``__init__``) started; must tolerate a partial start."""

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close("context exit")
