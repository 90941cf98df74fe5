/* streams.c - the stream a call runs on, and the stream on which the arrays
 * it imported go back to their library. The rules are _streams.py's
 * (call_stream, release_on_producer): stream= if given; else the current
 * stream of the first CUDA array argument's library (PyTorch through its
 * DLPack exchange API, else the package's per-type getter); else the
 * device's default stream. What is rare (a stream= that is not an
 * oxide.Stream, a library without an exchange API) is asked of the package. */
#include "fast.h"

/* Replaces the call's stream object (stealing `obj`). */
static void set_stream_obj(fx_call *c, PyObject *obj) {
  PyObject *old = c->stream_obj;
  c->stream_obj = obj;
  Py_DECREF(old);
}

/* Foreign CUstreams already wrapped: the package keeps each wrapper for the
 * life of the process (_streams._WRAPPED), so the borrowed objects stay
 * valid. Beyond the table's size, the package is asked each time. */
enum { NWRAPPED = 64 };
static struct {
  ox_device dev;
  void *cu;
  ox_stream h;
  PyObject *obj; /* borrowed from _streams._WRAPPED */
} wrapped[NWRAPPED];
static int nwrapped;

int fx_wrapped_stream(fx_call *c, void *cu, ox_stream *h, PyObject **obj) {
  const fx_launcher *L = c->L;
  if ((uintptr_t)cu <= 1) { /* the legacy default stream: the device's default */
    *h = NULL;
    *obj = Py_None;
    return 0;
  }
  for (int i = 0; i < nwrapped; i++)
    if (wrapped[i].dev == L->device && wrapped[i].cu == cu) {
      *h = wrapped[i].h;
      *obj = wrapped[i].obj;
      return 0;
    }
  PyObject *dev = PyObject_GetAttr(L->sig, fxo.s_device);
  PyObject *s = dev ? PyObject_CallFunction(fxo.wrapped, "ON", dev, PyLong_FromVoidPtr(cu)) : NULL;
  Py_XDECREF(dev);
  PyObject *hv = s ? PyObject_GetAttr(s, fxo.s_h) : NULL;
  if (s)
    Py_DECREF(s); /* the package's table holds it */
  if (!hv)
    return -1;
  *h = PyLong_AsVoidPtr(hv);
  Py_DECREF(hv);
  if (PyErr_Occurred())
    return -1;
  *obj = s;
  if (nwrapped < NWRAPPED) {
    wrapped[nwrapped].dev = L->device;
    wrapped[nwrapped].cu = cu;
    wrapped[nwrapped].h = *h;
    wrapped[nwrapped].obj = s;
    nwrapped++;
  }
  return 0;
}

/* The package's stream getter of array type tp (_streams.stream_getter:
 * None when its library has no current stream Oxide knows), remembered by
 * type; borrowed; NULL on error. */
static PyObject *getter_of(PyTypeObject *tp) {
  PyObject *g = PyDict_GetItem(fxo.stream_getters, (PyObject *)tp); /* borrowed */
  if (!g) {
    g = PyObject_CallFunctionObjArgs(fxo.stream_getter, (PyObject *)tp, NULL);
    int bad = !g || PyDict_SetItem(fxo.stream_getters, (PyObject *)tp, g);
    Py_XDECREF(g); /* the dict holds it */
    if (bad)
      return NULL;
  }
  return g;
}

/* The call's stream by the package's rule (_streams.array_stream): array
 * x's library's current stream on x's own GPU, which may be another than
 * the kernel's module's (the launch then runs there). 1 when x's library
 * has one (made the call's stream; None: that GPU's default stream, which
 * the core picks from the tensors), 0 when not, -1 on error. */
static int array_stream(fx_call *c, PyObject *x) {
  PyObject *g = getter_of(Py_TYPE(x));
  if (!g)
    return -1;
  if (g == Py_None)
    return 0;
  PyObject *r = PyObject_CallFunctionObjArgs(fxo.array_stream, x, NULL);
  if (!r)
    return -1;
  PyObject *known = PyTuple_Check(r) && PyTuple_Size(r) == 2 ? PyTuple_GetItem(r, 0) : NULL; /* borrowed */
  int k = known ? PyObject_IsTrue(known) : -1;
  if (k < 0 && !PyErr_Occurred())
    PyErr_SetString(PyExc_TypeError, "oxide._streams.array_stream: not a (known, stream) pair");
  if (k > 0) {
    PyObject *s = PyTuple_GetItem(r, 1);
    if (s != Py_None) {
      PyObject *h = PyObject_GetAttr(s, fxo.s_h);
      c->stream = h && h != Py_None ? PyLong_AsVoidPtr(h) : NULL;
      Py_XDECREF(h);
      if (!h || PyErr_Occurred())
        k = -1;
      Py_INCREF(s);
      set_stream_obj(c, s);
    }
  }
  Py_DECREF(r);
  return k;
}

/* 1 and the current CUstream of array x's library on the call's device in
 * *cu; 0 when its library has none Oxide knows; -1 on error. Remembered
 * for the call's next array of the same type. */
static int producer_stream(fx_call *c, PyObject *x, void **cu) {
  PyTypeObject *tp = Py_TYPE(x);
  if (c->ptype == tp) {
    *cu = c->pcu;
    return c->pknown;
  }
  void *v = NULL;
  int known = fx_exchange_stream(x, c->L->ordinal, &v);
  if (known < 0)
    return -1;
  if (!known) {
    PyObject *g = getter_of(tp);
    if (!g)
      return -1;
    if (g != Py_None) {
      PyObject *dev = PyObject_GetAttr(c->L->sig, fxo.s_device);
      PyObject *r = dev ? PyObject_CallFunctionObjArgs(fxo.producer_stream, x, dev, NULL) : NULL;
      Py_XDECREF(dev);
      if (!r)
        return -1;
      if (r != Py_None) {
        v = PyLong_AsVoidPtr(r);
        known = 1;
      }
      Py_DECREF(r);
      if (PyErr_Occurred())
        return -1;
    }
  }
  c->ptype = tp;
  c->pcu = v;
  c->pknown = known;
  *cu = v;
  return known;
}

int fx_launch_stream(fx_call *c, PyObject *stream) {
  const fx_launcher *L = c->L;
  c->stream = NULL;
  c->ptype = NULL;
  if (stream != Py_None) {
    PyObject *s = stream;
    int is = PyObject_IsInstance(stream, fxo.stream_type);
    if (is < 0)
      return -1;
    if (is)
      Py_INCREF(s);
    else if (!(s = PyObject_CallFunctionObjArgs(fxo.call_stream, L->sig, fxo.empty, stream, NULL)))
      return -1; /* not a stream: the package's error */
    set_stream_obj(c, s);
    void *h;
    if (fx_handle(L, -1, s, &h))
      return -1; /* released */
    c->stream = h;
    return 0;
  }
  if (L->cpu)
    return 0;
  for (int i = 0; i < L->nparams; i++) {
    PyObject *x = c->bound[i];
    if (L->params[i].kind == OX_PARAM_SCALAR ||
        PyType_IsSubtype(Py_TYPE(x), (PyTypeObject *)fxo.tensor_type))
      continue;
    /* an array of another GPU than the module's (asked of its exchange API), or of a library
       without that API: the package's rule */
    int ordinal = L->ordinal, ex = fx_exchange_device(x, &ordinal);
    if (ex < 0)
      return -1;
    if (!ex || ordinal != L->ordinal) {
      int r = array_stream(c, x);
      if (r)
        return r < 0 ? -1 : 0;
      continue;
    }
    void *cu;
    int r = producer_stream(c, x, &cu);
    if (r <= 0) {
      if (r < 0)
        return -1;
      continue;
    }
    PyObject *obj;
    if (fx_wrapped_stream(c, cu, &c->stream, &obj))
      return -1;
    Py_INCREF(obj);
    set_stream_obj(c, obj);
    return 0;
  }
  return 0;
}

int fx_release_on_producer(fx_call *c, PyObject *x, ox_tensor h) {
  if (c->L->cpu)
    return 0;
  void *cu;
  int r = producer_stream(c, x, &cu);
  if (r < 0)
    return -1;
  if (!r) {
    if (!c->cai_stream)
      return 0; /* an unknown library: the core's default (a host wait) */
    cu = c->cai_stream;
  }
  ox_stream s;
  PyObject *obj;
  if (fx_wrapped_stream(c, cu, &s, &obj))
    return -1;
  ox_status st = fx.tensor_set_release_stream(h, s ? s : c->L->default_stream);
  return st ? fx_failure(c->L, st, 0) : 0;
}
