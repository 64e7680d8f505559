"""Flame graphs of the word count's two workers under load, acked and unacked (py-spy).

Runs ``bench.py --only throughput`` and, as each run names its workers' pids, records each
worker with ``py-spy record --native`` for ``--secs`` seconds of its steady state, into
``docs/profiles/<acked|unacked>-worker<N>.txt`` (collapsed stacks, for grep and diffs) and
``.svg`` (drawn by ``squall.worker.flamegraph``, the profiler's own renderer). ``--native`` shows the compiled per-tuple path (Cython's C
functions, msgpack, ZeroMQ, CPython's reference counting) that Python frames alone hide.

py-spy stops a worker for each sample: at ``--rate`` 50 Hz the worker runs slower than
unprofiled, so read the shares, not the words/s printed alongside.

    .venv/bin/pip install py-spy
    .venv/bin/python bench/profile.py                  # docs/profiles/*.svg
    .venv/bin/python bench/profile.py --tag after      # docs/profiles/after-*.svg
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
OUT = os.path.join(REPO, "docs", "profiles")
#: bench.py's line naming a throughput run's workers.
_RUN = re.compile(r"throughput \((?P<label>\w+)\): .* \(pids \[(?P<pids>[\d, ]+)\]\)")


def log(msg: str) -> None:
    print(f"[profile {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def record(py_spy: str, pid: int, secs: float, rate: int, stem: str) -> subprocess.Popen:
    """py-spy on one worker, in the background, into ``stem.txt`` (collapsed stacks)."""
    cmd = [py_spy, "record", "--pid", str(pid), "--native", "--rate", str(rate),
           "--duration", str(int(secs)), "--format", "raw", "-o", stem + ".txt"]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def draw(stem: str, title: str) -> None:
    """``stem.svg`` from ``stem.txt``, with the renderer the profiler uses (no download)."""
    from squall.worker.flamegraph import render

    stacks: dict[tuple[str, ...], int] = {}
    with open(stem + ".txt", encoding="utf-8", errors="replace") as fh:
        for line in fh:
            frames, _, n = line.rstrip("\n").rpartition(" ")
            if frames and n.isdigit():
                key = tuple(frames.split(";"))
                stacks[key] = stacks.get(key, 0) + int(n)
    with open(stem + ".svg", "w", encoding="utf-8") as fh:
        fh.write(render(stacks, title=title))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sentences", type=int, default=600_000,
                   help="sentences per throughput run (enough to outlast the recording)")
    p.add_argument("--secs", type=float, default=15, help="seconds recorded per worker")
    p.add_argument("--delay", type=float, default=4,
                   help="seconds after a run starts before recording (its ramp-up)")
    p.add_argument("--rate", type=int, default=50, help="samples per second")
    p.add_argument("--tag", default="", help="prefix of the files (before, after, ...)")
    args = p.parse_args(argv)
    py_spy = shutil.which("py-spy", path=os.path.dirname(sys.executable)) or \
        shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("profile: py-spy is missing: .venv/bin/pip install py-spy")
    os.makedirs(OUT, exist_ok=True)
    prefix = f"{args.tag}-" if args.tag else ""
    # Its figures go to a file of their own: profiled runs are slower than the project's.
    bench = subprocess.Popen([sys.executable, os.path.join(HERE, "bench.py"), "--only",
                              "throughput", "--sentences", str(args.sentences), "--json-out",
                              os.path.join(HERE, "results", "profiled.json")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    recordings: list[tuple[str, subprocess.Popen]] = []
    assert bench.stdout is not None
    for line in bench.stdout:
        sys.stdout.write(line)
        m = _RUN.search(line)
        if m is None:
            continue
        pids = [int(x) for x in m["pids"].split(",")]
        time.sleep(args.delay)
        for i, pid in enumerate(pids):
            stem = os.path.join(OUT, f"{prefix}{m['label']}-worker{i + 1}")
            log(f"recording {m['label']} worker {i + 1} (pid {pid}) for {args.secs:g} s "
                f"into {os.path.relpath(stem, REPO)}.svg")
            recordings.append((stem, record(py_spy, pid, args.secs, args.rate, stem)))
    rc = bench.wait()
    failed = 0
    for stem, proc in recordings:
        _, err = proc.communicate()
        if proc.returncode != 0 or not os.path.exists(stem + ".txt"):
            failed += 1
            log(f"py-spy failed for {stem}: {err.strip()[-500:]}")
            continue
        draw(stem, f"{os.path.basename(stem)}: word count, py-spy --native at {args.rate} Hz, "
                   f"{args.secs:g} s")
    log(f"{len(recordings) - failed} flame graph(s) in {os.path.relpath(OUT, REPO)}")
    return rc or (1 if failed or not recordings else 0)


if __name__ == "__main__":
    sys.exit(main())
