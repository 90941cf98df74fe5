/* epilogue.c - a store's elementwise tail, lowered a piece at a time (CUDA).
 *
 * Lowered op by op, `y.store(gelu(acc + bias) + res)` computes each op for
 * every element a thread holds before the next op: beside a 128 x 256
 * accumulator (128 registers a thread) all of the bias, the residual and the
 * intermediate results are live at once, and ptxas spills them. Instead, the
 * tail of a store of an mma-layout tile (its elementwise ops, loads of other
 * tensors, broadcasts, reshapes and permutes that nothing else uses) is not
 * lowered where it stands (oxt_plan_epilogues marks it) but at the store, a
 * piece of eight elements at a time: load, compute, store. Then only the
 * accumulator and one piece's values are live.
 *
 * Where the output tile and every loaded tile lie wholly inside their tensors
 * (one test, the same in every thread of the block), the pieces are
 * straight-line. Elsewhere each element is computed with its loads
 * predicated (the padding outside) and stored where it exists. */
#include <stdlib.h>
#include <string.h>

#include "tile/lower.h"

/* Whether the lowering of `in` may wait for the store that uses it: what the
 * piecewise lowering below knows how to make an element of at a time. */
static bool deferrable(const oxt_lowerer *L, const oxi_instr *in, const oxi_instr *store) {
  if (!oxt_is_mma(L, in))
    return false;
  switch (in->op) {
  case OXI_T_LOAD: /* read at the store: not from the output itself, nor from a copy's staging */
    return !L->direct[in->id] && !L->tload[in->id].stages && !L->dot_of[in->id] &&
           in->mem.index != store->mem.index;
  case OXI_T_BROADCAST: return true;
  case OXI_T_RESHAPE:
  case OXI_T_PERMUTE: return !L->direct[in->id];
  default: return oxt_elementwise(in);
  }
}

static bool writes_memory(const oxi_instr *in) {
  return in->op == OXI_STORE || in->op == OXI_ATOMIC || in->op == OXI_T_STORE || in->op == OXI_T_ATOMIC_ADD;
}

void oxt_plan_epilogues(oxt_lowerer *L) {
  const oxi_kernel *k = L->k;
  size_t nv = (size_t)k->next_id + 1;
  int *uses = oxb_calloc(nv, sizeof *uses), *refs = oxb_calloc(nv, sizeof *refs);
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      for (int i = 0; i < in->nops; i++)
        if (in->ops[i] && in->ops[i]->id >= 0)
          uses[in->ops[i]->id]++;
    }
  }
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int si = 0; si < b->instrs.len; si++) {
      const oxi_instr *s = b->instrs.items[si];
      if (s->op != OXI_T_STORE || !oxt_is_mma(L, s->ops[0]))
        continue;
      /* Back from the store: an instruction joins the tail when every use of it is by the
         tail or the store (its users come after it in the block), and a load only where
         nothing between it and the store writes memory. */
      memset(refs, 0, sizeof *refs * nv);
      refs[s->ops[0]->id]++;
      bool wrote = false;
      for (int ii = si - 1; ii >= 0; ii--) {
        const oxi_instr *in = b->instrs.items[ii];
        if (in->id >= 0 && refs[in->id] && refs[in->id] == uses[in->id] && deferrable(L, in, s) &&
            !(in->op == OXI_T_LOAD && wrote)) {
          L->defer[in->id] = 1;
          /* a broadcast's operand is lowered where it stands (one value a column, say, not one
             an element): it goes through scratch memory or is held as it is */
          for (int i = 0; in->op != OXI_T_BROADCAST && i < in->nops; i++)
            if (in->ops[i]->tshape)
              refs[in->ops[i]->id]++;
        }
        wrote |= writes_memory(in);
      }
    }
  }
  free(uses);
  free(refs);
}

/* The state of one store's piecewise lowering. */
typedef struct epi {
  oxt_lowerer *L;
  const oxi_instr *store;
  int n;                   /* elements a thread holds */
  bool fast;               /* in the straight-line path (all inside), not the predicated one */
  char *seen;              /* old id -> 1: prepared */
  oxi_instr ***held;       /* old id -> its elements, made before the paths: what is not deferred,
                              and deferred values lowered whole after all */
  oxi_instr ***val;        /* old id -> the elements of a deferred value made so far in this path */
  oxt_element_site **site; /* old id of a deferred load -> its elements' sites */
  oxi_instr **recip;       /* old id of a division by one value -> that value's reciprocal */
  oxi_instr ***from;       /* old id of a broadcast through scratch -> its elements' positions */
  oxi_mem scratch[OX_DTYPE_COUNT];
  bool claimed[OX_DTYPE_COUNT]; /* a broadcast of this dtype reads the scratch in the paths */
  const oxi_instr *moves[OX_DTYPE_COUNT]; /* those broadcasts */
  int nmoves;
  oxi_instr *full;         /* every loaded tile is wholly inside its tensor (NULL: true) */
  bool never_full;         /* some tile's layout always needs predicates */
} epi;

static bool all_one_value(oxi_instr *const *v, int n) {
  for (int e = 1; e < n; e++)
    if (v[e] != v[0])
      return false;
  return true;
}

static void and_full(epi *E, oxi_instr *c) {
  if (!c)
    E->never_full = true;
  else
    E->full = E->full ? oxt_bin(E->L, OXI_AND, OX_BOOL, E->full, c) : c;
}

/* Before the paths: what every path needs, once. */
static void prepare(epi *E, const oxi_instr *in) {
  oxt_lowerer *L = E->L;
  if (E->seen[in->id])
    return;
  E->seen[in->id] = 1;
  if (!L->defer[in->id]) {
    E->held[in->id] = oxt_in_layout(L, in, true);
    return;
  }
  if (in->op != OXI_T_BROADCAST)
    for (int i = 0; i < in->nops; i++)
      if (in->ops[i]->tshape)
        prepare(E, in->ops[i]);
  switch (in->op) {
  case OXI_T_LOAD: {
    oxi_instr *coord[OXI_MAX_RANK];
    for (int d = 0; d < in->nops; d++)
      coord[d] = oxt_mapped(L, in->ops[d]);
    oxt_origins(L, in->tshape, coord, in->mem.index, in->sub == 1);
    E->site[in->id] = oxb_alloc(L->m->arena, sizeof(oxt_element_site) * (size_t)E->n);
    oxt_sites(L, in->tshape, true, coord, in->mem.index, E->site[in->id]);
    and_full(E, oxt_whole_tile_inside(L, in->tshape, true, coord, in->mem.index));
    return;
  }
  case OXI_T_BROADCAST: {
    const oxi_instr *src = in->ops[0];
    if (L->everywhere[src->id] || oxt_is_mma(L, src) || E->claimed[in->type]) {
      /* nothing moves (or the scratch is taken): lowered whole, here */
      oxt_lower_broadcast(L, in);
      E->held[in->id] = L->tval[in->id];
      return;
    }
    /* its operand goes to scratch once the rest is prepared (which may use the scratch) */
    E->claimed[in->type] = true;
    E->moves[E->nmoves++] = in;
    return;
  }
  case OXI_BIN:
    if (in->sub == OXI_DIV && oxi_is_float(in->type) && !L->defer[in->ops[1]->id] &&
        all_one_value(E->held[in->ops[1]->id], E->n)) {
      oxi_instr *c1 = oxt_emit(L, OXI_CONST, in->type);
      c1->fimm = 1;
      E->recip[in->id] = oxt_bin(L, OXI_DIV, in->type, c1, E->held[in->ops[1]->id][0]);
    }
    return;
  default: return;
  }
}

/* Element e of old tile value `in`, made here in the current path when first asked for. */
static oxi_instr *element(epi *E, const oxi_instr *in, int e) {
  oxt_lowerer *L = E->L;
  if (E->held[in->id])
    return E->held[in->id][e];
  if (!E->val[in->id])
    E->val[in->id] = oxb_alloc(L->m->arena, sizeof(oxi_instr *) * (size_t)E->n);
  oxi_instr **v = E->val[in->id];
  if (v[e])
    return v[e];
  switch (in->op) {
  case OXI_T_LOAD: {
    const oxt_element_site *es = E->site[in->id];
    if (!E->fast) {
      v[e] = oxt_load_or_pad(L, in, es[e].inb, es[e].index);
    } else if (oxt_loads_pairs(L, in)) { /* both of a pair's elements from one 4-byte load */
      int e0 = e & ~1;
      oxi_instr *x = oxt_emit(L, OXI_LOAD, OX_U32);
      x->mem = in->mem;
      x->ops[0] = es[e0].index;
      x->nops = 1;
      for (int h = 0; h < 2; h++) {
        oxi_instr *u = oxt_emit(L, OXI_UNPACK, in->type);
        u->ops[0] = x;
        u->nops = 1;
        u->index = h;
        v[e0 + h] = u;
      }
    } else {
      v[e] = oxt_load_at(L, in, es[e].index);
    }
    break;
  }
  case OXI_T_BROADCAST: {
    oxi_instr **f = E->from[in->id];
    v[e] = oxt_shared_load(L, E->scratch[in->type], in->type, oxt_broadcast_source(L, in, f[e], f[E->n + e]));
    break;
  }
  case OXI_T_RESHAPE:
  case OXI_T_PERMUTE: v[e] = element(E, in->ops[0], e); break; /* leading 1s: the same elements */
  default:
    if (E->recip[in->id]) {
      v[e] = oxt_bin(L, OXI_MUL, in->type, element(E, in->ops[0], e), E->recip[in->id]);
      break;
    }
    oxi_instr *ops[6]; /* made before the op that uses them */
    assert(in->nops <= 6);
    for (int i = 0; i < in->nops; i++)
      ops[i] = in->ops[i]->tshape ? element(E, in->ops[i], e) : oxt_mapped(L, in->ops[i]);
    oxi_instr *c = oxt_emit(L, in->op, in->type);
    c->sub = in->sub;
    c->nops = in->nops;
    for (int i = 0; i < in->nops; i++)
      c->ops[i] = ops[i];
    v[e] = c;
    break;
  }
  return v[e];
}

void oxt_lower_epilogue(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_kernel *k = L->k;
  const oxi_instr *val = in->ops[0];
  size_t nv = (size_t)k->next_id + 1;
  epi E = {0};
  E.L = L;
  E.store = in;
  E.n = oxt_count_in(L, val->tshape, true);
  E.seen = oxb_calloc(nv, 1);
  E.held = oxb_calloc(nv, sizeof *E.held);
  E.val = oxb_calloc(nv, sizeof *E.val);
  E.site = oxb_calloc(nv, sizeof *E.site);
  E.recip = oxb_calloc(nv, sizeof *E.recip);
  E.from = oxb_calloc(nv, sizeof *E.from);
  prepare(&E, val);
  for (int i = 0; i < E.nmoves; i++) {
    const oxi_instr *b = E.moves[i];
    oxt_spill(L, b->ops[0]);
    E.scratch[b->type] = oxt_scratch(L, b->type, 0);
    oxi_instr **f = oxb_alloc(L->m->arena, sizeof *f * (size_t)E.n * 2);
    oxt_positions_in(L, b->tshape, true, f, f + E.n);
    E.from[b->id] = f;
  }
  if (E.nmoves)
    oxt_barrier(L); /* the broadcasts' operands are in scratch */
  const oxi_param *p = k->params.items[in->mem.index];
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < p->rank; d++)
    coord[d] = oxt_tile_id(L, in->mem.index, d);
  oxt_element_site *es = oxb_malloc(sizeof *es * (size_t)E.n);
  oxt_origins(L, val->tshape, coord, in->mem.index, false);
  oxt_sites(L, val->tshape, true, coord, in->mem.index, es);
  and_full(&E, oxt_whole_tile_inside(L, val->tshape, true, coord, in->mem.index));
  oxi_block *done = oxi_block_new(L->m, L->nk), *slow;
  oxi_instr **v = oxb_malloc(sizeof *v * (size_t)E.n);
  if (!E.never_full) {
    oxt_begin_if(L, E.full, &slow); /* every tile inside: a piece at a time, straight-line */
    E.fast = true;
    bool quads = oxt_stores_quads(L, in);
    /* two 8-column pieces of an m16n8 tile row (quads pair them); a tile of a row's values (a
       [64, 1] one holds two a thread) is one piece */
    int piece = E.n % 8 == 0 ? 8 : E.n % 4 == 0 ? 4 : E.n;
    assert(!quads || piece % 4 == 0);
    for (int e0 = 0; e0 < E.n; e0 += piece) {
      for (int e = e0; e < e0 + piece; e++)
        v[e] = element(&E, val, e);
      for (int e = e0; e < e0 + piece; e += quads ? 8 : 1)
        if (quads) {
          oxt_store_quad(L, in, es, v, e);
          oxt_store_quad(L, in, es, v, e + 2);
        } else {
          oxt_store_at(L, in, es[e].index, v[e]);
        }
    }
    oxt_end_if(L, done);
    L->cur = slow;
    for (size_t i = 0; i < nv; i++)
      E.val[i] = NULL; /* nothing of that path is seen from this one */
  }
  E.fast = false;
  for (int e = 0; e < E.n; e++) {
    oxi_instr *x = element(&E, val, e);
    oxi_block *join;
    oxt_begin_if(L, es[e].inb, &join);
    oxt_store_at(L, in, es[e].index, x);
    oxt_end_if(L, join);
  }
  oxt_end_if(L, done);
  if (E.nmoves)
    oxt_barrier(L); /* before the scratch is written again */
  free(v);
  free(es);
  free(E.seen);
  free(E.held);
  free(E.val);
  free(E.site);
  free(E.recip);
  free(E.from);
}
