"""The master batch coordinator of a Trident batch group, as a pure state machine.

Python version of Storm's ``MasterBatchCoordinator`` (``trident/topology``): the
spout that starts batches (txids) on ``$batch``, asks committers to commit them on
``$commit`` strictly in txid order, and announces ``$success`` once a commit's tuple
tree is acked. :class:`MasterCoordinator` takes the spout's stimuli as events
(``next_tuple`` is :class:`Sync`, ``ack``/``fail`` of a batch or commit tuple are
:class:`Ack`/:class:`Fail`, ``open``'s ZooKeeper read is :class:`Restore`) and returns
instructions (emit on a stream, persist to the transactional state); the spout
executes them in order. No IO and no clock: every time arrives on the event.

Where this deliberately differs from Storm (each a one-line change):

* ``fail`` of an attempt that is not the active one is ignored. Storm removes the
  txid's live attempt from the active set first (``activeTx.remove`` before the
  attempt check), which only causes a needless re-emission.
* :class:`Restore` keeps the stored attempt ids of txids ``current .. current+max-1``
  (every txid that can have been in flight). Storm keeps ``.. current+max-2``, so with
  the default ``topology.max.spout.pending`` of 1 a restarted coordinator re-emits the
  current txid as attempt 0, which tasks that saw a higher attempt ignore until it
  times out enough times.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .. import config as cfg
from ..transitions import History
from .attempt import INIT_TXID, TransactionAttempt

#: Transactional-state keys the coordinator writes (as Storm's, so tools can read them).
CURRENT_TX_KEY = "currtx"
CURRENT_ATTEMPTS_KEY = "currattempts"


class AttemptStatus(enum.Enum):
    """Where an active txid is (Storm's ``MasterBatchCoordinator.AttemptStatus``)."""

    PROCESSING = "processing"
    PROCESSED = "processed"
    COMMITTING = "committing"


class Phase(enum.Enum):
    """The coordinator's own lifecycle: restore is only allowed before the first batch."""

    NEW = "new"
    RESTORED = "restored"
    RUNNING = "running"


_P, _D, _C = AttemptStatus.PROCESSING, AttemptStatus.PROCESSED, AttemptStatus.COMMITTING

#: Allowed (from, to) statuses of a txid; ``None`` is "not active".
TRANSITIONS: dict[tuple[AttemptStatus | None, AttemptStatus | None], str] = {
    (None, _P): "batch emitted on $batch",
    (_P, _D): "the batch's tuple tree was acked",
    (_D, _C): "it is the current txid: commit emitted on $commit",
    (_C, None): "the commit tree was acked (success) or failed",
    (_P, None): "its batch failed, or an earlier txid's did",
    (_D, None): "an earlier txid failed",
}
PHASE_TRANSITIONS = {(Phase.NEW, Phase.RESTORED): "state read on open",
                     (Phase.NEW, Phase.RUNNING): "first batch",
                     (Phase.RESTORED, Phase.RUNNING): "first batch"}


# -- events -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Event:
    """Base of the coordinator's events; ``stimulus_id`` ties log lines to the cause."""

    stimulus_id: str = field(kw_only=True)


@dataclass(frozen=True)
class Sync(Event):
    """``next_tuple``: commit the current txid if processed, start batches if allowed."""

    now: float


@dataclass(frozen=True)
class Ack(Event):
    """The tuple tree of a ``$batch`` or ``$commit`` emission (message id ``attempt``) acked."""

    attempt: TransactionAttempt
    now: float


@dataclass(frozen=True)
class Fail(Event):
    """The tuple tree of ``attempt``'s batch or commit failed or timed out."""

    attempt: TransactionAttempt
    now: float


@dataclass(frozen=True)
class Activate(Event):
    """The topology was activated: new batches may start."""


@dataclass(frozen=True)
class Deactivate(Event):
    """The topology was deactivated: no new batches; active ones still commit."""


@dataclass(frozen=True)
class Restore(Event):
    """``open``: what the transactional state holds (None / {} for a fresh topology).

    Keys of ``attempt_ids`` may be strings, as JSON stores them.
    """

    current_txid: int | None
    attempt_ids: Mapping[Any, int]

    @classmethod
    def merged(cls, stored: Iterable[tuple[int | None, Mapping[Any, int] | None]], *,
               stimulus_id: str) -> "Restore":
        """Merge the ``(currtx, currattempts)`` of every managed spout's state as Storm
        does: the highest current txid and, per txid, the highest attempt id."""
        current, attempts = None, {}
        for tx, ids in stored:
            if tx is not None and (current is None or int(tx) > current):
                current = int(tx)
            for k, v in (ids or {}).items():
                attempts[int(k)] = max(int(v), attempts.get(int(k), -1))
        return cls(current, attempts, stimulus_id=stimulus_id)


# -- instructions -------------------------------------------------------------------------

@dataclass(frozen=True)
class EmitBatch:
    """Emit ``[attempt]`` on ``$batch`` with message id ``attempt`` (a tracked tree)."""

    attempt: TransactionAttempt


@dataclass(frozen=True)
class EmitCommit:
    """Emit ``[attempt]`` on ``$commit`` with message id ``attempt`` (a tracked tree)."""

    attempt: TransactionAttempt


@dataclass(frozen=True)
class EmitSuccess:
    """Emit ``[attempt]`` on ``$success``, untracked (cleanup metadata)."""

    attempt: TransactionAttempt


@dataclass(frozen=True)
class PersistCurrentTx:
    """Write ``txid`` at ``currtx`` in every managed spout's transactional state."""

    txid: int


@dataclass(frozen=True)
class PersistAttempts:
    """Write the attempt ids at ``currattempts`` in every managed spout's state."""

    attempt_ids: dict[int, int]

    def to_json(self) -> dict[str, int]:
        """The map with string keys, as JSON (and Storm) store it."""
        return {str(k): v for k, v in sorted(self.attempt_ids.items())}


Instruction = EmitBatch | EmitCommit | EmitSuccess | PersistCurrentTx | PersistAttempts


@dataclass(frozen=True)
class TxStatus:
    """An active txid: the attempt in flight and where it is."""

    attempt: TransactionAttempt
    status: AttemptStatus


class MasterCoordinator:
    """Decides which batches start, which commits go out, and when a txid succeeded.

    Example::

        mbc = MasterCoordinator(max_transaction_active=2, emit_interval_secs=0.5)
        mbc.handle(Sync(now=1.0, stimulus_id="next-1"))
        # -> [PersistAttempts({1: 0}), EmitBatch(TransactionAttempt(1, 0))]

    ``spouts_ready(txid)`` is the managed spouts' ``BatchCoordinator.isReady`` (any of
    them ready is enough, as in Storm); it must not block or do IO.
    """

    def __init__(self, max_transaction_active: int = 1,
                 emit_interval_secs: float | None = (
                     cfg.default(cfg.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS) / 1000),
                 spouts_ready: Callable[[int], bool] | None = None, history: int = 100):
        if max_transaction_active < 1:
            raise ValueError(f"max_transaction_active must be >= 1, got {max_transaction_active}")
        #: ``topology.max.spout.pending``: most txids active at once.
        self.max_transaction_active = max_transaction_active
        #: Least seconds between batch starts (None: no throttle).
        self.emit_interval_secs = emit_interval_secs
        self.spouts_ready = spouts_ready or (lambda txid: True)
        #: The txid to commit next; every smaller txid has committed.
        self.current_txid = INIT_TXID
        #: Latest attempt id emitted per uncommitted txid (persisted as ``currattempts``).
        self.attempt_ids: dict[int, int] = {}
        #: Txids in flight.
        self.active: dict[int, TxStatus] = {}
        #: False while the topology is deactivated.
        self.is_active = True
        self.phase = Phase.NEW
        self.history = History(history)
        self._window_start: float | None = None  # Storm's WindowedTimeThrottler(interval, 1)
        self._window_events = 0

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any], **kwargs: Any) -> "MasterCoordinator":
        """Read ``topology.max.spout.pending`` (unset: 1, as Storm) and the emit interval."""
        pending = conf.get(cfg.TOPOLOGY_MAX_SPOUT_PENDING)
        millis = cfg.get(conf, cfg.TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS)
        return cls(1 if pending is None else int(pending), millis / 1000, **kwargs)

    def handle(self, event: Event) -> list[Instruction]:
        """Apply ``event``; return the instructions to execute, in order."""
        if isinstance(event, Sync):
            return self._sync(event.now, event.stimulus_id)
        if isinstance(event, Ack):
            return self._ack(event)
        if isinstance(event, Fail):
            return self._fail(event)
        if isinstance(event, (Activate, Deactivate)):
            self.is_active = isinstance(event, Activate)  # only gates new batches
            return []
        if isinstance(event, Restore):
            return self._restore(event)
        raise TypeError(f"not a coordinator event: {event!r}")

    # -- handlers ---------------------------------------------------------------------------

    def _ack(self, ev: Ack) -> list[Instruction]:
        txid = ev.attempt.txid
        st = self.active.get(txid)
        if st is None or st.attempt != ev.attempt:
            return []  # an attempt superseded by a failure: nothing to do
        out: list[Instruction] = []
        if st.status is _P:
            self._set(txid, _D, ev.stimulus_id)
        elif st.status is _C:
            self._set(txid, None, ev.stimulus_id)
            self.attempt_ids.pop(txid, None)
            self.current_txid = txid + 1
            out += [EmitSuccess(ev.attempt), PersistCurrentTx(self.current_txid)]
        return out + self._sync(ev.now, ev.stimulus_id)

    def _fail(self, ev: Fail) -> list[Instruction]:
        txid = ev.attempt.txid
        st = self.active.get(txid)
        if st is None or st.attempt != ev.attempt:
            return []
        # Later txids are dropped too (Storm's activeTx.tailMap(txid).clear()): they would
        # have to wait for this one to commit anyway, and are re-emitted as new attempts.
        for t in sorted(t for t in self.active if t >= txid):
            self._set(t, None, ev.stimulus_id)
        return self._sync(ev.now, ev.stimulus_id)

    def _restore(self, ev: Restore) -> list[Instruction]:
        self.history.check(PHASE_TRANSITIONS, ev.stimulus_id, "coordinator", self.phase,
                           Phase.RESTORED)
        self.phase = Phase.RESTORED
        stored = ev.current_txid
        self.current_txid = max(INIT_TXID, int(stored)) if stored is not None else INIT_TXID
        window = range(self.current_txid, self.current_txid + self.max_transaction_active)
        self.attempt_ids = {int(k): int(v) for k, v in ev.attempt_ids.items() if int(k) in window}
        return []

    def _sync(self, now: float, sid: str) -> list[Instruction]:
        out: list[Instruction] = []
        st = self.active.get(self.current_txid)
        if st is not None and st.status is _D:
            self._set(self.current_txid, _C, sid)
            out.append(EmitCommit(st.attempt))
        if not self.is_active or len(self.active) >= self.max_transaction_active:
            return out
        for txid in range(self.current_txid, self.current_txid + self.max_transaction_active):
            if txid in self.active or not self._ready(txid, now):
                continue
            # Monotonically increasing attempt ids let tasks drop an old attempt's state
            # as soon as they see a newer one. Persist before emitting: never reuse one.
            attempt = TransactionAttempt(txid, self.attempt_ids.get(txid, -1) + 1)
            if self.phase is not Phase.RUNNING:
                self.history.check(PHASE_TRANSITIONS, sid, "coordinator", self.phase,
                                   Phase.RUNNING)
                self.phase = Phase.RUNNING
            self._set(txid, _P, sid, attempt)
            self.attempt_ids[txid] = attempt.attempt_id
            out += [PersistAttempts(dict(self.attempt_ids)), EmitBatch(attempt)]
            self._window_events += 1
        return out

    def _ready(self, txid: int, now: float) -> bool:
        """Storm's ``isReady``: not throttled, and some managed spout is ready."""
        if self.emit_interval_secs is not None:
            if self._window_start is None or now - self._window_start > self.emit_interval_secs:
                self._window_start, self._window_events = now, 0
            if self._window_events >= 1:
                return False
        return bool(self.spouts_ready(txid))

    def _set(self, txid: int, to: AttemptStatus | None, sid: str,
             attempt: TransactionAttempt | None = None) -> None:
        """The one place a txid's status changes; refuses pairs not in :data:`TRANSITIONS`."""
        st = self.active.get(txid)
        self.history.check(TRANSITIONS, sid, txid, st.status if st else None, to)
        if to is None:
            del self.active[txid]
        else:
            self.active[txid] = TxStatus(attempt or st.attempt, to)

    # -- invariants -------------------------------------------------------------------------

    def validate_state(self) -> None:
        """Assert the invariants that hold between any two events."""
        cur, n = self.current_txid, self.max_transaction_active
        assert cur >= INIT_TXID, cur
        assert len(self.active) <= n, (self.active, n)
        for txid, st in self.active.items():
            assert cur <= txid < cur + n, (txid, cur, n)  # only the window is ever emitted
            assert st.attempt.txid == txid, (txid, st)
            assert self.attempt_ids.get(txid) == st.attempt.attempt_id, (txid, st,
                                                                         self.attempt_ids)
            assert st.status is not _C or txid == cur, ("only the current txid commits", txid)
        for txid, attempt_id in self.attempt_ids.items():
            assert cur <= txid < cur + n and attempt_id >= 0, (txid, attempt_id, cur)
        assert self.active == {} or self.phase is Phase.RUNNING, self.phase
