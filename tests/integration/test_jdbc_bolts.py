"""JdbcInsertBolt and JdbcLookupBolt against a real PostgreSQL (the session's LocalPostgres):
batches acked only once committed, a refused row failed alone and reported with its values,
lookups a step at a time, the database unreachable or restarted mid-run, and a worker
killed under a reliable source."""

from __future__ import annotations

import os
import signal
from types import SimpleNamespace

import psycopg
import pytest

from cluster_helpers import kill_and_wait, worker_heartbeats
from jdbc_topos import insert, lookup, stream_to_table
from squall.client.tuple import Fields, Tuple
from squall.connectors import reports
from squall.connectors.jdbc import (JdbcConfig, JdbcInsertBolt, JdbcLookupBolt,
                                    SimpleJdbcLookupMapper, SimpleJdbcMapper)
from squall.deploy.net import free_port
from squall.deploy.postgres import LocalPostgres
from topos import events_of
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))

#: The topologies' tuple timeout: a test waits a few of them at the most.
TIMEOUT_SECS = 10


class Collected:
    """A bolt's collector that keeps what the bolt did."""

    def __init__(self):
        self.emitted, self.acked, self.failed, self.errors = [], [], [], []

    def emit(self, values, stream="default", anchors=None):
        self.emitted.append((values, anchors))

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)

    def report_error(self, error):
        self.errors.append(str(error))


_PREPARED = []


def prepared(bolt):
    out = Collected()
    bolt.prepare({}, SimpleNamespace(this_component_id="jdbc-bolt"), out)
    _PREPARED.append(bolt)
    return bolt, out


@pytest.fixture(autouse=True)
def _cleanup_bolts():
    yield
    while _PREPARED:
        _PREPARED.pop().cleanup()  # closes the bolt's connection, as the worker does


def tuples(fields, *rows):
    return [Tuple(list(r), "src", "default", 1, None, Fields(fields)) for r in rows]


def tick():
    return Tuple([], "__system", "__tick", -1, None)


@pytest.fixture
def config(postgres):
    return JdbcConfig(postgres.dsn())


@pytest.fixture
def words(pg, pg_table):
    pg.execute(f"CREATE TABLE {pg_table} (id bigserial PRIMARY KEY, n int NOT NULL, "
               f"word text NOT NULL, at timestamptz DEFAULT now())")
    return pg_table


def rows(pg, table):
    return pg.execute(f"SELECT n, word FROM {table} ORDER BY n").fetchall()


@pytest.fixture
def every_report():
    before, reports.REPORT_EVERY_SECS = reports.REPORT_EVERY_SECS, 0.0
    yield
    reports.REPORT_EVERY_SECS = before


# -- the insert bolt -----------------------------------------------------------------

def test_rows_wait_for_the_batch_and_are_acked_only_once_committed(config, pg, words):
    bolt, out = prepared(JdbcInsertBolt(config, SimpleJdbcMapper(), table_name=words,
                                        batch_size=5))
    batch = tuples(["n", "word"], *[(i, f"w{i}") for i in range(7)])
    bolt.execute_batch(batch)
    # Five made a batch: committed, then acked; two wait for the next batch or the tick.
    assert out.acked == batch[:5] and rows(pg, words) == [(i, f"w{i}") for i in range(5)]
    bolt.execute_batch([tick()])
    assert out.acked == batch and len(rows(pg, words)) == 7
    assert not out.failed and not out.errors


def test_the_mapper_takes_the_tables_columns_less_those_the_database_fills(config, pg, words):
    bolt, out = prepared(JdbcInsertBolt(config, table_name=words, batch_size=1))
    bolt.execute_batch(tuples(["word", "n", "extra"], ("a", 1, "ignored")))
    assert out.acked and rows(pg, words) == [(1, "a")]
    assert bolt.mapper.columns()[0].name == "n" and len(bolt.mapper.columns()) == 2


def test_a_row_the_database_refuses_is_failed_alone_and_reported_with_its_values(
        config, pg, words, every_report):
    bolt, out = prepared(JdbcInsertBolt(config, table_name=words, batch_size=4))
    good1, bad, good2, null = tuples(["n", "word"], (1, "a"), ("two", "b"), (3, "c"), (4, None))
    bolt.execute_batch([good1, bad, good2, null])
    assert out.acked == [good1, good2] and out.failed == [bad, null]
    assert rows(pg, words) == [(1, "a"), (3, "c")]
    assert "refused the row ['two', 'b']" in out.errors[0]
    assert 'invalid input syntax for type integer: "two"' in out.errors[0]
    assert "NotNullViolation" in out.errors[1] and '"word"' in out.errors[1]


def test_a_tuple_without_a_column_s_field_is_failed_and_reported(config, words, every_report):
    bolt, out = prepared(JdbcInsertBolt(config, table_name=words, batch_size=1))
    t, = tuples(["n"], (1,))
    bolt.execute_batch([t])
    assert out.failed == [t] and not out.acked
    assert "has no field 'word' (its fields: n)" in out.errors[0]


def test_an_insert_query_with_jdbc_placeholders_upserts(config, pg, pg_table):
    pg.execute(f"CREATE TABLE {pg_table} (word text PRIMARY KEY, n int)")
    bolt, out = prepared(JdbcInsertBolt(
        config, SimpleJdbcMapper(["word", "n"]), batch_size=3,
        insert_query=f"INSERT INTO {pg_table} (word, n) VALUES (?, ?) "
                     "ON CONFLICT (word) DO UPDATE SET n = EXCLUDED.n"))
    bolt.execute_batch(tuples(["word", "n"], ("a", 1), ("b", 2), ("a", 3)))
    assert len(out.acked) == 3
    assert pg.execute(f"SELECT word, n FROM {pg_table} ORDER BY word").fetchall() == \
        [("a", 3), ("b", 2)]


def test_a_missing_table_fails_the_tuples_and_says_so(config, every_report):
    bolt, out = prepared(JdbcInsertBolt(config, table_name="no_such_table", batch_size=1))
    t, = tuples(["n"], (1,))
    bolt.execute_batch([t])
    assert out.failed == [t]
    assert "table 'no_such_table' does not exist" in out.errors[0]


def test_an_unreachable_database_fails_the_batch_and_names_the_address(every_report):
    port = free_port()
    bolt, out = prepared(JdbcInsertBolt(JdbcConfig(f"host=127.0.0.1 port={port} dbname=x "
                                                   "user=u password=p"),
                                        table_name="t", batch_size=2))
    batch = tuples(["n", "word"], (1, "a"), (2, "b"))
    bolt.execute_batch(batch)
    assert out.failed == batch and not out.acked
    assert f"PostgreSQL u@127.0.0.1:{port}/x is unreachable" in out.errors[0]
    assert "2 tuple(s) were failed and will be replayed" in out.errors[0]
    assert "password=p" not in out.errors[0]


def test_a_wrong_password_is_named_as_such(postgres, every_report):
    bolt, out = prepared(JdbcInsertBolt(
        JdbcConfig(postgres.dsn() + " password=wrong"), table_name="t", batch_size=1))
    bolt.execute_batch(tuples(["n"], (1,)))
    assert "refused the bolt's credentials" in out.errors[0]
    assert "password authentication failed" in out.errors[0]


# -- the lookup bolt -----------------------------------------------------------------

@pytest.fixture
def labels(pg, pg_table):
    pg.execute(f"CREATE TABLE {pg_table} (n int, label text)")
    pg.execute(f"INSERT INTO {pg_table} VALUES (1, 'one'), (2, 'two'), (2, 'deux')")
    return pg_table


def test_lookup_emits_a_tuple_per_row_anchored_to_the_input(config, labels):
    bolt, out = prepared(JdbcLookupBolt(
        config, f"SELECT label FROM {labels} WHERE n = ? ORDER BY label",
        SimpleJdbcLookupMapper(["n", "label"], ["n"])))
    one, two, none = tuples(["n"], (1,), (2,), (3,))
    bolt.execute_batch([one, two, none])
    assert out.emitted == [([1, "one"], one), ([2, "deux"], two), ([2, "two"], two)]
    assert out.acked == [one, two, none] and not out.failed


def test_a_lookup_that_fails_fails_only_its_own_tuple(config, labels, every_report):
    bolt, out = prepared(JdbcLookupBolt(config, f"SELECT label FROM {labels} WHERE n = ?",
                                        SimpleJdbcLookupMapper(["n", "label"], ["n"])))
    one, bad = tuples(["n"], (1,), ("x",))
    bolt.execute_batch([one, bad])
    assert out.acked == [one] and out.failed == [bad]
    assert out.emitted == [([1, "one"], one)]
    assert "the lookup with parameters ['x'] failed" in out.errors[0]


# -- on real workers -----------------------------------------------------------------

def acked_once(lc, n):
    acks = events_of(lc.events_dir, "numbers", "ack")
    return sorted(int(a) for a in acks) == list(range(n))


def test_insert_bolt_on_real_workers_writes_every_record_once(cluster, pg, config, words):
    n = 600
    lc = cluster(insert(config, words).create_topology(),
                 {"test.spout.count": n, "topology.message.timeout.secs": TIMEOUT_SECS},
                 name="jdbc-insert")
    lc.wait_for(lambda: acked_once(lc, n), timeout=3 * TIMEOUT_SECS, what="every number acked")
    assert rows(pg, words) == [(i, f"word{i}") for i in range(n)]
    assert not events_of(lc.events_dir, "numbers", "fail")


def test_lookup_bolt_on_real_workers(cluster, config, labels):
    lc = cluster(lookup(config, labels).create_topology(),
                 {"test.spout.count": 5, "topology.message.timeout.secs": TIMEOUT_SECS},
                 name="jdbc-lookup")
    lc.wait_for(lambda: acked_once(lc, 5), timeout=3 * TIMEOUT_SECS, what="every number acked")
    assert sorted(events_of(lc.events_dir, "sink", "got")) == ["1 one", "2 deux", "2 two"]


def test_database_down_is_reported_then_every_record_lands_once_it_is_up(cluster):
    # A second server on a port of its own, down at first: the bolts report its address
    # within seconds (a refused connection fails the batch at once), and once it is up
    # the replayed records land.
    port = free_port()
    server = LocalPostgres(port=port)
    config = JdbcConfig(f"host=127.0.0.1 port={port} dbname=squall user=squall "
                        f"password={server.password}", connect_timeout_secs=1)
    n = 100
    lc = cluster(insert(config, "words", parallelism=1).create_topology(),
                 {"test.spout.count": n, "topology.message.timeout.secs": TIMEOUT_SECS},
                 name="jdbc-down")

    def reported():
        return any(f"PostgreSQL squall@127.0.0.1:{port}/squall is unreachable" in e["error"]
                   for hb in lc.heartbeats().values() for e in hb.get("errors", []))

    lc.wait_for(reported, timeout=TIMEOUT_SECS, what="the unreachable database reported")
    assert not acked_once(lc, n)
    server.start()
    try:
        with server.connect() as c:
            c.execute("CREATE TABLE words (n int PRIMARY KEY, word text)")
        lc.wait_for(lambda: acked_once(lc, n), timeout=4 * TIMEOUT_SECS,
                    what="every number acked once the database is up")
        with server.connect() as c:
            assert c.execute("SELECT count(*), count(DISTINCT n) FROM words").fetchone() == (n, n)
        assert events_of(lc.events_dir, "numbers", "fail")  # they were replayed
    finally:
        server.stop()


def test_a_database_restart_mid_run_loses_no_record(cluster):
    server = LocalPostgres()
    server.start()
    try:
        # No key: a batch whose commit applied but whose answer the restart cut is written
        # again by its replay (at least once), and the test counts distinct numbers.
        with server.connect() as c:
            c.execute("CREATE TABLE words (n int, word text)")
        config = JdbcConfig(server.dsn(), connect_timeout_secs=1)
        n = 600
        # 20 pending a spout task, fewer than a batch: the bolts write at their 0.2 s tick,
        # so the run lasts seconds and the restart falls in its middle.
        lc = cluster(insert(config, "words").create_topology(),
                     {"test.spout.count": n, "topology.message.timeout.secs": TIMEOUT_SECS,
                      "topology.max.spout.pending": 20},
                     name="jdbc-restart")
        lc.wait_for(lambda: len(events_of(lc.events_dir, "numbers", "ack")) > n // 10,
                    timeout=3 * TIMEOUT_SECS, what="a tenth of the numbers acked")
        assert len(events_of(lc.events_dir, "numbers", "ack")) < n // 2  # mid-run
        server.restart()  # a fast shutdown: the bolts' connections are cut mid-batch
        lc.wait_for(lambda: acked_once(lc, n), timeout=6 * TIMEOUT_SECS,
                    what="every number acked after the restart")
        with server.connect() as c:
            count, distinct = c.execute("SELECT count(*), count(DISTINCT n) FROM words").fetchone()
        assert distinct == n
        # The restart cut batches in flight: they were failed and replayed, not lost.
        assert events_of(lc.events_dir, "numbers", "fail")
    finally:
        server.stop()


@pytest.fixture(scope="module")
def local(tmp_path_factory, redis_server):
    """ZooKeeper, Nimbus and a supervisor that restarts killed workers."""
    from squall.deploy.local import LocalCluster
    lc = LocalCluster({"topology.stats.freq.secs": 0.2, **redis_server.conf()}, slots=4,
                      base_dir=str(tmp_path_factory.mktemp("jdbc-local")))
    try:
        lc.start()
        yield lc
    finally:
        lc.close("test done")


def test_kill_9_of_an_insert_bolts_worker_loses_no_record(local, redis_server, redis_conf,
                                                          config, pg, pg_table, tmp_path):
    stream, n = redis_conf["trident.redis.key.prefix"] + "rows", 20_000
    client = redis_server.client()
    try:
        pipe = client.pipeline(transaction=False)
        for i in range(n):
            pipe.xadd(stream, {"n": i, "text": f"entry {i}"})
        pipe.execute()
        pg.execute(f"CREATE TABLE {pg_table} (n int PRIMARY KEY, text text)")
        name = "jdbc-kill"
        local.submit(name, stream_to_table(stream, config, pg_table).create_topology(),
                     {**redis_conf, "topology.workers": 2, "topology.message.timeout.secs": 5,
                      "topology.max.spout.pending": 500}, HERE)

        def count():
            return pg.execute(f"SELECT count(*) FROM {pg_table}").fetchone()[0]

        try:
            poll_for(lambda: count() > n // 5, timeout=60, interval=0.2, what="a fifth of the rows")
            inserters = [int(hb["pid"]) for hb in worker_heartbeats(local)
                         if any(t.get("component") == "insert"
                                for t in hb.get("tasks", {}).values())]
            assert inserters, "no worker runs the insert bolt"
            os.kill(inserters[0], signal.SIGKILL)
            # Its batches in flight were never acked: the stream spout replays them after the
            # timeout, and ON CONFLICT DO NOTHING leaves the rows that did commit as they are.
            poll_for(lambda: count() == n and _settled(client, stream, f"squall-{name}"),
                     timeout=60 + 6 * 5, interval=0.5, what="every row in and every entry acked")
            assert pg.execute(f"SELECT min(n), max(n), count(DISTINCT n) FROM {pg_table}"
                              ).fetchone() == (0, n - 1, n)
        finally:
            kill_and_wait(local, name)
    finally:
        client.close()


def _settled(client, stream, group):
    for g in client.xinfo_groups(stream):
        if g["name"].decode() == group:
            return g["pending"] == 0 and g["lag"] == 0
    return False
