/* common.c - what every file of the extension uses: liboxide's functions and
 * the package's objects (filled by fast.c's init()), the package's errors
 * (built by its Python code), and the parts of one launch call's state that
 * the argument converters share (its stream, the tensors it imported, the
 * handles of oxide objects). It calls no other file of the extension. */
#include "fast.h"

#include <assert.h>
#include <string.h>

fx_functions fx;
int fx_ready;
fx_objects fxo;

/* Raises the exception `exc` (an instance), stealing the reference. */
static void raise_instance(PyObject *exc) {
  if (!exc)
    return; /* building it failed: that error stands */
  PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
  Py_DECREF(exc);
}

int fx_error(const fx_launcher *L, const char *code, int index, PyObject *value, PyObject *extra) {
  raise_instance(PyObject_CallFunction(fxo.error, "OsiOO", L->sig, code, index,
                                       value ? value : Py_None, extra ? extra : Py_None));
  return -1;
}

int fx_failure(const fx_launcher *L, ox_status status, int config_null) {
  /* ox_last_error is per thread: this is the thread that made the call */
  const char *msg = fx.last_error();
  PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)strlen(msg), "replace");
  if (!text)
    return -1;
  raise_instance(PyObject_CallFunction(fxo.failure, "OiOO", L->sig, (int)status, text,
                                       config_null ? Py_True : Py_False));
  Py_DECREF(text);
  return -1;
}

ox_stream fx_call_stream(const fx_call *c) {
  return c->stream ? c->stream : c->L->default_stream;
}

void fx_adopt(fx_call *c, ox_tensor h, ox_arg *a) {
  assert(c->ntemps < FX_MAX_PARAMS);
  c->temps[c->ntemps++] = h;
  a->kind = OX_ARG_TENSOR;
  a->dtype = OX_F32;
  a->v.tensor = h;
}

/* Raises the package's error for released `what` ("tensor", "stream" or
 * "kernel"; index: the argument, or -1); returns -1. */
int fx_released(const fx_launcher *L, int index, PyObject *x, const char *what) {
  PyObject *w = PyUnicode_FromString(what);
  if (w) {
    fx_error(L, "released", index, x, w);
    Py_DECREF(w);
  }
  return -1;
}

/* The handle (_h) of an oxide.Tensor or oxide.Stream into *h, or the
 * package's error naming argument i (-1: stream=) when it was released
 * (the slot deleted: generic lookup, past the package's __getattr__). */
int fx_handle(const fx_launcher *L, int i, PyObject *x, void **h) {
  PyObject *v = PyObject_GenericGetAttr(x, fxo.s_h);
  if (!v) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError))
      return -1;
    PyErr_Clear();
  }
  if (!v || v == Py_None) {
    Py_XDECREF(v);
    return fx_released(L, i, x, i < 0 ? "stream" : "tensor");
  }
  *h = PyLong_AsVoidPtr(v);
  Py_DECREF(v);
  return PyErr_Occurred() ? -1 : 0;
}

