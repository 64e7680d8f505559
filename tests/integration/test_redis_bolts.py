"""storm-redis's bolts against a real Redis (the session's LocalRedis, Debian's redis-server):
each data type's command, errors reported with their key or address, and the bolts on real
worker processes: every record written and acked, Redis down then up."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from squall.client.tuple import Fields, Tuple
from squall.connectors.redis import (FieldFilterMapper, FieldLookupMapper, FieldStoreMapper,
                                     RedisConfig, RedisFilterBolt, RedisLookupBolt,
                                     RedisStoreBolt)
from squall.connectors import reports
from squall.deploy.net import free_port
from squall.deploy.redis import LocalRedis
from redis_topos import PREFIX, filter_then_lookup, store
from topos import events_of

pytestmark = pytest.mark.integration

#: The topologies' tuple timeout: a test waits a few of them at the most.
TIMEOUT_SECS = 10


class Collected:
    """A bolt's collector that keeps what the bolt did."""

    def __init__(self):
        self.emitted, self.acked, self.failed, self.errors = [], [], [], []

    def emit(self, values, stream="default", anchors=None):
        self.emitted.append((stream, values, anchors))

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)

    def report_error(self, error):
        self.errors.append(str(error))


def prepared(bolt, conf):
    out = Collected()
    bolt.prepare(conf, SimpleNamespace(this_component_id="redis-bolt"), out)
    return bolt, out


def tuples(fields, *rows):
    return [Tuple(list(r), "src", "default", 1, None, Fields(fields)) for r in rows]


@pytest.fixture
def client(redis_server):
    c = redis_server.client(decode_responses=True)
    yield c
    c.close()


@pytest.mark.parametrize("data_type, extra, value, stored", [
    ("string", None, "v1", lambda c, p, k: c.get(k) == "v1"),
    ("list", None, "v1", lambda c, p, k: c.lrange(k, 0, -1) == ["v1", "v1"]),
    ("hash", "h", 7, lambda c, p, k: c.hget(p + "h", k) == "7"),
    ("set", None, "v1", lambda c, p, k: c.smembers(k) == {"v1"}),
    ("sorted_set", "z", "2.5", lambda c, p, k: c.zscore(p + "z", k) == 2.5),
    ("hyper_log_log", None, "v1", lambda c, p, k: c.pfcount(k) == 1),
    ("geo", "g", (13.361389, 38.115556), lambda c, p, k: abs(c.geopos(p + "g", k)[0][0] - 13.361389) < 1e-4),
])
def test_store_writes_each_data_type_and_acks_each_tuple(client, redis_conf, data_type, extra,
                                                         value, stored):
    p = redis_conf[PREFIX]
    bolt, out = prepared(RedisStoreBolt(None, FieldStoreMapper(
        data_type, "k", "v", additional_key=p + extra if extra else None)), redis_conf)
    batch = tuples(["k", "v"], (p + "key", value), (p + "key", value))
    bolt.execute_batch(batch)
    assert out.acked == batch and not out.failed and not out.errors
    assert stored(client, p, p + "key")
    bolt.cleanup()


def test_lookup_reads_each_data_type_and_emits_anchored_to_the_input(client, redis_conf):
    p = redis_conf[PREFIX]
    client.set(p + "s", "text")
    client.rpush(p + "l", "head", "tail")
    client.hset(p + "h", "field", "hv")
    client.sadd(p + "set", "a", "b")
    client.zadd(p + "z", {"m": 4})
    client.pfadd(p + "hll", "x", "y", "z")
    client.geoadd(p + "g", (2.35, 48.85, "paris"))
    cases = [("string", None, p + "s", "text"), ("list", None, p + "l", "head"),
             ("hash", p + "h", "field", "hv"), ("set", None, p + "set", 2),
             ("sorted_set", p + "z", "m", 4.0), ("hyper_log_log", None, p + "hll", 3),
             ("string", None, p + "missing", None), ("hash", p + "h", "nope", None)]
    for data_type, extra, key, want in cases:
        bolt, out = prepared(RedisLookupBolt(None, FieldLookupMapper(
            data_type, "k", ("k", "v"), additional_key=extra)), redis_conf)
        [t] = tuples(["k"], (key,))
        bolt.execute_batch([t])
        assert out.emitted == [("default", [key, want], t)], (data_type, out.emitted)
        assert out.acked == [t]
        bolt.cleanup()
    bolt, out = prepared(RedisLookupBolt(None, FieldLookupMapper(
        "geo", "k", additional_key=p + "g")), redis_conf)
    bolt.execute_batch(tuples(["k"], ("paris",), ("nowhere",)))
    (_, (_, pos), _), (_, (_, none), _) = out.emitted
    assert abs(pos[0] - 2.35) < 1e-4 and abs(pos[1] - 48.85) < 1e-4 and none is None
    bolt.cleanup()


def test_filter_lets_through_only_the_tuples_whose_key_is_there(client, redis_conf):
    p = redis_conf[PREFIX]
    client.sadd(p + "allowed", "ann", "bob")
    bolt, out = prepared(RedisFilterBolt(None, FieldFilterMapper(
        "set", "user", ["user", "n"], additional_key=p + "allowed"), stream="kept"), redis_conf)
    batch = tuples(["user", "n"], ("ann", 1), ("eve", 2), ("bob", 3))
    bolt.execute_batch(batch)
    assert [(s, v) for s, v, _ in out.emitted] == [("kept", ["ann", 1]), ("kept", ["bob", 3])]
    assert out.acked == batch  # the dropped one is acked too: it was processed
    client.set(p + "flag", "1")
    bolt, out = prepared(RedisFilterBolt(None, FieldFilterMapper("string", "k", ["k"])),
                         redis_conf)
    bolt.execute_batch(tuples(["k"], (p + "flag",), (p + "absent",)))
    assert [v for _, v, _ in out.emitted] == [[p + "flag"]]


def test_a_tuple_that_does_not_map_is_failed_and_reported_with_its_key(client, redis_conf):
    p = redis_conf[PREFIX]
    bolt, out = prepared(RedisStoreBolt(None, FieldStoreMapper(
        "sorted_set", "k", "v", additional_key=p + "z")), redis_conf)
    good, bad, keyless = tuples(["k", "v"], ("a", 1), ("b", "not a number"), ({"x": 1}, 2))
    bolt.execute_batch([good, bad, keyless])
    assert out.acked == [good] and out.failed == [bad, keyless]
    assert len(out.errors) == 1  # the second within the second is counted, not reported
    assert "key 'b'" in out.errors[0] and "score, a number" in out.errors[0]
    assert client.zscore(p + "z", "a") == 1.0 and client.zscore(p + "z", "b") is None
    reports.REPORT_EVERY_SECS, before = 0.0, reports.REPORT_EVERY_SECS
    try:
        bolt.execute_batch([keyless])
    finally:
        reports.REPORT_EVERY_SECS = before
    assert "no key" in out.errors[1] and "must be a str, bytes or number, not dict" in out.errors[1]
    assert "(1 more since the last report)" in out.errors[1]


def test_a_command_redis_refuses_fails_only_its_own_tuple(client, redis_conf):
    p = redis_conf[PREFIX]
    client.set(p + "taken", "a string")
    bolt, out = prepared(RedisStoreBolt(None, FieldStoreMapper("list", "k", "v")), redis_conf)
    ok1, wrong, ok2 = tuples(["k", "v"], (p + "l1", "x"), (p + "taken", "y"), (p + "l2", "z"))
    bolt.execute_batch([ok1, wrong, ok2])
    assert out.acked == [ok1, ok2] and out.failed == [wrong]
    assert f"key '{p}taken'" in out.errors[0] and "WRONGTYPE" in out.errors[0]


def test_unreachable_redis_fails_the_step_and_names_the_address(redis_conf):
    port = free_port()
    bolt, out = prepared(RedisStoreBolt(RedisConfig(port=port, timeout_secs=1),
                                        FieldStoreMapper("string", "k", "v")), redis_conf)
    batch = tuples(["k", "v"], ("a", 1), ("b", 2))
    bolt.execute_batch(batch)
    assert out.failed == batch and not out.acked
    assert f"Redis 127.0.0.1:{port} is unreachable" in out.errors[0]
    assert "2 tuple(s) were failed and will be replayed" in out.errors[0]


# -- on real workers ---------------------------------------------------------------------

def acked_once(lc, n):
    acks = events_of(lc.events_dir, "numbers", "ack")
    return sorted(int(a) for a in acks) == list(range(n))


def test_store_bolt_on_real_workers_writes_every_record_and_acks_each_once(
        cluster, client, redis_conf):
    n = 400
    conf = dict(redis_conf, **{"test.spout.count": n, "topology.message.timeout.secs":
                               TIMEOUT_SECS})
    lc = cluster(store().create_topology(), conf, name="redis-store")
    p = redis_conf[PREFIX]
    lc.wait_for(lambda: acked_once(lc, n), timeout=3 * TIMEOUT_SECS, what="every number acked")
    keys = [f"{p}n{i}" for i in range(n)]
    assert client.mget(keys) == [str(i) for i in range(n)]
    assert not events_of(lc.events_dir, "numbers", "fail")


def test_filter_and_lookup_on_real_workers(cluster, client, redis_conf):
    n = 60
    p = redis_conf[PREFIX]
    allowed = {f"{p}n{i}" for i in range(n) if i % 3 == 0}
    client.sadd(p + "allowed", *allowed)
    client.hset(p + "values", mapping={k: f"v-{k}" for k in allowed})
    conf = dict(redis_conf, **{"test.spout.count": n, "topology.message.timeout.secs":
                               TIMEOUT_SECS})
    topo = filter_then_lookup(p + "allowed", p + "values").create_topology()
    lc = cluster(topo, conf, name="redis-filter")
    lc.wait_for(lambda: acked_once(lc, n), timeout=3 * TIMEOUT_SECS, what="every number acked")
    got = sorted(events_of(lc.events_dir, "sink", "got"))
    assert got == sorted(f"{k} v-{k}" for k in allowed)


def test_redis_down_reports_the_address_then_every_record_lands_once_it_is_up(
        cluster, redis_conf, tmp_path):
    port = free_port()
    n = 100
    conf = dict(redis_conf, **{"trident.redis.port": port, "trident.redis.timeout.secs": 1,
                               "test.spout.count": n,
                               "topology.message.timeout.secs": TIMEOUT_SECS})
    lc = cluster(store(parallelism=1).create_topology(), conf, name="redis-down")

    def reported():
        return any(f"Redis 127.0.0.1:{port} is unreachable" in e["error"]
                   for hb in lc.heartbeats().values() for e in hb.get("errors", []))

    # Reported within seconds (a refused connection fails the step at once), not after the tuples'
    # timeout: the heartbeat carries it to the supervisor and on to `squall list`.
    lc.wait_for(reported, timeout=TIMEOUT_SECS, what="the unreachable Redis reported")
    assert not acked_once(lc, n)
    server = LocalRedis(str(tmp_path / "redis"), port=port)
    server.start()
    try:
        lc.wait_for(lambda: acked_once(lc, n), timeout=3 * TIMEOUT_SECS,
                    what="every number acked once Redis is up")
        c = server.client(decode_responses=True)
        try:
            assert c.mget([f"{redis_conf[PREFIX]}n{i}" for i in range(n)]) == \
                [str(i) for i in range(n)]
        finally:
            c.close()
        assert events_of(lc.events_dir, "numbers", "fail")  # they were replayed
    finally:
        server.stop()


class KeyRaises(FieldStoreMapper):
    """A user's mapper with a bug: its key raises, or is not text."""

    def key(self, tup):
        if tup["k"] == "boom":
            raise KeyError("no such thing")
        return None if tup["k"] == "none" else tup["k"]


def test_a_users_mapper_that_raises_fails_its_tuple_not_the_worker(client, redis_conf):
    p = redis_conf[PREFIX]
    bolt, out = prepared(RedisStoreBolt(None, KeyRaises("string", "k", "v")), redis_conf)
    good, boom, none = tuples(["k", "v"], (p + "ok", 1), ("boom", 2), ("none", 3))
    reports.REPORT_EVERY_SECS, before = 0.0, reports.REPORT_EVERY_SECS
    try:
        bolt.execute_batch([good, boom, none])
    finally:
        reports.REPORT_EVERY_SECS = before
    assert out.acked == [good] and out.failed == [boom, none]
    assert "KeyError: 'no such thing'" in out.errors[0]
    assert "the mapper's key must be a str, bytes or number, not NoneType" in out.errors[1]
    assert client.get(p + "ok") == "1"


def test_a_value_that_is_not_utf8_comes_back_replaced_not_raised(redis_server, redis_conf):
    p = redis_conf[PREFIX]
    raw = redis_server.client()
    try:
        raw.set(p + "bin", b"ok\xff\xfe")
    finally:
        raw.close()
    bolt, out = prepared(RedisLookupBolt(None, FieldLookupMapper("string", "k")), redis_conf)
    [t] = tuples(["k"], (p + "bin",))
    bolt.execute_batch([t])
    assert out.emitted == [("default", [p + "bin", "ok\ufffd\ufffd"], t)] and out.acked == [t]


def test_geo_takes_storms_longitude_colon_latitude_and_gives_a_list(client, redis_conf):
    p = redis_conf[PREFIX]
    store_bolt, out = prepared(RedisStoreBolt(None, FieldStoreMapper(
        "geo", "k", "v", additional_key=p + "g")), redis_conf)
    store_bolt.execute_batch(tuples(["k", "v"], ("rome", "12.4964:41.9028")))
    assert len(out.acked) == 1
    lookup, out = prepared(RedisLookupBolt(None, FieldLookupMapper(
        "geo", "k", additional_key=p + "g")), redis_conf)
    lookup.execute_batch(tuples(["k"], ("rome",)))
    [(_, [_, pos], _)] = out.emitted
    assert type(pos) is list and abs(pos[0] - 12.4964) < 1e-4 and abs(pos[1] - 41.9028) < 1e-4


def test_the_bolts_run_on_threads_of_their_own():
    # A round trip a step (and an unreachable server's connect timeout) must not hold the
    # worker's shared loop and every other executor on it.
    bolt = RedisStoreBolt(None, FieldStoreMapper("string", "k", "v"))
    assert bolt.get_component_configuration() == {"topology.executor.threaded": True}


@pytest.fixture
def redis_cluster(tmp_path):
    server = LocalRedis(str(tmp_path / "cluster"), cluster=True)
    server.start()
    yield server
    server.stop()


def test_the_bolts_against_a_redis_cluster(redis_cluster, redis_conf):
    config = RedisConfig(nodes=[f"127.0.0.1:{redis_cluster.port}"], timeout_secs=1)
    store_bolt, out = prepared(RedisStoreBolt(config, FieldStoreMapper("string", "k", "v")),
                               redis_conf)
    batch = tuples(["k", "v"], *[(f"key{i}", i) for i in range(50)])  # keys over many slots
    store_bolt.execute_batch(batch)
    assert out.acked == batch and not out.errors
    lookup, out = prepared(RedisLookupBolt(config, FieldLookupMapper("string", "k")), redis_conf)
    lookup.execute_batch(tuples(["k"], ("key7",), ("key42",)))
    assert [v for _, v, _ in out.emitted] == [["key7", "7"], ["key42", "42"]]
    store_bolt.cleanup()
    lookup.cleanup()
    # The cluster gone: a step fails (and will replay), the bolt itself does not raise.
    redis_cluster.stop()
    bolt, out = prepared(RedisStoreBolt(config, FieldStoreMapper("string", "k", "v")),
                         redis_conf)
    batch = tuples(["k", "v"], ("a", 1))
    bolt.execute_batch(batch)
    assert out.failed == batch and f"Redis Cluster 127.0.0.1:{redis_cluster.port} is " \
        "unreachable" in out.errors[0]
