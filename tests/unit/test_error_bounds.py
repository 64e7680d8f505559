"""Error reports and ZooKeeper writes are bounded before they are stored or sent (issue 23, 1
and 2): a user's megabyte exception message is cut where it is made and at every hop, a
supervisor's report never passes gRPC's message limit, and an oversized node is refused
before it reaches ZooKeeper."""

from __future__ import annotations

import json
import os

import pytest

from squall.client.cluster_state import MAX_NODE_BYTES, NodeTooLarge
from squall.client.contract import (MAX_ERROR_CHARS, HeartbeatState, WorkerHeartbeat,
                                    cut_error)
from squall.client.cluster_state import InMemoryClusterState
from squall.supervisor import outbox as ob
from outbox_fixtures import Sender, W


def test_cut_error_keeps_short_texts_and_says_how_long_a_long_one_was():
    assert cut_error("ValueError: 3") == "ValueError: 3"
    assert cut_error("x" * MAX_ERROR_CHARS) == "x" * MAX_ERROR_CHARS
    cut = cut_error("ValueError: " + "x" * 1_000_000)
    assert len(cut) == MAX_ERROR_CHARS
    assert cut.startswith("ValueError: xxx")
    assert cut.endswith("[cut: 1,000,012 characters in all; the worker's log has the whole text]")
    assert cut_error(cut) == cut  # cut again by the next hop: unchanged


def worker(tmp_path, port, errors):
    d = tmp_path / str(port)
    d.mkdir()
    w = W("t-1", port, 100 + port, str(d), (1,))
    # Written as a worker running user code could: sizes not cut.
    WorkerHeartbeat(time=1000.0, pid=w.pid, state=HeartbeatState.RUNNING, topology_id="t-1",
                    worker_id=f"h:{port}", errors=errors).write(w.worker_dir)
    return w


def test_a_workers_megabyte_errors_are_cut_and_the_report_fits(tmp_path):
    errors = [{"time": 1000.0 + i, "component": "c" * 100_000, "task": 1,
               "error": f"ValueError: {i} " + "x" * 1_000_000} for i in range(20)]
    w = worker(tmp_path, 6700, errors)
    out = ob.Outbox("sup", "h", send=(send := Sender(ob.MAX_REPORT_BYTES)))
    out.report([w])
    msg = send.sent[-1]
    assert len(msg.errors) == 20
    assert all(len(e.error.error) == MAX_ERROR_CHARS and len(e.error.component) == 256
               for e in msg.errors)
    assert msg.errors[-1].error.error.startswith("ValueError: 19 xxx")
    assert msg.ByteSize() < 200_000


def test_errors_past_the_reports_bound_are_dropped_not_sent_again(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(ob, "MAX_REPORT_BYTES", 50_000)
    w = worker(tmp_path, 6700, [{"time": 1000.0 + i, "component": "c", "task": 1,
                                 "error": f"E{i:02d} " + "x" * 5000} for i in range(20)])
    out = ob.Outbox("sup", "h", send=(send := Sender(ob.MAX_REPORT_BYTES)))
    send.fail = True
    out.report([w])  # Nimbus away: what the report held waits for the next one
    kept = len(out.unsent_errors)
    assert 5 < kept < 20, kept  # about 4 KB each in 50 KB
    assert f"{20 - kept} worker error(s) left out of the report" in caplog.text
    send.fail = False
    out.report([w])
    sent = [e.error.error[:3] for e in send.sent[-1].errors]
    assert sent == [f"E{i:02d}" for i in range(20 - kept, 20)], sent  # the newest that fit
    assert out.unsent_errors == []
    out.report([w])
    assert list(send.sent[-1].errors) == []


def test_a_heartbeat_too_big_for_the_report_is_left_out_and_the_others_go(tmp_path):
    big = worker(tmp_path, 6700, [])
    with open(os.path.join(big.worker_dir, "heartbeat.json")) as fh:
        hb = json.load(fh)
    hb["tasks"] = {"1": {"component": "a", "streams": {"s" * 200 + str(i): [1, 1]
                                                        for i in range(20_000)}}}
    with open(os.path.join(big.worker_dir, "heartbeat.json"), "w") as fh:
        json.dump(hb, fh)
    small = worker(tmp_path, 6701, [])
    out = ob.Outbox("sup", "h", send=(send := Sender(ob.MAX_REPORT_BYTES)))
    out.report([big, small])
    assert [hb.port for hb in send.sent[-1].worker_heartbeats] == [6701]


def test_a_node_larger_than_zookeeper_holds_is_refused_before_it_is_sent():
    state = InMemoryClusterState()
    with pytest.raises(NodeTooLarge, match="is more than a node holds"):
        state.set_storm("t-1", {"name": "t", "blob": "x" * MAX_NODE_BYTES})
    assert state.get_storm("t-1") is None
    with pytest.raises(NodeTooLarge):
        state.register_supervisor("s", {"host": "h", "junk": "x" * MAX_NODE_BYTES})
    # A component's errors are cut before they are stored: ten of them always fit.
    for i in range(12):
        state.report_error("t-1", "c", "x" * 2_000_000, 1000.0 + i)
    stored = state.errors("t-1", "c")
    assert len(stored) == 10 and all(len(e["error"]) == MAX_ERROR_CHARS for e in stored)


def test_health_names_stalled_executors_and_the_report_carries_them(tmp_path):
    from squall.client.health import topology_health
    from squall.proto import nimbus_pb2 as pb
    t = pb.TopologySummary(name="t", status="ACTIVE", num_workers=1, live_workers=1,
                           health_known=True)
    assert topology_health(t) == "ok"
    t.stalled.append("spout s: next_tuple has not returned for 12 s (on h:6700)")
    assert topology_health(t) == "stalled: spout s: next_tuple has not returned for 12 s " \
                                 "(on h:6700)"
    # From the worker's file to the report: at most 16, each cut to 256 characters.
    w = worker(tmp_path, 6700, [])
    hb = WorkerHeartbeat.read(w.worker_dir)
    hb.stalled = [f"spout s{i}: next_tuple has not returned for 1 s" + "x" * 1000
                  for i in range(40)]
    hb.write(w.worker_dir)
    out = ob.Outbox("sup", "h", send=(send := Sender(ob.MAX_REPORT_BYTES)))
    out.report([w])
    stalled = send.sent[-1].worker_heartbeats[0].stalled
    assert len(stalled) == 16 and all(len(s) == 256 for s in stalled)


def test_a_supervisors_own_error_about_a_topology_goes_with_the_report(tmp_path):
    out = ob.Outbox("sup", "h1", send=(send := Sender(ob.MAX_REPORT_BYTES)))
    out.supervisor_error("t-1", "supervisor sup on h1 cannot fetch the topology's package "
                                "(ValueError: zip bomb)" + "x" * 10_000, now=1700000000)
    out.report([])
    (e,) = send.sent[-1].errors
    assert (e.topology_id, e.error.component, e.error.host) == ("t-1", "__supervisor", "h1")
    assert len(e.error.error) == MAX_ERROR_CHARS and "zip bomb" in e.error.error
