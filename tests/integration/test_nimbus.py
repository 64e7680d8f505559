"""Nimbus + its gRPC server in-process against a real ZooKeeper, with two fake supervisors."""

from __future__ import annotations

import json
import sys

import grpc
import pytest

from squall.client import histogram
from squall.client.nimbus_client import NimbusClient
from squall.client.errors import (IllegalState, InvalidRequest, LimitExceeded,
                                  NimbusUnavailable, TopologyAlreadyExists, TopologyNotFound)
from squall.client.topology import TopologyBuilder
from squall.client.topology_proto import to_proto
from squall.deploy.net import free_port
from squall.nimbus.nimbus import Nimbus
from squall.nimbus.servicer import serve
from topos import NumberSpout, RecordingBolt
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration


def topology():
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("record", RecordingBolt(), 3).shuffle_grouping("numbers")
    return to_proto(b.create_topology())


@pytest.fixture
def conf(zk_conf, tmp_path):
    return dict(zk_conf, **{"nimbus.grpc.port": free_port(), "storm.local.dir": str(tmp_path),
                            "nimbus.package.max.bytes": 10_000,
                            "nimbus.monitor.freq.secs": 0.5})


@pytest.fixture
def cluster(conf, cluster_state):
    """Start Nimbus + gRPC server (restartable); two supervisors of 2 slots each."""
    cluster_state.register_supervisor("sup-1", {"host": "127.0.0.1", "slots": [6700, 6701],
                                                "used_slots": [], "uptime_secs": 1.0,
                                                "time_secs": 0.0})
    cluster_state.register_supervisor("sup-2", {"host": "127.0.0.1", "slots": [6702, 6703],
                                                "used_slots": [], "uptime_secs": 1.0,
                                                "time_secs": 0.0})
    running = []

    class Cluster:
        state = cluster_state

        def start(self):
            nimbus = Nimbus(conf).start()
            assert nimbus.wait_for_leadership(10)
            server = serve(nimbus, "127.0.0.1", conf["nimbus.grpc.port"])
            running.append((nimbus, server))
            self.nimbus = nimbus
            return nimbus

        def stop(self):
            nimbus, server = running.pop()
            server.stop(grace=None).wait(5)
            nimbus.close(reason="test")

    c = Cluster()
    c.start()
    client = NimbusClient(conf, timeout=10)
    c.client = client
    try:
        yield c
    finally:
        client.close()
        while running:
            c.stop()


def zk_snapshot(state):
    return (state.storm_ids(), state.assignment_ids())


def test_submit_lifecycle_kill(cluster, conf, tmp_path):
    client, state = cluster.client, cluster.state
    location = client.upload(b"PK-package-bytes" * 10, progress=lambda s, t: None)
    warned = []
    tid = client.submit("wc", location, json.dumps({"topology.workers": 3,
                                                    "topology.worker.childopts": "-Xmx2g"}),
                        topology(), warn=warned.append)
    assert tid.startswith("wc-1-")
    assert warned == ["topology wc: topology.worker.childopts is a Storm key Squall does not "
                      "implement; it has no effect"]
    stored = state.get_storm(tid)
    assert stored["name"] == "wc" and stored["status"] == "active"
    assert stored["component_executors"] == {"numbers": 2, "record": 3, "__acker": 3,
                                             "__topology_master": 1}
    record, _ = state.get_assignment(tid)
    assert len(record["workers"]) == 3  # topology.workers slots
    assert set(record["slots"].values()) == {"sup-1", "sup-2"}  # spread over supervisors
    assert sorted(t for ts in record["workers"].values() for t in ts) == list(range(1, 10))
    assert record["revision"] == 1 and record["topology_id"] == tid
    assert record["version"] == 1  # the record's format (squall.client.contract.Assignment)
    assert set(record["start_times"]) == set(record["workers"])
    stormdist = tmp_path / "nimbus" / "stormdist" / tid
    assert (stormdist / "package").read_bytes() == b"PK-package-bytes" * 10
    assert client.download(tid) == b"PK-package-bytes" * 10
    assert json.loads(client.topology_conf(tid))["topology.name"] == "wc"

    summary = client.list()
    assert [(t.name, t.status, t.num_workers, t.num_tasks) for t in summary.topologies] == \
        [("wc", "ACTIVE", 3, 9)]
    assert sum(s.num_used_slots for s in summary.supervisors) == 3
    assert [n.is_leader for n in summary.nimbuses] == [True]
    info = client.topology_info("wc")
    assert info.id == tid and len(info.executors) == 9

    client.deactivate("wc")
    assert state.get_storm(tid)["status"] == "inactive"
    client.activate("wc")
    assert state.get_storm(tid)["status"] == "active"

    client.kill("wc", wait_secs=2)
    assert state.get_storm(tid)["status"] == "killed"
    assert client.list().topologies[0].status == "KILLED"
    with pytest.raises(IllegalState, match="being killed"):
        client.activate("wc")
    # Removal deletes the ZooKeeper nodes (one transaction), then the local files.
    poll_for(lambda: state.get_storm(tid) is None and not stormdist.exists(), timeout=8,
             what="removal after kill -w 2")
    assert state.get_assignment(tid) is None
    with pytest.raises(TopologyNotFound, match="no live topology named 'wc'"):
        client.kill("wc")


def test_topology_info_sums_heartbeat_counters_per_executor_and_component(cluster):
    from squall.proto import nimbus_pb2 as pb
    client, state = cluster.client, cluster.state
    tid = client.submit("stats", "", json.dumps({"topology.workers": 2}), topology())
    record, _ = state.get_assignment(tid)
    comp_of = {t: comp for comp, tasks in record["executors"] for t in tasks}
    by_sup: dict[str, list] = {}
    for hp, sid in record["slots"].items():
        tasks = [pb.TaskStats(task=t, component=comp_of[t], emitted=10, acked=t, pending=1,
                              executed=0 if comp_of[t] == "numbers" else 7,
                              complete_hist=pb.Histogram(
                                  buckets={histogram.bucket_of(2.0 * t): t}, sum=2.0 * t * t,
                                  n=t) if comp_of[t] == "numbers" else None)
                 for t in record["workers"][hp]]
        by_sup.setdefault(sid, []).append(pb.WorkerHeartbeat(
            topology_id=tid, port=int(hp.rsplit(":", 1)[1]), time_secs=1234.5, tasks=tasks))
    for sid, hbs in by_sup.items():
        cluster.nimbus.record_heartbeats(sid, hbs)

    info = client.topology_info("stats")
    assert all(e.stats_time_secs == 1234.5 for e in info.executors)
    comps = {c.component_id: c for c in info.components}
    assert set(comps) == {"numbers", "record", "__acker", "__topology_master"}
    numbers = comps["numbers"]
    spout_tasks = [t for t, c in comp_of.items() if c == "numbers"]
    assert numbers.type == "spout" and comps["record"].type == "bolt"
    assert (numbers.num_executors, numbers.num_tasks) == (2, 2)
    assert numbers.emitted == 20 and numbers.pending == 2 and numbers.executed == 0
    assert numbers.acked == sum(spout_tasks)
    # Mean latency weighted by completions: sum(2t * t) / sum(t).
    assert numbers.complete_latency_ms == pytest.approx(
        sum(2.0 * t * t for t in spout_tasks) / sum(spout_tasks))
    assert comps["record"].executed == 21
    # The same counters over the last 10 minutes: all of them, as this Nimbus saw no earlier.
    windowed = client.topology_info("stats", window_secs=600)
    assert windowed.window_secs == 600
    assert {c.component_id: c.acked for c in windowed.components} == \
        {c.component_id: c.acked for c in info.components}
    with pytest.raises(InvalidRequest, match="window_secs"):
        client.topology_info("stats", window_secs=-1)


def test_kill_survives_nimbus_restart(cluster, tmp_path):
    client, state = cluster.client, cluster.state
    tid = client.submit("restart", "", "{}", topology())
    client.kill("restart", wait_secs=2)
    cluster.stop()  # Nimbus dies during the kill wait
    assert state.get_storm(tid)["status"] == "killed"
    stormdist = tmp_path / "nimbus" / "stormdist"
    # Files a Nimbus that died mid-removal (or mid-submission) left behind: no topology has them.
    (stormdist / "orphan-9-1").mkdir()
    cluster.start()
    assert not (stormdist / "orphan-9-1").exists()  # cleared before it leads
    # Removal is two steps (ZooKeeper, then the files): wait for both.
    poll_for(lambda: state.get_storm(tid) is None and not (stormdist / tid).exists(),
             timeout=8, what="removal by the new Nimbus")
    assert state.get_assignment(tid) is None


def test_rebalance_changes_workers(cluster):
    client, state = cluster.client, cluster.state
    tid = client.submit("rb", "", json.dumps({"topology.workers": 2}), topology())
    assert len(state.get_assignment(tid)[0]["workers"]) == 2
    with pytest.raises(InvalidRequest, match="no component 'nope'"):
        client.rebalance("rb", wait_secs=0, executors={"nope": 1})
    client.rebalance("rb", wait_secs=0, num_workers=4, executors={"record": 1})
    poll_for(lambda: state.get_storm(tid)["status"] == "active" and
             len(state.get_assignment(tid)[0]["workers"]) == 4, timeout=5, what="rebalance")
    assert state.get_storm(tid)["component_executors"]["record"] == 1


def test_refusals_write_nothing(cluster, monkeypatch):
    client, state = cluster.client, cluster.state
    before = zk_snapshot(state)

    # A component needing an extra Nimbus's host lacks (pyspark hidden from this process,
    # where the test's Nimbus runs), or one this Squall does not know.
    monkeypatch.setitem(sys.modules, "pyspark", None)
    needs = topology()
    needs.bolts["record"].common.required_extras.append("spark")
    with pytest.raises(InvalidRequest, match=r"component 'record' of topology spk needs "
                                             r"squall\[spark\] \(pyspark not installed on the "
                                             r"Nimbus host 127.0.0.1\): pip install"):
        client.submit("spk", "", "{}", needs)
    needs.bolts["record"].common.required_extras[:] = ["gpu"]
    with pytest.raises(InvalidRequest, match=r"needs squall\[gpu\], which this Squall does "
                                             "not have"):
        client.submit("gpu", "", "{}", needs)

    bad = topology()
    bad.bolts["record"].common.inputs[0].source.component = "missing"
    with pytest.raises(InvalidRequest, match="no component 'missing'"):
        client.submit("bad", "", "{}", bad)
    with pytest.raises(InvalidRequest, match="invalid topology name"):
        client.submit("a/b", "", "{}", topology())
    with pytest.raises(InvalidRequest, match="JSON object"):
        client.submit("conf", "", "[1]", topology())
    with pytest.raises(LimitExceeded, match="nimbus.package.max.bytes"):
        client.upload(b"x" * 10_001)
    with pytest.raises(InvalidRequest, match="outside Nimbus's inbox"):
        client.submit("trav", "../../etc/passwd", "{}", topology())
    with pytest.raises(TopologyNotFound, match="no upload"):
        client.submit("unknown", "upload-" + "0" * 32, "{}", topology())
    assert zk_snapshot(state) == before == ([], [])

    tid = client.submit("dup", "", "{}", topology())
    with pytest.raises(TopologyAlreadyExists, match=f"already running \\(id {tid}\\)"):
        client.submit("dup", "", "{}", topology())
    assert zk_snapshot(state) == ([tid], [tid])


def test_grpc_status_codes(cluster):
    """The raw status codes, as the proto header documents them."""
    from squall.proto import nimbus_pb2 as pb
    from squall.proto import nimbus_pb2_grpc as pb_grpc
    with grpc.insecure_channel(cluster.client.address) as channel:
        stub = pb_grpc.NimbusStub(channel)
        cases = [
            (stub.KillTopology, pb.KillRequest(name="nope"), grpc.StatusCode.NOT_FOUND),
            (stub.BeginFileUpload, pb.BeginUploadRequest(total_size=10**9),
             grpc.StatusCode.RESOURCE_EXHAUSTED),
            (stub.UploadChunk, pb.Chunk(location="../x", data=b"x"),
             grpc.StatusCode.INVALID_ARGUMENT),
        ]
        for method, request, code in cases:
            with pytest.raises(grpc.RpcError) as info:
                method(request, timeout=5)
            assert info.value.code() == code
            assert "Traceback" not in info.value.details()


def test_unreachable_nimbus_names_address():
    port = free_port()
    with NimbusClient({"nimbus.seeds": ["127.0.0.1"], "nimbus.grpc.port": port},
                      timeout=2) as client:
        with pytest.raises(NimbusUnavailable, match=f"127.0.0.1:{port}"):
            client.list()
