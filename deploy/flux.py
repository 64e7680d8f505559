"""Flux: a topology declared in YAML (Storm's Flux), built into a Squall topology.

The file's sections are Storm's: ``name``, ``config``, ``components`` (objects that
constructor arguments reference with ``ref``), ``spouts`` and ``bolts`` (``id``,
``className``, ``constructorArgs``, ``configMethods``, ``properties``, ``parallelism``,
``numTasks``), ``streams`` (``from``, ``to``, ``grouping`` with ``type``, ``args``,
``streamId``, ``customClass``) and ``includes`` (``file``, ``resource``, ``override``).

Before parsing, ``${name}`` is replaced from the ``--filter`` properties file and, with
``--env-filter``, ``${ENV-NAME}`` from the environment (Storm substitutes per line, so
line numbers stay). A ``className`` is one of Storm's classes Squall provides
(:data:`STORM_CLASSES`: the shell wrappers, TestWordSpout, TestWordCounter,
LogInfoBolt) or a Python class ``module.Class`` importable beside the file. Anything
Flux files say that Squall cannot honour is refused with the file and line.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any, Callable, Mapping

import yaml

from ..client import grouping as g
from ..client.errors import InvalidTopology, SquallError
from ..client.shell import ShellBolt, ShellSpout
from ..client.testing import LogInfoBolt, TestWordCounter, TestWordSpout
from ..client.topology import TopologyBuilder
from .topology_file import LoadedTopology

#: Storm class names Flux files use -> what builds them here.
STORM_CLASSES: dict[str, Callable[..., Any]] = {
    "org.apache.storm.flux.wrappers.bolts.FluxShellBolt": ShellBolt,
    "org.apache.storm.flux.wrappers.spouts.FluxShellSpout": ShellSpout,
    "org.apache.storm.flux.wrappers.bolts.LogInfoBolt": LogInfoBolt,
    "org.apache.storm.testing.TestWordSpout": TestWordSpout,
    "org.apache.storm.testing.TestWordCounter": TestWordCounter,
}

_TOP_KEYS = {"name", "config", "components", "spouts", "bolts", "streams", "includes",
             "topologySource", "workerHooks"}
_OBJECT_KEYS = {"id", "className", "constructorArgs", "configMethods", "properties",
                "factory", "factoryArgs"}
_VERTEX_KEYS = _OBJECT_KEYS | {"parallelism", "numTasks", "onHeapMemoryLoad",
                               "offHeapMemoryLoad", "cpuLoad", "config"}
# Storm's pattern: ${ENV-NAME}, ${list[i]} or ${name}.
_VAR = re.compile(r"\$\{(ENV-(?P<env>[^}]+)|(?P<list>[^}\[]+)\[(?P<index>\d+)\]|(?P<name>[^}]+))\}")


class _Map(dict):
    """A YAML mapping that remembers its file, its line and each key's."""

    line = 0
    lines: dict
    path: str | None = None

    def line_of(self, key: str) -> int:
        return self.lines.get(key, self.line)


class _List(list):
    line = 0
    lines: list
    path: str | None = None


class _Loader(yaml.SafeLoader):
    #: The file being read (set per file: errors in an included file name it).
    path: str | None = None


def _mapping(loader: _Loader, node: yaml.MappingNode) -> _Map:
    m = _Map(loader.construct_mapping(node, deep=True))
    m.line = node.start_mark.line + 1
    m.lines = {loader.construct_object(k, deep=True): k.start_mark.line + 1
               for k, _ in node.value}
    m.path = loader.path
    return m


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> _List:
    s = _List(loader.construct_sequence(node, deep=True))
    s.line = node.start_mark.line + 1
    s.lines = [v.start_mark.line + 1 for v in node.value]
    s.path = loader.path
    return s


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def read_properties(path: str) -> dict[str, str]:
    """A Java .properties file's ``key=value`` (or ``key: value``) lines; # and ! comment."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if not line or line[0] in "#!":
                    continue
                m = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
                if m:
                    out[m.group(1)] = m.group(2)
    except OSError as e:
        raise SquallError(f"--filter {path}: cannot read it: {e.strerror}") from None
    return out


def substitute(text: str, properties: Mapping[str, str], env: bool) -> str:
    """Storm's line-by-line ``${...}`` replacement; unknown names are left as they are."""
    def one(m: re.Match) -> str:
        if m.group("env") is not None:
            return os.environ.get(m.group("env"), m.group(0)) if env else m.group(0)
        if m.group("list") is not None:
            raw = properties.get(m.group("list"))
            if raw is None:
                return m.group(0)
            items = [i.strip().strip('"') for i in raw.strip()[1:-1].split(",")]
            i = int(m.group("index"))
            return items[i] if i < len(items) else m.group(0)
        return properties.get(m.group("name"), m.group(0))
    return "\n".join(_VAR.sub(one, line) for line in text.split("\n"))


class _Builder:
    def __init__(self, path: str, properties: Mapping[str, str], env: bool):
        self.path = os.path.abspath(path)
        self.dir = os.path.dirname(self.path)
        self.properties = properties
        self.env = env
        self.components: dict[str, Any] = {}
        #: The spec being built: errors name its file (an include's or this one).
        self._node: Any = None

    def error(self, line: int, what: str, path: str | None = None,
              node: Any = None) -> SquallError:
        """``file:line: what``; the file is ``node``'s (an included file's) when given."""
        node = node if node is not None else self._node
        return SquallError(f"{path or getattr(node, 'path', None) or self.path}:{line}: {what}")

    # -- reading ----------------------------------------------------------------------
    def read(self, path: str) -> _Map:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as e:
            raise SquallError(f"{path}: cannot read the Flux file: {e.strerror}") from None
        try:
            loader = type("_FileLoader", (_Loader,), {"path": os.path.abspath(path)})
            doc = yaml.load(substitute(text, self.properties, self.env), Loader=loader)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            line = mark.line + 1 if mark is not None else 1
            raise self.error(line, f"not valid YAML: {getattr(e, 'problem', e)}", path) from None
        if not isinstance(doc, _Map):
            raise self.error(1, "a Flux file is a mapping with name, spouts, bolts and "
                                "streams", path)
        for key in doc:
            if key not in _TOP_KEYS:
                raise self.error(doc.line_of(key), f"unknown section {key!r}; Flux knows "
                                 f"{', '.join(sorted(_TOP_KEYS))}", path)
        return doc

    def with_includes(self, doc: _Map, path: str) -> _Map:
        """Storm's includes (one level): each included file's name, config, components,
        spouts, bolts and streams merged in; ``override: true`` lets them replace ours."""
        for inc in doc.get("includes") or []:
            if not isinstance(inc, _Map) or not isinstance(inc.get("file"), str):
                raise self.error(getattr(inc, "line", doc.line_of("includes")),
                                 "an include needs a file", path)
            name = inc["file"]
            target = _include_path(name, bool(inc.get("resource")), os.path.dirname(path))
            if not os.path.exists(target):
                raise self.error(inc.line_of("file"), f"included file {name} not found "
                                 f"(looked for {target})", path)
            other = self.read(target)
            override = str(inc.get("override", False)).lower() == "true"
            if other.get("name") is not None and (override or doc.get("name") is None):
                doc["name"] = other["name"]
            config = doc["config"] = doc.get("config") or _Map()
            for k, v in (other.get("config") or {}).items():
                if override or k not in config:
                    config[k] = v
            for section in ("components", "spouts", "bolts"):
                ours = doc[section] = doc.get(section) or _List()
                ids = {c.get("id"): i for i, c in enumerate(ours) if isinstance(c, dict)}
                for c in other.get(section) or []:
                    cid = c.get("id") if isinstance(c, dict) else None
                    if cid in ids:
                        if override:
                            ours[ids[cid]] = c
                    else:
                        ours.append(c)
            doc["streams"] = (doc.get("streams") or _List()) + list(other.get("streams") or [])
        return doc

    # -- objects ----------------------------------------------------------------------
    def resolve_class(self, name: Any, line: int) -> Callable[..., Any]:
        if not isinstance(name, str) or not name:
            raise self.error(line, f"className must be a class name, got {name!r}")
        if name in STORM_CLASSES:
            return STORM_CLASSES[name]
        module, _, attr = name.rpartition(".")
        if module.startswith(("org.apache.storm.", "backtype.storm.")) or not module:
            known = ", ".join(sorted(STORM_CLASSES))
            raise self.error(line, f"unknown class {name!r}: Squall provides {known}, or name "
                                   "a Python class as module.Class (importable beside the file)")
        if self.dir not in sys.path:
            sys.path.insert(0, self.dir)
        try:
            cls = getattr(importlib.import_module(module), attr)
        except ImportError as e:
            raise self.error(line, f"unknown class {name!r}: cannot import {module} ({e})") \
                from None
        except AttributeError:
            raise self.error(line, f"unknown class {name!r}: {module} has no {attr}") from None
        return cls

    def value(self, v: Any, line: int) -> Any:
        """An argument: ``ref``/``reflist`` resolved to components, the rest as is."""
        if isinstance(v, dict) and set(v) <= {"ref"} and "ref" in v:
            return self.ref(v["ref"], getattr(v, "line", line))
        if isinstance(v, dict) and set(v) == {"reflist"}:
            return [self.ref(r, getattr(v, "line", line)) for r in v["reflist"]]
        return v

    def ref(self, cid: Any, line: int) -> Any:
        if cid not in self.components:
            raise self.error(line, f"ref {cid!r} names no component (components: "
                                   f"{', '.join(sorted(self.components)) or 'none'})")
        return self.components[cid]

    def make(self, spec: _Map, keys: set[str], what: str) -> Any:
        self._node = spec
        for key in spec:
            if key not in keys:
                raise self.error(spec.line_of(key), f"{what}: unknown key {key!r}; known: "
                                 f"{', '.join(sorted(keys))}", node=spec)
        if "factory" in spec:
            raise self.error(spec.line_of("factory"), f"{what}: factory methods are not "
                             "supported; use className with constructorArgs")
        cls = self.resolve_class(spec.get("className"), spec.line_of("className"))
        args = spec.get("constructorArgs") or []
        if not isinstance(args, list):
            raise self.error(spec.line_of("constructorArgs"), f"{what}: constructorArgs must "
                             "be a list")
        line = spec.line_of("constructorArgs")
        try:
            obj = cls(*[self.value(a, line) for a in args])
        except (TypeError, ValueError, InvalidTopology) as e:
            raise self.error(line, f"{what}: {spec.get('className')}"
                             f"({', '.join(repr(a) for a in args)}) failed: {e}") from None
        for prop in spec.get("properties") or []:
            pline = getattr(prop, "line", spec.line_of("properties"))
            if not isinstance(prop, dict) or "name" not in prop:
                raise self.error(pline, f"{what}: a property needs a name and a value or ref")
            value = self.ref(prop["ref"], pline) if "ref" in prop else prop.get("value")
            setattr(obj, str(prop["name"]), value)
        for call in spec.get("configMethods") or []:
            cline = getattr(call, "line", spec.line_of("configMethods"))
            if not isinstance(call, dict) or not isinstance(call.get("name"), str):
                raise self.error(cline, f"{what}: a config method needs a name")
            method = _method(obj, call["name"])
            if method is None:
                raise self.error(cline, f"{what}: {type(obj).__name__} has no method "
                                 f"{call['name']!r}")
            try:
                method(*[self.value(a, cline) for a in call.get("args") or []])
            except (TypeError, ValueError) as e:
                raise self.error(cline, f"{what}: {call['name']} failed: {e}") from None
        return obj

    # -- the topology -------------------------------------------------------------------
    def build(self) -> LoadedTopology:
        doc = self.with_includes(self.read(self.path), self.path)
        if "topologySource" in doc:
            raise self.error(doc.line_of("topologySource"), "topologySource (a topology built "
                             "by a class) is not supported: declare spouts, bolts and streams")
        name = doc.get("name")
        if not isinstance(name, str) or not name:
            raise self.error(doc.line_of("name") if "name" in doc else 1,
                             "the topology needs a name")
        conf = dict(doc.get("config") or {})
        for spec in doc.get("components") or []:
            cid = self._id(spec, "component")
            self.components[cid] = self.make(spec, _OBJECT_KEYS, f"component {cid!r}")
        b = TopologyBuilder()
        declarers: dict[str, Any] = {}
        for section, add in (("spouts", b.set_spout), ("bolts", b.set_bolt)):
            for spec in doc.get(section) or []:
                cid = self._id(spec, section[:-1])
                if cid in declarers:
                    raise self.error(spec.line, f"{section[:-1]} id {cid!r} is used twice")
                obj = self.make(spec, _VERTEX_KEYS, f"{section[:-1]} {cid!r}")
                try:
                    d = add(cid, obj, int(spec.get("parallelism", 1)))
                except InvalidTopology as e:
                    raise self.error(spec.line, str(e)) from None
                if spec.get("numTasks") not in (None, -1):
                    d.set_num_tasks(int(spec["numTasks"]))
                if spec.get("config"):
                    d.add_configurations(dict(spec["config"]))
                declarers[cid] = d
        for stream in doc.get("streams") or []:
            self._stream(stream, declarers)
        try:
            topology = b.create_topology()
        except InvalidTopology as e:
            raise SquallError(f"{self.path}: invalid topology: {e}") from None
        return LoadedTopology(name, topology, conf, self.dir, self.path)

    def _id(self, spec: Any, what: str) -> str:
        self._node = spec
        if not isinstance(spec, _Map):
            raise self.error(getattr(spec, "line", 1), f"a {what} must be a mapping with an id")
        cid = spec.get("id")
        if not isinstance(cid, str) or not cid:
            raise self.error(spec.line, f"a {what} needs an id")
        return cid

    def _stream(self, stream: Any, declarers: Mapping[str, Any]) -> None:
        self._node = stream
        if not isinstance(stream, _Map):
            raise self.error(getattr(stream, "line", 1), "a stream must be a mapping")
        for key in stream:
            if key not in {"name", "from", "to", "grouping"}:
                raise self.error(stream.line_of(key), f"stream: unknown key {key!r}; known: "
                                 "name, from, to, grouping")
        src, dst = stream.get("from"), stream.get("to")
        for end, cid in (("from", src), ("to", dst)):
            if cid not in declarers:
                raise self.error(stream.line_of(end), f"stream {end} {cid!r}: no spout or bolt "
                                 "has that id")
        if not hasattr(declarers[dst], "shuffle_grouping"):
            raise self.error(stream.line_of("to"), f"stream to {dst!r}: a spout cannot "
                             "subscribe to a stream")
        grouping = stream.get("grouping")
        if not isinstance(grouping, _Map):
            raise self.error(stream.line_of("grouping") if "grouping" in stream else stream.line,
                             "a stream needs a grouping with a type")
        gline = grouping.line_of("type")
        kind = str(grouping.get("type", "")).lower()  # Storm's names are ours in capitals
        if kind not in g.KINDS:
            raise self.error(gline, f"unknown grouping type {grouping.get('type')!r}; known: "
                             f"{', '.join(k.upper() for k in g.KINDS)}")
        stream_id = grouping.get("streamId")
        args = list(grouping.get("args") or [])
        if kind in (g.FIELDS, g.PARTIAL_KEY) and not args:
            raise self.error(gline, f"a {grouping['type']} grouping needs args: the fields")
        custom = None
        if kind == g.CUSTOM:
            spec = grouping.get("customClass")
            if not isinstance(spec, _Map):
                raise self.error(gline, "a CUSTOM grouping needs a customClass")
            custom = self.make(spec, _OBJECT_KEYS, "customClass")
        declarers[dst].grouping(src, g.Grouping(kind, args, custom=custom), stream_id)


def _include_path(name: str, resource: bool, base: str) -> str:
    """Where an include is. A resource (Storm: on the jar's classpath) is looked for from
    the including file's folder up through its parents, the first match winning; a file is
    relative to the including file's folder unless absolute."""
    if not resource:
        return name if os.path.isabs(name) else os.path.join(base, name)
    rel = name.lstrip("/")
    d = base
    while True:
        candidate = os.path.join(d, rel)
        if os.path.exists(candidate):
            return candidate
        parent = os.path.dirname(d)
        if parent == d:
            return os.path.join(base, rel)
        d = parent


def _method(obj: Any, name: str) -> Any:
    """``name`` on ``obj``, or its snake_case spelling (addComponentConfig ->
    add_component_config)."""
    m = getattr(obj, name, None)
    if m is None:
        m = getattr(obj, re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower(), None)
    return m if callable(m) else None


def load_flux(path: str, properties_file: str | None = None,
              env_filter: bool = False) -> LoadedTopology:
    """Build the topology of Flux file ``path`` (see the module docstring)."""
    properties = read_properties(properties_file) if properties_file else {}
    return _Builder(path, properties, env_filter).build()
