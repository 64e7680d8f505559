"""Groupings and tick tuples across two worker processes."""

from __future__ import annotations

from collections import defaultdict

import pytest

from squall.client import TopologyBuilder
from topos import DirectSpout, KeySpout, NumberSpout, RecordingBolt, SlowFirstTask, TickCounter, \
    events_of, read_events

pytestmark = pytest.mark.integration


def sink_events(lc):
    return {task: [p for k, p in evs if k == "got"]
            for (comp, task), evs in read_events(lc.events_dir).items() if comp == "sink"}


def test_fields_grouping_keeps_a_key_on_one_task_across_workers(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", KeySpout(), 2)
    b.set_bolt("sink", RecordingBolt(), 4).fields_grouping("numbers", ["key"])
    n = 1000
    lc = cluster(b.create_topology(), {"test.spout.count": n, "test.keys": 50})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == n, timeout=60,
                what="acks")
    tasks_of_key = defaultdict(set)
    for task, got in sink_events(lc).items():
        for p in got:
            tasks_of_key[p.split()[0]].add(task)
    assert len(tasks_of_key) == 50
    assert all(len(ts) == 1 for ts in tasks_of_key.values()), tasks_of_key
    # Keys really were spread over sink tasks living in both workers.
    used = set().union(*tasks_of_key.values())
    workers = {w for w, ts in lc.assignment.items() if used & set(ts)}
    assert len(workers) == 2


def test_all_grouping_reaches_every_task(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("sink", RecordingBolt(), 4).all_grouping("numbers")
    n = 100
    lc = cluster(b.create_topology(), {"test.spout.count": n})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == n, timeout=60,
                what="acks")
    per_task = sink_events(lc)
    assert len(per_task) == 4
    for got in per_task.values():
        assert sorted(int(p) for p in got) == list(range(n))


def test_direct_grouping_reaches_the_chosen_task(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", DirectSpout(), 2)
    b.set_bolt("sink", RecordingBolt(), 3).direct_grouping("numbers")
    n = 300
    lc = cluster(b.create_topology(), {"test.spout.count": n})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == n, timeout=60,
                what="acks")
    per_task = sink_events(lc)
    seen = 0
    for task, got in per_task.items():
        for p in got:
            i, target = (int(x) for x in p.split())
            assert target == task
            seen += 1
    assert seen == n and len(per_task) == 3


def test_tick_tuples_arrive_at_the_configured_frequency(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("ticker", TickCounter(), 2).shuffle_grouping("numbers") \
        .add_configuration("topology.tick.tuple.freq.secs", 0.25)
    lc = cluster(b.create_topology(), {"test.spout.count": 10})
    lc.wait_for(lambda: all(len([k for k, _ in evs if k == "tick"]) >= 4
                            for (c, _), evs in read_events(lc.events_dir).items()
                            if c == "ticker") and
                len([1 for (c, _) in read_events(lc.events_dir) if c == "ticker"]) == 2,
                timeout=20, what="ticks on both tasks")


@pytest.mark.parametrize("disabled", [False, True])
def test_shuffle_sends_less_to_a_backed_up_task_unless_load_awareness_is_off(cluster,
                                                                              disabled):
    """Storm's load-aware shuffle: of two sink tasks in two workers, the one that takes 1 ms
    a tuple backs up and gets a smaller share; with topology.disable.loadaware.messaging
    the shuffle stays even."""
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("sink", SlowFirstTask(), 2).shuffle_grouping("numbers")
    n = 10_000
    lc = cluster(b.create_topology(), {"test.spout.count": n, "test.sleep.secs": 0.001,
                                       "topology.max.spout.pending": 500,
                                       "topology.disable.loadaware.messaging": disabled})
    # Even, the slow task alone takes n/2 ms; the bound is that plus start-up.
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == n,
                timeout=60 + n * 0.001, what="acks")
    got = sink_events(lc)
    slow = min(got)  # task index 0 has the lower task id
    assert sum(len(v) for v in got.values()) == n
    workers = {w for w, ts in lc.assignment.items() if set(got) & set(ts)}
    assert len(workers) == 2
    share = len(got[slow]) / n
    if disabled:
        assert abs(share - 0.5) <= 1 / n, share
    else:
        assert share < 0.3, share
