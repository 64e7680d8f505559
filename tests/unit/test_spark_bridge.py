"""The bridge bolt's IO around its batcher, without a JVM: ``session.get`` is replaced by a
stand-in whose ``createDataFrame`` returns the Arrow table it was given, and the collector's
``call_soon_threadsafe`` queue is run by the test, as the executor's thread would."""

from __future__ import annotations

import os
import queue
import threading

import pyarrow as pa
import pytest

from squall.client import BasicBolt, Spout, TopologyBuilder
from squall.client.errors import InvalidTopology
from squall.client.spark import ParquetSink, SparkBridgeBolt, session
from squall.client.spark.trident import SparkState, SparkStateFactory, SparkUpdater
from squall.client.errors import ReportedFailedException
from squall.client.metrics import MetricRegistry
from squall.client.trident.operation import TridentTuple


class Collector:
    def __init__(self):
        self.acked, self.failed, self.errors, self.resets = [], [], [], []
        self.calls: queue.Queue = queue.Queue()

    def reset_timeout(self, t):
        self.resets.append(t.values)

    def ack(self, t):
        self.acked.append(t.values)

    def fail(self, t):
        self.failed.append(t.values)

    def report_error(self, e):
        self.errors.append(str(e))

    def call_soon_threadsafe(self, fn):
        self.calls.put(fn)

    def run_next(self, timeout=10.0):
        """Run the next call handed back by the runner thread (the executor's side)."""
        self.calls.get(timeout=timeout)()


class Context:
    topology_id = "t-1"
    this_component_id = "spark"
    this_task_id = 3

    def __init__(self, fields):
        self.fields = fields
        self.metrics = MetricRegistry()

    def this_sources(self):
        return [("split", "default")]

    def component_output_fields(self, component, stream="default"):
        return list(self.fields)


class Tup:
    def __init__(self, *values, tick=False):
        self.values = list(values)
        self.is_tick = tick


class Tick(Tup):
    def __init__(self):
        super().__init__(tick=True)


class FakeFrame:
    """The batch's table as a DataFrame: pyarrow's methods, and the partitions a
    ``coalesce`` asked for."""

    def __init__(self, table, partitions=None):
        self.table, self.partitions = table, partitions

    def coalesce(self, n):
        return FakeFrame(self.table, n)

    def __getattr__(self, name):
        return getattr(self.table, name)


class FakeSpark:
    def __init__(self):
        self.frames = 0

    def createDataFrame(self, table):
        assert isinstance(table, pa.Table)
        self.frames += 1
        return FakeFrame(table)


@pytest.fixture
def spark(monkeypatch):
    fake = FakeSpark()
    got = []
    monkeypatch.setattr(session, "get", lambda conf, app: got.append(app) or fake)
    fake.apps = got
    return fake


def prepared(fn, fields=("word", "n"), conf=None, **kw):
    bolt = SparkBridgeBolt(fn, **kw)
    out = Collector()
    bolt.prepare(dict(conf or {}), Context(list(fields)), out)
    return bolt, out


@pytest.mark.parametrize("master, partitions", [
    (None, 1), ("local[3]", 1), ("spark://h:7077", None)])
def test_a_small_batch_is_one_partition_on_a_local_master(spark, monkeypatch, master,
                                                         partitions):
    monkeypatch.setattr(session, "check_master", lambda master: None)  # no master runs here
    frames = []
    bolt, out = prepared(lambda df, i: frames.append(df), max_batch_size=2,
                         conf={"spark.master": master} if master else {})
    bolt.execute(Tup("a", 1))
    bolt.execute(Tup("b", 2))
    out.run_next()
    assert [f.num_rows for f in frames] == [2]
    assert frames[0].partitions == partitions  # a cluster's frame: as Spark cut it
    st = SparkStateFactory(lambda df, txid: frames.append(df), ["word"], None).make_state(
        {"topology.name": "tw", **({"spark.master": master} if master else {})}, 0, 1)
    write(st, 1, [("x",)])
    assert frames[1].partitions == partitions


def test_a_batch_is_acked_only_after_fn_returns(spark):
    entered, release = threading.Event(), threading.Event()
    seen = []

    def fn(df, batch_id):
        seen.append((batch_id, df.to_pylist()))
        entered.set()
        release.wait(10)

    bolt, out = prepared(fn, max_batch_size=2)
    bolt.execute(Tup("a", 1))
    bolt.execute(Tup("b", 2))  # closes batch 1: it goes to the runner thread
    assert entered.wait(10)
    assert out.acked == [] and out.calls.empty()  # fn still running: nothing acked
    release.set()
    out.run_next()
    assert out.acked == [["a", 1], ["b", 2]] and out.failed == []
    assert seen == [(1, [{"word": "a", "n": 1}, {"word": "b", "n": 2}])]
    assert spark.apps == ["squall-t-1"]
    bolt.cleanup()


def test_the_next_batch_converts_while_fn_runs_and_fn_sees_batches_one_at_a_time(spark):
    entered = {1: threading.Event(), 2: threading.Event()}
    release = {1: threading.Event(), 2: threading.Event()}
    inside, most = [0], [0]
    lock = threading.Lock()

    def fn(df, batch_id):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        entered[batch_id].set()
        release[batch_id].wait(10)
        with lock:
            inside[0] -= 1

    bolt, out = prepared(fn, max_batch_size=2)  # max_in_flight 2 by default
    for v in (("a", 1), ("b", 2), ("c", 3), ("d", 4)):
        bolt.execute(Tup(*v))  # closes batch 1, then batch 2: both handed to runners
    assert entered[1].wait(10)
    deadline = threading.Event()
    for _ in range(100):  # batch 2 is converted meanwhile, then waits for batch 1's fn
        if spark.frames == 2:
            break
        deadline.wait(0.05)
    assert spark.frames == 2 and not entered[2].is_set()
    release[1].set()
    out.run_next()
    assert out.acked == [["a", 1], ["b", 2]]
    assert entered[2].wait(10)
    release[2].set()
    out.run_next()
    assert out.acked == [["a", 1], ["b", 2], ["c", 3], ["d", 4]]
    assert most[0] == 1
    bolt.cleanup()


def test_a_batch_waiting_its_turn_when_the_worker_stops_is_neither_acked_nor_failed(spark):
    entered, release = threading.Event(), threading.Event()

    def fn(df, batch_id):
        entered.set()
        release.wait(10)

    bolt, out = prepared(fn, max_batch_size=1)
    bolt.execute(Tup("a", 1))
    bolt.execute(Tup("b", 2))  # batch 2 waits behind batch 1's fn
    # Batch 1 inside fn (a stop before it got there would rightly skip it) and batch 2
    # converted, waiting its turn.
    assert entered.wait(10)
    for _ in range(200):
        if spark.frames == 2:
            break
        threading.Event().wait(0.05)
    assert spark.frames == 2
    bolt.cleanup()  # stopping: batch 2 never runs fn, and is not acked either
    release.set()
    out.run_next()  # batch 1's fn returned: it is acked (the worker decides whether to send)
    with pytest.raises(queue.Empty):
        out.run_next(timeout=0.5)
    assert out.acked == [["a", 1]] and out.failed == []


def test_fn_raising_fails_every_tuple_of_the_batch_and_reports_it(spark):
    calls = []

    def fn(df, batch_id):
        calls.append(batch_id)
        if batch_id == 1:
            raise ValueError("the sink is down")

    bolt, out = prepared(fn, max_batch_size=2)
    for v in (("a", 1), ("b", 2)):
        bolt.execute(Tup(*v))
    out.run_next()
    assert out.failed == [["a", 1], ["b", 2]] and out.acked == []
    assert len(out.errors) == 1
    assert "batch 1" in out.errors[0] and "ValueError: the sink is down" in out.errors[0]
    for v in (("a", 1), ("b", 2)):  # the replay is a new batch, and it succeeds
        bolt.execute(Tup(*v))
    out.run_next()
    assert calls == [1, 2] and out.acked == [["a", 1], ["b", 2]]
    bolt.cleanup()


def test_an_empty_batch_never_calls_fn(spark):
    calls = []
    bolt, out = prepared(lambda df, i: calls.append(i), max_batch_secs=0.01)
    for _ in range(5):
        bolt.execute(Tick())  # ticks with nothing open: no batch at all
    assert out.calls.empty() and calls == [] and spark.frames == 0
    # A batch whose every row misfits the schema: its tuples fail, fn is not called.
    bolt2, out2 = prepared(lambda df, i: calls.append(i), types={"n": "long"}, max_batch_size=2)
    bolt2.execute(Tup("a", "x"))
    bolt2.execute(Tup("b", 1.5))
    out2.run_next()
    assert calls == [] and spark.frames == 0
    assert out2.failed == [["a", "x"], ["b", 1.5]] and out2.acked == []
    bolt.cleanup()
    bolt2.cleanup()


def test_rows_that_misfit_the_schema_are_failed_alone_with_the_field_named(spark):
    frames = []
    bolt, out = prepared(lambda df, i: frames.append(df.to_pylist()), max_batch_size=3)
    bolt.execute(Tup("a", 1))
    bolt.execute(Tup("b", "two"))  # n was fixed to long by this batch's first value
    bolt.execute(Tup("c", 3))
    out.run_next()
    assert frames == [[{"word": "a", "n": 1}, {"word": "c", "n": 3}]]
    assert out.acked == [["a", 1], ["c", 3]] and out.failed == [["b", "two"]]
    assert len(out.errors) == 1 and "field 'n'" in out.errors[0] and "row 1" in out.errors[0]
    bolt.cleanup()


def test_a_batch_closes_by_age_on_a_tick(spark, monkeypatch):
    now = [100.0]
    monkeypatch.setattr("squall.client.spark.bridge.time.monotonic", lambda: now[0])
    calls = []
    bolt, out = prepared(lambda df, i: calls.append(df.num_rows), max_batch_secs=2.0)
    bolt.execute(Tup("a", 1))
    now[0] = 101.9
    bolt.execute(Tick())
    assert out.calls.empty()
    now[0] = 102.0
    bolt.execute(Tick())
    out.run_next()
    assert calls == [1] and out.acked == [["a", 1]]
    assert bolt.get_component_configuration() == {"topology.tick.tuple.freq.secs": 0.2}
    bolt.cleanup()


def test_fn_objects_are_prepared_with_the_conf():
    class Fn:
        def prepare(self, conf):
            self.conf = conf

        def __call__(self, df, batch_id):
            pass

    fn = Fn()
    bolt = SparkBridgeBolt(fn)
    bolt.prepare({"out": "/x"}, Context(["w"]), Collector())
    assert fn.conf == {"out": "/x"}
    bolt.cleanup()


# -- refused at submit --------------------------------------------------------------------

class Words(Spout):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])
        declarer.declare_stream("pairs", ["word", "n"])


class Pass(BasicBolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


def noop(df, batch_id):
    pass


def test_inputs_with_different_fields_are_refused_when_built():
    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("spark", SparkBridgeBolt(noop)).shuffle_grouping("words") \
        .shuffle_grouping("words", "pairs")
    with pytest.raises(InvalidTopology, match=r"component 'spark'.*same fields.*'pairs'"):
        b.create_topology()


def test_a_type_for_a_field_the_stream_lacks_is_refused_when_built():
    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("spark", SparkBridgeBolt(noop, types={"count": "long"})).shuffle_grouping("words")
    with pytest.raises(InvalidTopology, match=r"'count'.*not a field of the stream"):
        b.create_topology()
    b = TopologyBuilder()
    b.set_spout("words", Words())
    b.set_bolt("spark", SparkBridgeBolt(noop, types={"word": "varchar"})).shuffle_grouping("words")
    with pytest.raises(InvalidTopology, match=r"component 'spark'.*'word'"):
        b.create_topology()


def test_the_overwriting_parquet_sink_needs_trident_txids():
    with pytest.raises(ValueError, match="txid"):
        SparkBridgeBolt(ParquetSink("/tmp/x"))
    SparkBridgeBolt(ParquetSink("/tmp/x", mode="append"))
    with pytest.raises(ValueError, match="mode"):
        ParquetSink("/tmp/x", mode="upsert")
    with pytest.raises(ValueError, match="max_batch_size"):
        SparkBridgeBolt(noop, max_batch_size=0)


# -- the Trident state --------------------------------------------------------------------

def trident_state(fn, fields=("word",), types=None) -> SparkState:
    return SparkStateFactory(fn, list(fields), types).make_state({"topology.name": "tw"}, 0, 1)


def write(st, txid, rows, fields=("word",)):
    st.begin_commit(txid)
    SparkUpdater().update_state(st, [TridentTuple(r, list(fields)) for r in rows], None)
    st.commit(txid)


def test_the_trident_state_calls_fn_with_the_txid_and_never_for_an_empty_batch(spark):
    seen = []
    st = trident_state(lambda df, txid: seen.append((txid, df.column("word").to_pylist())))
    write(st, 7, [])
    write(st, 8, [["a"], ["b"]])
    assert seen == [(8, ["a", "b"])] and spark.apps == ["squall-tw"]
    st.close()


def test_the_trident_state_fails_the_batch_when_fn_raises_or_a_row_misfits(spark):
    def fn(df, txid):
        raise OSError("disk full")

    st = trident_state(fn)
    with pytest.raises(ReportedFailedException, match=r"txid 3: fn raised.*same txid.*disk full"):
        write(st, 3, [["a"]])
    st2 = trident_state(lambda df, txid: None, types={"word": "string"})
    with pytest.raises(ReportedFailedException, match=r"txid 4: 1 tuple.*field 'word'"):
        write(st2, 4, [["a"], [5]])
    st.close()
    st2.close()


def test_sessions_are_counted_per_task_and_stop_with_the_last(monkeypatch):
    stopped = []

    class S:
        def stop(self):
            stopped.append(1)

    monkeypatch.setattr(session, "_session", None)
    monkeypatch.setattr(session, "_users", 0)
    session.acquire()
    session.acquire()
    monkeypatch.setattr(session, "_session", S())
    session.release()
    assert stopped == [] and session.running()
    session.release()
    assert stopped == [1] and not session.running()
    session.acquire()
    session.release()  # a task that never started Spark: nothing to stop
    assert stopped == [1]


def test_spark_conf_takes_the_spark_keys_over_the_defaults():
    conf = session.spark_conf({"spark.master": "spark://h:7077", "spark.ui.enabled": True,
                               "spark.executor.memory": "2g", "topology.workers": 2})
    assert conf == {"spark.master": "spark://h:7077", "spark.ui.enabled": "true",
                    "spark.ui.showConsoleProgress": "false", "spark.executor.memory": "2g",
                    "spark.sql.execution.arrow.localRelationThreshold": "0"}
    assert session.spark_conf({})["spark.master"] == "local[*]"


@pytest.mark.parametrize("master, threads", [
    ("local", 1), ("local[3]", 3), ("local[4, 2]", 4), ("local[4,2]", 4), ("local[4 , 2]", 4),
    ("local[*]", session.available_processors()),
    ("local[*,3]", session.available_processors()), ("local[x]", None), ("local[]", None),
    ("spark://h:7077", None), ("yarn", None), ("k8s://https://h:443", None),
    ("local-cluster[2,1,1024]", None),
])
def test_a_local_master_shuffles_into_one_partition_per_task_thread(master, threads):
    conf = session.spark_conf({"spark.master": master})
    assert session.local_threads(master) == threads
    assert conf.get("spark.sql.shuffle.partitions") == (None if threads is None else str(threads))
    # the topology's own setting wins, over this default and the Arrow one
    mine = session.spark_conf({"spark.master": master, "spark.sql.shuffle.partitions": 64,
                               "spark.sql.execution.arrow.localRelationThreshold": "1m"})
    assert mine["spark.sql.shuffle.partitions"] == "64"
    assert mine["spark.sql.execution.arrow.localRelationThreshold"] == "1m"


def test_a_step_of_tuples_in_one_call_makes_the_batches_one_by_one_makes(spark):
    """execute_batch (the executor hands a single-task bolt its whole step): batches of
    max_batch_size in arrival order across steps, acked after fn, ticks among them."""
    frames = []
    bolt, out = prepared(lambda df, i: frames.append((i, [r["n"] for r in df.to_pylist()])),
                         max_batch_size=3)
    extended = []
    real = bolt.batcher.extend
    bolt.batcher.extend = lambda *a: extended.append(real(*a)) or extended[-1]
    bolt.execute_batch([Tup("w", n) for n in range(5)])  # closes batch 1 (0, 1, 2)
    out.run_next()
    bolt.execute_batch([Tup("w", 5), Tick(), Tup("w", 6)])  # a tick: one by one
    out.run_next()
    bolt.execute_batch([Tup("w", n) for n in range(7, 12)])  # (6, 7, 8) then (9, 10, 11)
    out.run_next()
    out.run_next()
    bolt.execute_batch([Tup("w", 12)])
    assert frames == [(1, [0, 1, 2]), (2, [3, 4, 5]), (3, [6, 7, 8]), (4, [9, 10, 11])]
    assert out.acked == [["w", n] for n in range(12)] and out.failed == []
    assert bolt.batcher.pending == 1  # 12 waits in the open batch
    assert sum(extended) == 4  # 1, 4, 7 and 10 joined an open batch without an Add
    bolt.cleanup()


@pytest.mark.parametrize("rows, master, partitions", [
    (1, "local[4]", 1), (100_000, "local[4]", 1), (100_001, "local[4]", 2),
    (250_000, "local[4]", 3), (1_000_000, "local[4]", 4), (1_000_000, "local", 1),
    (1_000_000, "yarn", None)])
def test_a_local_batch_has_a_partition_per_100k_rows_and_at_most_one_per_thread(
        rows, master, partitions):
    table = pa.table({"n": pa.array(range(rows), pa.int64())})
    threads = session.local_threads(master)
    df = session.dataframe(FakeSpark(), table, threads)
    assert session.partitions(rows, threads) == partitions
    assert df.partitions == partitions and df.num_rows == rows


def test_local_star_counts_the_cpus_as_the_jvm_does(monkeypatch, tmp_path):
    """Affinity, and a cgroup v2 quota below it (a container limited to 1.5 CPUs on a
    bigger host: 2 threads, as availableProcessors rounds up)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    real_open = open
    quota = tmp_path / "cpu.max"

    def fake_open(path, *a, **kw):
        return real_open(quota if path == "/sys/fs/cgroup/cpu.max" else path, *a, **kw)
    monkeypatch.setattr("builtins.open", fake_open)
    quota.write_text("150000 100000\n")
    assert session.available_processors() == 2
    assert session.spark_conf({})["spark.sql.shuffle.partitions"] == "2"
    quota.write_text("max 100000\n")
    assert session.available_processors() == 64
    quota.unlink()  # no cgroup v2: the affinity
    assert session.available_processors() == 64
