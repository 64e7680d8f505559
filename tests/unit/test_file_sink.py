"""The file sink's pure parts: rotation and sync policies, record formats, the ledger's
state machine (event tables), and the state on a real directory through a simulated kill -9
(a second state object over the same directory, the first one's bytes left as they were)."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

pytest.importorskip("fsspec")
pytest.importorskip("pyarrow")

from event_table import calls, play  # noqa: E402
from squall.client.state import StateError  # noqa: E402
from squall.client.tuple import Fields, Tuple  # noqa: E402
from squall.connectors.files import (AnyRotationPolicy, CountSyncPolicy,  # noqa: E402
                                     DefaultFileNameFormat, DelimitedRecordFormat,
                                     FileSinkBolt, FileSinkState, FileSizeRotationPolicy,
                                     JsonRecordFormat, NoRotationPolicy, ParquetRecordFormat,
                                     RecordError, TimedRotationPolicy, TimedSyncPolicy,
                                     TimeUnit, Units)
from squall.connectors.files.ledger import (CloseFile, Discard, Ledger, LedgerError,  # noqa: E402
                                            Manifest, OpenFile, Part, Point, Prepared, Publish,
                                            ReopenFile, SyncFile, WriteManifest)
from squall.connectors.files.trident import FileState  # noqa: E402


def tup(fields, values):
    return Tuple(list(values), "src", "default", 1, None, Fields(fields))


# --- policies ------------------------------------------------------------------------------

def test_size_rotation_in_storms_units():
    p = FileSizeRotationPolicy(2, Units.KB)
    assert p.max_bytes == 2048
    assert [p.mark(n) for n in (0, 2047, 2048, 5000)] == [False, False, True, True]
    assert not p.due(1e9) and p.tick_secs is None  # size only: no ticks, no timed rotation
    with pytest.raises(ValueError):
        FileSizeRotationPolicy(0)


def test_timed_rotation_counts_from_the_files_opening():
    p = TimedRotationPolicy(2, TimeUnit.MINUTES)
    assert p.interval == 120 and p.tick_secs == 1.0
    assert not p.due(0.0)  # no file opened yet
    p.reset(10.0)
    play(lambda now: (p.mark(10 ** 9), p.due(now)), [
        (60.0, (False, False)),
        (129.9, (False, False)),
        (130.0, (False, True)),  # time is for ticks and checkpoints, never per record
    ])
    p.reset(130.0)
    assert not p.due(131.0)
    assert TimedRotationPolicy(0.5).tick_secs == 0.1


def test_any_rotation_rotates_when_one_says_so():
    p = AnyRotationPolicy(FileSizeRotationPolicy(100, 1), TimedRotationPolicy(5))
    assert p.tick_secs == 0.5
    p.reset(0.0)
    play(lambda e: (p.mark(e[0]), p.due(e[1])), [
        ((10, 1.0), (False, False)),
        ((100, 1.0), (True, False)),
        ((10, 5.0), (False, True)),
    ])


def test_no_rotation_never_rotates():
    p = NoRotationPolicy()
    assert not p.mark(10 ** 12) and not p.due(1e9)


def test_sync_policies():
    c = CountSyncPolicy(3)
    assert [c.mark(n) for n in (1, 2, 3)] == [False, False, True]
    assert not c.due(1e9)
    t = TimedSyncPolicy(1.0)
    assert t.tick_secs == 0.5
    assert not t.due(5.0)  # no file yet
    t.reset(0.0)
    play(t.due, [(0.5, False), (1.0, True)])
    assert not t.mark(10 ** 6)
    with pytest.raises(ValueError):
        CountSyncPolicy(0)


def test_file_names_are_deterministic_and_hidden_while_in_progress():
    f = DefaultFileNameFormat("/out", prefix="wc-", extension=".csv")
    assert f.name("count/er", 2, 7) == "wc-count_er-2-000007.csv"
    assert f.in_progress("count/er", 2, 7) == ".wc-count_er-2-000007.csv.inprogress"
    assert f.seq_of_in_progress("count/er", 2, ".wc-count_er-2-000007.csv.inprogress") == 7
    assert f.seq_of_in_progress("count/er", 12, ".wc-count_er-2-000007.csv.inprogress") is None
    assert f.seq_of_in_progress("count/er", 2, "wc-count_er-2-000007.csv") is None


# --- formats -------------------------------------------------------------------------------

def test_delimited_format_as_storms():
    t = tup(["word", "count", "extra"], ["fig", 3, None])
    assert DelimitedRecordFormat().format(t) == b"fig,3,\n"
    fmt = DelimitedRecordFormat().with_fields(["count", "word"]).with_field_delimiter("\t") \
        .with_record_delimiter("\r\n")
    assert fmt.format(t) == b"3\tfig\r\n"


def test_a_missing_field_is_a_record_error_showing_the_tuple():
    t = tup(["word"], ["fig"])
    with pytest.raises(RecordError) as e:
        DelimitedRecordFormat(["word", "count"]).format(t)
    assert "no field 'count'" in str(e.value) and "'word': 'fig'" in str(e.value)
    with pytest.raises(RecordError):
        JsonRecordFormat(["count"]).format(t)


def test_json_lines():
    t = tup(["word", "count"], ["fig", 3])
    assert json.loads(JsonRecordFormat().format(t)) == {"word": "fig", "count": 3}
    assert JsonRecordFormat(["count"]).format(t) == b'{"count":3}\n'
    with pytest.raises(RecordError) as e:
        JsonRecordFormat().format(tup(["word", "count"], ["fig", object()]))
    assert "cannot be written as JSON" in str(e.value)


def test_parquet_row_groups_read_back(tmp_path):
    import pyarrow.parquet as pq

    fmt = ParquetRecordFormat(["word", "count"], row_group_size=2)
    path = str(tmp_path / "x.parquet")
    with open(path, "wb") as fh:
        w = fmt.open(fh, path)
        for i in range(5):
            w.write(tup(["word", "count"], [f"w{i}", i]))
        with pytest.raises(RecordError) as e:  # the file's schema came from its first row
            w.write(tup(["word", "count"], ["bad", "not a number"]))
        assert "'count'" in str(e.value) and "int64" in str(e.value)
        w.close()
    table = pq.read_table(path)
    assert table.to_pydict() == {"word": [f"w{i}" for i in range(5)], "count": list(range(5))}
    assert pq.ParquetFile(path).metadata.num_row_groups == 3


# --- the ledger ------------------------------------------------------------------------------

def manifest(led):
    return WriteManifest(led.manifest())


def test_ledger_publishes_a_rotated_file_only_at_the_commit_after_it():
    led = Ledger("r1")
    play(calls(led), [
        (("open",), [OpenFile(0)]),
        (("rotate", 100), [CloseFile(0)]),
        (("open",), [OpenFile(1)]),
        (("prepare", 1, 30), [SyncFile(1), WriteManifest(Manifest(
            "r1", None, Point(0), Prepared(1, (Part(0, 100),), Point(2, Part(1, 30)))))]),
        (("commit", 1), [Publish(Part(0, 100)), WriteManifest(Manifest(
            "r1", 1, Point(2, Part(1, 30))))]),
        (("commit", 1), []),  # a COMMIT sent again
        (("prepare", 2, 50), [SyncFile(1), WriteManifest(Manifest(
            "r1", 1, Point(2, Part(1, 30)), Prepared(2, (), Point(2, Part(1, 50)))))]),
        (("commit", 2), [WriteManifest(Manifest("r1", 2, Point(2, Part(1, 50))))]),
    ], after=lambda i: led.validate_state())


def test_ledger_rollback_takes_the_same_file_numbers_again():
    led = Ledger("r1")
    play(calls(led), [
        (("open",), [OpenFile(0)]),
        (("prepare", 1, 10), [SyncFile(0), manifest_of(led, 1, 10)]),
        (("commit", 1), [WriteManifest(Manifest("r1", 1, Point(1, Part(0, 10))))]),
        (("rotate", 40), [CloseFile(0)]),
        (("open",), [OpenFile(1)]),
    ], after=lambda i: led.validate_state())
    led.prepare(2, 5)
    # Transaction 2 failed somewhere: back to 1, file 0 cut to its 10 bytes, file 1 gone.
    assert led.rollback() == [Discard((Part(0, 10),)), ReopenFile(Part(0, 10)),
                              WriteManifest(Manifest("r1", 1, Point(1, Part(0, 10))))]
    led.validate_state()
    assert led.rotate(40) == [CloseFile(0)]
    assert led.open() == [OpenFile(1)]  # the replay writes file 1 again, not file 2


def manifest_of(led, txid, size):
    """The prepare's manifest in test_ledger_rollback...: file 0 open with ``size`` bytes."""
    return WriteManifest(Manifest("r1", None, Point(0), Prepared(txid, (),
                                                                   Point(1, Part(0, size)))))


def test_ledger_restore_commits_a_prepared_checkpoint_that_completed():
    led = Ledger("r1")
    led.open()
    led.rotate(70)
    led.prepare(4, 0)
    out = led.restore(4)
    assert out == [Publish(Part(0, 70)), WriteManifest(Manifest("r1", 4, Point(1))),
                   Discard(())]
    led.validate_state()


def test_ledger_restore_drops_a_prepared_checkpoint_that_did_not_complete():
    led = Ledger("r1")
    led.open()
    led.rotate(70)
    led.prepare(5, 0)
    assert led.restore(4) == [Discard(()), WriteManifest(Manifest("r1", None, Point(0)))]
    assert led.open() == [OpenFile(0)]


def test_ledger_load_keeps_what_the_manifest_names_and_cuts_the_rest():
    m = Manifest("r1", 3, Point(2, Part(1, 30)),
                 Prepared(4, (Part(1, 90),), Point(3, Part(2, 12))))
    led, out = Ledger.load("r1", Manifest.from_json(m.to_json()))
    assert out == [Discard((Part(1, 90), Part(2, 12))), ReopenFile(Part(2, 12))]
    assert led.prepared_txid() == 4
    # The spout says 4 never completed: back to 3 (file 1 open at 30 bytes).
    assert led.rollback() == [Discard((Part(1, 30),)), ReopenFile(Part(1, 30)),
                              WriteManifest(Manifest("r1", 3, Point(2, Part(1, 30))))]
    led.validate_state()


def test_ledger_load_of_another_runs_manifest_publishes_its_committed_records():
    m = Manifest("old", 9, Point(4, Part(3, 25)), Prepared(10, (Part(3, 60),), Point(5)))
    led, out = Ledger.load("new", m)
    assert out == [Discard((Part(3, 25),)), Publish(Part(3, 25)),
                   WriteManifest(Manifest("new", None, Point(5)))]
    assert led.open() == [OpenFile(5)]


def test_ledger_without_a_manifest_cleans_the_tasks_leftovers():
    led, out = Ledger.load("r1", None)
    assert out == [Discard(())]


def test_ledger_refuses_calls_out_of_order():
    led = Ledger("r1")
    led.prepare(1, 0)
    with pytest.raises(LedgerError, match="transaction 1 is prepared"):
        led.prepare(2, 0)
    with pytest.raises(LedgerError, match="the prepared one is 1"):
        led.commit(2)


def test_whole_file_formats_close_at_every_prepare():
    led = Ledger("r1", whole_file=True)
    led.open()
    assert led.prepare(1, 500) == [CloseFile(0), WriteManifest(Manifest(
        "r1", None, Point(0), Prepared(1, (Part(0, 500),), Point(1))))]
    led.validate_state()


def test_manifest_json_is_versioned():
    m = Manifest("r", 1, Point(2, Part(1, 3)), Prepared(2, (Part(1, 5),), Point(3)))
    assert Manifest.from_json(m.to_json()) == m
    bad = json.loads(m.to_json())
    bad["version"] = 99
    with pytest.raises(LedgerError, match="version 99"):
        Manifest.from_json(json.dumps(bad))


# --- the state on a directory ---------------------------------------------------------------

def words(*ws):
    return [tup(["word"], [w]) for w in ws]


def state(path, run="r1", **kw):
    return FileSinkState(DefaultFileNameFormat(str(path)), DelimitedRecordFormat(), "out", 0,
                         run, **kw)


def published(path):
    return {n: read(os.path.join(path, n)) for n in sorted(os.listdir(path))
            if not n.startswith(".")}


def read(path):
    with open(path) as fh:
        return fh.read()


def hidden(path):
    return sorted(n for n in os.listdir(path) if n.startswith(".") and n != ".squall-sink")


class Size(FileSizeRotationPolicy):
    def __init__(self, n):
        self.max_bytes = n


def test_state_survives_a_kill_after_prepare_with_bytes_written_past_it(tmp_path):
    s = state(tmp_path, rotation=Size(8))
    s.restore(-1)
    for t in words("aa", "bb", "cc"):  # 3 bytes each: rotates after the third
        s.write(t)
    for t in words("dd"):
        s.write(t)
    s.prepare_commit(1)
    s.write(words("ee")[0])  # after the prepare: not in transaction 1
    s.close()  # kill -9: what the dead worker wrote stays, past the prepare
    assert published(tmp_path) == {}
    # kill -9. The new task's state; barrier recovery restores checkpoint 1 (it completed).
    s2 = state(tmp_path, rotation=Size(8))
    assert s2.prepared_txid() == 1
    s2.restore(1)
    assert published(tmp_path) == {"out-0-000000.txt": "aa\nbb\ncc\n"}
    assert hidden(tmp_path) == [".out-0-000001.txt.inprogress"]
    assert read(tmp_path / ".out-0-000001.txt.inprogress") == "dd\n"  # "ee" cut
    s2.write(words("ee")[0])
    s2.write(words("ff")[0])  # 9 bytes: rotates
    s2.prepare_commit(2)
    s2.commit(2)
    assert published(tmp_path) == {"out-0-000000.txt": "aa\nbb\ncc\n",
                                   "out-0-000001.txt": "dd\nee\nff\n"}
    s2.commit(2)  # repeated: nothing more
    s2.close()
    assert len(published(tmp_path)) == 2


def test_state_drops_a_checkpoint_that_did_not_complete(tmp_path):
    s = state(tmp_path, rotation=Size(6))
    s.restore(-1)
    for t in words("aa", "bb", "cc"):
        s.write(t)
    s.prepare_commit(1)
    s.close()
    s2 = state(tmp_path, rotation=Size(6))
    s2.restore(0)  # the last completed checkpoint is 0: 1 is dropped, its input replayed
    assert published(tmp_path) == {} and hidden(tmp_path) == []
    for t in words("aa", "bb", "cc"):
        s2.write(t)
    s2.prepare_commit(1)
    s2.commit(1)
    s2.close()
    assert published(tmp_path) == {"out-0-000000.txt": "aa\nbb\n"}


def test_parquet_files_close_at_each_prepare_and_survive_a_kill(tmp_path):
    import pyarrow.parquet as pq

    fmt = ParquetRecordFormat(["word"])
    s = FileSinkState(DefaultFileNameFormat(str(tmp_path), extension=".parquet"), fmt,
                      "out", 0, "r1")
    s.restore(-1)
    for t in words("aa", "bb"):
        s.write(t)
    s.prepare_commit(1)
    s.write(words("cc")[0])  # into a new file, never prepared
    s.close()
    s2 = FileSinkState(DefaultFileNameFormat(str(tmp_path), extension=".parquet"), fmt,
                       "out", 0, "r1")
    s2.restore(1)
    assert sorted(os.listdir(tmp_path)) == [".squall-sink", "out-0-000000.parquet"]
    assert pq.read_table(tmp_path / "out-0-000000.parquet").to_pydict() == {"word": ["aa", "bb"]}
    s2.write(words("cc")[0])
    s2.prepare_commit(2)
    s2.commit(2)
    assert pq.read_table(tmp_path / "out-0-000001.parquet").to_pydict() == {"word": ["cc"]}
    s2.close()


def test_commit_repeated_after_a_crash_between_rename_and_manifest(tmp_path):
    s = state(tmp_path, rotation=Size(3))
    s.restore(-1)
    s.write(words("aa")[0])
    s.prepare_commit(1)
    saved = read(s.manifest_path)
    s.commit(1)
    with open(s.manifest_path, "w") as fh:  # as if killed before the manifest's rename
        fh.write(saved)
    s.close()
    s2 = state(tmp_path, rotation=Size(3))
    s2.restore(1)
    assert published(tmp_path) == {"out-0-000000.txt": "aa\n"}
    assert s2.ledger.committed == 1


def test_acker_mode_rollback_discards_after_the_last_commit(tmp_path):
    s = state(tmp_path, sync=CountSyncPolicy(1))
    s.restore(-1)
    s.write(words("aa")[0])
    s.prepare_commit(1)
    s.commit(1)
    s.write(words("bb")[0])
    s.prepare_commit(2)
    s.rollback()
    s.close()
    assert read(tmp_path / ".out-0-000000.txt.inprogress") == "aa\n"
    assert s.prepared_txid() is None


def test_a_bad_record_opens_no_file_and_leaves_the_file_whole(tmp_path):
    s = FileSinkState(DefaultFileNameFormat(str(tmp_path)), DelimitedRecordFormat(["word"]),
                      "out", 0, "r1")
    s.restore(-1)
    with pytest.raises(RecordError):
        s.write(tup(["other"], ["x"]))
    assert hidden(tmp_path) == []
    s.write(words("aa")[0])
    with pytest.raises(RecordError):
        s.write(tup(["other"], ["x"]))
    s.write(words("bb")[0])
    s.prepare_commit(1)
    s.close()
    assert read(tmp_path / ".out-0-000000.txt.inprogress") == "aa\nbb\n"


def test_memory_filesystem_closes_a_file_at_every_checkpoint():
    import fsspec

    url = "memory://squall-file-sink-test"
    s = FileSinkState(DefaultFileNameFormat(url, extension=".jsonl"), JsonRecordFormat(), "out", 1,
                      "r1")
    s.restore(-1)
    s.write(tup(["word"], ["fig"]))
    s.prepare_commit(1)
    s.commit(1)
    fs = fsspec.filesystem("memory")
    assert fs.cat_file("/squall-file-sink-test/out-1-000000.jsonl") == b'{"word":"fig"}\n'
    fs.rm("/squall-file-sink-test", recursive=True)


def test_unwritable_directory_names_the_path(tmp_path):
    (tmp_path / "a-file").write_text("")  # a directory under a file: refused even to root
    where = tmp_path / "a-file" / "out"
    s = state(where)
    with pytest.raises(StateError, match=f"cannot create output directory '{where}'"):
        s.restore(-1)


def test_bolt_reports_a_bad_record_and_fails_it(tmp_path):
    class Out:
        def __init__(self):
            self.acked, self.failed, self.errors = [], [], []

        def ack(self, t):
            self.acked.append(t)

        def fail(self, t):
            self.failed.append(t)

        def report_error(self, e):
            self.errors.append(str(e))

    bolt = FileSinkBolt(str(tmp_path), record_format=DelimitedRecordFormat(["word", "count"]))
    out = Out()
    ctx = SimpleNamespace(this_component_id="out", this_task_index=0, topology_id="t-1")
    bolt.prepare({"topology.state.checkpoint.mode": "barrier"}, ctx, out)
    bolt.init_state(bolt.new_state("out-5", {}, ctx))
    bolt.state.restore(-1)
    good, bad = tup(["word", "count"], ["fig", 2]), tup(["word"], ["plum"])
    bolt.execute(good)
    bolt.execute(bad)
    assert out.acked == [good] and out.failed == [bad]
    bolt.cleanup()
    assert len(out.errors) == 1 and "no field 'count'" in out.errors[0] \
        and "'plum'" in out.errors[0]


def test_bolt_drops_a_bad_record_where_a_failure_would_rewind_the_spouts(tmp_path):
    class Out:
        def __init__(self):
            self.acked, self.failed, self.errors = [], [], []

        def ack(self, t):
            self.acked.append(t)

        def fail(self, t):
            self.failed.append(t)

        def report_error(self, e):
            self.errors.append(str(e))

    bolt = FileSinkBolt(str(tmp_path), record_format=DelimitedRecordFormat(["word", "count"]))
    out = Out()
    ctx = SimpleNamespace(this_component_id="out", this_task_index=0, topology_id="t-1",
                          this_sources=lambda: [("split", "default"),
                                                ("split", "$checkpoint")])
    bolt.prepare({"topology.state.checkpoint.mode": "barrier"}, ctx, out)
    bolt.init_state(bolt.new_state("out-5", {}, ctx))
    bolt.state.restore(-1)
    bad = tup(["word"], ["plum"])
    bolt.execute(bad)
    bolt.cleanup()
    assert out.acked == [bad] and not out.failed
    assert "'plum'" in out.errors[0] and "it was dropped" in out.errors[0]


def test_bolt_says_acker_mode_is_at_least_once(tmp_path):
    errors = []
    bolt = FileSinkBolt(str(tmp_path))
    ctx = SimpleNamespace(this_component_id="out", this_task_index=0, topology_id="t-1")
    bolt.prepare({"topology.state.checkpoint.mode": "acker"}, ctx,
                 SimpleNamespace(report_error=errors.append))
    assert len(errors) == 1 and "at-least-once" in errors[0] and "barrier" in errors[0]


def test_trident_file_state_rewrites_a_replayed_txid(tmp_path):
    st = FileState(DefaultFileNameFormat(str(tmp_path)), DelimitedRecordFormat(), 3)
    st.begin_commit(7)
    st.write(words("aa", "bb"))
    st.commit(7)
    st.begin_commit(7)  # replayed (its commit's ack was lost)
    st.write(words("aa", "bb"))
    st.commit(7)
    assert published(tmp_path) == {"part3-000000000007.txt": "aa\nbb\n"}
    assert hidden(tmp_path) == []


def test_the_checkpoint_uses_a_components_own_state():
    from squall.worker.checkpoint import task_state

    mine = object()
    own = SimpleNamespace(new_state=lambda ns, conf, ctx: mine)
    assert task_state(own, "c-1", {}, None) is mine
    none = SimpleNamespace(new_state=lambda ns, conf, ctx: None)
    from squall.client.state import InMemoryKeyValueState
    assert isinstance(task_state(none, "c-1", {}, None), InMemoryKeyValueState)
    assert isinstance(task_state(object(), "c-1", {}, None), InMemoryKeyValueState)


# --- a kill -9 at every step ------------------------------------------------------------------

class Crash(Exception):
    pass


class Crashy(FileSinkState):
    """Dies (raises Crash) before its ``crash_at``-th instruction, as a kill -9 would."""

    def __init__(self, path, crash_at=None):
        super().__init__(DefaultFileNameFormat(str(path)), DelimitedRecordFormat(), "out", 0,
                         "r1", rotation=Size(20))
        self.crash_at = crash_at
        self.done = 0

    def _do(self, instructions):
        for inst in instructions:
            if self.crash_at is not None and self.done == self.crash_at:
                raise Crash(inst)
            self.done += 1
            super()._do([inst])


RECORDS = [f"r{i:02d}" for i in range(23)]


def drive(s, start, first_txid, progress):
    """Write RECORDS[start:], a checkpoint each 5 records (and a last one after a rotation);
    ``progress`` gets what the checkpointing knows: offsets per txid, the last txid prepared
    and the last whose commit began."""
    txid = first_txid
    for i in range(start, len(RECORDS)):
        s.write(words(RECORDS[i])[0])
        if (i + 1) % 5 == 0 or i + 1 == len(RECORDS):
            if i + 1 == len(RECORDS):
                s.rotate()
            txid += 1
            s.prepare_commit(txid)
            progress["offsets"][txid] = i + 1
            progress["prepared"] = txid
            progress["committed"] = txid  # its commit begins: it completed everywhere
            s.commit(txid)


def records_in(path):
    got = []
    for text in published(path).values():
        assert text.endswith("\n"), text
        got += text.splitlines()
    return sorted(got)


@pytest.mark.parametrize("master_completed", [True, False])
def test_a_kill_at_any_step_leaves_every_record_once(tmp_path, master_completed):
    """Kill the task before each instruction in turn (writing half a record into its open
    file as it dies); a new task restores the last completed checkpoint (with its prepared
    one either completed by the master or not) and the input replays from that
    checkpoint's offset: the published files end with every record once."""
    clean = Crashy(tmp_path / "clean")
    clean.restore(-1)
    drive(clean, 0, 0, {"offsets": {}, "prepared": 0, "committed": 0})
    clean.close()
    assert records_in(tmp_path / "clean") == RECORDS
    killed = 0
    for k in range(1, clean.done):
        d = tmp_path / f"k{k}"
        s = Crashy(d, crash_at=k)
        progress = {"offsets": {0: 0}, "prepared": 0, "committed": 0}
        try:
            s.restore(0)
            drive(s, 0, 0, progress)
        except Crash:
            pass
        else:
            continue
        s.close()
        killed += 1
        for name in os.listdir(d):  # a record half written as the process died
            if name.endswith(".inprogress"):
                with open(d / name, "a") as fh:
                    fh.write("r9")
        # A checkpoint prepared here and not committed may or may not have completed.
        completed = progress["prepared"] if master_completed else progress["committed"]
        s2 = Crashy(d)
        s2.restore(completed)
        drive(s2, progress["offsets"][completed], completed, progress)
        s2.close()
        assert records_in(d) == RECORDS, f"killed before instruction {k}"
        assert not [n for n in os.listdir(d) if n.endswith(".inprogress")], k
    assert killed == clean.done - 1 > 20


def test_timed_policies_act_at_ticks(tmp_path):
    now = [0.0]
    s = FileSinkState(DefaultFileNameFormat(str(tmp_path)), DelimitedRecordFormat(), "out", 0,
                      "r1", rotation=TimedRotationPolicy(10), sync=TimedSyncPolicy(2),
                      clock=lambda: now[0])
    s.restore(-1)
    s.write(words("aa")[0])
    synced = []
    s.storage.sync = lambda fh, path: synced.append(path)
    now[0] = 1.0
    s.tick()
    assert synced == []
    now[0] = 2.5
    s.tick()  # the sync's time
    assert len(synced) == 1 and read(tmp_path / ".out-0-000000.txt.inprogress") == "aa\n"
    now[0] = 10.0
    s.tick()  # the rotation's: closed, published at the next commit
    s.prepare_commit(1)
    s.commit(1)
    assert published(tmp_path) == {"out-0-000000.txt": "aa\n"}
    s.close()
