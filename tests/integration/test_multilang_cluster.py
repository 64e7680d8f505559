"""Shell components on a real local cluster (ZooKeeper, Nimbus, a supervisor, workers).

The package is this folder, so ``resources/`` holds the children: Storm's storm.py with
a reliable numbers spout and Storm's own splitsentence.py, unchanged. The spout appends
every acked message id to a file, so the test sees exactly what the spout saw.
"""

from __future__ import annotations

import glob
import os
import signal
import sys

import cluster_helpers
import pytest

from squall.client.errors import InvalidRequest
from squall.client.shell import ShellBolt, ShellSpout
from squall.client.topology import TopologyBuilder
from squall.deploy.local import LocalCluster
from topos import RecordingBolt, events_of
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
#: topology.message.timeout.secs here; the waits below are derived from it.
MESSAGE_TIMEOUT = 6


@pytest.fixture(autouse=True)
def kill_topologies_after(request):
    """Whatever a test leaves running is killed, so the next test starts clean."""
    yield
    lc = request.getfixturevalue("local")
    with lc.client() as nimbus:
        names = [t.name for t in nimbus.list().topologies]
    for name in names:
        kill_and_wait(lc, name)


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    base = tmp_path_factory.mktemp("shell-local")
    lc = LocalCluster({"topology.stats.freq.secs": 0.2}, slots=4, base_dir=str(base))
    try:
        lc.start()
        yield lc
    finally:
        lc.close("test done")
    left = [pid for pid in child_pids(lc) if alive(pid)]
    assert not left, f"shell children outlived the cluster: {left}"


def shell_topology(acked_file: str):
    b = TopologyBuilder()
    b.set_spout("numbers", ShellSpout([sys.executable, "numbers_spout.py"], ["sentence"],
                                      env={"ACKED_FILE": acked_file}), 2)
    b.set_bolt("split", ShellBolt([sys.executable, "splitsentence.py"], ["word"]), 2) \
        .shuffle_grouping("numbers")
    b.set_bolt("record", RecordingBolt(), 2).fields_grouping("split", ["word"])
    return b.create_topology()


def child_pids(lc) -> list[int]:
    """Pids of every shell child any worker of ``lc`` started (their pid files)."""
    return [int(os.path.basename(p))
            for p in glob.glob(os.path.join(lc.base_dir, "workers", "*", "pids", "*"))]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def acked_ids(path) -> set[int]:
    return {int(x) for x in path.read_text().split()} if path.exists() else set()


def kill_and_wait(lc, name: str) -> None:
    cluster_helpers.kill_and_wait(lc, name)
    poll_for(lambda: not [p for p in child_pids(lc) if alive(p)], timeout=10,
             what="every shell child stopped with its worker")


def submit_shell_word_count(lc, tmp_path, name: str, n: int, **conf):
    """Submit shell_topology with ``n`` numbers; (events dir, acked-ids file)."""
    events = tmp_path / "events"
    events.mkdir()
    acked = tmp_path / "acked"
    lc.submit(name, shell_topology(str(acked)),
              {"topology.workers": 2, "test.events.dir": str(events), "numbers.total": n,
               "topology.message.timeout.secs": MESSAGE_TIMEOUT, **conf}, HERE)
    return events, acked


def test_a_shell_word_count_acks_every_message_exactly_once(local, tmp_path):
    n = 400
    events, acked = submit_shell_word_count(local, tmp_path, "shell-wc", n)
    poll_for(lambda: len(acked_ids(acked)) == n, timeout=60, what=f"all {n} messages acked")
    poll_for(lambda: len(events_of(str(events), "record", "got")) >= 2 * n, timeout=10,
             what="every word recorded")
    words = events_of(str(events), "record", "got")
    # No failure, no replay: every number once, and each parity n/2 times.
    assert sorted(w for w in words if w.isdigit()) == sorted(str(i) for i in range(n))
    assert words.count("even") == words.count("odd") == n // 2
    assert sorted(int(x) for x in acked.read_text().split()) == list(range(n))
    kill_and_wait(local, "shell-wc")


def _acked_as_it_goes(local, tmp_path, name, argv, fields, acks):
    """Run Storm's spout ``argv`` (unchanged) into a recording bolt until it has ``acks``
    trees acked; its complete latency must stay under a second (one sleep, not a step of
    128 of them) with nothing failed."""
    from cluster_helpers import worker_heartbeats
    events = tmp_path / "events"
    events.mkdir()
    b = TopologyBuilder()
    b.set_spout("spout", ShellSpout(argv, fields), 1)
    b.set_bolt("record", RecordingBolt(), 1).shuffle_grouping("spout")
    local.submit(name, b.create_topology(),
                 {"topology.workers": 1, "test.events.dir": str(events),
                  "topology.message.timeout.secs": MESSAGE_TIMEOUT}, HERE)

    def spout():
        for hb in worker_heartbeats(local):
            for st in hb.get("tasks", {}).values():
                if st.get("component") == "spout" and st.get("acked", 0) >= acks:
                    return st
        return None
    st = poll_for(spout, timeout=MESSAGE_TIMEOUT + 10, what=f"{acks} of {name}'s trees acked")
    assert st["failed"] == 0, st
    assert st["complete_latency_ms"]["p99"] < 1000, st["complete_latency_ms"]
    kill_and_wait(local, name)


def test_storms_sleeping_tester_spout_gets_its_acks_within_a_second(local, tmp_path):
    """Storm's tester_spout.py sleeps 0.5 s in every nextTuple and emits a word: each ack
    must reach it within a second, not after a step of 128 sleeps (64 s)."""
    _acked_as_it_goes(local, tmp_path, "tester", [sys.executable, "tester_spout.py"],
                      ["word"], 8)


def test_storms_sleeping_tester_spout_rb_gets_its_acks_within_a_second(local, tmp_path):
    """The same spout in Ruby, on Storm's storm.rb (its Ruby multi-lang adapter), unchanged."""
    _acked_as_it_goes(local, tmp_path, "tester-rb", ["ruby", "tester_spout.rb"], ["word"], 8)


def test_storms_randomsentence_js_gets_its_acks_as_it_goes_not_in_bursts(local, tmp_path):
    """Storm's randomsentence.js waits 0.1 s in every nextTuple: its acks came in bursts
    every 12.8 s (128 calls a step), delivery lagging up to 26 s."""
    _acked_as_it_goes(local, tmp_path, "randomsentence", ["node", "randomsentence.js"],
                      ["sentence"], 30)


def test_storms_metrics_testers_update_metrics_with_storms_names(local, tmp_path):
    """Storm's tester_spout_metrics.py and tester_bolt_metrics.py, unchanged, update
    "my-custom-shellspout-metric" and "my-custom-shell-metric" over RPC (a name with dashes
    killed the worker): each is the task's metric under its own name, the bolt's as the
    component registered it (Storm's registerMetric), the spout's as a counter."""
    from cluster_helpers import worker_heartbeats
    b = TopologyBuilder()
    b.set_spout("tester", ShellSpout([sys.executable, "tester_spout_metrics.py"], ["word"]), 1)
    b.set_bolt("metered", ShellBolt([sys.executable, "tester_bolt_metrics.py"], ["word"])
               .register_metric("my-custom-shell-metric", "counter"), 1) \
        .shuffle_grouping("tester")
    local.submit("metrics", b.create_topology(),
                 {"topology.workers": 1, "topology.message.timeout.secs": MESSAGE_TIMEOUT},
                 HERE)

    def metrics():
        out = {}
        for hb in worker_heartbeats(local):
            for st in hb.get("tasks", {}).values():
                for name, m in (st.get("metrics") or {}).items():
                    out[(st["component"], name)] = m.get("value")
        return out if out.get(("metered", "my-custom-shell-metric")) == 2 and \
            out.get(("tester", "my-custom-shellspout-metric")) == 2 else None
    # The spout emits two words (each after an update), the bolt updates once per word.
    got = poll_for(metrics, timeout=MESSAGE_TIMEOUT + 10, what="both testers' metrics at 2")
    assert ("metered", "my-custom-shell-metric") in got
    for hb in worker_heartbeats(local):
        assert hb["state"] == "running", hb  # no ValueError on the name killed it
    kill_and_wait(local, "metrics")


def test_a_shell_bolt_child_killed_mid_run_loses_no_message(local, tmp_path):
    n = 3000
    _, acked = submit_shell_word_count(local, tmp_path, "shell-kill", n,
                                       **{"numbers.sleep": 0.002})
    poll_for(lambda: len(acked_ids(acked)) >= 300, timeout=60, what="the run under way")
    splits = [p for p in child_pids(local) if alive(p) and "splitsentence.py" in cmdline(p)]
    assert len(splits) == 2, f"expected two split children, found {splits}"
    workers_before = {port: p.proc.pid for port, p in local.supervisor.procs.items()}
    os.kill(splits[0], signal.SIGKILL)
    # The host sees the child's output end: its worker dies and the supervisor restarts it;
    # its tuples fail by timeout and the spouts replay them.
    poll_for(lambda: {port: p.proc.pid for port, p in local.supervisor.procs.items()}
             != workers_before, timeout=30, what="the worker of the killed child restarted")
    poll_for(lambda: acked_ids(acked) >= set(range(n)), timeout=60 + 4 * MESSAGE_TIMEOUT,
             what=f"every one of {n} messages acked after the kill")
    assert not alive(splits[0])
    with local.client() as nimbus:
        errors = [e.error for e in nimbus.topology_info("shell-kill").errors]
    # The reader sees the output end or the writer the pipe break: either way the error
    # names the child, its command and how it ended.
    assert any("exit code -9" in e and "splitsentence.py" in e for e in errors), errors
    kill_and_wait(local, "shell-kill")


def test_a_missing_interpreter_or_an_unknown_serializer_is_refused_at_submit(local, tmp_path):
    b = TopologyBuilder()
    b.set_spout("numbers", ShellSpout(["no-such-lang-interpreter", "spout.nsl"], ["n"]))
    with pytest.raises(InvalidRequest, match="'no-such-lang-interpreter'.*not installed on "
                       "the Nimbus host"):
        local.submit("nsl", b.create_topology(), {}, HERE)
    b = TopologyBuilder()
    b.set_spout("numbers", ShellSpout([sys.executable, "numbers_spout.py"], ["n"]))
    with pytest.raises(InvalidRequest, match="unknown serializer 'protobuf'"):
        local.submit("proto", b.create_topology(),
                     {"topology.multilang.serializer": "protobuf"}, HERE)
    # An interpreter only on topology.environment's PATH is where the workers will look.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "squall-test-python").symlink_to(sys.executable)
    b = TopologyBuilder()
    b.set_spout("numbers", ShellSpout(["squall-test-python", "numbers_spout.py"], ["n"]))
    acked = tmp_path / "acked"
    b.set_bolt("record", RecordingBolt()).shuffle_grouping("numbers")
    local.submit("envpath", b.create_topology(),
                 {"topology.environment": {"PATH": f"{bin_dir}:/usr/bin:/bin",
                                           "ACKED_FILE": str(acked)},
                  "numbers.total": 20, "test.events.dir": str(tmp_path)}, HERE)
    poll_for(lambda: len(acked_ids(acked)) == 20, timeout=60, what="the spout's 20 acks")
    kill_and_wait(local, "envpath")
