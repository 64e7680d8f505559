"""Trident map states over the in-memory backing map: replays, codecs, caches, factories."""

from __future__ import annotations

import pickle

import pytest

from squall.client.errors import ConfigError
from squall.client.trident.state import (CODECS, BatchBehindState, CachedMap, MemoryBackingMap,
                                         MemoryMapState, NonTransactionalMap, OpaqueMap, OpaqueValue,
                                         RedisMapState, SnapshottableMap, StateError, StateType,
                                         TransactionalMap, TransactionalValue, encode_key)
from trident_ops import add, batch

TX, OPAQUE, NONTX = StateType.TRANSACTIONAL, StateType.OPAQUE, StateType.NON_TRANSACTIONAL



@pytest.fixture
def tx_backing():
    return MemoryBackingMap(CODECS[TX])


@pytest.fixture
def opaque_backing():
    return MemoryBackingMap(CODECS[OPAQUE])


# --- transactional ------------------------------------------------------------------

def test_transactional_new_txid_applies_and_stores_it(tx_backing):
    state = TransactionalMap(tx_backing)
    assert batch(state, 1, [("a",), ("b",)], [1, 10]) == [1, 10]
    assert batch(state, 2, [("a",)], [5]) == [6]
    assert tx_backing.multi_get([("a",), ("b",)]) == [TransactionalValue(2, 6), TransactionalValue(1, 10)]


def test_transactional_replay_of_the_same_txid_is_a_no_op(tx_backing):
    state = TransactionalMap(tx_backing)
    batch(state, 1, [("a",)], [3])
    batch(state, 2, [("a",), ("b",)], [4, 1])
    puts = tx_backing.put_calls
    # Batch 2 fails after its state update and is replayed with the same tuples.
    assert batch(state, 2, [("a",), ("b",)], [4, 1]) == [7, 1]
    assert tx_backing.put_calls == puts  # nothing to write
    assert state.multi_get([("a",), ("b",)]) == [7, 1]


def test_transactional_replay_applies_only_to_keys_the_txid_did_not_write(tx_backing):
    state = TransactionalMap(tx_backing)
    batch(state, 1, [("a",), ("b",)], [1, 1])
    batch(state, 2, [("a",)], [1])
    assert batch(state, 2, [("a",), ("b",)], [1, 1]) == [2, 2]
    assert tx_backing.multi_get([("a",), ("b",)]) == [TransactionalValue(2, 2), TransactionalValue(2, 2)]


def test_transactional_second_update_of_a_key_in_one_batch_applies(tx_backing):
    state = TransactionalMap(tx_backing)
    state.begin_commit(1)
    assert state.multi_update([("a",)], [add(1)]) == [1]
    # Read back from the batch cache (txid 1 == current) and still applied.
    assert state.multi_update([("a",)], [add(2)]) == [3]
    assert state.multi_get([("a",)]) == [3]
    state.commit(1)
    assert tx_backing.get_calls == 1  # the key written in the batch is not fetched again


def test_transactional_outside_a_batch_always_applies_and_multi_put_sets(tx_backing):
    state = TransactionalMap(tx_backing)
    assert state.multi_update([("a",)], [add(1)]) == [1]
    assert state.multi_update([("a",)], [add(1)]) == [2]
    state.begin_commit(7)
    state.multi_put([("a",), ("z",)], [100, {"x": [1]}])
    state.commit(7)
    assert tx_backing.multi_get([("a",), ("z",)]) == [TransactionalValue(7, 100),
                                                      TransactionalValue(7, {"x": [1]})]


def test_missing_keys_read_as_none_and_updaters_see_none(tx_backing):
    state = TransactionalMap(tx_backing)
    assert state.multi_get([("nope",), ("a", 1)]) == [None, None]
    seen = []
    state.begin_commit(1)
    state.multi_update([("a", 1)], [lambda old: seen.append(old) or "set"])
    state.commit(1)
    assert seen == [None] and state.multi_get([("a", 1)]) == ["set"]
    assert state.multi_get([]) == [] and state.multi_update([], []) == []


# --- opaque ---------------------------------------------------------------------------

def test_opaque_new_txid_shifts_curr_to_prev(opaque_backing):
    state = OpaqueMap(opaque_backing)
    assert batch(state, 1, [("a",)], [2]) == [2]
    assert opaque_backing.multi_get([("a",)]) == [OpaqueValue(1, 2, None)]
    assert batch(state, 2, [("a",)], [3]) == [5]
    assert opaque_backing.multi_get([("a",)]) == [OpaqueValue(2, 5, 2)]
    assert batch(state, 5, [("a",)], [1]) == [6]  # txids may skip
    assert opaque_backing.multi_get([("a",)]) == [OpaqueValue(5, 6, 5)]


def test_opaque_replay_with_different_tuples_recomputes_from_prev(opaque_backing):
    state = OpaqueMap(opaque_backing)
    batch(state, 1, [("a",), ("b",)], [10, 20])
    batch(state, 2, [("a",), ("b",)], [1, 2])
    # An opaque spout replays txid 2 with other tuples: only those count.
    assert batch(state, 2, [("a",), ("b",)], [5, 0]) == [15, 20]
    assert opaque_backing.multi_get([("a",), ("b",)]) == [OpaqueValue(2, 15, 10), OpaqueValue(2, 20, 20)]
    state.begin_commit(2)
    assert state.multi_get([("a",)]) == [10]  # a replay of 2 starts from prev
    state.commit(2)
    assert state.multi_get([("a",)]) == [15]  # outside a batch: the current value


def test_opaque_two_updates_in_one_batch_keep_the_pre_batch_prev(opaque_backing):
    state = OpaqueMap(opaque_backing)
    batch(state, 1, [("a",)], [1])
    state.begin_commit(2)
    state.multi_update([("a",)], [add(1)])
    assert state.multi_update([("a",)], [add(1)]) == [3]
    assert state.multi_get([("a",)]) == [3]
    state.commit(2)
    assert opaque_backing.multi_get([("a",)]) == [OpaqueValue(2, 3, 1)]


def test_opaque_multi_put_replaces_and_keeps_prev(opaque_backing):
    state = OpaqueMap(opaque_backing)
    batch(state, 1, [("a",)], [4])
    state.begin_commit(2)
    state.multi_put([("a",), ("b",)], ["x", [1, 2]])
    state.commit(2)
    assert opaque_backing.multi_get([("a",), ("b",)]) == [OpaqueValue(2, "x", 4), OpaqueValue(2, [1, 2], None)]


def test_opaque_batch_behind_the_state_is_an_error(opaque_backing):
    state = OpaqueMap(opaque_backing, name="counts")
    batch(state, 5, [("a",)], [1])
    state.begin_commit(4)
    with pytest.raises(BatchBehindState, match=r"batch txid 4 is behind the state's txid 5 for key \('a',\)"
                       ) as info:
        state.multi_update([("a",)], [add(1)])
    assert (info.value.txid, info.value.stored_txid, info.value.state) == (4, 5, "counts")
    with pytest.raises(BatchBehindState):
        state.multi_get([("a",)])


def test_opaque_value_get_and_update_rules():
    v = OpaqueValue(3, "curr", "prev")
    assert (v.get(4), v.get(3), v.get(None)) == ("curr", "prev", "curr")
    assert v.update(4, "n") == OpaqueValue(4, "n", "curr")
    assert v.update(3, "n") == OpaqueValue(3, "n", "prev")
    assert OpaqueValue(None, "c").update(1, "n") == OpaqueValue(1, "n", "c")


# --- non-transactional and snapshottable ----------------------------------------------

def test_non_transactional_counts_a_replay_twice():
    backing = MemoryBackingMap(CODECS[NONTX])
    state = NonTransactionalMap(backing)
    batch(state, 1, [("a",)], [1])
    assert batch(state, 1, [("a",)], [1]) == [2]
    assert backing.store == {'["a"]': "2"}


def test_snapshottable_map_holds_one_global_value(tx_backing):
    state = SnapshottableMap(TransactionalMap(tx_backing))
    assert state.get() is None
    state.begin_commit(1)
    assert state.update(add(3)) == 3
    state.commit(1)
    state.begin_commit(1)
    assert state.update(add(3)) == 3  # replayed txid: skipped
    state.commit(1)
    state.set(9)
    assert state.get() == 9 and state.multi_get([("$SQUALL-MAP-STATE-GLOBAL$",)]) == [9]


# --- backing maps and codecs ------------------------------------------------------------

def test_memory_backing_map_makes_one_call_per_batch_operation(tx_backing):
    state = TransactionalMap(tx_backing)
    keys = [(f"k{i}",) for i in range(50)]
    batch(state, 1, keys, [1] * 50)
    assert (tx_backing.get_calls, tx_backing.put_calls) == (1, 1)
    state.multi_get(keys)
    assert tx_backing.get_calls == 2


def test_memory_backing_map_without_codec_keeps_objects_and_checks_lengths():
    backing = MemoryBackingMap()
    obj = object()
    backing.multi_put([("a",)], [obj])
    assert backing.multi_get([("a",), ("b",)]) == [obj, None]
    with pytest.raises(ValueError, match="2 keys but 1 values"):
        backing.multi_put([("a",), ("b",)], [1])


def test_a_value_that_is_not_json_able_is_refused_and_nothing_is_written(tx_backing):
    state = TransactionalMap(tx_backing)
    state.begin_commit(1)
    with pytest.raises(StateError, match="JSON-able"):
        state.multi_put([("a",), ("b",)], [1, {1, 2}])
    with pytest.raises(StateError, match="JSON-able"):
        state.multi_put([("a",)], [float("nan")])
    assert tx_backing.store == {}


@pytest.mark.parametrize("state_type, value, text", [
    (TX, TransactionalValue(3, {"n": 1, "l": [1, "x"]}), '[3,{"l":[1,"x"],"n":1}]'),
    (TX, TransactionalValue(None, None), "[null,null]"),
    (OPAQUE, OpaqueValue(4, 2.5, 1), "[4,2.5,1]"),
    (OPAQUE, OpaqueValue(1, "é", None), '[1,"é",null]'),
    (NONTX, {"a": [True, None]}, '{"a":[true,null]}'),
])
def test_codecs_round_trip_in_storms_json_layout(state_type, value, text):
    codec = CODECS[state_type]
    assert codec.encode(value) == text
    assert codec.decode(text) == value
    assert codec.decode(text.encode()) == value


def test_tuples_come_back_as_lists():
    codec = CODECS[TX]
    assert codec.decode(codec.encode(TransactionalValue(1, (1, 2)))) == TransactionalValue(1, [1, 2])


def test_keys_are_json_so_they_stay_apart():
    assert encode_key(("a,b",)) != encode_key(("a", "b"))
    assert encode_key(("a", 1)) == encode_key(["a", 1]) == '["a",1]'
    with pytest.raises(TypeError, match="tuple of group-by values"):
        encode_key("ab")


def test_cached_map_serves_repeat_reads_and_evicts_lru():
    backing = MemoryBackingMap()
    cached = CachedMap(backing, size=2)
    cached.multi_put([("a",), ("b",)], [1, 2])
    assert cached.multi_get([("a",), ("b",)]) == [1, 2] and backing.get_calls == 0
    assert cached.multi_get([("c",), ("a",)]) == [None, 1]  # fetches only c; evicts b
    assert backing.get_calls == 1
    assert cached.multi_get([("b",)]) == [2] and backing.get_calls == 2
    assert backing.put_calls == 1  # puts write through


# --- factories --------------------------------------------------------------------------

@pytest.mark.parametrize("make, map_type", [
    (MemoryMapState.transactional, TransactionalMap),
    (MemoryMapState.opaque, OpaqueMap),
    (MemoryMapState.non_transactional, NonTransactionalMap),
])
def test_memory_factory_pickles_and_builds_the_right_map(make, map_type):
    factory = make("unit-factory")
    clone = pickle.loads(pickle.dumps(factory))
    assert clone == factory and clone is not factory
    state = clone.make_state({}, 0, 1)
    assert isinstance(state, SnapshottableMap) and type(state.delegate) is map_type
    MemoryMapState.drop("unit-factory")


def test_memory_states_of_one_name_share_a_store_until_dropped():
    factory = MemoryMapState.opaque("unit-shared")
    try:
        batch(factory.make_state({}, 0, 1), 1, [("a",)], [2])
        restarted = factory.make_state({}, 0, 1)
        assert batch(restarted, 1, [("a",)], [7]) == [7]  # a replay after a restart: from prev
        assert MemoryMapState.opaque("other").make_state({}, 0, 1).multi_get([("a",)]) == [None]
    finally:
        MemoryMapState.drop("unit-shared")
        MemoryMapState.drop("other")
    assert factory.make_state({}, 0, 1).multi_get([("a",)]) == [None]
    MemoryMapState.drop("unit-shared")


def test_factory_cache_size_puts_a_cached_map_under_the_state():
    state = MemoryMapState(TX, "unit-cache", cache_size=10).make_state({}, 0, 1)
    assert isinstance(state.delegate._reads.backing, CachedMap)
    MemoryMapState.drop("unit-cache")


def test_redis_factory_pickles_without_connecting():
    # Nothing listens on port 1: construction and pickling must not try.
    factory = RedisMapState.opaque({"trident.redis.port": 1, "storm.zookeeper.port": 2181}, "counts",
                                   cache_size=0)
    clone = pickle.loads(pickle.dumps(factory))
    assert clone == factory and clone.conf == {"trident.redis.port": 1}
    assert clone.hash_key() == "squall:trident:counts"
    assert clone.hash_key({"trident.redis.key.prefix": "t:"}) == "t:counts"
    assert repr(clone) == "<RedisMapState opaque 'counts'>"


def test_redis_factory_checks_its_conf_when_built():
    with pytest.raises(ConfigError, match="trident.redis.port"):
        RedisMapState.transactional({"trident.redis.port": "6379"}, "counts")
    with pytest.raises(ValueError, match="needs a name"):
        RedisMapState.transactional(None, "")


@pytest.mark.parametrize("kind", ["transactional", "opaque"])
def test_multi_remove_reads_unset_at_once_and_leaves_the_store_at_the_next_txid(kind):
    """Storm's RemovableMapState.multiRemove (its MemoryMapState's way): the keys are set to
    null in the batch, so a replay of it sees the same, and deleted from the store when the
    next txid begins."""
    from squall.client.trident.state.backing import CODECS, MemoryBackingMap
    from squall.client.trident.state.base import StateType
    from squall.client.trident.state.map_state import OpaqueMap, TransactionalMap
    st_type = StateType.TRANSACTIONAL if kind == "transactional" else StateType.OPAQUE
    backing = MemoryBackingMap(CODECS[st_type])
    state = (TransactionalMap if kind == "transactional" else OpaqueMap)(backing)
    state.begin_commit(1)
    state.multi_put([("a",), ("b",)], [1, 2])
    state.commit(1)
    state.begin_commit(2)
    state.multi_remove([("a",)])
    assert state.multi_get([("a",), ("b",)]) == [None, 2]
    state.commit(2)
    assert len(backing.store) == 2  # still there: a replay of txid 2 must read it unset
    state.begin_commit(2)  # a replay: the transactional value is txid 2's, the opaque one
    assert state.multi_get([("a",)]) == [None if kind == "transactional" else 1]  # prev's
    state.multi_remove([("a",)])  # and the replay removes it again
    state.commit(2)
    state.begin_commit(3)
    assert sorted(backing.store) == ['["b"]']
    assert state.multi_get([("a",), ("b",)]) == [None, 2]
    state.commit(3)


def test_a_non_transactional_map_removes_at_once_and_a_cache_forgets():
    from squall.client.trident.state.backing import CachedMap, MemoryBackingMap
    from squall.client.trident.state.map_state import NonTransactionalMap, SnapshottableMap
    backing = MemoryBackingMap()
    state = SnapshottableMap(NonTransactionalMap(CachedMap(backing, 10)))
    state.multi_put([("a",), ("b",)], [1, 2])
    assert state.multi_get([("a",)]) == [1]  # cached
    state.multi_remove([("a",)])
    assert state.multi_get([("a",), ("b",)]) == [None, 2] and list(backing.store) == ['["b"]']
