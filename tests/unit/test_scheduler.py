"""The even scheduler: executors + slots in, an assignment out, checked by its properties."""

import random
from collections import Counter

import pytest

from squall.client import config as cfg
from squall.client.components import Bolt, Spout
from squall.client.topology import TopologyBuilder, assign_task_ids, executors_of, system_topology
from squall.nimbus.scheduler import Assignment, NotEnoughSlots, Slot, edges_of, schedule


class Src(Spout):
    def next_tuple(self):
        pass

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class Pass(Bolt):
    def execute(self, tup):
        pass

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


def topology(spouts, bolts, ackers):
    """A chain spout(s) -> bolt -> bolt ...; each entry is (id, parallelism, tasks)."""
    b = TopologyBuilder()
    for cid, par, tasks in spouts:
        b.set_spout(cid, Src(), par).set_num_tasks(tasks)
    upstream = spouts[0][0]
    for cid, par, tasks in bolts:
        b.set_bolt(cid, Pass(), par).set_num_tasks(tasks).shuffle_grouping(upstream)
        upstream = cid
    topo = system_topology(b.create_topology(), {cfg.TOPOLOGY_ACKER_EXECUTORS: ackers})
    return executors_of(topo, assign_task_ids(topo)), edges_of(topo)


TOPOLOGIES = {
    # spout 2, split 4 executors over 8 tasks, count 6, 2 ackers, the master: sizes alike per
    # component
    "wordcount": topology([("sentences", 2, 2)], [("split", 4, 8), ("count", 6, 6)], 2),
    # executors of one component with different task counts (7 tasks on 5 executors)
    "uneven": topology([("src", 1, 3)], [("a", 5, 7), ("b", 3, 3)], 3),
    "wide": topology([("s1", 6, 6), ("s2", 1, 1)], [("x", 6, 12), ("y", 2, 5)], 4),
    "tiny": topology([("only", 1, 1)], [], 1),
}


def cluster(supervisors, per):
    return [Slot(f"sup{i}", f"host{i}", 6700 + p) for i in range(supervisors) for p in range(per)]


def check_even(assignment, executors, num_workers, slots):
    """The P1/P2 properties every fresh schedule has."""
    component = {tuple(t): c for c, t in executors}
    assert set(assignment) == set(component)
    used = assignment.slots
    assert used <= set(slots)
    assert len(used) == min(num_workers, len(slots), len(executors))
    per_sup = Counter(s.supervisor_id for s in used)
    free = Counter(s.supervisor_id for s in slots)
    # Workers spread over supervisors: counts differ by at most 1 unless a supervisor is full.
    if all(free[s] >= max(per_sup.values()) for s in free):
        assert max(per_sup.values()) - min(per_sup.get(s, 0) for s in free) <= 1, per_sup
    for c in set(component.values()):
        mine = [e for e in component if component[e] == c]
        on_worker = Counter(assignment[e] for e in mine)
        counts = [on_worker[w] for w in used]
        assert max(counts) - min(counts) <= 1, (c, counts)  # P1: over workers
        if len(set(per_sup.values())) == 1:  # where every supervisor runs as many workers
            on_sup = Counter(assignment[e].supervisor_id for e in mine)
            counts = [on_sup[s] for s in per_sup]
            assert max(counts) - min(counts) <= 1, (c, counts)  # P1: over supervisors
    load = Counter()
    for e, s in assignment.items():
        load[s] += len(e)
    loads = [load[w] for w in used]
    assert max(loads) - min(loads) <= max(len(e) for e in component), loads  # P2


SHAPES = [(2, 2), (3, 4), (1, 1), (4, 1), (2, 5)]


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
@pytest.mark.parametrize("supervisors, per", SHAPES, ids=[f"{s}x{p}" for s, p in SHAPES])
@pytest.mark.parametrize("num_workers", [1, 2, 3, 4, 6, 8])
def test_fresh_schedule_is_even(name, supervisors, per, num_workers):
    executors, edges = TOPOLOGIES[name]
    slots = cluster(supervisors, per)
    a = schedule(executors, slots, {}, num_workers=num_workers, edges=edges)
    check_even(a, executors, num_workers, slots)


def test_random_shapes_are_even():
    rng = random.Random(20240611)
    for _ in range(300):
        slots = cluster(rng.randint(1, 4), rng.randint(1, 5))
        executors, nxt = [], 1
        for i in range(rng.randint(1, 5)):
            par = rng.randint(1, 6)
            tasks = rng.choice([par, rng.randint(par, 3 * par)])
            ids = list(range(nxt, nxt + tasks))
            nxt += tasks
            executors += [(f"c{i}", ids[k * tasks // par:(k + 1) * tasks // par])
                          for k in range(par)]
        num_workers = rng.randint(1, len(slots) + 1)
        check_even(schedule(executors, slots, {}, num_workers=num_workers),
                   executors, num_workers, slots)


def test_workers_spread_round_robin_over_supervisors():
    slots = cluster(3, 4)
    executors, _ = TOPOLOGIES["wide"]
    a = schedule(executors, slots, {}, num_workers=6)
    assert Counter(s.supervisor_id for s in a.slots) == {"sup0": 2, "sup1": 2, "sup2": 2}
    # The supervisor with the most free slots takes the odd worker.
    busy = [s for s in slots if s.supervisor_id != "sup1" or s.port < 6702]
    a = schedule(executors, busy, {}, num_workers=5)
    assert Counter(s.supervisor_id for s in a.slots) == {"sup0": 2, "sup1": 1, "sup2": 2}


def test_fewer_executors_than_workers_uses_one_slot_each():
    executors, _ = TOPOLOGIES["tiny"]  # the spout, the acker and the Topology Master
    a = schedule(executors, cluster(2, 2), {}, num_workers=4)
    assert len(a.slots) == len(a) == len(executors) == 3


# -- P3: co-location ----------------------------------------------------------------------


def test_communicating_components_share_a_worker_when_balance_allows():
    executors = [("a", [1]), ("b", [2]), ("c", [3])]
    slots = cluster(2, 1)
    # a and b land on the two workers (P2); c ties on load, so its neighbour decides.
    for neighbour in ("a", "b"):
        a = schedule(executors, slots, {}, num_workers=2, edges={(neighbour, "c")})
        assert a[(3,)] == a[(1,) if neighbour == "a" else (2,)]


def test_co_location_never_costs_balance():
    # Everything talks to a: c joins a while loads tie, d must not (P2 before P3).
    executors = [("a", [1]), ("b", [2]), ("c", [3]), ("d", [4])]
    edges = {("a", "b"), ("a", "c"), ("a", "d")}
    a = schedule(executors, cluster(2, 1), {}, num_workers=2, edges=edges)
    assert a[(3,)] == a[(1,)]
    assert a[(4,)] == a[(2,)] != a[(1,)]


# -- reassignment -------------------------------------------------------------------------


def test_nothing_dead_keeps_the_assignment():
    executors, edges = TOPOLOGIES["wordcount"]
    slots = cluster(3, 4)
    a = schedule(executors, slots, {}, num_workers=6, edges=edges)
    assert schedule(executors, slots, a, num_workers=6, edges=edges) == a


@pytest.mark.parametrize("still_offered", [True, False])
def test_losing_a_supervisor_moves_only_its_executors(still_offered):
    executors, edges = TOPOLOGIES["wordcount"]
    slots = cluster(3, 4)
    before = schedule(executors, slots, {}, num_workers=6, edges=edges)
    dead = frozenset(s for s in slots if s.supervisor_id == "sup1")
    offered = slots if still_offered else [s for s in slots if s not in dead]
    after = schedule(executors, offered, before, dead, num_workers=6, edges=edges)
    assert after.moved(before) == {e for e, s in before.items() if s in dead}
    assert not after.slots & dead
    assert len(after.slots) == 6  # free slots on sup0 and sup2 replace the two lost
    assert Counter(s.supervisor_id for s in after.slots) == {"sup0": 3, "sup2": 3}
    check_even(after, executors, 6, [s for s in slots if s not in dead])


def test_without_free_slots_the_orphans_go_to_the_live_workers():
    executors, edges = TOPOLOGIES["wordcount"]
    slots = cluster(2, 2)
    before = schedule(executors, slots, {}, num_workers=4, edges=edges)
    dead = frozenset(s for s in slots if s.supervisor_id == "sup0")
    after = schedule(executors, slots, before, dead, num_workers=4, edges=edges)
    assert after.moved(before) == {e for e, s in before.items() if s in dead}
    assert after.slots == {s for s in slots if s.supervisor_id == "sup1"}
    check_even(after, executors, 4, [s for s in slots if s not in dead])


def test_one_dead_worker_is_replaced_on_the_emptiest_supervisor():
    executors, _ = TOPOLOGIES["uneven"]
    slots = cluster(3, 2)
    before = schedule(executors, slots, {}, num_workers=3)
    lost = sorted(before.slots)[0]
    after = schedule(executors, slots, before, {lost}, num_workers=3)
    assert after.moved(before) == {e for e, s in before.items() if s == lost}
    (new,) = after.slots - before.slots
    assert new.supervisor_id == lost.supervisor_id  # the others already run one worker each


def test_rebalance_to_another_worker_count_schedules_afresh():
    executors, edges = TOPOLOGIES["wordcount"]
    slots = cluster(3, 4)
    four = schedule(executors, slots, {}, num_workers=4, edges=edges)
    two = schedule(executors, slots, four, num_workers=2, edges=edges)
    check_even(two, executors, 2, slots)
    assert two.slots <= four.slots  # shrinking keeps to slots the topology already had
    six = schedule(executors, slots, two, num_workers=6, edges=edges)
    check_even(six, executors, 6, slots)


def test_a_degraded_assignment_grows_when_slots_come_back():
    executors, _ = TOPOLOGIES["wordcount"]
    small = cluster(1, 2)
    a = schedule(executors, small, {}, num_workers=4)
    assert len(a.slots) == 2
    assert schedule(executors, small, a, num_workers=4) == a  # still all there is
    b = schedule(executors, cluster(2, 2), a, num_workers=4)
    check_even(b, executors, 4, cluster(2, 2))


# -- determinism and errors ---------------------------------------------------------------


def test_same_input_in_any_order_gives_the_same_assignment():
    executors, edges = TOPOLOGIES["uneven"]
    slots = cluster(3, 4)
    a = schedule(executors, slots, {}, num_workers=5, edges=edges)
    shuffled = list(slots)
    random.Random(7).shuffle(shuffled)
    b = schedule(list(reversed(executors)), shuffled, {}, num_workers=5,
                 edges=sorted(edges, reverse=True))
    assert a == b and list(a.items()) == list(b.items())
    assert hash(a) == hash(b)


def test_no_slot_at_all_raises_not_enough_slots():
    executors, _ = TOPOLOGIES["wordcount"]
    with pytest.raises(NotEnoughSlots, match="no live worker slot for 15 executors"):
        schedule(executors, [], {}, num_workers=2)
    slots = cluster(1, 2)
    with pytest.raises(NotEnoughSlots, match=r"2 slots offered, 2 of them dead\): start a "
                                             "supervisor") as info:
        schedule(executors, slots, {}, frozenset(slots), num_workers=2)
    assert (info.value.executors, info.value.offered, info.value.dead) == (15, 2, 2)


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="num_workers must be >= 1"):
        schedule([("a", [1])], cluster(1, 1), {}, num_workers=0)
    with pytest.raises(ValueError, match="listed twice"):
        schedule([("a", [1]), ("b", [1])], cluster(1, 1), {}, num_workers=1)


def test_assignment_is_an_immutable_mapping():
    s1, s2 = cluster(2, 1)
    a = Assignment({(3, 4): s2, (1, 2): s1})
    assert list(a) == [(1, 2), (3, 4)]
    assert a == {(1, 2): s1, (3, 4): s2}
    assert a[[1, 2]] == s1
    assert a.by_slot() == {s1: [(1, 2)], s2: [(3, 4)]}
    assert a.moved({(1, 2): s1, (3, 4): s1}) == {(3, 4)}
    with pytest.raises(TypeError):
        a[(5,)] = s1
