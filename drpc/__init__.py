"""The DRPC server (``squall drpc``): Storm's DRPC daemon over gRPC.

:class:`~.server.DRPCServer` is the daemon, :mod:`.requests` its outstanding requests
(pure), :mod:`.authorizer` who may use which port. The client and topology side is
:mod:`squall.client.drpc`.
"""

from .server import DRPCServer

__all__ = ["DRPCServer"]
