"""What a JetStream message becomes in a topology and what a tuple becomes in JetStream:
the spout's :class:`MessageTranslator` and the bolt's :class:`PublishMapper`, the NATS
counterparts of storm-kafka-client's ``RecordTranslator`` and
``FieldNameBasedTupleToKafkaMapper``. Pure: neither sees a connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

#: The values a :class:`MessageTranslator` can give, by field name.
MESSAGE_FIELDS = ("subject", "data", "sequence", "headers", "delivered", "stream")


@dataclass(frozen=True)
class Message:
    """One JetStream message as the spout's translator sees it (not the client's object:
    a translator never acks or talks to the server)."""

    subject: str
    data: bytes
    #: Its sequence in the stream: the spout's message id.
    sequence: int
    stream: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    #: How many times the consumer has delivered it (1 the first time).
    delivered: int = 1


class MessageTranslator:
    """What a message becomes: ``[subject, data, sequence]`` (data decoded as UTF-8), or,
    given ``fields``, those of :data:`MESSAGE_FIELDS` in that order. ``decode=None`` keeps
    the data as bytes; data that does not decode raises, and the spout terminates that
    message and reports it (the same bytes would fail the same way on every redelivery).

    Example::

        JetStreamSpout("orders", translator=MessageTranslator(["subject", "data"]))
    """

    def __init__(self, fields: Sequence[str] | None = None, decode: str | None = "utf-8"):
        self.fields = list(fields) if fields else ["subject", "data", "sequence"]
        unknown = [f for f in self.fields if f not in MESSAGE_FIELDS]
        if unknown:
            raise ValueError(f"MessageTranslator: unknown field(s) {unknown}; a message has "
                             f"{list(MESSAGE_FIELDS)}")
        self.decode = decode

    def __call__(self, msg: Message) -> list:
        out = []
        for name in self.fields:
            value = getattr(msg, name)
            if name == "data" and self.decode is not None:
                value = value.decode(self.decode)
            elif name == "headers":
                value = dict(value)
            out.append(value)
        return out

    def output_fields(self) -> list[str]:
        return list(self.fields)


class MappingError(ValueError):
    """A tuple that does not map to a subject and payload."""


def _field_or_fn(spec: Any, what: str) -> Callable[[Any], Any] | None:
    if spec is None:
        return None
    if callable(spec):
        return spec
    if isinstance(spec, str) and spec:
        return lambda tup: tup[spec]
    raise ValueError(f"PublishMapper: {what} is a field name or a function of the tuple, "
                     f"not {spec!r}")


def as_payload(value: Any) -> bytes:
    """A payload's bytes: bytes as they are, str as UTF-8, numbers as their text."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value).encode()
    raise MappingError(f"the payload must be bytes, str or a number, not "
                       f"{type(value).__name__}")


class PublishMapper:
    """Where a tuple goes and what it carries: ``subject`` and ``payload`` are field names
    of the tuple or functions of it; ``msg_id`` (optional, the same) gives JetStream's
    ``Nats-Msg-Id`` header, so a tuple replayed within the stream's duplicate window is
    stored once; ``fixed_subject`` publishes everything to one subject.

    Example::

        PublishMapper(subject=lambda t: f"counts.{t['word']}", payload="count", msg_id="key")
    """

    def __init__(self, subject: Any = None, payload: Any = "message", msg_id: Any = None,
                 fixed_subject: str | None = None):
        if (subject is None) == (fixed_subject is None):
            raise ValueError("PublishMapper needs a subject field/function or a fixed_subject, "
                             "one of the two")
        if fixed_subject is not None and not _valid_subject(fixed_subject):
            raise ValueError(f"fixed_subject {fixed_subject!r} is not a subject to publish to")
        self.fixed_subject = fixed_subject
        self._subject = _field_or_fn(subject, "subject")
        self._payload = _field_or_fn(payload, "payload")
        self._msg_id = _field_or_fn(msg_id, "msg_id")

    def subject(self, tup: Any) -> str:
        if self.fixed_subject is not None:
            return self.fixed_subject
        value = self._subject(tup)
        if not isinstance(value, str) or not _valid_subject(value):
            raise MappingError(f"the subject must be a subject to publish to (tokens split by "
                               f"'.', no spaces or wildcards), not {value!r}")
        return value

    def payload(self, tup: Any) -> bytes:
        return as_payload(self._payload(tup))

    def headers(self, tup: Any) -> dict[str, str] | None:
        if self._msg_id is None:
            return None
        value = self._msg_id(tup)
        if value is None or value == "":
            raise MappingError("the message id (Nats-Msg-Id) is empty")
        return {"Nats-Msg-Id": str(value)}


def _valid_subject(s: str) -> bool:
    tokens = s.split(".")
    return bool(s) and all(t and t not in ("*", ">") and not any(c in t for c in " \t\r\n")
                           for t in tokens)
