# cython: annotation_typing=False, nonecheck=True
"""The collectors user code emits through: spout, bolt and basic-bolt flavours.

``emit`` resolves the stream's routers, draws edge ids for anchored tuples
(Storm's BoltOutputCollectorImpl/SpoutOutputCollectorImpl) and hands each
copy to a local executor or to the :class:`~squall.worker.transfer.Transfer`.
Acks are XOR-combined per root until the executor's batch ends, then sent to
the acker as one batched system tuple per acker task.

Thread-safety: a collector belongs to its executor's thread. Emitting from
another thread is not supported (as in Storm 2); such a thread hands its work back
with :meth:`OutputCollector.call_soon_threadsafe`.
"""

from __future__ import annotations

import random
import time
from time import perf_counter
from zlib import crc32 as _crc32
from typing import Any, Sequence

from ..acker.compact_map import RESERVED, Bucket
from ..client import grouping as g
from ..client.grouping import LoadAwareShuffleRouter
from ..client.errors import (FailedException, InvalidTopology, ReportedFailedException,
                             SerializationError)
from ..client.tuple import DEFAULT_STREAM, Fields, Tuple, new_tuple
from .lineage import child_edge, message_base, spout_edge, tuple_key

try:
    import cython
    _COMPILED = cython.compiled
except ImportError:  # installed without Cython: this source runs as plain Python
    _COMPILED = False

# Edge and root ids need uniqueness, not unpredictability: the Mersenne Twister from
# Python, and compiled a xorshift64* on a C integer (a call and an int object fewer per id),
# seeded from it.
_randbits = random.getrandbits
_rng_state = _randbits(64) | 1
_XS_MULT = 0x2545F4914F6CDD1D  # xorshift64*'s multiplier (a C integer compiled)
if _COMPILED:
    _crc_init()  # noqa: F821  (collector.pxd: CRC-32 in C for ASCII keys)


def new_id() -> int:
    """A random non-zero 64-bit id (root or edge id)."""
    global _rng_state
    if _COMPILED:  # C integers: wraps at 64 bits; never 0 (the state never is, the
        x = _rng_state  # multiplier is odd)
        x ^= x >> 12
        x ^= x << 25
        x ^= x >> 27
        _rng_state = x
        return x * _XS_MULT
    r = _randbits(64)
    while not r:
        r = _randbits(64)
    return r


def _append2(per: dict[int, list], key: int, a: int, b: int) -> None:
    flat = per.get(key)
    if flat is None:
        flat = per[key] = []
    flat.append(a)
    flat.append(b)


def inits_by_acker(flat: list, ackers: list) -> dict[int, list]:
    """A step's spout emits, ``[root, xor, spout task, ...]``, as ``{acker task: [root,
    xor, spout task, ...]}`` (the acker of a root is ``ackers[root % len(ackers)]``): the
    ``__ack_init`` tuples of the step."""
    n = len(ackers)
    per: dict[int, list] = {}
    for i in range(0, len(flat) - 2, 3):
        key = flat[i]
        root = key  # a C integer in the compiled build: a C modulo, and the int object kept
        a = ackers[root % n]
        out = per.get(a)
        if out is None:
            out = per[a] = []
        out.append(key)
        out.append(flat[i + 1])
        out.append(flat[i + 2])
    return per


class StepAcks:
    """An executor's acks of one step, XOR-combined per root: one entry per tree however
    many of its tuples the step acked, sent to the ackers as the step ends
    (Executor.end_batch). The roots and values are 64-bit integers in a flat hash table
    (acker/compact_map.py's Bucket), so an ack makes no int object."""

    __slots__ = ("table", "odd")

    def __init__(self) -> None:
        self.table = Bucket(256)
        #: Roots 0 and 1 (the table's reserved keys; never drawn by a spout).
        self.odd: dict[int, int] = {}

    def xor(self, root: int, val: int) -> None:
        """XOR ``val`` into ``root``'s entry."""
        if root <= RESERVED:
            self.odd[root] = self.odd.get(root, 0) ^ val
            return
        b = self.table
        i = b.find(root)
        if i >= 0:
            b.vals[i] ^= val
        else:
            b.insert(root, val, 0)

    def __len__(self) -> int:
        return self.table.live + len(self.odd)

    def items(self) -> list[tuple[int, int]]:
        """``(root, xor)`` of every entry."""
        out = list(self.odd.items())
        b = self.table
        keys = b.keys
        vals = b.vals
        for i in range(len(keys)):  # by index: a C loop in the compiled build
            k = keys[i]
            if k > RESERVED:
                out.append((k, vals[i]))
        return out

    def by_acker(self, ackers: list) -> dict[int, list]:
        """The entries as ``{acker task: [root, xor, root, xor, ...]}``, a root with the
        acker that tracks it (``ackers[root % len(ackers)]``), an entry XORed back to 0
        left out: the ``__ack_ack`` tuples of the step."""
        n = len(ackers)
        per: dict[int, list] = {}
        for root, val in self.odd.items():
            if val:
                _append2(per, ackers[root % n], root, val)
        b = self.table
        keys = b.keys
        vals = b.vals
        for i in range(len(keys)):  # by index: a C loop in the compiled build
            k = keys[i]
            if k > RESERVED and vals[i]:
                _append2(per, ackers[k % n], k, vals[i])
        return per

    def clear(self) -> None:
        """Empty, keeping the table's size unless a burst grew it past 4,096 slots."""
        b = self.table
        if b.filled:
            cap = len(b.keys)
            if cap > 4096 or not _COMPILED:
                self.table = Bucket(cap if cap <= 4096 else 256)
            else:  # compiled: zero the keys in place (a C loop) rather than build arrays
                keys = b.keys
                for i in range(cap):
                    keys[i] = 0
                b.live = 0
                b.filled = 0
        self.odd.clear()


#: No emit yet (not None: emitting on stream None must reach _route's error).
_NO_STREAM = object()


class Route:
    """How one declared output stream of a task is delivered."""

    def __init__(self, stream: str, fields: Fields, routers: list, direct: bool,
                 direct_targets: frozenset):
        self.stream = stream
        self.fields = fields
        self.routers = routers
        self.direct = direct
        #: Tasks that may receive emit_direct on this stream.
        self.direct_targets = direct_targets
        self.nfields = len(fields)
        #: Counted here, per stream, rather than on the task (worker/stats.py sums them).
        self.emitted = 0
        self.transferred = 0
        #: The one router of a non-direct stream with exactly one subscription (the fast path).
        self.single = routers[0] if len(routers) == 1 and not direct else None
        #: That router a fields grouping on one field: the field's index, its one-task
        #: target lists and their number, which emit_anchored reads to hash a str key
        #: itself (key_index -1: another grouping).
        lists = getattr(self.single, "lists", None)
        self.key_index = self.single.single if lists is not None else -1
        self.key_lists = lists
        self.key_n = len(lists) if lists is not None else 1
        #: key_n's fastmod multiplier (compiled: the inline hash's modulo is two multiplies).
        self.key_m = _fastmod_m(self.key_n) if _COMPILED else 0  # noqa: F821

    def __repr__(self) -> str:
        return (f"Route(stream={self.stream!r}, fields={self.fields!r}, "
                f"routers={self.routers!r}, direct={self.direct!r})")


class _Base:
    def __init__(self, ex: Any, task: int, routes: dict[str, Route]):
        self.ex = ex
        self.task = task
        self.component = ex.component_id
        self.routes = routes
        #: The stream object of the last anchored emit and its route: a run of emits on one
        #: stream (the usual) finds it by identity, without a dict lookup.
        self.last_stream = _NO_STREAM
        self.last_route = None
        self.stats = ex.ws.stats[task]
        self.stats.routes = routes
        self.deliver = ex.ws.deliver
        #: The single-task executors' queues of this worker (WorkerState.queues), whose
        #: deliver is their put.
        self.queues = ex.ws.queues
        self.transfer = ex.transfer
        self.debug = ex.debug
        #: Trees are tracked (an acker runs): fixed for the topology's life.
        self.acking = bool(ex.acking)
        #: The executor's acks of this step (StepAcks), sent to the ackers as its step ends
        #: (the executor empties it in place: every collector of it holds this table).
        self.pending_acks = ex.pending_acks
        #: Edge ids derived from the message and the anchor, not drawn (worker/lineage.py):
        #: exactly-once checkpointing recognises a replayed tuple by them.
        self.lineage = ex.ws.lineage
        #: Tuples acked a second time (refused; the first is reported).
        self.acked_twice = 0

    def _route(self, stream: str) -> Route:
        r = self.routes.get(stream)
        if r is None:
            raise InvalidTopology(
                f"component {self.component!r} emitted on stream {stream!r}, which it does not "
                f"declare (declared: {sorted(self.routes)}); declare it in declare_output_fields()",
                component=self.component, stream=stream)
        return r

    def _targets(self, r: Route, values: list, direct_task: int | None) -> list[int]:
        if direct_task is not None:
            if not r.direct:
                raise InvalidTopology(f"component {self.component!r} used emit_direct on stream "
                                      f"{r.stream!r}, which is not declared direct",
                                      component=self.component, stream=r.stream)
            if direct_task not in r.direct_targets:
                raise InvalidTopology(f"component {self.component!r} emit_direct to task "
                                      f"{direct_task}, which does not subscribe to stream "
                                      f"{r.stream!r} (subscribers: {sorted(r.direct_targets)})",
                                      component=self.component, stream=r.stream)
            return [direct_task]
        if r.direct:
            raise InvalidTopology(f"component {self.component!r} used emit on direct stream "
                                  f"{r.stream!r}: use emit_direct(task, ...)",
                                  component=self.component, stream=r.stream)
        routers = r.routers
        if len(routers) == 1:
            return routers[0].choose(values)
        out: list[int] = []
        for router in routers:
            out.extend(router.choose(values))
        return out

    def _check_arity(self, r: Route, values: Any) -> list:
        if type(values) is not list:
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise TypeError(f"component {self.component!r} emit on stream {r.stream!r}: "
                                f"values must be a list, got {type(values).__name__}")
            values = list(values)
        if len(values) != len(r.fields):
            raise InvalidTopology(
                f"component {self.component!r} emitted {len(values)} values on stream "
                f"{r.stream!r}, which declares {len(r.fields)} fields {r.fields.names}",
                component=self.component, stream=r.stream)
        return values

    def _resolve(self, values: Any, stream: str, direct_task: int | None
                 ) -> tuple[Route, list, list[int]]:
        """The emit preamble: route, arity check, target tasks, counters (the emit methods
        log the tuple when debugging, with the message id a spout's has)."""
        r = self.routes.get(stream) or self._route(stream)
        if type(values) is not list or len(values) != r.nfields:
            values = self._check_arity(r, values)
        single = r.single
        if single is not None and direct_task is None:
            if type(single) is LoadAwareShuffleRouter:  # a spout's usual route: a C call
                lr = single
                targets = lr.choose(values)
            else:
                targets = single.choose(values)
        else:
            targets = self._targets(r, values, direct_task)
        r.emitted += 1
        r.transferred += len(targets)
        n = r.emitted
        if n <= 64 or not n & 1023:  # a stream's first 64 tuples, then one in 1,024
            self._check_values(r, values)
        return r, values, targets

    def _check_values(self, r: Route, values: list) -> None:
        """Raise, at the user's emit, for a value another worker could not receive (a set, a
        datetime): with one worker it would pass as an object, with two crash the sending
        worker blamed on __system. Checked on a sample, whatever the number of workers."""
        problem = self.ex.ws.values.problem
        for i, v in enumerate(values):
            p = problem(v)
            if p is not None:
                names = r.fields.names
                raise SerializationError(
                    f"component {self.component!r} emitted on stream {r.stream!r} a value "
                    f"another worker could not receive: field "
                    f"{names[i] if i < len(names) else i!r} holds {p}; tuples carry None, "
                    "bool, int (64 bits), float, str, bytes, list and dict: convert the "
                    "value, or register a serializer for its type in topology.serializers")

    def _send(self, t: int, values: list, r: Route, ids: dict | None) -> None:
        """Hand one copy to task ``t``: an object to a local executor, a wire entry otherwise.
        A single-task executor's queue is put to directly (a C call compiled), any other
        local task through its deliver callable."""
        q = self.queues.get(t)
        d = None if q is not None else self.deliver.get(t)
        if q is None and d is None:
            self.transfer.remote(t, self.task, r.stream, values, ids)
            return
        tup = new_tuple(values, self.component, r.stream, self.task, r.fields)
        if ids:
            tup.ids = ids
        if q is not None:
            q.put(tup)
        else:
            d(tup)

    def _send_tracked(self, t: int, values: list, r: Route, root: int, edge: int) -> None:
        """``_send`` of a tuple in one tree, its ids as two integers (no dict)."""
        q = self.queues.get(t)
        d = None if q is not None else self.deliver.get(t)
        if q is None and d is None:
            self.transfer.remote_tracked(t, self.task, r.stream, values, root, edge)
            return
        tup = new_tuple(values, self.component, r.stream, self.task, r.fields)
        tup.root = root
        tup.edge = edge
        if q is not None:
            q.put(tup)
        else:
            d(tup)

    def report_error(self, error: BaseException | str) -> None:
        """Record an error in the topology's recent errors (shown by the runner and the UI)."""
        self.ex.ws.report_error(self.component, self.task, error)

    def die(self, exc: BaseException) -> None:
        """End the worker with ``exc``, as an exception escaping user code does, from any
        thread: for a thread watching code the executor's thread is stuck in."""
        self.ex.ws.die(self.component, self.task, exc)


class SpoutOutputCollector(_Base):
    """What a spout emits through (Storm's SpoutOutputCollector)."""

    def __init__(self, ex: Any, task: int, routes: dict[str, Route], pending: Any,
                 stable_ids: bool = False):
        super().__init__(ex, task, routes)
        self.pending = pending
        #: The executor's step list of ``__ack_init`` triples (it empties it in place).
        self.inits = ex.pending_inits
        #: Part of every derived edge: 0 when the spout's message ids name messages across
        #: its restarts, else drawn now, so a restarted spout's ids that start over are new.
        self.run = 0 if stable_ids else new_id()
        #: Emits so far, all streams: the executor reads it around next_tuple.
        self.emits = 0
        #: The last spout_burst ended with a next_tuple that emitted nothing.
        self.dry = False

    def emit(self, values: list, stream: str = DEFAULT_STREAM, msg_id: Any = None,
             anchors: Any = None, direct_task: int | None = None) -> list[int]:
        """Emit ``values``; with ``msg_id`` the tuple tree is tracked and ack/fail called back.

        Returns the task ids the tuple was sent to.
        """
        r, values, targets = self._resolve(values, stream, direct_task)
        self.emits += 1
        if self.debug:  # topology.debug, or squall debug sampling (Executor.log_emit)
            self.ex.log_emit(self.task, stream, values, targets, msg_id)
        if msg_id is not None and self.acking:
            root = new_id()
            ack_val = 0
            base = message_base(self.component, self.task, stream, msg_id, self.run) \
                if self.lineage else None
            for i, t in enumerate(targets):
                e = new_id() if base is None else spout_edge(base, i)
                ack_val ^= e
                self._send_tracked(t, values, r, root, e)
            self.pending.add(root, msg_id,
                             _monotonic() if _COMPILED else time.monotonic())  # noqa: F821
            inits = self.inits
            inits.append(root)
            inits.append(ack_val)
            inits.append(self.task)
            return targets
        for t in targets:
            self._send(t, values, r, None)
        if msg_id is not None:
            # Reliability off (topology.acker.executors: 0): ack as soon as next_tuple returns.
            self.ex.immediate_acks.append((self.task, msg_id))
        return targets

    def emit_direct(self, task: int, values: list, stream: str = DEFAULT_STREAM,
                    msg_id: Any = None) -> list[int]:
        """Emit to one task of a component that subscribes to ``stream`` with direct grouping."""
        return self.emit(values, stream=stream, msg_id=msg_id, direct_task=task)

    def get_pending_count(self) -> int:
        return len(self.pending)


class OutputCollector(_Base):
    """What a :class:`~squall.client.Bolt` emits, acks and fails through (Storm's OutputCollector)."""

    def emit(self, values: list, stream: str = DEFAULT_STREAM, anchors: Any = None,
             direct_task: int | None = None, msg_id: Any = None) -> list[int]:
        """Emit ``values`` anchored to ``anchors`` (a Tuple or a list of them).

        Anchored tuples join their anchors' tuple trees, so a failure downstream
        replays the spout tuple. Returns the task ids the tuple was sent to.
        """
        if type(anchors) is Tuple:
            return self.emit_anchored(values, stream, anchors, direct_task)
        r, values, targets = self._resolve(values, stream, direct_task)
        if self.debug:
            self.ex.log_emit(self.task, stream, values, targets)
        acking = anchors and self.acking
        lineage = self.lineage
        if acking:
            if type(anchors) is not list and type(anchors) is not tuple:
                anchors = list(anchors)  # walked once per target: a generator would run dry
            for a in anchors:
                if type(a) is not Tuple:
                    raise TypeError(f"component {self.component!r} anchored an emit to a "
                                    f"{type(a).__name__}: anchors are the Tuples it received")
        for t in targets:
            ids = None
            if acking:
                for a in anchors:
                    aids = a.ids
                    if aids:
                        e = child_edge(tuple_key(aids), a.ack_val) if lineage \
                            else new_id()
                        a.ack_val ^= e
                        if ids is None:
                            ids = {}
                        for root in aids:
                            ids[root] = ids.get(root, 0) ^ e
            self._send(t, values, r, ids)
        return targets

    def emit_anchored(self, values: list, stream: str, anchor: Tuple,
                      direct_task: int | None = None) -> list[int]:
        """``emit`` with exactly one anchor: the common case (every BasicBolt emit).

        The hottest path of a topology: it inlines ``_resolve`` (and the fields grouping's
        hash of an ASCII key) because a Python call per word shows; ``_send`` and
        ``_send_tracked`` are C calls in the compiled build.
        """
        if stream is self.last_stream:  # the stream of the last emit: its route kept
            r = self.last_route
        else:
            r = self.routes.get(stream) or self._route(stream)
            self.last_stream = stream
            self.last_route = r
        if type(values) is not list or len(values) != r.nfields:
            values = self._check_arity(r, values)
        single = r.single
        if single is not None and direct_task is None:
            if r.key_index >= 0:  # fields grouping on one field: a str key is hashed here
                key = values[r.key_index]
                if type(key) is str:
                    if _COMPILED and _is_ascii(key):  # noqa: F821  (collector.pxd)
                        h = _ascii_crc32(key)  # noqa: F821
                    else:
                        try:  # stable_hash's UTF-8, but for lone surrogates (surrogatepass)
                            h = _crc32(key.encode())
                        except UnicodeEncodeError:
                            h = _crc32(key.encode("utf-8", "surrogatepass"))
                    targets = r.key_lists[_fastmod(h, r.key_m, r.key_n) if _COMPILED  # noqa: F821
                                          else h % r.key_n]
                else:
                    targets = single.choose(values)
            else:
                targets = single.choose(values)
        else:
            targets = self._targets(r, values, direct_task)
        r.emitted += 1
        r.transferred += len(targets)
        n = r.emitted
        if n <= 64 or not n & 1023:  # as _resolve
            self._check_values(r, values)
        if self.debug:
            self.ex.log_emit(self.task, stream, values, targets)
        # The usual single tree: the anchor's root and edge as integers, the copies' too.
        root = anchor.root if self.acking else 0
        aids = anchor._ids if self.acking else None
        lineage = self.lineage
        for t in targets:
            if root:
                e = child_edge(anchor.edge, anchor.ack_val) if lineage else new_id()
                anchor.ack_val ^= e
                self._send_tracked(t, values, r, root, e)
            elif aids:
                e = child_edge(tuple_key(aids), anchor.ack_val) if lineage else new_id()
                anchor.ack_val ^= e
                # one anchor: every root gets the same edge id
                self._send(t, values, r, dict.fromkeys(aids, e))
            else:
                self._send(t, values, r, None)
        return targets

    def emit_direct(self, task: int, values: list, stream: str = DEFAULT_STREAM,
                    anchors: Any = None) -> list[int]:
        return self.emit(values, stream=stream, anchors=anchors, direct_task=task)

    def ack(self, tup: Tuple) -> None:
        """The tuple is fully processed (after any anchored emits)."""
        if type(tup) is not Tuple:
            raise TypeError(f"component {self.component!r} acked a {type(tup).__name__}: "
                            "ack takes a Tuple it received")
        if tup.acked:
            self._acked_twice(tup)
            return
        tup.acked = True
        self._ack_trees(tup)
        self.stats.acked += 1

    def _ack_trees(self, tup: Tuple) -> None:
        """XOR the tuple's edge and its children's (its ack value) into each of its trees'
        pending ack: one entry per root per step, however many tuples of the tree it acks."""
        root = tup.root
        if root:  # one tree: its pair, no dict
            self.pending_acks.xor(root, tup.edge ^ tup.ack_val)
            return
        ids = tup._ids
        if ids:
            av = tup.ack_val
            pa = self.pending_acks
            for r, e in ids.items():
                pa.xor(r, e ^ av)

    def ack_system(self, tup: Tuple) -> None:
        """Ack a tuple of the runtime's own (a checkpoint): its tree as ``ack`` does, but not
        among the task's acked, which count the user's tuples (counters never go down)."""
        if tup.acked:
            return
        tup.acked = True
        self._ack_trees(tup)

    def fail_system(self, tup: Tuple) -> None:
        """Fail a tuple of the runtime's own: its trees, not the task's failed count."""
        ids = tup.ids
        if ids:
            self.ex.pending_fails.extend(ids)

    def _acked_twice(self, tup: Tuple) -> None:
        """A second ack XORs the tuple's edges in again and its tree never completes (Storm
        leaves it to time out, silently): refused, and said once per task."""
        self.acked_twice += 1
        if self.acked_twice == 1:
            self.ex.ws.report_error(
                self.component, self.task,
                f"bolt {self.component!r} acked a tuple twice ({tup!r}); the second ack was "
                "ignored (a second ack would leave the tuple's tree to time out): ack each "
                "tuple once (a BasicBolt's are acked for it)")

    def fail(self, tup: Tuple) -> None:
        """Fail the tuple: its spout tuple's ``fail`` is called, without waiting for the timeout."""
        ids = tup.ids
        if ids:
            self.ex.pending_fails.extend(ids)
        self.stats.failed += 1

    def reset_timeout(self, tup: Tuple) -> None:
        """Restart the message timeout of the tuple's trees (for long-running work)."""
        ids = tup.ids
        if ids:
            self.ex.pending_resets.extend(ids)

    def flush(self) -> None:
        """Send now what the executor holds back until its step ends: acker traffic and
        partial batches to other workers (executor thread only)."""
        self.ex.end_batch()
        self.transfer.flush()

    def call_soon_threadsafe(self, fn: Any) -> None:
        """Run ``fn()`` on this bolt's executor thread soon (from any thread).

        The collector itself belongs to the executor's thread: a bolt that finishes work on
        a thread of its own hands the acks back through this (as asyncio's method of the
        same name), instead of calling ``ack`` from that thread.
        """
        self.ex.call_soon_threadsafe(fn)


class BasicOutputCollector:
    """A BasicBolt's collector: emits are anchored to the current input (Storm's BasicOutputCollector)."""

    __slots__ = ("out", "input")

    def __init__(self, out: OutputCollector):
        self.out = out
        self.input: Tuple | None = None

    def emit(self, values: list, stream: str = DEFAULT_STREAM) -> list[int]:
        """Emit ``values`` anchored to the input being executed."""
        return self.out.emit_anchored(values, stream, self.input)

    def emit_direct(self, task: int, values: list, stream: str = DEFAULT_STREAM) -> list[int]:
        return self.out.emit(values, stream=stream, anchors=self.input, direct_task=task)

    def reset_timeout(self, tup: Tuple) -> None:
        self.out.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        self.out.report_error(error)


class BasicRunner:
    """A BasicBolt task's execute: its emits anchored to the input, the input acked once
    ``execute`` returns, failed if it raises FailedException (Storm's BasicBoltExecutor)."""

    __slots__ = ("execute", "out", "bc")

    def __init__(self, execute: Any, out: OutputCollector):
        self.execute = execute
        self.out = out
        self.bc = BasicOutputCollector(out)

    def run(self, tup: Tuple) -> None:
        bc = self.bc
        bc.input = tup
        try:
            self.execute(tup, bc)
        except FailedException as exc:
            if isinstance(exc, ReportedFailedException):
                self.out.report_error(exc)
            self.out.fail(tup)
        else:
            self.out.ack(tup)


def run_counting(dq: Any, st: Any, dispatch: Any, system: Any, t0: float, limit: int,
                 limit_secs: float) -> int:
    """A single-task bolt executor's step: up to ``limit`` queued tuples (or ``limit_secs``
    of them) dispatched, each counted executed before it runs (the stats thread reads the
    counters mid-step: never more acked than executed, and a counter never goes down, which
    Nimbus would take for a restarted worker), but for the runtime's own tuples of
    ``system`` streams (a checkpointed topology's). A BasicBolt's tuples go to its
    :class:`BasicRunner` without a Python call between."""
    popleft = dq.popleft
    runner = getattr(dispatch, "__self__", None)
    basic = runner if type(runner) is BasicRunner else None
    n = 0
    # The queue's length taken once and counted down, asked again when it runs out (other
    # threads only append): no truth test of the deque per tuple.
    avail = len(dq)
    while n < limit:
        if avail <= 0:
            avail = len(dq)
            if avail <= 0:
                break
        avail -= 1
        try:
            tup = popleft()
        except IndexError:  # taken meanwhile (the one consumer is this step; belt and braces)
            break
        if system is None or tup.source_stream not in system:
            st.executed += 1
        if basic is not None:
            basic.run(tup)
        else:
            dispatch(tup)
        n += 1
        if not n & 15 and perf_counter() - t0 > limit_secs:
            break
    return n


def spout_burst(next_tuple: Any, out: SpoutOutputCollector, pending: Any, cap: int,
                budget: int, step_secs: float, slow_secs: float, on_slow: Any) -> int:
    """A spout task's turn in its executor's step: ``next_tuple`` called until it emits
    nothing, ``budget`` emits are made, ``pending`` reaches ``cap`` (topology.max.spout.pending;
    -1: none) or ``step_secs`` pass (acks and sends come between turns, as in Storm's spout
    loop); ``on_slow(secs)`` hears of a call slower than ``slow_secs`` (None: nobody).
    Returns the emits made."""
    n = 0
    t0 = t = perf_counter()
    # Room under the cap, counted down by emits (at most the tracked ones): the pending
    # map's length is asked again only when that count runs out, not per call.
    room = cap - len(pending) if cap >= 0 else 0
    out.dry = False
    while n < budget:
        if cap >= 0 and room <= 0:
            room = cap - len(pending)
            if room <= 0:
                break
        before = out.emits
        next_tuple()
        delta = out.emits - before
        room -= delta
        now = perf_counter()
        took = now - t
        t = now
        if took > slow_secs and on_slow is not None:
            on_slow(took)
        if not delta:
            out.dry = True
            break
        n += delta
        if t - t0 > step_secs:
            break
    return n


def settle_acks(roots: list, pending: Any, stats: Any, ack: Any, now: float) -> None:
    """A spout task's ``__ack_ack``: each root still pending is removed, counted, its
    complete latency recorded and its message acked (``ack(msg_id)``, the spout's own);
    a root no longer pending (timed out already, or a duplicate) is skipped."""
    for root in roots:
        entry = pending.pop(root, None)
        if entry is None:
            continue
        stats.acked += 1
        stats.add_latency((now - entry[1]) * 1000.0)
        ack(entry[0])


def build_routes(ws: Any, component: str, task: int, context: Any) -> dict[str, Route]:
    """Routers for every declared stream of ``component`` as emitted by ``task``."""
    comp = ws.topology.components[component]
    routes: dict[str, Route] = {}
    for stream, sd in comp.streams.items():
        routers = []
        direct_targets: set[int] = set()
        for sub, inp in ws.topology.subscribers(component, stream):
            targets = ws.component_tasks[sub.id]
            if inp.grouping.kind == g.DIRECT:
                direct_targets.update(targets)
                continue
            routers.append(g.make_router(inp.grouping, targets, sd.fields,
                                         local_tasks=ws.local_tasks, task_id=task,
                                         context=context, stream=(component, stream),
                                         load=ws.load))
        routes[stream] = Route(stream, ws.fields[(component, stream)], routers, sd.direct,
                               frozenset(direct_targets))
    return routes
