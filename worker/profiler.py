"""A worker profiling itself (``squall profile``, the UI's buttons; Storm's jstack, heap dump
and profiler) and logging sampled tuples (``squall debug``; Storm's event logger).

Everything here uses the interpreter's own means, so nothing is installed or attached from
outside: ``sys._current_frames`` for thread dumps and for a sampling profiler of our own
(a thread reading every thread's stack every :data:`SAMPLE_SECS`, drawn as a flame graph by
:mod:`.flamegraph`), :mod:`tracemalloc` for memory. :class:`Profiler` runs the requests the
supervisor copies into the worker directory (client/profiling.py), each on a thread of its
own, and writes the results, owner-only, into the worker's log directory for the logviewer;
:class:`EventLog` is the events log the executors sample into.
"""

from __future__ import annotations

import linecache
import logging
import math
import os
import sys
import threading
import time
import traceback
import tracemalloc
from collections import Counter
from typing import Any, Callable, Mapping

from ..client import profiling as prof
from . import flamegraph

log = logging.getLogger("squall.worker.profiler")

#: The sampling profiler: seconds between two looks at every thread's stack ...
SAMPLE_SECS = 0.01
#: ... the innermost frames kept of a deeper stack, and distinct stacks kept (more are
#: counted as one "[more distinct stacks than kept]" per thread).
MAX_DEPTH = 200
MAX_STACKS = 20_000
#: Places listed in a memory snapshot.
TOP_ALLOCATIONS = 40
#: tracemalloc slows every allocation: a tracing the profiler started stops this long after
#: the last memory request (the next one starts it again).
TRACE_IDLE_SECS = 120.0
_MIB = 1024 * 1024


def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + f".{int(t * 1000) % 1000:03d}Z"


def _short(path: str) -> str:
    """A code file as the last two parts of its path (``examples/word_count.py``)."""
    if path.startswith("<"):
        return path
    head, tail = os.path.split(path)
    return os.path.join(os.path.basename(head), tail) if head else tail


def frame_label(code: Any) -> str:
    """``SplitSentence.execute (examples/word_count.py:61)``: the function where it is
    defined."""
    name = getattr(code, "co_qualname", code.co_name)
    return f"{name} ({_short(code.co_filename)}:{code.co_firstlineno})"


def thread_names() -> dict[int, str]:
    return {t.ident: t.name for t in threading.enumerate() if t.ident is not None}


# --- thread dump (Storm's jstack) -----------------------------------------------------------
def thread_dump(title: str = "", extra: list[str] | None = None) -> str:
    """Every Python thread's stack, most recent call last, by name (the main thread
    first); ``extra`` lines (the worker's executors) after them."""
    frames = sys._current_frames()
    threads = {t.ident: t for t in threading.enumerate()}

    def order(item: tuple[int, Any]) -> tuple[int, str]:
        t = threads.get(item[0])
        return (0 if t is threading.main_thread() else 1, t.name if t else "")
    out = [title] if title else []
    out += [f"{len(frames)} threads at {_iso(time.time())} (pid {os.getpid()})", ""]
    for ident, frame in sorted(frames.items(), key=order):
        t = threads.get(ident)
        if t is None:
            out.append(f'"(no threading.Thread)" ident={ident}')
        else:
            out.append(f'"{t.name}" ident={ident} native_id={t.native_id} '
                       f'daemon={t.daemon}')
        out += ["  " + line for line in
                "".join(traceback.format_stack(frame)).rstrip("\n").split("\n")]
        out.append("")
    del frames
    if extra:
        out += extra + [""]
    return "\n".join(out)


# --- sampling CPU profiler ------------------------------------------------------------------
class Sampler:
    """Counts the stacks of every thread (but its own), seen every ``interval`` seconds:
    ``stacks`` maps ``("thread NAME", outermost frame, ..., innermost)`` to samples."""

    def __init__(self, interval: float = SAMPLE_SECS, max_depth: int = MAX_DEPTH,
                 max_stacks: int = MAX_STACKS):
        self.interval, self.max_depth, self.max_stacks = interval, max_depth, max_stacks
        self.stacks: Counter[tuple[str, ...]] = Counter()
        self.samples = 0
        self.started = self.ended = 0.0
        self._labels: dict[Any, str] = {}

    def _label(self, code: Any) -> str:
        label = self._labels.get(code)
        if label is None:
            label = self._labels[code] = frame_label(code)
        return label

    def sample(self, skip: int | None = None, names: Mapping[int, str] | None = None) -> None:
        """One look at every thread but ``skip``."""
        names = thread_names() if names is None else names
        for ident, frame in sys._current_frames().items():
            if ident == skip:
                continue
            stack = []
            f = frame
            while f is not None and len(stack) < self.max_depth:
                stack.append(self._label(f.f_code))
                f = f.f_back
            if f is not None:
                stack.append("[outer frames left out]")
            stack.append(f"thread {names.get(ident, ident)}")
            key = tuple(reversed(stack))
            if key not in self.stacks and len(self.stacks) >= self.max_stacks:
                key = (key[0], "[more distinct stacks than kept]")
            self.stacks[key] += 1
        self.samples += 1

    def run(self, secs: float, stop: threading.Event | None = None) -> None:
        """Sample for ``secs`` seconds or until ``stop`` is set, on the calling thread."""
        stop = stop or threading.Event()
        me = threading.get_ident()
        self.started = time.time()
        t0 = time.monotonic()
        deadline, due = t0 + secs, t0
        names, names_at = thread_names(), t0
        while not stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                break
            if now - names_at >= 1.0:  # threads come and go (a spout moved to a thread)
                names, names_at = thread_names(), now
            self.sample(me, names)
            # Behind (the GIL was busy): wait half a period rather than sample in a burst.
            due = max(due + self.interval, time.monotonic() + self.interval / 2)
            stop.wait(max(0.0, due - time.monotonic()))
        self.ended = time.time()


# --- memory (tracemalloc) ------------------------------------------------------------------
_FILTERS = (tracemalloc.Filter(False, tracemalloc.__file__),
            tracemalloc.Filter(False, linecache.__file__),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
            tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
            tracemalloc.Filter(False, "<unknown>"))


def _kib(n: float) -> str:
    return f"{n / 1024:,.1f} KiB"


def memory_report(snapshot: tracemalloc.Snapshot, header: list[str],
                  previous: Mapping[tuple[str, int], tuple[int, int]] | None = None,
                  top: int = TOP_ALLOCATIONS) -> tuple[str, dict[tuple[str, int], tuple[int, int]]]:
    """The snapshot's top places by size (and by file, and the growth since ``previous``)
    as text; and this snapshot's sizes by place, the ``previous`` of the next report
    (a few numbers per place instead of every trace)."""
    stats = snapshot.filter_traces(_FILTERS).statistics("lineno")
    sizes = {(s.traceback[0].filename, s.traceback[0].lineno): (s.size, s.count)
             for s in stats}
    total = sum(s.size for s in stats)
    out = list(header) + ["", f"Traced and alive: {total / _MIB:,.1f} MiB in "
                              f"{sum(s.count for s in stats):,} blocks, at {len(stats):,} "
                              "places.", "", f"Top {min(top, len(stats))} places by size:"]
    for i, s in enumerate(stats[:top], 1):
        fr = s.traceback[0]
        out.append(f"{i:4}. {_kib(s.size):>14} {s.count:>11,} blocks  "
                   f"{fr.filename}:{fr.lineno}")
        src = linecache.getline(fr.filename, fr.lineno).strip()
        if src:
            out.append(f"        {src[:160]}")
    by_file: Counter[str] = Counter()
    for (filename, _), (size, _) in sizes.items():
        by_file[filename] += size
    out += ["", "By file:"]
    out += [f"  {_kib(size):>14}  {name}" for name, size in by_file.most_common(20)]
    if previous is not None:
        grown = sorted(((size - previous.get(k, (0, 0))[0], count - previous.get(k, (0, 0))[1], k)
                        for k, (size, count) in sizes.items()), reverse=True)
        out += ["", "Grown most since the previous snapshot:"]
        out += [f"  {d / 1024:+14,.1f} KiB {c:+11,} blocks  {k[0]}:{k[1]}"
                for d, c, k in grown[:20] if d > 0] or ["  (nothing grew)"]
    return "\n".join(out) + "\n", sizes


def _rss() -> int:
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _secs(r: Mapping[str, Any]) -> float:
    """A request's seconds, within the bounds Nimbus applies (1..MAX_SECS)."""
    try:
        secs = float(r.get("secs") or prof.DEFAULT_SECS)
    except (TypeError, ValueError):
        secs = prof.DEFAULT_SECS
    return min(max(secs, 1.0), float(prof.MAX_SECS)) if math.isfinite(secs) \
        else prof.DEFAULT_SECS


# --- the worker's profiler ------------------------------------------------------------------
class Profiler:
    """Runs the profiler requests of one worker (followed through its worker directory) and
    writes their files into ``log_dir`` as ``<topology id>-<port>.<kind>-...``.

    At most one CPU profile and one memory snapshot at a time (a second request of a kind
    that is running is logged and skipped); a request is run once (its id is remembered,
    and found in the names of files written before a restart).
    """

    def __init__(self, worker_dir: str, log_dir: str, topology_id: str, port: int,
                 worker_id: str, extra: Callable[[], list[str]] | None = None):
        self.worker_dir, self.log_dir = worker_dir, log_dir
        self.topology_id, self.port, self.worker_id = topology_id, port, worker_id
        self.prefix = prof.worker_prefix(topology_id, port)
        #: Lines about the worker's executors for a thread dump.
        self.extra = extra
        self.done: set[str] = set()
        for _, name in self._artifacts():
            m = prof.WORKER_ARTIFACT.match(name)
            if m is not None and m.group("rid"):
                self.done.add(m.group("rid"))
        self._mtime = 0.0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._cpu_stop: threading.Event | None = None
        self._memory_busy = False
        #: Whether this profiler started tracemalloc, when, and the last snapshot's sizes.
        self._tracing_since: float | None = None
        self._last_memory = 0.0
        self._previous: dict | None = None
        self._previous_at = 0.0

    # -- following the requests (the worker's main thread) --
    def poll(self, now: float | None = None) -> None:
        """Start the requests not run yet; stop an idle tracemalloc."""
        now = time.time() if now is None else now
        try:
            mtime = os.stat(os.path.join(self.worker_dir, prof.PROFILER_FILE)).st_mtime
        except OSError:
            mtime = 0.0
        if mtime != self._mtime:
            self._mtime = mtime
            for r in prof.live_requests(prof.read_requests(self.worker_dir), now):
                if r["id"] not in self.done:
                    self.done.add(r["id"])
                    self._start(r)
        with self._lock:
            idle = self._tracing_since is not None and not self._memory_busy and \
                time.monotonic() - self._last_memory > TRACE_IDLE_SECS
            if idle:
                tracemalloc.stop()
                self._tracing_since, self._previous = None, None
        if idle:
            log.info("profiler: worker %s: tracemalloc stopped (no memory request for %d s)",
                     self.worker_id, TRACE_IDLE_SECS)

    def _start(self, r: dict) -> None:
        action = r["action"]
        with self._lock:
            if action == "stop":
                if self._cpu_stop is not None:
                    self._cpu_stop.set()
                    log.info("profiler: worker %s: CPU profile stopped (request %s)",
                             self.worker_id, r["id"])
                else:
                    log.info("profiler: worker %s: no CPU profile to stop (request %s)",
                             self.worker_id, r["id"])
                return
            if action == "cpu" and self._cpu_stop is not None or \
                    action == "memory" and self._memory_busy:
                log.warning("profiler: worker %s: a %s request runs already; request %s "
                            "skipped", self.worker_id, action, r["id"])
                return
            if action == "cpu":
                self._cpu_stop = threading.Event()
            elif action == "memory":
                self._memory_busy = True
        job = {"threads": self._threads, "memory": self._memory, "cpu": self._cpu}[action]
        threading.Thread(target=self._run, args=(job, r), name=f"squall-profiler-{action}",
                         daemon=True).start()

    def _run(self, job: Callable[[dict], None], r: dict) -> None:
        try:
            job(r)
        except Exception:  # noqa: BLE001 - a failed dump must not end the worker
            log.exception("profiler: worker %s: %s request %s failed", self.worker_id,
                          r["action"], r["id"])
        finally:
            with self._lock:
                if r["action"] == "cpu":
                    self._cpu_stop = None
                elif r["action"] == "memory":
                    self._memory_busy = False

    def close(self) -> None:
        """End a running profile or memory wait (the worker is stopping)."""
        self._closing.set()
        with self._lock:
            if self._cpu_stop is not None:
                self._cpu_stop.set()

    # -- the jobs (threads of their own) --
    def _title(self, what: str) -> str:
        return (f"{what} of worker {self.worker_id} of topology {self.topology_id} "
                f"(pid {os.getpid()})")

    def _threads(self, r: dict) -> None:
        text = thread_dump(self._title("Thread dump"), self.extra() if self.extra else None)
        self._write(r, "threads", "txt", text)

    def _memory(self, r: dict) -> None:
        secs = _secs(r)
        with self._lock:
            started = not tracemalloc.is_tracing()
            if started:
                tracemalloc.start(1)  # one frame a trace: the cheapest tracing there is
                self._tracing_since, self._previous = time.time(), None
        if started:
            log.info("profiler: worker %s: tracemalloc started; snapshot in %g s",
                     self.worker_id, secs)
            self._closing.wait(secs)
        snap = tracemalloc.take_snapshot()
        now = time.time()
        current, peak = tracemalloc.get_traced_memory()
        since = self._tracing_since or now
        header = [self._title("Memory snapshot"), f"taken {_iso(now)}", ""]
        if started:
            header.append(f"tracemalloc was started by this request, {now - since:.1f} s "
                          "before this snapshot: it covers only the memory allocated since "
                          "then and still alive. What was allocated before is not counted.")
        elif self._tracing_since is not None:
            header.append(f"tracemalloc has traced since {_iso(since)} ({now - since:,.0f} s): "
                          "this covers the memory allocated since then and still alive.")
        else:  # started by the topology itself (PYTHONTRACEMALLOC, its own code)
            header.append("tracemalloc was already tracing (started by the topology): this "
                          "covers what it traced.")
        header.append(f"The next memory request within {TRACE_IDLE_SECS:.0f} s takes its "
                      "snapshot at once and shows what grew since this one; then tracing "
                      "stops (it slows every allocation).")
        header += ["", f"RSS {_rss() / _MIB:,.1f} MiB; traced now {current / _MIB:,.1f} MiB, "
                       f"peak {peak / _MIB:,.1f} MiB; tracemalloc's own "
                       f"{tracemalloc.get_tracemalloc_memory() / _MIB:,.1f} MiB"]
        if self._previous is not None:
            header.append(f"previous snapshot: {_iso(self._previous_at)}")
        text, sizes = memory_report(snap, header, self._previous)
        del snap
        with self._lock:
            if self._tracing_since is not None:
                self._previous, self._previous_at = sizes, now
            self._last_memory = time.monotonic()
        self._write(r, "memory", "txt", text)

    def _cpu(self, r: dict) -> None:
        stop = self._cpu_stop or threading.Event()
        sampler = Sampler()
        sampler.run(_secs(r), stop)
        took = sampler.ended - sampler.started
        subtitle = (f"{sampler.samples:,} samples every {SAMPLE_SECS * 1000:g} ms over "
                    f"{took:.1f} s from {_iso(sampler.started)}; wall clock of every Python "
                    "thread (a thread waiting counts too: look at the executors' towers)")
        self._write(r, "cpu", "collapsed", flamegraph.collapsed(sampler.stacks))
        self._write(r, "cpu", "svg", flamegraph.render(
            sampler.stacks, self._title("CPU profile"), subtitle))

    # -- files --
    def _artifacts(self) -> list[tuple[float, str]]:
        """(mtime, name) of this worker's dump files in the log directory."""
        out = []
        try:
            names = os.listdir(self.log_dir)
        except OSError:
            return out
        for name in names:
            if not name.startswith(self.prefix):
                continue
            m = prof.WORKER_ARTIFACT.match(name)
            if m is None or not m.group("kind"):
                continue
            try:
                out.append((os.lstat(os.path.join(self.log_dir, name)).st_mtime, name))
            except OSError:
                continue
        return out

    def _write(self, r: dict, kind: str, ext: str, text: str) -> str:
        """Write a dump owner-only (under a temporary name first: the logviewer never lists
        half a file), then drop this worker's oldest beyond MAX_DUMPS_PER_WORKER."""
        stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
        name = prof.dump_name(self.topology_id, self.port, kind, stamp, r["id"], ext)
        path = os.path.join(self.log_dir, name)
        tmp = os.path.join(self.log_dir, f".{name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
            fh.write(text)
        os.replace(tmp, path)
        log.info("profiler: worker %s: %s written to %s (%d bytes)", self.worker_id, kind,
                 path, len(text))
        old = sorted(self._artifacts())
        for _, victim in old[:max(0, len(old) - prof.MAX_DUMPS_PER_WORKER)]:
            try:
                os.unlink(os.path.join(self.log_dir, victim))
            except OSError:
                pass
        return path


# --- the events log (Storm's event logger) --------------------------------------------------
#: Events are buffered and written by the worker's main loop (every round, 0.2 s), or at once
#: when this much is waiting.
FLUSH_BYTES = 256 * 1024


class EventLog:
    """``<topology id>-<port>.events.log``: the sampled emits of the worker's executors, one
    JSON line each (client/profiling.py ``format_event``); rotates past ``max_bytes``
    keeping one older file. Thread-safe: executors on any thread log into it."""

    def __init__(self, path: str, max_bytes: int = prof.EVENTS_MAX_BYTES):
        self.path, self.max_bytes = path, max_bytes
        self._lock = threading.Lock()
        self._buf: list[str] = []
        self._pending = 0
        self._fd: int | None = None
        self._size = 0
        #: Bytes a write failed to store (a full disk): dropped, never retried.
        self.dropped = 0

    def log(self, component: str, task: int, stream: str, msg_id: Any, values: Any) -> None:
        line = prof.format_event(time.time(), component, task, stream, msg_id, values)
        with self._lock:
            self._buf.append(line)
            self._pending += len(line)
            if self._pending >= FLUSH_BYTES:
                self._flush()

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def _flush(self) -> None:
        if not self._buf:
            return
        data = "".join(self._buf).encode("utf-8", "replace")
        self._buf.clear()
        self._pending = 0
        try:
            if self._fd is None:
                self._open()
            elif self._size + len(data) > self.max_bytes:
                os.close(self._fd)
                self._fd = None
                os.replace(self.path, self.path + ".1")
                self._open()
            os.write(self._fd, data)  # type: ignore[arg-type]
            self._size += len(data)
        except OSError:
            self.dropped += len(data)

    def _open(self) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW,
                           0o600)
        self._size = os.fstat(self._fd).st_size

    def close(self) -> None:
        with self._lock:
            self._flush()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
