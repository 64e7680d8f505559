# Types for the compiled build of frame.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): a GROUPED frame encoded and decoded by C written for it. msgpack's Packer
# spends most of a word's packing in its per-object dispatch; this walks the groups and
# writes the same bytes msgpack would (use_bin_type, float64, smallest int, dict order) for
# the values a tuple usually carries: None, bool, int, float, str, bytes and lists, tuples
# and dicts of them. Anything else (a subclass, an int past 64 bits, a str msgpack would
# refuse, nesting past 64 levels, a type a serializer handles) makes it return None and the
# frame goes through msgpack as before, so what a frame may hold, and its errors, are
# msgpack's. The GIL is held throughout (no Python code runs: exact types only), so the
# scratch buffer is shared safely by the executor threads.
#
# The decoder reads a GROUPED frame into what msgpack.unpackb(raw=False,
# strict_map_key=False) returns for it; anything it does not read (an ext value, a
# malformed or truncated frame, trailing bytes, invalid UTF-8, an unhashable key, nesting
# past 64 levels) makes it return None, and msgpack decodes the frame and says what is
# wrong, as before. Lengths are checked against the bytes left before anything is
# allocated, so a forged header cannot make it allocate more than the frame's size.

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

cdef extern from *:
    """
    typedef struct { const unsigned char *p, *end; } sq_in;
    /* Short ASCII strs read lately, by a hash of their bytes (as orjson keeps its keys): a
       word that comes again is the same str object, not a new one, so the frame makes no
       str for it and a dict the bolt keys by it finds its hash already computed (callgrind,
       bench/instructions.py's receive and count: 1,000 words -3.5%; 100,000 words even,
       the lookups stopping, see sq_skip). */
    #define SQ_SHORT 32
    #define SQ_STRS 4096
    static PyObject *sq_strs[SQ_STRS];
    /* Of the last lookups, how many found their str; under a quarter of SQ_STRS lookups
       finding it (a vocabulary far larger than the slots), the next 16 x SQ_STRS short strs
       are made without a lookup, then it tries again. */
    static unsigned int sq_tries, sq_hits;
    static Py_ssize_t sq_skip;
    #define SQ_NO ((PyObject *)1)  /* not decoded here (no exception set) */

    static inline unsigned long long sq_get(const unsigned char *p, int k) {
        unsigned long long v = 0;
        for (int i = 0; i < k; i++) v = (v << 8) | p[i];
        return v;
    }
    static PyObject *sq_read(sq_in *in, int depth);
    static PyObject *sq_read_n(sq_in *in, Py_ssize_t n, int depth, int map) {
        /* every element takes at least one byte: a count past what is left is forged */
        if (n > (in->end - in->p) / (map ? 2 : 1)) return SQ_NO;
        if (depth >= 64) return SQ_NO;
        if (!map) {
            PyObject *l = PyList_New(n);
            if (l == NULL) return NULL;
            for (Py_ssize_t i = 0; i < n; i++) {
                PyObject *v = sq_read(in, depth + 1);
                if (v == NULL || v == SQ_NO) { Py_DECREF(l); return v; }
                PyList_SET_ITEM(l, i, v);
            }
            return l;
        }
        PyObject *d = PyDict_New();
        if (d == NULL) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *k = sq_read(in, depth + 1);
            if (k == NULL || k == SQ_NO) { Py_DECREF(d); return k; }
            PyObject *v = sq_read(in, depth + 1);
            if (v == NULL || v == SQ_NO) { Py_DECREF(k); Py_DECREF(d); return v; }
            int r = PyDict_SetItem(d, k, v);
            Py_DECREF(k);
            Py_DECREF(v);
            if (r < 0) { PyErr_Clear(); Py_DECREF(d); return SQ_NO; }  /* unhashable key */
        }
        return d;
    }
    static PyObject *sq_str(sq_in *in, Py_ssize_t n) {
        if (n > in->end - in->p) return SQ_NO;
        const unsigned char *s = in->p;
        Py_ssize_t i = 0;
        while (i < n && s[i] < 0x80) i++;
        PyObject *u;
        if (i == n) {  /* ASCII: the str's own bytes, no decoder */
            PyObject **slot = NULL;
            if (n <= SQ_SHORT && sq_skip > 0) {
                sq_skip--;
            } else if (n <= SQ_SHORT) {  /* a short one: the str made last time, if kept */
                if (++sq_tries == SQ_STRS) {  /* few hits (too many words to keep): pause */
                    if (sq_hits < SQ_STRS / 4) sq_skip = 16 * SQ_STRS;
                    sq_tries = sq_hits = 0;
                }
                unsigned int h = 2166136261u;  /* FNV-1a */
                for (Py_ssize_t j = 0; j < n; j++) h = (h ^ s[j]) * 16777619u;
                slot = &sq_strs[h & (SQ_STRS - 1)];
                u = *slot;
                if (u != NULL && PyUnicode_GET_LENGTH(u) == n &&
                        memcmp(PyUnicode_1BYTE_DATA(u), s, (size_t)n) == 0) {
                    Py_INCREF(u);
                    sq_hits++;
                    in->p += n;
                    return u;
                }
            }
            u = PyUnicode_New(n, 127);
            if (u == NULL) return NULL;
            memcpy(PyUnicode_1BYTE_DATA(u), s, (size_t)n);
            if (slot != NULL) {
                Py_INCREF(u);
                Py_XSETREF(*slot, u);
            }
        } else {
            u = PyUnicode_DecodeUTF8((const char *)s, n, NULL);
            if (u == NULL) { PyErr_Clear(); return SQ_NO; }  /* msgpack says why */
        }
        in->p += n;
        return u;
    }
    static PyObject *sq_bin(sq_in *in, Py_ssize_t n) {
        if (n > in->end - in->p) return SQ_NO;
        PyObject *b = PyBytes_FromStringAndSize((const char *)in->p, n);
        if (b != NULL) in->p += n;
        return b;
    }
    static PyObject *sq_read(sq_in *in, int depth) {
        if (in->p >= in->end) return SQ_NO;
        unsigned char c = *in->p++;
        if (c <= 0x7f) return PyLong_FromLong(c);
        if (c >= 0xe0) return PyLong_FromLong((long)(signed char)c);
        if ((c & 0xe0) == 0xa0) return sq_str(in, c & 0x1f);
        if ((c & 0xf0) == 0x90) return sq_read_n(in, c & 0x0f, depth, 0);
        if ((c & 0xf0) == 0x80) return sq_read_n(in, c & 0x0f, depth, 1);
        static const signed char extra[32] = {
            /* c0 */ 0, -1, 0, 0, 1, 2, 4, -1, -1, -1, 4, 8, 1, 2, 4, 8,
            /* d0 */ 1, 2, 4, 8, -1, -1, -1, -1, -1, 1, 2, 4, 2, 4, 2, 4};
        int k = extra[c - 0xc0];
        if (k < 0 || in->end - in->p < k) return SQ_NO;  /* ext or unused, or truncated */
        unsigned long long v = sq_get(in->p, k);
        in->p += k;
        switch (c) {
        case 0xc0: Py_RETURN_NONE;
        case 0xc2: Py_RETURN_FALSE;
        case 0xc3: Py_RETURN_TRUE;
        case 0xc4: case 0xc5: case 0xc6: return sq_bin(in, (Py_ssize_t)v);
        case 0xca: { union { float f; unsigned int u; } x; x.u = (unsigned int)v;
                     return PyFloat_FromDouble((double)x.f); }
        case 0xcb: { union { double d; unsigned long long u; } x; x.u = v;
                     return PyFloat_FromDouble(x.d); }
        case 0xcc: case 0xcd: case 0xce: case 0xcf: return PyLong_FromUnsignedLongLong(v);
        case 0xd0: return PyLong_FromLong((long)(signed char)v);
        case 0xd1: return PyLong_FromLong((long)(short)v);
        case 0xd2: return PyLong_FromLong((long)(int)v);
        case 0xd3: return PyLong_FromLongLong((long long)v);
        case 0xd9: case 0xda: case 0xdb: return sq_str(in, (Py_ssize_t)v);
        case 0xdc: case 0xdd: return sq_read_n(in, (Py_ssize_t)v, depth, 0);
        case 0xde: case 0xdf: return sq_read_n(in, (Py_ssize_t)v, depth, 1);
        }
        return SQ_NO;
    }
    /* A GROUPED frame ([1, 4, groups], nothing after) as msgpack reads it; None when it is
       another kind, or one msgpack must read (and judge) */
    static PyObject *sq_unpack_grouped(PyObject *frame) {
        if (!PyBytes_CheckExact(frame)) Py_RETURN_NONE;
        sq_in in;
        in.p = (const unsigned char *)PyBytes_AS_STRING(frame);
        in.end = in.p + PyBytes_GET_SIZE(frame);
        if (in.end - in.p < 4 || in.p[0] != 0x93 || in.p[1] != 0x01 || in.p[2] != 0x04)
            Py_RETURN_NONE;
        in.p += 3;
        PyObject *groups = sq_read(&in, 0);
        if (groups == NULL) return NULL;
        if (groups == SQ_NO) Py_RETURN_NONE;
        if (in.p != in.end) { Py_DECREF(groups); Py_RETURN_NONE; }  /* trailing bytes */
        PyObject *one = PyLong_FromLong(1), *four = PyLong_FromLong(4);
        PyObject *msg = (one && four) ? PyList_New(3) : NULL;
        if (msg == NULL) { Py_XDECREF(one); Py_XDECREF(four); Py_DECREF(groups); return NULL; }
        PyList_SET_ITEM(msg, 0, one);
        PyList_SET_ITEM(msg, 1, four);
        PyList_SET_ITEM(msg, 2, groups);
        return msg;
    }
    """
    object _unpack_grouped "sq_unpack_grouped"(object frame)
