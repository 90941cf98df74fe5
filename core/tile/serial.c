/* serial.c - the tile lowering for the CPU: one thread a block.
 *
 * On the CPU a block is one thread (L->serial), and every tile value is a
 * buffer of its elements in row-major order, in the block's shared memory
 * (which on the CPU is the worker's own memory); each tile op is a loop over
 * elements, which LLVM vectorizes, instead of elements unrolled over threads
 * that meet at barriers. A splat stays one scalar (L->splat, L->sval) until
 * something needs its elements. Blocks spread over the cores as for SIMT
 * kernels, and no block needs fibers. */
#include "tile/lower.h"

static oxi_mem s_buf(const oxt_lowerer *L, const oxi_instr *old) {
  assert(!L->splat[old->id] && L->buf[old->id]);
  oxi_mem m = {OXI_MEM_SHARED, L->buf[old->id] - 1};
  return m;
}

static void s_set_buf(oxt_lowerer *L, const oxi_instr *old, oxi_mem m) { L->buf[old->id] = m.index + 1; }

/* Element at row-major position f of tile value `old`. */
static oxi_instr *s_elem(oxt_lowerer *L, const oxi_instr *old, oxi_instr *f) {
  if (L->splat[old->id])
    return oxt_mapped(L, old);
  return oxt_shared_load(L, s_buf(L, old), old->type, f);
}

/* `for f in 0..count` over a tile's elements; returns f. */
static oxi_instr *s_loop(oxt_lowerer *L, oxt_counted_loop *lp, int64_t count) {
  return oxt_begin_loop(L, lp, oxt_u64(L, 0), 1, count);
}

/* Copies `count` elements from `src` (a tile value) to buffer `dst`. */
static void s_copy(oxt_lowerer *L, oxi_mem dst, const oxi_instr *src, int64_t count) {
  oxt_counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, count);
  oxt_shared_store(L, dst, f, s_elem(L, src, f), NULL);
  oxt_end_loop(L, &lp, f);
}

static void s_elementwise(oxt_lowerer *L, const oxi_instr *in) {
  bool splat = true;
  for (int i = 0; i < in->nops; i++)
    splat &= !in->ops[i]->tshape || L->splat[in->ops[i]->id];
  if (splat) { /* one scalar operation */
    oxi_instr *c = oxt_clone(L, in);
    L->sval[in->id] = c;
    L->splat[in->id] = 1;
    return;
  }
  int64_t E = oxt_elems(in->tshape);
  oxi_mem m = oxt_shared_array(L, in->type, E);
  oxt_counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, E);
  oxi_instr *ops[6];
  assert(in->nops <= 6);
  for (int i = 0; i < in->nops; i++)
    ops[i] = in->ops[i]->tshape ? s_elem(L, in->ops[i], f) : oxt_mapped(L, in->ops[i]);
  oxi_instr *c = oxt_emit(L, in->op, in->type);
  c->sub = in->sub;
  c->nops = in->nops;
  for (int i = 0; i < in->nops; i++)
    c->ops[i] = ops[i];
  oxt_shared_store(L, m, f, c, NULL);
  oxt_end_loop(L, &lp, f);
  s_set_buf(L, in, m);
}

/* The offset in tensor `param` of element f of a tile of `shape` at tile
 * coordinates `coord` (clamped), and whether it lies inside the tensor. */
static oxi_instr *s_site(oxt_lowerer *L, const oxi_tshape *shape, oxi_instr *const *origin, int param, oxi_instr *f,
                         oxi_instr **inb) {
  oxi_instr *index = NULL;
  *inb = NULL;
  for (int d = 0; d < shape->rank; d++) {
    oxi_instr *g = oxt_bin(L, OXI_ADD, OX_U64, origin[d], oxt_coord_at(L, shape, d, f));
    oxi_instr *in = oxt_bin(L, OXT_LT, OX_U64, g, oxt_param_info(L, OXI_DIM, param, d));
    *inb = *inb ? oxt_bin(L, OXI_AND, OX_BOOL, *inb, in) : in;
    oxi_instr *term = oxt_bin(L, OXI_MUL, OX_U64, g, oxt_param_info(L, OXI_STRIDE, param, d));
    index = index ? oxt_bin(L, OXI_ADD, OX_U64, index, term) : term;
  }
  return index;
}

/* A load: a loop without predicates when the whole tile is inside the
 * tensor, else one that reads the padding outside. */
static void s_load(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->tshape;
  int64_t E = oxt_elems(s);
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < in->nops; d++)
    coord[d] = oxt_mapped(L, in->ops[d]);
  oxt_origins(L, s, coord, in->mem.index, in->sub == 1);
  oxi_mem m = oxt_shared_array(L, in->type, E);
  oxi_block *done = oxi_block_new(L->m, L->nk), *edge;
  oxt_begin_if(L, oxt_whole_tile_inside(L, s, false, coord, in->mem.index), &edge);
  oxt_counted_loop lp;
  oxi_instr *inb, *f = s_loop(L, &lp, E);
  oxt_shared_store(L, m, f, oxt_load_at(L, in, s_site(L, s, coord, in->mem.index, f, &inb)), NULL);
  oxt_end_loop(L, &lp, f);
  oxt_end_if(L, done);
  L->cur = edge;
  f = s_loop(L, &lp, E);
  oxi_instr *index = s_site(L, s, coord, in->mem.index, f, &inb);
  oxt_shared_store(L, m, f, oxt_load_or_pad(L, in, inb, index), NULL);
  oxt_end_loop(L, &lp, f);
  oxt_end_if(L, done);
  s_set_buf(L, in, m);
}

static void s_store(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  const oxi_tshape *s = in->ops[0]->tshape;
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < p->rank; d++)
    coord[d] = oxt_tile_id(L, in->mem.index, d);
  oxt_origins(L, s, coord, in->mem.index, false);
  oxt_counted_loop lp;
  oxi_instr *inb, *f = s_loop(L, &lp, oxt_elems(s));
  oxi_instr *index = s_site(L, s, coord, in->mem.index, f, &inb);
  oxi_block *join;
  oxt_begin_if(L, inb, &join);
  oxt_store_at(L, in, index, s_elem(L, in->ops[0], f));
  oxt_end_if(L, join);
  oxt_end_loop(L, &lp, f);
}

/* Position in a tile of shape `src` of the element that element f of a tile
 * of shape `dst` reads: a broadcast (src dims of 1 read coordinate 0) or a
 * permute (`perm`: dst dim d is src dim perm[d]; NULL: the same dims). */
static oxi_instr *s_source(oxt_lowerer *L, const oxi_tshape *src, const oxi_tshape *dst, const int *perm,
                           oxi_instr *f) {
  int64_t stride[OXI_MAX_RANK], after = 1;
  for (int d = src->rank - 1; d >= 0; d--)
    stride[d] = after, after *= src->dims[d];
  oxi_instr *g = NULL;
  for (int d = 0; d < dst->rank; d++) {
    int sd = perm ? perm[d] : d;
    if (src->dims[sd] == 1)
      continue;
    oxi_instr *term = oxt_bin(L, OXI_MUL, OX_U64, oxt_coord_at(L, dst, d, f), oxt_u64(L, (uint64_t)stride[sd]));
    g = g ? oxt_bin(L, OXI_ADD, OX_U64, g, term) : term;
  }
  return g ? g : oxt_u64(L, 0);
}

static void s_move(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_instr *src = in->ops[0];
  if (L->splat[src->id]) { /* every element is still the one scalar */
    L->sval[in->id] = oxt_mapped(L, src);
    L->splat[in->id] = 1;
    return;
  }
  if (in->op == OXI_T_RESHAPE) { /* the same elements in the same order */
    s_set_buf(L, in, s_buf(L, src));
    return;
  }
  int perm[OXI_MAX_RANK], *pp = NULL;
  if (in->op == OXI_T_PERMUTE) {
    for (int d = 0; d < in->tshape->rank; d++)
      perm[d] = (int)((in->imm >> (4 * d)) & 15);
    pp = perm;
  }
  int64_t E = oxt_elems(in->tshape);
  oxi_mem m = oxt_shared_array(L, in->type, E);
  oxt_counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, E);
  oxi_instr *at = in->op == OXI_T_SLICE ? oxt_slice_source(L, in, f) : s_source(L, src->tshape, in->tshape, pp, f);
  oxt_shared_store(L, m, f, s_elem(L, src, at), NULL);
  oxt_end_loop(L, &lp, f);
  s_set_buf(L, in, m);
}

static void s_iota(oxt_lowerer *L, const oxi_instr *in) {
  int64_t E = oxt_elems(in->tshape);
  oxi_mem m = oxt_shared_array(L, in->type, E);
  oxt_counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, E);
  oxt_shared_store(L, m, f, oxt_cast(L, oxt_coord_at(L, in->tshape, in->index, f), in->type), NULL);
  oxt_end_loop(L, &lp, f);
  s_set_buf(L, in, m);
}

/* A gather: element f reads the tensor at its index tiles' element f, or the
 * padding outside. */
static void s_gather(oxt_lowerer *L, const oxi_instr *in) {
  int64_t E = oxt_elems(in->tshape);
  oxi_mem m = oxt_shared_array(L, in->type, E);
  oxt_counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, E);
  oxi_instr *held[OXI_MAX_RANK], *inb;
  for (int d = 0; d < in->nops; d++)
    held[d] = s_elem(L, in->ops[d], f);
  oxi_instr *index = oxt_gather_site(L, in, held, &inb);
  oxt_shared_store(L, m, f, oxt_load_or_pad(L, in, inb, index), NULL);
  oxt_end_loop(L, &lp, f);
  s_set_buf(L, in, m);
}

/* A reduction along axis a, of `len` elements `inner` apart per result, as
 * a tree: a copy of the source is halved log2(len) times, each element of
 * the first half combined with its partner in the second. Each halving is a
 * loop without a carried dependence (LLVM vectorizes it, where a running sum
 * in f32 would stay serial), and the rounding error grows with log2(len),
 * not len, as on the GPU. One result (a whole tile's) stays a scalar. */
static void s_reduce(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *src = in->ops[0]->tshape;
  int a = in->index, sub = in->sub;
  oxi_type t = in->type;
  int64_t len = src->dims[a], inner = 1, R = oxt_elems(in->tshape);
  for (int d = a + 1; d < src->rank; d++)
    inner *= src->dims[d];
  oxi_mem tmp = oxt_shared_array(L, t, oxt_elems(src));
  s_copy(L, tmp, in->ops[0], oxt_elems(src));
  int li = oxt_log2i(inner);
  for (int64_t span = len / 2; span >= 1; span /= 2) {
    /* q = (o, k, i), k < span: tmp[o][k][i] op= tmp[o][k + span][i] */
    oxt_counted_loop lp;
    oxi_instr *q = s_loop(L, &lp, R * span);
    oxi_instr *o = oxt_bin(L, OXI_SHR, OX_U64, q, oxt_u64(L, (uint64_t)(oxt_log2i(span) + li)));
    oxi_instr *ki = oxt_bin(L, OXI_AND, OX_U64, q, oxt_u64(L, (uint64_t)(span * inner - 1)));
    oxi_instr *at = oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_SHL, OX_U64, o, oxt_u64(L, (uint64_t)oxt_log2i(len * inner))), ki);
    oxi_instr *x = oxt_shared_load(L, tmp, t, at);
    oxi_instr *y = oxt_shared_load(L, tmp, t, oxt_bin(L, OXI_ADD, OX_U64, at, oxt_u64(L, (uint64_t)(span * inner))));
    oxt_shared_store(L, tmp, at, oxt_combine(L, sub, t, x, y), NULL);
    oxt_end_loop(L, &lp, q);
  }
  if (R == 1) {
    L->sval[in->id] = oxt_shared_load(L, tmp, t, oxt_u64(L, 0));
    L->splat[in->id] = 1;
    return;
  }
  /* result r = (o, i) is at tmp[o][0][i] */
  oxi_mem m = oxt_shared_array(L, t, R);
  oxt_counted_loop lp;
  oxi_instr *r = s_loop(L, &lp, R);
  oxi_instr *at = oxt_bin(L, OXI_ADD, OX_U64,
                      oxt_bin(L, OXI_SHL, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, r, oxt_u64(L, (uint64_t)li)),
                          oxt_u64(L, (uint64_t)oxt_log2i(len * inner))),
                      oxt_bin(L, OXI_AND, OX_U64, r, oxt_u64(L, (uint64_t)(inner - 1))));
  oxt_shared_store(L, m, r, oxt_shared_load(L, tmp, t, at), NULL);
  oxt_end_loop(L, &lp, r);
  s_set_buf(L, in, m);
}

/* A scan: a copy of the source, each element combined with the one before
 * it along the axis, in row-major order (so that one is final already). */
static void s_scan(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->tshape;
  oxi_type t = in->type;
  int64_t E = oxt_elems(s), inner = E;
  for (int d = 0; d <= in->index; d++)
    inner /= s->dims[d];
  oxi_mem m = oxt_shared_array(L, t, E);
  s_copy(L, m, in->ops[0], E);
  oxt_counted_loop lp;
  oxi_instr *q = s_loop(L, &lp, E);
  oxi_instr *has = oxt_bin(L, 100 + OXI_NE, OX_U64, oxt_coord_at(L, s, in->index, q), oxt_u64(L, 0));
  oxi_instr *from = oxt_pick(L, has, oxt_bin(L, OXI_SUB, OX_U64, q, oxt_u64(L, (uint64_t)inner)), q);
  oxi_instr *cur = oxt_shared_load(L, m, t, q);
  oxt_shared_store(L, m, q, oxt_pick(L, has, oxt_combine(L, in->sub, t, oxt_shared_load(L, m, t, from), cur), cur), NULL);
  oxt_end_loop(L, &lp, q);
  s_set_buf(L, in, m);
}

/* A sort: the network (order.c) on a copy of the source, and for argsort on
 * each element's index along the axis beside it. */
static void s_sort(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->tshape;
  int64_t E = oxt_elems(s);
  bool indices = in->sub & 2;
  oxi_mem km = oxt_shared_array(L, in->ops[0]->type, E), im = {OXI_MEM_SHARED, -1};
  s_copy(L, km, in->ops[0], E);
  if (indices) {
    im = oxt_shared_array(L, OX_I32, E);
    oxt_counted_loop lp;
    oxi_instr *q = s_loop(L, &lp, E);
    oxt_shared_store(L, im, q, oxt_cast(L, oxt_coord_at(L, s, in->index, q), OX_I32), NULL);
    oxt_end_loop(L, &lp, q);
  }
  oxt_sort_network(L, in, km, im, indices);
  s_set_buf(L, in, indices ? im : km);
}

/* dot: the result (f32) starts as the accumulator or zero, and for each row
 * i and each k, row k of b times a[i][k] is added to row i: the innermost
 * loop runs along rows, which LLVM vectorizes. */
static void s_dot(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_instr *a = in->ops[0], *b = in->ops[1];
  int64_t M = a->tshape->dims[0], K = a->tshape->dims[1], N = b->tshape->dims[1];
  oxi_type t = in->type; /* f32, or i32 for integer operands */
  oxi_mem m = oxt_shared_array(L, t, M * N);
  if (in->nops == 3) {
    s_copy(L, m, in->ops[2], M * N);
  } else {
    oxt_counted_loop lp;
    oxi_instr *f = s_loop(L, &lp, M * N), *z = oxt_emit(L, OXI_CONST, t);
    z->fimm = 0;
    oxt_shared_store(L, m, f, z, NULL);
    oxt_end_loop(L, &lp, f);
  }
  oxt_counted_loop li, lk, lj;
  oxi_instr *i = s_loop(L, &li, M);
  oxi_instr *k = s_loop(L, &lk, K);
  oxi_instr *x = s_elem(L, a, oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_MUL, OX_U64, i, oxt_u64(L, (uint64_t)K)), k));
  oxi_instr *j = s_loop(L, &lj, N);
  oxi_instr *y = s_elem(L, b, oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_MUL, OX_U64, k, oxt_u64(L, (uint64_t)N)), j));
  oxi_instr *at = oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_MUL, OX_U64, i, oxt_u64(L, (uint64_t)N)), j);
  oxi_instr *sum = oxt_shared_load(L, m, t, at);
  oxt_shared_store(L, m, at, oxt_mul_add(L, t, x, y, sum), NULL);
  oxt_end_loop(L, &lj, j);
  oxt_end_loop(L, &lk, k);
  oxt_end_loop(L, &li, i);
  s_set_buf(L, in, m);
}

static void s_atomic(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  oxt_counted_loop lp;
  if (in->sub == 0) { /* a tile added at tile coordinates */
    const oxi_instr *v = in->ops[p->rank];
    oxi_instr *coord[OXI_MAX_RANK];
    for (int d = 0; d < p->rank; d++)
      coord[d] = oxt_mapped(L, in->ops[d]);
    oxt_origins(L, v->tshape, coord, in->mem.index, false);
    oxi_instr *inb, *f = s_loop(L, &lp, oxt_elems(v->tshape));
    oxi_instr *index = s_site(L, v->tshape, coord, in->mem.index, f, &inb);
    oxt_atomic_at(L, in, inb, index, s_elem(L, v, f));
    oxt_end_loop(L, &lp, f);
    return;
  }
  /* a scatter: element e of the values to the index in element e of the indices */
  oxi_instr *dim = oxt_param_info(L, OXI_DIM, in->mem.index, 0), *stride = oxt_param_info(L, OXI_STRIDE, in->mem.index, 0);
  oxi_instr *f = s_loop(L, &lp, oxt_elems(in->ops[0]->tshape));
  oxi_instr *idx = s_elem(L, in->ops[0], f);
  oxt_atomic_at(L, in, oxt_bin(L, OXT_LT, OX_U64, idx, dim), oxt_bin(L, OXI_MUL, OX_U64, idx, stride), s_elem(L, in->ops[1], f));
  oxt_end_loop(L, &lp, f);
}

/* A `let mut` tile: a buffer of its own; a read copies it out, since the
 * variable may be assigned while the value read is still in use. */
static void s_tile_var(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->op == OXI_VAR_GET ? in->tshape : in->ops[0]->tshape;
  int64_t E = oxt_elems(s);
  if (!L->tslots[in->index]) {
    L->tslots[in->index] = oxb_alloc(L->m->arena, sizeof(int));
    L->tslots[in->index][0] = oxt_shared_array(L, in->op == OXI_VAR_GET ? in->type : in->ops[0]->type, E).index;
  }
  oxi_mem var = {OXI_MEM_SHARED, L->tslots[in->index][0]};
  if (in->op == OXI_VAR_SET) {
    s_copy(L, var, in->ops[0], E);
    return;
  }
  oxi_mem m = oxt_shared_array(L, in->type, E);
  oxt_counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, E);
  oxt_shared_store(L, m, f, oxt_shared_load(L, var, in->type, f), NULL);
  oxt_end_loop(L, &lp, f);
  s_set_buf(L, in, m);
}

void oxt_serial_instr(oxt_lowerer *L, const oxi_instr *in) {
  switch (in->op) {
  case OXI_T_LOAD: s_load(L, in); return;
  case OXI_T_STORE: s_store(L, in); return;
  case OXI_T_SPLAT:
    L->sval[in->id] = oxt_mapped(L, in->ops[0]);
    L->splat[in->id] = 1;
    return;
  case OXI_T_DOT: s_dot(L, in); return;
  case OXI_T_ATOMIC_ADD: s_atomic(L, in); return;
  case OXI_T_PREFETCH: return; /* a hint for the GPU's L2: nothing on the CPU */
  case OXI_VAR_GET:
  case OXI_VAR_SET:
    if (in->tshape || (in->op == OXI_VAR_SET && in->ops[0]->tshape)) {
      s_tile_var(L, in);
      return;
    }
    break;
  case OXI_T_REDUCE: s_reduce(L, in); return;
  case OXI_T_SCAN: s_scan(L, in); return;
  case OXI_T_SORT: s_sort(L, in); return;
  case OXI_T_BROADCAST:
  case OXI_T_RESHAPE:
  case OXI_T_PERMUTE:
  case OXI_T_SLICE: s_move(L, in); return;
  case OXI_T_IOTA: s_iota(L, in); return;
  case OXI_T_GATHER: s_gather(L, in); return;

  case OXI_T_EXTRACT: {
    int64_t E = oxt_elems(in->ops[0]->tshape);
    oxi_instr *pos = oxt_mapped(L, in->ops[1]), *last = oxt_u64(L, (uint64_t)E - 1);
    oxi_instr *v = s_elem(L, in->ops[0], oxt_pick(L, oxt_bin(L, OXT_LT, OX_U64, pos, last), pos, last));
    oxi_instr *zero = oxt_emit(L, OXI_CONST, in->type);
    L->sval[in->id] = oxt_pick(L, oxt_bin(L, OXT_LT, OX_U64, pos, oxt_u64(L, (uint64_t)E)), v, zero);
    return;
  }
  case OXI_T_ID: L->sval[in->id] = oxt_tile_id(L, in->mem.index, in->index); return;
  case OXI_T_COUNT: L->sval[in->id] = oxt_tile_count(L, in->mem.index, in->index); return;
  default: break;
  }
  if (in->tshape) {
    s_elementwise(L, in);
    return;
  }
  oxi_instr *c = oxt_clone(L, in);
  if (in->id >= 0)
    L->sval[in->id] = c;
}
