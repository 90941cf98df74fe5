/* lower.c - the tile lowering (docs/tile-design.md): the driver. For CUDA, every tile
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
#include <stdlib.h>
#include <string.h>

#include "front/limits.h"
#include "tile/lower.h"

#define MAX_PER_THREAD 64 /* elements of one tile per thread, to stay in registers */
#define OXT_CPU_BLOCK_MAX ((int64_t)256 << 20) /* bytes of tile values a CPU block may hold */

static void next_tile(oxt_lowerer *L);

/* Before the block exits: no copy may land after it has given its shared
 * memory back, nor a wgmma read it. */
static void before_exit(oxt_lowerer *L) {
  if (!L->pipelined && !L->early && !L->tloads)
    return;
  oxi_instr *w = oxt_emit(L, OXI_CP_WAIT, OXI_VOID);
  w->imm = 0;
  oxt_pipelines_end(L);
  if (L->wg)
    oxt_wg_sync(L, NULL, 2, 0);
  if (L->turn_first) /* warpgroup 1's last handing of the turn, taken: no arrival left pending */
    oxt_named_bar(L, 0, oxt_u64(L, 1), oxt_bin(L, 100 + OXI_EQ, OX_U64, oxt_warpgroup(L), oxt_u64(L, 0)));
}

static void lower_instr(oxt_lowerer *L, const oxi_instr *in) {
  if (L->serial) {
    oxt_serial_instr(L, in);
    return;
  }
  if (in->id >= 0 && L->defer[in->id])
    return; /* lowered piecewise at the store that takes it (epilogue.c) */
  switch (in->op) {
  case OXI_T_LOAD:
    if (L->tload[in->id].stages)
      oxt_tload_issue(L, in);
    else if (L->dot_of[in->id])
      oxt_copy_early(L, in);
    else
      oxt_lower_load(L, in);
    return;
  case OXI_T_STORE:
    if (L->defer[in->ops[0]->id])
      oxt_lower_epilogue(L, in);
    else
      oxt_lower_store(L, in);
    return;
  case OXI_T_SPLAT: {
    oxi_instr **out = oxt_new_elements(L, in->tshape);
    int a = oxt_count_in(L, in->tshape, false), b = oxt_count_in(L, in->tshape, true);
    for (int e = 0; e < (a > b ? a : b); e++)
      out[e] = oxt_mapped(L, in->ops[0]);
    L->tval[in->id] = out;
    L->everywhere[in->id] = true; /* tile code is the same in every thread */
    return;
  }
  case OXI_T_DOT: oxt_lower_dot(L, in); return;
  case OXI_T_ATOMIC_ADD: oxt_lower_atomic(L, in); return;
  case OXI_T_PREFETCH: oxt_lower_prefetch(L, in); return;
  case OXI_VAR_GET:
  case OXI_VAR_SET:
    if (in->tshape || (in->op == OXI_VAR_SET && in->ops[0]->tshape)) {
      oxt_tile_var(L, in);
      return;
    }
    break;
  case OXI_T_REDUCE: oxt_lower_reduce(L, in); return;
  case OXI_T_BROADCAST: oxt_lower_broadcast(L, in); return;
  case OXI_T_RESHAPE:
  case OXI_T_PERMUTE: oxt_lower_move(L, in); return;
  case OXI_T_IOTA: oxt_lower_iota(L, in); return;
  case OXI_T_GATHER: oxt_lower_gather(L, in); return;
  case OXI_T_EXTRACT: oxt_lower_extract(L, in); return;
  case OXI_T_SLICE: oxt_lower_slice(L, in); return;
  case OXI_T_SCAN: oxt_lower_scan(L, in); return;
  case OXI_T_SORT: oxt_lower_sort(L, in); return;
  case OXI_T_ID: L->sval[in->id] = oxt_tile_id(L, in->mem.index, in->index); return;
  case OXI_T_COUNT: L->sval[in->id] = oxt_tile_count(L, in->mem.index, in->index); return;
  case OXI_RET:
    if (L->persist) {
      next_tile(L);
      return;
    }
    before_exit(L);
    break;
  default: break;
  }
  if (in->tshape) {
    oxt_lower_elementwise(L, in);
    return;
  }
  oxi_instr *c = oxt_clone(L, in);
  if (in->id >= 0)
    L->sval[in->id] = c;
}

/* Whether tile value `x` is made as cheaply in one layout as in the other:
 * a splat, an iota, or an elementwise op of such values (`depth` bounds the
 * search). */
static bool free_in_any_layout(const oxt_lowerer *L, const oxi_instr *x, int depth) {
  if (!x->tshape || L->splat[x->id] || x->op == OXI_T_IOTA)
    return true;
  /* a broadcast is read from its (smaller) operand through scratch in either layout (ops.c:
     moved): made in the mma layout, a bias or a row of scales costs its own size in shared
     memory, not the whole accumulator's a move would */
  if (x->op == OXI_T_BROADCAST && !oxt_is_mma(L, x->ops[0]))
    return true;
  /* and a load's elements come from global memory to whichever threads hold them (ops.c) */
  if (x->op == OXI_T_LOAD)
    return true;
  if (!depth || !oxt_elementwise(x))
    return false;
  for (int i = 0; i < x->nops; i++)
    if (!free_in_any_layout(L, x->ops[i], depth - 1))
      return false;
  return true;
}

/* Whether reduction or broadcast `in` keeps its values in the mma layout: a
 * reduction along the rows of a wgmma accumulator (to an [M, 1] tile of its
 * rows: reduce_rows, in registers and shuffles) and a broadcast of such rows
 * back along them (free). Only where every mma layout has a warp's 16 rows
 * whole (wgmma, L->wg); 4- and 8-byte elements, which shuffles take. */
static bool along_rows(const oxt_lowerer *L, const oxi_instr *in) {
  const oxi_instr *src = in->ops[0];
  const oxi_tshape *row = in->op == OXI_T_REDUCE ? in->tshape : src->tshape;
  oxt_mma_layout a, b;
  size_t size = ox_dtype_size((ox_dtype)in->type);
  const oxi_tshape *whole = in->op == OXI_T_REDUCE ? src->tshape : in->tshape;
  return L->wg && oxt_is_mma(L, src) && in->tshape->rank == 2 && row->dims[1] == 1 &&
         (in->op == OXI_T_BROADCAST || (in->index == 1 && (size == 4 || size == 8))) &&
         oxt_mma_layout_of(L, row, &a) && oxt_mma_layout_of(L, whole, &b) && a.wn == 1 && b.WN == 1 &&
         b.wm == 16 && b.wn >= 8;
}

/* Applies `step` to every instruction of the tile kernel until no step
 * changes anything (facts that flow around loops). */
static void to_fixed_point(oxt_lowerer *L, bool (*step)(oxt_lowerer *L, const oxi_instr *in)) {
  const oxi_kernel *k = L->k;
  for (bool changed = true; changed;) {
    changed = false;
    for (int bi = 0; bi < k->blocks.len; bi++) {
      const oxi_block *b = k->blocks.items[bi];
      for (int ii = 0; ii < b->instrs.len; ii++)
        changed |= step(L, b->instrs.items[ii]);
    }
  }
}

/* Which values and tile slots live in the mma layout: dots on tensor cores,
 * elementwise ops with an operand that does (so `acc + dot(a, b)` stays in
 * it; other operands move to it), and slots that such a value is assigned to, with what is read from them; to a fixed
 * point, since a loop reads a slot before the assignment that sets it. */
static bool layout_step(oxt_lowerer *L, const oxi_instr *in) {
  bool changed = false;
  if (in->op == OXI_T_SPLAT)
    L->splat[in->id] = 1;
  if (in->op == OXI_VAR_SET && in->ops[0]->tshape && oxt_is_mma(L, in->ops[0]) && !L->slot_mma[in->index])
    L->slot_mma[in->index] = changed = true;
  if (in->id < 0)
    return changed;
  bool mma = L->mma[in->id];
  oxt_mma_layout ml;
  if (in->op == OXI_T_DOT)
    mma = L->cuda && oxt_dot_on_tensor_cores(L, in);
  else if (in->op == OXI_VAR_GET && in->tshape)
    mma = L->slot_mma[in->index];
  else if (oxt_elementwise(in)) /* with any operand in it (the others move to it) */
    for (int i = 0; i < in->nops; i++)
      mma |= in->ops[i]->tshape && oxt_is_mma(L, in->ops[i]);
  else if (in->op == OXI_T_REDUCE || in->op == OXI_T_BROADCAST)
    mma = along_rows(L, in);
  else if (in->op == OXI_T_RESHAPE && oxt_is_mma(L, in->ops[0])) /* adding or dropping leading 1s */
    mma = oxt_mma_layout_of(L, in->tshape, &ml) && oxt_mma_layout_of(L, in->ops[0]->tshape, &ml) &&
          in->tshape->dims[in->tshape->rank - 1] == in->ops[0]->tshape->dims[in->ops[0]->tshape->rank - 1];
  if (mma && !L->mma[in->id])
    L->mma[in->id] = changed = true;
  /* operands that cost nothing to make in the mma layout (iota, and
     elementwise ops of them and splats: a causal mask's coordinates)
     are made in it, rather than moved to it at every use */
  for (int i = 0; L->mma[in->id] && oxt_elementwise(in) && i < in->nops; i++) {
    const oxi_instr *x = in->ops[i];
    if (x->tshape && !L->mma[x->id] && !L->splat[x->id] && free_in_any_layout(L, x, 8))
      L->mma[x->id] = changed = true;
  }
  return changed;
}

/* An output tile parameter of kernel k if every one has rank 2 (the tile
 * ids the lowering makes are for all of them), else -1. */
static int rank2_output(const oxi_kernel *k) {
  int out = -1;
  for (int i = 0; i < k->params.len; i++) {
    const oxi_param *p = k->params.items[i];
    if (p->kind == OXI_P_TILE && p->rank != 2)
      return -1;
    if (p->kind == OXI_P_TILE)
      out = i;
  }
  return out;
}

/* The output tile parameter of a kernel whose blocks can loop over its tiles
 * (persistent blocks), or -1. For kernels on wgmma whose every dot is a
 * pipeline fed by TMA (a matmul) and whose outputs are rank-2 partitions:
 * the pipelines' state (rings, mbarrier phases) then carries from one tile to
 * the next, so the copies for a block's next tile are in flight while it
 * finishes this one (dot.c's guesses run on past the last K tile), and a
 * block does not pay for filling its pipeline and initializing its mbarriers
 * again. Not with TMA loads of their own (tma.c) or cp.async copies, whose
 * state is per tile. */
static int persistent_output(const oxt_lowerer *L) {
  if (!L->wg || L->tloads || !L->pipelined)
    return -1;
  int out = rank2_output(L->k);
  for (int bi = 0; out >= 0 && bi < L->k->blocks.len; bi++) {
    const oxi_block *b = L->k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->op == OXI_T_DOT && !L->pipe[in->id].bars)
        return -1;
    }
  }
  return out;
}

/* The start of a persistent block's loop over tiles (persistent_output): its
 * tile index starts at blockIdx.x; the head leaves for the exit past the last
 * tile; the body starts with the tile's ids and the next tile's (for dot.c's
 * guesses), then the kernel's own code, whose returns go on to the next tile
 * (next_tile). */
static void begin_tiles(oxt_lowerer *L) {
  int out = L->persist - 1;
  L->tile_slot = oxi_slot_new(L->m, L->nk, OX_U64);
  for (int i = 0; i < 2; i++)
    oxi_slot_new(L->m, L->nk, OX_U64);
  oxt_set_slot(L, L->tile_slot, oxt_sreg64(L, OXI_SREG_CTAID_X));
  L->tiles_head = oxi_block_new(L->m, L->nk);
  L->tiles_exit = oxi_block_new(L->m, L->nk);
  oxt_end_if(L, L->tiles_head);
  oxi_instr *l = oxt_get_slot(L, L->tile_slot);
  oxi_instr *gx = oxt_tile_count(L, out, 1), *gy = oxt_tile_count(L, out, 0);
  oxt_branch(L, oxt_bin(L, OXT_LT, OX_U64, l, oxt_bin(L, OXI_MUL, OX_U64, gx, gy)), oxi_block_new(L->m, L->nk),
             L->tiles_exit);
  oxi_instr *next[2];
  oxt_tile_ids(L, l, gx, gy, L->grouped);
  if (L->ws.dot) /* no guesses: the producer knows (ws.c) */
    return;
  oxt_tile_ids(L, oxt_bin(L, OXI_ADD, OX_U64, l, oxt_sreg64(L, OXI_SREG_NCTAID_X)), gx, gy, next);
  for (int i = 0; i < 2; i++)
    oxt_set_slot(L, L->tile_slot + 1 + i, oxt_bin(L, OXI_SUB, OX_U64, next[i], L->grouped[i]));
}

/* A return of a persistent block's kernel code: on to its next tile. */
static void next_tile(oxt_lowerer *L) {
  oxt_wg_sync(L, NULL, 2, 0); /* no wgmma in flight into the next tile's code */
  oxt_set_slot(L, L->tile_slot,
               oxt_bin(L, OXI_ADD, OX_U64, oxt_get_slot(L, L->tile_slot), oxt_sreg64(L, OXI_SREG_NCTAID_X)));
  oxi_instr *br = oxt_emit(L, OXI_BR, OXI_VOID);
  br->target[0] = L->tiles_head;
}

/* The accumulator slots that may hold registers a wgmma still writes: those
 * written with a pipelined dot's result, whose group stays in flight across
 * the loop, or with a read of such a slot (L->slot_busy). Reads of the
 * others need no wait (a deferred dot's result is waited for before it is
 * stored, oxt_wg_block_end). */
static bool busy_step(oxt_lowerer *L, const oxi_instr *in) {
  if (in->op != OXI_VAR_SET || !in->ops[0]->tshape || L->slot_busy[in->index])
    return false;
  const oxi_instr *x = in->ops[0];
  if (!(x->op == OXI_T_DOT && L->pipe[x->id].stages) && !(x->op == OXI_VAR_GET && L->slot_busy[x->index]))
    return false;
  L->slot_busy[in->index] = 1;
  return true;
}

/* Whether old instruction `in` lowers without a block barrier when it sits
 * between two dots of a warpgroup's turn (choose_turns): a slot access or
 * elementwise op that changes no layout, a broadcast along an accumulator's
 * rows, a deferred dot. */
static bool no_barrier(const oxt_lowerer *L, const oxi_instr *in) {
  if (!in->tshape && !(in->op == OXI_VAR_SET && in->ops[0]->tshape))
    return in->op != OXI_BARRIER && in->op != OXI_T_STORE && in->op != OXI_T_ATOMIC_ADD && in->op != OXI_T_LOAD;
  if (in->op == OXI_VAR_GET)
    return true;
  if (in->op == OXI_VAR_SET)
    return L->slot_mma[in->index] && oxt_is_mma(L, in->ops[0]);
  if (in->op == OXI_T_DOT)
    return L->rel_block[in->id] != 0; /* deferred */
  if (in->op == OXI_T_BROADCAST)
    return along_rows(L, in);
  if (!oxt_elementwise(in) || !L->mma[in->id])
    return false;
  for (int i = 0; i < in->nops; i++)
    if (in->ops[i]->tshape && !L->mma[in->ops[i]->id] && !free_in_any_layout(L, in->ops[i], 4))
      return false;
  return true;
}

/* Warpgroups taking turns (FlashAttention-3's ping-pong): in a block of two
 * warpgroups whose loop issues two or more deferred dots in one old block,
 * with nothing between them that needs a block barrier, each warpgroup waits
 * for its turn before the first of them (a named barrier, 1 + its index) and
 * gives the turn to the other after the last, so that one's softmax runs
 * while the other's products are on the tensor cores. Sets L->turn_first and
 * L->turn_last (old value ids + 1); none if two blocks would qualify. */
static void choose_turns(oxt_lowerer *L) {
  const oxi_kernel *k = L->k;
  if (!L->wg || L->T != 256)
    return;
  int found = 0;
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    int first = -1, last = -1;
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->op == OXI_T_DOT && L->rel_block[in->id]) { /* deferred */
        first = first < 0 ? ii : first;
        last = ii;
      }
    }
    if (first < 0 || first == last || !oxt_in_loop(k, b))
      continue;
    bool ok = true;
    for (int ii = first + 1; ok && ii < last; ii++)
      ok = no_barrier(L, b->instrs.items[ii]);
    if (!ok)
      continue;
    if (found++)
      return (void)(L->turn_first = L->turn_last = 0);
    L->turn_first = ((const oxi_instr *)b->instrs.items[first])->id + 1;
    L->turn_last = ((const oxi_instr *)b->instrs.items[last])->id + 1;
  }
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
      if (in->tshape && oxt_elems(in->tshape) > emax)
        emax = oxt_elems(in->tshape);
      if (sm > 0 && in->op == OXI_T_DOT && oxt_tc_operands(in)) {
        if (oxt_elems(in->tshape) > dot)
          dot = oxt_elems(in->tshape);
        wg_all &= oxt_wg_operands(in) && (!wg_m || wg_m == in->tshape->dims[0]);
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

/* Rewrites the fp8 dots that do not run on wgmma as fp8 (oxt_fp8_on_wgmma;
 * `wg`: the block's dots run on wgmma) into dots of their operands widened
 * to f16, an exact conversion, in the tile kernel itself: mma.sync, the
 * other paths and the CPU then see an f16 dot. */
static void widen_fp8_dots(oxi_module *m, oxi_kernel *k, bool wg) {
  for (int bi = 0; bi < k->blocks.len; bi++) {
    oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      oxi_instr *in = b->instrs.items[ii];
      if (in->op != OXI_T_DOT || !oxi_is_fp8(in->ops[0]->type) || (wg && oxt_fp8_on_wgmma(in)))
        continue;
      for (int i = 0; i < 2; i++) {
        oxi_instr *c = oxi_emit(m, k, b, OXI_CAST, OX_F16); /* appended: moved before the dot */
        memmove(&b->instrs.items[ii + 1], &b->instrs.items[ii], sizeof(void *) * (size_t)(b->instrs.len - 1 - ii));
        b->instrs.items[ii++] = c;
        c->ops[0] = in->ops[i];
        c->nops = 1;
        c->tshape = in->ops[i]->tshape;
        c->line = in->line;
        c->col = in->col;
        in->ops[i] = c;
      }
    }
  }
}

/* The lowered kernel against the compiler's size limits (front/limits.h),
 * after lowering `in`: the error names in's source construct, whose expansion
 * crossed the limit (the kernel's own location if it has none). `others`:
 * instructions of the module's other kernels. */
static ox_status check_size(const oxt_lowerer *L, const oxi_instr *in, int64_t others) {
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

/* How many blocks of a wgmma kernel an SM should hold at once, given the
 * shared memory a block takes: as many as shared memory holds (an SM has a
 * block's limit and 1 KiB a block more), if that leaves each thread (an SM
 * has 64 Ki registers, allocated 8 at a time) 160 registers or more, and no
 * fewer than the registers the wgmma dots of one old block hold plus 40.
 * Without a bound ptxas takes up to 255 registers: attention at 64 x 128 x
 * 64 took 172, two blocks an SM where shared memory holds three; bound to
 * 168, it runs 13% faster on the H200. The floor of 160 is there because
 * the estimate alone is not safe: a kernel of 64 x 64 dots whose sum
 * `acc + dot(..)` holds both takes 90 registers, not the estimate's 72,
 * and bound to 80 ptxas spilled and serialized its wgmmas. Fewer blocks
 * than shared memory holds are not asked for (ptxas's own choice may hold
 * more: 127 registers, four blocks, at 64 x 64 x 64). 0: no bound. */
static int blocks_an_sm(int live, int64_t shared, int64_t limit, int T) {
  int n = (int)((limit + 1024) / (shared + 1024)), regs = n > 1 ? 65536 / (n * T) / 8 * 8 : 0;
  return n > 1 && regs >= 160 && regs >= live + 40 ? n : 0;
}

/* The most registers the wgmma dots of one old block hold (blocks_an_sm). */
static int wgmma_live(const oxt_lowerer *L) {
  const oxi_kernel *k = L->k;
  int live = 0;
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    int sum = 0;
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->op == OXI_T_DOT && L->mma[in->id])
        sum += oxt_wg_registers(L, in);
    }
    live = sum > live ? sum : live;
  }
  return live;
}

ox_status oxt_lower(oxi_module *m, oxi_kernel *k, int sm, int64_t shared_limit) {
  assert(k->is_tile);
  bool cuda = sm > 0, wg;
  int64_t emax, most, T = block_threads(k, sm, &emax, &most, &wg);
  widen_fp8_dots(m, k, wg);
  if (!T)
    return oxb_set_error(OX_ERR_UNSUPPORTED,
                         "%s:%d:%d: kernel '%s' has a tile of %lld elements; this version of the "
                         "tile lowering handles at most %lld",
                         m->filename, k->line, k->col, k->name, (long long)emax, (long long)most);
  oxt_lowerer L = {0};
  L.m = m;
  L.k = k;
  L.serial = sm == 0;
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
  L.sval = oxb_calloc(nv, sizeof *L.sval);
  L.tval = oxb_calloc(nv, sizeof *L.tval);
  L.everywhere = oxb_calloc(nv, sizeof *L.everywhere);
  L.mma = oxb_calloc(nv, 1);
  L.splat = oxb_calloc(nv, 1);
  L.slot_mma = oxb_calloc(ns, 1);
  L.direct = oxb_calloc(nv, 1);
  L.kmajor = oxb_calloc(nv, 1);
  L.dot_of = oxb_calloc(nv, sizeof *L.dot_of);
  L.area = oxb_calloc(nv, sizeof *L.area);
  L.cp_at = oxb_calloc(nv, sizeof *L.cp_at);
  L.cp_block = oxb_calloc(nv, sizeof *L.cp_block);
  L.pipe = oxb_calloc(nv, sizeof *L.pipe);
  L.tload = oxb_calloc(nv, sizeof *L.tload);
  L.tslots = oxb_calloc(ns, sizeof *L.tslots);
  L.vacc = oxb_calloc(nv, sizeof *L.vacc);
  L.vslot = oxb_calloc(ns, sizeof *L.vslot);
  L.pairs = oxb_calloc(nv, sizeof *L.pairs);
  L.pair_reader = oxb_calloc(ns, sizeof *L.pair_reader);
  L.wg_at = oxb_calloc(nv, sizeof *L.wg_at);
  L.wg_block = oxb_calloc(nv, sizeof *L.wg_block);
  L.wg_after = oxb_calloc(nv, sizeof *L.wg_after);
  L.ready = oxb_calloc(nv, 1);
  L.slot_busy = oxb_calloc(ns, 1);
  L.rel_block = oxb_calloc(nv, sizeof *L.rel_block);
  L.nb = oxb_calloc((size_t)k->blocks.len, sizeof *L.nb);
  L.buf = oxb_calloc(nv, sizeof *L.buf);
  L.defer = oxb_calloc(nv, 1);
  if (!L.serial) { /* the CPU has one layout, a buffer, and no tensor cores */
    to_fixed_point(&L, layout_step);
    oxt_choose_direct_loads(&L);
    to_fixed_point(&L, busy_step);
    for (int bi = 0; bi < k->blocks.len; bi++) { /* the deferred dots, once */
      const oxi_block *b = k->blocks.items[bi];
      for (int ii = 0; ii < b->instrs.len; ii++) {
        const oxi_instr *in = b->instrs.items[ii];
        if (in->op == OXI_T_DOT && oxt_dot_deferred(&L, in))
          L.rel_block[in->id] = oxt_release_block(&L, in) + 1;
      }
    }
    oxt_tloads_alloc(&L);
    choose_turns(&L);
    oxt_plan_epilogues(&L);
  }
  int user_shared = k->shared.len;
  for (int bi = 0; bi < k->blocks.len; bi++)
    L.nb[bi] = oxi_block_new(m, nk);
  for (int bi = 0; bi < k->blocks.len && !st; bi++) {
    L.cur = L.nb[bi];
    L.block = bi;
    L.commits = 0;
    L.wg_commits = 0;
    if (bi == 0) { /* blocks are (T, 1, 1): the thread's index is tid.x */
      L.t = oxt_sreg64(&L, OXI_SREG_TID_X);
      for (int i = 0; i < k->params.len; i++) /* contiguous16 tensors start 16-byte aligned */
        if (((oxi_param *)k->params.items[i])->contiguous16) {
          oxi_instr *a = oxt_emit(&L, OXI_ALIGNED, OX_BOOL);
          a->mem.kind = OXI_MEM_PARAM;
          a->mem.index = i;
          a->imm = 16;
          oxi_instr *as = oxt_emit(&L, OXI_ASSUME, OXI_VOID);
          as->ops[0] = a;
          as->nops = 1;
        }
      oxt_pipelines_begin(&L);
      if (L.turn_first) /* the first turn is warpgroup 0's: warpgroup 1 gives it */
        oxt_named_bar(&L, 1, oxt_u64(&L, 1), oxt_bin(&L, 100 + OXI_EQ, OX_U64, oxt_warpgroup(&L), oxt_u64(&L, 1)));
      L.persist = persistent_output(&L) + 1;
      if (L.persist && oxt_ws_choose(&L))
        oxt_ws_split(&L);
      if (L.persist) {
        begin_tiles(&L);
      } else if (L.pipelined) {
        int out = rank2_output(k);
        if (out >= 0) {
          oxi_instr *gx = oxt_tile_count(&L, out, 1), *gy = oxt_tile_count(&L, out, 0);
          oxi_instr *l = oxt_bin(&L, OXI_ADD, OX_U64, oxt_sreg64(&L, OXI_SREG_CTAID_X),
                                 oxt_bin(&L, OXI_MUL, OX_U64, oxt_sreg64(&L, OXI_SREG_CTAID_Y), gx));
          oxt_tile_ids(&L, l, gx, gy, L.grouped);
        }
      }
    }
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len && !st; ii++) {
      if (ii == b->instrs.len - 1)
        oxt_wg_block_end(&L); /* before the terminator */
      lower_instr(&L, b->instrs.items[ii]);
      st = check_size(&L, b->instrs.items[ii], others);
    }
  }
  if (!st && L.persist) { /* past the last tile */
    L.cur = L.tiles_exit;
    before_exit(&L);
    oxt_emit(&L, OXI_RET, OXI_VOID);
    nk->persistent = true;
  }
  free(L.sval);
  free(L.tval);
  free(L.everywhere);
  int live = L.wg ? wgmma_live(&L) : 0;
  free(L.mma);
  free(L.splat);
  free(L.slot_mma);
  free(L.direct);
  free(L.kmajor);
  free(L.dot_of);
  free(L.area);
  free(L.cp_at);
  free(L.cp_block);
  free(L.pipe);
  free(L.tload);
  free(L.tslots);
  free(L.vacc);
  free(L.vslot);
  free(L.pairs);
  free(L.pair_reader);
  free(L.wg_at);
  free(L.wg_block);
  free(L.wg_after);
  free(L.ready);
  free(L.slot_busy);
  free(L.rel_block);
  free(L.nb);
  free(L.buf);
  free(L.defer);
  if (st)
    return st;
  /* the scratch arrays, after what the kernel had: the 1024-aligned ones (wgmma's operands) first,
     so that small arrays between them (mbarriers) waste no padding */
  for (int pass = 0; pass < 2; pass++)
    for (int i = user_shared; i < nk->shared.len; i++) {
      oxi_shared *sh = nk->shared.items[i];
      if ((sh->align >= 1024) != (pass == 0))
        continue;
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
  k->params = nk->params; /* with the tensor maps of TMA copies */
  k->slots = nk->slots;
  k->next_id = nk->next_id;
  k->ninstrs = nk->ninstrs;
  k->nloops = nk->nloops;
  k->shared = nk->shared;
  k->shared_bytes = nk->shared_bytes;
  k->uses_sync = nk->uses_sync;
  k->persistent = nk->persistent;
  int threads = L.T + (L.ws.dot ? 128 : 0); /* the producer warpgroup's (ws.c) */
  k->min_blocks = L.wg ? blocks_an_sm(live, nk->shared_bytes, shared_limit, threads) : 0;
  k->is_tile = false;
  k->block[0] = threads;
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
