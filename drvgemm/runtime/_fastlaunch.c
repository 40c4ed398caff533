/*
 * drvgemm.runtime._fastlaunch: the common case of drvgemm.launch() in C.
 *
 * launch(kernel, grid, block, args, *, smem=0, stream=None, cluster=None,
 *        attributes=(), cooperative=False) with no cluster, no attributes and
 * stream None or an integer handle: look up the launcher built for (grid,
 * block, smem, stream) -- (grid, block, smem, stream, COOPERATIVE_KEY) for a
 * cooperative launch, the module's string that launch.py keys it with too --
 * in kernel.fast_launchers, pack the arguments into its
 * parameter block and call the driver's cuLaunchKernel (whose address
 * cuda.bindings' cuGetProcAddress gave drvgemm/runtime/launch.py), or
 * cuLaunchKernelEx with its attributes: programmatic stream serialization for
 * a kernel that waits for the grid before it (Kernel.dependent_launch), the
 * cooperative attribute for a cooperative launch. Anything else -- a first
 * launch of a shape, a foreign array, a value that does not fit its slot, a
 * failed launch, a cluster launch -- goes to the Python functions in
 * drvgemm/runtime/launch.py, which check everything and say what is wrong.
 * This file only makes the path that has already been checked once cheaper:
 * one C call instead of two Python calls, a dict lookup and a struct.pack_into.
 *
 * Encoder: cuTensorMapEncodeTiled for a map whose every field but the
 * address Python has validated (drvgemm/runtime/tensormap.py: MapEncoder),
 * so that a GEMM called on new buffers re-encodes its maps in one C call.
 *
 * Built against the limited API (abi3), so one build serves every CPython
 * from 3.10 on. Optional: without a C compiler drvgemm works the same, with
 * the Python path only.
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

/* CUresult cuLaunchKernel(CUfunction, gx, gy, gz, bx, by, bz, smem, CUstream,
 * void **kernelParams, void **extra) */
typedef int (*cu_launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned,
                            unsigned, unsigned, void *, void **, void **);

/* cuLaunchKernelEx's CUlaunchConfig and CUlaunchAttribute (cuda.h, CUDA 12
 * and 13), for the two attributes this path sets: a kernel whose blocks wait
 * for the grid ahead of them (Kernel.dependent_launch) is launched with
 * programmatic stream serialization, a cooperative launch with the
 * cooperative attribute (its grid was checked against the resident blocks
 * when Python built the launcher). */
enum { CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
       CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
/* A Launcher's ex_attributes: which of the two it sets (launch.py mirrors them). */
enum { EX_DEPENDENT = 1, EX_COOPERATIVE = 2 };
typedef struct {
    int id;
    char pad[4];
    union { char bytes[64]; int value; void *align; } value;
} cu_launch_attribute;
typedef struct {
    unsigned grid[3], block[3], smem;
    void *stream;
    cu_launch_attribute *attrs;
    unsigned num_attrs;
} cu_launch_config;
typedef int (*cu_launch_ex_fn)(const cu_launch_config *, void *, void **, void **);
_Static_assert(sizeof(cu_launch_attribute) == 72, "CUlaunchAttribute is 72 bytes");
_Static_assert(sizeof(cu_launch_config) == 56, "CUlaunchConfig is 56 bytes");

/* Slot kinds (drvgemm/runtime/launch.py: _FAST_KINDS). K_BYTES: a by-value
 * block of bytes (a 128-byte CUtensorMap), given as bytes of exactly its size
 * or an object whose .param_bytes are. */
enum { K_ADDR = 0, K_S32 = 1, K_U32 = 2, K_F32 = 3, K_F64 = 4, K_BYTES = 5 };

typedef struct {
    PyObject_HEAD
    cu_launch_fn fn;
    cu_launch_ex_fn fn_ex;  /* set: cuLaunchKernelEx with the attributes of ex_attributes */
    int ex_attributes;      /* EX_DEPENDENT | EX_COOPERATIVE */
    void *function;
    unsigned dims[6];
    unsigned smem;
    void *stream;
    Py_ssize_t n;
    int *kinds;
    Py_ssize_t *offsets;
    Py_ssize_t *sizes;      /* bytes of each slot (K_BYTES: the block's size) */
    Py_ssize_t size;
    unsigned char *block;   /* the packed parameters */
    void **params;          /* n pointers into block */
    int busy;               /* a launch from this launcher is in the driver */
    PyObject *devarray;     /* drvgemm.runtime.driver.DeviceArray */
    PyObject *slow_pack;    /* args -> bytes of the block, or raises naming the argument */
} Launcher;

static PyObject *str_ptr, *str_param_bytes, *str_fast, *str_cooperative;
static PyObject *py_slow_launch, *py_first_launch, *py_failed;
/* Threads capturing a graph (drvgemm.graph): while any does, stream=None may
 * mean its capture stream, which only the Python path knows. */
static long capturing = 0;

/* f(*argv[:nargs], **dict(zip(kwnames, argv[nargs:]))) */
static PyObject *call_py(PyObject *f, PyObject *const *argv, Py_ssize_t nargs,
                         PyObject *kwnames) {
    if (f == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "drvgemm.runtime._fastlaunch is not bound");
        return NULL;
    }
    PyObject *t = PyTuple_New(nargs), *kw = NULL, *r = NULL;
    if (t == NULL) return NULL;
    for (Py_ssize_t i = 0; i < nargs; ++i) PyTuple_SetItem(t, i, Py_NewRef(argv[i]));
    Py_ssize_t nk = kwnames ? PyTuple_Size(kwnames) : 0;
    if (nk) {
        kw = PyDict_New();
        if (kw == NULL) goto done;
        for (Py_ssize_t i = 0; i < nk; ++i)
            if (PyDict_SetItem(kw, PyTuple_GetItem(kwnames, i), argv[nargs + i]) < 0) goto done;
    }
    r = PyObject_Call(f, t, kw);
done:
    Py_DECREF(t);
    Py_XDECREF(kw);
    return r;
}

/* One argument into its slot; 0 on success, -1 when the Python path must do
 * it (no Python error is left set). */
static int pack_one(Launcher *L, Py_ssize_t i, PyObject *o) {
    unsigned char *dst = L->block + L->offsets[i];
    switch (L->kinds[i]) {
    case K_ADDR: {
        unsigned long long v;
        if ((PyObject *)Py_TYPE(o) == L->devarray) {
            PyObject *p = PyObject_GetAttr(o, str_ptr);
            if (p == NULL) { PyErr_Clear(); return -1; }
            v = PyLong_AsUnsignedLongLong(p);
            Py_DECREF(p);
        } else if (PyLong_CheckExact(o)) {
            v = PyLong_AsUnsignedLongLong(o);
        } else {
            return -1;
        }
        if (v == (unsigned long long)-1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        memcpy(dst, &v, 8);
        return 0;
    }
    case K_S32:
    case K_U32: {
        if (!PyLong_CheckExact(o)) return -1;
        long long v = PyLong_AsLongLong(o);
        if (v == -1 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        if (L->kinds[i] == K_S32 ? (v < INT32_MIN || v > INT32_MAX) : (v < 0 || v > UINT32_MAX))
            return -1;
        uint32_t w = (uint32_t)v;
        memcpy(dst, &w, 4);
        return 0;
    }
    case K_F32:
    case K_F64: {
        double d;
        if (PyFloat_CheckExact(o)) {
            d = PyFloat_AsDouble(o);
        } else if (PyLong_CheckExact(o)) {
            d = PyLong_AsDouble(o);
            if (d == -1.0 && PyErr_Occurred()) { PyErr_Clear(); return -1; }
        } else {
            return -1;
        }
        if (L->kinds[i] == K_F64) {
            memcpy(dst, &d, 8);
        } else {
            if (isfinite(d) && fabs(d) > FLT_MAX) return -1;  /* Python names the overflow */
            float f = (float)d;
            memcpy(dst, &f, 4);
        }
        return 0;
    }
    case K_BYTES: {
        PyObject *b = o;
        if (!PyBytes_CheckExact(o)) {
            b = PyObject_GetAttr(o, str_param_bytes);
            if (b == NULL) { PyErr_Clear(); return -1; }
        } else {
            Py_INCREF(b);
        }
        char *raw;
        Py_ssize_t len;
        int ok = PyBytes_CheckExact(b) && PyBytes_AsStringAndSize(b, &raw, &len) == 0 &&
                 len == L->sizes[i];
        if (ok) memcpy(dst, raw, (size_t)len);
        else PyErr_Clear();
        Py_DECREF(b);
        return ok ? 0 : -1;
    }
    }
    return -1;
}

/* Pack a sequence of arguments; 0 on success, -1 with a Python error set. */
static int pack(Launcher *L, PyObject *args) {
    PyObject *fast = NULL;
    int ok = 0;
    if (PyTuple_CheckExact(args) && PyTuple_Size(args) == L->n) {
        ok = 1;
        for (Py_ssize_t i = 0; i < L->n && ok; ++i)
            ok = pack_one(L, i, PyTuple_GetItem(args, i)) == 0;
    } else if (PyList_CheckExact(args) && PyList_Size(args) == L->n) {
        ok = 1;
        for (Py_ssize_t i = 0; i < L->n && ok; ++i)
            ok = pack_one(L, i, PyList_GetItem(args, i)) == 0;
    }
    if (ok) return 0;
    /* The checked path: exact values or an error that names the argument. */
    fast = PyObject_CallFunctionObjArgs(L->slow_pack, args, NULL);
    if (fast == NULL) return -1;
    char *bytes;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(fast, &bytes, &len) < 0 || len != L->size) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_RuntimeError, "drvgemm: packed parameters of the wrong size");
        Py_DECREF(fast);
        return -1;
    }
    memcpy(L->block, bytes, (size_t)len);
    Py_DECREF(fast);
    return 0;
}

/* ------------------------------------------------------------------------ */
static void launcher_dealloc(PyObject *self) {
    Launcher *L = (Launcher *)self;
    PyMem_Free(L->kinds);
    PyMem_Free(L->offsets);
    PyMem_Free(L->sizes);
    PyMem_Free(L->block);
    PyMem_Free(L->params);
    Py_XDECREF(L->devarray);
    Py_XDECREF(L->slow_pack);
    PyTypeObject *tp = Py_TYPE(self);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);
}

/* Launcher(fn_address, function_handle, (gx, gy, gz, bx, by, bz), smem,
 *          stream_handle, kinds, offsets, size, DeviceArray, slow_pack[, sizes
 *          [, ex_address, ex_attributes]])
 * sizes: the bytes of each slot, needed for K_BYTES slots only (None: none);
 * ex_address: cuLaunchKernelEx, for a dependent or cooperative launch (0:
 * cuLaunchKernel), with ex_attributes saying which (EX_DEPENDENT,
 * EX_COOPERATIVE; not 0 when ex_address is given). */
static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    unsigned long long fn, function, stream, fn_ex = 0;
    int ex_attributes = 0;
    unsigned g0, g1, g2, b0, b1, b2, smem;
    PyObject *kinds, *offsets, *devarray, *slow_pack, *sizes = Py_None;
    Py_ssize_t size;
    if (kwds != NULL && PyDict_Size(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Launcher takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "KK(IIIIII)IKOOnOO|OKi", &fn, &function, &g0, &g1, &g2, &b0,
                          &b1, &b2, &smem, &stream, &kinds, &offsets, &size, &devarray,
                          &slow_pack, &sizes, &fn_ex, &ex_attributes))
        return NULL;
    if ((fn_ex != 0) != (ex_attributes != 0) ||
        (ex_attributes & ~(EX_DEPENDENT | EX_COOPERATIVE)) != 0) {
        PyErr_SetString(PyExc_ValueError,
                        "Launcher: ex_attributes (1 dependent, 2 cooperative) go with ex_address");
        return NULL;
    }
    PyObject *kt = PySequence_Tuple(kinds), *ot = PySequence_Tuple(offsets);
    PyObject *st = sizes == Py_None ? NULL : PySequence_Tuple(sizes);
    if (kt == NULL || ot == NULL || (sizes != Py_None && st == NULL)) {
        Py_XDECREF(kt); Py_XDECREF(ot); Py_XDECREF(st); return NULL;
    }
    Py_ssize_t n = PyTuple_Size(kt);
    if (PyTuple_Size(ot) != n || (st != NULL && PyTuple_Size(st) != n) || size < 0 ||
        fn == 0) {
        Py_DECREF(kt); Py_DECREF(ot); Py_XDECREF(st);
        PyErr_SetString(PyExc_ValueError, "Launcher: kinds, offsets and sizes differ in length");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    Launcher *L = (Launcher *)alloc(type, 0);
    if (L == NULL) { Py_DECREF(kt); Py_DECREF(ot); Py_XDECREF(st); return NULL; }
    L->fn = (cu_launch_fn)(uintptr_t)fn;
    L->fn_ex = (cu_launch_ex_fn)(uintptr_t)fn_ex;
    L->ex_attributes = ex_attributes;
    L->function = (void *)(uintptr_t)function;
    L->dims[0] = g0; L->dims[1] = g1; L->dims[2] = g2;
    L->dims[3] = b0; L->dims[4] = b1; L->dims[5] = b2;
    L->smem = smem;
    L->stream = (void *)(uintptr_t)stream;
    L->n = n;
    L->size = size;
    L->kinds = PyMem_Calloc((size_t)(n ? n : 1), sizeof(int));
    L->offsets = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
    L->sizes = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Py_ssize_t));
    L->block = PyMem_Calloc((size_t)(size ? size : 1), 1);
    L->params = PyMem_Calloc((size_t)(n ? n : 1), sizeof(void *));
    Py_INCREF(devarray);
    L->devarray = devarray;
    Py_INCREF(slow_pack);
    L->slow_pack = slow_pack;
    if (!L->kinds || !L->offsets || !L->sizes || !L->block || !L->params) {
        Py_DECREF(kt); Py_DECREF(ot); Py_XDECREF(st); Py_DECREF(L);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        long k = PyLong_AsLong(PyTuple_GetItem(kt, i));
        Py_ssize_t off = PyLong_AsSsize_t(PyTuple_GetItem(ot, i));
        Py_ssize_t sz = (k == K_ADDR || k == K_F64) ? 8 : 4;
        if (k == K_BYTES)
            sz = st == NULL ? -1 : PyLong_AsSsize_t(PyTuple_GetItem(st, i));
        if (PyErr_Occurred() || k < K_ADDR || k > K_BYTES || off < 0 || sz < 1 ||
            off + sz > size) {
            Py_DECREF(kt); Py_DECREF(ot); Py_XDECREF(st); Py_DECREF(L);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Launcher: bad slot");
            return NULL;
        }
        L->kinds[i] = (int)k;
        L->offsets[i] = off;
        L->sizes[i] = sz;
        L->params[i] = L->block + off;
    }
    Py_DECREF(kt);
    Py_DECREF(ot);
    Py_XDECREF(st);
    return (PyObject *)L;
}

/* Pack and launch; -1 with a Python error set when packing failed, else
 * the CUresult. The caller checked that L is not busy: busy covers packing
 * too, as the checked path runs Python code, during which another thread
 * may run. */
static long pack_and_launch(Launcher *L, PyObject *args) {
    L->busy = 1;
    if (pack(L, args) < 0) {
        L->busy = 0;
        return -1;
    }
    int err;
    if (L->fn_ex != NULL) {
        cu_launch_attribute attrs[2];
        unsigned n = 0;
        memset(attrs, 0, sizeof attrs);
        if (L->ex_attributes & EX_DEPENDENT) {
            attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attrs[n++].value.value = 1;
        }
        if (L->ex_attributes & EX_COOPERATIVE) {
            attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            attrs[n++].value.value = 1;
        }
        cu_launch_config cfg = {{L->dims[0], L->dims[1], L->dims[2]},
                                {L->dims[3], L->dims[4], L->dims[5]},
                                L->smem, L->stream, attrs, n};
        Py_BEGIN_ALLOW_THREADS
        err = L->fn_ex(&cfg, L->function, L->params, NULL);
        Py_END_ALLOW_THREADS
    } else {
        Py_BEGIN_ALLOW_THREADS
        err = L->fn(L->function, L->dims[0], L->dims[1], L->dims[2], L->dims[3], L->dims[4],
                    L->dims[5], L->smem, L->stream, L->params, NULL);
        Py_END_ALLOW_THREADS
    }
    L->busy = 0;
    return err;
}

/* launcher(args) -> CUresult as an int (packs and launches; tests call it
 * with a stand-in for the driver). */
static PyObject *launcher_call(PyObject *self, PyObject *args, PyObject *kwds) {
    Launcher *L = (Launcher *)self;
    PyObject *a;
    if (!PyArg_ParseTuple(args, "O", &a)) return NULL;
    if (L->busy) {
        PyErr_SetString(PyExc_RuntimeError, "launcher in use by another thread");
        return NULL;
    }
    long err = pack_and_launch(L, a);
    return err < 0 ? NULL : PyLong_FromLong(err);
}

static PyType_Slot launcher_slots[] = {
    {Py_tp_new, launcher_new},
    {Py_tp_dealloc, launcher_dealloc},
    {Py_tp_call, launcher_call},
    {Py_tp_doc, "A checked launch shape of one kernel: packs arguments and calls the driver."},
    {0, NULL},
};
static PyType_Spec launcher_spec = {
    "drvgemm.runtime._fastlaunch.Launcher", sizeof(Launcher), 0, Py_TPFLAGS_DEFAULT, launcher_slots,
};
static PyObject *launcher_type;

/* ------------------------------------------------------------------------ */
/* Encoder: cuTensorMapEncodeTiled for maps that differ only in their global
 * address (drvgemm/runtime/tensormap.py: MapEncoder, which validated every
 * other field once). */
typedef int (*cu_encode_fn)(void *, int, unsigned, void *, const uint64_t *, const uint64_t *,
                            const uint32_t *, const uint32_t *, int, int, int, int);

typedef struct {
    PyObject_HEAD
    cu_encode_fn fn;
    int dtype, interleave, swizzle, l2, oob;
    unsigned rank;
    uint64_t dims[5], strides[4];
    uint32_t box[5], estr[5];
    unsigned long long align;
} Encoder;

static int fill_u64(PyObject *seq, uint64_t *out, Py_ssize_t n) {
    PyObject *t = PySequence_Tuple(seq);
    if (t == NULL) return -1;
    if (PyTuple_Size(t) != n) {
        Py_DECREF(t);
        PyErr_SetString(PyExc_ValueError, "Encoder: a sequence of the wrong length");
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; ++i) {
        out[i] = PyLong_AsUnsignedLongLong(PyTuple_GetItem(t, i));
        if (PyErr_Occurred()) { Py_DECREF(t); return -1; }
    }
    Py_DECREF(t);
    return 0;
}

/* Encoder(fn_address, dtype, dims, strides, box, element_strides, interleave,
 *         swizzle, l2_promotion, oob_fill, align): the driver's enum values
 * as integers, dims innermost first. */
static PyObject *encoder_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    unsigned long long fn, align;
    int dtype, il, sw, l2, oob;
    PyObject *dims, *strides, *box, *estr;
    if (kwds != NULL && PyDict_Size(kwds) != 0) {
        PyErr_SetString(PyExc_TypeError, "Encoder takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "KiOOOOiiiiK", &fn, &dtype, &dims, &strides, &box, &estr, &il,
                          &sw, &l2, &oob, &align))
        return NULL;
    Py_ssize_t rank = PySequence_Size(dims);
    if (rank < 1 || rank > 5 || fn == 0 || align == 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "Encoder: rank 1..5");
        return NULL;
    }
    allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
    Encoder *E = (Encoder *)alloc(type, 0);
    if (E == NULL) return NULL;
    E->fn = (cu_encode_fn)(uintptr_t)fn;
    E->dtype = dtype; E->interleave = il; E->swizzle = sw; E->l2 = l2; E->oob = oob;
    E->rank = (unsigned)rank;
    E->align = align;
    uint64_t b[5], e[5];
    if (fill_u64(dims, E->dims, rank) < 0 || fill_u64(strides, E->strides, rank - 1) < 0 ||
        fill_u64(box, b, rank) < 0 || fill_u64(estr, e, rank) < 0) {
        Py_DECREF(E);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < rank; ++i) {
        E->box[i] = (uint32_t)b[i];
        E->estr[i] = (uint32_t)e[i];
    }
    return (PyObject *)E;
}

/* encoder(address) -> the 128 bytes of the map, or the CUresult (an int)
 * when the driver refused it; ValueError for a misaligned address. */
static PyObject *encoder_call(PyObject *self, PyObject *args, PyObject *kwds) {
    Encoder *E = (Encoder *)self;
    unsigned long long address;
    if (!PyArg_ParseTuple(args, "K", &address)) return NULL;
    if (address % E->align) {
        char msg[96];
        snprintf(msg, sizeof msg, "tensor map address 0x%llx is not %llu-byte aligned",
                 address, E->align);
        PyErr_SetString(PyExc_ValueError, msg);
        return NULL;
    }
    _Alignas(64) uint64_t map[16];
    memset(map, 0, sizeof map);
    int err = E->fn(map, E->dtype, E->rank, (void *)(uintptr_t)address, E->dims, E->strides,
                    E->box, E->estr, E->interleave, E->swizzle, E->l2, E->oob);
    if (err) return PyLong_FromLong(err);
    return PyBytes_FromStringAndSize((const char *)map, sizeof map);
}

static PyType_Slot encoder_slots[] = {
    {Py_tp_new, encoder_new},
    {Py_tp_call, encoder_call},
    {Py_tp_doc, "cuTensorMapEncodeTiled with every field but the address fixed."},
    {0, NULL},
};
static PyType_Spec encoder_spec = {
    "drvgemm.runtime._fastlaunch.Encoder", sizeof(Encoder), 0, Py_TPFLAGS_DEFAULT, encoder_slots,
};


/* ------------------------------------------------------------------------ */
/* launch(kernel, grid, block, args, *, smem=0, stream=None, cluster=None,
 *        attributes=(), cooperative=False) */
static PyObject *fast_launch(PyObject *module, PyObject *const *argv, Py_ssize_t nargs,
                             PyObject *kwnames) {
    PyObject *kernel, *grid, *block, *args, *smem = NULL, *stream = Py_None;
    int plain = nargs == 4, cooperative = 0;
    if (plain && kwnames != NULL) {
        Py_ssize_t nk = PyTuple_Size(kwnames);
        for (Py_ssize_t i = 0; i < nk && plain; ++i) {
            PyObject *name = PyTuple_GetItem(kwnames, i), *v = argv[nargs + i];
            if (PyUnicode_CompareWithASCIIString(name, "smem") == 0)
                smem = v;
            else if (PyUnicode_CompareWithASCIIString(name, "stream") == 0)
                stream = v;
            else if (PyUnicode_CompareWithASCIIString(name, "cluster") == 0)
                plain = v == Py_None;
            else if (PyUnicode_CompareWithASCIIString(name, "attributes") == 0)
                plain = PyObject_IsTrue(v) == 0;
            else if (PyUnicode_CompareWithASCIIString(name, "cooperative") == 0) {
                cooperative = PyObject_IsTrue(v);
                if (cooperative < 0) {   /* no truth value: Python says what is wrong */
                    PyErr_Clear();
                    plain = cooperative = 0;
                }
            } else
                plain = 0;
        }
    }
    if (plain && !(stream == Py_None || PyLong_CheckExact(stream))) plain = 0;
    if (plain && stream == Py_None && capturing > 0) plain = 0;
    if (!plain) goto slow;
    kernel = argv[0];
    grid = argv[1];
    block = argv[2];
    args = argv[3];
    PyObject *zero = NULL;
    if (smem == NULL) {
        zero = PyLong_FromLong(0);
        if (zero == NULL) return NULL;
        smem = zero;
    }
    PyObject *table = PyObject_GetAttr(kernel, str_fast);
    if (table == NULL) { Py_XDECREF(zero); PyErr_Clear(); goto slow; }
    PyObject *key = cooperative ? PyTuple_Pack(5, grid, block, smem, stream, str_cooperative)
                                : PyTuple_Pack(4, grid, block, smem, stream);
    Py_XDECREF(zero);
    if (key == NULL) { Py_DECREF(table); return NULL; }
    PyObject *L = PyDict_Check(table) ? PyDict_GetItemWithError(table, key) : NULL;
    Py_DECREF(key);
    Py_DECREF(table);
    if (L == NULL) {
        if (PyErr_Occurred()) PyErr_Clear();  /* an unhashable shape: the Python path */
        /* First launch of this shape: Python checks it and builds the launcher. */
        return call_py(py_first_launch, argv, nargs, kwnames);
    }
    if ((PyObject *)Py_TYPE(L) != launcher_type) goto slow;
    Launcher *lp = (Launcher *)L;
    if (lp->busy) goto slow;  /* another thread is mid-launch with this block */
    Py_INCREF(L);
    long err = pack_and_launch(lp, args);
    Py_DECREF(L);
    if (err < 0) return NULL;
    if (err == 0) Py_RETURN_NONE;
    /* Retry once through Python (a thread with no current context) or raise
     * the error with its hint: failed(err, kernel, grid, block, smem). */
    {
        PyObject *e = PyLong_FromLong(err);
        PyObject *sm = PyLong_FromUnsignedLong(lp->smem);
        if (e == NULL || sm == NULL) { Py_XDECREF(e); Py_XDECREF(sm); return NULL; }
        PyObject *r = PyObject_CallFunctionObjArgs(py_failed, e, kernel, grid, block, sm, NULL);
        Py_DECREF(e);
        Py_DECREF(sm);
        if (r == NULL) return NULL;
        Py_DECREF(r);
        return call_py(py_slow_launch, argv, nargs, kwnames);
    }
slow:
    return call_py(py_slow_launch, argv, nargs, kwnames);
}

/* bind(slow_launch, first_launch, failed): the Python functions the fast
 * path hands over to. */
static PyObject *bind(PyObject *module, PyObject *args) {
    PyObject *s, *f, *e;
    if (!PyArg_ParseTuple(args, "OOO", &s, &f, &e)) return NULL;
    Py_XDECREF(py_slow_launch);
    Py_XDECREF(py_first_launch);
    Py_XDECREF(py_failed);
    py_slow_launch = Py_NewRef(s);
    py_first_launch = Py_NewRef(f);
    py_failed = Py_NewRef(e);
    Py_RETURN_NONE;
}

/* set_capturing(n): how many threads are capturing a graph right now. */
static PyObject *set_capturing(PyObject *module, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    capturing = n;
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"launch", (PyCFunction)(void (*)(void))fast_launch, METH_FASTCALL | METH_KEYWORDS,
     "launch($module, kernel, grid, block, args, *, smem=0, stream=None, cluster=None,"
     " attributes=(), cooperative=False)\n--\n\n"
     "Launch ``kernel`` on ``grid`` x ``block`` with ``args`` (a sequence matching the\n"
     "kernel's parameters) and ``smem`` bytes of dynamic shared memory, on ``stream``\n"
     "(default: the legacy default stream). ``cluster`` (x, y, z) launches thread-block\n"
     "clusters through cuLaunchKernelEx. A kernel whose dependent_launch is True is\n"
     "launched with programmatic stream serialization (it waits for the grid before it).\n"
     "``cooperative=True`` launches cooperatively (every block resident at once).\n\n"
     "C fast path (drvgemm.runtime._fastlaunch): a shape seen before, with stream None or an\n"
     "integer handle, is packed and launched from C; everything else, and every error,\n"
     "goes through drvgemm.launch.launch_py."},
    {"bind", bind, METH_VARARGS, "bind(slow_launch, first_launch, failed)"},
    {"set_capturing", set_capturing, METH_O,
     "set_capturing(n): n threads capture graphs; stream=None then takes the Python path"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_fastlaunch", "drvgemm.launch's fast path in C.", -1, methods,
};

PyMODINIT_FUNC PyInit__fastlaunch(void) {
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    str_ptr = PyUnicode_InternFromString("ptr");
    str_param_bytes = PyUnicode_InternFromString("param_bytes");
    str_fast = PyUnicode_InternFromString("fast_launchers");
    str_cooperative = PyUnicode_InternFromString("cooperative");
    launcher_type = PyType_FromSpec(&launcher_spec);
    PyObject *encoder_type = PyType_FromSpec(&encoder_spec);
    if (str_ptr == NULL || str_param_bytes == NULL || str_fast == NULL ||
        str_cooperative == NULL || launcher_type == NULL || encoder_type == NULL ||
        PyModule_AddObject(m, "Launcher", Py_NewRef(launcher_type)) < 0 ||
        PyModule_AddObject(m, "Encoder", encoder_type) < 0 ||
        PyModule_AddObject(m, "COOPERATIVE_KEY", Py_NewRef(str_cooperative)) < 0 ||
        PyModule_AddIntConstant(m, "EX_DEPENDENT", EX_DEPENDENT) < 0 ||
        PyModule_AddIntConstant(m, "EX_COOPERATIVE", EX_COOPERATIVE) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
