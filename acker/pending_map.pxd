# Types for the compiled build of pending_map.py (Cython's augmenting .pxd; see
# compact_map.pxd): the columns as typed memoryviews, the probes on C integers.
cimport cython
from squall.acker.compact_map cimport OpenTable

cdef bint _COMPILED

# pending_map.py's _wire_key in C: PyLong_AsUnsignedLongLong instead of the comparisons.
cdef extern from *:
    """
    static CYTHON_UNUSED unsigned long long sq_table_key(PyObject *o) {
        unsigned long long v;
        if (!PyLong_CheckExact(o)) return 0;
        v = PyLong_AsUnsignedLongLong(o);
        if (v == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return 0; }
        return v;
    }
    """
    unsigned long long _table_key "sq_table_key" (object o)

cpdef unsigned long long _wire_key(object key)


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

    @cython.locals(b=PendingBucket)
    cpdef add(self, object key, object msg_id, double t0)

    @cython.locals(b=PendingBucket, i="Py_ssize_t", j="Py_ssize_t", k="unsigned long long")
    cpdef object pop(self, object key, object default=*)

    @cython.locals(k="unsigned long long")
    cpdef object get(self, object key, object default=*)
