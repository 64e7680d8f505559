"""Windowed executor stats from cumulative heartbeats: Storm's 10m / 3h / 1d / all-time.

Workers report cumulative counters and histograms (worker/stats.py); supervisors forward
them with their heartbeats, which Nimbus keeps in memory (liveness.py). A window's value is
the newest cumulative value minus the one at the window's start, so Nimbus keeps, per task,
a thinned history of snapshots: every 10 s for the last 12 minutes, every 5 minutes for the
last 3.2 hours, every 30 minutes for the last 25 hours (about 150 points a task: a 3 h or
1 d window's start is within one spacing of exact, as Storm's buckets are). Nothing is
written to ZooKeeper. A worker restart resets its counters; a drop is taken as a reset and
the series stays monotone (the values before it are carried in ``base``), as Prometheus does
with counter resets.

A Nimbus that just became leader has no history. A window reaching back before the
worker started covers everything the worker counted (the worker's uptime in the heartbeat
says when that was); one that starts after the worker did but before this Nimbus's first
heartbeat of it covers what this Nimbus saw, from that first heartbeat on.

A series belongs to one worker slot (supervisor, port): when a task moves, or a stale
worker of a partitioned supervisor still reports, each slot's counts stay in their own
series and a window sums them, so nothing is counted twice.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable

from ..client import histogram

#: (age up to, spacing) of kept points, seconds.
TIERS = ((720.0, 10.0), (11520.0, 300.0), (90000.0, 1800.0))
COUNTERS = ("emitted", "transferred", "executed", "acked", "failed", "timed_out")


@dataclass
class Snap:
    """One task's cumulative values."""

    counters: dict[str, int] = field(default_factory=dict)
    busy: float = 0.0
    streams: dict[str, tuple[int, int]] = field(default_factory=dict)
    complete: dict[int, int] = field(default_factory=dict)
    complete_sum: float = 0.0
    execute: dict[int, int] = field(default_factory=dict)
    execute_sum: float = 0.0

    @classmethod
    def of(cls, ts: Any) -> "Snap":
        """From a TaskStats message."""
        return cls({c: int(getattr(ts, c)) for c in COUNTERS}, float(ts.busy_secs),
                   {k: (int(v.emitted), int(v.transferred)) for k, v in ts.streams.items()},
                   dict(ts.complete_hist.buckets), float(ts.complete_hist.sum),
                   dict(ts.execute_hist.buckets), float(ts.execute_hist.sum))

    def plus(self, o: "Snap") -> "Snap":
        streams = dict(self.streams)
        for k, (e, t) in o.streams.items():
            a, b = streams.get(k, (0, 0))
            streams[k] = (a + e, b + t)
        return Snap({c: self.counters.get(c, 0) + o.counters.get(c, 0) for c in COUNTERS},
                    self.busy + o.busy, streams,
                    histogram.merge((self.complete, o.complete)),
                    self.complete_sum + o.complete_sum,
                    histogram.merge((self.execute, o.execute)),
                    self.execute_sum + o.execute_sum)

    def minus(self, o: "Snap") -> "Snap":
        streams = {}
        for k, (e, t) in self.streams.items():
            a, b = o.streams.get(k, (0, 0))
            streams[k] = (max(0, e - a), max(0, t - b))
        return Snap({c: max(0, self.counters.get(c, 0) - o.counters.get(c, 0))
                     for c in COUNTERS},
                    max(0.0, self.busy - o.busy), streams,
                    histogram.subtract(self.complete, o.complete),
                    max(0.0, self.complete_sum - o.complete_sum),
                    histogram.subtract(self.execute, o.execute),
                    max(0.0, self.execute_sum - o.execute_sum))

    def dropped_below(self, older: "Snap") -> bool:
        """Whether a counter went down: the worker restarted."""
        return any(self.counters.get(c, 0) < older.counters.get(c, 0) for c in COUNTERS) or \
            sum(self.complete.values()) < sum(older.complete.values()) or \
            sum(self.execute.values()) < sum(older.execute.values())


class TaskSeries:
    """The thinned history of one task's cumulative snapshots (monotone across restarts)."""

    def __init__(self) -> None:
        self.points: deque[tuple[float, Snap]] = deque()
        self.base = Snap()
        self.last_raw: Snap | None = None
        self.current: tuple[float, Snap] | None = None
        #: When the counting began: the first worker's start (now - its uptime).
        self.start: float | None = None

    def add(self, now: float, ts: Any, uptime_secs: float = 0.0) -> None:
        raw = Snap.of(ts)
        if self.start is None:
            self.start = now - max(0.0, uptime_secs)
        if self.last_raw is not None and raw.dropped_below(self.last_raw):
            self.base = self.base.plus(self.last_raw)
        self.last_raw = raw
        snap = self.base.plus(raw) if self.base.counters else raw
        self.current = (now, snap)
        if not self.points or now - self.points[-1][0] >= TIERS[0][1]:
            self.points.append((now, snap))
            self._thin(now)

    def _thin(self, now: float) -> None:
        """Drop points closer to their predecessor than their age's tier allows."""
        kept: deque[tuple[float, Snap]] = deque()
        for t, s in self.points:
            age = now - t
            spacing = next((sp for limit, sp in TIERS if age <= limit), None)
            if spacing is None:
                continue  # older than the longest window
            if kept and t - kept[-1][0] < spacing and t != self.points[-1][0]:
                continue
            kept.append((t, s))
        self.points = kept

    def window(self, now: float, secs: float) -> tuple[Snap, float]:
        """(values over the last ``secs``, seconds they span); ``secs`` 0: everything."""
        if self.current is None:
            return Snap(), 0.0
        t_cur, cur = self.current
        if secs <= 0 or not self.points:
            first = self.points[0][0] if self.points else t_cur
            return cur, max(0.0, t_cur - first)
        start = now - secs
        older = None
        for t, s in self.points:
            if t <= start:
                older = (t, s)
            else:
                break
        if older is None:  # history shorter than the window
            assert self.start is not None
            if self.start >= start:  # the worker started inside it: all it counted
                return cur, max(0.0, t_cur - self.start)
            first_t, first = self.points[0]  # this Nimbus came later: from its first look
            return cur.minus(first), max(0.0, t_cur - first_t)
        return cur.minus(older[1]), t_cur - older[0]


def summarize(parts: Iterable[tuple[Snap, float]], uptime_secs: float = 0.0
              ) -> dict[str, Any]:
    """Counters, latencies and capacity of a group of tasks (an executor, or a component's
    executors) over one window: ExecutorSummary's and ComponentStats' fields. Latencies are
    from the merged histograms, so a group's mean and percentiles are exact, not averages
    of averages. ``uptime_secs`` is the span when the window is all-time."""
    total = Snap()
    span = 0.0
    for snap, secs in parts:
        total = total.plus(snap)
        span = max(span, secs)
    out: dict[str, Any] = dict(total.counters)  # timed_out is counted in failed too
    n_exec = sum(total.execute.values())
    if n_exec:
        out["execute_latency_ms"] = total.execute_sum / n_exec
        out["process_latency_ms"] = out["execute_latency_ms"]
    n_done = sum(total.complete.values())
    if n_done:
        out["complete_latency_ms"] = total.complete_sum / n_done
        out["complete_latency_p50_ms"] = histogram.quantile(total.complete, 0.5)
        out["complete_latency_p99_ms"] = histogram.quantile(total.complete, 0.99)
    span = max(span, uptime_secs)
    out["capacity"] = min(1.0, total.busy / span) if span > 0 and total.busy else 0.0
    out["streams"] = {k: {"emitted": e, "transferred": t} for k, (e, t) in total.streams.items()}
    return out
