#!/usr/bin/env python3
"""Trident word count against the acker word count, in the same run.

Run from the repo root:  .venv/bin/python bench/trident.py [--quick]

Baseline: the acker word count of bench/bench.py (2 workers, every sentence a
tracked tuple tree; steady words/s). Trident: the same sentences as two line
files, ``each(Split) -> group_by(word) -> persistent_aggregate(Count)`` into a
private Redis (transactional map), transactional state in a private ZooKeeper,
2 workers, at two batch sizes (lines per file per batch). Reported: words/s and
batches/s from the first committed batch to the last (Redis holds every count),
and the ratio to the baseline. Progress on stderr; JSON to bench/results/trident.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench as B  # noqa: E402  (the acker baseline and its helpers)

from squall.client.trident.line_files import TransactionalLineFiles  # noqa: E402
from squall.client.trident.state.redis_map import RedisMapState  # noqa: E402


def write_input(sentences: int, out_dir: str) -> tuple[list[str], int]:
    """The word count's sentence pool split over two files; returns (paths, words)."""
    sys.path.insert(0, os.path.join(REPO, "examples"))
    from word_count import make_pool
    pool = make_pool()
    paths = [os.path.join(out_dir, f"part-{i}.txt") for i in range(2)]
    words = 0
    with open(paths[0], "w") as a, open(paths[1], "w") as b:
        for i in range(sentences):
            s = pool[i % len(pool)]
            (a if i % 2 == 0 else b).write(s + "\n")
            words += len(s.split())
    return paths, words


def stored(client, key: str) -> tuple[int, int]:
    """(words counted, highest txid) in the state's Redis hash."""
    total = top = 0
    for v in client.hgetall(key).values():
        txid, count = json.loads(v)
        total += count
        top = max(top, txid)
    return total, top


def run_trident(paths: list[str], words: int, batch_lines: int, zk, redis_server,
                tx_state: str = "zookeeper", pending: int = 4) -> dict:
    from squall.deploy.static import StaticCluster
    import trident_topologies as tt

    prefix = f"bench-{batch_lines}-{int(time.time())}:"
    conf = {"topology.workers": 2, "topology.max.spout.pending": pending,
            "topology.trident.batch.emit.interval.millis": 1,
            "topology.message.timeout.secs": 60, **zk.conf(root=f"/bench-{prefix[:-1]}"),
            **redis_server.conf(key_prefix=prefix), "trident.transactional.state": tx_state}
    factory = RedisMapState.transactional(None, "counts")
    topology = tt.word_count(TransactionalLineFiles(paths, batch_lines), factory)
    lc = StaticCluster(f"trident-{batch_lines}", topology, conf, code_paths=[HERE],
                       stdout=subprocess.DEVNULL)
    client = redis_server.client()
    key = factory.hash_key(lc.conf)
    res: dict = {"batch_lines_per_file": batch_lines, "words": words}
    try:
        lc.start()
        B.log(f"trident, {batch_lines} lines per file per batch: {words:,} words, 2 workers")
        deadline = time.monotonic() + 600
        t_first = None
        next_progress = time.monotonic() + 5
        first_txid = 0
        while True:
            total, top = stored(client, key)
            now = time.monotonic()
            if total and t_first is None:
                t_first, first_words, first_txid = now, total, top
            if total >= words:
                break
            if lc.crashed():
                raise RuntimeError("\n".join(lc.describe_exit(w) for w in lc.crashed()))
            if now > deadline:
                raise TimeoutError(f"only {total} of {words} words counted")
            if now >= next_progress:
                B.log(f"  {total / words:5.1%} counted (txid {top})")
                next_progress = now + 5
            time.sleep(0.02)
        secs = now - t_first
        res.update(exact=(total == words), seconds=secs, batches=top - first_txid,
                   words_per_s=(total - first_words) / secs, batches_per_s=(top - first_txid) / secs)
        B.log(f"  {res['words_per_s']:,.0f} words/s, {res['batches_per_s']:.1f} batches/s "
              f"over {secs:.1f}s (counts exact: {res['exact']})")
    finally:
        client.close()
        lc.stop(drain_secs=0)
        lc.cleanup()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer sentences")
    ap.add_argument("--tx-state", choices=("zookeeper", "memory"), default="zookeeper",
                    help="where the coordinators keep txids and batch metadata (diagnostic: "
                         "memory shows what ZooKeeper's writes cost)")
    ap.add_argument("--pending", type=int, default=4,
                    help="topology.max.spout.pending: batches in flight")
    args = ap.parse_args(argv)
    from squall.deploy.redis import LocalRedis
    from squall.deploy.zookeeper import LocalZooKeeper

    sentences = 20_000 if args.quick else 100_000
    out_dir = tempfile.mkdtemp(prefix="sqbench-trident-")
    paths, words = write_input(sentences, out_dir)
    results: dict = {"sentences": sentences, "tx_state": args.tx_state,
                     "max_spout_pending": args.pending}
    baseline = B.run_throughput(True, sentences, 2, 2000)
    results["acker_word_count"] = {k: baseline[k] for k in ("steady_words_per_s",
                                                           "overall_words_per_s", "wall_s")}
    with LocalZooKeeper() as zk, LocalRedis() as redis_server:
        for batch_lines in (100, 1000):
            results[f"trident_{batch_lines}"] = run_trident(paths, words, batch_lines, zk,
                                                             redis_server, args.tx_state,
                                                             args.pending)
    base = baseline["steady_words_per_s"]
    print(f"\nTrident word count vs the acker word count ({sentences:,} sentences, "
          f"{words:,} words, 2 workers)\n")
    print(f"{'run':<34}{'words/s':>12}{'batches/s':>12}{'vs acker':>10}")
    print(f"{'acker word count (steady)':<34}{base:>12,.0f}{'':>12}{1.0:>9.2f}x")
    for batch_lines in (100, 1000):
        r = results[f"trident_{batch_lines}"]
        label = f"trident, {2 * batch_lines} lines/batch"
        print(f"{label:<34}{r['words_per_s']:>12,.0f}{r['batches_per_s']:>12.1f}"
              f"{r['words_per_s'] / base:>9.2f}x   exact: {r['exact']}")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = os.path.join(HERE, "results", "trident.json")
    with open(path, "w") as fh:
        json.dump(results, fh, indent=2)
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
