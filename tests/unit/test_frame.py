"""Worker wire frames: encode/decode round trips and strict rejection of malformed frames."""

import random

import msgpack
import pytest

from squall.client.errors import SerializationError
from planted import Planted
from squall.client.values import ValueTypes
from squall.worker.frame import BACKPRESSURE, DATA, LOAD, VERSION, BadFrame, Codec, decode

PICKLING = ValueTypes(pickle_out=True, pickle_in=True)

MAX_U64 = (1 << 64) - 1


def test_data_frame_round_trip():
    tuples = [
        [3, 1, "default", ["word", 1, 2.5, None, True, b"\x00\xff", {"k": [1, {"n": "v"}]}],
         {MAX_U64: 1 << 63, 12345: MAX_U64}],
        [4, 2, "other", [], None],
    ]
    msg = decode(Codec().data(tuples))
    assert msg == [VERSION, DATA, tuples]
    ids = msg[2][0][4]
    assert ids[MAX_U64] == 1 << 63 and ids[12345] == MAX_U64


def test_tuple_values_arrive_as_lists():
    msg = decode(Codec().data([[1, 1, "s", [("a", 1)], None]]))
    assert msg[2][0][3] == [["a", 1]]


def test_set_round_trips_via_pickle_fallback():
    values = [{"b", "a"}, {"nested": frozenset({1, 2})}]
    msg = decode(Codec(PICKLING).data([[1, 2, "default", values, None]]), PICKLING)
    assert msg[2][0][3] == values
    assert type(msg[2][0][3][0]) is set


def test_by_default_a_set_is_refused_naming_its_type_and_the_remedy():
    with pytest.raises(SerializationError) as info:
        Codec().data([[1, 2, "default", [{"a"}], None]])
    assert "builtins.set" in str(info.value)
    assert "topology.serializers" in str(info.value)


def test_codec_usable_after_serialization_error():
    codec = Codec()
    with pytest.raises(SerializationError):
        codec.data([[1, 2, "default", [{"a"}], None]])
    assert decode(codec.data([[1, 2, "default", ["ok"], None]]))[2][0][3] == ["ok"]


def test_unpicklable_value_is_a_serialization_error():
    with pytest.raises(SerializationError) as info:
        Codec(PICKLING).data([[1, 2, "default", [lambda: None], None]])
    assert "function" in str(info.value)


def test_backpressure_frame_round_trip():
    assert decode(Codec().backpressure("worker-7", 1)) == [VERSION, BACKPRESSURE, "worker-7", True]
    assert decode(Codec().backpressure("w", False))[3] is False


@pytest.mark.parametrize("seed", range(50))
def test_random_bytes_rejected(seed):
    rng = random.Random(seed)
    frame = rng.randbytes(rng.randrange(1, 200))
    with pytest.raises(BadFrame):
        decode(frame)


BAD_FRAMES = {
    "empty": b"",
    "truncated": msgpack.packb([VERSION, DATA, [[1, 2, "s", [], None]]])[:-3],
    "trailing garbage": msgpack.packb([VERSION, DATA, []]) + b"\x01",
    "not a list": msgpack.packb({"version": 1, "kind": 0, "tuples": []}),
    "a bare int": msgpack.packb(7),
    "too short": msgpack.packb([VERSION, DATA]),
    "wrong version": msgpack.packb([VERSION + 1, DATA, []]),
    "unknown kind": msgpack.packb([VERSION, 9, []]),
    "data payload not a list": msgpack.packb([VERSION, DATA, {"t": 1}]),
    "backpressure too short": msgpack.packb([VERSION, BACKPRESSURE, "w"]),
    "backpressure too long": msgpack.packb([VERSION, BACKPRESSURE, "w", True, 1]),
    "backpressure worker not str": msgpack.packb([VERSION, BACKPRESSURE, 17, True]),
    "unknown ext type": msgpack.packb([VERSION, DATA, [msgpack.ExtType(42, b"x")]]),
    "load not a map": msgpack.packb([VERSION, LOAD, "w", [1, 500]]),
    "load over 1000": msgpack.packb([VERSION, LOAD, "w", {1: 1001}]),
    "load negative": msgpack.packb([VERSION, LOAD, "w", {1: -1}]),
    "load task not int": msgpack.packb([VERSION, LOAD, "w", {"1": 5}]),
    "load value a float": msgpack.packb([VERSION, LOAD, "w", {1: 0.5}]),
}


def test_load_frame_round_trip():
    assert decode(Codec().load("w-1", {3: 0, 4: 1000, 7: 250})) == \
        [VERSION, LOAD, "w-1", {3: 0, 4: 1000, 7: 250}]


@pytest.mark.parametrize("frame", BAD_FRAMES.values(), ids=BAD_FRAMES.keys())
def test_malformed_frames_rejected(frame):
    with pytest.raises(BadFrame):
        decode(frame)


def test_bad_frame_message_says_what_is_wrong():
    with pytest.raises(BadFrame, match="version 2"):
        decode(BAD_FRAMES["wrong version"])
    with pytest.raises(BadFrame, match="kind 9"):
        decode(BAD_FRAMES["unknown kind"])


@pytest.mark.parametrize("values", [ValueTypes(), ValueTypes(pickle_out=True)],
                         ids=["default", "fallback on, channel not authenticated"])
def test_a_pickled_value_is_refused_and_never_run(tmp_path, values):
    """The frame a stranger sends a worker port: it must not run (issue 11's first hole)."""
    planted = tmp_path / "ran"
    frame = Codec(PICKLING).data([[1, 2, "default", [Planted(str(planted))], None]])
    with pytest.raises(BadFrame, match="pickled value refused"):
        decode(frame, values)
    assert not planted.exists()
    decode(frame, PICKLING)  # the same frame where pickle is allowed: it does run
    assert planted.exists()
