"""The spout's progressive wait: how long the worker's loop may sleep after next_tuple
calls in a row emitted nothing (executor.spout_wait, an event table)."""

import pytest

from squall.client import config as cfg
from squall.worker.executor import spout_wait

MS = 0.001


@pytest.mark.parametrize("first, most, empty, wait", [
    (1 * MS, 50 * MS, 0, 0.0),       # it just emitted: no sleep
    (1 * MS, 50 * MS, 1, 1 * MS),    # the first empty call: the first sleep
    (1 * MS, 50 * MS, 2, 2 * MS),    # doubling while it goes on emitting nothing
    (1 * MS, 50 * MS, 6, 32 * MS),
    (1 * MS, 50 * MS, 7, 50 * MS),   # capped
    (1 * MS, 50 * MS, 10_000, 50 * MS),  # a long idle spell: no overflow, still capped
    (0.0, 50 * MS, 5, 0.0),          # 0: polled again at once
    (5 * MS, 2 * MS, 1, 2 * MS),     # a first sleep above the cap: the cap
])
def test_the_wait_doubles_from_the_first_sleep_to_the_cap(first, most, empty, wait):
    assert spout_wait(first, most, empty) == pytest.approx(wait)


def test_the_defaults_sleep_one_ms_first_as_storm_does():
    d = cfg.defaults()
    first = d[cfg.TOPOLOGY_SPOUT_WAIT_PROGRESSIVE_LEVEL3_SLEEP_MILLIS] * MS
    most = d[cfg.TOPOLOGY_SPOUT_WAIT_MAX_MILLIS] * MS
    assert spout_wait(first, most, 1) == pytest.approx(1 * MS)
    assert spout_wait(first, most, 100) == pytest.approx(50 * MS)
