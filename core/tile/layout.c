/* layout.c - where a thread's elements of a tile are (the blocked and the
 * mma layouts, lower.h), their positions in the tile and their places in a
 * tensor, and moving a tile between the layouts through shared memory. A
 * wgmma accumulator's registers are a layout too: held() unpacks them. */
#include <stdlib.h>

#include "tile/lower.h"

oxt_layout oxt_layout_of(const oxt_lowerer *L, const oxi_tshape *s) {
  oxt_layout y;
  y.E = oxt_elems(s);
  int64_t last = s->dims[s->rank - 1];
  y.VEC = last < 4 ? (int)last : 4;
  int64_t chunks = y.E / y.VEC;
  y.J = (int)((chunks + L->T - 1) / L->T);
  y.guard = (int64_t)y.J * L->T != chunks;
  return y;
}

/* The mma layout of an [M, N] tile with this block's warps, if it has one:
 * warp tiles as square as the warps allow, each at least 16 x 16. With wgmma
 * (L->wg), an [M, N] tile of 16 rows a warp has warp tiles of 16 x N: the
 * accumulator of wgmma.m64nNk16, whose warp w of a warpgroup holds rows
 * 16w..16w+15 of the group's 64 in the m16n8 register order of mma.sync. */
bool oxt_mma_layout_of(const oxt_lowerer *L, const oxi_tshape *shape, oxt_mma_layout *o) {
  if (!L->cuda || shape->rank < 2 || L->T < 32)
    return false;
  for (int d = 0; d < shape->rank - 2; d++)
    if (shape->dims[d] != 1)
      return false;
  /* leading dims of 1 (an output tile [1, 1, M, N] of a batch and a head): the same elements and
     row-major positions as [M, N] */
  oxi_tshape two = {.rank = 2, .dims = {shape->dims[shape->rank - 2], shape->dims[shape->rank - 1]}};
  const oxi_tshape *s = &two;
  int W = L->T / 32;
  if (L->wg && s->dims[0] == 16 * W && s->dims[1] % 8 == 0 && s->dims[1] <= 2 * OXI_VF32_MAX) {
    o->WM = W, o->WN = 1, o->wm = 16, o->wn = s->dims[1];
    o->n = (int)(s->dims[1] / 2);
    return true;
  }
  if (L->wg && s->dims[0] == 16 * W && s->dims[1] == 1) {
    /* the rows of a wgmma accumulator (a row reduction of one, or what is
       broadcast along its rows): each thread holds its two rows' values, which
       the four lanes of a quad share */
    o->WM = W, o->WN = 1, o->wm = 16, o->wn = 1;
    o->n = 2;
    return true;
  }
  bool found = false;
  for (int WM = 1; WM <= W; WM *= 2) {
    int WN = W / WM;
    int64_t wm = s->dims[0] / WM, wn = s->dims[1] / WN;
    if (wm < 16 || wn < 16 || wm * WM != s->dims[0] || wn * WN != s->dims[1])
      continue;
    int skew = abs(oxt_log2i(wm) - oxt_log2i(wn));
    if (!found || skew < abs(oxt_log2i(o->wm) - oxt_log2i(o->wn))) {
      o->WM = WM, o->WN = WN, o->wm = wm, o->wn = wn;
      found = true;
    }
  }
  if (found)
    o->n = (int)(o->wm / 16 * (o->wn / 8) * 4);
  return found;
}

/* Elements a thread holds of a tile of `shape` in the given layout. */
int oxt_count_in(const oxt_lowerer *L, const oxi_tshape *shape, bool mma) {
  oxt_mma_layout ml;
  if (mma && oxt_mma_layout_of(L, shape, &ml))
    return ml.n;
  oxt_layout y = oxt_layout_of(L, shape);
  return y.J * y.VEC;
}

/* OXI_WGMMA_SYNC `sub` (0: fence, 1: commit and wait, 2: wait until at most
 * `pending` groups are in flight), passing accumulator `acc` (or nothing)
 * through. */
oxi_instr *oxt_wg_sync(oxt_lowerer *L, oxi_instr *acc, int sub, int pending) {
  oxi_instr *w = oxt_emit(L, OXI_WGMMA_SYNC, acc ? acc->type : OXI_VOID);
  w->sub = sub;
  w->imm = (uint64_t)pending;
  w->ops[0] = acc;
  w->nops = acc != NULL;
  return w;
}

/* The accumulator registers (vf32 x n, or vi32 for i32 elements) of elements v of an mma-layout tile. */
oxi_instr *oxt_wg_pack(oxt_lowerer *L, oxi_instr **v, int n) {
  oxi_type t = oxi_vacc(n, v[0]->type);
  oxi_instr *acc = oxt_emit(L, OXI_CONST, t);
  for (int i = 0; i < n; i++) {
    oxi_instr *x = oxt_emit(L, OXI_VSET, t);
    x->ops[0] = acc;
    x->ops[1] = v[i];
    x->nops = 2;
    x->index = i;
    acc = x;
  }
  return acc;
}

oxi_instr **oxt_held(oxt_lowerer *L, const oxi_instr *old) {
  assert(old->id >= 0 && (L->tval[old->id] || L->vacc[old->id]));
  if (L->tval[old->id])
    return L->tval[old->id];
  if (L->ready[old->id])
    return oxt_unpack_acc(L, L->vacc[old->id]);
  return oxt_unpack_acc(L, oxt_wg_sync(L, L->vacc[old->id], 2, oxt_wg_pending(L, old)));
}

bool oxt_in_pairs(const oxt_lowerer *L, const oxi_tshape *s, oxi_type t) {
  oxt_mma_layout ml;
  return L->wg && (t == OX_BF16 || t == OX_F16) && s->rank == 2 && oxt_mma_layout_of(L, s, &ml) && ml.WN == 1 &&
         ml.wm == 16 && ml.wn == s->dims[1] && ml.wn % 16 == 0;
}

oxi_instr **oxt_pairs(oxt_lowerer *L, const oxi_instr *old) {
  if (L->pairs[old->id])
    return L->pairs[old->id];
  int n = oxt_count_in(L, old->tshape, true);
  oxi_instr **v = oxt_in_layout(L, old, true), **out = oxb_alloc(L->m->arena, sizeof *out * (size_t)(n / 2));
  for (int i = 0; i < n / 2; i++) {
    out[i] = oxt_emit(L, OXI_PACK2, OX_U32);
    out[i]->ops[0] = v[2 * i];
    out[i]->ops[1] = v[2 * i + 1];
    out[i]->nops = 2;
  }
  return out;
}

/* Groups complete in the order they were committed, so a result is complete
 * when at most the groups committed after it are pending. Those of its own
 * old block after it certainly ran (a block is straight-line: no dot sits in
 * a branch the lowering makes); later blocks' may not have, and count not. */
int oxt_wg_pending(const oxt_lowerer *L, const oxi_instr *old) {
  int id = old->id;
  if (!L->wg_block[id])
    return 0;
  int n = L->wg_block[id] == L->block + 1 ? L->wg_commits - L->wg_at[id] : L->wg_after[id];
  return n < 7 ? n : 7;
}

void oxt_wg_block_end(oxt_lowerer *L) {
  if (!L->wg) /* no wgmma, nothing deferred (the CPU's lowering, mma.sync) */
    return;
  for (int id = 0; id <= L->k->next_id; id++)
    if (L->wg_block[id] == L->block + 1)
      L->wg_after[id] = L->wg_commits - L->wg_at[id];
  for (int i = 0; i < L->nwg_sets; i++) {
    int slot = L->wg_sets[i].slot;
    const oxi_instr *v = L->wg_sets[i].val;
    if (L->vslot[slot]) {
      oxt_set_slot(L, L->vslot[slot] - 1, oxt_wg_sync(L, L->vacc[v->id], 2, oxt_wg_pending(L, v)));
      continue;
    }
    /* a tile held in pairs that a deferred dot reads as A: rounded and written once it is done */
    oxt_wg_sync(L, NULL, 2, oxt_wg_pending(L, L->pair_reader[slot]));
    oxi_instr **pr = oxt_pairs(L, v);
    for (int e = 0; e < oxt_count_in(L, v->tshape, true) / 2; e++)
      oxt_set_slot(L, L->tslots[slot][e], pr[e]);
  }
  L->nwg_sets = 0;
  /* the deferred dots that release their TMA stages here (oxt_release_block), once done */
  const oxi_kernel *k = L->k;
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *d = b->instrs.items[ii];
      if (d->op != OXI_T_DOT || L->rel_block[d->id] != L->block + 1 || !L->wg_block[d->id])
        continue;
      oxt_wg_sync(L, NULL, 2, oxt_wg_pending(L, d));
      for (int i = 0; i < 2; i++)
        if (oxt_staged_load(L, d, i))
          oxt_tload_release(L, oxt_staged_load(L, d, i));
    }
  }
}

/* The elements of accumulator `acc`, which no wgmma writes any more. */
oxi_instr **oxt_unpack_acc(oxt_lowerer *L, oxi_instr *acc) {
  int n = oxi_vacc_len(acc->type);
  oxi_instr **out = oxb_alloc(L->m->arena, sizeof *out * (size_t)n);
  for (int i = 0; i < n; i++) {
    oxi_instr *u = oxt_emit(L, OXI_UNPACK, oxi_vacc_elem(acc->type));
    u->ops[0] = acc;
    u->nops = 1;
    u->index = i;
    out[i] = u;
  }
  return out;
}

bool oxt_elementwise(const oxi_instr *in) {
  return in->tshape && (in->op == OXI_BIN || in->op == OXI_CMP || in->op == OXI_NEG || in->op == OXI_NOT ||
                        in->op == OXI_CAST || in->op == OXI_SELECT || in->op == OXI_MATH);
}

/* Whether `old` is held in the mma layout (a splat is in both). */
bool oxt_is_mma(const oxt_lowerer *L, const oxi_instr *old) {
  return L->mma[old->id] && !L->splat[old->id];
}

/* The elements of `old` in the blocked layout, which most tile ops work on. */
oxi_instr **oxt_elements(oxt_lowerer *L, const oxi_instr *old) { return oxt_in_layout(L, old, false); }

/* The row-major positions of the elements this thread holds of a tile of
 * `shape` in the blocked layout (mma: the mma layout), split as fb + off[e]:
 * fb one value per thread, off[e] constants, and their bits disjoint. So each
 * coordinate of an element is its coordinate of fb plus its coordinate of
 * off[e], a constant: the addresses of a thread's elements are one value
 * plus constants, which keeps few registers live. Returns fb. */
oxi_instr *oxt_position_parts(oxt_lowerer *L, const oxi_tshape *shape, bool mma, int64_t *off) {
  oxt_mma_layout ml;
  if (mma && oxt_mma_layout_of(L, shape, &ml) && ml.wn == 1) { /* rows l/4 and l/4 + 8 of warp w's 16 */
    off[0] = 0, off[1] = 8;
    return oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_SHL, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, L->t, oxt_u64(L, 5)),
                                               oxt_u64(L, 4)),
                   oxt_bin(L, OXI_SHR, OX_U64, oxt_bin(L, OXI_AND, OX_U64, L->t, oxt_u64(L, 31)), oxt_u64(L, 2)));
  }
  if (mma && oxt_mma_layout_of(L, shape, &ml)) {
    int lgN = oxt_log2i(shape->dims[shape->rank - 1]);
    oxi_instr *warp = oxt_bin(L, OXI_SHR, OX_U64, L->t, oxt_u64(L, 5));
    oxi_instr *lane = oxt_bin(L, OXI_AND, OX_U64, L->t, oxt_u64(L, 31));
    oxi_instr *row0 = oxt_bin(L, OXI_ADD, OX_U64,
                          oxt_bin(L, OXI_SHL, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, warp, oxt_u64(L, (uint64_t)oxt_log2i(ml.WN))),
                              oxt_u64(L, (uint64_t)oxt_log2i(ml.wm))),
                          oxt_bin(L, OXI_SHR, OX_U64, lane, oxt_u64(L, 2)));
    oxi_instr *col0 = oxt_bin(L, OXI_ADD, OX_U64,
                          oxt_bin(L, OXI_SHL, OX_U64, oxt_bin(L, OXI_AND, OX_U64, warp, oxt_u64(L, (uint64_t)(ml.WN - 1))),
                              oxt_u64(L, (uint64_t)oxt_log2i(ml.wn))),
                          oxt_bin(L, OXI_SHL, OX_U64, oxt_bin(L, OXI_AND, OX_U64, lane, oxt_u64(L, 3)), oxt_u64(L, 1)));
    int e = 0;
    for (int64_t mi = 0; mi < ml.wm / 16; mi++)
      for (int64_t ni = 0; ni < ml.wn / 8; ni++)
        for (int r = 0; r < 4; r++)
          off[e++] = ((mi * 16 + 8 * (r >> 1)) << lgN) + ni * 8 + (r & 1);
    return oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_SHL, OX_U64, row0, oxt_u64(L, (uint64_t)lgN)), col0);
  }
  oxt_layout y = oxt_layout_of(L, shape);
  int n = 0;
  for (int j = 0; j < y.J; j++)
    for (int v = 0; v < y.VEC; v++)
      off[n++] = (int64_t)j * L->T * y.VEC + v;
  return oxt_bin(L, OXI_MUL, OX_U64, L->t, oxt_u64(L, (uint64_t)y.VEC));
}

/* Whether the element at position f exists: NULL (always) unless the layout
 * is guarded (a blocked tile with fewer chunks than the block has threads). */
oxi_instr *oxt_exists(oxt_lowerer *L, const oxi_tshape *shape, bool mma, oxi_instr *f) {
  oxt_mma_layout ml;
  if ((mma && oxt_mma_layout_of(L, shape, &ml)) || !oxt_layout_of(L, shape).guard)
    return NULL;
  return oxt_bin(L, OXT_LT, OX_U64, f, oxt_u64(L, (uint64_t)oxt_elems(shape)));
}

/* f, the row-major position of each element this thread holds of a tile of
 * `shape` in the given layout, and whether it exists (NULL: always). */
void oxt_positions_in(oxt_lowerer *L, const oxi_tshape *shape, bool mma, oxi_instr **f, oxi_instr **ok) {
  int n = oxt_count_in(L, shape, mma);
  int64_t *off = oxb_malloc(sizeof *off * (size_t)n);
  oxi_instr *fb = oxt_position_parts(L, shape, mma, off);
  for (int e = 0; e < n; e++) {
    f[e] = oxt_bin(L, OXI_ADD, OX_U64, fb, oxt_u64(L, (uint64_t)off[e]));
    ok[e] = oxt_exists(L, shape, mma, f[e]);
  }
  free(off);
}

/* Coordinate `d` of row-major position f (a constant) in `shape`. */
int64_t oxt_coord_of(const oxi_tshape *shape, int d, int64_t f) {
  int64_t after = 1;
  for (int i = d + 1; i < shape->rank; i++)
    after *= shape->dims[i];
  return (f / after) & (shape->dims[d] - 1);
}

/* The same of a position value. */
oxi_instr *oxt_coord_at(oxt_lowerer *L, const oxi_tshape *shape, int d, oxi_instr *f) {
  int64_t after = 1;
  for (int i = d + 1; i < shape->rank; i++)
    after *= shape->dims[i];
  return oxt_bin(L, OXI_AND, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, f, oxt_u64(L, (uint64_t)oxt_log2i(after))),
             oxt_u64(L, (uint64_t)(shape->dims[d] - 1)));
}

void oxt_positions(oxt_lowerer *L, const oxi_tshape *shape, oxi_instr **f, oxi_instr **ok) {
  oxt_positions_in(L, shape, false, f, ok);
}

/* For every element this thread holds (in the given layout) of a tile of
 * `shape` at tile coordinates `coord` (new u64 values) of tensor parameter
 * `param`: where it is and whether it is inside the tensor. */
void oxt_sites(oxt_lowerer *L, const oxi_tshape *shape, bool mma, oxi_instr *const *origin, int param,
                  oxt_element_site *out) {
  int rank = shape->rank, n = oxt_count_in(L, shape, mma);
  int64_t *off = oxb_malloc(sizeof *off * (size_t)n);
  oxi_instr *fb = oxt_position_parts(L, shape, mma, off);
  /* g[d]: the coordinate in the tensor of this thread's position fb; i0 its offset */
  oxi_instr *g[OXI_MAX_RANK], *dim[OXI_MAX_RANK], *stride[OXI_MAX_RANK], *i0 = NULL;
  for (int d = 0; d < rank; d++) {
    g[d] = oxt_bin(L, OXI_ADD, OX_U64, origin[d], oxt_coord_at(L, shape, d, fb));
    dim[d] = oxt_param_info(L, OXI_DIM, param, d);
    stride[d] = oxt_param_info(L, OXI_STRIDE, param, d);
    oxi_instr *term = oxt_bin(L, OXI_MUL, OX_U64, g[d], stride[d]);
    i0 = i0 ? oxt_bin(L, OXI_ADD, OX_U64, i0, term) : term;
  }
  for (int e = 0; e < n; e++) {
    oxi_instr *inb = oxt_exists(L, shape, mma, oxt_bin(L, OXI_ADD, OX_U64, fb, oxt_u64(L, (uint64_t)off[e])));
    oxi_instr *index = i0;
    for (int d = 0; d < rank; d++) {
      int64_t k = oxt_coord_of(shape, d, off[e]);
      oxi_instr *gd = k ? oxt_bin(L, OXI_ADD, OX_U64, g[d], oxt_u64(L, (uint64_t)k)) : g[d];
      oxi_instr *in = oxt_bin(L, OXT_LT, OX_U64, gd, dim[d]);
      inb = inb ? oxt_bin(L, OXI_AND, OX_BOOL, inb, in) : in;
      if (k)
        index = oxt_bin(L, OXI_ADD, OX_U64, index, oxt_bin(L, OXI_MUL, OX_U64, oxt_u64(L, (uint64_t)k), stride[d]));
    }
    out[e].inb = inb;
    out[e].index = index;
  }
  free(off);
}

/* Tile coordinates made safe for address arithmetic: a coordinate past the
 * tensor's last tile (possibly so large that coord * size would wrap) becomes
 * the first one past the end, whose elements are all outside: a load reads
 * the padding, a store writes nothing. */
void oxt_clamp_coords(oxt_lowerer *L, const oxi_tshape *shape, oxi_instr **coord, int param) {
  for (int d = 0; d < shape->rank; d++) {
    int64_t sz = shape->dims[d];
    oxi_instr *dim = oxt_param_info(L, OXI_DIM, param, d);
    oxi_instr *past = oxt_bin(L, OXI_SHR, OX_U64, oxt_bin(L, OXI_ADD, OX_U64, dim, oxt_u64(L, (uint64_t)(sz - 1))),
                          oxt_u64(L, (uint64_t)oxt_log2i(sz)));
    oxi_instr *ok = oxt_bin(L, 100 + OXI_LE, OX_U64, coord[d], past);
    oxi_instr *sel = oxt_emit(L, OXI_SELECT, OX_U64);
    sel->ops[0] = ok;
    sel->ops[1] = coord[d];
    sel->ops[2] = past;
    sel->nops = 3;
    coord[d] = sel;
  }
}

/* The first element of the tile at `coord` along each dim (in place), made safe for
 * address arithmetic: tile coordinates (`at` false) clamped as above, times the
 * tile's dims; element offsets (`at`, x.load_at) clamped to the dim, so that no
 * element index wraps and one past the end is outside. */
void oxt_origins(oxt_lowerer *L, const oxi_tshape *shape, oxi_instr **coord, int param, bool at) {
  if (!at)
    oxt_clamp_coords(L, shape, coord, param);
  for (int d = 0; d < shape->rank; d++) {
    if (!at) {
      coord[d] = oxt_bin(L, OXI_SHL, OX_U64, coord[d], oxt_u64(L, (uint64_t)oxt_log2i(shape->dims[d])));
      continue;
    }
    oxi_instr *dim = oxt_param_info(L, OXI_DIM, param, d);
    oxi_instr *ok = oxt_bin(L, 100 + OXI_LE, OX_U64, coord[d], dim); /* made before its use */
    oxi_instr *sel = oxt_emit(L, OXI_SELECT, OX_U64);
    sel->ops[0] = ok;
    sel->ops[1] = coord[d];
    sel->ops[2] = dim;
    sel->nops = 3;
    coord[d] = sel;
  }
}

/* Whether the whole tile from `origin` lies inside tensor `param` (and every
 * thread's chunks exist): then no element needs a predicate. The test is the
 * same for every thread of the block, so the branch on it does not diverge.
 * NULL when the layout always needs predicates. */
oxi_instr *oxt_whole_tile_inside(oxt_lowerer *L, const oxi_tshape *shape, bool mma,
                                    oxi_instr *const *origin, int param) {
  oxt_mma_layout ml;
  if (!(mma && oxt_mma_layout_of(L, shape, &ml)) && oxt_layout_of(L, shape).guard)
    return NULL;
  oxi_instr *all = NULL;
  for (int d = 0; d < shape->rank; d++) {
    oxi_instr *end = oxt_bin(L, OXI_ADD, OX_U64, origin[d], oxt_u64(L, (uint64_t)shape->dims[d]));
    oxi_instr *in = oxt_bin(L, 100 + OXI_LE, OX_U64, end, oxt_param_info(L, OXI_DIM, param, d));
    all = all ? oxt_bin(L, OXI_AND, OX_BOOL, all, in) : in;
  }
  return all;
}

/* Room for a tile value's elements in either layout (a splat fills both). */
oxi_instr **oxt_new_elements(oxt_lowerer *L, const oxi_tshape *s) {
  int a = oxt_count_in(L, s, false), b = oxt_count_in(L, s, true);
  return oxb_alloc(L->m->arena, sizeof(oxi_instr *) * (size_t)(a > b ? a : b));
}

/* Position f, or 0 for an element the layout's guard says does not exist:
 * shared loads are unchecked, so every address must stay in the scratch. */
oxi_instr *oxt_existing(oxt_lowerer *L, oxi_instr *f, oxi_instr *ok) {
  if (!ok)
    return f;
  oxi_instr *zero = oxt_u64(L, 0);
  oxi_instr *sel = oxt_emit(L, OXI_SELECT, OX_U64);
  sel->ops[0] = ok;
  sel->ops[1] = f;
  sel->ops[2] = zero;
  sel->nops = 3;
  return sel;
}

/* Writes the elements this thread holds of tile value `old` to scratch. */
void oxt_spill(oxt_lowerer *L, const oxi_instr *old) {
  const oxi_tshape *s = old->tshape;
  bool mma = oxt_is_mma(L, old);
  int n = oxt_count_in(L, s, mma);
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxt_positions_in(L, s, mma, f, ok);
  oxi_instr **v = oxt_held(L, old);
  oxi_mem m = oxt_scratch(L, old->type, oxt_elems(s) > L->T ? oxt_elems(s) : L->T);
  for (int e = 0; e < n; e++)
    oxt_shared_store(L, m, f[e], v[e], ok[e]);
  free(f);
}

/* `old`'s elements in the wanted layout: moved through scratch when it is
 * held in the other one. */
oxi_instr **oxt_in_layout(oxt_lowerer *L, const oxi_instr *old, bool mma) {
  if (L->splat[old->id] || oxt_is_mma(L, old) == mma)
    return oxt_held(L, old);
  const oxi_tshape *s = old->tshape;
  oxt_spill(L, old);
  oxt_barrier(L);
  int n = oxt_count_in(L, s, mma);
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxt_positions_in(L, s, mma, f, ok);
  oxi_instr **out = oxt_new_elements(L, s);
  oxi_mem m = oxt_scratch(L, old->type, 0);
  for (int e = 0; e < n; e++)
    out[e] = oxt_shared_load(L, m, old->type, oxt_existing(L, f[e], ok[e]));
  free(f);
  oxt_barrier(L);
  return out;
}
