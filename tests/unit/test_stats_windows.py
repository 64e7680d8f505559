"""Histograms and windowed stats: what the UI's 10m / 3h / 1d / all-time columns show."""

import math
import random

import pytest

from squall.client import histogram
from squall.client.metrics import MetricRegistry
from squall.nimbus.stats_windows import TIERS, TaskSeries, summarize
from squall.proto import nimbus_pb2 as pb


def test_histogram_quantiles_within_a_bucket_of_the_truth():
    rng = random.Random(7)
    values = [rng.lognormvariate(0, 1.5) for _ in range(20000)]
    h = histogram.Histogram()
    for v in values:
        h.record(v)
    values.sort()
    for q in (0.5, 0.9, 0.99, 0.999):
        true = values[int(q * len(values)) - 1]
        assert histogram.quantile(h.counts, q) == pytest.approx(true, rel=0.10), q
    assert h.n == len(values) and h.total == pytest.approx(sum(values))
    assert histogram.quantile({}, 0.5) == 0.0
    h.record(0.0)  # at or below a microsecond: the lowest bucket, no error
    assert histogram.bucket_of(0.0) == histogram.bucket_of(histogram.MIN_MS)


def test_a_recorded_value_lands_in_its_bucket_whatever_its_size():
    """record and bucket_of (C's log2 in the compiled build) agree with the bucket's
    definition at every scale, at the bucket edges, and for values no latency should be:
    0, negative, infinite, NaN."""
    rng = random.Random(3)
    values = [0.0, -1.0, histogram.MIN_MS, histogram.MIN_MS * 1.0001, float("inf"),
              float("nan"), 2.0 ** 40, 2.0 ** 40 * 0.9999, 2.0 ** 41, 1e300, 7]
    values += [2.0 ** (k / 4) for k in range(-44, 170)]  # every edge
    values += [2.0 ** (k / 4) * (1 - 1e-12) for k in range(-44, 170)]  # just under it
    values += [10 ** rng.uniform(-4, 14) for _ in range(2000)]
    def reference(ms):  # the bucket's definition, in Python's math
        if not ms > histogram.MIN_MS:
            return math.floor(math.log2(histogram.MIN_MS) * histogram.PER_OCTAVE)
        if math.isinf(ms):
            return histogram.MAX_KEY
        return min(histogram.MAX_KEY, math.floor(math.log2(ms) * histogram.PER_OCTAVE))
    for ms in values:
        h = histogram.Histogram()
        h.record(ms)
        assert list(h.counts) == [histogram.bucket_of(ms)] == [reference(ms)], ms
        assert histogram.bucket_of(ms) <= histogram.MAX_KEY
    h = histogram.Histogram()
    for ms in (1.0, 2.5, 2.5):
        h.record(ms)
    assert h.n == 3 and h.total == 6.0 and h.counts == {0: 1, 5: 2}


def test_histograms_merge_and_subtract_exactly():
    a, b = histogram.Histogram(), histogram.Histogram()
    for v in (1, 2, 3):
        a.record(v)
    for v in (3, 40):
        b.record(v)
    merged = histogram.merge([a.counts, b.counts])
    assert sum(merged.values()) == 5
    assert histogram.subtract(merged, a.counts) == b.counts
    counts, total, n = histogram.parse(a.snapshot())
    assert (counts, total, n) == (a.counts, 6.0, 3)
    assert histogram.parse({"b": {"x": 1}}) == ({}, 0.0, 0)  # junk from a peer: empty


def _ts(acked=0, executed=0, busy=0.0, lat=(), emitted=0):
    ts = pb.TaskStats(task=1, component="c", acked=acked, executed=executed, busy_secs=busy,
                      emitted=emitted)
    ts.streams["default"].emitted = emitted
    ts.streams["default"].transferred = emitted * 2
    h = histogram.Histogram()
    for v in lat:
        h.record(v)
    ts.complete_hist.buckets.update(h.counts)
    ts.complete_hist.sum = h.total
    ts.complete_hist.n = h.n
    return ts


@pytest.mark.parametrize("window,acked,span", [
    # (window secs, acked over it, seconds it spans) after heartbeats every 10 s for 30 min
    # with 1 ack per second: a window counts exactly its own acks.
    (600, 600, 600.0),
    (0, 1800, 1790.0),
    (10800, 1800, 1790.0),  # history shorter than the window: everything seen
])
def test_window_counts_what_happened_inside_it(window, acked, span):
    s = TaskSeries()
    for i in range(1, 181):
        s.add(1000.0 + 10 * i, _ts(acked=10 * i))
    snap, covered = s.window(1000.0 + 1800, window)
    assert snap.counters["acked"] == acked
    assert covered == pytest.approx(span)


def test_a_worker_restart_keeps_the_series_monotone():
    s = TaskSeries()
    s.add(10, _ts(acked=100, lat=[1.0] * 100))
    s.add(20, _ts(acked=150, lat=[1.0] * 150))
    s.add(30, _ts(acked=20, lat=[5.0] * 20))  # restarted: counters from zero
    snap, _ = s.window(30, 0)
    assert snap.counters["acked"] == 170
    assert sum(snap.complete.values()) == 170
    assert s.window(30, 10)[0].counters["acked"] == 20  # since t=20: 170 - 150


def test_history_is_thinned_but_reaches_a_day():
    s = TaskSeries()
    for i in range(0, 90000, 5):
        s.add(float(i), _ts(acked=i))
    assert len(s.points) < 300
    snap, covered = s.window(89995.0, 86400)
    # The window's start is the kept point at or before it: within one spacing of the tier.
    spacing = TIERS[-1][1]
    assert 86400 <= snap.counters["acked"] <= 86400 + spacing
    assert 86400 <= covered <= 86400 + spacing
    assert snap.counters["acked"] == pytest.approx(covered, abs=5)


def test_summary_mean_and_percentiles_cover_the_same_window():
    s = TaskSeries()
    s.add(0, _ts(acked=1000, lat=[100.0] * 1000))  # a slow start ...
    s.add(700, _ts(acked=2000, lat=[100.0] * 1000 + [1.0] * 1000))  # ... then fast
    s.add(710, _ts(acked=2000, lat=[100.0] * 1000 + [1.0] * 1000))
    out = summarize([s.window(710, 600)])
    assert out["acked"] == 1000
    assert out["complete_latency_ms"] == pytest.approx(1.0)
    assert out["complete_latency_p99_ms"] == pytest.approx(1.0, rel=0.1)
    everything = summarize([s.window(710, 0)])
    assert everything["complete_latency_ms"] == pytest.approx(50.5)


def test_capacity_is_busy_time_over_the_window():
    s = TaskSeries()
    s.add(0, _ts(executed=0, busy=0.0))
    s.add(100, _ts(executed=1000, busy=25.0))
    assert summarize([s.window(100, 600)])["capacity"] == pytest.approx(0.25)
    assert summarize([s.window(100, 0)], uptime_secs=200)["capacity"] == pytest.approx(0.125)


def test_user_metrics_registry():
    r = MetricRegistry()
    c = r.counter("words")
    c.inc()
    c.inc(4)
    assert r.counter("words") is c  # registering again returns the same one, as Storm
    r.meter("lookups").mark(3)
    r.histogram("size").update(12)
    r.gauge("depth", lambda: 7)
    r.gauge("broken", lambda: 1 / 0)
    snap = r.snapshot()
    assert snap["words"] == {"type": "counter", "value": 5}
    assert snap["lookups"] == {"type": "meter", "value": 3}
    assert snap["depth"] == {"type": "gauge", "value": 7.0}
    assert snap["size"]["hist"]["n"] == 1
    assert "broken" not in snap
    with pytest.raises(ValueError, match="already registered as a counter"):
        r.meter("words")
    # Storm's names are any string; control characters and empty ones are refused.
    assert r.counter("my-custom shell.metric") is r.counter("my-custom shell.metric")
    for bad in ("", "new\nline", "x" * 201):
        with pytest.raises(ValueError, match="1 to 200 characters"):
            r.counter(bad)
    with pytest.raises(ValueError, match="only goes up"):
        c.inc(-1)


def test_a_new_leader_counts_a_window_from_its_first_look_not_the_worker_start():
    """A Nimbus that took over two days into a worker's life: its 10-minute row shows what
    happened since it started watching, not the worker's whole total (nor capacity 1.0)."""
    s = TaskSeries()
    s.add(1000.0, _ts(acked=10_000_000, busy=40_000.0), uptime_secs=2 * 86400)
    s.add(1030.0, _ts(acked=10_000_300, busy=40_003.0), uptime_secs=2 * 86400 + 30)
    snap, covered = s.window(1030.0, 600)
    assert snap.counters["acked"] == 300 and covered == pytest.approx(30.0)
    assert summarize([(snap, covered)])["capacity"] == pytest.approx(0.1)
    assert s.window(1030.0, 0)[0].counters["acked"] == 10_000_300
    # A worker that started inside the window: everything it counted is in the window.
    young = TaskSeries()
    young.add(1000.0, _ts(acked=500), uptime_secs=20)
    assert young.window(1000.0, 600) == (young.current[1], pytest.approx(20.0))


def test_two_workers_reporting_one_task_are_not_counted_twice():
    """A task moved (or a partitioned supervisor's stale worker still reports): each slot
    keeps its own series and a window sums them, however their reports interleave."""
    from squall.nimbus.liveness import Liveness

    live = Liveness({}, now=0.0)

    def report(sup, port, t, acked):
        hb = pb.WorkerHeartbeat(topology_id="t-1", port=port, time_secs=t, uptime_secs=int(t))
        hb.tasks.append(_ts(acked=acked))
        live.record(sup, [hb], now=t)

    for i in range(1, 6):
        report("old", 6700, float(i), 1_000_000)  # stale: stuck at a large total
        report("new", 6701, float(i) + 0.5, 10 * i)  # the task's new home, counting up
    (a, _), (b, _) = live.windowed("t-1", [1], now=6.0, secs=0)
    assert a.counters["acked"] + b.counters["acked"] == 1_000_000 + 50
    live.forget("t-1")
    assert live.windowed("t-1", [1], now=6.0, secs=0) == []


def test_every_task_of_a_multi_task_executor_reports_its_busy_share():
    from squall.worker.stats import TaskStats

    first, second = TaskStats("count"), TaskStats("count")
    first.busy_secs = second.busy_secs = 0.5
    first.execute.record_many(0.01, 100)  # the histogram sits on the first task only
    assert first.snapshot()["busy_secs"] == 0.5 and second.snapshot()["busy_secs"] == 0.5
