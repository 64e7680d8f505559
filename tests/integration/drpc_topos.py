"""Bolts for the DRPC integration tests (tests/integration/test_drpc.py). Workers import
this module by name (``drpc_topos``), so it must stay importable from its own directory."""

from __future__ import annotations

from squall.client import BasicBolt, FailedException


class FailOn(BasicBolt):
    """Fails the request whose argument is ``bad``; exclaims the others."""

    def __init__(self, bad: str):
        self.bad = bad

    def execute(self, tup, collector):
        if tup.values[1] == self.bad:
            raise FailedException(f"refusing {self.bad!r}")
        collector.emit([tup.values[0], tup.values[1] + "!"])

    def declare_output_fields(self, declarer):
        declarer.declare(["id", "result"])
