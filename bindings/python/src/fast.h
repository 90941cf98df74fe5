/*
 * fast.h - oxide._fast, the launch path of the Python binding in C.
 *
 * The extension is built on CPython's limited API (3.9: one abi3 build for
 * every CPython from 3.9 on) and does not link liboxide: the package loads
 * liboxide with ctypes (so OXIDE_LIBRARY keeps choosing which one) and hands
 * this module the addresses of the functions it calls at import (init()).
 *
 * What it does: a Launcher per kernel reads the kernel's signature once;
 * each call binds the arguments to the parameters (by position and name),
 * converts them (tensors, Python numbers typed by the parameter, foreign
 * arrays imported through DLPack or an array interface) and calls ox_launch.
 * The rules and every message are those of the pure path
 * (bindings/python/oxide/_args.py): for anything rare this module calls
 * back into it, and it builds its exceptions there, so both paths behave
 * the same.
 *
 * Files: fast.c (the module, init), launcher.c (binding, the launch),
 * common.c (the state every file uses: liboxide's functions, the package's
 * objects and errors, a call's stream, temporaries and handles),
 * scalars.c (Python numbers to scalar arguments), foreign.c (foreign arrays:
 * __dlpack__ and array interfaces), exchange.c (DLPack's C exchange API),
 * streams.c (the call's stream, and the stream imports go back on),
 * capsule.c (the capsules of Tensor.__dlpack__, whose destructor is C).
 * Calls run one way, down this list: fast.c (makes the Launcher type),
 * launcher.c, foreign.c, scalars.c, streams.c, exchange.c, capsule.c,
 * common.c; each calls only files below it.
 */
#ifndef OXIDE_PY_FAST_H
#define OXIDE_PY_FAST_H

#define Py_LIMITED_API 0x03090000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "../../../dlpack/dlpack.h"
#include "oxide/oxide.h"

/* The version of the contract between this module and the package: the
 * package refuses a module of another (and launches through ctypes). */
#define FX_ABI 6

/* A kernel has at most this many parameters (the compiler's limit). */
#define FX_MAX_PARAMS 64

/* liboxide's functions, by address; typed from oxide.h, so the compiler
 * checks every call against the real prototypes. */
typedef struct fx_functions {
  __typeof__(&ox_version) version;
  __typeof__(&ox_last_error) last_error;
  __typeof__(&ox_kernel_num_params) kernel_num_params;
  __typeof__(&ox_kernel_param) kernel_param;
  __typeof__(&ox_launch) launch;
  __typeof__(&ox_launch_check) launch_check;
  __typeof__(&ox_launch_errors) launch_errors;
  __typeof__(&ox_tensor_from_dlpack) tensor_from_dlpack;
  __typeof__(&ox_tensor_release) tensor_release;
  __typeof__(&ox_stream_handle) stream_handle;
  __typeof__(&ox_stream_device) stream_device;
  __typeof__(&ox_stream_wait_stream) stream_wait_stream;
  __typeof__(&ox_tensor_set_release_stream) tensor_set_release_stream;
  __typeof__(&ox_cancel_on_sigint) cancel_on_sigint;
} fx_functions;

/* Set by init(); every entry is non-NULL once fx_ready is 1. */
extern fx_functions fx;
extern int fx_ready;

/* Python objects of the package, and interned names, set by init(). */
typedef struct fx_objects {
  PyObject *tensor_type;   /* oxide.Tensor */
  PyObject *scalar_type;   /* oxide.Scalar */
  PyObject *stream_type;   /* oxide.Stream */
  PyObject *scalar_dtypes; /* {oxide.f32: OX_F32, ...} */
  PyObject *error;         /* _args.error(sig, code, index, value, extra) -> exception */
  PyObject *failure;       /* _args.failure(sig, status, message, config_null) -> exception */
  PyObject *convert_other; /* _args.convert_other(sig, index, value, stream) -> Tensor | Scalar */
  PyObject *call_stream;   /* _streams.call_stream(sig, values, stream) -> Stream | None */
  PyObject *wrapped;       /* _streams.wrapped(device, cu) -> Stream */
  PyObject *stream_getter; /* _streams.stream_getter(type) -> callable | None */
  PyObject *producer_stream; /* _streams.producer_stream(array, device) -> int | None */
  PyObject *array_stream;  /* _streams.array_stream(array) -> (known, Stream | None) on the array's GPU */
  PyObject *stream_getters;  /* {type: stream_getter(type)}, filled as types come */
  PyObject *type_kind;     /* _args.type_kind(type) -> ARRAY, IMMUTABLE or SCALAR */
  PyObject *with_tiles;    /* _args.with_tiles(sig, values, tiles, stream) -> list */
  PyObject *type_kinds;    /* {type: type_kind(type)}, filled as types come */
  int no_ordering;         /* OXIDE_DEBUG_NO_STREAM_ORDERING: ask producers for none */
  PyObject *typestrs;      /* {"<f4": (code, bits), ...}: array interface element types */
  PyObject *exchange_apis; /* {type: capsule or None}: __dlpack_c_exchange_api__ by type */
  PyObject *empty;         /* () */
  PyObject *max_version;   /* (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION) */
  PyObject *kw_cpu;        /* {"stream": None, "max_version": max_version} */
  PyObject *kw_cpu_legacy; /* {"stream": None} */
  /* interned attribute and key names */
  PyObject *s_h, *s_value, *s_dlpack, *s_dlpack_device, *s_cai, *s_ai, *s_exchange, *s_stream,
      *s_grid, *s_block, *s_device, *s_max_version, *s_shape, *s_typestr, *s_data, *s_strides, *s_mask;
} fx_objects;

extern fx_objects fxo;

/* One parameter of a kernel, as the launch needs it. */
typedef struct fx_param {
  ox_param_kind kind;
  ox_dtype dtype;
  int writable; /* the kernel may write it (ox_param_info.writable) */
} fx_param;

/* A kernel's launcher (the Launcher type): its signature, read once. */
typedef struct fx_launcher {
  PyObject_HEAD
  PyObject *sig;            /* the package's _args.Signature (for messages) */
  PyObject *names;          /* the parameters' names, interned strings */
  PyObject *proto;          /* the launcher this one is a copy of (NULL: none), whose
                             * kernel is NULL once its module is released */
  ox_kernel kernel;
  ox_device device;
  ox_stream default_stream; /* the device's default stream */
  int cpu;                  /* 1: a CPU-device kernel (launches run synchronously) */
  int ordinal;              /* the CUDA device's ordinal (0 on the CPU) */
  int tile;                 /* 1: a #[tile] kernel (grid and block come from the call's partitions) */
  int nparams;
  fx_param params[FX_MAX_PARAMS];
} fx_launcher;

/* One launch in progress: the arguments bound and converted, and what was
 * made for it (to release once the launch is queued, or on failure). */
typedef struct fx_call {
  fx_launcher *L;
  PyObject *stream_obj; /* the call's stream (an oxide.Stream; None: the device's default) */
  ox_stream stream;     /* its handle; NULL: the device's default stream */
  PyTypeObject *ptype;  /* the last array type whose library's stream was asked for, */
  void *pcu;            /* that stream, */
  int pknown;           /* and whether it has one (streams.c) */
  void *cai_stream;     /* the "stream" of the array interface just imported (0: none) */
  PyObject *bound[FX_MAX_PARAMS]; /* the call's arguments in parameter order */
  int owns;             /* 1 once bound[] and stream_obj hold references */
  ox_arg args[FX_MAX_PARAMS];
  ox_tensor temps[FX_MAX_PARAMS]; /* tensors imported for this launch */
  int ntemps;
  PyObject *keep[FX_MAX_PARAMS]; /* objects made for this launch (owned) */
  int nkeep;
} fx_call;

/* common.c: the package's launch errors (_args.error, _args.failure), raised; -1 */
int fx_error(const fx_launcher *L, const char *code, int index, PyObject *value, PyObject *extra);
int fx_failure(const fx_launcher *L, ox_status status, int config_null);
/* The package's error for released `what` ("tensor", "stream" or "kernel";
 * index: the argument, or -1), raised; -1. */
int fx_released(const fx_launcher *L, int index, PyObject *x, const char *what);
/* The handle of oxide.Tensor (argument i) or oxide.Stream (i = -1) `x` into
 * *h; 0, or -1 with the package's error when it was released. */
int fx_handle(const fx_launcher *L, int i, PyObject *x, void **h);
/* Makes the call's tensor `h` (just imported) an argument and a temporary. */
void fx_adopt(fx_call *c, ox_tensor h, ox_arg *a);
/* The call's launch stream (the device's default stream for NULL). */
ox_stream fx_call_stream(const fx_call *c);

/* launcher.c */
extern PyType_Spec fx_launcher_spec;
extern PyTypeObject *fx_launcher_type; /* made from the spec at import (fast.c) */

/* scalars.c: a plain bool, int or float for scalar parameter i into *a.
 * Returns 1 when converted, 0 when the value needs the package's slower
 * conversion (ints beyond 64 bits for float parameters), -1 on error. */
int fx_number(const fx_launcher *L, int i, PyObject *x, ox_arg *a);
/* An oxide.Scalar `x` of dtype `dtype` into *a; 0 or -1 on error. */
int fx_scalar_object(PyObject *x, ox_dtype dtype, ox_arg *a);

/* foreign.c: a foreign array `x` for tensor parameter i, imported into a
 * tensor of the call (*a). Returns 1 when imported, 0 when x is no array
 * this module imports itself (the package's conversion takes it), -1 on error. */
int fx_import(fx_call *c, int i, PyObject *x, ox_arg *a);

/* streams.c: the call's stream (c->stream, c->stream_obj) from its
 * stream= argument, or from its arrays' libraries (_streams.call_stream has
 * the rule); 0 or -1 on error. */
int fx_launch_stream(fx_call *c, PyObject *stream);
/* Tensor `h`, just imported from array `x`, goes back to x's library on
 * that library's current stream (ox_tensor_set_release_stream); 0 or -1. */
int fx_release_on_producer(fx_call *c, PyObject *x, ox_tensor h);
/* Oxide's stream (a handle, and the package's object, borrowed; None for
 * the default stream) for CUstream `cu` on the call's device; 0 or -1. */
int fx_wrapped_stream(fx_call *c, void *cu, ox_stream *h, PyObject **obj);

/* exchange.c: DLPack's C exchange API (__dlpack_c_exchange_api__, DLPack
 * 1.3) for objects whose type offers it. Returns 1 and a managed tensor in
 * *out, 0 when the type offers none (or the array must take the __dlpack__
 * path, for stream ordering), -1 on error. */
int fx_exchange_import(fx_call *c, PyObject *x, DLManagedTensorVersioned **out);
/* 1 and the current stream of x's library on CUDA device `ordinal` (from
 * its exchange API) in *cu, 0 when x's type offers no exchange API, -1 on
 * error. */
int fx_exchange_stream(PyObject *x, int ordinal, void **cu);
/* 1 and, for a CUDA array, its device's ordinal in *ordinal (from its
 * exchange API, without a copy), 0 when x's type offers no way to ask that
 * (*ordinal unchanged), -1 on error. */
int fx_exchange_device(PyObject *x, int *ordinal);

/* capsule.c: dlpack_capsule(address, versioned), the module function that
 * wraps an exported managed tensor (ox_tensor_to_dlpack) in a capsule that
 * owns it until a consumer renames it; a capsule that cannot be made
 * deletes the tensor. */
PyObject *fx_dlpack_capsule(PyObject *self, PyObject *args);

#endif /* OXIDE_PY_FAST_H */
