#!/usr/bin/env python3
"""Latency against throughput: complete latency at 25%, 50% and 75% of the max acked rate,
quiet and with a CPU hog on one core (Storm's ThroughputVsLatency, on bench.py's word count).

Run from the repo root:  .venv/bin/python bench/latency.py [--quick] [--max-words W]

1. The max acked rate: bench.py's acked throughput run (steady words/s), unless
   ``--max-words`` gives it.
2. For each condition (quiet; then a busy loop pinned to CPU 0 for the whole condition) and
   each fraction, a fresh 2-worker cluster runs the token-bucket spout at that rate; the
   spout times each tree of the measured window from emit to ack (p50/p99/p99.9). Beside it,
   the runtime's own figure over the same window: the difference of the spouts'
   complete-latency histograms between the window's first and last heartbeats.

Prints the table, writes bench/results/latency.json and plots bench/results/latency.png
(matplotlib, from the ``bench`` extra). No assertions; the issue's targets are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402  (bench/bench.py: the runner and its word-count topology)

HOG = "import os\nos.sched_setaffinity(0, {0})\nwhile True:\n    pass\n"

#: Issue 13's targets at half the max acked rate (ms).
TARGETS = {"quiet": {"p99_ms": 5.0, "p999_ms": 10.0}, "hog": {"p99_ms": 20.0}}


def start_hog() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", HOG])


def stop_hog(p: subprocess.Popen) -> None:
    p.kill()
    p.wait(timeout=10)


def plot(R: dict, path: str) -> str | None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no plot"
    fig, ax = plt.subplots(figsize=(8, 5), dpi=110)
    colours = {"p50_ms": "tab:blue", "p99_ms": "tab:orange", "p999_ms": "tab:red"}
    for cond, style in (("quiet", "-"), ("hog", "--")):
        runs = R["runs"].get(cond) or []
        if not runs:
            continue
        xs = [r["achieved_sentences_per_s"] * bench.WORDS_PER_SENTENCE / 1e3 for r in runs]
        for key, colour in colours.items():
            ax.plot(xs, [r[key] for r in runs], style, marker="o", color=colour,
                    label=f"{key[:-3].replace('p999', 'p99.9')} {cond}")
    ax.set_yscale("log")
    ax.set_xlabel("acked words/s (thousands)")
    ax.set_ylabel("complete latency, spout-measured (ms)")
    ax.set_title(f"Squall acked word count, 2 workers: latency vs throughput "
                 f"(max {R['max_words_per_s'] / 1e3:.0f}k words/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(ncol=2, fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


def table(R: dict) -> None:
    print()
    print(f"{'condition':9} {'load':>5} {'offered':>9} {'achieved':>9}  "
          f"{'spout p50/p99/p99.9 ms':>24}  {'runtime p50/p99/p99.9 ms':>26}  thr")
    for cond, runs in R["runs"].items():
        for r in runs:
            rw = r["runtime_window"]
            print(f"{cond:9} {r['fraction']:>5.0%} {r['rate_words_per_s'] / 1e3:>8.0f}k "
                  f"{r['achieved_sentences_per_s'] * 10 / 1e3:>8.0f}k  "
                  f"{r['p50_ms']:>7.2f} {r['p99_ms']:>7.2f} {r['p999_ms']:>8.2f}  "
                  f"{rw['p50_ms']:>8.2f} {rw['p99_ms']:>8.2f} {rw['p999_ms']:>8.2f}  "
                  f"{r['throttled_fraction_in_window']:.0%}")
    print()
    for cond, want in TARGETS.items():
        half = [r for r in R["runs"].get(cond, []) if r["fraction"] == 0.5]
        for r in half:
            for key, lim in want.items():
                ok = "yes" if r[key] < lim else "NO"
                print(f"target {cond} at 50%: {key[:-3]} {r[key]:.2f} ms < {lim:g} ms: {ok}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short windows: a smoke run")
    ap.add_argument("--max-words", type=float, default=0,
                    help="the max acked words/s to scale from (default: measure it)")
    ap.add_argument("--fractions", default="0.25,0.5,0.75")
    ap.add_argument("--conditions", default="quiet,hog")
    ap.add_argument("--sentences", type=int, default=0,
                    help="sentences for the max-rate run (default 200k, quick 50k)")
    ap.add_argument("--parallelism", type=int, default=2)
    ap.add_argument("--max-pending", type=int, default=5000)
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "latency.json"))
    ap.add_argument("--png", default=os.path.join(HERE, "results", "latency.png"))
    args = ap.parse_args(argv)
    fractions = [float(f) for f in args.fractions.split(",")]
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    for c in conditions:
        if c not in ("quiet", "hog"):
            ap.error(f"--conditions: unknown condition {c!r} (quiet, hog)")
    R: dict = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "git": bench._git_describe(),
               "cpus": os.cpu_count(), "runs": {}}
    if args.max_words:
        R["max_words_per_s"] = args.max_words
        R["max_basis"] = "--max-words"
    else:
        n = args.sentences or (50_000 if args.quick else 200_000)
        bench.log(f"max acked rate: {n:,} sentences")
        r = bench.run_throughput(True, n, args.parallelism, args.max_pending)
        R["max_words_per_s"] = r["steady_words_per_s"]
        R["max_basis"] = "measured (bench.py acked, steady)"
        R["max_run"] = r
    bench.log(f"max acked: {R['max_words_per_s']:,.0f} words/s")
    for cond in conditions:
        hog = start_hog() if cond == "hog" else None
        try:
            for f in fractions:
                rate = f * R["max_words_per_s"] / bench.WORDS_PER_SENTENCE
                bench.log(f"[{cond}] {f:.0%} of max")
                r = bench.latency_at(rate, args.parallelism, args.max_pending, args.quick)
                r["fraction"] = f
                R["runs"].setdefault(cond, []).append(r)
        finally:
            if hog is not None:
                stop_hog(hog)
    table(R)
    os.makedirs(os.path.dirname(args.json_out), exist_ok=True)
    with open(args.json_out, "w") as fh:
        json.dump(bench._json_safe(R), fh, indent=1)
    print(f"wrote {args.json_out}")
    why = plot(R, args.png)
    print(why or f"wrote {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
