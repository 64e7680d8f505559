"""The topology lifecycle: a pure state machine over a topology's status.

Mirrors Storm's topology status transitions (``Nimbus.TOPO_STATE_TRANSITIONS`` over
``StormBase.status`` and ``TopologyActions``): a submit makes it ACTIVE or INACTIVE,
ACTIVE <-> INACTIVE, ACTIVE|INACTIVE -> KILLED -> removed once the kill wait has passed,
ACTIVE|INACTIVE -> REBALANCING -> back to the previous status with a reassignment once
the rebalance wait has passed. :func:`transition` takes a :class:`TopologyState` (the
record Nimbus keeps in ZooKeeper; ``None`` before the submit) and an event and returns
the new state (``None`` once the topology is removed) plus the instructions the daemon
carries out (:class:`Persist`, :class:`RemoveTopology`, :class:`Reassign`,
:class:`ScheduleCheck`). There is no IO and no clock here: every time
comes in on the event. Unlike Storm, which re-counts the wait from the moment a new
leader takes over, the state keeps the absolute ``transition_at`` counted from the kill
or rebalance request, so a Nimbus restart neither extends nor shortens a kill.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any, Callable

from ..client.transitions import InvalidTransition


class TopologyStatus(enum.Enum):
    """A topology's status, as Storm's ``TopologyStatus``; the value is what ZooKeeper stores."""

    ACTIVE = "active"
    INACTIVE = "inactive"
    KILLED = "killed"
    REBALANCING = "rebalancing"


#: Short alias. Prefer ``TopologyStatus`` in modules that also import the daemon base's
#: lifecycle ``Status`` (init/starting/running/...), which is a different thing.
Status = TopologyStatus

_RUNNING = (TopologyStatus.ACTIVE, TopologyStatus.INACTIVE)


@dataclass(frozen=True)
class TopologyState:
    """Everything Nimbus persists about one topology's lifecycle (Storm's ``StormBase``).

    Example::

        state = TopologyState("wc-1-1700000000", "wc", "alice", TopologyStatus.ACTIVE,
                              launch_time_secs=1700000000, num_workers=2,
                              component_executors={"spout": 2, "count": 4, "__acker": 2})
        new_state, instructions = transition(state, Kill(30, now=1700000100, stimulus_id="rpc-7"))
    """

    topology_id: str
    name: str
    owner: str
    status: TopologyStatus
    launch_time_secs: float
    num_workers: int
    #: Executors per component id (every component, the system ``__acker`` included).
    component_executors: dict[str, int]
    #: KILLED/REBALANCING: the wait the user asked for, in seconds (informational).
    wait_secs: float | None = None
    #: KILLED/REBALANCING: absolute epoch seconds at which the delayed action is due.
    transition_at: float | None = None
    #: REBALANCING: the status to return to when the rebalance is done.
    prev_status: TopologyStatus | None = None
    #: REBALANCING: the worker count to reassign with (the current one if not changed).
    rebalance_num_workers: int | None = None
    #: REBALANCING: the full executors-per-component map to reassign with.
    rebalance_executors: dict[str, int] | None = None

    def __post_init__(self) -> None:
        # Copy the maps so a caller mutating its dict cannot change a "frozen" state.
        object.__setattr__(self, "component_executors", dict(self.component_executors))
        if self.rebalance_executors is not None:
            object.__setattr__(self, "rebalance_executors", dict(self.rebalance_executors))
        self.validate()

    def validate(self) -> None:
        """Raise ValueError if the fields do not fit the status (e.g. corrupt ZooKeeper data)."""
        where = f"topology {self.topology_id}"
        if not isinstance(self.status, TopologyStatus):
            raise ValueError(f"{where}: status must be a TopologyStatus, got {self.status!r}")
        _check_count(f"{where}: num_workers", self.num_workers)
        for comp, n in self.component_executors.items():
            _check_count(f"{where}: executors of {comp!r}", n)
        delayed = self.status in (TopologyStatus.KILLED, TopologyStatus.REBALANCING)
        timed = (self.wait_secs is not None, self.transition_at is not None)
        if timed != (delayed, delayed):
            raise ValueError(f"{where}: wait_secs and transition_at must be set exactly when "
                             f"the status is killed or rebalancing (status {self.status.value})")
        if self.wait_secs is not None and self.wait_secs < 0:
            raise ValueError(f"{where}: wait_secs must be >= 0, got {self.wait_secs}")
        rebalancing = self.status is TopologyStatus.REBALANCING
        rebal = (self.prev_status, self.rebalance_num_workers, self.rebalance_executors)
        if rebalancing:
            if self.prev_status not in _RUNNING or None in rebal:
                raise ValueError(f"{where}: a rebalancing state needs prev_status (active or "
                                 "inactive), rebalance_num_workers and rebalance_executors")
            _check_count(f"{where}: rebalance_num_workers", self.rebalance_num_workers)
            for comp, n in self.rebalance_executors.items():
                _check_count(f"{where}: rebalance executors of {comp!r}", n)
        elif rebal != (None, None, None):
            raise ValueError(f"{where}: rebalance fields set while {self.status.value}")

    def to_json(self) -> dict[str, Any]:
        """The state as a dict of JSON types (enums as their string values)."""
        out = asdict(self)
        out["status"] = self.status.value
        out["prev_status"] = self.prev_status.value if self.prev_status else None
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "TopologyState":
        """Inverse of :meth:`to_json`; unknown keys are refused so typos in stored data show."""
        unknown = sorted(set(data) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"topology {data.get('topology_id')}: unknown stored keys {unknown}")
        data = dict(data)
        data["status"] = TopologyStatus(data["status"])
        if data.get("prev_status") is not None:
            data["prev_status"] = TopologyStatus(data["prev_status"])
        return cls(**data)


def _check_count(what: str, n: Any) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{what} must be a positive integer, got {n!r}")


def _check_wait(kind: str, wait_secs: float) -> None:
    if wait_secs < 0:
        raise ValueError(f"{kind} wait_secs must be >= 0, got {wait_secs}")


# -- events -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """Base of the lifecycle events; ``stimulus_id`` ties log lines to the request or timer."""

    stimulus_id: str = field(kw_only=True)


@dataclass(frozen=True)
class Submit(Event):
    """A validated submit (its package already stored): the topology begins, ``status``
    ACTIVE or INACTIVE, and is assigned ``num_workers`` workers."""

    topology_id: str
    name: str
    owner: str
    status: TopologyStatus
    now: float
    num_workers: int
    component_executors: dict[str, int]

    def __post_init__(self) -> None:
        if self.status not in _RUNNING:
            raise ValueError(f"a topology is submitted active or inactive, not "
                             f"{self.status.value}")
        object.__setattr__(self, "component_executors", dict(self.component_executors))


@dataclass(frozen=True)
class Activate(Event):
    """``squall activate``: let the spouts emit again."""


@dataclass(frozen=True)
class Deactivate(Event):
    """``squall deactivate``: stop calling the spouts' ``next_tuple``."""


@dataclass(frozen=True)
class Kill(Event):
    """``squall kill -w wait_secs``: deactivate now, remove ``wait_secs`` after ``now``."""

    wait_secs: float
    now: float

    def __post_init__(self) -> None:
        _check_wait("kill", self.wait_secs)


@dataclass(frozen=True)
class Rebalance(Event):
    """``squall rebalance -w wait_secs [-n workers] [-e comp=n]``: reassign after the wait.

    ``num_workers=None`` keeps the current worker count; ``executors`` overrides the
    executor count of the components it names.
    """

    wait_secs: float
    now: float
    num_workers: int | None = None
    executors: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_wait("rebalance", self.wait_secs)
        if self.num_workers is not None:
            _check_count("rebalance num_workers", self.num_workers)
        for comp, n in self.executors.items():
            _check_count(f"rebalance executors of {comp!r}", n)
        object.__setattr__(self, "executors", dict(self.executors))


@dataclass(frozen=True)
class Tick(Event):
    """The monitor loop (or a :class:`ScheduleCheck` coming due): fire due delayed actions."""

    now: float


@dataclass(frozen=True)
class Startup(Event):
    """Nimbus (re)gained leadership: resume pending kills and rebalances."""

    now: float


# -- instructions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Persist:
    """Write ``state`` to ZooKeeper (before acting on it)."""

    state: TopologyState


@dataclass(frozen=True)
class RemoveTopology:
    """Delete the topology's ZooKeeper nodes (base, assignment, heartbeats) and local files."""

    topology_id: str


@dataclass(frozen=True)
class Reassign:
    """Compute and write a fresh assignment with this worker count and these executors."""

    topology_id: str
    num_workers: int
    executors: dict[str, int]


@dataclass(frozen=True)
class ScheduleCheck:
    """Feed a :class:`Tick` to this topology at ``at_secs`` (epoch); due now if in the past."""

    at_secs: float


Instruction = Persist | RemoveTopology | Reassign | ScheduleCheck
Result = tuple[TopologyState | None, list[Instruction]]


# -- transitions --------------------------------------------------------------------------


def _submit(state: None, event: Submit) -> Result:
    new = TopologyState(event.topology_id, event.name, event.owner, event.status,
                        launch_time_secs=event.now, num_workers=event.num_workers,
                        component_executors=event.component_executors)
    return new, [Persist(new), Reassign(new.topology_id, new.num_workers,
                                        dict(new.component_executors))]


def _noop(state: TopologyState, event: Event) -> Result:
    return state, []


def _set_status(status: TopologyStatus) -> Callable[[TopologyState, Event], Result]:
    def handler(state: TopologyState, event: Event) -> Result:
        new = replace(state, status=status)
        return new, [Persist(new)]
    return handler


def _kill(state: TopologyState, event: Kill) -> Result:
    at = event.now + event.wait_secs
    new = replace(state, status=TopologyStatus.KILLED, wait_secs=event.wait_secs,
                  transition_at=at, prev_status=None, rebalance_num_workers=None,
                  rebalance_executors=None)
    return new, [Persist(new), ScheduleCheck(at)]


def _kill_again(state: TopologyState, event: Kill) -> Result:
    # Storm schedules another REMOVE without cancelling the first, so the earlier one wins:
    # a second kill can bring the removal forward (kill -w 0) but never postpone it.
    if event.now + event.wait_secs >= state.transition_at:
        return state, []
    return _kill(state, event)


def _rebalance(state: TopologyState, event: Rebalance) -> Result:
    unknown = sorted(set(event.executors) - set(state.component_executors))
    if unknown:
        raise ValueError(f"topology {state.name} has no component {', '.join(unknown)} "
                         f"(components: {', '.join(sorted(state.component_executors))})")
    at = event.now + event.wait_secs
    new = replace(state, status=TopologyStatus.REBALANCING, wait_secs=event.wait_secs,
                  transition_at=at, prev_status=state.status,
                  rebalance_num_workers=(state.num_workers if event.num_workers is None
                                         else event.num_workers),
                  rebalance_executors={**state.component_executors, **event.executors})
    return new, [Persist(new), ScheduleCheck(at)]


def _due(resuming: bool,
         fire: Callable[[TopologyState], Result]) -> Callable[[TopologyState, Event], Result]:
    """A Tick (``resuming=False``) or Startup handler firing ``fire`` once transition_at passed.

    A Tick that is not due says nothing (the daemon already has a check scheduled); a
    Startup that is not due asks for a check at the same absolute time, as persisted.
    """
    def handler(state: TopologyState, event: Tick | Startup) -> Result:
        if event.now >= state.transition_at:
            return fire(state)
        return state, [ScheduleCheck(state.transition_at)] if resuming else []
    return handler


def _remove(state: TopologyState) -> Result:
    return None, [RemoveTopology(state.topology_id)]


def _finish_rebalance(state: TopologyState) -> Result:
    new = replace(state, status=state.prev_status, num_workers=state.rebalance_num_workers,
                  component_executors=state.rebalance_executors, wait_secs=None,
                  transition_at=None, prev_status=None, rebalance_num_workers=None,
                  rebalance_executors=None)
    # Reassign before persisting: if Nimbus dies in between, the stored state is still
    # REBALANCING and past due, so Startup redoes the (idempotent) reassignment.
    return new, [Reassign(new.topology_id, new.num_workers, dict(new.component_executors)),
                 Persist(new)]


_A, _I, _K, _R = (TopologyStatus.ACTIVE, TopologyStatus.INACTIVE, TopologyStatus.KILLED,
                  TopologyStatus.REBALANCING)

#: Every allowed (status, event type), ``None`` the status before a submit; anything else
#: raises InvalidTransition.
TRANSITIONS: dict[tuple[TopologyStatus | None, type[Event]], Callable[..., Result]] = {
    (None, Submit): _submit,
    (_A, Activate): _noop,  # as Storm: activating an active topology is not an error
    (_A, Deactivate): _set_status(_I),
    (_A, Kill): _kill,
    (_A, Rebalance): _rebalance,
    (_A, Tick): _noop,
    (_A, Startup): _noop,
    (_I, Activate): _set_status(_A),
    (_I, Deactivate): _noop,
    (_I, Kill): _kill,
    (_I, Rebalance): _rebalance,
    (_I, Tick): _noop,
    (_I, Startup): _noop,
    (_K, Kill): _kill_again,
    (_K, Tick): _due(False, _remove),
    (_K, Startup): _due(True, _remove),
    (_R, Kill): _kill,  # kill wins over a pending rebalance
    (_R, Tick): _due(False, _finish_rebalance),
    (_R, Startup): _due(True, _finish_rebalance),
}

_VERB = {Activate: "activated", Deactivate: "deactivated", Rebalance: "rebalanced"}


def _when(secs: float) -> str:
    return datetime.fromtimestamp(secs, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _refusal(state: TopologyState | None, event: Event) -> InvalidTransition:
    if state is None:
        tid = getattr(event, "topology_id", None)
        return InvalidTransition(tid, None, type(event).__name__, event.stimulus_id, (),
                                 message=f"no such topology: it cannot be "
                                         f"{_VERB.get(type(event), 'changed')}")
    if isinstance(event, Submit):
        return InvalidTransition(state.topology_id, state.status, "Submit", event.stimulus_id,
                                 (), message=f"topology {state.topology_id} exists already")
    verb = _VERB[type(event)]
    at = _when(state.transition_at)
    if state.status is _K:
        msg = (f"topology {state.name} is being killed; it cannot be {verb} (it is removed "
               f"at {at}; submit it again after that)")
    elif isinstance(event, Rebalance):
        msg = (f"topology {state.name} is already being rebalanced; it cannot be rebalanced "
               f"again until the current rebalance finishes at {at}")
    else:
        msg = (f"topology {state.name} is being rebalanced; it cannot be {verb} until the "
               f"rebalance finishes at {at}; retry then")
    return InvalidTransition(state.topology_id, state.status, type(event).__name__,
                             event.stimulus_id, (), message=msg)


def transition(state: TopologyState | None, event: Event) -> Result:
    """Apply ``event`` to ``state`` (None before a submit): ``(new state or None if removed,
    instructions)``.

    The daemon executes the instructions in order. Raises :class:`InvalidTransition` for
    an event the status does not allow, ValueError for a rebalance naming an unknown
    component, TypeError for something that is not an event.
    """
    status = None if state is None else state.status
    handler = TRANSITIONS.get((status, type(event)))
    if handler is not None:
        return handler(state, event)
    if isinstance(event, Event):
        raise _refusal(state, event)
    raise TypeError(f"not a lifecycle event: {event!r}")
