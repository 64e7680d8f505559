"""Helpers for tests that run a real LocalCluster (ZooKeeper, Nimbus, a supervisor, workers).

``from cluster_helpers import kill_and_wait, worker_heartbeats``.
"""

from __future__ import annotations

import glob
import json
import os

from zk_fixtures import poll_for


def worker_heartbeats(lc) -> list[dict]:
    """The heartbeat of every worker a LocalCluster's supervisor runs."""
    out = []
    for path in glob.glob(os.path.join(lc.base_dir, "workers", "*", "heartbeat.json")):
        try:
            with open(path) as fh:
                out.append(json.load(fh))
        except (OSError, ValueError):
            pass  # being rewritten, or its worker just went
    return out


def kill_and_wait(lc, name: str) -> None:
    """Kill topology ``name`` with no wait; return once its workers are gone."""
    with lc.client() as nimbus:
        nimbus.kill(name, wait_secs=0)
    poll_for(lambda: not lc.supervisor.procs, timeout=30, what=f"{name}'s workers stopped")
