"""One comparison run: the raw pipe, bytewax and Squall's word count, as ratios.

In one run on this machine, back to back:

* the pipe limit: the peers' ``zmq_wordcount.py`` (msgpack over ZeroMQ between two
  processes, batched), what Python can move at best;
* bytewax 0.21.1, 2 processes, without and with recovery (``bytewax_wordcount.py``);
* Squall's word count, acked and unacked (``bench/bench.py --only throughput``: steady
  words/s of the 2-worker topology).

Every figure is printed as a ratio to bytewax-2p and to the batched pipe of the same run
(the machine is shared and noisy: absolute numbers mean little), and the whole run is
written as JSON (``--json-out``). bytewax is installed by this script into its own venv,
``bench/.peers`` (pinned to 0.21.1, with pyzmq and msgpack, from PyPI), the first time;
the peers' scripts come from ``$SQUALL_PEERS_DIR`` or ``../shared/peers``.

    .venv/bin/python bench/compare.py              # the default workload
    .venv/bin/python bench/compare.py --sentences 3000000 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
PEERS_VENV = os.path.join(HERE, ".peers")
BYTEWAX = "bytewax==0.21.1"


def log(msg: str) -> None:
    print(f"[compare {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def peers_dir() -> str:
    for d in (os.environ.get("SQUALL_PEERS_DIR"), os.path.join(REPO, "..", "shared", "peers")):
        if d and os.path.exists(os.path.join(d, "bytewax_wordcount.py")):
            return os.path.abspath(d)
    raise SystemExit("compare: the peers' scripts are missing: set SQUALL_PEERS_DIR to the "
                     "folder holding bytewax_wordcount.py and zmq_wordcount.py")


def peers_python() -> str:
    """The peers' venv's python, made (and bytewax installed) the first time."""
    py = os.path.join(PEERS_VENV, "bin", "python")
    if not os.path.exists(py):
        log(f"creating {os.path.relpath(PEERS_VENV, REPO)} (a venv for the peers)")
        subprocess.run([sys.executable, "-m", "venv", PEERS_VENV], check=True)
    have = subprocess.run([py, "-c", "import bytewax, zmq, msgpack; from importlib.metadata "
                                     "import version; print(version('bytewax'))"],
                          capture_output=True, text=True)
    if have.returncode != 0 or have.stdout.strip() != BYTEWAX.split("==")[1]:
        log(f"installing {BYTEWAX} pyzmq msgpack into the peers' venv (once)")
        r = subprocess.run([py, "-m", "pip", "install", "-q", BYTEWAX, "pyzmq", "msgpack"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"compare: cannot install {BYTEWAX}:\n{r.stderr[-2000:]}")
    return py


_LINE = re.compile(r"^(\S+) (?:words|msgs)/s=([\d.]+) wall_s=([\d.]+) correct=(true|false)",
                   re.M)


def run_peer(py: str, script: str, args: list[str], cwd: str) -> dict[str, Any]:
    """One peer run: its result line parsed."""
    t0 = time.monotonic()
    r = subprocess.run([py, script, *args], capture_output=True, text=True, cwd=cwd,
                       timeout=1800)
    m = _LINE.search(r.stdout)
    if r.returncode != 0 or not m:
        raise SystemExit(f"compare: {os.path.basename(script)} {' '.join(args)} failed "
                         f"(exit {r.returncode}):\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
    return {"name": m.group(1), "words_per_s": float(m.group(2)), "wall_s": float(m.group(3)),
            "correct": m.group(4) == "true", "secs": round(time.monotonic() - t0, 1)}


def run_squall(sentences: int) -> dict[str, Any]:
    """bench.py's acked and unacked throughput (2 workers), steady words/s."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = fh.name
    try:
        r = subprocess.run([sys.executable, os.path.join(HERE, "bench.py"), "--only",
                            "throughput", "--no-peers", "--sentences", str(sentences),
                            "--json-out", out], capture_output=True, text=True, timeout=1800)
        if r.returncode != 0:
            raise SystemExit(f"compare: bench.py failed (exit {r.returncode}):\n"
                             f"{r.stdout[-1500:]}\n{r.stderr[-1500:]}")
        with open(out) as f:
            t = json.load(f)["throughput"]
    finally:
        os.unlink(out)
    res = {}
    for kind in ("acked", "unacked"):
        x = t[kind]
        res[kind] = {"words_per_s": x["steady_words_per_s"],
                     "correct": x["words_counted"] == 10 * x["sentences"] and
                     not x.get("spout_failed"), "wall_s": x["wall_s"]}
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=3_000_000,
                    help="sentences per run (10 words each), for every run")
    ap.add_argument("--rounds", type=int, default=1, help="repeat the whole set; medians")
    ap.add_argument("--json-out", default=os.path.join(HERE, "results", "compare.json"))
    a = ap.parse_args(argv)
    pdir = peers_dir()
    py = peers_python()
    runs: dict[str, list[dict]] = {}
    for r in range(1, a.rounds + 1):
        log(f"round {r}/{a.rounds}: raw pipe (batched, {a.sentences:,} sentences)")
        runs.setdefault("pipe", []).append(run_peer(
            py, os.path.join(pdir, "zmq_wordcount.py"),
            ["--mode", "wordcount", "-n", str(a.sentences)], pdir))
        for rec in (False, True):
            key = "bytewax-2p" + ("-recovery" if rec else "")
            log(f"round {r}/{a.rounds}: {key} ({a.sentences:,} sentences)")
            with tempfile.TemporaryDirectory(prefix="bwx-run-") as cwd:
                runs.setdefault(key, []).append(run_peer(
                    py, os.path.join(pdir, "bytewax_wordcount.py"),
                    ["-n", str(a.sentences), "-p", "2", *(["--recovery"] if rec else [])],
                    cwd))
        log(f"round {r}/{a.rounds}: Squall word count, acked and unacked "
            f"({a.sentences:,} sentences, 2 workers)")
        sq = run_squall(a.sentences)
        runs.setdefault("squall-acked", []).append(sq["acked"])
        runs.setdefault("squall-unacked", []).append(sq["unacked"])
    med = {k: statistics.median(x["words_per_s"] for x in v) for k, v in runs.items()}
    base, pipe = med["bytewax-2p"], med["pipe"]
    rows = [(k, med[k], med[k] / base, med[k] / pipe, all(x["correct"] for x in runs[k]))
            for k in ("pipe", "bytewax-2p", "bytewax-2p-recovery", "squall-acked",
                      "squall-unacked")]
    print()
    print(f"{'run':<22}{'words/s':>12}{'x bytewax-2p':>15}{'x pipe':>10}  correct")
    for k, v, rb, rp, ok in rows:
        print(f"{k:<22}{v / 1e6:>11.2f}M{rb:>15.3f}{rp:>10.3f}  {'yes' if ok else 'NO'}")
    result = {"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(),
              "cpus": os.cpu_count(), "python": platform.python_version(),
              "sentences": a.sentences, "rounds": a.rounds, "runs": runs,
              "median_words_per_s": med,
              "ratios": {k: {"x_bytewax_2p": rb, "x_pipe": rp} for k, _, rb, rp, _ in rows},
              "compiled": os.environ.get("SQUALL_PURE_PYTHON", "") in ("", "0")}
    os.makedirs(os.path.dirname(a.json_out), exist_ok=True)
    with open(a.json_out, "w") as fh:
        json.dump(result, fh, indent=1)
    log(f"written {a.json_out}")
    return 0 if all(ok for *_, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
