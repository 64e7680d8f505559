"""Nanoseconds per word of each piece of the word count's per-tuple path, in one process.

The throughput bench (``bench.py``) runs two workers on a 2-core machine and is noisy; this
times the same real classes (collector, queue, transfer with its codec, receiver, the
executor's dispatch of a BasicBolt and a Bolt) on one thread, with ZeroMQ left out (a
frame is handed from the transfer to the receiver directly), so a change to one piece shows
as ns/word in seconds. Run it on the compiled build and with ``SQUALL_PURE_PYTHON=1``::

    .venv/bin/python bench/micro.py            # compiled
    SQUALL_PURE_PYTHON=1 .venv/bin/python bench/micro.py

Pieces, per word of a 10-word sentence, half the words to a task in this worker and half
to the other worker (the 2-worker word count's fields grouping):

* ``split``: the BasicBolt's execute (``str.split``, one ``emit`` per word: routing, edge
  ids, a local Tuple into a queue or a wire entry into a frame), its ack;
* ``frame``: packing the remote half into frames (already inside ``split``);
* ``receive``: decoding those frames into Tuples in the count task's queue;
* ``count``: the count bolt's execute (a dict update) and ack, through the executor's step;
* ``acker``: the end of each step, the combined acks to the acker task.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from types import SimpleNamespace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))

import squall  # noqa: E402,F401  (the compiled-module switch)
from squall._compiled import loaded_compiled  # noqa: E402
from squall.client import config as cfg  # noqa: E402
from squall.client.grouping import FieldsRouter  # noqa: E402
from squall.client.tuple import Fields, Tuple  # noqa: E402
from squall.client.values import PLAIN  # noqa: E402
from squall.worker.collector import (BasicOutputCollector, OutputCollector, Route,  # noqa: E402
                                     StepAcks)
from squall.worker.queue import Backpressure, InQueue, ThreadWaker, Version  # noqa: E402
from squall.worker.receiver import Receiver  # noqa: E402
from squall.worker.stats import TaskStats  # noqa: E402
from squall.worker.transfer import Transfer  # noqa: E402

VOCAB = [f"word{i:03d}" for i in range(1000)]
SENTENCE_WORDS = 10
SPLIT, COUNT, OTHER_COUNT, ACKER = 3, 5, 6, 9


class _Ex:
    """The executor fields a collector reads."""

    def __init__(self, ws, component, acking):
        self.ws = ws
        self.component_id = component
        self.transfer = ws.transfer
        self.debug = False
        self.acking = acking
        self.pending_acks = StepAcks()
        self.pending_fails: list = []
        self.pending_resets: list = []
        self.pending_inits: list = []
        self.immediate_acks: list = []


class _NoZmq(Transfer):
    """Frames kept, not sent (ZeroMQ left out)."""

    def _send_frame(self, w, frame):
        self.frames.append(frame)


def build(acking: bool):
    fields = Fields(["word"])
    ws = SimpleNamespace(
        conf={cfg.TOPOLOGY_TRANSFER_BATCH_SIZE: 500,
              cfg.TOPOLOGY_BATCH_FLUSH_INTERVAL_MILLIS: 1},
        values=PLAIN, task_worker={OTHER_COUNT: "w2", COUNT: "w1"}, peers_version=Version(),
        max_frame_bytes=64 << 20, deliver={}, lineage=False,
        stats={SPLIT: TaskStats("split")},
        fields={("split", "default"): fields}, task_component={SPLIT: "split"},
        live_workers=frozenset(("w1", "w2")), dropped_tuples=0, dropped_frames=0,
        bp=Backpressure(False), topology_id="micro", worker_id="w1")
    frames: list[bytes] = []
    tr = _NoZmq(ws)
    tr.frames = frames
    ws.transfer = tr
    q = InQueue(1 << 30, 0.9, 0.5, ws.bp, ThreadWaker())
    ws.deliver[COUNT] = q.put
    ws.queues = {COUNT: q}  # a single-task executor: the collector puts to it directly
    ex = _Ex(ws, "split", acking)
    route = Route("default", fields, [FieldsRouter([COUNT, OTHER_COUNT], [0])], False,
                  frozenset())
    out = OutputCollector(ex, SPLIT, {"default": route})
    bc = BasicOutputCollector(out)
    rx = Receiver.__new__(Receiver)
    rx.ws = SimpleNamespace(**vars(ws))  # the other worker: its count task is local there
    rx.ws.deliver = {OTHER_COUNT: q.put}
    rx.ws.queues = {OTHER_COUNT: q}
    rx._src = {}
    rx._last_warn = 0.0
    rx._suppressed = 0
    return ws, tr, frames, q, ex, out, bc, rx, fields


def split_execute(tup, collector):  # the bench topology's SplitSentence
    emit = collector.emit
    for word in tup.values[0].split(" "):
        emit([word])


#: The pieces as code, run on the names :func:`setup` makes (bench/instructions.py counts
#: the instructions of the same code). ``split``: each sentence's execute and ack in steps
#: of 50 sentences, the step's acks sent after each (cleared here), frames packed as
#: batches fill and the last ones at the end; ``receive``: those frames into Tuples in the
#: count task's queue; ``count``: a plain Bolt's execute and ack over everything queued, in
#: steps of up to 500 tuples.
PIECES = {name: compile(code, f"<micro {name}>", "exec") for name, code in (
    ("split", """
for i in range(0, len(inputs), 50):
    for tup in inputs[i:i + 50]:
        bc.input = tup
        split_execute(tup, bc)
        ack(tup)
    pending.clear()
tr.flush()
"""),
    ("receive", """
for f in frames:
    rx.handle(f)
"""),
    ("count", """
popleft = dq.popleft
while dq:
    for _ in range(min(len(dq), 500)):
        tup = popleft()
        w = tup.values[0]
        counts[w] = counts.get(w, 0) + 1
        cack(tup)
    cpending.clear()
"""))}


def setup(n_sentences: int, acking: bool) -> dict:
    """The names the pieces run on: ``n_sentences`` input tuples and the real classes."""
    ws, tr, frames, q, ex, out, bc, rx, fields = build(acking)
    sfields = Fields(["sentence"])
    sentences = [" ".join(VOCAB[(i * 7 + j * 13) % 1000] for j in range(SENTENCE_WORDS))
                 for i in range(997)]
    inputs = [Tuple([sentences[i % 997]], "spout", "default", 1,
                    {i + 1: i * 2654435761 % (1 << 64) | 1} if acking else None, sfields)
              for i in range(n_sentences)]
    cex = _Ex(ws, "count", acking)
    cout = OutputCollector(cex, SPLIT, {})
    return dict(inputs=inputs, bc=bc, split_execute=split_execute, ack=out.ack,
                pending=ex.pending_acks, tr=tr, frames=frames, rx=rx, dq=q.dq, counts={},
                cack=cout.ack, cpending=cex.pending_acks)


def run(n_sentences: int, acking: bool) -> dict[str, float]:
    env = setup(n_sentences, acking)
    words = n_sentences * SENTENCE_WORDS
    secs = {}
    for name, code in PIECES.items():
        t0 = time.perf_counter()
        exec(code, env)
        secs[name] = time.perf_counter() - t0
    frame_only = _time_pack(env["tr"], n_sentences)
    counts = env["counts"]
    assert sum(counts.values()) == words, (sum(counts.values()), words)
    return {"split+emit+ack": secs["split"] / words * 1e9,
            "frame pack (of split)": frame_only / words * 1e9,
            "receive (remote half)": secs["receive"] / words * 1e9,
            "count+ack": secs["count"] / words * 1e9}


def _time_pack(tr: Transfer, n: int) -> float:
    """Packing alone: the same number of wire entries as the split's remote half."""
    values = [[VOCAB[i % 1000]] for i in range(n * SENTENCE_WORDS // 2)]
    t0 = time.perf_counter()
    for i in range(0, len(values), 500):
        tr.codec.grouped([[OTHER_COUNT, SPLIT, "default", values[i:i + 500], None, None]])
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=50_000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    import gc
    gc.freeze()  # as the worker does (worker.py): the set-up is never traversed again
    gc.set_threshold(100_000, 50, 100)
    build_kind = "compiled" if loaded_compiled() else "pure Python"
    print(f"per-tuple pieces, ns per word ({build_kind}; median of {a.rounds} rounds of "
          f"{a.sentences:,} sentences)")
    for acking in (True, False):
        rounds = [run(a.sentences, acking) for _ in range(a.rounds)]
        med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
        total = med["split+emit+ack"] + med["receive (remote half)"] + med["count+ack"]
        print(f"  {'acked' if acking else 'unacked'}: " + ", ".join(
            f"{k} {v:.0f}" for k, v in med.items()) + f"; total {total:.0f} ns/word")


if __name__ == "__main__":
    main()
