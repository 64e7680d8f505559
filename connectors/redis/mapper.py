"""What a Redis bolt reads or writes for a tuple: storm-redis's data types and mappers.

A mapper names the Redis data type and, for the types that live inside one Redis key (a
hash, a sorted set, a geo set, and a set for the filter), that key (Storm's
``additionalKey``); it takes the key (a hash's field, a sorted set's member) and, to
store, the value from each tuple. The field-based mappers here cover the usual case, one
field for the key and one for the value; subclass :class:`RedisLookupMapper`,
:class:`RedisStoreMapper` or :class:`RedisFilterMapper` for anything else.

A mapper that cannot map a tuple raises :class:`MappingError`: the bolt reports it with the
tuple's key and fails the tuple (its spout replays it, or drops it at its own limit).
"""

from __future__ import annotations

import enum
from typing import Any, Sequence

from ...client.tuple import Tuple


class RedisDataType(enum.Enum):
    """storm-redis's ``RedisDataTypeDescription.RedisDataType``."""

    STRING = "string"
    HASH = "hash"
    LIST = "list"
    SET = "set"
    SORTED_SET = "sorted_set"
    HYPER_LOG_LOG = "hyper_log_log"
    GEO = "geo"


#: The types whose entries live inside one Redis key, named by ``additional_key``.
NEEDS_ADDITIONAL_KEY = frozenset((RedisDataType.HASH, RedisDataType.SORTED_SET,
                                  RedisDataType.GEO))


class MappingError(ValueError):
    """A tuple the mapper cannot turn into a Redis key or value."""


class RedisDataTypeDescription:
    """A data type and, for a hash, sorted set or geo set, the Redis key holding it."""

    def __init__(self, data_type: RedisDataType | str, additional_key: str | None = None):
        try:
            self.data_type = RedisDataType(data_type.value if isinstance(
                data_type, RedisDataType) else str(data_type).lower())
        except ValueError:
            raise ValueError(f"unknown Redis data type {data_type!r} (one of "
                             f"{', '.join(t.name for t in RedisDataType)})") from None
        if self.data_type in NEEDS_ADDITIONAL_KEY and not additional_key:
            raise ValueError(f"Redis data type {self.data_type.name} needs additional_key: the "
                             "Redis key of the hash, sorted set or geo set")
        self.additional_key = additional_key

    def __repr__(self) -> str:
        extra = f", {self.additional_key!r}" if self.additional_key else ""
        return f"RedisDataTypeDescription({self.data_type.name}{extra})"


def _field(tup: Tuple, name: str) -> Any:
    if not tup.contains(name):
        raise MappingError(f"the tuple has no field {name!r} (its fields: "
                           f"{', '.join(tup.fields) or 'none'})")
    return tup[name]


def as_text(value: Any, what: str) -> str | bytes:
    """A key or value as Redis takes it: str and bytes as they are, numbers as text."""
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise MappingError(f"{what} must be a str, bytes or number, not {type(value).__name__}")


class RedisLookupMapper:
    """Storm's ``RedisLookupMapper``: the key to read and the tuples to emit for the value."""

    def __init__(self, description: RedisDataTypeDescription):
        self.description = description

    def key(self, tup: Tuple) -> str | bytes:
        raise NotImplementedError

    def to_values(self, tup: Tuple, value: Any) -> list[list]:
        """The value lists to emit, anchored to ``tup`` (none: emit nothing)."""
        raise NotImplementedError

    def declare_output_fields(self, declarer: Any) -> None:
        raise NotImplementedError


class RedisStoreMapper:
    """Storm's ``RedisStoreMapper``: the key and the value to write."""

    def __init__(self, description: RedisDataTypeDescription):
        self.description = description

    def key(self, tup: Tuple) -> str | bytes:
        raise NotImplementedError

    def value(self, tup: Tuple) -> Any:
        """A str, bytes or number; a score for a sorted set; (longitude, latitude) for geo."""
        raise NotImplementedError


class RedisFilterMapper:
    """Storm's ``RedisFilterMapper``: the key whose presence lets the tuple through."""

    def __init__(self, description: RedisDataTypeDescription):
        self.description = description

    def key(self, tup: Tuple) -> str | bytes:
        raise NotImplementedError

    def declare_output_fields(self, declarer: Any) -> None:
        raise NotImplementedError


class FieldLookupMapper(RedisLookupMapper):
    """Looks up the key in ``key_field`` and emits ``[key, value]`` (``output_fields``);
    a missing key emits ``[key, None]``, as Storm's does, unless ``skip_missing``."""

    def __init__(self, data_type: RedisDataType | str, key_field: str,
                 output_fields: Sequence[str] = ("key", "value"), additional_key: str | None = None,
                 skip_missing: bool = False):
        super().__init__(RedisDataTypeDescription(data_type, additional_key))
        if len(output_fields) != 2:
            raise ValueError(f"output_fields names the key's and the value's fields, not "
                             f"{list(output_fields)}")
        self.key_field = key_field
        self.output_fields = list(output_fields)
        self.skip_missing = skip_missing

    def key(self, tup: Tuple) -> str | bytes:
        return as_text(_field(tup, self.key_field), f"key field {self.key_field!r}")

    def to_values(self, tup: Tuple, value: Any) -> list[list]:
        if value is None and self.skip_missing:
            return []
        return [[tup[self.key_field], value]]

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.output_fields)


class FieldStoreMapper(RedisStoreMapper):
    """Writes the value in ``value_field`` under the key in ``key_field`` (for geo, the value
    field holds ``(longitude, latitude)``)."""

    def __init__(self, data_type: RedisDataType | str, key_field: str, value_field: str,
                 additional_key: str | None = None):
        super().__init__(RedisDataTypeDescription(data_type, additional_key))
        self.key_field = key_field
        self.value_field = value_field

    def key(self, tup: Tuple) -> str | bytes:
        return as_text(_field(tup, self.key_field), f"key field {self.key_field!r}")

    def value(self, tup: Tuple) -> Any:
        return _field(tup, self.value_field)


class FieldFilterMapper(RedisFilterMapper):
    """Lets through the tuples whose ``key_field`` is present; they go on unchanged, with
    their fields (``output_fields``, the input's)."""

    def __init__(self, data_type: RedisDataType | str, key_field: str,
                 output_fields: Sequence[str], additional_key: str | None = None):
        super().__init__(RedisDataTypeDescription(data_type, additional_key))
        self.key_field = key_field
        self.output_fields = list(output_fields)

    def key(self, tup: Tuple) -> str | bytes:
        return as_text(_field(tup, self.key_field), f"key field {self.key_field!r}")

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.output_fields)
