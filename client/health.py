"""A topology's health in words, from its TopologySummary: what `squall list`, the REST API
and the UI show next to the status (a crash-looping topology is still ACTIVE)."""

from __future__ import annotations

import time
from typing import Any


def topology_health(t: Any) -> str:
    """``"ok"``, or what is wrong: ``"workers restarting: 5 in 60 s"``,
    ``"workers down: 1 of 2"``, ``"stalled: spout s: next_tuple has not returned for 12 s
    (on host:6700)"`` (joined with "; ")."""
    if not t.health_known:
        return "unknown (a follower Nimbus answered; the leader knows)"
    problems = []
    if t.recent_restarts:
        problems.append(f"workers restarting: {t.recent_restarts} in {t.restart_window_secs} s")
    if t.status in ("ACTIVE", "INACTIVE") and t.num_workers and \
            t.live_workers < t.num_workers:
        problems.append(f"workers down: {t.num_workers - t.live_workers} of {t.num_workers}")
    problems.extend(f"stalled: {s}" for s in t.stalled)
    return "; ".join(problems) or "ok"


def last_error_line(t: Any, now: float | None = None) -> str | None:
    """``"wc: last error 12 s ago in split on host:6700: ValueError: bad line"``, or None."""
    if not t.HasField("last_error"):
        return None
    e = t.last_error
    ago = max(0, int((time.time() if now is None else now) - e.time_secs))
    where = f" on {e.host}:{e.port}" if e.host else ""
    return f"{t.name}: last error {ago} s ago in {e.component}{where}: {e.error}"
