"""``squall local`` end to end: the word-count example on a private ZooKeeper, Nimbus and
supervisor; `squall list` against that Nimbus while it runs; Ctrl-C stopping every process."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from urllib.parse import unquote

import psutil
import pytest

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples")


def squall(*args):
    return [sys.executable, "-m", "squall.cli", *args]


def daemons(out):
    """(ZooKeeper pid, Nimbus port) from the run's start-up line."""
    m = re.search(r"ZooKeeper 127\.0\.0\.1:\d+ \(pid (\d+)\), Nimbus 127\.0\.0\.1:(\d+)", out)
    assert m, out
    return int(m.group(1)), int(m.group(2))


def gone(pid):
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def run_dir(out):
    """The run's directory, from its first line."""
    m = re.search(r"starting ZooKeeper, Nimbus and a supervisor in (\S+)", out)
    assert m, out
    return m.group(1)


def test_word_count_example_prints_correct_counts_with_every_sentence_acked(tmp_path):
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "word_count.py"),
                                 "--duration", "10", "-c", "wordcount.sentences=5000",
                                 "--keep-logs"),
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "counts match the expected totals for 5000 sentences: yes" in out, out
    assert re.search(r"spout sentences: emitted=5000 acked=5000 failed=0", out), out
    assert "final: 50000 words" in out
    zk_pid, _ = daemons(out)
    assert gone(zk_pid), "the private ZooKeeper outlived squall local"
    # --keep-logs keeps a clean run's logs too, and says where.
    kept = run_dir(out)
    try:
        assert f"logs kept in {kept}" in out, out
        assert any(name.endswith(".log") for _, _, names in os.walk(kept) for name in names)
    finally:
        shutil.rmtree(kept, ignore_errors=True)


#: A Bolt that never acks (the newcomer's usual mistake) and reports an error of two lines
#: on every 50th tuple; trees time out after 3 s.
NO_ACK = '''
from squall.client import Bolt, Spout, TopologyBuilder


class Numbers(Spout):
    def open(self, conf, context, collector):
        self.collector, self.n = collector, 0

    def next_tuple(self):
        if self.n < 200:
            self.n += 1
            self.collector.emit([self.n], msg_id=self.n)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class NoAck(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        if tup.values[0] % 50 == 0:
            self.collector.report_error(ValueError(f"bad number {tup.values[0]}\\nat line 2"))


NAME = "noack"
CONF = {"topology.workers": 1, "topology.message.timeout.secs": 3}


def topology():
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("noack", NoAck()).shuffle_grouping("numbers")
    return b
'''


def test_errors_show_as_they_happen_and_failed_trees_end_the_run_with_a_hint(tmp_path):
    """Errors used to show only at the end (the last 5), and a bolt that never acks ended
    with exit code 0 and its logs deleted: now each error is a line while the run goes on,
    as is the hint once its trees time out (3 s), and the run ends with exit code 3, what
    failed and the logs kept."""
    (tmp_path / "noack.py").write_text(NO_ACK)
    proc = subprocess.Popen(squall("local", "noack.py", "--duration", "12"), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(tmp_path))
    lines = []
    try:
        # The errors come within a second or two of the submit, the timeouts after 3 s to
        # 6 s, the run ends after 12 s and a drain: both are read while it still runs.
        seen = set()
        for line in proc.stdout:
            lines.append(line)
            for what in ("bad number 200", "hint: bolt noack"):
                if what in line:
                    assert proc.poll() is None, "".join(lines)
                    seen.add(what)
            if len(seen) == 2:
                break
        out_rest, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = "".join(lines) + out_rest
    assert proc.returncode == 3, out + err
    errors = [ln for ln in out.splitlines() if " in noack (task " in ln]
    assert len(errors) == 4, out
    for n, line in zip((50, 100, 150, 200), errors):
        assert re.fullmatch(r"\[squall local\] error at \d\d:\d\d:\d\d in noack \(task \d+, "
                            rf"127\.0\.0\.1:\d+\): ValueError: bad number {n} "
                            r"\(\+1 line\(s\) in its worker log\)", line), line
    assert "spout numbers: emitted=200 acked=0 failed=200 (timed out 200) pending=0" in out, out
    assert "200 of 200 tuple tree(s) failed (200 timed out: topology.message.timeout.secs=3): " \
        "exit code 3" in out, out
    assert "hint: bolt noack executed 200 tuple(s) and acked 0: a Bolt must ack each tuple " \
        "it is done with (self.collector.ack(tup)); a BasicBolt acks for you" in out, out
    kept = run_dir(out)
    try:
        assert f"logs kept in {kept}" in out and os.path.isdir(os.path.join(kept, "logs")), out
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def test_kafka_word_count_example_starts_its_broker_and_counts_exactly(tmp_path):
    """examples/kafka_word_count.py: squall local starts a broker for its KAFKA_TOPICS, its
    setup() fills the input topic, and its report() reads the counts topic back."""
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "kafka_word_count.py"),
                                 "--duration", "12", "-c", "wordcount.sentences=3000"),
                          capture_output=True, text=True, timeout=180, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    m = re.search(r"Kafka \(\w+\) 127\.0\.0\.1:\d+ \(pid (\d+)\)", out)
    assert m, out
    assert "wrote 3000 sentences to sentences" in out, out
    assert re.search(r"spout sentences: emitted=3000 acked=3000 failed=0 pending=0", out), out
    assert "30000 count records in word-counts: 30000 words, 1000 distinct" in out, out
    assert "last counts match the expected totals: yes" in out, out
    assert gone(int(m.group(1))), "the private Kafka broker outlived squall local"


@pytest.mark.parametrize("mode", ["barrier", "acker"])
def test_stateful_word_count_example_counts_exactly_with_checkpoints(tmp_path, mode):
    """examples/stateful_word_count.py: a StatefulBolt under barrier checkpointing (no acker)
    or Storm's acker-driven checkpoints, and a tumbling window beside it. The counters are
    the user's tuples: checkpoint tuples (executed=200085 against acked=200000 before) and
    barrier forwards are the runtime's."""
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "stateful_word_count.py"),
                                 "--duration", "8", "-c", "wordcount.sentences=5000",
                                 "-c", f"topology.state.checkpoint.mode={mode}"),
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    totals = re.findall(r"count task \d: (\d+) words, \d+ distinct; exact: yes", out)
    assert len(totals) == 2 and sum(map(int, totals)) == 50_000, out
    windows = [int(n) for n in re.findall(r"window ending \d+: (\d+) words", out)]
    assert windows and sum(windows) <= 50_000, out
    assert "spout sentences: emitted=5000 acked=5000 failed=0 pending=0" in out, out
    assert "bolt split: executed=5000 emitted=50000 acked=5000 failed=0" in out, out
    assert re.search(r"bolt count: executed=50000 emitted=\d+ acked=50000 failed=0", out), out
    assert "$checkpointspout" not in out, out


@pytest.mark.parametrize("lang", ["python", "node"])
def test_shell_word_count_example_runs_its_split_bolt_as_a_child(tmp_path, lang):
    """examples/word_count_shell.py: the split bolt is resources/splitsentence.py (or .js),
    shipped in the package's resources/ and run over Storm's multi-lang protocol."""
    if lang == "node" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    env = dict(os.environ, WORDCOUNT_SPLIT=lang)
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "word_count_shell.py"),
                                 "--duration", "8", "-c", "wordcount.sentences=5000"),
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path),
                          env=env)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "counts match the expected totals for 5000 sentences: yes" in out, out
    assert re.search(r"bolt split: executed=5000 emitted=50000 acked=5000 failed=0", out), out
    assert re.search(r"spout sentences: emitted=5000 acked=5000 failed=0", out), out


def test_flux_word_count_example_runs_with_shell_components(tmp_path):
    """examples/word_count.yaml through `squall local --flux`: Storm's Flux file format, a
    shell spout and bolt, Storm's TestWordCounter and LogInfoBolt."""
    proc = subprocess.run(squall("local", "--flux", os.path.join(EXAMPLES, "word_count.yaml"),
                                 "--duration", "8", "-c", "sentences.total=2000"),
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "topology flux-word-count submitted" in out, out
    assert re.search(r"spout sentences: emitted=2000 acked=2000 failed=0", out), out
    assert re.search(r"bolt count: executed=20000 emitted=20000 acked=20000 failed=0", out), out


def test_exclamation_example_runs(tmp_path):
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "exclamation.py"),
                                 "--duration", "4"),
                          capture_output=True, text=True, timeout=60, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "!!!!!!" in proc.stdout
    assert re.search(r"spout words: emitted=\d+ acked=\d+ failed=0", proc.stdout)


def test_ctrl_c_stops_every_worker_cleanly(tmp_path):
    proc = subprocess.Popen(squall("local", os.path.join(EXAMPLES, "word_count.py"),
                                   "-c", "wordcount.sentences=0"),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=str(tmp_path))
    pids = []
    lines = []
    deadline = time.monotonic() + 60
    try:
        for line in proc.stdout:
            lines.append(line)
            m = re.search(r"worker \S+ pid (\d+)", line)
            if m:
                pids.append(int(m.group(1)))
            if "words so far" in line and len(pids) == 2:
                break
            assert time.monotonic() < deadline, "".join(lines)
        assert len(pids) == 2, "".join(lines)
        zk_pid, nimbus_port = daemons("".join(lines))
        # The run is a real cluster: its Nimbus answers `squall list`.
        # Over mutual TLS with the run's throwaway certificate, as squall local says.
        client_yaml = re.search(r"SQUALL_CONF=(\S+)", "".join(lines)).group(1)
        listed = subprocess.run(squall("list"), capture_output=True, text=True, timeout=30,
                                cwd=str(tmp_path), env=dict(os.environ, SQUALL_CONF=client_yaml))
        with open(client_yaml) as fh:
            assert str(nimbus_port) in fh.read()
        plain = subprocess.run(squall("list", "-c", "nimbus.seeds=[127.0.0.1]",
                                      "-c", f"nimbus.grpc.port={nimbus_port}"),
                               capture_output=True, text=True, timeout=30, cwd=str(tmp_path),
                               env=dict(os.environ, SQUALL_CONF=""))
        assert plain.returncode == 1 and "set squall.tls.*" in plain.stderr, plain.stderr
        assert re.search(r"^word-count\s+\S+\s+ACTIVE\s+2\s", listed.stdout, re.M), \
            listed.stdout + listed.stderr
        # The printed UI address answers (its token in it), and shows the same topology.
        ui = re.search(r"UI: (http://127\.0\.0\.1:(\d+))/\?token=(\S+)", "".join(lines))
        assert ui, "".join(lines)
        req = urllib.request.Request(f"{ui.group(1)}/api/v1/topology/summary",
                                     headers={"Authorization": f"Bearer {unquote(ui.group(3))}"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            shown = json.load(resp)["topologies"]
        assert [(t["name"], t["status"], t["workersTotal"]) for t in shown] == \
            [("word-count", "ACTIVE", 2)]
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(lines) + rest
    assert proc.returncode == 0, out
    assert "stopping (signal 2)" in out
    for pid in pids + [zk_pid]:
        assert gone(pid), f"pid {pid} still running\n{out}"
    assert re.search(r"spout sentences: emitted=\d+ acked=\d+ failed=0 pending=0", out), out


def test_trident_example_counts_every_word_exactly_once_with_a_private_redis(tmp_path):
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "trident_word_count.py"),
                                 "--duration", "6"),
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert re.search(r"Redis 127\.0\.0\.1:\d+ \(pid \d+\)", out), out
    assert "20000 words stored, 1000 distinct" in out, out
    assert "counts match the input exactly: yes" in out, out


def test_redis_example_stores_every_words_count_in_the_private_redis(tmp_path):
    """examples/redis_word_count.py: the RedisStoreBolt finds squall local's private Redis
    through trident.redis.host/port, and each word's last count in the hash is its total."""
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "redis_word_count.py"),
                                 "--duration", "8", "-c", "wordcount.sentences=3000"),
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert re.search(r"spout sentences: emitted=3000 acked=3000 failed=0 pending=0", out), out
    assert "bolt to-redis: executed=30000 emitted=0 acked=30000 failed=0" in out, out
    assert "30000 words counted in Redis hash redis-word-count, 1000 distinct" in out, out
    assert "counts match the input exactly: yes" in out, out


def test_file_example_publishes_every_count_once(tmp_path):
    """examples/file_word_count.py: barrier checkpoints, the FileSinkBolt's files published
    at their commits into ./file-word-count-out; each word's count is a line, once."""
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "file_word_count.py"),
                                 "--duration", "8", "-c", "wordcount.sentences=3000"),
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert re.search(r"30000 lines in \d+ published files in .*file-word-count-out; 1000 "
                     r"distinct words; every line once: yes", out), out
    assert "last counts match the input exactly: yes" in out, out
    assert not [n for n in os.listdir(tmp_path / "file-word-count-out")
                if n.endswith(".inprogress")]


def test_jdbc_example_starts_postgres_creates_its_table_and_counts_exactly(tmp_path):
    """examples/jdbc_word_count.py: squall local starts a PostgreSQL for its POSTGRES_TABLES,
    creates the table, hands the bolt its connection string through jdbc.conf (the password
    redacted in what it prints), and the upserted counts are each word's total; the server is
    stopped with the run."""
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "jdbc_word_count.py"),
                                 "--duration", "8", "-c", "wordcount.sentences=3000"),
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    m = re.search(r"PostgreSQL 127\.0\.0\.1:\d+ \(pid (\d+)\): jdbc.conf=.*password=<redacted>",
                  out)
    assert m, out
    assert "table word_counts (word text PRIMARY KEY, count bigint NOT NULL)" in out, out
    assert re.search(r"spout sentences: emitted=3000 acked=3000 failed=0 pending=0", out), out
    assert "bolt to-postgres: executed=30000 emitted=0 acked=30000 failed=0" in out, out
    assert "30000 words counted in table word_counts" in out and "1000 distinct" in out, out
    assert "counts match the input exactly: yes" in out, out
    assert gone(int(m.group(1))), "the private PostgreSQL outlived squall local"


def test_nats_example_starts_its_server_and_counts_exactly(tmp_path):
    """examples/nats_word_count.py: squall local starts a NATS server for its NATS_STREAMS,
    its setup() fills the sentences stream, the JetStreamBolt publishes every count, and its
    report() reads each word's last count back; the server is stopped with the run."""
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "nats_word_count.py"),
                                 "--duration", "8", "-c", "wordcount.sentences=3000"),
                          capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    m = re.search(r"NATS 127\.0\.0\.1:\d+ \(pid (\d+), JetStream\)", out)
    assert m, out
    assert "wrote 3000 sentences to SENTENCES" in out, out
    assert re.search(r"spout sentences: emitted=3000 acked=3000 failed=0 pending=0", out), out
    assert "bolt to-nats: executed=30000 emitted=0 acked=30000 failed=0" in out, out
    assert "30000 count messages in WORD_COUNTS: 30000 words, 1000 distinct" in out, out
    assert "last counts match the expected totals: yes" in out, out
    assert gone(int(m.group(1))), "the private NATS server outlived squall local"


def test_spark_example_writes_parquet_that_spark_reads_back_with_exact_totals(tmp_path):
    """examples/word_count_spark.py: word counts per batch in Spark, appended to parquet; the
    report reads the parquet back with Spark. (Its failure path, fn raising for a batch, is
    in test_spark_bridge.py, where the test can wait for the replay.)"""
    out = tmp_path / "parquet"
    # 2,000 sentences fit under max.spout.pending: all are out within the 5 s, and the drain
    # waits for every tree however long the JVM takes to start.
    proc = subprocess.run(squall("local", os.path.join(EXAMPLES, "word_count_spark.py"),
                                 "--duration", "5", "-c", "wordcount.sentences=2000",
                                 "-c", f"wordcount.spark.output={out}",
                                 "-c", "topology.shutdown.drain.secs=200"),
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    text = proc.stdout
    assert proc.returncode == 0, text + proc.stderr
    assert re.search(r"spout sentences: emitted=2000 acked=2000 failed=0", text), text
    assert f"parquet {out}: 20000 words, 1000 distinct" in text, text
    assert "totals match the expected counts for 2000 sentences: yes" in text, text
    # Spark's banner and log lines stay out of the console (in the workers' logs and
    # report-jvm.log).
    noise = [ln for ln in proc.stderr.splitlines()
             if "log4j" in ln or "incubator" in ln or re.match(r"\d\d/\d\d/\d\d ", ln)]
    assert noise == [], proc.stderr
