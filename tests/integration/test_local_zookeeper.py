"""LocalZooKeeper: a second private server with its own dir, stopped by pid; clear failures."""

from __future__ import annotations

import os

import pytest

from squall.client.cluster_state import ZooKeeperUnavailable
from squall.deploy.zookeeper import LocalZooKeeper, four_letter_word

pytestmark = pytest.mark.integration


def test_start_serve_and_stop_by_pid(zookeeper, tmp_path):
    with LocalZooKeeper(str(tmp_path / "zk")) as zk:
        pid = zk.pid
        assert zk.ruok() and zk.port != zookeeper.port
        assert zk.connect_string == f"127.0.0.1:{zk.port}"
        assert "Mode: standalone" in four_letter_word("127.0.0.1", zk.port, "srvr")
    assert zk.pid is None and not zk.running() and not zk.ruok()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert (tmp_path / "zk" / "zoo.cfg").exists()  # a given directory is kept
    assert "binding to port" in zk.log_tail(200)
    zk.stop()  # idempotent


def test_a_server_that_cannot_bind_fails_with_its_log(zookeeper):
    zk = LocalZooKeeper(port=zookeeper.port, start_timeout=20)
    with pytest.raises(ZooKeeperUnavailable, match="exited with code") as info:
        zk.start()
    assert "Address already in use" in str(info.value)
    assert zk.pid is None and zk.dir is None  # its temporary dir is gone
    assert zookeeper.ruok()


CHILD = """
import sys, time
from squall.deploy.redis import LocalRedis
from squall.deploy.zookeeper import LocalZooKeeper
z = LocalZooKeeper(sys.argv[1], tick_time_ms=500).start()
r = LocalRedis(sys.argv[2]).start()
print(z.pid, r.pid, flush=True)
time.sleep(120)
"""


def test_private_servers_die_with_a_process_killed_outright(zookeeper, redis_server, tmp_path):
    """SIGKILL skips every exit hook (a `squall local` killed -9, a test run killed by a
    timeout): its ZooKeeper and Redis used to stay running. The kernel now sends them
    SIGTERM."""
    import subprocess
    import sys

    import psutil

    from zk_fixtures import poll_for
    parent = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path / "zk"),
                               str(tmp_path / "redis")], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in parent.stdout.readline().split()]
        assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()

    def gone(pid):
        return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    poll_for(lambda: all(gone(p) for p in pids), timeout=15,
             what=f"ZooKeeper and Redis (pids {pids}) gone with their parent")
