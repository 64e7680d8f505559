"""Stateful bolts' state in PostgreSQL: :class:`JdbcKeyValueState` and its provider.

The PostgreSQL counterpart of storm-redis's ``RedisKeyValueState`` (client/state.py), for
``topology.state.provider: postgres`` (or this module's
``squall.connectors.jdbc.state.JdbcKeyValueStateProvider``). Three tables, made when
missing, hold every namespace (a task's state is ``<component>-<task>``):

* ``<table>``: ``(namespace, key, value)``, the committed state;
* ``<table>_prepare``: the prepared transaction's changes (``value`` NULL: a delete);
* ``<table>_txid``: ``(namespace, prepare, commit)``, the last prepared and committed txids.

``prepare_commit`` replaces the namespace's prepared rows and its prepare txid in one
transaction; ``commit`` moves them into the committed table inside the database (one
``INSERT ... SELECT ... ON CONFLICT`` and one ``DELETE``, nothing sent again) in one
transaction: a worker killed mid-commit leaves the old state or the new one, and a
transaction prepared by a dead worker is still there for the checkpoint spout's COMMIT or
ROLLBACK. Keys and values are msgpack, as in Redis: read back, they are data only.

``topology.state.provider.config`` (JSON or a dict): ``{"dsn": "host=... dbname=..."}`` or
storm-jdbc's HikariCP map, and ``"table"`` (default ``squall_state``).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Iterator, Mapping

from ...client import config as cfg
from ...client import extras
from ...client.state import (State, StateError, StateProvider, StoredKeyValueState, _TOMBSTONE,
                             _pack, _unpack, _unpack_key)

extras.require("jdbc", "squall.connectors.jdbc")

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402

from .bolt import table_identifier  # noqa: E402
from .config import JdbcConfig  # noqa: E402

DEFAULT_TABLE = "squall_state"


def provider_settings(conf: Mapping[str, Any]) -> tuple[JdbcConfig, str]:
    """The database and the table of ``topology.state.provider.config``."""
    raw = conf.get(cfg.TOPOLOGY_STATE_PROVIDER_CONFIG)
    if not raw:
        raise StateError(f"{cfg.TOPOLOGY_STATE_PROVIDER} is postgres but "
                         f"{cfg.TOPOLOGY_STATE_PROVIDER_CONFIG} is unset: give "
                         '{"dsn": "host=... dbname=... user=..."} or a HikariCP map')
    try:
        given = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except (ValueError, TypeError) as exc:
        raise StateError(f"{cfg.TOPOLOGY_STATE_PROVIDER_CONFIG} is not JSON: {exc}") from None
    table = str(given.pop("table", DEFAULT_TABLE))
    try:
        table_identifier(table)
        if "dsn" in given:
            config = JdbcConfig(str(given["dsn"]))
        else:
            config = JdbcConfig(hikari=given)
    except ValueError as exc:
        raise StateError(f"{cfg.TOPOLOGY_STATE_PROVIDER_CONFIG}: {exc}") from None
    return config, table


class JdbcKeyValueState(StoredKeyValueState):
    """A task's key-value state in PostgreSQL, with two-phase commits (see the module)."""

    def __init__(self, namespace: str, config: JdbcConfig, table: str = DEFAULT_TABLE):
        super().__init__()
        self.namespace = namespace
        self.config = config
        self.table = table
        self._t = table_identifier(table)
        self._tp = table_identifier(table + "_prepare")
        self._tx = table_identifier(table + "_txid")
        self.conn: psycopg.Connection | None = None
        with self._db("make the state tables") as conn, conn.cursor() as cur:
            for ddl in (
                "CREATE TABLE IF NOT EXISTS {t} (namespace text, key bytea, value bytea NOT NULL, "
                "PRIMARY KEY (namespace, key))",
                "CREATE TABLE IF NOT EXISTS {tp} (namespace text, key bytea, value bytea, "
                "PRIMARY KEY (namespace, key))",
                "CREATE TABLE IF NOT EXISTS {tx} (namespace text PRIMARY KEY, prepare bigint, "
                "commit bigint)"):
                try:
                    with conn.transaction():
                        cur.execute(sql.SQL(ddl).format(t=self._t, tp=self._tp, tx=self._tx))
                except psycopg.errors.UniqueViolation:
                    pass  # another task made it at the same moment (CREATE's known race)
            # A prepared transaction left by a dead worker stays until the checkpoint spout
            # says commit (it was prepared everywhere) or rollback.
            cur.execute(sql.SQL("SELECT key, value FROM {} WHERE namespace = %s").format(self._tp),
                        (namespace,))
            for k, v in cur.fetchall():
                self._prepared[_unpack_key(bytes(k))] = _TOMBSTONE if v is None else _unpack(bytes(v))
        txids = self.txids()
        prepared, committed = txids.get("prepare"), txids.get("commit")
        self._prepared_txid = prepared \
            if prepared is not None and (committed is None or prepared > committed) else None

    # --- the connection ---------------------------------------------------------------
    @contextlib.contextmanager
    def _db(self, doing: str) -> Iterator[psycopg.Connection]:
        """The connection for one transaction: committed at the end, rolled back on an
        error; psycopg's errors as a StateError saying what was being done, and where."""
        try:
            if self.conn is None or self.conn.closed:
                self.conn = self.config.connect()
        except psycopg.Error as e:
            self._drop()
            raise StateError(f"cannot {doing} of state {self.namespace!r}: "
                             f"{self.config.describe()} is unreachable: {e}") from None
        conn = self.conn
        try:
            yield conn
            conn.commit()
        except psycopg.Error as e:
            if isinstance(e, (psycopg.OperationalError, psycopg.InterfaceError)):
                self._drop()
            else:
                try:
                    conn.rollback()
                except psycopg.Error:
                    self._drop()
            raise StateError(f"cannot {doing} of state {self.namespace!r} in "
                             f"{self.config.describe()} table {self.table!r}: {e}") from None
        except BaseException:
            try:
                conn.rollback()
            except psycopg.Error:
                self._drop()
            raise

    def _drop(self) -> None:
        """Close the connection (a new one is made at the next use)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    # --- StoredKeyValueState ------------------------------------------------------------
    def _read_committed(self, packed_key: bytes) -> bytes | None:
        with self._db("read a key") as conn:
            row = conn.execute(sql.SQL("SELECT value FROM {} WHERE namespace = %s AND key = %s"
                                       ).format(self._t), (self.namespace, packed_key)).fetchone()
        return None if row is None else bytes(row[0])

    def _read_all_committed(self) -> Iterator[tuple[bytes, bytes]]:
        with self._db("read every key") as conn:
            rows = conn.execute(sql.SQL("SELECT key, value FROM {} WHERE namespace = %s"
                                        ).format(self._t), (self.namespace,)).fetchall()
        return ((bytes(k), bytes(v)) for k, v in rows)

    def txids(self) -> dict[str, int | None]:
        """The last prepared and committed txids the database holds (``prepare``, ``commit``)."""
        with self._db("read the txids") as conn:
            row = conn.execute(sql.SQL("SELECT prepare, commit FROM {} WHERE namespace = %s"
                                       ).format(self._tx), (self.namespace,)).fetchone()
        return {} if row is None else {"prepare": row[0], "commit": row[1]}

    def prepare_commit(self, txid: int) -> None:
        self._prepared.update(self._pending)
        self._pending = {}
        rows = [(self.namespace, _pack(k), None if v is _TOMBSTONE else _pack(v))
                for k, v in self._prepared.items()]
        with self._db(f"prepare transaction {txid}") as conn, conn.cursor() as cur:
            cur.execute(sql.SQL("DELETE FROM {} WHERE namespace = %s").format(self._tp),
                        (self.namespace,))
            if rows:
                with cur.copy(sql.SQL("COPY {} (namespace, key, value) FROM STDIN").format(
                        self._tp)) as copy:
                    for r in rows:
                        copy.write_row(r)
            cur.execute(sql.SQL("INSERT INTO {} (namespace, prepare) VALUES (%s, %s) "
                                "ON CONFLICT (namespace) DO UPDATE SET prepare = EXCLUDED.prepare"
                                ).format(self._tx), (self.namespace, txid))
        self._prepared_txid = txid

    def commit(self, txid: int | None = None) -> None:
        if txid is None:  # commit the contents now (Storm's commit())
            self.prepare_commit(-1)
            txid = -1
        with self._db(f"commit transaction {txid}") as conn, conn.cursor() as cur:
            cur.execute(sql.SQL(
                "INSERT INTO {t} (namespace, key, value) SELECT namespace, key, value FROM {tp} "
                "WHERE namespace = %s AND value IS NOT NULL "
                "ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value"
            ).format(t=self._t, tp=self._tp), (self.namespace,))
            cur.execute(sql.SQL(
                "DELETE FROM {t} t USING {tp} p WHERE p.namespace = %s AND p.value IS NULL "
                "AND t.namespace = p.namespace AND t.key = p.key").format(t=self._t, tp=self._tp),
                (self.namespace,))
            cur.execute(sql.SQL("DELETE FROM {} WHERE namespace = %s").format(self._tp),
                        (self.namespace,))
            cur.execute(sql.SQL("INSERT INTO {} (namespace, commit) VALUES (%s, %s) "
                                "ON CONFLICT (namespace) DO UPDATE SET commit = EXCLUDED.commit"
                                ).format(self._tx), (self.namespace, txid))
        self._applied()

    def rollback(self) -> None:
        self._dropped()
        with self._db("roll back") as conn:
            conn.execute(sql.SQL("DELETE FROM {} WHERE namespace = %s").format(self._tp),
                         (self.namespace,))
            # Nothing is prepared any more (a restarted task must not think otherwise).
            conn.execute(sql.SQL("UPDATE {} SET prepare = NULL WHERE namespace = %s"
                                 ).format(self._tx), (self.namespace,))

    def close(self) -> None:
        self._drop()


class JdbcKeyValueStateProvider(StateProvider):
    """``topology.state.provider: postgres``: each task's state in PostgreSQL."""

    def new_state(self, namespace: str, conf: Mapping[str, Any], context: Any) -> State:
        config, table = provider_settings(conf)
        return JdbcKeyValueState(namespace, config, table)
