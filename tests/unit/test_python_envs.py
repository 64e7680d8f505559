"""A topology's Python dependencies without a cluster: the requirements a supervisor accepts,
what `squall jar` ships, the environment's key, the build/backoff/cleanup decisions, pip's
error in one line, and the supervisor holding a topology's launches until its environment
is ready (fake processes, a fake builder)."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import sys
import zipfile

import pytest

from squall.client import submitter as sub
from squall.client.errors import SquallError
from squall.client.memory_cluster_state import InMemoryClusterState, MemoryStore
from squall.client.requirements import (SHIPPED_REQUIREMENTS, SHIPPED_WHEELHOUSE,
                                        RequirementsError, package_path_problem,
                                        parse_requirements)
from squall.supervisor import venvs
from squall.supervisor.reconcile import LaunchWorker, RestartPolicy, WorkerSpec, plan
from squall.supervisor.supervisor import Supervisor
from squall.supervisor.venvs import (BUILD, READY, WAIT, EnvError, EnvSpec, EnvState, env_key,
                                     next_action, pip_command, pip_error_summary,
                                     read_env_spec, retry_delay, stale_envs, venv_command)
from supervisor_fixtures import HOST, T, Clock, assign

# -- the requirements file ---------------------------------------------------------------------


def test_requirement_specifiers_are_accepted_comments_and_continuations_resolved():
    text = """
# pinned for the bolt
depmod==1.0
requests[socks, security] >=2.31,<3   # trailing comment
numpy ; python_version >= "3.11" and platform_machine == 'x86_64'
Foo_Bar.baz (>=1.0)
tiny \\
    ~=0.3
hashed==1.2 --hash=sha256:0123abcd --hash=sha256:ffee
"""
    assert parse_requirements(text) == (
        "depmod==1.0", "requests[socks, security] >=2.31,<3",
        "numpy ; python_version >= \"3.11\" and platform_machine == 'x86_64'",
        "Foo_Bar.baz (>=1.0)", "tiny      ~=0.3",
        "hashed==1.2 --hash=sha256:0123abcd --hash=sha256:ffee")


@pytest.mark.parametrize("line, says", [
    ("-r /etc/squall/pki/supervisor.key", "not pip options"),
    ("--index-url http://evil.example/simple", "not pip options"),
    ("-e git+https://example.com/x.git#egg=x", "not pip options"),
    ("--extra-index-url=http://x", "not pip options"),
    ("foo @ https://example.com/foo-1.0.whl", "not a requirement specifier"),
    ("git+https://example.com/x.git", "not a requirement specifier"),
    ("./local/dir", "not a requirement specifier"),
    ("/abs/path", "not a requirement specifier"),
    ("foo-1.0-py3-none-any.whl", "not a requirement specifier"),
    ("foo==1.0.tar.gz", "not a requirement specifier"),
    ("foo==1.0 --global-option=x", "only option"),
    ("squall>=0.1", "cluster's own squall"),
    ("Squall_", "not a requirement specifier"),
])
def test_anything_but_a_specifier_is_refused_naming_the_line(line, says):
    with pytest.raises(RequirementsError) as e:
        parse_requirements(f"ok==1\n\n{line}\n", "reqs.txt")
    assert "reqs.txt line 3" in str(e.value) and says in str(e.value), str(e.value)


def test_the_file_is_bounded():
    with pytest.raises(RequirementsError, match="larger than 65536 bytes"):
        parse_requirements("a==1 # " + "x" * 70_000)
    with pytest.raises(RequirementsError, match="more than 1000 lines"):
        parse_requirements("\n".join(f"p{i}" for i in range(1001)))


@pytest.mark.parametrize("path, ok", [
    ("requirements.txt", True), (".squall/wheelhouse", True), ("a/b/../c.txt", True),
    ("", False), ("/etc/passwd", False), ("../x", False), ("a/../../x", False),
    ("a\\b", False), ("x" * 300, False), ("a\nb", False)])
def test_package_paths_stay_inside_the_package(path, ok):
    assert (package_path_problem(path) is None) == ok


# -- what squall jar ships ---------------------------------------------------------------------


def test_a_requirements_txt_at_the_package_root_is_found(tmp_path):
    (tmp_path / "topo.py").write_text("")
    (tmp_path / "requirements.txt").write_text("depmod==1.0\n")
    extras, conf, line = sub.python_dependencies(str(tmp_path), {}, None, None)
    assert extras == {} and conf == {"topology.python.requirements": "requirements.txt"}
    assert line.startswith("Python requirements: 1 from ")
    # A conf that says null turns it off; one that names another file must name one there.
    assert sub.python_dependencies(str(tmp_path), {"topology.python.requirements": None},
                                   None, None) == ({}, {}, "")
    with pytest.raises(SquallError, match="deps.txt is not a file of the package"):
        sub.python_dependencies(str(tmp_path), {"topology.python.requirements": "deps.txt"},
                                None, None)
    (tmp_path / "requirements.txt").write_text("-r /etc/shadow\n")
    with pytest.raises(SquallError, match="requirements.txt line 1"):
        sub.python_dependencies(str(tmp_path), {}, None, None)


def test_requirements_and_wheelhouse_options_ship_under_dot_squall(tmp_path):
    pkg, wh = tmp_path / "pkg", tmp_path / "wh"
    pkg.mkdir()
    wh.mkdir()
    (pkg / "topo.py").write_text("X = 1\n")
    (pkg / "requirements.txt").write_text("not-this==1\n")
    (tmp_path / "reqs.txt").write_text("depmod==1.0\n")
    (wh / "depmod-1.0-py3-none-any.whl").write_bytes(b"PK wheel bytes")
    (wh / "notes.txt").write_text("not a wheel")
    extras, conf, line = sub.python_dependencies(str(pkg), {}, str(tmp_path / "reqs.txt"),
                                                 str(wh))
    assert conf == {"topology.python.requirements": SHIPPED_REQUIREMENTS,
                    "topology.python.wheelhouse": SHIPPED_WHEELHOUSE}
    assert sorted(extras) == [SHIPPED_REQUIREMENTS,
                              f"{SHIPPED_WHEELHOUSE}/depmod-1.0-py3-none-any.whl"]
    assert "no index from 1 wheel(s)" in line
    path = sub.add_to_package(sub.package_file(str(pkg), str(tmp_path)), str(tmp_path), extras)
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == [SHIPPED_REQUIREMENTS,
                                         f"{SHIPPED_WHEELHOUSE}/depmod-1.0-py3-none-any.whl",
                                         "requirements.txt", "topo.py"]
        assert zf.read(SHIPPED_REQUIREMENTS) == b"depmod==1.0\n"
    # An archive package is copied before anything is added to it.
    before = tmp_path / "arch.zip"
    with zipfile.ZipFile(before, "w") as zf:
        zf.writestr("topo.py", "")
    work = tmp_path / "work"
    work.mkdir()
    out = sub.add_to_package(str(before), str(work), extras)
    assert os.path.dirname(out) == str(work)
    with zipfile.ZipFile(before) as zf:
        assert zf.namelist() == ["topo.py"]


def test_a_wheelhouse_needs_requirements(tmp_path):
    (tmp_path / "wh").mkdir()
    with pytest.raises(SquallError, match="--wheelhouse needs requirements"):
        sub.python_dependencies(str(tmp_path), {}, None, str(tmp_path / "wh"))


# -- the environment's key and the package's spec ----------------------------------------------

PY = {"implementation": "cpython", "version": "3.11.7", "base": "/usr/bin/python3.11",
      "site": ["/opt/squall/.venv/lib/python3.11/site-packages"]}


def test_the_key_stands_for_requirements_wheels_index_and_interpreter():
    a = EnvSpec(("x==1", "y"), (("x-1-py3-none-any.whl", "aa", 3),), True)
    key = env_key(a, PY)
    assert key.startswith("py311-") and len(key) == len("py311-") + 24
    assert env_key(EnvSpec(("y", "x==1"), a.wheels, True), PY) == key  # order does not matter
    for other in (EnvSpec(("x==2", "y"), a.wheels, True),
                  EnvSpec(a.requirements, (("x-1-py3-none-any.whl", "bb", 3),), True),
                  EnvSpec(a.requirements, a.wheels, False)):
        assert env_key(other, PY) != key
    assert env_key(a, dict(PY, version="3.11.8")) != key
    assert env_key(a, dict(PY, site=["/elsewhere"])) != key
    # Another owner's topology never runs in an environment this one's code could change.
    assert env_key(a, PY, "alice") == env_key(a, PY, "alice") != env_key(a, PY, "mallory")


def make_package(topo_dir, requirements="depmod==1.0\n", wheels=None, extra=None):
    os.makedirs(topo_dir, exist_ok=True)
    with zipfile.ZipFile(os.path.join(topo_dir, "package.zip"), "w") as zf:
        zf.writestr("topo.py", "")
        if requirements is not None:
            zf.writestr(SHIPPED_REQUIREMENTS, requirements)
        for name, data in (wheels or {}).items():
            zf.writestr(f"{SHIPPED_WHEELHOUSE}/{name}", data)
        for name, data in (extra or {}).items():
            zf.writestr(name, data)


CONF = {"topology.python.requirements": SHIPPED_REQUIREMENTS,
        "topology.python.wheelhouse": SHIPPED_WHEELHOUSE}


def test_the_spec_reads_checked_requirements_and_hashes_the_wheels(tmp_path):
    make_package(tmp_path, wheels={"b-1-py3-none-any.whl": b"bee", "a-1-py3-none-any.whl": b"A"},
                 extra={f"{SHIPPED_WHEELHOUSE}/sub/c-1-py3-none-any.whl": b"deeper: not read",
                        f"{SHIPPED_WHEELHOUSE}/README": b"not a wheel"})
    spec = read_env_spec(str(tmp_path), CONF, 1 << 20)
    assert spec.requirements == ("depmod==1.0",) and spec.no_index
    assert spec.wheels == (("a-1-py3-none-any.whl", hashlib.sha256(b"A").hexdigest(), 1),
                           ("b-1-py3-none-any.whl", hashlib.sha256(b"bee").hexdigest(), 3))
    # Without a wheelhouse pip may use the index; the key differs.
    plain = read_env_spec(str(tmp_path), {"topology.python.requirements": SHIPPED_REQUIREMENTS},
                          1 << 20)
    assert plain.wheels == () and not plain.no_index
    dest = tmp_path / "wh"
    venvs.extract_wheels(str(tmp_path), spec, str(dest))
    assert sorted(os.listdir(dest)) == ["a-1-py3-none-any.whl", "b-1-py3-none-any.whl"]


@pytest.mark.parametrize("requirements, wheels, bound, says", [
    (None, {}, 1 << 20, "the package has no .squall/requirements.txt"),
    ("-r x\n", {}, 1 << 20, "line 1"),
    (b"\xff\xfe", {}, 1 << 20, "not UTF-8"),
    ("ok\n", {"a-1-py3-none-any.whl": b"x" * 600, "b-1-py3-none-any.whl": b"y" * 600}, 1000,
     "unpacks to more than 1000 bytes (nimbus.package.max.bytes)"),
])
def test_a_package_the_supervisor_will_not_install_says_why(tmp_path, requirements, wheels,
                                                             bound, says):
    make_package(tmp_path, requirements, wheels)
    with pytest.raises(EnvError, match=re.escape(says)):
        read_env_spec(str(tmp_path), CONF, bound)


# -- decisions -----------------------------------------------------------------------------------

def test_build_wait_ready_and_the_backoff_after_a_failure():
    assert next_action(None, 0) == BUILD                      # first seen (or resubmitted)
    assert next_action(EnvState(pending=True), 0) == WAIT     # one build at a time
    assert next_action(EnvState(python="/v/bin/python", key="k"), 0) == READY
    failed = EnvState(failures=1, retry_at=100.0, error="pip install failed")
    assert next_action(failed, 99.9) == WAIT                  # no hot loop
    assert next_action(failed, 100.0) == BUILD
    assert [retry_delay(n) for n in (1, 2, 3, 6, 7, 100)] == [60, 120, 240, 1920, 3600, 3600]


def test_stale_environments_are_unused_and_old():
    used = {"py311-a": 1000.0, "py311-b": 100.0, "py311-c": 50.0}
    assert stale_envs(used, {"py311-c"}, now=1100.0, max_age=500.0) == ["py311-b"]
    assert stale_envs(used, (), now=1100.0, max_age=10_000.0) == []


NOSUCH = """Looking in links: /opt/wheels, /tmp/x/wheelhouse
ERROR: Could not find a version that satisfies the requirement nosuchpkg==1.0 (from versions: none)
ERROR: No matching distribution found for nosuchpkg==1.0
"""


def test_pips_error_in_one_bounded_line():
    assert pip_error_summary(NOSUCH.splitlines()) == (
        "ERROR: Could not find a version that satisfies the requirement nosuchpkg==1.0 (from "
        "versions: none) | ERROR: No matching distribution found for nosuchpkg==1.0")
    assert pip_error_summary(["a", "", "b", "c"], max_lines=2) == "b | c"  # no ERROR: the tail
    long = pip_error_summary([f"ERROR: {'x' * 500} {i}" for i in range(20)])
    assert len(long) == venvs.ERROR_CHARS + 3 and long.startswith("...")
    assert long.endswith(" 19")


def test_the_commands_install_wheels_only_into_the_environment():
    cmd = pip_command("/c/bin/python", "/v/bin/python", "/w/requirements.txt", "/w/wheelhouse")
    assert cmd[:5] == ["/c/bin/python", "-m", "pip", "--python", "/v/bin/python"]
    assert " --only-binary :all: " in f" {' '.join(cmd)} "
    assert cmd[-5:] == ["--no-index", "--find-links", "/w/wheelhouse", "-r",
                        "/w/requirements.txt"]
    assert "--no-index" not in pip_command("/c/bin/python", "/v/bin/python", "/r", None)
    assert pip_command("/c/py", "/v/bin/python", "/r", None, own_pip=False)[:3] == \
        ["/v/bin/python", "-m", "pip"]
    assert venv_command("/c/bin/python", "/v") == ["/c/bin/python", "-m", "venv",
                                                   "--without-pip", "/v"]
    assert venvs.pth_text(["/c/site"]) == "import site; site.addsitedir('/c/site')\n"


# -- the supervisor holds launches until the environment is ready ------------------------------


def test_plan_leaves_out_launches_of_held_topologies():
    specs = {6700: WorkerSpec.of(T, 6700, [1]), 6701: WorkerSpec.of("other-1-1", 6701, [2])}
    out = plan(specs, {}, 0.0, 5.0, RestartPolicy(), held={T})
    assert out == [LaunchWorker(specs[6701])]


class FakeEnvs:
    """PythonEnvs' face to the loop: not ready until the test says so."""

    def __init__(self):
        self.ready: dict[str, str] = {}
        self.asked: list[str] = []
        self.collected: list[set] = []

    def python(self, tid, topo_dir, conf):
        self.asked.append(tid)
        return self.ready.get(tid)

    def python_of(self, tid):
        return self.ready.get(tid)

    def collect(self, tids):
        self.collected.append(set(tids))

    def close(self):
        pass


class FakeProc:
    def __init__(self, pid):
        self.pid, self.returncode = pid, None

    def poll(self):
        return self.returncode


def fetch_with_requirements(tid, dest):
    with open(os.path.join(dest, "topology.pb"), "wb") as fh:
        fh.write(b"not read by fakes")
    with open(os.path.join(dest, "conf.json"), "w") as fh:
        json.dump({"topology.workers": 2, "topology.python.requirements": "requirements.txt"},
                  fh)


def test_the_supervisor_launches_a_topologys_workers_in_its_environment_once_ready(tmp_path):
    store = MemoryStore()
    nimbus = InMemoryClusterState(store=store)
    pids = itertools.count(5001)
    spawned = []

    def spawn(cmd, log_path, env):
        p = FakeProc(next(pids))
        spawned.append((cmd, env))
        return p

    sup = Supervisor({"storm.local.dir": str(tmp_path), "supervisor.slots.ports": [6700, 6701],
                      "storm.local.hostname": HOST},
                     cluster_state=InMemoryClusterState(store=store),
                     fetch_topology=fetch_with_requirements, spawn=spawn, clock=Clock())
    fake = sup.envs = FakeEnvs()
    try:
        assign(nimbus, sup.id)
        sup.sync()
        sup.sync(full=False)
        assert spawned == [] and fake.asked == [T, T]  # asked each round, nothing launched
        assert fake.collected == [{T}]
        fake.ready[T] = str(tmp_path / "venvs" / "py311-x" / "bin" / "python")
        sup.sync(full=False)
        assert [c[0] for c, _ in spawned] == [fake.ready[T]] * 2
        env = spawned[0][1]
        assert env["VIRTUAL_ENV"] == str(tmp_path / "venvs" / "py311-x")
        assert env["PATH"].split(os.pathsep)[0] == str(tmp_path / "venvs" / "py311-x" / "bin")
    finally:
        for p in sup.procs.values():
            p.proc.returncode = 0
        sup.procs.clear()
        sup.close("test over")


def test_a_topology_without_requirements_runs_on_the_cluster_interpreter(tmp_path):
    from supervisor_fixtures import fetch
    store = MemoryStore()
    nimbus = InMemoryClusterState(store=store)
    spawned = []
    sup = Supervisor({"storm.local.dir": str(tmp_path), "supervisor.slots.ports": [6700],
                      "storm.local.hostname": HOST},
                     cluster_state=InMemoryClusterState(store=store), fetch_topology=fetch,
                     spawn=lambda cmd, log, env: spawned.append((cmd, env)) or FakeProc(7),
                     clock=Clock())
    try:
        assign(nimbus, sup.id, workers={f"{HOST}:6700": [1]})
        sup.sync()
        assert spawned[0][0][0] == sys.executable
        assert sup.envs.state(T) is None  # nothing asked, nothing built
    finally:
        for p in sup.procs.values():
            p.proc.returncode = 0
        sup.procs.clear()
        sup.close("test over")
