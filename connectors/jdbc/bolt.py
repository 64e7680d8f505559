"""storm-jdbc's bolts on PostgreSQL: :class:`JdbcInsertBolt` and :class:`JdbcLookupBolt`.

**Insert.** Storm's bolt inserts each tuple in a statement of its own and acks it. Ours
gathers tuples into batches (``batch_size`` rows, or what arrived within
``flush_interval_secs``, the bolt's tick), writes a batch in one transaction (``COPY`` into
the table, or the user's ``insert_query`` pipelined) and acks its tuples only once the
transaction committed: a tuple acked is a row in the table. When the batch fails:

* a row the database refuses (a wrong type, a constraint): the batch is written again row
  by row, each under a savepoint, so the good rows commit and are acked, and each refused
  tuple is failed and reported with its values and the database's reason;
* the database unreachable or the connection lost: every tuple of the batch is failed (its
  spout replays it) and the address is reported; the next batch connects again. A commit
  whose answer was lost may have been applied: a replay then inserts its rows again. That
  is Storm's at-least-once; an ``insert_query`` with ``ON CONFLICT DO NOTHING`` on a key of
  the record makes the replay harmless.

**Lookup.** Each tuple's query (its parameters from the mapper) is sent in one pipeline with
the rest of the executor's step: one round trip a step. Every row found gives an output
tuple anchored to the input; the input is acked after them (none found: acked, nothing
emitted, as Storm's).

Both run on a thread of their own: each step waits on the database, and an unreachable one
on its connect timeout. Errors are reported at most once a second per kind.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Sequence

from ...client import config as cfg
from ...client import extras
from ...client.components import Bolt
from ...client.stateful import failures_rewind
from ...client.tuple import Tuple

extras.require("jdbc", "squall.connectors.jdbc")

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402
from psycopg.rows import dict_row  # noqa: E402

from ..reports import Reports  # noqa: E402
from .config import JdbcConfig  # noqa: E402
from .mapper import (Column, JdbcLookupMapper, JdbcMapper, MappingError, SimpleJdbcMapper,  # noqa: E402
                     placeholders, to_psycopg)

log = logging.getLogger("squall.connectors.jdbc")

#: Errors that are the connection's (or the server's), not a row's.
_CONNECTION_ERRORS = (psycopg.OperationalError, psycopg.InterfaceError)


def row_refused(e: BaseException) -> bool:
    """Whether the database refused this row or these parameters as they are (SQLSTATE
    class 22, data exception, or 23, integrity constraint violation), or psycopg could not
    send a value: the same tuple would be refused again. Anything else (a read-only
    standby, a table dropped, privileges, a timeout) passes, and fails the tuple instead."""
    state = getattr(getattr(e, "diag", None), "sqlstate", None) or getattr(e, "sqlstate", None)
    if state:
        return state[:2] in ("22", "23")
    # Refused before it left: a value psycopg cannot adapt or COPY cannot write.
    return isinstance(e, (psycopg.DataError, psycopg.ProgrammingError, TypeError, ValueError))


class _NotTheRow(Exception):
    """A row's write failed for a reason that is not the row's: the batch fails whole."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


def _reason(e: BaseException) -> str:
    """A database error in one line: its class and the server's primary message."""
    diag = getattr(e, "diag", None)
    text = diag.message_primary if diag is not None and diag.message_primary else None
    if not text:
        lines = str(e).strip().splitlines()
        text = lines[0] if lines else ""
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def table_identifier(table: str) -> sql.Composable:
    """``schema.table`` or ``table`` as a quoted identifier (a name, never SQL text)."""
    parts = table.split(".")
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise ValueError(f"a table is name or schema.name, not {table!r}")
    return sql.Identifier(*parts)


class _JdbcBolt(Bolt):
    """What both bolts share: the connection, the statement timeout, the reports."""

    #: The hosts running it need psycopg (a cluster without it refuses the topology).
    requires_extras = ("jdbc",)

    def __init__(self, config: JdbcConfig, query_timeout_secs: float = 30.0):
        if not isinstance(config, JdbcConfig):
            raise TypeError("the first argument is a JdbcConfig (storm-jdbc's "
                            "ConnectionProvider), e.g. JdbcConfig('host=... dbname=...')")
        self.config = config
        self.query_timeout_secs = query_timeout_secs

    def with_query_timeout_secs(self, secs: float):
        """Storm's ``withQueryTimeoutSecs``: a statement running longer is cancelled."""
        if secs <= 0:
            raise ValueError("the query timeout must be above 0 seconds")
        self.query_timeout_secs = secs
        return self

    def get_component_configuration(self) -> dict[str, Any]:
        # A thread of its own: a step waits on the database (the GIL let go), an
        # unreachable one on its connect timeout; on the worker's shared loop either would
        # hold every other executor of the worker.
        return {cfg.TOPOLOGY_EXECUTOR_THREADED: True}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.component = context.this_component_id
        self.config = self.config.resolve(conf)
        self.where = self.config.describe()
        self.reports = Reports(collector, drop_bad=failures_rewind(conf, context))
        self.conn: psycopg.Connection | None = None

    def cleanup(self) -> None:
        self._drop_connection()

    def _connection(self) -> psycopg.Connection:
        if self.conn is None or self.conn.closed:
            conn = self.config.connect()
            try:
                with conn.cursor() as cur:
                    cur.execute(sql.SQL("SET statement_timeout = {}").format(
                        sql.Literal(int(self.query_timeout_secs * 1000))))
                conn.commit()
            except BaseException:
                conn.close()
                raise
            self.conn = conn
        return self.conn

    def _drop_connection(self) -> None:
        conn, self.conn = getattr(self, "conn", None), None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    def _unreachable(self, tuples: Sequence[Tuple], e: BaseException) -> None:
        """The database could not run the step: every tuple of it fails (and replays)."""
        self._drop_connection()
        text = str(e).lower()
        if "password" in text or "authentication" in text:
            what = (f"{self.where} refused the bolt's credentials ({_reason(e)}): correct the "
                    "JdbcConfig's user and password (or the worker hosts' ~/.pgpass)")
        else:
            what = (f"{self.where} is unreachable ({_reason(e)}): start the database or correct "
                    "the bolt's JdbcConfig")
        self.reports.error("unavailable", f"{self.component}: {what}; {len(tuples)} tuple(s) "
                           "were failed and will be replayed")
        for tup in tuples:
            self.collector.fail(tup)

    def _rollback(self) -> None:
        try:
            if self.conn is not None:
                self.conn.rollback()
        except psycopg.Error:
            self._drop_connection()


class JdbcInsertBolt(_JdbcBolt):
    """Inserts a row per tuple, in batches (Storm's ``JdbcInsertBolt``).

    Example::

        bolt = JdbcInsertBolt(JdbcConfig(dsn), SimpleJdbcMapper()).with_table_name("words")
        bolt = JdbcInsertBolt(JdbcConfig(dsn), SimpleJdbcMapper(["word", "n"]),
                              insert_query="INSERT INTO words (word, n) VALUES (?, ?) "
                                           "ON CONFLICT (word) DO UPDATE SET n = EXCLUDED.n")

    ``table_name``: rows go in with ``COPY`` (the fastest way in), into the mapper's columns
    (by default the table's own, read when the bolt starts). ``insert_query``: the user's
    statement, with ``?`` (JDBC's) or ``%s`` placeholders, one per mapper column.
    ``batch_size`` rows are written in one transaction; fewer wait at most
    ``flush_interval_secs`` (the bolt's tick tuple frequency).
    """

    def __init__(self, config: JdbcConfig, mapper: JdbcMapper | None = None, *,
                 table_name: str | None = None, insert_query: str | None = None,
                 batch_size: int = 1000, flush_interval_secs: float = 0.5,
                 query_timeout_secs: float = 30.0):
        super().__init__(config, query_timeout_secs)
        self.mapper = mapper if mapper is not None else SimpleJdbcMapper()
        if not isinstance(self.mapper, JdbcMapper):
            raise TypeError("the mapper is a JdbcMapper (SimpleJdbcMapper(...))")
        self.table_name: str | None = None
        self.insert_query: str | None = None
        if table_name is not None:
            self.with_table_name(table_name)
        if insert_query is not None:
            self.with_insert_query(insert_query)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if flush_interval_secs <= 0:
            raise ValueError("flush_interval_secs must be above 0")
        self.batch_size = batch_size
        self.flush_interval_secs = flush_interval_secs

    def with_table_name(self, table: str) -> "JdbcInsertBolt":
        """Storm's ``withTableName``."""
        if self.insert_query is not None:
            raise ValueError("JdbcInsertBolt takes a table name or an insert query, not both")
        table_identifier(table)
        self.table_name = table
        return self

    def with_insert_query(self, query: str) -> "JdbcInsertBolt":
        """Storm's ``withInsertQuery`` (``?`` placeholders, or psycopg's ``%s``)."""
        if self.table_name is not None:
            raise ValueError("JdbcInsertBolt takes a table name or an insert query, not both")
        if not query or not query.strip():
            raise ValueError("the insert query is empty")
        self.insert_query = query
        return self

    def get_component_configuration(self) -> dict[str, Any]:
        return {**super().get_component_configuration(),
                cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS: self.flush_interval_secs}

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        if self.table_name is None and self.insert_query is None:
            raise ValueError(f"{context.this_component_id}: JdbcInsertBolt needs "
                             "with_table_name(...) or with_insert_query(...)")
        super().prepare(conf, context, collector)
        #: (tuple, row values) waiting for the next flush.
        self.pending: list[tuple[Tuple, list]] = []
        self.statement: sql.Composable | None = None
        self._resolved = False
        #: Rows committed by this task (tests and logs).
        self.rows_committed = 0

    def _resolve(self, conn: psycopg.Connection) -> None:
        """The mapper's columns (from the table if it names none) and the statement."""
        if self._resolved:
            return
        self.mapper.resolve(lambda: insertable_columns(conn, self.table_name))
        columns = self.mapper.columns()
        if self.table_name is not None:
            self.statement = sql.SQL("COPY {} ({}) FROM STDIN").format(
                table_identifier(self.table_name),
                sql.SQL(", ").join(sql.Identifier(c.name) for c in columns))
        else:
            query = to_psycopg(self.insert_query)
            wanted = placeholders(query)
            if wanted != len(columns):
                raise MappingError(f"the insert query takes {wanted} parameter(s) and the "
                                   f"mapper gives {len(columns)} column(s) "
                                   f"({', '.join(c.name for c in columns)})")
            self.statement = sql.SQL(query)
        self._resolved = True

    def execute(self, tup: Tuple) -> None:
        self.execute_batch([tup])

    def execute_batch(self, tuples: list) -> None:
        if not self._resolved and not self._try_resolve([t for t in tuples if not t.is_tick]):
            return
        tick = False
        for tup in tuples:
            if tup.is_tick:
                tick = True
                continue
            try:
                values = self.mapper.values(tup)
            except Exception as e:  # the user's mapper too: that tuple fails, not the worker
                self.reports.bad_tuple(tup, "mapping", f"{self.component}: a tuple from "
                                       f"{tup.component} does not map to a row of "
                                       f"{self._target()}: {_reason(e)}")
                continue
            self.pending.append((tup, values))
            if len(self.pending) >= self.batch_size:
                self.flush()
        if tick and self.pending:
            self.flush()

    def flush_before_checkpoint(self, txid: int) -> None:
        # Barrier checkpointing: the checkpoint must cover only rows that are in the table.
        self.flush()

    def _target(self) -> str:
        return repr(self.table_name) if self.table_name else "the insert query"

    def _try_resolve(self, tuples: list) -> bool:
        """Connect and learn the columns; False (the tuples failed, the reason reported)
        when the database cannot be reached or the table and the mapper disagree."""
        try:
            self._resolve(self._connection())
            return True
        except _CONNECTION_ERRORS as e:
            self._unreachable(tuples, e)
        except (psycopg.Error, MappingError) as e:
            # The table is missing, or the query and the mapper disagree: nothing can go in.
            self._rollback()
            self.reports.error("statement", f"{self.component}: cannot insert into "
                               f"{self._target()} on {self.where}: {_reason(e)}; "
                               f"{len(tuples)} tuple(s) were failed")
            for tup in tuples:
                self.collector.fail(tup)
        return False

    def flush(self) -> None:
        """Write the pending rows in one transaction; ack them once it committed."""
        batch, self.pending = self.pending, []
        if not batch:
            return
        try:
            conn = self._connection()
        except _CONNECTION_ERRORS as e:
            return self._unreachable([t for t, _ in batch], e)
        try:
            self._write(conn, [v for _, v in batch])
            conn.commit()
        except _CONNECTION_ERRORS as e:
            return self._unreachable([t for t, _ in batch], e)
        except (psycopg.Error, TypeError, ValueError):
            # A row the database refused? Find which, commit the rest (or fail them all).
            self._rollback()
            return self._rows_one_by_one(batch)
        self.rows_committed += len(batch)
        for tup, _ in batch:
            self.collector.ack(tup)

    def _write(self, conn: psycopg.Connection, rows: list[list]) -> None:
        with conn.cursor() as cur:
            if self.table_name is not None:
                with cur.copy(self.statement) as copy:
                    for row in rows:
                        copy.write_row(row)
            else:
                cur.executemany(self.statement, rows)

    def _rows_one_by_one(self, batch: list[tuple[Tuple, list]]) -> None:
        """The batch again, a row at a time in one transaction, each row under a savepoint:
        the rows the database refuses as they are go (bad_tuple), the rest commit together.
        Any other error fails the whole batch (none of it committed)."""
        good: list[Tuple] = []
        refused: list[tuple[Tuple, list, BaseException]] = []
        try:
            conn = self._connection()
            with conn.transaction(), conn.cursor() as cur:  # the outer transaction
                for tup, values in batch:
                    try:
                        with conn.transaction():  # a savepoint inside it
                            self._write_one(cur, values)
                    except _CONNECTION_ERRORS:
                        raise
                    except (psycopg.Error, TypeError, ValueError) as e:
                        if not row_refused(e):
                            raise _NotTheRow(e) from e
                        refused.append((tup, values, e))
                        continue
                    good.append(tup)
        except _CONNECTION_ERRORS as e:
            return self._unreachable([t for t, _ in batch], e)
        except _NotTheRow as e:
            self._rollback()
            self.reports.error("statement", f"{self.component}: cannot insert into "
                               f"{self._target()} on {self.where}: {_reason(e.cause)}; "
                               f"{len(batch)} tuple(s) were failed and will be replayed")
            for tup, _ in batch:
                self.collector.fail(tup)
            return
        for tup, values, e in refused:  # settled once the rest committed
            self.reports.bad_tuple(tup, "row", f"{self.component}: {self.where} refused the "
                                   f"row {values!r:.200} for {self._target()}: {_reason(e)}")
        self.rows_committed += len(good)
        for tup in good:
            self.collector.ack(tup)

    def _write_one(self, cur: psycopg.Cursor, values: list) -> None:
        if self.table_name is not None:
            with cur.copy(self.statement) as copy:
                copy.write_row(values)
        else:
            cur.execute(self.statement, values)

    def declare_output_fields(self, declarer: Any) -> None:
        pass


class JdbcLookupBolt(_JdbcBolt):
    """Runs a select per tuple and emits a tuple per row found (Storm's ``JdbcLookupBolt``).

    Example::

        bolt = JdbcLookupBolt(JdbcConfig(dsn),
                              "SELECT dept_name FROM user_department WHERE user_id = ?",
                              SimpleJdbcLookupMapper(["user_id", "dept_name"], ["user_id"]))
    """

    def __init__(self, config: JdbcConfig, select_query: str, mapper: JdbcLookupMapper, *,
                 query_timeout_secs: float = 30.0):
        super().__init__(config, query_timeout_secs)
        if not select_query or not select_query.strip():
            raise ValueError("JdbcLookupBolt needs a select query")
        if not isinstance(mapper, JdbcLookupMapper):
            raise TypeError("the mapper is a JdbcLookupMapper (SimpleJdbcLookupMapper(...))")
        self.select_query = select_query
        self.mapper = mapper

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        super().prepare(conf, context, collector)
        self.statement = sql.SQL(to_psycopg(self.select_query))

    def execute(self, tup: Tuple) -> None:
        self.execute_batch([tup])

    def execute_batch(self, tuples: list) -> None:
        work: list[tuple[Tuple, list]] = []
        for tup in tuples:
            if tup.is_tick:
                continue
            try:
                work.append((tup, self.mapper.params(tup)))
            except Exception as e:
                self.reports.bad_tuple(tup, "mapping", f"{self.component}: a tuple from "
                                       f"{tup.component} does not give the query's "
                                       f"parameters: {_reason(e)}")
        if not work:
            return
        try:
            conn = self._connection()
            results = self._query_pipelined(conn, work)
        except _CONNECTION_ERRORS as e:
            return self._unreachable([t for t, _ in work], e)
        except psycopg.Error:
            # One query failed and aborted the pipeline: run each alone to find which.
            self._rollback()
            try:
                results = self._query_one_by_one(work)
            except _CONNECTION_ERRORS as e:
                return self._unreachable([t for t, _ in work], e)
            except _NotTheRow as e:
                self.reports.error("query", f"{self.component}: the lookup failed on "
                                   f"{self.where}: {_reason(e.cause)}; {len(work)} tuple(s) "
                                   "were failed and will be replayed")
                for tup, _ in work:
                    self.collector.fail(tup)
                return
        for (tup, params), rows in zip(work, results):
            if isinstance(rows, Exception):
                self.reports.bad_tuple(tup, "query", f"{self.component}: the lookup with "
                                       f"parameters {params!r:.200} failed on {self.where}: "
                                       f"{_reason(rows)}")
                continue
            try:
                out = [values for row in rows for values in self.mapper.to_values(tup, row)]
            except Exception as e:
                self.reports.bad_tuple(tup, "mapping", f"{self.component}: a row of the "
                                       f"lookup with parameters {params!r:.200} does not map "
                                       f"to a tuple: {_reason(e)}")
                continue
            for values in out:
                self.collector.emit(list(values), anchors=tup)
            self.collector.ack(tup)

    def _query_pipelined(self, conn: psycopg.Connection, work: list) -> list:
        cursors = []
        try:
            with conn.pipeline():
                for _, params in work:
                    cur = conn.cursor(row_factory=dict_row)
                    cur.execute(self.statement, params)
                    cursors.append(cur)
            results = [cur.fetchall() for cur in cursors]
            conn.rollback()  # a lookup changes nothing: end its transaction
            return results
        finally:
            for cur in cursors:
                cur.close()

    def _query_one_by_one(self, work: list) -> list:
        conn = self._connection()
        results: list = []
        with conn.cursor(row_factory=dict_row) as cur:
            for _, params in work:
                try:
                    cur.execute(self.statement, params)
                    results.append(cur.fetchall())
                except _CONNECTION_ERRORS:
                    raise
                except psycopg.Error as e:
                    if not row_refused(e):  # not these parameters' fault: the step fails
                        conn.rollback()
                        raise _NotTheRow(e) from e
                    results.append(e)
                conn.rollback()
        return results

    def declare_output_fields(self, declarer: Any) -> None:
        self.mapper.declare_output_fields(declarer)


def insertable_columns(conn: psycopg.Connection, table: str) -> list[Column]:
    """The table's columns a row must fill: all but those the database fills itself (a
    default, an identity, a generated column), in the table's order. MappingError if the
    table does not exist."""
    with conn.cursor() as cur:
        # to_regclass: the name as SQL reads it (search_path, quoting); NULL if no such table.
        cur.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.atthasdef, "
            "a.attidentity <> '' OR a.attgenerated <> '' FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped "
            "ORDER BY a.attnum", (table,))
        rows = cur.fetchall()
    conn.rollback()
    if not rows:
        raise MappingError(f"table {table!r} does not exist (or has no columns): create it, "
                           "or give the mapper its columns")
    columns = [Column(n, t) for n, t, has_default, auto in rows if not (has_default or auto)]
    if not columns:
        raise MappingError(f"every column of table {table!r} has a default: give the mapper "
                           "the columns the tuples fill")
    return columns
