"""Profiling and debugging a running topology (Storm's "Profiling and Debugging"): the records
and files Nimbus, supervisors, workers, the logviewer and the UI agree on.

Profiler requests (Storm's ``ProfileRequest``/``setWorkerProfiler``): ``squall profile`` or
the UI asks Nimbus, which checks the topology's ACL and keeps the topology's recent requests
in ZooKeeper (``/profilerconfig/<id>``, bounded, each expiring); each supervisor copies a
worker's own requests into its worker directory (:data:`PROFILER_FILE`), and the worker
runs them on a thread of its own and writes the result into its log directory, where the
logviewer serves it:

* ``threads`` (Storm's jstack): every Python thread's stack, by name;
* ``memory`` (Storm's heap dump): the top allocations of :mod:`tracemalloc`, which the
  first request starts (the snapshot covers only what was allocated since);
* ``cpu`` (Storm's profiler start): a sampling profile of ``secs`` seconds as a flame graph
  (SVG) and collapsed stacks; ``stop`` ends a running one early (Storm's profiler stop).

Debug sampling (Storm's ``debug`` / ``topology.debug`` with a sampling percentage and its
event logger): Nimbus keeps the topology's debug options (``/debugoptions/<id>``); workers
get them the same way and their executors write a sampled share of the tuples they emit,
as one JSON line per event (:func:`format_event`, values as a bounded ``repr``, never
unpickled or evaluated), into ``<topology id>-<port>.events.log``.
"""

from __future__ import annotations

import json
import math
import os
import re
import reprlib
from typing import Any, Iterable, Mapping

from .contract import write_json_if_changed

#: The actions, with Storm's ``ProfileAction`` each stands for.
ACTIONS = {"threads": "JSTACK_DUMP", "memory": "JMAP_DUMP", "cpu": "JPROFILE_START",
           "stop": "JPROFILE_STOP"}
#: Storm's names (its REST paths and ProfileAction) for ours.
ALIASES = {"jstack": "threads", "dumpjstack": "threads", "jstack_dump": "threads",
           "heap": "memory", "dumpheap": "memory", "jmap_dump": "memory",
           "start": "cpu", "profile": "cpu", "jprofile_start": "cpu",
           "jprofile_stop": "stop"}
#: Seconds a memory snapshot waits after starting tracemalloc, and a CPU profile samples,
#: unless the request says.
DEFAULT_SECS = 10
MAX_SECS = 600
#: How long a request waits for its worker past its own duration: a worker restarted or
#: slow to sync within that still runs it; later, it is dropped.
PICKUP_SECS = 120
#: Unexpired requests Nimbus keeps per worker and per topology (more are refused): a client
#: cannot make a worker profile without end, nor grow the ZooKeeper node.
MAX_PENDING_PER_WORKER = 8
MAX_PENDING_PER_TOPOLOGY = 64
#: Dump files a worker keeps in its log directory (the oldest go first); the supervisor
#: removes those of topologies gone from the host with their logs.
MAX_DUMPS_PER_WORKER = 24

#: Worker-directory files the supervisor writes (the worker follows their mtimes).
PROFILER_FILE = "profiler.json"
DEBUG_FILE = "debug.json"

#: Debug sampling: the most characters of one event's values (and of its message id).
EVENT_VALUES_CHARS = 1024
EVENT_MSG_ID_CHARS = 256
#: An events log rotates past this (one older file is kept).
EVENTS_MAX_BYTES = 16 * 1024 * 1024
#: The topology-wide entry of the debug options (component ids are never empty).
ALL_COMPONENTS = ""

#: A worker's artifacts beside its log in the host's log directory (Storm keeps its dumps
#: and events.log in the worker's artifacts directory):
#: ``<topology id>-<port>.<kind>-<UTC stamp>-<request id>.<ext>`` and
#: ``<topology id>-<port>.events.log`` (``.1`` once rotated).
WORKER_ARTIFACT = re.compile(
    r"^(?P<tid>.+)-(?P<port>\d+)\.(?:(?P<kind>threads|memory|cpu)-(?P<stamp>\d{8}-\d{6})-"
    r"(?P<rid>[0-9a-f]{6,32})\.(?P<ext>txt|svg|collapsed)|(?P<events>events)\.log(?:\.\d)?)$")
REQUEST_ID = re.compile(r"^[0-9a-f]{6,32}$")


def canonical_action(action: str) -> str:
    """Our name for ``action`` (Storm's names too); ValueError lists the known ones."""
    a = str(action).strip().lower()
    a = ALIASES.get(a, a)
    if a not in ACTIONS:
        raise ValueError(f"unknown profiler action {str(action)[:40]!r}; use one of "
                         f"{', '.join(ACTIONS)} (or Storm's {', '.join(sorted(ALIASES))})")
    return a


def check_secs(action: str, secs: float | None) -> int:
    """The seconds a request of ``action`` runs (0 for the instant ones); ValueError when
    out of 1..MAX_SECS."""
    if action not in ("memory", "cpu"):
        return 0
    if secs is None or secs == 0:
        return DEFAULT_SECS
    if not isinstance(secs, (int, float)) or not math.isfinite(secs) or \
            not 1 <= secs <= MAX_SECS:
        raise ValueError(f"a {action} request runs 1 to {MAX_SECS} seconds, got {secs}")
    return int(secs)


def expires_at(request: Mapping[str, Any]) -> float:
    return float(request.get("time", 0)) + float(request.get("secs", 0)) + PICKUP_SECS


def live_requests(requests: Iterable[Mapping[str, Any]], now: float) -> list[dict]:
    """The requests not yet expired, oldest first (malformed ones dropped)."""
    out = []
    for r in requests:
        if not isinstance(r, Mapping) or not REQUEST_ID.match(str(r.get("id", ""))) or \
                r.get("action") not in ACTIONS:
            continue
        try:
            if expires_at(r) > now:
                out.append(dict(r))
        except (TypeError, ValueError):
            continue
    return sorted(out, key=lambda r: float(r["time"]))


def active_profiles(requests: Iterable[Mapping[str, Any]], now: float) -> list[dict]:
    """CPU profiles still sampling (Storm's "profilerActive"): those whose time is not up and
    that no later ``stop`` of the same worker ended."""
    reqs = live_requests(requests, now)
    out = []
    for r in reqs:
        if r["action"] != "cpu" or float(r["time"]) + float(r["secs"]) <= now:
            continue
        stopped = any(s["action"] == "stop" and s["worker"] == r["worker"] and
                      float(s["time"]) >= float(r["time"]) for s in reqs)
        if not stopped:
            out.append(r)
    return out


# --- debug options (Storm's DebugOptions per component) -----------------------------------
def check_pct(pct: Any) -> float:
    """A sampling percentage: a finite number 0..100; ValueError otherwise."""
    try:
        value = float(pct)
    except (TypeError, ValueError):
        raise ValueError(f"sampling percentage {str(pct)[:40]!r} is not a number") from None
    if not math.isfinite(value) or not 0 <= value <= 100:
        raise ValueError(f"sampling percentage must be 0 to 100, got {pct}")
    return value


def sampling_pct(options: Mapping[str, Any], component: str) -> float:
    """The share of ``component``'s emits to log, 0..100, as Storm resolves it: the
    component's own entry, else the topology-wide one (which leaves system components,
    ``__acker`` and the like, alone)."""
    entry = options.get(component)
    if entry is None and not component.startswith("__"):
        entry = options.get(ALL_COMPONENTS)
    if not isinstance(entry, Mapping) or not entry.get("enable"):
        return 0.0
    try:
        return check_pct(entry.get("pct", 0))
    except ValueError:
        return 0.0


# --- the worker directory's files ----------------------------------------------------------
def write_worker_files(worker_dir: str, requests: list[Mapping[str, Any]],
                       debug: Mapping[str, Any]) -> None:
    """The supervisor's copy of a worker's profiler requests and of the topology's debug
    options, each written only when it changed (the worker follows the mtimes)."""
    write_json_if_changed(os.path.join(worker_dir, PROFILER_FILE),
                      {"requests": [dict(r) for r in requests]})
    write_json_if_changed(os.path.join(worker_dir, DEBUG_FILE), dict(debug))


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def read_requests(worker_dir: str) -> list[dict]:
    data = _read_json(os.path.join(worker_dir, PROFILER_FILE))
    reqs = data.get("requests") if isinstance(data, dict) else None
    return [r for r in reqs if isinstance(r, dict)] if isinstance(reqs, list) else []


def read_debug(worker_dir: str) -> dict:
    data = _read_json(os.path.join(worker_dir, DEBUG_FILE))
    return data if isinstance(data, dict) else {}


# --- file names ----------------------------------------------------------------------------
def dump_name(topology_id: str, port: int, kind: str, stamp: str, request_id: str,
              ext: str) -> str:
    return f"{topology_id}-{port}.{kind}-{stamp}-{request_id}.{ext}"


def events_name(topology_id: str, port: int) -> str:
    return f"{topology_id}-{port}.events.log"


def worker_prefix(topology_id: str, port: int) -> str:
    """What every file of that worker in the log directory starts with."""
    return f"{topology_id}-{port}."


# --- events --------------------------------------------------------------------------------
class _BoundedRepr(reprlib.Repr):
    """``repr`` whose work is bounded too, not only its output: a string or bytes value is
    cut before it is rendered, containers show their first items, a huge int its size."""

    def __init__(self, chars: int):
        super().__init__()
        self.maxlevel = 3
        self.maxdict = 16
        self.maxlist = self.maxtuple = self.maxset = self.maxfrozenset = 32
        self.maxdeque = self.maxarray = 32
        self.maxstring = chars
        self.maxlong = 64
        self.maxother = 256

    def repr_bytes(self, x: bytes, level: int) -> str:
        keep = max(16, self.maxstring // 16)  # a byte may take 4 characters (\\x00)
        s = repr(bytes(x[:keep]))
        return s if len(x) <= keep else s + f"...({len(x):,} bytes)"

    repr_bytearray = repr_bytes

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 256:  # str() of a huge int is slow, and refused past 4,300 digits
            return f"<int of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_REPRS = {EVENT_VALUES_CHARS: _BoundedRepr(EVENT_VALUES_CHARS),
          EVENT_MSG_ID_CHARS: _BoundedRepr(EVENT_MSG_ID_CHARS)}


def bounded_repr(value: Any, chars: int = EVENT_VALUES_CHARS) -> str:
    """``repr(value)`` in at most ``chars`` characters; a ``__repr__`` that raises shows
    as such (a user's object must not break the emit it describes)."""
    r = _REPRS.get(chars) or _BoundedRepr(chars)
    try:
        text = r.repr(value)
    except Exception as e:  # noqa: BLE001 - anything user code raises
        text = f"<repr raised {type(e).__name__}>"
    return text if len(text) <= chars else text[:chars - 3] + "..."


def format_event(ts: float, component: str, task: int, stream: str, msg_id: Any,
                 values: Any) -> str:
    """One events-log line (Storm's EventInfo: time, component, task, message id, values;
    and the stream): a JSON object, so no value can forge another line or field."""
    return json.dumps({"ts": round(ts, 3), "component": component, "task": task,
                       "stream": stream,
                       "messageId": None if msg_id is None
                       else bounded_repr(msg_id, EVENT_MSG_ID_CHARS),
                       "values": bounded_repr(values, EVENT_VALUES_CHARS)},
                      separators=(",", ":")) + "\n"


def parse_event(line: str | bytes) -> dict | None:
    """An events-log line back as a dict, or None for anything else."""
    try:
        data = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) and "component" in data else None
