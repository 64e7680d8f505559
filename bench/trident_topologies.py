"""The Trident word count the benchmark runs (importable by its worker processes)."""

from squall.client.trident.operation import Count, Function
from squall.client.trident.stream import TridentTopology


class Split(Function):
    def execute(self, tup, collector):
        for word in tup[0].split(" "):
            collector.emit([word])


def word_count(spout, state_factory, parallelism: int = 2):
    t = TridentTopology()
    (t.new_stream("lines", spout)
      .each(["line"], Split(), ["word"]).parallelism_hint(parallelism)
      .group_by(["word"])
      .persistent_aggregate(state_factory, Count(), ["count"])
      .parallelism_hint(parallelism))
    return t.build()
