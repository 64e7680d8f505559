"""Stream groupings: stable hashing and the routers that pick target tasks."""

import enum
import json
import os
import pickle
import random
import subprocess
import sys
from collections import Counter

import pytest

from squall.client import grouping as g
from squall.client.grouping import (AllRouter, CustomStreamGrouping, DirectRouter, FieldsRouter,
                                    GlobalRouter, PartialKeyRouter, ShuffleRouter, make_router,
                                    stable_hash)

TARGETS = [11, 12, 13, 14]

HASH_SAMPLES = ["", "word", "naïve ☃", 0, 1, -1, 2**63 + 5, b"", b"\x00\xffbytes",
                [1, "a", b"b"], ["nested", [1, 2], {"k": "v"}], None, True, 2.0, 2.5]


def test_stable_hash_agrees_across_processes():
    code = ("import json\n"
            "from squall.client.grouping import stable_hash\n"
            f"samples = {HASH_SAMPLES!r}\n"
            "print(json.dumps({'hashes': [stable_hash(v) for v in samples],\n"
            "                  'tuple': stable_hash((1, 'a', b'b')),\n"
            "                  'py_hash': hash('word')}))\n")
    seed = "12345" if os.environ.get("PYTHONHASHSEED") != "12345" else "54321"
    env = dict(os.environ, PYTHONHASHSEED=seed)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd="/",
                         capture_output=True, text=True, check=True, timeout=60)
    other = json.loads(out.stdout)
    # The child really hashes differently, so Python's hash() would not agree ...
    assert other["py_hash"] != hash("word")
    # ... while stable_hash does.
    assert other["hashes"] == [stable_hash(v) for v in HASH_SAMPLES]
    assert other["tuple"] == stable_hash((1, "a", b"b"))


def test_stable_hash_tuple_equals_list_as_after_a_msgpack_round_trip():
    # Tuples travel between workers as msgpack arrays and arrive as lists.
    assert stable_hash((1, "a")) == stable_hash([1, "a"])


def test_stable_hash_numerically_equal_scalars_agree():
    assert stable_hash(1) == stable_hash(1.0) == stable_hash(True)


def test_fields_router_equal_keys_same_task():
    r = FieldsRouter(TARGETS, [0])
    first = {w: r.choose([w, i]) for i, w in enumerate(["a", "b", "c", "a", "b"])}
    for i in range(50):
        for w, chosen in first.items():
            assert r.choose([w, i]) == chosen
    # A fresh router (another emitting task, maybe another process) agrees.
    r2 = FieldsRouter(list(reversed(TARGETS)), [0])
    assert all(r2.choose([w, 0]) == chosen for w, chosen in first.items())


def test_fields_router_spreads_distinct_words_over_all_targets():
    r = FieldsRouter(TARGETS, [0])
    load = Counter(r.choose([f"word{i}"])[0] for i in range(1000))
    assert set(load) == set(TARGETS)
    assert min(load.values()) > 150


def test_fields_router_unhashable_values_route_consistently():
    r = FieldsRouter(TARGETS, [0])
    assert r.choose([["a", 1]]) == r.choose([["a", 1]]) == r.choose([("a", 1)])


def test_multi_field_grouping_uses_all_grouping_fields():
    r = FieldsRouter(TARGETS, [0, 2])
    assert r.choose(["user", "x", "day1"]) == r.choose(["user", "y", "day1"])
    # Both grouping fields matter.
    assert len({r.choose([f"user{i}", "x", "day1"])[0] for i in range(100)}) > 1
    assert len({r.choose(["user", "x", f"day{i}"])[0] for i in range(100)}) > 1
    via_make = make_router(g.Grouping(g.FIELDS, ["a", "c"]), TARGETS, ["a", "b", "c"])
    assert via_make.choose(["user", "zzz", "day7"]) == r.choose(["user", "x", "day7"])


class Color(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 7


@pytest.mark.parametrize("member, plain", [(Color.RED, "red"), (Level.HIGH, 7)],
                         ids=["StrEnum", "IntEnum"])
def test_fields_router_enum_key_goes_where_its_plain_value_goes(member, plain):
    seen_plain_first = FieldsRouter(TARGETS, [0])
    seen_plain_first.choose([plain])
    seen_member_first = FieldsRouter(TARGETS, [0])
    seen_member_first.choose([member])
    assert seen_member_first.choose([plain]) == seen_plain_first.choose([plain])


def test_shuffle_router_round_robins_evenly():
    n, k = len(TARGETS), 25
    r = ShuffleRouter(TARGETS, random.Random(3))
    picks = [r.choose(["v"]) for _ in range(k * n)]
    assert all(len(p) == 1 for p in picks)
    load = Counter(p[0] for p in picks)
    assert load == {t: k for t in TARGETS}
    # Every window of n consecutive picks covers each target once.
    flat = [p[0] for p in picks]
    assert all(sorted(flat[i:i + n]) == TARGETS for i in range(0, k * n, n))


def test_all_router_returns_every_target():
    assert AllRouter([3, 1, 2]).choose(["v"]) == [1, 2, 3]


def test_global_router_picks_lowest_task():
    r = GlobalRouter([9, 4, 6])
    assert [r.choose([i]) for i in range(5)] == [[4]] * 5


def test_none_grouping_behaves_like_shuffle():
    r = make_router(g.Grouping(g.NONE), TARGETS, ["v"])
    assert Counter(r.choose([i])[0] for i in range(40)) == {t: 10 for t in TARGETS}


def test_local_or_shuffle_prefers_local_tasks():
    r = make_router(g.Grouping(g.LOCAL_OR_SHUFFLE), TARGETS, ["v"], local_tasks={12, 14, 99})
    load = Counter(r.choose([i])[0] for i in range(100))
    assert load == {12: 50, 14: 50}


def test_local_or_shuffle_falls_back_to_all_when_none_local():
    r = make_router(g.Grouping(g.LOCAL_OR_SHUFFLE), TARGETS, ["v"], local_tasks={1, 2})
    load = Counter(r.choose([i])[0] for i in range(100))
    assert load == {t: 25 for t in TARGETS}


def test_partial_key_sends_a_key_to_at_most_two_tasks():
    r = PartialKeyRouter(TARGETS, [0])
    for key in ["hot", "warm", 42, b"bytes"]:
        chosen = {r.choose([key, i])[0] for i in range(200)}
        assert 1 <= len(chosen) <= 2
        assert chosen <= set(TARGETS)


def test_partial_key_balances_skew_better_than_fields():
    rng = random.Random(7)
    # A skewed stream: one hot key is half the traffic.
    stream = ["hot" if rng.random() < 0.5 else f"k{rng.randrange(200)}" for _ in range(4000)]
    fields = FieldsRouter(TARGETS, [0])
    pkg = make_router(g.Grouping(g.PARTIAL_KEY, ["w"]), TARGETS, ["w"])
    fields_load = Counter(fields.choose([w])[0] for w in stream)
    pkg_load = Counter(pkg.choose([w])[0] for w in stream)
    assert sum(pkg_load.values()) == len(stream)
    assert max(pkg_load.values()) < 0.8 * max(fields_load.values())


class EvenOnly(CustomStreamGrouping):
    def prepare(self, context, stream, target_tasks):
        self.prepared = (context, stream, list(target_tasks))
        self.calls = []

    def choose_tasks(self, task_id, values):
        self.calls.append((task_id, values))
        return [t for t in self.prepared[2] if t % 2 == 0]


def test_custom_grouping_is_prepared_with_sorted_targets_and_chooses():
    custom = EvenOnly()
    r = make_router(g.Grouping(g.CUSTOM, custom=custom), [14, 11, 13, 12], ["v"],
                    task_id=5, context="ctx", stream=("src", "default"), fresh_custom=False)
    assert custom.prepared == ("ctx", ("src", "default"), [11, 12, 13, 14])
    assert r.choose(["x"]) == [12, 14]
    assert custom.calls == [(5, ["x"])]


def test_custom_grouping_gives_each_emitter_its_own_object():
    custom = EvenOnly()
    r1 = make_router(g.Grouping(g.CUSTOM, custom=custom), TARGETS, ["v"], task_id=1)
    r2 = make_router(g.Grouping(g.CUSTOM, custom=custom), TARGETS, ["v"], task_id=2)
    r1.choose(["x"])
    assert not hasattr(custom, "calls")
    assert r1.grouping is not r2.grouping and r2.grouping.calls == []


def test_custom_grouping_read_from_the_wire_is_unpickled_only_when_a_router_is_made():
    spec = g.Grouping(g.CUSTOM, serialized=pickle.dumps(EvenOnly()))
    assert spec.custom is None  # the bytes alone: what Nimbus holds
    r = make_router(spec, TARGETS, ["v"], task_id=1)
    assert isinstance(r.grouping, EvenOnly)


def test_direct_router_chooses_nothing():
    r = make_router(g.Grouping(g.DIRECT), TARGETS, ["v"])
    assert isinstance(r, DirectRouter)
    assert r.choose(["v"]) == []


def test_unknown_grouping_kind_rejected():
    with pytest.raises(ValueError, match="unknown grouping"):
        g.Grouping("broadcast")


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 64, 1000])
def test_a_bolts_anchored_emit_and_a_spouts_emit_route_every_key_alike(n):
    """The bolt's emit_anchored hashes an ASCII key inline (compiled: its modulo by two
    multiplies); the spout's emit goes through FieldsRouter.choose. Both must send a key
    to the same task, non-ASCII keys included, whatever the number of tasks."""
    from types import SimpleNamespace

    from squall.client.tuple import Fields, Tuple
    from squall.client.values import PLAIN
    from squall.worker.collector import OutputCollector, Route, SpoutOutputCollector, StepAcks
    from squall.worker.stats import TaskStats

    targets = list(range(11, 11 + n))
    got: dict[str, list] = {"bolt": [], "spout": []}

    def collector(cls, who, *extra):
        sink = {t: (lambda tup, t=t: got[who].append((tup.values[0], t))) for t in targets}
        ex = SimpleNamespace(component_id=who, ws=SimpleNamespace(
            stats={1: TaskStats("c")}, deliver=sink, queues={}, lineage=False, values=PLAIN),
            transfer=None,
            debug=False, acking=False, pending_acks=StepAcks(), pending_inits=[])
        route = Route("default", Fields(["word"]), [FieldsRouter(targets, [0])], False,
                      frozenset())
        return cls(ex, 1, {"default": route}, *extra)

    bolt = collector(OutputCollector, "bolt")
    spout = collector(SpoutOutputCollector, "spout", None)
    keys = [f"w{i}" for i in range(300)] + ["naïve", "日本", "\udc80x", "", "a b"]
    anchor = Tuple(["x"], "src", "default", 9, None, Fields(["line"]))
    for k in keys:
        bolt.emit([k], anchors=anchor)
        spout.emit([k])
    assert got["bolt"] == got["spout"]
    assert [t for _, t in got["bolt"]] == [targets[stable_hash(k) % n] for k in keys]
    if n <= 7:
        assert len({t for _, t in got["bolt"]}) == n


def test_load_aware_shuffle_is_the_plain_round_robin_until_loads_differ():
    from squall.client.grouping import LoadAwareShuffleRouter, LoadMapping

    load = LoadMapping()
    r = LoadAwareShuffleRouter([1, 2, 3], load, rng=random.Random(4))
    assert sorted(r.choose([])[0] for _ in range(300)) == sorted([1, 2, 3] * 100)
    load.set({1: 0.1, 2: 0.1, 3: 0.1})  # equal loads: still even
    assert sorted(r.choose([])[0] for _ in range(300)) == sorted([1, 2, 3] * 100)


def test_load_aware_shuffle_sends_less_to_a_backed_up_task_and_recovers():
    from squall.client.grouping import LoadAwareShuffleRouter, LoadMapping

    load = LoadMapping()
    r = LoadAwareShuffleRouter([1, 2], load, rng=random.Random(5))
    load.set({1: 0.8, 2: 0.0})  # weights 0.2 : 1.0 -> 167 and 833 slots of 1000
    got = Counter(r.choose([])[0] for _ in range(1000))
    assert got == {1: 167, 2: 833}
    load.set({1: 1.0, 2: 1.0})  # both backed up: the floor keeps both, evenly
    got = Counter(r.choose([])[0] for _ in range(1000))
    assert got == {1: 500, 2: 500}
    load.set({1: 1.0})  # task 2 unknown counts as idle; task 1 keeps its floor
    got = Counter(r.choose([])[0] for _ in range(1000))
    assert got == {1: 48, 2: 952}


@pytest.mark.parametrize("n", [30, 60, 150])
def test_load_aware_shuffle_keeps_every_target_and_serves_equal_ones_equally(n):
    from squall.client.grouping import LoadAwareShuffleRouter, LoadMapping

    load = LoadMapping()
    targets = list(range(100, 100 + n))
    r = LoadAwareShuffleRouter(targets, load, rng=random.Random(n))
    load.set({100: 1.0, 101: 0.03})
    r.choose([])
    ring = Counter(t[0] for t in r.ring)
    assert set(ring) == set(targets)  # the backed-up task keeps a slot
    idle = [ring[t] for t in targets[2:]]
    assert max(idle) - min(idle) <= 1  # equally idle tasks get equal shares


def test_shuffle_groupings_are_load_aware_only_when_given_a_load_map():
    from squall.client.grouping import (Grouping, LoadAwareShuffleRouter, LoadMapping,
                                        ShuffleRouter, make_router)

    spec = Grouping("shuffle")
    assert type(make_router(spec, [1, 2], ["x"])) is ShuffleRouter
    assert type(make_router(spec, [1, 2], ["x"], load=LoadMapping())) is LoadAwareShuffleRouter


def test_a_bolts_anchored_emit_hashes_ascii_keys_of_every_length_as_stable_hash():
    """The compiled emit_anchored hashes an ASCII key's own bytes with a CRC-32 of its own
    (worker/collector.pxd): it must agree with zlib's, as stable_hash uses, for any key."""
    from types import SimpleNamespace

    from squall.client.tuple import Fields, Tuple
    from squall.client.values import PLAIN
    from squall.worker.collector import OutputCollector, Route, StepAcks
    from squall.worker.stats import TaskStats

    targets = list(range(10, 17))
    got: list[int] = []
    ex = SimpleNamespace(component_id="b", ws=SimpleNamespace(
        stats={1: TaskStats("b")}, deliver={t: (lambda tup, t=t: got.append(t)) for t in targets},
        queues={}, lineage=False, values=PLAIN), transfer=None, debug=False, acking=False,
        pending_acks=StepAcks())
    route = Route("default", Fields(["w"]), [FieldsRouter(targets, [0])], False, frozenset())
    bolt = OutputCollector(ex, 1, {"default": route})
    anchor = Tuple(["x"], "src", "default", 9, None, Fields(["line"]))
    rng = random.Random(26)
    alphabet = "abcdefghijklmnopqrstuvwxyzABC0123456789 _-~\x00\x7f"
    keys = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 70)))
            for _ in range(5000)]
    for k in keys:
        bolt.emit_anchored([k], "default", anchor)
    assert got == [targets[stable_hash(k) % 7] for k in keys]
    assert set(got) == set(targets)


def test_anchored_emits_that_change_stream_each_take_their_streams_route():
    # the collector keeps the last stream's route: a run on one stream, then another, then
    # back, each tuple goes where its own stream's subscribers are, under its stream's name
    from types import SimpleNamespace

    from squall.client.errors import InvalidTopology
    from squall.client.tuple import Fields, Tuple
    from squall.client.values import PLAIN
    from squall.worker.collector import OutputCollector, Route, StepAcks
    from squall.worker.stats import TaskStats

    got: list = []
    ex = SimpleNamespace(component_id="b", ws=SimpleNamespace(
        stats={1: TaskStats("b")},
        deliver={t: (lambda tup, t=t: got.append((t, tup.source_stream, tup.values[0])))
                 for t in (10, 11, 20)},
        queues={}, lineage=False, values=PLAIN), transfer=None, debug=False, acking=False,
        pending_acks=StepAcks())
    routes = {"default": Route("default", Fields(["w"]), [FieldsRouter([10, 11], [0])], False,
                               frozenset()),
              "errors": Route("errors", Fields(["e"]), [ShuffleRouter([20])], False,
                              frozenset())}
    bolt = OutputCollector(ex, 1, routes)
    anchor = Tuple(["x"], "src", "default", 9, None, Fields(["line"]))
    plan = ["default"] * 3 + ["errors"] * 2 + ["default", "errors", "default"]
    for i, stream in enumerate(plan):
        bolt.emit_anchored([f"v{i}"], "".join(stream), anchor)  # an equal str, not the same
    assert [(s, v) for _, s, v in got] == [(s, f"v{i}") for i, s in enumerate(plan)]
    assert all((t == 20) == (s == "errors") for t, s, _ in got)
    with pytest.raises(InvalidTopology, match="stream None"):
        bolt.emit_anchored(["v"], None, anchor)
