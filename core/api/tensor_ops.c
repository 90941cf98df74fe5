/*
 * tensor_ops.c - tensors made or moved by device work: zeros, full, arange,
 * copy (any strides, any pair of devices) and to.
 *
 * The work runs as small built-in kernels written in the Oxide kernel
 * language, compiled by ox_module_compile on first use on each device (small
 * modules, kept for the life of the process; the compiled-kernel cache
 * makes later processes fast). The same kernels run on the CPU
 * device through the CPU backend, so both devices compute arange's
 * conversions identically. Plain memory operations take over where they are
 * exact and faster: memset for zeros and for fills whose bytes are all equal,
 * memcpy / cuMemcpy for copies between dense tensors, and cuMemcpy HtoD/DtoH
 * (through dense staging tensors) between the CPU and a GPU.
 *
 * Fills and copies move bits, so their kernels exist per element size (u8,
 * u16, u32, u64) and run on views that reinterpret the tensor's bytes: fp8,
 * f16, bool... all copy as unsigned integers of their size.
 *
 * The strided copy kernels take the source as one flat `&[T]` over the span
 * of its elements, and the collapsed shape and strides (at most 8 dims) as
 * u64 scalars; each thread computes its element's source offset. A dense
 * destination is written through DisjointSlice (one writer per element,
 * proven by the language). A strided destination uses an `unsafe fn` kernel
 * with `&mut [T]` over the destination's span, because DisjointSlice can only
 * express "element i of a dense array": going through a dense temporary would
 * not help, as the final scatter into the strided layout needs the same
 * kernel. It is race-free because a writable tensor never maps two indices to
 * one element (such views are read-only: broadcasts, overlapping DLPack
 * imports), and its writes stay bounds-checked. Source and destination
 * memory that overlap or interleave go through a dense temporary first.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

#define INVALID(...) oxb_set_error(OX_ERR_INVALID_ARGUMENT, __VA_ARGS__)

/* "cpu" or "cuda:N", for messages. */
static const char *dev_label(ox_device d, char buf[32]) {
  if (d->type == OX_DEVICE_CPU)
    return "cpu";
  snprintf(buf, 32, "cuda:%d", d->ordinal);
  return buf;
}


/* The unsigned dtype of an element size. */
static ox_dtype uint_of(size_t size) {
  return size == 1 ? OX_U8 : size == 2 ? OX_U16 : size == 4 ? OX_U32 : OX_U64;
}

static bool is_fp8(ox_dtype t) { return t == OX_F8E4M3 || t == OX_F8E5M2; }
static bool is_int(ox_dtype t) { return t >= OX_I8 && t <= OX_U64; }

/* ------------------------------------------------------- built-in kernels */

/* A module per kind of kernel and element type, so that a first use
 * compiles only what it needs: fill and copy per element size (u8, u16, u32,
 * u64), arange per dtype. */
enum { G_FILL = 0, G_COPY = 4, G_ARANGE = 8, G_COUNT = G_ARANGE + OX_DTYPE_COUNT };

static int log2_size(size_t es) { return es == 1 ? 0 : es == 2 ? 1 : es == 4 ? 2 : 3; }

/* The offset of flat element i in a layout of nd dims (innermost first). */
static const char OFFSET_FN[] =
    "fn offset(i: u64, nd: u32, n0: u64, n1: u64, n2: u64, n3: u64, n4: u64, n5: u64, n6: u64,\n"
    "          n7: u64, s0: u64, s1: u64, s2: u64, s3: u64, s4: u64, s5: u64, s6: u64,\n"
    "          s7: u64) -> u64 {\n"
    "    let mut r = i;\n"
    "    let mut off = 0u64;\n"
    "    if nd > 0 { off += (r % n0) * s0; r = r / n0; }\n"
    "    if nd > 1 { off += (r % n1) * s1; r = r / n1; }\n"
    "    if nd > 2 { off += (r % n2) * s2; r = r / n2; }\n"
    "    if nd > 3 { off += (r % n3) * s3; r = r / n3; }\n"
    "    if nd > 4 { off += (r % n4) * s4; r = r / n4; }\n"
    "    if nd > 5 { off += (r % n5) * s5; r = r / n5; }\n"
    "    if nd > 6 { off += (r % n6) * s6; r = r / n6; }\n"
    "    if nd > 7 { off += r * s7; }\n"
    "    off\n"
    "}\n";
#define DIMS "n0, n1, n2, n3, n4, n5, n6, n7"
#define DIMS_T "n0: u64, n1: u64, n2: u64, n3: u64, n4: u64, n5: u64, n6: u64, n7: u64"
#define SRC_T "s0: u64, s1: u64, s2: u64, s3: u64, s4: u64, s5: u64, s6: u64, s7: u64"
#define DST_T "d0: u64, d1: u64, d2: u64, d3: u64, d4: u64, d5: u64, d6: u64, d7: u64"

/* The copy kernels handle one element per thread rather than looping with
 * grid_stride: their body, with up to 8 64-bit divisions, would be emitted
 * three times, which makes the first compile (ptxas) several times slower
 * for no gain in a gather that vector accesses cannot help. */
static char *group_source(int g) {
  oxb_str o = {0};
  if (g < G_COPY) {
    const char *t = ox_dtype_name(uint_of((size_t)1 << (g - G_FILL)));
    oxb_str_addf(&o,
                 "#[kernel]\n"
                 "fn fill_%s(out: DisjointSlice<%s>, v: %s) {\n"
                 "    for i in thread::grid_stride(out.len()) {\n"
                 "        if let Some(o) = out.get_mut(i) { *o = v; }\n"
                 "    }\n"
                 "}\n",
                 t, t, t);
  } else if (g < G_ARANGE) {
    const char *t = ox_dtype_name(uint_of((size_t)1 << (g - G_COPY)));
    oxb_str_add(&o, OFFSET_FN, sizeof OFFSET_FN - 1);
    oxb_str_addf(&o,
                 "#[kernel]\n"
                 "fn copy_c_%s(src: &[%s], dst: DisjointSlice<%s>, nd: u32,\n"
                 "             " DIMS_T ", " SRC_T ") {\n"
                 "    let i = thread::index_1d();\n"
                 "    if let Some(o) = dst.get_mut(i) {\n"
                 "        *o = src[offset(i.get(), nd, " DIMS ",\n"
                 "                        s0, s1, s2, s3, s4, s5, s6, s7)];\n"
                 "    }\n"
                 "}\n"
                 "#[kernel]\n"
                 "unsafe fn copy_s_%s(src: &[%s], dst: &mut [%s], n: u64, nd: u32,\n"
                 "                    " DIMS_T ", " SRC_T ", " DST_T ") {\n"
                 "    let i = thread::index_1d();\n"
                 "    let k = i.get();\n"
                 "    if k < n {\n"
                 "        dst[offset(k, nd, " DIMS ", d0, d1, d2, d3, d4, d5, d6, d7)] =\n"
                 "            src[offset(k, nd, " DIMS ", s0, s1, s2, s3, s4, s5, s6, s7)];\n"
                 "    }\n"
                 "}\n",
                 t, t, t, t, t, t);
  } else {
    ox_dtype d = (ox_dtype)(g - G_ARANGE);
    const char *t = ox_dtype_name(d);
    /* bool has no cast from f64 in the language: nonzero is true */
    oxb_str_addf(&o,
                 "#[kernel]\n"
                 "fn arange_%s(out: DisjointSlice<%s>, start: f64, step: f64) {\n"
                 "    for i in thread::grid_stride(out.len()) {\n"
                 "        if let Some(o) = out.get_mut(i) {\n"
                 "            *o = (start + (i.get() as f64) * step)%s%s;\n"
                 "        }\n"
                 "    }\n"
                 "}\n",
                 t, t, d == OX_BOOL ? " != 0.0" : " as ", d == OX_BOOL ? "" : t);
    if (is_int(d))
      oxb_str_addf(&o,
                   "#[kernel]\n"
                   "fn iarange_%s(out: DisjointSlice<%s>, start: i64, step: i64) {\n"
                   "    for i in thread::grid_stride(out.len()) {\n"
                   "        if let Some(o) = out.get_mut(i) {\n"
                   "            *o = (start + (i.get() as i64) * step) as %s;\n"
                   "        }\n"
                   "    }\n"
                   "}\n",
                   t, t, t);
  }
  return oxb_str_take(&o);
}

/* What group g holds, for messages ("copy u32"). */
static const char *group_label(int g, char buf[32]) {
  const char *kind = g < G_COPY ? "fill" : g < G_ARANGE ? "copy" : "arange";
  ox_dtype t = g < G_COPY    ? uint_of((size_t)1 << (g - G_FILL))
               : g < G_ARANGE ? uint_of((size_t)1 << (g - G_COPY))
                              : (ox_dtype)(g - G_ARANGE);
  snprintf(buf, 32, "%s %s", kind, ox_dtype_name(t));
  return buf;
}

/* Modules per device (slot 0: the CPU, 1 + N: cuda:N) and group, compiled on
 * first use and kept for the life of the process. The lock is held during a
 * compile, so that concurrent first uses compile once. */
#define MAX_SLOTS 129
static pthread_mutex_t mod_lock = PTHREAD_MUTEX_INITIALIZER;
static ox_module mods[MAX_SLOTS][G_COUNT];

static ox_status builtin_kernel(const char *fn, ox_device dev, int g, const char *name,
                                ox_kernel *out) {
  char lab[32], gl[32];
  int slot = dev->type == OX_DEVICE_CPU ? 0 : 1 + dev->ordinal;
  if (slot >= MAX_SLOTS)
    return oxb_set_error(OX_ERR_UNSUPPORTED, "%s: %s: Oxide's built-in kernels support %d GPUs",
                         fn, dev_label(dev, lab), MAX_SLOTS - 1);
  ox_status st = OX_OK;
  pthread_mutex_lock(&mod_lock);
  if (!mods[slot][g]) {
    char *src = group_source(g);
    char file[64];
    snprintf(file, sizeof file, "<oxide built-in %s kernels>", group_label(g, gl));
    ox_compile_options o = {.size = sizeof o, .filename = file};
    st = src ? ox_module_compile(dev, src, &o, &mods[slot][g])
             : oxb_set_error(OX_ERR_OUT_OF_MEMORY, "%s: out of memory writing the source of Oxide's built-in %s kernels",
                             fn, group_label(g, gl));
    free(src);
    if (st != OX_OK && st != OX_ERR_OUT_OF_MEMORY) /* a bug in Oxide, or a device or driver problem */
      st = oxb_set_error(st == OX_ERR_COMPILE ? OX_ERR_INTERNAL : st,
                         "%s: compiling Oxide's built-in %s kernels for %s: %s", fn,
                         group_label(g, gl), dev_label(dev, lab), ox_last_error());
  }
  ox_module m = mods[slot][g];
  pthread_mutex_unlock(&mod_lock);
  if (st == OX_OK && (st = ox_module_get_kernel(m, name, out)) != OX_OK)
    st = oxb_set_error(OX_ERR_INTERNAL, "%s: %s", fn, ox_last_error());
  return st;
}

/* Launches k over n elements in blocks of 256 threads: one thread per
 * element (per_thread), or a grid-stride loop with enough blocks to fill
 * the device and no more than needed. */
static ox_status launch_n(ox_kernel k, oxr_stream *s, int64_t n, bool per_thread, const ox_arg *args,
                          int nargs) {
  int64_t mp = s->dev->multiprocessors > 0 ? s->dev->multiprocessors : 1;
  /* rounded up without n + 255, which could overflow */
  int64_t blocks = per_thread ? n / 256 + (n % 256 != 0) : n / 1024 + (n % 1024 != 0);
  if (!per_thread && blocks > 16 * mp)
    blocks = 16 * mp;
  if (blocks > s->dev->max_grid_dim[0]) /* 2^31 - 1 blocks on every GPU: 2^39 elements */
    return oxb_set_error(OX_ERR_UNSUPPORTED, "%lld elements are too many for one launch",
                         (long long)n);
  ox_launch_config cfg = {{(uint32_t)(blocks > 0 ? blocks : 1), 1, 1}, {256, 1, 1}};
  return ox_launch(k, s->handle, &cfg, args, nargs);
}

/* A 1-D dense view of n elements of dtype dt at byte `offset` of t's storage:
 * what a slice parameter receives. */
static ox_status flat_view(const oxr_tensor *t, ox_dtype dt, int64_t n, int64_t offset,
                           oxr_tensor **out) {
  int64_t one = 1;
  return oxr_tensor_make(t->storage, dt, 1, &n, &one, offset, 0, out);
}

static ox_arg scalar(ox_dtype dt, uint64_t bits) {
  ox_arg a = {.kind = OX_ARG_SCALAR, .dtype = dt};
  a.v.u = bits;
  return a;
}

/* ------------------------------------------------------------ conversions */

/* Rounds d to nearest-even in a binary format of `eb` exponent and `mb`
 * mantissa bits (f16: 5, 10; bf16: 8, 7). Overflow gives infinity, NaN a
 * quiet NaN. */
static uint32_t f64_to_small(double d, int eb, int mb) {
  uint64_t u;
  memcpy(&u, &d, 8);
  uint32_t sign = (uint32_t)(u >> 63) << (eb + mb), emax = (1u << eb) - 1;
  int e = (int)(u >> 52 & 0x7ff), bias = (1 << (eb - 1)) - 1;
  uint64_t m = u & ((1ull << 52) - 1);
  if (e == 0x7ff)
    return sign | emax << mb | (m ? 1u << (mb - 1) : 0);
  if (e == 0) /* double subnormals are far below the smallest target subnormal */
    return sign;
  int te = e - 1023 + bias; /* the target's biased exponent */
  int shift = 52 - mb + (te < 1 ? 1 - te : 0);
  if (shift > 60)
    return sign; /* below half the smallest subnormal */
  uint64_t full = m | 1ull << 52, q = full >> shift, rem = full & ((1ull << shift) - 1);
  uint64_t half = 1ull << (shift - 1);
  if (rem > half || (rem == half && (q & 1)))
    q++;
  if (te < 1) /* subnormal; a carry into bit mb makes the smallest normal, as encoded */
    return sign | (uint32_t)q;
  if (q >> (mb + 1)) { /* the rounding carried into a new binade */
    q >>= 1;
    te++;
  }
  if (te >= (int)emax)
    return sign | emax << mb;
  return sign | (uint32_t)te << mb | ((uint32_t)q & ((1u << mb) - 1));
}

/* The bits of `v` converted to dtype t as the kernel language's `as` from f64
 * converts (integers: truncation toward zero, saturating, NaN -> 0; f16 and
 * bf16: through f32); bool: nonzero (NaN too) is true. */
static uint64_t value_bits(ox_dtype t, double v) {
  if (t == OX_BOOL)
    return v != 0;
  if (is_int(t)) {
    int bits = 8 * (int)ox_dtype_size(t);
    if (isnan(v))
      return 0;
    if (t <= OX_I64) {
      int64_t max = (int64_t)((1ull << (bits - 1)) - 1), min = -max - 1;
      double hi = ldexp(1, bits - 1); /* max + 1, exactly */
      int64_t r = v >= hi ? max : v < -hi ? min : (int64_t)v;
      return bits == 64 ? (uint64_t)r : (uint64_t)r & ((1ull << bits) - 1);
    }
    if (v <= -1)
      return 0;
    if (v >= ldexp(1, bits))
      return bits == 64 ? ~0ull : (1ull << bits) - 1;
    return (uint64_t)v;
  }
  switch (t) {
  case OX_F16: return f64_to_small((float)v, 5, 10);
  case OX_BF16: return f64_to_small((float)v, 8, 7);
  case OX_F32: {
    float f = (float)v;
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
  }
  default: {
    uint64_t b;
    memcpy(&b, &v, 8);
    return b;
  }
  }
}

/* ---------------------------------------------------------------- helpers */

static ox_status cu_check(const char *fn, CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return OX_OK;
  ox_status st = oxr_cuda_error(r, what);
  return oxb_set_error(st, "%s: %s", fn, ox_last_error());
}

/* Prefixes the last error with `fn` (for errors of the calls made for it). */
static ox_status named(const char *fn, ox_status st) {
  return st == OX_OK ? st : oxb_set_error(st, "%s: %s", fn, ox_last_error());
}

/* A new tensor for API function `fn` on dev, ordered on stream handle sh
 * (resolved into *s): checks the arguments; *t is the tensor. */
static ox_status new_tensor(const char *fn, ox_device dev, ox_stream sh, oxr_stream **s,
                            ox_dtype dtype, int ndim, const int64_t *shape, oxr_tensor **t,
                            ox_tensor *out) {
  *t = NULL;
  if (!out)
    return INVALID("%s: out is NULL", fn);
  *out = NULL;
  if (!oxr_device_check(fn, dev))
    return ox_last_status();
  ox_status st = oxr_resolve_stream(fn, dev, sh, s);
  if (st == OX_OK)
    st = oxr_tensor_new(fn, dev, *s, dtype, ndim, shape, t);
  return st;
}

/* The tensor behind argument `what` of `fn`, or NULL with the last error set. */
static oxr_tensor *get_tensor(const char *fn, const char *what, ox_tensor h) {
  if (!h) {
    INVALID("%s: %s is NULL", fn, what);
    return NULL;
  }
  oxr_tensor *t = oxr_tensor_get(fn, h);
  if (!t)
    INVALID("%s: %s is not a live tensor (released, or not a tensor handle)", fn, what);
  return t;
}

/* ------------------------------------------------------------------ fills */

/* Sets every element of the dense tensor t to the element `bits`, on s. */
static ox_status fill_bits(const char *fn, oxr_tensor *t, oxr_stream *s, uint64_t bits) {
  size_t es = ox_dtype_size(t->dtype), bytes = (size_t)t->numel * es;
  if (bytes == 0)
    return OX_OK;
  unsigned char b[8]; /* little-endian: the element is the low es bytes */
  memcpy(b, &bits, 8);
  bool uniform = true;
  for (size_t i = 1; i < es; i++)
    uniform &= b[i] == b[0];
  ox_status st;
  if (uniform) { /* zeros, -1, 0x01 bytes...: a memset, no kernel */
    if ((st = oxr_tensor_use(t, s, true)) != OX_OK)
      return named(fn, st);
    if (t->dev->type == OX_DEVICE_CPU) {
      oxr_cpu_hold hold = {0};
      oxr_cpu_hold_add(&hold, t, true);
      oxr_cpu_hold_take(&hold);
      memset(t->data, b[0], bytes);
      oxr_cpu_hold_drop(&hold);
      return OX_OK;
    }
    if ((st = oxr_cuda_make_current(t->dev)) != OX_OK)
      return named(fn, st);
    return cu_check(fn, oxr_cu.cuMemsetD8Async((CUdeviceptr)(uintptr_t)t->data, b[0], bytes, s->cu),
                    "cuMemsetD8Async");
  }
  ox_dtype u = uint_of(es);
  char name[32];
  snprintf(name, sizeof name, "fill_%s", ox_dtype_name(u));
  ox_kernel k;
  oxr_tensor *v;
  if ((st = builtin_kernel(fn, t->dev, G_FILL + log2_size(es), name, &k)) != OX_OK)
    return st;
  if ((st = flat_view(t, u, t->numel, t->offset, &v)) != OX_OK)
    return named(fn, st);
  ox_arg args[2] = {ox_arg_tensor(v->handle), scalar(u, bits)};
  st = named(fn, launch_n(k, s, t->numel, false, args, 2));
  oxr_tensor_release(v);
  return st;
}

/* Hands the new tensor t to the caller if st is OX_OK, else frees it. */
static ox_status give(ox_status st, oxr_tensor *t, ox_tensor *out) {
  if (st == OX_OK)
    *out = t->handle;
  else
    oxr_tensor_release(t);
  return st;
}

ox_status ox_tensor_zeros(ox_device dev, ox_stream sh, ox_dtype dtype, int ndim,
                          const int64_t *shape, ox_tensor *out) {
  oxr_stream *s;
  oxr_tensor *t;
  ox_status st = new_tensor(__func__, dev, sh, &s, dtype, ndim, shape, &t, out);
  return st ? st : give(fill_bits(__func__, t, s, 0), t, out);
}

ox_status ox_tensor_full(ox_device dev, ox_stream sh, ox_dtype dtype, int ndim,
                         const int64_t *shape, double value, ox_tensor *out) {
  if (out)
    *out = NULL;
  if (is_fp8(dtype)) /* no conversion to fp8 yet: storage-only types */
    return oxb_set_error(OX_ERR_UNSUPPORTED, "%s: %s is a storage-only dtype (copies only)",
                         __func__, ox_dtype_name(dtype));
  oxr_stream *s;
  oxr_tensor *t;
  ox_status st = new_tensor(__func__, dev, sh, &s, dtype, ndim, shape, &t, out);
  return st ? st : give(fill_bits(__func__, t, s, value_bits(dtype, value)), t, out);
}

/* Integral start and step of an integer dtype are computed exactly in i64
 * and truncated to the type (as `as` does, wrapping); everything else is
 * computed in f64 and converted with `as` (saturating for integers). */
ox_status ox_tensor_arange(ox_device dev, ox_stream sh, ox_dtype dtype, double start, double step,
                           int64_t n, ox_tensor *out) {
  if (out)
    *out = NULL;
  if (n < 0)
    return INVALID("%s: n is %lld; it must be >= 0", __func__, (long long)n);
  if (!isfinite(start) || !isfinite(step))
    return INVALID("%s: start %g and step %g must be finite", __func__, start, step);
  if (is_fp8(dtype))
    return oxb_set_error(OX_ERR_UNSUPPORTED, "%s: %s is a storage-only dtype (copies only)",
                         __func__, ox_dtype_name(dtype));
  oxr_stream *s;
  oxr_tensor *t;
  ox_status st = new_tensor(__func__, dev, sh, &s, dtype, 1, &n, &t, out);
  if (st != OX_OK || n == 0)
    return st ? st : give(st, t, out);
  double lim = ldexp(1, 63);
  bool exact = is_int(dtype) && start == trunc(start) && step == trunc(step) && start >= -lim &&
               start < lim && step >= -lim && step < lim;
  char name[32];
  snprintf(name, sizeof name, "%sarange_%s", exact ? "i" : "", ox_dtype_name(dtype));
  ox_kernel k;
  if ((st = builtin_kernel(__func__, dev, G_ARANGE + (int)dtype, name, &k)) == OX_OK) {
    ox_arg args[3] = {ox_arg_tensor(t->handle), exact ? ox_arg_i64((int64_t)start) : ox_arg_f64(start),
                      exact ? ox_arg_i64((int64_t)step) : ox_arg_f64(step)};
    st = named(__func__, launch_n(k, s, n, false, args, 3));
  }
  return give(st, t, out);
}

/* ----------------------------------------------------------------- copies */

/* A copy's layout after dropping size-1 dimensions and merging neighbours
 * that are contiguous with each other in both tensors; innermost first. */
typedef struct plan {
  int nd;
  int64_t n[OX_MAX_DIMS], d[OX_MAX_DIMS], s[OX_MAX_DIMS]; /* sizes, dst and src strides */
} plan;

static void collapse(const oxr_tensor *dst, const oxr_tensor *src, plan *p) {
  p->nd = 0;
  for (int i = dst->ndim - 1; i >= 0; i--) {
    int64_t n = dst->shape[i];
    int k = p->nd - 1;
    if (n == 1)
      continue;
    /* a stride cannot equal a product that does not fit: no merge then */
    int64_t dstep, sstep, merged;
    if (k >= 0 && !__builtin_mul_overflow(p->d[k], p->n[k], &dstep) &&
        !__builtin_mul_overflow(p->s[k], p->n[k], &sstep) && dst->strides[i] == dstep &&
        src->strides[i] == sstep && !__builtin_mul_overflow(p->n[k], n, &merged)) {
      p->n[k] = merged;
      continue;
    }
    p->n[++k] = n;
    p->d[k] = dst->strides[i];
    p->s[k] = src->strides[i];
    p->nd++;
  }
  if (p->nd == 0) { /* one element */
    p->nd = 1;
    p->n[0] = p->d[0] = p->s[0] = 1;
  }
}

/* Elements from the first to the last one of a layout, inclusive, or -1 if
 * that count overflows (never for a tensor oxr_tensor_make accepted). */
static int64_t span(const plan *p, const int64_t *strides) {
  int64_t e = 1, ext;
  for (int k = 0; k < p->nd; k++)
    if (__builtin_mul_overflow(p->n[k] - 1, strides[k], &ext) || __builtin_add_overflow(e, ext, &e))
      return -1;
  return e;
}

/* True if the extents (first to last byte) of tensors a and b meet. */
static bool extents_meet(const oxr_tensor *a, const oxr_tensor *b) {
  uintptr_t alo, ahi, blo, bhi;
  oxr_tensor_extent(a, &alo, &ahi);
  oxr_tensor_extent(b, &blo, &bhi);
  return alo < bhi && blo < ahi;
}

/* Copies between two non-empty tensors of one device whose extents do not
 * meet, queued on s. */
static ox_status copy_apart(const char *fn, oxr_tensor *dst, oxr_tensor *src, oxr_stream *s) {
  ox_status st;
  plan p;
  collapse(dst, src, &p);
  size_t es = ox_dtype_size(dst->dtype);
  if (p.nd == 1 && p.d[0] == 1 && p.s[0] == 1) { /* both dense */
    size_t bytes = (size_t)dst->numel * es;
    if ((st = oxr_tensor_use(src, s, false)) != OX_OK ||
        (st = oxr_tensor_use(dst, s, true)) != OX_OK)
      return named(fn, st);
    if (dst->dev->type == OX_DEVICE_CPU) {
      oxr_cpu_hold hold = {0};
      oxr_cpu_hold_add(&hold, src, false);
      oxr_cpu_hold_add(&hold, dst, true);
      oxr_cpu_hold_take(&hold);
      memcpy(dst->data, src->data, bytes);
      oxr_cpu_hold_drop(&hold);
      return OX_OK;
    }
    if ((st = oxr_cuda_make_current(dst->dev)) != OX_OK)
      return named(fn, st);
    return cu_check(fn,
                    oxr_cu.cuMemcpyDtoDAsync((CUdeviceptr)(uintptr_t)dst->data,
                                             (CUdeviceptr)(uintptr_t)src->data, bytes, s->cu),
                    "cuMemcpyDtoDAsync");
  }
  ox_dtype u = uint_of(es);
  bool dense = oxr_tensor_dense(dst);
  char name[32];
  snprintf(name, sizeof name, "copy_%c_%s", dense ? 'c' : 's', ox_dtype_name(u));
  ox_kernel k;
  if ((st = builtin_kernel(fn, dst->dev, G_COPY + log2_size(es), name, &k)) != OX_OK)
    return st;
  int64_t sn = span(&p, p.s), dn = dense ? dst->numel : span(&p, p.d);
  if (sn < 0 || dn < 0) {
    const oxr_tensor *t = sn < 0 ? src : dst;
    char b[200], b2[200];
    return INVALID("%s: the %s (shape %s, strides %s) spans more elements than int64 holds", fn,
                   t == src ? "source" : "destination", oxr_dims_str(t->ndim, t->shape, b),
                   oxr_dims_str(t->ndim, t->strides, b2));
  }
  oxr_tensor *sv = NULL, *dv = NULL;
  if ((st = flat_view(src, u, sn, src->offset, &sv)) == OX_OK)
    st = flat_view(dst, u, dn, dst->offset, &dv);
  if (st == OX_OK) {
    ox_arg a[4 + 3 * OX_MAX_DIMS];
    int na = 0;
    a[na++] = ox_arg_tensor(sv->handle);
    a[na++] = ox_arg_tensor(dv->handle);
    if (!dense)
      a[na++] = ox_arg_u64((uint64_t)dst->numel);
    a[na++] = ox_arg_u32((uint32_t)p.nd);
    for (int i = 0; i < OX_MAX_DIMS; i++)
      a[na++] = ox_arg_u64(i < p.nd ? (uint64_t)p.n[i] : 1);
    for (int i = 0; i < OX_MAX_DIMS; i++)
      a[na++] = ox_arg_u64(i < p.nd ? (uint64_t)p.s[i] : 0);
    for (int i = 0; i < OX_MAX_DIMS && !dense; i++)
      a[na++] = ox_arg_u64(i < p.nd ? (uint64_t)p.d[i] : 0);
    st = launch_n(k, s, dst->numel, true, a, na);
  }
  oxr_tensor_release(sv);
  oxr_tensor_release(dv);
  return named(fn, st);
}

/* Copies between two non-empty tensors of one device, queued on s. Source
 * and destination memory that overlap (or interleave, which a kernel's flat
 * arguments cannot tell apart) go through one dense temporary: all of src is
 * read before any of dst is written. A new allocation shares no memory with
 * a tensor's storage, so the two copies through it go straight to copy_apart:
 * never a second temporary, whatever a layout claims. */
static ox_status copy_same(const char *fn, oxr_tensor *dst, oxr_tensor *src, oxr_stream *s) {
  if (!extents_meet(dst, src))
    return copy_apart(fn, dst, src, s);
  if (dst->data == src->data &&
      !memcmp(dst->strides, src->strides, sizeof(int64_t) * (size_t)dst->ndim))
    return OX_OK; /* a copy onto itself */
  oxr_tensor *tmp;
  ox_status st = oxr_tensor_new(fn, dst->dev, s, src->dtype, src->ndim, src->shape, &tmp);
  if (st != OX_OK)
    return st;
  /* A foreign storage (DLPack) whose layout spans the new allocation claims
   * memory it does not own; the copy kernels' overlap check would refuse it
   * anyway, less clearly. */
  const oxr_tensor *liar = extents_meet(tmp, src) ? src : extents_meet(tmp, dst) ? dst : NULL;
  if (liar) {
    uintptr_t lo, hi;
    char b[200], b2[200];
    oxr_tensor_extent(liar, &lo, &hi);
    st = INVALID("%s: the %s (shape %s, strides %s) spans bytes [%p, %p), across memory it does "
                 "not own (a new %lld-byte buffer at %p lies inside): its producer's layout "
                 "overstates its memory",
                 fn, liar == src ? "source" : "destination",
                 oxr_dims_str(liar->ndim, liar->shape, b),
                 oxr_dims_str(liar->ndim, liar->strides, b2), (void *)lo, (void *)hi,
                 (long long)tmp->numel * (long long)ox_dtype_size(tmp->dtype), tmp->data);
  }
  if (st == OX_OK && (st = copy_apart(fn, tmp, src, s)) == OX_OK)
    st = copy_apart(fn, dst, tmp, s);
  oxr_tensor_release(tmp);
  return st;
}

/* For a DMA, which needs dense tensors: t itself if it is dense, else (in
 * *out, whatever happens: the caller releases it if it is not t) a new dense
 * tensor of t's shape on t's device, allocated on s, holding t's elements
 * when `fill` (the DMA's source). */
static ox_status dense_of(const char *fn, oxr_tensor *t, oxr_stream *s, bool fill, oxr_tensor **out) {
  *out = t;
  if (oxr_tensor_dense(t))
    return OX_OK;
  ox_status st = oxr_tensor_new(fn, t->dev, s, t->dtype, t->ndim, t->shape, out);
  return st == OX_OK && fill ? copy_same(fn, *out, t, s) : st;
}

/* Copies between two GPUs with peer access (oxr_cuda_peer), on s (a stream
 * of dst's device), one DMA between dense tensors: a strided src is first
 * made dense on its own device's default stream, a strided dst is written
 * from a dense one on s. s waits for src's writers, and src's later writers
 * and the staging tensors' frees wait for s (oxr_tensor_use and the
 * storage's release order streams of two GPUs as of one). */
static ox_status copy_peer(const char *fn, oxr_tensor *dst, oxr_tensor *src, oxr_stream *s) {
  oxr_tensor *sd = src, *dd = dst;
  ox_status st = dense_of(fn, src, src->dev->default_stream, true, &sd);
  if (st == OX_OK)
    st = dense_of(fn, dst, s, false, &dd);
  if (st == OX_OK && (st = oxr_tensor_use(sd, s, false)) == OX_OK && (st = oxr_tensor_use(dd, s, true)) == OX_OK &&
      (st = oxr_cuda_make_current(dst->dev)) == OX_OK) {
    size_t bytes = (size_t)dst->numel * ox_dtype_size(dst->dtype);
    st = cu_check(fn,
                  oxr_cu.cuMemcpyPeerAsync((CUdeviceptr)(uintptr_t)dd->data, dst->dev->cu_ctx,
                                           (CUdeviceptr)(uintptr_t)sd->data, src->dev->cu_ctx, bytes, s->cu),
                  "cuMemcpyPeerAsync");
  }
  st = named(fn, st);
  if (st == OX_OK && dd != dst)
    st = copy_same(fn, dst, dd, s);
  if (sd != src)
    oxr_tensor_release(sd);
  if (dd != dst)
    oxr_tensor_release(dd);
  return st;
}

/* Copies between two non-empty tensors of any devices, ordered on s (a
 * stream of dst's device, or of src's when dst is on the CPU). */
static ox_status copy_any(const char *fn, oxr_tensor *dst, oxr_tensor *src, oxr_stream *s) {
  if (dst->dev == src->dev)
    return copy_same(fn, dst, src, s);
  if (dst->dev->type == OX_DEVICE_CUDA && src->dev->type == OX_DEVICE_CUDA && oxr_cuda_peer(dst->dev, src->dev))
    return copy_peer(fn, dst, src, s);
  ox_device cpu;
  ox_status st = ox_device_get(OX_DEVICE_CPU, 0, &cpu);
  if (st != OX_OK)
    return named(fn, st);
  oxr_stream *cs = cpu->default_stream;
  if (dst->dev->type == OX_DEVICE_CUDA && src->dev->type == OX_DEVICE_CUDA) {
    /* two GPUs without peer access: through host memory */
    oxr_tensor *h;
    st = oxr_tensor_new(fn, cpu, cs, src->dtype, src->ndim, src->shape, &h);
    if (st != OX_OK)
      return st;
    if ((st = copy_any(fn, h, src, src->dev->default_stream)) == OX_OK)
      st = copy_any(fn, dst, h, s);
    oxr_tensor_release(h);
    return st;
  }
  /* CPU <-> GPU: a DMA between dense tensors, with dense staging tensors on
   * either side for strided ones; s is a stream of the GPU. */
  bool to_gpu = dst->dev->type == OX_DEVICE_CUDA;
  oxr_tensor *h = to_gpu ? src : dst, *g = to_gpu ? dst : src, *hd = h, *gd = g;
  st = dense_of(fn, h, cs, to_gpu, &hd);
  if (st == OX_OK)
    st = dense_of(fn, g, s, !to_gpu, &gd);
  if (st == OX_OK) {
    st = oxr_tensor_use(gd, s, to_gpu);
    if (st == OX_OK)
      st = oxr_tensor_use(hd, cs, !to_gpu);
    if (st == OX_OK)
      st = oxr_cuda_make_current(g->dev);
    st = named(fn, st);
  }
  if (st == OX_OK) {
    size_t bytes = (size_t)g->numel * ox_dtype_size(g->dtype);
    CUdeviceptr dp = (CUdeviceptr)(uintptr_t)gd->data;
    oxr_cpu_hold hold = {0}; /* the host side, while the DMA touches it */
    oxr_cpu_hold_add(&hold, hd, !to_gpu);
    oxr_cpu_hold_take(&hold);
    st = to_gpu ? cu_check(fn, oxr_cu.cuMemcpyHtoDAsync(dp, hd->data, bytes, s->cu),
                           "cuMemcpyHtoDAsync")
                : cu_check(fn, oxr_cu.cuMemcpyDtoHAsync(hd->data, dp, bytes, s->cu),
                           "cuMemcpyDtoHAsync");
    /* done with host memory before returning, whether pageable or pinned */
    if (st == OX_OK)
      st = cu_check(fn, oxr_cu.cuStreamSynchronize(s->cu), "cuStreamSynchronize");
    oxr_cpu_hold_drop(&hold);
  }
  if (st == OX_OK && to_gpu && gd != g)
    st = copy_same(fn, g, gd, s);
  if (st == OX_OK && !to_gpu && hd != h)
    st = copy_same(fn, h, hd, cs);
  if (hd != h)
    oxr_tensor_release(hd);
  if (gd != g)
    oxr_tensor_release(gd);
  return st;
}

/* The device a copy to dst from src is ordered on. */
static ox_device order_device(ox_device dst, ox_device src) {
  return dst->type == OX_DEVICE_CUDA ? dst : src;
}

static ox_status resolve_order(const char *fn, ox_device od, ox_stream sh, oxr_stream **s) {
  ox_status st = oxr_resolve_stream(fn, od, sh, s);
  if (st != OX_OK)
    st = oxb_set_error(st, "%s (a copy is ordered on a stream of the destination's device, or of "
                           "the source's when the destination is on the CPU)",
                       ox_last_error());
  return st;
}

ox_status ox_tensor_copy(ox_tensor dst_h, ox_tensor src_h, ox_stream sh) {
  oxr_tensor *dst = get_tensor(__func__, "dst", dst_h);
  oxr_tensor *src = dst ? get_tensor(__func__, "src", src_h) : NULL;
  oxr_stream *s;
  ox_status st;
  if (!src)
    return ox_last_status();
  char b[200], b2[200];
  if (dst->dtype != src->dtype)
    return INVALID("%s: dst is %s but src is %s; a copy does not convert", __func__,
                   ox_dtype_name(dst->dtype), ox_dtype_name(src->dtype));
  if (dst->ndim != src->ndim ||
      memcmp(dst->shape, src->shape, sizeof(int64_t) * (size_t)dst->ndim) != 0)
    return INVALID("%s: dst has shape %s but src has shape %s", __func__,
                   oxr_dims_str(dst->ndim, dst->shape, b), oxr_dims_str(src->ndim, src->shape, b2));
  if (dst->flags & OXR_T_READ_ONLY)
    return INVALID("%s: dst is read-only (a broadcast view, or marked so by its DLPack producer)",
                   __func__);
  if ((st = resolve_order(__func__, order_device(dst->dev, src->dev), sh, &s)) != OX_OK)
    return st;
  if (s->capturing && dst->dev != src->dev) /* it waits for the host: nothing to put in a graph */
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         "%s: a copy between devices (here %s to %s) cannot be captured into a "
                         "CUDA graph; copy before or after the chain",
                         __func__, ox_device_name(src->dev), ox_device_name(dst->dev));
  return dst->numel ? copy_any(__func__, dst, src, s) : OX_OK;
}

ox_status ox_tensor_to(ox_tensor src_h, ox_device dev, ox_stream sh, ox_tensor *out) {
  if (!out)
    return INVALID("%s: out is NULL", __func__);
  *out = NULL;
  oxr_tensor *src = get_tensor(__func__, "src", src_h), *t;
  oxr_stream *s;
  if (!src || !oxr_device_check(__func__, dev))
    return ox_last_status();
  ox_device od = order_device(dev, src->dev);
  ox_status st;
  if ((st = resolve_order(__func__, od, sh, &s)) != OX_OK)
    return st;
  oxr_stream *as = od == dev ? s : dev->default_stream; /* the allocation's stream */
  if ((st = oxr_tensor_new(__func__, dev, as, src->dtype, src->ndim, src->shape, &t)) != OX_OK)
    return st;
  return give(src->numel ? copy_any(__func__, t, src, s) : OX_OK, t, out);
}
