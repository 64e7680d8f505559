"""JetStreamSpout through faults, against real NATS servers: a spout's worker killed with
SIGKILL under a LocalCluster (its supervisor restarts it) and the NATS server itself
stopped and started again on its store mid-run. At least once: every message processed,
and the consumer ends with nothing pending and nothing unacknowledged."""

from __future__ import annotations

import collections
import os
import signal

import pytest

from cluster_helpers import kill_and_wait, worker_heartbeats
from nats_topos import reader
from squall.deploy.nats import LocalNats
from topos import events_of
from zk_fixtures import poll_for

pytestmark = pytest.mark.integration

HERE = os.path.dirname(os.path.abspath(__file__))

#: The topologies' tuple timeout, which is also the consumer's ack_wait: what a killed
#: worker held is delivered again after it.
TIMEOUT_SECS = 3


def publish(server, subject, n):
    return server.publish(subject, [f"message {i}".encode() for i in range(n)])


def settled(server, stream, consumer, n):
    try:
        info = server.consumer_info(stream, consumer)
    except Exception:  # not made yet, or the server restarting
        return False
    return info["num_pending"] == 0 and info["num_ack_pending"] == 0 and \
        info["ack_floor"]["stream_seq"] == n


@pytest.fixture(scope="module")
def local(tmp_path_factory, nats_server):
    """ZooKeeper, Nimbus and a supervisor that restarts killed workers, its topologies
    pointed at the session's NATS."""
    from squall.deploy.local import LocalCluster
    lc = LocalCluster({"topology.stats.freq.secs": 0.2, **nats_server.conf()}, slots=4,
                      base_dir=str(tmp_path_factory.mktemp("nats-local")))
    try:
        lc.start()
        yield lc
    finally:
        lc.close("test done")


def test_kill_9_of_a_spouts_worker_loses_no_message(local, nats_stream, tmp_path):
    n = 10_000
    seqs = publish(nats_stream.server, nats_stream.subject("m"), n)
    events = tmp_path / "events"
    events.mkdir()
    name = "nats-kill"
    local.submit(name, reader(nats_stream.name).create_topology(),
                 {"topology.workers": 2, "test.events.dir": str(events),
                  "topology.message.timeout.secs": TIMEOUT_SECS,
                  "topology.max.spout.pending": 200}, HERE)
    try:
        def victim():
            """A worker whose spout task has trees in flight (emitted, not yet acked: its
            messages delivered and unacknowledged), once both tasks emitted some."""
            tasks = {int(hb["pid"]): t for hb in worker_heartbeats(local)
                     for t in hb.get("tasks", {}).values() if t.get("component") == "messages"}
            if len(tasks) != 2 or not all(t.get("emitted", 0) for t in tasks.values()):
                return None
            held = {pid: t.get("emitted", 0) - t.get("acked", 0) for pid, t in tasks.items()}
            pid = max(held, key=held.get)
            return pid if held[pid] >= 20 else None

        chosen: list[int] = []

        def ready() -> bool:
            pid = len(events_of(str(events), "sink", "got")) > n // 5 and victim()
            if pid:
                chosen.append(pid)
            return bool(pid)

        poll_for(ready, timeout=60, interval=0.1,
                 what="a fifth of the messages, from both spout tasks, some in flight")
        processed_at_kill = len(events_of(str(events), "sink", "got"))
        os.kill(chosen[0], signal.SIGKILL)  # it holds delivered, unacknowledged messages
        # What the dead process had fetched and not acknowledged is delivered again after
        # ack_wait, to the other worker's task or to its restarted one.
        poll_for(lambda: settled(nats_stream.server, nats_stream.name, "squall-" + name, n),
                 timeout=60 + 4 * TIMEOUT_SECS, interval=0.5,
                 what="every message acknowledged after the kill")
        got = collections.Counter(int(s) for s in events_of(str(events), "sink", "got"))
        missing = set(seqs) - set(got)
        assert not missing, f"{len(missing)} messages never processed, e.g. {sorted(missing)[:5]}"
        assert processed_at_kill < n  # the kill fell mid-run
        # Deliveries beyond n: what the dead worker held was delivered again. Usually some;
        # none when the kill fell between a fetch's acks and the next fetch (its heartbeat
        # said trees were in flight, but heartbeats are 0.2 s old).
        info = nats_stream.server.consumer_info(nats_stream.name, "squall-" + name)
        print(f"\nkill -9 of a spout's worker: {info['delivered']['consumer_seq'] - n} "
              f"deliveries again, {sum(got.values()) - n} messages processed again")
    finally:
        kill_and_wait(local, name)


def test_a_nats_restart_mid_run_loses_no_message(cluster, tmp_path):
    server = LocalNats(str(tmp_path / "nats"))
    server.start()
    try:
        server.create_stream("RESTART", ["restart.>"])
        n = 3000
        seqs = publish(server, "restart.m", n)
        lc = cluster(reader("RESTART").create_topology(),
                     {**server.conf(), "topology.message.timeout.secs": TIMEOUT_SECS,
                      "topology.max.spout.pending": 100},
                     name="nats-restart")
        lc.wait_for(lambda: len(events_of(lc.events_dir, "sink", "got")) > n // 5,
                    timeout=10 * TIMEOUT_SECS, what="a fifth of the messages")
        port = server.port
        server.stop()  # SIGTERM; the store stays in the given directory
        before = len(events_of(lc.events_dir, "sink", "got"))
        print(f"\nNATS stopped with {before} of {n} messages processed")
        assert before < n, "the run was over before the restart"
        server = LocalNats(str(tmp_path / "nats"), port=port)
        server.start()
        # The same stream and consumer are back; more messages land after the restart.
        seqs += publish(server, "restart.m", 500)
        lc.wait_for(lambda: settled(server, "RESTART", "squall-nats-restart", n + 500),
                    timeout=20 * TIMEOUT_SECS, what="every message acknowledged after the restart")
        got = collections.Counter(int(s) for s in events_of(lc.events_dir, "sink", "got"))
        assert set(got) == set(seqs)
        assert any("lost the connection to NATS" in e["error"]
                   for hb in lc.heartbeats().values() for e in hb.get("errors", []))
    finally:
        server.stop()
