/* tile_launch.c - launching #[tile] kernels: the const generics are bound from
 * the output partitions (the type generics from the dtypes, spec.c), the
 * kernel is specialized on first use of each binding (spec.c), and the
 * partition grid becomes the launch grid. With candidate configurations
 * (ox_kernel_set_candidates), the outputs are re-partitioned to the one
 * tune.c chose, measuring them on scratch outputs the first time. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "tile/tile.h"

/* Binds k's generics from its &mut Tensor arguments' partition tiles, and
 * explicit values: `over` (a candidate's; 0: none) before
 * ox_kernel_set_generic's. */
static ox_status bind_generics(const oxa_kernel *k, int nargs, oxr_tensor *const *tens, const int64_t *over,
                               int64_t *gen) {
  const oxf_fn *fn = k->fn;
  const char *kn = fn->name;
  for (int g = 0; g < OXA_MAX_GENERICS; g++)
    gen[g] = 0;
  if (nargs != fn->params.len)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s' takes %d argument%s, got %d", kn,
                         fn->params.len, fn->params.len == 1 ? "" : "s", nargs);
  for (int i = 0; i < nargs; i++) {
    const oxf_param *p = fn->params.items[i];
    if (p->type->kind != OXF_TY_MUTTENSOR)
      continue;
    const oxr_tensor *t = tens[i];
    if (!t || !(t->flags & OXR_T_PARTITION))
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): an output tile is passed as a "
                           "partition of a tensor (ox_tensor_partition), got %s",
                           kn, i + 1, p->name, !t ? "no tensor" : "a plain tensor");
    if (t->ndim != p->type->rank)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): a partition of rank %d for a tile of rank %d",
                           kn, i + 1, p->name, t->ndim, p->type->rank);
    for (int d = 0; d < p->type->rank; d++) {
      int64_t want = p->type->dims[d];
      if (want <= -2) {
        int g = (int)(-2 - want);
        if (gen[g] && gen[g] != t->tile[d])
          return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                               "kernel '%s': generic '%s' is %lld from one output's tiles and %lld "
                               "from argument %d ('%s')",
                               kn, (const char *)fn->generics.items[g], (long long)gen[g],
                               (long long)t->tile[d], i + 1, p->name);
        gen[g] = t->tile[d];
      }
    }
  }
  /* a generic no output sizes takes its value from an input dim that names it (`x: &Tensor<f32,
     [-1, D]>`): each size the inputs have is a specialization, as Triton's constexpr shapes are */
  int64_t from_in[OXA_MAX_GENERICS] = {0};
  for (int i = 0; i < nargs; i++) {
    const oxf_param *p = fn->params.items[i];
    if (p->type->kind != OXF_TY_TENSOR && p->type->kind != OXF_TY_ATOMICTENSOR)
      continue;
    for (int d = 0; tens[i] && d < p->type->rank && d < tens[i]->ndim; d++)
      if (OXF_DIM_IS_GENERIC(p->type->dims[d]) && !from_in[OXF_DIM_GENERIC_INDEX(p->type->dims[d])])
        from_in[OXF_DIM_GENERIC_INDEX(p->type->dims[d])] = tens[i]->shape[d];
  }
  for (int g = 0; g < fn->generics.len; g++) {
    if (oxf_is_type_generic(fn, g)) /* (oxa_bind_types) */
      continue;
    int64_t x = over && over[g] ? over[g] : k->explicit_generics[g];
    if (!x && !gen[g] && from_in[g] > 0)
      x = from_in[g];
    if (x && gen[g] && x != gen[g])
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s': generic '%s' is %lld from the output partitions but was "
                           "set to %lld (ox_kernel_set_generic)",
                           kn, (const char *)fn->generics.items[g], (long long)gen[g], (long long)x);
    if (x)
      gen[g] = x;
    if (!gen[g])
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s': generic '%s' is not bound: it must size a dim of a "
                           "`&mut Tensor` output, whose partition gives its value, or of an input, "
                           "or be set with ox_kernel_set_generic",
                           kn, (const char *)fn->generics.items[g]);
  }
  return OX_OK;
}

/* The launch facts the lowering exploits (oxi_param.contiguous16), one bit
 * per tensor argument: part of the specialization's key. */
static uint64_t launch_facts(oxr_tensor *const *tens, int nargs) {
  uint64_t facts = 0;
  for (int i = 0; i < nargs && i < 64; i++) {
    const oxr_tensor *t = tens[i];
    if (!t || t->ndim < 1)
      continue;
    size_t es = ox_dtype_size(t->dtype);
    bool ok = (uintptr_t)t->data % 16 == 0 && t->strides[t->ndim - 1] == 1;
    for (int d = 0; ok && d + 1 < t->ndim; d++) /* (not broadcast: tensor maps take no stride 0) */
      ok = (t->strides[d] * (int64_t)es) % 16 == 0 && (t->strides[d] || t->shape[d] <= 1);
    facts |= (uint64_t)ok << i;
  }
  return facts;
}

ox_status ox_kernel_set_generic(ox_kernel kh, const char *name, int64_t value) {
  oxa_kernel *k = oxa_kernel_get(__func__, kh);
  if (!k)
    return ox_last_status();
  if (!name)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_kernel_set_generic: name is NULL");
  if (!k->fn)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s' is not a tile kernel: it has no generics",
                         k->ir->name);
  for (int g = 0; g < k->ngenerics; g++)
    if (!strcmp(k->fn->generics.items[g], name)) {
      if (oxf_is_type_generic(k->fn, g))
        return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s': '%s' is a type generic, which a "
                             "launch binds from its tensors' dtypes", k->ir->name, name);
      if (value == 0)
        return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s': generic '%s' cannot be 0",
                             k->ir->name, name);
      k->explicit_generics[g] = value;
      return OX_OK;
    }
  return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s' has no generic '%s'", k->ir->name, name);
}

/* Checks the arguments against the specialized signature. */
static ox_status check_args(const oxi_kernel *ki, const oxr_stream *s, const ox_arg *args,
                            oxr_tensor *const *tens, int nargs, int64_t grid[OXI_MAX_RANK],
                            int *grid_rank) {
  const char *kn = ki->name;
  *grid_rank = 0;
  for (int i = 0; i < nargs; i++) {
    const oxi_param *p = ki->params.items[i];
    const ox_arg *a = &args[i];
    if (p->kind == OXI_P_SCALAR) {
      if (a->kind != OX_ARG_SCALAR || a->dtype != p->dtype)
        return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                             "kernel '%s', argument %d ('%s'): expected a %s scalar, got %s%s", kn,
                             i + 1, p->name, ox_dtype_name(p->dtype),
                             a->kind == OX_ARG_TENSOR ? "a tensor" : "a scalar of ",
                             a->kind == OX_ARG_TENSOR ? "" : ox_dtype_name(a->dtype));
      continue;
    }
    const oxr_tensor *t = tens[i];
    if (!t)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s', argument %d ('%s'): expected a tensor",
                           kn, i + 1, p->name);
    if (t->dtype != p->dtype || t->dev != s->dev || t->ndim != p->rank)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): expected a %s tensor of rank %d on %s, "
                           "got a %s tensor of rank %d on %s",
                           kn, i + 1, p->name, ox_dtype_name(p->dtype), p->rank, s->dev->label,
                           ox_dtype_name(t->dtype), t->ndim, t->dev->label);
    if (p->kind == OXI_P_ATENSOR && (t->flags & OXR_T_READ_ONLY))
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s', argument %d ('%s'): the tensor is read-only",
                           kn, i + 1, p->name);
    if (p->kind == OXI_P_TENSOR || p->kind == OXI_P_ATENSOR) {
      for (int d = 0; d < p->rank; d++)
        if (p->dims[d] != -1 && t->shape[d] != p->dims[d])
          return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                               "kernel '%s', argument %d ('%s'): dim %d is %lld, the kernel says %lld",
                               kn, i + 1, p->name, d, (long long)t->shape[d], (long long)p->dims[d]);
      continue;
    }
    /* an output tile: a writable partition whose grid every output shares */
    if (t->flags & OXR_T_READ_ONLY)
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s', argument %d ('%s'): the tensor is read-only",
                           kn, i + 1, p->name);
    int64_t g[OXI_MAX_RANK];
    for (int d = 0; d < p->rank; d++) {
      if (t->tile[d] != p->dims[d])
        return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                             "kernel '%s', argument %d ('%s'): partition tile dim %d is %lld, the "
                             "kernel's tile is %lld",
                             kn, i + 1, p->name, d, (long long)t->tile[d], (long long)p->dims[d]);
      g[d] = (t->shape[d] + p->dims[d] - 1) / p->dims[d];
    }
    if (*grid_rank && (*grid_rank != p->rank || memcmp(g, grid, sizeof(int64_t) * (size_t)p->rank)))
      return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s', argument %d ('%s'): every output partition must have the "
                           "same tile grid",
                           kn, i + 1, p->name);
    *grid_rank = p->rank;
    memcpy(grid, g, sizeof(int64_t) * (size_t)p->rank);
  }
  return oxa_check_overlap(ki, tens, nargs);
}

/* The tensor map of a TMA copy (param p, OXI_P_TMAP) of tensor t: its dims
 * innermost first, p's box and swizzle; zero-filled beyond the edges. The
 * launch fact contiguous16 (the last dim's stride 1, the others multiples of
 * 16 bytes, the start 16-byte aligned) is what a map needs. */
static ox_status encode_map(const char *kernel, const oxi_param *p, const oxr_tensor *t, CUtensorMap *map) {
  memset(map, 0, sizeof *map);
  if (t->numel == 0)
    return OX_OK; /* an empty operand: no copy reads the map */
  if (!oxr_cu.cuTensorMapEncodeTiled)
    return oxb_set_error(OX_ERR_DRIVER, "kernel '%s' copies with TMA, and this CUDA driver lacks "
                         "cuTensorMapEncodeTiled", kernel);
  size_t es = ox_dtype_size(t->dtype);
  int dtype = es == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
              : t->dtype == OX_F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  int r = p->rank;
  assert(r >= 2 && r <= 5 && t->ndim == r);
  unsigned long long dims[5], strides[4];
  unsigned box[5], one[5];
  unsigned long long extent = (unsigned long long)t->shape[r - 1] * es; /* bytes of the dims inside */
  for (int i = 0; i < r; i++) {
    int d = r - 1 - i;
    dims[i] = (unsigned long long)t->shape[d];
    box[i] = (unsigned)p->dims[i];
    one[i] = 1;
    if (i) {
      /* a dim of 1 is read at 0 only, whatever its stride (a view may give any); a map wants one
         past the dims inside, a multiple of 16 */
      strides[i - 1] = t->shape[d] <= 1 ? (extent + 15) / 16 * 16 : (unsigned long long)t->strides[d] * es;
      extent = strides[i - 1] * (unsigned long long)t->shape[d];
    }
  }
  int swizzle = p->swizzle == 128 ? CU_TENSOR_MAP_SWIZZLE_128B
                : p->swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_32B;
  CUresult res = oxr_cu.cuTensorMapEncodeTiled(map, dtype, (unsigned)r, t->data, dims, strides, box, one, 0,
                                               swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0);
  return res ? oxr_cuda_error(res, "cuTensorMapEncodeTiled") : OX_OK;
}

/* A launch with generics `over` (a candidate's, or NULL) on top of the
 * binding from the partitions. */
static ox_status launch_with(oxa_kernel *k, oxr_stream *s, const ox_launch_config *cfg, const ox_arg *args,
                             int nargs, oxr_tensor *const *tens, bool run, const int64_t *over) {
  int64_t gen[OXA_MAX_GENERICS];
  ox_arg conv[OXA_MAX_PARAMS];
  ox_status st = bind_generics(k, nargs, tens, over, gen);
  if (!st)
    st = oxa_bind_types(k, args, nargs, tens, gen);
  oxa_spec *sp = NULL;
  if (!st)
    st = oxa_specialize(k, gen, launch_facts(tens, nargs), s->dev, &sp);
  if (st)
    return st;
  args = oxa_generic_args(k, gen, args, nargs, conv);
  if (!args)
    return ox_last_status();
  const oxi_kernel *ki = sp->ir;
  int64_t g[OXI_MAX_RANK];
  int r;
  if ((st = check_args(ki, s, args, tens, nargs, g, &r)))
    return st;
  /* the grid: last tile axis on x, the one before on y, the rest on z; a
   * kernel without partitioned outputs (atomic tensors only) takes the
   * launch config's */
  uint64_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {(uint32_t)ki->block[0], 1, 1};
  if (r == 0) {
    if (!cfg || !cfg->grid[0])
      return oxb_set_error(OX_ERR_LAUNCH,
                           "kernel '%s' has no partitioned output to give its grid: pass the grid "
                           "in the launch config", ki->name);
    if ((cfg->block[0] && cfg->block[0] != block[0]) || (cfg->block[1] ? cfg->block[1] : 1) != 1 ||
        (cfg->block[2] ? cfg->block[2] : 1) != 1)
      return oxb_set_error(OX_ERR_LAUNCH,
                           "kernel '%s': a tile kernel's block is the tile lowering's, (%u, 1, 1): "
                           "pass a zero block in the launch config", ki->name, block[0]);
    for (int i = 0; i < 3; i++)
      grid[i] = cfg->grid[i] ? cfg->grid[i] : 1;
    cfg = NULL;
  } else {
    grid[0] = (uint64_t)g[r - 1];
    grid[1] = r >= 2 ? (uint64_t)g[r - 2] : 1;
    for (int d = 0; d + 2 < r; d++)
      grid[2] *= (uint64_t)g[d];
  }
  for (int i = 0; i < 3; i++)
    if (grid[i] == 0 || grid[i] > (uint64_t)s->dev->max_grid_dim[i])
      return oxb_set_error(grid[i] ? OX_ERR_LAUNCH : OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s': the output partition has %llu tiles along grid axis %d%s",
                           ki->name, (unsigned long long)grid[i], i,
                           grid[i] ? ", more than the device allows" : " (an empty output)");
  if (cfg && (cfg->grid[0] || cfg->block[0]) &&
      (cfg->grid[0] != grid[0] || (cfg->grid[1] ? cfg->grid[1] : 1) != grid[1] ||
       (cfg->grid[2] ? cfg->grid[2] : 1) != grid[2] || cfg->block[0] != block[0] ||
       (cfg->block[1] ? cfg->block[1] : 1) != 1 || (cfg->block[2] ? cfg->block[2] : 1) != 1))
    return oxb_set_error(OX_ERR_LAUNCH,
                         "kernel '%s': a tile kernel's grid is its output partition's (%llu, %llu, "
                         "%llu) and its block (%u, 1, 1) is the tile lowering's; pass a NULL or "
                         "zero launch config",
                         ki->name, (unsigned long long)grid[0], (unsigned long long)grid[1],
                         (unsigned long long)grid[2], block[0]);
  if (ki->persistent) { /* its blocks loop over the tiles: as many as are resident at once, at most */
    uint64_t tiles = grid[0] * grid[1] * grid[2], most = (uint64_t)sp->resident[oxa_slot(s->dev)] * (uint64_t)s->dev->multiprocessors;
    if (tiles > UINT32_MAX) /* (the kernel numbers its tiles in 32 bits: oxt_tile_ids) */
      return oxb_set_error(OX_ERR_LAUNCH, "kernel '%s': the output partition has %llu tiles, more than 2^32 - 1",
                           ki->name, (unsigned long long)tiles);
    grid[0] = tiles < most ? tiles : most;
    grid[1] = grid[2] = 1;
  }
  if (!run)
    return OX_OK;
  uint64_t vals[OXI_MAX_PARAM_VALUES];
  void *ptrs[OXI_MAX_PARAM_VALUES];
  int j = 0;
  for (int i = 0; i < nargs; i++) {
    const oxi_param *p = ki->params.items[i];
    if (p->kind == OXI_P_SCALAR) {
      oxa_scalar_bits(&args[i], &vals[j++]);
      continue;
    }
    oxr_tensor *t = tens[i];
    vals[j++] = (uint64_t)(uintptr_t)t->data;
    vals[j++] = (uint64_t)t->numel;
    for (int d = 0; d < p->rank; d++)
      vals[j++] = (uint64_t)t->shape[d];
    for (int d = 0; d < p->rank; d++)
      vals[j++] = (uint64_t)t->strides[d];
    if ((st = oxr_tensor_use(t, s, p->kind == OXI_P_TILE || p->kind == OXI_P_ATENSOR)))
      return st;
  }
  for (int i = 0; i < j; i++)
    ptrs[i] = &vals[i];
  /* the tensor maps of TMA copies (hidden parameters after the user's), by value */
  CUtensorMap maps[8];
  for (int i = nargs, n = 0; i < ki->params.len; i++) {
    const oxi_param *p = ki->params.items[i];
    assert(p->kind == OXI_P_TMAP && n < 8 && s->dev->type == OX_DEVICE_CUDA); /* (choose_tma) */
    if (j + 3 > OXI_MAX_PARAM_VALUES)
      return oxb_set_error(OX_ERR_LAUNCH, "kernel '%s' has too many parameters for its tensor maps",
                           ki->name);
    if ((st = encode_map(ki->name, p, tens[p->src], &maps[n])))
      return st;
    ptrs[j++] = &maps[n++];
  }
  uint32_t g32[3] = {(uint32_t)grid[0], (uint32_t)grid[1], (uint32_t)grid[2]};
  if (s->dev->type == OX_DEVICE_CPU) {
    oxr_cpu_hold hold = {0};
    for (int i = 0; i < nargs; i++) {
      const oxi_param *p = ki->params.items[i];
      if (p->kind != OXI_P_SCALAR)
        oxr_cpu_hold_add(&hold, tens[i], p->kind == OXI_P_TILE || p->kind == OXI_P_ATENSOR);
    }
    oxr_cpu_hold_take(&hold);
    st = oxr_cpu_launch(&sp->cpu, g32, block, ptrs, s->err, k->tag, s);
    oxr_cpu_hold_drop(&hold);
    return st;
  }
  vals[j] = (uint64_t)s->err_d; /* (j past the maps: vals[j] itself is unused before) */
  ptrs[j] = &vals[j];
  uint32_t tag = k->tag;
  ptrs[j + 1] = &tag;
  if ((st = oxr_cuda_make_current(s->dev)))
    return st;
  unsigned dyn = oxa_dynamic_shared(sp->ir);
  CUfunction f = sp->cu_fn[oxa_slot(s->dev)];
  CUresult cr = oxr_cuda_launch(f, g32, block, dyn, s->cu, ptrs, sp->sm >= 90);
  return cr ? oxr_cuda_launch_error(cr, f, sp->ir->name, block, dyn) : OX_OK;
}

/* ----------------------------------------------- candidate configurations */

ox_status ox_kernel_set_candidates(ox_kernel kh, const ox_tile_candidate *cands, int n) {
  oxa_kernel *k = oxa_kernel_get(__func__, kh);
  if (!k)
    return ox_last_status();
  if (!k->fn || !k->fn->is_tile)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s' is not a tile kernel: it has no tile "
                         "sizes to choose", k->ir->name);
  if (n < 0 || (n && !cands))
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_kernel_set_candidates: %s",
                         n < 0 ? "a negative count" : "candidates is NULL");
  int64_t (*cand)[OXA_MAX_GENERICS] = n ? calloc((size_t)n, sizeof *cand) : NULL;
  if (n && !cand)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  const char *kn = k->ir->name;
  ox_status st = OX_OK;
  for (int c = 0; c < n && !st; c++) {
    if (cands[c].num_values <= 0 || !cands[c].values) {
      st = oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s': candidate %d sets no generic", kn, c);
      break;
    }
    for (int v = 0; v < cands[c].num_values && !st; v++) {
      const ox_generic_value *gv = &cands[c].values[v];
      int g = 0;
      while (g < k->ngenerics && (!gv->name || strcmp(k->fn->generics.items[g], gv->name)))
        g++;
      if (g == k->ngenerics || oxf_is_type_generic(k->fn, g))
        st = oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s', candidate %d: no %s '%s'", kn, c,
                           g == k->ngenerics ? "generic" : "const generic (a type generic follows the "
                           "arguments' dtypes)", gv->name ? gv->name : "(NULL)");
      else if (gv->value <= 0 || (gv->value & (gv->value - 1)))
        st = oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s', candidate %d: %s = %lld is not a power of two",
                           kn, c, gv->name, (long long)gv->value);
      else if (cand[c][g])
        st = oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s', candidate %d sets '%s' twice", kn, c, gv->name);
      else
        cand[c][g] = gv->value;
    }
    for (int g = 0; g < k->ngenerics && !st && c; g++)
      if (!cand[c][g] != !cand[0][g])
        st = oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                           "kernel '%s': every candidate sets the same generics; candidate %d %s '%s' and "
                           "candidate 0 %s", kn, c, cand[c][g] ? "sets" : "does not set",
                           (const char *)k->fn->generics.items[g], cand[0][g] ? "does" : "does not");
  }
  if (st) {
    free(cand);
    return st;
  }
  pthread_mutex_lock(&k->tune_lock); /* no launch is using the old ones */
  oxa_tune_free(k); /* choices of other candidates never match again */
  k->cand = cand;
  k->ncand = n;
  pthread_mutex_unlock(&k->tune_lock);
  return OX_OK;
}

/* Re-partitions the outputs (`&mut Tensor` arguments, passed partitioned in
 * any tiles or not at all) to candidate c's tiles: views of the same memory,
 * in views[] (NULL where the argument stays; release them after the launch),
 * and targs/ttens the arguments with them. */
static ox_status repartition(const oxa_kernel *k, const ox_arg *args, int nargs, oxr_tensor *const *tens, int c,
                             ox_arg *targs, oxr_tensor **ttens, ox_tensor *views) {
  for (int i = 0; i < nargs; i++) {
    targs[i] = args[i];
    ttens[i] = tens[i];
    views[i] = NULL;
    const oxf_param *p = k->fn->params.items[i];
    oxr_tensor *t = tens[i];
    if (p->type->kind != OXF_TY_MUTTENSOR || !t || t->ndim != p->type->rank)
      continue; /* the launch's checks report it */
    int64_t tile[OX_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
      int64_t want = p->type->dims[d];
      tile[d] = want <= -2 && k->cand[c][-2 - want] ? k->cand[c][-2 - want]
                : t->flags & OXR_T_PARTITION   ? t->tile[d]
                : want > 0                     ? want
                                               : 0;
      if (!tile[d])
        return oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                             "kernel '%s', argument %d ('%s'): tile dim %d is set by no candidate: pass the "
                             "output partitioned (ox_tensor_partition)", k->ir->name, i + 1, p->name, d);
    }
    ox_status st = ox_tensor_partition(t->handle, t->ndim, tile, &views[i]);
    if (st)
      return st;
    targs[i] = ox_arg_tensor(views[i]);
    ttens[i] = oxr_tensor_get(__func__, views[i]);
  }
  return OX_OK;
}

static void release_views(ox_tensor *views, int n) {
  for (int i = 0; i < n; i++)
    if (views[i])
      ox_tensor_release(views[i]);
}

/* What tune.c's measurement runs: one launch of candidate c with scratch
 * outputs (every written tensor replaced by a fresh one of its shape, so
 * the user's outputs see only the chosen candidate's launch). */
typedef struct tune_ctx {
  oxa_kernel *k;
  oxr_stream *s;
  const ox_launch_config *cfg;
  int nargs, cur;
  ox_arg args[OXA_MAX_PARAMS], targs[OXA_MAX_PARAMS];
  oxr_tensor *tens[OXA_MAX_PARAMS], *ttens[OXA_MAX_PARAMS];
  ox_tensor scratch[OXA_MAX_PARAMS], views[OXA_MAX_PARAMS];
} tune_ctx;

static ox_status tune_run(void *p, int c) {
  tune_ctx *x = p;
  if (x->cur != c) {
    release_views(x->views, x->nargs);
    x->cur = -1;
    ox_status st = repartition(x->k, x->args, x->nargs, x->tens, c, x->targs, x->ttens, x->views);
    if (st)
      return st;
    x->cur = c;
  }
  return launch_with(x->k, x->s, x->cfg, x->targs, x->nargs, x->ttens, true, x->k->cand[c]);
}

static ox_status tune(oxa_kernel *k, oxr_stream *s, const ox_launch_config *cfg, const ox_arg *args, int nargs,
                      oxr_tensor *const *tens, const char *key, int *chosen) {
  tune_ctx *x = calloc(1, sizeof *x);
  if (!x)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "out of memory");
  *x = (tune_ctx){.k = k, .s = s, .cfg = cfg, .nargs = nargs, .cur = -1};
  ox_status st = OX_OK;
  for (int i = 0; i < nargs && !st; i++) {
    x->args[i] = args[i];
    x->tens[i] = tens[i];
    oxf_tykind kind = ((const oxf_param *)k->fn->params.items[i])->type->kind;
    oxr_tensor *t = tens[i];
    if (!t || (kind != OXF_TY_MUTTENSOR && kind != OXF_TY_ATOMICTENSOR))
      continue;
    st = ox_tensor_empty(t->dev, oxr_stream_public(s), t->dtype, t->ndim, t->shape, &x->scratch[i]);
    if (st)
      break;
    x->tens[i] = oxr_tensor_get(__func__, x->scratch[i]);
    x->args[i] = ox_arg_tensor(x->scratch[i]);
    if (t->flags & OXR_T_PARTITION) { /* the tiles the candidates leave */
      ox_tensor part;
      if ((st = ox_tensor_partition(x->scratch[i], t->ndim, t->tile, &part)))
        break;
      ox_tensor_release(x->scratch[i]);
      x->scratch[i] = part;
      x->tens[i] = oxr_tensor_get(__func__, part);
      x->args[i] = ox_arg_tensor(part);
    }
  }
  if (!st)
    st = oxa_tune_measure(k, s, key, tune_run, x, chosen);
  release_views(x->views, nargs);
  for (int i = 0; i < nargs; i++)
    if (x->scratch[i])
      ox_tensor_release(x->scratch[i]);
  free(x);
  return st;
}

/* A launch of k with candidates (k->tune_lock held): the chosen one, measured
 * first if none is chosen for this key. */
static ox_status tuned_launch(oxa_kernel *k, oxr_stream *s, const ox_launch_config *cfg, const ox_arg *args,
                              int nargs, oxr_tensor *const *tens, bool run) {
  if (!k->ncand) /* cleared meanwhile */
    return launch_with(k, s, cfg, args, nargs, tens, run, NULL);
  char key[65];
  oxa_tune_key(k, s->dev, args, nargs, tens, launch_facts(tens, nargs), key);
  int c = oxa_tune_lookup(k, key);
  ox_status st = OX_OK;
  if (c < 0 && run) {
    if (oxr_stream_capturing(s))
      return oxb_set_error(OX_ERR_LAUNCH,
                           "kernel '%s': no candidate configuration is chosen yet for these arguments, and "
                           "the stream is capturing a CUDA graph, where they cannot be measured: launch it "
                           "once before capturing", k->ir->name);
    if ((st = tune(k, s, cfg, args, nargs, tens, key, &c)))
      return st;
  }
  if (c < 0)
    c = 0; /* a check only (ox_launch_check): the first candidate's */
  ox_arg targs[OXA_MAX_PARAMS];
  oxr_tensor *ttens[OXA_MAX_PARAMS];
  ox_tensor views[OXA_MAX_PARAMS];
  st = repartition(k, args, nargs, tens, c, targs, ttens, views);
  if (!st)
    st = launch_with(k, s, cfg, targs, nargs, ttens, run, k->cand[c]);
  release_views(views, nargs);
  return st;
}

ox_status oxa_tile_launch(oxa_kernel *k, oxr_stream *s, const ox_launch_config *cfg, const ox_arg *args, int nargs,
                          oxr_tensor *const *tens, bool run) {
  if (!k->ncand || nargs != k->fn->params.len) /* (a wrong count: launch_with reports it) */
    return launch_with(k, s, cfg, args, nargs, tens, run, NULL);
  pthread_mutex_lock(&k->tune_lock);
  ox_status st = tuned_launch(k, s, cfg, args, nargs, tens, run);
  pthread_mutex_unlock(&k->tune_lock);
  return st;
}

ox_status ox_kernel_tuned(ox_kernel kh, const ox_arg *args, int nargs, int *index) {
  oxa_kernel *k = oxa_kernel_get(__func__, kh);
  if (!k)
    return ox_last_status();
  if (!index)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_kernel_tuned: index is NULL");
  *index = -1;
  if (!k->fn || !k->ncand)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s' has no candidate configurations "
                         "(ox_kernel_set_candidates)", k->ir->name);
  oxr_tensor *tens[OXA_MAX_PARAMS];
  ox_status st = oxa_arg_tensors(k, args, nargs, tens);
  if (st)
    return st;
  if (nargs != k->fn->params.len)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "kernel '%s' takes %d arguments, got %d", k->ir->name,
                         k->fn->params.len, nargs);
  ox_device dev;
  if ((st = oxa_launch_device(k, tens, nargs, &dev)))
    return st;
  pthread_mutex_lock(&k->tune_lock);
  char key[65];
  if (k->ncand) { /* (not cleared meanwhile) */
    oxa_tune_key(k, dev, args, nargs, tens, launch_facts(tens, nargs), key);
    *index = oxa_tune_lookup(k, key);
  }
  pthread_mutex_unlock(&k->tune_lock);
  return OX_OK;
}
