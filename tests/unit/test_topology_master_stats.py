"""The Topology Master's stats path: the supervisor sends Nimbus one summary per topology
(only what changed, with periodic full reports), and Nimbus keeps each task's last counters."""

from __future__ import annotations

from squall.client.contract import Assignment, HeartbeatState, WorkerHeartbeat
from squall.nimbus.liveness import Liveness
from squall.proto import nimbus_pb2 as pb
from squall.supervisor.outbox import FULL_STATS_EVERY, Outbox
from outbox_fixtures import Sender, W


def task(component, executed):
    return {"component": component, "executed": executed, "emitted": executed}


def write(w: W, summary: dict | None, tasks: dict) -> None:
    WorkerHeartbeat(time=1000.0, pid=w.pid, state=HeartbeatState.RUNNING, topology_id="t-1",
                    worker_id=f"h:{w.port}", tasks=tasks, stats_via_master=True,
                    topology_summary=summary or {}).write(w.worker_dir)


def stats_of(msg) -> dict[tuple[str, int], int]:
    return {(w.worker_id, t.task): t.executed for s in msg.topology_stats for w in s.workers
            for t in w.tasks}


def test_one_summary_per_topology_with_only_what_changed(tmp_path):
    workers = []
    for port, pid in ((6700, 11), (6701, 12)):
        d = tmp_path / str(port)
        d.mkdir()
        workers.append(W("t-1", port, pid, str(d), (1, 2) if port == 6700 else (3,)))
    summary = {"h:6700": {"time": 999.0, "uptime": 5, "tasks": {"1": task("a", 10),
                                                                 "2": task("b", 20)}},
               "h:6701": {"time": 999.0, "uptime": 5, "tasks": {"3": task("b", 30)}}}
    write(workers[0], summary, {"1": task("a", 10)})  # hosts the master
    write(workers[1], None, {"3": task("b", 30)})
    out = Outbox("sup", "h", send=(send := Sender()))
    out.report(workers)
    msg = send.sent[-1]
    # Liveness of both workers, without their tasks; the tasks in the one summary.
    assert [(hb.port, len(hb.tasks), len(hb.executors)) for hb in msg.worker_heartbeats] == \
        [(6700, 0, 2), (6701, 0, 1)]
    assert stats_of(msg) == {("h:6700", 1): 10, ("h:6700", 2): 20, ("h:6701", 3): 30}
    out.report(workers)  # nothing changed: no task goes again, only each worker's time
    assert stats_of(send.sent[-1]) == {}
    assert [(w.worker_id, w.time_secs) for w in send.sent[-1].topology_stats[0].workers] == \
        [("h:6700", 999.0), ("h:6701", 999.0)]
    summary["h:6701"]["tasks"]["3"] = task("b", 31)
    write(workers[0], summary, {})
    send.fail = True
    out.report(workers)  # lost: the change must go with the next report
    send.fail = False
    out.report(workers)
    assert stats_of(send.sent[-1]) == {("h:6701", 3): 31}
    while out._reports % FULL_STATS_EVERY:
        out.report(workers)
    out.report(workers)  # a full report: everything again
    assert len(stats_of(send.sent[-1])) == 3


def ts(task_id, executed):
    return pb.TaskStats(task=task_id, component="b", executed=executed)


def test_nimbus_keeps_the_last_counters_of_tasks_a_summary_leaves_out():
    live = Liveness({}, now=0.0)
    record = Assignment("t-1", {"h:6700": [1, 2], "h:6701": [3]},
                        {"h:6700": "sup0", "h:6701": "sup1"}, {})
    live.record_stats(record, [pb.WorkerStats(worker_id="h:6700", time_secs=1, uptime_secs=5,
                                              tasks=[ts(1, 10), ts(2, 20)]),
                               pb.WorkerStats(worker_id="h:6701", time_secs=1, uptime_secs=5,
                                              tasks=[ts(3, 30)])], now=1.0)
    live.record_stats(record, [pb.WorkerStats(worker_id="h:6700", time_secs=2, uptime_secs=6,
                                              tasks=[ts(2, 25)])], now=2.0)
    got = {t: s.executed for t, (_, s) in live.task_stats(record).items()}
    assert got == {1: 10, 2: 25, 3: 30}
    # The worker restarted: its reset counters differ, so they come; task 2's did not
    # change (idle before and after), so its last ones stand.
    live.record_stats(record, [pb.WorkerStats(worker_id="h:6700", time_secs=3, uptime_secs=1,
                                              tasks=[ts(1, 2)])], now=3.0)
    got = {t: s.executed for t, (_, s) in live.task_stats(record).items()}
    assert got == {1: 2, 2: 25, 3: 30}
    live.record_stats(record, [pb.WorkerStats(worker_id="h:9999", time_secs=3, uptime_secs=1,
                                              tasks=[ts(9, 1)])], now=3.0)  # not assigned
    assert 9 not in live.task_stats(record)
    live.forget("t-1")
    assert live.task_stats(record) == {}


def test_the_master_pauses_the_spouts_upstream_of_congestion_and_renews_the_pause():
    from squall.client import BasicBolt, Spout
    from squall.client.topology import TopologyBuilder, system_topology
    from squall.worker.topology_master import (CONGESTION_TTL_SECS, THROTTLE_RENEW_SECS,
                                               Backpressure, upstream_spouts)

    class S(Spout):
        def next_tuple(self):
            pass

        def declare_output_fields(self, d):
            d.declare(["x"])

    class B(BasicBolt):
        def execute(self, t, c):
            pass

        def declare_output_fields(self, d):
            d.declare(["x"])

    b = TopologyBuilder()
    b.set_spout("s1", S())
    b.set_spout("s2", S())
    b.set_bolt("a", B()).shuffle_grouping("s1")
    b.set_bolt("b", B()).shuffle_grouping("s2")
    b.set_bolt("join", B()).shuffle_grouping("a").shuffle_grouping("b")
    topo = system_topology(b.create_topology(), {})
    assert upstream_spouts(topo, {"a"}) == {"s1"}
    assert upstream_spouts(topo, {"join"}) == {"s1", "s2"}
    assert upstream_spouts(topo, {"*"}) == {"s1", "s2"}
    assert upstream_spouts(topo, {"__acker"}) == set()  # system streams do not count
    bp = Backpressure(topo)
    bp.report("w1", ["a"], now=0.0)
    assert bp.tick(0.0) == {"s1"}
    assert bp.tick(0.5) is None                      # unchanged, renewal not due
    assert bp.tick(THROTTLE_RENEW_SECS) == {"s1"}    # renewed
    bp.report("w2", ["b"], now=1.0)
    assert bp.tick(1.1) == {"s1", "s2"}
    bp.report("w1", [], now=1.2)
    assert bp.tick(1.2) == {"s2"}
    # A worker that stops reporting (it died) stops pausing anyone.
    assert bp.tick(1.0 + CONGESTION_TTL_SECS + 0.1) == set()
