/* exchange.c - DLPack's C exchange API (DLPack 1.3): a producer's type may
 * offer `__dlpack_c_exchange_api__`, a PyCapsule named "dlpack_exchange_api"
 * holding a table of C functions, to hand over a managed tensor without
 * calling into Python (PyTorch 2.11 offers one on torch.Tensor).
 *
 * The table's layout is DLPack's (dlpack.h, DLPackExchangeAPI), declared
 * here because Oxide's dlpack/dlpack.h is the 1.1 ABI: a header (version,
 * and a pointer to an older table) then five function pointers. A consumer
 * must use a table whose major version is its own (walking prev_api to find
 * one), look the attribute up on the type, and may cache it per type.
 *
 * The functions do no stream synchronization ("no_sync"): the consumer is
 * to launch on the producer's current work stream. Oxide launches on the
 * call's stream (the device's default unless stream= says otherwise), so a
 * CUDA tensor takes this path only when the producer's current stream is
 * that stream; otherwise its deleter runs and the tensor takes the
 * __dlpack__ path, where the producer orders its work before the launch's
 * stream. CPU tensors need no ordering.
 *
 * Not testable without a producer that offers the API (tests/python/
 * test_launch.py has a test that runs where torch is importable). */
#include "fast.h"

#include <stdlib.h>

typedef struct fx_dlx_header {
  DLPackVersion version;
  struct fx_dlx_header *prev_api;
} fx_dlx_header;

typedef struct fx_dlx {
  fx_dlx_header header;
  int (*managed_tensor_allocator)(DLTensor *prototype, DLManagedTensorVersioned **out,
                                  void *error_ctx,
                                  void (*set_error)(void *error_ctx, const char *kind,
                                                    const char *message));
  /* 0 and an owning *out, or -1 with a Python exception set */
  int (*managed_tensor_from_py_object_no_sync)(void *py_object, DLManagedTensorVersioned **out);
  int (*managed_tensor_to_py_object_no_sync)(DLManagedTensorVersioned *tensor, void **out);
  int (*dltensor_from_py_object_no_sync)(void *py_object, DLTensor *out); /* may be NULL */
  /* the producer's current stream of a device (a cudaStream_t; NULL for the
   * legacy default stream), or -1 with a Python exception set */
  int (*current_work_stream)(DLDeviceType device_type, int32_t device_id, void **out);
} fx_dlx;

static const char CAPSULE[] = "dlpack_exchange_api";

/* The table of major version 1 behind a capsule, or NULL. */
static const fx_dlx *table(PyObject *cap) {
  if (!PyCapsule_IsValid(cap, CAPSULE))
    return NULL;
  const fx_dlx_header *h = PyCapsule_GetPointer(cap, CAPSULE);
  while (h && h->version.major != DLPACK_MAJOR_VERSION)
    h = h->prev_api;
  const fx_dlx *api = (const fx_dlx *)h;
  return api && api->managed_tensor_from_py_object_no_sync && api->current_work_stream ? api
                                                                                        : NULL;
}

/* The exchange API of x's type (cached per type), or NULL; -1 on error. */
static int api_of(PyObject *x, const fx_dlx **out) {
  PyObject *type = (PyObject *)Py_TYPE(x);
  PyObject *cached = PyDict_GetItem(fxo.exchange_apis, type); /* borrowed */
  if (!cached) {
    /* looked up on the type, as the protocol says: never the instance */
    cached = PyObject_GetAttr(type, fxo.s_exchange);
    if (!cached) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError))
        return -1;
      PyErr_Clear();
      cached = Py_None;
      Py_INCREF(cached);
    }
    if (cached != Py_None && !table(cached)) {
      Py_DECREF(cached); /* not a table this module can use */
      cached = Py_None;
      Py_INCREF(cached);
    }
    int bad = PyDict_SetItem(fxo.exchange_apis, type, cached);
    Py_DECREF(cached); /* the cache holds it */
    if (bad)
      return -1;
  }
  *out = cached == Py_None ? NULL : table(cached);
  return 0;
}

/* The deleter of a borrowed tensor: only the struct is Oxide's. */
static void borrowed_deleter(DLManagedTensorVersioned *m) { free(m); }

/* 1 if a CUDA tensor on `d` may be used on the call's stream without
 * ordering (the producer's current stream is that stream), 0 if not, -1 on
 * error. */
static int on_current_stream(fx_call *c, const fx_dlx *api, DLDevice d) {
  void *theirs = NULL;
  if (d.device_type != kDLCUDA || d.device_id != c->L->ordinal ||
      (c->stream && fx.stream_device(c->stream) != c->L->device))
    return 0;
  if (api->current_work_stream(kDLCUDA, d.device_id, &theirs))
    return -1;
  return theirs == fx.stream_handle(fx_call_stream(c));
}

int fx_exchange_import(fx_call *c, PyObject *x, DLManagedTensorVersioned **out) {
  const fx_dlx *api;
  *out = NULL;
  if (api_of(x, &api))
    return -1;
  if (!api)
    return 0;
  if (api->dltensor_from_py_object_no_sync) {
    /* Borrowed: the producer's DLTensor, filled in place, no allocation or
     * reference on its side. The call holds x, and the memory's later reuse
     * by the producer is ordered on the stream the launch runs on (its
     * current one), as for the producer's own operations; on the CPU the
     * launch is done before the call returns. Oxide copies the shape and
     * strides, so only this struct is its own. */
    DLTensor dl;
    if (api->dltensor_from_py_object_no_sync(x, &dl)) {
      if (!PyErr_Occurred())
        PyErr_SetString(PyExc_BufferError, "__dlpack_c_exchange_api__: the producer gave no tensor");
      return -1;
    }
    if (!c->L->cpu) {
      int ok = on_current_stream(c, api, dl.device);
      if (ok <= 0)
        return ok; /* another device, or work to order first: the __dlpack__ path */
    }
    DLManagedTensorVersioned *m = calloc(1, sizeof *m);
    if (!m) {
      PyErr_NoMemory();
      return -1;
    }
    m->version.major = DLPACK_MAJOR_VERSION;
    m->version.minor = DLPACK_MINOR_VERSION;
    m->dl_tensor = dl;
    m->deleter = borrowed_deleter;
    *out = m;
    return 1;
  }
  DLManagedTensorVersioned *m = NULL;
  if (api->managed_tensor_from_py_object_no_sync(x, &m) || !m) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_BufferError, "__dlpack_c_exchange_api__: the producer gave no tensor");
    return -1;
  }
  if (!c->L->cpu) {
    int ok = on_current_stream(c, api, m->dl_tensor.device);
    if (ok <= 0) { /* another device, or work to order first: the __dlpack__ path */
      if (m->deleter)
        m->deleter(m);
      return ok;
    }
  }
  *out = m;
  return 1;
}

int fx_exchange_device(PyObject *x, int *ordinal) {
  const fx_dlx *api;
  if (api_of(x, &api))
    return -1;
  if (!api || !api->dltensor_from_py_object_no_sync)
    return 0;
  DLTensor dl;
  if (api->dltensor_from_py_object_no_sync(x, &dl)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_BufferError, "__dlpack_c_exchange_api__: the producer gave no tensor");
    return -1;
  }
  if (dl.device.device_type == kDLCUDA)
    *ordinal = dl.device.device_id;
  return 1;
}

int fx_exchange_stream(PyObject *x, int ordinal, void **cu) {
  const fx_dlx *api;
  *cu = NULL;
  if (api_of(x, &api))
    return -1;
  if (!api)
    return 0;
  if (api->current_work_stream(kDLCUDA, ordinal, cu)) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_RuntimeError, "__dlpack_c_exchange_api__: current_work_stream failed");
    return -1;
  }
  return 1;
}
