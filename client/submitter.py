"""Storm's ``StormSubmitter``: what topology code run by ``squall jar`` calls to submit itself.

``squall jar PACKAGE MODULE [ARGS...]`` puts PACKAGE on ``sys.path``, records it in the
environment (:data:`ENV_PACKAGE`) with the ``-c`` overrides (:data:`ENV_OVERRIDES`, a JSON
object), imports MODULE and calls ``MODULE.main(args)``, which builds its topology and calls
:func:`submit_topology`::

    def main(args):
        submit_topology("word-count", {"topology.workers": 2}, topology())

:func:`submit_topology` packs PACKAGE (a directory becomes a zip without ``__pycache__``,
``.git`` and ``.venv``; a ``.zip`` or ``.pyz`` is sent as is), uploads it to Nimbus in chunks
with a progress bar on stderr, submits the topology and prints its id. The topology's Python
requirements (``squall jar --requirements``/``--wheelhouse``, or a ``requirements.txt`` at the
package's root) travel in the package, named by ``topology.python.*`` in the conf
(:func:`python_dependencies`).

Conf layering, lowest first: defaults < ``squall.yaml`` < the topology conf < ``-c``
overrides. The cluster-side keys of ``squall.yaml`` (``nimbus.seeds``...) only tell the
submitter where Nimbus is; what Nimbus receives is the ``topology.*`` keys of
``squall.yaml``, the topology conf and the overrides.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import sys
import tempfile
import zipfile
from typing import Any, Callable, Mapping

from . import config as cfg
from .errors import SquallError
from .requirements import (DEFAULT_REQUIREMENTS, REQUIREMENTS_MAX_BYTES, SHIPPED_REQUIREMENTS,
                           SHIPPED_WHEELHOUSE, entry_name, parse_requirements_file)
from .topology import Topology, TopologyBuilder, topology_name_problem
from .values import entries_from_conf

#: Environment variable naming the package ``squall jar`` runs (a dir, .zip or .pyz).
ENV_PACKAGE = "SQUALL_PACKAGE"
#: Environment variable with ``squall jar``'s ``-c`` overrides as a JSON object.
ENV_OVERRIDES = "SQUALL_CLI_OVERRIDES"
#: Directory names never packed.
EXCLUDED_DIRS = frozenset({"__pycache__", ".git", ".venv", ".mypy_cache", ".pytest_cache"})
#: File suffixes never packed.
EXCLUDED_SUFFIXES = (".pyc", ".pyo")
#: Package files sent as they are.
ARCHIVE_SUFFIXES = (".zip", ".pyz")
#: Environment variables carrying ``squall jar --requirements FILE`` / ``--wheelhouse DIR``.
ENV_REQUIREMENTS = "SQUALL_JAR_REQUIREMENTS"
ENV_WHEELHOUSE = "SQUALL_JAR_WHEELHOUSE"


def pack_directory(src: str | os.PathLike, dest_zip: str | os.PathLike) -> str:
    """Zip the tree under ``src`` into ``dest_zip`` (paths relative to ``src``), skipping
    :data:`EXCLUDED_DIRS`, compiled files and what is not a regular file; returns
    ``dest_zip``. Entries are sorted. The tree may be live (a topology file beside a running
    daemon's files): a file gone by the time it is read is left out."""
    src = os.path.abspath(src)
    dest_zip = os.fspath(dest_zip)
    dest_abs = os.path.abspath(dest_zip)
    entries = []
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if d not in EXCLUDED_DIRS]
        for name in files:
            path = os.path.join(root, name)
            if name.endswith(EXCLUDED_SUFFIXES) or os.path.abspath(path) == dest_abs:
                continue
            if not os.path.isfile(path):  # a socket or FIFO (opening one would block)
                continue
            entries.append((os.path.relpath(path, src).replace(os.sep, "/"), path))
    with zipfile.ZipFile(dest_zip, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, path in sorted(entries):
            try:
                zf.write(path, arcname)
            except FileNotFoundError:
                # Gone between the walk and now (a heartbeat renamed over, a rotated log):
                # the package is what exists when it is read, as `zip -r` would pack it.
                continue
            except OSError as e:
                raise SquallError(f"cannot pack {path} into the topology package: "
                                  f"{e.strerror or e}; fix its permissions or move it out "
                                  f"of {src}") from None
    return dest_zip


def package_file(package: str | os.PathLike, workdir: str) -> str:
    """The file to upload for ``package``: a directory packed into ``workdir``, an archive as is."""
    package = os.fspath(package)
    if os.path.isdir(package):
        base = os.path.basename(os.path.abspath(package)) or "package"
        return pack_directory(package, os.path.join(workdir, f"{base}.zip"))
    if os.path.isfile(package) and package.endswith(ARCHIVE_SUFFIXES):
        return package
    if not os.path.exists(package):
        raise SquallError(f"package {package} does not exist")
    raise SquallError(f"package {package} must be a directory, a .zip or a .pyz")


def _package_has(package: str) -> Callable[[str], bool]:
    """Whether the package holds an entry of this name (a directory: as packed)."""
    if os.path.isdir(package):
        def in_dir(name: str) -> bool:
            parts = name.split("/")
            return not any(p in EXCLUDED_DIRS for p in parts[:-1]) and \
                os.path.isfile(os.path.join(package, *parts))
        return in_dir
    if not zipfile.is_zipfile(package):
        return lambda name: False  # package_file says what is wrong with it
    with zipfile.ZipFile(package) as zf:
        names = set(zf.namelist())
    return names.__contains__


def _read_package_file(package: str, name: str) -> bytes:
    if os.path.isdir(package):
        with open(os.path.join(package, *name.split("/")), "rb") as fh:
            return fh.read(REQUIREMENTS_MAX_BYTES + 1)
    with zipfile.ZipFile(package) as zf, zf.open(name) as fh:
        return fh.read(REQUIREMENTS_MAX_BYTES + 1)


def python_dependencies(package: str, sent: Mapping[str, Any], requirements: str | None,
                        wheelhouse: str | None) -> tuple[dict[str, str], dict[str, Any], str]:
    """What a topology's Python requirements add to its package and its conf:
    (archive name -> local file to add, conf keys to set, a line saying what ships; '' for
    none).

    ``requirements`` (``--requirements FILE``) wins over ``topology.python.requirements``
    in the conf, which wins over a ``requirements.txt`` at the package's root (a conf that
    sets the key to null turns that off). ``wheelhouse`` (``--wheelhouse DIR``) ships DIR's
    ``*.whl``; the package bound (``nimbus.package.max.bytes``) bounds them, at Nimbus. The
    requirements are checked here as the supervisors will (line numbers, at once)."""
    extras: dict[str, str] = {}
    conf: dict[str, Any] = {}
    has = _package_has(package)
    if requirements is not None:
        if not os.path.isfile(requirements):
            raise SquallError(f"--requirements {requirements}: no such file")
        with open(requirements, "rb") as fh:
            data = fh.read(REQUIREMENTS_MAX_BYTES + 1)
        where = requirements
        extras[SHIPPED_REQUIREMENTS] = requirements
        conf[cfg.TOPOLOGY_PYTHON_REQUIREMENTS] = SHIPPED_REQUIREMENTS
    elif cfg.TOPOLOGY_PYTHON_REQUIREMENTS in sent:
        named = sent[cfg.TOPOLOGY_PYTHON_REQUIREMENTS]
        if named is None:
            data, where = None, ""
        elif not has(entry_name(named)):
            raise SquallError(f"{cfg.TOPOLOGY_PYTHON_REQUIREMENTS}: {named} is not a file of "
                              f"the package {package}")
        else:
            data, where = _read_package_file(package, entry_name(named)), named
    elif has(DEFAULT_REQUIREMENTS):
        data, where = _read_package_file(package, DEFAULT_REQUIREMENTS), \
            os.path.join(package, DEFAULT_REQUIREMENTS)
        conf[cfg.TOPOLOGY_PYTHON_REQUIREMENTS] = DEFAULT_REQUIREMENTS
    else:
        data, where = None, ""
    if data is None:
        if wheelhouse is not None:
            raise SquallError("--wheelhouse needs requirements to install from it: "
                              "--requirements FILE, or a requirements.txt in the package")
        return extras, conf, ""
    reqs = parse_requirements_file(data, where)
    line = f"Python requirements: {len(reqs)} from {where}"
    if wheelhouse is not None:
        if not os.path.isdir(wheelhouse):
            raise SquallError(f"--wheelhouse {wheelhouse}: not a directory")
        wheels = sorted(n for n in os.listdir(wheelhouse) if n.endswith(".whl")
                        and os.path.isfile(os.path.join(wheelhouse, n)))
        for n in wheels:
            extras[f"{SHIPPED_WHEELHOUSE}/{n}"] = os.path.join(wheelhouse, n)
        conf[cfg.TOPOLOGY_PYTHON_WHEELHOUSE] = SHIPPED_WHEELHOUSE
        size = sum(os.path.getsize(os.path.join(wheelhouse, n)) for n in wheels)
        line += f", installed with no index from {len(wheels)} wheel(s) ({size:,} bytes)"
    clash = sorted(n for n in extras if has(n))
    if clash:
        raise SquallError(f"the package {package} already holds {clash[0]}: move it away or "
                          "leave out --requirements/--wheelhouse")
    return extras, conf, line


def add_to_package(path: str, workdir: str, extras: Mapping[str, str]) -> str:
    """``path`` with ``extras`` (archive name -> local file) added: a zip of ``workdir`` is
    appended to in place, any other archive copied into ``workdir`` first."""
    if not extras:
        return path
    if os.path.dirname(os.path.abspath(path)) != os.path.abspath(workdir):
        path = shutil.copy(path, os.path.join(workdir, os.path.basename(path)))
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, src in sorted(extras.items()):
            # Wheels are zips already: storing them again costs nothing to unpack.
            zf.write(src, arcname, compress_type=zipfile.ZIP_STORED
                     if arcname.endswith(".whl") else zipfile.ZIP_DEFLATED)
    return path


def cli_overrides() -> dict[str, Any]:
    """The ``-c`` overrides ``squall jar`` passed through :data:`ENV_OVERRIDES` ({} if none)."""
    raw = os.environ.get(ENV_OVERRIDES)
    if not raw:
        return {}
    try:
        out = json.loads(raw)
    except ValueError as e:
        raise SquallError(f"{ENV_OVERRIDES} is not JSON: {e}") from None
    if not isinstance(out, dict):
        raise SquallError(f"{ENV_OVERRIDES} must be a JSON object")
    return cfg.normalize(out)


def submission_conf(yaml_conf: Mapping[str, Any], topology_conf: Mapping[str, Any] | None,
                    overrides: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(conf for talking to Nimbus, conf sent with the topology), both validated.

    The first is every layer over the defaults; the second the ``topology.*`` keys of
    ``squall.yaml`` < the topology conf < the overrides. The serializers it names are
    imported here, so a misspelt one fails at submit rather than in every worker.
    """
    full = cfg.layered(yaml_conf, topology_conf, overrides)
    sent = {k: v for k, v in cfg.normalize(yaml_conf).items() if k.startswith("topology.")}
    sent.update(cfg.normalize(topology_conf or {}))
    sent.update(overrides)
    cfg.validate(sent)
    entries_from_conf(sent)
    return full, sent


def submit_topology(name: str, conf: Mapping[str, Any] | None,
                    topology: Topology | TopologyBuilder, initial_status: str = "ACTIVE",
                    *, echo=None) -> str:
    """Upload the package ``squall jar`` runs and submit ``topology`` as ``name``; returns its id.

    Raises :class:`SquallError` (or a :mod:`~squall.client.errors` subclass) with a
    message a person can act on: not run under ``squall jar``, Nimbus unreachable, refused.
    """
    import click

    from .nimbus_client import NimbusClient
    from .topology_proto import to_proto

    package = os.environ.get(ENV_PACKAGE)
    if not package:
        raise SquallError("submit_topology needs the package being run: start this code with "
                          "`squall jar PACKAGE MODULE [ARGS...]` (for one machine without a "
                          "cluster, use `squall local FILE`)")
    problem = topology_name_problem(name)
    if problem:
        raise SquallError(f"invalid topology name {name!r}: {problem}")
    if isinstance(topology, TopologyBuilder):
        topology = topology.create_topology()
    if not isinstance(topology, Topology):
        raise SquallError(f"submit_topology wants a Topology or TopologyBuilder, got "
                          f"{type(topology).__name__}")
    cfg.refuse_unknown_keys(conf or {}, f"topology {name}'s conf")
    try:
        full, sent = submission_conf(cfg.load_yaml(cfg.find_yaml()), conf, cli_overrides())
    except cfg.ConfigError as e:
        raise SquallError(str(e)) from None
    echo = echo or (lambda s: click.echo(s))
    extras, dep_conf, dep_line = python_dependencies(
        package, sent, os.environ.get(ENV_REQUIREMENTS) or None,
        os.environ.get(ENV_WHEELHOUSE) or None)
    sent.update(dep_conf)
    with tempfile.TemporaryDirectory(prefix="squall-jar-") as workdir:
        path = add_to_package(package_file(package, workdir), workdir, extras)
        if dep_line:
            click.echo(dep_line, err=True)
        size = os.path.getsize(path)
        with NimbusClient(full) as nimbus:
            # Only on a terminal: in logs and pipes a bar is noise before the result line.
            with click.progressbar(length=max(size, 1), label=f"Uploading {os.path.basename(path)}",
                                   file=sys.stderr if sys.stderr.isatty() else io.StringIO(),
                                   show_pos=False) as bar:
                done = [0]

                def progress(sent_bytes: int, total: int) -> None:
                    bar.update(sent_bytes - done[0])
                    done[0] = sent_bytes

                location = nimbus.upload(path, progress=progress)
            tid = nimbus.submit(name, location, json.dumps(sent, sort_keys=True),
                                to_proto(topology), initial_status=initial_status,
                                warn=lambda w: click.echo(f"Warning: {w}", err=True))
    echo(f"Submitted topology {name} as {tid} ({initial_status.upper()})")
    return tid
