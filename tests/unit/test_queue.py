"""Executor receive queue water marks and the worker's backpressure throttle."""

from squall.worker.queue import Backpressure, InQueue, ThreadWaker

# capacity 10, high 0.9, low 0.4: congested above 9 queued, relieved at 4 or fewer.
CAP, HIGH, LOW = 10, 0.9, 0.4


def make(bp=None):
    bp = bp or Backpressure()
    return InQueue(CAP, HIGH, LOW, bp, ThreadWaker()), bp


def drain(q, n):
    for _ in range(n):
        q.dq.popleft()
    q.drain_done()


def test_crossing_high_water_mark_throttles():
    q, bp = make()
    for i in range(9):
        q.put(i)
    assert not q.congested and not bp.throttled
    q.put(9)
    assert q.congested and bp.throttled and bp.local_congested


def test_draining_below_low_water_mark_lifts_throttle():
    q, bp = make()
    [q.put(i) for i in list(range(12))]
    drain(q, 7)  # 5 left: below high, still above low
    assert q.congested and bp.throttled
    drain(q, 1)  # 4 left: at the low water mark
    assert not q.congested and not bp.throttled
    assert len(q) == 4


def test_congestion_counted_once_per_queue():
    q, bp = make()
    for i in range(20):
        q.put(i)
    drain(q, 20)
    assert not bp.throttled and not bp.local_congested


def test_throttled_while_any_queue_congested():
    bp = Backpressure()
    q1, _ = make(bp)
    q2, _ = make(bp)
    for item in list(range(10)):
        q1.put(item)
    for item in list(range(10)):
        q2.put(item)
    drain(q1, 10)
    assert bp.throttled
    drain(q2, 10)
    assert not bp.throttled


def test_remote_congestion_throttles():
    bp = Backpressure()
    bp.remote("worker-2", True)
    bp.remote("worker-3", True)
    assert bp.throttled and not bp.local_congested
    assert bp.remote_congested() == {"worker-2", "worker-3"}
    bp.remote("worker-2", False)
    assert bp.throttled
    bp.remote("worker-3", False)
    assert not bp.throttled and bp.remote_congested() == set()


def test_remote_relief_does_not_lift_local_congestion():
    q, bp = make()
    [q.put(i) for i in list(range(10))]
    bp.remote("worker-2", True)
    bp.remote("worker-2", False)
    assert bp.throttled


def test_disabled_backpressure_never_throttles():
    bp = Backpressure(enabled=False)
    q, _ = make(bp)
    [q.put(i) for i in list(range(100))]
    bp.remote("worker-2", True)
    assert q.congested
    assert not bp.throttled


def test_on_change_reports_local_transitions_only():
    changes = []
    bp = Backpressure(on_change=changes.append)
    q1, _ = make(bp)
    q2, _ = make(bp)
    for item in list(range(10)):
        q1.put(item)
    for item in list(range(10)):
        q2.put(item)
    drain(q1, 10)
    drain(q2, 10)
    assert changes == [True, False]


def test_max_len_tracks_the_peak():
    q, _ = make()
    for i in range(15):
        q.put(i)
    drain(q, 12)
    [q.put(i) for i in list(range(5))]
    drain(q, 8)
    assert len(q) == 0
    assert q.max_len == 15


def test_max_len_seen_at_drain_time():
    q, _ = make()
    for item in [1, 2, 3]:
        q.put(item)
    q.drain_done()
    assert q.max_len == 3


def test_tiny_capacity_still_has_a_high_water_mark():
    bp = Backpressure()
    q = InQueue(1, 0.5, 0.0, bp, ThreadWaker())  # int(0.5) == 0 would congest on an empty queue
    q.put("a")
    assert not bp.throttled
    q.put("b")
    assert bp.throttled
    drain(q, 2)
    assert not bp.throttled


def test_a_put_wakes_a_sleeping_consumer():
    waker = ThreadWaker()
    q = InQueue(CAP, HIGH, LOW, Backpressure(), waker)
    waker.sleeping = True
    q.put(1)
    assert waker.event.is_set()
    waker.wait(5.0, lambda: q.dq)  # returns at once: an item is queued
    assert not waker.sleeping and not waker.event.is_set()
