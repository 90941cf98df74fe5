/* build.c - what semantic analysis works with (sema.c, tile.c, check.c):
 * errors reported once, the size limits, IR emitted into the current block
 * (blocks, branches, constants, operations, casts, slots), name bindings in
 * scopes, the facts that prove bounds checks away, shapes as text. Calls
 * nothing of the files that use it. */
#include "front/sema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Reports an error once: code checked several times (a device function inlined
 * at each call, a grid-stride body lowered for the unrolled and the plain
 * loop) would otherwise repeat its errors. Returns whether it reported. */
bool oxs_error(sema *S, oxb_loc loc, const char *fmt, ...) {
  if (oxb_too_many_errors(S->d)) /* dropped anyway; and `seen` stays short */
    return false;
  oxb_str msg = {0};
  va_list ap;
  va_start(ap, fmt);
  oxb_str_vaddf(&msg, fmt, ap);
  va_end(ap);
  uint64_t h = 1469598103934665603u ^ (uint64_t)(uint32_t)loc.offset; /* FNV-1a */
  for (size_t i = 0; i < msg.len; i++)
    h = (h ^ (unsigned char)msg.buf[i]) * 1099511628211u;
  bool dup = false;
  for (int i = 0; i < S->nseen && !dup; i++)
    dup = S->seen[i] == h;
  if (!dup) {
    if (S->nseen == S->capseen) {
      S->capseen = S->capseen ? S->capseen * 2 : 32;
      uint64_t *ns = oxb_alloc(S->a, sizeof(uint64_t) * (size_t)S->capseen);
      if (S->nseen)
        memcpy(ns, S->seen, sizeof(uint64_t) * (size_t)S->nseen);
      S->seen = ns;
    }
    S->seen[S->nseen++] = h;
    oxb_error_at(S->d, loc, "%s", msg.buf ? msg.buf : "");
  }
  oxb_str_free(&msg);
  return !dup;
}

/* The value of an instruction: a scalar, or in tile kernels a tile when it
 * has a tile shape (elementwise ops on tiles are the scalar ops with a shape,
 * so the same code makes both). */
val oxs_value(oxi_instr *v) {
  val r = {v->tshape ? V_TILE : V_SCALAR, v, NULL, NULL};
  return r;
}

/* ------------------------------------------------------------ IR helpers */

/* ---------------------------------------------------------- size limits */

/* "kernel 'k'", or for a device function checked on its own "function 'f'". */
const char *oxs_unit_name(sema *S) {
  return S->kfn->is_kernel || S->kfn->is_tile ? "kernel" : "function";
}

/* Reports that the kernel being lowered crossed a size limit (limits.h), at
 * `loc`, with a note at each call its code is inlined through; lowering of
 * the kernel stops (expr() gives errors from here on, silently). */
void oxs_size_error(sema *S, oxb_loc loc, const char *fmt, ...) {
  if (S->too_big)
    return;
  S->too_big = true;
  oxb_str msg = {0};
  va_list ap;
  va_start(ap, fmt);
  oxb_str_vaddf(&msg, fmt, ap);
  va_end(ap);
  if (oxs_error(S, loc, "%s", msg.buf))
    for (int i = S->nframes - 1; i >= 0; i--)
      if (S->frames[i].fn != S->kfn) /* (a function checked on its own is frame 0) */
        oxb_note_at(S->d, S->frames[i].call, "in '%s', inlined at this call", S->frames[i].fn->name);
  oxb_str_free(&msg);
}


void oxs_begin(sema *S, const oxf_fn *fn, oxi_kernel *k) {
  S->k = k;
  S->kfn = fn;
  S->stride_known = false;
  S->at = fn->loc;
  oxs_unbind_to(S, 0);
  S->nfacts = S->nloops = S->nframes = S->nrel = 0;
  S->ncalls = 0;
  S->local_bytes = 0;
  S->unsafe_depth = 0;
  S->too_big = S->source_full; /* past the source's limit, nothing more is lowered */
}

/* Checks the kernel's size after an instruction or a loop was made for the
 * construct at `loc`. */
static void check_size(sema *S, oxb_loc loc) {
  const oxi_kernel *k = S->k;
  if (S->emitted > OXF_MAX_SOURCE_INSTRS && !S->source_full) {
    oxs_size_error(S, loc, "the kernels of this source are too large together: more than %d IR "
                       "instructions, the compiler's limit", OXF_MAX_SOURCE_INSTRS);
    S->source_full = true;
  } else if (k->ninstrs > OXF_MAX_KERNEL_INSTRS) {
    oxs_size_error(S, loc, "%s '%s' is too large: more than %d IR instructions, the compiler's limit "
                       "(device functions are inlined at each call, and grid_stride copies its "
                       "loop body)", oxs_unit_name(S), S->kfn->name, OXF_MAX_KERNEL_INSTRS);
  } else if (k->nloops > OXF_MAX_KERNEL_LOOPS) {
    oxs_size_error(S, loc, "%s '%s' has more than %d loops, the compiler's limit (counting the loops "
                       "of inlined functions, and three to five for each grid_stride loop)",
               oxs_unit_name(S), S->kfn->name, OXF_MAX_KERNEL_LOOPS);
  } else if ((int64_t)k->nloops * k->ninstrs > OXF_MAX_LOOP_WORK) {
    oxs_size_error(S, loc, "%s '%s' has too many loops for its size: %d loops in %d IR instructions, "
                       "and the compiler's limit on loops times instructions is %d (counting "
                       "inlined functions, and three to five loops for each grid_stride loop)",
               oxs_unit_name(S), S->kfn->name, k->nloops, k->ninstrs, OXF_MAX_LOOP_WORK);
  }
}

oxi_instr *oxs_append(sema *S, oxi_op op, oxi_type t) {
  oxi_instr *in = oxi_emit(S->m, S->k, S->cur, op, t);
  in->line = S->at.line;
  in->col = S->at.col;
  S->emitted++;
  check_size(S, S->at);
  return in;
}

/* Counts a loop just made for the construct at `loc`. */
void oxs_count_loop(sema *S, oxb_loc loc) {
  S->k->nloops++;
  check_size(S, loc);
}

oxi_block *oxs_new_block(sema *S) { return oxi_block_new(S->m, S->k); }

/* After a terminator, code that follows is unreachable; it still goes into a
 * block of its own so that the IR stays well formed. */
void oxs_set_block(sema *S, oxi_block *b) { S->cur = b; }

bool oxs_terminated(sema *S) { return oxi_terminator(S->cur) != NULL; }

void oxs_br(sema *S, oxi_block *to) {
  if (oxs_terminated(S))
    return;
  oxi_instr *in = oxs_append(S, OXI_BR, OXI_VOID);
  in->target[0] = to;
}

void oxs_condbr(sema *S, oxi_instr *c, oxi_block *t, oxi_block *f) {
  if (oxs_terminated(S))
    return;
  oxi_instr *in = oxs_append(S, OXI_CONDBR, OXI_VOID);
  in->ops[0] = c;
  in->nops = 1;
  in->target[0] = t;
  in->target[1] = f;
}

void oxs_ensure_open(sema *S) {
  if (oxs_terminated(S))
    oxs_set_block(S, oxs_new_block(S));
}

oxi_instr *oxs_const_int(sema *S, oxi_type t, uint64_t v) {
  oxs_ensure_open(S);
  oxi_instr *in = oxs_append(S, OXI_CONST, t);
  in->imm = v;
  return in;
}

oxi_instr *oxs_const_float(sema *S, oxi_type t, double v) {
  oxs_ensure_open(S);
  oxi_instr *in = oxs_append(S, OXI_CONST, t);
  in->fimm = v;
  return in;
}

static bool elementwise(oxi_op op) {
  return op == OXI_BIN || op == OXI_CMP || op == OXI_NEG || op == OXI_NOT || op == OXI_CAST ||
         op == OXI_SELECT || op == OXI_MATH;
}

/* Elementwise ops take the tile shape of their operands (which oxs_tile_unify
 * made one shape); scalars have none. */
oxi_instr *oxs_op1(sema *S, oxi_op op, int sub, oxi_type t, oxi_instr *a) {
  oxs_ensure_open(S);
  oxi_instr *in = oxs_append(S, op, t);
  in->sub = sub;
  in->ops[0] = a;
  in->nops = 1;
  if (elementwise(op))
    in->tshape = a->tshape;
  return in;
}

oxi_instr *oxs_op2(sema *S, oxi_op op, int sub, oxi_type t, oxi_instr *a, oxi_instr *b) {
  oxi_instr *in = oxs_op1(S, op, sub, t, a);
  in->ops[1] = b;
  in->nops = 2;
  if (elementwise(op) && !in->tshape)
    in->tshape = b->tshape;
  return in;
}

oxi_instr *oxs_cast_to(sema *S, oxi_instr *v, oxi_type t) {
  if (v->type == t)
    return v;
  return oxs_op1(S, OXI_CAST, 0, t, v);
}

oxi_instr *oxs_sreg(sema *S, int which) {
  oxs_ensure_open(S);
  oxi_instr *in = oxs_append(S, OXI_SREG, OX_U32);
  in->sub = which;
  return in;
}

oxi_instr *oxs_sreg64(sema *S, int which) { return oxs_cast_to(S, oxs_sreg(S, which), OX_U64); }

oxi_instr *oxs_var_get(sema *S, int slot) {
  oxs_ensure_open(S);
  oxi_instr *in = oxs_append(S, OXI_VAR_GET, oxi_slot_type(S->k, slot));
  in->index = slot;
  return in;
}

void oxs_var_set(sema *S, int slot, oxi_instr *v) {
  oxs_ensure_open(S);
  oxi_instr *in = oxs_append(S, OXI_VAR_SET, OXI_VOID);
  in->index = slot;
  in->ops[0] = v;
  in->nops = 1;
}

/* Element idx[0..rank) of tensor parameter x as a scalar: 0 of x's dtype where
 * an index is past its dim (a tile load's padding), so the read is never out of
 * bounds. The load sits under a branch: a clamped index would still read memory. */
oxi_instr *oxs_tensor_element(sema *S, const binding *x, oxi_instr *const *idx, int rank) {
  oxi_instr *inb = NULL, *at = NULL;
  for (int d = 0; d < rank; d++) {
    oxi_instr *dim = oxs_emit(S, OXI_DIM, OX_U64), *stride = oxs_emit(S, OXI_STRIDE, OX_U64);
    dim->mem = stride->mem = x->mem;
    dim->index = stride->index = d;
    oxi_instr *in = oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, idx[d], dim);
    inb = inb ? oxs_op2(S, OXI_BIN, OXI_AND, OX_BOOL, inb, in) : in;
    oxi_instr *term = oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, idx[d], stride);
    at = at ? oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, at, term) : term;
  }
  int slot = oxi_slot_new(S->m, S->k, x->type);
  oxi_instr *zero = oxi_is_float(x->type) ? oxs_const_float(S, x->type, 0) : oxs_const_int(S, x->type, 0);
  oxs_var_set(S, slot, zero);
  oxi_block *read = oxs_new_block(S), *done = oxs_new_block(S);
  oxs_condbr(S, inb, read, done);
  oxs_set_block(S, read);
  oxi_instr *ld = oxs_emit(S, OXI_LOAD, x->type);
  ld->mem = x->mem;
  ld->ops[0] = at;
  ld->nops = 1;
  oxs_var_set(S, slot, ld);
  oxs_br(S, done);
  oxs_set_block(S, done);
  return oxs_var_get(S, slot);
}

/* Element idx[0..rank) of tile t as a scalar (0 where an index is past its dim):
 * a T_EXTRACT at the element's row-major position, or past the end. */
oxi_instr *oxs_tile_element(sema *S, oxi_instr *t, oxi_instr *const *idx) {
  const oxi_tshape *s = t->tshape;
  int64_t after = 1;
  oxi_instr *pos = NULL, *inb = NULL;
  for (int d = s->rank - 1; d >= 0; d--) {
    oxi_instr *in = oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, idx[d], oxs_const_int(S, OX_U64, (uint64_t)s->dims[d]));
    inb = inb ? oxs_op2(S, OXI_BIN, OXI_AND, OX_BOOL, inb, in) : in;
    oxi_instr *term = oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, idx[d], oxs_const_int(S, OX_U64, (uint64_t)after));
    pos = pos ? oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, pos, term) : term;
    after *= s->dims[d];
  }
  oxi_instr *past = oxs_const_int(S, OX_U64, (uint64_t)after);
  oxi_instr *sel = oxs_emit(S, OXI_SELECT, OX_U64);
  sel->ops[0] = inb;
  sel->ops[1] = pos;
  sel->ops[2] = past;
  sel->nops = 3;
  oxi_instr *x = oxs_emit(S, OXI_T_EXTRACT, t->type);
  x->ops[0] = t;
  x->ops[1] = sel;
  x->nops = 2;
  return x;
}

/* -------------------------------------------------------------- bindings */

/* Bindings form a stack (sema.binds); a scope ends by popping back to where it
 * began (unbind_to). So that a lookup need not scan the stack (a source of
 * many names would take quadratic time), each name has a record holding the
 * index of its latest binding, and each binding the index of the one of the
 * same name it hides. */
struct name_rec {
  const char *name;
  int top; /* index of the latest binding of the name, -1 if none */
};

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603u; /* FNV-1a */
  for (; *s; s++)
    h = (h ^ (unsigned char)*s) * 1099511628211u;
  return h;
}

/* The record of `name`; created if `create`, else NULL when there is none. */
static name_rec *name_find(sema *S, const char *name, bool create) {
  if (create && (S->nnames + 1) * 2 > S->capnames) { /* grow to keep probes short */
    int cap = S->capnames ? S->capnames * 2 : 64;
    name_rec **t = oxb_alloc(S->a, sizeof(name_rec *) * (size_t)cap);
    for (int i = 0; i < S->capnames; i++) {
      name_rec *r = S->names[i];
      if (!r)
        continue;
      size_t j = (size_t)name_hash(r->name) & (size_t)(cap - 1);
      while (t[j])
        j = (j + 1) & (size_t)(cap - 1);
      t[j] = r;
    }
    S->names = t;
    S->capnames = cap;
  }
  if (!S->capnames)
    return NULL;
  size_t mask = (size_t)(S->capnames - 1);
  for (size_t j = (size_t)name_hash(name) & mask;; j = (j + 1) & mask) {
    name_rec *r = S->names[j];
    if (r && !strcmp(r->name, name))
      return r;
    if (!r) {
      if (!create)
        return NULL;
      r = oxb_alloc(S->a, sizeof *r);
      r->name = name;
      r->top = -1;
      S->names[j] = r;
      S->nnames++;
      return r;
    }
  }
}

/* Makes binding b (on the stack, b->name set) findable by its name. */
static void name_link(sema *S, binding *b) {
  name_rec *r = name_find(S, b->name, true);
  b->rec = r;
  int *at = &r->top; /* the chain stays ordered by index: later bindings hide b */
  while (*at > b->idx)
    at = &S->binds[*at]->shadow;
  b->shadow = *at;
  *at = b->idx;
}

/* Global linear thread index: unique per thread of the grid. */
oxi_instr *oxs_linear_index(sema *S) {
  oxi_instr *tx = oxs_sreg64(S, OXI_SREG_TID_X), *ty = oxs_sreg64(S, OXI_SREG_TID_Y),
            *tz = oxs_sreg64(S, OXI_SREG_TID_Z);
  oxi_instr *nx = oxs_sreg64(S, OXI_SREG_NTID_X), *ny = oxs_sreg64(S, OXI_SREG_NTID_Y),
            *nz = oxs_sreg64(S, OXI_SREG_NTID_Z);
  oxi_instr *bx = oxs_sreg64(S, OXI_SREG_CTAID_X), *by = oxs_sreg64(S, OXI_SREG_CTAID_Y),
            *bz = oxs_sreg64(S, OXI_SREG_CTAID_Z);
  oxi_instr *gx = oxs_sreg64(S, OXI_SREG_NCTAID_X), *gy = oxs_sreg64(S, OXI_SREG_NCTAID_Y);
  oxi_instr *tid = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, tx,
                       oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, nx,
                           oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, ty, oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, ny, tz))));
  oxi_instr *bid = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, bx,
                       oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, gx,
                           oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, by, oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, gy, bz))));
  oxi_instr *tpb = oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, nx, oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, ny, nz));
  return oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, bid, tpb), tid);
}

binding *oxs_bind(sema *S, bkind kind, const char *name, oxb_loc loc) {
  if (S->nbinds == S->capbinds) {
    S->capbinds = S->capbinds ? S->capbinds * 2 : 64;
    binding **nb = oxb_alloc(S->a, sizeof(binding *) * (size_t)S->capbinds);
    if (S->nbinds)
      memcpy(nb, S->binds, sizeof(binding *) * (size_t)S->nbinds);
    S->binds = nb;
  }
  binding *b = oxb_alloc(S->a, sizeof *b);
  b->kind = kind;
  b->name = name;
  b->loc = loc;
  b->idx = S->nbinds;
  b->shadow = -1;
  S->binds[S->nbinds++] = b;
  if (name)
    name_link(S, b);
  return b;
}

/* Names binding b, made without a name (a fresh witness, shared array or
 * partition that a 'let' binds). */
void oxs_name_binding(sema *S, binding *b, const char *name) {
  assert(!b->rec);
  b->name = name;
  if (b->idx < S->nbinds && S->binds[b->idx] == b) /* (else its scope has ended: not findable) */
    name_link(S, b);
}

/* Ends the scopes of the bindings from index n on. */
void oxs_unbind_to(sema *S, int n) {
  while (S->nbinds > n) {
    binding *b = S->binds[--S->nbinds];
    if (b->rec) {
      assert(b->rec->top == b->idx); /* the latest of its name: later ones are gone */
      b->rec->top = b->shadow;
    }
  }
}

binding *oxs_lookup(sema *S, const char *name) {
  int base = S->nframes ? S->frames[S->nframes - 1].base : 0;
  name_rec *r = name_find(S, name, false);
  /* below the frame's base: the caller's, not visible in an inlined function */
  return r && r->top >= base ? S->binds[r->top] : NULL;
}

void oxs_push_fact(sema *S, binding *w, oxi_mem mem) {
  if (S->nfacts == S->capfacts) {
    S->capfacts = S->capfacts ? S->capfacts * 2 : 16;
    fact *nf = oxb_alloc(S->a, sizeof(fact) * (size_t)S->capfacts);
    if (S->nfacts)
      memcpy(nf, S->facts, sizeof(fact) * (size_t)S->nfacts);
    S->facts = nf;
  }
  S->facts[S->nfacts].w = w;
  S->facts[S->nfacts].mem = mem;
  S->nfacts++;
}

/* Is w < len(mem) proven here: by a dominating get_mut guard on mem, or on a
 * slice whose length the launch contract bounds by mem's? */
bool oxs_proven(sema *S, binding *w, oxi_mem mem) {
  for (int i = 0; i < S->nfacts; i++) {
    fact *f = &S->facts[i];
    if (f->w != w)
      continue;
    if (f->mem.kind == mem.kind && f->mem.index == mem.index)
      return true;
    if (f->mem.kind == OXI_MEM_PARAM && mem.kind == OXI_MEM_PARAM)
      for (int r = 0; r < S->nrel; r++)
        if (S->rel_ge[r][0] == mem.index && S->rel_ge[r][1] == f->mem.index)
          return true;
  }
  return false;
}

/* ------------------------------------------------------------- type names */

const char *oxs_vdesc(sema *S, val v) {
  switch (v.k) {
  case V_SCALAR: return oxi_type_name(v.v->type);
  case V_TILE: {
    oxb_str s = {0};
    oxb_str_addf(&s, "a tile of %s, shape %s", oxi_type_name(v.v->type),
                 oxs_shape_text(S, v.v->tshape));
    const char *r = oxb_strndup(S->a, s.buf, s.len);
    oxb_str_free(&s);
    return r;
  }
  case V_PART: return "a partition of a tensor";
  case V_TUPLE: return "a tuple";
  case V_WITNESS: return "a thread-index witness";
  case V_MEM:
    switch (v.b->mkind) {
    case OXF_TY_SLICE: return "a read-only slice";
    case OXF_TY_MUTSLICE: return "a mutable slice";
    case OXF_TY_ATOMIC: return "an atomic slice";
    case OXF_TY_DISJOINT: return "a DisjointSlice";
    case OXF_TY_SHARED: return "a shared array";
    case OXF_TY_ARRAY: return "a thread's array";
    case OXF_TY_TENSOR: return "a tensor (&Tensor)";
    case OXF_TY_MUTTENSOR: return "an output tile (&mut Tensor)";
    case OXF_TY_ATOMICTENSOR: return "an atomic tensor (&Tensor<Atomic<T>, ..>)";
    default: return "memory";
    }
  case V_OPTION: return "an Option (from get_mut)";
  case V_MUTREF: return "a mutable reference";
  case V_UNIT: return "()";
  default: return "an invalid value";
  }
}

bool oxs_is_numeric(oxi_type t) { return oxi_is_int(t) || oxi_is_float(t); }
oxi_instr *oxs_emit(sema *S, oxi_op op, oxi_type t) {
  oxs_ensure_open(S);
  return oxs_append(S, op, t);
}

const char *oxs_shape_text(sema *S, const oxi_tshape *s) {
  char buf[128];
  int n = snprintf(buf, sizeof buf, "[");
  for (int d = 0; s && d < s->rank && n < (int)sizeof buf - 24; d++)
    n += snprintf(buf + n, sizeof buf - (size_t)n, "%s%lld", d ? ", " : "", (long long)s->dims[d]);
  snprintf(buf + n, sizeof buf - (size_t)n, "]");
  return oxb_strndup(S->a, buf, strlen(buf));
}
