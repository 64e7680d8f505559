"""Squall's exception hierarchy, shared by every daemon and the client.

One root (:class:`SquallError`) with a few meaningful subclasses carrying typed
attributes, so each boundary (CLI, gRPC servicer, worker) can translate them
into a message a person can act on instead of a traceback: topology and config
errors, cluster-state (ZooKeeper) errors, and the errors of Nimbus requests,
each of which names the gRPC status code it travels as (``grpc_code``, a
``grpc.StatusCode`` member name, so this module does not import grpc): the
servicer maps them in one place and the client maps codes back with
:data:`BY_CODE`. The lifecycle's ``InvalidTransition`` (FAILED_PRECONDITION) and
:class:`InvalidTopology` (INVALID_ARGUMENT) travel the same way.
"""

from __future__ import annotations


class SquallError(Exception):
    """Root of every error Squall raises on purpose."""


class InvalidTopology(SquallError):
    """The topology cannot run; the message names the component, stream and field.

    Mirrors Storm's ``InvalidTopologyException``.
    """

    def __init__(self, reason: str, component: str | None = None,
                 stream: str | None = None, field: str | None = None):
        self.reason = reason
        self.component = component
        self.stream = stream
        self.field = field
        super().__init__(reason)


class ConfigError(SquallError):
    """A configuration key has a value of the wrong type or an unusable value."""

    def __init__(self, key: str, reason: str):
        self.key = key
        self.reason = reason
        super().__init__(f"config {key!r}: {reason}")


class FailedException(SquallError):
    """Raised from a :class:`~squall.client.BasicBolt` to fail the input tuple.

    The tuple tree is failed, so the spout's ``fail(msg_id)`` runs and a reliable
    spout replays the message. Mirrors Storm's ``FailedException``.
    """


class ReportedFailedException(FailedException):
    """Like :class:`FailedException`, and the error is also reported to the topology."""


class SerializationError(SquallError):
    """A tuple value cannot be serialized to cross a worker boundary."""


# --- cluster state (client/cluster_state.py) ------------------------------------------
#: ``set_assignment(..., expected_version=NO_NODE)``: the node must not exist yet.
NO_NODE = -1
#: What to check when ZooKeeper cannot be reached.
ZOOKEEPER_START_HINT = ("is it running? (start one with `python -m squall.deploy.zookeeper`, "
                        "or set storm.zookeeper.servers / storm.zookeeper.port)")


class ClusterStateError(SquallError):
    """A cluster-state operation failed; ``op`` and ``path`` say which."""

    def __init__(self, message: str, op: str | None = None, path: str | None = None):
        self.op = op
        self.path = path
        super().__init__(message)


class ZooKeeperUnavailable(ClusterStateError):
    """ZooKeeper cannot be reached, or cannot be started here; ``address`` is what was tried."""

    def __init__(self, address: str | None, message: str, op: str | None = None,
                 path: str | None = None):
        self.address = address
        super().__init__(message, op, path)

    @classmethod
    def unreachable(cls, address: str, reason: str, op: str | None = None,
                    path: str | None = None) -> "ZooKeeperUnavailable":
        return cls(address, f"cannot reach ZooKeeper at {address}: {reason}; "
                            f"{ZOOKEEPER_START_HINT}", op, path)


class NotFound(ClusterStateError):
    """The node an operation needs does not exist."""


class NotAllowed(ClusterStateError):
    """The node's ACL does not let this client's identity do that (a topology's workers
    reach only their own transactional state)."""


class NodeTooLarge(ClusterStateError):
    """A write larger than a node may hold; refused before it is sent. Permanent for that
    data: ZooKeeper answers an oversized request by dropping the whole session."""

    def __init__(self, path: str, size: int, limit: int, op: str = "write"):
        self.size = size
        self.limit = limit
        super().__init__(f"{op} {path}: {size:,} bytes is more than a node holds "
                         f"({limit:,}); not written", op, path)


class VersionConflict(ClusterStateError):
    """A versioned write lost a race: the node's version is not ``expected`` any more."""

    def __init__(self, path: str, expected: int | None, op: str = "write"):
        self.expected = expected
        what = ("the node not to exist" if expected == NO_NODE else
                "another version" if expected is None else f"the node at version {expected}")
        super().__init__(f"{op} {path}: expected {what}; someone else changed it", op, path)


# --- Nimbus requests: raised by Nimbus, travel as gRPC status codes, raised again by the client ---
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


class LimitExceeded(NimbusError):
    """A bound of the cluster is reached: inbox bytes or uploads, topologies, workers,
    executors (the message names the key that sets it)."""

    grpc_code = "RESOURCE_EXHAUSTED"


class PackageTooLarge(LimitExceeded):
    """The package is over ``nimbus.package.max.bytes``."""

    def __init__(self, message: str, limit: int | None = None):
        #: The configured limit in bytes (server side only).
        self.limit = limit
        super().__init__(message)


class Unauthenticated(NimbusError):
    """The caller presented no valid credentials (no client certificate, or one Nimbus's CA
    did not sign)."""

    grpc_code = "UNAUTHENTICATED"


class PermissionDenied(NimbusError):
    """The authenticated principal may not do this (Storm's AuthorizationException)."""

    grpc_code = "PERMISSION_DENIED"


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
                                   LimitExceeded, Unauthenticated, PermissionDenied,
                                   IllegalState, NimbusUnavailable)
}
