"""The acker: Storm's ``__acker`` system bolt tracking tuple trees by XOR.

:mod:`.ledger` holds the pure state machine and :mod:`.compact_map` the time-bucketed
map it keeps pending trees in; :mod:`.pending_map` is the spout's side (root -> message
id); both follow :mod:`.rotating_map`'s reference semantics. The worker runs the ledger
as the ``__acker`` bolt's tasks (see :mod:`squall.worker.executor`).
"""

from .ledger import AckerLedger, TimeoutReset, TreeAcked, TreeFailed
from .compact_map import CompactRotatingMap
from .pending_map import PendingMap
from .rotating_map import RotatingMap

__all__ = ["AckerLedger", "CompactRotatingMap", "PendingMap", "RotatingMap", "TimeoutReset",
           "TreeAcked", "TreeFailed"]
