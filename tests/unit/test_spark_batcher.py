"""Batcher: input tuples and fn outcomes in, RunBatch/ack/fail instructions out."""

import random

import pytest

from squall.client.spark.batcher import (AckTuples, Add, Batcher, BatchState, Done, Failed,
                                         FailTuples, Flush, ReportError, RunBatch, Tick,
                                         UnknownBatch)
from squall.client.transitions import InvalidTransition

import event_table


@pytest.fixture
def make():
    made = []

    def factory(max_batch_size=3, max_batch_secs=10.0, **kwargs):
        b = Batcher(max_batch_size, max_batch_secs, **kwargs)
        made.append(b)
        return b
    yield factory
    for b in made:
        b.validate_state()


def play(b, table):
    event_table.play(b.handle, table, after=lambda i: b.validate_state())


def add(tid, now=0.0):
    return Add(tid, (tid, f"v{tid}"), now)


def run(bid, *tids):
    return RunBatch(bid, tuple(tids), tuple((t, f"v{t}") for t in tids))


def test_closes_on_size_at_the_add(make):
    b = make(max_batch_size=3)
    play(b, [
        (add(1), []),
        (add(2), []),
        (add(3), [run(1, 1, 2, 3)]),
        (add(4), []),
        (Done(1), [AckTuples((1, 2, 3))]),
    ])
    assert b.open.tuple_ids == [4]


def test_closes_on_age_at_tick_and_reports_the_deadline(make):
    b = make(max_batch_size=100, max_batch_secs=5.0)
    assert b.next_deadline() is None
    play(b, [
        (add(1, now=10.0), []),
        (add(2, now=12.0), []),
        (Tick(14.9), []),
    ])
    assert b.next_deadline() == 15.0  # from the oldest tuple, not the newest
    play(b, [
        (Tick(15.0), [run(1, 1, 2)]),
        (Tick(30.0), []),
    ])
    assert b.next_deadline() is None


def test_an_overdue_batch_closes_before_a_late_tuple_joins_it(make):
    b = make(max_batch_size=100, max_batch_secs=5.0)
    play(b, [
        (add(1, now=0.0), []),
        (add(2, now=7.0), [run(1, 1)]),  # the timer fired late: 2 opens batch 2
    ])
    assert b.next_deadline() == 12.0
    play(b, [(Done(1), [AckTuples((1,))]), (Tick(12.0), [run(2, 2)])])


def test_an_empty_batch_never_runs(make):
    b = make(max_batch_secs=1.0)
    play(b, [
        (Tick(5.0), []),
        (Flush(6.0), []),
        (add(1, now=7.0), []),
        (Flush(7.5), [run(1, 1)]),
        (Tick(100.0), []),
        (Flush(101.0), []),
        (Done(1), [AckTuples((1,))]),
    ])
    assert b.idle
    play(b, [(add(2, now=200.0), [])])
    assert b.open.batch_id == 2  # ids count batches run, no gaps for empty windows


def test_in_flight_limit_keeps_closed_batches_in_order(make):
    b = make(max_batch_size=2, max_in_flight=1)
    play(b, [
        (add(1), []),
        (add(2), [run(1, 1, 2)]),
        (add(3), []),
        (add(4), []),  # batch 2 closes and waits
        (add(5), []),  # the new tuple goes to batch 3, open
        (add(6), []),  # batch 3 closes and waits behind 2
        (add(7), []),
    ])
    assert [w.batch_id for w in b.waiting] == [2, 3] and b.open.batch_id == 4
    assert b.pending == 7
    play(b, [
        (Done(1), [AckTuples((1, 2)), run(2, 3, 4)]),
        (Done(2), [AckTuples((3, 4)), run(3, 5, 6)]),
        (Flush(1.0), []),  # batch 4 closes and waits
        (Done(3), [AckTuples((5, 6)), run(4, 7)]),
        (Done(4), [AckTuples((7,))]),
    ])
    assert b.idle and b.pending == 0


def test_two_in_flight_may_answer_out_of_order(make):
    b = make(max_batch_size=1, max_in_flight=2)
    play(b, [
        (add(1), [run(1, 1)]),
        (add(2), [run(2, 2)]),
        (add(3), []),
        (Done(2), [AckTuples((2,)), run(3, 3)]),
        (Done(1), [AckTuples((1,))]),
        (Done(3), [AckTuples((3,))]),
    ])


def test_failed_fails_every_tuple_of_the_batch_and_reports(make):
    b = make(max_batch_size=2)
    err = RuntimeError("spark is down")
    play(b, [
        (add(1), []),
        (add(2), [run(1, 1, 2)]),
        (add(3), []),
        (add(4), []),
        (Failed(1, err), [FailTuples((1, 2)), ReportError(1, err), run(2, 3, 4)]),
        (Done(2), [AckTuples((3, 4))]),
    ])


def test_flush_closes_the_open_batch_whatever_its_size_and_age(make):
    b = make(max_batch_size=10, max_batch_secs=60.0)
    play(b, [
        (add(1, now=0.0), []),
        (add(2, now=1.0), []),
        (Flush(1.5), [run(1, 1, 2)]),
    ])
    assert b.open is None and not b.idle
    play(b, [(Done(1), [AckTuples((1, 2))])])
    assert b.idle


@pytest.mark.parametrize("answer", [Done, lambda i: Failed(i, "boom")])
def test_an_answer_for_an_unknown_batch_raises(make, answer):
    b = make(max_batch_size=1)
    with pytest.raises(UnknownBatch, match=r"batch 1, which is not in flight \(in flight: \[\]"):
        b.handle(answer(1))
    play(b, [(add(1), [run(1, 1)]), (add(2), [])])
    with pytest.raises(UnknownBatch) as info:
        b.handle(answer(2))  # closed and waiting, not yet run
    assert info.value.batch_id == 2 and info.value.in_flight == [1]
    b.handle(Done(1))
    with pytest.raises(UnknownBatch, match="Done for batch 1") as info:
        b.handle(Done(1))  # answered twice
    assert info.value.history[-1][1:] == (2, "WAITING", "IN_FLIGHT")


def test_a_transition_outside_the_table_raises(make):
    b = make(max_batch_size=1)
    b.handle(add(1))
    with pytest.raises(InvalidTransition, match="IN_FLIGHT -> OPEN"):
        b._set(b.in_flight[1], BatchState.OPEN, "bug")


def test_rejects_bad_limits():
    with pytest.raises(ValueError, match="max_batch_size"):
        Batcher(0, 1.0)
    with pytest.raises(ValueError, match="max_batch_secs"):
        Batcher(1, 0)
    with pytest.raises(ValueError, match="max_in_flight"):
        Batcher(1, 1.0, max_in_flight=0)
    with pytest.raises(TypeError, match="not a batcher event"):
        Batcher(1, 1.0).handle("tick")


@pytest.mark.parametrize("seed", range(30))
def test_random_every_tuple_acked_or_failed_exactly_once_in_arrival_order(seed):
    rng = random.Random(seed)
    size, secs = rng.randint(1, 5), rng.choice([0.5, 2.0, 10.0])
    b = Batcher(size, secs, max_in_flight=rng.randint(1, 3))
    now, next_tid = 0.0, 0
    running: dict[int, tuple] = {}
    run_order: list[int] = []
    batch_ids: list[int] = []
    outcome: dict[int, str] = {}

    def apply(ev):
        for inst in b.handle(ev):
            if isinstance(inst, RunBatch):
                assert 1 <= len(inst.tuple_ids) <= size
                assert [r[0] for r in inst.rows] == list(inst.tuple_ids)
                running[inst.batch_id] = inst.tuple_ids
                batch_ids.append(inst.batch_id)
                run_order.extend(inst.tuple_ids)
            elif isinstance(inst, (AckTuples, FailTuples)):
                for t in inst.ids:
                    assert t not in outcome, f"tuple {t} settled twice"
                    outcome[t] = "ack" if isinstance(inst, AckTuples) else "fail"
            else:  # reported after its batch's tuples were failed
                assert isinstance(inst, ReportError)
                assert inst.error == f"err {inst.batch_id}"
                assert all(outcome[t] == "fail" for t in running[inst.batch_id])
        b.validate_state()

    for _ in range(300):
        now += rng.choice([0.0, 0.1, 0.7, 3.0])
        r = rng.random()
        if r < 0.55:
            apply(Add(next_tid, (next_tid,), now))
            next_tid += 1
        elif r < 0.65:
            apply(Tick(now))
        elif r < 0.7:
            apply(Flush(now))
        elif b.in_flight:
            bid = rng.choice(sorted(b.in_flight))
            apply(Done(bid) if rng.random() < 0.7 else Failed(bid, f"err {bid}"))
    apply(Flush(now))
    while b.in_flight:
        bid = min(b.in_flight)
        apply(Done(bid))
    assert b.idle
    assert sorted(outcome) == list(range(next_tid))  # every tuple settled exactly once
    assert run_order == list(range(next_tid))  # batches hold tuples in arrival order
    assert batch_ids == list(range(1, len(batch_ids) + 1))  # ids from 1, run in order


def test_done_with_rejected_rows_fails_those_and_acks_the_rest(make):
    b = make(max_batch_size=3)
    play(b, [
        (add(1), []), (add(2), []), (add(3), [run(1, 1, 2, 3)]),
        (Done(1, rejected=(1,)), [AckTuples((1, 3)), FailTuples((2,))]),
        (add(4), []), (add(5), []), (add(6), [run(2, 4, 5, 6)]),
        (Done(2, rejected=(0, 1, 2)), [FailTuples((4, 5, 6))]),  # fn never saw a row
    ])
    play(b, [(add(7), []), (add(8), []), (add(9), [run(3, 7, 8, 9)])])
    with pytest.raises(ValueError, match="rejects rows"):
        b.handle(Done(3, rejected=(3,)))


def random_run(seed: int, max_size: int, rounds: int, max_step: int, add) -> list:
    """The instructions of a random run (adds, ticks, flushes, Done) where ``add(b, tids,
    now)`` adds a step of tuples its own way and returns their instructions."""
    rng = random.Random(seed)
    size, secs = rng.randint(1, max_size), rng.choice([0.5, 2.0, 10.0])
    b = Batcher(size, secs, max_in_flight=rng.randint(1, 3))
    now, tid, log = 0.0, 0, []
    for _ in range(rounds):
        now += rng.choice([0.0, 0.0, 0.1, 0.7, 3.0])
        r = rng.random()
        if r < 0.6:
            step = list(range(tid, tid + rng.randint(1, max_step)))
            tid += len(step)
            log += add(b, step, now)
        elif r < 0.7:
            log += b.handle(Tick(now))
        elif r < 0.75:
            log += b.handle(Flush(now))
        elif b.in_flight:
            log += b.handle(Done(rng.choice(sorted(b.in_flight))))
        b.validate_state()
    return log


def one_by_one(b, step, now):
    return [i for t in step for i in b.handle(Add(t, (t,), now))]


@pytest.mark.parametrize("seed", range(30))
def test_the_per_tuple_append_gives_what_add_gives(seed):
    """Batcher.append (the bolt's fast path) then Add when it declines: the same
    instructions, in the same order, as Add alone."""
    def appending(b, step, now):
        return [i for t in step if not b.append(t, (t,), now)
                for i in b.handle(Add(t, (t,), now))]
    slow = random_run(seed, 6, 400, 1, one_by_one)
    assert any(isinstance(i, RunBatch) for i in slow)
    assert random_run(seed, 6, 400, 1, appending) == slow


@pytest.mark.parametrize("seed", range(30))
def test_extending_by_a_step_gives_what_adding_one_by_one_gives(seed):
    """Batcher.extend (the bolt's execute_batch: a step of tuples at once), with Add for
    each one it declines: the same instructions, in the same order, as Add alone."""
    def extending(b, step, now):
        log, i = [], 0
        rows = [(t,) for t in step]
        while i < len(step):
            k = b.extend(step, rows, now, i)
            assert 0 <= k <= len(step) - i
            if k:
                i += k
            else:
                log += b.handle(Add(step[i], (step[i],), now))
                i += 1
            b.validate_state()
        return log
    slow = random_run(seed, 8, 300, 12, one_by_one)
    assert any(isinstance(i, RunBatch) for i in slow)
    assert random_run(seed, 8, 300, 12, extending) == slow
