# Types for the compiled build of transfer.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): the outbound batches as a cdef class, so a remote emit appends to
# its peer's batch with C calls and counts on C integers.
cimport cython

from cpython cimport array

from squall.worker.queue cimport Version
from squall.worker.zmqraw cimport send_nowait

cdef bint _COMPILED, _SWAP


cdef inline int _append_pair(array.array pairs, unsigned long long root,
                             unsigned long long edge) except -1:
    cdef Py_ssize_t n = len(pairs)
    array.resize_smart(pairs, n + 2)
    pairs.data.as_ulonglongs[n] = root
    pairs.data.as_ulonglongs[n + 1] = edge
    return 0


cdef class Outbox:
    cdef public object worker
    cdef public list groups
    cdef public dict index
    cdef public list last
    cdef public Py_ssize_t n

    @cython.locals(g=list)
    cpdef list _group(self, object task, object src, object stream)

    @cython.locals(g=list, vals=list, several=dict)
    cpdef Py_ssize_t add(self, object task, object src, object stream, object values,
                         object ids) except -1

    @cython.locals(g=list, vals=list)
    cpdef Py_ssize_t add_tracked(self, object task, object src, object stream, object values,
                                 unsigned long long root, unsigned long long edge) except -1

    cdef _pair(self, array.array pairs, unsigned long long root, unsigned long long edge)

    @cython.locals(g=list)
    cpdef list take(self)


cdef class Transfer:
    cdef public object ws, codec, last_flush
    cdef public dict task_worker, out, socks, blocked
    cdef public Version peers_version
    cdef public list boxes
    cdef public Py_ssize_t batch_size, buffered, boxes_ver, peers_seen
    cdef public double flush_interval
    cdef public bint may_drop

    @cython.locals(box=Outbox)
    cpdef remote(self, object task, object src, object stream, object values, object ids)

    @cython.locals(box=Outbox)
    cpdef remote_tracked(self, object task, object src, object stream, object values,
                         unsigned long long root, unsigned long long edge)

    @cython.locals(box=Outbox)
    cpdef Outbox _box(self, Py_ssize_t task)

    @cython.locals(n="Py_ssize_t")
    cpdef _send_box(self, Outbox box)
    cpdef _send(self, object w, list groups, Py_ssize_t n)
    cpdef _send_frame(self, object w, bytes frame)
