#!/usr/bin/env python3
"""What CurveZMQ costs: the acked word count with encrypted worker traffic against plain tcp.

Run from the repo root:  .venv/bin/python bench/curve.py [--rounds 3] [--sentences 150000]

Both workers of bench.py's word count talk over tcp:// (as across hosts; not ipc://). Each
round runs plain, then CurveZMQ (``storm.messaging.curve``), back to back, so every ratio
compares two runs minutes apart on the same noisy machine; the table gives each round's
ratio and their median. Writes bench/results/curve.json. No assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402  (bench/bench.py: the runner and its word-count topology)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sentences", type=int, default=150_000)
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "curve.json"))
    a = ap.parse_args(argv)
    rounds = []
    for i in range(a.rounds):
        row = {}
        for mode, curve in (("plain", False), ("curve", True)):
            bench.log(f"round {i + 1}/{a.rounds}: {mode} tcp")
            r = bench.run_throughput(True, a.sentences, 2, 5000,
                                     extra={"storm.messaging.curve": curve}, ipc=False)
            row[mode] = r["steady_words_per_s"]
            row[f"{mode}_cpu_pct"] = r.get("cpu_pct_per_worker_loaded")
        row["ratio"] = row["curve"] / row["plain"]
        rounds.append(row)
    med = statistics.median(r["ratio"] for r in rounds)
    print(f"{'round':>5}  {'plain tcp words/s':>18}  {'CurveZMQ words/s':>17}  {'ratio':>6}")
    for i, r in enumerate(rounds, 1):
        print(f"{i:>5}  {r['plain']:>18,.0f}  {r['curve']:>17,.0f}  {r['ratio']:>6.3f}")
    print(f"median ratio CurveZMQ / plain: {med:.3f} (cost {100 * (1 - med):.1f}%; "
          "target: under 15%)")
    os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
    with open(a.json_out, "w") as fh:
        json.dump({"rounds": rounds, "median_ratio": med, "sentences": a.sentences}, fh,
                  indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
