"""Error reports of a connector, at most one a second per kind: :class:`Reports`.

A server that is down fails every step of a bolt or every read of a spout; a report for
each would flood the worker's heartbeat and the UI. The first of a kind is reported at
once, the rest within the interval are counted and the count goes into the next report.
"""

from __future__ import annotations

import time
from typing import Any

#: Seconds between two reports of one kind of error.
REPORT_EVERY_SECS = 1.0


class Reports:
    """``reports.error(kind, text)`` reports through ``collector.report_error`` unless a
    report of ``kind`` went out less than ``every`` seconds ago (then it is counted);
    ``every`` unset: :data:`REPORT_EVERY_SECS` at the time of the report.

    ``reports.bad_tuple(tup, kind, text)`` settles a tuple that can never succeed (it does
    not map, the server refuses it as it is): failed, so its spout's retry policy decides,
    or, where a failure rewinds every spout (``drop_bad``: barrier checkpointing,
    :func:`~squall.client.stateful.failures_rewind`), acked, since it would fail again on
    every replay. Either way the report says which."""

    def __init__(self, collector: Any, every: float | None = None, drop_bad: bool = False):
        self.collector = collector
        self.every = every
        self.drop_bad = drop_bad
        #: kind -> [when last reported, errors since]
        self._last: dict[str, list] = {}

    def error(self, kind: str, text: str, skipped: int = 0) -> bool:
        """Report ``text``; False when it was only counted. ``skipped``: errors of the kind
        the caller passed over for this one (counted as if reported here)."""
        now = time.monotonic()
        last = self._last.get(kind)
        every = REPORT_EVERY_SECS if self.every is None else self.every
        if last is not None and now - last[0] < every:
            last[1] += 1 + skipped
            return False
        earlier = (last[1] if last else 0) + skipped
        more = f" ({earlier} more since the last report)" if earlier else ""
        self._last[kind] = [now, 0]
        self.collector.report_error(text + more)
        return True

    def bad_tuple(self, tup: Any, kind: str, text: str) -> None:
        """Report ``text`` (what is wrong with the tuple) and fail the tuple, or drop it."""
        if self.drop_bad:
            self.error(kind, f"{text}; it was dropped (under barrier checkpointing a failed "
                             "tuple rewinds the spouts, and this one would fail on every replay)")
            self.collector.ack(tup)
        else:
            self.error(kind, f"{text}; it was failed")
            self.collector.fail(tup)
