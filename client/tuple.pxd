# Types for the compiled build of tuple.py (Cython's augmenting .pxd; see
# acker/compact_map.pxd): the tuple as a cdef class, so the collectors read its anchor ids
# and XOR its ack value as C struct members; a tuple of one tree keeps its root and edge
# ids there too (no dict per tracked tuple).


cimport cython


cdef class Fields:
    cdef public list names
    cdef public dict index


@cython.freelist(512)
cdef class Tuple:
    cdef public object values, source_component, source_stream, source_task, _ids, fields
    cdef public unsigned long long root, edge, ack_val
    cdef public bint acked


cdef bint _COMPILED

# Tuple.values as a read-only member descriptor (T_OBJECT_EX) over the struct's field,
# replacing the property Cython generates: see tuple.py. The offset is a macro, expanded
# where the struct is complete.
cdef extern from *:
    """
    #include <structmember.h>
    #define SQ_TUPLE_VALUES_OFFSET \
        ((Py_ssize_t)offsetof(struct __pyx_obj_6squall_6client_5tuple_Tuple, values))
    static PyMemberDef sq_tuple_values_member[2] = {
        {"values", T_OBJECT_EX, 0, READONLY, "The tuple's values, a list (read-only)."},
        {NULL, 0, 0, 0, NULL}};
    static CYTHON_UNUSED int sq_install_values(PyObject *tp, Py_ssize_t offset) {
        PyObject *descr;
        int rc;
        sq_tuple_values_member[0].offset = offset;
        descr = PyDescr_NewMember((PyTypeObject *)tp, &sq_tuple_values_member[0]);
        if (descr == NULL) return -1;
        rc = PyDict_SetItemString(((PyTypeObject *)tp)->tp_dict, "values", descr);
        Py_DECREF(descr);
        PyType_Modified((PyTypeObject *)tp);
        return rc;
    }
    """
    Py_ssize_t _VALUES_OFFSET "SQ_TUPLE_VALUES_OFFSET"
    int _install_values "sq_install_values"(object tp, Py_ssize_t offset) except -1


@cython.locals(t=Tuple)
cpdef Tuple new_tuple(object values, object source_component, object source_stream,
                      object source_task, object fields)
