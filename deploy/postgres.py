"""A private PostgreSQL for development and tests, run from Debian's ``postgresql-15`` package.

:class:`LocalPostgres` makes a database cluster with ``initdb`` in a directory of its own
(password authentication, SCRAM, even on loopback: the connectors' tests use credentials as
a production database wants them), starts ``postgres`` on a free loopback port with no Unix
socket, and waits -- bounded, by connecting until the server that answers names *our* data
directory -- until it serves. It is stopped by pid: SIGTERM (PostgreSQL's "smart" shutdown
would wait for clients; SIGINT is "fast": it disconnects them and checkpoints), then SIGKILL
after a bound, then the exit is reaped. The server's log is ``postgres.log`` in its directory.

PostgreSQL refuses to run as root: run as root, the server runs as the ``postgres`` user
Debian's package creates (``SQUALL_POSTGRES_USER`` names another), and its directory is
handed to that user.

The PostgreSQL counterpart of :mod:`squall.deploy.redis`; Debian's packaged service is not
used. Run one by hand with ``python -m squall.deploy.postgres --port 5432``.
"""

from __future__ import annotations

import argparse
import atexit
import glob
import os
import pwd
import secrets
import signal
import subprocess
import sys
from typing import Any

from ..client.errors import SquallError
from .server import LocalServer, dies_with_parent, run_foreground

#: Where Debian's packages put the server programs (the newest version wins).
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"
#: Overrides the directory holding ``initdb`` and ``postgres``.
BIN_ENV = "SQUALL_POSTGRES_BIN"
#: The account the server runs as when we are root.
USER_ENV = "SQUALL_POSTGRES_USER"
INSTALL_HINT = "install Debian's postgresql-15 package: bash scripts/setup.sh"
LOG_FILE = "postgres.log"
#: The database, role and (generated) password of a LocalPostgres.
DATABASE = "squall"
ROLE = "squall"


class PostgresUnavailable(SquallError):
    """PostgreSQL cannot be started, or does not answer; the message says why."""


def installation() -> str:
    """The directory holding ``initdb`` and ``postgres``, or :class:`PostgresUnavailable`."""
    given = os.environ.get(BIN_ENV)
    if given:
        candidates = [given]
    else:
        candidates = sorted(glob.glob(DEBIAN_BIN_GLOB), key=_version, reverse=True)
    for d in candidates:
        if all(os.access(os.path.join(d, p), os.X_OK) for p in ("initdb", "postgres")):
            return d
    tried = f"${BIN_ENV}={given}" if given else DEBIAN_BIN_GLOB
    raise PostgresUnavailable(f"PostgreSQL cannot be started: no initdb and postgres in {tried}; "
                              f"{INSTALL_HINT}")


def _version(path: str) -> tuple:
    v = os.path.basename(os.path.dirname(path))
    return tuple(int(p) if p.isdigit() else 0 for p in v.split("."))


def _server_user() -> pwd.struct_passwd | None:
    """The account to run the server as (None: ourselves, since we are not root)."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get(USER_ENV, "postgres")
    try:
        return pwd.getpwnam(name)
    except KeyError:
        raise PostgresUnavailable(f"PostgreSQL refuses to run as root and there is no user "
                                  f"{name!r} to run it as: {INSTALL_HINT} (it creates "
                                  f"'postgres'), or set ${USER_ENV}") from None


class LocalPostgres(LocalServer):
    """One PostgreSQL server on ``127.0.0.1``, owned by this process.

    Example::

        with LocalPostgres() as pg:
            bolt = JdbcInsertBolt(JdbcConfig(pg.dsn()), "words")

    ``data_dir=None`` uses a fresh temporary directory, removed by :meth:`stop`; a given
    directory is kept, and a cluster already in it is started again (a restart keeps the
    data, with the password it was made with: ``password`` must then be given).
    """

    NAME = "PostgreSQL"
    LOG_FILE = LOG_FILE
    DIR_PREFIX = "squall-postgres-"
    POLL_SECS = 0.1

    def __init__(self, data_dir: str | None = None, port: int | None = None, *,
                 password: str | None = None, start_timeout: float = 60.0,
                 host: str = "127.0.0.1", settings: dict[str, Any] | None = None):
        super().__init__(data_dir, port, start_timeout=start_timeout, host=host)
        #: The role's password (generated unless given).
        self.password = password or secrets.token_urlsafe(18)
        #: Extra ``postgresql.conf`` settings (name -> value), e.g. ``{"fsync": "off"}``.
        self.settings = dict(settings or {})

    # --- what a user of it wants --------------------------------------------------------
    def dsn(self, dbname: str = DATABASE) -> str:
        """A libpq connection string for the ``squall`` role and database."""
        if self.port is None:
            raise PostgresUnavailable("LocalPostgres is not started")
        from psycopg.conninfo import make_conninfo  # quotes a given password with spaces
        return make_conninfo(host=self.host, port=self.port, dbname=dbname, user=ROLE,
                             password=self.password, connect_timeout=5)

    def connect(self, **kwargs: Any):
        """A psycopg connection (autocommit unless told otherwise; the caller closes it)."""
        import psycopg
        kwargs.setdefault("autocommit", True)
        return psycopg.connect(self.dsn(), **kwargs)

    def banner(self) -> str:
        return f"connect with: {self.dsn()}"

    @property
    def data_path(self) -> str:
        assert self.dir is not None
        return os.path.join(self.dir, "data")

    # --- LocalServer's hooks ------------------------------------------------------------
    def _program(self) -> str:
        return installation()

    def _unavailable(self, message: str) -> Exception:
        return PostgresUnavailable(message)

    def _spawn(self, bindir: str) -> subprocess.Popen:
        assert self.dir is not None
        user = _server_user()
        if user is not None:  # the server's account owns its directory
            os.chown(self.dir, user.pw_uid, user.pw_gid)
        ids = {} if user is None else {"user": user.pw_uid, "group": user.pw_gid,
                                       "extra_groups": []}
        if not os.path.exists(os.path.join(self.data_path, "PG_VERSION")):
            self._initdb(bindir, ids)
        cmd = [os.path.join(bindir, "postgres"), "-D", self.data_path,
               "-c", f"listen_addresses={self.host}", "-c", f"port={self.port}",
               "-c", "unix_socket_directories=", "-c", "logging_collector=off"]
        for name, value in self.settings.items():
            cmd += ["-c", f"{name}={value}"]
        with open(self.log_path(), "ab") as out:
            if user is not None:
                os.fchown(out.fileno(), user.pw_uid, user.pw_gid)
            as_user = None if user is None else (user.pw_uid, user.pw_gid)
            return subprocess.Popen(dies_with_parent(cmd, as_user), stdin=subprocess.DEVNULL,
                                    stdout=out, stderr=subprocess.STDOUT, cwd=self.dir,
                                    start_new_session=True)

    def _initdb(self, bindir: str, ids: dict) -> None:
        assert self.dir is not None
        pwfile = os.path.join(self.dir, "pwfile")
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(self.password + "\n")
        if ids:
            os.chown(pwfile, ids["user"], ids["group"])
        try:
            done = subprocess.run(
                [os.path.join(bindir, "initdb"), "-D", self.data_path, "-U", ROLE,
                 f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8", "--locale=C",
                 "--no-sync"],  # a throwaway cluster: its creation need not reach the disk
                cwd=self.dir, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                timeout=self.start_timeout, **ids)
        finally:
            os.unlink(pwfile)
        if done.returncode != 0:
            raise PostgresUnavailable(f"initdb failed in {self.data_path} (exit "
                                      f"{done.returncode}): {(done.stderr or done.stdout)[-2000:]}")

    def _serving(self) -> bool:
        if self._proc is None or self.port is None:
            return False
        import psycopg
        try:
            with psycopg.connect(host=self.host, port=self.port, dbname="postgres", user=ROLE,
                                 password=self.password, connect_timeout=1,
                                 autocommit=True) as conn:
                # Something else may hold the port: ours serves our data directory.
                if conn.execute("SHOW data_directory").fetchone()[0] != self.data_path:
                    return False
                if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                    (DATABASE,)).fetchone():
                    conn.execute(f"CREATE DATABASE {DATABASE} OWNER {ROLE}")
                return True
        except psycopg.Error:
            return False

    def restart(self) -> "LocalPostgres":
        """Stop the server (a fast shutdown) and start it again on the same port and data."""
        if self._proc is None:
            raise PostgresUnavailable("LocalPostgres.restart: it is not running")
        self.stop(_keep_dir=True)
        self._proc = self._spawn(self._program())
        try:
            self._wait_serving()
        except Exception:
            self.stop()
            raise
        atexit.register(self.stop)
        return self

    def stop(self, grace: float = 10.0, *, _keep_dir: bool = False) -> None:
        # SIGINT is PostgreSQL's fast shutdown (SIGTERM, "smart", waits for every client
        # to leave, and a worker's pool may never); the base class's SIGTERM follows.
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                os.kill(proc.pid, signal.SIGINT)
                proc.wait(timeout=grace)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        super().stop(grace, _keep_dir=_keep_dir)


def main(argv: list[str] | None = None) -> int:
    """Run a LocalPostgres in the foreground until Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m squall.deploy.postgres",
                                     description=main.__doc__)
    parser.add_argument("--port", type=int, default=5432,
                        help="port (default 5432; 0 = any free port)")
    parser.add_argument("--dir", default=None, help="directory to keep (default: temporary)")
    parser.add_argument("--password", default=None,
                        help="the squall role's password (default: generated and printed)")
    args = parser.parse_args(argv)
    server = LocalPostgres(args.dir, args.port or None, password=args.password)
    code = run_foreground(server, PostgresUnavailable)
    return code


if __name__ == "__main__":
    sys.exit(main())
