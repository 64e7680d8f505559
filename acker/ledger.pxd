# Types for the compiled build of ledger.py (Cython's augmenting .pxd; see compact_map.pxd):
# the XOR and the flags on C integers, the buckets as the typed tables of compact_map.
cimport cython
from squall.acker.compact_map cimport Bucket, CompactRotatingMap


cdef unsigned int _TASK_MASK, _FAILED


cdef class AckerLedger:
    cdef public CompactRotatingMap pending

    @cython.locals(b=Bucket, i="Py_ssize_t", v="unsigned long long", m="unsigned int",
                   uval="unsigned long long", task="unsigned int")
    cpdef object init(self, object root, object val, object spout_task)

    @cython.locals(b=Bucket, i="Py_ssize_t", v="unsigned long long", m="unsigned int",
                   uval="unsigned long long", task_plus_1="unsigned int")
    cpdef object ack(self, object root, object val)

    @cython.locals(i="Py_ssize_t", out=list)
    cpdef list init_all(self, object flat)

    @cython.locals(i="Py_ssize_t", out=list)
    cpdef list ack_all(self, object flat)
