"""Nimbus's own Prometheus metrics: RPCs by method and status, leadership, scheduling
rounds, and the time of its ZooKeeper-bound rounds. Served on ``nimbus.metrics.port``."""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class NimbusMetrics:
    def __init__(self, is_leader: Callable[[], bool], topologies: Callable[[], int]):
        self.registry = CollectorRegistry()
        self._rpcs = Counter("squall_nimbus_rpc", "RPCs answered, by method and status code",
                             ["method", "code"], registry=self.registry)
        self._rpc_secs = Histogram("squall_nimbus_rpc_seconds", "Time to answer an RPC",
                                   ["method"], registry=self.registry)
        Gauge("squall_nimbus_is_leader", "1 while this Nimbus leads",
              registry=self.registry).set_function(lambda: 1.0 if is_leader() else 0.0)
        Gauge("squall_nimbus_topologies", "Live topologies (as the leader indexes them)",
              registry=self.registry).set_function(lambda: float(topologies()))
        self.rounds = Counter("squall_nimbus_scheduling_rounds",
                              "Schedules computed and written (Storm's mkAssignments)",
                              registry=self.registry)
        self.round_secs = Histogram("squall_nimbus_scheduling_seconds",
                                    "Time to compute and write one assignment",
                                    registry=self.registry)
        self._zk = Histogram("squall_nimbus_zookeeper_seconds",
                             "Time of ZooKeeper-bound work: a monitor round, an assignment",
                             ["op"], registry=self.registry)

    def rpc(self, method: str, code: str, secs: float) -> None:
        self._rpcs.labels(method, code).inc()
        self._rpc_secs.labels(method).observe(secs)

    def zookeeper(self, op: str, secs: float) -> None:
        self._zk.labels(op).observe(secs)
