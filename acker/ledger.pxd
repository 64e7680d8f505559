# Types for the compiled build of ledger.py (Cython's augmenting .pxd; see compact_map.pxd):
# the XOR and the flags on C integers, the buckets as the typed tables of compact_map.
cimport cython
from squall.acker.compact_map cimport Bucket, CompactRotatingMap


cdef unsigned int _TASK_MASK, _FAILED


cdef class AckerLedger:
    cdef public CompactRotatingMap pending

    cpdef object init(self, object root, object val, object spout_task)

    cpdef object ack(self, object root, object val)

    @cython.locals(b=Bucket, i="Py_ssize_t", v="unsigned long long", m="unsigned int",
                   uval="unsigned long long", task="long long")
    cpdef long long _init(self, object root, object val, object spout_task) except? -1

    @cython.locals(b=Bucket, i="Py_ssize_t", v="unsigned long long", m="unsigned int",
                   uval="unsigned long long", task_plus_1="long long")
    cpdef long long _ack(self, object root, object val) except? -1

    @cython.locals(i="Py_ssize_t", step="Py_ssize_t", code="long long", n_acked="Py_ssize_t",
                   n_failed="Py_ssize_t", roots=list)
    cpdef tuple settle_all(self, object flat, bint inits, dict acked, dict failed)

    @cython.locals(i="Py_ssize_t", out=list)
    cpdef list init_all(self, object flat)

    @cython.locals(i="Py_ssize_t", out=list)
    cpdef list ack_all(self, object flat)
