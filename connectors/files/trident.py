"""A Trident state that writes each batch to a file: storm-hdfs's Trident ``HdfsState``.

``stream.partition_persist(FileStateFactory(path, fmt), FileStateUpdater())``: each
partition writes a batch's tuples into a hidden in-progress file named by the batch's
txid and the partition, and publishes it by rename when Trident commits the batch
(``commit(txid)``, in txid order). A replayed txid writes the same name again and the
rename replaces the earlier file whole, so under a transactional spout (a txid always
holds the same tuples) every tuple is in the files exactly once; under an opaque spout the
file holds the txid's last attempt, which is the one Trident counted.

Names: ``<prefix>part<partition>-<txid, 12 digits><extension>``; an empty batch writes no
file (and removes one an earlier attempt of its txid published). A tuple that does not fit
the format is logged with its content and left out (failing the batch would replay it for
ever).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from ...client import extras

extras.require("files", "squall.connectors.files")

from ...client.state import StateError  # noqa: E402
from ...client.trident.persist import StateUpdater  # noqa: E402
from ...client.trident.state.base import State, StateFactory  # noqa: E402
from .formats import DelimitedRecordFormat, RecordError, RecordFormat  # noqa: E402
from .policies import DefaultFileNameFormat  # noqa: E402
from .storage import Storage  # noqa: E402

log = logging.getLogger("squall.connectors.files")


class FileState(State):
    """One partition's batch files (Storm's trident HdfsState). Not thread-safe."""

    def __init__(self, names: DefaultFileNameFormat, fmt: RecordFormat, partition: int):
        self.names = names
        self.fmt = fmt
        self.partition = partition
        self.storage: Storage | None = None
        self.txid: int | None = None
        self.fh: Any = None
        self.writer: Any = None
        #: Records left out of the current batch (they did not fit the format).
        self.bad = 0
        #: Files published by this object (tests).
        self.published: list[str] = []

    def batch_name(self, txid: int) -> str:
        return f"{self.names.prefix}part{self.partition}-{txid:012d}{self.names.extension}"

    def _path(self, name: str) -> str:
        assert self.storage is not None
        return self.storage.path(name)

    def _ready(self) -> Storage:
        if self.storage is None:
            storage = Storage(self.names.path)
            storage.makedirs(storage.root)
            self.storage = storage
        return self.storage

    def begin_commit(self, txid: int | None) -> None:
        self._ready()
        self._drop()
        self.txid = -1 if txid is None else int(txid)
        self.bad = 0

    def _drop(self) -> None:
        if self.fh is not None:
            try:
                self.fh.close()
            except OSError:
                pass
        self.fh = self.writer = None

    def write(self, tuples: list[Any]) -> None:
        """The batch's tuples, appended to its in-progress file."""
        storage = self._ready()
        if self.txid is None:
            raise StateError("FileState.write outside begin_commit/commit")
        for t in tuples:
            try:
                if self.writer is None:
                    self.fmt.check(t)
                    path = self._path("." + self.batch_name(self.txid) + ".inprogress")
                    self.fh = storage.create(path)
                    self.writer = self.fmt.open(self.fh, path)
                self.writer.write(t)
            except RecordError as exc:
                self.bad += 1
                if self.bad == 1:
                    log.error("file state partition %d, batch %d: a tuple left out: %s",
                              self.partition, self.txid, exc)

    def commit(self, txid: int | None) -> None:
        storage = self._ready()
        txid = -1 if txid is None else int(txid)
        name = self.batch_name(txid)
        final = self._path(name)
        if self.writer is None:  # an empty batch: no file (nor an earlier attempt's)
            storage.remove(final)
            self.txid = None
            return
        src = self._path("." + name + ".inprogress")
        self.writer.close()
        storage.sync(self.fh, src)
        self.fh.close()
        self.fh = self.writer = None
        storage.rename(src, final)  # replaces an earlier attempt's file whole
        self.published.append(final)
        if self.bad:
            log.error("file state partition %d, batch %d: %d tuple(s) left out (they did not "
                      "fit the format)", self.partition, txid, self.bad)
        self.txid = None

    def close(self) -> None:
        self._drop()


class FileStateFactory(StateFactory):
    """Makes each partition's :class:`FileState` (pickled into the topology: settings only).

    Example::

        stream.partition_persist(
            FileStateFactory("/data/words", JsonRecordFormat(["word"])), FileStateUpdater())
    """

    requires_extras = ("files",)

    def __init__(self, path: str | None = None, record_format: RecordFormat | None = None,
                 file_name_format: DefaultFileNameFormat | None = None):
        self.record_format = record_format or DelimitedRecordFormat()
        if file_name_format is None:
            if path is None:
                raise ValueError("FileStateFactory needs an output path or a file_name_format")
            file_name_format = DefaultFileNameFormat(path, extension=self.record_format.extension)
        self.file_name_format = file_name_format

    def make_state(self, conf: Mapping[str, Any], partition_index: int,
                   num_partitions: int) -> FileState:
        return FileState(self.file_name_format, self.record_format, partition_index)


class FileStateUpdater(StateUpdater):
    """Writes each batch's tuples into the partition's file (Storm's HdfsUpdater)."""

    def update_state(self, state: Any, tuples: list[Any], collector: Any) -> None:
        state.write(tuples)
