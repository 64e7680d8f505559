"""RedisStreamSpout against a real Redis (the session's LocalRedis): every entry processed
and acknowledged, failures replayed, a dead consumer's entries claimed back, a worker
killed mid-run, the group's lag as gauges."""

from __future__ import annotations

import collections
import json
import os
import signal
import time
import urllib.request

import pytest

from cluster_helpers import kill_and_wait, worker_heartbeats
from squall.client.web import read_token
from squall.deploy.net import free_port
from redis_topos import PREFIX, stream_reader
from squall.client import TopologyBuilder
from squall.connectors.redis import RedisConfig, RedisStreamSpout
from topos import NeverAck, events_of
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))

#: The topologies' tuple timeout, which is also how long another consumer's entries stay
#: theirs before a spout claims them: a test waits a few of them at the most.
TIMEOUT_SECS = 3


@pytest.fixture
def client(redis_server):
    c = redis_server.client(decode_responses=True)
    yield c
    c.close()


def fill(client, stream, n):
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(stream, {"n": i, "text": f"entry {i}"})
    return pipe.execute()


def group_state(client, stream, group):
    for g in client.xinfo_groups(stream):
        if g["name"] == group:
            return g
    return None


def settled(client, stream, group, n):
    """The group read all ``n`` entries and acknowledged every one."""
    g = group_state(client, stream, group)
    return g is not None and g["pending"] == 0 and g["entries-read"] == n and g["lag"] == 0


def conf_for(redis_conf, **extra):
    return {**redis_conf, "topology.message.timeout.secs": TIMEOUT_SECS,
            "topology.max.spout.pending": 100, **extra}


def test_every_entry_is_processed_and_acknowledged(cluster, client, redis_conf):
    stream, n = redis_conf[PREFIX] + "events", 500
    ids = fill(client, stream, n)
    lc = cluster(stream_reader(stream).create_topology(), conf_for(redis_conf), name="rs-all")
    lc.wait_for(lambda: settled(client, stream, "squall-rs-all", n),
                timeout=10 * TIMEOUT_SECS, what="every entry acknowledged")
    got = collections.Counter(events_of(lc.events_dir, "sink", "got"))
    assert set(got) == set(ids) and max(got.values()) == 1


def test_a_failed_entry_is_emitted_again_until_it_is_processed(cluster, client, redis_conf):
    stream, n = redis_conf[PREFIX] + "events", 200
    ids = fill(client, stream, n)
    lc = cluster(stream_reader(stream).create_topology(),
                 conf_for(redis_conf, **{"test.fail.every": 10}), name="rs-fail")
    lc.wait_for(lambda: settled(client, stream, "squall-rs-fail", n),
                timeout=10 * TIMEOUT_SECS, what="every entry acknowledged")
    failing = set(events_of(lc.events_dir, "sink", "failing"))
    got = set(events_of(lc.events_dir, "sink", "got"))
    assert len(failing) == n // 10 and failing <= got and got == set(ids)


def test_a_dead_consumers_entries_are_claimed_after_the_timeout(cluster, client, redis_conf):
    stream, n = redis_conf[PREFIX] + "events", 100
    ids = fill(client, stream, n)
    group = "squall-rs-claim"
    client.xgroup_create(stream, group, id="0")
    taken = client.xreadgroup(group, "a-consumer-that-died", {stream: ">"}, count=30)
    assert len(taken[0][1]) == 30  # delivered to it, never to be acknowledged
    lc = cluster(stream_reader(stream).create_topology(), conf_for(redis_conf),
                 name="rs-claim")
    lc.wait_for(lambda: settled(client, stream, group, n), timeout=10 * TIMEOUT_SECS,
                what="the dead consumer's entries claimed and acknowledged")
    assert set(events_of(lc.events_dir, "sink", "got")) == set(ids)
    consumers = {c["name"]: c["pending"] for c in client.xinfo_consumers(stream, group)}
    assert consumers["a-consumer-that-died"] == 0


@pytest.fixture(scope="module")
def local(tmp_path_factory, redis_server):
    """ZooKeeper, Nimbus, a supervisor that restarts killed workers and the UI, its
    topologies pointed at the session's Redis."""
    from squall.deploy.local import LocalCluster
    lc = LocalCluster({"topology.stats.freq.secs": 0.2, **redis_server.conf()}, slots=4,
                      base_dir=str(tmp_path_factory.mktemp("redis-local")), web=True)
    try:
        lc.start()
        yield lc
    finally:
        lc.close("test done")


def test_kill_9_of_a_spouts_worker_loses_no_entry(local, client, redis_conf, tmp_path):
    stream, n = redis_conf[PREFIX] + "events", 20_000
    ids = fill(client, stream, n)
    events = tmp_path / "events"
    events.mkdir()
    name, group = "rs-kill", "squall-rs-kill"
    local.submit(name, stream_reader(stream).create_topology(),
                 conf_for(redis_conf, **{"topology.workers": 2,
                                         "test.events.dir": str(events),
                                         "topology.max.spout.pending": 500}), HERE)
    try:
        poll_for(lambda: len(events_of(str(events), "sink", "got")) > n // 5, timeout=60,
                 interval=0.2, what="a fifth of the entries")
        spouts = [int(hb["pid"]) for hb in worker_heartbeats(local)
                  if any(t.get("component") == "entries" for t in hb.get("tasks", {}).values())]
        assert spouts, "no worker runs the spout"
        os.kill(spouts[0], signal.SIGKILL)
        # The supervisor restarts it; its task, the same consumer again, reads back what it
        # held, and what the dead process had in flight times out and is replayed.
        poll_for(lambda: settled(client, stream, group, n), timeout=60 + 4 * TIMEOUT_SECS,
                 interval=0.5, what="every entry acknowledged after the kill")
        got = collections.Counter(events_of(str(events), "sink", "got"))
        missing = set(ids) - set(got)
        assert not missing, f"{len(missing)} entries never processed, e.g. {sorted(missing)[:5]}"
        print(f"\nkill -9 of a spout's worker: {sum(got.values()) - n} entries processed again")
    finally:
        kill_and_wait(local, name)


def test_lag_and_pending_are_gauges_of_the_spout(cluster, client, redis_conf):
    # A sink that never acks and max.spout.pending 10: the spout reads a batch of 50 and the
    # next one ahead, and holds them (10 in flight, 90 read), so of 200 entries the group's
    # lag is 100 and its pending list 100.
    stream, n = redis_conf[PREFIX] + "events", 200
    fill(client, stream, n)
    b = TopologyBuilder()
    b.set_spout("entries", RedisStreamSpout(stream, batch=50), 1)
    b.set_bolt("sink", NeverAck(), 1).shuffle_grouping("entries")
    lc = cluster(b.create_topology(), conf_for(redis_conf, **{"topology.max.spout.pending": 10}),
                 name="rs-gauges")

    def gauges():
        return {m["family"]: m["value"] for s in lc.task_stats("entries")
                for m in (s.get("metrics") or {}).values() if "family" in m}

    lc.wait_for(lambda: gauges() == {"redis_stream_lag": 100, "redis_stream_pending": 100},
                timeout=10 * TIMEOUT_SECS, what="the gauges at lag 100 and pending 100")
    g = group_state(client, stream, "squall-rs-gauges")
    assert (g["lag"], g["pending"]) == (100, 100)


def api(lc, path, timeout=30):
    req = urllib.request.Request(f"{lc.ui.url}/api/v1/{path}")
    req.add_header("Authorization", f"Bearer {read_token(lc.conf)}")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def test_the_lag_endpoint_gives_the_groups_own_figures(local, client, redis_conf, tmp_path):
    stream, n = redis_conf[PREFIX] + "events", 300
    fill(client, stream, n)
    (tmp_path / "events").mkdir()
    tid = local.submit("rs-lag", stream_reader(stream).create_topology(),
                       conf_for(redis_conf, **{"test.events.dir": str(tmp_path / "events")}),
                       HERE)
    try:
        poll_for(lambda: settled(client, stream, "squall-rs-lag", n), timeout=10 * TIMEOUT_SECS,
                 interval=0.3, what="every entry acknowledged")
        with local.client() as nimbus:
            nimbus.deactivate("rs-lag")  # the spouts stop reading, once their workers see it
        def inactive():
            hbs = [hb for hb in worker_heartbeats(local) if hb.get("topology_id") == tid]
            return hbs and not any(hb.get("active") for hb in hbs)
        poll_for(inactive, timeout=10 * TIMEOUT_SECS, interval=0.2, what="its workers inactive")
        fill(client, stream, 40)
        lag = api(local, f"topology/{tid}/lag")["entries"]
        assert lag["spoutType"] == "REDIS_STREAM", lag
        assert lag["spoutLagResult"] == {stream: {"group": "squall-rs-lag", "length": n + 40,
                                                  "entriesRead": n, "lag": 40, "pending": 0}}
    finally:
        kill_and_wait(local, "rs-lag")


def test_an_absent_redis_gives_an_error_within_the_deadline(local, redis_conf, tmp_path):
    from squall.ui.kafka_lag import LAG_DEADLINE_SECS
    port = free_port()
    (tmp_path / "events").mkdir()
    b = TopologyBuilder()  # the spout's own RedisConfig: the cluster's Redis is not its
    b.set_spout("entries", RedisStreamSpout("s", RedisConfig(port=port, timeout_secs=1)), 1)
    b.set_bolt("sink", NeverAck(), 1).shuffle_grouping("entries")
    tid = local.submit("rs-lag-absent", b.create_topology(),
                       {"test.events.dir": str(tmp_path / "events")}, HERE,
                       initial_status="INACTIVE")
    try:
        t0 = time.monotonic()
        lag = api(local, f"topology/{tid}/lag", timeout=LAG_DEADLINE_SECS + 10)["entries"]
        assert f"127.0.0.1:{port}" in lag["errorInfo"], lag
        assert time.monotonic() - t0 < LAG_DEADLINE_SECS + 3
    finally:
        kill_and_wait(local, "rs-lag-absent")


def test_a_redis_restart_mid_run_loses_no_entry(cluster, redis_conf, tmp_path):
    """Redis stopped (SIGTERM: its append-only file flushed) and started again on the same
    port and directory mid-run: the group, its pending entries and the stream are back; the
    spouts report the outage, read on, and every entry is processed and acknowledged."""
    from squall.deploy.redis import LocalRedis
    server = LocalRedis(str(tmp_path / "redis"), port=free_port(), persistent=True)
    server.start()
    client = server.client(decode_responses=True)
    try:
        stream, n, group = "events", 20_000, "squall-rs-restart"
        ids = fill(client, stream, n)
        conf = conf_for(redis_conf, **{"trident.redis.port": server.port,
                                       "trident.redis.timeout.secs": 1})
        lc = cluster(stream_reader(stream).create_topology(), conf, name="rs-restart")
        lc.wait_for(lambda: len(events_of(lc.events_dir, "sink", "got")) > n // 5,
                    timeout=10 * TIMEOUT_SECS, what="a fifth of the entries")
        server.stop()
        client.close()
        # Down until the spouts say so (within seconds: a refused connection fails at once).
        lc.wait_for(lambda: any(f"127.0.0.1:{server.port} is unreachable" in e["error"]
                                for hb in lc.heartbeats().values()
                                for e in hb.get("errors", [])),
                    timeout=5 * TIMEOUT_SECS, what="the outage reported")
        server.start()
        client = server.client(decode_responses=True)
        def done():
            # A restarted Redis no longer knows the group's entries-read (its append-only
            # file does not keep it): the last entry delivered and nothing pending is it.
            g = group_state(client, stream, group)
            return g is not None and g["pending"] == 0 and g["last-delivered-id"] == ids[-1]

        lc.wait_for(done, timeout=20 * TIMEOUT_SECS,
                    what="every entry acknowledged after the restart")
        assert set(events_of(lc.events_dir, "sink", "got")) == set(ids)
    finally:
        client.close()
        server.stop()


def test_kill_9_of_a_store_bolts_worker_loses_no_entry(local, client, redis_conf, tmp_path):
    """Stream -> RedisStoreBolt(HASH): the worker of a store bolt task is killed -9 mid-run;
    what it had taken and not written is never acknowledged in the group, so it is claimed
    back after the tuple timeout and written: the hash ends with every entry."""
    from redis_topos import stream_to_hash
    stream, out, n = redis_conf[PREFIX] + "rows", redis_conf[PREFIX] + "out", 20_000
    fill(client, stream, n)
    name, group = "rs-store-kill", "squall-rs-store-kill"
    local.submit(name, stream_to_hash(stream, out).create_topology(),
                 conf_for(redis_conf, **{"topology.workers": 2,
                                         "topology.max.spout.pending": 500}), HERE)
    try:
        poll_for(lambda: client.hlen(out) > n // 5, timeout=60, interval=0.2,
                 what="a fifth of the entries stored")
        stores = [int(hb["pid"]) for hb in worker_heartbeats(local)
                  if any(t.get("component") == "store" for t in hb.get("tasks", {}).values())]
        assert stores, "no worker runs the store bolt"
        os.kill(stores[0], signal.SIGKILL)
        poll_for(lambda: settled(client, stream, group, n) and client.hlen(out) == n,
                 timeout=60 + 4 * TIMEOUT_SECS, interval=0.5,
                 what="every entry stored and acknowledged after the kill")
        assert client.hget(out, str(n - 1)) == f"entry {n - 1}"
    finally:
        kill_and_wait(local, name)
