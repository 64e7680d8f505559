"""The Kafka spout and bolt against a real broker (noida-db or Tansu) and real workers."""

from __future__ import annotations

import json
import os
import time
from collections import Counter

import pytest

from kafka_fixtures import broker_gets_right, committed, produce, read_all
from squall.client import TopologyBuilder
from squall.connectors.kafka import (KafkaBolt, KafkaSpout,
                                     KafkaSpoutConfig, ProcessingGuarantee, RetryBackoff,
                                     SimpleRecordTranslator)
from topos import events_of

pytestmark = pytest.mark.integration

COMMIT_MS = 300  # commits every 0.3 s here (Storm's default is 30 s)


def got(lc) -> Counter:
    """(topic, partition, offset) -> how many times the recorder saw it."""
    out = Counter()
    for p in events_of(lc.events_dir, "rec", "got"):
        where = p.split()[0]
        tp, off = where.rsplit("@", 1)
        topic, part = tp.rsplit("/", 1)
        out[(topic, int(part), int(off))] += 1
    return out


def got_times(lc) -> dict:
    times: dict = {}
    for p in events_of(lc.events_dir, "rec", "got"):
        where, t = p.split()
        times.setdefault(where, []).append(float(t))
    return times


def spout_topology(config, spout_tasks=2, rec_tasks=2):
    from kafka_topos import OffsetRecorder
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(config), spout_tasks)
    b.set_bolt("rec", OffsetRecorder(), rec_tasks).fields_grouping("kafka", ["offset"])
    return b.create_topology()


def wait_committed_to_end(lc, bootstrap, group, topic, end, timeout):
    """Wait until ``group``'s commits on ``topic`` are ``end`` (partition -> log end)."""
    lc.wait_for(lambda: {p: c[0] for p, c in committed(bootstrap, group, topic,
                                                        len(end)).items()} == end,
                timeout=timeout, interval=0.3, what=f"commits at the log end {end}")


def values(n):
    return [f"v{i}".encode() for i in range(n)]


def test_at_least_once_every_record_is_processed_and_the_commits_reach_the_log_end(
        cluster, kafka_broker, kafka_topic):
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=3)
    n = 3000
    end = produce(bs, topic, values(n), partitions=3)
    group = f"g-{topic}"
    config = KafkaSpoutConfig(bs, topics=[topic], group_id=group,
                              offset_commit_period_ms=COMMIT_MS)
    lc = cluster(spout_topology(config), {"topology.max.spout.pending": 500})
    lc.wait_for(lambda: len(got(lc)) >= n, timeout=60, what="every record")
    seen = got(lc)
    per_partition = Counter(p for _, p, _ in seen)
    assert sum(per_partition.values()) == n and len(per_partition) == 3
    assert max(seen.values()) == 1  # nothing failed, so nothing came twice
    assert end == {0: 1000, 1: 1000, 2: 1000}
    wait_committed_to_end(lc, bs, group, topic, end, timeout=COMMIT_MS / 1000 * 10 + 10)
    if broker_gets_right("commit-metadata"):  # Tansu drops it
        # Storm's commit metadata names the topology and the task that committed.
        meta = [json.loads(m) for _, m in committed(bs, group, topic, 3).values()]
        assert {m["topologyId"] for m in meta} == {lc.topology_id}
        assert all(isinstance(m["taskId"], int) for m in meta)
    lc.wait_for(lambda: lc.total("acked", "kafka") == n, timeout=10,
                what="the spout's heartbeat counting every ack")


def test_failed_records_are_retried_on_the_backoff_schedule(cluster, kafka_broker, kafka_topic):
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=2)
    n = 400
    end = produce(bs, topic, values(n), partitions=2)
    group = f"g-{topic}"
    initial = 0.3
    config = KafkaSpoutConfig(bs, topics=[topic], group_id=group,
                              offset_commit_period_ms=COMMIT_MS,
                              retry=RetryBackoff(initial_delay_ms=initial * 1000))
    lc = cluster(spout_topology(config, spout_tasks=1),
                 {"test.kafka.fail.first": 25})
    lc.wait_for(lambda: len(got(lc)) == n, timeout=60, what="every record")
    failing = {k for k in got(lc) if k[2] % 25 == 0}
    lc.wait_for(lambda: all(got(lc)[k] == 2 for k in failing), timeout=60,
                what="every failed record retried")
    seen = got(lc)
    assert sum(1 for _ in seen) == n
    assert {k for k, c in seen.items() if c > 1} == failing
    times = got_times(lc)
    for t, p, o in failing:
        first, second = times[f"{t}/{p}@{o}"]
        assert second - first >= initial * 0.95, (o, second - first)
    wait_committed_to_end(lc, bs, group, topic, end, timeout=COMMIT_MS / 1000 * 10 + 10)


def test_a_record_failing_past_max_retries_is_acked_and_the_commits_go_on(
        cluster, kafka_broker, kafka_topic):
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=1)
    end = produce(bs, topic, values(50))
    group = f"g-{topic}"
    config = KafkaSpoutConfig(bs, topics=[topic], group_id=group,
                              offset_commit_period_ms=COMMIT_MS,
                              retry=RetryBackoff(delay_period_ms=10, max_retries=2))
    lc = cluster(spout_topology(config, spout_tasks=1), {"test.kafka.fail.always": 7})
    wait_committed_to_end(lc, bs, group, topic, end, timeout=30)
    seen = got(lc)
    assert seen[(topic, 0, 7)] == 3  # the first attempt and two retries
    assert all(c == 1 for k, c in seen.items() if k[2] != 7) and len(seen) == 50


def test_max_uncommitted_offsets_pauses_the_partition(cluster, kafka_broker, kafka_topic):
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=1)
    produce(bs, topic, values(2000))
    bound, batch = 100, 20
    config = KafkaSpoutConfig(bs, topics=[topic], group_id=f"g-{topic}",
                              offset_commit_period_ms=COMMIT_MS, max_uncommitted_offsets=bound,
                              max_poll_records=batch)
    # Offset 0 is never acked: nothing can be committed, so the spout must stop at the bound.
    lc = cluster(spout_topology(config, spout_tasks=1), {"test.kafka.hold": 0,
                                                         "topology.message.timeout.secs": 300})

    def paused():
        return any("max_uncommitted_offsets" in lc.log_tail(w, 200) for w in lc.workers)
    lc.wait_for(paused, timeout=30, what="the spout's pause")

    def settled():  # what was polled before the pause has reached the recorder
        before = len(got(lc))
        time.sleep(COMMIT_MS / 1000)
        return len(got(lc)) == before
    lc.wait_for(settled, timeout=30, what="the records emitted before the pause")
    at_pause = len(got(lc))
    # A poll's worth of records may come past the bound (Storm's allowance), no more.
    assert bound <= at_pause <= bound + batch, at_pause
    # It stays paused: over five commit periods (each one a commit that cannot move past
    # offset 0) nothing more is read.
    deadline = time.monotonic() + COMMIT_MS / 1000 * 5
    while time.monotonic() < deadline:
        assert len(got(lc)) == at_pause
        time.sleep(0.1)


def test_first_poll_strategies_follow_whose_commit_it_is(cluster, kafka_broker, kafka_topic):
    from confluent_kafka import Consumer, TopicPartition
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=1)
    produce(bs, topic, values(20))
    group = f"g-{topic}"
    # Another topology committed offset 12 for this group.
    c = Consumer({"bootstrap.servers": bs, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, 0, 12, metadata=json.dumps(
        {"topologyId": "someone-else-1-1", "taskId": 3, "threadName": "x"}))],
        asynchronous=False)
    c.close()
    starts = {}
    for strategy in ("UNCOMMITTED_EARLIEST", "EARLIEST"):
        config = KafkaSpoutConfig(bs, topics=[topic], group_id=group,
                                  first_poll_offset_strategy=strategy,
                                  offset_commit_period_ms=60_000)
        lc = cluster(spout_topology(config, spout_tasks=1))
        expect = 8 if strategy == "UNCOMMITTED_EARLIEST" else 20
        lc.wait_for(lambda: len(got(lc)) >= expect, timeout=30, what=f"{strategy}'s records")
        starts[strategy] = min(o for _, _, o in got(lc))
        lc.stop(drain_secs=5)
        os.rename(lc.events_dir, lc.events_dir + f"-{strategy}")
        os.mkdir(lc.events_dir)
    assert starts == {"UNCOMMITTED_EARLIEST": 12, "EARLIEST": 0}


def test_at_most_once_commits_before_emitting_and_never_replays(cluster, kafka_broker,
                                                                kafka_topic):
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=1)
    produce(bs, topic, values(100))
    group = f"g-{topic}"
    config = KafkaSpoutConfig(bs, topics=[topic], group_id=group,
                              processing_guarantee=ProcessingGuarantee.AT_MOST_ONCE)
    lc = cluster(spout_topology(config, spout_tasks=1), {"test.kafka.fail.first": 10})
    lc.wait_for(lambda: committed(bs, group, topic, 1)[0][0] == 100, timeout=30,
                what="the commit of everything polled")
    lc.wait_for(lambda: len(got(lc)) == 100, timeout=30, what="every record once")
    assert max(got(lc).values()) == 1  # failed ones are not replayed


def test_kafka_bolt_acks_each_tuple_once_the_broker_has_its_record(cluster, kafka_broker,
                                                                   kafka_topic):
    from kafka_topos import ToRecord
    bs = kafka_broker.bootstrap_servers
    src, out = kafka_topic(partitions=2), kafka_topic(partitions=3)
    n = 2000
    produce(bs, src, [(str(i).encode(), f"v{i}".encode()) for i in range(n)], partitions=2)
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(KafkaSpoutConfig(bs, topics=[src], group_id=f"g-{src}",
                                                     offset_commit_period_ms=COMMIT_MS)), 1)
    b.set_bolt("map", ToRecord(), 2).shuffle_grouping("kafka")
    b.set_bolt("out", KafkaBolt(bs, topic=out), 2).shuffle_grouping("map")
    lc = cluster(b.create_topology(), {"topology.max.spout.pending": 300})
    lc.wait_for(lambda: lc.total("acked", "kafka") >= n, timeout=60, what="every tree acked")
    records = read_all(bs, out, n, timeout=30)
    assert sorted((k, v) for _, _, k, v in records) == \
        sorted((str(i).encode(), f"V{i}".encode()) for i in range(n))
    # Java's murmur2 partitioner: one key, one partition.
    by_key = {}
    for p, _, k, _ in records:
        assert by_key.setdefault(k, p) == p
    assert lc.total("failed", "kafka") == 0


def test_an_unknown_topic_is_reported_within_seconds(cluster, kafka_broker):
    bs = kafka_broker.bootstrap_servers
    config = KafkaSpoutConfig(bs, topics=["no-such-topic-here"], group_id="g-missing",
                              partition_refresh_period_ms=500)
    lc = cluster(spout_topology(config, spout_tasks=1))

    def reported():
        return [e["error"] for hb in lc.heartbeats().values() for e in hb.get("errors", [])
                if "no-such-topic-here" in e["error"]]
    lc.wait_for(lambda: reported(), timeout=15, what="the unknown topic's error")
    assert "not found on bootstrap.servers=" + bs in reported()[0]
    assert not lc.crashed()


def test_unreachable_brokers_are_reported_within_seconds(cluster):
    from squall.deploy.net import free_port
    where = f"127.0.0.1:{free_port('127.0.0.1')}"
    config = KafkaSpoutConfig(where, topics=["t"], group_id="g-nobody",
                              request_timeout_secs=2, partition_refresh_period_ms=500)
    lc = cluster(spout_topology(config, spout_tasks=1))

    def reported():
        return [e["error"] for hb in lc.heartbeats().values() for e in hb.get("errors", [])
                if where in e["error"]]
    lc.wait_for(lambda: reported(), timeout=20, what="the unreachable brokers' error")
    assert not lc.crashed()


def test_a_record_that_does_not_deserialize_is_reported_with_its_offset_and_failed(
        cluster, kafka_broker, kafka_topic):
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=1)
    end = produce(bs, topic, [b'{"n": 1}', b"not json", b'{"n": 3}'])

    def to_n(record):
        return [record.topic, record.partition, record.offset, record.value["n"]]
    config = KafkaSpoutConfig(bs, topics=[topic], group_id=f"g-{topic}",
                              offset_commit_period_ms=COMMIT_MS,
                              value_deserializer=json.loads,
                              retry=RetryBackoff(delay_period_ms=10, max_retries=1),
                              record_translator=SimpleRecordTranslator(
                                  to_n, ["topic", "partition", "offset", "n"]))
    lc = cluster(spout_topology(config, spout_tasks=1))

    def reported():
        return [e["error"] for hb in lc.heartbeats().values() for e in hb.get("errors", [])
                if f"{topic}/0@1" in e["error"]]
    lc.wait_for(lambda: reported() and len(got(lc)) == 2, timeout=20,
                what="the bad record's report")
    assert "JSONDecodeError" in reported()[0]
    assert set(got(lc)) == {(topic, 0, 0), (topic, 0, 2)}
    wait_committed_to_end(lc, bs, f"g-{topic}", topic, end, timeout=20)  # skipped past retries
    assert not lc.crashed()


def test_a_pattern_subscription_routes_each_topic_to_its_stream(cluster, kafka_broker):
    from kafka_topos import OffsetRecorder
    from squall.connectors.kafka import ByTopicRecordTranslator, DefaultRecordTranslator
    bs = kafka_broker.bootstrap_servers
    tag = os.urandom(3).hex()
    clicks, views, other = f"clicks-{tag}", f"views-{tag}", f"other-{tag}"
    for t in (clicks, views, other):
        kafka_broker.create_topic(t, 2)
    produce(bs, clicks, values(30), partitions=2)
    produce(bs, views, values(20), partitions=2)
    produce(bs, other, values(10), partitions=2)
    translator = ByTopicRecordTranslator()
    translator.for_topic(clicks, DefaultRecordTranslator())  # the default stream
    translator.for_topic(views, lambda r: [r.topic, r.partition, r.offset, r.value],
                         ["topic", "partition", "offset", "value"], stream="views")
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(KafkaSpoutConfig(
        bs, topic_pattern=rf"(clicks|views)-{tag}", group_id=f"g-{tag}",
        record_translator=translator, partition_refresh_period_ms=500)), 2)
    b.set_bolt("rec", OffsetRecorder(), 1).shuffle_grouping("kafka")
    b.set_bolt("views", OffsetRecorder(), 1).shuffle_grouping("kafka", "views")
    lc = cluster(b.create_topology())
    lc.wait_for(lambda: len(got(lc)) == 30, timeout=30, what="every click")
    lc.wait_for(lambda: len(events_of(lc.events_dir, "views", "got")) == 20, timeout=30,
                what="every view")
    assert {t for t, _, _ in got(lc)} == {clicks}  # the other topic is not subscribed
    assert {p.split("/")[0] for p in events_of(lc.events_dir, "views", "got")} == {views}


def test_max_spout_pending_bounds_the_records_in_flight(cluster, kafka_broker, kafka_topic):
    from kafka_topos import HoldAll
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=1)
    produce(bs, topic, values(500))
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(KafkaSpoutConfig(bs, topics=[topic])), 1)
    b.set_bolt("hold", HoldAll(), 1).shuffle_grouping("kafka")
    pending = 37
    lc = cluster(b.create_topology(), {"topology.max.spout.pending": pending,
                                       "topology.message.timeout.secs": 300})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "hold", "held")) == pending, timeout=30,
                what="max.spout.pending records held")
    lc.wait_for(lambda: lc.total("pending", "kafka") == pending, timeout=10,
                what="the spout's pending count")
    # Many heartbeats later the spout has emitted nothing more.
    emitted = lc.total("emitted", "kafka")
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        assert len(events_of(lc.events_dir, "hold", "held")) == pending
        time.sleep(0.1)
    assert lc.total("emitted", "kafka") == emitted == pending


def test_an_unreachable_broker_does_not_hold_the_worker(cluster):
    """The spout's broker calls run off the worker's loop: another spout in the same worker
    keeps emitting and every one of its trees is acked."""
    from squall.deploy.net import free_port
    from topos import NumberSpout, RecordingBolt
    where = f"127.0.0.1:{free_port('127.0.0.1')}"
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(KafkaSpoutConfig(where, topics=["t"],
                                                     request_timeout_secs=2)), 1)
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("numbers")
    b.set_bolt("rec", RecordingBolt(), 1).shuffle_grouping("kafka")
    lc = cluster(b.create_topology(), {"topology.workers": 1, "test.spout.count": 2000})
    lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) == 2000, timeout=30,
                what="every number acked while the broker is unreachable")
    assert not lc.crashed()


def test_kafka_bolt_fails_tuples_it_cannot_write_and_the_replays_get_through(
        cluster, kafka_broker, kafka_topic, tmp_path):
    """The output broker stops mid-run: writes time out, the bolt fails their tuples, the
    spout replays them; once the broker is back every record is in the output topic."""
    from kafka_topos import ValueToRecord
    from squall.deploy.kafka import LocalKafka
    bs = kafka_broker.bootstrap_servers
    src = kafka_topic(partitions=1)
    out_broker = LocalKafka(str(tmp_path / "out")).start()
    try:
        out_broker.create_topic("out", 1)
        n = 300
        produce(bs, src, [(b"k%d" % i, b"v%d" % i) for i in range(n)])
        out_port = out_broker.port
        out_broker.stop(_keep_dir=True)  # down before the topology writes anything
        b = TopologyBuilder()
        b.set_spout("kafka", KafkaSpout(KafkaSpoutConfig(
            bs, topics=[src], group_id=f"g-{src}",
            retry=RetryBackoff(initial_delay_ms=200, max_delay_ms=1000))), 1)
        b.set_bolt("map", ValueToRecord(), 1).shuffle_grouping("kafka")
        b.set_bolt("out", KafkaBolt(f"127.0.0.1:{out_port}", topic="out",
                                    props={"message.timeout.ms": 1000}), 1) \
            .shuffle_grouping("map")
        lc = cluster(b.create_topology(), {"topology.message.timeout.secs": 30})
        lc.wait_for(lambda: lc.total("failed", "kafka") >= n, timeout=30,
                    what="every write failed while the broker is down")
        assert any("delivery failed" in e["error"] for hb in lc.heartbeats().values()
                   for e in hb.get("errors", []))
        out_broker = LocalKafka(str(tmp_path / "out"), out_port).start()
        lc.wait_for(lambda: lc.total("acked", "kafka") == n, timeout=60,
                    what="every record acked once the broker is back")
        records = read_all(out_broker.bootstrap_servers, "out", n, timeout=30)
        assert {v for *_, v in records} == {b"v%d" % i for i in range(n)}
    finally:
        out_broker.stop()


def test_fire_and_forget_acks_at_once_whatever_the_broker_says(cluster, kafka_broker,
                                                                kafka_topic):
    from kafka_topos import ValueToRecord
    from squall.deploy.net import free_port
    bs = kafka_broker.bootstrap_servers
    src = kafka_topic(partitions=1)
    produce(bs, src, [(b"k%d" % i, b"v%d" % i) for i in range(100)])
    nowhere = f"127.0.0.1:{free_port('127.0.0.1')}"
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(KafkaSpoutConfig(bs, topics=[src])), 1)
    b.set_bolt("map", ValueToRecord(), 1).shuffle_grouping("kafka")
    b.set_bolt("out", KafkaBolt(nowhere, topic="out", fire_and_forget=True), 1) \
        .shuffle_grouping("map")
    lc = cluster(b.create_topology())
    lc.wait_for(lambda: lc.total("acked", "kafka") == 100, timeout=30,
                what="every tree acked with no broker to write to")
    assert lc.total("failed", "kafka") == 0


class _Context:
    """What a spout reads of its TopologyContext, for driving one in this process."""
    this_component_id, this_task_id, this_task_index, topology_id = "kafka", 1, 0, "inproc-1-1"

    def component_tasks(self, component):
        return [1]


class _Collector:
    def __init__(self):
        self.out = []

    def emit(self, values, stream="default", msg_id=None):
        self.out.append(values)

    def report_error(self, error):
        raise AssertionError(error)


def test_a_rewind_takes_every_partition_back_to_the_checkpoint_even_one_it_had_not_read(
        kafka_broker, kafka_topic):
    """Barrier checkpointing: a partition with no position in the checkpoint (nothing of it
    emitted by then) goes back to where it started, so what was emitted since is read again."""
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=2)
    produce(bs, topic, values(10), partitions=2)  # 5 records in each partition
    spout = KafkaSpout(KafkaSpoutConfig(bs, topics=[topic], first_poll_offset_strategy="EARLIEST"))
    col = _Collector()
    spout.open({"topology.state.checkpoint.mode": "barrier"}, _Context(), col)
    try:
        deadline = time.monotonic() + 30
        while len(spout.parts) < 2 and time.monotonic() < deadline:
            spout.next_tuple()
            time.sleep(0.01)
        spout.restore(None)  # no checkpoint yet
        # Read partition 0 only, then checkpoint.
        spout.consumer.pause([spout.parts[(topic, 1)].tp])
        while len(col.out) < 5 and time.monotonic() < deadline:
            spout.next_tuple()
        snap = spout.snapshot()
        assert snap == {f"{topic}/0": 5, f"{topic}/1": -1}, snap
        spout.consumer.resume([spout.parts[(topic, 1)].tp])
        while len(col.out) < 10 and time.monotonic() < deadline:
            spout.next_tuple()
        assert sorted((v[1], v[2]) for v in col.out) == [(p, o) for p in (0, 1) for o in range(5)]
        col.out.clear()
        spout.restore(snap)  # the checkpoint: partition 1 had given nothing
        while len(col.out) < 5 and time.monotonic() < deadline:
            spout.next_tuple()
        for _ in range(50):
            spout.next_tuple()
        assert sorted((v[1], v[2]) for v in col.out) == [(1, o) for o in range(5)]
    finally:
        spout.close()
