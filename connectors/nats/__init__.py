"""NATS JetStream connectors (no Storm module follows NATS; these follow storm-kafka-client's
spout and bolt): ``JetStreamSpout``, a reliable spout on a durable pull consumer per
topology, and ``JetStreamBolt``, which publishes each tuple and acks it on JetStream's
publish acknowledgement.

Needs the ``nats`` extra (``pip install 'squall[nats]'``). Both read their servers from the
topology conf's ``nats.servers`` key unless a :class:`NatsConfig` says otherwise.
"""

from ...client import extras

extras.require("nats", "squall.connectors.nats")

from .bolt import JetStreamBolt  # noqa: E402
from .config import NatsConfig, NatsUnavailable, durable_name  # noqa: E402
from .message import Message, MessageTranslator, PublishMapper  # noqa: E402
from .spout import JetStreamSpout  # noqa: E402

__all__ = ["JetStreamBolt", "JetStreamSpout", "Message", "MessageTranslator", "NatsConfig",
           "NatsUnavailable", "PublishMapper", "durable_name"]
