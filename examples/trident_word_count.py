"""Trident word count: exactly-once counts of the words of text files, kept in Redis.

    lines (TransactionalLineFiles) -> each(Split) -> group_by(word)
        -> persistent_aggregate(RedisMapState, Count)

Each batch is a byte range of lines per file; the master coordinator commits the
batches strictly in txid order and the transactional map skips an update its
txid already made, so a replayed batch (a failure, a killed worker) never counts
a word twice.

Run it:  squall local examples/trident_word_count.py --duration 20
         (it starts a private Redis beside ZooKeeper and Nimbus, and prints the top
          words and whether every count is exact when it stops)
On a cluster:  SQUALL_TRIDENT_INPUT=/data/books squall jar examples trident_word_count
         (the files must exist on every supervisor host; trident.redis.host/port in
          squall.yaml name the Redis)
Input: $SQUALL_TRIDENT_INPUT (a file, or a directory of .txt files); default: a
generated sample of 2,000 sentences.
"""

from __future__ import annotations

import os
import tempfile

import redis

from squall.client.trident.line_files import OpaqueLineFiles, TransactionalLineFiles
from squall.client.trident.operation import Count, Function
from squall.client.trident.state.redis_map import RedisMapState
from squall.client.trident.stream import TridentTopology

NAME = "trident-word-count"
CONF = {"topology.workers": 2, "topology.max.spout.pending": 4,
        "topology.trident.batch.emit.interval.millis": 50}


class Split(Function):
    def execute(self, tup, collector):
        for word in tup[0].split():
            collector.emit([word])


def input_files() -> list[str]:
    path = os.environ.get("SQUALL_TRIDENT_INPUT") or sample()
    if os.path.isdir(path):
        return sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith(".txt"))
    return [os.path.abspath(path)]


def topology(files: list[str] | None = None, batch_lines: int = 100,
             state: str = "transactional", redis_conf: dict | None = None,
             name: str = "word-counts"):
    t = TridentTopology()
    spout_class = OpaqueLineFiles if state == "opaque" else TransactionalLineFiles
    factory = RedisMapState.opaque if state == "opaque" else RedisMapState.transactional
    lines = t.new_stream("lines", spout_class(files or input_files(), batch_lines))
    (lines.each(["line"], Split(), ["word"])
          .group_by(["word"])
          .persistent_aggregate(factory(redis_conf, name), Count(), ["count"])
          .parallelism_hint(2))
    return t.build()


SAMPLE_SENTENCES = 2000


def sample() -> str:
    """The word count's first sentences as a file in the temp dir (made once)."""
    path = os.path.join(tempfile.gettempdir(), f"squall-trident-sample-{SAMPLE_SENTENCES}.txt")
    if not os.path.exists(path):
        from word_count import make_pool
        with open(path + f".{os.getpid()}", "w") as fh:
            fh.writelines(s + "\n" for s in make_pool()[:SAMPLE_SENTENCES])
        os.replace(path + f".{os.getpid()}", path)
    return path


def report(conf: dict) -> None:
    """What ``squall local`` prints when it stops: the top words, and whether the stored counts
    equal the exact counts of the input (every batch counted once, replays included)."""
    import collections
    import json

    factory = RedisMapState.transactional(None, "word-counts")
    client = redis.Redis(host=conf.get("trident.redis.host", "127.0.0.1"),
                         port=int(conf.get("trident.redis.port", 6379)))
    try:
        stored = {json.loads(k)[0]: json.loads(v)[1]
                  for k, v in client.hgetall(factory.hash_key(conf)).items()}
    finally:
        client.close()
    expected: collections.Counter = collections.Counter()
    for path in input_files():
        with open(path) as fh:
            for line in fh:
                expected.update(line.split())
    top = sorted(stored.items(), key=lambda kv: -kv[1])[:5]
    print(f"[trident_word_count] {sum(stored.values())} words stored, {len(stored)} distinct; "
          f"top: {', '.join(f'{w}={c}' for w, c in top)}", flush=True)
    print(f"[trident_word_count] counts match the input exactly: "
          f"{'yes' if stored == dict(expected) else 'NO'}", flush=True)


def main(args: list[str]) -> None:
    """``squall jar examples trident_word_count [NAME]``."""
    from squall.client.submitter import submit_topology
    submit_topology(args[0] if args else NAME, CONF, topology())
