"""Outbound tuples of one executor thread: local delivery or batched frames to other workers.

Tuples for tasks in this worker become :class:`~squall.client.tuple.Tuple`
objects handed straight to the target executor's queue, never serialized.
Tuples for other workers are appended to a per-worker batch, sent as one
frame when it holds ``topology.transfer.batch.size`` tuples, when
``topology.batch.flush.interval.millis`` has passed, or when the executor is
about to idle. Each executor thread owns its own PUSH sockets (ZeroMQ
sockets are not thread-safe), which also keeps per source/target FIFO order.
"""

from __future__ import annotations

import logging
import time

import zmq

from ..client import config as cfg
from .frame import Codec
from .state import WorkerState

log = logging.getLogger("squall.worker.transfer")


class Transfer:
    """Owned by one executor thread; not thread-safe."""

    def __init__(self, ws: WorkerState):
        self.ws = ws
        self.batch_size = int(ws.conf.get(cfg.TOPOLOGY_TRANSFER_BATCH_SIZE, 500))
        self.flush_interval = float(ws.conf.get(cfg.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS, 1)) / 1000
        self.codec = Codec(bool(ws.conf.get(cfg.TOPOLOGY_FALL_BACK_ON_PICKLE, True)))
        self.task_worker = ws.task_worker
        self.out: dict[str, list] = {}
        self.socks: dict[str, zmq.Socket] = {}
        self.buffered = 0
        self.last_flush = time.monotonic()

    def remote(self, task: int, wire: list) -> None:
        """Queue ``wire`` (``[dest, src, stream, values, ids]``) for ``task``'s worker."""
        w = self.task_worker[task]
        buf = self.out.get(w)
        if buf is None:
            buf = self.out[w] = []
        buf.append(wire)
        self.buffered += 1
        if len(buf) >= self.batch_size:
            self._send(w, buf)
            self.out[w] = []

    def _sock(self, w: str) -> zmq.Socket:
        s = self.socks.get(w)
        if s is None:
            s = self.ws.zctx.socket(zmq.PUSH)
            s.setsockopt(zmq.SNDHWM, 10_000)
            s.setsockopt(zmq.LINGER, 2000)
            s.connect(self.ws.endpoints[w])
            self.socks[w] = s
        return s

    def _send(self, w: str, batch: list) -> None:
        self.buffered -= len(batch)
        frame = self.codec.data(batch)
        try:
            self._sock(w).send(frame, zmq.NOBLOCK)
        except zmq.Again:
            # The peer stopped reading (dead or gone): drop; the acker's timeout replays.
            self.ws.dropped_batches += 1
            log.warning("topology=%s dropped a batch of %d tuples for worker %s: its send "
                        "queue is full (is the worker alive?)", self.ws.topology_id,
                        len(batch), w)

    def flush(self) -> None:
        if self.buffered:
            for w, buf in self.out.items():
                if buf:
                    self._send(w, buf)
                    self.out[w] = []
        self.last_flush = time.monotonic()

    def close(self) -> None:
        self.flush()
        for s in self.socks.values():
            s.close()
        self.socks.clear()
