# Types for the compiled build of collector.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): the collectors and their routes as cdef classes, so the emit path
# reads its own fields, and the anchors' ids and ack values, as C struct members instead of
# looking names up (nonecheck on: a None where a Tuple belongs raises, never crashes).
cimport cython
from squall.acker.compact_map cimport Bucket
from squall.acker.pending_map cimport PendingMap
from squall.client.grouping cimport LoadAwareShuffleRouter
from squall.client.tuple cimport Tuple, new_tuple
from squall.worker.queue cimport InQueue
from squall.worker.stats cimport TaskStats
from squall.worker.transfer cimport Transfer

cdef bint _COMPILED

# zlib's CRC-32 (stable_hash of a str) over an ASCII str's own bytes: no bytes object and no
# call into zlib per key. The table is filled once at import (collector.py).
cdef extern from *:
    """
    static unsigned int squall_crc_table[256];
    static void squall_crc_init(void) {
        unsigned int n, c;
        int k;
        for (n = 0; n < 256; n++) {
            c = n;
            for (k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            squall_crc_table[n] = c;
        }
    }
    static CYTHON_UNUSED unsigned long long sq_fastmod_m(unsigned long long n) {
        return n ? 0xFFFFFFFFFFFFFFFFull / n + 1 : 0;
    }
    static CYTHON_UNUSED unsigned long sq_fastmod(unsigned long h, unsigned long long m,
                                                  unsigned long long n) {
        return (unsigned long)(((__uint128_t)(m * (unsigned long long)(h & 0xFFFFFFFFu)) * n) >> 64);
    }
    static unsigned long squall_ascii_crc32(PyObject *s) {
        const Py_UCS1 *p = PyUnicode_1BYTE_DATA(s);
        Py_ssize_t n = PyUnicode_GET_LENGTH(s);
        unsigned int c = 0xFFFFFFFFu;
        while (n-- > 0) c = squall_crc_table[(c ^ *p++) & 0xFFu] ^ (c >> 8);
        return (unsigned long)(c ^ 0xFFFFFFFFu);
    }
    """
    void _crc_init "squall_crc_init"()
    # h % n for a 32-bit CRC h and 0 < n < 2**32 without a division: Lemire, Kaser and
    # Kurz's fastmod_u32 (exact for every such h and n), m = 2**64 // n + 1 from sq_fastmod_m.
    unsigned long long _fastmod_m "sq_fastmod_m"(unsigned long long n)
    unsigned long _fastmod "sq_fastmod"(unsigned long h, unsigned long long m,
                                        unsigned long long n)
    unsigned long _ascii_crc32 "squall_ascii_crc32"(object s)
    bint _is_ascii "PyUnicode_IS_ASCII"(object s)

# time.monotonic() without a Python call, through the function behind it (the same clock
# on every platform): a spout's pending tree is stamped with it per emit, and acks compare
# it with time.monotonic().
cdef extern from *:
    """
    static CYTHON_UNUSED double sq_monotonic(void) {
    #if PY_VERSION_HEX >= 0x030D0000
        PyTime_t t;
        if (PyTime_MonotonicRaw(&t) < 0) return 0.0;
        return PyTime_AsSecondsDouble(t);
    #else
        return _PyTime_AsSecondsDouble(_PyTime_GetMonotonicClock());
    #endif
    }
    """
    double _monotonic "sq_monotonic"()
cdef unsigned long long _rng_state, _XS_MULT

@cython.locals(x="unsigned long long")
cpdef unsigned long long new_id()


cdef unsigned long long RESERVED


@cython.locals(flat=list)
cpdef _append2(dict per, object key, object a, object b)

@cython.locals(n="unsigned long long", per=dict, out=list, i="Py_ssize_t",
               root="unsigned long long", key=object)
cpdef dict inits_by_acker(list flat, list ackers)


cdef class StepAcks:
    cdef public Bucket table
    cdef public dict odd

    @cython.locals(b=Bucket, i="Py_ssize_t")
    cpdef xor(self, unsigned long long root, unsigned long long val)

    @cython.locals(b=Bucket, i="Py_ssize_t", k="unsigned long long", out=list,
                   keys="unsigned long long[::1]", vals="unsigned long long[::1]")
    cpdef list items(self)

    @cython.locals(n="unsigned long long", per=dict, b=Bucket, i="Py_ssize_t",
                   k="unsigned long long", keys="unsigned long long[::1]",
                   vals="unsigned long long[::1]")
    cpdef dict by_acker(self, list ackers)

    @cython.locals(b=Bucket, cap="Py_ssize_t", i="Py_ssize_t", keys="unsigned long long[::1]")
    cpdef clear(self)


cdef class Route:
    cdef public object stream, fields, single
    cdef public list routers, key_lists
    cdef public Py_ssize_t key_index, key_n
    cdef public unsigned long long key_m
    cdef public bint direct
    cdef public frozenset direct_targets
    cdef public Py_ssize_t nfields, emitted, transferred


cdef class _Base:
    cdef public object ex, component, lineage, last_stream
    cdef public Route last_route
    cdef public TaskStats stats
    cdef public Transfer transfer
    cdef public dict routes, deliver, queues
    cdef public StepAcks pending_acks
    cdef public object task
    cdef public bint debug, acking
    cdef public Py_ssize_t acked_twice

    @cython.locals(r=Route, single=object, n="Py_ssize_t", lr=LoadAwareShuffleRouter)
    cpdef tuple _resolve(self, object values, object stream, object direct_task)

    @cython.locals(tup=Tuple, q=InQueue)
    cpdef _send(self, object t, list values, Route r, object ids)

    @cython.locals(tup=Tuple, q=InQueue)
    cpdef _send_tracked(self, object t, list values, Route r, unsigned long long root,
                        unsigned long long edge)


cdef class SpoutOutputCollector(_Base):
    cdef public PendingMap pending
    cdef public object run
    cdef public list inits
    cdef public Py_ssize_t emits
    cdef public bint dry

    @cython.locals(r=Route, i="Py_ssize_t", ack_val="unsigned long long",
                   e="unsigned long long")
    cpdef list emit(self, object values, object stream=*, object msg_id=*, object anchors=*,
                    object direct_task=*)


cdef class OutputCollector(_Base):
    @cython.locals(r=Route, a=Tuple, e="unsigned long long")
    cpdef list emit(self, object values, object stream=*, object anchors=*,
                    object direct_task=*, object msg_id=*)

    @cython.locals(r=Route, targets=object, e="unsigned long long", n="Py_ssize_t",
                   h="unsigned long", root="unsigned long long", aids=dict)
    cpdef list emit_anchored(self, object values, object stream, Tuple anchor,
                             object direct_task=*)

    cpdef ack(self, Tuple tup)

    @cython.locals(ids=dict, av="unsigned long long", e="unsigned long long", pa=StepAcks,
                   root="unsigned long long")
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


@cython.locals(basic=BasicRunner, n="Py_ssize_t", tup=Tuple, avail="Py_ssize_t")
cpdef Py_ssize_t run_counting(object dq, TaskStats st, object dispatch, object system,
                              double t0, Py_ssize_t limit, double limit_secs) except -1


@cython.locals(n="Py_ssize_t", before="Py_ssize_t", delta="Py_ssize_t", t0="double",
               t="double", now="double", took="double", room="Py_ssize_t")
cpdef Py_ssize_t spout_burst(object next_tuple, SpoutOutputCollector out, object pending,
                             Py_ssize_t cap, Py_ssize_t budget, double step_secs,
                             double slow_secs, object on_slow) except -1


@cython.locals(entry=tuple)
cpdef settle_acks(object roots, PendingMap pending, TaskStats stats, object ack, double now)
