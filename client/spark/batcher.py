"""When the Spark bridge bolt closes a batch, runs ``fn`` on it, and acks or fails it.

A pure state machine (no IO, no clock: every event carries ``now``), in the manner of
Structured Streaming's micro-batches fed by ``foreachBatch``. Tuples collect in one
*open* batch, which closes when it holds ``max_batch_size`` tuples (on that Add) or when
its oldest tuple is ``max_batch_secs`` old (on the next Tick or Add, so a late tuple never
joins an overdue batch), or on Flush. A closed batch *waits* until fewer than
``max_in_flight`` batches are *in flight* (handed to ``fn``), in closing order. A batch's
tuples are acked only when ``fn`` returned for it, and all of them are failed (so the
spout replays them) when it raised. Batch ids count from 1 per task and are given when a
batch opens; a batch only opens on a tuple, so no id ever names an empty batch.

Protocol with the bolt, which does the IO: feed :class:`Add` per input tuple,
:class:`Tick` when :meth:`Batcher.next_deadline` passes, :class:`Flush` to close the open
batch at once; execute each :class:`RunBatch` by calling ``fn(df, batch_id)`` and answer
with :class:`Done` or :class:`Failed`. (The bridge bolt does not flush when its worker
stops: a stopping worker has seconds, fewer than a Spark job may take, so the tuples it
holds time out and are replayed instead.)
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Hashable, Iterator, Sequence

from ..errors import SquallError
from ..transitions import History


class BatchState(enum.Enum):
    """Where a batch is."""

    OPEN = "open"  # collecting tuples
    WAITING = "waiting"  # closed, waiting for an in-flight slot
    IN_FLIGHT = "in-flight"  # RunBatch issued, Done/Failed pending


_O, _W, _F = BatchState.OPEN, BatchState.WAITING, BatchState.IN_FLIGHT

#: Allowed (from, to) states of a batch; ``None`` is "not tracked" (not yet, or no more).
TRANSITIONS: dict[tuple[BatchState | None, BatchState | None], str] = {
    (None, _O): "a tuple arrived with no batch open",
    (_O, _W): "max_batch_size reached, oldest tuple max_batch_secs old, or Flush",
    (_W, _F): "fewer than max_in_flight batches in flight",
    (_F, None): "fn returned (Done) or raised (Failed)",
}


class UnknownBatch(SquallError):
    """A Done or Failed named a batch that is not in flight (never run, or answered twice);
    ``history`` holds the batcher's recent transitions ``(stimulus_id, batch_id, from, to)``."""

    def __init__(self, batch_id: int, event: str, in_flight: Sequence[int],
                 stimulus_id: str, history: Sequence[tuple] = ()):
        self.batch_id = batch_id
        self.event = event
        self.in_flight = list(in_flight)
        self.stimulus_id = stimulus_id
        self.history = list(history)
        recent = "; ".join(f"{s or '-'}: batch {b} {f}->{t}" for s, b, f, t in self.history[-5:])
        super().__init__(f"{event} for batch {batch_id}, which is not in flight (in flight: "
                         f"{self.in_flight}; stimulus {stimulus_id!r}) (recent: "
                         f"{recent or 'none'})")


# -- events ------------------------------------------------------------------------------
# ``stimulus_id`` is optional (the bolt sets it for logs) and never compared.

@dataclass(frozen=True)
class Add:
    """An input tuple: ``values`` in the stream's declared field order."""

    tuple_id: Hashable
    values: Sequence[Any]
    now: float
    stimulus_id: str = field(default="", kw_only=True, compare=False)


@dataclass(frozen=True)
class Tick:
    """Time passed (the bolt's timer, set from :meth:`Batcher.next_deadline`)."""

    now: float
    stimulus_id: str = field(default="", kw_only=True, compare=False)


@dataclass(frozen=True)
class Done:
    """``fn`` returned for batch ``batch_id``; ``rejected`` are positions (in arrival order)
    of rows left out of its DataFrame because they did not fit the schema: those tuples are
    failed, the others acked. Every row rejected: ``fn`` was not called."""

    batch_id: int
    rejected: tuple[int, ...] = ()
    stimulus_id: str = field(default="", kw_only=True, compare=False)


@dataclass(frozen=True)
class Failed:
    """``fn`` raised ``error`` for batch ``batch_id``."""

    batch_id: int
    error: BaseException | str
    stimulus_id: str = field(default="", kw_only=True, compare=False)


@dataclass(frozen=True)
class Flush:
    """Close the open batch now, whatever its size or age."""

    now: float
    stimulus_id: str = field(default="", kw_only=True, compare=False)


Event = Add | Tick | Done | Failed | Flush


# -- instructions ------------------------------------------------------------------------

@dataclass(frozen=True)
class RunBatch:
    """Call ``fn(df, batch_id)`` with ``rows`` (in arrival order); answer Done or Failed."""

    batch_id: int
    tuple_ids: tuple[Hashable, ...]
    rows: tuple[Sequence[Any], ...]


@dataclass(frozen=True)
class AckTuples:
    ids: tuple[Hashable, ...]


@dataclass(frozen=True)
class FailTuples:
    ids: tuple[Hashable, ...]


@dataclass(frozen=True)
class ReportError:
    """Report ``fn``'s error for ``batch_id`` to the topology (Storm's ``reportError``)."""

    batch_id: int
    error: BaseException | str


Instruction = RunBatch | AckTuples | FailTuples | ReportError


class _Batch:
    """One batch (mutable, private to the batcher)."""

    __slots__ = ("batch_id", "state", "opened_at", "tuple_ids", "rows")

    def __init__(self, batch_id: int, opened_at: float):
        self.batch_id = batch_id
        self.state: BatchState | None = None
        self.opened_at = opened_at  # arrival of the oldest tuple: the age rule's origin
        self.tuple_ids: list[Hashable] = []
        self.rows: list[Sequence[Any]] = []


class Batcher:
    """Collects one task's input tuples into batches for ``fn(df, batch_id)``.

    Example (batches of at most 2 tuples or 5 seconds)::

        b = Batcher(max_batch_size=2, max_batch_secs=5.0)
        b.handle(Add("t1", (1, "a"), now=0.0))   # []
        b.next_deadline()                         # 5.0
        b.handle(Add("t2", (2, "b"), now=1.0))   # [RunBatch(1, ("t1", "t2"), ((1, "a"), (2, "b")))]
        b.handle(Done(1))                         # [AckTuples(("t1", "t2"))]
    """

    def __init__(self, max_batch_size: int, max_batch_secs: float, max_in_flight: int = 1,
                 history: int = 100):
        for name, v in (("max_batch_size", max_batch_size), ("max_in_flight", max_in_flight)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if isinstance(max_batch_secs, bool) or not isinstance(max_batch_secs, (int, float)) \
                or not max_batch_secs > 0:
            raise ValueError(f"max_batch_secs must be a number > 0, got {max_batch_secs!r}")
        self.max_batch_size = max_batch_size
        self.max_batch_secs = float(max_batch_secs)
        self.max_in_flight = max_in_flight
        #: The batch collecting tuples, if any (never empty).
        self.open: _Batch | None = None
        #: Closed batches waiting for an in-flight slot, oldest first.
        self.waiting: deque[_Batch] = deque()
        #: Batches handed to ``fn``, by id.
        self.in_flight: dict[int, _Batch] = {}
        #: Recent transitions ``(stimulus_id, batch_id, from, to)``, oldest first.
        self.history = History(history)
        self._next_id = 1

    # -- queries -------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When the open batch becomes due (a Tick before then changes nothing), or None."""
        return None if self.open is None else self.open.opened_at + self.max_batch_secs

    @property
    def pending(self) -> int:
        """Tuples held and not yet acked or failed (open, waiting and in flight)."""
        n = sum(len(b.tuple_ids) for b in self.waiting)
        n += sum(len(b.tuple_ids) for b in self.in_flight.values())
        return n + (len(self.open.tuple_ids) if self.open else 0)

    @property
    def last_id(self) -> int:
        """The id of the last batch opened (0 before the first)."""
        return self._next_id - 1

    def held(self) -> Iterator[Hashable]:
        """Every tuple id held (in flight, waiting, open), for the bolt to refresh their
        timeouts while Spark starts."""
        for b in self.in_flight.values():
            yield from b.tuple_ids
        for b in self.waiting:
            yield from b.tuple_ids
        if self.open is not None:
            yield from self.open.tuple_ids

    @property
    def idle(self) -> bool:
        """Nothing open, waiting or in flight: after a Flush, the bolt may stop."""
        return self.open is None and not self.waiting and not self.in_flight

    # -- events --------------------------------------------------------------------------

    def append(self, tuple_id: Hashable, values: Sequence[Any], now: float) -> bool:
        """The per-tuple fast path: add to the open batch when that changes no batch's state
        (one is open, not due, and this tuple does not fill it), as ``handle(Add)`` would,
        which then returns no instruction (a slot frees only on Done or Failed, and those
        dispatch). False: nothing done; feed :class:`Add` through :meth:`handle`."""
        if self._room(now) <= 0:
            return False
        b = self.open
        b.tuple_ids.append(tuple_id)
        b.rows.append(values)
        return True

    def extend(self, tuple_ids: Sequence[Hashable], rows: Sequence[Sequence[Any]],
               now: float, start: int = 0) -> int:
        """:meth:`append` for many: add the longest run of ``tuple_ids[start:]`` (with
        ``rows``, as long) that changes no batch's state, all at once; return how many were
        added (0: feed the next one through :meth:`handle`)."""
        take = min(self._room(now), len(tuple_ids) - start)
        if take <= 0:
            return 0
        b = self.open
        b.tuple_ids.extend(tuple_ids[start:start + take])
        b.rows.extend(rows[start:start + take])
        return take

    def _room(self, now: float) -> int:
        """Tuples the open batch takes without a state change: none when no batch is open
        or it is due, and never its last slot (the tuple that fills it closes it)."""
        b = self.open
        if b is None or now - b.opened_at >= self.max_batch_secs:
            return 0
        return self.max_batch_size - 1 - len(b.tuple_ids)


    def handle(self, ev: Event) -> list[Instruction]:
        """Apply one event; return the instructions to execute, in order."""
        sid = getattr(ev, "stimulus_id", "")
        if isinstance(ev, Add):
            self._close_if_due(ev.now, sid)
            b = self.open
            if b is None:
                b = _Batch(self._next_id, ev.now)
                self._next_id += 1
                self._set(b, _O, sid)
                self.open = b
            b.tuple_ids.append(ev.tuple_id)
            b.rows.append(ev.values)
            if len(b.tuple_ids) >= self.max_batch_size:
                self._close(sid)
            return self._dispatch(sid)
        if isinstance(ev, Tick):
            self._close_if_due(ev.now, sid)
            return self._dispatch(sid)
        if isinstance(ev, Flush):
            if self.open is not None:
                self._close(sid)
            return self._dispatch(sid)
        if isinstance(ev, (Done, Failed)):
            b = self.in_flight.get(ev.batch_id)
            if b is None:
                raise UnknownBatch(ev.batch_id, type(ev).__name__, sorted(self.in_flight),
                                   sid, self.history.entries)
            if isinstance(ev, Done) and any(not 0 <= i < len(b.tuple_ids) for i in ev.rejected):
                raise ValueError(f"Done for batch {b.batch_id} rejects rows {ev.rejected}; "
                                 f"the batch has {len(b.tuple_ids)}")
            self._set(b, None, sid)
            del self.in_flight[b.batch_id]
            ids = tuple(b.tuple_ids)
            out: list[Instruction]
            if isinstance(ev, Failed):
                out = [FailTuples(ids), ReportError(b.batch_id, ev.error)]
            elif ev.rejected:
                bad = set(ev.rejected)
                out = [AckTuples(tuple(t for i, t in enumerate(ids) if i not in bad)),
                       FailTuples(tuple(t for i, t in enumerate(ids) if i in bad))]
                out = [i for i in out if i.ids]
            else:
                out = [AckTuples(ids)]
            return out + self._dispatch(sid)
        raise TypeError(f"not a batcher event: {ev!r}")

    # -- helpers -------------------------------------------------------------------------

    def _close_if_due(self, now: float, sid: str) -> None:
        if self.open is not None and now - self.open.opened_at >= self.max_batch_secs:
            self._close(sid)

    def _close(self, sid: str) -> None:
        b = self.open
        assert b is not None and b.tuple_ids
        self._set(b, _W, sid)
        self.waiting.append(b)
        self.open = None

    def _dispatch(self, sid: str) -> list[Instruction]:
        """Start waiting batches, oldest first, while an in-flight slot is free."""
        out: list[Instruction] = []
        while self.waiting and len(self.in_flight) < self.max_in_flight:
            b = self.waiting.popleft()
            self._set(b, _F, sid)
            self.in_flight[b.batch_id] = b
            out.append(RunBatch(b.batch_id, tuple(b.tuple_ids), tuple(b.rows)))
        return out

    def _set(self, b: _Batch, to: BatchState | None, sid: str) -> None:
        """The one place a batch's state changes; refuses pairs not in :data:`TRANSITIONS`."""
        self.history.check(TRANSITIONS, sid, b.batch_id, b.state, to)
        b.state = to

    def validate_state(self) -> None:
        """Assert the invariants (call after any event; tests do it on teardown)."""
        assert len(self.in_flight) <= self.max_in_flight, sorted(self.in_flight)
        # No free slot is left idle while a closed batch waits.
        assert not self.waiting or len(self.in_flight) == self.max_in_flight, \
            (sorted(self.in_flight), [b.batch_id for b in self.waiting])
        batches = [*self.in_flight.values(), *self.waiting]
        if self.open is not None:
            batches.append(self.open)
            assert self.open.state is _O and len(self.open.tuple_ids) < self.max_batch_size
            assert self.open.batch_id == self._next_id - 1, (self.open.batch_id, self._next_id)
        for bid, b in self.in_flight.items():
            assert b.batch_id == bid and b.state is _F, (bid, b.state)
        for b in self.waiting:
            assert b.state is _W, (b.batch_id, b.state)
        # Batches run in id order: in flight < waiting (oldest first) < open.
        ids = [b.batch_id for b in batches]
        assert ids[len(self.in_flight):] == sorted(ids[len(self.in_flight):]), ids
        assert not ids or max(self.in_flight, default=0) < min(ids[len(self.in_flight):],
                                                               default=self._next_id), ids
        assert all(0 < i < self._next_id for i in ids), (ids, self._next_id)
        seen: set = set()
        for b in batches:
            assert 1 <= len(b.tuple_ids) <= self.max_batch_size, (b.batch_id, len(b.tuple_ids))
            assert len(b.rows) == len(b.tuple_ids), b.batch_id
            assert seen.isdisjoint(b.tuple_ids), ("tuple in two batches", b.batch_id)
            seen.update(b.tuple_ids)
