"""Trident operations: tuples by field name, and the three aggregator shapes as one."""

import pytest

from squall.client.trident.operation import (Aggregator, CombinerAggregator, Count, Filter,
                                             ReducerAggregator, Sum, TridentTuple, as_aggregator)


class Out:
    def __init__(self):
        self.emitted = []

    def emit(self, values):
        self.emitted.append(list(values))


def tuples(*values):
    return [TridentTuple([v], ["n"]) for v in values]


def run(agg, ts):
    a, out = as_aggregator(agg), Out()
    state = a.init("batch-1", out)
    for t in ts:
        state = a.aggregate(state, t, out)
    a.complete(state, out)
    return out.emitted


def test_tuple_by_index_field_and_selection():
    t = TridentTuple(["cow", 3], ["word", "count"])
    assert (t[0], t["count"], len(t), t.select(["count", "word"])) == ("cow", 3, 2, [3, "cow"])


def test_count_and_sum_combine_from_zero():
    assert run(Count(), tuples(5, 6, 7)) == [[3]]
    assert run(Sum(), tuples(5, 6, 7)) == [[18]]
    assert run(Count(), []) == [[0]]


def test_a_reducer_folds_from_init():
    class Longest(ReducerAggregator):
        def init(self):
            return ""

        def reduce(self, curr, t):
            return max(curr, t[0], key=len)

    assert run(Longest(), tuples("a", "ccc", "bb")) == [["ccc"]]


def test_a_general_aggregator_passes_through_and_others_are_refused():
    class Pairs(Aggregator):
        def init(self, batch_id, collector):
            return []

        def aggregate(self, state, t, collector):
            return state + [t[0]]

        def complete(self, state, collector):
            for a, b in zip(state, state[1:]):
                collector.emit([a, b])

    assert run(Pairs(), tuples(1, 2, 3)) == [[1, 2], [2, 3]]
    assert isinstance(Count(), CombinerAggregator)
    with pytest.raises(TypeError, match="KeepAll is not a CombinerAggregator"):
        as_aggregator(type("KeepAll", (Filter,), {})())
