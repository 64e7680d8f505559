"""zk_auth: the identities and ACLs of a locked ZooKeeper, and what workers inherit."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from kazoo.security import ACL, Id, Permissions

from squall.client import config as cfg
from squall.client import zk_auth
from squall.client.errors import ConfigError

CLUSTER = "squall:s3cret:with-colon"  # a password may hold ':' (ZooKeeper splits at the first)


def sha1_id(user: str, password: str) -> str:
    digest = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return user + ":" + base64.b64encode(digest).decode()


def test_the_topology_payload_is_an_hmac_of_owner_and_name_under_the_cluster_password():
    p = zk_auth.topology_payload(CLUSTER, "wc", "alice")
    mac = hmac.new(b"s3cret:with-colon", b"alice\0wc", hashlib.sha256).hexdigest()
    assert p == f"topology-wc:{mac}"
    assert zk_auth.topology_payload(CLUSTER, "wc", "alice") == p  # her resubmission reads it
    assert zk_auth.topology_payload(CLUSTER, "wc", "bob") != p  # bob's "wc" does not
    assert zk_auth.topology_payload(CLUSTER, "wc2", "alice") != p
    assert zk_auth.topology_payload("squall:other", "wc") != p
    assert "s3cret" not in p


def test_a_name_is_quoted_into_an_ascii_digest_user():
    user, _ = zk_auth.split_payload(zk_auth.topology_payload(CLUSTER, "wörter count%"))
    assert user == "topology-w%C3%B6rter%20count%25"


def test_the_digest_id_is_zookeepers():
    assert zk_auth.digest_id(CLUSTER) == sha1_id("squall", "s3cret:with-colon")


@pytest.mark.parametrize("bad", ["squall", ":pw", "squall:", "", 42])
def test_a_payload_needs_a_user_and_a_password(bad):
    with pytest.raises(ConfigError, match="storm.zookeeper.auth.payload.*user:password"):
        zk_auth.identity({cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD: bad})


def test_no_payload_is_open():
    ident = zk_auth.identity({})
    assert (ident.kind, ident.auth_data, ident.acl) == ("open", (), ())


def test_the_cluster_identity_locks_to_its_digest():
    ident = zk_auth.identity({cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD: CLUSTER,
                              cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD: "topology-x:y"})
    assert ident.kind == "cluster"  # the cluster's payload wins
    assert ident.auth_data == (("digest", CLUSTER),)
    assert ident.acl == (ACL(Permissions.ALL, Id("digest", zk_auth.digest_id(CLUSTER))),)


def test_a_topology_identity_shares_its_nodes_with_the_cluster_only():
    conf = cfg.worker_inherited({cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD: CLUSTER}, "wc")
    ident = zk_auth.identity(conf)
    topo = zk_auth.topology_payload(CLUSTER, "wc")
    assert ident.kind == "topology" and ident.auth_data == (("digest", topo),)
    assert set(ident.acl) == {ACL(Permissions.ALL, Id("digest", zk_auth.digest_id(topo))),
                              ACL(Permissions.ALL, Id("digest", zk_auth.digest_id(CLUSTER)))}


def test_a_topology_identity_needs_the_super_acl():
    with pytest.raises(ConfigError, match="storm.zookeeper.superACL"):
        zk_auth.identity({cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD: "topology-wc:pw"})


@pytest.mark.parametrize("key,payload", [
    (cfg.STORM_ZOOKEEPER_AUTH_SCHEME, cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD),
    (cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_SCHEME, cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD)])
def test_only_the_digest_scheme_is_supported(key, payload):
    conf = {payload: "u:p", key: "sasl", zk_auth.SUPER_ACL: "digest:squall:h"}
    with pytest.raises(ConfigError, match=f"{key}.*only digest is supported, got 'sasl'"):
        zk_auth.identity(conf)
    zk_auth.identity({key: "sasl"})  # no payload: the scheme is not used


def test_the_grant_on_the_transactional_root_is_create_only():
    topo = zk_auth.topology_payload(CLUSTER, "wc")
    assert zk_auth.topology_acl(CLUSTER, "wc") == \
        ACL(Permissions.CREATE, Id("digest", zk_auth.digest_id(topo)))


def test_workers_never_inherit_the_cluster_password():
    daemon = {cfg.STORM_ZOOKEEPER_SERVERS: ["zk1"], cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD: CLUSTER,
              cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD: "topology-all:shared",
              cfg.NIMBUS_SEEDS: ["n1"], cfg.TRIDENT_REDIS_HOST: "r1"}
    conf = cfg.worker_inherited(daemon, "wc")
    assert conf == {
        cfg.STORM_ZOOKEEPER_SERVERS: ["zk1"], cfg.TRIDENT_REDIS_HOST: "r1",
        cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_SCHEME: "digest",
        cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD: zk_auth.topology_payload(CLUSTER, "wc"),
        zk_auth.SUPER_ACL: "digest:" + zk_auth.digest_id(CLUSTER)}
    assert "s3cret" not in repr(conf)
    # Without a topology name there is no identity to give: none at all, not the cluster's.
    assert cfg.worker_inherited(daemon) == {
        cfg.STORM_ZOOKEEPER_SERVERS: ["zk1"], cfg.TRIDENT_REDIS_HOST: "r1",
        cfg.STORM_ZOOKEEPER_TOPOLOGY_AUTH_PAYLOAD: "topology-all:shared"}


def test_an_open_cluster_passes_its_keys_on_unchanged():
    daemon = {cfg.STORM_ZOOKEEPER_SERVERS: ["zk1"], cfg.TRANSACTIONAL_ZOOKEEPER_ROOT: "/tx"}
    assert cfg.worker_inherited(daemon, "wc") == daemon
