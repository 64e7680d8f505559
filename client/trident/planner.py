"""Compile a Trident graph into an ordinary Squall topology (Storm's ``TridentTopologyBuilder``).

* **Batch groups**: spouts whose streams meet (``merge``) share one master
  coordinator (``$mastercoord-<group>``); others get their own.
* **Bolt groups**: a spout is its own component (its executor); a repartition
  (``partition_by``, ``shuffle``, ``global_``, a ``group_by``), a ``merge`` or the
  first operation after a spout starts a new component; every other operation runs
  in its parent's component, so chains of operations cost no hop.
* **Wiring**: an edge between components is a stream ``s<node id>`` (fields: the
  batch id, then the node's fields) with the repartition's grouping (local or
  shuffle otherwise); every component reports per batch on ``$coord-<group>``
  (direct) to the components it feeds; components that persist state also
  receive ``$commit``; a spout executor receives ``$batch`` from its spout
  coordinator and ``$commit`` (committer spouts) and ``$success`` from the master.
"""

from __future__ import annotations

from typing import Any

from ..topology import Topology, TopologyBuilder
from .attempt import BATCH_STREAM, COMMIT_STREAM, SUCCESS_STREAM, coord_stream, \
    master_coordinator, spout_coordinator
from .drpc import THREADED, DRPCTridentSpout
from .processors import Subtopology
from .runtime import BatchBolt, MasterBatchCoordinatorSpout, SpoutBatch, SpoutCoordinatorBolt
from .stream import Node, TridentTopology, stream_of


def _batch_groups(nodes: list[Node]) -> dict[int, str]:
    """node id -> batch group name; spouts joined by a merge share a group."""
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    roots: dict[int, set[int]] = {}
    for n in nodes:  # parents are always created before their children
        roots[n.id] = {n.id} if n.kind == "spout" else set().union(*(roots[p.id] for p in n.parents))
        first, *rest = sorted(roots[n.id]) or [n.id]
        for r in rest:
            parent[find(r)] = find(first)
    names: dict[int, str] = {}
    out = {}
    for n in nodes:
        rep = find(min(roots[n.id])) if roots[n.id] else find(n.id)
        out[n.id] = names.setdefault(rep, f"bg{len(names)}")
    return out


def _starts_component(n: Node) -> bool:
    return n.kind in ("spout", "partition", "merge", "drpc_return") or \
        any(p.kind == "spout" for p in n.parents)


def _end_drpc_streams(tt: TridentTopology, nodes: list[Node]) -> list[Node]:
    """``nodes`` with a return node after each DRPC stream (Storm's ``completeDRPC``): it
    reads the spout's return info and the output of the last operation added to the
    spout's part of the graph (everything connected to it)."""
    from .drpc import DRPCTridentSpout, ReturnBatch
    out = list(nodes)
    for spout in [n for n in nodes if isinstance(n.op, DRPCTridentSpout)]:
        linked, changed = {spout.id}, True
        while changed:  # grow the connected part until it stops growing
            changed = False
            for n in nodes:
                ids = {n.id, *(p.id for p in n.parents)}
                if ids & linked and not ids <= linked:
                    linked |= ids
                    changed = True
        last = max((n for n in nodes if n.id in linked), key=lambda n: n.id)
        # Not added to the graph: building twice must not end the stream twice.
        out.append(Node(next(tt._ids), "drpc_return", [spout, last], [], op=ReturnBatch(),
                        partitioning=("global",)))
    return out


def _label(group: list[Node]) -> str:
    """A component's name after what it does: its state or aggregate, else its first op."""
    # A partial aggregate is plumbing; it always shares its parent's component, so some
    # other node names it.
    kinds = [n.kind for n in group if not n.partial]
    if "drpc_return" in kinds:
        return "return"
    for k in ("persist", "aggregate", "query"):
        if k in kinds:
            return k
    return next((k for k in kinds if k not in ("partition", "merge")), kinds[0])


def build_topology(tt: TridentTopology) -> Topology:
    # A repartition nothing reads does nothing but move tuples (a group_by whose
    # persistent_aggregate folded its batches before a repartition of its own): dropped.
    read = {id(p) for n in tt.nodes for p in n.parents}
    nodes = _end_drpc_streams(tt, [n for n in tt.nodes if n.kind != "partition" or id(n) in read])
    if not any(n.kind == "spout" for n in nodes):
        from ..errors import InvalidTopology
        raise InvalidTopology("a Trident topology needs at least one new_stream")
    batch_group = _batch_groups(nodes)
    comp_of: dict[int, str] = {}
    members: dict[str, list[Node]] = {}
    for n in nodes:
        comp = (f"spout-{n.txid}" if n.kind == "spout" else f"b{len(members)}"
                ) if _starts_component(n) else comp_of[n.parents[0].id]
        comp_of[n.id] = comp
        members.setdefault(comp, []).append(n)
    names = {c: c if g[0].kind == "spout" else f"{c}-{_label(g)}" for c, g in members.items()}
    comp_of = {nid: names[c] for nid, c in comp_of.items()}
    members = {names[c]: g for c, g in members.items()}

    outputs: dict[str, dict[str, list[str]]] = {c: {} for c in members}
    exits: dict[str, dict[int, str]] = {c: {} for c in members}
    entries: dict[str, dict[str, list[int]]] = {c: {} for c in members}
    inputs: dict[str, list[tuple[str, str, Node]]] = {c: [] for c in members}
    for n in nodes:
        for p in n.parents:
            src, dst = comp_of[p.id], comp_of[n.id]
            if src == dst:
                continue
            stream = stream_of(p)
            outputs[src][stream] = list(p.fields)
            exits[src][p.id] = stream
            if n.id not in entries[dst].setdefault(stream, []):  # a return node may read
                entries[dst][stream].append(n.id)            # one stream as both parents
            if (src, stream) not in {(s, st) for s, st, _ in inputs[dst]}:
                inputs[dst].append((src, stream, n))
    for n in nodes:  # a spout's stream exists even if nothing reads it
        if n.kind == "spout":
            outputs[comp_of[n.id]].setdefault(stream_of(n), list(n.fields))

    b = TopologyBuilder()
    spouts_by_group: dict[str, dict[str, Any]] = {}
    for n in nodes:
        if n.kind == "spout":
            spouts_by_group.setdefault(batch_group[n.id], {})[n.txid] = n.op
    for bg, spouts in spouts_by_group.items():
        b.set_spout(master_coordinator(bg), MasterBatchCoordinatorSpout(spouts), 1)

    for comp, group in members.items():
        head = group[0]
        bg = batch_group[head.id]
        mbc = master_coordinator(bg)
        parallelism = max((n.parallelism for n in group if n.parallelism), default=1)
        if head.kind in ("partition", "drpc_return") and head.partitioning[0] == "global":
            parallelism = 1  # one task sees the whole batch; others would only add empty rows
        if head.kind == "spout":
            if isinstance(head.op, DRPCTridentSpout):
                parallelism = 1  # one request a batch: one task takes them
            coord = spout_coordinator(comp)
            b.set_bolt(coord, SpoutCoordinatorBolt(head.txid, head.op), 1) \
                .global_grouping(mbc, BATCH_STREAM).global_grouping(mbc, SUCCESS_STREAM)
            d = b.set_bolt(comp, BatchBolt(SpoutBatch(head.txid, head.op, stream_of(head)), bg,
                                           [], False, outputs[comp]), parallelism)
            d.all_grouping(coord, BATCH_STREAM).all_grouping(mbc, SUCCESS_STREAM)
            d.add_configurations(head.op.component_configuration() or {})
            if getattr(head.op, "committer", False):
                d.all_grouping(mbc, COMMIT_STREAM)
            continue
        committer = any(n.kind == "persist" for n in group)
        upstream = sorted({src for src, _, _ in inputs[comp]})
        sub = Subtopology(group, entries[comp], exits[comp])
        d = b.set_bolt(comp, BatchBolt(sub, bg, upstream, committer, outputs[comp]), parallelism)
        for src, stream, n in inputs[comp]:
            part = n.partitioning if n.kind in ("partition", "drpc_return") else ()
            if part and part[0] == "fields":
                d.fields_grouping(src, part[1], stream)
            elif part and part[0] == "global":
                d.global_grouping(src, stream)
            elif part and part[0] == "shuffle":
                d.shuffle_grouping(src, stream)
            else:
                d.local_or_shuffle_grouping(src, stream)
        for src in upstream:
            d.direct_grouping(src, coord_stream(bg))
        if committer:
            d.all_grouping(mbc, COMMIT_STREAM)
        if any(n.kind == "drpc_return" for n in group):
            d.add_configurations(THREADED)  # its calls to DRPC servers block
    return b.create_topology()
