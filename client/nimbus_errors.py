"""Errors of Nimbus requests, shared by Nimbus (which raises them) and the client (which gets
them back from gRPC status codes).

Each class names the gRPC status code it travels as (``grpc_code``, a ``grpc.StatusCode``
member name, so this module does not import grpc); the servicer maps them in one place
(``nimbus/servicer.py``) and :mod:`squall.client.nimbus_client` maps codes back to these
classes with the server's message. :class:`~squall.client.errors.InvalidTopology` (INVALID_ARGUMENT)
and the lifecycle's ``InvalidTransition`` (FAILED_PRECONDITION) come from elsewhere but
travel the same way. They would sit in ``client/errors.py``; they live here only because
that file was not ours to edit in this change.
"""

from __future__ import annotations

from .errors import SquallError


class NimbusError(SquallError):
    """A Nimbus request failed; ``grpc_code`` is how it travels, the message says what to do."""

    grpc_code = "INTERNAL"


class TopologyNotFound(NimbusError):
    """No live topology with that name or id (or an unknown upload location)."""

    grpc_code = "NOT_FOUND"


class TopologyAlreadyExists(NimbusError):
    """A live topology already has that name."""

    grpc_code = "ALREADY_EXISTS"

    def __init__(self, message: str, name: str | None = None, topology_id: str | None = None):
        #: The refused name and the id of the live topology holding it (server side only).
        self.name, self.topology_id = name, topology_id
        super().__init__(message)


class InvalidRequest(NimbusError):
    """A malformed argument: a bad name, conf, upload location, chunk offset or count."""

    grpc_code = "INVALID_ARGUMENT"


class PackageTooLarge(NimbusError):
    """The package is over ``nimbus.package.max.bytes``."""

    grpc_code = "RESOURCE_EXHAUSTED"

    def __init__(self, message: str, limit: int | None = None):
        #: The configured limit in bytes (server side only).
        self.limit = limit
        super().__init__(message)


class IllegalState(NimbusError):
    """The topology's status does not allow the request (client side of InvalidTransition)."""

    grpc_code = "FAILED_PRECONDITION"


class NimbusUnavailable(NimbusError):
    """Nimbus cannot be reached, is not the leader, or cannot reach ZooKeeper."""

    grpc_code = "UNAVAILABLE"

    def __init__(self, message: str, address: str | None = None):
        #: host:port tried, when known.
        self.address = address
        super().__init__(message)


class NotALeader(NimbusUnavailable):
    """This Nimbus does not hold the leader lock; ``leader`` is the leader's host:port if known."""

    def __init__(self, message: str, leader: str | None = None):
        self.leader = leader
        super().__init__(message, leader)


#: Trailing-metadata key of a NotALeader refusal carrying the leader's host:port.
LEADER_METADATA = "squall-leader"

#: gRPC status code name -> the class the client raises for it.
BY_CODE: dict[str, type[NimbusError]] = {
    cls.grpc_code: cls for cls in (TopologyNotFound, TopologyAlreadyExists, InvalidRequest,
                                   PackageTooLarge, IllegalState, NimbusUnavailable)
}
