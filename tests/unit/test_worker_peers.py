"""A worker following a new assignment in which it keeps its tasks: tasks routed to their new
workers, departed workers' batches, waiting frames, congestion and sockets dropped."""

from collections import deque

from squall.client.components import Bolt, Spout
from squall.client.contract import WorkerAssignment
from squall.client.topology import TopologyBuilder, system_topology
from squall.worker.state import WorkerState
from squall.worker.transfer import Transfer


class Src(Spout):
    def next_tuple(self):
        pass

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class Sink(Bolt):
    def execute(self, tup):
        pass


ME, OLD, NEW = "127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"


def worker_state(tmp_path):
    b = TopologyBuilder()
    b.set_spout("src", Src(), 1)
    b.set_bolt("sink", Sink(), 2).shuffle_grouping("src")
    conf = {"topology.acker.executors": 0}
    topo = system_topology(b.create_topology(), conf)
    a = WorkerAssignment("t-1", ME, "127.0.0.1", 7001, {ME: [1, 2], OLD: [3]}, conf,
                   ipc_dir=str(tmp_path))
    return WorkerState(topo, a)


def test_update_peers_reroutes_tasks_and_forgets_departed_workers(tmp_path):
    ws = worker_state(tmp_path)
    ws.bp.remote(OLD, True)
    assert ws.bp.throttled
    gone = ws.update_peers({ME: [1, 2], NEW: [3]})
    assert gone == [OLD]
    assert ws.task_worker[3] == NEW and ws.live_workers == {ME, NEW}
    assert NEW in ws.endpoints and ws.assignment.workers == {ME: [1, 2], NEW: [3]}
    assert not ws.bp.throttled  # the departed worker's congestion no longer counts


def test_transfer_drops_what_it_holds_for_a_departed_worker(tmp_path):
    ws = worker_state(tmp_path)
    tr = Transfer(ws)
    tr.batch_size = 1000
    tr.remote(3, 1, "default", [1], None)
    tr._sock(OLD)
    tr.blocked[OLD] = deque([b"frame"])
    ws.bp.local(True)  # as a full pipe does
    ws.update_peers({ME: [1, 2], NEW: [3]})
    tr.flush()
    assert OLD not in tr.out and OLD not in tr.blocked and OLD not in tr.socks
    assert ws.dropped_tuples == 1 and not ws.bp.local_congested
    tr.remote(3, 1, "default", [2], None)  # now routed to the new worker
    assert list(tr.out) == [NEW]
    tr.close()
    for s in tr.socks.values():
        s.close(0)
