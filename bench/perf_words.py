#!/usr/bin/env python3
"""CPU per word by function: the acked word count over its default vocabulary beside a
larger one (bench/scale.py's 100k), both workers sampled with Linux perf, side by side.

Run from the repo root (root, or perf_event_paranoid <= 1; Debian's ``linux-perf``)::

    .venv/bin/python bench/perf_words.py [--vocab 100000] [--rounds 2] [--out FILE]

Each run starts the 2-worker acked word count, waits until 15% of its sentences are
acked, then records both worker processes with ``perf record -F 999`` for ``--seconds``
while counting the words acked and the CPU seconds the workers used in that window. A
function's nanoseconds per word are its share of the samples times the workers' CPU per
word, so the two columns add up to what a word costs each run, and the difference column
says where the larger vocabulary's extra cost goes (medians of ``--rounds`` runs of each,
alternating). Wall-clock throughput on this shared
machine swings by a third between runs; CPU per word moves far less, and the shares
locate the cost whatever the speed of the moment. No assertions.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench  # noqa: E402  (bench/bench.py: the runner and its word-count topology)
import topologies as topo  # noqa: E402

_ROW = re.compile(r"^\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.+?)\s*$")


def record(vocab: int, sentences: int, seconds: float, data: str) -> dict:
    """One run: perf samples of both workers in ``data``; the window's words and CPU."""
    conf = {"topology.workers": 2, "topology.stats.freq.secs": 0.25,
            "topology.max.spout.pending": 5000, "bench.mode": "fixed",
            "bench.sentences": sentences, "bench.reliable": True}
    if vocab:
        conf["bench.vocab"] = vocab
    lc = bench.cluster("perf-words", conf, 2)
    try:
        lc.start()
        pids = [w.proc.pid for w in lc.workers]
        series = bench.CounterSeries(bench._component_sum(topo.SPOUT, "acked"))
        deadline = time.monotonic() + 120
        while series.add(lc.heartbeats()) < 0.15 * sentences:
            if lc.crashed():
                raise RuntimeError("\n".join(lc.describe_exit(w) for w in lc.crashed()))
            if time.monotonic() > deadline:
                raise TimeoutError("perf_words: the word count did not reach 15% in 120 s")
            time.sleep(0.05)
        acked0, cpu0 = series.latest(), bench._cpu_secs(pids)
        r = subprocess.run(["perf", "record", "-q", "-F", "999", "-o", data, "-p",
                            ",".join(map(str, pids)), "--", "sleep", str(seconds)],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"perf_words: perf record failed: {r.stderr.strip()[-500:]}")
        time.sleep(0.6)  # a heartbeat of each worker after the window
        acked1, cpu1 = series.add(lc.heartbeats()), bench._cpu_secs(pids)
        if acked1 >= sentences:
            raise SystemExit("perf_words: the run ended inside the window: raise --sentences")
    finally:
        lc.stop(drain_secs=0)
        lc.cleanup()
    words = (acked1 - acked0) * bench.WORDS_PER_SENTENCE
    cpu = sum(cpu1[p] - cpu0[p] for p in pids)
    return {"words": words, "cpu_s": cpu, "ns_per_word": cpu / words * 1e9}


def shares(data: str) -> dict[str, float]:
    """Each function's share (0-1) of the samples, named ``symbol (object)``."""
    r = subprocess.run(["perf", "report", "-i", data, "--no-children", "--fields",
                        "overhead,dso,sym", "--stdio"], capture_output=True, text=True)
    out: dict[str, float] = {}
    for line in r.stdout.splitlines():
        m = _ROW.match(line)
        if m and not line.lstrip().startswith("#"):
            name = f"{m.group(3)} ({os.path.basename(m.group(2))})"
            out[name] = out.get(name, 0.0) + float(m.group(1)) / 100
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=100_000)
    ap.add_argument("--sentences", type=int, default=2_000_000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--rows", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2, help="runs of each; medians")
    ap.add_argument("--out", default="", help="also write the table to this file")
    a = ap.parse_args(argv)
    if shutil.which("perf") is None:
        raise SystemExit("perf_words: needs Linux perf (apt-get install linux-perf)")
    tmp = tempfile.mkdtemp(prefix="sq-perf-words-")
    labels = (("default", 0), (f"vocab {a.vocab:,}", a.vocab))
    #: label -> one {function: ns per word} and one total per round
    per: dict[str, list[dict[str, float]]] = {label: [] for label, _ in labels}
    totals: dict[str, list[float]] = {label: [] for label, _ in labels}
    try:
        for r in range(1, a.rounds + 1):
            for label, vocab in labels:  # alternating, so a slow spell hits both
                bench.log(f"round {r}/{a.rounds}, {label}: recording both workers for "
                          f"{a.seconds:g} s")
                data = os.path.join(tmp, f"{vocab}-{r}.data")
                res = record(vocab, a.sentences, a.seconds, data)
                ns = res["ns_per_word"]
                per[label].append({k: v * ns for k, v in shares(data).items()})
                totals[label].append(ns)
                bench.log(f"  {res['words'] / a.seconds:,.0f} words/s in the window, "
                          f"{ns:,.0f} ns of worker CPU per word")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def med(label: str, k: str) -> float:
        return statistics.median(d.get(k, 0.0) for d in per[label])

    (la, _), (lb, _) = labels
    ta, tb = statistics.median(totals[la]), statistics.median(totals[lb])
    names = {k for d in per[la] + per[lb] for k in d}
    extra = {k: med(lb, k) - med(la, k) for k in names}
    top = sorted(names, key=lambda k: -abs(extra[k]))[:a.rows]
    lines = [f"worker CPU per word (ns), both workers of the acked word count, medians of "
             f"{a.rounds} round(s); {time.strftime('%Y-%m-%d')} at "
             f"{bench._git_describe() or '?'}",
             f"{'extra':>10}{la:>12}{lb:>14}  function (object)",
             f"{tb - ta:>+10,.0f}{ta:>12,.0f}{tb:>14,.0f}  all (default / vocab: "
             f"{ta / tb:.2f}x; rounds {', '.join(f'{x:,.0f}' for x in totals[la])} / "
             f"{', '.join(f'{x:,.0f}' for x in totals[lb])})"]
    for k in top:
        lines.append(f"{extra[k]:>+10,.0f}{med(la, k):>12,.0f}{med(lb, k):>14,.0f}  {k}")
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text + "\n")
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
