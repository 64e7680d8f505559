"""Topology <-> protobuf bytes: everything a worker needs survives the round trip."""

import pickle

import pytest

from planted import Planted
from squall.client import grouping as g
from squall.client.components import Bolt, Spout
from squall.client.errors import InvalidTopology
from squall.client.topology import ComponentDef, ShellSpec, Topology, TopologyBuilder, \
    system_topology, validate
from squall.client.topology_proto import from_bytes, from_proto, to_bytes, to_proto


class Numbers(Spout):
    def __init__(self, start):
        self.start = start
        self.opened = False

    def open(self, conf, context, collector):
        self.opened = True

    def next_tuple(self):
        pass

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "parity"])
        declarer.declare_stream("errors", ["msg"])
        declarer.declare_stream("targeted", ["n"], direct=True)


class Echo(Bolt):
    def __init__(self, tag):
        self.tag = tag
        self.seen = []

    def execute(self, tup):
        self.seen.append(tup)

    def declare_output_fields(self, declarer):
        declarer.declare(["n"])


class ModGrouping(g.CustomStreamGrouping):
    def __init__(self, mod):
        self.mod = mod

    def choose_tasks(self, task_id, values):
        return [self.target_tasks[values[0] % self.mod]]

    def __eq__(self, other):
        return type(other) is ModGrouping and other.mod == self.mod


def every_grouping_topology():
    b = TopologyBuilder()
    b.set_spout("numbers", Numbers(10), 2).set_max_spout_pending(50)
    b.set_bolt("echo", Echo("e"), 3).set_num_tasks(6) \
        .shuffle_grouping("numbers") \
        .fields_grouping("numbers", ["n", "parity"], stream="default") \
        .all_grouping("numbers", stream="errors") \
        .direct_grouping("numbers", stream="targeted") \
        .add_configurations({"topology.debug": True, "my.list": [1, "two"], "my.map": {"k": 1}})
    b.set_bolt("sink", Echo("s")) \
        .global_grouping("echo") \
        .none_grouping("numbers", stream="errors") \
        .local_or_shuffle_grouping("echo") \
        .partial_key_grouping("echo", ["n"]) \
        .custom_grouping("numbers", ModGrouping(3))
    return b.create_topology()


def test_round_trip_keeps_every_component_detail():
    topo = every_grouping_topology()
    back = from_bytes(to_bytes(topo))
    assert set(back.components) == set(topo.components)
    for cid, orig in topo.components.items():
        got = back.components[cid]
        assert (got.kind, got.parallelism, got.num_tasks, got.task_count) == \
            (orig.kind, orig.parallelism, orig.num_tasks, orig.task_count), cid
        assert got.streams == orig.streams, cid
        assert got.conf == orig.conf, cid
        assert got.inputs == orig.inputs, cid  # order, sources, grouping kinds, fields, custom
        assert got.serialized == orig.serialized, cid
        assert got == orig, cid


def test_round_trip_covers_every_grouping_kind():
    back = from_bytes(to_bytes(every_grouping_topology()))
    kinds = {i.grouping.kind for c in back.components.values() for i in c.inputs}
    assert kinds == set(g.KINDS)
    sink = back.components["sink"]
    assert sink.inputs[-1].grouping.new_custom() == ModGrouping(3)
    assert back.components["numbers"].streams["targeted"].direct is True
    assert back.components["numbers"].streams["errors"].direct is False


def test_unset_num_tasks_stays_unset():
    back = from_bytes(to_bytes(every_grouping_topology()))
    assert back.components["sink"].num_tasks is None
    assert back.components["echo"].num_tasks == 6


def test_to_bytes_is_deterministic():
    topo = every_grouping_topology()
    assert to_bytes(topo) == to_bytes(from_bytes(to_bytes(topo)))


def test_instantiate_gives_fresh_working_copies():
    back = from_bytes(to_bytes(every_grouping_topology()))
    spout = back.components["numbers"].instantiate()
    assert isinstance(spout, Numbers) and spout.start == 10 and not spout.opened
    spout.open({}, None, None)
    assert spout.opened
    again = back.components["numbers"].instantiate()
    assert again is not spout and not again.opened

    echo1 = back.components["echo"].instantiate()
    echo2 = back.components["echo"].instantiate()
    echo1.execute("t")
    assert (echo1.tag, echo1.seen, echo2.seen) == ("e", ["t"], [])


def test_round_tripped_custom_grouping_routes():
    back = from_bytes(to_bytes(every_grouping_topology()))
    spec = back.components["sink"].inputs[-1].grouping
    router = g.make_router(spec, [30, 10, 20], ["n", "parity"])
    assert [router.choose([n, 0]) for n in range(4)] == [[10], [20], [30], [10]]


def test_reading_a_topology_runs_none_of_its_pickles(tmp_path):
    """Nimbus reads (and validates) any client's topology: neither a custom grouping's
    pickle nor a component's may run there."""
    planted = tmp_path / "ran"
    msg = to_proto(every_grouping_topology())
    msg.bolts["sink"].common.inputs[-1].grouping.custom_serialized = \
        pickle.dumps(Planted(str(planted)))
    msg.bolts["echo"].bolt_object.serialized_python = pickle.dumps(Planted(str(planted)))
    back = from_proto(msg)
    validate(back)
    assert not planted.exists()
    assert back.components["sink"].inputs[-1].grouping.custom is None


def test_system_components_are_not_shipped():
    topo = system_topology(every_grouping_topology(), {"topology.workers": 2})
    assert "__acker" in topo.components
    back = from_bytes(to_bytes(topo))
    assert "__acker" not in back.components


def test_shell_component_round_trips_and_cannot_be_instantiated():
    spout = ComponentDef("py", "spout", shell=ShellSpec(["python3", "spout.py"], "spout.py"),
                         streams={})
    back = from_bytes(to_bytes(Topology({"py": spout})))
    assert back.components["py"].shell == ShellSpec(["python3", "spout.py"], "spout.py")
    with pytest.raises(InvalidTopology) as info:
        back.components["py"].instantiate()
    assert info.value.component == "py"


def test_same_id_as_spout_and_bolt_refused():
    msg = to_proto(every_grouping_topology())
    msg.bolts["numbers"].CopyFrom(msg.bolts["echo"])
    with pytest.raises(InvalidTopology) as info:
        from_bytes(msg.SerializeToString())
    assert info.value.component == "numbers"
