"""Exactly-once acker checkpointing: derived edge ids (worker/lineage.py) and the keys a
stateful task keeps to recognise a replay (worker/dedupe.py); the task's use of them is
in test_stateful.py."""

from __future__ import annotations

import copy
from types import SimpleNamespace

from squall.client.values import PLAIN

import pytest

from squall.acker.pending_map import PendingMap
from squall.client.grouping import ShuffleRouter
from squall.client.state import InMemoryKeyValueState
from squall.client.tuple import Fields
from squall.worker.collector import OutputCollector, Route, SpoutOutputCollector, StepAcks
from squall.worker.stats import TaskStats
from squall.worker.dedupe import MutableState, SeenTuples, retention_secs
from squall.worker.lineage import child_edge, message_base, spout_edge, tuple_key


# -- derived edges ----------------------------------------------------------------------

def test_spout_edges_name_the_message_not_the_attempt():
    base = message_base("sentences", 3, "default", 42)
    assert base == message_base("sentences", 3, "default", 42)  # every process, every run
    assert 0 <= base < 1 << 64
    edges = [spout_edge(base, i) for i in range(3)]
    assert len(set(edges)) == 3 and edges == [spout_edge(base, i) for i in range(3)]
    # Storm's message ids are one spout task's: task 4's id 42 is another message; so is
    # id 42 of another run of a spout whose ids start over (run != 0).
    others = {message_base(*k) for k in [
        ("sentences", 3, "default", 43), ("sentences", 3, "s2", 42),
        ("other", 3, "default", 42), ("sentences", 3, "default", "42"),
        ("sentences", 3, "default", [4, 2]), ("sentences", 4, "default", 42),
        ("sentences", 3, "default", 42, 12345)]}
    assert base not in others and len(others) == 7
    with pytest.raises(TypeError, match=r"spout 'sentences' emitted msg_id .*object.*cannot "
                       r"name: use a str, int, bytes or a list of them, or choose "
                       r"acker-at-least-once"):
        message_base("sentences", 3, "default", object())


def test_child_edges_follow_the_anchor_and_the_copies_it_handed_out():
    a = tuple_key({111: 5, 222: 5})  # one tuple in two trees (anchored to one input)
    assert a == tuple_key({222: 5, 111: 5})
    first = child_edge(a, 0)
    second = child_edge(a, first)
    assert first != second and first == child_edge(a, 0) and 0 <= second < 1 << 64
    assert child_edge(5, 0) != child_edge(6, 0)
    assert tuple_key({7: 99}) == 99
    two = tuple_key({1: 3, 2: 4})
    assert two == tuple_key({2: 4, 1: 3}) and two not in (3, 4, 3 ^ 4)
    assert two == tuple_key({9: 4, 8: 3})  # the edges name it: roots differ per attempt


class _Sink(dict):
    def __init__(self, targets):
        super().__init__({t: (lambda tup, t=t: self.got.append((t, tup))) for t in targets})
        self.got = []


def _collector(cls, lineage, targets, *extra):
    sink = _Sink(targets)
    ex = SimpleNamespace(component_id="c", ws=SimpleNamespace(
        stats={1: TaskStats("c")}, deliver=dict(sink), queues={}, lineage=lineage, values=PLAIN),
        transfer=None, debug=False, acking=True, pending_inits=[], pending_acks=StepAcks())
    route = Route("default", Fields(["w"]), [ShuffleRouter(targets)], False, frozenset())
    return cls(ex, 1, {"default": route}, *extra), sink, ex


def _split(lineage, sent):
    """A Split bolt's emits for one spout tuple: the keys of what it sent."""
    bolt, bsink, _ = _collector(OutputCollector, lineage, [6])
    for w in sent[0].split():
        bolt.emit_anchored([w], "default", sent)
    bolt.emit([sent[0]], anchors=[sent])
    return [tuple_key(t.ids) for _, t in bsink.got]


@pytest.mark.parametrize("lineage", [True, False])
def test_a_replayed_message_gets_the_same_edges_only_with_lineage(lineage):
    spout, sink, ex = _collector(SpoutOutputCollector, lineage, [5], PendingMap(2))
    spout.emit(["a b"], msg_id=7)
    spout.emit(["a b"], msg_id=7)  # its replay, after a fail
    (_, first), (_, replay) = sink.got
    r1, init1, _, r2, _, _ = ex.pending_inits  # flat: root, xor, spout task per emit
    assert r1 != r2  # a replay is a new tree: a late ack of the old one cannot touch it
    k1, k2 = _split(lineage, first), _split(lineage, replay)
    assert len(set(k1)) == 3
    assert init1 == tuple_key(first.ids)  # the acker's start value is the spout copy's edge
    assert first.ack_val == k1[0] ^ k1[1] ^ k1[2]  # what the bolt's ack XORs out
    assert (k1 == k2 and first.ids[r1] == replay.ids[r2]) is lineage


@pytest.mark.parametrize("stable", [True, False])
def test_a_restarted_spout_repeats_its_edges_only_when_its_ids_name_messages(stable):
    def run():
        spout, sink, _ = _collector(SpoutOutputCollector, True, [5], PendingMap(2), stable)
        spout.emit(["a b"], msg_id=7)
        (_, sent), = sink.got
        return _split(True, sent)
    assert (run() == run()) is stable


def test_anchors_given_as_a_generator_anchor_every_copy_and_anything_else_is_refused():
    """emit walks the anchors once per target task: a generator is read once, not run dry
    after the first copy; an anchor that is not a received Tuple is a TypeError."""
    spout, sink, _ = _collector(SpoutOutputCollector, False, [5], PendingMap(2))
    spout.emit(["a"], msg_id=1)
    spout.emit(["b"], msg_id=2)
    anchors = [t for _, t in sink.got]
    bolt, bsink, _ = _collector(OutputCollector, False, [6, 7])
    bolt.routes["default"] = Route("default", Fields(["w"]), [ShuffleRouter([6]),
                                                              ShuffleRouter([7])], False,
                                   frozenset())
    bolt.emit(["x"], anchors=(a for a in anchors))
    copies = [t for _, t in bsink.got]
    assert [t for t, _ in bsink.got] == [6, 7]
    roots = {r for a in anchors for r in a.ids}
    assert all(set(c.ids) == roots for c in copies)
    with pytest.raises(TypeError):
        bolt.emit(["y"], anchors=[anchors[0], SimpleNamespace(ids={3: 4}, ack_val=0)])
    with pytest.raises(TypeError):
        bolt.ack(SimpleNamespace(ids={3: 4}, ack_val=0))


# -- the keys a stateful task keeps -----------------------------------------------------

class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


#: (event, argument, expected). ``ack``: a tuple ran and was acked, answering whether it
#: was known (a replay); ``fail``: it ran and failed (answering the same), so it is not
#: saved; ``restart`` makes a new SeenTuples on the same store and restores it.
#: Retention 20 s.
TABLE = [
    ("ack", 11, False), ("ack", 12, False), ("ack", 11, True),  # a replay before the commit
    ("fail", 16, False), ("fail", 16, False),  # a failed tuple's replay runs
    ("prepare", 1, None), ("commit", 1, None),
    ("ack", 12, True),  # a replay of a committed tuple
    ("ack", 13, False), ("prepare", 2, None),
    ("rollback", None, None),  # 13 was never saved: its replay runs again
    ("ack", 13, False), ("ack", 12, True),
    ("prepare", 3, None), ("commit", 3, None),
    ("restart", None, None),
    ("ack", 11, True), ("ack", 13, True), ("ack", 14, False), ("ack", 16, False),
    ("prepare", 4, None), ("commit", 4, None),
    ("advance", 25, None),
    ("prepare", 5, None), ("commit", 5, None),  # a retention on: a new generation begins
    ("ack", 14, True),  # still known, and kept on in the new generation
    ("ack", 15, False), ("prepare", 6, None), ("commit", 6, None),
    ("advance", 25, None),
    # The first generation's last checkpoint is a retention old: forgotten at this commit,
    # deleted from the store by the next transaction.
    ("prepare", 7, None), ("commit", 7, None),
    ("ack", 11, False), ("ack", 14, True), ("ack", 15, True),
    ("prepare", 8, None), ("rollback", None, None),  # the deletes are made again ...
    ("prepare", 9, None), ("commit", 9, None),  # ... and saved here
    ("restart", None, None),  # 11 and 14 above were rolled back: not saved
    ("ack", 14, True), ("ack", 11, False), ("ack", 15, True),
    # A worker down for longer than the retention keeps what it restored a retention on.
    ("prepare", 10, None), ("commit", 10, None),
    ("advance", 100, None), ("restart", None, None),
    ("prepare", 11, None), ("commit", 11, None),
    ("ack", 14, True), ("ack", 11, True),
]


def test_seen_tuples_event_table():
    store, clock = InMemoryKeyValueState(), Clock()
    seen = SeenTuples(store, 20, clock)
    for i, (event, arg, want) in enumerate(TABLE):
        if event in ("ack", "fail"):
            assert seen.known(arg) is want, (i, event, arg)
            if event == "ack":
                seen.add(arg)
        elif event == "prepare":
            seen.prepare(arg)
        elif event == "commit":
            seen.commit(arg)
        elif event == "rollback":
            seen.rollback()
        elif event == "restart":
            store.rollback()  # a new worker sees only what was committed
            seen = SeenTuples(store, 20, clock)
            seen.restore()
        elif event == "advance":
            clock.now += arg
    assert [k for k, _ in store.items()] == [6, 10]  # expired checkpoints left the store
    assert len(seen) == 5  # 11 and 14 kept on in the newest generation too


def test_retention_defaults_to_three_times_the_message_timeout():
    # A spout fails a tree up to 2T after its emit (Storm's buckets); the replay follows.
    assert retention_secs({}) == 90
    assert retention_secs({"topology.message.timeout.secs": 6}) == 18
    assert retention_secs({"topology.state.dedupe.retention.secs": 300,
                           "topology.message.timeout.secs": 6}) == 300


def test_a_muted_state_reads_but_does_not_write():
    m = MutableState(InMemoryKeyValueState())
    m.put("a", 1)
    m.muted = True
    m.put("a", 2)
    assert m.delete("a") == 1 and m.get("a") == 1 and len(m) == 1
    m.muted = False
    m.put("b", 3)
    assert dict(m.items()) == {"a": 1, "b": 3}
    assert copy.copy(m).get("b") == 3  # a copy does not recurse through __getattr__


def test_a_tracked_emit_is_pending_under_its_root_stamped_on_time_monotonic_s_clock():
    """The complete latency is an ack's time.monotonic() minus the emit's stamp: the compiled
    collector reads that clock in C, and must read the same one."""
    import time
    pending = PendingMap(2)
    spout, sink, ex = _collector(SpoutOutputCollector, False, [5], pending)
    before = time.monotonic()
    spout.emit(["a"], msg_id="m1")
    after = time.monotonic()
    root = ex.pending_inits[0]
    msg_id, t0 = pending.pop(root)
    assert msg_id == "m1" and before <= t0 <= after
