"""A stateful word count with a worker killed -9 mid-run, on a real local cluster
(ZooKeeper, Nimbus, a supervisor that restarts the worker, Redis for the state).

Storm's checkpointing over the acker is at-least-once, as Storm documents
(``acker-at-least-once`` here): nothing is lost, and a count can only be too high by the
tuples of a transaction that committed while its acks died with the worker. ``acker``
adds what makes it exactly-once (each stateful task recognises a replay of what its state
holds), and so does the barrier mode: their counts end exact.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from cluster_helpers import kill_and_wait, worker_heartbeats
from squall.deploy.local import LocalCluster
from stateful_topos import expected_counts
from test_stateful import CHECKPOINT_MS, TIMEOUT, acked_ids, stored_counts, word_count
from topos import events_of
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    base = tmp_path_factory.mktemp("stateful-local")
    lc = LocalCluster({"topology.stats.freq.secs": 0.2}, slots=4, base_dir=str(base))
    try:
        lc.start()
        if lc.redis is None:
            pytest.skip("Debian's redis-server is not installed")
        yield lc
    finally:
        lc.close("test done")


def worker_of(lc, component: str) -> int | None:
    """The pid of a live worker running a task of ``component``."""
    for hb in worker_heartbeats(lc):
        comps = {s.get("component") for s in hb.get("tasks", {}).values()}
        if component in comps:
            return int(hb["pid"])
    return None


def run_with_kill(lc, tmp_path, name: str, n: int, mode: str, victim_of: str = "count"):
    events = tmp_path / "events"
    events.mkdir()
    prefix = f"squall-test-{name}:"
    conf = {"topology.workers": 2, "test.events.dir": str(events), "test.spout.count": n,
            "test.spout.rate": 1500, "topology.state.provider": "redis",
            "trident.redis.key.prefix": prefix,
            "topology.state.checkpoint.mode": mode,
            "topology.state.checkpoint.interval.ms": CHECKPOINT_MS,
            "topology.message.timeout.secs": TIMEOUT}
    acker = mode.startswith("acker")
    lc.submit(name, word_count(rewinding=not acker), conf, HERE)
    client = lc.redis.client()
    try:
        # Mid-run: some counts committed, most messages still to come.
        poll_for(lambda: sum(stored_counts(client, prefix).values()) > 3 * n // 10,
                 timeout=30, what="a third of the words committed")
        victim = worker_of(lc, victim_of)
        assert victim is not None
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        expected = expected_counts(n)
        done = (lambda: len(acked_ids(str(events))) == n) if acker else \
            (lambda: stored_counts(client, prefix) == expected)
        poll_for(done, timeout=60 + 4 * TIMEOUT, what="the word count finished after the kill")
        recovered = time.monotonic() - killed_at
        return str(events), stored_counts(client, prefix), expected, recovered
    finally:
        client.close()
        kill_and_wait(lc, name)


def test_acker_mode_counts_exactly_once_when_a_worker_is_killed(local, tmp_path):
    n = 6000
    events, counts, expected, recovered = run_with_kill(local, tmp_path, "acker-kill", n, "acker")
    print(f"\nacker mode: every message acked {recovered:.1f} s after the kill")
    assert counts == expected  # no double count, no loss
    assert events_of(events, "count", "init")  # the restarted task restored its state


def test_storms_at_least_once_acker_mode_loses_nothing_when_a_worker_is_killed(local, tmp_path):
    n = 6000
    events, counts, expected, recovered = run_with_kill(local, tmp_path, "acker-alo-kill", n,
                                                        "acker-at-least-once")
    print(f"\nacker-at-least-once: every message acked {recovered:.1f} s after the kill")
    assert set(counts) == set(expected)
    over = {w: counts[w] - expected[w] for w in expected}
    assert all(v >= 0 for v in over.values()), f"counts lost words: {over}"
    # At-least-once, bounded: only a transaction that committed just before the kill can
    # be counted again (its acks died), so the excess is at most the largest transaction.
    largest = max(int(p.split()[1]) for p in events_of(events, "count", "prepare"))
    print(f"acker-at-least-once: {sum(over.values())} words counted twice (largest transaction: "
          f"{largest} words)")
    assert sum(over.values()) <= 2 * largest, (over, largest)
    assert events_of(events, "count", "init")  # the restarted task restored its state


def test_barrier_mode_counts_exactly_once_when_a_worker_is_killed(local, tmp_path):
    n = 6000
    events, counts, expected, recovered = run_with_kill(local, tmp_path, "barrier-kill", n,
                                                        "barrier")
    print(f"\nbarrier mode: exact counts {recovered:.1f} s after the kill")
    assert counts == expected  # no double count, no loss
    # The spouts rewound: the restarted run restored a checkpoint (offsets) at least once
    # after the initial start.
    restores = events_of(events, "sentences", "restore")
    assert len(restores) >= 4, restores  # 2 tasks at start, then again after the kill


def test_barrier_mode_survives_the_topology_master_killed_mid_run(local, tmp_path):
    """The master's worker dies: the restarted master reads its record (last checkpoint,
    epoch) from the state provider and recovers everyone to that checkpoint."""
    n = 6000
    events, counts, expected, recovered = run_with_kill(local, tmp_path, "master-kill", n,
                                                        "barrier", "__topology_master")
    print(f"\nmaster killed: exact counts {recovered:.1f} s after the kill")
    assert counts == expected
    assert len(events_of(events, "sentences", "restore")) >= 4  # the spouts rewound again


def test_event_time_windows_under_barrier_checkpointing_run_once_across_a_kill(local, tmp_path):
    """A windowed sum feeding a stateful total: the window bolt's worker is killed -9; the
    windows' contents come back from the checkpoint, so each window's sum is added once."""
    import msgpack

    from squall.client.topology import TopologyBuilder
    from squall.client.windowing import Duration
    from stateful_topos import CheckpointedTimed, WindowSum, WindowTotals

    n, length = 3000, 1000
    b = TopologyBuilder()
    b.set_spout("numbers", CheckpointedTimed())
    b.set_bolt("window", WindowSum().with_tumbling_window(Duration(length))
               .with_timestamp_field("ts").with_watermark_interval(Duration(50))) \
        .shuffle_grouping("numbers")
    b.set_bolt("totals", WindowTotals()).shuffle_grouping("window")
    events = tmp_path / "events"
    events.mkdir()
    prefix = "squall-test-window-kill:"
    local.submit("window-kill", b.create_topology(), {
        "topology.workers": 2, "test.events.dir": str(events), "test.spout.count": n,
        "test.spout.rate": 600, "topology.state.provider": "redis",
        "trident.redis.key.prefix": prefix, "topology.state.checkpoint.mode": "barrier",
        "topology.state.checkpoint.interval.ms": CHECKPOINT_MS,
        "topology.message.timeout.secs": TIMEOUT}, HERE)
    base = CheckpointedTimed.BASE
    ts = {i: base + 10 * i for i in range(n)}
    final_wm = ts[n - 1]
    expected = {}
    for end in range(base, final_wm + 1, length):  # windows end at multiples of the length
        expected[end] = sum(i for i, t in ts.items() if end - length < t <= end)
    client = local.redis.client()

    def totals() -> dict:
        out = {}
        for key in client.scan_iter(match=f"{prefix}state:totals-*"):
            if b"$" not in key:
                out.update({msgpack.unpackb(k): msgpack.unpackb(v)
                            for k, v in client.hgetall(key).items()})
        return out
    try:
        poll_for(lambda: len(totals()) >= len(expected) // 3, timeout=30,
                 what="a third of the windows totalled")
        os.kill(worker_of(local, "window"), signal.SIGKILL)
        try:
            poll_for(lambda: totals() == expected, timeout=60 + 4 * TIMEOUT,
                     what="every window's total, once")
        except BaseException:
            got = totals()
            wrong = {e: (got.get(e), v) for e, v in expected.items() if got.get(e) != v}
            extra = set(got) - set(expected)
            print(f"windows wrong (got, want): {wrong}; unexpected: {sorted(extra)}")
            raise
        assert len(events_of(str(events), "numbers", "restore")) >= 2
    finally:
        client.close()
        kill_and_wait(local, "window-kill")
