"""Word count into PostgreSQL: each word's running count upserted by JdbcInsertBolt.

    sentences --shuffle--> split --fields(word)--> count --fields(word)--> to-postgres

``count`` emits each word's new count anchored to the word; ``to-postgres`` upserts it in
batches (``INSERT ... ON CONFLICT (word) DO UPDATE``, JDBC's ``?`` placeholders) and acks
a batch's tuples once its transaction committed, so a sentence's tuple tree completes only
when its ten counts are in the table. Both hops are grouped by word, so one word's counts
arrive in order, and ``GREATEST`` keeps a replayed (older) count from lowering a newer one:
the table ends at each word's total.

The bolt's database is the topology conf's ``jdbc.conf`` (storm-jdbc's HikariCP map, or a
connection string): ``squall local`` starts a private PostgreSQL for the file's
``POSTGRES_TABLES``, creates them and sets ``jdbc.conf``; its ``report`` reads the table
back and compares it with the exact counts.

Run it:  squall local examples/jdbc_word_count.py --duration 20
On a cluster:  squall jar examples jdbc_word_count -c 'jdbc.conf=host=HOST dbname=DB user=U'
               (create the table first: POSTGRES_TABLES below has its columns)
Settings: -c wordcount.sentences=N (sentences the spout emits; default 20000).
"""

from __future__ import annotations

from squall.client import TopologyBuilder
from squall.connectors.jdbc import JdbcConfig, JdbcInsertBolt, SimpleJdbcMapper

from word_count import (SENTENCES_KEY, RunningCount, SentenceSpout, SplitSentence,
                        expected_counts, make_pool)

NAME = "jdbc-word-count"
#: The tables ``squall local`` creates in the PostgreSQL it starts: name -> columns.
POSTGRES_TABLES = {"word_counts": "word text PRIMARY KEY, count bigint NOT NULL"}
CONF = {"topology.workers": 2, "topology.max.spout.pending": 2000}

UPSERT = ("INSERT INTO word_counts (word, count) VALUES (?, ?) ON CONFLICT (word) "
          "DO UPDATE SET count = GREATEST(word_counts.count, EXCLUDED.count)")


def topology() -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(), 2)
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", RunningCount(), 2).fields_grouping("split", ["word"])
    b.set_bolt("to-postgres", JdbcInsertBolt(JdbcConfig(), SimpleJdbcMapper(["word", "count"]),
                                             insert_query=UPSERT, batch_size=500), 2
               ).fields_grouping("count", ["word"])
    return b


def report(conf: dict) -> None:
    """What ``squall local`` prints when it stops: the stored counts against the exact ones."""
    config = JdbcConfig().resolve(conf)
    with config.connect(autocommit=True) as conn:
        stored = dict(conn.execute("SELECT word, count FROM word_counts").fetchall())
    expected = expected_counts(make_pool(), int(conf.get(SENTENCES_KEY, 20_000)))
    top = sorted(stored.items(), key=lambda kv: -kv[1])[:5]
    print(f"[jdbc_word_count] {sum(stored.values())} words counted in table word_counts "
          f"({config.describe()}), {len(stored)} distinct; top: "
          f"{', '.join(f'{w}={c}' for w, c in top)}", flush=True)
    short = sum(1 for w, c in expected.items() if stored.get(w, 0) < c)
    print(f"[jdbc_word_count] counts match the input exactly: "
          f"{'yes' if stored == dict(expected) else 'NO'} ({short} word(s) short of their "
          "total)", flush=True)


def main(args: list[str]) -> None:
    """``squall jar examples jdbc_word_count [NAME]``."""
    from squall.client.submitter import submit_topology
    submit_topology(args[0] if args else NAME, CONF, topology())
