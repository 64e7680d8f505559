"""Which modules run compiled, and the switch back to their Python source.

The per-tuple path is compiled by Cython from the same ``.py`` files
(``scripts/build_compiled.py``, run by ``scripts/setup.sh``): each module below gets a C
extension beside its source, which Python's importer prefers. This module decides, for
those modules only, whether the extension or the source is loaded:

* ``SQUALL_PURE_PYTHON=1`` in the environment: the source, always (CI runs a subset this
  way so both stay correct; worker processes inherit the variable);
* a source edited since the build: every compiled module from its source, with one line
  naming the stale ones, so a stale build never runs code that is not in the file (and a
  typed module never meets a class from a source whose layout it was not built against).
  In a checkout, "edited" is a source newer than its extension. In a copy installed from
  a wheel (a ``squall-*.dist-info`` beside the package) it is a source whose hash differs
  from the one in the wheel's RECORD: pip does not keep the wheel's mtimes, it writes
  ``collector.cpython-*.so`` before ``collector.py``, so every source there is newer.

It is imported first by ``squall/__init__.py``; it imports nothing of Squall.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

#: The per-tuple path: collectors and routing, groupings, the tuple, the executor loop,
#: frames, queues, transfer and receive, the acker ledger and its maps, the per-task
#: counters and latency histograms (one record per acked tree).
COMPILED = (
    "squall.acker.compact_map",
    "squall.acker.ledger",
    "squall.acker.pending_map",
    "squall.acker.rotating_map",
    "squall.client.grouping",
    "squall.client.histogram",
    "squall.client.tuple",
    "squall.worker.collector",
    "squall.worker.dedupe",
    "squall.worker.executor",
    "squall.worker.frame",
    "squall.worker.lineage",
    "squall.worker.loop",
    "squall.worker.queue",
    "squall.worker.receiver",
    "squall.worker.stats",
    "squall.worker.transfer",
    "squall.worker.zmqraw",
)
ENV = "SQUALL_PURE_PYTHON"
ROOT = os.path.dirname(os.path.abspath(__file__))


def source_path(module: str) -> str:
    """The ``.py`` file of a compiled module (``squall.worker.frame`` -> worker/frame.py)."""
    return os.path.join(ROOT, *module.split(".")[1:]) + ".py"


def extension_path(module: str) -> str | None:
    """Its built extension, or None when there is none."""
    base = os.path.join(ROOT, *module.split(".")[1:])
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.exists(base + suffix):
            return base + suffix
    return None


def pure() -> bool:
    return os.environ.get(ENV, "").strip() not in ("", "0", "false", "no")


def installed_hashes() -> dict[str, str] | None:
    """``{path under the package: sha256}`` from the RECORD of the wheel this copy was
    installed from (``worker/collector.py`` -> its urlsafe base64 digest, as pip writes
    it), or None when there is no ``squall-*.dist-info`` beside the package (a checkout;
    an editable install keeps its dist-info elsewhere)."""
    import csv

    parent, name = os.path.split(ROOT)
    try:
        infos = sorted(e for e in os.listdir(parent)
                       if e.startswith("squall-") and e.endswith(".dist-info"))
    except OSError:
        return None
    for info in infos:
        try:
            with open(os.path.join(parent, info, "RECORD"), newline="") as fh:
                rows = list(csv.reader(fh))
        except OSError:
            continue
        out = {row[0].removeprefix(name + "/"): row[1].removeprefix("sha256=")
               for row in rows if len(row) >= 2 and row[0].startswith(name + "/")
               and row[1].startswith("sha256=")}
        if out:
            return out
    return None


def _digest(path: str) -> str:
    """A file's sha256 as a wheel's RECORD writes it (urlsafe base64, no padding)."""
    import base64
    import hashlib
    with open(path, "rb") as fh:
        return base64.urlsafe_b64encode(hashlib.sha256(fh.read()).digest()).rstrip(
            b"=").decode()


def stale_sources() -> list[str]:
    """The compiled modules whose source was edited since their build (or is unreadable):
    newer than the extension in a checkout, not the wheel's in an installed copy."""
    recorded = installed_hashes()
    out = []
    for m in COMPILED:
        ext = extension_path(m)
        if ext is None:
            continue
        src = source_path(m)
        # Its .pxd too, where it has one: the types (struct layouts other modules were
        # built against) live there.
        pxd = src[:-3] + ".pxd"
        srcs = [src, pxd] if os.path.exists(pxd) else [src]
        try:
            if recorded is not None:
                for f in srcs:
                    want = recorded.get(os.path.relpath(f, ROOT).replace(os.sep, "/"))
                    if want is None and f == pxd:
                        continue  # a wheel that does not ship its .pxd
                    if _digest(f) != want:
                        out.append(m)
                        break
            elif max(os.path.getmtime(f) for f in srcs) > os.path.getmtime(ext):
                out.append(m)
        except OSError:
            out.append(m)
    return out


class _SourceFirst(importlib.abc.MetaPathFinder):
    """Loads the compiled modules from their sources when asked to, or when the build is
    stale. All of them or none: the typed modules share C struct layouts (a ``.pxd``
    cimports another's class), so a class from a source cannot stand in for the compiled
    one another compiled module was built against."""

    def __init__(self) -> None:
        self.stale: list[str] | None = None  # decided at the first compiled import

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in COMPILED:
            return None
        if extension_path(fullname) is None:
            return None  # not built: the normal import finds the source
        if not pure():
            if self.stale is None:
                self.stale = stale_sources()
                if self.stale:  # one line on stderr, not a warning (tests make warnings
                    names = ", ".join(os.path.relpath(source_path(m), ROOT)  # errors; this
                                      for m in self.stale)                 # is for a person)
                    why, fix = (("changed since the wheel was installed", "reinstall it")
                                if installed_hashes() is not None else
                                ("newer than the compiled build",
                                 "rebuild with `bash scripts/setup.sh`"))
                    sys.stderr.write(f"squall: {names} {why}; running every compiled module "
                                     f"from its source ({fix})\n")
            if not self.stale:
                return None  # the normal import finds the extension first
        return importlib.util.spec_from_file_location(fullname, source_path(fullname))


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _SourceFirst) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceFirst())


def loaded_compiled() -> list[str]:
    """The compiled modules already imported from their extensions."""
    return [m for m in COMPILED if m in sys.modules
            and (getattr(sys.modules[m], "__file__", "") or "").endswith(
                tuple(importlib.machinery.EXTENSION_SUFFIXES))]
