# Types for the compiled build of stats.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): a task's counters as C integers, so the collectors and the
# executor count a tuple with a struct member's increment, not an attribute lookup.

from squall.client.histogram cimport Histogram


cdef class TaskStats:
    cdef public object component, metrics
    cdef public Histogram complete, execute
    cdef public dict routes
    cdef public Py_ssize_t executed, acked, failed, timed_out, pending
    cdef public double busy_secs

    cpdef add_latency(self, double ms)
