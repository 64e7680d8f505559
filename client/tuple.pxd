# Types for the compiled build of tuple.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): the tuple as a cdef class, so the collectors read its anchor ids
# and XOR its ack value as C struct members; a tuple of one tree keeps its root and edge
# ids there too (no dict per tracked tuple).


cimport cython


cdef class Fields:
    cdef public list names
    cdef public dict index


@cython.freelist(512)
cdef class Tuple:
    cdef public object values, source_component, source_stream, source_task, _ids, fields
    cdef public unsigned long long root, edge, ack_val
    cdef public bint acked


@cython.locals(t=Tuple)
cpdef Tuple new_tuple(object values, object source_component, object source_stream,
                      object source_task, object fields)
