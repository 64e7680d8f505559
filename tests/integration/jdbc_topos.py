"""Topologies of the JDBC connector's tests (tests/integration/test_jdbc_*.py)."""

from __future__ import annotations

from squall.client import BasicBolt, TopologyBuilder
from squall.connectors.jdbc import (JdbcConfig, JdbcInsertBolt, JdbcLookupBolt,
                                    SimpleJdbcLookupMapper, SimpleJdbcMapper)
from topos import NumberSpout, RecordingBolt


class Row(BasicBolt):
    """``[i]`` -> ``[i, "word<i>"]``."""

    def execute(self, tup, collector):
        i = tup.values[0]
        collector.emit([i, f"word{i}"])

    def declare_output_fields(self, declarer):
        declarer.declare(["n", "word"])


def insert(config: JdbcConfig, table: str, parallelism: int = 2) -> TopologyBuilder:
    """numbers -> (n, word) -> JdbcInsertBolt(table): a row per number."""
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("row", Row(), 2).shuffle_grouping("numbers")
    b.set_bolt("insert", JdbcInsertBolt(config, SimpleJdbcMapper(), table_name=table,
                                        batch_size=50, flush_interval_secs=0.2),
               parallelism).shuffle_grouping("row")
    return b


def lookup(config: JdbcConfig, table: str) -> TopologyBuilder:
    """numbers -> (n, word) -> the rows of ``table`` with that n -> recorded
    ``got <n> <label>``."""
    b = TopologyBuilder()
    b.set_spout("numbers", NumberSpout(), 2)
    b.set_bolt("row", Row(), 2).shuffle_grouping("numbers")
    b.set_bolt("lookup", JdbcLookupBolt(config, f"SELECT label FROM {table} WHERE n = ?",
                                        SimpleJdbcLookupMapper(["n", "label"], ["n"])), 2
               ).shuffle_grouping("row")
    b.set_bolt("sink", RecordingBolt(), 1).shuffle_grouping("lookup")
    return b


def stream_to_table(stream: str, config: JdbcConfig, table: str) -> TopologyBuilder:
    """RedisStreamSpout(stream) -> JdbcInsertBolt(insert_query, ON CONFLICT DO NOTHING): a
    replayed entry finds its row there already."""
    from squall.connectors.redis import RedisStreamSpout
    from squall.connectors.redis.streams import EntryTranslator
    b = TopologyBuilder()
    b.set_spout("entries", RedisStreamSpout(stream, batch=100,
                                            translator=EntryTranslator(["n", "text"])), 2)
    b.set_bolt("insert", JdbcInsertBolt(
        config, SimpleJdbcMapper(["n", "text"]),
        insert_query=f"INSERT INTO {table} (n, text) VALUES (?, ?) ON CONFLICT (n) DO NOTHING",
        batch_size=200, flush_interval_secs=0.2), 2).shuffle_grouping("entries")
    return b
