"""Topology lifecycle: events in, instructions out (Storm's topology status transitions)."""

import json
from dataclasses import replace

import pytest

from squall.nimbus.lifecycle import (TRANSITIONS, Activate, Deactivate, InvalidTransition, Kill,
                                     Persist, Reassign, Rebalance, RemoveTopology, ScheduleCheck,
                                     Startup, Submit, Tick, TopologyState, TopologyStatus,
                                     transition)

import event_table

A, I, K, R = (TopologyStatus.ACTIVE, TopologyStatus.INACTIVE, TopologyStatus.KILLED,
              TopologyStatus.REBALANCING)
TID = "wc-1-1700000000"
T0 = 1_700_000_000  # launch time
NOW = T0 + 100
EXECUTORS = {"sentences": 2, "split": 4, "count": 4, "__acker": 2}


def base_state(status=A):
    return TopologyState(TID, "wc", "alice", status, launch_time_secs=T0, num_workers=2,
                         component_executors=EXECUTORS)


def sid(name):
    return {"stimulus_id": name}


class Machine:
    """Feeds events to ``transition`` and keeps the state, as the Nimbus daemon will."""

    def __init__(self, state):
        self.state = state
        #: (status before, event, instructions) for every event fed.
        self.history = []

    def __call__(self, event):
        new, instructions = transition(self.state, event)
        self.history.append((self.state.status if self.state else None, event, instructions))
        self.state = new
        return instructions

    def validate_state(self):
        """Every state seen is consistent, survives JSON, and is what was last persisted."""
        states = [i.state for _, _, ins in self.history for i in ins if isinstance(i, Persist)]
        for s in states + ([self.state] if self.state else []):
            s.validate()
            assert TopologyState.from_json(json.loads(json.dumps(s.to_json()))) == s
        for _, _, ins in self.history:
            checks = [i.at_secs for i in ins if isinstance(i, ScheduleCheck)]
            persisted = [i.state for i in ins if isinstance(i, Persist)]
            if checks and persisted:  # a check is always for the state just persisted
                assert checks == [persisted[-1].transition_at]


@pytest.fixture
def topo():
    m = Machine(base_state())
    yield m
    m.validate_state()


@pytest.fixture
def inactive():
    m = Machine(base_state(I))
    yield m
    m.validate_state()


def play(m, table):
    """Feed each (event, expected instructions, expected status or None) row."""
    def status_is(i, status):
        assert (m.state.status if m.state else None) == status, f"row {i}: {m.state}"
    event_table.play(m, table, after=status_is)


def killed(at, wait):
    return replace(base_state(), status=K, wait_secs=wait, transition_at=at)


def rebalancing(at, wait, prev, workers=2, executors=EXECUTORS):
    return replace(base_state(prev), status=R, wait_secs=wait, transition_at=at, prev_status=prev,
                   rebalance_num_workers=workers, rebalance_executors=executors)


# -- allowed transitions ------------------------------------------------------------------


def test_deactivate_then_activate(topo):
    play(topo, [
        (Deactivate(**sid("d")), [Persist(base_state(I))], I),
        (Activate(**sid("a")), [Persist(base_state(A))], A),
    ])


def test_activate_active_and_deactivate_inactive_are_noops(topo):
    play(topo, [
        (Activate(**sid("a1")), [], A),
        (Deactivate(**sid("d1")), [Persist(base_state(I))], I),
        (Deactivate(**sid("d2")), [], I),
    ])


def test_ticks_and_startup_leave_a_running_topology_alone(topo, inactive):
    for m, status in ((topo, A), (inactive, I)):
        play(m, [
            (Tick(NOW, **sid("t")), [], status),
            (Startup(NOW, **sid("s")), [], status),
        ])


def test_kill_waits_from_the_kill_then_removes(topo):
    play(topo, [
        (Kill(30, NOW, **sid("k")), [Persist(killed(NOW + 30, 30)), ScheduleCheck(NOW + 30)], K),
        (Tick(NOW + 29, **sid("t1")), [], K),
        (Tick(NOW + 30, **sid("t2")), [RemoveTopology(TID)], None),
    ])


def test_kill_with_no_wait_is_due_at_once(inactive):
    play(inactive, [
        (Kill(0, NOW, **sid("k")), [Persist(killed(NOW, 0)), ScheduleCheck(NOW)], K),
        (Tick(NOW, **sid("t")), [RemoveTopology(TID)], None),
    ])


def test_a_second_kill_can_shorten_the_wait_but_not_extend_it(topo):
    play(topo, [
        (Kill(30, NOW, **sid("k1")), [Persist(killed(NOW + 30, 30)), ScheduleCheck(NOW + 30)], K),
        # Storm keeps the first REMOVE scheduled, so the earlier removal wins.
        (Kill(60, NOW + 10, **sid("k2")), [], K),
        (Kill(5, NOW + 10, **sid("k3")),
         [Persist(killed(NOW + 15, 5)), ScheduleCheck(NOW + 15)], K),
        (Tick(NOW + 15, **sid("t")), [RemoveTopology(TID)], None),
    ])


def test_rebalance_reassigns_when_due_and_returns_to_active(topo):
    req = Rebalance(10, NOW, num_workers=3, executors={"count": 6}, **sid("r"))
    target = {**EXECUTORS, "count": 6}
    after = replace(base_state(A), num_workers=3, component_executors=target)
    play(topo, [
        (req, [Persist(rebalancing(NOW + 10, 10, A, 3, target)), ScheduleCheck(NOW + 10)], R),
        (Tick(NOW + 9, **sid("t1")), [], R),
        (Tick(NOW + 10, **sid("t2")), [Reassign(TID, 3, target), Persist(after)], A),
    ])


def test_rebalance_returns_to_inactive_if_it_was_inactive(inactive):
    play(inactive, [
        (Rebalance(0, NOW, **sid("r")),
         [Persist(rebalancing(NOW, 0, I)), ScheduleCheck(NOW)], R),
        (Tick(NOW, **sid("t")), [Reassign(TID, 2, EXECUTORS), Persist(base_state(I))], I),
    ])


def test_rebalance_without_worker_count_keeps_it(topo):
    topo(Rebalance(5, NOW, executors={"split": 1}, **sid("r")))
    assert topo.state.rebalance_num_workers == 2
    assert topo.state.rebalance_executors == {**EXECUTORS, "split": 1}


def test_kill_wins_over_a_pending_rebalance(topo):
    play(topo, [
        (Rebalance(60, NOW, num_workers=4, **sid("r")),
         [Persist(rebalancing(NOW + 60, 60, A, 4)), ScheduleCheck(NOW + 60)], R),
        (Kill(30, NOW + 10, **sid("k")),
         [Persist(killed(NOW + 40, 30)), ScheduleCheck(NOW + 40)], K),
        (Tick(NOW + 60, **sid("t")), [RemoveTopology(TID)], None),
    ])


# -- Nimbus restarts ----------------------------------------------------------------------


def restarted(m):
    """The state as a new Nimbus reads it back from ZooKeeper."""
    return Machine(TopologyState.from_json(json.loads(json.dumps(m.state.to_json()))))


def test_startup_mid_kill_resumes_at_the_same_time(topo):
    topo(Kill(30, NOW, **sid("k")))
    m = restarted(topo)
    play(m, [
        (Startup(NOW + 20, **sid("s1")), [ScheduleCheck(NOW + 30)], K),
        (Tick(NOW + 30, **sid("t")), [RemoveTopology(TID)], None),
    ])
    m.validate_state()


def test_startup_past_a_kill_removes_at_once(topo):
    topo(Kill(30, NOW, **sid("k")))
    m = restarted(topo)
    play(m, [(Startup(NOW + 300, **sid("s")), [RemoveTopology(TID)], None)])


def test_startup_mid_rebalance_resumes_then_reassigns(inactive):
    inactive(Rebalance(30, NOW, num_workers=1, **sid("r")))
    m = restarted(inactive)
    play(m, [
        (Startup(NOW + 1, **sid("s1")), [ScheduleCheck(NOW + 30)], R),
        (Startup(NOW + 31, **sid("s2")),
         [Reassign(TID, 1, EXECUTORS), Persist(replace(base_state(I), num_workers=1))], I),
    ])
    m.validate_state()


# -- refused transitions ------------------------------------------------------------------


REFUSED = [
    (killed(NOW + 30, 30), Activate(**sid("a")),
     "topology wc is being killed; it cannot be activated"),
    (killed(NOW + 30, 30), Deactivate(**sid("d")),
     "topology wc is being killed; it cannot be deactivated"),
    (killed(NOW + 30, 30), Rebalance(0, NOW, **sid("r")),
     "topology wc is being killed; it cannot be rebalanced"),
    (rebalancing(NOW + 30, 30, A), Rebalance(0, NOW, **sid("r")),
     "topology wc is already being rebalanced; it cannot be rebalanced again until"),
    (rebalancing(NOW + 30, 30, A), Activate(**sid("a")),
     "topology wc is being rebalanced; it cannot be activated until the rebalance finishes"),
    (rebalancing(NOW + 30, 30, I), Deactivate(**sid("d")),
     "topology wc is being rebalanced; it cannot be deactivated until"),
]


@pytest.mark.parametrize("state, event, message", REFUSED,
                         ids=[f"{s.status.value}-{type(e).__name__}" for s, e, _ in REFUSED])
def test_refused_transitions_say_why(state, event, message):
    with pytest.raises(InvalidTransition) as info:
        transition(state, event)
    err = info.value
    assert message in str(err)
    assert "2023-11-14 22:15:30 UTC" in str(err)  # when it will be allowed again (NOW + 30)
    assert (err.from_state, err.to_state, err.key) == (state.status, type(event).__name__, TID)
    assert err.stimulus_id == event.stimulus_id


def test_every_status_and_event_is_either_allowed_or_refused():
    events = [Activate(**sid("a")), Deactivate(**sid("d")), Kill(1, NOW, **sid("k")),
              Rebalance(1, NOW, **sid("r")), Tick(NOW, **sid("t")), Startup(NOW, **sid("s"))]
    states = [base_state(A), base_state(I), killed(NOW + 30, 30), rebalancing(NOW + 30, 30, A)]
    refused = set()
    for state in states:
        for event in events:
            try:
                transition(state, event)
            except InvalidTransition:
                refused.add((state.status, type(event)))
    assert refused == {(K, Activate), (K, Deactivate), (K, Rebalance), (R, Rebalance),
                       (R, Activate), (R, Deactivate)}
    assert not refused & set(TRANSITIONS)


def test_not_an_event_is_a_type_error():
    with pytest.raises(TypeError, match="not a lifecycle event"):
        transition(base_state(), "kill")


# -- submit -------------------------------------------------------------------------------
def submit(status=A):
    return Submit(TID, "wc", "alice", status, T0, 2, EXECUTORS, stimulus_id="submit-wc")


@pytest.mark.parametrize("status", [A, I])
def test_a_submit_persists_the_new_topology_then_assigns_it(status):
    m = Machine(None)
    play(m, [(submit(status), [Persist(base_state(status)), Reassign(TID, 2, EXECUTORS)],
              status)])
    m.validate_state()


def test_a_submit_of_an_existing_topology_and_a_request_for_none_are_refused():
    with pytest.raises(InvalidTransition, match="exists already"):
        transition(base_state(), submit())
    with pytest.raises(InvalidTransition, match="no such topology: it cannot be activated"):
        transition(None, Activate(**sid("a")))


def test_a_topology_is_submitted_active_or_inactive_only():
    with pytest.raises(ValueError, match="not killed"):
        submit(K)


# -- validation ---------------------------------------------------------------------------


@pytest.mark.parametrize("make", [lambda: Kill(-1, NOW, **sid("k")),
                                  lambda: Rebalance(-0.5, NOW, **sid("r"))])
def test_negative_wait_is_a_value_error(make):
    with pytest.raises(ValueError, match="wait_secs must be >= 0"):
        make()


def test_rebalance_arguments_are_checked():
    with pytest.raises(ValueError, match="num_workers must be a positive integer"):
        Rebalance(0, NOW, num_workers=0, **sid("r"))
    with pytest.raises(ValueError, match="executors of 'count' must be a positive integer"):
        Rebalance(0, NOW, executors={"count": 0}, **sid("r"))
    with pytest.raises(ValueError, match="topology wc has no component nope"):
        transition(base_state(), Rebalance(0, NOW, executors={"nope": 2}, **sid("r")))


def test_events_need_a_stimulus_id():
    with pytest.raises(TypeError):
        Activate()


# -- the persisted form -------------------------------------------------------------------


@pytest.mark.parametrize("state", [base_state(A), base_state(I), killed(NOW + 30, 30),
                                   rebalancing(NOW + 5, 5, I, 3, {**EXECUTORS, "count": 1})],
                         ids=["active", "inactive", "killed", "rebalancing"])
def test_json_round_trip(state):
    data = json.loads(json.dumps(state.to_json()))
    assert data["status"] == state.status.value
    assert TopologyState.from_json(data) == state


def test_inconsistent_stored_state_is_refused():
    data = killed(NOW + 30, 30).to_json()
    data["transition_at"] = None
    with pytest.raises(ValueError, match="transition_at must be set"):
        TopologyState.from_json(data)
    data = rebalancing(NOW, 0, A).to_json()
    data["prev_status"] = "killed"
    with pytest.raises(ValueError, match="needs prev_status"):
        TopologyState.from_json(data)
    with pytest.raises(ValueError, match=r"unknown stored keys \['typo'\]"):
        TopologyState.from_json({**base_state().to_json(), "typo": 1})
    with pytest.raises(ValueError, match="'paused' is not a valid TopologyStatus"):
        TopologyState.from_json({**base_state().to_json(), "status": "paused"})


def test_state_does_not_share_the_callers_dict():
    executors = dict(EXECUTORS)
    state = TopologyState(TID, "wc", "alice", A, T0, 2, executors)
    executors["count"] = 99
    assert state.component_executors == EXECUTORS
