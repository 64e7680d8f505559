"""supervisor/local_files.py: a package that cannot be fetched or extracted is tried again
on a growing delay, not every round for ever; worker logs of topologies gone from the host
are removed once older than logviewer.cleanup.age.mins."""

from __future__ import annotations

import os
import time

from squall.client.contract import TOPOLOGY_FILE
from squall.supervisor import local_files as lf


def test_a_failing_fetch_backs_off_and_a_good_one_clears_it(tmp_path):
    now = [1000.0]
    calls = []

    def fetch(tid, dest):
        calls.append(now[0])
        if len(calls) < 4:
            raise ValueError("resources/ would extract past 1073741824 bytes (a zip bomb?)")
        with open(os.path.join(dest, TOPOLOGY_FILE), "wb") as fh:
            fh.write(b"x")

    told = []
    files = lf.LocalFiles(str(tmp_path), fetch, clock=lambda: now[0],
                          on_fetch_failed=lambda *a: told.append(a))
    assert files.ensure_topology("t-1") is None
    count, due, why = files.fetch_failures["t-1"]
    assert count == 1 and due == 1000.0 + lf.FETCH_RETRY_SECS and "zip bomb" in why
    for _ in range(5):  # every supervisor round until the delay passed: no fetch
        now[0] += 1
        assert files.ensure_topology("t-1") is None
    assert len(calls) == 1 and [(t, n) for t, n, _ in told] == [("t-1", 1)]  # told once a try
    now[0] = due
    assert files.ensure_topology("t-1") is None  # second failure: twice the delay
    assert files.fetch_failures["t-1"][1] == due + 2 * lf.FETCH_RETRY_SECS
    now[0] += 2 * lf.FETCH_RETRY_SECS
    files.ensure_topology("t-1")
    assert files.fetch_failures["t-1"][0] == 3
    now[0] += 4 * lf.FETCH_RETRY_SECS
    assert files.ensure_topology("t-1") == files.topology_dir("t-1")
    assert "t-1" not in files.fetch_failures and len(calls) == 4
    # The delay stops growing at the maximum.
    files.fetch_failures["t-2"] = (20, 0.0, "x")
    files.fetch_topology = lambda tid, dest: (_ for _ in ()).throw(OSError("down"))
    files.ensure_topology("t-2")
    assert files.fetch_failures["t-2"][1] == now[0] + lf.FETCH_RETRY_MAX_SECS


def test_worker_logs_of_topologies_gone_are_removed_once_old(tmp_path):
    files = lf.LocalFiles(str(tmp_path), None)
    old = time.time() - 3600
    names = ["gone-1-1-6700.log", "gone-1-1-6700.log.1", "fresh-2-1-6700.log",
             "running-3-1-6701.log", "nimbus.log", "supervisor.log"]
    for n in names:
        path = os.path.join(files.logs_dir, n)
        with open(path, "w") as fh:
            fh.write("x")
        if n != "fresh-2-1-6700.log":
            os.utime(path, (old, old))
    files.clean([], ["running-3-1"], log_max_age_secs=600)
    assert sorted(os.listdir(files.logs_dir)) == sorted(
        ["fresh-2-1-6700.log", "running-3-1-6701.log", "nimbus.log", "supervisor.log"])
