"""A topology file's ``report(conf)``, run in a Python process of its own.

``squall local`` holds gRPC, kazoo and supervisor threads. A report that starts a
subprocess with Python code between fork and exec (PySpark launches its JVM with a
``preexec_fn``) can deadlock or die in the child of such a process ("Other threads are
currently calling into gRPC, skipping fork() handlers"; "Java gateway process exited before
sending its port number"). So the report runs in a fresh interpreter with no threads of
ours: ``python -m squall.deploy.report FILE CONF_JSON``, its output on our stdout and
stderr, while the local daemons (Redis, ZooKeeper) are still up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any, Mapping

from ..client.errors import SquallError
from .topology_file import import_file, user_error


def run_report(path: str, conf: Mapping[str, Any], timeout: float | None = None) -> None:
    """Call ``report(conf)`` of topology file ``path`` in a child process; SquallError (one
    line) when it fails."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="squall-report-") as fh:
        json.dump(dict(conf), fh)
        fh.flush()
        try:
            proc = subprocess.run([sys.executable, "-m", "squall.deploy.report", path, fh.name],
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SquallError(f"report() of {path} did not finish within {timeout:g} s") from None
    if proc.returncode != 0:
        raise SquallError(f"report() of {path} failed (exit code {proc.returncode}; its "
                          "error is printed above)")


def main(argv: list[str] | None = None) -> int:
    path, conf_path = argv if argv is not None else sys.argv[1:]
    with open(conf_path) as fh:
        conf = json.load(fh)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
