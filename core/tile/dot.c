/* dot.c - dot on CUDA: on tensor cores with wgmma (sm_90) or mma.sync, from
 * operands staged in shared memory (swizzled for wgmma, padded rows for
 * mma.sync), copied there with cp.async and pipelined over a ring of staging
 * areas when the dot is in a loop; elsewhere (f32, small tiles) a plain loop.
 * Also the plan for which loads a dot copies itself (choose_direct_loads). */
#include <stdlib.h>

#include "tile/lower.h"

/* Where element (r, c) of an [R, C] operand tile of `es`-byte elements (2,
 * or 1 for fp8) is staged for wgmma, with swizzle width w (swizzle_bytes):
 * C / (w/es) panels of R rows of w bytes, each 8 rows an atom (8w bytes) in
 * which 16-byte piece p of row r sits at piece p ^ (r·w/128 mod w/16) (the
 * swizzle, so that the 8 rows of a column of pieces fall in distinct banks).
 * `c` is a multiple of 16/es, a piece's elements. In elements from the
 * operand's start. */
static oxi_instr *swizzled(oxt_lowerer *L, oxi_instr *r, oxi_instr *c, int64_t R, int64_t C, int64_t es) {
  int64_t w = oxt_swizzle_bytes(C * es), E = w / es, pieces = w / 16, epp = 16 / es;
  oxi_instr *panel = oxt_bin(L, OXI_MUL, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, c, oxt_u64(L, (uint64_t)oxt_log2i(E))),
                         oxt_u64(L, (uint64_t)(R * E)));
  oxi_instr *flip = oxt_bin(L, OXI_AND, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, r, oxt_u64(L, (uint64_t)oxt_log2i(128 / w))),
                        oxt_u64(L, (uint64_t)(pieces - 1)));
  uint64_t lp = (uint64_t)oxt_log2i(epp);
  oxi_instr *piece = oxt_bin(L, OXI_XOR, OX_U64,
                         oxt_bin(L, OXI_AND, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, c, oxt_u64(L, lp)), oxt_u64(L, (uint64_t)(pieces - 1))),
                         flip);
  return oxt_bin(L, OXI_ADD, OX_U64, panel,
             oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_MUL, OX_U64, r, oxt_u64(L, (uint64_t)E)),
                 oxt_bin(L, OXI_SHL, OX_U64, piece, oxt_u64(L, lp))));
}

/* Writes the elements (in the layout it is held in) of a [R, C] tile to shared memory `m` at
 * `base` + row * `pitch` + col: one address per thread plus constants; or
 * (pitch 0) swizzled for wgmma, an address an element. */
static void stage(oxt_lowerer *L, const oxi_instr *old, oxi_mem m, int64_t base, int64_t pitch) {
  const oxi_tshape *s = old->tshape;
  bool mma = oxt_is_mma(L, old); /* from the layout it is held in: the mma layout's positions are
                                    one value a thread plus constants too */
  int n = oxt_count_in(L, s, mma);
  int64_t *off = oxb_malloc(sizeof *off * (size_t)n);
  oxi_instr *fb = oxt_position_parts(L, s, mma, off);
  oxi_instr **v = oxt_in_layout(L, old, mma);
  if (!pitch) {
    int64_t es = (int64_t)ox_dtype_size((ox_dtype)old->type), epp = 16 / es; /* elements a 16-byte piece */
    for (int e = 0; e < n; e++) {
      oxi_instr *f = oxt_bin(L, OXI_ADD, OX_U64, fb, oxt_u64(L, (uint64_t)off[e]));
      oxi_instr *c = oxt_coord_at(L, s, 1, f);
      oxi_instr *at = oxt_bin(L, OXI_ADD, OX_U64,
                          swizzled(L, oxt_coord_at(L, s, 0, f), oxt_bin(L, OXI_AND, OX_U64, c, oxt_u64(L, ~(uint64_t)(epp - 1))),
                                   s->dims[0], s->dims[1], es),
                          oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_AND, OX_U64, c, oxt_u64(L, (uint64_t)(epp - 1))),
                              oxt_u64(L, (uint64_t)base)));
      oxt_shared_store(L, m, at, v[e], oxt_exists(L, s, mma, f));
    }
    free(off);
    return;
  }
  oxi_instr *a0 = oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_MUL, OX_U64, oxt_coord_at(L, s, 0, fb), oxt_u64(L, (uint64_t)pitch)),
                      oxt_bin(L, OXI_ADD, OX_U64, oxt_coord_at(L, s, 1, fb), oxt_u64(L, (uint64_t)base)));
  for (int e = 0; e < n; e++) {
    int64_t k = oxt_coord_of(s, 0, off[e]) * pitch + oxt_coord_of(s, 1, off[e]);
    oxi_instr *ok = oxt_exists(L, s, mma, oxt_bin(L, OXI_ADD, OX_U64, fb, oxt_u64(L, (uint64_t)off[e])));
    oxt_shared_store(L, m, oxt_bin(L, OXI_ADD, OX_U64, a0, oxt_u64(L, (uint64_t)k)), v[e], ok);
  }
  free(off);
}

/* A load that only a tensor-core dot uses, copied from the tensor straight to
 * the dot's staging area in 16-byte pieces (cp.async.cg, no registers): each
 * row of the [R, C] tile is C/epp pieces of epp elements (8 of 16 bits, 16
 * fp8), dealt over the threads; a piece the tensor's edge cuts reads only its
 * elements inside and zero-fills the rest, which is the padding a load gives.
 * Rows are `pitch` elements apart from `base`, or (pitch 0) swizzled for
 * wgmma. */
static void copy_async(oxt_lowerer *L, const oxi_instr *ld, oxi_instr *const *at, oxi_mem m, oxi_instr *base,
                       int64_t pitch) {
  const oxi_tshape *s = ld->tshape;
  int rank = s->rank, a0 = rank - 2, a1 = rank - 1; /* leading tile dims are 1 (choose_direct_loads) */
  int64_t es = (int64_t)ox_dtype_size((ox_dtype)ld->type), epp = 16 / es;
  int64_t R = s->dims[a0], C = s->dims[a1], per_row = C / epp, pieces = R * per_row;
  int param = ld->mem.index;
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < rank; d++)
    coord[d] = at[d];
  oxt_clamp_coords(L, s, coord, param);
  oxi_instr *dim0 = oxt_param_info(L, OXI_DIM, param, a0), *dim1 = oxt_param_info(L, OXI_DIM, param, a1);
  oxi_instr *stride0 = oxt_param_info(L, OXI_STRIDE, param, a0);
  oxi_instr *row0 = oxt_bin(L, OXI_SHL, OX_U64, coord[a0], oxt_u64(L, (uint64_t)oxt_log2i(R)));
  oxi_instr *col0 = oxt_bin(L, OXI_SHL, OX_U64, coord[a1], oxt_u64(L, (uint64_t)oxt_log2i(C)));
  /* the leading dims (a batch, a head): one element each, at their coordinates */
  oxi_instr *lead = NULL, *lead_in = NULL;
  for (int d = 0; d < a0; d++) {
    oxi_instr *term = oxt_bin(L, OXI_MUL, OX_U64, coord[d], oxt_param_info(L, OXI_STRIDE, param, d));
    oxi_instr *in = oxt_bin(L, OXT_LT, OX_U64, coord[d], oxt_param_info(L, OXI_DIM, param, d));
    lead = lead ? oxt_bin(L, OXI_ADD, OX_U64, lead, term) : term;
    lead_in = lead_in ? oxt_bin(L, OXI_AND, OX_BOOL, lead_in, in) : in;
  }
  oxi_instr *interior = NULL;
  if (L->wg)
    interior = oxt_bin(L, OXI_AND, OX_BOOL, oxt_bin(L, 100 + OXI_LE, OX_U64, oxt_bin(L, OXI_ADD, OX_U64, row0, oxt_u64(L, (uint64_t)R)), dim0),
                   oxt_bin(L, 100 + OXI_LE, OX_U64, oxt_bin(L, OXI_ADD, OX_U64, col0, oxt_u64(L, (uint64_t)C)), dim1));
  if (interior && lead_in)
    interior = oxt_bin(L, OXI_AND, OX_BOOL, interior, lead_in);
  for (int path = 0; path < (interior ? 2 : 1); path++) {
    oxi_block *pjoin = NULL;
    if (interior) {
      oxi_instr *cond = interior;
      if (path) {
        cond = oxt_emit(L, OXI_NOT, OX_BOOL);
        cond->ops[0] = interior;
        cond->nops = 1;
      }
      oxt_begin_if(L, cond, &pjoin);
    }
    bool checked = !interior || path;
    for (int64_t p0 = 0; p0 < pieces; p0 += L->T) {
      oxi_instr *piece = oxt_bin(L, OXI_ADD, OX_U64, L->t, oxt_u64(L, (uint64_t)p0));
      oxi_block *join = NULL;
      if (p0 + L->T > pieces)
        oxt_begin_if(L, oxt_bin(L, OXT_LT, OX_U64, piece, oxt_u64(L, (uint64_t)pieces)), &join);
      oxi_instr *r = oxt_bin(L, OXI_SHR, OX_U64, piece, oxt_u64(L, (uint64_t)oxt_log2i(per_row)));
      oxi_instr *c = oxt_bin(L, OXI_SHL, OX_U64, oxt_bin(L, OXI_AND, OX_U64, piece, oxt_u64(L, (uint64_t)(per_row - 1))),
                         oxt_u64(L, (uint64_t)oxt_log2i(epp)));
      oxi_instr *grow = oxt_bin(L, OXI_ADD, OX_U64, row0, r), *gcol = oxt_bin(L, OXI_ADD, OX_U64, col0, c);
      oxi_instr *gidx = oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_MUL, OX_U64, grow, stride0), gcol);
      if (lead)
        gidx = oxt_bin(L, OXI_ADD, OX_U64, gidx, lead);
      oxi_instr *bytes = oxt_u64(L, 16);
      if (checked) {
        /* elements of the piece inside the tensor: 0 to epp */
        oxi_instr *inside = oxt_bin(L, OXI_AND, OX_BOOL, oxt_bin(L, OXT_LT, OX_U64, grow, dim0), oxt_bin(L, OXT_LT, OX_U64, gcol, dim1));
        if (lead_in)
          inside = oxt_bin(L, OXI_AND, OX_BOOL, inside, lead_in);
        oxi_instr *n = oxt_combine(L, OXI_MIN, OX_U64, oxt_bin(L, OXI_SUB, OX_U64, dim1, gcol), oxt_u64(L, (uint64_t)epp));
        bytes = oxt_pick(L, inside, oxt_bin(L, OXI_MUL, OX_U64, n, oxt_u64(L, (uint64_t)es)), oxt_u64(L, 0));
        gidx = oxt_pick(L, inside, gidx, oxt_u64(L, 0)); /* outside, the tensor's start, read for 0 bytes */
      }
      oxi_instr *sidx = pitch ? oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_MUL, OX_U64, r, oxt_u64(L, (uint64_t)pitch)),
                                    oxt_bin(L, OXI_ADD, OX_U64, c, base))
                              : oxt_bin(L, OXI_ADD, OX_U64, swizzled(L, r, c, R, C, es), base);
      oxi_instr *b32 = oxt_cast(L, bytes, OX_U32);
      oxi_instr *cp = oxt_emit(L, OXI_CP_ASYNC, OXI_VOID);
      cp->mem = ld->mem;
      cp->index = m.index;
      cp->ops[0] = gidx;
      cp->ops[1] = sidx;
      cp->ops[2] = b32;
      cp->nops = 3;
      if (join)
        oxt_end_if(L, join);
    }
    if (pjoin)
      oxt_end_if(L, pjoin);
  }
}

static bool is_int8(oxi_type t) { return t == OX_I8 || t == OX_U8; }

/* Whether the operands of dot `in` suit the tensor cores: bf16/f16 with K a
 * multiple of 16 (mma.sync m16n8k16), tf32 with K a multiple of 8 (m16n8k8),
 * i8/u8 with K a multiple of 32 (m16n8k32, exact i32 sums);
 * fp8 as bf16/f16, as the lowering widens what wgmma does not take as fp8
 * to f16 (oxt_fp8_on_wgmma). */
bool oxt_tc_operands(const oxi_instr *in) {
  oxi_type t = in->ops[0]->type;
  int64_t K = in->ops[0]->tshape->dims[1];
  return ((t == OX_BF16 || t == OX_F16 || oxi_is_fp8(t)) && K % 16 == 0) || (t == OX_TF32 && K % 8 == 0) ||
         (is_int8(t) && K % 32 == 0);
}

/* Whether fp8 dot `in` runs on wgmma with fp8 inputs, given that the block's
 * dots run on wgmma: one fp8 type, K a multiple of 32 (k32), and B written as
 * transpose(x), which is then staged K-major, the only form wgmma takes for
 * 8-bit inputs. Other fp8 dots are widened to f16 first (exact: every fp8
 * value is an f16 value). */
bool oxt_fp8_on_wgmma(const oxi_instr *in) {
  const oxi_instr *a = in->ops[0], *b = in->ops[1];
  return oxi_is_fp8(a->type) && b->type == a->type && a->tshape->dims[1] % 32 == 0 && oxt_wg_operands(in) &&
         b->op == OXI_T_PERMUTE && b->imm == 1;
}

/* Whether dot `in` runs on tensor cores: such operands on the CUDA target and
 * a result the block's warps can tile (mma layout). */
bool oxt_dot_on_tensor_cores(const oxt_lowerer *L, const oxi_instr *in) {
  oxt_mma_layout ml;
  return L->cuda && oxt_tc_operands(in) && oxt_mma_layout_of(L, in->tshape, &ml);
}

static oxt_staging staging_of(const oxt_lowerer *L, const oxi_instr *in) {
  int64_t M = in->ops[0]->tshape->dims[0], K = in->ops[0]->tshape->dims[1], N = in->ops[1]->tshape->dims[1];
  oxt_staging g = {0, 0, M * K, M * K + K * N};
  if (!L->wg) { /* rows padded by 16 bytes (ldmatrix's rows stay 16-byte aligned, in distinct banks) */
    int64_t es = (int64_t)ox_dtype_size((ox_dtype)in->ops[0]->type);
    g.pa = K + 16 / es;
    g.pb = N + (es == 1 ? 16 : 8);
    g.bat = M * g.pa;
    g.area = g.bat + K * g.pb;
  }
  return g;
}

/* The tile dot `in` stages as operand i: the operand, or for a K-major B
 * (L->kmajor) the tile under its transpose. */
const oxi_instr *oxt_staged_tile(const oxt_lowerer *L, const oxi_instr *in, int i) {
  return i && L->kmajor[in->id] ? in->ops[1]->ops[0] : in->ops[i];
}

/* Tile coordinates `c` (A's two, then those of the tile B is staged from)
 * moved `j` steps along K: A's column of tiles, and B's row, or its column
 * when B is K-major (staged from an [N, K] tile). A persistent block's
 * (lower.c) steps go on past A's last K tile (kt of them) to the first ones
 * of the block's next tile: A's row of tiles and B's column move by the
 * difference between the next tile's ids and this one's. A step wraps only
 * from inside, and only when kt is at least the S - 2 steps that copies run
 * ahead (j <= S - 2), so that at most one wrap lies within them: j steps at
 * once give what j steps one by one give, which the ring's guesses need. */
static void along_k(oxt_lowerer *L, const oxi_instr *in, oxi_instr *const *c, int64_t j, oxi_instr **out) {
  int kb = L->kmajor[in->id] ? 3 : 2;
  oxi_instr *step = oxt_u64(L, (uint64_t)j);
  for (int i = 0; i < 4; i++)
    out[i] = i == 1 || i == kb ? oxt_bin(L, OXI_ADD, OX_U64, c[i], step) : c[i];
  if (!L->persist || !j)
    return;
  const oxi_instr *a = in->ops[0];
  int64_t bk = a->tshape->dims[1];
  oxi_instr *kt = oxt_bin(L, OXI_SHR, OX_U64,
                      oxt_bin(L, OXI_ADD, OX_U64, oxt_param_info(L, OXI_DIM, a->mem.index, 1), oxt_u64(L, (uint64_t)(bk - 1))),
                      oxt_u64(L, (uint64_t)oxt_log2i(bk)));
  oxi_instr *wrap = oxt_bin(L, OXI_AND, OX_BOOL, oxt_bin(L, OXT_LT, OX_U64, c[1], kt),
                        oxt_bin(L, 100 + OXI_LE, OX_U64, kt, out[1]));
  wrap = oxt_bin(L, OXI_AND, OX_BOOL, wrap,
             oxt_bin(L, 100 + OXI_LE, OX_U64, oxt_u64(L, (uint64_t)(L->pipe[in->id].stages - 2)), kt));
  oxi_instr *d0 = oxt_get_slot(L, L->tile_slot + 1), *d1 = oxt_get_slot(L, L->tile_slot + 2);
  for (int i = 0; i < 4; i++) {
    oxi_instr *moved = i == 1 || i == kb ? oxt_bin(L, OXI_SUB, OX_U64, out[i], kt) /* the K coordinates */
                                         : oxt_bin(L, OXI_ADD, OX_U64, out[i], i == 0 ? d0 : d1);
    out[i] = oxt_pick(L, wrap, moved, out[i]);
  }
}

/* Copies the operands of the call `ahead` calls after this one (at
 * coordinates `c`, in ring area `r`) along K into their ring area, as one
 * cp.async group. */
static void prefetch(oxt_lowerer *L, const oxi_instr *in, oxi_instr *const *c, oxi_instr *r, int ahead, oxi_mem m,
                     int S) {
  oxt_staging g = staging_of(L, in);
  oxi_instr *ring = oxt_bin(L, OXI_REM, OX_U64, oxt_bin(L, OXI_ADD, OX_U64, r, oxt_u64(L, (uint64_t)ahead)),
                        oxt_u64(L, (uint64_t)S));
  oxi_instr *at = oxt_bin(L, OXI_MUL, OX_U64, ring, oxt_u64(L, (uint64_t)g.area));
  oxi_instr *nc[4];
  along_k(L, in, c, ahead, nc);
  copy_async(L, in->ops[0], nc, m, at, g.pa);
  copy_async(L, oxt_staged_tile(L, in, 1), nc + 2, m, oxt_bin(L, OXI_ADD, OX_U64, at, oxt_u64(L, (uint64_t)g.bat)), g.pb);
  oxt_emit(L, OXI_CP_COMMIT, OXI_VOID);
}

/* ---- TMA (sm_90, tma.c): a pipelined wgmma dot's copies as tensor-map
 * boxes, issued by one thread and completing on one mbarrier a stage. */

/* Whether pipelined wgmma dot `in` copies with TMA, and if so its tensor maps
 * and mbarriers: both staged tiles are loads of rank-2 tensors (boxes are
 * 2-D) of 1- or 2-byte elements; their 16-byte-aligned rows (contiguous16)
 * are what tensor maps need. */
static void choose_tma(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_instr *la = in->ops[0], *lb = oxt_staged_tile(L, in, 1);
  if (L->nk->params.len - L->k->params.len > 6) /* the launch passes at most 8 maps */
    return;
  for (int i = 0; i < 2; i++) {
    const oxi_instr *ld = i ? lb : la;
    const oxi_param *p = L->k->params.items[ld->mem.index];
    size_t es = ox_dtype_size((ox_dtype)ld->type);
    if (p->rank != 2 || ld->tshape->rank != 2 || (es != 1 && es != 2))
      return;
  }
  L->pipe[in->id].map[0] = oxt_tensor_map(L, la);
  L->pipe[in->id].map[1] = oxt_tensor_map(L, lb);
  L->pipe[in->id].bars = oxt_shared_array(L, OX_U64, 2 * L->pipe[in->id].stages).index + 1;
}

/* The full mbarrier of `stage` of dot `in`'s pipeline, or its empty one. */
static oxi_instr *bar_addr(oxt_lowerer *L, const oxi_instr *in, oxi_instr *stage, bool empty) {
  if (empty)
    stage = oxt_bin(L, OXI_ADD, OX_U64, stage, oxt_u64(L, (uint64_t)L->pipe[in->id].stages));
  return oxt_mbar(L, L->pipe[in->id].bars, stage);
}

/* Waits for the phase of `stage`'s full mbarrier that its copies complete:
 * every thread keeps the parity bits, and every thread waits for every
 * phase, so they agree. */
static void tma_wait(oxt_lowerer *L, const oxi_instr *in, oxi_instr *stage) {
  oxt_phase_wait(L, L->pipe[in->id].slot + 6, bar_addr(L, in, stage, false), stage);
}

/* Every warp is done reading `stage` (its wgmmas that read it have
 * completed), if `when`: its empty mbarrier, whose phase the next copies
 * into the stage wait for (tma_prefetch). */
static void tma_release(oxt_lowerer *L, const oxi_instr *in, oxi_instr *stage, oxi_instr *when) {
  oxt_mbar_release(L, bar_addr(L, in, stage, true), when);
}

oxi_mem oxt_pipe_ring(oxt_lowerer *L, const oxi_instr *in) {
  if (!L->pipe[in->id].ring) {
    oxi_mem m = oxt_shared_array(L, in->ops[0]->type, L->pipe[in->id].stages * staging_of(L, in).area);
    if (L->wg) /* swizzle atoms start at 1024-byte boundaries (dot_wg) */
      ((oxi_shared *)L->nk->shared.items[m.index])->align = 1024;
    L->pipe[in->id].ring = m.index + 1;
  }
  return (oxi_mem){OXI_MEM_SHARED, L->pipe[in->id].ring - 1};
}

void oxt_pipe_issue(oxt_lowerer *L, const oxi_instr *in, oxi_instr *const *c, oxi_instr *stage) {
  oxt_staging g = staging_of(L, in);
  int64_t es = (int64_t)ox_dtype_size((ox_dtype)in->ops[0]->type);
  oxi_mem m = oxt_pipe_ring(L, in);
  oxt_phase_wait(L, L->pipe[in->id].slot + 7, bar_addr(L, in, stage, true), stage);
  oxi_instr *at = oxt_bin(L, OXI_MUL, OX_U64, stage, oxt_u64(L, (uint64_t)g.area));
  oxi_instr *bar = bar_addr(L, in, stage, false);
  oxt_mbar_expect(L, bar, g.area * es);
  oxt_tma_boxes(L, L->pipe[in->id].map[0], in->ops[0], m, at, c, bar);
  oxt_tma_boxes(L, L->pipe[in->id].map[1], oxt_staged_tile(L, in, 1), m,
                oxt_bin(L, OXI_ADD, OX_U64, at, oxt_u64(L, (uint64_t)g.bat)), c + 2, bar);
}

/* The copies of the call `ahead` calls after this one (at coordinates c,
 * in ring area r), by the calling thread (oxt_pipe_issue). */
static void tma_prefetch(oxt_lowerer *L, const oxi_instr *in, oxi_instr *const *c, oxi_instr *r, int ahead, int S) {
  oxi_instr *nc[4];
  along_k(L, in, c, ahead, nc);
  oxt_pipe_issue(L, in, nc, oxt_ring_at(L, r, ahead, S));
}

/* Waits for the copies of the `n` stages from ring area r on (the ones in
 * flight), so that their mbarriers' phases are done: before they are issued
 * again, and before the block exits. */
static void tma_drain(oxt_lowerer *L, const oxi_instr *in, oxi_instr *r, int n, int S) {
  for (int j = 0; j < n; j++)
    tma_wait(L, in, oxt_ring_at(L, r, j, S));
}

void oxt_pipelines_begin(oxt_lowerer *L) {
  bool tma = false;
  for (int i = 0; i <= L->k->next_id; i++) {
    if (!L->pipe[i].stages)
      continue;
    /* no prefetch in flight; staging area 0; the full mbarriers' parities 0; the empty ones' 1:
       waiting for the phase before a new mbarrier's first passes, so a stage starts free */
    for (int s = 0; s < OXT_PIPE_SLOTS; s++)
      oxt_set_slot(L, L->pipe[i].slot + s,
                   !s ? oxt_zero_bool(L) : oxt_u64(L, s == 7 ? (1ull << L->pipe[i].stages) - 1 : 0));
    tma |= L->pipe[i].bars != 0;
  }
  oxt_tloads_begin(L);
  if (!tma && !L->tloads)
    return;
  oxi_block *join = oxt_begin_thread0(L);
  for (int i = 0; i <= L->k->next_id; i++)
    if (L->pipe[i].bars)
      oxt_mbar_inits(L, L->pipe[i].bars, L->pipe[i].stages);
  oxt_tloads_init(L);
  oxi_instr *f = oxt_emit(L, OXI_FENCE_ASYNC, OXI_VOID);
  f->sub = 1; /* the inits, visible to the TMA unit */
  oxt_end_if(L, join);
  oxt_barrier(L);
}

void oxt_pipelines_end(oxt_lowerer *L) {
  for (int i = 0; i <= L->k->next_id; i++) {
    if (!L->pipe[i].bars || L->pipe[i].ws) /* a producer's copies are all waited for */
      continue;
    const oxi_instr *in = NULL; /* the dot (its id is i) */
    for (int bi = 0; !in && bi < L->k->blocks.len; bi++) {
      const oxi_block *b = L->k->blocks.items[bi];
      for (int ii = 0; !in && ii < b->instrs.len; ii++)
        if (((const oxi_instr *)b->instrs.items[ii])->id == i)
          in = b->instrs.items[ii];
    }
    oxi_block *join;
    oxt_begin_if(L, oxt_get_slot(L, L->pipe[i].slot), &join);
    tma_drain(L, in, oxt_get_slot(L, L->pipe[i].slot + 5), L->pipe[i].stages - 2, L->pipe[i].stages);
    oxt_end_if(L, join);
  }
  oxt_tloads_end(L);
}

/* What dot_pipeline leaves for pipeline_advance: the call's tile coordinates
 * (A's two, B's two), its ring area, and whether an earlier call was made. */
typedef struct pipe_state {
  oxi_instr *c[4], *r, *earlier;
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
 * With TMA there is no barrier: each stage has a full mbarrier (its copies
 * landed) and an empty one (every warp released it, tma_release, once the
 * wgmmas that read it are done: at the end of the next call). Thread 0
 * issues the copies for the call S - 2 ahead at the start of a call, into
 * the area that the end of the previous call released; not at the end of a
 * call, where its branch and its wait would follow the wgmmas, which ptxas
 * then serializes. A miss first waits out and releases the stages in flight,
 * so that every stage's copies and releases stay in step.
 * With a producer warpgroup (ws.c) the call only waits for its stage's full
 * mbarrier: the producer copies every call's operands, in order.
 * Slots from `slot`: whether prefetches are in flight, the next call's 4
 * coordinates as guessed, and this call's area in the ring. Returns the
 * element offset of this call's area. */
static oxi_instr *dot_pipeline(oxt_lowerer *L, const oxi_instr *in, oxi_mem m, int slot, int S, pipe_state *ps) {
  if (L->pipe[in->id].ws) { /* a producer warpgroup copies every call's operands, in order (ws.c) */
    ps->r = oxt_get_slot(L, slot + 5);
    ps->earlier = oxt_get_slot(L, slot);
    tma_wait(L, in, ps->r);
    return oxt_bin(L, OXI_MUL, OX_U64, ps->r, oxt_u64(L, (uint64_t)staging_of(L, in).area));
  }
  const oxi_instr *la = in->ops[0], *lb = oxt_staged_tile(L, in, 1);
  oxi_instr **c = ps->c;
  c[0] = oxt_mapped(L, la->ops[0]), c[1] = oxt_mapped(L, la->ops[1]), c[2] = oxt_mapped(L, lb->ops[0]);
  c[3] = oxt_mapped(L, lb->ops[1]);
  oxi_instr *get[6];
  for (int i = 0; i < 6; i++)
    get[i] = oxt_get_slot(L, slot + i);
  oxi_instr *hit = get[0];
  for (int i = 0; i < 4; i++)
    hit = oxt_bin(L, OXI_AND, OX_BOOL, hit, oxt_bin(L, 100 + OXI_EQ, OX_U64, get[1 + i], c[i]));
  oxi_instr *r = ps->r = get[5];
  ps->earlier = get[0];
  oxi_instr *miss = oxt_emit(L, OXI_NOT, OX_BOOL);
  miss->ops[0] = hit;
  miss->nops = 1;
  oxi_block *join;
  oxt_begin_if(L, miss, &join);
  if (L->pipe[in->id].bars) {
    /* wrong guesses may still be landing: the S - 2 stages from r, if any were issued */
    oxi_block *drained;
    oxt_begin_if(L, get[0], &drained);
    for (int j = 0; j < S - 2; j++) {
      tma_wait(L, in, oxt_ring_at(L, r, j, S));
      tma_release(L, in, oxt_ring_at(L, r, j, S), NULL);
    }
    oxt_end_if(L, drained);
    oxi_block *one = oxt_begin_thread0(L);
    for (int j = 0; j < S - 1; j++) /* this call's operands and the next S - 2 calls' */
      tma_prefetch(L, in, c, r, j, S);
    oxt_end_if(L, one);
    oxt_end_if(L, join);
    /* a hit: the copies for the call S - 2 ahead (S - 1 stages in flight either way) */
    oxt_begin_if(L, oxt_bin(L, OXI_AND, OX_BOOL, hit, oxt_bin(L, 100 + OXI_EQ, OX_U64, L->t, oxt_u64(L, 0))), &join);
    tma_prefetch(L, in, c, r, S - 2, S);
    oxt_end_if(L, join);
    tma_wait(L, in, r); /* this call's operands have landed (the mbarrier makes them visible) */
    return oxt_bin(L, OXI_MUL, OX_U64, r, oxt_u64(L, (uint64_t)staging_of(L, in).area));
  }
  oxt_barrier(L); /* other warps may still read the previous call's area */
  /* copies run D - 1 calls ahead; with wgmma, the previous call's wgmmas may
     still read its area (dot_wg), so the ring has one area more than that */
  int D = L->wg ? S - 1 : S;
  oxi_instr *w0 = oxt_emit(L, OXI_CP_WAIT, OXI_VOID); /* wrong guesses may still be landing */
  w0->imm = 0;
  for (int j = 0; j < D - 1; j++) /* this call's operands and the next D - 2 calls' */
    prefetch(L, in, c, r, j, m, S);
  oxt_end_if(L, join);
  /* D - 1 groups in flight, this call's the oldest */
  oxi_instr *w = oxt_emit(L, OXI_CP_WAIT, OXI_VOID);
  w->imm = (uint64_t)(D - 2);
  if (L->wg) /* wgmma reads them through the async proxy */
    oxt_emit(L, OXI_FENCE_ASYNC, OXI_VOID);
  oxt_barrier(L);
  return oxt_bin(L, OXI_MUL, OX_U64, r, oxt_u64(L, (uint64_t)staging_of(L, in).area));
}

/* The rest of a pipelined call (after the barrier in dot_pipeline, which
 * every warp passes only when done with the area of the call D calls back):
 * the copies for the call D - 1 ahead, into that area, and the guess of the
 * next call. dot_tc makes it right after dot_pipeline; dot_wg after issuing
 * its wgmmas, so that the tensor cores start sooner. With TMA, dot_wg has
 * waited for the previous call's wgmmas: every warp releases its stage. */
static void pipeline_advance(oxt_lowerer *L, const oxi_instr *in, oxi_mem m, int slot, int S, const pipe_state *ps) {
  oxi_instr *const *c = ps->c;
  if (L->pipe[in->id].bars) {
    tma_release(L, in, oxt_ring_at(L, ps->r, S - 1, S), ps->earlier);
  } else {
    prefetch(L, in, c, ps->r, L->wg ? S - 2 : S - 1, m, S);
  }
  oxi_instr *t = oxt_emit(L, OXI_CONST, OX_BOOL);
  t->imm = 1;
  oxt_set_slot(L, slot, t);
  if (!L->pipe[in->id].ws) { /* the next call's coordinates, guessed (a producer needs no guess) */
    oxi_instr *nc[4];
    along_k(L, in, c, 1, nc);
    for (int i = 0; i < 4; i++)
      oxt_set_slot(L, slot + 1 + i, nc[i]);
  }
  oxt_set_slot(L, slot + 5, oxt_bin(L, OXI_REM, OX_U64, oxt_bin(L, OXI_ADD, OX_U64, ps->r, oxt_u64(L, 1)), oxt_u64(L, (uint64_t)S)));
}

/* Whether dot `in` (on wgmma) takes A from registers: A is held in the mma
 * layout with a warp's 16 rows whole (the accumulator of another wgmma, as
 * attention's probabilities are), whose elements are, per 16 columns, the A
 * fragment of wgmma's register form: no trip through shared memory. */
static bool a_in_registers(const oxt_lowerer *L, const oxi_instr *in) {
  const oxi_instr *a = in->ops[0];
  return oxt_is_mma(L, a) && oxt_in_pairs(L, a->tshape, a->type);
}

int oxt_wg_registers(const oxt_lowerer *L, const oxi_instr *in) {
  int64_t K = in->ops[0]->tshape->dims[1], N = in->ops[1]->tshape->dims[1];
  return (int)(N / 2 + (a_in_registers(L, in) ? K / 4 : 0));
}

/* copy_async of load `ld` at its own tile coordinates, to `at` in `m`. */
static void copy_load(oxt_lowerer *L, const oxi_instr *ld, oxi_mem m, int64_t at, int64_t pitch) {
  oxi_instr *coord[OXI_MAX_RANK];
  for (int d = 0; d < ld->nops; d++)
    coord[d] = oxt_mapped(L, ld->ops[d]);
  copy_async(L, ld, coord, m, oxt_u64(L, (uint64_t)at), pitch);
}

/* The load that tile x is, or of which x is a reshape to its last two dims
 * (the others 1: a batch's and a head's tile of a 4-D tensor), whose elements
 * are then the load's in the same order; else NULL. */
static const oxi_instr *load_beneath(const oxi_instr *x) {
  if (x->op == OXI_T_LOAD) /* not at element offsets (load_at): copies and TMA boxes start at tiles */
    return x->tshape->rank == 2 && !x->sub ? x : NULL;
  const oxi_instr *ld = x->ops[0];
  if (x->op != OXI_T_RESHAPE || ld->op != OXI_T_LOAD || ld->sub || x->tshape->rank != 2)
    return NULL;
  const oxi_tshape *s = ld->tshape;
  for (int d = 0; d < s->rank - 2; d++)
    if (s->dims[d] != 1)
      return NULL;
  return s->rank >= 2 && s->dims[s->rank - 2] == x->tshape->dims[0] && s->dims[s->rank - 1] == x->tshape->dims[1]
             ? ld : NULL;
}

/* The staging area of non-pipelined dot `in`: the scratch array, or its own
 * when one of its loads copies early (the scratch is reused between the copy
 * and the dot). */
static oxi_mem dot_area(oxt_lowerer *L, const oxi_instr *in) {
  bool own = false;
  for (int i = 0; i < 2; i++) {
    const oxi_instr *x = oxt_staged_tile(L, in, i);
    own |= L->direct[x->id] && L->dot_of[load_beneath(x)->id];
  }
  oxt_staging g = staging_of(L, in);
  oxi_type t = in->ops[0]->type;
  if (!own)
    return oxt_scratch(L, t, g.area);
  if (!L->area[in->id])
    L->area[in->id] = oxt_shared_array(L, t, g.area).index + 1;
  oxi_mem m = {OXI_MEM_SHARED, L->area[in->id] - 1};
  return m;
}

/* A direct load of a wgmma dot that copies where it is written (its dot's
 * staging area is its own, and the previous call of the dot is done with it:
 * dot_wg waits for its wgmmas and passes a barrier): the copy as one group,
 * numbered in its block so that the dot waits for it and no newer one. */
void oxt_copy_early(oxt_lowerer *L, const oxi_instr *ld) {
  const oxi_instr *in = L->dot_of[ld->id];
  int i = load_beneath(oxt_staged_tile(L, in, 0)) == ld ? 0 : 1;
  oxt_staging g = staging_of(L, in);
  oxi_mem m = dot_area(L, in);
  ((oxi_shared *)L->nk->shared.items[m.index])->align = 1024; /* wgmma's swizzle atoms */
  copy_load(L, ld, m, i ? g.bat : 0, i ? g.pb : g.pa);
  oxt_emit(L, OXI_CP_COMMIT, OXI_VOID);
  L->cp_at[ld->id] = ++L->commits;
  L->cp_block[ld->id] = L->block + 1;
  L->early = true;
}

/* Stages the operands of tensor-core dot `in` in shared memory (staging_of):
 * copied there by cp.async if they are direct loads, through the ring of a
 * pipelined dot (dot_pipeline), else written from registers; then a barrier.
 * Sets *m to the shared array and returns the element offset of this call's
 * area in it. An operand that a TMA load copied (tma.c) is waited for
 * instead, its byte address in tl[i]; when every staged operand is, there is
 * no area and no barrier (NULL). */
static oxi_instr *stage_operands(oxt_lowerer *L, const oxi_instr *in, oxi_mem *m, pipe_state *ps, oxi_instr **tl) {
  oxt_staging g = staging_of(L, in);
  int S = L->pipe[in->id].stages;
  bool all = !S;
  for (int i = a_in_registers(L, in); !S && i < 2; i++) {
    const oxi_instr *x = oxt_staged_tile(L, in, i);
    const oxi_instr *ld = L->direct[x->id] ? load_beneath(x) : NULL;
    if (ld && L->tload[ld->id].stages)
      tl[i] = oxt_tload_wait(L, ld);
    else
      all = false;
  }
  if (all)
    return NULL;
  /* a pipelined dot has its own areas: prefetches stay in flight across other steps;
     so has one whose loads copy early (oxt_copy_early) */
  *m = S ? oxt_pipe_ring(L, in) : dot_area(L, in);
  if (L->wg) /* the swizzle is on address bits: atoms start at 1024-byte boundaries */
    ((oxi_shared *)L->nk->shared.items[m->index])->align = 1024;
  if (S)
    return dot_pipeline(L, in, *m, L->pipe[in->id].slot, S, ps);
  bool copies = false, early = false;
  int newer = -1; /* copy groups of this block newer than its newest early copy this dot needs */
  for (int i = a_in_registers(L, in); i < 2; i++) {
    /* a K-major B is the tile under the transpose, staged swizzled as A is */
    const oxi_instr *x = oxt_staged_tile(L, in, i);
    int64_t pitch = i ? g.pb : g.pa, at = i ? g.bat : 0;
    const oxi_instr *ld = L->direct[x->id] ? load_beneath(x) : NULL;
    if (tl[i])
      continue;
    if (ld && L->dot_of[ld->id]) { /* copied where it is written (oxt_copy_early) */
      early = true;
      int d = L->commits - L->cp_at[ld->id];
      if (L->cp_block[ld->id] == L->block + 1 && (newer < 0 || d < newer))
        newer = d;
      continue;
    }
    if (ld) {
      copy_load(L, ld, *m, at, pitch);
      copies = true;
    } else {
      stage(L, x, *m, at, pitch);
    }
  }
  if (copies) { /* the newest group: wait for all */
    oxt_emit(L, OXI_CP_COMMIT, OXI_VOID);
    oxt_emit(L, OXI_CP_WAIT, OXI_VOID);
    L->commits++;
  } else if (early) {
    /* groups complete in order: wait for all but those newer than the copies
       this dot needs; copies from an earlier block are older than every group
       of this one */
    oxi_instr *w = oxt_emit(L, OXI_CP_WAIT, OXI_VOID);
    w->imm = (uint64_t)(newer >= 0 ? newer : L->commits);
  }
  if (L->wg) /* wgmma reads the operands through the async proxy */
    oxt_emit(L, OXI_FENCE_ASYNC, OXI_VOID);
  oxt_barrier(L);
  return oxt_u64(L, 0);
}

/* A matrix descriptor of wgmma for an operand staged swizzled (`swizzled`,
 * width w bytes) at shared address `addr` (bytes): the address / 16 in bits
 * 0-13, the leading byte offset / 16 in bits 16-29, the stride byte offset /
 * 16 in bits 32-45, the swizzle mode in bits 62-63 (1: 128 bytes, 2: 64, 3:
 * 32). The stride byte offset is the distance between atoms of 8 rows (8w
 * bytes); the leading one, for N-major B, between panels of 64 columns (K
 * rows of 128 bytes) (unused for K-major A: 1). */
static oxi_instr *wg_desc(oxt_lowerer *L, oxi_instr *addr, int64_t w, int64_t lbo) {
  uint64_t mode = w == 128 ? 1 : w == 64 ? 2 : 3;
  uint64_t hi = ((uint64_t)lbo >> 4) << 16 | (uint64_t)(8 * w >> 4) << 32 | mode << 62;
  return oxt_bin(L, OXI_OR, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, addr, oxt_u64(L, 4)), oxt_u64(L, hi));
}

const oxi_instr *oxt_staged_load(const oxt_lowerer *L, const oxi_instr *in, int i) {
  const oxi_instr *x = oxt_staged_tile(L, in, i);
  const oxi_instr *ld = L->direct[x->id] ? load_beneath(x) : NULL;
  return ld && L->tload[ld->id].stages ? ld : NULL;
}

bool oxt_dot_deferred(const oxt_lowerer *L, const oxi_instr *in) {
  if (!L->wg || !L->mma[in->id] || L->pipe[in->id].stages)
    return false;
  for (int i = a_in_registers(L, in); i < 2; i++)
    if (!oxt_staged_load(L, in, i))
      return false;
  return true;
}

/* dot on wgmma (sm_90). The block's warpgroups each compute 64 rows of the
 * [M, N] result (M / 16 warps, L->wg), from A and B staged swizzled: per step
 * of 16 along K, one wgmma.m64nNk16 reads the group's 64 x 16 of A and the
 * 16 x N of B from shared memory through descriptors. The accumulator, N / 2
 * f32 registers a thread, is the mma layout with 16 x N warp tiles. The
 * wgmmas of a call are one group, and the result is the registers as wgmma
 * leaves them (L->vacc). A pipelined dot leaves its group in flight (at most
 * one group pending: the previous call's is done, so its staging area is free
 * for dot_pipeline's copies); the next call accumulates into the registers
 * directly and any other use waits for them (oxt_held). So does a dot whose
 * staged operands all are TMA loads (or A in registers), which has no area to
 * free: a deferred dot (oxt_held waits for it at its uses, and only for it:
 * an attention's product of probabilities and values runs while the softmax
 * of the next scores does). Otherwise the call waits for its group. */
static void dot_wg(oxt_lowerer *L, const oxi_instr *in) {
  int64_t M = in->ops[0]->tshape->dims[0], K = in->ops[0]->tshape->dims[1], N = in->ops[1]->tshape->dims[1];
  int n = (int)(N / 2);
  bool pipelined = L->pipe[in->id].stages != 0, kmajor = L->kmajor[in->id];
  oxi_mem m;
  pipe_state ps;
  oxi_instr *tl[2] = {NULL, NULL};
  oxi_instr *cur = stage_operands(L, in, &m, &ps, tl);
  /* A in registers (a_in_registers): per step of 16 along K, the four pairs
     of a thread's elements of two 16 x 8 pieces, in the accumulator order
     (row l/4: columns 2(l%4), +1; row l/4 + 8: the same; then 8 columns on) */
  oxi_instr **frag = NULL;
  if (a_in_registers(L, in)) {
    oxi_instr **two = oxt_pairs(L, in->ops[0]);
    frag = oxb_malloc(sizeof *frag * (size_t)(K / 16));
    for (int64_t ks = 0; ks < K / 16; ks++) {
      oxi_instr *p = oxt_emit(L, OXI_PACK, OXI_V4);
      p->nops = 4;
      for (int r = 0; r < 4; r++)
        p->ops[r] = two[4 * ks + r];
      frag[ks] = p;
    }
  }
  oxi_instr *acc = NULL;
  if (in->nops == 3 && L->vacc[in->ops[2]->id])
    acc = L->vacc[in->ops[2]->id];
  else if (in->nops == 3)
    acc = oxt_wg_pack(L, oxt_in_layout(L, in->ops[2], true), n);
  /* else none: the first wgmma's product alone (scale-d 0), and no instructions zeroing its
     registers */
  if (in->id + 1 == L->turn_first) /* this warpgroup's turn (choose_turns): warpgroup g waits on 1 + g */
    oxt_named_bar(L, 0, oxt_bin(L, OXI_ADD, OX_U64, oxt_warpgroup(L), oxt_u64(L, 1)), NULL);
  if (acc)
    acc = oxt_wg_sync(L, acc, 0, 0);
  else
    oxt_wg_sync(L, NULL, 0, 0);
  /* byte addresses: A of this warpgroup (rows 64g..), B */
  oxi_instr *base = NULL;
  if (cur) {
    base = oxt_emit(L, OXI_SHARED_ADDR, OX_U64);
    base->mem = m;
    base->ops[0] = cur;
    base->nops = 1;
  }
  oxi_type t = in->ops[0]->type;
  int64_t es = (int64_t)ox_dtype_size((ox_dtype)t);
  /* A's swizzle; K steps of 32 bytes (16 elements, or 32 of fp8: k32) a row */
  int64_t wa = oxt_swizzle_bytes(K * es), steps = wa / 32;
  oxi_instr *group = oxt_bin(L, OXI_SHR, OX_U64, L->t, oxt_u64(L, 7));
  oxi_instr *a0 = frag ? NULL
                      : oxt_bin(L, OXI_ADD, OX_U64, tl[0] ? tl[0] : base,
                                oxt_bin(L, OXI_MUL, OX_U64, group, oxt_u64(L, (uint64_t)(64 * wa))));
  oxi_instr *b0 = tl[1] ? tl[1] : oxt_bin(L, OXI_ADD, OX_U64, base, oxt_u64(L, (uint64_t)(es * M * K)));
  for (int64_t ks = 0; ks < K * es / 32; ks++) {
    /* A: panel ks / steps (M rows of wa bytes each), 32 bytes a step within it; B: 16 rows a step */
    int64_t aoff = ks / steps * M * wa + ks % steps * 32, boff = ks * 16 * 128;
    oxi_instr *da = frag ? NULL : wg_desc(L, oxt_bin(L, OXI_ADD, OX_U64, a0, oxt_u64(L, (uint64_t)aoff)), wa, 16);
    oxi_instr *db;
    if (kmajor) /* as A: panel ks / steps (N rows of wa bytes), 32 bytes a step within it */
      db = wg_desc(L, oxt_bin(L, OXI_ADD, OX_U64, b0, oxt_u64(L, (uint64_t)(ks / steps * N * wa + ks % steps * 32))),
                   wa, 16);
    else
      db = wg_desc(L, oxt_bin(L, OXI_ADD, OX_U64, b0, oxt_u64(L, (uint64_t)boff)), 128, K * 128);
    oxi_instr *w = oxt_emit(L, OXI_WGMMA, oxi_vacc(n, in->type));
    w->index = kmajor; /* the backend's imm-trans-b: 0 for K-major B */
    w->sub = t;
    w->imm = (uint64_t)N;
    w->ops[0] = frag ? frag[ks] : da;
    w->ops[1] = db;
    w->ops[2] = acc;
    w->nops = acc ? 3 : 2;
    acc = w;
  }
  bool deferred = L->rel_block[in->id] != 0;
  assert(deferred == (!pipelined && !cur));
  acc = oxt_wg_sync(L, acc, deferred ? 3 : 1, pipelined ? 1 : 0);
  L->wg_commits++;
  if (in->id + 1 == L->turn_last) /* ... and the other's: 2 - g */
    oxt_named_bar(L, 1, oxt_bin(L, OXI_SUB, OX_U64, oxt_u64(L, 2), oxt_warpgroup(L)), NULL);
  if (pipelined)
    pipeline_advance(L, in, m, L->pipe[in->id].slot, L->pipe[in->id].stages, &ps);
  L->vacc[in->id] = acc;
  if (deferred) {
    L->wg_at[in->id] = L->wg_commits;
    L->wg_block[in->id] = L->block + 1;
    if (frag && in->ops[0]->op == OXI_VAR_GET)
      L->pair_reader[in->ops[0]->index] = in;
  } else if (!pipelined) { /* waited for: the elements are ready, and the staging areas free (TMA
                              loads': a release; the others' after a barrier) */
    for (int i = 0; i < 2; i++)
      if (tl[i])
        oxt_tload_release(L, load_beneath(oxt_staged_tile(L, in, i)));
    oxt_barrier(L);
    L->tval[in->id] = oxt_unpack_acc(L, acc);
  }
  L->nk->uses_sync = true;
  free(frag);
}

/* Four bytes of 8-bit shared memory `m` (element type t) as one u32, the
 * first lowest: at `base` + off + i * pitch, i < 4 (a column's K run). */
static oxi_instr *pack_bytes(oxt_lowerer *L, oxi_mem m, oxi_type t, oxi_instr *base, int64_t off, int64_t pitch) {
  oxi_instr *w = NULL;
  for (int i = 0; i < 4; i++) {
    oxi_instr *x = oxt_shared_load(L, m, t, oxt_bin(L, OXI_ADD, OX_U64, base, oxt_u64(L, (uint64_t)(off + i * pitch))));
    x = oxt_bin(L, OXI_AND, OX_U32, oxt_cast(L, x, OX_U32), oxt_cast(L, oxt_u64(L, 0xff), OX_U32));
    x = i ? oxt_bin(L, OXI_SHL, OX_U32, x, oxt_cast(L, oxt_u64(L, (uint64_t)(8 * i)), OX_U32)) : x;
    w = w ? oxt_bin(L, OXI_OR, OX_U32, w, x) : x;
  }
  return w;
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
static void dot_tc(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *as = in->ops[0]->tshape;
  oxi_type t = in->ops[0]->type, rt = in->type; /* rt: f32, or i32 for 8-bit integers */
  bool tf = t == OX_TF32, i8 = is_int8(t);
  int64_t M = as->dims[0], K = as->dims[1];
  oxt_staging g = staging_of(L, in);
  int64_t pa = g.pa, pb = g.pb;
  int64_t kstep = tf ? 8 : i8 ? 32 : 16, cols = tf ? 4 : i8 ? 16 : 8; /* K per mma; elements in 16 bytes */
  oxt_mma_layout ml;
  oxt_mma_layout_of(L, in->tshape, &ml);
  int S = L->pipe[in->id].stages;
  oxi_mem m;
  pipe_state ps;
  oxi_instr *tl[2] = {NULL, NULL};
  oxi_instr *cur = stage_operands(L, in, &m, &ps, tl);
  if (S)
    pipeline_advance(L, in, m, L->pipe[in->id].slot, S, &ps);
  int tiles = (int)(ml.wm / 16 * (ml.wn / 8));
  oxi_instr **acc = oxb_malloc(sizeof *acc * (size_t)tiles);
  oxi_instr **c = in->nops == 3 ? oxt_in_layout(L, in->ops[2], true) : NULL;
  oxi_instr *zero = oxt_emit(L, OXI_CONST, rt);
  zero->fimm = 0;
  for (int i = 0; i < tiles; i++) {
    oxi_instr *p = oxt_emit(L, OXI_PACK, OXI_V4);
    p->nops = 4;
    for (int r = 0; r < 4; r++)
      p->ops[r] = c ? c[i * 4 + r] : zero;
    acc[i] = p;
  }
  oxi_instr *warp = oxt_bin(L, OXI_SHR, OX_U64, L->t, oxt_u64(L, 5));
  oxi_instr *lane = oxt_bin(L, OXI_AND, OX_U64, L->t, oxt_u64(L, 31));
  oxi_instr *r16 = oxt_bin(L, OXI_AND, OX_U64, lane, oxt_u64(L, 15));
  oxi_instr *c8 = oxt_bin(L, OXI_MUL, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, lane, oxt_u64(L, 4)), oxt_u64(L, (uint64_t)cols));
  oxi_instr *wrow = oxt_bin(L, OXI_SHL, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, warp, oxt_u64(L, (uint64_t)oxt_log2i(ml.WN))),
                        oxt_u64(L, (uint64_t)oxt_log2i(ml.wm)));
  oxi_instr *wcol = oxt_bin(L, OXI_SHL, OX_U64, oxt_bin(L, OXI_AND, OX_U64, warp, oxt_u64(L, (uint64_t)(ml.WN - 1))),
                        oxt_u64(L, (uint64_t)oxt_log2i(ml.wn)));
  /* this lane's row addresses: A at (wrow + r16) * pa + c8, B at M * pa + r16 * pb + wcol + c8 */
  oxi_instr *abase = oxt_bin(L, OXI_ADD, OX_U64,
                         oxt_bin(L, OXI_MUL, OX_U64, oxt_bin(L, OXI_ADD, OX_U64, wrow, r16), oxt_u64(L, (uint64_t)pa)),
                         oxt_bin(L, OXI_ADD, OX_U64, c8, cur));
  oxi_instr *bbase = oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_MUL, OX_U64, r16, oxt_u64(L, (uint64_t)pb)),
                         oxt_bin(L, OXI_ADD, OX_U64, wcol,
                             oxt_bin(L, OXI_ADD, OX_U64, c8, oxt_bin(L, OXI_ADD, OX_U64, cur, oxt_u64(L, (uint64_t)(M * pa))))));
  int mt = (int)(ml.wm / 16), nt = (int)(ml.wn / 8);
  oxi_instr **fa = oxb_malloc(sizeof *fa * (size_t)(mt + nt / 2)), **fb = fa + mt;
  /* tf32's B: lane l holds B[k + l%4][n + l/4] and B[k + l%4 + 4][n + l/4] of
     each n8 tile (32-bit elements: no ldmatrix.trans); with rows of N + 8
     elements, the four k rows a load touches fall in distinct banks */
  oxi_instr *tb = tf ? oxt_bin(L, OXI_ADD, OX_U64,
                           oxt_bin(L, OXI_MUL, OX_U64, oxt_bin(L, OXI_AND, OX_U64, lane, oxt_u64(L, 3)), oxt_u64(L, (uint64_t)pb)),
                           oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, lane, oxt_u64(L, 2)),
                               oxt_bin(L, OXI_ADD, OX_U64, wcol, oxt_bin(L, OXI_ADD, OX_U64, cur, oxt_u64(L, (uint64_t)(M * pa))))))
                    : NULL;
  /* 8-bit B: lane l holds B[k + 4(l%4) + i][n + l/4], i < 4, in one register, and the same 16
     rows on in a second, of each n8 tile (ldmatrix.trans moves 16-bit elements, not bytes) */
  oxi_instr *ib = i8 ? oxt_bin(L, OXI_ADD, OX_U64,
                           oxt_bin(L, OXI_MUL, OX_U64, oxt_bin(L, OXI_AND, OX_U64, lane, oxt_u64(L, 3)), oxt_u64(L, (uint64_t)(4 * pb))),
                           oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, lane, oxt_u64(L, 2)),
                               oxt_bin(L, OXI_ADD, OX_U64, wcol, oxt_bin(L, OXI_ADD, OX_U64, cur, oxt_u64(L, (uint64_t)(M * pa))))))
                    : NULL;
  for (int64_t ks = 0; ks < K / kstep; ks++) {
    for (int i = mt; i8 && i < mt + nt / 2; i++) {
      oxi_instr *v[4];
      for (int r = 0; r < 4; r++) {
        int64_t off = (ks * 32 + (r & 1) * 16) * pb + ((i - mt) * 2 + r / 2) * 8;
        v[r] = pack_bytes(L, m, t, ib, off, pb);
      }
      oxi_instr *p = oxt_emit(L, OXI_PACK, OXI_V4);
      p->nops = 4;
      for (int r = 0; r < 4; r++)
        p->ops[r] = v[r];
      fa[i] = p;
    }
    for (int i = mt; tf && i < mt + nt / 2; i++) { /* two n8 tiles a V4, as ldmatrix.x4.trans gives */
      oxi_instr *v[4];
      for (int r = 0; r < 4; r++) {
        int64_t off = (ks * 8 + (r & 1) * 4) * pb + ((i - mt) * 2 + r / 2) * 8;
        v[r] = oxt_shared_load(L, m, t, oxt_bin(L, OXI_ADD, OX_U64, tb, oxt_u64(L, (uint64_t)off)));
      }
      oxi_instr *p = oxt_emit(L, OXI_PACK, OXI_V4);
      p->nops = 4;
      for (int r = 0; r < 4; r++)
        p->ops[r] = v[r];
      fa[i] = p;
    }
    for (int i = 0; i < (tf || i8 ? mt : mt + nt / 2); i++) {
      bool isb = i >= mt;
      int64_t off = isb ? ks * 16 * pb + (i - mt) * 16 : i * 16 * pa + ks * kstep;
      oxi_instr *at = oxt_bin(L, OXI_ADD, OX_U64, isb ? bbase : abase, oxt_u64(L, (uint64_t)off));
      fa[i] = oxt_emit(L, OXI_LDMATRIX, OXI_V4);
      fa[i]->sub = isb; /* B: transposed, from its [K, N] rows */
      fa[i]->mem = m;
      fa[i]->ops[0] = at;
      fa[i]->nops = 1;
    }
    for (int i = 0; i < mt; i++)
      for (int j = 0; j < nt; j++) {
        oxi_instr *d = oxt_emit(L, OXI_MMA, OXI_V4);
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
    oxt_barrier(L);
  oxi_instr **out = oxt_new_elements(L, in->tshape);
  for (int i = 0; i < tiles; i++)
    for (int r = 0; r < 4; r++) {
      oxi_instr *u = oxt_emit(L, OXI_UNPACK, rt);
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
static void dot_simple(oxt_lowerer *L, const oxi_instr *in) {
  const oxi_tshape *as = in->ops[0]->tshape, *bs = in->ops[1]->tshape;
  int64_t M = as->dims[0], K = as->dims[1], N = bs->dims[1];
  oxi_type t = in->ops[0]->type, rt = in->type; /* rt: f32, or i32 for integer operands */
  oxi_mem m = oxt_scratch(L, t, M * K + K * N);
  stage(L, in->ops[0], m, 0, K);
  stage(L, in->ops[1], m, M * K, N);
  oxt_barrier(L);
  int n = oxt_count_in(L, in->tshape, false);
  oxi_instr **f = oxb_malloc(sizeof *f * (size_t)n * 2), **ok = f + n;
  oxt_positions(L, in->tshape, f, ok);
  oxi_instr **c = in->nops == 3 ? oxt_elements(L, in->ops[2]) : NULL;
  int *acc = oxb_malloc(sizeof *acc * (size_t)n);
  oxi_instr **arow = oxb_malloc(sizeof *arow * (size_t)n * 2), **bcol = arow + n;
  for (int e = 0; e < n; e++) {
    acc[e] = oxi_slot_new(L->m, L->nk, rt);
    oxi_instr *z = oxt_emit(L, OXI_CONST, rt);
    z->fimm = 0;
    oxt_set_slot(L, acc[e], c ? c[e] : z);
    oxi_instr *g = oxt_existing(L, f[e], ok[e]);
    arow[e] = oxt_bin(L, OXI_MUL, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, g, oxt_u64(L, (uint64_t)oxt_log2i(N))), oxt_u64(L, (uint64_t)K));
    bcol[e] = oxt_bin(L, OXI_ADD, OX_U64, oxt_bin(L, OXI_AND, OX_U64, g, oxt_u64(L, (uint64_t)(N - 1))), oxt_u64(L, (uint64_t)(M * K)));
  }
  oxt_counted_loop lp;
  oxi_instr *k = oxt_begin_loop(L, &lp, oxt_u64(L, 0), 1, K);
  oxi_instr *kn = oxt_bin(L, OXI_MUL, OX_U64, k, oxt_u64(L, (uint64_t)N));
  for (int e = 0; e < n; e++) {
    oxi_instr *x = oxt_shared_load(L, m, t, oxt_bin(L, OXI_ADD, OX_U64, arow[e], k));
    oxi_instr *y = oxt_shared_load(L, m, t, oxt_bin(L, OXI_ADD, OX_U64, bcol[e], kn));
    oxt_set_slot(L, acc[e], oxt_mul_add(L, rt, x, y, oxt_get_slot(L, acc[e])));
  }
  oxt_end_loop(L, &lp, k);
  oxt_barrier(L);
  oxi_instr **out = oxt_new_elements(L, in->tshape);
  for (int e = 0; e < n; e++)
    out[e] = oxt_get_slot(L, acc[e]);
  free(f);
  free(acc);
  free(arow);
  L->tval[in->id] = out;
}

void oxt_lower_dot(oxt_lowerer *L, const oxi_instr *in) {
  if (L->mma[in->id] && L->wg)
    dot_wg(L, in);
  else if (L->mma[in->id])
    dot_tc(L, in);
  else
    dot_simple(L, in);
}

/* How many instructions use x, all as the A operand of a dot (and no other). */
static int dot_a_uses(const oxi_kernel *k, const oxi_instr *x) {
  int n = 0;
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      n += in->op == OXI_T_DOT && in->ops[0] == x && in->ops[1] != x && (in->nops < 3 || in->ops[2] != x);
    }
  }
  return n;
}

/* Loads whose one use is a tensor-core dot, from a contiguous16 tensor with
 * rows of whole 16-byte pieces: the dot copies them itself (copy_async). A
 * dot in a loop with both operands copied so, and loaded in a loop, is pipelined (dot_pipeline): its
 * slots are made here and cleared at the kernel's entry. */
void oxt_choose_direct_loads(oxt_lowerer *L) {
  const oxi_kernel *k = L->k;
  int *uses = oxb_calloc((size_t)k->next_id + 1, sizeof *uses);
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
        const oxi_instr *x = in->ops[i];
        if (L->wg && i == 1 && x->op == OXI_T_PERMUTE && x->imm == 1 &&
            (uses[x->id] == 1 || ox_dtype_size((ox_dtype)x->type) == 1)) {
          L->kmajor[in->id] = 1; /* transpose(x): x staged K-major (always for 8-bit types, which have
                                    no other form) */
          L->direct[x->id] = uses[x->id] == 1;
          x = x->ops[0];
        }
        const oxi_instr *ld = load_beneath(x);
        if (!ld || (ld != x && (!L->wg || uses[ld->id] != 1)))
          continue;
        const oxi_param *p = k->params.items[ld->mem.index];
        /* A of several wgmma dots (an attention's query tile, in the products of the first key tile
           and of the loop's): copied once by TMA, outside loops, and read by them all */
        bool shared_a = L->wg && i == 0 && uses[x->id] > 1 && uses[x->id] == dot_a_uses(k, x) &&
                        !oxt_in_loop(k, oxt_block_of(k, ld));
        if (p->contiguous16 && (uses[x->id] == 1 || shared_a) &&
            ld->tshape->dims[ld->tshape->rank - 1] % (16 / (int64_t)ox_dtype_size((ox_dtype)ld->type)) == 0 &&
            ld->imm == 0 && ld->fimm == 0) /* zero padding: what cp.async fills in */
          L->direct[ld->id] = L->direct[x->id] = 1;
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
      const oxi_instr *lb = oxt_staged_tile(L, in, 1);
      /* a K loop's guess: both tiles loaded in the loop (an A loaded once before it, as an
         attention's query tile, is not walked along K) */
      bool loads = in->ops[0]->op == OXI_T_LOAD && lb->op == OXI_T_LOAD &&
                   oxt_in_loop(k, oxt_block_of(k, in->ops[0])) && oxt_in_loop(k, oxt_block_of(k, lb));
      if (loads && L->direct[in->ops[0]->id] && L->direct[lb->id] && (lb == in->ops[1] || L->direct[in->ops[1]->id]) &&
          oxt_in_loop(k, b) &&
          S >= (L->wg ? 3 : 2)) {
        L->pipe[in->id].stages = S;
        L->pipelined = true;
        for (int i = 0; i < OXT_PIPE_SLOTS; i++) {
          int s = oxi_slot_new(L->m, L->nk, i ? OX_U64 : OX_BOOL);
          if (!i)
            L->pipe[in->id].slot = s;
        }
        if (L->wg)
          choose_tma(L, in);
      }
    }
  }
  /* the loads of the other (wgmma) dots issue their copies where they are
     written, so that a copy is in flight while the code between it and its
     dot runs (a query tile copied once before a loop; a value tile copied at
     the top of an attention's loop, while the scores' dot and softmax run):
     with TMA where they can (tma.c: in a loop, a ring whose next tiles are
     copied ahead), else with cp.async. Not beside a pipeline, whose waits
     count the copy groups in flight. */
  for (int bi = 0; L->wg && !L->pipelined && bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      for (int i = 0; in->op == OXI_T_DOT && L->mma[in->id] && i < 2; i++) {
        const oxi_instr *x = oxt_staged_tile(L, in, i);
        if (!L->direct[x->id])
          continue;
        if (L->tload[load_beneath(x)->id].stages) { /* a shared A: made for its first dot */
          L->tload[load_beneath(x)->id].several = true;
          continue;
        }
        if (!oxt_tload_choose(L, load_beneath(x), in)) /* else cp.async */
          L->dot_of[load_beneath(x)->id] = in;
      }
    }
  }
  free(uses);
}

/* Whether tensor-core dot `in` suits wgmma.m64nNk16 as dot_wg issues it:
 * bf16/f16 operands (fp8: k32, oxt_fp8_on_wgmma), M 64 or 128 (one or two warpgroups; 256 would leave too
 * few registers a thread), K a power of two from 16 (tc_operands; A's rows
 * swizzled by 32, 64 or 128 bytes) and N of 64 up to 256 (whole 128-byte
 * swizzle atoms for B). */
bool oxt_wg_operands(const oxi_instr *in) {
  oxi_type t = in->ops[0]->type;
  int64_t M = in->tshape->dims[0], N = in->tshape->dims[1];
  const oxi_instr *b = in->ops[1];
  return (t == OX_BF16 || t == OX_F16 || oxi_is_fp8(t) || (is_int8(t) && b->op == OXI_T_PERMUTE && b->imm == 1)) &&
         (M == 64 || M == 128) && N % 64 == 0 && N <= 256;
}
