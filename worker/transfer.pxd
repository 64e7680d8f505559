# Types for the compiled build of transfer.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): the outbound batches as a cdef class, so a remote emit appends to
# its peer's batch with C calls and counts on C integers.
cimport cython

cdef class Transfer:
    cdef public object ws, codec, last_flush, peers_version
    cdef public dict task_worker, out, socks, blocked
    cdef public Py_ssize_t batch_size, buffered
    cdef public double flush_interval
    cdef public bint may_drop

    @cython.locals(buf=list)
    cpdef remote(self, object task, list wire)
    cpdef _send(self, object w, list batch)
    cpdef _send_frame(self, object w, bytes frame)
