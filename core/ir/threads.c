/* threads.c - a SIMT kernel whose threads wait for each other (barriers, warp
 * shuffles and votes) as loops over a block's threads, for the CPU.
 *
 * A GPU runs a block's threads at once; a CPU core runs them in turn. Run
 * each on a fiber, and every barrier costs a switch per thread. Instead, as
 * PoCL and the SYCL and ISPC CPU back ends do, the kernel is cut at its
 * rendezvous points (each barrier, shuffle and vote) into regions, the code
 * from one rendezvous to the next, and a region runs as a loop over the
 * threads that are at its start:
 *
 *   state[t] = 0 (region 0 starts at the kernel's entry) for every thread t
 *   repeat:
 *     for each region r that some thread is ready at:
 *       for each thread t with state[t] == r: run r's code for t, up to the
 *         rendezvous it reaches (state[t] = waiting at it, and what it gives
 *         the others: its shuffle value, its vote) or its return (state[t] =
 *         done)
 *     the rendezvous (OXI_RENDEZVOUS, the executor's cpu_rendezvous):
 *       completes a barrier when every thread not done waits at one, a warp
 *       op when every lane of the warp not done waits at one (res[t]); those
 *       threads are then ready at the region after their rendezvous
 *   until every thread is done
 *
 * The region after a shuffle or vote starts by reading its result. What a
 * region needs from an earlier one lives in per-thread arrays in the block's
 * shared memory, indexed by the thread: the variables live across a
 * rendezvous, and the values used in another piece of the kernel than the one
 * they are made in. Every other variable stays the loop body's own, which
 * LLVM keeps in registers. The semantics are the fibers' (the executor's top
 * comment, runtime/cpu.c): early returns, partial warps, absent lanes,
 * barriers in loops and in divergent code, the deadlock rule.
 *
 * The layout of the threads' state is runtime.h's OXR_LOOP_*, repeated below.
 * Kernels with local arrays (a thread's own array) keep the fibers. */
#include "ir/ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* runtime.h's OXR_LOOP_* (the IR layer does not include the runtime's header) */
enum { MAXT = 1024, DONE = 0xFFFFFFFEu, AREA = MAXT * (2 * 4 + 2 * 8) };
enum { A_STATE, A_ARG }; /* the u32 arrays, in order; then val and res */
/* state[t] of a thread waiting at a rendezvous of kind k that goes on at region c */
#define WAITING(k, c) (0x80000000u | (uint32_t)(k) << 24 | (uint32_t)(c))

bool oxi_can_loop_threads(const oxi_kernel *k) { return k->uses_sync && !k->is_tile && !k->locals.len; }

static bool is_sync(const oxi_instr *in) {
  return in->op == OXI_BARRIER || in->op == OXI_SHFL || in->op == OXI_VOTE;
}

/* A piece: instructions [i0, i1) of block b, cut before each rendezvous. */
typedef struct piece {
  int b, i0, i1;
  bool sync; /* it starts with a rendezvous */
} piece;

typedef struct lt {
  oxi_module *m;
  const oxi_kernel *k;
  oxi_kernel *nk;
  oxi_block *cur;
  piece *p;
  int np;
  int *first;     /* block -> its first piece */
  int *def;       /* value id -> its piece */
  int *dslot;     /* value id -> the slot + 1 it is demoted to (used in another piece) */
  int *arr;       /* slot -> its per-thread array (a shared array of its dtype) + 1, for the
                     slots live across a rendezvous */
  int64_t *col;   /* ... and where its column starts: element col * (the block's threads) */
  int *region_of; /* piece -> the region it starts (sync pieces and piece 0) + 1 */
  int nregions;
  int64_t area;   /* byte offset of the threads' state */
  int u32arr[2];  /* state, arg: shared arrays */
  int view[2][OX_DTYPE_COUNT]; /* val (0) and res (1) as arrays of a dtype, + 1 */
  int tslot, nslot, mslot; /* the thread in the loop, the block's thread count, the ready mask */
  int tid[3];     /* the loop thread's index along x, y, z (u32), counted with it: no division */
  int sreg[OXI_SREG_LANEID]; /* slots of the block's own special registers (block index, sizes),
                     read once at the entry */
  oxi_instr **nv; /* old value id -> its copy in the piece being copied */
  oxi_block ***blk; /* [region][piece] -> its copy; [region][np + piece]: the exit at rendezvous piece */
  int *work, nwork;  /* pieces of the region being built, to copy */
  oxi_block **next; /* region -> its loop's next-thread block */
} lt;

/* ------------------------------------------------------------ emitting */

static oxi_instr *emit(lt *X, oxi_op op, oxi_type t) { return oxi_emit(X->m, X->nk, X->cur, op, t); }

static oxi_instr *cnst(lt *X, oxi_type t, uint64_t v) {
  oxi_instr *c = emit(X, OXI_CONST, t);
  c->imm = v;
  return c;
}

static oxi_instr *op2(lt *X, oxi_op op, int sub, oxi_type t, oxi_instr *a, oxi_instr *b) {
  oxi_instr *r = emit(X, op, t);
  r->sub = sub;
  r->ops[0] = a;
  r->ops[1] = b;
  r->nops = 2;
  return r;
}

static oxi_instr *bin(lt *X, int sub, oxi_instr *a, oxi_instr *b) { return op2(X, OXI_BIN, sub, a->type, a, b); }
static oxi_instr *cmp(lt *X, int sub, oxi_instr *a, oxi_instr *b) { return op2(X, OXI_CMP, sub, OX_BOOL, a, b); }

static oxi_instr *cast(lt *X, oxi_instr *v, oxi_type t) {
  oxi_instr *c = emit(X, OXI_CAST, t);
  c->ops[0] = v;
  c->nops = 1;
  return c;
}

static oxi_instr *get(lt *X, int slot) {
  oxi_instr *g = emit(X, OXI_VAR_GET, oxi_slot_type(X->nk, slot));
  g->index = slot;
  return g;
}

static void set(lt *X, int slot, oxi_instr *v) {
  oxi_instr *s = emit(X, OXI_VAR_SET, OXI_VOID);
  s->index = slot;
  s->ops[0] = v;
  s->nops = 1;
}

static void br(lt *X, oxi_block *to) { emit(X, OXI_BR, OXI_VOID)->target[0] = to; }

static void condbr(lt *X, oxi_instr *c, oxi_block *yes, oxi_block *no) {
  oxi_instr *b = emit(X, OXI_CONDBR, OXI_VOID);
  b->ops[0] = c;
  b->nops = 1;
  b->target[0] = yes;
  b->target[1] = no;
}

static int shared_new(lt *X, ox_dtype dt, int64_t count, int64_t offset) {
  oxi_shared *sh = oxb_alloc(X->m->arena, sizeof *sh);
  sh->dtype = dt;
  sh->count = count;
  sh->offset = offset;
  oxb_vec_push(X->m->arena, &X->nk->shared, sh);
  return X->nk->shared.len - 1;
}

static oxi_instr *load(lt *X, int arr, oxi_instr *idx) {
  oxi_instr *l = emit(X, OXI_LOAD, (oxi_type)((oxi_shared *)X->nk->shared.items[arr])->dtype);
  l->mem = (oxi_mem){OXI_MEM_SHARED, arr};
  l->ops[0] = idx;
  l->nops = 1;
  return l;
}

static void store(lt *X, int arr, oxi_instr *idx, oxi_instr *v) {
  oxi_instr *s = emit(X, OXI_STORE, OXI_VOID);
  s->mem = (oxi_mem){OXI_MEM_SHARED, arr};
  s->ops[0] = idx;
  s->ops[1] = v;
  s->nops = 2;
}

/* The thread of the loop (u64). */
static oxi_instr *thread(lt *X) { return get(X, X->tslot); }

/* Element t of val (which 0) or res (1) seen as an array of t's type: an 8-byte slot a thread. */
static oxi_instr *slot_index(lt *X, int which, oxi_type t, int *arr) {
  size_t size = ox_dtype_size((ox_dtype)t);
  if (!X->view[which][t])
    X->view[which][t] = 1 + shared_new(X, (ox_dtype)t, MAXT * (int64_t)(8 / size),
                                       X->area + 8 * MAXT + which * 8 * MAXT);
  *arr = X->view[which][t] - 1;
  return bin(X, OXI_MUL, thread(X), cnst(X, OX_U64, 8 / size));
}

/* ------------------------------------------------------------ analysis */

static void cut(lt *X) {
  const oxi_kernel *k = X->k;
  X->first = oxb_malloc(sizeof(int) * (size_t)k->blocks.len);
  int cap = k->blocks.len;
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int i = 1; i < b->instrs.len; i++)
      cap += is_sync(b->instrs.items[i]);
  }
  X->p = oxb_malloc(sizeof(piece) * (size_t)cap);
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    X->first[bi] = X->np;
    int i0 = 0;
    for (int i = 1; i <= b->instrs.len; i++)
      if (i == b->instrs.len || is_sync(b->instrs.items[i])) {
        X->p[X->np++] = (piece){bi, i0, i, is_sync(b->instrs.items[i0])};
        i0 = i;
      }
  }
}

/* The pieces control goes to from piece s (at most two). */
static int succs(const lt *X, int s, int out[2]) {
  const piece *p = &X->p[s];
  const oxi_block *b = X->k->blocks.items[p->b];
  if (p->i1 < b->instrs.len) { /* cut before a rendezvous: on into it */
    out[0] = s + 1;
    return 1;
  }
  const oxi_instr *t = b->instrs.items[b->instrs.len - 1];
  int n = t->op == OXI_BR ? 1 : t->op == OXI_CONDBR ? 2 : 0;
  for (int i = 0; i < n; i++)
    out[i] = X->first[t->target[i]->id];
  return n;
}

/* Values used in another piece than their own are demoted to new slots. */
static void demote(lt *X) {
  const oxi_kernel *k = X->k;
  size_t nv = (size_t)k->next_id + 1;
  X->def = oxb_malloc(sizeof(int) * nv);
  X->dslot = oxb_calloc(nv, sizeof(int));
  for (int s = 0; s < X->np; s++) {
    const oxi_block *b = k->blocks.items[X->p[s].b];
    for (int i = X->p[s].i0; i < X->p[s].i1; i++) {
      const oxi_instr *in = b->instrs.items[i];
      if (in->id >= 0)
        X->def[in->id] = s;
    }
  }
  for (int s = 0; s < X->np; s++) {
    const oxi_block *b = k->blocks.items[X->p[s].b];
    for (int i = X->p[s].i0; i < X->p[s].i1; i++) {
      const oxi_instr *in = b->instrs.items[i];
      for (int o = 0; o < in->nops; o++) {
        const oxi_instr *v = in->ops[o];
        if (X->def[v->id] != s && !X->dslot[v->id])
          X->dslot[v->id] = 1 + oxi_slot_new(X->m, X->nk, v->type);
      }
    }
  }
}

/* Slot liveness over the pieces; the slots live where a region starts after a
 * rendezvous (not counting the rendezvous's own operands, read before it) get
 * per-thread arrays. */
static void liveness(lt *X) {
  const oxi_kernel *k = X->k;
  int ns = X->nk->slots.len, W = (ns + 63) / 64;
  uint64_t *gen = oxb_calloc((size_t)X->np * (size_t)W, 8), *kill = oxb_calloc((size_t)X->np * (size_t)W, 8);
  uint64_t *in = oxb_calloc((size_t)X->np * (size_t)W, 8), *after = oxb_calloc((size_t)X->np * (size_t)W, 8);
#define BIT(set, s, slot) (set)[(size_t)(s) * (size_t)W + (size_t)(slot) / 64]
#define MASK(slot) (UINT64_C(1) << ((slot) % 64))
  for (int s = 0; s < X->np; s++) {
    const piece *p = &X->p[s];
    const oxi_block *b = k->blocks.items[p->b];
    for (int pass = 0; pass < 2; pass++) { /* pass 1: gen without the rendezvous's operands */
      uint64_t *g = pass ? after : gen;
      memset(&BIT(kill, s, 0), 0, 8 * (size_t)W);
      for (int i = p->i0; i < p->i1; i++) {
        const oxi_instr *x = b->instrs.items[i];
        for (int o = 0; o < x->nops && !(pass && i == p->i0 && p->sync); o++) {
          int d = X->dslot[x->ops[o]->id] - 1;
          if (d >= 0 && X->def[x->ops[o]->id] != s && !(BIT(kill, s, d) & MASK(d)))
            BIT(g, s, d) |= MASK(d);
        }
        if (x->op == OXI_VAR_GET && !(BIT(kill, s, x->index) & MASK(x->index)))
          BIT(g, s, x->index) |= MASK(x->index);
        if (x->op == OXI_VAR_SET)
          BIT(kill, s, x->index) |= MASK(x->index);
        if (x->id >= 0 && X->dslot[x->id])
          BIT(kill, s, X->dslot[x->id] - 1) |= MASK(X->dslot[x->id] - 1);
      }
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (int s = X->np - 1; s >= 0; s--) {
      int sc[2], n = succs(X, s, sc);
      for (int w = 0; w < W; w++) {
        uint64_t out = 0;
        for (int i = 0; i < n; i++)
          out |= BIT(in, sc[i], w * 64);
        uint64_t v = BIT(gen, s, w * 64) | (out & ~BIT(kill, s, w * 64));
        if (v != BIT(in, s, w * 64)) {
          BIT(in, s, w * 64) = v;
          changed = true;
        }
        if (X->p[s].sync)
          BIT(after, s, w * 64) |= out & ~BIT(kill, s, w * 64);
      }
    }
  }
  /* Per-thread variables after the threads' state, a column each, columns of 8-byte values
     first: T x 8 bytes, T x 4, ..., T being the block's threads, known at launch. A column of
     s-byte values starts at a multiple of T x s bytes, so its elements are those of an s-byte
     array from the same base: element col x T + t. */
  X->arr = oxb_calloc((size_t)ns, sizeof(int));
  X->col = oxb_calloc((size_t)ns, sizeof(int64_t));
  int64_t base = X->area + AREA, bytes = 0; /* per thread */
  for (int size = 8; size >= 1; size /= 2)
    for (int slot = 0; slot < ns; slot++) {
      ox_dtype dt = (ox_dtype)oxi_slot_type(X->nk, slot);
      bool live = false;
      for (int s = 0; s < X->np && !live && (int)ox_dtype_size(dt) == size; s++)
        live = X->p[s].sync && (BIT(after, s, slot) & MASK(slot));
      if (!live)
        continue;
      X->col[slot] = bytes / size;
      bytes += size;
      X->arr[slot] = -1; /* its array below, once the per-thread bytes are known */
    }
  bytes = (bytes + 7) & ~(int64_t)7;
  for (int slot = 0; slot < ns; slot++)
    if (X->arr[slot]) {
      ox_dtype dt = (ox_dtype)oxi_slot_type(X->nk, slot);
      X->arr[slot] = 1 + shared_new(X, dt, (bytes / (int64_t)ox_dtype_size(dt) + 1) * MAXT, base);
    }
  X->nk->shared_bytes = base;
  X->nk->thread_bytes = bytes;
#undef BIT
#undef MASK
  free(gen);
  free(kill);
  free(in);
  free(after);
}

/* ------------------------------------------------------------ copying */

/* Thread t's element of per-thread variable `slot`. */
static oxi_instr *column(lt *X, int slot) {
  return bin(X, OXI_ADD, bin(X, OXI_MUL, get(X, X->nslot), cnst(X, OX_U64, (uint64_t)X->col[slot])), thread(X));
}

static oxi_instr *slot_get(lt *X, int slot) {
  return X->arr[slot] ? load(X, X->arr[slot] - 1, column(X, slot)) : get(X, slot);
}

static void slot_set(lt *X, int slot, oxi_instr *v) {
  if (X->arr[slot])
    store(X, X->arr[slot] - 1, column(X, slot), v);
  else
    set(X, slot, v);
}

/* Old value v's copy where piece s uses it. */
static oxi_instr *use(lt *X, const oxi_instr *v, int s) {
  return X->def[v->id] == s ? X->nv[v->id] : slot_get(X, X->dslot[v->id] - 1);
}

/* The copy of piece s in region r (made, and queued to be filled, on first use),
 * or, for a rendezvous piece, region r's exit there: every branch to one ends
 * the region (its own start is made by region(), not here). */
static oxi_block *target(lt *X, int r, int s) {
  bool exit = X->p[s].sync;
  oxi_block **at = &X->blk[r][exit ? X->np + s : s];
  if (!*at) {
    *at = oxi_block_new(X->m, X->nk);
    X->work[X->nwork++] = exit ? -1 - s : s;
  }
  return *at;
}

static oxi_instr *ntid(lt *X, int d) { return get(X, X->sreg[OXI_SREG_NTID_X + d]); }

static oxi_instr *pick(lt *X, oxi_instr *c, oxi_instr *a, oxi_instr *b) {
  oxi_instr *r = emit(X, OXI_SELECT, a->type);
  r->ops[0] = c;
  r->ops[1] = a;
  r->ops[2] = b;
  r->nops = 3;
  return r;
}

/* The next thread's (x, y, z) from this one's: x fastest, as the linear index counts. */
static void next_tid(lt *X) {
  oxi_instr *one = cnst(X, OX_U32, 1), *zero = cnst(X, OX_U32, 0);
  oxi_instr *x = bin(X, OXI_ADD, get(X, X->tid[0]), one);
  oxi_instr *wx = cmp(X, OXI_EQ, x, ntid(X, 0));
  oxi_instr *y = pick(X, wx, bin(X, OXI_ADD, get(X, X->tid[1]), one), get(X, X->tid[1]));
  oxi_instr *wy = cmp(X, OXI_EQ, y, ntid(X, 1));
  oxi_instr *z = pick(X, wy, bin(X, OXI_ADD, get(X, X->tid[2]), one), get(X, X->tid[2]));
  set(X, X->tid[0], pick(X, wx, zero, x));
  set(X, X->tid[1], pick(X, wy, zero, y));
  set(X, X->tid[2], z);
}

/* Thread t leaves the region at a rendezvous or its return: state[t] = st. */
static void leave(lt *X, int r, uint32_t st) {
  store(X, X->u32arr[A_STATE], thread(X), cnst(X, OX_U32, st));
  br(X, X->next[r]);
}

/* Region r's exit at rendezvous piece s: what the thread gives the others, and its wait. */
static void fill_exit(lt *X, int r, int s) {
  const oxi_instr *in = ((oxi_block *)X->k->blocks.items[X->p[s].b])->instrs.items[X->p[s].i0];
  uint32_t kind = in->op == OXI_BARRIER ? 0 : in->op == OXI_SHFL ? 1 + (uint32_t)in->sub : 5 + (uint32_t)in->sub;
  if (in->op != OXI_BARRIER) {
    oxi_instr *v = use(X, in->ops[0], s);
    int arr;
    oxi_instr *at = slot_index(X, 0, v->type, &arr);
    store(X, arr, at, v);
    if (in->op == OXI_SHFL)
      store(X, X->u32arr[A_ARG], thread(X), use(X, in->ops[1], s));
  }
  leave(X, r, WAITING(kind, X->region_of[s] - 1));
}

/* Piece s's copy in region r. */
static void fill(lt *X, int r, int s) {
  const piece *p = &X->p[s];
  const oxi_block *b = X->k->blocks.items[p->b];
  for (int i = p->i0; i < p->i1; i++) {
    const oxi_instr *in = b->instrs.items[i];
    oxi_instr *n = NULL;
    if (i == p->i0 && p->sync) { /* the region's start: the rendezvous's result */
      if (in->op != OXI_BARRIER) {
        int arr;
        oxi_instr *at = slot_index(X, 1, in->type, &arr);
        n = load(X, arr, at);
      }
    } else if (in->op == OXI_VAR_GET) {
      n = slot_get(X, in->index);
    } else if (in->op == OXI_VAR_SET) {
      slot_set(X, in->index, use(X, in->ops[0], s));
    } else if (in->op == OXI_SREG && in->sub > OXI_SREG_TID_Z && in->sub < OXI_SREG_LANEID) {
      n = get(X, X->sreg[in->sub]);
    } else if (in->op == OXI_SREG && (in->sub <= OXI_SREG_TID_Z || in->sub == OXI_SREG_LANEID)) {
      n = in->sub == OXI_SREG_LANEID ? cast(X, bin(X, OXI_AND, thread(X), cnst(X, OX_U64, 31)), OX_U32)
                                     : get(X, X->tid[in->sub - OXI_SREG_TID_X]);
    } else if (in->op == OXI_RET) {
      leave(X, r, DONE);
    } else {
      oxi_instr *ops[6];
      for (int o = 0; o < in->nops; o++)
        ops[o] = use(X, in->ops[o], s);
      oxi_block *to[2] = {NULL, NULL};
      for (int t = 0; t < 2; t++)
        if (in->target[t])
          to[t] = target(X, r, X->first[in->target[t]->id]);
      n = emit(X, in->op, in->type);
      n->sub = in->sub;
      n->nops = in->nops;
      memcpy(n->ops, ops, sizeof(oxi_instr *) * (size_t)in->nops);
      n->mem = in->mem;
      n->index = in->index;
      n->imm = in->imm;
      n->fimm = in->fimm;
      n->check = in->check;
      n->nuw = in->nuw;
      n->line = in->line;
      n->col = in->col;
      n->target[0] = to[0];
      n->target[1] = to[1];
    }
    if (in->id >= 0) {
      X->nv[in->id] = n;
      if (X->dslot[in->id])
        slot_set(X, X->dslot[in->id] - 1, n);
    }
  }
  if (p->i1 < b->instrs.len) /* cut before a rendezvous: to this region's exit there */
    br(X, target(X, r, s + 1));
}

/* Region r: a loop over the threads ready at it, from `head` on to `after`. */
static void region(lt *X, int r, int entry, oxi_block *head, oxi_block *after) {
  oxi_block *init = oxi_block_new(X->m, X->nk), *cond = oxi_block_new(X->m, X->nk);
  oxi_block *check = oxi_block_new(X->m, X->nk), *next = oxi_block_new(X->m, X->nk);
  X->next[r] = next;
  X->cur = head; /* is r's bit of the ready mask set? (regions from 63 on share bit 63) */
  oxi_instr *bit = bin(X, OXI_AND, bin(X, OXI_SHR, get(X, X->mslot), cnst(X, OX_U64, r < 63 ? (uint64_t)r : 63)),
                       cnst(X, OX_U64, 1));
  condbr(X, cmp(X, OXI_NE, bit, cnst(X, OX_U64, 0)), init, after);
  X->cur = init;
  set(X, X->tslot, cnst(X, OX_U64, 0));
  for (int d = 0; d < 3; d++)
    set(X, X->tid[d], cnst(X, OX_U32, 0));
  br(X, cond);
  X->cur = cond;
  condbr(X, cmp(X, OXI_LT, thread(X), get(X, X->nslot)), check, after);
  X->cur = next;
  set(X, X->tslot, bin(X, OXI_ADD, thread(X), cnst(X, OX_U64, 1)));
  next_tid(X);
  br(X, cond);
  X->nwork = 0;
  X->cur = check;
  oxi_instr *st = load(X, X->u32arr[A_STATE], thread(X));
  oxi_block *first;
  if (r == 0 && X->p[entry].sync) { /* a kernel that begins with a rendezvous: region 0 is its exit */
    first = target(X, r, entry);
  } else {
    first = X->blk[r][entry] = oxi_block_new(X->m, X->nk);
    X->work[X->nwork++] = entry;
  }
  condbr(X, cmp(X, OXI_EQ, st, cnst(X, OX_U32, (uint64_t)r)), first, next);
  for (int w = 0; w < X->nwork; w++) {
    int s = X->work[w];
    X->cur = s >= 0 ? X->blk[r][s] : X->blk[r][X->np + (-1 - s)];
    if (s >= 0)
      fill(X, r, s);
    else
      fill_exit(X, r, -1 - s);
  }
}

oxi_kernel *oxi_loop_threads(oxi_module *m, const oxi_kernel *k) {
  assert(oxi_can_loop_threads(k));
  oxi_kernel *nk = oxb_alloc(m->arena, sizeof *nk);
  *nk = *k;
  nk->blocks = (oxb_vec){0};
  nk->shared = (oxb_vec){0};
  nk->slots = (oxb_vec){0};
  nk->next_id = 0;
  nk->ninstrs = 0;
  nk->uses_sync = false;
  nk->looped = true;
  for (int i = 0; i < k->shared.len; i++)
    oxb_vec_push(m->arena, &nk->shared, k->shared.items[i]);
  for (int i = 0; i < k->slots.len; i++)
    oxb_vec_push(m->arena, &nk->slots, k->slots.items[i]);
  lt X = {.m = m, .k = k, .nk = nk};
  X.area = (k->shared_bytes + 15) & ~(int64_t)15;
  for (int a = 0; a < 2; a++)
    X.u32arr[a] = shared_new(&X, OX_U32, MAXT, X.area + a * 4 * MAXT);
  cut(&X);
  demote(&X);
  X.region_of = oxb_calloc((size_t)X.np, sizeof(int));
  X.region_of[0] = 1;
  X.nregions = 1;
  for (int s = 0; s < X.np; s++)
    if (X.p[s].sync)
      X.region_of[s] = ++X.nregions; /* (piece 0 may be both: its region is then the one after) */
  liveness(&X);
  X.tslot = oxi_slot_new(m, nk, OX_U64);
  X.nslot = oxi_slot_new(m, nk, OX_U64);
  X.mslot = oxi_slot_new(m, nk, OX_U64);
  for (int d = 0; d < 3; d++)
    X.tid[d] = oxi_slot_new(m, nk, OX_U32);
  for (int r = OXI_SREG_TID_Z + 1; r < OXI_SREG_LANEID; r++)
    X.sreg[r] = oxi_slot_new(m, nk, OX_U32);
  X.nv = oxb_calloc((size_t)k->next_id + 1, sizeof *X.nv);
  X.blk = oxb_malloc(sizeof *X.blk * (size_t)X.nregions);
  X.next = oxb_calloc((size_t)X.nregions, sizeof *X.next);
  X.work = oxb_malloc(sizeof(int) * (size_t)X.np * 2 + sizeof(int));
  for (int r = 0; r < X.nregions; r++)
    X.blk[r] = oxb_calloc((size_t)X.np * 2, sizeof **X.blk);

  /* the entry: every thread ready at region 0 */
  X.cur = oxi_block_new(m, nk);
  oxi_instr *nt = NULL;
  for (int d = 0; d < 3; d++) {
    oxi_instr *n = emit(&X, OXI_SREG, OX_U32);
    n->sub = OXI_SREG_NTID_X + d;
    nt = nt ? bin(&X, OXI_MUL, nt, n) : n;
  }
  set(&X, X.nslot, cast(&X, nt, OX_U64));
  for (int r = OXI_SREG_TID_Z + 1; r < OXI_SREG_LANEID; r++) {
    oxi_instr *v = emit(&X, OXI_SREG, OX_U32);
    v->sub = r;
    set(&X, X.sreg[r], v);
  }
  set(&X, X.tslot, cnst(&X, OX_U64, 0));
  set(&X, X.mslot, cnst(&X, OX_U64, 1)); /* region 0 is ready */
  oxi_block *icond = oxi_block_new(m, nk), *ibody = oxi_block_new(m, nk);
  oxi_block **head = oxb_malloc(sizeof *head * (size_t)(X.nregions + 1));
  for (int r = 0; r <= X.nregions; r++)
    head[r] = oxi_block_new(m, nk);
  br(&X, icond);
  X.cur = icond;
  condbr(&X, cmp(&X, OXI_LT, thread(&X), get(&X, X.nslot)), ibody, head[0]);
  X.cur = ibody;
  store(&X, X.u32arr[A_STATE], thread(&X), cnst(&X, OX_U32, 0));
  set(&X, X.tslot, bin(&X, OXI_ADD, thread(&X), cnst(&X, OX_U64, 1)));
  br(&X, icond);

  /* the regions' loops, one after another, then the rendezvous, and round again */
  region(&X, 0, 0, head[0], head[1]);
  for (int s = 0; s < X.np; s++)
    if (X.p[s].sync) {
      int r = X.region_of[s] - 1;
      region(&X, r, s, head[r], head[r + 1]);
    }
  X.cur = head[X.nregions];
  oxi_instr *n32 = cast(&X, get(&X, X.nslot), OX_U32);
  oxi_instr *rv = emit(&X, OXI_RENDEZVOUS, OX_U64);
  rv->ops[0] = n32;
  rv->nops = 1;
  rv->imm = (uint64_t)X.area;
  set(&X, X.mslot, rv);
  oxi_block *done = oxi_block_new(m, nk);
  condbr(&X, cmp(&X, OXI_NE, rv, cnst(&X, OX_U64, 0)), head[0], done);
  X.cur = done;
  emit(&X, OXI_RET, OXI_VOID);

  free(X.first);
  free(X.p);
  free(X.def);
  free(X.dslot);
  free(X.arr);
  free(X.col);
  free(X.region_of);
  free(X.nv);
  for (int r = 0; r < X.nregions; r++)
    free(X.blk[r]);
  free(X.blk);
  free(X.next);
  free(X.work);
  free(head);
#ifndef NDEBUG
  oxi_module check = {.arena = m->arena, .filename = m->filename};
  oxb_vec_push(m->arena, &check.kernels, nk);
  oxb_str err = {0};
  if (!oxi_verify(&check, &err)) {
    fprintf(stderr, "oxide: threads.c made a kernel that does not verify:\n%s\n", err.buf);
    abort();
  }
  oxb_str_free(&err);
#endif
  return nk;
}
