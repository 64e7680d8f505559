# Types for the compiled build of pending_map.py (Cython's augmenting .pxd; see
# compact_map.pxd): the columns as typed memoryviews, the probes on C integers.
cimport cython
from squall.acker.compact_map cimport OpenTable


cdef class PendingBucket(OpenTable):
    cdef public long long[::1] ids
    cdef public double[::1] times
    cdef public list objs

    @cython.locals(i="Py_ssize_t")
    cpdef insert(self, unsigned long long key, object msg_id, double t0)

    cpdef tuple entry(self, Py_ssize_t i)

    cpdef delete(self, Py_ssize_t i)

    @cython.locals(keys="unsigned long long[::1]", ids="long long[::1]", times="double[::1]",
                   objs=list, i="Py_ssize_t")
    cpdef _resize(self)


cdef class PendingMap:
    cdef public object buckets
    cdef public dict _odd
    cdef public object expired

    cpdef add(self, object key, object msg_id, double t0)

    @cython.locals(b=PendingBucket, i="Py_ssize_t")
    cpdef object pop(self, object key, object default=*)
