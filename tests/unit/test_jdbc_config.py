"""The JDBC connector's pure parts: JdbcConfig's forms (libpq, HikariCP, jdbc.conf), JDBC's
``?`` placeholders in psycopg's form, the mappers."""

from __future__ import annotations

import pytest

pytest.importorskip("psycopg")

from squall.client.config import redact  # noqa: E402
from squall.client.tuple import Fields, Tuple  # noqa: E402
from squall.connectors.jdbc import (Column, JdbcConfig, MappingError,  # noqa: E402
                                    SimpleJdbcLookupMapper, SimpleJdbcMapper)
from squall.connectors.jdbc.mapper import placeholders, to_psycopg  # noqa: E402

HIKARI = {"dataSourceClassName": "org.postgresql.ds.PGSimpleDataSource",
          "dataSource.url": "jdbc:postgresql://db.example:5433/shop?ApplicationName=x",
          "dataSource.user": "squall", "dataSource.password": "s3cret"}


@pytest.mark.parametrize("given, params", [
    (("host=db port=5433 dbname=shop user=squall",), {"host": "db", "port": "5433",
                                                       "dbname": "shop", "user": "squall"}),
    (("postgresql://squall:pw@db:5433/shop",), {"host": "db", "port": "5433",
                                                 "dbname": "shop", "user": "squall",
                                                 "password": "pw"}),
])
def test_libpq_forms(given, params):
    c = JdbcConfig(*given)
    assert {k: c.params[k] for k in params} == params
    assert c.params["connect_timeout"] == 5 and c.params["application_name"] == "squall"


def test_storms_hikari_map():
    c = JdbcConfig(hikari=HIKARI)
    assert c.params["host"] == "db.example" and c.params["port"] == 5433
    assert c.params["dbname"] == "shop" and c.params["user"] == "squall"
    assert c.params["password"] == "s3cret" and c.params["application_name"] == "x"
    assert c.describe() == "PostgreSQL squall@db.example:5433/shop"
    assert "s3cret" not in repr(c) and "password=***" in repr(c)
    # PGSimpleDataSource's own properties, and jdbc:postgresql:db (localhost).
    c = JdbcConfig(hikari={"dataSource.serverName": "h", "dataSource.portNumber": 6000,
                           "dataSource.databaseName": "d"})
    assert (c.params["host"], c.params["port"], c.params["dbname"]) == ("h", 6000, "d")
    assert JdbcConfig(hikari={"jdbcUrl": "jdbc:postgresql:d"}).params["host"] == "localhost"


@pytest.mark.parametrize("kwargs, message", [
    ({"hikari": {"dataSourceClassName": "com.mysql.cj.jdbc.MysqlDataSource",
                 "dataSource.url": "jdbc:postgresql://h/d"}}, "only PostgreSQL"),
    ({"hikari": {"jdbcUrl": "jdbc:mysql://h/d"}}, "only PostgreSQL JDBC URLs"),
    ({"hikari": {"dataSource.user": "u"}}, "names no database"),
    ({"dsn": "host=h nosuchkey=1"}, "does not parse"),
    ({"dsn": "host=h", "connect_timeout_secs": 0}, "must be above 0"),
])
def test_mistakes_are_refused_when_the_topology_is_built(kwargs, message):
    with pytest.raises(ValueError, match=message):
        JdbcConfig(**kwargs)


def test_no_settings_reads_jdbc_conf_where_it_is_prepared():
    c = JdbcConfig(connect_timeout_secs=2)
    assert repr(c) == "JdbcConfig()" and "jdbc.conf" in c.describe()
    assert c.resolve({"jdbc.conf": "host=h dbname=d"}).params["connect_timeout"] == 2
    assert c.resolve({"jdbc.conf": HIKARI}).params["dbname"] == "shop"
    with pytest.raises(ValueError, match="jdbc.conf, which is unset"):
        c.resolve({})
    with pytest.raises(ValueError, match="jdbc.conf: .*names no database"):
        c.resolve({"jdbc.conf": {"x": 1}})


def test_passwords_in_a_conf_are_redacted_wherever_they_sit():
    shown = redact({"jdbc.conf": HIKARI, "a": "host=h password='p w' dbname=d",
                    "b": "postgresql://u:pw@h/d",
                    "topology.state.provider.config": '{"dsn": "host=h password=pw"}'})
    text = repr(shown)
    assert "s3cret" not in text and "p w" not in text and ":pw@" not in text
    assert "password=pw" not in text and "<redacted>" in shown["b"]


@pytest.mark.parametrize("query, expected, n", [
    ("SELECT a FROM t WHERE b = ? AND c = ?", "SELECT a FROM t WHERE b = %s AND c = %s", 2),
    ("SELECT '?' || ? FROM t -- a ? here\nWHERE x LIKE 'a%'",
     "SELECT '?' || %s FROM t -- a ? here\nWHERE x LIKE 'a%%'", 1),
    ("SELECT \"we?ird\" FROM t WHERE /* ? */ a = ? AND b = 'it''s ?'",
     "SELECT \"we?ird\" FROM t WHERE /* ? */ a = %s AND b = 'it''s ?'", 1),
    ("INSERT INTO t VALUES (%s, %s)", "INSERT INTO t VALUES (%s, %s)", 2),
])
def test_jdbc_placeholders_become_psycopgs(query, expected, n):
    assert to_psycopg(query) == expected
    assert placeholders(to_psycopg(query)) == n


def tup(fields, values):
    return Tuple(list(values), "src", "default", 1, None, Fields(fields))


def test_simple_mapper_takes_the_columns_fields_in_order():
    m = SimpleJdbcMapper(["b", Column("a", "integer")])
    assert m.values(tup(["a", "b", "c"], [1, 2, 3])) == [2, 1]
    with pytest.raises(MappingError, match=r"has no field 'b' \(its fields: a\)"):
        m.values(tup(["a"], [1]))
    with pytest.raises(ValueError, match="names column.* a twice"):
        SimpleJdbcMapper(["a", "a"])
    unresolved = SimpleJdbcMapper()
    unresolved.resolve(lambda: [Column("x")])
    assert unresolved.values(tup(["x"], [9])) == [9]


def test_lookup_mapper_takes_fields_from_the_input_then_the_row():
    m = SimpleJdbcLookupMapper(["user_id", "dept"], ["user_id"])
    t = tup(["user_id"], [7])
    assert m.params(t) == [7]
    assert m.to_values(t, {"dept": "eng", "user_id": 99}) == [[7, "eng"]]
    with pytest.raises(MappingError, match="'dept' is neither"):
        m.to_values(t, {"other": 1})


def test_a_topology_files_postgres_tables_are_checked(tmp_path):
    from squall.client.errors import SquallError
    from squall.deploy.topology_file import load_topology_file
    body = ("from squall.client import TopologyBuilder\n"
            "from squall.client.testing import TestWordSpout\n"
            "POSTGRES_TABLES = {tables}\n"
            "def topology():\n"
            "    b = TopologyBuilder()\n"
            "    b.set_spout('w', TestWordSpout(), 1)\n"
            "    return b\n")
    good = tmp_path / "good.py"
    good.write_text(body.format(tables="{'t': 'a text, n int'}"))
    assert load_topology_file(str(good)).postgres_tables == {"t": "a text, n int"}
    bad = tmp_path / "bad.py"
    bad.write_text(body.format(tables="{'t': ['a text']}"))
    with pytest.raises(SquallError, match="POSTGRES_TABLES must map table names to their columns"):
        load_topology_file(str(bad))


def test_redaction_leaves_values_without_a_secret_as_they_were():
    values = {"a": "UPDATE users SET password = x WHERE id = %s",   # SQL, not a conninfo
              "b": '{"city": "Zürich",  "n": 1}',                  # JSON kept to the byte
              "c": "http://example.com/a@b", "d": "me@example.com"}
    assert redact(values) == values
    shown = redact({"e": '  [{"password": "x"}]', "f": "PGPASSWORD=abc",
                    "g": "db_password=abc user=u", "h": "nats://tok@h:4222",
                    "i": "jdbc:postgresql://h/db?user=u&password=secret&ssl=true"})
    assert shown == {"e": '[{"password": "<redacted>"}]', "f": "PGPASSWORD=<redacted>",
                     "g": "db_password=<redacted> user=u", "h": "nats://<redacted>@h:4222",
                     "i": "jdbc:postgresql://h/db?user=u&password=<redacted>&ssl=true"}


@pytest.mark.parametrize("kwargs", [{"dsn": "host=h password=my secret"},
                                    {"dsn": "postgresql://u:pa%zzss@h/db"},
                                    {"hikari": {"dataSource.url": "postgresql://u:s3cret@h/db"}}])
def test_a_config_that_does_not_parse_never_shows_its_password(kwargs):
    with pytest.raises(ValueError) as e:
        JdbcConfig(**kwargs)
    assert "secret" not in str(e.value) and "zzss" not in str(e.value)
