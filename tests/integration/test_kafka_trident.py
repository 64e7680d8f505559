"""Trident over Kafka: the transactional and opaque Kafka spouts count exactly through failed
batches and commits, and the Kafka state writes each batch once (a read_committed consumer
counts every word exactly once) through failed commits after the Kafka transaction committed,
and through kill -9 of a worker on a real cluster."""

from __future__ import annotations

import collections
import os

import psutil
import pytest

from cluster_helpers import kill_and_wait, worker_heartbeats
from kafka_fixtures import local_cluster, produce, read_all
from squall.client.trident.state.redis_map import RedisMapState
from test_trident_exactly_once import FAST, Observer, check_commit_order
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
STATES = {"transactional": RedisMapState.transactional, "opaque": RedisMapState.opaque}


def fill_lines(bs, topic, n, partitions=2):
    text = [f"w{(i * 7) % 13} v{i % 5} common" for i in range(n)]
    produce(bs, topic, [t.encode() for t in text], partitions=partitions)
    return collections.Counter(w for t in text for w in t.split())


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_kafka_trident_spouts_count_exactly_through_failures(cluster, kafka_broker, kafka_topic,
                                                             redis_conf, redis_server, kind):
    from kafka_trident_topos import word_count
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=2)
    expected = dict(fill_lines(bs, topic, 400))
    topo = word_count(kind, bs, topic, STATES[kind](None, "counts"), fail_split={3, 11},
                      fail_commits={7, 15})
    conf = dict(redis_conf, **FAST, **{"topology.workers": 2,
                                       "trident.transactional.state": "memory"})
    obs = Observer(redis_server, conf, kind)
    try:
        lc = cluster(topo, conf, name=f"kafka-trident-{kind}")
        lc.wait_for(lambda: obs.counts() == expected, timeout=60,
                    what=f"exact counts (now {obs.counts()})")
        faults = [int(f.split(":")[0]) for f in obs.list("faults")]
        assert sorted(faults) == [3, 11]
        commits = obs.commits()
        assert sorted((p, t) for p, t, w in commits if w == "failed") == \
            sorted((p, t) for p in (0, 1) for t in (7, 15))
        check_commit_order(commits, partitions=2, replays_allowed=False)
    finally:
        obs.close()


def test_the_kafka_state_writes_each_batch_once_through_failed_commits(
        cluster, kafka_broker, kafka_topic, redis_conf, redis_server):
    """A commit that fails after its Kafka transaction committed replays the txid: the state
    recognises it (its txid is recorded in the same transaction) and writes nothing again."""
    from kafka_trident_topos import words_to_kafka
    bs = kafka_broker.bootstrap_servers
    src, dst = kafka_topic(partitions=2), kafka_topic(partitions=3)
    expected = fill_lines(bs, src, 400)
    total = sum(expected.values())
    topo = words_to_kafka(bs, src, dst, fail_split={4}, fail_commits={6, 13})
    conf = dict(redis_conf, **FAST, **{"topology.workers": 2,
                                       "trident.transactional.state": "memory"})
    obs = Observer(redis_server, conf, "transactional")
    try:
        lc = cluster(topo, conf, name="kafka-trident-eos")
        lc.wait_for(lambda: len(read_all(bs, dst, total, timeout=1)) >= total, timeout=60,
                    what="every word in the output topic")
        # Every failed commit was replayed, and a batch past them committed since.
        lc.wait_for(lambda: {t for _, t, w in obs.commits() if w == "failed"} == {6, 13}
                    and max(t for _, t, w in obs.commits() if w == "ok") > 14, timeout=30,
                    what="the failed commits replayed")
        got = collections.Counter(v.decode() for _, _, _, v in read_all(bs, dst, total + 1,
                                                                        timeout=3))
        assert got == expected, (sum(got.values()), total)
        # read_uncommitted sees the same: nothing was written twice, even outside a commit.
        raw = read_all(bs, dst, total + 1, timeout=3, isolation="read_uncommitted")
        assert len(raw) == total
    finally:
        obs.close()


@pytest.fixture(scope="module")
def local(tmp_path_factory, kafka_broker, redis_server):
    with local_cluster(str(tmp_path_factory.mktemp("kafka-trident-local")), kafka_broker) as lc:
        yield lc



def test_kill_9_of_a_worker_writing_the_kafka_state_writes_each_word_once(
        local, kafka_broker, tmp_path, redis_conf, redis_server):
    from kafka_trident_topos import words_to_kafka
    bs = kafka_broker.bootstrap_servers
    src, dst = f"eos-src-{os.urandom(3).hex()}", f"eos-dst-{os.urandom(3).hex()}"
    kafka_broker.create_topic(src, 2)
    kafka_broker.create_topic(dst, 2)
    expected = fill_lines(bs, src, 3000)
    total = sum(expected.values())
    conf = dict(redis_conf, **FAST, **{"topology.workers": 2})
    local.submit("kafka-eos-kill", words_to_kafka(None, src, dst, batch=20), conf, HERE)
    try:
        poll_for(lambda: len(read_all(bs, dst, total // 3, timeout=0.5)) >= total // 3,
                 timeout=60, interval=0.5, what="a third of the words written")
        # A worker writing a partition of the Kafka state (a Trident "persist" bolt), not
        # the one with the master coordinator: its open transaction dies with it.
        def comps(hb):
            return {s.get("component", "") for s in hb.get("tasks", {}).values()}
        writers = [hb for hb in worker_heartbeats(local) if any(c.endswith("-persist")
                                                         for c in comps(hb))]
        victim = next((hb for hb in writers if "$mastercoord-bg0" not in comps(hb)),
                      writers[0])
        psutil.Process(int(victim["pid"])).kill()
        poll_for(lambda: len(read_all(bs, dst, total, timeout=1)) >= total, timeout=120,
                 interval=1, what="every word written after the kill")
        got = collections.Counter(v.decode() for _, _, _, v in read_all(bs, dst, total + 1,
                                                                        timeout=3))
        assert got == expected, (sum(got.values()), total)
    finally:
        kill_and_wait(local, "kafka-eos-kill")
