"""Leader discovery with two in-process Nimbuses (A leads, B follows) on the session's ZooKeeper.

Both register as 127.0.0.1:<own nimbus.grpc.port>, each with its own storm.local.dir. Covered:
a client pointed at the follower is redirected to the leader (trailing metadata
``squall-leader``) for uploads, submits and supervisor heartbeats; an unreachable seed is
skipped; with every seed unreachable the error names the address tried; the follower copies
each live topology's files from the leader (and drops removed ones); when the leader closes,
the follower takes over, serves the package, lists and kills the topology, and a topology
whose files are missing does not cost it its leadership.
"""

from __future__ import annotations

import json
import time

import grpc
import pytest

from squall.client.nimbus_client import NimbusClient
from squall.client.errors import LEADER_METADATA, NimbusUnavailable, NotALeader
from squall.client.topology import TopologyBuilder
from squall.client.topology_proto import to_proto
from squall.client.zk_cluster_state import KazooClusterState
from squall.deploy.net import free_port
from squall.nimbus.nimbus import Nimbus
from squall.nimbus.servicer import serve
from squall.proto import nimbus_pb2 as pb
from squall.proto import nimbus_pb2_grpc as pb_grpc
from squall.supervisor.fetch import grpc_heartbeat_sender
from topos import NumberSpout, RecordingBolt
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

#: Bound on every wait for an election outcome, seconds.
ELECTION_SECS = 10


def topology():
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("record", RecordingBolt(), 1).shuffle_grouping("numbers")
    return to_proto(b.create_topology())


def leader_seen_by(nimbus: Nimbus) -> str | None:
    """The leader address a refusal of ``nimbus`` names (None while it leads or knows none)."""
    try:
        nimbus.require_leader()
    except NotALeader as e:
        return e.leader
    return None


def dead_address() -> str:
    """A loopback address nothing listens on."""
    return f"127.0.0.1:{free_port()}"


@pytest.fixture
def nimbuses(zk_conf, cluster_state, tmp_path):
    """``start(name)`` starts a Nimbus and its gRPC server on a port and local dir of its own;
    ``stop(nimbus)`` stops both. One fake supervisor with 2 slots is registered. Everything
    still running is stopped at teardown."""
    cluster_state.register_supervisor("sup-1", {"host": "127.0.0.1", "slots": [6700, 6701],
                                                "used_slots": [], "uptime_secs": 1.0,
                                                "time_secs": 0.0})
    running: dict[str, tuple[Nimbus, grpc.Server]] = {}

    class Nimbuses:
        state = cluster_state

        def conf(self, port: int, name: str) -> dict:
            return dict(zk_conf, **{"nimbus.grpc.port": port,
                                    "storm.local.hostname": "127.0.0.1",
                                    "storm.local.dir": str(tmp_path / name),
                                    "nimbus.monitor.freq.secs": 0.5})

        def start(self, name: str) -> Nimbus:
            nimbus = Nimbus(self.conf(free_port(), name)).start()
            try:
                server = serve(nimbus, "127.0.0.1", nimbus.port)
            except BaseException:
                nimbus.close(reason="test: serve failed")
                raise
            running[nimbus.address] = (nimbus, server)
            return nimbus

        def stop(self, nimbus: Nimbus) -> None:
            _, server = running.pop(nimbus.address)
            server.stop(grace=None).wait(5)
            nimbus.close(reason="test")

    n = Nimbuses()
    try:
        yield n
    finally:
        for nimbus, server in list(running.values()):
            server.stop(grace=None).wait(5)
            nimbus.close(reason="test teardown")


@pytest.fixture
def pair(nimbuses):
    """(A, B): A leads (started first), B follows and names A as the leader."""
    a = nimbuses.start("a")
    assert a.wait_for_leadership(ELECTION_SECS)
    b = nimbuses.start("b")
    poll_for(lambda: leader_seen_by(b) == a.address, timeout=ELECTION_SECS,
             what=f"follower {b.address} to name leader {a.address}")
    assert a.is_leader and not b.is_leader
    return a, b


def test_client_at_follower_is_redirected_to_leader(pair, nimbuses, tmp_path):
    a, b = pair
    with NimbusClient(b.conf, timeout=5, address=b.address) as client:
        assert client.leader().port == a.port  # any Nimbus answers views, naming the leader
        assert client.address == b.address
        location = client.upload(b"PK-leader-package")
        assert client.address == a.address  # BeginFileUpload's refusal named A
        tid = client.submit("via-follower", location, json.dumps({}), topology())
        assert client.address == a.address
    assert tid in nimbuses.state.storm_ids()
    assert nimbuses.state.get_storm(tid)["name"] == "via-follower"
    assert nimbuses.state.get_assignment(tid) is not None
    # The leader stored the package; the follower copies it from there.
    assert (tmp_path / "a" / "nimbus" / "stormdist" / tid / "package").read_bytes() == \
        b"PK-leader-package"
    copy = tmp_path / "b" / "nimbus" / "stormdist" / tid / "package"
    poll_for(copy.exists, timeout=10, what="the follower's copy")
    assert copy.read_bytes() == b"PK-leader-package"


def test_follower_refuses_writes_naming_leader(pair):
    a, b = pair
    with pytest.raises(NotALeader, match=f"not the leader \\(the leader is {a.address}\\)") as info:
        b.record_heartbeats("sup-1", [])
    assert info.value.leader == a.address
    assert "sup-1" not in b.liveness.supervisor_reports

    with grpc.insecure_channel(b.address) as channel:
        stub = pb_grpc.NimbusStub(channel)
        calls = [
            lambda: stub.BeginFileUpload(pb.BeginUploadRequest(file_name="p", total_size=3),
                                         timeout=5),
            lambda: stub.UploadPackage(iter([pb.Chunk(data=b"abc", offset=0)]), timeout=5),
        ]
        for call in calls:
            with pytest.raises(grpc.RpcError) as err:
                call()
            assert err.value.code() == grpc.StatusCode.UNAVAILABLE
            assert dict(err.value.trailing_metadata())[LEADER_METADATA] == a.address
            assert a.address in err.value.details()
    # Nothing was left in the follower's upload inbox.
    assert b.package_store.topology_ids() == []


def test_supervisor_heartbeats_reach_leader(pair):
    a, b = pair
    with NimbusClient(a.conf, timeout=5, address=a.address) as client:
        tid = client.submit("beats", client.upload(b"PK"), "{}", topology())
    # A supervisor whose nimbus.seeds/port point at the follower.
    send = grpc_heartbeat_sender(dict(b.conf, **{"nimbus.seeds": ["127.0.0.1"]}), timeout=5)
    try:
        send(pb.SupervisorWorkerHeartbeats(supervisor_id="sup-1", worker_heartbeats=[
            pb.WorkerHeartbeat(topology_id=tid, port=6700, time_secs=12.5),
            # A topology that is gone (its late heartbeats): not kept.
            pb.WorkerHeartbeat(topology_id="gone-1-1", port=6701, time_secs=12.5)]))
    finally:
        send.close()
    assert "sup-1" in a.liveness.supervisor_reports
    assert a.liveness.heartbeats[("sup-1", tid, 6700)][1].time_secs == 12.5
    assert ("sup-1", "gone-1-1", 6701) not in a.liveness.heartbeats
    assert "sup-1" not in b.liveness.supervisor_reports


def test_unreachable_seed_is_skipped(pair):
    a, b = pair
    dead = dead_address()
    with NimbusClient(a.conf, timeout=5, address=dead) as client:
        client.seeds = [dead, b.address]
        # dead -> next seed (B, unreachable) -> the leader B names (A, a refusal).
        location = client.upload(b"PK")
        assert client.address == a.address
        assert client.submit("after-dead-seed", location, "{}", topology())
    with NimbusClient(a.conf, timeout=5, address=dead) as client:
        client.seeds = [dead, b.address]
        assert [n.port for n in client.list().nimbuses if n.is_leader] == [a.port]
        assert client.address == b.address  # a view: the follower answers it


def test_all_seeds_unreachable_names_address():
    first, last = dead_address(), dead_address()
    with NimbusClient({}, timeout=2, address=first) as client:
        client.seeds = [first, last]
        with pytest.raises(NimbusUnavailable, match=f"cannot reach Nimbus at {last}") as info:
            client.list()
    assert info.value.address == last


def _fail_over(pair, nimbuses):
    """Submit through A, wait for B to copy it, stop A; return (A's address, B now leading,
    the topology id)."""
    a, b = pair
    with NimbusClient(a.conf, timeout=5, address=a.address) as client:
        tid = client.submit("survivor", client.upload(b"PK-a"), "{}", topology())
    poll_for(lambda: tid in b.package_store.topology_ids(), timeout=10,
             what="the follower copying the topology's files")
    address = a.address
    nimbuses.stop(a)
    assert b.wait_for_leadership(ELECTION_SECS), f"{b.address} did not take over"
    assert b.is_leader
    return address, b, tid


def test_failover_follower_lists_and_kills(pair, nimbuses):
    dead_a, b, tid = _fail_over(pair, nimbuses)
    state = nimbuses.state
    with NimbusClient(b.conf, timeout=5, address=dead_a) as client:
        client.seeds = [dead_a, b.address]
        summary = client.list()
        assert client.address == b.address
        assert [(t.id, t.name, t.status) for t in summary.topologies] == \
            [(tid, "survivor", "ACTIVE")]
        assert [(n.port, n.is_leader) for n in summary.nimbuses] == [(b.port, True)]
        client.kill("survivor", wait_secs=0)
    poll_for(lambda: state.get_storm(tid) is None, timeout=5, what="removal by the new leader")
    assert state.get_assignment(tid) is None


def test_failover_kill_without_wait_uses_message_timeout(pair, nimbuses):
    dead_a, b, tid = _fail_over(pair, nimbuses)
    with NimbusClient(b.conf, timeout=5, address=b.address) as client:
        client.kill("survivor")
    assert nimbuses.state.get_storm(tid)["status"] == "killed"


def test_failover_leader_keeps_leading_when_a_topology_cannot_be_rescheduled(pair, nimbuses,
                                                                            zk_conf):
    a, b = pair
    gone = KazooClusterState(zk_conf)  # a supervisor whose session ends after the failover
    try:
        gone.register_supervisor("sup-gone", {"host": "127.0.0.2", "slots": [6800],
                                              "used_slots": []})
        with NimbusClient(a.conf, timeout=5, address=a.address) as client:
            tid = client.submit("spread", "", json.dumps({"topology.workers": 2}), topology())
        assert "sup-gone" in nimbuses.state.get_assignment(tid)[0]["slots"].values()
        poll_for(lambda: tid in b.package_store.topology_ids(), timeout=10,
                 what="the follower copying the topology's files")
        nimbuses.stop(a)
        assert b.wait_for_leadership(ELECTION_SECS)
        b.package_store.remove(tid)  # files lost on this host: the monitor cannot reschedule it
    finally:
        gone.close()
    # Four monitor rounds (nimbus.monitor.freq.secs 0.5) each see the dead slot.
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        assert b.is_leader, f"{b.address} dropped leadership after a slot of {tid} died"
        time.sleep(0.02)


def test_follower_copies_topology_files_and_serves_them_after_failover(pair, nimbuses):
    a, b = pair
    with NimbusClient(a.conf, timeout=5, address=a.address) as client:
        gone = client.submit("short-lived", client.upload(b"PK-gone"), "{}", topology())
    poll_for(lambda: gone in b.package_store.topology_ids(), timeout=10,
             what="the follower copying the first topology")
    with NimbusClient(a.conf, timeout=5, address=a.address) as client:
        client.kill("short-lived", wait_secs=0)
    poll_for(lambda: gone not in b.package_store.topology_ids(), timeout=10,
             what="the follower dropping the removed topology's files")
    dead_a, b, tid = _fail_over(pair, nimbuses)
    with NimbusClient(b.conf, timeout=5, address=b.address) as client:
        assert client.download(tid) == b"PK-a"
        assert json.loads(client.topology_conf(tid))["topology.name"] == "survivor"
        assert client.user_topology(tid) == topology()
