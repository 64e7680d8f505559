# Types for the compiled build of ledger.py (Cython's augmenting .pxd; see compact_map.pxd):
# the XOR and the flags on C integers, the buckets as the typed tables of compact_map.
cimport cython
from squall.acker.compact_map cimport Bucket, CompactRotatingMap

cdef bint _COMPILED
cdef unsigned int _TASK_MASK, _FAILED

cdef extern from "Python.h":
    unsigned long long _mask64 "PyLong_AsUnsignedLongLongMask" (object) except? <unsigned long long>-1

cpdef unsigned long long _u64(object val) except? <unsigned long long>-1

cpdef object _instruction(object root, long long code)

cpdef long long _code(object r) except? -2

@cython.locals(out=dict, roots=list)
cpdef bint _settled(long long code, object root, dict acked, dict failed) except -1


cdef class AckerLedger:
    cdef public CompactRotatingMap pending

    cpdef object init(self, object root, object val, object spout_task)

    cpdef object ack(self, object root, object val)

    @cython.locals(b=Bucket, i="Py_ssize_t", v="unsigned long long", m="unsigned int",
                   task="unsigned int", j="Py_ssize_t")
    cpdef long long _init1(self, unsigned long long root, unsigned long long uval,
                           long long spout_task) except? -2

    @cython.locals(b=Bucket, i="Py_ssize_t", v="unsigned long long", m="unsigned int",
                   task_plus_1="unsigned int", j="Py_ssize_t")
    cpdef long long _ack1(self, unsigned long long root, unsigned long long uval) except? -2

    @cython.locals(i="Py_ssize_t", code="long long", n="Py_ssize_t",
                   n_failed="Py_ssize_t")
    cpdef tuple init_all(self, object flat, dict acked, dict failed)

    @cython.locals(i="Py_ssize_t", code="long long", n="Py_ssize_t",
                   n_failed="Py_ssize_t")
    cpdef tuple ack_all(self, object flat, dict acked, dict failed)
