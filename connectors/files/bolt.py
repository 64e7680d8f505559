"""The file sink bolt: storm-hdfs's HdfsBolt, exactly-once through the checkpoints.

:class:`FileSinkBolt` is a :class:`~squall.client.StatefulBolt` whose state is its files
(connectors/files/sink.py): records go into hidden in-progress files, a checkpoint's
prepare syncs them and records their lengths in a manifest, its commit publishes the
closed ones by an atomic rename. A kill -9 anywhere leaves published files holding only
committed records, each once; the restarted task cuts its in-progress files back to the
last checkpoint and its input is replayed from there.

Which checkpoint mode gives what (``topology.state.checkpoint.mode``):

- ``barrier``: exactly-once. After a failure every spout rewinds to the last completed
  checkpoint and the sink restores that checkpoint's files, so each input is written once;
- ``barrier-at-least-once``: unaligned barriers, a checkpoint may hold tuples of the next
  one: a recovery may write those twice;
- ``acker`` and ``acker-at-least-once``: at-least-once. The files never hold a partial or
  an uncommitted record, but a tuple whose checkpoint committed is replayed when its held
  ack dies with the worker, and written again (the acker mode's replay detection works on
  key-value states only). The bolt says so in the topology's errors when it starts unless
  it was made with ``exactly_once=False``.

A tuple the format cannot write (a field missing, a value JSON or the Parquet schema cannot
take) is reported with its content, at most once a second (connectors/reports.py), and
nothing of it is written: failed in the acker modes, dropped under barrier checkpointing,
where a failed tuple rewinds every spout and this one would fail again on every replay. A
write the file system refuses fails the tuple and the checkpoint (the input replays).
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from ...client import config as cfg
from ...client import extras

extras.require("files", "squall.connectors.files")

from ...client.state import StateError  # noqa: E402
from ...client.stateful import (MODE_BARRIER, StatefulBolt, checkpoint_mode,  # noqa: E402
                                 failures_rewind)
from ...client.tuple import SYSTEM_TICK_STREAM_ID, Tuple  # noqa: E402
from ..reports import Reports  # noqa: E402
from .formats import DelimitedRecordFormat, RecordError, RecordFormat  # noqa: E402
from .policies import (DefaultFileNameFormat, NoRotationPolicy, RotationPolicy,  # noqa: E402
                       SyncPolicy)
from .sink import MANIFEST_DIR, FileSinkState  # noqa: E402
from .storage import Storage  # noqa: E402

log = logging.getLogger("squall.connectors.files")


def guarantee(conf: Mapping[str, Any]) -> str:
    """``exactly-once`` or ``at-least-once``: what a file sink's output is under ``conf``."""
    return "exactly-once" if checkpoint_mode(conf) == MODE_BARRIER else "at-least-once"


class FileSinkBolt(StatefulBolt):
    """Writes each tuple as a record into files under a directory (Storm's HdfsBolt).

    Example, word counts as ``word,count`` lines, a file published per 64 MB::

        sink = (FileSinkBolt("/data/counts")            # or s3://bucket/counts, memory://...
                .with_record_format(DelimitedRecordFormat(["word", "count"]))
                .with_rotation_policy(FileSizeRotationPolicy(64, Units.MB)))
        builder.set_bolt("out", sink, 2).fields_grouping("count", ["word"])
        conf = {"topology.state.checkpoint.mode": "barrier"}   # exactly-once

    Each task writes ``<prefix><component>-<task index>-<seq><extension>`` (see
    :class:`DefaultFileNameFormat`); records appear when the checkpoint after their file's
    rotation commits, every ``topology.state.checkpoint.interval.ms``. One writer per task
    name: two topologies must not share a directory and component id.
    """

    requires_extras = ("files",)

    def __init__(self, path: str | None = None, *, record_format: RecordFormat | None = None,
                 file_name_format: DefaultFileNameFormat | None = None,
                 rotation_policy: RotationPolicy | None = None,
                 sync_policy: SyncPolicy | None = None, exactly_once: bool = True,
                 own_thread: bool | None = None):
        fmt = record_format or DelimitedRecordFormat()
        if file_name_format is None and path is not None:
            file_name_format = DefaultFileNameFormat(path, extension=fmt.extension)
        self.file_name_format = file_name_format
        self.record_format = fmt
        self.rotation_policy = rotation_policy or NoRotationPolicy()
        self.sync_policy = sync_policy
        #: Say so in the topology's errors when the checkpoint mode cannot give exactly-once.
        self.exactly_once = exactly_once
        #: Run on a thread of its own (``topology.executor.threaded``); None: for a remote
        #: filesystem only (a local one's checkpoint costs an fsync of a millisecond or so).
        self.own_thread = own_thread

    # Storm's builder methods (HdfsBolt.withFsUrl ... withSyncPolicy).
    def with_fs_url(self, url: str) -> "FileSinkBolt":
        """The output directory's URL (Storm splits it into ``withFsUrl`` and the name
        format's ``withPath``; here the URL is the directory)."""
        fmt = self.file_name_format
        self.file_name_format = DefaultFileNameFormat(url, extension=self.record_format.extension) \
            if fmt is None else fmt.with_path(url)
        return self

    def with_file_name_format(self, fmt: DefaultFileNameFormat) -> "FileSinkBolt":
        self.file_name_format = fmt
        return self

    def with_record_format(self, fmt: RecordFormat) -> "FileSinkBolt":
        self.record_format = fmt
        return self

    def with_rotation_policy(self, policy: RotationPolicy) -> "FileSinkBolt":
        self.rotation_policy = policy
        return self

    def with_sync_policy(self, policy: SyncPolicy) -> "FileSinkBolt":
        self.sync_policy = policy
        return self

    def get_component_configuration(self) -> dict[str, Any]:
        # A remote filesystem's round trips would hold every other executor of the worker's
        # shared loop: a thread of its own. A local one's are short, and a thread would cost
        # each record a handover of the GIL (a third of the sink's throughput, measured).
        threaded = self.own_thread
        if threaded is None:
            path = self.file_name_format.path if self.file_name_format is not None else ""
            threaded = "://" in path and not path.startswith("file://")
        out: dict[str, Any] = {cfg.TOPOLOGY_EXECUTOR_THREADED: threaded}
        # Time-based policies are checked at tick tuples (and checkpoints), not per record.
        ticks = [p.tick_secs for p in (self.rotation_policy, self.sync_policy)
                 if p is not None and p.tick_secs is not None]
        if ticks:
            out[cfg.TOPOLOGY_TICK_TUPLE_FREQ_SECS] = min(ticks)
        return out

    # --- the task ------------------------------------------------------------------------
    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> None:
        if self.file_name_format is None:
            raise ValueError("FileSinkBolt needs an output directory: FileSinkBolt(path) or "
                             ".with_fs_url(url)")
        self.collector = collector
        self.component = context.this_component_id
        # Under barrier checkpointing a failed tuple rewinds every spout: a record that can
        # never be written is reported and dropped there, failed elsewhere.
        self.reports = Reports(collector, drop_bad=failures_rewind(conf, context))
        self.state: FileSinkState | None = None
        mode = checkpoint_mode(conf)
        if mode != MODE_BARRIER:
            text = (f"file sink {self.component!r}: {cfg.TOPOLOGY_STATE_CHECKPOINT_MODE} is "
                    f"{mode!r}, so its files are at-least-once (never a partial or uncommitted "
                    "record, but a tuple replayed after its checkpoint committed is written "
                    f"again); set {cfg.TOPOLOGY_STATE_CHECKPOINT_MODE}: barrier for "
                    "exactly-once")
            log.warning("%s", text)
            if self.exactly_once and context.this_task_index == 0:
                collector.report_error(text)
        # Said at once and by path, rather than at the first checkpoint as a state error.
        url = self.file_name_format.path
        try:
            storage = Storage(url)
            storage.probe(storage.path(MANIFEST_DIR))
        except StateError as exc:
            self.reports.error("output", f"file sink {self.component!r}: output directory "
                               f"{url!r} is not writable: {exc}")

    def new_state(self, namespace: str, conf: Mapping[str, Any], context: Any) -> FileSinkState:
        assert self.file_name_format is not None
        return FileSinkState(self.file_name_format, self.record_format,
                             component=context.this_component_id,
                             task=context.this_task_index, run=str(context.topology_id),
                             rotation=self.rotation_policy, sync=self.sync_policy)

    def init_state(self, state: Any) -> None:
        self.state = state
        self._write = state.write
        self._ack = self.collector.ack

    def execute(self, tup: Tuple) -> None:
        if tup.source_stream == SYSTEM_TICK_STREAM_ID and tup.is_tick:
            try:
                self.state.tick()  # type: ignore[union-attr]
            except StateError as exc:
                self.reports.error("write", f"file sink {self.component!r}: {exc}")
            self._ack(tup)
            return
        try:
            self._write(tup)
        except RecordError as exc:
            self.reports.bad_tuple(tup, "record", f"file sink {self.component!r}: a tuple "
                                   f"from {tup.source_component} cannot be written: {exc}")
            return
        except StateError as exc:  # the file: the checkpoint rolls back, the input replays
            self.reports.error("write", f"file sink {self.component!r}: {exc}; the tuple "
                               "was failed")
            self.collector.fail(tup)
            return
        self._ack(tup)

    def cleanup(self) -> None:
        if getattr(self, "state", None) is not None:
            self.state.close()

    def declare_output_fields(self, declarer: Any) -> None:
        pass
