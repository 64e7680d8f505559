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
every worker; set ``spark.ui.enabled: true`` to have it back).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Mapping

log = logging.getLogger("squall.spark")

DEFAULTS: dict[str, str] = {
    "spark.master": "local[*]",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}

_lock = threading.Lock()
_session: Any = None
_users = 0


def spark_conf(conf: Mapping[str, Any]) -> dict[str, str]:
    """The ``spark.*`` keys of ``conf`` over :data:`DEFAULTS`, as Spark's string values."""
    out = dict(DEFAULTS)
    for key, value in conf.items():
        if isinstance(key, str) and key.startswith("spark."):
            out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def acquire() -> None:
    """A bridge task of this process was prepared (no JVM yet)."""
    global _users
    with _lock:
        _users += 1


def get(conf: Mapping[str, Any], app_name: str) -> Any:
    """This process's SparkSession, started now if it is the first call (seconds: a JVM)."""
    global _session
    with _lock:
        if _session is not None:
            return _session
        from pyspark.sql import SparkSession  # pyspark only where a bridge runs

        settings = spark_conf(conf)
        builder = SparkSession.builder.appName(app_name)
        for key, value in settings.items():
            builder = builder.config(key, value)
        started = time.monotonic()
        log.info("app=%s starting SparkSession (master %s)", app_name, settings["spark.master"])
        _session = builder.getOrCreate()
        log.info("app=%s SparkSession started in %.1f s (Spark %s)", app_name,
                 time.monotonic() - started, _session.version)
        return _session


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
