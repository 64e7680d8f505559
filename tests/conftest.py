"""Shared fixtures: a factory for local clusters of real worker processes, stopped by pid."""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
INTEGRATION = os.path.join(HERE, "integration")


@pytest.fixture
def cluster(tmp_path):
    """``cluster(topology, conf)`` starts a StaticCluster; every worker is stopped at teardown."""
    from squall.deploy.static import StaticCluster

    started = []
    events = tmp_path / "events"
    events.mkdir()

    def start(topology, conf=None, name="test", initial_status="ACTIVE"):
        full = {"topology.workers": 2, "topology.stats.freq.secs": 0.2,
                "test.events.dir": str(events)}
        full.update(conf or {})
        lc = StaticCluster(name, topology, full, code_paths=[INTEGRATION],
                          base_dir=str(tmp_path / f"cluster{len(started)}"),
                          initial_status=initial_status)
        started.append(lc)
        lc.events_dir = str(events)
        lc.start()
        return lc

    yield start
    for lc in started:
        lc.stop(drain_secs=0, grace=5)
        for w in lc.workers:
            assert w.proc.poll() is not None, f"worker pid {w.proc.pid} still running"


if INTEGRATION not in sys.path:
    sys.path.insert(0, INTEGRATION)

#: Files whose tests take minutes in all (Spark's JVMs, whole squall local runs, clusters
#: killed and restarted), longest first. scripts/test.sh runs the suite on two processes, a
#: file at a time in collection order: these go first, so the short ones fill the gaps and
#: the two end together instead of one running the Spark file alone at the end.
LONGEST_FIRST = ("test_spark_bridge.py", "test_cli_local.py", "test_cluster_lifecycle.py",
                 "test_ui_browser.py", "test_spark_standalone.py", "test_cli_cluster.py",
                 "test_abuse.py", "test_trident_exactly_once.py", "test_kafka_faults.py",
                 "test_stateful_faults.py", "test_wheel_install.py", "test_kafka_trident.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank))  # stable: files intact
               if item.path.parent.name == "integration" else len(rank))

# ZooKeeper fixtures `zookeeper` (session), `zk_conf`, `cluster_state`: see tests/zk_fixtures.py.
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from zk_fixtures import cluster_state, zk_conf, zookeeper  # noqa: E402,F401
# Redis fixtures `redis_server` (session), `redis_conf`: see tests/redis_fixtures.py.
from redis_fixtures import redis_conf, redis_server  # noqa: E402,F401
# Kafka fixtures `kafka_broker` (session), `kafka_topic`: see tests/kafka_fixtures.py.
from kafka_fixtures import kafka_broker, kafka_topic  # noqa: E402,F401
# PostgreSQL fixtures `postgres` (session), `pg`, `pg_table`: see tests/postgres_fixtures.py.
from postgres_fixtures import pg, pg_table, postgres  # noqa: E402,F401
# NATS fixtures `nats_server` (session), `nats_stream`: see tests/nats_fixtures.py.
from nats_fixtures import nats_server, nats_stream  # noqa: E402,F401
