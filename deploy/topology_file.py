"""A topology file as ``squall local`` runs it: imported under its own name, its topology built.

How a file exposes its topology: a module-level function ``topology()`` (or
``build_topology()``) returning a :class:`~squall.client.TopologyBuilder` or a
built :class:`~squall.client.Topology`, and optionally a dict ``CONF`` with
the topology conf, a string ``NAME``, a function ``report(conf)`` called
once the topology is killed (in a process of its own: :mod:`squall.deploy.report`),
a dict ``KAFKA_TOPICS`` (topic -> partitions: ``squall local`` starts a Kafka broker
and creates them), a dict ``NATS_STREAMS`` (JetStream stream -> its subjects: ``squall
local`` starts a NATS server and creates them), a dict ``POSTGRES_TABLES`` (table -> its
columns: ``squall local`` starts a PostgreSQL and creates them) and a function ``setup(conf)`` called before the topology is
submitted, with the daemons (and the broker) up, e.g. to fill an input topic.

The file is the user's code: a syntax error or an exception while importing it or
building its topology becomes one :class:`~squall.client.errors.SquallError` line
naming the file and line, not a traceback through the framework.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import traceback
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from ..client.errors import InvalidTopology, SquallError
from ..client.topology import Topology, TopologyBuilder


@dataclass
class LoadedTopology:
    name: str
    topology: Topology
    conf: dict[str, Any]
    code_dir: str
    #: The file's absolute path.
    path: str = ""
    #: The file's optional ``report(conf)``, called after the run (e.g. to show stored results).
    report: Callable[[dict], None] | None = None
    #: Topics ``squall local`` creates on the Kafka broker it starts: name -> partitions.
    kafka_topics: dict[str, int] | None = None
    #: The file's optional ``setup(conf)``, called before the submit.
    setup: Callable[[dict], None] | None = None
    #: Streams ``squall local`` creates on the NATS server it starts: name -> subjects.
    nats_streams: dict[str, list[str]] | None = None
    #: Tables ``squall local`` creates in the PostgreSQL it starts: name -> column list.
    postgres_tables: dict[str, str] | None = None


def user_error(path: str, exc: BaseException, doing: str,
               code_dir: str | None = None) -> SquallError:
    """One line for an exception raised by the user's code: where (the deepest frame in
    ``code_dir``, default ``path``'s directory), what, and what we were doing."""
    if isinstance(exc, SyntaxError) and exc.filename:
        where = f"{exc.filename}:{exc.lineno}"
        return SquallError(f"{where}: syntax error: {exc.msg} (while {doing})")
    if isinstance(exc, SquallError):  # ours already (an invalid topology): it names the cause
        return SquallError(f"{path}: {exc} (while {doing})")
    code_dir = code_dir or os.path.dirname(path)
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.abspath(f.filename).startswith(code_dir + os.sep)]
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else path
    text = " ".join(str(exc).split())
    what = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return SquallError(f"{where}: {what} (while {doing})")


def import_file(path: str) -> ModuleType:
    """Import ``path`` under its own module name with its directory on ``sys.path`` (so
    classes it defines unpickle in workers, which import it the same way)."""
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise SquallError(f"topology file {path} does not exist")
    code_dir = os.path.dirname(path)
    modname = os.path.splitext(os.path.basename(path))[0]
    if code_dir not in sys.path:
        sys.path.insert(0, code_dir)
    # Imported under its own name (not __main__) so pickled classes resolve in workers.
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise SquallError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # the user's code: one line, not our traceback
        sys.modules.pop(modname, None)
        raise user_error(path, exc, f"importing {os.path.basename(path)}") from None
    return module


def load_topology_file(path: str, args: list[str] | None = None,
                       module: ModuleType | None = None) -> LoadedTopology:
    """Import ``path`` (unless ``module`` is it, imported already) and build its topology
    (see the module docstring for the contract)."""
    path = os.path.abspath(path)
    module = module or import_file(path)
    factory = getattr(module, "topology", None) or getattr(module, "build_topology", None)
    if not callable(factory):
        raise SquallError(f"{path} must define a function topology() returning a "
                          "TopologyBuilder or Topology")
    try:
        built = factory(*(args or [])) if args else factory()
        if isinstance(built, TopologyBuilder):
            built = built.create_topology()
    except InvalidTopology as exc:
        raise SquallError(f"{path}: invalid topology: {exc}") from None
    except Exception as exc:
        raise user_error(path, exc, f"building the topology of {os.path.basename(path)}") \
            from None
    if not isinstance(built, Topology):
        raise SquallError(f"{path}: topology() returned {type(built).__name__}, expected a "
                          "TopologyBuilder or Topology")
    conf = dict(getattr(module, "CONF", {}) or {})
    name = getattr(module, "NAME", None) or os.path.splitext(os.path.basename(path))[0]
    report = getattr(module, "report", None)
    setup = getattr(module, "setup", None)
    return LoadedTopology(name, built, conf, os.path.dirname(path), path,
                          report if callable(report) else None,
                          _kafka_topics(path, getattr(module, "KAFKA_TOPICS", None)),
                          setup if callable(setup) else None,
                          _nats_streams(path, getattr(module, "NATS_STREAMS", None)),
                          _postgres_tables(path, getattr(module, "POSTGRES_TABLES", None)))


def _kafka_topics(path: str, topics: Any) -> dict[str, int] | None:
    if topics is None:
        return None
    if not isinstance(topics, dict) or not all(
            isinstance(t, str) and t and type(n) is int and n >= 1 for t, n in topics.items()):
        raise SquallError(f"{path}: KAFKA_TOPICS must map topic names to partition counts "
                          f"(>= 1), e.g. {{'sentences': 4}}; got {topics!r}")
    return dict(topics)


def _nats_streams(path: str, streams: Any) -> dict[str, list[str]] | None:
    if streams is None:
        return None
    if not isinstance(streams, dict) or not all(
            isinstance(s, str) and s and isinstance(subjects, (list, tuple)) and subjects
            and all(isinstance(x, str) and x for x in subjects)
            for s, subjects in streams.items()):
        raise SquallError(f"{path}: NATS_STREAMS must map stream names to lists of subjects, "
                          f"e.g. {{'SENTENCES': ['sentences.>']}}; got {streams!r}")
    return {s: list(subjects) for s, subjects in streams.items()}


def _postgres_tables(path: str, tables: Any) -> dict[str, str] | None:
    if tables is None:
        return None
    if not isinstance(tables, dict) or not tables or not all(
            isinstance(t, str) and t and isinstance(cols, str) and cols.strip()
            for t, cols in tables.items()):
        raise SquallError(f"{path}: POSTGRES_TABLES must map table names to their columns, "
                          f"e.g. {{'word_counts': 'word text PRIMARY KEY, count bigint'}}; "
                          f"got {tables!r}")
    return dict(tables)
