"""Shell component hosts: a task's child process on Storm's multi-lang protocol as a bolt
or a spout (Storm's ShellBolt and ShellSpout).

A bolt's protocol is asynchronous. ``execute`` queues the tuple (at most
``topology.shellbolt.max.pending``; at the bound it waits, which is the backpressure),
a writer thread feeds the child (heartbeats ahead of tuples, as Storm's
ShellBoltMessageQueue), and a reader thread takes the child's emits, acks, fails, logs,
errors and metrics and hands them to the executor's thread, which owns the collector and
writes the task ids an emit asks for straight back. A spout's protocol is synchronous:
each ``next``, ``ack``, ``fail``, ``activate`` and ``deactivate`` is written and the
child's messages read until ``sync``, on the executor's thread (shell components always
get a thread of their own).

As in Storm, a child that exits, writes garbage, acks, fails or anchors an unknown id, or
stays silent for ``topology.subprocess.timeout.secs`` ends the worker: the error (with
the child's stderr tail) is logged and reported, the supervisor restarts the worker, and
the spouts replay the tuples it held.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections import deque
from typing import Any, Mapping

from ..client import config as cfg
from ..client.metrics import shell_metric
from ..client.components import Bolt, Spout
from ..client.shell import serializer_name
from ..client.topology import ComponentDef, ShellSpec
from ..client.tuple import DEFAULT_STREAM, Tuple
from .multilang import ShellError, ShellProcess, context_json

log = logging.getLogger("squall.worker.shell")

HEARTBEAT_STREAM = "__heartbeat"
#: Seconds between a bolt's heartbeat tuples and between silence checks (Storm's 1 s).
HEARTBEAT_SECS = 1.0
#: Protocol log levels (storm.py's logTrace..logError) -> Python's.
_LEVELS = {0: 5, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
#: Messages a writer hands the child per flush.
_WRITE_BATCH = 64


def component_object(comp: ComponentDef) -> Any:
    """A fresh object for one task of ``comp``: a host for a shell component's child, the
    user's unpickled spout or bolt otherwise."""
    if comp.shell is None:
        return comp.instantiate()
    if comp.kind == "spout":
        return ShellSpoutHost(comp.shell)
    return ShellBoltHost(comp.shell)


#: Keys whose values are secrets though their names do not say so.
_HIDDEN_KEYS = ("storm.zookeeper.superACL",)


def _handshake_conf(conf: Mapping[str, Any], topology_id: str) -> dict[str, Any]:
    """The conf the child sees: the topology's with secrets redacted, in nested maps too
    (the child is the user's code, but nothing needs our keys in a script's memory or its
    crash dumps), and Storm's ``storm.id`` (the topology id)."""
    out = cfg.redact(conf, _HIDDEN_KEYS)
    out.setdefault("storm.id", topology_id)
    return out


def _input_key(tid: Any) -> str:
    """The key of a bolt's input tuple as the child names it: the string id we sent, or
    its digits when the child sends a number back."""
    return tid if isinstance(tid, str) else str(tid)


class _Host:
    """Start and stop the child; what bolt and spout hosts share."""

    proc: ShellProcess

    def __init__(self, spec: ShellSpec):
        self.spec = spec
        self.failure: BaseException | None = None
        self.running = False

    def _launch(self, conf: Mapping[str, Any], context: Any) -> None:
        spec = self.spec
        cwd = None
        if spec.change_child_cwd:
            cwd = context.code_dir
            if not cwd or not os.path.isdir(cwd):
                raise ShellError(
                    f"component {context.this_component_id!r}: the topology package has no "
                    f"resources/ folder for {' '.join(spec.argv)!r} to run in ({cwd}); put the "
                    "scripts in resources/ beside the topology, or set change_child_cwd=False")
        timeout = conf.get(cfg.TOPOLOGY_SUBPROCESS_TIMEOUT_SECS)
        if timeout is None:
            timeout = cfg.get(conf, cfg.SUPERVISOR_WORKER_TIMEOUT_SECS)
        self.timeout = float(timeout)
        label = f"{context.this_component_id}[{context.this_task_id}]"
        self.proc = ShellProcess(spec.argv, cwd, spec.env,
                                 serializer_name(conf.get(cfg.TOPOLOGY_MULTILANG_SERIALIZER)),
                                 label)
        self.child_log = self.proc.child_log
        self.context = context
        self._register_metrics(conf)
        # A child that never answers the handshake is killed, so launch's read sees EOF.
        guard = threading.Timer(self.timeout, self.proc.kill)
        guard.daemon = True
        guard.start()
        try:
            pid = self.proc.launch(_handshake_conf(conf, context.topology_id),
                                   context_json(context),
                                   context.pid_dir or os.path.join(os.getcwd(), "pids"))
        except BaseException as e:
            timed_out = not guard.is_alive()
            self.proc.stop()
            self.proc.close_pipes()
            if isinstance(e, ShellError) and timed_out:
                raise ShellError(f"the child did not answer the handshake within "
                                 f"{self.timeout:g}s (topology.subprocess.timeout.secs)"
                                 + self.proc.info()) from None
            raise
        finally:
            guard.cancel()
        self.running = True
        self.last_heard = time.monotonic()
        log.info("topology=%s component=%s task=%d: shell child %s started, pid %d (%s)",
                 context.topology_id, context.this_component_id, context.this_task_id,
                 " ".join(self.spec.argv), pid, self.proc.serializer)

    def _emit_args(self, msg: Mapping[str, Any]) -> tuple[list, str, int | None, bool]:
        """An emit's values, stream, direct task (None: routed) and whether the child wants
        the task ids back (Storm's default: yes)."""
        values = msg.get("tuple")
        if not isinstance(values, list):
            raise ShellError(f"an emit needs a list in 'tuple': {msg!r}" + self.proc.info())
        task = msg.get("task")
        return (values, msg.get("stream") or DEFAULT_STREAM, int(task) if task else None,
                msg.get("need_task_ids", True) is not False)

    def _common(self, cmd: Any, msg: Mapping[str, Any]) -> bool:
        """Handle the messages bolts and spouts share (log, error, metrics); False for any
        other command."""
        if cmd == "log":
            self._log(msg)
        elif cmd == "error":
            self._error(msg)
        elif cmd == "metrics":
            self._metrics(msg)
        else:
            return False
        return True

    def _log(self, msg: Mapping[str, Any]) -> None:
        level = msg.get("level", 2)
        self.child_log.log(_LEVELS.get(level, logging.INFO) if isinstance(level, int)
                           else logging.INFO, "%s", msg.get("msg"))

    def _error(self, msg: Mapping[str, Any]) -> None:
        self.collector.report_error(f"Shell Process Exception: {msg.get('msg')}")

    def _register_metrics(self, conf: Mapping[str, Any]) -> None:
        """The metrics the component registered for its child (ShellBolt.register_metric,
        Storm's registerMetric with an IShellMetric), so they show before the first update."""
        self._shell_metrics: dict[str, Any] = {}
        for name, kind in dict(conf.get(cfg.TOPOLOGY_SHELL_METRICS) or {}).items():
            self._shell_metrics[name] = shell_metric(self.context, name, kind)

    def _metrics(self, msg: Mapping[str, Any]) -> None:
        """Storm's RPC metrics (``storm.rpcMetrics(name, params)``): the task's metric of that
        name, registered by the component (a counter, meter, histogram or gauge) or, when it
        registered none, a counter. Storm's names are kept as given (``my-custom-shell-
        metric``); exported to Prometheus with letters, digits and underscores."""
        name = msg.get("name")
        if not isinstance(name, str) or not name:
            raise ShellError(f"a metrics message needs a non-empty name: {msg!r}")
        metrics = self._shell_metrics  # made at launch, before the child can send
        metric = metrics.get(name)
        try:
            if metric is None:
                metric = metrics[name] = shell_metric(self.context, name, "counter")
            metric.update_from_rpc(msg.get("params"))
        except (TypeError, ValueError) as e:  # the child's mistake: said, never fatal
            self.collector.report_error(f"shell metric {name[:80]!r}: {e}")

    def _stop_child(self, threads: tuple[threading.Thread, ...] = ()) -> None:
        """Stop the child, wait for ``threads`` (they end on its end of input), then close
        the pipes unless one of them still uses them."""
        self.running = False
        proc = getattr(self, "proc", None)
        if proc is None:
            return
        proc.stop()
        for t in threads:
            t.join(timeout=2.0)
        if not any(t.is_alive() for t in threads):
            proc.close_pipes()


class ShellBoltHost(_Host, Bolt):
    """One task of a ShellBolt: the asynchronous bolt protocol."""

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self.inputs: dict[str, Tuple] = {}
        self._ids = itertools.count(1)
        self.max_pending = max(1, int(cfg.get(conf, cfg.TOPOLOGY_SHELLBOLT_MAX_PENDING)))
        self._cv = threading.Condition()
        self._tuples: deque[dict] = deque()
        #: Task-id lists owed to the child (executor thread only), and the lock that
        #: keeps their writes and the writer thread's apart.
        self._task_ids: list[list] = []
        self._write_lock = threading.Lock()
        self._heartbeat_due = False
        self._hb_ids = itertools.count(1)
        #: Who sleeps on the condition: a full execute, the writer with nothing to write.
        self._waiting = False
        self._writer_idle = False
        #: Child messages for the executor's thread, and whether a drain is scheduled.
        self.inbox: deque[dict] = deque()
        self._scheduled = False
        self._stopping = threading.Event()
        self._launch(conf, context)
        self._threads = [threading.Thread(target=self._guarded(fn), daemon=True,
                                          name=f"shell-{name}-{self.proc.label}")
                         for name, fn in (("reader", self._read_loop),
                                          ("writer", self._write_loop),
                                          ("heartbeat", self._heartbeat_loop))]
        for t in self._threads:
            t.start()

    # -- the executor's thread --------------------------------------------------------
    def execute(self, tup: Tuple) -> None:
        if self.failure is not None:
            raise self.failure
        tid = str(next(self._ids))
        self.inputs[tid] = tup
        msg = {"id": tid, "comp": tup.source_component, "stream": tup.source_stream,
               "task": tup.source_task, "tuple": tup.values}
        cv = self._cv
        with cv:
            if len(self._tuples) >= self.max_pending:
                self._wait_for_room()
            self._tuples.append(msg)
            if self._writer_idle:  # notify costs: only when the writer sleeps
                cv.notify_all()

    def _wait_for_room(self) -> None:
        """At topology.shellbolt.max.pending: wait for the writer, and meanwhile handle what
        the child sends (it may be waiting for task ids before it reads on). Lock held."""
        self._waiting = True
        try:
            while len(self._tuples) >= self.max_pending:
                if self.failure is not None:
                    raise self.failure
                if self.inbox:
                    self._cv.release()
                    try:
                        self._drain()
                        # The executor's step is not over: send the acks and emits now,
                        # not after the slow child has taken the rest of the step.
                        self.collector.flush()
                    finally:
                        self._cv.acquire()
                    continue
                self._cv.wait(HEARTBEAT_SECS)
        finally:
            self._waiting = False

    def _drain(self) -> None:
        self._scheduled = False
        inbox = self.inbox
        try:
            while inbox:
                self._handle(inbox.popleft())
            if self._task_ids:
                self._write_task_ids()
        except ShellError as e:  # the child broke the protocol: stop it, refuse more work
            self._fail(e)
            raise

    def _write_task_ids(self) -> None:
        """The task ids the child waits for, written from this thread at once: storm.py
        blocks on them after every emit, and a hop through the writer thread would cost a
        thread switch per emit (Storm's queue puts them ahead of tuples for the same
        reason)."""
        encode = self.proc.encode
        ids, self._task_ids = self._task_ids, []
        with self._write_lock:
            self.proc.write_raw(b"".join(encode(t) for t in ids))

    def _raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure

    def _handle(self, msg: dict) -> None:
        cmd = msg.get("command")
        if cmd == "emit":
            self._emit(msg)
        elif cmd == "ack" or cmd == "fail":
            tid = msg.get("id")
            tup = self.inputs.pop(_input_key(tid), None)
            if tup is None:
                raise ShellError(f"the child {cmd}ed id {tid!r}, which is unknown or already "
                                 "acked or failed" + self.proc.info())
            if cmd == "ack":
                self.collector.ack(tup)
            else:
                self.collector.fail(tup)
        elif not self._common(cmd, msg):  # Storm's ShellBolt ignores commands it does not know
            log.warning("shell child %s sent an unknown command %r; ignored",
                        self.proc.label, cmd)

    def _emit(self, msg: dict) -> None:
        values, stream, task, wants_ids = self._emit_args(msg)
        anchor_ids = msg.get("anchors") or []
        if isinstance(anchor_ids, str):
            anchor_ids = [anchor_ids]
        anchors = []
        for a in anchor_ids:
            t = self.inputs.get(_input_key(a))
            if t is None:
                raise ShellError(f"the child anchored onto id {a!r}, which is unknown or "
                                 "already acked or failed" + self.proc.info())
            anchors.append(t)
        if task is not None:
            self.collector.emit_direct(task, values, stream, anchors=anchors)
            return
        # One anchor (every BasicBolt-style emit): the collector's single-anchor fast path.
        targets = self.collector.emit(values, stream,
                                      anchors=anchors[0] if len(anchors) == 1 else anchors)
        if wants_ids:
            self._task_ids.append(list(targets))  # written when this drain ends

    def cleanup(self) -> None:
        if not hasattr(self, "_threads"):  # prepare failed: _launch stopped the child
            return
        self._stopping.set()
        with self._cv:
            self.running = False
            self._cv.notify_all()
        self._stop_child(tuple(self._threads))
        self.inputs.clear()

    # -- other threads -----------------------------------------------------------------
    def _guarded(self, fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - every way out is fatal while running
                if self.running:
                    self._fail(e if isinstance(e, ShellError) else
                               ShellError(f"{type(e).__name__}: {e}" + self.proc.info()))
        return run

    def _fail(self, exc: BaseException) -> None:
        """Fatal, from any thread: keep the first error, stop the child, and make the
        executor's thread raise it (the worker then dies and restarts, as in Storm)."""
        if self.failure is not None:
            return
        self.failure = exc
        log.error("shell child %s failed: %s", self.proc.label, exc)
        self.running = False
        self._stopping.set()
        self.proc.kill()
        with self._cv:
            self._cv.notify_all()
        self.collector.call_soon_threadsafe(self._raise_failure)

    def _read_loop(self) -> None:
        read = self.proc.read
        inbox = self.inbox
        cv = self._cv
        while self.running:
            msg = read()
            self.last_heard = time.monotonic()
            if type(msg) is not dict or not isinstance(msg.get("command"), str):
                raise ShellError(f"the child sent a message without a command: {msg!r}"
                                 + self.proc.info())
            if msg["command"] == "sync":
                continue  # a heartbeat's answer: hearing it is all that counts
            inbox.append(msg)
            if not self._scheduled:
                self._scheduled = True
                self.collector.call_soon_threadsafe(self._drain)
            if self._waiting:
                with cv:
                    cv.notify_all()

    def _take_batch(self) -> list:
        """What the writer sends next: a due heartbeat ahead of tuples (Storm's priority;
        task ids do not wait here at all). Lock held."""
        out: list = []
        if self._heartbeat_due:
            self._heartbeat_due = False
            out.append({"id": f"hb-{next(self._hb_ids)}", "comp": None,
                        "stream": HEARTBEAT_STREAM, "task": -1, "tuple": []})
        tuples = self._tuples
        while tuples and len(out) < _WRITE_BATCH:
            out.append(tuples.popleft())
        return out

    def _write_loop(self) -> None:
        proc = self.proc
        encode = proc.encode
        cv = self._cv
        tuples = self._tuples
        while self.running:
            with cv:
                while self.running and not (self._heartbeat_due or tuples):
                    self._writer_idle = True
                    cv.wait(HEARTBEAT_SECS)
                    self._writer_idle = False
                out = self._take_batch()
                if self._waiting:
                    cv.notify_all()  # room for the waiting execute
            if out and self.running:
                data = b"".join(encode(m) for m in out)
                with self._write_lock:
                    proc.write_raw(data)

    def _heartbeat_loop(self) -> None:
        cv = self._cv
        while not self._stopping.wait(HEARTBEAT_SECS) and self.running:
            with cv:
                self._heartbeat_due = True
                cv.notify_all()
            silent = time.monotonic() - self.last_heard
            if silent > self.timeout:
                raise ShellError(f"the child sent nothing for {silent:.1f}s, over "
                                 f"topology.subprocess.timeout.secs ({self.timeout:g}s); it "
                                 "may hang or ignore heartbeat tuples" + self.proc.info())


class ShellSpoutHost(_Host, Spout):
    """One task of a ShellSpout: the synchronous spout protocol."""

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self._waiting_since: float | None = None
        self._timed_out = False
        self._launch(conf, context)
        self._watchdog = threading.Thread(target=self._watch, daemon=True,
                                          name=f"shell-watchdog-{self.proc.label}")
        self._watchdog.start()

    def next_tuple(self) -> None:
        self._query({"command": "next", "id": ""})  # Storm sends the empty id

    def ack(self, msg_id: Any) -> None:
        self._query({"command": "ack", "id": msg_id})

    def fail(self, msg_id: Any) -> None:
        self._query({"command": "fail", "id": msg_id})

    def activate(self) -> None:
        self._query({"command": "activate", "id": ""})

    def deactivate(self) -> None:
        self._query({"command": "deactivate", "id": ""})

    def close(self) -> None:
        self._stop_child((self._watchdog,) if hasattr(self, "_watchdog") else ())

    def _query(self, command: dict) -> None:
        """Write one command and handle the child's messages until its ``sync``."""
        proc = self.proc
        self._waiting_since = time.monotonic()
        try:
            proc.write(command)
            while True:
                msg = proc.read()
                self._waiting_since = time.monotonic()
                cmd = msg.get("command") if type(msg) is dict else None
                if cmd == "sync":
                    return
                if cmd == "emit":
                    self._emit(msg)
                elif not self._common(cmd, msg):  # Storm's ShellSpout: fatal
                    raise ShellError(f"the child sent {msg!r} while answering "
                                     f"{command['command']!r}; expected emit, log, error, "
                                     "metrics or sync" + proc.info())
        except ShellError:
            if self._timed_out:
                raise ShellError(f"the child sent no sync within {self.timeout:g}s of "
                                 f"{command['command']!r} (topology.subprocess.timeout.secs)"
                                 + proc.info()) from None
            raise
        finally:
            self._waiting_since = None

    def _emit(self, msg: dict) -> None:
        values, stream, task, wants_ids = self._emit_args(msg)
        msg_id = msg.get("id")
        if task is not None:
            self.collector.emit_direct(task, values, stream, msg_id=msg_id)
            return
        targets = self.collector.emit(values, stream, msg_id=msg_id)
        if wants_ids:
            self.proc.write(list(targets))

    def _watch(self) -> None:
        """A child that does not sync within the timeout is killed, so the blocked read
        ends and raises on the executor's thread; if even that read does not return (a
        grandchild holds the pipe), the worker is ended from here, as Storm's exits."""
        while self.running:
            time.sleep(HEARTBEAT_SECS)
            since = self._waiting_since
            if since is not None and time.monotonic() - since > self.timeout:
                self._timed_out = True
                log.error("shell child %s: no sync for %.1fs; killing it",
                          self.proc.label, time.monotonic() - since)
                self.proc.kill()
                deadline = time.monotonic() + 2 * HEARTBEAT_SECS
                while self._waiting_since is since and time.monotonic() < deadline:
                    time.sleep(0.05)
                if self._waiting_since is since:
                    self.collector.die(ShellError(
                        f"the child sent no sync within {self.timeout:g}s "
                        "(topology.subprocess.timeout.secs) and its output did not end when "
                        "it was killed" + self.proc.info()))
                return
