"""What a careless user or a stranger sends must not take the control plane down (issue 23):
each probe runs against a real cluster (ZooKeeper, Nimbus, two supervisors, workers) while
another topology runs, which must keep running where it is, with Nimbus keeping its
leadership and the supervisors' reports getting through."""

from __future__ import annotations

import pytest

from squall.client.contract import MAX_ERROR_CHARS
from squall.client.errors import InvalidRequest
from squall.client.nimbus_client import NimbusClient
from test_cli_cluster import Cluster, started
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

#: A bolt that reports (without dying) an exception with a message of about 1 MB on each
#: of 30 tuples: more than the heartbeat file's last 20 and a component's last 10 errors.
LOUD = '''
from squall.client import Bolt, Spout, TopologyBuilder


class Numbers(Spout):
    def open(self, conf, context, collector):
        self.collector, self.n = collector, 0

    def next_tuple(self):
        if self.n < 30:
            self.n += 1
            self.collector.emit([self.n], msg_id=self.n)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class Loud(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.report_error(ValueError("x" * 1_000_000 + f" number {tup.values[0]}"))
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        pass


NAME = "loud"
CONF = {"topology.workers": 1, "topology.max.spout.pending": 1}


def topology():
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers())
    b.set_bolt("loud", Loud()).shuffle_grouping("numbers")
    return b
'''


@pytest.fixture
def cluster(tmp_path, zk_conf):
    yield from started(Cluster(tmp_path, zk_conf, {"supervisor.heartbeat.frequency.secs": 1}))


def word_count_slots(c: Cluster) -> set:
    with NimbusClient(c.conf, timeout=10) as nimbus:
        info = nimbus.topology_info(name="word-count")
    return {(e.host, e.port) for e in info.executors}


def test_megabyte_errors_and_log_configs_leave_the_control_plane_standing(cluster):
    c = cluster
    c.submit_word_count()
    poll_for(lambda: c.acked() > 100, timeout=30, what="word-count acking\n" + c.logs())
    slots = word_count_slots(c)
    pids = {int(hb["pid"]) for hb in c.heartbeats()}

    loud = c.tmp / "loud" / "loud.py"
    loud.parent.mkdir()
    loud.write_text(LOUD)
    r = c.run("jar", str(loud))
    assert r.returncode == 0, r.stdout + r.stderr

    # The errors reach `squall list` cut where they were made, saying how long they were.
    def last_error():
        out = c.run("list").stdout
        return out if "number 30" in out or "characters in all" in out else None
    out = poll_for(last_error, timeout=30, what="loud's error in squall list\n" + c.logs())
    assert "loud: last error" in out and "ValueError: xxxx" in out, out
    with NimbusClient(c.conf, timeout=10) as nimbus:
        poll_for(lambda: len(nimbus.topology_info(name="loud").errors) >= 10, timeout=30,
                 what="loud's last 10 errors stored")
        errors = nimbus.topology_info(name="loud").errors
        assert all(len(e.error) <= MAX_ERROR_CHARS for e in errors), \
            [len(e.error) for e in errors]
        assert all("[cut: 1,000,0" in e.error and "characters in all" in e.error
                   for e in errors), errors[0].error[-200:]

        # A log config of 1.2 MB of logger names is refused with the reason, not stored.
        names = {f"logger.{i}.{'n' * 100}": ("DEBUG", 0) for i in range(12_000)}
        with pytest.raises(InvalidRequest, match="at most 256 may be set"):
            nimbus.set_log_config("word-count", names)
        with pytest.raises(InvalidRequest, match="a name has 1 to 256"):
            nimbus.set_log_config("word-count", {"n" * 100_000: ("DEBUG", 0)})

        # Reports keep getting through after the errors: the acks Nimbus knows of (from the
        # supervisors' reports, one a second) go on rising, three reports' worth.
        def reported_acks():
            return sum(e.acked for e in nimbus.topology_info(name="word-count").executors
                       if e.component_id == "sentences")
        seen = [reported_acks()]
        poll_for(lambda: seen.append(reported_acks()) or len(set(seen)) > 3, timeout=30,
                 interval=0.5, what="word-count's acks reported rising")
        assert seen == sorted(seen), seen

    # Nimbus never lost its leadership, no report failed, and the other topology still runs
    # where it ran, on the same processes.
    logs = {p.name: p.read_text(errors="replace") for p in c.tmp.glob("*.log")}
    assert logs["nimbus.log"].count("is the leader") == 1, logs["nimbus.log"][-3000:]
    for name in ("supervisor1.log", "supervisor2.log"):
        assert "cannot send worker heartbeats" not in logs[name], logs[name][-3000:]
    assert word_count_slots(c) == slots
    running = {int(hb["pid"]) for hb in c.heartbeats()
               if hb.get("topology_id", "").startswith("word-count")}
    assert running == pids, (pids, running)


#: A spout whose next_tuple never returns (a socket read without a timeout, say).
BLOCKED = '''
import time

from squall.client import Bolt, Spout, TopologyBuilder


class Blocker(Spout):
    def open(self, conf, context, collector):
        self.collector = collector

    def next_tuple(self):
        time.sleep(3600)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class Sink(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.ack(tup)


NAME = "blocked"
CONF = {"topology.workers": 1, "topology.executor.stall.secs": 1}


def topology():
    b = TopologyBuilder()
    b.set_spout("blocker", Blocker())
    b.set_bolt("sink", Sink()).shuffle_grouping("blocker")
    return b
'''


def test_a_spout_stuck_in_next_tuple_shows_in_the_topologys_health(cluster):
    c = cluster
    poll_for(lambda: "2 supervisor(s)" in c.run("list").stdout, timeout=20,
             what="2 supervisors registered\n" + c.logs())
    path = c.tmp / "blocked" / "blocked.py"
    path.parent.mkdir()
    path.write_text(BLOCKED)
    r = c.run("jar", str(path))
    assert r.returncode == 0, r.stdout + r.stderr

    def health():
        rows = c.listed()
        return rows["blocked"][7] if "blocked" in rows and "stalled" in rows["blocked"][7] \
            else None
    # The stall bound (1 s), a stats period, a supervisor report (1 s) and a listing.
    line = poll_for(health, timeout=30, what="the stall in squall list\n" + c.logs())
    assert "stalled: spout blocker: next_tuple has not returned for" in line, line
    assert "(on 127.0.0." in line, line
    sups = "".join(p.read_text(errors="replace") for p in c.tmp.glob("sup*/logs/blocked-*.log"))
    assert "stalled: spout blocker: next_tuple has not returned for" in sups, c.logs()
