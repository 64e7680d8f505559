"""Partitioned Trident spouts over line files: a transactional txid replays its exact lines,
also after a restart; an opaque batch continues after the previous one and a replay may read
more; partitions are dealt over the spout's tasks."""

from collections import namedtuple

import pytest

from squall.client.trident.line_files import (OpaqueLineFiles, TransactionalLineFiles,
                                              read_lines)
from squall.client.trident.spout import PartitionedSpoutExecutor, partitions_for_task
from squall.client.memory_cluster_state import InMemoryClusterState, MemoryStore
from squall.client.trident.tx_state import TransactionalState

Attempt = namedtuple("Attempt", "txid attempt_id")


class Context:
    this_component_id = "spout"

    def __init__(self, index=0, tasks=1):
        self.this_task_index, self.tasks = index, list(range(tasks))

    def component_tasks(self, component):
        return self.tasks


class Collector:
    def __init__(self):
        self.emitted = []

    def emit(self, values):
        self.emitted.append(values[0])

    def report_error(self, error):
        raise AssertionError(error)


def write(path, lines, mode="w"):
    with open(path, mode) as fh:
        fh.write("".join(f"{line}\n" for line in lines))


def spout_parts(spout, shared, index=0, tasks=1):
    ex = PartitionedSpoutExecutor(
        spout, lambda sid, conf: TransactionalState(InMemoryClusterState(store=shared), sid))
    coord = ex.get_coordinator("wc", {}, None)
    return ex, coord, ex.get_emitter("wc", {}, Context(index, tasks))


def batch(coord, emitter, txid, attempt_id=0, prev=None):
    meta = coord.initialize_transaction(txid, prev, None)
    out = Collector()
    emitter.emit_batch(Attempt(txid, attempt_id), meta, out)
    return out.emitted


def test_read_lines_leaves_a_partial_last_line(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"one\ntwo\nthr")
    assert read_lines(str(p), 0) == (["one", "two"], 8)
    assert read_lines(str(p), 0, max_lines=1) == (["one"], 4)
    assert read_lines(str(p), 4, end=8) == (["two"], 8)


def test_transactional_txids_replay_their_exact_lines_also_after_a_restart(tmp_path):
    f = tmp_path / "in.txt"
    write(f, [f"l{i}" for i in range(5)])
    shared = MemoryStore()
    ex, coord, em = spout_parts(TransactionalLineFiles([str(f)], batch_lines=2), shared)
    assert batch(coord, em, 1) == ["l0", "l1"]
    assert batch(coord, em, 2) == ["l2", "l3"]
    write(f, ["l5", "l6"], mode="a")
    assert batch(coord, em, 2, attempt_id=1) == ["l2", "l3"]  # replay: the same batch
    _, coord2, em2 = spout_parts(TransactionalLineFiles([str(f)], batch_lines=2), shared)
    assert batch(coord2, em2, 2, attempt_id=2) == ["l2", "l3"]  # ... after a restart too
    assert batch(coord2, em2, 3) == ["l4", "l5"]
    em2.success(Attempt(3, 0))
    prefix = "/squall/transactional/"
    stored = {p[len(prefix):].split("/", 1)[1] for p, (data, _, _) in shared.nodes.items()
              if p.startswith(prefix) and data}
    assert stored == {f"{next(iter(em2.states)).strip('/')}/3"}  # older txids cleaned up


def test_opaque_batches_continue_and_a_replay_may_read_more(tmp_path):
    f = tmp_path / "in.txt"
    write(f, ["a", "b", "c"])
    shared = MemoryStore()
    ex, coord, em = spout_parts(OpaqueLineFiles([str(f)], batch_lines=2), shared)
    assert ex.committer
    assert batch(coord, em, 1) == ["a", "b"]
    assert batch(coord, em, 2) == ["c"]            # in flight after txid 1's batch
    em.commit(Attempt(1, 0))
    write(f, ["d", "e"], mode="a")
    assert batch(coord, em, 2, attempt_id=1) == ["c", "d"]  # replayed, and it differs
    em.commit(Attempt(2, 1))
    em.success(Attempt(2, 1))
    _, coord2, em2 = spout_parts(OpaqueLineFiles([str(f)], batch_lines=2), shared)
    assert batch(coord2, em2, 3) == ["e"]          # a restart continues after the commit


def test_partitions_are_dealt_over_tasks(tmp_path):
    files = []
    for name in "abc":
        files.append(str(tmp_path / f"{name}.txt"))
        write(files[-1], [name])
    assert partitions_for_task(files, 1, 2) == [files[1]]
    got = []
    for index in range(2):
        _, coord, em = spout_parts(TransactionalLineFiles(files), MemoryStore(), index, tasks=2)
        got.append(sorted(batch(coord, em, 1)))
    assert got == [["a", "c"], ["b"]]


def test_batch_lines_must_be_positive():
    with pytest.raises(ValueError, match="batch_lines"):
        TransactionalLineFiles(["x"], batch_lines=0)
