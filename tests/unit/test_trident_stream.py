"""Building Trident graphs (fields checked as each call is made) and compiling them into
Squall topologies: which components exist, what they subscribe to and with what grouping."""

import pytest

from squall.client.errors import InvalidTopology
from squall.client.topology import validate
from squall.client.topology_proto import from_bytes, to_bytes
from squall.client.trident.line_files import OpaqueLineFiles, TransactionalLineFiles
from squall.client.trident.operation import Aggregator, Count, ReducerAggregator, Sum
from squall.client.trident.persist import MapGet
from squall.client.trident.runtime import (BatchBolt, MasterBatchCoordinatorSpout, SpoutBatch,
                                           SpoutCoordinatorBolt)
from squall.client.trident.state import MemoryMapState
from squall.client.trident.stream import TridentTopology
from trident_ops import Letters, Long, Longest, Split, Upper


# --- operations (module level: the built topology pickles them) ----------------------------






class Collect(Aggregator):
    def init(self, batch_id, collector):
        return []

    def aggregate(self, state, t, collector):
        return state + [t[0]]

    def complete(self, state, collector):
        collector.emit([state])


def lines(path="lines.txt", fields=("line",)):
    return TransactionalLineFiles([path], fields=fields)


def word_count(spout=None):
    """The canonical graph: lines -> each(Split) -> group_by(word) -> persistent_aggregate."""
    t = TridentTopology()
    stream = t.new_stream("lines", spout or lines())
    words = stream.each(["line"], Split(), ["word"])
    counts = words.group_by(["word"]).persistent_aggregate(
        MemoryMapState.transactional("wc"), Count(), ["count"])
    return t, stream, words, counts


def partial_of(counts):
    """The partial aggregate the planner put before a combiner persist's repartition."""
    partition = counts.node.parents[0]
    assert partition.kind == "partition" and partition.parents[0].partial
    return partition.parents[0]


def inputs(topology, component):
    """(source, stream) -> (grouping kind, grouping fields) of ``component``'s subscriptions."""
    return {(i.component, i.stream): (i.grouping.kind, list(i.grouping.fields))
            for i in topology.components[component].inputs}


def batch_components(topology):
    """The components hosting operations (not the coordinators or spout executors)."""
    return sorted(c for c in topology.components if c.startswith("b"))


def hosted_kinds(topology, component):
    bolt = topology.components[component].instantiate()
    return [n.kind for n in bolt.hosted.nodes]


# --- field checks while building -------------------------------------------------------

def test_each_with_an_unknown_input_field_names_the_fields_that_exist():
    t = TridentTopology()
    s = t.new_stream("lines", lines())
    with pytest.raises(InvalidTopology, match=r"no field\(s\) \['wrd'\].*it has \['line'\]"):
        s.each(["wrd"], Split(), ["word"])


@pytest.mark.parametrize("function_fields", [["line"], []], ids=["clash", "empty"])
def test_each_function_fields_must_be_new_and_not_empty(function_fields):
    s = TridentTopology().new_stream("lines", lines())
    with pytest.raises(InvalidTopology, match="must be new, distinct and not empty"):
        s.each(["line"], Split(), function_fields)


@pytest.mark.parametrize("op", [Upper(), Count(), object()], ids=["map", "aggregator", "object"])
def test_each_refuses_what_is_not_a_function_or_filter(op):
    s = TridentTopology().new_stream("lines", lines())
    with pytest.raises(InvalidTopology, match="is not a Function or Filter"):
        s.each(["line"], op, ["out"])


def test_map_and_flat_map_refuse_other_operations():
    s = TridentTopology().new_stream("lines", lines())
    with pytest.raises(InvalidTopology, match="is not a MapFunction"):
        s.map(Split())
    with pytest.raises(InvalidTopology, match="is not a FlatMapFunction"):
        s.flat_map(Upper())


def test_project_partition_by_and_group_by_refuse_unknown_fields():
    s = TridentTopology().new_stream("lines", lines()).each(["line"], Split(), ["word"])
    with pytest.raises(InvalidTopology, match=r"project: no field\(s\) \['count'\]"):
        s.project(["word", "count"])
    with pytest.raises(InvalidTopology, match=r"partition_by: no field\(s\) \['wrd'\].*"
                                              r"\['line', 'word'\]"):
        s.partition_by(["wrd"])
    with pytest.raises(InvalidTopology, match=r"no field\(s\) \['wrd'\]"):
        s.group_by(["wrd"])


def test_a_stream_keeps_the_fields_of_its_operations():
    s = TridentTopology().new_stream("lines", lines()).each(["line"], Split(), ["word"])
    assert s.fields == ["line", "word"]
    assert s.project(["word"]).fields == ["word"]
    assert s.map(Upper(), ["upper"]).fields == ["upper"]
    assert s.filter(Long(), ["word"]).fields == ["line", "word"]
    assert s.group_by(["word"]).aggregate(Count(), ["count"]).fields == ["word", "count"]
    assert s.aggregate(Count(), ["n"]).fields == ["n"]


def test_merge_takes_the_first_streams_field_names_as_storm_does():
    t = TridentTopology()
    a = t.new_stream("a", lines())
    b = t.new_stream("b", lines(fields=["word"]))
    assert t.merge(a, b).fields == ["line"]
    assert t.merge(a, b, output_fields=["text"]).fields == ["text"]
    pair = t.new_stream("c", lines(fields=["x", "y"]))
    with pytest.raises(InvalidTopology, match=r"a stream has 2 field\(s\) \['x', 'y'\], the "
                                              r"merged stream 1 \['line'\]; project it"):
        t.merge(a, pair)
    with pytest.raises(InvalidTopology, match="at least two"):
        t.merge(a)


def test_a_transactional_id_names_one_stream_only():
    t = TridentTopology()
    t.new_stream("lines", lines())
    with pytest.raises(InvalidTopology, match="'lines' is used by two streams"):
        t.new_stream("lines", lines("other.txt"))
    for bad in ("", "a/b"):
        with pytest.raises(InvalidTopology, match="transactional id"):
            t.new_stream(bad, lines())


def test_new_stream_refuses_what_is_not_a_trident_spout():
    with pytest.raises(InvalidTopology, match="list is not a TridentSpout"):
        TridentTopology().new_stream("lines", ["not", "a", "spout"])


@pytest.mark.parametrize("agg", [Collect(), Split()], ids=["aggregator", "function"])
def test_persistent_aggregate_needs_a_combiner_or_reducer(agg):
    grouped = TridentTopology().new_stream("lines", lines()).group_by(["line"])
    with pytest.raises(InvalidTopology, match="CombinerAggregator or ReducerAggregator"):
        grouped.persistent_aggregate(MemoryMapState.transactional("wc"), agg, ["count"])


def test_persistent_aggregate_keeps_one_value_per_key():
    grouped = TridentTopology().new_stream("lines", lines()).group_by(["line"])
    with pytest.raises(InvalidTopology, match="one value per key"):
        grouped.persistent_aggregate(MemoryMapState.transactional("wc"), Count(),
                                     ["count", "extra"])


def test_a_topology_without_a_stream_is_refused():
    with pytest.raises(InvalidTopology, match="at least one new_stream"):
        TridentTopology().build()


def test_aggregate_refuses_a_non_aggregator_as_an_invalid_topology():
    s = TridentTopology().new_stream("lines", lines())
    with pytest.raises(InvalidTopology):
        s.aggregate(Split(), ["n"])


def test_state_query_function_fields_must_be_new():
    t, _, _, counts = word_count()
    q = t.new_stream("q", lines(fields=["word"]))
    with pytest.raises(InvalidTopology):
        q.state_query(counts, ["word"], MapGet(), ["word"])


# --- compiling: the word count --------------------------------------------------------

def test_word_count_compiles_to_coordinators_a_spout_executor_and_two_batch_components():
    topo = word_count()[0].build()
    assert sorted(topo.components) == ["$mastercoord-bg0", "$spoutcoord-spout-lines",
                                       "b1-each", "b2-persist", "spout-lines"]
    assert [c.id for c in topo.spouts()] == ["$mastercoord-bg0"]
    assert isinstance(topo.components["$mastercoord-bg0"].instantiate(),
                      MasterBatchCoordinatorSpout)
    assert isinstance(topo.components["$spoutcoord-spout-lines"].instantiate(),
                      SpoutCoordinatorBolt)
    executor = topo.components["spout-lines"].instantiate()
    assert isinstance(executor, BatchBolt) and isinstance(executor.hosted, SpoutBatch)
    # Storm's partial aggregation: Count folds each split task's batch per word before the
    # repartition, and the persist combines the partial counts.
    assert hosted_kinds(topo, "b1-each") == ["each", "aggregate"]
    assert hosted_kinds(topo, "b2-persist") == ["partition", "persist"]


class CountR(ReducerAggregator):
    def init(self):
        return 0

    def reduce(self, curr, t):
        return curr + 1


def test_a_reducer_persist_gets_every_tuple_and_a_reused_grouping_keeps_its_repartition():
    t = TridentTopology()
    words = t.new_stream("lines", lines()).each(["line"], Split(), ["word"])
    grouped = words.group_by(["word"])
    grouped.aggregate(Count(), ["n"])  # a second reader of the group_by's repartition
    combined = grouped.persistent_aggregate(MemoryMapState.transactional("a"), Count(), ["c"])
    reduced = words.group_by(["word"]).persistent_aggregate(
        MemoryMapState.transactional("b"), CountR(), ["c"])
    t.build()
    assert reduced.node.parents[0].kind == "partition"  # no partial step: Storm reduces whole
    assert reduced.node.parents[0].parents[0] is words.node
    assert partial_of(combined).parents[0] is words.node
    assert grouped.stream.node in t.nodes  # still read by the grouped aggregate
    lone = TridentTopology()
    w = lone.new_stream("lines", lines()).each(["line"], Split(), ["word"])
    g = w.group_by(["word"])
    g.persistent_aggregate(MemoryMapState.transactional("c"), Count(), ["c"])
    # Its repartition went unused: no component for it.
    assert batch_components(lone.build()) == ["b1-each", "b2-persist"]
    g.aggregate(Count(), ["n"])  # read after all: it is built again
    topo = lone.build()
    assert batch_components(topo) == ["b1-each", "b2-aggregate", "b3-persist"]
    assert hosted_kinds(topo, "b2-aggregate") == ["partition", "aggregate"]


def test_a_global_combiner_persist_is_not_folded_before_its_repartition():
    t = TridentTopology()
    words = t.new_stream("lines", lines()).each(["line"], Split(), ["word"])
    total = words.persistent_aggregate(MemoryMapState.transactional("n"), Count(), ["n"])
    assert total.node.parents[0].kind == "partition"
    assert total.node.parents[0].parents[0] is words.node


def test_word_count_wiring():
    t, stream, words, counts = word_count()
    topo = t.build()
    s_lines, s_words = f"s{stream.node.id}", f"s{partial_of(counts).id}"
    master, coord = "$mastercoord-bg0", "$spoutcoord-spout-lines"

    assert inputs(topo, coord) == {(master, "$batch"): ("global", []),
                                   (master, "$success"): ("global", [])}
    # TransactionalLineFiles is no committer: its executor gets no $commit.
    assert inputs(topo, "spout-lines") == {(coord, "$batch"): ("all", []),
                                           (master, "$success"): ("all", [])}
    assert inputs(topo, "b1-each") == {("spout-lines", s_lines): ("local_or_shuffle", []),
                                       ("spout-lines", "$coord-bg0"): ("direct", [])}
    assert inputs(topo, "b2-persist") == {("b1-each", s_words): ("fields", ["word"]),
                                          ("b1-each", "$coord-bg0"): ("direct", []),
                                          (master, "$commit"): ("all", [])}
    assert [c.id for c, _ in topo.subscribers(master, "$commit")] == ["b2-persist"]


def test_word_count_streams_carry_the_batch_id_then_the_fields():
    t, stream, words, counts = word_count()
    topo = t.build()
    spout, each = topo.components["spout-lines"], topo.components["b1-each"]
    assert spout.streams[f"s{stream.node.id}"].fields == ["$tx", "line"]
    # What crosses to the persist is one [word, partial count] per word and split task.
    assert each.streams[f"s{partial_of(counts).id}"].fields == ["$tx", "word", "count"]
    assert (each.streams["$coord-bg0"].fields, each.streams["$coord-bg0"].direct) == \
        (["$tx", "count"], True)
    # Nothing reads the counts' new values, so the persist component sends only reports.
    assert list(topo.components["b2-persist"].streams) == ["$coord-bg0"]


def test_a_committer_spout_executor_also_receives_commit():
    topo = word_count(OpaqueLineFiles(["lines.txt"]))[0].build()
    assert sorted(c.id for c, _ in topo.subscribers("$mastercoord-bg0", "$commit")) == \
        ["b2-persist", "spout-lines"]
    assert inputs(topo, "spout-lines")[("$mastercoord-bg0", "$commit")] == ("all", [])


def test_parallelism_hint_applies_to_its_component_and_coordinators_stay_single():
    t = TridentTopology()
    stream = t.new_stream("lines", lines()).parallelism_hint(2)
    words = stream.each(["line"], Split(), ["word"]).parallelism_hint(4) \
        .each(["word"], Long())  # after the hint, same component: still 4 tasks
    words.group_by(["word"]).persistent_aggregate(
        MemoryMapState.transactional("wc"), Count(), ["count"]).parallelism_hint(3)
    topo = t.build()
    assert {c.id: c.parallelism for c in topo.components.values()} == {
        "$mastercoord-bg0": 1, "$spoutcoord-spout-lines": 1, "spout-lines": 2,
        "b1-each": 4, "b2-persist": 3}


def test_chains_of_operations_stay_in_one_component_until_a_repartition():
    t = TridentTopology()
    letters = (t.new_stream("lines", lines())
               .each(["line"], Split(), ["word"]).filter(Long(), ["word"]).project(["word"])
               .map(Upper()).flat_map(Letters(), ["letter"]))
    letters.shuffle().each(["letter"], Long())
    topo = t.build()
    assert batch_components(topo) == ["b1-each", "b2-filter"]
    assert hosted_kinds(topo, "b1-each") == ["each", "filter", "project", "map", "flat_map"]
    assert hosted_kinds(topo, "b2-filter") == ["partition", "filter"]
    assert inputs(topo, "b2-filter")[("b1-each", f"s{letters.node.id}")] == ("shuffle", [])


def test_a_global_aggregate_meets_in_one_task():
    t = TridentTopology()
    words = t.new_stream("lines", lines()).each(["line"], Split(), ["word"])
    words.aggregate(Count(), ["n"])
    topo = t.build()
    assert inputs(topo, "b2-aggregate")[("b1-each", f"s{words.node.id}")] == ("global", [])


def test_new_values_of_a_state_leave_its_component_on_their_own_stream():
    t, _, _, counts = word_count()
    counts.new_values_stream().shuffle().each(["count"], Long())
    topo = t.build()
    persist = counts.node.id
    assert topo.components["b2-persist"].streams[f"s{persist}"].fields == \
        ["$tx", "word", "count"]
    assert inputs(topo, "b3-filter")[("b2-persist", f"s{persist}")] == ("shuffle", [])
    assert inputs(topo, "b3-filter")[("b2-persist", "$coord-bg0")] == ("direct", [])


# --- batch groups -----------------------------------------------------------------------

def test_merged_spouts_share_one_master_coordinator():
    t = TridentTopology()
    a = t.new_stream("a", lines("a.txt"))
    b = t.new_stream("b", lines("b.txt"))
    t.merge(a, b).each(["line"], Split(), ["word"])
    topo = t.build()
    assert [c.id for c in topo.spouts()] == ["$mastercoord-bg0"]
    assert set(topo.components["$mastercoord-bg0"].instantiate().spouts) == {"a", "b"}
    for txid in ("a", "b"):
        assert ("$mastercoord-bg0", "$batch") in inputs(topo, f"$spoutcoord-spout-{txid}")
    merged = batch_components(topo)
    assert merged == ["b2-each"]
    assert inputs(topo, "b2-each") == {
        ("spout-a", f"s{a.node.id}"): ("local_or_shuffle", []),
        ("spout-b", f"s{b.node.id}"): ("local_or_shuffle", []),
        ("spout-a", "$coord-bg0"): ("direct", []),
        ("spout-b", "$coord-bg0"): ("direct", [])}
    assert topo.components["b2-each"].instantiate().upstream == ["spout-a", "spout-b"]


def test_independent_spouts_get_a_master_coordinator_each():
    t = TridentTopology()
    t.new_stream("a", lines("a.txt")).each(["line"], Split(), ["word"])
    t.new_stream("b", lines("b.txt")).each(["line"], Split(), ["word"])
    topo = t.build()
    assert sorted(c.id for c in topo.spouts()) == ["$mastercoord-bg0", "$mastercoord-bg1"]
    assert ("$mastercoord-bg0", "$batch") in inputs(topo, "$spoutcoord-spout-a")
    assert ("$mastercoord-bg1", "$batch") in inputs(topo, "$spoutcoord-spout-b")
    assert ("spout-b", "$coord-bg1") in inputs(topo, "b3-each")
    assert "$coord-bg1" in topo.components["spout-b"].streams


# --- state queries ------------------------------------------------------------------------

def test_a_state_query_runs_in_a_component_fed_by_its_own_stream():
    t, _, _, counts = word_count()
    q = t.new_stream("q", lines("q.txt", fields=["word"]))
    q.state_query(counts, ["word"], MapGet(), ["count"])
    topo = t.build()
    assert batch_components(topo) == ["b1-each", "b2-persist", "b4-query"]
    assert inputs(topo, "b4-query") == {("spout-q", f"s{q.node.id}"): ("local_or_shuffle", []),
                                        ("spout-q", "$coord-bg1"): ("direct", [])}
    bolt = topo.components["b4-query"].instantiate()
    assert not bolt.committer
    (query,) = bolt.hosted.nodes
    assert query.kind == "query" and query.fields == ["word", "count"]
    assert query.state.state == MemoryMapState.transactional("wc")


# --- the built topology is a valid, shippable Squall topology ----------------------------

def test_the_built_topology_validates_and_round_trips_through_protobuf():
    t, _, _, counts = word_count(OpaqueLineFiles(["lines.txt"]))
    t.new_stream("q", lines("q.txt", fields=["word"])).state_query(
        counts, ["word"], MapGet(), ["count"])
    topo = t.build()
    validate(topo)

    back = from_bytes(to_bytes(topo))
    assert back.components == topo.components
    validate(back)

    persist = back.components["b2-persist"].instantiate()
    assert (persist.batch_group, persist.upstream, persist.committer) == \
        ("bg0", ["b1-each"], True)
    assert persist.hosted.nodes[-1].state == MemoryMapState.transactional("wc")
    master = back.components["$mastercoord-bg0"].instantiate()
    assert isinstance(master.spouts["lines"].spout, OpaqueLineFiles)
    assert back.components["spout-lines"].conf["topology.tick.tuple.freq.secs"] > 0


def test_aggregators_of_every_shape_compile():
    t = TridentTopology()
    words = t.new_stream("lines", lines()).each(["line"], Split(), ["word"])
    grouped = words.group_by(["word"])
    grouped.aggregate(Longest(), ["longest"], ["word"])
    grouped.aggregate(Collect(), ["all"], ["line"])
    words.map(Upper(), ["upper"]).aggregate(Sum(), ["n"])
    validate(from_bytes(to_bytes(t.build())))


def test_a_global_partition_runs_in_one_task_whatever_the_hint():
    t = TridentTopology()
    t.new_stream("lines", lines()).aggregate(Count(), ["n"]).parallelism_hint(4)
    (agg,) = [c for c in t.build().components.values() if c.id.endswith("-aggregate")]
    assert agg.parallelism == 1


class Configured(TransactionalLineFiles):
    def component_configuration(self):
        return {"topology.max.task.parallelism": 3}


def test_a_spouts_component_configuration_reaches_its_executor():
    t = TridentTopology()
    t.new_stream("lines", Configured(["x.txt"]))
    assert t.build().components["spout-lines"].conf["topology.max.task.parallelism"] == 3
