"""The Supervisor's sync loop on in-memory cluster state with fake processes (no ZK, no forks)."""

from __future__ import annotations

import itertools
import json
import os
import signal

import pytest

from squall.client.contract import SupervisorMark
from squall.client.memory_cluster_state import InMemoryClusterState, MemoryStore
from squall.supervisor.reconcile import RestartPolicy
from squall.supervisor.supervisor import Supervisor
from supervisor_fixtures import HOST, T, Clock, assign, fetch


class FakeProc:
    """A Popen stand-in: alive until the test ``exit`` s it or the supervisor signals it."""

    def __init__(self, pid, cmd, log_path):
        self.pid, self.cmd, self.log_path = pid, cmd, log_path
        self.returncode = None
        self.signals = []

    def poll(self):
        return self.returncode

    def wait(self, timeout=None):
        assert self.returncode is not None, "a fake that ignores SIGTERM would block"
        return self.returncode

    def send_signal(self, sig):
        self.signals.append(sig)
        self.returncode = -sig

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def exit(self, code, stderr=""):
        with open(self.log_path, "a") as fh:
            fh.write(stderr)
        self.returncode = code


@pytest.fixture
def env(tmp_path):
    store = MemoryStore()
    nimbus = InMemoryClusterState(store=store)
    pids = itertools.count(4001)
    spawned = []

    def spawn(cmd, log_path, env):
        p = FakeProc(next(pids), cmd, log_path)
        p.env = env
        spawned.append(p)
        return p

    clock = Clock()
    conf = {"storm.local.dir": str(tmp_path), "supervisor.slots.ports": [6700, 6701],
            "storm.local.hostname": HOST}
    sup = Supervisor(conf, cluster_state=InMemoryClusterState(store=store), fetch_topology=fetch,
                     spawn=spawn, clock=clock,
                     policy=RestartPolicy(max_attempts=3, backoff_base=1.0, backoff_max=8.0))
    yield sup, nimbus, spawned, clock
    sup.close("test over")
    sup.policy.validate_state()


def alive(spawned):
    return sorted(p.pid for p in spawned if p.returncode is None)


def test_registers_with_its_slots_and_keeps_its_id_across_restarts(env, tmp_path):
    sup, nimbus, _, _ = env
    sup.register()
    info = nimbus.supervisors()[sup.id]
    assert info["host"] == HOST and info["slots"] == [6700, 6701] and info["used_slots"] == []
    again = Supervisor({"storm.local.dir": str(tmp_path), "supervisor.slots.ports": [6700]},
                       cluster_state=InMemoryClusterState())
    assert again.id == sup.id
    again.close()


def test_assignment_appears_launches_only_its_own_ports(env):
    sup, nimbus, spawned, _ = env
    sup.sync()
    assert spawned == []
    assign(nimbus, sup.id)
    sup.sync()
    assert [p.pid for p in spawned] == [4001, 4002]
    assert sorted(sup.procs) == [6700, 6701]
    assert nimbus.supervisors()[sup.id]["used_slots"] == [6700, 6701]
    wdir = sup.files.worker_dir(T, 6700)
    # The worker follows this supervisor (supervisor.json) and outlives it by adopt.secs.
    assert spawned[0].cmd[-6:] == ["--topology-dir", os.path.join(sup.files.stormdist, T),
                                   "--worker-dir", wdir, "--adopt-secs", "10"]
    mark = SupervisorMark.read(wdir)
    assert (mark.pid, mark.supervisor_id) == (os.getpid(), sup.id) and mark.alive()
    assert spawned[0].log_path == sup.files.log_path(T, 6700) != spawned[1].log_path
    with open(os.path.join(wdir, "assignment.json")) as fh:
        a = json.load(fh)
    assert a["worker_id"] == f"{HOST}:6700" and a["port"] == 6700
    assert a["workers"][f"{HOST}:6700"] == [1, 2] and "10.0.0.9:6700" in a["workers"]
    assert a["conf"]["test.key"] == T and a["conf"]["topology.name"] == "wc"
    with open(os.path.join(wdir, "status")) as fh:
        assert fh.read().strip() == "ACTIVE"
    sup.sync()  # nothing changed: nothing launched again
    assert len(spawned) == 2


def test_watch_marks_the_loop_dirty(env):
    sup, nimbus, _, _ = env
    sup.sync()
    sup._dirty.clear()
    assign(nimbus, sup.id)
    assert sup._dirty.is_set()


def test_assignment_removed_kills_workers_and_removes_files(env):
    sup, nimbus, spawned, _ = env
    assign(nimbus, sup.id)
    sup.sync()
    nimbus.remove_storm(T)
    sup.sync()
    assert alive(spawned) == []
    assert [p.signals for p in spawned] == [[signal.SIGTERM], [signal.SIGTERM]]
    assert sup.procs == {}
    assert not os.path.exists(sup.files.worker_dir(T, 6700))
    assert not os.path.exists(os.path.join(sup.files.stormdist, T))
    assert nimbus.supervisors()[sup.id]["used_slots"] == []
    sup.sync()
    assert len(spawned) == 2  # no relaunch


def test_worker_moved_away_is_killed_and_the_other_kept(env):
    sup, nimbus, spawned, _ = env
    assign(nimbus, sup.id)
    sup.sync()
    assign(nimbus, sup.id, workers={f"{HOST}:6700": [1, 2, 3], "10.0.0.9:6700": [4, 5]})
    sup.sync()
    # 6700's own tasks changed, so it restarts with the new assignment; 6701 is gone.
    assert [p.signals for p in spawned[:2]] == [[signal.SIGTERM], [signal.SIGTERM]]
    assert alive(spawned) == [4003]
    assert sorted(sup.procs) == [6700]


def test_peers_moving_rewrite_the_assignment_without_a_restart(env):
    sup, nimbus, spawned, _ = env
    assign(nimbus, sup.id)
    sup.sync()
    moved = {f"{HOST}:6700": [1, 2], f"{HOST}:6701": [3], "10.0.0.8:6702": [4, 5]}
    assign(nimbus, sup.id, workers=moved)
    sup.sync()
    # The worker follows assignment.json itself: no process is stopped or started.
    assert [p.signals for p in spawned] == [[], []] and alive(spawned) == [4001, 4002]
    with open(os.path.join(sup.files.worker_dir(T, 6700), "assignment.json")) as fh:
        assert json.load(fh)["workers"] == moved


def test_dead_worker_restarts_after_the_backoff(env, caplog):
    sup, nimbus, spawned, clock = env
    assign(nimbus, sup.id)
    sup.sync()
    spawned[0].exit(20, "Traceback ...\nValueError: boom\n")
    clock.now += 0.5
    with caplog.at_level("WARNING", logger="squall.supervisor"):
        sup.sync(full=False)
    assert alive(spawned) == [4002]  # backing off (1 s for the first failure)
    line = caplog.text
    assert "pid 4001" in line and "exited with code 20" in line and "ValueError: boom" in line
    assert f"topology {T} on port 6700" in line and "restart 1/3" in line
    clock.now += 0.9
    sup.sync(full=False)
    assert alive(spawned) == [4002]
    clock.now += 0.2
    sup.sync(full=False)
    assert alive(spawned) == [4002, 4003]
    assert sup.procs[6700].proc.pid == 4003
    # A second failure in a row waits twice as long.
    spawned[2].exit(-9)
    sup.sync(full=False)
    clock.now += 1.5
    sup.sync(full=False)
    assert alive(spawned) == [4002]
    clock.now += 0.6
    sup.sync(full=False)
    assert alive(spawned) == [4002, 4004]


def test_status_follows_the_topology(env):
    sup, nimbus, spawned, _ = env
    assign(nimbus, sup.id)
    sup.sync()
    status = os.path.join(sup.files.worker_dir(T, 6701), "status")
    for zk, local in [("inactive", "INACTIVE"), ("active", "ACTIVE"), ("killed", "KILLED")]:
        nimbus.set_storm(T, {"name": "wc", "status": zk})
        sup.sync()
        with open(status) as fh:
            assert fh.read().strip() == local
    assert len(spawned) == 2 and alive(spawned) == [4001, 4002]  # status needs no restart


def test_hung_worker_is_killed_as_failed(env, tmp_path):
    sup, nimbus, spawned, clock = env
    sup.hb_timeout = 5.0
    assign(nimbus, sup.id)
    sup.sync()
    for p in spawned:
        with open(os.path.join(p.cmd[p.cmd.index("--worker-dir") + 1], "heartbeat.json"),
                  "w") as fh:
            json.dump({"pid": p.pid, "time": clock.now, "state": "running"}, fh)
    clock.now += 6.0
    sup.sync(full=False)
    assert alive(spawned) == []
    assert sup.policy.attempts((T, 6700)) == 1  # counted as a failure: restarts back off


def test_close_stops_workers_and_unregisters(env):
    sup, nimbus, spawned, _ = env
    sup.start()
    assign(nimbus, sup.id)
    from zk_fixtures import poll_for
    poll_for(lambda: len(alive(spawned)) == 2, timeout=5, what="launch by the loop thread")
    sup.close("test")
    assert alive(spawned) == []
    assert sup.id not in nimbus.supervisors()


# -- errors forwarded to Nimbus with the worker heartbeats ----------------------------------


class Sender:
    """A ``send_heartbeats`` that records the errors it was given and fails when told to."""

    def __init__(self):
        self.fail = False
        self.sent = []      # per report: port -> error texts
        self.batches = []   # per report: the WorkerError messages

    def __call__(self, msg):
        if self.fail:
            raise ConnectionError("Nimbus away")
        ports = {w.port for w in msg.worker_heartbeats} | {e.error.port for e in msg.errors}
        self.sent.append({p: [e.error.error for e in msg.errors if e.error.port == p]
                          for p in ports})
        self.batches.append(list(msg.errors))


def write_heartbeat(sup, port, pid, errors, state="running"):
    hb = {"pid": pid, "time": 2000.0 + len(errors), "state": state,
          "errors": [{"time": t, "component": "split", "task": 3, "error": text}
                     for t, text in errors]}
    with open(os.path.join(sup.files.worker_dir(T, port), "heartbeat.json"), "w") as fh:
        json.dump(hb, fh)


def test_errors_are_forwarded_once_and_again_after_a_failed_send(env):
    sup, nimbus, spawned, _ = env
    sup.outbox.send = send = Sender()
    assign(nimbus, sup.id)
    sup.sync()
    errors = [(5.0, "e1"), (5.0, "e2")]  # several errors may share a time
    write_heartbeat(sup, 6700, 4001, errors)
    sup.report_heartbeats()
    sup.report_heartbeats()
    assert send.sent == [{6700: ["e1", "e2"]}, {6700: []}]
    errors += [(5.0, "e3"), (6.0, "e4")]
    write_heartbeat(sup, 6700, 4001, errors)
    send.fail = True
    sup.report_heartbeats()  # logged; nothing marked as sent
    send.fail = False
    sup.report_heartbeats()
    sup.report_heartbeats()
    assert send.sent[2:] == [{6700: ["e3", "e4"]}, {6700: []}]
    # The worker keeps only its last 20: what scrolled out is not sent twice.
    errors = errors[2:] + [(7.0, f"n{i}") for i in range(18)]
    write_heartbeat(sup, 6700, 4001, errors)
    sup.report_heartbeats()
    assert send.sent[-1] == {6700: [f"n{i}" for i in range(18)]}


def test_error_info_names_topology_component_task_host_port_and_time(env):
    sup, nimbus, _, _ = env
    sup.outbox.send = send = Sender()
    assign(nimbus, sup.id)
    sup.sync()
    write_heartbeat(sup, 6701, 4002, [(1700000000.75, "ValueError: x")])
    sup.report_heartbeats()
    (we,) = send.batches[0]
    e = we.error
    assert (we.topology_id, e.component, e.error, e.time_secs, e.task, e.host, e.port) == \
        (T, "split", "ValueError: x", 1700000000, 3, HOST, 6701)


def test_a_crashed_workers_last_errors_are_forwarded_once_even_after_its_relaunch(env):
    sup, nimbus, spawned, _ = env
    sup.outbox.send = send = Sender()
    assign(nimbus, sup.id)
    sup.sync()
    write_heartbeat(sup, 6700, 4001, [(5.0, "RuntimeError: boom")], state="crashed")
    spawned[0].exit(70)
    sup.sync(full=False)  # reaped: its final heartbeat's errors are taken now
    assert 6700 not in sup.procs
    os.unlink(os.path.join(sup.files.worker_dir(T, 6700), "heartbeat.json"))  # as a relaunch does
    sup.report_heartbeats()
    sup.report_heartbeats()
    assert send.sent == [{6700: ["RuntimeError: boom"]}, {}]
    assert sup.outbox._marks == {}


def test_workers_of_a_topology_share_a_hash_seed_across_restarts(env, monkeypatch):
    """One PYTHONHASHSEED per topology (keyed by its secret), over the supervisor's own: a
    bolt iterating a set emits in the same order after a restart, on every node; one in
    topology.environment wins."""
    from squall.supervisor.supervisor import worker_hash_seed

    monkeypatch.delenv("PYTHONHASHSEED", raising=False)
    sup, nimbus, spawned, _ = env
    assign(nimbus, sup.id)
    sup.sync()
    seeds = {p.env["PYTHONHASHSEED"] for p in spawned}
    assert seeds == {worker_hash_seed(T, {})} and 0 <= int(seeds.pop()) < 2 ** 32
    assert worker_hash_seed(T, {}) != worker_hash_seed(T + "x", {})
    assert worker_hash_seed(T, {"topology.curve.secret.key": "s1"}) != \
        worker_hash_seed(T, {"topology.curve.secret.key": "s2"})
    monkeypatch.setenv("PYTHONHASHSEED", "random")  # the supervisor's own: not the workers'
    spawned[0].exit(1)
    sup.sync()
    sup.clock.now += 60  # past the restart back-off
    sup.sync()
    assert spawned[-1].env["PYTHONHASHSEED"] == worker_hash_seed(T, {}) and len(spawned) == 3
