#!/usr/bin/env python3
"""Kafka bench: the KafkaSpout against a bare consumer, and Kafka -> word count -> Kafka
against the bench word count, each pair in the same run; the spout's bytes per offset.

Run from the repo root:  .venv/bin/python bench/kafka.py [--quick]

A broker (deploy/kafka.py: noida-db unless SQUALL_KAFKA_BROKER=tansu) is started on a
free loopback port and filled with the workload's sentences (bench/topologies.py's pool).

1. spout alone: records/s of one KafkaSpout task (AT_LEAST_ONCE, and NO_GUARANTEE) into a
   sink that acks, against a bare confluent-kafka consumer loop reading the same topic
   (``consume`` batches, each record's value touched; the spout's consumer properties) in
   one process, both between 10 % and 90 % of the records. Target >= 0.8x. Beside them,
   the floor: the bare loop plus only the Python any runtime needs to hand each record to
   a Python bolt as a tracked tuple (the translator's fields, the Tuple, the sink's
   execute, the offset tracking), as a ratio to bare loops interleaved with it.
2. Kafka -> word count -> Kafka, acked (bench/kafka_topologies.py: 2 workers, parallelism
   2, counts written once a tick with every sentence tree completing only once its counts
   are in Kafka) against bench/bench.py's acked word count run just before. Target >= 0.7x.
3. bytes per in-flight offset at the spout: tracemalloc over a KafkaSpout that emitted N
   records into a collector that holds them, the spout's pending map included. Target <= 100.

Figures go to stdout as a table and to bench/results/kafka.json; no assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench as B  # noqa: E402  (bench/bench.py: its harness and the word count run)
import kafka_topologies as KT  # noqa: E402

from squall.deploy.kafka import LocalKafka  # noqa: E402

TARGETS = {"spout_vs_consumer": 0.8, "pipeline_vs_wordcount": 0.7, "bytes_per_offset": 100}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fill(servers: str, topic: str, n: int, partitions: int = 4) -> None:
    """``n`` sentences, the i-th to partition i mod ``partitions`` (an even share per task)."""
    from confluent_kafka import Producer
    pool = KT_pool()
    p = Producer({"bootstrap.servers": servers, "linger.ms": 20, "batch.num.messages": 10000,
                  "enable.idempotence": True})
    for i in range(n):
        while True:
            try:
                p.produce(topic, pool[i % len(pool)].encode(), partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
    left = p.flush(120)
    if left:
        raise RuntimeError(f"{left} records not written")


def KT_pool() -> list[str]:
    from topologies import make_pool
    return make_pool()


def _consumer(servers: str, topic: str, partitions: int, group: str):
    """A consumer with the spout's own properties, assigned every partition from offset 0."""
    from confluent_kafka import Consumer, TopicPartition

    from squall.connectors.kafka import KafkaSpoutConfig
    c = Consumer(KafkaSpoutConfig(servers, topics=[topic]).consumer_props(
        f"{group}-{uuid.uuid4().hex}", servers))
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    return c


class _Window:
    """The 10-90 % window of ``n`` records, marked once per consume batch (not per record:
    the loops it times must pay nothing for it)."""

    def __init__(self, n: int):
        self.n, self.t10, self.t90 = n, None, None

    def mark(self, got: int) -> None:
        if self.t10 is None and got >= 0.1 * self.n:
            self.t10 = time.perf_counter()
        if self.t90 is None and got >= 0.9 * self.n:
            self.t90 = time.perf_counter()

    def rate(self) -> float:
        return 0.8 * self.n / (self.t90 - self.t10)


def bare_consumer(servers: str, topic: str, n: int, partitions: int) -> float:
    """Records/s of a plain consume loop over every partition of ``topic``, with the
    spout's own consumer properties, between 10 % and 90 % of the records (as the spout's
    rate is taken)."""
    c = _consumer(servers, topic, partitions, "bare")
    window = _Window(n)
    got = 0
    size = 0
    while got < n:
        for m in c.consume(500, 1.0):
            if m.error() is None:
                size += len(m.value())
                got += 1
        window.mark(got)
    c.close()
    return window.rate()


class _NoAck:
    def ack(self, tup) -> None:
        pass


def floor_consumer(servers: str, topic: str, n: int, partitions: int) -> float:
    """Records/s of the bare loop doing, per record, only what any runtime must do in Python
    to hand a Kafka record to a Python bolt as a tracked tuple: read the default
    translator's five fields, build the Tuple, call the sink's ``execute`` (its ack a no-op)
    and mark the offset emitted and acked (the spout's offset tracking). No routing, queue,
    pending map, acker or spout callback: an upper bound for any runtime's spout + sink."""
    from squall.client.tuple import Fields, Tuple
    from squall.connectors.kafka.offsets import PartitionOffsets
    c = _consumer(servers, topic, partitions, "floor")
    window = _Window(n)
    fields = Fields(["topic", "partition", "offset", "key", "value"])
    sink = KT.AckSink()
    sink.prepare({}, None, _NoAck())
    execute = sink.execute
    offsets = [PartitionOffsets(0) for _ in range(partitions)]
    got = 0
    while got < n:
        for m in c.consume(500, 1.0):
            if m.error() is None:
                p, off = m.partition(), m.offset()
                track = offsets[p]
                track.emit_next(off)
                execute(Tuple([m.topic(), p, off, m.key(), m.value()], KT.SPOUT, "default", 1,
                              None, fields))
                track.acked(off)
                got += 1
        window.mark(got)
    c.close()
    return window.rate()


def run_static(name: str, builder, conf: dict, target: float, series_fn, timeout: float) -> dict:
    """Start a StaticCluster, wait until ``series_fn`` totals ``target``; the 10-90 % rate."""
    from squall.deploy.static import StaticCluster
    lc = StaticCluster(name, builder.create_topology(), {**conf, **B.EXTRA_CONF},
                       code_paths=[HERE], stdout=subprocess.DEVNULL)
    series = B.CounterSeries(series_fn)
    try:
        lc.start()
        deadline = time.monotonic() + timeout
        while series.add(lc.heartbeats()) < target:
            if lc.crashed():
                raise RuntimeError("\n".join(lc.describe_exit(w) for w in lc.crashed()))
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: {series.latest():.0f} of {target:.0f}")
            time.sleep(0.05)
        t10, t90 = series.crossing(0.1 * target), series.crossing(0.9 * target)
        return {"steady_per_s": 0.8 * target / (t90 - t10), "window_s": t90 - t10}
    finally:
        lc.stop(drain_secs=0)
        lc.cleanup()


def fig_spout(kafka: LocalKafka, n: int) -> dict:
    topic = f"bench-spout-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, 4)
    fill(kafka.bootstrap_servers, topic, n)
    out = {"records": n}
    bare = [bare_consumer(kafka.bootstrap_servers, topic, n, 4)]
    for guarantee in ("AT_LEAST_ONCE", "NO_GUARANTEE"):
        key = "acked" if guarantee == "AT_LEAST_ONCE" else "executed"
        comp = KT.SPOUT if key == "acked" else KT.SINK
        conf = {"topology.workers": 1, "topology.stats.freq.secs": 0.25,
                "topology.max.spout.pending": 5000}
        if guarantee != "AT_LEAST_ONCE":
            conf["topology.acker.executors"] = 0
        r = run_static(f"kafka-spout-{guarantee.lower()}",
                       KT.spout_only(kafka.bootstrap_servers, topic, guarantee), conf, n,
                       B._component_sum(comp, key), timeout=max(120, n / 5000))
        bare.append(bare_consumer(kafka.bootstrap_servers, topic, n, 4))
        out[guarantee] = r["steady_per_s"]
        log(f"  spout {guarantee}: {r['steady_per_s']:,.0f} records/s")
    # The floor, interleaved with bare loops of its own: the same broker state for both.
    floor, bare_f = [], []
    for _ in range(3):
        bare_f.append(bare_consumer(kafka.bootstrap_servers, topic, n, 4))
        floor.append(floor_consumer(kafka.bootstrap_servers, topic, n, 4))
    out["floor_runs"] = floor
    out["floor"] = sorted(floor)[1]
    out["floor_ratio"] = sorted(f / b for f, b in zip(floor, bare_f))[1]
    log(f"  floor (fields, Tuple, sink execute, offset tracking; no runtime): "
        f"{', '.join(f'{f:,.0f}' for f in floor)} records/s, median ratio "
        f"{out['floor_ratio']:.2f} to its own bare loops")
    out["bare_consumer_runs"] = bare
    out["bare_consumer"] = sorted(bare)[len(bare) // 2]
    for g in ("AT_LEAST_ONCE", "NO_GUARANTEE"):
        out[f"{g}_ratio"] = out[g] / out["bare_consumer"]
    log(f"  bare consumer: {', '.join(f'{b:,.0f}' for b in bare)} records/s")
    return out


def fig_pipeline(kafka: LocalKafka, n: int) -> dict:
    src = f"bench-sentences-{uuid.uuid4().hex[:6]}"
    dst = f"bench-counts-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(src, 4)
    kafka.create_topic(dst, 4)
    fill(kafka.bootstrap_servers, src, n)
    log("  the bench word count (bench/bench.py, acked)")
    wc = B.run_throughput(True, n, 2, 2000)
    # A sentence's tree completes after the next tick and the write (about 0.1-0.2 s, not
    # the plain word count's milliseconds): in-flight trees = rate x latency (Little's law)
    # needs a larger max.spout.pending for the same rate.
    conf = {"topology.workers": 2, "topology.stats.freq.secs": 0.25,
            "topology.max.spout.pending": int(os.environ.get("KB_MP", 20000))}
    log("  Kafka -> word count -> Kafka (acked)")
    r = run_static("kafka-wc", KT.word_count(kafka.bootstrap_servers, src, dst), conf, n,
                   B._component_sum(KT.SPOUT, "acked"), timeout=max(180, n / 2000))
    kafka_words = r["steady_per_s"] * 10
    log(f"  word count {wc['steady_words_per_s']:,.0f} words/s; Kafka pipeline "
        f"{kafka_words:,.0f} words/s")
    return {"sentences": n, "wordcount_words_per_s": wc["steady_words_per_s"],
            "kafka_words_per_s": kafka_words,
            "ratio": kafka_words / wc["steady_words_per_s"]}


def fig_memory(kafka: LocalKafka, n: int) -> dict:
    """In a child process: tracemalloc per in-flight offset (spout structures + pending map)."""
    topic = f"bench-mem-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(topic, 2)
    fill(kafka.bootstrap_servers, topic, n, 2)
    code = f"""
import json, time, tracemalloc
from squall.acker.pending_map import PendingMap
from squall.connectors.kafka import KafkaSpout, KafkaSpoutConfig
class Ctx:
    this_component_id = "kafka"; this_task_id = 1; this_task_index = 0; topology_id = "mem-1-1"
    def component_tasks(self, c): return [1]
class Col:
    def __init__(self):
        self.pending = PendingMap(3); self.emits = 0; self.root = 1
    def emit(self, values, stream="default", msg_id=None):
        self.root += 1; self.emits += 1
        self.pending.add(self.root, msg_id, time.monotonic())
    def report_error(self, e): print(e)
spout = KafkaSpout(KafkaSpoutConfig({kafka.bootstrap_servers!r}, topics=[{topic!r}],
                                    first_poll_offset_strategy="EARLIEST"))
col = Col()
spout.open({{}}, Ctx(), col)
deadline = time.monotonic() + 30
while not spout.parts and time.monotonic() < deadline:
    spout.next_tuple(); time.sleep(0.01)
# warm: the first thousand records (buffers, caches)
while col.emits < 1000:
    spout.next_tuple()
import gc; gc.collect()
tracemalloc.start()
before = tracemalloc.get_traced_memory()[0]; start = col.emits
while col.emits < {n}:
    spout.next_tuple()
    spout.waiting.clear() if col.emits >= {n} else None
gc.collect()
used = tracemalloc.get_traced_memory()[0] - before
print(json.dumps({{"bytes_per_offset": used / (col.emits - start), "offsets": col.emits - start}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs")
    args = ap.parse_args()
    n_spout = 100_000 if args.quick else 400_000
    n_wc = 50_000 if args.quick else 200_000
    res: dict = {"targets": TARGETS}
    with LocalKafka() as kafka:
        log(f"broker: {kafka.kind} at {kafka.address}")
        log("1. spout alone")
        res["spout"] = fig_spout(kafka, n_spout)
        log("2. Kafka -> word count -> Kafka")
        res["pipeline"] = fig_pipeline(kafka, n_wc)
        log("3. bytes per in-flight offset")
        res["memory"] = fig_memory(kafka, 200_000 if not args.quick else 50_000)
    s, p, m = res["spout"], res["pipeline"], res["memory"]
    rows = [
        ("bare confluent-kafka consumer (baseline)", f"{s['bare_consumer']:,.0f} rec/s", "1.00", ""),
        ("KafkaSpout, AT_LEAST_ONCE, 1 task", f"{s['AT_LEAST_ONCE']:,.0f} rec/s",
         f"{s['AT_LEAST_ONCE_ratio']:.2f}", ">= 0.8"),
        ("floor: tuple to a Python sink, no runtime", f"{s['floor']:,.0f} rec/s",
         f"{s['floor_ratio']:.2f}", ""),
        ("KafkaSpout, NO_GUARANTEE, 1 task", f"{s['NO_GUARANTEE']:,.0f} rec/s",
         f"{s['NO_GUARANTEE_ratio']:.2f}", ">= 0.8"),
        ("bench word count, acked (baseline)", f"{p['wordcount_words_per_s']:,.0f} words/s", "1.00", ""),
        ("Kafka -> word count -> Kafka, acked", f"{p['kafka_words_per_s']:,.0f} words/s",
         f"{p['ratio']:.2f}", ">= 0.7"),
        ("bytes per in-flight offset at the spout", f"{m['bytes_per_offset']:.1f} B", "", "<= 100"),
    ]
    print(f"{'figure':<44} {'value':>18} {'ratio':>6} {'target':>7}")
    for r in rows:
        print(f"{r[0]:<44} {r[1]:>18} {r[2]:>6} {r[3]:>7}")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "kafka.json"), "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
