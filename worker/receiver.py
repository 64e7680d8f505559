# cython: annotation_typing=False
"""The receive side: one PULL socket per worker, frames decoded into executor queues.

Owned by the worker's event loop (:mod:`squall.worker.loop`), which polls
the socket and calls :meth:`Receiver.drain`.

Binds ``tcp://host:port`` (peers on other hosts) and, when the assignment
names an IPC directory, ``ipc://`` (peers on this host). Every frame is
validated; a malformed frame, or a tuple for a task this worker does not run
or on a stream its source does not declare, is dropped and logged (rate
limited) and counted in the heartbeat. The worker keeps running.
"""

from __future__ import annotations

import logging
import sys
import time
from array import array

import zmq

from ..client.tuple import Fields, Tuple, new_tuple
from .frame import BACKPRESSURE, DATA, GROUPED, HELLO, LOAD, PIPE_HWM, BadFrame, decode
from .state import WorkerState
from .zmqraw import recv_nowait

log = logging.getLogger("squall.worker.receiver")

_SYS_FIELDS = Fields(["payload"])
_SWAP = sys.byteorder != "little"  # the pairs travel little-endian
_SYSTEM_STREAMS = frozenset(("__ack_init", "__ack_ack", "__ack_fail", "__ack_reset_timeout"))


class Receiver:
    """Owns the worker's inbound socket; used only from the event loop's thread."""

    def __init__(self, ws: WorkerState):
        self.ws = ws
        self.sock = ws.zctx.socket(zmq.PULL)
        self.sock.setsockopt(zmq.RCVHWM, PIPE_HWM)
        self.sock.setsockopt(zmq.LINGER, 0)
        # Refuse oversized messages at the transport (ZeroMQ drops the connection before
        # buffering one): a peer of this topology never sends more than topology.max.frame.bytes.
        self.sock.setsockopt(zmq.MAXMSGSIZE, ws.max_frame_bytes)
        if ws.membership is not None:
            ws.membership.serve(self.sock)  # encrypted; only the topology's workers connect
        a = ws.assignment
        self.sock.bind(f"tcp://{a.host}:{a.port}")
        self.ipc = None
        if a.ipc_dir:
            self.ipc = f"ipc://{a.ipc_dir}/{ws.topology_id}-{a.port}.sock"
            self.sock.bind(self.ipc)
        self._last_warn = 0.0
        self._suppressed = 0
        #: (src_task, stream) -> (component, fields), filled lazily.
        self._src: dict[tuple[int, str], tuple[str, Fields]] = {}

    def drain(self, max_frames: int = 64) -> int:
        """Handle up to ``max_frames`` waiting frames without blocking; returns how many."""
        sock = self.sock
        n = 0
        while n < max_frames:
            frame = recv_nowait(sock)  # keeps the GIL (zmqraw: why)
            if frame is None:
                break
            n += 1
            self.handle(frame)
        return n

    def close(self) -> None:
        self.sock.close(0)

    def _drop(self, what: str) -> None:
        self.ws.dropped_frames += 1
        now = time.monotonic()
        if now - self._last_warn >= 5.0:
            extra = f" ({self._suppressed} more dropped since the last warning)" \
                if self._suppressed else ""
            log.warning("topology=%s worker=%s dropped a bad frame: %s%s",
                        self.ws.topology_id, self.ws.worker_id, what, extra)
            self._last_warn = now
            self._suppressed = 0
        else:
            self._suppressed += 1

    def handle(self, frame: bytes) -> None:
        try:
            msg = decode(frame, self.ws.values)
        except BadFrame as exc:
            self._drop(f"{exc} ({len(frame)} bytes)")
            return
        if msg[1] == BACKPRESSURE:
            if msg[2] in self.ws.live_workers:
                self.ws.bp.remote(msg[2], msg[3])
            else:
                self._drop(f"backpressure from unknown worker {msg[2]!r}")
            return
        if msg[1] == LOAD:
            if msg[2] in self.ws.live_workers:  # replaced whole: the main thread reads it
                self.ws.peer_loads[msg[2]] = {t: v / 1000 for t, v in msg[3].items()}
            else:
                self._drop(f"load from unknown worker {msg[2]!r}")
            return
        if msg[1] == HELLO:
            if msg[2] in self.ws.live_workers:
                self.ws.heard_from(msg[2], msg[3])
            else:
                self._drop(f"hello from unknown worker {msg[2]!r}")
            return
        if msg[1] == GROUPED:
            self._deliver_groups(msg[2])
            return
        assert msg[1] == DATA
        self._deliver(msg[2])

    def _deliver_groups(self, groups: list) -> None:
        """A GROUPED frame's tuples into their executors' queues: each group's destination
        and source looked up once; malformed groups and tuples dropped and counted."""
        deliver = self.ws.deliver
        queues = self.ws.queues
        bad = 0
        total = 0
        for g in groups:
            vals = None
            try:
                if type(g) is not list or len(g) != 6:
                    raise ValueError("not a 6-entry group")
                vals = g[3]
                if type(vals) is not list:
                    vals = None
                    raise TypeError("values must be a list")
                raw = g[4]
                several = g[5]
                pv = None
                if raw is not None:
                    if type(raw) is not bytes or len(raw) != 16 * len(vals):
                        raise TypeError("pairs must be 16 bytes per tuple")
                    pairs = array("Q")
                    pairs.frombytes(raw)
                    if _SWAP:
                        pairs.byteswap()
                    pv = pairs
                if several is not None and type(several) is not dict:
                    raise TypeError("ids of tuples in several trees must be a map")
                dest = g[0]
                src_task = g[1]
                stream = g[2]
                d = deliver[dest]
                meta = self._src.get((src_task, stream))
                if meta is None:
                    meta = self._source(src_task, stream)
            except (TypeError, ValueError, KeyError):
                n = len(vals) if vals is not None else 1
                bad += n
                total += n
                continue
            comp = meta[0]
            fields = meta[1]
            q = queues.get(dest)  # a single-task executor's queue: put to without a call
            n = len(vals)
            total += n
            for i in range(n):
                values = vals[i]
                if type(values) is not list:
                    bad += 1
                    continue
                tup = new_tuple(values, comp, stream, src_task, fields)
                if pv is not None and pv[2 * i]:
                    tup.root = pv[2 * i]
                    tup.edge = pv[2 * i + 1]
                if several is not None:
                    ids = several.get(i)
                    if ids is not None:
                        if type(ids) is not dict:
                            bad += 1
                            continue
                        tup.ids = ids
                if q is not None:
                    q.put(tup)
                else:
                    d(tup)
        if bad:
            self.ws.dropped_tuples += bad
            self._drop(f"{bad} malformed tuple(s) or tuple(s) for unknown tasks/streams "
                       f"in a batch of {total}")

    def _deliver(self, wires: list) -> None:
        """A data frame's tuples into their executors' queues; malformed ones dropped."""
        deliver = self.ws.deliver
        bad = 0
        # A batch's tuples mostly come from one task on one stream: its source is looked up
        # once per run of them, not per tuple.
        last_task = last_stream = comp = fields = None
        for wire in wires:
            try:
                if type(wire) is not list or len(wire) != 5:
                    raise ValueError("not a 5-entry tuple")
                dest = wire[0]
                src_task = wire[1]
                stream = wire[2]
                values = wire[3]
                ids = wire[4]
                d = deliver[dest]
                if src_task != last_task or stream != last_stream or last_task is None:
                    meta = self._src.get((src_task, stream))
                    if meta is None:
                        meta = self._source(src_task, stream)
                    last_task = src_task
                    last_stream = stream
                    comp = meta[0]
                    fields = meta[1]
                if type(values) is not list or (ids is not None and type(ids) is not dict):
                    raise TypeError("values must be a list and ids a map")
            except (TypeError, ValueError, KeyError):
                bad += 1
                continue
            d(Tuple(values, comp, stream, src_task, ids, fields))
        if bad:
            self.ws.dropped_tuples += bad
            self._drop(f"{bad} malformed tuple(s) or tuple(s) for unknown tasks/streams "
                       f"in a batch of {len(wires)}")

    def _source(self, src_task: int, stream: str) -> tuple[str, Fields]:
        comp = self.ws.task_component[src_task]  # KeyError: unknown source task
        fields = self.ws.fields.get((comp, stream))
        if fields is None:
            if stream not in _SYSTEM_STREAMS:
                raise KeyError(stream)
            fields = _SYS_FIELDS
        meta = self._src[(src_task, stream)] = (comp, fields)
        return meta
