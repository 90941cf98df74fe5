/* tma.c - TMA copies on sm_90: tensor maps, the boxes that copy a tile into
 * a wgmma staging area (issued by one thread, their bytes counted by an
 * mbarrier), mbarrier phases; and TMA loads: a load that only a wgmma dot
 * uses, copied by thread 0 into a ring of staging areas of its own, the next
 * tiles of the loop that walks it copied ahead (an attention's keys and
 * values). dot.c's K-loop pipeline builds on the same pieces. */
#include <stdlib.h>
#include <string.h>

#include "tile/lower.h"

int64_t oxt_swizzle_bytes(int64_t row) { return row >= 128 ? 128 : row; }

/* The panels of an [R, C] operand tile of es-byte elements: E elements wide. */
static int64_t panel_elems(int64_t C, int64_t es) { return oxt_swizzle_bytes(C * es) / es; }

/* An operand tile [R, C] (C contiguous) is staged as dot.c's `swizzled` lays
 * it out: C / E panels of R rows of E elements (E a swizzle width's, at most
 * 128 bytes), which is exactly what a box of [R, E] with that swizzle writes;
 * so one box a panel. A load's tile may have leading dims of 1 (a batch's and
 * a head's tile of a 4-D tensor): a box is one element along them. */
int oxt_tensor_map(oxt_lowerer *L, const oxi_instr *ld) {
  const oxi_tshape *s = ld->tshape;
  int64_t es = (int64_t)ox_dtype_size((ox_dtype)ld->type), R = s->dims[s->rank - 2], C = s->dims[s->rank - 1];
  oxi_param *p = oxb_alloc(L->m->arena, sizeof *p);
  *p = (oxi_param){.name = "tensor_map", .kind = OXI_P_TMAP, .dtype = (ox_dtype)ld->type, .rank = s->rank,
                   .src = ld->mem.index, .swizzle = (int)oxt_swizzle_bytes(C * es)};
  p->dims[0] = panel_elems(C, es);
  p->dims[1] = R;
  for (int d = 2; d < s->rank; d++)
    p->dims[d] = 1;
  oxb_vec_push(L->m->arena, &L->nk->params, p);
  return L->nk->params.len - 1;
}

oxi_instr *oxt_mbar(oxt_lowerer *L, int bars, oxi_instr *i) {
  oxi_instr *a = oxt_emit(L, OXI_SHARED_ADDR, OX_U64);
  a->mem = (oxi_mem){OXI_MEM_SHARED, bars - 1};
  a->ops[0] = i;
  a->nops = 1;
  return a;
}

oxi_instr *oxt_ring_at(oxt_lowerer *L, oxi_instr *r, int j, int S) {
  return oxt_bin(L, OXI_REM, OX_U64, oxt_bin(L, OXI_ADD, OX_U64, r, oxt_u64(L, (uint64_t)j)), oxt_u64(L, (uint64_t)S));
}

void oxt_phase_wait(oxt_lowerer *L, int slot, oxi_instr *bar, oxi_instr *stage) {
  oxi_instr *bits = oxt_get_slot(L, slot);
  oxi_instr *parity = oxt_bin(L, OXI_AND, OX_U64, oxt_bin(L, OXI_SHR, OX_U64, bits, stage), oxt_u64(L, 1));
  oxi_instr *w = oxt_emit(L, OXI_MBAR_WAIT, OXI_VOID);
  w->ops[0] = bar;
  w->ops[1] = parity;
  w->nops = 2;
  oxt_set_slot(L, slot, oxt_bin(L, OXI_XOR, OX_U64, bits, oxt_bin(L, OXI_SHL, OX_U64, oxt_u64(L, 1), stage)));
}

void oxt_mbar_release(oxt_lowerer *L, oxi_instr *bar, oxi_instr *when) {
  oxi_instr *lane0 = oxt_bin(L, 100 + OXI_EQ, OX_U64, oxt_bin(L, OXI_AND, OX_U64, L->t, oxt_u64(L, 31)), oxt_u64(L, 0));
  if (when)
    lane0 = oxt_bin(L, OXI_AND, OX_BOOL, lane0, when);
  oxi_instr *x = oxt_emit(L, OXI_MBAR_EXPECT, OXI_VOID); /* no bytes: a plain arrival */
  x->ops[0] = bar;
  x->ops[1] = lane0;
  x->nops = 2;
}

void oxt_mbar_expect(oxt_lowerer *L, oxi_instr *bar, int64_t bytes) {
  oxi_instr *x = oxt_emit(L, OXI_MBAR_EXPECT, OXI_VOID);
  x->ops[0] = bar;
  x->nops = 1;
  x->imm = (uint64_t)bytes;
}

void oxt_tma_boxes(oxt_lowerer *L, int map, const oxi_instr *ld, oxi_mem m, oxi_instr *at, oxi_instr *const *c,
                   oxi_instr *bar) {
  const oxi_tshape *s = ld->tshape;
  int rank = s->rank;
  int64_t es = (int64_t)ox_dtype_size((ox_dtype)ld->type), R = s->dims[rank - 2], C = s->dims[rank - 1];
  int64_t E = panel_elems(C, es);
  oxi_instr *row = oxt_bin(L, OXI_MUL, OX_U64, c[rank - 2], oxt_u64(L, (uint64_t)R));
  oxi_instr *col = oxt_bin(L, OXI_MUL, OX_U64, c[rank - 1], oxt_u64(L, (uint64_t)C));
  for (int64_t b = 0; b < C / E; b++) {
    oxi_instr *off = oxt_bin(L, OXI_ADD, OX_U64, at, oxt_u64(L, (uint64_t)(b * R * E)));
    oxi_instr *dst = oxt_emit(L, OXI_SHARED_ADDR, OX_U64);
    dst->mem = m;
    dst->ops[0] = off;
    dst->nops = 1;
    oxi_instr *inner = oxt_bin(L, OXI_ADD, OX_U64, col, oxt_u64(L, (uint64_t)(b * E)));
    oxi_instr *t = oxt_emit(L, OXI_TMA_LOAD, OXI_VOID);
    t->index = map;
    t->imm = (uint64_t)(R * E * es);
    t->ops[0] = dst;
    t->ops[1] = bar;
    t->ops[2] = inner; /* innermost first */
    t->ops[3] = row;
    for (int d = rank - 3; d >= 0; d--) /* the leading dims: a tile of 1, so element = tile coordinate */
      t->ops[4 + (rank - 3 - d)] = c[d];
    t->nops = 2 + rank;
  }
}

oxi_block *oxt_begin_thread0(oxt_lowerer *L) {
  oxi_block *join;
  oxt_begin_if(L, oxt_bin(L, 100 + OXI_EQ, OX_U64, L->t, oxt_u64(L, 0)), &join);
  return join;
}

void oxt_mbar_inits(oxt_lowerer *L, int bars, int S) {
  for (int s = 0; s < 2 * S; s++) {
    oxi_instr *bar = oxt_mbar(L, bars, oxt_u64(L, (uint64_t)s));
    oxi_instr *init = oxt_emit(L, OXI_MBAR_INIT, OXI_VOID);
    init->ops[0] = bar;
    init->nops = 1;
    /* full: the arming thread's arrival; empty: one a warp (oxt_mbar_release) */
    init->imm = s < S ? 1 : (uint64_t)(L->T / 32);
  }
}

/* ---- TMA loads. A load's slots, from L->tload[id].slot: [0] (a ring) an
 * earlier call was made, or (once) the copy is not yet waited for; [1, rank]
 * the next call's tile coordinates as guessed; [rank + 1] the next call's
 * stage; [rank + 2] the parity of the next phase of each stage's full
 * mbarrier, a bit a stage (every thread keeps them: every thread waits for
 * every phase); [rank + 3] the same of the empty mbarriers (thread 0's). */

/* Whether some path from the end of block `from` reaches block `to` (NULL:
 * a return) without passing through block `avoid`. */
static bool path_avoiding(const oxi_kernel *k, const oxi_block *from, const oxi_block *to, const oxi_block *avoid) {
  char *seen = oxb_calloc((size_t)k->blocks.len, 1);
  int *stack = oxb_malloc(sizeof *stack * (size_t)k->blocks.len), n = 0;
  bool found = false;
  const oxi_block *x = from;
  do {
    const oxi_instr *term = oxi_terminator(x);
    for (int i = 0; term && term->op != OXI_RET && i < 2; i++) {
      const oxi_block *y = term->target[i];
      if (y && !seen[y->id]) {
        seen[y->id] = 1;
        stack[n++] = y->id;
      }
    }
    x = NULL;
    while (n && !x && !found) {
      const oxi_block *y = k->blocks.items[stack[--n]];
      if (y == avoid)
        continue;
      const oxi_instr *yt = oxi_terminator(y);
      found = y == to || (!to && yt && yt->op == OXI_RET);
      x = y;
    }
  } while (x && !found);
  free(seen);
  free(stack);
  return found;
}

bool oxt_in_loop(const oxi_kernel *k, const oxi_block *b) { return path_avoiding(k, b, b, NULL); }

const oxi_block *oxt_block_of(const oxi_kernel *k, const oxi_instr *in) {
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++)
      if (b->instrs.items[ii] == in)
        return b;
  }
  return NULL;
}

bool oxt_tload_choose(oxt_lowerer *L, const oxi_instr *ld, const oxi_instr *dot) {
  const oxi_param *p = L->k->params.items[ld->mem.index];
  size_t es = ox_dtype_size((ox_dtype)ld->type);
  int rank = ld->tshape->rank;
  if (!L->wg || p->rank != rank || (es != 1 && es != 2) || L->nk->params.len - L->k->params.len + L->ntloads >= 8)
    return false;
  const oxi_block *bl = oxt_block_of(L->k, ld), *bd = oxt_block_of(L->k, dot);
  int S = 1;
  if (oxt_in_loop(L->k, bl)) {
    /* a ring: each call of the load is followed by one call of the dot before the load's next
       call or the kernel's end, which releases the stage the load filled: the phases pair up */
    if (bl != bd && (path_avoiding(L->k, bl, bl, bd) || path_avoiding(L->k, bl, NULL, bd) ||
                     path_avoiding(L->k, bd, bd, bl)))
      return false;
    S = 2; /* the tile a call reads and the next one's in flight: 3 measured the same on the H200 */
  }
  oxt_tload *t = &L->tload[ld->id];
  t->stages = S;
  t->rank = rank;
  t->ld = ld;
  t->dot = dot;
  L->tloads = true;
  L->ntloads++;
  return true;
}

/* The old block at whose end (or, for a dot that waits for itself, in which
 * after the dot) the stage of a call of TMA load t is released. */
static const oxi_block *release_block(const oxt_lowerer *L, const oxt_tload *t) {
  int rb = L->rel_block[t->dot->id];
  return rb ? L->k->blocks.items[rb - 1] : oxt_block_of(L->k, t->dot);
}

/* Whether every path from block `from` to block `to` passes the release in
 * block `rel` first. */
static bool released_on_the_way(const oxi_kernel *k, const oxi_block *from, const oxi_block *to, const oxi_block *rel) {
  return rel != to && (rel == from || !path_avoiding(k, from, to, rel));
}

/* The ring whose stages load t, copied once, can use: a ring of the same
 * tensor and tile whose calls all come after t's release, or all before t
 * and released before it (an attention's first key tile, before the loop
 * over keys, and its last value tile, after the loop over values). Then the
 * ring's stages take turns as they do between its own calls: each call is
 * released before the next one of either, and a call after the loop finds
 * its tile prefetched by the loop's last. NULL: none. */
static const oxt_tload *ring_to_share(const oxt_lowerer *L, const oxt_tload *t) {
  const oxi_kernel *k = L->k;
  const oxi_block *bx = oxt_block_of(k, t->ld), *rx = release_block(L, t);
  if (t->several || oxt_in_loop(k, bx) || oxt_in_loop(k, rx))
    return NULL;
  for (int i = 0; i <= k->next_id; i++) {
    const oxt_tload *y = &L->tload[i];
    if (y->stages < 2 || y->share || y->ld->mem.index != t->ld->mem.index || y->ld->type != t->ld->type ||
        y->ld->tshape->rank != t->ld->tshape->rank ||
        memcmp(y->ld->tshape->dims, t->ld->tshape->dims, sizeof(int64_t) * (size_t)y->ld->tshape->rank))
      continue;
    const oxi_block *by = oxt_block_of(k, y->ld), *ry = release_block(L, y);
    bool before = !path_avoiding(k, by, bx, NULL) && released_on_the_way(k, bx, by, rx);
    bool after = !path_avoiding(k, bx, by, NULL) && released_on_the_way(k, by, bx, ry);
    if (before || after)
      return y;
  }
  return NULL;
}

void oxt_tloads_alloc(oxt_lowerer *L) {
  for (int pass = 0; pass < 2; pass++) /* the rings, then the loads copied once */
    for (int i = 0; i <= L->k->next_id; i++) {
      oxt_tload *t = &L->tload[i];
      if (!t->stages || (t->stages == 1) != (pass == 1))
        continue;
      const oxt_tload *y = pass ? ring_to_share(L, t) : NULL;
      if (y) {
        t->stages = y->stages, t->slot = y->slot, t->area = y->area, t->bars = y->bars, t->map = y->map;
        t->share = y->ld->id + 1;
        continue;
      }
      const oxi_instr *ld = t->ld;
      t->map = oxt_tensor_map(L, ld);
      t->area = oxt_shared_array(L, (oxi_type)ld->type, t->stages * oxt_elems(ld->tshape)).index + 1;
      ((oxi_shared *)L->nk->shared.items[t->area - 1])->align = 1024; /* wgmma's swizzle atoms */
      t->bars = oxt_shared_array(L, OX_U64, 2 * t->stages).index + 1;
      for (int s = 0; s < t->rank + 4; s++) {
        int sl = oxi_slot_new(L->m, L->nk, s == 0 ? OX_BOOL : OX_U64);
        if (!s)
          t->slot = sl;
      }
    }
}

void oxt_tloads_begin(oxt_lowerer *L) {
  for (int i = 0; i <= L->k->next_id; i++) {
    const oxt_tload *t = &L->tload[i];
    for (int s = 0; t->stages && !t->share && s < t->rank + 4; s++)
      oxt_set_slot(L, t->slot + s,
                   !s ? oxt_zero_bool(L) : oxt_u64(L, s == t->rank + 3 ? (1ull << t->stages) - 1 : 0));
  }
}

void oxt_tloads_init(oxt_lowerer *L) {
  for (int i = 0; i <= L->k->next_id; i++)
    if (L->tload[i].stages && !L->tload[i].share)
      oxt_mbar_inits(L, L->tload[i].bars, L->tload[i].stages);
}

/* Waits for the phase of `stage`'s full mbarrier that its copy completes
 * (every thread, each keeping the parity bits). */
static void full_wait(oxt_lowerer *L, const oxt_tload *t, oxi_instr *stage) {
  oxt_phase_wait(L, t->slot + t->rank + 2, oxt_mbar(L, t->bars, stage), stage);
}

/* Thread 0: copies the tile of load `ld` at tile coordinates c, moved j
 * tiles down its rows (the guess of a later call), into `stage`, once every
 * warp has released it. */
static void fill(oxt_lowerer *L, const oxi_instr *ld, oxi_instr *const *c, int j, oxi_instr *stage) {
  const oxt_tload *t = &L->tload[ld->id];
  int64_t E = oxt_elems(ld->tshape);
  oxt_phase_wait(L, t->slot + t->rank + 3, oxt_mbar(L, t->bars, oxt_bin(L, OXI_ADD, OX_U64, stage, oxt_u64(L, (uint64_t)t->stages))),
                 stage);
  oxi_instr *bar = oxt_mbar(L, t->bars, stage);
  oxt_mbar_expect(L, bar, E * (int64_t)ox_dtype_size((ox_dtype)ld->type));
  oxi_instr *nc[OXI_MAX_RANK];
  for (int d = 0; d < t->rank; d++)
    nc[d] = d == t->rank - 2 && j ? oxt_bin(L, OXI_ADD, OX_U64, c[d], oxt_u64(L, (uint64_t)j)) : c[d];
  oxt_tma_boxes(L, t->map, ld, (oxi_mem){OXI_MEM_SHARED, t->area - 1}, oxt_bin(L, OXI_MUL, OX_U64, stage, oxt_u64(L, (uint64_t)E)),
                nc, bar);
}

/* The guess of a ring's next calls is the next tiles down the load's rows
 * (a loop over keys and values); checked at the next call (the coordinates
 * are the same in the whole block, so the branch does not diverge), and a
 * miss waits out the copies in flight, releases them, and copies again, so
 * that any loop is correct and every stage's phases stay paired. */
void oxt_tload_issue(oxt_lowerer *L, const oxi_instr *ld) {
  oxt_tload *t = &L->tload[ld->id];
  int S = t->stages, rank = t->rank, slot = t->slot;
  oxi_instr *c[OXI_MAX_RANK];
  for (int d = 0; d < rank; d++)
    c[d] = oxt_mapped(L, ld->ops[d]);
  oxt_clamp_coords(L, ld->tshape, c, ld->mem.index); /* past the end: zero-filled, and no wrap */
  oxi_instr *yes = oxt_emit(L, OXI_CONST, OX_BOOL);
  yes->imm = 1;
  oxi_block *join;
  if (S == 1) {
    join = oxt_begin_thread0(L);
    fill(L, ld, c, 0, oxt_u64(L, 0));
    oxt_end_if(L, join);
    oxt_set_slot(L, slot, yes);
    t->r = oxt_u64(L, 0);
    return;
  }
  oxi_instr *have = oxt_get_slot(L, slot), *r = oxt_get_slot(L, slot + rank + 1), *hit = have;
  for (int d = 0; d < rank; d++)
    hit = oxt_bin(L, OXI_AND, OX_BOOL, hit, oxt_bin(L, 100 + OXI_EQ, OX_U64, oxt_get_slot(L, slot + 1 + d), c[d]));
  oxi_instr *miss = oxt_emit(L, OXI_NOT, OX_BOOL);
  miss->ops[0] = hit;
  miss->nops = 1;
  oxt_begin_if(L, miss, &join);
  oxi_block *drained;
  oxt_begin_if(L, have, &drained); /* the S - 1 stages from r hold wrong guesses, maybe still landing */
  for (int j = 0; j < S - 1; j++) {
    oxi_instr *s = oxt_ring_at(L, r, j, S);
    full_wait(L, t, s);
    oxt_mbar_release(L, oxt_mbar(L, t->bars, oxt_bin(L, OXI_ADD, OX_U64, s, oxt_u64(L, (uint64_t)S))), NULL);
  }
  oxt_end_if(L, drained);
  oxi_block *one = oxt_begin_thread0(L);
  for (int j = 0; j < S; j++) /* this call's tile and the next S - 1 calls' */
    fill(L, ld, c, j, oxt_ring_at(L, r, j, S));
  oxt_end_if(L, one);
  oxt_end_if(L, join);
  /* a hit: the tile of the call S - 1 ahead, into the stage the previous call released */
  oxt_begin_if(L, oxt_bin(L, OXI_AND, OX_BOOL, hit, oxt_bin(L, 100 + OXI_EQ, OX_U64, L->t, oxt_u64(L, 0))), &join);
  fill(L, ld, c, S - 1, oxt_ring_at(L, r, S - 1, S));
  oxt_end_if(L, join);
  oxt_set_slot(L, slot, yes);
  for (int d = 0; d < rank; d++)
    oxt_set_slot(L, slot + 1 + d, d == rank - 2 ? oxt_bin(L, OXI_ADD, OX_U64, c[d], oxt_u64(L, 1)) : c[d]);
  oxt_set_slot(L, slot + rank + 1, oxt_ring_at(L, r, 1, S));
  t->r = r;
}

oxi_instr *oxt_tload_wait(oxt_lowerer *L, const oxi_instr *ld) {
  const oxt_tload *t = &L->tload[ld->id];
  if (t->stages == 1) { /* copied once: waited for at the first use */
    oxi_block *join;
    oxt_begin_if(L, oxt_get_slot(L, t->slot), &join);
    full_wait(L, t, oxt_u64(L, 0));
    oxt_set_slot(L, t->slot, oxt_zero_bool(L));
    oxt_end_if(L, join);
  } else {
    full_wait(L, t, t->r);
  }
  oxi_instr *at = oxt_bin(L, OXI_MUL, OX_U64, t->r, oxt_u64(L, (uint64_t)oxt_elems(ld->tshape)));
  oxi_instr *a = oxt_emit(L, OXI_SHARED_ADDR, OX_U64);
  a->mem = (oxi_mem){OXI_MEM_SHARED, t->area - 1};
  a->ops[0] = at;
  a->nops = 1;
  return a;
}

void oxt_tload_release(oxt_lowerer *L, const oxi_instr *ld) {
  const oxt_tload *t = &L->tload[ld->id];
  if (t->stages > 1)
    oxt_mbar_release(L, oxt_mbar(L, t->bars, oxt_bin(L, OXI_ADD, OX_U64, t->r, oxt_u64(L, (uint64_t)t->stages))), NULL);
}

/* A deferred dot releases its stages where its group is waited for, once per
 * call, before its loads' next calls: at the end of the block that stores its
 * result in a slot (attention's `acc = pv`, after the softmax that overlaps
 * it) if every call of the dot is followed by that block, once, before the
 * dot or its loads run again, and the block runs only after the dot (and is
 * lowered after it); else at the end of the dot's own block. */
int oxt_release_block(const oxt_lowerer *L, const oxi_instr *dot) {
  const oxi_kernel *k = L->k;
  const oxi_block *bd = oxt_block_of(k, dot), *entry = k->blocks.items[0];
  int di = 0;
  while (k->blocks.items[di] != bd)
    di++;
  for (int bi = di + 1; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->op != OXI_VAR_SET || in->ops[0] != dot)
        continue;
      bool ok = !path_avoiding(k, bd, bd, b) && !path_avoiding(k, bd, NULL, b) && !path_avoiding(k, b, b, bd) &&
                !path_avoiding(k, entry, b, bd);
      for (int i = 0; ok && i < 2; i++) {
        const oxi_instr *ld = oxt_staged_load(L, dot, i);
        ok = !ld || !path_avoiding(k, bd, oxt_block_of(k, ld), b);
      }
      if (ok)
        return bi;
    }
  }
  return di;
}

void oxt_tloads_end(oxt_lowerer *L) {
  for (int i = 0; i <= L->k->next_id; i++) {
    const oxt_tload *t = &L->tload[i];
    if (!t->stages || t->share) /* a shared ring: drained as its own */
      continue;
    oxi_block *join;
    oxt_begin_if(L, oxt_get_slot(L, t->slot), &join);
    if (t->stages == 1)
      full_wait(L, t, oxt_u64(L, 0));
    oxi_instr *r = oxt_get_slot(L, t->slot + t->rank + 1);
    for (int j = 0; t->stages > 1 && j < t->stages - 1; j++) {
      oxi_instr *s = oxt_ring_at(L, r, j, t->stages);
      full_wait(L, t, s);
    }
    oxt_end_if(L, join);
  }
}
