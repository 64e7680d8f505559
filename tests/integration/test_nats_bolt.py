"""JetStreamBolt against a real NATS server (the session's LocalNats): each tuple published
and acked after its PubAck, a replay stored once by its Nats-Msg-Id, errors reported with
their subject or address, and the bolt on real worker processes: every tuple published and
acked, NATS down then up."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from nats_topos import publisher
from squall.client.tuple import Fields, Tuple
from squall.connectors.nats import JetStreamBolt, NatsConfig, PublishMapper
from squall.connectors import reports
from squall.deploy.nats import LocalNats
from squall.deploy.net import free_port
from topos import events_of

pytestmark = pytest.mark.integration

#: The topologies' tuple timeout: a test waits a few of them at the most.
TIMEOUT_SECS = 5


class Collected:
    """A bolt's collector that keeps what the bolt did."""

    def __init__(self):
        self.acked, self.failed, self.errors = [], [], []

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)

    def report_error(self, error):
        self.errors.append(str(error))


@pytest.fixture
def prepared(nats_server):
    made = []

    def prepare(bolt, conf=None):
        out = Collected()
        bolt.prepare(conf if conf is not None else nats_server.conf(),
                     SimpleNamespace(this_component_id="nats-bolt"), out)
        made.append(bolt)
        return bolt, out

    yield prepare
    for bolt in made:
        bolt.cleanup()


def tuples(fields, *rows):
    return [Tuple(list(r), "src", "default", 1, None, Fields(fields)) for r in rows]


def stored(stream):
    return stream.server.stream_info(stream.name)["state"]["messages"]


def test_each_tuple_is_published_and_acked_after_its_puback(prepared, nats_stream):
    bolt, out = prepared(JetStreamBolt(PublishMapper(subject="s", payload="p")))
    batch = tuples(["s", "p"], *[(nats_stream.subject(f"k{i % 3}"), f"v{i}") for i in range(300)])
    bolt.execute_batch(batch)
    assert out.acked == batch and not out.failed and not out.errors
    assert stored(nats_stream) == 300
    info = nats_stream.server.stream_info(nats_stream.name)
    assert info["state"]["last_seq"] == 300


def test_a_replay_with_the_same_msg_id_is_stored_once(prepared, nats_stream):
    bolt, out = prepared(JetStreamBolt(PublishMapper(subject="s", payload="p", msg_id="id")))
    batch = tuples(["s", "p", "id"], *[(nats_stream.subject("x"), f"v{i}", f"id-{i}")
                                       for i in range(50)])
    bolt.execute_batch(batch)
    bolt.execute_batch(batch[:20])  # replayed: acked again, not stored again
    assert len(out.acked) == 70 and not out.failed
    assert stored(nats_stream) == 50


def test_a_tuple_that_does_not_map_is_failed_and_reported_with_its_subject(prepared,
                                                                           nats_stream):
    bolt, out = prepared(JetStreamBolt(PublishMapper(subject="s", payload="p")))
    good, bad_payload, bad_subject = tuples(["s", "p"], (nats_stream.subject("a"), "ok"),
                                            (nats_stream.subject("b"), {"a": 1}),
                                            ("has space", "x"))
    reports.REPORT_EVERY_SECS, before = 0.0, reports.REPORT_EVERY_SECS
    try:
        bolt.execute_batch([good, bad_payload, bad_subject])
    finally:
        reports.REPORT_EVERY_SECS = before
    assert out.acked == [good] and out.failed == [bad_payload, bad_subject]
    assert f"subject '{nats_stream.subject('b')}'" in out.errors[0]
    assert "the payload must be bytes, str or a number, not dict" in out.errors[0]
    assert "not 'has space'" in out.errors[1]
    assert stored(nats_stream) == 1


def test_a_publish_no_stream_takes_fails_only_its_own_tuple(prepared, nats_stream):
    bolt, out = prepared(JetStreamBolt(PublishMapper(subject="s", payload="p")))
    ok1, lost, ok2 = tuples(["s", "p"], (nats_stream.subject("a"), "1"),
                            ("nowhere.at.all", "2"), (nats_stream.subject("b"), "3"))
    bolt.execute_batch([ok1, lost, ok2])
    assert out.acked == [ok1, ok2] and out.failed == [lost]
    assert "subject 'nowhere.at.all'" in out.errors[0]
    assert "no stream takes this subject" in out.errors[0]


def test_an_unreachable_server_fails_the_step_and_names_the_address(prepared, nats_server):
    port = free_port()
    bolt, out = prepared(JetStreamBolt(PublishMapper(subject="s", payload="p"),
                                       NatsConfig(f"127.0.0.1:{port}", connect_timeout_secs=1)))
    batch = tuples(["s", "p"], ("a.b", 1), ("a.c", 2))
    bolt.execute_batch(batch)
    assert out.failed == batch and not out.acked
    assert f"NATS nats://127.0.0.1:{port} is unreachable" in out.errors[0]
    assert "2 tuple(s) were failed and will be replayed" in out.errors[0]


def test_the_bolt_runs_on_a_thread_of_its_own():
    bolt = JetStreamBolt(PublishMapper(fixed_subject="a.b"))
    assert bolt.get_component_configuration() == {"topology.executor.threaded": True}


# -- on real workers ---------------------------------------------------------------------

def acked_once(lc, n):
    acks = events_of(lc.events_dir, "numbers", "ack")
    return sorted(int(a) for a in acks) == list(range(n))


def test_the_bolt_on_real_workers_publishes_every_tuple_and_acks_each_once(cluster,
                                                                           nats_stream):
    n = 400
    conf = nats_stream.conf(**{"test.spout.count": n,
                               "topology.message.timeout.secs": TIMEOUT_SECS})
    lc = cluster(publisher(nats_stream.subject("n")).create_topology(), conf, name="nats-pub")
    lc.wait_for(lambda: acked_once(lc, n), timeout=3 * TIMEOUT_SECS, what="every number acked")
    assert stored(nats_stream) == n
    assert not events_of(lc.events_dir, "numbers", "fail")


def test_nats_down_reports_the_address_then_every_tuple_lands_once_it_is_up(cluster, tmp_path):
    port = free_port()
    n = 100
    conf = {"nats.servers": f"nats://127.0.0.1:{port}", "test.spout.count": n,
            "topology.message.timeout.secs": TIMEOUT_SECS}
    lc = cluster(publisher("down.n", parallelism=1).create_topology(), conf, name="nats-down")

    def reported():
        return any(f"NATS nats://127.0.0.1:{port} is unreachable" in e["error"]
                   for hb in lc.heartbeats().values() for e in hb.get("errors", []))

    # Reported within seconds (a refused connection fails the step at once), not after the
    # tuples' timeout: the heartbeat carries it to the supervisor and on to `squall list`.
    lc.wait_for(reported, timeout=TIMEOUT_SECS, what="the unreachable NATS reported")
    assert not acked_once(lc, n)
    server = LocalNats(str(tmp_path / "nats"), port=port)
    server.start()
    try:
        server.create_stream("DOWN", ["down.>"])
        lc.wait_for(lambda: acked_once(lc, n), timeout=3 * TIMEOUT_SECS,
                    what="every number acked once NATS is up")
        assert server.stream_info("DOWN")["state"]["messages"] == n  # replays stored once
        assert events_of(lc.events_dir, "numbers", "fail")  # they were replayed
    finally:
        server.stop()
