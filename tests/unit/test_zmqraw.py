"""Non-blocking send and receive that keep the GIL (squall/worker/zmqraw.py).

The event loop receives every round and sends every flush; when pyzmq released the GIL
around each of those calls, a thread waiting for the GIL (a spout on its own thread, the
heartbeat, the profiler's sampler) got it only by luck: CPython restarts the waiter's
switch interval at every release. These tests tell a release apart deterministically: with
a switch interval of a minute, another thread runs Python only while this one lets go."""

import sys
import threading
import time

import pytest
import zmq

from squall import _compiled
from squall.worker import zmqraw


@pytest.fixture
def pair():
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.setsockopt(zmq.LINGER, 0)
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    push = ctx.socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 0)
    push.connect(f"tcp://127.0.0.1:{port}")
    try:
        yield push, pull
    finally:
        push.close(0)
        pull.close(0)
        ctx.term()


def receive(pull, timeout=10.0):
    """The next message, waiting for it in poll (the loop's way)."""
    assert pull.poll(int(timeout * 1000)), "nothing arrived"
    frame = zmqraw.recv_nowait(pull)
    assert frame is not None
    return frame


def test_the_compiled_build_calls_libzmq_itself():
    """A build that cannot find libzmq's functions falls back quietly: catch it here."""
    if _compiled.pure() or _compiled.extension_path("squall.worker.zmqraw") is None:
        assert not zmqraw.raw()
        pytest.skip("the source runs here")
    assert zmqraw.raw(), "compiled, but libzmq's functions were not found"
    assert zmqraw.libzmq_addresses() is not None


def test_send_and_receive_keep_bytes_and_order(pair):
    push, pull = pair
    assert zmqraw.recv_nowait(pull) is None  # nothing waiting
    frames = [b"", b"x", bytes(range(256)) * 300, b"\x00" * 70_000]  # 70 kB: pyzmq's no-copy size
    for f in frames:
        assert zmqraw.send_nowait(push, f) is True
    assert [receive(pull) for _ in frames] == frames
    assert zmqraw.recv_nowait(pull) is None


def test_a_full_pipe_says_so_instead_of_blocking():
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)  # no peer: nothing leaves, and the queue fills
    push.setsockopt(zmq.LINGER, 0)
    push.setsockopt(zmq.SNDHWM, 4)
    push.connect("tcp://127.0.0.1:9")  # never accepted: frames wait in the pipe
    try:
        sent = 0
        while zmqraw.send_nowait(push, b"frame"):
            sent += 1
            assert sent <= 100, "the high-water mark of 4 never stopped a send"
        assert zmqraw.send_nowait(push, b"frame") is False
    finally:
        push.close(0)
        ctx.term()


def test_other_errors_are_pyzmqs_own(pair):
    push, pull = pair
    assert zmqraw.send_nowait(push, bytearray(b"not bytes")) is True  # pyzmq sends it
    assert receive(pull) == b"not bytes"
    pull.close(0)
    with pytest.raises(zmq.ZMQError) as e:
        zmqraw.recv_nowait(pull)
    assert e.value.errno == zmq.ENOTSOCK
    push.close(0)
    with pytest.raises(zmq.ZMQError) as e:
        zmqraw.send_nowait(push, b"x")
    assert e.value.errno == zmq.ENOTSOCK


class Releases:
    """Counts another thread's turns while the GIL is let go: its loop sleeps (releasing
    the GIL) between turns, and with a minute's switch interval it can take the GIL back
    only when the measured code releases it."""

    def __init__(self):
        self.turns = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self.turns += 1
            time.sleep(0.0001)

    def __enter__(self):
        self._interval = sys.getswitchinterval()
        sys.setswitchinterval(60.0)
        self._thread.start()
        deadline = time.monotonic() + 10
        while self.turns < 3:  # sleeping releases: the thread is up and taking turns
            assert time.monotonic() < deadline, "the counting thread never ran"
            time.sleep(0.001)
        return self

    def during(self, fn, n):
        before = self.turns
        for _ in range(n):
            fn()
        return self.turns - before

    def __exit__(self, *exc):
        self._stop.set()
        sys.setswitchinterval(self._interval)
        self._thread.join(10)


def test_pyzmqs_own_receive_releases_the_gil_so_the_harness_sees_a_release(pair):
    _, pull = pair

    def pyzmq_recv():
        try:
            pull.recv(zmq.NOBLOCK)
        except zmq.Again:
            pass
    with Releases() as r:
        assert r.during(pyzmq_recv, 20_000) > 0


def test_an_empty_receive_keeps_the_gil(pair):
    """Every round of the loop does one; in the source too (it asks the socket's events)."""
    _, pull = pair
    with Releases() as r:
        assert r.during(lambda: zmqraw.recv_nowait(pull), 20_000) == 0


def test_sending_and_receiving_frames_keep_the_gil_in_the_compiled_build(pair):
    if not zmqraw.raw():
        pytest.skip("the source sends and receives frames through pyzmq, which lets go")
    push, pull = pair
    frame = b"f" * 2000
    with Releases() as r:
        sent = r.during(lambda: zmqraw.send_nowait(push, frame), 100)
    assert sent == 0
    assert pull.poll(10_000)
    deadline = time.monotonic() + 10
    got = 0
    with Releases() as r:
        while got < 100:
            assert time.monotonic() < deadline, f"{got} of 100 frames arrived"
            before = r.turns
            while zmqraw.recv_nowait(pull) == frame:
                got += 1
            assert r.turns == before  # every receive held on; only the wait below lets go
            pull.poll(100)
