"""Topology <-> protobuf (``proto/topology.proto``): the form shipped to Nimbus and workers.

Component objects and custom groupings travel pickled; component conf travels
as JSON, as Storm's ``json_conf`` does. Reading a message back never unpickles: a
custom grouping keeps its bytes (a worker unpickles them when it builds its routers),
so Nimbus can read and validate any client's topology without running its code.
"""

from __future__ import annotations

import json

from ..proto import topology_pb2 as pb
from . import grouping as g
from .errors import InvalidTopology
from .topology import BOLT, SPOUT, ComponentDef, InputDef, ShellSpec, StreamDef, Topology

_EMPTY_KINDS = (g.SHUFFLE, g.ALL, g.GLOBAL, g.NONE, g.DIRECT, g.LOCAL_OR_SHUFFLE)


def _grouping_to_pb(spec: g.Grouping) -> pb.Grouping:
    out = pb.Grouping()
    if spec.kind in _EMPTY_KINDS:
        getattr(out, spec.kind).SetInParent()
    elif spec.kind in (g.FIELDS, g.PARTIAL_KEY):
        getattr(out, spec.kind).fields.extend(spec.fields)
    else:
        out.custom_serialized = spec.custom_bytes() or b""
    return out


def _grouping_from_pb(msg: pb.Grouping) -> g.Grouping:
    kind = msg.WhichOneof("kind")
    if kind in _EMPTY_KINDS:
        return g.Grouping(kind)
    if kind in (g.FIELDS, g.PARTIAL_KEY):
        return g.Grouping(kind, list(getattr(msg, kind).fields))
    if kind == "custom_serialized":
        return g.Grouping(g.CUSTOM, serialized=msg.custom_serialized)
    raise InvalidTopology(f"unknown grouping kind {kind!r} in serialized topology")


def _common_to_pb(c: ComponentDef, out: pb.ComponentCommon) -> None:
    for inp in c.inputs:
        m = out.inputs.add()
        m.source.component = inp.component
        m.source.stream = inp.stream
        m.grouping.CopyFrom(_grouping_to_pb(inp.grouping))
    for s, sd in c.streams.items():
        out.streams[s].fields.extend(sd.fields)
        out.streams[s].direct = sd.direct
    out.parallelism_hint = c.parallelism
    out.num_tasks = 0 if c.num_tasks is None else c.num_tasks
    out.json_conf = json.dumps(c.conf, sort_keys=True)
    out.required_extras.extend(c.extras)


def _object_to_pb(c: ComponentDef, out: pb.ComponentObject) -> None:
    if c.shell is not None:
        out.shell.command.extend(c.shell.command)
        out.shell.script = c.shell.script
        out.shell.env.update(c.shell.env)
        out.shell.keep_worker_cwd = not c.shell.change_child_cwd
    else:
        out.serialized_python = c.serialized or b""


def to_proto(topology: Topology) -> pb.StormTopology:
    """The protobuf message for a user topology (system components are not shipped)."""
    msg = pb.StormTopology()
    for c in topology.components.values():
        if c.system:
            continue
        spec = msg.spouts[c.id] if c.kind == SPOUT else msg.bolts[c.id]
        _object_to_pb(c, spec.spout_object if c.kind == SPOUT else spec.bolt_object)
        _common_to_pb(c, spec.common)
    return msg


def to_bytes(topology: Topology) -> bytes:
    return to_proto(topology).SerializeToString(deterministic=True)


def _component_from_pb(cid: str, kind: str, obj: pb.ComponentObject,
                       common: pb.ComponentCommon) -> ComponentDef:
    which = obj.WhichOneof("kind")
    shell = ShellSpec(list(obj.shell.command), obj.shell.script, dict(obj.shell.env),
                      not obj.shell.keep_worker_cwd) if which == "shell" else None
    return ComponentDef(
        cid, kind,
        serialized=obj.serialized_python if which == "serialized_python" else None,
        shell=shell,
        parallelism=common.parallelism_hint,
        num_tasks=common.num_tasks or None,
        conf=json.loads(common.json_conf) if common.json_conf else {},
        streams={s: StreamDef(list(sd.fields), sd.direct) for s, sd in common.streams.items()},
        inputs=[InputDef(i.source.component, i.source.stream, _grouping_from_pb(i.grouping))
                for i in common.inputs],
        extras=tuple(common.required_extras))


def from_proto(msg: pb.StormTopology) -> Topology:
    """Rebuild a :class:`Topology` (components sorted by id, so the order is stable)."""
    comps: dict[str, ComponentDef] = {}
    for cid in sorted(set(msg.spouts) | set(msg.bolts)):
        if cid in msg.spouts and cid in msg.bolts:
            raise InvalidTopology(f"duplicate component id {cid!r}: both a spout and a bolt",
                                  component=cid)
        if cid in msg.spouts:
            s = msg.spouts[cid]
            comps[cid] = _component_from_pb(cid, SPOUT, s.spout_object, s.common)
        else:
            b = msg.bolts[cid]
            comps[cid] = _component_from_pb(cid, BOLT, b.bolt_object, b.common)
    return Topology(comps)


def from_bytes(data: bytes) -> Topology:
    msg = pb.StormTopology()
    msg.ParseFromString(data)
    return from_proto(msg)
