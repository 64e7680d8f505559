"""RotatingMap: dict operations, bucket ageing and expiry on rotate."""

import pytest

from squall.acker.rotating_map import RotatingMap


def test_put_get_contains_len_pop():
    m = RotatingMap(3)
    m.put("a", 1)
    m.put("b", 2)
    assert len(m) == 2
    assert "a" in m and "b" in m and "c" not in m
    assert m.get("a") == 1
    assert m.get("c") is None
    assert m.get("c", "dflt") == "dflt"
    assert m.pop("a") == 1
    assert "a" not in m
    assert len(m) == 1
    assert m.pop("a", "gone") == "gone"


def test_put_overwrites_without_duplicating():
    m = RotatingMap(3)
    m.put("k", 1)
    m.rotate()
    m.put("k", 2)
    assert len(m) == 1
    assert m.get("k") == 2


def test_falsy_values_are_found():
    m = RotatingMap(2)
    m.put("zero", 0)
    assert "zero" in m
    assert m.get("zero", "missing") == 0
    assert m.pop("zero", "missing") == 0


@pytest.mark.parametrize("num_buckets", [2, 3, 5])
def test_entry_survives_num_buckets_minus_one_rotations_then_expires_once(num_buckets):
    calls = []
    m = RotatingMap(num_buckets, expired=lambda k, v: calls.append((k, v)))
    m.rotate()
    m.put("k", "v")
    for _ in range(num_buckets - 1):
        assert m.rotate() == {}
        assert m.get("k") == "v"
    assert calls == []
    assert m.rotate() == {"k": "v"}
    assert calls == [("k", "v")]
    assert "k" not in m
    m.rotate()
    assert calls == [("k", "v")]


def test_put_moves_key_to_newest_bucket_resetting_timeout():
    calls = []
    m = RotatingMap(3, expired=lambda k, v: calls.append(k))
    m.put("refreshed", 1)
    m.put("stale", 1)
    m.rotate()
    m.rotate()
    m.put("refreshed", 2)  # would expire at the next rotation without this put
    m.rotate()
    assert calls == ["stale"]
    assert m.get("refreshed") == 2
    m.rotate()
    m.rotate()
    assert calls == ["stale", "refreshed"]


def test_update_keeps_the_entry_age():
    calls = []
    m = RotatingMap(3, expired=lambda k, v: calls.append((k, v)))
    m.put("k", 1)
    m.rotate()
    m.rotate()
    m.update("k", 2)  # same age: still on death row
    assert m.get("k") == 2
    m.rotate()
    assert calls == [("k", 2)]


def test_update_of_new_key_goes_to_newest_bucket():
    m = RotatingMap(2)
    m.update("new", 1)
    m.rotate()
    assert m.get("new") == 1
    m.rotate()
    assert "new" not in m


def test_rotate_returns_expired_dict_without_callback():
    m = RotatingMap(2)
    m.put("a", 1)
    m.put("b", 2)
    m.rotate()
    m.put("c", 3)
    assert m.rotate() == {"a": 1, "b": 2}
    assert len(m) == 1
    assert m.rotate() == {"c": 3}
    assert len(m) == 0


def test_items_lists_every_entry():
    m = RotatingMap(3)
    m.put("old", 1)
    m.rotate()
    m.put("new", 2)
    assert dict(m.items()) == {"old": 1, "new": 2}


@pytest.mark.parametrize("num_buckets", [1, 0, -1])
def test_fewer_than_two_buckets_rejected(num_buckets):
    with pytest.raises(ValueError, match="num_buckets"):
        RotatingMap(num_buckets)


def test_put_new_goes_to_the_newest_bucket():
    m = RotatingMap(3)
    m.put_new("a", 1)
    assert m.get("a") == 1
    m.rotate()
    m.rotate()
    assert "a" in m
    m.rotate()
    assert "a" not in m
