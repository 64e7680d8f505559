"""Stateful bolts and windows on real workers.

* a stateful word count (Storm's checkpointing over the acker, state in Redis) ends at the
  exact counts and acks every message once its count is committed;
* windowed bolts run the windows a reference computed here says, and ack each tuple once;
* the kill -9 tests run on a LocalCluster whose supervisor restarts the killed worker.
"""

from __future__ import annotations

import collections
import pathlib

import msgpack
import pytest

from squall.client.topology import TopologyBuilder
from squall.client.windowing import Count, Duration
from stateful_topos import (CheckpointedSentences, SentenceSpout, Split, StatefulCount,
                            WindowRecorder, expected_counts)
from topos import events_of
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

#: topology.message.timeout.secs of these tests; waits are derived from it.
TIMEOUT = 6
#: topology.state.checkpoint.interval.ms
CHECKPOINT_MS = 200


def word_count(spouts: int = 2, counts: int = 2, rewinding: bool = False):
    """Sentences -> split -> a stateful count (``rewinding``: a CheckpointedSpout)."""
    b = TopologyBuilder()
    b.set_spout("sentences", CheckpointedSentences() if rewinding else SentenceSpout(), spouts)
    b.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", StatefulCount(), counts).fields_grouping("split", ["word"])
    return b.create_topology()


def stored_counts(redis_client, prefix: str) -> dict[str, int]:
    """The committed state of every count task, merged (each word lives in one task)."""
    out: dict[str, int] = {}
    for key in redis_client.scan_iter(match=f"{prefix}state:count-*"):
        if b"$" in key:
            continue
        for k, v in redis_client.hgetall(key).items():
            word = msgpack.unpackb(k, raw=False)
            assert word not in out, f"{word} counted by two tasks"
            out[word] = msgpack.unpackb(v, raw=False)
    return out


def counts_reach(lc, client, prefix: str, expected: dict[str, int]):
    """A poll_for predicate: the committed counts equal ``expected`` (fails at once when a
    worker died)."""
    def check() -> bool:
        assert not lc.crashed(), [lc.describe_exit(w) for w in lc.crashed()]
        return stored_counts(client, prefix) == expected
    return check


def acked_ids(events_dir: str) -> collections.Counter:
    return collections.Counter(int(x) for x in events_of(events_dir, "sentences", "ack"))


def exact_word_count(cluster, redis_conf, redis_server, mode: str, n: int = 3000):
    """Run the stateful word count under checkpoint ``mode`` until its committed counts are
    the exact totals; returns the cluster."""
    conf = {**redis_conf, "topology.state.provider": "redis",
            "topology.state.checkpoint.mode": mode,
            "topology.state.checkpoint.interval.ms": CHECKPOINT_MS,
            "topology.message.timeout.secs": TIMEOUT, "test.spout.count": n}
    lc = cluster(word_count(rewinding=mode != "acker"), conf)
    client = redis_server.client()
    try:
        poll_for(counts_reach(lc, client, redis_conf["trident.redis.key.prefix"],
                              expected_counts(n)),
                 timeout=30 + 2 * TIMEOUT, what="the committed counts reach the exact totals")
    finally:
        client.close()
    return lc


def test_stateful_word_count_commits_exact_counts(cluster, redis_conf, redis_server):
    n = 3000
    lc = exact_word_count(cluster, redis_conf, redis_server, "acker", n)
    poll_for(lambda: len(acked_ids(lc.events_dir)) == n, timeout=2 * TIMEOUT,
             what=f"all {n} messages acked")
    acked = acked_ids(lc.events_dir)
    assert max(acked.values()) == 1 and not events_of(lc.events_dir, "sentences", "fail")
    assert events_of(lc.events_dir, "count", "prepare"), "no checkpoint ran"
    assert not lc.crashed()


@pytest.mark.parametrize("mode", ["barrier", "barrier-at-least-once"])
def test_barrier_checkpointing_counts_exactly_without_an_acker(cluster, redis_conf, redis_server,
                                                               mode):
    lc = exact_word_count(cluster, redis_conf, redis_server, mode)
    # No acker ran: no tuple tree was tracked.
    hbs = lc.heartbeats()
    assert not [s for hb in hbs.values() for s in hb.get("tasks", {}).values()
                if s.get("component") == "__acker"]
    assert not lc.crashed()


def test_barrier_mode_replays_from_the_checkpoint_when_a_bolt_fails_a_tuple(
        cluster, redis_conf, redis_server):
    """No acker replays a tuple failed under barrier checkpointing: the task asks the
    topology master for a recovery, the spouts rewind to the last checkpoint, and the
    counts still end exact (the failed sentence counted once, after its replay)."""
    from stateful_topos import FailOnceSplit
    n = 3000
    b = TopologyBuilder()
    b.set_spout("sentences", CheckpointedSentences(), 2)
    b.set_bolt("split", FailOnceSplit(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", StatefulCount(), 2).fields_grouping("split", ["word"])
    conf = {**redis_conf, "topology.state.provider": "redis",
            "topology.state.checkpoint.mode": "barrier",
            "topology.state.checkpoint.interval.ms": CHECKPOINT_MS,
            "topology.message.timeout.secs": TIMEOUT, "test.spout.count": n,
            "test.spout.rate": 1500, "test.fail.sentence": n // 2}
    lc = cluster(b.create_topology(), conf)
    client = redis_server.client()
    try:
        poll_for(counts_reach(lc, client, redis_conf["trident.redis.key.prefix"],
                              expected_counts(n)),
                 timeout=30 + 2 * TIMEOUT, what="the committed counts reach the exact totals")
    finally:
        client.close()
    assert (pathlib.Path(lc.events_dir) / "failed-once").exists()  # it did fail once
    # 2 spout tasks restored at the start, and again in the recovery the failure asked for.
    assert len(events_of(lc.events_dir, "sentences", "restore")) >= 4


def windows_of(events_dir: str) -> list[tuple[str, str, list[int]]]:
    out = []
    for line in events_of(events_dir, "window", "window"):
        start, end, *vals = line.split(" ")
        out.append((start, end, [int(v) for v in vals if v]))
    return out


def test_count_windows_run_the_reference_windows_and_ack_each_tuple_once(cluster):
    from topos import NumberSpout

    n, length, slide = 300, 25, 10
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout())
    b.set_bolt("window", WindowRecorder().with_window(Count(length), Count(slide))) \
        .shuffle_grouping("numbers")
    lc = cluster(b.create_topology(), {"test.spout.count": n,
                                       "topology.message.timeout.secs": TIMEOUT})
    # One spout task, one window task: tuples arrive in emit order.
    expected = [list(range(max(0, k - length), k)) for k in range(slide, n + 1, slide)]
    poll_for(lambda: len(windows_of(lc.events_dir)) >= len(expected), timeout=30,
             what=f"{len(expected)} windows")
    assert [w for _, _, w in windows_of(lc.events_dir)] == expected
    # A tuple is acked when it leaves its last window: all but the newest `length`.
    poll_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) >= n - length,
             timeout=2 * TIMEOUT, what="the tuples that left every window acked")
    acks = sorted(int(x) for x in events_of(lc.events_dir, "numbers", "ack"))
    assert acks == list(range(n - length))
    assert not events_of(lc.events_dir, "numbers", "fail")


def test_event_time_windows_with_out_of_order_and_late_tuples(cluster):
    from stateful_topos import LateRecorder, PhasedTimedNumbers

    length, slide, lag, interval = 1000, 500, 300, 100
    base = 1_700_000_000_000
    ts = []
    for i in range(200):  # on time: increasing by 20 ms, shuffled by up to 250 ms (< lag)
        ts.append(base + i * 20 - (250 if i % 7 == 3 else 0))
    late_ids = list(range(200, 205))
    ts += [base + 100 + k for k in range(5)]  # far behind the watermark after the pause
    ts += [base + 4000 + i * 20 for i in range(50)]  # on time again
    b = TopologyBuilder()
    b.set_spout("numbers", PhasedTimedNumbers())
    b.set_bolt("window", WindowRecorder()
               .with_window(Duration(length), Duration(slide)).with_timestamp_field("ts")
               .with_lag(Duration(lag)).with_watermark_interval(Duration(interval))
               .with_late_tuple_stream("late")).shuffle_grouping("numbers")
    b.set_bolt("late", LateRecorder()).shuffle_grouping("window", "late")
    lc = cluster(b.create_topology(), {
        "test.timestamps": ts, "test.pause.before": [200], "test.pause.secs": 5 * interval / 1000,
        "topology.message.timeout.secs": TIMEOUT})
    on_time = [(t, i) for i, t in enumerate(ts) if i not in late_ids]
    final_wm = max(ts) - lag
    expected = []
    first = min(t for t, _ in on_time)
    end = first if first % slide == 0 else first + slide - first % slide
    while end <= final_wm:
        w = [i for t, i in sorted(on_time) if end - length < t <= end]
        if w:
            expected.append((str(end - length), str(end), w))
        end += slide
    poll_for(lambda: len(windows_of(lc.events_dir)) >= len(expected), timeout=30,
             what=f"{len(expected)} event-time windows")
    assert windows_of(lc.events_dir) == expected
    assert sorted(int(x) for x in events_of(lc.events_dir, "late", "late")) == late_ids
    # Late tuples are acked at once; the rest when they leave their last window: those the
    # next window (ending at `end`) can hold are still held.
    held = {i for t, i in on_time if t > end - length}
    poll_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) >= len(ts) - len(held),
             timeout=2 * TIMEOUT, what="every tuple that left its windows acked")
    acks = sorted(int(x) for x in events_of(lc.events_dir, "numbers", "ack"))
    assert acks == sorted(set(range(len(ts))) - held)


def committed_snapshot(client, prefix: str, tasks: int) -> tuple[int, dict, dict] | None:
    """(checkpoint, offsets by spout state, merged counts) when all ``tasks`` states have
    committed the same checkpoint; None while they differ (commits land one task at a time).
    Tasks are found by their txid records: a count task with nothing to save yet has no
    hash, but it has prepared."""
    keys = [k.decode()[:-len("$txid")] for k in client.scan_iter(match=f"{prefix}state:*$txid")
            if b":sentences-" in k or b":count-" in k]
    if len(keys) != tasks:
        return None
    txids = {k: client.hget(k + "$txid", "commit") for k in keys}
    if len(set(txids.values())) != 1 or None in txids.values():
        return None
    offsets, counts = {}, {}
    for k in keys:
        values = {msgpack.unpackb(f, raw=False): msgpack.unpackb(v, raw=False)
                  for f, v in client.hgetall(k).items()}
        if ":sentences-" in k:
            offsets[k] = values.get("__offsets")
        elif ":count-" in k:
            counts.update(values)
    again = {k: client.hget(k + "$txid", "commit") for k in keys}
    if again != txids:
        return None
    return int(next(iter(txids.values()))), offsets, counts


@pytest.mark.parametrize("buffer", [None, 64])
def test_aligned_checkpoints_are_consistent_under_a_slow_input_channel(cluster, redis_conf,
                                                                      redis_server, buffer):
    """Every committed checkpoint's counts are exactly the words of the sentences before its
    spout offsets, while one split task (an input channel of every count task) is slow.
    With receive queues of 64 tuples the count tasks hold more than a queue's worth while
    they align, and hold the spouts back (backpressure) until the slow barrier comes. The
    slow split takes 1 ms a sentence against 0.67 ms between its sentences, so it falls
    behind and each barrier waits behind its queue: 6-13 holds a run (at 0.5 ms, 1-2, and
    a fresh clone's run once had none)."""
    from stateful_topos import CheckpointedSentences, SlowSplit, sentence

    n = 4000
    b = TopologyBuilder()
    b.set_spout("sentences", CheckpointedSentences(), 2)
    b.set_bolt("split", SlowSplit(), 2).shuffle_grouping("sentences") \
        .add_configuration("topology.executor.threaded", True)
    b.set_bolt("count", StatefulCount(), 2).fields_grouping("split", ["word"])
    conf = {**redis_conf, "topology.state.provider": "redis",
            "topology.state.checkpoint.mode": "barrier",
            "topology.state.checkpoint.interval.ms": 100, "test.split.sleep": 0.001,
            "topology.message.timeout.secs": TIMEOUT, "test.spout.count": n,
            "test.spout.rate": 1500}
    if buffer:
        conf["topology.executor.receive.buffer.size"] = buffer
    lc = cluster(b.create_topology(), conf)
    client = redis_server.client()
    prefix = redis_conf["trident.redis.key.prefix"]
    checked: set[int] = set()
    try:
        def consistent_checkpoints() -> bool:
            assert not lc.crashed(), [lc.describe_exit(w) for w in lc.crashed()]
            snap = committed_snapshot(client, prefix, tasks=4)  # 2 spout, 2 count tasks
            if snap is None or snap[0] in checked or not snap[1]:
                return False
            txid, offsets, counts = snap
            expected: collections.Counter = collections.Counter()
            for key, offset in offsets.items():
                task_index = 0 if key.endswith(str(min_spout_task(offsets))) else 1
                for i in range(task_index, offset or task_index, 2):
                    expected.update(sentence(i).split())
            assert counts == dict(expected), f"checkpoint {txid} is not consistent"
            checked.add(txid)
            return len(checked) >= 5 and all(o is not None and o >= n - 1 for o in offsets.values())

        poll_for(consistent_checkpoints, timeout=30 + 2 * TIMEOUT, interval=0.01,
                 what="5 consistent checkpoints, the last after every sentence")
    finally:
        client.close()
    if buffer:
        logs = "".join(pathlib.Path(w.log_path).read_text(errors="replace") for w in lc.workers)
        assert "backpressure until they come" in logs


def min_spout_task(offsets: dict) -> int:
    return min(int(k.rsplit("-", 1)[1]) for k in offsets)


@pytest.mark.parametrize("mode", ["acker", "barrier"])
def test_a_stateful_windowed_bolt_keeps_its_totals_in_its_state(cluster, redis_conf,
                                                                redis_server, mode):
    """StatefulWindowedBolt: event-time tumbling windows whose sums go into the bolt's own
    KeyValueState, committed at checkpoints (Storm's checkpointing or barriers)."""
    from stateful_topos import CheckpointedTimed, StatefulWindowSum

    n, length = 1500, 1000
    b = TopologyBuilder()
    b.set_spout("numbers", CheckpointedTimed())
    b.set_bolt("totals", StatefulWindowSum().with_tumbling_window(Duration(length))
               .with_timestamp_field("ts").with_watermark_interval(Duration(50))) \
        .shuffle_grouping("numbers")
    lc = cluster(b.create_topology(), {
        **redis_conf, "topology.state.provider": "redis", "test.spout.count": n,
        "topology.state.checkpoint.mode": mode,
        "topology.state.checkpoint.interval.ms": CHECKPOINT_MS,
        "topology.message.timeout.secs": TIMEOUT})
    base = CheckpointedTimed.BASE
    expected = {end: sum(i for i in range(n) if end - length < base + 10 * i <= end)
                for end in range(base, base + 10 * (n - 1) + 1, length)}
    client = redis_server.client()
    prefix = redis_conf["trident.redis.key.prefix"]

    def committed() -> dict:
        assert not lc.crashed(), [lc.describe_exit(w) for w in lc.crashed()]
        out = {}
        for key in client.scan_iter(match=f"{prefix}state:totals-*"):
            if b"$" not in key and not key.endswith(b"-window"):
                out.update({msgpack.unpackb(k): msgpack.unpackb(v)
                            for k, v in client.hgetall(key).items()})
        return out
    try:
        poll_for(lambda: committed() == expected, timeout=30 + 2 * TIMEOUT,
                 what="every window's total committed once")
    finally:
        client.close()
