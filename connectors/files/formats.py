"""How a file sink turns tuples into bytes: delimited text, JSON lines and Parquet.

storm-hdfs's ``RecordFormat`` and ``DelimitedRecordFormat`` (field delimiter, record
delimiter, chosen fields), plus :class:`JsonRecordFormat` (one JSON object a line) and
:class:`ParquetRecordFormat` (pyarrow). A record is encoded whole before a byte of it is
written, so a tuple that does not fit the format (a field missing, a value JSON cannot
hold) raises :class:`RecordError` with its content and leaves the file as it was.

A text record is complete once its bytes are on disk, so a text file can stay open across
checkpoints (the manifest records its committed length). A Parquet file is readable only
once its footer is written on close, so :class:`ParquetRecordFormat` is ``whole_file``:
the sink closes it at every checkpoint (one file per checkpoint and task at most, more if
it rotates by size in between) and never reopens it.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO, Sequence

from ...client.errors import SquallError


class RecordError(SquallError):
    """A tuple cannot be written in the format; the message shows the tuple."""


def _names(tup: Any) -> list[str]:
    fields = getattr(tup, "fields", None)
    names = getattr(fields, "names", fields)
    return list(names) if names is not None else []


def _show(tup: Any) -> str:
    names = _names(tup)
    values = list(getattr(tup, "values", tup))
    shown = dict(zip(names, values)) if len(names) == len(values) else values
    text = repr(shown)
    return text if len(text) <= 300 else text[:297] + "..."


def select(tup: Any, fields: Sequence[str] | None) -> list[Any]:
    """The values of ``fields`` (all of the tuple's when None), or a RecordError naming the
    missing field and showing the tuple."""
    if fields is None:
        return list(tup.values)
    out = []
    for f in fields:
        try:
            out.append(tup[f])
        except (KeyError, IndexError):
            raise RecordError(f"the tuple has no field {f!r} (it has {_names(tup)}): "
                              f"{_show(tup)}") from None
    return out


def _text(v: Any) -> str:
    return "" if v is None else str(v)


class _Positions:
    """The chosen fields' positions in a stream's tuples, looked up once per stream (a
    bolt's tuples of one stream share one Fields object)."""

    def __init__(self, fields: list[str] | None):
        self.fields = fields
        self.seen: Any = None
        self.at: list[int] = []
        self.whole = False

    def values(self, tup: Any) -> list[Any]:
        fields = self.fields
        if fields is None:
            return tup.values
        f = tup.fields
        if f is not self.seen:
            index = getattr(f, "index", None)
            if not isinstance(index, dict) or any(n not in index for n in fields):
                return select(tup, fields)  # a TridentTuple, or a field missing: the error
            self.at = [index[n] for n in fields]
            #: The chosen fields are the tuple's, in order: its values list serves as is.
            self.whole = self.at == list(range(len(index)))
            self.seen = f
        if self.whole:
            return tup.values
        vals = tup.values
        return [vals[i] for i in self.at]

    def __getstate__(self) -> dict:
        return {"fields": self.fields}  # the cache stays in the worker

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["fields"])  # type: ignore[misc]


class RecordFormat:
    """Tuples to bytes (Storm's RecordFormat). Subclass and override :meth:`format`."""

    #: The files' default extension.
    extension = ".txt"
    #: True: a file is complete only when closed (it is closed at every checkpoint).
    whole_file = False

    def format(self, tup: Any) -> bytes:
        raise NotImplementedError

    def row(self, tup: Any) -> Any:
        """What a writer keeps of ``tup`` until it writes a batch of records: checked now
        (a RecordError for a tuple that cannot be written), encoded by :meth:`encode`. The
        default: the record's bytes."""
        return self.format(tup)

    def encode(self, rows: list[Any]) -> bytes:
        """The bytes of several records (rows from :meth:`row`), in order."""
        return b"".join(rows)

    def check(self, tup: Any) -> None:
        """Raise RecordError when ``tup`` cannot be written (before a file is opened for it)."""
        self.row(tup)

    def open(self, fh: BinaryIO, path: str, size: int = 0, batch: int = 256) -> "RecordWriter":
        """A writer of this format's records onto ``fh`` (at byte ``size`` of the file at
        ``path``), writing ``batch`` records at a time."""
        return TextWriter(self, fh, size, batch)


class DelimitedRecordFormat(RecordFormat):
    """Fields joined by ``field_delimiter``, records ended by ``record_delimiter``
    (Storm's DelimitedRecordFormat; its defaults are ``,`` and a newline).

    Example: ``DelimitedRecordFormat().with_fields(["word", "count"]).with_field_delimiter("\\t")``.
    """

    def __init__(self, fields: Sequence[str] | None = None, field_delimiter: str = ",",
                 record_delimiter: str = "\n"):
        self.fields = list(fields) if fields is not None else None
        self.field_delimiter = field_delimiter
        self.record_delimiter = record_delimiter
        self._positions = _Positions(self.fields)

    def with_fields(self, fields: Sequence[str]) -> "DelimitedRecordFormat":
        return DelimitedRecordFormat(fields, self.field_delimiter, self.record_delimiter)

    def with_field_delimiter(self, delimiter: str) -> "DelimitedRecordFormat":
        return DelimitedRecordFormat(self.fields, delimiter, self.record_delimiter)

    def with_record_delimiter(self, delimiter: str) -> "DelimitedRecordFormat":
        return DelimitedRecordFormat(self.fields, self.field_delimiter, delimiter)

    def format(self, tup: Any) -> bytes:
        return self.encode([self.row(tup)])

    def row(self, tup: Any) -> Any:
        return self._positions.values(tup)  # a RecordError when a field is missing

    def encode(self, rows: list[Any]) -> bytes:
        # A batch of records in one join: the per-record cost is a str() per value.
        rd, fd = self.record_delimiter, self.field_delimiter
        if self.fields is not None and len(self.fields) == 1:
            text = rd.join([r[0] if type(r[0]) is str else _text(r[0]) for r in rows])
        else:
            text = rd.join([fd.join([v if type(v) is str else _text(v) for v in r])
                            for r in rows])
        return (text + rd).encode()


class JsonRecordFormat(RecordFormat):
    """One JSON object per line: ``{"field": value, ...}`` of ``fields`` (all when None)."""

    extension = ".jsonl"

    def __init__(self, fields: Sequence[str] | None = None):
        self.fields = list(fields) if fields is not None else None
        self._positions = _Positions(self.fields)

    def format(self, tup: Any) -> bytes:
        names = self.fields if self.fields is not None else _names(tup)
        values = self._positions.values(tup)
        if len(names) != len(values):
            raise RecordError(f"the tuple's values do not match its fields: {_show(tup)}")
        try:
            return (json.dumps(dict(zip(names, values)), separators=(",", ":"),
                               ensure_ascii=False, allow_nan=False) + "\n").encode()
        except (TypeError, ValueError) as exc:
            raise RecordError(f"the tuple cannot be written as JSON ({exc}): {_show(tup)}"
                              ) from None


class RecordWriter:
    """Writes records onto one open file. ``size`` is its length in bytes (estimated for a
    whole-file format until it is closed)."""

    size = 0

    def write(self, tup: Any) -> None:
        raise NotImplementedError

    def flush(self) -> None:
        """Push what is buffered to the file (before an fsync)."""

    def close(self) -> None:
        """Finish the file (a whole-file format writes its footer here)."""


class TextWriter(RecordWriter):
    """A text format's writer: records kept as rows and written :data:`BATCH` at a time
    (and at every flush), each batch encoded in one go. ``size`` counts what was written."""

    #: Records encoded and written together.
    BATCH = 256

    def __init__(self, fmt: RecordFormat, fh: BinaryIO, size: int = 0, batch: int = BATCH):
        self.fmt = fmt
        self.fh = fh
        self.size = size
        self.rows: list[Any] = []
        self._row = fmt.row
        #: Records written together (1: ``size`` exact after every record).
        self.batch = max(1, batch)

    def write(self, tup: Any) -> None:
        rows = self.rows
        rows.append(self._row(tup))  # checked whole before anything is written
        if len(rows) >= self.batch:
            self.drain()

    def drain(self) -> None:
        rows = self.rows
        if rows:
            data = self.fmt.encode(rows)
            del rows[:]  # the same list: the sink appends to it directly
            self.fh.write(data)
            self.size += len(data)

    def flush(self) -> None:
        self.drain()
        self.fh.flush()

    def close(self) -> None:
        self.drain()


class ParquetRecordFormat(RecordFormat):
    """Parquet files (pyarrow): rows buffered, ``row_group_size`` rows a row group.

    ``fields`` are the columns; ``schema`` (a ``pyarrow.Schema``) fixes their types,
    otherwise pyarrow infers them from each file's first row group. A file is closed at
    every checkpoint (its footer makes it readable), so expect one file per checkpoint and
    task: set the checkpoint interval to the file size you want.
    """

    extension = ".parquet"
    whole_file = True

    def __init__(self, fields: Sequence[str], schema: Any = None, row_group_size: int = 65536,
                 compression: str = "snappy"):
        if not fields:
            raise ValueError("ParquetRecordFormat needs the fields to write as columns")
        self.fields = list(fields)
        self.schema = schema
        self.row_group_size = max(1, int(row_group_size))
        self.compression = compression

    def row(self, tup: Any) -> Any:
        values = select(tup, self.fields)
        if self.schema is not None:
            _check_row(self.schema, values, tup)
        return values

    def open(self, fh: BinaryIO, path: str, size: int = 0, batch: int = 256) -> "RecordWriter":
        return ParquetWriter(self, fh, path)


def _check_row(schema: Any, values: list[Any], tup: Any) -> None:
    import pyarrow as pa

    for f, v in zip(schema, values):
        try:
            pa.array([v], type=f.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError,
                OverflowError) as exc:
            raise RecordError(f"field {f.name!r} is {v!r}, not {f.type} (the file's "
                              f"schema): {exc}; the tuple: {_show(tup)}") from None


class ParquetWriter(RecordWriter):
    """Rows of one Parquet file; a row group written each ``row_group_size`` rows."""

    def __init__(self, fmt: ParquetRecordFormat, fh: BinaryIO, path: str):
        self.fmt = fmt
        self.fh = fh
        self.path = path
        self.columns: list[list[Any]] = [[] for _ in fmt.fields]
        #: The file's columns' types: the format's, or inferred from the first row.
        self.schema: Any = fmt.schema
        self.rows = 0
        self.writer: Any = None
        self.written = 0  # bytes of row groups written
        self.pending_bytes = 0  # a rough size of the buffered rows

    @property
    def size(self) -> int:  # type: ignore[override]
        return self.written + self.pending_bytes

    def write(self, tup: Any) -> None:
        values = select(tup, self.fmt.fields)
        if self.schema is None:
            self.schema = self._infer(values)
        self._check(values, tup)
        for col, v in zip(self.columns, values):
            col.append(v)
        self.rows += 1
        self.pending_bytes += sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in values)
        if self.rows >= self.fmt.row_group_size:
            self._row_group()

    def _infer(self, values: list[Any]) -> Any:
        """The file's schema from its first row when the format has none (a null: string)."""
        import pyarrow as pa

        fields = []
        for name, v in zip(self.fmt.fields, values):
            try:
                t = pa.array([v]).type
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError):
                t = pa.string()
            fields.append(pa.field(name, pa.string() if pa.types.is_null(t) else t))
        return pa.schema(fields)

    def _check(self, values: list[Any], tup: Any) -> None:
        _check_row(self.schema, values, tup)

    def _row_group(self) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        if not self.rows:
            return
        try:
            table = pa.table(dict(zip(self.fmt.fields, self.columns)), schema=self.schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise RecordError(f"rows do not fit one Parquet schema ({exc}): give "
                              "ParquetRecordFormat a schema") from None
        if self.writer is None:
            self.writer = pq.ParquetWriter(self.fh, table.schema,
                                           compression=self.fmt.compression)
        self.writer.write_table(table)
        self.columns = [[] for _ in self.fmt.fields]
        self.rows = 0
        self.pending_bytes = 0
        self.written = self.fh.tell()

    def close(self) -> None:
        self._row_group()
        if self.writer is not None:
            self.writer.close()
            self.writer = None
