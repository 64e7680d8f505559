"""Trident's batch identity and its system stream names.

Python version of Storm's ``TransactionAttempt`` (``org.apache.storm.trident.topology``):
a batch is a transaction id (txid, committed strictly in order, starting at
:data:`INIT_TXID`) plus an attempt id that grows each time the master coordinator
re-emits the txid after a failure, so a task that sees a higher attempt can drop
everything it kept for a lower one. The stream and component names are those of
Storm's ``MasterBatchCoordinator``, ``TridentBoltExecutor`` and
``TridentTopologyBuilder``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


#: The first txid a fresh topology processes (Storm's ``MasterBatchCoordinator.INIT_TXID``).
INIT_TXID = 1

#: Master coordinator -> spout coordinators (and they -> spout executors): start a batch.
BATCH_STREAM = "$batch"
#: Master coordinator -> committers: the batch was processed everywhere; commit it now.
COMMIT_STREAM = "$commit"
#: Master coordinator -> spout coordinators and executors: the txid committed; clean up.
SUCCESS_STREAM = "$success"
#: Prefix of the direct stream on which a batch executor tells each downstream task how
#: many tuples of a batch it sent it (``TridentBoltExecutor.COORD_STREAM_PREFIX``).
COORD_STREAM_PREFIX = "$coord-"
#: The field a Trident spout executor prepends to every tuple: the batch's attempt.
ID_FIELD = "$tx"
MASTER_COORD_PREFIX = "$mastercoord-"
SPOUT_COORD_PREFIX = "$spoutcoord-"


def coord_stream(batch_group: str) -> str:
    """The coordination stream of ``batch_group`` (``TridentBoltExecutor.coordStream``)."""
    return COORD_STREAM_PREFIX + batch_group


def master_coordinator(batch_group: str) -> str:
    """Component id of the master batch coordinator spout of ``batch_group``."""
    return MASTER_COORD_PREFIX + batch_group


def spout_coordinator(spout_id: str) -> str:
    """Component id of the coordinator bolt of Trident spout ``spout_id``."""
    return SPOUT_COORD_PREFIX + spout_id


@dataclass(frozen=True, order=True, slots=True)
class TransactionAttempt:
    """One attempt at processing a txid; orders by txid, then attempt id.

    It travels in tuples as a two-item list (msgpack and JSON friendly)::

        a = TransactionAttempt(7, 2)
        assert TransactionAttempt.from_list(a.to_list()) == a and str(a) == "7:2"
    """

    #: The batch's transaction id; txids commit strictly in increasing order.
    txid: int
    #: 0 for the first emission of the txid, +1 for each re-emission.
    attempt_id: int

    def __post_init__(self) -> None:
        for name in ("txid", "attempt_id"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"TransactionAttempt.{name} must be an int >= 0, got {v!r}")

    @property
    def id(self) -> int:
        """The batch id shared by every attempt (Storm's ``IBatchID.getId``)."""
        return self.txid

    def to_list(self) -> list[int]:
        """``[txid, attempt_id]``, the form tuples and msgpack carry."""
        return [self.txid, self.attempt_id]

    @classmethod
    def from_list(cls, value: Sequence[Any]) -> "TransactionAttempt":
        """Inverse of :meth:`to_list`; also accepts an attempt (decoded twice is harmless)."""
        if isinstance(value, TransactionAttempt):
            return value
        if len(value) != 2:
            raise ValueError(f"a transaction attempt is [txid, attempt_id], got {value!r}")
        return cls(int(value[0]), int(value[1]))

    def __str__(self) -> str:
        return f"{self.txid}:{self.attempt_id}"
