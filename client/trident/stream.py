"""The Trident API: a graph of streams built by chaining operations, compiled by ``build()``.

Storm's ``TridentTopology`` / ``Stream`` / ``GroupedStream`` / ``TridentState``::

    t = TridentTopology()
    counts = (t.new_stream("lines", TransactionalLineFiles(paths))
               .each(["line"], Split(), ["word"])
               .group_by(["word"])
               .persistent_aggregate(RedisMapState.transactional("counts"), Count(), ["count"]))
    topology = t.build()          # an ordinary Squall Topology (planner.py)

Every call adds a :class:`Node` and returns a new stream; nothing runs until the
built topology is submitted. Field names are checked as the graph is built, so a
typo fails at the line that made it, naming the fields that exist.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..errors import InvalidTopology
from .operation import (CombinedPartials, CombinerAggregator, Filter, FlatMapFunction,
                        Function, MapFunction, Operation, ReducerAggregator, as_aggregator)
from .spout import PartitionedSpout, PartitionedSpoutExecutor, TridentSpout


@dataclass(eq=False)
class Node:
    """One operation of the graph; ``fields`` are the fields of the stream it outputs."""

    id: int
    #: spout each filter map flat_map project partition aggregate persist query merge, and
    #: drpc_return (the planner's end of a DRPC stream: parents the spout and the last node)
    kind: str
    parents: list["Node"]
    fields: list[str]
    op: Any = None
    #: The fields the operation reads (``None``: all of the input's).
    input_fields: list[str] | None = None
    #: Grouping fields (grouped aggregate / persist, partition by fields).
    group_fields: list[str] = field(default_factory=list)
    #: ``partition``: ("fields", [...]), ("shuffle",) or ("global",).
    partitioning: tuple = ()
    #: ``spout``: the transactional id (its state id in ZooKeeper).
    txid: str = ""
    #: ``persist``: the state factory; ``query``: the persist node it reads.
    state: Any = None
    parallelism: int | None = None
    #: ``aggregate``: a partial aggregate the planner put before a repartition.
    partial: bool = False


def stream_of(node: Node) -> str:
    """The stream a node's output travels on between components (planner.py)."""
    return f"s{node.id}"


class TridentTopology:
    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._ids = itertools.count(1)
        self._txids: set[str] = set()

    def _add(self, kind: str, parents: list[Node], fields: Sequence[str], **kw: Any) -> Node:
        node = Node(next(self._ids), kind, parents, list(fields), **kw)
        self.nodes.append(node)
        return node

    def new_stream(self, txid: str, spout: TridentSpout | PartitionedSpout) -> "Stream":
        """A stream of batches from ``spout``; ``txid`` names its transactional state (unique)."""
        if not txid or "/" in txid:
            raise InvalidTopology(f"transactional id {txid!r}: give a non-empty name without '/'")
        if txid in self._txids:
            raise InvalidTopology(f"transactional id {txid!r} is used by two streams")
        if isinstance(spout, PartitionedSpout):
            from .tx_state import make_tx_state
            spout = PartitionedSpoutExecutor(spout, make_tx_state)
        if not isinstance(spout, TridentSpout):
            raise InvalidTopology(f"stream {txid!r}: {type(spout).__name__} is not a TridentSpout "
                                  "or PartitionedSpout")
        self._txids.add(txid)
        return Stream(self, self._add("spout", [], spout.output_fields(), op=spout, txid=txid))

    def new_drpc_stream(self, function: str, servers: Sequence[str] | None = None,
                        port: int | None = None) -> "Stream":
        """A stream of the DRPC requests for ``function`` (Storm's ``newDRPCStream``), fields
        ``args`` and ``return-info``, one request a batch: what the stream's last operation
        outputs for a request goes back to its client as a JSON list of value lists
        (``[["the", 12]]``). Servers: ``servers`` or ``drpc.servers``, as DRPCSpout's."""
        from .drpc import DRPCTridentSpout
        return self.new_stream(f"drpc-{function}", DRPCTridentSpout(function, servers, port))

    def merge(self, *streams: "Stream", output_fields: Sequence[str] | None = None) -> "Stream":
        """One stream of the tuples of all ``streams``, named ``output_fields`` (default: the
        first stream's fields), as Storm's ``merge``: tuples keep their values in order, so
        streams whose fields are named differently merge as long as they have as many."""
        if len(streams) < 2:
            raise InvalidTopology("merge needs at least two streams")
        fields = list(streams[0].fields if output_fields is None else output_fields)
        for s in streams:
            if len(s.fields) != len(fields):
                raise InvalidTopology(f"merge: a stream has {len(s.fields)} field(s) {s.fields}, "
                                      f"the merged stream {len(fields)} {fields}; project it to "
                                      f"{len(fields)} first")
        if len(set(fields)) != len(fields):
            raise InvalidTopology(f"merge: output fields {fields} name a field twice")
        return Stream(self, self._add("merge", [s.node for s in streams], fields))

    def build(self):
        """The Squall :class:`~squall.client.topology.Topology` running this graph."""
        from .planner import build_topology
        return build_topology(self)


class Stream:
    def __init__(self, topology: TridentTopology, node: Node):
        self.topology = topology
        self.node = node

    @property
    def fields(self) -> list[str]:
        return list(self.node.fields)

    def _check(self, fields: Sequence[str], what: str) -> list[str]:
        fields = list(fields)
        missing = [f for f in fields if f not in self.node.fields]
        if missing:
            raise InvalidTopology(f"{what}: no field(s) {missing} in this stream; it has "
                                  f"{self.node.fields}")
        return fields

    def _new_fields(self, fields: Sequence[str], what: str) -> None:
        clash = [f for f in fields if f in self.node.fields]
        if clash or not fields or len(set(fields)) != len(fields):
            raise InvalidTopology(f"{what}: function fields {list(fields)} must be new, distinct "
                                  f"and not empty (the stream has {self.node.fields})")

    def _then(self, kind: str, fields: Sequence[str], **kw: Any) -> "Stream":
        return Stream(self.topology, self.topology._add(kind, [self.node], fields, **kw))

    # --- operations within a partition -----------------------------------------------
    def each(self, input_fields: Sequence[str], op: Operation,
             function_fields: Sequence[str] = ()) -> "Stream":
        """A :class:`Function` appends ``function_fields`` to each tuple (zero or more outputs
        per input); a :class:`Filter` keeps the tuples it accepts."""
        inputs = self._check(input_fields, f"each({type(op).__name__})")
        if isinstance(op, Filter):
            return self._then("filter", self.node.fields, op=op, input_fields=inputs)
        if not isinstance(op, Function):
            raise InvalidTopology(f"each: {type(op).__name__} is not a Function or Filter")
        self._new_fields(function_fields, f"each({type(op).__name__})")
        return self._then("each", self.node.fields + list(function_fields), op=op,
                          input_fields=inputs)

    def filter(self, op: Filter, input_fields: Sequence[str] | None = None) -> "Stream":
        return self.each(self.node.fields if input_fields is None else input_fields, op)

    def map(self, op: MapFunction, output_fields: Sequence[str] | None = None) -> "Stream":
        if not isinstance(op, MapFunction):
            raise InvalidTopology(f"map: {type(op).__name__} is not a MapFunction")
        return self._then("map", output_fields or self.node.fields, op=op)

    def flat_map(self, op: FlatMapFunction, output_fields: Sequence[str] | None = None) -> "Stream":
        if not isinstance(op, FlatMapFunction):
            raise InvalidTopology(f"flat_map: {type(op).__name__} is not a FlatMapFunction")
        return self._then("flat_map", output_fields or self.node.fields, op=op)

    def project(self, fields: Sequence[str]) -> "Stream":
        return self._then("project", self._check(fields, "project"))

    def parallelism_hint(self, n: int) -> "Stream":
        """Tasks of the operations since the last repartition (Storm applies it the same way)."""
        if n < 1:
            raise InvalidTopology(f"parallelism_hint must be >= 1, got {n}")
        self.node.parallelism = n
        return self

    # --- repartitioning -----------------------------------------------------------------
    def partition_by(self, fields: Sequence[str]) -> "Stream":
        fields = self._check(fields, "partition_by")
        return self._then("partition", self.node.fields, partitioning=("fields", fields))

    def shuffle(self) -> "Stream":
        return self._then("partition", self.node.fields, partitioning=("shuffle",))

    def global_(self) -> "Stream":
        return self._then("partition", self.node.fields, partitioning=("global",))

    def local_or_shuffle(self) -> "Stream":
        """Repartition to the next operations' tasks, preferring those in the same worker
        (Storm's localOrShuffle)."""
        return self._then("partition", self.node.fields, partitioning=("local_or_shuffle",))

    def group_by(self, fields: Sequence[str]) -> "GroupedStream":
        return GroupedStream(self.partition_by(fields), self._check(fields, "group_by"))

    # --- aggregation and state ------------------------------------------------------------
    def aggregate(self, agg: Operation, output_fields: Sequence[str],
                  input_fields: Sequence[str] | None = None) -> "Stream":
        """One aggregate of each whole batch (all tuples meet in one task)."""
        return self.global_()._aggregate([], agg, output_fields, input_fields)

    def partition_aggregate(self, agg: Operation, output_fields: Sequence[str],
                            input_fields: Sequence[str] | None = None) -> "Stream":
        """An aggregate of each partition's share of each batch, where the tuples are (no
        repartition; Storm's partitionAggregate): every task of the operation emits its own,
        an empty share too (the aggregator's init, completed)."""
        return self._aggregate([], agg, output_fields, input_fields)

    def _aggregate(self, group: list[str], agg: Operation, output_fields: Sequence[str],
                   input_fields: Sequence[str] | None) -> "Stream":
        try:
            as_aggregator(agg)  # refuse a non-aggregator now
        except TypeError as e:
            raise InvalidTopology(f"aggregate: {e}") from None
        inputs = self._check(input_fields if input_fields is not None else
                             [f for f in self.node.fields if f not in group], "aggregate")
        return self._then("aggregate", group + list(output_fields), op=agg, input_fields=inputs,
                          group_fields=group)

    def partition_persist(self, state_factory: Any, updater: Any,
                          input_fields: Sequence[str] | None = None,
                          output_fields: Sequence[str] = ()) -> "TridentState":
        """Each batch's tuples of this partition go to ``updater.update_state(state, tuples,
        collector)`` in a commit of ``state_factory``'s state, in txid order."""
        inputs = self._check(input_fields or self.node.fields, "partition_persist")
        node = self.topology._add("persist", [self.node], list(output_fields), op=updater,
                                  input_fields=inputs, state=state_factory)
        return TridentState(self.topology, node)

    def persistent_aggregate(self, state_factory: Any, agg: CombinerAggregator | ReducerAggregator,
                             output_fields: Sequence[str],
                             input_fields: Sequence[str] | None = None) -> "TridentState":
        """A global aggregate kept in ``state_factory``'s map state under one key."""
        return self.global_()._persist_aggregate([], state_factory, agg, output_fields,
                                                 input_fields)

    def _persist_aggregate(self, group: list[str], state_factory: Any, agg: Any,
                           output_fields: Sequence[str], input_fields: Sequence[str] | None
                           ) -> "TridentState":
        from .persist import MapStateUpdater
        if not isinstance(agg, (CombinerAggregator, ReducerAggregator)):
            raise InvalidTopology(f"persistent_aggregate needs a CombinerAggregator or "
                                  f"ReducerAggregator, got {type(agg).__name__}")
        if len(output_fields) != 1:
            raise InvalidTopology(f"persistent_aggregate keeps one value per key; output "
                                  f"fields {list(output_fields)}")
        inputs = self._check(input_fields if input_fields is not None else
                             [f for f in self.node.fields if f not in group],
                             "persistent_aggregate")
        part = self.node
        if isinstance(agg, CombinerAggregator) and group and part.kind == "partition" \
                and part.parents[0].kind != "spout":
            # Storm's partial aggregation: fold each partition's batch per group before the
            # repartition, then combine the partials into the state. The group_by's own
            # repartition is left to the planner, which drops it unless something reads it.
            # (Right after a spout the fold would be a component of its own, one more hop
            # for every tuple; a global aggregate keeps writing nothing for an empty batch.)
            before = Stream(self.topology, part.parents[0])
            partial = before._then("aggregate", group + list(output_fields), op=agg,
                                   input_fields=inputs, group_fields=group, partial=True)
            regrouped = partial._then("partition", partial.node.fields,
                                      partitioning=part.partitioning)
            node = self.topology._add(
                "persist", [regrouped.node], group + list(output_fields),
                op=MapStateUpdater(CombinedPartials(agg), group, list(output_fields)),
                input_fields=group + list(output_fields), state=state_factory,
                group_fields=group)
            return TridentState(self.topology, node)
        node = self.topology._add("persist", [self.node], group + list(output_fields),
                                  op=MapStateUpdater(agg, group, inputs), input_fields=group + inputs,
                                  state=state_factory, group_fields=group)
        return TridentState(self.topology, node)

    def state_query(self, state: "TridentState", input_fields: Sequence[str], query: Any,
                    function_fields: Sequence[str]) -> "Stream":
        """``query.batch_retrieve(state, keys)`` for each batch; its results are appended."""
        inputs = self._check(input_fields, "state_query")
        self._new_fields(function_fields, f"state_query({type(query).__name__})")
        return self._then("query", self.node.fields + list(function_fields), op=query,
                          input_fields=inputs, state=state.node)


class GroupedStream:
    """A stream partitioned by ``group_fields``; aggregations are per group and batch."""

    def __init__(self, stream: Stream, group_fields: list[str]):
        self.stream, self.group_fields = stream, group_fields

    def aggregate(self, agg: Operation, output_fields: Sequence[str],
                  input_fields: Sequence[str] | None = None) -> Stream:
        return self.stream._aggregate(self.group_fields, agg, output_fields, input_fields)

    def partition_aggregate(self, agg: Operation, output_fields: Sequence[str],
                            input_fields: Sequence[str] | None = None) -> Stream:
        """Per group within each partition (Storm's GroupedStream.partitionAggregate): a
        group's tuples share a partition already, so the same as :meth:`aggregate`."""
        return self.aggregate(agg, output_fields, input_fields)

    def state_query(self, state: "TridentState", input_fields: Sequence[str], query: Any,
                    function_fields: Sequence[str]) -> Stream:
        """Storm's GroupedStream.stateQuery: the query on the stream partitioned by the
        group fields, so each key is read by one task."""
        return self.stream.partition_by(self.group_fields).state_query(
            state, input_fields, query, function_fields)

    def persistent_aggregate(self, state_factory: Any, agg: CombinerAggregator | ReducerAggregator,
                             output_fields: Sequence[str],
                             input_fields: Sequence[str] | None = None) -> "TridentState":
        """Per group, the aggregate of every batch so far, kept exactly once in the map state."""
        return self.stream._persist_aggregate(self.group_fields, state_factory, agg,
                                              output_fields, input_fields)


class TridentState:
    """A state a stream wrote; ``new_values_stream()`` carries each batch's updated values."""

    def __init__(self, topology: TridentTopology, node: Node):
        self.topology, self.node = topology, node

    def new_values_stream(self) -> Stream:
        return Stream(self.topology, self.node)

    def parallelism_hint(self, n: int) -> "TridentState":
        Stream(self.topology, self.node).parallelism_hint(n)
        return self
