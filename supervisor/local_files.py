"""The supervisor's files under ``storm.local.dir``: its id, the topology cache, worker dirs, logs.

Storm's supervisor keeps the same things (``supervisor/stormdist/<id>`` filled by its
localizer, a directory per worker, the workers' logs); here one class owns the layout::

    <storm.local.dir>/supervisor/id                  this supervisor's id (kept across restarts)
    <storm.local.dir>/supervisor/stormdist/<id>/     a fetched topology (contract's topology files)
    <storm.local.dir>/supervisor/stormdist/<id>/resources/  its package's resources/, extracted
    <storm.local.dir>/workers/<id>-<port>/           a worker's directory (contract's worker files)
    <storm.local.dir>/logs/<id>-<port>.log           a worker's stdout and stderr

A topology is fetched into a temporary directory and renamed into place once complete, so a
half-written one never looks fetched. What the worker directories hold is
:mod:`squall.client.contract`'s.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
import zipfile
from typing import Any, Callable, Iterable, Mapping

from ..client import config as cfg
from ..client.profiling import WORKER_ARTIFACT
from ..client.contract import (CONF_FILE, PACKAGE_NAMES, RESOURCES_DIR, TOPOLOGY_FILE,
                               WORKER_LOG, WorkerAssignment, WorkerStatus, worker_log_name,
                               write_status)

log = logging.getLogger("squall.supervisor")

#: ``fetch_topology(topology_id, dest_dir)``: writes the topology's files into ``dest_dir``.
FetchTopology = Callable[[str, str], None]


#: Most bytes and files extracted from one package's resources/: a small package must not
#: fill a supervisor's disk (a zip bomb).
RESOURCES_MAX_BYTES = 1 << 30
RESOURCES_MAX_FILES = 10_000


def extract_resources(topology_dir: str, max_bytes: int = RESOURCES_MAX_BYTES,
                      max_files: int = RESOURCES_MAX_FILES) -> int:
    """Extract the package archive's ``resources/`` entries into ``topology_dir/resources``
    (Storm's supervisor does the same with the jar's), keeping their permission bits so a
    script marked executable stays so. Entries that would land outside it are skipped;
    past ``max_bytes`` or ``max_files`` the extraction fails (ValueError). Returns how many
    files were written."""
    archives = [os.path.join(topology_dir, n) for n in PACKAGE_NAMES]
    archive = next((a for a in archives if os.path.isfile(a) and zipfile.is_zipfile(a)), None)
    if archive is None:
        return 0
    dest_root = os.path.realpath(topology_dir)
    n = written = 0
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            name = info.filename
            if not name.startswith(RESOURCES_DIR + "/") or name.endswith("/"):
                continue
            target = os.path.realpath(os.path.join(dest_root, name))
            if not target.startswith(os.path.join(dest_root, RESOURCES_DIR) + os.sep):
                log.warning("package %s: skipping %r (outside resources/)", archive, name)
                continue
            if n >= max_files:
                raise ValueError(f"package {archive}: more than {max_files} files in "
                                 f"{RESOURCES_DIR}/")
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with zf.open(info) as src, open(target, "wb") as out:
                # Counted as written, not as the entry claims: a header can lie.
                while chunk := src.read(1 << 20):
                    written += len(chunk)
                    if written > max_bytes:
                        raise ValueError(f"package {archive}: {RESOURCES_DIR}/ unpacks to "
                                         f"more than {max_bytes} bytes")
                    out.write(chunk)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(target, mode & 0o755 | 0o600)
            n += 1
    return n


#: A topology whose fetch failed is tried again after this, doubling each time up to the
#: maximum (a package that cannot be extracted, a zip bomb, was fetched every 10 s forever).
FETCH_RETRY_SECS = 10.0
FETCH_RETRY_MAX_SECS = 600.0


class LocalFiles:
    """The supervisor's directory tree; not thread-safe (the supervisor's loop thread uses it)."""

    def __init__(self, local_dir: str, fetch_topology: FetchTopology | None,
                 clock: Callable[[], float] = time.monotonic,
                 on_fetch_failed: Callable[[str, int, str], Any] | None = None):
        self.local_dir = os.path.abspath(local_dir)
        self.stormdist = os.path.join(self.local_dir, "supervisor", "stormdist")
        self.workers_dir = os.path.join(self.local_dir, "workers")
        self.logs_dir = os.path.join(self.local_dir, "logs")
        for d in (self.stormdist, self.workers_dir, self.logs_dir):
            os.makedirs(d, exist_ok=True)
        # Owner-only: topologies' code, confs with their secrets (CurveZMQ keys), worker logs.
        # Only the directories we make: storm.local.dir itself may be shared (even /tmp).
        for d in (os.path.join(self.local_dir, "supervisor"), self.workers_dir, self.logs_dir):
            os.chmod(d, 0o700)
        self.fetch_topology = fetch_topology
        self._clock = clock
        #: tid -> (failed fetches in a row, when to try again, the last error).
        self.fetch_failures: dict[str, tuple[int, float, str]] = {}
        #: Told of each failed fetch: (tid, failures in a row, the error).
        self.on_fetch_failed = on_fetch_failed

    def load_id(self) -> str:
        """The supervisor's id, made once and kept, so a restart keeps its slots' owner."""
        path = os.path.join(self.local_dir, "supervisor", "id")
        try:
            with open(path) as fh:
                sid = fh.read().strip()
            if sid:
                return sid
        except FileNotFoundError:
            pass
        sid = str(uuid.uuid4())
        with open(path + ".tmp", "w") as fh:
            fh.write(sid + "\n")
        os.replace(path + ".tmp", path)
        return sid

    # -- paths ----------------------------------------------------------------------------
    def topology_dir(self, tid: str) -> str:
        return os.path.join(self.stormdist, tid)

    def worker_dir(self, tid: str, port: int) -> str:
        return os.path.join(self.workers_dir, f"{tid}-{port}")

    def log_path(self, tid: str, port: int) -> str:
        return os.path.join(self.logs_dir, worker_log_name(tid, port))

    def worker_dirs(self) -> list[tuple[str, int, str]]:
        """(topology id, port, directory) of every worker directory present."""
        out = []
        for name in sorted(os.listdir(self.workers_dir)):
            tid, _, port = name.rpartition("-")
            if tid and port.isdigit():
                out.append((tid, int(port), os.path.join(self.workers_dir, name)))
        return out

    # -- the topology cache -----------------------------------------------------------------
    def ensure_topology(self, tid: str) -> str | None:
        """The topology's local dir, fetched first if missing; None if the fetch failed (it
        is logged, and the next round tries again)."""
        dest = self.topology_dir(tid)
        if os.path.exists(os.path.join(dest, TOPOLOGY_FILE)):
            return dest
        if self.fetch_topology is None:
            log.error("topology %s is assigned here but no fetcher is configured", tid)
            return None
        failed = self.fetch_failures.get(tid)
        if failed is not None and self._clock() < failed[1]:
            return None  # backing off after a failed fetch
        # Fetch into a temporary dir and rename: a half-written dir must never look complete.
        tmp = os.path.join(self.stormdist, f".tmp-{tid}-{uuid.uuid4().hex[:8]}")
        os.makedirs(tmp)
        try:
            self.fetch_topology(tid, tmp)
            if not os.path.exists(os.path.join(tmp, TOPOLOGY_FILE)):
                raise FileNotFoundError(f"the fetcher wrote no {TOPOLOGY_FILE}")
            extract_resources(tmp)
            shutil.rmtree(dest, ignore_errors=True)
            os.replace(tmp, dest)
        except Exception as e:  # any fetcher failure: skip this topology, retry after a while
            shutil.rmtree(tmp, ignore_errors=True)
            count = (failed[0] if failed else 0) + 1
            delay = min(FETCH_RETRY_SECS * 2 ** (count - 1), FETCH_RETRY_MAX_SECS)
            self.fetch_failures[tid] = (count, self._clock() + delay, f"{type(e).__name__}: {e}")
            log.error("topology %s: cannot fetch it (%d time(s) in a row): %s; next try in "
                      "%.0f s", tid, count, e, delay)
            if self.on_fetch_failed is not None:
                self.on_fetch_failed(tid, count, self.fetch_failures[tid][2])
            return None
        self.fetch_failures.pop(tid, None)
        log.info("topology %s: fetched into %s", tid, dest)
        return dest

    def worker_conf(self, topo_dir: str, cluster_conf: Mapping[str, Any],
                    name: str | None) -> dict:
        """A worker's conf: the topology conf over this node's keys that workers inherit
        (:data:`~squall.client.config.WORKER_INHERITED_PREFIXES`), as a Storm worker gets
        the daemon conf under the topology's, so Trident finds ZooKeeper and Redis."""
        try:
            with open(os.path.join(topo_dir, CONF_FILE)) as fh:
                conf = json.load(fh)
        except FileNotFoundError:
            conf = {}
        conf = {**cfg.worker_inherited(cluster_conf, name or conf.get(cfg.TOPOLOGY_NAME),
                                       str(conf.get(cfg.TOPOLOGY_SUBMITTER_USER) or "")),
                **conf}
        if name and cfg.TOPOLOGY_NAME not in conf:
            conf[cfg.TOPOLOGY_NAME] = name
        return conf

    @staticmethod
    def code_paths(topo_dir: str) -> list[str]:
        """The fetched package files that go on the worker's ``sys.path``."""
        return [p for p in (os.path.join(topo_dir, n) for n in PACKAGE_NAMES)
                if os.path.exists(p)]

    # -- worker directories ----------------------------------------------------------------
    def write_worker_dir(self, assignment: WorkerAssignment, status: WorkerStatus) -> str:
        """Write the worker's assignment and status (each only when it changed: the worker
        follows their mtimes); returns the directory."""
        wdir = self.worker_dir(assignment.topology_id, assignment.port)
        os.makedirs(wdir, exist_ok=True)
        assignment.write(wdir)
        write_status(wdir, status)
        return wdir

    def clean(self, keep_workers: Iterable[tuple[str, int]], keep_topologies: Iterable[str],
              log_max_age_secs: float | None = None) -> None:
        """Remove worker dirs and topology dirs nothing here uses any more, and the worker
        logs of topologies not kept that nothing wrote for ``log_max_age_secs`` (Storm's
        logviewer.cleanup.age.mins)."""
        keep_w = {f"{tid}-{port}" for tid, port in keep_workers}
        keep_t = set(keep_topologies)
        for tid in [t for t in self.fetch_failures if t not in keep_t]:
            del self.fetch_failures[tid]  # no longer assigned here
        for name in os.listdir(self.workers_dir):
            if name not in keep_w:
                shutil.rmtree(os.path.join(self.workers_dir, name), ignore_errors=True)
        for name in os.listdir(self.stormdist):
            if name not in keep_t and not name.startswith(".tmp-"):
                log.info("topology %s: removing its local files", name)
                shutil.rmtree(os.path.join(self.stormdist, name), ignore_errors=True)
        if log_max_age_secs is not None:
            self._clean_logs(keep_t, time.time() - log_max_age_secs)

    def _clean_logs(self, keep_t: set[str], before: float) -> None:
        for name in os.listdir(self.logs_dir):
            # Its dumps and events log (client/profiling.py) go with the worker's log.
            m = WORKER_LOG.match(name) or WORKER_ARTIFACT.match(name)
            if m is None or m.group("tid") in keep_t:
                continue  # a daemon's log, or a running topology's
            path = os.path.join(self.logs_dir, name)
            try:
                if os.lstat(path).st_mtime < before:
                    os.unlink(path)
                    log.info("removed %s: its topology no longer runs here and it is older "
                             "than logviewer.cleanup.age.mins", name)
            except OSError:
                continue
