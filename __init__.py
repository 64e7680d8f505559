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

import os as _os

# No Squall process uses gRPC in a forked child (workers, the JVM, pip are exec'd), but a
# fork with gRPC's fork support on restarts its poller in the child, which dies on the
# epoll descriptor a subprocess's close_fds already closed, before its exec (grpc/grpc
# #43055): seen as pyspark's "Java gateway process exited" in a process holding a Nimbus
# channel. Off unless the user turned it on; read when grpc is first imported.
_os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

from . import _compiled  # noqa: E402 - first: it picks compiled or source modules

_compiled.install()
