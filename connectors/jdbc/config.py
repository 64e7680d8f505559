"""Where the JDBC connectors connect: :class:`JdbcConfig`, storm-jdbc's ``ConnectionProvider``.

storm-jdbc takes a HikariCP map (``dataSourceClassName``, ``dataSource.url``,
``dataSource.user``, ``dataSource.password``, or ``jdbcUrl``); ours takes that map too, so a
Storm topology's settings carry over, or a libpq connection string / ``postgresql://`` URI,
which is what a Python user has. Either becomes one libpq connection string.

A password left out is found by libpq on the worker's host (``PGPASSWORD``, ``~/.pgpass``),
so it need not travel inside the topology. :meth:`JdbcConfig.describe` names the server
without the password, for errors and logs.
"""

from __future__ import annotations

import urllib.parse
from typing import Any, Mapping

import psycopg  # noqa: E402  (the jdbc extra: connectors/jdbc/__init__.py checked it)
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ...client import config as cfg

#: libpq's connection parameters (what a JdbcConfig may hold).
_LIBPQ_KEYS = frozenset(
    "host hostaddr port dbname user password passfile channel_binding connect_timeout "
    "client_encoding options application_name fallback_application_name keepalives "
    "keepalives_idle keepalives_interval keepalives_count tcp_user_timeout replication "
    "gssencmode sslmode requiressl sslcompression sslcert sslkey sslpassword sslrootcert "
    "sslcrl sslcrldir sslsni requirepeer ssl_min_protocol_version ssl_max_protocol_version "
    "krbsrvname gsslib service target_session_attrs load_balance_hosts".split())
#: storm-jdbc's HikariCP keys we read (the rest of a Hikari map tunes a Java pool).
HIKARI_URL_KEYS = ("dataSource.url", "jdbcUrl", "url")
HIKARI_USER_KEYS = ("dataSource.user", "username", "user")
HIKARI_PASSWORD_KEYS = ("dataSource.password", "password")


def _shown(url: str) -> str:
    """A URL for a message: no query, no user or password."""
    head = url.split("?", 1)[0]
    scheme, sep, rest = head.partition("://")
    if sep and "@" in rest.split("/", 1)[0]:
        rest = rest.split("@", 1)[1]
    return f"{scheme}{sep}{rest}"


def _from_jdbc_url(url: str) -> dict[str, Any]:
    """``jdbc:postgresql://host:port/db?user=u&password=p`` as libpq parameters."""
    if not url.startswith("jdbc:postgresql:"):
        raise ValueError(f"only PostgreSQL JDBC URLs are understood (jdbc:postgresql://...), "
                         f"not {_shown(url)!r}")
    rest = url[len("jdbc:postgresql:"):]
    if not rest.startswith("//"):  # jdbc:postgresql:db means localhost:5432/db
        rest = "//localhost/" + rest
    parts = urllib.parse.urlsplit("postgresql:" + rest)
    out: dict[str, Any] = {}
    if parts.hostname:
        out["host"] = parts.hostname
    if parts.port:
        out["port"] = parts.port
    if parts.path.strip("/"):
        out["dbname"] = urllib.parse.unquote(parts.path.strip("/"))
    for k, v in urllib.parse.parse_qsl(parts.query):
        # PgJDBC's names for what libpq calls otherwise; others are PgJDBC-only.
        k = {"connectTimeout": "connect_timeout", "ApplicationName": "application_name",
             "sslmode": "sslmode", "user": "user", "password": "password"}.get(k)
        if k:
            out[k] = v
    return out


class JdbcConfig:
    """The database of a JDBC bolt or state (PostgreSQL, through psycopg 3).

    Give one of:

    * ``JdbcConfig("host=db port=5432 dbname=shop user=squall")`` or
      ``JdbcConfig("postgresql://squall@db:5432/shop")``: libpq's own forms;
    * ``JdbcConfig(hikari={"dataSourceClassName": "org.postgresql.ds.PGSimpleDataSource",
      "dataSource.url": "jdbc:postgresql://db/shop", "dataSource.user": "squall",
      "dataSource.password": "..."})``: storm-jdbc's ``HikariCPConnectionProvider`` map.

    * ``JdbcConfig()``: either of those from the topology conf's ``jdbc.conf`` (storm-jdbc's
      examples keep the HikariCP map there; ``squall local`` sets it to the PostgreSQL it
      starts), read where the bolt or state is prepared (:meth:`resolve`).

    ``connect_timeout_secs`` bounds a connection attempt (default 5, so an unreachable
    server is reported within seconds). Checked here: a mistake surfaces when the topology
    is built, not in a worker.
    """

    def __init__(self, dsn: str | None = None, *, hikari: Mapping[str, Any] | None = None,
                 connect_timeout_secs: float = 5.0, **params: Any):
        if dsn is not None and hikari is not None:
            raise ValueError("JdbcConfig takes a connection string or a HikariCP map, not both")
        if connect_timeout_secs <= 0:
            raise ValueError("connect_timeout_secs must be above 0")
        self.connect_timeout_secs = connect_timeout_secs
        #: libpq's parameters (host, port, dbname, user, password, ...); None: from the
        #: topology conf's jdbc.conf, at :meth:`resolve`.
        self.params: dict[str, Any] | None = None
        if dsn is None and hikari is None and not params:
            return
        values: dict[str, Any] = {}
        if dsn is not None:
            try:
                values.update(conninfo_to_dict(dsn))
            except psycopg.ProgrammingError:
                # libpq's message quotes the text around the mistake: the password, maybe.
                raise ValueError("JdbcConfig: the connection string does not parse: give "
                                 "key=value pairs (host=... port=... dbname=... user=...), "
                                 "quoting a value with spaces ('...'), or a "
                                 "postgresql://user@host:port/db URI") from None
        if hikari is not None:
            values.update(self._from_hikari(hikari))
        values.update({k: v for k, v in params.items() if v is not None})
        values.setdefault("connect_timeout", max(1, round(connect_timeout_secs)))
        values.setdefault("application_name", "squall")
        try:
            make_conninfo(**{k: str(v) for k, v in values.items()})
        except psycopg.ProgrammingError:
            unknown = sorted(set(values) - _LIBPQ_KEYS)
            raise ValueError(f"JdbcConfig: libpq does not take "
                             f"{', '.join(unknown) or 'one of the settings'}") from None
        self.params = values

    def resolve(self, conf: Mapping[str, Any] | None) -> "JdbcConfig":
        """This config, or, made with no settings, the one the topology conf's ``jdbc.conf``
        gives (ValueError naming the key when it is unset or wrong)."""
        if self.params is not None:
            return self
        raw = (conf or {}).get(cfg.JDBC_CONF)
        if not raw:
            raise ValueError(f"JdbcConfig() reads the database from the topology conf's "
                             f"{cfg.JDBC_CONF}, which is unset: set it (a HikariCP map or a "
                             "connection string) or give JdbcConfig its settings")
        try:
            if isinstance(raw, str):
                return JdbcConfig(raw, connect_timeout_secs=self.connect_timeout_secs)
            return JdbcConfig(hikari=raw, connect_timeout_secs=self.connect_timeout_secs)
        except ValueError as e:
            raise ValueError(f"{cfg.JDBC_CONF}: {e}") from None

    @staticmethod
    def _from_hikari(m: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        url = next((m[k] for k in HIKARI_URL_KEYS if m.get(k)), None)
        if url:
            out.update(_from_jdbc_url(str(url)))
        else:  # PGSimpleDataSource's properties
            for ours, theirs in (("host", "dataSource.serverName"),
                                 ("port", "dataSource.portNumber"),
                                 ("dbname", "dataSource.databaseName")):
                if m.get(theirs):
                    out[ours] = m[theirs]
        cls = m.get("dataSourceClassName")
        if cls and "postgresql" not in str(cls).lower():
            raise ValueError(f"dataSourceClassName {cls!r}: only PostgreSQL is supported "
                             "(org.postgresql.ds.PGSimpleDataSource)")
        if not out:
            raise ValueError("the HikariCP map names no database: give dataSource.url or "
                             "jdbcUrl (jdbc:postgresql://host:port/db)")
        for keys, ours in ((HIKARI_USER_KEYS, "user"), (HIKARI_PASSWORD_KEYS, "password")):
            v = next((m[k] for k in keys if m.get(k) is not None), None)
            if v is not None:
                out[ours] = v
        return out

    def _given(self) -> dict[str, Any]:
        if self.params is None:
            raise ValueError(f"JdbcConfig() is resolved from {cfg.JDBC_CONF} first (resolve)")
        return self.params

    def conninfo(self) -> str:
        """The libpq connection string (with the password, if one was given)."""
        self._given()
        return make_conninfo(**{k: str(v) for k, v in self.params.items()})

    def connect(self, autocommit: bool = False) -> psycopg.Connection:
        """A new connection (psycopg.OperationalError when the server cannot be reached)."""
        return psycopg.connect(self.conninfo(), autocommit=autocommit)

    def describe(self) -> str:
        """Where it connects, without the password: ``PostgreSQL squall@127.0.0.1:5432/shop``."""
        if self.params is None:
            return f"PostgreSQL (from {cfg.JDBC_CONF})"
        p = self.params
        user = f"{p['user']}@" if p.get("user") else ""
        return (f"PostgreSQL {user}{p.get('host', 'localhost')}:{p.get('port', 5432)}"
                f"/{p.get('dbname', p.get('user', ''))}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JdbcConfig) and other.params == self.params

    def __hash__(self) -> int:
        return hash(None if self.params is None else self.conninfo())

    def __repr__(self) -> str:
        if self.params is None:
            return "JdbcConfig()"
        shown = {k: ("***" if k == "password" else v) for k, v in self.params.items()}
        return f"JdbcConfig({make_conninfo(**{k: str(v) for k, v in shown.items()})!r})"
