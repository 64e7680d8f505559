"""BatchTracker: batch tuples in, executor instructions out (Storm's TridentBoltExecutor)."""

import itertools
import random

import pytest

from squall.client.trident.attempt import TransactionAttempt
from squall.client.transitions import InvalidTransition
from squall.client.trident.batch_tracker import (AckTuple, BatchStatus, BatchTracker,
                                                 CommitTuple, CoordCondition, CoordTuple,
                                                 DataTuple, DropBatch, Emitted, Execute,
                                                 Executed, ExecuteFailed, FailBatch, FailTuple,
                                                 FinishBatch, Finished, FinishFailed, Rotate,
                                                 SendCoord, StartBatch, Tick)

import event_table

A = TransactionAttempt
B = A(1, 0)
_ids = itertools.count()


def sid():
    return f"stim-{next(_ids)}"


def data(tid, b=B):
    return DataTuple(b, tid, stimulus_id=sid())


def coord(count, tid, b=B):
    return CoordTuple(b, count, tid, stimulus_id=sid())


def commit(tid, b=B):
    return CommitTuple(b, tid, stimulus_id=sid())


def executed(tid, b=B):
    return Executed(b, tid, stimulus_id=sid())


def emitted(task, b=B):
    return Emitted(b, task, stimulus_id=sid())


def finished(b=B):
    return Finished(b, stimulus_id=sid())


def rotate():
    return Rotate(stimulus_id=sid())


#: A bolt fed by two upstream tasks, sending coordination tuples to tasks 7 and 8.
BOLT = CoordCondition(2, committer=False, target_tasks={7, 8})
#: A committer fed by one upstream task, with no batch executor downstream.
COMMITTER = CoordCondition(1, committer=True)
#: A spout executor: finishes each $batch tuple at once; downstream tasks 5, 6 and 9.
SPOUT = CoordCondition(0, committer=False, target_tasks={5, 6, 9})


@pytest.fixture
def make():
    made = []

    def factory(cond=BOLT, **kwargs):
        bt = BatchTracker(cond, **kwargs)
        made.append(bt)
        return bt
    yield factory
    for bt in made:
        bt.validate_state()


def play(bt, table):
    event_table.play(bt.handle, table, after=lambda i: bt.validate_state(quiescent=False))


def test_coord_condition_counts_upstream_task_reports():
    cond = CoordCondition.from_upstream({"each": 3, "trigger": 2}, committer=True,
                                        target_tasks=[4, 4, 5], single={"trigger"})
    assert cond == CoordCondition(4, True, frozenset({4, 5}))
    with pytest.raises(ValueError):
        CoordCondition(0, committer=True)


def test_batch_finishes_once_when_all_reports_and_tuples_are_in(make):
    bt = make()
    play(bt, [
        (data("a1"), [StartBatch(B), Execute(B, "a1")]),
        (emitted(7), []),
        (executed("a1"), [AckTuple("a1")]),
        (data("b1"), [Execute(B, "b1")]),
        (emitted(7), []),
        (executed("b1"), [AckTuple("b1")]),
        (coord(1, "cB"), []),  # task B's report (after its data): held until finish
        (data("a2"), [Execute(B, "a2")]),  # task A's data after B's report
        (executed("a2"), [AckTuple("a2")]),
        (coord(2, "cA"), [FinishBatch(B)]),
        (emitted(8), []),  # finish_batch emits too (an aggregator's result)
        (finished(), [SendCoord(B, {7: 2, 8: 1}, "cA"), AckTuple("cB"), AckTuple("cA")]),
        (coord(2, "cA-again"), [FailTuple("cA-again")]),  # never a second finish
        (data("late"), [FailTuple("late")]),
    ])
    assert bt.batches[1].status is BatchStatus.FINISHED


def test_reports_may_come_before_any_data(make):
    bt = make()
    play(bt, [
        (coord(0, "cA"), [StartBatch(B)]),  # task A sent nothing here
        (coord(1, "cB"), [FailBatch(B), FailTuple("cA"), FailTuple("cB")]),
    ])  # B's report follows B's data on one ordered channel: b1 was lost, fail at once
    bt2 = make()
    play(bt2, [
        (coord(0, "cA"), [StartBatch(B)]),
        (data("b1"), [Execute(B, "b1")]),
        (executed("b1"), [AckTuple("b1")]),
        (coord(1, "cB"), [FinishBatch(B)]),
        (finished(), [SendCoord(B, {7: 0, 8: 0}, "cB"), AckTuple("cA"), AckTuple("cB")]),
    ])


def test_count_mismatch_fails_the_batch(make):
    bt = make()
    play(bt, [
        (data("a1"), [StartBatch(B), Execute(B, "a1")]),
        (executed("a1"), [AckTuple("a1")]),
        (coord(2, "cA"), []),
        (coord(0, "cB"), [FailBatch(B), FailTuple("cA"), FailTuple("cB")]),
        (data("a2"), [FailTuple("a2")]),  # too late: the attempt has failed
    ])


def test_too_many_reports_fail_the_batch(make):
    bt = make(COMMITTER)  # a committer keeps counting reports until its commit
    play(bt, [
        (coord(0, "c1"), [StartBatch(B), AckTuple("c1")]),
        (coord(0, "c2"), [FailBatch(B), FailTuple("c2")]),
        (commit("k"), [FailTuple("k")]),
    ])


def test_a_higher_attempt_replaces_the_tracked_one(make):
    bt = make()
    b1 = A(1, 1)
    play(bt, [
        (data("x", B), [StartBatch(B), Execute(B, "x")]),
        (emitted(7, B), []),
        (executed("x", B), [AckTuple("x")]),
        (coord(1, "c0", B), []),
        (data("y", b1), [DropBatch(B), StartBatch(b1), Execute(b1, "y")]),
        (emitted(7, B), []),  # the old attempt's emits no longer count
        (executed("y", b1), [AckTuple("y")]),
        (coord(1, "c-old", B), []),  # lower attempt: ignored (left unacked, as Storm)
        (coord(1, "c1", b1), []),
        (coord(0, "c2", b1), [FinishBatch(b1)]),
        (finished(b1), [SendCoord(b1, {7: 0, 8: 0}, "c2"), AckTuple("c1"), AckTuple("c2")]),
    ])


def test_a_lower_attempt_is_ignored(make):
    bt = make()
    play(bt, [
        (data("n", A(1, 2)), [StartBatch(A(1, 2)), Execute(A(1, 2), "n")]),
        (executed("n", A(1, 2)), [AckTuple("n")]),
        (data("o", A(1, 1)), []),
        (coord(5, "o2", A(1, 0)), []),
    ])
    assert bt.batches[1].batch == A(1, 2) and bt.batches[1].received == 1


def test_batches_of_different_txids_are_independent(make):
    bt = make()
    b2 = A(2, 0)
    play(bt, [
        (coord(0, "a1", B), [StartBatch(B)]),
        (coord(0, "a2", b2), [StartBatch(b2)]),
        (coord(0, "b2", b2), [FinishBatch(b2)]),
        (finished(b2), [SendCoord(b2, {7: 0, 8: 0}, "b2"), AckTuple("a2"), AckTuple("b2")]),
        (coord(0, "b1", B), [FinishBatch(B)]),
        (finished(B), [SendCoord(B, {7: 0, 8: 0}, "b1"), AckTuple("a1"), AckTuple("b1")]),
    ])


def test_committer_waits_for_the_commit(make):
    bt = make(COMMITTER)
    play(bt, [
        (data("d1"), [StartBatch(B), Execute(B, "d1")]),
        (executed("d1"), [AckTuple("d1")]),
        (coord(1, "c"), [AckTuple("c")]),  # acked now, so the batch tree can complete
        (commit("k"), [FinishBatch(B)]),  # the commit's ack waits for the finish
        (finished(), [AckTuple("k")]),  # no downstream batch executor: no SendCoord
    ])


def test_committer_with_commit_before_the_last_report(make):
    bt = make(COMMITTER)
    play(bt, [
        (commit("k"), [StartBatch(B)]),
        (data("d1"), [Execute(B, "d1")]),
        (executed("d1"), [AckTuple("d1")]),
        (coord(1, "c"), [FinishBatch(B)]),
        (finished(), [AckTuple("k"), AckTuple("c")]),
    ])


def test_commit_or_coord_where_none_is_expected_is_refused(make):
    with pytest.raises(ValueError):
        make(BOLT).handle(commit("k"))
    with pytest.raises(ValueError):
        make(SPOUT).handle(coord(1, "c"))


def test_failed_exception_in_execute_fails_the_batch(make):
    bt = make()
    play(bt, [
        (coord(1, "cB"), [StartBatch(B)]),
        (data("a1"), [Execute(B, "a1")]),
        (ExecuteFailed(B, "a1", report_error=True, stimulus_id=sid()),
         [FailBatch(B, report_error=True), FailTuple("cB"), FailTuple("a1")]),
        (coord(1, "cA"), [FailTuple("cA")]),
        (emitted(7), []),
    ])


def test_failed_exception_in_finish_batch_fails_the_held_tuples(make):
    bt = make()
    play(bt, [
        (coord(0, "cA"), [StartBatch(B)]),
        (coord(0, "cB"), [FinishBatch(B)]),
        (FinishFailed(B, stimulus_id=sid()), [FailBatch(B), FailTuple("cA"), FailTuple("cB")]),
    ])


def test_spout_executor_finishes_each_batch_tuple_with_its_counts(make):
    bt = make(SPOUT)
    b2 = A(2, 0)
    play(bt, [
        (data("batch-1"), [StartBatch(B), Execute(B, "batch-1")]),
        (emitted(5), []), (emitted(5), []), (emitted(6), []), (emitted(11), []),
        (executed("batch-1"), [FinishBatch(B)]),
        (finished(), [SendCoord(B, {5: 2, 6: 1, 9: 0}, "batch-1"), AckTuple("batch-1")]),
        (data("batch-2", b2), [StartBatch(b2), Execute(b2, "batch-2")]),
        (ExecuteFailed(b2, "batch-2", stimulus_id=sid()), [FailBatch(b2), FailTuple("batch-2")]),
        (data("batch-2'", A(2, 1)), [StartBatch(A(2, 1)), Execute(A(2, 1), "batch-2'")]),
    ])
    bt.handle(executed("batch-2'", A(2, 1)))
    bt.handle(finished(A(2, 1)))


def test_rotation_drops_batches_older_than_the_previous_rotation(make):
    bt = make()
    b2, b3 = A(2, 0), A(3, 0)
    play(bt, [
        (coord(0, "x1", B), [StartBatch(B)]),
        (coord(0, "y3", b3), [StartBatch(b3)]),
        (coord(0, "z3", b3), [FinishBatch(b3)]),
        (finished(b3), [SendCoord(b3, {7: 0, 8: 0}, "z3"), AckTuple("y3"), AckTuple("z3")]),
        (rotate(), []),  # everything survives one rotation
        (coord(0, "x2", b2), [StartBatch(b2)]),
        (rotate(), [DropBatch(B)]),  # the finished 3 goes silently; 2 is younger
        (rotate(), [DropBatch(b2)]),
        (coord(0, "x1-late", B), [StartBatch(B)]),  # tracked afresh, as Storm
    ])
    assert set(bt.batches) == {1}


def test_tick_rotates_once_the_message_timeout_passed(make):
    bt = make(message_timeout_secs=30)
    play(bt, [
        (coord(0, "x"), [StartBatch(B)]),
        (Tick(100.0, stimulus_id=sid()), []),  # the clock starts
        (Tick(130.0, stimulus_id=sid()), []),  # not more than 30s
        (Tick(130.5, stimulus_id=sid()), []),  # rotation 1
        (Tick(150.0, stimulus_id=sid()), []),
        (Tick(161.0, stimulus_id=sid()), [DropBatch(B)]),  # rotation 2
    ])


def test_protocol_violations_raise_with_history(make):
    bt = make()
    bt.handle(coord(0, "cA"))
    with pytest.raises(InvalidTransition) as e:
        bt.handle(finished())  # no FinishBatch was asked for
    assert (e.value.key, e.value.from_state, e.value.to_state) == (
        1, BatchStatus.TRACKING, "Finished")
    assert e.value.history[-1][1:] == (1, "None", "TRACKING")
    with pytest.raises(InvalidTransition):
        bt.handle(executed("nope", A(4, 0)))  # an untracked batch
    bt.handle(coord(0, "cB"))  # -> FINISHING
    bt.handle(rotate())
    with pytest.raises(InvalidTransition) as e:
        bt.handle(rotate())  # would expire a batch whose finish_batch is running
    assert (e.value.from_state, e.value.to_state) == (BatchStatus.FINISHING, None)
    assert bt.generation == 1 and bt.batches[1].status is BatchStatus.FINISHING  # unchanged
    bt.handle(finished())


def test_unknown_events_are_a_type_error(make):
    with pytest.raises(TypeError):
        make().handle(("tuple", 1))


def _drive(bt, channels, rng, fast):
    """Deliver the channels in a random interleaving; with ``fast`` a data tuple first tries
    accept_data (the executor's per-tuple path). Returns (instructions, finishes, sent)."""
    out, finishes, sent = [], 0, {7: 0, 8: 0}
    while any(channels):
        ch = rng.choice([c for c in channels if c])
        ev = ch.pop(0)
        task = rng.choice([7, 8])
        if fast and isinstance(ev, DataTuple):
            t = bt.accept_data(ev.batch)
            if t is not None:
                sent[task] += 1
                bt.add_emitted(t, [task])
                out.append(AckTuple(ev.tuple_id))
                bt.validate_state()
                continue
        for inst in bt.handle(ev):
            if isinstance(inst, Execute):
                sent[task] += 1
                bt.handle(emitted(task))
                out += bt.handle(executed(inst.tuple_id))
            elif isinstance(inst, FinishBatch):
                finishes += 1
                out += bt.handle(finished())
            else:
                out.append(inst)
        bt.validate_state()
    return out, finishes, sent


@pytest.mark.parametrize("seed", range(40))
def test_random_arrival_orders_finish_exactly_once_with_exact_counts(make, seed):
    """Three upstream tasks; each task's data precedes its report, channels interleave."""
    rng = random.Random(seed)
    bt = make(CoordCondition(3, committer=rng.random() < 0.5, target_tasks={7, 8}))
    channels = []
    for task in range(3):
        n = rng.randint(0, 4)
        channels.append([data(f"d{task}.{i}") for i in range(n)] + [coord(n, f"c{task}")])
    if bt.condition.committer:
        channels.append([commit("k")])
    every_tuple = sorted(e.tuple_id for ch in channels for e in ch)
    out, finishes, sent = _drive(bt, channels, rng, fast=False)
    assert finishes == 1
    [send] = [i for i in out if isinstance(i, SendCoord)]
    assert (send.batch, send.task_counts) == (B, sent)
    assert sorted(i.tuple_id for i in out if isinstance(i, AckTuple)) == every_tuple
    assert not any(isinstance(i, (FailTuple, FailBatch)) for i in out)


@pytest.mark.parametrize("seed", range(40))
def test_the_per_tuple_fast_path_gives_what_the_events_give(make, seed):
    committer = random.Random(seed).random() < 0.5
    results = []
    for fast in (False, True):
        rng = random.Random(seed)
        bt = make(CoordCondition(3, committer=committer, target_tasks={7, 8}))
        channels = []
        for task in range(3):
            n = rng.randint(0, 6)
            channels.append([data(f"d{task}.{i}") for i in range(n)] + [coord(n, f"c{task}")])
        if committer:
            channels.append([commit("k")])
        out, finishes, sent = _drive(bt, channels, rng, fast)
        assert finishes == 1
        [send] = [i for i in out if isinstance(i, SendCoord)]
        assert send.task_counts == sent
        results.append((sorted(i.tuple_id for i in out if isinstance(i, AckTuple)),
                        send.task_counts, [type(i).__name__ for i in out
                                           if not isinstance(i, AckTuple)]))
    assert results[0] == results[1]


def test_the_fast_path_declines_what_only_the_events_handle(make):
    spout = make(SPOUT)
    assert spout.accept_data(B) is None  # a spout executor finishes on its one tuple
    bolt = make()
    assert bolt.accept_data(B) is None  # not tracked yet: StartBatch comes from handle
    assert bolt.handle(data("d1")) == [StartBatch(B), Execute(B, "d1")]
    bolt.handle(executed("d1"))
    t = bolt.accept_data(B)
    assert t is not None and t.received == 2
    assert bolt.accept_data(A(1, 1)) is None  # a newer attempt supersedes: events
    assert bolt.accept_data(A(2, 0)) is None  # another txid, untracked
    bolt.add_emitted(t, [7, 7, 8])
    for c in ("c1", "c2"):
        out = bolt.handle(coord(1, c))
    assert out == [FinishBatch(B)]
    assert bolt.accept_data(B) is None  # finishing: a late tuple takes the full path (fails)
    assert bolt.handle(finished())[0] == SendCoord(B, {7: 2, 8: 1}, "c2")
