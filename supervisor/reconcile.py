"""Which worker processes a supervisor should run: the pure decision logic of its sync loop.

Python counterpart of Storm's supervisor sync-processes (and of Heron's
executor ``get_command_changes``): :func:`diff` compares the workers Nimbus
assigned to this node (one :class:`WorkerSpec` per port) with the ones
running (:class:`RunningWorker`) and splits them into kill / keep / start;
:class:`RestartPolicy` bounds the restarts of a failing worker with
exponential backoff; :func:`plan` combines both into an ordered list of
instructions (:class:`KillWorker`, :class:`LaunchWorker`) that the supervisor
daemon executes. Nothing here touches processes, files, ZooKeeper or a clock:
every time is passed in (any clock, as long as ``now``, ``started_at`` and
``last_heartbeat`` share it), so tests feed events and compare instruction lists.
"""

from __future__ import annotations

import hashlib
import json
import math
import signal
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Container, Iterable, Mapping, Union

#: Launched, no heartbeat read yet.
STARTING = "starting"
#: The heartbeat says the worker runs (heartbeat.json ``state``).
RUNNING = "running"
#: Heartbeat states of a worker on its way out; its process should be gone soon.
EXITING_STATES = frozenset({"stopped", "crashed"})

#: (topology id, port): what restart history is kept per.
SlotKey = tuple[str, int]


def spec_version(topology_id: str, tasks: Iterable[int], data: Any = None) -> str:
    """A short stable hash of what a worker runs; a different value on the same port means restart.

    ``data`` must be JSON-serializable: a repr-based fallback could embed memory
    addresses and restart workers on every sync.
    """
    blob = json.dumps([topology_id, sorted(int(t) for t in tasks), data],
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class WorkerSpec:
    """One worker Nimbus assigned to this supervisor: what the daemon launches on ``port``.

    Example::

        spec = WorkerSpec.of("wc-1-17", 6700, [5, 1, 2], payload=assignment.to_json())
        spec.tasks    # (1, 2, 5)
    """

    topology_id: str
    port: int
    #: Task ids the worker runs, sorted.
    tasks: tuple[int, ...]
    #: Hash of the assignment (see :func:`spec_version`); equal specs with another version restart.
    version: str
    #: What the daemon needs to launch it (e.g. the Assignment JSON). Left out of
    #: equality and hashing: ``version`` already stands for it.
    payload: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, topology_id: str, port: int, tasks: Iterable[int], payload: Any = None,
           version_data: Any = None) -> "WorkerSpec":
        """Build a spec whose version hashes topology, tasks and ``version_data``.

        ``version_data`` defaults to ``payload``; pass something narrower to
        restart only when what matters changes (e.g. leave out the peers'
        tasks once workers follow peer changes without a restart).
        """
        tasks = tuple(sorted(int(t) for t in tasks))
        data = payload if version_data is None else version_data
        return cls(topology_id, int(port), tasks, spec_version(topology_id, tasks, data), payload)

    @property
    def key(self) -> SlotKey:
        return (self.topology_id, self.port)


@dataclass(frozen=True)
class RunningWorker:
    """A worker process the supervisor launched and has not reaped yet.

    Built by the daemon from its process table and the worker's ``heartbeat.json``.
    """

    topology_id: str
    port: int
    pid: int
    #: The :attr:`WorkerSpec.version` it was launched with.
    version: str
    started_at: float
    #: Time of the latest heartbeat read; None before the first one.
    last_heartbeat: float | None = None
    #: :data:`STARTING`, :data:`RUNNING` or one of :data:`EXITING_STATES`.
    state: str = STARTING

    @property
    def key(self) -> SlotKey:
        return (self.topology_id, self.port)


# -- instructions ------------------------------------------------------------


@dataclass(frozen=True)
class LaunchWorker:
    """Start a worker process for ``spec``, then report it with :meth:`RestartPolicy.on_launch`."""

    spec: WorkerSpec

    @property
    def port(self) -> int:
        return self.spec.port


@dataclass(frozen=True)
class KillWorker:
    """Stop the worker ``pid`` on ``port`` (SIGTERM, then SIGKILL after a grace period).

    ``failed`` says the worker misbehaved (hung, reported a crash): the daemon
    reports its exit to :meth:`RestartPolicy.on_exit` so restarts back off.
    A kill for a removed or changed assignment is not a failure.
    """

    port: int
    pid: int
    reason: str
    topology_id: str = field(kw_only=True)
    failed: bool = field(default=False, kw_only=True)


Instruction = Union[LaunchWorker, KillWorker]


@dataclass(frozen=True)
class Changes:
    """The three-way split of :func:`diff`, each dict keyed by port."""

    #: Running workers to stop, as the instruction that stops each.
    to_kill: dict[int, KillWorker]
    #: Running workers that match their spec and are alive.
    to_keep: dict[int, RunningWorker]
    #: Specs without a healthy worker (includes the ports in ``to_kill`` still desired).
    to_start: dict[int, WorkerSpec]


def _check_keys(desired: Mapping[int, WorkerSpec], running: Mapping[int, RunningWorker]) -> None:
    for port, item in [*desired.items(), *running.items()]:
        if item.port != port:
            raise ValueError(f"{type(item).__name__} for port {item.port} filed under port {port}")


def _kill_reason(w: RunningWorker, spec: WorkerSpec | None, now: float,
                 heartbeat_timeout: float, start_timeout: float) -> tuple[str | None, bool]:
    """Why ``w`` must go (None: keep it) and whether that counts as a failure."""
    if spec is None:
        return f"no longer assigned: topology {w.topology_id} has no worker on port {w.port}", False
    if spec.topology_id != w.topology_id:
        return (f"port {w.port} is now assigned to topology {spec.topology_id} "
                f"(was {w.topology_id})"), False
    if spec.version != w.version:
        return f"assignment changed (version {w.version} -> {spec.version})", False
    if w.state in EXITING_STATES:
        return f"worker reported state {w.state!r} but its process is still alive", True
    if w.last_heartbeat is None:
        age = now - w.started_at
        if age > start_timeout:
            return f"no heartbeat {age:.1f}s after launch (start timeout {start_timeout:g}s)", True
        return None, False
    age = now - w.last_heartbeat
    if age > heartbeat_timeout:
        return f"heartbeat is {age:.1f}s old (timeout {heartbeat_timeout:g}s): worker hung", True
    return None, False


def diff(desired: Mapping[int, WorkerSpec], running: Mapping[int, RunningWorker], now: float,
         heartbeat_timeout: float, *, start_timeout: float | None = None) -> Changes:
    """Split wanted vs running workers into kill / keep / start (Heron's ``get_command_changes``).

    A running worker is killed when its port is no longer assigned, is
    assigned to another topology or another assignment version, when it
    reported it is exiting, or when its heartbeat is older than
    ``heartbeat_timeout`` (no heartbeat yet: ``start_timeout`` after launch,
    default ``heartbeat_timeout``; Python start-up with imports is slower than a beat).
    Every desired port without a kept worker is to be started. Each dict is in port order.
    """
    _check_keys(desired, running)
    start_timeout = heartbeat_timeout if start_timeout is None else start_timeout
    to_kill: dict[int, KillWorker] = {}
    to_keep: dict[int, RunningWorker] = {}
    for port in sorted(running):
        w = running[port]
        why, failed = _kill_reason(w, desired.get(port), now, heartbeat_timeout, start_timeout)
        if why is None:
            to_keep[port] = w
        else:
            to_kill[port] = KillWorker(port, w.pid, why, topology_id=w.topology_id, failed=failed)
    to_start = {port: desired[port] for port in sorted(desired) if port not in to_keep}
    return Changes(to_kill, to_keep, to_start)


# -- restarts ----------------------------------------------------------------


def describe_exit(exit_code: int | None) -> str:
    """``exited with code 20`` / ``was killed by SIGKILL`` (Popen's negative codes are signals)."""
    if exit_code is None:
        return "vanished (exit code unknown)"
    if exit_code < 0:
        try:
            return f"was killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"was killed by signal {-exit_code}"
    return f"exited with code {exit_code}"


@dataclass(frozen=True)
class RestartDecision:
    """What to do after a worker exited: restart at ``restart_at``, or give up."""

    #: When the worker may be launched again; None when giving up.
    restart_at: float | None
    give_up: bool
    #: Failures counted since the last stable run (1 for the first).
    attempt: int
    #: A log line: which worker, how it exited, what happens next.
    reason: str


@dataclass
class _Slot:
    """Restart history of one (topology, port)."""

    version: str | None = None
    launched_at: float | None = None
    #: Times of failures since the last stable run, oldest first.
    failures: deque = field(default_factory=deque)
    restart_at: float = -math.inf
    gave_up: RestartDecision | None = None


class RestartPolicy:
    """Bounded restarts with exponential backoff per (topology, port), as dask's Nanny and Heron do.

    The n-th failure in a row waits ``backoff_base * 2**(n-1)`` seconds (capped
    at ``backoff_max``) before the relaunch. A run of at least ``stable_secs``
    clears the history; failures older than ``window_secs`` are forgotten.
    More than ``max_attempts`` counted failures: give up (Nimbus then sees the
    tasks' heartbeats stop and reassigns them). A new assignment version on
    the slot starts with a clean history.

    Example (the daemon's side)::

        policy = RestartPolicy()
        policy.on_launch(spec.key, now, spec.version)        # after LaunchWorker
        decision = policy.on_exit(spec.key, now, exit_code)  # after reaping it
        log.warning(decision.reason)
        policy.blocked(spec.key, now, spec.version)          # plan() asks this
    """

    def __init__(self, max_attempts: int = 10, window_secs: float = 600.0,
                 backoff_base: float = 0.5, backoff_max: float = 30.0,
                 stable_secs: float = 60.0):
        if min(window_secs, backoff_base, stable_secs) <= 0 or max_attempts < 0 \
                or backoff_max < backoff_base:
            raise ValueError("RestartPolicy needs max_attempts >= 0, positive window, base and "
                             "stable period, and backoff_max >= backoff_base")
        self.max_attempts = max_attempts
        self.window_secs = window_secs
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.stable_secs = stable_secs
        self._slots: dict[SlotKey, _Slot] = {}

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before relaunching after the ``attempt``-th failure in a row."""
        # Clamp the exponent so a huge attempt count cannot build a huge int.
        return min(self.backoff_max, self.backoff_base * 2 ** min(attempt - 1, 62))

    def on_launch(self, key: SlotKey, now: float, version: str | None = None) -> None:
        """The daemon launched a worker for ``key`` (a new ``version`` resets the history)."""
        slot = self._slots.get(key)
        if slot is None or (version is not None and version != slot.version):
            slot = self._slots[key] = _Slot(version=version)
        slot.launched_at = now

    def on_exit(self, key: SlotKey, now: float, exit_code: int | None) -> RestartDecision:
        """The worker of ``key`` exited on its own or was killed as failed: when to relaunch."""
        slot = self._slots.setdefault(key, _Slot())
        if slot.gave_up is not None:
            return slot.gave_up
        what, up = f"worker of topology {key[0]} on port {key[1]}", ""
        if slot.launched_at is not None:
            uptime = now - slot.launched_at
            up = f" after {uptime:.1f}s up"
            if uptime >= self.stable_secs:
                slot.failures.clear()  # it ran long enough: this is a fresh failure, not a loop
        slot.launched_at = None
        slot.failures.append(now)
        while slot.failures and slot.failures[0] <= now - self.window_secs:
            slot.failures.popleft()
        attempt = len(slot.failures)
        how = describe_exit(exit_code)
        if attempt > self.max_attempts:
            slot.gave_up = RestartDecision(
                None, True, attempt,
                f"{what} {how}{up}; giving up after {attempt} failures within "
                f"{self.window_secs:g}s (max {self.max_attempts} restarts)")
            return slot.gave_up
        delay = self.backoff(attempt)
        slot.restart_at = now + delay
        return RestartDecision(slot.restart_at, False, attempt,
                               f"{what} {how}{up}; restart {attempt}/{self.max_attempts} "
                               f"in {delay:g}s")

    def blocked(self, key: SlotKey, now: float, version: str | None = None) -> str | None:
        """Why ``key`` may not be launched now (backing off, gave up), or None if it may."""
        slot = self._slots.get(key)
        if slot is None:
            return None
        if version is not None and slot.version is not None and version != slot.version:
            return None  # another assignment: the old one's failures do not hold it back
        if slot.gave_up is not None:
            return f"gave up: {slot.gave_up.reason}"
        if now < slot.restart_at:
            return f"backing off: relaunch in {slot.restart_at - now:.1f}s"
        return None

    def attempts(self, key: SlotKey) -> int:
        """Failures counted for ``key`` since its last stable run."""
        slot = self._slots.get(key)
        return 0 if slot is None else len(slot.failures)

    def next_restart_at(self, now: float) -> float | None:
        """The earliest pending relaunch after ``now``, so the daemon can wake for it."""
        due = [s.restart_at for s in self._slots.values()
               if s.gave_up is None and s.restart_at > now]
        return min(due, default=None)

    def forget(self, key: SlotKey) -> None:
        """Drop the history of a slot (its assignment went away)."""
        self._slots.pop(key, None)

    def retain(self, keys: Iterable[SlotKey]) -> None:
        """Drop the history of every slot not in ``keys`` (call with the desired slots)."""
        keep = set(keys)
        for key in [k for k in self._slots if k not in keep]:
            del self._slots[key]

    def validate_state(self) -> None:
        """Invariants, checked after every unit test."""
        for key, slot in self._slots.items():
            f = list(slot.failures)
            assert f == sorted(f), (key, f)
            assert len(f) <= self.max_attempts + 1, (key, f)
            assert (slot.gave_up is not None) == (len(f) > self.max_attempts), (key, slot)


# -- the plan ------------------------------------------------------------------


def plan(desired: Mapping[int, WorkerSpec], running: Mapping[int, RunningWorker], now: float,
         heartbeat_timeout: float, policy: RestartPolicy, *,
         start_timeout: float | None = None,
         held: Container[str] = frozenset()) -> list[Instruction]:
    """The instructions of one sync round: every kill (port order), then every launch (port order).

    Kills come first and the daemon must finish each (process reaped) before
    going on, so a launch on the same port finds it free. A worker killed as
    failed is not relaunched in the same round: the daemon reports its exit to
    ``policy`` and a later round relaunches it once the backoff has passed.
    Launches the policy holds back (backing off, gave up) are left out; the
    daemon wakes at ``policy.next_restart_at(now)``. ``policy`` is only read. So are
    the launches of the topologies in ``held`` (their Python environment is not built yet:
    supervisor/venvs.py); their running workers are judged as any other.

    The daemon's dispatch::

        for inst in plan(desired, running, now, timeout, policy):
            if isinstance(inst, KillWorker):
                self.kill(inst)
            elif isinstance(inst, LaunchWorker):
                self.launch(inst.spec)
            else:
                raise TypeError(inst)
    """
    changes = diff(desired, running, now, heartbeat_timeout, start_timeout=start_timeout)
    out: list[Instruction] = list(changes.to_kill.values())
    for port, spec in changes.to_start.items():
        kill = changes.to_kill.get(port)
        if kill is not None and kill.failed:
            continue
        if policy.blocked(spec.key, now, spec.version) is not None:
            continue
        if spec.topology_id in held:
            continue
        out.append(LaunchWorker(spec))
    return out
