"""JetStreamSpout against a real NATS server (the session's LocalNats, Debian's nats-server)
on real worker processes: every message processed and acknowledged once, failures delivered
again, a message the translator refuses terminated and reported, an unreachable server
reported with its address, the consumer's figures as gauges."""

from __future__ import annotations

import collections

import pytest

from nats_topos import reader
from squall.client import TopologyBuilder
from squall.connectors.nats import JetStreamSpout, NatsConfig
from squall.deploy.net import free_port
from topos import NeverAck, events_of

pytestmark = pytest.mark.integration

#: The topologies' tuple timeout, which is also the consumer's ack_wait: a test waits a few
#: of them at the most.
TIMEOUT_SECS = 3


def publish(stream, n, rest="m"):
    return stream.server.publish(stream.subject(rest), [f"message {i}".encode() for i in range(n)])


def settled(stream, consumer, n):
    """The consumer delivered all ``n`` messages and every one was acknowledged (or
    terminated)."""
    try:
        info = stream.server.consumer_info(stream.name, consumer)
    except Exception:  # not made yet
        return False
    return info["num_pending"] == 0 and info["num_ack_pending"] == 0 and \
        info["ack_floor"]["stream_seq"] == n


def conf_for(stream, **extra):
    return stream.conf(**{"topology.message.timeout.secs": TIMEOUT_SECS,
                          "topology.max.spout.pending": 100, **extra})


def errors_of(lc):
    return [e["error"] for hb in lc.heartbeats().values() for e in hb.get("errors", [])]


def test_every_message_is_processed_and_acknowledged_once(cluster, nats_stream):
    n = 500
    seqs = publish(nats_stream, n)
    lc = cluster(reader(nats_stream.name).create_topology(), conf_for(nats_stream),
                 name="nats-all")
    lc.wait_for(lambda: settled(nats_stream, "squall-nats-all", n),
                timeout=10 * TIMEOUT_SECS, what="every message acknowledged")
    got = collections.Counter(int(s) for s in events_of(lc.events_dir, "sink", "got"))
    assert set(got) == set(seqs) and max(got.values()) == 1
    info = nats_stream.server.consumer_info(nats_stream.name, "squall-nats-all")
    assert info["config"]["ack_wait"] == TIMEOUT_SECS * 10**9  # the tuple timeout, in ns
    assert info["config"]["ack_policy"] == "explicit"


def test_a_failed_message_is_delivered_again_until_it_is_processed(cluster, nats_stream):
    n = 200
    seqs = publish(nats_stream, n)
    lc = cluster(reader(nats_stream.name).create_topology(),
                 conf_for(nats_stream, **{"test.fail.every": 10}), name="nats-fail")
    lc.wait_for(lambda: settled(nats_stream, "squall-nats-fail", n),
                timeout=10 * TIMEOUT_SECS, what="every message acknowledged")
    failing = {int(s) for s in events_of(lc.events_dir, "sink", "failing")}
    got = {int(s) for s in events_of(lc.events_dir, "sink", "got")}
    assert len(failing) == n // 10 and failing <= got and got == set(seqs)


def test_a_message_that_does_not_translate_is_terminated_and_reported(cluster, nats_stream):
    good = publish(nats_stream, 20)
    [bad] = nats_stream.server.publish(nats_stream.subject("bad"), [b"\xff\xfe not utf-8"])
    more = publish(nats_stream, 20)
    lc = cluster(reader(nats_stream.name).create_topology(), conf_for(nats_stream),
                 name="nats-bad")
    lc.wait_for(lambda: settled(nats_stream, "squall-nats-bad", 41),
                timeout=10 * TIMEOUT_SECS, what="every message acknowledged or terminated")
    assert {int(s) for s in events_of(lc.events_dir, "sink", "got")} == set(good + more)
    want = f"message {bad} ({nats_stream.subject('bad')}) of stream {nats_stream.name!r} " \
           "does not translate to a tuple: UnicodeDecodeError"
    lc.wait_for(lambda: any(want in e for e in errors_of(lc)), timeout=TIMEOUT_SECS,
                what="the message reported")
    assert any("it was terminated (+TERM)" in e for e in errors_of(lc))


def test_max_deliver_terminates_a_message_that_keeps_failing(cluster, nats_stream):
    n = 30
    publish(nats_stream, n)
    # Every message whose sequence is a multiple of 10 fails once; allowed one delivery,
    # those three are terminated (and reported), the rest acknowledged.
    lc = cluster(reader(nats_stream.name, max_deliver=1).create_topology(),
                 conf_for(nats_stream, **{"test.fail.every": 10}), name="nats-maxdel")
    lc.wait_for(lambda: settled(nats_stream, "squall-nats-maxdel", n),
                timeout=10 * TIMEOUT_SECS, what="every message acknowledged or terminated")
    got = {int(s) for s in events_of(lc.events_dir, "sink", "got")}
    assert got == set(range(1, n + 1)) - {10, 20, 30}
    lc.wait_for(lambda: any("failed on each of its 1 deliveries (max_deliver 1); it was "
                            "terminated" in e for e in errors_of(lc)),
                timeout=TIMEOUT_SECS, what="the terminated message reported")


def test_an_unreachable_server_is_reported_with_its_address_within_seconds(cluster,
                                                                            nats_stream):
    port = free_port()
    b = TopologyBuilder()
    b.set_spout("messages", JetStreamSpout("S", config=NatsConfig(f"127.0.0.1:{port}",
                                                                  connect_timeout_secs=1)), 1)
    b.set_bolt("sink", NeverAck(), 1).shuffle_grouping("messages")
    lc = cluster(b.create_topology(), conf_for(nats_stream), name="nats-absent")
    # Reported within seconds (a refused connection fails at once), not after a timeout:
    # the heartbeat carries it to the supervisor and on to `squall list`.
    lc.wait_for(lambda: any(f"NATS nats://127.0.0.1:{port} is unreachable" in e
                            for e in errors_of(lc)),
                timeout=2 * TIMEOUT_SECS, what="the unreachable server reported")


def test_pending_and_ack_pending_are_gauges_of_the_spout(cluster, nats_stream):
    # A sink that never acks and max.spout.pending 10: the spout fetches a batch of 50 and
    # the next one while it emits (its buffer holds two batches), and holds them, so of 200
    # messages the consumer has 100 delivered unacknowledged and 100 not delivered.
    n = 200
    publish(nats_stream, n)
    b = TopologyBuilder()
    b.set_spout("messages", JetStreamSpout(nats_stream.name, batch=50), 1)
    b.set_bolt("sink", NeverAck(), 1).shuffle_grouping("messages")
    lc = cluster(b.create_topology(), conf_for(nats_stream, **{"topology.max.spout.pending": 10}),
                 name="nats-gauges")

    def gauges():
        return {m["family"]: m["value"] for s in lc.task_stats("messages")
                for m in (s.get("metrics") or {}).values() if "family" in m}

    lc.wait_for(lambda: gauges() == {"nats_consumer_pending": 100,
                                     "nats_consumer_ack_pending": 100},
                timeout=10 * TIMEOUT_SECS, what="the gauges at 100 and 100")
    info = nats_stream.server.consumer_info(nats_stream.name, "squall-nats-gauges")
    assert (info["num_pending"], info["num_ack_pending"]) == (100, 100)
