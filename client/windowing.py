"""Windows over a bolt's input: :class:`WindowedBolt`, and the pure :class:`WindowManager`.

Storm's BaseWindowedBolt and org.apache.storm.windowing. A window has a length and a
slide, each a :class:`Count` of tuples or a :class:`Duration`; length == slide is a
tumbling window. Time is the tuple's arrival (processing time) or, with
``with_timestamp_field``, a field of the tuple (event time, in milliseconds): then the
bolt's watermark (the oldest of its input streams' newest timestamps, less the lag)
decides when a window is complete, and a tuple at or before the watermark is late.

The manager is a pure state machine: the caller gives it tuples with their timestamps,
the time (processing time) or the watermark (event time), and gets back the windows to
run. The worker's host (worker/windowed.py) owns the clock, the timers and the acking.

Semantics, in both times (Storm's):

- a duration window ending at ``e`` holds the tuples with ``e - length < ts <= e``; in
  processing time a slide timer that fires late widens its window by as much (it starts
  after the previous end + slide - length), so tumbling windows never skip a tuple;
- a count window holds the ``length`` newest tuples (in timestamp order);
- a count slide fires every ``slide`` tuples, a duration slide every ``slide`` ms (event
  time: at window ends aligned to multiples of the slide, as the watermark passes them);
- a window with no tuple is not run;
- ``new`` are the window's tuples that were not in the previous window run, ``expired``
  the previous window's tuples that are not in this one;
- a tuple leaves the manager (and is acked) when no later window can hold it.
"""

from __future__ import annotations

import bisect
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import config as cfg
from .components import Component


class Count:
    """A window length or slide in tuples (Storm's BaseWindowedBolt.Count)."""

    def __init__(self, value: int):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"a window count must be a positive integer, got {value!r}")
        self.value = value

    def __repr__(self) -> str:
        return f"Count({self.value})"


class Duration:
    """A window length or slide in milliseconds (Storm's BaseWindowedBolt.Duration)."""

    def __init__(self, ms: int):
        if not isinstance(ms, (int, float)) or isinstance(ms, bool) or ms < 1:
            raise ValueError(f"a window duration must be at least 1 ms, got {ms!r}")
        self.value = int(ms)

    @classmethod
    def milliseconds(cls, n: float) -> "Duration":
        return cls(int(n))

    @classmethod
    def seconds(cls, n: float) -> "Duration":
        return cls(int(n * 1000))

    @classmethod
    def minutes(cls, n: float) -> "Duration":
        return cls(int(n * 60_000))

    @classmethod
    def hours(cls, n: float) -> "Duration":
        return cls(int(n * 3_600_000))

    @classmethod
    def days(cls, n: float) -> "Duration":
        return cls(int(n * 86_400_000))

    def __repr__(self) -> str:
        return f"Duration({self.value} ms)"


#: The field of the late-tuple stream: the late tuple's values (Storm emits the tuple).
LATE_TUPLE_FIELD = "tuple"


@dataclass
class WindowSpec:
    """A window's shape, read from (and written to) the component conf with Storm's keys."""

    length_count: int | None = None
    length_ms: int | None = None
    slide_count: int | None = None
    slide_ms: int | None = None
    timestamp_field: str | None = None
    lag_ms: int = 0
    watermark_ms: int = 1000
    late_stream: str | None = None

    @property
    def event_time(self) -> bool:
        return self.timestamp_field is not None

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> "WindowSpec":
        return cls(conf.get(cfg.TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT),
                   conf.get(cfg.TOPOLOGY_BOLTS_WINDOW_LENGTH_DURATION_MS),
                   conf.get(cfg.TOPOLOGY_BOLTS_SLIDING_INTERVAL_COUNT),
                   conf.get(cfg.TOPOLOGY_BOLTS_SLIDING_INTERVAL_DURATION_MS),
                   conf.get(cfg.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME),
                   int(conf.get(cfg.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS) or 0),
                   int(conf.get(cfg.TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS) or 1000),
                   conf.get(cfg.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM))

    def problem(self) -> str | None:
        """Why this is not a window, or None."""
        if (self.length_count is None) == (self.length_ms is None):
            return "give the window one length, a Count or a Duration (with_window)"
        if self.slide_count is not None and self.slide_ms is not None:
            return "give the window one slide, a Count or a Duration"
        if self.late_stream and not self.event_time:
            return "a late-tuple stream needs event time (with_timestamp_field)"
        return None

    def duration_ms(self) -> int:
        """Length plus slide in ms, for the message-timeout check (0: count-based)."""
        return (self.length_ms or 0) + (self.slide_ms or 0)


#: Event-time timestamps this close to now in *seconds* (ten years) are seconds, not ms:
#: as milliseconds they would fall in the first weeks of 1970.
_SECONDS_SPAN = 10 * 365 * 86400


def seconds_problem(ts: Any, now_ms: float) -> str | None:
    """Why an event-time timestamp looks like seconds since the epoch (``time.time()``)
    where milliseconds belong, or None. (A fraction alone says nothing: ``time.time() *
    1000`` has one.)"""
    if isinstance(ts, (int, float)) and abs(ts - now_ms / 1000) < _SECONDS_SPAN:
        return f"{ts!r} is about now in seconds since the epoch"
    return None


def stall_after_ms(spec: WindowSpec) -> int:
    """How long the watermark may stand still, with tuples waiting, before that is worth a
    warning: a window's length (a Duration window), else ten watermark intervals, and never
    under ten seconds."""
    return max(10_000, spec.length_ms or 10 * spec.watermark_ms)


class TupleWindow:
    """What ``WindowedBolt.execute`` gets (Storm's TupleWindow)."""

    __slots__ = ("tuples", "new", "expired", "start_timestamp", "end_timestamp")

    def __init__(self, tuples: list, new: list, expired: list,
                 start: int | None, end: int | None):
        self.tuples = tuples
        self.new = new
        self.expired = expired
        #: Event or processing time (ms) the window starts after; None for count windows.
        self.start_timestamp = start
        #: Time (ms) of the window's end (its newest tuple for count windows).
        self.end_timestamp = end

    def get(self) -> list:
        """Every tuple in the window, oldest first."""
        return self.tuples

    def get_new(self) -> list:
        return self.new

    def get_expired(self) -> list:
        return self.expired

    def __iter__(self) -> Iterator:
        return iter(self.tuples)

    def __len__(self) -> int:
        return len(self.tuples)

    def __repr__(self) -> str:
        return (f"TupleWindow({len(self.tuples)} tuples, {len(self.new)} new, "
                f"{len(self.expired)} expired, {self.start_timestamp}..{self.end_timestamp})")


class _Event:
    __slots__ = ("ts", "seq", "item")

    def __init__(self, ts: int, seq: int, item: Any):
        self.ts = ts
        self.seq = seq
        self.item = item


class WindowManager:
    """Tuples in, windows out; no clock of its own (see the module doc for the semantics).

    ``on_evict(item)`` is called for each tuple no later window can hold, in the call that
    finds it. Every method returns the windows to run, oldest first.
    """

    def __init__(self, spec: WindowSpec, on_evict: Callable[[Any], None] | None = None):
        problem = spec.problem()
        if problem:
            raise ValueError(problem)
        self.spec = spec
        self.on_evict = on_evict or (lambda item: None)
        self.event_time = spec.event_time
        #: Tuples no window has passed yet (event time: timestamp after the watermark).
        self.pending: list[_Event] = []
        #: Tuples at or before the time (watermark), oldest first, that a window may hold.
        self.ordered: deque[_Event] = deque()
        self._ts: list[int] = []  # the timestamps of ``ordered`` (bisect)
        self.seq = 0
        self.since_slide = 0
        self.watermark: int | None = None
        #: Event time, duration slide: the end of the next window to run.
        self.next_end: int | None = None
        #: Processing time, duration slide: when the slide's timer last fired.
        self.last_fire: int | None = None
        self._last: list[_Event] = []
        self._last_seqs: set[int] = set()
        #: The newest timestamp of each input stream (event time's watermark).
        self.stream_ts: dict[Any, int] = {}

    # -- input -----------------------------------------------------------------
    def add(self, item: Any, ts: int, stream: Any = None) -> list[TupleWindow] | None:
        """Add a tuple at ``ts`` (ms). Returns the windows it completes (processing time,
        count slide), ``[]``, or None when the tuple is late (event time: ``ts`` is at or
        before the watermark); a late tuple is not kept."""
        if self.event_time:
            prev = self.stream_ts.get(stream)
            if prev is None or ts > prev:
                self.stream_ts[stream] = ts
            if self.watermark is not None and ts <= self.watermark:
                return None
            self.seq += 1
            self.pending.append(_Event(ts, self.seq, item))
            return []
        if self.last_fire is not None and ts <= self.last_fire:
            ts = self.last_fire + 1  # arrived after the window ending then had run
        self.seq += 1
        ev = _Event(ts, self.seq, item)
        self._append(ev)
        out: list[TupleWindow] = []
        if self.spec.slide_count is not None or self.spec.slide_ms is None:
            self.since_slide += 1
            if self.since_slide >= (self.spec.slide_count or self._tumbling_count()):
                self.since_slide = 0
                out = self._fire(ts, len(self.ordered) - 1)
        self._evict_before(self._horizon(ts))
        return out

    def _tumbling_count(self) -> int:
        # No slide given: tumbling, slide = length (a Count length: that many tuples).
        return self.spec.length_count or 1

    def _append(self, ev: _Event) -> None:
        self.ordered.append(ev)
        self._ts.append(ev.ts)

    # -- time -------------------------------------------------------------------
    def on_time(self, now: int) -> list[TupleWindow]:
        """Processing time with a duration slide: the slide's timer fired at ``now`` (ms).

        A timer fires late by some milliseconds: a duration window starts where the last
        one's successor should (the last end + slide - length; Storm widens it by the same
        drift), so a tumbling window's tuples are each in exactly one window."""
        spec = self.spec
        start = None
        if spec.length_ms is not None and self.last_fire is not None:
            start = self.last_fire + spec.slide_ms - spec.length_ms
        out = self._fire(now, len(self.ordered) - 1, start)
        self.last_fire = now
        self._evict_before(self._horizon(now))
        return out

    def compute_watermark(self, streams: int) -> int | None:
        """The watermark the input implies: the oldest of the ``streams`` input streams'
        newest timestamps, less the lag; None until every stream has a tuple."""
        if len(self.stream_ts) < streams or not self.stream_ts:
            return None
        return min(self.stream_ts.values()) - self.spec.lag_ms

    def on_watermark(self, wm: int) -> list[TupleWindow]:
        """Event time: every tuple at or before ``wm`` has arrived; run the windows it closes."""
        if self.watermark is not None and wm <= self.watermark:
            return []
        self.watermark = wm
        ready = sorted((e for e in self.pending if e.ts <= wm), key=lambda e: (e.ts, e.seq))
        self.pending = [e for e in self.pending if e.ts > wm]
        out: list[TupleWindow] = []
        spec = self.spec
        if spec.slide_ms is None:  # count slide (or tumbling count): every n-th tuple in ts order
            n = spec.slide_count or self._tumbling_count()
            for ev in ready:
                self._append(ev)
                self.since_slide += 1
                if self.since_slide >= n:
                    self.since_slide = 0
                    out += self._fire(ev.ts, len(self.ordered) - 1)
            self._evict_before(self._horizon(wm))
            return out
        for ev in ready:
            self._append(ev)
        slide = spec.slide_ms
        end = self.next_end if self.next_end is not None else self._align(self._first_after(None))
        while end is not None and end <= wm:
            idx = bisect.bisect_right(self._ts, end) - 1
            fired = self._fire(end, idx)
            if fired:
                out += fired
                end += slide
            else:  # nothing in this window: skip to the first window holding a later tuple
                nxt = self._align(self._first_after(end))
                if nxt is None or nxt > wm:
                    end = nxt if nxt is not None else end
                    break
                end = nxt
        self.next_end = end
        horizon = self._horizon(end if end is not None else wm)
        self._evict_before(horizon)
        return out

    def _first_after(self, ts: int | None) -> int | None:
        i = 0 if ts is None else bisect.bisect_right(self._ts, ts)
        return self._ts[i] if i < len(self._ts) else None

    def _align(self, ts: int | None) -> int | None:
        if ts is None:
            return None
        s = self.spec.slide_ms
        return ts if ts % s == 0 else ts + (s - ts % s)

    # -- windows ----------------------------------------------------------------
    def _select(self, ref_ts: int, idx: int, start: int | None = None
                ) -> tuple[list[_Event], int | None]:
        if idx < 0:
            return [], None
        spec = self.spec
        if spec.length_count is not None:
            lo = max(0, idx + 1 - spec.length_count)
            return [self.ordered[i] for i in range(lo, idx + 1)], None
        if start is None:
            start = ref_ts - spec.length_ms
        lo = bisect.bisect_right(self._ts, start, 0, idx + 1)
        return [self.ordered[i] for i in range(lo, idx + 1)], start

    def _fire(self, ref_ts: int, idx: int, start: int | None = None) -> list[TupleWindow]:
        events, start = self._select(ref_ts, idx, start)
        if not events:
            return []
        seqs = {e.seq for e in events}
        new = [e.item for e in events if e.seq not in self._last_seqs]
        expired = [e.item for e in self._last if e.seq not in seqs]
        self._last, self._last_seqs = events, seqs
        return [TupleWindow([e.item for e in events], new, expired, start, ref_ts)]

    def _horizon(self, ref: int) -> tuple[int, int | None]:
        """(keep at least the newest n, and every tuple after ts): what later windows can hold.

        Every later window ends after ``ref``: a count window holds at most the newest
        ``length`` tuples, a duration window nothing at or before ``ref - length``.
        """
        spec = self.spec
        if spec.length_count is not None:
            return spec.length_count, None
        if not self.event_time and spec.slide_ms is not None and self.last_fire is not None:
            # The next window starts after the last end + slide - length, late timer or not.
            return 0, self.last_fire + spec.slide_ms - spec.length_ms
        return 0, ref - spec.length_ms

    def _evict_before(self, horizon: tuple[int, int | None]) -> None:
        keep, after = horizon
        od = self.ordered
        while len(od) > keep and (after is None or od[0].ts <= after):
            ev = od.popleft()
            del self._ts[0]
            self.on_evict(ev.item)

    def snapshot(self, encode: Callable[[Any], Any]) -> dict:
        """Everything the manager holds, msgpack-able (``encode(item)`` for each tuple): what
        a checkpoint saves so the windows continue after a restore."""
        def events(evs: Any) -> list:
            return [[e.ts, e.seq, encode(e.item)] for e in evs]
        return {"pending": events(self.pending), "ordered": events(self.ordered),
                "seq": self.seq, "since_slide": self.since_slide, "watermark": self.watermark,
                "next_end": self.next_end, "last_fire": self.last_fire,
                "last": events(self._last),
                "stream_ts": [[list(k) if isinstance(k, tuple) else k, v]
                              for k, v in self.stream_ts.items()]}

    def restore(self, data: dict | None, decode: Callable[[Any], Any]) -> None:
        """Back to a :meth:`snapshot` (None: empty, as new). Nothing is evicted."""
        self.pending, self.ordered, self._ts = [], deque(), []
        self.seq = self.since_slide = 0
        self.watermark = self.next_end = self.last_fire = None
        self._last, self._last_seqs, self.stream_ts = [], set(), {}
        if not data:
            return
        by_seq = {}
        for ts, seq, raw in data["pending"]:
            self.pending.append(_Event(ts, seq, decode(raw)))
        for ts, seq, raw in data["ordered"]:
            ev = _Event(ts, seq, decode(raw))
            self._append(ev)
            by_seq[seq] = ev
        self.seq, self.since_slide = data["seq"], data["since_slide"]
        self.watermark, self.next_end = data["watermark"], data["next_end"]
        self.last_fire = data.get("last_fire")
        self._last = [by_seq.get(seq) or _Event(ts, seq, decode(raw))
                      for ts, seq, raw in data["last"]]
        self._last_seqs = {e.seq for e in self._last}
        self.stream_ts = {(tuple(k) if isinstance(k, list) else k): v
                          for k, v in data["stream_ts"]}

    def __len__(self) -> int:
        """Tuples held (waiting for a window, or in one a later window may still hold)."""
        return len(self.pending) + len(self.ordered)


class WindowedBolt(Component):
    """A bolt that runs on windows of its input (Storm's BaseWindowedBolt).

    Example: the sum of the last 30 seconds, every 10 seconds::

        class Sum(WindowedBolt):
            def execute(self, window):
                total = sum(t.values[0] for t in window.get())
                self.collector.emit([total])
            def declare_output_fields(self, declarer):
                declarer.declare(["sum"])

        builder.set_bolt("sum", Sum().with_window(Duration.seconds(30), Duration.seconds(10)))

    Tuples are acked by the runtime when they leave the last window that can hold them
    (do not ack them yourself); emits in ``execute`` are anchored to every tuple of the
    window. So ``topology.message.timeout.secs`` must exceed length + slide: a longer
    window is refused at submit.
    """

    def __init__(self) -> None:
        self._window_conf: dict[str, Any] = {}

    def _set(self, key: str, value: Any) -> "WindowedBolt":
        if not hasattr(self, "_window_conf"):
            self._window_conf = {}
        self._window_conf[key] = value
        return self

    def with_window(self, length: Count | Duration, slide: Count | Duration | None = None
                    ) -> "WindowedBolt":
        """A sliding window of ``length`` moving by ``slide`` (unset: tumbling)."""
        for what, v in (("length", length), ("slide", slide)):
            if v is not None and not isinstance(v, (Count, Duration)):
                raise TypeError(f"window {what} must be a Count or a Duration, got {v!r}")
        for key in (cfg.TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT, cfg.TOPOLOGY_BOLTS_WINDOW_LENGTH_DURATION_MS,
                    cfg.TOPOLOGY_BOLTS_SLIDING_INTERVAL_COUNT,
                    cfg.TOPOLOGY_BOLTS_SLIDING_INTERVAL_DURATION_MS):
            getattr(self, "_window_conf", {}).pop(key, None)
        slide = slide if slide is not None else length
        self._set(cfg.TOPOLOGY_BOLTS_WINDOW_LENGTH_COUNT if isinstance(length, Count)
                  else cfg.TOPOLOGY_BOLTS_WINDOW_LENGTH_DURATION_MS, length.value)
        return self._set(cfg.TOPOLOGY_BOLTS_SLIDING_INTERVAL_COUNT if isinstance(slide, Count)
                         else cfg.TOPOLOGY_BOLTS_SLIDING_INTERVAL_DURATION_MS, slide.value)

    def with_tumbling_window(self, length: Count | Duration) -> "WindowedBolt":
        return self.with_window(length, length)

    def with_timestamp_field(self, field: str) -> "WindowedBolt":
        """Event time: the input field holding each tuple's timestamp (ms since the epoch)."""
        return self._set(cfg.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME, str(field))

    def with_lag(self, lag: Duration) -> "WindowedBolt":
        """How far out of order tuples may arrive: the watermark trails by this much."""
        return self._set(cfg.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_MAX_LAG_MS, lag.value)

    def with_watermark_interval(self, interval: Duration) -> "WindowedBolt":
        return self._set(cfg.TOPOLOGY_BOLTS_WATERMARK_EVENT_INTERVAL_MS, interval.value)

    def with_late_tuple_stream(self, stream: str) -> "WindowedBolt":
        """Send late tuples to ``stream`` (declared for you, one field ``tuple``: its values)."""
        return self._set(cfg.TOPOLOGY_BOLTS_LATE_TUPLE_STREAM, str(stream))

    def get_component_configuration(self) -> Mapping[str, Any] | None:
        return dict(getattr(self, "_window_conf", {}))

    def window_spec(self) -> WindowSpec:
        return WindowSpec.from_conf(self.get_component_configuration() or {})

    def check_inputs(self, inputs: Sequence[tuple[str, str, list[str]]]) -> None:
        spec = self.window_spec()
        problem = spec.problem()
        if problem:
            raise ValueError(problem)
        if spec.timestamp_field:
            for comp, stream, fields in inputs:
                if spec.timestamp_field not in fields and not stream.startswith("$"):
                    raise ValueError(f"its timestamp field {spec.timestamp_field!r} is not a "
                                     f"field of {comp!r} stream {stream!r} (fields: {fields})")

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector

    def execute(self, window: TupleWindow) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        pass
