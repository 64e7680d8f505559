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


class Settled(Collector):
    def __init__(self):
        super().__init__()
        self.acked, self.failed = [], []

    def ack(self, tup):
        self.acked.append(tup)

    def fail(self, tup):
        self.failed.append(tup)


def test_a_bad_tuple_is_failed_unless_a_failure_rewinds_every_spout():
    out = Settled()
    Reports(out, every=0).bad_tuple("t1", "mapping", "t1 does not map")
    Reports(out, every=0, drop_bad=True).bad_tuple("t2", "mapping", "t2 does not map")
    assert out.failed == ["t1"] and out.acked == ["t2"]
    assert out.errors[0] == "t1 does not map; it was failed"
    assert out.errors[1].startswith("t2 does not map; it was dropped (under barrier")


def test_failures_rewind_only_in_a_barrier_checkpointed_bolt():
    from squall.client.stateful import CHECKPOINT_STREAM_ID, failures_rewind

    class Context:
        def __init__(self, streams):
            self.streams = streams

        def this_sources(self):
            return [("up", s) for s in self.streams]

    checkpointed = Context(["default", CHECKPOINT_STREAM_ID])
    barrier = {"topology.state.checkpoint.mode": "barrier"}
    assert failures_rewind(barrier, checkpointed)
    assert failures_rewind({"topology.state.checkpoint.mode": "barrier-at-least-once"},
                           checkpointed)
    assert not failures_rewind({"topology.state.checkpoint.mode": "acker"}, checkpointed)
    assert not failures_rewind({}, checkpointed)
    assert not failures_rewind(barrier, Context(["default"]))  # no checkpointing reaches it
