"""The acker: Storm's ``__acker`` system bolt tracking tuple trees by XOR.

:mod:`.ledger` holds the pure state machine, :mod:`.rotating_map` the
time-bucketed map it keeps pending trees in; the worker runs the ledger as the
``__acker`` bolt's tasks (see :mod:`squall.worker.executor`).
"""

from .ledger import AckerLedger, TimeoutReset, TreeAcked, TreeFailed
from .compact_map import CompactRotatingMap
from .rotating_map import RotatingMap

__all__ = ["AckerLedger", "CompactRotatingMap", "RotatingMap", "TimeoutReset", "TreeAcked", "TreeFailed"]
