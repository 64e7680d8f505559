"""storm-jdbc on PostgreSQL (psycopg 3): bolts that insert and look up rows, a Trident map
state and a stateful bolts' state.

* :class:`JdbcInsertBolt`, :class:`JdbcLookupBolt` (bolt.py), with storm-jdbc's mappers
  :class:`SimpleJdbcMapper`, :class:`SimpleJdbcLookupMapper` (mapper.py);
* :class:`JdbcMapState` (trident.py): Trident's transactional, opaque and non-transactional
  map states in a table, the txid stored with each value;
* :class:`JdbcKeyValueStateProvider` (state.py): stateful bolts' state in PostgreSQL
  (``topology.state.provider: postgres``);
* :class:`JdbcConfig` (config.py): where they connect, storm-jdbc's HikariCP map or libpq's
  connection string.

Needs the ``jdbc`` extra (``pip install 'squall[jdbc]'``).
"""

from ...client import extras

extras.require("jdbc", "squall.connectors.jdbc")

from .bolt import JdbcInsertBolt, JdbcLookupBolt  # noqa: E402
from .config import JdbcConfig  # noqa: E402
from .mapper import (Column, JdbcLookupMapper, JdbcMapper, MappingError,  # noqa: E402
                     SimpleJdbcLookupMapper, SimpleJdbcMapper)

__all__ = ["Column", "JdbcConfig", "JdbcInsertBolt", "JdbcLookupBolt", "JdbcLookupMapper",
           "JdbcMapper", "MappingError", "SimpleJdbcLookupMapper", "SimpleJdbcMapper"]
