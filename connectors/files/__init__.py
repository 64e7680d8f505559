"""Exactly-once file output: Storm's storm-hdfs (``HdfsBolt``, its rotation and sync
policies, record and file name formats, and Trident's ``HdfsState``) on fsspec.

:class:`FileSinkBolt` writes a checkpointed topology's tuples into files that appear, by
an atomic rename, only once the checkpoint holding their records commits (exactly-once
under ``topology.state.checkpoint.mode: barrier``); :class:`FileStateFactory` does the same
per Trident batch. Local and mounted directories are written directly; other URLs
(``s3://``, ``hdfs://``, ``memory://``) through fsspec where its package for them is
installed. Formats: delimited text, JSON lines, Parquet (pyarrow).

Needs the ``files`` extra (``pip install 'squall[files]'``).
"""

from ...client import extras

extras.require("files", "squall.connectors.files")

from .bolt import FileSinkBolt, guarantee  # noqa: E402
from .formats import (DelimitedRecordFormat, JsonRecordFormat, ParquetRecordFormat,  # noqa: E402
                      RecordError, RecordFormat)
from .policies import (AnyRotationPolicy, CountSyncPolicy, DefaultFileNameFormat,  # noqa: E402
                       FileSizeRotationPolicy, NoRotationPolicy, TimedRotationPolicy,
                       TimedSyncPolicy, TimeUnit, Units)
from .sink import FileSinkState  # noqa: E402
from .trident import FileState, FileStateFactory, FileStateUpdater  # noqa: E402

__all__ = ["AnyRotationPolicy", "CountSyncPolicy", "DefaultFileNameFormat",
           "DelimitedRecordFormat", "FileSinkBolt", "FileSinkState", "FileSizeRotationPolicy",
           "FileState", "FileStateFactory", "FileStateUpdater", "JsonRecordFormat",
           "NoRotationPolicy", "ParquetRecordFormat", "RecordError", "RecordFormat", "TimeUnit",
           "TimedRotationPolicy", "TimedSyncPolicy", "Units", "guarantee"]
