"""DRPC's pure parts (issue 15, item 5): the server's request table (matching by id,
timeouts, shutdown), its authorizer, the coordination of batch bolts and the linear
builder's wiring. The end-to-end tests are tests/integration/test_drpc.py."""

from __future__ import annotations

import threading

import pytest

from squall.client import BasicBolt, Bolt
from squall.client import grouping as g
from squall.client.drpc import (COORDINATED_STREAM_ID, BatchBolt, CoordinatedBolt,
                                LinearDRPCTopologyBuilder)
from squall.client.errors import ConfigError, FailedException, InvalidTopology, PermissionDenied
from squall.client.tls import Principal
from squall.client.tuple import Fields, Tuple
from squall.drpc.authorizer import DRPCAuthorizer
from squall.drpc.requests import (Cancelled, Failed, RequestTable, Returned, ServerClosed,
                                  ShutDown, TimedOut)


# --- the request table ---------------------------------------------------------------------
def test_results_are_matched_to_requests_by_id_whatever_the_order():
    table = RequestTable()
    reqs = [table.submit("f", f"arg{i}") for i in range(5)]
    fetched = [table.fetch("f") for _ in range(5)]
    assert [r.args for r in fetched] == [f"arg{i}" for i in range(5)]  # oldest first
    assert table.fetch("f") is None
    for r in reversed(fetched):
        assert table.result(r.id, r.args.upper())
    assert [table.wait(r, 1) for r in reqs] == [Returned(f"ARG{i}") for i in range(5)]
    assert table.pending() == 0 and table._queues == {} and table._requests == {}


def test_a_function_no_spout_asked_for_lately_is_refused_at_once():
    """A call to a function nobody serves waited out drpc.request.timeout.secs (600 s),
    holding an execute thread; now it is refused once the server has been up long enough
    for spouts to have asked."""
    from squall.drpc.requests import Unserved
    now = [1000.0]
    table = RequestTable(clock=lambda: now[0])
    table.submit("early", "x")  # just started: spouts may not have asked yet
    now[0] += RequestTable.UNSERVED_SECS + 1
    with pytest.raises(Unserved, match="no topology serves 'nobody'.*drpc.servers"):
        table.submit("nobody", "x")
    assert table.fetch("reach") is None  # a spout asks: the function is served
    table.submit("reach", "x")
    now[0] += RequestTable.UNSERVED_SECS + 1
    with pytest.raises(Unserved):
        table.submit("reach", "x")  # its spouts stopped asking


def test_one_principal_has_a_bounded_share_of_waiting_requests():
    from squall.drpc.requests import TooMany
    table = RequestTable(max_per_principal=2)
    a1, _ = table.submit("f", "1", "alice"), table.submit("f", "2", "alice")
    with pytest.raises(TooMany, match="alice has 2 DRPC requests waiting"):
        table.submit("f", "3", "alice")
    table.submit("f", "1", "bob")  # others are not held back
    table.cancel(a1.id)
    assert table.wait(a1, 1) == Cancelled()
    table.submit("f", "3", "alice")  # a slot came back


def test_each_function_has_its_own_queue():
    table = RequestTable()
    a, b = table.submit("a", "1"), table.submit("b", "2")
    assert table.fetch("c") is None
    assert table.fetch("b") is b and table.fetch("a") is a
    assert a.fetched and b.fetched


def test_concurrent_executes_each_get_their_own_result():
    table = RequestTable()
    got: dict[int, object] = {}

    def execute(i: int) -> None:
        got[i] = table.wait(table.submit("sq", str(i)), timeout=30)
    threads = [threading.Thread(target=execute, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    answered = 0
    while answered < 20:  # the "topology": bounded by fetch's own wait
        req = table.fetch("sq", wait=1.0)
        assert req is not None, "a request never arrived"
        table.result(req.id, str(int(req.args) ** 2))
        answered += 1
    for t in threads:
        t.join(timeout=30)
    assert got == {i: Returned(str(i * i)) for i in range(20)}


def test_a_request_nobody_fetches_times_out_and_is_forgotten():
    table = RequestTable()
    req = table.submit("f", "x")
    assert table.wait(req, 0.05) == TimedOut(0.05, fetched=False)
    assert table.queued("f") == 0 and table.fetch("f") is None
    assert not table.result(req.id, "late")  # ignored, as in Storm


def test_a_fetched_request_without_result_times_out_saying_so():
    table = RequestTable()
    req = table.submit("f", "x")
    table.fetch("f")
    assert table.wait(req, 0.05) == TimedOut(0.05, fetched=True)


def test_the_first_outcome_wins():
    table = RequestTable()
    req = table.submit("f", "x")
    assert table.fail(req.id, "broken")
    assert not table.result(req.id, "late")
    assert table.wait(req, 1) == Failed("broken")


def test_a_cancelled_client_frees_its_wait_and_its_queue_slot():
    table = RequestTable()
    req = table.submit("f", "x")
    table.cancel(req.id)
    assert table.wait(req, 30) == Cancelled()
    assert table.fetch("f") is None
    table.cancel("unknown")  # no-op


def test_close_drops_every_request_and_refuses_new_ones():
    table = RequestTable()
    req = table.submit("f", "x")
    assert table.close("signal-15") == 1
    assert table.wait(req, 30) == ShutDown("signal-15")
    with pytest.raises(ServerClosed):
        table.submit("f", "y")
    assert table.fetch("f", wait=30) is None  # no wait after close


def test_a_waiting_fetch_wakes_when_a_request_arrives():
    table = RequestTable()
    out = []
    t = threading.Thread(target=lambda: out.append(table.fetch("f", wait=1.0)))
    t.start()
    req = table.submit("f", "x")
    t.join(timeout=5)
    assert out == [req]


def test_a_fetch_waits_at_most_the_cap():
    now = [0.0]
    table = RequestTable(clock=lambda: now[0])

    class Clock:  # the condition's wait advances the fake clock by what it was asked
        def wait(self, secs):
            now[0] += secs
    table._arrived = Clock()
    assert table.fetch("f", wait=3600) is None
    assert now[0] == RequestTable.MAX_FETCH_WAIT_SECS


# --- the authorizer ------------------------------------------------------------------------
@pytest.mark.parametrize("verb,who,allowed", [
    ("execute", "alice", True),
    ("fetchRequest", "alice", False), ("result", "alice", False), ("failRequest", "alice", False),
    ("fetchRequest", "supervisor", True), ("result", "nimbus", True),
    ("failRequest", "reach-topology", True), ("result", "root", True),
    ("fetchRequest", "opsmember", True),
])
def test_simple_authorizer(verb, who, allowed):
    authz = DRPCAuthorizer({"nimbus.supervisor.users": ["supervisor"],
                            "nimbus.daemon.users": ["nimbus"], "nimbus.admins": ["root"],
                            "nimbus.admins.groups": ["ops"],
                            "drpc.invocations.users": ["reach-topology"]})
    p = Principal(who, frozenset({"ops"}) if who == "opsmember" else frozenset())
    assert authz.permits(verb, p) is allowed
    if not allowed:
        with pytest.raises(PermissionDenied, match=f"{who} may not {verb} for DRPC function "
                                                   "'reach'"):
            authz.check(verb, p, "reach")


def test_authorizer_none_admits_every_principal_and_bad_names_are_refused():
    assert DRPCAuthorizer({"drpc.authorizer": "none"}).permits("result", Principal("x"))
    with pytest.raises(ConfigError, match="drpc.authorizer"):
        DRPCAuthorizer({"drpc.authorizer": "acl"})
    with pytest.raises(ValueError):
        DRPCAuthorizer({}).permits("killTopology", Principal("x"))


# --- the coordination ----------------------------------------------------------------------
class FakeContext:
    def __init__(self, tasks: dict[str, list[int]], coord_targets: list[str]):
        self.tasks, self.coord_targets = tasks, coord_targets

    def this_targets(self, stream):
        assert stream == COORDINATED_STREAM_ID
        return self.coord_targets

    def component_tasks(self, component):
        return list(self.tasks.get(component, []))


class FakeCollector:
    """Records what the coordinated bolt does; regular emits go to tasks 7, 8, 7, ..."""

    def __init__(self):
        self.emits, self.acked, self.failed = [], [], []
        self._next = 0

    def emit(self, values, stream="default", anchors=None, direct_task=None):
        if direct_task is None:
            direct_task = (7, 8)[self._next % 2]
            self._next += 1
        self.emits.append((stream, direct_task, list(values)))
        return [direct_task]

    def emit_direct(self, task, values, stream="default", anchors=None):
        return self.emit(values, stream, anchors, task)

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)


def tup(component, stream, values, task=1):
    return Tuple(list(values), component, stream, task, None, Fields(["a", "b"][:len(values)]))


class Sum(BatchBolt):
    finished = []

    def prepare(self, conf, context, collector, id):
        self.collector, self.id, self.total = collector, id, 0

    def execute(self, t):
        if t.values[1] < 0:
            raise FailedException("negative")
        self.total += t.values[1]

    def finish_batch(self):
        Sum.finished.append(self.id)
        self.collector.emit([self.id, self.total])

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "sum"])


def last_bolt():
    """Like CountAggregator: reads all tasks (1, 2) of bolt1, and the ids of prepare-request."""
    Sum.finished = []
    bolt = CoordinatedBolt(Sum(), {"bolt1": False}, ("prepare-request", "id"))
    out = FakeCollector()
    bolt.prepare({}, FakeContext({"bolt1": [1, 2]}, []), out)
    return bolt, out


def test_a_batch_finishes_once_every_report_and_tuple_and_the_id_are_in():
    bolt, out = last_bolt()
    a = tup("bolt1", "default", [9, 3], task=1)
    c1 = tup("bolt1", COORDINATED_STREAM_ID, [9, 1], task=1)
    c2 = tup("bolt1", COORDINATED_STREAM_ID, [9, 1], task=2)
    id_tuple = tup("prepare-request", "id", [9])
    b = tup("bolt1", "default", [9, 4], task=2)
    for t in (a, c1, c2, id_tuple):
        bolt.execute(t)
        assert Sum.finished == []
    assert out.acked == [a, c1, c2]  # coordination tuples are acked at once; the id is held
    bolt.execute(b)
    assert Sum.finished == [9]
    assert out.emits == [("default", 7, [9, 7])]
    assert out.acked[-2:] == [id_tuple, b]  # the held id tuple keeps the tree open till now
    assert bolt._tracked == {}


def test_a_task_that_never_gets_the_id_never_finishes():
    bolt, out = last_bolt()
    for task in (1, 2):
        bolt.execute(tup("bolt1", COORDINATED_STREAM_ID, [5, 0], task=task))
    assert Sum.finished == [] and 5 in bolt._tracked


def test_a_failed_tuple_fails_the_request_and_its_held_tuples():
    bolt, out = last_bolt()
    id_tuple = tup("prepare-request", "id", [9])
    bad = tup("bolt1", "default", [9, -1])
    bolt.execute(id_tuple)
    bolt.execute(bad)
    assert out.failed == [id_tuple, bad] and Sum.finished == []
    assert 9 not in bolt._tracked and bolt._runner._open == {}
    straggler = tup("bolt1", COORDINATED_STREAM_ID, [9, 1], task=1)
    bolt.execute(straggler)  # a new entry: it will expire; nothing finishes
    assert Sum.finished == []


def test_expired_requests_are_forgotten_and_their_held_tuples_failed():
    bolt, out = last_bolt()
    id_tuple = tup("prepare-request", "id", [9])
    bolt.execute(id_tuple)
    bolt._sweep(bolt._tracked[9].created + bolt._expiry + 1)
    assert bolt._tracked == {} and out.failed == [id_tuple]
    assert bolt._runner._open == {}


class Split(BasicBolt):
    def execute(self, t, collector):
        for word in t.values[1].split():
            collector.emit([t.values[0], word])

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "word"])


def test_a_middle_bolt_reports_per_target_task_counts_when_its_input_is_complete():
    bolt = CoordinatedBolt(Split(), {"bolt0": True})
    out = FakeCollector()
    bolt.prepare({}, FakeContext({"bolt0": [1, 2], "bolt2": [7, 8]}, ["bolt2"]), out)
    coord = tup("bolt0", COORDINATED_STREAM_ID, [4, 2], task=2)
    bolt.execute(coord)  # one report from bolt0 (single), announcing two tuples
    bolt.execute(tup("bolt0", "default", [4, "a b c"], task=2))
    assert [e for e in out.emits if e[0] == COORDINATED_STREAM_ID] == []
    bolt.execute(tup("bolt0", "default", [4, "d"], task=2))
    coords = [e for e in out.emits if e[0] == COORDINATED_STREAM_ID]
    assert coords == [(COORDINATED_STREAM_ID, 7, [4, 2]), (COORDINATED_STREAM_ID, 8, [4, 2])]
    assert coord in out.acked


def test_the_first_bolt_finishes_when_its_one_input_is_acked():
    bolt = CoordinatedBolt(Split(), {})
    out = FakeCollector()
    bolt.prepare({}, FakeContext({"bolt1": [7, 8, 9]}, ["bolt1"]), out)
    bolt.execute(tup("prepare-request", "default", [3, "x y z"]))
    coords = [e for e in out.emits if e[0] == COORDINATED_STREAM_ID]
    assert coords == [(COORDINATED_STREAM_ID, 7, [3, 2]), (COORDINATED_STREAM_ID, 8, [3, 1]),
                      (COORDINATED_STREAM_ID, 9, [3, 0])]
    assert len(out.acked) == 1 and bolt._tracked == {}


def test_only_bolts_can_be_coordinated():
    with pytest.raises(TypeError, match="Bolt, BasicBolt or BatchBolt"):
        CoordinatedBolt(object())


# --- the builder ---------------------------------------------------------------------------
def inputs(topology, cid):
    return {(i.component, i.stream): (i.grouping.kind, i.grouping.fields)
            for i in topology.components[cid].inputs}


def test_the_reach_topology_is_wired_as_storms():
    from squall.examples.reach import construct
    t = construct().create_topology()
    assert list(t.components)[:8] == ["spout", "prepare-request", "bolt0", "bolt1", "bolt2",
                                      "bolt3", "bolt4", "bolt5"]
    assert inputs(t, "prepare-request") == {("spout", "default"): (g.NONE, [])}
    assert inputs(t, "bolt0") == {("prepare-request", "default"): (g.NONE, [])}
    assert inputs(t, "bolt1") == {("bolt0", "default"): (g.SHUFFLE, []),
                                  ("bolt0", "$coord"): (g.DIRECT, [])}
    assert inputs(t, "bolt2") == {("bolt1", "default"): (g.FIELDS, ["id", "follower"]),
                                  ("bolt1", "$coord"): (g.DIRECT, [])}
    assert inputs(t, "bolt3") == {("prepare-request", "id"): (g.FIELDS, ["request"]),
                                  ("bolt2", "default"): (g.FIELDS, ["id"]),
                                  ("bolt2", "$coord"): (g.DIRECT, [])}
    assert inputs(t, "bolt4") == {("bolt3", "default"): (g.FIELDS, ["id"]),
                                  ("prepare-request", "ret"): (g.FIELDS, ["request"])}
    assert inputs(t, "bolt5") == {("bolt4", "default"): (g.NONE, [])}
    assert [t.components[f"bolt{i}"].parallelism for i in range(4)] == [4, 12, 6, 3]
    assert t.components["bolt5"].conf["topology.executor.threaded"] is True
    assert t.components["bolt2"].streams["$coord"].direct
    coordinated = [t.components[f"bolt{i}"].instantiate() for i in range(4)]
    assert [c.sources for c in coordinated] == [{}, {"bolt0": True}, {"bolt1": False},
                                                {"bolt2": False}]
    assert [c.id_stream for c in coordinated] == [None, None, None, ("prepare-request", "id")]


class TwoStreams(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["id", "r"])
        declarer.declare_stream("other", ["id", "r"])


class ThreeFields(Bolt):
    def declare_output_fields(self, declarer):
        declarer.declare(["id", "r", "extra"])


@pytest.mark.parametrize("bolt,message", [
    (TwoStreams(), "must declare exactly one stream"),
    (ThreeFields(), "must emit two fields, the request id and the result"),
])
def test_the_last_bolt_must_emit_id_and_result(bolt, message):
    b = LinearDRPCTopologyBuilder("f")
    b.add_bolt(Split())
    b.add_bolt(bolt)
    with pytest.raises(InvalidTopology, match=message):
        b.create_topology()


def test_a_linear_topology_needs_a_bolt_and_takes_only_bolts():
    with pytest.raises(InvalidTopology, match="has no bolt"):
        LinearDRPCTopologyBuilder("f").create_topology()
    with pytest.raises(InvalidTopology, match="must be a Bolt, BasicBolt or BatchBolt"):
        LinearDRPCTopologyBuilder("f").add_bolt(object())


def test_declarer_groupings_and_conf_apply_to_the_previous_bolt():
    b = LinearDRPCTopologyBuilder("f")
    b.add_bolt(Split(), 2).add_configuration("topology.debug", True)
    b.add_bolt(Split(), 3).global_grouping().all_grouping()
    t = b.create_topology()
    assert t.components["bolt0"].conf["topology.debug"] is True
    assert [(i.component, i.grouping.kind) for i in t.components["bolt1"].inputs] == [
        ("bolt0", g.GLOBAL), ("bolt0", g.ALL), ("bolt0", g.DIRECT)]


# --- squall drpc ---------------------------------------------------------------------------
def test_squall_drpc_serves_until_a_signal_and_says_where():
    from squall.cli.daemons import run_drpc
    from squall.client.drpc import DRPCClient, DRPCExecutionException

    lines = []

    def wait():  # the "signal": a request to a function nobody serves, answered by timeout
        port = int(lines[0].split("execute on 127.0.0.1:")[1].split(",")[0])
        with DRPCClient("127.0.0.1", port, timeout=10) as client:
            with pytest.raises(DRPCExecutionException, match="timed out after 0.2 s"):
                client.execute("f", "x")
        return 15
    run_drpc({"drpc.bind.host": "127.0.0.1", "drpc.port": 0, "drpc.invocations.port": 0,
              "drpc.request.timeout.secs": 0.2}, lines.append, wait)
    assert lines[0].startswith("DRPC server running: execute on 127.0.0.1:")
    assert lines[1] == "DRPC server stopping (signal-15)"


def test_squall_drpc_refuses_a_public_address_without_tls():
    from squall.cli.daemons import run_drpc
    from squall.client.errors import SquallError

    with pytest.raises(SquallError, match="will not listen on 0.0.0.0:0 without authentication"):
        run_drpc({"drpc.port": 0, "drpc.invocations.port": 0}, print, lambda: 15)


def test_join_result_pairs_result_and_return_info_and_forgets_stale_halves():
    from squall.client.drpc import JoinResult

    join = JoinResult("prepare-request")
    out = FakeCollector()
    join.prepare({}, None, out)
    ret = tup("prepare-request", "ret", [5, '{"id": "1"}'])
    res = tup("bolt3", "default", [5, 16])
    join.execute(ret)
    assert out.emits == []
    join.execute(res)
    assert out.emits == [("default", 7, ["16", '{"id": "1"}'])] and out.acked == [res, ret]
    stale = tup("prepare-request", "ret", [6, '{"id": "2"}'])
    join.execute(stale)
    join._sweep(join._since[6] + join._expiry + 1)
    assert out.failed == [stale] and join._returns == {} and join._since == {}
