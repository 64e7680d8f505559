# cython: annotation_typing=False
"""Outbound tuples of one executor thread: local delivery or batched frames to other workers.

Tuples for tasks in this worker become :class:`~squall.client.tuple.Tuple`
objects handed straight to the target executor's queue, never serialized.
Tuples for other workers are appended to a per-worker batch (an :class:`Outbox`, grouped
by destination task, source task and stream: a GROUPED frame), sent as one
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
import sys
import time
from array import array
from collections import deque

import zmq

from ..client import config as cfg
from ..client.stateful import barrier_mode
from ..client.tuple import one_tree
from .frame import PIPE_HWM, Codec
from .state import WorkerState
from .zmqraw import send_nowait

try:
    import cython
    _COMPILED = cython.compiled
except ImportError:  # installed without Cython: this source runs as plain Python
    _COMPILED = False

log = logging.getLogger("squall.worker.transfer")

#: The byte order of the pairs on the wire (little-endian, whatever the hosts').
_SWAP = sys.byteorder != "little"

#: Frames kept per blocked peer before the oldest are dropped.
MAX_OVERFLOW_FRAMES = 256


class Outbox:
    """The tuples waiting for one worker, as the GROUPED frame's groups
    ``[dest, src, stream, [values, ...], pairs, several]`` (see frame.py): a tuple of one tree
    adds its root and edge ids to ``pairs`` (an array of 64-bit integers, two per tuple, 0 0
    for an untracked one, bytes once taken), a tuple of several trees its ids map to
    ``several`` under its index.

    A channel (source task -> destination task) keeps its order: its tuples join its latest
    group while they stay on one stream, and a tuple on another stream opens a new group
    after it, so a checkpoint barrier is never overtaken by the data behind it. Channels
    are not ordered with each other (nor are they in Storm).
    """

    __slots__ = ("worker", "groups", "index", "last", "n")

    def __init__(self, worker: str) -> None:
        #: The worker the box's tuples go to.
        self.worker = worker
        self.groups: list = []
        #: (dest, src) -> the channel's latest group in ``groups``.
        self.index: dict = {}
        #: The group added to last: a run of tuples to one task is found without a lookup.
        self.last: list | None = None
        #: Tuples held.
        self.n = 0

    def _group(self, task: int, src: int, stream: str) -> list:
        g = self.last
        if g is None or g[0] != task or g[1] != src or g[2] != stream:
            key = (task, src)
            g = self.index.get(key)
            if g is None or g[2] != stream:  # a new stream on the channel: after the last
                g = self.index[key] = [task, src, stream, [], None, None]
                self.groups.append(g)
            self.last = g
        return g

    def add(self, task: int, src: int, stream: str, values: list, ids: dict | None) -> int:
        """Hold one tuple; returns how many are held."""
        if ids:
            pair = one_tree(ids)
            if pair is not None:
                return self.add_tracked(task, src, stream, values, pair[0], pair[1])
        g = self._group(task, src, stream)
        vals = g[3]
        if ids:  # several trees: the map, under the tuple's index
            several = g[5]
            if several is None:
                several = g[5] = {}
            several[len(vals)] = ids
        vals.append(values)
        pairs = g[4]
        if pairs is not None:
            self._pair(pairs, 0, 0)
        self.n += 1
        return self.n

    def add_tracked(self, task: int, src: int, stream: str, values: list, root: int,
                    edge: int) -> int:
        """Hold one tuple of one tree; returns how many are held."""
        g = self._group(task, src, stream)
        vals = g[3]
        pairs = g[4]
        if pairs is None:  # the group's first tracked tuple: 0 0 for those before it
            pairs = g[4] = array("Q", bytes(16 * len(vals)))
        vals.append(values)
        self._pair(pairs, root, edge)
        self.n += 1
        return self.n

    def _pair(self, pairs: array, root: int, edge: int) -> None:
        if _COMPILED:
            _append_pair(pairs, root, edge)  # noqa: F821  (transfer.pxd: no int objects)
        else:
            pairs.append(root)
            pairs.append(edge)

    def take(self) -> list:
        """The groups held (their pairs as little-endian bytes), and the box emptied."""
        groups = self.groups
        for g in groups:
            pairs = g[4]
            if pairs is not None:
                if _SWAP:
                    pairs.byteswap()
                g[4] = pairs.tobytes()
        self.groups = []
        self.index = {}
        self.last = None
        self.n = 0
        return groups


def _count(groups: list) -> int:
    return sum(len(g[3]) for g in groups)


def _halves(groups: list) -> tuple[list, list]:
    """A batch of more than one tuple split in two (a frame too big to send whole)."""
    if len(groups) > 1:
        half = len(groups) // 2
        return groups[:half], groups[half:]
    dest, src, stream, vals, pairs, several = groups[0]
    half = len(vals) // 2
    out = []
    for lo, hi in ((0, half), (half, len(vals))):
        out.append([[dest, src, stream, vals[lo:hi],
                     pairs[16 * lo:16 * hi] if pairs is not None else None,
                     {i - lo: ids for i, ids in several.items() if lo <= i < hi} or None
                     if several is not None else None]])
    return out[0], out[1]


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
        #: The assignment's version, and the one the last flush followed.
        self.peers_version = ws.peers_version
        self.peers_seen = ws.peers_version.n
        #: Each task's outbox by task id, made again whenever the assignment's version
        #: moves (a task's worker may change): one list index per remote tuple instead of
        #: two dict lookups.
        self.boxes: list = []
        self.boxes_ver = -1

    def remote(self, task: int, src: int, stream: str, values: list, ids: dict | None
               ) -> None:
        """Queue a tuple from task ``src`` on ``stream`` for ``task``'s worker."""
        box = self._box(task)
        self.buffered += 1
        if box.add(task, src, stream, values, ids) >= self.batch_size:
            self._send_box(box)

    def remote_tracked(self, task: int, src: int, stream: str, values: list, root: int,
                       edge: int) -> None:
        """``remote`` for a tuple of one tree, its root and edge ids as two integers."""
        box = self._box(task)
        self.buffered += 1
        if box.add_tracked(task, src, stream, values, root, edge) >= self.batch_size:
            self._send_box(box)

    def _box(self, task: int) -> Outbox:
        """The outbox of ``task``'s worker."""
        if self.boxes_ver == self.peers_version.n and 0 <= task < len(self.boxes):
            box = self.boxes[task]
            if box is not None:
                return box
        if self.boxes_ver != self.peers_version.n:
            self.boxes_ver = self.peers_version.n  # read before task_worker: updated first
            self.boxes = [None] * (max(self.task_worker, default=-1) + 1)
        w = self.task_worker[task]
        box = self.out.get(w)
        if box is None:
            box = self.out[w] = Outbox(w)
        if 0 <= task < len(self.boxes):
            self.boxes[task] = box
        return box

    def _send_box(self, box: Outbox) -> None:
        """Send what ``box`` holds, emptying it."""
        n = box.n
        self._send(box.worker, box.take(), n)

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

    def _send(self, w: str, groups: list, n: int) -> None:
        """Send ``n`` tuples held as ``groups`` (an Outbox's) to worker ``w``."""
        self.buffered -= n
        frame = self.codec.grouped(groups)
        if len(frame) > self.ws.max_frame_bytes:
            self._send_split(w, groups, n, len(frame))
            return
        self._send_frame(w, frame)

    def _send_split(self, w: str, groups: list, n: int, size: int) -> None:
        """A frame over topology.max.frame.bytes: send the batch in halves; a single tuple
        that big is dropped (the receiver would refuse it) and its tree fails by timeout."""
        if n == 1:
            self.ws.dropped_tuples += 1
            dest, src = groups[0][0], groups[0][1]
            self.ws.report_error(self.ws.task_component.get(src, "?"), src,
                                 f"a tuple of {size} bytes for task {dest} exceeds "
                                 f"topology.max.frame.bytes ({self.ws.max_frame_bytes}); it "
                                 "was dropped: raise the limit or send smaller values")
            return
        for part in _halves(groups):
            k = _count(part)
            self.buffered += k
            self._send(w, part, k)

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
        if not send_nowait(self._sock(w), frame):  # keeps the GIL (zmqraw: why)
            self.blocked[w] = deque([frame])
            self.ws.bp.local(True)

    def _retry_blocked(self) -> None:
        for w in list(self.blocked):
            waiting = self.blocked[w]
            sock = self._sock(w)
            while waiting and send_nowait(sock, waiting[0]):
                waiting.popleft()
            if waiting:
                continue
            del self.blocked[w]
            self.ws.bp.local(False)

    def flush(self) -> None:
        if self.peers_seen != self.peers_version.n:
            self._forget_departed()
        if self.blocked:
            self._retry_blocked()
        if self.buffered:
            for box in self.out.values():
                if box.n:
                    self._send_box(box)
        self.last_flush = time.monotonic()

    def _forget_departed(self) -> None:
        """Drop batches, waiting frames and sockets of workers no longer in the assignment."""
        self.peers_seen = self.peers_version.n
        self.boxes_ver = -1  # outboxes of departed workers go below: none stays cached
        live = self.ws.live_workers
        for w in [w for w in self.out if w not in live]:
            box = self.out.pop(w)
            self.buffered -= box.n
            self.ws.dropped_tuples += box.n
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
