"""Trident's transactional state: small JSON values in ZooKeeper that must survive a restart.

Storm's ``TransactionalState`` and ``RotatingTransactionalState``. The master
coordinator keeps its current txid and attempt ids here, and a partitioned spout
the metadata of each partition's batch per txid, so a replayed txid emits the
same batch after a worker restart. :class:`TransactionalState` is the narrow
interface (paths relative to one state id), with a ZooKeeper backend under
``transactional.zookeeper.root`` (Storm's key; default ``/transactional``, below
``storm.zookeeper.root``) and an in-memory one for unit tests.
:class:`RotatingTransactionalState` is pure logic over either.
"""

from __future__ import annotations

import abc
import bisect
import json
from typing import Any, Callable, Mapping

from .. import config as cfg

#: Storm's key: where Trident's transactional state lives (below storm.zookeeper.root).
TRANSACTIONAL_ZOOKEEPER_ROOT = "transactional.zookeeper.root"


class TransactionalState(abc.ABC):
    """JSON values at slash-separated paths below one state id. Not thread-safe per instance."""

    @abc.abstractmethod
    def set_data(self, path: str, value: Any) -> None: ...

    @abc.abstractmethod
    def get_data(self, path: str) -> Any:
        """The value, or None when the path does not exist."""

    @abc.abstractmethod
    def list(self, path: str) -> list[str]:
        """Child names of ``path`` ([] when it does not exist)."""

    @abc.abstractmethod
    def delete(self, path: str) -> None:
        """Remove ``path`` and its children; nothing happens if it is gone."""

    def close(self) -> None:
        pass


class MemoryTransactionalState(TransactionalState):
    """A dict per state id; ``shared`` lets two instances see one store (a 'restart' in tests)."""

    def __init__(self, shared: dict[str, Any] | None = None):
        self.data: dict[str, Any] = {} if shared is None else shared

    def set_data(self, path: str, value: Any) -> None:
        self.data[_norm(path)] = json.loads(json.dumps(value))  # as ZooKeeper would: a copy

    def get_data(self, path: str) -> Any:
        return self.data.get(_norm(path))

    def list(self, path: str) -> list[str]:
        prefix = _norm(path) + "/" if _norm(path) else ""
        return sorted({k[len(prefix):].split("/", 1)[0] for k in self.data if k.startswith(prefix)})

    def delete(self, path: str) -> None:
        p = _norm(path)
        for k in [k for k in self.data if k == p or k.startswith(p + "/")]:
            del self.data[k]


class ZkTransactionalState(TransactionalState):
    """The state id's values in ZooKeeper (kazoo), one connection per instance."""

    def __init__(self, conf: Mapping[str, Any], state_id: str, timeout: float = 15.0):
        from kazoo.client import KazooClient

        conf = cfg.layered(conf)
        servers = conf[cfg.STORM_ZOOKEEPER_SERVERS]
        hosts = ",".join(f"{h}:{conf[cfg.STORM_ZOOKEEPER_PORT]}" for h in servers)
        root = conf.get(cfg.STORM_ZOOKEEPER_ROOT) or "/squall"
        sub = conf.get(TRANSACTIONAL_ZOOKEEPER_ROOT) or "/transactional"
        self.base = "/" + _norm(f"{root}/{sub}/{state_id}")
        self._zk = KazooClient(hosts=hosts, timeout=timeout)
        self._zk.start(timeout=timeout)
        self._zk.ensure_path(self.base)

    def _path(self, path: str) -> str:
        rel = _norm(path)
        return self.base + ("/" + rel if rel else "")

    def set_data(self, path: str, value: Any) -> None:
        full, data = self._path(path), json.dumps(value).encode()
        if self._zk.exists(full):
            self._zk.set(full, data)
        else:
            self._zk.create(full, data, makepath=True)

    def get_data(self, path: str) -> Any:
        from kazoo.exceptions import NoNodeError
        try:
            data, _ = self._zk.get(self._path(path))
        except NoNodeError:
            return None
        return json.loads(data) if data else None

    def list(self, path: str) -> list[str]:
        from kazoo.exceptions import NoNodeError
        try:
            return sorted(self._zk.get_children(self._path(path)))
        except NoNodeError:
            return []

    def delete(self, path: str) -> None:
        from kazoo.exceptions import NoNodeError
        try:
            self._zk.delete(self._path(path), recursive=True)
        except NoNodeError:
            pass

    def close(self) -> None:
        self._zk.stop()
        self._zk.close()


def _norm(path: str) -> str:
    return "/".join(p for p in path.split("/") if p)


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
        for t in [t for t in self.curr if t < txid]:
            del self.curr[t]
            self.state.delete(f"{self.subdir}/{t}")


#: Key choosing the transactional state's backend: "zookeeper" (default) or "memory" (one
#: process only: for tests on a single worker; nothing survives a restart).
TRIDENT_TRANSACTIONAL_STATE = "trident.transactional.state"
_MEMORY_STATES: dict[str, dict[str, Any]] = {}


def make_tx_state(state_id: str, conf: Mapping[str, Any]) -> TransactionalState:
    """The transactional state ``state_id`` for a worker with topology conf ``conf``."""
    if str(conf.get(TRIDENT_TRANSACTIONAL_STATE, "zookeeper")).lower() == "memory":
        return MemoryTransactionalState(_MEMORY_STATES.setdefault(state_id, {}))
    return ZkTransactionalState(conf, state_id)
