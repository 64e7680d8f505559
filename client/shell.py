"""Multi-lang (shell) components: :class:`ShellBolt` and :class:`ShellSpout` (Storm's).

A shell component is a program in any language that speaks Storm's multi-lang protocol
over its stdin and stdout (Storm's ``storm.py``, ``storm.js``, ``storm.rb``, pystorm,
streamparse). The topology carries only its command line, output streams and
environment; the worker starts one child per task, with the topology package's
``resources/`` folder as its working directory, and hosts it (squall.worker.shell).

Example::

    builder.set_bolt("split", ShellBolt(["python3", "splitsentence.py"], ["word"]), 4) \\
        .shuffle_grouping("sentences")

or Storm's way, a subclass that declares its fields::

    class SplitSentence(ShellBolt):
        def __init__(self):
            super().__init__(["python3", "splitsentence.py"])

        def declare_output_fields(self, declarer):
            declarer.declare(["word"])
"""

from __future__ import annotations

import os
import shutil
from typing import Any, Iterable, Mapping, Sequence

from . import config as cfg
from .components import Bolt, OutputFieldsDeclarer, Spout
from .errors import ConfigError, InvalidTopology
from .tuple import DEFAULT_STREAM

#: The two wire formats, by the names ``topology.multilang.serializer`` accepts.
JSON = "json"
MSGPACK = "msgpack"
_SERIALIZER_ALIASES = {
    "json": JSON,
    "org.apache.storm.multilang.JsonSerializer": JSON,
    "backtype.storm.multilang.JsonSerializer": JSON,
    "msgpack": MSGPACK,
    # pystorm's MsgpackSerializer pairs with these Java-side serializers on Storm.
    "com.hellosign.storm.multilang.MsgpackSerializer": MSGPACK,
    "org.apache.storm.multilang.MsgpackSerializer": MSGPACK,
    "pystorm.serializers.msgpack_serializer.MsgpackSerializer": MSGPACK,
}


def serializer_name(value: Any) -> str:
    """``json`` or ``msgpack`` for a ``topology.multilang.serializer`` value (Storm's class
    names accepted); a clear error for anything else."""
    if value is None:
        return JSON
    name = _SERIALIZER_ALIASES.get(str(value).strip())
    if name is None and str(value).endswith(("MsgpackSerializer", "MessagePackSerializer")):
        name = MSGPACK
    if name is None:
        raise ConfigError("topology.multilang.serializer",
                          f"unknown serializer {value!r}; use 'json' "
                          "(org.apache.storm.multilang.JsonSerializer) or 'msgpack'")
    return name


def _argv(command: Any) -> list[str]:
    if isinstance(command, str):
        command = [command]
    argv = [str(c) for c in command]
    if not argv or not argv[0]:
        raise InvalidTopology("a shell component needs a command, e.g. "
                              "['python3', 'splitsentence.py']")
    return argv


def extend_path(path: str, env: Mapping[str, str]) -> str:
    """``path`` with ``env``'s PATH appended, as Storm's ShellProcess sets a shell
    component's PATH (the worker's own entries first)."""
    extra = env.get("PATH")
    if not extra:
        return path
    return f"{path}{os.pathsep}{extra}" if path else extra


class _Shell:
    """What ShellBolt and ShellSpout share: the command and how the child is started."""

    def __init__(self, command: Any, *args: Any, output_fields: Sequence[str] | None = None,
                 streams: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
                 change_child_cwd: bool = True, conf: Mapping[str, Any] | None = None):
        if isinstance(command, str):  # Storm's varargs form: ShellBolt("python3", "split.py")
            if not all(isinstance(a, str) for a in args):
                raise InvalidTopology("ShellBolt/ShellSpout: give the command as a list when "
                                      "output fields follow it: ShellBolt(['python3', "
                                      "'split.py'], ['word'])")
            self.command = _argv([command, *args])
        else:  # ShellBolt(argv, output_fields or streams)
            if len(args) > 1:
                raise InvalidTopology("ShellBolt/ShellSpout(command, output_fields or streams): "
                                      f"too many positional arguments {args!r}")
            if args and isinstance(args[0], Mapping):
                streams = args[0]
            elif args:
                output_fields = args[0]
            self.command = _argv(command)
        self.set_env(env or {})
        #: False: start the child in the worker's directory instead of resources/ (Storm's
        #: changeChildCWD(false)), for interpreters shipped beside the package.
        self.change_child_cwd = bool(change_child_cwd)
        self._declarer = OutputFieldsDeclarer()
        if output_fields is not None:
            self.declare_stream(DEFAULT_STREAM, output_fields)
        for name, spec in (streams or {}).items():
            direct = isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[1], bool)
            self.declare_stream(str(name), *(spec if direct else (spec,)))
        self._conf = dict(conf or {})

    # Storm's setters, chainable.
    def set_env(self, env: Mapping[str, str]) -> "_Shell":
        self.env = {str(k): str(v) for k, v in env.items()}
        return self

    def change_child_cwd_to_resources(self, change: bool) -> None:
        self.change_child_cwd = bool(change)

    setEnv = set_env
    changeChildCWD = change_child_cwd_to_resources

    def declare_stream(self, stream: str, fields: Sequence[str], direct: bool = False) -> None:
        """Declare an output stream (Flux's setNamedStream / setDefaultStream)."""
        self._declarer.declare_stream(stream, fields, direct)

    def set_default_stream(self, fields: Sequence[str]) -> None:
        """Flux's FluxShellBolt.setDefaultStream."""
        self.declare_stream(DEFAULT_STREAM, fields)

    def set_named_stream(self, name: str, fields: Sequence[str]) -> None:
        """Flux's FluxShellBolt.setNamedStream."""
        self.declare_stream(name, fields)

    def register_metric(self, name: str, kind: str = "counter") -> "_Shell":
        """A metric the child updates with ``storm.rpcMetrics(name, value)`` (Storm's
        ``registerMetric`` of an ``IShellMetric`` in a ShellBolt/ShellSpout subclass):
        ``counter`` and ``meter`` go up by the value, ``histogram`` records it, ``gauge``
        shows the last one. Names are Storm's, any string (``my-custom-shell-metric``);
        Prometheus gets them with letters, digits and underscores."""
        from .metrics import shell_metric_problem
        problem = shell_metric_problem(name, kind)
        if problem is not None:
            raise InvalidTopology(problem)
        self._conf.setdefault(cfg.TOPOLOGY_SHELL_METRICS, {})[name] = kind
        return self

    registerMetric = register_metric

    def add_component_config(self, key: str, value: Any) -> None:
        """A component conf key (Flux's addComponentConfig)."""
        self._conf[key] = value

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        declarer.streams.update(self._declarer.streams)

    def get_component_configuration(self) -> Mapping[str, Any] | None:
        return self._conf or None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.command!r})"


class ShellBolt(_Shell, Bolt):
    """A bolt run as a child process over Storm's multi-lang protocol (Storm's ShellBolt).

    ``command`` is the argv (``["python3", "splitsentence.py"]``), run in the package's
    ``resources/`` folder; ``output_fields`` declares the default stream, ``streams`` more
    (``{"name": ["f1", "f2"]}`` or ``{"name": (["f"], True)}`` for a direct stream).
    ``topology.shellbolt.max.pending`` bounds the tuples queued to the child and
    ``topology.subprocess.timeout.secs`` how long it may stay silent.
    """

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        raise RuntimeError("a ShellBolt runs in a worker's shell host, not in-process")

    def execute(self, tup: Any) -> None:
        raise RuntimeError("a ShellBolt runs in a worker's shell host, not in-process")


class ShellSpout(_Shell, Spout):
    """A spout run as a child process over Storm's multi-lang protocol (Storm's ShellSpout).

    The same arguments as :class:`ShellBolt`. The protocol is synchronous: each
    ``next``/``ack``/``fail`` waits for the child's ``sync``.
    """

    def open(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        raise RuntimeError("a ShellSpout runs in a worker's shell host, not in-process")

    def next_tuple(self) -> None:
        raise RuntimeError("a ShellSpout runs in a worker's shell host, not in-process")


def missing_interpreters(commands: Iterable[tuple[str, Sequence[str]]],
                         env_path: str | None = None, where: str = "this machine") -> list[str]:
    """One line per shell component whose program is not on this machine's PATH (or, for a
    path with a slash, is not an executable file), for refusing a submit before workers
    fail. A relative path is resolved by the worker in resources/, so it is not checked."""
    path = os.environ.get("PATH", "") if env_path is None else env_path
    out = []
    for cid, argv in commands:
        if not argv or not argv[0]:
            out.append(f"component {cid!r}: its shell command is empty: give the program to "
                       "run, e.g. ShellBolt(['python3', 'splitsentence.py'], ...)")
            continue
        prog = argv[0]
        if "/" in prog:
            if os.path.isabs(prog) and not os.access(prog, os.X_OK):
                out.append(f"component {cid!r}: {prog} is not an executable file on {where}")
            continue
        if shutil.which(prog, path=path) is None:
            out.append(f"component {cid!r}: the command {prog!r} ({' '.join(argv)}) is not "
                       f"installed on {where} (not on PATH); install it on the cluster's "
                       "machines or change the component's command")
    return out
