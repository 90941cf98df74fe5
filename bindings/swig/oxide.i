/* oxide.i - the SWIG interface of liboxide (bindings/README.md says what it
 * covers). Every declaration of oxide.h is wrapped as it is: handles as
 * opaque pointers, enums as int constants, ox_arg and the option structs as
 * classes, out-parameters through the pointer helpers below. On top, a few
 * helpers (oxs_*) for what a target language cannot express directly in C's
 * terms: functions that return a handle (NULL on error, with the reason in
 * ox_last_error()), host arrays in and out, and an argument list for
 * launches. Tested from Java (tests/swig/Main.java, tools/test_swig.sh):
 *   swig -java -package oxide.swig -outdir OUT -o oxide_wrap.c -I<include> oxide.i */
%module oxide

%{
#include <stdlib.h>
#include <string.h>

#include "oxide/oxide.h"
%}

%include <stdint.i>
%include <enumsimple.swg>
%include <cpointer.i>
#ifdef SWIGJAVA
%include <arrays_java.i>
#endif

/* filled by the library (ox_kernel_param): read-only in the target language */
%immutable ox_param_info::name;
/* set from the target language, the string is copied and never freed: right
 * here, since liboxide keeps a module's filename for its whole life */
%warnfilter(451) ox_compile_options::filename;

/* the header's visibility attribute means nothing to SWIG */
#define __attribute__(x)
%include "oxide/oxide.h"

/* out-parameters of the raw API: new_<h>p(), <h>p_value(p), delete_<h>p(p) */
%pointer_functions(ox_device, devicep);
%pointer_functions(ox_stream, streamp);
%pointer_functions(ox_tensor, tensorp);
%pointer_functions(ox_module, modulep);
%pointer_functions(ox_kernel, kernelp);

#ifdef SWIGJAVA
%apply float[] { const float *host_in, float *host_out };
%apply int[] { const int32_t *ihost_in, int32_t *ihost_out };
#endif

%inline %{
/* The device of `type` and `ordinal`, or NULL (ox_last_error() says why). */
ox_device oxs_device(ox_device_type type, int ordinal) {
  ox_device d = NULL;
  return ox_device_get(type, ordinal, &d) == OX_OK ? d : NULL;
}

/* A module compiled from `source` on `dev` (`filename` names it in
 * diagnostics; may be NULL), or NULL with the diagnostics in ox_last_error(). */
ox_module oxs_compile(ox_device dev, const char *source, const char *filename) {
  static char name[256]; /* liboxide keeps the pointer: one module's name at a time is enough here */
  ox_compile_options o;
  memset(&o, 0, sizeof o);
  o.size = sizeof o;
  if (filename) {
    strncpy(name, filename, sizeof name - 1);
    o.filename = name;
  }
  ox_module m = NULL;
  return ox_module_compile(dev, source, &o, &m) == OX_OK ? m : NULL;
}

/* Kernel `name` of `m` (borrowed from the module), or NULL. */
ox_kernel oxs_kernel(ox_module m, const char *name) {
  ox_kernel k = NULL;
  return ox_module_get_kernel(m, name, &k) == OX_OK ? k : NULL;
}

/* A 1-D f32 tensor on `dev` holding host_in[0..n), or NULL. */
ox_tensor oxs_tensor_f32(ox_device dev, const float *host_in, int64_t n) {
  ox_tensor t = NULL;
  return ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, host_in, (size_t)n * sizeof(float), &t) ==
                 OX_OK ? t : NULL;
}

/* A 1-D i32 tensor on `dev` holding ihost_in[0..n), or NULL. */
ox_tensor oxs_tensor_i32(ox_device dev, const int32_t *ihost_in, int64_t n) {
  ox_tensor t = NULL;
  return ox_tensor_from_host(dev, NULL, OX_I32, 1, &n, ihost_in, (size_t)n * sizeof(int32_t), &t) ==
                 OX_OK ? t : NULL;
}

/* Copies an f32 tensor of n elements into host_out (after its pending work). */
ox_status oxs_read_f32(ox_tensor t, float *host_out, int64_t n) {
  return ox_tensor_to_host(t, NULL, host_out, (size_t)n * sizeof(float));
}

/* Copies an i32 tensor of n elements into ihost_out. */
ox_status oxs_read_i32(ox_tensor t, int32_t *ihost_out, int64_t n) {
  return ox_tensor_to_host(t, NULL, ihost_out, (size_t)n * sizeof(int32_t));
}

/* A launch's arguments, in parameter order. */
typedef struct oxs_args {
  int n;
  ox_arg a[64];
} oxs_args;

oxs_args *oxs_args_new(void) { return (oxs_args *)calloc(1, sizeof(oxs_args)); }
void oxs_args_free(oxs_args *args) { free(args); }
/* Each adds one argument; 0, or -1 past the 64 a kernel can take. */
int oxs_args_tensor(oxs_args *args, ox_tensor t) {
  return args->n < 64 ? (args->a[args->n++] = ox_arg_tensor(t), 0) : -1;
}
int oxs_args_f32(oxs_args *args, float x) {
  return args->n < 64 ? (args->a[args->n++] = ox_arg_f32(x), 0) : -1;
}
int oxs_args_i32(oxs_args *args, int32_t x) {
  return args->n < 64 ? (args->a[args->n++] = ox_arg_i32(x), 0) : -1;
}
int oxs_args_u32(oxs_args *args, uint32_t x) {
  return args->n < 64 ? (args->a[args->n++] = ox_arg_u32(x), 0) : -1;
}

/* Queues kernel k on stream s (NULL: the device's default) with a grid of
 * gx blocks of bx threads (one dimension; ox_launch takes three). */
ox_status oxs_launch(ox_kernel k, ox_stream s, uint32_t gx, uint32_t bx, const oxs_args *args) {
  ox_launch_config c;
  memset(&c, 0, sizeof c);
  c.grid[0] = gx, c.grid[1] = c.grid[2] = 1;
  c.block[0] = bx, c.block[1] = c.block[2] = 1;
  return ox_launch(k, s, &c, args->a, args->n);
}
%}
