"""The operations of one bolt group, run per batch (Storm's ``SubtopologyBolt`` and its
processors: each, filter, map, project, aggregate, partition persist, state query).

A :class:`Subtopology` holds the group's nodes in topological order. A tuple that
arrives on a stream enters the nodes fed by it; each node passes what it outputs
to its children in the group at once, and to other groups through the streams the
planner declared. Aggregates, state updates and state queries act when the batch
finishes (persist inside ``begin_commit``/``commit``, so a committer's state moves
in txid order), visiting nodes in topological order so a child finishes after
what its parents emitted while finishing.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

from .operation import TridentTuple, as_aggregator
from .stream import Node, stream_of


class _Out:
    """The collector an operation emits into: values go on from ``node``."""

    def __init__(self, sub: "Subtopology", node: Node, batch: Any, prefix: Sequence[Any] = ()):
        self.sub, self.node, self.batch, self.prefix = sub, node, batch, list(prefix)

    def emit(self, values: Sequence[Any]) -> None:
        self.sub.forward(self.node, self.batch, self.prefix + list(values))

    def report_error(self, error: BaseException | str) -> None:
        self.sub.out.report_error(error)


class Subtopology:
    """``nodes``: the group's nodes (topologically sorted); ``entries``: input stream ->
    the nodes it feeds; ``exits``: node id -> the stream its output leaves the group on."""

    def __init__(self, nodes: Sequence[Node], entries: Mapping[str, list[int]],
                 exits: Mapping[int, str]):
        self.nodes = list(nodes)
        self.entries = {s: list(ids) for s, ids in entries.items()}
        self.exits = dict(exits)

    def prepare(self, conf: Mapping[str, Any], context: Any, out: Any, component: str) -> None:
        self.out = out
        self.by_id = {n.id: n for n in self.nodes}
        ids = set(self.by_id)
        self.children = {n.id: [c for c in self.nodes if n in c.parents] for n in self.nodes}
        self.index = {n.id: {f: i for i, f in enumerate(n.fields)} for n in self.nodes}
        self.parent_fields = {n.id: (n.parents[0].fields if n.parents else n.fields)
                              for n in self.nodes}
        # Field -> position maps made once, not per tuple.
        self.parent_index = {nid: {f: i for i, f in enumerate(fs)}
                             for nid, fs in self.parent_fields.items()}
        self.input_index = {n.id: {f: i for i, f in enumerate(n.input_fields)}
                            for n in self.nodes if n.input_fields is not None}
        #: Node id -> positions of its input fields among its parent's fields.
        self.input_pos = {n.id: [self.parent_index[n.id][f] for f in n.input_fields]
                          for n in self.nodes if n.input_fields is not None}
        self.states: dict[int, Any] = {}
        tasks = context.component_tasks(component)
        for n in self.nodes:
            if n.op is not None and hasattr(n.op, "prepare"):
                n.op.prepare(conf, context)
            if n.kind == "persist":
                self.states[n.id] = n.state.make_state(conf, context.this_task_index, len(tasks))
            elif n.kind == "query":
                self.states[n.id] = _uncached(n.state.state).make_state(
                    conf, context.this_task_index, len(tasks))
        self.aggregators = {n.id: as_aggregator(n.op) for n in self.nodes
                            if n.kind == "aggregate"}
        assert all(p.id in ids or self._entry(n) for n in self.nodes for p in n.parents)

    def _entry(self, node: Node) -> bool:
        return any(node.id in targets for targets in self.entries.values())

    # --- the batch protocol (called by BatchBolt) -------------------------------------------
    def is_control(self, tup: Any) -> bool:
        return False

    def init_batch(self, batch: Any) -> dict[int, Any]:
        """Per node, what it accumulates during the batch."""
        return {n.id: ({} if n.kind == "aggregate" else ([], []) if n.kind == "drpc_return"
                       else []) for n in self.nodes
                if n.kind in ("aggregate", "persist", "query", "drpc_return")}

    def execute(self, state: dict[int, Any], tup: Any, out: Any) -> None:
        self._state = state
        values = tup.values[1:]  # without the batch id
        for nid in self.entries.get(tup.source_stream, ()):
            node = self.by_id[nid]
            if node.kind == "drpc_return":
                self._to_return(node, tup.source_stream, values)
            else:
                self.process(node, out.batch, values)

    def finish_batch(self, state: dict[int, Any], out: Any) -> None:
        self._state = state
        for n in self.nodes:
            if n.kind == "aggregate":
                agg = self.aggregators[n.id]
                if not n.group_fields and not state[n.id]:  # a global aggregate of nothing
                    state[n.id][()] = agg.init(out.batch, _Out(self, n, out.batch, ()))
                for key, acc in state[n.id].items():
                    agg.complete(acc, _Out(self, n, out.batch, key))
            elif n.kind == "persist":
                st = self.states[n.id]
                st.begin_commit(out.batch.txid)
                n.op.update_state(st, state[n.id], _Out(self, n, out.batch))
                st.commit(out.batch.txid)
            elif n.kind == "query":
                self._query(n, state[n.id], out.batch)
            elif n.kind == "drpc_return":
                n.op.complete(*state[n.id], _Out(self, n, out.batch))

    def cleanup(self) -> None:
        for n in self.nodes:
            if n.op is not None and hasattr(n.op, "cleanup"):
                n.op.cleanup()
        for st in self.states.values():
            st.close()

    # --- one node ------------------------------------------------------------------------
    def process(self, node: Node, batch: Any, values: list[Any]) -> None:
        """``values`` (with the fields of ``node``'s parent) enter ``node``."""
        kind = node.kind
        if kind in ("partition", "merge"):
            self.forward(node, batch, values)
            return
        nid = node.id
        if kind == "each":
            node.op.execute(self._input(node, values), _Out(self, node, batch, values))
            return
        if kind == "persist":
            self._state[nid].append(self._input(node, values))
            return
        if kind == "filter":
            if node.op.is_keep(self._input(node, values)):
                self.forward(node, batch, values)
            return
        # A copy: map, flat_map and query keep or hand on their tuple, and the parent's
        # values go on to other branches.
        tup = TridentTuple._of(list(values), self.parent_fields[nid], self.parent_index[nid])
        if kind == "map":
            self.forward(node, batch, list(node.op.execute(tup)))
        elif kind == "flat_map":
            for out in node.op.execute(tup):
                self.forward(node, batch, list(out))
        elif kind == "project":
            self.forward(node, batch, tup.select(node.fields))
        elif kind == "aggregate":
            groups = self._state[node.id]
            key = tuple(tup.select(node.group_fields))
            agg = self.aggregators[node.id]
            collector = _Out(self, node, batch, key)  # Storm's aggregators may emit any time
            acc = groups[key] if key in groups else agg.init(batch, collector)
            groups[key] = agg.aggregate(acc, self._input(node, values), collector)
        elif kind == "query":
            self._state[node.id].append(tup)
        else:
            raise TypeError(f"unknown node kind {kind!r}")

    def _input(self, node: Node, values: list[Any]) -> TridentTuple:
        """The operation's view of the parent's ``values``: only its input fields, in their
        order (all of them when it names none)."""
        nid = node.id
        fields = node.input_fields
        if fields is None:  # a copy: what the operation does to it stays with it
            return TridentTuple._of(list(values), self.parent_fields[nid],
                                    self.parent_index[nid])
        return TridentTuple._of([values[i] for i in self.input_pos[nid]], fields,
                                self.input_index[nid])

    def forward(self, node: Node, batch: Any, values: list[Any]) -> None:
        for child in self.children[node.id]:
            self.process(child, batch, values)
        stream = self.exits.get(node.id)
        if stream is not None:
            self.out.emit_to(stream, values)

    def _to_return(self, node: Node, stream: str, values: list[Any]) -> None:
        """A DRPC stream's end: its spout's tuple brings the request's return info, its
        last operation's the results (one stream may be both)."""
        infos, results = self._state[node.id]
        spout, last = node.parents
        if stream == stream_of(spout):
            infos.append(values[spout.fields.index("return-info")])
        if stream == stream_of(last):
            results.append(list(values))

    def _query(self, node: Node, tuples: list[TridentTuple], batch: Any) -> None:
        inputs = [TridentTuple(t.select(node.input_fields), node.input_fields) for t in tuples]
        results = node.op.batch_retrieve(self.states[node.id], inputs) if inputs else []
        for t, result in zip(tuples, results):
            node.op.execute(t, result, _Out(self, node, batch, t.values))


def _uncached(factory: Any) -> Any:
    """``factory`` without its per-partition read cache, for a state query.

    Storm runs a query in the bolt of the state it reads, on the one State object whose
    cache every write goes through. Here the query has a state object of its own in another
    component, which never sees the writes: a cache would serve the first value it read
    (often None) forever.
    """
    if getattr(factory, "cache_size", 0):
        factory = copy.copy(factory)
        factory.cache_size = 0
    return factory



