"""LocalZooKeeper names what is missing when ZooKeeper is not installed (no JVM is started)."""

from __future__ import annotations

import pytest

from squall.client.errors import SquallError
from squall.deploy import zookeeper as zkmod


def test_missing_java_is_named(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(zkmod.ZooKeeperUnavailable) as info:
        zkmod.LocalZooKeeper().start()
    assert isinstance(info.value, SquallError)
    assert "missing java" in str(info.value)
    assert "install Debian's zookeeper package: bash scripts/setup.sh" in str(info.value)


def test_missing_jar_is_named(monkeypatch, tmp_path):
    monkeypatch.delenv(zkmod.CLASSPATH_ENV, raising=False)
    monkeypatch.setattr(zkmod, "ZOOKEEPER_JAR", str(tmp_path / "zookeeper.jar"))
    hint = r"zookeeper.jar \(or set \$SQUALL_ZOOKEEPER_CLASSPATH\); install Debian's"
    with pytest.raises(zkmod.ZooKeeperUnavailable, match=hint):
        zkmod.installation()


def test_not_started_has_no_address():
    zk = zkmod.LocalZooKeeper()
    assert zk.pid is None and not zk.ruok() and zk.log_tail() == ""
    with pytest.raises(zkmod.ZooKeeperUnavailable, match="not started"):
        zk.connect_string
