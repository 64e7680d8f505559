#!/usr/bin/env python3
"""Stateful word counts: Storm's checkpointing over the acker and barrier checkpointing,
against the acked word count, in one run.

Run from the repo root:  .venv/bin/python bench/stateful.py [--sentences N] [--rounds R]

Variants, each bench.py's throughput run (2 workers, 2 tasks a component, the peers'
10-word sentences), back to back:

* ``acked``: the plain acked word count (a dict per count task), the baseline;
* ``unacked``: the same without the acker (no guarantee), for scale;
* ``acker-state``: the count bolt a StatefulBolt, Storm's checkpointing (the checkpoint
  spout's transactions ride the acker; acks held until the commit) made exactly-once
  (derived edge ids, each count task keeps the keys it saved), state in Redis;
* ``acker-state-at-least-once``: the same as Storm has it (random edge ids, no keys kept);
* ``barrier``: a StatefulBolt and a CheckpointedSpout under aligned barrier checkpointing
  (exactly-once, no acker), state in Redis; ``barrier-memory`` with the in-memory state;
* ``barrier-at-least-once``: barriers without alignment.

Checkpoints every ``--interval-ms`` (1000). Reported: steady words/s and the ratio to
``acked`` of the same round, the workers' RSS, and the Redis state size per key. Needs
Debian's redis-server (a private one is started). Writes bench/results/stateful.json and
plots bench/results/stateful.png (matplotlib, from the ``bench`` extra); ``--plot-only``
plots the last json again.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import bench  # noqa: E402  (bench/bench.py: the runner)

topo = bench.topo

VARIANTS = ("acked", "unacked", "acker-state", "acker-state-at-least-once", "barrier",
            "barrier-memory", "barrier-at-least-once")


def run(name: str, n: int, max_pending: int, interval_ms: int, redis_conf: dict,
        state_pending: int) -> dict:
    state = {"topology.state.checkpoint.interval.ms": interval_ms,
             "topology.state.provider": "redis", **redis_conf}
    if name == "acked":
        res = bench.run_throughput(True, n, 2, max_pending)
    elif name == "unacked":
        res = bench.run_throughput(False, n, 2, max_pending)
    elif name.startswith("acker-state"):
        # Acks wait for the commit: a spout task has at most max.spout.pending trees per
        # checkpoint interval, so this variant gets a bound sized for the interval.
        mode = "acker" if name == "acker-state" else "acker-at-least-once"
        res = bench.run_throughput(True, n, 2, state_pending,
                                   extra={**state, "topology.state.checkpoint.mode": mode},
                                   builder=topo.stateful_word_count(False))
    else:
        mode = "barrier-at-least-once" if name == "barrier-at-least-once" else "barrier"
        extra = {**state, "topology.state.checkpoint.mode": mode}
        if name == "barrier-memory":
            extra["topology.state.provider"] = "memory"
        res = bench.run_throughput(False, n, 2, max_pending, extra=extra,
                                   builder=topo.stateful_word_count(True))
    return {"variant": name, "words_per_s": res["steady_words_per_s"],
            "overall_words_per_s": res["overall_words_per_s"],
            "cpu_pct_per_worker": res.get("cpu_pct_per_worker_loaded"),
            "dropped": res.get("dropped"), "rss_mb": res.get("rss_mb")}


def state_bytes_per_key(client, prefix: str) -> dict:
    """Redis memory of the count states (MEMORY USAGE of each hash) per stored word."""
    keys = [k for k in client.scan_iter(match=f"{prefix}state:{topo.COUNT}-*") if b"$" not in k]
    words = sum(client.hlen(k) for k in keys)
    used = sum(client.memory_usage(k, samples=0) or 0 for k in keys)
    # What exactly-once acker checkpointing keeps besides: the saved tuples' keys.
    seen = sum(client.memory_usage(k, samples=0) or 0
               for k in client.scan_iter(match=f"{prefix}state:{topo.COUNT}-*$seen"))
    return {"keys": words, "bytes": used, "bytes_per_key": used / words if words else None,
            "dedupe_bytes": seen}


def plot(rounds: list[dict], path: str) -> str | None:
    """Each variant's ratio to the acked word count: the median bar and every round's dot."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed (pip install -e '.[bench]'): no plot"
    names = [n for n in rounds[0] if "acked" in rounds[0]]
    ratios = {n: [r[n]["words_per_s"] / r["acked"]["words_per_s"] for r in rounds]
              for n in names}
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=110)
    ys = range(len(names))
    med = [statistics.median(ratios[n]) for n in names]
    colours = ["tab:gray" if n in ("acked", "unacked") else
               "tab:orange" if n.startswith("acker") else "tab:green" for n in names]
    ax.barh(list(ys), med, color=colours, alpha=0.75)
    for y, n in zip(ys, names):
        ax.plot(ratios[n], [y] * len(ratios[n]), "k.", markersize=5)
        rss = rounds[-1][n].get("rss_mb") or []
        ax.text(max(ratios[n]) + 0.05, y, f"{med[y]:.2f}x"
                + (f"   RSS {max(rss):.0f} MB" if rss else ""), va="center", fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks(list(ys), names)
    ax.invert_yaxis()
    ax.set_xlim(0, max(max(v) for v in ratios.values()) * 1.35)
    ax.set_xlabel("words/s against the acked word count of the same round "
                  "(bar: median; dots: rounds)")
    ax.set_title(f"Stateful word counts, 2 workers, checkpoint every second "
                 f"({len(rounds)} rounds)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-pending", type=int, default=2000)
    ap.add_argument("--interval-ms", type=int, default=1000)
    ap.add_argument("--state-max-pending", type=int, default=50_000,
                    help="topology.max.spout.pending of acker-state (its acks wait a checkpoint)")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--plot-only", action="store_true",
                    help="plot bench/results/stateful.json again, run nothing")
    args = ap.parse_args()
    out = os.path.join(HERE, "results", "stateful.json")
    png = os.path.join(HERE, "results", "stateful.png")
    if args.plot_only:
        with open(out) as fh:
            print(plot(json.load(fh)["rounds"], png) or f"written {os.path.relpath(png, REPO)}")
        return
    from squall.deploy.redis import LocalRedis

    redis = LocalRedis().start()
    rounds = []
    try:
        for r in range(args.rounds):
            row = {}
            for name in args.variants.split(","):
                prefix = f"bench-{name}-{r}:"
                conf = {"trident.redis.host": "127.0.0.1", "trident.redis.port": redis.port,
                        "trident.redis.key.prefix": prefix}
                bench.log(f"round {r + 1}: {name}")
                row[name] = run(name, args.sentences, args.max_pending, args.interval_ms, conf,
                                args.state_max_pending)
                if name in ("acker-state", "barrier"):
                    client = redis.client()
                    try:
                        row[name]["state"] = state_bytes_per_key(client, prefix)
                    finally:
                        client.close()
            rounds.append(row)
    finally:
        redis.stop()
    names = list(rounds[0])
    print(f"\n{'variant':26} {'words/s':>12} {'x acked':>9}  worker RSS (MB, end)")
    summary = {}
    for name in names:
        wps = statistics.median(r[name]["words_per_s"] for r in rounds)
        ratio = statistics.median(r[name]["words_per_s"] / r["acked"]["words_per_s"]
                                  for r in rounds) if "acked" in names else None
        summary[name] = {"words_per_s": wps, "ratio_to_acked": ratio}
        print(f"{name:26} {wps:12,.0f} {ratio if ratio is not None else float('nan'):9.2f}  "
              f"{rounds[-1][name].get('rss_mb')}")
    for name in ("acker-state", "barrier"):
        st = rounds[-1].get(name, {}).get("state")
        if st:
            print(f"{name} state in Redis: {st['keys']} keys, {st['bytes_per_key']:.0f} B/key"
                  + (f"; saved tuples' keys: {st['dedupe_bytes'] / 1e6:.1f} MB"
                     if st.get("dedupe_bytes") else ""))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as fh:
        json.dump({"when": time.strftime("%Y-%m-%d %H:%M:%S"), "args": vars(args),
                   "rounds": rounds, "summary": summary}, fh, indent=1)
    print(f"written {os.path.relpath(out, REPO)}")
    print(plot(rounds, png) or f"written {os.path.relpath(png, REPO)}")


if __name__ == "__main__":
    main()
