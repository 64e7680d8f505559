"""Whether a worker still has a supervisor, and when to give up waiting for one.

Two modes, chosen by whoever launches the worker:

* **exit with parent** (``squall local``, the static harness; ``adopt_secs`` None): the
  launching process is gone once ``getppid()`` changes, and the worker exits at once.
* **adoptable** (the supervisor daemon; ``supervisor.worker.adopt.secs`` > 0): the worker
  follows the supervisor named in its ``supervisor.json`` (:class:`SupervisorMark`, pid and
  start time). When that process is gone (killed, or restarted by its service manager) the
  worker keeps running for ``adopt_secs`` and exits unless a restarted supervisor has
  written its own mark meanwhile, as Storm's workers outlive a supervisor restart. It must
  exit before Nimbus could move its tasks elsewhere: a worker nobody reports for would
  otherwise run them twice.

:meth:`SupervisorWatch.check` is called from the worker's main loop; it reads the mark
at most once a second.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable

from ..client.contract import SupervisorMark

log = logging.getLogger("squall.worker")


class SupervisorWatch:
    """Example (the worker's loop)::

        watch = SupervisorWatch(worker_dir, os.getppid(), adopt_secs=10.0)
        why = watch.check()       # None while it has a supervisor (or may wait for one)
        if why is not None:
            exit_because(why)
    """

    #: Seconds between two reads of ``supervisor.json``.
    period = 1.0

    def __init__(self, worker_dir: str, parent_pid: int, adopt_secs: float | None,
                 clock: Callable[[], float] = time.monotonic,
                 read_mark: Callable[[str], SupervisorMark | None] = SupervisorMark.read,
                 getppid: Callable[[], int] = os.getppid):
        self.worker_dir = worker_dir
        self.parent_pid = parent_pid
        self.adopt_secs = adopt_secs
        self._clock = clock
        self._read_mark = read_mark
        self._getppid = getppid
        self._next_look = 0.0
        #: The mark followed last (None before the first read), and since when it is gone.
        self.mark: SupervisorMark | None = None
        self.orphaned_at: float | None = None

    def check(self) -> str | None:
        """None while the worker may run on; else why it must exit."""
        if self.adopt_secs is None:
            if self._getppid() != self.parent_pid:
                return f"the process that launched it (pid {self.parent_pid}) is gone"
            return None
        now = self._clock()
        if now < self._next_look:
            return None
        self._next_look = now + self.period
        mark = self._read_mark(self.worker_dir)
        if mark is not None and mark.alive():
            if self.orphaned_at is not None:
                log.info("worker in %s: taken back by supervisor %s (pid %d) after %.1f s",
                         self.worker_dir, mark.supervisor_id, mark.pid, now - self.orphaned_at)
            self.mark, self.orphaned_at = mark, None
            return None
        if self.orphaned_at is None:
            self.orphaned_at = now
            who = f"pid {mark.pid}" if mark is not None else "none recorded"
            log.warning("worker in %s: its supervisor (%s) is gone; running on for %g s for a "
                        "restarted supervisor to take it back", self.worker_dir, who,
                        self.adopt_secs)
        if now - self.orphaned_at >= self.adopt_secs:
            return (f"its supervisor has been gone for {now - self.orphaned_at:.1f} s and none "
                    f"took it back (supervisor.worker.adopt.secs {self.adopt_secs:g})")
        return None
