"""The word count with an exactly-once file sink at its end (bench/files.py; workers import
this module by name).

spout (rewinding, bench.py's sentences) -> split -> a stateful count that emits each
word's new count -> :class:`~squall.connectors.files.FileSinkBolt` writing ``word,count``
lines. The sink runs under the component id bench.py measures (``count``), so the run's
throughput is words written to the files; the counting bolt is ``counter``.
"""

from __future__ import annotations

try:
    from squall.bench import topologies as topo
except ImportError:  # squall installed without bench/: imported by path
    import topologies as topo  # type: ignore[no-redef]

from squall.client import TopologyBuilder
from squall.client.stateful import StatefulBolt

COUNTER = "counter"


class StatefulCountEmit(StatefulBolt):
    """Counts words in its KeyValueState and emits [word, count] for each."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def init_state(self, state):
        self.get = state.get
        self.put = state.put

    def execute(self, tup):
        w = tup.values[0]
        c = self.get(w, 0) + 1
        self.put(w, c)
        self.collector.emit([w, c], anchors=[tup])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])


def file_word_count(out_dir: str, rotate_mb: float = 64.0, counting: bool = True,
                    own_thread: bool | None = None):
    """``counting``: split -> a stateful count -> the sink (``word,count`` per word);
    otherwise split -> the sink (``word`` per word), the sink in the count bolt's place."""
    def build(parallelism: int = 2) -> TopologyBuilder:
        from squall.connectors.files import (AnyRotationPolicy, DelimitedRecordFormat,
                                             FileSinkBolt, FileSizeRotationPolicy,
                                             TimedRotationPolicy, Units)
        b = TopologyBuilder()
        b.set_spout(topo.SPOUT, topo.BenchCheckpointedSpout(), parallelism)
        b.set_bolt(topo.SPLIT, topo.SplitSentence(), parallelism).shuffle_grouping(topo.SPOUT)
        fields = ["word", "count"] if counting else ["word"]
        sink = FileSinkBolt(out_dir, record_format=DelimitedRecordFormat(fields),
                            rotation_policy=AnyRotationPolicy(
                                FileSizeRotationPolicy(rotate_mb, Units.MB),
                                TimedRotationPolicy(30)), own_thread=own_thread)
        if counting:
            b.set_bolt(COUNTER, StatefulCountEmit(), parallelism).fields_grouping(
                topo.SPLIT, ["word"])
            b.set_bolt(topo.COUNT, sink, parallelism).fields_grouping(COUNTER, ["word"])
        else:
            b.set_bolt(topo.COUNT, sink, parallelism).fields_grouping(topo.SPLIT, ["word"])
        return b
    return build
