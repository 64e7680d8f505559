"""The DRPC server's outstanding requests: queued per function, matched to results by id.

Storm's ``DRPC`` (storm-server) without its IO: ``execute`` puts a request in its
function's queue and waits; a topology's ``fetchRequest`` takes it from the queue;
``result`` or ``failRequest`` settles it by id, which wakes the waiting ``execute``. A
request not settled within the timeout is :class:`TimedOut` and forgotten (a late result
for it is ignored, as in Storm). The first outcome wins, so a result racing a timeout or a
shutdown settles a request exactly once.

Thread-safe (one lock): gRPC calls it from its server threads. Example::

    table = RequestTable()
    req = table.submit("reach", "foo.com/blog/1")            # execute's thread
    table.fetch("reach").id == req.id                        # a DRPCSpout, later
    table.result(req.id, "16")
    table.wait(req, timeout=600) == Returned("16")           # execute's thread again
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable


@dataclass(frozen=True)
class Returned:
    """The topology returned ``result``."""

    result: str


@dataclass(frozen=True)
class Failed:
    """The topology failed the request (``failRequest``), saying ``message``."""

    message: str


@dataclass(frozen=True)
class TimedOut:
    """No outcome within the timeout; ``fetched``: a topology had taken the request."""

    secs: float
    fetched: bool


@dataclass(frozen=True)
class ShutDown:
    """The server closed while the request waited."""

    reason: str


@dataclass(frozen=True)
class Cancelled:
    """The client went away (its call was cancelled or its deadline passed)."""


Outcome = Returned | Failed | TimedOut | ShutDown | Cancelled
#: Functions whose last request by a spout is remembered (the oldest are forgotten first).
MAX_FUNCTIONS = 10_000


class ServerClosed(Exception):
    """:meth:`RequestTable.submit` after :meth:`RequestTable.close`."""


class Unserved(Exception):
    """:meth:`RequestTable.submit` for a function no topology asked for lately."""

    def __init__(self, function: str, secs: float):
        self.function, self.secs = function, secs
        super().__init__(f"no topology serves {function!r}: no DRPC spout asked this server "
                         f"for it in the last {secs:g} s; is a topology serving it running, "
                         "with this server in its drpc.servers?")


class TooMany(Exception):
    """:meth:`RequestTable.submit` beyond a principal's share of waiting requests."""

    def __init__(self, principal: str, limit: int):
        super().__init__(f"{principal or 'this client'} has {limit} DRPC requests waiting, "
                         f"its limit; retry when some return")


@dataclass(eq=False)
class Request:
    """One outstanding request (Storm's ``OutstandingRequest``)."""

    id: str
    function: str
    args: str
    created: float
    principal: str = ""
    fetched: bool = False
    outcome: Outcome | None = None
    done: threading.Event = field(default_factory=threading.Event, repr=False)


class RequestTable:
    """Every outstanding request of one DRPC server; see the module docstring."""

    #: Longest a fetch waits for a request, whatever the caller asks: it holds a thread.
    MAX_FETCH_WAIT_SECS = 1.0

    #: A function no spout asked for this long (the server being up longer) is refused at
    #: once rather than left to wait out drpc.request.timeout.secs: DRPC spouts ask every
    #: server for their function continuously.
    UNSERVED_SECS = 10.0

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 max_per_principal: int | None = None):
        self._clock = clock
        self._started = clock()
        #: function -> when a spout last asked for it.
        self._asked: dict[str, float] = {}
        #: Waiting requests per principal, and how many one may have (None: no bound).
        self._per_principal: dict[str, int] = {}
        self.max_per_principal = max_per_principal
        self._lock = threading.Lock()
        #: Wakes fetches waiting for a request (any function) or for the close.
        self._arrived = threading.Condition(self._lock)
        self._ids = itertools.count(1)
        #: Waiting to be fetched, per function, oldest first.
        self._queues: dict[str, deque[Request]] = {}
        #: Waiting for an outcome (fetched or not), by id.
        self._requests: dict[str, Request] = {}
        self._closed: str | None = None

    # --- the client's side ---------------------------------------------------------------
    def submit(self, function: str, args: str, principal: str = "") -> Request:
        """Queue a request for ``function``; raises :class:`ServerClosed` after close,
        :class:`Unserved` for a function no spout asked for lately, :class:`TooMany` beyond
        the principal's share."""
        with self._lock:
            if self._closed is not None:
                raise ServerClosed(self._closed)
            now = self._clock()
            if now - self._started > self.UNSERVED_SECS and \
                    now - self._asked.get(function, -1e18) > self.UNSERVED_SECS:
                raise Unserved(function, self.UNSERVED_SECS)
            mine = self._per_principal.get(principal, 0)
            if self.max_per_principal is not None and mine >= self.max_per_principal:
                raise TooMany(principal, self.max_per_principal)
            self._per_principal[principal] = mine + 1
            req = Request(str(next(self._ids)), function, args, now, principal=principal)
            self._requests[req.id] = req
            self._queues.setdefault(function, deque()).append(req)
            self._arrived.notify_all()
        return req

    def wait(self, req: Request, timeout: float) -> Outcome:
        """Block until ``req`` has an outcome or ``timeout`` seconds pass; the request is
        forgotten either way (Storm's ``cleanup`` in ``executeBlocking``'s finally)."""
        req.done.wait(timeout)
        with self._lock:
            if req.outcome is None:
                self._settle(req, TimedOut(timeout, req.fetched))
            self._forget(req)
        assert req.outcome is not None
        return req.outcome

    def cancel(self, request_id: str) -> None:
        """The client is gone: wake its wait (no-op for a settled or unknown id)."""
        with self._lock:
            req = self._requests.get(request_id)
            if req is not None:
                self._settle(req, Cancelled())

    # --- the topology's side -------------------------------------------------------------
    def fetch(self, function: str, wait: float = 0.0) -> Request | None:
        """The oldest request for ``function``, marked fetched; None when there is none
        within ``wait`` seconds (at most :data:`MAX_FETCH_WAIT_SECS`) or after close."""
        deadline = self._clock() + min(max(wait, 0.0), self.MAX_FETCH_WAIT_SECS)
        with self._lock:
            if function not in self._asked and len(self._asked) >= MAX_FUNCTIONS:
                self._asked.pop(min(self._asked, key=self._asked.__getitem__))
            self._asked[function] = self._clock()
            while True:
                q = self._queues.get(function)
                while q:
                    req = q.popleft()
                    if req.outcome is None:
                        req.fetched = True
                        return req
                left = deadline - self._clock()
                if self._closed is not None or left <= 0:
                    return None
                self._arrived.wait(left)

    def result(self, request_id: str, result: str) -> bool:
        """Settle ``request_id`` with ``result``; False for an unknown or settled id."""
        return self._settle_id(request_id, Returned(result))

    def fail(self, request_id: str, message: str = "") -> bool:
        """Settle ``request_id`` as failed; False for an unknown or settled id."""
        return self._settle_id(request_id, Failed(message))

    def function_of(self, request_id: str) -> str | None:
        with self._lock:
            req = self._requests.get(request_id)
            return None if req is None else req.function

    # --- the server's ----------------------------------------------------------------------
    def close(self, reason: str) -> int:
        """Settle every request as :class:`ShutDown` and wake every fetch; returns how many
        requests were waiting."""
        with self._lock:
            self._closed = reason
            waiting = [r for r in self._requests.values() if r.outcome is None]
            for req in waiting:
                self._settle(req, ShutDown(reason))
            self._arrived.notify_all()
        return len(waiting)

    def pending(self) -> int:
        """Requests waiting for an outcome."""
        with self._lock:
            return sum(1 for r in self._requests.values() if r.outcome is None)

    def queued(self, function: str) -> int:
        """Requests for ``function`` not fetched yet."""
        with self._lock:
            return sum(1 for r in self._queues.get(function, ()) if r.outcome is None)

    # --- under the lock --------------------------------------------------------------------
    def _settle_id(self, request_id: str, outcome: Outcome) -> bool:
        with self._lock:
            req = self._requests.get(request_id)
            return req is not None and self._settle(req, outcome)

    def _settle(self, req: Request, outcome: Outcome) -> bool:
        if req.outcome is not None:
            return False
        req.outcome = outcome
        req.done.set()
        return True

    def _forget(self, req: Request) -> None:
        if self._requests.pop(req.id, None) is not None:
            left = self._per_principal.get(req.principal, 1) - 1
            if left > 0:
                self._per_principal[req.principal] = left
            else:
                self._per_principal.pop(req.principal, None)
        q = self._queues.get(req.function)
        if q is None:
            return
        if not req.fetched:
            try:
                q.remove(req)
            except ValueError:  # a fetch popped it (settled) already
                pass
        if not q:  # no empty queue outlives its requests: function names come from clients
            del self._queues[req.function]
