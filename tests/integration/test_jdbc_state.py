"""The JDBC connector's states against a real PostgreSQL (the session's LocalPostgres):
Trident's map states in a table (replays by txid), a stateful bolt's two-phase commits,
and both on real workers, a worker of the stateful word count killed -9."""

from __future__ import annotations

import json
import os
import signal
import time

import msgpack
import pytest

from cluster_helpers import kill_and_wait
from squall.client.state import StateError as BoltStateError
from squall.client.trident.line_files import OpaqueLineFiles, TransactionalLineFiles
from squall.client.trident.state.backing import OpaqueValue, TransactionalValue
from squall.client.trident.state.base import StateError
from squall.connectors.jdbc import JdbcConfig
from squall.connectors.jdbc.state import JdbcKeyValueState, provider_settings
from squall.connectors.jdbc.trident import JdbcMapState
from squall.deploy.net import free_port
from stateful_topos import expected_counts
from test_stateful import CHECKPOINT_MS, TIMEOUT, acked_ids, word_count
from test_stateful_faults import worker_of
from test_trident import write_input
from trident_ops import batch
from trident_topos import word_count as trident_word_count
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def config(postgres):
    return JdbcConfig(postgres.dsn())


@pytest.fixture
def make(config, pg_table):
    """``make(kind, **options)``: a partition of a JdbcMapState on the test's table."""
    states = []

    def build(kind, key_columns=("word",), **options):
        options.setdefault("cache_size", 0)
        factory = getattr(JdbcMapState, kind)(config, pg_table, list(key_columns), **options)
        states.append(factory.make_state({}, 0, 1))
        return states[-1]

    yield build
    for s in states:
        s.close()


def table(pg, name):
    return pg.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall()


# -- Trident map states --------------------------------------------------------------

def test_transactional_replay_is_a_no_op_and_a_new_txid_applies(make, pg, pg_table):
    state = make("transactional")
    assert batch(state, 1, [("a",), ("b",)], [1, 10]) == [1, 10]
    assert batch(state, 2, [("a",)], [5]) == [6]
    restarted = make("transactional")  # a new task replays txid 2 from what the table holds
    assert batch(restarted, 2, [("a",), ("b",)], [5, 1]) == [6, 11]
    # A row per key, readable as SQL: the key's own column, the value, the txid.
    assert table(pg, pg_table) == [("a", 6, 2), ("b", 11, 2)]
    assert restarted.multi_get([("a",), ("missing",)]) == [6, None]


def test_opaque_replay_recomputes_from_prev_and_new_txid_shifts(make, pg, pg_table):
    state = make("opaque")
    batch(state, 1, [("a",)], [10])
    batch(state, 2, [("a",), ("b",)], [1, 1])
    restarted = make("opaque")
    assert batch(restarted, 2, [("a",), ("b",)], [4, 0]) == [14, 0]
    assert batch(restarted, 3, [("a",)], [1]) == [15]
    assert table(pg, pg_table) == [("a", 15, 3, 14), ("b", 0, 2, None)]


def test_keys_of_several_typed_columns_and_json_values(make, pg, pg_table):
    state = make("non_transactional", key_columns=("country", "year"))
    state.begin_commit(None)
    state.multi_put([("us", 2024), ("fr", 2025)], [{"n": 1}, [1, "x"]])
    state.commit(None)
    assert state.multi_get([("fr", 2025), ("us", 2024), ("us", 2023)]) == \
        [[1, "x"], {"n": 1}, None]
    types = dict(pg.execute("SELECT column_name, data_type FROM information_schema.columns "
                            "WHERE table_name = %s", (pg_table,)).fetchall())
    assert types == {"country": "text", "year": "bigint", "value": "jsonb"}


def test_a_table_without_the_states_columns_is_named(config, pg, pg_table):
    pg.execute(f"CREATE TABLE {pg_table} (word text PRIMARY KEY, value jsonb)")
    state = JdbcMapState.opaque(config, pg_table, ["word"], cache_size=0).make_state({}, 0, 1)
    try:
        with pytest.raises(StateError, match=r"has no column\(s\) txid, prev"):
            state.multi_get([("a",)])
    finally:
        state.close()


def test_an_unreachable_database_is_a_state_error_naming_it():
    port = free_port()
    config = JdbcConfig(f"host=127.0.0.1 port={port} dbname=x user=u password=secret",
                        connect_timeout_secs=1)
    state = JdbcMapState.transactional(config, "t", ["word"]).make_state({}, 0, 1)
    with pytest.raises(StateError, match=f"PostgreSQL u@127.0.0.1:{port}/x is unreachable") as e:
        state.multi_get([("a",)])
    assert "secret" not in str(e.value)


def test_trident_word_count_into_a_table_counts_each_word_once(cluster, tmp_path, config, pg,
                                                                pg_table):
    files, expected = write_input(tmp_path)
    topo = trident_word_count(OpaqueLineFiles(files, batch_lines=50),
                              JdbcMapState.opaque(config, pg_table, ["word"]))
    lc = cluster(topo, {"topology.workers": 2, "trident.transactional.state": "memory",
                        "topology.max.spout.pending": 3,
                        "topology.trident.batch.emit.interval.millis": 20}, name="trident-jdbc")

    def counts():
        if not pg.execute("SELECT to_regclass(%s)", (pg_table,)).fetchone()[0]:
            return {}
        return dict(pg.execute(f"SELECT word, (value)::bigint FROM {pg_table}").fetchall())

    lc.wait_for(lambda: counts() == dict(expected), timeout=60, what="exact counts in the table")


# -- a stateful bolt's state ----------------------------------------------------------

@pytest.fixture
def kv(config, pg_table):
    made = []

    def build(namespace="count-1"):
        made.append(JdbcKeyValueState(namespace, config, pg_table))
        return made[-1]

    yield build
    for s in made:
        s.close()


def test_prepare_commit_and_rollback(kv):
    s = kv()
    s.put("a", 1)
    s.put(("k", 2), {"x": [1, 2]})
    s.prepare_commit(1)
    assert s.get("a") == 1  # the prepared value is what the bolt sees
    s.commit(1)
    s.put("a", 2)
    s.delete(("k", 2))
    s.prepare_commit(2)
    s.rollback()
    fresh = kv()
    assert dict(fresh.items()) == {"a": 1, ("k", 2): {"x": [1, 2]}}
    assert fresh.txids() == {"prepare": None, "commit": 1}
    assert fresh.prepared_txid() is None


def test_a_transaction_prepared_by_a_dead_task_is_restored(kv):
    s = kv()
    s.put("a", 1)
    s.prepare_commit(1)
    s.commit(1)
    s.put("a", 5)
    s.delete("gone")
    s.put("b", 7)
    s.prepare_commit(2)
    # The worker dies before COMMIT; its restarted task finds transaction 2 prepared, and
    # the checkpoint spout (2 completed everywhere) says commit it.
    restarted = kv()
    assert restarted.prepared_txid() == 2
    restarted.restore(2)
    assert dict(kv().items()) == {"a": 5, "b": 7}
    assert kv("count-2").get("a") is None  # another task's namespace


def test_provider_settings_take_a_dsn_or_storms_hikari_map(postgres):
    config, t = provider_settings({"topology.state.provider.config": json.dumps(
        {"dsn": postgres.dsn(), "table": "my_state"})})
    assert t == "my_state" and config.params["port"] == str(postgres.port)
    config, t = provider_settings({"topology.state.provider.config": {
        "dataSourceClassName": "org.postgresql.ds.PGSimpleDataSource",
        "dataSource.url": f"jdbc:postgresql://127.0.0.1:{postgres.port}/squall",
        "dataSource.user": "squall", "dataSource.password": postgres.password}})
    assert t == "squall_state" and config.params["dbname"] == "squall"
    with pytest.raises(BoltStateError, match="topology.state.provider.config is unset"):
        provider_settings({})


def stored_counts(pg, table):
    """The committed counts of every count task, merged (each word lives in one task)."""
    out = {}
    if not pg.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0]:
        return out
    # count-<task>, not count-<task>$seen (the keys each task saved, acker mode's dedupe).
    for key, value in pg.execute(f"SELECT key, value FROM {table} WHERE namespace LIKE "
                                 "'count-%%' AND strpos(namespace, '$') = 0").fetchall():
        word = msgpack.unpackb(bytes(key), raw=False)
        assert word not in out, f"{word} counted by two tasks"
        out[word] = msgpack.unpackb(bytes(value), raw=False)
    return out


def provider_conf(postgres, table, mode, n):
    return {"topology.state.provider": "postgres",
            "topology.state.provider.config": json.dumps({"dsn": postgres.dsn(),
                                                          "table": table}),
            "topology.state.checkpoint.mode": mode,
            "topology.state.checkpoint.interval.ms": CHECKPOINT_MS,
            "topology.message.timeout.secs": TIMEOUT, "test.spout.count": n}


def test_stateful_word_count_with_state_in_postgres_commits_exact_counts(cluster, postgres, pg,
                                                                        pg_table):
    n = 3000
    lc = cluster(word_count(), provider_conf(postgres, pg_table, "acker", n))
    poll_for(lambda: stored_counts(pg, pg_table) == expected_counts(n), timeout=30 + 2 * TIMEOUT,
             what="the committed counts reach the exact totals")
    poll_for(lambda: len(acked_ids(lc.events_dir)) == n, timeout=2 * TIMEOUT,
             what=f"all {n} messages acked")
    assert not lc.crashed()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    from squall.deploy.local import LocalCluster
    lc = LocalCluster({"topology.stats.freq.secs": 0.2}, slots=4,
                      base_dir=str(tmp_path_factory.mktemp("jdbc-state-local")))
    try:
        lc.start()
        yield lc
    finally:
        lc.close("test done")


def test_barrier_mode_with_state_in_postgres_counts_exactly_once_across_a_kill_9(
        local, postgres, pg, pg_table, tmp_path):
    n = 6000
    events = tmp_path / "events"
    events.mkdir()
    name = "jdbc-state-kill"
    conf = {**provider_conf(postgres, pg_table, "barrier", n), "topology.workers": 2,
            "test.events.dir": str(events), "test.spout.rate": 1500}
    local.submit(name, word_count(rewinding=True), conf, HERE)
    try:
        poll_for(lambda: sum(stored_counts(pg, pg_table).values()) > 3 * n // 10, timeout=30,
                 what="a third of the words committed")
        victim = worker_of(local, "count")
        assert victim is not None
        killed_at = time.monotonic()
        os.kill(victim, signal.SIGKILL)
        expected = expected_counts(n)
        poll_for(lambda: stored_counts(pg, pg_table) == expected, timeout=60 + 4 * TIMEOUT,
                 what="exact counts after the kill")
        print(f"\nbarrier mode, state in PostgreSQL: exact counts "
              f"{time.monotonic() - killed_at:.1f} s after the kill")
    finally:
        kill_and_wait(local, name)
