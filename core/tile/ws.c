/* ws.c - warp specialization on sm_90: a producer warpgroup that copies a
 * persistent matmul's operands while the block's other warpgroups (the
 * consumers) only wait for them, multiply, and release them.
 *
 * Without it, the consumers run the pipeline themselves (dot.c,
 * dot_pipeline): each call checks its guess of the coordinates and thread 0
 * issues the copies S - 2 calls ahead, between the wgmmas. Here the producer
 * walks the calls itself: the block's tiles (the persistent schedule), and
 * for each the K loop's tiles, so it must know that the calls are exactly
 * those. It does when the kernel is, in its blocks,
 *
 *     entry:  ...; k = lo; br head          (lo: computed from parameters)
 *     head:   k < hi ? body : exit          (hi: the same)
 *     body:   ...; dot(load(A, [tile_id(0), k]), load(B, [k, tile_id(1)])
 *                  or transpose(load(Bt, [tile_id(1), k])), ..); br latch
 *     latch:  1 >= hi - k ? exit : step
 *     step:   k = k + 1; br head
 *     exit:   ...; ret
 *
 * which is what `for k in lo..hi { .. }` builds (front/stmt.c) around a body
 * without branches, and no other writes of k: then each tile's calls are the
 * tiles k = lo .. hi - 1 along K, in order, and lo and hi, which read only
 * parameters and constants, the producer computes as well. Every copy it
 * makes is waited for by one call, so nothing is in flight at the end.
 *
 * Registers (setmaxnreg): the block has 128 threads more, which would leave
 * 168 registers a thread; the producer's warpgroup gives its own back (40
 * each) and the two consumer warpgroups take 232. */

#include "tile/lower.h"

#define PRODUCER_REGS 40
#define CONSUMER_REGS 232

static const oxi_instr *last(const oxi_block *b) {
  return b && b->instrs.len ? b->instrs.items[b->instrs.len - 1] : NULL;
}

static bool is_get(const oxi_instr *x, int slot) {
  return x->op == OXI_VAR_GET && x->index == slot && !x->tshape;
}

static bool is_const(const oxi_instr *x, uint64_t v) {
  return x->op == OXI_CONST && x->type == OX_U64 && x->imm == v;
}

static bool is_cmp(const oxi_instr *x, int sub) { return x->op == OXI_CMP && x->sub == sub; }

/* Tile id `axis` of a rank-2 partition (the persistent block's tile). */
static bool is_tile_id(const oxt_lowerer *L, const oxi_instr *x, int axis) {
  return x->op == OXI_T_ID && x->index == axis && ((const oxi_param *)L->k->params.items[x->mem.index])->rank == 2;
}

/* A scalar that reads only constants, scalar parameters and parameters'
 * dims (the same in every tile), made of at most *budget instructions
 * counted as a tree (again() makes it once more, as a tree). */
static bool invariant(const oxi_instr *x, int *budget) {
  if (--*budget < 0 || x->tshape)
    return false;
  if (x->op != OXI_CONST && x->op != OXI_CAST && x->op != OXI_BIN && x->op != OXI_DIM && x->op != OXI_PARAM)
    return false;
  for (int i = 0; i < x->nops; i++)
    if (!invariant(x->ops[i], budget))
      return false;
  return true;
}

/* Whether `body` is the body of a K loop over `slot` of the header
 * comment's shape; sets *hi to its end value. */
static bool counted_loop(const oxt_lowerer *L, const oxi_block *body, int slot, const oxi_instr **hi_out) {
  const oxi_kernel *k = L->k;
  const oxi_block *entry = k->blocks.items[0], *head = NULL, *latch, *step, *exit;
  const oxi_instr *br = last(body);
  if (k->blocks.len != 6 || !br || br->op != OXI_BR)
    return false;
  latch = br->target[0];
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_instr *t = last(k->blocks.items[bi]);
    if (t && t->op == OXI_CONDBR && t->target[0] == body)
      head = k->blocks.items[bi];
  }
  const oxi_instr *h = last(head), *e = last(entry), *lt = last(latch);
  int budget = 64;
  if (!h || head->instrs.len != 3 || !is_cmp(h->ops[0], OXI_LT) || !is_get(h->ops[0]->ops[0], slot) ||
      h->ops[0]->ops[0] != head->instrs.items[0] || !invariant(h->ops[0]->ops[1], &budget) || !e || e->op != OXI_BR ||
      e->target[0] != head || !lt || lt->op != OXI_CONDBR)
    return false;
  const oxi_instr *hi = h->ops[0]->ops[1], *stop = lt->ops[0];
  exit = h->target[1];
  step = lt->target[1];
  /* latch: stop when 1 >= hi - k */
  if (lt->target[0] != exit || !is_cmp(stop, OXI_GE) || !is_const(stop->ops[0], 1) || stop->ops[1]->op != OXI_BIN ||
      stop->ops[1]->sub != OXI_SUB || stop->ops[1]->ops[0] != hi || !is_get(stop->ops[1]->ops[1], slot))
    return false;
  /* step: k = k + 1 (the sum made in it, or before) */
  int n = step->instrs.len;
  const oxi_instr *set = n == 2 || n == 3 ? step->instrs.items[n - 2] : NULL, *back = last(step);
  if (!set || set->op != OXI_VAR_SET || set->index != slot || set->ops[0]->op != OXI_BIN ||
      set->ops[0]->sub != OXI_ADD || !is_get(set->ops[0]->ops[0], slot) || !is_const(set->ops[0]->ops[1], 1) ||
      back->op != OXI_BR || back->target[0] != head)
    return false;
  const oxi_instr *x = last(exit);
  if (!x || x->op != OXI_RET)
    return false;
  *hi_out = hi;
  const oxi_block *six[6] = {entry, head, body, latch, step, exit};
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < i; j++)
      if (six[i] == six[j])
        return false;
  return true;
}

bool oxt_ws_choose(oxt_lowerer *L) {
  const oxi_kernel *k = L->k;
  const oxi_instr *dot = NULL;
  if (!L->persist || L->T != 256)
    return false;
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->op == OXI_BARRIER) /* the kernel's own: for every thread of the block */
        return false;
      if (in->op == OXI_T_DOT && dot)
        return false;
      if (in->op == OXI_T_DOT)
        dot = in;
    }
  }
  if (!dot || !L->pipe[dot->id].bars)
    return false;
  /* the operands: A at (tile_id(0), k), B's staged tile at (k, tile_id(1)), or (tile_id(1), k) K-major */
  const oxi_instr *la = dot->ops[0], *lb = oxt_staged_tile(L, dot, 1);
  const oxi_instr *kv = la->ops[1];
  bool km = L->kmajor[dot->id];
  if (la->op != OXI_T_LOAD || lb->op != OXI_T_LOAD || la->nops != 2 || lb->nops != 2 || kv->op != OXI_VAR_GET ||
      kv->tshape || kv->type != OX_U64 || !is_tile_id(L, la->ops[0], 0) || lb->ops[km ? 1 : 0] != kv ||
      !is_tile_id(L, lb->ops[km ? 0 : 1], 1))
    return false;
  const oxi_block *body = oxt_block_of(k, dot);
  const oxi_instr *hi;
  if (oxt_block_of(k, kv) != body || !counted_loop(L, body, kv->index, &hi))
    return false;
  /* k's writes: the step's, and one in the entry block, of an invariant first value */
  const oxi_instr *lo = NULL;
  int sets = 0;
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->op != OXI_VAR_SET || in->index != kv->index)
        continue;
      sets++;
      if (bi == 0)
        lo = in->ops[0];
    }
  }
  int budget = 64;
  if (sets != 2 || !lo || !invariant(lo, &budget))
    return false;
  L->ws.dot = dot;
  L->ws.hi = hi;
  L->ws.lo = lo;
  L->pipe[dot->id].ws = true;
  return true;
}

/* Makes old invariant scalar x (and what it reads) again here. */
static oxi_instr *again(oxt_lowerer *L, const oxi_instr *x) {
  for (int i = 0; i < x->nops; i++)
    L->sval[x->ops[i]->id] = again(L, x->ops[i]);
  oxi_instr *c = oxt_clone(L, x);
  for (int i = 0; i < x->nops; i++) /* the kernel's own code maps them afresh */
    L->sval[x->ops[i]->id] = NULL;
  return c;
}

/* A loop `while (cond) {..}` over a u64 slot: begin_while returns the
 * slot's value in the body; end_while sets it to `next` and branches back. */
typedef struct ws_loop {
  oxi_block *head, *done;
} ws_loop;

static oxi_instr *begin_while(oxt_lowerer *L, ws_loop *lp, int slot, oxi_instr *first, oxi_instr *bound) {
  oxt_set_slot(L, slot, first);
  lp->head = oxi_block_new(L->m, L->nk);
  lp->done = oxi_block_new(L->m, L->nk);
  oxt_end_if(L, lp->head);
  oxi_instr *v = oxt_get_slot(L, slot);
  oxt_branch(L, oxt_bin(L, OXT_LT, OX_U64, v, bound), oxi_block_new(L->m, L->nk), lp->done);
  return v;
}

static void end_while(oxt_lowerer *L, ws_loop *lp, int slot, oxi_instr *next) {
  oxt_set_slot(L, slot, next);
  oxt_end_if(L, lp->head);
  L->cur = lp->done;
}

static void setmaxnreg(oxt_lowerer *L, bool inc, int regs) {
  oxi_instr *s = oxt_emit(L, OXI_SETMAXNREG, OXI_VOID);
  s->sub = inc;
  s->imm = (uint64_t)regs;
}

/* The producer: one thread walks the block's tiles as begin_tiles (lower.c)
 * does, and the K tiles lo .. hi - 1 of each, copying each call's operands
 * into the next stage of the ring (the ring's stage slot and its empty
 * mbarriers' parities are the producer's alone: the consumers keep their own
 * copies of the stage slot and the full mbarriers'). */
void oxt_ws_split(oxt_lowerer *L) {
  const oxi_instr *in = L->ws.dot;
  int pslot = L->pipe[in->id].slot, S = L->pipe[in->id].stages, out = L->persist - 1;
  oxi_block *consumers = oxi_block_new(L->m, L->nk), *producer = oxi_block_new(L->m, L->nk);
  oxt_branch(L, oxt_bin(L, OXT_LT, OX_U64, L->t, oxt_u64(L, (uint64_t)L->T)), consumers, producer);
  L->cur = producer;
  setmaxnreg(L, false, PRODUCER_REGS);
  oxi_block *idle;
  oxt_begin_if(L, oxt_bin(L, 100 + OXI_EQ, OX_U64, L->t, oxt_u64(L, (uint64_t)L->T)), &idle);
  oxi_instr *lo = again(L, L->ws.lo), *hi = again(L, L->ws.hi);
  oxi_instr *gx = oxt_tile_count(L, out, 1), *gy = oxt_tile_count(L, out, 0);
  int tslot = oxi_slot_new(L->m, L->nk, OX_U64), kslot = oxi_slot_new(L->m, L->nk, OX_U64);
  ws_loop tiles, ks;
  oxi_instr *l = begin_while(L, &tiles, tslot, oxt_sreg64(L, OXI_SREG_CTAID_X), oxt_bin(L, OXI_MUL, OX_U64, gx, gy));
  oxi_instr *ids[2];
  oxt_tile_ids(L, l, gx, gy, ids);
  oxi_instr *kk = begin_while(L, &ks, kslot, lo, hi);
  oxi_instr *c[4] = {ids[0], kk, kk, ids[1]};
  if (L->kmajor[in->id])
    c[2] = ids[1], c[3] = kk;
  oxi_instr *stage = oxt_get_slot(L, pslot + 5);
  oxt_pipe_issue(L, in, c, stage);
  oxt_set_slot(L, pslot + 5, oxt_ring_at(L, stage, 1, S));
  end_while(L, &ks, kslot, oxt_bin(L, OXI_ADD, OX_U64, kk, oxt_u64(L, 1)));
  end_while(L, &tiles, tslot, oxt_bin(L, OXI_ADD, OX_U64, l, oxt_sreg64(L, OXI_SREG_NCTAID_X)));
  oxt_end_if(L, idle);
  oxt_emit(L, OXI_RET, OXI_VOID);
  L->cur = consumers;
  setmaxnreg(L, true, CONSUMER_REGS);
  L->split = true;
}
