"""TopologyContext: what a task knows about itself and the topology (Storm's TopologyContext)."""

from __future__ import annotations

from typing import Any, Mapping

from .metrics import Counter, Histogram, Meter, MetricRegistry
from .topology import Topology
from .tuple import Fields


class TopologyContext:
    """Passed to ``open``/``prepare``: this task's id and component, and the topology's layout.

    Example::

        def prepare(self, conf, context, collector):
            self.index = context.this_task_index        # 0 .. n-1 within the component
            peers = context.component_tasks(context.this_component_id)
    """

    def __init__(self, topology: Topology, component_tasks: Mapping[str, list[int]],
                 task_id: int, conf: Mapping[str, Any], topology_id: str = "",
                 worker_port: int = 0, worker_tasks: list[int] | None = None,
                 metrics: MetricRegistry | None = None, code_dir: str = "",
                 pid_dir: str = ""):
        self.topology = topology
        self._component_tasks = component_tasks
        self._task_component = {t: c for c, ts in component_tasks.items() for t in ts}
        self.this_task_id = task_id
        self.this_component_id = self._task_component.get(task_id, "")
        self.conf = conf
        self.topology_id = topology_id
        self.worker_port = worker_port
        self.worker_tasks = list(worker_tasks or [])
        #: This task's user metrics (client/metrics.py); the worker reports them.
        self.metrics = metrics if metrics is not None else MetricRegistry()
        #: The package's resources/ folder on this host, where shell components' children
        #: start (Storm's getCodeDir); "" when the worker has none.
        self.code_dir = code_dir
        #: Where shell components' children write their pid files (Storm's getPIDDir).
        self.pid_dir = pid_dir

    # -- metrics v2 (Storm's registerCounter, registerGauge, registerHistogram, registerMeter)
    def register_counter(self, name: str) -> Counter:
        """A counter of this task, reported as ``squall_user_<name>_total``."""
        return self.metrics.counter(name)

    def register_gauge(self, name: str, fn) -> Any:
        """A gauge of this task: ``fn()`` is read at each stats interval."""
        return self.metrics.gauge(name, fn)

    def register_histogram(self, name: str) -> Histogram:
        """A histogram of this task (``update(value)``)."""
        return self.metrics.histogram(name)

    def register_meter(self, name: str) -> Meter:
        """A meter of this task (``mark(n)``)."""
        return self.metrics.meter(name)

    registerCounter = register_counter
    registerGauge = register_gauge
    registerHistogram = register_histogram
    registerMeter = register_meter

    @property
    def this_task_index(self) -> int:
        """Index of this task among its component's tasks (0-based)."""
        return self._component_tasks[self.this_component_id].index(self.this_task_id)

    def component_tasks(self, component: str) -> list[int]:
        return list(self._component_tasks.get(component, []))

    def component_id(self, task_id: int) -> str | None:
        return self._task_component.get(task_id)

    def task_to_component(self) -> dict[int, str]:
        """Every task id of the topology and its component (Storm's getTaskToComponent)."""
        return dict(self._task_component)

    def component_output_fields(self, component: str, stream: str = "default") -> Fields:
        return Fields(self.topology.components[component].streams[stream].fields)

    def this_output_fields(self, stream: str = "default") -> Fields:
        return self.component_output_fields(self.this_component_id, stream)

    def this_sources(self) -> list[tuple[str, str]]:
        """The (component, stream) pairs this component subscribes to."""
        return [(i.component, i.stream)
                for i in self.topology.components[self.this_component_id].inputs]

    def this_targets(self, stream: str = "default") -> list[str]:
        """The components subscribed to one of this component's streams."""
        return [c.id for c, _ in self.topology.subscribers(self.this_component_id, stream)]
