"""``squall quickstart NAME``: a project folder that ``squall local``, ``pytest`` and
``squall jar`` run as written (streamparse's ``sparse quickstart``).

The templates are the files under ``deploy/quickstart/`` (``$name`` is the project's name);
``resources/`` is copied as it is.
"""

from __future__ import annotations

import os
import shutil
import string

from ..client.errors import SquallError
from ..client.topology import topology_name_problem

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "quickstart")


def quickstart(name: str, parent: str = ".") -> str:
    """Write the project ``name`` under ``parent``; returns its path. Refuses a name Storm
    refuses for a topology, or a folder that exists."""
    problem = topology_name_problem(name) or (
        None if name.replace("-", "_").isidentifier() else
        "it must be letters, digits, '-' and '_', not starting with a digit")
    if problem:
        raise SquallError(f"project name {name!r}: {problem}")
    dest = os.path.join(parent, name)
    if os.path.exists(dest):
        raise SquallError(f"{dest} exists already: choose another name or remove it")
    os.makedirs(dest)
    for root, _, files in os.walk(TEMPLATES):
        rel = os.path.relpath(root, TEMPLATES)
        out_dir = os.path.normpath(os.path.join(dest, rel))
        os.makedirs(out_dir, exist_ok=True)
        for f in files:
            src = os.path.join(root, f)
            if f.endswith(".tmpl"):
                with open(src, encoding="utf-8") as fh:
                    text = string.Template(fh.read()).substitute(name=name)
                with open(os.path.join(out_dir, f[:-len(".tmpl")]), "w", encoding="utf-8") as fh:
                    fh.write(text)
            else:
                shutil.copyfile(src, os.path.join(out_dir, f))
    return dest
