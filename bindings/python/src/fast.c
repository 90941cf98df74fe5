/* fast.c - the module oxide._fast: init() takes liboxide's function
 * addresses and the package's objects; errors are built by the package. */
#include "fast.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

PyTypeObject *fx_launcher_type;

/* The functions init() needs, by name, and where each goes in `fx`. */
static const struct {
  const char *name;
  size_t offset;
} functions[] = {
#define FN(field, name) {name, offsetof(fx_functions, field)}
    FN(version, "ox_version"),
    FN(last_error, "ox_last_error"),
    FN(kernel_num_params, "ox_kernel_num_params"),
    FN(kernel_param, "ox_kernel_param"),
    FN(launch, "ox_launch"),
    FN(launch_check, "ox_launch_check"),
    FN(launch_errors, "ox_launch_errors"),
    FN(tensor_from_dlpack, "ox_tensor_from_dlpack"),
    FN(tensor_release, "ox_tensor_release"),
    FN(stream_handle, "ox_stream_handle"),
    FN(stream_device, "ox_stream_device"),
    FN(stream_wait_stream, "ox_stream_wait_stream"),
    FN(tensor_set_release_stream, "ox_tensor_set_release_stream"),
    FN(cancel_on_sigint, "ox_cancel_on_sigint"),
#undef FN
};
#define NFUNCTIONS (sizeof functions / sizeof functions[0])

/* ------------------------------------------------------------------ init */

/* obj[key] as a new reference, or NULL with KeyError. */
static PyObject *item(PyObject *dict, const char *key) {
  PyObject *v = PyDict_GetItemString(dict, key); /* borrowed */
  if (!v) {
    PyErr_Format(PyExc_KeyError, "oxide._fast.init: no '%s'", key);
    return NULL;
  }
  Py_INCREF(v);
  return v;
}

static void set(PyObject **slot, PyObject *v) {
  PyObject *old = *slot;
  *slot = v;
  Py_XDECREF(old);
}

static int intern(PyObject **slot, const char *s) {
  PyObject *v = PyUnicode_InternFromString(s);
  set(slot, v);
  return v ? 0 : -1;
}

/* {"<f4": (kDLFloat, 32), ...}: the typestrs of the array interface this
 * module converts itself (native byte order, or none for one byte). */
static PyObject *make_typestrs(void) {
  static const struct {
    char kind;
    int code;
    int sizes[4];
  } kinds[] = {{'b', kDLBool, {1}}, {'i', kDLInt, {1, 2, 4, 8}}, {'u', kDLUInt, {1, 2, 4, 8}},
               {'f', kDLFloat, {2, 4, 8}}};
  const int one = 1;
  const char native = *(const char *)&one ? '<' : '>';
  const char orders[] = {native, '=', '|', native == '<' ? '>' : '<'};
  PyObject *d = PyDict_New();
  for (size_t k = 0; d && k < sizeof kinds / sizeof kinds[0]; k++)
    for (int s = 0; s < 4 && kinds[k].sizes[s]; s++)
      for (int o = 0; o < 4; o++) {
        int size = kinds[k].sizes[s];
        if (o == 3 && size > 1)
          continue; /* the other byte order: only where it does not matter */
        char key[16];
        snprintf(key, sizeof key, "%c%c%d", orders[o], kinds[k].kind, size);
        PyObject *v = Py_BuildValue("(ii)", kinds[k].code, 8 * size);
        if (!v || PyDict_SetItemString(d, key, v)) {
          Py_XDECREF(v);
          Py_CLEAR(d);
          return NULL;
        }
        Py_DECREF(v);
      }
  return d;
}

static int set_functions(PyObject *addresses) {
  if (!PyDict_Check(addresses)) {
    PyErr_SetString(PyExc_TypeError, "oxide._fast.init: functions must be a dict");
    return -1;
  }
  fx_functions f;
  for (size_t i = 0; i < NFUNCTIONS; i++) {
    PyObject *v = PyDict_GetItemString(addresses, functions[i].name);
    void *p = v ? PyLong_AsVoidPtr(v) : NULL;
    if (!p) {
      if (!PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "oxide._fast.init: no address for %s", functions[i].name);
      return -1;
    }
    /* a function pointer's bytes, from the data pointer ctypes gave (POSIX
     * makes the two interchangeable) */
    memcpy((char *)&f + functions[i].offset, &p, sizeof p);
  }
  fx = f;
  return 0;
}

/* The liboxide this module was built against and the one loaded must agree
 * on the structures it shares (ox_arg, ox_param_info, ox_launch_config). */
static int check_version(void) {
  char mine[32];
  snprintf(mine, sizeof mine, "%d.%d.%d", OX_VERSION_MAJOR, OX_VERSION_MINOR, OX_VERSION_PATCH);
  const char *theirs = fx.version();
  size_t n = strlen(mine);
  if (strncmp(theirs, mine, n) || (theirs[n] && theirs[n] != ' ')) {
    PyErr_Format(PyExc_ImportError,
                 "oxide._fast was built for liboxide %s, but liboxide %s is loaded", mine, theirs);
    return -1;
  }
  return 0;
}

static PyObject *init(PyObject *self, PyObject *args) {
  PyObject *addresses, *objects;
  if (!PyArg_ParseTuple(args, "OO!:init", &addresses, &PyDict_Type, &objects))
    return NULL;
  fx_ready = 0;
  if (set_functions(addresses) || check_version())
    return NULL;
  static const struct {
    PyObject **slot;
    const char *key;
  } objs[] = {
      {&fxo.tensor_type, "Tensor"},       {&fxo.scalar_type, "Scalar"},
      {&fxo.stream_type, "Stream"},       {&fxo.scalar_dtypes, "scalar_dtypes"},
      {&fxo.error, "error"},              {&fxo.failure, "failure"},
      {&fxo.convert_other, "convert_other"},
      {&fxo.call_stream, "call_stream"},   {&fxo.wrapped, "wrapped"},
      {&fxo.stream_getter, "stream_getter"}, {&fxo.producer_stream, "producer_stream"},
      {&fxo.array_stream, "array_stream"},
      {&fxo.type_kind, "type_kind"}, {&fxo.with_tiles, "with_tiles"},
  };
  for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++) {
    PyObject *v = item(objects, objs[i].key);
    if (!v)
      return NULL;
    set(objs[i].slot, v);
  }
  PyObject *no = item(objects, "no_ordering");
  if (!no)
    return NULL;
  fxo.no_ordering = PyObject_IsTrue(no);
  Py_DECREF(no);
  if (!PyType_Check(fxo.tensor_type) || !PyType_Check(fxo.scalar_type) ||
      !PyType_Check(fxo.stream_type) || !PyDict_Check(fxo.scalar_dtypes)) {
    PyErr_SetString(PyExc_TypeError, "oxide._fast.init: Tensor, Scalar and Stream must be "
                                     "classes, scalar_dtypes a dict");
    return NULL;
  }
  static const struct {
    PyObject **slot;
    const char *s;
  } names[] = {
      {&fxo.s_h, "_h"},
      {&fxo.s_value, "value"},
      {&fxo.s_dlpack, "__dlpack__"},
      {&fxo.s_dlpack_device, "__dlpack_device__"},
      {&fxo.s_cai, "__cuda_array_interface__"},
      {&fxo.s_ai, "__array_interface__"},
      {&fxo.s_exchange, "__dlpack_c_exchange_api__"},
      {&fxo.s_stream, "stream"},
      {&fxo.s_grid, "grid"},
      {&fxo.s_block, "block"},
      {&fxo.s_device, "device"},
      {&fxo.s_max_version, "max_version"},
      {&fxo.s_shape, "shape"},
      {&fxo.s_typestr, "typestr"},
      {&fxo.s_data, "data"},
      {&fxo.s_strides, "strides"},
      {&fxo.s_mask, "mask"},
  };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (intern(names[i].slot, names[i].s))
      return NULL;
  set(&fxo.typestrs, make_typestrs());
  set(&fxo.exchange_apis, PyDict_New());
  set(&fxo.stream_getters, PyDict_New());
  set(&fxo.type_kinds, PyDict_New());
  set(&fxo.empty, PyTuple_New(0));
  set(&fxo.max_version, Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION));
  set(&fxo.kw_cpu, fxo.max_version
                       ? Py_BuildValue("{O:O,O:O}", fxo.s_stream, Py_None, fxo.s_max_version,
                                       fxo.max_version)
                       : NULL);
  set(&fxo.kw_cpu_legacy, Py_BuildValue("{O:O}", fxo.s_stream, Py_None));
  if (!fxo.typestrs || !fxo.exchange_apis || !fxo.stream_getters || !fxo.type_kinds || !fxo.empty || !fxo.kw_cpu || !fxo.kw_cpu_legacy)
    return NULL;
  fx_ready = 1;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"init", init, METH_VARARGS,
     "init(functions, objects): liboxide's function addresses ({name: int}, the names in "
     "FUNCTIONS) and the package's objects; call once, before making launchers."},
    {"dlpack_capsule", fx_dlpack_capsule, METH_VARARGS,
     "dlpack_capsule(address, versioned): a DLPack capsule (\"dltensor_versioned\" or "
     "\"dltensor\") owning the managed tensor at `address` until a consumer renames it; its "
     "destructor is C, and keeps a pending exception (a consumer's refusal) intact."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "oxide._fast",
    "The launch path of the oxide package in C (see bindings/python/src/fast.h).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fast(void);
PyMODINIT_FUNC PyInit__fast(void) {
  PyObject *m = PyModule_Create(&module);
  if (!m)
    return NULL;
  PyObject *launcher = PyType_FromSpec(&fx_launcher_spec);
  PyObject *names = PyTuple_New((Py_ssize_t)NFUNCTIONS);
  for (size_t i = 0; names && i < NFUNCTIONS; i++) {
    PyObject *s = PyUnicode_FromString(functions[i].name);
    if (!s || PyTuple_SetItem(names, (Py_ssize_t)i, s)) /* steals s */
      Py_CLEAR(names);
  }
  fx_launcher_type = (PyTypeObject *)launcher;
  if (!launcher || !names || PyModule_AddObject(m, "Launcher", launcher)) {
    Py_XDECREF(launcher);
    Py_XDECREF(names);
    Py_DECREF(m);
    return NULL;
  }
  if (PyModule_AddObject(m, "FUNCTIONS", names)) {
    Py_DECREF(names);
    Py_DECREF(m);
    return NULL;
  }
  if (PyModule_AddIntConstant(m, "ABI", FX_ABI) ||
      PyModule_AddIntConstant(m, "MAX_PARAMS", FX_MAX_PARAMS)) {
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
