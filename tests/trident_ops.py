"""Trident operations and state helpers shared by the Trident tests."""

from squall.client.trident.operation import (FlatMapFunction, Filter, Function, MapFunction,
                                             ReducerAggregator)


class Split(Function):
    def execute(self, t, collector):
        for word in t[0].split():
            collector.emit([word])


class Long(Filter):
    def is_keep(self, t):
        return len(t[0]) > 2


class Upper(MapFunction):
    def execute(self, t):
        return [t[0].upper()]


class Letters(FlatMapFunction):
    def execute(self, t):
        return [[c] for c in t[0]]


class Longest(ReducerAggregator):
    def init(self):
        return ""

    def reduce(self, curr, t):
        return max(curr, t[0], key=len)


def add(n):
    """A map state updater adding ``n``."""
    return lambda old: (old or 0) + n


def batch(state, txid, keys, amounts):
    """One Trident batch: begin_commit, one multi_update, commit; returns the new values."""
    state.begin_commit(txid)
    out = state.multi_update(keys, [add(n) for n in amounts])
    state.commit(txid)
    return out
