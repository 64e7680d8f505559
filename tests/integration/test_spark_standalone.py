"""The Spark bridge against a real Spark standalone cluster, and against none.

* A Spark master and one Spark worker started from pyspark's own jars (``spark-class``, as
  the README's cluster section says), on loopback and free ports, the worker's directory
  (``SPARK_WORKER_DIR``) in tmp, shared by the module and stopped by pid. The Spark example
  runs with ``squall local -c spark.master=spark://...``: its totals are exact, every
  sentence acked with none failed although the first batch waits for a cold driver and a
  cold executor far longer than the message timeout (the bridge holds its tuples' timeouts
  meanwhile), and each batch's progress is in the REST API's component page and in the
  worker log.
* A master URL nothing answers: ``squall local`` ends in seconds, non-zero, naming the URL,
  with its run directory kept; a misspelt ``spark.*`` key is a warning naming Spark's.

Run with ``-s`` to see the timings.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import types
import urllib.request
from urllib.parse import quote, unquote

import psutil
import pytest

from squall.deploy.net import free_ports
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples")

#: Bound on a Spark daemon's start (a JVM) on this 2-core machine shared with other runs.
SPARK_DAEMON_START_SECS = 180
#: topology.message.timeout.secs of the standalone run: trees fail 1-2 timeouts after
#: their last refresh, and a cold start here (a driver JVM, the application's registration,
#: an executor JVM, the first job) takes 25-150 s: without the held timeouts the first
#: batches' sentences would time out and be replayed (and the totals would not be exact).
#: A warm batch takes a few seconds.
TIMEOUT_SECS = 10
#: Bound on the run getting every word through Spark: a cold start and the batches after.
ALL_THROUGH_SECS = 600


def squall(*args):
    return [sys.executable, "-m", "squall.cli", *args]


def spark_home() -> str:
    import pyspark
    return os.path.dirname(pyspark.__file__)


def expected_words(sentences: int) -> dict[str, int]:
    sys.path.insert(0, EXAMPLES)
    try:
        import word_count
    finally:
        sys.path.remove(EXAMPLES)
    return dict(word_count.expected_counts(word_count.make_pool(), sentences))


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """``spark://127.0.0.1:<port>``: a master and a worker (2 cores, 1 GiB) from pyspark's
    jars; their logs and the worker's directory in tmp; both stopped by pid at the end of the
    module, the worker's executors with it."""
    home = spark_home()
    tmp = tmp_path_factory.mktemp("spark-standalone")
    port, ui, wport, wui = free_ports(4)
    work = tmp / "work"
    env = dict(os.environ, SPARK_HOME=home, SPARK_WORKER_DIR=str(work),
               SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
               PYSPARK_PYTHON=sys.executable,
               # No REST submission server: it listens on a fixed port (6066).
               SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false")
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> None:
        with open(tmp / f"{name}.log", "wb") as log:  # spark-class execs the JVM: its pid
            procs.append(subprocess.Popen([os.path.join(home, "bin", "spark-class"), *args],
                                          stdout=log, stderr=subprocess.STDOUT, env=env,
                                          cwd=str(tmp)))

    def log(name: str) -> str:
        try:
            return (tmp / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""

    def logs() -> str:
        return "\n".join(f"--- spark {n} ---\n{log(n)[-3000:]}" for n in ("master", "worker"))

    try:
        t0 = time.monotonic()
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(ui))
        poll_for(lambda: "New state: ALIVE" in log("master"), timeout=SPARK_DAEMON_START_SECS,
                 interval=0.2, what="the Spark master up\n" + logs())
        start("worker", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
              "--port", str(wport), "--webui-port", str(wui), "--cores", "2", "--memory", "1g",
              url)
        poll_for(lambda: "Successfully registered with master" in log("worker"),
                 timeout=SPARK_DAEMON_START_SECS, interval=0.2,
                 what="the Spark worker registered\n" + logs())
        print(f"\nSpark standalone master and worker up in {time.monotonic() - t0:.1f} s")
        yield types.SimpleNamespace(url=url, work=work, log=log, logs=logs)
    finally:
        for p in reversed(procs):  # the worker first: it stops its executors
            try:
                children = psutil.Process(p.pid).children(recursive=True)
            except psutil.Error:
                children = []
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            for c in children:
                try:
                    c.kill()
                except psutil.Error:
                    pass


class Run:
    """A ``squall local`` process whose output is read on a thread as it comes."""

    def __init__(self, cwd, *args: str):
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(squall("local", *args), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, cwd=str(cwd))
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line)

    @property
    def out(self) -> str:
        return "".join(self.lines)

    def find(self, pattern: str):
        return re.search(pattern, self.out)

    def wait(self, timeout: float) -> int:
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(10)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(10)
        self.proc.stdout.close()


def component_page(run: Run, component: str) -> dict | None:
    """The REST API's component page of the run's topology (its UI's token), or None."""
    ui = run.find(r"UI: (http://127\.0\.0\.1:\d+)/\?token=(\S+)")
    tid = run.find(r"submitted as (\S+);")
    if not ui or not tid:
        return None
    req = urllib.request.Request(
        f"{ui.group(1)}/api/v1/topology/{quote(tid.group(1), safe='')}/component/{component}",
        headers={"Authorization": f"Bearer {unquote(ui.group(2))}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return json.load(resp)
    except OSError:
        return None


def test_example_on_a_standalone_cluster_exact_totals_progress_and_a_cold_start_held(
        standalone, tmp_path):
    sentences = 2000
    words = sum(expected_words(sentences).values())
    out = tmp_path / "parquet"
    run = Run(tmp_path, os.path.join(EXAMPLES, "word_count_spark.py"), "--duration", "3600",
              "--keep-logs", "-c", f"wordcount.sentences={sentences}",
              "-c", f"wordcount.spark.output={out}", "-c", f"spark.master={standalone.url}",
              "-c", "spark.driver.host=127.0.0.1", "-c", "spark.driver.bindAddress=127.0.0.1",
              "-c", "spark.executor.memory=512m",
              "-c", f"topology.message.timeout.secs={TIMEOUT_SECS}")
    try:
        def through():
            page = component_page(run, "spark")
            p = (page or {}).get("batchProgress")
            assert run.proc.poll() is None, run.out + standalone.logs()
            return page if p and p["rows"] >= words else None
        try:
            page = poll_for(through, timeout=ALL_THROUGH_SECS, interval=1.0,
                            what=f"all {words} words through Spark")
        except BaseException:
            print(run.out, standalone.logs())
            raise
        through_secs = time.monotonic() - run.t0
        run.proc.send_signal(signal.SIGINT)  # every word is in: stop, drain, report
        code = run.wait(ALL_THROUGH_SECS)
    finally:
        run.stop()
    text = run.out
    assert code == 0, text + standalone.logs()
    # Exact: no tuple timed out while the cold driver and executor started (held), so no
    # sentence was replayed into a second batch.
    assert re.search(rf"spout sentences: emitted={sentences} acked={sentences} failed=0", text), \
        text
    assert f"parquet {out}: {words} words, 1000 distinct" in text, text
    assert f"totals match the expected counts for {sentences} sentences: yes" in text, text
    # The batches ran on the standalone cluster: its worker launched an executor for them.
    assert "Registering app squall-" in standalone.log("master"), standalone.logs()
    assert list(standalone.work.glob("app-*/*/stderr")), list(standalone.work.iterdir())
    # Progress as Structured Streaming's, on the component page ...
    p = page["batchProgress"]
    assert p["rows"] == words and p["batches"] >= 2 and p["failedBatches"] == 0, p
    assert p["batchId"] == p["batches"] and p["numInputRows"] > 0, p
    assert p["processedRowsPerSecond"] > 0 and p["inputRowsPerSecond"] > 0, p
    assert p["durationMs"]["triggerExecution"] >= p["durationMs"]["addBatch"] > 0, p
    assert [e["batchProgress"]["rows"] for e in page["executorStats"]] == [words], page
    # ... and in the worker log: the first batch's line, with the session's start.
    logs_dir = re.search(r"logs kept in (\S+)", text).group(1)
    worker_logs = "".join(f.read_text(errors="replace")
                          for f in (pathlib.Path(logs_dir) / "logs").glob("*.log*"))
    first = re.search(r"component=spark task=\d+ batch 1: (\d+) rows, \d+ input rows/s, "
                      r"\d+ processed rows/s, ([\d.]+) s \(conversion [\d.]+ s, session start "
                      r"([\d.]+) s, wait [\d.]+ s, fn [\d.]+ s\)", worker_logs)
    assert first, worker_logs[-5000:]
    assert "holding the timeouts of the tuples waiting for Spark to start" in worker_logs
    print(f"\nstandalone: all {words} words through Spark {through_secs:.1f} s after start; "
          f"first batch {float(first.group(2)):.1f} s (session start "
          f"{float(first.group(3)):.1f} s) against a message timeout of {TIMEOUT_SECS} s")
    shutil.rmtree(logs_dir, ignore_errors=True)  # kept (--keep-logs) for the checks above


def test_an_unreachable_master_ends_squall_local_in_seconds_naming_the_url(tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"spark://127.0.0.1:{port}"
    t0 = time.monotonic()
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "word_count_spark.py"),
                                 "--duration", "300", "-c", f"spark.master={url}",
                                 "-c", "spark.sql.shuffle.partiton=2"),
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    took = time.monotonic() - t0
    out = proc.stdout
    assert proc.returncode != 0, out + proc.stderr
    # The misspelt key: a warning naming Spark's.
    assert "spark.sql.shuffle.partiton is not a key Spark knows: did you mean " \
           "spark.sql.shuffle.partitions?" in proc.stderr + out, proc.stderr + out
    # The reason on one line, naming the URL, from the worker that found it (in prepare,
    # before any tuple waited for Spark).
    m = re.search(r"\[squall local\] spark raised SparkUnavailable: the Spark master "
                  rf"{re.escape(url)} is unreachable \(127\.0\.0\.1:{port}: connection refused\)",
                  out)
    assert m, out
    started = re.search(r"starting ZooKeeper, Nimbus and a supervisor in (\S+)", out).group(1)
    assert f"logs kept in {started}" in out and os.path.isdir(started), out
    logs = "".join(f.read_text(errors="replace")
                   for f in (pathlib.Path(started) / "logs").glob("*.log*"))
    assert "SparkUnavailable" in logs and url in logs, logs[-3000:]
    # Seconds: the duration was 300 s, and no JVM was started to find it out.
    assert took < 120, f"{took:.0f} s\n{out}"
    print(f"\nunreachable master: squall local exited {proc.returncode} after {took:.1f} s")
    shutil.rmtree(started, ignore_errors=True)
