"""Word count into Redis: each word's running count kept in a Redis hash by RedisStoreBolt.

    sentences --shuffle--> split --fields(word)--> count --fields(word)--> RedisStoreBolt

``count`` emits each word's new count anchored to the word; the store bolt writes it with
``HSET redis-word-count <word> <count>`` and acks it once Redis took it, so a sentence's
tuple tree completes only when its ten counts are in Redis. Both hops are grouped by word,
so one word's counts reach Redis in order and the hash ends at the word's total (at least
once: a sentence replayed after a failure counts again).

The store bolt reads its server from the topology conf's ``trident.redis.host/port``, as
Trident's Redis states do; ``squall local`` starts a private Redis and sets them, and its
``report`` reads the hash back and compares it with the exact counts.

Run it:  squall local examples/redis_word_count.py --duration 20
On a cluster:  squall jar examples redis_word_count -c trident.redis.host=HOST
Settings: -c wordcount.sentences=N (sentences the spout emits; default 20000).
"""

from __future__ import annotations

from squall.client import TopologyBuilder
from squall.connectors.redis import FieldStoreMapper, RedisStoreBolt

from word_count import (SENTENCES_KEY, RunningCount, SentenceSpout, SplitSentence,
                        expected_counts, make_pool)

NAME = "redis-word-count"
#: The Redis hash holding the counts.
HASH = NAME
CONF = {"topology.workers": 2, "topology.max.spout.pending": 2000}


def topology() -> TopologyBuilder:
    b = TopologyBuilder()
    b.set_spout("sentences", SentenceSpout(), 2)
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", RunningCount(), 2).fields_grouping("split", ["word"])
    b.set_bolt("to-redis", RedisStoreBolt(None, FieldStoreMapper(
        "hash", "word", "count", additional_key=HASH)), 2).fields_grouping("count", ["word"])
    return b


def report(conf: dict) -> None:
    """What ``squall local`` prints when it stops: the stored counts against the exact ones."""
    import redis

    client = redis.Redis(host=conf.get("trident.redis.host", "127.0.0.1"),
                         port=int(conf.get("trident.redis.port", 6379)), decode_responses=True)
    try:
        stored = {w: int(c) for w, c in client.hgetall(HASH).items()}
    finally:
        client.close()
    expected = expected_counts(make_pool(), int(conf.get(SENTENCES_KEY, 20_000)))
    top = sorted(stored.items(), key=lambda kv: -kv[1])[:5]
    print(f"[redis_word_count] {sum(stored.values())} words counted in Redis hash {HASH}, "
          f"{len(stored)} distinct; top: {', '.join(f'{w}={c}' for w, c in top)}", flush=True)
    short = sum(1 for w, c in expected.items() if stored.get(w, 0) < c)
    print(f"[redis_word_count] counts match the input exactly: "
          f"{'yes' if stored == dict(expected) else 'NO'} ({short} word(s) short of their "
          "total)", flush=True)


def main(args: list[str]) -> None:
    """``squall jar examples redis_word_count [NAME]``."""
    from squall.client.submitter import submit_topology
    submit_topology(args[0] if args else NAME, CONF, topology())
