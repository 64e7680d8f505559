"""Trident's transactional state over the in-memory cluster state, and
RotatingTransactionalState's rules (a seen txid keeps its value, a new one is made from the
previous, a skipped one stays empty)."""

import pytest

from squall.client.errors import ConfigError
from squall.client.memory_cluster_state import InMemoryClusterState, MemoryStore
from squall.client.trident.tx_state import (RotatingTransactionalState, TransactionalState,
                                            make_tx_state)


def MemoryTransactionalState(store=None, state_id="spout"):
    """A state id's view over an in-memory cluster state (a shared ``store``: a 'restart')."""
    return TransactionalState(InMemoryClusterState(store=store or MemoryStore()), state_id)


def test_memory_state_paths_children_and_recursive_delete():
    s = MemoryTransactionalState()
    s.set_data("p0/1", {"offset": 0})
    s.set_data("/p0/2/", {"offset": 10})
    s.set_data("p1/1", None)
    assert s.get_data("p0/2") == {"offset": 10} and s.get_data("missing") is None
    assert s.list("p0") == ["1", "2"] and s.list("") == ["p0", "p1"] and s.list("nope") == []
    s.delete("p0")
    assert s.list("p0") == [] and s.list("") == ["p1"]


def test_a_new_txid_is_made_from_the_previous_value_and_a_seen_one_replays():
    calls = []

    def init(txid, last):
        calls.append((txid, last))
        return {"offset": (last or {"next": 0})["next"], "next": (last or {"next": 0})["next"] + 5}

    r = RotatingTransactionalState(MemoryTransactionalState(), "p0")
    assert r.get_state_or_create(1, init) is None          # created: init emitted it
    assert r.get_state_or_create(2, init) is None
    assert calls == [(1, None), (2, {"offset": 0, "next": 5})]
    assert r.get_state_or_create(1, init) == {"offset": 0, "next": 5}  # replay: same batch
    assert len(calls) == 2
    assert r.last_state() == {"offset": 5, "next": 10}


def test_a_txid_older_than_a_stored_one_is_skipped():
    r = RotatingTransactionalState(MemoryTransactionalState(), "p0")
    r.get_state_or_create(5, lambda t, last: "five")
    assert r.get_state_or_init(3, lambda t, last: "three") is None
    assert r.get_state(3) is None and r.previous_state(5) is None


def test_cleanup_before_and_a_restart_reads_what_survived():
    shared = MemoryStore()
    r = RotatingTransactionalState(MemoryTransactionalState(shared), "p0")
    for t in (1, 2, 3):
        r.get_state_or_create(t, lambda txid, last: {"txid": txid})
    r.cleanup_before(3)
    again = RotatingTransactionalState(MemoryTransactionalState(shared), "p0")
    assert again.curr == {3: {"txid": 3}}
    assert again.get_state_or_create(3, lambda t, last: "never") == {"txid": 3}


def test_state_ids_do_not_see_each_other_and_live_under_the_transactional_root():
    store = MemoryStore()
    a = TransactionalState(InMemoryClusterState({"transactional.zookeeper.root": "/tx"},
                                                store=store), "a/b")
    b = MemoryTransactionalState(store, "other")
    a.set_data("currtx", 7)
    assert b.get_data("currtx") is None and a.get_data("currtx") == 7
    # The state id is one path segment, below storm.zookeeper.root and the transactional root.
    assert "/squall/tx/a%2Fb/currtx" in store.nodes


def test_make_tx_state_memory_backend_is_shared_in_the_process_and_a_typo_is_refused():
    conf = {"trident.transactional.state": "memory"}
    make_tx_state("shared-id", conf).set_data("x", 1)
    assert make_tx_state("shared-id", conf).get_data("x") == 1
    with pytest.raises(ConfigError, match="trident.transactional.state.*zookeper"):
        make_tx_state("x", {"trident.transactional.state": "zookeper"})
