"""The Kafka spout under faults, on a real local cluster (ZooKeeper, Nimbus, a supervisor
that restarts killed workers) and a real broker: kill -9 of the spout's worker and of a
bolt's worker over 100,000 records, a rebalance that changes the spout's parallelism, and a
broker restart. Every record is processed at least once and the commits end at the log end."""

from __future__ import annotations

import os
import signal
from collections import Counter

import pytest

from cluster_helpers import kill_and_wait, worker_heartbeats
from kafka_fixtures import broker_gets_right, committed, local_cluster, produce
from squall.client import TopologyBuilder
from squall.connectors.kafka import KafkaSpout, KafkaSpoutConfig
from squall.deploy.kafka import LocalKafka
from topos import events_of
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 6      # topology.message.timeout.secs: a lost tree is replayed after at most 2x
COMMIT_MS = 500


@pytest.fixture(scope="module")
def local(tmp_path_factory, kafka_broker):
    with local_cluster(str(tmp_path_factory.mktemp("kafka-local")), kafka_broker) as lc:
        yield lc


def workers_of(lc, component: str) -> dict[int, set]:
    """pid -> the components of every live worker running a task of ``component``."""
    out = {}
    for hb in worker_heartbeats(lc):
        comps = {s.get("component") for s in hb.get("tasks", {}).values()}
        if component in comps:
            out[int(hb["pid"])] = comps
    return out


def seen(events_dir) -> Counter:
    out = Counter()
    for p in events_of(events_dir, "rec", "got"):
        out[p.split()[0]] += 1
    return out


def run(lc, tmp_path, kafka, name, n, partitions, fault, spout_tasks=2, workers=3,
        spout_executors=None):
    from kafka_topos import OffsetRecorder
    topic = f"{name}-{os.urandom(3).hex()}"
    kafka.create_topic(topic, partitions)
    end = produce(kafka.bootstrap_servers, topic, [b"x%d" % i for i in range(n)],
                  partitions=partitions)
    events = tmp_path / "events"
    events.mkdir()
    group = f"g-{topic}"
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(KafkaSpoutConfig(
        topics=[topic], group_id=group, offset_commit_period_ms=COMMIT_MS)),
        spout_executors or spout_tasks).set_num_tasks(spout_tasks)
    b.set_bolt("rec", OffsetRecorder(), 2).fields_grouping("kafka", ["offset"])
    conf = {"topology.workers": workers, "test.events.dir": str(events),
            "topology.message.timeout.secs": TIMEOUT, "topology.max.spout.pending": 2000}
    lc.submit(name, b.create_topology(), conf, HERE)
    try:
        # Mid-stream: a fifth of the records processed, most still to come.
        poll_for(lambda: len(seen(str(events))) > n // 5, timeout=60,
                 interval=0.2, what="a fifth of the records")
        fault()
        def at_end():
            got = committed(kafka.bootstrap_servers, group, topic, partitions)
            return {p: c[0] for p, c in got.items()} == end
        poll_for(at_end, timeout=90 + 4 * TIMEOUT, interval=0.5,
                 what=f"commits at the log end {end}")
        counts = seen(str(events))
        expected = {f"{topic}/{p}@{o}" for p in range(partitions) for o in range(end[p])}
        missing = expected - set(counts)
        assert not missing, f"{len(missing)} records never processed, e.g. {sorted(missing)[:5]}"
        assert set(counts) == expected
        return counts
    finally:
        kill_and_wait(lc, name)


def kill_one(lc, component, avoid=None):
    def fault():
        victims = {pid: comps for pid, comps in workers_of(lc, component).items()
                   if avoid is None or avoid not in comps}
        assert victims, f"no worker runs {component} without {avoid}"
        os.kill(next(iter(victims)), signal.SIGKILL)
    return fault


def test_kill_9_of_the_spouts_worker_loses_no_record(local, tmp_path, kafka_broker):
    counts = run(local, tmp_path, kafka_broker, "kafka-kill-spout", 100_000, 4,
                 kill_one(local, "kafka"))
    replayed = sum(c - 1 for c in counts.values())
    print(f"\nkill -9 of the spout's worker: {replayed} records processed again")


def test_kill_9_of_a_bolts_worker_loses_no_record(local, tmp_path, kafka_broker):
    # One spout task: some worker runs a recorder task and no spout.
    counts = run(local, tmp_path, kafka_broker, "kafka-kill-bolt", 100_000, 4,
                 kill_one(local, "rec", avoid="kafka"), spout_tasks=1)
    replayed = sum(c - 1 for c in counts.values())
    print(f"\nkill -9 of a bolt's worker: {replayed} records processed again")


def test_rebalancing_the_spouts_parallelism_moves_partitions_without_loss(
        local, tmp_path, kafka_broker):
    # Four spout tasks on two executors, then on four: their partitions move to new
    # executors and workers mid-stream (Storm's rebalance: tasks keep their ids).
    before = {}

    def rebalance():
        before.update(workers_of(local, "kafka"))
        with local.client() as nimbus:
            nimbus.rebalance("kafka-rebalance", wait_secs=1, executors={"kafka": 4})
        poll_for(lambda: set(workers_of(local, "kafka")) - set(before), timeout=30,
                 what="spout tasks in new workers")
    run(local, tmp_path, kafka_broker, "kafka-rebalance", 30_000, 6, rebalance,
        spout_tasks=4, spout_executors=2)


@pytest.mark.skipif(not broker_gets_right("restart"), reason="Tansu keeps nothing across "
                    "a restart (memory storage)")
def test_a_broker_restart_mid_run_loses_nothing(cluster, tmp_path):
    from kafka_topos import OffsetRecorder
    kafka = LocalKafka(str(tmp_path / "kafka")).start()
    try:
        topic = "restart"
        kafka.create_topic(topic, 2)
        n = 20_000
        end = produce(kafka.bootstrap_servers, topic, [b"r%d" % i for i in range(n)],
                      partitions=2)
        b = TopologyBuilder()
        b.set_spout("kafka", KafkaSpout(KafkaSpoutConfig(
            kafka.bootstrap_servers, topics=[topic], group_id="g-restart",
            offset_commit_period_ms=COMMIT_MS)), 1)
        b.set_bolt("rec", OffsetRecorder(), 2).fields_grouping("kafka", ["offset"])
        lc = cluster(b.create_topology(), {"topology.max.spout.pending": 500,
                                           "topology.message.timeout.secs": TIMEOUT})
        lc.wait_for(lambda: len(seen(lc.events_dir)) > n // 5, timeout=60, what="a fifth")
        port = kafka.port
        kafka.stop(_keep_dir=True)
        kafka = LocalKafka(str(tmp_path / "kafka"), port).start()
        lc.wait_for(lambda: {p: c[0] for p, c in committed(
            kafka.bootstrap_servers, "g-restart", topic, 2).items()} == end,
            timeout=60 + 4 * TIMEOUT, interval=0.5, what="commits at the log end")
        assert set(seen(lc.events_dir)) == {f"{topic}/{p}@{o}" for p in range(2)
                                            for o in range(end[p])}
        assert not lc.crashed()
    finally:
        kafka.stop()
