"""ZooKeeper fixtures and helpers for tests that need real cluster state.

Fixtures (registered through ``tests/conftest.py``):

``zookeeper``      session-scoped :class:`~squall.deploy.zookeeper.LocalZooKeeper`, started once on a
                   free loopback port (tick 500 ms) and stopped by pid at the end; the test is skipped,
                   with the reason, only if Debian's ``zookeeper`` package (or java) is not installed.
``zk_conf``        a conf dict pointing at it with a unique ``storm.zookeeper.root``
                   (``/squall-test-<hex>``), a random ``storm.zookeeper.auth.payload`` (every
                   node gets digest ACLs, as on a real cluster) and short timeouts; give it
                   to daemons under test.
``cluster_state``  a connected :class:`~squall.client.zk_cluster_state.KazooClusterState` on
                   ``zk_conf``, closed at teardown; if the test failed, ZooKeeper's log tail is printed.

Helpers to import (``from zk_fixtures import poll_for, expire_session``): :func:`poll_for` waits,
bounded, for a predicate; :func:`expire_session` makes ZooKeeper expire a client's session.
"""

from __future__ import annotations

import time
import uuid
from typing import Callable

import pytest
from kazoo.client import KazooClient

from squall.client.cluster_state import ZooKeeperUnavailable
from squall.client.zk_cluster_state import KazooClusterState
from squall.deploy.zookeeper import LocalZooKeeper, installation

#: Session timeout for test clients, seconds (the server allows 1..10 s with tick 500 ms).
TEST_SESSION_TIMEOUT = 4.0


def poll_for(predicate: Callable[[], object], timeout: float = 10.0, interval: float = 0.05,
             what: str = "condition") -> object:
    """Return ``predicate()``'s first truthy value; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def expire_session(state: KazooClusterState, timeout: float = 10.0) -> None:
    """Make ZooKeeper expire ``state``'s session (it will see LOST, then CONNECTED on a new one).

    The technique of Curator's ``KillSession`` and kazoo's tests: a second client
    joins the same session id and password and closes it, which ends the
    session on the server; the first client learns it when it reconnects.
    """
    session_id, password = state._client.client_id
    killer = KazooClient(hosts=state.address, client_id=(session_id, password),
                         timeout=TEST_SESSION_TIMEOUT)
    killer.start(timeout=timeout)
    killer.stop()
    killer.close()


@pytest.fixture(scope="session")
def zookeeper():
    """One LocalZooKeeper for the whole test session."""
    try:
        installation()
    except ZooKeeperUnavailable as e:
        pytest.skip(str(e))
    zk = LocalZooKeeper(tick_time_ms=500)
    zk.start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def zk_conf(zookeeper) -> dict:
    """Conf for this test: the session's ZooKeeper, a root of its own, short timeouts."""
    conf = zookeeper.conf(root=f"/squall-test-{uuid.uuid4().hex[:12]}")
    conf.update({"storm.zookeeper.auth.payload": f"squall:{uuid.uuid4().hex}",  # locked ZK
                 "storm.zookeeper.connection.timeout": 10_000,
                 "storm.zookeeper.session.timeout": int(TEST_SESSION_TIMEOUT * 1000),
                 "storm.zookeeper.retry.interval": 100,
                 "storm.zookeeper.retry.intervalceiling.millis": 1000})
    return conf


@pytest.fixture
def cluster_state(request, zookeeper, zk_conf):
    """A KazooClusterState on this test's root, closed afterwards."""
    failed_before = request.session.testsfailed
    state = KazooClusterState(zk_conf)
    try:
        yield state
    finally:
        state.close()
        if request.session.testsfailed > failed_before:
            # Captured output of a passing teardown is not shown, so write past the capture.
            reporter = request.config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(f"\n--- ZooKeeper {zookeeper.connect_string} log tail "
                                    f"({request.node.nodeid}) ---\n{zookeeper.log_tail(30)}")
