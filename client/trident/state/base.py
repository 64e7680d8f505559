"""The interfaces every Trident state implements, and the state package's errors.

Storm's ``org.apache.storm.trident.state``: :class:`State` (``beginCommit`` /
``commit`` around each batch), :class:`StateFactory` (``makeState``, called in
the worker for each partition of the state) and :class:`StateType`. A factory
travels pickled inside the topology, so it holds only plain settings and opens
connections in :meth:`StateFactory.make_state`, in the worker.
"""

from __future__ import annotations

import abc
import enum
from typing import Any, Mapping

from ...errors import SquallError


class StateType(enum.Enum):
    """How a state stays correct when Trident replays a batch (Storm's ``StateType``)."""

    #: Counts twice on a replay; no txid is stored.
    NON_TRANSACTIONAL = "non-transactional"
    #: Stores the txid; a replayed batch (same txid, same tuples) is skipped.
    TRANSACTIONAL = "transactional"
    #: Stores txid, value and previous value; a replayed txid is recomputed from the previous value.
    OPAQUE = "opaque"


class State(abc.ABC):
    """A partition of Trident state, bracketed per batch by :meth:`begin_commit` / :meth:`commit`.

    Not thread-safe: one executor owns each partition.
    """

    @abc.abstractmethod
    def begin_commit(self, txid: int | None) -> None:
        """A batch with this txid is about to update the state."""

    @abc.abstractmethod
    def commit(self, txid: int | None) -> None:
        """The batch's updates are done (Storm calls it once per txid, in txid order)."""

    def close(self) -> None:
        """Release connections; the default holds none."""


class StateFactory(abc.ABC):
    """Builds one :class:`State` per partition in the worker; must pickle (it ships in the topology)."""

    @abc.abstractmethod
    def make_state(self, conf: Mapping[str, Any], partition_index: int, num_partitions: int) -> State:
        """The state for partition ``partition_index`` of ``num_partitions``, connected lazily here."""


# --- errors --------------------------------------------------------------------------

class StateError(SquallError):
    """A Trident state could not be read or written; ``state`` names it when known."""

    def __init__(self, message: str, state: str | None = None):
        self.state = state
        super().__init__(message)


class BatchBehindState(StateError):
    """A batch's txid is older than the txid stored with a value: the state moved past it.

    Storm raises a ``RuntimeException("Current batch (..) is behind state's batch")``;
    it means two topologies (or a reset spout) write the same state.
    """

    def __init__(self, txid: int, stored_txid: int, key: Any = None, state: str | None = None):
        self.txid = txid
        self.stored_txid = stored_txid
        self.key = key
        super().__init__(f"batch txid {txid} is behind the state's txid {stored_txid}"
                         + (f" for key {key!r}" if key is not None else ""), state)


#: What to check when Redis cannot be reached.
REDIS_START_HINT = ("is it running? (start one with `python -m squall.deploy.redis`, "
                    "or set trident.redis.host / trident.redis.port)")


class RedisUnavailable(StateError):
    """Redis cannot be reached, or cannot be started here; ``address`` is what was tried."""

    def __init__(self, address: str | None, message: str):
        self.address = address
        super().__init__(message)
