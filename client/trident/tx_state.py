"""Trident's transactional state: small JSON values in ZooKeeper that must survive a restart.

Storm's ``TransactionalState`` and ``RotatingTransactionalState``. The master
coordinator keeps its current txid and attempt ids here, and a partitioned spout
the metadata of each partition's batch per txid, so a replayed txid emits the
same batch after a worker restart. :class:`TransactionalState` is the narrow
view of one state id over the cluster state
(:meth:`~squall.client.cluster_state.ClusterState.tx_get` and friends, under
``transactional.zookeeper.root``, Storm's key, below ``storm.zookeeper.root``): in
ZooKeeper through the one kazoo client of the process (:func:`make_tx_state`), with
its retry and error translation, or in memory for tests. In a locked ZooKeeper a worker
authenticates as its topology, whose nodes no other topology can read.
:class:`RotatingTransactionalState` is pure logic over it.
"""

from __future__ import annotations

import bisect
import threading
from typing import Any, Callable, Mapping

from .. import config as cfg
from ..cluster_state import ClusterState
from ..errors import ConfigError


class TransactionalState:
    """JSON values at slash-separated paths below one state id. Not thread-safe per instance.

    Example::

        st = make_tx_state("lines", conf)       # the spout's transactional id
        st.set_data("meta/5", {"offset": 120})
        st.get_data("meta/5"), st.list("meta")  # {"offset": 120}, ["5"]
        st.close()
    """

    def __init__(self, cluster_state: ClusterState, state_id: str,
                 on_close: Callable[[], None] | None = None):
        self.cluster_state = cluster_state
        self.state_id = state_id
        self._on_close = on_close

    def set_data(self, path: str, value: Any) -> None:
        self.cluster_state.tx_set(self.state_id, path, value)

    def get_data(self, path: str) -> Any:
        """The value, or None when the path does not exist."""
        return self.cluster_state.tx_get(self.state_id, path)

    def list(self, path: str) -> list[str]:
        """Child names of ``path`` ([] when it does not exist)."""
        return self.cluster_state.tx_children(self.state_id, path)

    def delete(self, path: str) -> None:
        """Remove ``path`` and its children; nothing happens if it is gone."""
        self.cluster_state.tx_delete(self.state_id, path)

    def delete_soon(self, path: str) -> None:
        """Remove the leaf ``path`` without waiting (``ClusterState.tx_delete_soon``)."""
        self.cluster_state.tx_delete_soon(self.state_id, path)

    def close(self) -> None:
        on_close, self._on_close = self._on_close, None
        if on_close is not None:
            on_close()


#: ``init(txid, last_state) -> state`` for :meth:`RotatingTransactionalState.get_state_or_create`.
StateInitializer = Callable[[int, Any], Any]


class RotatingTransactionalState:
    """One value per txid under ``subdir`` (a partition's batch metadata per txid).

    Storm's ``RotatingTransactionalState``: a txid seen before keeps its value (a
    replay emits the same batch); a new txid's value is made from the latest
    earlier one; values before a succeeded txid are dropped.
    """

    def __init__(self, state: TransactionalState, subdir: str):
        self.state = state
        self.subdir = subdir
        self.curr: dict[int, Any] = {int(t): state.get_data(f"{subdir}/{t}")
                                     for t in state.list(subdir)}

    def _txids(self) -> list[int]:
        return sorted(self.curr)

    def last_state(self) -> Any:
        return self.curr[self._txids()[-1]] if self.curr else None

    def get_state(self, txid: int) -> Any:
        return self.curr.get(txid)

    def previous_state(self, txid: int) -> Any:
        ids = self._txids()
        i = bisect.bisect_left(ids, txid)
        return self.curr[ids[i - 1]] if i > 0 else None

    def override_state(self, txid: int, value: Any) -> None:
        self.state.set_data(f"{self.subdir}/{txid}", value)
        self.curr[txid] = value

    def remove_state(self, txid: int) -> None:
        if txid in self.curr:
            del self.curr[txid]
            self.state.delete(f"{self.subdir}/{txid}")

    def get_state_or_init(self, txid: int, init: StateInitializer) -> Any:
        """The txid's value; a new txid gets ``init(txid, previous value)`` -- or None when a
        later txid already has a value (this one was skipped and must stay empty)."""
        if txid not in self.curr:
            later = any(t > txid for t in self.curr)
            value = None if later else init(txid, self.previous_state(txid))
            self.override_state(txid, value)
        return self.curr[txid]

    def get_state_or_create(self, txid: int, init: StateInitializer) -> Any:
        """The stored value when ``txid`` was seen before (a replay); None when it was created
        now (``init`` ran and did the emitting) or skipped."""
        if txid in self.curr:
            return self.curr[txid]
        self.get_state_or_init(txid, init)
        return None

    def cleanup_before(self, txid: int) -> None:
        # Values of txids before a succeeded one are never read again: their deletes go
        # without a round trip each on the batch's path (one leftover is read back and
        # cleaned up after a restart).
        for t in [t for t in self.curr if t < txid]:
            del self.curr[t]
            self.state.delete_soon(f"{self.subdir}/{t}")


# The process's cluster states for transactional state, shared by every Trident component of
# a worker: one ZooKeeper session per ensemble (not one per spout and coordinator), released
# when the last state using it closes.
_lock = threading.Lock()
_shared: dict[tuple, list] = {}  # key -> [cluster state, users]
_memory_store: Any = None


def make_tx_state(state_id: str, conf: Mapping[str, Any]) -> TransactionalState:
    """The transactional state ``state_id`` for a worker with topology conf ``conf``
    (``trident.transactional.state``: ``zookeeper``, or ``memory``: this process only)."""
    from ..cluster_state import connect_string
    backend = str(cfg.get(conf, cfg.TRIDENT_TRANSACTIONAL_STATE)).lower()
    if backend == "memory":
        from ..memory_cluster_state import InMemoryClusterState, MemoryStore
        global _memory_store
        with _lock:
            if _memory_store is None:
                _memory_store = MemoryStore()
        return TransactionalState(InMemoryClusterState(conf, store=_memory_store), state_id)
    if backend != "zookeeper":
        raise ConfigError(cfg.TRIDENT_TRANSACTIONAL_STATE,
                          f"expected zookeeper or memory, got {backend!r}")
    # One session per identity too: a worker authenticates as its topology (zk_auth.py).
    key = (connect_string(conf), cfg.get(conf, cfg.STORM_ZOOKEEPER_ROOT),
           cfg.get(conf, cfg.TRANSACTIONAL_ZOOKEEPER_ROOT),
           conf.get(cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD),
           conf.get(cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD))
    with _lock:
        entry = _shared.get(key)
        if entry is None:
            from ..zk_cluster_state import KazooClusterState
            entry = _shared[key] = [KazooClusterState(conf), 0]
        entry[1] += 1

    def release() -> None:
        with _lock:
            entry[1] -= 1
            if entry[1] > 0 or _shared.get(key) is not entry:
                return
            del _shared[key]
        entry[0].close()

    try:
        entry[0].tx_migrate(state_id)  # a state of before per-topology namespaces
    except BaseException:
        release()
        raise
    return TransactionalState(entry[0], state_id, on_close=release)
