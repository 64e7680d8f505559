#!/usr/bin/env python3
"""The word count writing exactly-once files against bench.py's acked word count, in one run.

Run from the repo root:  .venv/bin/python bench/files.py [--sentences N] [--rounds R]

Each round runs these, back to back, the order rotating from round to round:

* ``acked``: bench.py's acked word count (2 workers, spout -> split -> count by word, every
  tree acked; the count a dict per task), the baseline;
* ``sink``: the same topology under barrier checkpointing (exactly-once, no acker) with a
  :class:`~squall.connectors.files.FileSinkBolt` at its end in the count's place: each word
  written as a line into a temp directory, published at the checkpoints. Its ratio is the
  price of exactly-once files over an in-memory dict update;
* ``count+sink``: a stateful count (its KeyValueState in memory) emitting ``[word, count]``
  to the file sink, one stage more (``word,count`` lines).

Checkpoints every ``--interval-ms`` (each an fsync and two manifest writes per sink task),
files rotating at 64 MB. Measured: words the sink wrote per second, steady (10% to 90%).
Reported: each variant's median and its ratio to ``acked`` of the same round (issue 27's
target for the sink: 0.8x), and how many lines were published. Writes
bench/results/files.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402  (bench/bench.py: the runner and its word-count topology)

try:
    from squall.bench import file_topologies as FT
except ImportError:  # squall installed without bench/
    import file_topologies as FT  # type: ignore[no-redef]


def lines_in(out_dir: str) -> int:
    n = 0
    for name in os.listdir(out_dir):
        if not name.startswith("."):
            with open(os.path.join(out_dir, name), "rb") as fh:
                n += sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return n


def run_files(n: int, max_pending: int, interval_ms: int, counting: bool) -> dict:
    out_dir = tempfile.mkdtemp(prefix="sqbench-files-")
    try:
        extra = {"topology.state.checkpoint.mode": "barrier",
                 "topology.state.checkpoint.interval.ms": interval_ms,
                 "topology.state.provider": "memory"}
        res = bench.run_throughput(False, n, 2, max_pending, extra=extra,
                                   builder=FT.file_word_count(out_dir, counting=counting))
        hidden = [x for x in os.listdir(out_dir) if x.startswith(".") and x != ".squall-sink"]
        res["published_lines"] = lines_in(out_dir)
        res["in_progress_files"] = len(hidden)
        return res
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


VARIANTS = ("acked", "sink", "count+sink")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=300_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-pending", type=int, default=2000)
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "files.json"))
    a = ap.parse_args(argv)
    names = a.variants.split(",")
    runs: dict[str, list[float]] = {k: [] for k in names}
    ratios: dict[str, list[float]] = {k: [] for k in names}
    for r in range(a.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        got = {}
        for name in order:
            bench.log(f"round {r + 1}: {name}")
            if name == "acked":
                res = bench.run_throughput(True, a.sentences, 2, a.max_pending)
            else:
                res = run_files(a.sentences, a.max_pending, a.interval_ms, name == "count+sink")
                bench.log(f"  {res['published_lines']:,} lines published of "
                          f"{a.sentences * bench.WORDS_PER_SENTENCE:,} (the rest in the "
                          f"{res['in_progress_files']} open files, published at rotation)")
            got[name] = res["steady_words_per_s"]
            runs[name].append(got[name])
        if "acked" in got:
            for name in names:
                ratios[name].append(got[name] / got["acked"])
    med = {k: statistics.median(v) for k, v in runs.items()}
    ratio = {k: statistics.median(v) for k, v in ratios.items() if v}
    print(f"\n{'variant':12}{'words/s':>12}{'x acked':>9}  rounds (words/s; ratio)")
    for k in names:
        print(f"{k:12}{med[k]:12,.0f}{ratio.get(k, float('nan')):9.2f}  "
              f"{', '.join(f'{x:,.0f}' for x in runs[k])}; "
              f"{', '.join(f'{x:.2f}' for x in ratios[k])}")
    if "sink" in ratio:
        print(f"\nexactly-once file sink / acked word count: {ratio['sink']:.2f}x median "
              f"(target 0.8x: {'met' if ratio['sink'] >= 0.8 else 'NOT met'})")
    os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
    with open(a.json_out, "w") as fh:
        json.dump({"date": time.strftime("%Y-%m-%d %H:%M:%S"), "git": bench._git_describe(),
                   "args": vars(a), "runs": runs, "ratios": ratios, "median": med,
                   "ratio": ratio}, fh, indent=1)
    print(f"wrote {a.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
