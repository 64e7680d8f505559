"""Linear DRPC topologies: Storm's ``LinearDRPCTopologyBuilder``, ``PrepareRequest`` and
``JoinResult``.

A linear DRPC topology is a chain of bolts computing one function. The builder adds the
plumbing around them::

    spout (DRPCSpout) -> prepare-request -> bolt0 -> ... -> boltN-1 -> bolt N (JoinResult)
                                 |  \\__ "id" (request ids) -> boltN-1 (if a batch bolt) |
                                 \\____ "ret" (return info) ____________________________/ -> ReturnResults

``prepare-request`` gives each request a random id, the first value of every tuple after
it; each user bolt runs inside a :class:`~.coordination.CoordinatedBolt`, so batch bolts
learn when a request's tuples are all in; the last bolt emits ``[id, result]``, which
JoinResult pairs with the request's return info for ReturnResults.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable, Mapping, Sequence

from .. import config as cfg
from ..components import BasicBolt, Bolt, OutputFieldsDeclarer
from ..errors import InvalidTopology
from ..topology import BoltDeclarer, Topology, TopologyBuilder
from ..tuple import DEFAULT_STREAM, Tuple
from .coordination import COORDINATED_STREAM_ID, BatchBolt, CoordinatedBolt
from .spout import DRPCSpout, ReturnResults

SPOUT_ID = "spout"
PREPARE_ID = "prepare-request"
#: PrepareRequest's streams (Storm's ARGS_STREAM, RETURN_STREAM, ID_STREAM).
ARGS_STREAM = DEFAULT_STREAM
RETURN_STREAM = "ret"
ID_STREAM = "id"


def bolt_id(index: int) -> str:
    return f"bolt{index}"


class PrepareRequest(BasicBolt):
    """Gives each request a random 63-bit id (Storm's ``PrepareRequest``): ids must be unique
    across retries for the coordination, and fit msgpack's int."""

    def prepare(self, conf: Mapping[str, Any], context: Any) -> None:
        self._random = random.Random()

    def execute(self, tup: Tuple, collector: Any) -> None:
        args, return_info = tup.values[0], tup.values[1]
        request = self._random.getrandbits(63) or 1
        collector.emit([request, args], ARGS_STREAM)
        collector.emit([request, return_info], RETURN_STREAM)
        collector.emit([request], ID_STREAM)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare_stream(ARGS_STREAM, ["request", "args"])
        declarer.declare_stream(RETURN_STREAM, ["request", "return"])
        declarer.declare_stream(ID_STREAM, ["request"])


class JoinResult(Bolt):
    """Pairs each request's result (from the last bolt) with its return info (from
    ``return_component``) and emits ``[str(result), return_info]`` (Storm's ``JoinResult``)."""

    def __init__(self, return_component: str):
        self.return_component = return_component

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        self.collector = collector
        self._returns: dict[Any, Tuple] = {}
        self._results: dict[Any, Tuple] = {}
        #: A half that waits longer than a message timeout belongs to a failed request:
        #: forget it (Storm keeps it forever).
        self._expiry = float(cfg.get(conf, cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS))
        self._since: dict[Any, float] = {}
        self._next_sweep = time.monotonic() + self._expiry

    def execute(self, tup: Tuple) -> None:
        request = tup.values[0]
        now = time.monotonic()
        if now >= self._next_sweep:
            self._sweep(now)
        side = self._returns if tup.source_component == self.return_component \
            else self._results
        side[request] = tup
        self._since.setdefault(request, now)
        if request in self._returns and request in self._results:
            result = self._results.pop(request)
            returner = self._returns.pop(request)
            self.collector.emit([str(result.values[1]), returner.values[1]],
                                anchors=[result, returner])
            self.collector.ack(result)
            self.collector.ack(returner)
            del self._since[request]

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + self._expiry / 2
        for request in [r for r, t in self._since.items() if now - t > self._expiry]:
            del self._since[request]
            for side in (self._returns, self._results):
                t = side.pop(request, None)
                if t is not None:
                    self.collector.fail(t)

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.declare(["result", "return-info"])


class LinearDRPCInputDeclarer:
    """How one bolt of a linear DRPC topology reads the bolt before it (Storm's
    ``LinearDRPCInputDeclarer``): the ``*_grouping`` methods of
    :class:`~squall.client.topology.BoltDeclarer` without the component argument."""

    def __init__(self, component: "_Component"):
        self._c = component

    def _add(self, fn: Callable[[BoltDeclarer, str], Any]) -> "LinearDRPCInputDeclarer":
        self._c.declarations.append(fn)
        return self

    def fields_grouping(self, fields: Sequence[str], stream: str | None = None):
        return self._add(lambda d, prev: d.fields_grouping(prev, fields, stream))

    def global_grouping(self, stream: str | None = None):
        return self._add(lambda d, prev: d.global_grouping(prev, stream))

    def shuffle_grouping(self, stream: str | None = None):
        return self._add(lambda d, prev: d.shuffle_grouping(prev, stream))

    def local_or_shuffle_grouping(self, stream: str | None = None):
        return self._add(lambda d, prev: d.local_or_shuffle_grouping(prev, stream))

    def none_grouping(self, stream: str | None = None):
        return self._add(lambda d, prev: d.none_grouping(prev, stream))

    def all_grouping(self, stream: str | None = None):
        return self._add(lambda d, prev: d.all_grouping(prev, stream))

    def direct_grouping(self, stream: str | None = None):
        return self._add(lambda d, prev: d.direct_grouping(prev, stream))

    def partial_key_grouping(self, fields: Sequence[str], stream: str | None = None):
        return self._add(lambda d, prev: d.partial_key_grouping(prev, fields, stream))

    def custom_grouping(self, grouping: Any, stream: str | None = None):
        return self._add(lambda d, prev: d.custom_grouping(prev, grouping, stream))

    def add_configuration(self, key: str, value: Any) -> "LinearDRPCInputDeclarer":
        self._c.conf[key] = value
        return self

    def add_configurations(self, conf: Mapping[str, Any]) -> "LinearDRPCInputDeclarer":
        self._c.conf.update(conf or {})
        return self


class _Component:
    def __init__(self, bolt: Any, parallelism: int):
        self.bolt = bolt
        self.parallelism = parallelism
        self.conf: dict[str, Any] = {}
        self.declarations: list[Callable[[BoltDeclarer, str], Any]] = []


class LinearDRPCTopologyBuilder:
    """Builds a topology computing one DRPC function (Storm's ``LinearDRPCTopologyBuilder``).

    Example (storm-starter's reach, ``examples/reach.py``)::

        builder = LinearDRPCTopologyBuilder("reach")
        builder.add_bolt(GetTweeters(), 4)
        builder.add_bolt(GetFollowers(), 12).shuffle_grouping()
        builder.add_bolt(PartialUniquer(), 6).fields_grouping(["id", "follower"])
        builder.add_bolt(CountAggregator(), 3).fields_grouping(["id"])
        topology = builder.create_topology()

    The first value of every tuple is the request id. The first bolt gets ``[id, args]``
    (none grouping unless you declare one); the last must declare exactly one stream of two
    fields, ``[id, result]``. Bolts may be :class:`~squall.client.BasicBolt`,
    :class:`~squall.client.Bolt` or :class:`~.coordination.BatchBolt` (which sees all of a
    request's tuples, then ``finish_batch``).
    """

    def __init__(self, function: str):
        if not isinstance(function, str) or not function:
            raise InvalidTopology("a linear DRPC topology needs the function name it serves")
        self.function = function
        self._components: list[_Component] = []

    def add_bolt(self, bolt: Bolt | BasicBolt | BatchBolt,
                 parallelism: int = 1) -> LinearDRPCInputDeclarer:
        """Append ``bolt`` to the chain with ``parallelism`` executors."""
        if not isinstance(bolt, (Bolt, BasicBolt, BatchBolt)):
            raise InvalidTopology(f"DRPC bolt {bolt_id(len(self._components))} must be a "
                                  f"Bolt, BasicBolt or BatchBolt, got {type(bolt).__name__}",
                                  component=bolt_id(len(self._components)))
        component = _Component(bolt, 1 if parallelism is None else parallelism)
        self._components.append(component)
        return LinearDRPCInputDeclarer(component)

    addBolt = add_bolt

    def create_topology(self, spout: DRPCSpout | None = None) -> Topology:
        """The topology, with a :class:`DRPCSpout` for the function reading ``drpc.servers``
        (or ``spout``, e.g. one naming its servers)."""
        if not self._components:
            raise InvalidTopology(f"linear DRPC topology {self.function!r} has no bolt: add "
                                  "one with add_bolt()")
        builder = TopologyBuilder()
        builder.set_spout(SPOUT_ID, spout or DRPCSpout(self.function))
        builder.set_bolt(PREPARE_ID, PrepareRequest()).none_grouping(SPOUT_ID)
        last = len(self._components) - 1
        for i, c in enumerate(self._components):
            sources = {bolt_id(i - 1): i == 1} if i >= 1 else {}
            id_stream = (PREPARE_ID, ID_STREAM) if i == last and \
                isinstance(c.bolt, BatchBolt) else None
            d = builder.set_bolt(bolt_id(i), CoordinatedBolt(c.bolt, sources, id_stream),
                                 c.parallelism)
            if c.conf:
                d.add_configurations(c.conf)
            if id_stream is not None:
                d.fields_grouping(PREPARE_ID, ["request"], ID_STREAM)
            if i == 0 and not c.declarations:
                d.none_grouping(PREPARE_ID, ARGS_STREAM)
            else:
                prev = PREPARE_ID if i == 0 else bolt_id(i - 1)
                for declare in c.declarations:
                    declare(d, prev)
            if i > 0:
                d.direct_grouping(bolt_id(i - 1), COORDINATED_STREAM_ID)
        stream, fields = self._result_stream(self._components[last].bolt, bolt_id(last))
        n = len(self._components)
        builder.set_bolt(bolt_id(n), JoinResult(PREPARE_ID)) \
            .fields_grouping(bolt_id(last), [fields[0]], stream) \
            .fields_grouping(PREPARE_ID, ["request"], RETURN_STREAM)
        builder.set_bolt(bolt_id(n + 1), ReturnResults()).none_grouping(bolt_id(n))
        return builder.create_topology()

    def create_remote_topology(self) -> Topology:
        """Storm's name for :meth:`create_topology`."""
        return self.create_topology()

    def create_local_topology(self, drpc: Any) -> Topology:
        """The topology reading the DRPC server ``drpc`` (an in-process
        :class:`squall.drpc.DRPCServer`: its ``host`` and ``invocations_port``), as Storm's
        ``createLocalTopology(LocalDRPC)``."""
        return self.create_topology(DRPCSpout(self.function, [drpc.host], drpc.invocations_port))

    @staticmethod
    def _result_stream(bolt: Any, cid: str) -> tuple[str, list[str]]:
        declarer = OutputFieldsDeclarer()
        bolt.declare_output_fields(declarer)
        if len(declarer.streams) != 1:
            raise InvalidTopology(f"the last bolt of a linear DRPC topology ({cid}) must "
                                  f"declare exactly one stream; it declares "
                                  f"{sorted(declarer.streams) or 'none'}", component=cid)
        (stream, (fields, _)), = declarer.streams.items()
        if len(fields) != 2:
            raise InvalidTopology(f"the last bolt of a linear DRPC topology ({cid}) must emit "
                                  f"two fields, the request id and the result; stream "
                                  f"{stream!r} declares {fields}", component=cid, stream=stream)
        return stream, fields
