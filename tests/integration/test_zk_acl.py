"""Locked ZooKeeper: with storm.zookeeper.auth.payload every node Squall makes carries digest
ACLs; an anonymous client can neither read nor write, a topology reaches only its own
transactional state, in a namespace Nimbus made for it (it creates nothing elsewhere), the
cluster identity reaches everything."""

from __future__ import annotations

import logging
import time

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE, Permissions

from squall.client import config as cfg
from squall.client import zk_auth
from squall.client.cluster_state import ClusterStateError, Paths
from squall.client.errors import ConfigError
from squall.client.trident.tx_state import make_tx_state
from squall.client.zk_cluster_state import KazooClusterState
from zk_fixtures import TEST_SESSION_TIMEOUT


@pytest.fixture
def raw(zookeeper):
    """``raw(payload=None)``: a plain kazoo client, anonymous or with a digest payload."""
    made = []

    def make(payload: str | None = None) -> KazooClient:
        z = KazooClient(hosts=zookeeper.connect_string, timeout=TEST_SESSION_TIMEOUT,
                        auth_data=[("digest", payload)] if payload else None)
        z.start(timeout=10)
        made.append(z)
        return z

    yield make
    for z in made:
        z.stop()
        z.close()


def worker_conf(zk_conf, name: str, owner: str = "") -> dict:
    """What a worker of topology ``name`` of ``owner`` has: the inherited keys (its own
    ZooKeeper identity, not the cluster's) and its topology's name and owner."""
    conf = dict(cfg.worker_inherited(zk_conf, name, owner),
                **{cfg.TOPOLOGY_NAME: name, cfg.TOPOLOGY_SUBMITTER_USER: owner})
    assert cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD not in conf
    return conf


def worker_state(zk_conf, name: str, owner: str = "") -> KazooClusterState:
    """The cluster state a worker of topology ``name`` of ``owner`` opens for Trident."""
    return KazooClusterState(worker_conf(zk_conf, name, owner))


def cluster_view(zk_conf, name: str, owner: str = "") -> KazooClusterState:
    """The cluster identity looking at topology ``name`` of ``owner``'s states."""
    return KazooClusterState(dict(zk_conf, **{cfg.TOPOLOGY_NAME: name,
                                              cfg.TOPOLOGY_SUBMITTER_USER: owner}))


def assert_locked(z: KazooClient, path: str, parent_locked: bool = True) -> None:
    with pytest.raises(NoAuthError):
        z.get(path)
    with pytest.raises(NoAuthError):
        z.get_children(path)
    with pytest.raises(NoAuthError):
        z.set(path, b"x")
    with pytest.raises(NoAuthError):
        z.create(path + "/intruder", b"x")
    if parent_locked:
        with pytest.raises(NoAuthError):
            z.delete(path)  # DELETE on the parent
    with pytest.raises(NoAuthError):
        z.set_acls(path, OPEN_ACL_UNSAFE)


def test_every_node_of_the_daemons_is_locked_to_the_cluster(cluster_state, zk_conf, raw):
    s, p = cluster_state, cluster_state.paths
    s.register_supervisor("sup-1", {"host": "h1", "slots": [6700]})
    s.register_nimbus("127.0.0.1:6627", {"host": "127.0.0.1"})
    s.set_storm("wc-1", {"name": "wc", "status": "ACTIVE"})
    s.set_assignment("wc-1", {"executors": {}})
    s.report_error("wc-1", "split", "boom", time.time(), "h1", 6700, 3)
    s.tx_set("wc-spout", "meta/1", {"offset": 3})
    election = s.leader_election("nimbus-a")
    assert election.lock.acquire(timeout=10)
    try:
        [ballot] = s._client.get_children(p.leader_lock)
        namespace = p.tx_namespace_dir("wc")
        nodes = [p.root, p.storm("wc-1"), p.assignment("wc-1"), p.supervisor("sup-1"),
                 p.nimbus("127.0.0.1:6627"), p.errors("wc-1"), p.errors("wc-1", "split"),
                 p.leader_lock, f"{p.leader_lock}/{ballot}", p.transactional_root,
                 p.transactional("wc-spout"), p.transactional("wc-spout", "meta/1"), namespace]
        nodes += [p.dir(t) for t in Paths.SUBTREES]
        anonymous = raw()
        for path in nodes:
            assert_locked(anonymous, path, path != p.root)  # the root's parent is not ours
        # Every node below the root, whoever made it, carries the cluster's digest and no world;
        # a topology's namespace its own digest's too, and no other topology's.
        payload = zk_conf[cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD]
        cluster_id = zk_auth.digest_id(payload)
        wc_id = zk_auth.digest_id(zk_auth.topology_payload(payload, "wc"))
        todo, seen = [p.root], 0
        while todo:
            path = todo.pop()
            acls, _ = s._client.get_acls(path)
            expected = [("digest", cluster_id)] + ([("digest", wc_id)] if path == namespace
                                                   else [])
            assert [(a.id.scheme, a.id.id) for a in acls if a.perms == 31] == expected, path
            assert all(a.id.scheme == "digest" for a in acls), path
            todo += [f"{path}/{c}" for c in s._client.get_children(path)]
            seen += 1
        assert seen >= len(set(nodes))
    finally:
        election.lock.release()


def test_a_topology_reaches_its_own_transactional_state_only(cluster_state, zk_conf, raw):
    cluster_state.set_storm("wc-1", {"name": "wc"})        # Nimbus persists: the namespaces
    cluster_state.set_storm("other-1", {"name": "other"})
    cluster_state.set_assignment("wc-1", {"executors": {}})
    wc, other = worker_state(zk_conf, "wc"), worker_state(zk_conf, "other")
    try:
        assert wc.identity.kind == "topology"
        wc.tx_set("wc-spout", "meta/1", {"offset": 3})
        wc.tx_set("wc-spout", "meta/2", {"offset": 5})
        assert wc.tx_get("wc-spout", "meta/1") == {"offset": 3}
        assert wc.tx_children("wc-spout", "meta") == ["1", "2"]
        wc.tx_delete("wc-spout", "meta/2")
        other.tx_set("other-spout", "currtx", 7)
        # The same state id in two topologies is two states: none can take another's first.
        other.tx_set("wc-spout", "meta/1", {"offset": 0})
        assert wc.tx_get("wc-spout", "meta/1") == {"offset": 3}

        # The cluster identity reads and cleans up everything (superACL on a topology's nodes).
        with cluster_view(zk_conf, "wc") as c:
            assert c.tx_get("wc-spout", "meta/1") == {"offset": 3}
        with cluster_view(zk_conf, "other") as c:
            assert c.tx_get("other-spout", "currtx") == 7
        # No topology reads or writes the daemons' nodes.
        for op in (lambda: wc.get_assignment("wc-1"),
                   lambda: wc.set_assignment("wc-1", {"executors": {"evil": 1}}),
                   lambda: wc.storm_ids()):
            with pytest.raises(ClusterStateError, match="not allowed"):
                op()
        # A plain client holding the topology's payload reaches its namespace and nothing else:
        # not another's, and it creates nothing on the transactional root (issue 23, finding 10:
        # it could take another topology's state id there, or litter it with open nodes).
        wc_payload = zk_auth.topology_payload(zk_conf[cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD], "wc")
        z, p = raw(wc_payload), wc.paths
        assert z.get(p.transactional("wc-spout", "meta/1"))[0] == b'{"offset":3}'
        z.set(p.transactional("wc-spout", "meta/1"), b'{"offset":4}')
        theirs = other.paths.transactional("other-spout", "currtx")
        for path in (p.assignment("wc-1"), p.dir(Paths.ASSIGNMENTS), theirs):
            with pytest.raises(NoAuthError):
                z.get(path)
            with pytest.raises(NoAuthError):
                z.set(path, b"{}")
        with pytest.raises(NoAuthError):
            z.get_children(p.transactional_root)
        for path in (p.transactional_root + "/other-spout", p.tx_namespace_dir("third"),
                     other.paths.transactional("wc-spout", "x"), p.transactional_root + "/open"):
            with pytest.raises(NoAuthError):
                z.create(path, b"x", acl=OPEN_ACL_UNSAFE)
        anonymous = raw()
        for path in (p.transactional("wc-spout"), p.transactional("wc-spout", "meta/1"), theirs,
                     p.tx_namespace_dir("wc")):
            assert_locked(anonymous, path)
    finally:
        wc.close()
        other.close()


def test_a_topology_nimbus_never_recorded_creates_nothing(cluster_state, zk_conf):
    with worker_state(zk_conf, "stranger") as w:
        with pytest.raises(ClusterStateError, match="not allowed"):
            w.tx_set("its-spout", "currtx", 1)
    assert cluster_state.tx_children("its-spout", "") == []


def test_a_resubmitted_topology_reads_its_old_state(cluster_state, zk_conf):
    name = "wörter count"  # not ASCII, a space: quoted in the digest user
    cluster_state.set_storm("w-1", {"name": name})
    with worker_state(zk_conf, name) as w:
        w.tx_set("w-spout", "currtx", 41)
    cluster_state.remove_storm("w-1")
    cluster_state.set_storm("w-2", {"name": name})
    with worker_state(zk_conf, name) as w:
        assert w.tx_get("w-spout", "currtx") == 41


def test_the_topology_payload_alone_is_the_identity(zk_conf):
    conf = cfg.worker_inherited(zk_conf, "wc")
    assert conf[cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD].startswith("topology-wc:")
    with KazooClusterState(conf) as w:
        assert w.identity.kind == "topology"
        assert w._client.auth_data == {("digest", conf[cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD])}


def test_an_unknown_scheme_is_a_config_error(zk_conf):
    with pytest.raises(ConfigError, match="storm.zookeeper.auth.scheme.*only digest"):
        KazooClusterState(dict(zk_conf, **{cfg.STORM_ZOOKEEPER_AUTH_SCHEME: "sasl"}))


def test_a_tree_left_open_is_locked_at_the_next_start(zk_conf, raw, caplog):
    open_conf = {k: v for k, v in zk_conf.items() if k != cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD}
    with KazooClusterState(open_conf) as before:  # the cluster before its upgrade
        before.set_storm("wc-1", {"name": "wc"})
        before.set_assignment("wc-1", {"executors": {}})
        before.tx_set("wc-spout", "meta/1", {"offset": 3})
        p = before.paths
        assert raw().get(p.assignment("wc-1"))[0]  # open to anyone
        with caplog.at_level(logging.WARNING, "squall.cluster_state"):
            with KazooClusterState(zk_conf):
                pass
        assert "were open to anyone" in caplog.text and "wc (owner ?)" in caplog.text
        anonymous = raw()
        for path in (p.root, p.storm("wc-1"), p.assignment("wc-1"), p.transactional_root,
                     p.transactional("wc-spout", "meta/1")):
            assert_locked(anonymous, path, path != p.root)
        with pytest.raises(ClusterStateError, match="not allowed"):
            before.get_assignment("wc-1")  # an old daemon left running is locked out too
    with worker_state(zk_conf, "wc") as w:  # the running topology resumes from its state
        assert w.tx_migrate("wc-spout")  # as make_tx_state does: into its namespace
        assert w.tx_get("wc-spout", "meta/1") == {"offset": 3}
        w.tx_set("wc-spout", "meta/2", {"offset": 4})
    caplog.clear()
    with caplog.at_level(logging.WARNING, "squall.cluster_state"):
        with KazooClusterState(zk_conf):  # locked already: nothing to do
            pass
    assert "open to anyone" not in caplog.text


def test_a_daemon_with_another_password_fails_at_start(cluster_state, zk_conf):
    wrong = dict(zk_conf, **{cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD: "squall:not-the-password"})
    with pytest.raises(ClusterStateError, match="connect: not allowed by the node's ACL"):
        KazooClusterState(wrong)


def test_another_owners_topology_of_the_same_name_cannot_read_the_old_state(zk_conf,
                                                                              cluster_state, raw):
    """Alice's "etl" is killed; Bob submits an "etl" of his own: its workers do not get
    Alice's Trident state (the identity is an HMAC of owner and name, the namespace is
    Alice's), and Alice resubmitting hers resumes it."""
    cluster_state.set_storm("etl-1", {"name": "etl", "owner": "alice"})
    with worker_state(zk_conf, "etl", "alice") as w:
        w.tx_set("etl-spout", "meta/1", {"offset": 7})
        alices = w.paths.transactional("etl-spout", "meta/1")
    cluster_state.remove_storm("etl-1")
    cluster_state.set_storm("etl-2", {"name": "etl", "owner": "bob"})
    with worker_state(zk_conf, "etl", "bob") as w:
        assert w.tx_get("etl-spout", "meta/1") is None  # its own namespace: empty
        w.tx_set("etl-spout", "meta/2", {"offset": 0})
    bob = raw(zk_auth.topology_payload(zk_conf[cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD], "etl", "bob"))
    with pytest.raises(NoAuthError):
        bob.get(alices)
    with pytest.raises(NoAuthError):
        bob.set(alices, b"{}")
    cluster_state.set_storm("etl-3", {"name": "etl", "owner": "alice"})  # alice resubmits
    with worker_state(zk_conf, "etl", "alice") as w:
        assert w.tx_get("etl-spout", "meta/1") == {"offset": 7}
        assert w.tx_get("etl-spout", "meta/2") is None


def test_states_of_before_namespaces_move_into_their_topologys(zk_conf, raw, cluster_state):
    """A cluster upgraded from per-root grants: a topology's states left on the root (its
    digest's) move into its namespace when its workers open them (make_tx_state), txids
    and all; another topology's are left alone; the root loses the old grants."""
    payload = zk_conf[cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD]
    p, z = cluster_state.paths, raw(payload)
    grant = zk_auth.topology_acl(payload, "wc")
    acls, _ = z.get_acls(p.transactional_root)
    z.set_acls(p.transactional_root, acls + [grant, zk_auth.topology_acl(payload, "other")])
    own = cluster_state.identity.acl
    for name, sid in (("wc", "wc-spout"), ("other", "other-spout")):  # as the old workers did
        acl = list(own) + [zk_auth.topology_acl(payload, name, perms=Permissions.ALL)]
        z.create(f"{p.transactional_root}/{sid}/currtx", b"41", acl=acl, makepath=True)
    cluster_state.set_storm("wc-1", {"name": "wc"})
    cluster_state.set_storm("other-1", {"name": "other"})
    with KazooClusterState(zk_conf) as restarted:  # the upgraded Nimbus
        assert restarted.identity.kind == "cluster"
    assert z.get_acls(p.transactional_root)[0] == list(own)  # no grant left on the root
    conf = worker_conf(zk_conf, "wc")
    st = make_tx_state("wc-spout", conf)
    try:
        assert st.get_data("currtx") == 41
        assert make_tx_state("other-spout", conf).get_data("currtx") is None  # not its own
    finally:
        st.close()
    with cluster_view(zk_conf, "wc") as c:
        assert c.tx_get("wc-spout", "currtx") == 41
    # The copy on the root stays (a topology may not delete there), readable by its owner only.
    assert z.get(f"{p.transactional_root}/wc-spout/currtx")[0] == b"41"
