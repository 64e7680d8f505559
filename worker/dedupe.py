"""What makes Storm's checkpointing exactly-once: a stateful task recognises a replay.

Storm's stateful bolt (acker checkpointing) holds its inputs' acks until the commit that
saves their effect. The worker can still die between that commit and the acks reaching
the acker, and an acker can die holding the trees: the spout then replays messages whose
effect is already committed, and Storm counts them again (it documents at-least-once).

Here the edge ids are derived (worker/lineage.py), so a replayed tuple arrives with the
key it had the first time. :class:`SeenTuples` keeps the keys a task processed, one
bucket per checkpoint, saved with the state in a namespace of its own and in the same
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
    """``topology.state.dedupe.retention.secs``, unset: twice the message timeout."""
    given = conf.get(cfg.TOPOLOGY_STATE_DEDUPE_RETENTION_SECS)
    if given is not None:
        return float(given)
    return 2 * float(conf.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30))


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

    def __getattr__(self, name: str) -> Any:  # a provider's own methods
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
    """The keys of the tuples one stateful task processed, per checkpoint (pure but for
    ``store``, a KeyValueState mapping txid -> [time, packed keys]).

    In memory the keys sit in generations, RotatingMap-like: the newest takes every new
    key, and a new generation starts at the first PREPARE a retention period after the
    newest began; the oldest is dropped (its checkpoints deleted from the store) a
    retention period after its last checkpoint. So a key is kept at least the retention
    and at most about twice it, and a lookup probes two or three tables.
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
        #: Replays recognised since the last :meth:`take_duplicates`.
        self.duplicates = 0

    def __len__(self) -> int:
        return sum(len(g.keys) for g in self.gens)

    def add(self, key: int) -> bool:
        """Record a processed tuple; True when it was processed before (a replay)."""
        gens = self.gens
        newest = gens[0].keys
        if key in newest:
            self.duplicates += 1
            return True
        newest.add(key)
        self.young.append(key)
        for g in gens:
            if g.keys is not newest and key in g.keys:  # kept on in the newest: refreshed
                self.duplicates += 1
                return True
        return False

    def take_duplicates(self) -> int:
        n, self.duplicates = self.duplicates, 0
        return n

    def prepare(self, txid: int) -> None:
        """Save the keys since the last PREPARE as transaction ``txid`` (and forget expired
        generations) in the store's prepared transaction."""
        now = self.clock()
        if self.young:
            self.store.put(txid, [now, array("Q", self.young).tobytes()])
        newest = self.gens[0]
        newest.txids.append(txid)
        newest.end = now
        self.prepared, self.young = self.young, []
        while len(self.gens) > 1 and self.gens[-1].end < now - self.retention:
            for old in self.gens.pop().txids:
                self.store.delete(old)
        if newest.start < now - self.retention:
            self.gens.appendleft(_Generation(now))
        self.store.prepare_commit(txid)

    def commit(self, txid: int) -> None:
        self.store.commit(txid)
        self.prepared = []

    def rollback(self) -> None:
        """Forget what no commit saved: those tuples are replayed and must run again."""
        self.store.rollback()
        for key in self.prepared + self.young:
            for g in self.gens:  # newest first: where it was added
                if key in g.keys:
                    g.keys.discard(key)
                    break
        self.prepared, self.young = [], []

    def restore(self) -> None:
        """Load the committed keys (a task restarted: INITSTATE)."""
        saved = sorted(self.store.items(), key=lambda kv: kv[0])
        gens: deque[_Generation] = deque()
        for txid, (when, raw) in saved:
            when = float(when)
            if not gens or gens[0].start < when - self.retention:
                gens.appendleft(_Generation(when))
            g = gens[0]
            g.txids.append(int(txid))
            g.end = when
            keys = array("Q")
            keys.frombytes(raw)
            g.keys.update(keys)
        self.gens = gens or deque([_Generation(self.clock())])
        self.young, self.prepared = [], []
