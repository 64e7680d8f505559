"""Word count from NATS JetStream to JetStream: sentences in one stream, running counts
published to another, one subject per word.

    JetStreamSpout(SENTENCES) --shuffle--> split --fields(word)--> count
        --fields(word)--> JetStreamBolt(word-counts.<word>)

The spout reads ``SENTENCES`` through the topology's durable consumer and acknowledges a
sentence only when its tuple tree completes; ``count`` emits each word's new count
anchored to the word, and the JetStreamBolt acks a count only once JetStream stored it,
so every sentence's tree completes only when its ten counts are in ``WORD_COUNTS``. Both
hops are grouped by word, so one word's counts land in order and the last message on
``word-counts.<word>`` is the word's total (at least once: a replayed sentence counts
again).

``squall local`` starts a NATS server with JetStream for it and creates the file's
NATS_STREAMS, ``setup`` fills ``SENTENCES`` when it is empty, and ``report`` reads the last
count of every word back (a consumer delivering the last message per subject).

Run it:  squall local examples/nats_word_count.py --duration 20
On a cluster:  squall jar examples nats_word_count -c nats.servers=nats://HOST:4222
Settings: -c wordcount.sentences=N (sentences setup writes; default 20000).
"""

from __future__ import annotations

from squall.client import TopologyBuilder
from squall.connectors.nats import (JetStreamBolt, JetStreamSpout, MessageTranslator,
                                    PublishMapper)
from word_count import (SENTENCES_KEY, RunningCount, SplitSentence, expected_counts,
                        make_pool)

NAME = "nats-word-count"
SENTENCES, COUNTS = "SENTENCES", "WORD_COUNTS"
NATS_STREAMS = {SENTENCES: ["sentences"], COUNTS: ["word-counts.>"]}
CONF = {"topology.workers": 2, "topology.max.spout.pending": 500}


def count_subject(tup) -> str:
    return f"word-counts.{tup['word']}"


def topology() -> TopologyBuilder:
    b = TopologyBuilder()
    # Servers: nats.servers (squall local sets it); the spout's durable consumer is
    # squall-nats-word-count, so a second run goes on where the first stopped.
    b.set_spout("sentences", JetStreamSpout(SENTENCES, translator=MessageTranslator(["data"])),
                2)
    b.set_bolt("split", SplitSentence(), 2).shuffle_grouping("sentences")
    b.set_bolt("count", RunningCount(), 2).fields_grouping("split", ["word"])
    b.set_bolt("to-nats", JetStreamBolt(PublishMapper(subject=count_subject, payload="count"),
                                        stream=COUNTS), 2).fields_grouping("count", ["word"])
    return b


def _sentences(conf) -> int:
    return int(conf.get(SENTENCES_KEY, 20_000))


def _jetstream(conf, fn):
    """``await fn(jetstream)`` on a connection to the topology's NATS."""
    import asyncio

    import nats

    from squall.connectors.nats import NatsConfig

    async def main():
        nc = await nats.connect(NatsConfig().server_urls(conf), connect_timeout=5,
                                allow_reconnect=False)
        try:
            return await fn(nc.jetstream(timeout=10))
        finally:
            await nc.close()
    return asyncio.run(main())


def setup(conf) -> None:
    """Fill SENTENCES when it is empty (a second run reads what the first wrote)."""
    async def fill(js):
        held = (await js.stream_info(SENTENCES)).state.messages
        if held:
            return held, 0
        pool, n = make_pool(), _sentences(conf)
        for start in range(0, n, 1000):  # publish a thousand, then wait for their PubAcks
            acks = [await js.publish_async("sentences", pool[i % len(pool)].encode())
                    for i in range(start, min(n, start + 1000))]
            for ack in acks:
                await ack
        return 0, n

    held, wrote = _jetstream(conf, fill)
    if held:
        print(f"[nats_word_count] {SENTENCES} holds {held} messages already", flush=True)
    else:
        print(f"[nats_word_count] wrote {wrote} sentences to {SENTENCES}", flush=True)


def report(conf) -> None:
    """Read every word's last count back and compare them with the exact totals."""
    from nats.js.api import ConsumerConfig, DeliverPolicy

    async def read(js):
        records = (await js.stream_info(COUNTS)).state.messages
        sub = await js.pull_subscribe("word-counts.>", stream=COUNTS, config=ConsumerConfig(
            deliver_policy=DeliverPolicy.LAST_PER_SUBJECT, inactive_threshold=30))
        last: dict[str, int] = {}
        while True:
            try:
                msgs = await sub.fetch(500, timeout=1)
            except Exception:  # nothing more within the second: all read
                break
            for m in msgs:
                last[m.subject.split(".", 1)[1]] = int(m.data)
                await m.ack()
        await sub.unsubscribe()
        return records, last

    records, last = _jetstream(conf, read)
    expected = expected_counts(make_pool(), _sentences(conf))
    print(f"[nats_word_count] {records} count messages in {COUNTS}: {sum(last.values())} "
          f"words, {len(last)} distinct", flush=True)
    print(f"[nats_word_count] last counts match the expected totals: "
          f"{'yes' if last == dict(expected) else 'NO'}", flush=True)


def main(args: list[str]) -> None:
    """``squall jar examples nats_word_count [NAME]`` (the streams must exist on the
    cluster's NATS: nats stream add SENTENCES --subjects sentences, and WORD_COUNTS on
    word-counts.>)."""
    from squall.client.submitter import submit_topology
    submit_topology(args[0] if args else NAME, CONF, topology())
