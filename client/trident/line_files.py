"""A durable, partitioned Trident input: text files of lines, one partition per file.

A batch of a file is a byte range of whole lines; its metadata is
``{"offset": start, "next": end}``. The transactional spout
(:class:`TransactionalLineFiles`) replays a txid's exact byte range; the opaque one
(:class:`OpaqueLineFiles`) reads up to ``batch_lines`` lines from where the previous
batch ended, so a replay may take more lines if the file grew meanwhile. Files may
be appended to while the topology runs (a line counts once its newline is
written); they must not be rewritten.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .spout import OpaquePartitionedSpout, PartitionedSpout, TridentCollector


@dataclass(frozen=True)
class FilePartition:
    path: str

    @property
    def id(self) -> str:
        """Stable across restarts and usable as a ZooKeeper node name."""
        digest = hashlib.sha1(self.path.encode()).hexdigest()[:10]
        return f"{os.path.basename(self.path).replace('/', '_')}-{digest}"


def read_lines(path: str, offset: int, max_lines: int | None = None,
               end: int | None = None) -> tuple[list[str], int]:
    """Whole lines from byte ``offset`` (at most ``max_lines``, or up to byte ``end``), and the
    offset after the last one; a last line without its newline is left for a later batch."""
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read(None if end is None else max(0, end - offset))
    lines: list[str] = []
    pos = 0
    while max_lines is None or len(lines) < max_lines:
        nl = data.find(b"\n", pos)
        if nl < 0:
            break
        lines.append(data[pos:nl].decode("utf-8", errors="replace"))
        pos = nl + 1
    return lines, offset + pos


class _LineFiles:
    def __init__(self, paths: Sequence[str], batch_lines: int = 1000,
                 fields: Sequence[str] = ("line",)):
        if batch_lines < 1:
            raise ValueError(f"batch_lines must be >= 1, got {batch_lines}")
        self.paths = [os.path.abspath(p) for p in paths]
        self.batch_lines = batch_lines
        self.fields = list(fields)

    def partitions(self, conf: Mapping[str, Any]) -> list[str]:
        return list(self.paths)

    def ordered_partitions(self, description: Any) -> list[FilePartition]:
        return [FilePartition(p) for p in description]

    def output_fields(self) -> list[str]:
        return list(self.fields)

    def _emit_from(self, collector: TridentCollector, partition: FilePartition, last_meta: Any
                   ) -> dict[str, int]:
        start = int(last_meta["next"]) if last_meta else 0
        lines, nxt = read_lines(partition.path, start, self.batch_lines)
        for line in lines:
            collector.emit([line])
        return {"offset": start, "next": nxt}


class TransactionalLineFiles(_LineFiles, PartitionedSpout):
    """A txid always replays the same lines (its byte range is kept per txid)."""

    def emit_new(self, attempt: Any, collector: TridentCollector, partition: FilePartition,
                 last_meta: Any) -> dict[str, int]:
        return self._emit_from(collector, partition, last_meta)

    def emit_again(self, attempt: Any, collector: TridentCollector, partition: FilePartition,
                   meta: Any) -> None:
        lines, _ = read_lines(partition.path, int(meta["offset"]), end=int(meta["next"]))
        for line in lines:
            collector.emit([line])


class OpaqueLineFiles(_LineFiles, OpaquePartitionedSpout):
    """Each batch reads on from the previous one's end; a replay may read more lines."""

    def emit(self, attempt: Any, collector: TridentCollector, partition: FilePartition,
             last_meta: Any) -> dict[str, int]:
        return self._emit_from(collector, partition, last_meta)
