"""The file operations a sink needs, on a local (or mounted) directory or through fsspec.

A local path (or ``file://``) is worked with ``os`` directly: appends, ``fsync``,
``os.truncate`` and ``os.replace``, an atomic rename, followed by an ``fsync`` of the
directory so the rename itself survives a crash. Any other URL (``memory://``, ``s3://``,
``hdfs://``, ...) goes through its fsspec filesystem: files there are written whole and
closed at every checkpoint (an object store keeps nothing of a file that was not closed),
renamed with the filesystem's ``mv`` (a copy and a delete on object stores: idempotent, but
not atomic for readers that list during it). Every error names the path.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO

from ...client.state import StateError


def _err(doing: str, path: str, exc: BaseException) -> StateError:
    return StateError(f"cannot {doing} {path!r}: {type(exc).__name__}: {exc}")


class Storage:
    """One output directory. ``local``: plain ``os`` calls; otherwise fsspec's."""

    def __init__(self, url: str):
        import fsspec
        from fsspec.implementations.local import LocalFileSystem

        self.url = url
        try:
            fs, root = fsspec.core.url_to_fs(url)
        except (ImportError, ValueError) as exc:
            raise StateError(f"cannot open output directory {url!r}: {exc} (install the "
                             "fsspec package for its protocol, e.g. s3fs for s3://)") from None
        self.fs = fs
        self.local = isinstance(fs, LocalFileSystem)
        self.root = os.path.abspath(root) if self.local else root.rstrip("/")

    def path(self, *names: str) -> str:
        return "/".join((self.root,) + names) if not self.local else os.path.join(self.root,
                                                                                   *names)

    def makedirs(self, path: str) -> None:
        try:
            if self.local:
                os.makedirs(path, exist_ok=True)
            else:
                self.fs.makedirs(path, exist_ok=True)
        except OSError as exc:
            raise _err("create output directory", path, exc) from None

    def probe(self, directory: str) -> None:
        """Raise a StateError naming ``directory`` unless a file can be written in it."""
        self.makedirs(directory)
        probe = os.path.join(directory, ".probe") if self.local else directory + "/.probe"
        try:
            if self.local:
                with open(probe, "wb") as fh:
                    fh.write(b"ok")
                os.remove(probe)
            else:
                self.fs.pipe_file(probe, b"ok")
                self.fs.rm_file(probe)
        except OSError as exc:
            raise _err("write in output directory", directory, exc) from None

    def create(self, path: str) -> BinaryIO:
        """A new empty file open for writing (one left there is emptied)."""
        try:
            return open(path, "wb") if self.local else self.fs.open(path, "wb")
        except OSError as exc:
            raise _err("create file", path, exc) from None

    def reopen(self, path: str, length: int) -> BinaryIO:
        """An existing local file open for writing after its first ``length`` bytes."""
        try:
            fh = open(path, "r+b")
            fh.seek(length)
            return fh
        except OSError as exc:
            raise _err("reopen file", path, exc) from None

    def sync(self, fh: Any, path: str) -> None:
        """Flush and (locally) fsync an open file."""
        try:
            fh.flush()
            if self.local:
                os.fsync(fh.fileno())
        except OSError as exc:
            raise _err("sync file", path, exc) from None

    def size(self, path: str) -> int | None:
        """The file's length, or None when it does not exist."""
        try:
            if self.local:
                return os.stat(path).st_size
            return int(self.fs.size(path)) if self.fs.exists(path) else None
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _err("read the size of", path, exc) from None

    def truncate(self, path: str, length: int) -> None:
        try:
            if self.local:
                os.truncate(path, length)
            else:
                data = self.fs.cat_file(path)[:length]
                self.fs.pipe_file(path, data)
        except OSError as exc:
            raise _err("truncate file", path, exc) from None

    def rename(self, src: str, dst: str) -> None:
        """Atomic on a local file system (and made durable with the directory's fsync)."""
        try:
            if self.local:
                os.replace(src, dst)
                self.sync_dir(os.path.dirname(dst))
            else:
                self.fs.mv(src, dst)
        except OSError as exc:
            raise _err(f"rename {src!r} to", dst, exc) from None

    def sync_dir(self, directory: str) -> None:
        if not self.local:
            return
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def remove(self, path: str) -> None:
        try:
            if self.local:
                os.remove(path)
            else:
                self.fs.rm_file(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _err("delete file", path, exc) from None

    def names(self, directory: str) -> list[str]:
        """The names (no directory) of the files in ``directory``."""
        try:
            if self.local:
                return os.listdir(directory)
            return [p.rstrip("/").rsplit("/", 1)[-1]
                    for p in self.fs.ls(directory, detail=False)]
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise _err("list directory", directory, exc) from None

    def read(self, path: str) -> bytes | None:
        try:
            if self.local:
                with open(path, "rb") as fh:
                    return fh.read()
            return self.fs.cat_file(path) if self.fs.exists(path) else None
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _err("read file", path, exc) from None

    def write_atomic(self, path: str, data: bytes) -> None:
        """Replace ``path`` with ``data`` as one step: a temp file, fsynced, renamed over it."""
        tmp = path + ".tmp"
        try:
            if self.local:
                with open(tmp, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, path)
                self.sync_dir(os.path.dirname(path))
            else:
                self.fs.pipe_file(tmp, data)
                self.fs.mv(tmp, path)
        except OSError as exc:
            raise _err("write file", path, exc) from None
