/* lower.c - the tile lowering, milestone 1 (docs/tile-design.md).
 *
 * Layout. A kernel runs T threads per block (a power of two up to 1024),
 * chosen from its largest tile. A tile of E elements whose last dim has L
 * elements is dealt out in chunks of VEC contiguous elements (VEC = min(4, L)):
 * chunk c (elements c*VEC .. c*VEC+VEC-1, in row-major order) belongs to thread
 * c mod T, so each thread holds J*VEC elements (J = ceil(E / (VEC*T))) and a
 * warp's accesses to a row are contiguous. Every tile of one shape has the
 * same layout, so elementwise ops need no data movement; with no reductions or
 * reshapes yet (milestone 2), that is the only layout needed.
 *
 * Each tile value becomes J*VEC scalar values per thread (the loops are
 * unrolled here; LLVM keeps the values in registers). Loads and stores are
 * predicated per element on the tensor's bounds (the edge tiles of
 * non-divisible dims), and on the chunk existing when a tile has fewer chunks
 * than the block has threads. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tile/tile.h"

#define MAX_PER_THREAD 64 /* elements of one tile per thread, to stay in registers */

typedef struct lowerer {
  oxi_module *m;
  const oxi_kernel *k; /* the tile kernel, read */
  oxi_kernel *nk;      /* the lowered kernel, built */
  oxi_block *cur;
  int T;               /* threads per block */
  oxi_instr **sval;    /* old value id -> new scalar value */
  oxi_instr ***tval;   /* old value id -> new element values of this thread */
  oxi_block **nb;      /* old block -> its first new block */
  oxi_instr *t;        /* this thread's index in the block (u64) */
  int scratch[OX_DTYPE_COUNT]; /* shared array per dtype for layout changes, + 1; 0 = none */
  bool *everywhere;    /* old value id -> a one-element tile whose value every thread holds */
} lowerer;

typedef struct layout {
  int64_t E;   /* elements */
  int VEC;     /* contiguous elements per chunk */
  int J;       /* chunks per thread */
  bool guard;  /* some threads have fewer chunks than J */
} layout;

static int64_t elems(const oxi_tshape *s) {
  int64_t e = 1;
  for (int d = 0; d < s->rank; d++)
    e *= s->dims[d];
  return e;
}

static int log2i(int64_t v) {
  int l = 0;
  while (((int64_t)1 << l) < v)
    l++;
  return l;
}

static layout layout_of(const lowerer *L, const oxi_tshape *s) {
  layout y;
  y.E = elems(s);
  int64_t last = s->dims[s->rank - 1];
  y.VEC = last < 4 ? (int)last : 4;
  int64_t chunks = y.E / y.VEC;
  y.J = (int)((chunks + L->T - 1) / L->T);
  y.guard = (int64_t)y.J * L->T != chunks;
  return y;
}

/* ------------------------------------------------------------ emission */

static oxi_instr *emit(lowerer *L, oxi_op op, oxi_type t) { return oxi_emit(L->m, L->nk, L->cur, op, t); }

static oxi_instr *cu64(lowerer *L, uint64_t v) {
  oxi_instr *c = emit(L, OXI_CONST, OX_U64);
  c->imm = v;
  return c;
}

static oxi_instr *bin(lowerer *L, int sub, oxi_type t, oxi_instr *a, oxi_instr *b) {
  oxi_instr *in = emit(L, sub >= 100 ? OXI_CMP : OXI_BIN, sub >= 100 ? OX_BOOL : t);
  in->sub = sub >= 100 ? sub - 100 : sub;
  in->ops[0] = a;
  in->ops[1] = b;
  in->nops = 2;
  return in;
}
#define LT (100 + OXI_LT)

static oxi_instr *sreg64(lowerer *L, int which) {
  oxi_instr *r = emit(L, OXI_SREG, OX_U32);
  r->sub = which;
  oxi_instr *c = emit(L, OXI_CAST, OX_U64);
  c->ops[0] = r;
  c->nops = 1;
  return c;
}

static oxi_instr *param_info(lowerer *L, oxi_op op, int param, int axis) {
  oxi_instr *in = emit(L, op, OX_U64);
  in->mem.kind = OXI_MEM_PARAM;
  in->mem.index = param;
  in->index = axis;
  return in;
}

/* Number of tiles along `axis` of output tile parameter `param`. */
static oxi_instr *tile_count(lowerer *L, int param, int axis) {
  const oxi_param *p = L->k->params.items[param];
  int64_t s = p->dims[axis];
  oxi_instr *dim = param_info(L, OXI_DIM, param, axis);
  return bin(L, OXI_SHR, OX_U64, bin(L, OXI_ADD, OX_U64, dim, cu64(L, (uint64_t)(s - 1))),
             cu64(L, (uint64_t)log2i(s)));
}

/* This block's tile coordinate along `axis`: the last axis is blockIdx.x, the
 * one before blockIdx.y, the third from the end blockIdx.z; a fourth axis
 * shares blockIdx.z with the third (the host folds them). */
static oxi_instr *tile_id(lowerer *L, int param, int axis) {
  const oxi_param *p = L->k->params.items[param];
  int from_end = p->rank - 1 - axis;
  if (from_end < 2)
    return sreg64(L, from_end == 0 ? OXI_SREG_CTAID_X : OXI_SREG_CTAID_Y);
  oxi_instr *z = sreg64(L, OXI_SREG_CTAID_Z);
  if (p->rank < 4)
    return z;
  oxi_instr *g1 = tile_count(L, param, 1); /* rank 4: z = axis0 * tiles(axis1) + axis1 */
  return axis == 1 ? bin(L, OXI_REM, OX_U64, z, g1) : bin(L, OXI_DIV, OX_U64, z, g1);
}

static oxi_instr *mapped(lowerer *L, const oxi_instr *old) {
  assert(old->id >= 0 && L->sval[old->id]);
  return L->sval[old->id];
}

static oxi_instr **elements(lowerer *L, const oxi_instr *old) {
  assert(old->id >= 0 && L->tval[old->id]);
  return L->tval[old->id];
}

/* Copies scalar instruction `in` into the new kernel, its operands mapped. */
static oxi_instr *clone(lowerer *L, const oxi_instr *in) {
  oxi_instr *c = emit(L, in->op, in->type);
  c->sub = in->sub;
  c->mem = in->mem;
  c->index = in->index;
  c->imm = in->imm;
  c->fimm = in->fimm;
  c->check = in->check;
  c->nuw = in->nuw;
  c->nops = in->nops;
  for (int i = 0; i < in->nops; i++)
    c->ops[i] = mapped(L, in->ops[i]);
  for (int i = 0; i < 2; i++)
    c->target[i] = in->target[i] ? L->nb[in->target[i]->id] : NULL;
  return c;
}

/* ----------------------------------------------------- element addressing */

typedef struct element_site {
  oxi_instr *inb;   /* the element exists and lies inside the tensor */
  oxi_instr *index; /* its offset in elements from the tensor's start */
} element_site;

/* For every element this thread holds of a tile of `shape` at tile coordinates
 * `coord` (new u64 values) of tensor parameter `param`: where it is and
 * whether it is inside the tensor. */
static void sites(lowerer *L, const oxi_tshape *shape, oxi_instr *const *coord, int param,
                  element_site *out) {
  layout y = layout_of(L, shape);
  int rank = shape->rank;
  oxi_instr *base[OXI_MAX_RANK], *dim[OXI_MAX_RANK], *stride[OXI_MAX_RANK];
  for (int d = 0; d < rank; d++) {
    base[d] = bin(L, OXI_SHL, OX_U64, coord[d], cu64(L, (uint64_t)log2i(shape->dims[d])));
    dim[d] = param_info(L, OXI_DIM, param, d);
    stride[d] = param_info(L, OXI_STRIDE, param, d);
  }
  oxi_instr *tv = bin(L, OXI_MUL, OX_U64, L->t, cu64(L, (uint64_t)y.VEC));
  int n = 0;
  for (int j = 0; j < y.J; j++)
    for (int v = 0; v < y.VEC; v++, n++) {
      oxi_instr *f = bin(L, OXI_ADD, OX_U64, tv, cu64(L, (uint64_t)((int64_t)j * L->T * y.VEC + v)));
      oxi_instr *inb = y.guard ? bin(L, LT, OX_U64, f, cu64(L, (uint64_t)y.E)) : NULL;
      oxi_instr *index = NULL;
      int64_t after = y.E;
      for (int d = 0; d < rank; d++) {
        after /= shape->dims[d];
        oxi_instr *c = bin(L, OXI_AND, OX_U64, bin(L, OXI_SHR, OX_U64, f, cu64(L, (uint64_t)log2i(after))),
                           cu64(L, (uint64_t)(shape->dims[d] - 1)));
        oxi_instr *g = bin(L, OXI_ADD, OX_U64, base[d], c);
        oxi_instr *in = bin(L, LT, OX_U64, g, dim[d]);
        inb = inb ? bin(L, OXI_AND, OX_BOOL, inb, in) : in;
        oxi_instr *term = bin(L, OXI_MUL, OX_U64, g, stride[d]);
        index = index ? bin(L, OXI_ADD, OX_U64, index, term) : term;
      }
      out[n].inb = inb;
      out[n].index = index;
    }
}

/* Tile coordinates made safe for address arithmetic: a coordinate past the
 * tensor's last tile (possibly so large that coord * size would wrap) becomes
 * the first one past the end, whose elements are all outside: a load reads
 * the padding, a store writes nothing. */
static void clamp_coords(lowerer *L, const oxi_tshape *shape, oxi_instr **coord, int param) {
  for (int d = 0; d < shape->rank; d++) {
    int64_t sz = shape->dims[d];
    oxi_instr *dim = param_info(L, OXI_DIM, param, d);
    oxi_instr *past = bin(L, OXI_SHR, OX_U64, bin(L, OXI_ADD, OX_U64, dim, cu64(L, (uint64_t)(sz - 1))),
                          cu64(L, (uint64_t)log2i(sz)));
    oxi_instr *ok = bin(L, 100 + OXI_LE, OX_U64, coord[d], past);
    oxi_instr *sel = emit(L, OXI_SELECT, OX_U64);
    sel->ops[0] = ok;
    sel->ops[1] = coord[d];
    sel->ops[2] = past;
    sel->nops = 3;
    coord[d] = sel;
  }
}

/* Whether the whole tile at `coord` lies inside tensor `param` (and every
 * thread's chunks exist): then no element needs a predicate. The test is the
 * same for every thread of the block, so the branch on it does not diverge.
 * NULL when the layout always needs predicates. */
static oxi_instr *whole_tile_inside(lowerer *L, const oxi_tshape *shape, oxi_instr *const *coord,
                                    int param) {
  if (layout_of(L, shape).guard)
    return NULL;
  oxi_instr *all = NULL;
  for (int d = 0; d < shape->rank; d++) {
    oxi_instr *end = bin(L, OXI_SHL, OX_U64, bin(L, OXI_ADD, OX_U64, coord[d], cu64(L, 1)),
                         cu64(L, (uint64_t)log2i(shape->dims[d])));
    oxi_instr *in = bin(L, 100 + OXI_LE, OX_U64, end, param_info(L, OXI_DIM, param, d));
    all = all ? bin(L, OXI_AND, OX_BOOL, all, in) : in;
  }
  return all;
}

/* Runs `then` (a load or a store) only when `cond` holds: splits the block. */
static oxi_block *begin_if(lowerer *L, oxi_instr *cond, oxi_block **join) {
  oxi_block *then = oxi_block_new(L->m, L->nk);
  *join = oxi_block_new(L->m, L->nk);
  oxi_instr *br = emit(L, OXI_CONDBR, OXI_VOID);
  br->ops[0] = cond;
  br->nops = 1;
  br->target[0] = then;
  br->target[1] = *join;
  L->cur = then;
  return then;
}

static void end_if(lowerer *L, oxi_block *join) {
  oxi_instr *br = emit(L, OXI_BR, OXI_VOID);
  br->target[0] = join;
  L->cur = join;
}

/* ------------------------------------------------------------ tile ops */

static oxi_instr **new_elements(lowerer *L, const oxi_tshape *s) {
  layout y = layout_of(L, s);
  return oxb_alloc(L->m->arena, sizeof(oxi_instr *) * (size_t)(y.J * y.VEC));
}

static oxi_instr *load_at(lowerer *L, const oxi_instr *in, oxi_instr *index) {
  oxi_instr *ld = emit(L, OXI_LOAD, in->type);
  ld->mem = in->mem;
  ld->ops[0] = index;
  ld->nops = 1;
  return ld;
}

static void set_slot(lowerer *L, int slot, oxi_instr *v) {
  oxi_instr *set = emit(L, OXI_VAR_SET, OXI_VOID);
  set->index = slot;
  set->ops[0] = v;
  set->nops = 1;
}

/* A tile load: straight-line loads when the whole tile is inside the tensor
 * (independent loads the GPU keeps in flight together), else one predicated
 * load per element with the padding outside. */
static void lower_load(lowerer *L, const oxi_instr *in) {
  layout y = layout_of(L, in->tshape);
  int n = y.J * y.VEC;
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < in->nops; d++)
    coord[d] = mapped(L, in->ops[d]);
  element_site *es = malloc(sizeof *es * (size_t)n);
  int *slot = malloc(sizeof *slot * (size_t)n);
  clamp_coords(L, in->tshape, coord, in->mem.index);
  sites(L, in->tshape, coord, in->mem.index, es);
  oxi_instr *full = whole_tile_inside(L, in->tshape, coord, in->mem.index);
  for (int e = 0; e < n; e++)
    slot[e] = oxi_slot_new(L->m, L->nk, in->type);
  oxi_block *done = oxi_block_new(L->m, L->nk), *slow;
  if (full) {
    begin_if(L, full, &slow); /* the fast path: straight-line loads */
    for (int e = 0; e < n; e++)
      set_slot(L, slot[e], load_at(L, in, es[e].index));
    end_if(L, done);
    L->cur = slow;
  }
  for (int e = 0; e < n; e++) {
    oxi_instr *pad = emit(L, OXI_CONST, in->type);
    pad->imm = in->imm;
    pad->fimm = in->fimm;
    set_slot(L, slot[e], pad);
    oxi_block *join;
    begin_if(L, es[e].inb, &join);
    set_slot(L, slot[e], load_at(L, in, es[e].index));
    end_if(L, join);
  }
  end_if(L, done);
  oxi_instr **out = new_elements(L, in->tshape);
  for (int e = 0; e < n; e++) {
    out[e] = emit(L, OXI_VAR_GET, in->type);
    out[e]->index = slot[e];
  }
  free(es);
  free(slot);
  L->tval[in->id] = out;
}

static void store_at(lowerer *L, const oxi_instr *in, oxi_instr *index, oxi_instr *v) {
  oxi_instr *st = emit(L, OXI_STORE, OXI_VOID);
  st->mem = in->mem;
  st->ops[0] = index;
  st->ops[1] = v;
  st->nops = 2;
}

/* A tile store into this block's output tile, straight-line or predicated
 * like a load. */
static void lower_store(lowerer *L, const oxi_instr *in) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  const oxi_tshape *s = in->ops[0]->tshape;
  layout y = layout_of(L, s);
  int n = y.J * y.VEC;
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < p->rank; d++)
    coord[d] = tile_id(L, in->mem.index, d);
  element_site *es = malloc(sizeof *es * (size_t)n);
  clamp_coords(L, s, coord, in->mem.index);
  sites(L, s, coord, in->mem.index, es);
  oxi_instr *full = whole_tile_inside(L, s, coord, in->mem.index);
  oxi_instr **v = elements(L, in->ops[0]);
  oxi_block *done = oxi_block_new(L->m, L->nk), *slow;
  if (full) {
    begin_if(L, full, &slow); /* the fast path: straight-line stores */
    for (int e = 0; e < n; e++)
      store_at(L, in, es[e].index, v[e]);
    end_if(L, done);
    L->cur = slow;
  }
  for (int e = 0; e < n; e++) {
    oxi_block *join;
    begin_if(L, es[e].inb, &join);
    store_at(L, in, es[e].index, v[e]);
    end_if(L, join);
  }
  end_if(L, done);
  free(es);
}

static void lower_elementwise(lowerer *L, const oxi_instr *in) {
  layout y = layout_of(L, in->tshape);
  oxi_instr **out = new_elements(L, in->tshape);
  for (int e = 0; e < y.J * y.VEC; e++) {
    oxi_instr *c = emit(L, in->op, in->type);
    c->sub = in->sub;
    c->nops = in->nops;
    for (int i = 0; i < in->nops; i++)
      c->ops[i] = in->ops[i]->tshape ? elements(L, in->ops[i])[e] : mapped(L, in->ops[i]);
    out[e] = c;
  }
  L->tval[in->id] = out;
}

/* ------------------------------------------------- through shared memory */

/* Reductions and broadcasts move elements between threads: every thread
 * writes the tile's elements it holds to a shared scratch array at their
 * row-major position, the block synchronizes, and each thread reads what its
 * elements of the result need. One scratch array per dtype serves every such
 * step of the kernel; a barrier after each step frees it for the next. */

static oxi_mem scratch(lowerer *L, oxi_type t) {
  oxi_mem m = {OXI_MEM_SHARED, L->scratch[t] - 1};
  assert(L->scratch[t] > 0);
  return m;
}

static void barrier(lowerer *L) {
  emit(L, OXI_BARRIER, OXI_VOID);
  L->nk->uses_sync = true;
}

/* f, the row-major position of each element this thread holds of a tile of
 * `shape`, and whether it exists. */
static void positions(lowerer *L, const oxi_tshape *shape, oxi_instr **f, oxi_instr **ok) {
  layout y = layout_of(L, shape);
  oxi_instr *tv = bin(L, OXI_MUL, OX_U64, L->t, cu64(L, (uint64_t)y.VEC));
  int n = 0;
  for (int j = 0; j < y.J; j++)
    for (int v = 0; v < y.VEC; v++, n++) {
      f[n] = bin(L, OXI_ADD, OX_U64, tv, cu64(L, (uint64_t)((int64_t)j * L->T * y.VEC + v)));
      ok[n] = y.guard ? bin(L, LT, OX_U64, f[n], cu64(L, (uint64_t)y.E)) : NULL;
    }
}

static void shared_store(lowerer *L, oxi_mem m, oxi_instr *index, oxi_instr *v, oxi_instr *ok) {
  oxi_block *join = NULL;
  if (ok)
    begin_if(L, ok, &join);
  oxi_instr *st = emit(L, OXI_STORE, OXI_VOID);
  st->mem = m;
  st->ops[0] = index;
  st->ops[1] = v;
  st->nops = 2;
  if (ok)
    end_if(L, join);
}

static oxi_instr *shared_load(lowerer *L, oxi_mem m, oxi_type t, oxi_instr *index) {
  oxi_instr *ld = emit(L, OXI_LOAD, t);
  ld->mem = m;
  ld->ops[0] = index;
  ld->nops = 1;
  return ld;
}

/* Position f, or 0 for an element the layout's guard says does not exist:
 * shared loads are unchecked, so every address must stay in the scratch. */
static oxi_instr *existing(lowerer *L, oxi_instr *f, oxi_instr *ok) {
  if (!ok)
    return f;
  oxi_instr *zero = cu64(L, 0);
  oxi_instr *sel = emit(L, OXI_SELECT, OX_U64);
  sel->ops[0] = ok;
  sel->ops[1] = f;
  sel->ops[2] = zero;
  sel->nops = 3;
  return sel;
}

/* Writes the elements this thread holds of tile value `old` to scratch. */
static void spill(lowerer *L, const oxi_instr *old) {
  const oxi_tshape *s = old->tshape;
  layout y = layout_of(L, s);
  int n = y.J * y.VEC;
  oxi_instr **f = malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  positions(L, s, f, ok);
  oxi_instr **v = elements(L, old);
  for (int e = 0; e < n; e++)
    shared_store(L, scratch(L, old->type), f[e], v[e], ok[e]);
  free(f);
}

/* A broadcast: each result element reads the source element at its
 * position with the broadcast dims at 0. */
static void lower_broadcast(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *src = in->ops[0]->tshape, *dst = in->tshape;
  if (L->everywhere[in->ops[0]->id]) { /* a value every thread already holds */
    layout y = layout_of(L, dst);
    oxi_instr **out = new_elements(L, dst), *v = elements(L, in->ops[0])[0];
    for (int e = 0; e < y.J * y.VEC; e++)
      out[e] = v;
    L->tval[in->id] = out;
    return;
  }
  spill(L, in->ops[0]);
  barrier(L);
  layout y = layout_of(L, dst);
  int n = y.J * y.VEC;
  oxi_instr **f = malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  positions(L, dst, f, ok);
  oxi_instr **out = new_elements(L, dst);
  int64_t after = elems(dst), src_after = elems(src);
  int64_t shift[OXI_MAX_RANK], src_stride[OXI_MAX_RANK];
  for (int d = 0; d < dst->rank; d++) {
    after /= dst->dims[d];
    src_after /= src->dims[d];
    shift[d] = log2i(after);
    src_stride[d] = src_after;
  }
  for (int e = 0; e < n; e++) {
    oxi_instr *g = NULL;
    for (int d = 0; d < dst->rank; d++) {
      if (src->dims[d] == 1)
        continue;
      oxi_instr *c = bin(L, OXI_AND, OX_U64, bin(L, OXI_SHR, OX_U64, f[e], cu64(L, (uint64_t)shift[d])),
                         cu64(L, (uint64_t)(dst->dims[d] - 1)));
      oxi_instr *term = bin(L, OXI_MUL, OX_U64, c, cu64(L, (uint64_t)src_stride[d]));
      g = g ? bin(L, OXI_ADD, OX_U64, g, term) : term;
    }
    /* a nonexistent element (the layout's guard) reads position 0: harmless */
    out[e] = shared_load(L, scratch(L, in->type), in->type, g ? g : cu64(L, 0));
  }
  free(f);
  barrier(L);
  L->tval[in->id] = out;
}

/* Reshape and permute: the result element at row-major position f reads
 * the operand element at position src(f) through scratch (for a reshape the
 * same f; for a permute, f's coordinates reordered). */
static void lower_move(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *src = in->ops[0]->tshape, *dst = in->tshape;
  layout ys = layout_of(L, src), yd = layout_of(L, dst);
  if (in->op == OXI_T_RESHAPE && ys.VEC == yd.VEC && ys.J == yd.J && ys.guard == yd.guard) {
    L->tval[in->id] = elements(L, in->ops[0]); /* the same elements in the same threads */
    return;
  }
  spill(L, in->ops[0]);
  barrier(L);
  int n = yd.J * yd.VEC;
  oxi_instr **f = malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  positions(L, dst, f, ok);
  oxi_instr **out = new_elements(L, dst);
  int64_t dshift[OXI_MAX_RANK], sstride[OXI_MAX_RANK];
  int64_t after = elems(dst), sa = elems(src);
  for (int d = 0; d < dst->rank; d++) {
    after /= dst->dims[d];
    dshift[d] = log2i(after);
  }
  for (int d = 0; d < src->rank; d++) {
    sa /= src->dims[d];
    sstride[d] = sa;
  }
  for (int e = 0; e < n; e++) {
    oxi_instr *g = existing(L, f[e], ok[e]);
    if (in->op == OXI_T_PERMUTE) {
      oxi_instr *pos = NULL;
      for (int d = 0; d < dst->rank; d++) {
        int sd = (int)((in->imm >> (4 * d)) & 15);
        oxi_instr *c = bin(L, OXI_AND, OX_U64, bin(L, OXI_SHR, OX_U64, g, cu64(L, (uint64_t)dshift[d])),
                           cu64(L, (uint64_t)(dst->dims[d] - 1)));
        oxi_instr *term = bin(L, OXI_MUL, OX_U64, c, cu64(L, (uint64_t)sstride[sd]));
        pos = pos ? bin(L, OXI_ADD, OX_U64, pos, term) : term;
      }
      g = pos;
    }
    out[e] = shared_load(L, scratch(L, in->type), in->type, g);
  }
  free(f);
  barrier(L);
  L->tval[in->id] = out;
}

/* iota: each element's coordinate along the axis, from its position. */
static void lower_iota(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->tshape;
  layout y = layout_of(L, s);
  int n = y.J * y.VEC;
  oxi_instr **f = malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  positions(L, s, f, ok);
  int64_t after = elems(s);
  for (int d = 0; d <= in->index; d++)
    after /= s->dims[d];
  oxi_instr **out = new_elements(L, s);
  for (int e = 0; e < n; e++) {
    oxi_instr *c = bin(L, OXI_AND, OX_U64, bin(L, OXI_SHR, OX_U64, f[e], cu64(L, (uint64_t)log2i(after))),
                       cu64(L, (uint64_t)(s->dims[in->index] - 1)));
    oxi_instr *cv = emit(L, OXI_CAST, in->type);
    cv->ops[0] = c;
    cv->nops = 1;
    out[e] = cv;
  }
  free(f);
  L->tval[in->id] = out;
}

/* The identity of reduction `sub` for type t. */
static oxi_instr *identity(lowerer *L, int sub, oxi_type t) {
  oxi_instr *c = emit(L, OXI_CONST, t);
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

static oxi_instr *combine(lowerer *L, int sub, oxi_type t, oxi_instr *a, oxi_instr *b) {
  if (sub == OXI_ADD || sub == OXI_MUL)
    return bin(L, sub, t, a, b);
  oxi_instr *m = emit(L, OXI_MATH, t);
  m->sub = sub == OXI_MIN ? OXI_M_MIN : OXI_M_MAX;
  m->ops[0] = a;
  m->ops[1] = b;
  m->nops = 2;
  return m;
}

/* acc = fold of scratch[base + k * stride] for k = first, first + step, ...
 * below `count`, as an IR loop. */
static oxi_instr *fold_loop(lowerer *L, int sub, oxi_type t, oxi_mem m, oxi_instr *base,
                            int64_t stride, oxi_instr *first, int64_t step, int64_t count) {
  int ks = oxi_slot_new(L->m, L->nk, OX_U64), as = oxi_slot_new(L->m, L->nk, t);
  set_slot(L, ks, first);
  set_slot(L, as, identity(L, sub, t));
  oxi_block *head = oxi_block_new(L->m, L->nk), *body = oxi_block_new(L->m, L->nk),
            *done = oxi_block_new(L->m, L->nk);
  end_if(L, head);
  oxi_instr *k = emit(L, OXI_VAR_GET, OX_U64);
  k->index = ks;
  oxi_instr *more = bin(L, LT, OX_U64, k, cu64(L, (uint64_t)count));
  oxi_instr *br = emit(L, OXI_CONDBR, OXI_VOID);
  br->ops[0] = more;
  br->nops = 1;
  br->target[0] = body;
  br->target[1] = done;
  L->cur = body;
  oxi_instr *k2 = emit(L, OXI_VAR_GET, OX_U64);
  k2->index = ks;
  oxi_instr *idx = bin(L, OXI_ADD, OX_U64, base, bin(L, OXI_MUL, OX_U64, k2, cu64(L, (uint64_t)stride)));
  oxi_instr *acc = emit(L, OXI_VAR_GET, t);
  acc->index = as;
  set_slot(L, as, combine(L, sub, t, acc, shared_load(L, m, t, idx)));
  oxi_instr *nk = bin(L, OXI_ADD, OX_U64, k2, cu64(L, (uint64_t)step));
  nk->nuw = true;
  set_slot(L, ks, nk);
  end_if(L, head);
  L->cur = done;
  oxi_instr *r = emit(L, OXI_VAR_GET, t);
  r->index = as;
  return r;
}

/* A reduction of a whole tile to one element, the way a row reduction for a
 * softmax or a norm wants it: each thread folds its own elements in
 * registers, the warps fold their lanes with butterfly shuffles, and the
 * warps' results meet in shared memory, where every thread folds them: so
 * every thread holds the result, and broadcasting it back costs nothing. */
static void reduce_all(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *src = in->ops[0]->tshape;
  int sub = in->sub;
  oxi_type t = in->type;
  layout y = layout_of(L, src);
  int n = y.J * y.VEC;
  oxi_instr **f = malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  positions(L, src, f, ok);
  oxi_instr **v = elements(L, in->ops[0]);
  oxi_instr *acc = NULL;
  for (int e = 0; e < n; e++) {
    oxi_instr *x = v[e];
    if (ok[e]) { /* an element the layout's guard says does not exist */
      oxi_instr *id = identity(L, sub, t);
      oxi_instr *sel = emit(L, OXI_SELECT, t);
      sel->ops[0] = ok[e];
      sel->ops[1] = x;
      sel->ops[2] = id;
      sel->nops = 3;
      x = sel;
    }
    acc = acc ? combine(L, sub, t, acc, x) : x;
  }
  free(f);
  for (int off = 16; off >= 1; off /= 2) {
    oxi_instr *lane = emit(L, OXI_CONST, OX_U32);
    lane->imm = (uint64_t)off;
    oxi_instr *sh = emit(L, OXI_SHFL, t);
    sh->sub = 3; /* xor */
    sh->ops[0] = acc;
    sh->ops[1] = lane;
    sh->nops = 2;
    acc = combine(L, sub, t, acc, sh);
  }
  L->nk->uses_sync = true;
  oxi_mem m = scratch(L, t);
  oxi_instr *first = bin(L, 100 + OXI_EQ, OX_U64, bin(L, OXI_AND, OX_U64, L->t, cu64(L, 31)), cu64(L, 0));
  shared_store(L, m, bin(L, OXI_SHR, OX_U64, L->t, cu64(L, 5)), acc, first);
  barrier(L);
  oxi_instr *res = NULL;
  for (int w = 0; w < L->T / 32; w++) {
    oxi_instr *x = shared_load(L, m, t, cu64(L, (uint64_t)w));
    res = res ? combine(L, sub, t, res, x) : x;
  }
  barrier(L);
  oxi_instr **out = new_elements(L, in->tshape);
  out[0] = res;
  L->tval[in->id] = out;
  L->everywhere[in->id] = true;
}

/* A reduction along axis a. With R results and T threads: when R < T, each
 * result gets G = T / R threads, each folding every G-th element of its row,
 * and the G partials are folded from scratch; else each thread folds whole
 * rows. The results then land in the result's layout through scratch. */
static void lower_reduce(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *src = in->ops[0]->tshape, *dst = in->tshape;
  int a = in->index, sub = in->sub;
  oxi_type t = in->type;
  oxi_mem m = scratch(L, t);
  int64_t len = src->dims[a], inner = 1, R = elems(dst);
  for (int d = a + 1; d < src->rank; d++)
    inner *= src->dims[d];
  if (R == 1 && L->T >= 32 && (ox_dtype_size((ox_dtype)t) == 4 || ox_dtype_size((ox_dtype)t) == 8)) {
    reduce_all(L, in);
    return;
  }
  spill(L, in->ops[0]);
  barrier(L);
  /* the position in the source of result r's first element */
#define ROW_BASE(r)                                                                               \
  bin(L, OXI_ADD, OX_U64,                                                                         \
      bin(L, OXI_SHL, OX_U64, bin(L, OXI_SHR, OX_U64, (r), cu64(L, (uint64_t)log2i(inner))),       \
          cu64(L, (uint64_t)log2i(inner * len))),                                                \
      bin(L, OXI_AND, OX_U64, (r), cu64(L, (uint64_t)(inner - 1))))
  layout y = layout_of(L, dst);
  int n = y.J * y.VEC;
  oxi_instr **f = malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxi_instr **out = new_elements(L, dst);
  if (R < L->T) {
    int64_t G = L->T / R;
    oxi_instr *r = bin(L, OXI_SHR, OX_U64, L->t, cu64(L, (uint64_t)log2i(G)));
    oxi_instr *g = bin(L, OXI_AND, OX_U64, L->t, cu64(L, (uint64_t)(G - 1)));
    oxi_instr *part = fold_loop(L, sub, t, m, ROW_BASE(r), inner, g, G, len);
    barrier(L); /* every thread has read its row elements */
    shared_store(L, m, L->t, part, NULL);
    barrier(L);
    positions(L, dst, f, ok);
    for (int e = 0; e < n; e++)
      out[e] = fold_loop(L, sub, t, m, bin(L, OXI_MUL, OX_U64, existing(L, f[e], ok[e]), cu64(L, (uint64_t)G)),
                         1, cu64(L, 0), 1, G);
  } else {
    /* thread t folds results t, t + T, ...: R / T of them */
    int64_t per = R / L->T;
    oxi_instr **res = malloc(sizeof *res * (size_t)per);
    for (int64_t i = 0; i < per; i++) {
      oxi_instr *r = bin(L, OXI_ADD, OX_U64, L->t, cu64(L, (uint64_t)(i * L->T)));
      res[i] = fold_loop(L, sub, t, m, ROW_BASE(r), inner, cu64(L, 0), 1, len);
    }
    barrier(L);
    for (int64_t i = 0; i < per; i++)
      shared_store(L, m, bin(L, OXI_ADD, OX_U64, L->t, cu64(L, (uint64_t)(i * L->T))), res[i], NULL);
    free(res);
    barrier(L);
    positions(L, dst, f, ok);
    for (int e = 0; e < n; e++)
      out[e] = shared_load(L, m, t, existing(L, f[e], ok[e]));
  }
#undef ROW_BASE
  free(f);
  barrier(L);
  L->tval[in->id] = out;
}

static void lower_instr(lowerer *L, const oxi_instr *in) {
  switch (in->op) {
  case OXI_T_LOAD: lower_load(L, in); return;
  case OXI_T_STORE: lower_store(L, in); return;
  case OXI_T_SPLAT: {
    layout y = layout_of(L, in->tshape);
    oxi_instr **out = new_elements(L, in->tshape);
    for (int e = 0; e < y.J * y.VEC; e++)
      out[e] = mapped(L, in->ops[0]);
    L->tval[in->id] = out;
    return;
  }
  case OXI_T_REDUCE: lower_reduce(L, in); return;
  case OXI_T_BROADCAST: lower_broadcast(L, in); return;
  case OXI_T_RESHAPE:
  case OXI_T_PERMUTE: lower_move(L, in); return;
  case OXI_T_IOTA: lower_iota(L, in); return;
  case OXI_T_ID: L->sval[in->id] = tile_id(L, in->mem.index, in->index); return;
  case OXI_T_COUNT: L->sval[in->id] = tile_count(L, in->mem.index, in->index); return;
  default: break;
  }
  if (in->tshape) {
    lower_elementwise(L, in);
    return;
  }
  oxi_instr *c = clone(L, in);
  if (in->id >= 0)
    L->sval[in->id] = c;
}

ox_status oxt_lower(oxi_module *m, oxi_kernel *k) {
  assert(k->is_tile);
  /* the block size: from the largest tile, so that each thread holds a few
   * 16-byte chunks of it */
  int64_t emax = 1;
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->tshape && elems(in->tshape) > emax)
        emax = elems(in->tshape);
    }
  }
  int64_t T = emax / 4;
  if (T < 1)
    T = 1;
  if (T > 128)
    T = 128;
  while (T < 1024 && emax / T > MAX_PER_THREAD)
    T *= 2;
  if (emax / T > MAX_PER_THREAD)
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         "%s:%d:%d: kernel '%s' has a tile of %lld elements; this version of the "
                         "tile lowering handles at most %d",
                         m->filename, k->line, k->col, k->name, (long long)emax,
                         1024 * MAX_PER_THREAD);
  lowerer L = {0};
  L.m = m;
  L.k = k;
  L.T = (int)T;
  oxi_kernel *nk = oxb_alloc(m->arena, sizeof *nk);
  *nk = *k;
  nk->blocks.items = NULL;
  nk->blocks.len = nk->blocks.cap = 0;
  L.nk = nk;
  L.sval = calloc((size_t)k->next_id + 1, sizeof *L.sval);
  L.tval = calloc((size_t)k->next_id + 1, sizeof *L.tval);
  L.everywhere = calloc((size_t)k->next_id + 1, sizeof *L.everywhere);
  L.nb = calloc((size_t)k->blocks.len, sizeof *L.nb);
  /* scratch for reductions and broadcasts: per dtype, the most elements one
   * step spills (at least one per thread, for partial results) */
  int64_t need[OX_DTYPE_COUNT] = {0};
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->op != OXI_T_REDUCE && in->op != OXI_T_BROADCAST && in->op != OXI_T_RESHAPE &&
          in->op != OXI_T_PERMUTE)
        continue;
      int64_t e = elems(in->ops[0]->tshape);
      e = e > T ? e : T;
      need[in->type] = need[in->type] > e ? need[in->type] : e;
    }
  }
  for (int t = 0; t < OX_DTYPE_COUNT; t++) {
    if (!need[t])
      continue;
    oxi_shared *sh = oxb_alloc(m->arena, sizeof *sh);
    sh->dtype = (ox_dtype)t;
    sh->count = need[t];
    sh->offset = (nk->shared_bytes + 15) & ~(int64_t)15;
    nk->shared_bytes = sh->offset + sh->count * (int64_t)ox_dtype_size((ox_dtype)t);
    oxb_vec_push(m->arena, &nk->shared, sh);
    L.scratch[t] = nk->shared.len;
  }
  if (nk->shared_bytes > 48 * 1024) {
    free(L.sval);
    free(L.tval);
    free(L.everywhere);
    free(L.nb);
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         "%s:%d:%d: kernel '%s' needs %lld bytes of shared memory for its reductions "
                         "and broadcasts; this version of the tile lowering has 48 KiB",
                         m->filename, k->line, k->col, k->name, (long long)nk->shared_bytes);
  }
  for (int bi = 0; bi < k->blocks.len; bi++)
    L.nb[bi] = oxi_block_new(m, nk);
  for (int bi = 0; bi < k->blocks.len; bi++) {
    L.cur = L.nb[bi];
    if (bi == 0) /* blocks are (T, 1, 1): the thread's index is tid.x */
      L.t = sreg64(&L, OXI_SREG_TID_X);
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++)
      lower_instr(&L, b->instrs.items[ii]);
  }
  free(L.sval);
  free(L.tval);
  free(L.everywhere);
  free(L.nb);
  k->blocks = nk->blocks;
  k->slots = nk->slots;
  k->next_id = nk->next_id;
  k->shared = nk->shared;
  k->shared_bytes = nk->shared_bytes;
  k->uses_sync = nk->uses_sync;
  k->is_tile = false;
  k->block[0] = (int)T;
  k->block[1] = k->block[2] = 1;
  return OX_OK;
}
