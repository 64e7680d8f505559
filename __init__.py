"""Squall: an Apache-Storm-like distributed stream processor in Python.

The repository root is the ``squall`` package: its top-level folders
(``proto``, ``acker``, ``client``, ``worker``, ``nimbus``, ``supervisor``,
``deploy``, ``cli``) are installed as ``squall.proto``, ``squall.nimbus`` and so on
through the setuptools ``package-dir`` mapping in ``pyproject.toml``.
Topologies of spouts and bolts are built with ``squall.client``, serialized
with the messages in ``squall.proto`` and run by worker processes. ARCHITECTURE.md
at the repository root is the map.
"""

__version__ = "0.1.0"

from . import _compiled  # noqa: E402 - first: it picks compiled or source modules

_compiled.install()
