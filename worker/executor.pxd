# Types for the compiled build of executor.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): the executors as cdef classes, so the loop's round (run_once:
# step, produce, end_batch, idle_timeout) calls C functions and reads C struct members
# instead of looking names up in instance dicts, which at a quarter of the max rate was
# most of a round's cost. ``__dict__`` keeps every other attribute settable, as before
# (the setup-time ones, the component's own); those written each round are declared here,
# so the dict, and the checks of cpdef methods against overrides in it, stay unchanged.

from squall.worker.collector cimport StepAcks
from squall.worker.queue cimport InQueue


cdef class Executor:
    cdef dict __dict__
    cdef public double calling, due, stall_secs, timeout_secs, sample_pct
    cdef public object phase, ws, component_id, conf, events, transfer, waker, thread
    cdef public object stopped, calls, name
    cdef public list tasks, collectors, pending_fails, pending_resets, pending_inits, timers
    cdef public InQueue queue
    cdef public StepAcks pending_acks
    cdef public bint log_all, debug, acking, threaded, rescued, multi, stop_requested
    cdef public bint timeouts

    cpdef Py_ssize_t step(self) except -1
    cpdef Py_ssize_t produce(self) except -1
    cpdef double idle_timeout(self) except -1.0
    cpdef Py_ssize_t _run_calls(self) except -1
    cpdef Py_ssize_t run_once(self) except -1
    cpdef double next_due(self)
    cpdef fire_timers(self, double now)
    cpdef end_batch(self)


cdef class BoltExecutor(Executor):
    cdef public dict bolts, executes
    cdef public object execute_batch, system_streams

    cpdef Py_ssize_t step(self) except -1


cdef class SpoutExecutor(Executor):
    cdef public list spouts, immediate_acks, backlog_queues
    cdef public dict by_task
    cdef public bint opened, activated, wants_thread
    cdef public Py_ssize_t empty_streak, slow_calls
    cdef public double held_until, master_until, wait_max, wait_first, dry_until, held_since

    cpdef Py_ssize_t produce(self) except -1
    cpdef double idle_timeout(self) except -1.0
    cpdef end_batch(self)


cdef class AckerExecutor(Executor):
    cdef public dict ledgers, out_acks, out_fails, out_resets

    cpdef end_batch(self)
    cpdef double idle_timeout(self) except -1.0


cdef class TopologyMasterRunner(Executor):
    pass
