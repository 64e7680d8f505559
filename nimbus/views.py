"""What Nimbus shows: the cluster summary and one topology's executors, counters and errors.

Storm's ``getClusterInfo`` and ``getTopologyInfo``, as plain dicts the servicer turns into
protobuf messages. Read-only: any Nimbus answers (a follower too), from ZooKeeper (topology
status, assignments, supervisors, errors), the package store (which components are spouts)
and the heartbeats this Nimbus received (:class:`~.liveness.Liveness`; counters are zero
before the first).
"""

from __future__ import annotations

import time
from typing import Any

from google.protobuf.message import DecodeError

from ..client.cluster_state import ClusterState
from ..client.contract import Assignment, ContractError, SupervisorInfo, host_port
from ..client.errors import SquallError
from ..proto import topology_pb2
from .lifecycle import TopologyState
from .liveness import Liveness
from .package_store import PackageStore

#: TaskStats counters summed into executor and component summaries.
STAT_FIELDS = ("emitted", "transferred", "executed", "acked", "failed", "pending")


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
                 nimbuses: list[dict[str, Any]], uptime_secs: float) -> dict[str, Any]:
    """Supervisors, topologies and Nimbuses (Storm's getClusterInfo)."""
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
    supervisors = []
    for sid, data in sorted(state.supervisors().items()):
        try:
            info = SupervisorInfo.from_json(data)
        except ContractError:  # shown, with what is known, rather than failing the view
            info = SupervisorInfo(str(data.get("host", "?")) if isinstance(data, dict) else "?",
                                  ())
        supervisors.append({"id": sid, "host": info.host, "uptime_secs": int(info.uptime_secs),
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
                  topology: TopologyState) -> dict[str, Any]:
    """One topology's executors (with host, port, uptime), per-component totals and recent
    errors (Storm's getTopologyInfo)."""
    now = time.time()
    tid = topology.topology_id
    record = stored_assignment(state, tid) or Assignment(tid, {}, {})
    worker_of = record.worker_of_task()
    stats = liveness.task_stats(record)
    executors = []
    for comp, tasks in record.executors:
        hp = worker_of.get(tasks[0], ":0")
        host, port = host_port(hp)
        ex = {"component_id": comp, "task_start": tasks[0], "task_end": tasks[-1],
              "host": host, "port": port,
              "uptime_secs": int(now - record.start_times.get(hp, now))}
        lat_sum = lat_n = 0.0
        for t in tasks:
            if t not in stats:
                continue
            hb_time, ts = stats[t]
            ex["stats_time_secs"] = hb_time
            for f in STAT_FIELDS:
                ex[f] = ex.get(f, 0) + getattr(ts, f)
            if ts.HasField("complete_latency") and ts.complete_latency.n:
                lat_sum += ts.complete_latency.mean * ts.complete_latency.n
                lat_n += ts.complete_latency.n
        if lat_n:
            ex["complete_latency_ms"] = lat_sum / lat_n
            ex["_latency_n"] = lat_n
        executors.append(ex)
    components = component_stats(_spouts(packages, tid), executors)
    for ex in executors:
        ex.pop("_latency_n", None)
    return {"id": tid, "name": topology.name, "status": topology.status.name,
            "uptime_secs": int(now - topology.launch_time_secs), "owner": topology.owner,
            "executors": sorted(executors, key=lambda e: (e["component_id"], e["task_start"])),
            "components": components, "errors": state.errors(tid)}


def _spouts(packages: PackageStore, tid: str) -> set[str]:
    try:  # the spout ids are the message's keys: no need to rebuild the topology
        return set(topology_pb2.StormTopology.FromString(packages.read_topology(tid)).spouts)
    except (OSError, SquallError, DecodeError):
        return set()


def component_stats(spouts: set[str], executors: list[dict]) -> list[dict[str, Any]]:
    """Per-component totals of ``executors`` (Storm UI's component table)."""
    out: dict[str, dict[str, Any]] = {}
    for ex in executors:
        comp = ex["component_id"]
        c = out.setdefault(comp, {"component_id": comp,
                                  "type": "spout" if comp in spouts else "bolt",
                                  "num_executors": 0, "num_tasks": 0,
                                  "complete_latency_ms": 0.0, "_n": 0.0})
        c["num_executors"] += 1
        c["num_tasks"] += ex["task_end"] - ex["task_start"] + 1
        for f in STAT_FIELDS:
            c[f] = c.get(f, 0) + ex.get(f, 0)
        n = ex.get("_latency_n", 0)
        if n:  # completions-weighted mean
            c["complete_latency_ms"] = ((c["complete_latency_ms"] * c["_n"]
                                         + ex["complete_latency_ms"] * n) / (c["_n"] + n))
            c["_n"] += n
    for c in out.values():
        del c["_n"]
    return [out[k] for k in sorted(out)]
