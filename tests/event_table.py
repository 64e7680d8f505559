"""One way to test a pure state machine: feed it a table of events and compare what it answers.

Every event-table test (the acker ledger, the restart policy, the topology lifecycle, Trident's
coordinator and batch tracker, the Spark batcher) plays its rows through :func:`play`::

    play(machine.handle, [
        (Add(1, ...), []),
        (Tick(now=2.0), [RunBatch(...)]),
    ], after=lambda row: machine.validate_state())

A row is ``(event, expected, *extra)``: ``feed(event)`` must equal ``expected``; then
``after(row_index, *extra)`` runs (invariants, or a check of what the extra columns say).
A failure names the row, the event, what came back and what was expected.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence


def play(feed: Callable[[Any], Any], table: Iterable[Sequence[Any]],
         after: Callable[..., Any] | None = None) -> None:
    """Feed each row's event; assert the answer; then ``after(i, *extra columns)``."""
    for i, (event, expected, *extra) in enumerate(table):
        got = feed(event)
        assert got == expected, f"row {i}: {event} -> {got!r}, expected {expected!r}"
        if after is not None:
            after(i, *extra)


def calls(obj: Any) -> Callable[[Sequence[Any]], Any]:
    """A ``feed`` for machines driven by method calls: the event ``("ack", root, value)``
    calls ``obj.ack(root, value)``."""
    return lambda event: getattr(obj, event[0])(*event[1:])
