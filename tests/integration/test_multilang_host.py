"""The shell component hosts against real children: every protocol message and edge case.

The children are real processes (tests/integration/resources: Storm's own storm.py and storm.js
components unchanged, a pystorm bolt, and a scripted child); the collector is a recorder
whose ``call_soon_threadsafe`` queue this test drains, as the executor's thread would.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import shutil
import sys
import time
from pathlib import Path

import pytest

from squall.client import config as cfg
from squall.client.context import TopologyContext
from squall.client.shell import ShellBolt, ShellSpout
from squall.client.topology import ShellSpec, TopologyBuilder, assign_task_ids
from squall.client.tuple import Fields, Tuple
from squall.worker.multilang import ShellError
from squall.worker.shell import ShellBoltHost, ShellSpoutHost

pytestmark = pytest.mark.integration

CHILDREN = str(Path(__file__).resolve().parent / "resources")
#: topology.subprocess.timeout.secs for these tests; waits below derive from it.
TIMEOUT = 2.0


class Recorder:
    """The collector a host is given: records calls; ``calls`` is the executor's queue."""

    def __init__(self, targets=(7, 8)):
        self.calls: queue.Queue = queue.Queue()
        self.targets = list(targets)
        self.emits: list[tuple] = []
        self.acked: list[Tuple] = []
        self.failed: list[Tuple] = []
        self.errors: list[str] = []

    def call_soon_threadsafe(self, fn):
        self.calls.put(fn)

    def emit(self, values, stream="default", anchors=None, direct_task=None, msg_id=None):
        if isinstance(anchors, Tuple):  # the real collector's one-anchor form
            anchors = [anchors]
        self.emits.append((stream, values, anchors, direct_task, msg_id))
        return [direct_task] if direct_task else list(self.targets)

    def emit_direct(self, task, values, stream="default", anchors=None, msg_id=None):
        return self.emit(values, stream, anchors, direct_task=task, msg_id=msg_id)

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)

    def report_error(self, error):
        self.errors.append(str(error))


def pump(rec: Recorder, until, secs: float, what: str) -> None:
    """Run the host's handed-over calls on this thread until ``until()`` (or fail)."""
    deadline = time.monotonic() + secs
    while not until():
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"timed out after {secs:g}s waiting for {what}")
        try:
            fn = rec.calls.get(timeout=min(left, 0.1))
        except queue.Empty:
            continue
        fn()


def topology():
    b = TopologyBuilder()
    b.set_spout("src", ShellSpout(["true"], ["sentence"]), 1)
    b.set_bolt("shell", ShellBolt(["true"], {"default": ["word"], "direct": (["n"], True)}),
               1).fields_grouping("src", ["sentence"])
    b.set_bolt("sink", ShellBolt(["true"], ["x"]), 2).direct_grouping("shell", "direct")
    b.set_bolt("total", ShellBolt(["true"], ["t"]), 1).global_grouping("shell")
    return b.create_topology()


TOPOLOGY = topology()
TASKS = assign_task_ids(TOPOLOGY)


def context(tmp_path, component="shell", code_dir=CHILDREN):
    task = TASKS[component][0]
    return TopologyContext(TOPOLOGY, TASKS, task, {}, "topo-1", 6700, [task],
                           code_dir=code_dir, pid_dir=str(tmp_path / "pids"))


def conf(**extra):
    return cfg.layered({"topology.subprocess.timeout.secs": TIMEOUT,
                        "topology.shellbolt.max.pending": 100, "app.db.password": "hunter2",
                        "app.nested": {"api.token": "t0ken", "level": 3},
                        "app.setting": 42, **extra})


def scripted(tmp_path, script, serializer_env=None) -> ShellSpec:
    env = {"SCRIPT": json.dumps(script), "RECEIVED": str(tmp_path / "received.jsonl"),
           "SETUP": str(tmp_path / "setup.json")}
    return ShellSpec([sys.executable, "scripted_child.py"], env=env)


def received(tmp_path) -> list:
    path = tmp_path / "received.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def tup(values, task=3, stream="default", comp="src"):
    return Tuple(values, comp, stream, task, None, Fields(["sentence"]))


@pytest.fixture
def hosts():
    started = []
    yield started
    for h in started:
        if isinstance(h, ShellBoltHost):
            h.cleanup()
        else:
            h.close()
        if getattr(h, "proc", None) is not None and h.proc.proc is not None:
            assert h.proc.wait_exit(5) is not None, "the child outlived its host"


def bolt(hosts, tmp_path, spec, rec, **conf_extra):
    h = ShellBoltHost(spec)
    hosts.append(h)
    h.prepare(conf(**conf_extra), context(tmp_path), rec)
    return h


# -- handshake ---------------------------------------------------------------------------
def test_handshake_sends_conf_without_secrets_the_context_and_a_pid_dir(tmp_path, hosts):
    rec = Recorder()
    h = bolt(hosts, tmp_path, scripted(tmp_path, []), rec)
    setup = json.loads((tmp_path / "setup.json").read_text())
    assert setup["conf"]["app.setting"] == 42
    text = json.dumps(setup["conf"])
    assert "hunter2" not in text and "t0ken" not in text  # secrets redacted, nested too
    assert setup["conf"]["app.nested"]["level"] == 3
    assert setup["conf"]["topology.subprocess.timeout.secs"] == TIMEOUT
    assert setup["conf"]["storm.id"] == "topo-1"  # Storm's handshake conf has the topology id
    ctx = setup["context"]
    assert ctx["taskid"] == TASKS["shell"][0] and ctx["componentid"] == "shell"
    assert ctx["task->component"][str(TASKS["src"][0])] == "src"
    assert ctx["streams"] == ["default", "direct"]
    assert ctx["stream->outputfields"] == {"default": ["word"], "direct": ["n"]}
    assert ctx["source->stream->grouping"] == {
        "src": {"default": {"type": "FIELDS", "fields": ["sentence"]}}}
    assert ctx["source->stream->fields"] == {"src": {"default": ["sentence"]}}
    # A global grouping is Storm's fields grouping on no fields (as Storm sends it).
    assert ctx["stream->target->grouping"] == {
        "direct": {"sink": {"type": "DIRECT"}},
        "default": {"total": {"type": "FIELDS", "fields": []}}}
    # The child wrote its pid file where it was told, and the host knows that pid.
    assert os.listdir(setup["pidDir"]) == [str(h.proc.pid)]
    assert setup["pidDir"] == str(tmp_path / "pids")


def test_a_child_that_never_answers_the_handshake_is_fatal_within_the_timeout(tmp_path, hosts):
    spec = ShellSpec([sys.executable, "-c", "import time; time.sleep(60)"])
    t0 = time.monotonic()
    with pytest.raises(ShellError, match="did not answer the handshake within 2s"):
        bolt(hosts, tmp_path, spec, Recorder())
    assert time.monotonic() - t0 < TIMEOUT + 3


def test_a_missing_program_and_a_missing_resources_folder_are_clear_errors(tmp_path, hosts):
    with pytest.raises(ShellError, match="cannot start 'no-such-interpreter-x x.py'"):
        bolt(hosts, tmp_path, ShellSpec(["no-such-interpreter-x", "x.py"]), Recorder())
    h = ShellBoltHost(ShellSpec([sys.executable, "x.py"]))
    with pytest.raises(ShellError, match="has no resources/ folder"):
        h.prepare(conf(), context(tmp_path, code_dir=str(tmp_path / "nope")), Recorder())


# -- the bolt protocol ---------------------------------------------------------------------
def test_tuples_emits_anchors_acks_and_task_ids(tmp_path, hosts):
    rec = Recorder()
    h = bolt(hosts, tmp_path, scripted(tmp_path, [["echo", 2]]), rec)
    a, b = tup(["héllo wörld ✓"], task=3), tup(["two"], task=4)
    h.execute(a)
    h.execute(b)
    pump(rec, lambda: len(rec.acked) == 2, 5, "two acks")
    assert rec.acked == [a, b]
    assert [(e[0], e[1], e[2]) for e in rec.emits] == [
        ("default", ["héllo wörld ✓"], [a]), ("default", ["two"], [b])]
    # The child saw Storm's tuple message, non-ASCII intact, and the task ids it did not
    # opt out of.
    msgs = [m for m in received(tmp_path) if isinstance(m, dict) and m["stream"] != "__heartbeat"]
    assert msgs[0]["tuple"] == ["héllo wörld ✓"] and msgs[0]["comp"] == "src"
    assert msgs[0]["stream"] == "default" and msgs[0]["task"] == 3
    assert isinstance(msgs[0]["id"], str)
    pump(rec, lambda: [7, 8] in received(tmp_path), 5, "task ids at the child")
    assert h.inputs == {}


def test_tick_tuples_reach_the_child_as_storm_sends_them(tmp_path, hosts):
    rec = Recorder()
    h = bolt(hosts, tmp_path, scripted(tmp_path, [["echo", 1]]), rec)
    tick = Tuple([5], "__system", "__tick", -1, None, Fields(["freq_secs"]))
    h.execute(tick)
    pump(rec, lambda: rec.acked, 5, "the tick acked")
    msg = next(m for m in received(tmp_path) if isinstance(m, dict) and m["stream"] == "__tick")
    assert (msg["comp"], msg["task"], msg["tuple"]) == ("__system", -1, [5])
    assert rec.acked == [tick]


def test_need_task_ids_false_direct_emits_and_fails(tmp_path, hosts):
    rec = Recorder()
    h = bolt(hosts, tmp_path, scripted(tmp_path, [
        ["echo", 1, {"need_task_ids": False}],
        ["echo", 1, {"task": 9, "stream": "direct"}],
        ["fail"]]), rec)
    tuples = [tup([str(i)]) for i in range(3)]
    for t in tuples:
        h.execute(t)
    pump(rec, lambda: rec.failed, 5, "a fail")
    assert rec.failed == [tuples[2]] and rec.acked == tuples[:2]
    assert rec.emits[0][:4] == ("default", ["0"], [tuples[0]], None)
    assert rec.emits[1][:4] == ("direct", ["1"], [tuples[1]], 9)
    h.execute(tup(["sync point"]))  # the child reads on: anything pending reached it
    pump(rec, lambda: any(isinstance(m, dict) and m.get("tuple") == ["sync point"]
                          for m in received(tmp_path)), 5, "the next tuple at the child")
    assert not any(isinstance(m, list) for m in received(tmp_path)), \
        "task ids were sent though no emit asked for them"


def test_log_levels_errors_metrics_and_emits_before_the_first_tuple(tmp_path, hosts, caplog):
    rec = Recorder()
    caplog.set_level(logging.DEBUG, logger="squall.shell")
    h = bolt(hosts, tmp_path, scripted(tmp_path, [
        ["send", {"command": "emit", "tuple": ["early"]}],
        ["send", {"command": "log", "msg": "a warning", "level": 3}],
        ["send", {"command": "log", "msg": "plain info"}],
        ["send", {"command": "error", "msg": "it broke"}],
        ["send", {"command": "metrics", "name": "widgets", "params": 5}],
        ["send", {"command": "metrics", "name": "widgets"}],
        # A message may span lines, and a child may end its lines with CRLF.
        ["raw", '{\n  "command": "log",\n  "msg": "pretty"\n}\nend\n'],
        ["raw", '{"command": "log", "msg": "crlf"}\r\nend\r\n'],
        # CR and LF in separate reads.
        ["raw", '{"command": "log", "msg": "split crlf"}\r'], ["sleep", 0.2],
        ["raw", '\nend\r'], ["sleep", 0.2], ["raw", '\n'],
        ["send", {"command": "log", "msg": "done"}]]), rec)
    pump(rec, lambda: any(r.getMessage() == "done" for r in caplog.records), 5, "the last log")
    assert rec.emits[0][:3] == ("default", ["early"], [])
    by_msg = {r.getMessage(): r for r in caplog.records if r.name.startswith("squall.shell.")}
    assert "pretty" in by_msg and "crlf" in by_msg and "split crlf" in by_msg
    assert by_msg["a warning"].levelno == logging.WARNING
    assert by_msg["plain info"].levelno == logging.INFO
    assert by_msg["a warning"].name == f"squall.shell.shell[{TASKS['shell'][0]}]"
    assert rec.errors == ["Shell Process Exception: it broke"]
    assert h.context.metrics.counter("widgets").get_count() == 6
    pump(rec, lambda: [7, 8] in received(tmp_path), 5, "the early emit's task ids")


def test_heartbeats_keep_an_idle_child_alive_and_carry_storms_fields(tmp_path, hosts):
    rec = Recorder()
    h = bolt(hosts, tmp_path, scripted(tmp_path, []), rec)
    beats = lambda: [m for m in received(tmp_path)  # noqa: E731
                     if isinstance(m, dict) and m.get("stream") == "__heartbeat"]
    # Idle for longer than the timeout: the child's syncs are all that keep it alive.
    pump(rec, lambda: len(beats()) >= 4, TIMEOUT * 4, "four heartbeats")
    assert h.failure is None
    hb = beats()[0]
    assert hb["task"] == -1 and hb["comp"] is None and hb["tuple"] == []
    assert isinstance(hb["id"], str)


def test_heartbeats_go_ahead_of_queued_tuples(tmp_path, hosts):
    rec = Recorder()
    h = bolt(hosts, tmp_path, scripted(tmp_path, [["silent"]]), rec)
    with h._cv:  # the writer waits for this lock: set up its queue as it would find it
        h._tuples.extend([{"id": "t1"}, {"id": "t2"}])
        h._heartbeat_due = True
        batch = h._take_batch()
    assert [m.get("stream", m["id"]) for m in batch] == ["__heartbeat", "t1", "t2"]


def test_a_full_queue_blocks_execute_until_the_child_reads_and_loses_nothing(tmp_path, hosts):
    rec = Recorder()
    h = bolt(hosts, tmp_path, scripted(tmp_path, [["sleep", 0.5], ["echo", 6]]), rec,
             **{"topology.shellbolt.max.pending": 2})
    tuples = [tup([str(i)]) for i in range(6)]
    for t in tuples:  # the child sleeps first: execute waits at 2 queued, then goes on
        h.execute(t)
        assert len(h._tuples) <= 2
    pump(rec, lambda: len(rec.acked) == 6, 5, "six acks")
    assert rec.acked == tuples


def test_storms_own_splitsentence_py_runs_unchanged(tmp_path, hosts):
    rec = Recorder()
    h = bolt(hosts, tmp_path, ShellSpec([sys.executable, "splitsentence.py"]), rec)
    a = tup(["the cow jumped"])
    h.execute(a)
    pump(rec, lambda: rec.acked, 5, "storm.py's ack")
    assert [e[1] for e in rec.emits] == [["the"], ["cow"], ["jumped"]]
    assert all(e[2] == [a] for e in rec.emits)
    assert rec.acked == [a]


@pytest.mark.parametrize("argv, serializer", [
    (["pystorm_split.py"], "json"), (["pystorm_split.py"], "msgpack"),
    # streamparse's own launcher, as its topologies run on Storm
    (["-m", "streamparse.run", "streamparse_split.WordSplitter", "-s", "json"], "json"),
    (["-m", "streamparse.run", "streamparse_split.WordSplitter", "-s", "msgpack"], "msgpack")],
    ids=["pystorm-json", "pystorm-msgpack", "streamparse-json", "streamparse-msgpack"])
def test_pystorm_and_streamparse_bolts_run_unchanged(tmp_path, hosts, argv, serializer):
    pytest.importorskip("streamparse")
    rec = Recorder()
    spec = ShellSpec([sys.executable, *argv], env={"PYSTORM_SERIALIZER": serializer})
    java_name = {"json": "org.apache.storm.multilang.JsonSerializer",
                 "msgpack": "com.hellosign.storm.multilang.MsgpackSerializer"}[serializer]
    h = bolt(hosts, tmp_path, spec, rec, **{"topology.multilang.serializer": java_name})
    assert h.proc.serializer == serializer
    tuples = [tup([f"a b {i} ü"]) for i in range(20)]
    for t in tuples:
        h.execute(t)
    pump(rec, lambda: len(rec.acked) == 20, 10, "twenty acks")
    assert rec.acked == tuples
    assert [e[1] for e in rec.emits[:4]] == [["a"], ["b"], ["0"], ["ü"]]
    assert all(e[2] == [tuples[i // 4]] for i, e in enumerate(rec.emits))


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_storms_own_splitsentence_js_runs_unchanged(tmp_path, hosts):
    rec = Recorder()
    h = bolt(hosts, tmp_path, ShellSpec(["node", "splitsentence.js"]), rec)
    a = tup(["four score and"])
    h.execute(a)
    pump(rec, lambda: rec.acked, 5, "storm.js's ack")
    assert [e[1] for e in rec.emits] == [["four"], ["score"], ["and"]]


def test_cleanup_ends_a_child_that_stopped_reading_with_a_full_pipe(tmp_path, hosts):
    rec = Recorder()
    h = bolt(hosts, tmp_path, scripted(tmp_path, [["silent"]]), rec)
    big = "x" * 10_000
    for i in range(30):  # 300 KB: far past the pipe, so the writer blocks in a write
        h.execute(tup([f"{i} {big}"]))
    pump(rec, lambda: h._write_lock.locked(), 5, "the writer blocked on the pipe")
    t0 = time.monotonic()
    h.cleanup()
    assert time.monotonic() - t0 < 5, "cleanup waited behind the blocked writer"
    assert h.proc.wait_exit(1) is not None


def test_a_wrapper_scripts_program_is_killed_too_so_a_timeout_ends(tmp_path, hosts):
    """A child started by a shell that does not exec it: killing the shell alone would
    leave the program holding the pipe and the spout waiting forever."""
    rec = Recorder()
    spec = scripted(tmp_path, [["read"], ["silent"]])
    spec = ShellSpec(["sh", "-c", f"{sys.executable} scripted_child.py; true"], env=spec.env)
    h = spout(hosts, tmp_path, spec, rec)
    assert h.proc.pid != h.proc.proc.pid  # the program reported its own pid
    t0 = time.monotonic()
    with pytest.raises(ShellError, match="no sync within 2s"):
        h.next_tuple()
    assert time.monotonic() - t0 < TIMEOUT + 4


# -- fatal errors --------------------------------------------------------------------------
@pytest.mark.parametrize("script, execute, match", [
    ([["stderr", "Traceback: boom"], ["exit", 3]], False,
     r"exit code 3; its stderr ends:\n  Traceback: boom"),
    ([["raw", "this is not json\nend\n"]], False, "not a JSON message: b'this is not json"),
    ([["send", {"command": "ack", "id": "no-such-id"}]], False, "acked id 'no-such-id'"),
    ([["send", {"command": "emit", "anchors": ["ghost"], "tuple": [1]}]], False,
     "anchored onto id 'ghost'"),
    ([["send", {"no": "command"}]], False, "without a command"),
    ([["read_tuple"], ["silent"]], True, "sent nothing for"),
], ids=["exit", "garbage", "unknown-ack", "unknown-anchor", "no-command", "silent"])
def test_fatal_child_behaviour_raises_on_the_executor_thread(tmp_path, hosts, script, execute,
                                                             match):
    rec = Recorder()
    h = bolt(hosts, tmp_path, scripted(tmp_path, script), rec)
    if execute:
        h.execute(tup(["x"]))
    with pytest.raises(ShellError, match=match):
        pump(rec, lambda: False, TIMEOUT * 3, "the failure")
    assert h.proc.wait_exit(5) is not None, "the failed child is still running"
    with pytest.raises(ShellError):  # and the bolt refuses more work
        h.execute(tup(["y"]))


# -- the spout protocol --------------------------------------------------------------------
def spout(hosts, tmp_path, spec, rec, **conf_extra):
    h = ShellSpoutHost(spec)
    hosts.append(h)
    h.open(conf(**conf_extra), context(tmp_path, "src"), rec)
    return h


def test_storm_py_spout_next_ack_fail_with_numeric_ids(tmp_path, hosts):
    rec = Recorder()
    acked = tmp_path / "acked"
    spec = ShellSpec([sys.executable, "numbers_spout.py"], env={"ACKED_FILE": str(acked)})
    h = spout(hosts, tmp_path, spec, rec, **{"numbers.total": 3})
    h.activate()
    for _ in range(4):  # the fourth finds nothing to emit
        h.next_tuple()
    assert [(e[1], e[4]) for e in rec.emits] == [
        (["0 even"], 0), (["1 odd"], 1), (["2 even"], 2)]
    h.ack(0)
    h.fail(1)  # storm.py's spout re-emits it at the next next
    h.next_tuple()
    assert rec.emits[-1][1] == ["1 odd"] and rec.emits[-1][4] == 1
    h.ack(1)
    h.ack(2)
    h.deactivate()
    assert acked.read_text().split() == ["0", "1", "2"]


def test_spout_string_ids_direct_emits_and_task_ids_on_request(tmp_path, hosts):
    rec = Recorder()
    h = spout(hosts, tmp_path, scripted(tmp_path, [
        ["read"],  # next
        ["send", {"command": "emit", "id": "msg-é", "tuple": ["a"]}],
        ["read"],  # its task ids
        ["send", {"command": "emit", "id": 5, "tuple": ["b"], "need_task_ids": False}],
        ["send", {"command": "emit", "tuple": ["c"], "task": 12, "stream": "default"}],
        ["send", {"command": "log", "msg": "hi"}],
        ["send", {"command": "sync"}],
        ["read"], ["send", {"command": "sync"}],  # ack
        ["read"], ["send", {"command": "sync"}],  # fail
    ]), rec)
    h.next_tuple()
    assert [(e[1], e[3], e[4]) for e in rec.emits] == [
        (["a"], None, "msg-é"), (["b"], None, 5), (["c"], 12, None)]
    h.ack("msg-é")
    h.fail(5)
    msgs = received(tmp_path)
    # Storm's ShellSpout sends next, activate and deactivate with an empty id.
    assert msgs == [{"command": "next", "id": ""}, [7, 8], {"command": "ack", "id": "msg-é"},
                    {"command": "fail", "id": 5}]


def test_a_spout_childs_emits_before_its_first_command_are_taken(tmp_path, hosts):
    rec = Recorder()
    h = spout(hosts, tmp_path, scripted(tmp_path, [
        ["send", {"command": "emit", "tuple": ["early"], "need_task_ids": False}],
        ["read"], ["send", {"command": "sync"}]]), rec)
    h.activate()
    assert [e[1] for e in rec.emits] == [["early"]]
    assert received(tmp_path) == [{"command": "activate", "id": ""}]


def test_a_spout_child_that_never_syncs_is_fatal_within_the_timeout(tmp_path, hosts):
    rec = Recorder()
    h = spout(hosts, tmp_path, scripted(tmp_path, [["read"], ["silent"]]), rec)
    t0 = time.monotonic()
    with pytest.raises(ShellError, match="no sync within 2s of 'next'"):
        h.next_tuple()
    assert time.monotonic() - t0 < TIMEOUT + 3


def test_a_spout_child_sending_an_unknown_command_is_fatal(tmp_path, hosts):
    rec = Recorder()
    h = spout(hosts, tmp_path, scripted(tmp_path, [
        ["read"], ["send", {"command": "ack", "id": 1}]]), rec)
    with pytest.raises(ShellError, match="expected emit, log, error, metrics or sync"):
        h.next_tuple()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_storms_own_randomsentence_js_spout_runs_unchanged(tmp_path, hosts):
    rec = Recorder()
    h = spout(hosts, tmp_path, ShellSpec(["node", "randomsentence.js"]), rec)
    h.activate()
    h.next_tuple()
    h.next_tuple()
    assert len(rec.emits) == 2 and [e[4] for e in rec.emits] == [0, 1]
    h.fail(0)  # it re-emits the same sentence under the same id at once
    assert rec.emits[2][1] == rec.emits[0][1] and rec.emits[2][4] == 0
