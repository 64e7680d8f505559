"""What the supervisor's unit tests share: a topology id, the host, a settable clock, a fetcher
writing a topology's files, and an assignment written as Nimbus would.

``from supervisor_fixtures import HOST, T, Clock, assign, fetch``.
"""

from __future__ import annotations

import json
import os

T = "wc-1-1700000000"
HOST = "127.0.0.1"


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def fetch(tid, dest):
    with open(os.path.join(dest, "topology.pb"), "wb") as fh:
        fh.write(b"not read by fakes")
    with open(os.path.join(dest, "conf.json"), "w") as fh:
        json.dump({"topology.workers": 3, "test.key": tid}, fh)


def assign(nimbus, sup_id, tid=T, status="active", workers=None):
    workers = workers or {f"{HOST}:6700": [1, 2], f"{HOST}:6701": [3], "10.0.0.9:6700": [4, 5]}
    slots = {w: (sup_id if w.startswith(HOST) else "other-sup") for w in workers}
    nimbus.set_storm(tid, {"name": "wc", "status": status})
    nimbus.set_assignment(tid, {"topology_id": tid, "workers": workers, "slots": slots,
                                "executors": [], "start_times": {}, "version": 1})
