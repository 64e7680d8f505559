"""Kafka lag as Storm shows it: the UI's /api/v1/topology/:id/lag against the broker's own
figures, a bounded answer when the broker is absent, and the spout's squall_kafka_* gauges
through the supervisor's Prometheus collector."""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from cluster_helpers import kill_and_wait
from kafka_fixtures import broker_gets_right, committed, local_cluster, produce
from squall.client import TopologyBuilder
from squall.client.web import read_token
from squall.connectors.kafka import KafkaSpout, KafkaSpoutConfig
from squall.deploy.net import free_port
from squall.supervisor.metrics import WorkerCollector
from squall.ui.kafka_lag import LAG_DEADLINE_SECS
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))
COMMIT_MS = 300


@pytest.fixture(scope="module")
def web(tmp_path_factory, kafka_broker):
    with local_cluster(str(tmp_path_factory.mktemp("kafka-lag")), kafka_broker, web=True) as lc:
        yield lc


def api(lc, path, timeout=30):
    req = urllib.request.Request(f"{lc.ui.url}/api/v1/{path}")
    req.add_header("Authorization", f"Bearer {read_token(lc.conf)}")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def topology(config):
    from kafka_topos import OffsetRecorder
    b = TopologyBuilder()
    b.set_spout("kafka", KafkaSpout(config), 2)
    b.set_bolt("rec", OffsetRecorder(), 1).shuffle_grouping("kafka")
    return b.create_topology()


@pytest.mark.skipif(not broker_gets_right("watermarks"), reason="Tansu's high watermark is wrong")
def test_the_lag_endpoint_gives_the_brokers_own_figures(web, kafka_broker, tmp_path):
    bs = kafka_broker.bootstrap_servers
    topic = f"lag-{os.urandom(3).hex()}"
    kafka_broker.create_topic(topic, 3)
    end = produce(bs, topic, [b"x%d" % i for i in range(300)], partitions=3)
    (tmp_path / "events").mkdir()
    tid = web.submit("lag", topology(KafkaSpoutConfig(
        topics=[topic], offset_commit_period_ms=COMMIT_MS)),
        {"test.events.dir": str(tmp_path / "events")}, HERE)
    group = "squall-lag-kafka"  # the default group: squall-<topology name>-<component>
    try:
        poll_for(lambda: {p: c[0] for p, c in committed(bs, group, topic, 3).items()} == end,
                 timeout=30, interval=0.3, what="every record committed")
        with web.client() as nimbus:
            nimbus.deactivate("lag")  # the spout commits and stops reading
        more = produce(bs, topic, [b"y%d" % i for i in range(40)], partitions=3)
        lag = api(web, f"topology/{tid}/lag")
        spout = lag["kafka"]
        assert spout["spoutId"] == "kafka" and spout["spoutType"] == "KAFKA", lag
        result = spout["spoutLagResult"][topic]
        broker = committed(bs, group, topic, 3)
        for p in range(3):
            row = result[str(p)]
            assert row["consumerCommittedOffset"] == broker[p][0] == end[p]
            assert row["logHeadOffset"] == more[p]
            assert row["lag"] == more[p] - end[p]
        assert sum(r["lag"] for r in result.values()) == 40
    finally:
        kill_and_wait(web, "lag")


def test_an_absent_broker_gives_an_error_within_the_deadline(web, tmp_path):
    where = f"127.0.0.1:{free_port('127.0.0.1')}"
    (tmp_path / "events").mkdir()
    tid = web.submit("lag-absent", topology(KafkaSpoutConfig(
        where, topics=["t"], request_timeout_secs=1)),
        {"test.events.dir": str(tmp_path / "events")}, HERE, initial_status="INACTIVE")
    try:
        t0 = time.monotonic()
        lag = api(web, f"topology/{tid}/lag", timeout=LAG_DEADLINE_SECS + 10)
        took = time.monotonic() - t0
        assert "errorInfo" in lag["kafka"] and where in lag["kafka"]["errorInfo"], lag
        assert took < LAG_DEADLINE_SECS + 3, took
    finally:
        kill_and_wait(web, "lag-absent")


def test_the_spout_exports_its_offsets_as_squall_kafka_gauges(cluster, kafka_broker,
                                                              kafka_topic):
    bs = kafka_broker.bootstrap_servers
    topic = kafka_topic(partitions=2)
    end = produce(bs, topic, [b"z%d" % i for i in range(100)], partitions=2)
    lc = cluster(topology(KafkaSpoutConfig(bs, topics=[topic], group_id=f"g-{topic}",
                                           offset_commit_period_ms=COMMIT_MS,
                                           partition_refresh_period_ms=300)))

    class W:  # what the supervisor's collector reads of a worker
        def __init__(self, w):
            self.topology_id, self.port, self.pid, self.worker_dir = \
                lc.topology_id, w.dir.rsplit("-", 1)[1], w.proc.pid, w.dir

    def scrape():
        reg = CollectorRegistry()
        reg.register(WorkerCollector(lambda: [W(w) for w in lc.workers], "127.0.0.1",
                                     lambda: 60.0))
        fams = {f.name: f for f in text_string_to_metric_families(
            generate_latest(reg).decode())}
        return {(s.labels["topic"], s.labels["partition"]): s.value
                for s in fams["squall_kafka_lag"].samples} if "squall_kafka_lag" in fams \
            else {}, fams

    lc.wait_for(lambda: scrape()[0] == {(topic, "0"): 0.0, (topic, "1"): 0.0}, timeout=30,
                what="lag 0 on both partitions")
    _, fams = scrape()
    labels = {"topology", "topology_id", "component", "task", "host", "port", "topic",
              "partition"}
    for name in ("squall_kafka_log_end_offset", "squall_kafka_committed_offset",
                 "squall_kafka_log_start_offset", "squall_kafka_records_in_partition",
                 "squall_kafka_emitted_offset"):
        samples = fams[name].samples
        assert samples and all(set(s.labels) == labels for s in samples), name
    ends = {int(s.labels["partition"]): s.value for s in fams["squall_kafka_committed_offset"].samples}
    assert ends == {p: float(e) for p, e in end.items()}


def test_an_unknown_topic_shows_in_squall_list_and_the_ui_within_seconds(web, tmp_path):
    """The spout's report reaches Nimbus: `squall list`'s last-error line and the UI's
    errors name the missing topic."""
    from squall.cli.commands import list_topologies
    (tmp_path / "events").mkdir()
    tid = web.submit("lag-unknown", topology(KafkaSpoutConfig(
        topics=["no-such-topic-xyz"], partition_refresh_period_ms=500)),
        {"test.events.dir": str(tmp_path / "events")}, HERE)
    try:
        lines: list[str] = []

        def listed():
            lines.clear()
            list_topologies(dict(web.conf), lines.append)
            return any("no-such-topic-xyz" in line for line in lines)
        # Reported at the spout's first refresh, sent with the next heartbeats (1 s here).
        poll_for(listed, timeout=15, interval=0.5, what="the error in squall list")
        line = next(x for x in lines if "no-such-topic-xyz" in x)
        assert "last error" in line and "in kafka" in line and "not found" in line, line
        errors = api(web, f"topology/{tid}")["errors"]
        assert any("no-such-topic-xyz" in e["error"] for e in errors), errors
    finally:
        kill_and_wait(web, "lag-unknown")
