"""A topology's own Python dependencies on a real cluster, and the builder alone.

The cluster (one per module): ZooKeeper, `squall nimbus`, one `squall supervisor` of 2 slots
and `squall ui`, as processes on loopback with mutual TLS (test_cli_cluster's Cluster). A
wheel made in the test (a one-module package, `pip wheel --no-index`: no package index is
used anywhere) ships with `squall jar --requirements --wheelhouse`; a bolt imports it in
its worker and emits what only it provides, and every tuple arrives. A second submit reuses
the environment; a requirement no wheel satisfies fails the topology with pip's error in
`squall list` and the REST API, tried once (no hot loop).
"""

from __future__ import annotations

import glob
import json
import logging
import os
import subprocess
import sys
import textwrap
import time
import urllib.request
import uuid
import zipfile

import psutil
import pytest

from squall.client.web import new_token
from squall.deploy.net import free_ports
from squall.supervisor.venvs import READY_FILE, PythonEnvs
from test_cli_cluster import Cluster
from zk_fixtures import TEST_SESSION_TIMEOUT, poll_for

pytestmark = pytest.mark.integration

#: Tuples the spout emits; each must reach the sink tagged by the shipped package.
COUNT = 40
#: How often the supervisor reports to Nimbus and re-reads its assignments (seconds).
REPORT_SECS = 1.0
MONITOR_SECS = 2.0
#: The cluster's bound on one environment build (supervisor.venv.build.timeout.secs).
BUILD_TIMEOUT = 60.0

TOPOLOGY = '''
"""Numbers -> tag (imports depmod, shipped in the package's wheelhouse) -> sink."""
import os

from squall.client import Bolt, Spout, TopologyBuilder

NAME = os.environ.get("DEPS_TOPOLOGY_NAME", "deps")
CONF = {"topology.workers": 2, "topology.stats.freq.secs": 0.2}


def record(conf, what, line):
    with open(os.path.join(conf["deps.out.dir"], what), "a") as fh:
        fh.write(f"{line}\\n")


class Numbers(Spout):
    def open(self, conf, context, collector):
        self.conf, self.collector, self.next = conf, collector, 0

    def next_tuple(self):
        if self.next < int(self.conf["deps.count"]):
            self.collector.emit([self.next], msg_id=self.next)
            self.next += 1

    def ack(self, msg_id):
        record(self.conf, "acked", msg_id)

    def fail(self, msg_id):
        self.collector.emit([msg_id], msg_id=msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class Tag(Bolt):
    def prepare(self, conf, context, collector):
        import depmod  # only the topology's environment has it (not the cluster, not the client)
        self.depmod, self.collector = depmod, collector

    def execute(self, tup):
        self.collector.emit([self.depmod.tag(tup.values[0])], anchors=[tup])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(["tagged"])


class Sink(Bolt):
    def prepare(self, conf, context, collector):
        self.conf, self.collector = conf, collector

    def execute(self, tup):
        record(self.conf, "sink", tup.values[0])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        pass


def topology():
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(), 1)
    b.set_bolt("tag", Tag(), 2).shuffle_grouping("numbers")
    b.set_bolt("sink", Sink(), 1).global_grouping("tag")
    return b
'''


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> str:
    """A wheelhouse with depmod 1.0, built offline from a source tree made here."""
    tmp_path = tmp_path_factory.mktemp("depmod")
    src = tmp_path / "depmod-src"
    src.mkdir()
    (src / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "depmod"
        version = "1.0"
        """))
    (src / "depmod.py").write_text('def tag(n):\n    return f"{n}!depmod-1.0"\n')
    wh = tmp_path / "wheelhouse"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-index",
                    "--no-build-isolation", "-q", "-w", str(wh), str(src)], check=True,
                   timeout=120)
    assert [p.name for p in wh.iterdir()] == ["depmod-1.0-py3-none-any.whl"]
    return str(wh)


class DepsCluster(Cluster):
    """Nimbus, one supervisor of 2 slots and the UI (with the cluster's HTTP token)."""

    def __init__(self, tmp_path, zk_conf):
        token_file = tmp_path / "http.token"
        token_file.write_text(new_token() + "\n")
        super().__init__(tmp_path, zk_conf, {
            "squall.http.token.file": str(token_file),
            "supervisor.heartbeat.frequency.secs": REPORT_SECS,
            "supervisor.monitor.frequency.secs": MONITOR_SECS,
            "supervisor.venv.build.timeout.secs": BUILD_TIMEOUT})
        self.token = token_file.read_text().strip()
        self.sup_dirs = self.sup_dirs[:1]
        self.ui_port, = free_ports(1)
        self.venvs = self.sup_dirs[0] / "supervisor" / "venvs"

    def start(self):
        self.start_daemon("nimbus", "nimbus", "-c", f"storm.local.dir={self.tmp / 'nimbus'}")
        self.start_daemon("supervisor1", "supervisor", "-c", f"storm.local.dir={self.sup_dirs[0]}",
                          "-c", f"supervisor.slots.ports={json.dumps(self.sup_ports[0])}")
        self.start_daemon("ui", "ui", "-c", f"ui.port={self.ui_port}")

    def supervisor_log(self):
        return (self.tmp / "supervisor1.log").read_text(errors="replace")

    def rest(self, path):
        req = urllib.request.Request(f"http://127.0.0.1:{self.ui_port}/api/v1/{path}",
                                     headers={"Authorization": f"Bearer {self.token}"})
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return json.load(resp)
        except OSError:
            return None  # not listening yet

    def workers_gone(self, pids):
        return not any(psutil.pid_exists(p) and psutil.Process(p).status() !=
                       psutil.STATUS_ZOMBIE for p in pids)


@pytest.fixture(scope="module")
def deps(zookeeper, tmp_path_factory):
    """The module's cluster, on its own ZooKeeper root (zk_conf's settings)."""
    tmp = tmp_path_factory.mktemp("deps")
    zk_conf = zookeeper.conf(root=f"/squall-test-{uuid.uuid4().hex[:12]}")
    zk_conf.update({"storm.zookeeper.auth.payload": f"squall:{uuid.uuid4().hex}",
                    "storm.zookeeper.connection.timeout": 10_000,
                    "storm.zookeeper.session.timeout": int(TEST_SESSION_TIMEOUT * 1000),
                    "storm.zookeeper.retry.interval": 100,
                    "storm.zookeeper.retry.intervalceiling.millis": 1000})
    c = DepsCluster(tmp, zk_conf)
    c.start()
    try:
        poll_for(lambda: "1 supervisor(s), 0/2 slots used" in c.run("list").stdout, timeout=30,
                 what="the supervisor registered\n" + c.logs())
        yield c
    finally:
        c.stop()


def package(tmp_path, name: str) -> str:
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "deps_topology.py").write_text(TOPOLOGY)
    return str(pkg / "deps_topology.py")


def lines(path) -> list[str]:
    try:
        with open(path) as fh:
            return fh.read().split()
    except FileNotFoundError:
        return []


def test_a_shipped_wheel_is_installed_once_and_reused(deps, wheelhouse, tmp_path):
    c = deps
    t0 = time.monotonic()
    reqs = tmp_path / "reqs.txt"
    reqs.write_text("depmod==1.0\n")
    topo = package(tmp_path, "good")
    expected = {f"{i}!depmod-1.0" for i in range(COUNT)}
    # What the first build may take, then the workers' start and the tuples' trip.
    bound = BUILD_TIMEOUT + 2 * MONITOR_SECS + 30

    def submit(out):
        out.mkdir()
        r = c.run("jar", topo, "--requirements", str(reqs), "--wheelhouse", wheelhouse,
                  "-c", f"deps.out.dir={out}", "-c", f"deps.count={COUNT}")
        assert r.returncode == 0, r.stdout + r.stderr + c.logs()
        assert "Python requirements: 1 from" in r.stderr and "1 wheel(s)" in r.stderr, r.stderr
        return r

    out1 = tmp_path / "out1"
    submit(out1)
    t_submit = time.monotonic()
    poll_for(lambda: len(set(lines(out1 / "acked"))) == COUNT, timeout=bound,
             what=f"{COUNT} acks\n" + c.logs())
    first_run = time.monotonic() - t_submit
    assert set(lines(out1 / "sink")) == expected
    assert len(lines(out1 / "sink")) >= COUNT
    # Both workers run on the environment's interpreter, built once for the two of them.
    envs = [p for p in c.venvs.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(envs) == 1, envs
    env = envs[0]
    pids = {hb["pid"] for hb in c.heartbeats()}
    assert len(pids) == 2
    for pid in pids:
        assert psutil.Process(pid).cmdline()[0] == str(env / "bin" / "python")
    log = c.supervisor_log()
    assert log.count("building Python environment") == 1, log
    assert "pip: Successfully installed depmod-1.0" in log
    built = json.loads((env / READY_FILE).read_text())
    assert built["requirements"] == ["depmod==1.0"] and built["no_index"]
    inode = env.stat().st_ino

    # Resubmitted (a new topology id): the same environment, nothing installed again.
    r = c.run("kill", "deps", "-w", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    poll_for(lambda: c.workers_gone(pids), timeout=MONITOR_SECS + 15, what="workers exit")
    poll_for(lambda: "1 supervisor(s), 0/2 slots used" in c.run("list").stdout,
             timeout=MONITOR_SECS + 15, what="slots free")
    out2 = tmp_path / "out2"
    submit(out2)
    t_submit = time.monotonic()
    poll_for(lambda: len(set(lines(out2 / "acked"))) == COUNT, timeout=bound,
             what=f"{COUNT} acks after the resubmit\n" + c.logs())
    second_run = time.monotonic() - t_submit
    assert set(lines(out2 / "sink")) == expected
    log = c.supervisor_log()
    assert log.count("building Python environment") == 1, log
    assert f"reusing Python environment {env}" in log
    assert env.stat().st_ino == inode
    assert json.loads((env / READY_FILE).read_text())["built_at"] == built["built_at"]
    r = c.run("kill", "deps", "-w", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    pids = {hb["pid"] for hb in c.heartbeats()}
    poll_for(lambda: c.workers_gone(pids), timeout=MONITOR_SECS + 15, what="workers exit")
    poll_for(lambda: "1 supervisor(s), 0/2 slots used" in c.run("list").stdout,
             timeout=MONITOR_SECS + 15, what="slots free")
    print(f"\nfirst submit to {COUNT} acks {first_run:.1f} s (with the build), resubmit "
          f"{second_run:.1f} s (reused); test {time.monotonic() - t0:.1f} s")


def test_a_requirement_pip_cannot_satisfy_is_the_topologys_error(deps, tmp_path):
    c = deps
    empty = tmp_path / "empty-wheelhouse"
    empty.mkdir()
    reqs = tmp_path / "bad.txt"
    reqs.write_text("nosuchpkg==1.0\n")
    topo = package(tmp_path, "bad")
    out = tmp_path / "out"
    out.mkdir()
    env = dict(c.env, DEPS_TOPOLOGY_NAME="deps-bad")
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "squall.cli", "jar", topo, "--requirements",
                        str(reqs), "--wheelhouse", str(empty), "-c", f"deps.out.dir={out}",
                        "-c", f"deps.count={COUNT}"], capture_output=True, text=True, env=env,
                       cwd=str(c.tmp), timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    pip_says = "No matching distribution found for nosuchpkg==1.0"
    # The build fails within its bound; the next report carries the error to Nimbus.
    bound = BUILD_TIMEOUT + 2 * MONITOR_SECS + 3 * REPORT_SECS

    listed = poll_for(lambda: (lambda o: o if pip_says in o else None)(c.run("list").stdout),
                      timeout=bound, what="pip's error in squall list\n" + c.logs())
    seen = time.monotonic() - t0
    line = next(ln for ln in listed.splitlines() if pip_says in ln)
    assert line.startswith("deps-bad: last error") and "in __supervisor" in line, line
    assert "cannot install the topology's Python requirements: pip install failed " \
           "(exit code 1)" in line, line

    def rest_error():
        summary = c.rest("topology/summary")
        for t in (summary or {}).get("topologies", []):
            if t["name"] == "deps-bad" and pip_says in t["lastError"]:
                return t
        return None

    t = poll_for(rest_error, timeout=bound, what="pip's error in the REST API")
    info = c.rest(f"topology/{t['encodedId']}")
    assert any(pip_says in e["error"] and e["component"] == "__supervisor"
               for e in info["errors"]), info["errors"]
    # Tried once: a failed build waits out its backoff (60 s) rather than looping; many
    # of the supervisor's rounds (every 0.5 s) have passed since.
    log = c.supervisor_log()
    tid = t["id"]
    assert log.count(f"topology {tid}: building Python environment") == 1, log
    assert log.count(f"topology {tid}: cannot build its Python environment") == 1, log
    assert not glob.glob(str(c.sup_dirs[0] / "logs" / f"{tid}-*.log")), "a worker started"
    # The environment that failed is not left behind as if built.
    assert not [p for p in c.venvs.iterdir() if (p / READY_FILE).exists()
                and "nosuchpkg" in (p / READY_FILE).read_text()]
    r = c.run("kill", "deps-bad", "-w", "0")
    assert r.returncode == 0, r.stdout + r.stderr
    print(f"\npip's error in squall list {seen:.1f} s after the submit:\n{line}")


def test_the_builder_builds_once_for_two_topologies_and_cleans_up(wheelhouse, tmp_path, caplog):
    """PythonEnvs alone (no cluster): two topologies with the same requirements asking at
    once share one build; unused and old, the environment is deleted."""
    topo = tmp_path / "topo"
    topo.mkdir()
    with zipfile.ZipFile(topo / "package.zip", "w") as zf:
        zf.writestr(".squall/requirements.txt", "depmod==1.0\nmsgpack\n")
        for name in os.listdir(wheelhouse):
            zf.write(os.path.join(wheelhouse, name), f".squall/wheelhouse/{name}")
    conf = {"storm.local.dir": str(tmp_path), "supervisor.venv.cleanup.age.secs": 0,
            "supervisor.venv.build.timeout.secs": BUILD_TIMEOUT,
            "topology.python.requirements": ".squall/requirements.txt",
            "topology.python.wheelhouse": ".squall/wheelhouse"}
    failed = []
    caplog.set_level(logging.INFO, logger="squall.supervisor")
    envs = PythonEnvs(conf, on_failed=lambda *a: failed.append(a))
    try:
        assert envs.python("t-1", str(topo), conf) is None
        assert envs.python("t-2", str(topo), conf) is None
        poll_for(lambda: envs.python_of("t-1") and envs.python_of("t-2"),
                 timeout=BUILD_TIMEOUT, what="both ready")
        assert not failed
        said = [r.getMessage() for r in caplog.records]
        assert sum("building Python environment" in m for m in said) == 1, said
        assert sum("reusing Python environment" in m for m in said) == 1, said
        python = envs.python_of("t-1")
        assert python == envs.python_of("t-2")
        r = subprocess.run([python, "-c", "import depmod, msgpack, squall; "
                            "print(depmod.tag(1), msgpack.__file__)"],
                           capture_output=True, text=True, timeout=30)
        # Its own package from the wheel; msgpack, already in the cluster, from the cluster.
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("1!depmod-1.0 " + os.path.dirname(os.path.dirname(
            psutil.__file__))), r.stdout
        env_dir = os.path.dirname(os.path.dirname(python))
        assert glob.glob(os.path.join(env_dir, "lib", "python*", "site-packages", "depmod.py"))
        assert not glob.glob(os.path.join(env_dir, "lib", "python*", "site-packages", "msgpack"))
        envs.collect(["t-1"])  # in use: kept whatever its age
        envs._last_gc = -1e9
        envs.collect(["t-1"])
        assert os.path.isdir(env_dir)
        envs._last_gc = -1e9
        envs.collect([])       # nobody's, older than 0 s: deleted (on the pool)
        poll_for(lambda: not os.path.exists(env_dir), timeout=30, what="environment deleted")
    finally:
        envs.close()
