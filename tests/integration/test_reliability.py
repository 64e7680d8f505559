"""Storm's reliability guarantees across real worker processes: acked once, failed, replayed, timed out."""

from __future__ import annotations

from collections import Counter

import pytest

from squall.client import TopologyBuilder
from topos import (BatchRecordingBolt, FailAll, FailEvery, JudgePairs, NeverAck, NumberSpout,
                   PairUp, RecordingBolt, SlowResetBolt, SplitTwo, TimedNumberSpout, events_of,
                   read_events)

pytestmark = pytest.mark.integration


def acked_ids(lc) -> Counter:
    return Counter(int(x) for x in events_of(lc.events_dir, "numbers", "ack"))


def test_every_reliable_message_is_acked_exactly_once(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("split", SplitTwo(), 2).shuffle_grouping("numbers")
    b.set_bolt("sink", RecordingBolt(), 3).shuffle_grouping("split")
    n = 3000
    lc = cluster(b.create_topology(), {"test.spout.count": n})
    lc.wait_for(lambda: sum(acked_ids(lc).values()) >= n, timeout=60, what="all acks")
    lc.drain(10)
    acks = acked_ids(lc)
    assert set(acks) == set(range(n))
    assert max(acks.values()) == 1, [i for i, c in acks.items() if c > 1][:5]
    assert events_of(lc.events_dir, "numbers", "fail") == []
    # Every spout tuple produced two children, each seen by the sink.
    got = Counter(int(p.split()[0]) for p in events_of(lc.events_dir, "sink", "got"))
    assert set(got) == {i * 10 + k for i in range(n) for k in (0, 1)}
    workers_with_sink = {w for w, tasks in lc.assignment.items()
                         for t in tasks if t in lc_tasks(lc, "sink")}
    assert len(workers_with_sink) == 2


def lc_tasks(lc, component):
    from squall.client.topology import assign_task_ids, system_topology
    return assign_task_ids(system_topology(lc.topology, lc.conf))[component]


def test_failed_tuples_call_fail_and_the_replay_is_acked(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    # Fields grouping: a replay reaches the task that failed it, which lets it through.
    b.set_bolt("flaky", FailEvery(), 2).fields_grouping("numbers", ["n"])
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("flaky")
    n = 200
    lc = cluster(b.create_topology(), {"test.spout.count": n, "test.fail.every": 7})
    lc.wait_for(lambda: set(acked_ids(lc)) == set(range(n)), timeout=60, what="all acks")
    failed = Counter(int(x) for x in events_of(lc.events_dir, "numbers", "fail"))
    expected_failures = {i for i in range(n) if i % 7 == 0}
    # fail(msg_id) ran once for exactly the ids the bolt failed, and well before the timeout.
    assert set(failed) == expected_failures and max(failed.values()) == 1
    assert Counter(int(x) for x in events_of(lc.events_dir, "numbers", "replay")) == \
        Counter(expected_failures)
    assert max(acked_ids(lc).values()) == 1


def test_unacked_tuples_fail_after_the_message_timeout(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", TimedNumberSpout(), 1)
    b.set_bolt("hold", NeverAck(), 2).shuffle_grouping("numbers")
    n = 20
    timeout = 2
    lc = cluster(b.create_topology(), {"test.spout.count": n,
                                       "topology.message.timeout.secs": timeout})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "fail")) == n,
                timeout=timeout * 3 + 20, what="timeouts")
    emitted = dict(p.split() for p in events_of(lc.events_dir, "numbers", "emit"))
    failed = dict(p.split() for p in events_of(lc.events_dir, "numbers", "fail"))
    assert sorted(int(i) for i in failed) == list(range(n))
    assert len(events_of(lc.events_dir, "hold", "got")) == n
    # As Storm: the spout's RotatingMap (2 buckets rotated every T) fails a tree T to 2T
    # after its emit; the acker (3 buckets) keeps it 2T to 3T, so never drops it first.
    waits = [float(failed[i]) - float(emitted[i]) for i in failed]
    assert min(waits) >= timeout - 0.05, waits
    assert max(waits) <= 2 * timeout + 1.0, waits
    assert events_of(lc.events_dir, "numbers", "ack") == []
    lc.wait_for(lambda: lc.total("timed_out") == n, timeout=5, what="timed_out counter")


def test_reset_timeout_keeps_a_slow_tuple_alive(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("slow", SlowResetBolt(), 1).shuffle_grouping("numbers") \
        .add_configuration("topology.tick.tuple.freq.secs", 0.3)
    n = 5
    lc = cluster(b.create_topology(), {"test.spout.count": n, "test.hold.secs": 3.5,
                                       "topology.message.timeout.secs": 1.5})
    lc.wait_for(lambda: set(acked_ids(lc)) == set(range(n)), timeout=30, what="acks")
    # Held 3.5 s with a 1.5 s timeout: only reset_timeout kept them from failing.
    assert events_of(lc.events_dir, "numbers", "fail") == []


def test_acker_executors_zero_acks_at_emit(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("fail_all", FailAll(), 2).shuffle_grouping("numbers")
    n = 500
    lc = cluster(b.create_topology(), {"test.spout.count": n,
                                       "topology.acker.executors": 0})
    lc.wait_for(lambda: len(acked_ids(lc)) == n, timeout=30, what="acks")
    assert max(acked_ids(lc).values()) == 1
    # Untracked: the bolt's fails reach nobody and no timeout fires.
    assert events_of(lc.events_dir, "numbers", "fail") == []
    assert not any(c == "__acker" for c in (s["component"] for s in lc.task_stats()))


def test_max_spout_pending_is_never_exceeded(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("numbers")
    n, cap = 400, 8
    lc = cluster(b.create_topology(), {"test.spout.count": n, "test.sleep.secs": 0.002,
                                       "topology.max.spout.pending": cap})
    lc.wait_for(lambda: len(acked_ids(lc)) == n, timeout=60, what="acks")
    peaks = []
    for (comp, task), evs in read_events(lc.events_dir).items():
        if comp != "numbers":
            continue
        pending, peak = set(), 0
        for kind, payload in evs:
            if kind == "emit":
                pending.add(payload)
                peak = max(peak, len(pending))
            elif kind in ("ack", "fail"):
                pending.discard(payload)
        peaks.append(peak)
    assert len(peaks) == 2
    assert max(peaks) <= cap
    assert max(peaks) == cap  # the bound was actually reached, so it was enforced


def test_a_tuple_anchored_to_two_trees_fails_and_completes_both(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("pair", PairUp(), 1).global_grouping("numbers")
    b.set_bolt("judge", JudgePairs(), 2).shuffle_grouping("pair")
    n = 200  # even, so every id ends up in a pair
    lc = cluster(b.create_topology(), {"test.spout.count": n, "topology.max.spout.pending": 16})
    lc.wait_for(lambda: set(acked_ids(lc)) == set(range(n)), timeout=60, what="all acks")
    assert max(acked_ids(lc).values()) == 1
    failed = Counter(int(x) for x in events_of(lc.events_dir, "numbers", "fail"))
    failed_pairs = [tuple(int(v) for v in p.split())
                    for p in events_of(lc.events_dir, "judge", "failpair")]
    assert failed_pairs
    # Failing the joined tuple failed *both* spout tuples it was anchored to, partner included.
    expected = Counter(v for pair in failed_pairs for v in pair)
    assert failed == expected
    assert any(v % 5 for pair in failed_pairs for v in pair)


def test_a_bolt_with_execute_batch_gets_whole_steps_and_acks_stay_per_tuple(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    # Fields grouping: a replay reaches the task that failed it, which lets it through.
    b.set_bolt("batch", BatchRecordingBolt(), 2).fields_grouping("numbers", ["n"])
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("batch")
    n = 2000
    lc = cluster(b.create_topology(), {"test.spout.count": n, "test.fail.every": 50,
                                       "test.spout.replay": True})
    lc.wait_for(lambda: set(acked_ids(lc)) == set(range(n)), timeout=60, what="all acks")
    lc.drain(10)
    acks = acked_ids(lc)
    assert max(acks.values()) == 1
    failed = Counter(int(x) for x in events_of(lc.events_dir, "numbers", "fail"))
    assert set(failed) == {i for i in range(0, n, 50)} and max(failed.values()) == 1
    got = Counter(int(x) for x in events_of(lc.events_dir, "batch", "got"))
    assert set(got) == set(range(n)) and max(got.values()) == 1
    sizes = [int(x) for x in events_of(lc.events_dir, "batch", "batch")]
    assert sum(sizes) == n + len(failed) and max(sizes) > 1  # whole steps, not one by one
    assert set(int(p.split()[0]) for p in events_of(lc.events_dir, "sink", "got")) == \
        set(range(n))
