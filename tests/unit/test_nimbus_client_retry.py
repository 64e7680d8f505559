"""NimbusClient retries a call whose connection could not be made (Storm's
storm.nimbus.retry.*): a Nimbus that starts, or finishes a handshake, a moment late answers;
a stopped one is still reported within about a second."""

import threading
import time
from concurrent import futures

import grpc
import pytest
from squall.client.errors import NimbusUnavailable
from squall.client.nimbus_client import NimbusClient
from squall.deploy.net import free_port
from squall.proto import nimbus_pb2 as pb
from squall.proto import nimbus_pb2_grpc as pb_grpc


class Answering(pb_grpc.NimbusServicer):
    def __init__(self):
        self.calls = 0

    def GetClusterInfo(self, request, context):
        self.calls += 1
        return pb.ClusterSummary()


def conf(port, **extra):
    return {"nimbus.seeds": ["127.0.0.1"], "nimbus.grpc.port": port, **extra}


def test_a_nimbus_that_starts_during_the_retries_answers_the_call_once():
    port = free_port()
    servicer = Answering()
    server = grpc.server(futures.ThreadPoolExecutor(2))
    pb_grpc.add_NimbusServicer_to_server(servicer, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    # Listening 0.15 s after the first attempt: inside the first retry's 0.3 s wait.
    starter = threading.Timer(0.15, server.start)
    starter.start()
    try:
        with NimbusClient(conf(port), timeout=5) as client:
            client.list()
        assert servicer.calls == 1
    finally:
        starter.join()
        server.stop(None)


def test_a_stopped_nimbus_is_reported_after_the_configured_retries(caplog):
    port = free_port()
    t0 = time.monotonic()
    with caplog.at_level("INFO", logger="squall.client"):
        with NimbusClient(conf(port, **{"storm.nimbus.retry.interval.millis": 100}),
                          timeout=5) as client, pytest.raises(NimbusUnavailable) as e:
            client.list()
    took = time.monotonic() - t0
    assert "cannot reach Nimbus at 127.0.0.1" in str(e.value)
    assert [r.getMessage().split("(")[-1] for r in caplog.records] == \
        ["retry 1 of 2)", "retry 2 of 2)"]
    assert 0.3 <= took < 5, took  # 0.1 + 0.2 s of waiting, and refused connections
    with NimbusClient(conf(port, **{"storm.nimbus.retry.times": 0}), timeout=5) as client, \
            pytest.raises(NimbusUnavailable):
        caplog.clear()
        client.list()
    assert not caplog.records
