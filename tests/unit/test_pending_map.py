"""PendingMap (the spout's pending trees) behaves like RotatingMap, in flat arrays."""

import random
import tracemalloc

import pytest

from squall.acker.pending_map import PendingBucket, PendingMap
from squall.acker.rotating_map import RotatingMap


def _msg_id(rng: random.Random, step: int):
    r = rng.random()
    if r < 0.6:
        return step  # a sequence number: stored inline
    if r < 0.7:
        return rng.choice([-(1 << 63), (1 << 63) - 1, 1 << 63, -(1 << 63) - 1, 1 << 80])
    if r < 0.8:
        return f"offset-{step}"
    if r < 0.9:
        return ("partition", step)
    return True  # a bool is not stored as an int: it comes back as True, not 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_match_the_reference_rotating_map(seed):
    rng = random.Random(seed)
    expired_ref: list = []
    expired_pm: list = []
    ref = RotatingMap(3, expired=lambda k, v: expired_ref.append((k, v)))
    pm = PendingMap(3, expired=lambda k, v: expired_pm.append((k, v)))
    keys = [rng.getrandbits(64) for _ in range(3000)] + [1, 2, 3]
    for step in range(60_000):
        k = rng.choice(keys)
        op = rng.random()
        if op < 0.35:
            v = (_msg_id(rng, step), step / 7)
            if k in ref:
                ref.put(k, v)
                pm.put(k, v)
            else:
                ref.put_new(k, v)
                pm.add(k, *v)
        elif op < 0.6:
            if k in ref:  # the spout's timeout reset: put(root, get(root))
                ref.put(k, ref.get(k))
                pm.put(k, pm.get(k))
        elif op < 0.8:
            got, want = pm.pop(k), ref.pop(k)
            assert got == want and type(got) is type(want)
            if got is not None:
                assert type(got[0]) is type(want[0])
        elif op < 0.995:
            assert pm.get(k) == ref.get(k)
            assert (k in pm) == (k in ref)
        else:
            assert pm.rotate() == ref.rotate()
            assert sorted(expired_pm, key=repr) == sorted(expired_ref, key=repr)
            expired_pm.clear()
            expired_ref.clear()
        if step % 5000 == 0:
            assert len(pm) == len(ref)
            assert dict(pm.items()) == dict(ref.items())
    assert dict(pm.items()) == dict(ref.items())


def test_entries_expire_after_num_buckets_rotations_and_put_resets_age():
    expired = []
    pm = PendingMap(3, expired=lambda k, v: expired.append((k, v)))
    pm.add(12345, 7, 1.5)
    pm.add(999, "m", 2.5)
    assert pm.rotate() == {} and pm.rotate() == {}
    pm.put(999, pm.get(999))  # reset timeout: moved to the newest bucket
    assert pm.rotate() == {12345: (7, 1.5)}
    assert expired == [(12345, (7, 1.5))]
    assert 12345 not in pm and pm.get(999) == ("m", 2.5)
    assert pm.rotate() == {} and pm.rotate() == {999: ("m", 2.5)} and len(pm) == 0


def test_keys_outside_64_bits_or_not_ints_are_absent():
    pm = PendingMap(2)
    pm.add(5, 1, 0.0)
    assert 5 in pm
    for k in (-5, 1 << 64, "5", 5.0, None):
        assert k not in pm


def test_buckets_grow_and_reuse_deleted_slots():
    b = PendingBucket(16)
    for k in range(100, 1100):
        b.insert(k, k * 2, k / 2)
    assert b.mask + 1 >= 1024 and b.live == 1000
    assert all(b.entry(b.find(k)) == (k * 2, k / 2) for k in range(100, 1100))
    for k in range(100, 1100):
        b.delete(b.find(k))
    cap = b.mask + 1
    for k in range(5000, 6000):  # tombstones are reclaimed: no growth for the same load
        b.insert(k, "x", 0.0)
    assert b.mask + 1 == cap and b.live == 1000
    assert b.entry(b.find(5500)) == ("x", 0.0)


def test_a_deleted_object_id_is_released_at_once():
    class Msg:
        pass

    pm = PendingMap(3)
    m = Msg()
    import weakref
    ref = weakref.ref(m)
    pm.add(777, m, 0.0)
    del m
    assert ref() is not None
    assert pm.pop(777)[0] is ref()
    assert ref() is None


def test_under_100_bytes_a_pending_tree_with_int_message_ids():
    """Issue 13's target at scale (bench.py measures 1M in a fresh interpreter)."""
    rng = random.Random(7)
    n = 100_000
    keys = [rng.getrandbits(64) | 2 for _ in range(n)]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        pm = PendingMap(3)
        for i, k in enumerate(keys):
            pm.add(k, i, 1.0)
        per = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert len(pm) == n
    # Int message ids are stored by value: the map keeps no int objects, only its columns.
    assert per < 100, per


def test_a_root_beyond_64_bits_is_not_pending():
    """An ack's root comes from the wire: one no spout could draw is simply not pending (the
    compiled tables take 64-bit keys; the lookups must not raise on others)."""
    pm = PendingMap(3)
    pm.add(12345, 7, 1.0)
    for key in (1 << 64, (1 << 80) + 12345, -5, "12345", 12345.0, None, (1 << 64) + 1):
        assert key not in pm and pm.get(key) is None and pm.pop(key, "none") == "none"
    assert pm.pop(12345) == (7, 1.0)
    top = (1 << 64) - 1  # the largest table key, and the reserved ones in the side dict
    for key in (top, 0, 1):
        pm.add(key, key, 2.0)
    assert [pm.pop(k) for k in (top, 0, 1)] == [(top, 2.0), (0, 2.0), (1, 2.0)]
    assert len(pm) == 0
