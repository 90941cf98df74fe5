/* ops.c - the tile ops on CUDA other than dot: loads and stores, elementwise
 * ops, broadcasts, reshapes and permutes, iota, reductions, `let mut` tiles
 * and atomic adds, each on the elements a thread holds (layout.c).
 *
 * Reductions and broadcasts move elements between threads: every thread
 * writes the tile's elements it holds to a shared scratch array at their
 * row-major position, the block synchronizes, and each thread reads what its
 * elements of the result need. One scratch array per dtype serves every such
 * step of the kernel; a barrier after each step frees it for the next. */
#include <stdlib.h>

#include "tile/lower.h"

/* In the mma layout, a thread's elements come in pairs of adjacent columns
 * (c0, c1 of an m16n8 tile) from an even column. */
bool oxt_loads_pairs(const oxt_lowerer *L, const oxi_instr *in) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  oxt_mma_layout ml;
  return L->mma[in->id] && p->contiguous16 && (in->type == OX_BF16 || in->type == OX_F16) && in->sub != 1 &&
         oxt_mma_layout_of(L, in->tshape, &ml) && ml.wn >= 8;
}

/* The sites of this thread's elements (in the mma layout where `mma`) of the
 * tile that T_LOAD or T_PREFETCH `in` reads, malloc'ed, *n of them; the tile's
 * first element in `coord`; and in *full whether the whole tile lies inside the
 * tensor (oxt_whole_tile_inside). */
static oxt_element_site *tile_sites(oxt_lowerer *L, const oxi_instr *in, bool mma, oxi_instr **coord, int *n,
                                    oxi_instr **full) {
  *n = oxt_count_in(L, in->tshape, mma);
  for (int d = 0; d < in->nops; d++)
    coord[d] = oxt_mapped(L, in->ops[d]);
  oxt_element_site *es = oxb_malloc(sizeof *es * (size_t)*n);
  oxt_origins(L, in->tshape, coord, in->mem.index, in->sub == 1);
  oxt_sites(L, in->tshape, mma, coord, in->mem.index, es);
  *full = oxt_whole_tile_inside(L, in->tshape, mma, coord, in->mem.index);
  return es;
}

/* A tile load: straight-line loads when the whole tile is inside the tensor
 * (independent loads the GPU keeps in flight together), else one predicated
 * load per element with the padding outside. */
void oxt_lower_load(oxt_lowerer *L, const oxi_instr *in) {
  if (L->direct[in->id])
    return; /* copied straight to shared memory by the dot that uses it */
  /* in the mma layout where an mma value takes it (a residual added to an accumulator,
     lower.c: free_in_any_layout): each thread reads its own elements, rather than the
     whole tile moving through shared memory */
  bool mma = L->mma[in->id];
  oxt_layout y = oxt_layout_of(L, in->tshape);
  int n;
  oxi_instr *coord[OXI_MAX_RANK], *full;
  oxt_element_site *es = tile_sites(L, in, mma, coord, &n, &full);
  int *slot = oxb_malloc(sizeof *slot * (size_t)n);
  for (int e = 0; e < n; e++)
    slot[e] = oxi_slot_new(L->m, L->nk, in->type);
  int *pair = NULL; /* slots of packed pairs, if held so */
  oxi_block *done = oxi_block_new(L->m, L->nk), *slow;
  const oxi_param *p = L->k->params.items[in->mem.index];
  int last = in->tshape->rank - 1;
  if (full && p->contiguous16 && y.VEC > 1 && !mma && (in->sub == 1 || in->tshape->dims[last] % y.VEC == 0)) {
    /* A chunk is one aligned vector load where the last dim's offset is a multiple of VEC
       (the other strides are multiples of 16 bytes). A partition's tile starts at a multiple
       of its last dim. At an element offset (load_at) the fast path takes the aligned tiles,
       with the offset masked to say so; unaligned ones take the predicated path. The vector
       loads are said outright: left to LLVM, the straight-line loads of the fast path are
       merged with the predicated ones (common code sinking), and the merged loads are scalar. */
    if (in->sub == 1) {
      oxi_instr *rem = oxt_bin(L, OXI_AND, OX_U64, coord[last], oxt_u64(L, (uint64_t)y.VEC - 1));
      full = oxt_bin(L, OXI_AND, OX_BOOL, full, oxt_bin(L, 100 + OXI_EQ, OX_U64, rem, oxt_u64(L, 0)));
      coord[last] = oxt_bin(L, OXI_AND, OX_U64, coord[last], oxt_u64(L, ~((uint64_t)y.VEC - 1)));
    }
    oxt_begin_if(L, full, &slow);
    oxt_element_site *va = oxb_malloc(sizeof *va * (size_t)n);
    oxt_sites(L, in->tshape, false, coord, in->mem.index, va);
    size_t esz = ox_dtype_size((ox_dtype)in->type);
    bool half = in->type == OX_BF16 || in->type == OX_F16;
    bool v4 = (int64_t)esz * y.VEC == 16 && (esz == 4 || half), u64 = half && y.VEC == 4;
    for (int e = 0; e < n; e++) {
      if (u64) { /* four 16-bit floats in one 8-byte load, split in two u32s */
        oxi_instr *x = oxt_emit(L, OXI_LOAD, OX_U64);
        x->mem = in->mem;
        x->ops[0] = va[e].index;
        x->nops = 1;
        oxi_instr *w[2] = {oxt_cast(L, x, OX_U32),
                           oxt_cast(L, oxt_bin(L, OXI_SHR, OX_U64, x, oxt_u64(L, 32)), OX_U32)};
        for (int v = 0; v < 4; v++) {
          oxi_instr *h = oxt_emit(L, OXI_UNPACK, in->type);
          h->ops[0] = w[v / 2];
          h->nops = 1;
          h->index = v % 2;
          oxt_set_slot(L, slot[e + v], h);
        }
        e += 3;
        continue;
      }
      if (!v4) {
        oxt_set_slot(L, slot[e], oxt_load_at(L, in, va[e].index));
        continue;
      }
      /* one 16-byte load a chunk, said outright: LLVM cannot see the offset's alignment,
         which only the branch above tells */
      oxi_instr *chunk = oxt_emit(L, OXI_LOAD, OXI_V4);
      chunk->mem = in->mem;
      chunk->ops[0] = va[e].index;
      chunk->nops = 1;
      for (int v = 0; v < y.VEC; v++) {
        oxi_instr *x = oxt_emit(L, OXI_UNPACK, esz == 4 ? in->type : OX_U32);
        x->ops[0] = chunk;
        x->nops = 1;
        x->index = esz == 4 ? v : v / 2;
        if (esz == 2) {
          oxi_instr *h = oxt_emit(L, OXI_UNPACK, in->type);
          h->ops[0] = x;
          h->nops = 1;
          h->index = v % 2;
          x = h;
        }
        oxt_set_slot(L, slot[e + v], x);
      }
      e += y.VEC - 1;
    }
    free(va);
    oxt_end_if(L, done);
    L->cur = slow;
  } else if (full) {
    oxt_begin_if(L, full, &slow); /* the fast path: straight-line loads */
    /* a pair of 16-bit floats is one 4-byte load where the rows are aligned (a residual added
       to an accumulator; half the load instructions) */
    if (oxt_loads_pairs(L, in)) {
      /* ... and held packed until used, a register a pair: a residual tile beside a 128 x 256
         accumulator costs half the registers */
      pair = oxb_malloc(sizeof *pair * (size_t)n / 2);
      for (int e = 0; e < n; e += 2) {
        pair[e / 2] = oxi_slot_new(L->m, L->nk, OX_U32);
        oxi_instr *x = oxt_emit(L, OXI_LOAD, OX_U32);
        x->mem = in->mem;
        x->ops[0] = es[e].index;
        x->nops = 1;
        oxt_set_slot(L, pair[e / 2], x);
      }
    } else {
      for (int e = 0; e < n; e++)
        oxt_set_slot(L, slot[e], oxt_load_at(L, in, es[e].index));
    }
    oxt_end_if(L, done);
    L->cur = slow;
  }
  for (int e = 0; e < n; e++) {
    oxi_instr *pad = oxt_emit(L, OXI_CONST, in->type);
    pad->imm = in->imm;
    pad->fimm = in->fimm;
    oxt_set_slot(L, slot[e], pad);
    oxi_block *join;
    oxt_begin_if(L, es[e].inb, &join);
    oxt_set_slot(L, slot[e], oxt_load_at(L, in, es[e].index));
    oxt_end_if(L, join);
  }
  for (int e = 0; pair && e < n; e += 2) {
    oxi_instr *lo = oxt_get_slot(L, slot[e]), *hi = oxt_get_slot(L, slot[e + 1]);
    oxi_instr *x = oxt_emit(L, OXI_PACK2, OX_U32);
    x->ops[0] = lo;
    x->ops[1] = hi;
    x->nops = 2;
    oxt_set_slot(L, pair[e / 2], x);
  }
  oxt_end_if(L, done);
  oxi_instr **out = oxt_new_elements(L, in->tshape);
  for (int e = 0; e < n; e++) {
    if (!pair) {
      out[e] = oxt_get_slot(L, slot[e]);
      continue;
    }
    oxi_instr *w = oxt_get_slot(L, pair[e / 2]), *h = oxt_emit(L, OXI_UNPACK, in->type);
    h->ops[0] = w;
    h->nops = 1;
    h->index = e % 2;
    out[e] = h;
  }
  free(es);
  free(slot);
  free(pair);
  L->tval[in->id] = out;
}

/* A prefetch (p.prefetch([..])): each thread asks L2 for the line of each
 * chunk (VEC elements) it holds of the tile in the blocked layout, where the
 * chunk lies inside the tensor; a warp's requests for one line are one
 * request. Nothing waits for them. Straight-line where the whole tile is
 * inside, as a load's fast path; else one test a chunk. */
void oxt_lower_prefetch(oxt_lowerer *L, const oxi_instr *in) {
  if (!L->cuda) /* the GPU lowering run on the CPU (OXIDE_TILE_THREADS=1): no L2 to fill */
    return;
  oxt_layout y = oxt_layout_of(L, in->tshape);
  int n;
  oxi_instr *coord[OXI_MAX_RANK], *full;
  oxt_element_site *es = tile_sites(L, in, false, coord, &n, &full);
  oxi_block *done = oxi_block_new(L->m, L->nk), *slow = NULL;
  for (int pass = full ? 0 : 1; pass < 2; pass++) {
    if (pass == 0)
      oxt_begin_if(L, full, &slow);
    for (int e = 0; e < n; e += y.VEC) {
      oxi_block *join = NULL;
      if (pass == 1)
        oxt_begin_if(L, es[e].inb, &join);
      oxi_instr *p = oxt_emit(L, OXI_PREFETCH, OXI_VOID);
      p->mem = in->mem;
      p->ops[0] = es[e].index;
      p->nops = 1;
      if (pass == 1)
        oxt_end_if(L, join);
    }
    if (pass == 0) {
      oxt_end_if(L, done);
      L->cur = slow;
    }
  }
  oxt_end_if(L, done);
  free(es);
}

/* The fast path of a store of a 16-bit mma-layout tile wholly inside a
 * contiguous16 tensor, 8 bytes a store: a lane holds columns 2q, 2q + 1 of
 * each 8 (q = lane % 4), so its own stores would cover 16 bytes of a row a
 * quad, half a 32-byte sector. Lanes q and q ^ 1 trade one pair for each two
 * 8-column pieces, and then hold four adjacent columns each: even q those of
 * the first piece from 2q, odd q those of the second from 2q - 2, and a
 * quad's stores fill a sector. */
bool oxt_stores_quads(const oxt_lowerer *L, const oxi_instr *in) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  oxt_mma_layout ml;
  return !L->serial && p->contiguous16 && (p->dtype == OX_BF16 || p->dtype == OX_F16) && oxt_is_mma(L, in->ops[0]) &&
         oxt_mma_layout_of(L, in->ops[0]->tshape, &ml) && ml.wn % 16 == 0;
}

void oxt_store_quad(oxt_lowerer *L, const oxi_instr *in, const oxt_element_site *es, oxi_instr *const *v, int ea) {
  oxi_instr *odd = oxt_bin(L, 100 + OXI_NE, OX_U64, oxt_bin(L, OXI_AND, OX_U64, L->t, oxt_u64(L, 1)), oxt_u64(L, 0));
  oxi_instr *adj = oxt_pick(L, odd, oxt_u64(L, 6), oxt_u64(L, 0)), *one = oxt_emit(L, OXI_CONST, OX_U32);
  one->imm = 1;
  int eb = ea + 4; /* (row, 8g + 2q), 8 columns on */
  oxi_instr *a = oxt_emit(L, OXI_PACK2, OX_U32), *b = oxt_emit(L, OXI_PACK2, OX_U32);
  a->ops[0] = v[ea], a->ops[1] = v[ea + 1], a->nops = 2;
  b->ops[0] = v[eb], b->ops[1] = v[eb + 1], b->nops = 2;
  oxi_instr *send = oxt_pick(L, odd, a, b), *sh = oxt_emit(L, OXI_SHFL, OX_U32);
  sh->sub = 3; /* xor */
  sh->ops[0] = send;
  sh->ops[1] = one;
  sh->nops = 2;
  oxi_instr *lo = oxt_cast(L, oxt_pick(L, odd, sh, a), OX_U64), *hi = oxt_cast(L, oxt_pick(L, odd, b, sh), OX_U64);
  oxi_instr *four = oxt_bin(L, OXI_OR, OX_U64, lo, oxt_bin(L, OXI_SHL, OX_U64, hi, oxt_u64(L, 32)));
  oxt_store_at(L, in, oxt_bin(L, OXI_ADD, OX_U64, es[ea].index, adj), four);
  L->nk->uses_sync = true;
}

/* The whole tile's quads; false: not such a store (elements as they are). */
static bool store_quads(oxt_lowerer *L, const oxi_instr *in, const oxt_element_site *es, oxi_instr **v) {
  oxt_mma_layout ml;
  if (!oxt_stores_quads(L, in) || !oxt_mma_layout_of(L, in->ops[0]->tshape, &ml))
    return false;
  int pieces = (int)(ml.wn / 8);
  for (int64_t mi = 0; mi < ml.wm / 16; mi++)
    for (int g = 0; g < pieces; g += 2)
      for (int h = 0; h < 2; h++)
        oxt_store_quad(L, in, es, v, (int)((mi * pieces + g) * 4 + 2 * h));
  return true;
}

/* The fast path of a store of a tile in the elementwise layout wholly inside a
 * contiguous16 tensor: each chunk of VEC (4) elements one vector store, 16
 * bytes of 4-byte ones or 8 of 16-bit floats, said outright for the reason
 * oxt_lower_load gives. A tile's chunks start at multiples of VEC along the
 * last dim, whose offset is a multiple of the tile's. False: not such a store. */
static bool store_chunks(oxt_lowerer *L, const oxi_instr *in, bool mma, const oxt_element_site *es, oxi_instr **v) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  const oxi_tshape *s = in->ops[0]->tshape;
  oxt_layout y = oxt_layout_of(L, s);
  size_t esz = ox_dtype_size(p->dtype);
  bool half = p->dtype == OX_BF16 || p->dtype == OX_F16;
  if (L->serial || mma || !p->contiguous16 || !(esz == 4 || half) || y.VEC != 4 || s->dims[s->rank - 1] % 4)
    return false;
  int n = oxt_count_in(L, s, false);
  for (int e = 0; e < n; e += 4) {
    oxi_instr *chunk;
    if (half) { /* pairs packed into u32s, the two into a u64 */
      oxi_instr *w[2];
      for (int i = 0; i < 2; i++) {
        w[i] = oxt_emit(L, OXI_PACK2, OX_U32);
        w[i]->ops[0] = v[e + 2 * i], w[i]->ops[1] = v[e + 2 * i + 1], w[i]->nops = 2;
      }
      chunk = oxt_bin(L, OXI_OR, OX_U64, oxt_cast(L, w[0], OX_U64),
                      oxt_bin(L, OXI_SHL, OX_U64, oxt_cast(L, w[1], OX_U64), oxt_u64(L, 32)));
    } else {
      chunk = oxt_emit(L, OXI_PACK, OXI_V4);
      for (int i = 0; i < 4; i++)
        chunk->ops[i] = v[e + i];
      chunk->nops = 4;
    }
    oxt_store_at(L, in, es[e].index, chunk);
  }
  return true;
}

/* A tile store into this block's output tile, straight-line or predicated
 * like a load. */
void oxt_lower_store(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  const oxi_tshape *s = in->ops[0]->tshape;
  bool mma = oxt_is_mma(L, in->ops[0]); /* stored from the layout it is held in */
  int n = oxt_count_in(L, s, mma);
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < p->rank; d++)
    coord[d] = oxt_tile_id(L, in->mem.index, d);
  oxt_element_site *es = oxb_malloc(sizeof *es * (size_t)n);
  oxt_origins(L, s, coord, in->mem.index, false);
  oxt_sites(L, s, mma, coord, in->mem.index, es);
  oxi_instr *full = oxt_whole_tile_inside(L, s, mma, coord, in->mem.index);
  oxi_instr **v = oxt_held(L, in->ops[0]);
  oxi_block *done = oxi_block_new(L->m, L->nk), *slow;
  if (full) {
    oxt_begin_if(L, full, &slow); /* the fast path: straight-line stores */
    if (!store_quads(L, in, es, v) && !store_chunks(L, in, mma, es, v))
      for (int e = 0; e < n; e++)
        oxt_store_at(L, in, es[e].index, v[e]);
    oxt_end_if(L, done);
    L->cur = slow;
  }
  for (int e = 0; e < n; e++) {
    oxi_block *join;
    oxt_begin_if(L, es[e].inb, &join);
    oxt_store_at(L, in, es[e].index, v[e]);
    oxt_end_if(L, join);
  }
  oxt_end_if(L, done);
  free(es);
}

/* Elementwise: in the result's layout (mma when the layout analysis says so),
 * operands moved to it if they are held in the other one. */
static bool all_one_value(oxi_instr *const *v, int n) {
  for (int e = 1; e < n; e++)
    if (v[e] != v[0])
      return false;
  return true;
}

/* Two shortcuts: operands that are one value in every element (splats,
 * broadcast reductions) give one result computed once; and a float tile
 * divided by one value is multiplied by its reciprocal, computed once (one
 * rounding more than a division, as GPU compilers do by default), which
 * takes the divisions out of a softmax or a norm. */
void oxt_lower_elementwise(oxt_lowerer *L, const oxi_instr *in) {
  bool mma = L->mma[in->id];
  int n = oxt_count_in(L, in->tshape, mma);
  oxi_instr **ops[6] = {0};
  assert(in->nops <= 6);
  bool one = true, everywhere = true;
  for (int i = 0; i < in->nops; i++)
    if (in->ops[i]->tshape) {
      ops[i] = oxt_in_layout(L, in->ops[i], mma);
      one &= all_one_value(ops[i], n);
      everywhere &= L->everywhere[in->ops[i]->id];
    }
  oxi_instr **out = oxt_new_elements(L, in->tshape);
  oxi_instr *recip = NULL;
  if (!one && in->op == OXI_BIN && in->sub == OXI_DIV && oxi_is_float(in->type) && all_one_value(ops[1], n)) {
    oxi_instr *c1 = oxt_emit(L, OXI_CONST, in->type);
    c1->fimm = 1;
    recip = oxt_bin(L, OXI_DIV, in->type, c1, ops[1][0]);
  }
  for (int e = 0; e < n; e++) {
    if (one && e) {
      out[e] = out[0];
      continue;
    }
    if (recip) {
      out[e] = oxt_bin(L, OXI_MUL, in->type, ops[0][e], recip);
      continue;
    }
    oxi_instr *c = oxt_emit(L, in->op, in->type);
    c->sub = in->sub;
    c->nops = in->nops;
    for (int i = 0; i < in->nops; i++)
      c->ops[i] = ops[i] ? ops[i][e] : oxt_mapped(L, in->ops[i]);
    out[e] = c;
  }
  L->tval[in->id] = out;
  L->everywhere[in->id] = one && everywhere;
}

/* Tile value `in`'s elements, each read from scratch, where its operand is
 * spilled first, at the operand position pos(L, in, f, ok) of its own position
 * f (ok: whether the element exists in the layout): broadcasts and slices. */
static oxi_instr **moved(oxt_lowerer *L, const oxi_instr *in,
                         oxi_instr *(*pos)(oxt_lowerer *L, const oxi_instr *in, oxi_instr *f, oxi_instr *ok)) {
  bool mma = L->mma[in->id]; /* (a broadcast an mma value takes: lower.c, free_in_any_layout) */
  oxt_spill(L, in->ops[0]);
  oxt_barrier(L);
  int n = oxt_count_in(L, in->tshape, mma);
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxt_positions_in(L, in->tshape, mma, f, ok);
  oxi_instr **out = oxt_new_elements(L, in->tshape);
  for (int e = 0; e < n; e++)
    out[e] = oxt_shared_load(L, oxt_scratch(L, in->type, 0), in->type, pos(L, in, f[e], ok[e]));
  free(f);
  oxt_barrier(L); /* before the scratch is written again */
  return out;
}

/* A broadcast's operand position of element f: its coordinates with the broadcast
 * dims at 0. A nonexistent element (the layout's guard) reads a position inside the
 * operand all the same (each coordinate is masked to its dim): harmless. */
oxi_instr *oxt_broadcast_source(oxt_lowerer *L, const oxi_instr *in, oxi_instr *f, oxi_instr *ok) {
  (void)ok;
  const oxi_tshape *src = in->ops[0]->tshape, *dst = in->tshape;
  int64_t after = oxt_elems(dst), src_after = oxt_elems(src);
  oxi_instr *g = NULL;
  for (int d = 0; d < dst->rank; d++) {
    after /= dst->dims[d];
    src_after /= src->dims[d];
    if (src->dims[d] == 1)
      continue;
    oxi_instr *c = oxt_bin(L, OXI_AND, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, f, oxt_u64(L, (uint64_t)oxt_log2i(after))),
                       oxt_u64(L, (uint64_t)(dst->dims[d] - 1)));
    oxi_instr *term = oxt_bin(L, OXI_MUL, OX_U64, c, oxt_u64(L, (uint64_t)src_after));
    g = g ? oxt_bin(L, OXI_ADD, OX_U64, g, term) : term;
  }
  return g ? g : oxt_u64(L, 0);
}

/* A slice's operand position of element f (a nonexistent one reads position 0). */
static oxi_instr *slice_source(oxt_lowerer *L, const oxi_instr *in, oxi_instr *f, oxi_instr *ok) {
  return oxt_slice_source(L, in, oxt_existing(L, f, ok));
}

/* A broadcast: each result element reads the source element at its
 * position with the broadcast dims at 0. */
void oxt_lower_broadcast(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *dst = in->tshape;
  if (L->everywhere[in->ops[0]->id]) { /* a value every thread already holds */
    int a = oxt_count_in(L, dst, false), b = oxt_count_in(L, dst, true);
    oxi_instr **out = oxt_new_elements(L, dst), *v = oxt_elements(L, in->ops[0])[0];
    for (int e = 0; e < (a > b ? a : b); e++) /* in either layout */
      out[e] = v;
    L->tval[in->id] = out;
    return;
  }
  if (L->mma[in->id] && oxt_is_mma(L, in->ops[0])) {
    /* the rows of a wgmma accumulator along them (layout_step): element e
       of a thread's (4 a 16 x 8 piece, rows l/4 and l/4 + 8) is in the
       thread's row (e & 3) / 2, so nothing moves */
    oxi_instr **v = oxt_held(L, in->ops[0]), **out = oxt_new_elements(L, dst);
    for (int e = 0; e < oxt_count_in(L, dst, true); e++)
      out[e] = v[(e & 3) >> 1];
    L->tval[in->id] = out;
    return;
  }
  L->tval[in->id] = moved(L, in, oxt_broadcast_source);
}

/* Reshape and permute: the result element at row-major position f reads
 * the operand element at position src(f) through scratch (for a reshape the
 * same f; for a permute, f's coordinates reordered). */
void oxt_lower_move(oxt_lowerer *L, const oxi_instr *in) {
  if (L->direct[in->id])
    return; /* staged by the dot that uses it from what is beneath it (choose_direct_loads) */
  if (L->mma[in->id]) { /* leading 1s added or dropped: the same elements in the same threads */
    L->tval[in->id] = oxt_held(L, in->ops[0]);
    return;
  }
  const oxi_tshape *src = in->ops[0]->tshape, *dst = in->tshape;
  oxt_layout ys = oxt_layout_of(L, src), yd = oxt_layout_of(L, dst);
  if (in->op == OXI_T_RESHAPE && ys.VEC == yd.VEC && ys.J == yd.J && ys.guard == yd.guard) {
    L->tval[in->id] = oxt_elements(L, in->ops[0]); /* the same elements in the same threads */
    return;
  }
  oxt_spill(L, in->ops[0]);
  oxt_barrier(L);
  int n = yd.J * yd.VEC;
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxt_positions(L, dst, f, ok);
  oxi_instr **out = oxt_new_elements(L, dst);
  int64_t dshift[OXI_MAX_RANK], sstride[OXI_MAX_RANK];
  int64_t after = oxt_elems(dst), sa = oxt_elems(src);
  for (int d = 0; d < dst->rank; d++) {
    after /= dst->dims[d];
    dshift[d] = oxt_log2i(after);
  }
  for (int d = 0; d < src->rank; d++) {
    sa /= src->dims[d];
    sstride[d] = sa;
  }
  for (int e = 0; e < n; e++) {
    oxi_instr *g = oxt_existing(L, f[e], ok[e]);
    if (in->op == OXI_T_PERMUTE) {
      oxi_instr *pos = NULL;
      for (int d = 0; d < dst->rank; d++) {
        int sd = (int)((in->imm >> (4 * d)) & 15);
        oxi_instr *c = oxt_bin(L, OXI_AND, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, g, oxt_u64(L, (uint64_t)dshift[d])),
                           oxt_u64(L, (uint64_t)(dst->dims[d] - 1)));
        oxi_instr *term = oxt_bin(L, OXI_MUL, OX_U64, c, oxt_u64(L, (uint64_t)sstride[sd]));
        pos = pos ? oxt_bin(L, OXI_ADD, OX_U64, pos, term) : term;
      }
      g = pos;
    }
    out[e] = oxt_shared_load(L, oxt_scratch(L, in->type, 0), in->type, g);
  }
  free(f);
  oxt_barrier(L);
  L->tval[in->id] = out;
}

/* The element index and in-bounds test of one element of gather `in`, from
 * its index tiles' elements `held[d]`. */
oxi_instr *oxt_gather_site(oxt_lowerer *L, const oxi_instr *in, oxi_instr *const *held, oxi_instr **inb) {
  oxi_instr *index = NULL;
  *inb = NULL;
  for (int d = 0; d < in->nops; d++) {
    oxi_instr *i = held[d];
    oxi_instr *ok = oxt_bin(L, OXT_LT, OX_U64, i, oxt_param_info(L, OXI_DIM, in->mem.index, d));
    *inb = *inb ? oxt_bin(L, OXI_AND, OX_BOOL, *inb, ok) : ok;
    oxi_instr *term = oxt_bin(L, OXI_MUL, OX_U64, i, oxt_param_info(L, OXI_STRIDE, in->mem.index, d));
    index = index ? oxt_bin(L, OXI_ADD, OX_U64, index, term) : term;
  }
  return index;
}

/* A gather: each element this thread holds, a predicated load at the index
 * its index tiles' elements give. */
void oxt_lower_gather(oxt_lowerer *L, const oxi_instr *in) {
  int n = oxt_count_in(L, in->tshape, false);
  oxi_instr **idx[OXI_MAX_RANK];
  for (int d = 0; d < in->nops; d++)
    idx[d] = oxt_in_layout(L, in->ops[d], false);
  oxi_instr **out = oxt_new_elements(L, in->tshape);
  for (int e = 0; e < n; e++) {
    oxi_instr *held[OXI_MAX_RANK], *inb;
    for (int d = 0; d < in->nops; d++)
      held[d] = idx[d][e];
    oxi_instr *index = oxt_gather_site(L, in, held, &inb);
    out[e] = oxt_load_or_pad(L, in, inb, index);
  }
  L->tval[in->id] = out;
}

/* Row-major position in t.slice's operand of element f of the slice. */
oxi_instr *oxt_slice_source(oxt_lowerer *L, const oxi_instr *in, oxi_instr *f) {
  const oxi_tshape *src = in->ops[0]->tshape, *dst = in->tshape;
  int64_t stride = 1;
  oxi_instr *g = NULL;
  for (int d = dst->rank - 1; d >= 0; d--) {
    int64_t off = (int64_t)((in->imm >> (16 * d)) & 0xffff);
    oxi_instr *c = oxt_coord_at(L, dst, d, f);
    if (off)
      c = oxt_bin(L, OXI_ADD, OX_U64, c, oxt_u64(L, (uint64_t)off));
    oxi_instr *term = stride == 1 ? c : oxt_bin(L, OXI_MUL, OX_U64, c, oxt_u64(L, (uint64_t)stride));
    g = g ? oxt_bin(L, OXI_ADD, OX_U64, g, term) : term;
    stride *= src->dims[d];
  }
  return g;
}

/* t.slice: each element from the operand's thread, through scratch (a splat
 * stays a splat). */
void oxt_lower_slice(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_instr *src = in->ops[0];
  const oxi_tshape *dst = in->tshape;
  if (L->splat[src->id] || L->everywhere[src->id]) {
    int a = oxt_count_in(L, dst, false), b = oxt_count_in(L, dst, true);
    oxi_instr **out = oxt_new_elements(L, dst), *v = oxt_elements(L, src)[0];
    for (int e = 0; e < (a > b ? a : b); e++)
      out[e] = v;
    L->tval[in->id] = out;
    L->splat[in->id] = L->splat[src->id];
    L->everywhere[in->id] = true;
    return;
  }
  L->tval[in->id] = moved(L, in, slice_source);
}

/* t.item(), t.at([..]): the element every thread needs, from the thread that
 * holds it through scratch (unless every thread holds it already); 0 past the
 * tile's end. */
void oxt_lower_extract(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_instr *t = in->ops[0];
  int64_t E = oxt_elems(t->tshape);
  oxi_instr *pos = oxt_mapped(L, in->ops[1]), *v;
  if (L->splat[t->id] || (E == 1 && L->everywhere[t->id])) {
    v = oxt_elements(L, t)[0];
  } else {
    oxt_spill(L, t);
    oxt_barrier(L);
    oxi_instr *last = oxt_u64(L, (uint64_t)E - 1);
    oxi_instr *at = oxt_pick(L, oxt_bin(L, OXT_LT, OX_U64, pos, last), pos, last);
    v = oxt_shared_load(L, oxt_scratch(L, t->type, 0), t->type, at);
    oxt_barrier(L); /* before the scratch is written again */
  }
  oxi_instr *zero = oxt_emit(L, OXI_CONST, in->type);
  L->sval[in->id] = oxt_pick(L, oxt_bin(L, OXT_LT, OX_U64, pos, oxt_u64(L, (uint64_t)E)), v, zero);
}

/* iota: each element's coordinate along the axis, from its position. */
void oxt_lower_iota(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->tshape;
  bool mma = L->mma[in->id]; /* made in the layout its users want (layout_step) */
  int n = oxt_count_in(L, s, mma);
  oxi_instr **out = oxt_new_elements(L, s);
  if (oxi_is_int(in->type)) {
    /* the thread's coordinate plus a constant an element (oxt_position_parts): one value
       live, not one an element (a loop's masks would hold them all through the loop) */
    int64_t *off = oxb_malloc(sizeof *off * (size_t)n);
    oxi_instr *base = oxt_cast(L, oxt_coord_at(L, s, in->index, oxt_position_parts(L, s, mma, off)), in->type);
    for (int e = 0; e < n; e++) {
      oxi_instr *c = oxt_emit(L, OXI_CONST, in->type);
      c->imm = (uint64_t)oxt_coord_of(s, in->index, off[e]);
      out[e] = oxt_bin(L, OXI_ADD, in->type, base, c);
    }
    free(off);
    L->tval[in->id] = out;
    return;
  }
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxt_positions_in(L, s, mma, f, ok);
  int64_t after = oxt_elems(s);
  for (int d = 0; d <= in->index; d++)
    after /= s->dims[d];
  for (int e = 0; e < n; e++) {
    oxi_instr *c = oxt_bin(L, OXI_AND, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, f[e], oxt_u64(L, (uint64_t)oxt_log2i(after))),
                       oxt_u64(L, (uint64_t)(s->dims[in->index] - 1)));
    oxi_instr *cv = oxt_emit(L, OXI_CAST, in->type);
    cv->ops[0] = c;
    cv->nops = 1;
    out[e] = cv;
  }
  free(f);
  L->tval[in->id] = out;
}

/* acc = fold of scratch[base + k * stride] for k = first, first + step, ...
 * below `count`, as an IR loop. */
static oxi_instr *fold_loop(oxt_lowerer *L, int sub, oxi_type t, oxi_mem m, oxi_instr *base,
                            int64_t stride, oxi_instr *first, int64_t step, int64_t count) {
  int as = oxi_slot_new(L->m, L->nk, t);
  oxt_set_slot(L, as, oxt_identity(L, sub, t));
  oxt_counted_loop lp;
  oxi_instr *k = oxt_begin_loop(L, &lp, first, step, count);
  oxi_instr *idx = oxt_bin(L, OXI_ADD, OX_U64, base, oxt_bin(L, OXI_MUL, OX_U64, k, oxt_u64(L, (uint64_t)stride)));
  oxt_set_slot(L, as, oxt_combine(L, sub, t, oxt_get_slot(L, as), oxt_shared_load(L, m, t, idx)));
  oxt_end_loop(L, &lp, k);
  return oxt_get_slot(L, as);
}

/* A reduction of a whole tile to one element, the way a row reduction for a
 * softmax or a norm wants it: each thread folds its own elements in
 * registers, the warps fold their lanes with butterfly shuffles, and the
 * warps' results meet in shared memory, where every thread folds them: so
 * every thread holds the result, and broadcasting it back costs nothing. */
static void reduce_all(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *src = in->ops[0]->tshape;
  int sub = in->sub;
  oxi_type t = in->type;
  oxt_layout y = oxt_layout_of(L, src);
  int n = y.J * y.VEC;
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxt_positions(L, src, f, ok);
  oxi_instr **v = oxt_elements(L, in->ops[0]);
  oxi_instr *acc = NULL;
  for (int e = 0; e < n; e++) {
    oxi_instr *x = v[e];
    if (ok[e]) { /* an element the layout's guard says does not exist */
      oxi_instr *id = oxt_identity(L, sub, t);
      oxi_instr *sel = oxt_emit(L, OXI_SELECT, t);
      sel->ops[0] = ok[e];
      sel->ops[1] = x;
      sel->ops[2] = id;
      sel->nops = 3;
      x = sel;
    }
    acc = acc ? oxt_combine(L, sub, t, acc, x) : x;
  }
  free(f);
  for (int off = 16; off >= 1; off /= 2) {
    oxi_instr *lane = oxt_emit(L, OXI_CONST, OX_U32);
    lane->imm = (uint64_t)off;
    oxi_instr *sh = oxt_emit(L, OXI_SHFL, t);
    sh->sub = 3; /* xor */
    sh->ops[0] = acc;
    sh->ops[1] = lane;
    sh->nops = 2;
    acc = oxt_combine(L, sub, t, acc, sh);
  }
  L->nk->uses_sync = true;
  oxi_mem m = oxt_scratch(L, t, L->T / 32);
  oxi_instr *first = oxt_bin(L, 100 + OXI_EQ, OX_U64, oxt_bin(L, OXI_AND, OX_U64, L->t, oxt_u64(L, 31)), oxt_u64(L, 0));
  oxt_shared_store(L, m, oxt_bin(L, OXI_SHR, OX_U64, L->t, oxt_u64(L, 5)), acc, first);
  oxt_barrier(L);
  oxi_instr *res = NULL;
  for (int w = 0; w < L->T / 32; w++) {
    oxi_instr *x = oxt_shared_load(L, m, t, oxt_u64(L, (uint64_t)w));
    res = res ? oxt_combine(L, sub, t, res, x) : x;
  }
  oxt_barrier(L);
  oxi_instr **out = oxt_new_elements(L, in->tshape);
  out[0] = res;
  L->tval[in->id] = out;
  L->everywhere[in->id] = true;
}

/* A reduction along axis a. With R results and T threads: when R < T, each
 * result gets G = T / R threads, each folding every G-th element of its row,
 * and the G partials are folded from scratch; else each thread folds whole
 * rows. The results then land in the result's layout through scratch. */
/* A reduction along the rows of a wgmma accumulator (layout_step) into
 * their own layout: each thread folds its elements of each of its two rows
 * (e & 3 < 2: the first), then the four lanes of a quad, which hold the rest
 * of those rows, fold theirs with two butterfly shuffles. No shared memory,
 * no barrier: what a softmax over a dot's result needs. */
static void reduce_rows(oxt_lowerer *L, const oxi_instr *in) {
  int sub = in->sub, n = oxt_count_in(L, in->ops[0]->tshape, true);
  oxi_type t = in->type;
  oxi_instr **v = oxt_held(L, in->ops[0]), *acc[2] = {NULL, NULL};
  for (int e = 0; e < n; e++) {
    int r = (e & 3) >> 1;
    acc[r] = acc[r] ? oxt_combine(L, sub, t, acc[r], v[e]) : v[e];
  }
  oxi_instr **out = oxt_new_elements(L, in->tshape);
  for (int r = 0; r < 2; r++) {
    for (int off = 1; off <= 2; off *= 2) {
      oxi_instr *lane = oxt_emit(L, OXI_CONST, OX_U32);
      lane->imm = (uint64_t)off;
      oxi_instr *sh = oxt_emit(L, OXI_SHFL, t);
      sh->sub = 3; /* xor */
      sh->ops[0] = acc[r];
      sh->ops[1] = lane;
      sh->nops = 2;
      acc[r] = oxt_combine(L, sub, t, acc[r], sh);
    }
    out[r] = acc[r];
  }
  L->nk->uses_sync = true; /* shuffles: the warp's lanes together, as reduce_all's */
  L->tval[in->id] = out;
}

void oxt_lower_reduce(oxt_lowerer *L, const oxi_instr *in) {
  if (L->mma[in->id]) {
    reduce_rows(L, in);
    return;
  }
  const oxi_tshape *src = in->ops[0]->tshape, *dst = in->tshape;
  int a = in->index, sub = in->sub;
  oxi_type t = in->type;
  int64_t len = src->dims[a], inner = 1, R = oxt_elems(dst);
  for (int d = a + 1; d < src->rank; d++)
    inner *= src->dims[d];
  if (R == 1 && L->T >= 32 && (ox_dtype_size((ox_dtype)t) == 4 || ox_dtype_size((ox_dtype)t) == 8)) {
    reduce_all(L, in);
    return;
  }
  oxi_mem m = oxt_scratch(L, t, oxt_elems(src) > L->T ? oxt_elems(src) : L->T);
  oxt_spill(L, in->ops[0]);
  oxt_barrier(L);
  /* the position in the source of result r's first element */
#define ROW_BASE(r)                                                                               \
  oxt_bin(L, OXI_ADD, OX_U64,                                                                         \
      oxt_bin(L, OXI_SHL, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, (r), oxt_u64(L, (uint64_t)oxt_log2i(inner))),       \
          oxt_u64(L, (uint64_t)oxt_log2i(inner * len))),                                                \
      oxt_bin(L, OXI_AND, OX_U64, (r), oxt_u64(L, (uint64_t)(inner - 1))))
  oxt_layout y = oxt_layout_of(L, dst);
  int n = y.J * y.VEC;
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxi_instr **out = oxt_new_elements(L, dst);
  if (R < L->T) {
    int64_t G = L->T / R;
    oxi_instr *r = oxt_bin(L, OXI_SHR, OX_U64, L->t, oxt_u64(L, (uint64_t)oxt_log2i(G)));
    oxi_instr *g = oxt_bin(L, OXI_AND, OX_U64, L->t, oxt_u64(L, (uint64_t)(G - 1)));
    oxi_instr *part = fold_loop(L, sub, t, m, ROW_BASE(r), inner, g, G, len);
    oxt_barrier(L); /* every thread has read its row elements */
    oxt_shared_store(L, m, L->t, part, NULL);
    oxt_barrier(L);
    oxt_positions(L, dst, f, ok);
    for (int e = 0; e < n; e++)
      out[e] = fold_loop(L, sub, t, m, oxt_bin(L, OXI_MUL, OX_U64, oxt_existing(L, f[e], ok[e]), oxt_u64(L, (uint64_t)G)),
                         1, oxt_u64(L, 0), 1, G);
  } else {
    /* thread t folds results t, t + T, ...: R / T of them */
    int64_t per = R / L->T;
    oxi_instr **res = oxb_malloc(sizeof *res * (size_t)per);
    for (int64_t i = 0; i < per; i++) {
      oxi_instr *r = oxt_bin(L, OXI_ADD, OX_U64, L->t, oxt_u64(L, (uint64_t)(i * L->T)));
      res[i] = fold_loop(L, sub, t, m, ROW_BASE(r), inner, oxt_u64(L, 0), 1, len);
    }
    oxt_barrier(L);
    for (int64_t i = 0; i < per; i++)
      oxt_shared_store(L, m, oxt_bin(L, OXI_ADD, OX_U64, L->t, oxt_u64(L, (uint64_t)(i * L->T))), res[i], NULL);
    free(res);
    oxt_barrier(L);
    oxt_positions(L, dst, f, ok);
    for (int e = 0; e < n; e++)
      out[e] = oxt_shared_load(L, m, t, oxt_existing(L, f[e], ok[e]));
  }
#undef ROW_BASE
  free(f);
  oxt_barrier(L);
  L->tval[in->id] = out;
}

/* A tile slot becomes one slot per element a thread holds of it (in the
 * slot's layout); LLVM turns them into registers, so a loop carrying a tile
 * (a K loop's accumulator) keeps it in registers. */
void oxt_tile_var(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->op == OXI_VAR_GET ? in->tshape : in->ops[0]->tshape;
  bool mma = L->slot_mma[in->index];
  int n = oxt_count_in(L, s, mma);
  oxt_mma_layout ml;
  oxi_type t = in->op == OXI_VAR_GET ? in->type : in->ops[0]->type;
  if (L->wg && mma && (t == OX_F32 || t == OX_I32) && oxt_mma_layout_of(L, s, &ml) && ml.WN == 1 && ml.wm == 16 &&
      ml.wn >= 8) {
    /* a wgmma accumulator's layout (f32, or i32 for integers): kept as its registers, so that a
       K loop's dot accumulates into them while the previous call's wgmmas run */
    if (!L->vslot[in->index])
      L->vslot[in->index] = oxi_slot_new(L->m, L->nk, oxi_vacc(n, t)) + 1;
    int slot = L->vslot[in->index] - 1;
    /* a deferred dot's result written in this old block: stored at its end (oxt_wg_block_end),
       so that the groups committed after it need not be waited for; read before then as it is */
    int w = 0;
    while (w < L->nwg_sets && L->wg_sets[w].slot != in->index)
      w++;
    if (in->op == OXI_VAR_GET) {
      const oxi_instr *d = w < L->nwg_sets ? L->wg_sets[w].val : NULL;
      L->vacc[in->id] = d ? L->vacc[d->id] : oxt_get_slot(L, slot);
      L->ready[in->id] = !d && !L->slot_busy[in->index];
      if (d) {
        L->wg_at[in->id] = L->wg_at[d->id];
        L->wg_block[in->id] = L->wg_block[d->id];
      }
      return;
    }
    if (w < L->nwg_sets) /* overwritten */
      L->wg_sets[w] = L->wg_sets[--L->nwg_sets];
    const oxi_instr *x = in->ops[0];
    if (L->vacc[x->id] && L->wg_block[x->id] && L->nwg_sets < (int)(sizeof L->wg_sets / sizeof *L->wg_sets)) {
      L->wg_sets[L->nwg_sets].slot = in->index;
      L->wg_sets[L->nwg_sets++].val = x;
    } else if (L->vacc[x->id] && !L->wg_block[x->id]) {
      oxt_set_slot(L, slot, L->vacc[x->id]);
    } else { /* other registers (or a deferred result's, waited for); if the slot is busy, no wgmma may
                still write its registers */
      oxi_instr **v = oxt_in_layout(L, x, true);
      if (L->slot_busy[in->index])
        oxt_wg_sync(L, NULL, 2, 0);
      oxt_set_slot(L, slot, oxt_wg_pack(L, v, n));
    }
    return;
  }
  /* 16-bit tiles in wgmma's A layout two elements a slot: half the registers, and a dot takes them
     as they are (attention's probabilities, carried from one pass to the next) */
  bool pairs = mma && oxt_in_pairs(L, s, t);
  int ns = pairs ? n / 2 : n;
  if (!L->tslots[in->index]) {
    L->tslots[in->index] = oxb_alloc(L->m->arena, sizeof(int) * (size_t)ns);
    for (int e = 0; e < ns; e++)
      L->tslots[in->index][e] = oxi_slot_new(L->m, L->nk, pairs ? OX_U32 : t);
  }
  int *slots = L->tslots[in->index];
  /* ... written at the block's end if a deferred dot may still read them (L->pair_reader) */
  int w = 0;
  while (pairs && w < L->nwg_sets && L->wg_sets[w].slot != in->index)
    w++;
  if (in->op == OXI_VAR_SET) {
    if (pairs && w < L->nwg_sets) {
      L->wg_sets[w].val = in->ops[0];
      return;
    }
    if (pairs && L->pair_reader[in->index] && L->nwg_sets < (int)(sizeof L->wg_sets / sizeof *L->wg_sets)) {
      L->wg_sets[L->nwg_sets].slot = in->index;
      L->wg_sets[L->nwg_sets++].val = in->ops[0];
      return;
    }
    if (pairs && L->pair_reader[in->index]) /* no room to postpone: wait for the reader now */
      oxt_wg_sync(L, NULL, 2, oxt_wg_pending(L, L->pair_reader[in->index]));
    oxi_instr **v = pairs ? oxt_pairs(L, in->ops[0]) : oxt_in_layout(L, in->ops[0], mma);
    for (int e = 0; e < ns; e++)
      oxt_set_slot(L, slots[e], v[e]);
    return;
  }
  if (pairs && w < L->nwg_sets) { /* written earlier in this block, not yet stored */
    L->pairs[in->id] = oxt_pairs(L, L->wg_sets[w].val);
    L->tval[in->id] = oxt_in_layout(L, L->wg_sets[w].val, true);
    return;
  }
  oxi_instr **out = oxt_new_elements(L, s);
  if (pairs) {
    oxi_instr **pr = oxb_alloc(L->m->arena, sizeof *pr * (size_t)ns);
    for (int e = 0; e < ns; e++) {
      pr[e] = oxt_get_slot(L, slots[e]);
      for (int h = 0; h < 2; h++) {
        out[2 * e + h] = oxt_emit(L, OXI_UNPACK, t);
        out[2 * e + h]->ops[0] = pr[e];
        out[2 * e + h]->nops = 1;
        out[2 * e + h]->index = h;
      }
    }
    L->pairs[in->id] = pr;
  } else {
    for (int e = 0; e < n; e++)
      out[e] = oxt_get_slot(L, slots[e]);
  }
  L->tval[in->id] = out;
}

/* An atomic add of a tile into an atomic tensor: one atomic add per element
 * this thread holds (in the tile's layout), predicated like a store on the
 * tensor's bounds; or, for a scatter, on the index being below the dim. */
void oxt_lower_atomic(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  if (in->sub == 0) {
    const oxi_instr *v = in->ops[p->rank];
    const oxi_tshape *s = v->tshape;
    bool mma = oxt_is_mma(L, v);
    int n = oxt_count_in(L, s, mma);
    oxi_instr *coord[OXI_MAX_RANK];
    for (int d = 0; d < p->rank; d++)
      coord[d] = oxt_mapped(L, in->ops[d]);
    oxt_origins(L, s, coord, in->mem.index, false);
    oxt_element_site *es = oxb_malloc(sizeof *es * (size_t)n);
    oxt_sites(L, s, mma, coord, in->mem.index, es);
    oxi_instr **vals = oxt_held(L, v);
    for (int e = 0; e < n; e++)
      oxt_atomic_at(L, in, es[e].inb, es[e].index, vals[e]);
    free(es);
    return;
  }
  const oxi_tshape *s = in->ops[0]->tshape;
  int n = oxt_count_in(L, s, false);
  oxi_instr **idx = oxt_elements(L, in->ops[0]), **vals = oxt_elements(L, in->ops[1]);
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxt_positions(L, s, f, ok);
  oxi_instr *dim = oxt_param_info(L, OXI_DIM, in->mem.index, 0), *stride = oxt_param_info(L, OXI_STRIDE, in->mem.index, 0);
  for (int e = 0; e < n; e++) {
    oxi_instr *cond = oxt_bin(L, OXT_LT, OX_U64, idx[e], dim);
    if (ok[e])
      cond = oxt_bin(L, OXI_AND, OX_BOOL, cond, ok[e]);
    oxt_atomic_at(L, in, cond, oxt_bin(L, OXI_MUL, OX_U64, idx[e], stride), vals[e]);
  }
  free(f);
}
