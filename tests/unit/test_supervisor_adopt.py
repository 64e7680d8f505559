"""A restarted supervisor takes back the workers its earlier process left running (Storm's
workers outlive their supervisor): found by the pid in their heartbeat and checked by their
command line, followed by pid and start time though they are not its children, judged by
the first sync like any other, and stopped or relaunched as usual. Real processes stand in
for workers (a Python sleeping under a worker's command line), on in-memory cluster state."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from squall.client.contract import (HeartbeatState, SupervisorMark, WorkerHeartbeat,
                                    process_start_time)
from squall.client.memory_cluster_state import InMemoryClusterState, MemoryStore
from squall.supervisor.reconcile import RestartPolicy
from squall.supervisor.supervisor import (AdoptedProcess, Supervisor, kill_workers,
                                          worker_process)
from supervisor_fixtures import HOST, T, Clock, assign, fetch
from zk_fixtures import poll_for

#: A worker stand-in: exits 0 on SIGTERM, as a worker does; says when its handler is set.
SLEEPER = "import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: sys.exit(0)); " \
          "print('ready', flush=True); time.sleep(120)"
STOPPED = 0


def sleeper(*args) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", SLEEPER, *args], stdout=subprocess.PIPE,
                         start_new_session=True)
    assert p.stdout.readline() == b"ready\n"
    return p


class Workers:
    """Launches sleeping Pythons under a worker's command line, as the supervisor's spawn, and
    writes each one's heartbeat as the worker would; keeps the Popen handles so the test (not
    an adopting supervisor, which is not their parent) reaps them."""

    def __init__(self, clock):
        self.clock = clock
        self.procs: list[subprocess.Popen] = []

    def spawn(self, cmd, log_path, env):
        wdir = cmd[cmd.index("--worker-dir") + 1]
        p = sleeper("squall.worker", "--worker-dir", wdir)
        self.procs.append(p)
        self.beat(wdir, p.pid)
        return p

    def beat(self, wdir, pid, state=HeartbeatState.RUNNING):
        WorkerHeartbeat(self.clock(), pid, state, T, f"{HOST}:0").write(wdir)

    def stop_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait()
            p.stdout.close()


@pytest.fixture
def two_runs(tmp_path):
    """(a supervisor, a function making its restarted self, the cluster, the workers)."""
    store = MemoryStore()
    nimbus = InMemoryClusterState(store=store)
    clock = Clock()
    workers = Workers(clock)
    conf = {"storm.local.dir": str(tmp_path), "supervisor.slots.ports": [6700, 6701],
            "storm.local.hostname": HOST, "supervisor.worker.shutdown.sleep.secs": 5}
    made = []

    def supervisor(spawn=workers.spawn):
        sup = Supervisor(conf, cluster_state=InMemoryClusterState(store=store),
                         fetch_topology=fetch, spawn=spawn, clock=clock,
                         policy=RestartPolicy(max_attempts=3, backoff_base=1.0))
        made.append(sup)
        return sup

    yield supervisor, nimbus, workers
    for sup in made:
        sup.close("test over")
    workers.stop_all()


def no_spawn(cmd, log_path, env):
    raise AssertionError(f"launched a worker instead of taking one back: {cmd}")


def crash(sup):
    """The supervisor's process ends without stopping its workers (kill -9, a restart)."""
    sup.stop_workers_on_close = False
    sup.close("kill -9")


def crashed(supervisor, nimbus):
    """A supervisor that launched the assignment's two workers, then crashed."""
    first = supervisor()
    assign(nimbus, first.id)
    first.sync()
    crash(first)
    return first


def test_a_restarted_supervisor_takes_its_running_workers_back(two_runs):
    supervisor, nimbus, workers = two_runs
    first = supervisor()
    assign(nimbus, first.id)
    first.sync()
    pids = {port: p.pid for port, p in first.procs.items()}
    assert len(pids) == 2
    crash(first)
    assert all(p.poll() is None for p in workers.procs), "the workers outlive the supervisor"

    events = []
    second = supervisor(spawn=no_spawn)
    second.on_worker_event = events.append
    second.adopt()
    second.sync()
    second.sync()
    assert {port: p.pid for port, p in second.procs.items()} == pids
    assert all(isinstance(p.proc, AdoptedProcess) for p in second.procs.values())
    assert [(e.kind, e.port, e.pid) for e in events] == [("adopted", port, pid)
                                                         for port, pid in pids.items()]
    # Its workers now follow the new supervisor; its slots are reported used.
    for port in pids:
        assert SupervisorMark.read(second.files.worker_dir(T, port)).supervisor_id == second.id
    assert nimbus.supervisors()[second.id]["used_slots"] == [6700, 6701]


def test_a_taken_back_worker_that_dies_is_reaped_and_relaunched(two_runs):
    supervisor, nimbus, workers = two_runs
    crashed(supervisor, nimbus)
    second = supervisor()
    second.adopt()
    victim = workers.procs[0]
    victim.kill()
    victim.wait()  # reaped by its real parent (here: the test)
    second.sync()
    assert 6700 not in second.procs, "a dead worker taken back must be noticed"
    assert "vanished (exit code unknown)" in second.outbox._restarts[-1][3]
    second.clock.now += 1.0  # the restart backoff
    second.sync()
    assert second.procs[6700].pid == workers.procs[-1].pid != victim.pid
    assert not isinstance(second.procs[6700].proc, AdoptedProcess)


def test_a_taken_back_worker_no_longer_assigned_is_stopped(two_runs):
    supervisor, nimbus, workers = two_runs
    first = crashed(supervisor, nimbus)
    # While the supervisor was away, the topology was rebalanced: port 6701 is no longer its.
    assign(nimbus, first.id, workers={f"{HOST}:6700": [1, 2, 3], "10.0.0.9:6700": [4, 5]})
    second = supervisor()
    second.adopt()
    second.sync()
    # 6700's tasks changed too: stopped and launched again; 6701 stopped for good.
    assert [p.wait(5) for p in workers.procs[:2]] == [STOPPED] * 2
    assert sorted(second.procs) == [6700]
    assert second.procs[6700].pid == workers.procs[2].pid


def test_only_a_live_worker_of_that_very_directory_is_taken_back(two_runs, tmp_path):
    supervisor, nimbus, workers = two_runs
    first = crashed(supervisor, nimbus)
    a, b = (first.files.worker_dir(T, port) for port in (6700, 6701))
    workers.procs[0].kill()
    workers.procs[0].wait()
    workers.beat(b, os.getpid())  # a pid reused by a process that is no worker
    assert worker_process(a) is None and worker_process(b) is None
    second = supervisor()
    second.adopt()
    assert second.procs == {}
    second.sync()  # launched afresh
    assert sorted(p.pid for p in second.procs.values()) == [p.pid for p in workers.procs[2:]]


def test_adopted_process_follows_a_pid_it_did_not_launch():
    p = sleeper()
    try:
        start = process_start_time(p.pid)
        adopted = AdoptedProcess(p.pid, start)
        assert adopted.own_group and adopted.poll() is None and not adopted.gone
        with pytest.raises(subprocess.TimeoutExpired):
            adopted.wait(0.05)
        # A later process given the same pid is not this one: a changed start time is "gone".
        other = AdoptedProcess(p.pid, "1")
        assert other.poll() is None and other.gone
        other.send_signal(signal.SIGTERM)  # not sent: the process with that pid is not it
        assert p.poll() is None
        adopted.send_signal(signal.SIGTERM)
        assert p.wait(5) == 0
        poll_for(lambda: adopted.poll() is None and adopted.gone, timeout=5)
        adopted.kill()  # a no-op once gone: never signals whoever has the pid now
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()
        p.stdout.close()


def test_kill_workers_stops_what_a_stopped_supervisor_left(two_runs):
    supervisor, nimbus, workers = two_runs
    first = crashed(supervisor, nimbus)
    lines = kill_workers(first.conf)
    assert sorted(lines) == sorted(
        f"worker of topology {T} on port {port} (pid {p.pid}): stopped"
        for port, p in zip((6700, 6701), workers.procs))
    assert [p.wait(5) for p in workers.procs] == [STOPPED] * 2
    assert kill_workers(first.conf) == []
