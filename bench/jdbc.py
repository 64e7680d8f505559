#!/usr/bin/env python3
"""Rows a second into PostgreSQL through JdbcInsertBolt, beside bench.py's acked word count
in the same run.

Run from the repo root:  .venv/bin/python bench/jdbc.py [--sentences N] [--rounds R]
                         [--batch-size B]

A private PostgreSQL (Debian's postgresql-15, deploy/postgres.py; its default settings:
fsync and synchronous commits on) on a free loopback port. The topology is bench.py's word
count (2 workers, every tree acked) with the count bolt replaced by
``JdbcInsertBolt(SimpleJdbcMapper(["word"]), table_name="bench_words")``: a row per word,
each acked only once the batch holding it committed. Reported: steady rows/s (the acked
words, 10% to 90% of the acked sentences), the word count's words/s and their ratio; issue
27's target is 50,000 rows/s. Each round starts from an empty table and checks at the end
that it holds every word once. Writes bench/results/jdbc.json. No assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402  (bench/bench.py: the runner and its word-count topology)

topo = bench.topo  # the module the workers import it as (squall.bench.topologies)

TABLE = "bench_words"
TARGET_ROWS_PER_S = 50_000


def insert_word_count(dsn: str, batch_size: int):
    def build(parallelism: int = 2):
        from squall.client import TopologyBuilder
        from squall.connectors.jdbc import JdbcConfig, JdbcInsertBolt, SimpleJdbcMapper
        b = TopologyBuilder()
        b.set_spout(topo.SPOUT, topo.BenchSentenceSpout(), parallelism)
        b.set_bolt(topo.SPLIT, topo.SplitSentence(), parallelism).shuffle_grouping(topo.SPOUT)
        b.set_bolt(topo.COUNT, JdbcInsertBolt(JdbcConfig(dsn), SimpleJdbcMapper(["word"]),
                                              table_name=TABLE, batch_size=batch_size),
                   parallelism).shuffle_grouping(topo.SPLIT)
        return b
    return build


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=1000, help="rows a transaction")
    ap.add_argument("--max-pending", type=int, default=5000)
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "jdbc.json"))
    a = ap.parse_args(argv)
    from squall.deploy.postgres import LocalPostgres
    runs: dict[str, list[float]] = {"word count": [], "into PostgreSQL": []}
    rows_seen: list[int] = []
    with LocalPostgres() as server, server.connect() as conn:
        for r in range(1, a.rounds + 1):
            res = bench.run_throughput(True, a.sentences, 2, a.max_pending)
            runs["word count"].append(res["steady_words_per_s"])
            conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
            conn.execute(f"CREATE TABLE {TABLE} (id bigserial PRIMARY KEY, word text NOT NULL)")
            res = bench.run_throughput(True, a.sentences, 2, a.max_pending,
                                       builder=insert_word_count(server.dsn(), a.batch_size))
            runs["into PostgreSQL"].append(res["steady_words_per_s"])
            rows = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
            rows_seen.append(rows)
            bench.log(f"round {r}: {rows:,} rows in {TABLE} (expected "
                      f"{a.sentences * bench.WORDS_PER_SENTENCE:,})")
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratio = med["into PostgreSQL"] / med["word count"]
    print()
    for k, v in runs.items():
        print(f"{k:<18}{med[k]:>14,.0f} words/s   rounds: "
              f"{', '.join(f'{x / 1e3:,.0f}k' for x in v)}")
    rows_ok = med["into PostgreSQL"] >= TARGET_ROWS_PER_S
    print(f"\nJdbcInsertBolt: {med['into PostgreSQL']:,.0f} rows/s, {ratio:.2f}x the word count "
          f"(target {TARGET_ROWS_PER_S:,} rows/s: {'met' if rows_ok else 'NOT met'}); "
          f"rows in the table: {', '.join(f'{x:,}' for x in rows_seen)}")
    os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
    with open(a.json_out, "w") as fh:
        json.dump({"date": time.strftime("%Y-%m-%d %H:%M:%S"), "git": bench._git_describe(),
                   "sentences": a.sentences, "batch_size": a.batch_size, "runs": runs,
                   "median": med, "ratio": ratio, "rows": rows_seen}, fh, indent=1)
    print(f"wrote {a.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
