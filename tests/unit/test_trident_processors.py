"""A bolt group's operations run per batch (processors.Subtopology), driven directly: hand-made
input tuples in, what leaves the group on its streams out. State is MemoryMapState, dropped
around each test."""

from dataclasses import dataclass, field

import pytest

from squall.client.errors import FailedException, ReportedFailedException
from squall.client.trident.attempt import TransactionAttempt
from squall.client.trident.line_files import TransactionalLineFiles
from squall.client.trident.operation import Aggregator, Count, Function, Sum
from squall.client.trident.persist import MapGet
from squall.client.trident.processors import Subtopology
from squall.client.trident.runtime import BatchBolt
from squall.client.trident.state import MemoryMapState
from squall.client.trident.stream import TridentTopology
from trident_ops import Letters, Long, Longest, Split, Upper

STATE = "test-trident-processors"


@pytest.fixture(autouse=True)
def fresh_state():
    MemoryMapState.drop(STATE)
    yield
    MemoryMapState.drop(STATE)


# --- fakes -------------------------------------------------------------------------------

class Context:
    """What Subtopology.prepare reads: the component's tasks and this task's index."""

    def __init__(self, tasks=1, index=0):
        self.tasks, self.this_task_index = tasks, index

    def component_tasks(self, component):
        return list(range(1, self.tasks + 1))


class Out:
    """The BatchBolt's collector: ``batch`` is set per call, emits are recorded."""

    def __init__(self):
        self.batch = None
        self.emitted = []
        self.errors = []

    def emit_to(self, stream, values):
        self.emitted.append((stream, list(values)))

    def report_error(self, error):
        self.errors.append(error)


@dataclass
class Tup:
    values: list
    source_stream: str
    is_tick: bool = False


class Task:
    """One task of a component hosting ``nodes``: streams of nodes outside enter it as
    ``s<parent id>`` (as the planner names them); ``exits`` maps a stream (or state) of the
    graph to the name its output leaves on."""

    def __init__(self, nodes, exits):
        ids = {n.id for n in nodes}
        entries = {}
        for n in nodes:
            for p in n.parents:
                if p.id not in ids:
                    entries.setdefault(f"s{p.id}", []).append(n.id)
        self.entry = next(iter(entries))
        self.sub = Subtopology(nodes, entries, {s.node.id: name for s, name in exits.items()})
        self.out = Out()
        self.sub.prepare({}, Context(), self.out, "component")

    def start(self, txid, attempt=0):
        self.out.batch = TransactionAttempt(txid, attempt)
        self.out.emitted = []
        self.state = self.sub.init_batch(self.out.batch)

    def execute(self, *rows):
        for row in rows:
            self.sub.execute(self.state, Tup([self.out.batch.to_list(), *row], self.entry),
                             self.out)
        return self.out.emitted

    def finish(self):
        self.sub.finish_batch(self.state, self.out)
        return self.out.emitted

    def batch(self, txid, rows, attempt=0):
        """The whole batch; what left the group."""
        self.start(txid, attempt)
        self.execute(*rows)
        return self.finish()


def task_for(topology, *exits, after=None):
    """A task hosting every node of ``topology`` past its spouts (or past ``after``)."""
    skip = {n.id for n in topology.nodes if n.kind == "spout"}
    if after is not None:
        skip |= {n.id for n in topology.nodes if n.id <= after.node.id}
    nodes = [n for n in topology.nodes if n.id not in skip]
    return Task(nodes, {s: "out" for s in exits})


def spout(*fields):
    return TransactionalLineFiles(["unused.txt"], fields=fields)


def values(emitted, stream="out"):
    return [v for s, v in emitted if s == stream]


# --- operations --------------------------------------------------------------------------





class Seen(Function):
    """Emits the fields and values it was given, to show what an operation sees."""

    def execute(self, t, collector):
        collector.emit([(tuple(t.fields), tuple(t.values))])


class Big(Function):
    def execute(self, t, collector):
        collector.emit([t[0] > 1])



class FirstTwo(Aggregator):
    """Storm's FirstN shape: emits while aggregating."""

    def init(self, batch_id, collector):
        return 0

    def aggregate(self, n, t, collector):
        if n < 2:
            collector.emit([t[0]])
        return n + 1

    def complete(self, n, collector):
        pass


class Fails(Function):
    def __init__(self, error=FailedException):
        self.error = error
        self.calls = 0

    def execute(self, t, collector):
        self.calls += 1
        raise self.error(f"cannot split {t[0]!r}")


# --- each / filter / map / flat_map / project ---------------------------------------------

def test_each_filter_and_project_emit_as_each_tuple_arrives():
    t = TridentTopology()
    out = (t.new_stream("lines", spout("line"))
           .each(["line"], Split(), ["word"]).filter(Long(), ["word"]).project(["word"]))
    task = task_for(t, out)
    task.start(1)
    assert values(task.execute(["the cow jumped"])) == [["the"], ["cow"], ["jumped"]]
    assert values(task.execute(["a an"])) == [["the"], ["cow"], ["jumped"]]
    assert values(task.finish()) == [["the"], ["cow"], ["jumped"]]


def test_a_function_sees_only_its_input_fields_in_order_and_its_output_is_appended():
    t = TridentTopology()
    out = t.new_stream("pairs", spout("a", "b", "c")).each(["c", "a"], Seen(), ["seen"])
    assert values(task_for(t, out).batch(1, [[1, 2, 3]])) == \
        [[1, 2, 3, (("c", "a"), (3, 1))]]


def test_map_and_flat_map_replace_the_tuple():
    t = TridentTopology()
    words = t.new_stream("words", spout("word"))
    upper = words.map(Upper(), ["upper"])
    letters = upper.flat_map(Letters(), ["letter"])
    task = Task([upper.node, letters.node], {upper: "out", letters: "letters"})
    emitted = task.batch(1, [["ox"], ["ant"]])
    assert values(emitted) == [["OX"], ["ANT"]]
    assert values(emitted, "letters") == [["O"], ["X"], ["A"], ["N"], ["T"]]


def test_a_merge_of_differently_named_streams_reads_both_by_the_first_streams_names():
    t = TridentTopology()
    a = t.new_stream("a", spout("line"))
    b = t.new_stream("b", spout("sentence"))
    out = t.merge(a, b).each(["line"], Seen(), ["seen"])
    task = task_for(t, out)
    task.start(1)
    for stream, text in ((f"s{a.node.id}", "from a"), (f"s{b.node.id}", "from b")):
        task.sub.execute(task.state, Tup([task.out.batch.to_list(), text], stream), task.out)
    assert values(task.out.emitted) == [["from a", (("line",), ("from a",))],
                                        ["from b", (("line",), ("from b",))]]


def test_a_stream_used_twice_feeds_both_branches():
    t = TridentTopology()
    words = t.new_stream("words", spout("word"))
    long_ = words.filter(Long())
    upper = words.map(Upper())
    task = Task([long_.node, upper.node], {long_: "long", upper: "upper"})
    emitted = task.batch(1, [["ox"], ["ant"]])
    assert emitted == [("upper", ["OX"]), ("long", ["ant"]), ("upper", ["ANT"])]


def test_tuples_from_a_stream_the_group_does_not_read_are_ignored():
    t = TridentTopology()
    out = t.new_stream("words", spout("word")).map(Upper())
    task = task_for(t, out)
    task.start(1)
    task.sub.execute(task.state, Tup([[1, 0], "ox"], "s999"), task.out)
    assert task.finish() == []


# --- aggregation -------------------------------------------------------------------------

@pytest.mark.parametrize("agg, inputs, expected", [
    (Count(), None, {("a", 2), ("bb", 1)}),
    (Sum(), ["n"], {("a", 5), ("bb", 10)}),
    (Longest(), ["text"], {("a", "xyz"), ("bb", "q")}),
], ids=["count", "sum", "reducer"])
def test_a_grouped_aggregate_emits_one_tuple_per_group_when_the_batch_finishes(agg, inputs,
                                                                                expected):
    t = TridentTopology()
    out = (t.new_stream("rows", spout("word", "n", "text"))
           .group_by(["word"]).aggregate(agg, ["value"], inputs))
    assert out.fields == ["word", "value"]
    task = task_for(t, out)
    task.start(1)
    assert task.execute(["a", 2, "xy"], ["bb", 10, "q"], ["a", 3, "xyz"]) == []
    assert {tuple(v) for v in values(task.finish())} == expected


def test_aggregates_do_not_leak_between_batches():
    t = TridentTopology()
    out = t.new_stream("words", spout("word")).group_by(["word"]).aggregate(Count(), ["n"])
    task = task_for(t, out)
    assert values(task.batch(1, [["a"], ["a"]])) == [["a", 2]]
    assert values(task.batch(2, [["a"]])) == [["a", 1]]


@pytest.mark.parametrize("agg, zero", [(Count(), 0), (Sum(), 0), (Longest(), "")],
                         ids=["count", "sum", "reducer"])
def test_a_global_aggregate_of_an_empty_batch_emits_the_zero(agg, zero):
    t = TridentTopology()
    out = t.new_stream("nums", spout("n")).aggregate(agg, ["total"])
    task = task_for(t, out)
    assert values(task.batch(1, [])) == [[zero]]


def test_a_global_aggregate_emits_once_per_batch():
    t = TridentTopology()
    out = t.new_stream("nums", spout("n")).aggregate(Sum(), ["total"])
    assert values(task_for(t, out).batch(1, [[1], [2], [3]])) == [[6]]


def test_operations_after_an_aggregate_run_when_it_emits():
    t = TridentTopology()
    counts = t.new_stream("words", spout("word")).group_by(["word"]).aggregate(Count(), ["n"])
    big = counts.each(["n"], Big(), ["big"])
    task = task_for(t, big)
    assert values(task.batch(1, [["a"], ["a"], ["b"]])) == [["a", 2, True], ["b", 1, False]]


def test_an_aggregator_may_emit_while_aggregating():
    t = TridentTopology()
    out = t.new_stream("words", spout("word")).group_by(["word"]).aggregate(
        FirstTwo(), ["w"], input_fields=["word"])
    assert values(task_for(t, out).batch(1, [["a"], ["a"], ["a"]])) == [["a", "a"], ["a", "a"]]


# --- persistent_aggregate ----------------------------------------------------------------

def word_counts(factory):
    t = TridentTopology()
    counts = t.new_stream("words", spout("word")).group_by(["word"]).persistent_aggregate(
        factory, Count(), ["count"])
    return t, counts


def stored(factory, *words):
    state = factory.make_state({}, 0, 1)
    return state.multi_get([(w,) for w in words])


def test_persist_updates_the_state_when_the_batch_finishes_and_emits_the_new_values():
    factory = MemoryMapState.transactional(STATE)
    t, counts = word_counts(factory)
    task = task_for(t, counts)
    task.start(1)
    assert task.execute(["a"], ["b"], ["a"]) == []
    assert stored(factory, "a", "b") == [None, None]
    assert values(task.finish()) == [["a", 2], ["b", 1]]
    assert stored(factory, "a", "b") == [2, 1]


def test_transactional_state_counts_a_replayed_txid_once_and_a_new_txid_on_top():
    factory = MemoryMapState.transactional(STATE)
    t, counts = word_counts(factory)
    task = task_for(t, counts)
    assert values(task.batch(1, [["a"], ["a"], ["b"]])) == [["a", 2], ["b", 1]]
    assert values(task.batch(1, [["a"], ["a"], ["b"]], attempt=1)) == [["a", 2], ["b", 1]]
    assert stored(factory, "a", "b") == [2, 1]
    assert values(task.batch(2, [["a"], ["c"]])) == [["a", 3], ["c", 1]]
    # A restarted task (a new state object on the same store) replaying txid 2.
    again = task_for(t, counts)
    assert values(again.batch(2, [["a"], ["c"]], attempt=1)) == [["a", 3], ["c", 1]]
    assert stored(factory, "a", "b", "c") == [3, 1, 1]


def test_opaque_state_counts_a_replay_with_different_tuples_once():
    factory = MemoryMapState.opaque(STATE)
    t, counts = word_counts(factory)
    task = task_for(t, counts)
    assert values(task.batch(1, [["a"], ["a"]])) == [["a", 2]]
    # The opaque spout read further on the replay: txid 1 now has three a's and a b.
    assert values(task.batch(1, [["a"], ["a"], ["a"], ["b"]], attempt=1)) == \
        [["a", 3], ["b", 1]]
    assert values(task.batch(2, [["a"]])) == [["a", 4]]
    assert stored(factory, "a", "b") == [4, 1]


def test_a_global_persistent_aggregate_keeps_one_value():
    factory = MemoryMapState.transactional(STATE)
    t = TridentTopology()
    total = t.new_stream("nums", spout("n")).persistent_aggregate(factory, Sum(), ["total"])
    task = task_for(t, total)
    assert values(task.batch(1, [[2], [3]])) == [[5]]
    assert values(task.batch(1, [[2], [3]], attempt=1)) == [[5]]
    assert values(task.batch(2, [[10]])) == [[15]]
    assert factory.make_state({}, 0, 1).get() == 15  # under the global key, as Storm keeps it


def test_a_reducer_persists_by_folding_into_the_stored_value():
    factory = MemoryMapState.transactional(STATE)
    t = TridentTopology()
    longest = t.new_stream("words", spout("word", "text")).group_by(["word"]) \
        .persistent_aggregate(factory, Longest(), ["longest"])
    task = task_for(t, longest)
    assert values(task.batch(1, [["a", "xy"], ["a", "x"]])) == [["a", "xy"]]
    assert values(task.batch(2, [["a", "xyz"]])) == [["a", "xyz"]]
    assert values(task.batch(3, [["a", "q"]])) == [["a", "xyz"]]


def test_the_new_values_stream_feeds_operations_in_the_same_group():
    factory = MemoryMapState.transactional(STATE)
    t, counts = word_counts(factory)
    big = counts.new_values_stream().each(["count"], Big(), ["big"])
    task = task_for(t, big)
    task.batch(1, [["a"], ["b"]])
    assert values(task.batch(2, [["a"]])) == [["a", 2, True]]


# --- state_query -------------------------------------------------------------------------

def counts_and_query(factory):
    t, counts = word_counts(factory)
    answers = t.new_stream("queries", spout("word")).state_query(
        counts, ["word"], MapGet(), ["count"])
    persist = task_for(t, counts)
    query = Task([answers.node], {answers: "out"})
    return persist, query


def test_a_state_query_reads_the_persisted_values_when_the_batch_finishes():
    persist, query = counts_and_query(MemoryMapState.transactional(STATE))
    persist.batch(1, [["a"], ["a"], ["b"]])
    query.start(1)
    assert query.execute(["a"], ["zzz"], ["b"]) == []
    assert values(query.finish()) == [["a", 2], ["zzz", None], ["b", 1]]
    persist.batch(2, [["a"]])
    assert values(query.batch(2, [["a"]])) == [["a", 3]]
    assert values(query.batch(3, [])) == []


def test_a_state_query_on_a_cached_state_sees_later_commits():
    # The query's state object is not the one the persist task writes through: a read cache
    # of its own would keep serving the first value it read.
    persist, query = counts_and_query(MemoryMapState.transactional(STATE, cache_size=10))
    persist.batch(1, [["a"]])
    assert values(query.batch(1, [["a"]])) == [["a", 1]]
    persist.batch(2, [["a"]])
    assert values(query.batch(2, [["a"]])) == [["a", 2]]


# --- failures ----------------------------------------------------------------------------

def test_a_failed_exception_from_an_operation_propagates():
    t = TridentTopology()
    out = t.new_stream("lines", spout("line")).each(["line"], Fails(), ["word"])
    task = task_for(t, out)
    task.start(1)
    with pytest.raises(FailedException, match="cannot split 'x'"):
        task.execute(["x"])


def test_a_failed_state_update_writes_nothing_and_the_replay_counts_normally():
    factory = MemoryMapState.transactional(STATE)
    t = TridentTopology()
    total = t.new_stream("nums", spout("n")).persistent_aggregate(factory, Sum(), ["total"])
    task = task_for(t, total)
    task.start(1)
    with pytest.raises(TypeError):  # in the partial aggregate, or else in the update
        task.execute([1], ["not a number"])
        task.finish()
    assert values(task.batch(1, [[1], [2]], attempt=1)) == [[3]]


class Collector:
    """The Squall output collector a BatchBolt writes to."""

    def __init__(self):
        self.acked, self.failed, self.errors, self.emitted = [], [], [], []

    def emit(self, values, stream="default", anchors=None, msg_id=None):
        self.emitted.append((stream, values))
        return []

    def emit_direct(self, task, values, stream="default", anchors=None):
        self.emitted.append((stream, task, values))

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)

    def report_error(self, error):
        self.errors.append(error)


@dataclass
class BoltContext:
    this_component_id: str = "b1-each"
    this_task_index: int = 0
    tasks: dict = field(default_factory=lambda: {"spout-lines": [1], "b1-each": [2]})

    def component_tasks(self, component):
        return self.tasks.get(component, [])

    def this_targets(self, stream):
        return []


@pytest.mark.parametrize("error, reported", [(FailedException, False),
                                             (ReportedFailedException, True)])
def test_a_batch_bolt_fails_the_batch_when_an_operation_raises_failed_exception(error,
                                                                                  reported):
    t = TridentTopology()
    source = t.new_stream("lines", spout("line"))
    failing = Fails(error)
    source.each(["line"], failing, ["word"])
    (node,) = [n for n in t.nodes if n.kind == "each"]
    sub = Subtopology([node], {f"s{source.node.id}": [node.id]}, {})
    bolt = BatchBolt(sub, "bg0", ["spout-lines"], False, {})
    collector = Collector()
    bolt.prepare({}, BoltContext(), collector)

    first = Tup([[1, 0], "x"], f"s{source.node.id}")
    bolt.execute(first)
    assert collector.failed == [first]
    assert bolt.batch_states == {}
    assert len(collector.errors) == (1 if reported else 0)
    # The rest of the failed attempt is failed without running the operation again.
    second = Tup([[1, 0], "y"], f"s{source.node.id}")
    bolt.execute(second)
    assert collector.failed == [first, second]
    assert failing.calls == 1
    assert collector.acked == []


class FailsOn(Function):
    """Fails (raising ``error``) on the value ``bad``; emits the others."""

    def __init__(self, bad, error=FailedException):
        self.bad, self.error = bad, error

    def execute(self, t, collector):
        if t[0] == self.bad:
            raise self.error(f"cannot take {t[0]!r}")
        collector.emit([t[0]])


@pytest.mark.parametrize("error, reported", [(FailedException, False),
                                             (ReportedFailedException, True)])
def test_a_failure_after_the_batchs_first_tuple_fails_the_batch_too(error, reported):
    """The first tuple starts the batch through the tracker's events; later ones take the
    per-tuple path (BatchTracker.accept_data), whose failure must end the same way."""
    t = TridentTopology()
    source = t.new_stream("lines", spout("line"))
    source.each(["line"], FailsOn("bad", error), ["word"])
    (node,) = [n for n in t.nodes if n.kind == "each"]
    stream = f"s{source.node.id}"
    bolt = BatchBolt(Subtopology([node], {stream: [node.id]}, {}), "bg0", ["spout-lines"],
                     False, {})
    collector = Collector()
    bolt.prepare({}, BoltContext(), collector)
    good, bad, late = (Tup([[1, 0], v], stream) for v in ("ok", "bad", "later"))
    bolt.execute(good)
    assert collector.acked == [good]
    bolt.execute(bad)
    assert collector.failed == [bad] and bolt.batch_states == {}
    assert len(collector.errors) == (1 if reported else 0)
    bolt.execute(late)  # the rest of the failed attempt is failed, not run
    assert collector.failed == [bad, late] and collector.acked == [good]
    assert bolt.tuples == {}


def test_a_batch_bolt_lets_go_of_superseded_and_late_attempts():
    t = TridentTopology()
    source = t.new_stream("lines", spout("line"))
    source.each(["line"], Split(), ["word"])
    (node,) = [n for n in t.nodes if n.kind == "each"]
    stream = f"s{source.node.id}"
    bolt = BatchBolt(Subtopology([node], {stream: [node.id]}, {}), "bg0", ["spout-lines"],
                     False, {})
    collector = Collector()
    bolt.prepare({}, BoltContext(tasks={"spout-lines": [1, 5], "b1-each": [2]}), collector)
    bolt.execute(Tup([[1, 0], "a b"], stream))
    bolt.execute(Tup([[1, 0], 1], "$coord-bg0"))     # one of two reports: held until finish
    assert len(bolt.tuples) == 1
    bolt.execute(Tup([[1, 1], "c"], stream))          # attempt 1 replaces attempt 0
    bolt.execute(Tup([[1, 0], "late"], stream))       # a straggler of attempt 0: ignored
    assert list(bolt.batch_of.values()) == [] and bolt.tuples == {}
    assert len(collector.acked) == 2 and collector.failed == []


def test_partition_aggregate_folds_each_partitions_share_where_it_is():
    """Storm's partitionAggregate: no repartition; each task aggregates its own share of
    the batch and emits it (its aggregator's zero for an empty share)."""
    t = TridentTopology()
    out = t.new_stream("nums", spout("n")).partition_aggregate(Sum(), ["partial"])
    assert out.node.parents[0].kind == "spout" and out.fields == ["partial"]
    task = task_for(t, out)
    assert values(task.batch(1, [[1], [2]])) == [[3]]
    assert values(task.batch(2, [])) == [[0]]


def test_partition_aggregate_and_local_or_shuffle_are_wired_without_a_global_grouping():
    t = TridentTopology()
    (t.new_stream("nums", spout("n")).parallelism_hint(2)
     .local_or_shuffle().each(["n"], Big(), ["big"]).parallelism_hint(3)
     .partition_aggregate(Count(), ["count"]))
    topo = t.build()
    kinds = {(c.id, i.grouping.kind) for c in topo.components.values() for i in c.inputs
             if not i.stream.startswith(("$", "__"))}
    assert any(k == "local_or_shuffle" for _, k in kinds), kinds
    assert not any(k == "global" for _, k in kinds), kinds
