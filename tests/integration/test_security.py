"""Issue 11's findings, each as a test against real workers (and, below, Nimbus)."""

from __future__ import annotations

from collections import Counter

import pytest
import zmq

from planted import Planted
from squall.client import TopologyBuilder
from squall.client.values import ValueTypes
from squall.worker.frame import Codec
from topos import POINT_SERIALIZERS, NumberSpout, PointSpout, RecordingBolt, events_of

pytestmark = pytest.mark.integration


def sink_topology(spout):
    b = TopologyBuilder()
    b.set_spout("numbers", spout, 2)
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("numbers")
    return b.create_topology()


def tasks_of(lc, component):
    from squall.client.topology import assign_task_ids, system_topology
    return assign_task_ids(system_topology(lc.topology, lc.conf))[component]


def test_a_registered_value_type_crosses_workers(cluster):
    n = 400
    lc = cluster(sink_topology(PointSpout()), {"test.spout.count": n,
                                               "topology.serializers": POINT_SERIALIZERS})
    lc.wait_for(lambda: len(set(events_of(lc.events_dir, "numbers", "ack"))) >= n,
                timeout=60, what="every point acked")
    got = Counter(events_of(lc.events_dir, "sink", "got"))
    assert set(got) == {f"P({i},{-i})" for i in range(n)}
    assert sum(hb["dropped_frames"] for hb in lc.heartbeats().values()) == 0


@pytest.mark.parametrize("stranger", ["plain", "curve, own key pair", "curve, server key known"])
@pytest.mark.parametrize("conf", [{}, {"topology.fall.back.on.java.serialization": True}],
                         ids=["default", "pickle fallback on"])
def test_a_pickled_frame_from_a_stranger_runs_nothing(cluster, tmp_path, conf, stranger):
    """One frame to a worker port used to run code in the worker (pickle in msgpack's
    ext_hook), and forged tuples from a non-member were executed. Now a stranger fails the
    CurveZMQ handshake, whatever it tries; the refusal is counted and the topology loses
    nothing."""
    n = 300
    lc = cluster(sink_topology(NumberSpout()), {"test.spout.count": n, **conf})
    target = lc.workers[0]
    planted = tmp_path / "ran"
    sink_task = next(t for t in tasks_of(lc, "sink") if t in lc.assignment[target.worker_id])
    spout_task = tasks_of(lc, "numbers")[0]
    frame = Codec(ValueTypes(pickle_out=True)).data(
        [[sink_task, spout_task, "default", [Planted(str(planted))], None],
         [sink_task, spout_task, "default", [999_999], None]])  # a well-formed forged tuple
    ctx = zmq.Context()
    try:
        sock = ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 0)
        if stranger != "plain":
            public, secret = zmq.curve_keypair()
            sock.curve_publickey, sock.curve_secretkey = public, secret
            sock.curve_serverkey = (lc.conf["topology.curve.public.key"].encode()
                                    if stranger == "curve, server key known" else public)
        sock.connect(f"tcp://{target.worker_id}")
        sock.send(frame)
        lc.wait_for(lambda: lc.heartbeats().get(target.worker_id, {}).get("dropped_frames", 0)
                    >= 1, timeout=30, what="the stranger refused and counted")
        sock.close()
    finally:
        ctx.term()
    lc.wait_for(lambda: len(set(events_of(lc.events_dir, "numbers", "ack"))) >= n,
                timeout=60, what="every message acked")
    assert not planted.exists()
    assert events_of(lc.events_dir, "numbers", "fail") == []
    assert "999999" not in events_of(lc.events_dir, "sink", "got")  # the forged tuple
    assert not lc.crashed()
