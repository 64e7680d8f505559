"""The submitter's packaging and conf layering, `squall jar`'s module loading, the CLI helpers
and the supervisor's gRPC fetcher, without a cluster (Nimbus is a fake)."""

from __future__ import annotations

import json
import os
import socket
import sys
import zipfile

import pytest

from squall.client import TopologyBuilder
from squall.cli import commands
from squall.client import submitter as sub
from squall.client.errors import SquallError
from squall.supervisor import fetch


def make_tree(root):
    (root / "pkg").mkdir(parents=True)
    (root / "topo.py").write_text("X = 1\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "mod.py").write_text("Y = 2\n")
    for junk in ("__pycache__", "pkg/__pycache__", ".git", ".venv/lib"):
        (root / junk).mkdir(parents=True, exist_ok=True)
        (root / junk / "junk.txt").write_text("no")
    (root / "pkg" / "stale.pyc").write_bytes(b"\0")


def test_pack_directory_zips_the_tree_without_caches_vcs_and_venv(tmp_path):
    make_tree(tmp_path / "src")
    out = sub.pack_directory(tmp_path / "src", tmp_path / "out.zip")
    with zipfile.ZipFile(out) as zf:
        names = zf.namelist()
    assert names == sorted(names)
    assert set(names) == {"pkg/__init__.py", "pkg/mod.py", "topo.py"}


def test_pack_directory_packs_a_live_tree(tmp_path, monkeypatch):
    """A topology file beside a running daemon's files: a file removed between the walk and
    its read (a heartbeat renamed over) is left out, and a socket is not opened."""
    make_tree(tmp_path / "src")
    (tmp_path / "src" / "heartbeat.json").write_text("{}")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "src" / "daemon.sock"))
    real_walk = os.walk

    def walk_then_remove(top, *a, **kw):
        yield from real_walk(top, *a, **kw)
        os.remove(tmp_path / "src" / "heartbeat.json")
    monkeypatch.setattr(os, "walk", walk_then_remove)
    try:
        out = sub.pack_directory(tmp_path / "src", tmp_path / "out.zip")
    finally:
        sock.close()
    with zipfile.ZipFile(out) as zf:
        assert set(zf.namelist()) == {"pkg/__init__.py", "pkg/mod.py", "topo.py"}


def test_packed_zip_is_importable(tmp_path, monkeypatch):
    make_tree(tmp_path / "src")
    (tmp_path / "src" / "zzsubmitter_probe.py").write_text("VALUE = 42\n")
    out = sub.pack_directory(tmp_path / "src", tmp_path / "probe.zip")
    monkeypatch.syspath_prepend(str(out))
    import zzsubmitter_probe
    assert zzsubmitter_probe.VALUE == 42
    del sys.modules["zzsubmitter_probe"]


def test_package_file_packs_dirs_and_passes_archives_through(tmp_path):
    make_tree(tmp_path / "src")
    work = tmp_path / "work"
    work.mkdir()
    assert sub.package_file(tmp_path / "src", str(work)) == str(work / "src.zip")
    pyz = tmp_path / "app.pyz"
    pyz.write_bytes(b"PK")
    assert sub.package_file(str(pyz), str(work)) == str(pyz)
    with pytest.raises(SquallError, match="does not exist"):
        sub.package_file(str(tmp_path / "missing"), str(work))
    (tmp_path / "code.tar").write_text("x")
    with pytest.raises(SquallError, match="directory, a .zip or a .pyz"):
        sub.package_file(str(tmp_path / "code.tar"), str(work))


def test_submit_without_squall_jar_says_to_use_it(monkeypatch):
    monkeypatch.delenv(sub.ENV_PACKAGE, raising=False)
    with pytest.raises(SquallError, match="squall jar"):
        sub.submit_topology("t", {}, TopologyBuilder())


def test_conf_layering_yaml_topology_then_overrides(monkeypatch):
    monkeypatch.setenv(sub.ENV_OVERRIDES, json.dumps({"topology.workers": 3, "my.key": "cli"}))
    yaml_conf = {"nimbus.grpc.port": 7000, "topology.workers": 1,
                 "topology.message.timeout.secs": 9, "my.key": "yaml"}
    full, sent = sub.submission_conf(yaml_conf, {"topology.workers": 2, "my.key": "topo"},
                                     sub.cli_overrides())
    assert full["nimbus.grpc.port"] == 7000 and full["topology.workers"] == 3
    assert full["my.key"] == "cli"
    # Nimbus gets the topology.* keys of the yaml, the topology conf and the overrides only.
    assert sent == {"topology.workers": 3, "topology.message.timeout.secs": 9, "my.key": "cli"}


class FakeNimbus:
    def __init__(self, conf, timeout=30.0):
        self.conf, self.uploaded, self.submitted = conf, None, None
        FakeNimbus.last = self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def upload(self, path, progress=None):
        with open(path, "rb") as fh:
            self.uploaded = fh.read()
        progress(len(self.uploaded), len(self.uploaded))
        return "loc-1"

    def submit(self, name, location, conf_json, topology, initial_status="ACTIVE", warn=None):
        self.submitted = (name, location, json.loads(conf_json), topology, initial_status)
        warn("topology.worker.childopts is a Storm key Squall does not implement")
        return f"{name}-1-1700000000"


def test_submit_topology_uploads_the_packed_dir_and_submits(tmp_path, monkeypatch, capsys):
    from squall.client import nimbus_client
    from squall.client.topology_proto import from_proto
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    try:
        import word_count
    finally:
        sys.path.pop(0)
    make_tree(tmp_path / "src")
    monkeypatch.setattr(nimbus_client, "NimbusClient", FakeNimbus)
    monkeypatch.setenv(sub.ENV_PACKAGE, str(tmp_path / "src"))
    monkeypatch.setenv(sub.ENV_OVERRIDES, json.dumps({"wordcount.sentences": 0}))
    monkeypatch.setenv("SQUALL_CONF", "")
    monkeypatch.chdir(tmp_path)
    tid = sub.submit_topology("wc", word_count.CONF, word_count.topology(), "INACTIVE")
    assert tid == "wc-1-1700000000"
    name, loc, conf, topo_pb, status = FakeNimbus.last.submitted
    assert (name, loc, status) == ("wc", "loc-1", "INACTIVE")
    assert conf == {"topology.workers": 2, "topology.max.spout.pending": 2000,
                    "wordcount.sentences": 0}
    assert {c.id for c in from_proto(topo_pb).spouts()} == {"sentences"}
    with zipfile.ZipFile(__import__("io").BytesIO(FakeNimbus.last.uploaded)) as zf:
        assert "topo.py" in zf.namelist()
    out = capsys.readouterr()
    assert "Submitted topology wc as wc-1-1700000000 (INACTIVE)" in out.out
    # What Nimbus warns about reaches the user, on stderr.
    assert "Warning: topology.worker.childopts is a Storm key Squall does not implement" in \
        out.err


def test_run_jar_imports_module_and_calls_main(tmp_path, monkeypatch):
    monkeypatch.delenv(sub.ENV_PACKAGE, raising=False)
    monkeypatch.delenv(sub.ENV_OVERRIDES, raising=False)
    monkeypatch.setattr(sys, "path", list(sys.path))
    (tmp_path / "zzjar_ok.py").write_text(
        "import os\ndef main(args):\n    return (args, os.environ['SQUALL_PACKAGE'],"
        " os.environ['SQUALL_CLI_OVERRIDES'])\n")
    (tmp_path / "zzjar_nomain.py").write_text("X = 1\n")
    got = commands.run_jar(str(tmp_path), "zzjar_ok", ["a"], None, {"k": 1})
    assert got == (["a"], str(tmp_path), '{"k": 1}')
    with pytest.raises(SquallError, match="has no main"):
        commands.run_jar(str(tmp_path), "zzjar_nomain", [], None, {})
    with pytest.raises(SquallError, match="no module 'zzjar_missing'"):
        commands.run_jar(str(tmp_path), "zzjar_missing", [], None, {})
    # The user's mistakes are one line naming the file and line.
    (tmp_path / "zzjar_syntax.py").write_text("def main(args):\n    return (\n")
    (tmp_path / "zzjar_raises.py").write_text("def main(args):\n    return {}['k']\n")
    with pytest.raises(SquallError, match=r"zzjar_syntax.py:2: syntax error: '\(' was never "
                                          r"closed \(while importing zzjar_syntax\)"):
        commands.run_jar(str(tmp_path), "zzjar_syntax", [], None, {})
    with pytest.raises(SquallError, match=r"zzjar_raises.py:2: KeyError: 'k' \(while running "
                                          r"zzjar_raises.main\)"):
        commands.run_jar(str(tmp_path), "zzjar_raises", [], None, {})
    for m in ("zzjar_ok", "zzjar_nomain", "zzjar_raises"):
        sys.modules.pop(m, None)


def test_parse_executors_and_table():
    assert commands.parse_executors(["count=4", "split=2"]) == {"count": 4, "split": 2}
    for bad in ("count", "count=0", "=3", "count=x"):
        with pytest.raises(ValueError, match="COMPONENT=N"):
            commands.parse_executors([bad])
    assert commands.format_uptime(3725) == "1h2m5s"
    assert commands.format_uptime(59) == "59s"

    from squall.proto import nimbus_pb2 as pb
    ok = pb.TopologySummary(name="wc", id="wc-1-1", status="ACTIVE", num_workers=2,
                            num_executors=9, num_tasks=9, uptime_secs=61, live_workers=2,
                            health_known=True)
    looping = pb.TopologySummary(name="bad", id="bad-2-1", status="ACTIVE", num_workers=2,
                                 num_executors=3, num_tasks=3, uptime_secs=12, live_workers=1,
                                 health_known=True,
                                 recent_restarts=5, restart_window_secs=60,
                                 last_error=pb.ErrorInfo(component="split", error="ValueError: x",
                                                         time_secs=100, host="h", port=6700))
    lines = commands.topology_table([ok, looping])
    assert lines[0].split() == ["NAME", "ID", "STATUS", "WORKERS", "EXECUTORS", "TASKS", "UPTIME",
                                "HEALTH"]
    assert lines[1].split() == ["wc", "wc-1-1", "ACTIVE", "2", "9", "9", "1m1s", "ok"]
    # A crash loop is ACTIVE and says so.
    assert lines[2].split("  ")[0] == "bad"
    assert lines[2].endswith("workers restarting: 5 in 60 s; workers down: 1 of 2")
    follower = pb.TopologySummary(name="wc", status="ACTIVE", num_workers=2)
    assert commands.topology_table([follower])[1].endswith("unknown (a follower Nimbus "
                                                           "answered; the leader knows)")
    from squall.client.health import last_error_line
    assert last_error_line(ok) is None
    assert last_error_line(looping, now=112) == \
        "bad: last error 12 s ago in split on h:6700: ValueError: x"


def test_fetcher_writes_package_topology_and_conf(tmp_path):
    from squall.client.topology_proto import from_bytes, to_proto
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
    try:
        import word_count
    finally:
        sys.path.pop(0)
    proto = to_proto(word_count.topology().create_topology())

    class Client:
        def download(self, tid):
            return b"PKzip"

        def user_topology(self, tid):
            return proto

        def topology_conf(self, tid, include_secrets=False):
            assert include_secrets  # workers need the secret values
            return '{"topology.workers": 2}'

    fetch.fetch_from(Client(), "wc-1-1", str(tmp_path))
    assert (tmp_path / "package.zip").read_bytes() == b"PKzip"
    assert json.loads((tmp_path / "conf.json").read_text()) == {"topology.workers": 2}
    assert {c.id for c in from_bytes((tmp_path / "topology.pb").read_bytes()).spouts()} == \
        {"sentences"}
