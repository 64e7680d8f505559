"""Nimbus's bounds (issue 11, 6): names, topologies, workers, executors, and a submit whose
cost does not grow with the number of live topologies."""

from __future__ import annotations

import threading

import pytest

from squall.client.errors import InvalidRequest, LimitExceeded
from squall.client.nimbus_client import NimbusClient
from squall.client.topology import TopologyBuilder
from squall.client.topology_proto import to_proto
from squall.deploy.net import free_port
from squall.nimbus.nimbus import Nimbus
from squall.nimbus.servicer import serve
from topos import NumberSpout, RecordingBolt

pytestmark = pytest.mark.integration


def topology(parallelism=1):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), parallelism)
    b.set_bolt("record", RecordingBolt(), 1).shuffle_grouping("numbers")
    return to_proto(b.create_topology())


@pytest.fixture
def nimbus(zk_conf, tmp_path):
    conf = dict(zk_conf, **{"nimbus.grpc.port": free_port(), "storm.local.dir": str(tmp_path),
                            "nimbus.topologies.max": 6, "nimbus.topologies.per.user.max": 4,
                            "nimbus.slots.perTopology": 8, "nimbus.executors.perTopology": 64})
    n = Nimbus(conf).start()
    server = None
    try:
        assert n.wait_for_leadership(10)
        server = serve(n, "127.0.0.1", conf["nimbus.grpc.port"])
        with NimbusClient(conf, timeout=10) as client:
            n.client = client
            yield n
    finally:
        if server is not None:
            server.stop(grace=None).wait(5)
        n.close(reason="test")


@pytest.mark.parametrize("name, why", [
    ("x" * 10_000, "longer than 128 bytes"), ("wc\nrm", "control"), ("a.b", "'.'"),
    ("a:b", "':'"), ("a\\b", "'\\\\\\\\'"), ("a/b", "'/'"), ("", "non-empty"),
])
def test_bad_names_are_invalid_argument(nimbus, name, why):
    with pytest.raises(InvalidRequest, match=why):
        nimbus.client.submit(name, "", "{}", topology())
    assert nimbus.cluster_state.storm_ids() == []


def test_workers_and_executors_per_topology_are_bounded(nimbus):
    with pytest.raises(LimitExceeded, match="100000 workers.*nimbus.slots.perTopology"):
        nimbus.client.submit("many-workers", "", '{"topology.workers": 100000}', topology())
    # 100,000 spout tasks, one bolt, the acker and the Topology Master
    with pytest.raises(LimitExceeded, match="100003 tasks.*nimbus.executors.perTopology"):
        nimbus.client.submit("many-tasks", "", "{}", topology(parallelism=100_000))
    # Ackers are tasks too (a billion of them used to be built before any check).
    with pytest.raises(LimitExceeded, match="nimbus.executors.perTopology"):
        nimbus.client.submit("many-ackers", "", '{"topology.acker.executors": 1000000000}',
                             topology())
    # The topology's own conf cannot lift Nimbus's bound.
    with pytest.raises(LimitExceeded):
        nimbus.client.submit("lift", "", '{"topology.workers": 9, "nimbus.slots.perTopology": '
                             '1000}', topology())
    assert nimbus.cluster_state.storm_ids() == []
    # Nor can a rebalance.
    nimbus.client.submit("small", "", '{"topology.workers": 1}', topology())
    with pytest.raises(LimitExceeded, match="rebalance small to 9 workers.*perTopology"):
        nimbus.client.rebalance("small", wait_secs=0, num_workers=9)


def test_topologies_are_bounded_per_user_and_per_cluster(nimbus):
    for i in range(4):
        nimbus.client.submit(f"alice-{i}", "", "{}", topology(), owner="alice")
    with pytest.raises(LimitExceeded, match="alice owns 4 live topologies"):
        nimbus.client.submit("alice-4", "", "{}", topology(), owner="alice")
    for i in range(2):
        nimbus.client.submit(f"bob-{i}", "", "{}", topology(), owner="bob")
    with pytest.raises(LimitExceeded, match="runs 6 topologies.*nimbus.topologies.max"):
        nimbus.client.submit("carol-0", "", "{}", topology(), owner="carol")
    nimbus.client.kill("alice-0", wait_secs=0)
    from zk_fixtures import poll_for
    poll_for(lambda: len(nimbus.cluster_state.storm_ids()) == 5, timeout=10,
             what="alice-0 removed")
    nimbus.client.submit("carol-0", "", "{}", topology(), owner="carol")


class Counting:
    """Counts the cluster-state calls the creating thread makes through it (not the
    Nimbus loop's monitor rounds)."""

    def __init__(self, inner):
        self.inner, self.calls, self.thread = inner, 0, threading.get_ident()

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*a, **kw):
            if threading.get_ident() == self.thread:
                self.calls += 1
            return attr(*a, **kw)
        return counted


def test_a_submit_costs_the_same_with_one_or_many_live_topologies(zk_conf, tmp_path):
    """The cost is counted in ZooKeeper calls, not timed: it used to grow with every live
    topology (each submit read them all to find the name and the used slots)."""
    conf = dict(zk_conf, **{"storm.local.dir": str(tmp_path), "nimbus.topologies.max": 100,
                            "nimbus.topologies.per.user.max": 100})
    n = Nimbus(conf).start()
    try:
        assert n.wait_for_leadership(10)
        counting = n.cluster_state = Counting(n.cluster_state)

        def cost(name):
            before = counting.calls
            n.submit(name, "", "{}", topology(), owner="u")
            return counting.calls - before

        first = cost("t-0")
        for i in range(1, 40):
            n.submit(f"t-{i}", "", "{}", topology(), owner="u")
        assert cost("t-40") == first
    finally:
        n.cluster_state = n.cluster_state.inner if isinstance(n.cluster_state, Counting) \
            else n.cluster_state
        n.close(reason="test")


def test_silent_upload_streams_are_cancelled_and_do_not_starve_nimbus(nimbus, monkeypatch):
    """Each UploadPackage stream holds a server thread; of 20 streams that stop sending (more
    than the 16 threads) the per-user bound refuses some at once and the idle limit cancels
    the rest, dropping their uploads, and Nimbus answers again."""
    import threading

    import grpc

    from squall.nimbus import servicer
    from squall.proto import nimbus_pb2 as pb
    from squall.proto import nimbus_pb2_grpc as pb_grpc
    monkeypatch.setattr(servicer, "STREAM_IDLE_SECS", 1.0)
    release = threading.Event()
    channel = grpc.insecure_channel(nimbus.client.address)
    stub = pb_grpc.NimbusStub(channel)

    def silent():
        yield pb.Chunk(data=b"x", offset=0)
        release.wait(30)  # then nothing: a client that stalls

    calls = [stub.UploadPackage.future(silent(), timeout=30) for _ in range(20)]
    try:
        errors = [c.exception(timeout=20) for c in calls]
        refused = [e for e in errors if e is not None]
        assert len(refused) == 20, errors
        # Cancelled by Nimbus after 1 s of silence, or refused at once (8 open uploads per
        # user, nimbus.inbox.max.uploads.per.user).
        idle = [e for e in refused if e.code() == grpc.StatusCode.CANCELLED]
        busy = [e for e in refused if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert len(idle) + len(busy) == 20 and idle, [e.details() for e in refused]
        from zk_fixtures import poll_for
        poll_for(lambda: nimbus.package_store._uploads == {}, timeout=5,
                 what="the cancelled streams' partial uploads dropped")
        assert nimbus.client.list() is not None      # and Nimbus answers
    finally:
        release.set()
        channel.close()


def test_trickling_upload_streams_are_capped_and_cancelled(nimbus, monkeypatch):
    """A byte now and then keeps a stream under any silence limit: each stream must bring
    STREAM_MIN_BYTES per STREAM_IDLE_SECS, a user holds at most 2 at once and all users a
    quarter of the threads, so other calls (supervisors' heartbeats) always find one."""
    import threading
    import time

    import grpc

    from squall.nimbus import servicer
    from squall.proto import nimbus_pb2 as pb
    from squall.proto import nimbus_pb2_grpc as pb_grpc
    monkeypatch.setattr(servicer, "STREAM_IDLE_SECS", 1.0)
    stop = threading.Event()
    channel = grpc.insecure_channel(nimbus.client.address)
    stub = pb_grpc.NimbusStub(channel)

    def trickle():
        offset = 0
        while not stop.is_set():
            yield pb.Chunk(data=b"x", offset=offset)
            offset += 1
            stop.wait(0.2)  # 5 bytes a second: never silent for 1 s

    t0 = time.monotonic()
    calls = [stub.UploadPackage.future(trickle(), timeout=30) for _ in range(8)]
    try:
        assert nimbus.client.list() is not None  # answered while they run
        errors = [c.exception(timeout=20) for c in calls]
        codes = sorted(e.code().name for e in errors)
        assert codes == ["CANCELLED"] * 2 + ["RESOURCE_EXHAUSTED"] * 6, codes
        assert time.monotonic() - t0 < 10
        busy = next(e for e in errors if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED)
        assert "at most 2 per user" in busy.details(), busy.details()
        from zk_fixtures import poll_for
        poll_for(lambda: nimbus.package_store._uploads == {}, timeout=5,
                 what="the cancelled streams' partial uploads dropped")
    finally:
        stop.set()
        channel.close()


def test_uploads_have_a_byte_quota_per_user_an_end_and_can_be_abandoned(nimbus):
    """One user filled the whole inbox (8 x 256 MiB); finishing an upload again kept it from
    ever expiring; the limit's error said to abandon uploads with no call to do it."""
    from squall.client.errors import LimitExceeded
    store = nimbus.package_store
    store.inbox_max_bytes_per_user = 1000
    a = store.begin("a.zip", 600, "alice")
    store.append(a, 0, b"x" * 600)
    with pytest.raises(LimitExceeded, match="alice holds 600 bytes.*per user.*AbandonFileUpload"):
        store.begin("b.zip", 600, "alice")
    b = store.begin("b.zip", 0, "alice")
    with pytest.raises(LimitExceeded, match="nimbus.inbox.max.bytes.per.user"):
        store.append(b, 0, b"y" * 500)
    store.begin("c.zip", 600, "bob")  # another user's room is their own
    # Finished: expires expiration.secs after its first finish, whatever is called since.
    store.finish(a, "alice")
    finished_at = store._uploads[a].finished_at
    store.finish(a, "alice")
    assert store._uploads[a].finished_at == finished_at
    assert a in store.expire(now=finished_at + store.expiration_secs + 1)
    # Abandoned over the API: gone at once, room back.
    loc = nimbus.client.upload(b"z" * 900)
    nimbus.client.abandon_upload(loc)
    assert loc not in store._uploads
    with pytest.raises(Exception, match="no upload at location"):
        nimbus.client.abandon_upload(loc)


@pytest.mark.parametrize("conf_json, why", [
    ('{"topology.message.timeout.secs": NaN}', "topology.message.timeout.secs.*finite"),
    ('{"topology.message.timeout.secs": Infinity}', "finite number"),
    ('{"my.own.setting": [1, -Infinity]}', "my.own.setting.*finite"),
    ('{"topology.message.timeout.secs": 1e308}', "at most 315,360,000"),
    ('{"topology.spout.wait.max.millis": 1e300}', "at most 315,360,000,000"),
    ('{"topology.users": [{}]}', "topology.users.*list of up to 1000 names"),
    ('{"topology.groups": ["' + "g" * 300 + '"]}', "topology.groups"),
    ('{"deep": ' + "[" * 40 + "]" * 40 + "}", "deep.*nested deeper than 32"),
    ('{"deep": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested deeper than 32"),
])
def test_confs_that_would_break_later_calls_are_refused_at_submit(nimbus, conf_json, why):
    """Each of these used to be stored, then break kill, info or the workers (a NaN timeout
    made `squall kill` fail with the topology left KILLED and running; an ACL of `[{}]` made
    every call on it INTERNAL, even an admin's)."""
    with pytest.raises(InvalidRequest, match=why):
        nimbus.client.submit("bad-conf", "", conf_json, topology())
    assert nimbus.cluster_state.storm_ids() == []



def test_a_flood_of_idle_connections_is_bounded_and_shed(zk_conf, tmp_path, monkeypatch):
    """20,000 connections that never spoke held Nimbus at its descriptor limit (+900 MiB):
    a port now takes GRPC_MAX_CONNECTIONS at once and closes one that has not finished its
    handshake within GRPC_HANDSHAKE_MS, so a real client gets through once they are shed."""
    import socket

    from squall.client import tls
    from zk_fixtures import poll_for
    monkeypatch.setattr(tls, "GRPC_MAX_CONNECTIONS", 50)
    monkeypatch.setattr(tls, "GRPC_HANDSHAKE_MS", 1000)
    conf = dict(zk_conf, **{"nimbus.grpc.port": free_port(), "storm.local.dir": str(tmp_path)})
    n = Nimbus(conf).start()
    server = None
    flood = []
    try:
        assert n.wait_for_leadership(10)
        server = serve(n, "127.0.0.1", conf["nimbus.grpc.port"])
        for _ in range(300):
            try:
                flood.append(socket.create_connection(("127.0.0.1", conf["nimbus.grpc.port"]),
                                                      timeout=5))
            except OSError:
                break  # refused at once: also bounded

        def shed(s):
            s.settimeout(0.05)
            try:
                return s.recv(4096) == b"" or None
            except (ConnectionResetError, BrokenPipeError):
                return True
            except socket.timeout:
                return None
        # Every silent connection is closed by Nimbus within the handshake deadline.
        poll_for(lambda: all(shed(s) for s in flood), timeout=10,
                 what="the silent connections closed by Nimbus")
        with NimbusClient(conf, timeout=5) as client:
            assert client.list() is not None
    finally:
        for s in flood:
            s.close()
        if server is not None:
            server.stop(grace=None).wait(5)
        n.close(reason="test")


@pytest.mark.parametrize("method", ["SubmitTopology", "KillTopology", "GetTopologyInfo",
                                    "SendSupervisorWorkerHeartbeats", "SetLogConfig"])
def test_a_request_that_is_not_protobuf_is_invalid_argument(nimbus, method):
    """gRPC answers INTERNAL ("Exception deserializing request") for bytes that do not
    decode; a client's garbage is its mistake, said as such."""
    import grpc
    with grpc.insecure_channel(nimbus.client.address) as channel:
        call = channel.unary_unary(f"/squall.Nimbus/{method}")  # raw bytes both ways
        with pytest.raises(grpc.RpcError) as info:
            call(b"\xff\xff\xff\xff garbage", timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    assert f"{method}: the request (" in info.value.details()
    assert "not a valid message" in info.value.details()
    assert nimbus.client.list() is not None
