"""The Spark bridge with real Spark (local[*]) in real worker processes.

* Stream values reach Spark with their types (long, double, string, boolean, binary,
  array, map; None as null), or are refused naming the field.
* Trident: a batch whose first attempt wrote to parquet and then failed is retried under
  the same txid and is there once; only the worker hosting the bridge starts a JVM.
* A real cluster (ZooKeeper, `squall nimbus`, two `squall supervisor`s): the worker
  hosting a bridge is killed -9 mid-run; its JVM goes with it, the supervisor restarts it,
  and nothing is lost (plain bolt: every word at least its count; Trident: exact totals).

Run with ``-s`` to see the timings.
"""

from __future__ import annotations

import collections
import os
import shutil
import time

import psutil
import pytest

from spark_topos import FAIL_KEY, OUTPUT_KEY, calls, trident_words
from squall.client.spark import StreamSchema
from squall.client.trident.line_files import TransactionalLineFiles
from test_cli_cluster import Cluster, alive, started
from test_trident_exactly_once import (FAILOVER, components_of, kill9, stats,
                                       worker_heartbeats, write_input)
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples")


@pytest.fixture(scope="module")
def spark():
    """A SparkSession in the test process, to check types and read the parquet output."""
    from pyspark.sql import SparkSession
    s = (SparkSession.builder.master("local[2]").appName("squall-tests")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    yield s
    s.stop()


def totals(spark, path) -> dict[str, int]:
    from pyspark.sql import functions as F
    rows = spark.read.parquet(str(path)).groupBy("word").agg(F.sum("count").alias("n")).collect()
    return {r["word"]: int(r["n"]) for r in rows}


def totals_or_none(spark, path):
    """Totals, or None while there is nothing (or a half-committed write) to read."""
    if not any(path.glob("*=*/*.parquet")):
        return None  # nothing committed yet (and Spark would log a stack trace for it)
    try:
        return totals(spark, path)
    except Exception:  # AnalysisException (no parquet yet) or a file moved under the read
        return None


def expected_words(sentences: int) -> dict[str, int]:
    """Exact word counts of the word-count example's first ``sentences`` sentences."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("word_count_example",
                                                  os.path.join(EXAMPLES, "word_count.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return dict(mod.expected_counts(mod.make_pool(), sentences))


def jvms_of(pid: int) -> list[psutil.Process]:
    """The JVMs (PySpark's gateway) started by process ``pid``."""
    try:
        return [c for c in psutil.Process(pid).children(recursive=True)
                if c.name() == "java"]
    except psutil.Error:
        return []


# --- types -----------------------------------------------------------------------------------
def test_stream_values_reach_spark_with_their_types(spark):
    schema = StreamSchema(["i", "f", "s", "b", "by", "l", "m", "n"])
    rows = [(1, 1.5, "a", True, b"\x00x", [1, 2], {"k": 1}, None),
            (None, 2, None, False, None, [], {}, None),
            (-(1 << 63), -0.5, "é", None, b"", None, None, None)]
    table, rejected = schema.table(rows)
    assert rejected == []
    df = spark.createDataFrame(table)
    assert df.schema.simpleString() == ("struct<i:bigint,f:double,s:string,b:boolean,by:binary,"
                                        "l:array<bigint>,m:map<string,bigint>,n:void>")
    got = [tuple(r) for r in df.collect()]
    assert got == [(1, 1.5, "a", True, bytearray(b"\x00x"), [1, 2], {"k": 1}, None),
                   (None, 2.0, None, False, None, [], {}, None),
                   (-(1 << 63), -0.5, "é", None, bytearray(b""), None, None, None)]

    declared = StreamSchema(["tags", "attrs"], types={"tags": "array<string>",
                                                       "attrs": "map<string,array<double>>"})
    table, _ = declared.table([(["x", "y"], {"a": [1.0, 2], "b": []})])
    df = spark.createDataFrame(table)
    assert df.schema.simpleString() == "struct<tags:array<string>,attrs:map<string,array<double>>>"
    assert [tuple(r) for r in df.collect()] == [(["x", "y"], {"a": [1.0, 2.0], "b": []})]


def test_values_spark_cannot_take_are_refused_naming_the_field():
    schema = StreamSchema(["word", "when"])
    table, rejected = schema.table([("a", {1, 2}), ("b", None)])
    assert table.num_rows == 1
    assert rejected == [(0, "field 'when': cannot infer a type for a set value at row 0 ({1, 2}); "
                            "supported: int, float, str, bool, bytes, list, dict (its type was "
                            "fixed by the first batch with a value; declare it)")]
    big = StreamSchema(["n"], types={"n": int})
    _, rejected = big.table([(1 << 64,)])
    assert rejected and "field 'n'" in rejected[0][1] and "does not fit in a long" in rejected[0][1]


# --- Trident on worker processes ---------------------------------------------------------------
def test_trident_batch_that_failed_after_writing_is_written_once(cluster, tmp_path, spark):
    files, expected = write_input(tmp_path, n_files=2, lines=300)
    out = tmp_path / "out"
    conf = {"trident.transactional.state": "memory", "topology.max.spout.pending": 3,
            "topology.trident.batch.emit.interval.millis": 20,
            "topology.message.timeout.secs": 60, "spark.sql.shuffle.partitions": 2,
            OUTPUT_KEY: str(out), FAIL_KEY: 3}
    t0 = time.monotonic()
    lc = cluster(trident_words(TransactionalLineFiles(files, batch_lines=50)), conf,
                 name="spark-trident")
    lc.wait_for(lambda: totals_or_none(spark, out) == dict(expected), timeout=120,
                what=f"exact totals in {out}")
    exact = time.monotonic() - t0
    made = calls(str(out))
    per_txid = collections.Counter(b for _, b in made)
    # txid 3 wrote, raised, was retried with the same id and overwrote its partition.
    assert per_txid[3] == 2, made
    partitions = sorted(int(p.name.split("=")[1]) for p in out.glob("batch_id=*"))
    # fn ran only for batches with rows (6 txids of 50 lines per file), never for the empty
    # batches that keep coming once the input is read.
    assert partitions == sorted(per_txid) and len(partitions) == 6, (partitions, made)
    errors = [e["error"] for hb in lc.heartbeats().values() for e in hb.get("errors", [])]
    assert any("txid 3: fn raised" in e and "fails once after writing" in e for e in errors), \
        errors
    # One JVM, in the worker hosting the bridge; the other worker never started one.
    hosts = [w for w in lc.workers if jvms_of(w.proc.pid)]
    assert len(hosts) == 1 and len(jvms_of(hosts[0].proc.pid)) == 1, \
        [(w.proc.pid, jvms_of(w.proc.pid)) for w in lc.workers]
    jvm = jvms_of(hosts[0].proc.pid)[0]
    print(f"\nTrident into Spark: exact totals {exact:.1f} s after start ({len(made)} fn calls)")
    lc.stop(drain_secs=0, grace=15)
    poll_for(lambda: not alive(jvm.pid), timeout=20, what="the JVM gone with its worker")


# --- the example, with fn raising for one batch ---------------------------------------------------
def test_example_loses_no_word_when_fn_raises_for_one_batch(tmp_path, spark):
    """examples/word_count_spark.py on worker processes: batch 2 raises (before writing), its
    tuples are failed and their sentences replayed, the error is reported, and no word is
    lost. The bridge is at-least-once: a replayed sentence whose other words were in a batch
    that was written has those words written again, so a word may count more than once, by
    at most the words of the replayed sentences. (How often a sentence straddles batch 2's
    boundary depends on timing: batches close at 10,000 words, or after 2 s.)"""
    import importlib
    import sys

    from squall.deploy.static import StaticCluster
    sys.path.insert(0, EXAMPLES)
    try:
        example = importlib.import_module("word_count_spark")
        out = tmp_path / "parquet"
        conf = dict(example.CONF, **{example.OUTPUT_KEY: str(out), example.FAIL_KEY: 2,
                                     "wordcount.sentences": 2000,
                                     "topology.stats.freq.secs": 0.2})
        lc = StaticCluster("spark-example", example.topology().create_topology(), conf,
                           code_paths=[EXAMPLES], base_dir=str(tmp_path / "cluster"))
    finally:
        sys.path.remove(EXAMPLES)
    lc.start()
    try:
        lc.wait_for(lambda: lc.total("acked", "sentences") >= 2000, timeout=180,
                    what="all 2000 sentences acked")
        replayed = lc.total("failed", "sentences")
        assert replayed >= 1  # batch 2's sentences, replayed
        errors = [e["error"] for hb in lc.heartbeats().values() for e in hb.get("errors", [])]
        assert any("batch 2: fn raised" in e and "fails once" in e for e in errors), errors
    finally:
        lc.stop(drain_secs=0, grace=15)
    got, expected = totals(spark, out), expected_words(2000)
    lost = {w: n for w, n in expected.items() if got.get(w, 0) < n}
    assert not lost and set(got) == set(expected), lost
    words_per_sentence = sum(expected.values()) // 2000
    assert sum(got.values()) - sum(expected.values()) <= replayed * words_per_sentence
    assert (out / "_failed_once_2").exists()


# --- a real cluster: kill -9 of the worker hosting the bridge -----------------------------------
@pytest.fixture
def spark_cluster(tmp_path, zk_conf):
    yield from started(Cluster(tmp_path, zk_conf, FAILOVER))


def package(tmp_path):
    pkg = tmp_path / "sparkpkg"
    pkg.mkdir()
    for src in (os.path.join(HERE, "spark_topos.py"), os.path.join(HERE, "trident_topos.py"),
                os.path.join(EXAMPLES, "word_count.py")):
        shutil.copy(src, pkg)
    return pkg


def bridge_worker(c: Cluster, exclude: str | None = None):
    """(supervisor dir, pid, its JVM) of a running worker whose JVM is up and that does not
    run component ``exclude``."""
    def pick():
        for d, hb in worker_heartbeats(c):
            pid = int(hb.get("pid", 0))
            if pid and alive(pid) and hb.get("state") == "running" and \
                    exclude not in components_of(hb) and jvms_of(pid):
                return d, pid, jvms_of(pid)[0]
        return None
    return poll_for(pick, timeout=60, what="a worker with a running JVM\n" + c.logs())


def kill_jvm_and_worker(c: Cluster, sup_dir, pid: int, jvm: psutil.Process) -> float:
    t_kill, restarted = kill9(c, sup_dir, pid)
    try:
        poll_for(lambda: not alive(jvm.pid), timeout=20,
                 what=f"JVM {jvm.pid} exiting after its worker {pid} was killed -9")
    finally:
        if alive(jvm.pid):
            jvm.kill()
    return restarted


def test_bridge_worker_kill9_loses_nothing(spark_cluster, tmp_path, spark):
    c = spark_cluster
    out = tmp_path / "out"
    poll_for(lambda: "2 supervisor(s), 0/4 slots used" in c.run("list").stdout, timeout=20,
             what="2 supervisors registered\n" + c.logs())
    t0 = time.monotonic()
    # A short timeout: the trees lost with the killed worker fail (and replay) 6-12 s after
    # it, and a cold JVM (the first one, and the restarted worker's) costs nothing: the
    # bridge holds its tuples' timeouts while Spark starts.
    r = c.run("jar", str(package(tmp_path)), "spark_topos", "plain",
              "-c", f"{OUTPUT_KEY}={out}", "-c", "topology.message.timeout.secs=6",
              "-c", "topology.stats.freq.secs=0.2")
    assert r.returncode == 0, r.stdout + r.stderr + c.logs()
    # Two bridge executors, one per worker: kill the one not running the spout.
    sup_dir, victim, jvm = bridge_worker(c, exclude="sentences")
    t_jvm = time.monotonic() - t0
    poll_for(lambda: len(calls(str(out))) >= 2, timeout=90,
             what="two batches through Spark\n" + c.logs())
    t_batches = time.monotonic() - t0
    before = len(calls(str(out)))
    restarted = kill_jvm_and_worker(c, sup_dir, victim, jvm)
    t_kill = time.monotonic() - t0
    sentences = 5000

    def all_acked():
        hbs = [hb for _, hb in worker_heartbeats(c)]
        return stats(hbs, "sentences", "acked") >= sentences and \
            stats(hbs, "sentences", "pending") == 0
    poll_for(all_acked, timeout=120, what=f"all {sentences} sentences acked\n" + c.logs())
    done = time.monotonic() - t0
    expected = expected_words(sentences)
    got = poll_for(lambda: totals_or_none(spark, out), timeout=30, what="parquet totals")
    short = {w: (got.get(w, 0), n) for w, n in expected.items() if got.get(w, 0) < n}
    assert not short, f"words lost: {dict(list(short.items())[:10])}"
    extra = sum(got.values()) - sum(expected.values())
    print(f"\nbridge worker kill -9 after {before} batches: restarted {restarted:.2f} s, all "
          f"sentences acked {done:.1f} s after submit (a JVM up {t_jvm:.1f} s, two batches "
          f"{t_batches:.1f} s, the kill {t_kill:.1f} s); {extra} words written twice "
          f"(at-least-once)")


def test_trident_bridge_worker_kill9_still_writes_every_batch_once(spark_cluster, tmp_path,
                                                                   spark):
    c = spark_cluster
    input_dir = tmp_path / "input"
    input_dir.mkdir()
    files, expected = write_input(input_dir, n_files=2, lines=300)  # 5 txids of 60 lines
    out = tmp_path / "out"
    poll_for(lambda: "2 supervisor(s), 0/4 slots used" in c.run("list").stdout, timeout=20,
             what="2 supervisors registered\n" + c.logs())
    t0 = time.monotonic()
    # A short timeout: the batches lost with the killed worker are retried 8-16 s after it;
    # one that times out while the restarted worker's JVM starts is retried under its txid
    # and overwrites its partition (what this test checks).
    r = c.run("jar", str(package(tmp_path)), "spark_topos", "trident", str(input_dir), "60",
              "-c", f"{OUTPUT_KEY}={out}", "-c", "topology.message.timeout.secs=8",
              "-c", "topology.max.spout.pending=2", "-c", "spark.sql.shuffle.partitions=2",
              "-c", "topology.trident.batch.emit.interval.millis=20")
    assert r.returncode == 0, r.stdout + r.stderr + c.logs()
    sup_dir, victim, jvm = bridge_worker(c)
    poll_for(lambda: len({b for _, b in calls(str(out))}) >= 2, timeout=90,
             what="two txids through Spark\n" + c.logs())
    at_kill = sorted({b for _, b in calls(str(out))})
    restarted = kill_jvm_and_worker(c, sup_dir, victim, jvm)
    t_kill = time.monotonic()
    poll_for(lambda: totals_or_none(spark, out) == dict(expected), timeout=150,
             what=f"exact totals in {out} after the kill\n" + c.logs())
    exact = time.monotonic() - t_kill
    per_txid = collections.Counter(b for _, b in calls(str(out)))
    partitions = sorted(int(p.name.split("=")[1]) for p in out.glob("batch_id=*"))
    assert partitions == sorted(per_txid) and len(partitions) == 5, (partitions, per_txid)
    retried = sorted(t for t, n in per_txid.items() if n > 1)
    print(f"\nTrident bridge worker kill -9 after txids {at_kill}: restarted {restarted:.2f} s, "
          f"exact totals {exact:.1f} s after the kill ({time.monotonic() - t0:.1f} s after "
          f"submit); txids written more than once and overwritten: {retried}")
