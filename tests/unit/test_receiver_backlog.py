"""The receiver leaves frames in its socket while a queue of its loop is backlogged
(Receiver.drain with queue.backlogged), but always takes one frame a round, so a sender
never finds the socket full for as long as the backlog lasts. Runs on the compiled build
and, in CI's pure subset, on the source."""

from __future__ import annotations

from collections import deque

import pytest
import zmq

from squall.worker.receiver import Receiver


class _Filling(Receiver):
    """Each frame puts its length in items into ``self.q`` (no decoding here)."""

    def handle(self, frame):
        self.q.extend(range(len(frame)))


@pytest.fixture()
def pair():
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind("inproc://rx")
    push = ctx.socket(zmq.PUSH)
    push.connect("inproc://rx")
    yield push, pull
    push.close(0)
    pull.close(0)
    ctx.term()


def _receiver(pull, q):
    rx = _Filling.__new__(_Filling)
    rx.sock = pull
    rx.q = q
    return rx


def _wait_readable(pull):
    assert pull.poll(2000, zmq.POLLIN)


@pytest.mark.parametrize("queued, frames, limit, taken, left", [
    (0, 10, 250, 3, 7),        # 100 items a frame: stops once the queue holds 250 or more
    (0, 10, 10_000, 10, 0),    # never backlogged: up to max_frames
    (500, 10, 250, 1, 9),      # backlogged already: one frame, no more
    (0, 3, 0, 1, 2),           # limit 0: a frame a round
])
def test_drain_stops_at_the_backlog_after_one_frame(pair, queued, frames, limit, taken, left):
    push, pull = pair
    q = deque(range(queued))
    for _ in range(frames):
        push.send(b"x" * 100)
    _wait_readable(pull)
    rx = _receiver(pull, q)
    assert rx.drain(64, [deque(), q], limit) == taken
    assert len(q) == queued + 100 * taken
    assert rx.drain(64) == left  # without queues: everything that waits
    assert rx.drain(64, [q], limit) == 0


def test_drain_without_queues_takes_up_to_max_frames(pair):
    push, pull = pair
    q = deque()
    for _ in range(5):
        push.send(b"y" * 10)
    _wait_readable(pull)
    rx = _receiver(pull, q)
    assert rx.drain(2) == 2
    assert rx.drain(64) == 3
