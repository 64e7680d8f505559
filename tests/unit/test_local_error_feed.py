"""squall local's error feed (deploy/local.py ErrorFeed): each error once, on one line."""

import time
from types import SimpleNamespace

from squall.deploy.local import ERROR_HOLD_SECS, ErrorFeed


def error(text, age, task=5):
    return SimpleNamespace(component="crasher", task=task, time_secs=time.time() - age,
                           error=text, host="127.0.0.1", port=6700)


def test_a_young_error_waits_so_a_crash_line_can_claim_it():
    """A worker whose user code raised reports the error, then exits: its exit's one line
    (what raised, where) came after the report's, and said it twice."""
    said = []
    feed = ErrorFeed(said.append)
    boom = error("builtins.RuntimeError: boom on tuple 7", age=0.5)
    feed.show([boom], hold=ERROR_HOLD_SECS)
    assert said == [] and feed.count == 0
    feed.shown.add("RuntimeError: boom on tuple 7")  # the crash line's (user_crash's) text
    feed.show([boom])  # the end of the run: nothing held back
    assert said == [] and feed.count == 1  # counted, not repeated


def test_an_error_no_crash_claims_shows_once_it_is_old_enough_and_only_once():
    said = []
    feed = ErrorFeed(said.append)
    young = error("ValueError: bad number 50\nTraceback ...", age=0.1)
    feed.show([young], hold=ERROR_HOLD_SECS)
    assert said == []
    young.time_secs -= ERROR_HOLD_SECS  # time passes
    feed.show([young], hold=ERROR_HOLD_SECS)
    feed.show([young], hold=ERROR_HOLD_SECS)
    assert len(said) == 1 and "ValueError: bad number 50 (+1 line(s) in its worker log)" in \
        said[0]
