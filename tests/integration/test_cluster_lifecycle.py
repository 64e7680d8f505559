"""A topology's whole life on a real cluster (ZooKeeper, `squall nimbus`, two `squall supervisor` s
as processes, via :class:`test_cli_cluster.Cluster`): `squall kill -w` drains in-flight trees and
then removes every trace of it, also when Nimbus is killed -9 during the wait; refused
submissions print one line and write nothing; a worker killed -9 is restarted by its supervisor
and a supervisor killed -9 mid-run has its workers moved, both losing no message; a supervisor
killed -9 and started again takes its running worker back (the worker never stops), and a
worker whose supervisor does not come back exits on its own.

Timings (kill -> removal, failover) are printed; run with ``-s`` to see them.
"""

from __future__ import annotations

import glob
import json
import os
import select
import shutil
import subprocess
import time

import psutil
import pytest

from squall.client.cluster_state import Paths
from squall.client.nimbus_client import NimbusClient
from squall.client.errors import InvalidRequest
from squall.client.topology import TopologyBuilder
from squall.client.topology_proto import to_proto
from test_cli_cluster import EXAMPLES, Cluster, alive, squall_cmd, started, worker_pids
from topos import NumberSpout, RecordingBolt, events_of
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
SPOUT = "sentences"  # the word count's spout


# --- helpers -----------------------------------------------------------------------------
def spout_stats(c: Cluster, component: str = SPOUT) -> tuple[dict[str, dict], float, bool]:
    """(task -> counters of ``component``'s tasks, newest heartbeat time, any worker active)."""
    tasks, newest, active = {}, 0.0, False
    for hb in c.heartbeats():
        newest = max(newest, float(hb.get("time", 0)))
        active = active or bool(hb.get("active"))
        for task, s in hb.get("tasks", {}).items():
            if s.get("component") == component:
                tasks[task] = s
    return tasks, newest, active


def wait_for(predicate, timeout: float, explain) -> object:
    """:func:`poll_for`, with ``explain()`` (evaluated at the timeout) in the failure."""
    try:
        return poll_for(predicate, timeout=timeout)
    except pytest.fail.Exception as e:
        pytest.fail(f"{e}: {explain()}")


def total(tasks: dict[str, dict], key: str) -> int:
    return sum(int(s.get(key, 0)) for s in tasks.values())


def zk_children(state, subtree: str) -> list[str]:
    return sorted(state._children(state.paths.dir(subtree), None))


def zk_snapshot(state) -> dict[str, list[str]]:
    """The children of every topology subtree: what a refused request must leave alone."""
    return {s: zk_children(state, s) for s in (Paths.STORMS, Paths.ASSIGNMENTS, Paths.ERRORS)}


def nimbus_dir(c: Cluster):
    return c.tmp / "nimbus" / "nimbus"


def nimbus_files(c: Cluster) -> dict[str, list[str]]:
    d = nimbus_dir(c)
    return {sub: sorted(os.listdir(d / sub)) if (d / sub).is_dir() else []
            for sub in ("inbox", "stormdist")}


def local_traces(c: Cluster, tid: str) -> list[str]:
    """Files of topology ``tid`` left on Nimbus or a supervisor."""
    found = [str(p) for p in [nimbus_dir(c) / "stormdist" / tid] if p.exists()]
    for d in c.sup_dirs:
        if (d / "supervisor" / "stormdist" / tid).exists():
            found.append(str(d / "supervisor" / "stormdist" / tid))
        found += glob.glob(str(d / "workers" / f"{tid}-*"))
    return found


def zk_traces(state, tid: str) -> list[str]:
    """ZooKeeper nodes of topology ``tid`` still present."""
    return [s for s in (Paths.STORMS, Paths.ASSIGNMENTS, Paths.ERRORS)
            if tid in zk_children(state, s)]


def start_kill(c: Cluster, name: str, wait: int) -> tuple[subprocess.Popen, str, float]:
    """Run `squall kill NAME -w WAIT` in the background; (process, its first line, when read)."""
    proc = subprocess.Popen(squall_cmd("kill", name, "-w", str(wait)), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=c.env, cwd=str(c.tmp))
    c.procs[f"kill-{name}"] = proc  # so Cluster.stop ends it (by pid) if the test fails early
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    if not ready:
        proc.kill()
        pytest.fail("`squall kill` printed nothing within 20 s\n" + c.logs())
    line = proc.stdout.readline()
    return proc, line, time.monotonic()


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"`squall kill` still running after {timeout} s: {out}{err}")
    return proc.returncode, out, err


def nimbus_client(c: Cluster) -> NimbusClient:
    return NimbusClient(c.conf, timeout=5)


def status_of(nimbus: NimbusClient, name: str) -> str | None:
    for t in nimbus.list().topologies:
        if t.name == name:
            return t.status
    return None


def write_package(path, module_name: str, source: str):
    """A package dir for `squall jar`: ``topos.py`` (the components workers import) + a module."""
    path.mkdir()
    shutil.copy(os.path.join(HERE, "topos.py"), path / "topos.py")
    (path / f"{module_name}.py").write_text(source)
    return path


def one_error_line(r: subprocess.CompletedProcess) -> str:
    """The CLI's single ``Error: ...`` line; fails on a traceback or any other output."""
    assert r.returncode != 0, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    errors = [ln for ln in lines if ln.startswith("Error:")]
    others = [ln for ln in lines if ln not in errors]
    assert len(errors) == 1 and not others and not r.stdout.strip(), r.stdout + r.stderr
    return errors[0]


# --- 1. kill -w with tuples in flight ------------------------------------------------------
@pytest.fixture
def cluster(tmp_path, zk_conf):
    yield from started(Cluster(tmp_path, zk_conf))


def test_kill_wait_drains_in_flight_trees_then_removes_everything(cluster, cluster_state):
    c, wait = cluster, 5
    c.submit_word_count()
    tid = poll_for(lambda: c.listed().get("word-count", [None, None])[1], timeout=10,
                   what="word-count listed")
    poll_for(lambda: c.acked() > 500, timeout=30, what="500 acks\n" + c.logs())
    # A worker error on record, so the kill has an /errors/<id> node to remove too.
    cluster_state.report_error(tid, "split", "test: recorded error", time.time())
    assert tid in zk_children(cluster_state, Paths.ERRORS)

    # Trees in flight right before the kill: the spouts have pending (unacked) messages.
    before = poll_for(lambda: (lambda t: t if total(t, "pending") > 0 else None)(spout_stats(c)[0]),
                      timeout=10, what="spout tasks with pending trees")
    pids = set(c.worker_pids)
    assert len(pids) == 2 and all(alive(p) for p in pids), pids
    assert total(before, "acked") > 0 and total(before, "failed") == 0, before
    assert local_traces(c, tid), tid
    assert zk_traces(cluster_state, tid) == [Paths.STORMS, Paths.ASSIGNMENTS, Paths.ERRORS]

    proc, first, t_first = start_kill(c, "word-count", wait)
    assert f"Killing topology word-count ({tid})" in first and f"removal in {wait} s" in first, \
        first
    rows = c.listed()  # `squall list` right away: KILLED, not yet removed
    list_delay = time.monotonic() - t_first
    assert rows["word-count"][2] == "KILLED", rows
    assert list_delay < 3, f"`squall list` took {list_delay:.1f} s"  # mostly the CLI's start-up

    # Watch the wait: the status stays KILLED; spouts stop emitting and their trees drain.
    samples = []  # (monotonic, listed status, spout task counters, heartbeat time, any active)
    with nimbus_client(c) as nim:
        def sample():
            status = status_of(nim, "word-count")
            tasks, hb_time, active = spout_stats(c)
            samples.append((time.monotonic(), status, tasks, hb_time, active))
            return status is None or proc.poll() is not None
        poll_for(sample, timeout=wait + 15, interval=0.1, what="word-count removed\n" + c.logs())
    t_gone = next((t for t, status, *_ in samples if status is None), None)
    assert t_gone is not None, "`squall kill` ended while the topology was still listed"
    assert all(status in ("KILLED", None) for _, status, *_ in samples), samples
    assert t_gone - t_first >= wait - 0.5, f"removed {t_gone - t_first:.2f} s after the kill"

    # Drained: every spout task at pending 0, no failure, and emitted frozen from then on
    # while heartbeats kept coming (deactivated spouts never call next_tuple).
    during = [(t, tasks, hb, active) for t, status, tasks, hb, active in samples
              if status == "KILLED" and tasks]
    drained = next(((t, tasks, hb) for t, tasks, hb, active in during
                    if not active and len(tasks) == len(before)
                    and total(tasks, "pending") == 0), None)
    assert drained is not None, [(t - t_first, total(tk, "pending"), a) for t, tk, _, a in during]
    t_drained, at_drain, hb_drain = drained
    later = [(tasks, hb) for t, tasks, hb, _ in during if t > t_drained and hb > hb_drain + 0.5]
    assert later, "no heartbeat after the drain to compare with"
    for tasks, _ in later:
        assert total(tasks, "emitted") == total(at_drain, "emitted"), (at_drain, tasks)
        assert total(tasks, "pending") == 0 and total(tasks, "failed") == 0, tasks
    assert total(at_drain, "acked") > total(before, "acked"), (before, at_drain)

    code, out, err = finish(proc, timeout=15)
    assert code == 0, out + err
    assert "Topology word-count killed and removed" in out, out + err
    assert "word-count" not in c.listed()
    assert zk_traces(cluster_state, tid) == []
    assert cluster_state.get_storm(tid) is None and cluster_state.get_assignment(tid) is None
    poll_for(lambda: not any(alive(p) for p in pids), timeout=15, what="workers exit\n" + c.logs())
    t_exit = time.monotonic()
    wait_for(lambda: not local_traces(c, tid), timeout=10,
             explain=lambda: f"local files of {tid} left: {local_traces(c, tid)}")
    print(f"\nkill -w {wait}: `squall list` (KILLED) done {list_delay:.2f} s after the first "
          f"line; drained (pending 0) {t_drained - t_first:.2f} s, removed "
          f"{t_gone - t_first:.2f} s, workers gone {t_exit - t_first:.2f} s, files gone "
          f"{time.monotonic() - t_first:.2f} s after it")


# --- 2. Nimbus killed -9 during the kill wait --------------------------------------------
def test_kill_wait_survives_nimbus_kill9(cluster, cluster_state):
    """The removal time is persisted with the KILLED status: a new Nimbus removes the topology
    at the original time (kill + wait), not a full wait after it took over."""
    c, wait = cluster, 6
    c.submit_word_count()
    poll_for(lambda: c.acked() > 100, timeout=30, what="acks\n" + c.logs())
    tid = c.listed()["word-count"][1]
    pids = set(c.worker_pids)
    assert len(pids) == 2, pids

    t_kill = time.monotonic()
    proc, first, t_first = start_kill(c, "word-count", wait)
    assert "removal in" in first, first
    assert cluster_state.get_storm(tid)["status"] == "killed"
    old = c.procs["nimbus"]
    old.kill()  # kill -9 the leader during the wait
    old.wait()
    t_dead = time.monotonic()
    c.start_daemon("nimbus", "nimbus", "-c", f"storm.local.dir={c.tmp / 'nimbus'}")
    assert c.procs["nimbus"].pid != old.pid

    poll_for(lambda: cluster_state.get_storm(tid) is None, timeout=wait + 15,
             what="removal by the new Nimbus\n" + c.logs())
    removed = time.monotonic() - t_kill
    assert wait - 0.5 <= removed < wait + 5, removed
    assert zk_traces(cluster_state, tid) == []
    rows = poll_for(lambda: (lambda r: r if r.returncode == 0 else None)(c.run("list")),
                    timeout=15, what="the new Nimbus answering `squall list`")
    assert "word-count" not in rows.stdout, rows.stdout
    poll_for(lambda: not any(alive(p) for p in pids), timeout=15, what="workers exit\n" + c.logs())
    wait_for(lambda: not local_traces(c, tid), timeout=10,
             explain=lambda: f"local files of {tid} left: {local_traces(c, tid)}")
    # No worker left: the supervisors have no child process at all.
    for name in ("supervisor1", "supervisor2"):
        poll_for(lambda: not psutil.Process(c.procs[name].pid).children(recursive=True),
                 timeout=10, what=f"{name} without workers")
    # The kill command lost its Nimbus mid-countdown: it keeps waiting and sees the removal.
    code, out, err = finish(proc, timeout=15)
    assert code == 0 and "killed and removed" in out, out + err
    print(f"\nkill -w {wait} with Nimbus killed -9 {t_dead - t_kill:.2f} s in: removed "
          f"{removed:.2f} s after the kill; kill command exit {code}: "
          f"{(out + err).strip().splitlines()[-1]!r}")


# --- 3. refused submissions ----------------------------------------------------------------
MAX_PACKAGE = 100_000

#: ``squall jar PKG refused MODE NAME``: MODE ``client``: a bolt subscribing to a component that
#: does not exist, which the builder refuses in the CLI; ``nimbus``: the same topology broken
#: after the builder validated it, so it reaches Nimbus (upload included), which must refuse it;
#: ``valid``: a topology that runs.
REFUSED_TOPO = '''
from squall.client import TopologyBuilder
from squall.client.submitter import submit_topology
from topos import NumberSpout, RecordingBolt


def main(args):
    mode, name = args
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    bolt = b.set_bolt("record", RecordingBolt(), 1)
    bolt.shuffle_grouping("missing" if mode == "client" else "numbers")
    topology = b if mode == "client" else b.create_topology()
    if mode == "nimbus":
        topology.components["record"].inputs[0].component = "missing"
    submit_topology(name, {}, topology)
'''


@pytest.fixture
def nimbus_only(tmp_path, zk_conf):
    """Only `squall nimbus` (refusals need no supervisor), with a small package limit."""
    c = Cluster(tmp_path, zk_conf, {"nimbus.package.max.bytes": MAX_PACKAGE})
    c.start_daemon("nimbus", "nimbus", "-c", f"storm.local.dir={tmp_path / 'nimbus'}")
    try:
        poll_for(lambda: c.run("list").returncode == 0, timeout=20, what="Nimbus up\n" + c.logs())
        yield c
    finally:
        c.stop()


def _valid_topology():
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("record", RecordingBolt(), 1).shuffle_grouping("numbers")
    return b.create_topology()


def refused_proto():
    """The proto of a topology whose bolt subscribes to a component that does not exist."""
    pb = to_proto(_valid_topology())
    pb.bolts["record"].common.inputs[0].source.component = "missing"
    return pb


def test_refusals_print_one_line_and_write_nothing(nimbus_only, cluster_state, tmp_path):
    c = nimbus_only
    r = c.run("jar", EXAMPLES, "word_count", "-c", "wordcount.sentences=0")
    assert r.returncode == 0, r.stdout + r.stderr + c.logs()
    tid = c.listed()["word-count"][1]

    def written():
        """ZooKeeper's topology subtrees and Nimbus's stormdist (the inbox: see the next test)."""
        return zk_snapshot(cluster_state), nimbus_files(c)["stormdist"]

    base = written()
    assert base[0][Paths.STORMS] == [tid] and base[1] == [tid], base
    pkg = write_package(tmp_path / "refusedpkg", "refused", REFUSED_TOPO)
    lines = {}

    # (a) unknown component, as the CLI user sees it: the builder refuses before any upload ...
    inbox = nimbus_files(c)["inbox"]
    r = c.run("jar", str(pkg), "refused", "client", "refused")
    lines["a, cli"] = line = one_error_line(r)
    assert "bolt 'record' subscribes to 'missing'" in line and "no component 'missing'" in line
    assert written() == base and nimbus_files(c)["inbox"] == inbox
    # ... Nimbus refuses it too when the client's check is bypassed (after an upload) ...
    r = c.run("jar", str(pkg), "refused", "nimbus", "refused")
    lines["a, nimbus"] = line = one_error_line(r)
    assert "bolt 'record' subscribes to 'missing'" in line and "no component 'missing'" in line
    assert written() == base
    # ... and without an upload, straight through the gRPC client.
    with nimbus_client(c) as nim:
        with pytest.raises(InvalidRequest, match="no component 'missing'"):
            nim.submit("refused", "", "{}", refused_proto())
    assert written() == base

    # (b) a second topology of the same name: the line names the live one.
    r = c.run("jar", EXAMPLES, "word_count")
    lines["b"] = line = one_error_line(r)
    assert f"'word-count' is already running (id {tid})" in line, line
    assert written() == base

    # (c) a package over nimbus.package.max.bytes: refused at BeginFileUpload, before any byte.
    big = write_package(tmp_path / "bigpkg", "refused", REFUSED_TOPO)
    (big / "blob.bin").write_bytes(os.urandom(2 * MAX_PACKAGE))  # random: zip cannot shrink it
    inbox = nimbus_files(c)["inbox"]
    r = c.run("jar", str(big), "refused", "valid", "big")
    lines["c"] = line = one_error_line(r)
    assert f"over the limit of {MAX_PACKAGE} bytes" in line and "nimbus.package.max.bytes" in line
    assert written() == base and nimbus_files(c)["inbox"] == inbox

    # (d) an upload location with `..` (the CLI never sends one): refused, nothing moved.
    with nimbus_client(c) as nim:
        loc = nim.upload(b"PK-not-really-a-zip")
        inbox = nimbus_files(c)["inbox"]
        assert loc in inbox
        ok = to_proto(_valid_topology())
        for bad in ("../../etc/passwd", f"../inbox/{loc}", f"{loc}/../{loc}",
                    f"../stormdist/{tid}"):
            with pytest.raises(InvalidRequest, match="outside Nimbus's inbox"):
                nim.submit("traversal", bad, "{}", ok)
    assert written() == base and nimbus_files(c)["inbox"] == inbox
    assert "traversal" not in c.listed()
    print("\n" + "\n".join(f"{k}: {v}" for k, v in lines.items()))


def test_refused_submit_leaves_no_upload_behind(nimbus_only):
    """A refused `squall jar` uploaded its package first; the refusal must not leave it behind."""
    c = nimbus_only
    r = c.run("jar", EXAMPLES, "word_count")
    assert r.returncode == 0, r.stdout + r.stderr + c.logs()
    before = nimbus_files(c)
    one_error_line(c.run("jar", EXAMPLES, "word_count"))  # the name is taken
    assert nimbus_files(c) == before


# --- 4. supervisor killed -9 mid-run: no message lost ----------------------------------------
TASK_TIMEOUT, MONITOR, MESSAGES = 3, 0.5, 3000

#: ``squall jar PKG numbered``: NumberSpout (msg ids 0..N-1, failures replayed) -> RecordingBolt;
#: every spout task appends ``ack <id>`` to ``<test.events.dir>/numbers-<task>.log``.
NUMBERED_TOPO = '''
from squall.client import TopologyBuilder
from squall.client.submitter import submit_topology
from topos import NumberSpout, RecordingBolt


def main(args):
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("numbers")
    submit_topology("numbered", {"topology.workers": 2}, b)
'''


@pytest.fixture
def failover_cluster(tmp_path, zk_conf):
    yield from started(Cluster(tmp_path, zk_conf, {
        "nimbus.monitor.freq.secs": MONITOR, "nimbus.task.timeout.secs": TASK_TIMEOUT,
        "nimbus.task.launch.secs": 10, "supervisor.heartbeat.frequency.secs": 0.5,
        "supervisor.monitor.frequency.secs": 1}))


def run_numbered(c: Cluster, tmp_path):
    """Submit the finite numbered topology (slow enough that a kill lands early in the run) and
    wait for its first acks; returns (submit time, the set of acked msg ids as a function, the
    events dir)."""
    events = tmp_path / "events"
    events.mkdir()
    pkg = write_package(tmp_path / "numberedpkg", "numbered", NUMBERED_TOPO)
    poll_for(lambda: "2 supervisor(s), 0/4 slots used" in c.run("list").stdout, timeout=20,
             what="2 supervisors registered\n" + c.logs())
    t0 = time.monotonic()
    # 3 ms a tuple per sink task.
    r = c.run("jar", str(pkg), "numbered", "-c", f"test.events.dir={events}",
              "-c", f"test.spout.count={MESSAGES}", "-c", "test.sleep.secs=0.003",
              "-c", "topology.max.spout.pending=100", "-c", "topology.message.timeout.secs=5",
              "-c", "topology.stats.freq.secs=0.2")
    assert r.returncode == 0, r.stdout + r.stderr + c.logs()

    def acked():
        return {int(i) for i in events_of(str(events), "numbers", "ack")}

    poll_for(lambda: len(acked()) >= MESSAGES // 10, timeout=30, what="first acks\n" + c.logs())
    return t0, acked, events


def wait_all_acked(c: Cluster, acked) -> None:
    wait_for(lambda: acked() == set(range(MESSAGES)), timeout=60,
             explain=lambda: (lambda m: f"{len(m)} msg ids never acked, e.g. {m[:20]}\n")(
                 sorted(set(range(MESSAGES)) - acked())) + c.logs())


def test_worker_kill9_is_restarted_by_its_supervisor_and_loses_no_message(failover_cluster,
                                                                          tmp_path):
    c = failover_cluster
    _, acked, _ = run_numbered(c, tmp_path)
    sup_dir = c.sup_dirs[0]
    (victim,) = worker_pids(sup_dir)
    at_kill = len(acked())
    psutil.Process(victim).kill()
    t_kill = time.monotonic()
    poll_for(lambda: worker_pids(sup_dir) - {victim}, timeout=5,
             what="the supervisor relaunching the killed worker\n" + c.logs())
    restarted = time.monotonic() - t_kill
    after = len(acked())
    poll_for(lambda: len(acked()) > after + 50, timeout=10, what="acks after the restart")
    processing = time.monotonic() - t_kill
    wait_all_acked(c, acked)
    print(f"\nworker kill -9 at {at_kill}/{MESSAGES} acked: restarted by its supervisor in "
          f"{restarted:.2f} s, acks flowing again {processing:.2f} s after the kill; all "
          f"{MESSAGES} ids acked {time.monotonic() - t_kill:.2f} s after it")


def test_supervisor_kill9_loses_no_message(failover_cluster, tmp_path):
    c = failover_cluster
    t0, acked, events = run_numbered(c, tmp_path)
    victims, kept = worker_pids(c.sup_dirs[0]), worker_pids(c.sup_dirs[1])
    assert len(victims) == 1 and len(kept) == 1, c.logs()
    at_kill = len(acked())
    assert at_kill < MESSAGES // 2, f"the run was nearly over before the kill ({at_kill} acked)"
    sup = c.procs["supervisor1"]
    sup.kill()  # kill -9 the supervisor ...
    sup.wait()
    for pid in victims:  # ... and its worker
        psutil.Process(pid).kill()
    t_kill = time.monotonic()

    survivor = c.sup_dirs[1]
    # The target: within nimbus.task.timeout.secs + nimbus.monitor.freq.secs (plus the
    # supervisor's pick-up and a noisy 2-core machine's slack).
    poll_for(lambda: len(glob.glob(str(survivor / "workers" / "*" / "assignment.json"))) == 2,
             timeout=TASK_TIMEOUT + MONITOR + 2.5,
             what="both workers assigned to supervisor2\n" + c.logs())
    failover = time.monotonic() - t_kill
    c.sup_dirs = [survivor]
    wait_all_acked(c, acked)
    done = time.monotonic()
    assert not any(alive(p) for p in victims)
    # The surviving worker kept running: it followed the new assignment (connected to the
    # moved worker) instead of being restarted, so its spout's pending trees replayed from its
    # own memory rather than from a restart.
    assert kept <= worker_pids(survivor), "the surviving worker was restarted"
    evs = events_of(str(events), "numbers", "ack")
    fails = events_of(str(events), "numbers", "fail")
    print(f"\nsupervisor kill -9 at {at_kill}/{MESSAGES} acked, {t_kill - t0:.2f} s after "
          f"submit; failover (kill -> assignment moved) {failover:.2f} s; all {MESSAGES} ids "
          f"acked {done - t_kill:.2f} s after the kill ({len(evs)} acks, {len(fails)} fails "
          f"recorded)")


# --- 5. supervisor restarted: its running workers taken back -------------------------------
ADOPT_SECS = 8


@pytest.fixture
def adopt_cluster(tmp_path, zk_conf):
    """As failover_cluster, with Nimbus's task timeout above the workers' wait for their
    supervisor (as the defaults are: 30 > 10), so a restart is not mistaken for a lost host."""
    yield from started(Cluster(tmp_path, zk_conf, {
        "nimbus.monitor.freq.secs": MONITOR, "nimbus.task.timeout.secs": 3 * ADOPT_SECS,
        "nimbus.task.launch.secs": 10, "supervisor.heartbeat.frequency.secs": 0.5,
        "supervisor.monitor.frequency.secs": 1, "supervisor.worker.adopt.secs": ADOPT_SECS}))


def test_supervisor_restart_takes_its_running_worker_back(adopt_cluster, tmp_path):
    c = adopt_cluster
    _, acked, events = run_numbered(c, tmp_path)
    (worker,) = worker_pids(c.sup_dirs[0])
    c.worker_pids.add(worker)  # no child of the restarted supervisor: stopped by pid at the end
    sup = c.procs["supervisor1"]
    sup.kill()  # kill -9: as a crash or a service manager's restart would
    sup.wait()
    t_kill = time.monotonic()
    at_kill = len(acked())
    # Without its supervisor the worker runs on: acks keep coming through both workers.
    poll_for(lambda: len(acked()) > at_kill + 100, timeout=ADOPT_SECS / 2,
             what="acks while the supervisor is down\n" + c.logs())
    assert alive(worker)
    c.start_daemon("supervisor1", "supervisor", "-c", f"storm.local.dir={c.sup_dirs[0]}",
                   "-c", f"supervisor.slots.ports={json.dumps(c.sup_ports[0])}",
                   "-c", "storm.local.hostname=127.0.0.1")
    log = c.tmp / "supervisor1.log"
    poll_for(lambda: "took back worker of topology" in log.read_text(), timeout=ADOPT_SECS,
             what="the restarted supervisor taking its worker back\n" + c.logs())
    taken = time.monotonic() - t_kill
    wait_all_acked(c, acked)
    # The same process ran throughout: never stopped, never launched again, nothing failed.
    assert alive(worker) and worker_pids(c.sup_dirs[0]) == {worker}
    restarted_log = log.read_text().split("took back worker", 1)[1]
    assert "launched worker" not in restarted_log, c.logs()
    assert events_of(str(events), "numbers", "fail") == []
    # Nimbus kept it where it was: its heartbeats arrive through the new supervisor process.
    assert len(glob.glob(str(c.sup_dirs[1] / "workers" / "*" / "assignment.json"))) == 1
    print(f"\nsupervisor kill -9 at {at_kill}/{MESSAGES} acked; restarted and took its worker "
          f"back {taken:.2f} s after the kill; all {MESSAGES} ids acked, none failed")


def test_worker_exits_when_its_supervisor_does_not_come_back(adopt_cluster, tmp_path):
    c = adopt_cluster
    run_numbered(c, tmp_path)
    (worker,) = worker_pids(c.sup_dirs[0])
    c.worker_pids.add(worker)
    sup = c.procs["supervisor1"]
    sup.kill()
    sup.wait()
    t_kill = time.monotonic()
    # Its wait, a read of its supervisor.json a second, and its shutdown (at most 5 s).
    poll_for(lambda: not alive(worker), timeout=ADOPT_SECS + 1 + 5 + 2,
             what="the orphaned worker exiting\n" + c.logs())
    gone = time.monotonic() - t_kill
    assert gone >= ADOPT_SECS - 0.5, f"exited {gone:.1f} s after its supervisor, before its wait"
    wlog = "".join(p.read_text() for p in (c.sup_dirs[0] / "logs").glob("numbered-*.log"))
    assert "none took it back (supervisor.worker.adopt.secs 8)" in wlog, wlog[-3000:]
    print(f"\norphaned worker exited {gone:.2f} s after its supervisor's kill -9")
