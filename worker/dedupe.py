"""What makes Storm's checkpointing exactly-once: a stateful task recognises a replay.

Storm's stateful bolt (acker checkpointing) holds its inputs' acks until the commit that
saves their effect. The worker can still die between that commit and the acks reaching
the acker, and an acker can die holding the trees: the spout then replays messages whose
effect is already committed, and Storm counts them again (it documents at-least-once).

Here the edge ids are derived (worker/lineage.py), so a replayed tuple arrives with the
key it had the first time. :class:`SeenTuples` keeps the keys of the tuples a task
acked, per checkpoint, saved with the state in a namespace of its own and in the same
two-phase transaction (prepared with it, committed or rolled back with it, so a kill
between the two leaves both at the same checkpoint). A tuple whose key is known runs
with the state muted (:class:`MutableState`): the bolt emits again (deriving the same
edges, so the bolts downstream recognise those too) and its input is acked, but its
writes are dropped. Keys are kept ``topology.state.dedupe.retention.secs`` after their
checkpoint: a replay comes within the message timeout of the original.
"""

from __future__ import annotations

import time
from array import array
from collections import deque
from typing import Any, Callable, Iterator

from ..client import config as cfg
from ..client.state import KeyValueState


def retention_secs(conf: Any) -> float:
    """``topology.state.dedupe.retention.secs``, unset: three times the message timeout
    (a spout fails a tree up to twice the timeout after its emit, and its replay follows)."""
    given = conf.get(cfg.TOPOLOGY_STATE_DEDUPE_RETENTION_SECS)
    if given is not None:
        return float(given)
    return 3 * float(conf.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30))


class MutableState(KeyValueState):
    """The state a deduplicating bolt sees: its own, except that while ``muted`` (a replay
    of a saved tuple runs) writes are dropped."""

    def __init__(self, state: KeyValueState):
        self.state = state
        self.muted = False

    def put(self, key: Any, value: Any) -> None:
        if not self.muted:
            self.state.put(key, value)

    def get(self, key: Any, default: Any = None) -> Any:
        return self.state.get(key, default)

    def delete(self, key: Any) -> Any:
        return self.state.get(key) if self.muted else self.state.delete(key)

    def items(self) -> Iterator[tuple[Any, Any]]:
        return self.state.items()

    def __len__(self) -> int:
        return len(self.state)  # type: ignore[arg-type]

    def __getattr__(self, name: str) -> Any:  # a provider's own methods (not muted)
        if name == "state":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.state, name)

    # The checkpointing drives the real state; these keep the interface whole.
    def prepare_commit(self, txid: int) -> None:
        self.state.prepare_commit(txid)

    def commit(self, txid: int | None = None) -> None:
        self.state.commit(txid)

    def rollback(self) -> None:
        self.state.rollback()

    def prepared_txid(self) -> int | None:
        return self.state.prepared_txid()


class _Generation:
    """The keys of the checkpoints prepared during one retention period. A set of ints:
    about 70 bytes a key, and a lookup in C (array-backed tables cost a fifth of the
    memory and three times the time a tuple, run as Python)."""

    __slots__ = ("keys", "txids", "start", "end")

    def __init__(self, start: float):
        self.keys: set[int] = set()
        self.txids: list[int] = []
        self.start = start
        self.end = start


class SeenTuples:
    """The keys of the tuples one stateful task saved, per checkpoint (pure but for
    ``store``, a KeyValueState mapping txid -> [time, packed keys]).

    A key is recorded when the bolt acks its tuple (the ack is held for the commit that
    saves its effect), not when it runs: a failed tuple is not saved, and its replay must
    run. In memory the keys sit in generations, RotatingMap-like: the newest takes every
    key, and a new generation starts at the first PREPARE a retention period after the
    newest began; the oldest is dropped at a COMMIT a retention period after its last
    checkpoint, and its checkpoints are deleted from the store in the next transaction.
    So a key is kept at least the retention and at most about twice it, and a lookup
    probes two or three sets. Time is counted from the task's start at the latest, so a
    worker's downtime does not eat the retention of what it restores.
    """

    def __init__(self, store: KeyValueState, retention_secs: float,
                 clock: Callable[[], float] = time.time):
        self.store = store
        self.retention = float(retention_secs)
        self.clock = clock
        #: Newest first.
        self.gens: deque[_Generation] = deque([_Generation(clock())])
        #: Keys added to the newest generation since the last PREPARE, and by the prepared
        #: transaction: what a rollback takes out again.
        self.young: list[int] = []
        self.prepared: list[int] = []
        self.prepared_txid: int | None = None
        #: Expired checkpoints to delete from the store in the next transaction, and those
        #: the prepared one deletes (deleted again after a rollback).
        self.doomed: list[int] = []
        self.deleting: list[int] = []
        #: Replays recognised since the last :meth:`take_duplicates`.
        self.duplicates = 0

    def __len__(self) -> int:
        return sum(len(g.keys) for g in self.gens)

    def known(self, key: int) -> bool:
        """Whether a tuple with ``key`` was saved (or acked in a transaction not yet saved):
        True means this one is a replay."""
        for g in self.gens:
            if key in g.keys:
                self.duplicates += 1
                return True
        return False

    def add(self, key: int) -> None:
        """Record an acked tuple (kept on in the newest generation if it was older)."""
        newest = self.gens[0].keys
        if key not in newest:
            newest.add(key)
            self.young.append(key)

    def take_duplicates(self) -> int:
        n, self.duplicates = self.duplicates, 0
        return n

    def prepare(self, txid: int) -> None:
        """Save the keys since the last PREPARE as transaction ``txid`` (and delete expired
        checkpoints) in the store's prepared transaction."""
        now = self.clock()
        if self.young:
            self.store.put(txid, [now, array("Q", self.young).tobytes()])
        for old in self.doomed:
            self.store.delete(old)
        self.deleting, self.doomed = self.doomed, []
        newest = self.gens[0]
        newest.txids.append(txid)
        newest.end = now
        self.prepared, self.young = self.young, []
        self.prepared_txid = txid
        if newest.start < now - self.retention:
            self.gens.appendleft(_Generation(now))
        self.store.prepare_commit(txid)

    def commit(self, txid: int) -> None:
        self.store.commit(txid)
        self.prepared, self.deleting, self.prepared_txid = [], [], None
        limit = self.clock() - self.retention
        while len(self.gens) > 1 and self.gens[-1].end < limit:
            self.doomed.extend(self.gens.pop().txids)

    def rollback(self) -> None:
        """Forget what no commit saved: those tuples are replayed and must run again."""
        self.store.rollback()
        for key in self.prepared + self.young:
            for g in self.gens:  # newest first: where it was added
                if key in g.keys:
                    g.keys.discard(key)
                    break
        if self.prepared_txid is not None:
            for g in self.gens:
                if self.prepared_txid in g.txids:
                    g.txids.remove(self.prepared_txid)
        self.doomed = self.deleting + self.doomed
        self.prepared, self.young, self.deleting, self.prepared_txid = [], [], [], None

    def restore(self) -> None:
        """Load the committed keys (a task restarted: INITSTATE)."""
        saved = sorted(self.store.items(), key=lambda kv: kv[0])
        now = self.clock()
        gens: deque[_Generation] = deque()
        for txid, (when, raw) in saved:
            when = float(when)
            if not gens or gens[0].start < when - self.retention:
                gens.appendleft(_Generation(when))
            g = gens[0]
            g.txids.append(int(txid))
            keys = array("Q")
            keys.frombytes(raw)
            g.keys.update(keys)
        for g in gens:
            g.end = max(g.end, now)  # kept a retention from now: the downtime is not age
        self.gens = gens or deque([_Generation(now)])
        self.young, self.prepared, self.doomed, self.deleting = [], [], [], []
        self.prepared_txid = None
