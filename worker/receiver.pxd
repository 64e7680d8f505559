# Types for the compiled build of receiver.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): a data frame's tuples walked with C-typed locals.
cimport cython
from squall.client.tuple cimport Tuple, new_tuple
from squall.worker.queue cimport InQueue
from squall.worker.zmqraw cimport recv_nowait

cdef bint _SWAP

cdef class Receiver:
    cdef public object ws, sock, ipc
    cdef public double _last_warn
    cdef public Py_ssize_t _suppressed
    cdef public dict _src

    @cython.locals(deliver=dict, bad="Py_ssize_t")
    cpdef _deliver(self, list wires)

    @cython.locals(deliver=dict, bad="Py_ssize_t", total="Py_ssize_t", n="Py_ssize_t",
                   i="Py_ssize_t", vals=list, queues=dict, q=InQueue, several=dict,
                   pv="const unsigned long long[::1]", tup=Tuple)
    cpdef _deliver_groups(self, list groups)
