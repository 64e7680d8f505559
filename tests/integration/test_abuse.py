"""What a careless user, another user or a stranger sends must not take the control plane
down (issue 23). Each probe runs against ONE real cluster shared by this file
(:mod:`abuse_cluster`: Nimbus, two supervisors, the UI, a logviewer and a DRPC server, as
processes on loopback with mutual TLS and a locked ZooKeeper) while alice's reliable word
count runs; mallory and trudy hold certificates of the cluster's CA, a stranger holds
neither one nor the HTTP token.

Each test is one finding group of issue 23: the attack is refused or contained with the
error the user sees, and afterwards (:meth:`abuse_cluster.Probe.victim_unharmed`) alice's
topology still acks in each of its workers, the same processes in the same slots, with no
tuple failed or timed out and no restart; Nimbus logged "is the leader" exactly once; the
supervisors' reports still reach Nimbus (the acks Nimbus knows of go on rising, no send
error counted or logged); every daemon is alive and none's RSS rose more than
:data:`~abuse_cluster.RSS_MARGIN` (:data:`~abuse_cluster.FLOOD_RSS_MARGIN` under the flood)
above what it was at the probe's start, at any time during the probe (sampled every 0.1 s).

Server-side deadlines are the daemons' own (10 s for HTTP headers, 5 s for a gRPC
handshake, 10 s before a DRPC server refuses unserved functions): there are no keys to
shorten them, so each probe waits them out once, bounded by them, doing its other checks
meanwhile. The one it does not wait out is an upload stream's 30 s (it would double the
file's time): the probe shows the streams contained by count while they last, and
tests/integration/test_nimbus_bounds.py times their cancellation with a shorter window.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import resource
import select
import socket
import threading
import time
from pathlib import Path

import grpc
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import OPEN_ACL_UNSAFE

from abuse_cluster import (ALL_STREAMS, DRPC_THREADS, FLOOD_RSS_MARGIN, HANDSHAKE_SECS,
                           HEADER_SECS, INBOX_BYTES_PER_USER, INBOX_EXPIRY_SECS,
                           MAX_GRPC_CONNECTIONS, MONITOR_SECS, PER_ADDRESS, REPORT_SECS,
                           STREAM_IDLE_SECS, UNSERVED_SECS, AbuseCluster, MiB)
from abuse_cluster import abuse, probe  # noqa: F401 - the fixtures
from squall.client import config as cfg
from squall.client import zk_auth
from squall.client.cluster_state import Paths
from squall.client.contract import MAX_ERROR_CHARS
from squall.client.drpc import DRPCClient, DRPCExecutionException, DRPCInvocationsClient
from squall.client.errors import (InvalidRequest, LimitExceeded, NimbusUnavailable,
                                  PermissionDenied, TopologyNotFound)
from squall.client.nimbus_client import NimbusClient
from squall.client.shell import ShellBolt
from squall.client.topology import TopologyBuilder
from squall.client.topology_proto import to_proto
from squall.nimbus import servicer
from squall.proto import nimbus_pb2 as pb
from squall.proto import nimbus_pb2_grpc as pb_grpc
from test_cli_cluster import EXAMPLES
from topos import NumberSpout, RecordingBolt
from zk_fixtures import TEST_SESSION_TIMEOUT, poll_for

pytestmark = pytest.mark.integration


def small_topology():
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("record", RecordingBolt(), 1).shuffle_grouping("numbers")
    return to_proto(b.create_topology())


# --- findings 1, 2 (and 10): a topology's errors, log configs and ZooKeeper identity --------

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


def test_megabyte_errors_log_configs_and_a_topologys_zookeeper_identity(abuse, probe):
    """Findings 1, 2 and 10: mallory's topology reports 30 errors of ~1 MB (they reached no
    one, and could end Nimbus's ZooKeeper session); she sets a 1.2 MB log config; the
    ZooKeeper identity her topology's code holds creates nothing on the transactional root
    and reads nothing of alice's."""
    c = abuse
    c.jar_file("mallory", "loud", LOUD)
    try:
        # The errors reach Nimbus cut where they were made, saying how long they were, and
        # `squall list` shows the last one.
        with c.client("mallory") as mallory:
            poll_for(lambda: len(mallory.topology_info(name="loud").errors) >= 10,
                     timeout=30, interval=0.2, what="loud's last 10 errors stored\n" + c.logs())
            errors = mallory.topology_info(name="loud").errors
            assert all(len(e.error) <= MAX_ERROR_CHARS for e in errors), \
                [len(e.error) for e in errors]
            assert all("[cut: 1,000,0" in e.error and "characters in all" in e.error
                       for e in errors), errors[0].error[-200:]
            out = c.run("list").stdout
            assert "loud: last error" in out and "ValueError: xxxx" in out, out

            # A log config of 1.2 MB of logger names is refused with the reason, not stored.
            names = {f"logger.{i}.{'n' * 100}": ("DEBUG", 0) for i in range(12_000)}
            with pytest.raises(InvalidRequest, match="at most 256 may be set"):
                mallory.set_log_config("loud", names)
            with pytest.raises(InvalidRequest, match="a name has 1 to 256"):
                mallory.set_log_config("loud", {"n" * 100_000: ("DEBUG", 0)})
            # And alice's topology is not hers to configure, or to kill.
            with c.client("alice") as alice:  # (alice's own, as careless: refused the same)
                with pytest.raises(InvalidRequest, match="at most 256 may be set"):
                    alice.set_log_config("word-count", names)
            with pytest.raises(PermissionDenied,
                               match="mallory may not setLogConfig topology word-count"):
                mallory.set_log_config("word-count", {"root": ("DEBUG", 0)})
            with pytest.raises(PermissionDenied, match="mallory may not killTopology "
                                                       "topology word-count.*owned by alice"):
                mallory.kill("word-count", wait_secs=0)

        # What loud's code holds in ZooKeeper: its own topology's identity (SECURITY.md).
        # It writes in its namespace, and creates or lists nothing anywhere else.
        payload = zk_auth.topology_payload(c.conf[cfg.STORM_ZOOKEEPER_AUTH_PAYLOAD], "loud",
                                           "mallory")
        paths = Paths(c.conf[cfg.STORM_ZOOKEEPER_ROOT])
        mine = paths.tx_namespace_dir("loud", "mallory")
        alices = paths.tx_namespace_dir("word-count", "alice")
        z = KazooClient(hosts=c.zk_hosts, timeout=TEST_SESSION_TIMEOUT,
                        auth_data=[("digest", payload)])
        z.start(timeout=10)
        try:
            z.create(mine + "/probe", b"x")
            z.delete(mine + "/probe")
            for path in (paths.transactional_root + "/open", alices + "/x",
                         paths.transactional_root + "/" + "!alice!word-count2"):
                with pytest.raises(NoAuthError):
                    z.create(path, b"x", acl=OPEN_ACL_UNSAFE)
            for path in (paths.transactional_root, alices, paths.dir(Paths.ASSIGNMENTS),
                         paths.dir(Paths.STORMS)):
                with pytest.raises(NoAuthError):
                    z.get_children(path)
        finally:
            z.stop()
            z.close()
    finally:
        c.kill_and_wait("mallory", "loud")
    probe.victim_unharmed()


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


def test_a_spout_stuck_in_next_tuple_shows_in_the_topologys_health(abuse, probe):
    c = abuse
    c.jar_file("mallory", "blocked", BLOCKED)
    try:
        def stalled():
            with c.client("mallory") as mallory:
                return [t.stalled for t in mallory.list().topologies
                        if t.name == "blocked" and t.stalled]
        # The stall bound (1 s), a stats period, a supervisor report and a listing.
        poll_for(stalled, timeout=30, interval=0.2, what="the stall reported\n" + c.logs())
        line = c.listed()["blocked"][7]
        assert "stalled: spout blocker: next_tuple has not returned for" in line, line
        assert "(on 127.0.0." in line, line
        sups = "".join(p.read_text(errors="replace")
                       for p in c.tmp.glob("sup*/logs/blocked-*.log"))
        assert "stalled: spout blocker: next_tuple has not returned for" in sups, c.logs()
        assert c.listed()["word-count"][7] == "ok"  # alice's health is her own
    finally:
        c.kill_and_wait("mallory", "blocked")
    probe.victim_unharmed()


# --- findings 3 and 6: upload streams and the inbox ------------------------------------------

class Trickle:
    """One UploadPackage stream sending a byte a second (a stream that is never silent but
    brings nothing: finding 3 sent one every 20 s), on ``channel``."""

    def __init__(self, channel: grpc.Channel, stop: threading.Event):
        self.stop = stop
        self.call = pb_grpc.NimbusStub(channel).UploadPackage.future(
            self._chunks(), timeout=STREAM_IDLE_SECS + 30)

    def _chunks(self):
        offset = 0
        while not self.stop.is_set():
            yield pb.Chunk(data=b"x", offset=offset)
            offset += 1
            self.stop.wait(1.0)

    def error(self) -> grpc.RpcError | None:
        return self.call.exception(timeout=0) if self.call.done() else None


def test_upload_streams_cannot_starve_nimbus_nor_uploads_fill_its_inbox(abuse, probe):
    """Finding 3: two submitters held 8 trickling UploadPackage streams each and Nimbus
    answered no one. Finding 6: one user filled the whole inbox, finishing an upload again
    kept it from expiring, and nothing abandoned one."""
    c = abuse
    stop = threading.Event()
    channels = {who: c.channel(who) for who in ("mallory", "trudy", "alice")}
    t0 = time.monotonic()
    streams = {who: [Trickle(channels[who], stop) for _ in range(8)]
               for who in ("mallory", "trudy")}
    try:
        # Each attacker gets 2 streams, all users 4 (a quarter of Nimbus's 16 threads); the
        # other 6 are refused at once, saying why.
        refused = poll_for(lambda: (lambda r: r if len(r) == 12 else None)(
            [s for ss in streams.values() for s in ss if s.call.done()]),
            timeout=10, what="the streams over the bounds refused")
        for who, ss in streams.items():
            errors = [s.error() for s in ss if s.call.done()]
            assert len(errors) == 6, (who, errors)
            for e in errors:
                assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
                assert f"{who} has 2 upload streams open" in e.details() or \
                    f"and Nimbus {ALL_STREAMS} (" in e.details(), e.details()
                assert f"(at most {servicer.STREAMS_PER_PRINCIPAL} per user, {ALL_STREAMS} " \
                       "in all); retry when they finish" in e.details(), e.details()
        held = [s for ss in streams.values() for s in ss if not s.call.done()]
        assert len(held) == 4 and len(refused) == 12
        # While they are held, another user's stream waits its turn (refused at once) ...
        alices = Trickle(channels["alice"], stop)
        poll_for(alices.call.done, timeout=10, what="alice's stream refused")
        assert f"Nimbus {ALL_STREAMS} (at most" in alices.error().details()
        # ... but the rest of Nimbus's threads answer everyone: alice's `squall jar` uploads
        # with unary calls, the supervisors report, the CLI lists.
        t = time.monotonic()
        r = c.run_as("alice", "list")
        assert r.returncode == 0 and "word-count" in r.stdout, r.stderr
        list_secs = time.monotonic() - t
        seen = [c.reported_acks()]
        poll_for(lambda: seen.append(c.reported_acks()) or len(set(seen)) > 2,
                 timeout=6 * REPORT_SECS, interval=0.25,
                 what="reports reaching Nimbus while the streams are held")

        with c.client("mallory") as mallory, c.client("alice") as alice:
            # The inbox: mallory's 3 MiB leave her 1 MiB of nimbus.inbox.max.bytes.per.user;
            # alice's room is her own.
            t_upload = time.monotonic()
            loc = mallory.upload(b"m" * (3 * MiB))
            with pytest.raises(LimitExceeded) as info:
                mallory.upload(b"m" * (2 * MiB))
            # (Her trickling streams' bytes count too.)
            held_bytes = int(str(info.value).split("mallory holds ")[1].split(" bytes")[0])
            assert 3 * MiB <= held_bytes < 3 * MiB + 100, str(info.value)
            assert (f"bytes of open uploads; {2 * MiB} more would pass the limit per user "
                    f"(nimbus.inbox.max.bytes.per.user = {INBOX_BYTES_PER_USER}); submit or "
                    "abandon them first (AbandonFileUpload)") in str(info.value), str(info.value)
            alice.abandon_upload(alice.upload(b"a" * (3 * MiB)))
            # Finishing it again and again does not keep it: it expires
            # nimbus.inbox.jar.expiration.secs after its first finish (at a monitor round).
            stub = pb_grpc.NimbusStub(channels["mallory"])

            def expired():
                try:
                    stub.FinishFileUpload(pb.UploadLocation(location=loc), timeout=10)
                except grpc.RpcError as e:
                    assert e.code() == grpc.StatusCode.NOT_FOUND, e
                    return e.details()
                return None
            gone = poll_for(expired, timeout=INBOX_EXPIRY_SECS + 3 * MONITOR_SECS,
                            interval=0.25, what="mallory's finished upload expiring")
            expired_after = time.monotonic() - t_upload
            assert expired_after >= INBOX_EXPIRY_SECS, expired_after
            assert f"no upload at location {loc!r}" in gone, gone
            # Her room is back; abandoning an upload frees it at once.
            loc = mallory.upload(b"m" * (3 * MiB))
            mallory.abandon_upload(loc)
            with pytest.raises(TopologyNotFound, match="no upload at location"):
                mallory.abandon_upload(loc)

        # The held streams are still open: Nimbus cancels one only after STREAM_IDLE_SECS
        # (30 s) with less than 64 KiB (tests/integration/test_nimbus_bounds.py times that
        # with a shorter window; here it would double the file's time). The attackers give
        # up; their slots and their partial uploads go with their streams.
        assert not any(s.call.done() for s in held)
        held_secs = time.monotonic() - t0
        assert held_secs < STREAM_IDLE_SECS, held_secs
        for s in held:
            s.call.cancel()

        def upload_stream(who: str) -> str | None:
            try:
                return pb_grpc.NimbusStub(channels[who]).UploadPackage(
                    iter([pb.Chunk(data=who[0].encode() * 100_000, offset=0)]),
                    timeout=10).location
            except grpc.RpcError as e:
                assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
                return None
        for who in ("mallory", "trudy", "alice"):  # 2 of the 4 streams at a time
            location = poll_for(lambda: upload_stream(who), timeout=5, interval=0.1,
                                what=f"{who}'s stream served once the others ended")
            with c.client(who) as client:
                client.abandon_upload(location)
        with c.client("mallory") as mallory:  # her trickles' bytes went with them
            def whole_quota() -> bool:
                try:
                    mallory.abandon_upload(mallory.upload(b"m" * INBOX_BYTES_PER_USER))
                    return True
                except LimitExceeded:
                    return False
            poll_for(whole_quota, timeout=5, interval=0.1, what="mallory's quota back whole")
        print(f"\n4 trickling streams held for {held_secs:.1f} s, 13 refused; alice's list "
              f"took {list_secs:.2f} s meanwhile; mallory's upload expired "
              f"{expired_after:.1f} s after it finished")
    finally:
        stop.set()
        for ch in channels.values():
            ch.close()
    probe.victim_unharmed()


# --- finding 4: slow HTTP clients -----------------------------------------------------------

#: Where the strangers' connections come from: other loopback addresses than the users'
#: 127.0.0.1, each holding as many as a client address may.
SLOW_SOURCES = [f"127.0.0.{i}" for i in range(101, 105)]


def _readable_closed(s: socket.socket) -> bool:
    """A socket select said is readable: has the server closed it (EOF or reset)?"""
    try:
        return s.recv(1024, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_slow_http_clients_hold_no_port(abuse, probe):
    """Finding 4: connections that sent their headers slowly, or nothing, blocked the UI,
    the logviewer and a /metrics port (before any token check). A stranger opens 32
    connections to each of four ports from each of 4 addresses (16 per server thread of the
    UI and logviewer, 64 of a /metrics port's), half trickling header bytes, half silent,
    and a 33rd from each address."""
    c = abuse
    ports = {"ui": c.ui_port, "logviewer": c.lv_port, "nimbus /metrics": c.nimbus_metrics,
             "supervisor1 /metrics": c.sup_metrics[0]}
    opened: dict[socket.socket, tuple[str, float, bool]] = {}  # -> (port name, when, trickles)
    extra: list[tuple[str, socket.socket]] = []
    closed_after: dict[str, list[float]] = {name: [] for name in ports}
    try:
        # Paced, ports in turn: a server accepts from a listen backlog of 5 (cheroot's), and
        # a connect finding it full waits out TCP's 1 s SYN retransmission.
        for i in range(PER_ADDRESS + 1):
            for src in SLOW_SOURCES:
                for name, port in ports.items():
                    s = socket.create_connection(("127.0.0.1", port), timeout=5,
                                                 source_address=(src, 0))
                    if i == PER_ADDRESS:
                        extra.append((name, s))
                    elif i % 2 == 0:  # trickles its headers
                        s.sendall(b"GET /api/v1/cluster/summary HTTP/1.1\r\nHost: a\r\n"
                                  b"X-Slow: ")
                        opened[s] = (name, time.monotonic(), True)
                    else:  # sends nothing
                        opened[s] = (name, time.monotonic(), False)
                    time.sleep(0.002)
        t_open = time.monotonic()
        # One more from an address holding 32 is closed at accept.
        for name, s in extra:
            r, _, _ = select.select([s], [], [], 5)
            assert r and _readable_closed(s), f"a 33rd connection to {name} stayed open"

        # Meanwhile everyone else is answered at once, with the token and without.
        def answered() -> dict[str, float]:
            took = {}
            for name, port in ports.items():
                t = time.monotonic()
                status, _ = c.http(f"http://127.0.0.1:{port}/")
                took[name] = time.monotonic() - t
                assert status in (200, 404), (name, status)
                assert c.http(f"http://127.0.0.1:{port}/", token=False)[0] == 401
            return took
        during = [answered()]  # now, and again half way to the deadline
        assert c.ok("topology/summary")["topologies"][0]["name"] == "word-count"

        # The strangers' connections are closed HEADER_SECS after they connected; until
        # then the trickling ones go on sending a byte every half second.
        last_send = 0.0
        deadline = t_open + HEADER_SECS + 5
        while opened and time.monotonic() < deadline:
            r, _, _ = select.select(list(opened), [], [], 0.05)
            now = time.monotonic()
            gone = [s for s in r if _readable_closed(s)]
            if now - last_send >= 0.5:
                last_send = now
                for s, (_, _, trickles) in opened.items():
                    if trickles and s not in gone:
                        try:
                            s.send(b"a")
                        except OSError:
                            gone.append(s)
            for s in gone:
                name, when, _ = opened.pop(s)
                closed_after[name].append(now - when)
                s.close()
            if len(during) == 1 and now - t_open > HEADER_SECS / 2:
                during.append(answered())
        assert not opened, f"{len(opened)} slow connections still open after " \
                           f"{HEADER_SECS + 5:g} s"
        for name, times in closed_after.items():
            assert len(times) == len(SLOW_SOURCES) * PER_ADDRESS
            assert HEADER_SECS - 0.5 <= min(times) and max(times) <= HEADER_SECS + 3, \
                (name, min(times), max(times))
        slowest = max(t for took in during for t in took.values())
        assert len(during) == 2 and slowest < 2, during
        print(f"\nreal requests answered in at most {slowest:.2f} s while "
              f"{len(SLOW_SOURCES) * PER_ADDRESS} slow connections per port were held; "
              "those closed after " + ", ".join(
                  f"{n} {min(t):.1f}-{max(t):.1f} s" for n, t in closed_after.items()))
    finally:
        for s in list(opened) + [s for _, s in extra]:
            s.close()
    probe.victim_unharmed()


# --- findings 5 and 7 (and 12's deep conf): confs that broke later calls ---------------------

#: conf JSON -> what the refusal says. Each used to be stored, then break kill, info or the
#: workers: an ACL of [{}] made every call on the topology INTERNAL, an admin's too; a NaN
#: or 1e308 s timeout made `squall kill` fail, leaving the topology KILLED and running.
BAD_CONFS = {
    '{"topology.users": [{}]}': "topology.users.*list of up to 1000 names",
    '{"topology.groups": [["ops"]]}': "topology.groups",
    '{"topology.message.timeout.secs": NaN}': "topology.message.timeout.secs.*finite",
    '{"topology.message.timeout.secs": Infinity}': "finite number",
    '{"topology.message.timeout.secs": 1e308}': "at most 315,360,000",
    '{"topology.spout.wait.max.millis": -Infinity}': "finite",
    '{"deep": ' + "[" * 100_000 + "]" * 100_000 + "}": "nested deeper than 32",
}


def test_confs_that_would_break_later_calls_are_refused_at_submit(abuse, probe):
    """Findings 5 and 7: mallory submits each of BAD_CONFS, with her own client and with
    `squall jar`; alice, careless, kills and rebalances her topology with negative waits."""
    c = abuse
    with c.client("mallory") as mallory:
        for i, (conf_json, why) in enumerate(BAD_CONFS.items()):
            with pytest.raises(InvalidRequest, match=why):
                mallory.submit(f"bad-{i}", "", conf_json, small_topology())
        assert [t.name for t in mallory.list().topologies] == ["word-count"]
    # As the CLI shows it: one line naming the key.
    r = c.run_as("mallory", "jar", os.path.join(EXAMPLES, "exclamation.py"),
                 "-c", "topology.users=[{}]")
    assert r.returncode == 1, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "topology.users" in lines[0] and "Traceback" not in r.stderr, \
        r.stderr
    print(f"\nsquall jar -c 'topology.users=[{{}}]': {lines[0]}")
    # A kill wait out of 0..2^31-1 s is refused, and alice's topology goes on, ACTIVE.
    with c.client("alice") as alice:
        with pytest.raises(InvalidRequest,
                           match=r"kill wait must be 0\.\.2147483647 seconds, got -1"):
            alice.kill("word-count", wait_secs=-1)
        with pytest.raises(InvalidRequest, match=r"rebalance word-count: wait must be "
                                                 r"0\.\.2147483647"):
            alice.rebalance("word-count", wait_secs=-5)
        assert alice.topology_info(name="word-count").status == "ACTIVE"
    probe.victim_unharmed()


# --- finding 8: idle connections without credentials ---------------------------------------

def _closed(s: socket.socket) -> bool:
    s.settimeout(0)
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_a_flood_of_idle_connections_is_bounded_and_shed(abuse, probe):
    """Finding 8: ~20,000 TCP connections that never spoke held Nimbus at its descriptor
    limit, its RSS 106 -> 998 MiB. A stranger opens three times what a gRPC port takes
    (1,000) to Nimbus and to the DRPC server, from 5 addresses, and says nothing."""
    c = abuse
    n = 3 * MAX_GRPC_CONNECTIONS
    probe.margins.update(nimbus=FLOOD_RSS_MARGIN, drpc=FLOOD_RSS_MARGIN)
    targets = {"nimbus": c.nimbus_port, "drpc": c.drpc_port}
    flood: dict[str, list[tuple[socket.socket, float]]] = {name: [] for name in targets}
    shed_after: dict[str, list[float]] = {name: [] for name in targets}
    alice = c.client("alice")  # connected before the flood, as the supervisors are
    c.reported_acks(alice)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2 * n + 1024:  # the stranger's sockets, in this process
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(2 * n + 1024, hard), hard))
    try:
        for i in range(n):
            for name, port in targets.items():
                s = socket.create_connection(("127.0.0.1", port), timeout=5,
                                             source_address=(f"127.0.0.{111 + i % 5}", 0))
                flood[name].append((s, time.monotonic()))
        t_flood = time.monotonic()
        open_ = {name: list(socks) for name, socks in flood.items()}

        def shed() -> dict[str, int]:
            """How many of each port's flood are still open (the closed ones timed)."""
            now = time.monotonic()
            for name, socks in open_.items():
                for item in [x for x in socks if _closed(x[0])]:
                    socks.remove(item)
                    shed_after[name].append(now - item[1])
            return {name: len(socks) for name, socks in open_.items()}
        # A port holds at most 1,000 (with the clients it had): the rest are closed at once,
        # long before the first ones' handshake deadline.
        first = min(socks[0][1] for socks in flood.values())
        held = poll_for(lambda: (lambda o: o if max(o.values()) <= MAX_GRPC_CONNECTIONS
                                 else None)(shed()),
                        timeout=first + HANDSHAKE_SECS - 1 - time.monotonic(), interval=0.05,
                        what="the connections over the cap closed")
        assert min(held.values()) >= MAX_GRPC_CONNECTIONS - 20, held
        # New connections are refused while a port holds its 1,000 (gRPC has no cap per
        # address: SECURITY.md) ...
        with c.client("mallory") as late:
            with pytest.raises(NimbusUnavailable, match="cannot reach Nimbus"):
                late.list()
        refused_within = time.monotonic() - t_flood
        # ... the supervisors' reports go on over their open connections meanwhile.
        seen = [c.reported_acks(alice)]
        poll_for(lambda: seen.append(c.reported_acks(alice)) or len(set(seen)) > 1,
                 timeout=4 * REPORT_SECS, interval=0.25,
                 what="reports reaching Nimbus during the flood")
        # Every silent connection is closed within the handshake deadline of its connect.
        poll_for(lambda: not any(shed().values()), timeout=HANDSHAKE_SECS + 5, interval=0.05,
                 what="the idle connections closed by the servers")
        for name, times in shed_after.items():
            assert len(times) == n and max(times) <= HANDSHAKE_SECS + 3, \
                (name, len(times), max(times))
        # A new client is served once they are shed (alice's CLI), a stranger is not.
        t = time.monotonic()
        r = c.run_as("alice", "list")
        assert r.returncode == 0 and "word-count" in r.stdout, r.stderr
        list_secs = time.monotonic() - t
        with NimbusClient(c.users["stranger"], timeout=10) as stranger:
            with pytest.raises(NimbusUnavailable, match="cannot reach Nimbus"):
                stranger.list()
        c.drpc_up_unserved_secs()
        with DRPCClient("127.0.0.1", conf=c.users["alice"], timeout=10) as drpc:
            with pytest.raises(DRPCExecutionException, match="no DRPC spout asked"):
                drpc.execute("nothing-serves-this", "x")
        for name, times in shed_after.items():
            times.sort()
            print(f"\n{name}: {n} idle connections closed {times[0]:.1f}-{times[-1]:.1f} s "
                  f"after they connected ({sum(1 for t in times if t < 1)} within 1 s); "
                  f"flood opened in {t_flood - flood[name][0][1]:.1f} s, {held[name]} held")
        print(f"a new client was refused {refused_within:.2f} s into the flood; alice's "
              f"`squall list` after it took {list_secs:.2f} s")
    finally:
        for socks in flood.values():
            for s, _ in socks:
                s.close()
        alice.close()
    probe.victim_unharmed()


# --- finding 9: DRPC execute threads -----------------------------------------------------

def test_one_drpc_client_cannot_hold_the_execute_threads(abuse, probe):
    """Finding 9: a certificate holder kept 200 execute calls waiting on a function no
    topology served, every thread of the server. Here the test serves "echo" as a DRPC
    topology would (with the supervisors' certificate): it answers alice's requests and
    mallory's "ok" ones, and leaves her others waiting."""
    c = abuse
    c.drpc_up_unserved_secs()
    share = DRPC_THREADS // 2
    # 200 calls to a function nothing serves are refused at once, not left waiting.
    with DRPCClient("127.0.0.1", conf=c.users["mallory"], timeout=10) as mallory:
        t = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(20) as pool:
            outcomes = list(pool.map(lambda i: _drpc_error(mallory, "nobody-serves", str(i)),
                                     range(200)))
        unserved_secs = time.monotonic() - t
    assert all(e is not None and e.type == "INTERNAL_ERROR" and
               f"no DRPC spout asked this server for it in the last {UNSERVED_SECS:g} s"
               in str(e) for e in outcomes), {str(e) for e in outcomes}
    assert unserved_secs < 10, unserved_secs

    stop = threading.Event()

    def serve_echo():
        inv = DRPCInvocationsClient(c.users["alice"] | _supervisor_tls(c), "127.0.0.1")
        try:
            while not stop.is_set():
                got = inv.fetch_request("echo", wait_secs=0.2)
                if got is not None and (got[1].startswith("alice") or got[1] == "mallory ok"):
                    inv.result(got[0], got[1].upper())
        finally:
            inv.close()
    server = threading.Thread(target=serve_echo, name="echo-topology", daemon=True)
    server.start()
    hold_secs = 4.0
    try:
        with DRPCClient("127.0.0.1", conf=c.users["alice"], timeout=10) as alice:
            poll_for(lambda: _drpc_error(alice, "echo", "alice 0") is None, timeout=10,
                     what="echo served")
            # Mallory sends 50 at once; half of drpc.worker.threads wait, the rest are refused
            # at once; alice is answered meanwhile.
            with DRPCClient("127.0.0.1", conf=c.users["mallory"], timeout=hold_secs) as mallory, \
                    concurrent.futures.ThreadPoolExecutor(50) as pool:
                t = time.monotonic()
                calls = [pool.submit(_drpc_error, mallory, "echo", f"mallory {i}")
                         for i in range(50)]
                refused = poll_for(lambda: (lambda done: done if len(done) >= 50 - share
                                            else None)([f for f in calls if f.done()]),
                                   timeout=hold_secs - 1, what="mallory's excess refused")
                assert len(refused) == 50 - share, len(refused)
                for f in refused:
                    assert f.result().type == "INTERNAL_ERROR" and \
                        f"mallory has {share} DRPC requests waiting, its limit; retry when " \
                        "some return" in str(f.result()), str(f.result())
                took = []
                for i in range(1, 6):
                    t1 = time.monotonic()
                    assert alice.execute("echo", f"alice {i}") == f"ALICE {i}"
                    took.append(time.monotonic() - t1)
                assert not any(f.done() for f in calls if f not in refused)
                held = [f.result() for f in calls if f not in refused]  # her own deadline
            held_secs = time.monotonic() - t
            assert all(e.type == "SERVER_TIMEOUT" and "the client's deadline" in str(e)
                       for e in held), {str(e) for e in held}
            # Her waiting requests went with her calls: her share is hers again.
            with DRPCClient("127.0.0.1", conf=c.users["mallory"], timeout=10) as mallory:
                assert poll_for(lambda: _drpc_error(mallory, "echo", "mallory ok") is None,
                                timeout=5, what="mallory's share back")
        with DRPCClient("127.0.0.1", conf=c.users["stranger"], timeout=10) as stranger:
            with pytest.raises(DRPCExecutionException, match="cannot reach") as info:
                stranger.execute("echo", "alice from a stranger")
            assert info.value.type == "UNAVAILABLE"
        print(f"\n200 unserved calls refused in {unserved_secs:.2f} s; alice's echo took at "
              f"most {max(took):.2f} s while mallory held {share} of {DRPC_THREADS} threads "
              f"for {held_secs:.1f} s")
    finally:
        stop.set()
        server.join(5)
    probe.victim_unharmed()


def _drpc_error(client: DRPCClient, function: str, args: str) -> DRPCExecutionException | None:
    try:
        client.execute(function, args)
    except DRPCExecutionException as e:
        return e
    return None


def _supervisor_tls(c: AbuseCluster) -> dict:
    """The supervisors' certificate: what a DRPC topology's workers present."""
    return dict(a[2:].split("=", 1) for a in c.daemon_tls["supervisor"])


# --- finding 11: the logviewer and hard links ---------------------------------------------

def test_the_logviewer_serves_no_hard_link_into_its_logs(abuse, probe):
    """Finding 11: a topology's code runs as the supervisor's user, so it can hard-link the
    supervisor's key into the log directory (made here by the test, as that code would);
    the logviewer served it to every holder of the HTTP token."""
    c = abuse
    logs = c.sup_dirs[0] / "logs"
    key = Path(c.supervisor_key).read_bytes()
    stolen, linked = logs / "word-count-stolen.log", logs / "word-count-linked.log"
    os.link(c.supervisor_key, stolen)
    os.symlink(c.supervisor_key, linked)
    try:
        lv = f"http://127.0.0.1:{c.lv_port}"
        for url in (f"{lv}/log?file={stolen.name}", f"{lv}/api/v1/log?file={stolen.name}",
                    f"{lv}/download?file={stolen.name}"):
            status, body = c.http(url)
            assert status == 400, (url, status)
            assert "'word-count-stolen.log' has other hard links (another file's contents); " \
                   "refused" in json.dumps(body), body
            assert key.decode() not in json.dumps(body)
        for url in (f"{lv}/log?file={linked.name}",
                    f"{lv}/log?file=..%2F..%2Fpki%2Fsupervisor.key"):
            status, body = c.http(url)
            assert status == 400 and key.decode() not in json.dumps(body), (url, status, body)
        status, index = c.http(f"{lv}/")
        assert status == 200 and "word-count-stolen" not in json.dumps(index)
        assert "word-count-linked" not in json.dumps(index)
        # alice's worker log on that host is served as before.
        port = next(p for (h, p) in probe.workers if h == "127.0.0.1")
        name = next(p.name for p in logs.glob(f"word-count-*-{port}.log"))
        status, page = c.http(f"{lv}/api/v1/log?file={name}")
        assert status == 200 and "worker" in json.dumps(page), (status, str(page)[:300])
    finally:
        stolen.unlink()
        linked.unlink()
    probe.victim_unharmed()


# --- finding 12: malformed requests ---------------------------------------------------------

def test_malformed_requests_are_refused_as_the_callers_mistake(abuse, probe):
    """Finding 12: bytes that are no protobuf message were INTERNAL ("Exception
    deserializing request"), an empty shell command was accepted, a REST kill wait of 10^30
    was a 500."""
    c = abuse
    garbage = b"\xff\xff\xff\xff garbage"
    with c.channel("mallory") as channel:
        for method in ("SubmitTopology", "KillTopology", "SetLogConfig", "GetTopologyInfo",
                       "SendSupervisorWorkerHeartbeats", "BeginFileUpload"):
            with pytest.raises(grpc.RpcError) as info:
                channel.unary_unary(f"/squall.Nimbus/{method}")(garbage, timeout=10)
            e = info.value
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (method, e)
            assert f"{method}: the request ({len(garbage)} bytes) is not a valid message of " \
                   "this call" in e.details() and "proto/nimbus.proto" in e.details(), e
    for port, method in ((c.drpc_port, "/squall.drpc.DistributedRPC/Execute"),
                         (c.drpc_invocations_port,
                          "/squall.drpc.DistributedRPCInvocations/FetchRequest")):
        with c.channel("mallory", port) as channel:
            with pytest.raises(grpc.RpcError) as info:
                channel.unary_unary(method)(garbage, timeout=10)
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value
        assert "not a valid message of this call" in info.value.details()
    # A shell component with no command is refused at submit, naming it.
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 1)
    b.set_bolt("split", ShellBolt(["python3", "split.py"], ["word"]), 1) \
        .shuffle_grouping("numbers")
    topology = to_proto(b.create_topology())
    topology.bolts["split"].bolt_object.shell.ClearField("command")
    topology.bolts["split"].bolt_object.shell.script = ""
    with c.client("mallory") as mallory:
        with pytest.raises(InvalidRequest, match="component 'split': its shell command is "
                                                 "empty"):
            mallory.submit("empty-shell", "", "{}", topology)
        assert [t.name for t in mallory.list().topologies] == ["word-count"]
    # The REST API: a kill wait past 2^31-1 s is a 400 saying the range; without the token,
    # a 401 before anything is parsed.
    tid = c.victim_tid()
    for wait in (10 ** 30, -1, "soon"):
        status, err = c.api(f"topology/{tid}/kill/{wait}", "POST")
        assert status == 400 and "wait time" in err["errorMessage"], (wait, status, err)
    assert "0..2147483647 seconds, got 10000000000" in \
        c.api(f"topology/{tid}/kill/{10 ** 30}", "POST")[1]["errorMessage"]
    assert c.http(f"http://127.0.0.1:{c.ui_port}/api/v1/topology/{tid}/kill/0", "POST",
                  token=False)[0] == 401
    assert [(t["id"], t["status"]) for t in c.ok("topology/summary")["topologies"]] == \
        [(tid, "ACTIVE")]
    probe.victim_unharmed()
