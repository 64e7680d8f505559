"""A windowed bolt task: the clock, the timers and the acks around client/windowing.py.

Storm's WindowedBoltExecutor. Each input tuple goes into the task's
:class:`~squall.client.windowing.WindowManager` with its time (arrival, or the
timestamp field in event time); the windows it completes run the bolt's ``execute``.
Duration slides (processing time) and watermarks (event time) run on the executor's
timers, in the executor's thread, so the bolt needs no locks. A tuple is acked when it
leaves the last window that can hold it, after the windows that held it have run; a
late tuple is acked at once, after going to the late stream if one is declared.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..client.stateful import CHECKPOINT_STREAM_ID
from ..client.tuple import DEFAULT_STREAM, SYSTEM_TICK_STREAM_ID, Tuple
from ..client.windowing import (TupleWindow, WindowManager, WindowSpec, seconds_problem,
                                stall_after_ms)
from .checkpoint import CollectorWrapper

log = logging.getLogger(__name__)


class WindowCollector(CollectorWrapper):
    """The collector ``execute(window)`` emits through: anchored to the window's tuples
    unless other anchors are given (Storm's WindowedOutputCollector)."""

    def __init__(self, out: Any):
        super().__init__(out)
        self.window: TupleWindow | None = None

    def emit(self, values: list, stream: str = DEFAULT_STREAM, anchors: Any = None,
             direct_task: int | None = None, msg_id: Any = None) -> list[int]:
        if anchors is None and self.window is not None:
            anchors = self.window.tuples
        return self.out.emit(values, stream, anchors, direct_task)

    def ack(self, tup: Tuple) -> None:
        """Tuples of a window are acked by the runtime when they leave it; this is a no-op
        so a bolt written for plain Storm that acks them does no harm."""


class WindowHost:
    """Feeds one task's windows. ``ack`` is how evicted tuples are acked (the executor's
    collector, or a stateful task's holding collector)."""

    def __init__(self, bolt: Any, conf: Any, context: Any, out: Any, ack: Any, executor: Any):
        self.bolt = bolt
        self.out = out
        self.ack = ack
        self.context = context
        self.spec = WindowSpec.from_conf(conf)
        self.evicted: list[Tuple] = []
        self.manager = WindowManager(self.spec, on_evict=self.evicted.append)
        self.collector = WindowCollector(out)
        self.streams = len({(c, s) for c, s in context.this_sources()
                            if s != CHECKPOINT_STREAM_ID and not s.startswith("__")})
        self.last_now = 0
        #: The clocks (squall.testing's engine gives simulated ones).
        self.wall_clock = getattr(executor, "wall_clock", time.time)
        self.monotonic = getattr(executor, "monotonic", time.monotonic)
        #: Event time: the first timestamps are looked at for seconds-for-milliseconds.
        self.ts_checks = 16
        #: Event time: when (monotonic) the watermark last moved, and whether its standing
        #: still was reported (once, until it moves again).
        self.wm_moved_at = self.monotonic()
        self.wm_warned = False
        if self.spec.event_time:
            executor.add_timer(self.spec.watermark_ms / 1000, self.on_watermark_timer)
        elif self.spec.slide_ms is not None:
            executor.add_timer(self.spec.slide_ms / 1000, self.on_slide_timer)

    def snapshot(self) -> dict:
        """The windows' contents for a checkpoint (barrier mode): each tuple's source and values."""
        return self.manager.snapshot(
            lambda t: [t.source_component, t.source_stream, t.source_task, list(t.values)])

    def restore(self, data: dict | None) -> None:
        fields = self.context.component_output_fields

        def decode(raw: list) -> Tuple:
            comp, stream, task, values = raw
            return Tuple(list(values), comp, stream, task, None, fields(comp, stream))
        self.manager.restore(data, decode)
        self.evicted.clear()

    def now(self) -> int:
        # Wall-clock ms (the window's timestamps), never going back.
        self.last_now = max(self.last_now, int(self.wall_clock() * 1000))
        return self.last_now

    def execute(self, tup: Tuple) -> None:
        if tup.source_stream == SYSTEM_TICK_STREAM_ID:
            return
        if self.spec.event_time:
            ts = tup[self.spec.timestamp_field]
            if self.ts_checks:
                self._check_timestamp(ts)
            if self.manager.add(tup, int(ts), (tup.source_component, tup.source_stream)) is None:
                if self.spec.late_stream:
                    self.out.emit([list(tup.values)], self.spec.late_stream, [tup])
                self.ack(tup)
            return
        self.run(self.manager.add(tup, self.now()))

    def on_slide_timer(self) -> None:
        self.run(self.manager.on_time(self.now()))

    def on_watermark_timer(self) -> None:
        manager = self.manager
        before = manager.watermark
        wm = manager.compute_watermark(self.streams)
        if wm is not None:
            self.run(manager.on_watermark(wm))
        now = self.monotonic()
        if manager.watermark != before or not manager.pending:
            self.wm_moved_at, self.wm_warned = now, False
        elif not self.wm_warned and (now - self.wm_moved_at) * 1000 >= stall_after_ms(self.spec):
            self.wm_warned = True
            self._warn(self._stall_text(now - self.wm_moved_at))

    def _check_timestamp(self, ts: Any) -> None:
        self.ts_checks -= 1
        why = seconds_problem(ts, self.wall_clock() * 1000)
        if why is not None:
            self.ts_checks = 0  # said once
            self._warn(f"its timestamp field {self.spec.timestamp_field!r} looks like seconds: "
                       f"{why}; event time is in milliseconds since the epoch "
                       "(int(time.time() * 1000)), so its windows would wait a thousand times "
                       "too long")

    def _stall_text(self, secs: float) -> str:
        manager = self.manager
        expected = {(c, s) for c, s in self.context.this_sources()
                    if s != CHECKPOINT_STREAM_ID and not s.startswith("__")}
        silent = sorted(f"{c}/{s}" for c, s in expected if (c, s) not in manager.stream_ts)
        why = (f"input stream(s) {', '.join(silent)} sent nothing yet" if silent else
               "newest timestamps (ms) per input stream: " + ", ".join(
                   f"{c}/{s}={ts}" for (c, s), ts in sorted(manager.stream_ts.items())))
        return (f"its watermark has not moved for {secs:.0f} s while {len(manager.pending)} "
                "tuple(s) wait for their window (the watermark is the oldest of its input "
                f"streams' newest timestamps, less the lag): {why}")

    def _warn(self, text: str) -> None:
        """Once per cause: the worker's log and the topology's errors (squall local, UI)."""
        msg = f"warning: windowed bolt {self.context.this_component_id!r}: {text}"
        log.warning(msg)
        self.out.report_error(msg)

    def run(self, windows: list[TupleWindow]) -> None:
        c = self.collector
        try:
            for w in windows:
                c.window = w
                self.bolt.execute(w)
        finally:
            c.window = None
            if self.evicted:
                ack = self.ack
                for t in self.evicted:
                    ack(t)
                self.evicted.clear()
