"""Stateful bolts: the checkpoint spout's transactions, a stateful task's held acks, the
states in memory and in Redis, and the builder's $checkpoint wiring."""

from __future__ import annotations

import pytest

from squall.client import BasicBolt
from squall.client.state import (InMemoryKeyValueState, RedisKeyValueState, StateError,
                                 get_state, provider_name, provider_problem, redis_settings)
from squall.client.stateful import (CHECKPOINT_COMPONENT_ID, CHECKPOINT_STREAM_ID, COMMIT,
                                    COMMITTED, COMMITTING, INITSTATE, PREPARE, PREPARING,
                                    ROLLBACK, CheckpointCoordinator, CheckPointState,
                                    StatefulBolt)
from squall.client.testing import TestWordSpout
from squall.client.topology import TopologyBuilder
from squall.client.topology_proto import from_bytes, to_bytes
from squall.client.tuple import Fields, Tuple
from squall.worker.checkpoint import CheckpointGate, HoldingCollector, StatefulTask


S = CheckPointState


# -- the checkpoint spout's transactions (Storm's CheckpointSpout), as an event table -----
# Each row: (stimulus, argument, what poll returns or None, the persisted state after)
FRESH_START = [
    ("poll", 0, (-1, INITSTATE), None),        # recovery first: nothing to roll back
    ("ack", -1, None, None),                   # recovered
    ("poll", 0, (0, PREPARE), S(0, PREPARING)),
    ("poll", 0, None, None),                   # one step at a time
    ("ack", 0, None, S(0, COMMITTING)),
    ("poll", 10, (0, COMMIT), None),           # commit follows prepare at once
    ("ack", 0, None, S(0, COMMITTED)),
    ("poll", 50, None, None),                  # the interval (100 ms) has not passed
    ("poll", 101, (1, PREPARE), S(1, PREPARING)),
    ("fail", 1, None, None),                   # a bolt failed it, or it timed out
    ("poll", 102, (1, ROLLBACK), None),
    ("ack", 1, None, S(0, COMMITTED)),
    ("poll", 103, (0, INITSTATE), None),
    ("ack", 0, None, None),
    ("poll", 150, None, None),                 # the interval counts from the last prepare
    ("poll", 202, (1, PREPARE), S(1, PREPARING)),
    ("ack", 7, None, None),                    # a stale ack changes nothing
]

RESTART_MID_COMMIT = [
    ("poll", 0, (4, COMMIT), None),            # prepared everywhere: finish the commit
    ("ack", 4, None, S(4, COMMITTED)),
    ("poll", 0, (4, INITSTATE), None),
    ("ack", 4, None, None),
    ("poll", 0, (5, PREPARE), S(5, PREPARING)),
]


@pytest.mark.parametrize("start,table", [(S(-1, COMMITTED), FRESH_START),
                                         (S(4, COMMITTING), RESTART_MID_COMMIT)],
                         ids=["fresh", "restart-mid-commit"])
def test_checkpoint_coordinator_event_table(start, table):
    c = CheckpointCoordinator(start, 100)
    for i, (stimulus, arg, emitted, saved) in enumerate(table):
        got = None
        if stimulus == "poll":
            got = c.poll(arg)
        elif stimulus == "ack":
            c.ack(arg)
        else:
            c.fail(arg)
        assert got == emitted, f"row {i}: {stimulus}({arg}) emitted {got}, want {emitted}"
        assert (c.saved[-1] if c.saved else None) == saved, f"row {i}: saved {c.saved}"
        c.saved.clear()


def test_checkpoint_state_transitions_are_storms():
    assert S(3, PREPARING).next_state(True) == S(2, COMMITTED)
    assert S(3, PREPARING).next_state(False) == S(3, COMMITTING)
    assert S(3, COMMITTING).next_state(True) == S(3, COMMITTED)
    assert S(3, COMMITTED).next_state(False) == S(4, PREPARING)
    assert [S(3, st).next_action(r) for st in (PREPARING, COMMITTING, COMMITTED)
            for r in (True, False)] == [ROLLBACK, PREPARE, COMMIT, COMMIT, INITSTATE, PREPARE]


# -- a stateful task --------------------------------------------------------------------

class Out:
    """Records what a task sends through its executor's collector."""

    def __init__(self):
        self.acked, self.failed, self.emitted, self.errors = [], [], [], []

    def ack(self, t):
        self.acked.append(t)

    def fail(self, t):
        self.failed.append(t)

    ack_system, fail_system = ack, fail  # the runtime's own tuples: the same, uncounted

    def emit(self, values, stream="default", anchors=None, direct_task=None):
        self.emitted.append((stream, values, anchors))
        return []

    def report_error(self, e):
        self.errors.append(e)


class Context:
    def __init__(self, upstream_tasks):
        self.this_component_id, self.this_task_id = "count", 7
        self._up = upstream_tasks

    def this_sources(self):
        return [("split", "default"), ("split", CHECKPOINT_STREAM_ID)]

    def component_tasks(self, c):
        return list(range(self._up))


class Counter(StatefulBolt):
    def init_state(self, state):
        self.state = state

    def execute(self, tup):
        self.state.put(tup[0], self.state.get(tup[0], 0) + 1)
        self.collector.ack(tup)


def data(word):
    return Tuple([word], "split", "default", 1, {1: 2}, Fields(["word"]))


def cp(txid, action, task=1):
    return Tuple([txid, action], "split", CHECKPOINT_STREAM_ID, task, {9: 9},
                 Fields(["txid", "action"]))


def make_task(upstream=1, state=None):
    out = Out()
    held = HoldingCollector(out)
    bolt = Counter()
    bolt.prepare({}, None, held)
    task = StatefulTask(bolt, bolt.execute, out, held, Context(upstream), {},
                        state or InMemoryKeyValueState())
    return task, out, bolt


def test_tuples_wait_for_initstate_and_acks_wait_for_the_commit():
    task, out, bolt = make_task()
    a, b, c = data("a"), data("b"), data("a")
    task.execute(a)
    assert not out.acked and task.pending == [a]
    task.execute(cp(0, INITSTATE))
    assert bolt.state.get("a") == 1
    task.execute(b)
    assert out.acked == [cp_ack for cp_ack in out.acked if cp_ack.source_stream == CHECKPOINT_STREAM_ID]
    task.execute(cp(1, PREPARE))
    task.execute(c)  # after the prepare: belongs to the next transaction
    task.execute(cp(1, COMMIT))
    data_acked = [t for t in out.acked if t.source_stream != CHECKPOINT_STREAM_ID]
    assert data_acked == [a, b]
    # every checkpoint tuple went on downstream, anchored to its input
    assert [(s, v) for s, v, _ in out.emitted] == [(CHECKPOINT_STREAM_ID, [0, INITSTATE]),
                                                   (CHECKPOINT_STREAM_ID, [1, PREPARE]),
                                                   (CHECKPOINT_STREAM_ID, [1, COMMIT])]


def test_rollback_fails_what_was_not_committed_and_restores_the_state():
    task, out, bolt = make_task()
    task.execute(cp(0, INITSTATE))
    task.execute(data("a"))
    task.execute(cp(1, PREPARE))
    task.execute(cp(1, COMMIT))
    x, y = data("a"), data("b")
    task.execute(x)
    task.execute(cp(2, PREPARE))
    task.execute(y)
    task.execute(cp(2, ROLLBACK))
    assert out.failed == [x, y]
    assert dict(bolt.state.items()) == {"a": 1}


def test_checkpoints_align_on_every_upstream_task_and_prepare_before_init_fails():
    task, out, bolt = make_task(upstream=2)
    task.execute(cp(0, INITSTATE, task=1))
    assert not task.initialized and not out.emitted  # the other task's copy is missing
    task.execute(cp(0, INITSTATE, task=2))
    assert task.initialized and len(out.emitted) == 1
    fresh, out2, _ = make_task()
    p = cp(3, PREPARE)
    fresh.execute(p)
    assert out2.failed == [p] and not out2.emitted  # restarted mid-run: ask for recovery


def test_gate_ignores_old_transactions():
    g = CheckpointGate(1)
    assert g.arrived(PREPARE, 5) and g.current(PREPARE, 5)
    assert g.arrived(ROLLBACK, 5) and g.current(ROLLBACK, 5)
    assert g.arrived(INITSTATE, 4) and g.current(INITSTATE, 4)
    assert g.arrived(COMMIT, 2) and not g.current(COMMIT, 2)


def test_a_stateful_bolt_must_anchor():
    held = HoldingCollector(Out())
    with pytest.raises(ValueError, match="anchor"):
        held.emit(["x"])


# -- the states ------------------------------------------------------------------------

def _exercise(state, reopen):
    """The contract both states keep; ``reopen()`` is the state after a crash (None:
    the state does not survive one)."""
    state.put("a", 1)
    state.put(("k", 2), [1, 2])
    state.prepare_commit(1)
    state.put("a", 2)  # after the prepare: not in transaction 1
    state.commit(1)
    assert state.get("a") == 2 and state.get(("k", 2)) == [1, 2]
    state.rollback()
    assert state.get("a") == 1 and state.get("missing", "d") == "d"
    state.delete("a")
    state.put("b", {"x": 1})
    state.prepare_commit(2)
    if reopen is not None:
        after = reopen()  # died between prepare and commit
        after.commit(2)  # recovery commits the prepared transaction
        assert after.get("a") is None and after.get("b") == {"x": 1}
        assert dict(after.items()) == {("k", 2): [1, 2], "b": {"x": 1}}
    state.commit(2)
    assert dict(state.items()) == {("k", 2): [1, 2], "b": {"x": 1}}
    if reopen is not None:
        state.put("c", 3)
        state.prepare_commit(3)
        after = reopen()  # died after this prepare: recovery rolls it back
        after.rollback()
        assert after.get("c") is None and reopen().get("c") is None


def test_in_memory_state():
    _exercise(InMemoryKeyValueState(), None)
    s = InMemoryKeyValueState()
    s.prepare_commit(1)
    with pytest.raises(StateError, match="prepared"):
        s.prepare_commit(2)


def test_redis_state_survives_a_crash_and_commits_atomically(redis_conf):
    conf = {**redis_conf, "topology.state.provider": "redis"}
    first = get_state("count-7", conf)
    assert isinstance(first, RedisKeyValueState)
    _exercise(first, lambda: get_state("count-7", conf))
    assert first.txids() == {"prepare": 3, "commit": 2}
    with pytest.raises(StateError, match="cannot be saved"):
        first.put("bad", object())
        first.prepare_commit(3)


def test_providers_are_chosen_as_documented():
    assert provider_name({}) == "memory"
    assert provider_name({"topology.state.provider.config": '{"jedisPoolConfig": {}}'}) == "redis"
    assert provider_name({"topology.state.provider":
                          "org.apache.storm.redis.state.RedisKeyValueStateProvider"}) == "redis"
    assert provider_problem({"topology.state.provider": "not a class"})
    assert provider_problem({"topology.state.provider": "mymod.MyProvider"}) is None
    s = redis_settings({"topology.state.provider.config":
                        '{"jedisPoolConfig": {"host": "h", "port": 7, "timeOut": 2000}}'})
    assert (s["host"], s["port"], s["timeout"]) == ("h", 7, 2.0)
    with pytest.raises(StateError, match="cannot be loaded"):
        get_state("x", {"topology.state.provider": "no_such_module.Provider"})


# -- the builder's wiring (Storm's TopologyBuilder with a stateful bolt) -------------------

class Split(BasicBolt):
    def execute(self, tup, collector):
        pass

    def declare_output_fields(self, d):
        d.declare(["word"])


def test_builder_adds_the_checkpoint_spout_and_wires_checkpoint_streams():
    b = TopologyBuilder()
    b.set_spout("words", TestWordSpout())
    b.set_bolt("split", Split(), 2).shuffle_grouping("words")
    b.set_bolt("count", Counter()).fields_grouping("split", ["word"]).shuffle_grouping("words")
    topo = from_bytes(to_bytes(b.create_topology()))
    comps = topo.components
    assert comps[CHECKPOINT_COMPONENT_ID].kind == "spout"
    assert list(comps[CHECKPOINT_COMPONENT_ID].streams) == [CHECKPOINT_STREAM_ID]
    cps = {cid: [(i.component, i.grouping.kind) for i in c.inputs
                 if i.stream == CHECKPOINT_STREAM_ID] for cid, c in comps.items()}
    assert cps["split"] == [(CHECKPOINT_COMPONENT_ID, "all")]
    assert cps["count"] == [("split", "all"), (CHECKPOINT_COMPONENT_ID, "all")]
    assert comps["split"].streams[CHECKPOINT_STREAM_ID].fields == ["txid", "action"]
    plain = TopologyBuilder()
    plain.set_spout("words", TestWordSpout())
    plain.set_bolt("split", Split()).shuffle_grouping("words")
    assert CHECKPOINT_COMPONENT_ID not in plain.create_topology().components
    with pytest.raises(Exception, match="reserved"):
        plain.set_bolt(CHECKPOINT_COMPONENT_ID, Split())


def test_submit_checks_with_the_topology_conf():
    from squall.client.errors import InvalidTopology
    from squall.client.topology import validate_with_conf
    from squall.client.windowing import Count, Duration, WindowedBolt

    b = TopologyBuilder()
    b.set_spout("words", TestWordSpout())
    b.set_bolt("count", Counter()).shuffle_grouping("words")
    stateful = b.create_topology()
    validate_with_conf(stateful, {"topology.state.checkpoint.mode": "barrier"})
    with pytest.raises(InvalidTopology, match="choose one of acker, acker-at-least-once, barr"):
        validate_with_conf(stateful, {"topology.state.checkpoint.mode": "exactly-once"})
    # Exactly-once acker checkpointing finds a replay in the task that saved it: a stateful
    # bolt of several tasks needs inputs a replay sends to the same task.
    spread = TopologyBuilder()
    spread.set_spout("words", TestWordSpout())
    spread.set_bolt("count", Counter(), 2).shuffle_grouping("words")
    spread = spread.create_topology()
    with pytest.raises(InvalidTopology, match=r"stateful bolt 'count' reads words:default with "
                       r"shuffle grouping: a replayed tuple may reach another of its 2 tasks"):
        validate_with_conf(spread, {})
    validate_with_conf(spread, {"topology.state.checkpoint.mode": "acker-at-least-once"})
    validate_with_conf(spread, {"topology.state.checkpoint.mode": "barrier"})
    validate_with_conf(stateful, {})  # one task: a replay has nowhere else to go
    keyed = TopologyBuilder()
    keyed.set_spout("words", TestWordSpout())
    keyed.set_bolt("count", Counter(), 2).fields_grouping("words", ["word"])
    validate_with_conf(keyed.create_topology(), {})
    with pytest.raises(InvalidTopology, match="dotted class name"):
        validate_with_conf(stateful, {"topology.state.provider": "not a class"})
    plain = TopologyBuilder()
    plain.set_spout("words", TestWordSpout())
    plain.set_bolt("w", WindowedBolt().with_window(Duration.seconds(20), Duration.seconds(15))) \
        .shuffle_grouping("words")
    topo = plain.create_topology()
    with pytest.raises(InvalidTopology, match="no stateful bolt"):
        validate_with_conf(topo, {"topology.state.checkpoint.mode": "barrier"})
    with pytest.raises(InvalidTopology, match=r"35000 ms\) outlasts topology.message.timeout"):
        validate_with_conf(topo, {"topology.message.timeout.secs": 30})
    validate_with_conf(topo, {"topology.message.timeout.secs": 40})
    counted = TopologyBuilder()
    counted.set_spout("words", TestWordSpout())
    counted.set_bolt("w", WindowedBolt().with_window(Count(100), Count(10))) \
        .shuffle_grouping("words")
    with pytest.raises(InvalidTopology, match="holds up to 110 tuples"):
        validate_with_conf(counted.create_topology(), {"topology.max.spout.pending": 50})


# -- a stateful task with dedupe ---------------------------------------------------------

def word(w, edge):
    return Tuple([w], "split", "default", 1, {edge * 1000: edge + 100}, Fields(["word"]))


class FailsFirst(Counter):
    """Fails each word's first tuple without counting it (a transient error)."""

    def execute(self, tup):
        self.tried = getattr(self, "tried", set())
        if tup[0] not in self.tried:
            self.tried.add(tup[0])
            self.collector.fail(tup)
            return
        super().execute(tup)


def deduping_task(state, store, bolt_class=Counter):
    out = Out()
    held = HoldingCollector(out)
    bolt = bolt_class()
    bolt.prepare({}, None, held)
    task = StatefulTask(bolt, bolt.execute, out, held, Context(1), {}, state, dedupe=True,
                        seen_store=store)
    task.execute(cp(0, INITSTATE))
    return task, out, bolt


def test_a_replay_of_a_committed_tuple_is_acked_without_changing_the_state():
    state, store = InMemoryKeyValueState(), InMemoryKeyValueState()
    task, out, bolt = deduping_task(state, store)
    a, b = word("a", 1), word("b", 2)
    task.execute(a)
    task.execute(b)
    task.execute(cp(1, PREPARE))
    task.execute(cp(1, COMMIT))
    assert dict(state.items()) == {"a": 1, "b": 1}
    # The worker dies before the acks reach the acker: the spout replays both messages,
    # and one new one. A restarted task restores the keys with the state.
    state.rollback()
    store.rollback()
    task, out, bolt = deduping_task(state, store)
    replay_a, replay_b, c = word("a", 1), word("b", 2), word("a", 3)
    for t in (replay_a, c, replay_b):
        task.execute(t)
    assert dict(bolt.state.items()) == {"a": 2, "b": 1}  # only the new "a" counts
    task.execute(cp(2, PREPARE))
    task.execute(cp(2, COMMIT))
    data_acked = [t for t in out.acked if t.source_stream != CHECKPOINT_STREAM_ID]
    assert data_acked == [replay_a, c, replay_b]  # the replays complete their trees
    assert dict(state.items()) == {"a": 2, "b": 1}


def test_a_rolled_back_tuple_counts_when_it_comes_again():
    task, out, bolt = deduping_task(InMemoryKeyValueState(), InMemoryKeyValueState())
    task.execute(word("a", 1))
    task.execute(cp(1, PREPARE))
    task.execute(cp(1, ROLLBACK))
    task.execute(word("a", 1))  # the replay of what the rollback dropped
    assert dict(bolt.state.items()) == {"a": 1}


def test_without_dedupe_a_replay_counts_twice():
    """Storm's acker-at-least-once: the same replay counts again."""
    state = InMemoryKeyValueState()
    out = Out()
    held = HoldingCollector(out)
    bolt = Counter()
    bolt.prepare({}, None, held)
    task = StatefulTask(bolt, bolt.execute, out, held, Context(1), {}, state)
    task.execute(cp(0, INITSTATE))
    task.execute(word("a", 1))
    task.execute(cp(1, PREPARE))
    task.execute(cp(1, COMMIT))
    task.execute(word("a", 1))
    assert dict(state.items()) == {"a": 2}


def test_the_replay_of_a_failed_tuple_counts():
    """Only acked tuples are saved as processed: a tuple the bolt failed runs again."""
    task, out, bolt = deduping_task(InMemoryKeyValueState(), InMemoryKeyValueState(),
                                    FailsFirst)
    first = word("a", 1)
    task.execute(first)
    assert out.failed == [first] and dict(bolt.state.items()) == {}
    task.execute(word("a", 1))  # the spout's replay
    task.execute(cp(1, PREPARE))
    task.execute(cp(1, COMMIT))
    assert dict(bolt.state.items()) == {"a": 1}
