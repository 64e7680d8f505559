"""Bookkeeping shared by the pure state machines: allowed transitions and recent history.

A machine keeps its allowed ``(from, to)`` pairs in a table and changes state
only through :meth:`History.check`, which records the transition or raises
:class:`InvalidTransition` carrying the machine's recent transitions (for the
bug report). Used by Trident's coordinator and batch tracker, the Spark
bridge's batcher, and Nimbus's topology lifecycle (for its refusals).
"""

from __future__ import annotations

from collections import deque
from typing import Any, Hashable, Iterable

from .errors import SquallError


class InvalidTransition(SquallError):
    """A state machine was asked for a transition its table does not allow.

    ``key`` names what changed (a txid, a topology id, or ``"coordinator"``),
    ``from_state`` the state it was in, ``to_state`` the state (or the event) asked for,
    ``history`` the machine's most recent transitions as ``(stimulus_id, key, from, to)``,
    oldest first. A machine that refuses a person's request (Nimbus's topology lifecycle)
    passes the ``message`` that says what to do instead; the gRPC edge maps this error to
    FAILED_PRECONDITION.
    """

    def __init__(self, key: Hashable, from_state: Any, to_state: Any, stimulus_id: str,
                 history: Iterable[tuple], message: str | None = None):
        self.key = key
        self.from_state = from_state
        self.to_state = to_state
        self.stimulus_id = stimulus_id
        self.history = list(history)
        if message is None:
            recent = "; ".join(f"{s}: {k} {a}->{b}" for s, k, a, b in self.history[-5:])
            message = (f"{key}: no transition {_name(from_state)} -> {_name(to_state)} "
                       f"(stimulus {stimulus_id!r}; recent: {recent or 'none'})")
        super().__init__(message)


def _name(state: Any) -> str:
    return getattr(state, "name", None) or str(state)


class History:
    """The last ``maxlen`` transitions of a machine, for logs and :class:`InvalidTransition`."""

    def __init__(self, maxlen: int = 100):
        #: ``(stimulus_id, key, from_state, to_state)``, oldest first.
        self.entries: deque[tuple] = deque(maxlen=maxlen)

    def record(self, stimulus_id: str, key: Hashable, from_state: Any, to_state: Any) -> None:
        self.entries.append((stimulus_id, key, _name(from_state), _name(to_state)))

    def check(self, table: Any, stimulus_id: str, key: Hashable, from_state: Any,
              to_state: Any) -> None:
        """Record the transition if ``(from_state, to_state)`` is in ``table``, else raise."""
        if (from_state, to_state) not in table:
            raise InvalidTransition(key, from_state, to_state, stimulus_id, self.entries)
        self.record(stimulus_id, key, from_state, to_state)
