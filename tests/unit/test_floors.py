"""The floors: every package imports only from packages below it (or from itself).

    cli                       the ``squall`` command
    deploy, testing           local clusters, the static harness, ZooKeeper/Redis runners |
                              squall.testing (a topology in a test's own process)
    supervisor
    worker, nimbus, ui, drpc, connectors
    client                    what every daemon and every topology needs
    proto, acker

Read from the source (imports inside functions included: a lazy upward import is still an
upward arrow), so a new one fails here with the file, line and the two floors.
"""

from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Package -> floor. Packages on one floor may not import each other either.
FLOORS = {"proto": 0, "acker": 0, "client": 1, "worker": 2, "nimbus": 2, "ui": 2, "drpc": 2,
          "connectors": 2,
          "supervisor": 3,
          "deploy": 4, "testing": 4, "cli": 5}


def sources():
    for package in FLOORS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, package)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for name in filenames:
                if name.endswith(".py"):
                    yield package, os.path.join(dirpath, name)


def imported_packages(path: str, root: str = ROOT):
    """(line, top-level squall package) of every import of ``path`` that names one."""
    rel = os.path.relpath(path, root)
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    with open(path) as fh:
        tree = ast.parse(fh.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = parts[:len(parts) - node.level + (1 if rel.endswith("__init__.py")
                                                         else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
                names = [module] + ([f"{module}.{a.name}" for a in node.names]
                                    if not node.module else [])
            else:
                names = [node.module or ""]
        else:
            continue
        found = set()
        for name in names:
            bits = name.split(".")
            if bits[0] == "squall":
                bits = bits[1:]
            if bits and bits[0] in FLOORS:
                found.add(bits[0])
        for package in sorted(found):
            yield node.lineno, package


def test_the_import_reader_sees_relative_absolute_and_lazy_imports(tmp_path):
    pkg = tmp_path / "worker"
    pkg.mkdir()
    (pkg / "x.py").write_text("from ..client import config\nimport squall.acker\n"
                              "def f():\n    from ..nimbus.nimbus import Nimbus\n"
                              "from . import y\n")
    assert sorted(imported_packages(str(pkg / "x.py"), str(tmp_path))) == [
        (1, "client"), (2, "acker"), (4, "nimbus"), (5, "worker")]


def test_every_package_imports_only_downward():
    upward = []
    for package, path in sources():
        for line, target in imported_packages(path):
            if target != package and FLOORS[target] >= FLOORS[package]:
                upward.append(f"{os.path.relpath(path, ROOT)}:{line}: {package} (floor "
                              f"{FLOORS[package]}) imports {target} (floor {FLOORS[target]})")
    assert not upward, "imports that do not go down a floor:\n" + "\n".join(upward)


@pytest.mark.parametrize("package", sorted(FLOORS))
def test_every_floor_is_a_folder(package):
    assert os.path.isfile(os.path.join(ROOT, package, "__init__.py"))
