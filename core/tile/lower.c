/* lower.c - the tile lowering (docs/tile-design.md). For CUDA, every tile
 * value becomes the scalar values one thread holds of it, in one of two
 * layouts (below). For the CPU, a block is one thread and every tile value a
 * buffer (the serial lowering, its own section further down).
 *
 * Blocked layout (every tile, unless said otherwise). A kernel runs T threads
 * per block (a power of two up to 1024), chosen from its largest tile. A tile
 * of E elements whose last dim has L elements is dealt out in chunks of VEC
 * contiguous elements (VEC = min(4, L)): chunk c (elements c*VEC ..
 * c*VEC+VEC-1, in row-major order) belongs to thread c mod T, so each thread
 * holds J*VEC elements (J = ceil(E / (VEC*T))) and a warp's accesses to a row
 * are contiguous. Every tile of one shape has the same blocked layout, so
 * elementwise ops need no data movement.
 *
 * Mma layout (the struct below): the results of `dot` on tensor cores
 * (bf16/f16/tf32 inputs), elementwise ops on them, and `let mut` tiles they
 * are assigned to. A value wanted in the other layout moves through shared
 * memory; a splat (every element one scalar) fits both for free.
 *
 * The loops over a thread's elements are unrolled here; LLVM keeps the values
 * in registers. Loads and stores are predicated per element on the tensor's
 * bounds (the edge tiles of non-divisible dims), with a straight-line path
 * when the whole tile is inside. Reductions, broadcasts and shape ops move
 * elements between threads through a shared scratch array. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "front/limits.h"
#include "tile/tile.h"

#define MAX_PER_THREAD 64 /* elements of one tile per thread, to stay in registers */
#define OXT_CPU_BLOCK_MAX ((int64_t)256 << 20) /* bytes of tile values a CPU block may hold */

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
  bool *everywhere;    /* old value id -> a tile whose elements are one value, which every
                          thread holds (a splat, a full reduction, elementwise ops of them) */
  bool cuda;           /* the CUDA target: tensor cores for dot */
  bool wg;             /* tensor-core dots run on wgmma (sm_90): their results' mma layout has
                          one warp per 16 rows (dot_wg) */
  char *mma;           /* old value id -> 1: held in the mma layout (below), not the blocked one */
  char *splat;         /* old value id -> 1: every element is one scalar (any layout) */
  char *slot_mma;      /* old slot -> 1: a `let mut` tile slot held in the mma layout */
  char *direct;        /* old value id -> 1: a load only a tensor-core dot uses, which copies it
                          to shared memory itself (cp.async) */
  struct {
    int slot, stages;  /* its first slot, and its staging areas (2 to 4); 0: not pipelined */
  } *pipe;             /* old value id of a dot -> its pipeline (dot_pipeline) */
  bool pipelined;      /* some dot is: copies may be in flight at a return */
  int64_t shared_limit; /* bytes of shared memory a block may have */
  bool serial;         /* the CPU: one thread a block, tile values in buffers (s_ functions) */
  int *buf;            /* serial: old value id -> its buffer's shared array + 1 */
  oxi_instr *grouped[2]; /* rank-2 tile ids in grouped order (group_tiles), or NULL */
  int **tslots;        /* old slot -> its new slots, one per element a thread holds */
  oxi_instr **vacc;    /* old value id -> its accumulator registers (vf32) as wgmma left them,
                          maybe still being written (dot_wg); held() gives their elements */
  int *vslot;          /* old slot -> a vf32 slot + 1: a `let mut` tile held as a wgmma accumulator */
} lowerer;

/* The mma layout: the accumulator layout of mma.sync.m16n8k16. The block's
 * W warps tile an [M, N] tile as WM x WN warp tiles of wm x wn; a warp tile is
 * (wm/16) x (wn/8) mma tiles of 16 x 8, in which lane l holds rows l/4 and
 * l/4 + 8, columns 2(l%4) and 2(l%4)+1. A thread's elements, in order: for
 * each mma tile (row-major), its 4 registers. Results of `dot` on tensor
 * cores live here, and so do elementwise results of them and `let mut` tiles
 * they are assigned to, so a K loop never moves its accumulator. */
typedef struct mma_layout {
  int WM, WN;
  int64_t wm, wn;
  int n; /* elements per thread */
} mma_layout;

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

/* The mma layout of an [M, N] tile with this block's warps, if it has one:
 * warp tiles as square as the warps allow, each at least 16 x 16. With wgmma
 * (L->wg), an [M, N] tile of 16 rows a warp has warp tiles of 16 x N: the
 * accumulator of wgmma.m64nNk16, whose warp w of a warpgroup holds rows
 * 16w..16w+15 of the group's 64 in the m16n8 register order of mma.sync. */
static bool mma_layout_of(const lowerer *L, const oxi_tshape *s, mma_layout *o) {
  if (!L->cuda || s->rank != 2 || L->T < 32)
    return false;
  int W = L->T / 32;
  if (L->wg && s->dims[0] == 16 * W && s->dims[1] % 8 == 0 && s->dims[1] <= 2 * OXI_VF32_MAX) {
    o->WM = W, o->WN = 1, o->wm = 16, o->wn = s->dims[1];
    o->n = (int)(s->dims[1] / 2);
    return true;
  }
  bool found = false;
  for (int WM = 1; WM <= W; WM *= 2) {
    int WN = W / WM;
    int64_t wm = s->dims[0] / WM, wn = s->dims[1] / WN;
    if (wm < 16 || wn < 16 || wm * WM != s->dims[0] || wn * WN != s->dims[1])
      continue;
    int skew = abs(log2i(wm) - log2i(wn));
    if (!found || skew < abs(log2i(o->wm) - log2i(o->wn))) {
      o->WM = WM, o->WN = WN, o->wm = wm, o->wn = wn;
      found = true;
    }
  }
  if (found)
    o->n = (int)(o->wm / 16 * (o->wn / 8) * 4);
  return found;
}

/* Elements a thread holds of a tile of `shape` in the given layout. */
static int count_in(const lowerer *L, const oxi_tshape *shape, bool mma) {
  mma_layout ml;
  if (mma && mma_layout_of(L, shape, &ml))
    return ml.n;
  layout y = layout_of(L, shape);
  return y.J * y.VEC;
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

/* Dim or stride `axis` of tensor parameter `param`. Of a contiguous16 tensor
 * the last stride is 1 and the others are multiples of 16 bytes, which the
 * code says (so LLVM sees consecutive, aligned elements and merges their
 * accesses into 16-byte ones). */
static oxi_instr *param_info(lowerer *L, oxi_op op, int param, int axis) {
  const oxi_param *p = L->k->params.items[param];
  if (op == OXI_STRIDE && p->contiguous16 && axis == p->rank - 1)
    return cu64(L, 1);
  oxi_instr *in = emit(L, op, OX_U64);
  in->mem.kind = OXI_MEM_PARAM;
  in->mem.index = param;
  in->index = axis;
  if (op == OXI_STRIDE && p->contiguous16)
    in = bin(L, OXI_AND, OX_U64, in, cu64(L, ~(uint64_t)(16 / ox_dtype_size(p->dtype) - 1)));
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
  if (p->rank == 2 && L->grouped[axis])
    return L->grouped[axis];
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

/* OXI_WGMMA_SYNC `sub` (0: fence, 1: commit and wait, 2: wait until at most
 * `pending` groups are in flight), passing accumulator `acc` (or nothing)
 * through. */
static oxi_instr *wg_sync(lowerer *L, oxi_instr *acc, int sub, int pending) {
  oxi_instr *w = emit(L, OXI_WGMMA_SYNC, acc ? acc->type : OXI_VOID);
  w->sub = sub;
  w->imm = (uint64_t)pending;
  w->ops[0] = acc;
  w->nops = acc != NULL;
  return w;
}

/* The accumulator registers (vf32 x n) of elements v of an mma-layout tile. */
static oxi_instr *wg_pack(lowerer *L, oxi_instr **v, int n) {
  oxi_instr *acc = emit(L, OXI_CONST, oxi_vf32(n));
  for (int i = 0; i < n; i++) {
    oxi_instr *x = emit(L, OXI_VSET, oxi_vf32(n));
    x->ops[0] = acc;
    x->ops[1] = v[i];
    x->nops = 2;
    x->index = i;
    acc = x;
  }
  return acc;
}

/* The elements this thread holds of tile value `old`, in its layout. An
 * accumulator that wgmma may still be writing is waited for first, at each
 * use (the use may be in a branch that does not dominate the next one). */
static oxi_instr **unpack_acc(lowerer *L, oxi_instr *acc);

static oxi_instr **held(lowerer *L, const oxi_instr *old) {
  assert(old->id >= 0 && (L->tval[old->id] || L->vacc[old->id]));
  if (L->tval[old->id])
    return L->tval[old->id];
  return unpack_acc(L, wg_sync(L, L->vacc[old->id], 2, 0));
}

/* The elements of accumulator `acc`, which no wgmma writes any more. */
static oxi_instr **unpack_acc(lowerer *L, oxi_instr *acc) {
  int n = oxi_vf32_len(acc->type);
  oxi_instr **out = oxb_alloc(L->m->arena, sizeof *out * (size_t)n);
  for (int i = 0; i < n; i++) {
    oxi_instr *u = emit(L, OXI_UNPACK, OX_F32);
    u->ops[0] = acc;
    u->nops = 1;
    u->index = i;
    out[i] = u;
  }
  return out;
}

/* Whether `old` is held in the mma layout (a splat is in both). */
static bool is_mma(const lowerer *L, const oxi_instr *old) {
  return L->mma[old->id] && !L->splat[old->id];
}

static oxi_instr **in_layout(lowerer *L, const oxi_instr *old, bool mma);

/* The elements of `old` in the blocked layout, which most tile ops work on. */
static oxi_instr **elements(lowerer *L, const oxi_instr *old) { return in_layout(L, old, false); }

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

/* The row-major positions of the elements this thread holds of a tile of
 * `shape` in the blocked layout (mma: the mma layout), split as fb + off[e]:
 * fb one value per thread, off[e] constants, and their bits disjoint. So each
 * coordinate of an element is its coordinate of fb plus its coordinate of
 * off[e], a constant: the addresses of a thread's elements are one value
 * plus constants, which keeps few registers live. Returns fb. */
static oxi_instr *position_parts(lowerer *L, const oxi_tshape *shape, bool mma, int64_t *off) {
  mma_layout ml;
  if (mma && mma_layout_of(L, shape, &ml)) {
    int lgN = log2i(shape->dims[1]);
    oxi_instr *warp = bin(L, OXI_SHR, OX_U64, L->t, cu64(L, 5));
    oxi_instr *lane = bin(L, OXI_AND, OX_U64, L->t, cu64(L, 31));
    oxi_instr *row0 = bin(L, OXI_ADD, OX_U64,
                          bin(L, OXI_SHL, OX_U64, bin(L, OXI_SHR, OX_U64, warp, cu64(L, (uint64_t)log2i(ml.WN))),
                              cu64(L, (uint64_t)log2i(ml.wm))),
                          bin(L, OXI_SHR, OX_U64, lane, cu64(L, 2)));
    oxi_instr *col0 = bin(L, OXI_ADD, OX_U64,
                          bin(L, OXI_SHL, OX_U64, bin(L, OXI_AND, OX_U64, warp, cu64(L, (uint64_t)(ml.WN - 1))),
                              cu64(L, (uint64_t)log2i(ml.wn))),
                          bin(L, OXI_SHL, OX_U64, bin(L, OXI_AND, OX_U64, lane, cu64(L, 3)), cu64(L, 1)));
    int e = 0;
    for (int64_t mi = 0; mi < ml.wm / 16; mi++)
      for (int64_t ni = 0; ni < ml.wn / 8; ni++)
        for (int r = 0; r < 4; r++)
          off[e++] = ((mi * 16 + 8 * (r >> 1)) << lgN) + ni * 8 + (r & 1);
    return bin(L, OXI_ADD, OX_U64, bin(L, OXI_SHL, OX_U64, row0, cu64(L, (uint64_t)lgN)), col0);
  }
  layout y = layout_of(L, shape);
  int n = 0;
  for (int j = 0; j < y.J; j++)
    for (int v = 0; v < y.VEC; v++)
      off[n++] = (int64_t)j * L->T * y.VEC + v;
  return bin(L, OXI_MUL, OX_U64, L->t, cu64(L, (uint64_t)y.VEC));
}

/* Whether the element at position f exists: NULL (always) unless the layout
 * is guarded (a blocked tile with fewer chunks than the block has threads). */
static oxi_instr *exists(lowerer *L, const oxi_tshape *shape, bool mma, oxi_instr *f) {
  mma_layout ml;
  if ((mma && mma_layout_of(L, shape, &ml)) || !layout_of(L, shape).guard)
    return NULL;
  return bin(L, LT, OX_U64, f, cu64(L, (uint64_t)elems(shape)));
}

/* f, the row-major position of each element this thread holds of a tile of
 * `shape` in the given layout, and whether it exists (NULL: always). */
static void positions_in(lowerer *L, const oxi_tshape *shape, bool mma, oxi_instr **f, oxi_instr **ok) {
  int n = count_in(L, shape, mma);
  int64_t *off = malloc(sizeof *off * (size_t)n);
  oxi_instr *fb = position_parts(L, shape, mma, off);
  for (int e = 0; e < n; e++) {
    f[e] = bin(L, OXI_ADD, OX_U64, fb, cu64(L, (uint64_t)off[e]));
    ok[e] = exists(L, shape, mma, f[e]);
  }
  free(off);
}

/* Coordinate `d` of row-major position f (a constant) in `shape`. */
static int64_t coord_of(const oxi_tshape *shape, int d, int64_t f) {
  int64_t after = 1;
  for (int i = d + 1; i < shape->rank; i++)
    after *= shape->dims[i];
  return (f / after) & (shape->dims[d] - 1);
}

/* The same of a position value. */
static oxi_instr *coord_at(lowerer *L, const oxi_tshape *shape, int d, oxi_instr *f) {
  int64_t after = 1;
  for (int i = d + 1; i < shape->rank; i++)
    after *= shape->dims[i];
  return bin(L, OXI_AND, OX_U64, bin(L, OXI_SHR, OX_U64, f, cu64(L, (uint64_t)log2i(after))),
             cu64(L, (uint64_t)(shape->dims[d] - 1)));
}

static void positions(lowerer *L, const oxi_tshape *shape, oxi_instr **f, oxi_instr **ok) {
  positions_in(L, shape, false, f, ok);
}

typedef struct element_site {
  oxi_instr *inb;   /* the element exists and lies inside the tensor */
  oxi_instr *index; /* its offset in elements from the tensor's start */
} element_site;

/* For every element this thread holds (in the given layout) of a tile of
 * `shape` at tile coordinates `coord` (new u64 values) of tensor parameter
 * `param`: where it is and whether it is inside the tensor. */
static void sites(lowerer *L, const oxi_tshape *shape, bool mma, oxi_instr *const *coord, int param,
                  element_site *out) {
  int rank = shape->rank, n = count_in(L, shape, mma);
  int64_t *off = malloc(sizeof *off * (size_t)n);
  oxi_instr *fb = position_parts(L, shape, mma, off);
  /* g[d]: the coordinate in the tensor of this thread's position fb; i0 its offset */
  oxi_instr *g[OXI_MAX_RANK], *dim[OXI_MAX_RANK], *stride[OXI_MAX_RANK], *i0 = NULL;
  for (int d = 0; d < rank; d++) {
    oxi_instr *base = bin(L, OXI_SHL, OX_U64, coord[d], cu64(L, (uint64_t)log2i(shape->dims[d])));
    g[d] = bin(L, OXI_ADD, OX_U64, base, coord_at(L, shape, d, fb));
    dim[d] = param_info(L, OXI_DIM, param, d);
    stride[d] = param_info(L, OXI_STRIDE, param, d);
    oxi_instr *term = bin(L, OXI_MUL, OX_U64, g[d], stride[d]);
    i0 = i0 ? bin(L, OXI_ADD, OX_U64, i0, term) : term;
  }
  for (int e = 0; e < n; e++) {
    oxi_instr *inb = exists(L, shape, mma, bin(L, OXI_ADD, OX_U64, fb, cu64(L, (uint64_t)off[e])));
    oxi_instr *index = i0;
    for (int d = 0; d < rank; d++) {
      int64_t k = coord_of(shape, d, off[e]);
      oxi_instr *gd = k ? bin(L, OXI_ADD, OX_U64, g[d], cu64(L, (uint64_t)k)) : g[d];
      oxi_instr *in = bin(L, LT, OX_U64, gd, dim[d]);
      inb = inb ? bin(L, OXI_AND, OX_BOOL, inb, in) : in;
      if (k)
        index = bin(L, OXI_ADD, OX_U64, index, bin(L, OXI_MUL, OX_U64, cu64(L, (uint64_t)k), stride[d]));
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
static oxi_instr *whole_tile_inside(lowerer *L, const oxi_tshape *shape, bool mma,
                                    oxi_instr *const *coord, int param) {
  mma_layout ml;
  if (!(mma && mma_layout_of(L, shape, &ml)) && layout_of(L, shape).guard)
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

/* Room for a tile value's elements in either layout (a splat fills both). */
static oxi_instr **new_elements(lowerer *L, const oxi_tshape *s) {
  int a = count_in(L, s, false), b = count_in(L, s, true);
  return oxb_alloc(L->m->arena, sizeof(oxi_instr *) * (size_t)(a > b ? a : b));
}

static oxi_instr *load_at(lowerer *L, const oxi_instr *in, oxi_instr *index) {
  oxi_instr *ld = emit(L, OXI_LOAD, in->type);
  ld->mem = in->mem;
  ld->ops[0] = index;
  ld->nops = 1;
  return ld;
}

static oxi_instr *get_slot(lowerer *L, int slot) {
  oxi_instr *g = emit(L, OXI_VAR_GET, oxi_slot_type(L->nk, slot));
  g->index = slot;
  return g;
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
  if (L->direct[in->id])
    return; /* copied straight to shared memory by the dot that uses it */
  layout y = layout_of(L, in->tshape);
  int n = y.J * y.VEC;
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < in->nops; d++)
    coord[d] = mapped(L, in->ops[d]);
  element_site *es = malloc(sizeof *es * (size_t)n);
  int *slot = malloc(sizeof *slot * (size_t)n);
  clamp_coords(L, in->tshape, coord, in->mem.index);
  sites(L, in->tshape, false, coord, in->mem.index, es);
  oxi_instr *full = whole_tile_inside(L, in->tshape, false, coord, in->mem.index);
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
  for (int e = 0; e < n; e++)
    out[e] = get_slot(L, slot[e]);
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
  bool mma = is_mma(L, in->ops[0]); /* stored from the layout it is held in */
  int n = count_in(L, s, mma);
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < p->rank; d++)
    coord[d] = tile_id(L, in->mem.index, d);
  element_site *es = malloc(sizeof *es * (size_t)n);
  clamp_coords(L, s, coord, in->mem.index);
  sites(L, s, mma, coord, in->mem.index, es);
  oxi_instr *full = whole_tile_inside(L, s, mma, coord, in->mem.index);
  oxi_instr **v = held(L, in->ops[0]);
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
static void lower_elementwise(lowerer *L, const oxi_instr *in) {
  bool mma = L->mma[in->id];
  int n = count_in(L, in->tshape, mma);
  oxi_instr **ops[4] = {0};
  bool one = true, everywhere = true;
  for (int i = 0; i < in->nops; i++)
    if (in->ops[i]->tshape) {
      ops[i] = in_layout(L, in->ops[i], mma);
      one &= all_one_value(ops[i], n);
      everywhere &= L->everywhere[in->ops[i]->id];
    }
  oxi_instr **out = new_elements(L, in->tshape);
  oxi_instr *recip = NULL;
  if (!one && in->op == OXI_BIN && in->sub == OXI_DIV && oxi_is_float(in->type) && all_one_value(ops[1], n)) {
    oxi_instr *c1 = emit(L, OXI_CONST, in->type);
    c1->fimm = 1;
    recip = bin(L, OXI_DIV, in->type, c1, ops[1][0]);
  }
  for (int e = 0; e < n; e++) {
    if (one && e) {
      out[e] = out[0];
      continue;
    }
    if (recip) {
      out[e] = bin(L, OXI_MUL, in->type, ops[0][e], recip);
      continue;
    }
    oxi_instr *c = emit(L, in->op, in->type);
    c->sub = in->sub;
    c->nops = in->nops;
    for (int i = 0; i < in->nops; i++)
      c->ops[i] = ops[i] ? ops[i][e] : mapped(L, in->ops[i]);
    out[e] = c;
  }
  L->tval[in->id] = out;
  L->everywhere[in->id] = one && everywhere;
}

/* ------------------------------------------------- through shared memory */

/* Reductions and broadcasts move elements between threads: every thread
 * writes the tile's elements it holds to a shared scratch array at their
 * row-major position, the block synchronizes, and each thread reads what its
 * elements of the result need. One scratch array per dtype serves every such
 * step of the kernel; a barrier after each step frees it for the next. */

/* A new shared array of `count` elements of type t; the offsets of the
 * shared arrays are laid out after the lowering. */
static oxi_mem shared_array(lowerer *L, oxi_type t, int64_t count) {
  oxi_shared *sh = oxb_alloc(L->m->arena, sizeof *sh);
  sh->dtype = (ox_dtype)t;
  sh->count = count;
  oxb_vec_push(L->m->arena, &L->nk->shared, sh);
  oxi_mem m = {OXI_MEM_SHARED, L->nk->shared.len - 1};
  return m;
}

/* The scratch array of dtype t, made or grown to hold `count` elements. */
static oxi_mem scratch(lowerer *L, oxi_type t, int64_t count) {
  if (!L->scratch[t])
    L->scratch[t] = shared_array(L, t, 0).index + 1;
  oxi_mem m = {OXI_MEM_SHARED, L->scratch[t] - 1};
  oxi_shared *sh = L->nk->shared.items[m.index];
  if (sh->count < count)
    sh->count = count;
  return m;
}

static void barrier(lowerer *L) {
  emit(L, OXI_BARRIER, OXI_VOID);
  L->nk->uses_sync = true;
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
  bool mma = is_mma(L, old);
  int n = count_in(L, s, mma);
  oxi_instr **f = malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  positions_in(L, s, mma, f, ok);
  oxi_instr **v = held(L, old);
  oxi_mem m = scratch(L, old->type, elems(s) > L->T ? elems(s) : L->T);
  for (int e = 0; e < n; e++)
    shared_store(L, m, f[e], v[e], ok[e]);
  free(f);
}

/* `old`'s elements in the wanted layout: moved through scratch when it is
 * held in the other one. */
static oxi_instr **in_layout(lowerer *L, const oxi_instr *old, bool mma) {
  if (L->splat[old->id] || is_mma(L, old) == mma)
    return held(L, old);
  const oxi_tshape *s = old->tshape;
  spill(L, old);
  barrier(L);
  int n = count_in(L, s, mma);
  oxi_instr **f = malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  positions_in(L, s, mma, f, ok);
  oxi_instr **out = new_elements(L, s);
  oxi_mem m = scratch(L, old->type, 0);
  for (int e = 0; e < n; e++)
    out[e] = shared_load(L, m, old->type, existing(L, f[e], ok[e]));
  free(f);
  barrier(L);
  return out;
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
    out[e] = shared_load(L, scratch(L, in->type, 0), in->type, g ? g : cu64(L, 0));
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
    out[e] = shared_load(L, scratch(L, in->type, 0), in->type, g);
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

/* A counted IR loop: `for k = first; k < count; k += step`. begin_loop
 * leaves the builder in the body and returns k; end_loop closes it and
 * continues after it. */
typedef struct counted_loop {
  int slot;
  int64_t step;
  oxi_block *head, *done;
} counted_loop;

static oxi_instr *begin_loop(lowerer *L, counted_loop *lp, oxi_instr *first, int64_t step, int64_t count) {
  L->nk->nloops++; /* for the size limits (check_size) */
  lp->slot = oxi_slot_new(L->m, L->nk, OX_U64);
  lp->step = step;
  set_slot(L, lp->slot, first);
  oxi_block *body = oxi_block_new(L->m, L->nk);
  lp->head = oxi_block_new(L->m, L->nk);
  lp->done = oxi_block_new(L->m, L->nk);
  end_if(L, lp->head);
  oxi_instr *more = bin(L, LT, OX_U64, get_slot(L, lp->slot), cu64(L, (uint64_t)count));
  oxi_instr *br = emit(L, OXI_CONDBR, OXI_VOID);
  br->ops[0] = more;
  br->nops = 1;
  br->target[0] = body;
  br->target[1] = lp->done;
  L->cur = body;
  return get_slot(L, lp->slot);
}

static void end_loop(lowerer *L, counted_loop *lp, oxi_instr *k) {
  oxi_instr *next = bin(L, OXI_ADD, OX_U64, k, cu64(L, (uint64_t)lp->step));
  next->nuw = true;
  set_slot(L, lp->slot, next);
  end_if(L, lp->head);
  L->cur = lp->done;
}

/* acc = fold of scratch[base + k * stride] for k = first, first + step, ...
 * below `count`, as an IR loop. */
static oxi_instr *fold_loop(lowerer *L, int sub, oxi_type t, oxi_mem m, oxi_instr *base,
                            int64_t stride, oxi_instr *first, int64_t step, int64_t count) {
  int as = oxi_slot_new(L->m, L->nk, t);
  set_slot(L, as, identity(L, sub, t));
  counted_loop lp;
  oxi_instr *k = begin_loop(L, &lp, first, step, count);
  oxi_instr *idx = bin(L, OXI_ADD, OX_U64, base, bin(L, OXI_MUL, OX_U64, k, cu64(L, (uint64_t)stride)));
  set_slot(L, as, combine(L, sub, t, get_slot(L, as), shared_load(L, m, t, idx)));
  end_loop(L, &lp, k);
  return get_slot(L, as);
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
  oxi_mem m = scratch(L, t, L->T / 32);
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
  int64_t len = src->dims[a], inner = 1, R = elems(dst);
  for (int d = a + 1; d < src->rank; d++)
    inner *= src->dims[d];
  if (R == 1 && L->T >= 32 && (ox_dtype_size((ox_dtype)t) == 4 || ox_dtype_size((ox_dtype)t) == 8)) {
    reduce_all(L, in);
    return;
  }
  oxi_mem m = scratch(L, t, elems(src) > L->T ? elems(src) : L->T);
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

/* ---------------------------------------------------- `let mut` tiles */

/* A tile slot becomes one slot per element a thread holds of it (in the
 * slot's layout); LLVM turns them into registers, so a loop carrying a tile
 * (a K loop's accumulator) keeps it in registers. */
static void tile_var(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->op == OXI_VAR_GET ? in->tshape : in->ops[0]->tshape;
  bool mma = L->slot_mma[in->index];
  int n = count_in(L, s, mma);
  mma_layout ml;
  if (L->wg && mma && mma_layout_of(L, s, &ml) && ml.WN == 1 && ml.wm == 16) {
    /* a wgmma accumulator's layout: kept as its registers, so that a K loop's
       dot accumulates into them while the previous call's wgmmas run */
    if (!L->vslot[in->index])
      L->vslot[in->index] = oxi_slot_new(L->m, L->nk, oxi_vf32(n)) + 1;
    int slot = L->vslot[in->index] - 1;
    if (in->op == OXI_VAR_GET) {
      L->vacc[in->id] = get_slot(L, slot);
    } else if (L->vacc[in->ops[0]->id]) {
      set_slot(L, slot, L->vacc[in->ops[0]->id]);
    } else { /* other registers: no wgmma may still write the slot's */
      oxi_instr **v = in_layout(L, in->ops[0], true);
      wg_sync(L, NULL, 2, 0);
      set_slot(L, slot, wg_pack(L, v, n));
    }
    return;
  }
  if (!L->tslots[in->index]) {
    L->tslots[in->index] = oxb_alloc(L->m->arena, sizeof(int) * (size_t)n);
    for (int e = 0; e < n; e++)
      L->tslots[in->index][e] = oxi_slot_new(L->m, L->nk, in->type == OXI_VOID ? in->ops[0]->type : in->type);
  }
  int *slots = L->tslots[in->index];
  if (in->op == OXI_VAR_SET) {
    oxi_instr **v = in_layout(L, in->ops[0], mma);
    for (int e = 0; e < n; e++)
      set_slot(L, slots[e], v[e]);
    return;
  }
  oxi_instr **out = new_elements(L, s);
  for (int e = 0; e < n; e++)
    out[e] = get_slot(L, slots[e]);
  L->tval[in->id] = out;
}

/* ------------------------------------------------------------------ dot */

static oxi_instr *zero_bool(lowerer *L) {
  oxi_instr *f = emit(L, OXI_CONST, OX_BOOL);
  f->imm = 0;
  return f;
}

/* c ? a : b, of values already made (operands are made before their user). */
static oxi_instr *pick(lowerer *L, oxi_instr *c, oxi_instr *a, oxi_instr *b) {
  oxi_instr *s = emit(L, OXI_SELECT, a->type);
  s->ops[0] = c;
  s->ops[1] = a;
  s->ops[2] = b;
  s->nops = 3;
  return s;
}

static oxi_instr *cast(lowerer *L, oxi_instr *v, oxi_type t) {
  if (v->type == t)
    return v;
  oxi_instr *c = emit(L, OXI_CAST, t);
  c->ops[0] = v;
  c->nops = 1;
  return c;
}

/* The swizzle width (bytes) of a wgmma operand tile whose rows (along the
 * contiguous dim) have C 16-bit elements: 128, or a row's bytes if less (32
 * or 64: K tiles of 16 or 32 for A). */
static int64_t swizzle_bytes(int64_t C) { return C >= 64 ? 128 : 2 * C; }

/* Where element (r, c) of an [R, C] operand tile of 16-bit elements is
 * staged for wgmma, with swizzle width w (swizzle_bytes): C / (w/2) panels
 * of R rows of w bytes, each 8 rows an atom (8w bytes) in which 16-byte
 * piece p of row r sits at piece p ^ (r·w/128 mod w/16) (the swizzle, so
 * that the 8 rows of a column of pieces fall in distinct banks). `c` is a
 * multiple of 8. In elements from the operand's start. */
static oxi_instr *swizzled(lowerer *L, oxi_instr *r, oxi_instr *c, int64_t R, int64_t C) {
  int64_t w = swizzle_bytes(C), E = w / 2, pieces = w / 16;
  oxi_instr *panel = bin(L, OXI_MUL, OX_U64, bin(L, OXI_SHR, OX_U64, c, cu64(L, (uint64_t)log2i(E))),
                         cu64(L, (uint64_t)(R * E)));
  oxi_instr *flip = bin(L, OXI_AND, OX_U64, bin(L, OXI_SHR, OX_U64, r, cu64(L, (uint64_t)log2i(128 / w))),
                        cu64(L, (uint64_t)(pieces - 1)));
  oxi_instr *piece = bin(L, OXI_XOR, OX_U64,
                         bin(L, OXI_AND, OX_U64, bin(L, OXI_SHR, OX_U64, c, cu64(L, 3)), cu64(L, (uint64_t)(pieces - 1))),
                         flip);
  return bin(L, OXI_ADD, OX_U64, panel,
             bin(L, OXI_ADD, OX_U64, bin(L, OXI_MUL, OX_U64, r, cu64(L, (uint64_t)E)),
                 bin(L, OXI_SHL, OX_U64, piece, cu64(L, 3))));
}

/* Writes the blocked elements of a [R, C] tile to shared memory `m` at
 * `base` + row * `pitch` + col: one address per thread plus constants; or
 * (pitch 0) swizzled for wgmma, an address an element. */
static void stage(lowerer *L, const oxi_instr *old, oxi_mem m, int64_t base, int64_t pitch) {
  const oxi_tshape *s = old->tshape;
  int n = count_in(L, s, false);
  int64_t *off = malloc(sizeof *off * (size_t)n);
  oxi_instr *fb = position_parts(L, s, false, off);
  oxi_instr **v = elements(L, old);
  if (!pitch) {
    for (int e = 0; e < n; e++) {
      oxi_instr *f = bin(L, OXI_ADD, OX_U64, fb, cu64(L, (uint64_t)off[e]));
      oxi_instr *c = coord_at(L, s, 1, f);
      oxi_instr *at = bin(L, OXI_ADD, OX_U64,
                          swizzled(L, coord_at(L, s, 0, f), bin(L, OXI_AND, OX_U64, c, cu64(L, ~(uint64_t)7)), s->dims[0],
                                   s->dims[1]),
                          bin(L, OXI_ADD, OX_U64, bin(L, OXI_AND, OX_U64, c, cu64(L, 7)), cu64(L, (uint64_t)base)));
      shared_store(L, m, at, v[e], exists(L, s, false, f));
    }
    free(off);
    return;
  }
  oxi_instr *a0 = bin(L, OXI_ADD, OX_U64, bin(L, OXI_MUL, OX_U64, coord_at(L, s, 0, fb), cu64(L, (uint64_t)pitch)),
                      bin(L, OXI_ADD, OX_U64, coord_at(L, s, 1, fb), cu64(L, (uint64_t)base)));
  for (int e = 0; e < n; e++) {
    int64_t k = coord_of(s, 0, off[e]) * pitch + coord_of(s, 1, off[e]);
    oxi_instr *ok = exists(L, s, false, bin(L, OXI_ADD, OX_U64, fb, cu64(L, (uint64_t)off[e])));
    shared_store(L, m, bin(L, OXI_ADD, OX_U64, a0, cu64(L, (uint64_t)k)), v[e], ok);
  }
  free(off);
}

/* A load that only a tensor-core dot uses, copied from the tensor straight to
 * the dot's staging area in 16-byte pieces (cp.async.cg, no registers): each
 * row of the [R, C] tile is C/8 pieces of eight 16-bit elements, dealt over
 * the threads; a piece the tensor's edge cuts reads only its elements inside
 * and zero-fills the rest, which is the padding a load gives. Rows are
 * `pitch` elements apart from `base`, or (pitch 0) swizzled for wgmma. */
static void copy_async(lowerer *L, const oxi_instr *ld, oxi_instr *c0, oxi_instr *c1, oxi_mem m,
                       oxi_instr *base, int64_t pitch) {
  const oxi_tshape *s = ld->tshape;
  int64_t R = s->dims[0], C = s->dims[1], per_row = C / 8, pieces = R * per_row;
  int param = ld->mem.index;
  oxi_instr *coord[2] = {c0, c1};
  clamp_coords(L, s, coord, param);
  oxi_instr *dim0 = param_info(L, OXI_DIM, param, 0), *dim1 = param_info(L, OXI_DIM, param, 1);
  oxi_instr *stride0 = param_info(L, OXI_STRIDE, param, 0);
  oxi_instr *row0 = bin(L, OXI_SHL, OX_U64, coord[0], cu64(L, (uint64_t)log2i(R)));
  oxi_instr *col0 = bin(L, OXI_SHL, OX_U64, coord[1], cu64(L, (uint64_t)log2i(C)));
  /* With wgmma, a tile wholly inside the tensor (the same for the whole
     block) takes a path without the per-piece tests: 3-7% faster on the
     H200. (With mma.sync its registers cost more than it saved.) */
  oxi_instr *interior = NULL;
  if (L->wg)
    interior = bin(L, OXI_AND, OX_BOOL, bin(L, 100 + OXI_LE, OX_U64, bin(L, OXI_ADD, OX_U64, row0, cu64(L, (uint64_t)R)), dim0),
                   bin(L, 100 + OXI_LE, OX_U64, bin(L, OXI_ADD, OX_U64, col0, cu64(L, (uint64_t)C)), dim1));
  for (int path = 0; path < (interior ? 2 : 1); path++) {
    oxi_block *pjoin = NULL;
    if (interior) {
      oxi_instr *cond = interior;
      if (path) {
        cond = emit(L, OXI_NOT, OX_BOOL);
        cond->ops[0] = interior;
        cond->nops = 1;
      }
      begin_if(L, cond, &pjoin);
    }
    bool checked = !interior || path;
    for (int64_t p0 = 0; p0 < pieces; p0 += L->T) {
      oxi_instr *piece = bin(L, OXI_ADD, OX_U64, L->t, cu64(L, (uint64_t)p0));
      oxi_block *join = NULL;
      if (p0 + L->T > pieces)
        begin_if(L, bin(L, LT, OX_U64, piece, cu64(L, (uint64_t)pieces)), &join);
      oxi_instr *r = bin(L, OXI_SHR, OX_U64, piece, cu64(L, (uint64_t)log2i(per_row)));
      oxi_instr *c = bin(L, OXI_SHL, OX_U64, bin(L, OXI_AND, OX_U64, piece, cu64(L, (uint64_t)(per_row - 1))),
                         cu64(L, 3));
      oxi_instr *grow = bin(L, OXI_ADD, OX_U64, row0, r), *gcol = bin(L, OXI_ADD, OX_U64, col0, c);
      oxi_instr *gidx = bin(L, OXI_ADD, OX_U64, bin(L, OXI_MUL, OX_U64, grow, stride0), gcol);
      oxi_instr *bytes = cu64(L, 16);
      if (checked) {
        /* elements of the piece inside the tensor: 0 to 8 */
        oxi_instr *inside = bin(L, OXI_AND, OX_BOOL, bin(L, LT, OX_U64, grow, dim0), bin(L, LT, OX_U64, gcol, dim1));
        oxi_instr *n = combine(L, OXI_MIN, OX_U64, bin(L, OXI_SUB, OX_U64, dim1, gcol), cu64(L, 8));
        bytes = pick(L, inside, bin(L, OXI_SHL, OX_U64, n, cu64(L, 1)), cu64(L, 0));
        gidx = pick(L, inside, gidx, cu64(L, 0)); /* outside, the tensor's start, read for 0 bytes */
      }
      oxi_instr *sidx = pitch ? bin(L, OXI_ADD, OX_U64, bin(L, OXI_MUL, OX_U64, r, cu64(L, (uint64_t)pitch)),
                                    bin(L, OXI_ADD, OX_U64, c, base))
                              : bin(L, OXI_ADD, OX_U64, swizzled(L, r, c, R, C), base);
      oxi_instr *b32 = cast(L, bytes, OX_U32);
      oxi_instr *cp = emit(L, OXI_CP_ASYNC, OXI_VOID);
      cp->mem = ld->mem;
      cp->index = m.index;
      cp->ops[0] = gidx;
      cp->ops[1] = sidx;
      cp->ops[2] = b32;
      cp->nops = 3;
      if (join)
        end_if(L, join);
    }
    if (pjoin)
      end_if(L, pjoin);
  }
}

/* Whether the operands of dot `in` suit mma.sync: bf16/f16 with K a
 * multiple of 16 (m16n8k16), tf32 with K a multiple of 8 (m16n8k8). */
static bool tc_operands(const oxi_instr *in) {
  oxi_type t = in->ops[0]->type;
  int64_t K = in->ops[0]->tshape->dims[1];
  return ((t == OX_BF16 || t == OX_F16) && K % 16 == 0) || (t == OX_TF32 && K % 8 == 0);
}

/* Whether dot `in` runs on tensor cores: such operands on the CUDA target and
 * a result the block's warps can tile (mma layout). */
static bool dot_on_tensor_cores(const lowerer *L, const oxi_instr *in) {
  mma_layout ml;
  return L->cuda && tc_operands(in) && mma_layout_of(L, in->tshape, &ml);
}

/* How a tensor-core dot's operands A [M, K] and B [K, N] are staged in
 * shared memory: rows `pa` and `pb` elements apart (padded by 16 bytes
 * against bank conflicts; 0: swizzled for wgmma, no padding), B `bat`
 * elements after A, `area` elements in all. */
typedef struct staging {
  int64_t pa, pb, bat, area;
} staging;

static staging staging_of(const lowerer *L, const oxi_instr *in) {
  int64_t M = in->ops[0]->tshape->dims[0], K = in->ops[0]->tshape->dims[1], N = in->ops[1]->tshape->dims[1];
  staging g = {0, 0, M * K, M * K + K * N};
  if (!L->wg) {
    g.pa = K + (in->ops[0]->type == OX_TF32 ? 4 : 8);
    g.pb = N + 8;
    g.bat = M * g.pa;
    g.area = g.bat + K * g.pb;
  }
  return g;
}

/* Copies the operands of the call `ahead` calls after this one (at
 * coordinates `c`, in ring area `r`) along K into their ring area, as one
 * cp.async group. */
static void prefetch(lowerer *L, const oxi_instr *in, oxi_instr *const *c, oxi_instr *r, int ahead, oxi_mem m,
                     int S) {
  staging g = staging_of(L, in);
  oxi_instr *j = cu64(L, (uint64_t)ahead);
  oxi_instr *ring = bin(L, OXI_REM, OX_U64, bin(L, OXI_ADD, OX_U64, r, j), cu64(L, (uint64_t)S));
  oxi_instr *at = bin(L, OXI_MUL, OX_U64, ring, cu64(L, (uint64_t)g.area));
  copy_async(L, in->ops[0], c[0], bin(L, OXI_ADD, OX_U64, c[1], j), m, at, g.pa);
  copy_async(L, in->ops[1], bin(L, OXI_ADD, OX_U64, c[2], j), c[3], m,
             bin(L, OXI_ADD, OX_U64, at, cu64(L, (uint64_t)g.bat)), g.pb);
  emit(L, OXI_CP_COMMIT, OXI_VOID);
}

/* What dot_pipeline leaves for pipeline_advance: the call's tile coordinates
 * (A's two, B's two) and its ring area. */
typedef struct pipe_state {
  oxi_instr *c[4], *r;
} pipe_state;

/* A dot in a loop whose operands are both direct loads is pipelined over S
 * staging areas (a ring): while the tensor cores work on this call's
 * operands, the copies for the next D - 1 calls' are already in flight (D =
 * S; with wgmma S - 1, as the previous call's wgmmas may still read its
 * area). The next calls' coordinates are a guess, the next tiles along K (A's
 * column of tiles + 1, B's row + 1), as a K loop has them; the guess is
 * checked at the next call (the coordinates are the same for the whole block,
 * so the branch does not diverge), and a miss copies the operands then, so
 * any loop is correct. One barrier per call: after it, every warp is done
 * with the area of the call D calls back, which the newest prefetch
 * (pipeline_advance) reuses.
 * Slots from `slot`: whether prefetches are in flight, the next call's 4
 * coordinates as guessed, and this call's area in the ring. Returns the
 * element offset of this call's area. */
static oxi_instr *dot_pipeline(lowerer *L, const oxi_instr *in, oxi_mem m, int slot, int S, pipe_state *ps) {
  const oxi_instr *la = in->ops[0], *lb = in->ops[1];
  oxi_instr **c = ps->c;
  c[0] = mapped(L, la->ops[0]), c[1] = mapped(L, la->ops[1]), c[2] = mapped(L, lb->ops[0]);
  c[3] = mapped(L, lb->ops[1]);
  oxi_instr *get[6];
  for (int i = 0; i < 6; i++)
    get[i] = get_slot(L, slot + i);
  oxi_instr *hit = get[0];
  for (int i = 0; i < 4; i++)
    hit = bin(L, OXI_AND, OX_BOOL, hit, bin(L, 100 + OXI_EQ, OX_U64, get[1 + i], c[i]));
  oxi_instr *r = ps->r = get[5];
  oxi_instr *miss = emit(L, OXI_NOT, OX_BOOL);
  miss->ops[0] = hit;
  miss->nops = 1;
  oxi_block *join;
  begin_if(L, miss, &join);
  barrier(L); /* other warps may still read the previous call's area */
  oxi_instr *w0 = emit(L, OXI_CP_WAIT, OXI_VOID); /* wrong guesses may still be landing */
  w0->imm = 0;
  /* copies run D - 1 calls ahead; with wgmma, the previous call's wgmmas may
     still read its area (dot_wg), so the ring has one area more than that */
  int D = L->wg ? S - 1 : S;
  for (int j = 0; j < D - 1; j++) /* this call's operands and the next D - 2 calls' */
    prefetch(L, in, c, r, j, m, S);
  end_if(L, join);
  /* D - 1 groups in flight, this call's the oldest */
  oxi_instr *w = emit(L, OXI_CP_WAIT, OXI_VOID);
  w->imm = (uint64_t)(D - 2);
  if (L->wg) /* wgmma reads them through the async proxy */
    emit(L, OXI_FENCE_ASYNC, OXI_VOID);
  barrier(L);
  return bin(L, OXI_MUL, OX_U64, r, cu64(L, (uint64_t)staging_of(L, in).area));
}

/* The rest of a pipelined call (after the barrier in dot_pipeline, which
 * every warp passes only when done with the area of the call D calls back):
 * the copies for the call D - 1 ahead, into that area, and the guess of the
 * next call. dot_tc makes it right after dot_pipeline; dot_wg after issuing
 * its wgmmas, so that the tensor cores start sooner. */
static void pipeline_advance(lowerer *L, const oxi_instr *in, oxi_mem m, int slot, int S, const pipe_state *ps) {
  oxi_instr *const *c = ps->c;
  prefetch(L, in, c, ps->r, L->wg ? S - 2 : S - 1, m, S);
  oxi_instr *t = emit(L, OXI_CONST, OX_BOOL);
  t->imm = 1;
  set_slot(L, slot, t);
  oxi_instr *nc[4] = {c[0], bin(L, OXI_ADD, OX_U64, c[1], cu64(L, 1)), bin(L, OXI_ADD, OX_U64, c[2], cu64(L, 1)),
                      c[3]};
  for (int i = 0; i < 4; i++)
    set_slot(L, slot + 1 + i, nc[i]);
  set_slot(L, slot + 5, bin(L, OXI_REM, OX_U64, bin(L, OXI_ADD, OX_U64, ps->r, cu64(L, 1)), cu64(L, (uint64_t)S)));
}

/* Stages the operands of tensor-core dot `in` in shared memory (staging_of):
 * copied there by cp.async if they are direct loads, through the ring of a
 * pipelined dot (dot_pipeline), else written from registers; then a barrier.
 * Sets *m to the shared array and returns the element offset of this call's
 * area in it. */
static oxi_instr *stage_operands(lowerer *L, const oxi_instr *in, oxi_mem *m, pipe_state *ps) {
  staging g = staging_of(L, in);
  oxi_type t = in->ops[0]->type;
  int S = L->pipe[in->id].stages;
  /* a pipelined dot has its own areas: prefetches stay in flight across other steps */
  *m = S ? shared_array(L, t, S * g.area) : scratch(L, t, g.area);
  if (L->wg) /* the swizzle is on address bits: atoms start at 1024-byte boundaries */
    ((oxi_shared *)L->nk->shared.items[m->index])->align = 1024;
  if (S)
    return dot_pipeline(L, in, *m, L->pipe[in->id].slot, S, ps);
  bool copies = false;
  for (int i = 0; i < 2; i++) {
    const oxi_instr *ld = in->ops[i];
    int64_t pitch = i ? g.pb : g.pa, at = i ? g.bat : 0;
    if (L->direct[ld->id]) {
      copy_async(L, ld, mapped(L, ld->ops[0]), mapped(L, ld->ops[1]), *m, cu64(L, (uint64_t)at), pitch);
      copies = true;
    } else {
      stage(L, ld, *m, at, pitch);
    }
  }
  if (copies) {
    emit(L, OXI_CP_COMMIT, OXI_VOID);
    emit(L, OXI_CP_WAIT, OXI_VOID);
  }
  if (L->wg) /* wgmma reads the operands through the async proxy */
    emit(L, OXI_FENCE_ASYNC, OXI_VOID);
  barrier(L);
  return cu64(L, 0);
}

/* A matrix descriptor of wgmma for an operand staged swizzled (`swizzled`,
 * width w bytes) at shared address `addr` (bytes): the address / 16 in bits
 * 0-13, the leading byte offset / 16 in bits 16-29, the stride byte offset /
 * 16 in bits 32-45, the swizzle mode in bits 62-63 (1: 128 bytes, 2: 64, 3:
 * 32). The stride byte offset is the distance between atoms of 8 rows (8w
 * bytes); the leading one, for N-major B, between panels of 64 columns (K
 * rows of 128 bytes) (unused for K-major A: 1). */
static oxi_instr *wg_desc(lowerer *L, oxi_instr *addr, int64_t w, int64_t lbo) {
  uint64_t mode = w == 128 ? 1 : w == 64 ? 2 : 3;
  uint64_t hi = ((uint64_t)lbo >> 4) << 16 | (uint64_t)(8 * w >> 4) << 32 | mode << 62;
  return bin(L, OXI_OR, OX_U64, bin(L, OXI_SHR, OX_U64, addr, cu64(L, 4)), cu64(L, hi));
}

/* dot on wgmma (sm_90). The block's warpgroups each compute 64 rows of the
 * [M, N] result (M / 16 warps, L->wg), from A and B staged swizzled: per step
 * of 16 along K, one wgmma.m64nNk16 reads the group's 64 x 16 of A and the
 * 16 x N of B from shared memory through descriptors. The accumulator, N / 2
 * f32 registers a thread, is the mma layout with 16 x N warp tiles. The
 * wgmmas of a call are one group. A pipelined dot leaves it in flight (at
 * most one group pending: the previous call's is done, so its staging area is
 * free for dot_pipeline's copies) and its result is the registers as wgmma
 * leaves them (L->vacc), which the next call accumulates into directly and
 * any other use waits for (held); otherwise the call waits for its group. */
static void dot_wg(lowerer *L, const oxi_instr *in) {
  int64_t M = in->ops[0]->tshape->dims[0], K = in->ops[0]->tshape->dims[1], N = in->ops[1]->tshape->dims[1];
  int n = (int)(N / 2);
  bool pipelined = L->pipe[in->id].stages != 0;
  oxi_mem m;
  pipe_state ps;
  oxi_instr *cur = stage_operands(L, in, &m, &ps);
  oxi_instr *acc = NULL;
  if (in->nops == 3 && L->vacc[in->ops[2]->id])
    acc = L->vacc[in->ops[2]->id];
  else if (in->nops == 3)
    acc = wg_pack(L, in_layout(L, in->ops[2], true), n);
  else
    acc = emit(L, OXI_CONST, oxi_vf32(n));
  acc = wg_sync(L, acc, 0, 0);
  /* byte addresses: A of this warpgroup (rows 64g..), B */
  oxi_instr *base = emit(L, OXI_SHARED_ADDR, OX_U64);
  base->mem = m;
  base->ops[0] = cur;
  base->nops = 1;
  int64_t wa = swizzle_bytes(K), steps = wa / 32; /* A's swizzle; K steps of 16 (32 bytes) a row */
  oxi_instr *group = bin(L, OXI_SHR, OX_U64, L->t, cu64(L, 7));
  oxi_instr *a0 = bin(L, OXI_ADD, OX_U64, base, bin(L, OXI_MUL, OX_U64, group, cu64(L, (uint64_t)(64 * wa))));
  oxi_instr *b0 = bin(L, OXI_ADD, OX_U64, base, cu64(L, (uint64_t)(2 * M * K)));
  for (int64_t ks = 0; ks < K / 16; ks++) {
    /* A: panel ks / steps (M rows of wa bytes each), 32 bytes a step within it; B: 16 rows a step */
    int64_t aoff = ks / steps * M * wa + ks % steps * 32, boff = ks * 16 * 128;
    oxi_instr *da = wg_desc(L, bin(L, OXI_ADD, OX_U64, a0, cu64(L, (uint64_t)aoff)), wa, 16);
    oxi_instr *db = wg_desc(L, bin(L, OXI_ADD, OX_U64, b0, cu64(L, (uint64_t)boff)), 128, K * 128);
    oxi_instr *w = emit(L, OXI_WGMMA, oxi_vf32(n));
    w->sub = in->ops[0]->type;
    w->imm = (uint64_t)N;
    w->ops[0] = da;
    w->ops[1] = db;
    w->ops[2] = acc;
    w->nops = 3;
    acc = w;
  }
  acc = wg_sync(L, acc, 1, pipelined ? 1 : 0);
  if (pipelined)
    pipeline_advance(L, in, m, L->pipe[in->id].slot, L->pipe[in->id].stages, &ps);
  L->vacc[in->id] = acc;
  if (!pipelined) { /* waited for: the elements are ready, and the scratch area free after a barrier */
    barrier(L);
    L->tval[in->id] = unpack_acc(L, acc);
  }
  L->nk->uses_sync = true;
}

/* dot on tensor cores with mma.sync. a [M, K] and b [K, N] are staged in shared memory with
 * rows padded by 8 elements (16 bytes), so the eight 16-byte rows that one
 * ldmatrix phase reads fall in distinct banks. Each warp then computes its
 * warp tile: per step of 16 along K, ldmatrix.x4 fragments of A (one per 16
 * rows), ldmatrix.x4.trans fragments of B (two n8 tiles each), and one
 * mma.sync.m16n8k16 per 16 x 8 mma tile into the f32 accumulator registers.
 * tf32 (4-byte elements) steps by 8 along K with m16n8k8, whose A fragments
 * ldmatrix also gives (an 8 x 4 block of 32-bit elements is an 8 x 8 one of
 * 16-bit halves) and whose B fragments are plain shared loads. */
static void dot_tc(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *as = in->ops[0]->tshape;
  oxi_type t = in->ops[0]->type;
  bool tf = t == OX_TF32;
  int64_t M = as->dims[0], K = as->dims[1];
  staging g = staging_of(L, in);
  int64_t pa = g.pa, pb = g.pb;
  int64_t kstep = tf ? 8 : 16, cols = tf ? 4 : 8; /* K per mma; elements in 16 bytes */
  mma_layout ml;
  mma_layout_of(L, in->tshape, &ml);
  int S = L->pipe[in->id].stages;
  oxi_mem m;
  pipe_state ps;
  oxi_instr *cur = stage_operands(L, in, &m, &ps);
  if (S)
    pipeline_advance(L, in, m, L->pipe[in->id].slot, S, &ps);
  int tiles = (int)(ml.wm / 16 * (ml.wn / 8));
  oxi_instr **acc = malloc(sizeof *acc * (size_t)tiles);
  oxi_instr **c = in->nops == 3 ? in_layout(L, in->ops[2], true) : NULL;
  oxi_instr *zero = emit(L, OXI_CONST, OX_F32);
  zero->fimm = 0;
  for (int i = 0; i < tiles; i++) {
    oxi_instr *p = emit(L, OXI_PACK, OXI_V4);
    p->nops = 4;
    for (int r = 0; r < 4; r++)
      p->ops[r] = c ? c[i * 4 + r] : zero;
    acc[i] = p;
  }
  oxi_instr *warp = bin(L, OXI_SHR, OX_U64, L->t, cu64(L, 5));
  oxi_instr *lane = bin(L, OXI_AND, OX_U64, L->t, cu64(L, 31));
  oxi_instr *r16 = bin(L, OXI_AND, OX_U64, lane, cu64(L, 15));
  oxi_instr *c8 = bin(L, OXI_MUL, OX_U64, bin(L, OXI_SHR, OX_U64, lane, cu64(L, 4)), cu64(L, (uint64_t)cols));
  oxi_instr *wrow = bin(L, OXI_SHL, OX_U64, bin(L, OXI_SHR, OX_U64, warp, cu64(L, (uint64_t)log2i(ml.WN))),
                        cu64(L, (uint64_t)log2i(ml.wm)));
  oxi_instr *wcol = bin(L, OXI_SHL, OX_U64, bin(L, OXI_AND, OX_U64, warp, cu64(L, (uint64_t)(ml.WN - 1))),
                        cu64(L, (uint64_t)log2i(ml.wn)));
  /* this lane's row addresses: A at (wrow + r16) * pa + c8, B at M * pa + r16 * pb + wcol + c8 */
  oxi_instr *abase = bin(L, OXI_ADD, OX_U64,
                         bin(L, OXI_MUL, OX_U64, bin(L, OXI_ADD, OX_U64, wrow, r16), cu64(L, (uint64_t)pa)),
                         bin(L, OXI_ADD, OX_U64, c8, cur));
  oxi_instr *bbase = bin(L, OXI_ADD, OX_U64, bin(L, OXI_MUL, OX_U64, r16, cu64(L, (uint64_t)pb)),
                         bin(L, OXI_ADD, OX_U64, wcol,
                             bin(L, OXI_ADD, OX_U64, c8, bin(L, OXI_ADD, OX_U64, cur, cu64(L, (uint64_t)(M * pa))))));
  int mt = (int)(ml.wm / 16), nt = (int)(ml.wn / 8);
  oxi_instr **fa = malloc(sizeof *fa * (size_t)(mt + nt / 2)), **fb = fa + mt;
  /* tf32's B: lane l holds B[k + l%4][n + l/4] and B[k + l%4 + 4][n + l/4] of
     each n8 tile (32-bit elements: no ldmatrix.trans); with rows of N + 8
     elements, the four k rows a load touches fall in distinct banks */
  oxi_instr *tb = tf ? bin(L, OXI_ADD, OX_U64,
                           bin(L, OXI_MUL, OX_U64, bin(L, OXI_AND, OX_U64, lane, cu64(L, 3)), cu64(L, (uint64_t)pb)),
                           bin(L, OXI_ADD, OX_U64, bin(L, OXI_SHR, OX_U64, lane, cu64(L, 2)),
                               bin(L, OXI_ADD, OX_U64, wcol, bin(L, OXI_ADD, OX_U64, cur, cu64(L, (uint64_t)(M * pa))))))
                    : NULL;
  for (int64_t ks = 0; ks < K / kstep; ks++) {
    for (int i = mt; tf && i < mt + nt / 2; i++) { /* two n8 tiles a V4, as ldmatrix.x4.trans gives */
      oxi_instr *v[4];
      for (int r = 0; r < 4; r++) {
        int64_t off = (ks * 8 + (r & 1) * 4) * pb + ((i - mt) * 2 + r / 2) * 8;
        v[r] = shared_load(L, m, t, bin(L, OXI_ADD, OX_U64, tb, cu64(L, (uint64_t)off)));
      }
      oxi_instr *p = emit(L, OXI_PACK, OXI_V4);
      p->nops = 4;
      for (int r = 0; r < 4; r++)
        p->ops[r] = v[r];
      fa[i] = p;
    }
    for (int i = 0; i < (tf ? mt : mt + nt / 2); i++) {
      bool isb = i >= mt;
      int64_t off = isb ? ks * 16 * pb + (i - mt) * 16 : i * 16 * pa + ks * kstep;
      oxi_instr *at = bin(L, OXI_ADD, OX_U64, isb ? bbase : abase, cu64(L, (uint64_t)off));
      fa[i] = emit(L, OXI_LDMATRIX, OXI_V4);
      fa[i]->sub = isb; /* B: transposed, from its [K, N] rows */
      fa[i]->mem = m;
      fa[i]->ops[0] = at;
      fa[i]->nops = 1;
    }
    for (int i = 0; i < mt; i++)
      for (int j = 0; j < nt; j++) {
        oxi_instr *d = emit(L, OXI_MMA, OXI_V4);
        d->sub = t;
        d->index = j & 1;
        d->ops[0] = fa[i];
        d->ops[1] = fb[j / 2];
        d->ops[2] = acc[i * nt + j];
        d->nops = 3;
        acc[i * nt + j] = d;
      }
  }
  if (!S) /* the scratch area is free for the next use (a ring's areas are reused after the
             barrier in dot_pipeline) */
    barrier(L);
  oxi_instr **out = new_elements(L, in->tshape);
  for (int i = 0; i < tiles; i++)
    for (int r = 0; r < 4; r++) {
      oxi_instr *u = emit(L, OXI_UNPACK, OX_F32);
      u->ops[0] = acc[i];
      u->nops = 1;
      u->index = r;
      out[i * 4 + r] = u;
    }
  free(fa);
  free(acc);
  L->nk->uses_sync = true;
  L->tval[in->id] = out;
}

/* dot elsewhere on CUDA (f32, small tiles): a and b go to scratch, and
 * each thread accumulates its result elements (blocked layout) in f32 over
 * K, in one loop for all of them. */
static void dot_simple(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *as = in->ops[0]->tshape, *bs = in->ops[1]->tshape;
  int64_t M = as->dims[0], K = as->dims[1], N = bs->dims[1];
  oxi_type t = in->ops[0]->type;
  oxi_mem m = scratch(L, t, M * K + K * N);
  stage(L, in->ops[0], m, 0, K);
  stage(L, in->ops[1], m, M * K, N);
  barrier(L);
  int n = count_in(L, in->tshape, false);
  oxi_instr **f = malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  positions(L, in->tshape, f, ok);
  oxi_instr **c = in->nops == 3 ? elements(L, in->ops[2]) : NULL;
  int *acc = malloc(sizeof *acc * (size_t)n);
  oxi_instr **arow = malloc(sizeof *arow * (size_t)n * 2), **bcol = arow + n;
  for (int e = 0; e < n; e++) {
    acc[e] = oxi_slot_new(L->m, L->nk, OX_F32);
    oxi_instr *z = emit(L, OXI_CONST, OX_F32);
    z->fimm = 0;
    set_slot(L, acc[e], c ? c[e] : z);
    oxi_instr *g = existing(L, f[e], ok[e]);
    arow[e] = bin(L, OXI_MUL, OX_U64, bin(L, OXI_SHR, OX_U64, g, cu64(L, (uint64_t)log2i(N))), cu64(L, (uint64_t)K));
    bcol[e] = bin(L, OXI_ADD, OX_U64, bin(L, OXI_AND, OX_U64, g, cu64(L, (uint64_t)(N - 1))), cu64(L, (uint64_t)(M * K)));
  }
  counted_loop lp;
  oxi_instr *k = begin_loop(L, &lp, cu64(L, 0), 1, K);
  oxi_instr *kn = bin(L, OXI_MUL, OX_U64, k, cu64(L, (uint64_t)N));
  for (int e = 0; e < n; e++) {
    oxi_instr *x = cast(L, shared_load(L, m, t, bin(L, OXI_ADD, OX_U64, arow[e], k)), OX_F32);
    oxi_instr *y = cast(L, shared_load(L, m, t, bin(L, OXI_ADD, OX_U64, bcol[e], kn)), OX_F32);
    oxi_instr *a = get_slot(L, acc[e]);
    oxi_instr *fma = emit(L, OXI_MATH, OX_F32);
    fma->sub = OXI_M_FMA;
    fma->ops[0] = x;
    fma->ops[1] = y;
    fma->ops[2] = a;
    fma->nops = 3;
    set_slot(L, acc[e], fma);
  }
  end_loop(L, &lp, k);
  barrier(L);
  oxi_instr **out = new_elements(L, in->tshape);
  for (int e = 0; e < n; e++)
    out[e] = get_slot(L, acc[e]);
  free(f);
  free(acc);
  free(arow);
  L->tval[in->id] = out;
}

static void lower_dot(lowerer *L, const oxi_instr *in) {
  if (L->mma[in->id] && L->wg)
    dot_wg(L, in);
  else if (L->mma[in->id])
    dot_tc(L, in);
  else
    dot_simple(L, in);
}

/* ---------------------------------------------------------- atomic adds */

static void atomic_at(lowerer *L, const oxi_instr *in, oxi_instr *cond, oxi_instr *index, oxi_instr *v) {
  oxi_block *join = NULL;
  if (cond)
    begin_if(L, cond, &join);
  oxi_instr *a = emit(L, OXI_ATOMIC, v->type);
  a->sub = OXI_ADD;
  a->mem = in->mem;
  a->ops[0] = index;
  a->ops[1] = v;
  a->nops = 2;
  if (cond)
    end_if(L, join);
}

/* An atomic add of a tile into an atomic tensor: one atomic add per element
 * this thread holds (in the tile's layout), predicated like a store on the
 * tensor's bounds; or, for a scatter, on the index being below the dim. */
static void lower_atomic(lowerer *L, const oxi_instr *in) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  if (in->sub == 0) {
    const oxi_instr *v = in->ops[p->rank];
    const oxi_tshape *s = v->tshape;
    bool mma = is_mma(L, v);
    int n = count_in(L, s, mma);
    oxi_instr *coord[OXI_MAX_RANK];
    for (int d = 0; d < p->rank; d++)
      coord[d] = mapped(L, in->ops[d]);
    clamp_coords(L, s, coord, in->mem.index);
    element_site *es = malloc(sizeof *es * (size_t)n);
    sites(L, s, mma, coord, in->mem.index, es);
    oxi_instr **vals = held(L, v);
    for (int e = 0; e < n; e++)
      atomic_at(L, in, es[e].inb, es[e].index, vals[e]);
    free(es);
    return;
  }
  const oxi_tshape *s = in->ops[0]->tshape;
  int n = count_in(L, s, false);
  oxi_instr **idx = elements(L, in->ops[0]), **vals = elements(L, in->ops[1]);
  oxi_instr **f = malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  positions(L, s, f, ok);
  oxi_instr *dim = param_info(L, OXI_DIM, in->mem.index, 0), *stride = param_info(L, OXI_STRIDE, in->mem.index, 0);
  for (int e = 0; e < n; e++) {
    oxi_instr *cond = bin(L, LT, OX_U64, idx[e], dim);
    if (ok[e])
      cond = bin(L, OXI_AND, OX_BOOL, cond, ok[e]);
    atomic_at(L, in, cond, bin(L, OXI_MUL, OX_U64, idx[e], stride), vals[e]);
  }
  free(f);
}

/* ------------------------------------------ the CPU: one thread a block */

/* On the CPU a block is one thread (L->serial), and every tile value is a
 * buffer of its elements in row-major order, in the block's shared memory
 * (which on the CPU is the worker's own memory); each tile op is a loop over
 * elements, which LLVM vectorizes, instead of elements unrolled over threads
 * that meet at barriers. A splat stays one scalar (L->splat, L->sval) until
 * something needs its elements. Blocks spread over the cores as for SIMT
 * kernels, and no block needs fibers. */

static oxi_mem s_buf(const lowerer *L, const oxi_instr *old) {
  assert(!L->splat[old->id] && L->buf[old->id]);
  oxi_mem m = {OXI_MEM_SHARED, L->buf[old->id] - 1};
  return m;
}

static void s_set_buf(lowerer *L, const oxi_instr *old, oxi_mem m) { L->buf[old->id] = m.index + 1; }

/* Element at row-major position f of tile value `old`. */
static oxi_instr *s_elem(lowerer *L, const oxi_instr *old, oxi_instr *f) {
  if (L->splat[old->id])
    return mapped(L, old);
  return shared_load(L, s_buf(L, old), old->type, f);
}

/* `for f in 0..count` over a tile's elements; returns f. */
static oxi_instr *s_loop(lowerer *L, counted_loop *lp, int64_t count) {
  return begin_loop(L, lp, cu64(L, 0), 1, count);
}

/* Copies `count` elements from `src` (a tile value) to buffer `dst`. */
static void s_copy(lowerer *L, oxi_mem dst, const oxi_instr *src, int64_t count) {
  counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, count);
  shared_store(L, dst, f, s_elem(L, src, f), NULL);
  end_loop(L, &lp, f);
}

static void s_elementwise(lowerer *L, const oxi_instr *in) {
  bool splat = true;
  for (int i = 0; i < in->nops; i++)
    splat &= !in->ops[i]->tshape || L->splat[in->ops[i]->id];
  if (splat) { /* one scalar operation */
    oxi_instr *c = clone(L, in);
    L->sval[in->id] = c;
    L->splat[in->id] = 1;
    return;
  }
  int64_t E = elems(in->tshape);
  oxi_mem m = shared_array(L, in->type, E);
  counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, E);
  oxi_instr *ops[4];
  for (int i = 0; i < in->nops; i++)
    ops[i] = in->ops[i]->tshape ? s_elem(L, in->ops[i], f) : mapped(L, in->ops[i]);
  oxi_instr *c = emit(L, in->op, in->type);
  c->sub = in->sub;
  c->nops = in->nops;
  for (int i = 0; i < in->nops; i++)
    c->ops[i] = ops[i];
  shared_store(L, m, f, c, NULL);
  end_loop(L, &lp, f);
  s_set_buf(L, in, m);
}

/* The offset in tensor `param` of element f of a tile of `shape` at tile
 * coordinates `coord` (clamped), and whether it lies inside the tensor. */
static oxi_instr *s_site(lowerer *L, const oxi_tshape *shape, oxi_instr *const *coord, int param, oxi_instr *f,
                         oxi_instr **inb) {
  oxi_instr *index = NULL;
  *inb = NULL;
  for (int d = 0; d < shape->rank; d++) {
    oxi_instr *g = bin(L, OXI_ADD, OX_U64,
                       bin(L, OXI_SHL, OX_U64, coord[d], cu64(L, (uint64_t)log2i(shape->dims[d]))),
                       coord_at(L, shape, d, f));
    oxi_instr *in = bin(L, LT, OX_U64, g, param_info(L, OXI_DIM, param, d));
    *inb = *inb ? bin(L, OXI_AND, OX_BOOL, *inb, in) : in;
    oxi_instr *term = bin(L, OXI_MUL, OX_U64, g, param_info(L, OXI_STRIDE, param, d));
    index = index ? bin(L, OXI_ADD, OX_U64, index, term) : term;
  }
  return index;
}

/* A load: a loop without predicates when the whole tile is inside the
 * tensor, else one that reads the padding outside. */
static void s_load(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->tshape;
  int64_t E = elems(s);
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < in->nops; d++)
    coord[d] = mapped(L, in->ops[d]);
  clamp_coords(L, s, coord, in->mem.index);
  oxi_mem m = shared_array(L, in->type, E);
  oxi_block *done = oxi_block_new(L->m, L->nk), *edge;
  begin_if(L, whole_tile_inside(L, s, false, coord, in->mem.index), &edge);
  counted_loop lp;
  oxi_instr *inb, *f = s_loop(L, &lp, E);
  shared_store(L, m, f, load_at(L, in, s_site(L, s, coord, in->mem.index, f, &inb)), NULL);
  end_loop(L, &lp, f);
  end_if(L, done);
  L->cur = edge;
  f = s_loop(L, &lp, E);
  oxi_instr *index = s_site(L, s, coord, in->mem.index, f, &inb);
  int v = oxi_slot_new(L->m, L->nk, in->type);
  oxi_instr *pad = emit(L, OXI_CONST, in->type);
  pad->imm = in->imm;
  pad->fimm = in->fimm;
  set_slot(L, v, pad);
  oxi_block *join;
  begin_if(L, inb, &join);
  set_slot(L, v, load_at(L, in, index));
  end_if(L, join);
  shared_store(L, m, f, get_slot(L, v), NULL);
  end_loop(L, &lp, f);
  end_if(L, done);
  s_set_buf(L, in, m);
}

static void s_store(lowerer *L, const oxi_instr *in) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  const oxi_tshape *s = in->ops[0]->tshape;
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < p->rank; d++)
    coord[d] = tile_id(L, in->mem.index, d);
  clamp_coords(L, s, coord, in->mem.index);
  counted_loop lp;
  oxi_instr *inb, *f = s_loop(L, &lp, elems(s));
  oxi_instr *index = s_site(L, s, coord, in->mem.index, f, &inb);
  oxi_block *join;
  begin_if(L, inb, &join);
  store_at(L, in, index, s_elem(L, in->ops[0], f));
  end_if(L, join);
  end_loop(L, &lp, f);
}

/* Position in a tile of shape `src` of the element that element f of a tile
 * of shape `dst` reads: a broadcast (src dims of 1 read coordinate 0) or a
 * permute (`perm`: dst dim d is src dim perm[d]; NULL: the same dims). */
static oxi_instr *s_source(lowerer *L, const oxi_tshape *src, const oxi_tshape *dst, const int *perm,
                           oxi_instr *f) {
  int64_t stride[OXI_MAX_RANK], after = 1;
  for (int d = src->rank - 1; d >= 0; d--)
    stride[d] = after, after *= src->dims[d];
  oxi_instr *g = NULL;
  for (int d = 0; d < dst->rank; d++) {
    int sd = perm ? perm[d] : d;
    if (src->dims[sd] == 1)
      continue;
    oxi_instr *term = bin(L, OXI_MUL, OX_U64, coord_at(L, dst, d, f), cu64(L, (uint64_t)stride[sd]));
    g = g ? bin(L, OXI_ADD, OX_U64, g, term) : term;
  }
  return g ? g : cu64(L, 0);
}

static void s_move(lowerer *L, const oxi_instr *in) {
  const oxi_instr *src = in->ops[0];
  if (L->splat[src->id]) { /* every element is still the one scalar */
    L->sval[in->id] = mapped(L, src);
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
  int64_t E = elems(in->tshape);
  oxi_mem m = shared_array(L, in->type, E);
  counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, E);
  shared_store(L, m, f, s_elem(L, src, s_source(L, src->tshape, in->tshape, pp, f)), NULL);
  end_loop(L, &lp, f);
  s_set_buf(L, in, m);
}

static void s_iota(lowerer *L, const oxi_instr *in) {
  int64_t E = elems(in->tshape);
  oxi_mem m = shared_array(L, in->type, E);
  counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, E);
  shared_store(L, m, f, cast(L, coord_at(L, in->tshape, in->index, f), in->type), NULL);
  end_loop(L, &lp, f);
  s_set_buf(L, in, m);
}

/* A reduction along axis a, of `len` elements `inner` apart per result, as
 * a tree: a copy of the source is halved log2(len) times, each element of
 * the first half combined with its partner in the second. Each halving is a
 * loop without a carried dependence (LLVM vectorizes it, where a running sum
 * in f32 would stay serial), and the rounding error grows with log2(len),
 * not len, as on the GPU. One result (a whole tile's) stays a scalar. */
static void s_reduce(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *src = in->ops[0]->tshape;
  int a = in->index, sub = in->sub;
  oxi_type t = in->type;
  int64_t len = src->dims[a], inner = 1, R = elems(in->tshape);
  for (int d = a + 1; d < src->rank; d++)
    inner *= src->dims[d];
  oxi_mem tmp = shared_array(L, t, elems(src));
  s_copy(L, tmp, in->ops[0], elems(src));
  int li = log2i(inner);
  for (int64_t span = len / 2; span >= 1; span /= 2) {
    /* q = (o, k, i), k < span: tmp[o][k][i] op= tmp[o][k + span][i] */
    counted_loop lp;
    oxi_instr *q = s_loop(L, &lp, R * span);
    oxi_instr *o = bin(L, OXI_SHR, OX_U64, q, cu64(L, (uint64_t)(log2i(span) + li)));
    oxi_instr *ki = bin(L, OXI_AND, OX_U64, q, cu64(L, (uint64_t)(span * inner - 1)));
    oxi_instr *at = bin(L, OXI_ADD, OX_U64, bin(L, OXI_SHL, OX_U64, o, cu64(L, (uint64_t)log2i(len * inner))), ki);
    oxi_instr *x = shared_load(L, tmp, t, at);
    oxi_instr *y = shared_load(L, tmp, t, bin(L, OXI_ADD, OX_U64, at, cu64(L, (uint64_t)(span * inner))));
    shared_store(L, tmp, at, combine(L, sub, t, x, y), NULL);
    end_loop(L, &lp, q);
  }
  if (R == 1) {
    L->sval[in->id] = shared_load(L, tmp, t, cu64(L, 0));
    L->splat[in->id] = 1;
    return;
  }
  /* result r = (o, i) is at tmp[o][0][i] */
  oxi_mem m = shared_array(L, t, R);
  counted_loop lp;
  oxi_instr *r = s_loop(L, &lp, R);
  oxi_instr *at = bin(L, OXI_ADD, OX_U64,
                      bin(L, OXI_SHL, OX_U64, bin(L, OXI_SHR, OX_U64, r, cu64(L, (uint64_t)li)),
                          cu64(L, (uint64_t)log2i(len * inner))),
                      bin(L, OXI_AND, OX_U64, r, cu64(L, (uint64_t)(inner - 1))));
  shared_store(L, m, r, shared_load(L, tmp, t, at), NULL);
  end_loop(L, &lp, r);
  s_set_buf(L, in, m);
}

/* dot: the result (f32) starts as the accumulator or zero, and for each row
 * i and each k, row k of b times a[i][k] is added to row i: the innermost
 * loop runs along rows, which LLVM vectorizes. */
static void s_dot(lowerer *L, const oxi_instr *in) {
  const oxi_instr *a = in->ops[0], *b = in->ops[1];
  int64_t M = a->tshape->dims[0], K = a->tshape->dims[1], N = b->tshape->dims[1];
  oxi_mem m = shared_array(L, OX_F32, M * N);
  if (in->nops == 3) {
    s_copy(L, m, in->ops[2], M * N);
  } else {
    counted_loop lp;
    oxi_instr *f = s_loop(L, &lp, M * N), *z = emit(L, OXI_CONST, OX_F32);
    z->fimm = 0;
    shared_store(L, m, f, z, NULL);
    end_loop(L, &lp, f);
  }
  counted_loop li, lk, lj;
  oxi_instr *i = s_loop(L, &li, M);
  oxi_instr *k = s_loop(L, &lk, K);
  oxi_instr *x = cast(L, s_elem(L, a, bin(L, OXI_ADD, OX_U64, bin(L, OXI_MUL, OX_U64, i, cu64(L, (uint64_t)K)), k)),
                      OX_F32);
  oxi_instr *j = s_loop(L, &lj, N);
  oxi_instr *y = cast(L, s_elem(L, b, bin(L, OXI_ADD, OX_U64, bin(L, OXI_MUL, OX_U64, k, cu64(L, (uint64_t)N)), j)),
                      OX_F32);
  oxi_instr *at = bin(L, OXI_ADD, OX_U64, bin(L, OXI_MUL, OX_U64, i, cu64(L, (uint64_t)N)), j);
  oxi_instr *sum = shared_load(L, m, OX_F32, at);
  oxi_instr *fma = emit(L, OXI_MATH, OX_F32);
  fma->sub = OXI_M_FMA;
  fma->ops[0] = x;
  fma->ops[1] = y;
  fma->ops[2] = sum;
  fma->nops = 3;
  shared_store(L, m, at, fma, NULL);
  end_loop(L, &lj, j);
  end_loop(L, &lk, k);
  end_loop(L, &li, i);
  s_set_buf(L, in, m);
}

static void s_atomic(lowerer *L, const oxi_instr *in) {
  const oxi_param *p = L->k->params.items[in->mem.index];
  counted_loop lp;
  if (in->sub == 0) { /* a tile added at tile coordinates */
    const oxi_instr *v = in->ops[p->rank];
    oxi_instr *coord[OXI_MAX_RANK];
    for (int d = 0; d < p->rank; d++)
      coord[d] = mapped(L, in->ops[d]);
    clamp_coords(L, v->tshape, coord, in->mem.index);
    oxi_instr *inb, *f = s_loop(L, &lp, elems(v->tshape));
    oxi_instr *index = s_site(L, v->tshape, coord, in->mem.index, f, &inb);
    atomic_at(L, in, inb, index, s_elem(L, v, f));
    end_loop(L, &lp, f);
    return;
  }
  /* a scatter: element e of the values to the index in element e of the indices */
  oxi_instr *dim = param_info(L, OXI_DIM, in->mem.index, 0), *stride = param_info(L, OXI_STRIDE, in->mem.index, 0);
  oxi_instr *f = s_loop(L, &lp, elems(in->ops[0]->tshape));
  oxi_instr *idx = s_elem(L, in->ops[0], f);
  atomic_at(L, in, bin(L, LT, OX_U64, idx, dim), bin(L, OXI_MUL, OX_U64, idx, stride), s_elem(L, in->ops[1], f));
  end_loop(L, &lp, f);
}

/* A `let mut` tile: a buffer of its own; a read copies it out, since the
 * variable may be assigned while the value read is still in use. */
static void s_tile_var(lowerer *L, const oxi_instr *in) {
  const oxi_tshape *s = in->op == OXI_VAR_GET ? in->tshape : in->ops[0]->tshape;
  int64_t E = elems(s);
  if (!L->tslots[in->index]) {
    L->tslots[in->index] = oxb_alloc(L->m->arena, sizeof(int));
    L->tslots[in->index][0] = shared_array(L, in->op == OXI_VAR_GET ? in->type : in->ops[0]->type, E).index;
  }
  oxi_mem var = {OXI_MEM_SHARED, L->tslots[in->index][0]};
  if (in->op == OXI_VAR_SET) {
    s_copy(L, var, in->ops[0], E);
    return;
  }
  oxi_mem m = shared_array(L, in->type, E);
  counted_loop lp;
  oxi_instr *f = s_loop(L, &lp, E);
  shared_store(L, m, f, shared_load(L, var, in->type, f), NULL);
  end_loop(L, &lp, f);
  s_set_buf(L, in, m);
}

static void serial_instr(lowerer *L, const oxi_instr *in) {
  switch (in->op) {
  case OXI_T_LOAD: s_load(L, in); return;
  case OXI_T_STORE: s_store(L, in); return;
  case OXI_T_SPLAT:
    L->sval[in->id] = mapped(L, in->ops[0]);
    L->splat[in->id] = 1;
    return;
  case OXI_T_DOT: s_dot(L, in); return;
  case OXI_T_ATOMIC_ADD: s_atomic(L, in); return;
  case OXI_VAR_GET:
  case OXI_VAR_SET:
    if (in->tshape || (in->op == OXI_VAR_SET && in->ops[0]->tshape)) {
      s_tile_var(L, in);
      return;
    }
    break;
  case OXI_T_REDUCE: s_reduce(L, in); return;
  case OXI_T_BROADCAST:
  case OXI_T_RESHAPE:
  case OXI_T_PERMUTE: s_move(L, in); return;
  case OXI_T_IOTA: s_iota(L, in); return;
  case OXI_T_ID: L->sval[in->id] = tile_id(L, in->mem.index, in->index); return;
  case OXI_T_COUNT: L->sval[in->id] = tile_count(L, in->mem.index, in->index); return;
  default: break;
  }
  if (in->tshape) {
    s_elementwise(L, in);
    return;
  }
  oxi_instr *c = clone(L, in);
  if (in->id >= 0)
    L->sval[in->id] = c;
}

static void lower_instr(lowerer *L, const oxi_instr *in) {
  if (L->serial) {
    serial_instr(L, in);
    return;
  }
  switch (in->op) {
  case OXI_T_LOAD: lower_load(L, in); return;
  case OXI_T_STORE: lower_store(L, in); return;
  case OXI_T_SPLAT: {
    oxi_instr **out = new_elements(L, in->tshape);
    int a = count_in(L, in->tshape, false), b = count_in(L, in->tshape, true);
    for (int e = 0; e < (a > b ? a : b); e++)
      out[e] = mapped(L, in->ops[0]);
    L->tval[in->id] = out;
    L->everywhere[in->id] = true; /* tile code is the same in every thread */
    return;
  }
  case OXI_T_DOT: lower_dot(L, in); return;
  case OXI_T_ATOMIC_ADD: lower_atomic(L, in); return;
  case OXI_VAR_GET:
  case OXI_VAR_SET:
    if (in->tshape || (in->op == OXI_VAR_SET && in->ops[0]->tshape)) {
      tile_var(L, in);
      return;
    }
    break;
  case OXI_T_REDUCE: lower_reduce(L, in); return;
  case OXI_T_BROADCAST: lower_broadcast(L, in); return;
  case OXI_T_RESHAPE:
  case OXI_T_PERMUTE: lower_move(L, in); return;
  case OXI_T_IOTA: lower_iota(L, in); return;
  case OXI_T_ID: L->sval[in->id] = tile_id(L, in->mem.index, in->index); return;
  case OXI_T_COUNT: L->sval[in->id] = tile_count(L, in->mem.index, in->index); return;
  case OXI_RET:
    if (L->pipelined) { /* no copy may land after the block has given its shared memory back */
      oxi_instr *w = emit(L, OXI_CP_WAIT, OXI_VOID);
      w->imm = 0;
      if (L->wg) /* nor a wgmma read it */
        wg_sync(L, NULL, 2, 0);
    }
    break;
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

static bool is_elementwise(const oxi_instr *in) {
  return in->tshape && (in->op == OXI_BIN || in->op == OXI_CMP || in->op == OXI_NEG || in->op == OXI_NOT ||
                        in->op == OXI_CAST || in->op == OXI_SELECT || in->op == OXI_MATH);
}

/* Which values and tile slots live in the mma layout: dots on tensor cores,
 * elementwise ops with an operand that does (so `acc + dot(a, b)` stays in
 * it; other operands move to it), and slots that such a value is assigned to, with what is read from them; to a fixed
 * point, since a loop reads a slot before the assignment that sets it. */
static void choose_layouts(lowerer *L) {
  const oxi_kernel *k = L->k;
  for (bool changed = true; changed;) {
    changed = false;
    for (int bi = 0; bi < k->blocks.len; bi++) {
      const oxi_block *b = k->blocks.items[bi];
      for (int ii = 0; ii < b->instrs.len; ii++) {
        const oxi_instr *in = b->instrs.items[ii];
        if (in->op == OXI_T_SPLAT)
          L->splat[in->id] = 1;
        if (in->op == OXI_VAR_SET && in->ops[0]->tshape && is_mma(L, in->ops[0]) && !L->slot_mma[in->index])
          L->slot_mma[in->index] = changed = true;
        if (in->id < 0 || L->mma[in->id])
          continue;
        bool mma = false;
        if (in->op == OXI_T_DOT)
          mma = L->cuda && dot_on_tensor_cores(L, in);
        else if (in->op == OXI_VAR_GET && in->tshape)
          mma = L->slot_mma[in->index];
        else if (is_elementwise(in)) /* with any operand in it (the others move to it) */
          for (int i = 0; i < in->nops; i++)
            mma |= in->ops[i]->tshape && is_mma(L, in->ops[i]);
        if (mma)
          L->mma[in->id] = changed = true;
      }
    }
  }
}

/* Whether block `b` of the tile kernel is in a loop: it reaches itself. */
static bool in_loop(const oxi_kernel *k, const oxi_block *b) {
  char *seen = calloc((size_t)k->blocks.len, 1);
  int *stack = malloc(sizeof *stack * (size_t)k->blocks.len), n = 0;
  bool found = false;
  stack[n++] = b->id;
  while (n && !found) {
    const oxi_block *x = k->blocks.items[stack[--n]];
    const oxi_instr *term = oxi_terminator(x);
    for (int t = 0; term && t < 2 && !found; t++) {
      const oxi_block *y = term->target[t];
      if (!y || seen[y->id])
        continue;
      found = y == b;
      seen[y->id] = 1;
      stack[n++] = y->id;
    }
  }
  free(seen);
  free(stack);
  return found;
}

/* Loads whose one use is a tensor-core dot, from a contiguous16 tensor with
 * rows of whole 16-byte pieces: the dot copies them itself (copy_async). A
 * dot in a loop with both operands copied so is pipelined (dot_pipeline): its
 * slots are made here and cleared at the kernel's entry. */
static void choose_direct_loads(lowerer *L) {
  const oxi_kernel *k = L->k;
  int *uses = calloc((size_t)k->next_id + 1, sizeof *uses);
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      for (int i = 0; i < in->nops; i++)
        if (in->ops[i]->id >= 0)
          uses[in->ops[i]->id]++;
    }
  }
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->op != OXI_T_DOT || !L->mma[in->id])
        continue;
      for (int i = 0; i < 2; i++) {
        const oxi_instr *ld = in->ops[i];
        const oxi_param *p = ld->op == OXI_T_LOAD ? k->params.items[ld->mem.index] : NULL;
        if (p && p->contiguous16 && uses[ld->id] == 1 && ld->tshape->dims[1] % 8 == 0 &&
            ld->imm == 0 && ld->fimm == 0) /* zero padding: what cp.async fills in */
          L->direct[ld->id] = 1;
      }
      /* staging areas of A [M, K] and B [K, N]: 3 if they fit. On the
       * H200 (mma.sync), 2 measured 1-2% slower and 4 much slower (one
       * block an SM instead of two) */
      int64_t area = staging_of(L, in).area * ox_dtype_size((ox_dtype)in->ops[0]->type);
      int64_t fit = L->shared_limit * 3 / 4 / area; /* a quarter left for the rest */
      int S = (int)(fit < 3 ? fit : 3);
      if (L->wg) { /* one area more (dot_pipeline) */
        fit = (L->shared_limit - 8192) / area;
        S = (int)(fit < 4 ? fit : 4);
      }
      if (L->direct[in->ops[0]->id] && L->direct[in->ops[1]->id] && in_loop(k, b) && S >= (L->wg ? 3 : 2)) {
        static const oxi_type types[6] = {OX_BOOL, OX_U64, OX_U64, OX_U64, OX_U64, OX_U64};
        L->pipe[in->id].stages = S;
        L->pipelined = true;
        for (int i = 0; i < 6; i++) {
          int s = oxi_slot_new(L->m, L->nk, types[i]);
          if (!i)
            L->pipe[in->id].slot = s;
        }
      }
    }
  }
  free(uses);
}

/* Whether the pipelined kernel being lowered runs its blocks in grouped order
 * (group_tiles). Measured on the H200 (TFLOP/s at 8192^3, grouped vs plain):
 * mma.sync 128 x 128 x 64, 373 vs 349; wgmma 128 x 256 x 64, 545 vs 640;
 * wgmma 128 x 128 x 64, 436 vs 476; wgmma 128 x 128 x 32, 445 vs 312. So
 * wgmma kernels group only when a pipelined dot's K tile is under 64. Every
 * group size from 2 to 64 (64: whole columns first) gave the same figures
 * within 2%, so what matters is whether consecutive blocks share a B tile
 * (grouped) or an A tile (plain), not L2 reuse by a wave; why is not
 * understood. */
static bool grouped_order(const lowerer *L) {
  if (!L->wg)
    return true;
  for (int bi = 0; bi < L->k->blocks.len; bi++) {
    const oxi_block *b = L->k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->op == OXI_T_DOT && L->pipe[in->id].stages && in->ops[0]->tshape->dims[1] < 64)
        return true;
    }
  }
  return false;
}

/* Tile ids of a rank-2 partition in grouped order, for kernels with a
 * pipelined dot (a matmul) when grouped_order says so: blocks run in launch order, blockIdx.x fastest,
 * and in plain order one wave of blocks covers a few rows of tiles and every
 * column, so it reads all of B from memory and the next wave reads it again.
 * Grouped, consecutive blocks walk down a group of G rows of tiles before
 * moving one column right, so a wave covers a square-ish patch whose A rows
 * and B columns stay in L2. Any order is correct: each block owns the tile
 * its ids name, and every use of the ids (loads, the store) sees the same. */
static void group_tiles(lowerer *L) {
  const int G = 8; /* rows of tiles in a group: +7% at 8192^3 on the H200, as much as 16 */
  int out = -1;
  for (int i = 0; i < L->k->params.len; i++) {
    const oxi_param *p = L->k->params.items[i];
    if (p->kind == OXI_P_TILE && p->rank != 2)
      return; /* its ids come from the grid as is: keep one order for all */
    if (p->kind == OXI_P_TILE)
      out = i;
  }
  if (out < 0)
    return;
  oxi_instr *gx = tile_count(L, out, 1), *gy = tile_count(L, out, 0);
  oxi_instr *l = bin(L, OXI_ADD, OX_U64, sreg64(L, OXI_SREG_CTAID_X),
                     bin(L, OXI_MUL, OX_U64, sreg64(L, OXI_SREG_CTAID_Y), gx));
  oxi_instr *per_group = bin(L, OXI_MUL, OX_U64, gx, cu64(L, (uint64_t)G));
  oxi_instr *first = bin(L, OXI_MUL, OX_U64, bin(L, OXI_DIV, OX_U64, l, per_group), cu64(L, (uint64_t)G));
  oxi_instr *rows = combine(L, OXI_MIN, OX_U64, bin(L, OXI_SUB, OX_U64, gy, first), cu64(L, (uint64_t)G));
  oxi_instr *in = bin(L, OXI_REM, OX_U64, l, per_group);
  L->grouped[0] = bin(L, OXI_ADD, OX_U64, first, bin(L, OXI_REM, OX_U64, in, rows));
  L->grouped[1] = bin(L, OXI_DIV, OX_U64, in, rows);
}

/* Whether tensor-core dot `in` suits wgmma.m64nNk16 as dot_wg issues it:
 * bf16/f16 operands, M 64 or 128 (one or two warpgroups; 256 would leave too
 * few registers a thread), K a power of two from 16 (tc_operands; A's rows
 * swizzled by 32, 64 or 128 bytes) and N of 64 up to 256 (whole 128-byte
 * swizzle atoms for B). */
static bool wg_operands(const oxi_instr *in) {
  oxi_type t = in->ops[0]->type;
  int64_t M = in->tshape->dims[0], N = in->tshape->dims[1];
  return (t == OX_BF16 || t == OX_F16) && (M == 64 || M == 128) && N % 64 == 0 && N <= 256;
}

/* Threads per block: from the largest tile, so that each thread holds a few
 * 16-byte chunks of it and at most MAX_PER_THREAD elements. A dot on tensor
 * cores asks for one warp per 64 x 64 of its result (4 to 8 warps): that warp
 * tile reuses each operand fragment 8 times (a 64 x 32 one, 4 to 8), which is
 * what keeps the tensor cores busy; each thread then holds 128 accumulator
 * elements. On sm_90, if every tensor-core dot suits wgmma with the same M
 * and the other tiles allow, dots run on wgmma (*wg) with one warp per 16
 * rows: 2M threads. Returns 0 if the largest tile (`*emax` elements) is more
 * than 1024 threads hold (`*most`). */
static int64_t block_threads(const oxi_kernel *k, int sm, int64_t *emax_out, int64_t *most, bool *wg) {
  int64_t emax = 1, dot = 0, wg_m = 0;
  bool wg_all = sm == 90;
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->tshape && elems(in->tshape) > emax)
        emax = elems(in->tshape);
      if (sm && in->op == OXI_T_DOT && tc_operands(in)) {
        if (elems(in->tshape) > dot)
          dot = elems(in->tshape);
        wg_all &= wg_operands(in) && (!wg_m || wg_m == in->tshape->dims[0]);
        wg_m = in->tshape->dims[0];
      }
    }
  }
  int64_t limit = dot ? 2 * MAX_PER_THREAD : MAX_PER_THREAD;
  *emax_out = emax;
  *most = 1024 * limit;
  *wg = dot && wg_all && emax / (2 * wg_m) <= limit;
  if (*wg)
    return 2 * wg_m;
  int64_t T = emax / 4 < 1 ? 1 : emax / 4 > 128 ? 128 : emax / 4;
  while (T < 1024 && emax / T > limit)
    T *= 2;
  int64_t warps = dot / 4096 < 4 ? 4 : dot / 4096 > 8 ? 8 : dot / 4096;
  if (dot && T < 32 * warps)
    T = 32 * warps;
  return emax / T > limit ? 0 : T;
}

/* The lowered kernel against the compiler's size limits (front/limits.h),
 * after lowering `in`: the error names in's source construct, whose expansion
 * crossed the limit (the kernel's own location if it has none). `others`:
 * instructions of the module's other kernels. */
static ox_status check_size(const lowerer *L, const oxi_instr *in, int64_t others) {
  const oxi_kernel *k = L->k, *nk = L->nk;
  int line = in->line ? in->line : k->line, col = in->line ? in->col : k->col;
  const char *file = L->m->filename;
  if (nk->ninstrs > OXF_MAX_LOWERED_INSTRS)
    return oxb_set_error(OX_ERR_COMPILE,
                         "%s:%d:%d: error: kernel '%s' is too large after the tile lowering: more "
                         "than %d IR instructions, the compiler's limit (each thread's share of a "
                         "tile is unrolled: use smaller tiles or fewer tile operations)\n",
                         file, line, col, k->name, OXF_MAX_LOWERED_INSTRS);
  if (nk->nloops > OXF_MAX_KERNEL_LOOPS)
    return oxb_set_error(OX_ERR_COMPILE,
                         "%s:%d:%d: error: kernel '%s' has more than %d loops after the tile "
                         "lowering, the compiler's limit (the lowering loops over tiles: on the "
                         "CPU each tile operation is a loop; use fewer tile operations)\n",
                         file, line, col, k->name, OXF_MAX_KERNEL_LOOPS);
  if ((int64_t)nk->nloops * nk->ninstrs > OXF_MAX_LOOP_WORK)
    return oxb_set_error(OX_ERR_COMPILE,
                         "%s:%d:%d: error: kernel '%s' has too many loops for its size after the "
                         "tile lowering: %d loops in %d IR instructions, and the compiler's limit "
                         "on loops times instructions is %d (the lowering loops over tiles: on the "
                         "CPU each tile operation is a loop; use fewer tile operations)\n",
                         file, line, col, k->name, nk->nloops, nk->ninstrs, OXF_MAX_LOOP_WORK);
  if (others + nk->ninstrs > OXF_MAX_LOWERED_SOURCE_INSTRS)
    return oxb_set_error(OX_ERR_COMPILE,
                         "%s:%d:%d: error: the kernels of this source are too large together "
                         "after the tile lowering: more than %d IR instructions, the compiler's "
                         "limit\n", file, line, col, OXF_MAX_LOWERED_SOURCE_INSTRS);
  return OX_OK;
}

ox_status oxt_lower(oxi_module *m, oxi_kernel *k, int sm, int64_t shared_limit) {
  assert(k->is_tile);
  bool cuda = sm != 0, wg;
  int64_t emax, most, T = block_threads(k, sm, &emax, &most, &wg);
  if (!T)
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         "%s:%d:%d: kernel '%s' has a tile of %lld elements; this version of the "
                         "tile lowering handles at most %lld",
                         m->filename, k->line, k->col, k->name, (long long)emax, (long long)most);
  lowerer L = {0};
  L.m = m;
  L.k = k;
  L.serial = !cuda;
  L.T = L.serial ? 1 : (int)T;
  L.cuda = cuda;
  L.wg = wg;
  L.shared_limit = shared_limit;
  oxi_kernel *nk = oxb_alloc(m->arena, sizeof *nk);
  *nk = *k;
  nk->blocks.items = NULL;
  nk->blocks.len = nk->blocks.cap = 0;
  nk->ninstrs = 0; /* counted afresh; its loops (the kernel's own) stay counted */
  L.nk = nk;
  int64_t others = 0; /* the module's other kernels, for the source's limit */
  for (int i = 0; i < m->kernels.len; i++)
    if (m->kernels.items[i] != k)
      others += ((oxi_kernel *)m->kernels.items[i])->ninstrs;
  ox_status st = OX_OK;
  size_t nv = (size_t)k->next_id + 1, ns = (size_t)k->slots.len + 1;
  L.sval = calloc(nv, sizeof *L.sval);
  L.tval = calloc(nv, sizeof *L.tval);
  L.everywhere = calloc(nv, sizeof *L.everywhere);
  L.mma = calloc(nv, 1);
  L.splat = calloc(nv, 1);
  L.slot_mma = calloc(ns, 1);
  L.direct = calloc(nv, 1);
  L.pipe = calloc(nv, sizeof *L.pipe);
  L.tslots = calloc(ns, sizeof *L.tslots);
  L.vacc = calloc(nv, sizeof *L.vacc);
  L.vslot = calloc(ns, sizeof *L.vslot);
  L.nb = calloc((size_t)k->blocks.len, sizeof *L.nb);
  L.buf = calloc(nv, sizeof *L.buf);
  if (!L.serial) { /* the CPU has one layout, a buffer, and no tensor cores */
    choose_layouts(&L);
    choose_direct_loads(&L);
  }
  int user_shared = k->shared.len;
  for (int bi = 0; bi < k->blocks.len; bi++)
    L.nb[bi] = oxi_block_new(m, nk);
  for (int bi = 0; bi < k->blocks.len && !st; bi++) {
    L.cur = L.nb[bi];
    if (bi == 0) { /* blocks are (T, 1, 1): the thread's index is tid.x */
      L.t = sreg64(&L, OXI_SREG_TID_X);
      if (L.pipelined && grouped_order(&L))
        group_tiles(&L);
      for (int i = 0; i < k->params.len; i++) /* contiguous16 tensors start 16-byte aligned */
        if (((oxi_param *)k->params.items[i])->contiguous16) {
          oxi_instr *a = emit(&L, OXI_ALIGNED, OX_BOOL);
          a->mem.kind = OXI_MEM_PARAM;
          a->mem.index = i;
          a->imm = 16;
          oxi_instr *as = emit(&L, OXI_ASSUME, OXI_VOID);
          as->ops[0] = a;
          as->nops = 1;
        }
      for (int i = 0; i <= k->next_id; i++) /* no prefetch in flight; staging area 0 */
        for (int s = 0; L.pipe[i].stages && s < 6; s++)
          set_slot(&L, L.pipe[i].slot + s, s ? cu64(&L, 0) : zero_bool(&L));
    }
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len && !st; ii++) {
      lower_instr(&L, b->instrs.items[ii]);
      st = check_size(&L, b->instrs.items[ii], others);
    }
  }
  free(L.sval);
  free(L.tval);
  free(L.everywhere);
  free(L.mma);
  free(L.splat);
  free(L.slot_mma);
  free(L.direct);
  free(L.pipe);
  free(L.tslots);
  free(L.vacc);
  free(L.vslot);
  free(L.nb);
  free(L.buf);
  if (st)
    return st;
  /* the scratch arrays, after what the kernel had */
  for (int i = user_shared; i < nk->shared.len; i++) {
    oxi_shared *sh = nk->shared.items[i];
    int64_t align = sh->align > 16 ? sh->align : 16;
    sh->offset = (nk->shared_bytes + align - 1) & ~(align - 1);
    nk->shared_bytes = sh->offset + sh->count * (int64_t)ox_dtype_size(sh->dtype);
  }
  if (!L.serial && nk->shared_bytes > shared_limit)
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         "%s:%d:%d: kernel '%s' needs %lld bytes of shared memory for its reductions, "
                         "layout changes and dot operands; a block has %lld here (use smaller tiles)",
                         m->filename, k->line, k->col, k->name, (long long)nk->shared_bytes,
                         (long long)shared_limit);
  /* the CPU's blocks keep their tile values in the worker's own memory, one
     buffer a value: no device limit, but a bound, so that a kernel with very
     many large tiles fails here rather than in an allocation per worker */
  if (L.serial && nk->shared_bytes > OXT_CPU_BLOCK_MAX)
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         "%s:%d:%d: kernel '%s' needs %lld bytes for the tile values of one block on the "
                         "CPU; at most %lld (use smaller or fewer tiles)",
                         m->filename, k->line, k->col, k->name, (long long)nk->shared_bytes,
                         (long long)OXT_CPU_BLOCK_MAX);
  k->blocks = nk->blocks;
  k->slots = nk->slots;
  k->next_id = nk->next_id;
  k->ninstrs = nk->ninstrs;
  k->nloops = nk->nloops;
  k->shared = nk->shared;
  k->shared_bytes = nk->shared_bytes;
  k->uses_sync = nk->uses_sync;
  k->is_tile = false;
  k->block[0] = L.T;
  k->block[1] = k->block[2] = 1;
  return OX_OK;
}

int64_t oxt_shared_limit(int sm) {
  switch (sm) {
  case 80:
  case 87: return 163 * 1024;
  case 86:
  case 89:
  case 120:
  case 121: return 99 * 1024;
  default: return OXI_SHARED_MAX; /* sm_90, sm_100, sm_103 */
  }
}
