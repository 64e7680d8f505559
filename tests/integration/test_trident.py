"""Trident on real worker processes: a word count over line files into Redis counts every word
exactly once."""

from __future__ import annotations

import collections
import contextlib
import json

import pytest

from squall.client.trident.line_files import TransactionalLineFiles
from squall.client.trident.state.redis_map import RedisMapState
from trident_topos import word_count

pytestmark = pytest.mark.integration


def write_input(tmp_path, n_files=2, lines=300):
    files, expected = [], collections.Counter()
    for f in range(n_files):
        path = tmp_path / f"in-{f}.txt"
        text = [f"w{(f * 7 + i) % 13} w{i % 5} common" for i in range(lines)]
        path.write_text("".join(t + "\n" for t in text))
        for t in text:
            expected.update(t.split())
        files.append(str(path))
    return files, expected


def stored_counts(redis_server, factory, conf):
    client = redis_server.client()
    try:
        raw = client.hgetall(factory.hash_key(conf))
    finally:
        client.close()
    out = {}
    for k, v in raw.items():
        key = json.loads(k)
        out[key[0]] = json.loads(v)[1]  # [txid, value]
    return out


def test_transactional_word_count_counts_each_word_once(cluster, tmp_path, redis_server,
                                                       redis_conf):
    files, expected = write_input(tmp_path)
    factory = RedisMapState.transactional(None, "counts")
    topo = word_count(TransactionalLineFiles(files, batch_lines=50), factory)
    conf = dict(redis_conf, **{"topology.workers": 2, "trident.transactional.state": "memory",
                               "topology.max.spout.pending": 3,
                               "topology.trident.batch.emit.interval.millis": 20})
    lc = cluster(topo, conf, name="trident")
    lc.wait_for(lambda: stored_counts(redis_server, factory, lc.conf) == dict(expected),
                timeout=60, what="exact counts in Redis")



@contextlib.contextmanager
def run_recording(cluster, tmp_path, redis_server, redis_conf, make, name):
    """Topology ``make(spout)`` over 200 lines in batches of 20, on 2 workers, its records
    appended to a Redis list (``test.redis.list``): the cluster and a reader of that list."""
    files, _ = write_input(tmp_path, n_files=1, lines=200)
    key = redis_conf["trident.redis.key.prefix"] + name
    conf = dict(redis_conf, **{"topology.workers": 2, "trident.transactional.state": "memory",
                               "topology.trident.batch.emit.interval.millis": 20,
                               "test.redis.list": key})
    lc = cluster(make(TransactionalLineFiles(files, batch_lines=20)), conf, name=name)
    client = redis_server.client()
    try:
        yield lc, lambda: client.lrange(key, 0, -1)
    finally:
        client.close()


def test_without_state_the_commit_completes_on_its_own_and_batches_keep_coming(
        cluster, tmp_path, redis_server, redis_conf):
    from trident_topos import stateless_count
    with run_recording(cluster, tmp_path, redis_server, redis_conf, stateless_count,
                       "stateless") as (lc, records):
        def totals():
            return [int(x) for x in records()]
        # Ten batches of 20 lines, then empty ones (a global count of nothing is 0).
        lc.wait_for(lambda: len(totals()) >= 12, timeout=30, what="a dozen batches")
        assert totals()[:10] == [20] * 10 and set(totals()[10:]) == {0}


def test_partition_aggregate_counts_each_partitions_share_on_real_workers(
        cluster, tmp_path, redis_server, redis_conf):
    """Storm's partitionAggregate: each of the 2 tasks emits its own share of every batch
    (no global count), and the shares add up to the lines."""
    from trident_topos import partition_count
    with run_recording(cluster, tmp_path, redis_server, redis_conf, partition_count,
                       "partials") as (lc, records):
        def partials():
            return [tuple(map(int, x.split(b":"))) for x in records()]
        # Ten batches of 20 lines, then empty ones: each task's count of its share.
        lc.wait_for(lambda: sum(n for _, n in partials()) == 200 and
                    {i for i, _ in partials()} == {0, 1}, timeout=30,
                    what="every line counted, by both tasks")
        got = partials()
        assert all(0 <= n <= 20 for _, n in got), got  # shares, never more than a batch
        by_task = collections.Counter(i for i, _ in got)
        assert abs(by_task[0] - by_task[1]) <= 2, by_task  # each task emits every batch
