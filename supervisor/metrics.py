"""The supervisor's Prometheus ``/metrics``: its own metrics and every worker's.

Why the supervisor and not each worker: one port per host instead of one per slot (a
scrape config that does not change when topologies move), nothing added to the worker's
per-tuple path or its process (no HTTP server thread next to the executors), and a worker
that crashed or hangs still shows, as ``squall_worker_up 0``. The price is freshness: the
values are the worker's heartbeat file, written every ``topology.stats.freq.secs``.

Worker metrics are read from each running worker's ``heartbeat.json`` at scrape time
(:class:`WorkerCollector`); counters are cumulative since the worker started, so
Prometheus's rate() handles a restart as a counter reset. Latency histograms keep the
runtime's own log-spaced buckets (client/histogram.py), exposed with their upper bounds.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily)
from prometheus_client.registry import Collector

from ..client import histogram
from ..client.contract import WorkerHeartbeat
from ..client.metrics import (CONNECTOR_FAMILIES, TOPOLOGY_LABELS, prometheus_name,
                              topology_labels)

#: ``topology`` is the name and ``topology_id`` this run's id (client/metrics.py): a
#: resubmitted topology's series keep the name an operator's queries select by.
TASK_LABELS = TOPOLOGY_LABELS + ["component", "task", "host", "port"]
WORKER_LABELS = TOPOLOGY_LABELS + ["host", "port"]
COUNTERS = (("executed", "Tuples executed (bolts)"),
            ("acked", "Tuple trees acked (spouts) or tuples acked (bolts)"),
            ("failed", "Tuple trees failed (spouts) or tuples failed (bolts)"),
            ("timed_out", "Tuple trees failed by the message timeout (spouts)"))


def _buckets(snap: Any) -> tuple[list[tuple[str, float]], float] | None:
    """A histogram snapshot as Prometheus cumulative buckets (le, count), and its sum."""
    counts, total, n = histogram.parse(snap)
    if not n:
        return None
    out = []
    acc = 0
    for k in sorted(counts):
        acc += counts[k]
        out.append((repr(histogram.bucket_upper(k)), float(acc)))
    out.append(("+Inf", float(acc)))
    return out, total


class WorkerCollector(Collector):
    """Families built from the running workers' heartbeat files at each scrape."""

    def __init__(self, workers: Callable[[], Iterable[Any]], host: str,
                 stale_secs: Callable[[], float],
                 expected: Callable[[], Iterable[tuple[str, int]]] = lambda: ()):
        #: ``workers()`` -> objects with topology_id, port, pid, worker_dir.
        self.workers = workers
        self.host = host
        self.stale_secs = stale_secs
        #: ``expected()`` -> (topology id, port) assigned here: one without a process (a
        #: crash in backoff) is ``squall_worker_up 0``, so an alert on it fires.
        self.expected = expected
        #: Heartbeat files that could not be read into metrics (a worker's file is not trusted).
        self.skipped = 0

    def collect(self):
        now = time.time()
        fam = {
            "emitted": CounterMetricFamily("squall_emitted", "Tuples emitted",
                                           labels=TASK_LABELS + ["stream"]),
            "transferred": CounterMetricFamily(
                "squall_transferred", "Tuples transferred (emitted times subscribers)",
                labels=TASK_LABELS + ["stream"]),
            "pending": GaugeMetricFamily("squall_pending", "Tuple trees in flight (spouts)",
                                         labels=TASK_LABELS),
            "busy": CounterMetricFamily("squall_busy_seconds",
                                        "Seconds spent executing (capacity = its rate)",
                                        labels=TASK_LABELS),
            "complete": HistogramMetricFamily("squall_complete_latency_ms",
                                              "Complete latency of tuple trees, ms",
                                              labels=TASK_LABELS),
            "execute": HistogramMetricFamily("squall_execute_latency_ms",
                                             "Execute latency of bolts, ms",
                                             labels=TASK_LABELS),
            "queue": GaugeMetricFamily("squall_receive_queue_population",
                                       "Tuples waiting in an executor's receive queue",
                                       labels=TASK_LABELS),
            "up": GaugeMetricFamily("squall_worker_up",
                                    "1 while the worker's heartbeat is fresh",
                                    labels=WORKER_LABELS),
            "bp": GaugeMetricFamily("squall_worker_backpressure",
                                    "1 while the worker throttles its spouts",
                                    labels=WORKER_LABELS),
            "rss": GaugeMetricFamily("squall_worker_rss_bytes", "Resident memory",
                                     labels=WORKER_LABELS),
            "gc": CounterMetricFamily("squall_worker_gc_collections", "Garbage collections",
                                      labels=WORKER_LABELS + ["generation"]),
            "dropped": CounterMetricFamily("squall_worker_dropped_frames",
                                           "Frames dropped as malformed or unauthenticated",
                                           labels=WORKER_LABELS),
            "uptime": GaugeMetricFamily("squall_worker_uptime_seconds",
                                        "Seconds since the worker started",
                                        labels=WORKER_LABELS),
        }
        counters = {name: CounterMetricFamily(f"squall_{name}", doc, labels=TASK_LABELS)
                    for name, doc in COUNTERS}
        user: dict[str, Any] = {}
        running = set()
        for w in self.workers():
            running.add((w.topology_id, int(w.port)))
            wl = topology_labels(w.topology_id) + [self.host, str(w.port)]
            hb = WorkerHeartbeat.read(w.worker_dir, w.pid)
            fresh = hb is not None and now - hb.time <= self.stale_secs()
            fam["up"].add_metric(wl, 1.0 if fresh else 0.0)
            if hb is None:
                continue
            try:
                self._worker(fam, counters, user, w, hb)
            except Exception:  # noqa: BLE001 - one worker's odd file must not fail the scrape
                self.skipped += 1
        for tid, port in self.expected():
            if (tid, int(port)) not in running:
                fam["up"].add_metric(topology_labels(tid) + [self.host, str(port)], 0.0)
        yield from counters.values()
        yield from fam.values()
        yield from (f[0] if isinstance(f, tuple) else f for f in user.values())

    def _worker(self, fam: dict, counters: dict, user: dict, w: Any,
                hb: WorkerHeartbeat) -> None:
        """One worker's heartbeat into the families. A malformed file raises here and the
        caller skips the rest of that worker: what was added stays valid exposition."""
        port = str(w.port)
        topo = topology_labels(w.topology_id)
        wl = topo + [self.host, port]
        fam["bp"].add_metric(wl, 1.0 if hb.throttled else 0.0)
        fam["rss"].add_metric(wl, float(hb.rss_bytes))
        fam["dropped"].add_metric(wl, float(hb.dropped_frames))
        fam["uptime"].add_metric(wl, float(hb.uptime_secs))
        for gen, n in enumerate(hb.gc_collections):
            fam["gc"].add_metric(wl + [str(gen)], float(n))
        for ex in hb.executors.values():
            if isinstance(ex, dict) and "task" in ex:
                fam["queue"].add_metric(topo + [str(ex.get("component", "")),
                                                str(ex["task"]), self.host, port],
                                        float(ex.get("queue", 0)))
        for task, st in hb.tasks.items():
            if not isinstance(st, dict):
                continue
            tl = topo + [str(st.get("component", "")), str(task), self.host, port]
            for stream, pair in (st.get("streams") or {}).items():
                try:
                    fam["emitted"].add_metric(tl + [str(stream)], float(pair[0]))
                    fam["transferred"].add_metric(tl + [str(stream)], float(pair[1]))
                except (TypeError, ValueError, IndexError):
                    continue
            for name, _ in COUNTERS:
                counters[name].add_metric(tl, float(st.get(name, 0) or 0))
            fam["pending"].add_metric(tl, float(st.get("pending", 0) or 0))
            if "busy_secs" in st:
                fam["busy"].add_metric(tl, float(st["busy_secs"]))
            for key, f in (("complete_hist", "complete"), ("execute_hist", "execute")):
                b = _buckets(st.get(key))
                if b is not None:
                    fam[f].add_metric(tl, b[0], b[1])
            for mname, m in (st.get("metrics") or {}).items():
                self._user(user, str(mname), m, tl)

    @staticmethod
    def _user(out: dict, name: str, m: Any, labels: list[str]) -> None:
        """A user metric (client/metrics.py snapshot) into its family. One name has one
        kind: a component registering it as another kind is left out (two TYPE lines for
        one name would make Prometheus refuse the whole scrape)."""
        if isinstance(m, dict) and "family" in m:
            WorkerCollector._family(out, m, labels)
            return
        if not isinstance(m, dict):
            return
        name = prometheus_name(name)  # Storm's names: my-custom-shell-metric
        kind = m.get("type")
        full = f"squall_user_{name}"
        make = {"counter": CounterMetricFamily, "meter": CounterMetricFamily,
                "gauge": GaugeMetricFamily, "histogram": HistogramMetricFamily}.get(kind)
        if make is None:
            return
        f = out.get(name)
        if f is None:
            f = out[name] = make(full, f"User {kind} {name}", labels=TASK_LABELS)
            f.squall_seen = set()
        elif type(f) is not make:
            return
        if tuple(labels) in f.squall_seen:
            return  # two names of one task that read the same in Prometheus: the first
        f.squall_seen.add(tuple(labels))
        try:
            if kind == "histogram":
                b = _buckets(m.get("hist"))
                if b is not None:
                    f.add_metric(labels, b[0], b[1])
            else:
                f.add_metric(labels, float(m["value"]))
        except (KeyError, TypeError, ValueError, OverflowError):
            return  # a malformed entry from a worker: skipped, the scrape still answers


    @staticmethod
    def _family(out: dict, m: dict, labels: list[str]) -> None:
        """A connector's family gauge (client/metrics.py ``family_gauge``): ``squall_<family>``
        with the task's labels and its own (a worker's file names only Squall's families)."""
        family, extra = m.get("family"), m.get("labels")
        if not isinstance(family, str) or not family.startswith(CONNECTOR_FAMILIES) or \
                not family.isidentifier() or not isinstance(extra, dict) or \
                not all(isinstance(k, str) and k.isidentifier() for k in extra) or \
                not set(extra).isdisjoint(TASK_LABELS):
            return  # a label twice in one series is exposition Prometheus refuses
        names = sorted(extra)
        key = ("family", family)
        f = out.get(key)
        if f is None:
            f = out[key] = (GaugeMetricFamily(f"squall_{family}", f"Connector gauge {family}",
                                              labels=TASK_LABELS + names), names)
        if f[1] != names:
            return  # one family, one label set
        try:
            f[0].add_metric(labels + [str(extra[k]) for k in names], float(m["value"]))
        except (KeyError, TypeError, ValueError, OverflowError):
            return


class SupervisorMetrics:
    """The supervisor's own metrics and its workers' (WorkerCollector) in one registry."""

    def __init__(self, supervisor_id: str, host: str, workers: Callable[[], Iterable[Any]],
                 stale_secs: Callable[[], float],
                 expected: Callable[[], Iterable[tuple[str, int]]] = lambda: ()):
        self.registry = CollectorRegistry()
        self.collector = WorkerCollector(workers, host, stale_secs, expected)
        self.registry.register(self.collector)
        sid = [supervisor_id]
        self.workers = Gauge("squall_supervisor_workers", "Workers this supervisor runs",
                             ["supervisor"], registry=self.registry).labels(*sid)
        self._restarts = Counter("squall_supervisor_worker_restarts",
                                 "Workers that crashed or hung and were launched again",
                                 ["supervisor"] + TOPOLOGY_LABELS, registry=self.registry)
        self.send_errors = Counter("squall_supervisor_heartbeat_send_errors",
                                   "Reports to Nimbus that failed", ["supervisor"],
                                   registry=self.registry).labels(*sid)
        self._zk = Histogram("squall_supervisor_zookeeper_seconds",
                             "Time of the supervisor's ZooKeeper reads (a sync round)",
                             ["supervisor", "op"], registry=self.registry)
        self.sid = supervisor_id

    def restarted(self, topology_id: str) -> None:
        self._restarts.labels(self.sid, *topology_labels(topology_id)).inc()

    def zookeeper(self, op: str, secs: float) -> None:
        self._zk.labels(self.sid, op).observe(secs)
