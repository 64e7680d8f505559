"""The spout's progressive wait: how long the worker's loop may sleep after next_tuple
calls in a row emitted nothing (executor.spout_wait, an event table)."""

import pytest

from squall.client import config as cfg
from collections import deque

from squall.worker.executor import (BACKLOG, backlogged, drain_first, dry_wait_until,
                                    next_empty_streak, spout_wait)

MS = 0.001


@pytest.mark.parametrize("first, most, empty, wait", [
    (1 * MS, 50 * MS, 0, 0.0),       # it just emitted: no sleep
    (1 * MS, 50 * MS, 1, 1 * MS),    # the first empty call: the first sleep
    (1 * MS, 50 * MS, 2, 2 * MS),    # doubling while it goes on emitting nothing
    (1 * MS, 50 * MS, 6, 32 * MS),
    (1 * MS, 50 * MS, 7, 50 * MS),   # capped
    (1 * MS, 50 * MS, 10_000, 50 * MS),  # a long idle spell: no overflow, still capped
    (0.0, 50 * MS, 5, 0.0),          # 0: polled again at once
    (5 * MS, 2 * MS, 1, 2 * MS),     # a first sleep above the cap: the cap
])
def test_the_wait_doubles_from_the_first_sleep_to_the_cap(first, most, empty, wait):
    assert spout_wait(first, most, empty) == pytest.approx(wait)


def test_the_defaults_sleep_one_ms_first_as_storm_does():
    d = cfg.defaults()
    first = d[cfg.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS] * MS
    most = d[cfg.TOPOLOGY_SPOUT_WAIT_MAX_MILLIS] * MS
    assert spout_wait(first, most, 1) == pytest.approx(1 * MS)
    assert spout_wait(first, most, 100) == pytest.approx(50 * MS)


@pytest.mark.parametrize("streak, made, dry, after", [
    (0, 5, False, 0),    # cut short by its budget (or time, or max pending): no wait
    (0, 5, True, 1),     # emitted, then a call emitted nothing: the first wait at once
    (3, 5, True, 1),     # after an idle spell: back to the first wait
    (3, 5, False, 0),
    (0, 0, True, 1),     # nothing at all: one more empty call
    (4, 0, True, 5),
    (4, 0, False, 5),    # held at max pending with no call made: waits as an empty call
])
def test_a_burst_that_ends_with_an_empty_call_waits_as_one(streak, made, dry, after):
    assert next_empty_streak(streak, made, dry) == after


class _Spout:
    """next_tuple emits ``per_call[i]`` tuples on its i-th call (0 once they run out)."""

    def __init__(self, out, per_call):
        self.out, self.per_call, self.calls = out, list(per_call), 0

    def next_tuple(self):
        k = self.per_call[self.calls] if self.calls < len(self.per_call) else 0
        self.calls += 1
        for _ in range(k):
            self.out.emit(["w"])


def _collector():
    from types import SimpleNamespace

    from squall.acker import PendingMap
    from squall.client.grouping import ShuffleRouter
    from squall.client.tuple import Fields
    from squall.client.values import PLAIN
    from squall.worker.collector import Route, SpoutOutputCollector, StepAcks
    from squall.worker.stats import TaskStats

    got = []
    ws = SimpleNamespace(stats={1: TaskStats("s")}, deliver={2: got.append}, queues={},
                         lineage=False, values=PLAIN)
    ex = SimpleNamespace(ws=ws, component_id="s", transfer=None, debug=False, acking=False,
                         pending_acks=StepAcks(), pending_inits=[], immediate_acks=[])
    route = Route("default", Fields(["w"]), [ShuffleRouter([2])], False, frozenset())
    return SpoutOutputCollector(ex, 1, {"default": route}, PendingMap(2)), got


@pytest.mark.parametrize("per_call, budget, made, dry, calls", [
    ([2, 3], 128, 5, True, 3),        # ran dry on its third call
    ([0], 128, 0, True, 1),           # nothing at all
    ([2, 2, 2, 2], 4, 4, False, 2),   # its budget, not an empty call, ended the burst
    ([5], 4, 5, False, 1),            # a call may emit past the budget: not dry
])
def test_spout_burst_says_whether_its_last_call_emitted_nothing(per_call, budget, made, dry,
                                                                calls):
    from squall.worker.collector import spout_burst

    out, got = _collector()
    spout = _Spout(out, per_call)
    n = spout_burst(spout.next_tuple, out, out.pending, -1, budget, 10.0, 10.0, None)
    assert (n, out.dry, spout.calls, len(got)) == (made, dry, calls, made)


@pytest.mark.parametrize("streak, dry, until", [
    (1, True, 100.0 + 1 * MS),    # its last call emitted nothing: not called for 1 ms
    (3, True, 100.0 + 4 * MS),    # the wait doubles per empty call in a row
    (10, True, 100.0 + 50 * MS),  # up to the cap
    (2, False, 0.0),              # held at max pending, or not yet restored: no wait
])
def test_a_dry_spout_is_not_called_again_before_its_wait_ends(streak, dry, until):
    assert dry_wait_until(100.0, 1 * MS, 50 * MS, streak, dry) == pytest.approx(until)


@pytest.mark.parametrize("lengths, held", [
    ([], False),                        # no queue given (a spout on its own thread)
    ([0, 0, 0], False),                 # everything drained: it is called
    ([BACKLOG - 1, 0], False),          # less than a step's worth waits
    ([0, BACKLOG], True),               # a bolt has a full step queued: drain first
    ([BACKLOG * 100, 3], True),
])
def test_a_spout_waits_while_a_queue_of_its_loop_holds_a_step(lengths, held):
    assert backlogged([deque(range(k)) for k in lengths], BACKLOG) is held


@pytest.mark.parametrize("held_since, now, most, backlog, after", [
    (0.0, 10.0, 0.05, False, 0.0),     # nothing queued: called
    (0.0, 10.0, 0.05, True, 10.0),     # a backlog: held from now
    (10.0, 10.04, 0.05, True, 10.0),   # still within the wait: still held
    (10.0, 10.05, 0.05, True, 0.0),    # held for the whole wait: its burst, then again
    (10.0, 10.01, 0.05, False, 0.0),   # drained: called at once
    (0.0, 10.0, 0.0, True, 0.0),       # wait max 0: never held
    (10.0, 99.0, 0.05, True, 0.0),     # a hold from long ago (then throttled): one burst
])
def test_a_held_spout_waits_at_most_the_spout_wait_max(held_since, now, most, backlog, after):
    assert drain_first(held_since, now, most, backlog) == after


def test_a_spout_waits_on_its_own_and_its_downstream_queues_only():
    """EventLoop._share_queues: s1 -> a -> join <- b <- s2, plus an unrelated s3 -> c; one
    loop runs them all. s1 waits on its own queue, a's and join's; s3 on its own and c's."""
    from types import SimpleNamespace

    from squall.client import BasicBolt, Spout, TopologyBuilder
    from squall.client.topology import system_topology
    from squall.worker.loop import EventLoop

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
    for s in ("s1", "s2", "s3"):
        b.set_spout(s, S())
    b.set_bolt("a", B()).shuffle_grouping("s1")
    b.set_bolt("b", B()).shuffle_grouping("s2")
    b.set_bolt("c", B()).shuffle_grouping("s3")
    b.set_bolt("join", B()).shuffle_grouping("a").shuffle_grouping("b")
    topo = system_topology(b.create_topology(), {})
    exs = {cid: SimpleNamespace(component_id=cid, queue=SimpleNamespace(dq=deque()))
           for cid in ("s1", "s2", "s3", "a", "b", "c", "join", "__acker")}
    for cid in ("s1", "s2", "s3"):
        exs[cid].backlog_queues = None
    loop = SimpleNamespace(ws=SimpleNamespace(topology=topo), executors=list(exs.values()))
    EventLoop._share_queues(loop)
    names = {id(e.queue.dq): cid for cid, e in exs.items()}
    assert [names[id(q)] for q in exs["s1"].backlog_queues] == ["s1", "a", "join"]
    assert [names[id(q)] for q in exs["s2"].backlog_queues] == ["s2", "b", "join"]
    assert [names[id(q)] for q in exs["s3"].backlog_queues] == ["s3", "c"]
    assert not hasattr(exs["a"], "backlog_queues")
