# Types for the compiled build of compact_map.py (Cython's augmenting .pxd): the same source,
# with the tables as cdef classes over typed memoryviews of their array columns and the probe
# loops on C integers. The .py stays the reference and what SQUALL_PURE_PYTHON=1 runs.
cimport cython

cdef unsigned long long _EMPTY, _TOMB


cdef class OpenTable:
    cdef public unsigned long long[::1] keys
    cdef public Py_ssize_t mask, live, filled, limit

    cpdef _init_keys(self, Py_ssize_t cap)

    @cython.locals(mask="unsigned long long", i="Py_ssize_t", k="unsigned long long")
    cpdef Py_ssize_t find(self, unsigned long long key)

    @cython.locals(mask="unsigned long long", i="Py_ssize_t")
    cpdef Py_ssize_t _claim(self, unsigned long long key) except -1

    @cython.locals(mask="Py_ssize_t")
    cpdef delete(self, Py_ssize_t i)

    cpdef _resize(self)


cdef class Bucket(OpenTable):
    cdef public unsigned long long[::1] vals
    cdef public unsigned int[::1] meta

    @cython.locals(keys="unsigned long long[::1]", vals="unsigned long long[::1]",
                   meta="unsigned int[::1]", i="Py_ssize_t")
    cpdef _resize(self)

    @cython.locals(i="Py_ssize_t")
    cpdef Py_ssize_t insert(self, unsigned long long key, unsigned long long val,
                            unsigned int meta) except -1


cdef class CompactRotatingMap:
    cdef public object buckets
    cdef public dict _odd
