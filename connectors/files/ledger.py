"""Which of a sink task's files hold committed records: the pure state machine and its manifest.

A file sink task writes records into in-progress files (hidden names) and publishes a
file by renaming it only when the checkpoint that holds all its records commits. This
module decides, without touching a file, what to do at each step; connectors/files/sink.py
does the IO its instructions say. Its :class:`Manifest` is the small JSON record, written
by temp+rename into ``<dir>/.squall-sink/``, that makes the decisions survive a kill -9.

The checkpoint protocol's calls (client/state.py) map onto it:

- ``open`` / ``rotate``: a new file number (``seq``) is taken, or the open file is closed
  and waits, with its length, for the next prepare;
- ``prepare(N, size)``: the open file is synced and its length ``size`` recorded; the
  closed files become N's to publish; the manifest says so before the call returns;
- ``commit(N)``: N's files are renamed to their published names, then the manifest moves
  the committed point (a rename found done is skipped, so a commit repeated after a crash
  publishes the same bytes once);
- ``rollback()``: back to the committed point: the open file truncated to its committed
  length, every other in-progress file of the task deleted, file numbers taken again;
- ``restore(N)`` (barrier mode, N completed everywhere): commit the prepared transaction
  if it is N or older, then roll back to that point;
- a new worker loads the manifest and ``recover()`` drops what the dead one wrote past it.

File numbers are taken again after a rollback, so a replay writes the very names the
abandoned run wrote: nothing is left behind to be published twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...client.errors import SquallError

MANIFEST_VERSION = 1


class LedgerError(SquallError):
    """A checkpoint call out of order (a commit of a transaction that is not the prepared
    one, a prepare while one is prepared)."""


@dataclass(frozen=True)
class Part:
    """A file of the task (its number) and how many of its bytes count."""

    seq: int
    length: int


@dataclass(frozen=True)
class Point:
    """Where a task's output stands at a checkpoint: the next file number, and the file
    left open with its length (None: no file open)."""

    next_seq: int
    open: Part | None = None


@dataclass(frozen=True)
class Prepared:
    """A prepared transaction: its closed files (to publish at its commit) and its point."""

    txid: int
    publish: tuple[Part, ...]
    point: Point


@dataclass(frozen=True)
class Manifest:
    """What survives the worker, per task (one JSON file, replaced atomically)."""

    run: str
    committed: int | None
    point: Point
    prepared: Prepared | None = None
    version: int = MANIFEST_VERSION

    def to_json(self) -> str:
        def part(p: Part | None) -> Any:
            return None if p is None else [p.seq, p.length]

        prep = self.prepared
        return json.dumps({
            "version": self.version, "run": self.run, "committed": self.committed,
            "next_seq": self.point.next_seq, "open": part(self.point.open),
            "prepared": None if prep is None else {
                "txid": prep.txid, "publish": [part(p) for p in prep.publish],
                "next_seq": prep.point.next_seq, "open": part(prep.point.open)}},
            sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Manifest":
        d = json.loads(text)
        if d.get("version") != MANIFEST_VERSION:
            raise LedgerError(f"a file sink manifest of version {d.get('version')!r}; this "
                              f"Squall reads version {MANIFEST_VERSION}")

        def part(v: Any) -> Part | None:
            return None if v is None else Part(int(v[0]), int(v[1]))

        p = d.get("prepared")
        return cls(run=str(d["run"]), committed=d["committed"],
                   point=Point(int(d["next_seq"]), part(d["open"])),
                   prepared=None if p is None else Prepared(
                       int(p["txid"]), tuple(part(x) for x in p["publish"]),  # type: ignore
                       Point(int(p["next_seq"]), part(p["open"]))))


# --- instructions ------------------------------------------------------------------------

@dataclass(frozen=True)
class OpenFile:
    """Create the in-progress file ``seq`` (empty) and open it for records."""

    seq: int


@dataclass(frozen=True)
class CloseFile:
    """Finish the open file ``seq`` (a Parquet footer), flush and fsync it, close it."""

    seq: int


@dataclass(frozen=True)
class SyncFile:
    """Flush and fsync the open file ``seq``."""

    seq: int


@dataclass(frozen=True)
class WriteManifest:
    """Write the manifest durably (temp file, fsync, rename)."""

    manifest: Manifest


@dataclass(frozen=True)
class Publish:
    """Rename the in-progress file to its published name, cut to ``length`` first if a dead
    worker wrote past it; done already (only the published name exists): nothing."""

    part: Part


@dataclass(frozen=True)
class Discard:
    """Drop the open writer; cut each kept file to its length; delete every other
    in-progress file of the task."""

    keep: tuple[Part, ...]


@dataclass(frozen=True)
class ReopenFile:
    """Open the kept in-progress file ``part.seq`` for more records after its ``length``."""

    part: Part


@dataclass
class Ledger:
    """One task's files, driven by the writes and the checkpoint calls.

    ``whole_file``: the format's file is complete only when closed (Parquet), so a prepare
    closes the open file instead of recording its length.

    Example::

        led = Ledger("topo-1", whole_file=False)
        led.open()                 # [OpenFile(0)]
        led.prepare(1, size=120)   # [SyncFile(0), WriteManifest(...)]
        led.commit(1)              # [WriteManifest(...)]: file 0 stays open, 120 bytes count
    """

    run: str
    whole_file: bool = False
    committed: int | None = None
    committed_point: Point = field(default_factory=lambda: Point(0))
    prepared: Prepared | None = None
    next_seq: int = 0
    current: int | None = None
    #: Files closed since the last prepare, with their lengths.
    closed: list[Part] = field(default_factory=list)
    #: Recent events, for errors.
    history: list[Any] = field(default_factory=list)

    # --- loading ---------------------------------------------------------------------
    @classmethod
    def load(cls, run: str, manifest: Manifest | None, whole_file: bool = False
             ) -> tuple["Ledger", list[Any]]:
        """A ledger for a new task from what the last one left, and the instructions that
        drop what it wrote past its manifest (a dead worker's unprepared bytes).

        A manifest of another run (the topology was killed and submitted again) keeps its
        file numbers and publishes its committed open file; its prepared transaction, which
        that run may or may not have completed, is dropped."""
        led = cls(run, whole_file)
        if manifest is None:
            return led, [Discard(())]
        out: list[Any] = []
        led.committed_point = manifest.point
        if manifest.run != run:
            pt = manifest.point
            keep = (pt.open,) if pt.open is not None else ()
            out += [Discard(keep)] + [Publish(p) for p in keep]
            led.committed_point = Point(max(pt.next_seq, (manifest.prepared.point.next_seq
                                                          if manifest.prepared else 0)))
            led.next_seq = led.committed_point.next_seq
            out.append(WriteManifest(led.manifest()))
            return led, out
        led.committed = manifest.committed
        led.prepared = manifest.prepared
        at = manifest.prepared.point if manifest.prepared else manifest.point
        keep = tuple(manifest.prepared.publish) if manifest.prepared else ()
        if at.open is not None:
            keep += (at.open,)
        led.next_seq = at.next_seq
        out.append(Discard(keep))
        if at.open is not None:
            led.current = at.open.seq
            out.append(ReopenFile(at.open))
        return led, out

    def manifest(self) -> Manifest:
        return Manifest(self.run, self.committed, self.committed_point, self.prepared)

    def _event(self, *event: Any) -> None:
        self.history.append(event)
        del self.history[:-20]

    # --- writes ----------------------------------------------------------------------
    def open(self) -> list[Any]:
        """A record is coming and no file is open: take the next number."""
        self._event("open")
        if self.current is not None:
            raise LedgerError(f"file {self.current} is open already; history {self.history}")
        self.current = self.next_seq
        self.next_seq += 1
        return [OpenFile(self.current)]

    def rotate(self, size: int) -> list[Any]:
        """Close the open file, ``size`` bytes long; it waits for the next prepare."""
        self._event("rotate", size)
        if self.current is None:
            return []
        seq, self.current = self.current, None
        self.closed.append(Part(seq, size))
        return [CloseFile(seq)]

    # --- the checkpoint --------------------------------------------------------------
    def prepare(self, txid: int, size: int) -> list[Any]:
        """Freeze the output as transaction ``txid``; ``size``: the open file's length."""
        self._event("prepare", txid, size)
        if self.prepared is not None:
            raise LedgerError(f"cannot prepare transaction {txid}: transaction "
                              f"{self.prepared.txid} is prepared and not committed "
                              f"(history {self.history})")
        out: list[Any] = []
        if self.whole_file and self.current is not None:
            out += self.rotate(size)
        open_part = None
        if self.current is not None:
            open_part = Part(self.current, size)
            out.append(SyncFile(self.current))
        self.prepared = Prepared(txid, tuple(self.closed), Point(self.next_seq, open_part))
        self.closed = []
        out.append(WriteManifest(self.manifest()))
        return out

    def commit(self, txid: int) -> list[Any]:
        """Publish transaction ``txid``'s closed files and make its point the committed one.
        Nothing prepared (a new task, or a COMMIT sent again): nothing to do."""
        self._event("commit", txid)
        prep = self.prepared
        if prep is None:
            return []
        if prep.txid != txid:
            raise LedgerError(f"cannot commit transaction {txid}: the prepared one is "
                              f"{prep.txid} (history {self.history})")
        self.prepared = None
        self.committed = txid
        self.committed_point = prep.point
        return [Publish(p) for p in prep.publish] + [WriteManifest(self.manifest())]

    def rollback(self) -> list[Any]:
        """Back to the committed point: what was written since is dropped (and replayed)."""
        self._event("rollback")
        had_prepared = self.prepared is not None
        pt = self.committed_point
        self.prepared = None
        self.closed = []
        self.next_seq = pt.next_seq
        self.current = None if pt.open is None else pt.open.seq
        out: list[Any] = [Discard(() if pt.open is None else (pt.open,))]
        if pt.open is not None:
            out.append(ReopenFile(pt.open))
        if had_prepared:
            out.append(WriteManifest(self.manifest()))
        return out

    def restore(self, txid: int) -> list[Any]:
        """Checkpoint ``txid`` completed everywhere: commit the prepared transaction if it is
        that one or older (its commit never came), then drop the rest."""
        self._event("restore", txid)
        out: list[Any] = []
        if self.prepared is not None and self.prepared.txid <= txid:
            out += self.commit(self.prepared.txid)
        return out + self.rollback()

    def prepared_txid(self) -> int | None:
        return None if self.prepared is None else self.prepared.txid

    def validate_state(self) -> None:
        """Invariants (tests call it after every event)."""
        seqs = [p.seq for p in self.closed]
        if self.prepared is not None:
            seqs += [p.seq for p in self.prepared.publish]
            assert self.prepared.point.next_seq <= self.next_seq, (self.prepared, self.next_seq)
        if self.current is not None:
            seqs.append(self.current)
        assert len(seqs) == len(set(seqs)), f"a file in two places: {seqs}"
        assert all(s < self.next_seq for s in seqs), (seqs, self.next_seq)
        assert self.committed_point.next_seq <= self.next_seq or self.current is None
        if self.whole_file and self.prepared is not None:
            assert self.prepared.point.open is None, self.prepared


