"""One SparkSession per worker process, started by the first batch that needs it.

Bridge tasks (the bolt's and the Trident state's) register with :func:`acquire` when
they are prepared and :func:`release` when cleaned up; nothing starts a JVM until a
task asks for :func:`get` with a non-empty batch, so a worker hosting no bridge task,
or one whose bridge never saw a tuple, never starts one. The last release stops the
session (and with it the local JVM, which PySpark also ends when this process dies).

The session's conf is every ``spark.*`` key of the topology conf over :data:`DEFAULTS`:
``spark.master`` defaults to ``local[*]``; set it (``spark://host:7077``, ``yarn``,
``k8s://...``) and the same topology feeds a Spark cluster. Spark's own progress bar
is off (worker output is a log) and so is its UI (it costs memory and start-up time in
every worker; set ``spark.ui.enabled: true`` to have it back). Two defaults size Spark for
batches of thousands of rows, not a cluster's tables: a batch's DataFrame is scanned from
its Arrow record batches (never a LocalRelation shipped in every task), and a local master
shuffles into one partition per task thread, not 200. A topology's own key wins over each.
On a local master a batch's DataFrame also has one partition per 100k rows at most (see
:func:`dataframe`).

Spark that cannot be used is :class:`SparkUnavailable`, which the bridge lets out of its
component, so the worker stops as when a component raises (the error in the topology's
errors, ``squall local`` ending with it, a supervisor starting the worker again): a
``spark://`` master that no TCP connection reaches is found in seconds by
:func:`check_master` (Spark itself would retry registering for 60 s and then stop the
context); a session that fails to start, or whose SparkContext stops as it starts (a port
that takes connections but is no Spark master: after Spark's 60 s), is one too. A context
that stops later (its master went away) is replaced by a new session at the next batch,
which checks the master again.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
from typing import Any, Mapping

from ..errors import SquallError

log = logging.getLogger("squall.spark")

#: Seconds a TCP connection to a ``spark://`` master may take before it counts as
#: unreachable (a master on a reachable host answers in milliseconds).
CONNECT_TIMEOUT_SECS = 5.0
#: Spark standalone's default master port.
DEFAULT_MASTER_PORT = 7077


class SparkUnavailable(SquallError):
    """Spark cannot be used from this worker: its ``spark.master`` is unreachable, or the
    SparkSession failed to start or its context stopped as it started. ``master`` is the
    URL."""

    def __init__(self, message: str, master: str = ""):
        super().__init__(message)
        self.master = master


def master_addresses(master: str) -> list[tuple[str, int]]:
    """The (host, port) pairs of a ``spark://`` master URL (``spark://h1:7077,h2:7077`` for
    standby masters); [] for other masters (``local[*]``, ``yarn``, ``k8s://...``)."""
    if not master.startswith("spark://"):
        return []
    out = []
    for part in master[len("spark://"):].split(","):
        part = part.strip().rstrip("/")
        if not part:
            continue
        host, sep, port = part.rpartition(":")
        if not sep or not port.isdigit():
            host, port = part, str(DEFAULT_MASTER_PORT)
        out.append((host.strip("[]"), int(port)))
    return out


def check_master(master: str, timeout: float = CONNECT_TIMEOUT_SECS) -> None:
    """Raise :class:`SparkUnavailable` naming ``master`` when it is a ``spark://`` URL and
    none of its hosts takes a TCP connection within ``timeout`` seconds."""
    addresses = master_addresses(master)
    if master.startswith("spark://") and not addresses:
        raise SparkUnavailable(f"spark.master {master!r} names no host: give "
                               "spark://HOST:PORT", master)
    why = []
    for host, port in addresses:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            return
        except OSError as e:
            reason = "timed out" if isinstance(e, TimeoutError) else \
                (e.strerror or str(e) or type(e).__name__).lower()
            why.append(f"{host}:{port}: {reason}")
    if why:
        raise SparkUnavailable(
            f"the Spark master {master} is unreachable ({'; '.join(why)}): check "
            f"spark.master, that the master runs (its log says 'Starting Spark master at "
            f"spark://...') and that this host reaches it", master)


def master_of(conf: Mapping[str, Any]) -> str:
    """The ``spark.master`` the session of ``conf`` uses."""
    return spark_conf(conf)["spark.master"]

DEFAULTS: dict[str, str] = {
    "spark.master": "local[*]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    # A batch's DataFrame stays Arrow record batches that tasks scan. Below this many bytes
    # (48 MiB by default) Spark 4 makes it a LocalRelation instead: rows decoded on the
    # driver and shipped inside every task of every job over the batch (100k rows:
    # createDataFrame 0.12 -> 0.015 s, a count 0.26 -> 0.16 s on a 2-core host).
    "spark.sql.execution.arrow.localRelationThreshold": "0",
}

#: Spark's local masters (SparkContext's LOCAL_N_REGEX and LOCAL_N_FAILURES_REGEX).
_LOCAL = re.compile(r"local(?:\[(\*|\d+)(?:\s*,\s*\d+)?\])?")


def available_processors() -> int:
    """The CPUs this process may use, as the JVM's ``availableProcessors`` counts them: its
    affinity, and a cgroup v2 CPU quota (``cpu.max``) below that."""
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max") as fh:
            quota, period = fh.read().split()[:2]
        if quota != "max":
            n = min(n, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        pass  # no cgroup v2 quota
    return max(1, n)


def local_threads(master: str) -> int | None:
    """The task threads of a ``local``, ``local[N]``, ``local[N,F]`` or ``local[*]`` master
    (``*``: :func:`available_processors`); None for a cluster."""
    m = _LOCAL.fullmatch(master.strip())
    if m is None:
        return None
    n = m.group(1)
    if n is None:
        return 1
    return available_processors() if n == "*" else max(1, int(n))

_lock = threading.Lock()
_session: Any = None
_users = 0


def spark_conf(conf: Mapping[str, Any]) -> dict[str, str]:
    """The ``spark.*`` keys of ``conf`` over :data:`DEFAULTS` (and, for a local master,
    ``spark.sql.shuffle.partitions`` = its task threads), as Spark's string values."""
    out = dict(DEFAULTS)
    for key, value in conf.items():
        if isinstance(key, str) and key.startswith("spark."):
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    threads = local_threads(out["spark.master"])
    if threads is not None and "spark.sql.shuffle.partitions" not in out:
        # Spark's 200 is sized for a cluster's data: a local master shuffling a batch
        # wrote 200 buckets per map task (100k rows: the grouped job 0.53 -> 0.43 s at
        # 2). One partition per task thread, as Spark sizes spark.default.parallelism
        # for a local master.
        out["spark.sql.shuffle.partitions"] = str(threads)
    return out


#: On a local master, a batch's DataFrame has a partition per this many rows (or part of
#: them), at most one per task thread.
ROWS_PER_PARTITION = 100_000


def partitions(rows: int, threads: int | None) -> int | None:
    """How many partitions a batch of ``rows`` rows gets on a master of ``threads`` task
    threads (:func:`local_threads`): on a local one, one per :data:`ROWS_PER_PARTITION`
    rows, at most one per thread; None on a cluster (as Spark cuts it)."""
    if threads is None:
        return None
    return max(1, min(threads, -(-rows // ROWS_PER_PARTITION)))


def dataframe(spark: Any, table: Any, threads: int | None) -> Any:
    """A batch's DataFrame from its ``pyarrow.Table``, in :func:`partitions` partitions
    (``threads``: :func:`local_threads` of the master, found once per task, not per batch).

    Spark cuts an Arrow table into partitions of
    ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows (10,000), and each task costs
    the JVM tens of ms of CPU whatever its rows: a grouped count of 100k rows on 2 threads
    took 0.47 s of the JVM's CPU as 10 tasks a stage, 0.28 as 2 and 0.23 as 1 (and 1 was
    the fastest by the clock too, 0.14 s against 0.16, with both cores free). A ``fn`` with
    heavy per-row work can spread it with ``df.repartition(n)``."""
    df = spark.createDataFrame(table)
    n = partitions(table.num_rows, threads)
    return df if n is None else df.coalesce(n)


def acquire() -> None:
    """A bridge task of this process was prepared (no JVM yet)."""
    global _users
    with _lock:
        _users += 1


def get(conf: Mapping[str, Any], app_name: str) -> Any:
    """This process's SparkSession, started now if it is the first call (seconds: a JVM),
    or if the context of the one before stopped. Raises :class:`SparkUnavailable` when it
    cannot start."""
    global _session
    with _lock:
        if _session is not None:
            if not stopped(_session):
                return _session
            old, _session = _session, None
            log.warning("app=%s the SparkContext stopped (its master or executors went away?); "
                        "starting a new SparkSession", app_name)
            try:
                old.stop()  # clears pyspark's active context, so a new one can start
            except Exception:  # noqa: BLE001 - it is gone already
                pass
        from pyspark.sql import SparkSession  # pyspark only where a bridge runs

        settings = spark_conf(conf)
        master = settings["spark.master"]
        check_master(master)
        builder = SparkSession.builder.appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        started = time.monotonic()
        log.info("app=%s starting SparkSession (master %s)", app_name, master)
        try:
            session = builder.getOrCreate()
        except Exception as e:
            if "stopped SparkContext" in str(e):  # pyspark's own calls on the dead context
                raise SparkUnavailable(_stopped_at_start(master, time.monotonic() - started),
                                       master) from e
            raise SparkUnavailable(f"the SparkSession (master {master}) could not start: "
                                   f"{_short(e)}", master) from e
        took = time.monotonic() - started
        if stopped(session):
            try:
                session.stop()
            except Exception:  # noqa: BLE001
                pass
            raise SparkUnavailable(_stopped_at_start(master, took), master)
        _session = session
        log.info("app=%s SparkSession started in %.1f s (Spark %s, master %s)", app_name, took,
                 session.version, master)
        return session


def _stopped_at_start(master: str, took: float) -> str:
    return (f"the SparkContext (master {master}) stopped as it started, after {took:.0f} s: "
            "the master did not take the application (does a Spark master of pyspark's "
            "version listen there? Spark gives up registering after 60 s: 'All masters are "
            "unresponsive'); Spark's reason is in the worker log")


def stopped(session: Any) -> bool:
    """Whether the session's SparkContext is stopped (or its JVM gone)."""
    try:
        return bool(session.sparkContext._jsc.sc().isStopped())
    except Exception:  # noqa: BLE001 - no gateway: as good as stopped
        return True


def _short(e: BaseException) -> str:
    """An error in one bounded line: its first line and, for a Py4J error (whose first line
    only names the call), the Java exception's line."""
    lines = [ln.strip() for ln in f"{type(e).__name__}: {e}".strip().splitlines()]
    cause = next((ln.lstrip(": ") for ln in lines[1:] if not ln.startswith("at ") and
                  ("Exception" in ln or "Error" in ln)), "")
    return (lines[0] + (f" ({cause})" if cause else ""))[:500]


def release() -> None:
    """A bridge task was cleaned up; the last one stops the session, if one was started."""
    global _session, _users
    with _lock:
        _users = max(0, _users - 1)
        if _users or _session is None:
            return
        session, _session = _session, None
    started = time.monotonic()
    try:
        session.stop()
    except Exception:  # stopping is best effort: the JVM dies with this process anyway
        log.exception("stopping the SparkSession failed")
        return
    log.info("SparkSession stopped in %.1f s", time.monotonic() - started)


def running() -> bool:
    """Whether this process has started a session (tests, logs)."""
    return _session is not None
