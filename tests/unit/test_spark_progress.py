"""The Spark bridge's progress per batch (as Structured Streaming's query progress), the
path of its record up to the REST API, its held timeouts while Spark starts, and Spark that
cannot be reached. No JVM: the bridge's session is the stand-in of test_spark_bridge."""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import threading
import time
import types

import pytest

from squall.client.spark import SparkBridgeBolt, SparkUnavailable, session
from squall.client.spark.progress import Progress, Timings
from squall.nimbus.views import merge_progress, progress_row
from squall.proto import nimbus_pb2 as pb
from squall.supervisor.outbox import _fill_task_stats
from squall.ui.storm_json import batch_progress

# The stand-ins of the unit test_spark_bridge (its name is also an integration test's).
_spec = importlib.util.spec_from_file_location(
    "unit_test_spark_bridge", os.path.join(os.path.dirname(__file__), "test_spark_bridge.py"))
_bridge_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_bridge_tests)
Collector, Context, Tick, Tup = (_bridge_tests.Collector, _bridge_tests.Context,
                                 _bridge_tests.Tick, _bridge_tests.Tup)
spark = _bridge_tests.spark  # the fixture


# -- the records and the log lines ---------------------------------------------------------

def test_a_batch_record_has_structured_streamings_rates_and_durations():
    p = Progress(timeout_secs=30.0, log_every_secs=5.0)
    p.seen(100.0)
    p.closed(1, 102.0)  # the first batch: its rows arrived over 2 s
    rec, line = p.finished(1, 1000, True, Timings(conversion=0.1, session=0.0, wait=0.0, fn=0.4),
                           now=102.5, wall=1_800_000_000.0)
    assert rec == {"batch_id": 1, "timestamp_secs": 1_800_000_000.0, "num_input_rows": 1000,
                   "input_rows_per_second": 500.0, "processed_rows_per_second": 2000.0,
                   "duration_ms": 500.0, "conversion_ms": 100.0, "session_ms": 0.0,
                   "wait_ms": 0.0, "fn_ms": 400.0, "batches": 1, "rows": 1000,
                   "failed_batches": 0}
    assert line == ("batch 1: 1000 rows, 500 input rows/s, 2000 processed rows/s, 0.50 s "
                    "(conversion 0.10 s, wait 0.00 s, fn 0.40 s); 1 batches, 1000 rows in all")
    # The next ones: the input rate is over the time since the previous batch closed, and
    # lines come at most every 5 s, counting the batches they stand for.
    p.closed(2, 104.0)
    rec, line = p.finished(2, 500, True, Timings(fn=0.2), now=104.25, wall=0.0)
    assert rec["input_rows_per_second"] == 250.0 and rec["processed_rows_per_second"] == 2000.0
    assert line is None and p.latest is rec
    p.closed(3, 107.0)
    rec, line = p.finished(3, 300, True, Timings(), now=107.6, wall=0.0)
    assert rec["input_rows_per_second"] == 100.0 and rec["batches"] == 3 and rec["rows"] == 1800
    assert line.startswith("batch 3: 300 rows") and \
        "; 2 batches (800 rows) since the last line; 3 batches, 1800 rows in all" in line


def test_failed_and_slow_batches_always_get_a_line_naming_the_timeout_key():
    p = Progress(timeout_secs=10.0)
    p.closed(1, 0.0)
    _, line = p.finished(1, 10, True, Timings(), now=0.1, wall=0.0)
    p.closed(2, 1.0)
    rec, line = p.finished(2, 10, False, Timings(), now=1.1, wall=0.0)
    assert "batch 2 FAILED: 10 rows" in line and rec["failed_batches"] == 1
    p.closed(3, 2.0)
    _, line = p.finished(3, 10, True, Timings(fn=6.0), now=8.0, wall=0.0)
    assert "slow: more than 50% of topology.message.timeout.secs=10" in line
    # While the bridge held its tuples' timeouts (Spark starting), a long batch risked nothing.
    p.closed(4, 9.0)
    _, line = p.finished(4, 10, True, Timings(session=7.5), now=17.0, wall=0.0, held=True)
    assert line is None or "slow" not in line


# -- the record's way: heartbeat -> supervisor -> Nimbus -> REST ---------------------------

def test_the_record_travels_from_the_heartbeat_to_the_component_page():
    records = [{"component": "spark", "progress": {
        "batch_id": b, "timestamp_secs": 1_800_000_000.5 + b, "num_input_rows": rows,
        "input_rows_per_second": rows / 2, "processed_rows_per_second": rows * 2.0,
        "duration_ms": d, "conversion_ms": 10.0, "session_ms": 0.0, "wait_ms": 1.0,
        "fn_ms": d - 11, "batches": b, "rows": rows * b, "failed_batches": 0,
        "not_a_field": 1}} for b, rows, d in ((7, 1000, 500.0), (9, 3000, 800.0))]
    msgs = []
    for i, st in enumerate(records):
        ts = pb.TaskStats()
        _fill_task_stats(ts, i + 1, st)
        assert ts.HasField("progress") and ts.progress.batch_id in (7, 9)
        msgs.append(ts)
    ts = pb.TaskStats()
    _fill_task_stats(ts, 3, {"component": "split"})
    assert not ts.HasField("progress")  # a component that does not work in batches
    ts = pb.TaskStats()  # a worker's file is not trusted: odd figures are left out alone
    _fill_task_stats(ts, 4, {"component": "spark", "progress": {
        "batch_id": float("nan"), "rows": 1 << 70, "batches": "3", "failed_batches": True,
        "fn_ms": 12.5}})
    assert ts.HasField("progress") and ts.progress.fn_ms == 12.5
    assert (ts.progress.batch_id, ts.progress.rows, ts.progress.batches) == (0, 0, 0)
    merged = merge_progress([progress_row(m.progress) for m in msgs])
    # Tasks side by side: counts and rates add up; the latest batch, the longest duration.
    assert merged["batch_id"] == 9 and merged["num_input_rows"] == 4000
    assert merged["input_rows_per_second"] == 2000.0 and merged["duration_ms"] == 800.0
    assert merged["batches"] == 16 and merged["rows"] == 34000
    assert merge_progress([]) is None
    comp = pb.ComponentStats(component_id="spark", progress=merged)
    assert batch_progress(comp) == {
        "batchId": 9, "timestamp": "2027-01-15T08:00:09.500Z", "numInputRows": 4000,
        "inputRowsPerSecond": 2000.0, "processedRowsPerSecond": 8000.0,
        "durationMs": {"triggerExecution": 800, "conversion": 10, "session": 0, "wait": 1,
                       "addBatch": 789},
        "batches": 16, "rows": 34000, "failedBatches": 0}
    assert batch_progress(pb.ComponentStats(component_id="split")) is None


# -- the bolt --------------------------------------------------------------------------------

def prepared(fn, conf=None, **kw):
    bolt = SparkBridgeBolt(fn, **kw)
    out = Collector()
    ctx = Context(["word", "n"])
    bolt.prepare(dict(conf or {}), ctx, out)
    return bolt, out, ctx.metrics


def test_each_batch_is_the_tasks_progress_and_its_metrics(spark):
    bolt, out, metrics = prepared(lambda df, i: None, max_batch_size=2)
    assert metrics.progress is None
    assert {k: v["value"] for k, v in metrics.snapshot().items()} == \
        {"spark_batches": 0, "spark_rows": 0}  # no batch yet: no gauge values
    bolt.execute(Tup("a", 1))
    bolt.execute(Tup("b", 2))
    out.run_next()
    assert metrics.progress["batch_id"] == 1 and metrics.progress["num_input_rows"] == 2
    assert metrics.progress["duration_ms"] >= metrics.progress["fn_ms"] >= 0
    snap = {k: v["value"] for k, v in metrics.snapshot().items()}
    assert snap["spark_batches"] == 1 and snap["spark_rows"] == 2
    assert snap["spark_batch_id"] == 1 and snap["spark_batch_rows"] == 2
    assert {"spark_input_rows_per_second", "spark_processed_rows_per_second",
            "spark_batch_duration_ms", "spark_conversion_ms", "spark_fn_ms"} <= set(snap)
    bolt.cleanup()


def test_the_tuples_timeouts_are_held_until_the_first_batch_is_through_fn(spark, monkeypatch):
    now = [100.0]
    monkeypatch.setattr("squall.client.spark.bridge.time.monotonic", lambda: now[0])
    entered, release = threading.Event(), threading.Event()

    def fn(df, batch_id):  # the first batch: as long as a cold Spark takes
        entered.set()
        release.wait(10)

    bolt, out, _ = prepared(fn, {"topology.message.timeout.secs": 3}, max_batch_size=2)
    for v in (("a", 1), ("b", 2), ("c", 3)):  # batch 1 goes to fn; c waits in batch 2
        bolt.execute(Tup(*v))
    assert entered.wait(10)
    bolt.execute(Tick())
    assert out.resets == [["a", 1], ["b", 2], ["c", 3]]
    now[0] = 100.9
    bolt.execute(Tick())  # a third of the timeout has not passed since
    assert len(out.resets) == 3
    now[0] = 101.1
    bolt.execute(Tick())
    assert len(out.resets) == 6
    release.set()
    out.run_next()  # the first batch is through: Spark is up
    assert out.acked == [["a", 1], ["b", 2]]
    now[0] = 101.5
    bolt.execute(Tick())  # batch 2 (c), which collected meanwhile, is due: still held
    out.run_next()  # ... until it is through too: then the timeouts apply again
    assert out.acked == [["a", 1], ["b", 2], ["c", 3]] and len(out.resets) == 6
    bolt.execute(Tup("d", 4))
    now[0] = 120.0
    bolt.execute(Tick())
    out.run_next()
    assert out.acked[-1] == ["d", 4] and len(out.resets) == 6
    bolt.cleanup()


def test_without_message_timeouts_nothing_is_held(spark):
    release = threading.Event()
    bolt, out, _ = prepared(lambda df, i: release.wait(10),
                            {"topology.enable.message.timeouts": False}, max_batch_size=1)
    bolt.execute(Tup("a", 1))
    bolt.execute(Tick())
    assert out.resets == []
    release.set()
    out.run_next()
    bolt.cleanup()


# -- Spark that cannot be reached -------------------------------------------------------------

def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_master_urls_name_their_hosts():
    assert session.master_addresses("spark://h1:7077,h2:7078") == [("h1", 7077), ("h2", 7078)]
    assert session.master_addresses("spark://h") == [("h", 7077)]
    assert session.master_addresses("spark://[::1]:7000/") == [("::1", 7000)]
    assert session.master_addresses("local[*]") == [] and session.master_addresses("yarn") == []
    session.check_master("local[*]")  # nothing to reach
    with pytest.raises(SparkUnavailable, match="names no host"):
        session.check_master("spark://")


def test_an_unreachable_master_stops_the_bolt_in_prepare_naming_the_url():
    url = f"spark://127.0.0.1:{closed_port()}"
    t0 = time.monotonic()
    with pytest.raises(SparkUnavailable) as e:
        prepared(lambda df, i: None, {"spark.master": url})
    assert time.monotonic() - t0 < session.CONNECT_TIMEOUT_SECS
    assert e.value.master == url
    assert f"the Spark master {url} is unreachable (127.0.0.1:" in str(e.value)
    assert "connection refused" in str(e.value) and "check spark.master" in str(e.value)
    with socket.socket() as listening:  # one master of two up: reachable
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        session.check_master(f"spark://127.0.0.1:{closed_port()},127.0.0.1:{port}")


def test_spark_unavailable_in_a_runner_is_raised_on_the_executors_thread(monkeypatch):
    def unavailable(conf, app):
        raise SparkUnavailable("the Spark master spark://x:1 is unreachable", "spark://x:1")
    monkeypatch.setattr(session, "get", unavailable)
    bolt, out, _ = prepared(lambda df, i: None, max_batch_size=1)
    bolt.execute(Tup("a", 1))
    with pytest.raises(SparkUnavailable, match="spark://x:1"):
        out.run_next()  # the worker dies with it: the tuple is neither acked nor failed
    assert out.acked == [] and out.failed == []
    bolt.cleanup()


class FakeBuilder:
    """pyspark's SparkSession.builder, whose sessions stop when told (no JVM)."""

    def __init__(self, stopped_at_start):
        self.stopped_at_start = list(stopped_at_start)
        self.made = []

    def appName(self, name):
        return self

    def config(self, key, value):
        return self

    def getOrCreate(self):
        s = types.SimpleNamespace(version="4.x", stopped=self.stopped_at_start.pop(0))
        s.sparkContext = types.SimpleNamespace(_jsc=types.SimpleNamespace(
            sc=lambda: types.SimpleNamespace(isStopped=lambda: s.stopped)))
        s.stop = lambda: setattr(s, "stopped", True)
        self.made.append(s)
        return s


def test_a_stopped_context_is_replaced_and_one_stopped_at_start_is_unavailable(monkeypatch):
    import pyspark.sql
    builder = FakeBuilder([False, False, True])
    monkeypatch.setattr(pyspark.sql, "SparkSession", types.SimpleNamespace(builder=builder))
    monkeypatch.setattr(session, "_session", None)
    first = session.get({}, "app")
    assert session.get({}, "app") is first and len(builder.made) == 1
    first.stopped = True  # its master went away: the next batch gets a new session
    second = session.get({}, "app")
    assert second is not first and not second.stopped
    second.stopped = True
    with pytest.raises(SparkUnavailable,
                       match=r"SparkContext \(master local\[\*\]\) stopped as it started"):
        session.get({}, "app")  # the master refused the application
    assert session._session is None
    monkeypatch.setattr(session, "_session", None)


def test_a_session_that_cannot_start_is_unavailable_naming_the_master(monkeypatch):
    import pyspark.sql

    class Broken(FakeBuilder):
        def getOrCreate(self):
            raise RuntimeError("An error occurred while calling None.JavaSparkContext.\n"
                               ": java.lang.IllegalArgumentException: bad memory 'lots'\n"
                               "\tat org.apache.spark.Foo(Foo.scala:1)")
    monkeypatch.setattr(pyspark.sql, "SparkSession", types.SimpleNamespace(builder=Broken([])))
    monkeypatch.setattr(session, "_session", None)
    with pytest.raises(SparkUnavailable) as e:
        session.get({"spark.master": "local[2]"}, "app")
    assert str(e.value) == ("the SparkSession (master local[2]) could not start: RuntimeError: "
                            "An error occurred while calling None.JavaSparkContext. "
                            "(java.lang.IllegalArgumentException: bad memory 'lots')")
    assert "pyspark.sql" in sys.modules

    class Refused(FakeBuilder):  # a port that is no master: Spark gives up after 60 s
        def getOrCreate(self):
            raise RuntimeError("An error occurred while calling None.SparkSession.\n"
                               ": java.lang.IllegalStateException: Cannot call methods on a "
                               "stopped SparkContext.")
    monkeypatch.setattr(pyspark.sql, "SparkSession", types.SimpleNamespace(builder=Refused([])))
    with pytest.raises(SparkUnavailable, match=r"SparkContext \(master local\[2\]\) stopped as "
                                               r"it started.*All masters are unresponsive"):
        session.get({"spark.master": "local[2]"}, "app")
