# Types for the compiled build of transfer.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): the outbound batches as a cdef class, so a remote emit appends to
# its peer's batch with C calls and counts on C integers.
cimport cython

cdef class Outbox:
    cdef public list groups
    cdef public dict index
    cdef public list last
    cdef public Py_ssize_t n

    @cython.locals(g=list, vals=list, tracked=list)
    cpdef Py_ssize_t add(self, object task, object src, object stream, object values,
                         object ids) except -1
    cpdef list take(self)


cdef class Transfer:
    cdef public object ws, codec, last_flush, peers_version
    cdef public dict task_worker, out, socks, blocked
    cdef public Py_ssize_t batch_size, buffered
    cdef public double flush_interval
    cdef public bint may_drop

    @cython.locals(box=Outbox, n="Py_ssize_t")
    cpdef remote(self, object task, object src, object stream, object values, object ids)
    cpdef _send(self, object w, list groups, Py_ssize_t n)
    cpdef _send_frame(self, object w, bytes frame)
