"""An in-process run of a topology on simulated time: what :mod:`squall.testing` drives.

Storm's ``Testing`` runs a topology on an in-process LocalCluster with simulated time;
this engine does the same without ZooKeeper, sockets or worker processes, so a user's
pytest can run a topology in milliseconds. Every task's component object is unpickled as
a worker would (so what pickling loses, the test loses too), tuples go through the
topology's real groupings (client/grouping.py) with the same ``Tuple`` objects, and tuple
trees are tracked by XOR as the acker does: a spout's ``ack`` runs when its tree
completes, ``fail`` when a bolt fails it or it times out.

Time is simulated: one round (every spout's ``next_tuple`` called once, then every tuple
in flight delivered, in FIFO order) takes one millisecond; when nothing is in flight and
no spout emits, the clock jumps to the next timer (a tick tuple, a window's slide or
watermark, a message timeout). A tree times out exactly ``topology.message.timeout.secs``
after its emit (Storm: between one and two timeouts).

Runs spouts, ``Bolt``, ``BasicBolt`` and ``WindowedBolt`` (with ticks, windows and
timeouts); a stateful bolt, a shell component or a Trident topology needs the real
runtime (``squall local``, or :class:`squall.deploy.local.LocalCluster` in a test) and is
refused with that said.
"""

from __future__ import annotations

import heapq
import itertools
import os
import random
import sys
import time
import traceback
from collections import deque
from typing import Any, Callable, Mapping

from ..client import config as cfg
from ..client import grouping as g
from ..client.components import BasicBolt, Bolt, Spout
from ..client.context import TopologyContext
from ..client.errors import FailedException, InvalidTopology, ReportedFailedException
from ..client.topology import Topology, TopologyBuilder, assign_task_ids
from ..client.tuple import (DEFAULT_STREAM, SYSTEM_COMPONENT_ID, SYSTEM_TASK_ID,
                            SYSTEM_TICK_STREAM_ID, Fields, Tuple)
from ..client.values import ValueTypes
from ..client.windowing import WindowedBolt

#: Simulated seconds one round of the engine takes.
ROUND_SECS = 0.001


class FixedSpout(Spout):
    """Emits the given tuples once each, with their index as message id (Storm's
    FixedTupleSpout): what a mocked source becomes. ``data`` maps stream -> values lists;
    a spout of several tasks deals them round robin (task k emits tuples k, k + n, ...)."""

    def __init__(self, data: Mapping[str, list], fields: Mapping[str, list[str]]):
        self.data = [(stream, list(v)) for stream, rows in data.items() for v in rows]
        self.fields = dict(fields)
        self.i = 0
        self.step = 1

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.i = context.this_task_index
        self.step = len(context.component_tasks(context.this_component_id))

    def next_tuple(self) -> None:
        if self.i < len(self.data):
            stream, values = self.data[self.i]
            self.collector.emit(values, stream=stream, msg_id=self.i)
            self.i += self.step

    @property
    def done(self) -> bool:
        return self.i >= len(self.data)


class _Route:
    __slots__ = ("stream", "fields", "routers", "direct_targets", "direct")

    def __init__(self, stream: str, fields: Fields, routers: list, direct: bool,
                 direct_targets: frozenset):
        self.stream, self.fields, self.routers = stream, fields, routers
        self.direct, self.direct_targets = direct, direct_targets


class _Collector:
    """A task's collector: Storm's emit, anchoring, ack and fail, on the engine's tracker."""

    def __init__(self, engine: "Engine", task: "_Task"):
        self.engine = engine
        self.task = task

    def emit(self, values: Any, stream: str = DEFAULT_STREAM, anchors: Any = None,
             direct_task: int | None = None) -> list[int]:
        return self.engine.emit(self.task, values, stream, anchors, direct_task, None)

    def emit_direct(self, task: int, values: Any, stream: str = DEFAULT_STREAM,
                    anchors: Any = None) -> list[int]:
        return self.emit(values, stream, anchors, task)

    def emit_anchored(self, values: list, stream: str, anchor: Tuple,
                      direct_task: int | None = None) -> list[int]:
        return self.emit(values, stream, anchor, direct_task)

    def ack(self, tup: Tuple) -> None:
        self.engine.ack(self.task, tup)

    def fail(self, tup: Tuple) -> None:
        self.engine.fail(tup)

    def reset_timeout(self, tup: Tuple) -> None:
        self.engine.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        text = error if isinstance(error, str) else \
            "".join(traceback.format_exception_only(type(error), error)).strip()
        self.engine.errors.append((self.task.component, self.task.id, text))

    def flush(self) -> None:
        pass  # nothing is held back here

    def call_soon_threadsafe(self, fn: Callable[[], Any]) -> None:
        self.engine.calls.append(fn)


class _SpoutCollector(_Collector):
    """A spout's collector: Storm's SpoutOutputCollector (a message id, not anchors)."""

    def emit(self, values: Any, stream: str = DEFAULT_STREAM, msg_id: Any = None,
             anchors: Any = None, direct_task: int | None = None) -> list[int]:
        return self.engine.emit(self.task, values, stream, None, direct_task, msg_id)

    def emit_direct(self, task: int, values: Any, stream: str = DEFAULT_STREAM,
                    msg_id: Any = None) -> list[int]:
        return self.emit(values, stream, msg_id, None, task)

    def get_pending_count(self) -> int:
        """Trees of this task in flight."""
        return self.task.pending


class _BasicCollector:
    """A BasicBolt's collector: emits anchored to the input (Storm's BasicOutputCollector)."""

    def __init__(self, out: _Collector):
        self.out = out
        self.input: Tuple | None = None

    def emit(self, values: Any, stream: str = DEFAULT_STREAM) -> list[int]:
        return self.out.emit(values, stream, self.input)

    def emit_direct(self, task: int, values: Any, stream: str = DEFAULT_STREAM) -> list[int]:
        return self.out.emit(values, stream, self.input, task)

    def reset_timeout(self, tup: Tuple) -> None:
        self.out.reset_timeout(tup)

    def report_error(self, error: BaseException | str) -> None:
        self.out.report_error(error)


class _Task:
    __slots__ = ("id", "component", "kind", "obj", "context", "conf", "routes", "execute",
                 "collector", "pending")

    def __init__(self, tid: int, component: str, kind: str, obj: Any, context: Any,
                 conf: dict):
        self.id, self.component, self.kind, self.obj = tid, component, kind, obj
        self.context, self.conf = context, conf
        self.routes: dict[str, _Route] = {}
        self.execute: Callable[[Tuple], Any] | None = None
        self.collector: _Collector | None = None
        #: Spouts: trees in flight (for topology.max.spout.pending).
        self.pending = 0


class _TimerHost:
    """What a WindowHost needs of an executor: timers, and the simulated wall clock."""

    def __init__(self, engine: "Engine"):
        self.engine = engine

    def add_timer(self, period: float, fn: Callable[[], Any]) -> None:
        self.engine.add_timer(period, fn)

    def wall_clock(self) -> float:
        return self.engine.wall_time()

    def monotonic(self) -> float:
        return self.engine.now


def _resources_beside(obj: Any) -> str:
    """The resources/ folder beside the file defining ``obj``'s class: what a worker finds
    at ``context.code_dir`` in the topology's package ("" when there is none)."""
    path = getattr(sys.modules.get(type(obj).__module__), "__file__", None)
    folder = os.path.join(os.path.dirname(os.path.abspath(path)), "resources") if path else ""
    return folder if folder and os.path.isdir(folder) else ""


class Engine:
    """One topology, run in this process on simulated time. Not thread-safe."""

    def __init__(self, topology: Topology | TopologyBuilder, conf: Mapping[str, Any] | None = None,
                 mocked_sources: Mapping[str, Any] | None = None, seed: int = 0):
        if isinstance(topology, TopologyBuilder):
            topology = topology.create_topology()
        self.topology = topology
        self.conf = cfg.layered(conf)
        self.rng = random.Random(seed)
        self.values = ValueTypes.from_conf(self.conf, True)
        #: No ackers (topology.acker.executors 0): a spout's tuples are acked at the emit.
        self.acking = self.conf.get(cfg.TOPOLOGY_ACKER_EXECUTORS) != 0
        self.timeout = float(cfg.get(self.conf, cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
        self.timeouts = bool(self.conf.get(cfg.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True))
        #: Simulated seconds since the start, and the wall clock it stands for.
        self.now = 0.0
        self.epoch = time.time()
        self.rounds = 0
        self.queue: deque[tuple[int, Tuple]] = deque()
        self.calls: deque[Callable[[], Any]] = deque()
        #: root -> [xor, spout task, msg id, emitted at]
        self.trees: dict[int, list] = {}
        self.timers: list[tuple[float, int, float, Callable[[], Any]]] = []
        self._seq = itertools.count()
        self.emitted: dict[str, dict[str, list[list]]] = {}
        self.acked: dict[str, list] = {}
        self.failed: dict[str, list] = {}
        self.errors: list[tuple[str, int, str]] = []
        self.active = True
        #: drain() gives up past this (monotonic); complete_topology sets it.
        self.deadline = float("inf")
        mocked = dict(mocked_sources or {})
        unknown = sorted(set(mocked) - {c.id for c in topology.spouts()})
        if unknown:
            raise InvalidTopology(f"mocked source {unknown[0]!r} is not a spout of the topology; "
                                  f"its spouts: {sorted(c.id for c in topology.spouts())}")
        self.component_tasks = assign_task_ids(topology)
        self.tasks: dict[int, _Task] = {}
        for cid, comp in topology.components.items():
            self._refuse_unsupported(cid, comp)
            comp_conf = cfg.component_conf(self.conf, comp.conf, {})
            for tid in self.component_tasks[cid]:
                obj = self._mock(comp, mocked[cid]) if cid in mocked else comp.instantiate()
                ctx = TopologyContext(topology, self.component_tasks, tid, comp_conf,
                                      "testing", 0, sorted(self._all_tasks()),
                                      code_dir=_resources_beside(obj))
                self.tasks[tid] = _Task(tid, cid, comp.kind, obj, ctx, comp_conf)
        for task in self.tasks.values():
            task.routes = self._routes(task)
            task.collector = (_SpoutCollector if task.kind == "spout" else _Collector)(self, task)
        for task in self.tasks.values():
            self._prepare(task)

    # -- set-up ---------------------------------------------------------------------
    def _all_tasks(self) -> list[int]:
        return [t for ts in self.component_tasks.values() for t in ts]

    @staticmethod
    def _refuse_unsupported(cid: str, comp: Any) -> None:
        why = None
        if comp.shell is not None:
            why = "a shell component"
        elif cid.startswith("$") or cid.startswith("__") or cid.startswith("$mastercoord"):
            why = "a system component (a stateful or Trident topology)"
        if why:
            raise InvalidTopology(f"component {cid!r} is {why}: squall.testing runs spouts, Bolt, "
                                  "BasicBolt and WindowedBolt in this process; run this "
                                  "topology with squall local (or squall.deploy.local."
                                  "LocalCluster in a test)", component=cid)

    def _mock(self, comp: Any, data: Any) -> FixedSpout:
        streams = {s: list(d.fields) for s, d in comp.streams.items()}
        if not isinstance(data, Mapping):
            data = {DEFAULT_STREAM: data}
        for stream, rows in data.items():
            if stream not in streams:
                raise InvalidTopology(f"mocked source {comp.id!r}: the spout declares no stream "
                                      f"{stream!r} (it declares {sorted(streams)})",
                                      component=comp.id)
            for row in rows:
                if not isinstance(row, (list, tuple)) or len(row) != len(streams[stream]):
                    raise InvalidTopology(f"mocked source {comp.id!r}: {row!r} is not a list of "
                                          f"{len(streams[stream])} values for the fields "
                                          f"{streams[stream]}", component=comp.id)
        return FixedSpout(data, streams)

    def _routes(self, task: _Task) -> dict[str, _Route]:
        comp = self.topology.components[task.component]
        out = {}
        for stream, sd in comp.streams.items():
            routers, direct = [], set()
            for sub, inp in self.topology.subscribers(task.component, stream):
                targets = self.component_tasks[sub.id]
                if inp.grouping.kind == g.DIRECT:
                    direct.update(targets)
                    continue
                routers.append(g.make_router(inp.grouping, targets, sd.fields,
                                             local_tasks=set(self._all_tasks()), task_id=task.id,
                                             context=task.context,
                                             stream=(task.component, stream)))
            out[stream] = _Route(stream, Fields(sd.fields), routers, sd.direct, frozenset(direct))
        return out

    def _prepare(self, task: _Task) -> None:
        obj, conf, ctx, out = task.obj, task.conf, task.context, task.collector
        if task.kind == "spout":
            obj.open(conf, ctx, out)
            obj.activate()
            return
        if isinstance(obj, WindowedBolt):
            from ..worker.windowed import WindowHost
            host = WindowHost(obj, conf, ctx, out, out.ack, _TimerHost(self))
            obj.prepare(conf, ctx, host.collector)
            task.execute = host.execute
        elif isinstance(obj, BasicBolt):
            obj.prepare(conf, ctx)
            basic = _BasicCollector(out)

            def run(tup: Tuple, obj: Any = obj, basic: _BasicCollector = basic) -> None:
                basic.input = tup
                try:
                    obj.execute(tup, basic)
                except FailedException as exc:
                    if isinstance(exc, ReportedFailedException):
                        out.report_error(exc)
                    out.fail(tup)
                else:
                    out.ack(tup)
            task.execute = run
        elif isinstance(obj, Bolt):
            obj.prepare(conf, ctx, out)
            task.execute = obj.execute
        else:  # StatefulBolt and what else create_topology accepts
            raise InvalidTopology(f"bolt {task.component!r} is a {type(obj).__name__}: "
                                  "squall.testing runs Bolt, BasicBolt and WindowedBolt; run "
                                  "it with squall local", component=task.component)
        tick = conf.get(cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS)
        if tick:
            fields = Fields(["freq_secs"])
            self.add_timer(float(tick), lambda: self.queue.append(
                (task.id, Tuple([tick], SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID,
                                SYSTEM_TASK_ID, None, fields))))

    # -- time -----------------------------------------------------------------------
    def wall_time(self) -> float:
        """The simulated wall clock, in seconds since the epoch."""
        return self.epoch + self.now

    def add_timer(self, period: float, fn: Callable[[], Any]) -> None:
        heapq.heappush(self.timers, (self.now + period, next(self._seq), period, fn))

    def next_due(self) -> float:
        due = self.timers[0][0] if self.timers else float("inf")
        if self.timeouts and self.trees:
            due = min(due, min(t[3] for t in self.trees.values()) + self.timeout)
        return due

    def advance_to(self, t: float) -> None:
        """Move the clock to ``t`` (never back), firing timers and timeouts due by then."""
        while True:
            due = self.next_due()
            if due > t:
                break
            self.now = max(self.now, due)
            self._fire_due()
            self.drain()
        self.now = max(self.now, t)

    def _fire_due(self) -> None:
        while self.timers and self.timers[0][0] <= self.now:
            _, _, period, fn = heapq.heappop(self.timers)
            fn()
            heapq.heappush(self.timers, (self.now + period, next(self._seq), period, fn))
        if self.timeouts:
            for root in [r for r, t in self.trees.items() if t[3] + self.timeout <= self.now]:
                self._finish(root, acked=False)

    # -- the dataflow ---------------------------------------------------------------
    def round(self) -> int:
        """Call every spout's next_tuple once and deliver everything in flight; the clock
        moves by ROUND_SECS. Returns how many tuples the spouts emitted."""
        made = 0
        if self.active:
            for task in self.tasks.values():
                if task.kind != "spout":
                    continue
                cap = task.conf.get(cfg.TOPOLOGY_MAX_SPOUT_PENDING)
                if cap is not None and task.pending >= int(cap):
                    continue
                before = self._emits(task)
                task.obj.next_tuple()
                made += self._emits(task) - before
        self.drain()
        self.rounds += 1
        self.advance_to(self.now + ROUND_SECS)
        return made

    def _emits(self, task: _Task) -> int:
        return sum(len(v) for v in self.emitted.get(task.component, {}).values())

    def drain(self) -> None:
        """Deliver every tuple in flight (and what they make), oldest first; raises
        TimeoutError past ``deadline`` (monotonic), e.g. for bolts that feed each other
        forever."""
        queue, calls, tasks = self.queue, self.calls, self.tasks
        n = 0
        while queue or calls:
            while calls:
                calls.popleft()()
            if queue:
                tid, tup = queue.popleft()
                tasks[tid].execute(tup)
                n += 1
                if not n & 1023 and time.monotonic() > self.deadline:
                    raise TimeoutError(f"{len(queue)} tuple(s) still in flight after "
                                       f"{n} delivered in one round")

    def emit(self, task: _Task, values: Any, stream: str, anchors: Any,
             direct_task: int | None, msg_id: Any) -> list[int]:
        r = task.routes.get(stream)
        if r is None:
            raise InvalidTopology(f"component {task.component!r} emitted on stream {stream!r}, "
                                  f"which it does not declare (it declares "
                                  f"{sorted(task.routes)})", component=task.component)
        if type(values) is not list:
            if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
                raise TypeError(f"component {task.component!r} emit on stream {stream!r}: "
                                f"values must be a list, got {type(values).__name__}")
            values = list(values)
        if len(values) != len(r.fields.names):
            raise InvalidTopology(f"component {task.component!r} emitted {len(values)} values "
                                  f"on stream {stream!r}, which declares "
                                  f"{len(r.fields.names)} fields {r.fields.names}",
                                  component=task.component, stream=stream)
        for i, v in enumerate(values):
            p = self.values.problem(v)
            if p is not None:
                raise InvalidTopology(f"component {task.component!r} emitted on stream "
                                      f"{stream!r} a value another worker could not receive: "
                                      f"field {r.fields.names[i]!r} holds {p}",
                                      component=task.component, stream=stream)
        if direct_task is not None:
            if direct_task not in r.direct_targets:
                raise InvalidTopology(f"component {task.component!r}: emit_direct to task "
                                      f"{direct_task}, which does not subscribe directly to "
                                      f"stream {stream!r}", component=task.component)
            targets = [direct_task]
        else:
            targets = sorted({t for router in r.routers for t in router.choose(values)})
        self.emitted.setdefault(task.component, {}).setdefault(stream, []).append(values)
        if task.kind == "spout":
            self._spout_emit(task, values, r, targets, msg_id)
        else:
            self._bolt_emit(task, values, r, targets, anchors)
        return targets

    def _spout_emit(self, task: _Task, values: list, r: _Route, targets: list[int],
                    msg_id: Any) -> None:
        if msg_id is None or not self.acking:
            for t in targets:
                self.queue.append((t, Tuple(values, task.component, r.stream, task.id, None,
                                            r.fields)))
            if msg_id is not None:  # no acker: acked at once, as in Storm
                self.acked.setdefault(task.component, []).append(msg_id)
                self.calls.append(lambda: task.obj.ack(msg_id))
            return
        root = self.rng.getrandbits(64) or 1
        tree = self.trees[root] = [0, task.id, msg_id, self.now]
        task.pending += 1
        for t in targets:
            e = self.rng.getrandbits(64)
            tree[0] ^= e
            self.queue.append((t, Tuple(values, task.component, r.stream, task.id, {root: e},
                                        r.fields)))
        if not targets:
            self._finish(root, acked=True)

    def _bolt_emit(self, task: _Task, values: list, r: _Route, targets: list[int],
                   anchors: Any) -> None:
        if anchors is None:
            anchors = []
        elif isinstance(anchors, Tuple):
            anchors = [anchors]
        else:
            anchors = list(anchors)
        for t in targets:
            ids: dict[int, int] | None = None
            for a in anchors:
                if a.ids:
                    e = self.rng.getrandbits(64)
                    a.ack_val ^= e
                    ids = ids or {}
                    for root in a.ids:
                        ids[root] = ids.get(root, 0) ^ e
            self.queue.append((t, Tuple(values, task.component, r.stream, task.id, ids,
                                        r.fields)))

    def ack(self, task: _Task, tup: Tuple) -> None:
        if tup.acked:
            self.errors.append((task.component, task.id, f"bolt {task.component!r} acked a "
                                f"tuple twice ({tup!r}); the second ack was ignored"))
            return
        tup.acked = True
        for root, e in (tup.ids or {}).items():
            tree = self.trees.get(root)
            if tree is not None:
                tree[0] ^= e ^ tup.ack_val
                if tree[0] == 0:
                    self._finish(root, acked=True)

    def fail(self, tup: Tuple) -> None:
        for root in tup.ids or {}:
            if root in self.trees:
                self._finish(root, acked=False)

    def reset_timeout(self, tup: Tuple) -> None:
        for root in tup.ids or {}:
            tree = self.trees.get(root)
            if tree is not None:
                tree[3] = self.now

    def _finish(self, root: int, acked: bool) -> None:
        _, tid, msg_id, _ = self.trees.pop(root)
        task = self.tasks[tid]
        task.pending -= 1
        (self.acked if acked else self.failed).setdefault(task.component, []).append(msg_id)
        spout = task.obj  # the acker's answer reaches the spout after what is running now
        self.calls.append((lambda: spout.ack(msg_id)) if acked else (lambda: spout.fail(msg_id)))

    # -- ends -----------------------------------------------------------------------
    def mocked_done(self) -> bool:
        return all(t.obj.done for t in self.tasks.values() if isinstance(t.obj, FixedSpout))

    def set_active(self, active: bool) -> None:
        """Activate or deactivate the spouts (Storm's activate/deactivate)."""
        if active != self.active:
            self.active = active
            for task in self.tasks.values():
                if task.kind == "spout":
                    task.obj.activate() if active else task.obj.deactivate()

    def shutdown(self) -> None:
        """Deactivate and close spouts, clean up bolts (Storm's kill)."""
        self.set_active(False)
        for task in self.tasks.values():
            if task.kind == "spout":
                task.obj.close()
            else:
                task.obj.cleanup()
