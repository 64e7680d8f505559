"""When a file sink rotates and syncs its files, and what it names them.

storm-hdfs's ``FileRotationPolicy`` (:class:`FileSizeRotationPolicy`,
:class:`TimedRotationPolicy`, :class:`NoRotationPolicy`; :class:`AnyRotationPolicy` is
ours), ``SyncPolicy``
(:class:`CountSyncPolicy`; :class:`TimedSyncPolicy` is ours) and ``FileNameFormat``
(:class:`DefaultFileNameFormat`). Pure: they take byte counts and clock readings and
answer yes or no, so they are tested without files.

Unlike Storm's, a rotated file is not published at once: it is closed and waits for the
checkpoint that commits its records (connectors/files/ledger.py). And a name carries no
timestamp: ``<prefix><component>-<task index>-<sequence><extension>``, so a replay after a
restart writes the very names it wrote before instead of new ones.
"""

from __future__ import annotations

import enum
import re


class Units(enum.Enum):
    """Storm's ``FileSizeRotationPolicy.Units``."""

    KB = 1024
    MB = 1024 ** 2
    GB = 1024 ** 3
    TB = 1024 ** 4


class TimeUnit(enum.Enum):
    """Storm's ``TimedRotationPolicy.TimeUnit``, in seconds."""

    SECONDS = 1
    MINUTES = 60
    HOURS = 3600
    DAYS = 86400


class RotationPolicy:
    """Whether the open file should be closed (Storm's ``FileRotationPolicy``).

    ``mark`` runs after every record, so it looks at sizes only; time-based policies answer
    ``due``, asked at each checkpoint and each tick tuple (the bolt asks for ticks when a
    policy has ``tick_secs``)."""

    #: Seconds between the tick tuples this policy needs (None: none).
    tick_secs: float | None = None

    def mark(self, size: int) -> bool:
        """After a record: True when the file, ``size`` bytes long now, should rotate."""
        return size >= self.size_limit()

    def size_limit(self) -> float:
        """The size at which ``mark`` says rotate (inf: never): the sink compares each
        record's file size with it rather than calling ``mark`` per record."""
        return float("inf")

    def due(self, now: float) -> bool:
        """At a checkpoint or a tick: True when the open file should rotate."""
        return False

    def reset(self, now: float) -> None:
        """A new file was opened at ``now``."""


class NoRotationPolicy(RotationPolicy):
    """One file per task, never rotated: it is published only when the task stops
    (never, for a running topology). Storm's NoRotationPolicy; useful for Parquet, which
    closes its file at every checkpoint anyway."""


class FileSizeRotationPolicy(RotationPolicy):
    """Rotate once the file holds ``count`` ``units`` (Storm's FileSizeRotationPolicy).

    Example: ``FileSizeRotationPolicy(5, Units.MB)``.
    """

    def __init__(self, count: float, units: Units = Units.MB):
        if count <= 0:
            raise ValueError(f"FileSizeRotationPolicy needs a size above 0, not {count}")
        #: Bytes after which the file rotates.
        self.max_bytes = int(count * (units.value if isinstance(units, Units) else units))

    def size_limit(self) -> float:
        return self.max_bytes


class TimedRotationPolicy(RotationPolicy):
    """Rotate a file ``count`` ``units`` after it was opened (Storm's TimedRotationPolicy).

    Checked at each checkpoint and each tick tuple (every tenth of the interval, at most
    a second apart), so an idle file rotates too.
    """

    def __init__(self, count: float, units: TimeUnit = TimeUnit.SECONDS):
        if count <= 0:
            raise ValueError(f"TimedRotationPolicy needs an interval above 0, not {count}")
        #: Seconds a file stays open.
        self.interval = float(count * (units.value if isinstance(units, TimeUnit) else units))
        self.tick_secs = max(0.1, min(1.0, self.interval / 10))
        self.opened: float | None = None

    def reset(self, now: float) -> None:
        self.opened = now

    def due(self, now: float) -> bool:
        return self.opened is not None and now - self.opened >= self.interval


class AnyRotationPolicy(RotationPolicy):
    """Rotate when any of ``policies`` says so (not in Storm): by size, and by time so the
    last file of a quiet stream is published too.

    Example: ``AnyRotationPolicy(FileSizeRotationPolicy(64, Units.MB), TimedRotationPolicy(5,
    TimeUnit.MINUTES))``.
    """

    def __init__(self, *policies: RotationPolicy):
        if not policies:
            raise ValueError("AnyRotationPolicy needs at least one policy")
        self.policies = policies
        ticks = [p.tick_secs for p in policies if p.tick_secs is not None]
        self.tick_secs = min(ticks) if ticks else None

    def size_limit(self) -> float:
        return min(p.size_limit() for p in self.policies)

    def due(self, now: float) -> bool:
        return any([p.due(now) for p in self.policies])

    def reset(self, now: float) -> None:
        for p in self.policies:
            p.reset(now)


class SyncPolicy:
    """How often the open file is flushed and fsynced between checkpoints (Storm's
    ``SyncPolicy``). A checkpoint always syncs whatever it prepares."""

    #: Seconds between the tick tuples this policy needs (None: none).
    tick_secs: float | None = None

    def mark(self, records: int) -> bool:
        """After a record: True to sync now (``records`` written since the last sync)."""
        return records >= self.count_limit()

    def count_limit(self) -> float:
        """The records since the last sync at which ``mark`` says sync (inf: never)."""
        return float("inf")

    def due(self, now: float) -> bool:
        """At a tick: True to sync now."""
        return False

    def reset(self, now: float) -> None:
        """The file was synced at ``now``."""


class CountSyncPolicy(SyncPolicy):
    """Sync every ``count`` records (Storm's CountSyncPolicy)."""

    def __init__(self, count: int):
        if count < 1:
            raise ValueError(f"CountSyncPolicy needs a count of at least 1, not {count}")
        self.count = int(count)

    def count_limit(self) -> float:
        return self.count


class TimedSyncPolicy(SyncPolicy):
    """Sync every ``secs`` seconds (checked at tick tuples, which the bolt asks for)."""

    def __init__(self, secs: float):
        if secs <= 0:
            raise ValueError(f"TimedSyncPolicy needs an interval above 0, not {secs}")
        self.secs = float(secs)
        self.tick_secs = max(0.1, min(1.0, self.secs / 2))
        self.last: float | None = None

    def reset(self, now: float) -> None:
        self.last = now

    def due(self, now: float) -> bool:
        return self.last is not None and now - self.last >= self.secs


class CheckpointSyncPolicy(SyncPolicy):
    """Sync only at checkpoints (the default: a checkpoint's sync is what makes the records
    durable; one in between only shortens what a crashed host's page cache can lose of
    records that are replayed anyway)."""


_SAFE = re.compile(r"[^A-Za-z0-9._-]")


class DefaultFileNameFormat:
    """Where files go and what they are called (Storm's DefaultFileNameFormat).

    ``path`` is the output directory (an fsspec URL or a local path; Storm's
    ``withPath`` and the bolt's ``withFsUrl`` in one), ``prefix`` and ``extension`` frame
    the name. A published file is ``<path>/<prefix><component>-<task>-<seq><extension>``,
    ``seq`` counting the task's files from 0; an in-progress one has the same name with a
    dot before and ``.inprogress`` after, so readers that skip hidden files skip it.
    """

    def __init__(self, path: str, prefix: str = "", extension: str = ".txt"):
        if not path:
            raise ValueError("DefaultFileNameFormat needs an output path")
        self.path = path.rstrip("/") or "/"
        self.prefix = prefix
        self.extension = extension

    def with_path(self, path: str) -> "DefaultFileNameFormat":
        return DefaultFileNameFormat(path, self.prefix, self.extension)

    def with_prefix(self, prefix: str) -> "DefaultFileNameFormat":
        return DefaultFileNameFormat(self.path, prefix, self.extension)

    def with_extension(self, extension: str) -> "DefaultFileNameFormat":
        return DefaultFileNameFormat(self.path, self.prefix, extension)

    def stem(self, component: str, task: int) -> str:
        """What every file of one task starts with."""
        return f"{self.prefix}{_SAFE.sub('_', component)}-{task}-"

    def name(self, component: str, task: int, seq: int) -> str:
        """The published name of the task's file number ``seq`` (no directory)."""
        return f"{self.stem(component, task)}{seq:06d}{self.extension}"

    def in_progress(self, component: str, task: int, seq: int) -> str:
        """Its name while it is written."""
        return f".{self.name(component, task, seq)}.inprogress"

    def seq_of_in_progress(self, component: str, task: int, name: str) -> int | None:
        """The sequence of one of the task's in-progress names, or None for another file."""
        head = "." + self.stem(component, task)
        tail = self.extension + ".inprogress"
        if not (name.startswith(head) and name.endswith(tail)):
            return None
        middle = name[len(head):len(name) - len(tail)]
        return int(middle) if middle.isdigit() else None
