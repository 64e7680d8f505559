"""KazooClusterState against a real ZooKeeper: CRUD, versions, ephemerals, watches, session loss."""

from __future__ import annotations

import threading
import time

import pytest

from squall.client.cluster_state import NO_NODE, MAX_ERRORS_PER_COMPONENT, VersionConflict, \
    ZooKeeperUnavailable
from squall.client.zk_cluster_state import KazooClusterState
from squall.deploy.net import free_port
from zk_fixtures import expire_session, poll_for

pytestmark = pytest.mark.integration

STORM = {"name": "wordcount", "owner": "alice", "status": "ACTIVE", "launch_time_secs": 1700000000,
         "num_workers": 2, "kill_wait_secs": None, "component_executors": {"split": 4}}
ASSIGNMENT = {"executor_node_port": {"1-2": ["sup-1", 6700], "3-3": ["sup-2", 6701]},
              "node_host": {"sup-1": "h1", "sup-2": "h2"}, "executor_start_time_secs": {"1-2": 17}}


def test_storms_round_trip_as_json(cluster_state):
    assert cluster_state.get_storm("wc-1") is None
    assert cluster_state.storm_ids() == []
    cluster_state.set_storm("wc-1", STORM)
    cluster_state.set_storm("other-2", {"name": "other", "status": "INACTIVE"})
    assert cluster_state.get_storm("wc-1") == STORM
    assert cluster_state.storm_ids() == ["other-2", "wc-1"]
    cluster_state.set_storm("wc-1", dict(STORM, status="KILLED", kill_wait_secs=30))
    assert cluster_state.get_storm("wc-1")["status"] == "KILLED"


def test_assignment_versions_and_conflict(cluster_state):
    assert cluster_state.get_assignment("wc-1") is None
    v0 = cluster_state.set_assignment("wc-1", ASSIGNMENT, expected_version=NO_NODE)
    assert cluster_state.get_assignment("wc-1") == (ASSIGNMENT, v0)
    assert cluster_state.assignment_ids() == ["wc-1"]
    with pytest.raises(VersionConflict, match="not to exist"):
        cluster_state.set_assignment("wc-1", ASSIGNMENT, expected_version=NO_NODE)
    v1 = cluster_state.set_assignment("wc-1", {"node_host": {}}, expected_version=v0)
    assert v1 == v0 + 1
    # A second writer still holding v0 loses, and its write does not land.
    with pytest.raises(VersionConflict) as info:
        cluster_state.set_assignment("wc-1", ASSIGNMENT, expected_version=v0)
    assert info.value.expected == v0 and info.value.path.endswith("/assignments/wc-1")
    assert cluster_state.get_assignment("wc-1") == ({"node_host": {}}, v1)
    assert cluster_state.set_assignment("wc-1", ASSIGNMENT) == v1 + 1  # unconditional


def test_supervisors_are_ephemeral(cluster_state, zk_conf):
    other = KazooClusterState(zk_conf)
    try:
        other.register_supervisor("sup-2", {"host": "h2", "slots": [6700, 6701]})
        cluster_state.register_supervisor("sup-1", {"host": "h1", "slots": [6700], "used_slots": []})
        other.register_supervisor("sup-2", {"host": "h2", "slots": [6700, 6701], "uptime_secs": 5})
        assert cluster_state.supervisors() == {
            "sup-1": {"host": "h1", "slots": [6700], "used_slots": []},
            "sup-2": {"host": "h2", "slots": [6700, 6701], "uptime_secs": 5}}
    finally:
        other.close()
    poll_for(lambda: "sup-2" not in cluster_state.supervisors(), what="sup-2 to vanish")
    assert list(cluster_state.supervisors()) == ["sup-1"]


def test_nimbuses_are_ephemeral(cluster_state, zk_conf):
    other = KazooClusterState(zk_conf)
    other.register_nimbus("10.0.0.2:6627", {"version": "0.1.0"})
    cluster_state.register_nimbus("10.0.0.1:6627", {"version": "0.1.0"})
    assert set(cluster_state.nimbuses()) == {"10.0.0.1:6627", "10.0.0.2:6627"}
    other.close()
    poll_for(lambda: list(cluster_state.nimbuses()) == ["10.0.0.1:6627"], what="nimbus to vanish")


def test_watches_fire_on_assignment_changes(cluster_state, zk_conf):
    writer = KazooClusterState(zk_conf)
    try:
        created, changed, children = threading.Event(), threading.Event(), threading.Event()
        events = []

        def on_data(event):
            events.append(event)
            (changed if event.kind == "changed" else created).set()

        assert cluster_state.get_assignment("wc-1", watch=on_data) is None
        assert cluster_state.assignment_ids(watch=lambda e: children.set()) == []
        v = writer.set_assignment("wc-1", ASSIGNMENT)
        assert created.wait(5) and children.wait(5)
        assert events[0].kind == "created" and events[0].path.endswith("/assignments/wc-1")
        assert cluster_state.get_assignment("wc-1", watch=on_data) == (ASSIGNMENT, v)
        writer.set_assignment("wc-1", {"node_host": {"sup-1": "h9"}}, expected_version=v)
        assert changed.wait(5)
        assert cluster_state.get_assignment("wc-1")[0] == {"node_host": {"sup-1": "h9"}}
    finally:
        writer.close()


def test_errors_keep_the_last_ten_per_component(cluster_state):
    for i in range(MAX_ERRORS_PER_COMPONENT + 5):
        cluster_state.report_error("wc-1", "split", f"boom {i}", 100 + i, host="h1", port=6700)
    cluster_state.report_error("wc-1", "count/odd name", "bad", 50)
    split = cluster_state.errors("wc-1", "split")
    assert [e["error"] for e in split] == [f"boom {i}" for i in range(5, 15)]
    assert split[0] == {"component": "split", "error": "boom 5", "time": 105, "host": "h1", "port": 6700,
                        "task": None}
    everything = cluster_state.errors("wc-1")
    assert len(everything) == 11 and everything[0]["component"] == "count/odd name"
    assert cluster_state.errors("nope") == [] and cluster_state.errors("wc-1", "nope") == []


def test_concurrent_error_reports_are_not_lost(cluster_state, zk_conf):
    other = KazooClusterState(zk_conf)
    try:
        def report(state, tag):
            for i in range(4):
                state.report_error("wc-1", "split", f"{tag}{i}", time.time())
        threads = [threading.Thread(target=report, args=(s, t))
                   for s, t in ((cluster_state, "a"), (other, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert sorted(e["error"] for e in cluster_state.errors("wc-1", "split")) == \
            ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3"]
    finally:
        other.close()


def test_remove_storm_removes_only_that_topology(cluster_state):
    for sid in ("wc-1", "keep-2"):
        cluster_state.set_storm(sid, STORM)
        cluster_state.set_assignment(sid, ASSIGNMENT)
        cluster_state.report_error(sid, "split", "boom", 1)
        cluster_state.report_error(sid, "count", "boom", 2)
    cluster_state.remove_storm("wc-1")
    assert cluster_state.storm_ids() == ["keep-2"]
    assert cluster_state.assignment_ids() == ["keep-2"]
    assert cluster_state.get_storm("wc-1") is None and cluster_state.get_assignment("wc-1") is None
    assert cluster_state.errors("wc-1") == []
    assert len(cluster_state.errors("keep-2")) == 2
    cluster_state.remove_storm("wc-1")  # removing again is a no-op
    cluster_state.remove_storm("never-existed")


def test_connecting_to_a_dead_port_fails_fast_and_clearly(zookeeper):
    port = free_port()
    conf = {"storm.zookeeper.servers": ["127.0.0.1"], "storm.zookeeper.port": port}
    started = time.monotonic()
    with pytest.raises(ZooKeeperUnavailable) as info:
        KazooClusterState(conf, connect_timeout=2)
    assert time.monotonic() - started < 6
    message = str(info.value)
    assert f"cannot reach ZooKeeper at 127.0.0.1:{port}" in message
    assert "is it running?" in message and "storm.zookeeper.servers" in message
    assert info.value.address == f"127.0.0.1:{port}"


def test_leader_election_elects_one_at_a_time(cluster_state, zk_conf):
    other = KazooClusterState(zk_conf)
    try:
        first, second = cluster_state.leader_election("nimbus-a"), other.leader_election("nimbus-b")
        leading, release = threading.Event(), threading.Event()
        led = []

        def lead(name):
            led.append(name)
            leading.set()
            release.wait(10)

        t1 = threading.Thread(target=first.run, args=(lead, "a"))
        t1.start()
        assert leading.wait(5)
        leading.clear()
        t2 = threading.Thread(target=second.run, args=(lead, "b"))
        t2.start()
        poll_for(lambda: len(first.contenders()) == 2, what="two contenders")
        assert first.contenders() == ["nimbus-a", "nimbus-b"] and led == ["a"]
        release.set()
        assert leading.wait(5)
        assert led == ["a", "b"]
        t1.join(5)
        t2.join(5)
    finally:
        other.close()


def test_session_loss_recreates_ephemerals(cluster_state, zk_conf):
    observer = KazooClusterState(zk_conf)
    try:
        states = []
        cluster_state.add_listener(states.append)
        cluster_state.register_supervisor("sup-1", {"host": "h1"})
        old_session = cluster_state._client.client_id[0]
        gone = threading.Event()
        observer.supervisors(watch=lambda e: gone.set())
        expire_session(cluster_state)
        # The server ends the session: its ephemeral goes, and the observer's watch fires.
        assert gone.wait(10)
        poll_for(lambda: "LOST" in states, what="LOST")
        poll_for(lambda: observer.supervisors() == {"sup-1": {"host": "h1"}}, what="sup-1 re-created")
        assert cluster_state._client.client_id[0] != old_session
        poll_for(lambda: states[-1] == "CONNECTED", what="CONNECTED after LOST")
        assert not cluster_state.suspended
        # It belongs to the new session: closing that client removes it.
        cluster_state.close()
        poll_for(lambda: observer.supervisors() == {}, what="sup-1 to vanish with its new session")
    finally:
        observer.close()


def test_dropped_connection_suspends_then_resumes(cluster_state):
    from kazoo.protocol.connection import _CONNECTION_DROP  # kazoo's own test hook

    states = []
    resumed = threading.Event()
    cluster_state.add_listener(lambda s: (states.append(s), s == "CONNECTED" and resumed.set()))
    cluster_state.register_supervisor("sup-1", {"host": "h1"})
    cluster_state._client._call(_CONNECTION_DROP, cluster_state._client.handler.async_result())
    assert resumed.wait(10)
    assert states == ["SUSPENDED", "CONNECTED"] and not cluster_state.suspended
    # Same session: the ephemeral never went away.
    assert cluster_state.supervisors() == {"sup-1": {"host": "h1"}}


def test_listener_only_flags_and_hands_off(cluster_state):
    seen = threading.Event()
    cluster_state.add_listener(lambda s: s == "SUSPENDED" and seen.set())
    cluster_state._on_state("SUSPENDED")  # what kazoo's connection thread calls
    assert cluster_state.suspended and cluster_state.state == "SUSPENDED"
    assert seen.wait(5)
    cluster_state._on_state("CONNECTED")
    assert not cluster_state.suspended


def test_zookeeper_outage_fails_operations_clearly_then_resumes(zookeeper, tmp_path):
    # `zookeeper` only for its skip when the package is missing: this test runs its own server.
    from squall.deploy.zookeeper import LocalZooKeeper

    zk = LocalZooKeeper(str(tmp_path / "zk")).start()
    port = zk.port
    state = KazooClusterState(zk.conf(root="/outage"), connect_timeout=2, session_timeout=8)
    try:
        state.set_storm("wc-1", {"name": "wc"})
        zk.stop()
        started = time.monotonic()
        with pytest.raises(ZooKeeperUnavailable, match=f"cannot reach ZooKeeper at 127.0.0.1:{port}"):
            state.get_storm("wc-1")
        assert time.monotonic() - started < 6
        assert state.suspended
        zk = LocalZooKeeper(str(tmp_path / "zk"), port=port).start()
        # Same data dir, same session (within its timeout): the client resumes on its own.
        poll_for(lambda: not state.suspended, timeout=15, what="reconnect")
        assert state.get_storm("wc-1") == {"name": "wc"}
    finally:
        state.close()
        zk.stop()


def test_trident_transactional_state_in_zookeeper_survives_a_new_connection(zk_conf):
    from squall.client.trident.tx_state import RotatingTransactionalState, make_tx_state

    s = make_tx_state("wordcount-spout", zk_conf)
    try:
        s.set_data("coordinator/currtx", 7)
        r = RotatingTransactionalState(s, "partition-0")
        r.get_state_or_create(7, lambda txid, last: {"offset": 0, "next": 100})
        r.get_state_or_create(8, lambda txid, last: {"offset": last["next"], "next": 150})
        r.cleanup_before(8)
    finally:
        s.close()
    again = make_tx_state("wordcount-spout", zk_conf)
    try:
        assert again.get_data("coordinator/currtx") == 7
        assert again.list("") == ["coordinator", "partition-0"]
        assert RotatingTransactionalState(again, "partition-0").curr == \
            {8: {"offset": 100, "next": 150}}
        again.delete("")
        assert again.list("") == []
    finally:
        again.close()


def test_a_node_too_large_is_refused_and_the_session_stays_up(cluster_state):
    """ZooKeeper drops the session of a client that sends more than jute.maxbuffer: the write
    is refused before it is sent, and the connection never leaves CONNECTED."""
    from squall.client.cluster_state import MAX_NODE_BYTES, NodeTooLarge
    events: list[str] = []
    cluster_state.add_listener(events.append)
    cluster_state.set_storm("big-1", {"name": "big"})
    with pytest.raises(NodeTooLarge, match="is more than a node holds"):
        cluster_state.set_storm("big-1", {"name": "big", "blob": "x" * (2 * MAX_NODE_BYTES)})
    # The largest write allowed goes through, on the same session.
    blob = "x" * (MAX_NODE_BYTES - 100)
    cluster_state.set_storm("big-1", {"blob": blob})
    assert cluster_state.get_storm("big-1") == {"blob": blob}
    for _ in range(50):
        cluster_state.report_error("big-1", "c", "y" * 2_000_000, time.time())
    assert len(cluster_state.errors("big-1", "c")) == MAX_ERRORS_PER_COMPONENT
    assert events == [] and not cluster_state.suspended, events
