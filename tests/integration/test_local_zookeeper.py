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
