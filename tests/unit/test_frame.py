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


# -- GROUPED frames: the compiled build writes them itself (frame.pxd); byte for byte what
# msgpack writes, and msgpack's own way (and errors) for anything else ------------------

_EDGE_INTS = [0, 1, 31, 127, 128, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
              2**63 - 1, 2**63, 2**64 - 1, -1, -31, -32, -33, -127, -128, -129, -32768,
              -32769, -2**31, -2**31 - 1, -2**63]


def _value(rng: random.Random, depth: int = 0, big: bool = True):
    kind = rng.randrange(13 if depth < 3 else 8)
    if not big and kind in (7, 11):  # the 64 KiB headers
        kind = 4
    if kind == 0:
        return rng.choice(_EDGE_INTS)
    if kind == 1:
        return rng.randrange(-2**63, 2**64)
    if kind == 2:
        return rng.choice([0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan"),
                           rng.random() * 1e300])
    if kind == 3:
        return rng.choice([None, True, False])
    if kind == 4:  # ASCII of every str header length
        return "x" * rng.choice([0, 1, 31, 32, 255, 256, rng.randrange(40)] +
                                ([65535, 65536] if big else []))
    if kind == 5:
        return rng.choice(["é", "日本語", "emoji \U0001F600", "mixed ascii and ü" * 20])
    if kind == 6:
        return bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 255, 256, 300])))
    if kind == 7:
        return b"\0" * rng.choice([65535, 65536])
    if kind == 8:
        return [_value(rng, depth + 1, big) for _ in range(rng.choice([0, 1, 15, 16, 3]))]
    if kind == 9:
        return tuple(_value(rng, depth + 1, big) for _ in range(rng.randrange(4)))
    if kind == 10:
        return {_value(rng, 3, big): _value(rng, depth + 1, big)
                for _ in range(rng.choice([0, 1, 16, 3]))}
    if kind == 11:
        return [0] * rng.choice([65535, 65536])
    return {i: i for i in range(rng.choice([15, 16, 17]))}


def _groups(rng: random.Random, big: bool = True) -> list:
    out = []
    for _ in range(rng.randrange(1, 4)):
        n = rng.randrange(1, 6)
        vals = [[_value(rng, 0, big) for _ in range(rng.randrange(1, 4))] for _ in range(n)]
        pairs = rng.choice([None, bytes(16 * n)])
        several = rng.choice([None, {0: {rng.randrange(2**64): rng.randrange(2**64)}}])
        out.append([rng.randrange(1, 5000), rng.randrange(1, 5000), "default", vals, pairs,
                    several])
    return out


def test_a_grouped_frame_is_msgpacks_bytes_whatever_its_values():
    rng = random.Random(26)
    codec = Codec()
    for _ in range(400):
        groups = _groups(rng)
        assert codec.grouped(groups) == msgpack.packb([VERSION, 4, groups], use_bin_type=True)


def test_a_grouped_frame_of_values_msgpack_handles_otherwise_is_still_msgpacks():
    # a subclass, a big int, a lone surrogate, deep nesting, a registered or refused type:
    # msgpack's encoding or msgpack's error, as before the compiled encoder
    class Name(str):
        pass

    deep: list = []
    cur = deep
    for _ in range(100):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    codec = Codec()
    for value in (Name("w"), deep, bytearray(b"ab"), True, 2**64 - 1):
        groups = [[1, 2, "default", [[value]], None, None]]
        assert codec.grouped(groups) == msgpack.packb([VERSION, 4, groups], use_bin_type=True)
    for value in (2**64, -2**63 - 1, "\ud800", {1, 2}):
        with pytest.raises((OverflowError, UnicodeEncodeError, SerializationError)):
            codec.grouped([[1, 2, "default", [[value]], None, None]])
    # the encoder is usable after a refused frame
    ok = [[1, 2, "default", [["word"]], None, None]]
    assert codec.grouped(ok) == msgpack.packb([VERSION, 4, ok], use_bin_type=True)


def _same(a, b) -> bool:
    """Equal values of equal types (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a == b or (a != a and b != b)
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return len(a) == len(b) and all(_same(k1, k2) and _same(a[k1], b[k2])
                                        for k1, k2 in zip(a, b))
    return a == b


def _msgpack(frame: bytes):
    return msgpack.unpackb(frame, raw=False, strict_map_key=False)


def test_a_grouped_frame_decodes_to_what_msgpack_reads():
    rng = random.Random(27)
    codec = Codec()
    for i in range(400):
        frame = codec.grouped(_groups(rng, big=i < 20))
        assert _same(decode(frame), _msgpack(frame))
    # float32, str8 of non-ASCII, an empty map and array: written by other msgpack writers
    frame = b"\x93\x01\x04\x91\x96\x01\x02\xa1d\x92\x91\xca\x3f\xc0\x00\x00\x91\xd9\x02\xc3\xa9" \
            b"\xc0\x80"
    assert _same(decode(frame), _msgpack(frame)) and decode(frame)[2][0][3] == [[1.5], ["é"]]


def test_a_damaged_grouped_frame_is_refused_as_msgpack_refuses_it():
    rng = random.Random(28)
    codec = Codec()
    frames = [codec.grouped(_groups(rng, big=False)) for _ in range(30)]
    for frame in frames:
        for cut in sorted({rng.randrange(3, len(frame)) for _ in range(20)} | {3, len(frame) - 1}):
            with pytest.raises(BadFrame):  # truncated anywhere
                decode(frame[:cut])
        with pytest.raises(BadFrame):  # trailing bytes
            decode(frame + b"\x00")
        for _ in range(40):  # a byte changed: msgpack's reading, or its refusal
            b = bytearray(frame)
            b[rng.randrange(3, len(b))] = rng.randrange(256)
            b = bytes(b)
            try:
                want = _msgpack(b)
            except Exception:
                want = BadFrame
            if want is not BadFrame and (type(want) is not list or type(want[2]) is not list):
                want = BadFrame
            if want is BadFrame:
                with pytest.raises(BadFrame):
                    decode(b)
            else:
                assert _same(decode(b), want)
    # forged lengths: an array, map, str or bin claiming more than the frame holds
    for head in (b"\xdd\xff\xff\xff\xff", b"\xdf\xff\xff\xff\xff", b"\xdb\xff\xff\xff\xff",
                 b"\xc6\xff\xff\xff\xff", b"\xdc\xff\xff"):
        with pytest.raises(BadFrame):
            decode(b"\x93\x01\x04" + head + b"\x00" * 8)
    # an ext value, invalid UTF-8, an unhashable key, deep nesting: msgpack's way
    for body in (b"\x91\xd4\x05\x00", b"\x91\xa2\xff\xfe", b"\x81\x90\x00"):
        with pytest.raises(BadFrame):
            decode(b"\x93\x01\x04" + body)
    deep = b"\x91" * 80 + b"\xc0"
    assert _same(decode(b"\x93\x01\x04" + deep), _msgpack(b"\x93\x01\x04" + deep))
    with pytest.raises(BadFrame):  # groups must be a list
        decode(b"\x93\x01\x04\x05")


def test_short_words_read_again_are_the_same_str_and_every_word_reads_right():
    # the decoder keeps the short ASCII strs it made (4,096 slots by a hash of their bytes):
    # a word read again is that str, and words sharing a slot replace each other, never mix
    codec = Codec()
    words = [f"w{i}" for i in range(10_000)] + ["", "x" * 32, "y" * 33, "é"]
    for _ in range(2):
        for lo in range(0, len(words), 500):
            chunk = words[lo:lo + 500]
            msg = decode(codec.grouped([[1, 2, "default", [[w] for w in chunk], None, None]]))
            assert [v[0] for v in msg[2][0][3]] == chunk
    # 20,000 mostly new words stopped the lookups for a while (16 x 4,096 strs); a word
    # coming again and again turns them back on
    again = codec.grouped([[1, 2, "default", [["again"]] * 80_000, None, None]])
    assert all(v == ["again"] for v in decode(again)[2][0][3])
    a = decode(codec.grouped([[1, 2, "default", [["again"]], None, None]]))[2][0][3][0][0]
    b = decode(codec.grouped([[1, 2, "default", [["again"]], None, None]]))[2][0][3][0][0]
    assert a == b == "again"
    if type(decode).__name__ == "cython_function_or_method":  # the compiled build keeps it
        assert a is b
