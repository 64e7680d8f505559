"""A topology file's ``report(conf)``, run in a Python process of its own.

``squall local`` holds gRPC, kazoo and supervisor threads. A report that starts a
subprocess with Python code between fork and exec (PySpark launches its JVM with a
``preexec_fn``) can deadlock or die in the child of such a process ("Other threads are
currently calling into gRPC, skipping fork() handlers"; "Java gateway process exited before
sending its port number"). So the report runs in a fresh interpreter with no threads of
ours: ``python -m squall.deploy.report FILE CONF_JSON``, its output on our stdout and
stderr, while the local daemons (Redis, ZooKeeper) are still up.

A JVM the report starts (PySpark's) writes its banner and log lines to the same stderr;
given a log path they go there instead (:func:`quiet_jvm_lines`), so the console shows
the report and its errors only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from typing import Any, Mapping

from ..client.errors import SquallError
from ..client.stderr_pump import pump_stderr
from .topology_file import import_file, user_error


def run_report(path: str, conf: Mapping[str, Any], timeout: float | None = None,
               jvm_log: str | None = None) -> None:
    """Call ``report(conf)`` of topology file ``path`` in a child process; SquallError (one
    line) when it fails. ``jvm_log``: where JVM chatter on stderr goes."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="squall-report-") as fh:
        json.dump(dict(conf), fh)
        fh.flush()
        try:
            proc = subprocess.run([sys.executable, "-m", "squall.deploy.report", path, fh.name,
                                   *([jvm_log] if jvm_log else [])], timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SquallError(f"report() of {path} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        jvm = f"; JVM output in {jvm_log}" if jvm_log else ""
        raise SquallError(f"report() of {path} failed (exit code {proc.returncode}; its "
                          f"error is printed above{jvm})")


#: What a JVM (Spark's, log4j's, the launcher's) writes to stderr on its own.
JVM_LINE = re.compile(r"^(WARNING: Using incubator modules|Using Spark's default log4j|"
                      r"Setting default log level|To adjust logging level|"
                      r"\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR) |"
                      r"\s+at [\w$.<>]+\(|\[Stage \d+)")


class _JvmFilter:
    """Splits what reaches stderr into lines: JVM lines to the log, the rest to the real
    stderr (a copy of fd 2 taken before the pipe replaced it)."""

    def __init__(self, log_path: str):
        self.real = os.fdopen(os.dup(2), "wb", buffering=0)
        self.log = open(log_path, "ab", buffering=0)
        self.partial = b""

    def __call__(self, data: bytes) -> None:
        *lines, self.partial = (self.partial + data).split(b"\n")
        for line in lines:
            self._route(line + b"\n")

    def _route(self, line: bytes) -> None:
        jvm = JVM_LINE.match(line.decode("utf-8", "replace"))
        (self.log if jvm else self.real).write(line)

    def close(self) -> None:
        if self.partial:
            self._route(self.partial)
        self.log.close()
        self.real.close()


def quiet_jvm_lines(log_path: str):
    """From now on, this process's stderr (fd 2, which child JVMs inherit) passes through a
    filter: JVM lines go to ``log_path``, the rest to the real stderr. Returns ``finish()``,
    which lets the filter drain (a JVM still running keeps the pipe open: bounded)."""
    f = _JvmFilter(log_path)
    return pump_stderr(f, done=f.close, name="squall-report-stderr", drain_secs=2.0)


def main(argv: list[str] | None = None) -> int:
    path, conf_path, *jvm_log = argv if argv is not None else sys.argv[1:]
    with open(conf_path) as fh:
        conf = json.load(fh)
    finish = quiet_jvm_lines(jvm_log[0]) if jvm_log else None
    try:
        module = import_file(path)
        report = getattr(module, "report", None)
        if not callable(report):
            raise SquallError(f"{path} defines no report(conf) function")
        try:
            report(conf)
        except Exception as exc:  # the user's code: one line naming where
            raise user_error(os.path.abspath(path), exc, "running report(conf)") from None
    except SquallError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    finally:
        sys.stdout.flush()
        if finish is not None:
            finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
