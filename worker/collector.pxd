# Types for the compiled build of collector.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): the collectors and their routes as cdef classes, so the emit path
# reads its own fields, and the anchors' ids and ack values, as C struct members instead of
# looking names up (nonecheck on: a None where a Tuple belongs raises, never crashes).
cimport cython
from squall.client.tuple cimport Tuple
from squall.worker.stats cimport TaskStats
from squall.worker.transfer cimport Transfer

cdef bint _COMPILED
cdef unsigned long long _rng_state, _XS_MULT

@cython.locals(x="unsigned long long")
cpdef unsigned long long new_id()


cdef class Route:
    cdef public object stream, fields, single
    cdef public list routers, key_lists
    cdef public Py_ssize_t key_index, key_n
    cdef public bint direct
    cdef public frozenset direct_targets
    cdef public Py_ssize_t nfields, emitted, transferred


cdef class _Base:
    cdef public object ex, component, lineage
    cdef public TaskStats stats
    cdef public Transfer transfer
    cdef public dict routes, deliver, pending_acks
    cdef public object task
    cdef public bint debug, acking
    cdef public Py_ssize_t acked_twice

    @cython.locals(r=Route, single=object, n="Py_ssize_t")
    cpdef tuple _resolve(self, object values, object stream, object direct_task)

    cpdef _send(self, object t, list values, Route r, object ids)


cdef class SpoutOutputCollector(_Base):
    cdef public object pending, run
    cdef public Py_ssize_t emits

    @cython.locals(r=Route, i="Py_ssize_t", ack_val="unsigned long long",
                   e="unsigned long long")
    cpdef list emit(self, object values, object stream=*, object msg_id=*, object anchors=*,
                    object direct_task=*)


cdef class OutputCollector(_Base):
    @cython.locals(r=Route, a=Tuple, e="unsigned long long")
    cpdef list emit(self, object values, object stream=*, object anchors=*,
                    object direct_task=*, object msg_id=*)

    @cython.locals(r=Route, targets=object, e="unsigned long long", n="Py_ssize_t",
                   h="unsigned long")
    cpdef list emit_anchored(self, object values, object stream, Tuple anchor,
                             object direct_task=*)

    cpdef ack(self, Tuple tup)

    @cython.locals(ids=dict, av="unsigned long long", e="unsigned long long", pa=dict)
    cdef _ack_trees(self, Tuple tup)


cdef class BasicOutputCollector:
    cdef public OutputCollector out
    cdef public Tuple input

    cpdef list emit(self, object values, object stream=*)


cdef class BasicRunner:
    cdef public object execute
    cdef public OutputCollector out
    cdef public BasicOutputCollector bc

    @cython.locals(bc=BasicOutputCollector)
    cpdef run(self, Tuple tup)


@cython.locals(basic=BasicRunner, n="Py_ssize_t", tup=Tuple)
cpdef Py_ssize_t run_counting(object dq, TaskStats st, object dispatch, object system,
                              double t0, Py_ssize_t limit, double limit_secs) except -1
