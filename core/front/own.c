/* own.c - the ownership rule across witnesses (docs/language.md section 6):
 * which thread each kind of witness gives an element to, so that no two threads
 * of a launch can hold equal witnesses for one output.
 *
 *  - index_1d() gives element e to the thread whose linear index is e;
 *  - index_block() to the first thread of block e;
 *  - index_2d(w) to the thread at row e / w, column e % w: one thread per
 *    element only while every thread uses the same w, so w must be uniform:
 *    the same value in every thread and at every point of the kernel;
 *  - grid_stride(n) to the thread (e / 4) mod T (T the grid's threads), whatever
 *    n is (stmt.c), so its limit may be anything;
 *  - index_chunk(n) (and its .at(j), j < n) to the thread whose linear index is
 *    e / n: a row, or a contiguous run, per thread; n must be uniform like
 *    index_2d's width.
 * The kinds disagree with each other (element b: thread b under index_1d, thread
 * 0 of block b under index_block), so each DisjointSlice is written through one
 * kind, and through index_2d with one width. Calls nothing of the files that use it. */
#include "front/sema.h"

#include <string.h>

static const char *kind_name(wkind k) {
  switch (k) {
  case W_INDEX_1D: return "thread::index_1d()";
  case W_INDEX_2D: return "thread::index_2d()";
  case W_BLOCK: return "thread::index_block()";
  case W_STRIDE: return "thread::grid_stride()";
  case W_CHUNK: return "thread::index_chunk()";
  default: return "no";
  }
}

/* Bounds the walks below: an expression tree is small, but SSA values shared
 * between operands (let a = n * n; let b = a * a; ...) would make a walk of the
 * tree exponential. */
enum { WALK_BUDGET = 4096 };

/* Why v may differ between threads or between points of the kernel, or NULL if
 * it is uniform: built from constants, scalar parameters, lengths and the launch
 * shape alone. Variables (slots) are refused even when written once: a loop or a
 * branch could give them a value per iteration or per thread. */
static const char *why_varies(const oxi_instr *v, int *budget) {
  if (--*budget < 0)
    return "an expression too large to check (bind the width once with 'let', from "
           "parameters, in fewer steps)";
  switch (v->op) {
  case OXI_CONST:
  case OXI_PARAM:
  case OXI_DIM:
  case OXI_STRIDE:
    return NULL;
  case OXI_LEN:
    return NULL; /* of a parameter or a shared array: fixed for the launch */
  case OXI_SREG:
    switch (v->sub) {
    case OXI_SREG_NTID_X: case OXI_SREG_NTID_Y: case OXI_SREG_NTID_Z:
    case OXI_SREG_NCTAID_X: case OXI_SREG_NCTAID_Y: case OXI_SREG_NCTAID_Z: case OXI_SREG_ON_CPU:
      return NULL;
    case OXI_SREG_LANEID: return "the thread's lane";
    default: return "the thread's or block's index";
    }
  case OXI_BIN:
  case OXI_CMP:
  case OXI_NEG:
  case OXI_NOT:
  case OXI_CAST:
  case OXI_SELECT:
  case OXI_MATH:
    for (int i = 0; i < v->nops; i++) {
      const char *why = why_varies(v->ops[i], budget);
      if (why)
        return why;
    }
    return NULL;
  case OXI_VAR_GET: return "a variable (a 'let mut', a loop variable, or the value of an if, a match or a function call)";
  case OXI_LOAD: return "a value read from memory";
  case OXI_ATOMIC: return "an atomic operation";
  case OXI_SHFL:
  case OXI_VOTE: return "a warp operation";
  default: return "a value that is not the same in every thread";
  }
}

bool oxs_check_uniform(sema *S, const oxi_instr *v, oxb_loc at, const char *what) {
  int budget = WALK_BUDGET;
  const char *why = why_varies(v, &budget);
  if (!why)
    return true;
  ERR(S, at, "%s must be the same in every thread and everywhere in the kernel, or two threads "
             "could write one element; it depends on %s: build it from constants, scalar "
             "parameters, .len() and block_dim/grid_dim",
      what, why);
  return false;
}

/* Whether two uniform values are computed the same way (so they are equal in a launch). */
static bool same_value(const oxi_instr *a, const oxi_instr *b, int *budget) {
  if (a == b)
    return true;
  if (--*budget < 0 || a->op != b->op || a->sub != b->sub || a->type != b->type ||
      a->nops != b->nops || a->index != b->index || a->imm != b->imm ||
      memcmp(&a->fimm, &b->fimm, sizeof a->fimm) || a->mem.kind != b->mem.kind ||
      a->mem.index != b->mem.index)
    return false;
  for (int i = 0; i < a->nops; i++)
    if (!same_value(a->ops[i], b->ops[i], budget))
      return false;
  return true;
}

bool oxs_claim(sema *S, binding *out, const binding *w, oxb_loc at) {
  if (S->kfn->is_unsafe || w->wk == W_NONE) /* unsafe fn: the programmer's promise */
    return true;
  if (out->wk == W_NONE) {
    out->wk = w->wk;
    out->width = w->width;
    out->wloc = at;
    return true;
  }
  int budget = WALK_BUDGET;
  if (out->wk == w->wk && ((w->wk != W_INDEX_2D && w->wk != W_CHUNK) || same_value(out->width, w->width, &budget)))
    return true;
  bool reported;
  if (out->wk != w->wk)
    reported = ERR(S, at,
                   "'%s' is written through a %s witness here and through a %s witness on line %d: "
                   "the two kinds give one element to different threads, so two threads could "
                   "write it; write each DisjointSlice through one kind of witness",
                   out->name, kind_name(w->wk), kind_name(out->wk), out->wloc.line);
  else if (w->wk == W_INDEX_2D)
    reported = ERR(S, at,
                   "'%s' is written through thread::index_2d() witnesses of two row widths, here "
                   "and on line %d: with different widths two threads could write one element; "
                   "compute the width once ('let w = ...;') and use it for every index_2d of '%s'",
                   out->name, out->wloc.line, out->name);
  else
    reported = ERR(S, at,
                   "'%s' is written through thread::index_chunk() witnesses of two lengths, here "
                   "and on line %d: with different lengths two threads could write one element; "
                   "compute the length once ('let n = ...;') and use it for every index_chunk of '%s'",
                   out->name, out->wloc.line, out->name);
  if (reported)
    oxb_note_at(S->d, out->wloc, "'%s' is first written here", out->name);
  return false;
}

/* u64::MAX where `ok` is false: no get_mut accepts it (no element has that index). */
static oxi_instr *or_none(sema *S, oxi_instr *ok, oxi_instr *v) {
  oxi_instr *none = oxs_const_int(S, OX_U64, UINT64_MAX); /* (made before its use) */
  oxi_instr *sel = oxs_append(S, OXI_SELECT, OX_U64);
  sel->ops[0] = ok;
  sel->ops[1] = v;
  sel->ops[2] = none;
  sel->nops = 3;
  return sel;
}

binding *oxs_chunk_witness(sema *S, oxi_instr *n, oxb_loc loc) {
  binding *w = oxs_bind(S, B_WITNESS, NULL, loc);
  w->wk = W_CHUNK;
  w->width = n;
  /* the chunk from t * n: t's own only while n > 0 and (t + 1) * n does not wrap */
  oxi_instr *t = oxs_linear_index(S);
  oxi_instr *zero = oxs_op2(S, OXI_CMP, OXI_EQ, OX_BOOL, n, oxs_const_int(S, OX_U64, 0));
  oxi_instr *lim = oxs_op2(S, OXI_BIN, OXI_DIV, OX_U64, oxs_const_int(S, OX_U64, UINT64_MAX),
                           oxs_op2(S, OXI_BIN, OXI_OR, OX_U64, n, oxs_cast_to(S, zero, OX_U64))); /* (no / 0) */
  oxi_instr *ok = oxs_op2(S, OXI_BIN, OXI_AND, OX_BOOL, oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, t, lim),
                          oxs_op2(S, OXI_CMP, OXI_EQ, OX_BOOL, zero, oxs_const_int(S, OX_BOOL, 0)));
  w->v = or_none(S, ok, oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, t, n));
  return w;
}

binding *oxs_chunk_at(sema *S, const binding *c, oxi_instr *j, oxb_loc loc) {
  binding *w = oxs_bind(S, B_WITNESS, NULL, loc);
  w->wk = W_CHUNK;
  w->width = c->width;
  oxi_instr *ok = oxs_op2(S, OXI_BIN, OXI_AND, OX_BOOL, oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, j, c->width),
                          oxs_op2(S, OXI_CMP, OXI_NE, OX_BOOL, c->v, oxs_const_int(S, OX_U64, UINT64_MAX)));
  w->v = or_none(S, ok, oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, c->v, j));
  return w;
}
