"""The topology model, :class:`TopologyBuilder` and build-time validation.

Mirrors Storm's TopologyBuilder / StormTopology: components (spouts and
bolts) with parallelism (executors), task counts, declared output streams,
subscriptions with groupings and component conf. ``create_topology()``
validates the whole graph and refuses a bad one with
:class:`~squall.client.errors.InvalidTopology` naming the component, stream
and field. :func:`system_topology` adds Storm's hidden ``__acker`` bolt and
:func:`assign_task_ids` numbers tasks the way Storm does.
"""

from __future__ import annotations

import json
import os
import pickle
import threading
import unicodedata

import cloudpickle
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from . import config as cfg
from . import grouping as g
from .components import BasicBolt, Bolt, OutputFieldsDeclarer, Spout
from .errors import InvalidTopology
from .shell import _Shell
from .state import provider_problem
from .stateful import (CHECKPOINT_COMPONENT_ID, CHECKPOINT_FIELDS, CHECKPOINT_STREAM_ID,
                       CheckpointSpout, StatefulBolt, barrier_mode, checkpoint_mode,
                       deduplicating, is_stateful)
from .windowing import LATE_TUPLE_FIELD, WindowedBolt, WindowSpec
from .tuple import (ACKER_ACK_STREAM_ID, ACKER_COMPONENT_ID, ACKER_FAIL_STREAM_ID,
                    ACKER_INIT_STREAM_ID, ACKER_RESET_TIMEOUT_STREAM_ID, DEFAULT_STREAM,
                    SYSTEM_STREAM_FIELDS, SYSTEM_STREAM_ID, TM_CONTROL_STREAM_ID,
                    TM_REPORT_STREAM_ID, TOPOLOGY_MASTER_ID)


#: One unpickling at a time in a process: executors on threads of their own unpickle their
#: components side by side, and the imports unpickling makes (a topology module, a connector
#: package) could meet in opposite orders, which CPython's import locks refuse with a
#: _DeadlockError that would kill the worker.
_UNPICKLING = threading.RLock()

SPOUT = "spout"
BOLT = "bolt"


@dataclass
class StreamDef:
    """A declared output stream."""

    fields: list[str]
    direct: bool = False


@dataclass
class InputDef:
    """A subscription: the source component and stream, and how tuples are grouped."""

    component: str
    stream: str
    grouping: g.Grouping


@dataclass
class ShellSpec:
    """A multi-lang (shell) component: the child's argv and environment (client/shell.py)."""

    command: list[str]
    script: str = ""
    env: dict[str, str] = field(default_factory=dict)
    #: False: the child starts in the worker's directory instead of resources/.
    change_child_cwd: bool = True

    @property
    def argv(self) -> list[str]:
        """The whole command line (Storm's execution command plus its script)."""
        return self.command + ([self.script] if self.script else [])


@dataclass
class ComponentDef:
    """One spout or bolt of a topology."""

    id: str
    kind: str
    #: The pickled component object (one copy is unpickled per task).
    serialized: bytes | None = None
    shell: ShellSpec | None = None
    parallelism: int = 1
    num_tasks: int | None = None
    conf: dict[str, Any] = field(default_factory=dict)
    streams: dict[str, StreamDef] = field(default_factory=dict)
    inputs: list[InputDef] = field(default_factory=list)
    #: True for components the runtime provides (the acker).
    system: bool = False
    #: Optional parts of Squall it needs (client/extras.py), from ``requires_extras``.
    extras: tuple[str, ...] = ()

    @property
    def task_count(self) -> int:
        return self.parallelism if self.num_tasks is None else self.num_tasks

    def instantiate(self) -> Any:
        """A fresh instance of the user's component object (one per task); shell components
        have none (the worker hosts their child process)."""
        if self.serialized is None:
            raise InvalidTopology(f"component {self.id!r} has no Python object (a shell "
                                  "component runs in a worker's shell host)", component=self.id)
        with _UNPICKLING:
            return pickle.loads(self.serialized)


@dataclass
class Topology:
    """A validated topology: components by id, in declaration order."""

    components: dict[str, ComponentDef]

    def spouts(self) -> list[ComponentDef]:
        return [c for c in self.components.values() if c.kind == SPOUT]

    def bolts(self) -> list[ComponentDef]:
        return [c for c in self.components.values() if c.kind == BOLT]

    def subscribers(self, component: str, stream: str) -> list[tuple[ComponentDef, InputDef]]:
        """Every (subscriber, input) that consumes ``component``'s ``stream``."""
        return [(c, i) for c in self.components.values() for i in c.inputs
                if i.component == component and i.stream == stream]


class _Declarer:
    def __init__(self, comp: ComponentDef, obj: Any):
        self._comp = comp
        self._obj = obj

    def set_num_tasks(self, n: int) -> "_Declarer":
        """Run ``n`` tasks spread over the component's executors."""
        self._comp.num_tasks = n
        return self

    def add_configuration(self, key: str, value: Any) -> "_Declarer":
        """Set a component-level conf key (overrides the topology conf for this component)."""
        self._comp.conf[key] = value
        return self

    def add_configurations(self, conf: Mapping[str, Any]) -> "_Declarer":
        self._comp.conf.update(conf)
        return self

    def set_max_spout_pending(self, n: int) -> "_Declarer":
        return self.add_configuration(cfg.TOPOLOGY_MAX_SPOUT_PENDING, n)

    def set_debug(self, on: bool) -> "_Declarer":
        return self.add_configuration(cfg.TOPOLOGY_DEBUG, on)


class SpoutDeclarer(_Declarer):
    """Returned by :meth:`TopologyBuilder.set_spout`."""


class BoltDeclarer(_Declarer):
    """Returned by :meth:`TopologyBuilder.set_bolt`; subscribe with the ``*_grouping`` methods."""

    def _sub(self, component: str, stream: str | None, grouping: g.Grouping) -> "BoltDeclarer":
        self._comp.inputs.append(InputDef(component, stream or DEFAULT_STREAM, grouping))
        return self

    def grouping(self, component: str, grouping: g.Grouping,
                 stream: str | None = None) -> "BoltDeclarer":
        """Subscribe with a :class:`~squall.client.grouping.Grouping` built elsewhere (Flux)."""
        return self._sub(component, stream, grouping)

    def shuffle_grouping(self, component: str, stream: str | None = None) -> "BoltDeclarer":
        return self._sub(component, stream, g.Grouping(g.SHUFFLE))

    def fields_grouping(self, component: str, fields: Sequence[str],
                        stream: str | None = None) -> "BoltDeclarer":
        if isinstance(fields, str):
            fields = [fields]
        return self._sub(component, stream, g.Grouping(g.FIELDS, list(fields)))

    def all_grouping(self, component: str, stream: str | None = None) -> "BoltDeclarer":
        return self._sub(component, stream, g.Grouping(g.ALL))

    def global_grouping(self, component: str, stream: str | None = None) -> "BoltDeclarer":
        return self._sub(component, stream, g.Grouping(g.GLOBAL))

    def none_grouping(self, component: str, stream: str | None = None) -> "BoltDeclarer":
        return self._sub(component, stream, g.Grouping(g.NONE))

    def direct_grouping(self, component: str, stream: str | None = None) -> "BoltDeclarer":
        return self._sub(component, stream, g.Grouping(g.DIRECT))

    def local_or_shuffle_grouping(self, component: str, stream: str | None = None) -> "BoltDeclarer":
        return self._sub(component, stream, g.Grouping(g.LOCAL_OR_SHUFFLE))

    def partial_key_grouping(self, component: str, fields: Sequence[str],
                             stream: str | None = None) -> "BoltDeclarer":
        if isinstance(fields, str):
            fields = [fields]
        return self._sub(component, stream, g.Grouping(g.PARTIAL_KEY, list(fields)))

    def custom_grouping(self, component: str, grouping: Any,
                        stream: str | None = None) -> "BoltDeclarer":
        return self._sub(component, stream, g.Grouping(g.CUSTOM, custom=grouping))


#: Longest topology name, component id or stream id, in UTF-8 bytes: a topology id
#: (name-counter-secs) is a file name and a znode name on every host.
MAX_NAME_BYTES = 128
#: Characters Storm refuses in a topology name (Nimbus.validateTopologyName).
DISALLOWED_NAME_CHARS = ("/", ".", ":", "\\")


def _control_chars(text: str) -> bool:
    return any(unicodedata.category(ch)[0] == "C" for ch in text)


def topology_name_problem(name: Any) -> str | None:
    """Why ``name`` cannot name a topology, or None (Storm's rules plus a length bound)."""
    if not isinstance(name, str) or not name.strip():
        return "give a non-empty name"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} bytes"
    bad = [c for c in DISALLOWED_NAME_CHARS if c in name]
    if bad:
        return f"it contains {' '.join(repr(c) for c in bad)} (names may not contain / . : \\)"
    if _control_chars(name):
        return "it contains a control or unprintable character"
    if name != name.strip():
        return "it starts or ends with whitespace"
    return None


def _id_problem(kind: str, value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return f"{kind} must be a non-empty string, got {value!r}"
    if len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"{kind} {value[:40]!r}... is longer than {MAX_NAME_BYTES} bytes"
    if _control_chars(value):
        return f"{kind} {value!r} contains a control or unprintable character"
    return None


def _check_id(component_id: Any) -> None:
    problem = _id_problem("component id", component_id)
    if problem:
        raise InvalidTopology(problem)
    if component_id == CHECKPOINT_COMPONENT_ID:
        raise InvalidTopology(f"component id {component_id!r} is reserved for the checkpoint "
                              "spout of stateful topologies", component=component_id)
    if component_id.startswith("__"):
        raise InvalidTopology(f"component id {component_id!r} is reserved: ids starting with "
                              "'__' belong to system components", component=component_id)


def _check_component(kind: str, cid: str, obj: Any, bases: tuple[type, ...], what: str) -> None:
    """Refuse, naming the component, what is not an instance of ``bases`` (a class passed
    for an instance too), and methods whose signature cannot take what the runtime passes
    (a BasicBolt's ``prepare`` copied from Bolt's, with a collector): the mistake surfaces
    here, at build, instead of as a TypeError inside a worker."""
    if isinstance(obj, type) and issubclass(obj, bases):
        raise InvalidTopology(f"{kind} {cid!r} is the class {obj.__name__}, not an instance of "
                              f"it: pass {obj.__name__}(...)", component=cid)
    if not isinstance(obj, bases):
        raise InvalidTopology(f"{kind} {cid!r} must be {what}, got {type(obj).__name__}",
                              component=cid)
    problem = signature_problem(obj)
    if problem:
        raise InvalidTopology(f"{kind} {cid!r}: {problem}", component=cid)


def signature_problem(obj: Any) -> str | None:
    """The first method of ``obj``'s class, overriding one of Squall's component classes,
    that cannot be called with the arguments Squall passes to it (as many as the method it
    overrides declares); None when every override fits."""
    import inspect
    cls = type(obj)
    ours = [c for c in cls.__mro__ if c.__module__.startswith("squall.") and c is not object]
    contracts: dict[str, tuple[type, Any]] = {}
    for base in reversed(ours):  # the most derived of Squall's classes sets the contract
        contracts.update((name, (base, fn)) for name, fn in vars(base).items()
                         if not name.startswith("_") and inspect.isfunction(fn))
    for name, (base, contract) in contracts.items():
        impl = inspect.getattr_static(cls, name, None)
        owner = next((c for c in cls.__mro__ if name in vars(c)), None)
        if owner is None or owner in ours or not inspect.isfunction(impl):
            continue  # not overridden by the user's code
        n = sum(1 for p in list(inspect.signature(contract).parameters.values())[1:]
                if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD)
        try:
            inspect.signature(impl).bind(None, *([None] * n))
        except TypeError:
            args = list(inspect.signature(contract).parameters)[1:]
            code = impl.__code__
            where = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"
            hint = ""
            if base is BasicBolt and name == "prepare":
                hint = ("; a BasicBolt's collector comes with each tuple, as in "
                        "execute(self, tup, collector)")
            return (f"{cls.__name__}.{name}{inspect.signature(impl)} ({where}) cannot take "
                    f"the {n} argument(s) Squall passes to {base.__name__}.{name}"
                    f"({', '.join(args)}){hint}")
    return None


class TopologyBuilder:
    """Builds a :class:`Topology` in Storm's vocabulary.

    Example::

        builder = TopologyBuilder()
        builder.set_spout("sentences", SentenceSpout(), 2)
        builder.set_bolt("split", SplitBolt(), 2).shuffle_grouping("sentences")
        builder.set_bolt("count", CountBolt(), 2).fields_grouping("split", ["word"])
        topology = builder.create_topology()
    """

    def __init__(self) -> None:
        self._components: dict[str, ComponentDef] = {}
        self._objects: dict[str, Any] = {}

    def _add(self, component_id: str, obj: Any, kind: str, parallelism_hint: int) -> ComponentDef:
        _check_id(component_id)
        if component_id in self._components:
            raise InvalidTopology(f"duplicate component id {component_id!r}: it is already "
                                  f"used by a {self._components[component_id].kind}",
                                  component=component_id)
        comp = ComponentDef(component_id, kind, parallelism=parallelism_hint)
        self._components[component_id] = comp
        self._objects[component_id] = obj
        return comp

    def set_spout(self, component_id: str, spout: Spout, parallelism_hint: int = 1) -> SpoutDeclarer:
        """Add a spout running ``parallelism_hint`` executors."""
        _check_component("spout", component_id, spout, (Spout,), "a squall.client.Spout")
        comp = self._add(component_id, spout, SPOUT, parallelism_hint)
        return SpoutDeclarer(comp, spout)

    def set_bolt(self, component_id: str, bolt: Bolt | BasicBolt | StatefulBolt | WindowedBolt,
                 parallelism_hint: int = 1) -> BoltDeclarer:
        """Add a bolt running ``parallelism_hint`` executors."""
        _check_component("bolt", component_id, bolt,
                         (Bolt, BasicBolt, StatefulBolt, WindowedBolt),
                         "a squall.client.Bolt, BasicBolt, StatefulBolt or WindowedBolt")
        comp = self._add(component_id, bolt, BOLT, parallelism_hint)
        return BoltDeclarer(comp, bolt)

    def create_topology(self) -> Topology:
        """Declare streams, serialize every component and validate the graph.

        A topology with a stateful bolt also gets Storm's checkpoint spout and its
        ``$checkpoint`` stream through every bolt (client/stateful.py).
        """
        components: dict[str, ComponentDef] = {}
        objects = dict(self._objects)
        specs = dict(self._components)
        stateful = any(is_stateful(o) for o in objects.values())
        if stateful:
            objects[CHECKPOINT_COMPONENT_ID] = CheckpointSpout()
            specs[CHECKPOINT_COMPONENT_ID] = ComponentDef(CHECKPOINT_COMPONENT_ID, SPOUT)
        for cid, comp in specs.items():
            obj = objects[cid]
            declarer = OutputFieldsDeclarer()
            obj.declare_output_fields(declarer)
            if isinstance(obj, WindowedBolt):
                late = obj.window_spec().late_stream
                if late:
                    declarer.declare_stream(late, [LATE_TUPLE_FIELD])
            streams = {s: StreamDef(f, d) for s, (f, d) in declarer.streams.items()}
            conf = dict(obj.get_component_configuration() or {})
            conf.update(comp.conf)
            if comp.num_tasks is None and conf.get(cfg.TOPOLOGY_TASKS) is not None:
                # Storm's component-level topology.tasks (setNumTasks, Flux's numTasks).
                comp = replace(comp, num_tasks=conf[cfg.TOPOLOGY_TASKS])
            if isinstance(obj, StatefulBolt):
                conf[cfg.TOPOLOGY_BOLTS_STATEFUL] = True
            if stateful and comp.kind == BOLT:
                streams[CHECKPOINT_STREAM_ID] = StreamDef(list(CHECKPOINT_FIELDS))
                comp = replace(comp, inputs=list(comp.inputs) + _checkpoint_inputs(comp, specs))
            if isinstance(obj, _Shell):  # no Python object: the worker hosts the command
                components[cid] = ComponentDef(
                    cid, comp.kind, shell=ShellSpec(list(obj.command), "", dict(obj.env),
                                                    obj.change_child_cwd),
                    parallelism=comp.parallelism, num_tasks=comp.num_tasks, conf=conf,
                    streams=streams, inputs=list(comp.inputs))
                continue
            try:  # cloudpickle: lambdas and closures travel by value (plain pickle.loads reads it)
                serialized = cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # pickling runs arbitrary __reduce__ code
                raise InvalidTopology(f"component {cid!r} cannot be serialized (pickled): {exc}; "
                                      "keep open sockets, files and locks out of __init__ and "
                                      "create them in open()/prepare()", component=cid) from None
            components[cid] = ComponentDef(
                cid, comp.kind, serialized=serialized, parallelism=comp.parallelism,
                num_tasks=comp.num_tasks, conf=conf, streams=streams, inputs=list(comp.inputs),
                extras=tuple(sorted(set(getattr(obj, "requires_extras", ())))))
        topology = Topology(components)
        validate(topology)
        for cid, obj in objects.items():
            _check_inputs(topology, cid, obj)
        return topology


def _checkpoint_inputs(comp: ComponentDef, specs: Mapping[str, ComponentDef]) -> list[InputDef]:
    """Storm's addCheckPointInputs: ``$checkpoint`` from the checkpoint spout for a bolt that
    reads a spout, from each bolt it reads otherwise; all grouping, once per source."""
    sources: list[str] = []
    for inp in comp.inputs:
        src = specs.get(inp.component)
        source = CHECKPOINT_COMPONENT_ID if src is None or src.kind == SPOUT else inp.component
        if source not in sources:
            sources.append(source)
    return [InputDef(s, CHECKPOINT_STREAM_ID, g.Grouping(g.ALL)) for s in sources]


def _check_inputs(topology: Topology, cid: str, obj: Any) -> None:
    """A component that needs something of its input streams says so at submit: its
    ``check_inputs(inputs)`` gets ``[(component, stream, fields), ...]`` and raises
    ValueError (or InvalidTopology) with the reason."""
    check = getattr(obj, "check_inputs", None)
    if check is None:
        return
    comps = topology.components
    inputs = [(i.component, i.stream, list(comps[i.component].streams[i.stream].fields))
              for i in comps[cid].inputs]
    try:
        check(inputs)
    except (ValueError, InvalidTopology) as exc:
        raise InvalidTopology(f"component {cid!r}: {exc}", component=cid) from None


def validate(topology: Topology) -> None:
    """Refuse a topology that cannot run, naming the component, stream and field."""
    comps = topology.components
    if not topology.spouts():
        raise InvalidTopology("topology has no spout: add one with set_spout()")
    for c in comps.values():
        if not c.system and not (c.id == CHECKPOINT_COMPONENT_ID and c.kind == SPOUT):
            _check_id(c.id)
        for name, n in (("parallelism", c.parallelism), ("number of tasks", c.num_tasks)):
            if n is None:
                continue
            if not isinstance(n, int) or isinstance(n, bool) or n < 1:
                raise InvalidTopology(f"component {c.id!r}: {name} must be a positive integer, "
                                      f"got {n!r}", component=c.id)
        if c.kind == SPOUT and c.inputs:
            raise InvalidTopology(f"spout {c.id!r} cannot subscribe to streams", component=c.id)
        if c.kind == SPOUT and not c.streams:
            raise InvalidTopology(f"spout {c.id!r} declares no output stream: declare one in "
                                  "declare_output_fields()", component=c.id)
        for s, sd in c.streams.items():
            problem = _id_problem("stream id", s)
            if problem:
                raise InvalidTopology(f"component {c.id!r}: {problem}", component=c.id)
            if s.startswith("__") and not c.system:
                raise InvalidTopology(f"component {c.id!r} declares stream {s!r}: stream ids "
                                      "starting with '__' belong to the system (as in Storm)",
                                      component=c.id, stream=s)
            if len(set(sd.fields)) != len(sd.fields):
                raise InvalidTopology(f"component {c.id!r} stream {s!r} declares a field twice: "
                                      f"{sd.fields}", component=c.id, stream=s)
        try:
            cfg.component_conf({}, c.conf)
        except cfg.ConfigError as exc:
            raise InvalidTopology(f"component {c.id!r}: {exc}", component=c.id) from None
        for key, value in c.conf.items():  # component conf travels as JSON
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError) as exc:
                raise InvalidTopology(f"component {c.id!r}: conf {key!r} cannot be serialized "
                                      f"as JSON: {exc}", component=c.id) from None
        if c.kind == BOLT and not c.inputs and not c.system and \
                c.conf.get(cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS) is None:
            raise InvalidTopology(f"bolt {c.id!r} subscribes to no stream: add a grouping such "
                                  "as .shuffle_grouping(<component>)", component=c.id)
        for inp in c.inputs:
            _validate_input(comps, c, inp)


def _validate_input(comps: Mapping[str, ComponentDef], c: ComponentDef, inp: InputDef) -> None:
    where = f"bolt {c.id!r} subscribes to {inp.component!r} stream {inp.stream!r}"
    src = comps.get(inp.component)
    if src is None:
        known = ", ".join(sorted(k for k in comps if not k.startswith("__")))
        raise InvalidTopology(f"{where}, but there is no component {inp.component!r} "
                              f"(components: {known})", component=c.id, stream=inp.stream)
    sd = src.streams.get(inp.stream)
    if sd is None and inp.stream == SYSTEM_STREAM_ID:
        sd = _SYSTEM_STREAM  # every component has it (system_topology adds it)
    if sd is None:
        known = ", ".join(sorted(src.streams)) or "none"
        raise InvalidTopology(f"{where}, but {inp.component!r} declares no stream {inp.stream!r} "
                              f"(its streams: {known})", component=c.id, stream=inp.stream)
    kind = inp.grouping.kind
    if kind in (g.FIELDS, g.PARTIAL_KEY):
        if not inp.grouping.fields:
            raise InvalidTopology(f"{where} with {kind} grouping on no field",
                                  component=c.id, stream=inp.stream)
        for f in inp.grouping.fields:
            if f not in sd.fields:
                raise InvalidTopology(f"{where} with {kind} grouping on field {f!r}, which the "
                                      f"stream does not declare (its fields: {sd.fields})",
                                      component=c.id, stream=inp.stream, field=f)
    if kind == g.DIRECT and not sd.direct:
        raise InvalidTopology(f"{where} with direct grouping, but the stream is not direct: "
                              "declare it with direct=True", component=c.id, stream=inp.stream)
    if kind != g.DIRECT and sd.direct:
        raise InvalidTopology(f"{where} with {kind} grouping, but the stream is direct: "
                              "subscribe with direct_grouping()", component=c.id, stream=inp.stream)
    if kind == g.CUSTOM:
        obj = inp.grouping.custom
        if obj is None:  # read from the wire: only its bytes, unpickled in workers alone
            if not inp.grouping.serialized:
                raise InvalidTopology(f"{where} with an empty custom grouping",
                                      component=c.id, stream=inp.stream)
        elif not callable(getattr(obj, "choose_tasks", None)) or \
                not callable(getattr(obj, "prepare", None)):
            raise InvalidTopology(f"{where} with a custom grouping that lacks prepare() and "
                                  "choose_tasks()", component=c.id, stream=inp.stream)


def validate_with_conf(topology: Topology, conf: Mapping[str, Any]) -> None:
    """What can only be checked with the topology's conf (Nimbus, at submit): checkpointing
    and windows (Storm's WindowedBoltExecutor.validate, here before anything runs)."""
    try:
        mode = checkpoint_mode(conf)
    except ValueError as exc:
        raise InvalidTopology(str(exc)) from None
    stateful = CHECKPOINT_COMPONENT_ID in topology.components
    if stateful:
        problem = provider_problem(conf)
        if problem:
            raise InvalidTopology(problem)
    elif barrier_mode(conf):
        raise InvalidTopology(f"{cfg.TOPOLOGY_STATE_CHECKPOINT_MODE} is {mode!r}, but the "
                              "topology has no stateful bolt: checkpointing has nothing to save")
    if stateful and deduplicating(conf):
        _check_replays_reach_the_same_task(topology, mode)
    if barrier_mode(conf):
        for c in topology.components.values():
            if c.shell is not None:  # its child emits after its barrier has gone on
                raise InvalidTopology(
                    f"component {c.id!r} is a shell component: its child's output can "
                    f"follow a checkpoint's barrier, which {mode} checkpointing cannot take "
                    "apart; use topology.state.checkpoint.mode: acker", component=c.id)
    if barrier_mode(conf):
        return  # no acker: a window's tuples neither time out nor wait for spout pending
    for c in topology.components.values():
        spec = WindowSpec.from_conf(c.conf)
        if spec.length_count is None and spec.length_ms is None:
            continue
        merged = {**conf, **c.conf}
        timeout_ms = float(merged.get(cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS, 30)) * 1000
        held_ms = spec.duration_ms() + (spec.lag_ms if spec.event_time else 0)
        if merged.get(cfg.TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS, True) and held_ms > timeout_ms:
            raise InvalidTopology(
                f"bolt {c.id!r}: its window (length + slide{' + lag' if spec.event_time else ''}"
                f" = {held_ms} ms) outlasts "
                f"{cfg.TOPOLOGY_MESSAGE_TIMEOUT_SECS} ({timeout_ms:g} ms): its tuples would "
                "time out and replay before they leave the window; raise the timeout",
                component=c.id)
        pending = merged.get(cfg.TOPOLOGY_MAX_SPOUT_PENDING)
        counted = (spec.length_count or 0) + (spec.slide_count or 0)
        if pending is not None and spec.length_count is not None and counted > int(pending):
            raise InvalidTopology(
                f"bolt {c.id!r}: its window holds up to {counted} tuples (length + slide), "
                f"more than {cfg.TOPOLOGY_MAX_SPOUT_PENDING} ({pending}) lets spouts emit: "
                "it would never fill", component=c.id)


#: Groupings that may send a replayed tuple to another task than the first time.
_UNREPEATABLE = (g.SHUFFLE, g.NONE, g.LOCAL_OR_SHUFFLE, g.PARTIAL_KEY)


def _check_replays_reach_the_same_task(topology: Topology, mode: str) -> None:
    """Exactly-once acker checkpointing recognises a replay in the task that saved it: a
    stateful bolt with several tasks needs inputs grouped by something the tuple carries."""
    for c in topology.components.values():
        if not c.conf.get(cfg.TOPOLOGY_BOLTS_STATEFUL) or c.task_count < 2:
            continue
        for inp in c.inputs:
            if inp.stream != CHECKPOINT_STREAM_ID and inp.grouping.kind in _UNREPEATABLE:
                raise InvalidTopology(
                    f"stateful bolt {c.id!r} reads {inp.component}:{inp.stream} with "
                    f"{inp.grouping.kind} grouping: a replayed tuple may reach another of its "
                    f"{c.task_count} tasks, which cannot tell it was counted, and "
                    f"{cfg.TOPOLOGY_STATE_CHECKPOINT_MODE} {mode} is exactly-once; use "
                    "fields_grouping (or global or all grouping), or acker-at-least-once",
                    component=c.id, stream=inp.stream)


def num_ackers(conf: Mapping[str, Any]) -> int:
    """Acker tasks for ``conf``: ``topology.acker.executors``, unset = one per worker; none
    in barrier checkpointing, whose guarantee needs no acker."""
    if barrier_mode(conf):
        return 0
    n = conf.get(cfg.TOPOLOGY_ACKER_EXECUTORS)
    return int(conf.get(cfg.TOPOLOGY_WORKERS, 1)) if n is None else int(n)


_SYSTEM_STREAM = StreamDef(list(SYSTEM_STREAM_FIELDS))


def system_topology(topology: Topology, conf: Mapping[str, Any]) -> Topology:
    """The topology that actually runs: the user's plus the ``__acker`` bolt, the
    ``__topology_master`` (unless ``topology.master.enable`` is false; barrier checkpointing
    always has it), and every component's ``__system`` stream (Storm's system-topology!)."""
    comps = {cid: replace(c, streams={**c.streams, SYSTEM_STREAM_ID: _SYSTEM_STREAM})
             for cid, c in topology.components.items()}
    barrier = barrier_mode(conf) and CHECKPOINT_COMPONENT_ID in comps
    if barrier:
        _barrier_topology(comps)
    n = num_ackers(conf)
    if n > 0:
        inputs = []
        for c in topology.components.values():
            streams = [ACKER_INIT_STREAM_ID] if c.kind == SPOUT else \
                [ACKER_ACK_STREAM_ID, ACKER_FAIL_STREAM_ID, ACKER_RESET_TIMEOUT_STREAM_ID]
            for s in streams:
                inputs.append(InputDef(c.id, s, g.Grouping(g.FIELDS, ["id"])))
        comps[ACKER_COMPONENT_ID] = ComponentDef(
            ACKER_COMPONENT_ID, BOLT, parallelism=n, inputs=inputs, system=True,
            streams={**{s: StreamDef(["id", "time_delta_ms"], direct=True)
                        for s in (ACKER_ACK_STREAM_ID, ACKER_FAIL_STREAM_ID,
                                  ACKER_RESET_TIMEOUT_STREAM_ID)},
                     SYSTEM_STREAM_ID: _SYSTEM_STREAM})
    if barrier or conf.get(cfg.TOPOLOGY_MASTER_ENABLE, True):
        _add_topology_master(comps)
    return Topology(comps)


_BARRIER_STREAM = StreamDef(list(CHECKPOINT_FIELDS) + ["epoch"])
_TM_STREAM = StreamDef(["event"], direct=True)


def _barrier_topology(comps: dict[str, ComponentDef]) -> None:
    """Barrier checkpointing (client/stateful.py): the data spouts, not the checkpoint
    spout, start ``$checkpoint`` (their barriers follow their tuples), and the Topology
    Master drives checkpoints and recovery."""
    del comps[CHECKPOINT_COMPONENT_ID]
    spouts = {cid for cid, c in comps.items() if c.kind == SPOUT}
    for cid, c in comps.items():
        streams = dict(c.streams)
        if c.kind == SPOUT or CHECKPOINT_STREAM_ID in streams:
            streams[CHECKPOINT_STREAM_ID] = _BARRIER_STREAM
        inputs = [i for i in c.inputs if i.component != CHECKPOINT_COMPONENT_ID]
        if len(inputs) != len(c.inputs):
            for s in dict.fromkeys(i.component for i in c.inputs if i.component in spouts):
                inputs.append(InputDef(s, CHECKPOINT_STREAM_ID, g.Grouping(g.ALL)))
        comps[cid] = replace(c, streams=streams, inputs=inputs)


def _add_topology_master(comps: dict[str, ComponentDef]) -> None:
    """The ``__topology_master`` task (worker/topology_master.py): every component reports
    to it on ``__tm`` (workers' stats, barrier checkpoints), it commands on ``__ctl``."""
    for cid, c in comps.items():
        comps[cid] = replace(c, streams={**c.streams, TM_REPORT_STREAM_ID: _TM_STREAM})
    comps[TOPOLOGY_MASTER_ID] = ComponentDef(
        TOPOLOGY_MASTER_ID, BOLT, parallelism=1, system=True,
        streams={TM_CONTROL_STREAM_ID: _TM_STREAM, TM_REPORT_STREAM_ID: _TM_STREAM,
                 SYSTEM_STREAM_ID: _SYSTEM_STREAM})


def assign_task_ids(topology: Topology) -> dict[str, list[int]]:
    """Task ids per component: numbered from 1 in sorted component-id order, as Storm does."""
    out: dict[str, list[int]] = {}
    next_id = 1
    for cid in sorted(topology.components):
        n = topology.components[cid].task_count
        out[cid] = list(range(next_id, next_id + n))
        next_id += n
    return out


def executors_of(topology: Topology, task_ids: Mapping[str, list[int]]) -> list[tuple[str, list[int]]]:
    """Split each component's tasks over its executors: [(component, [task, ...]), ...]."""
    out = []
    for cid in sorted(topology.components):
        tasks = task_ids[cid]
        n = min(topology.components[cid].parallelism, len(tasks))
        for i in range(n):
            out.append((cid, tasks[i * len(tasks) // n:(i + 1) * len(tasks) // n]))
    return out
