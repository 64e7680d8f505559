# Types for the compiled build of zmqraw.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): libzmq's non-blocking send and receive called through function
# pointers the module finds in the libzmq pyzmq loaded (nothing is linked at build time, so
# the build does not depend on where pyzmq keeps its library), with the GIL held. A socket
# is the address pyzmq's Socket.underlying gives (0 once closed: refused here, and pyzmq
# raises its own error). zmq_msg_t is 64 opaque bytes, pointer-aligned, in every libzmq 4.

cdef bint _COMPILED, _RAW

cdef extern from *:
    """
    #include <errno.h>
    typedef struct { unsigned char _[64]; } __attribute__((aligned(sizeof(void *)))) sqz_msg;
    static int (*sqz_msg_init)(sqz_msg *) = NULL;
    static int (*sqz_msg_recv)(sqz_msg *, void *, int) = NULL;
    static void *(*sqz_msg_data)(sqz_msg *) = NULL;
    static size_t (*sqz_msg_size)(const sqz_msg *) = NULL;
    static int (*sqz_msg_close)(sqz_msg *) = NULL;
    static int (*sqz_send_f)(void *, const void *, size_t, int) = NULL;
    static int (*sqz_errno)(void) = NULL;
    #define SQZ_DONTWAIT 1  /* ZMQ_DONTWAIT, the same in every libzmq */

    static CYTHON_UNUSED int sqz_set(size_t init, size_t recv, size_t data, size_t size, size_t close,
                       size_t send, size_t err, size_t version) {
        (void)version;
        if (!init || !recv || !data || !size || !close || !send || !err) return -1;
        sqz_msg_init = (int (*)(sqz_msg *))init;
        sqz_msg_recv = (int (*)(sqz_msg *, void *, int))recv;
        sqz_msg_data = (void *(*)(sqz_msg *))data;
        sqz_msg_size = (size_t (*)(const sqz_msg *))size;
        sqz_msg_close = (int (*)(sqz_msg *))close;
        sqz_send_f = (int (*)(void *, const void *, size_t, int))send;
        sqz_errno = (int (*)(void))err;
        return 0;
    }

    /* The next message as bytes; None when none waits; False on any other error (the
       caller asks pyzmq, which raises it); NULL with MemoryError set. */
    static CYTHON_UNUSED PyObject *sqz_recv(size_t sock) {
        sqz_msg msg;
        if (!sock || sqz_msg_init(&msg) != 0) Py_RETURN_FALSE;
        if (sqz_msg_recv(&msg, (void *)sock, SQZ_DONTWAIT) < 0) {
            int e = sqz_errno();
            sqz_msg_close(&msg);
            if (e == EAGAIN) Py_RETURN_NONE;
            Py_RETURN_FALSE;
        }
        PyObject *out = PyBytes_FromStringAndSize((const char *)sqz_msg_data(&msg),
                                                  (Py_ssize_t)sqz_msg_size(&msg));
        sqz_msg_close(&msg);
        return out;
    }

    /* 1 when sent (libzmq copied it), 0 when it would block, -1 on any other error or
       something not bytes (the caller asks pyzmq). */
    static CYTHON_UNUSED int sqz_send(size_t sock, PyObject *frame) {
        if (!sock || !PyBytes_CheckExact(frame)) return -1;
        if (sqz_send_f((void *)sock, PyBytes_AS_STRING(frame),
                       (size_t)PyBytes_GET_SIZE(frame), SQZ_DONTWAIT) >= 0) return 1;
        return sqz_errno() == EAGAIN ? 0 : -1;
    }
    """
    int _sqz_set "sqz_set" (size_t, size_t, size_t, size_t, size_t, size_t, size_t, size_t)
    object _sqz_recv "sqz_recv" (size_t)
    int _sqz_send "sqz_send" (size_t, object)

cpdef object recv_nowait(object sock)

cpdef bint send_nowait(object sock, object frame) except -1
