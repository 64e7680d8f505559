"""TopologyBuilder validation: each bad topology is refused naming what is wrong."""

import threading

import pytest

from squall.client import config as cfg
from squall.client.components import BasicBolt, Bolt, Spout
from squall.client.errors import InvalidTopology
from squall.client.topology import (BOLT, TopologyBuilder, assign_task_ids, executors_of,
                                    system_topology)

DEFAULT_STREAMS = {"default": (["word", "n"], False), "direct": (["word"], True)}


class Src(Spout):
    def __init__(self, streams=None):
        self.streams = DEFAULT_STREAMS if streams is None else streams

    def next_tuple(self):
        pass

    def declare_output_fields(self, declarer):
        for name, (fields, direct) in self.streams.items():
            declarer.declare_stream(name, fields, direct=direct)


class Sink(Bolt):
    def execute(self, tup):
        pass


class Split(BasicBolt):
    def execute(self, tup, collector):
        pass

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])

    def get_component_configuration(self):
        return {"topology.debug": True, "my.key": "from-class"}


class Locked(Bolt):
    def __init__(self):
        self.lock = threading.Lock()

    def execute(self, tup):
        pass


def builder_with_source():
    b = TopologyBuilder()
    b.set_spout("words", Src())
    return b


def refused(builder):
    with pytest.raises(InvalidTopology) as info:
        builder.create_topology()
    return info.value


# --- rejections -------------------------------------------------------------

def test_duplicate_component_id():
    b = builder_with_source()
    with pytest.raises(InvalidTopology) as info:
        b.set_bolt("words", Sink()).shuffle_grouping("words")
    assert info.value.component == "words"
    assert "duplicate" in str(info.value) and "'words'" in str(info.value)


def test_subscription_to_unknown_component():
    b = builder_with_source()
    b.set_bolt("count", Sink()).shuffle_grouping("wrods")
    err = refused(b)
    assert (err.component, err.stream) == ("count", "default")
    assert "'count'" in str(err) and "no component 'wrods'" in str(err)
    assert "words" in str(err)  # lists the components that exist


def test_subscription_to_unknown_stream():
    b = builder_with_source()
    b.set_bolt("count", Sink()).shuffle_grouping("words", stream="sentences")
    err = refused(b)
    assert (err.component, err.stream) == ("count", "sentences")
    assert "'count'" in str(err) and "no stream 'sentences'" in str(err)
    assert "default" in str(err)  # lists the streams that exist


def test_subscription_to_a_components_system_stream_is_accepted_as_in_storm():
    b = builder_with_source()
    b.set_bolt("split", Split()).shuffle_grouping("words")
    b.set_bolt("watch", Sink()).shuffle_grouping("words", "__system") \
        .fields_grouping("split", ["event"], "__system")
    assert "watch" in b.create_topology().components
    b.set_bolt("bad", Sink()).fields_grouping("words", ["word"], "__system")
    err = refused(b)
    assert "field 'word'" in str(err) and "['event']" in str(err)


def test_a_user_stream_id_starting_with_two_underscores_is_refused():
    b = TopologyBuilder()
    b.set_spout("words", Src({"__mine": (["word"], False)}))
    err = refused(b)
    assert err.stream == "__mine" and "belong to the system" in str(err)


@pytest.mark.parametrize("method", ["fields_grouping", "partial_key_grouping"])
def test_key_grouping_on_undeclared_field(method):
    b = builder_with_source()
    getattr(b.set_bolt("count", Sink()), method)("words", ["word", "wrod"])
    err = refused(b)
    assert (err.component, err.stream, err.field) == ("count", "default", "wrod")
    assert "'count'" in str(err) and "'default'" in str(err) and "'wrod'" in str(err)


def test_fields_grouping_on_no_field():
    b = builder_with_source()
    b.set_bolt("count", Sink()).fields_grouping("words", [])
    err = refused(b)
    assert (err.component, err.stream) == ("count", "default")
    assert "no field" in str(err)


def test_direct_grouping_on_non_direct_stream():
    b = builder_with_source()
    b.set_bolt("count", Sink()).direct_grouping("words")
    err = refused(b)
    assert (err.component, err.stream) == ("count", "default")
    assert "'count'" in str(err) and "not direct" in str(err)


def test_non_direct_grouping_on_direct_stream():
    b = builder_with_source()
    b.set_bolt("count", Sink()).shuffle_grouping("words", stream="direct")
    err = refused(b)
    assert (err.component, err.stream) == ("count", "direct")
    assert "'count'" in str(err) and "direct_grouping()" in str(err)


@pytest.mark.parametrize("parallelism", [0, -2])
def test_bolt_parallelism_must_be_positive(parallelism):
    b = builder_with_source()
    b.set_bolt("count", Sink(), parallelism).shuffle_grouping("words")
    err = refused(b)
    assert err.component == "count"
    assert "parallelism" in str(err) and str(parallelism) in str(err)


@pytest.mark.parametrize("parallelism", [0, -1])
def test_spout_parallelism_must_be_positive(parallelism):
    b = TopologyBuilder()
    b.set_spout("words", Src(), parallelism)
    err = refused(b)
    assert err.component == "words" and "parallelism" in str(err)


def test_zero_tasks_refused():
    b = builder_with_source()
    b.set_bolt("count", Sink()).shuffle_grouping("words").set_num_tasks(0)
    err = refused(b)
    assert err.component == "count" and "number of tasks" in str(err)


@pytest.mark.parametrize("kind", ["spout", "bolt"])
def test_reserved_component_id(kind):
    b = builder_with_source()
    with pytest.raises(InvalidTopology) as info:
        if kind == "spout":
            b.set_spout("__mine", Src())
        else:
            b.set_bolt("__mine", Sink())
    assert info.value.component == "__mine"
    assert "reserved" in str(info.value) and "'__mine'" in str(info.value)


def test_bolt_without_inputs():
    b = builder_with_source()
    b.set_bolt("count", Sink())
    err = refused(b)
    assert err.component == "count" and "subscribes to no stream" in str(err)


def test_spout_without_streams():
    b = TopologyBuilder()
    b.set_spout("words", Src(streams={}))
    err = refused(b)
    assert err.component == "words" and "declares no output stream" in str(err)


def test_topology_without_spout():
    b = TopologyBuilder()
    b.set_bolt("count", Sink(), 1).add_configuration(cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 1)
    err = refused(b)
    assert "no spout" in str(err)


def test_field_declared_twice():
    b = TopologyBuilder()
    b.set_spout("words", Src(streams={"default": (["w", "w"], False)}))
    err = refused(b)
    assert (err.component, err.stream) == ("words", "default")
    assert "twice" in str(err)


def test_unpicklable_component():
    b = builder_with_source()
    b.set_bolt("count", Locked()).shuffle_grouping("words")
    err = refused(b)
    assert err.component == "count"
    assert "'count'" in str(err) and "cannot be serialized" in str(err)


@pytest.mark.parametrize("key, value", [(cfg.TOPOLOGY_MAX_SPOUT_PENDING, "x"),
                                        (cfg.TOPOLOGY_MAX_SPOUT_PENDING, True),
                                        (cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, "30")])
def test_bad_component_conf_value(key, value):
    b = TopologyBuilder()
    b.set_spout("words", Src()).add_configuration(key, value)
    err = refused(b)
    assert err.component == "words"
    assert "'words'" in str(err) and key in str(err)


def test_custom_grouping_without_methods():
    b = builder_with_source()
    b.set_bolt("count", Sink()).custom_grouping("words", object())
    err = refused(b)
    assert (err.component, err.stream) == ("count", "default")
    assert "custom grouping" in str(err)


def test_component_conf_that_json_cannot_carry_is_refused_at_build_time():
    b = TopologyBuilder()
    b.set_spout("words", Src()).add_configuration("my.ids", {1, 2})
    err = refused(b)
    assert err.component == "words" and "my.ids" in str(err)


# --- valid topologies ---------------------------------------------------------

def word_count():
    b = TopologyBuilder()
    b.set_spout("words", Src(), 2)
    b.set_bolt("split", Split(), 3).shuffle_grouping("words").set_num_tasks(6) \
        .add_configuration("my.key", "from-declarer")
    b.set_bolt("count", Sink(), 2).fields_grouping("split", ["word"]) \
        .direct_grouping("words", stream="direct")
    return b.create_topology()


def test_valid_topology_builds():
    topo = word_count()
    assert list(topo.components) == ["words", "split", "count"]
    assert [c.id for c in topo.spouts()] == ["words"]
    assert [c.id for c in topo.bolts()] == ["split", "count"]
    split = topo.components["split"]
    assert (split.parallelism, split.num_tasks, split.task_count) == (3, 6, 6)
    assert split.streams["default"].fields == ["word"]
    # Declarer conf wins over the class's get_component_configuration().
    assert split.conf == {"topology.debug": True, "my.key": "from-declarer"}
    count = topo.components["count"]
    assert [(i.component, i.stream, i.grouping.kind) for i in count.inputs] == \
        [("split", "default", "fields"), ("words", "direct", "direct")]
    assert [c.id for c, _ in topo.subscribers("words", "direct")] == ["count"]
    assert isinstance(split.instantiate(), Split)


def test_bolt_with_only_tick_tuples_needs_no_input():
    b = builder_with_source()
    b.set_bolt("timer", Sink()).add_configuration(cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS, 5)
    assert "timer" in b.create_topology().components


def test_system_topology_adds_one_acker_per_worker_by_default():
    topo = word_count()
    conf = cfg.layered({cfg.TOPOLOGY_WORKERS: 3})
    assert conf[cfg.TOPOLOGY_ACKER_EXECUTORS] is None
    sys_topo = system_topology(topo, conf)
    acker = sys_topo.components["__acker"]
    assert acker.kind == BOLT and acker.system
    assert acker.parallelism == 3
    subs = {(i.component, i.stream) for i in acker.inputs}
    assert ("words", "__ack_init") in subs
    assert {("split", "__ack_ack"), ("split", "__ack_fail"),
            ("split", "__ack_reset_timeout")} <= subs
    assert all(sd.direct for s, sd in acker.streams.items() if s.startswith("__ack"))
    # Every component, the acker included, has Storm's __system stream.
    assert all(c.streams["__system"].fields == ["event"] for c in sys_topo.components.values())
    assert "__acker" not in topo.components  # the user's topology is untouched


def test_system_topology_acker_executors_setting():
    topo = word_count()
    assert system_topology(topo, {cfg.TOPOLOGY_WORKERS: 3, cfg.TOPOLOGY_ACKER_EXECUTORS: 2}) \
        .components["__acker"].parallelism == 2
    none = system_topology(topo, {cfg.TOPOLOGY_WORKERS: 3, cfg.TOPOLOGY_ACKER_EXECUTORS: 0})
    assert "__acker" not in none.components
    assert set(none.components) == set(topo.components) | {"__topology_master"}
    bare = system_topology(topo, {cfg.TOPOLOGY_ACKER_EXECUTORS: 0,
                                  "topology.master.enable": False})
    assert set(bare.components) == set(topo.components)
    master = none.components["__topology_master"]
    assert master.system and master.task_count == 1
    # every component reports to the master on its __tm stream
    assert all("__tm" in c.streams for c in none.components.values())


def test_assign_task_ids_sorted_from_one_honouring_num_tasks():
    topo = word_count()
    assert assign_task_ids(topo) == {
        "count": [1, 2],
        "split": [3, 4, 5, 6, 7, 8],
        "words": [9, 10],
    }
    ids = assign_task_ids(system_topology(topo, {cfg.TOPOLOGY_WORKERS: 2}))
    assert ids["__acker"] == [1, 2]  # '_' sorts before lower-case letters
    assert ids["__topology_master"] == [3]
    assert ids["words"] == [12, 13]


def dict_of_lists(pairs):
    out = {}
    for k, v in pairs:
        out.setdefault(k, []).append(v)
    return out


def test_executors_of_splits_tasks_over_executors():
    topo = word_count()
    ids = assign_task_ids(topo)
    by_comp = dict_of_lists(executors_of(topo, ids))
    assert by_comp["count"] == [[1], [2]]
    assert by_comp["words"] == [[9], [10]]
    split = by_comp["split"]
    assert len(split) == 3
    assert sum(split, []) == ids["split"]  # every task once, in order
    assert [len(t) for t in split] == [2, 2, 2]


def test_executors_of_uneven_and_more_executors_than_tasks():
    b = builder_with_source()
    b.set_bolt("a", Sink(), 2).shuffle_grouping("words").set_num_tasks(5)
    b.set_bolt("b", Sink(), 4).shuffle_grouping("words").set_num_tasks(2)
    topo = b.create_topology()
    ids = assign_task_ids(topo)
    execs = dict_of_lists(executors_of(topo, ids))
    assert sum(execs["a"], []) == ids["a"]
    assert sorted(len(t) for t in execs["a"]) == [2, 3]
    assert execs["b"] == [[ids["b"][0]], [ids["b"][1]]]  # no executor without a task


@pytest.mark.parametrize("name, problem", [
    ("", "non-empty"), ("   ", "non-empty"), ("a/b", "'/'"), ("a.b", "'.'"), ("a:b", "':'"),
    ("a\\b", "'\\\\'"), ("a\nb", "control"), ("a\x00b", "control"), ("x" * 10_000, "128 bytes"),
    (" wc", "whitespace"), ("é" * 65, "128 bytes"),
])
def test_topology_names_storm_refuses(name, problem):
    from squall.client.topology import topology_name_problem
    assert problem in topology_name_problem(name)


@pytest.mark.parametrize("name", ["word-count", "wc_2", "é" * 64, "a b"])
def test_topology_names_accepted(name):
    from squall.client.topology import topology_name_problem
    assert topology_name_problem(name) is None


def test_component_and_stream_ids_are_bounded_and_printable():
    with pytest.raises(InvalidTopology, match="control"):
        TopologyBuilder().set_spout("s\nx", Src())
    with pytest.raises(InvalidTopology, match="128 bytes"):
        TopologyBuilder().set_spout("x" * 200, Src())


def test_component_level_topology_tasks_sets_the_task_count():
    """Storm's setNumTasks writes topology.tasks into the component's conf; a component (or
    a Flux file) that sets it there gets those tasks, over its executors (it was ignored
    with a warning that Squall does not implement the key)."""
    b = TopologyBuilder()
    b.set_spout("src", Src(), 1)
    b.set_bolt("sink", Sink(), 2).add_configuration("topology.tasks", 6).shuffle_grouping("src")
    topo = b.create_topology()
    assert topo.components["sink"].task_count == 6
    assert len(assign_task_ids(topo)["sink"]) == 6
    assert [len(ts) for c, ts in executors_of(topo, assign_task_ids(topo)) if c == "sink"] \
        == [3, 3]
    assert cfg.conf_warnings({"topology.tasks": 6}) == []
    b2 = TopologyBuilder()
    b2.set_spout("src", Src(), 1)
    b2.set_bolt("sink", Sink(), 2).add_configuration("topology.tasks", "six") \
        .shuffle_grouping("src")
    with pytest.raises(InvalidTopology):
        b2.create_topology()


def test_a_class_where_an_instance_belongs_is_named_with_the_fix():
    b = TopologyBuilder()
    with pytest.raises(InvalidTopology, match=r"spout 'src' is the class Src, not an instance "
                                              r"of it: pass Src\(...\)"):
        b.set_spout("src", Src)
    with pytest.raises(InvalidTopology, match=r"bolt 'split' is the class Split"):
        b.set_bolt("split", Split)
    with pytest.raises(InvalidTopology, match="bolt 'x' must be a squall.client.Bolt, BasicBolt, "
                                              "StatefulBolt or WindowedBolt, got int"):
        b.set_bolt("x", 3)


class PrepareLikeBolt(BasicBolt):
    """A BasicBolt whose prepare was copied from Bolt's: a TypeError in the worker before."""

    def prepare(self, conf, context, collector):
        self.collector = collector

    def execute(self, tup, collector):
        pass


class NoArgsExecute(Bolt):
    def execute(self):
        pass


class Flexible(Bolt):
    """Defaults and *args fit whatever is passed."""

    def prepare(self, *args):
        pass

    def execute(self, tup, extra=None):
        pass


def test_an_override_that_cannot_take_the_runtimes_arguments_is_refused_at_build():
    b = TopologyBuilder()
    with pytest.raises(InvalidTopology) as e:
        b.set_bolt("upper", PrepareLikeBolt())
    assert str(e.value).startswith(
        "bolt 'upper': PrepareLikeBolt.prepare(self, conf, context, collector) "
        "(test_topology_validation.py:"), str(e.value)
    assert "cannot take the 2 argument(s) Squall passes to BasicBolt.prepare(conf, context); " \
        "a BasicBolt's collector comes with each tuple, as in execute(self, tup, collector)" \
        in str(e.value)
    with pytest.raises(InvalidTopology, match=r"NoArgsExecute.execute\(self\) .* cannot take "
                                              r"the 1 argument\(s\) Squall passes to "
                                              r"Bolt.execute\(tup\)"):
        b.set_bolt("n", NoArgsExecute())
    b.set_bolt("flexible", Flexible())  # fits
    b.set_bolt("split", Split())
