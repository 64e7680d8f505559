"""User metrics with Storm's metrics v2 shape: counters, gauges, histograms and meters.

A component registers them through its context, as in Storm 2
(``TopologyContext.registerCounter``)::

    def prepare(self, conf, context, collector):
        self.words = context.register_counter("words")
        self.depth = context.register_gauge("queue_depth", lambda: len(self.buffer))
        self.sizes = context.register_histogram("batch_size")
        self.rate = context.register_meter("lookups")

    def execute(self, tup):
        self.words.inc()
        self.sizes.update(len(tup.values[0]))
        self.rate.mark()

Each task has its own :class:`MetricRegistry`; the worker writes every registry's snapshot
into its heartbeat file each ``topology.stats.freq.secs``, and the supervisor serves them at
its Prometheus ``/metrics`` with the task's labels (README, "Metrics"). Names are Prometheus
metric-name fragments: letters, digits and underscores. Updates are plain attribute writes on
the component's own thread: no lock, no call into the runtime.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from .histogram import Histogram as _Buckets

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: A user metric's name: Storm's are any string (``my-custom-shell-metric``); kept as given,
#: exported under :func:`prometheus_name`.
_USER_NAME = re.compile(r"^[^\x00-\x1f\x7f]{1,200}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
#: A Nimbus-made topology id: the name, then two ASCII numbers (greedy ``.+``: the last two).
_NIMBUS_ID = re.compile(r"(.+)-[0-9]+-[0-9]+", re.DOTALL)


def prometheus_name(name: str) -> str:
    """``name`` as a Prometheus metric-name fragment: other characters become ``_`` and a
    leading digit gets one (``my-custom-shell-metric`` -> ``my_custom_shell_metric``)."""
    safe = _UNSAFE.sub("_", name)
    return "_" + safe if safe[:1].isdigit() else safe


#: The labels every per-topology Prometheus series starts with, in every daemon: the name,
#: which an operator's queries, dashboards and alerts select by (it survives a kill and a
#: resubmission), and the id of this run (``word-count-3-1764...``), which does not.
TOPOLOGY_LABELS = ["topology", "topology_id"]


def topology_name_of(topology_id: str) -> str:
    """The name in a topology id as Nimbus makes it, ``<name>-<counter>-<epoch secs>``
    (nimbus/nimbus.py ``submit``): ``word-count-3-1764000000`` -> ``word-count``. Names may
    hold dashes and digits, the two numbers never do, so the last two parts are the
    numbers. An id of another shape is taken as its own name."""
    m = _NIMBUS_ID.fullmatch(topology_id)
    return m.group(1) if m else topology_id


def topology_labels(topology_id: str, name: str | None = None) -> list[str]:
    """The values of :data:`TOPOLOGY_LABELS` for a series of ``topology_id``. Derived from
    the id unless the caller knows the name (``topology.name``): every daemon has the id,
    so they all label a topology alike without reading its conf."""
    return [name or topology_name_of(topology_id), topology_id]


#: Families Squall's own connectors export with labels of their own (``squall_kafka_lag``
#: with ``topic`` and ``partition``): a family gauge's name must start with one of these.
CONNECTOR_FAMILIES = ("kafka_", "redis_", "nats_")


class Counter:
    """A count that only goes up (Storm's ``Counter.inc``)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0

    def inc(self, n: int = 1) -> None:
        if n < 0:
            raise ValueError("a counter only goes up; use a gauge for values that go down")
        self.count += n

    def get_count(self) -> int:
        return self.count


class Meter(Counter):
    """Events counted for a rate (Storm's ``Meter.mark``); Prometheus derives the rate."""

    __slots__ = ()

    def mark(self, n: int = 1) -> None:
        self.inc(n)


class Histogram(_Buckets):
    """A distribution of values (Storm's ``Histogram.update``), in log-spaced buckets."""

    __slots__ = ()

    #: ``update(value)``: one bucket increment, no wrapper call (it runs per tuple).
    update = _Buckets.record


class MetricRegistry:
    """One task's user metrics, by name; and the task's latest batch progress, if it works
    in batches (the Spark bridge: :meth:`report_progress`)."""

    def __init__(self) -> None:
        self.metrics: dict[str, tuple[str, Any]] = {}
        #: The latest batch's progress record (JSON-ready; proto ``BatchProgress``'s fields),
        #: reported with the task's counters up to Nimbus and the UI's component page.
        self.progress: dict[str, Any] | None = None

    def report_progress(self, record: dict[str, Any]) -> None:
        """Replace the task's progress record (one attribute write: the heartbeat thread
        reads whole records only)."""
        self.progress = record

    def _add(self, name: str, kind: str, metric: Any) -> Any:
        if not isinstance(name, str) or not _USER_NAME.match(name):
            raise ValueError(f"metric name {str(name)[:80]!r}: 1 to 200 characters, no "
                             "control characters")
        have = self.metrics.get(name)
        if have is not None:
            if have[0] != kind:
                raise ValueError(f"metric {name!r} is already registered as a {have[0]}")
            return have[1]  # Storm returns the registered one, so prepare() may run again
        self.metrics[name] = (kind, metric)
        return metric

    def counter(self, name: str) -> Counter:
        return self._add(name, "counter", Counter())

    def meter(self, name: str) -> Meter:
        return self._add(name, "meter", Meter())

    def histogram(self, name: str) -> Histogram:
        return self._add(name, "histogram", Histogram())

    def gauge(self, name: str, fn: Callable[[], float]) -> Callable[[], float]:
        if not callable(fn):
            raise TypeError(f"gauge {name!r} needs a function returning its value")
        return self._add(name, "gauge", fn)

    def family_gauge(self, family: str, labels: dict[str, str],
                     fn: Callable[[], float]) -> None:
        """A connector's gauge in family ``family`` with ``labels`` of its own (a Kafka
        partition's lag: ``family_gauge("kafka_lag", {"topic": t, "partition": "0"}, fn)``),
        exported as ``squall_<family>`` beside the task's labels. Registering the same
        family and labels again replaces the function."""
        if not family.startswith(CONNECTOR_FAMILIES) or not _NAME.match(family):
            raise ValueError(f"family {family!r}: a connector family starts with one of "
                             f"{CONNECTOR_FAMILIES}")
        if not all(_NAME.match(k) for k in labels):
            raise ValueError(f"label names {sorted(labels)}: letters, digits and underscores")
        key = family + "|" + ",".join(f"{k}={labels[k]}" for k in sorted(labels))
        self.metrics[key] = ("family", (family, dict(labels), fn))

    def remove_family_gauges(self, family_prefix: str, **labels: str) -> None:
        """Drop the family gauges whose family starts with ``family_prefix`` and whose
        labels include ``labels`` (a partition the task no longer reads)."""
        for key, (kind, m) in list(self.metrics.items()):
            if kind == "family" and m[0].startswith(family_prefix) and \
                    all(m[1].get(k) == v for k, v in labels.items()):
                del self.metrics[key]

    def snapshot(self) -> dict[str, dict]:
        """name -> ``{"type", "value"}`` (histograms: ``"hist"``; family gauges also
        ``"family"`` and ``"labels"``), JSON-ready. A gauge whose function raises or returns
        a non-number is left out of this snapshot."""
        out: dict[str, dict] = {}
        for name, (kind, m) in list(self.metrics.items()):
            if kind == "family":
                family, labels, fn = m
                try:
                    v = float(fn())
                except Exception:  # noqa: BLE001 - no figure yet (no watermark read)
                    continue
                out[name] = {"type": "gauge", "family": family, "labels": labels, "value": v}
                continue
            if kind == "gauge":
                try:
                    v = float(m())
                except Exception:  # noqa: BLE001 - user code; a broken gauge is skipped
                    continue
                out[name] = {"type": kind, "value": v}
            elif kind == "histogram":
                out[name] = {"type": kind, "hist": m.snapshot()}
            else:
                out[name] = {"type": kind, "value": m.count}
        return out


#: The kinds a shell component's metric may be (ShellBolt.register_metric).
SHELL_METRIC_KINDS = ("counter", "meter", "histogram", "gauge")


class ShellMetric:
    """A task metric a shell child updates over the multi-lang protocol (Storm's
    ``IShellMetric.updateMetricFromRPC``): a counter or meter goes up by ``params`` (1 when
    it sends none), a histogram records it, a gauge shows the last one."""

    def __init__(self, kind: str, metric: Any):
        self.kind, self.metric = kind, metric
        self.last = 0.0

    def update_from_rpc(self, params: Any) -> None:
        number = isinstance(params, (int, float)) and not isinstance(params, bool)
        if self.kind in ("counter", "meter"):
            if params is None:
                params = 1
            if not isinstance(params, int) or isinstance(params, bool) or params < 0:
                raise ValueError(f"a {self.kind} goes up by a whole number >= 0, got "
                                 f"{str(params)[:40]}")
            self.metric.inc(params)
        elif not number:
            raise ValueError(f"a {self.kind} takes a number, got {str(params)[:40]}")
        elif self.kind == "histogram":
            self.metric.update(params)
        else:
            self.last = float(params)


def shell_metric_problem(name: Any, kind: Any) -> str | None:
    """What is wrong with a shell metric's name or kind, or None."""
    if not isinstance(name, str) or not _USER_NAME.match(name):
        return f"shell metric name {str(name)[:80]!r}: 1 to 200 characters"
    if kind not in SHELL_METRIC_KINDS:
        return (f"shell metric {name!r}: kind {kind!r} is not one of "
                f"{', '.join(SHELL_METRIC_KINDS)}")
    return None


def shell_metric(context: Any, name: str, kind: str) -> ShellMetric:
    """Register ``name`` as a ``kind`` metric of the task (through its context) for a shell
    child to update."""
    problem = shell_metric_problem(name, kind)
    if problem is not None:
        raise ValueError(problem)
    if kind == "gauge":
        m = ShellMetric(kind, None)
        context.register_gauge(name, lambda: m.last)
        return m
    register = {"counter": context.register_counter, "meter": context.register_meter,
                "histogram": context.register_histogram}[kind]
    return ShellMetric(kind, register(name))
