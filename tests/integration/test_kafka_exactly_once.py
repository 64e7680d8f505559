"""Exactly-once output to Kafka under barrier checkpointing, on a real local cluster: a
KafkaSpout (its positions in the checkpoints) -> split -> TransactionalKafkaBolt (each
checkpoint's words one Kafka transaction), with a worker killed -9 mid-run. A read_committed
consumer of the output counts every word exactly once."""

from __future__ import annotations

import collections
import os

import psutil
import pytest

from cluster_helpers import kill_and_wait, worker_heartbeats
from kafka_fixtures import committed, local_cluster, produce, read_all
from squall.client import TopologyBuilder
from squall.connectors.kafka import (FieldNameBasedTupleToKafkaMapper, KafkaSpout,
                                     KafkaSpoutConfig, TransactionalKafkaBolt)
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def local(tmp_path_factory, kafka_broker, redis_server):
    with local_cluster(str(tmp_path_factory.mktemp("kafka-eos-local")), kafka_broker) as lc:
        yield lc



def topology(src, dst):
    from kafka_topos import SplitValue
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(KafkaSpoutConfig(topics=[src], group_id=f"g-{src}",
                                                     first_poll_offset_strategy="EARLIEST")), 2)
    b.set_bolt("split", SplitValue(), 2).shuffle_grouping("kafka")
    b.set_bolt("out", TransactionalKafkaBolt(
        topic=dst, mapper=FieldNameBasedTupleToKafkaMapper("word", "word")), 2) \
        .shuffle_grouping("split")
    return b.create_topology()


@pytest.mark.parametrize("victim", ["out", "kafka"])
def test_kill_9_mid_run_and_each_word_is_in_kafka_once(local, kafka_broker, redis_conf,
                                                       victim):
    bs = kafka_broker.bootstrap_servers
    src, dst = f"xo-src-{os.urandom(3).hex()}", f"xo-dst-{os.urandom(3).hex()}"
    kafka_broker.create_topic(src, 4)
    kafka_broker.create_topic(dst, 2)
    lines = [f"w{(i * 7) % 13} v{i % 5} common" for i in range(20_000)]
    end = produce(bs, src, [t.encode() for t in lines], partitions=4)
    expected = collections.Counter(w for t in lines for w in t.split())
    total = sum(expected.values())
    conf = dict(redis_conf, **{"topology.workers": 2, "topology.state.provider": "redis",
                               "topology.state.checkpoint.mode": "barrier",
                               "topology.state.checkpoint.interval.ms": 200})
    name = f"kafka-xo-{victim}"
    local.submit(name, topology(src, dst), conf, HERE)
    try:
        poll_for(lambda: len(read_all(bs, dst, total // 4, timeout=0.5)) >= total // 4,
                 timeout=60, interval=0.5, what="a quarter of the words committed")
        pid = next(int(hb["pid"]) for hb in worker_heartbeats(local)
                   if victim in {s.get("component") for s in hb["tasks"].values()})
        psutil.Process(pid).kill()
        poll_for(lambda: len(read_all(bs, dst, total, timeout=1)) >= total, timeout=120,
                 interval=1, what="every word committed after the kill")
        got = collections.Counter(v.decode() for *_, v in read_all(bs, dst, total + 1,
                                                                    timeout=3))
        assert got == expected, (sum(got.values()), total)
        # Completed checkpoints commit the spout's positions to its group: at the end, the log end.
        poll_for(lambda: {p: c[0] for p, c in committed(bs, f"g-{src}", src, 4).items()} == end,
                 timeout=30, interval=0.5, what="the group's offsets at the log end")
    finally:
        kill_and_wait(local, name)
