# Types for the compiled build of queue.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): an executor's receive queue as a cdef class, so a local delivery
# is one C call that appends to the deque and reads the water mark as a C integer.

cdef class SleepFlag:
    cdef public bint on


cdef class Version:
    cdef public Py_ssize_t n


cdef class InQueue:
    cdef public object dq, _append, bp, waker, on_congested, _lock
    cdef public SleepFlag flag
    cdef public Py_ssize_t high, low, max_len, pins
    cdef public bint congested

    cpdef put(self, object item)
    cpdef _over(self)
    cpdef drain_done(self)
