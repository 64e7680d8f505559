#!/usr/bin/env python3
"""Multi-lang: the acked word count with its split bolt as a shell component, against the
native split bolt in the same run.

Run from the repo root:  .venv/bin/python bench/multilang.py [--sentences N]

Variants of bench.py's acked throughput run (2 workers, 2 split tasks): ``native`` (the
Python BasicBolt), ``json`` and ``msgpack`` (examples/resources/splitsentence.py, the
standard-library child, under each serializer), ``pystorm-json`` and ``pystorm-msgpack``
(a pystorm Bolt, as streamparse users write them) and ``storm.py`` (Storm's own adapter,
which waits for the task ids of every emit). Reported per variant: sentences/s through
the split tasks (each sentence is one tuple into the child and 11 messages out: ten
emits and an ack), that per split task, and the ratio to native. Writes
bench/results/multilang.json. No assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench  # noqa: E402  (bench/bench.py: the runner)

from squall.client import ShellBolt, TopologyBuilder  # noqa: E402

EXAMPLE_RESOURCES = os.path.join(REPO, "examples")  # its resources/ holds splitsentence.py
TESTS = os.path.join(REPO, "tests", "integration")   # resources/ with storm.py, pystorm_split
SPLIT_TASKS = 2
#: Conf over every variant's (for experiments: topology.shellbolt.max.pending, ...).
EXTRA: dict = {}
topo = bench.topo  # squall.bench.topologies: the module workers import

VARIANTS = {
    # name: (command, serializer, code path whose resources/ has the script)
    "json": ([sys.executable, "splitsentence.py"], "json", EXAMPLE_RESOURCES),
    "msgpack": ([sys.executable, "splitsentence.py"], "msgpack", EXAMPLE_RESOURCES),
    "pystorm-json": ([sys.executable, "pystorm_split.py"], "json", TESTS),
    "pystorm-msgpack": ([sys.executable, "pystorm_split.py"], "msgpack", TESTS),
    "storm.py": ([sys.executable, "splitsentence.py"], "json", TESTS),
}


def shell_word_count(command: list[str], env: dict) -> callable:
    def build(parallelism: int) -> TopologyBuilder:
        b = TopologyBuilder()
        b.set_spout(topo.SPOUT, topo.BenchSentenceSpout(), parallelism)
        b.set_bolt(topo.SPLIT, ShellBolt(command, ["word"], env=env), SPLIT_TASKS) \
            .shuffle_grouping(topo.SPOUT)
        b.set_bolt(topo.COUNT, topo.CountWords(), parallelism).fields_grouping(topo.SPLIT,
                                                                                ["word"])
        return b
    return build


def run(name: str, n: int, max_pending: int) -> dict:
    base_paths = list(bench.CODE_PATHS)
    try:
        if name == "native":
            res = bench.run_throughput(True, n, SPLIT_TASKS, max_pending)
        else:
            command, serializer, code_path = VARIANTS[name]
            bench.CODE_PATHS = base_paths + [code_path]
            env = {"PYSTORM_SERIALIZER": serializer}
            res = bench.run_throughput(True, n, SPLIT_TASKS, max_pending,
                                       extra={"topology.multilang.serializer": serializer,
                                              **EXTRA},
                                       builder=shell_word_count(command, env))
    finally:
        bench.CODE_PATHS = base_paths
    words = res["steady_words_per_s"]
    return {"variant": name, "sentences_per_s": words / bench.WORDS_PER_SENTENCE,
            "sentences_per_s_per_task": words / bench.WORDS_PER_SENTENCE / SPLIT_TASKS,
            "words_per_s": words, "cpu_pct_per_worker": res.get("cpu_pct_per_worker_loaded")}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=100_000)
    ap.add_argument("--max-pending", type=int, default=2000)
    ap.add_argument("--variants", default="native,json,msgpack,pystorm-json,pystorm-msgpack,"
                                         "storm.py")
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "multilang.json"))
    args = ap.parse_args(argv)
    rows = []
    for name in args.variants.split(","):
        # storm.py waits for the task ids of every emit (~1.5k sentences/s): fewer sentences
        # and fewer pending trees, or they wait past the message timeout and replay.
        n, pending = {"storm.py": (args.sentences // 20, 200)}.get(
            name, (args.sentences if name in ("native", "json", "msgpack")
                   else args.sentences // 4, args.max_pending))
        bench.log(f"multilang: {name}, {n:,} sentences, max pending {pending}")
        rows.append(run(name, n, pending))
    native = next((r["sentences_per_s"] for r in rows if r["variant"] == "native"), None)
    print(f"\n{'variant':<16} {'sentences/s':>12} {'per split task':>15} {'vs native':>10}")
    for r in rows:
        r["ratio_to_native"] = r["sentences_per_s"] / native if native else None
        ratio = f"{r['ratio_to_native']:.2f}x" if native else "-"
        print(f"{r['variant']:<16} {r['sentences_per_s']:>12,.0f} "
              f"{r['sentences_per_s_per_task']:>15,.0f} {ratio:>10}")
    os.makedirs(os.path.dirname(args.json_out), exist_ok=True)
    with open(args.json_out, "w") as fh:
        json.dump({"split_tasks": SPLIT_TASKS, "rows": rows}, fh, indent=2)
    print(f"\nwrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
