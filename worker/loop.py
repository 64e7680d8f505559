"""The worker's event loop: one thread running every shared executor and the receive socket.

CPython runs one thread at a time, and every GIL hand-off between busy
threads costs up to a switch interval, so a worker runs its executors
cooperatively on one thread instead of one thread each: a round drains the
inbound socket, gives every executor one :meth:`~Executor.run_once` step
(dispatch a batch, call ``next_tuple``, send the batch's acker traffic), fires
due timers, and flushes the shared :class:`~squall.worker.transfer.Transfer`
when the flush interval has passed or the loop is about to sleep. With
nothing to do it sleeps in ``zmq.Poller.poll`` on the socket and a wake-up
pipe that executors on their own threads (``topology.executor.threaded``)
write to when they hand it tuples.

User code that blocks here blocks the worker's other shared executors (the
topology slows down; nothing is lost): give such components their own thread.
A spout whose ``next_tuple`` keeps sleeping is moved to a thread of its own by the loop
(``SpoutExecutor.wants_thread``); a bolt that blocks must ask for one.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import zmq

from .receiver import Receiver
from .state import WorkerState
from .transfer import Transfer

log = logging.getLogger("squall.worker.loop")

#: Frames taken from the socket per round.
FRAMES_PER_ROUND = 64


class EventLoop:
    """Runs shared executors and the receiver on one thread.

    Thread-safety: ``wake`` and ``stop`` may be called from any thread;
    everything else runs on the loop's thread.
    """

    def __init__(self, ws: WorkerState):
        self.ws = ws
        self.transfer = Transfer(ws)
        self.receiver = Receiver(ws)
        self.executors: list[Any] = []
        #: True while the loop sleeps in poll (read by producers on other threads).
        self.sleeping = False
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._stop = False
        #: An executor waits to move to a thread of its own (see _move_slow_executors).
        self._moving = False
        self.stopped = threading.Event()
        self.thread: threading.Thread | None = None

    # -- waker protocol (InQueue) -------------------------------------------------------
    def wake(self) -> None:
        try:
            os.write(self._wfd, b"\0")
        except BlockingIOError:
            pass  # the pipe is full: the loop is awake anyway

    def stop(self) -> None:
        self._stop = True
        self.wake()

    def start(self) -> None:
        self.thread = threading.Thread(target=self.run, name="event-loop", daemon=True)
        self.thread.start()

    # -- the loop ---------------------------------------------------------------------
    def _guarded(self, ex: Any, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except BaseException as exc:  # user code raised: the worker dies, as in Storm
            self.ws.die(ex.component_id, ex.tasks[0], exc)
            raise _Died() from exc

    def run(self) -> None:
        try:
            for ex in self.executors:
                self._guarded(ex, ex.setup)
            self._loop()
            for ex in self.executors:
                self._guarded(ex, ex.teardown)
        except _Died:
            pass
        except BaseException as exc:  # a bug of ours: still report it, never hang
            self.ws.die("__system", -1, exc)
        finally:
            try:
                self.transfer.close()
                self.receiver.close()
            finally:
                self.stopped.set()

    def _loop(self) -> None:
        executors = self.executors
        transfer = self.transfer
        drain = self.receiver.drain
        flush_every = transfer.flush_interval
        poller = zmq.Poller()
        poller.register(self.receiver.sock, zmq.POLLIN)
        poller.register(self._rfd, zmq.POLLIN)
        ex = None
        try:
            while not self._stop:
                ex = None
                done = drain(FRAMES_PER_ROUND)
                for ex in executors:
                    done += ex.run_once()
                now = time.monotonic()
                due = float("inf")
                for ex in executors:
                    if ex.timers:
                        if now >= ex.next_due():
                            ex.fire_timers(now)
                        due = min(due, ex.next_due())
                ex = None  # a failure from here on is the transfer's, not an executor's
                if self._moving or any(getattr(e, "wants_thread", False) for e in executors):
                    self._move_slow_executors()
                if done:
                    if now - transfer.last_flush >= flush_every:
                        transfer.flush()
                    continue
                transfer.flush()
                idle = min((e.idle_timeout() for e in executors), default=1.0)
                if transfer.blocked:
                    idle = min(idle, 0.001)
                timeout = max(0.0, min(idle, due - now))
                self.sleeping = True
                if not any(e.queue.dq for e in executors):
                    poller.poll(timeout * 1000)
                self.sleeping = False
                try:
                    os.read(self._rfd, 4096)
                except BlockingIOError:
                    pass
        except BaseException as exc:
            # Blame the executor whose step raised; anything else (sending a frame whose
            # values cannot be serialized) is reported as the worker's own.
            if ex is not None:
                self.ws.die(ex.component_id, ex.tasks[0], exc)
            else:
                self.ws.die("__system", -1, exc)
            raise _Died() from exc


    def _move_slow_executors(self) -> None:
        """Executors whose user code sleeps (a spout's slow next_tuple) leave the loop for a
        thread of their own, once what they sent through the loop's transfer is out: their
        tuples to a peer keep their order."""
        transfer = self.transfer
        transfer.flush()
        if transfer.buffered or transfer.blocked:
            self._moving = True  # a peer is slow: try again next round
            return
        self._moving = False
        for ex in [e for e in self.executors if getattr(e, "wants_thread", False)]:
            ex.wants_thread = False
            self.executors.remove(ex)
            ex.move_to_thread()
            log.info("topology=%s %s runs on a thread of its own from now on",
                     self.ws.topology_id, ex.name)


class _Died(Exception):
    """User code raised inside the loop; already reported through ``WorkerState.die``."""
