"""Storm behaviours that Storm's own test cases check, on real worker processes:

* ``topology.enable.message.timeouts: false``: trees are never failed by timeout; a tree that
  completes long after ``topology.message.timeout.secs`` is acked.
* A bolt may subscribe to any component's ``__system`` stream (it receives nothing).
* A spout is opened only when its topology is first active (Storm's SpoutExecutor waits for
  the topology to be active before ``open``), then activated.
"""

from __future__ import annotations

import time

import pytest

from squall.client import TopologyBuilder
from squall.deploy.static import StaticCluster
from topos import HoldThenAck, LifecycleSpout, NumberSpout, RecordingBolt, events_of, read_events

pytestmark = pytest.mark.integration

STATS_SECS = 0.2  # topology.stats.freq.secs of the conftest cluster


def test_with_message_timeouts_disabled_a_slow_tree_is_acked_not_failed(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("hold", HoldThenAck(), 2).shuffle_grouping("numbers")
    n, timeout, hold = 20, 1, 3.0  # held past the latest expiry (1.5 x the timeout) and more
    lc = cluster(b.create_topology(), {"test.spout.count": n, "test.hold.secs": hold,
                                       "topology.message.timeout.secs": timeout,
                                       "topology.enable.message.timeouts": False})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == n,
                timeout=hold + 3 * timeout + 20, what="every slow tree acked")
    assert sorted(int(i) for i in events_of(lc.events_dir, "numbers", "ack")) == list(range(n))
    assert events_of(lc.events_dir, "numbers", "fail") == []
    assert lc.total("timed_out") == 0


def test_a_bolt_may_subscribe_to_a_components_system_stream(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("numbers")
    b.set_bolt("system", RecordingBolt(), 1).shuffle_grouping("numbers", "__system") \
        .all_grouping("sink", "__system")
    n = 50
    lc = cluster(b.create_topology(), {"test.spout.count": n})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == n, timeout=30,
                what="every tuple acked")
    assert events_of(lc.events_dir, "system", "got") == []


def heartbeats_after(lc: StaticCluster, since: float) -> bool:
    """Both workers wrote a heartbeat after ``since`` (epoch), connected to each other."""
    hbs = lc.heartbeats()
    return len(hbs) == len(lc.workers) and all(
        hb["time"] > since and hb["connected"] for hb in hbs.values())


def test_a_spout_opens_only_when_its_topology_is_first_active(cluster):
    b = TopologyBuilder()
    b.set_spout("numbers", LifecycleSpout(), 2)
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("numbers")
    n = 40
    lc = cluster(b.create_topology(), {"test.spout.count": n}, initial_status="INACTIVE")
    # Workers up, bolts prepared, peers connected, and two heartbeat rounds later still
    # inactive: nothing has opened the spouts.
    lc.wait_for(lambda: heartbeats_after(lc, 0), timeout=30, what="workers connected")
    since = time.time()
    lc.wait_for(lambda: heartbeats_after(lc, since + 2 * STATS_SECS), timeout=10,
                what="two more heartbeat rounds")
    assert all(not hb["active"] for hb in lc.heartbeats().values())
    assert events_of(lc.events_dir, "numbers", "open") == []
    lc.set_status("ACTIVE")
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == n, timeout=30,
                what="every tuple acked once active")
    for (comp, task), events in read_events(lc.events_dir).items():
        if comp == "numbers":
            kinds = [k for k, _ in events]
            assert kinds[:2] == ["open", "activate"], (task, kinds[:5])


def test_components_made_with_lambdas_and_closures_run_in_workers(cluster):
    """A bolt holding a lambda, and one holding a closure over a local variable: refused by
    plain pickle at build time before; they run in every worker now (cloudpickle)."""
    from topos import MapBolt
    offset = 1000

    def shifted(n):  # a closure: `offset` lives in this test's frame
        return n + offset

    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("double", MapBolt(lambda n: n * 2), 2).shuffle_grouping("numbers")
    b.set_bolt("shift", MapBolt(shifted), 2).shuffle_grouping("double")
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("shift")
    n = 200
    lc = cluster(b.create_topology(), {"test.spout.count": n})
    lc.wait_for(lambda: len(set(events_of(lc.events_dir, "numbers", "ack"))) >= n, timeout=60,
                what="every number acked")
    assert sorted(int(v) for v in events_of(lc.events_dir, "sink", "got")) == \
        [i * 2 + 1000 for i in range(n)]
