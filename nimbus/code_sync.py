"""A follower Nimbus keeps every live topology's files (Storm's blob-store sync).

Packages live on the leader's disk. :class:`CodeSync` runs one loop in a
follower: on each change of ``/storms`` (a watch) and every
``nimbus.code.sync.freq.secs`` it copies the files of new topologies from the
leader over gRPC and drops those of removed ones, so a follower that takes
over can schedule and serve every topology.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from ..client import config as cfg

log = logging.getLogger("squall.nimbus")


class CodeSync:
    """``follows()`` says whether to act now (not leading, ZooKeeper connected);
    ``leader()`` gives the leader's host:port."""

    def __init__(self, nimbus: Any, follows: Callable[[], bool], leader: Callable[[], str | None]):
        self.nimbus = nimbus
        self.follows, self.leader = follows, leader
        self.period = float(nimbus.conf.get(cfg.NIMBUS_CODE_SYNC_FREQ_SECS) or 120)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        #: One callable, so ZooKeeper keeps one pending watch however often a round re-reads.
        self._on_storms_change = lambda event: self._wake.set()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="squall-nimbus-sync",
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.clear()
            if self.follows():
                try:
                    self.sync()
                except Exception as e:  # noqa: BLE001 - the leader may be away; retry later
                    log.warning("Nimbus %s: cannot sync topology files from the leader: %s",
                                self.nimbus.address, e)
                    self._wake.wait(1.0)  # sooner than the period: we are behind
                    continue
            self._wake.wait(self.period)

    def sync(self) -> None:
        """One round: fetch missing topologies from the leader, remove gone ones."""
        from ..client.nimbus_client import NimbusClient
        store = self.nimbus.package_store
        wanted = set(self.nimbus.cluster_state.storm_ids(watch=self._on_storms_change))
        have = set(store.topology_ids())
        for tid in have - wanted:
            log.info("Nimbus %s: removing files of topology %s (gone)", self.nimbus.address, tid)
            store.remove(tid)
        missing = sorted(wanted - have)
        leader = self.leader()
        if not missing or leader is None or leader == self.nimbus.address:
            return
        with NimbusClient(self.nimbus.conf, timeout=60.0, address=leader) as client:
            for tid in missing:
                store.install(tid, client.download(tid),
                              client.user_topology(tid).SerializeToString(deterministic=True),
                              client.topology_conf(tid, include_secrets=True))
                log.info("Nimbus %s: copied topology %s from the leader %s",
                         self.nimbus.address, tid, leader)
