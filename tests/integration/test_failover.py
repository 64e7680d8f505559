"""Supervisor failover on a real cluster: ZooKeeper, `squall nimbus` and two `squall supervisor`
s of 2 slots each as processes; `kill -9` of one supervisor and its workers moves all workers
to the other within nimbus.task.timeout.secs + nimbus.monitor.freq.secs, and acks keep growing."""

from __future__ import annotations

import glob
import json
import os
import time

import psutil
import pytest

from test_cli_cluster import Cluster, alive, started
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

TASK_TIMEOUT, MONITOR = 3, 0.5


@pytest.fixture
def cluster(tmp_path, zk_conf):
    yield from started(Cluster(tmp_path, zk_conf, {
        "nimbus.monitor.freq.secs": MONITOR, "nimbus.task.timeout.secs": TASK_TIMEOUT,
        "nimbus.task.launch.secs": 10, "supervisor.heartbeat.frequency.secs": 0.5,
        "supervisor.monitor.frequency.secs": 1}))


def worker_pids(sup_dir):
    pids = set()
    for path in glob.glob(str(sup_dir / "workers" / "*" / "heartbeat.json")):
        try:
            with open(path) as fh:
                pids.add(int(json.load(fh)["pid"]))
        except (OSError, ValueError, KeyError):
            pass
    return pids


def test_supervisor_kill9_moves_workers(cluster):
    c = cluster
    t0 = time.monotonic()
    c.submit_word_count()
    poll_for(lambda: c.acked() > 500, timeout=20, what="500 acks\n" + c.logs())
    # The word count runs 2 workers, one per supervisor (spread).
    victims = worker_pids(c.sup_dirs[0])
    assert len(victims) == 1 and len(worker_pids(c.sup_dirs[1])) == 1, c.logs()
    sup = c.procs["supervisor1"]
    sup.kill()  # kill -9 the supervisor ...
    sup.wait()
    for pid in victims:  # ... and its workers
        psutil.Process(pid).kill()
    t_kill = time.monotonic()
    survivor_dir = c.sup_dirs[1]

    def moved():
        dirs = [d for d in glob.glob(str(survivor_dir / "workers" / "*"))
                if os.path.exists(os.path.join(d, "assignment.json"))]
        return len(dirs) == 2 or None

    poll_for(moved, timeout=TASK_TIMEOUT + MONITOR + 5,
             what="both workers assigned to supervisor2\n" + c.logs())
    failover = time.monotonic() - t_kill
    assert failover <= TASK_TIMEOUT + MONITOR + 2.5, failover
    # Only the survivor's heartbeats count now; acks keep growing past the failover.
    c.sup_dirs = [survivor_dir]
    poll_for(lambda: len(worker_pids(survivor_dir)) == 2, timeout=15,
             what="2 workers running on supervisor2\n" + c.logs())
    base = c.acked()
    poll_for(lambda: c.acked() > base + 500, timeout=20,
             what="acks after failover\n" + c.logs())
    assert not any(alive(p) for p in victims)
    print(f"\nfailover (kill -9 -> assignment moved) {failover:.2f} s; "
          f"total {time.monotonic() - t0:.1f} s")
