"""Nimbus's worker-liveness monitor in-process against a real ZooKeeper, with two fake
supervisors whose worker heartbeats the test sends (as SendSupervisorWorkerHeartbeats would)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from squall.deploy.net import free_port
from squall.nimbus.nimbus import Nimbus
from squall.proto import nimbus_pb2 as pb
from test_nimbus import topology
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

TIMEOUT, MONITOR = 2.0, 0.5


@pytest.fixture
def nimbus(zk_conf, tmp_path, cluster_state):
    for sid, ports in (("sup-1", [6700, 6701]), ("sup-2", [6702, 6703])):
        cluster_state.register_supervisor(sid, {"host": "127.0.0.1", "slots": ports})
    conf = dict(zk_conf, **{"nimbus.grpc.port": free_port(), "storm.local.dir": str(tmp_path),
                            "nimbus.monitor.freq.secs": MONITOR,
                            "nimbus.task.timeout.secs": TIMEOUT, "nimbus.task.launch.secs": 0})
    n = Nimbus(conf).start()
    assert n.wait_for_leadership(10)
    try:
        yield n
    finally:
        n.close(reason="test")


class Beats:
    """Sends heartbeats every 0.2 s for every assigned slot of the topology except ``stale``."""

    def __init__(self, nimbus, state):
        self.nimbus, self.state = nimbus, state
        self.stale: set[str] = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.wait(0.2):
            by_sup: dict[str, list] = {"sup-1": [], "sup-2": []}
            for tid in self.state.assignment_ids():
                found = self.state.get_assignment(tid)
                if not found:
                    continue
                for hp, sid in found[0]["slots"].items():
                    if hp not in self.stale:
                        by_sup.setdefault(sid, []).append(pb.WorkerHeartbeat(
                            topology_id=tid, port=int(hp.rsplit(":", 1)[1]),
                            time_secs=time.time(),
                            tasks=[pb.TaskStats(task=t, component="x", acked=5)
                                   for t in found[0]["workers"][hp]]))
            for sid, hbs in by_sup.items():
                self.nimbus.record_heartbeats(sid, hbs)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(5)


def submit(nimbus, name, workers):
    tid = nimbus.submit(name, "", json.dumps({"topology.workers": workers}), topology())
    return tid, nimbus.cluster_state.get_assignment(tid)[0]


def test_stale_worker_is_reassigned_and_only_its_executors_move(nimbus, cluster_state):
    with Beats(nimbus, cluster_state) as beats:
        tid, before = submit(nimbus, "stale", 3)
        assert len(before["workers"]) == 3
        time.sleep(TIMEOUT + 2 * MONITOR)  # heartbeats flowing: nothing moves
        assert cluster_state.get_assignment(tid)[0]["workers"] == before["workers"]
        stale = sorted(before["workers"])[0]
        beats.stale.add(stale)
        t0 = time.monotonic()
        after = poll_for(lambda: (lambda r: r if stale not in r["workers"] else None)(
            cluster_state.get_assignment(tid)[0]), timeout=TIMEOUT + MONITOR + 3,
            what="stale slot reassigned")
        took = time.monotonic() - t0
        assert took <= TIMEOUT + MONITOR + 1.0, took
        # Every task of a live worker stays where it was; only the stale worker's tasks move.
        slot_of = lambda r: {t: hp for hp, ts in r["workers"].items() for t in ts}  # noqa: E731
        b, a = slot_of(before), slot_of(after)
        assert set(a) == set(b)
        assert {t for t in b if a[t] != b[t]} == set(before["workers"][stale])
        assert after["revision"] == before["revision"] + 1
        info = nimbus.topology_info(topology_id=tid)
        assert sum(e.get("acked", 0) for e in info["executors"]) > 0  # heartbeat stats folded in


def test_lost_supervisor_moves_its_executors(nimbus, cluster_state):
    with Beats(nimbus, cluster_state):
        tid, before = submit(nimbus, "lost", 2)
        assert set(before["slots"].values()) == {"sup-1", "sup-2"}
        kept = {hp: t for hp, t in before["workers"].items() if before["slots"][hp] == "sup-2"}
        cluster_state._delete_trees([cluster_state.paths.supervisor("sup-1")])
        t0 = time.monotonic()
        after = poll_for(lambda: (lambda r: r if set(r["slots"].values()) == {"sup-2"} else None)(
            cluster_state.get_assignment(tid)[0]), timeout=5, what="moved to sup-2")
        # Missing for one monitor round (a restarting supervisor's node is replaced, not
        # lost), found so at the next: two rounds.
        assert time.monotonic() - t0 <= 2 * MONITOR + 1.0
        for hp, tasks in kept.items():
            assert after["workers"][hp] == tasks
        assert sorted(t for ts in after["workers"].values() for t in ts) == \
            sorted(t for ts in before["workers"].values() for t in ts)


def test_silent_supervisor_slots_are_dead(nimbus, cluster_state):
    """A supervisor that reported before and then went silent (its ZooKeeper session not
    expired yet) loses its slots after the timeout: none of its free slots are used."""
    with Beats(nimbus, cluster_state) as beats:
        tid, before = submit(nimbus, "silent", 2)
        time.sleep(0.5)
        sup1 = [hp for hp, s in before["slots"].items() if s == "sup-1"]
        beats.stale.update(sup1)
        orig = nimbus.record_heartbeats
        nimbus.record_heartbeats = lambda sid, hbs: None if sid == "sup-1" else orig(sid, hbs)
        after = poll_for(lambda: (lambda r: r if set(r["slots"].values()) == {"sup-2"} else None)(
            cluster_state.get_assignment(tid)[0]), timeout=TIMEOUT + MONITOR + 3,
            what="moved off the silent supervisor")
        assert len(after["workers"]) == 2


def test_heartbeat_errors_reach_zookeeper_and_topology_info_bounded(nimbus, cluster_state):
    from squall.client.cluster_state import MAX_ERRORS_PER_COMPONENT
    tid, record = submit(nimbus, "errs", 1)
    hp = next(iter(record["workers"]))
    port = int(hp.rsplit(":", 1)[1])

    def beat(errors, topology_id=tid):
        nimbus.record_heartbeats(record["slots"][hp], [pb.WorkerHeartbeat(
            topology_id=topology_id, port=port, time_secs=time.time())], [
            pb.WorkerError(topology_id=topology_id, error=pb.ErrorInfo(
                component=c, error=text, time_secs=1700000000 + i, host="h1", port=port, task=2))
            for i, (c, text) in enumerate(errors)])

    beat([("record", f"ValueError: {i}") for i in range(12)] + [("numbers", "IOError: x")])
    stored = cluster_state.errors(tid, "record")
    assert [e["error"] for e in stored] == [f"ValueError: {i}" for i in range(2, 12)]
    assert len(stored) == MAX_ERRORS_PER_COMPONENT
    assert (stored[0]["host"], stored[0]["port"], stored[0]["task"]) == ("h1", port, 2)
    info = nimbus.topology_info(topology_id=tid)
    assert {(e["component"], e["error"]) for e in info["errors"]} == \
        {("record", f"ValueError: {i}") for i in range(2, 12)} | {("numbers", "IOError: x")}
    # Heartbeats without errors write nothing; an unknown topology's errors are not stored.
    version = cluster_state._read(cluster_state.paths.errors(tid, "record"), None)[1]
    beat([])
    beat([("record", "late")], topology_id="gone-1-1")
    assert cluster_state._read(cluster_state.paths.errors(tid, "record"), None)[1] == version
    assert cluster_state.errors("gone-1-1") == []
