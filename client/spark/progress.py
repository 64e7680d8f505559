"""The Spark bridge's progress per batch, as Structured Streaming reports a query's.

Pure (no IO, no clock: times are arguments). :class:`Progress` keeps one bridge task's
figures: :meth:`Progress.closed` when a batch is handed to its runner (the trigger, whose
spacing gives the input rate), :meth:`Progress.finished` when ``fn`` returned or raised,
with the runner's timings. It returns the batch's record (proto ``BatchProgress``'s
fields: what the task reports with its counters, up to Nimbus, the REST API and the UI)
and, at most once per :data:`LOG_EVERY_SECS` (and for a task's first batch, a failed one,
or one slow enough to risk the message timeout), the line for the worker log, which counts
the batches it stands for. Per batch the cost is a dict and some arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: At most one progress line per task this often, seconds (plus the first, failed and slow
#: batches): a bridge closing a batch every 0.1 s would otherwise write ten lines a second.
LOG_EVERY_SECS = 5.0
#: A batch that takes more than this share of topology.message.timeout.secs is named in the
#: log with the key to raise: its tuples are near to being failed by the timeout.
SLOW_SHARE = 0.5


@dataclass(frozen=True)
class Timings:
    """Seconds a runner spent on one batch, in order."""

    conversion: float = 0.0  # rows -> pyarrow Table -> DataFrame
    session: float = 0.0  # getting the SparkSession (its start: the first batch)
    wait: float = 0.0  # waiting for fn to finish the previous batch
    fn: float = 0.0  # fn(df, batch_id)


class Progress:
    """One bridge task's batches: records and throttled log lines."""

    def __init__(self, timeout_secs: float = 30.0, log_every_secs: float = LOG_EVERY_SECS):
        self.timeout_secs = timeout_secs
        self.log_every_secs = log_every_secs
        #: batch id -> when it closed (handed to a runner).
        self._closed: dict[int, float] = {}
        self._last_close: float | None = None
        self._first_seen: float | None = None
        self.batches = 0
        self.rows = 0
        self.failed_batches = 0
        #: The latest batch's record, or None before the first.
        self.latest: dict[str, Any] | None = None
        self._logged_at: float | None = None
        self._since_log = 0  # batches finished since the last line
        self._rows_since_log = 0

    def seen(self, now: float) -> None:
        """A tuple arrived (only the first call matters: the first batch's input rate)."""
        if self._first_seen is None:
            self._first_seen = now

    def closed(self, batch_id: int, now: float) -> None:
        """Batch ``batch_id`` was handed to a runner (Structured Streaming's trigger)."""
        self._closed[batch_id] = now

    def finished(self, batch_id: int, rows: int, ok: bool, timings: Timings, now: float,
                 wall: float, held: bool = False) -> tuple[dict[str, Any], str | None]:
        """Batch ``batch_id`` of ``rows`` tuples is done (``ok``: fn returned); ``now`` is
        the monotonic clock, ``wall`` the epoch time; ``held``: the bridge held its tuples'
        timeouts meanwhile (Spark was starting), so its length put nothing at risk. Returns
        its record and the log line (None when throttled)."""
        closed = self._closed.pop(batch_id, now)
        since = self._last_close if self._last_close is not None else self._first_seen
        self._last_close = max(closed, self._last_close or closed)
        span = closed - since if since is not None else 0.0
        duration = max(0.0, now - closed)
        self.batches += 1
        self.rows += rows
        if not ok:
            self.failed_batches += 1
        record = {
            "batch_id": batch_id, "timestamp_secs": wall, "num_input_rows": rows,
            "input_rows_per_second": rows / span if span > 0 else 0.0,
            "processed_rows_per_second": rows / duration if duration > 0 else 0.0,
            "duration_ms": duration * 1000.0, "conversion_ms": timings.conversion * 1000.0,
            "session_ms": timings.session * 1000.0, "wait_ms": timings.wait * 1000.0,
            "fn_ms": timings.fn * 1000.0, "batches": self.batches, "rows": self.rows,
            "failed_batches": self.failed_batches}
        self.latest = record
        self._since_log += 1
        self._rows_since_log += rows
        slow = not held and duration > SLOW_SHARE * self.timeout_secs
        due = self._logged_at is None or now - self._logged_at >= self.log_every_secs
        if not (due or slow or not ok):
            return record, None
        line = self.line(record, ok, slow)
        self._logged_at = now
        self._since_log = 0
        self._rows_since_log = 0
        return record, line

    def line(self, r: dict[str, Any], ok: bool, slow: bool) -> str:
        """One batch's progress in words (the worker log's line)."""
        session = f", session start {r['session_ms'] / 1000:.1f} s" \
            if r["session_ms"] >= 1000 else ""
        text = (f"batch {r['batch_id']}{'' if ok else ' FAILED'}: {r['num_input_rows']} rows, "
                f"{r['input_rows_per_second']:.0f} input rows/s, "
                f"{r['processed_rows_per_second']:.0f} processed rows/s, "
                f"{r['duration_ms'] / 1000:.2f} s (conversion "
                f"{r['conversion_ms'] / 1000:.2f} s{session}, wait "
                f"{r['wait_ms'] / 1000:.2f} s, fn {r['fn_ms'] / 1000:.2f} s)")
        if self._since_log > 1:
            text += (f"; {self._since_log} batches ({self._rows_since_log} rows) since the "
                     "last line")
        text += f"; {self.batches} batches, {self.rows} rows in all"
        if slow:
            text += (f"; slow: more than {SLOW_SHARE:.0%} of topology.message.timeout.secs="
                     f"{self.timeout_secs:g}, so tuples may time out and be replayed (raise "
                     "topology.message.timeout.secs, or lower max_batch_size)")
        return text
