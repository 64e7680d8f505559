# Types for the compiled build of grouping.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): the routers an emit calls per tuple as cdef classes, so a choice
# reads its counters and lists as C struct members (a spout's load-aware shuffle made six
# generic attribute lookups a tuple), and a collector holding a typed router calls
# ``choose`` through the C vtable.


cdef class ShuffleRouter:
    cdef public list targets
    cdef public Py_ssize_t n, i

    cpdef list choose(self, object values)


cdef class LoadMapping:
    cdef public dict loads
    cdef public Py_ssize_t version


cdef class LoadAwareShuffleRouter(ShuffleRouter):
    cdef public LoadMapping load
    cdef public object rng
    cdef public Py_ssize_t seen
    cdef public list ring

    cpdef list choose(self, object values)


cdef class FieldsRouter:
    cdef public list targets, indices
    cdef public Py_ssize_t n
    cdef public object single, lists
    cdef public dict _packed

    cpdef list choose(self, object values)
