# cython: annotation_typing=False
"""A latency histogram with log-spaced buckets: cheap to record, exact to merge and subtract.

Storm's UI shows latencies over 10 minutes, 3 hours, a day and all time. A reservoir of
recent samples cannot answer "the p99 of the last 10 minutes" (its mean and percentiles
cover different spans), and percentiles of parts do not add up. Cumulative bucket counts
do: the histogram of a window is the newest counts minus the counts at the window's start,
and the histogram of a component is the sum of its tasks'. The price is resolution: four
buckets per power of two, so a percentile is within 9% of the true value (HdrHistogram and
Prometheus's native histograms make the same trade).

Buckets are keyed by ``floor(log2(ms) * 4)``; bucket ``k`` holds values in
``[2**(k/4), 2**((k+1)/4))`` ms. Values at or below ``MIN_MS`` share the lowest bucket.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

#: Buckets per doubling.
PER_OCTAVE = 4
#: Smallest distinguished value, ms (1 microsecond).
MIN_MS = 0.001
_MIN_KEY = math.floor(math.log2(MIN_MS) * PER_OCTAVE)
#: Largest distinguished value's bucket (2**40 ms, 35 years): bigger values, infinity and
#: NaN land here rather than raise inside the caller's bolt.
MAX_KEY = 40 * PER_OCTAVE
_log2 = math.log2
_floor = math.floor
#: The least value of MAX_KEY's bucket, ms.
_TOP_MS = 2.0 ** (MAX_KEY / PER_OCTAVE)

try:
    import cython
    _COMPILED = cython.compiled
except ImportError:  # installed without Cython: this source runs as plain Python
    _COMPILED = False


def bucket_of(ms: float) -> int:
    """The bucket a value in ms falls in (a C function in the compiled build: it runs on
    every acked tree)."""
    if not ms > MIN_MS:  # NaN too
        return _MIN_KEY
    if ms >= _TOP_MS:  # MAX_KEY's bucket and above, infinity
        return MAX_KEY
    return _key(ms) if _COMPILED else _floor(_log2(ms) * PER_OCTAVE)  # noqa: F821


def bucket_upper(key: int) -> float:
    """The upper bound of bucket ``key``, ms."""
    return 2.0 ** ((key + 1) / PER_OCTAVE)


def bucket_mid(key: int) -> float:
    """The value a bucket stands for: the geometric middle of its bounds, ms."""
    return 2.0 ** ((key + 0.5) / PER_OCTAVE)


class Histogram:
    """Cumulative counts of values (ms) by bucket, with their exact sum and count.

    Single writer (the executor's thread); readers copy ``snapshot()``: a dict copy under the
    GIL, which at worst misses the value being recorded.
    """

    __slots__ = ("counts", "total")

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.total = 0.0

    @property
    def n(self) -> int:
        """Values recorded (the counts' sum: one addition less per value)."""
        return sum(self.counts.copy().values())

    def record(self, ms: float) -> None:
        # On every acked tree and every user histogram update.
        k = bucket_of(ms)
        c = self.counts
        c[k] = c.get(k, 0) + 1
        self.total += ms

    def record_many(self, ms: float, n: int) -> None:
        """``n`` values of ``ms`` each (a batch's mean, when timing each tuple costs too much)."""
        if n <= 0:
            return
        k = bucket_of(ms)
        c = self.counts
        c[k] = c.get(k, 0) + n
        self.total += ms * n

    def snapshot(self) -> dict:
        """JSON-ready: ``{"b": {key: count}, "sum": ms, "n": count}`` (keys as strings)."""
        counts = self.counts.copy()
        return {"b": {str(k): v for k, v in counts.items()}, "sum": self.total,
                "n": sum(counts.values())}


def parse(snap: Mapping | None) -> tuple[dict[int, int], float, int]:
    """(counts, sum, n) of a :meth:`Histogram.snapshot`; empty for None or junk."""
    if not isinstance(snap, Mapping):
        return {}, 0.0, 0
    try:
        counts: dict[int, int] = {}
        for k, v in (snap.get("b") or {}).items():
            key = min(MAX_KEY, max(_MIN_KEY, int(k)))  # a file's keys are not trusted
            counts[key] = counts.get(key, 0) + max(0, int(v))
        return counts, float(snap.get("sum", 0.0)), int(snap.get("n", 0))
    except (TypeError, ValueError, AttributeError, OverflowError):
        return {}, 0.0, 0


def merge(parts: Iterable[Mapping[int, int]]) -> dict[int, int]:
    """Bucket-wise sum."""
    out: dict[int, int] = {}
    for p in parts:
        for k, v in p.items():
            out[k] = out.get(k, 0) + v
    return out


def subtract(newer: Mapping[int, int], older: Mapping[int, int]) -> dict[int, int]:
    """Counts recorded between two cumulative snapshots (negative differences, from a reset
    the caller missed, clamp to 0)."""
    return {k: d for k, v in newer.items() if (d := v - older.get(k, 0)) > 0}


def quantile(counts: Mapping[int, int], q: float) -> float:
    """The ``q`` quantile (0..1) of bucketed counts, as its bucket's middle; 0.0 when empty."""
    n = sum(counts.values())
    if n <= 0:
        return 0.0
    rank = q * n
    seen = 0
    for k in sorted(counts):
        seen += counts[k]
        if seen >= rank:
            return bucket_mid(k)
    return bucket_mid(max(counts))
