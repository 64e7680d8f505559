"""worker/curve.py on real ZeroMQ sockets (loopback): members get through, nobody else."""

import threading

import pytest
import zmq

from squall.client.curve import keys_of, topology_keys
from squall.worker.curve import Membership


@pytest.fixture
def served():
    ctx = zmq.Context()
    refused = []
    keys = keys_of(topology_keys())
    m = Membership(ctx, keys, lambda: refused.append(1), "test worker")
    server = ctx.socket(zmq.PULL)
    server.setsockopt(zmq.LINGER, 0)
    m.serve(server)
    port = server.bind_to_random_port("tcp://127.0.0.1")
    clients = []

    def client(public=None, secret=None, server_key=None):
        c = ctx.socket(zmq.PUSH)
        c.setsockopt(zmq.LINGER, 0)
        if public is not None:
            c.curve_publickey, c.curve_secretkey, c.curve_serverkey = public, secret, server_key
        c.connect(f"tcp://127.0.0.1:{port}")
        clients.append(c)
        return c
    yield m, server, client, refused, keys
    for c in clients:
        c.close(0)
    server.close(0)
    m.close()
    ctx.term()


def received(server, timeout_ms=500):
    return server.recv(zmq.NOBLOCK) if server.poll(timeout_ms) else None


def wait_for(pred, secs=5.0):
    done = threading.Event()
    for _ in range(int(secs / 0.05)):
        if pred():
            return True
        done.wait(0.05)
    return False


def test_a_member_gets_through_and_strangers_are_refused_and_counted(served):
    m, server, client, refused, keys = served
    member = client(keys.public, keys.secret, keys.public)
    member.send(b"hello")
    assert received(server, 5000) == b"hello"
    pub, sec = zmq.curve_keypair()
    client(pub, sec, keys.public).send(b"forged")  # knows the server key, not the secret
    client().send(b"plain")                        # no CURVE at all
    assert received(server) is None
    assert wait_for(lambda: len(refused) >= 2), refused


def test_with_its_zap_handler_gone_a_worker_admits_nobody(served):
    """libzmq admits any CURVE client that knows the server key when no ZAP handler runs;
    the enforced domain refuses instead."""
    m, server, client, refused, keys = served
    m._auth.stop()
    pub, sec = zmq.curve_keypair()
    client(pub, sec, keys.public).send(b"forged")
    assert received(server, 1000) is None
