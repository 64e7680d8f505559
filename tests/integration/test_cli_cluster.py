"""The CLI against a real cluster: ZooKeeper, `squall nimbus` and two `squall supervisor` s of 2
slots each, as processes on loopback (the supervisors on 127.0.0.1 and 127.0.0.2, so workers of
different supervisors talk over tcp:// as across hosts); `squall jar` of the word count, list,
deactivate / activate, rebalance -n, kill -w, and the one-line errors.

The cluster is set up as SECURITY.md says: locked ZooKeeper, and mutual TLS with a
certificate per daemon (CN nimbus, CN supervisor) and one for the user running the CLI."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from squall.deploy.certs import CertificateAuthority
from squall.deploy.net import free_ports
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(REPO, "examples")


def squall_cmd(*args):
    return [sys.executable, "-m", "squall.cli", *args]


class Cluster:
    def __init__(self, tmp_path, zk_conf, extra_conf=None):
        self.tmp = tmp_path
        self.nimbus_port, p1, p2, p3, p4 = free_ports(5)
        conf = dict(zk_conf)
        conf.update({"nimbus.seeds": ["127.0.0.1"], "nimbus.grpc.port": self.nimbus_port,
                     "nimbus.monitor.freq.secs": 1, "supervisor.monitor.frequency.secs": 2,
                     "supervisor.worker.shutdown.sleep.secs": 2})
        ca = CertificateAuthority(str(tmp_path / "pki"))
        #: The user's certificate in squall.yaml; each daemon's is given with -c.
        conf.update(ca.issue("tester").conf())
        self.daemon_tls = {name: [f"-c{k}={v}" for k, v in
                                  ca.issue(name, server=name == "nimbus").conf().items()]
                           for name in ("nimbus", "supervisor")}
        conf["nimbus.supervisor.users"] = ["supervisor"]
        conf.update(extra_conf or {})
        #: What the CLI reads (the user's certificate): for a test's own NimbusClient too.
        self.conf = conf
        self.yaml = tmp_path / "squall.yaml"
        self.yaml.write_text(yaml.safe_dump(conf))
        self.env = dict(os.environ, SQUALL_CONF=str(self.yaml))
        self.sup_dirs = [tmp_path / "sup1", tmp_path / "sup2"]
        self.sup_ports = [[p1, p2], [p3, p4]]
        self.procs: dict[str, subprocess.Popen] = {}
        self.worker_pids: set[int] = set()

    def start_daemon(self, name, *args):
        log = open(self.tmp / f"{name}.log", "ab")
        tls = self.daemon_tls.get(args[0], [])  # the daemon's own certificate
        self.procs[name] = subprocess.Popen(squall_cmd(*args, *tls), stdout=log, stderr=log,
                                            env=self.env, cwd=str(self.tmp))
        log.close()

    def submit_word_count(self):
        """Wait for both supervisors, then `squall jar` the endless word count; returns the result."""
        poll_for(lambda: "2 supervisor(s), 0/4 slots used" in self.run("list").stdout, timeout=20,
                 what="2 supervisors registered\n" + self.logs())
        r = self.run("jar", EXAMPLES, "word_count", "-c", "wordcount.sentences=0",
                     "-c", "topology.stats.freq.secs=0.2")
        assert r.returncode == 0, r.stdout + r.stderr + self.logs()
        return r

    def start(self):
        self.start_daemon("nimbus", "nimbus", "-c", f"storm.local.dir={self.tmp / 'nimbus'}")
        # Each supervisor advertises its own loopback address, as two hosts would: workers
        # of different supervisors talk over tcp://, those of one supervisor over ipc://.
        for i, (d, ports) in enumerate(zip(self.sup_dirs, self.sup_ports)):
            self.start_daemon(f"supervisor{i + 1}", "supervisor", "-c", f"storm.local.dir={d}",
                              "-c", f"supervisor.slots.ports={json.dumps(ports)}",
                              "-c", f"storm.local.hostname=127.0.0.{i + 1}")

    def run(self, *args, timeout=60):
        return subprocess.run(squall_cmd(*args), capture_output=True, text=True,
                              env=self.env, cwd=str(self.tmp), timeout=timeout)

    def logs(self):
        out = []
        for p in sorted(self.tmp.glob("*.log")) + sorted(self.tmp.glob("sup*/logs/*.log")):
            out.append(f"--- {p} ---\n" + p.read_text(errors="replace")[-3000:])
        return "\n".join(out)

    def heartbeats(self):
        out = []
        for d in self.sup_dirs:
            for path in glob.glob(str(d / "workers" / "*" / "heartbeat.json")):
                try:
                    with open(path) as fh:
                        out.append(json.load(fh))
                except (OSError, ValueError):
                    pass
        for hb in out:
            if "pid" in hb:
                self.worker_pids.add(int(hb["pid"]))
        return out

    def acked(self):
        return sum(s.get("acked", 0) for hb in self.heartbeats()
                   for s in hb.get("tasks", {}).values() if s.get("component") == "sentences")

    def status_files(self):
        out = []
        for d in self.sup_dirs:
            for path in glob.glob(str(d / "workers" / "*" / "status")):
                with open(path) as fh:
                    out.append(fh.read().strip())
        return out

    def listed(self):
        r = self.run("list")
        assert r.returncode == 0, r.stdout + r.stderr
        rows = {}
        for line in r.stdout.splitlines()[1:]:
            cols = line.split(None, 7)  # the last column, HEALTH, may have spaces
            if len(cols) == 8 and cols[2] in ("ACTIVE", "INACTIVE", "KILLED", "REBALANCING"):
                rows[cols[0]] = cols
        return rows

    def stop_daemon(self, name, timeout=20):
        p = self.procs[name]
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return p.returncode

    def stop(self):
        for name, p in self.procs.items():
            try:
                self.worker_pids.update(c.pid for c in psutil.Process(p.pid).children(True))
            except psutil.Error:
                pass
        for name in list(self.procs):
            self.stop_daemon(name)
        for pid in self.worker_pids:
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass


def worker_pids(sup_dir):
    """Pids in the heartbeat files of a supervisor's workers."""
    pids = set()
    for path in glob.glob(str(sup_dir / "workers" / "*" / "heartbeat.json")):
        try:
            with open(path) as fh:
                pids.add(int(json.load(fh)["pid"]))
        except (OSError, ValueError, KeyError):
            pass
    return pids


def started(c):
    """Run cluster ``c`` for one test; every process it started is stopped by pid afterwards."""
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def cluster(tmp_path, zk_conf):
    yield from started(Cluster(tmp_path, zk_conf))


def alive(pid):
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_jar_list_deactivate_activate_kill_and_errors(cluster):
    c = cluster
    t0 = time.monotonic()
    # Both supervisors registered (their 4 slots) before the submit.
    r = c.submit_word_count()
    assert "Submitted topology word-count as word-count-" in r.stdout, r.stdout
    t_submit = time.monotonic()

    rows = poll_for(lambda: (lambda rs: rs if rs.get("word-count", [""] * 4)[2:4] ==
                             ["ACTIVE", "2"] else None)(c.listed()),
                    timeout=10, what="word-count ACTIVE with 2 workers\n" + c.logs())
    assert rows["word-count"][1].startswith("word-count-")
    poll_for(lambda: c.acked() > 0, timeout=20, what="first ack\n" + c.logs())
    first_ack = time.monotonic() - t_submit
    poll_for(lambda: c.acked() > 1000, timeout=20, what="1000 acks\n" + c.logs())
    pids = set(c.worker_pids)
    assert len(pids) == 2, pids
    # Both workers report: the HEALTH column says ok.
    poll_for(lambda: c.listed()["word-count"][7] == "ok", timeout=10, what="health ok")

    # deactivate -> spouts stop: acked stops growing
    r = c.run("deactivate", "word-count")
    assert r.returncode == 0, r.stderr
    poll_for(lambda: (lambda s: len(s) == 2 and set(s) == {"INACTIVE"})(c.status_files()),
             timeout=10, what="status files INACTIVE")
    time.sleep(1.5)  # in-flight trees finish, heartbeats catch up
    before = c.acked()
    time.sleep(1.5)
    assert c.acked() == before, "spouts kept emitting while INACTIVE"
    assert c.listed()["word-count"][2] == "INACTIVE"

    # activate -> acks resume
    r = c.run("activate", "word-count")
    assert r.returncode == 0, r.stderr
    poll_for(lambda: c.acked() > before + 500, timeout=15, what="acks after activate")

    # rebalance -n 3: the live topology moves to 3 workers and keeps acking
    r = c.run("rebalance", "word-count", "-w", "1", "-n", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    poll_for(lambda: c.listed()["word-count"][2:4] == ["ACTIVE", "3"], timeout=15,
             what="word-count ACTIVE with 3 workers\n" + c.logs())
    after = c.acked()
    poll_for(lambda: c.acked() > after + 500, timeout=20, what="acks after rebalance")

    # rebalance -e split=1: the workers run split's two tasks in one executor
    def split_executors():
        return sorted(name for hb in c.heartbeats() if hb.get("state") == "running"
                      for name in hb.get("executors", {}) if name.startswith("executor[split:"))

    assert len(split_executors()) == 2
    r = c.run("rebalance", "word-count", "-w", "1", "-e", "split=1")
    assert r.returncode == 0, r.stdout + r.stderr
    poll_for(lambda: len(split_executors()) == 1, timeout=20,
             what="one split executor after rebalance -e split=1\n" + c.logs())
    after = c.acked()
    poll_for(lambda: c.acked() > after + 500, timeout=20, what="acks after rebalance -e")
    pids = set(c.worker_pids)

    # kill -w 3: countdown, then gone and workers exit
    t_kill = time.monotonic()
    r = c.run("kill", "word-count", "-w", "3")
    kill_secs = time.monotonic() - t_kill
    assert r.returncode == 0, r.stdout + r.stderr
    assert "removal in" in r.stderr and "killed and removed" in r.stdout, r.stdout + r.stderr
    assert kill_secs >= 3
    assert "word-count" not in c.listed()
    poll_for(lambda: not any(alive(p) for p in pids), timeout=15, what="workers exit")

    # unknown topology: exit 1, one line naming it
    r = c.run("kill", "nosuch")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "nosuch" in lines[0], r.stderr

    # Nimbus stopped: one line naming the address tried
    assert c.stop_daemon("nimbus") == 0
    r = c.run("list")
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{c.nimbus_port}" in lines[0], r.stderr
    print(f"\nfirst ack {first_ack:.2f} s after submit; kill -w 3 took {kill_secs:.1f} s; "
          f"total {time.monotonic() - t0:.1f} s")


def test_daemon_with_zookeeper_unreachable_says_so_at_once_then_one_error_line(tmp_path):
    (port,) = free_ports(1)
    r = subprocess.run(squall_cmd("nimbus", "-c", f"storm.zookeeper.port={port}",
                                  "-c", "storm.zookeeper.connection.timeout=6000",
                                  "-c", f"storm.local.dir={tmp_path}"),
                       capture_output=True, text=True, timeout=30, cwd=str(tmp_path),
                       env=dict(os.environ, SQUALL_CONF=""))
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert lines[0] == (f"connecting to ZooKeeper at 127.0.0.1:{port} (up to 6 s, "
                        "storm.zookeeper.connection.timeout)"), r.stderr
    assert lines[1].startswith(f"still waiting for ZooKeeper at 127.0.0.1:{port} (5 s of 6)")
    assert len(lines) == 3 and lines[2].startswith("Error: cannot reach ZooKeeper") \
        and f"127.0.0.1:{port}" in lines[2], r.stderr


def test_jar_takes_a_topology_file_as_squall_local_does(cluster):
    """`squall jar FILE.py`: the file's topology(), CONF and NAME, its directory the package
    (README's "Writing a topology" form, no main(args) needed)."""
    c = cluster
    poll_for(lambda: "2 supervisor(s), 0/4 slots used" in c.run("list").stdout, timeout=20,
             what="2 supervisors registered\n" + c.logs())
    r = c.run("jar", os.path.join(EXAMPLES, "exclamation.py"), "-c",
              "topology.stats.freq.secs=0.2")
    assert r.returncode == 0, r.stdout + r.stderr + c.logs()
    assert "Submitted topology exclamation as exclamation-" in r.stdout, r.stdout
    poll_for(lambda: c.listed().get("exclamation", [""] * 4)[2] == "ACTIVE", timeout=10,
             what="exclamation ACTIVE")
    poll_for(lambda: sum(s.get("acked", 0) for hb in c.heartbeats()
                         for s in hb.get("tasks", {}).values()
                         if s.get("component") == "words") > 100,
             timeout=30, what="the file's topology acking\n" + c.logs())
    r = c.run("kill", "exclamation", "-w", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    # A file with a mistake: one line naming it, nothing submitted.
    bad = c.tmp / "broken_topo.py"
    bad.write_text("def topology(:\n")
    r = c.run("jar", str(bad))
    assert r.returncode == 1 and "broken_topo.py" in r.stderr and "Traceback" not in r.stderr


def test_jar_submits_a_flux_file_whose_shell_components_run_from_resources(cluster):
    """`squall jar --flux FILE.yaml`: Storm's Flux with a shell spout and a shell bolt; the
    supervisors extract the package's resources/ and every sentence is acked."""
    c = cluster
    poll_for(lambda: "2 supervisor(s), 0/4 slots used" in c.run("list").stdout, timeout=20,
             what="2 supervisors registered\n" + c.logs())
    r = c.run("jar", "--flux", os.path.join(EXAMPLES, "word_count.yaml"), "-c",
              "sentences.total=2000", "-c", "topology.stats.freq.secs=0.2")
    assert r.returncode == 0, r.stdout + r.stderr + c.logs()
    assert "Submitted topology flux-word-count as flux-word-count-" in r.stdout, r.stdout

    def total(component, key):
        return sum(s.get(key, 0) for hb in c.heartbeats() for s in hb.get("tasks", {}).values()
                   if s.get("component") == component)
    # Each worker writes its own heartbeat: the spout's and the counts' are read apart.
    poll_for(lambda: total("sentences", "acked") == 2000 and
             total("count", "executed") == 20_000, timeout=60,
             what="all 2000 sentences acked and their 20,000 words counted\n" + c.logs())
    assert total("sentences", "failed") == 0
    r = c.run("kill", "flux-word-count", "-w", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    # A Flux file with a misspelt grouping: one line naming file and line, nothing submitted.
    bad = c.tmp / "bad_flux.yaml"
    good = Path(EXAMPLES, "word_count.yaml").read_text()
    bad.write_text(good.replace("type: SHUFFLE", "type: SHUFLE", 1))
    r = c.run("jar", "--flux", str(bad))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "bad_flux.yaml:46: unknown grouping type 'SHUFLE'" in r.stderr, r.stderr


CRASHY = '''
from squall.client import Bolt, Spout, TopologyBuilder


class Numbers(Spout):
    def open(self, conf, context, collector):
        self.collector, self.n = collector, 0

    def next_tuple(self):
        self.n += 1
        self.collector.emit([self.n], msg_id=self.n)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class Boom(Bolt):
    def prepare(self, conf, context, collector):
        pass

    def execute(self, tup):
        raise ValueError(f"bad number {tup.values[0]}")

    def declare_output_fields(self, declarer):
        pass


NAME = "crashy"
CONF = {"topology.workers": 1}


def topology():
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("boom", Boom()).shuffle_grouping("numbers")
    return b
'''


def test_monitor_set_log_level_and_a_crash_loop_in_list(cluster):
    """The operator's verbs on a running topology: `squall monitor` prints throughput lines,
    `squall set_log_level` reaches the workers (and a removed level is restored), and a
    topology whose bolt raises on every tuple is ACTIVE *and* says its workers restart, with
    its last error, in `squall list`."""
    c = cluster
    c.submit_word_count()
    poll_for(lambda: c.acked() > 100, timeout=30, what="acks\n" + c.logs())

    # monitor: a header, then a line per interval for split's default stream, until Ctrl-C.
    # Counters reach Nimbus with the supervisors' reports (supervisor.heartbeat.frequency.secs):
    # the lines span more than one report, so some interval has emits.
    report = float(c.conf.get("supervisor.heartbeat.frequency.secs", 5))
    interval = 1.0
    proc = subprocess.Popen(squall_cmd("monitor", "word-count", "-m", "split", "-i",
                                       str(interval)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=c.env, cwd=str(c.tmp))
    try:
        header = proc.stdout.readline()
        lines = [proc.stdout.readline() for _ in range(int(2 * report / interval) + 1)]
    finally:
        proc.send_signal(signal.SIGINT)
        try:  # Ctrl-C ends it after at most one interval and one Nimbus call
            out, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail("squall monitor did not exit within 20 s of Ctrl-C")
    assert header.startswith("topology\tcomponent\tparallelism\tstream"), header + err
    for line in lines:
        topo, comp, par, stream, ms, emitted, rate = line.rstrip("\n").split("\t")
        assert (topo, comp, par, stream) == ("word-count", "split", "2", "default"), line
        assert int(ms) > 0 and int(emitted) >= 0 and float(rate) >= 0
    assert any(int(line.split("\t")[5]) > 0 for line in lines), lines
    assert proc.returncode == 0, err
    r = c.run("monitor", "word-count", "-m", "nope", "-i", "1")
    assert r.returncode == 1 and "has no component 'nope'" in r.stderr, r.stderr

    # set_log_level: every worker logs the change within a supervisor sync and a stats period.
    def worker_logs():
        return "".join(p.read_text(errors="replace") for d in c.sup_dirs
                       for p in (d / "logs").glob("word-count-*.log"))
    r = c.run("set_log_level", "word-count", "-l", "squall.worker=DEBUG:600")
    assert r.returncode == 0 and "squall.worker = DEBUG until" in r.stdout, r.stdout + r.stderr
    poll_for(lambda: worker_logs().count("log levels squall.worker=DEBUG") == 2, timeout=15,
             what="both workers applying DEBUG\n" + c.logs())
    r = c.run("set_log_level", "word-count", "-r", "squall.worker")
    assert r.returncode == 0 and "no log levels set" in r.stdout, r.stdout + r.stderr
    poll_for(lambda: worker_logs().count("log levels squall.worker restored") == 2, timeout=15,
             what="both workers restoring the level")
    r = c.run("set_log_level", "word-count", "-l", "squall.worker=LOUD")
    assert r.returncode == 2 and "unknown log level 'LOUD'" in r.stderr, r.stderr
    r = c.run("kill", "word-count", "-w", "0")
    assert r.returncode == 0, r.stderr

    # A crash loop shows in `squall list`, status still ACTIVE.
    crashy = c.tmp / "crashy" / "crashy.py"  # its own folder: the package is the folder
    crashy.parent.mkdir()
    crashy.write_text(CRASHY)
    r = c.run("jar", str(crashy))
    assert r.returncode == 0, r.stdout + r.stderr

    def looping():
        out = c.run("list").stdout
        row = next((line for line in out.splitlines() if line.startswith("crashy ")), "")
        return out if "ACTIVE" in row and "workers restarting: " in row and \
            "crashy: last error" in out else None
    out = poll_for(looping, timeout=40, what="the crash loop in squall list\n" + c.logs())
    assert "in boom on 127.0.0." in out and "ValueError: bad number" in out, out
