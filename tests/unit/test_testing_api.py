"""squall.testing as a user's pytest uses it: complete_topology with mocked sources, simulated
time for ticks, windows and timeouts, the in-process LocalCluster; no ZooKeeper, no network."""

from __future__ import annotations

import time

import pytest

from squall.client import BasicBolt, Bolt, Spout, TopologyBuilder
from squall.client.errors import InvalidTopology
from squall.client.windowing import Count, Duration, WindowedBolt
from squall.testing import LocalCluster, TopologyNotComplete, complete_topology


class Sentences(Spout):
    def open(self, conf, context, collector):
        self.collector = collector

    def next_tuple(self):
        raise AssertionError("mocked: never called")

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])


class Split(BasicBolt):
    def execute(self, tup, collector):
        for w in tup["sentence"].split():
            collector.emit([w])

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class Count_(Bolt):
    def prepare(self, conf, context, collector):
        self.collector, self.counts = collector, {}

    def execute(self, tup):
        w = tup["word"]
        self.counts[w] = self.counts.get(w, 0) + 1
        self.collector.emit([w, self.counts[w]], anchors=[tup])
        self.collector.ack(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])


def word_count():
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences(), 2)  # mocked tuples are dealt over both tasks
    b.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", Count_(), 3).fields_grouping("split", ["word"])
    return b


def test_complete_topology_runs_mocked_sentences_through_every_bolt():
    result = complete_topology(word_count(), mocked_sources={
        "sentences": [["the cow jumped"], ("the moon",)]})
    assert sorted(result.tuples("sentences")) == [["the cow jumped"], ["the moon"]]
    assert sorted(result.tuples("split")) == [["cow"], ["jumped"], ["moon"], ["the"], ["the"]]
    assert sorted(result.tuples("count")) == [["cow", 1], ["jumped", 1], ["moon", 1],
                                              ["the", 1], ["the", 2]]
    assert sorted(result.acked("sentences")) == [0, 1] and result.failed("sentences") == []
    assert result.errors == []


class NeverAcks(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        pass


class Recorder(Spout):
    """An unmocked finite spout that records its acks and fails."""

    def __init__(self, n):
        self.n = n

    def open(self, conf, context, collector):
        self.collector, self.i, self.acks, self.fails = collector, 0, [], []

    def next_tuple(self):
        if self.i < self.n:
            self.collector.emit([self.i], msg_id=self.i)
            self.i += 1

    def ack(self, msg_id):
        self.acks.append(msg_id)

    def fail(self, msg_id):
        self.fails.append(msg_id)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


def test_trees_a_bolt_never_acks_time_out_on_simulated_time():
    b = TopologyBuilder()
    b.set_spout("numbers", Recorder(3))
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("numbers")
    t0 = time.monotonic()
    result = complete_topology(b, conf={"topology.message.timeout.secs": 30})
    assert time.monotonic() - t0 < 5  # 30 simulated seconds, not real ones
    assert sorted(result.failed("numbers")) == [0, 1, 2] and result.acked("numbers") == []
    assert 30 <= result.secs < 31


def test_a_topology_that_cannot_complete_says_what_is_pending():
    b = TopologyBuilder()
    b.set_spout("numbers", Recorder(2))
    b.set_bolt("sink", NeverAcks()).shuffle_grouping("numbers")
    with pytest.raises(TopologyNotComplete, match=r"2 tree\(s\) of numbers still pending"):
        complete_topology(b, conf={"topology.enable.message.timeouts": False}, max_secs=60)


class TickCounter(Bolt):
    """Counts words; on each tick emits the counts so far (a tick-driven report)."""

    def prepare(self, conf, context, collector):
        self.collector, self.counts = collector, {}

    def execute(self, tup):
        if tup.is_tick:
            for w, n in sorted(self.counts.items()):
                self.collector.emit([w, n])
            return
        self.counts[tup["word"]] = self.counts.get(tup["word"], 0) + 1
        self.collector.ack(tup)

    def get_component_configuration(self):
        return {"topology.tick.tuple.freq.secs": 10}

    def declare_output_fields(self, declarer):
        declarer.declare(["word", "count"])


def test_local_cluster_ticks_on_simulated_time():
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences())
    b.set_bolt("split", Split()).shuffle_grouping("sentences")
    b.set_bolt("report", TickCounter()).global_grouping("split")
    with LocalCluster() as cluster:
        cluster.submit_topology("wc", {}, b, mocked_sources={"sentences": [["a b a"]]})
        cluster.advance_time(9.5)
        assert cluster.tuples("wc", "report") == []  # the first tick is at 10 s
        cluster.advance_time(1)
        assert cluster.tuples("wc", "report") == [["a", 2], ["b", 1]]
        cluster.advance_time(20)  # two more ticks
        assert len(cluster.tuples("wc", "report")) == 6
        done = cluster.kill_topology("wc")
    assert done.acked("sentences") == [0]


class Readings(Spout):
    def next_tuple(self):
        raise AssertionError("mocked")

    def declare_output_fields(self, declarer):
        declarer.declare(["ts", "value"])


class Average(WindowedBolt):
    def execute(self, window):
        values = [t["value"] for t in window.get()]
        self.collector.emit([window.end_timestamp, sum(values) / len(values)])

    def declare_output_fields(self, declarer):
        declarer.declare(["end", "avg"])


def test_event_time_windows_close_on_the_watermark_in_simulated_time():
    base = 1_795_000_000_000  # ms
    b = TopologyBuilder()
    b.set_spout("readings", Readings())
    b.set_bolt("avg", Average().with_window(Duration.seconds(10))
               .with_timestamp_field("ts").with_watermark_interval(Duration.seconds(1))
               ).shuffle_grouping("readings")
    data = [[base + 1000 * i, float(i)] for i in range(25)]
    result = complete_topology(b, mocked_sources={"readings": data})
    # Tumbling 10 s windows ending at multiples of 10 s, each holding e - 10 s < ts <= e,
    # closed as the watermark (the newest timestamp) passes their end: (..0], (0..10],
    # (10..20]. The window of 21..24 never closes: those trees time out (30 s, simulated).
    avgs = result.tuples("avg")
    assert avgs == [[base, 0.0], [base + 10_000, 5.5], [base + 20_000, 15.5]], avgs
    assert sorted(result.acked("readings")) == list(range(21))
    assert sorted(result.failed("readings")) == [21, 22, 23, 24]


def test_count_windows_and_the_refusals():
    class Sum(WindowedBolt):
        def execute(self, window):
            self.collector.emit([sum(t["n"] for t in window.get())])

        def declare_output_fields(self, declarer):
            declarer.declare(["sum"])
    b = TopologyBuilder()
    b.set_spout("numbers", Recorder(9))
    b.set_bolt("sum", Sum().with_window(Count(3))).shuffle_grouping("numbers")
    assert complete_topology(b).tuples("sum") == [[3], [12], [21]]
    with pytest.raises(InvalidTopology, match="mocked source 'nope' is not a spout"):
        complete_topology(word_count(), mocked_sources={"nope": []})
    with pytest.raises(InvalidTopology, match=r"\['a', 'b'\] is not a list of 1 values"):
        complete_topology(word_count(), mocked_sources={"sentences": [["a", "b"]]})


def test_a_value_no_worker_could_receive_fails_the_test_at_the_emit():
    class Tags(BasicBolt):
        def execute(self, tup, collector):
            collector.emit([{1, 2}])

        def declare_output_fields(self, declarer):
            declarer.declare(["tags"])
    b = TopologyBuilder()
    b.set_spout("sentences", Sentences())
    b.set_bolt("tags", Tags()).shuffle_grouping("sentences")
    with pytest.raises(InvalidTopology, match="field 'tags' holds a builtins.set"):
        complete_topology(b, mocked_sources={"sentences": [["x"]]})


class Positional(Spout):
    """Storm's spout signature, positionally: emit(values, stream, msg_id)."""

    def open(self, conf, context, collector):
        self.collector, self.i, self.active = collector, 0, True

    def next_tuple(self):
        if self.i < 3:
            self.collector.emit([self.i], "default", self.i)
            self.i += 1

    def deactivate(self):
        self.active = False

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class Sink(Bolt):
    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup):
        self.collector.ack(tup)


def test_a_spouts_positional_message_id_is_tracked_and_deactivation_reaches_it():
    b = TopologyBuilder()
    b.set_spout("numbers", Positional())
    b.set_bolt("sink", Sink()).shuffle_grouping("numbers")
    assert sorted(complete_topology(b).acked("numbers")) == [0, 1, 2]
    with LocalCluster() as cluster:
        cluster.submit_topology("n", {}, b)
        spout = cluster.engines["n"].tasks[1].obj
        cluster.deactivate("n")
        cluster.advance_time(1)
        assert spout.active is False and spout.i == 0  # next_tuple not called meanwhile
        cluster.activate("n")
        cluster.advance_time(1)
        assert cluster.result("n").acked("numbers") == [0, 1, 2]
