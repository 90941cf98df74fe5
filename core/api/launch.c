/* launch.c - checking a launch against the kernel's signature, its launch
 * contract and the device, then queuing it on the CPU or the GPU.
 *
 * This is the hot path of every launch: no allocation, no driver call besides
 * the launch itself (and a context switch only when another context is current). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

/* The backend's limit on a CPU kernel's stack is the executor's. */
_Static_assert(OXL_CPU_STACK_MAX == OXR_CPU_STACK_MAX, "CPU stack limits differ");

static ox_status check_args(const oxi_kernel *ki, const oxr_stream *s, const ox_arg *args, int nargs,
                            oxr_tensor *const *tens) {
  const char *kn = ki->name;
  if (nargs != ki->params.len)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s' takes %d argument%s, got %d", kn,
                         ki->params.len, ki->params.len == 1 ? "" : "s", nargs);
  for (int i = 0; i < nargs; i++) {
    const oxi_param *p = ki->params.items[i];
    const ox_arg *a = &args[i];
    if (p->kind == OXI_P_SCALAR) {
      if (a->kind != OX_ARG_SCALAR)
        return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                             "kernel '%s', argument %d ('%s'): expected a %s scalar, got %s", kn,
                             i + 1, p->name, ox_dtype_name(p->dtype),
                             a->kind == OX_ARG_TENSOR ? "a tensor" : "an invalid argument");
      if (a->dtype != p->dtype)
        return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                             "kernel '%s', argument %d ('%s'): expected %s, got %s (Oxide does "
                             "not convert scalars implicitly)",
                             kn, i + 1, p->name, ox_dtype_name(p->dtype), ox_dtype_name(a->dtype));
      continue;
    }
    const oxr_tensor *t = tens[i];
    if (a->kind != OX_ARG_TENSOR || !t)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): expected a tensor for %s of %s, got %s",
                           kn, i + 1, p->name, oxa_pkind_name(p->kind), ox_dtype_name(p->dtype),
                           a->kind == OX_ARG_SCALAR ? "a scalar" : "NULL");
    if (oxa_mutable_kind(p->kind) && (t->flags & OXR_T_READ_ONLY))
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s', %s): the tensor is read-only (a "
                           "DLPack producer marked it so, or it is a broadcast view)",
                           kn, i + 1, p->name, oxa_pkind_name(p->kind));
    if (t->dtype != p->dtype)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): expected a tensor of %s, got %s", kn,
                           i + 1, p->name, ox_dtype_name(p->dtype), ox_dtype_name(t->dtype));
    if (t->dev != s->dev)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): the tensor is on %s, the launch on %s",
                           kn, i + 1, p->name, t->dev->label, s->dev->label);
    if (!oxr_tensor_dense(t)) /* a slice parameter sees one flat array */
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): a slice parameter needs a contiguous "
                           "tensor",
                           kn, i + 1, p->name);
  }
  return oxa_check_overlap(ki, tens, nargs);
}

/* ----------------------------------------------------- contract evaluation */

typedef struct hval {
  int64_t v;
  bool ok;
} hval;

static int64_t arg_int(const ox_arg *a, bool *ok) {
  if (a->dtype >= OX_U8 && a->dtype <= OX_U64) {
    if (a->v.u > INT64_MAX) {
      *ok = false;
      return 0;
    }
    return (int64_t)a->v.u;
  }
  return a->v.i;
}

/* Evaluates a contract expression over the arguments (tens: their tensors). */
static int64_t eval(const oxi_hexpr *e, const ox_arg *args, oxr_tensor *const *tens, bool *ok) {
  switch (e->kind) {
  case OXI_H_CONST: return e->value;
  case OXI_H_LEN: return tens[e->param]->numel;
  case OXI_H_PARAM: return arg_int(&args[e->param], ok);
  case OXI_H_NOT: return !eval(e->a, args, tens, ok);
  case OXI_H_AND: return eval(e->a, args, tens, ok) && eval(e->b, args, tens, ok);
  case OXI_H_OR: return eval(e->a, args, tens, ok) || eval(e->b, args, tens, ok);
  case OXI_H_CMP: {
    int64_t a = eval(e->a, args, tens, ok), b = eval(e->b, args, tens, ok);
    switch (e->sub) {
    case OXI_EQ: return a == b;
    case OXI_NE: return a != b;
    case OXI_LT: return a < b;
    case OXI_LE: return a <= b;
    case OXI_GT: return a > b;
    default: return a >= b;
    }
  }
  case OXI_H_BIN: {
    int64_t a = eval(e->a, args, tens, ok), b = eval(e->b, args, tens, ok), r = 0;
    switch (e->sub) {
    case OXI_ADD: if (__builtin_add_overflow(a, b, &r)) *ok = false; break;
    case OXI_SUB: if (__builtin_sub_overflow(a, b, &r)) *ok = false; break;
    case OXI_MUL: if (__builtin_mul_overflow(a, b, &r)) *ok = false; break;
    case OXI_DIV:
    case OXI_REM:
      if (b == 0 || (a == INT64_MIN && b == -1))
        *ok = false;
      else
        r = e->sub == OXI_DIV ? a / b : a % b;
      break;
    default: *ok = false; break;
    }
    return r;
  }
  }
  *ok = false;
  return 0;
}

static void describe_lens(const oxi_kernel *ki, const oxi_hexpr *e, const ox_arg *args,
                          oxr_tensor *const *tens, oxb_str *o) {
  if (!e)
    return;
  if (e->kind == OXI_H_LEN)
    oxb_str_addf(o, "%s%s.len() = %lld", o->len ? ", " : "", ((oxi_param *)ki->params.items[e->param])->name,
                 (long long)tens[e->param]->numel);
  else if (e->kind == OXI_H_PARAM) {
    bool ok = true;
    oxb_str_addf(o, "%s%s = %lld", o->len ? ", " : "", ((oxi_param *)ki->params.items[e->param])->name,
                 (long long)arg_int(&args[e->param], &ok));
  }
  describe_lens(ki, e->a, args, tens, o);
  describe_lens(ki, e->b, args, tens, o);
}

static ox_status check_config(const oxa_kernel *k, const oxi_kernel *ki, const oxr_stream *s,
                              const ox_launch_config *cfg, const ox_arg *args, oxr_tensor *const *tens,
                              uint32_t grid[3], uint32_t block[3]) {
  ox_device dev = s->dev;
  if (!cfg)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s': launch config is NULL", ki->name);
  uint64_t threads = 1, total;
  for (int i = 0; i < 3; i++) {
    grid[i] = cfg->grid[i] ? cfg->grid[i] : 1;
    block[i] = cfg->block[i] ? cfg->block[i] : 1;
    if (block[i] > (uint32_t)dev->max_block_dim[i] || grid[i] > (uint32_t)dev->max_grid_dim[i])
      return oxb_set_error(OX_ERR_LAUNCH,
                           "kernel '%s': grid (%u, %u, %u) x block (%u, %u, %u) exceeds the limits "
                           "of %s (block up to (%d, %d, %d), grid up to (%d, %d, %d))",
                           ki->name, cfg->grid[0], cfg->grid[1], cfg->grid[2], cfg->block[0],
                           cfg->block[1], cfg->block[2], ox_device_name(dev), dev->max_block_dim[0],
                           dev->max_block_dim[1], dev->max_block_dim[2], dev->max_grid_dim[0],
                           dev->max_grid_dim[1], dev->max_grid_dim[2]);
    threads *= block[i];
  }
  if (threads > (uint64_t)dev->max_threads_per_block)
    return oxb_set_error(OX_ERR_LAUNCH, "kernel '%s': a block of %llu threads exceeds %s's limit of %d",
                         ki->name, (unsigned long long)threads, ox_device_name(dev),
                         dev->max_threads_per_block);
  /* thread::index_1d() must be unique: the grid's thread count must fit in 63 bits */
  if (__builtin_mul_overflow((uint64_t)grid[0] * grid[1], (uint64_t)grid[2], &total) ||
      __builtin_mul_overflow(total, threads, &total) || total > (uint64_t)INT64_MAX)
    return oxb_set_error(OX_ERR_LAUNCH, "kernel '%s': the grid has too many threads", ki->name);
  if (ki->block[0] &&
      (block[0] != (uint32_t)ki->block[0] || block[1] != (uint32_t)ki->block[1] ||
       block[2] != (uint32_t)ki->block[2]))
    return oxb_set_error(OX_ERR_LAUNCH,
                         "%s:%d:%d: kernel '%s' has launch_contract block = (%d, %d, %d), but is "
                         "launched with block (%u, %u, %u)",
                         k->mod->ir.filename, ki->line, ki->col, ki->name, ki->block[0], ki->block[1],
                         ki->block[2], block[0], block[1], block[2]);
  if (ki->shared_bytes > dev->max_shared_per_block)
    return oxb_set_error(OX_ERR_LAUNCH, "kernel '%s' needs %lld bytes of shared memory; %s allows %d",
                         ki->name, (long long)ki->shared_bytes, ox_device_name(dev),
                         dev->max_shared_per_block);
  for (int i = 0; i < ki->requires.len; i++) {
    const oxi_requires *r = ki->requires.items[i];
    bool ok = true;
    int64_t v = eval(r->expr, args, tens, &ok);
    if (ok && v)
      continue;
    oxb_str vals = {0};
    describe_lens(ki, r->expr, args, tens, &vals);
    ox_status st = oxb_set_error(OX_ERR_LAUNCH,
                                 "%s:%d:%d: launch contract of kernel '%s' violated: %s %s (%s)",
                                 k->mod->ir.filename, r->line, r->col, ki->name, r->text,
                                 ok ? "is false" : "overflows 64-bit arithmetic",
                                 vals.buf ? vals.buf : "");
    oxb_str_free(&vals);
    return st;
  }
  return OX_OK;
}


/* The kernel, stream and argument tensors of a public launch call. The
 * stream, if given, says the device (one of the module's type); else the
 * tensors do, and the launch takes that device's default stream. */
static ox_status resolve(const char *fn, ox_kernel kh, ox_stream sh, const ox_arg *args, int nargs,
                         oxa_kernel **k, oxr_stream **s, oxr_tensor **tens) {
  if (!(*k = oxa_kernel_get(fn, kh)))
    return ox_last_status();
  ox_status st = oxa_arg_tensors(*k, args, nargs, tens);
  if (st)
    return st;
  ox_device dev = (*k)->mod->dev;
  if (!sh) {
    if ((st = oxa_launch_device(*k, tens, nargs, &dev)))
      return st;
  } else {
    oxr_stream *given = oxr_stream_get(fn, sh);
    if (!given)
      return ox_last_status();
    if (given->dev->type == dev->type) { /* any device of the module's type */
      *s = given;
      return OX_OK;
    }
  }
  return oxr_resolve_stream(fn, dev, sh, s); /* (a stream of another type: its error) */
}

ox_status ox_launch_check(ox_kernel kh, ox_stream sh, const ox_launch_config *cfg,
                          const ox_arg *args, int nargs) {
  oxa_kernel *k;
  oxr_stream *s;
  oxr_tensor *tens[OXA_MAX_PARAMS];
  ox_status st = resolve(__func__, kh, sh, args, nargs, &k, &s, tens);
  return st ? st : oxa_launch(k, s, cfg, args, nargs, tens, false);
}

/* The streams of the calling thread's two latest launches, newest first (handles: a stream
 * destroyed since is not found), for ox_launch_errors. */
static _Thread_local ox_stream launched[2];

/* OXIDE_LAUNCH_BLOCKING=1: every launch waits for its stream (-1: not read yet). */
static int blocking = -1;

static bool launch_blocking(void) {
  int b = __atomic_load_n(&blocking, __ATOMIC_RELAXED);
  if (b < 0) { /* every thread that races here reads the same environment */
    const char *e = getenv("OXIDE_LAUNCH_BLOCKING");
    b = e && strcmp(e, "1") == 0;
    __atomic_store_n(&blocking, b, __ATOMIC_RELAXED);
  }
  return b;
}

ox_status ox_launch(ox_kernel kh, ox_stream sh, const ox_launch_config *cfg, const ox_arg *args,
                    int nargs) {
  oxa_kernel *k;
  oxr_stream *s;
  oxr_tensor *tens[OXA_MAX_PARAMS];
  ox_status st = resolve(__func__, kh, sh, args, nargs, &k, &s, tens);
  if (st || (st = oxa_launch(k, s, cfg, args, nargs, tens, true)))
    return st;
  if (launched[0] != s->handle) {
    launched[1] = launched[0];
    launched[0] = s->handle;
  }
  return launch_blocking() ? ox_stream_synchronize(s->handle) : OX_OK;
}

ox_status ox_launch_errors(void) {
  for (int i = 0; i < 2; i++) {
    oxr_stream *s = launched[i] ? oxb_handle_get(OXB_H_STREAM, (uint64_t)(uintptr_t)launched[i]) : NULL;
    ox_status st = s ? oxr_stream_peek_error(s) : OX_OK;
    if (st)
      return st;
  }
  return OX_OK;
}

ox_status oxa_launch(oxa_kernel *k, oxr_stream *s, const ox_launch_config *cfg, const ox_arg *args,
                     int nargs, oxr_tensor *const *tens, bool run) {
  if (k->fn && k->fn->is_tile)
    return oxa_tile_launch(k, s, cfg, args, nargs, tens, run);
  const oxi_kernel *ki = k->ir;
  oxa_spec *sp = NULL; /* a kernel with type generics: its instance for the arguments' dtypes */
  ox_arg conv[OXA_MAX_PARAMS];
  ox_status st;
  if (k->fn) {
    int64_t gen[OXA_MAX_GENERICS] = {0};
    if (nargs != ki->params.len)
      return check_args(ki, s, args, nargs, tens); /* (its message for a wrong count) */
    if ((st = oxa_bind_types(k, args, nargs, tens, gen)) || (st = oxa_specialize(k, gen, 0, s->dev, &sp)))
      return st;
    if (!(args = oxa_generic_args(k, gen, args, nargs, conv)))
      return ox_last_status();
    ki = sp->ir;
  }
  uint32_t grid[3], block[3];
  st = check_args(ki, s, args, nargs, tens);
  if (!st)
    st = check_config(k, ki, s, cfg, args, tens, grid, block);
  if (st || !run)
    return st;
  CUfunction f = NULL; /* the code on the launch's device (loaded there on first use) */
  if (sp)
    f = sp->cu_fn[oxa_slot(s->dev)];
  else if (s->dev->type == OX_DEVICE_CUDA && (st = oxa_kernel_fn(k, s->dev, &f)))
    return st;
  /* argument values, flattened: scalars by value, slices as (pointer, length) */
  uint64_t vals[OXI_MAX_PARAM_VALUES];
  void *ptrs[OXI_MAX_PARAM_VALUES];
  int j = 0;
  for (int i = 0; i < nargs; i++) {
    const oxi_param *p = ki->params.items[i];
    if (p->kind == OXI_P_SCALAR) {
      oxa_scalar_bits(&args[i], &vals[j]);
      ptrs[j] = &vals[j];
      j++;
    } else {
      oxr_tensor *t = tens[i];
      vals[j] = (uint64_t)(uintptr_t)t->data;
      ptrs[j] = &vals[j];
      vals[j + 1] = (uint64_t)t->numel;
      ptrs[j + 1] = &vals[j + 1];
      j += 2;
      /* order this launch after other streams' pending work on the memory */
      st = oxr_tensor_use(t, s, oxa_mutable_kind(p->kind));
      if (st)
        return st;
    }
  }
  assert(j == k->nflat);
  if (s->dev->type == OX_DEVICE_CPU) {
    oxr_cpu_hold hold = {0};
    for (int i = 0; i < nargs; i++) {
      const oxi_param *p = ki->params.items[i];
      if (p->kind != OXI_P_SCALAR)
        oxr_cpu_hold_add(&hold, tens[i], oxa_mutable_kind(p->kind));
    }
    oxr_cpu_hold_take(&hold);
    st = oxr_cpu_launch(sp ? &sp->cpu : &k->cpu, grid, block, ptrs, s->err, k->tag, s);
    oxr_cpu_hold_drop(&hold);
    return st;
  }
  vals[j] = (uint64_t)s->err_d;
  ptrs[j] = &vals[j];
  uint32_t tag = k->tag;
  ptrs[j + 1] = &tag;
  if ((st = oxr_cuda_make_current(s->dev)))
    return st;
  unsigned dyn = oxa_dynamic_shared(ki);
  int sm = sp ? sp->sm : k->mod->opts.sm ? k->mod->opts.sm : s->dev->cc; /* what the code was built for */
  CUresult r = oxr_cuda_launch(f, grid, block, dyn, s->cu, ptrs, sm >= 90);
  return r ? oxr_cuda_launch_error(r, f, ki->name, block, dyn) : OX_OK;
}
