/* sema.c - semantic analysis: types, ownership rules and bounds-check proofs,
 * lowering each kernel to Oxide IR as it goes (one pass, as Lua's parser emits
 * code while it parses). Device functions are inlined at each call (inline.c).
 *
 * Ownership rules (docs/language.md, "Ownership"):
 *  - a safe kernel writes global memory only through DisjointSlice::get_mut(w),
 *    where w is a thread-index witness (thread::index_1d(), index_2d(),
 *    index_block(), or the variable of a `for w in thread::grid_stride(n)`);
 *  - a witness cannot be copied, stored, computed with, or passed on: it can
 *    only index, be handed to get_mut, or give its value with .get();
 *  - &[T] is never written; &mut [T] exists only in unsafe kernels.
 * Because outputs can be written only at the calling thread's own index, two
 * threads never write the same element, and read-only slices never alias a
 * written one (checked at launch), so the backend may mark them noalias.
 *
 * This file holds expressions (with builtins, methods and device-function
 * calls); statements are stmt.c's, reached through S->stmt; what both build
 * with (IR emission, bindings, facts) is build.c's. #[tile] kernels go
 * through the same code (tiles are values with a tile shape); what is theirs
 * alone is in tile.c, reached through S->tile_call, S->tile_method and
 * S->tile_unify (tile.c calls this file's expressions). check.c drives them, a kernel at a time, and checks
 * kernel signatures and launch contracts. */
#include "front/sema.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const val VERR = {V_ERR, NULL, NULL, NULL};
static const val VUNIT = {V_UNIT, NULL, NULL, NULL};
static const val VNEVER = {V_NEVER, NULL, NULL, NULL};

/* ---------------------------------------------------------- expressions */

static val expr(sema *S, const oxf_node *n, oxi_type hint);
static val block_expr(sema *S, const oxf_node *n, oxi_type hint);

/* Evaluates `n` and requires a scalar (with `tiles`, a scalar or a tile);
 * reports `what` otherwise. */
static oxi_instr *operand(sema *S, const oxf_node *n, oxi_type hint, const char *what, bool tiles) {
  val v = expr(S, n, hint);
  if (v.k == V_SCALAR || (tiles && v.k == V_TILE))
    return v.v;
  if (v.k == V_WITNESS) {
    ERR(S, n->loc, "a thread-index witness cannot be used as %s; use '%s.get()' for its value as "
                   "usize (a plain number, which cannot index a DisjointSlice)",
        what, v.b->name ? v.b->name : "i");
  } else if (v.k != V_ERR && v.k != V_NEVER) {
    ERR(S, n->loc, "expected a number or bool for %s, found %s", what, oxs_vdesc(S, v));
  }
  return NULL;
}

oxi_instr *oxs_scalar_expr(sema *S, const oxf_node *n, oxi_type hint, const char *what) {
  return operand(S, n, hint, what, false);
}

/* An operand of an elementwise operation: a scalar, or a tile. */
static oxi_instr *elem_expr(sema *S, const oxf_node *n, oxi_type hint, const char *what) {
  return operand(S, n, hint, what, true);
}

static bool untyped_literal(const oxf_node *n) {
  if (n->kind == OXF_UNARY && n->op == OXF_OP_NEG)
    return untyped_literal(n->lhs);
  return (n->kind == OXF_INT || n->kind == OXF_FLOAT) && !n->suffix;
}

/* An operand whose type comes from the other operand of a binary operation:
 * an untyped literal (`2 * x`), or in a tile kernel iota, zeros and ones without
 * a type, and full of an untyped literal, whose dtypes are the context's
 * (`iota([BM, BN], 1) + j * BN` is a tile of j's type). */
static bool context_typed(const sema *S, const oxf_node *n) {
  if (untyped_literal(n))
    return true;
  if (!S->is_tile || n->kind != OXF_CALL)
    return false;
  if (!strcmp(n->name, "iota") || ((!strcmp(n->name, "zeros") || !strcmp(n->name, "ones")) && !n->gen.len))
    return true;
  return !strcmp(n->name, "full") && n->args.len == 2 && untyped_literal(n->args.items[1]);
}

/* A literal; `negated` when it is the operand of '-', which lets a signed
 * literal reach the magnitude of the type's minimum (-128i8). */
static val literal(sema *S, const oxf_node *n, oxi_type hint, bool negated) {
  if (n->kind == OXF_BOOL)
    return oxs_value(oxs_const_int(S, OX_BOOL, n->ival));
  if (n->kind == OXF_FLOAT) {
    oxi_type t = n->suffix ? n->suffix - 1 : (oxi_is_float(hint) ? hint : OX_F64);
    return oxs_value(oxs_const_float(S, t, n->fval));
  }
  oxi_type t = n->suffix ? n->suffix - 1 : (oxs_is_numeric(hint) ? hint : OX_I32);
  if (oxi_is_float(t))
    return oxs_value(oxs_const_float(S, t, (double)n->ival));
  int bits = (int)ox_dtype_size((ox_dtype)t) * 8;
  uint64_t max = oxi_is_signed(t) ? ((uint64_t)1 << (bits - 1)) - !negated
                                  : (bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1);
  if (n->ival > max)
    ERR(S, n->loc, "literal %s%llu does not fit in %s", negated ? "-" : "",
        (unsigned long long)n->ival, oxi_type_name(t));
  return oxs_value(oxs_const_int(S, t, n->ival));
}

/* Binary operators. */
static val binary(sema *S, const oxf_node *n, oxi_type hint) {
  int op = n->op;
  if (op == OXF_OP_LAND || op == OXF_OP_LOR) {
    /* short-circuit: the right side may guard an access the left side checks */
    int slot = oxi_slot_new(S->m, S->k, OX_BOOL);
    oxi_instr *l = oxs_scalar_expr(S, n->lhs, OX_BOOL, "a logical operand");
    if (l && l->type != OX_BOOL)
      ERR(S, n->lhs->loc, "'%s' needs bool operands, found %s", oxf_op_name(op), oxi_type_name(l->type));
    if (!l || l->type != OX_BOOL)
      return VERR;
    oxs_var_set(S, slot, l);
    oxi_block *rhs_b = oxs_new_block(S), *done = oxs_new_block(S);
    if (op == OXF_OP_LAND)
      oxs_condbr(S, l, rhs_b, done);
    else
      oxs_condbr(S, l, done, rhs_b);
    oxs_set_block(S, rhs_b);
    oxi_instr *r = oxs_scalar_expr(S, n->rhs, OX_BOOL, "a logical operand");
    if (r && r->type != OX_BOOL) {
      ERR(S, n->rhs->loc, "'%s' needs bool operands, found %s", oxf_op_name(op), oxi_type_name(r->type));
      r = NULL;
    }
    if (r)
      oxs_var_set(S, slot, r);
    oxs_br(S, done);
    oxs_set_block(S, done);
    return r ? oxs_value(oxs_var_get(S, slot)) : VERR;
  }
  bool cmp = op >= OXF_OP_EQ && op <= OXF_OP_GE;
  bool shift = op == OXF_OP_SHL || op == OXF_OP_SHR;
  oxi_type operand_hint = cmp ? OXI_VOID : hint;
  oxi_instr *l, *r;
  if (context_typed(S, n->lhs) && !context_typed(S, n->rhs) && !shift) {
    r = elem_expr(S, n->rhs, operand_hint, "an operand");
    l = elem_expr(S, n->lhs, r ? r->type : operand_hint, "an operand");
  } else {
    l = elem_expr(S, n->lhs, operand_hint, "an operand");
    r = elem_expr(S, n->rhs, shift ? OXI_VOID : (l ? l->type : operand_hint), "an operand");
  }
  if (!l || !r)
    return VERR;
  oxi_type t = l->type;
  if (shift) {
    if (!oxi_is_int(t) || !oxi_is_int(r->type)) {
      ERR(S, n->loc, "'%s' needs integer operands, found %s and %s", oxf_op_name(op),
          oxi_type_name(t), oxi_type_name(r->type));
      return VERR;
    }
    r = oxs_cast_to(S, r, t); /* Rust allows any integer type as the shift amount */
    oxi_instr *ops[2] = {l, r};
    if (!S->tile_unify(S, n->loc, ops, 2))
      return VERR;
    return oxs_value(oxs_op2(S, OXI_BIN, op == OXF_OP_SHL ? OXI_SHL : OXI_SHR, t, ops[0], ops[1]));
  }
  if (l->type != r->type) {
    ERR(S, n->loc, "mismatched types: %s %s %s; convert one side with 'as'", oxi_type_name(l->type),
        oxf_op_name(op), oxi_type_name(r->type));
    return VERR;
  }
  oxi_instr *ops[2] = {l, r};
  if (oxi_is_fp8(t)) {
    ERR(S, n->loc, "'%s' is not defined for %s, a storage type (loads, stores, 'as', dot): "
                   "convert with 'as f32' first", oxf_op_name(op), oxi_type_name(t));
    return VERR;
  }
  if (cmp) {
    if (t == OX_BOOL && op != OXF_OP_EQ && op != OXF_OP_NE) {
      ERR(S, n->loc, "bool values can only be compared with == and !=");
      return VERR;
    }
    if (!S->tile_unify(S, n->loc, ops, 2))
      return VERR;
    return oxs_value(oxs_op2(S, OXI_CMP, op - OXF_OP_EQ, OX_BOOL, ops[0], ops[1]));
  }
  static const int map[] = {0, OXI_ADD, OXI_SUB, OXI_MUL, OXI_DIV, OXI_REM, OXI_AND, OXI_OR, OXI_XOR};
  assert(op >= OXF_OP_ADD && op <= OXF_OP_XOR);
  bool bitwise = op == OXF_OP_AND || op == OXF_OP_OR || op == OXF_OP_XOR;
  if (bitwise ? !(oxi_is_int(t) || t == OX_BOOL) : !oxs_is_numeric(t)) {
    ERR(S, n->loc, "'%s' is not defined for %s", oxf_op_name(op), oxi_type_name(t));
    return VERR;
  }
  if (!S->tile_unify(S, n->loc, ops, 2))
    return VERR;
  return oxs_value(oxs_op2(S, OXI_BIN, map[op], t, ops[0], ops[1]));
}

static val unary(sema *S, const oxf_node *n, oxi_type hint) {
  if (n->op == OXF_OP_DEREF) {
    val v = expr(S, n->lhs, hint);
    if (v.k == V_ERR)
      return v;
    if (v.k != V_MUTREF) {
      ERR(S, n->loc, "only the reference bound by 'if let Some(x) = s.get_mut(i)' can be "
                     "dereferenced, found %s", oxs_vdesc(S, v));
      return VERR;
    }
    oxi_instr *in = oxs_op1(S, OXI_LOAD, 0, v.b->type, v.b->v);
    in->mem = v.b->mem;
    return oxs_value(in);
  }
  if (n->op == OXF_OP_NEG && (n->lhs->kind == OXF_INT || n->lhs->kind == OXF_FLOAT)) {
    /* fold "-literal" so that i32::MIN and friends can be written */
    val v = literal(S, n->lhs, hint, true);
    oxi_instr *c = v.v;
    if (oxi_is_float(c->type)) {
      c->fimm = -c->fimm;
    } else if (!oxi_is_signed(c->type)) {
      ERR(S, n->loc, "cannot negate an unsigned %s", oxi_type_name(c->type));
      return VERR;
    } else {
      c->imm = (uint64_t)0 - c->imm;
    }
    return v;
  }
  oxi_instr *a = elem_expr(S, n->lhs, hint, "an operand");
  if (!a)
    return VERR;
  if (n->op == OXF_OP_NEG) {
    if (!oxi_is_float(a->type) && !oxi_is_signed(a->type)) {
      ERR(S, n->loc, "cannot negate a value of type %s", oxi_type_name(a->type));
      return VERR;
    }
    return oxs_value(oxs_op1(S, OXI_NEG, 0, a->type, a));
  }
  if (oxi_is_float(a->type)) {
    ERR(S, n->loc, "'!' needs a bool or an integer, found %s", oxi_type_name(a->type));
    return VERR;
  }
  return oxs_value(oxs_op1(S, OXI_NOT, 0, a->type, a));
}

static oxi_type type_of(const oxf_typeexpr *t) { return t->elem; }

static val cast(sema *S, const oxf_node *n) {
  if (!n->type)
    return VERR;
  if (n->type->kind != OXF_TY_SCALAR) {
    ERR(S, n->type->loc, "'as' converts between scalar types only");
    return VERR;
  }
  oxi_type t = type_of(n->type);
  oxi_instr *a = elem_expr(S, n->lhs, t, "the operand of 'as'");
  if (!a)
    return VERR;
  if (t == OX_BOOL && a->type != OX_BOOL) {
    ERR(S, n->loc, "cannot cast %s as bool; compare with zero instead", oxi_type_name(a->type));
    return VERR;
  }
  return oxs_value(oxs_cast_to(S, a, t));
}

/* mem[idx] with a bounds check unless proven or unsafe. */
oxi_instr *oxs_mem_access(sema *S, oxi_op op, binding *mb, oxi_instr *idx, binding *w, oxb_loc loc,
                          const char *what) {
  oxs_ensure_open(S);
  oxi_instr *in = oxs_append(S, op, op == OXI_STORE ? OXI_VOID : mb->type);
  in->mem = mb->mem;
  in->ops[0] = idx;
  in->nops = 1;
  bool skip = S->unsafe_depth > 0 || (w && oxs_proven(S, w, mb->mem));
  if (!skip) {
    oxi_site *site = oxb_alloc(S->a, sizeof *site);
    site->line = loc.line;
    site->col = loc.col;
    site->what = what;
    oxb_vec_push(S->a, &S->k->sites, site);
    in->check = S->k->sites.len;
    if (S->k->sites.len > OXF_MAX_KERNEL_CHECKS)
      oxs_size_error(S, loc, "%s '%s' has more than %d bounds-checked accesses, the compiler's limit "
                         "(counting those of inlined functions; a launch contract or a "
                         "get_mut guard proves accesses in bounds, and those need no check)",
                 oxs_unit_name(S), S->kfn->name, OXF_MAX_KERNEL_CHECKS);
  }
  return in;
}

/* The text of an index expression like "a[i]", for bounds-error messages. */
const char *oxs_access_text(sema *S, const oxf_node *n) {
  const oxb_source *src = S->d->src;
  int start = n->lhs->loc.offset, end = n->loc.offset;
  /* find the closing bracket after the index */
  int depth = 0;
  for (int i = end; src && i < (int)src->len; i++) {
    if (src->text[i] == '[')
      depth++;
    if (src->text[i] == ']' && --depth == 0) {
      end = i + 1;
      break;
    }
  }
  if (!src || end <= start || end - start > 80)
    return n->lhs->name ? n->lhs->name : "index";
  return oxb_strndup(S->a, src->text + start, (size_t)(end - start));
}

/* An index: a usize scalar, or a witness (which may prove the access). */
oxi_instr *oxs_index_value(sema *S, const oxf_node *n, binding **w) {
  *w = NULL;
  val v = expr(S, n, OX_U64);
  if (v.k == V_WITNESS) {
    *w = v.b;
    return v.b->v;
  }
  if (v.k == V_ERR)
    return NULL;
  if (v.k != V_SCALAR) {
    ERR(S, n->loc, "an index must be usize, found %s", oxs_vdesc(S, v));
    return NULL;
  }
  if (v.v->type != OX_U64) {
    ERR(S, n->loc, "an index must be usize, found %s; convert it with 'as usize'",
        oxi_type_name(v.v->type));
    return NULL;
  }
  return v.v;
}

/* The usize index of x[i] on a tensor or a tile, or NULL after an error. */
static oxi_instr *element_index(sema *S, const oxf_node *n) {
  oxi_instr *i = oxs_scalar_expr(S, n->rhs, OX_U64, "an element index");
  if (i && i->type != OX_U64) {
    ERR(S, n->rhs->loc, "an element index must be usize, found %s; convert it with 'as usize'",
        oxi_type_name(i->type));
    return NULL;
  }
  return i;
}

/* x[i] of a tensor parameter (for a 1-D input, its element as a scalar, 0 past
 * its end: x.at([i]); anything else an error) and t[i] of a 1-D tile (its
 * element, 0 past its end). Not inlined: expressions recurse through
 * index_read's caller, whose frame (with ASan's redzones) bounds the nesting a
 * small stack takes. */
static __attribute__((noinline)) val tensor_index(sema *S, const oxf_node *n, binding *mb, oxi_instr *tile) {
  if (tile) {
    oxi_instr *i[1] = {element_index(S, n)};
    return i[0] ? oxs_value(oxs_tile_element(S, tile, i)) : VERR;
  }
  int rank = ((oxi_param *)S->k->params.items[mb->mem.index])->rank;
  if (mb->mkind == OXF_TY_TENSOR && S->is_tile && rank == 1) {
    oxi_instr *i[1] = {element_index(S, n)};
    return i[0] ? oxs_value(oxs_tensor_element(S, mb, i, 1)) : VERR;
  }
  if (mb->mkind == OXF_TY_TENSOR)
    ERR(S, n->loc, "'%s' has %d dims: read an element with '%s.at([i, j%s])', or load tiles of it "
                   "with load_tile_like(x, out), x.partition([..]).load([..]) or x.load_at([..], [..])",
        mb->name, rank, mb->name, rank > 2 ? ", .." : "");
  else if (mb->mkind == OXF_TY_MUTTENSOR)
    ERR(S, n->loc, "'%s' is an output tile (&mut Tensor): its other elements belong to other blocks, "
                   "so it is not read element by element; read this block's tile with "
                   "load_tile_like(%s, %s), and write it with '%s.store(t)'",
        mb->name, mb->name, mb->name, mb->name);
  else
    ERR(S, n->loc, "'%s' is an atomic tensor: blocks add into it (atomic_add), none reads it", mb->name);
  return VERR;
}

static val index_read(sema *S, const oxf_node *n) {
  val base = expr(S, n->lhs, OXI_VOID);
  if (base.k == V_ERR)
    return VERR;
  if (base.k == V_TILE && base.v->tshape->rank == 1) /* t[i]: an element of a 1-D tile */
    return tensor_index(S, n, NULL, base.v);
  if (base.k == V_TILE) {
    ERR(S, n->loc, "a tile of %d dims is not indexed with [i]: read an element with 't.at([i, j%s])'",
        base.v->tshape->rank, base.v->tshape->rank > 2 ? ", .." : "");
    return VERR;
  }
  if (base.k != V_MEM) {
    ERR(S, n->loc, "cannot index %s", oxs_vdesc(S, base));
    return VERR;
  }
  binding *mb = base.b;
  if (mb->mkind == OXF_TY_TENSOR || mb->mkind == OXF_TY_MUTTENSOR || mb->mkind == OXF_TY_ATOMICTENSOR)
    return tensor_index(S, n, mb, NULL);
  if (mb->mkind == OXF_TY_DISJOINT) {
    ERR(S, n->loc, "a DisjointSlice cannot be indexed; write through '%s.get_mut(i)' with a "
                   "thread-index witness", mb->name);
    return VERR;
  }
  if (mb->mkind == OXF_TY_ATOMIC) {
    ERR(S, n->loc, "an atomic slice is accessed with atomic operations only (%s.atomic_add(i, v), "
                   "...)", mb->name);
    return VERR;
  }
  binding *w;
  oxi_instr *idx = oxs_index_value(S, n->rhs, &w);
  if (!idx)
    return VERR;
  return oxs_value(oxs_mem_access(S, OXI_LOAD, mb, idx, w, n->lhs->loc, oxs_access_text(S, n)));
}

/* ------------------------------------------------------------- builtins */

bool oxs_argc(sema *S, const oxf_node *n, int want, const char *name) {
  if (n->args.len == want)
    return true;
  ERR(S, n->loc, "'%s' takes %d argument%s, found %d", name, want, want == 1 ? "" : "s", n->args.len);
  return false;
}

static const struct {
  const char *name;
  int fn, nargs;
} math_fns[] = {{"sqrt", OXI_M_SQRT, 1},   {"rsqrt", OXI_M_RSQRT, 1}, {"exp", OXI_M_EXP, 1},
                {"exp2", OXI_M_EXP2, 1},   {"ln", OXI_M_LOG, 1},      {"log", OXI_M_LOG, 1},
                {"log2", OXI_M_LOG2, 1},   {"sin", OXI_M_SIN, 1},     {"cos", OXI_M_COS, 1},
                {"tanh", OXI_M_TANH, 1},   {"pow", OXI_M_POW, 2},     {"powf", OXI_M_POW, 2},
                {"fma", OXI_M_FMA, 3},     {"mul_add", OXI_M_FMA, 3}, {"abs", OXI_M_ABS, 1},
                {"min", OXI_M_MIN, 2},     {"max", OXI_M_MAX, 2},     {"floor", OXI_M_FLOOR, 1},
                {"ceil", OXI_M_CEIL, 1},   {"recip", OXI_M_RECIP, 1}, {"erf", OXI_M_ERF, 1},
                {"sigmoid", OXI_M_SIGMOID, 1}, {"round", OXI_M_ROUND, 1}, {"trunc", OXI_M_TRUNC, 1},
                {"tan", OXI_M_TAN, 1},     {"atan", OXI_M_ATAN, 1},   {"atan2", OXI_M_ATAN2, 2},
                {"signum", OXI_M_SIGNUM, 1}, {"clamp", OXI_M_CLAMP, 3}};

/* A math function applied to `args` (receiver first for method calls). */
static val math_call(sema *S, const oxf_node *n, int fi, const oxf_node *const *args, int nargs,
                     oxi_type hint) {
  const char *name = math_fns[fi].name;
  if (nargs != math_fns[fi].nargs) {
    ERR(S, n->loc, "'%s' takes %d argument%s, found %d", name, math_fns[fi].nargs,
        math_fns[fi].nargs == 1 ? "" : "s", nargs);
    return VERR;
  }
  oxi_instr *v[3] = {0};
  oxi_type t = hint;
  /* type from the first argument that is not an untyped literal */
  int first = 0;
  for (int i = 0; i < nargs; i++)
    if (!untyped_literal(args[i])) {
      first = i;
      break;
    }
  v[first] = elem_expr(S, args[first], t, "a math argument");
  if (!v[first])
    return VERR;
  t = v[first]->type;
  for (int i = 0; i < nargs; i++) {
    if (i == first)
      continue;
    v[i] = elem_expr(S, args[i], t, "a math argument");
    if (!v[i])
      return VERR;
    if (v[i]->type != t) {
      ERR(S, args[i]->loc, "'%s' needs arguments of one type, found %s and %s", name,
          oxi_type_name(t), oxi_type_name(v[i]->type));
      return VERR;
    }
  }
  int fn = math_fns[fi].fn;
  bool int_ok = fn == OXI_M_ABS || fn == OXI_M_MIN || fn == OXI_M_MAX || fn == OXI_M_CLAMP || fn == OXI_M_SIGNUM;
  if (!(oxi_is_float(t) || (int_ok && oxi_is_int(t)))) {
    ERR(S, n->loc, "'%s' needs %s arguments, found %s", name, int_ok ? "numeric" : "floating-point",
        oxi_type_name(t));
    return VERR;
  }
  if (!S->tile_unify(S, n->loc, v, nargs))
    return VERR;
  if (fn == OXI_M_ABS && oxi_is_int(t) && !oxi_is_signed(t))
    return oxs_value(v[0]);
  oxs_ensure_open(S);
  oxi_instr *in = oxs_append(S, OXI_MATH, t);
  in->sub = fn;
  for (int i = 0; i < nargs; i++)
    in->ops[i] = v[i];
  in->nops = nargs;
  in->tshape = v[0]->tshape;
  return oxs_value(in);
}

static int find_math(const char *name) {
  for (size_t i = 0; i < OXB_COUNT(math_fns); i++)
    if (!strcmp(math_fns[i].name, name))
      return (int)i;
  return -1;
}

/* thread::index_block(): the block's linear index, held only by the block's
 * first thread (every other thread gets u64::MAX, which no get_mut accepts),
 * so that one thread per block owns the block's output element. */
static val block_witness(sema *S, const oxf_node *n) {
  oxs_argc(S, n, 0, "thread::index_block");
  binding *w = oxs_bind(S, B_WITNESS, NULL, n->loc);
  w->wk = W_BLOCK;
  oxi_instr *bx = oxs_sreg64(S, OXI_SREG_CTAID_X), *by = oxs_sreg64(S, OXI_SREG_CTAID_Y),
            *bz = oxs_sreg64(S, OXI_SREG_CTAID_Z);
  oxi_instr *gx = oxs_sreg64(S, OXI_SREG_NCTAID_X), *gy = oxs_sreg64(S, OXI_SREG_NCTAID_Y);
  oxi_instr *bid = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, bx,
                       oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, gx,
                           oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, by, oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, gy, bz))));
  oxi_instr *t = oxs_op2(S, OXI_BIN, OXI_OR, OX_U32, oxs_sreg(S, OXI_SREG_TID_X),
                     oxs_op2(S, OXI_BIN, OXI_OR, OX_U32, oxs_sreg(S, OXI_SREG_TID_Y), oxs_sreg(S, OXI_SREG_TID_Z)));
  oxi_instr *first = oxs_op2(S, OXI_CMP, OXI_EQ, OX_BOOL, t, oxs_const_int(S, OX_U32, 0));
  oxi_instr *none = oxs_const_int(S, OX_U64, UINT64_MAX);
  oxi_instr *sel = oxs_append(S, OXI_SELECT, OX_U64);
  sel->ops[0] = first;
  sel->ops[1] = bid;
  sel->ops[2] = none;
  sel->nops = 3;
  w->v = sel;
  return (val){V_WITNESS, NULL, w, NULL};
}

static val make_witness(sema *S, const oxf_node *n, bool two_d) {
  binding *w = oxs_bind(S, B_WITNESS, NULL, n->loc);
  w->wk = two_d ? W_INDEX_2D : W_INDEX_1D;
  if (!two_d) {
    w->v = oxs_linear_index(S);
    return (val){V_WITNESS, NULL, w, NULL};
  }
  if (!oxs_argc(S, n, 1, "thread::index_2d"))
    return VERR;
  oxi_instr *width = oxs_scalar_expr(S, n->args.items[0], OX_U64, "the row width");
  if (!width)
    return VERR;
  if (width->type != OX_U64) {
    ERR(S, ((oxf_node *)n->args.items[0])->loc, "the row width must be usize, found %s",
        oxi_type_name(width->type));
    return VERR;
  }
  if (!S->kfn->is_unsafe &&
      !oxs_check_uniform(S, width, ((oxf_node *)n->args.items[0])->loc, "the row width of thread::index_2d"))
    return VERR;
  w->width = width;
  oxi_instr *row = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64,
                       oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, oxs_sreg64(S, OXI_SREG_CTAID_Y), oxs_sreg64(S, OXI_SREG_NTID_Y)),
                       oxs_sreg64(S, OXI_SREG_TID_Y));
  oxi_instr *col = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64,
                       oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, oxs_sreg64(S, OXI_SREG_CTAID_X), oxs_sreg64(S, OXI_SREG_NTID_X)),
                       oxs_sreg64(S, OXI_SREG_TID_X));
  /* Valid only when this thread's (row, col) names a unique element: col < width,
   * row * width + col does not wrap, and z is 0 (threads differing only in z would
   * share the element). Otherwise the witness is u64::MAX, which no get_mut accepts. */
  oxi_instr *zero = oxs_const_int(S, OX_U64, 0);
  oxi_instr *ok = oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, col, width);
  oxi_instr *lim = oxs_op2(S, OXI_BIN, OXI_DIV, OX_U64, oxs_const_int(S, OX_U64, UINT64_MAX), width);
  ok = oxs_op2(S, OXI_BIN, OXI_AND, OX_BOOL, ok, oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, row, lim));
  oxi_instr *z = oxs_op2(S, OXI_BIN, OXI_OR, OX_U64, oxs_sreg64(S, OXI_SREG_TID_Z), oxs_sreg64(S, OXI_SREG_CTAID_Z));
  ok = oxs_op2(S, OXI_BIN, OXI_AND, OX_BOOL, ok, oxs_op2(S, OXI_CMP, OXI_EQ, OX_BOOL, z, zero));
  oxi_instr *lin = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, row, width), col);
  oxi_instr *none = oxs_const_int(S, OX_U64, UINT64_MAX);
  oxi_instr *sel = oxs_append(S, OXI_SELECT, OX_U64);
  sel->ops[0] = ok;
  sel->ops[1] = lin;
  sel->ops[2] = none;
  sel->nops = 3;
  w->v = sel;
  w->row = row;
  w->col = col;
  return (val){V_WITNESS, NULL, w, NULL};
}

static const struct {
  const char *name;
  int sreg;
} sregs[] = {{"thread_idx_x", OXI_SREG_TID_X},  {"thread_idx_y", OXI_SREG_TID_Y},
             {"thread_idx_z", OXI_SREG_TID_Z},  {"block_idx_x", OXI_SREG_CTAID_X},
             {"block_idx_y", OXI_SREG_CTAID_Y}, {"block_idx_z", OXI_SREG_CTAID_Z},
             {"block_dim_x", OXI_SREG_NTID_X},  {"block_dim_y", OXI_SREG_NTID_Y},
             {"block_dim_z", OXI_SREG_NTID_Z},  {"grid_dim_x", OXI_SREG_NCTAID_X},
             {"grid_dim_y", OXI_SREG_NCTAID_Y}, {"grid_dim_z", OXI_SREG_NCTAID_Z}};


void oxs_check_param_name(sema *S, const oxf_fn *fn, int i) {
  const oxf_param *p = fn->params.items[i];
  for (int j = 0; j < i; j++)
    if (!strcmp(((oxf_param *)fn->params.items[j])->name, p->name))
      ERR(S, p->loc, "parameter '%s' appears twice", p->name);
}

/* tf32 lives only inside kernels: the runtime makes no tf32 tensor (f32
 * holds the values) and the launch has no tf32 scalar, so a parameter of it
 * could never be given; nor has it fp8 scalars (fp8 tensors it has). The
 * message says what to write instead. */
bool oxs_check_param_dtype(sema *S, const oxf_param *p) {
  if (oxi_is_fp8(p->type->elem) && p->type->kind == OXF_TY_SCALAR) { /* tensors of fp8 exist; scalars not */
    ERR(S, p->loc, "parameter '%s': %s scalars are not launch arguments; take an f32 and convert it "
                   "with `as %s`", p->name, oxi_type_name(p->type->elem), oxi_type_name(p->type->elem));
    return true;
  }
  if (p->type->elem != OX_TF32)
    return false;
  switch (p->type->kind) {
  case OXF_TY_SCALAR:
    ERR(S, p->loc, "parameter '%s': tf32 is a compute type, not a launch argument; take an f32 "
                   "and cast it with `as tf32`", p->name);
    break;
  case OXF_TY_TENSOR: case OXF_TY_ATOMICTENSOR:
    ERR(S, p->loc, "parameter '%s': tensors hold f32, not tf32 (a compute type); take "
                   "&Tensor<f32, ..> and cast the loaded tile with `as tf32`", p->name);
    break;
  case OXF_TY_MUTTENSOR:
    ERR(S, p->loc, "parameter '%s': tensors hold f32, not tf32 (a compute type); take "
                   "&mut Tensor<f32, ..> and store the tile `as f32`", p->name);
    break;
  default:
    ERR(S, p->loc, "parameter '%s': slices hold f32, not tf32 (a compute type); take f32 "
                   "elements and cast the loaded values with `as tf32`", p->name);
    break;
  }
  return true;
}


static val shared_new(sema *S, const oxf_node *n) {
  if (n->gen.len != 2 || n->args.len != 0) {
    ERR(S, n->loc, "write a shared array as 'SharedArray::<T, N>::new()'");
    return VERR;
  }
  const oxf_node *tn = n->gen.items[0], *cnt = n->gen.items[1];
  const oxf_typeexpr *t = tn->kind == OXF_TYPE ? tn->type : NULL;
  if (!t || t->kind != OXF_TY_SCALAR || cnt->kind != OXF_INT) {
    ERR(S, n->loc, "write a shared array as 'SharedArray::<T, N>::new()' with a scalar T and an "
                   "integer N");
    return VERR;
  }
  if (cnt->ival == 0 || cnt->ival > (1u << 20)) {
    ERR(S, cnt->loc, "a shared array needs 1 to 1048576 elements, found %llu",
        (unsigned long long)cnt->ival);
    return VERR;
  }
  oxi_shared *sh = oxb_alloc(S->a, sizeof *sh);
  sh->dtype = t->elem;
  sh->count = (int64_t)cnt->ival;
  size_t es = ox_dtype_size(t->elem);
  int64_t off = (S->k->shared_bytes + 15) & ~(int64_t)15;
  sh->offset = off;
  S->k->shared_bytes = off + sh->count * (int64_t)es;
  oxb_vec_push(S->a, &S->k->shared, sh);
  binding *b = oxs_bind(S, B_MEM, NULL, n->loc);
  b->mem.kind = OXI_MEM_SHARED;
  b->mem.index = S->k->shared.len - 1;
  b->mkind = OXF_TY_SHARED;
  b->type = t->elem;
  return (val){V_MEM, NULL, b, NULL};
}

/* cdiv(a, b): a / b rounded up, of integers (scalars, or tiles in tile
 * kernels): a / b + (a % b != 0), which does not overflow near the type's
 * largest value as (a + b - 1) / b does. For a >= 0 and b > 0. */
static val cdiv(sema *S, const oxf_node *n, oxi_type hint) {
  if (!oxs_argc(S, n, 2, "cdiv"))
    return VERR;
  oxi_instr *v[2];
  for (int i = 0; i < 2; i++) {
    v[i] = oxs_operand(S, n->args.items[i], hint, "an argument of cdiv", S->is_tile);
    if (!v[i])
      return VERR;
    hint = v[i]->type;
  }
  if (v[0]->type != v[1]->type || !oxi_is_int(v[0]->type)) {
    ERR(S, n->loc, "cdiv takes two integers of one type, found %s and %s", oxi_type_name(v[0]->type),
        oxi_type_name(v[1]->type));
    return VERR;
  }
  if (!S->tile_unify(S, n->loc, v, 2))
    return VERR;
  oxi_type t = v[0]->type;
  oxi_instr *q = oxs_op2(S, OXI_BIN, OXI_DIV, t, v[0], v[1]), *r = oxs_op2(S, OXI_BIN, OXI_REM, t, v[0], v[1]);
  oxi_instr *zero = oxs_const_int(S, t, 0);
  oxi_instr *ops[2] = {r, zero};
  if (!S->tile_unify(S, n->loc, ops, 2))
    return VERR;
  oxi_instr *up = oxs_cast_to(S, oxs_op2(S, OXI_CMP, OXI_NE, OX_BOOL, ops[0], ops[1]), t);
  return oxs_value(oxs_op2(S, OXI_BIN, OXI_ADD, t, q, up));
}

static val call(sema *S, const oxf_node *n, oxi_type hint) {
  const char *name = n->name;
  const char *base = strrchr(name, ':');
  base = base ? base + 1 : name;
  bool in_thread = !strncmp(name, "thread::", 8), in_warp = !strncmp(name, "warp::", 6);
  bool bare = !strchr(name, ':');

  if (S->is_tile) {
    if (in_thread || in_warp || !strcmp(name, "SharedArray::new") ||
        (bare && !strcmp(name, "sync_threads"))) {
      ERR(S, n->loc, "'%s' is a SIMT builtin, not available in tile kernels: a tile kernel "
                     "says what one block's tile does (tile_id(axis) is this block's tile), and "
                     "the compiler shares the work among threads", name);
      return VERR;
    }
    bool handled = false;
    val v = S->tile_call(S, n, hint, &handled);
    if (handled)
      return v;
  }
  if (!strcmp(name, "thread::index_1d")) {
    oxs_argc(S, n, 0, name);
    return make_witness(S, n, false);
  }
  if (!strcmp(name, "thread::index_2d"))
    return make_witness(S, n, true);
  if (!strcmp(name, "thread::index_block"))
    return block_witness(S, n);
  if (!strcmp(name, "thread::index_chunk")) { /* own.c */
    if (!oxs_argc(S, n, 1, name))
      return VERR;
    const oxf_node *an = n->args.items[0];
    oxi_instr *len = oxs_scalar_expr(S, an, OX_U64, "the chunk's length");
    if (!len)
      return VERR;
    if (len->type != OX_U64) {
      ERR(S, an->loc, "the chunk's length must be usize, found %s", oxi_type_name(len->type));
      return VERR;
    }
    if (!S->kfn->is_unsafe && !oxs_check_uniform(S, len, an->loc, "the length of thread::index_chunk"))
      return VERR;
    return (val){V_WITNESS, NULL, oxs_chunk_witness(S, len, n->loc), NULL};
  }
  if (!strcmp(name, "SharedArray::new"))
    return shared_new(S, n);
  if ((in_thread || bare) && !strcmp(base, "sync_threads")) {
    oxs_argc(S, n, 0, name);
    oxs_ensure_open(S);
    oxs_append(S, OXI_BARRIER, OXI_VOID);
    S->k->uses_sync = true;
    return VUNIT;
  }
  if (in_thread) {
    for (size_t i = 0; i < OXB_COUNT(sregs); i++)
      if (!strcmp(base, sregs[i].name)) {
        oxs_argc(S, n, 0, name);
        return oxs_value(oxs_sreg(S, sregs[i].sreg));
      }
  }
  if (in_warp) {
    if (!strcmp(base, "lane_id")) {
      oxs_argc(S, n, 0, name);
      return oxs_value(oxs_sreg(S, OXI_SREG_LANEID));
    }
    if (!strcmp(base, "size")) {
      oxs_argc(S, n, 0, name);
      return oxs_value(oxs_const_int(S, OX_U32, 32));
    }
    static const char *const shfl[] = {"shuffle", "shuffle_up", "shuffle_down", "shuffle_xor"};
    for (int mode = 0; mode < 4; mode++)
      if (!strcmp(base, shfl[mode])) {
        if (!oxs_argc(S, n, 2, name))
          return VERR;
        oxi_instr *v = oxs_scalar_expr(S, n->args.items[0], hint, "a shuffled value");
        oxi_instr *a = oxs_scalar_expr(S, n->args.items[1], OX_U32, "a lane");
        if (!v || !a)
          return VERR;
        size_t sz = ox_dtype_size((ox_dtype)v->type);
        if (v->type == OX_BOOL || (sz != 4 && sz != 8)) {
          ERR(S, n->loc, "warp shuffles move 32- or 64-bit values, found %s", oxi_type_name(v->type));
          return VERR;
        }
        if (a->type != OX_U32) {
          ERR(S, ((oxf_node *)n->args.items[1])->loc, "the lane argument must be u32, found %s",
              oxi_type_name(a->type));
          return VERR;
        }
        S->k->uses_sync = true;
        return oxs_value(oxs_op2(S, OXI_SHFL, mode, v->type, v, a));
      }
    static const char *const votes[] = {"all", "any", "ballot"};
    for (int mode = 0; mode < 3; mode++)
      if (!strcmp(base, votes[mode])) {
        if (!oxs_argc(S, n, 1, name))
          return VERR;
        oxi_instr *p = oxs_scalar_expr(S, n->args.items[0], OX_BOOL, "a predicate");
        if (!p)
          return VERR;
        if (p->type != OX_BOOL) {
          ERR(S, n->loc, "'%s' needs a bool, found %s", name, oxi_type_name(p->type));
          return VERR;
        }
        S->k->uses_sync = true;
        return oxs_value(oxs_op1(S, OXI_VOTE, mode, mode == 2 ? OX_U32 : OX_BOOL, p));
      }
  }
  if (bare || !strncmp(name, "math::", 6)) {
    int fi = find_math(base);
    if (fi >= 0)
      return math_call(S, n, fi, (const oxf_node *const *)n->args.items, n->args.len, hint);
  }
  if (bare) {
    for (int i = 0; i < S->prog->fns.len; i++) {
      const oxf_fn *fn = S->prog->fns.items[i];
      if (!strcmp(fn->name, name)) {
        if (fn->is_kernel || fn->is_tile) {
          ERR(S, n->loc, "'%s' is a kernel; kernels are launched from the host, not called", name);
          return VERR;
        }
        return S->call_fn(S, n, fn, hint);
      }
    }
  }
  if (bare && !strcmp(name, "cdiv")) /* after the device functions too */
    return cdiv(S, n, hint);
  if (bare) { /* after the device functions: one of these names is the program's own */
    bool handled = false;
    val v = S->rng_call(S, n, hint, &handled);
    if (handled)
      return v;
  }
  const char *other = oxs_spelled_otherwise(S->is_tile, name);
  if (other)
    ERR(S, n->loc, "unknown function '%s'; Oxide writes it %s", name, other);
  else
    ERR(S, n->loc, "unknown function '%s'", name);
  return VERR;
}

static val method_on(sema *S, const oxf_node *n, val recv, int fi, oxi_type hint);

/* r.name(args): the receiver first. A chain of methods (x.min(a).min(b)...)
 * recurses here once a link, so this frame is kept small and the rest is
 * method_on's, which is not inlined: a chain as long as the nesting limits
 * allow then fits a 1 MiB stack, sanitizers' redzones included. */
static val method(sema *S, const oxf_node *n, oxi_type hint) {
  int fi = find_math(n->name);
  val recv = expr(S, n->lhs, fi >= 0 ? hint : OXI_VOID);
  if (recv.k == V_ERR)
    return VERR;
  return method_on(S, n, recv, fi, hint);
}

static __attribute__((noinline)) val method_on(sema *S, const oxf_node *n, val recv, int fi, oxi_type hint) {
  const char *name = n->name;
  if (recv.k == V_TILE && fi < 0)
    return S->tile_method(S, n, recv, hint);
  if ((recv.k == V_SCALAR || recv.k == V_TILE) && fi >= 0) {
    const oxf_node *args[3];
    if (n->args.len > 2) {
      ERR(S, n->loc, "too many arguments to '%s'", name);
      return VERR;
    }
    /* The receiver is already evaluated: pass it through a synthetic node-free
     * path by binding it to a temporary name. */
    binding *tmp = oxs_bind(S, B_VALUE, "\x01recv", n->loc);
    tmp->v = recv.v;
    tmp->type = recv.v->type;
    oxf_node *rn = oxb_alloc(S->a, sizeof *rn);
    rn->kind = OXF_NAME;
    rn->name = "\x01recv";
    rn->loc = n->lhs->loc;
    args[0] = rn;
    for (int i = 0; i < n->args.len; i++)
      args[i + 1] = n->args.items[i];
    val r = math_call(S, n, fi, args, n->args.len + 1, recv.v->type);
    oxs_unbind_to(S, S->nbinds - 1);
    return r;
  }
  if (recv.k == V_WITNESS) {
    binding *w = recv.b;
    if (!strcmp(name, "at") && w->wk == W_CHUNK) {
      if (!oxs_argc(S, n, 1, name))
        return VERR;
      oxi_instr *j = oxs_scalar_expr(S, n->args.items[0], OX_U64, "an element of the chunk");
      if (!j)
        return VERR;
      if (j->type != OX_U64) {
        ERR(S, ((oxf_node *)n->args.items[0])->loc, "at() takes a usize, found %s", oxi_type_name(j->type));
        return VERR;
      }
      return (val){V_WITNESS, NULL, oxs_chunk_at(S, w, j, n->loc), NULL};
    }
    if (!strcmp(name, "get") || !strcmp(name, "row") || !strcmp(name, "col")) {
      oxs_argc(S, n, 0, name);
      if (strcmp(name, "get") && !w->row) {
        ERR(S, n->loc, "'%s()' exists only on witnesses from thread::index_2d", name);
        return VERR;
      }
      return oxs_value(!strcmp(name, "get") ? w->v : !strcmp(name, "row") ? w->row : w->col);
    }
    ERR(S, n->loc, "a thread-index witness has methods get(), row() and col() (and at(j) from "
                   "thread::index_chunk), not '%s'", name);
    return VERR;
  }
  if (recv.k == V_PART ||
      (recv.k == V_MEM && (recv.b->mkind == OXF_TY_TENSOR || recv.b->mkind == OXF_TY_MUTTENSOR ||
                           recv.b->mkind == OXF_TY_ATOMICTENSOR)))
    return S->tile_method(S, n, recv, hint);
  if (recv.k != V_MEM) {
    ERR(S, n->loc, "%s has no method '%s'", oxs_vdesc(S, recv), name);
    return VERR;
  }
  binding *mb = recv.b;
  if (!strcmp(name, "len")) {
    oxs_argc(S, n, 0, name);
    if (mb->mkind == OXF_TY_SHARED || mb->mkind == OXF_TY_ARRAY)
      return oxs_value(oxs_const_int(S, OX_U64, (uint64_t)((oxi_shared *)(mb->mkind == OXF_TY_ARRAY ? &S->k->locals
                                                                          : &S->k->shared)->items[mb->mem.index])->count));
    oxs_ensure_open(S); /* code after a return or break is still checked */
    oxi_instr *in = oxs_append(S, OXI_LEN, OX_U64);
    in->mem = mb->mem;
    return oxs_value(in);
  }
  if (!strcmp(name, "get_mut")) {
    if (mb->mkind != OXF_TY_DISJOINT) {
      if (mb->name)
        ERR(S, n->loc, "get_mut exists on DisjointSlice outputs only; '%s' is %s", mb->name,
            oxs_vdesc(S, recv));
      else
        ERR(S, n->loc, "get_mut exists on DisjointSlice outputs only, not on %s", oxs_vdesc(S, recv));
      return VERR;
    }
    if (!oxs_argc(S, n, 1, name))
      return VERR;
    val w = expr(S, n->args.items[0], OX_U64);
    if (w.k == V_ERR)
      return VERR;
    if (w.k != V_WITNESS) {
      ERR(S, ((oxf_node *)n->args.items[0])->loc,
          "get_mut takes a thread-index witness from thread::index_1d() or thread::index_2d(), "
          "found %s: a computed index could let two threads write one element",
          oxs_vdesc(S, w));
      return VERR;
    }
    if (!oxs_claim(S, mb, w.b, ((oxf_node *)n->args.items[0])->loc))
      return VERR;
    return (val){V_OPTION, NULL, mb, w.b};
  }
  static const struct {
    const char *name;
    int sub, nargs;
  } atomics[] = {{"atomic_add", OXI_ADD, 2},  {"atomic_sub", OXI_SUB, 2}, {"atomic_min", OXI_MIN, 2},
                 {"atomic_max", OXI_MAX, 2},  {"atomic_and", OXI_AND, 2}, {"atomic_or", OXI_OR, 2},
                 {"atomic_xor", OXI_XOR, 2},  {"atomic_exchange", OXI_XCHG, 2},
                 {"atomic_cas", OXI_CAS, 3}};
  for (size_t i = 0; i < OXB_COUNT(atomics); i++) {
    if (strcmp(name, atomics[i].name))
      continue;
    if (mb->mkind != OXF_TY_ATOMIC && mb->mkind != OXF_TY_SHARED) {
      ERR(S, n->loc, "atomics work on &[Atomic<T>] parameters and shared arrays; '%s' is %s",
          mb->name ? mb->name : "this", oxs_vdesc(S, recv));
      return VERR;
    }
    if (!oxs_argc(S, n, atomics[i].nargs, name))
      return VERR;
    binding *w;
    oxi_instr *idx = oxs_index_value(S, n->args.items[0], &w);
    if (!idx)
      return VERR;
    oxi_type et = mb->type;
    int sub = atomics[i].sub;
    bool fl = oxi_is_float(et);
    /* tf32: a hardware atomic would leave an unrounded f32 in the array */
    if (et == OX_BOOL || et == OX_TF32 || ox_dtype_size((ox_dtype)et) < 4 ||
        (fl && sub != OXI_ADD && sub != OXI_XCHG && sub != OXI_MIN && sub != OXI_MAX) ||
        (fl && et == OX_F64 && sub != OXI_ADD && sub != OXI_XCHG)) {
      ERR(S, n->loc, "'%s' is not available for %s elements", name, oxi_type_name(et));
      return VERR;
    }
    oxi_instr *vals[2] = {0};
    for (int j = 1; j < atomics[i].nargs; j++) {
      vals[j - 1] = oxs_scalar_expr(S, n->args.items[j], et, "an atomic operand");
      if (!vals[j - 1])
        return VERR;
      if (vals[j - 1]->type != et) {
        ERR(S, ((oxf_node *)n->args.items[j])->loc, "'%s' on %s elements needs a %s, found %s",
            name, oxi_type_name(et), oxi_type_name(et), oxi_type_name(vals[j - 1]->type));
        return VERR;
      }
    }
    oxi_instr *in = oxs_mem_access(S, OXI_ATOMIC, mb, idx, w, n->loc, name);
    in->sub = sub;
    in->ops[1] = vals[0];
    in->nops = 2;
    if (sub == OXI_CAS) {
      in->ops[2] = vals[1];
      in->nops = 3;
    }
    return oxs_value(in);
  }
  ERR(S, n->loc, "%s has no method '%s'", oxs_vdesc(S, recv), name);
  return VERR;
}

static val if_expr(sema *S, const oxf_node *n, oxi_type hint);
static val if_let(sema *S, const oxf_node *n, oxi_type hint);

bool oxs_type_constant(const char *name, oxi_type *t, uint64_t *imm, double *fimm) {
  const char *sep = strstr(name, "::");
  ox_dtype dt;
  if (!sep || !oxf_scalar_named(name, (size_t)(sep - name), &dt) || dt == OX_TF32)
    return false;
  const char *c = sep + 2;
  *t = (oxi_type)dt;
  *imm = 0;
  *fimm = 0;
  int bits = (int)ox_dtype_size(dt) * 8;
  if (oxi_is_float(*t)) {
    /* the largest finite value and the gap above 1.0, per format */
    double mx = dt == OX_F16 ? 65504.0 : dt == OX_BF16 ? 3.3895313892515355e38 : dt == OX_F32 ? (double)FLT_MAX
                                                                                            : DBL_MAX;
    double eps = dt == OX_F16 ? 0x1p-10 : dt == OX_BF16 ? 0x1p-7 : dt == OX_F32 ? (double)FLT_EPSILON : DBL_EPSILON;
    if (!strcmp(c, "INFINITY") || !strcmp(c, "NEG_INFINITY"))
      *fimm = c[0] == 'N' ? -INFINITY : INFINITY;
    else if (!strcmp(c, "NAN"))
      *fimm = NAN;
    else if (!strcmp(c, "MAX") || !strcmp(c, "MIN"))
      *fimm = c[1] == 'A' ? mx : -mx;
    else if (!strcmp(c, "EPSILON"))
      *fimm = eps;
    else
      return false;
    return true;
  }
  if (dt == OX_BOOL || (strcmp(c, "MAX") && strcmp(c, "MIN")))
    return false;
  bool max = c[1] == 'A';
  if (oxi_is_signed(*t))
    *imm = max ? ((uint64_t)1 << (bits - 1)) - 1 : (uint64_t)0 - ((uint64_t)1 << (bits - 1));
  else
    *imm = max ? (bits == 64 ? UINT64_MAX : ((uint64_t)1 << bits) - 1) : 0;
  return true;
}

static val name_ref(sema *S, const oxf_node *n) {
  binding *b = oxs_lookup(S, n->name);
  oxi_type ct;
  uint64_t cimm;
  double cf;
  if (!b && oxs_type_constant(n->name, &ct, &cimm, &cf)) /* f32::NEG_INFINITY, u32::MAX, ... */
    return oxs_value(oxi_is_float(ct) ? oxs_const_float(S, ct, cf) : oxs_const_int(S, ct, cimm));
  const char *sep = strstr(n->name, "::");
  ox_dtype dt;
  if (!b && sep && oxf_scalar_named(n->name, (size_t)(sep - n->name), &dt)) {
    const char *tn = oxi_type_name((oxi_type)dt);
    if (oxi_is_float((oxi_type)dt) && dt != OX_TF32)
      ERR(S, n->loc, "%s has no constant '%s'; it has %s::MAX, %s::MIN, %s::INFINITY, %s::NEG_INFINITY, "
                     "%s::NAN and %s::EPSILON", tn, sep + 2, tn, tn, tn, tn, tn, tn);
    else if (oxi_is_int((oxi_type)dt))
      ERR(S, n->loc, "%s has no constant '%s'; it has %s::MAX and %s::MIN", tn, sep + 2, tn, tn);
    else
      ERR(S, n->loc, "%s has no named constants", tn);
    return VERR;
  }
  if (!b) {
    const char *other = oxs_spelled_otherwise(S->is_tile, n->name);
    if (other)
      ERR(S, n->loc, "unknown name '%s'; Oxide writes it %s", n->name, other);
    else
      ERR(S, n->loc, "unknown name '%s'", n->name);
    return VERR;
  }
  if (b->poisoned)
    return VERR;
  if (b->is_generic)
    return oxs_value(oxs_const_int(S, b->type, (uint64_t)b->gval));
  switch (b->kind) {
  case B_VALUE: return oxs_value(b->v);
  case B_SLOT: {
    oxi_instr *v = oxs_var_get(S, b->slot);
    v->tshape = b->tile; /* a `let mut` tile */
    return oxs_value(v);
  }
  case B_MEM: return (val){V_MEM, NULL, b, NULL};
  case B_WITNESS: return (val){V_WITNESS, NULL, b, NULL};
  case B_MUTREF: return (val){V_MUTREF, NULL, b, NULL};
  case B_PART: return (val){V_PART, NULL, b, NULL};
  case B_TUPLE: return (val){V_TUPLE, NULL, b, NULL};
  }
  return VERR;
}

static val expr_at(sema *S, const oxf_node *n, oxi_type hint);

/* Lowers expression `n`; the instructions made for it carry its location. */
static val expr(sema *S, const oxf_node *n, oxi_type hint) {
  if (oxb_too_many_errors(S->d) || S->too_big)
    return VERR;
  oxb_loc outer = S->at;
  S->at = n->loc;
  val v = expr_at(S, n, hint);
  S->at = outer;
  return v;
}

static val expr_at(sema *S, const oxf_node *n, oxi_type hint) {
  switch (n->kind) {
  case OXF_INT: case OXF_FLOAT: case OXF_BOOL: return literal(S, n, hint, false);
  case OXF_NAME: return name_ref(S, n);
  case OXF_CALL: return call(S, n, hint);
  case OXF_METHOD: return method(S, n, hint);
  case OXF_INDEX: return index_read(S, n);
  case OXF_UNARY: return unary(S, n, hint);
  case OXF_BINARY: return binary(S, n, hint);
  case OXF_CAST: return cast(S, n);
  case OXF_IF: return if_expr(S, n, hint);
  case OXF_IF_LET: return if_let(S, n, hint);
  case OXF_BLOCK: return block_expr(S, n, hint);
  case OXF_UNSAFE: {
    if (S->is_tile) {
      ERR(S, n->loc, "'unsafe' is not available in tile kernels: tile loads and stores are "
                     "always in bounds (edges are masked)");
      return VERR;
    }
    S->unsafe_depth++;
    if (S->k) /* device functions are inlined: this marks the kernel that calls one */
      S->k->unchecked = true;
    val v = block_expr(S, n->body, hint);
    S->unsafe_depth--;
    return v;
  }
  case OXF_RANGE:
    ERR(S, n->loc, "a range 'a..b' can only be iterated by a for loop");
    return VERR;
  case OXF_ARRAY: return S->local_array(S, n, hint);
  case OXF_TUPLE:
  case OXF_FIELD: return S->tuple(S, n, hint);
  default:
    S->stmt(S, n);
    return VUNIT;
  }
}

/* Joins the values of two branches into a slot: both scalars of one type, or
 * (tile kernels) tiles of one shape and dtype, a scalar of the dtype then
 * splatted; the tile lowering keeps such a slot's elements per thread, as for
 * a `let mut` tile. */
typedef struct join {
  int slot;
  oxi_type type;
  bool has_value;
  const oxi_tshape *tshape; /* the branches give tiles of this shape */
  bool bad;                 /* a mismatch was reported */
  oxi_instr *first_set;     /* the first branch's var.set, and its block */
  oxi_block *first_block;
} join;

/* The first branch gave a scalar and a later one a tile: the scalar is splatted
 * where the first branch set it (just before that var.set, in its block). */
static void splat_first(sema *S, join *j, const oxi_tshape *shape) {
  oxi_block *b = j->first_block;
  oxi_instr *sp = oxi_emit(S->m, S->k, b, OXI_T_SPLAT, j->type); /* appended: moved below */
  sp->ops[0] = j->first_set->ops[0];
  sp->nops = 1;
  sp->tshape = shape;
  int at = 0;
  while (b->instrs.items[at] != j->first_set)
    at++;
  memmove(&b->instrs.items[at + 1], &b->instrs.items[at], sizeof(void *) * (size_t)(b->instrs.len - 1 - at));
  b->instrs.items[at] = sp;
  j->first_set->ops[0] = sp;
  j->tshape = shape;
}

static bool same_tshape(const oxi_tshape *a, const oxi_tshape *b) {
  if (!a || !b || a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d])
      return false;
  return true;
}

static void join_value(sema *S, join *j, val v, oxb_loc loc) {
  if (v.k == V_NEVER || v.k == V_ERR || oxs_terminated(S))
    return;
  if (v.k != V_SCALAR && v.k != V_TILE) {
    if (v.k != V_UNIT)
      ERR(S, loc, "an 'if' branch cannot give %s", oxs_vdesc(S, v));
    return;
  }
  if (j->slot < 0) {
    j->type = v.v->type;
    j->tshape = v.v->tshape;
    j->slot = oxi_slot_new(S->m, S->k, j->type);
  }
  oxi_instr *x = v.v;
  if (x->type != j->type) {
    ERR(S, loc, "the branches of 'if' have different types: %s and %s", oxi_type_name(j->type),
        oxi_type_name(x->type));
    j->bad = true;
    return;
  }
  if (j->tshape && !x->tshape) { /* a scalar beside a tile: every element */
    oxi_instr *sp = oxs_emit(S, OXI_T_SPLAT, x->type);
    sp->ops[0] = x;
    sp->nops = 1;
    sp->tshape = j->tshape;
    x = sp;
  }
  if (x->tshape && !j->tshape && j->first_set)
    splat_first(S, j, x->tshape);
  if (x->tshape && !same_tshape(x->tshape, j->tshape)) {
    ERR(S, loc, "the branches of 'if' give tiles of shapes %s and %s (an 'if' does not broadcast: "
                "broadcast_to one shape first)", oxs_shape_text(S, j->tshape), oxs_shape_text(S, x->tshape));
    j->bad = true;
    return;
  }
  oxs_var_set(S, j->slot, x);
  if (!j->first_set) {
    j->first_set = S->cur->instrs.items[S->cur->instrs.len - 1];
    j->first_block = S->cur;
  }
  j->has_value = true;
}

static val finish_join(sema *S, join *j, bool both_branches, bool all_never) {
  if (j->bad)
    return VERR;
  if (all_never)
    return VNEVER;
  if (j->slot >= 0 && j->has_value && both_branches) {
    oxi_instr *v = oxs_var_get(S, j->slot);
    v->tshape = j->tshape;
    return oxs_value(v);
  }
  return VUNIT;
}

static val if_expr(sema *S, const oxf_node *n, oxi_type hint) {
  oxi_instr *c = oxs_scalar_expr(S, n->cond, OX_BOOL, "a condition");
  if (c && c->type != OX_BOOL) {
    ERR(S, n->cond->loc, "a condition must be bool, found %s (Rust has no truthiness: compare "
                         "with zero)", oxi_type_name(c->type));
    c = NULL;
  }
  if (!c)
    c = oxs_const_int(S, OX_BOOL, 0); /* keep checking the branches */
  oxi_block *tb = oxs_new_block(S), *fb = oxs_new_block(S), *done = oxs_new_block(S);
  oxs_condbr(S, c, tb, n->els ? fb : done);
  join j = {-1, OXI_VOID, false, NULL, false, NULL, NULL};
  oxs_set_block(S, tb);
  val tv = block_expr(S, n->then, hint);
  join_value(S, &j, tv, n->then->loc);
  oxs_br(S, done);
  val ev = VUNIT;
  oxs_set_block(S, fb);
  if (n->els) {
    ev = expr(S, n->els, j.slot >= 0 ? j.type : hint);
    join_value(S, &j, ev, n->els->loc);
  }
  oxs_br(S, done);
  oxs_set_block(S, done);
  if (!n->els && (tv.k == V_SCALAR || tv.k == V_TILE)) {
    ERR(S, n->then->value ? n->then->value->loc : n->loc,
        "an 'if' without 'else' cannot give a value; add ';' or an 'else' branch");
    return VERR;
  }
  return finish_join(S, &j, n->els != NULL, n->els && tv.k == V_NEVER && ev.k == V_NEVER);
}

static val if_let(sema *S, const oxf_node *n, oxi_type hint) {
  val o = expr(S, n->lhs, OXI_VOID);
  if (o.k == V_ERR)
    return VERR;
  if (o.k != V_OPTION) {
    ERR(S, n->lhs->loc, "'if let Some(%s) = ...' needs an Option from get_mut, found %s", n->name,
        oxs_vdesc(S, o));
    return VERR;
  }
  binding *mb = o.b, *w = o.w;
  oxi_block *tb = oxs_new_block(S), *fb = oxs_new_block(S), *done = oxs_new_block(S);
  if (oxs_proven(S, w, mb->mem)) {
    oxs_br(S, tb); /* always Some: the enclosing loop bounds the witness */
  } else {
    oxs_ensure_open(S);
    oxi_instr *len = oxs_append(S, OXI_LEN, OX_U64);
    len->mem = mb->mem;
    oxi_instr *ok = oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, w->v, len);
    oxs_condbr(S, ok, tb, n->els ? fb : done);
  }
  oxs_set_block(S, tb);
  int saved_binds = S->nbinds, saved_facts = S->nfacts;
  binding *r = oxs_bind(S, B_MUTREF, n->name, n->loc);
  r->mem = mb->mem;
  r->type = mb->type;
  r->v = w->v;
  oxs_push_fact(S, w, mb->mem);
  join j = {-1, OXI_VOID, false, NULL, false, NULL, NULL};
  val tv = block_expr(S, n->then, hint);
  join_value(S, &j, tv, n->then->loc);
  oxs_unbind_to(S, saved_binds);
  S->nfacts = saved_facts;
  oxs_br(S, done);
  oxs_set_block(S, fb);
  val ev = VUNIT;
  if (n->els) {
    ev = expr(S, n->els, j.slot >= 0 ? j.type : hint);
    join_value(S, &j, ev, n->els->loc);
  }
  oxs_br(S, done);
  oxs_set_block(S, done);
  return finish_join(S, &j, n->els != NULL, n->els && tv.k == V_NEVER && ev.k == V_NEVER);
}

static val block_expr(sema *S, const oxf_node *n, oxi_type hint) {
  if (n->kind != OXF_BLOCK)
    return expr(S, n, hint);
  int saved = S->nbinds;
  bool never = false;
  for (int i = 0; i < n->args.len && !oxb_too_many_errors(S->d); i++) {
    const oxf_node *s = n->args.items[i];
    if (!s)
      continue;
    if (s->kind == OXF_EXPR) {
      val v = expr(S, s->lhs, OXI_VOID);
      if (v.k == V_NEVER)
        never = true;
      else if (v.k == V_OPTION)
        ERR(S, s->lhs->loc, "the Option from get_mut is unused; write "
                            "'if let Some(x) = s.get_mut(i) { *x = ...; }'");
    } else {
      S->rest = (const oxf_node *const *)n->args.items + i + 1;
      S->nrest = n->args.len - i - 1;
      S->rest_value = n->value;
      S->stmt(S, s);
      if (s->kind == OXF_RETURN || s->kind == OXF_BREAK || s->kind == OXF_CONTINUE)
        never = true;
    }
  }
  val v = VUNIT;
  if (n->value) {
    v = expr(S, n->value, hint);
    if (v.k == V_OPTION)
      ERR(S, n->value->loc, "the Option from get_mut must be unpacked with 'if let Some(x) = ...'");
    if (v.k == V_WITNESS || v.k == V_MEM || v.k == V_MUTREF || v.k == V_PART) {
      ERR(S, n->value->loc, "a block cannot give %s", oxs_vdesc(S, v));
      v = VERR;
    }
  } else if (never) {
    v = VNEVER;
  }
  oxs_unbind_to(S, saved);
  return v;
}

/* ------------------------------------------------- for tile.c and check.c */

val oxs_expr(sema *S, const oxf_node *n, oxi_type hint) { return expr(S, n, hint); }
val oxs_block_expr(sema *S, const oxf_node *n, oxi_type hint) { return block_expr(S, n, hint); }
oxi_instr *oxs_operand(sema *S, const oxf_node *n, oxi_type hint, const char *what, bool tiles) {
  return operand(S, n, hint, what, tiles);
}
bool oxs_untyped_literal(const oxf_node *n) { return untyped_literal(n); }
