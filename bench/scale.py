#!/usr/bin/env python3
"""Scale: the acked word count with a 100k-word vocabulary and with 10x the sentences,
against the default workload in the same run.

Run from the repo root:  .venv/bin/python bench/scale.py [--sentences N] [--rounds R]

Three runs a round (bench.py's acked throughput run, 2 workers): the default workload (N
sentences over the 1,000-word vocabulary), the same N over a 100,000-word vocabulary (keys
in the fields grouping and the count bolt's map grow 100x), and 10 N sentences over the
default vocabulary (10x the run length). Reported: steady words/s of each as a ratio to the
default run of its round (target: within 15%), and each worker's RSS when the run reached
10%, 50%, 90% and 100% of its sentences (flat after warm-up: the 10N run's RSS at 100%
against its RSS at 50%; at 10% the workers are still filling their queues and maps).
Writes bench/results/scale.json. No assertions.
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

VOCAB = 100_000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-pending", type=int, default=5000)
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "scale.json"))
    args = ap.parse_args(argv)
    n = args.sentences
    runs = (("default", n, {}), (f"vocab {VOCAB // 1000}k", n, {"bench.vocab": VOCAB}),
            ("10x sentences", 10 * n, {}))
    R: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "git": bench._git_describe(),
               "cpus": os.cpu_count(), "sentences": n, "rounds": []}
    for r in range(args.rounds):
        row = {}
        for name, sentences, extra in runs:
            bench.log(f"round {r + 1}: {name} ({sentences:,} sentences)")
            row[name] = bench.run_throughput(True, sentences, 2, args.max_pending, extra=extra)
        R["rounds"].append(row)
    print()
    print(f"{'run':16} {'words/s':>10} {'vs default':>10}   "
          "RSS MB per worker at 10% / 50% / 90% / 100%")
    ratios: dict[str, list[float]] = {}
    for row in R["rounds"]:
        base = row["default"]["steady_words_per_s"]
        for name, _, _ in runs:
            res = row[name]
            ratio = res["steady_words_per_s"] / base
            ratios.setdefault(name, []).append(ratio)
            at = res.get("rss_mb_at", {})
            rss = " / ".join(",".join(f"{v:.0f}" for v in at.get(k, [])) for k in
                             ("10%", "50%", "90%", "100%"))
            print(f"{name:16} {res['steady_words_per_s']:>10,.0f} {ratio:>9.2f}x   {rss}")
    print()
    R["median_ratio"] = {k: statistics.median(v) for k, v in ratios.items()}
    for name, _, _ in runs[1:]:
        m = R["median_ratio"][name]
        print(f"target: {name} within 15% of default: {m:.2f}x "
              f"{'yes' if m >= 0.85 else 'NO'}")
    long = R["rounds"][-1]["10x sentences"].get("rss_mb_at", {})
    if "50%" in long and "100%" in long:
        growth = [b / a for a, b in zip(long["50%"], long["100%"]) if a]
        R["rss_growth_10x_run_after_half"] = growth
        print("RSS of the 10x run, 100% / 50%: " + ", ".join(f"{g:.2f}" for g in growth))
    os.makedirs(os.path.dirname(args.json_out), exist_ok=True)
    with open(args.json_out, "w") as fh:
        json.dump(bench._json_safe(R), fh, indent=1)
    print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
