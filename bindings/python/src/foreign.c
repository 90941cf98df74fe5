/* foreign.c - foreign arrays for tensor parameters, imported for one launch
 * without a copy and released once it is queued (the import keeps the
 * producer's memory alive as long as Oxide uses it).
 *
 * In order: DLPack's C exchange API (exchange.c), __dlpack__ (a versioned
 * capsule when the producer takes max_version, else a legacy one; the
 * capsule is renamed "used_..." when taken, as the DLPack Python spec says),
 * __cuda_array_interface__ (v2, v3) and NumPy's __array_interface__ (v3),
 * wrapped as DLPack tensors whose deleter drops the reference to the array.
 * What is unusual (a CUDA array of another device, an interface dict that
 * is not well formed...) goes to the package's conversion
 * (_args.convert_other), which imports it or says what is wrong: both paths
 * give the same result. */
#include "fast.h"

#include <stdlib.h>
#include <string.h>

static const char NAME_VERSIONED[] = "dltensor_versioned", NAME_LEGACY[] = "dltensor",
                  USED_VERSIONED[] = "used_dltensor_versioned", USED_LEGACY[] = "used_dltensor";

/* *out = getattr(x, name), or NULL when x has no such attribute; -1 on
 * another error. */
static int attr(PyObject *x, PyObject *name, PyObject **out) {
  *out = PyObject_GetAttr(x, name);
  if (*out)
    return 0;
  if (!PyErr_ExceptionMatches(PyExc_AttributeError))
    return -1;
  PyErr_Clear();
  return 0;
}

/* Hands a managed tensor to Oxide (which owns it from here on, even when
 * it refuses it) and makes the result an argument of the call. */
static int import_managed(fx_call *c, void *managed, int versioned, ox_arg *a) {
  ox_tensor h = NULL;
  ox_status st = fx.tensor_from_dlpack(managed, versioned, &h);
  if (st)
    return fx_failure(c->L, st, 0);
  fx_adopt(c, h, a);
  return 1;
}

static int import_capsule(fx_call *c, PyObject *cap, ox_arg *a) {
  int versioned;
  if (PyCapsule_IsValid(cap, NAME_VERSIONED))
    versioned = 1;
  else if (PyCapsule_IsValid(cap, NAME_LEGACY))
    versioned = 0;
  else {
    PyErr_SetString(PyExc_ValueError, "__dlpack__ returned no unused DLPack capsule (a capsule "
                                      "can be imported only once)");
    return -1;
  }
  void *managed = PyCapsule_GetPointer(cap, versioned ? NAME_VERSIONED : NAME_LEGACY);
  if (!managed)
    return -1;
  /* consumed: the capsule's destructor must no longer delete it (the names
   * are static: the capsule keeps the pointer) */
  if (PyCapsule_SetName(cap, versioned ? USED_VERSIONED : USED_LEGACY))
    return -1;
  return import_managed(c, managed, versioned, a);
}

/* The __dlpack__ stream argument of a CUDA launch: the launch's stream as
 * the array API says it (1: the legacy default stream). */
static PyObject *stream_int(const fx_call *c) {
  if (fxo.no_ordering)
    return PyLong_FromLong(-1); /* the debugging switch: no ordering asked for */
  void *cu = fx.stream_handle(fx_call_stream(c));
  return cu ? PyLong_FromVoidPtr(cu) : PyLong_FromLong(1);
}

/* 1 if the array (its __dlpack_device__) is on the launch's CUDA device, 0
 * if not or if it does not say so plainly, -1 on error. */
static int on_launch_device(const fx_call *c, PyObject *x) {
  PyObject *fn, *dev;
  if (attr(x, fxo.s_dlpack_device, &fn))
    return -1;
  if (!fn)
    return 0;
  dev = PyObject_CallObject(fn, NULL);
  Py_DECREF(fn);
  if (!dev)
    return -1;
  int ok = 0;
  if (PyTuple_Check(dev) && PyTuple_Size(dev) == 2) {
    long type = PyLong_AsLong(PyTuple_GetItem(dev, 0));
    long id = PyLong_AsLong(PyTuple_GetItem(dev, 1));
    if (PyErr_Occurred())
      PyErr_Clear(); /* not plain ints: the package's conversion says so */
    else
      ok = type == kDLCUDA && id == c->L->ordinal;
  }
  Py_DECREF(dev);
  return ok;
}

static int import_dlpack(fx_call *c, PyObject *x, PyObject *method, ox_arg *a) {
  PyObject *kw, *legacy;
  if (c->L->cpu) {
    kw = fxo.kw_cpu; /* on the CPU, work is done when queued: no stream */
    legacy = fxo.kw_cpu_legacy;
    Py_INCREF(kw);
    Py_INCREF(legacy);
  } else {
    /* a CUDA launch: the producer orders its work before the launch's
     * stream, which must be of the array's device (else the package's
     * conversion handles it) */
    if (c->stream && fx.stream_device(c->stream) != c->L->device)
      return 0;
    int on = on_launch_device(c, x);
    if (on <= 0)
      return on;
    PyObject *s = stream_int(c);
    if (!s)
      return -1;
    kw = Py_BuildValue("{O:O,O:O}", fxo.s_stream, s, fxo.s_max_version, fxo.max_version);
    legacy = Py_BuildValue("{O:O}", fxo.s_stream, s);
    Py_DECREF(s);
    if (!kw || !legacy) {
      Py_XDECREF(kw);
      Py_XDECREF(legacy);
      return -1;
    }
  }
  PyObject *cap = PyObject_Call(method, fxo.empty, kw);
  if (!cap && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear(); /* a producer older than max_version (DLPack < 1.0) */
    cap = PyObject_Call(method, fxo.empty, legacy);
  }
  Py_DECREF(kw);
  Py_DECREF(legacy);
  if (!cap)
    return -1;
  int r = import_capsule(c, cap, a);
  Py_DECREF(cap);
  return r;
}

/* ------------------------------------------------------------ array interfaces */

/* A managed tensor made for an array interface, with its shape and strides,
 * holding a reference to the array. */
typedef struct owned {
  DLManagedTensorVersioned m;
  int64_t shape[OX_MAX_DIMS];
  int64_t strides[OX_MAX_DIMS];
  PyObject *array;
} owned;

static void owned_deleter(DLManagedTensorVersioned *self) {
  owned *o = (owned *)self;
  /* Oxide may drop its last reference on a thread without the GIL; after
   * the interpreter is gone, the array is gone with it */
  if (Py_IsInitialized()) {
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF(o->array);
    PyGILState_Release(g);
  }
  free(o);
}

/* Makes the launch's stream wait, on the GPU, for the work queued on CUDA
 * stream `cu` (a __cuda_array_interface__ v3 "stream": 1 the legacy default
 * stream, 2 the per-thread one, else a CUstream). As _args._wait_for. */
static int wait_for(fx_call *c, void *cu) {
  ox_stream s = fx_call_stream(c);
  void *mine = fx.stream_handle(s);
  if (fxo.no_ordering || (mine ? mine : (void *)1) == cu)
    return 0;
  ox_stream w;
  PyObject *obj;
  if (fx_wrapped_stream(c, cu, &w, &obj))
    return -1;
  ox_status st = fx.stream_wait_stream(s, w ? w : c->L->default_stream);
  return st ? fx_failure(c->L, st, 0) : 0;
}

/* An exact int >= 0 (for sizes) or any exact int, as a long long; 0 if x
 * is none. */
static int exact_int(PyObject *x, long long *out) {
  if (!PyLong_CheckExact(x))
    return 0;
  int ovf;
  *out = PyLong_AsLongLongAndOverflow(x, &ovf);
  if (*out == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  return !ovf;
}

/* Imports a well-formed interface dict (returns 0 for anything else, which
 * the package's conversion takes: _args.parse_interface has the rules). */
static int import_interface(fx_call *c, PyObject *x, PyObject *iface, int cuda, ox_arg *a) {
  if (!PyDict_Check(iface))
    return 0;
  PyObject *shape = PyDict_GetItem(iface, fxo.s_shape); /* borrowed */
  PyObject *typestr = PyDict_GetItem(iface, fxo.s_typestr);
  PyObject *data = PyDict_GetItem(iface, fxo.s_data);
  PyObject *strides = PyDict_GetItem(iface, fxo.s_strides);
  PyObject *mask = PyDict_GetItem(iface, fxo.s_mask);
  PyObject *stream = cuda ? PyDict_GetItem(iface, fxo.s_stream) : NULL;
  if (!shape || !typestr || !data || (mask && mask != Py_None) || !PyTuple_Check(shape) ||
      !PyUnicode_Check(typestr) || !PyTuple_Check(data) || PyTuple_Size(data) != 2 ||
      (strides && strides != Py_None && !PyTuple_Check(strides)))
    return 0;
  PyObject *type = PyDict_GetItem(fxo.typestrs, typestr); /* (code, bits) */
  if (!type)
    return 0;
  Py_ssize_t ndim = PyTuple_Size(shape);
  if (ndim > OX_MAX_DIMS || (strides && strides != Py_None && PyTuple_Size(strides) != ndim))
    return 0;
  int code = (int)PyLong_AsLong(PyTuple_GetItem(type, 0));
  int bits = (int)PyLong_AsLong(PyTuple_GetItem(type, 1));
  long long size = bits / 8, addr, v, cu = 0;
  PyObject *ro = PyTuple_GetItem(data, 1);
  if (!exact_int(PyTuple_GetItem(data, 0), &addr) || addr < 0 || !PyBool_Check(ro))
    return 0;
  if (stream && stream != Py_None && (!exact_int(stream, &cu) || cu <= 0))
    return 0;
  owned o;
  memset(&o, 0, sizeof o);
  for (Py_ssize_t d = 0; d < ndim; d++) {
    if (!exact_int(PyTuple_GetItem(shape, d), &v) || v < 0)
      return 0;
    o.shape[d] = v;
    if (strides && strides != Py_None) {
      if (!exact_int(PyTuple_GetItem(strides, d), &v) || v % size)
        return 0;
      o.strides[d] = v / size;
    }
  }
  /* the interface names no device: a CUDA pointer is taken to be on the
   * launch's device (a launch on another one fails to run with it) */
  if (cuda && cu && !c->L->cpu && wait_for(c, (void *)(intptr_t)cu))
    return -1;
  c->cai_stream = cuda ? (void *)(intptr_t)cu : NULL;
  owned *p = malloc(sizeof *p);
  if (!p) {
    PyErr_NoMemory();
    return -1;
  }
  *p = o;
  p->m.version.major = DLPACK_MAJOR_VERSION;
  p->m.version.minor = DLPACK_MINOR_VERSION;
  p->m.deleter = owned_deleter;
  p->m.flags = ro == Py_True ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
  DLTensor *t = &p->m.dl_tensor;
  t->data = (void *)(intptr_t)addr;
  t->device.device_type = cuda ? kDLCUDA : kDLCPU;
  t->device.device_id = cuda && !c->L->cpu ? c->L->ordinal : 0;
  t->ndim = (int32_t)ndim;
  t->dtype.code = (uint8_t)code;
  t->dtype.bits = (uint8_t)bits;
  t->dtype.lanes = 1;
  t->shape = p->shape;
  t->strides = strides && strides != Py_None ? p->strides : NULL;
  Py_INCREF(x);
  p->array = x;
  return import_managed(c, &p->m, 1, a);
}

/* ------------------------------------------------------------ import */

/* Imports x by the first protocol it offers (see the top). */
static int import_any(fx_call *c, PyObject *x, ox_arg *a) {
  DLManagedTensorVersioned *managed;
  int r = fx_exchange_import(c, x, &managed);
  if (r)
    return r < 0 ? -1 : import_managed(c, managed, 1, a);
  PyObject *v;
  if (attr(x, fxo.s_dlpack, &v))
    return -1;
  if (v) {
    r = import_dlpack(c, x, v, a);
    Py_DECREF(v);
    return r;
  }
  for (int cuda = 1; cuda >= 0; cuda--) {
    if (attr(x, cuda ? fxo.s_cai : fxo.s_ai, &v))
      return -1;
    if (v && v != Py_None) {
      r = import_interface(c, x, v, cuda, a);
      Py_DECREF(v);
      return r;
    }
    Py_XDECREF(v);
  }
  return 0;
}

int fx_import(fx_call *c, int i, PyObject *x, ox_arg *a) {
  (void)i;
  c->cai_stream = NULL;
  int r = import_any(c, x, a);
  if (r <= 0)
    return r;
  /* released at the end of the call: on its library's stream, no host wait */
  return fx_release_on_producer(c, x, a->v.tensor) ? -1 : 1;
}
