"""Supervisor reconcile: assignments and worker events in, kill/launch instructions out."""

import itertools
import random

import pytest

from squall.supervisor.reconcile import (RUNNING, STARTING, Changes, KillWorker, LaunchWorker,
                                         RestartDecision, RestartPolicy, RunningWorker,
                                         WorkerSpec, describe_exit, diff, plan, spec_version)

import event_table
from event_table import calls

T = "wc-1-1700000000"
U = "other-2-1700000100"
TIMEOUT = 5.0


def spec(port, tasks=(1, 2), topology=T, **kw):
    return WorkerSpec.of(topology, port, tasks, **kw)


def alive(s, pid, started_at=0.0, hb=None, state=RUNNING):
    """A running worker launched from spec ``s``."""
    return RunningWorker(s.topology_id, s.port, pid, s.version, started_at, hb, state)


def kill(port, pid, reason, topology=T, failed=False):
    return KillWorker(port, pid, reason, topology_id=topology, failed=failed)


def by_port(*items):
    return {i.port: i for i in items}


@pytest.fixture
def policy():
    p = RestartPolicy(max_attempts=3, window_secs=100.0, backoff_base=0.5, backoff_max=4.0,
                      stable_secs=10.0)
    yield p
    p.validate_state()


def check_partition(changes: Changes, desired, running):
    """Every running port is killed or kept, never both; kept ones are desired; the rest start."""
    assert set(changes.to_kill) | set(changes.to_keep) == set(running)
    assert not set(changes.to_kill) & set(changes.to_keep)
    assert set(changes.to_keep) <= set(desired)
    assert set(changes.to_start) == set(desired) - set(changes.to_keep)


# -- one sync round: (what happened, desired, running, now) -> instructions ------------------

A, B, C = spec(6700, (1, 2)), spec(6701, (3, 4)), spec(6702, (5,))
A2 = spec(6700, (1, 2, 7))          # same port, other tasks
A_OTHER = spec(6700, (1, 2), topology=U)

ROUNDS = [
    ("nothing assigned, nothing running",
     {}, {}, 10.0, []),
    ("new assignment launches every worker in port order",
     by_port(C, A, B), {}, 10.0, [LaunchWorker(A), LaunchWorker(B), LaunchWorker(C)]),
    ("healthy workers are kept",
     by_port(A, B), by_port(alive(A, 100, hb=9.0), alive(B, 101, hb=8.0)), 10.0, []),
    ("assignment removed kills the worker",
     {}, by_port(alive(A, 100, hb=9.0)), 10.0,
     [kill(6700, 100, f"no longer assigned: topology {T} has no worker on port 6700")]),
    ("changed tasks on the same port: kill, then launch the new spec",
     by_port(A2), by_port(alive(A, 100, hb=9.0)), 10.0,
     [kill(6700, 100, f"assignment changed (version {A.version} -> {A2.version})"),
      LaunchWorker(A2)]),
    ("port given to another topology: kill, then launch",
     by_port(A_OTHER), by_port(alive(A, 100, hb=9.0)), 10.0,
     [kill(6700, 100, f"port 6700 is now assigned to topology {U} (was {T})"),
      LaunchWorker(A_OTHER)]),
    ("dead heartbeat kills as a failure; no relaunch before the exit is reported",
     by_port(A, B), by_port(alive(A, 100, hb=4.0), alive(B, 101, hb=9.5)), 10.0,
     [kill(6700, 100, "heartbeat is 6.0s old (timeout 5s): worker hung", failed=True)]),
    ("a heartbeat exactly at the timeout is still alive",
     by_port(A), by_port(alive(A, 100, hb=5.0)), 10.0, []),
    ("no heartbeat yet, within the start timeout: keep",
     by_port(A), by_port(alive(A, 100, started_at=6.0, hb=None, state=STARTING)), 10.0, []),
    ("no heartbeat long after launch kills as a failure",
     by_port(A), by_port(alive(A, 100, started_at=1.0, hb=None, state=STARTING)), 10.0,
     [kill(6700, 100, "no heartbeat 9.0s after launch (start timeout 5s)", failed=True)]),
    ("reported crashed but still alive kills as a failure",
     by_port(A), by_port(alive(A, 100, hb=9.9, state="crashed")), 10.0,
     [kill(6700, 100, "worker reported state 'crashed' but its process is still alive",
           failed=True)]),
    ("mixed: kills first (port order), then launches (port order)",
     by_port(C, A2), by_port(alive(B, 101, hb=9.0), alive(A, 100, hb=9.0)), 10.0,
     [kill(6700, 100, f"assignment changed (version {A.version} -> {A2.version})"),
      kill(6701, 101, f"no longer assigned: topology {T} has no worker on port 6701"),
      LaunchWorker(A2), LaunchWorker(C)]),
]


@pytest.mark.parametrize("what,desired,running,now,expected", ROUNDS, ids=[r[0] for r in ROUNDS])
def test_round(policy, what, desired, running, now, expected):
    assert plan(desired, running, now, TIMEOUT, policy) == expected
    check_partition(diff(desired, running, now, TIMEOUT), desired, running)


def test_diff_dead_heartbeat_is_both_killed_and_to_start():
    running = by_port(alive(A, 100, hb=1.0))
    changes = diff(by_port(A), running, 10.0, TIMEOUT)
    assert changes == Changes(
        to_kill={6700: kill(6700, 100, "heartbeat is 9.0s old (timeout 5s): worker hung",
                            failed=True)},
        to_keep={}, to_start={6700: A})


def test_start_timeout_can_be_longer_than_the_heartbeat_timeout(policy):
    running = by_port(alive(A, 100, started_at=0.0, hb=None, state=STARTING))
    assert plan(by_port(A), running, 10.0, TIMEOUT, policy, start_timeout=30.0) == []
    assert plan(by_port(A), running, 31.0, TIMEOUT, policy, start_timeout=30.0) == \
        [kill(6700, 100, "no heartbeat 31.0s after launch (start timeout 30s)", failed=True)]


def test_ordering_does_not_depend_on_dict_order(policy):
    specs = [spec(p, (p,)) for p in range(6700, 6710)]
    olds = [alive(spec(p, (p, 99)), 1000 + p, hb=9.0) for p in range(6705, 6715)]
    expected = plan(by_port(*specs), by_port(*olds), 10.0, TIMEOUT, policy)
    rng = random.Random(7)
    for _ in range(20):
        rng.shuffle(specs)
        rng.shuffle(olds)
        assert plan(by_port(*specs), by_port(*olds), 10.0, TIMEOUT, policy) == expected
    kinds = [type(i) for i in expected]
    assert kinds == sorted(kinds, key=lambda k: k is LaunchWorker)  # every kill before any launch


def test_misfiled_port_is_refused():
    with pytest.raises(ValueError, match="port 6701 filed under port 6700"):
        diff({6700: B}, {}, 0.0, TIMEOUT)


# -- restart policy: (event, expected answer) tables --------------------------------------

KEY = (T, 6700)


def play(policy, table):
    event_table.play(calls(policy), table)


def test_backoff_doubles_from_half_a_second_to_the_cap(policy):
    assert [policy.backoff(n) for n in range(1, 7)] == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    default = RestartPolicy()
    assert [default.backoff(n) for n in (1, 2, 6, 7, 10, 1000)] == [0.5, 1.0, 16.0, 30.0, 30.0, 30.0]


def test_backoff_grows_then_gives_up_after_max_attempts(policy):
    w = f"worker of topology {T} on port 6700"
    play(policy, [
        (("on_launch", KEY, 0.0, "v1"), None),
        (("on_exit", KEY, 1.0, 20),
         RestartDecision(1.5, False, 1, f"{w} exited with code 20 after 1.0s up; restart 1/3 in 0.5s")),
        (("blocked", KEY, 1.2, "v1"), "backing off: relaunch in 0.3s"),
        (("blocked", KEY, 1.5, "v1"), None),
        (("on_launch", KEY, 1.5, "v1"), None),
        (("on_exit", KEY, 2.0, -9),
         RestartDecision(3.0, False, 2, f"{w} was killed by SIGKILL after 0.5s up; restart 2/3 in 1s")),
        (("on_launch", KEY, 3.0, "v1"), None),
        (("on_exit", KEY, 3.0, 1),
         RestartDecision(5.0, False, 3, f"{w} exited with code 1 after 0.0s up; restart 3/3 in 2s")),
        (("on_launch", KEY, 5.0, "v1"), None),
        (("on_exit", KEY, 6.0, 20),
         RestartDecision(None, True, 4, f"{w} exited with code 20 after 1.0s up; giving up after "
                                        "4 failures within 100s (max 3 restarts)")),
        (("blocked", KEY, 1000.0, "v1"),
         f"gave up: {w} exited with code 20 after 1.0s up; giving up after 4 failures "
         "within 100s (max 3 restarts)"),
        (("next_restart_at", 6.0), None),
    ])


def test_attempts_reset_after_a_stable_run(policy):
    for t, expected_attempt in [(1.0, 1), (3.0, 2), (6.0, 3)]:
        policy.on_launch(KEY, t - 1.0, "v1")
        assert policy.on_exit(KEY, t, 1).attempt == expected_attempt
    assert policy.attempts(KEY) == 3
    policy.on_launch(KEY, 20.0, "v1")
    decision = policy.on_exit(KEY, 30.0, -15)  # up 10 s = stable_secs: a fresh failure
    assert (decision.attempt, decision.restart_at, decision.give_up) == (1, 30.5, False)
    assert policy.attempts(KEY) == 1


def test_failures_older_than_the_window_are_forgotten(policy):
    times = [0.0, 60.0, 99.0, 150.0]  # the first has left the 100 s window by t=150
    for t in times:
        policy.on_launch(KEY, t - 1.0, "v1")
        decision = policy.on_exit(KEY, t, 1)
    assert (decision.attempt, decision.give_up) == (3, False)


def test_a_new_assignment_version_is_not_held_back_by_the_old_ones_failures(policy):
    for t in (1.0, 2.0, 3.0, 4.0):
        policy.on_launch(KEY, t - 0.5, "v1")
        policy.on_exit(KEY, t, 20)
    assert policy.blocked(KEY, 100.0, "v1").startswith("gave up")
    assert policy.blocked(KEY, 100.0, "v2") is None
    policy.on_launch(KEY, 100.0, "v2")
    assert policy.attempts(KEY) == 0
    assert policy.on_exit(KEY, 101.0, 20).attempt == 1


def test_next_restart_at_and_forgetting(policy):
    other = (T, 6701)
    policy.on_launch(KEY, 0.0)
    policy.on_launch(other, 0.0)
    policy.on_exit(KEY, 1.0, 1)     # due at 1.5
    policy.on_exit(other, 1.2, 1)   # due at 1.7
    assert policy.next_restart_at(1.2) == 1.5
    assert policy.next_restart_at(1.6) == 1.7
    assert policy.next_restart_at(2.0) is None
    policy.retain([other])
    assert policy.attempts(KEY) == 0 and policy.attempts(other) == 1
    policy.forget(other)
    assert policy.next_restart_at(0.0) is None


def test_policy_rejects_nonsense_limits():
    with pytest.raises(ValueError):
        RestartPolicy(backoff_base=2.0, backoff_max=1.0)
    with pytest.raises(ValueError):
        RestartPolicy(max_attempts=-1)


@pytest.mark.parametrize("code,text", [
    (0, "exited with code 0"), (20, "exited with code 20"), (-9, "was killed by SIGKILL"),
    (-15, "was killed by SIGTERM"), (-200, "was killed by signal 200"),
    (None, "vanished (exit code unknown)"),
])
def test_describe_exit(code, text):
    assert describe_exit(code) == text


# -- a fake daemon: instructions executed, pids deterministic (Heron's MockExecutor) ---------


class FakeSupervisor:
    """Executes plans the way the daemon does, with fake processes."""

    def __init__(self, policy):
        self.policy = policy
        self.running: dict[int, RunningWorker] = {}
        self.pids = itertools.count(1000)
        self.log: list[str] = []

    def sync(self, desired, now):
        for inst in plan(desired, self.running, now, TIMEOUT, self.policy):
            if isinstance(inst, KillWorker):
                w = self.running.pop(inst.port)
                self.log.append(f"kill {inst.port} pid {inst.pid}")
                if inst.failed:
                    self.policy.on_exit(w.key, now, -15)
            elif isinstance(inst, LaunchWorker):
                s = inst.spec
                self.running[s.port] = RunningWorker(s.topology_id, s.port, next(self.pids),
                                                     s.version, now)
                self.policy.on_launch(s.key, now, s.version)
                self.log.append(f"launch {s.port} pid {self.running[s.port].pid}")
            else:
                raise TypeError(inst)

    def beat(self, port, now):
        w = self.running[port]
        self.running[port] = RunningWorker(w.topology_id, w.port, w.pid, w.version,
                                           w.started_at, now, RUNNING)

    def exited(self, port, now, code):
        w = self.running.pop(port)
        return self.policy.on_exit(w.key, now, code)


def test_hung_worker_is_killed_then_relaunched_after_the_backoff(policy):
    sup = FakeSupervisor(policy)
    desired = by_port(A)
    sup.sync(desired, 0.0)
    sup.beat(6700, 1.0)
    sup.sync(desired, 5.0)          # heartbeat 4 s old: fine
    sup.sync(desired, 6.5)          # 5.5 s old: hung -> killed, exit reported
    sup.sync(desired, 6.9)          # backing off until 7.0
    sup.sync(desired, 7.0)
    assert sup.log == ["launch 6700 pid 1000", "kill 6700 pid 1000", "launch 6700 pid 1001"]


def test_crash_loop_backs_off_and_stops_at_max_attempts(policy):
    sup = FakeSupervisor(policy)
    desired = by_port(A)
    now, launches = 0.0, []
    for _ in range(10):
        sup.sync(desired, now)
        if 6700 in sup.running:
            launches.append(now)
            decision = sup.exited(6700, now + 0.1, 20)
            if decision.give_up:
                break
            now = decision.restart_at
        else:
            now += 0.05
    assert launches == pytest.approx([0.0, 0.6, 1.7, 3.8])  # waits of 0.5, 1, 2 after 0.1 s runs
    sup.sync(desired, 1000.0)
    assert 6700 not in sup.running
    sup.sync(by_port(A2), 1000.0)   # Nimbus reassigns: the new version launches at once
    assert sup.running[6700].version == A2.version


def test_spec_identity():
    assert spec(6700, (5, 1, 2)).tasks == (1, 2, 5)
    assert spec(6700, (5, 1, 2)) == spec(6700, [2, 1, 5])
    assert spec(6700, (1, 2)).version != spec(6700, (1, 3)).version
    assert spec(6700, (1,), payload={"a": 1}).version != spec(6700, (1,), payload={"a": 2}).version
    # version_data narrows what restarts the worker; payload never enters equality.
    x = spec(6700, (1,), payload={"peers": [1]}, version_data={"conf": 1})
    y = spec(6700, (1,), payload={"peers": [2]}, version_data={"conf": 1})
    assert x == y and hash(x) == hash(y)
    assert spec_version(T, [2, 1]) == spec_version(T, (1, 2))
    with pytest.raises(TypeError):
        spec_version(T, [1], object())
