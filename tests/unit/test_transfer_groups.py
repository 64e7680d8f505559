"""A worker's outbound batches (worker/transfer.py's Outbox, the GROUPED frame) and their
receipt (worker/receiver.py): every tuple arrives, in order per source and stream, with its
ids; tracked and untracked tuples mix in one group; a frame over the size limit goes in
halves; malformed groups are dropped and counted; the older per-tuple DATA frame still
reads. Runs on the compiled build and, in CI's pure subset, on the source."""

from __future__ import annotations

import struct
from types import SimpleNamespace

import pytest

from squall.client.tuple import Fields
from squall.client.values import PLAIN
from squall.worker.frame import GROUPED, Codec, decode
from squall.worker.queue import Backpressure, Version
from squall.worker.receiver import Receiver
from squall.worker.transfer import Outbox, Transfer


class _Kept(Transfer):
    """Frames kept, not sent (no ZeroMQ here)."""

    def _send_frame(self, w, frame):
        self.sent.append((w, frame))


def _ws(**kw):
    ws = SimpleNamespace(
        conf={"topology.transfer.batch.size": 4}, values=PLAIN,
        task_worker={5: "w2", 6: "w2", 7: "w3"}, peers_version=Version(),
        max_frame_bytes=1 << 20,
        fields={("split", "default"): Fields(["word"]), ("split", "s2"): Fields(["a", "b"])},
        task_component={1: "split", 2: "split"}, live_workers=frozenset(("w2", "w3")),
        dropped_tuples=0, dropped_frames=0, topology_id="t", worker_id="w2",
        bp=Backpressure(False), report_error=lambda *a: None, queues={})
    for k, v in kw.items():
        setattr(ws, k, v)
    return ws


def _receiver(ws, got):
    rx = Receiver.__new__(Receiver)
    rx.ws = ws
    rx._src = {}
    rx._last_warn = 0.0
    rx._suppressed = 0
    ws.deliver = {t: (lambda tup, t=t: got.append((t, tup))) for t in (5, 6, 7)}
    return rx


def _pairs(raw):
    return None if raw is None else list(struct.unpack(f"<{len(raw) // 8}Q", raw))


def test_outbox_groups_by_destination_source_and_stream_and_keeps_ids_aligned():
    box = Outbox("w2")
    assert box.add(5, 1, "default", ["a"], None) == 1
    assert box.add(5, 1, "default", ["b"], {11: 3}) == 2  # first tracked: 0 0 before it
    assert box.add(6, 1, "default", ["c"], None) == 3
    assert box.add(5, 1, "default", ["d"], None) == 4  # back to the first group
    assert box.add_tracked(5, 2, "s2", ["e", 1], (1 << 64) - 1, 1 << 63) == 5
    assert box.add(5, 2, "s2", ["f", 2], {7: 1, 8: 2}) == 6  # two trees: by index
    groups = box.take()
    assert [(g[:4], _pairs(g[4]), g[5]) for g in groups] == [
        ([5, 1, "default", [["a"], ["b"], ["d"]]], [0, 0, 11, 3, 0, 0], None),
        ([6, 1, "default", [["c"]]], None, None),
        ([5, 2, "s2", [["e", 1], ["f", 2]]], [(1 << 64) - 1, 1 << 63, 0, 0], {1: {7: 1, 8: 2}})]
    assert box.n == 0 and box.take() == []


def test_a_channel_keeps_its_order_across_streams():
    """A barrier on another stream between two data tuples of one channel (task 1 -> 5)
    arrives between them: a group per run of one stream, in order."""
    box = Outbox("w2")
    box.add(5, 1, "default", ["a"], None)
    box.add(6, 1, "default", ["x"], None)
    box.add(5, 1, "$checkpoint", ["barrier"], None)
    box.add(6, 1, "default", ["y"], None)
    box.add(5, 1, "default", ["b"], None)
    groups = box.take()
    channel = [(g[2], v) for g in groups if g[:2] == [5, 1] for v in g[3]]
    assert channel == [("default", ["a"]), ("$checkpoint", ["barrier"]), ("default", ["b"])]
    assert [v for g in groups if g[:2] == [6, 1] for v in g[3]] == [["x"], ["y"]]
    assert len(groups) == 4


def test_every_tuple_arrives_with_its_ids_in_order_per_source_and_stream():
    ws = _ws()
    tr = _Kept(ws)
    tr.sent = []
    sent = []
    for i in range(23):  # batches of 4 to w2, the rest at the flush
        dest = 5 if i % 3 else 6
        ids = [None, {100 + i: i * 7 + 1}, {100 + i: 1, 200 + i: 2}][i % 3]
        if ids is not None and len(ids) == 1 and i % 2:
            tr.remote_tracked(dest, 1, "default", [f"w{i}"], 100 + i, i * 7 + 1)
        else:
            tr.remote(dest, 1, "default", [f"w{i}"], ids)
        sent.append((dest, [f"w{i}"], ids))
    tr.remote(7, 2, "s2", ["x", 2], {9: 9})
    assert tr.buffered == 24 - 4 * 5  # five full batches went as they filled
    tr.flush()
    assert tr.buffered == 0 and {w for w, _ in tr.sent} == {"w2", "w3"}
    got = []
    rx = _receiver(ws, got)
    for _, frame in tr.sent:
        assert decode(frame)[1] == GROUPED
        rx.handle(frame)
    for dest in (5, 6):  # each task's tuples in the order they were emitted
        assert [(t, tup.values, tup.ids) for t, tup in got if t == dest] == \
            [s for s in sent if s[0] == dest]
    assert len(got) == 24
    last = [tup for t, tup in got if t == 7][0]
    assert (last.values, last.ids, last.source_stream, last.source_task,
            last.source_component, last["b"]) == (["x", 2], {9: 9}, "s2", 2, "split", 2)
    assert ws.dropped_tuples == 0 and ws.dropped_frames == 0


def test_a_frame_over_the_limit_goes_in_halves_and_a_lone_tuple_that_big_is_dropped():
    errors = []
    ws = _ws(max_frame_bytes=200, report_error=lambda *a: errors.append(a))
    tr = _Kept(ws)
    tr.sent = []
    tr.batch_size = 100
    for i in range(6):
        tr.remote(5, 1, "default", ["v" * 40], None)
    tr.remote(5, 1, "default", ["x" * 500], None)  # alone in its half at the end
    tr.flush()
    assert all(len(f) <= 200 for _, f in tr.sent) and len(tr.sent) >= 3
    got = []
    rx = _receiver(ws, got)
    for _, frame in tr.sent:
        rx.handle(frame)
    assert [tup.values for _, tup in got] == [["v" * 40]] * 6
    assert ws.dropped_tuples == 1 and "exceeds topology.max.frame.bytes" in errors[0][2]


@pytest.mark.parametrize("groups, bad", [
    ([[5, 1, "default", [["a"]], None]], 1),                  # 5 entries
    ([[99, 1, "default", [["a"], ["b"]], None, None]], 2),    # unknown destination
    ([[5, 1, "nope", [["a"]], None, None]], 1),               # undeclared stream
    ([[5, 1, "default", "a", None, None]], 1),                # values not a list
    ([[5, 1, "default", [["a"], ["b"]], bytes(16), None]], 2),  # pairs too short
    ([[5, 1, "default", [["a"]], [1, 2], None]], 1),          # pairs not bytes
    ([[5, 1, "default", [["a"]], None, [1]]], 1),             # several not a map
    ([[5, 1, "default", [["a"], "b", ["c"]], None, {2: [1]}]], 2),  # a bad tuple each
])
def test_malformed_groups_are_dropped_and_counted_and_the_rest_delivered(groups, bad):
    ws = _ws()
    got = []
    rx = _receiver(ws, got)
    rx.handle(Codec().grouped(groups + [[6, 1, "default", [["ok"]], None, None]]))
    assert [tup.values for _, tup in got][-1] == ["ok"]
    assert ws.dropped_tuples == bad and ws.dropped_frames == 1


def test_the_per_tuple_data_frame_of_earlier_workers_still_reads():
    ws = _ws()
    got = []
    rx = _receiver(ws, got)
    rx.handle(Codec().data([[5, 1, "default", ["a"], {3: 4}], [6, 2, "s2", ["b", 1], None]]))
    assert [(t, tup.values, tup.ids, tup.source_stream) for t, tup in got] == [
        (5, ["a"], {3: 4}, "default"), (6, ["b", 1], None, "s2")]


def test_a_tuple_of_one_tree_keeps_its_ids_as_two_integers_and_shows_them_as_a_map():
    from squall.client.tuple import Tuple
    one = Tuple(["a"], "c", "default", 1, {(1 << 64) - 1: 5}, Fields(["w"]))
    assert (one.root, one.edge, one.ids) == ((1 << 64) - 1, 5, {(1 << 64) - 1: 5})
    two = Tuple(["a"], "c", "default", 1, {3: 5, 4: 6}, Fields(["w"]))
    assert (two.root, two.ids) == (0, {3: 5, 4: 6})
    odd = Tuple(["a"], "c", "default", 1, {0: 5}, Fields(["w"]))  # not a root id: as given
    assert (odd.root, odd.ids) == (0, {0: 5})
    assert Tuple(["a"], "c", "default", 1, None).ids is None
    assert Tuple(["a"], "c", "default", 1, {}).ids == {}
    one.ids = {7: 8, 9: 10}
    assert (one.root, one.ids) == (0, {7: 8, 9: 10})
    one.ids = {7: 8}
    assert (one.root, one.edge, one._ids) == (7, 8, None)
    import pickle
    back = pickle.loads(pickle.dumps(one))
    assert (back.root, back.edge, back.ids, back.values) == (7, 8, {7: 8}, ["a"])


def test_a_tracked_batch_over_the_limit_keeps_each_tuples_ids_in_its_half():
    ws = _ws(max_frame_bytes=300)
    tr = _Kept(ws)
    tr.sent = []
    tr.batch_size = 100
    sent = []
    for i in range(12):
        if i % 3 == 0:
            tr.remote(5, 1, "default", [f"v{i}" * 8], {10 + i: 1, 20 + i: 2})
            sent.append({10 + i: 1, 20 + i: 2})
        elif i % 3 == 1:
            tr.remote_tracked(5, 1, "default", [f"v{i}" * 8], 100 + i, 7)
            sent.append({100 + i: 7})
        else:
            tr.remote(5, 1, "default", [f"v{i}" * 8], None)
            sent.append(None)
    tr.flush()
    assert len(tr.sent) >= 2 and all(len(f) <= 300 for _, f in tr.sent)
    got = []
    rx = _receiver(ws, got)
    for _, frame in tr.sent:
        rx.handle(frame)
    assert [tup.ids for _, tup in got] == sent
    assert [tup.values for _, tup in got] == [[f"v{i}" * 8] for i in range(12)]


def test_step_acks_combine_per_root_and_empty_for_the_next_step():
    from squall.worker.collector import StepAcks
    acks = StepAcks()
    for step in range(3):  # the table is reused from step to step
        for i in range(2000):  # grows past its first size
            acks.xor(1000 + i % 700, i + step)
        acks.xor(1, 5)  # a reserved key of the table: kept aside
        acks.xor(1, 3)
        want: dict[int, int] = {1: 6}
        for i in range(2000):
            want[1000 + i % 700] = want.get(1000 + i % 700, 0) ^ (i + step)
        assert len(acks) == len(want) and dict(acks.items()) == want
        acks.clear()
        assert len(acks) == 0 and acks.items() == [] and not acks


def test_a_task_moved_to_another_worker_gets_the_new_workers_outbox_at_once():
    """The outbox of each task is cached by task id; a new assignment (WorkerState's
    update_peers: task_worker updated, then its version bumped) is followed by the very next
    tuple, and an outbox of a departed worker is never used again after the flush drops it."""
    ws = _ws()
    tr = _Kept(ws)
    tr.sent = []
    tr.remote(5, 1, "default", ["a"], None)
    tr.remote(7, 1, "default", ["b"], None)
    assert {w: b.n for w, b in tr.out.items()} == {"w2": 1, "w3": 1}
    ws.task_worker[5] = "w3"  # update_peers: the new worker first, then the version
    ws.peers_version.n += 1
    tr.remote(5, 1, "default", ["c"], None)
    assert {w: b.n for w, b in tr.out.items()} == {"w2": 1, "w3": 2}
    # w2 departs: the flush drops its batch (counted) and its outbox.
    ws.task_worker[6] = "w3"
    ws.live_workers = frozenset(("w3",))
    ws.peers_version.n += 1
    tr.flush()
    assert "w2" not in tr.out and ws.dropped_tuples == 1
    tr.remote(6, 1, "default", ["d"], None)
    tr.remote(5, 1, "default", ["e"], None)
    assert list(tr.out) == ["w3"] and tr.out["w3"].n == 2
    assert sorted(v[0] for w, f in tr.sent for g in decode(f, PLAIN)[2] for v in g[3]) == \
        ["b", "c"]
