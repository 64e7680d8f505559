"""Bad input to Nimbus and to workers (issue 11, 8): each kind gets a clear refusal, no code
runs, and a topology running beside it keeps every message.

One secured local cluster (LocalCluster: private ZooKeeper with digest ACLs, Nimbus with
mutual TLS, a supervisor, CurveZMQ between workers). A reliable topology runs throughout;
the test throws every kind of bad request at Nimbus (as an ordinary user) and every kind of
bad frame at one of its workers (as a peer holding the topology's key, the only one a worker
admits, and as strangers), then requires every message acked, none failed, no worker
restarted, and the bad frames counted.
"""

from __future__ import annotations

import glob
import json
import os
import pickle

import msgpack
import pytest
import zmq

from planted import Planted
from squall.client.errors import (IllegalState, InvalidRequest, LimitExceeded,
                                  PermissionDenied, SquallError, TopologyNotFound)
from squall.client.nimbus_client import NimbusClient
from squall.client.topology import TopologyBuilder
from squall.client.topology_proto import to_proto
from squall.deploy.certs import CertificateAuthority
from squall.deploy.local import LocalCluster
from squall.proto import nimbus_pb2 as pb
from topos import PacedSpout, RecordingBolt, events_of
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
N = 1500


def steady_topology():
    b = TopologyBuilder()
    b.set_spout("numbers", PacedSpout(), 2)
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("numbers")
    return b.create_topology()


def small_proto():
    return to_proto(steady_topology())


def worker_pids(lc):
    pids = {}
    for path in glob.glob(os.path.join(lc.supervisor.local_dir, "workers", "*",
                                       "heartbeat.json")):
        with open(path) as fh:
            hb = json.load(fh)
        pids[hb["worker_id"]] = (hb["pid"], hb)
    return pids


def nimbus_refusals(user: NimbusClient, planted: str):
    """(what, call, error type, message fragment): at least 20 kinds."""
    t = small_proto()
    grouping = small_proto()
    grouping.bolts["sink"].common.inputs[0].grouping.custom_serialized = \
        pickle.dumps(Planted(planted))
    no_spout = small_proto()
    del no_spout.spouts["numbers"]
    dangling = small_proto()
    dangling.bolts["sink"].common.inputs[0].source.component = "ghost"
    bad_fields = small_proto()
    bad_fields.bolts["sink"].common.inputs[0].grouping.fields.fields.append("nope")
    zero_par = small_proto()
    zero_par.spouts["numbers"].common.parallelism_hint = 0
    long_stream = small_proto()
    long_stream.spouts["numbers"].common.streams["x" * 300].fields.append("n")
    loc = user.upload_open()  # begun, never finished
    return [
        ("name too long", lambda: user.submit("x" * 10_000, "", "{}", t), InvalidRequest, "128"),
        ("name with newline", lambda: user.submit("a\nb", "", "{}", t), InvalidRequest,
         "control"),
        ("name with dot", lambda: user.submit("a.b", "", "{}", t), InvalidRequest, "'.'"),
        ("name with colon", lambda: user.submit("a:b", "", "{}", t), InvalidRequest, "':'"),
        ("name with backslash", lambda: user.submit("a\\b", "", "{}", t), InvalidRequest,
         "contains"),
        ("name with slash", lambda: user.submit("../etc", "", "{}", t), InvalidRequest, "'/'"),
        ("empty name", lambda: user.submit("", "", "{}", t), InvalidRequest, "non-empty"),
        ("conf not JSON", lambda: user.submit("c1", "", "{", t), InvalidRequest, "not JSON"),
        ("conf not an object", lambda: user.submit("c2", "", "[1]", t), InvalidRequest,
         "JSON object"),
        ("conf value of the wrong type",
         lambda: user.submit("c3", "", '{"topology.workers": "many"}', t), InvalidRequest,
         "topology.workers"),
        ("bad serializer entry",
         lambda: user.submit("c4", "", '{"topology.serializers": {"os.system": "x"}}', t),
         InvalidRequest, "topology.serializers"),
        ("no spout", lambda: user.submit("t1", "", "{}", no_spout), InvalidRequest,
         "no spout"),
        ("unknown source", lambda: user.submit("t2", "", "{}", dangling), InvalidRequest,
         "ghost"),
        ("undeclared field", lambda: user.submit("t3", "", "{}", bad_fields),
         InvalidRequest, "nope"),
        ("zero parallelism", lambda: user.submit("t4", "", "{}", zero_par), InvalidRequest,
         "parallelism"),
        ("stream id too long", lambda: user.submit("t5", "", "{}", long_stream),
         InvalidRequest, "128 bytes"),
        ("pickled custom grouping that lacks nothing but runs code",
         lambda: user.submit("steady", "", "{}", grouping), SquallError, "already running"),
        ("too many workers",
         lambda: user.submit("w1", "", '{"topology.workers": 100000}', t), LimitExceeded,
         "nimbus.slots.perTopology"),
        ("upload location outside the inbox",
         lambda: user.submit("u1", "../../etc/passwd", "{}", t), InvalidRequest,
         "outside Nimbus's inbox"),
        ("unknown upload location",
         lambda: user.submit("u2", "upload-" + "0" * 32, "{}", t), TopologyNotFound,
         "no upload"),
        ("chunk at the wrong offset",
         lambda: user._call("UploadChunk", pb.Chunk(location=user.upload_open(), offset=5,
                                                     data=b"x")),
         InvalidRequest, "starts at byte 5"),
        ("package over the limit", lambda: user.upload(b"x" * 3_000_000), LimitExceeded,
         "nimbus.package.max.bytes"),
        ("negative kill wait", lambda: user.kill("steady", wait_secs=-1), InvalidRequest,
         ">= 0"),
        ("kill of an unknown topology", lambda: user.kill("ghost", wait_secs=0),
         TopologyNotFound, "ghost"),
        ("rebalance of an unknown component",
         lambda: user.rebalance("steady", wait_secs=0, executors={"ghost": 1}), InvalidRequest,
         "no component 'ghost'"),
        ("activate an active topology", lambda: user.activate("steady"), IllegalState,
         "active"),
        ("a user's worker heartbeat",
         lambda: user.send_heartbeats(pb.SupervisorWorkerHeartbeats(supervisor_id="x")),
         PermissionDenied, "only supervisors"),
        ("a user's package download", lambda: user.download("steady-1-1"), PermissionDenied,
         "fileDownload"),
        ("a user asking for secrets",
         lambda: user.topology_conf(user.list().topologies[0].id, include_secrets=True),
         PermissionDenied, "getTopologyConfSecrets"),
        ("an unfinished upload submitted", lambda: user.submit("u3", loc, "{}", t),
         InvalidRequest, "not finished"),
    ]


def frames(member_tasks, codec_tasks):
    """(what, frame bytes) for a worker: at least 15 kinds of malformed frames."""
    sink, spout = member_tasks
    ok = [sink, spout, "default", [1], None]
    pack = msgpack.packb
    return [
        ("empty", b""),
        ("random bytes", os.urandom(64)),
        ("truncated", pack([1, 0, [ok]])[:-3]),
        ("trailing garbage", pack([1, 0, [ok]]) + b"\x00"),
        ("not an array", pack({"v": 1})),
        ("wrong version", pack([9, 0, [ok]])),
        ("unknown kind", pack([1, 7, []])),
        ("data not a list", pack([1, 0, {"t": 1}])),
        ("tuple for an unknown task", pack([1, 0, [[99_999, spout, "default", [1], None]]])),
        ("tuple on an undeclared stream", pack([1, 0, [[sink, spout, "nope", [1], None]]])),
        ("tuple from an unknown task", pack([1, 0, [[sink, 88_888, "default", [1], None]]])),
        ("values not a list", pack([1, 0, [[sink, spout, "default", 1, None]]])),
        ("ids not a map", pack([1, 0, [[sink, spout, "default", [1], [1, 2]]]])),
        ("unknown ext type", pack([1, 0, [[sink, spout, "default",
                                           [msgpack.ExtType(99, b"x")], None]]])),
        ("pickled value", pack([1, 0, [[sink, spout, "default",
                                        [msgpack.ExtType(1, codec_tasks)], None]]])),
        # GROUPED frames (kind 4: what workers send), one malformed part each
        ("group not a 6-entry list", pack([1, 4, [[sink, spout, "default", [[1]], None]]])),
        ("group for an unknown task",
         pack([1, 4, [[99_999, spout, "default", [[1]], None, None]]])),
        ("group values not a list", pack([1, 4, [[sink, spout, "default", 7, None, None]]])),
        ("group ids shorter than its values",
         pack([1, 4, [[sink, spout, "default", [[1], [2]], bytes(16), None]]])),
        ("grouped tuple whose ids are not a map",
         pack([1, 4, [[sink, spout, "default", [[1]], None, {0: [1, 2]}]]])),
        ("backpressure from an unknown worker", pack([1, 1, "10.9.9.9:1", True])),
        ("hello from an unknown worker", pack([1, 2, "10.9.9.9:1", False])),
        ("malformed control frame", pack([1, 1, 17, "yes"])),
    ]


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    base = tmp_path_factory.mktemp("local")
    lc = LocalCluster({"topology.stats.freq.secs": 0.2, "nimbus.package.max.bytes": 2_000_000},
                      slots=4, base_dir=str(base))
    try:
        lc.start()
        yield lc
    finally:
        lc.close("test done")


def test_bad_input_is_refused_and_the_running_topology_keeps_every_message(local, tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    planted = str(tmp_path / "ran")
    tid = local.submit("steady", steady_topology(),
                       {"topology.workers": 2, "test.events.dir": str(events),
                        "test.spout.count": N, "test.spout.rate": 150}, HERE)
    poll_for(lambda: len(worker_pids(local)) == 2 and
             len(events_of(str(events), "numbers", "ack")) > 50, timeout=60,
             what="the steady topology running on 2 workers")
    before = {w: pid for w, (pid, _) in worker_pids(local).items()}

    # --- Nimbus, as an ordinary user (not a daemon, not an admin) ---
    ca = CertificateAuthority(os.path.join(local.base_dir, "tls"))
    user_conf = dict(local.conf, **ca.issue("mallory").conf())
    with NimbusClient(user_conf, timeout=10) as user:
        user.upload_open = lambda: user._call("BeginFileUpload", pb.BeginUploadRequest(
            file_name="p", total_size=0)).location
        refusals = nimbus_refusals(user, planted)
        # mallory does not own "steady": lifecycle requests on it are refused first.
        for what, call, exc, match in refusals:
            with pytest.raises((exc, PermissionDenied)) as info:
                call()
            assert isinstance(info.value, (exc, PermissionDenied)), what
            if not isinstance(info.value, PermissionDenied):
                assert match in str(info.value), f"{what}: {info.value}"
            assert "Traceback" not in str(info.value)
    assert len(refusals) >= 20

    # --- a worker, as a member (only members get through CurveZMQ) and as strangers ---
    with local.client() as nimbus:  # the local user is the supervisor: it may read secrets
        conf = json.loads(nimbus.topology_conf(tid, include_secrets=True))
        info = nimbus.topology_info(topology_id=tid)
    sink = next(e for e in info.executors if e.component_id == "sink")
    spout = next(e for e in info.executors if e.component_id == "numbers")
    target = f"{sink.host}:{sink.port}"
    bad = frames((sink.task_start, spout.task_start), pickle.dumps(Planted(planted)))
    public = conf["topology.curve.public.key"].encode()
    secret = conf["topology.curve.secret.key"].encode()
    ctx = zmq.Context()
    try:
        member = ctx.socket(zmq.PUSH)
        member.setsockopt(zmq.LINGER, 1000)
        member.curve_publickey, member.curve_secretkey, member.curve_serverkey = \
            public, secret, public
        member.connect(f"tcp://{target}")
        for _, frame in bad:
            member.send(frame)
        member.send(b"x" * (16 * 1024 * 1024 + 1))  # over topology.max.frame.bytes
        for kind in ("plain", "own keys"):
            stranger = ctx.socket(zmq.PUSH)
            stranger.setsockopt(zmq.LINGER, 0)
            if kind == "own keys":
                pub, sec = zmq.curve_keypair()
                stranger.curve_publickey, stranger.curve_secretkey = pub, sec
                stranger.curve_serverkey = public
            stranger.connect(f"tcp://{target}")
            stranger.send(msgpack.packb([1, 0, [[sink.task_start, spout.task_start,
                                                 "default", [777_777], None]]]))
            stranger.close()
        member.close()
    finally:
        ctx.destroy(linger=0)

    def dropped():
        hb = worker_pids(local).get(target, (0, {}))[1]
        return hb.get("dropped_frames", 0) + hb.get("dropped_tuples", 0)
    poll_for(lambda: dropped() >= len(bad) + 2, timeout=30,
             what=f"{len(bad)} bad frames and 2 strangers counted (have {dropped()})")

    # --- and nothing was lost, nothing ran, nobody restarted ---
    poll_for(lambda: set(int(x) for x in events_of(str(events), "numbers", "ack")) ==
             set(range(N)), timeout=N / 150 + 60, what="every message acked")
    assert events_of(str(events), "numbers", "fail") == []
    assert "777777" not in events_of(str(events), "sink", "got")
    assert not os.path.exists(planted)
    assert {w: pid for w, (pid, _) in worker_pids(local).items()} == before
    assert len(bad) >= 15
