"""Trident map states in a real Redis (LocalRedis): replay semantics, round trips, errors; LocalRedis itself."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from squall.client.trident.state import (OpaqueValue, RedisMapState, RedisUnavailable, StateError,
                                         TransactionalValue)
from squall.client.trident.state.backing import CODECS
from squall.client.trident.state.base import StateType
from squall.client.trident.state.redis_map import RedisBackingMap
from squall.deploy.net import free_port
from squall.deploy.redis import SERVER_ENV, LocalRedis, installation
from redis_fixtures import command_calls
from trident_ops import batch

pytestmark = pytest.mark.integration



@pytest.fixture
def client(redis_server):
    c = redis_server.client()
    yield c
    c.close()


@pytest.fixture
def make(redis_conf):
    """``make(kind, name, **options)`` builds a state of the given factory; all closed at teardown."""
    states = []

    def build(kind, name="counts", **options):
        options.setdefault("cache_size", 0)
        state = getattr(RedisMapState, kind)(redis_conf, name, **options).make_state({}, 0, 1)
        states.append(state)
        return state

    yield build
    for s in states:
        s.close()


def stored(client, redis_conf, name, state_type):
    """The state's hash, decoded: {key json: stored value}."""
    raw = client.hgetall(redis_conf["trident.redis.key.prefix"] + name)
    return {k.decode(): CODECS[state_type].decode(v) for k, v in raw.items()}


def test_transactional_replay_is_a_no_op_and_a_new_txid_applies(make, client, redis_conf):
    state = make("transactional")
    assert batch(state, 1, [("a",), ("b", 2)], [1, 10]) == [1, 10]
    assert batch(state, 2, [("a",)], [5]) == [6]
    restarted = make("transactional")  # a new task replays txid 2 from what Redis holds
    assert batch(restarted, 2, [("a",), ("b", 2)], [5, 1]) == [6, 11]
    assert stored(client, redis_conf, "counts", StateType.TRANSACTIONAL) == {
        '["a"]': TransactionalValue(2, 6), '["b",2]': TransactionalValue(2, 11)}
    assert restarted.multi_get([("a",), ("missing",)]) == [6, None]


def test_opaque_replay_recomputes_from_prev_and_new_txid_shifts(make, client, redis_conf):
    state = make("opaque")
    batch(state, 1, [("a",)], [10])
    batch(state, 2, [("a",), ("b",)], [1, 1])
    restarted = make("opaque")
    assert batch(restarted, 2, [("a",), ("b",)], [4, 0]) == [14, 0]
    assert batch(restarted, 3, [("a",)], [1]) == [15]
    assert stored(client, redis_conf, "counts", StateType.OPAQUE) == {
        '["a"]': OpaqueValue(3, 15, 14), '["b"]': OpaqueValue(2, 0, None)}
    state.begin_commit(3)
    assert state.multi_get([("a",)]) == [14]
    state.commit(3)


def test_two_partitions_share_one_hash_and_the_global_value_works(make, client, redis_conf):
    p0, p1 = make("opaque", "words"), make("opaque", "words")
    batch(p0, 1, [("x",)], [1])
    batch(p1, 1, [("y",)], [2])
    p0.begin_commit(2)
    p0.set({"total": 3})
    p0.commit(2)
    assert p1.multi_get([("x",), ("y",)]) == [1, 2] and p1.get() == {"total": 3}
    assert set(stored(client, redis_conf, "words", StateType.OPAQUE)) == {
        '["x"]', '["y"]', '["$SQUALL-MAP-STATE-GLOBAL$"]'}


def test_each_multi_get_and_multi_put_is_one_round_trip(make, client):
    state = make("transactional")
    keys = [(f"w{i}", i) for i in range(200)]
    state.multi_get([("warm-up",)])  # the connection's handshake commands are done now
    client.config_resetstat()
    batch(state, 1, keys, [1] * 200)
    assert state.multi_get(keys) == [1] * 200
    calls = {k: v for k, v in command_calls(client).items() if not k.startswith(("info", "config"))}
    assert calls == {"hmget": 2, "hset": 1}


def test_the_local_cache_serves_repeat_reads_without_redis(redis_conf, client):
    state = RedisMapState.non_transactional(redis_conf, "cached").make_state({}, 0, 1)  # cache 1000
    try:
        state.multi_put([("a",)], [1])
        client.config_resetstat()
        assert state.multi_get([("a",)]) == [1] and state.multi_get([("a",), ("b",)]) == [1, None]
        assert command_calls(client).get("hmget") == 1  # only b was fetched
    finally:
        state.close()


def test_topology_conf_gives_the_connection_when_the_factory_does_not(redis_server, redis_conf):
    factory = RedisMapState.transactional(None, "from-topology", cache_size=0)
    state = factory.make_state(redis_conf, 0, 1)
    try:
        batch(state, 1, [("a",)], [1])
        assert factory.hash_key(redis_conf) == redis_conf["trident.redis.key.prefix"] + "from-topology"
    finally:
        state.close()


def test_foreign_values_are_a_state_error(make, client, redis_conf):
    state = make("opaque", "broken")
    client.hset(redis_conf["trident.redis.key.prefix"] + "broken", '["a"]', "not json")
    with pytest.raises(StateError, match=r"the value of \[\"a\"\] in Redis hash .* is not a OpaqueCodec"):
        state.multi_get([("a",)])
    client.set(redis_conf["trident.redis.key.prefix"] + "string", "x")
    with pytest.raises(StateError, match="WRONGTYPE"):
        make("opaque", "string").multi_get([("a",)])


def test_unreachable_redis_is_redis_unavailable():
    port = free_port()
    # No retries here: the factory's client retries with backoff (seconds) before failing alike.
    backing = RedisBackingMap(redis.Redis("127.0.0.1", port, retry=Retry(NoBackoff(), 0)), "h",
                              CODECS[StateType.OPAQUE], name="counts")
    try:
        for call in (lambda: backing.multi_get([("a",)]), lambda: backing.multi_put([("a",)], [OpaqueValue(1, 1)])):
            with pytest.raises(RedisUnavailable, match=rf"state 'counts': Redis at 127.0.0.1:{port} "
                                                       r"unavailable for H.*python -m squall.deploy.redis"
                               ) as info:
                call()
            assert info.value.address == f"127.0.0.1:{port}"
    finally:
        backing.close()


# --- LocalRedis ---------------------------------------------------------------------------

def test_local_redis_starts_serves_and_stops_by_pid(redis_server, tmp_path):
    with LocalRedis(str(tmp_path / "r")) as server:
        pid = server.pid
        assert server.ping() and server.port != redis_server.port
        c = server.client()
        assert c.config_get("save") == {"save": ""} and c.config_get("appendonly") == {"appendonly": "no"}
        c.close()
    assert server.pid is None and not server.running() and not server.ping()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert (tmp_path / "r" / "redis.conf").exists()  # a given directory is kept
    assert "Ready to accept connections" in server.log_tail(200)
    server.stop()  # idempotent


def test_a_server_that_cannot_bind_fails_with_its_log(redis_server):
    server = LocalRedis(port=redis_server.port, start_timeout=10)
    with pytest.raises(RedisUnavailable, match="exited with code") as info:
        server.start()
    assert "Address already in use" in str(info.value)
    assert server.pid is None and server.dir is None  # its temporary dir is gone
    assert redis_server.ping()


def test_a_missing_binary_names_the_package(monkeypatch, tmp_path):
    monkeypatch.setenv(SERVER_ENV, str(tmp_path / "no-redis-server"))
    with pytest.raises(RedisUnavailable, match="install Debian's redis-server package"):
        installation()
    with pytest.raises(RedisUnavailable, match="no-redis-server"):
        LocalRedis().start()


def test_main_runs_in_the_foreground_until_sigterm(redis_server):
    with subprocess.Popen([sys.executable, "-m", "squall.deploy.redis", "--port", "0"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        try:
            line = proc.stdout.readline()
            match = re.search(r"Redis serving on 127\.0\.0\.1:(\d+) \(pid (\d+)", line)
            assert match, line + (proc.stdout.read() if proc.poll() is not None else "")
            server_pid = int(match.group(2))
            os.kill(server_pid, 0)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
            with pytest.raises(ProcessLookupError):
                os.kill(server_pid, 0)
        finally:
            if proc.poll() is None:
                proc.kill()


def test_multi_remove_deletes_the_hash_fields_at_the_next_txid(make, client, redis_conf):
    state = make("transactional", "removable")
    assert batch(state, 1, [("a",), ("b",)], [1, 2]) == [1, 2]
    state.begin_commit(2)
    state.multi_remove([("a",)])
    state.commit(2)
    assert set(stored(client, redis_conf, "removable", StateType.TRANSACTIONAL)) == \
        {'["a"]', '["b"]'}  # txid 2 may be replayed: unset, not gone yet
    state.begin_commit(3)
    assert set(stored(client, redis_conf, "removable", StateType.TRANSACTIONAL)) == {'["b"]'}
    assert state.multi_get([("a",), ("b",)]) == [None, 2]
    state.commit(3)
