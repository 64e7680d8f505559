"""Records to tuples: Storm's ``RecordTranslator`` and its three stock kinds.

A translator turns one Kafka record into the values of a tuple and says which stream
it goes on; it also declares the fields of every stream it can emit on.

- :class:`DefaultRecordTranslator`: ``(topic, partition, offset, key, value)`` on the
  default stream (Storm's ``DefaultRecordTranslator``);
- :class:`SimpleRecordTranslator`: a function of the record and the fields it fills;
- :class:`ByTopicRecordTranslator`: a translator (and so a stream) per topic.

A translator may return None or an empty list: the record is then acked without a tuple
(unless ``emit_null_tuples``).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

from ...client.errors import SquallError
from ...client.tuple import DEFAULT_STREAM


class KafkaConfigError(SquallError, ValueError):
    """A Kafka spout's, bolt's or translator's setting that cannot work, found when the
    topology is built (before anything is submitted)."""


class KafkaRecord:
    """One record as a translator sees it (Kafka's ``ConsumerRecord``): ``key`` and
    ``value`` after the spout's deserializers."""

    __slots__ = ("topic", "partition", "offset", "key", "value", "timestamp", "headers")

    def __init__(self, topic: str, partition: int, offset: int, key: Any, value: Any,
                 timestamp: int | None = None, headers: Sequence[tuple[str, bytes]] | None = None):
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.key = key
        self.value = value
        #: Milliseconds since the epoch (None when the broker gave none).
        self.timestamp = timestamp
        self.headers = headers

    def __repr__(self) -> str:
        return (f"KafkaRecord({self.topic}/{self.partition}@{self.offset}, key={self.key!r}, "
                f"value={self.value!r})")


class KafkaTuple(list):
    """Tuple values with the stream they go on (Storm's ``KafkaTuple.routedTo``)."""

    __slots__ = ("stream",)

    def __init__(self, values: Sequence[Any] = (), stream: str = DEFAULT_STREAM):
        super().__init__(values)
        self.stream = stream

    def routed_to(self, stream: str) -> "KafkaTuple":
        self.stream = stream
        return self


class RecordTranslator:
    """Turns records into tuples. Subclasses define :meth:`translate` and :meth:`streams`."""

    def translate(self, record: KafkaRecord) -> Sequence[Any] | None:
        raise NotImplementedError

    def streams(self) -> Mapping[str, Sequence[str]]:
        """Stream -> field names of every stream :meth:`translate` can route to."""
        raise NotImplementedError

    def declare(self, declarer: Any) -> None:
        for stream, fields in self.streams().items():
            declarer.declare_stream(stream, list(fields))


class DefaultRecordTranslator(RecordTranslator):
    """``(topic, partition, offset, key, value)`` on the default stream."""

    FIELDS = ("topic", "partition", "offset", "key", "value")

    def translate(self, record: KafkaRecord) -> list:
        return [record.topic, record.partition, record.offset, record.key, record.value]

    def streams(self) -> Mapping[str, Sequence[str]]:
        return {DEFAULT_STREAM: self.FIELDS}


class SimpleRecordTranslator(RecordTranslator):
    """``func(record)`` gives the values of ``fields`` on ``stream``.

    Example::

        SimpleRecordTranslator(lambda r: [r.value.decode()], ["sentence"])
    """

    def __init__(self, func: Callable[[KafkaRecord], Sequence[Any] | None],
                 fields: Sequence[str], stream: str = DEFAULT_STREAM):
        if not callable(func):
            raise KafkaConfigError("SimpleRecordTranslator needs a function of the record")
        if isinstance(fields, str):
            fields = [fields]
        self.func = func
        self.fields = tuple(fields)
        self.stream = stream

    def translate(self, record: KafkaRecord) -> Sequence[Any] | None:
        values = self.func(record)
        if values is None or isinstance(values, KafkaTuple) or self.stream == DEFAULT_STREAM:
            return values
        return KafkaTuple(values, self.stream)

    def streams(self) -> Mapping[str, Sequence[str]]:
        return {self.stream: self.fields}


class ByTopicRecordTranslator(RecordTranslator):
    """A translator per topic, and one for the rest (Storm's ``ByTopicRecordTranslator``).

    Example::

        t = ByTopicRecordTranslator(default=DefaultRecordTranslator())
        t.for_topic("clicks", lambda r: [r.key, r.value], ["user", "page"], stream="clicks")
    """

    def __init__(self, default: RecordTranslator | None = None):
        self.default = default
        self.by_topic: dict[str, RecordTranslator] = {}

    def for_topic(self, topic: str, translator: RecordTranslator | Callable[..., Any],
                  fields: Sequence[str] | None = None,
                  stream: str | None = None) -> "ByTopicRecordTranslator":
        if topic in self.by_topic:
            raise KafkaConfigError(f"ByTopicRecordTranslator: topic {topic!r} has a translator "
                              "already")
        if not isinstance(translator, RecordTranslator):
            if fields is None:
                raise KafkaConfigError(f"ByTopicRecordTranslator.for_topic({topic!r}): a function "
                                  "needs fields=[...]")
            translator = SimpleRecordTranslator(translator, fields, stream or topic)
        mine = dict(translator.streams())
        for other in self._all():
            for stream_id, f in other.streams().items():
                if stream_id in mine and tuple(mine[stream_id]) != tuple(f):
                    raise KafkaConfigError(f"ByTopicRecordTranslator: stream {stream_id!r} gets "
                                      f"fields {list(mine[stream_id])} for topic {topic!r} but "
                                      f"{list(f)} elsewhere; give each its own stream")
        self.by_topic[topic] = translator
        return self

    def _all(self) -> list[RecordTranslator]:
        return list(self.by_topic.values()) + ([self.default] if self.default else [])

    def translate(self, record: KafkaRecord) -> Sequence[Any] | None:
        t = self.by_topic.get(record.topic, self.default)
        if t is None:
            raise ValueError(f"no translator for topic {record.topic!r} and no default")
        values = t.translate(record)
        if values is None or isinstance(values, KafkaTuple):
            return values
        streams = t.streams()
        if len(streams) == 1:
            (stream,) = streams
            if stream != DEFAULT_STREAM:
                return KafkaTuple(values, stream)
        return values

    def streams(self) -> Mapping[str, Sequence[str]]:
        out: dict[str, Sequence[str]] = {}
        for t in self._all():
            out.update(t.streams())
        return out


def string_deserializer(data: bytes | None) -> str | None:
    """UTF-8 text (Kafka's StringDeserializer)."""
    return None if data is None else data.decode("utf-8")


def json_deserializer(data: bytes | None) -> Any:
    """A JSON document."""
    import json
    return None if data is None else json.loads(data)
