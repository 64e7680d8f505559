"""Authenticated and authorized Nimbus (issue 11, 2-3): mutual TLS, Storm's
SimpleACLAuthorizer rules, the principal as owner, secrets redacted."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from squall.client.errors import LimitExceeded, NimbusUnavailable, PermissionDenied
from squall.client.nimbus_client import NimbusClient
from squall.client.topology import TopologyBuilder
from squall.client.topology_proto import to_proto
from squall.deploy.certs import CertificateAuthority
from squall.deploy.net import free_port
from squall.nimbus.nimbus import Nimbus
from squall.nimbus.servicer import serve
from squall.proto import nimbus_pb2 as pb
from topos import NumberSpout, RecordingBolt
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration


def topology():
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("record", RecordingBolt(), 1).shuffle_grouping("numbers")
    return to_proto(b.create_topology())


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(str(d / "ca"))
    certs = {name: ca.issue(name, groups, server=name == "nimbus") for name, groups in [
        ("nimbus", ()), ("supervisor", ()), ("alice", ("analysts",)), ("bob", ()),
        ("carol", ("ops",)), ("root", ()), ("mallory", ())]}
    certs["stranger"] = CertificateAuthority(str(d / "other-ca")).issue("alice")
    return certs


@pytest.fixture
def secure(zk_conf, tmp_path, pki):
    port = free_port()
    base = dict(zk_conf, **{"nimbus.grpc.port": port, "nimbus.seeds": ["127.0.0.1"]})
    conf = dict(base, **pki["nimbus"].conf(), **{
        "storm.local.dir": str(tmp_path), "nimbus.supervisor.users": ["supervisor"],
        "nimbus.admins": ["root"], "nimbus.users": ["alice", "bob", "carol", "root"]})
    n = Nimbus(conf).start()
    server = serve(n, "127.0.0.1", port)
    clients = []

    def client(who):
        c = NimbusClient(dict(base, **pki[who].conf()) if who != "anonymous" else base,
                         timeout=10)
        clients.append(c)
        return c
    try:
        assert n.wait_for_leadership(10)
        n.client = client
        yield n
    finally:
        for c in clients:
            c.close()
        server.stop(grace=None).wait(5)
        n.close(reason="test")


def test_without_a_certificate_of_the_cluster_ca_nothing_is_answered(secure):
    alice = secure.client("alice")
    alice.submit("wc", "", "{}", topology())
    for who in ("anonymous", "stranger"):
        with pytest.raises(NimbusUnavailable):
            secure.client(who).kill("wc", wait_secs=0)
        with pytest.raises(NimbusUnavailable):
            secure.client(who).list()
    assert [t.name for t in alice.list().topologies] == ["wc"]


def test_the_principal_not_the_request_is_the_owner(secure):
    secure.client("alice").submit("wc", "", "{}", topology(), owner="bob")
    assert secure.client("alice").topology_info(name="wc").owner == "alice"


def test_only_owner_topology_users_groups_and_admins_manage_a_topology(secure):
    alice = secure.client("alice")
    conf = {"topology.users": ["bob"], "topology.groups": ["ops"]}
    alice.submit("wc", "", json.dumps(conf), topology(), initial_status="INACTIVE")
    with pytest.raises(PermissionDenied, match="mallory may not .* not in nimbus.users"):
        secure.client("mallory").submit("m", "", "{}", topology())
    for who in ("alice", "bob", "carol", "root"):  # owner, topology.users, group, admin
        secure.client(who).activate("wc")
        secure.client(who).deactivate("wc")
    alice.submit("private", "", "{}", topology())
    with pytest.raises(PermissionDenied) as info:
        secure.client("bob").kill("private", wait_secs=0)
    assert "bob may not killTopology topology private" in str(info.value)
    assert "owned by alice" in str(info.value)
    tid = next(t.id for t in alice.list().topologies if t.name == "private")
    with pytest.raises(PermissionDenied, match="getTopologyConf"):
        secure.client("bob").topology_conf(tid)
    with pytest.raises(PermissionDenied, match="getUserTopology"):
        secure.client("carol").user_topology(tid)
    with pytest.raises(PermissionDenied, match="rebalance"):
        secure.client("carol").rebalance("private", wait_secs=0, num_workers=1)
    secure.client("root").kill("private", wait_secs=0)
    poll_for(lambda: "private" not in [t.name for t in alice.list().topologies], timeout=10,
             what="the admin's kill")


def test_only_supervisors_send_heartbeats_and_download_packages(secure):
    secure.client("alice").submit("wc", "", "{}", topology())
    tid = secure.client("alice").list().topologies[0].id
    hb = pb.SupervisorWorkerHeartbeats(supervisor_id="made-up")
    for who in ("mallory", "alice"):
        with pytest.raises(PermissionDenied, match="only supervisors and Nimbuses"):
            secure.client(who).send_heartbeats(hb)
        with pytest.raises(PermissionDenied, match="fileDownload"):
            secure.client(who).download(tid)
    secure.client("supervisor").send_heartbeats(pb.SupervisorWorkerHeartbeats(
        supervisor_id="sup-1"))
    assert secure.client("supervisor").download(tid) == b""  # submitted without a package


def test_secret_values_are_redacted_for_users_and_kept_for_supervisors(secure):
    conf = {"trident.redis.password": "hunter2", "my.api.token": "t0k",
            "squall.secret.keys": ["db.url"], "db.url": "postgres://u:pw@db",
            "topology.workers": 1}
    t = topology()
    t.bolts["record"].common.json_conf = json.dumps({"db.password": "pw", "batch": 5})
    secure.client("alice").submit("wc", "", json.dumps(conf), t)
    tid = secure.client("alice").list().topologies[0].id
    comp = json.loads(secure.client("alice").user_topology(tid).bolts["record"].common.json_conf)
    assert comp == {"db.password": "<redacted>", "batch": 5}
    comp = json.loads(
        secure.client("supervisor").user_topology(tid).bolts["record"].common.json_conf)
    assert comp["db.password"] == "pw"  # the worker needs it
    shown = json.loads(secure.client("alice").topology_conf(tid))
    assert "hunter2" not in json.dumps(shown) and "t0k" not in json.dumps(shown)
    assert shown["db.url"] == "<redacted>" and shown["topology.workers"] == 1
    with pytest.raises(PermissionDenied, match="getTopologyConfSecrets"):
        secure.client("alice").topology_conf(tid, include_secrets=True)
    full = json.loads(secure.client("supervisor").topology_conf(tid, include_secrets=True))
    assert full["trident.redis.password"] == "hunter2" and full["db.url"].startswith("postgres")


def test_limits_are_counted_per_principal(secure):
    secure.conf["nimbus.topologies.per.user.max"] = 1  # read at each submit
    secure.client("alice").submit("a1", "", "{}", topology())
    with pytest.raises(LimitExceeded, match="alice owns 1"):
        secure.client("alice").submit("a2", "", "{}", topology(), owner="someone-else")
    secure.client("bob").submit("b1", "", "{}", topology())


def test_nimbus_refuses_a_public_address_without_tls(zk_conf, tmp_path):
    n = Nimbus(dict(zk_conf, **{"storm.local.dir": str(tmp_path)}))
    try:
        with pytest.raises(OSError, match="without authentication.*--insecure"):
            serve(n, "0.0.0.0", free_port())
        server = serve(n, "0.0.0.0", free_port(), insecure=True)
        server.stop(grace=None).wait(5)
    finally:
        n.close(reason="test")


def test_a_port_in_use_is_an_error(zk_conf, tmp_path):
    port = free_port()
    n = Nimbus(dict(zk_conf, **{"storm.local.dir": str(tmp_path)}))
    first = serve(n, "127.0.0.1", port)
    try:
        with pytest.raises(OSError, match="in use"):
            serve(n, "127.0.0.1", port)
    finally:
        first.stop(grace=None).wait(5)
        n.close(reason="test")


def test_squall_nimbus_on_a_public_address_without_tls_is_one_line(zk_conf, tmp_path):
    args = ["-c", f"storm.zookeeper.port={zk_conf['storm.zookeeper.port']}",
            "-c", f"storm.zookeeper.root={zk_conf['storm.zookeeper.root']}",
            "-c", f"storm.local.dir={tmp_path}", "-c", f"nimbus.grpc.port={free_port()}"]
    if zk_conf.get("storm.zookeeper.auth.payload"):
        args += ["-c", f"storm.zookeeper.auth.payload={zk_conf['storm.zookeeper.auth.payload']}"]
    r = subprocess.run([sys.executable, "-m", "squall.cli", "nimbus", *args],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "Error: Nimbus will not listen on 0.0.0.0" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_follower_copies_topologies_from_the_leader_as_a_daemon(zk_conf, tmp_path, pki):
    """High availability under TLS: the follower authenticates as a Nimbus
    (nimbus.daemon.users) to download packages and confs with their secrets."""
    servers, nimbuses = [], []
    try:
        for name in ("a", "b"):
            port = free_port()
            conf = dict(zk_conf, **pki["nimbus"].conf(), **{
                "nimbus.grpc.port": port, "storm.local.dir": str(tmp_path / name),
                "nimbus.daemon.users": ["nimbus"], "nimbus.code.sync.freq.secs": 1})
            n = Nimbus(conf).start()
            nimbuses.append(n)
            servers.append(serve(n, "127.0.0.1", port))
            if name == "a":
                assert n.wait_for_leadership(10)
        a, b = nimbuses
        with NimbusClient(dict(zk_conf, **pki["alice"].conf()), timeout=10,
                          address=a.address) as alice:
            tid = alice.submit("ha", alice.upload(b"PK-package"),
                               '{"my.secret": "s3"}', topology())
        copy = tmp_path / "b" / "nimbus" / "stormdist" / tid
        poll_for(lambda: (copy / "package").exists() and (copy / "conf.json").exists(),
                 timeout=15, what="the follower's copy")
        assert (copy / "package").read_bytes() == b"PK-package"
        conf = json.loads((copy / "conf.json").read_text())
        assert conf["my.secret"] == "s3" and conf["topology.curve.secret.key"]
        assert (copy / "conf.json").stat().st_mode & 0o777 == 0o600
    finally:
        for s in servers:
            s.stop(grace=None).wait(5)
        for n in nimbuses:
            n.close(reason="test")
