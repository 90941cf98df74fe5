/* emit.c - the IR the tile lowering builds, one helper each: constants,
 * arithmetic, branches and counted loops, slots, tensor and shared-memory
 * accesses, reductions' identities. Everything else in the lowering emits
 * through these. */
#include <math.h>

#include "tile/lower.h"

int64_t oxt_elems(const oxi_tshape *s) {
  int64_t e = 1;
  for (int d = 0; d < s->rank; d++)
    e *= s->dims[d];
  return e;
}

int oxt_log2i(int64_t v) {
  int l = 0;
  while (((int64_t)1 << l) < v)
    l++;
  return l;
}

oxi_instr *oxt_emit(oxt_lowerer *L, oxi_op op, oxi_type t) { return oxi_emit(L->m, L->nk, L->cur, op, t); }

oxi_instr *oxt_u64(oxt_lowerer *L, uint64_t v) {
  oxi_instr *c = oxt_emit(L, OXI_CONST, OX_U64);
  c->imm = v;
  return c;
}

oxi_instr *oxt_bin(oxt_lowerer *L, int sub, oxi_type t, oxi_instr *a, oxi_instr *b) {
  oxi_instr *in = oxt_emit(L, sub >= 100 ? OXI_CMP : OXI_BIN, sub >= 100 ? OX_BOOL : t);
  in->sub = sub >= 100 ? sub - 100 : sub;
  in->ops[0] = a;
  in->ops[1] = b;
  in->nops = 2;
  return in;
}

oxi_instr *oxt_sreg64(oxt_lowerer *L, int which) {
  oxi_instr *r = oxt_emit(L, OXI_SREG, OX_U32);
  r->sub = which;
  oxi_instr *c = oxt_emit(L, OXI_CAST, OX_U64);
  c->ops[0] = r;
  c->nops = 1;
  return c;
}

/* Dim or stride `axis` of tensor parameter `param`. Of a contiguous16 tensor
 * the last stride is 1 and the others are multiples of 16 bytes, which the
 * code says (so LLVM sees consecutive, aligned elements and merges their
 * accesses into 16-byte ones). */
oxi_instr *oxt_param_info(oxt_lowerer *L, oxi_op op, int param, int axis) {
  const oxi_param *p = L->k->params.items[param];
  if (op == OXI_STRIDE && p->contiguous16 && axis == p->rank - 1)
    return oxt_u64(L, 1);
  oxi_instr *in = oxt_emit(L, op, OX_U64);
  in->mem.kind = OXI_MEM_PARAM;
  in->mem.index = param;
  in->index = axis;
  if (op == OXI_STRIDE && p->contiguous16)
    in = oxt_bin(L, OXI_AND, OX_U64, in, oxt_u64(L, ~(uint64_t)(16 / ox_dtype_size(p->dtype) - 1)));
  return in;
}

/* Number of tiles along `axis` of output tile parameter `param`. */
oxi_instr *oxt_tile_count(oxt_lowerer *L, int param, int axis) {
  const oxi_param *p = L->k->params.items[param];
  int64_t s = p->dims[axis];
  oxi_instr *dim = oxt_param_info(L, OXI_DIM, param, axis);
  return oxt_bin(L, OXI_SHR, OX_U64, oxt_bin(L, OXI_ADD, OX_U64, dim, oxt_u64(L, (uint64_t)(s - 1))),
             oxt_u64(L, (uint64_t)oxt_log2i(s)));
}

/* This block's tile coordinate along `axis`: the last axis is blockIdx.x, the
 * one before blockIdx.y, the third from the end blockIdx.z; a fourth axis
 * shares blockIdx.z with the third (the host folds them). */
oxi_instr *oxt_tile_id(oxt_lowerer *L, int param, int axis) {
  const oxi_param *p = L->k->params.items[param];
  if (p->rank == 2 && L->grouped[axis])
    return L->grouped[axis];
  int from_end = p->rank - 1 - axis;
  if (from_end < 2)
    return oxt_sreg64(L, from_end == 0 ? OXI_SREG_CTAID_X : OXI_SREG_CTAID_Y);
  oxi_instr *z = oxt_sreg64(L, OXI_SREG_CTAID_Z);
  if (p->rank < 4)
    return z;
  /* rank 4: z = axis0 * tiles(axis1) + axis1, split in 32 bits (z < 2^16): a 64-bit division is
     a call, which serializes a kernel's wgmmas (oxt_tile_ids) */
  oxi_instr *z32 = oxt_cast(L, z, OX_U32), *g1 = oxt_cast(L, oxt_tile_count(L, param, 1), OX_U32);
  return oxt_cast(L, oxt_bin(L, axis == 1 ? OXI_REM : OXI_DIV, OX_U32, z32, g1), OX_U64);
}

/* The ids (row, column) of tile l of a gy x gx grid of tiles, in grouped
 * order, for kernels with a pipelined dot (a matmul). Blocks run in launch
 * order, and in row-major order one wave of blocks covers a few rows of
 * tiles and every column, so it reads all of B from memory and the next wave
 * reads it again. Grouped, consecutive tiles walk down a group of G rows of
 * tiles before moving one column right, so a wave covers a square-ish patch
 * whose A rows and B columns stay in L2. Any order is correct: each block
 * owns the tile its ids name, and every use of the ids (loads, the store)
 * sees the same. In 32 bits (fewer than 2^32 tiles: a pipelined dot's tile
 * has at least 16 x 8 elements, so an output in memory has at most 2^31 or
 * so; launch_with checks it for persistent blocks): ptxas makes a 64-bit
 * division a call, and the driver's compiler serializes the wgmmas of a
 * kernel with a call (C7509). That once made grouped order look 15-25%
 * slower than row-major order for wgmma kernels; measured without the call
 * on the H200 (128 x 256 x 64, persistent), grouped is 2-4% faster at 4096^3
 * and 8192^3. */
void oxt_tile_ids(oxt_lowerer *L, oxi_instr *l, oxi_instr *gx, oxi_instr *gy, oxi_instr **out) {
  const uint64_t G = 8; /* rows of tiles in a group: +7% at 8192^3 (mma.sync), as much as 16 */
  l = oxt_cast(L, l, OX_U32);
  gx = oxt_cast(L, gx, OX_U32);
  gy = oxt_cast(L, gy, OX_U32);
  oxi_instr *g = oxt_cast(L, oxt_u64(L, G), OX_U32);
  oxi_instr *per_group = oxt_bin(L, OXI_MUL, OX_U32, gx, g);
  oxi_instr *first = oxt_bin(L, OXI_MUL, OX_U32, oxt_bin(L, OXI_DIV, OX_U32, l, per_group), g);
  oxi_instr *rows = oxt_combine(L, OXI_MIN, OX_U32, oxt_bin(L, OXI_SUB, OX_U32, gy, first), g);
  oxi_instr *in = oxt_bin(L, OXI_REM, OX_U32, l, per_group);
  out[0] = oxt_cast(L, oxt_bin(L, OXI_ADD, OX_U32, first, oxt_bin(L, OXI_REM, OX_U32, in, rows)), OX_U64);
  out[1] = oxt_cast(L, oxt_bin(L, OXI_DIV, OX_U32, in, rows), OX_U64);
}

oxi_instr *oxt_mapped(oxt_lowerer *L, const oxi_instr *old) {
  assert(old->id >= 0 && L->sval[old->id]);
  return L->sval[old->id];
}

/* Copies scalar instruction `in` into the new kernel, its operands mapped. */
oxi_instr *oxt_clone(oxt_lowerer *L, const oxi_instr *in) {
  oxi_instr *c = oxt_emit(L, in->op, in->type);
  c->sub = in->sub;
  c->mem = in->mem;
  c->index = in->index;
  c->imm = in->imm;
  c->fimm = in->fimm;
  c->check = in->check;
  c->nuw = in->nuw;
  c->nops = in->nops;
  for (int i = 0; i < in->nops; i++)
    c->ops[i] = oxt_mapped(L, in->ops[i]);
  for (int i = 0; i < 2; i++)
    c->target[i] = in->target[i] ? L->nb[in->target[i]->id] : NULL;
  return c;
}

void oxt_branch(oxt_lowerer *L, oxi_instr *cond, oxi_block *yes, oxi_block *no) {
  oxi_instr *br = oxt_emit(L, OXI_CONDBR, OXI_VOID);
  br->ops[0] = cond;
  br->nops = 1;
  br->target[0] = yes;
  br->target[1] = no;
  L->cur = yes;
}

/* Runs `then` (a load or a store) only when `cond` holds: splits the block. */
oxi_block *oxt_begin_if(oxt_lowerer *L, oxi_instr *cond, oxi_block **join) {
  oxi_block *then = oxi_block_new(L->m, L->nk);
  *join = oxi_block_new(L->m, L->nk);
  oxt_branch(L, cond, then, *join);
  return then;
}

oxi_instr *oxt_warpgroup(oxt_lowerer *L) { return oxt_bin(L, OXI_SHR, OX_U64, L->t, oxt_u64(L, 7)); }

void oxt_named_bar(oxt_lowerer *L, int sub, oxi_instr *id, oxi_instr *when) {
  oxi_instr *b = oxt_emit(L, OXI_NAMED_BAR, OXI_VOID);
  b->sub = sub;
  b->imm = 256;
  b->ops[0] = id;
  b->ops[1] = when;
  b->nops = when ? 2 : 1;
}

void oxt_end_if(oxt_lowerer *L, oxi_block *join) {
  oxi_instr *br = oxt_emit(L, OXI_BR, OXI_VOID);
  br->target[0] = join;
  L->cur = join;
}

oxi_instr *oxt_load_at(oxt_lowerer *L, const oxi_instr *in, oxi_instr *index) {
  oxi_instr *ld = oxt_emit(L, OXI_LOAD, in->type);
  ld->mem = in->mem;
  ld->ops[0] = index;
  ld->nops = 1;
  return ld;
}

oxi_instr *oxt_load_or_pad(oxt_lowerer *L, const oxi_instr *in, oxi_instr *inb, oxi_instr *index) {
  int v = oxi_slot_new(L->m, L->nk, in->type);
  oxi_instr *pad = oxt_emit(L, OXI_CONST, in->type);
  pad->imm = in->imm;
  pad->fimm = in->fimm;
  oxt_set_slot(L, v, pad);
  oxi_block *join;
  oxt_begin_if(L, inb, &join); /* a branch, not a select: the address outside may not be read */
  oxt_set_slot(L, v, oxt_load_at(L, in, index));
  oxt_end_if(L, join);
  return oxt_get_slot(L, v);
}

oxi_instr *oxt_get_slot(oxt_lowerer *L, int slot) {
  oxi_instr *g = oxt_emit(L, OXI_VAR_GET, oxi_slot_type(L->nk, slot));
  g->index = slot;
  return g;
}

void oxt_set_slot(oxt_lowerer *L, int slot, oxi_instr *v) {
  oxi_instr *set = oxt_emit(L, OXI_VAR_SET, OXI_VOID);
  set->index = slot;
  set->ops[0] = v;
  set->nops = 1;
}

void oxt_store_at(oxt_lowerer *L, const oxi_instr *in, oxi_instr *index, oxi_instr *v) {
  oxi_instr *st = oxt_emit(L, OXI_STORE, OXI_VOID);
  st->mem = in->mem;
  st->ops[0] = index;
  st->ops[1] = v;
  st->nops = 2;
}

/* A new shared array of `count` elements of type t; the offsets of the
 * shared arrays are laid out after the lowering. */
oxi_mem oxt_shared_array(oxt_lowerer *L, oxi_type t, int64_t count) {
  oxi_shared *sh = oxb_alloc(L->m->arena, sizeof *sh);
  sh->dtype = (ox_dtype)t;
  sh->count = count;
  oxb_vec_push(L->m->arena, &L->nk->shared, sh);
  oxi_mem m = {OXI_MEM_SHARED, L->nk->shared.len - 1};
  return m;
}

/* The scratch array of dtype t, made or grown to hold `count` elements. */
oxi_mem oxt_scratch(oxt_lowerer *L, oxi_type t, int64_t count) {
  if (!L->scratch[t])
    L->scratch[t] = oxt_shared_array(L, t, 0).index + 1;
  oxi_mem m = {OXI_MEM_SHARED, L->scratch[t] - 1};
  oxi_shared *sh = L->nk->shared.items[m.index];
  if (sh->count < count)
    sh->count = count;
  return m;
}

void oxt_barrier(oxt_lowerer *L) {
  L->nk->uses_sync = true;
  if (!L->split) {
    oxt_emit(L, OXI_BARRIER, OXI_VOID);
    return;
  }
  /* barrier 0 for the consumer warpgroups alone: the producer never reaches it (ws.c).
   * Its id is made first: an operand must come before its use. */
  oxi_instr *id = oxt_u64(L, 0);
  oxi_instr *b = oxt_emit(L, OXI_NAMED_BAR, OXI_VOID);
  b->imm = (uint64_t)L->T;
  b->ops[0] = id;
  b->nops = 1;
}

void oxt_shared_store(oxt_lowerer *L, oxi_mem m, oxi_instr *index, oxi_instr *v, oxi_instr *ok) {
  oxi_block *join = NULL;
  if (ok)
    oxt_begin_if(L, ok, &join);
  oxi_instr *st = oxt_emit(L, OXI_STORE, OXI_VOID);
  st->mem = m;
  st->ops[0] = index;
  st->ops[1] = v;
  st->nops = 2;
  if (ok)
    oxt_end_if(L, join);
}

oxi_instr *oxt_shared_load(oxt_lowerer *L, oxi_mem m, oxi_type t, oxi_instr *index) {
  oxi_instr *ld = oxt_emit(L, OXI_LOAD, t);
  ld->mem = m;
  ld->ops[0] = index;
  ld->nops = 1;
  return ld;
}

/* The identity of reduction `sub` for type t. */
oxi_instr *oxt_identity(oxt_lowerer *L, int sub, oxi_type t) {
  oxi_instr *c = oxt_emit(L, OXI_CONST, t);
  bool fl = oxi_is_float(t), sg = oxi_is_signed(t);
  int bits = (int)ox_dtype_size((ox_dtype)t) * 8;
  uint64_t umax = bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1;
  switch (sub) {
  case OXI_ADD: c->imm = 0; c->fimm = 0; break;
  case OXI_MUL: c->imm = 1; c->fimm = 1; break;
  case OXI_MIN:
    c->fimm = INFINITY;
    c->imm = sg ? umax >> 1 : umax;
    break;
  default: /* OXI_MAX */
    c->fimm = -INFINITY;
    c->imm = sg ? ~(umax >> 1) & (bits == 64 ? UINT64_MAX : umax) : 0;
    break;
  }
  (void)fl;
  return c;
}

oxi_instr *oxt_combine(oxt_lowerer *L, int sub, oxi_type t, oxi_instr *a, oxi_instr *b) {
  if (sub == OXI_ADD || sub == OXI_MUL)
    return oxt_bin(L, sub, t, a, b);
  oxi_instr *m = oxt_emit(L, OXI_MATH, t);
  m->sub = sub == OXI_MIN ? OXI_M_MIN : OXI_M_MAX;
  m->ops[0] = a;
  m->ops[1] = b;
  m->nops = 2;
  return m;
}

oxi_instr *oxt_begin_loop(oxt_lowerer *L, oxt_counted_loop *lp, oxi_instr *first, int64_t step, int64_t count) {
  L->nk->nloops++; /* for the size limits (check_size) */
  lp->slot = oxi_slot_new(L->m, L->nk, OX_U64);
  lp->step = step;
  oxt_set_slot(L, lp->slot, first);
  oxi_block *body = oxi_block_new(L->m, L->nk);
  lp->head = oxi_block_new(L->m, L->nk);
  lp->done = oxi_block_new(L->m, L->nk);
  oxt_end_if(L, lp->head);
  oxt_branch(L, oxt_bin(L, OXT_LT, OX_U64, oxt_get_slot(L, lp->slot), oxt_u64(L, (uint64_t)count)), body, lp->done);
  return oxt_get_slot(L, lp->slot);
}

void oxt_end_loop(oxt_lowerer *L, oxt_counted_loop *lp, oxi_instr *k) {
  oxi_instr *next = oxt_bin(L, OXI_ADD, OX_U64, k, oxt_u64(L, (uint64_t)lp->step));
  next->nuw = true;
  oxt_set_slot(L, lp->slot, next);
  oxt_end_if(L, lp->head);
  L->cur = lp->done;
}

oxi_instr *oxt_zero_bool(oxt_lowerer *L) {
  oxi_instr *f = oxt_emit(L, OXI_CONST, OX_BOOL);
  f->imm = 0;
  return f;
}

/* c ? a : b, of values already made (operands are made before their user). */
oxi_instr *oxt_pick(oxt_lowerer *L, oxi_instr *c, oxi_instr *a, oxi_instr *b) {
  oxi_instr *s = oxt_emit(L, OXI_SELECT, a->type);
  s->ops[0] = c;
  s->ops[1] = a;
  s->ops[2] = b;
  s->nops = 3;
  return s;
}

oxi_instr *oxt_cast(oxt_lowerer *L, oxi_instr *v, oxi_type t) {
  if (v->type == t)
    return v;
  oxi_instr *c = oxt_emit(L, OXI_CAST, t);
  c->ops[0] = v;
  c->nops = 1;
  return c;
}

void oxt_atomic_at(oxt_lowerer *L, const oxi_instr *in, oxi_instr *cond, oxi_instr *index, oxi_instr *v) {
  oxi_block *join = NULL;
  if (cond)
    oxt_begin_if(L, cond, &join);
  oxi_instr *a = oxt_emit(L, OXI_ATOMIC, v->type);
  a->sub = OXI_ADD;
  a->mem = in->mem;
  a->ops[0] = index;
  a->ops[1] = v;
  a->nops = 2;
  if (cond)
    oxt_end_if(L, join);
}

oxi_instr *oxt_mul_add(oxt_lowerer *L, oxi_type t, oxi_instr *x, oxi_instr *y, oxi_instr *acc) {
  x = oxt_cast(L, x, t);
  y = oxt_cast(L, y, t);
  if (oxi_is_int(t))
    return oxt_bin(L, OXI_ADD, t, oxt_bin(L, OXI_MUL, t, x, y), acc);
  oxi_instr *fma = oxt_emit(L, OXI_MATH, t);
  fma->sub = OXI_M_FMA;
  fma->ops[0] = x;
  fma->ops[1] = y;
  fma->ops[2] = acc;
  fma->nops = 3;
  return fma;
}
