"""The worker's event loop: one thread running every shared executor and the receive socket.

CPython runs one thread at a time, and every GIL hand-off between busy
threads costs up to a switch interval, so a worker runs its executors
cooperatively on one thread instead of one thread each: a round drains the
inbound socket, gives every executor one :meth:`~Executor.run_once` step
(dispatch a batch, call ``next_tuple``, send the batch's acker traffic), fires
due timers, and flushes the shared :class:`~squall.worker.transfer.Transfer`
(and each spout's own) when the flush interval has passed or the loop is about
to sleep. With
nothing to do it sleeps in ``zmq.Poller.poll`` on the socket and a wake-up
pipe that executors on their own threads (``topology.executor.threaded``)
write to when they hand it tuples.

User code that blocks here blocks the worker's other shared executors (the
topology slows down; nothing is lost): a bolt that blocks must ask for a thread
of its own (``topology.executor.threaded``). Spouts need not: a spout whose
``next_tuple`` keeps sleeping is moved to a thread of its own between calls
(``SpoutExecutor.wants_thread``), and one whose call does not return at all keeps
the loop's thread while the loop goes on on a new one (:meth:`EventLoop.rescue`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from math import ceil as _ceil
from typing import Any

import zmq

from .queue import SleepFlag
from .receiver import Receiver
from .state import WorkerState
from .topology_master import upstream_spouts
from .transfer import Transfer

log = logging.getLogger("squall.worker.loop")

#: Frames taken from the socket per round.
FRAMES_PER_ROUND = 64
#: A spout's step (next_tuple, ack, fail) holding the loop's thread longer than this leaves
#: the thread to it: the loop goes on on a new one (EventLoop.rescue). Three slow calls of
#: SLOW_CALL_SECS move a sleeping spout sooner, between its calls.
RESCUE_SECS = 0.25
#: ... and its open, activate or deactivate: a source's first connection may take a moment
#: without the spout being one that blocks (on a thread of its own it would stay).
RESCUE_OPEN_SECS = 5.0
INF = float("inf")


def _drain_pipe(fd: int) -> None:
    """Empty the wake-up pipe (read only once a poll saw it readable: wakes written while
    the loop skipped polls may fill several reads)."""
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def any_queued(executors: list) -> bool:
    """Whether any executor has tuples waiting (set in the gap before the poll by a thread
    that saw the loop awake and did not wake it)."""
    for e in executors:
        if e.queue.dq:
            return True
    return False


class EventLoop:
    """Runs shared executors and the receiver on one thread.

    Thread-safety: ``wake``, ``stop`` and ``rescue`` may be called from any thread;
    everything else runs on the loop's thread.
    """

    def __init__(self, ws: WorkerState):
        self.ws = ws
        self.transfer = Transfer(ws)
        self.receiver = Receiver(ws)
        self.executors: list[Any] = []
        #: On while the loop sleeps in poll (read by producers on other threads).
        self.flag = SleepFlag()
        self._rfd, self._wfd = os.pipe()
        os.set_blocking(self._rfd, False)
        os.set_blocking(self._wfd, False)
        self._stop = False
        #: Set (by SpoutExecutor._slow_call, on the loop's thread) when an executor wants a
        #: thread of its own: the loop moves it after its round.
        self.move_wanted = False
        #: The movable executor (OWN_TRANSFER) whose step runs now, under _lock: rescue and
        #: the loop's thread agree through it on which of them owns the loop.
        self.current: Any = None
        self._lock = threading.Lock()
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

    def rescue(self, now: float) -> Any:
        """Any thread (the worker's main loop): when the step running on the loop's thread
        is a movable executor's (a spout) and has been in user code longer than RESCUE_SECS
        (RESCUE_OPEN_SECS in open) by ``now`` (perf_counter), the loop goes on on a new thread without it, and the old
        thread becomes that executor's own once its call returns. Returns the executor
        rescued from, or None.

        A spout blocked in a call that never returns (a socket read without a timeout)
        cannot be moved off the thread it blocks: the loop moves instead. The spout sends
        through a Transfer of its own, so the two threads share nothing but thread-safe
        queues."""
        with self._lock:
            ex = self.current
            since = ex.calling if ex is not None else 0.0
            if not since or now - since < (RESCUE_OPEN_SECS if ex.phase.startswith("open")
                                           else RESCUE_SECS):
                return None
            self.current = None
            ex.rescued = True
            self.executors = [e for e in self.executors if e is not ex]
            self.thread = threading.Thread(target=self.run, args=(True,), name="event-loop",
                                           daemon=True)
            self.thread.start()
        log.warning("topology=%s %s: %s has not returned for %.1f s; the worker's other "
                    "executors go on on a new thread, and it keeps this one (set "
                    "topology.executor.threaded: true to start it on a thread of its own)",
                    self.ws.topology_id, ex.name, ex.phase, now - since)
        return ex

    # -- the loop ---------------------------------------------------------------------
    def _guarded(self, ex: Any, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except BaseException as exc:  # user code raised: the worker dies, as in Storm
            self.ws.die(ex.component_id, ex.tasks[0], exc)
            raise _Died() from exc

    def run(self, resumed: bool = False) -> None:
        """The loop's thread: set up (unless ``resumed`` after a rescue), loop, tear down."""
        try:
            if not resumed:
                for ex in self.executors:
                    self._guarded(ex, ex.setup)
            self._loop()
            for ex in self.executors:
                self._guarded(ex, ex.teardown)
        except _Rescued as r:
            # The loop runs on another thread now; this one is the rescued executor's.
            r.executor.leave_loop()
            r.executor.thread = threading.current_thread()
            r.executor.thread.name = r.executor.name
            r.executor.run(True)
            return
        except _Died:
            pass
        except BaseException as exc:  # a bug of ours: still report it, never hang
            self.ws.die("__system", -1, exc)
        if self.thread is not None and self.thread is not threading.current_thread():
            return  # rescued from a call that then raised: the loop is another thread's
        try:
            for transfer in self._transfers():
                transfer.close()
            self.receiver.close()
        finally:
            self.stopped.set()

    def _transfers(self) -> list[Transfer]:
        """The loop's Transfer and those of its executors that have their own."""
        return [self.transfer] + [e.transfer for e in self.executors
                                  if e.transfer is not self.transfer]

    def _share_queues(self) -> None:
        """Give each spout of the loop the receive queues it waits on (executor.backlogged):
        its own and those of the loop's executors its tuples reach, not an unrelated
        pipeline's."""
        topology = self.ws.topology
        feeding = [(x, upstream_spouts(topology, {x.component_id})) for x in self.executors]
        for e in self.executors:
            if hasattr(e, "backlog_queues"):
                e.backlog_queues = [x.queue.dq for x, spouts in feeding
                                    if x is e or e.component_id in spouts]

    def _loop(self) -> None:
        executors = self.executors
        self._share_queues()
        transfers = self._transfers()
        own = [ex.OWN_TRANSFER for ex in executors]
        drain = self.receiver.drain
        flush_every = self.transfer.flush_interval
        lock = self._lock
        poller = zmq.Poller()
        flag = self.flag
        rfd = self._rfd
        poller.register(self.receiver.sock, zmq.POLLIN)
        poller.register(rfd, zmq.POLLIN)
        ex = None
        try:
            while not self._stop:
                ex = None
                frames = drain(FRAMES_PER_ROUND)
                done = frames
                for i in range(len(executors)):
                    ex = executors[i]
                    if own[i]:
                        self.current = ex
                        try:
                            done += ex.run_once()
                        finally:
                            with lock:
                                if self.current is ex:  # after a rescue: another loop's
                                    self.current = None
                                rescued = ex.rescued
                        if rescued:
                            raise _Rescued(ex)
                    else:
                        done += ex.run_once()
                now = time.monotonic()
                due = INF
                for ex in executors:
                    d = ex.due
                    if d <= now:
                        ex.fire_timers(now)
                        d = ex.due
                    if d < due:
                        due = d
                ex = None  # a failure from here on is the transfer's, not an executor's
                if self.move_wanted:
                    self.move_wanted = False
                    self._move_slow_executors()
                    self._share_queues()
                    transfers = self._transfers()
                    own = [e.OWN_TRANSFER for e in executors]
                # What the next round would find: queued input, handed-over calls, a spout
                # that stopped at its budget rather than at an empty next_tuple (idle 0), a
                # full drain. Without any, a round that did work goes straight to the flush
                # and the poll below (which returns at once for a frame that came meanwhile)
                # instead of an empty round first: at a quarter of the max rate that round
                # was most of the loop's rounds.
                idle = 1.0
                ready = frames >= FRAMES_PER_ROUND
                for e in executors:
                    if e.queue.dq or e.calls:
                        ready = True
                        break
                    t = e.idle_timeout()
                    if t < idle:
                        idle = t
                if ready or (done and idle <= 0.0):
                    for transfer in transfers:
                        if now - transfer.last_flush >= flush_every:
                            transfer.flush()
                    continue
                blocked = False
                for transfer in transfers:
                    transfer.flush()
                    blocked = blocked or bool(transfer.blocked)
                if blocked:
                    idle = min(idle, 0.001)
                timeout = max(0.0, min(idle, due - now))
                flag.on = True
                # zmq_poll counts whole milliseconds (pyzmq truncates): a wait under 1 ms
                # would be 0, a busy loop until a timer is due. Round up instead: a timer
                # fires at most 1 ms late.
                events = poller.poll(_ceil(timeout * 1000.0)) \
                    if not any_queued(executors) else ()
                flag.on = False
                for sock, _ in events:
                    if sock == rfd:
                        _drain_pipe(rfd)
        except _Rescued:
            raise
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
        thread of their own, taking their own Transfer (and so their tuples' order) along,
        flushed here first; frames a slow peer has not taken yet go along with it."""
        for ex in [e for e in self.executors if getattr(e, "wants_thread", False)]:
            ex.wants_thread = False
            ex.transfer.flush()
            self.executors.remove(ex)
            ex.move_to_thread()
            log.info("topology=%s %s runs on a thread of its own from now on",
                     self.ws.topology_id, ex.name)


class _Died(Exception):
    """User code raised inside the loop; already reported through ``WorkerState.die``."""


class _Rescued(Exception):
    """The loop went on on another thread (EventLoop.rescue): this one is ``executor``'s."""

    def __init__(self, executor: Any):
        super().__init__(executor.name)
        self.executor = executor
