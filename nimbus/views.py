"""What Nimbus shows: the cluster summary and one topology's executors, counters and errors.

Storm's ``getClusterInfo`` and ``getTopologyInfo``, as plain dicts the servicer turns into
protobuf messages. Read-only: any Nimbus answers (a follower too), from ZooKeeper (topology
status, assignments, supervisors, errors), the package store (which components are spouts)
and the heartbeats this Nimbus received (:class:`~.liveness.Liveness`; counters are zero
before the first).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from google.protobuf.message import DecodeError

from ..client.cluster_state import ClusterState
from ..client.contract import Assignment, ContractError, SupervisorInfo, host_port
from ..client.errors import SquallError
from ..proto import topology_pb2
from .lifecycle import TopologyState
from .liveness import Liveness
from .package_store import PackageStore
from .stats_windows import Snap, summarize

#: The span of "recent" worker restarts in summaries, seconds.
RESTART_WINDOW_SECS = 60


def stored_assignment(state: ClusterState, tid: str) -> Assignment | None:
    """The topology's assignment as stored, or None (none yet, or one that does not fit the
    contract: shown as unassigned rather than failing the view)."""
    found = state.get_assignment(tid)
    if found is None:
        return None
    try:
        return Assignment.from_json(found[0])
    except ContractError:
        return None


def cluster_info(state: ClusterState, topologies: list[TopologyState],
                 nimbuses: list[dict[str, Any]], uptime_secs: float,
                 liveness: Liveness | None = None,
                 last_error: Callable[[str], dict | None] = lambda tid: None
                 ) -> dict[str, Any]:
    """Supervisors, topologies (with their health: recent restarts, live workers, the last
    error; ``liveness`` only on the leader, the one that receives heartbeats) and Nimbuses
    (Storm's getClusterInfo)."""
    now = time.time()
    used: dict[str, int] = {}
    rows = []
    for t in topologies:
        record = stored_assignment(state, t.topology_id)
        for sid in (record.slots.values() if record else ()):
            used[sid] = used.get(sid, 0) + 1
        rows.append({
            "id": t.topology_id, "name": t.name, "status": t.status.name,
            "num_workers": len(record.workers) if record else 0,
            "num_executors": len(record.executors) if record else 0,
            "num_tasks": sum(len(ts) for _, ts in record.executors) if record else 0,
            "uptime_secs": int(now - t.launch_time_secs), "owner": t.owner})
        if liveness is not None:
            rows[-1]["recent_restarts"] = liveness.recent_restarts(t.topology_id, now,
                                                                   RESTART_WINDOW_SECS)
            rows[-1]["restart_window_secs"] = RESTART_WINDOW_SECS
            rows[-1]["live_workers"] = liveness.live_workers(record, now) if record else 0
            rows[-1]["stalled"] = liveness.stalled(record, now) if record else []
            rows[-1]["health_known"] = True
        err = last_error(t.topology_id)
        if err:
            rows[-1]["last_error"] = err
    supervisors = []
    for sid, data in sorted(state.supervisors().items()):
        try:
            info = SupervisorInfo.from_json(data)
        except ContractError:  # shown, with what is known, rather than failing the view
            info = SupervisorInfo(str(data.get("host", "?")) if isinstance(data, dict) else "?",
                                  ())
        # The record is written at registration (and when its used slots change): its uptime
        # then, plus the time since, is the uptime now (Storm's is computed when asked too).
        uptime = info.uptime_secs + max(0.0, now - info.time_secs) if info.time_secs \
            else info.uptime_secs
        supervisors.append({"id": sid, "host": info.host, "uptime_secs": int(uptime),
                            "num_slots": len(info.slots), "num_used_slots": used.get(sid, 0)})
    return {"supervisors": supervisors, "topologies": sorted(rows, key=lambda t: t["name"]),
            "nimbus_uptime_secs": int(uptime_secs), "nimbuses": nimbuses}


def nimbus_rows(state: ClusterState, leader: str | None) -> list[dict[str, Any]]:
    """The registered Nimbuses, the leader marked."""
    now = time.time()
    return [{"host": info.get("host", ""), "port": int(info.get("port", 0)),
             "uptime_secs": int(now - info.get("start_time_secs", now)),
             "is_leader": hp == leader, "version": info.get("version", "")}
            for hp, info in sorted(state.nimbuses().items())]


def topology_info(state: ClusterState, packages: PackageStore, liveness: Liveness,
                  topology: TopologyState, window_secs: float = 0) -> dict[str, Any]:
    """One topology's executors (with host, port, uptime), per-component totals and recent
    errors (Storm's getTopologyInfo), counters over the last ``window_secs`` (0: since each
    worker started; nimbus/stats_windows.py)."""
    now = time.time()
    tid = topology.topology_id
    record = stored_assignment(state, tid) or Assignment(tid, {}, {})
    worker_of = record.worker_of_task()
    latest = liveness.task_stats(record)
    executors = []
    parts = []  # per executor: its tasks' (values, span) over the window
    for comp, tasks in record.executors:
        hp = worker_of.get(tasks[0], ":0")
        host, port = host_port(hp)
        uptime = now - record.start_times.get(hp, now)
        ex = {"component_id": comp, "task_start": tasks[0], "task_end": tasks[-1],
              "host": host, "port": port, "uptime_secs": int(uptime)}
        parts.append(liveness.windowed(tid, list(tasks), now, window_secs))
        ex.update(summarize(parts[-1], uptime if not window_secs else 0.0))
        # Gauges, not windowed: trees in flight now, and when the counters were taken.
        ex["pending"] = sum(latest[t][1].pending for t in tasks if t in latest)
        times = [latest[t][0] for t in tasks if t in latest]
        if times:
            ex["stats_time_secs"] = max(times)
        progress = merge_progress([progress_row(latest[t][1].progress) for t in tasks
                                   if t in latest and latest[t][1].HasField("progress")])
        if progress:
            ex["progress"] = progress
        executors.append(ex)
    components = component_stats(_spouts(packages, tid), executors, parts)
    return {"id": tid, "name": topology.name, "status": topology.status.name,
            "uptime_secs": int(now - topology.launch_time_secs), "owner": topology.owner,
            "executors": sorted(executors, key=lambda e: (e["component_id"], e["task_start"])),
            "components": components, "errors": [error_row(e) for e in state.errors(tid)],
            "window_secs": int(window_secs),
            "recent_restarts": liveness.recent_restarts(tid, now, RESTART_WINDOW_SECS),
            "restart_window_secs": RESTART_WINDOW_SECS}


#: BatchProgress fields merged by sum (counts and rates of tasks working side by side) and by
#: max (the latest batch id and time, the longest durations).
_SUMMED = ("num_input_rows", "input_rows_per_second", "processed_rows_per_second", "batches",
           "rows", "failed_batches")


def progress_row(msg: Any) -> dict[str, Any]:
    """A BatchProgress message -> a dict of its fields."""
    return {f.name: getattr(msg, f.name) for f in msg.DESCRIPTOR.fields}


def merge_progress(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The latest batches of a group of tasks as one BatchProgress (its doc says how), or
    None when no task of the group reported one."""
    if not rows:
        return None
    return {k: sum(r.get(k, 0) for r in rows) if k in _SUMMED else max(r.get(k, 0) for r in rows)
            for k in rows[0]}


def error_row(e: dict) -> dict[str, Any]:
    """An error as ClusterState keeps it -> ErrorInfo's fields."""
    return {"component": e.get("component", ""), "error": e.get("error", ""),
            "time_secs": int(e.get("time") or 0), "host": e.get("host") or "",
            "port": int(e.get("port") or 0), "task": int(e.get("task") or 0)}


def _spouts(packages: PackageStore, tid: str) -> set[str]:
    try:  # the spout ids are the message's keys: no need to rebuild the topology
        return set(topology_pb2.StormTopology.FromString(packages.read_topology(tid)).spouts)
    except (OSError, SquallError, DecodeError):
        return set()


def component_stats(spouts: set[str], executors: list[dict],
                    parts: list[list[tuple[Snap, float]]]) -> list[dict[str, Any]]:
    """Per-component totals (Storm UI's component table): :func:`summarize` over all the
    tasks of the component's ``executors`` (``parts[i]`` are executor i's), with the
    highest executor's capacity (as Storm's UI) and the trees in flight summed."""
    groups: dict[str, list[int]] = {}
    for i, ex in enumerate(executors):
        groups.setdefault(ex["component_id"], []).append(i)
    out = []
    for comp in sorted(groups):
        exs = [executors[i] for i in groups[comp]]
        c: dict[str, Any] = {"component_id": comp,
                             "type": "spout" if comp in spouts else "bolt",
                             "num_executors": len(exs),
                             "num_tasks": sum(e["task_end"] - e["task_start"] + 1 for e in exs)}
        c.update(summarize([p for i in groups[comp] for p in parts[i]]))
        c["capacity"] = max((e.get("capacity", 0.0) for e in exs), default=0.0)
        c["pending"] = sum(e.get("pending", 0) for e in exs)
        progress = merge_progress([e["progress"] for e in exs if e.get("progress")])
        if progress:
            c["progress"] = progress
        out.append(c)
    return out
