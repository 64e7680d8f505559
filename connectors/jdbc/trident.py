"""Trident map states in a PostgreSQL table: :class:`JdbcMapState`.

storm-jdbc's Trident ``JdbcState`` inserts a batch's tuples with no txid, so a replayed batch
inserts them again. Here a key's row carries, as Storm's map states (Redis, Memcached,
Cassandra) do, the txid of the batch that last wrote it:

* transactional: ``(key columns, value, txid)``; a batch replayed with the same txid skips
  the keys it already wrote;
* opaque: ``(key columns, value, txid, prev)``; a replayed txid starts again from ``prev``,
  whatever tuples the replay carries;
* non-transactional: ``(key columns, value)``.

Each group-by field is a column of its own (a person queries ``WHERE word = 'the'``), the
value and ``prev`` are ``jsonb`` (any JSON-able value, a number stays queryable as
``(value)::bigint``). A batch's writes of one partition are one ``INSERT ... ON CONFLICT DO
UPDATE`` transaction: a worker killed mid-write leaves the batch's rows all written or none.
The table is made when missing, its key columns typed after the first keys seen (or
``key_types``); an existing table must have the columns, and give back a key as Python
had it (text for str, bigint for int: a char(n) column pads, a real rounds, and such a
key would never be found again).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ...client import extras
from ...client.trident.state.backing import (BackingMap, Codec, Key, OpaqueValue,
                                             TransactionalValue, check_lengths)
from ...client.trident.state.base import StateError, StateType
from ...client.trident.state.factory import MapStateFactory
from ...client.trident.state.map_state import GLOBAL_KEY

extras.require("jdbc", "squall.connectors.jdbc")

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.types.json import Jsonb  # noqa: E402

from .bolt import table_identifier  # noqa: E402
from .config import JdbcConfig  # noqa: E402

#: Rows per statement of a multi-get (each key is one or more parameters; PostgreSQL takes
#: at most 65,535 parameters a statement).
CHUNK = 5000

#: A Python key value's column type when the table is made from the first keys.
_SQL_TYPES = ((bool, "boolean"), (int, "bigint"), (float, "double precision"), (str, "text"),
              (bytes, "bytea"))


def _sql_type(value: Any) -> str:
    for py, name in _SQL_TYPES:
        if type(value) is py:
            return name
    raise StateError(f"a JdbcMapState key's values are str, int, float, bool or bytes (each a "
                     f"column); got {type(value).__name__} {value!r:.60}")


class JdbcBackingMap(BackingMap):
    """One partition's rows of a :class:`JdbcMapState` table."""

    def __init__(self, config: JdbcConfig, table: str, key_columns: Sequence[str],
                 state_type: StateType, *, value_column: str = "value",
                 key_types: Sequence[str] | None = None, name: str | None = None):
        self.config = config
        self.table = table
        self.key_columns = list(key_columns)
        self.state_type = state_type
        self.value_column = value_column
        self.key_types = list(key_types) if key_types else None
        self.name = name or table
        self.conn: psycopg.Connection | None = None
        self._ready = False
        ident = table_identifier(table)
        keys = [sql.Identifier(c) for c in self.key_columns]
        stored = [sql.Identifier(value_column)]
        if state_type is not StateType.NON_TRANSACTIONAL:
            stored.append(sql.Identifier("txid"))
        if state_type is StateType.OPAQUE:
            stored.append(sql.Identifier("prev"))
        self._stored_count = len(stored)
        cols = sql.SQL(", ").join(keys + stored)
        self._select = sql.SQL("SELECT {} FROM {} WHERE ({}) IN ").format(
            cols, ident, sql.SQL(", ").join(keys))
        row = sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * len(keys + stored)))
        self._upsert = sql.SQL("INSERT INTO {} ({}) VALUES {} ON CONFLICT ({}) DO UPDATE SET {}").format(
            ident, cols, row, sql.SQL(", ").join(keys),
            sql.SQL(", ").join(sql.SQL("{0} = EXCLUDED.{0}").format(c) for c in stored))
        self._delete = sql.SQL("DELETE FROM {} WHERE ({}) IN ").format(
            ident, sql.SQL(", ").join(keys))

    # --- the connection and the table -------------------------------------------------
    def _connection(self, sample_key: Key | None) -> psycopg.Connection:
        try:
            if self.conn is None or self.conn.closed:
                self.conn = self.config.connect()
                self._ready = False
            if not self._ready:
                self._ensure_table(self.conn, sample_key)
            return self.conn
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:
            self._drop()
            raise StateError(f"state {self.name!r}: {self.config.describe()} is unreachable: "
                             f"{_line(e)}; the batch is retried once it answers", self.name) from e

    def _ensure_table(self, conn: psycopg.Connection, sample_key: Key | None) -> None:
        with conn.cursor() as cur:
            cur.execute("SELECT to_regclass(%s)", (self.table,))
            exists = cur.fetchone()[0] is not None
            if not exists and sample_key is None:
                conn.rollback()
                return  # made at the first write, typed after its keys
            if not exists:
                types = self.key_types or [_sql_type(v) for v in sample_key]
                if len(types) != len(self.key_columns):
                    raise StateError(f"state {self.name!r}: {len(self.key_columns)} key "
                                     f"column(s) but keys of {len(types)} value(s)", self.name)
                defs = [sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t))
                        for c, t in zip(self.key_columns, types)]
                defs.append(sql.SQL("{} jsonb").format(sql.Identifier(self.value_column)))
                if self.state_type is not StateType.NON_TRANSACTIONAL:
                    defs.append(sql.SQL("txid bigint"))
                if self.state_type is StateType.OPAQUE:
                    defs.append(sql.SQL("prev jsonb"))
                defs.append(sql.SQL("PRIMARY KEY ({})").format(
                    sql.SQL(", ").join(sql.Identifier(c) for c in self.key_columns)))
                # IF NOT EXISTS: another partition may make it at the same moment.
                cur.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(
                    table_identifier(self.table), sql.SQL(", ").join(defs)))
            else:
                cur.execute("SELECT attname FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                            "AND attnum > 0 AND NOT attisdropped", (self.table,))
                have = {r[0] for r in cur.fetchall()}
                want = self.key_columns + [self.value_column] + \
                    (["txid"] if self.state_type is not StateType.NON_TRANSACTIONAL else []) + \
                    (["prev"] if self.state_type is StateType.OPAQUE else [])
                missing = [c for c in want if c not in have]
                if missing:
                    raise StateError(f"state {self.name!r}: table {self.table!r} has no column(s) "
                                     f"{', '.join(missing)} ({self.state_type.value} state needs "
                                     f"{', '.join(want)})", self.name)
        conn.commit()
        if exists or sample_key is not None:
            self._ready = True

    def _drop(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def _run(self, op: str, sample: Key | None, fn) -> Any:
        conn = self._connection(sample)
        try:
            out = fn(conn)
            conn.commit()
            return out
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:
            self._drop()
            raise StateError(f"state {self.name!r}: {self.config.describe()} lost during "
                             f"{op}: {_line(e)}; the batch is retried", self.name) from e
        except psycopg.Error as e:
            try:
                conn.rollback()
            except psycopg.Error:
                self._drop()
            raise StateError(f"state {self.name!r}: {op} on table {self.table!r} failed: "
                             f"{_line(e)}", self.name) from e

    # --- BackingMap -------------------------------------------------------------------
    def multi_get(self, keys: Sequence[Key]) -> list[Any]:
        if not keys:
            return []
        keys = [tuple(k) for k in keys]
        width = len(self.key_columns)
        for k in keys:
            if len(k) != width:
                raise StateError(f"state {self.name!r}: key {k!r} has {len(k)} value(s), the "
                                 f"table {width} key column(s)", self.name)

        def read(conn: psycopg.Connection) -> dict:
            found: dict[tuple, tuple] = {}
            if not self._ready:
                return found  # no table yet: nothing stored
            with conn.cursor() as cur:
                for i in range(0, len(keys), CHUNK):
                    chunk = keys[i:i + CHUNK]
                    row = sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * width))
                    cur.execute(self._select + sql.SQL("(VALUES {})").format(
                        sql.SQL(", ").join([row] * len(chunk))), [v for k in chunk for v in k])
                    for r in cur.fetchall():
                        found[tuple(r[:width])] = r[width:]
            return found

        found = self._run("a read", None, read)
        return [None if k not in found else self._value(found[k]) for k in keys]

    def _value(self, stored: tuple) -> Any:
        if self.state_type is StateType.TRANSACTIONAL:
            return TransactionalValue(stored[1], stored[0])
        if self.state_type is StateType.OPAQUE:
            return OpaqueValue(stored[1], stored[0], stored[2])
        return stored[0]

    def _stored(self, value: Any) -> list:
        if self.state_type is StateType.TRANSACTIONAL:
            return [Jsonb(value.val), value.txid]
        if self.state_type is StateType.OPAQUE:
            return [Jsonb(value.curr), value.curr_txid, Jsonb(value.prev)]
        return [Jsonb(value)]

    def multi_put(self, keys: Sequence[Key], values: Sequence[Any]) -> None:
        check_lengths(keys, values)
        if not keys:
            return
        rows = [[*k, *self._stored(v)] for k, v in zip(keys, values)]

        def write(conn: psycopg.Connection) -> None:
            with conn.cursor() as cur:
                cur.executemany(self._upsert, rows)

        self._run("a write", tuple(keys[0]), write)

    def multi_remove(self, keys: Sequence[Key]) -> None:
        if not keys:
            return
        width = len(self.key_columns)

        def delete(conn: psycopg.Connection) -> None:
            if not self._ready:
                return
            row = sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * width))
            with conn.cursor() as cur:
                for i in range(0, len(keys), CHUNK):
                    chunk = [tuple(k) for k in keys[i:i + CHUNK]]
                    cur.execute(self._delete + sql.SQL("(VALUES {})").format(
                        sql.SQL(", ").join([row] * len(chunk))), [v for k in chunk for v in k])

        self._run("a delete", None, delete)

    def close(self) -> None:
        self._drop()


def _line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


class JdbcMapState(MapStateFactory):
    """Factories of map states in a PostgreSQL table.

    Example::

        counts = JdbcMapState.opaque(JdbcConfig(dsn), "word_counts", key_columns=["word"])
        stream.group_by(["word"]).persistent_aggregate(counts, Count(), ["count"])

    ``key_columns`` name the group-by fields' columns, in the group-by's order;
    ``value_column`` the value's (jsonb); ``cache_size`` is Storm's ``localCacheSize``.
    """

    #: Components hosting it need psycopg on the cluster's hosts.
    requires_extras = ("jdbc",)

    def __init__(self, state_type: StateType, config: JdbcConfig, table: str,
                 key_columns: Sequence[str], *, value_column: str = "value",
                 key_types: Sequence[str] | None = None, cache_size: int = 1000,
                 global_key: Key = GLOBAL_KEY):
        super().__init__(state_type, table, cache_size=cache_size, global_key=global_key)
        if not isinstance(config, JdbcConfig):
            raise TypeError("JdbcMapState takes a JdbcConfig")
        table_identifier(table)
        if not key_columns:
            raise ValueError("JdbcMapState needs key_columns: the group-by fields' columns")
        reserved = {value_column, "txid", "prev"} & set(key_columns)
        if reserved:
            raise ValueError(f"key column(s) {', '.join(sorted(reserved))} clash with the "
                             "value's columns")
        if key_types is not None and len(key_types) != len(key_columns):
            raise ValueError("key_types gives one SQL type per key column")
        self.config = config
        self.table = table
        self.key_columns = list(key_columns)
        self.value_column = value_column
        self.key_types = list(key_types) if key_types else None

    @classmethod
    def transactional(cls, config: JdbcConfig, table: str, key_columns: Sequence[str],
                      **options: Any) -> "JdbcMapState":
        return cls(StateType.TRANSACTIONAL, config, table, key_columns, **options)

    @classmethod
    def opaque(cls, config: JdbcConfig, table: str, key_columns: Sequence[str],
               **options: Any) -> "JdbcMapState":
        return cls(StateType.OPAQUE, config, table, key_columns, **options)

    @classmethod
    def non_transactional(cls, config: JdbcConfig, table: str, key_columns: Sequence[str],
                          **options: Any) -> "JdbcMapState":
        return cls(StateType.NON_TRANSACTIONAL, config, table, key_columns, **options)

    def make_backing(self, conf: Mapping[str, Any], codec: Codec, partition_index: int,
                     num_partitions: int) -> JdbcBackingMap:
        # Every partition writes the same table: Trident gives each key to one partition.
        return JdbcBackingMap(self.config.resolve(conf), self.table, self.key_columns, self.state_type,
                              value_column=self.value_column, key_types=self.key_types,
                              name=self.name)
