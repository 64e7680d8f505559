"""Instructions per word of each piece of the per-tuple path, counted by callgrind.

``bench/micro.py`` times the pieces; on a shared 2-core machine its nanoseconds move by
20-50% from one run to the next, more than most changes to one piece. This runs the same
pieces (micro.py's ``build``: the real collector, transfer with its codec, receiver and
queue, ZeroMQ left out) under valgrind's callgrind, collecting only inside the piece
measured, and prints the instructions per word: the same figure every run for the same
code (str hashing is seeded alike), so a change of a few percent shows. Instructions are not time (a cache miss costs
no instruction), so confirm a gain in ``bench.py`` or ``compare.py``.

    apt-get install valgrind          # Debian's package, once
    .venv/bin/python bench/instructions.py                  # compiled, acked and unacked
    .venv/bin/python bench/instructions.py --pieces split --sentences 2000

Pieces, per word of a 10-word sentence (half of the words to a task of this worker and
half to the other worker, as micro.py):

* ``split``: the BasicBolt's execute (``str.split``, an ``emit`` per word), its ack, the
  step's end, and the frames of the remote half written;
* ``receive``: those frames read into Tuples in the count task's queue;
* ``count``: the count bolt's execute and ack over everything queued (the loop is Python
  here, so read its changes, not its size).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

# The piece measured runs inside eval() (builtin_eval: callgrind's toggle) and set-up and
# the other pieces inside exec(), which imports use too, so nothing else is counted: the
# pieces are micro.py's PIECES, on micro.setup's names.
_CHILD = r'''
import gc, sys
sys.path.insert(0, {here!r})
import micro
gc.disable()
for n in (200, {sentences!r}):  # a warm-up round, then the one counted
    env = micro.setup(n, {acking!r})
    for name, code in micro.PIECES.items():
        (eval if name == {piece!r} and n != 200 else exec)(code, env)
    assert sum(env["counts"].values()) == n * micro.SENTENCE_WORDS
'''


def count(piece: str, acking: bool, sentences: int) -> float:
    """Instructions per word of ``piece``."""
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, "child.py")
        with open(script, "w") as f:
            f.write(_CHILD.format(here=HERE, acking=acking, piece=piece, sentences=sentences))
        out = os.path.join(tmp, "callgrind.out")
        r = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                            "--toggle-collect=builtin_eval", f"--callgrind-out-file={out}",
                            sys.executable, script], capture_output=True, text=True,
                           env={**os.environ, "PYTHONHASHSEED": "0"})  # str hashes, probes
        if r.returncode != 0:
            raise SystemExit(f"instructions: the {piece} run failed:\n{r.stderr[-2000:]}")
        with open(out) as f:
            m = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
        if not m:
            raise SystemExit(f"instructions: no total in callgrind's output for {piece}")
        return int(m.group(1)) / (sentences * 10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pieces", default="split,receive,count")
    ap.add_argument("--sentences", type=int, default=4000)
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("instructions: valgrind is not installed (apt-get install valgrind)")
    sys.path.insert(0, HERE)
    import squall.worker.collector  # noqa: F401  (the compiled-module switch, and one)
    from squall._compiled import loaded_compiled
    build = "compiled" if loaded_compiled() else "pure Python"
    print(f"instructions per word ({build}; callgrind, {a.sentences:,} sentences)")
    for acking in (True, False):
        figures = {p: count(p, acking, a.sentences) for p in a.pieces.split(",")}
        print(f"  {'acked' if acking else 'unacked'}: " +
              ", ".join(f"{p} {v:,.0f}" for p, v in figures.items()))


if __name__ == "__main__":
    main()
