# Types for the compiled build of histogram.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): one record per acked tree, its bucket by C's log2 and floor.
cimport cython

cdef bint _COMPILED
cdef double _TOP_MS

cdef extern from *:
    """
    #include <math.h>
    /* floor(log2(ms) * PER_OCTAVE), for MIN_MS < ms < _TOP_MS (bucket_of checks) */
    static CYTHON_UNUSED long long sq_hist_key(double ms) { return (long long)floor(log2(ms) * 4.0); }
    """
    long long _key "sq_hist_key" (double ms)

cpdef long long bucket_of(double ms)


cdef class Histogram:
    cdef public dict counts
    cdef public double total

    @cython.locals(k="long long", c=dict)
    cpdef record(self, double ms)
