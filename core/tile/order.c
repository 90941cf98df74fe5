/* order.c - the tile ops that see a row's elements in order: scans (cumsum and
 * the others, OXI_T_SCAN) and sorts (OXI_T_SORT: sort, argsort, top-k), on
 * CUDA, and the sorting network that the CPU's serial lowering (serial.c)
 * runs on its buffers too.
 *
 * Correctness first, and few instructions: a scan is Hillis-Steele on the
 * elements a thread holds, log2(n) steps through the shared scratch (each step
 * adds the element d before, d = 1, 2, 4, ...); a sort is a bitonic network in
 * shared memory, n/2 compare-exchanges a step over log2(n)(log2(n)+1)/2 steps,
 * in two IR loops (steps, and a thread's pairs), so its code does not grow
 * with the tile. Both cost a block barrier or two a step. */
#include <stdlib.h>

#include "tile/lower.h"

static oxi_instr *not_bool(oxt_lowerer *L, oxi_instr *b) {
  oxi_instr *n = oxt_emit(L, OXI_NOT, OX_BOOL);
  n->ops[0] = b;
  n->nops = 1;
  return n;
}

/* Whether key x comes before key y: ascending, NaNs after every number, or
 * descending, NaNs before (as NumPy's sort and torch.topk place them); two
 * NaNs are equal. */
static oxi_instr *key_before(oxt_lowerer *L, oxi_type t, bool desc, oxi_instr *x, oxi_instr *y) {
  oxi_instr *b = oxt_bin(L, 100 + (desc ? OXI_GT : OXI_LT), t, x, y);
  if (!oxi_is_float(t))
    return b;
  oxi_instr *xn = oxt_bin(L, 100 + (desc ? OXI_NE : OXI_EQ), t, x, x);
  oxi_instr *yn = oxt_bin(L, 100 + (desc ? OXI_EQ : OXI_NE), t, y, y);
  return oxt_bin(L, OXI_OR, OX_BOOL, b, oxt_bin(L, OXI_AND, OX_BOOL, xn, yn));
}

/* Sorts the rows along axis in->index of the tile of in->tshape held in
 * row-major order in shared array `km` (in place), and with `indices` the
 * array `im` beside it (each element's index along the axis, i32 or u32), with
 * bitonic steps (k, j): the element at coordinate c pairs with c ^ j, and the
 * pair is put in order where c & k is 0 and in reverse order elsewhere. With
 * indices, equal keys are ordered by index, so every pair is strictly ordered
 * and the result is that of a stable sort. Ends with a barrier (CUDA). */
void oxt_sort_network(oxt_lowerer *L, const oxi_instr *in, oxi_mem km, oxi_mem im, bool indices) {
  const oxi_tshape *s = in->tshape;
  oxi_type t = in->ops[0]->type;
  bool desc = in->sub & 1;
  int a = in->index;
  int64_t len = s->dims[a], inner = 1, E = oxt_elems(s);
  for (int d = a + 1; d < s->rank; d++)
    inner *= s->dims[d];
  if (len == 1)
    return;
  int lg = oxt_log2i(len), li = oxt_log2i(inner);
  int ks = oxi_slot_new(L->m, L->nk, OX_U64), js = oxi_slot_new(L->m, L->nk, OX_U64);
  oxt_set_slot(L, ks, oxt_u64(L, 1)); /* k = 2^ks, j = 2^js */
  oxt_set_slot(L, js, oxt_u64(L, 0));
  oxt_counted_loop steps, pairs;
  oxi_instr *st = oxt_begin_loop(L, &steps, oxt_u64(L, 0), 1, (int64_t)lg * (lg + 1) / 2);
  oxi_instr *k = oxt_get_slot(L, ks), *j = oxt_get_slot(L, js);
  oxi_instr *sh = oxt_bin(L, OXI_ADD, OX_U64, j, oxt_u64(L, (uint64_t)li)); /* log2(j * inner) */
  oxi_instr *jm = oxt_bin(L, OXI_SHL, OX_U64, oxt_u64(L, 1), sh);
  oxi_instr *p = oxt_begin_loop(L, &pairs, L->serial ? oxt_u64(L, 0) : L->t, L->T, E / 2);
  /* pair p: the positions with bit sh 0 (lo) and 1 (hi), the other bits p's */
  oxi_instr *lo = oxt_bin(L, OXI_OR, OX_U64,
                          oxt_bin(L, OXI_SHL, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, p, sh),
                                  oxt_bin(L, OXI_ADD, OX_U64, sh, oxt_u64(L, 1))),
                          oxt_bin(L, OXI_AND, OX_U64, p, oxt_bin(L, OXI_SUB, OX_U64, jm, oxt_u64(L, 1))));
  oxi_instr *hi = oxt_bin(L, OXI_OR, OX_U64, lo, jm);
  oxi_instr *c = oxt_bin(L, OXI_AND, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, lo, oxt_u64(L, (uint64_t)li)),
                         oxt_u64(L, (uint64_t)(len - 1)));
  oxi_instr *fwd = oxt_bin(L, 100 + OXI_EQ, OX_U64,
                           oxt_bin(L, OXI_AND, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, c, k), oxt_u64(L, 1)),
                           oxt_u64(L, 0));
  oxi_instr *x = oxt_shared_load(L, km, t, lo), *y = oxt_shared_load(L, km, t, hi);
  oxi_type it = indices ? (oxi_type)oxi_mem_dtype(L->nk, im) : OX_I32;
  oxi_instr *xi = indices ? oxt_shared_load(L, im, it, lo) : NULL;
  oxi_instr *yi = indices ? oxt_shared_load(L, im, it, hi) : NULL;
  /* in order (fwd): swap when y comes before x; in reverse: when x comes before y */
  oxi_instr *u = oxt_pick(L, fwd, y, x), *v = oxt_pick(L, fwd, x, y);
  oxi_instr *swap = key_before(L, t, desc, u, v);
  if (indices) {
    oxi_instr *ui = oxt_pick(L, fwd, yi, xi), *vi = oxt_pick(L, fwd, xi, yi);
    oxi_instr *tie = oxt_bin(L, OXI_AND, OX_BOOL, not_bool(L, key_before(L, t, desc, v, u)),
                             oxt_bin(L, 100 + OXI_LT, it, ui, vi));
    swap = oxt_bin(L, OXI_OR, OX_BOOL, swap, tie);
    oxt_shared_store(L, im, lo, oxt_pick(L, swap, yi, xi), NULL);
    oxt_shared_store(L, im, hi, oxt_pick(L, swap, xi, yi), NULL);
  }
  oxt_shared_store(L, km, lo, oxt_pick(L, swap, y, x), NULL);
  oxt_shared_store(L, km, hi, oxt_pick(L, swap, x, y), NULL);
  oxt_end_loop(L, &pairs, p);
  if (!L->serial)
    oxt_barrier(L);
  /* the next step: j halves; after j = 1, k doubles and j = k / 2 */
  oxi_instr *last = oxt_bin(L, 100 + OXI_EQ, OX_U64, j, oxt_u64(L, 0));
  oxi_instr *k1 = oxt_bin(L, OXI_ADD, OX_U64, k, oxt_u64(L, 1)), *j1 = oxt_bin(L, OXI_SUB, OX_U64, j, oxt_u64(L, 1));
  oxt_set_slot(L, ks, oxt_pick(L, last, k1, k));
  oxt_set_slot(L, js, oxt_pick(L, last, k, j1));
  oxt_end_loop(L, &steps, st);
}

/* A sort on CUDA: the tile spilled to scratch (and each element's index
 * beside it, for argsort), the network, and each thread's elements of the
 * result read back in the blocked layout. */
void oxt_lower_sort(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_instr *src = in->ops[0];
  const oxi_tshape *s = in->tshape;
  bool indices = in->sub & 2;
  int64_t E = oxt_elems(s), len = s->dims[in->index], inner = E;
  for (int d = 0; d <= in->index; d++)
    inner /= s->dims[d];
  oxt_spill(L, src);
  oxi_mem km = oxt_scratch(L, src->type, 0), im = {OXI_MEM_SHARED, -1};
  /* the indices in the scratch of u32, or of i32 when that is km's */
  oxi_type it = src->type == OX_U32 ? OX_I32 : OX_U32;
  if (indices) {
    im = oxt_scratch(L, it, E > L->T ? E : L->T);
    oxt_counted_loop lp;
    oxi_instr *q = oxt_begin_loop(L, &lp, L->t, L->T, E);
    oxi_instr *c = oxt_bin(L, OXI_AND, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, q, oxt_u64(L, (uint64_t)oxt_log2i(inner))),
                           oxt_u64(L, (uint64_t)(len - 1)));
    oxt_shared_store(L, im, q, oxt_cast(L, c, it), NULL);
    oxt_end_loop(L, &lp, q);
  }
  oxt_barrier(L);
  oxt_sort_network(L, in, km, im, indices);
  int n = oxt_count_in(L, s, false);
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxt_positions(L, s, f, ok);
  oxi_instr **out = oxt_new_elements(L, s);
  for (int e = 0; e < n; e++)
    out[e] = indices ? oxt_cast(L, oxt_shared_load(L, im, it, oxt_existing(L, f[e], ok[e])), OX_I32)
                     : oxt_shared_load(L, km, in->type, oxt_existing(L, f[e], ok[e]));
  free(f);
  oxt_barrier(L); /* before the scratch is written again */
  L->tval[in->id] = out;
}

/* A scan on CUDA (Hillis-Steele): each thread keeps its elements in
 * registers; at step d (1, 2, 4, .. below the axis's size) every element is
 * written to scratch, and each one at coordinate c >= d along the axis then
 * combines the element d before it with itself. */
void oxt_lower_scan(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->tshape;
  oxi_type t = in->type;
  int64_t E = oxt_elems(s), len = s->dims[in->index], inner = E;
  for (int d = 0; d <= in->index; d++)
    inner /= s->dims[d];
  int n = oxt_count_in(L, s, false);
  oxi_instr **v = oxt_new_elements(L, s), **held = oxt_elements(L, in->ops[0]);
  for (int e = 0; e < n; e++)
    v[e] = held[e];
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 3), **ok = f + n, **c = f + 2 * n;
  oxt_positions(L, s, f, ok);
  for (int e = 0; e < n; e++) {
    c[e] = oxt_coord_at(L, s, in->index, f[e]);
    f[e] = oxt_existing(L, f[e], ok[e]); /* a nonexistent element reads inside the scratch */
  }
  oxi_mem m = oxt_scratch(L, t, E > L->T ? E : L->T);
  for (int64_t d = 1; d < len; d *= 2) {
    for (int e = 0; e < n; e++)
      oxt_shared_store(L, m, f[e], v[e], ok[e]);
    oxt_barrier(L);
    for (int e = 0; e < n; e++) {
      oxi_instr *has = oxt_bin(L, 100 + OXI_GE, OX_U64, c[e], oxt_u64(L, (uint64_t)d));
      oxi_instr *from = oxt_pick(L, has, oxt_bin(L, OXI_SUB, OX_U64, f[e], oxt_u64(L, (uint64_t)(d * inner))), f[e]);
      v[e] = oxt_pick(L, has, oxt_combine(L, in->sub, t, oxt_shared_load(L, m, t, from), v[e]), v[e]);
    }
    oxt_barrier(L); /* before the scratch is written again */
  }
  free(f);
  L->tval[in->id] = v;
}
