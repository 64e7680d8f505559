"""A topology's own Python environment: the virtualenv its workers run in.

streamparse builds a virtualenv per topology on every host; Storm ships jars with
``storm jar --jars/--artifacts``. Here ``squall jar`` ships the requirements (and a
wheelhouse) in the package (:mod:`squall.client.requirements`), and each supervisor builds
one virtualenv per distinct environment before it launches the topology's workers with that
virtualenv's interpreter::

    <supervisor.venv.dir>/<key>/             the virtualenv (``bin/python``)
    <supervisor.venv.dir>/<key>/.squall-env.json   written last: the build finished; its
                                             mtime is when a topology last used it
    <supervisor.venv.dir>/<key>.lock         held while building or deleting it (flock)

The key hashes the requirements, the wheels' contents, whether pip may use an index, and the
interpreter (:func:`env_key`): topologies and resubmissions with the same ones share a
virtualenv, built once; one unused for ``supervisor.venv.cleanup.age.secs`` is deleted.

**Why a plain venv plus a .pth file**: the workers import squall and its dependencies from
the cluster's virtualenv. ``--system-site-packages`` would expose the *base* interpreter's
site-packages, not the cluster virtualenv's, and copying the cluster's packages into each
environment would be slow and go stale. So the environment is ``python -m venv`` of the
cluster virtualenv's base interpreter, with a ``.pth`` file that appends the cluster's
site-packages *after* its own: a package the topology pins wins over the cluster's copy (a
pin of one Squall itself uses, such as protobuf or pyzmq, replaces it for that topology),
and everything else resolves from the cluster. pip runs with that path too, so it installs
only what the cluster does not already satisfy (a --no-index build needs wheels for just
those), and it never touches the cluster's packages: pip uninstalls nothing outside the
environment it installs into.

**What runs**: ``python -m venv`` and ``pip install`` as subprocesses of the supervisor, as
its user, into the topology's environment only; nothing is imported into the supervisor.
pip installs wheels only (``--only-binary :all:``): a wheel's install runs none of its code,
where an sdist's build would run its setup.py. The requirements file is checked first
(:func:`squall.client.requirements.parse_requirements`: no pip options, URLs or paths), the
wheelhouse is bounded by ``nimbus.package.max.bytes`` and the build by
``supervisor.venv.build.timeout.secs``.

Builds run on a thread pool, off the supervisor's loop (pip can take minutes; heartbeats and
other topologies go on), and log pip's output as they go. A failed build is the topology's
error (``squall list``, the UI) with pip's last lines; it is tried again after a backoff
(:func:`retry_delay`), and at once for a resubmission (a new topology id). The pure
decisions (:func:`env_key`, :func:`next_action`, :func:`retry_delay`, :func:`stale_envs`,
:func:`pip_error_summary`, the commands) are tested without processes.
"""

from __future__ import annotations

import collections
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from ..client import config as cfg
from ..client.contract import PACKAGE_NAMES
from ..client.requirements import (REQUIREMENTS_MAX_BYTES, RequirementsError, entry_name,
                                   parse_requirements_file)

log = logging.getLogger("squall.supervisor")

#: Bumped when what a key stands for changes (a new layout of the environment).
KEY_SCHEMA = 1
#: Written into the environment last: the build finished. Its mtime is the last use.
READY_FILE = ".squall-env.json"
#: The .pth that puts the cluster's site-packages after the environment's own.
PTH_FILE = "_squall_cluster.pth"
#: Most wheels one wheelhouse may hold (the bound extract_resources has for files).
MAX_WHEELS = 10_000
#: A failed build of a topology is tried again after this, doubling up to the maximum.
RETRY_SECS = 60.0
RETRY_MAX_SECS = 3600.0
#: pip's last lines kept for the error (and how many characters of them are shown).
ERROR_LINES = 8
ERROR_CHARS = 1500
#: Threads building environments at once (pip is CPU and disk heavy; others wait).
BUILD_THREADS = 2
#: Seconds between two looks for unused environments to delete.
GC_EVERY_SECS = 60.0
_WHEEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+!-]*\.whl")

READY, WAIT, BUILD = "ready", "wait", "build"


class EnvError(Exception):
    """A build that cannot succeed as it stands; the message is the topology's error."""


@dataclass(frozen=True)
class EnvSpec:
    """What a topology's environment holds: checked requirement lines, the wheelhouse's
    wheels as (file name, sha256, size), and whether pip installs from them alone."""

    requirements: tuple[str, ...]
    wheels: tuple[tuple[str, str, int], ...] = ()
    no_index: bool = False
    #: The wheelhouse's entry prefix in the package archive ('' without one).
    wheelhouse: str = ""


def interpreter_id() -> dict[str, Any]:
    """What of this interpreter an environment built from it depends on: its version and
    base executable, and the cluster site-packages its .pth names."""
    return {"implementation": sys.implementation.name, "version": platform.python_version(),
            "base": os.path.realpath(getattr(sys, "_base_executable", sys.executable)),
            "site": cluster_site_dirs()}


def cluster_site_dirs() -> list[str]:
    """The cluster virtualenv's site-packages (purelib, and platlib where it differs)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def env_key(spec: EnvSpec, interpreter: Mapping[str, Any], owner: str | None = None) -> str:
    """The environment's directory name: ``py311-<hash>`` of everything that makes it, and of
    the topology's owner: one owner's topology code could change an environment it runs in
    (a sitecustomize.py), so another owner's never shares it. The order of requirement lines
    and of wheels does not matter; the wheels' contents do."""
    blob = json.dumps([KEY_SCHEMA, sorted(spec.requirements), sorted(spec.wheels),
                       spec.no_index, dict(interpreter), owner], sort_keys=True,
                      separators=(",", ":"))
    version = str(interpreter.get("version", ""))
    short = "".join(version.split(".")[:2])
    return f"py{short}-{hashlib.sha256(blob.encode()).hexdigest()[:24]}"


# -- decisions -------------------------------------------------------------------------------


@dataclass
class EnvState:
    """One topology's environment as this supervisor knows it."""

    #: A build (or the check that finds one built) is running.
    pending: bool = False
    #: The environment's interpreter once ready.
    python: str | None = None
    key: str | None = None
    #: Failed builds in a row, when the next may start, and the last error.
    failures: int = 0
    retry_at: float = 0.0
    error: str = ""


def retry_delay(failures: int) -> float:
    """Seconds before trying again after the ``failures``-th failed build in a row."""
    return min(RETRY_MAX_SECS, RETRY_SECS * 2 ** min(max(failures, 1) - 1, 30))


def next_action(state: EnvState | None, now: float) -> str:
    """:data:`READY` (launch with ``state.python``), :data:`WAIT` (a build runs, or the
    last one failed and its backoff has not passed) or :data:`BUILD` (start one: a topology
    not seen before, which a resubmission is, or a failed one whose backoff passed)."""
    if state is None:
        return BUILD
    if state.pending:
        return WAIT
    if state.python:
        return READY
    if state.failures and now < state.retry_at:
        return WAIT
    return BUILD


def stale_envs(last_used: Mapping[str, float], in_use: Iterable[str], now: float,
               max_age: float) -> list[str]:
    """The environments to delete: not used by a topology assigned here, and last used
    more than ``max_age`` seconds before ``now`` (sorted)."""
    keep = set(in_use)
    return sorted(k for k, t in last_used.items() if k not in keep and now - t > max_age)


def pip_error_summary(lines: Iterable[str], max_lines: int = ERROR_LINES,
                      max_chars: int = ERROR_CHARS) -> str:
    """pip's last ``max_lines`` non-blank lines from its first ``ERROR:`` among them (what
    went wrong, without the progress before it), joined with `` | `` for one line in
    ``squall list``, cut to the last ``max_chars`` characters."""
    tail = [ln.strip() for ln in lines if ln.strip()][-max_lines:]
    first = next((i for i, ln in enumerate(tail) if ln.startswith("ERROR")), 0)
    text = " | ".join(tail[first:])
    return text if len(text) <= max_chars else "..." + text[-max_chars:]


def venv_command(python: str, env_dir: str, with_pip: bool = False) -> list[str]:
    """Create the environment from ``python``'s base interpreter (``-m venv`` of a virtualenv's
    interpreter makes one of its base). No pip inside unless this interpreter has none."""
    return [python, "-m", "venv", *([] if with_pip else ["--without-pip"]), env_dir]


def pip_command(python: str, env_python: str, requirements_file: str,
                wheelhouse: str | None, own_pip: bool = True) -> list[str]:
    """``pip install`` of the requirements into the environment of ``env_python``: with the
    cluster's pip run for that interpreter (``--python``), or, ``own_pip`` False, the
    environment's own. Wheels only; with a wheelhouse, no index."""
    head = [python, "-m", "pip", "--python", env_python] if own_pip else \
        [env_python, "-m", "pip"]
    return [*head, "install", "--disable-pip-version-check", "--no-input",
            "--no-warn-script-location", "--progress-bar", "off", "--only-binary", ":all:",
            *(["--no-index", "--find-links", wheelhouse] if wheelhouse is not None else []),
            "-r", requirements_file]


def pth_text(site_dirs: Iterable[str]) -> str:
    """The .pth line adding the cluster's site-packages after the environment's own (with
    their own .pth files: an editable squall's finder)."""
    return "".join(f"import site; site.addsitedir({d!r})\n" for d in site_dirs)


# -- the package -----------------------------------------------------------------------------


def package_archive(topo_dir: str) -> str:
    for name in PACKAGE_NAMES:
        path = os.path.join(topo_dir, name)
        if os.path.isfile(path) and zipfile.is_zipfile(path):
            return path
    raise EnvError("the topology's package is not a zip archive")


def read_env_spec(topo_dir: str, conf: Mapping[str, Any], max_wheel_bytes: int) -> EnvSpec:
    """The topology's :class:`EnvSpec` from its fetched package: the requirements file the
    conf names (checked), the wheelhouse's wheels hashed (bounded by ``max_wheel_bytes``
    together and :data:`MAX_WHEELS`). Raises :class:`EnvError` saying what is wrong."""
    req_path = entry_name(str(conf[cfg.TOPOLOGY_PYTHON_REQUIREMENTS]))
    wheelhouse = conf.get(cfg.TOPOLOGY_PYTHON_WHEELHOUSE)
    with zipfile.ZipFile(package_archive(topo_dir)) as zf:
        try:
            info = zf.getinfo(req_path)
        except KeyError:
            raise EnvError(f"{cfg.TOPOLOGY_PYTHON_REQUIREMENTS}: the package has no "
                           f"{req_path}") from None
        with zf.open(info) as fh:
            data = fh.read(REQUIREMENTS_MAX_BYTES + 1)  # read, not as the header claims
        try:
            requirements = parse_requirements_file(data, req_path)
        except RequirementsError as e:
            raise EnvError(str(e)) from None
        wheels: list[tuple[str, str, int]] = []
        prefix = ""
        if wheelhouse is not None:
            prefix = entry_name(str(wheelhouse)) + "/"
            total = 0
            for info in zf.infolist():
                name = info.filename
                if not name.startswith(prefix) or name.endswith("/"):
                    continue
                base = name[len(prefix):]
                if not _WHEEL_NAME.fullmatch(base):
                    continue  # not a wheel at the wheelhouse's top: pip would not look
                if len(wheels) >= MAX_WHEELS:
                    raise EnvError(f"the wheelhouse holds more than {MAX_WHEELS} wheels")
                digest = hashlib.sha256()
                size = 0
                with zf.open(info) as fh:
                    while chunk := fh.read(1 << 20):
                        size += len(chunk)
                        total += len(chunk)
                        if total > max_wheel_bytes:
                            raise EnvError(f"the wheelhouse unpacks to more than "
                                           f"{max_wheel_bytes} bytes (nimbus.package.max.bytes)")
                        digest.update(chunk)
                wheels.append((base, digest.hexdigest(), size))
    return EnvSpec(requirements, tuple(sorted(wheels)), wheelhouse is not None, prefix)


def extract_wheels(topo_dir: str, spec: EnvSpec, dest: str) -> None:
    """Write the wheels of ``spec`` into ``dest``, each checked against its hash (the key
    stands for these bytes)."""
    os.makedirs(dest, exist_ok=True)
    with zipfile.ZipFile(package_archive(topo_dir)) as zf:
        for name, sha, size in spec.wheels:
            digest = hashlib.sha256()
            written = 0
            with zf.open(spec.wheelhouse + name) as src, \
                    open(os.path.join(dest, name), "wb") as out:
                while chunk := src.read(1 << 20):
                    written += len(chunk)
                    if written > size:
                        break
                    digest.update(chunk)
                    out.write(chunk)
            if written != size or digest.hexdigest() != sha:
                raise EnvError(f"wheel {name} changed in the package while it was read")


# -- files -----------------------------------------------------------------------------------


@contextlib.contextmanager
def locked(path: str, stop: threading.Event | None = None,
           wait: bool = True) -> Iterator[bool]:
    """Hold an exclusive flock on ``path`` (made if missing); yields False at once when
    ``wait`` is False and another holds it, or when ``stop`` is set while waiting. The lock
    is on the file the path names when taken (one deleted meanwhile is taken again), so
    a deleter may unlink it while holding it."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # Polled, not blocking: a supervisor closing must not wait for another's build.
                if not wait or (stop is not None and stop.wait(0.2)):
                    os.close(fd)
                    yield False
                    return
                if stop is None:
                    time.sleep(0.2)
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        yield True
    finally:
        os.close(fd)


def env_python(env_dir: str) -> str:
    return os.path.join(env_dir, "bin", "python")


# -- the builder -----------------------------------------------------------------------------


@dataclass(eq=False)  # kept in a set, by identity
class _Build:
    """A running build's process, killed by a timeout or by close()."""

    proc: subprocess.Popen
    timed_out: bool = False
    lines: collections.deque = field(default_factory=lambda: collections.deque(maxlen=64))


class PythonEnvs:
    """This supervisor's topology environments.

    The loop asks :meth:`python` for each assigned topology with requirements (never
    blocks: it starts a build and answers None until one is ready), launches workers with
    :meth:`python_of`, and calls :meth:`collect` each full round. ``on_failed(tid,
    failures, error, retry_in)`` is told of each failed build, ``on_change()`` when a build
    ended (wake the loop)."""

    def __init__(self, conf: Mapping[str, Any],
                 on_failed: Callable[[str, int, str, float], Any] | None = None,
                 on_change: Callable[[], Any] | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.dir = os.path.abspath(conf.get(cfg.SUPERVISOR_VENV_DIR) or os.path.join(
            cfg.get(conf, cfg.STORM_LOCAL_DIR), "supervisor", "venvs"))
        self.timeout = float(cfg.get(conf, cfg.SUPERVISOR_VENV_BUILD_TIMEOUT_SECS))
        self.max_age = float(cfg.get(conf, cfg.SUPERVISOR_VENV_CLEANUP_AGE_SECS))
        self.max_wheel_bytes = int(cfg.get(conf, cfg.NIMBUS_PACKAGE_MAX_BYTES))
        self.on_failed = on_failed
        self.on_change = on_change
        self.clock = clock
        self._states: dict[str, EnvState] = {}
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._pool: ThreadPoolExecutor | None = None  # made on first use
        self._builds: set[_Build] = set()
        self._stop = threading.Event()
        self._last_gc = -GC_EVERY_SECS

    @staticmethod
    def wanted(conf: Mapping[str, Any] | None) -> bool:
        """The topology of ``conf`` has requirements: its workers wait for their environment."""
        return bool(conf and conf.get(cfg.TOPOLOGY_PYTHON_REQUIREMENTS))

    def python(self, tid: str, topo_dir: str, conf: Mapping[str, Any]) -> str | None:
        """The interpreter of ``tid``'s environment if ready; else None, starting its build
        (or the check that finds it built) unless one runs or a failure's backoff holds."""
        with self._lock:
            state = self._states.get(tid)
            action = next_action(state, self.clock())
            if action == READY:
                return state.python if state else None
            if action == WAIT or self._stop.is_set():
                return None
            self._states[tid] = EnvState(pending=True, failures=state.failures if state else 0)
            if self._pool is None:
                self._pool = ThreadPoolExecutor(BUILD_THREADS, thread_name_prefix="supervisor-venv")
            self._pool.submit(self._prepare, tid, topo_dir, dict(conf))
        return None

    def python_of(self, tid: str) -> str | None:
        """The interpreter of ``tid``'s ready environment, None if it has none (yet)."""
        with self._lock:
            state = self._states.get(tid)
            return state.python if state else None

    def state(self, tid: str) -> EnvState | None:
        with self._lock:
            return self._states.get(tid)

    # -- the build thread ----------------------------------------------------------------
    def _prepare(self, tid: str, topo_dir: str, conf: dict) -> None:
        try:
            spec = read_env_spec(topo_dir, conf, self.max_wheel_bytes)
            key = env_key(spec, interpreter_id(), conf.get(cfg.TOPOLOGY_SUBMITTER_USER))
            python = self._ensure(tid, key, spec, topo_dir)
        except Exception as e:  # noqa: BLE001 - every failure is the topology's error
            why = str(e) if isinstance(e, EnvError) else f"{type(e).__name__}: {e}"
            with self._lock:
                state = self._states.setdefault(tid, EnvState())
                state.pending = False
                state.failures += 1
                delay = retry_delay(state.failures)
                state.retry_at = self.clock() + delay
                state.error = why
                failures = state.failures
            if not self._stop.is_set():
                log.error("topology %s: cannot build its Python environment (%d time(s) in a "
                          "row): %s; next try in %.0f s", tid, failures, why, delay)
                if self.on_failed is not None:
                    self.on_failed(tid, failures, why, delay)
        else:
            with self._lock:
                self._states[tid] = EnvState(python=python, key=key)
        finally:
            if self.on_change is not None and not self._stop.is_set():
                self.on_change()

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            return self._key_locks.setdefault(key, threading.Lock())

    def _ensure(self, tid: str, key: str, spec: EnvSpec, topo_dir: str) -> str:
        """The environment ``key`` (built first unless a finished one is there); its python."""
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        env_dir = os.path.join(self.dir, key)
        ready = os.path.join(env_dir, READY_FILE)
        # One build per key: this process's threads wait on the lock, other processes
        # sharing supervisor.venv.dir on the lock file.
        with self._key_lock(key), locked(env_dir + ".lock", self._stop) as held:
            if not held:
                raise EnvError("the supervisor is stopping")
            if os.path.isfile(ready):
                os.utime(ready)
                log.info("topology %s: reusing Python environment %s", tid, env_dir)
                return env_python(env_dir)
            self._build(tid, env_dir, spec, topo_dir)
            return env_python(env_dir)

    def _build(self, tid: str, env_dir: str, spec: EnvSpec, topo_dir: str) -> None:
        t0 = time.monotonic()
        deadline = t0 + self.timeout
        log.info("topology %s: building Python environment %s: %d requirement(s)%s", tid,
                 env_dir, len(spec.requirements),
                 f", no index, {len(spec.wheels)} wheel(s)" if spec.no_index else "")
        shutil.rmtree(env_dir, ignore_errors=True)  # what a killed build left
        work = tempfile.mkdtemp(prefix=".build-", dir=self.dir)
        try:
            reqs = os.path.join(work, "requirements.txt")
            with open(reqs, "w") as fh:
                fh.write("".join(f"{r}\n" for r in spec.requirements))
            wheelhouse = None
            if spec.no_index:
                wheelhouse = os.path.join(work, "wheelhouse")
                extract_wheels(topo_dir, spec, wheelhouse)
            own_pip = _has_pip()
            self._run(venv_command(sys.executable, env_dir, with_pip=not own_pip),
                      "python -m venv", tid, deadline, work)
            site = sysconfig.get_path("purelib", scheme="venv",
                                      vars={"base": env_dir, "platbase": env_dir})
            os.makedirs(site, exist_ok=True)
            with open(os.path.join(site, PTH_FILE), "w") as fh:
                fh.write(pth_text(cluster_site_dirs()))
            if spec.requirements:
                self._run(pip_command(sys.executable, env_python(env_dir), reqs, wheelhouse,
                                      own_pip), "pip install", tid, deadline, work)
            with open(os.path.join(env_dir, READY_FILE + ".tmp"), "w") as fh:
                json.dump({"requirements": list(spec.requirements),
                           "wheels": [list(w) for w in spec.wheels],
                           "no_index": spec.no_index, "interpreter": interpreter_id(),
                           "built_for": tid, "built_at": time.time()}, fh, indent=1)
            os.replace(os.path.join(env_dir, READY_FILE + ".tmp"),
                       os.path.join(env_dir, READY_FILE))
        except BaseException:
            shutil.rmtree(env_dir, ignore_errors=True)
            raise
        finally:
            shutil.rmtree(work, ignore_errors=True)
        log.info("topology %s: built Python environment %s in %.1f s", tid, env_dir,
                 time.monotonic() - t0)

    def _run(self, cmd: list[str], what: str, tid: str, deadline: float, cwd: str) -> None:
        """Run ``cmd`` (in a session of its own: pip --python starts a child), logging its
        output as it comes; EnvError with its last lines if it fails or outlives
        ``deadline``."""
        if self._stop.is_set():
            raise EnvError("the supervisor is stopping")
        env = dict(os.environ, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
        # cwd: a directory of our own, so no relative name pip reads finds anything else.
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, cwd=cwd, env=env,
                                start_new_session=True)
        build = _Build(proc)
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._kill, (build, True))
        timer.daemon = True
        try:
            with self._lock:
                self._builds.add(build)
            if self._stop.is_set():  # close() ran since the check above: it missed this one
                self._kill(build)
            timer.start()
            assert proc.stdout is not None
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip()[:1000]
                build.lines.append(line)
                if line.strip():
                    log.info("topology %s: %s: %s", tid, what.split()[0], line)
            code = proc.wait()
        finally:
            timer.cancel()
            if proc.poll() is None:  # reading failed: do not leave it running
                self._kill(build)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
            with self._lock:
                self._builds.discard(build)
        if build.timed_out:
            raise EnvError(f"{what} took longer than {self.timeout:g} s "
                           f"(supervisor.venv.build.timeout.secs): "
                           f"{pip_error_summary(build.lines)}")
        if self._stop.is_set():
            raise EnvError("the supervisor is stopping")
        if code != 0:
            raise EnvError(f"{what} failed (exit code {code}): {pip_error_summary(build.lines)}")

    @staticmethod
    def _kill(build: _Build, timed_out: bool = False) -> None:
        """SIGKILL the build's whole session (pip --python's child with it), unless it has
        been reaped (its pid may be another process's by then)."""
        if build.proc.poll() is not None:
            return
        build.timed_out = build.timed_out or timed_out
        try:
            os.killpg(build.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    # -- cleanup -------------------------------------------------------------------------
    def collect(self, topologies: Iterable[str]) -> None:
        """Forget the topologies not in ``topologies`` (those assigned or running here), mark
        the environments of those that are as used now, and (every GC_EVERY_SECS, while no
        build runs) delete the environments unused for ``supervisor.venv.cleanup.age.secs``."""
        keep = set(topologies)
        with self._lock:
            for tid in [t for t, s in self._states.items() if t not in keep and not s.pending]:
                del self._states[tid]
            in_use = {s.key for s in self._states.values() if s.key}
            busy = any(s.pending for s in self._states.values()) or bool(self._builds)
        for key in in_use:
            try:
                os.utime(os.path.join(self.dir, key, READY_FILE))
            except OSError:
                pass
        now = self.clock()
        if busy or now - self._last_gc < GC_EVERY_SECS or not os.path.isdir(self.dir):
            return
        self._last_gc = now
        stale = stale_envs(self._last_used(), in_use, time.time(), self.max_age)
        leftovers = self._leftovers(time.time())
        if stale or leftovers:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(BUILD_THREADS, thread_name_prefix="supervisor-venv")
            for key in stale:
                self._pool.submit(self._remove, key)
            for path in leftovers:
                self._pool.submit(shutil.rmtree, path, True)

    def _leftovers(self, now: float) -> list[str]:
        """What a supervisor killed mid-build or mid-delete left: a deletion's trash, and a
        build's work directory older than any build may run."""
        out = []
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            try:
                age = now - os.stat(path).st_mtime
            except OSError:
                continue
            if name.startswith(".trash-") or (
                    name.startswith(".build-") and age > self.timeout + GC_EVERY_SECS):
                out.append(path)
        return out

    def _last_used(self) -> dict[str, float]:
        """key -> when last used: the ready file's mtime; an unfinished one's directory's."""
        out = {}
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            if name.startswith(".") or name.endswith(".lock") or not os.path.isdir(path):
                continue
            try:
                out[name] = os.stat(os.path.join(path, READY_FILE)).st_mtime
            except OSError:
                try:
                    out[name] = os.stat(path).st_mtime
                except OSError:
                    continue
        return out

    def _remove(self, key: str) -> None:
        env_dir = os.path.join(self.dir, key)
        with self._key_lock(key), locked(env_dir + ".lock", self._stop, wait=False) as held:
            if not held:
                return  # being built or removed by another process
            with self._lock:
                if any(s.key == key for s in self._states.values()):
                    return  # a topology took it up since
            used = self._last_used().get(key)
            if used is None or not stale_envs({key: used}, (), time.time(), self.max_age):
                return  # gone, or used since (by another process sharing the directory)
            trash = os.path.join(self.dir, f".trash-{key}-{uuid.uuid4().hex[:8]}")
            try:
                os.rename(env_dir, trash)
            except OSError:
                return
            shutil.rmtree(trash, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.unlink(env_dir + ".lock")  # held: a waiter re-takes the new file
            log.info("removed Python environment %s: unused for more than %g s "
                     "(supervisor.venv.cleanup.age.secs)", env_dir, self.max_age)

    def close(self) -> None:
        """Stop: kill running builds (a killed one is rebuilt later), start no more."""
        self._stop.set()
        with self._lock:
            builds = list(self._builds)
        for b in builds:
            self._kill(b)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def _has_pip() -> bool:
    """Whether this interpreter has pip (its --python runs it for another one); found, not
    imported."""
    import importlib.util
    return importlib.util.find_spec("pip") is not None
