"""Batch tracking of one Trident batch-executor task, as a pure state machine.

Python version of the bookkeeping in Storm's ``TridentBoltExecutor`` (``TrackedBatch``,
``CoordCondition``, ``checkFinish``, ``finishBatch``, ``failBatch``, the
``RotatingMap`` of batches). Per txid only the latest attempt is tracked: a higher
attempt replaces it, a lower one is ignored (its tuples are left unacked; that tree
has failed already). A batch finishes once every upstream task has reported on
``$coord-<group>`` how many tuples it sent here, those tuples have all arrived, and,
for a committer, ``$commit`` has arrived; then this task tells each downstream task
how many tuples of the batch it sent it. Upstream tasks send their report after
their data on the same ordered channel, so when all reports are in a count mismatch
means lost tuples and fails the batch at once, as in Storm.

Protocol with the executor, which runs user code and does the IO: ``Execute`` ->
run ``bolt.execute``, feed one :class:`Emitted` per tuple sent, then
:class:`Executed` or :class:`ExecuteFailed`; ``FinishBatch`` -> run
``bolt.finish_batch`` the same way, then :class:`Finished` or :class:`FinishFailed`.
A batch's user state lives from ``StartBatch`` until ``FinishBatch`` completes,
``FailBatch`` or ``DropBatch``. Unlike Storm, a finished or failed attempt stays
as a tombstone until superseded or expired: any later tuple of it is failed instead
of starting a fresh, never-finishing batch, so a batch finishes at most once.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Mapping

from ..transitions import History, InvalidTransition
from .attempt import TransactionAttempt


class BatchStatus(enum.Enum):
    """Where a tracked attempt is."""

    TRACKING = "tracking"
    FINISHING = "finishing"  # FinishBatch handed to the executor, answer pending
    FINISHED = "finished"
    FAILED = "failed"


_T, _FG, _FD, _X = (BatchStatus.TRACKING, BatchStatus.FINISHING, BatchStatus.FINISHED,
                    BatchStatus.FAILED)

#: Allowed (from, to) statuses of a tracked txid; ``None`` is "not tracked".
TRANSITIONS: dict[tuple[BatchStatus | None, BatchStatus | None], str] = {
    (None, _T): "first tuple of an attempt",
    (_T, _FG): "all reports (and the commit) in, counts match",
    (_T, _X): "FailedException in execute, or counts mismatch",
    (_FG, _FD): "finish_batch returned",
    (_FG, _X): "finish_batch raised FailedException",
    (_T, None): "superseded by a higher attempt, or expired",
    (_FD, None): "superseded or expired",
    (_X, None): "superseded or expired",
}


@dataclass(frozen=True)
class CoordCondition:
    """What one task of a batch executor waits for (Storm's ``CoordCondition``).

    Example: a committer fed by 3 tasks of ``each`` and sending to tasks 7 and 8::

        CoordCondition.from_upstream({"each": 3}, committer=True, target_tasks=[7, 8])
    """

    #: Coordination reports per batch: one per upstream task (one per batch-per-tuple
    #: spout). 0 for a spout executor: it finishes a batch right after executing it.
    expected_reports: int
    #: Whether the executor waits for ``$commit`` (its operations update state).
    committer: bool
    #: Tasks this one sends coordination tuples to (every task of every component
    #: subscribed to its ``$coord-<group>`` stream), each told a count, maybe 0.
    target_tasks: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "target_tasks", frozenset(self.target_tasks))
        if self.expected_reports < 0:
            raise ValueError(f"expected_reports must be >= 0, got {self.expected_reports}")
        if self.committer and self.expected_reports == 0:
            raise ValueError("a committer needs coordination reports (expected_reports >= 1)")

    @classmethod
    def from_upstream(cls, upstream_tasks: Mapping[str, int], committer: bool = False,
                      target_tasks: Iterable[int] = (), single: Iterable[str] = ()
                      ) -> "CoordCondition":
        """``upstream_tasks``: task count per upstream batch component; ``single``: those
        reporting once per batch (Storm's ``CoordType.single``)."""
        single = set(single)
        n = sum(1 if comp in single else k for comp, k in upstream_tasks.items())
        return cls(n, committer, frozenset(target_tasks))


# -- events (every one names the batch attempt it is about) ------------------------------

@dataclass(frozen=True)
class Event:
    batch: TransactionAttempt
    stimulus_id: str = field(kw_only=True)


@dataclass(frozen=True)
class DataTuple(Event):
    """A tuple of the batch (for a spout executor: the ``$batch`` tuple itself)."""

    tuple_id: Hashable


@dataclass(frozen=True)
class CoordTuple(Event):
    """An upstream task's report on ``$coord-<group>``: it sent ``count`` tuples here."""

    count: int
    tuple_id: Hashable


@dataclass(frozen=True)
class CommitTuple(Event):
    """``$commit`` from the master coordinator (committers only)."""

    tuple_id: Hashable


@dataclass(frozen=True)
class Executed(Event):
    """``bolt.execute`` returned for the tuple of the last :class:`Execute`."""

    tuple_id: Hashable


@dataclass(frozen=True)
class ExecuteFailed(Event):
    """``bolt.execute`` raised FailedException (``report_error``: ReportedFailedException)."""

    tuple_id: Hashable
    report_error: bool = False


@dataclass(frozen=True)
class Emitted(Event):
    """User code of the batch sent ``count`` tuples to ``task`` (one event per task and call,
    not per tuple: the executor counts)."""

    task: int
    count: int = 1


@dataclass(frozen=True)
class Finished(Event):
    """``bolt.finish_batch`` returned."""


@dataclass(frozen=True)
class FinishFailed(Event):
    """``bolt.finish_batch`` raised FailedException."""

    report_error: bool = False


@dataclass(frozen=True)
class Rotate:
    """Expire batches tracked since before the previous rotation (Storm's 2-bucket map)."""

    stimulus_id: str = field(kw_only=True)


@dataclass(frozen=True)
class Tick:
    """A tick tuple: rotate if more than the message timeout passed since the last one."""

    now: float
    stimulus_id: str = field(kw_only=True)


# -- instructions --------------------------------------------------------------------------

@dataclass(frozen=True)
class StartBatch:
    """Create the user's state for the batch (``bolt.init_batch_state``)."""

    batch: TransactionAttempt


@dataclass(frozen=True)
class Execute:
    """Run ``bolt.execute(batch, tuple)``; answer with Executed or ExecuteFailed."""

    batch: TransactionAttempt
    tuple_id: Hashable


@dataclass(frozen=True)
class FinishBatch:
    """Run ``bolt.finish_batch(batch)``; answer with Finished or FinishFailed."""

    batch: TransactionAttempt


@dataclass(frozen=True)
class SendCoord:
    """Emit ``[batch, n]`` directly to each task on ``$coord-<group>``, anchored on ``anchor``."""

    batch: TransactionAttempt
    task_counts: dict[int, int]
    anchor: Hashable


@dataclass(frozen=True)
class AckTuple:
    tuple_id: Hashable


@dataclass(frozen=True)
class FailTuple:
    tuple_id: Hashable


@dataclass(frozen=True)
class FailBatch:
    """The batch failed: drop its user state; report the error if ``report_error``."""

    batch: TransactionAttempt
    report_error: bool = False
    reason: str = field(default="", compare=False)


@dataclass(frozen=True)
class DropBatch:
    """Forget an unfinished batch's user state (superseded by a newer attempt, or expired)."""

    batch: TransactionAttempt
    reason: str = field(default="", compare=False)


Instruction = StartBatch | Execute | FinishBatch | SendCoord | AckTuple | FailTuple | \
    FailBatch | DropBatch


class _Tracked:
    """Storm's ``TrackedBatch`` (mutable, private to the tracker)."""

    __slots__ = ("batch", "status", "born", "reported", "expected", "received", "committed",
                 "emitted", "delayed_ack", "anchor", "ack_after_finish")

    def __init__(self, batch: TransactionAttempt, committed: bool, born: int):
        self.batch, self.status, self.born = batch, _T, born
        self.reported = self.expected = self.received = 0
        self.committed = committed  # True from the start for a non-committer
        self.emitted: dict[int, int] = {}
        self.delayed_ack: Hashable | None = None  # holds the batch tree open until finish
        self.anchor: Hashable | None = None
        self.ack_after_finish: list[Hashable] = []


class BatchTracker:
    """Tracks the batches of one task of a batch executor for one batch group.

    Example (a spout executor: no reports expected, one downstream task 5)::

        bt = BatchTracker(CoordCondition(0, False, {5}))
        b = TransactionAttempt(1, 0)
        bt.handle(DataTuple(b, "t1", stimulus_id="in-1"))  # [StartBatch(b), Execute(b, "t1")]
        bt.handle(Emitted(b, 5, stimulus_id="emit"))        # []
        bt.handle(Executed(b, "t1", stimulus_id="done"))    # [FinishBatch(b)]
        bt.handle(Finished(b, stimulus_id="fin"))  # [SendCoord(b, {5: 1}, "t1"), AckTuple("t1")]
    """

    def __init__(self, condition: CoordCondition, message_timeout_secs: float = 30.0,
                 history: int = 100):
        self.condition = condition
        self.message_timeout_secs = message_timeout_secs
        #: Tracked attempt per txid (one attempt per txid at most).
        self.batches: dict[int, _Tracked] = {}
        self.generation = 0
        self.history = History(history)
        self._last_rotate: float | None = None

    def handle(self, ev: Event | Rotate | Tick) -> list[Instruction]:
        """Apply one event; return the instructions to execute, in order."""
        sid = getattr(ev, "stimulus_id", None)
        if isinstance(ev, (DataTuple, CoordTuple, CommitTuple)):
            if isinstance(ev, CoordTuple) and not self.condition.expected_reports:
                raise ValueError(f"{ev}: this executor expects no coordination tuples")
            if isinstance(ev, CommitTuple) and not self.condition.committer:
                raise ValueError(f"{ev}: this executor is not a committer")
            return self._tuple(ev, sid)
        if isinstance(ev, (Emitted, Executed, ExecuteFailed, Finished, FinishFailed)):
            t = self.batches.get(ev.batch.txid)
            if t is not None and t.batch != ev.batch:
                t = None
            if isinstance(ev, Emitted):
                if t is not None and t.status in (_T, _FG):
                    t.emitted[ev.task] = t.emitted.get(ev.task, 0) + ev.count
                return []
            if isinstance(ev, Executed):
                self._require(t, ev, _T)
                if self.condition.expected_reports == 0:  # spout executor: done at once
                    return self._finish(t, ev.tuple_id, [ev.tuple_id], sid)
                return [AckTuple(ev.tuple_id)]
            if isinstance(ev, ExecuteFailed):
                self._require(t, ev, _T)
                return self._fail(t, sid, ev.report_error, "execute failed", [ev.tuple_id])
            self._require(t, ev, _FG)
            if isinstance(ev, Finished):
                self._set(t, _FD, sid)
                out: list[Instruction] = []
                if self.condition.target_tasks:
                    counts = {k: t.emitted.get(k, 0) for k in sorted(self.condition.target_tasks)}
                    out.append(SendCoord(t.batch, counts, t.anchor))
                return out + [AckTuple(x) for x in t.ack_after_finish]
            return self._fail(t, sid, ev.report_error, "finish_batch failed", [])
        if isinstance(ev, Tick):
            if self._last_rotate is None:
                self._last_rotate = ev.now
            elif ev.now - self._last_rotate > self.message_timeout_secs:
                self._last_rotate = ev.now
                return self._rotate(sid)
            return []
        if isinstance(ev, Rotate):
            return self._rotate(sid)
        raise TypeError(f"not a batch tracker event: {ev!r}")

    def accept_data(self, batch: TransactionAttempt) -> _Tracked | None:
        """The per-tuple fast path of a bolt (one that expects reports) for a data tuple.

        For the attempt being tracked, in TRACKING, ``handle(DataTuple)`` gives just
        ``[Execute]``, each ``Emitted`` adds to the batch's counts, and ``Executed`` gives
        just ``[AckTuple]``: no status changes. Here that is done without the events: the
        tuple is counted received and the tracked batch returned; the executor runs the
        user's code, adds its emits with :meth:`add_emitted` and acks the tuple (on a
        FailedException it feeds :class:`ExecuteFailed` through :meth:`handle` as usual).
        None means: take the full path.
        """
        if not self.condition.expected_reports:
            return None
        t = self.batches.get(batch.txid)
        if t is None or t.status is not _T or (t.batch is not batch and t.batch != batch):
            return None
        t.received += 1
        return t

    @staticmethod
    def add_emitted(t: _Tracked, tasks: Iterable[int]) -> None:
        """What one :class:`Emitted` per task does for a batch returned by :meth:`accept_data`."""
        em = t.emitted
        for task in tasks:
            em[task] = em.get(task, 0) + 1

    # -- helpers ---------------------------------------------------------------------------

    def _tuple(self, ev: DataTuple | CoordTuple | CommitTuple, sid: str) -> list[Instruction]:
        out: list[Instruction] = []
        t = self.batches.get(ev.batch.txid)
        if t is not None and ev.batch.attempt_id != t.batch.attempt_id:
            if ev.batch.attempt_id < t.batch.attempt_id:
                return []  # an older attempt: no reason to process it
            out += self._drop(t, sid, "superseded")
            t = None
        if t is None:
            t = _Tracked(ev.batch, not self.condition.committer, self.generation)
            self._set(t, _T, sid)
            out.append(StartBatch(ev.batch))
        if t.status is not _T:  # a finished or failed attempt: its tree must not complete
            return out + [FailTuple(ev.tuple_id)]
        if isinstance(ev, DataTuple):
            t.received += 1
            return out + [Execute(ev.batch, ev.tuple_id)]
        if isinstance(ev, CoordTuple):
            t.reported += 1
            t.expected += ev.count
        else:
            t.committed = True
        return out + self._check_finish(t, ev.tuple_id, isinstance(ev, CommitTuple), sid)

    def _check_finish(self, t: _Tracked, tid: Hashable, is_commit: bool,
                      sid: str) -> list[Instruction]:
        """Storm's ``checkFinish`` for a coordination or commit tuple."""
        cond = self.condition
        # The first report (a non-committer) or the commit (a committer) is acked only at
        # finish, so the master coordinator cannot see the batch (or commit) done before.
        delayed = t.delayed_ack is None and (is_commit or not cond.committer)
        if delayed:
            t.delayed_ack = tid
        now_or_never = [] if delayed else [tid]
        if t.reported > cond.expected_reports:
            return self._fail(t, sid, False, f"{t.reported} reports, expected "
                              f"{cond.expected_reports}", now_or_never)
        if t.committed and t.reported == cond.expected_reports:
            if t.received != t.expected:
                return self._fail(t, sid, False, f"expected {t.expected} tuples, received "
                                  f"{t.received}", now_or_never)
            return self._finish(t, tid, [t.delayed_ack] + now_or_never, sid)
        return [AckTuple(x) for x in now_or_never]

    def _finish(self, t: _Tracked, anchor: Hashable, acks: list[Hashable],
                sid: str) -> list[Instruction]:
        self._set(t, _FG, sid)
        t.anchor, t.delayed_ack = anchor, None
        t.ack_after_finish = [a for a in acks if a is not None]
        return [FinishBatch(t.batch)]

    def _fail(self, t: _Tracked, sid: str, report: bool, reason: str,
              tuples: list[Hashable]) -> list[Instruction]:
        held = [x for x in [t.delayed_ack, *t.ack_after_finish] if x is not None]
        self._set(t, _X, sid)
        t.delayed_ack, t.ack_after_finish = None, []
        return [FailBatch(t.batch, report, reason)] + [FailTuple(x) for x in held + tuples]

    def _drop(self, t: _Tracked, sid: str, reason: str) -> list[Instruction]:
        was = t.status
        self._set(t, None, sid)
        return [DropBatch(t.batch, reason)] if was is _T else []

    def _rotate(self, sid: str) -> list[Instruction]:
        expired = [t for t in self.batches.values() if t.born < self.generation]
        for t in expired:  # refuse before changing anything
            if (t.status, None) not in TRANSITIONS:
                raise InvalidTransition(t.batch.txid, t.status, None, sid, self.history.entries)
        self.generation += 1
        out: list[Instruction] = []
        for t in expired:
            out += self._drop(t, sid, "expired")
        return out

    def _require(self, t: _Tracked | None, ev: Event, status: BatchStatus) -> None:
        if t is None or t.status is not status:
            raise InvalidTransition(ev.batch.txid, t.status if t else None,
                                    type(ev).__name__, ev.stimulus_id, self.history.entries)

    def _set(self, t: _Tracked, to: BatchStatus | None, sid: str) -> None:
        """The one place a batch's status changes; refuses pairs not in :data:`TRANSITIONS`."""
        frm = t.status if t.batch.txid in self.batches else None
        self.history.check(TRANSITIONS, sid, t.batch.txid, frm, to)
        if to is None:
            del self.batches[t.batch.txid]
        else:
            t.status = to
            self.batches[t.batch.txid] = t

    def validate_state(self, quiescent: bool = True) -> None:
        """Assert the invariants; ``quiescent``: no user-code answer is outstanding."""
        cond = self.condition
        for txid, t in self.batches.items():
            assert t.batch.txid == txid and t.status is not None, (txid, t.batch)
            assert self.generation - 1 <= t.born <= self.generation, (txid, t.born)
            assert t.committed or cond.committer, txid
            assert t.status is _X or t.reported <= cond.expected_reports, (txid, t.reported)
            if t.status in (_FG, _FD):
                assert t.committed and t.reported == cond.expected_reports, txid
                assert t.delayed_ack is None, txid
                # A spout executor (no reports) finishes on its one $batch tuple.
                assert not cond.expected_reports or t.received == t.expected, txid
            if t.status in (_FD, _X):
                assert t.delayed_ack is None, txid
            assert not (quiescent and t.status is _FG), ("finish outstanding", txid)
