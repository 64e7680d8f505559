"""DRPC end to end (issue 15, item 5): a real DRPC server with mutual TLS on loopback, DRPC
topologies on a StaticCluster of worker processes, clients on many threads.

Every wait is bounded by a configured timeout: an execute by ``drpc.request.timeout.secs``
(the server's) plus the client's margin, conditions by :func:`poll_for`.
"""

from __future__ import annotations

import threading

import pytest

from drpc_topos import FailOn
from squall.client.drpc import (DRPCClient, DRPCExecutionException, DRPCInvocationsClient,
                                LinearDRPCTopologyBuilder)
from squall.client.errors import PermissionDenied
from squall.deploy.certs import CertificateAuthority
from squall.drpc import DRPCServer
from squall.examples.reach import TWEETERS_DB, construct, reach_of

pytestmark = pytest.mark.integration

#: Long enough for the workers to start and answer the first request.
TIMEOUT = 60


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = CertificateAuthority(str(d / "ca"))
    certs = {name: ca.issue(name, server=name == "drpc")
             for name in ("drpc", "supervisor", "alice", "mallory")}
    certs["stranger"] = CertificateAuthority(str(d / "other-ca")).issue("supervisor")
    return certs


@pytest.fixture
def drpc(pki):
    """``drpc(timeout)``: a DRPC server with mutual TLS on free loopback ports."""
    started = []

    def start(timeout=TIMEOUT):
        conf = dict(pki["drpc"].conf(), **{"drpc.request.timeout.secs": timeout,
                                           "nimbus.supervisor.users": ["supervisor"]})
        server = DRPCServer(conf, host="127.0.0.1", port=0, invocations_port=0).start()
        started.append(server)
        return server
    yield start
    for server in started:
        server.close(reason="test")


def client_conf(pki, who, server):
    """What a client or a topology of principal ``who`` needs to reach ``server``."""
    conf = {"drpc.servers": ["127.0.0.1"], "drpc.port": server.port,
            "drpc.invocations.port": server.invocations_port,
            "drpc.request.timeout.secs": server.timeout}
    return dict(conf, **pki[who].conf()) if who != "anonymous" else conf


def test_concurrent_requests_each_get_their_own_reach(pki, drpc, cluster):
    server = drpc()
    # The workers fetch and answer as the supervisor (SECURITY.md: they run as its user).
    cluster(construct().create_topology(), client_conf(pki, "supervisor", server))
    urls = list(TWEETERS_DB) + ["notaurl.com"]
    with DRPCClient("127.0.0.1", conf=client_conf(pki, "alice", server)) as client:
        assert client.execute("reach", urls[0]) == str(reach_of(urls[0]))  # the topology is up
        got: dict[int, str] = {}
        errors: list[BaseException] = []

        def ask(i: int) -> None:
            try:
                got[i] = client.execute("reach", urls[i % len(urls)])
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=client.timeout)
    assert not errors, errors
    assert got == {i: str(reach_of(urls[i % len(urls)])) for i in range(20)}
    assert server.table.pending() == 0


def test_a_function_no_topology_serves_times_out_with_a_clear_error(pki, drpc):
    server = drpc(timeout=1.5)
    with DRPCClient("127.0.0.1", conf=client_conf(pki, "alice", server)) as client:
        with pytest.raises(DRPCExecutionException) as info:
            client.execute("nobody-serves-this", "x")
    e = info.value
    assert e.type == "SERVER_TIMEOUT" and e.function == "nobody-serves-this"
    assert e.request_id == "1"
    assert "DRPC request 1 for function 'nobody-serves-this' timed out after 1.5 s" in str(e)
    assert "drpc.request.timeout.secs" in str(e) and "no topology fetched it" in str(e)
    assert server.table.pending() == 0


def test_once_up_a_server_refuses_a_function_no_topology_serves_at_once(pki, drpc,
                                                                         monkeypatch):
    """A call to a function no spout asks for no longer waits out the request timeout
    (35 s with a 5 s request timeout, 600 s by default) holding an execute thread."""
    import time

    from squall.drpc.requests import RequestTable
    monkeypatch.setattr(RequestTable, "UNSERVED_SECS", 0.5)
    from zk_fixtures import poll_for
    server = drpc(timeout=30)
    # Up longer than UNSERVED_SECS: a spout serving the function would have asked by now.
    poll_for(lambda: time.monotonic() - server.table._started > RequestTable.UNSERVED_SECS,
             timeout=5, what="the server up for UNSERVED_SECS")
    with DRPCClient("127.0.0.1", conf=client_conf(pki, "alice", server)) as client:
        t0 = time.monotonic()
        with pytest.raises(DRPCExecutionException) as info:
            client.execute("nobody-serves-this", "x")
        took = time.monotonic() - t0
    e = info.value
    assert took < 10 and e.function == "nobody-serves-this", (took, e)  # not the 30 s
    assert "no DRPC spout asked this server for it" in str(e) and "drpc.servers" in str(e)
    assert server.table.pending() == 0


def test_a_failed_tuple_tree_fails_the_request_at_once(pki, drpc, cluster):
    server = drpc()
    builder = LinearDRPCTopologyBuilder("shout")
    builder.add_bolt(FailOn("bad"), 2)
    cluster(builder.create_topology(), client_conf(pki, "supervisor", server))
    with DRPCClient("127.0.0.1", conf=client_conf(pki, "alice", server)) as client:
        assert client.execute("shout", "good") == "good!"
        with pytest.raises(DRPCExecutionException) as info:
            client.execute("shout", "bad")
    assert info.value.type == "FAILED_REQUEST"
    assert "for function 'shout' failed in the topology" in str(info.value)


def test_unauthenticated_callers_are_refused_on_both_ports(pki, drpc):
    server = drpc(timeout=1)
    for who in ("anonymous", "stranger"):  # no certificate; one of another CA
        conf = client_conf(pki, who, server)
        with DRPCClient("127.0.0.1", conf=conf, timeout=10) as client:
            with pytest.raises(DRPCExecutionException, match="cannot reach") as info:
                client.execute("reach", "foo.com/blog/1")
            assert info.value.type == "UNAVAILABLE"
        invocations = DRPCInvocationsClient(conf, "127.0.0.1")
        try:
            with pytest.raises(DRPCExecutionException, match="cannot reach"):
                invocations.fetch_request("reach")
            with pytest.raises(DRPCExecutionException, match="cannot reach"):
                invocations.result("1", "forged")
        finally:
            invocations.close()
    assert server.table.pending() == 0


def test_only_the_clusters_daemons_use_the_invocations_port(pki, drpc):
    server = drpc(timeout=5)
    alice = DRPCInvocationsClient(client_conf(pki, "alice", server), "127.0.0.1")
    supervisor = DRPCInvocationsClient(client_conf(pki, "supervisor", server), "127.0.0.1")
    try:
        with pytest.raises(PermissionDenied, match="alice may not fetchRequest"):
            alice.fetch_request("reach")
        with pytest.raises(PermissionDenied, match="alice may not result"):
            alice.result("1", "forged")
        assert supervisor.fetch_request("reach") is None
    finally:
        alice.close()
        supervisor.close()


@pytest.mark.parametrize("method", ["/squall.drpc.DistributedRPC/Execute",
                                    "/squall.drpc.DistributedRPCInvocations/FetchRequest"])
def test_bytes_that_are_no_message_are_invalid_argument(pki, drpc, method):
    """gRPC's own answer to undecodable bytes is INTERNAL; a client's garbage is its own
    mistake, said as such, on both DRPC ports."""
    import grpc

    from squall.client.drpc.client import _channel
    server = drpc()
    port = server.port if "Invocations" not in method else server.invocations_port
    with _channel(client_conf(pki, "supervisor", server), f"127.0.0.1:{port}") as channel:
        with pytest.raises(grpc.RpcError) as info:
            channel.unary_unary(method)(b"\xff\xff\xff\xff garbage", timeout=10)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT, info.value.details()
    assert "not a valid message of this call" in info.value.details()
    assert "proto/drpc.proto" in info.value.details()


def test_trident_drpc_stream_sums_the_word_counts_it_queries(pki, drpc, cluster, tmp_path,
                                                              redis_conf):
    """Storm's TridentWordCount: a Trident word count into Redis, and new_drpc_stream("words")
    summing the stored counts of its argument's words; the answer is the JSON list of the
    stream's last tuples, one request a batch, many clients at once."""
    import json

    from squall.client.trident.line_files import TransactionalLineFiles
    from squall.client.trident.state.redis_map import RedisMapState
    from test_trident import write_input
    from trident_topos import word_count_drpc

    server = drpc()
    files, expected = write_input(tmp_path)
    topo = word_count_drpc(TransactionalLineFiles(files, batch_lines=50),
                           RedisMapState.transactional(None, "counts"))
    conf = dict(redis_conf, **client_conf(pki, "supervisor", server), **{
        "topology.workers": 2, "trident.transactional.state": "memory",
        "topology.trident.batch.emit.interval.millis": 20})
    lc = cluster(topo, conf, name="trident-drpc")
    final = json.dumps([[expected["w1"] + expected["common"]]])
    with DRPCClient("127.0.0.1", conf=client_conf(pki, "alice", server)) as client:
        # The counts grow batch by batch until every line is counted.
        lc.wait_for(lambda: client.execute("words", "w1 common nosuchword") == final,
                    timeout=TIMEOUT, what=f"the DRPC answer {final}")
        assert client.execute("words", "nosuchword") == json.dumps([[0]])  # a sum of nothing
        asked = [f"w{i} w{i + 1}" for i in range(10)]
        got: dict[int, str] = {}

        def ask(i: int) -> None:
            got[i] = client.execute("words", asked[i])
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(asked))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert got == {i: json.dumps([[sum(expected[w] for w in q.split())]])
                       for i, q in enumerate(asked)}
