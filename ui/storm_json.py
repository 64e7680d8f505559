"""Nimbus's answers (proto messages) as Storm's REST API v1 JSON, field names and all.

Pure functions, so the shapes are tested without a server. Storm returns latencies and
capacity as strings with three decimals ("0.048"); so do we, since dashboards parse them
that way. Squall's own additions (health, percentiles, per-stream detail, grouped errors,
when the counts were taken) use new names and never change a Storm field's meaning.

Emitted and transferred count the user's streams only unless ``sys`` is asked for, as Storm's
UI does: the acker's, the system's (``__`` ids) and the internal ones of checkpoints and
Trident's batch coordination (``$`` ids) are left out.
"""

from __future__ import annotations

import time
from typing import Any, Callable
from urllib.parse import quote

from ..client.cluster_state import MAX_ERRORS_PER_COMPONENT
from ..client.profiling import ALL_COMPONENTS, sampling_pct

#: Storm's UI windows, seconds; 0 is all time.
WINDOWS = (600, 10800, 86400, 0)
#: Storm's windowPretty values.
PRETTY = {600: "10m 0s", 10800: "3h 0m 0s", 86400: "1d 0h 0m 0s", 0: "All time"}

LogLink = Callable[[str, str, int], str]  # (topology id, host, port) -> URL


def _worker_links(log_link: LogLink, tid: str, host: str, port: int,
                  component: str = "") -> dict:
    """The worker's page (its dumps) and its events on its host's logviewer, when the link
    maker makes those (ui/server.py LogLinks)."""
    out = {}
    if hasattr(log_link, "dumps"):
        out["dumpsLink"] = log_link.dumps(tid, host, port)  # type: ignore[attr-defined]
    if hasattr(log_link, "events"):
        out["eventLogLink"] = log_link.events(tid, host, port,  # type: ignore[attr-defined]
                                              component)
    return out


def debug_of(info: Any, component: str | None = None) -> tuple[bool, float]:
    """(debug sampling on, its percentage) of the topology (``component`` None) or of one
    component, as its workers resolve them (client/profiling.py sampling_pct)."""
    options = {c: {"enable": o.enable, "pct": o.sampling_pct}
               for c, o in getattr(info, "component_debug", {}).items()}
    pct = sampling_pct(options, ALL_COMPONENTS if component is None else component)
    return pct > 0, pct


def pretty_uptime(secs: int) -> str:
    """Storm's "29m 19s" / "1d 2h 3m 4s"."""
    secs = max(0, int(secs))
    d, rem = divmod(secs, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    parts = [f"{d}d"] if d else []
    if d or h:
        parts.append(f"{h}h")
    if d or h or m:
        parts.append(f"{m}m")
    parts.append(f"{s}s")
    return " ".join(parts)


def parse_window(raw: str | None) -> int:
    """``?window=``: seconds (600, 10800, 86400 or any positive number) or ``:all-time``
    (the default) -> seconds, 0 for all time. ValueError names what is accepted."""
    if raw in (None, "", ":all-time", "all-time"):
        return 0
    try:
        secs = int(raw)
    except ValueError:
        raise ValueError(f"window {raw!r}: use seconds (600, 10800, 86400) or :all-time") \
            from None
    if secs < 0:
        raise ValueError(f"window {raw!r}: must not be negative")
    return secs


def window_label(secs: int) -> str:
    return str(secs) if secs else ":all-time"


def _f3(x: float) -> str:
    return f"{x:.3f}"


def is_system_stream(stream: str) -> bool:
    """Storm's system streams (``__ack_init``, ``__tick``, ...) and Squall's internal ones
    (``$checkpoint``, Trident's ``$batch``, ``$commit``, ``$coord-...``, ``$success``)."""
    return stream.startswith(("__", "$"))


def emits(x: Any, include_sys: bool) -> tuple[int, int]:
    """(emitted, transferred) of an executor or component: its user streams' unless
    ``include_sys``. A message without per-stream counts gives its totals."""
    if include_sys or not x.streams:
        return x.emitted, x.transferred
    user = [v for k, v in x.streams.items() if not is_system_stream(k)]
    return sum(v.emitted for v in user), sum(v.transferred for v in user)


def cluster_summary(c: Any, version: str) -> dict:
    """/api/v1/cluster/summary."""
    slots_total = sum(s.num_slots for s in c.supervisors)
    slots_used = sum(s.num_used_slots for s in c.supervisors)
    return {"stormVersion": version, "squallVersion": version,
            "supervisors": len(c.supervisors), "topologies": len(c.topologies),
            "slotsTotal": slots_total, "slotsUsed": slots_used,
            "slotsFree": slots_total - slots_used,
            "executorsTotal": sum(t.num_executors for t in c.topologies),
            "tasksTotal": sum(t.num_tasks for t in c.topologies),
            "schedulerDisplayResource": False,
            "nimbusUptime": pretty_uptime(c.nimbus_uptime_secs),
            "nimbusUptimeSeconds": c.nimbus_uptime_secs}


def supervisor_summary(c: Any) -> dict:
    """/api/v1/supervisor/summary."""
    return {"supervisors": [
        {"id": s.id, "host": s.host, "uptime": pretty_uptime(s.uptime_secs),
         "uptimeSeconds": s.uptime_secs, "slotsTotal": s.num_slots,
         "slotsUsed": s.num_used_slots, "slotsFree": s.num_slots - s.num_used_slots,
         "version": ""} for s in c.supervisors],
        "schedulerDisplayResource": False}


def nimbus_summary(c: Any) -> dict:
    """/api/v1/nimbus/summary: Storm's status strings "Leader" / "Not a Leader"."""
    return {"nimbuses": [
        {"host": n.host, "port": n.port, "status": "Leader" if n.is_leader else "Not a Leader",
         "nimbusUpTime": pretty_uptime(n.uptime_secs), "nimbusUpTimeSeconds": n.uptime_secs,
         "version": n.version, "nimbusLogLink": ""} for n in c.nimbuses]}


def topology_row(t: Any, health: str) -> dict:
    return {"id": t.id, "encodedId": quote(t.id, safe=""), "name": t.name, "status": t.status,
            "owner": t.owner, "uptime": pretty_uptime(t.uptime_secs),
            "uptimeSeconds": t.uptime_secs, "tasksTotal": t.num_tasks,
            "workersTotal": t.num_workers, "executorsTotal": t.num_executors,
            "replicationCount": 1, "schedulerDisplayResource": False,
            # Squall's additions: what a crash loop looks like while status says ACTIVE.
            "health": health, "recentRestarts": t.recent_restarts,
            "restartWindowSeconds": t.restart_window_secs, "workersLive": t.live_workers,
            "lastError": t.last_error.error if t.HasField("last_error") else ""}


def _error_fields(errors: list, log_link: LogLink, tid: str, now: float) -> dict:
    if not errors:
        return {"lastError": "", "errorHost": "", "errorPort": None, "errorTime": None,
                "errorLapsedSecs": None, "errorWorkerLogLink": ""}
    e = errors[-1]
    return {"lastError": e.error, "errorHost": e.host, "errorPort": e.port,
            "errorTime": e.time_secs, "errorLapsedSecs": int(now - e.time_secs),
            "errorWorkerLogLink": log_link(tid, e.host, e.port) if e.host else ""}


def window_stats(info: Any, secs: int, include_sys: bool = False) -> dict:
    """One entry of topologyStats: the topology's totals over one window (Storm counts what
    spouts emitted and acked; bolts' emits add to emitted and transferred)."""
    spouts = [c for c in info.components if c.type == "spout"]
    done = sum(c.acked for c in spouts)
    lat = sum(c.complete_latency_ms * c.acked for c in spouts) / done if done else 0.0
    counted = [emits(c, include_sys) for c in info.components
               if include_sys or not c.component_id.startswith("__")]
    return {"windowPretty": PRETTY.get(secs, f"{secs}s"), "window": window_label(secs),
            "emitted": sum(e for e, _ in counted),
            "transferred": sum(t for _, t in counted),
            "completeLatency": _f3(lat), "acked": done,
            "failed": sum(c.failed for c in spouts)}


def _error_row(e: Any, log_link: LogLink, tid: str, now: float) -> dict:
    return {"component": e.component, "error": e.error, "errorTime": e.time_secs,
            "errorHost": e.host, "errorPort": e.port, "errorLapsedSecs": int(now - e.time_secs),
            "errorWorkerLogLink": log_link(tid, e.host, e.port) if e.host else ""}


def error_groups(errors: list, log_link: LogLink, tid: str, now: float) -> list[dict]:
    """Errors with the same text from the same component as one row: how many, the first and
    the last time, and where the last one happened; the latest group first. Nimbus keeps the
    last :data:`MAX_ERRORS_PER_COMPONENT` of a component, so ``count`` counts those, and
    ``olderDropped`` says a full list may have let older ones go."""
    kept: dict[str, int] = {}
    groups: dict[tuple[str, str], dict] = {}
    for e in errors:  # oldest first, as Nimbus lists them
        kept[e.component] = kept.get(e.component, 0) + 1
        g = groups.get((e.component, e.error))
        if g is None:
            g = groups[(e.component, e.error)] = {"count": 0, "firstTime": e.time_secs}
        g.update(_error_row(e, log_link, tid, now), count=g["count"] + 1,
                 lastTime=e.time_secs)
    for (comp, _), g in groups.items():
        g["olderDropped"] = kept[comp] >= MAX_ERRORS_PER_COMPONENT
    return sorted(groups.values(), key=lambda g: g["lastTime"], reverse=True)


def _stats_times(info: Any) -> dict[str, float]:
    """component -> when its newest counters were taken (epoch seconds, the worker's clock):
    a rate is counts over the change of this, and no new time means no new counts."""
    out: dict[str, float] = {}
    for ex in info.executors:
        if ex.stats_time_secs:
            out[ex.component_id] = max(out.get(ex.component_id, 0.0), ex.stats_time_secs)
    return out


def topology_page(info: Any, by_window: dict[int, Any], secs: int, conf: dict,
                  log_link: LogLink, include_sys: bool = False,
                  now: float | None = None) -> dict:
    """/api/v1/topology/:id. ``info`` is over the requested window, ``by_window`` holds the
    four standard windows for topologyStats."""
    now = time.time() if now is None else now
    errors_by_comp: dict[str, list] = {}
    for e in info.errors:
        errors_by_comp.setdefault(e.component, []).append(e)
    stats_times = _stats_times(info)
    spouts, bolts = [], []
    for c in info.components:
        if c.component_id.startswith("__") and not include_sys:
            continue
        errs = _error_fields(errors_by_comp.get(c.component_id, []), log_link, info.id, now)
        emitted, transferred = emits(c, include_sys)
        common = {"executors": c.num_executors, "tasks": c.num_tasks, "emitted": emitted,
                  "transferred": transferred, "acked": c.acked, "failed": c.failed,
                  "encodedId": quote(c.component_id, safe=""), **errs,
                  "statsTime": stats_times.get(c.component_id)}
        if c.type == "spout":
            spouts.append({"spoutId": c.component_id, **common,
                           "completeLatency": _f3(c.complete_latency_ms),
                           "completeLatencyP50": _f3(c.complete_latency_p50_ms),
                           "completeLatencyP99": _f3(c.complete_latency_p99_ms),
                           "completeLatencyMs": c.complete_latency_ms,
                           "pending": c.pending})
        else:
            bolts.append({"boltId": c.component_id, **common, "executed": c.executed,
                          "executeLatency": _f3(c.execute_latency_ms),
                          "processLatency": _f3(c.process_latency_ms),
                          "executeLatencyMs": c.execute_latency_ms,
                          "capacity": _f3(c.capacity)})
    workers: dict[tuple[str, int], dict] = {}
    for ex in info.executors:
        w = workers.setdefault((ex.host, ex.port), {
            "topologyId": info.id, "topologyName": info.name, "host": ex.host, "port": ex.port,
            "supervisorId": "", "uptime": pretty_uptime(ex.uptime_secs),
            "uptimeSeconds": ex.uptime_secs, "executorsTotal": 0, "componentNumTasks": {},
            "workerLogLink": log_link(info.id, ex.host, ex.port),
            **_worker_links(log_link, info.id, ex.host, ex.port)})
        w["executorsTotal"] += 1
        n = ex.task_end - ex.task_start + 1
        w["componentNumTasks"][ex.component_id] = w["componentNumTasks"].get(
            ex.component_id, 0) + n
    sampling, pct = debug_of(info)
    return {"id": info.id, "encodedId": quote(info.id, safe=""), "name": info.name,
            "owner": info.owner, "status": info.status,
            "uptime": pretty_uptime(info.uptime_secs), "uptimeSeconds": info.uptime_secs,
            "tasksTotal": sum(c.num_tasks for c in info.components),
            "workersTotal": len(workers),
            "executorsTotal": len(info.executors),
            "msgTimeout": conf.get("topology.message.timeout.secs", 30),
            "window": window_label(secs), "windowHint": PRETTY.get(secs, f"{secs}s"),
            "schedulerDisplayResource": False, "replicationCount": 1,
            # Storm's debug button: the topology-wide sampling (topology.debug logs every
            # emit into the worker's log instead: 100%).
            "debug": sampling or bool(conf.get("topology.debug", False)),
            "samplingPct": pct if sampling else (100 if conf.get("topology.debug") else 0),
            "topologyStats": [window_stats(by_window[w], w, include_sys)
                              for w in WINDOWS if w in by_window],
            "spouts": spouts, "bolts": bolts, "workers": list(workers.values()),
            "recentRestarts": info.recent_restarts,
            "restartWindowSeconds": info.restart_window_secs,
            "errors": [_error_row(e, log_link, info.id, now) for e in list(info.errors)[-20:]],
            "errorGroups": error_groups(list(info.errors), log_link, info.id, now),
            "configuration": conf}


def _counts(kind: str, x: Any, include_sys: bool) -> dict:
    """Storm's counters of an executor or a component (ExecutorSummary, ComponentStats)."""
    emitted, transferred = emits(x, include_sys)
    out = {"emitted": emitted, "transferred": transferred, "acked": x.acked,
           "failed": x.failed}
    if kind == "spout":
        out["completeLatency"] = _f3(x.complete_latency_ms)
    else:
        out.update(executed=x.executed, executeLatency=_f3(x.execute_latency_ms),
                   processLatency=_f3(x.process_latency_ms), capacity=_f3(x.capacity))
    return out


def batch_progress(x: Any) -> dict | None:
    """The latest batch of an executor or component that works in batches (the Spark
    bridge), in the names of Spark's StreamingQueryProgress JSON (``batchId``,
    ``numInputRows``, ``inputRowsPerSecond``, ``processedRowsPerSecond``, ``durationMs``
    with ``triggerExecution`` and ``addBatch``, the time ``fn`` took); None for others."""
    if not x.HasField("progress"):
        return None
    p = x.progress
    return {"batchId": p.batch_id,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(p.timestamp_secs))
            + f".{int(p.timestamp_secs * 1000) % 1000:03d}Z",
            "numInputRows": p.num_input_rows,
            "inputRowsPerSecond": round(p.input_rows_per_second, 1),
            "processedRowsPerSecond": round(p.processed_rows_per_second, 1),
            "durationMs": {"triggerExecution": round(p.duration_ms),
                           "conversion": round(p.conversion_ms),
                           "session": round(p.session_ms), "wait": round(p.wait_ms),
                           "addBatch": round(p.fn_ms)},
            "batches": p.batches, "rows": p.rows, "failedBatches": p.failed_batches}


def component_page(info: Any, component: str, secs: int, by_window: dict[int, Any],
                   log_link: LogLink, include_sys: bool = False,
                   now: float | None = None) -> dict | None:
    """/api/v1/topology/:id/component/:component, or None for an unknown component."""
    now = time.time() if now is None else now
    comp = next((c for c in info.components if c.component_id == component), None)
    if comp is None:
        return None
    kind = comp.type
    mine = [e for e in info.errors if e.component == component]
    execs = []
    for ex in info.executors:
        if ex.component_id != component:
            continue
        execs.append({"id": f"[{ex.task_start}-{ex.task_end}]", "host": ex.host,
                      "port": ex.port, "uptime": pretty_uptime(ex.uptime_secs),
                      "uptimeSeconds": ex.uptime_secs,
                      "workerLogLink": log_link(info.id, ex.host, ex.port),
                      **_worker_links(log_link, info.id, ex.host, ex.port, component),
                      **_counts(kind, ex, include_sys)})
        progress = batch_progress(ex)
        if progress is not None:
            execs[-1]["batchProgress"] = progress
    summary_key = "spoutSummary" if kind == "spout" else "boltStats"
    sampling, pct = debug_of(info, component)
    progress = batch_progress(comp)
    summaries = []
    for w in WINDOWS:
        if w not in by_window:
            continue
        c = next((c for c in by_window[w].components if c.component_id == component), None)
        if c is None:
            continue
        summaries.append({"windowPretty": PRETTY[w], "window": window_label(w),
                          **_counts(kind, c, include_sys)})
    return {"id": component, "encodedId": quote(component, safe=""), "name": info.name,
            "topologyId": info.id, "encodedTopologyId": quote(info.id, safe=""),
            "topologyStatus": info.status, "user": info.owner, "componentType": kind,
            "executors": comp.num_executors, "tasks": comp.num_tasks,
            "window": window_label(secs), "windowHint": PRETTY.get(secs, f"{secs}s"),
            "schedulerDisplayResource": False,
            "debug": sampling, "samplingPct": pct,
            # squall profile: the page's buttons; the CPU profiles running come from
            # /profiling/pending (Storm's profilerActive, asked only by that page).
            "profilingAndDebuggingCapable": True, "profileActionEnabled": True,
            "profilerActive": [],
            summary_key: summaries,
            "outputStats": [{"stream": k, "emitted": v.emitted, "transferred": v.transferred}
                            for k, v in sorted(comp.streams.items())
                            if include_sys or not is_system_stream(k)],
            "executorStats": execs,
            "componentErrors": [
                {k: v for k, v in _error_row(e, log_link, info.id, now).items()
                 if k != "component"} for e in mine],
            "componentErrorGroups": error_groups(mine, log_link, info.id, now),
            **({"batchProgress": progress} if progress is not None else {})}


def visualization(topology: Any, info: Any) -> dict:
    """/api/v1/topology/:id/visualization: components with their inputs (stream, grouping)
    and window counters; the page draws the graph from it. ``topology`` is the
    StormTopology message."""
    stats = {c.component_id: c for c in info.components}
    out: dict[str, dict] = {}
    for kind, comps in (("spout", topology.spouts), ("bolt", topology.bolts)):
        for cid, comp in comps.items():
            c = stats.get(cid)
            inputs = [{"component": i.source.component, "stream": i.source.stream,
                       "grouping": i.grouping.WhichOneof("kind") or "shuffle"}
                      for i in comp.common.inputs]
            out[cid] = {":type": kind, ":capacity": c.capacity if c else 0.0,
                        ":latency": (c.complete_latency_ms if kind == "spout"
                                     else c.execute_latency_ms) if c else 0.0,
                        ":transferred": c.transferred if c else 0,
                        ":inputs": inputs}
    return out
