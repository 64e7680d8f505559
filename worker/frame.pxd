# Types for the compiled build of frame.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): a GROUPED frame encoded by C written for it. msgpack's Packer
# spends most of a word's packing in its per-object dispatch; this walks the groups and
# writes the same bytes msgpack would (use_bin_type, float64, smallest int, dict order) for
# the values a tuple usually carries: None, bool, int, float, str, bytes and lists, tuples
# and dicts of them. Anything else (a subclass, an int past 64 bits, a str msgpack would
# refuse, nesting past 64 levels, a type a serializer handles) makes it return None and the
# frame goes through msgpack as before, so what a frame may hold, and its errors, are
# msgpack's. The GIL is held throughout (no Python code runs: exact types only), so the
# scratch buffer is shared safely by the executor threads.

cdef bint _COMPILED

cdef extern from *:
    """
    typedef struct { char *p; Py_ssize_t n, cap; } sq_out;
    static sq_out sq_scratch = {NULL, 0, 0};
    #define SQ_FALLBACK 1  /* not a kind written here: msgpack encodes the frame */
    #define SQ_ERROR -1    /* out of memory: an exception is set */

    static int sq_room(sq_out *o, Py_ssize_t k) {
        if (o->n + k <= o->cap) return 0;
        Py_ssize_t cap = o->cap ? o->cap : 65536;
        while (cap < o->n + k) cap *= 2;
        char *p = (char *)PyMem_RawRealloc(o->p, (size_t)cap);
        if (p == NULL) { PyErr_NoMemory(); return SQ_ERROR; }
        o->p = p; o->cap = cap;
        return 0;
    }
    static inline void sq_be(char *d, unsigned long long v, int k) {
        for (int i = k - 1; i >= 0; i--) { d[i] = (char)(v & 0xFF); v >>= 8; }
    }
    static int sq_head(sq_out *o, unsigned char b1, unsigned long long v, int k) {
        if (sq_room(o, 1 + k)) return SQ_ERROR;
        o->p[o->n] = (char)b1;
        sq_be(o->p + o->n + 1, v, k);
        o->n += 1 + k;
        return 0;
    }
    /* msgpack's container and str/bin headers: fix form, then 8/16/32-bit lengths */
    static int sq_len(sq_out *o, Py_ssize_t n, unsigned char fix, Py_ssize_t fixmax,
                      unsigned char c8, unsigned char c16, unsigned char c32) {
        if (n <= fixmax) return sq_head(o, (unsigned char)(fix | n), 0, 0);
        if (c8 && n <= 0xFF) return sq_head(o, c8, (unsigned long long)n, 1);
        if (n <= 0xFFFF) return sq_head(o, c16, (unsigned long long)n, 2);
        if (n <= 0xFFFFFFFFLL) return sq_head(o, c32, (unsigned long long)n, 4);
        return SQ_FALLBACK;
    }
    static int sq_raw(sq_out *o, const char *s, Py_ssize_t n) {
        if (sq_room(o, n)) return SQ_ERROR;
        memcpy(o->p + o->n, s, (size_t)n);
        o->n += n;
        return 0;
    }
    static int sq_int(sq_out *o, PyObject *v) {
        int overflow = 0;
        long long d = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow > 0) {
            unsigned long long u = PyLong_AsUnsignedLongLong(v);
            if (u == (unsigned long long)-1 && PyErr_Occurred()) {
                PyErr_Clear();
                return SQ_FALLBACK;
            }
            return sq_head(o, 0xcf, u, 8);
        }
        if (overflow < 0) return SQ_FALLBACK;
        if (d == -1 && PyErr_Occurred()) { PyErr_Clear(); return SQ_FALLBACK; }
        if (d < -(1LL << 5)) {
            if (d < -(1LL << 15)) {
                if (d < -(1LL << 31)) return sq_head(o, 0xd3, (unsigned long long)d, 8);
                return sq_head(o, 0xd2, (unsigned long long)d, 4);
            }
            if (d < -(1LL << 7)) return sq_head(o, 0xd1, (unsigned long long)d, 2);
            return sq_head(o, 0xd0, (unsigned long long)d, 1);
        }
        if (d < (1LL << 7)) return sq_head(o, (unsigned char)(d & 0xFF), 0, 0);
        if (d < (1LL << 16)) {
            if (d < (1LL << 8)) return sq_head(o, 0xcc, (unsigned long long)d, 1);
            return sq_head(o, 0xcd, (unsigned long long)d, 2);
        }
        if (d < (1LL << 32)) return sq_head(o, 0xce, (unsigned long long)d, 4);
        return sq_head(o, 0xcf, (unsigned long long)d, 8);
    }
    static int sq_obj(sq_out *o, PyObject *v, int depth);
    static int sq_seq(sq_out *o, PyObject **items, Py_ssize_t n, int depth) {
        int r = sq_len(o, n, 0x90, 15, 0, 0xdc, 0xdd);
        if (r) return r;
        for (Py_ssize_t i = 0; i < n; i++) {
            r = sq_obj(o, items[i], depth);
            if (r) return r;
        }
        return 0;
    }
    static int sq_obj(sq_out *o, PyObject *v, int depth) {
        PyTypeObject *t = Py_TYPE(v);
        int r;
        if (t == &PyUnicode_Type) {
            const char *s;
            Py_ssize_t n;
            if (PyUnicode_READY(v) < 0) { PyErr_Clear(); return SQ_FALLBACK; }
            if (PyUnicode_IS_ASCII(v)) {
                s = (const char *)PyUnicode_1BYTE_DATA(v);
                n = PyUnicode_GET_LENGTH(v);
            } else {
                s = PyUnicode_AsUTF8AndSize(v, &n);
                if (s == NULL) { PyErr_Clear(); return SQ_FALLBACK; }  /* msgpack says why */
            }
            r = sq_len(o, n, 0xa0, 31, 0xd9, 0xda, 0xdb);
            return r ? r : sq_raw(o, s, n);
        }
        if (t == &PyList_Type) {
            if (depth >= 64) return SQ_FALLBACK;
            return sq_seq(o, ((PyListObject *)v)->ob_item, PyList_GET_SIZE(v), depth + 1);
        }
        if (t == &PyLong_Type) return sq_int(o, v);
        if (v == Py_None) return sq_head(o, 0xc0, 0, 0);
        if (v == Py_True) return sq_head(o, 0xc3, 0, 0);
        if (v == Py_False) return sq_head(o, 0xc2, 0, 0);
        if (t == &PyFloat_Type) {
            union { double d; unsigned long long u; } x;
            x.d = PyFloat_AS_DOUBLE(v);
            return sq_head(o, 0xcb, x.u, 8);
        }
        if (t == &PyBytes_Type) {
            Py_ssize_t n = PyBytes_GET_SIZE(v);
            r = sq_len(o, n, 0, -1, 0xc4, 0xc5, 0xc6);
            return r ? r : sq_raw(o, PyBytes_AS_STRING(v), n);
        }
        if (t == &PyTuple_Type) {
            if (depth >= 64) return SQ_FALLBACK;
            return sq_seq(o, ((PyTupleObject *)v)->ob_item, PyTuple_GET_SIZE(v), depth + 1);
        }
        if (t == &PyDict_Type) {
            if (depth >= 64) return SQ_FALLBACK;
            Py_ssize_t pos = 0;
            PyObject *k, *val;
            r = sq_len(o, PyDict_GET_SIZE(v), 0x80, 15, 0, 0xde, 0xdf);
            if (r) return r;
            while (PyDict_Next(v, &pos, &k, &val)) {
                r = sq_obj(o, k, depth + 1);
                if (!r) r = sq_obj(o, val, depth + 1);
                if (r) return r;
            }
            return 0;
        }
        return SQ_FALLBACK;
    }
    /* [1, 4, groups] as msgpack would write it; Py_None when it would not be written here */
    static PyObject *sq_pack_grouped(PyObject *groups) {
        sq_out *o = &sq_scratch;
        o->n = 0;
        int r = sq_head(o, 0x93, 0, 0);
        if (!r) r = sq_head(o, 0x01, 0, 0);
        if (!r) r = sq_head(o, 0x04, 0, 0);
        if (!r) r = sq_obj(o, groups, 0);
        if (r == SQ_ERROR) return NULL;
        PyObject *out = r ? (Py_INCREF(Py_None), Py_None)
                          : PyBytes_FromStringAndSize(o->p, o->n);
        if (o->cap > (64 << 20)) {  /* one huge frame: do not keep its buffer */
            PyMem_RawFree(o->p);
            o->p = NULL;
            o->cap = 0;
        }
        return out;
    }
    """
    object _pack_grouped "sq_pack_grouped"(list groups)
