/* infer.c - the type an untyped literal's variable takes from its later use
 * (docs/language.md section 4): `let off = 16;` used as a shuffle's lane is a
 * u32, `for j in 0..8` whose j indexes a slice is a usize, `let mut acc =
 * [0.0; 8];` whose elements take f32 values holds f32s. Rust infers these from
 * the whole function; Oxide checks in one pass, emitting code as it goes, so
 * it looks ahead over the syntax of the variable's scope instead, for the
 * first use whose type is plain from the syntax and the bindings in scope:
 *  - inside an index `s[..]` (not under an `as`): usize;
 *  - an operand of a binary operation or an assignment whose other side has a
 *    type (a typed variable or parameter, `.len()`, `.get()`, a suffixed
 *    literal, `as T`, an element of a slice): that type;
 *  - the lane of a warp shuffle: u32; an argument of a device function: its
 *    parameter's type.
 * Without such a use, the literal keeps its default (i32, f64). */
#include "front/sema.h"

#include <string.h>

typedef struct finder {
  sema *S;
  const char *name;
  bool is_float; /* the literal's kind: only a type of that kind is taken */
  oxi_type found;
  int budget; /* nodes left to look at: the scan is bounded like the tree walks */
} finder;

static bool is_name(const oxf_node *n, const char *name) {
  return n && n->kind == OXF_NAME && !strcmp(n->name, name);
}

/* Whether `name` occurs in n, not under an `as` (whose operand may have any type). */
static bool mentions(const oxf_node *n, const char *name, int depth) {
  if (!n || depth > 64)
    return false;
  if (n->kind == OXF_CAST)
    return false;
  if (is_name(n, name))
    return true;
  const oxf_node *kids[] = {n->lhs, n->rhs, n->cond, n->then, n->els, n->body, n->init, n->step, n->value};
  for (size_t i = 0; i < OXB_COUNT(kids); i++)
    if (mentions(kids[i], name, depth + 1))
      return true;
  for (int i = 0; i < n->args.len; i++)
    if (mentions(n->args.items[i], name, depth + 1))
      return true;
  return false;
}

/* The type expression n has, where the syntax and the bindings in scope say so; OXI_VOID otherwise. */
static oxi_type typed(finder *F, const oxf_node *n, int depth) {
  if (!n || depth > 16)
    return OXI_VOID;
  switch (n->kind) {
  case OXF_INT:
  case OXF_FLOAT: return n->suffix ? (oxi_type)(n->suffix - 1) : OXI_VOID;
  case OXF_CAST: return n->type && n->type->kind == OXF_TY_SCALAR ? (oxi_type)n->type->elem : OXI_VOID;
  case OXF_NAME: {
    if (!strcmp(n->name, F->name))
      return OXI_VOID;
    const binding *b = oxs_lookup(F->S, n->name);
    return b && (b->kind == B_VALUE || b->kind == B_SLOT) && !b->tile && !b->poisoned ? b->type : OXI_VOID;
  }
  case OXF_METHOD:
    if (n->name && (!strcmp(n->name, "len") || !strcmp(n->name, "get") || !strcmp(n->name, "row") ||
                    !strcmp(n->name, "col")))
      return OX_U64;
    return OXI_VOID;
  case OXF_INDEX: { /* an element of a slice, shared array or thread's array in scope */
    const binding *b = n->lhs && n->lhs->kind == OXF_NAME ? oxs_lookup(F->S, n->lhs->name) : NULL;
    return b && b->kind == B_MEM && !b->tile ? b->type : OXI_VOID;
  }
  case OXF_UNARY: return n->op == OXF_OP_NEG ? typed(F, n->lhs, depth + 1) : OXI_VOID;
  case OXF_BINARY:
    if (n->op >= OXF_OP_EQ && n->op <= OXF_OP_LOR)
      return OXI_VOID; /* a comparison is a bool */
    {
      oxi_type t = typed(F, n->lhs, depth + 1);
      return t != OXI_VOID ? t : n->op == OXF_OP_SHL || n->op == OXF_OP_SHR ? OXI_VOID : typed(F, n->rhs, depth + 1);
    }
  default: return OXI_VOID;
  }
}

static void take(finder *F, oxi_type t) {
  if (F->found == OXI_VOID && t != OXI_VOID && t != OX_BOOL &&
      (F->is_float ? oxi_is_float(t) && t != OX_TF32 : oxi_is_int(t)))
    F->found = t;
}

/* The device function (or warp shuffle) call n's argument i wants, if its type is known. */
static void call_arg(finder *F, const oxf_node *n, int i) {
  static const char *const lanes[] = {"warp::shuffle", "warp::shuffle_up", "warp::shuffle_down",
                                      "warp::shuffle_xor"};
  for (size_t k = 0; k < OXB_COUNT(lanes); k++)
    if (!strcmp(n->name, lanes[k]) && i == 1)
      take(F, OX_U32);
  const oxf_program *p = F->S->prog;
  for (int f = 0; p && f < p->fns.len; f++) {
    const oxf_fn *fn = p->fns.items[f];
    if (!fn->is_kernel && !fn->is_tile && !strcmp(fn->name, n->name) && i < fn->params.len) {
      const oxf_typeexpr *t = ((const oxf_param *)fn->params.items[i])->type;
      if (t && t->kind == OXF_TY_SCALAR && !t->tvar)
        take(F, t->elem);
    }
  }
}

static void scan(finder *F, const oxf_node *n, int depth) {
  if (!n || F->found != OXI_VOID || --F->budget < 0 || depth > 200)
    return;
  switch (n->kind) {
  case OXF_INDEX:
    if (!F->is_float && mentions(n->rhs, F->name, 0))
      take(F, OX_U64);
    if (is_name(n->lhs, F->name)) /* an element of the array being typed */
      break;
    break;
  case OXF_BINARY:
    if (n->op != OXF_OP_SHL && n->op != OXF_OP_SHR && n->op != OXF_OP_LAND && n->op != OXF_OP_LOR) {
      if (is_name(n->lhs, F->name))
        take(F, typed(F, n->rhs, 0));
      if (is_name(n->rhs, F->name))
        take(F, typed(F, n->lhs, 0));
    }
    break;
  case OXF_ASSIGN: {
    /* x = v, x += v; and for an array being typed, a[i] = v */
    const oxf_node *l = n->lhs;
    bool mine = is_name(l, F->name) || (l && l->kind == OXF_INDEX && is_name(l->lhs, F->name));
    if (mine && (!n->op || (n->op != OXF_OP_SHL && n->op != OXF_OP_SHR)))
      take(F, typed(F, n->rhs, 0));
    if (is_name(n->rhs, F->name))
      take(F, typed(F, l, 0));
    break;
  }
  case OXF_CALL:
    for (int i = 0; i < n->args.len; i++)
      if (is_name(n->args.items[i], F->name))
        call_arg(F, n, i);
    break;
  case OXF_METHOD: /* c.at(j) of a chunk witness */
    if (!F->is_float && n->name && !strcmp(n->name, "at") && n->args.len == 1 && is_name(n->args.items[0], F->name))
      take(F, OX_U64);
    break;
  case OXF_LET:
    if (n->name && !strcmp(n->name, F->name)) { /* shadowed from here: what follows is another variable */
      scan(F, n->init, depth + 1);
      F->budget = 0;
      return;
    }
    if (n->type && n->type->kind == OXF_TY_SCALAR && is_name(n->init, F->name))
      take(F, n->type->elem);
    break;
  default: break;
  }
  const oxf_node *kids[] = {n->lhs, n->rhs, n->cond, n->then, n->els, n->body, n->init, n->step};
  for (size_t i = 0; i < OXB_COUNT(kids); i++)
    scan(F, kids[i], depth + 1);
  for (int i = 0; i < n->args.len; i++)
    scan(F, n->args.items[i], depth + 1);
  scan(F, n->value, depth + 1);
}

oxi_type oxs_infer_type(sema *S, const char *name, bool is_float, const oxf_node *const *stmts, int nstmts,
                        const oxf_node *value) {
  finder F = {S, name, is_float, OXI_VOID, 20000};
  for (int i = 0; i < nstmts && F.found == OXI_VOID && F.budget > 0; i++)
    scan(&F, stmts[i], 0);
  if (F.budget > 0)
    scan(&F, value, 0);
  return F.found;
}

bool oxs_untyped_expr(const oxf_node *n) {
  if (!n)
    return false;
  if ((n->kind == OXF_INT || n->kind == OXF_FLOAT) && !n->suffix)
    return true;
  if (n->kind == OXF_UNARY && n->op == OXF_OP_NEG)
    return oxs_untyped_expr(n->lhs);
  if (n->kind == OXF_BINARY && n->op >= OXF_OP_ADD && n->op <= OXF_OP_REM)
    return oxs_untyped_expr(n->lhs) && oxs_untyped_expr(n->rhs);
  return false;
}
