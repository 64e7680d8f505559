"""Backpressure through the Topology Master (``topology.backpressure.via.master``).

Two independent pipelines share the workers: ``steady`` (a paced spout, a cheap bolt) and
``flood`` (a spout as fast as it can go into a slow bolt that stays congested). Through
the master only the spouts upstream of the congestion pause, so the steady pipeline keeps
its pace; with the workers' own broadcast (the default) every spout pauses whenever any
executor is congested.
"""

from __future__ import annotations

import pytest

from bp_topos import Cheap, FloodSpout, PacedSpout, Slow
from squall.client.topology import TopologyBuilder
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

RATE = 1000  # steady sentences a second per spout task


def topology():
    b = TopologyBuilder()
    b.set_spout("steady", PacedSpout(), 2)
    b.set_bolt("cheap", Cheap(), 2).shuffle_grouping("steady")
    b.set_spout("flood", FloodSpout(), 2)
    b.set_bolt("slow", Slow(), 2).shuffle_grouping("flood") \
        .add_configuration("topology.executor.threaded", True) \
        .add_configuration("topology.executor.receive.buffer.size", 64)
    return b.create_topology()


def emitted(lc, component: str) -> tuple[int, float]:
    """The component's emits, and the oldest time among the heartbeats counted."""
    hbs = lc.heartbeats().values()
    return (sum(int(s.get("emitted", 0)) for hb in hbs for s in hb.get("tasks", {}).values()
                if s.get("component") == component),
            min(float(hb["time"]) for hb in hbs))


def congested(lc, component: str) -> bool:
    return any(e.get("congested") for hb in lc.heartbeats().values()
               for e in hb.get("executors", {}).values() if e.get("component") == component)


def steady_rate(cluster, via_master: bool, secs: float = 3.0) -> tuple[float, float]:
    """The steady and the flood spouts' emits a second while the slow bolt is congested."""
    lc = cluster(topology(), {"topology.backpressure.via.master": via_master,
                              "topology.acker.executors": 0, "test.rate": RATE,
                              "topology.stats.freq.secs": 0.2,
                              "test.slow.secs": 0.002})
    poll_for(lambda: congested(lc, "slow"), timeout=20, what="the slow bolt congested")
    before, t0 = emitted(lc, "steady")
    flood0, _ = emitted(lc, "flood")
    # Heartbeats every 0.2 s: wait until every worker's is `secs` newer.
    after, t1 = poll_for(lambda: (lambda e: e if e[1] >= t0 + secs else None)(
        emitted(lc, "steady")), timeout=secs + 10, what=f"heartbeats {secs:g} s later")
    flood1, _ = emitted(lc, "flood")
    assert not lc.crashed()  # (with the broadcast the slow bolt drains between pauses)
    lc.stop(drain_secs=0, grace=5)
    return (after - before) / (t1 - t0), (flood1 - flood0) / (t1 - t0)


def test_the_master_pauses_only_the_spouts_upstream_of_congestion(cluster):
    direct, flood_direct = steady_rate(cluster, via_master=False)
    master, flood_master = steady_rate(cluster, via_master=True)
    print(f"\nsteady spouts while the slow bolt is congested: {direct:.0f}/s with every "
          f"spout paused, {master:.0f}/s through the master (target {2 * RATE}/s); flood "
          f"spouts {flood_direct:.0f}/s and {flood_master:.0f}/s (the slow bolt takes "
          f"about 1000/s)")
    assert master > 0.7 * 2 * RATE  # the steady pipeline keeps its pace
    assert master > 2 * direct      # where the broadcast pauses it with the flood
    assert flood_master < 3000      # the flood is paused to the slow bolt's pace either way,
    assert flood_master > 0.4 * flood_direct  # and not held longer than the congestion lasts
