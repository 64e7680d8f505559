"""InMemoryClusterState: the ClusterState contract without ZooKeeper (for Nimbus/supervisor unit tests)."""

from __future__ import annotations

import threading

import pytest

from squall.client.cluster_state import (MAX_ERRORS_PER_COMPONENT, NO_NODE, ClusterStateError,
                                         InMemoryClusterState, Paths, VersionConflict, WatchEvent,
                                         tx_namespace)
from squall.client.memory_cluster_state import MemoryStore

ASSIGNMENT = {"executor_node_port": {"1-2": ["sup-1", 6700]}, "node_host": {"sup-1": "h1"}}


@pytest.fixture
def store():
    return MemoryStore()


@pytest.fixture
def state(store):
    s = InMemoryClusterState({"storm.zookeeper.root": "/squall-unit"}, store=store)
    yield s
    s.close()


def test_storms_round_trip(state):
    assert state.get_storm("wc-1") is None and state.storm_ids() == []
    state.set_storm("wc-1", {"name": "wc", "status": "ACTIVE", "workers": {1: "a"}})
    # Stored as JSON: int keys come back as strings.
    assert state.get_storm("wc-1") == {"name": "wc", "status": "ACTIVE", "workers": {"1": "a"}}
    state.set_storm("a-2", {"name": "a"})
    assert state.storm_ids() == ["a-2", "wc-1"]
    assert "/squall-unit/storms/wc-1" in state.store.nodes


def test_assignment_version_checks(state):
    v0 = state.set_assignment("wc-1", ASSIGNMENT, expected_version=NO_NODE)
    assert state.get_assignment("wc-1") == (ASSIGNMENT, v0)
    with pytest.raises(VersionConflict, match="not to exist"):
        state.set_assignment("wc-1", {}, expected_version=NO_NODE)
    v1 = state.set_assignment("wc-1", {"x": 1}, expected_version=v0)
    with pytest.raises(VersionConflict) as info:
        state.set_assignment("wc-1", {"y": 2}, expected_version=v0)
    assert info.value.expected == v0 and isinstance(info.value, ClusterStateError)
    with pytest.raises(VersionConflict):
        state.set_assignment("gone-3", {}, expected_version=0)
    assert state.get_assignment("wc-1") == ({"x": 1}, v1)
    assert state.set_assignment("wc-1", {"z": 3}) == v1 + 1
    assert state.assignment_ids() == ["wc-1"]


def test_watches_are_one_shot(state):
    events = []
    assert state.get_assignment("wc-1", watch=events.append) is None
    state.assignment_ids(watch=events.append)
    state.set_assignment("wc-1", ASSIGNMENT)
    assert events == [WatchEvent("created", "/squall-unit/assignments/wc-1"),
                      WatchEvent("child", "/squall-unit/assignments")]
    state.set_assignment("wc-1", {})
    assert len(events) == 2  # not re-registered
    state.get_assignment("wc-1", watch=events.append)
    state.set_assignment("wc-1", ASSIGNMENT)
    assert events[-1] == WatchEvent("changed", "/squall-unit/assignments/wc-1")


def test_watch_callback_may_read_and_rewatch(state):
    seen = []

    def follow(event):
        seen.append(state.get_assignment("wc-1", watch=follow))

    state.get_assignment("wc-1", watch=follow)
    state.set_assignment("wc-1", {"n": 1})
    state.set_assignment("wc-1", {"n": 2})
    assert seen == [({"n": 1}, 0), ({"n": 2}, 1)]


def test_errors_bounded_per_component(state):
    for i in range(MAX_ERRORS_PER_COMPONENT + 3):
        state.report_error("wc-1", "split", f"e{i}", i)
    state.report_error("wc-1", "a/b", "slash", 0.5)
    assert [e["error"] for e in state.errors("wc-1", "split")] == [f"e{i}" for i in range(3, 13)]
    merged = state.errors("wc-1")
    assert merged[0] == {"component": "a/b", "error": "slash", "time": 0.5, "host": None, "port": None,
                         "task": None}
    assert len(merged) == 11
    assert state.errors("other") == []


def test_remove_storm_only_that_topology(state):
    for sid in ("wc-1", "keep-2"):
        state.set_storm(sid, {"name": sid})
        state.set_assignment(sid, ASSIGNMENT)
        state.report_error(sid, "split", "boom", 1)
    deleted = []
    state.get_storm("wc-1", watch=deleted.append)
    state.remove_storm("wc-1")
    assert deleted == [WatchEvent("deleted", "/squall-unit/storms/wc-1")]
    assert state.storm_ids() == ["keep-2"] and state.assignment_ids() == ["keep-2"]
    assert state.errors("wc-1") == [] and len(state.errors("keep-2")) == 1
    assert not [p for p in state.store.nodes if "wc-1" in p]
    state.remove_storm("wc-1")


def test_ephemerals_vanish_when_their_owner_closes(state, store):
    sup = InMemoryClusterState({"storm.zookeeper.root": "/squall-unit"}, store=store)
    sup.register_supervisor("sup-1", {"host": "h1", "slots": [6700]})
    sup.register_supervisor("sup-1", {"host": "h1", "slots": [6700], "used": [6700]})
    sup.register_nimbus("h1:6627", {})
    state.register_supervisor("sup-2", {"host": "h2"})
    left = []
    assert state.supervisors(watch=left.append) == {
        "sup-1": {"host": "h1", "slots": [6700], "used": [6700]}, "sup-2": {"host": "h2"}}
    assert state.nimbuses() == {"h1:6627": {}}
    sup.close()
    assert left == [WatchEvent("child", "/squall-unit/supervisors")]
    assert state.supervisors() == {"sup-2": {"host": "h2"}} and state.nimbuses() == {}
    with pytest.raises(ClusterStateError, match="closed"):
        sup.get_storm("x")
    sup.close()


def test_leader_election_one_at_a_time(state, store):
    other = InMemoryClusterState({"storm.zookeeper.root": "/squall-unit"}, store=store)
    first, second = state.leader_election("a"), other.leader_election("b")
    leading, release, order = threading.Event(), threading.Event(), []

    def lead(name):
        order.append(name)
        leading.set()
        release.wait(5)

    t1 = threading.Thread(target=first.run, args=(lead, "a"))
    t1.start()
    assert leading.wait(5)
    t2 = threading.Thread(target=second.run, args=(lead, "b"))
    t2.start()
    for _ in range(500):
        if first.contenders() == ["a", "b"]:
            break
        threading.Event().wait(0.01)
    assert first.contenders() == ["a", "b"] and order == ["a"]
    release.set()
    t1.join(5)
    t2.join(5)
    assert order == ["a", "b"] and first.contenders() == []


def test_cancelled_contender_returns_without_leading(state):
    election = state.leader_election("a")
    election.cancel()
    assert election.run(lambda: pytest.fail("must not lead")) is None


def test_suspension_is_heard_by_listeners(state):
    heard = []
    state.add_listener(heard.append)
    state.set_suspended(True)
    assert state.suspended
    state.set_suspended(False)
    assert heard == ["SUSPENDED", "CONNECTED"] and not state.suspended


def test_paths_quote_names_into_one_segment():
    paths = Paths("/r/")
    assert paths.storm("a/b") == "/r/storms/a%2Fb"
    assert paths.nimbus("10.0.0.1:6627") == "/r/nimbuses/10.0.0.1:6627"
    assert paths.errors("t", "c") == "/r/errors/t/c" and paths.leader_lock == "/r/leader-lock"
    assert Paths("/").storm("x") == "/storms/x"
    with pytest.raises(ValueError):
        paths.storm("..")


def test_each_topology_keeps_its_transactional_states_in_a_namespace_of_its_own(store):
    # Owner and name quoted whole: no two pairs, and no state id, give the same node.
    assert tx_namespace("c", "a@b") != tx_namespace("b@c", "a")
    assert tx_namespace("wc", "alice") == "!alice!wc" and "!" not in Paths().transactional("!x")
    alice = InMemoryClusterState({"topology.name": "etl", "topology.submitter.user": "alice"},
                                 store=store)
    bob = InMemoryClusterState({"topology.name": "etl", "topology.submitter.user": "bob"},
                               store=store)
    alice.tx_set("lines", "currtx", 5)
    assert bob.tx_get("lines", "currtx") is None  # one txid name, two states
    assert alice.paths.transactional("lines") == "/squall/transactional/!alice!etl/lines"


def test_a_state_of_before_namespaces_moves_into_its_topologys_when_opened(store):
    daemon = InMemoryClusterState(store=store)  # no topology name: the root, as before
    daemon.tx_set("lines", "meta/7", {"offset": 70})
    worker = InMemoryClusterState({"topology.name": "wc"}, store=store)
    assert worker.tx_migrate("lines")
    assert worker.tx_get("lines", "meta/7") == {"offset": 70}
    assert daemon.tx_get("lines", "meta/7") is None  # moved, not copied (it may delete here)
    daemon.tx_set("lines", "meta/7", {"offset": 1})  # a later one on the root is not taken:
    assert not worker.tx_migrate("lines")             # the namespace has its own
    assert worker.tx_get("lines", "meta/7") == {"offset": 70}
    assert not daemon.tx_migrate("lines")  # nowhere to move to


def test_context_manager_closes(store):
    with InMemoryClusterState(store=store) as s:
        s.register_supervisor("sup-1", {})
    assert InMemoryClusterState(store=store).supervisors() == {}
