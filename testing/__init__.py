"""Testing your topology in pytest: Storm's ``Testing`` API, in this process, on simulated time.

No ZooKeeper, no network, no worker processes: the topology's components run in this
process (see :mod:`squall.testing.engine` for what is simulated and what is refused).

Example (Storm's ``Testing.completeTopology`` with ``MockedSources``)::

    from squall.testing import complete_topology

    def test_split_and_count():
        result = complete_topology(topology(), mocked_sources={
            "sentences": [["the cow"], ["the moon"]]})
        assert sorted(result.tuples("split")) == [["cow"], ["moon"], ["the"], ["the"]]
        assert result.acked("sentences") == [0, 1]

and Storm's ``withSimulatedTimeLocalCluster``, for topologies that run on ticks, windows
and timeouts::

    from squall.testing import LocalCluster

    def test_ticks():
        with LocalCluster() as cluster:
            cluster.submit_topology("wc", {"topology.message.timeout.secs": 5}, topology())
            cluster.advance_time(30)               # simulated seconds: instant
            assert cluster.tuples("wc", "report")

For the real daemons (a private ZooKeeper, Nimbus, a supervisor, worker processes), use
:class:`squall.deploy.local.LocalCluster`, as ``squall local`` does.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from ..client.topology import Topology, TopologyBuilder
from .engine import ROUND_SECS, Engine, FixedSpout

__all__ = ["complete_topology", "CompletedTopology", "LocalCluster", "FixedSpout",
           "TopologyNotComplete"]


class TopologyNotComplete(AssertionError):
    """complete_topology gave up: trees still pending, or spouts that never go quiet."""


class CompletedTopology:
    """What a run emitted and how its spout tuples ended.

    ``emitted[component][stream]`` lists the values of every tuple the component emitted
    on that stream, in order; ``errors`` are the ``report_error`` calls and refused double
    acks, as (component, task, text)."""

    def __init__(self, engine: Engine):
        self.emitted = engine.emitted
        self._acked = engine.acked
        self._failed = engine.failed
        self.errors = list(engine.errors)
        #: Simulated seconds the run took.
        self.secs = engine.now

    def tuples(self, component: str, stream: str = "default") -> list[list]:
        """The values of what ``component`` emitted on ``stream`` (Storm's readTuples)."""
        return list(self.emitted.get(component, {}).get(stream, []))

    def acked(self, spout: str) -> list:
        """Message ids of ``spout``'s tuples whose trees completed, in completion order."""
        return list(self._acked.get(spout, []))

    def failed(self, spout: str) -> list:
        """Message ids of ``spout``'s tuples that failed or timed out."""
        return list(self._failed.get(spout, []))


def complete_topology(topology: Topology | TopologyBuilder,
                      mocked_sources: Mapping[str, Any] | None = None,
                      conf: Mapping[str, Any] | None = None, *, max_secs: float | None = None,
                      real_timeout: float = 60.0, seed: int = 0) -> CompletedTopology:
    """Run ``topology`` until every spout tuple's tree completed, as Storm's completeTopology.

    ``mocked_sources`` replaces spouts by fixed data: ``{"sentences": [["a b"], ["c"]]}``
    (the default stream) or ``{"spout": {"stream": [values, ...]}}``; tuple ``i`` of a
    mocked spout has message id ``i``. A spout that is not mocked is called until its
    ``next_tuple`` emits nothing. The run ends once every mocked tuple was emitted, the
    spouts are quiet and no tree is pending; trees still pending then wait on simulated
    time (their ticks, windows and message timeout), up to ``max_secs`` simulated seconds
    (default: three message timeouts and a second) or ``real_timeout`` seconds of this machine's time,
    past which it raises :class:`TopologyNotComplete` naming what was pending.
    """
    engine = Engine(topology, conf, mocked_sources, seed)
    limit = max_secs if max_secs is not None else 3 * engine.timeout + 1
    deadline = engine.deadline = time.monotonic() + real_timeout
    quiet = 0
    while True:
        try:
            made = engine.round()
        except TimeoutError as exc:
            engine.shutdown()
            raise TopologyNotComplete(f"{exc} (real_timeout {real_timeout:g} s)") from None
        quiet = quiet + 1 if made == 0 else 0
        if quiet >= 2 and engine.mocked_done():
            if not engine.trees:
                break
            engine.advance_to(min(engine.next_due(), limit))
        if engine.now >= limit or time.monotonic() > deadline:
            engine.shutdown()
            raise TopologyNotComplete(_pending_text(engine, limit))
    engine.shutdown()
    return CompletedTopology(engine)


def _pending_text(engine: Engine, limit: float) -> str:
    spouts: dict[str, int] = {}
    for _, tid, _, _ in engine.trees.values():
        c = engine.tasks[tid].component
        spouts[c] = spouts.get(c, 0) + 1
    if spouts:
        what = ", ".join(f"{n} tree(s) of {c}" for c, n in sorted(spouts.items()))
        return (f"the topology did not complete within {engine.now:g} simulated seconds: {what} "
                "still pending (a bolt that never acks? message timeouts off?)")
    return (f"the spouts did not go quiet within {engine.now:g} simulated seconds "
            f"({engine.rounds} rounds): mock them (mocked_sources) or make next_tuple emit "
            "nothing once done")


class LocalCluster:
    """Storm's simulated-time LocalCluster, in this process: submit topologies, move the
    clock, read what was emitted. ``with LocalCluster() as cluster: ...``"""

    def __init__(self) -> None:
        self.engines: dict[str, Engine] = {}

    def __enter__(self) -> "LocalCluster":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def submit_topology(self, name: str, conf: Mapping[str, Any] | None,
                        topology: Topology | TopologyBuilder,
                        mocked_sources: Mapping[str, Any] | None = None) -> None:
        """Start ``topology`` as ``name`` (spouts opened and activated; nothing runs until
        the clock moves)."""
        if name in self.engines:
            raise ValueError(f"topology {name!r} is already running")
        self.engines[name] = Engine(topology, conf, mocked_sources)

    def kill_topology(self, name: str) -> CompletedTopology:
        """Stop ``name`` (spouts deactivated and closed, bolts cleaned up); returns what it did."""
        engine = self._engine(name)
        engine.shutdown()
        del self.engines[name]
        return CompletedTopology(engine)

    def activate(self, name: str) -> None:
        """Spouts' ``activate`` is called, and ``next_tuple`` again as the clock moves."""
        self._engine(name).set_active(True)

    def deactivate(self, name: str) -> None:
        """Spouts' ``deactivate`` is called; ``next_tuple`` no more until activated."""
        self._engine(name).set_active(False)

    def advance_time(self, secs: float) -> None:
        """Run every topology for ``secs`` simulated seconds: a round a millisecond while
        spouts emit, then straight to the next tick, window or timeout when all is quiet."""
        for engine in self.engines.values():
            end = engine.now + secs
            while engine.now < end:
                if engine.round() == 0 and not engine.queue:
                    engine.advance_to(min(engine.next_due(), end))
            engine.advance_to(end)

    def result(self, name: str) -> CompletedTopology:
        """What ``name`` emitted, acked and failed so far."""
        return CompletedTopology(self._engine(name))

    def tuples(self, name: str, component: str, stream: str = "default") -> list[list]:
        return self.result(name).tuples(component, stream)

    def shutdown(self) -> None:
        for name in list(self.engines):
            self.kill_topology(name)

    def _engine(self, name: str) -> Engine:
        try:
            return self.engines[name]
        except KeyError:
            raise KeyError(f"no topology {name!r} in this cluster; running: "
                           f"{sorted(self.engines)}") from None


