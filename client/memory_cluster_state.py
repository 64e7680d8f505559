"""The in-memory backend of :class:`~squall.client.cluster_state.ClusterState`, for unit tests and local mode.

A dict of znodes (data, version, owner) with ZooKeeper's rules that the
domain logic relies on: versions bump on every write, conditional writes
conflict, watches are one-shot, ephemeral nodes belong to the instance that
made them and vanish when it closes. Several instances can share one
:class:`MemoryStore` to play Nimbus and supervisors against one "ZooKeeper".
Watch callbacks run synchronously in the thread that made the change, after
the store's lock is released. Mirrors Heron's ``filestatemanager.py`` role.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any, Callable, Mapping

from .cluster_state import (NO_NODE, ClusterState, ClusterStateError, Paths, VersionConflict, Watch,
                            WatchEvent, check_node_size)


class MemoryStore:
    """The shared znode tree: ``path -> [data, version, owner]`` plus pending watches."""

    def __init__(self):
        self.lock = threading.RLock()
        self.nodes: dict[str, list] = {}
        self.data_watches: dict[str, list[Watch]] = defaultdict(list)
        self.child_watches: dict[str, list[Watch]] = defaultdict(list)
        #: leader-lock path -> contenders, first one leads.
        self.elections: dict[str, list["MemoryElection"]] = defaultdict(list)
        self.changed = threading.Condition(self.lock)

    def children(self, path: str) -> list[str]:
        prefix = path + "/"
        return sorted(p[len(prefix):] for p in self.nodes
                      if p.startswith(prefix) and "/" not in p[len(prefix):])

    def put(self, path: str, data: bytes, owner: object | None, fired: list) -> int:
        """Create or overwrite (parents made as needed); call with the lock held."""
        node = self.nodes.get(path)
        if node is not None:
            node[0], node[1] = data, node[1] + 1
            self._fire(self.data_watches, path, "changed", fired)
            return node[1]
        parent = path.rsplit("/", 1)[0]
        if parent and parent not in self.nodes:
            self.put(parent, b"", None, fired)
        self.nodes[path] = [data, 0, owner]
        self._fire(self.data_watches, path, "created", fired)
        self._fire(self.child_watches, parent, "child", fired)
        return 0

    def delete(self, path: str, fired: list) -> None:
        """Delete ``path`` and its descendants; call with the lock held."""
        for child in self.children(path):
            self.delete(path + "/" + child, fired)
        if self.nodes.pop(path, None) is not None:
            self._fire(self.data_watches, path, "deleted", fired)
            self._fire(self.child_watches, path, "deleted", fired)
            self._fire(self.child_watches, path.rsplit("/", 1)[0], "child", fired)

    @staticmethod
    def _fire(table: dict, path: str, kind: str, fired: list) -> None:
        for watch in table.pop(path, ()):  # one-shot, as in ZooKeeper
            fired.append((watch, WatchEvent(kind, path)))


class MemoryElection:
    """The surface of kazoo's ``Election`` (``run``, ``cancel``, ``contenders``) within one process."""

    def __init__(self, store: MemoryStore, path: str, identifier: str):
        self.store, self.path, self.identifier = store, path, identifier
        self._cancelled = False

    def run(self, func: Callable, *args, **kwargs) -> Any:
        """Block until this contender leads (or is cancelled), then call func; lead until it returns."""
        queue_ = self.store.elections[self.path]
        with self.store.changed:
            queue_.append(self)
            while queue_[0] is not self and not self._cancelled:
                self.store.changed.wait()
            if self._cancelled:
                queue_.remove(self)
                self.store.changed.notify_all()
                return None
        try:
            return func(*args, **kwargs)
        finally:
            with self.store.changed:
                queue_.remove(self)
                self.store.changed.notify_all()

    def cancel(self) -> None:
        with self.store.changed:
            self._cancelled = True
            self.store.changed.notify_all()

    def contenders(self) -> list[str]:
        with self.store.lock:
            return [c.identifier for c in self.store.elections[self.path]]


class InMemoryClusterState(ClusterState):
    """:class:`ClusterState` in a dict; pass one :class:`MemoryStore` to several instances to share it.

    Example::

        store = MemoryStore()
        nimbus, sup = InMemoryClusterState(store=store), InMemoryClusterState(store=store)
        sup.register_supervisor("sup-1", {"host": "h1", "slots": [6700]})
        assert "sup-1" in nimbus.supervisors()
        sup.close()                      # its ephemerals vanish, watches fire
        assert nimbus.supervisors() == {}

    :meth:`set_suspended` fakes a connection change for code that must step down.
    """

    def __init__(self, conf: Mapping[str, Any] | None = None, store: MemoryStore | None = None):
        super().__init__(conf)
        self.store = store if store is not None else MemoryStore()
        self._closed = False

        def ensure(fired):  # as the kazoo backend does on connect, so child watches can be set
            for subtree in Paths.SUBTREES:
                if self.paths.dir(subtree) not in self.store.nodes:
                    self.store.put(self.paths.dir(subtree), b"", None, fired)
        self._run(ensure)

    def _run(self, func: Callable[[list], Any]) -> Any:
        if self._closed:
            raise ClusterStateError("cluster state is closed")
        fired: list = []
        with self.store.lock:
            result = func(fired)
        for watch, event in fired:  # outside the lock, so callbacks may read and re-watch
            watch(event)
        return result

    def _read(self, path: str, watch: Watch | None) -> tuple[bytes, int] | None:
        def op(fired):
            if watch is not None:
                self.store.data_watches[path].append(watch)
            node = self.store.nodes.get(path)
            return None if node is None else (node[0], node[1])
        return self._run(op)

    def _children(self, path: str, watch: Watch | None) -> list[str]:
        def op(fired):
            if path not in self.store.nodes:
                return []
            if watch is not None:
                self.store.child_watches[path].append(watch)
            return self.store.children(path)
        return self._run(op)

    def _write(self, path: str, data: bytes, version: int | None) -> int:
        check_node_size(path, data)

        def op(fired):
            node = self.store.nodes.get(path)
            if version == NO_NODE and node is not None:
                raise VersionConflict(path, version)
            if version not in (None, NO_NODE) and (node is None or node[1] != version):
                raise VersionConflict(path, version)
            return self.store.put(path, data, None, fired)
        return self._run(op)

    def _delete_trees(self, paths: list[str]) -> None:
        def op(fired):
            for path in paths:
                self.store.delete(path, fired)
        self._run(op)

    def _ephemeral(self, path: str, data: bytes) -> None:
        check_node_size(path, data, "register")

        def op(fired):
            node = self.store.nodes.get(path)
            if node is not None and node[2] is not self:
                self.store.delete(path, fired)  # a stale owner's node: replace it, as the kazoo backend does
            self.store.put(path, data, self, fired)
        self._run(op)

    def leader_election(self, identifier: str) -> MemoryElection:
        return MemoryElection(self.store, self.paths.leader_lock, identifier)

    def set_suspended(self, suspended: bool) -> None:
        """Pretend the connection went SUSPENDED (True) or CONNECTED again (False); listeners hear it."""
        self._suspended = suspended
        self._notify("SUSPENDED" if suspended else "CONNECTED")

    def close(self) -> None:
        """Drop this instance's ephemeral nodes (watches fire) and refuse further calls; idempotent."""
        if self._closed:
            return

        def op(fired):
            for path in [p for p, node in self.store.nodes.items() if node[2] is self]:
                self.store.delete(path, fired)
        self._run(op)
        self._closed = True
