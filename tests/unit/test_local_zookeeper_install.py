"""LocalZooKeeper names what is missing when ZooKeeper is not installed (no JVM is started);
deploy/install-zookeeper.sh makes the cluster's credentials once and listens on loopback by
default."""

from __future__ import annotations

import os
import re
import stat
import subprocess

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


# --- deploy/install-zookeeper.sh, staged under DESTDIR (no apt-get, no service, no sudo) ----
SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "deploy", "install-zookeeper.sh")


def install(destdir, *args: str) -> subprocess.CompletedProcess:
    with open(SCRIPT) as fh:  # a script without the seam would install on this machine
        assert "DESTDIR" in fh.read(), "install-zookeeper.sh cannot stage under DESTDIR"
    return subprocess.run(["bash", SCRIPT, *args], env=dict(os.environ, DESTDIR=str(destdir)),
                          capture_output=True, text=True, timeout=60)


def test_install_makes_the_credentials_once_and_prints_the_payload_line(tmp_path):
    first = install(tmp_path)
    assert first.returncode == 0, first.stderr
    [line] = [x for x in first.stdout.splitlines() if x.startswith("storm.zookeeper.auth.payload")]
    payload = re.fullmatch(r'storm.zookeeper.auth.payload: "(squall:[0-9a-f]{64})"', line)[1]
    creds = tmp_path / "etc/squall/zookeeper/credentials"
    assert creds.read_text() == payload + "\n"
    assert stat.S_IMODE(creds.stat().st_mode) == 0o600
    # Only this host by default: a cluster passes its private address.
    zoo_cfg = tmp_path / "etc/squall/zookeeper/zoo.cfg"
    assert "clientPortAddress=127.0.0.1\n" in zoo_cfg.read_text()

    creds.chmod(0o644)
    again = install(tmp_path, "2181", "10.0.0.1")
    assert again.returncode == 0, again.stderr
    assert line in again.stdout.splitlines() and "credentials kept" in again.stdout
    assert creds.read_text() == payload + "\n" and stat.S_IMODE(creds.stat().st_mode) == 0o600
    assert "clientPortAddress=10.0.0.1\n" in zoo_cfg.read_text()


def test_install_refuses_credentials_it_cannot_read(tmp_path):
    creds = tmp_path / "etc/squall/zookeeper/credentials"
    creds.parent.mkdir(parents=True)
    creds.write_text("no-password-here\n")
    r = install(tmp_path)
    assert r.returncode != 0 and "does not hold user:password" in r.stderr
    assert creds.read_text() == "no-password-here\n"  # never replaced behind the admin's back
