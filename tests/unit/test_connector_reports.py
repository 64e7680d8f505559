"""connectors/reports.py: a connector's errors reach the worker at most once a second per
kind, the ones in between counted into the next report."""

from __future__ import annotations

from squall.connectors import reports as reports_mod
from squall.connectors.reports import Reports


class Collector:
    def __init__(self):
        self.errors = []

    def report_error(self, text):
        self.errors.append(text)


def test_one_report_a_second_per_kind_with_the_count_of_the_rest(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(reports_mod.time, "monotonic", lambda: clock[0])
    out = Collector()
    r = Reports(out)
    # (at, kind, text, skipped, reported?)
    table = [(100.0, "down", "a", 0, True),
             (100.5, "down", "b", 0, False),
             (100.6, "bad", "c", 0, True),       # another kind: its own clock
             (100.9, "down", "d", 2, False),     # the caller passed over 2 more
             (101.0, "down", "e", 0, True)]
    for at, kind, text, skipped, reported in table:
        clock[0] = at
        assert r.error(kind, text, skipped) is reported, (at, kind)
    assert out.errors == ["a", "c", "e (4 more since the last report)"]
