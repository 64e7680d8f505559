"""Barrier checkpointing: the Topology Master's coordinator as an event table, and a bolt
task's alignment, restore markers and commits (worker/barrier.py, worker/topology_master.py)."""

from __future__ import annotations

import pytest

from squall.client.state import InMemoryKeyValueState
from squall.client.stateful import BARRIER, CHECKPOINT_STREAM_ID, RESTORE, StatefulBolt
from squall.client.tuple import TM_CONTROL_STREAM_ID, Fields, Tuple
from squall.worker import barrier as barrier_mod
from squall.worker.barrier import BoltBarrier
from squall.worker.queue import Backpressure, InQueue, ThreadWaker
from squall.worker.topology_master import (RECOVERING, RUNNING, WAITING, BarrierCoordinator,
                                           Persist, Send)

TASKS = frozenset({1, 2, 3})  # 1 is the spout
SPOUTS = frozenset({1})


def up(c: BarrierCoordinator, now=0.0):
    """Every task says hello, then restores epoch 1: the coordinator runs."""
    for t in sorted(TASKS):
        out = c.hello(t, 100 + t, -1, 0, now)
    assert out == [Persist(-1, 1), Send((1,), ("restore", -1, 1))]
    for t in sorted(TASKS):
        c.on_restored(t, 1, 0, now)
    assert c.phase == RUNNING


# Each row: (event, args, commands expected, phase after)
TABLE = [
    ("hello", (1, 11, -1, 0), [], WAITING),
    ("hello", (2, 12, -1, 0), [], WAITING),
    ("tick", (), [], WAITING),                                  # not every task is up
    ("hello", (3, 13, -1, 0), [Persist(-1, 1), Send((1,), ("restore", -1, 1))], RECOVERING),
    ("restored", (1, 1, 0), [], RECOVERING),
    ("restored", (2, 0, 0), [], RECOVERING),                    # an old epoch: ignored
    ("restored", (2, 1, 0), [], RECOVERING),
    ("restored", (3, 1, 0), [], RUNNING),
    ("tick", (), [], RUNNING),                                  # the interval has not passed
    ("at", 1.0, [Send((1,), ("trigger", 0, 1))], RUNNING),
    ("prepared", (1, 0, 1, 0), [], RUNNING),
    ("prepared", (2, 0, 1, 0), [], RUNNING),
    ("prepared", (3, 5, 1, 0), [], RUNNING),                    # not the checkpoint in flight
    ("prepared", (3, 0, 1, 0), [Persist(0, 1), Send((1, 2, 3), ("commit", 0))], RUNNING),
    ("hello", (2, 12, 1, 0), [], RUNNING),                      # a live task's hello
    ("at", 2.0, [Send((1,), ("trigger", 1, 1))], RUNNING),
    ("prepared", (1, 1, 1, 0), [], RUNNING),
    ("hello", (3, 99, -1, 0),                                   # task 3 restarted
     [Persist(0, 2), Send((1,), ("restore", 0, 2))], RECOVERING),
    ("prepared", (2, 1, 1, 0), [], RECOVERING),                 # the abandoned checkpoint
    ("restored", (1, 2, 0), [], RECOVERING),
    ("restored", (2, 2, 0), [], RECOVERING),
    ("restored", (3, 2, 0), [], RUNNING),
    ("at", 3.5, [Send((1,), ("trigger", 1, 2))], RUNNING),
    ("prepared", (1, 1, 2, 0), [], RUNNING),
    ("prepared", (2, 1, 2, 3),                                  # its worker dropped frames
     [Persist(0, 3), Send((1,), ("restore", 0, 3))], RECOVERING),
    ("at", 40.0,                                                # recovery took too long
     [Persist(0, 4), Send((1,), ("restore", 0, 4))], RECOVERING),
    ("failed", (2, 3, 0), [], RECOVERING),                      # an old epoch's failure
    ("failed", (42, 4, 0), [], RECOVERING),                     # not a task of the topology
    ("restored", (1, 4, 0), [], RECOVERING),
    ("restored", (2, 4, 0), [], RECOVERING),
    ("restored", (3, 4, 0), [], RUNNING),
    ("failed", (3, 4, 0),                                       # a tuple of this epoch failed
     [Persist(0, 5), Send((1,), ("restore", 0, 5))], RECOVERING),
    ("failed", (2, 5, 0),                                       # ... and the replay failed too
     [Persist(0, 6), Send((1,), ("restore", 0, 6))], RECOVERING),
]


def test_coordinator_event_table():
    c = BarrierCoordinator(TASKS, SPOUTS, interval=1.0, timeout=30.0)
    now = 0.0
    for i, (event, args, expected, phase) in enumerate(TABLE):
        if event == "at":
            now = args
            out = c.tick(now)
        elif event == "tick":
            out = c.tick(now)
        elif event == "hello":
            out = c.hello(*args, now)
        elif event == "restored":
            out = c.on_restored(*args, now)
        elif event == "failed":
            out = c.on_failed(*args, now)
        else:
            out = c.on_prepared(*args, now)
        assert out == expected, f"row {i} {event}{args}: {out}"
        assert c.phase == phase, f"row {i}: phase {c.phase}, want {phase}"
    assert (c.committed, c.epoch, c.completed, c.recoveries) == (0, 6, 1, 6)


def test_a_checkpoint_that_does_not_complete_in_time_recovers():
    c = BarrierCoordinator(TASKS, SPOUTS, interval=1.0, timeout=5.0)
    up(c)
    assert c.tick(1.0) == [Send((1,), ("trigger", 0, 1))]
    assert c.tick(5.9) == []
    assert c.tick(6.1) == [Persist(-1, 2), Send((1,), ("restore", -1, 2))]


# -- a bolt task -------------------------------------------------------------------------

class Out:
    def __init__(self):
        self.emitted = []
        self.stats = type("Stats", (), {"failed": 0})()

    def emit(self, values, stream="default", anchors=None, direct_task=None):
        self.emitted.append((stream, list(values)))
        return []


class FakeExecutor:
    """What BoltBarrier needs of its executor: timers, system sends, the master's task."""

    class WS:
        component_tasks = {"__topology_master": [99]}
        dropped_batches = dropped_tuples = dropped_frames = 0

    def __init__(self):
        self.ws = self.WS()
        self.reports = []
        self.queue = InQueue(4, 0.75, 0.25, Backpressure(), ThreadWaker())  # high mark 3

    def add_timer(self, period, fn):
        pass

    def send_system(self, task, src, stream, values):
        self.reports.append(tuple(values[0][:2]) if values[0][0] != "hello" else ("hello",))


class Context:
    this_component_id = "count"

    def this_sources(self):
        return [("split", "default"), ("split", CHECKPOINT_STREAM_ID)]

    def component_tasks(self, c):
        return [10, 11]  # two channels


class Count(StatefulBolt):
    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.state.put(tup[0], self.state.get(tup[0], 0) + 1)


def word(w, channel):
    return Tuple([w], "split", "default", channel, None, Fields(["word"]))


def mark(txid, action, epoch, channel):
    return Tuple([txid, action, epoch], "split", CHECKPOINT_STREAM_ID, channel, None,
                 Fields(["txid", "action", "epoch"]))


@pytest.fixture
def task(monkeypatch):
    states = {}

    def fake_state(namespace, conf, context=None):
        return states.setdefault(namespace, InMemoryKeyValueState())
    monkeypatch.setattr(barrier_mod, "get_state", fake_state)
    ex, out, bolt = FakeExecutor(), Out(), Count()
    b = BoltBarrier(ex, 5, bolt.execute, out, Context(), {}, bolt, aligned=True)
    b.ex, b.o, b.bolt_obj = ex, out, bolt
    return b


def test_tuples_before_a_channel_restores_are_dropped_then_counted(task):
    task.run(word("a", 10))  # no epoch yet: from the abandoned run
    task.run(mark(-1, RESTORE, 1, 10))
    assert ("restored", 1) not in task.ex.reports  # channel 11 has not restored
    task.run(word("b", 11))  # channel 11 is still in the old run: dropped
    task.run(word("c", 10))
    task.run(mark(-1, RESTORE, 1, 11))
    task.run(word("d", 11))
    assert dict(task.bolt_obj.state.items()) == {"c": 1, "d": 1}
    assert ("restored", 1) in task.ex.reports
    assert task.o.emitted == [(CHECKPOINT_STREAM_ID, [-1, RESTORE, 1])]  # forwarded once


def test_alignment_holds_the_early_channel_until_every_barrier_arrived(task):
    for c in (10, 11):
        task.run(mark(-1, RESTORE, 1, c))
    task.run(word("x", 10))
    task.run(mark(0, BARRIER, 1, 10))  # channel 10 reached checkpoint 0 first ...
    task.run(word("after", 10))        # ... so this belongs after it: held
    task.run(word("y", 11))            # the slow channel's tuples before its barrier count
    assert task.bolt_obj.state.get("after") is None
    task.run(mark(0, BARRIER, 1, 11))
    # The snapshot of checkpoint 0 holds x and y, not "after" (replayed right after).
    assert task.store.state.prepared_txid() == 0
    assert task.store.state._prepared[1] == {"x": 1, "y": 1}
    assert task.bolt_obj.state.get("after") == 1
    assert ("prepared", 0) in task.ex.reports
    assert task.o.emitted[-1] == (CHECKPOINT_STREAM_ID, [0, BARRIER, 1])
    task.run(Tuple([["commit", 0]], "__topology_master", TM_CONTROL_STREAM_ID, 99, None,
                   Fields(["event"])))
    assert task.store.prepared is None
    task.bolt_obj.state.rollback()  # what a later recovery would find committed
    assert dict(task.bolt_obj.state.items()) == {"x": 1, "y": 1}


def test_a_new_epoch_restores_the_last_completed_checkpoint(task):
    for c in (10, 11):
        task.run(mark(-1, RESTORE, 1, c))
    task.run(word("x", 10))
    for c in (10, 11):
        task.run(mark(0, BARRIER, 1, c))
    task.run(word("y", 11))
    task.run(mark(0, RESTORE, 2, 11))  # checkpoint 0 completed; recovery to it
    task.run(word("stale", 10))        # channel 10 is still in epoch 1: dropped
    task.run(mark(0, BARRIER, 1, 10))  # an old epoch's barrier: ignored
    task.run(mark(0, RESTORE, 2, 10))
    task.run(word("z", 10))
    assert dict(task.bolt_obj.state.items()) == {"x": 1, "z": 1}


def test_without_alignment_the_first_barrier_snapshots(monkeypatch, task):
    task.aligned = False
    for c in (10, 11):
        task.run(mark(-1, RESTORE, 1, c))
    task.run(mark(0, BARRIER, 1, 10))
    assert ("prepared", 0) in task.ex.reports
    task.run(word("early", 10))  # not held: it lands in the live state at once
    assert task.bolt_obj.state.get("early") == 1
    task.run(mark(0, BARRIER, 1, 11))  # the second copy does nothing
    assert [r for r in task.ex.reports if r[0] == "prepared"] == [("prepared", 0)]


def test_a_long_alignment_pauses_the_spouts_until_the_slow_barrier_comes(task):
    """Held tuples are bounded like the receive queue: at its high water mark the queue
    counts congested (spouts pause), until alignment ends or a new epoch drops them."""
    q, bp = task.ex.queue, task.ex.queue.bp
    for c in (10, 11):
        task.run(mark(-1, RESTORE, 1, c))
    task.run(mark(0, BARRIER, 1, 10))
    for i in range(2):
        task.run(word(f"w{i}", 10))
    assert not q.congested and not bp.local_congested
    task.run(word("w2", 10))  # the third held tuple: the high water mark
    assert q.congested and bp.local_congested
    q.drain_done()  # the queue itself is empty: still congested while the tuples are held
    assert q.congested
    task.run(mark(0, BARRIER, 1, 11))
    assert not q.congested and not bp.local_congested
    assert task.bolt_obj.state.get("w2") == 1  # replayed after the snapshot
    task.run(mark(1, BARRIER, 1, 10))
    for i in range(3):
        task.run(word(f"v{i}", 10))
    assert q.congested
    task.run(mark(0, RESTORE, 2, 10))  # recovery: the held tuples are dropped
    assert not q.congested and not bp.local_congested and q.pins == 0


def test_a_failed_tuple_asks_for_a_recovery_instead_of_a_checkpoint(task):
    """No acker replays a tuple failed under barrier checkpointing: the task tells the
    master (once an epoch), and sends neither barrier nor prepared for that epoch."""
    for c in (10, 11):
        task.run(mark(-1, RESTORE, 1, c))
    task.run(word("x", 10))
    task.o.stats.failed += 1   # the bolt failed a tuple (a sink's write that did not land)
    for c in (10, 11):
        task.run(mark(0, BARRIER, 1, c))
    assert ("failed", 1) in task.ex.reports and ("prepared", 0) not in task.ex.reports
    assert task.o.emitted == [(CHECKPOINT_STREAM_ID, [-1, RESTORE, 1])]
    task._beat()
    # Said again at each beat until the new epoch comes (the master acts on the first).
    assert task.ex.reports.count(("failed", 1)) == 2
    for c in (10, 11):  # the recovery: a new epoch starts clean
        task.run(mark(-1, RESTORE, 2, c))
    for c in (10, 11):
        task.run(mark(0, BARRIER, 2, c))
    assert ("prepared", 0) in task.ex.reports


class Batching(Count):
    """A sink that writes what it executed only at the checkpoint."""

    held: list

    def flush_before_checkpoint(self, txid):
        for w in self.held:
            self.state.put(w, "written")
        self.held.clear()


def test_a_batching_bolt_writes_before_its_barrier_leaves(monkeypatch):
    monkeypatch.setattr(barrier_mod, "get_state",
                        lambda namespace, conf, context=None: InMemoryKeyValueState())
    ex, out, bolt = FakeExecutor(), Out(), Batching()
    bolt.held = []
    b = BoltBarrier(ex, 5, lambda t: bolt.held.append(t[0]), out, Context(), {}, bolt,
                    aligned=True)
    for c in (10, 11):
        b.run(mark(-1, RESTORE, 1, c))
    b.run(word("x", 10))
    for c in (10, 11):
        b.run(mark(0, BARRIER, 1, c))
    assert not bolt.held and b.store.state._prepared[1] == {"x": "written"}
