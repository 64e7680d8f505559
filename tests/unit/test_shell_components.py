"""Declaring shell components: the forms Storm users write, what the topology carries,
the serializer names, the interpreter check; the supervisor's side (resources/ extracted
from the package, a dead worker's children killed)."""

from __future__ import annotations

import os
import sys
import time
import zipfile

import pytest

from squall.client.errors import ConfigError, InvalidTopology
from squall.client.shell import ShellBolt, ShellSpout, missing_interpreters, serializer_name
from squall.client.topology import ShellSpec, TopologyBuilder
from squall.client.topology_proto import from_bytes, to_bytes
from squall.supervisor.local_files import extract_resources
from squall.supervisor.supervisor import default_spawn, kill_leftovers


class SplitSentence(ShellBolt):
    """Storm's form: a subclass naming its command and declaring its fields."""

    def __init__(self):
        super().__init__("python3", "splitsentence.py")

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


def build(spout, bolt):
    b = TopologyBuilder()
    b.set_spout("s", spout, 2)
    b.set_bolt("b", bolt, 3).shuffle_grouping("s")
    return b.create_topology()


def test_every_declaration_form_gives_the_same_component():
    forms = [SplitSentence(), ShellBolt(["python3", "splitsentence.py"], ["word"]),
             ShellBolt(["python3", "splitsentence.py"], output_fields=["word"]),
             ShellBolt(["python3", "splitsentence.py"], {"default": ["word"]})]
    for bolt in forms:
        t = build(ShellSpout(["node", "spout.js"], ["sentence"]), bolt)
        b = t.components["b"]
        assert b.shell.argv == ["python3", "splitsentence.py"], bolt
        assert b.streams["default"].fields == ["word"] and b.serialized is None
        assert b.parallelism == 3 and b.kind == "bolt"


def test_streams_env_cwd_and_conf_survive_the_wire():
    bolt = ShellBolt(["ruby", "split.rb"], {"words": ["w"], "picked": (["w"], True)},
                     env={"PATH": "/opt/ruby/bin", "LANG": "C.UTF-8"}, change_child_cwd=False)
    bolt.add_component_config("topology.tick.tuple.freq.secs", 5)
    bolt.set_named_stream("more", ["a", "b"])
    t = from_bytes(to_bytes(build(ShellSpout(["node", "spout.js"], ["sentence"]), bolt)))
    b = t.components["b"]
    assert b.shell == ShellSpec(["ruby", "split.rb"], "", {"PATH": "/opt/ruby/bin",
                                                          "LANG": "C.UTF-8"}, False)
    assert {s: (d.fields, d.direct) for s, d in b.streams.items()} == {
        "words": (["w"], False), "picked": (["w"], True), "more": (["a", "b"], False)}
    assert b.conf["topology.tick.tuple.freq.secs"] == 5
    with pytest.raises(InvalidTopology, match="shell host"):
        b.instantiate()  # never a pickle: the worker hosts the command


def test_storms_separate_script_field_is_part_of_the_command():
    assert ShellSpec(["python3"], "split.py").argv == ["python3", "split.py"]


@pytest.mark.parametrize("args, match", [
    (([],), "needs a command"),
    ((["python3", "x.py"], ["a"], ["b"]), "too many positional"),
    (("python3", ["a"]), "give the command as a list"),
])
def test_bad_declarations_say_what_to_write(args, match):
    with pytest.raises(InvalidTopology, match=match):
        ShellBolt(*args)


@pytest.mark.parametrize("value, name", [
    (None, "json"), ("json", "json"), ("org.apache.storm.multilang.JsonSerializer", "json"),
    ("msgpack", "msgpack"), ("com.hellosign.storm.multilang.MsgpackSerializer", "msgpack"),
    ("org.example.MyMsgpackSerializer", "msgpack"),
])
def test_serializer_names_take_storms_class_names(value, name):
    assert serializer_name(value) == name


def test_an_unknown_serializer_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown serializer 'protobuf'"):
        serializer_name("protobuf")


def test_missing_interpreters_are_named(tmp_path):
    exe = tmp_path / "interp"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    plain = tmp_path / "plain"
    plain.write_text("")
    problems = missing_interpreters([
        ("ok", [sys.executable, "x.py"]), ("on-path", ["interp", "x"]),
        ("absent", ["no-such-thing-q", "x"]), ("not-exec", [str(plain)]),
        ("relative", ["./bin/python", "x.py"]), ("empty", []), ("blank", ["", "x"])],
        env_path=str(tmp_path), where="host h")
    empty = "its shell command is empty: give the program to run"
    assert [p for p in problems if empty in p] == [
        f"component 'empty': {empty}, e.g. ShellBolt(['python3', 'splitsentence.py'], ...)",
        f"component 'blank': {empty}, e.g. ShellBolt(['python3', 'splitsentence.py'], ...)"]
    assert [p for p in problems if empty not in p] == [
        "component 'absent': the command 'no-such-thing-q' (no-such-thing-q x) is not "
        "installed on host h (not on PATH); install it on the cluster's machines or change "
        "the component's command",
        f"component 'not-exec': {plain} is not an executable file on host h"]


def test_resources_are_extracted_with_their_modes_and_nothing_escapes(tmp_path):
    pkg = tmp_path / "package.zip"
    with zipfile.ZipFile(pkg, "w") as zf:
        info = zipfile.ZipInfo("resources/bin/run.sh")
        info.external_attr = (0o755 << 16)
        zf.writestr(info, "#!/bin/sh\necho hi\n")
        zf.writestr("resources/split.py", "print('x')\n")
        zf.writestr("resources/../../evil.txt", "no")
        zf.writestr("resources/../topology.pb", "no")
        zf.writestr("topology_module.py", "x = 1\n")
    assert extract_resources(str(tmp_path)) == 2
    run = tmp_path / "resources" / "bin" / "run.sh"
    assert run.read_text().startswith("#!/bin/sh") and os.access(run, os.X_OK)
    assert (tmp_path / "resources" / "split.py").exists()
    assert not (tmp_path.parent / "evil.txt").exists()
    assert not (tmp_path / "topology.pb").exists()


def test_a_package_that_unpacks_too_big_is_refused(tmp_path):
    with zipfile.ZipFile(tmp_path / "package.zip", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("resources/zeros.bin", b"\0" * 200_000)  # compresses to ~200 bytes
        for i in range(3):
            zf.writestr(f"resources/f{i}.txt", "x")
    with pytest.raises(ValueError, match="more than 100000 bytes"):
        extract_resources(str(tmp_path), max_bytes=100_000)
    with pytest.raises(ValueError, match="more than 2 files"):
        extract_resources(str(tmp_path), max_files=2)


def test_a_dead_workers_leftover_children_are_killed(tmp_path):
    # A "worker" that starts a child ignoring SIGTERM and then exits: the child stays.
    script = ("import subprocess, sys\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
              "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)'])\n"
              "print(p.pid, flush=True)\n")
    log = tmp_path / "worker.log"
    proc = default_spawn([sys.executable, "-c", script], str(log), dict(os.environ))
    assert proc.wait(10) == 0
    child = int(log.read_text().split()[0])
    os.kill(child, 0)  # alive
    kill_leftovers(proc)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{child}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"the leftover child {child} is still running")


def test_shell_metrics_update_as_their_kind_and_refuse_nonsense():
    from squall.client.metrics import MetricRegistry, shell_metric

    class Ctx:
        def __init__(self):
            self.r = MetricRegistry()
            self.register_counter, self.register_meter = self.r.counter, self.r.meter
            self.register_histogram, self.register_gauge = self.r.histogram, self.r.gauge
    ctx = Ctx()
    c = shell_metric(ctx, "my-custom-shell-metric", "counter")
    c.update_from_rpc(1)
    c.update_from_rpc(None)  # storm.rpcMetrics(name) with no value: one more
    c.update_from_rpc(5)
    g = shell_metric(ctx, "depth", "gauge")
    g.update_from_rpc(2.5)
    h = shell_metric(ctx, "sizes", "histogram")
    h.update_from_rpc(10)
    snap = ctx.r.snapshot()
    assert snap["my-custom-shell-metric"] == {"type": "counter", "value": 7}
    assert snap["depth"] == {"type": "gauge", "value": 2.5}
    assert snap["sizes"]["hist"]["n"] == 1
    for metric, bad in ((c, -1), (c, "x"), (c, 1.5), (g, "x"), (h, None)):
        with pytest.raises(ValueError):
            metric.update_from_rpc(bad)
    with pytest.raises(ValueError, match="kind 'timer'"):
        shell_metric(ctx, "t", "timer")
    with pytest.raises(InvalidTopology, match="kind 'timer'"):
        ShellBolt(["python3", "x.py"], ["w"]).register_metric("t", "timer")
    bolt = ShellBolt(["python3", "x.py"], ["w"]).register_metric("my-metric", "meter")
    assert bolt.get_component_configuration() == {"topology.shell.metrics": {"my-metric": "meter"}}
