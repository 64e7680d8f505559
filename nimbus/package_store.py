"""Nimbus's package inbox and stormdist on local disk, under ``storm.local.dir``/nimbus.

Mirrors what Storm's Nimbus does with ``beginFileUpload``/``uploadChunk``/``finishFileUpload``
(the inbox) and ``setupStormCode`` (``stormdist/<topology-id>/`` holding ``stormjar.jar``,
``stormcode.ser`` and ``stormconf.ser``). Layout::

    <storm.local.dir>/nimbus/inbox/<location>         an upload in progress or finished
    <storm.local.dir>/nimbus/stormdist/<id>/package    the topology's package (may be absent)
    <storm.local.dir>/nimbus/stormdist/<id>/topology.pb  the user StormTopology, serialized
    <storm.local.dir>/nimbus/stormdist/<id>/conf.json  the topology conf as submitted and merged

Upload locations are opaque ids this store issues (``upload-<32 hex>``); a client never
names a path. A location containing ``..`` or ``/`` is refused as an attempt to leave the
inbox (:class:`InvalidRequest`), one we did not issue (or issued before a restart) as
unknown (:class:`TopologyNotFound`). Each chunk must start where the previous one ended,
so a retried chunk cannot be appended twice; the total is bounded by
``nimbus.package.max.bytes`` (:class:`PackageTooLarge`).

The inbox as a whole is bounded too (:class:`LimitExceeded`): ``nimbus.inbox.max.bytes``
over every open upload, ``nimbus.inbox.max.uploads`` open uploads, and
``nimbus.inbox.max.uploads.per.user`` per principal; an upload untouched for
``nimbus.inbox.jar.expiration.secs`` is abandoned and deleted (:meth:`PackageStore.expire`,
run by each :meth:`PackageStore.begin` and each monitor round). Thread-safe.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from ..client import config as cfg
from ..client.contract import write_text_atomic
from ..client.errors import (InvalidRequest, LimitExceeded, PackageTooLarge, PermissionDenied,
                             TopologyNotFound)

log = logging.getLogger("squall.nimbus.package_store")

#: Bytes per chunk DownloadPackage sends (gRPC's default message limit is 4 MiB).
CHUNK_SIZE = 1024 * 1024
PACKAGE_FILE, TOPOLOGY_FILE, CONF_FILE = "package", "topology.pb", "conf.json"
_LOCATION = re.compile(r"upload-[0-9a-f]{32}")
# Topology ids are "<name>-<counter>-<secs>"; names may hold most characters but not "/".
_BAD_ID = re.compile(r"(^\.|/|\\|\x00)")


@dataclass
class _Upload:
    path: Path
    file_name: str
    principal: str = ""
    size: int = 0
    finished: bool = False
    #: time.monotonic() of the last chunk (or of begin/finish).
    touched: float = 0.0
    #: time.monotonic() of its (first) finish: a finished upload expires that long after,
    #: whatever is called on it since.
    finished_at: float = 0.0


class PackageStore:
    """The inbox and stormdist of one Nimbus.

    Example::

        store = PackageStore(conf)
        loc = store.begin("wc.zip", total_size=len(data))
        store.append(loc, 0, data)
        store.finish(loc)
        store.commit(loc, "wc-1-1700000000", topology_bytes, json.dumps(conf))
        data = b"".join(chunk for _, chunk in store.read_package("wc-1-1700000000"))
    """

    def __init__(self, conf: Mapping[str, Any]):
        root = Path(conf.get(cfg.STORM_LOCAL_DIR) or "squall-local").absolute() / "nimbus"
        #: Where uploads land, and where committed topologies live.
        self.inbox, self.stormdist = root / "inbox", root / "stormdist"
        limit = conf.get(cfg.NIMBUS_PACKAGE_MAX_BYTES)
        #: The package size limit in bytes.
        self.max_bytes = int(256 * 1024 * 1024 if limit is None else limit)
        self.inbox_max_bytes = int(cfg.get(conf, cfg.NIMBUS_INBOX_MAX_BYTES))
        self.inbox_max_uploads = int(cfg.get(conf, cfg.NIMBUS_INBOX_MAX_UPLOADS))
        self.inbox_max_per_user = int(cfg.get(conf, cfg.NIMBUS_INBOX_MAX_UPLOADS_PER_USER))
        self.inbox_max_bytes_per_user = int(cfg.get(conf, cfg.NIMBUS_INBOX_MAX_BYTES_PER_USER))
        self.expiration_secs = float(cfg.get(conf, cfg.NIMBUS_INBOX_JAR_EXPIRATION_SECS))
        self._uploads: dict[str, _Upload] = {}
        self._lock = threading.Lock()
        # Uploads do not survive a restart (the ids are forgotten): drop the leftovers.
        shutil.rmtree(self.inbox, ignore_errors=True)
        self.inbox.mkdir(parents=True, exist_ok=True)
        self.stormdist.mkdir(parents=True, exist_ok=True)
        # Owner-only: packages and topologies hold users' code and confs their secrets.
        os.chmod(root, 0o700)

    # --- upload ---
    def begin(self, file_name: str = "", total_size: int = 0, principal: str = "") -> str:
        """Open an upload for ``principal`` and return its location id; refuse a known
        oversized total, and a full inbox, at once."""
        if total_size < 0:
            raise InvalidRequest(f"total_size must be >= 0, got {total_size}")
        if total_size > self.max_bytes:
            raise self._too_large(total_size)
        self.expire()
        location = f"upload-{uuid.uuid4().hex}"
        upload = _Upload(self.inbox / location, os.path.basename(file_name or "")[:255],
                         principal, touched=time.monotonic())
        with self._lock:
            if len(self._uploads) >= self.inbox_max_uploads:
                raise LimitExceeded(f"Nimbus holds {len(self._uploads)} open uploads, its limit "
                                    f"({cfg.NIMBUS_INBOX_MAX_UPLOADS}); retry when they finish "
                                    "or expire")
            mine = sum(1 for u in self._uploads.values() if u.principal == principal)
            if mine >= self.inbox_max_per_user:
                raise LimitExceeded(f"{principal or 'this user'} holds {mine} open uploads, the "
                                    f"limit per user ({cfg.NIMBUS_INBOX_MAX_UPLOADS_PER_USER}); "
                                    "submit or abandon them first (AbandonFileUpload; "
                                    "unused ones expire after "
                                    f"{cfg.NIMBUS_INBOX_JAR_EXPIRATION_SECS})")
            self._check_inbox_room(total_size, principal)
            upload.path.touch()
            self._uploads[location] = upload
        log.info("upload %s opened by %s for %r (%d bytes announced)", location,
                 principal or "?", upload.file_name, total_size)
        return location

    def _check_inbox_room(self, more: int, principal: str) -> None:
        mine = sum(u.size for u in self._uploads.values() if u.principal == principal)
        if mine + more > self.inbox_max_bytes_per_user:
            raise LimitExceeded(f"{principal or 'this user'} holds {mine} bytes of open uploads; "
                                f"{more} more would pass the limit per user "
                                f"({cfg.NIMBUS_INBOX_MAX_BYTES_PER_USER} = "
                                f"{self.inbox_max_bytes_per_user}); submit or abandon them "
                                "first (AbandonFileUpload)")
        held = sum(u.size for u in self._uploads.values())
        if held + more > self.inbox_max_bytes:
            raise LimitExceeded(f"Nimbus's inbox holds {held} bytes of uploads; {more} more would "
                                f"pass its limit ({cfg.NIMBUS_INBOX_MAX_BYTES} = "
                                f"{self.inbox_max_bytes}); retry later")

    def expire(self, now: float | None = None) -> list[str]:
        """Delete uploads untouched for nimbus.inbox.jar.expiration.secs, and finished ones
        that long after they finished; returns their ids."""
        now = time.monotonic() if now is None else now
        with self._lock:
            old = [loc for loc, u in self._uploads.items()
                   if now - (u.finished_at or u.touched) > self.expiration_secs]
            for loc in old:
                self._discard(loc)
        for loc in old:
            log.info("upload %s expired: untouched for over %s s", loc, self.expiration_secs)
        return old

    def append(self, location: str, offset: int, data: bytes, principal: str | None = None
               ) -> int:
        """Append ``data`` at ``offset`` (which must equal the bytes received so far); returns the new size.

        Going over the limit discards the whole upload: the client must start again.
        """
        with self._lock:
            upload = self._get(location, principal)
            if upload.finished:
                raise InvalidRequest(f"upload {location} is already finished; begin a new one")
            if offset != upload.size:
                raise InvalidRequest(f"chunk of upload {location} starts at byte {offset}, but "
                                     f"{upload.size} bytes were received so far; send the chunk "
                                     f"at offset {upload.size}")
            if upload.size + len(data) > self.max_bytes:
                self._discard(location)
                raise self._too_large(upload.size + len(data), at_least=True)
            self._check_inbox_room(len(data), upload.principal)
            with open(upload.path, "ab") as f:
                f.write(data)
            upload.size += len(data)
            upload.touched = time.monotonic()
            return upload.size

    def finish(self, location: str, principal: str | None = None) -> int:
        """Close an upload; its location can then be committed. Returns its size."""
        with self._lock:
            upload = self._get(location, principal)
            if upload.finished:
                return upload.size  # finishing again neither refreshes nor extends it
            upload.finished = True
            upload.touched = upload.finished_at = time.monotonic()
            log.info("upload %s finished: %d bytes", location, upload.size)
            return upload.size

    def abandon(self, location: str, principal: str | None = None) -> None:
        """Delete an upload its principal will not submit (frees its room at once)."""
        with self._lock:
            upload = self._get(location, principal)
            self._discard(location)
        log.info("upload %s abandoned by %s (%d bytes)", location, principal or "?",
                 upload.size)

    def check_ready(self, location: str, principal: str | None = None) -> None:
        """Raise unless ``location`` is a finished upload ('' = no package is fine)."""
        if not location:
            return
        with self._lock:
            if not self._get(location, principal).finished:
                raise InvalidRequest(f"upload {location} is not finished; call FinishFileUpload "
                                     "before SubmitTopology")

    def _get(self, location: str, principal: str | None = None) -> _Upload:
        if ".." in location or "/" in location or "\\" in location or "\x00" in location:
            raise InvalidRequest(f"upload location {location!r} points outside Nimbus's inbox; "
                                 "pass the location BeginFileUpload returned, unchanged")
        upload = self._uploads.get(location)
        if upload is None or not _LOCATION.fullmatch(location):
            raise TopologyNotFound(f"no upload at location {location!r} (Nimbus issues locations "
                                   "with BeginFileUpload and forgets them on restart); "
                                   "upload the package again")
        if principal is not None and upload.principal and principal != upload.principal:
            raise PermissionDenied(f"{principal} may not use upload {location}: "
                                   f"{upload.principal} opened it")
        return upload

    def _discard(self, location: str) -> None:
        upload = self._uploads.pop(location, None)
        if upload is not None:
            upload.path.unlink(missing_ok=True)

    def discard(self, location: str, principal: str | None = None) -> None:
        """Forget an upload and delete its file (a refused submit); unknown locations, and
        another principal's uploads, are left alone."""
        with self._lock:
            upload = self._uploads.get(location)
            if upload is not None and principal is not None and upload.principal and \
                    upload.principal != principal:
                return
            self._discard(location)

    def _too_large(self, size: int, at_least: bool = False) -> PackageTooLarge:
        more = "at least " if at_least else ""
        return PackageTooLarge(
            f"package of {more}{size} bytes is over the limit of {self.max_bytes} bytes "
            f"({cfg.NIMBUS_PACKAGE_MAX_BYTES}); make the package smaller or raise "
            f"{cfg.NIMBUS_PACKAGE_MAX_BYTES} in Nimbus's squall.yaml", self.max_bytes)

    # --- stormdist ---
    def commit(self, location: str, topology_id: str, topology_bytes: bytes,
               conf_json: str) -> Path:
        """Move the upload (if any) to ``stormdist/<topology_id>/`` with the topology and conf.

        The directory appears whole or not at all (written beside it, then renamed).
        """
        with self._lock:
            upload = self._get(location) if location else None
            if upload is not None and not upload.finished:
                raise InvalidRequest(f"upload {location} is not finished")

            def put_package(tmp: Path) -> None:
                if upload is not None:
                    os.replace(upload.path, tmp / PACKAGE_FILE)
                    del self._uploads[location]

            return self._store(topology_id, put_package, topology_bytes, conf_json)

    def install(self, topology_id: str, package: bytes | None, topology_bytes: bytes,
                conf_json: str) -> Path:
        """Store a topology copied from another Nimbus (a follower keeping up with the leader)."""
        def put_package(tmp: Path) -> None:
            if package:
                (tmp / PACKAGE_FILE).write_bytes(package)

        with self._lock:
            return self._store(topology_id, put_package, topology_bytes, conf_json)

    def _store(self, topology_id: str, put_package: Callable[[Path], None],
               topology_bytes: bytes, conf_json: str) -> Path:
        final = self._dir(topology_id)
        tmp = self.stormdist / f".{topology_id}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            put_package(tmp)
            (tmp / TOPOLOGY_FILE).write_bytes(topology_bytes)
            # Owner-only: it holds the topology's secrets.
            write_text_atomic(str(tmp / CONF_FILE), conf_json)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        log.info("topology %s stored in %s", topology_id, final)
        return final

    def _dir(self, topology_id: str) -> Path:
        if not topology_id or _BAD_ID.search(topology_id) or ".." in topology_id:
            raise InvalidRequest(f"invalid topology id {topology_id!r}")
        return self.stormdist / topology_id

    def _existing(self, topology_id: str) -> Path:
        path = self._dir(topology_id)
        if not path.is_dir():
            raise TopologyNotFound(f"no stored topology with id {topology_id!r}; `squall list` "
                                   "shows the live ones")
        return path

    def has_package(self, topology_id: str) -> bool:
        return (self._existing(topology_id) / PACKAGE_FILE).is_file()

    def read_package(self, topology_id: str, chunk_size: int = CHUNK_SIZE
                     ) -> Iterator[tuple[int, bytes]]:
        """``(offset, bytes)`` chunks of the topology's package (none if it has no package)."""
        path = self._existing(topology_id) / PACKAGE_FILE
        if not path.is_file():
            return
        with open(path, "rb") as f:
            offset = 0
            while data := f.read(chunk_size):
                yield offset, data
                offset += len(data)

    def read_topology(self, topology_id: str) -> bytes:
        """The serialized user StormTopology."""
        return (self._existing(topology_id) / TOPOLOGY_FILE).read_bytes()

    def read_conf(self, topology_id: str) -> dict[str, Any]:
        """The topology conf."""
        return json.loads((self._existing(topology_id) / CONF_FILE).read_text(encoding="utf-8"))

    def read_conf_json(self, topology_id: str) -> str:
        return (self._existing(topology_id) / CONF_FILE).read_text(encoding="utf-8")

    def remove(self, topology_id: str) -> None:
        """Delete the topology's directory; nothing happens if it is already gone."""
        shutil.rmtree(self._dir(topology_id), ignore_errors=True)

    def topology_ids(self) -> list[str]:
        return sorted(p.name for p in self.stormdist.iterdir()
                      if p.is_dir() and not p.name.startswith("."))
