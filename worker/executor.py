"""Executors: the tasks of one component run together (Storm's executor).

An executor owns one receive queue and the code that ties it to user code,
split into a single step (:meth:`Executor.run_once`: drain a batch from the
queue and dispatch it, call ``next_tuple`` for spouts, end the batch) and
the forever loop around it. Executors normally run on the worker's shared
event loop (:mod:`squall.worker.loop`); a component with
``topology.executor.threaded`` gets a thread and a Transfer per executor.

* :class:`BoltExecutor` calls ``execute`` (auto-acking for BasicBolt) and
  sends tick tuples.
* :class:`SpoutExecutor` calls ``next_tuple`` while the topology is active,
  not throttled by backpressure and under ``topology.max.spout.pending``;
  it keeps each task's pending trees in a PendingMap that fails them on
  timeout, and handles the acker's ack/fail/reset-timeout messages.
* :class:`AckerExecutor` runs the ``__acker`` tasks' XOR ledgers.

Acker traffic is batched: one system tuple per (executor batch, acker task)
carries a flat list of ``root, value`` pairs, and acks for the same root are
XOR-combined before they leave (XOR is associative, so the acker's view is
unchanged).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from random import random as _random
from time import perf_counter
from typing import Any, Callable

from ..acker import AckerLedger, PendingMap, TimeoutReset, TreeAcked, TreeFailed
from ..client import config as cfg
from ..client.components import BasicBolt, Bolt, Spout
from ..client.context import TopologyContext
from ..client.stateful import (CHECKPOINT_STREAM_ID, MODE_BARRIER, StatefulBolt, barrier_mode,
                               is_stateful)
from ..client.tuple import (ACKER_ACK_STREAM_ID, ACKER_COMPONENT_ID, ACKER_FAIL_STREAM_ID,
                            ACKER_INIT_STREAM_ID, ACKER_RESET_TIMEOUT_STREAM_ID,
                            SYSTEM_COMPONENT_ID, SYSTEM_TASK_ID, SYSTEM_TICK_STREAM_ID,
                            TM_CONTROL_STREAM_ID, TOPOLOGY_MASTER_ID, Fields, Tuple)
from ..client.windowing import WindowedBolt
from .barrier import BoltBarrier, SpoutBarrier
from .checkpoint import forwarding, host_bolt
from .collector import (BasicRunner, OutputCollector, SpoutOutputCollector, StepAcks,
                        build_routes, inits_by_acker, run_counting, settle_acks,
                        spout_burst)
from .queue import InQueue, ThreadWaker
from .shell import component_object
from .state import WorkerState
from .stats import TaskStats
from .topology_master import TopologyMaster
from .transfer import Transfer
from .windowed import WindowHost

log = logging.getLogger("squall.worker.executor")

#: Queue items handled per step before the batch is ended (acks flushed) ...
BATCH = 256
#: ... or seconds, checked every 16 items: a slow bolt (ms a tuple) must not hold its acks,
#: or hide its backlog from the load-aware shuffles, for 256 tuples' time.
BATCH_SECS = 0.05
#: Tuples a spout task emits per step (next_tuple is called until it emits this many,
#: emits nothing, reaches topology.max.spout.pending, or SPOUT_STEP_SECS pass) ...
SPOUT_BUDGET = 128
#: ... so a spout that sleeps in next_tuple (Storm's multi-lang spouts, its TestWordSpout)
#: gets one call a step and its acks, fails, timeouts and sends are handled between calls.
SPOUT_STEP_SECS = 0.01
#: A next_tuple call on the shared loop slower than this counts as slow; after SLOW_CALLS
#: of them the spout is moved to a thread of its own, where its sleeps slow only itself.
SLOW_CALL_SECS = 0.02
SLOW_CALLS = 3
#: A spout on the loop is not called while its own queue or that of a downstream executor
#: of the loop holds this many tuples or more (a step's worth), for at most
#: topology.spout.wait.max.millis at a time: the loop drains before it produces
#: (backlogged, drain_first).
BACKLOG = BATCH
_SYS_FIELDS = Fields(["payload"])
_ACKER_STREAMS = (ACKER_INIT_STREAM_ID, ACKER_ACK_STREAM_ID, ACKER_FAIL_STREAM_ID,
                  ACKER_RESET_TIMEOUT_STREAM_ID)
#: Storm's timeouts: the spout's pending map has 2 buckets and the acker's ledger 3, both
#: rotated every topology.message.timeout.secs (T), so the spout fails a tree between T and
#: 2T after its emit and the acker forgets it only between 2T and 3T: the acker never drops
#: a tree its spout still waits for.
_SPOUT_BUCKETS = 2
_ACKER_BUCKETS = 3


class Executor:
    """Base: queue, acker batching, timers and the single step.

    An executor runs either on the worker's shared event loop (``loop`` given:
    it shares the loop's :class:`Transfer`, but for OWN_TRANSFER executors, the
    spouts) or, when its component sets ``topology.executor.threaded`` (or the
    loop moved it there), on a thread of its own with its own Transfer (for user
    code that blocks on IO).
    """

    #: What kind of component it runs, and which user code its step calls (for ``stalled``).
    KIND = "component"
    STEP_CALLS = "its step"
    #: On the shared loop, send through a Transfer of its own rather than the loop's: such
    #: an executor can leave the loop's thread at any moment, even in the middle of a call
    #: into user code that does not return (EventLoop.rescue), without the loop and it ever
    #: touching one Transfer from two threads.
    OWN_TRANSFER = False

    def __init__(self, ws: WorkerState, component_id: str, tasks: list[int],
                 loop: Any = None):
        self.name = f"executor[{component_id}:{tasks[0]}-{tasks[-1]}]"
        #: perf_counter() when the running step began (0.0: between steps), and the user
        #: code it is in: read by the worker's heartbeat on another thread.
        self.calling = 0.0
        self.phase = self.STEP_CALLS
        self.ws = ws
        self.component_id = component_id
        self.tasks = tasks
        self.conf = ws.component_conf(component_id)
        #: topology.debug: every emit goes to the worker's log.
        self.log_all = bool(self.conf.get(cfg.TOPOLOGY_DEBUG))
        #: squall debug (Storm's debug sampling): this share of the emits, in percent, goes
        #: to the worker's events log ``events`` (None: off). Set by the worker's main thread.
        self.sample_pct = 0.0
        self.events: Any = None
        #: Whether the collectors call log_emit: their one test per emit while it is off.
        self.debug = self.log_all
        #: The collectors of this executor's tasks (debug is switched on theirs too).
        self.collectors: list[Any] = []
        #: A step of user code longer than this is named in the heartbeat (``stalled``).
        self.stall_secs = float(cfg.get(self.conf, cfg.TOPOLOGY_EXECUTOR_STALL_SECS))
        self.acking = ws.acking
        self.threaded = loop is None
        if self.threaded:
            self.transfer = Transfer(ws)
            self.waker: Any = ThreadWaker()
        else:
            self.transfer = Transfer(ws) if self.OWN_TRANSFER else loop.transfer
            self.waker = loop
        #: Set by the loop when this executor's call into user code kept the loop's thread
        #: too long: that thread becomes this executor's own once the call returns.
        self.rescued = False
        cap = int(self.conf[cfg.TOPOLOGY_EXECUTOR_RECEIVE_BUFFER_SIZE])
        self.queue = InQueue(cap, float(self.conf[cfg.BACKPRESSURE_HIGH_WATERMARK]),
                             float(self.conf[cfg.BACKPRESSURE_LOW_WATERMARK]), ws.bp,
                             self.waker)
        self.multi = len(tasks) > 1
        for t in tasks:
            ws.stats[t] = TaskStats(component_id)
            if self.multi:
                ws.deliver[t] = (lambda tup, _t=t, _put=self.queue.put: _put((_t, tup)))
            else:
                ws.deliver[t] = self.queue.put
                ws.queues[t] = self.queue  # what a receiver puts a run of tuples in directly
        #: root -> XOR of acked edge ids (collector.StepAcks), sent to the ackers as the
        #: step ends.
        self.pending_acks = StepAcks()
        self.pending_fails: list[int] = []
        self.pending_resets: list[int] = []
        #: The step's spout emits as flat ``root, xor, spout task`` triples.
        self.pending_inits: list[int] = []
        self.stop_requested = False
        self.stopped = threading.Event()
        self.timeout_secs = float(self.conf[cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS])
        #: False: trees never fail by timeout (spout and acker keep them), as in Storm.
        self.timeouts = bool(self.conf.get(cfg.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True))
        self.timers: list[list] = []  # [next_due, period, fn]
        #: The earliest timer's due time (monotonic; inf: none), read by the loop each round.
        self.due = float("inf")
        #: Callables handed over by other threads (``call_soon_threadsafe``), run in order.
        self.calls: deque[Callable[[], Any]] = deque()
        self.thread: threading.Thread | None = None

    # -- lifecycle ------------------------------------------------------------
    def context(self, task: int) -> TopologyContext:
        return TopologyContext(self.ws.topology, self.ws.component_tasks, task, self.conf,
                               self.ws.topology_id, self.ws.assignment.port,
                               sorted(self.ws.local_tasks), self.ws.stats[task].metrics,
                               self.ws.code_dir, self.ws.pid_dir)

    def add_timer(self, period: float, fn: Any) -> None:
        due = time.monotonic() + period
        self.timers.append([due, period, fn])
        if due < self.due:
            self.due = due

    def start_thread(self) -> None:
        """Threaded executors only: run setup and the loop on a thread of their own."""
        self.thread = threading.Thread(target=self.run, name=self.name, daemon=True)
        self.thread.start()

    def run(self, set_up: bool = False) -> None:
        try:
            if not set_up:
                self.setup()
            self.loop()
            self.teardown()
        except BaseException as exc:  # user code raised: the worker dies, as in Storm
            self.ws.die(self.component_id, self.tasks[0], exc)
        finally:
            try:
                self.transfer.close()
            finally:
                self.stopped.set()

    def move_to_thread(self) -> None:
        """A shared executor with a Transfer of its own (OWN_TRANSFER) goes on running on a
        thread of its own; called on the loop's thread once the loop no longer runs it."""
        self.leave_loop()
        self.thread = threading.Thread(target=self.run, args=(True,), name=self.name,
                                       daemon=True)
        self.thread.start()

    def leave_loop(self) -> None:
        """From now on this executor sleeps and wakes on its own thread, not the loop's."""
        assert self.OWN_TRANSFER, self.name  # the loop's Transfer stays with the loop
        self.backlog_queues = []  # its own thread's pace is not the loop's
        self.waker = ThreadWaker()
        self.queue.waker = self.waker
        self.queue.flag = self.waker.flag  # a put reads the flag, then wakes the waker
        self.threaded = True

    def stop(self) -> None:
        self.stop_requested = True
        self.queue.wake()

    def setup(self) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        pass

    def log_emit(self, task: int, stream: str, values: list, targets: list[int],
                 msg_id: Any = None) -> None:
        if self.log_all:
            log.info("topology=%s component=%s task=%d emit stream=%s values=%r -> tasks %s",
                     self.ws.topology_id, self.component_id, task, stream, values, targets)
        events = self.events
        if events is not None:
            pct = self.sample_pct
            if pct >= 100.0 or _random() * 100.0 < pct:
                events.log(self.component_id, task, stream, msg_id, values)

    def set_debug(self, pct: float, events: Any) -> None:
        """Sample ``pct`` percent of this executor's emits into ``events`` (0: stop); from
        the worker's main thread, while the executor runs."""
        self.sample_pct = float(pct)
        self.events = events if pct > 0 else None
        self.debug = self.log_all or self.events is not None
        for c in list(self.collectors):
            c.debug = self.debug

    # -- one step -------------------------------------------------------------------
    def step(self) -> int:
        """Drain up to BATCH queued items (or BATCH_SECS of them) and dispatch them; returns
        how many."""
        dq = self.queue.dq
        popleft = dq.popleft
        dispatch = self.dispatch
        n = 0
        t0 = perf_counter()
        while dq and n < BATCH:
            dispatch(popleft())
            n += 1
            if not n & 15 and perf_counter() - t0 > BATCH_SECS:
                break
        return n

    def dispatch(self, item: Any) -> None:
        raise NotImplementedError

    def produce(self) -> int:
        """Spouts: call next_tuple; returns how many tuples were emitted."""
        return 0

    def idle_timeout(self) -> float:
        return 1.0

    def call_soon_threadsafe(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` on this executor's thread at its next step; callable from any thread."""
        self.calls.append(fn)
        self.queue.wake()

    def _run_calls(self) -> int:
        calls = self.calls
        n = 0
        while calls:
            calls.popleft()()
            n += 1
        return n

    def run_once(self) -> int:
        """One step of work: dispatch, produce, end the batch. Returns the work done."""
        self.calling = perf_counter()
        self.phase = self.STEP_CALLS
        n = self._run_calls() if self.calls else 0
        n += self.step()
        made = self.produce()
        self.end_batch()
        self.queue.drain_done()
        self.calling = 0.0
        return n + made

    def stalled(self, now: float) -> str | None:
        """``"spout sentences: next_tuple has not returned for 12 s"`` when its step has run
        longer than topology.executor.stall.secs by ``now`` (perf_counter), else None. Any
        thread."""
        since = self.calling
        if since and now - since > self.stall_secs:
            return (f"{self.KIND} {self.component_id}: {self.phase} has not returned for "
                    f"{now - since:.0f} s")
        return None

    def next_due(self) -> float:
        return self.due

    def fire_timers(self, now: float) -> None:
        due = float("inf")
        for timer in self.timers:
            if now >= timer[0]:
                timer[0] = now + timer[1]
                timer[2]()
            if timer[0] < due:
                due = timer[0]
        self.due = due

    def loop(self) -> None:
        """Threaded executors: the forever loop around :meth:`run_once`."""
        q = self.queue
        transfer = self.transfer
        flush_every = transfer.flush_interval
        ready = lambda: q.dq or self.calls  # noqa: E731
        while not self.stop_requested:
            done = self.run_once()
            now = time.monotonic()
            if now >= self.due:
                self.fire_timers(now)
            if done == 0:
                since = now - transfer.last_flush
                if transfer.buffered and since < flush_every:
                    # Work that arrives a call at a time (a shell child's emits) would send
                    # a frame per tuple if every pause flushed: the batch may wait out the
                    # flush interval, as topology.batch.flush.interval.millis allows.
                    self.waker.wait(flush_every - since, ready)
                    continue
                transfer.flush()
                self.waker.wait(self._wait_for(now, self.idle_timeout()), ready)
            elif now - transfer.last_flush >= flush_every:
                transfer.flush()

    def _wait_for(self, now: float, idle: float) -> float:
        if self.transfer.blocked:
            idle = min(idle, max(self.transfer.flush_interval, 0.001))
        return max(min(idle, self.next_due() - now), 0.0)

    # -- sending system tuples ------------------------------------------------------
    def send_system(self, task: int, src_task: int, stream: str, values: list) -> None:
        d = self.ws.deliver.get(task)
        if d is not None:
            d(Tuple(values, self.component_id, stream, src_task, None, _SYS_FIELDS))
        else:
            self.transfer.remote(task, src_task, stream, values, None)

    def end_batch(self) -> None:
        """Send the batch's acker traffic: inits, combined acks, fails, timeout resets."""
        if not (self.pending_inits or self.pending_acks or self.pending_fails
                or self.pending_resets):
            return
        ackers = self.ws.acker_tasks
        n = len(ackers)
        src = self.tasks[0]
        if self.pending_inits:
            per = inits_by_acker(self.pending_inits, ackers)
            self.pending_inits.clear()  # in place: the spout collectors hold this list
            for acker, flat in per.items():
                self.send_system(acker, src, ACKER_INIT_STREAM_ID, [flat])
        if self.pending_acks:
            per = self.pending_acks.by_acker(ackers)
            self.pending_acks.clear()  # in place: the collectors hold this table
            for acker, flat in per.items():
                self.send_system(acker, src, ACKER_ACK_STREAM_ID, [flat])
        for stream, roots in ((ACKER_FAIL_STREAM_ID, self.pending_fails),
                              (ACKER_RESET_TIMEOUT_STREAM_ID, self.pending_resets)):
            if roots:
                per = {}
                for root in roots:
                    per.setdefault(ackers[root % n], []).append(root)
                for acker, flat in per.items():
                    self.send_system(acker, src, stream, [flat])
        self.pending_fails = []
        self.pending_resets = []


class BoltExecutor(Executor):
    """Runs user bolts (Bolt or BasicBolt) and sends them tick tuples."""

    KIND = "bolt"
    STEP_CALLS = "execute"

    def setup(self) -> None:
        comp = self.ws.topology.components[self.component_id]
        self.bolts: dict[int, Any] = {}
        self.executes: dict[int, Any] = {}
        #: A single-task executor's bolt's execute_batch, fed whole steps (see Bolt).
        self.execute_batch: Any = None
        # A stateful topology: $checkpoint tuples reach this bolt (client/stateful.py).
        checkpointed = any(i.stream == CHECKPOINT_STREAM_ID for i in comp.inputs)
        # Barrier checkpointing (worker/barrier.py): True aligned, False not, None: off.
        barrier = (self.conf.get(cfg.TOPOLOGY_STATE_CHECKPOINT_MODE) == MODE_BARRIER) \
            if checkpointed and barrier_mode(self.conf) else None
        for t in self.tasks:
            bolt = component_object(comp)
            ctx = self.context(t)
            out = OutputCollector(self, t, build_routes(self.ws, self.component_id, t, ctx))
            self.collectors.append(out)
            window = None
            if barrier is not None and isinstance(bolt, WindowedBolt):
                # No acker: nothing to ack; BoltBarrier checkpoints the window's contents.
                window = WindowHost(bolt, self.conf, ctx, out, out.ack, self)
                bolt.prepare(self.conf, ctx, window.collector)
                self.executes[t] = window.execute
            elif barrier is not None and isinstance(bolt, StatefulBolt):
                bolt.prepare(self.conf, ctx, out)  # BoltBarrier restores its state
                self.executes[t] = bolt.execute
            elif isinstance(bolt, (StatefulBolt, WindowedBolt)):
                self.executes[t] = host_bolt(self, bolt, self.conf, ctx, out)
            elif isinstance(bolt, BasicBolt):
                bolt.prepare(self.conf, ctx)
                self.executes[t] = self._basic(bolt, out)
            elif isinstance(bolt, Bolt):
                bolt.prepare(self.conf, ctx, out)
                batch = getattr(bolt, "execute_batch", None)
                if callable(batch):
                    self.executes[t] = lambda tup, batch=batch: batch([tup])
                    if not self.multi:
                        self.execute_batch = batch
                else:
                    self.executes[t] = bolt.execute
            else:
                raise TypeError(f"component {self.component_id!r} is not a bolt: {type(bolt)}")
            self.bolts[t] = bolt
            if barrier is not None:
                self.executes[t] = BoltBarrier(self, t, self.executes[t], out, ctx, self.conf,
                                               bolt, barrier, window).run
            elif checkpointed and not is_stateful(bolt):
                self.executes[t] = forwarding(self.executes[t], out, ctx)
        if checkpointed:  # every tuple goes through the checkpoint-aware execute
            self.execute_batch = None
        #: Streams of the runtime's own tuples, which a task's executed leaves out.
        self.system_streams = frozenset((CHECKPOINT_STREAM_ID, TM_CONTROL_STREAM_ID)) \
            if checkpointed else None
        if not self.multi:
            self.dispatch = self.executes[self.tasks[0]]  # type: ignore[method-assign]
        tick = self.conf.get(cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS)
        if tick:
            self.add_timer(float(tick), lambda: self._tick(tick))

    def _basic(self, bolt: BasicBolt, out: OutputCollector) -> Any:
        return BasicRunner(bolt.execute, out).run

    def dispatch(self, item: Any) -> None:  # multi-task executors: (task, tuple)
        tup = item[1]
        if self.system_streams is None or tup.source_stream not in self.system_streams:
            self.ws.stats[item[0]].executed += 1  # before it runs, as _run_counting does
        self.executes[item[0]](tup)

    def step(self) -> int:
        dq = self.queue.dq
        if not dq:
            return 0
        st = self.ws.stats[self.tasks[0]]
        t0 = perf_counter()
        if self.execute_batch is not None:  # one call: the user's code sets its pace
            popleft = dq.popleft
            batch = [popleft() for _ in range(min(len(dq), BATCH))]
            n = len(batch)
            st.executed += n  # before it runs, as _run_counting does
            self.execute_batch(batch)
        elif self.multi:
            n = Executor.step(self)  # dispatch counts each tuple
        else:
            n = self._run_counting(dq, st, t0)
        if n:
            # One timing per batch: its mean is each tuple's execute latency (stats.py).
            dt = perf_counter() - t0
            if self.multi:
                stats = self.ws.stats
                share = dt / len(self.tasks)
                for t in self.tasks:
                    stats[t].busy_secs += share
                # Which task ran what is not timed apart: the first task holds the histogram.
                stats[self.tasks[0]].execute.record_many(dt * 1000 / n, n)
            else:
                st.busy_secs += dt
                st.execute.record_many(dt * 1000 / n, n)
        return n

    def _run_counting(self, dq: Any, st: Any, t0: float) -> int:
        """A single task's step (collector.run_counting)."""
        return run_counting(dq, st, self.dispatch, self.system_streams, t0, BATCH,
                            BATCH_SECS)

    def _tick(self, freq: Any) -> None:
        fields = self.ws.fields[(SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID)]
        for t in self.tasks:
            self.executes[t](Tuple([freq], SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID,
                                   SYSTEM_TASK_ID, None, fields))

    def teardown(self) -> None:
        self.end_batch()
        for bolt in self.bolts.values():
            bolt.cleanup()


class _SpoutTask:
    __slots__ = ("task", "spout", "pending", "collector", "max_pending", "stats", "barrier")

    def __init__(self, task: int, spout: Spout, pending: PendingMap, max_pending: int | None,
                 stats: TaskStats):
        self.task = task
        self.spout = spout
        self.pending = pending
        self.max_pending = max_pending
        self.stats = stats
        self.collector: SpoutOutputCollector | None = None
        #: Barrier checkpointing: the task's snapshots and restores (None: off).
        self.barrier: SpoutBarrier | None = None


def spout_wait(first: float, most: float, empty: int) -> float:
    """Seconds a spout's loop may sleep after ``empty`` calls in a row emitted nothing:
    ``first`` doubling, at most ``most`` (none after an emit).

    A first sleep of 0.2 ms (0.1 ms doubled) woke a rated spout's loop ~14k times a
    second between its emits: most of a core at a quarter of the max rate, with the
    ZeroMQ threads and the other worker waiting for the CPU (complete latency p99 7-10 ms
    there, 3 ms with 1 ms, Storm's level-3 sleep; the doubling is Squall's)."""
    if empty <= 0:
        return 0.0
    return min(most, first * (1 << min(empty - 1, 16)))


def dry_wait_until(now: float, first: float, most: float, streak: int, dry: bool) -> float:
    """Until when (monotonic) a spout whose last next_tuple emitted nothing (``dry``) is
    not called again: Storm's spout sleeps its wait out, and so does ours now, rather than
    being called at every wake-up of its loop in between (each a certain empty call that
    doubled the next wait). 0.0 when not dry: a spout held at max pending or not yet
    restored is called again as soon as its loop runs."""
    return now + spout_wait(first, most, streak) if dry else 0.0


def next_empty_streak(streak: int, made: int, dry: bool) -> int:
    """The spout's count of empty next_tuple calls in a row after a step that emitted
    ``made`` tuples, its last call emitting nothing when ``dry`` (collector.spout_burst):
    Storm's wait follows a call that emitted nothing, so a burst that ended with one counts
    as one empty call (waits ``first``, not another step that finds it empty again); a
    burst cut short by its budget, time or max pending does not."""
    if not made:
        return streak + 1
    return 1 if dry else 0


def backlogged(queues: list, limit: int) -> bool:
    """Whether any of ``queues`` (deques) holds ``limit`` items or more.

    The executors of a worker share its loop's thread, so a spout called while tuples wait
    downstream only lengthens the queues: each round it makes up to SPOUT_BUDGET tuples (a
    sentence spout's 128 make 1,280 words) and a bolt takes BATCH. Its queues then grow
    to the high water mark, backpressure pauses every worker's spouts, and the workers
    whose queues drained first sit idle until the congested one is below the low mark
    (half the time, at the max of the word count). Held here instead, a spout emits at
    the pace its worker drains, and the queues stay a few steps long."""
    for dq in queues:
        if len(dq) >= limit:
            return True
    return False


def drain_first(held_since: float, now: float, most: float, backlog: bool) -> float:
    """When a spout on a loop whose queues are ``backlog``ged (backlogged) has been held
    since ``held_since`` (0: it was not), from ``now``: the new ``held_since``, 0 to call
    it. A backlog its spouts do not make (another worker's frames, a spout on a thread of
    its own) may last; after ``most`` seconds (topology.spout.wait.max.millis) held, the
    spout gets its burst and, if the backlog is still there, waits ``most`` again, so it
    runs at that pace at least and the water marks decide beyond it, as without the hold."""
    if not backlog or most <= 0.0:
        return 0.0
    if not held_since:
        return now
    return held_since if now - held_since < most else 0.0


class SpoutExecutor(Executor):
    """Runs user spouts: next_tuple under backpressure/max-pending, ack/fail/timeout callbacks.

    As Storm's SpoutExecutor, a spout is opened only once its topology is first active (and
    the worker's peers answered): a topology submitted inactive does not open its sources
    until it is activated. ``activate``/``deactivate`` follow the status after that.
    """

    KIND = "spout"
    STEP_CALLS = "ack or fail"
    OWN_TRANSFER = True

    def setup(self) -> None:
        comp = self.ws.topology.components[self.component_id]
        max_pending = self.conf.get(cfg.TOPOLOGY_MAX_SPOUT_PENDING)
        self.spouts: list[_SpoutTask] = []
        self.by_task: dict[int, _SpoutTask] = {}
        self.immediate_acks: list[tuple[int, Any]] = []
        self.opened = False
        self.activated = False
        self.empty_streak = 0
        #: Not called again before this monotonic time (0: no wait): its last call emitted
        #: nothing (dry_wait_until).
        self.dry_until = 0.0
        #: Paused until these monotonic times (0: not): by its worker's own congestion (set
        #: from other threads) and by the Topology Master (set here); neither lowers the other.
        self.held_until = 0.0
        self.master_until = 0.0
        self.wait_max = float(self.conf[cfg.TOPOLOGY_SPOUT_WAIT_MAX_MILLIS]) / 1000
        self.wait_first = float(
            self.conf[cfg.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS]) / 1000
        #: next_tuple calls slower than SLOW_CALL_SECS on the shared loop, and whether the
        #: loop should move this executor to a thread of its own (EventLoop reads it).
        self.slow_calls = 0
        self.wants_thread = False
        #: The receive queues of its own and its downstream executors on its loop
        #: (EventLoop sets them): while one holds a step's worth, next_tuple waits
        #: (backlogged), since held_since (monotonic; 0: not held), at most wait_max.
        self.backlog_queues = []
        self.held_since = 0.0
        for t in self.tasks:
            spout = component_object(comp)
            if not isinstance(spout, Spout):
                raise TypeError(f"component {self.component_id!r} is not a spout: {type(spout)}")
            st = _SpoutTask(t, spout, PendingMap(_SPOUT_BUCKETS), max_pending, self.ws.stats[t])
            st.pending.expired = self._expired_cb(st)
            if barrier_mode(self.conf) and TOPOLOGY_MASTER_ID in self.ws.component_tasks:
                st.barrier = SpoutBarrier(self, t, spout)
            self.spouts.append(st)
            self.by_task[t] = st
        self.add_timer(self.timeout_secs, self._rotate)

    def _open(self) -> None:
        """Open every spout task (first activation)."""
        log.info("topology=%s opening spout %s tasks %s", self.ws.topology_id, self.component_id,
                 self.tasks)
        for st in self.spouts:
            ctx = self.context(st.task)
            st.collector = SpoutOutputCollector(
                self, st.task, build_routes(self.ws, self.component_id, st.task, ctx), st.pending,
                bool(getattr(st.spout, "stable_message_ids", False)))
            self.collectors.append(st.collector)
            st.spout.open(self.conf, ctx, st.collector)
            if st.barrier is not None:
                st.barrier.opened(st.collector, self.conf, ctx)
        self.opened = True

    def _expired_cb(self, st: _SpoutTask) -> Any:
        def expired(root: int, entry: tuple) -> None:
            st.stats.failed += 1
            st.stats.timed_out += 1
            st.spout.fail(entry[0])
        return expired

    def _rotate(self) -> None:
        for st in self.spouts:
            if self.timeouts:
                st.pending.rotate()
            st.stats.pending = len(st.pending)

    def _set_active(self, active: bool) -> None:
        self.activated = active
        for st in self.spouts:
            if active:
                st.spout.activate()
            else:
                st.spout.deactivate()

    def produce(self) -> int:
        if (self.ws.active and self.ws.connected) != self.activated:
            self.phase = "open, activate or deactivate"
            if not self.opened:
                self._open()
            self._set_active(self.ws.active and self.ws.connected)
        if not self.activated or self.ws.bp.throttled:
            return 0
        hold = self.held_until if self.held_until > self.master_until else self.master_until
        if hold and time.monotonic() < hold:
            return 0
        made = 0
        dry = True
        ran = False
        shared = not self.threaded
        now = time.monotonic()
        if self.dry_until and now < self.dry_until:
            return self._immediate_acks()  # its last call emitted nothing: it waits
        if self.backlog_queues:
            self.held_since = drain_first(self.held_since, now, self.wait_max,
                                          backlogged(self.backlog_queues, BACKLOG))
            if self.held_since:
                return self._immediate_acks()
        self.phase = "next_tuple"
        for st in self.spouts:
            if st.barrier is not None and not st.barrier.ready:
                continue  # it emits once it restored the last checkpoint
            ran = True
            # Emits, not calls: a spout may emit a burst per call (collector.spout_burst).
            made += spout_burst(st.spout.next_tuple, st.collector, st.pending,
                                -1 if st.max_pending is None else st.max_pending,
                                SPOUT_BUDGET, SPOUT_STEP_SECS, SLOW_CALL_SECS,
                                self._slow_call if shared else None)
            dry = dry and st.collector.dry
            st.stats.pending = len(st.pending)
        self._immediate_acks()
        dry = dry and ran
        self.empty_streak = next_empty_streak(self.empty_streak, made, dry)
        self.dry_until = dry_wait_until(now, self.wait_first, self.wait_max,
                                        self.empty_streak, dry)
        return made

    def _immediate_acks(self) -> int:
        """Reliability off: the step's emits with a message id acked once next_tuple
        returned, as Storm's spout does without ackers. Returns 0 (no emits)."""
        if self.immediate_acks:
            acks, self.immediate_acks = self.immediate_acks, []
            for task, msg_id in acks:
                st = self.by_task[task]
                st.stats.acked += 1
                st.spout.ack(msg_id)
        return 0

    def _slow_call(self, took: float) -> None:
        self.slow_calls += 1
        if self.slow_calls == SLOW_CALLS:
            self.wants_thread = True
            self.waker.move_wanted = True  # the loop (on_slow is given only on it)
            log.warning("topology=%s spout %s: next_tuple took %.0f ms (%d calls over %.0f ms "
                        "so far); moving it to a thread of its own so that it slows only "
                        "itself (topology.executor.threaded: true starts it there)",
                        self.ws.topology_id, self.component_id, took * 1000, SLOW_CALLS,
                        SLOW_CALL_SECS * 1000)

    def idle_timeout(self) -> float:
        if not self.activated or self.ws.bp.throttled or \
                max(self.held_until, self.master_until) > time.monotonic():
            return min(0.1, self.wait_max)
        if self.dry_until:
            return max(self.dry_until - time.monotonic(), 0.0)
        return spout_wait(self.wait_first, self.wait_max, self.empty_streak)

    def dispatch(self, tup: Any) -> None:
        if self.multi:
            target, tup = tup
        else:
            target = self.tasks[0]
        stream = tup.source_stream
        roots = tup.values[0]
        now = time.monotonic()
        if stream == ACKER_ACK_STREAM_ID:
            if not self.multi:
                st = self.spouts[0]
                settle_acks(roots, st.pending, st.stats, st.spout.ack, now)
                return
            for root in roots:
                st = self._owner(root)
                if st is None:
                    continue  # timed out already, or a duplicate
                msg_id, t0 = st.pending.pop(root)
                st.stats.acked += 1
                st.stats.add_latency((now - t0) * 1000)
                st.spout.ack(msg_id)
        elif stream == ACKER_FAIL_STREAM_ID:
            for root in roots:
                st = self._owner(root)
                if st is None:
                    continue
                msg_id, _ = st.pending.pop(root)
                st.stats.failed += 1
                st.spout.fail(msg_id)
        elif stream == ACKER_RESET_TIMEOUT_STREAM_ID:
            for root in roots:
                st = self._owner(root)
                if st is not None:
                    st.pending.put(root, st.pending.get(root))
        elif stream == TM_CONTROL_STREAM_ID and roots[0] == "throttle":
            # The master pauses the spouts upstream of congestion, for a lease it renews.
            self.master_until = now + float(roots[2]) if self.component_id in roots[1] else 0.0
        elif stream == TM_CONTROL_STREAM_ID:
            st = self.by_task[target]  # one task's command
            if st.barrier is not None:
                st.barrier.on_control(roots)
        else:
            log.warning("topology=%s spout %s got a tuple on unexpected stream %s from task %d",
                        self.ws.topology_id, self.component_id, stream, tup.source_task)

    def _owner(self, root: int) -> _SpoutTask | None:
        if not self.multi:
            return self.spouts[0] if root in self.spouts[0].pending else None
        for st in self.spouts:
            if root in st.pending:
                return st
        return None

    def end_batch(self) -> None:
        Executor.end_batch(self)  # (no super() in a cdef class's cpdef method)
        for st in self.spouts:
            st.stats.pending = len(st.pending)

    def teardown(self) -> None:
        self.end_batch()
        if self.opened:
            for st in self.spouts:
                st.spout.close()


class AckerExecutor(Executor):
    """The ``__acker`` tasks: XOR ledgers fed by batched system tuples."""

    KIND = "acker"

    def setup(self) -> None:
        self.ledgers = {t: AckerLedger(_ACKER_BUCKETS) for t in self.tasks}
        self.add_timer(self.timeout_secs, self._rotate)
        self.out_acks: dict[int, list] = {}
        self.out_fails: dict[int, list] = {}
        self.out_resets: dict[int, list] = {}

    def _rotate(self) -> None:
        if self.timeouts:  # Storm's acker does not rotate either when timeouts are off
            for ledger in self.ledgers.values():
                ledger.rotate()
        for t, ledger in self.ledgers.items():
            self.ws.stats[t].pending = len(ledger)

    def dispatch(self, item: Any) -> None:
        if self.multi:
            task, tup = item
        else:
            task, tup = self.tasks[0], item
        ledger = self.ledgers[task]
        stream = tup.source_stream
        flat = tup.values[0]
        st = self.ws.stats[task]
        if stream == ACKER_ACK_STREAM_ID:
            acked, failed = ledger.ack_all(flat, self.out_acks, self.out_fails)
        elif stream == ACKER_INIT_STREAM_ID:
            acked, failed = ledger.init_all(flat, self.out_acks, self.out_fails)
        elif stream == ACKER_FAIL_STREAM_ID or stream == ACKER_RESET_TIMEOUT_STREAM_ID:
            acked = failed = 0
            settle = ledger.fail if stream == ACKER_FAIL_STREAM_ID else ledger.reset_timeout
            for root in flat:
                r = settle(root)
                if type(r) is TreeAcked:
                    self.out_acks.setdefault(r.spout_task, []).append(r.root)
                    acked += 1
                elif type(r) is TreeFailed:
                    self.out_fails.setdefault(r.spout_task, []).append(r.root)
                    failed += 1
                elif type(r) is TimeoutReset:
                    self.out_resets.setdefault(r.spout_task, []).append(r.root)
                elif r is not None:
                    raise TypeError(r)
        else:
            log.warning("topology=%s acker got a tuple on unexpected stream %s from task %d",
                        self.ws.topology_id, stream, tup.source_task)
            return
        st.executed += 1
        st.acked += acked
        st.failed += failed

    def end_batch(self) -> None:
        src = self.tasks[0]
        for stream, out in ((ACKER_ACK_STREAM_ID, self.out_acks),
                            (ACKER_FAIL_STREAM_ID, self.out_fails),
                            (ACKER_RESET_TIMEOUT_STREAM_ID, self.out_resets)):
            if out:
                for spout_task, roots in out.items():
                    self.send_system(spout_task, src, stream, [roots])
                out.clear()

    def idle_timeout(self) -> float:
        return 5.0


class TopologyMasterRunner(Executor):
    """The ``__topology_master`` task (worker/topology_master.py)."""

    def setup(self) -> None:
        self.master = TopologyMaster(self)

    def dispatch(self, item: Any) -> None:
        self.master.dispatch(item)


def executor_for(ws: WorkerState, component_id: str, tasks: list[int], loop: Any) -> Executor:
    """The executor for ``tasks``: on ``loop`` unless the component asks for its own thread."""
    comp = ws.topology.components[component_id]
    if component_id == ACKER_COMPONENT_ID:
        return AckerExecutor(ws, component_id, tasks, loop)
    if component_id == TOPOLOGY_MASTER_ID:
        return TopologyMasterRunner(ws, component_id, tasks, loop)
    # A shell component waits on its child (a spout for every sync): a thread of its own.
    threaded = comp.shell is not None or \
        bool(ws.component_conf(component_id).get(cfg.TOPOLOGY_EXECUTOR_THREADED))
    cls = SpoutExecutor if comp.kind == "spout" else BoltExecutor
    return cls(ws, component_id, tasks, None if threaded else loop)
