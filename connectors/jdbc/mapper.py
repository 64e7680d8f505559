"""storm-jdbc's mappers: which columns a tuple fills, which values a row gives back.

* :class:`SimpleJdbcMapper` (Storm's ``SimpleJdbcMapper``): a tuple's fields named as the
  columns, in the columns' order. Give the columns, or only the table: the bolt reads its
  columns from the database when it is prepared (as Storm's reads the table's metadata),
  leaving out those the database fills itself (a default, an identity, a generated value).
* :class:`SimpleJdbcLookupMapper` (Storm's ``SimpleJdbcLookupMapper``): the query's
  parameters are the tuple's fields named by ``query_columns``; each row of the result gives
  one output tuple whose fields come from the input tuple when it has them, else from the
  row's column of that name.

Storm's JDBC placeholders are ``?``; :func:`to_psycopg` turns a query written for Storm
into psycopg's ``%s`` form (question marks in quoted text and ``%`` signs stay as they are).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from ...client.tuple import Tuple


class MappingError(ValueError):
    """A tuple does not map to the statement's columns or parameters; says which and why."""


@dataclass(frozen=True)
class Column:
    """A column by name (Storm's ``Column(name, sqlType)``; the type is the database's: psycopg
    sends Python values and PostgreSQL casts them, so it is informative only)."""

    name: str
    sql_type: str | None = None


def _columns(columns: Iterable[str | Column]) -> list[Column]:
    out = [c if isinstance(c, Column) else Column(str(c)) for c in columns]
    if not out:
        raise ValueError("a JDBC mapper needs at least one column")
    names = [c.name for c in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"a JDBC mapper names column(s) {', '.join(dupes)} twice")
    return out


def field_of(tup: Tuple, name: str) -> Any:
    """The tuple's value of field ``name``, or a MappingError naming the fields it has."""
    i = tup.fields.index.get(name)
    if i is None:
        raise MappingError(f"the tuple from {tup.component}:{tup.stream} has no field {name!r} "
                           f"(its fields: {', '.join(tup.fields.names) or 'none'})")
    return tup.values[i]


class JdbcMapper:
    """What an insert takes from a tuple: :meth:`columns` and :meth:`values`. Subclass it for
    a computed row (the bolt calls :meth:`values` per tuple, on the bolt's own thread)."""

    def columns(self) -> list[Column]:
        raise NotImplementedError

    def values(self, tup: Tuple) -> list:
        raise NotImplementedError

    def resolve(self, table_columns: Callable[[], list[Column]]) -> None:
        """Called at prepare with a function reading the table's insertable columns."""


class SimpleJdbcMapper(JdbcMapper):
    """A tuple's fields named as the columns.

    Example::

        SimpleJdbcMapper(["user_id", "user_name", "dept_name"])   # the columns given
        SimpleJdbcMapper()                    # the table's columns, read when the bolt starts
    """

    def __init__(self, columns: Sequence[str | Column] | None = None):
        self._columns = _columns(columns) if columns is not None else None

    def resolve(self, table_columns: Callable[[], list[Column]]) -> None:
        if self._columns is None:
            self._columns = table_columns()

    def columns(self) -> list[Column]:
        if self._columns is None:
            raise MappingError("the mapper's columns are read from the table when the bolt "
                               "is prepared")
        return self._columns

    def values(self, tup: Tuple) -> list:
        return [field_of(tup, c.name) for c in self.columns()]


class JdbcLookupMapper:
    """What a lookup takes from a tuple (:meth:`params`) and makes of each row
    (:meth:`to_values`), and the fields it declares."""

    def params(self, tup: Tuple) -> list:
        raise NotImplementedError

    def to_values(self, tup: Tuple, row: dict[str, Any]) -> list[list]:
        raise NotImplementedError

    def declare_output_fields(self, declarer: Any) -> None:
        raise NotImplementedError


class SimpleJdbcLookupMapper(JdbcLookupMapper):
    """Storm's ``SimpleJdbcLookupMapper(outputFields, queryColumns)``.

    Example::

        SimpleJdbcLookupMapper(["user_id", "user_name", "dept_name"], ["user_id"])
        # "SELECT dept_name, user_name FROM users WHERE user_id = ?" emits, for each row,
        # the input's user_id with the row's user_name and dept_name.
    """

    def __init__(self, output_fields: Sequence[str], query_columns: Sequence[str | Column]):
        if not output_fields:
            raise ValueError("SimpleJdbcLookupMapper needs output fields")
        self.output_fields = list(output_fields)
        self.query_columns = [c if isinstance(c, Column) else Column(str(c))
                              for c in query_columns]

    def params(self, tup: Tuple) -> list:
        return [field_of(tup, c.name) for c in self.query_columns]

    def to_values(self, tup: Tuple, row: dict[str, Any]) -> list[list]:
        out = []
        for name in self.output_fields:
            if tup.contains(name):
                out.append(tup[name])
            elif name in row:
                out.append(row[name])
            else:
                raise MappingError(f"output field {name!r} is neither a field of the input "
                                   f"tuple nor a column of the query's result (columns: "
                                   f"{', '.join(row) or 'none'})")
        return [out]

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(self.output_fields)


def to_psycopg(query: str) -> str:
    """A query with JDBC's ``?`` placeholders in psycopg's form: ``?`` -> ``%s``, a literal
    ``%`` -> ``%%``; text in single or double quotes, and ``--`` / ``/* */`` comments, is
    left alone. A query already written with ``%s`` is returned as it is."""
    if "?" not in query:
        return query
    out, i, n = [], 0, len(query)
    while i < n:
        ch = query[i]
        if ch in ("'", '"'):
            end = i + 1
            while end < n:
                if query[end] == ch:
                    if end + 1 < n and query[end + 1] == ch:  # '' is an escaped quote
                        end += 2
                        continue
                    break
                end += 1
            out.append(query[i:end + 1].replace("%", "%%"))
            i = end + 1
        elif query.startswith("--", i):
            end = query.find("\n", i)
            end = n if end < 0 else end
            out.append(query[i:end].replace("%", "%%"))
            i = end
        elif query.startswith("/*", i):
            end = query.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(query[i:end].replace("%", "%%"))
            i = end
        elif ch == "?":
            out.append("%s")
            i += 1
        elif ch == "%":
            out.append("%%")
            i += 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def placeholders(query: str) -> int:
    """How many parameters a psycopg-form query takes (``%s`` not preceded by ``%``)."""
    count, i = 0, 0
    while True:
        i = query.find("%", i)
        if i < 0:
            return count
        if query.startswith("%%", i):
            i += 2
            continue
        if query.startswith("%s", i) or query.startswith("%b", i) or query.startswith("%t", i):
            count += 1
        i += 2
