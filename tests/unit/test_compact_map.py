"""CompactRotatingMap behaves exactly like RotatingMap for int keys, in far fewer bytes."""

import random

import pytest

from squall.acker.compact_map import Bucket, CompactRotatingMap
from squall.acker.rotating_map import RotatingMap

MASK96 = (1 << 96) - 1


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_operations_match_the_reference_rotating_map(seed):
    rng = random.Random(seed)
    ref, cm = RotatingMap(3), CompactRotatingMap(3)
    keys = [rng.getrandbits(64) for _ in range(3000)] + [0, 1, 2]
    for step in range(60_000):
        k = rng.choice(keys)
        op = rng.random()
        if op < 0.35:
            v = rng.getrandbits(96)
            ref.put(k, v)
            cm.put(k, v)
        elif op < 0.6:
            v = rng.getrandbits(96)
            ref.update(k, v)
            cm.update(k, v)
        elif op < 0.8:
            assert cm.pop(k) == ref.pop(k)
        elif op < 0.995:
            assert cm.get(k) == ref.get(k)
            assert (k in cm) == (k in ref)
        else:
            assert cm.rotate() == len(ref.rotate())
        if step % 5000 == 0:
            assert len(cm) == len(ref)
            assert dict(cm.items()) == dict(ref.items())
    assert dict(cm.items()) == dict(ref.items())


def test_entries_expire_after_num_buckets_rotations_and_put_resets_age():
    cm = CompactRotatingMap(3)
    cm.put(12345, 7)
    cm.put(999, 8)
    assert cm.rotate() == 0 and cm.rotate() == 0
    cm.put(999, 9)  # moved to the newest bucket: survives longer
    assert cm.rotate() == 1
    assert 12345 not in cm and cm.get(999) == 9
    cm.update(999, 10)  # update keeps the age
    assert cm.rotate() == 0 and cm.rotate() == 1 and len(cm) == 0


def test_buckets_grow_and_reuse_deleted_slots():
    b = Bucket(16)
    keys = list(range(100, 1100))
    for k in keys:
        b.insert(k, k * 2, k % 7)
    assert b.mask + 1 >= 1024 and b.live == 1000
    assert all(b.vals[b.find(k)] == k * 2 for k in keys)
    for k in keys[:900]:
        b.delete(b.find(k))
    cap = b.mask + 1
    for k in range(5000, 6500):  # churn: tombstones are recycled, the table does not keep growing
        b.insert(k, 1, 1)
        b.delete(b.find(k))
    assert b.mask + 1 <= 2 * cap and b.live == 100
    assert all(b.find(k) >= 0 for k in keys[900:])


def test_a_delete_at_the_end_of_a_chain_leaves_no_tombstones_behind():
    """Trees come and go by the thousand a second: a slot no probe passes (the next one is
    empty) is emptied, with the tombstones just before it, so chains stay short."""
    b = Bucket(16)
    a, m, z = 3, 3 + 16, 3 + 32  # one chain: slots 3, 4, 5
    for k in (a, m, z):
        b.insert(k, k, 0)
    b.delete(b.find(m))  # in the middle: z's probe passes it, a tombstone
    assert b.find(z) >= 0 and b.filled == 3 and b.live == 2
    b.delete(b.find(z))  # the end: it and the tombstone before it empty
    assert b.filled == 1 and b.live == 1 and b.find(a) == 3
    assert b.find(m) == b.find(z) == -1
    b.insert(m, 7, 0)
    assert b.find(m) == 4 and b.vals[4] == 7
    for k in range(100, 110):  # no chains: every delete empties its slot
        b.insert(k, k, 0)
        b.delete(b.find(k))
    assert b.filled == b.live == 2


def test_a_pending_tree_costs_well_under_100_bytes():
    cm = CompactRotatingMap(3)
    rng = random.Random(5)
    n = 200_000
    for _ in range(n):
        cm.put(rng.getrandbits(64) | 2, rng.getrandbits(64) | (3 << 64))
    # Arrays only: 20 bytes a slot at most 70% full (plus growth slack).
    assert cm.nbytes() / n < 64


def test_a_key_beyond_64_bits_is_not_in_the_map():
    """The acker's reset_timeout asks ``root in pending`` for a root from the wire."""
    m = CompactRotatingMap(3)
    m.put(12345, 9)
    for key in (1 << 64, (1 << 80) + 12345):
        assert key not in m and m.get(key) is None and m.pop(key, "none") == "none"
    assert m.get(12345) == 9
