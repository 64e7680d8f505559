#!/usr/bin/env python3
"""The acked word count read from a Redis stream (RedisStreamSpout) against bench.py's own
acked word count, in the same run.

Run from the repo root:  .venv/bin/python bench/redis_streams.py [--sentences N] [--rounds R]

A private Redis (Debian's redis-server, deploy/redis.py) on a free loopback port holds a
stream of N sentences (the word count's pool, one entry each); the topology is bench.py's
word count (2 workers: spout -> split -> count by word, every tree acked) with the spout
replaced by ``RedisStreamSpout(stream, translator=EntryTranslator(["sentence"]))``, two
tasks in one consumer group. Reported: steady words/s of each (10% to 90% of the acked
sentences) and the median of each round's ratio (the two runs of a round alternate which
goes first); issue 27's target is 0.7x. Each round makes a new group, so the
spout reads the whole stream again. Writes bench/results/redis_streams.json. No assertions.
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

STREAM = "bench:sentences"


def fill(client, n: int) -> float:
    """The stream holds sentences 0..n-1 (made again); seconds it took."""
    t0 = time.monotonic()
    client.delete(STREAM)
    pool = topo.make_pool()
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(STREAM, {"sentence": pool[i % len(pool)]})
        if i % 2000 == 1999:
            pipe.execute()
    pipe.execute()
    return time.monotonic() - t0


def stream_word_count(group: str, batch: int):
    def build(parallelism: int = 2):
        from squall.client import TopologyBuilder
        from squall.connectors.redis import EntryTranslator, RedisStreamSpout
        b = TopologyBuilder()
        b.set_spout(topo.SPOUT, RedisStreamSpout(STREAM, group=group, batch=batch,
                                                 translator=EntryTranslator(["sentence"])),
                    parallelism)
        b.set_bolt(topo.SPLIT, topo.SplitSentence(), parallelism).shuffle_grouping(topo.SPOUT)
        b.set_bolt(topo.COUNT, topo.CountWords(), parallelism).fields_grouping(
            topo.SPLIT, ["word"])
        return b
    return build


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    # A million: each run's steady window is long enough to be more than the machine's noise.
    ap.add_argument("--sentences", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=500, help="entries a spout reads at once")
    ap.add_argument("--max-pending", type=int, default=5000)
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "redis_streams.json"))
    a = ap.parse_args(argv)
    from squall.deploy.redis import LocalRedis
    runs: dict[str, list[float]] = {"word count": [], "from a Redis stream": []}
    #: Each round's stream run over its own word count run.
    ratios: list[float] = []
    with LocalRedis() as server:
        client = server.client()
        try:
            bench.log(f"filling {STREAM} with {a.sentences:,} sentences")
            bench.log(f"  {fill(client, a.sentences):.1f} s")
            for r in range(1, a.rounds + 1):
                group = f"bench-{r}-{os.getpid()}"

                def plain() -> None:
                    res = bench.run_throughput(True, a.sentences, 2, a.max_pending)
                    runs["word count"].append(res["steady_words_per_s"])

                def from_stream() -> None:
                    res = bench.run_throughput(True, a.sentences, 2, a.max_pending,
                                               extra=server.conf(),
                                               builder=stream_word_count(group, a.batch))
                    runs["from a Redis stream"].append(res["steady_words_per_s"])

                # Alternating which runs first: a slow spell of the machine falls on both.
                for run in ((plain, from_stream) if r % 2 else (from_stream, plain)):
                    run()
                ratios.append(runs["from a Redis stream"][-1] / runs["word count"][-1])
                info = [g for g in client.xinfo_groups(STREAM)
                        if g["name"].decode() == group][0]
                bench.log(f"round {r}: group {group}: read {info['entries-read']:,}, "
                          f"{info['pending']} pending; ratio {ratios[-1]:.2f}x")
        finally:
            client.close()
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratio = statistics.median(ratios)
    print()
    for k, v in runs.items():
        print(f"{k:<22}{med[k]:>14,.0f} words/s   rounds: "
              f"{', '.join(f'{x / 1e6:.2f}M' for x in v)}")
    print(f"\nRedis stream spout / word count, median of the rounds' ratios: {ratio:.2f}x "
          f"(rounds: {', '.join(f'{x:.2f}' for x in ratios)}; target 0.7x: "
          f"{'met' if ratio >= 0.7 else 'NOT met'})")
    os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
    with open(a.json_out, "w") as fh:
        json.dump({"date": time.strftime("%Y-%m-%d %H:%M:%S"), "git": bench._git_describe(),
                   "sentences": a.sentences, "batch": a.batch, "runs": runs, "median": med,
                   "ratios": ratios, "ratio": ratio}, fh, indent=1)
    print(f"wrote {a.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
