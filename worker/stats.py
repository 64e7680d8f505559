"""Per-task counters and the recent complete latencies a worker reports in its heartbeat."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TaskStats:
    """Counters of one task, read by the heartbeat thread (plain ints: reads are atomic)."""

    component: str
    emitted: int = 0
    transferred: int = 0
    executed: int = 0
    acked: int = 0
    failed: int = 0
    timed_out: int = 0
    pending: int = 0
    #: Sum and count of complete latencies (spouts), in milliseconds.
    latency_ms_sum: float = 0.0
    latency_n: int = 0
    reservoir: list = field(default_factory=list)

    #: Latencies kept: the most recent ones (a ring), so percentiles describe the recent past.
    RESERVOIR = 4096

    def add_latency(self, ms: float) -> None:
        self.latency_ms_sum += ms
        n = self.latency_n
        self.latency_n = n + 1
        r = self.reservoir
        if n < self.RESERVOIR:
            r.append(ms)
        else:
            r[n & (self.RESERVOIR - 1)] = ms

    def snapshot(self) -> dict:
        out = {"component": self.component, "emitted": self.emitted,
               "transferred": self.transferred, "executed": self.executed,
               "acked": self.acked, "failed": self.failed, "timed_out": self.timed_out,
               "pending": self.pending}
        if self.latency_n:
            lat = sorted(self.reservoir)
            out["complete_latency_ms"] = {
                "mean": self.latency_ms_sum / self.latency_n,
                "p50": lat[len(lat) // 2],
                "p99": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
                "n": self.latency_n}
        return out
