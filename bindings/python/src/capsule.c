/* capsule.c - the DLPack capsules of Oxide's exports (Tensor.__dlpack__),
 * made in C so that their destructor is C.
 *
 * The Python array API's rule: the producer returns a capsule named
 * "dltensor_versioned" (or "dltensor") holding the managed tensor; a consumer
 * that takes the tensor over renames it "used_..."; the capsule's destructor
 * runs the managed tensor's deleter only for a capsule still under its first
 * name. A consumer that refuses the tensor after taking the capsule (NumPy
 * for bf16 and fp8: "Unsupported dtype in DLTensor") drops it while its own
 * exception is pending. A destructor written in Python (a ctypes callback)
 * cannot run then: its first call fails on the pending exception, the
 * tensor is never freed, and the consumer's exception is lost (NumPy then
 * reports a SystemError). This one saves the pending exception, deletes the
 * tensor, and puts the exception back. */
#include "fast.h"

static const char NAME_VERSIONED[] = "dltensor_versioned", NAME_LEGACY[] = "dltensor";

static void capsule_destructor(PyObject *cap) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback); /* the consumer's exception, if any */
  /* IsValid sets no error; GetPointer cannot fail once it holds */
  if (PyCapsule_IsValid(cap, NAME_VERSIONED)) {
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, NAME_VERSIONED);
    if (m && m->deleter)
      m->deleter(m);
  } else if (PyCapsule_IsValid(cap, NAME_LEGACY)) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, NAME_LEGACY);
    if (m && m->deleter)
      m->deleter(m);
  } /* else renamed "used_...": the consumer owns the tensor */
  PyErr_Restore(type, value, traceback);
}

PyObject *fx_dlpack_capsule(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *address;
  int versioned;
  if (!PyArg_ParseTuple(args, "Op:dlpack_capsule", &address, &versioned))
    return NULL;
  void *managed = PyLong_AsVoidPtr(address);
  if (!managed) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_ValueError, "dlpack_capsule: the managed tensor's address is 0");
    return NULL;
  }
  PyObject *cap = PyCapsule_New(managed, versioned ? NAME_VERSIONED : NAME_LEGACY,
                                capsule_destructor);
  if (!cap) {
    /* the capsule was to own it: nobody else will free it */
    if (versioned) {
      DLManagedTensorVersioned *m = managed;
      if (m->deleter)
        m->deleter(m);
    } else {
      DLManagedTensor *m = managed;
      if (m->deleter)
        m->deleter(m);
    }
  }
  return cap;
}
