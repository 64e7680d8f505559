"""MasterCoordinator: spout stimuli in, emits and persists out (Storm's MasterBatchCoordinator)."""

import itertools
import json
import random

import msgpack
import pytest

from squall.client.config import TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS
from squall.client.transitions import InvalidTransition
from squall.client.trident.attempt import (BATCH_STREAM, COMMIT_STREAM, SUCCESS_STREAM,
                                           TransactionAttempt, coord_stream, master_coordinator,
                                           spout_coordinator)
from squall.client.trident.coordinator import (Ack, Activate, AttemptStatus, Deactivate,
                                               EmitBatch, EmitCommit, EmitSuccess, Fail,
                                               MasterCoordinator, PersistAttempts,
                                               PersistCurrentTx, Restore, Sync)

import event_table

A = TransactionAttempt
_ids = itertools.count()


def sid():
    return f"stim-{next(_ids)}"


def sync(now=0.0):
    return Sync(now, stimulus_id=sid())


def ack(txid, attempt=0, now=0.0):
    return Ack(A(txid, attempt), now, stimulus_id=sid())


def fail(txid, attempt=0, now=0.0):
    return Fail(A(txid, attempt), now, stimulus_id=sid())


def batch(txid, attempt, attempts):
    """What starting a batch looks like: persist the attempt ids, then emit."""
    return [PersistAttempts(attempts), EmitBatch(A(txid, attempt))]


@pytest.fixture
def make():
    """A factory of coordinators (no throttle unless asked); each is validated at teardown."""
    made = []

    def factory(max_active=3, interval=None, **kwargs):
        m = MasterCoordinator(max_active, interval, **kwargs)
        made.append(m)
        return m
    yield factory
    for m in made:
        m.validate_state()


def play(m, table):
    event_table.play(m.handle, table, after=lambda i: m.validate_state())


# -- TransactionAttempt and names ---------------------------------------------------------

def test_attempt_round_trips_and_orders_by_txid():
    a = A(7, 2)
    assert A.from_list(a.to_list()) == a and a.to_list() == [7, 2] and str(a) == "7:2"
    assert A.from_list(json.loads(json.dumps(a.to_list()))) == a
    assert A.from_list(msgpack.unpackb(msgpack.packb(a.to_list()))) == a
    assert sorted([A(3, 0), A(1, 5), A(2, 1), A(1, 0)]) == [A(1, 0), A(1, 5), A(2, 1), A(3, 0)]
    assert a.id == 7 and hash(a) == hash(A(7, 2)) and a != A(7, 3)
    with pytest.raises(ValueError):
        A(-1, 0)
    with pytest.raises(ValueError):
        A.from_list([1])


def test_stream_and_component_names_are_storms():
    assert (BATCH_STREAM, COMMIT_STREAM, SUCCESS_STREAM) == ("$batch", "$commit", "$success")
    assert coord_stream("bg0") == "$coord-bg0"
    assert master_coordinator("bg0") == "$mastercoord-bg0"
    assert spout_coordinator("spout0") == "$spoutcoord-spout0"


# -- starting batches ---------------------------------------------------------------------

def test_first_sync_starts_batches_up_to_max_pending(make):
    m = make(max_active=3)
    play(m, [
        (sync(), batch(1, 0, {1: 0}) + batch(2, 0, {1: 0, 2: 0})
         + batch(3, 0, {1: 0, 2: 0, 3: 0})),
        (sync(), []),  # three active: nothing more
    ])
    assert {t: s.status for t, s in m.active.items()} == {
        1: AttemptStatus.PROCESSING, 2: AttemptStatus.PROCESSING, 3: AttemptStatus.PROCESSING}


def test_from_conf_defaults_to_one_pending_and_500ms():
    m = MasterCoordinator.from_conf({})
    assert (m.max_transaction_active, m.emit_interval_secs) == (1, 0.5)
    m = MasterCoordinator.from_conf({"topology.max.spout.pending": 4,
                                     TOPOLOGY_TRIDENT_BATCH_EMIT_INTERVAL_MILLIS: 50})
    assert (m.max_transaction_active, m.emit_interval_secs) == (4, 0.05)


def test_throttle_starts_one_batch_per_emit_interval_window(make):
    m = make(max_active=3, interval=0.5)
    play(m, [
        (sync(10.0), batch(1, 0, {1: 0})),  # the window opens at 10.0
        (sync(10.3), []),
        (sync(10.5), []),  # Storm resets only once strictly more than the interval passed
        (sync(10.51), batch(2, 0, {1: 0, 2: 0})),  # new window from 10.51
        (sync(11.0), []),
        (sync(11.02), batch(3, 0, {1: 0, 2: 0, 3: 0})),
    ])


def test_spouts_not_ready_for_a_txid_skip_it_but_not_later_ones(make):
    ready = {1, 3}
    m = make(max_active=3, spouts_ready=lambda txid: txid in ready)
    play(m, [(sync(), batch(1, 0, {1: 0}) + batch(3, 0, {1: 0, 3: 0}))])
    ready.add(2)
    play(m, [(sync(), batch(2, 0, {1: 0, 3: 0, 2: 0}))])


# -- processing, commit, success ----------------------------------------------------------

def test_only_the_current_txid_commits_and_success_starts_the_next(make):
    m = make(max_active=3)
    m.handle(sync())
    play(m, [
        (ack(2), []),  # processed, but txid 1 has not committed: wait
        (sync(), []),
        (ack(1), [EmitCommit(A(1, 0))]),
        (ack(3), []),
        (sync(), []),  # txid 1 is committing; 2 and 3 processed
        (ack(1), [EmitSuccess(A(1, 0)), PersistCurrentTx(2), EmitCommit(A(2, 0))]
         + batch(4, 0, {2: 0, 3: 0, 4: 0})),
        (ack(2), [EmitSuccess(A(2, 0)), PersistCurrentTx(3), EmitCommit(A(3, 0))]
         + batch(5, 0, {3: 0, 4: 0, 5: 0})),
    ])
    assert m.current_txid == 3
    assert m.active[3].status is AttemptStatus.COMMITTING


def test_duplicate_and_stale_acks_are_ignored(make):
    m = make(max_active=1)
    play(m, [
        (sync(), batch(1, 0, {1: 0})),
        (ack(1, 1), []),  # an attempt never emitted
        (ack(1), [EmitCommit(A(1, 0))]),
        (ack(1), [EmitSuccess(A(1, 0)), PersistCurrentTx(2)] + batch(2, 0, {2: 0})),
        (ack(1), []),  # txid 1 committed already
        (fail(1), []),
        (ack(9), []),
    ])


def test_deactivate_stops_new_batches_but_commits_continue(make):
    m = make(max_active=2)
    m.handle(sync())
    play(m, [
        (Deactivate(stimulus_id=sid()), []),
        (ack(1), [EmitCommit(A(1, 0))]),
        (ack(1), [EmitSuccess(A(1, 0)), PersistCurrentTx(2)]),  # a slot is free: no batch 3
        (sync(), []),
        (ack(2), [EmitCommit(A(2, 0))]),
        (Activate(stimulus_id=sid()), []),  # as Storm: takes effect at the next sync
        (sync(), batch(3, 0, {2: 0, 3: 0})),
    ])


# -- failures -----------------------------------------------------------------------------

def test_fail_re_emits_the_txid_and_every_later_one_with_higher_attempts(make):
    m = make(max_active=3)
    m.handle(sync())
    play(m, [
        (ack(3), []),
        (fail(2), batch(2, 1, {1: 0, 2: 1, 3: 0}) + batch(3, 1, {1: 0, 2: 1, 3: 1})),
        (ack(3), []),  # the dropped attempt 3:0 is stale now
        (fail(3), []),  # and so is its failure (Storm would drop 3:1 here)
        (fail(2), []),
        (ack(1), [EmitCommit(A(1, 0))]),
    ])
    assert m.active[3].attempt == A(3, 1) and m.active[3].status is AttemptStatus.PROCESSING


def test_failed_commit_re_emits_the_batch(make):
    m = make(max_active=1)
    play(m, [
        (sync(), batch(1, 0, {1: 0})),
        (ack(1), [EmitCommit(A(1, 0))]),
        (fail(1), batch(1, 1, {1: 1})),  # the whole batch is redone, not just the commit
        (ack(1, 1), [EmitCommit(A(1, 1))]),
        (ack(1, 1), [EmitSuccess(A(1, 1)), PersistCurrentTx(2)] + batch(2, 0, {2: 0})),
    ])


def test_failure_while_throttled_re_emits_at_the_next_window(make):
    m = make(max_active=2, interval=1.0)
    play(m, [
        (sync(0.0), batch(1, 0, {1: 0})),
        (sync(1.5), batch(2, 0, {1: 0, 2: 0})),
        (fail(1, now=2.0), []),  # both dropped; the window that opened at 1.5 is used up
        (sync(2.6), batch(1, 1, {1: 1, 2: 0})),
        (sync(3.7), batch(2, 1, {1: 1, 2: 1})),
    ])


# -- restore ------------------------------------------------------------------------------

def test_restore_resumes_at_the_stored_txid_with_higher_attempts(make):
    m = make(max_active=2)
    play(m, [
        (Restore(5, {"4": 9, "5": 2, "6": 0, "9": 1}, stimulus_id=sid()), []),
        (sync(), batch(5, 3, {5: 3, 6: 0}) + batch(6, 1, {5: 3, 6: 1})),
    ])


def test_restore_with_one_pending_keeps_the_current_attempt(make):
    m = make(max_active=1)
    play(m, [
        (Restore(5, {"5": 2}, stimulus_id=sid()), []),
        (sync(), batch(5, 3, {5: 3})),  # Storm 2.x would emit 5:0 here
    ])


def test_restore_of_a_fresh_topology_starts_at_txid_1(make):
    m = make(max_active=1)
    play(m, [(Restore(None, {}, stimulus_id=sid()), []), (sync(), batch(1, 0, {1: 0}))])


def test_restore_merges_the_states_of_all_managed_spouts():
    r = Restore.merged([(3, {"3": 1}), (5, {"5": 0, "3": 4}), (None, None)], stimulus_id="open")
    assert (r.current_txid, dict(r.attempt_ids)) == (5, {3: 4, 5: 0})


def test_a_restart_from_the_persisted_instructions_continues(make):
    """Write what the instructions persist to a fake store; restart from it."""
    store = {}

    def run(m, event):
        out = m.handle(event)
        for i in out:
            if isinstance(i, PersistCurrentTx):
                store["currtx"] = i.txid
            elif isinstance(i, PersistAttempts):
                store["currattempts"] = json.loads(json.dumps(i.to_json()))
        return out

    m = make(max_active=2)
    run(m, sync())
    run(m, ack(1))
    run(m, ack(1))  # txid 1 succeeds, txid 3 starts
    run(m, fail(2))  # 2:1 and 3:1
    assert store == {"currtx": 2, "currattempts": {"2": 1, "3": 1}}
    m2 = make(max_active=2)
    run(m2, Restore(store.get("currtx"), store["currattempts"], stimulus_id=sid()))
    assert run(m2, sync()) == batch(2, 2, {2: 2, 3: 1}) + batch(3, 2, {2: 2, 3: 2})


# -- invalid transitions ------------------------------------------------------------------

def test_restore_after_the_first_batch_is_refused_with_history(make):
    m = make(max_active=1)
    m.handle(sync())
    with pytest.raises(InvalidTransition) as e:
        m.handle(Restore(1, {}, stimulus_id="late-open"))
    assert e.value.key == "coordinator" and e.value.stimulus_id == "late-open"
    assert [h[1:] for h in e.value.history] == [("coordinator", "NEW", "RUNNING"),
                                                 (1, "None", "PROCESSING")]
    assert "NEW->RUNNING" in str(e.value)


def test_status_changes_outside_the_table_raise_with_history(make):
    m = make(max_active=2)
    m.handle(sync())
    m.handle(ack(2))
    # _set is the single choke point every handler goes through.
    with pytest.raises(InvalidTransition) as e:
        m._set(2, AttemptStatus.PROCESSING, "bug")
    assert (e.value.key, e.value.from_state, e.value.to_state) == (
        2, AttemptStatus.PROCESSED, AttemptStatus.PROCESSING)
    assert e.value.history[-1][1:] == (2, "PROCESSING", "PROCESSED")
    with pytest.raises(InvalidTransition):
        m._set(1, AttemptStatus.COMMITTING, "bug")  # PROCESSING cannot commit
    assert m.active[1].status is AttemptStatus.PROCESSING  # nothing changed


def test_unknown_events_are_a_type_error(make):
    with pytest.raises(TypeError):
        make().handle("next_tuple")


# -- randomized interleavings -------------------------------------------------------------

@pytest.mark.parametrize("seed", range(60))
def test_random_acks_fails_and_restarts_commit_each_txid_once_in_order(seed):
    rng = random.Random(seed)
    max_active = rng.randint(1, 4)
    interval = rng.choice([None, 0.5])
    m = MasterCoordinator(max_active, interval)
    store: dict = {}
    in_flight: list[A] = []  # trees (batch or commit) whose ack/fail has not come yet
    stale: list[A] = []  # every attempt ever emitted, for duplicate/stale events
    successes: list[int] = []
    last_attempt: dict[int, int] = {}
    now = 0.0
    for _ in range(400):
        now += rng.choice([0.0, 0.1, 0.6])
        r = rng.random()
        if r < 0.3 or not in_flight:
            event = Sync(now, stimulus_id=sid())
        elif r < 0.85:
            tree = in_flight.pop(rng.randrange(len(in_flight)))
            kind = Ack if rng.random() < 0.8 else Fail
            event = kind(tree, now, stimulus_id=sid())
        elif r < 0.93 and stale:
            event = rng.choice([Ack, Fail])(rng.choice(stale), now, stimulus_id=sid())
        elif r < 0.97:
            event = rng.choice([Activate, Deactivate])(stimulus_id=sid())
        else:  # the coordinator's worker restarts; its pending trees are lost
            m = MasterCoordinator(max_active, interval)
            m.handle(Restore(store.get("currtx"), store.get("currattempts", {}),
                             stimulus_id=sid()))
            in_flight.clear()
            continue
        for inst in m.handle(event):
            if isinstance(inst, (EmitBatch, EmitCommit)):
                in_flight.append(inst.attempt)
                stale.append(inst.attempt)
            if isinstance(inst, EmitBatch):
                a = inst.attempt
                assert a.attempt_id > last_attempt.get(a.txid, -1), "attempt ids must grow"
                last_attempt[a.txid] = a.attempt_id
            elif isinstance(inst, EmitCommit):
                assert inst.attempt.txid == m.current_txid
                assert inst.attempt.txid == (successes[-1] + 1 if successes else 1)
            elif isinstance(inst, EmitSuccess):
                successes.append(inst.attempt.txid)
            elif isinstance(inst, PersistCurrentTx):
                store["currtx"] = inst.txid
            elif isinstance(inst, PersistAttempts):
                store["currattempts"] = json.loads(json.dumps(inst.to_json()))
        m.validate_state()
    assert successes == list(range(1, len(successes) + 1))  # in order, each exactly once
    # Liveness: with only acks from here on, the current txid commits.
    m.handle(Activate(stimulus_id=sid()))
    committed_before = len(successes)
    for _ in range(20):
        now += 1.0
        done = m.handle(Sync(now, stimulus_id=sid()))
        for tree in in_flight + [i.attempt for i in done if isinstance(i, (EmitBatch,
                                                                           EmitCommit))]:
            for inst in m.handle(Ack(tree, now, stimulus_id=sid())):
                if isinstance(inst, EmitSuccess):
                    successes.append(inst.attempt.txid)
                elif isinstance(inst, (EmitBatch, EmitCommit)):
                    in_flight.append(inst.attempt)
        in_flight = [a for a in in_flight if a.txid in m.active
                     and m.active[a.txid].attempt == a]
    assert successes == list(range(1, len(successes) + 1))
    assert len(successes) > committed_before
    m.validate_state()
