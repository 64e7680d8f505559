"""The scheduler: a pure function from executors and supervisor slots to an assignment.

Mirrors Storm's ``EvenScheduler``/``DefaultScheduler`` (use ``min(num_workers, slots)``
worker slots spread round-robin over the supervisors, keep what runs on live slots and
move only the executors of dead ones) and places executors by JStorm's priorities: P1
spread each component's executors evenly over workers, then over supervisors; P2 balance
the task count per worker; P3 put executors of components that subscribe to each other
in the same worker, so their tuples stay in-process. Each executor goes, in turn, to the
worker with the smallest (P1, P2, P3) key, JStorm's selector chain, and a short local
search then evens out supervisors where the greedy pass could not. A fresh schedule
always has per-worker counts of each component within one of each other and per-worker
task totals within the largest executor (P2); the supervisor spread is as even as that
allows. No IO, no randomness: the same input always gives the same :class:`Assignment`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence, Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..client.errors import SquallError

if TYPE_CHECKING:
    from ..client.topology import Topology

#: An executor is the tuple of the task ids it runs (Storm's [start-task end-task]).
Executor = tuple[int, ...]


@dataclass(frozen=True, order=True)
class Slot:
    """One worker port offered by a supervisor (Storm's ``WorkerSlot`` plus its host)."""

    supervisor_id: str
    host: str
    port: int


class NotEnoughSlots(SquallError):
    """No live worker slot at all to place a topology's executors on."""

    def __init__(self, executors: int, offered: int, dead: int):
        #: How many executors were waiting for a slot.
        self.executors = executors
        #: Slots offered to the scheduler, dead ones included.
        self.offered = offered
        #: How many of them were dead.
        self.dead = dead
        super().__init__(
            f"no live worker slot for {executors} executors ({offered} slots offered, "
            f"{dead} of them dead): start a supervisor, add ports to supervisor.slots.ports "
            "or kill a topology to free slots")


class Assignment(Mapping[Executor, Slot]):
    """An immutable mapping executor -> slot; iterates executors in task order.

    Example::

        assignment = schedule([("spout", [1]), ("count", [2, 3])], slots, {}, num_workers=2)
        for slot, executors in assignment.by_slot().items():
            ...  # write slot -> executors for the slot's supervisor
    """

    __slots__ = ("_map",)

    def __init__(self, mapping: Mapping[Executor, Slot] | Iterable[tuple[Executor, Slot]] = ()):
        items = mapping.items() if isinstance(mapping, Mapping) else mapping
        self._map: dict[Executor, Slot] = dict(sorted((tuple(e), s) for e, s in items))

    def __getitem__(self, executor: Executor) -> Slot:
        return self._map[tuple(executor)]

    def __iter__(self) -> Iterator[Executor]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __hash__(self) -> int:
        return hash(frozenset(self._map.items()))

    def __repr__(self) -> str:
        return f"Assignment({self._map!r})"

    @property
    def slots(self) -> frozenset[Slot]:
        """The worker slots in use."""
        return frozenset(self._map.values())

    def by_slot(self) -> dict[Slot, list[Executor]]:
        """Executors per slot, slots and executors sorted."""
        out: dict[Slot, list[Executor]] = defaultdict(list)
        for executor, slot in self._map.items():
            out[slot].append(executor)
        return dict(sorted(out.items()))

    def moved(self, before: Mapping[Executor, Slot]) -> frozenset[Executor]:
        """Executors whose slot differs from ``before`` (new executors included)."""
        return frozenset(e for e, s in self._map.items() if before.get(e) != s)


def schedule(topology_executors: Sequence[tuple[str, Sequence[int]]],
             slots: Iterable[Slot],
             current: Mapping[Executor, Slot] | None = None,
             dead_slots: AbstractSet[Slot] = frozenset(),
             *, num_workers: int,
             edges: Iterable[tuple[str, str]] = ()) -> Assignment:
    """Assign every executor to one of ``min(num_workers, live slots, executors)`` slots.

    ``topology_executors`` is ``executors_of(system_topology(...), assign_task_ids(...))``;
    ``slots`` the free slots plus the topology's own; ``current`` its assignment so far
    (empty for a new topology); ``dead_slots`` the slots whose worker or supervisor is gone
    (they are never used); ``edges`` the (component, component) subscription pairs.

    When ``current`` covers exactly these executors on ``min(num_workers, executors)``
    slots (or on as many as are live now), only the executors of dead (or no longer
    offered) slots move, to replacement slots if there are free ones, else onto the live
    workers; with nothing dead the result equals ``current``. Otherwise (new topology,
    rebalance with another worker or executor count, or an assignment that had to make do
    with fewer slots) the schedule is computed afresh, keeping an executor where it was
    only when that ties. Raises :class:`NotEnoughSlots` when no slot is live, ValueError
    for a repeated executor or ``num_workers < 1``.
    """
    if num_workers < 1:
        raise ValueError(f"num_workers must be >= 1, got {num_workers}")
    component_of: dict[Executor, str] = {}
    for component, tasks in topology_executors:
        executor = tuple(tasks)
        if not executor or executor in component_of:
            raise ValueError(f"component {component!r}: executor {executor} is empty or listed "
                             "twice")
        component_of[executor] = component
    offered = set(slots)
    dead = frozenset(dead_slots)
    live = offered - dead
    if not live:
        raise NotEnoughSlots(len(component_of), len(offered | dead), len(dead))
    if not component_of:
        return Assignment()
    current = {tuple(e): s for e, s in (current or {}).items()}
    width = min(num_workers, len(live), len(component_of))
    neighbours: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        if a != b:
            neighbours[a].add(b)
            neighbours[b].add(a)
    # Repair (move only what ran on dead slots) when ``current`` places these executors on
    # as many slots as wanted, or on as many as can be had now; otherwise (first schedule,
    # rebalance, or more slots than the assignment had to make do with) start afresh.
    repairable = (set(current) == set(component_of) and len(set(current.values()))
                  in (min(num_workers, len(component_of)), width))
    if repairable:
        # Keep executors whose slot is alive; re-place the others (Storm's DefaultScheduler
        # frees only bad slots and re-schedules their executors).
        kept = {e: s for e, s in current.items() if s in live}
        in_use = sorted(set(kept.values()))
        workers = in_use + _spread_slots(live - set(in_use), width - len(in_use), in_use, set())
    else:
        kept = {}
        workers = _spread_slots(live, width, [], set(current.values()))
    plan = _Plan(workers, component_of, neighbours, current)
    for executor, slot in kept.items():
        plan.put(executor, slot)
    bound = max(len(e) for e in component_of)
    for executors in _by_component(component_of, set(component_of) - set(kept)):
        plan = _place_component(plan, executors, bound)
    _even_supervisors(plan, set(component_of) - set(kept), max(bound, plan.spread()))
    return Assignment(plan.placed)


def edges_of(topology: "Topology") -> frozenset[tuple[str, str]]:
    """The (publisher, subscriber) component pairs of ``topology``, for ``schedule(edges=)``."""
    return frozenset((i.component, c.id) for c in topology.components.values()
                     for i in c.inputs)


def _by_component(component_of: Mapping[Executor, str],
                  executors: AbstractSet[Executor]) -> list[list[Executor]]:
    """Executors grouped by component, largest first; components with the largest
    executors first (LPT), then those with the most executors (the hardest to spread)."""
    groups: dict[str, list[Executor]] = defaultdict(list)
    for e in sorted(executors, key=lambda e: (-len(e), e)):
        groups[component_of[e]].append(e)
    return [groups[c] for c in sorted(groups, key=lambda c: (-len(groups[c][0]),
                                                             -len(groups[c]), c))]


def _place_component(plan: "_Plan", executors: Sequence[Executor], bound: int) -> "_Plan":
    """Place one component's executors, spread over supervisors first if that keeps P2.

    Placing each executor on the least-loaded worker among those with the fewest of the
    component's executors provably keeps every worker's task total within ``bound`` (the
    largest executor) of every other: each round hands the largest remaining executors to
    the least-loaded workers. Ranking the supervisor spread before the load can break
    that, so that attempt is kept only if its task spread is within the bound (or no
    worse than load-first, when kept executors already unbalance a repair) and it leaves
    no more workers empty.
    """
    by_load, by_sup = plan.copy(), plan
    for executor in executors:
        by_load.place(executor, supervisor_first=False)
        by_sup.place(executor, supervisor_first=True)
    if by_sup.spread() <= max(bound, by_load.spread()) and by_sup.empty() <= by_load.empty():
        return by_sup
    return by_load


def _even_supervisors(plan: "_Plan", movable: AbstractSet[Executor], limit: int) -> None:
    """Move or swap executors between supervisors while that evens them out (P1).

    The greedy placement can leave a component crowded on one supervisor when P2 forbade
    better; executors of other components can often make room. Each step moves one
    executor, or swaps two of different components, keeping each component's per-worker
    counts as even as before, no worker empty and the task spread within ``limit``, and
    takes the step that lowers sum(executors on a supervisor ** 2 / its workers) over the
    components most; that sum is smallest at an even spread, so the search ends. Only
    ``movable`` executors move (on a repair: those that ran on dead slots).
    """
    for _ in range(4 * len(movable)):
        on_worker: dict[Slot, list[Executor]] = defaultdict(list)
        for e in sorted(movable):
            on_worker[plan.placed[e]].append(e)
        best: tuple[int, Executor, Slot, Executor | None] | None = None
        uneven = plan.uneven_components()
        for x in sorted(movable):
            c, u = plan.component_of[x], plan.placed[x]
            if c not in uneven:
                continue
            for v in plan.workers:
                gain = plan.sup_gain(c, u, v)
                if gain <= 0 or plan.in_worker[c, u] <= plan.in_worker[c, v]:
                    continue
                # Moving alone must not empty a worker: the topology would use fewer slots.
                options: list[Executor | None] = [None] if len(plan.comps[u]) > 1 or \
                    plan.comps[u][c] > 1 else []
                options += [y for y in on_worker[v] if plan.component_of[y] != c and
                            plan.in_worker[plan.component_of[y], v] >
                            plan.in_worker[plan.component_of[y], u]]
                for y in options:
                    total = gain + (plan.sup_gain(plan.component_of[y], v, u) if y else 0)
                    if total > 0 and (best is None or total > best[0]) and \
                            plan.spread_after(u, v, len(x) - (len(y) if y else 0)) <= limit:
                        best = (total, x, v, y)
        if best is None:
            return
        _, x, v, y = best
        u = plan.placed[x]
        plan.move(x, v)
        if y:
            plan.move(y, u)


def _spread_slots(candidates: AbstractSet[Slot], count: int, in_use: Sequence[Slot],
                  preferred: AbstractSet[Slot]) -> list[Slot]:
    """Pick ``count`` candidate slots round-robin over supervisors.

    A supervisor running fewer of the topology's workers comes first, so losing one
    supervisor loses as few workers as possible; ties go to the supervisor with more
    candidate slots (Storm's sort-slots), then by id. Within a supervisor a ``preferred``
    slot (one the topology already runs on) comes first, so a rebalance moves less.
    """
    on_sup = Counter(s.supervisor_id for s in in_use)
    free = Counter(s.supervisor_id for s in candidates)
    left = set(candidates)
    chosen: list[Slot] = []
    for _ in range(min(count, len(left))):
        best = min(left, key=lambda s: (on_sup[s.supervisor_id], -free[s.supervisor_id],
                                        s.supervisor_id, s not in preferred, s.port, s.host))
        left.remove(best)
        chosen.append(best)
        on_sup[best.supervisor_id] += 1
    return chosen


class _Plan:
    """Greedy placement state: the chosen workers, their loads and per-component counts."""

    def __init__(self, workers: Sequence[Slot], component_of: Mapping[Executor, str],
                 neighbours: Mapping[str, set[str]], current: Mapping[Executor, Slot]):
        self.component_of = component_of
        self.neighbours = neighbours
        self.current = current
        #: The chosen worker slots; their order is the last tie-break.
        self.workers = list(workers)
        self.rank = {w: i for i, w in enumerate(self.workers)}
        sup_workers = Counter(w.supervisor_id for w in self.workers)
        scale = math.lcm(*sup_workers.values())
        #: Per supervisor, ``scale / its workers``: executors * weight compares supervisors
        #: by executors per worker in integers (one with two workers may hold twice as many).
        self.weight = {sup: scale // n for sup, n in sup_workers.items()}
        #: Executors placed so far.
        self.placed: dict[Executor, Slot] = {}
        #: Tasks per worker (P2).
        self.load: Counter[Slot] = Counter()
        #: Executors per (component, worker) and per (component, supervisor) (P1).
        self.in_worker: Counter[tuple[str, Slot]] = Counter()
        self.in_sup: Counter[tuple[str, str]] = Counter()
        #: Executors per component on each worker (P3, and to see what a worker holds).
        self.comps: dict[Slot, Counter[str]] = defaultdict(Counter)

    def copy(self) -> "_Plan":
        new = _Plan(self.workers, self.component_of, self.neighbours, self.current)
        new.placed = dict(self.placed)
        new.load = Counter(self.load)
        new.in_worker = Counter(self.in_worker)
        new.in_sup = Counter(self.in_sup)
        new.comps = defaultdict(Counter, {w: Counter(c) for w, c in self.comps.items()})
        return new

    def spread(self) -> int:
        """Max minus min task total over the chosen workers."""
        loads = [self.load[w] for w in self.workers]
        return max(loads) - min(loads)

    def empty(self) -> int:
        return sum(1 for w in self.workers if not self.load[w])

    def place(self, executor: Executor, supervisor_first: bool) -> None:
        """Put ``executor`` on the worker with the smallest (P1, P2, P3) key."""
        c = self.component_of[executor]
        near = self.neighbours.get(c, ())

        def key(w: Slot) -> tuple:
            sup = w.supervisor_id
            on_sup = self.in_sup[c, sup] * self.weight[sup]
            p2 = (on_sup, self.load[w]) if supervisor_first else (self.load[w], on_sup)
            return (self.in_worker[c, w],                     # P1: spread over workers
                    *p2,                                      # P1 supervisors and P2 load
                    -sum(self.comps[w][n] for n in near),     # P3: join its neighbours
                    self.current.get(executor) != w,          # stay put when all else ties
                    self.rank[w])
        self.put(executor, min(self.workers, key=key))

    def uneven_components(self) -> set[str]:
        """Components that some move between supervisors might even out.

        sup_gain > 0 needs 2 * (share_u - share_v) > weight_u + weight_v, so a component
        whose shares differ by no more than the smallest weight has no such move.
        """
        least = min(self.weight.values())
        out = set()
        for c in {c for comps in self.comps.values() for c in comps}:
            shares = [self.in_sup[c, sup] * w for sup, w in self.weight.items()]
            if max(shares) - min(shares) > least:
                out.add(c)
        return out

    def sup_gain(self, c: str, u: Slot, v: Slot) -> int:
        """How much moving one executor of ``c`` from ``u`` to ``v`` evens supervisors
        (the drop in sum(executors ** 2 / workers), times the weight scale)."""
        su, sv = u.supervisor_id, v.supervisor_id
        if su == sv:
            return 0
        return ((2 * self.in_sup[c, su] - 1) * self.weight[su]
                - (2 * self.in_sup[c, sv] + 1) * self.weight[sv])

    def spread_after(self, u: Slot, v: Slot, tasks: int) -> int:
        """The task spread if ``tasks`` moved from worker ``u`` to worker ``v``."""
        loads = [self.load[w] for w in self.workers]
        loads[self.rank[u]] -= tasks
        loads[self.rank[v]] += tasks
        return max(loads) - min(loads)

    def move(self, executor: Executor, slot: Slot) -> None:
        old = self.placed[executor]
        c = self.component_of[executor]
        self.load[old] -= len(executor)
        self.in_worker[c, old] -= 1
        self.in_sup[c, old.supervisor_id] -= 1
        self.comps[old][c] -= 1
        if not self.comps[old][c]:
            del self.comps[old][c]
        self.put(executor, slot)

    def put(self, executor: Executor, slot: Slot) -> None:
        c = self.component_of[executor]
        self.placed[executor] = slot
        self.load[slot] += len(executor)
        self.in_worker[c, slot] += 1
        self.in_sup[c, slot.supervisor_id] += 1
        self.comps[slot][c] += 1
