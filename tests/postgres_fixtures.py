"""PostgreSQL fixtures for the JDBC connector's tests.

Fixtures (registered through ``tests/conftest.py``):

``postgres``     session-scoped :class:`~squall.deploy.postgres.LocalPostgres`, started once on a
                 free loopback port in a temporary directory and stopped by pid at the end; the
                 test is skipped, with the reason, only if Debian's PostgreSQL is not installed.
``pg``           an autocommit psycopg connection to it (closed afterwards).
``pg_table``     a table name of this test's own (``t_<hex>``); every table of the test's
                 name is dropped afterwards and, if the test failed, the server's log tail is
                 printed.
"""

from __future__ import annotations

import uuid

import pytest

from squall.deploy.postgres import LocalPostgres, PostgresUnavailable, installation
from server_fixtures import session_server, tail_if_failed


@pytest.fixture(scope="session")
def postgres():
    """One LocalPostgres for the whole test session."""
    yield from session_server(installation, PostgresUnavailable, LocalPostgres)


@pytest.fixture
def pg(postgres):
    conn = postgres.connect()
    yield conn
    conn.close()


@pytest.fixture
def pg_table(request, postgres, pg):
    failed_before = request.session.testsfailed
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    if postgres.running():
        for (t,) in pg.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE %s",
                               (name + "%",)).fetchall():
            pg.execute(f'DROP TABLE IF EXISTS "{t}"')
    tail_if_failed(request, failed_before, postgres)
