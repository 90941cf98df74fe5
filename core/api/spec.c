/* spec.c - specializations of generic kernels (#[tile] kernels, and
 * #[kernel]s with type generics): each binding of a kernel's generics is
 * checked, lowered, compiled (or found in the cache) on its first launch, and
 * kept on the kernel for the next ones. Type generics are bound here, from the
 * dtypes of the launch's tensors, and scalars of a generic type are converted
 * to the bound dtype. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "tile/tile.h"

/* Loads specialization sp's code on `dev`, where it has not run yet (one
 * build a spec and architecture: the other devices' load the cached
 * artifact). The caller holds k->lock. */
static ox_status spec_load(oxa_kernel *k, oxa_spec *sp, ox_device dev) {
  int d = oxa_slot(dev), from_cache;
  ox_status s = oxa_build(dev, &sp->irm, k->mod->text, sp->extra, &k->mod->opts, &sp->code[d], &from_cache);
  if (!s)
    s = oxa_entry(dev, &sp->code[d], sp->ir, &sp->cu_fn[d], &sp->cpu);
  if (!s && sp->ir->persistent) { /* the grid is what fits at once (launch_with) */
    int b = 0;
    if (oxr_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor &&
        oxr_cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(&b, sp->cu_fn[d], sp->ir->block[0],
                                                           oxa_dynamic_shared(sp->ir)))
      b = 0;
    sp->resident[d] = b > 0 ? b : 1;
  }
  if (s)
    oxa_code_free(dev, &sp->code[d]);
  else
    sp->loaded[d] = 1;
  return s;
}

/* What a specialization's region works on (base.h: protected regions):
 * specialize frees sp's arena and the strings whatever the outcome. */
typedef struct spec_job {
  oxa_kernel *k;
  oxa_spec *sp;
  const int64_t *gen;
  uint64_t facts;
  int sm;
  int64_t limit;
  oxi_kernel *ki; /* the lowered kernel */
  oxb_diags d;
  oxb_str err;
} spec_job;

/* Checks generic kernel k with sp's generics, and tile-lowers it if it is a
 * #[tile] kernel (the part of a specialization that allocates in the arena). */
static ox_status spec_lower(void *arg) {
  spec_job *j = arg;
  oxa_spec *sp = j->sp;
  const oxa_module *m = j->k->mod;
  oxb_source src = {m->ir.filename, m->text, strlen(m->text)};
  j->d.src = &src;
  if (!oxf_check_spec(&sp->arena, &j->d, m->prog, j->k->fn, j->gen, &sp->irm))
    return oxb_set_error_text(OX_ERR_COMPILE, j->d.text.buf ? j->d.text.buf : "kernel error");
  oxi_kernel *ki = sp->irm.kernels.items[sp->irm.kernels.len - 1];
  if (!oxi_verify(&sp->irm, &j->err))
    return oxb_set_error(OX_ERR_INTERNAL, "internal error (%s IR): %s", ki->is_tile ? "tile" : "kernel",
                         j->err.buf);
  if (!ki->is_tile) { /* a #[kernel]'s instance: code as it is */
    j->ki = ki;
    return OX_OK;
  }
  for (int i = 0; i < ki->params.len && i < 64; i++)
    ((oxi_param *)ki->params.items[i])->contiguous16 = (j->facts >> i) & 1;
  ox_status s = oxt_lower(&sp->irm, ki, j->sm, j->limit);
  if (!s && !oxi_verify(&sp->irm, &j->err))
    s = oxb_set_error(OX_ERR_INTERNAL, "internal error (lowered tile IR): %s", j->err.buf);
  if (!s)
    j->ki = ki;
  return s;
}

/* How tile kernels are lowered for the CPU: one thread a block (0), or, with
 * OXIDE_TILE_THREADS=1 in the environment, as for a GPU (OXT_CPU_THREADS):
 * tools/run_tests.sh runs the tile tests that way too, so that the GPU
 * lowering's logic is checked without a GPU. Read once. */
static int cpu_tile_sm(void) {
  static _Atomic int mode = 1; /* 1: not read yet */
  int m = mode;
  if (m == 1) {
    const char *e = getenv("OXIDE_TILE_THREADS");
    mode = m = e && !strcmp(e, "1") ? OXT_CPU_THREADS : 0;
  }
  return m;
}

ox_status oxa_specialize(oxa_kernel *k, const int64_t *gen, uint64_t facts, ox_device dev, oxa_spec **out) {
  oxa_module *m = k->mod;
  int sm = dev->type != OX_DEVICE_CUDA ? cpu_tile_sm() : m->opts.sm ? m->opts.sm : dev->cc;
  int64_t limit = dev->max_shared_per_block;
  if (oxa_slot(dev) >= OXA_MAX_DEVICES)
    return oxb_set_error(OX_ERR_UNSUPPORTED, "kernel '%s': Oxide runs kernels on CUDA devices 0 to %d, not %s",
                         k->ir->name, OXA_MAX_DEVICES - 1, dev->label);
  pthread_mutex_lock(&k->lock);
  for (oxa_spec *sp = k->specs; sp; sp = sp->next)
    if (!memcmp(sp->generics, gen, sizeof sp->generics) && sp->facts == facts && sp->sm == sm &&
        sp->shared_limit == limit) {
      ox_status s = sp->loaded[oxa_slot(dev)] ? OX_OK : spec_load(k, sp, dev);
      pthread_mutex_unlock(&k->lock);
      *out = sp;
      return s;
    }
  oxa_spec *sp = calloc(1, sizeof *sp);
  ox_status s = sp ? OX_OK : oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  spec_job j = {k, sp, gen, facts, sm, limit, NULL, {0}, {0}};
  if (!s) {
    memcpy(sp->generics, gen, sizeof sp->generics);
    sp->facts = facts;
    sp->sm = sm;
    sp->shared_limit = limit;
    sp->irm.arena = &sp->arena;
    sp->irm.filename = m->ir.filename;
    /* protected, inside k->lock: an unwind ends here, and the lock is released below */
    s = oxb_protected(spec_lower, &j);
  }
  oxb_str_free(&j.d.text);
  oxb_str_free(&j.err);
  oxi_kernel *ki = j.ki;
  if (!s) {
    int n = snprintf(sp->extra, sizeof sp->extra, "%s %s", ki->is_tile ? "tile" : "generic", ki->name);
    for (int g = 0; g < k->ngenerics && n < 400; g++)
      n += snprintf(sp->extra + n, sizeof sp->extra - (size_t)n, " %lld", (long long)gen[g]);
    /* the lowering's own choices too (they follow from the device, which the key holds, but a
       mismatch between cached code and the shared memory the launch passes would be fatal) */
    snprintf(sp->extra + n, sizeof sp->extra - (size_t)n, " facts %llx block %d shared %lld persistent %d",
             (unsigned long long)facts, ki->block[0], (long long)ki->shared_bytes, ki->persistent);
    sp->ir = ki;
    s = spec_load(k, sp, dev);
  }
  if (s) {
    if (sp)
      oxb_arena_free(&sp->arena);
    free(sp);
    pthread_mutex_unlock(&k->lock);
    return s;
  }
  sp->next = k->specs;
  k->specs = sp;
  pthread_mutex_unlock(&k->lock);
  *out = sp;
  return OX_OK;
}


/* The dtype a tensor argument for parameter i gives its type generic, or -1. */
static int param_tvar(const oxa_kernel *k, int i) {
  const oxf_typeexpr *t = ((const oxf_param *)k->fn->params.items[i])->type;
  return t ? t->tvar - 1 : -1;
}

ox_status oxa_bind_types(const oxa_kernel *k, const ox_arg *args, int nargs, oxr_tensor *const *tens,
                         int64_t *gen) {
  const oxf_fn *fn = k->fn;
  int from[OXA_MAX_GENERICS];
  (void)args;
  for (int g = 0; g < fn->generics.len; g++)
    if (oxf_is_type_generic(fn, g)) {
      gen[g] = 0;
      from[g] = -1;
    }
  for (int i = 0; i < nargs && i < fn->params.len; i++) {
    int g = param_tvar(k, i);
    if (g < 0 || !tens[i])
      continue;
    const oxf_typeexpr *decl = fn->generic_types.items[g];
    const char *gn = fn->generics.items[g], *pn = ((const oxf_param *)fn->params.items[i])->name;
    ox_dtype t = tens[i]->dtype;
    if (!oxf_bound_admits(decl->bound, t))
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): a tensor of %s, which '%s: %s' does not "
                           "admit",
                           fn->name, i + 1, pn, ox_dtype_name(t), gn, oxf_bound_name(decl->bound));
    if (gen[g] && gen[g] != (int64_t)t + 1)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s': type generic '%s' is %s from argument %d ('%s') and %s from "
                           "argument %d ('%s')",
                           fn->name, gn, ox_dtype_name((ox_dtype)(gen[g] - 1)), from[g] + 1,
                           ((const oxf_param *)fn->params.items[from[g]])->name, ox_dtype_name(t), i + 1,
                           pn);
    if (!gen[g]) {
      gen[g] = (int64_t)t + 1;
      from[g] = i;
    }
  }
  for (int g = 0; g < fn->generics.len; g++)
    if (oxf_is_type_generic(fn, g) && !gen[g])
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s': type generic '%s' is not bound: it takes the dtype of a "
                           "tensor argument, and none was given for it",
                           fn->name, (const char *)fn->generics.items[g]);
  return OX_OK;
}

/* Scalar a converted to dtype `to` (a type generic's binding), into *out. */
static ox_status convert_scalar(const oxa_kernel *k, int i, const ox_arg *a, ox_dtype to, ox_arg *out) {
  const oxf_fn *fn = k->fn;
  const char *pn = ((const oxf_param *)fn->params.items[i])->name;
  const char *gn = fn->generics.items[param_tvar(k, i)];
  ox_dtype from = a->dtype;
  bool ffrom = from == OX_F16 || from == OX_BF16 || from == OX_F32 || from == OX_F64;
  bool ifrom = from >= OX_I8 && from <= OX_U64, uns = from >= OX_U8 && from <= OX_U64;
  *out = *a;
  out->dtype = to;
  if (!ffrom && !ifrom)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "kernel '%s', argument %d ('%s'): %s for a scalar of type generic '%s' "
                         "(here %s); pass a number",
                         fn->name, i + 1, pn, ox_dtype_name(from), gn, ox_dtype_name(to));
  if (to == OX_F16 || to == OX_BF16 || to == OX_F32 || to == OX_F64) {
    double v = ffrom ? a->v.f : uns ? (double)a->v.u : (double)a->v.i;
    double max = to == OX_F16 ? 65504.0 : to == OX_BF16 ? 3.3895313892515355e38 : to == OX_F32 ? 3.4028234663852886e38 : INFINITY;
    if (isfinite(v) && fabs(v) > max * (1 + 0x1p-24)) /* (rounds to infinity) */
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): %g is out of range for %s (type generic "
                           "'%s')", fn->name, i + 1, pn, v, ox_dtype_name(to), gn);
    out->v.f = v;
    return OX_OK;
  }
  ox_arg exact = *a; /* a float with an integer value converts exactly (a Num generic's
                        scalar arrives as f64 from bindings that read ox_kernel_param) */
  if (ffrom) {
    double v = a->v.f;
    if (!(v == floor(v) && fabs(v) < 0x1p63))
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): %g is not an integer, which type generic "
                           "'%s' (here %s) needs",
                           fn->name, i + 1, pn, v, gn, ox_dtype_name(to));
    exact.dtype = OX_I64;
    exact.v.i = (int64_t)v;
    a = &exact;
    uns = false;
  }
  bool tuns = to >= OX_U8 && to <= OX_U64;
  int bits = (int)ox_dtype_size(to) * 8;
  bool fits;
  if (uns)
    fits = tuns ? bits == 64 || a->v.u < (UINT64_C(1) << bits)
                : a->v.u <= (uint64_t)(bits == 64 ? INT64_MAX : (INT64_C(1) << (bits - 1)) - 1);
  else
    fits = tuns ? a->v.i >= 0 && (bits == 64 || (uint64_t)a->v.i < (UINT64_C(1) << bits))
                : bits == 64 || (a->v.i >= -(INT64_C(1) << (bits - 1)) && a->v.i < (INT64_C(1) << (bits - 1)));
  if (!fits) {
    char text[32];
    if (uns)
      snprintf(text, sizeof text, "%llu", (unsigned long long)a->v.u);
    else
      snprintf(text, sizeof text, "%lld", (long long)a->v.i);
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                         "kernel '%s', argument %d ('%s'): %s is out of range for %s (type generic "
                         "'%s')", fn->name, i + 1, pn, text, ox_dtype_name(to), gn);
  }
  if (tuns)
    out->v.u = uns ? a->v.u : (uint64_t)a->v.i;
  else
    out->v.i = uns ? (int64_t)a->v.u : a->v.i;
  return OX_OK;
}

const ox_arg *oxa_generic_args(const oxa_kernel *k, const int64_t *gen, const ox_arg *args, int nargs,
                               ox_arg *conv) {
  if (!k->fn->ntypes)
    return args;
  for (int i = 0; i < nargs; i++) {
    conv[i] = args[i];
    int g = i < k->fn->params.len ? param_tvar(k, i) : -1;
    if (g < 0 || args[i].kind != OX_ARG_SCALAR ||
        ((const oxf_param *)k->fn->params.items[i])->type->kind != OXF_TY_SCALAR)
      continue;
    if (convert_scalar(k, i, &args[i], (ox_dtype)(gen[g] - 1), &conv[i]))
      return NULL;
  }
  return conv;
}
