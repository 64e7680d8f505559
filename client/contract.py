"""The records and files that cross a process boundary between Nimbus, supervisors and workers.

One typed home for each, with to/from JSON and a format version, used by both sides:

* :class:`Assignment` -- ``/assignments/<topology id>`` in ZooKeeper: written by Nimbus, read
  by every supervisor (Storm's ``Assignment``).
* :class:`SupervisorInfo` -- ``/supervisors/<supervisor id>`` (ephemeral): written by a
  supervisor, read by Nimbus (Storm's ``SupervisorInfo``).
* :class:`WorkerAssignment` -- a worker's ``assignment.json``: written by the supervisor (or
  the static harness), read by the worker (Storm's ``LocalAssignment`` plus the peer map).
* :class:`WorkerStatus` -- the worker's ``status`` file (ACTIVE / INACTIVE / KILLED).
* :class:`WorkerHeartbeat` -- the worker's ``heartbeat.json``: written by the worker every
  ``topology.stats.freq.secs``, read by the supervisor and the harnesses.
* :class:`SupervisorMark` -- the worker's ``supervisor.json``: which supervisor process looks
  after it (written at launch, and again by a restarted supervisor taking it back).
* The file names of a worker directory and of a topology directory, the worker's exit
  codes, and the atomic writes both sides rely on (a reader never sees half a file).

No ZeroMQ, no daemon: this module is what the two sides agree on, nothing more. A record
whose ``version`` is newer than this code knows is refused with :class:`ContractError`
(a host running an older Squall than the writer), never half-read.
"""

from __future__ import annotations

import enum
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .errors import SquallError

# --- files ---------------------------------------------------------------------------------
#: A worker directory (one per topology and port, written by the supervisor):
ASSIGNMENT_FILE = "assignment.json"  #: :class:`WorkerAssignment`, read by the worker
STATUS_FILE = "status"               #: :class:`WorkerStatus`, read by the worker (by mtime)
HEARTBEAT_FILE = "heartbeat.json"    #: :class:`WorkerHeartbeat`, written by the worker
SUPERVISOR_FILE = "supervisor.json"  #: :class:`SupervisorMark`: the supervisor the worker follows
#: A topology directory (one per topology on a supervisor, filled by the fetcher):
TOPOLOGY_FILE = "topology.pb"        #: the serialized user StormTopology
CONF_FILE = "conf.json"              #: the topology conf as Nimbus stored it
#: The topology's code: whichever of these exists goes on the worker's ``sys.path``.
PACKAGE_NAMES = ("package", "package.zip", "package.pyz")
PACKAGE_FILE = "package.zip"         #: what the gRPC fetcher writes
#: The package's folder of shell components' scripts, extracted beside it (Storm's
#: resources/ in the topology jar): their children start there.
RESOURCES_DIR = "resources"

#: A worker's log in its host's log directory (written by the supervisor's launch, served by
#: the logviewer): ``<topology id>-<port>.log``, and its rotations ``.1``, ``.2``, ...
WORKER_LOG = re.compile(r"^(?P<tid>.+)-(?P<port>\d+)\.log(\.\d+)?$")


def worker_log_name(topology_id: str, port: int) -> str:
    """The file name of the log of ``topology_id``'s worker on ``port`` (see WORKER_LOG)."""
    return f"{topology_id}-{port}.log"


# --- worker exit codes ----------------------------------------------------------------------
EXIT_STARTUP_FAILED = 1   #: the worker could not start (unreadable assignment, bad topology)
EXIT_USER_CODE = 20       #: a component's code raised; the worker died, as in Storm
EXIT_PARENT_GONE = 21     #: the process that launched it died


#: An error report's text is cut to this many characters where it is made, and again by each
#: daemon that passes it on: a user's exception message can be megabytes, and every hop (the
#: heartbeat file, the supervisor's gRPC report, the ZooKeeper node holding a component's last
#: errors) has a limit. The worker's log keeps the whole text.
MAX_ERROR_CHARS = 4096
#: A component name in an error report (Nimbus refuses longer names at submit).
MAX_COMPONENT_CHARS = 256


def cut_error(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` if it fits ``limit`` characters, else its head and a note of its length."""
    if len(text) <= limit:
        return text
    note = f" ... [cut: {len(text):,} characters in all; the worker's log has the whole text]"
    return text[:max(limit - len(note), 0)] + note


class ContractError(SquallError):
    """A record that does not fit the contract: missing fields, wrong types, newer version."""


def _check_version(kind: str, data: Mapping[str, Any], known: int) -> None:
    version = data.get("version", 1)
    if not isinstance(version, int) or version < 1:
        raise ContractError(f"{kind}: bad format version {version!r}")
    if version > known:
        raise ContractError(f"{kind} has format version {version}, newer than this Squall "
                            f"reads ({known}): upgrade Squall on this host")


def _parse(kind: str, data: Any, build):
    if not isinstance(data, Mapping):
        raise ContractError(f"{kind} must be a JSON object, got {type(data).__name__}")
    try:
        return build(data)
    except (KeyError, TypeError, ValueError) as e:
        raise ContractError(f"{kind} is malformed: {type(e).__name__}: {e}") from None


def _tasks(ts: Any) -> tuple[int, ...]:
    return tuple(int(t) for t in ts)


def host_port(worker_id: str) -> tuple[str, int]:
    """``"127.0.0.1:6700"`` -> ``("127.0.0.1", 6700)``."""
    host, _, port = worker_id.rpartition(":")
    return host, int(port)


# --- /assignments/<id> ----------------------------------------------------------------------
@dataclass(frozen=True)
class Assignment:
    """Where a topology's executors run: Nimbus's decision, read by every supervisor.

    ``workers`` maps each worker (``host:port``) to its task ids, ``slots`` each worker to
    the supervisor owning that port, ``executors`` lists ``(component, task ids)`` groups as
    Nimbus split them, ``start_times`` when each worker got its current tasks (kept while they
    stay), and ``revision`` counts the writes of this topology's assignment.
    """

    topology_id: str
    workers: Mapping[str, tuple[int, ...]]
    slots: Mapping[str, str]
    executors: tuple[tuple[str, tuple[int, ...]], ...] = ()
    start_times: Mapping[str, float] = field(default_factory=dict)
    revision: int = 1

    VERSION = 1

    def to_json(self) -> dict[str, Any]:
        return {"version": self.VERSION, "topology_id": self.topology_id,
                "workers": {w: list(ts) for w, ts in self.workers.items()},
                "slots": dict(self.slots),
                "executors": [[c, list(ts)] for c, ts in self.executors],
                "start_times": dict(self.start_times), "revision": self.revision}

    @classmethod
    def from_json(cls, data: Any) -> "Assignment":
        def build(d):
            _check_version("assignment", d, cls.VERSION)
            return cls(str(d["topology_id"]),
                       {str(w): _tasks(ts) for w, ts in d["workers"].items()},
                       {str(w): str(s) for w, s in (d.get("slots") or {}).items()},
                       tuple((str(c), _tasks(ts)) for c, ts in d.get("executors") or []),
                       {str(w): float(t) for w, t in (d.get("start_times") or {}).items()},
                       int(d.get("revision", 1)))
        return _parse(f"assignment of {data.get('topology_id') if isinstance(data, Mapping) else '?'}",
                      data, build)

    def worker_of_task(self) -> dict[int, str]:
        return {t: w for w, ts in self.workers.items() for t in ts}

    def workers_of(self, supervisor_id: str, host: str, ports: Any) -> list[int]:
        """Ports of this assignment's workers that belong to the supervisor: by the slot's
        owner, or by host for a record without owners."""
        out = []
        for wid in self.workers:
            h, port = host_port(wid)
            owner = self.slots.get(wid)
            if (owner == supervisor_id if owner is not None else h == host) and port in ports:
                out.append(port)
        return sorted(out)

    def executors_on(self, worker_id: str) -> list[list[int]]:
        """The task groups of the executors running on ``worker_id``."""
        mine = set(self.workers.get(worker_id, ()))
        return [list(ts) for _, ts in self.executors if ts and ts[0] in mine]


# --- /supervisors/<id> ------------------------------------------------------------------------
@dataclass(frozen=True)
class SupervisorInfo:
    """What a supervisor advertises: the host its workers are reached at and its slots."""

    host: str
    slots: tuple[int, ...]
    used_slots: tuple[int, ...] = ()
    uptime_secs: float = 0.0
    #: When the record was written (epoch seconds, the supervisor's clock).
    time_secs: float = 0.0

    VERSION = 1

    def to_json(self) -> dict[str, Any]:
        return {"version": self.VERSION, "host": self.host, "slots": list(self.slots),
                "used_slots": list(self.used_slots), "uptime_secs": self.uptime_secs,
                "time_secs": self.time_secs}

    @classmethod
    def from_json(cls, data: Any) -> "SupervisorInfo":
        def build(d):
            _check_version("supervisor info", d, cls.VERSION)
            return cls(str(d["host"]), _tasks(d["slots"]), _tasks(d.get("used_slots") or ()),
                       float(d.get("uptime_secs", 0)), float(d.get("time_secs", 0)))
        return _parse("supervisor info", data, build)


# --- a worker's directory -------------------------------------------------------------------
class WorkerStatus(enum.Enum):
    """The worker's ``status`` file: whether its spouts may emit."""

    ACTIVE = "ACTIVE"
    INACTIVE = "INACTIVE"
    KILLED = "KILLED"

    @classmethod
    def for_topology(cls, topology_status: str) -> "WorkerStatus":
        """The worker status for a topology status as Nimbus stores it (``active``,
        ``inactive``, ``killed``, ``rebalancing``); rebalancing pauses spouts, as in Storm."""
        return {"active": cls.ACTIVE, "killed": cls.KILLED}.get(
            str(topology_status).lower(), cls.INACTIVE)


@dataclass
class WorkerAssignment:
    """What one worker is told to run (Storm's local assignment, with the peer map).

    ``workers`` maps every worker id of the topology (``host:port``) to its task ids;
    ``worker_id`` is this one.
    """

    topology_id: str
    worker_id: str
    host: str
    port: int
    workers: dict[str, list[int]]
    conf: dict[str, Any]
    ipc_dir: str | None = None
    #: -c overrides, re-applied over component conf (they win over everything).
    cli_overrides: dict[str, Any] = field(default_factory=dict)
    #: Directories prepended to sys.path so the topology's code imports.
    code_paths: list[str] = field(default_factory=list)
    #: Task groups of this worker's executors as Nimbus assigned them (after a rebalance -e
    #: they differ from the topology's parallelism); empty: split by the parallelism.
    executors: list[list[int]] = field(default_factory=list)

    VERSION = 1

    @property
    def tasks(self) -> list[int]:
        return self.workers[self.worker_id]

    def to_json(self) -> dict:
        return {"version": self.VERSION, "topology_id": self.topology_id,
                "worker_id": self.worker_id, "host": self.host, "port": self.port,
                "workers": {w: list(t) for w, t in self.workers.items()},
                "conf": self.conf, "ipc_dir": self.ipc_dir, "cli_overrides": self.cli_overrides,
                "code_paths": self.code_paths, "executors": self.executors}

    @classmethod
    def from_json(cls, data: Any) -> "WorkerAssignment":
        def build(d):
            _check_version(ASSIGNMENT_FILE, d, cls.VERSION)
            return cls(d["topology_id"], d["worker_id"], d["host"], int(d["port"]),
                       {w: [int(t) for t in ts] for w, ts in d["workers"].items()},
                       dict(d["conf"]), d.get("ipc_dir"), d.get("cli_overrides") or {},
                       list(d.get("code_paths") or []),
                       [[int(t) for t in ts] for ts in d.get("executors") or []])
        return _parse(ASSIGNMENT_FILE, data, build)

    @classmethod
    def read(cls, worker_dir: str) -> "WorkerAssignment":
        with open(os.path.join(worker_dir, ASSIGNMENT_FILE)) as fh:
            try:
                data = json.load(fh)
            except ValueError as e:
                raise ContractError(f"{ASSIGNMENT_FILE} in {worker_dir} is not JSON: {e}") \
                    from None
        return cls.from_json(data)

    def write(self, worker_dir: str) -> bool:
        """Write ``assignment.json`` atomically when it differs; True if it was written."""
        path = os.path.join(worker_dir, ASSIGNMENT_FILE)
        payload = self.to_json()
        if read_json(path) == payload:
            return False
        write_json_atomic(path, payload)
        return True


class HeartbeatState(str, enum.Enum):
    """``heartbeat.json``'s ``state``: what the worker is doing."""

    RUNNING = "running"
    CRASHED = "crashed"   # user code raised; the worker exits with EXIT_USER_CODE
    STOPPED = "stopped"   # stopped on request


@dataclass
class WorkerHeartbeat:
    """A worker's ``heartbeat.json``: liveness, per-task counters and recent errors.

    ``tasks`` maps a task id (as a string) to its counters (``component``, ``emitted``,
    ``transferred``, ``executed``, ``acked``, ``failed``, ``timed_out``, ``pending`` and, for
    spouts, ``complete_latency_ms``); ``errors`` are the last ones reported, oldest first,
    each ``{"time", "component", "task", "error"}``.
    """

    time: float
    pid: int
    state: HeartbeatState
    topology_id: str
    worker_id: str
    uptime_secs: float = 0.0
    active: bool = True
    #: Every peer worker answered the start-up handshake (spouts wait for it).
    connected: bool = True
    tasks: dict[str, dict] = field(default_factory=dict)
    executors: dict[str, dict] = field(default_factory=dict)
    throttled: bool = False
    dropped_frames: int = 0
    dropped_tuples: int = 0
    dropped_batches: int = 0
    errors: list[dict] = field(default_factory=list)
    rss_bytes: int = 0
    #: Garbage collections so far, per generation (gc.get_stats()).
    gc_collections: list[int] = field(default_factory=list)
    #: The topology has a Topology Master: the supervisor leaves ``tasks`` out of its report
    #: to Nimbus (the master's summary carries them).
    stats_via_master: bool = False
    #: Only in the worker hosting the Topology Master: worker id -> {"time", "uptime",
    #: "tasks"} of every live worker of the topology.
    topology_summary: dict[str, dict] = field(default_factory=dict)
    #: Executors stuck in one step of user code, in words ("spout sentences: next_tuple
    #: has not returned for 12 s").
    stalled: list[str] = field(default_factory=list)

    VERSION = 1

    def to_json(self) -> dict[str, Any]:
        return {"version": self.VERSION, "time": self.time, "pid": self.pid,
                "state": self.state.value, "topology_id": self.topology_id,
                "worker_id": self.worker_id, "uptime_secs": self.uptime_secs,
                "active": self.active, "connected": self.connected, "tasks": self.tasks,
                "executors": self.executors,
                "throttled": self.throttled, "dropped_frames": self.dropped_frames,
                "dropped_tuples": self.dropped_tuples, "dropped_batches": self.dropped_batches,
                "errors": self.errors, "rss_bytes": self.rss_bytes,
                "gc_collections": self.gc_collections,
                "stats_via_master": self.stats_via_master,
                "topology_summary": self.topology_summary, "stalled": self.stalled}

    @classmethod
    def from_json(cls, data: Any) -> "WorkerHeartbeat":
        def build(d):
            _check_version(HEARTBEAT_FILE, d, cls.VERSION)
            return cls(float(d["time"]), int(d["pid"]), HeartbeatState(d["state"]),
                       str(d.get("topology_id", "")), str(d.get("worker_id", "")),
                       float(d.get("uptime_secs", 0)), bool(d.get("active", True)),
                       bool(d.get("connected", True)),
                       dict(d.get("tasks") or {}), dict(d.get("executors") or {}),
                       bool(d.get("throttled", False)), int(d.get("dropped_frames", 0)),
                       int(d.get("dropped_tuples", 0)), int(d.get("dropped_batches", 0)),
                       list(d.get("errors") or []), int(d.get("rss_bytes", 0)),
                       [int(n) for n in d.get("gc_collections") or []],
                       bool(d.get("stats_via_master", False)),
                       dict(d.get("topology_summary") or {}),
                       [str(x) for x in d.get("stalled") or []])
        return _parse(HEARTBEAT_FILE, data, build)

    @classmethod
    def read(cls, worker_dir: str, pid: int | None = None) -> "WorkerHeartbeat | None":
        """The worker's latest heartbeat, or None when there is none yet, it is unreadable,
        or (``pid`` given) it was left by another process (an earlier one on that port)."""
        data = read_json(os.path.join(worker_dir, HEARTBEAT_FILE))
        if data is None:
            return None
        try:
            hb = cls.from_json(data)
        except ContractError:
            return None
        return hb if pid is None or hb.pid == pid else None

    def write(self, worker_dir: str) -> None:
        write_json_atomic(os.path.join(worker_dir, HEARTBEAT_FILE), self.to_json())


def read_status(worker_dir: str) -> WorkerStatus | None:
    """The ``status`` file, or None when absent; an unknown value reads as INACTIVE."""
    try:
        with open(os.path.join(worker_dir, STATUS_FILE)) as fh:
            text = fh.read().strip().upper()
    except FileNotFoundError:
        return None
    try:
        return WorkerStatus(text)
    except ValueError:
        return WorkerStatus.INACTIVE


def write_status(worker_dir: str, status: WorkerStatus) -> bool:
    """Write the ``status`` file atomically, only on change (the worker follows its mtime);
    True if it was written."""
    if read_status(worker_dir) == status:
        return False
    write_text_atomic(os.path.join(worker_dir, STATUS_FILE), status.value + "\n")
    return True


def process_start_time(pid: int) -> str | None:
    """A process's start time (clock ticks since boot, from ``/proc``), which tells it from a
    later process given the same pid; None if there is no such process or it has exited
    and waits to be reaped (a zombie). Linux."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return None if fields[0] in (b"Z", b"X") else fields[19].decode()
    except (OSError, IndexError):
        return None


@dataclass(frozen=True)
class SupervisorMark:
    """A worker's ``supervisor.json``: the supervisor process (pid and start time) that looks
    after the worker. A worker whose supervisor is gone keeps running for
    ``supervisor.worker.adopt.secs`` and exits unless a restarted supervisor writes its own
    mark meanwhile (Storm's workers likewise outlive a supervisor restart)."""

    pid: int
    start_time: str
    supervisor_id: str = ""

    VERSION = 1

    @classmethod
    def of_this_process(cls, supervisor_id: str) -> "SupervisorMark":
        return cls(os.getpid(), process_start_time(os.getpid()) or "", supervisor_id)

    def alive(self) -> bool:
        """The process this mark names still runs (not a later one with its pid)."""
        return bool(self.start_time) and process_start_time(self.pid) == self.start_time

    def write(self, worker_dir: str) -> None:
        write_json_atomic(os.path.join(worker_dir, SUPERVISOR_FILE),
                          {"version": self.VERSION, "pid": self.pid,
                           "start_time": self.start_time, "supervisor_id": self.supervisor_id})

    @classmethod
    def read(cls, worker_dir: str) -> "SupervisorMark | None":
        """The mark, or None when missing or unreadable (a newer version included)."""
        def build(d):
            _check_version(SUPERVISOR_FILE, d, cls.VERSION)
            return cls(int(d["pid"]), str(d["start_time"]), str(d.get("supervisor_id", "")))

        try:
            return _parse(SUPERVISOR_FILE, read_json(os.path.join(worker_dir, SUPERVISOR_FILE)),
                          build)
        except ContractError:
            return None


# --- atomic files ----------------------------------------------------------------------------
def write_text_atomic(path: str, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path`` and rename it over ``path``: a
    reader sees the old file or the new one, never half of one. Owner-only (0600): an
    assignment carries the topology's conf and its secrets (the CurveZMQ key)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def write_json_atomic(path: str, data: Any) -> None:
    write_text_atomic(path, json.dumps(data))


def write_json_if_changed(path: str, value: Any) -> bool:
    """Write ``value`` as JSON, atomically, only when the file holds something else (a
    worker follows such files by their mtime); returns whether it wrote."""
    text = json.dumps(value, sort_keys=True) + "\n"
    try:
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return False
    except OSError:
        pass
    write_text_atomic(path, text)
    return True


def read_json(path: str) -> Any:
    """The JSON in ``path``, or None when it is missing or not JSON."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def resources_dir(topology_dir: str, code_paths: Iterable[str] = ()) -> str:
    """The topology's resources/ folder on this host: extracted from the package archive
    by the supervisor, inside a package that is a directory, or inside a code path (a
    static cluster's). May not exist."""
    for d in (topology_dir, os.path.join(topology_dir, "package"), *code_paths):
        candidate = os.path.join(d, RESOURCES_DIR)
        if os.path.isdir(candidate):
            return candidate
    return os.path.join(topology_dir, RESOURCES_DIR)
