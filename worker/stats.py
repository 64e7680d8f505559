# cython: annotation_typing=False
"""Per-task counters and latency histograms a worker reports in its heartbeat.

Storm's executor stats, kept cumulative (since the worker started) so that Nimbus can
subtract two heartbeats to get any window (nimbus/stats_windows.py): emitted and transferred
per stream (counted on the stream's route by the collector, so a per-stream count costs
nothing extra), executed, acked, failed, and latency histograms (client/histogram.py). A
bolt's execute latency is its batch's mean, timed once per batch (two clock reads per batch
rather than per tuple; Storm samples 5% of tuples for the same reason); the same timing gives
the executor's busy seconds, from which capacity follows.
"""

from __future__ import annotations

from typing import Any

from ..client.histogram import Histogram, quantile
from ..client.metrics import MetricRegistry


class TaskStats:
    """Counters of one task, read by the heartbeat thread (plain ints: reads are atomic)."""

    __slots__ = ("component", "routes", "executed", "acked", "failed", "timed_out", "pending",
                 "complete", "execute", "busy_secs", "metrics")

    def __init__(self, component: str):
        self.component = component
        #: stream -> the collector's Route, which counts emitted and transferred.
        self.routes: dict[str, Any] = {}
        self.executed = 0
        self.acked = 0
        self.failed = 0
        self.timed_out = 0
        self.pending = 0
        #: Complete latencies of acked trees, ms (spouts).
        self.complete = Histogram()
        #: Execute latencies, ms (bolts; per batch, see the module doc).
        self.execute = Histogram()
        #: Seconds spent executing (bolts): capacity = busy / elapsed.
        self.busy_secs = 0.0
        self.metrics = MetricRegistry()

    def add_latency(self, ms: float) -> None:
        self.complete.record(ms)

    def snapshot(self) -> dict:
        routes = list(self.routes.values())
        out = {"component": self.component,
               "emitted": sum(r.emitted for r in routes),
               "transferred": sum(r.transferred for r in routes),
               "executed": self.executed, "acked": self.acked, "failed": self.failed,
               "timed_out": self.timed_out, "pending": self.pending,
               "streams": {r.stream: [r.emitted, r.transferred] for r in routes
                           if r.emitted}}
        if self.complete.n:
            hist = self.complete.snapshot()
            out["complete_hist"] = hist
            counts = self.complete.counts.copy()
            # The summary's mean and percentiles cover the same span: since the worker started.
            out["complete_latency_ms"] = {
                "mean": hist["sum"] / hist["n"], "p50": quantile(counts, 0.5),
                "p99": quantile(counts, 0.99), "n": hist["n"]}
        if self.execute.n:
            out["execute_hist"] = self.execute.snapshot()
        if self.busy_secs:  # every task of a multi-task executor has its share
            out["busy_secs"] = self.busy_secs
        if self.metrics.metrics:
            out["metrics"] = self.metrics.snapshot()
        if self.metrics.progress is not None:  # a batch-wise component's latest batch
            out["progress"] = self.metrics.progress
        return out
