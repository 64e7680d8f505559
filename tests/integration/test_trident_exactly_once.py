"""Trident's exactly-once guarantee under faults: a word count (persistent_aggregate with Count
into Redis) over known input files ends at the exact totals, for a transactional and an opaque
spout, when

* a function fails the first attempt of chosen batches and a state fails the first commit of
  chosen txids (worker processes of a StaticCluster);
* a worker running batch executors, and then the master coordinator's worker, are killed -9 on
  a real cluster (ZooKeeper, `squall nimbus`, two `squall supervisor` s) whose supervisors
  restart them -- the coordinator continues from the txid it persisted in ZooKeeper.

Every commit is recorded in a Redis list (trident_topos.RecordingStateFactory): commits are
observed strictly in txid order. A state_query stream reads counts while the topology runs:
what it reads never decreases and ends at the exact totals.

Timings (kill -> exact counts) are printed; run with ``-s`` to see them.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import time

import psutil
import pytest

from squall.client import config as cfg
from squall.client.trident.line_files import OpaqueLineFiles, TransactionalLineFiles
from squall.client.trident.state.redis_map import RedisMapState
from squall.client.trident.tx_state import make_tx_state
from test_cli_cluster import Cluster, alive, started, worker_pids
from trident_topos import word_count_recorded
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
MASTER = "$mastercoord-bg0"
SPOUTS = {"transactional": (TransactionalLineFiles, RedisMapState.transactional),
          "opaque": (OpaqueLineFiles, RedisMapState.opaque)}
#: Replays come fast: a lost batch times out after 5 s; batches start every 20 ms, 3 at a time.
FAST = {"topology.message.timeout.secs": 5, "topology.max.spout.pending": 3,
        "topology.trident.batch.emit.interval.millis": 20}


# --- helpers -----------------------------------------------------------------------------------
def write_input(tmp_path, n_files: int, lines: int) -> tuple[list[str], dict[str, int]]:
    """``n_files`` files of ``lines`` lines each; the exact word counts."""
    files, expected = [], collections.Counter()
    for f in range(n_files):
        text = [f"w{(f * 7 + i) % 13} v{i % 5} common" for i in range(lines)]
        path = tmp_path / f"in-{f}.txt"
        path.write_text("".join(t + "\n" for t in text))
        for t in text:
            expected.update(t.split())
        files.append(str(path))
    return files, dict(expected)


class Observer:
    """Reads what the topology left in Redis: the counts, the commit log, the recorded faults
    and reads (see trident_topos)."""

    def __init__(self, redis_server, conf, state_type: str, name: str = "counts"):
        self.client = redis_server.client()
        self.prefix = conf["trident.redis.key.prefix"]
        self.hash = self.prefix + name
        self.opaque = state_type == "opaque"

    def counts(self) -> dict[str, int]:
        """word -> stored count ([txid, value] or [txid, curr, prev])."""
        return {word: value[1] for word, value in self.stored().items()}

    def stored(self) -> dict[str, list]:
        return {json.loads(k)[0]: json.loads(v) for k, v in self.client.hgetall(self.hash).items()}

    def list(self, name: str) -> list[str]:
        return [x.decode() for x in self.client.lrange(self.prefix + name, 0, -1)]

    def commits(self) -> list[tuple[int, int, str]]:
        """(partition, txid, "ok" | "failed") in the order the commits happened."""
        out = []
        for entry in self.list("commits"):
            p, txid, what = entry.split(":")
            out.append((int(p), int(txid), what))
        return out

    def close(self):
        self.client.close()


@pytest.fixture
def observe(redis_server):
    made = []

    def make(conf, state_type):
        made.append(Observer(redis_server, conf, state_type))
        return made[-1]

    yield make
    for o in made:
        o.close()


def check_commit_order(commits, partitions: int, replays_allowed: bool) -> dict[int, list[int]]:
    """Commits are observed strictly in txid order: in the order they happened, the txids of
    successful commits never decrease (a txid commits only after every partition committed the
    one before), and each partition committed 1, 2, 3, ... without a gap. A partition commits a
    txid twice only when that txid's commit failed somewhere (``replays_allowed``: or a killed
    worker lost its ack), and then right after its first commit. Returns partition -> txids."""
    ok = [(p, t) for p, t, what in commits if what == "ok"]
    txids = [t for _, t in ok]
    assert txids == sorted(txids), f"a txid committed after a larger one: {ok}"
    failed = {t for _, t, what in commits if what == "failed"}
    per = {p: [t for q, t in ok if q == p] for p in range(partitions)}
    for p, ts in per.items():
        assert ts and ts[0] == 1, (p, ts[:10])
        distinct = sorted(set(ts))
        assert distinct == list(range(1, distinct[-1] + 1)), f"partition {p} skipped txids: {ts}"
        twice = [t for t, n in collections.Counter(ts).items() if n > 1]
        if not replays_allowed:
            assert set(twice) <= failed, f"partition {p} committed {twice} twice: {ts}"
    return per


def stats(heartbeats, component: str, key: str) -> int:
    return sum(int(s.get(key, 0)) for hb in heartbeats for s in hb.get("tasks", {}).values()
               if s.get("component") == component)


# --- 1 + 2: failed first attempts, failed first commits; commit order ---------------------------
@pytest.mark.parametrize("state_type", ["transactional", "opaque"])
def test_failed_attempts_and_commits_are_replayed_and_counted_once(cluster, tmp_path, redis_conf,
                                                                   observe, state_type):
    spout_class, factory = SPOUTS[state_type]
    files, expected = write_input(tmp_path, n_files=3, lines=200)  # 20 batches of 10 lines a file
    fail_split, fail_commits = {3, 11}, {7, 15}
    topo = word_count_recorded(spout_class(files, batch_lines=10), factory(None, "counts"),
                               fail_split=fail_split, fail_commits=fail_commits)
    conf = dict(redis_conf, **FAST, **{"topology.workers": 2,
                                       "trident.transactional.state": "memory"})
    obs = observe(conf, state_type)
    t0 = time.monotonic()
    lc = cluster(topo, conf, name=f"trident-faults-{state_type}")
    lc.wait_for(lambda: obs.counts() == expected, timeout=60,
                what=f"exact counts in Redis (now {obs.counts()}, expected {expected})")
    exact = time.monotonic() - t0

    # Each chosen batch failed once in Split (its first attempt), then passed.
    faults = [tuple(map(int, f.split(":"))) for f in obs.list("faults")]
    assert sorted(t for t, _ in faults) == sorted(fail_split), faults
    # Each chosen commit failed once in every partition, then succeeded.
    commits = obs.commits()
    failed = sorted((p, t) for p, t, what in commits if what == "failed")
    assert failed == sorted((p, t) for p in (0, 1) for t in fail_commits), failed
    per = check_commit_order(commits, partitions=2, replays_allowed=False)
    for p, ts in per.items():
        assert ts == sorted(set(ts)), f"partition {p} committed a txid twice: {ts}"
    # The master coordinator saw the failures (4 trees at least: 2 batches, 2 commits).
    lc.wait_for(lambda: lc.total("failed", component=MASTER) >= 4, timeout=5,
                what="the master coordinator's failed counter")
    # Every stored value carries the txid that last wrote it (and opaque: the value before).
    for word, stored in obs.stored().items():
        assert 1 <= stored[0] <= max(max(ts) for ts in per.values()), (word, stored)
    print(f"\n{state_type}: exact counts {exact:.2f} s after start, through "
          f"{len(faults)} failed batches and {len(failed)} failed commits; "
          f"master failed {lc.total('failed', component=MASTER)}; last txid committed "
          f"{max(max(ts) for ts in per.values())}")


# --- 5: state_query while running ---------------------------------------------------------------
def test_state_query_reads_counts_that_grow_to_the_exact_totals(cluster, tmp_path, redis_conf,
                                                                observe):
    files, expected = write_input(tmp_path, n_files=2, lines=300)
    words = ["common", "w3", "v0", "absent"]
    topo = word_count_recorded(TransactionalLineFiles(files, batch_lines=10),
                               RedisMapState.transactional(None, "counts"), query_words=words,
                               record_commits=False)  # the query reads the RedisMapState itself
    conf = dict(redis_conf, **FAST, **{"topology.workers": 2,
                                       "trident.transactional.state": "memory"})
    obs = observe(conf, "transactional")
    lc = cluster(topo, conf, name="trident-query")
    lc.wait_for(lambda: obs.counts() == expected, timeout=60, what="exact counts in Redis")
    done = len(obs.list("reads"))

    def reads():
        out = collections.defaultdict(list)
        for r in obs.list("reads"):
            txid, word, count = json.loads(r)
            out[word].append(count)
        return out

    # Queries keep running after the counts are final: they must end at the exact totals.
    lc.wait_for(lambda: len(obs.list("reads")) >= done + 3 * len(words), timeout=10,
                what="reads after the counts are exact")
    seen = reads()
    for w in words:
        values = seen[w]
        assert values, f"no read of {w!r}"
        nums = [0 if v is None else v for v in values]
        assert nums == sorted(nums), f"{w}: reads went down: {values}"
        assert values[-1] == expected.get(w), (w, values[-1], expected.get(w))
    assert all(v is None for v in seen["absent"])
    growing = [v for v in seen["common"] if v not in (None, expected["common"])]
    assert growing, f"no read of 'common' while it was being counted: {seen['common']}"
    print(f"\nstate_query: {sum(map(len, seen.values()))} reads, {len(set(growing))} distinct "
          f"partial counts of 'common' before {expected['common']}")


# --- 3 + 4: a worker, then the coordinator's worker, killed -9 on a real cluster -----------------
#: ``squall jar PKG trident_faults STATE_TYPE INPUT_DIR [HOLD_TXID]``: the recorded word count
#: (no injected failures) over the .txt files of INPUT_DIR, transactional state in ZooKeeper;
#: with HOLD_TXID, a worker without the master coordinator blocks while it holds part of that
#: batch (trident_topos.FlakySplit), so the test kills a worker with a batch half-processed.
TRIDENT_FAULTS = '''
import glob
import os

from squall.client.submitter import submit_topology
from squall.client.trident.line_files import OpaqueLineFiles, TransactionalLineFiles
from squall.client.trident.state.redis_map import RedisMapState
from trident_topos import word_count_recorded


def main(args):
    state_type, input_dir, *hold = args
    files = sorted(glob.glob(os.path.join(input_dir, "*.txt")))
    spout = (OpaqueLineFiles if state_type == "opaque" else TransactionalLineFiles)(files, %d)
    factory = (RedisMapState.opaque if state_type == "opaque" else RedisMapState.transactional)
    submit_topology("trident-" + state_type, {"topology.workers": 2},
                    word_count_recorded(spout, factory(None, "counts"),
                                        hold_txid=int(hold[0]) if hold else None))
'''
BATCH_LINES = 5
#: Failover tuning as in test_cluster_lifecycle (dead workers seen and restarted within ~1-2 s).
FAILOVER = {"nimbus.monitor.freq.secs": 0.5, "nimbus.task.timeout.secs": 3,
            "nimbus.task.launch.secs": 10, "supervisor.heartbeat.frequency.secs": 0.5,
            "supervisor.monitor.frequency.secs": 1}


def worker_heartbeats(c: Cluster) -> list[tuple[object, dict]]:
    """(supervisor dir, heartbeat) of every worker directory (a dead worker's stays until its
    restart overwrites it)."""
    out = []
    for d in c.sup_dirs:
        for path in d.glob("workers/*/heartbeat.json"):
            try:
                out.append((d, json.loads(path.read_text())))
            except (OSError, ValueError):
                pass
    for _, hb in out:
        if "pid" in hb:
            c.worker_pids.add(int(hb["pid"]))
    return out


def components_of(hb: dict) -> set[str]:
    return {s.get("component") for s in hb.get("tasks", {}).values()}


def find_worker(c: Cluster, with_master: bool) -> tuple[object, int, set[str]]:
    """(supervisor dir, pid, components) of the live worker that runs (or does not run) the
    master coordinator."""
    def pick():
        for d, hb in worker_heartbeats(c):
            pid = int(hb.get("pid", 0))
            if pid and alive(pid) and hb.get("state") == "running" and \
                    (MASTER in components_of(hb)) == with_master:
                return d, pid, components_of(hb)
        return None
    return poll_for(pick, timeout=20, what=f"a worker {'with' if with_master else 'without'} "
                    f"{MASTER}\n" + c.logs())


def kill9(c: Cluster, sup_dir, pid: int) -> tuple[float, float]:
    """Kill -9 worker ``pid``; (the kill's monotonic time, seconds until its supervisor
    relaunched it)."""
    psutil.Process(pid).kill()
    t = time.monotonic()
    poll_for(lambda: worker_pids(sup_dir) - {pid} or None, timeout=15,
             what=f"the supervisor relaunching worker {pid}\n" + c.logs())
    return t, time.monotonic() - t


@pytest.fixture
def trident_cluster(tmp_path, zk_conf, redis_conf):
    """A real cluster whose workers get the test's Redis (trident.redis.*) from squall.yaml."""
    yield from started(Cluster(tmp_path, zk_conf, dict(redis_conf, **FAILOVER)))


@pytest.fixture
def zk_tx_state(zk_conf):
    """``zk_tx_state(name)``: topology ``name``'s transactional state in ZooKeeper (the
    spout's id: ``lines``; its namespace: that name, submitted by the CLI's user)."""
    made = []

    def state(name: str):
        made.append(make_tx_state("lines", dict(zk_conf, **{
            cfg.TOPOLOGY_NAME: name, cfg.TOPOLOGY_SUBMITTER_USER: "tester"})))
        return made[-1]
    yield state
    for st in made:
        st.close()


# The file's slowest tests (~12-15 s each, under the 30 s mark): a real cluster (Nimbus, two
# supervisors) starts, and the first kill -9 hits a worker while it holds part of a batch, which
# stalls the commits until that batch times out at the master (topology.message.timeout.secs=5)
# and is replayed in the restarted worker; that is the path under test. (A kill at a random
# moment need not lose anything: what ZeroMQ had not delivered yet reaches the restarted worker
# at the same address, and a worker between batches holds nothing.)
@pytest.mark.parametrize("state_type", ["transactional", "opaque"])
def test_worker_and_coordinator_kill9_still_count_exactly_once(trident_cluster, tmp_path,
                                                              redis_conf, observe, zk_tx_state,
                                                              state_type):
    c = trident_cluster
    zk_tx_state = zk_tx_state("trident-" + state_type)
    input_dir = tmp_path / "input"
    input_dir.mkdir()
    files, expected = write_input(input_dir, n_files=4, lines=400)  # 80 batches of 5 lines a file
    n_batches = 400 // BATCH_LINES
    hold_txid = n_batches // 5 + 2
    pkg = tmp_path / "tridentpkg"
    pkg.mkdir()
    shutil.copy(os.path.join(HERE, "trident_topos.py"), pkg / "trident_topos.py")
    (pkg / "trident_faults.py").write_text(TRIDENT_FAULTS % BATCH_LINES)
    obs = observe(redis_conf, state_type)

    def last_commit() -> int:
        return max((t for _, t, what in obs.commits() if what == "ok"), default=0)

    poll_for(lambda: "2 supervisor(s), 0/4 slots used" in c.run("list").stdout, timeout=20,
             what="2 supervisors registered\n" + c.logs())
    t0 = time.monotonic()
    args = [x for k, v in dict(FAST, **{"topology.stats.freq.secs": 0.2}).items()
            for x in ("-c", f"{k}={v}")]
    r = c.run("jar", str(pkg), "trident_faults", state_type, str(input_dir), str(hold_txid),
              *args)
    assert r.returncode == 0, r.stdout + r.stderr + c.logs()

    # (a) a worker running batch executors (not the coordinator's) killed -9 while it holds
    # part of batch hold_txid: that batch is lost with the process.
    poll_for(lambda: last_commit() >= n_batches // 5, timeout=40,
             what=f"txid {n_batches // 5} committed\n" + c.logs())
    first_commits = time.monotonic() - t0
    holding = poll_for(lambda: obs.list("holding"), timeout=40,
                       what=f"a worker holding txid {hold_txid}\n" + c.logs())
    victim = int(holding[0].split(":")[0])
    sup_dir, pid, comps = find_worker(c, with_master=False)
    assert pid == victim, (pid, victim, holding)
    assert last_commit() < hold_txid, "the held batch committed"
    at_kill1 = last_commit()
    t_kill1, restart1 = kill9(c, sup_dir, victim)
    # Commits wait for the lost batch: it times out at the (surviving) master, which fails it
    # and emits it again; the restarted worker processes the replay.
    poll_for(lambda: last_commit() >= hold_txid + n_batches // 5, timeout=40,
             what=f"commits past txid {hold_txid} after the worker's restart\n" + c.logs())
    resumed1 = time.monotonic() - t_kill1
    replayed = stats([hb for _, hb in worker_heartbeats(c)], MASTER, "failed")
    assert replayed >= 1, "the lost batch was never failed at the master"

    # (b) the master coordinator's worker killed -9: it continues from ZooKeeper's txid.
    sup_dir, coord, _ = find_worker(c, with_master=True)
    currtx = zk_tx_state.get_data("currtx")
    assert currtx and currtx > 1, currtx
    at_kill2, n_at_kill2 = last_commit(), len(obs.commits())
    assert obs.counts() != expected, "the input was all counted before the second kill"
    t_kill2, restart2 = kill9(c, sup_dir, coord)
    poll_for(lambda: last_commit() > at_kill2, timeout=40,
             what=f"commits past txid {at_kill2} after the coordinator's restart\n" + c.logs())
    resumed2 = time.monotonic() - t_kill2
    poll_for(lambda: obs.counts() == expected, timeout=60,
             what=f"exact counts (now {obs.counts()})\n" + c.logs())
    exact = time.monotonic() - t_kill2

    commits = obs.commits()
    check_commit_order(commits, partitions=2, replays_allowed=True)
    # The restarted coordinator went on from the txid it had persisted, not from txid 1: every
    # commit recorded after the kill is of that txid or a later one (every partition had
    # committed txid currtx - 1 before the coordinator wrote currtx).
    after = [t for _, t, what in commits[n_at_kill2:] if what == "ok"]
    assert after and min(after) >= currtx, (currtx, after)
    poll_for(lambda: zk_tx_state.get_data("currtx") > max(after), timeout=10,
             what=f"currtx in ZooKeeper past the last commit ({max(after)})")
    print(f"\n{state_type}: first {n_batches // 5} txids committed {first_commits:.2f} s "
          f"after submit; worker kill -9 ({', '.join(sorted(comps))}) holding txid "
          f"{hold_txid} at txid {at_kill1}: "
          f"restarted {restart1:.2f} s, {replayed} batch tree(s) failed and replayed, commits "
          f"resumed (+{n_batches // 5} txids) {resumed1:.2f} s after the kill; "
          f"coordinator kill -9 at txid {at_kill2} (currtx {currtx}): restarted "
          f"{restart2:.2f} s, commits resumed {resumed2:.2f} s, counts exact "
          f"{exact:.2f} s after the kill; total {time.monotonic() - t0:.2f} s")


def test_rebalance_mid_run_still_counts_exactly_once(trident_cluster, tmp_path, redis_conf,
                                                     observe):
    """`squall rebalance -n 3` of a running Trident topology: its workers are reassigned and
    restarted; the batches in flight replay and every word still counts once."""
    c = trident_cluster
    input_dir = tmp_path / "input"
    input_dir.mkdir()
    files, expected = write_input(input_dir, n_files=4, lines=400)
    pkg = tmp_path / "tridentpkg"
    pkg.mkdir()
    shutil.copy(os.path.join(HERE, "trident_topos.py"), pkg / "trident_topos.py")
    (pkg / "trident_faults.py").write_text(TRIDENT_FAULTS % BATCH_LINES)
    obs = observe(redis_conf, "transactional")
    poll_for(lambda: "2 supervisor(s), 0/4 slots used" in c.run("list").stdout, timeout=20,
             what="2 supervisors registered\n" + c.logs())
    args = [x for k, v in dict(FAST, **{"topology.stats.freq.secs": 0.2}).items()
            for x in ("-c", f"{k}={v}")]
    r = c.run("jar", str(pkg), "trident_faults", "transactional", str(input_dir), *args)
    assert r.returncode == 0, r.stdout + r.stderr + c.logs()
    poll_for(lambda: any(what == "ok" and t >= 10 for _, t, what in obs.commits()), timeout=40,
             what="txid 10 committed\n" + c.logs())
    assert obs.counts() != expected, "the input was all counted before the rebalance"
    r = c.run("rebalance", "trident-transactional", "-w", "1", "-n", "3")
    assert r.returncode == 0, r.stdout + r.stderr
    t0 = time.monotonic()
    poll_for(lambda: c.listed()["trident-transactional"][2:4] == ["ACTIVE", "3"], timeout=20,
             what="3 workers after the rebalance\n" + c.logs())
    poll_for(lambda: obs.counts() == expected, timeout=60,
             what="exact counts after the rebalance\n" + c.logs())
    check_commit_order(obs.commits(), partitions=2, replays_allowed=True)
    print(f"\nrebalance -n 3 mid-run: counts exact {time.monotonic() - t0:.2f} s after it")
