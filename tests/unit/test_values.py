"""Tuple value types beyond msgpack's: registered serializers, resolved from topology conf."""

import pytest

from squall.client import config as cfg
from squall.client.errors import ConfigError, SerializationError
from squall.worker.frame import BadFrame, Codec, decode
from squall.client.values import EXT_PICKLE, FIRST_REGISTERED, ValueTypes, entries_from_conf


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __eq__(self, other):
        return isinstance(other, Point) and (self.x, self.y) == (other.x, other.y)


class Point3(Point):
    pass


class PointSerializer:
    @staticmethod
    def pack(p):
        return [p.x, p.y]

    @staticmethod
    def unpack(v):
        return Point(*v)


class Line:
    def __init__(self, a, b):
        self.a, self.b = a, b


def line_pack(line):
    return {"a": line.a, "b": line.b}  # Points inside: they nest


def line_unpack(v):
    return Line(v["a"], v["b"])


HERE = __name__
CONF = {cfg.TOPOLOGY_SERIALIZERS: {f"{HERE}.Point": f"{HERE}.PointSerializer",
                                   f"{HERE}.Line": [f"{HERE}.line_pack", f"{HERE}.line_unpack"]}}


def wire(v):
    return [[1, 2, "default", v, None]]


def test_registered_types_round_trip_and_nest():
    vt = ValueTypes.from_conf(CONF, channel_authenticated=False)
    sent = [Point(1, 2), Line(Point(0, 0), Point(3, 4)), {"k": [Point(5, 6)]}]
    got = decode(Codec(vt).data(wire(sent)), vt)[2][0][3]
    assert got[0] == Point(1, 2)
    assert isinstance(got[1], Line) and got[1].b == Point(3, 4)
    assert got[2]["k"][0] == Point(5, 6)


def test_ext_codes_follow_sorted_class_names_so_every_worker_agrees():
    entries = entries_from_conf(CONF)
    assert [e[0] for e in entries] == [Line, Point]  # "...Line" < "...Point"
    vt = ValueTypes(entries)
    assert vt.default(Point(1, 2)).code == FIRST_REGISTERED + 1


def test_a_subclass_of_a_registered_type_uses_its_serializer():
    vt = ValueTypes.from_conf(CONF, channel_authenticated=False)
    assert decode(Codec(vt).data(wire([Point3(1, 2)])), vt)[2][0][3] == [Point(1, 2)]


def test_a_frame_with_a_registered_type_from_a_worker_without_it_is_refused():
    vt = ValueTypes.from_conf(CONF, channel_authenticated=False)
    frame = Codec(vt).data(wire([Point(1, 2)]))
    with pytest.raises(BadFrame, match="unknown ext type"):
        decode(frame)


def test_an_unpack_that_raises_drops_the_frame():
    vt = ValueTypes.from_conf(CONF, channel_authenticated=False)
    import msgpack
    bogus = msgpack.packb([1, 0, wire([msgpack.ExtType(FIRST_REGISTERED + 1,
                                                       msgpack.packb("not a pair"))])])
    with pytest.raises(BadFrame, match="failed to unpack"):
        decode(bogus, vt)


def test_pickle_decodes_only_with_the_fallback_on_and_an_authenticated_channel():
    on = {cfg.TOPOLOGY_FALL_BACK_ON_PICKLE: True}
    assert ValueTypes.from_conf(on, channel_authenticated=True).pickle_in
    assert not ValueTypes.from_conf(on, channel_authenticated=False).pickle_in
    assert ValueTypes.from_conf(on, channel_authenticated=False).pickle_out
    assert not ValueTypes.from_conf({}, channel_authenticated=True).pickle_in
    vt = ValueTypes.from_conf(on, channel_authenticated=True)
    assert vt.default({1}).code == EXT_PICKLE
    assert decode(Codec(vt).data(wire([{1}])), vt)[2][0][3] == [{1}]


def test_a_failing_pack_is_a_serialization_error_naming_the_type():
    vt = ValueTypes([(Point, lambda p: 1 / 0, lambda v: v)])
    with pytest.raises(SerializationError, match="serializer of Point failed: ZeroDivisionError"):
        Codec(vt).data(wire([Point(1, 2)]))


@pytest.mark.parametrize("spec, match", [
    ({f"{HERE}.Nope": f"{HERE}.PointSerializer"}, "has no 'Nope'"),
    ({"no_such_module_xyz.Point": f"{HERE}.PointSerializer"}, "no importable"),
    ({f"{HERE}.line_pack": f"{HERE}.PointSerializer"}, "is not a class"),
    ({f"{HERE}.Point": f"{HERE}.Point"}, "callable pack and unpack"),
])
def test_unresolvable_serializers_name_the_key_and_the_entry(spec, match):
    with pytest.raises(ConfigError, match=match) as info:
        entries_from_conf({cfg.TOPOLOGY_SERIALIZERS: spec})
    assert cfg.TOPOLOGY_SERIALIZERS in str(info.value)


@pytest.mark.parametrize("spec", [
    {"Point": "mod.Ser"},                     # not dotted
    {"mod.Point": ["mod.pack"]},              # one function
    {"mod.Point": 7},
    {"mod.Point": "mod.Ser; import os"},
    {f"m.C{i}": "m.S" for i in range(cfg.MAX_SERIALIZERS + 1)},
])
def test_config_validation_checks_the_shape_without_importing(spec):
    with pytest.raises(ConfigError):
        cfg.validate({cfg.TOPOLOGY_SERIALIZERS: spec})


def test_config_validation_accepts_both_forms():
    cfg.validate(CONF)
