"""Trident operations shared by the Trident unit tests."""

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
