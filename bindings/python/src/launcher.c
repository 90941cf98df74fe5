/* launcher.c - the Launcher type: one per kernel, made once; each call
 * binds the arguments, converts them, and queues the launch.
 *
 * The steps and their order are _args.prepare's (the pure path): bind
 * (too many, unknown or repeated names, missing ones), the grid and block,
 * the stream, then each argument in parameter order, then ox_launch. */
#include "fast.h"

/* the C extension holds one ox_cancel_on_sigint(1) from its first CPU launch on
   (under the GIL) */
static int sigint_kept;

#include <assert.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------ construction */

/* Launcher(prototype): a copy of another launcher (of this type or a
 * subclass: oxide.Kernel is one), which costs no lookup of the signature. */
static PyObject *launcher_copy(PyTypeObject *type, PyObject *proto) {
  fx_launcher *from = (fx_launcher *)proto;
  fx_launcher *L = (fx_launcher *)PyType_GenericAlloc(type, 0);
  if (!L)
    return NULL;
  L->sig = from->sig;
  L->names = from->names;
  L->proto = from->proto ? from->proto : proto; /* the one its module releases */
  Py_INCREF(L->sig);
  Py_INCREF(L->names);
  Py_INCREF(L->proto);
  L->kernel = from->kernel;
  L->device = from->device;
  L->default_stream = from->default_stream;
  L->cpu = from->cpu;
  L->ordinal = from->ordinal;
  L->tile = from->tile;
  L->nparams = from->nparams;
  memcpy(L->params, from->params, sizeof L->params);
  return (PyObject *)L;
}

static PyObject *launcher_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  PyObject *sig, *kernel, *device, *stream;
  int cpu, ordinal;
  if (!fx_ready) {
    PyErr_SetString(PyExc_RuntimeError, "oxide._fast: init() has not been called");
    return NULL;
  }
  if (kwargs && PyDict_Size(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "Launcher() takes no keyword arguments");
    return NULL;
  }
  if (PyTuple_Size(args) == 1) {
    PyObject *proto = PyTuple_GetItem(args, 0);
    if (!PyType_IsSubtype(Py_TYPE(proto), fx_launcher_type)) {
      PyErr_SetString(PyExc_TypeError, "Launcher(prototype): not a Launcher");
      return NULL;
    }
    return launcher_copy(type, proto);
  }
  if (!PyArg_ParseTuple(args, "OO!O!iiO!:Launcher", &sig, &PyLong_Type, &kernel, &PyLong_Type,
                        &device, &cpu, &ordinal, &PyLong_Type, &stream))
    return NULL;
  ox_kernel k = PyLong_AsVoidPtr(kernel);
  ox_device dev = PyLong_AsVoidPtr(device);
  ox_stream s = PyLong_AsVoidPtr(stream);
  if (PyErr_Occurred())
    return NULL;
  int n = fx.kernel_num_params(k);
  if (n < 0 || n > FX_MAX_PARAMS) {
    if (n < 0)
      PyErr_SetString(PyExc_ValueError, fx.last_error());
    else
      PyErr_Format(PyExc_ValueError, "a kernel of %d parameters (at most %d)", n, FX_MAX_PARAMS);
    return NULL;
  }
  fx_launcher *L = (fx_launcher *)PyType_GenericAlloc(type, 0);
  if (!L)
    return NULL;
  Py_INCREF(sig);
  L->sig = sig;
  L->kernel = k;
  L->device = dev;
  L->default_stream = s;
  L->cpu = cpu != 0;
  L->ordinal = ordinal;
  L->nparams = n;
  L->names = PyTuple_New(n);
  if (!L->names)
    goto fail;
  for (int i = 0; i < n; i++) {
    ox_param_info info;
    ox_status st = fx.kernel_param(k, i, &info);
    if (st) {
      PyErr_SetString(PyExc_ValueError, fx.last_error());
      goto fail;
    }
    PyObject *name = PyUnicode_InternFromString(info.name);
    if (!name || PyTuple_SetItem(L->names, i, name)) /* steals name */
      goto fail;
    L->params[i].kind = info.kind;
    L->params[i].dtype = info.dtype;
    L->params[i].writable = info.writable != 0;
    /* every tile kernel has a tensor, output partition or atomic tensor parameter */
    L->tile |= info.kind == OX_PARAM_TENSOR || info.kind == OX_PARAM_TILE ||
               info.kind == OX_PARAM_ATOMIC_TENSOR;
  }
  return (PyObject *)L;
fail:
  Py_DECREF(L);
  return NULL;
}

static void launcher_dealloc(PyObject *self) {
  fx_launcher *L = (fx_launcher *)self;
  PyTypeObject *type = Py_TYPE(self);
  Py_XDECREF(L->sig);
  Py_XDECREF(L->names);
  Py_XDECREF(L->proto);
  freefunc free_fn = (freefunc)PyType_GetSlot(type, Py_tp_free);
  free_fn(self);
  Py_DECREF(type); /* instances of heap types hold their type */
}

/* ------------------------------------------------------------ binding */

static int param_index(const fx_launcher *L, PyObject *key) {
  for (int i = 0; i < L->nparams; i++)
    if (PyTuple_GetItem(L->names, i) == key) /* interned names: the usual case */
      return i;
  if (!PyUnicode_Check(key))
    return -1;
  for (int i = 0; i < L->nparams; i++) {
    int eq = PyObject_RichCompareBool(PyTuple_GetItem(L->names, i), key, Py_EQ);
    if (eq)
      return eq < 0 ? -2 : i;
  }
  return -1;
}

/* The launch's own keywords, taken out of a call's keywords. */
typedef struct launch_kw {
  PyObject *grid, *block, *stream, *tiles; /* borrowed; Py_None when not given */
} launch_kw;

/* 1 if `key` is grid, block, stream or tiles (then set in *kw), 0 if not. */
static int launch_keyword(PyObject *key, PyObject *value, launch_kw *kw) {
  PyObject **slot = NULL;
  if (key == fxo.s_grid)
    slot = &kw->grid;
  else if (key == fxo.s_block)
    slot = &kw->block;
  else if (key == fxo.s_stream)
    slot = &kw->stream;
  else if (PyUnicode_Check(key)) { /* a key built at run time: not interned */
    if (!PyUnicode_CompareWithASCIIString(key, "grid"))
      slot = &kw->grid;
    else if (!PyUnicode_CompareWithASCIIString(key, "block"))
      slot = &kw->block;
    else if (!PyUnicode_CompareWithASCIIString(key, "stream"))
      slot = &kw->stream;
    else if (!PyUnicode_CompareWithASCIIString(key, "tiles"))
      slot = &kw->tiles;
  }
  if (slot)
    *slot = value;
  return slot != NULL;
}

static int bind(fx_call *c, PyObject *args, PyObject *kwargs, launch_kw *kw) {
  const fx_launcher *L = c->L;
  kw->grid = kw->block = kw->stream = kw->tiles = Py_None;
  Py_ssize_t npos = PyTuple_Size(args);
  if (npos < 0)
    return -1;
  if (npos > L->nparams) {
    PyObject *v = PyLong_FromSsize_t(npos);
    if (v) {
      fx_error(L, "too_many", -1, v, NULL);
      Py_DECREF(v);
    }
    return -1;
  }
  for (int i = 0; i < L->nparams; i++)
    c->bound[i] = i < npos ? PyTuple_GetItem(args, i) : NULL;
  if (kwargs) {
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (PyDict_Next(kwargs, &pos, &key, &value)) {
      if (launch_keyword(key, value, kw))
        continue;
      int j = param_index(L, key);
      if (j == -2)
        return -1;
      if (j < 0)
        return fx_error(L, "unexpected", -1, key, NULL);
      if (c->bound[j])
        return fx_error(L, "duplicate", -1, key, NULL);
      c->bound[j] = value;
    }
  }
  int given = 0;
  for (int i = 0; i < L->nparams; i++)
    given += c->bound[i] != NULL;
  if (given == L->nparams)
    return 0;
  PyObject *flags = PyTuple_New(L->nparams);
  PyObject *count = PyLong_FromLong(given);
  for (int i = 0; flags && i < L->nparams; i++) {
    PyObject *f = c->bound[i] ? Py_True : Py_False;
    Py_INCREF(f);
    PyTuple_SetItem(flags, i, f);
  }
  if (flags && count)
    fx_error(L, "missing", -1, count, flags);
  Py_XDECREF(flags);
  Py_XDECREF(count);
  return -1;
}

/* ------------------------------------------------------------ config */

/* A grid or block: 1 to 3 ints in 0..2**32-1 (an int alone, or a tuple or
 * list), into out[3]. */
static int dim3(const fx_launcher *L, PyObject *v, const char *what, uint32_t out[3]) {
  PyObject *items[3] = {NULL, NULL, NULL};
  Py_ssize_t n;
  if (PyLong_Check(v)) {
    items[0] = v;
    n = 1;
  } else if (PyTuple_Check(v) || PyList_Check(v)) {
    n = PyTuple_Check(v) ? PyTuple_Size(v) : PyList_Size(v);
    for (Py_ssize_t i = 0; i < n && i < 3; i++)
      items[i] = PyTuple_Check(v) ? PyTuple_GetItem(v, i) : PyList_GetItem(v, i);
  } else {
    n = 0;
  }
  int ok = n >= 1 && n <= 3;
  for (int i = 0; i < 3; i++) {
    out[i] = 1;
    if (!ok || i >= n)
      continue;
    if (!PyLong_Check(items[i])) {
      ok = 0;
      continue;
    }
    int ovf;
    long long d = PyLong_AsLongLongAndOverflow(items[i], &ovf);
    if (d == -1 && !ovf && PyErr_Occurred())
      return -1;
    if (ovf || d < 0 || d > 0xffffffffLL)
      ok = 0;
    else
      out[i] = (uint32_t)d;
  }
  if (ok)
    return 0;
  PyObject *w = PyUnicode_FromString(what);
  if (w) {
    fx_error(L, "dim", -1, v, w);
    Py_DECREF(w);
  }
  return -1;
}

/* The launch config into *cfg, or *cfg_null = 1 for none (a NULL one). */
static int config(const fx_launcher *L, PyObject *grid, PyObject *block, ox_launch_config *cfg,
                  int *cfg_null) {
  uint32_t g[3], b[3];
  int has_g = grid != Py_None, has_b = block != Py_None;
  if ((has_g && dim3(L, grid, "grid", g)) || (has_b && dim3(L, block, "block", b)))
    return -1;
  if (!L->tile && !(has_g && has_b)) {
    if (!has_g && !has_b)
      return fx_error(L, "no_config", -1, NULL, NULL);
    PyObject *w = PyUnicode_FromString(has_g ? "grid" : "block");
    if (w) {
      fx_error(L, "half_config", -1, NULL, w);
      Py_DECREF(w);
    }
    return -1;
  }
  *cfg_null = !has_g && !has_b; /* a tile kernel takes no config as zeros */
  memset(cfg, 0, sizeof *cfg);
  if (has_g)
    memcpy(cfg->grid, g, sizeof g);
  if (has_b)
    memcpy(cfg->block, b, sizeof b);
  return 0;
}

/* ------------------------------------------------------------ arguments */

static int tensor_arg(const fx_launcher *L, int i, PyObject *x, ox_arg *a) {
  void *h;
  if (fx_handle(L, i, x, &h))
    return -1;
  a->kind = OX_ARG_TENSOR;
  a->dtype = OX_F32;
  a->v.tensor = h;
  return 0;
}

/* An oxide.Scalar (any subclass of it) into *a; 0 if x is none. */
static int scalar_arg(PyObject *x, ox_arg *a) {
  if (!PyType_IsSubtype(Py_TYPE(x), (PyTypeObject *)fxo.scalar_type))
    return 0;
  PyObject *code = PyDict_GetItem(fxo.scalar_dtypes, (PyObject *)Py_TYPE(x)); /* borrowed */
  if (!code) {
    PyErr_SetString(PyExc_TypeError, "use a dtype's class: oxide.f32(x), oxide.i32(x), ...");
    return -1;
  }
  long t = PyLong_AsLong(code);
  if (t == -1 && PyErr_Occurred())
    return -1;
  return fx_scalar_object(x, (ox_dtype)t, a) ? -1 : 1;
}

/* _args.type_kind's answers */
enum { KIND_ARRAY, KIND_IMMUTABLE, KIND_SCALAR };

/* What x's type is to a tensor parameter (_args.type_kind, asked once per
 * type), or -1 on error. */
static int type_kind(PyObject *x) {
  PyObject *tp = (PyObject *)Py_TYPE(x);
  PyObject *v = PyDict_GetItem(fxo.type_kinds, tp); /* borrowed */
  if (!v) {
    v = PyObject_CallFunctionObjArgs(fxo.type_kind, tp, NULL);
    int bad = !v || PyDict_SetItem(fxo.type_kinds, tp, v);
    Py_XDECREF(v); /* the dict holds it */
    if (bad)
      return -1;
  }
  long k = PyLong_AsLong(v);
  return k == -1 && PyErr_Occurred() ? -1 : (int)k;
}

static int convert(fx_call *c, int i) {
  const fx_launcher *L = c->L;
  PyObject *x = c->bound[i];
  ox_arg *a = &c->args[i];
  PyTypeObject *tp = Py_TYPE(x);
  const fx_param *p = &L->params[i];
  if (tp == (PyTypeObject *)fxo.tensor_type ||
      PyType_IsSubtype(tp, (PyTypeObject *)fxo.tensor_type))
    return tensor_arg(L, i, x, a);
  int r;
  if (p->kind == OX_PARAM_SCALAR &&
      (tp == &PyFloat_Type || tp == &PyLong_Type || tp == &PyBool_Type)) {
    r = fx_number(L, i, x, a);
    if (r)
      return r < 0 ? -1 : 0;
  }
  r = scalar_arg(x, a);
  if (r)
    return r < 0 ? -1 : 0;
  if (p->kind != OX_PARAM_SCALAR) {
    int kind = type_kind(x);
    if (kind < 0)
      return -1;
    if (kind == KIND_IMMUTABLE && p->writable)
      return fx_error(L, "immutable", i, x, NULL);
    if (kind != KIND_SCALAR) { /* numbers (numpy scalars too) are no arrays */
      r = fx_import(c, i, x, a);
      if (r)
        return r < 0 ? -1 : 0;
    }
  }
  /* anything else: the package's conversion (numpy scalars, subclasses of
   * int and float, what this module does not import itself, the errors) */
  PyObject *y = PyObject_CallFunction(fxo.convert_other, "OiOO", L->sig, i, x, c->stream_obj);
  if (!y)
    return -1;
  c->keep[c->nkeep++] = y;
  if (PyType_IsSubtype(Py_TYPE(y), (PyTypeObject *)fxo.tensor_type))
    return tensor_arg(L, i, y, a);
  r = scalar_arg(y, a);
  if (r)
    return r < 0 ? -1 : 0;
  PyErr_SetString(PyExc_AssertionError, "convert_other returned neither a Tensor nor a Scalar");
  return -1;
}

static void finish(fx_call *c) {
  if (c->owns) { /* the arguments, held while Python code (conversions) may run */
    for (int i = 0; i < c->L->nparams; i++)
      Py_DECREF(c->bound[i]);
    Py_DECREF(c->stream_obj);
    c->owns = 0;
  }
  for (int i = 0; i < c->ntemps; i++)
    fx.tensor_release(c->temps[i]); /* the launch holds what it needs */
  c->ntemps = 0;
  for (int i = 0; i < c->nkeep; i++)
    Py_DECREF(c->keep[i]);
  c->nkeep = 0;
}

/* ------------------------------------------------------------ the launch */

/* tiles=: the outputs passed whole cut into partitions (by _args.with_tiles, after the stream
 * is known, as the pure path does); bound[] takes the new values. */
static int with_tiles(fx_call *c, PyObject *tiles) {
  int n = c->L->nparams;
  PyObject *vals = PyTuple_New(n);
  if (!vals)
    return -1;
  for (int i = 0; i < n; i++) {
    Py_INCREF(c->bound[i]);
    PyTuple_SetItem(vals, i, c->bound[i]); /* steals the reference */
  }
  PyObject *out = PyObject_CallFunctionObjArgs(fxo.with_tiles, c->L->sig, vals, tiles, c->stream_obj, NULL);
  Py_DECREF(vals);
  if (!out)
    return -1;
  if (!PyList_Check(out) || PyList_Size(out) != n) {
    Py_DECREF(out);
    PyErr_SetString(PyExc_SystemError, "oxide: _args.with_tiles gave no list of the arguments");
    return -1;
  }
  for (int i = 0; i < n; i++) {
    PyObject *v = PyList_GetItem(out, i);
    Py_INCREF(v);
    Py_DECREF(c->bound[i]);
    c->bound[i] = v;
  }
  Py_DECREF(out);
  return 0;
}

/* A call's positional arguments and keywords (NULL: none), as
 * Kernel.__call__ gets them. */
static int prepare(fx_call *c, fx_launcher *L, PyObject *args, PyObject *kwargs,
                   ox_launch_config *cfg, int *cfg_null) {
  launch_kw kw;
  c->L = L;
  c->ntemps = c->nkeep = c->owns = 0;
  const fx_launcher *P = L->proto ? (const fx_launcher *)L->proto : L;
  if (!P->kernel) /* its module was released */
    return fx_released(L, -1, NULL, "kernel");
  if (bind(c, args, kwargs, &kw))
    return -1;
  /* a conversion may run Python code (a __dlpack__), which could change a
   * keywords dict passed as **kwargs: hold what was bound from it */
  for (int i = 0; i < L->nparams; i++)
    Py_INCREF(c->bound[i]);
  Py_INCREF(Py_None);
  c->stream_obj = Py_None; /* until fx_launch_stream says which */
  c->cai_stream = NULL;
  c->owns = 1;
  int bad = config(L, kw.grid, kw.block, cfg, cfg_null) || fx_launch_stream(c, kw.stream) ||
            (kw.tiles != Py_None && with_tiles(c, kw.tiles));
  for (int i = 0; i < L->nparams && !bad; i++)
    bad = convert(c, i);
  if (bad)
    finish(c);
  return bad ? -1 : 0;
}

static PyObject *run(fx_launcher *L, PyObject *args, PyObject *kwargs, int check) {
  fx_call c;
  ox_launch_config cfg;
  int cfg_null;
  if (prepare(&c, L, args, kwargs, &cfg, &cfg_null))
    return NULL;
  const ox_launch_config *pc = cfg_null ? NULL : &cfg;
  ox_status st;
  if (check) {
    st = fx.launch_check(L->kernel, c.stream, pc, c.args, L->nparams);
  } else if (L->cpu) {
    /* the CPU device runs the kernel before ox_launch returns: let other
     * Python threads run meanwhile (the call holds every object it uses).
     * Ctrl-C: while it runs, Oxide's SIGINT handler cancels it and then calls
     * Python's (which records the signal); the launch returns
     * OX_ERR_CANCELLED and the pending signal raises KeyboardInterrupt here.
     * The first CPU launch keeps one enabling call for good (sigint_kept), as
     * the pure path does: each launch then costs one sigaction query, not
     * four system calls. */
    if (!sigint_kept && fx.cancel_on_sigint(1) == OX_OK)
      sigint_kept = 1;
    fx.cancel_on_sigint(1);
    Py_BEGIN_ALLOW_THREADS
    st = fx.launch(L->kernel, c.stream, pc, c.args, L->nparams);
    Py_END_ALLOW_THREADS
    fx.cancel_on_sigint(0);
    if (st == OX_ERR_CANCELLED && PyErr_CheckSignals() < 0) {
      finish(&c);
      return NULL; /* KeyboardInterrupt (or what the handler raised) */
    }
  } else {
    /* a GPU launch only queues work: keeping the GIL costs less than
     * handing it over and taking it back */
    st = fx.launch(L->kernel, c.stream, pc, c.args, L->nparams);
  }
  /* an out-of-bounds access raises here: this launch's on the CPU (it has run), on CUDA an
     earlier one's that its kernel has recorded by now */
  if (!st && !check)
    st = fx.launch_errors();
  if (st)
    fx_failure(L, st, cfg_null); /* reads ox_last_error before anything else runs */
  finish(&c);
  if (st)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *launcher_call(PyObject *self, PyObject *args, PyObject *kwargs) {
  return run((fx_launcher *)self, args, kwargs, 0);
}

static PyObject *launcher_check(PyObject *self, PyObject *args, PyObject *kwargs) {
  return run((fx_launcher *)self, args, kwargs, 1);
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* _bench(n, *args, **kwargs): the arguments converted once, then n calls
 * of ox_launch from C; the seconds they took. What the launch costs without
 * Python, for bench/python_launch.py. */
static PyObject *launcher_bench(PyObject *self, PyObject *args, PyObject *kwargs) {
  fx_launcher *L = (fx_launcher *)self;
  Py_ssize_t nargs = PyTuple_Size(args);
  long n = nargs >= 1 ? PyLong_AsLong(PyTuple_GetItem(args, 0)) : -1;
  if (n < 0) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_TypeError, "_bench(n, *args, **kwargs): n >= 0 launches");
    return NULL;
  }
  PyObject *rest = PyTuple_GetSlice(args, 1, nargs);
  if (!rest)
    return NULL;
  fx_call c;
  ox_launch_config cfg;
  int cfg_null;
  int bad = prepare(&c, L, rest, kwargs, &cfg, &cfg_null);
  Py_DECREF(rest);
  if (bad)
    return NULL;
  ox_status st = OX_OK;
  double t0 = now();
  Py_BEGIN_ALLOW_THREADS
  for (long i = 0; i < n && !st; i++)
    st = fx.launch(L->kernel, c.stream, cfg_null ? NULL : &cfg, c.args, L->nparams);
  Py_END_ALLOW_THREADS
  double t1 = now();
  if (st)
    fx_failure(L, st, cfg_null);
  finish(&c);
  return st ? NULL : PyFloat_FromDouble(t1 - t0);
}

static PyObject *launcher_names(PyObject *self, void *closure) {
  PyObject *names = ((fx_launcher *)self)->names;
  Py_INCREF(names);
  return names;
}

/* _release(): the kernel is gone (its module was released); this launcher
 * and its copies refuse to launch from now on. */
static PyObject *launcher_release(PyObject *self, PyObject *unused) {
  ((fx_launcher *)self)->kernel = NULL;
  Py_RETURN_NONE;
}

static PyMethodDef launcher_methods[] = {
    {"_release", launcher_release, METH_NOARGS,
     "_release(): the kernel's module was released; launches are refused from now on."},
    {"check", (PyCFunction)(void (*)(void))launcher_check, METH_VARARGS | METH_KEYWORDS,
     "check(*args, grid=None, block=None, stream=None, **kwargs): checks a launch like a call "
     "would, without running it."},
    {"_bench", (PyCFunction)(void (*)(void))launcher_bench, METH_VARARGS | METH_KEYWORDS,
     "_bench(n, *args, **kwargs) -> seconds of n launches from C, the arguments converted "
     "once."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef launcher_getset[] = {
    {"names", launcher_names, NULL, "The parameters' names.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot launcher_slots[] = {
    {Py_tp_new, (void *)launcher_new},
    {Py_tp_dealloc, (void *)launcher_dealloc},
    {Py_tp_call, (void *)launcher_call},
    {Py_tp_methods, launcher_methods},
    {Py_tp_getset, launcher_getset},
    {Py_tp_doc, (void *)"Launcher(signature, kernel, device, cpu, ordinal, default_stream), or "
                        "Launcher(prototype): launches one kernel when called as the kernel is "
                        "(oxide.Kernel is a subclass)."},
    {0, NULL},
};

PyType_Spec fx_launcher_spec = {
    "oxide._fast.Launcher", sizeof(fx_launcher), 0, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    launcher_slots,
};
