"""One sink task's files as a checkpointed :class:`~squall.client.state.State`.

:class:`FileSinkState` is what the checkpointing drives (``prepare_commit``, ``commit``,
``rollback``, ``restore``, ``prepared_txid``) and what the bolt writes records through; it
does the IO connectors/files/ledger.py decides. Its manifest lives in
``<output dir>/.squall-sink/<prefix><component>-<task index>-manifest.json``, beside the
files it describes, so it is as durable as they are whatever ``topology.state.provider``
is (the bolt hands it to the checkpointing through ``StatefulComponent.new_state``).

Not thread-safe: one executor owns a task's state.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from ...client.state import State, StateError
from .formats import RecordFormat, RecordWriter, TextWriter
from .ledger import (CloseFile, Discard, Ledger, LedgerError, Manifest, OpenFile, Publish,
                     ReopenFile, SyncFile, WriteManifest)
from .policies import (CheckpointSyncPolicy, DefaultFileNameFormat, NoRotationPolicy,
                       RotationPolicy, SyncPolicy)
from .storage import Storage

log = logging.getLogger("squall.connectors.files")

#: Under this rotation size (bytes) records are written one at a time.
SMALL_FILE = 1 << 20
#: The hidden directory of the output directory that holds the tasks' manifests.
MANIFEST_DIR = ".squall-sink"


class FileSinkState(State):
    """A task's in-progress and published files (see the module docstring).

    Example (what the bolt does)::

        state = FileSinkState(DefaultFileNameFormat("/data/out"), DelimitedRecordFormat(),
                              component="out", task=0, run="topo-1")
        state.restore(-1)            # the checkpointing's first call: recover, start clean
        state.write(tup)             # into .out-0-000000.txt.inprogress
        state.prepare_commit(1)      # synced, its length in the manifest
        state.commit(1)              # published once the file rotates and a commit follows
    """

    def __init__(self, names: DefaultFileNameFormat, fmt: RecordFormat, component: str,
                 task: int, run: str, rotation: RotationPolicy | None = None,
                 sync: SyncPolicy | None = None, clock: Callable[[], float] = time.monotonic):
        self.names = names
        self.fmt = fmt
        self.component = component
        self.task = task
        self.run = run
        self.rotation = rotation or NoRotationPolicy()
        self.sync_policy = sync or CheckpointSyncPolicy()
        self.clock = clock
        self.storage: Storage | None = None
        self.ledger: Ledger | None = None
        self.fh: Any = None
        self.writer = None
        self._row = fmt.row
        #: Records since the last sync.
        self.unsynced = 0
        self.rotate_at = self.rotation.size_limit()
        self.sync_every = self.sync_policy.count_limit()
        #: Records a text writer encodes and writes together: a file rotates by size within
        #: one batch of its limit, so small limits get exact sizes.
        self.batch = TextWriter.BATCH if self.rotate_at >= SMALL_FILE else 1
        #: Files published by this task object (tests).
        self.published: list[str] = []
        #: Why the records since the last checkpoint cannot be committed (a failed write).
        self.broken: str | None = None

    # --- setup -----------------------------------------------------------------------
    def _ready(self) -> Ledger:
        """Open the directory and load the manifest, once (not in the constructor: a worker
        builds its state before the checkpointing says what to do with it)."""
        if self.ledger is not None:
            return self.ledger
        storage = Storage(self.names.path)
        self.storage = storage
        self.dir = storage.root
        self.meta_dir = storage.path(MANIFEST_DIR)
        storage.makedirs(self.dir)
        storage.makedirs(self.meta_dir)
        self.manifest_path = storage.path(
            MANIFEST_DIR, f"{self.names.stem(self.component, self.task)}manifest.json")
        raw = storage.read(self.manifest_path)
        try:
            manifest = Manifest.from_json(raw.decode()) if raw else None
        except (ValueError, KeyError, TypeError, LedgerError) as exc:
            raise StateError(f"file sink manifest {self.manifest_path!r} cannot be read: "
                             f"{exc}") from None
        # Object stores keep nothing of an unclosed file: close every file at a checkpoint.
        whole = self.fmt.whole_file or not storage.local
        ledger, todo = Ledger.load(self.run, manifest, whole_file=whole)
        if manifest is not None and manifest.run != self.run:
            log.info("%s:%d: the manifest is of run %s; its committed records are published "
                     "and file numbers go on from %d", self.component, self.task, manifest.run,
                     ledger.next_seq)
        self._do(todo)  # an error here: the next call loads and recovers again
        self.ledger = ledger
        return ledger

    def _in_progress(self, seq: int) -> str:
        assert self.storage is not None
        return self.storage.path(self.names.in_progress(self.component, self.task, seq))

    def _published(self, seq: int) -> str:
        assert self.storage is not None
        return self.storage.path(self.names.name(self.component, self.task, seq))

    # --- the instructions --------------------------------------------------------------
    def _do(self, instructions: list[Any]) -> None:
        storage = self.storage
        assert storage is not None
        for inst in instructions:
            if isinstance(inst, OpenFile):
                path = self._in_progress(inst.seq)
                self.fh = storage.create(path)
                self.writer = self.fmt.open(self.fh, path, batch=self.batch)
                now = self.clock()
                self.rotation.reset(now)
                self.sync_policy.reset(now)
                self.unsynced = 0
            elif isinstance(inst, SyncFile):
                self._sync(inst.seq)
            elif isinstance(inst, CloseFile):
                path = self._in_progress(inst.seq)
                if self.writer is not None:
                    try:
                        self.writer.close()
                    except OSError as exc:
                        raise StateError(f"cannot finish file {path!r}: {exc}") from None
                storage.sync(self.fh, path)
                self.fh.close()
                self.fh = self.writer = None
            elif isinstance(inst, WriteManifest):
                storage.write_atomic(self.manifest_path, inst.manifest.to_json().encode())
            elif isinstance(inst, Publish):
                self._publish(inst.part.seq, inst.part.length)
            elif isinstance(inst, Discard):
                self._discard({p.seq: p.length for p in inst.keep})
            elif isinstance(inst, ReopenFile):
                path = self._in_progress(inst.part.seq)
                self.fh = storage.reopen(path, inst.part.length)
                self.writer = self.fmt.open(self.fh, path, inst.part.length, self.batch)
                now = self.clock()
                self.rotation.reset(now)
                self.sync_policy.reset(now)
                self.unsynced = 0
            else:
                raise TypeError(inst)

    def _sync(self, seq: int) -> None:
        if self.writer is None:
            return
        path = self._in_progress(seq)
        try:
            self.writer.flush()
        except OSError as exc:
            raise StateError(f"cannot write file {path!r}: {exc}") from None
        self.storage.sync(self.fh, path)  # type: ignore[union-attr]
        self.sync_policy.reset(self.clock())
        self.unsynced = 0

    def _publish(self, seq: int, length: int) -> None:
        storage = self.storage
        assert storage is not None
        src, dst = self._in_progress(seq), self._published(seq)
        size = storage.size(src)
        if size is None:
            if storage.size(dst) is not None:
                return  # published before a crash: a commit repeated
            raise StateError(f"file sink {self.component}:{self.task}: {src!r}, prepared with "
                             f"{length} bytes, is gone: it cannot be published")
        if size < length:
            raise StateError(f"file sink {self.component}:{self.task}: {src!r} holds {size} "
                             f"bytes, its checkpoint recorded {length}: the file lost data")
        if size > length:
            storage.truncate(src, length)
        storage.rename(src, dst)
        self.published.append(dst)

    def _discard(self, keep: dict[int, int]) -> None:
        storage = self.storage
        assert storage is not None
        if self.fh is not None:
            try:
                self.fh.close()  # not the writer's close: no Parquet footer for dropped rows
            except OSError:
                pass
            self.fh = self.writer = None
        for name in storage.names(self.dir):
            seq = self.names.seq_of_in_progress(self.component, self.task, name)
            if seq is None:
                continue
            path = storage.path(name)
            if seq not in keep:
                storage.remove(path)
                continue
            size = storage.size(path) or 0
            if size < keep[seq]:
                raise StateError(f"file sink {self.component}:{self.task}: {path!r} holds "
                                 f"{size} bytes, its checkpoint recorded {keep[seq]}: the "
                                 "file lost data")
            if size > keep[seq]:  # a dead worker wrote on after the checkpoint
                storage.truncate(path, keep[seq])

    # --- records -----------------------------------------------------------------------
    @property
    def writer(self) -> RecordWriter | None:
        return self._writer

    @writer.setter
    def writer(self, w: RecordWriter | None) -> None:
        self._writer = w
        #: A text writer's pending rows, appended to directly by :meth:`write`.
        self._rows = w.rows if isinstance(w, TextWriter) else None

    def write(self, tup: Any) -> None:
        """Append one tuple's record (a RecordError, with the file as it was, when the tuple
        does not fit the format); rotates by size and syncs by count as the policies say,
        after each batch of records a text writer writes together."""
        rows = self._rows
        if rows is None:
            return self._write_other(tup)
        rows.append(self._row(tup))  # checked whole before anything is written
        if len(rows) >= self.batch:
            self._drain()

    def _write_other(self, tup: Any) -> None:
        """No file open yet, or a whole-file format's writer."""
        if self._writer is None:
            ledger = self._ready()
            self.fmt.check(tup)  # a bad first record opens no file
            self._do(ledger.open())
            if self._rows is not None:
                return self.write(tup)
        writer = self._writer
        assert writer is not None
        try:
            writer.write(tup)
        except OSError as exc:
            raise self._failed_write(exc) from None
        self.unsynced += 1
        self._limits(writer)

    def _drain(self) -> None:
        writer = self._writer
        assert isinstance(writer, TextWriter)
        n = len(writer.rows)
        try:
            writer.drain()
        except OSError as exc:
            raise self._failed_write(exc) from None
        self.unsynced += n
        self._limits(writer)

    def _failed_write(self, exc: OSError) -> StateError:
        # Part of a record may be in the file: this checkpoint must not be prepared.
        path = self._in_progress(self.ledger.current)  # type: ignore[union-attr, arg-type]
        self.broken = f"a write to {path!r} failed: {exc}"
        return StateError(f"cannot write file {path!r}: {exc}")

    def _limits(self, writer: RecordWriter) -> None:
        # Limits read once (size_limit, count_limit): a comparison, not two calls.
        if writer.size >= self.rotate_at:
            self._do(self.ledger.rotate(self._finished_size()))  # type: ignore[union-attr]
        elif self.unsynced >= self.sync_every:
            self._sync(self.ledger.current)  # type: ignore[union-attr, arg-type]

    def tick(self) -> None:
        """Time passed (a tick tuple, a checkpoint): rotate or sync as the policies say,
        though no record came."""
        ledger = self._ready()
        if ledger.current is None or self.writer is None:
            return
        now = self.clock()
        if self.rotation.due(now):
            self._do(ledger.rotate(self._finished_size()))
        elif (self.unsynced or self._rows) and self.sync_policy.due(now):
            self._sync(ledger.current)

    def rotate(self) -> None:
        """Close the open file now: it is published at the next commit."""
        ledger = self._ready()
        if ledger.current is not None and self.fh is not None:
            self._do(ledger.rotate(self._finished_size()))

    def _finished_size(self) -> int:
        """Finish the open file's records (a Parquet footer) and return its true length: a
        closed file's length is what its checkpoint records."""
        path = self._in_progress(self.ledger.current)  # type: ignore[union-attr, arg-type]
        try:
            if self.writer is not None:
                self.writer.close()
                self.writer = None
            self.fh.flush()
            return int(self.fh.tell())
        except OSError as exc:
            self.broken = f"finishing {path!r} failed: {exc}"
            raise StateError(f"cannot finish file {path!r}: {exc}") from None

    # --- the checkpoint -------------------------------------------------------------------
    def prepare_commit(self, txid: int) -> None:
        ledger = self._ready()
        if self.broken:
            raise StateError(f"file sink {self.component}:{self.task} cannot prepare "
                             f"transaction {txid}: {self.broken}; it rolls back")
        self.tick()
        size = 0
        if self.writer is not None:
            if ledger.whole_file:
                size = self._finished_size()  # the ledger closes it
            else:
                try:
                    self.writer.flush()
                except OSError as exc:
                    raise StateError(f"cannot write file "
                                     f"{self._in_progress(ledger.current)!r}: {exc}") from None
                size = self.writer.size
        self._do(self._checked(lambda: ledger.prepare(txid, size)))

    def commit(self, txid: int | None = None) -> None:
        if txid is None:
            raise StateError("a file sink commits a checkpoint's transaction only "
                             "(commit(txid) after prepare_commit(txid))")
        ledger = self._ready()
        self._do(self._checked(lambda: ledger.commit(txid)))

    def rollback(self) -> None:
        ledger = self._ready()
        self._do(ledger.rollback())
        self.broken = None

    def restore(self, txid: int) -> None:
        ledger = self._ready()
        self._do(ledger.restore(txid))
        self.broken = None

    def prepared_txid(self) -> int | None:
        return self._ready().prepared_txid()

    @staticmethod
    def _checked(step: Callable[[], list[Any]]) -> list[Any]:
        try:
            return step()
        except LedgerError as exc:
            raise StateError(str(exc)) from None

    def close(self) -> None:
        """Close the open file, as it is (what is not committed is dropped at the restart)."""
        if self.fh is not None:
            try:
                self.fh.close()
            except OSError:
                pass
            self.fh = self.writer = None
