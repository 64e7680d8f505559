"""proto/nimbus.proto: the generated modules import as package modules and carry every Nimbus RPC."""

import json
import pickle

import pytest

from squall.client.components import Bolt, Spout
from squall.client.topology import TopologyBuilder
from squall.client.topology_proto import from_proto, to_proto
from squall.proto import nimbus_pb2 as pb
from squall.proto import nimbus_pb2_grpc as pb_grpc
from squall.proto import topology_pb2


class Words(Spout):
    """Module-level so it pickles into the topology by reference."""

    def next_tuple(self):
        pass

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class Count(Bolt):
    def execute(self, tup):
        pass

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])


def small_topology():
    b = TopologyBuilder()
    b.set_spout("words", Words(), 2)
    b.set_bolt("count", Count(), 3).fields_grouping("words", ["word"])
    return b.create_topology()


# (method, request type, response type, client streaming, server streaming)
METHODS = [
    ("BeginFileUpload", "BeginUploadRequest", "UploadLocation", False, False),
    ("UploadChunk", "Chunk", "Empty", False, False),
    ("FinishFileUpload", "UploadLocation", "Empty", False, False),
    ("UploadPackage", "Chunk", "UploadLocation", True, False),
    ("AbandonFileUpload", "UploadLocation", "Empty", False, False),
    ("SubmitTopology", "SubmitRequest", "SubmitResponse", False, False),
    ("KillTopology", "KillRequest", "Empty", False, False),
    ("Activate", "NameRequest", "Empty", False, False),
    ("Deactivate", "NameRequest", "Empty", False, False),
    ("Rebalance", "RebalanceRequest", "Empty", False, False),
    ("GetClusterInfo", "Empty", "ClusterSummary", False, False),
    ("GetTopologyInfo", "TopologyRef", "TopologyInfo", False, False),
    ("GetTopologyConf", "IdRequest", "JsonConf", False, False),
    ("GetUserTopology", "IdRequest", "StormTopology", False, False),
    ("DownloadPackage", "IdRequest", "Chunk", False, True),
    ("GetLeader", "Empty", "NimbusSummary", False, False),
    ("SetLogConfig", "SetLogConfigRequest", "LogConfig", False, False),
    ("SetWorkerProfiler", "ProfileRequest", "ProfileRequest", False, False),
    ("GetComponentPendingProfileActions", "TopologyRef", "ProfileRequests", False, False),
    ("Debug", "DebugRequest", "ComponentDebug", False, False),
    ("SendSupervisorWorkerHeartbeats", "SupervisorWorkerHeartbeats", "Empty", False, False),
]


def test_service_has_every_method_with_its_types_and_streaming():
    methods = pb.DESCRIPTOR.services_by_name["Nimbus"].methods_by_name
    assert set(methods) == {m[0] for m in METHODS}
    for name, req, resp, cstream, sstream in METHODS:
        m = methods[name]
        assert (m.input_type.full_name, m.output_type.full_name) == \
            (f"squall.{req}", f"squall.{resp}"), name
        assert (m.client_streaming, m.server_streaming) == (cstream, sstream), name


def test_stub_and_servicer_expose_every_method():
    servicer = pb_grpc.NimbusServicer
    for name, *_ in METHODS:
        assert callable(getattr(servicer, name)), name
    assert callable(pb_grpc.add_NimbusServicer_to_server)
    assert callable(pb_grpc.NimbusStub)


def test_topology_proto_still_imports_and_is_the_same_stormtopology():
    # nimbus_pb2 imports topology_pb2 relatively: one module, one message class.
    assert pb.SubmitRequest.DESCRIPTOR.fields_by_name["topology"].message_type is \
        topology_pb2.StormTopology.DESCRIPTOR
    upload_chunk = pb.DESCRIPTOR.services_by_name["Nimbus"].methods_by_name["UploadChunk"]
    assert upload_chunk.output_type is topology_pb2.Empty.DESCRIPTOR


def test_submit_request_round_trips_a_real_topology():
    topo = small_topology()
    req = pb.SubmitRequest(
        name="wc", uploaded_location="uploads/abc.zip",
        json_conf=json.dumps({"topology.workers": 2}),
        topology=to_proto(topo),
        options=pb.SubmitOptions(initial_status=pb.SubmitOptions.INACTIVE, owner="alice"))
    back = pb.SubmitRequest.FromString(req.SerializeToString())
    assert back == req
    assert back.options.initial_status == pb.SubmitOptions.INACTIVE
    assert json.loads(back.json_conf) == {"topology.workers": 2}
    rebuilt = from_proto(back.topology)
    assert set(rebuilt.components) == {"words", "count"}
    assert rebuilt.components["count"].parallelism == 3
    assert rebuilt.components["count"].inputs[0].grouping.fields == ["word"]
    assert isinstance(rebuilt.components["words"].instantiate(), Words)


def test_initial_status_defaults_to_active():
    assert pb.SubmitRequest().options.initial_status == pb.SubmitOptions.ACTIVE


@pytest.mark.parametrize("msg,field", [
    (pb.KillRequest, "wait_secs"),
    (pb.RebalanceRequest, "wait_secs"),
    (pb.RebalanceRequest, "num_workers"),
])
def test_optional_counts_tell_unset_from_zero(msg, field):
    unset = msg.FromString(msg(name="wc").SerializeToString())
    zero = msg.FromString(msg(name="wc", **{field: 0}).SerializeToString())
    assert not unset.HasField(field)
    assert zero.HasField(field) and getattr(zero, field) == 0


def test_rebalance_executors_map_and_topology_ref_oneof():
    req = pb.RebalanceRequest(name="wc", num_workers=4, executors={"count": 6, "words": 1})
    assert dict(pb.RebalanceRequest.FromString(req.SerializeToString()).executors) == \
        {"count": 6, "words": 1}
    assert pb.TopologyRef(name="wc").WhichOneof("ref") == "name"
    assert pb.TopologyRef(id="wc-1-17").WhichOneof("ref") == "id"


def test_supervisor_worker_heartbeats_carry_task_stats():
    hb = pb.SupervisorWorkerHeartbeats(supervisor_id="sup-1", worker_heartbeats=[
        pb.WorkerHeartbeat(
            topology_id="wc-1-17", port=6700, time_secs=1700000000.25, uptime_secs=12,
            state="running",
            executors=[pb.ExecutorInfo(task_start=1, task_end=2)],
            tasks=[pb.TaskStats(task=1, component="words", emitted=10, acked=9, pending=1,
                                complete_latency=pb.LatencyStats(mean=1.5, p50=1.0,
                                                                 p99=4.0, n=9))])],
        errors=[pb.WorkerError(topology_id="wc-1-17", error=pb.ErrorInfo(
            component="count", error="ValueError: x", time_secs=17, host="h", port=6700,
            task=3))])
    back = pb.SupervisorWorkerHeartbeats.FromString(hb.SerializeToString())
    assert back == hb
    w = back.worker_heartbeats[0]
    assert w.time_secs == 1700000000.25
    assert w.tasks[0].HasField("complete_latency")


def test_messages_pickle_under_their_real_module():
    # generate.sh rewrites __module__ so messages pickle (e.g. across processes).
    msg = pb.NimbusSummary(host="h", port=6627, is_leader=True, version="0.1.0")
    assert type(msg).__module__ == "squall.proto.nimbus_pb2"
    assert pickle.loads(pickle.dumps(msg)) == msg
