"""Topologies of tests/integration/test_cross_host.py, submitted with ``squall jar`` from a
package dir holding this module and ``topos.py`` (the components workers import).

``squall jar PKG cross_host_topos marker NAME``: :class:`MarkerSpout` (1 task) ->
RecordingBolt (2 tasks, shuffle) in 2 workers; each tuple is a string with
:data:`MARKER_PREFIX`, to look for in packet captures. ``-c test.marker.key=K`` makes the
strings ``SQUALLPLAINTEXT-K-<n>``; the key alone is in the topology conf (which crosses the
wire to ZooKeeper unencrypted), the prefix only in this code, so the marker can only reach
the wire inside tuples.

``squall jar PKG cross_host_topos numbered NAME``: PacedSpout (msg ids 0..N-1, failures
replayed) -> RecordingBolt in 2 workers, the reliable topology of the partition tests.
"""

from __future__ import annotations

import time

from squall.client import Spout, TopologyBuilder
from squall.client.submitter import submit_topology
from topos import PacedSpout, RecordingBolt

#: Found in a capture only if tuple payloads cross the wire in the clear.
MARKER_PREFIX = "SQUALLPLAINTEXT"


class MarkerSpout(Spout):
    """Emits ``["SQUALLPLAINTEXT-<key>-<n>"]`` (msg id n), ``test.spout.rate`` per second,
    forever."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.text = f"{MARKER_PREFIX}-{conf['test.marker.key']}-"
        self.interval = 1.0 / float(conf.get("test.spout.rate", 200))
        self.due = time.monotonic()
        self.n = 0

    def next_tuple(self):
        if time.monotonic() < self.due:
            return
        self.due += self.interval
        self.collector.emit([f"{self.text}{self.n}"], msg_id=self.n)
        self.n += 1

    def declare_output_fields(self, declarer):
        declarer.declare(["text"])


def main(args):
    kind, name = args
    b = TopologyBuilder()
    if kind == "marker":
        b.set_spout("marker", MarkerSpout(), 1)
        b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("marker")
    elif kind == "numbered":
        b.set_spout("numbers", PacedSpout(), 2)
        b.set_bolt("sink", RecordingBolt(), 2).shuffle_grouping("numbers")
    else:
        raise SystemExit(f"unknown topology kind {kind!r}")
    submit_topology(name, {"topology.workers": 2}, b)
