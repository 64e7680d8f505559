"""Arrow schema of a stream from its declared fields, and rows to a ``pyarrow.Table``.

The Spark bridge builds each batch's DataFrame from Arrow (``spark.createDataFrame`` of
an Arrow-backed pandas frame, or ``_create_from_arrow``), never from Row objects, so the
types are fixed here, once, from the stream's declared field names plus, per field,
either a type the user declared or one inferred from sample rows.

Type vocabulary (Spark SQL names, so a schema reads the same on both sides; all fields
and elements are nullable):

=====================  ================================  ====================
declared               python type accepted              Arrow type
=====================  ================================  ====================
``"long"`` / ``int``    int (not bool)                    int64
``"double"`` / ``float``  float or int (not bool)         float64
``"string"`` / ``str``  str                               string
``"boolean"`` / ``bool``  bool                            bool
``"binary"`` / ``bytes``  bytes, bytearray                binary
``"array<T>"``          list or tuple of T                list<T>
``"map<K,V>"``          dict of K to V (K not None)       map<K, V>
a ``pyarrow.DataType``  whatever pyarrow accepts          as given
=====================  ================================  ====================

``list[T]`` and ``dict[K, V]`` work too. Inference maps int, float, str, bool (checked
before int: ``bool`` subclasses ``int``), bytes, list and dict as above; an int/float mix
widens to double; None only makes a value null, and a field (or element) seen only as
None is typed ``null`` (Spark's NullType) — declare its type to pin it. A dict infers as
``map<string, V>``, not a struct: stream values are usually keyed data (counts per word,
attributes) whose keys vary from tuple to tuple, and a struct would need every key known
up front and a fresh schema per new key; Spark reads a map as ``col["key"]`` all the same.

Values are checked strictly before conversion because pyarrow is lenient where a silent
change would corrupt data (it truncates 1.5 into an int64 column and encodes str into
binary): the check is a per-value ``type()`` test; the conversion is one ``pa.array`` per
column.
"""

from __future__ import annotations

import threading
import typing
from operator import itemgetter
from typing import Any, Mapping, Sequence

import pyarrow as pa

from ..errors import SquallError


class SchemaError(SquallError):
    """A field's type cannot be declared, inferred or filled; ``field`` names it."""

    def __init__(self, field: str | None, reason: str):
        self.field = field
        self.reason = reason
        super().__init__(f"field {field!r}: {reason}" if field is not None else reason)


_LONG, _DOUBLE, _STRING, _BOOL, _BINARY, _NULL = (
    pa.int64(), pa.float64(), pa.string(), pa.bool_(), pa.binary(), pa.null())

_NAMED: dict[str, pa.DataType] = {
    "long": _LONG, "double": _DOUBLE, "string": _STRING, "boolean": _BOOL, "binary": _BINARY,
}
_PYTHON: dict[type, pa.DataType] = {
    int: _LONG, float: _DOUBLE, str: _STRING, bool: _BOOL, bytes: _BINARY,
}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


# -- declared types ----------------------------------------------------------------------

def parse_type(declared: Any, field: str | None = None) -> pa.DataType:
    """The Arrow type of a declared type (see the module's table)."""
    if isinstance(declared, pa.DataType):
        return declared
    if isinstance(declared, type) and declared in _PYTHON:
        return _PYTHON[declared]
    origin, args = typing.get_origin(declared), typing.get_args(declared)
    if origin is list and len(args) == 1:
        return pa.list_(parse_type(args[0], field))
    if origin is dict and len(args) == 2:
        return _map(parse_type(args[0], field), parse_type(args[1], field), field)
    if isinstance(declared, str):
        return _parse_name(declared.strip(), declared, field)
    raise SchemaError(field, f"cannot use {declared!r} as a type; use one of "
                             f"{sorted(_NAMED)}, array<T>, map<K,V>, int/float/str/bool/bytes, "
                             f"list[T], dict[K, V] or a pyarrow.DataType")


def _parse_name(s: str, whole: str, field: str | None) -> pa.DataType:
    low = s.lower()
    if low in _NAMED:
        return _NAMED[low]
    if low.startswith("array<") and low.endswith(">"):
        return pa.list_(_parse_name(s[6:-1].strip(), whole, field))
    if low.startswith("map<") and low.endswith(">"):
        inner = s[4:-1]
        depth = 0
        for i, c in enumerate(inner):  # the top-level comma splits key from value
            depth += (c == "<") - (c == ">")
            if c == "," and depth == 0:
                return _map(_parse_name(inner[:i].strip(), whole, field),
                            _parse_name(inner[i + 1:].strip(), whole, field), field)
    raise SchemaError(field, f"unknown type {whole!r} (known: {', '.join(sorted(_NAMED))}, "
                             f"array<T>, map<K,V>)")


def _map(key: pa.DataType, value: pa.DataType, field: str | None) -> pa.DataType:
    if pa.types.is_nested(key) or key == _NULL:
        raise SchemaError(field, f"a map key must be a primitive type, got {key}")
    return pa.map_(key, value)


# -- inference ---------------------------------------------------------------------------

def infer_type(values: Sequence[Any], field: str | None = None) -> pa.DataType:
    """The narrowest type that holds every value (``null`` when all are None)."""
    t = _NULL
    for v in values:
        t = _merge(t, _infer(v, field, field), field, v)
    return t


def _infer(v: Any, field: str | None, path: str | None) -> pa.DataType:
    if v is None:
        return _NULL
    if isinstance(v, bool):  # before int: bool subclasses int
        return _BOOL
    if isinstance(v, int):
        if not _INT64_MIN <= v <= _INT64_MAX:
            raise SchemaError(field, f"int {v} at {path} does not fit in a long (int64)")
        return _LONG
    if isinstance(v, float):
        return _DOUBLE
    if isinstance(v, str):
        return _STRING
    if isinstance(v, (bytes, bytearray)):
        return _BINARY
    if isinstance(v, (list, tuple)):
        elem = _NULL
        for x in v:
            elem = _merge(elem, _infer(x, field, f"{path}[]"), field, x)
        return pa.list_(elem)
    if isinstance(v, dict):
        val = _NULL
        for k, x in v.items():
            if not isinstance(k, str):
                raise SchemaError(field, f"a dict infers as map<string, V>, but {path} has a "
                                         f"{type(k).__name__} key {k!r}; declare its type")
            val = _merge(val, _infer(x, field, f"{path}{{}}"), field, x)
        return pa.map_(_STRING, val)
    raise SchemaError(field, f"cannot infer a type for a {type(v).__name__} value at {path} "
                             f"({v!r:.60}); supported: int, float, str, bool, bytes, list, dict")


def _merge(a: pa.DataType, b: pa.DataType, field: str | None, v: Any) -> pa.DataType:
    if a == b or b == _NULL:
        return a
    if a == _NULL:
        return b
    if {a, b} == {_LONG, _DOUBLE}:  # ints and floats: widen, as Spark does
        return _DOUBLE
    if pa.types.is_list(a) and pa.types.is_list(b):
        return pa.list_(_merge(a.value_type, b.value_type, field, v))
    if pa.types.is_map(a) and pa.types.is_map(b):
        return pa.map_(_STRING, _merge(a.item_type, b.item_type, field, v))
    raise SchemaError(field, f"mixed types {_spark_name(a)} and {_spark_name(b)} (value "
                             f"{v!r:.60} of type {type(v).__name__}); declare its type")


def _spark_name(t: pa.DataType) -> str:
    for name, known in _NAMED.items():
        if t == known:
            return name
    if pa.types.is_list(t):
        return f"array<{_spark_name(t.value_type)}>"
    if pa.types.is_map(t):
        return f"map<{_spark_name(t.key_type)},{_spark_name(t.item_type)}>"
    return str(t)


# -- schema ------------------------------------------------------------------------------

def arrow_schema(fields: Sequence[str], types: Mapping[str, Any] | None = None,
                 sample_rows: Sequence[Sequence[Any]] | None = None) -> pa.Schema:
    """The schema of a stream declaring ``fields``: declared ``types`` first, else inferred.

    Example::

        arrow_schema(["word", "count"], types={"word": "string"}, sample_rows=[("a", 1)])
        # word: string, count: int64
    """
    if len(set(fields)) != len(fields):
        dup = next(f for f in fields if list(fields).count(f) > 1)
        raise SchemaError(dup, "declared twice")
    types = dict(types or {})
    unknown = [name for name in types if name not in fields]
    if unknown:
        raise SchemaError(unknown[0], f"has a declared type but is not a field of the stream "
                                      f"({', '.join(fields)})")
    columns = _columns(sample_rows or (), fields)
    out = []
    for i, name in enumerate(fields):
        t = parse_type(types[name], name) if name in types else infer_type(columns[i], name)
        out.append(pa.field(name, t, nullable=True))
    return pa.schema(out)


def to_arrow_table(rows: Sequence[Sequence[Any]], schema: pa.Schema,
                   columns: list[Sequence[Any]] | None = None) -> pa.Table:
    """The rows as a table of ``schema``, built column by column (one ``pa.array`` each);
    ``columns``: the rows already transposed."""
    if columns is None:
        columns = _columns(rows, schema.names)
    arrays = []
    for name, col, f in zip(schema.names, columns, schema):
        _check_column(col, f.type, name)
        try:
            arrays.append(pa.array(col, type=f.type))
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
            raise SchemaError(name, f"cannot convert to {_spark_name(f.type)}: {e}") from e
    return pa.Table.from_arrays(arrays, schema=schema)


def _columns(rows: Sequence[Sequence[Any]], fields: Sequence[str]) -> list[Sequence[Any]]:
    """Transpose rows into one list per field, checking each row's width (both at C speed:
    a batch is 100k rows; ``zip(*rows)`` would pass them as 100k arguments)."""
    n = len(fields)
    if any(w != n for w in set(map(len, rows))):
        for i, row in enumerate(rows):
            if len(row) != n:
                raise SchemaError(None, f"row {i} has {len(row)} values, the stream declares "
                                        f"{n} fields ({', '.join(fields)})")
    return [list(map(itemgetter(i), rows)) for i in range(n)]


#: Scalar types whose columns are checked by the set of their values' types (C speed);
#: bool is its own type, so a bool never passes as a long.
_EXACT: dict[pa.DataType, frozenset] = {
    _LONG: frozenset({int}), _DOUBLE: frozenset({float, int}), _STRING: frozenset({str}),
    _BOOL: frozenset({bool}), _BINARY: frozenset({bytes, bytearray}),
}
_NONE = type(None)


def _check_column(col: Sequence[Any], t: pa.DataType, name: str) -> None:
    exact = _EXACT.get(t)
    if exact is not None:
        kinds = set(map(type, col))
        kinds.discard(_NONE)
        if kinds <= exact:
            if t != _LONG or not kinds:
                return
            values = [v for v in col if v is not None]
            if _INT64_MIN <= min(values) and max(values) <= _INT64_MAX:
                return
    for i, v in enumerate(col):
        bad = _misfit(v, t, f"row {i}")
        if bad is not None:
            raise SchemaError(name, bad)


def _misfit(v: Any, t: pa.DataType, path: str) -> str | None:
    """Why ``v`` does not fit ``t`` exactly (None if it does, or ``t`` is not ours to check)."""
    if v is None:
        return None
    cls = type(v)
    if t == _LONG:
        if cls is int or (isinstance(v, int) and not isinstance(v, bool)):
            if _INT64_MIN <= v <= _INT64_MAX:
                return None
            return f"{path}: int {v} does not fit in a long (int64)"
    elif t == _DOUBLE:
        if isinstance(v, (float, int)) and not isinstance(v, bool):
            return None
    elif t == _STRING:
        if isinstance(v, str):
            return None
    elif t == _BOOL:
        if isinstance(v, bool):
            return None
    elif t == _BINARY:
        if isinstance(v, (bytes, bytearray)):
            return None
    elif t == _NULL:
        pass
    elif pa.types.is_list(t):
        if isinstance(v, (list, tuple)):
            for x in v:
                bad = _misfit(x, t.value_type, f"{path}[]")
                if bad is not None:
                    return bad
            return None
    elif pa.types.is_map(t):
        if isinstance(v, dict):
            for k, x in v.items():
                bad = (f"{path}: None map key" if k is None
                       else _misfit(k, t.key_type, f"{path} key")
                       or _misfit(x, t.item_type, f"{path}{{}}"))
                if bad is not None:
                    return bad
            return None
    else:
        return None  # a pyarrow type outside the vocabulary: pyarrow's own checks apply
    return f"{path}: expected {_spark_name(t)}, got {cls.__name__} {v!r:.60}"


# -- a bridge's schema, fixed as it learns -----------------------------------------------

def _has_null(t: pa.DataType) -> bool:
    """``t`` is (or holds) ``null``: inferred from None alone, so not known yet."""
    if t == _NULL:
        return True
    if pa.types.is_list(t):
        return _has_null(t.value_type)
    if pa.types.is_map(t):
        return _has_null(t.item_type)
    return False


class StreamSchema:
    """The schema a bridge gives every batch of one stream.

    Declared types are fixed up front. An undeclared field is fixed to the type inferred
    from the first batch that holds a value for it (until then it is ``null`` in the
    batches, which Spark reads as NullType), so batches of one stream share one schema:
    a sink appending to one table never meets a column changing type. Rows that do not
    fit are left out of the table with the reason, instead of failing the whole batch.
    Thread-safe (the bridge converts batches on its runner threads).

    Example::

        s = StreamSchema(["word", "n"], types={"n": "long"})
        table, rejected = s.table([("a", 1), (2, 3)])
        # table holds ("a", 1); rejected == [(1, "field 'word': row 1: expected string, got int 2")]
    """

    def __init__(self, fields: Sequence[str], types: Mapping[str, Any] | None = None):
        arrow_schema(fields, types)  # refuses duplicate fields, unknown names, bad types
        self.fields = list(fields)
        self.declared = {name: parse_type(t, name) for name, t in (types or {}).items()}
        #: Field -> its fixed type (declared, or learned from a batch).
        self.fixed: dict[str, pa.DataType] = dict(self.declared)
        self._lock = threading.Lock()

    def schema(self, rows: Sequence[Sequence[Any]],
               columns: list[Sequence[Any]] | None = None) -> pa.Schema:
        """The schema for a batch of ``rows``, fixing fields this batch is the first to type."""
        if columns is None:
            columns = _columns(rows, self.fields)
        out = []
        with self._lock:
            for name, col in zip(self.fields, columns):
                t = self.fixed.get(name)
                if t is None:
                    t = self._learn(name, col)
                out.append(pa.field(name, t, nullable=True))
        return pa.schema(out)

    def _learn(self, name: str, col: Sequence[Any]) -> pa.DataType:
        try:
            t = infer_type(col, name)
        except SchemaError:  # mixed types: the first value that infers decides
            t = _NULL
            for v in col:
                try:
                    t = _infer(v, name, name)
                except SchemaError:
                    continue
                if not _has_null(t):
                    break
        if not _has_null(t):
            self.fixed[name] = t
        return t

    def table(self, rows: Sequence[Sequence[Any]]) -> tuple[pa.Table, list[tuple[int, str]]]:
        """The rows that fit as one table, and ``(position, reason)`` of those that do not."""
        columns = _columns(rows, self.fields)
        schema = self.schema(rows, columns)
        try:
            return to_arrow_table(rows, schema, columns), []
        except SchemaError as first:
            rejected: list[tuple[int, str]] = []
            for i, row in enumerate(rows):
                for name, v, f in zip(self.fields, row, schema):
                    why = _misfit(v, f.type, f"row {i}")
                    if why is not None:
                        if _has_null(f.type):
                            try:
                                _infer(v, name, f"row {i}")
                            except SchemaError as e:
                                why = e.reason
                        hint = "" if name in self.declared else \
                            " (its type was fixed by the first batch with a value; declare it)"
                        rejected.append((i, f"field {name!r}: {why}{hint}"))
                        break
            if not rejected:
                raise first  # not a value misfit (a pyarrow type outside the vocabulary)
            bad = {i for i, _ in rejected}
            return to_arrow_table([r for i, r in enumerate(rows) if i not in bad], schema), rejected
