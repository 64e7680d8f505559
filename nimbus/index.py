"""The leader's in-memory index of live topologies: names, owners and assignments.

Only the leader writes /storms and /assignments, so while it leads it can keep what a
submit needs in memory — is the name taken, how many topologies does this user own, which
slots are used — instead of reading every topology from ZooKeeper (a submit then costs the
same with 1 or 500 live topologies). :meth:`TopologyIndex.rebuild` reads ZooKeeper once
when leadership starts; the leader records each write it makes. Not thread-safe: Nimbus's
lock guards it.
"""

from __future__ import annotations

from collections import Counter
from typing import Mapping

from ..client.cluster_state import ClusterState
from ..client.contract import Assignment
from .lifecycle import TopologyState


class TopologyIndex:
    def __init__(self) -> None:
        self.ready = False
        self._by_name: dict[str, str] = {}
        self._owner: dict[str, str] = {}
        self._owned: Counter[str] = Counter()
        self._assignments: dict[str, Assignment] = {}

    def rebuild(self, cluster_state: ClusterState) -> None:
        """Read every live topology and assignment once (leadership starts)."""
        self.clear()
        for tid in cluster_state.storm_ids():
            data = cluster_state.get_storm(tid)
            if data is not None:
                self.put_state(TopologyState.from_json(data))
        for tid in cluster_state.assignment_ids():
            found = cluster_state.get_assignment(tid)
            if found is not None:
                self._assignments[tid] = Assignment.from_json(found[0])
        self.ready = True

    def clear(self) -> None:
        """Forget everything (leadership lost): the next leader term rebuilds."""
        self.ready = False
        self._by_name.clear()
        self._owner.clear()
        self._owned.clear()
        self._assignments.clear()

    # --- the leader's writes ---
    def put_state(self, state: TopologyState) -> None:
        tid = state.topology_id
        if tid not in self._owner:
            self._owner[tid] = state.owner
            self._owned[state.owner] += 1
        self._by_name[state.name] = tid

    def put_assignment(self, tid: str, assignment: Assignment) -> None:
        self._assignments[tid] = assignment

    def remove(self, tid: str) -> None:
        owner = self._owner.pop(tid, None)
        if owner is not None:
            self._owned[owner] -= 1
            if self._owned[owner] <= 0:
                del self._owned[owner]
        for name in [n for n, t in self._by_name.items() if t == tid]:
            del self._by_name[name]
        self._assignments.pop(tid, None)

    # --- reads ---
    def live(self, tid: str) -> bool:
        return tid in self._owner

    def topology_id(self, name: str) -> str | None:
        return self._by_name.get(name)

    def count(self) -> int:
        return len(self._owner)

    def owned_by(self, principal: str) -> int:
        return self._owned.get(principal, 0)

    def assignments(self) -> Mapping[str, Assignment]:
        return self._assignments
