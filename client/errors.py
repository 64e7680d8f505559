"""Squall's exception hierarchy, shared by every daemon and the client.

One root (:class:`SquallError`) with a few meaningful subclasses carrying typed
attributes, so each boundary (CLI, gRPC servicer, worker) can translate them
into a message a person can act on instead of a traceback.
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
