# cython: annotation_typing=False
"""Outbound tuples of one executor thread: local delivery or batched frames to other workers.

Tuples for tasks in this worker become :class:`~squall.client.tuple.Tuple`
objects handed straight to the target executor's queue, never serialized.
Tuples for other workers are appended to a per-worker batch, sent as one
frame when it holds ``topology.transfer.batch.size`` tuples, when
``topology.batch.flush.interval.millis`` has passed, or when the executor is
about to idle. Each executor thread owns its own PUSH sockets (ZeroMQ
sockets are not thread-safe), which also keeps per source/target FIFO order.

The pipes to peers are small (:data:`~squall.worker.frame.PIPE_HWM`
frames). When one is full the peer is not keeping up (or is gone): frames
wait in a local overflow, in order, and this worker reports congestion so
spouts stop, as Storm 2 does when a send buffer is full. The overflow is
capped; past the cap the oldest frames are dropped and the acker's timeout
replays their tuple trees (not under barrier checkpointing, which has no acker).
"""

from __future__ import annotations

import logging
import time
from collections import deque

import zmq

from ..client import config as cfg
from ..client.stateful import barrier_mode
from .frame import PIPE_HWM, Codec
from .state import WorkerState

log = logging.getLogger("squall.worker.transfer")

#: Frames kept per blocked peer before the oldest are dropped.
MAX_OVERFLOW_FRAMES = 256


class Transfer:
    """Owned by one executor thread; not thread-safe."""

    def __init__(self, ws: WorkerState):
        self.ws = ws
        self.batch_size = int(ws.conf.get(cfg.TOPOLOGY_TRANSFER_BATCH_SIZE, 500))
        self.flush_interval = float(ws.conf.get(cfg.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS, 1)) / 1000
        self.codec = Codec(ws.values)
        self.task_worker = ws.task_worker
        self.out: dict[str, list] = {}
        self.socks: dict[str, zmq.Socket] = {}
        self.buffered = 0
        self.last_flush = time.monotonic()
        #: worker id -> frames the full pipe did not take yet (oldest first).
        self.blocked: dict[str, deque[bytes]] = {}
        #: Past the cap the oldest waiting frame is dropped and the acker replays its trees;
        #: barrier checkpointing has no acker, so it keeps every frame (spouts are paused
        #: while a pipe is full, and a dead peer's restart starts a recovery anyway).
        self.may_drop = not barrier_mode(ws.conf)
        self.peers_version = ws.peers_version

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
            s.setsockopt(zmq.SNDHWM, PIPE_HWM)
            s.setsockopt(zmq.LINGER, 2000)
            if self.ws.membership is not None:
                self.ws.membership.dial(s)
            s.connect(self.ws.endpoints[w])
            self.socks[w] = s
        return s

    def _send(self, w: str, batch: list) -> None:
        self.buffered -= len(batch)
        frame = self.codec.data(batch)
        if len(frame) > self.ws.max_frame_bytes:
            self._send_split(w, batch, len(frame))
            return
        self._send_frame(w, frame)

    def _send_split(self, w: str, batch: list, size: int) -> None:
        """A frame over topology.max.frame.bytes: send the batch in halves; a single tuple
        that big is dropped (the receiver would refuse it) and its tree fails by timeout."""
        if len(batch) == 1:
            self.ws.dropped_tuples += 1
            dest, src = batch[0][0], batch[0][1]
            self.ws.report_error(self.ws.task_component.get(src, "?"), src,
                                 f"a tuple of {size} bytes for task {dest} exceeds "
                                 f"topology.max.frame.bytes ({self.ws.max_frame_bytes}); it "
                                 "was dropped: raise the limit or send smaller values")
            return
        half = len(batch) // 2
        for part in (batch[:half], batch[half:]):
            self.buffered += len(part)
            self._send(w, part)

    def _send_frame(self, w: str, frame: bytes) -> None:
        waiting = self.blocked.get(w)
        if waiting is not None:
            waiting.append(frame)
            if len(waiting) > MAX_OVERFLOW_FRAMES and self.may_drop:
                waiting.popleft()
                self.ws.dropped_batches += 1
                log.warning("topology=%s worker %s is not reading: dropped the oldest waiting "
                            "batch (its tuple trees time out and replay)",
                            self.ws.topology_id, w)
            return
        try:
            self._sock(w).send(frame, zmq.NOBLOCK)
        except zmq.Again:
            self.blocked[w] = deque([frame])
            self.ws.bp.local(True)

    def _retry_blocked(self) -> None:
        for w in list(self.blocked):
            waiting = self.blocked[w]
            sock = self._sock(w)
            try:
                while waiting:
                    sock.send(waiting[0], zmq.NOBLOCK)
                    waiting.popleft()
            except zmq.Again:
                continue
            del self.blocked[w]
            self.ws.bp.local(False)

    def flush(self) -> None:
        if self.peers_version != self.ws.peers_version:
            self._forget_departed()
        if self.blocked:
            self._retry_blocked()
        if self.buffered:
            for w, buf in self.out.items():
                if buf:
                    self._send(w, buf)
                    self.out[w] = []
        self.last_flush = time.monotonic()

    def _forget_departed(self) -> None:
        """Drop batches, waiting frames and sockets of workers no longer in the assignment."""
        self.peers_version = self.ws.peers_version
        live = self.ws.live_workers
        for w in [w for w in self.out if w not in live]:
            batch = self.out.pop(w)
            self.buffered -= len(batch)
            self.ws.dropped_tuples += len(batch)
        for w in [w for w in self.blocked if w not in live]:
            del self.blocked[w]
            self.ws.bp.local(False)
        for w in [w for w in self.socks if w not in live]:
            self.socks.pop(w).close(0)

    def close(self) -> None:
        self.flush()
        for _ in self.blocked:
            self.ws.bp.local(False)
        self.blocked.clear()
        for s in self.socks.values():
            s.close()
        self.socks.clear()
