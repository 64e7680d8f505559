"""The Supervisor on real ZooKeeper with real workers: launch, restart after kill -9, stop."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time

import pytest

from squall.client import TopologyBuilder
from squall.client import config as cfg
from squall.client.topology import assign_task_ids, system_topology
from squall.client.topology_proto import to_bytes
from squall.deploy.static import even_assignment
from squall.deploy.net import free_ports
from squall.supervisor.supervisor import Supervisor, default_spawn
from topos import NumberSpout, RecordingBolt, events_of, read_events
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
TID = "sup-test-1-1700000000"


def got_count(events_dir, tasks):
    return sum(1 for (c, t), evs in read_events(events_dir).items() if c == "sink" and t in tasks
               for k, _ in evs if k == "got")


def test_supervisor_runs_restarts_and_stops_real_workers(cluster_state, zk_conf, tmp_path):
    events = tmp_path / "events"
    events.mkdir()
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("numbers")
    topology = b.create_topology()
    tconf = {"topology.name": "sup-test", "topology.workers": 2, "topology.stats.freq.secs": 0.2,
             "topology.max.spout.pending": 20, "topology.message.timeout.secs": 5,
             "test.events.dir": str(events), "test.spout.count": 10 ** 9,
             "test.sleep.secs": 0.002}

    def fetch(topology_id, dest):
        assert topology_id == TID
        with open(os.path.join(dest, "topology.pb"), "wb") as fh:
            fh.write(to_bytes(topology))
        with open(os.path.join(dest, "conf.json"), "w") as fh:
            json.dump(tconf, fh)
        # The package holds the topology's code; workers import `topos` from it.
        os.makedirs(os.path.join(dest, "package"))
        shutil.copy(os.path.join(HERE, "topos.py"), os.path.join(dest, "package"))

    popens = []

    def spawn(cmd, log_path, env):
        p = default_spawn(cmd, log_path, env)
        popens.append(p)
        return p

    ports = sorted(free_ports(2))
    conf = dict(zk_conf, **{"storm.local.dir": str(tmp_path / "sup"),
                            "supervisor.slots.ports": ports, "storm.local.hostname": "127.0.0.1"})
    sup = Supervisor(conf, fetch_topology=fetch, spawn=spawn)
    worker_ids = [f"127.0.0.1:{p}" for p in ports]
    workers = even_assignment(system_topology(topology, cfg.layered(tconf)), worker_ids)
    sink_tasks = assign_task_ids(system_topology(topology, cfg.layered(tconf)))["sink"]

    def assign():
        cluster_state.set_storm(TID, {"name": "sup-test", "status": "active"})
        cluster_state.set_assignment(TID, {
            "topology_id": TID, "workers": workers, "slots": {w: sup.id for w in worker_ids},
            "executors": [], "start_times": {}, "version": 1})

    def acks():
        return len(events_of(str(events), "numbers", "ack"))

    try:
        sup.start()
        assert cluster_state.supervisors()[sup.id]["slots"] == ports
        assign()
        poll_for(lambda: len(sup.procs) == 2, timeout=10, what="both workers launched")
        poll_for(lambda: acks() >= 100, timeout=20, what="spout messages acked")
        poll_for(lambda: cluster_state.supervisors()[sup.id]["used_slots"] == ports, timeout=5,
                 what="used slots registered")

        # kill -9 one worker: the supervisor restarts it and its tasks process again.
        victim = sup.procs[ports[0]].proc.pid
        mine = set(workers[worker_ids[0]]) & set(sink_tasks)
        assert mine, "each worker should run a sink task"
        os.kill(victim, signal.SIGKILL)
        t0 = time.monotonic()
        poll_for(lambda: ports[0] in sup.procs and sup.procs[ports[0]].proc.pid != victim,
                 timeout=10, what="the killed worker relaunched")
        before = got_count(str(events), mine)
        poll_for(lambda: got_count(str(events), mine) >= before + 50, timeout=20,
                 what="the restarted worker processing tuples")
        print(f"kill -9 -> restarted worker processing again: {time.monotonic() - t0:.2f}s")
        acked = acks()
        poll_for(lambda: acks() >= acked + 50, timeout=10, what="acks continuing")

        # Assignment removed: the workers are stopped and their files removed.
        cluster_state.remove_storm(TID)
        poll_for(lambda: not sup.procs and all(p.poll() is not None for p in popens),
                 timeout=15, what="workers stopped after the assignment went away")
        poll_for(lambda: not os.path.exists(os.path.join(sup.files.stormdist, TID)), timeout=5,
                 what="local topology files removed")
        poll_for(lambda: cluster_state.supervisors()[sup.id]["used_slots"] == [], timeout=5,
                 what="used slots cleared")

        # Assigned again, then the supervisor closes: nothing left running, node gone.
        assign()
        poll_for(lambda: len(sup.procs) == 2, timeout=10, what="workers launched again")
        running = [p for p in popens if p.poll() is None]
        assert len(running) == 2
        sup.close("test over")
        assert all(p.poll() is not None for p in popens)
        poll_for(lambda: sup.id not in cluster_state.supervisors(), timeout=10,
                 what="supervisor unregistered")
    finally:
        sup.close("teardown")
        for p in popens:
            if p.poll() is None:
                p.kill()
                p.wait()


ERROR_TOPO = '''
from squall.client import BasicBolt, ReportedFailedException


class ReportOnce(BasicBolt):
    """Fails tuple 3 once with a reported error (the worker keeps running)."""

    def prepare(self, conf, context):
        self.seen = set()

    def execute(self, tup, collector):
        n = tup.values[0]
        if n == 3 and n not in self.seen:
            self.seen.add(n)
            raise ReportedFailedException(f"bad tuple {n}")
'''


def test_a_reported_error_reaches_nimbus_through_the_supervisor(zk_conf, tmp_path, monkeypatch):
    """Worker -> heartbeat.json -> supervisor -> gRPC -> Nimbus -> ZooKeeper -> topology info."""
    from squall.client.nimbus_client import NimbusClient
    from squall.client.submitter import pack_directory
    from squall.client.topology_proto import to_proto
    from squall.deploy.net import free_port
    from squall.nimbus.nimbus import Nimbus
    from squall.nimbus.servicer import serve
    from squall.supervisor.fetch import grpc_fetcher

    package = tmp_path / "package"
    package.mkdir()
    (package / "error_topo.py").write_text(ERROR_TOPO)
    shutil.copy(os.path.join(HERE, "topos.py"), package)
    monkeypatch.syspath_prepend(str(package))
    from error_topo import ReportOnce

    events = tmp_path / "events"
    events.mkdir()
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("check", ReportOnce(), 1).shuffle_grouping("numbers")
    conf = dict(zk_conf, **{"nimbus.seeds": ["127.0.0.1"], "nimbus.grpc.port": free_port(),
                            "storm.local.hostname": "127.0.0.1",
                            "supervisor.heartbeat.frequency.secs": 0.3})
    nimbus = Nimbus(dict(conf, **{"storm.local.dir": str(tmp_path / "nimbus")})).start()
    server = serve(nimbus, "127.0.0.1", nimbus.port)
    sup = Supervisor(dict(conf, **{"storm.local.dir": str(tmp_path / "sup"),
                                   "supervisor.slots.ports": free_ports(1)}),
                     fetch_topology=grpc_fetcher(conf))
    try:
        assert nimbus.wait_for_leadership(10)
        sup.start()
        with NimbusClient(conf) as client:
            location = client.upload(pack_directory(package, tmp_path / "package.zip"))
            tid = client.submit("errors", location, json.dumps({
                "topology.workers": 1, "topology.stats.freq.secs": 0.2,
                "test.events.dir": str(events), "test.spout.count": 10}),
                to_proto(b.create_topology()))
            poll_for(lambda: client.topology_info(topology_id=tid).errors, timeout=20,
                     what="the reported error in GetTopologyInfo")
            time.sleep(1.0)  # three more heartbeat rounds: the error is not sent again
            (e,) = client.topology_info(topology_id=tid).errors
        assert e.component == "check" and "bad tuple 3" in e.error and e.host == "127.0.0.1"
        assert e.port == sup.ports[0] and e.time_secs > 0
    finally:
        sup.close("test over")
        server.stop(grace=0).wait(5)
        nimbus.close("test over")
