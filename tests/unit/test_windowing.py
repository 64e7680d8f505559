"""The window manager against windows computed here from their definitions.

Each test drives client/windowing.py's pure WindowManager with seeded random input and
compares every window it runs (its tuples, new and expired, its bounds) with a reference
written from the semantics in the module doc, not from the implementation. It also checks
the ack rule: a tuple is evicted (acked) once, and never before a window that holds it.
"""

from __future__ import annotations

import random

import pytest

from squall.client.windowing import (Count, Duration, TupleWindow, WindowManager, WindowSpec,
                                     WindowedBolt)


class Traced:
    """A manager whose windows and evictions are recorded in the order the worker's host
    sees them: the windows a call returns run first, then the tuples it evicted are acked."""

    def __init__(self, spec: WindowSpec):
        self.evicted: list = []
        self.windows: list[TupleWindow] = []
        self.order: list = []  # ("w", window index) and ("e", item), in host order
        self._now: list = []
        self.manager = WindowManager(spec, on_evict=self._now.append)

    def take(self, windows) -> None:
        for w in windows or []:
            self.windows.append(w)
            self.order.append(("w", len(self.windows) - 1))
        for item in self._now:
            self.order.append(("e", item))
            self.evicted.append(item)
        self._now.clear()
        assert len(self.evicted) == len(set(self.evicted)), "a tuple was acked twice"


def traced(spec: WindowSpec) -> Traced:
    return Traced(spec)


def check_new_expired(windows: list[TupleWindow]) -> None:
    prev: list = []
    for w in windows:
        assert w.new == [t for t in w.tuples if t not in prev]
        assert w.expired == [t for t in prev if t not in w.tuples]
        prev = w.tuples


def check_acks(run: Traced, order: list) -> None:
    """No tuple is acked before the last window holding it has run."""
    last_window_of = {}
    for i, w in enumerate(run.windows):
        for t in w.tuples:
            last_window_of[t] = i
    ran = -1
    for kind, x in order:
        if kind == "w":
            ran = x
        else:
            assert last_window_of.get(x, -1) <= ran, f"{x} acked before window {last_window_of[x]}"


# -- processing time ---------------------------------------------------------------------

@pytest.mark.parametrize("length,slide", [(5, 5), (5, 2), (3, 7), (1, 1), (10, 3)])
def test_count_windows_processing_time(length, slide):
    run = traced(WindowSpec(length_count=length, slide_count=slide))
    n = 60
    for i in range(n):
        run.take(run.manager.add(i, 1000 + i))
    expected = [list(range(max(0, k - length), k)) for k in range(slide, n + 1, slide)]
    assert [w.tuples for w in run.windows] == expected
    assert all(w.start_timestamp is None and w.end_timestamp == 1000 + t[-1]
               for w, t in zip(run.windows, expected))
    check_new_expired(run.windows)
    check_acks(run, run.order)
    # everything older than the last `length` tuples was evicted, once
    assert sorted(run.evicted) == list(range(n - length))


@pytest.mark.parametrize("length,slide", [(1000, 1000), (1000, 250), (300, 700)])
def test_duration_windows_processing_time(length, slide):
    rng = random.Random(length * 7 + slide)
    run = traced(WindowSpec(length_ms=length, slide_ms=slide))
    arrivals = []  # (ts, item)
    now = 10_000
    timers = []
    next_timer = now + slide
    item = 0
    while now < 16_000:
        now += rng.choice([0, 1, 3, 10, 40, 200])
        while next_timer < now:  # the timer at T fires after every tuple of time <= T
            run.take(run.manager.on_time(next_timer))
            timers.append(next_timer)
            next_timer += slide
        run.take(run.manager.add(item, now))
        arrivals.append((now, item))
        item += 1
    expected = []
    for t in timers:
        w = [i for ts, i in arrivals if t - length < ts <= t]
        if w:
            expected.append((t - length, t, w))
    assert [(w.start_timestamp, w.end_timestamp, w.tuples) for w in run.windows] == expected
    check_new_expired(run.windows)
    check_acks(run, run.order)


def test_count_length_with_duration_slide_and_duration_length_with_count_slide():
    run = traced(WindowSpec(length_count=4, slide_ms=100))
    for i in range(10):
        run.take(run.manager.add(i, 1000 + i * 30))  # 1000, 1030, ... 1270
    run.take(run.manager.on_time(1300))
    assert [w.tuples for w in run.windows] == [[6, 7, 8, 9]]
    run2 = traced(WindowSpec(length_ms=100, slide_count=3))
    for i in range(9):
        run2.take(run2.manager.add(i, 1000 + i * 40))  # 1000 .. 1320
    # fires at the 3rd, 6th, 9th tuple: ts 1080, 1200, 1320; window (ts-100, ts]
    assert [w.tuples for w in run2.windows] == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    check_acks(run2, run2.order)


# -- event time --------------------------------------------------------------------------

def _event_stream(rng: random.Random, n: int, disorder: int) -> list[tuple[int, int]]:
    """(ts, item) in arrival order: increasing time with up to ``disorder`` ms of shuffle."""
    base = 50_000
    out = []
    for i in range(n):
        base += rng.choice([1, 5, 20, 60])
        out.append((base + rng.randint(-disorder, 0), i))
    return out


def _drive_event_time(run: Traced, events, lag: int, every: int):
    """Add events, computing the watermark (newest ts - lag) every ``every`` events.
    Returns the late items and the final watermark."""
    late = []
    for k, (ts, item) in enumerate(events):
        if run.manager.add(item, ts, "s") is None:
            late.append(item)
        if k % every == every - 1:
            wm = run.manager.compute_watermark(1)
            run.take(run.manager.on_watermark(wm))
    wm = run.manager.compute_watermark(1)
    run.take(run.manager.on_watermark(wm))
    return late, run.manager.watermark


@pytest.mark.parametrize("length,slide,lag", [(500, 500, 0), (500, 100, 50), (200, 300, 200),
                                              (1000, 250, 400)])
def test_event_time_duration_windows_with_out_of_order_and_late(length, slide, lag):
    rng = random.Random(length + slide + lag)
    events = _event_stream(rng, 800, disorder=300)
    run = traced(WindowSpec(length_ms=length, slide_ms=slide, timestamp_field="ts", lag_ms=lag))
    late, final_wm = _drive_event_time(run, events, lag, every=7)
    # The reference: a tuple is late when its ts is at or before the watermark at its
    # arrival; the watermark after k events is (newest ts so far) - lag at each 7th event.
    ref_late, wm, newest = [], None, None
    for k, (ts, item) in enumerate(events):
        newest = ts if newest is None else max(newest, ts)
        if wm is not None and ts <= wm:
            ref_late.append(item)
        if k % 7 == 6:
            wm = newest - lag if wm is None else max(wm, newest - lag)
    assert late == ref_late
    assert bool(ref_late) == (lag < 300), "tuples later than the lag, and only those, are late"
    on_time = [(ts, i) for ts, i in events if i not in set(late)]
    ends = range(slide, final_wm + 1, slide)
    expected = []
    for e in ends:
        w = sorted((ts, i) for ts, i in on_time if e - length < ts <= e)
        if w:
            expected.append((e - length, e, [i for _, i in w]))
    assert [(w.start_timestamp, w.end_timestamp, w.tuples) for w in run.windows] == expected
    check_new_expired(run.windows)
    check_acks(run, run.order)


@pytest.mark.parametrize("length,slide", [(5, 5), (10, 3), (3, 8)])
def test_event_time_count_windows(length, slide):
    rng = random.Random(length * 100 + slide)
    events = _event_stream(rng, 500, disorder=200)
    run = traced(WindowSpec(length_count=length, slide_count=slide, timestamp_field="ts",
                            lag_ms=100))
    late, final_wm = _drive_event_time(run, events, 100, every=11)
    on_time = sorted((ts, i) for ts, i in events if i not in set(late) and ts <= final_wm)
    order = [i for _, i in on_time]
    expected = [order[max(0, k - length):k] for k in range(slide, len(order) + 1, slide)]
    assert [w.tuples for w in run.windows] == expected
    check_new_expired(run.windows)
    check_acks(run, run.order)


def test_watermark_is_the_oldest_stream_and_waits_for_every_stream():
    m = WindowManager(WindowSpec(length_ms=10, slide_ms=10, timestamp_field="ts", lag_ms=5))
    m.add("a", 100, "s1")
    assert m.compute_watermark(2) is None  # s2 has sent nothing yet
    m.add("b", 40, "s2")
    assert m.compute_watermark(2) == 35
    m.add("c", 90, "s2")
    assert m.compute_watermark(2) == 85
    assert m.on_watermark(85) and m.watermark == 85
    assert m.add("late", 85, "s1") is None  # at the watermark: late (Flink's rule)
    assert m.add("ok", 86, "s1") == []


def test_spec_problems_and_the_bolt_api():
    with pytest.raises(ValueError):
        Count(0)
    with pytest.raises(ValueError):
        Duration(0)
    assert Duration.seconds(1.5).value == 1500 and Duration.minutes(1).value == 60_000
    assert WindowSpec().problem()
    assert WindowSpec(length_count=3, late_stream="late").problem()
    bolt = WindowedBolt().with_tumbling_window(Count(3))
    spec = bolt.window_spec()
    assert (spec.length_count, spec.slide_count, spec.slide_ms) == (3, 3, None)
    bolt.with_window(Duration.seconds(10), Duration.seconds(2)).with_timestamp_field("ts") \
        .with_lag(Duration.seconds(1)).with_late_tuple_stream("late")
    spec = bolt.window_spec()
    assert (spec.length_ms, spec.slide_ms, spec.length_count, spec.lag_ms, spec.late_stream) == \
        (10_000, 2_000, None, 1000, "late")
    with pytest.raises(ValueError, match="timestamp field 'ts'"):
        bolt.check_inputs([("src", "default", ["word"])])


@pytest.mark.parametrize("spec", [
    WindowSpec(length_ms=500, slide_ms=200, timestamp_field="ts", lag_ms=100),
    WindowSpec(length_count=7, slide_count=3, timestamp_field="ts", lag_ms=100),
    WindowSpec(length_count=5, slide_count=2)], ids=["event-duration", "event-count", "count"])
def test_a_snapshot_restored_into_a_new_manager_continues_the_same_windows(spec):
    """What barrier checkpointing relies on: stop anywhere, snapshot, restore elsewhere."""
    rng = random.Random(7)
    events = _event_stream(rng, 400, disorder=80)

    def drive(manager, evs, out, start=0):
        for k, (ts, item) in enumerate(evs, start):
            out += manager.add(item, ts, "s") or []
            if spec.event_time and k % 9 == 8:
                out += manager.on_watermark(manager.compute_watermark(1))

    whole: list = []
    drive(WindowManager(spec), events, whole)
    first, second = WindowManager(spec), None
    halves: list = []
    drive(first, events[:200], halves)
    snap = first.snapshot(lambda item: ["item", item])
    import msgpack
    snap = msgpack.unpackb(msgpack.packb(snap), strict_map_key=False)  # as it is stored
    second = WindowManager(spec)
    second.restore(snap, lambda raw: raw[1])
    drive(second, events[200:], halves, 200)
    assert [(w.tuples, w.new, w.expired) for w in halves] == \
        [(w.tuples, w.new, w.expired) for w in whole]


@pytest.mark.parametrize("length,slide", [(1000, 1000), (1000, 400)])
def test_late_slide_timers_widen_the_window_so_no_tuple_is_skipped(length, slide):
    """A timer that fires late (a busy executor) must not leave a gap between windows."""
    rng = random.Random(length + slide)
    run = traced(WindowSpec(length_ms=length, slide_ms=slide))
    now, due, fires, arrivals, item = 0, slide, [], [], 0
    while now < 20_000:
        now += rng.choice([0, 1, 5, 20])
        if now >= due + rng.choice([0, 0, 15, 40]):  # the timer fires 0-40 ms late
            run.take(run.manager.on_time(now))
            fires.append(now)
            due += slide
        run.take(run.manager.add(item, now))
        arrivals.append((len(fires), now, item))  # (fires before it arrived, time, item)
        item += 1
    # Window k ends at fires[k] and starts after fires[k-1] + slide - length (the first:
    # fires[0] - length); it holds what arrived before fires[k] in that span, where a tuple
    # arriving after a fire counts as just after it.
    got = [(w.start_timestamp, w.end_timestamp, w.tuples) for w in run.windows]
    expected = []
    for k, end in enumerate(fires):
        start = end - length if k == 0 else fires[k - 1] + slide - length
        w = [i for before, ts, i in arrivals if before <= k and
             start < (max(ts, fires[before - 1] + 1) if before else ts) <= end]
        if w:
            expected.append((start, end, w))
    assert got == expected
    if slide == length:  # tumbling: each tuple after the first window's start, exactly once
        seen = [i for _, _, w in got for i in w]
        assert seen == [i for before, ts, i in arrivals
                        if before < len(fires) and (before or ts > fires[0] - length)]


# -- event time in seconds, a watermark standing still (issue 24) ---------------------
NOW_MS = 1_795_000_000_000  # late 2026


@pytest.mark.parametrize("ts, why", [
    (NOW_MS / 1000, "is about now in seconds"),            # time.time()
    (int(NOW_MS / 1000), "is about now in seconds"),       # int(time.time())
    (1.5, None), (NOW_MS + 0.25, None),                    # time.time() * 1000
    (NOW_MS, None), (1000, None), (0, None), (NOW_MS + 0.0, None), ("x", None),
])
def test_seconds_for_milliseconds_are_recognised(ts, why):
    from squall.client.windowing import seconds_problem
    got = seconds_problem(ts, NOW_MS)
    assert (got is None) if why is None else (why in got), got


class _Ctx:
    this_component_id = "avg"

    def __init__(self, sources):
        self.sources = sources

    def this_sources(self):
        return self.sources


class _Out:
    def __init__(self):
        self.errors = []

    def report_error(self, e):
        self.errors.append(e)

    def emit(self, *a, **k):
        return []


class _Exec:
    def add_timer(self, period, fn):
        self.timer = fn


class _Bolt:
    def __init__(self):
        self.windows = []

    def execute(self, window):
        self.windows.append(window)


def _event_time_host(monkeypatch, sources):
    from squall.client import config as cfg
    from squall.worker import windowed
    clock = [100.0]
    monkeypatch.setattr(windowed.time, "monotonic", lambda: clock[0])
    conf = {cfg.TOPOLOGY_BOLTS_WINDOW_LENGTH_DURATION_MS: 30_000,
            cfg.TOPOLOGY_BOLTS_TUPLE_TIMESTAMP_FIELD_NAME: "ts"}
    out = _Out()
    host = windowed.WindowHost(_Bolt(), conf, _Ctx(sources), out, lambda t: None, _Exec())
    return host, out, clock


def _tup(ts, comp="readings", stream="default"):
    from squall.client.tuple import Fields, Tuple
    return Tuple([ts], comp, stream, 1, None, Fields(["ts"]))


def test_timestamps_in_seconds_are_reported_once(monkeypatch):
    import time
    host, out, _ = _event_time_host(monkeypatch, [("readings", "default")])
    for _ in range(3):
        host.execute(_tup(time.time()))
    assert len(out.errors) == 1, out.errors
    assert out.errors[0].startswith("warning: windowed bolt 'avg': its timestamp field 'ts' "
                                    "looks like seconds: "), out.errors
    assert "event time is in milliseconds since the epoch (int(time.time() * 1000))" \
        in out.errors[0]


def test_a_watermark_that_stands_still_names_the_silent_stream_once(monkeypatch):
    """Two input streams, one silent: the watermark never moves and the tuples wait; after
    the window's length (30 s) that is said once, naming the stream, until it moves."""
    host, out, clock = _event_time_host(monkeypatch, [("readings", "default"),
                                                      ("other", "default")])
    for i in range(5):
        host.execute(_tup(NOW_MS + i * 1000))
    for _ in range(29):
        clock[0] += 1.0
        host.on_watermark_timer()
    assert out.errors == []
    for _ in range(5):
        clock[0] += 1.0
        host.on_watermark_timer()
    assert len(out.errors) == 1, out.errors
    assert "its watermark has not moved for 30 s while 5 tuple(s) wait for their window" \
        in out.errors[0] and "input stream(s) other/default sent nothing yet" in out.errors[0]
    # The silent stream speaks: the watermark moves, and a later stand-still is new news.
    host.execute(_tup(NOW_MS + 60_000, comp="other"))
    host.execute(_tup(NOW_MS + 61_000))
    clock[0] += 1.0
    host.on_watermark_timer()
    assert host.manager.watermark is not None and host.bolt.windows and len(out.errors) == 1
