"""Topologies for tests/integration/test_file_sink*.py (workers import this by name).

Every record names where it came from: ``id,k,word`` is word ``k`` of sentence ``id``
(stateful_topos.sentence), so a test knows the exact set of records and sees a duplicate.
"""

from __future__ import annotations

import os
import time

from squall.client import BasicBolt
from squall.client.errors import FailedException
from squall.client.stateful import CheckpointedSpout
from squall.client.topology import TopologyBuilder
from squall.client.trident.operation import Function
from squall.client.trident.spout import Emitter, TridentSpout
from squall.client.trident.stream import TridentTopology
from squall.connectors.files import (AnyRotationPolicy, DelimitedRecordFormat, FileSinkBolt,
                                     FileSizeRotationPolicy, FileState, FileStateFactory,
                                     FileStateUpdater, ParquetRecordFormat, TimedRotationPolicy,
                                     Units)
from stateful_topos import sentence

FIELDS = ["id", "k", "word"]


def expected_records(n: int, skip_every: int = 0) -> list[tuple[int, int, str]]:
    """Every (id, k, word) of sentences 0..n-1 (without sentences ``id % skip_every == 0``)."""
    return sorted((i, k, w) for i in range(n) if not (skip_every and i % skip_every == 0)
                  for k, w in enumerate(sentence(i).split()))


class NumberedSentences(CheckpointedSpout):
    """Emits [id, sentence(id)] for ids 0..``test.spout.count``-1 (its share), at most
    ``test.spout.rate`` a second per task (0: as fast as it can); rewinds to its offset."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.start = self.next = context.this_task_index
        self.step = len(context.component_tasks(context.this_component_id))
        self.count = int(conf.get("test.spout.count", 1000))
        self.rate = float(conf.get("test.spout.rate", 0))
        self.started = time.monotonic()
        self.emitted = 0

    def next_tuple(self):
        if self.next >= self.count:
            return
        if self.rate and self.emitted > (time.monotonic() - self.started) * self.rate:
            return
        i = self.next
        self.next += self.step
        self.emitted += 1
        self.collector.emit([i, sentence(i)], msg_id=i)  # acker mode: tracked, replayed

    def fail(self, msg_id):  # acker mode: emit it again (barrier mode rewinds instead)
        self.next = min(self.next, msg_id)

    def snapshot(self):
        return self.next

    def restore(self, offsets):
        self.next = self.start if offsets is None else offsets

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "sentence"])


class SplitNumbered(BasicBolt):
    """[id, k, word] for each word; with ``short_every``, the words of every such sentence
    go on stream ``short`` as [word] only (records the sink's format cannot write)."""

    def __init__(self, short_every: int = 0):
        self.short_every = short_every

    def execute(self, tup, collector):
        i = tup[0]
        for k, w in enumerate(tup[1].split()):
            if self.short_every and i % self.short_every == 0:
                collector.emit([w], stream="short")
            else:
                collector.emit([i, k, w])

    def declare_output_fields(self, declarer):
        declarer.declare(FIELDS)
        declarer.declare_stream("short", ["word"])


def sink_topology(text_dir: str, parquet_dir: str | None = None, rotate_bytes: int = 4096,
                  short_every: int = 0, sinks: int = 2):
    """Sentences -> split -> a text sink (rotating by size, and at 1 s so the last file
    goes out) and optionally a Parquet sink."""
    b = TopologyBuilder()
    b.set_spout("sentences", NumberedSentences(), 2)
    b.set_bolt("split", SplitNumbered(short_every), 2).shuffle_grouping("sentences")
    text = FileSinkBolt(text_dir, record_format=DelimitedRecordFormat(FIELDS),
                        rotation_policy=AnyRotationPolicy(
                            FileSizeRotationPolicy(rotate_bytes / 1024, Units.KB),
                            TimedRotationPolicy(1)))
    d = b.set_bolt("text", text, sinks).shuffle_grouping("split")
    if short_every:
        d.shuffle_grouping("split", "short")
    if parquet_dir is not None:
        b.set_bolt("parquet", FileSinkBolt(parquet_dir,
                                           record_format=ParquetRecordFormat(FIELDS)), 1) \
            .shuffle_grouping("split")
    return b.create_topology()


# --- Trident ---------------------------------------------------------------------------------

class _Lines(Emitter):
    def __init__(self, per_batch, batches):
        self.per_batch, self.batches = per_batch, batches

    def emit_batch(self, attempt, meta, collector):
        txid = attempt.txid
        if txid > self.batches:
            return
        for j in range(self.per_batch):
            i = (txid - 1) * self.per_batch + j
            collector.emit([i, sentence(i)])


class NumberedBatches(TridentSpout):
    """A transactional spout: batch ``txid`` (from 1) always holds sentences
    ``(txid-1)*per_batch ..`` (``batches`` of them, then empty batches)."""

    def __init__(self, per_batch: int, batches: int):
        self.per_batch, self.batches = per_batch, batches

    def get_emitter(self, tx_state_id, conf, context):
        return _Lines(self.per_batch, self.batches)

    def output_fields(self):
        return ["id", "sentence"]


class SplitTrident(Function):
    def execute(self, tup, collector):
        for k, w in enumerate(tup[1].split()):
            collector.emit([k, w])


class FailingFirstCommit(FileState):
    """A FileState whose commit of each txid in ``fail`` raises once, after the file was
    published: Trident replays the txid (a marker file per txid remembers, across workers)."""

    def __init__(self, names, fmt, partition, fail, markers):
        super().__init__(names, fmt, partition)
        self.fail, self.markers = set(fail), markers

    def commit(self, txid):
        super().commit(txid)
        marker = os.path.join(self.markers, f"{self.partition}-{txid}")
        if txid in self.fail and not os.path.exists(marker):
            open(marker, "w").close()
            raise FailedException(f"injected failure after the commit of txid {txid}")


class FailingFirstCommitFactory(FileStateFactory):
    def __init__(self, path, fmt, fail, markers):
        super().__init__(path, fmt)
        self.fail, self.markers = fail, markers

    def make_state(self, conf, partition_index, num_partitions):
        return FailingFirstCommit(self.file_name_format, self.record_format, partition_index,
                                  self.fail, self.markers)


def trident_files(out_dir: str, markers: str, per_batch: int, batches: int, fail=()):
    t = TridentTopology()
    (t.new_stream("numbered", NumberedBatches(per_batch, batches))
      .each(["id", "sentence"], SplitTrident(), ["k", "word"])
      .partition_persist(FailingFirstCommitFactory(out_dir, DelimitedRecordFormat(FIELDS),
                                                   fail, markers),
                         FileStateUpdater(), ["id", "k", "word"])
      .parallelism_hint(2))
    return t.build()
