/* parse.c - recursive-descent parser for the Oxide kernel language.
 *
 * The grammar is a strict subset of Rust's (docs/language.md). On a syntax
 * error the parser reports it, skips to the next statement or item, and goes
 * on, so that one pass shows several errors. Nesting depth is bounded so that
 * hostile input cannot overflow the stack. */
#include "front/front.h"
#include "front/limits.h"

#include <stdio.h>
#include <string.h>

#define MAX_DEPTH OXF_MAX_NESTING   /* recursion of the parser */
#define MAX_TREE OXF_MAX_TREE_DEPTH /* depth of the tree, with left-deep chains like a + b + c */

typedef struct parser {
  oxb_arena *a;
  oxb_diags *d;
  oxf_token *tok;
  int depth;
  int links; /* links of the left-deep chains (a + b + c, x.f().g()) being built */
  bool stop; /* nesting went too deep: skip the rest, report nothing more */
  bool no_struct_brace; /* in `if`/`while` heads a '{' starts the body */
  const oxf_fn *fn;     /* the function being parsed: its const generics name tensor dims */
} parser;

#define perr(P, ...) ((P)->stop ? (void)0 : oxb_error_at((P)->d, __VA_ARGS__))

/* Bounds the nesting, so that hostile input cannot overflow the stack here or
 * in the passes that walk the tree recursively. Past the bound, parsing stops
 * with one error. Call with P->depth already incremented. */
static bool too_deep(parser *P, const char *what) {
  if (P->depth <= MAX_DEPTH && P->depth + P->links <= MAX_TREE)
    return false;
  perr(P, P->tok->loc, "%s nested too deeply: the limit is %d levels, %d counting chained "
                       "operators and method calls", what, MAX_DEPTH, MAX_TREE);
  P->stop = true;
  while (P->tok->kind != OXF_TK_EOF)
    P->tok = P->tok->next;
  return true;
}

static bool equal(oxf_token *t, const char *s) {
  return (t->kind == OXF_TK_PUNCT || t->kind == OXF_TK_KEYWORD || t->kind == OXF_TK_IDENT) &&
         (int)strlen(s) == t->len && !strncmp(t->text, s, (size_t)t->len);
}

static bool at(parser *P, const char *s) { return equal(P->tok, s); }

static void advance(parser *P) {
  if (P->tok->kind != OXF_TK_EOF)
    P->tok = P->tok->next;
}

static bool consume(parser *P, const char *s) {
  if (at(P, s)) {
    advance(P);
    return true;
  }
  return false;
}

static void describe(oxf_token *t, char *buf, size_t n) {
  if (t->kind == OXF_TK_EOF)
    snprintf(buf, n, "end of input");
  else
    snprintf(buf, n, "'%.*s'", t->len > 40 ? 40 : t->len, t->text);
}

static bool expect(parser *P, const char *s) {
  if (consume(P, s))
    return true;
  char got[64];
  describe(P->tok, got, sizeof got);
  perr(P, P->tok->loc, "expected '%s', found %s", s, got);
  return false;
}

static const char *ident(parser *P, const char *what) {
  if (P->tok->kind != OXF_TK_IDENT) {
    char got[64];
    describe(P->tok, got, sizeof got);
    perr(P, P->tok->loc, "expected %s, found %s", what, got);
    return NULL;
  }
  const char *s = oxb_strndup(P->a, P->tok->text, (size_t)P->tok->len);
  advance(P);
  return s;
}

static oxf_node *new_node(parser *P, oxf_node_kind k, oxb_loc loc) {
  oxf_node *n = oxb_alloc(P->a, sizeof *n);
  n->kind = k;
  n->loc = loc;
  return n;
}

/* Skips to just after the next ';' or to a '}' / item start, at this nesting. */
static void recover_stmt(parser *P) {
  int depth = 0;
  while (P->tok->kind != OXF_TK_EOF) {
    if (depth == 0 && consume(P, ";"))
      return;
    if (at(P, "{") || at(P, "(") || at(P, "["))
      depth++;
    if (at(P, "}") || at(P, ")") || at(P, "]")) {
      if (depth == 0)
        return;
      depth--;
    }
    if (depth == 0 && (at(P, "fn") || at(P, "#")))
      return;
    advance(P);
  }
}

static oxf_node *expr(parser *P);
static oxf_node *block(parser *P);
static oxf_typeexpr *type(parser *P);

/* ------------------------------------------------------------------ types */

static const struct {
  const char *name;
  ox_dtype t;
} scalar_names[] = {{"bool", OX_BOOL}, {"i8", OX_I8},   {"i16", OX_I16},  {"i32", OX_I32},
                    {"i64", OX_I64},   {"isize", OX_I64}, {"u8", OX_U8},  {"u16", OX_U16},
                    {"u32", OX_U32},   {"u64", OX_U64},   {"usize", OX_U64}, {"f16", OX_F16},
                    {"bf16", OX_BF16}, {"f32", OX_F32},   {"f64", OX_F64},
                    {"tf32", OX_TF32}, {"f8e4m3", OX_F8E4M3}, {"f8e5m2", OX_F8E5M2}};

bool oxf_scalar_named(const char *name, size_t len, ox_dtype *out) {
  for (size_t i = 0; i < OXB_COUNT(scalar_names); i++)
    if (strlen(scalar_names[i].name) == len && !strncmp(name, scalar_names[i].name, len)) {
      *out = scalar_names[i].t;
      return true;
    }
  return false;
}

static bool scalar_type(oxf_token *t, ox_dtype *out) {
  return t->kind == OXF_TK_IDENT && oxf_scalar_named(t->text, (size_t)t->len, out);
}

/* The element type of a slice, array or tensor, into t (elem, and tvar for a
 * type generic). */
static void elem_type(parser *P, oxf_typeexpr *t) {
  oxf_typeexpr *e = type(P);
  if (e && e->kind != OXF_TY_SCALAR)
    perr(P, t->loc, "elements must be scalar types (bool, integers, floats)");
  bool ok = e && e->kind == OXF_TY_SCALAR;
  t->elem = ok ? e->elem : OX_F32;
  t->tvar = ok ? e->tvar : 0;
}

/* The number of P->fn's generic named by the current token, -1 if none. */
static int generic_named(parser *P) {
  for (int i = 0; P->fn && i < P->fn->generics.len; i++)
    if (equal(P->tok, P->fn->generics.items[i]))
      return i;
  return -1;
}

/* The dims of a tensor type: '[' dim { ',' dim } ']', each an integer >= 1,
 * -1 (dynamic) or a const generic of the function (front.h, OXF_DIM_*). */
static void tensor_dims(parser *P, oxf_typeexpr *t) {
  oxb_loc open = P->tok->loc;
  if (!expect(P, "["))
    return;
  while (!at(P, "]") && P->tok->kind != OXF_TK_EOF) {
    oxb_loc loc = P->tok->loc;
    int64_t d = 1;
    bool ok = true;
    if (consume(P, "-")) {
      if (P->tok->kind == OXF_TK_INT && P->tok->ival == 1 && !P->tok->suffix) {
        d = OXF_DIM_DYNAMIC;
        advance(P);
      } else {
        perr(P, loc, "a dynamic dim is written -1");
        ok = false;
        if (P->tok->kind == OXF_TK_INT)
          advance(P);
      }
    } else if (P->tok->kind == OXF_TK_INT) {
      if (P->tok->overflow || P->tok->ival < 1 || P->tok->ival > ((uint64_t)1 << 40)) {
        perr(P, loc, "a tensor dim is 1..2^40, -1 (dynamic) or a const generic, found %.*s",
             P->tok->len > 40 ? 40 : P->tok->len, P->tok->text);
        ok = false;
      }
      d = (int64_t)P->tok->ival;
      advance(P);
    } else if (P->tok->kind == OXF_TK_IDENT) {
      int g = generic_named(P);
      if (g >= 0 && oxf_is_type_generic(P->fn, g)) {
        perr(P, loc, "'%.*s' is a type generic; a tensor dim is an integer, -1 or a const generic",
             P->tok->len > 40 ? 40 : P->tok->len, P->tok->text);
        ok = false;
      } else if (g < 0) {
        perr(P, loc, "unknown const generic '%.*s' in a tensor shape; declare it: "
                     "'<const %.*s: i32>'", P->tok->len > 40 ? 40 : P->tok->len, P->tok->text,
             P->tok->len > 40 ? 40 : P->tok->len, P->tok->text);
        ok = false;
      }
      d = OXF_DIM_GENERIC(g);
      advance(P);
    } else {
      char got[64];
      describe(P->tok, got, sizeof got);
      perr(P, loc, "expected a tensor dim (an integer, -1 or a const generic), found %s", got);
      return;
    }
    if (t->rank == OXI_MAX_RANK) {
      perr(P, loc, "a tensor has at most %d dims", OXI_MAX_RANK);
      ok = false;
    } else {
      t->dims[t->rank++] = ok ? d : 1;
    }
    if (!consume(P, ","))
      break;
  }
  if (t->rank == 0)
    perr(P, open, "a tensor needs 1 to %d dims", OXI_MAX_RANK);
  expect(P, "]");
}

/* The element type of a slice or tensor, `T` or `Atomic<T>`: returns whether
 * it is atomic (which `mut` must not be: `mut_error`). */
static bool element(parser *P, oxf_typeexpr *t, bool mut, const char *mut_error) {
  bool atomic = at(P, "Atomic");
  if (atomic) {
    advance(P);
    expect(P, "<");
  }
  elem_type(P, t);
  if (atomic) {
    expect(P, ">");
    if (mut)
      perr(P, t->loc, "%s", mut_error);
  }
  return atomic;
}

static oxf_typeexpr *type(parser *P) {
  if (++P->depth, too_deep(P, "type")) {
    P->depth--;
    return NULL;
  }
  oxf_typeexpr *t = oxb_alloc(P->a, sizeof *t);
  t->loc = P->tok->loc;
  ox_dtype dt;
  if (consume(P, "(")) { /* () or (T1, T2, ...) */
    t->kind = OXF_TY_UNIT;
    oxb_vec items = {0};
    while (!at(P, ")") && P->tok->kind != OXF_TK_EOF) {
      oxf_typeexpr *e = type(P);
      if (!e)
        break;
      oxb_vec_push(P->a, &items, e);
      if (!consume(P, ","))
        break;
    }
    expect(P, ")");
    if (items.len) {
      t->kind = OXF_TY_TUPLE;
      t->items = (oxf_typeexpr **)items.items;
      t->nitems = items.len;
    }
  } else if (consume(P, "&")) {
    bool m = consume(P, "mut");
    if (consume(P, "Tensor")) { /* &Tensor<T, [dims]>, &mut Tensor<T, [dims]> */
      t->kind = m ? OXF_TY_MUTTENSOR : OXF_TY_TENSOR;
      expect(P, "<");
      if (element(P, t, m, "atomic tensors are shared: write '&Tensor<Atomic<T>, [..]>', not '&mut'"))
        t->kind = OXF_TY_ATOMICTENSOR; /* &Tensor<Atomic<T>, [dims]> */
      expect(P, ",");
      tensor_dims(P, t);
      expect(P, ">");
      P->depth--;
      return t;
    }
    expect(P, "[");
    t->kind = m ? OXF_TY_MUTSLICE : OXF_TY_SLICE;
    if (element(P, t, m, "atomic slices are shared: write '&[Atomic<T>]', not '&mut'"))
      t->kind = OXF_TY_ATOMIC;
    expect(P, "]");
  } else if (at(P, "DisjointSlice")) {
    advance(P);
    expect(P, "<");
    elem_type(P, t);
    expect(P, ">");
    t->kind = OXF_TY_DISJOINT;
  } else if (at(P, "SharedArray")) {
    advance(P);
    expect(P, "<");
    elem_type(P, t);
    expect(P, ",");
    if (P->tok->kind == OXF_TK_INT) {
      t->count = (int64_t)P->tok->ival;
      advance(P);
    } else {
      perr(P, P->tok->loc, "expected the array length (an integer)");
    }
    expect(P, ">");
    t->kind = OXF_TY_SHARED;
  } else if (consume(P, "[")) { /* [T; N] */
    elem_type(P, t);
    expect(P, ";");
    if (P->tok->kind == OXF_TK_INT && !P->tok->overflow) {
      t->count = (int64_t)(P->tok->ival > INT64_MAX ? INT64_MAX : P->tok->ival);
      advance(P);
    } else {
      perr(P, P->tok->loc, "expected the array length (an integer)");
    }
    expect(P, "]");
    t->kind = OXF_TY_ARRAY;
  } else if (scalar_type(P->tok, &dt)) {
    advance(P);
    t->kind = OXF_TY_SCALAR;
    t->elem = dt;
  } else if (P->tok->kind == OXF_TK_IDENT && generic_named(P) >= 0 &&
             oxf_is_type_generic(P->fn, generic_named(P))) {
    int g = generic_named(P);
    advance(P);
    t->kind = OXF_TY_SCALAR;
    t->tvar = g + 1;
    t->elem = (ox_dtype)(oxf_generic_placeholder(P->fn, g) - 1);
  } else {
    char got[64];
    describe(P->tok, got, sizeof got);
    perr(P, P->tok->loc, "expected a type, found %s", got);
    if (P->tok->kind == OXF_TK_IDENT) /* an unknown type name: skip it */
      advance(P);
    P->depth--;
    return NULL;
  }
  P->depth--;
  return t;
}

/* ------------------------------------------------------------ expressions */

/* path: ident ('::' ident | '::' '<' generics '>')*  (turbofish generics kept) */
static oxf_node *path_or_call(parser *P) {
  oxb_loc loc = P->tok->loc;
  oxb_str name = {0};
  oxb_str_add(&name, P->tok->text, (size_t)P->tok->len);
  advance(P);
  oxf_node *n = new_node(P, OXF_NAME, loc);
  while (at(P, "::")) {
    advance(P);
    if (consume(P, "<")) {
      while (!at(P, ">") && P->tok->kind != OXF_TK_EOF) {
        if (P->tok->kind == OXF_TK_INT) {
          oxf_node *c = new_node(P, OXF_INT, P->tok->loc);
          c->ival = P->tok->ival;
          oxb_vec_push(P->a, &n->gen, c);
          advance(P);
        } else {
          oxf_node *c = new_node(P, OXF_TYPE, P->tok->loc);
          c->type = type(P);
          if (!c->type)
            break;
          oxb_vec_push(P->a, &n->gen, c);
        }
        if (!consume(P, ","))
          break;
      }
      expect(P, ">");
      continue;
    }
    if (P->tok->kind != OXF_TK_IDENT) {
      perr(P, P->tok->loc, "expected a name after '::'");
      break;
    }
    oxb_str_add(&name, "::", 2);
    oxb_str_add(&name, P->tok->text, (size_t)P->tok->len);
    advance(P);
  }
  n->name = oxb_strndup(P->a, name.buf, name.len);
  oxb_str_free(&name);
  if (consume(P, "(")) {
    n->kind = OXF_CALL;
    while (!at(P, ")") && P->tok->kind != OXF_TK_EOF) {
      oxb_vec_push(P->a, &n->args, expr(P));
      if (!consume(P, ","))
        break;
    }
    expect(P, ")");
  }
  return n;
}

static oxf_node *if_expr(parser *P);

static oxf_node *primary(parser *P) {
  oxf_token *t = P->tok;
  if (t->kind == OXF_TK_INT || t->kind == OXF_TK_FLOAT) {
    oxf_node *n = new_node(P, t->kind == OXF_TK_INT ? OXF_INT : OXF_FLOAT, t->loc);
    n->ival = t->ival;
    n->fval = t->fval;
    n->suffix = t->suffix;
    if (t->overflow)
      perr(P, t->loc, "integer literal is too large for 64 bits");
    advance(P);
    return n;
  }
  if (at(P, "true") || at(P, "false")) {
    oxf_node *n = new_node(P, OXF_BOOL, t->loc);
    n->ival = at(P, "true");
    advance(P);
    return n;
  }
  if (at(P, "(")) {
    advance(P);
    if (consume(P, ")")) {
      oxf_node *n = new_node(P, OXF_BLOCK, t->loc); /* () */
      return n;
    }
    bool saved = P->no_struct_brace;
    P->no_struct_brace = false;
    oxf_node *n = expr(P);
    if (at(P, ",")) { /* (a, b, ...): a tuple */
      oxf_node *tu = new_node(P, OXF_TUPLE, t->loc);
      oxb_vec_push(P->a, &tu->args, n);
      while (consume(P, ",") && !at(P, ")") && P->tok->kind != OXF_TK_EOF)
        oxb_vec_push(P->a, &tu->args, expr(P));
      n = tu;
    } else if (at(P, "..")) {
      oxf_node *r = new_node(P, OXF_RANGE, P->tok->loc);
      advance(P);
      r->lhs = n;
      r->rhs = expr(P);
      n = r;
    }
    P->no_struct_brace = saved;
    expect(P, ")");
    return n;
  }
  if (at(P, "[")) { /* [e0, e1, ...], [e; n] */
    oxf_node *n = new_node(P, OXF_ARRAY, t->loc);
    advance(P);
    bool saved = P->no_struct_brace;
    P->no_struct_brace = false;
    while (!at(P, "]") && P->tok->kind != OXF_TK_EOF) {
      oxb_vec_push(P->a, &n->args, expr(P));
      if (n->args.len == 1 && consume(P, ";")) {
        n->op = 1;
        n->rhs = expr(P);
        break;
      }
      if (!consume(P, ","))
        break;
    }
    P->no_struct_brace = saved;
    expect(P, "]");
    return n;
  }
  if (at(P, "{"))
    return block(P);
  if (at(P, "unsafe")) {
    oxf_node *n = new_node(P, OXF_UNSAFE, t->loc);
    advance(P);
    n->body = block(P);
    return n;
  }
  if (at(P, "if"))
    return if_expr(P);
  if (t->kind == OXF_TK_IDENT)
    return path_or_call(P);
  char got[64];
  describe(t, got, sizeof got);
  perr(P, t->loc, "expected an expression, found %s", got);
  if (t->kind != OXF_TK_EOF && !at(P, ";") && !at(P, "}"))
    advance(P);
  return new_node(P, OXF_BOOL, t->loc); /* placeholder, keeps going */
}

static oxf_node *postfix(parser *P) {
  oxf_node *n = primary(P);
  int links = 0;
  for (;; links++, P->links++) {
    if (P->depth + P->links > MAX_TREE && too_deep(P, "expression"))
      break;
    if (at(P, ".")) {
      oxb_loc loc = P->tok->loc;
      advance(P);
      if (P->tok->kind == OXF_TK_INT && !P->tok->suffix) { /* t.0: a tuple's element */
        oxf_node *f = new_node(P, OXF_FIELD, loc);
        f->lhs = n;
        f->ival = P->tok->ival;
        advance(P);
        n = f;
        continue;
      }
      const char *name = ident(P, "a method name");
      if (!name)
        break;
      oxf_node *m = new_node(P, OXF_METHOD, loc);
      m->name = name;
      m->lhs = n;
      if (consume(P, "(")) {
        while (!at(P, ")") && P->tok->kind != OXF_TK_EOF) {
          oxb_vec_push(P->a, &m->args, expr(P));
          if (!consume(P, ","))
            break;
        }
        expect(P, ")");
      } else if (n->kind == OXF_NAME && (!strcmp(n->name, "threadIdx") || !strcmp(n->name, "blockIdx") ||
                                         !strcmp(n->name, "blockDim") || !strcmp(n->name, "gridDim"))) {
        /* CUDA's threadIdx.x is thread::thread_idx_x() */
        static const char *const oxide[] = {"thread_idx", "block_idx", "block_dim", "grid_dim"};
        int w = n->name[0] == 't' ? 0 : n->name[0] == 'g' ? 3 : n->name[5] == 'I' ? 1 : 2;
        perr(P, loc, "fields are not supported; CUDA's %s.%s is thread::%s_%s() in Oxide", n->name, name, oxide[w], name);
      } else {
        perr(P, loc, "fields are not supported; expected a method call '%s()'", name);
      }
      n = m;
      continue;
    }
    if (at(P, "[")) {
      oxf_node *m = new_node(P, OXF_INDEX, P->tok->loc);
      advance(P);
      bool saved = P->no_struct_brace;
      P->no_struct_brace = false;
      m->lhs = n;
      m->rhs = expr(P);
      P->no_struct_brace = saved;
      expect(P, "]");
      n = m;
      continue;
    }
    break;
  }
  P->links -= links;
  return n;
}

static oxf_node *unary(parser *P) {
  if (++P->depth, too_deep(P, "expression")) {
    P->depth--;
    return new_node(P, OXF_BOOL, P->tok->loc);
  }
  oxf_node *n;
  int op = at(P, "-") ? OXF_OP_NEG : at(P, "!") ? OXF_OP_NOT : at(P, "*") ? OXF_OP_DEREF : 0;
  if (op) {
    n = new_node(P, OXF_UNARY, P->tok->loc);
    advance(P);
    n->op = op;
    n->lhs = unary(P);
  } else {
    n = postfix(P);
  }
  P->depth--;
  return n;
}

static oxf_node *cast(parser *P) {
  oxf_node *n = unary(P);
  int links = 0;
  for (; at(P, "as") && !(P->depth + P->links > MAX_TREE && too_deep(P, "expression"));
       links++, P->links++) {
    oxf_node *c = new_node(P, OXF_CAST, P->tok->loc);
    advance(P);
    c->lhs = n;
    c->type = type(P);
    n = c;
  }
  P->links -= links;
  return n;
}

/* Binary operators by precedence level, lowest first (Rust's table). */
static const struct {
  const char *tok;
  int op, level;
} binops[] = {{"||", OXF_OP_LOR, 1}, {"&&", OXF_OP_LAND, 2}, {"==", OXF_OP_EQ, 3},
              {"!=", OXF_OP_NE, 3},  {"<", OXF_OP_LT, 3},    {"<=", OXF_OP_LE, 3},
              {">", OXF_OP_GT, 3},   {">=", OXF_OP_GE, 3},   {"|", OXF_OP_OR, 4},
              {"^", OXF_OP_XOR, 5},  {"&", OXF_OP_AND, 6},   {"<<", OXF_OP_SHL, 7},
              {">>", OXF_OP_SHR, 7}, {"+", OXF_OP_ADD, 8},   {"-", OXF_OP_SUB, 8},
              {"*", OXF_OP_MUL, 9},  {"/", OXF_OP_DIV, 9},   {"%", OXF_OP_REM, 9}};

static int binop_at(parser *P, int *level) {
  if (P->tok->kind != OXF_TK_PUNCT)
    return 0;
  for (size_t i = 0; i < OXB_COUNT(binops); i++)
    if (equal(P->tok, binops[i].tok)) {
      *level = binops[i].level;
      return binops[i].op;
    }
  return 0;
}

static oxf_node *binary(parser *P, int min_level) {
  if (++P->depth, too_deep(P, "expression")) {
    P->depth--;
    return new_node(P, OXF_BOOL, P->tok->loc);
  }
  oxf_node *lhs = cast(P);
  int links = 0;
  for (;; links++, P->links++) {
    if (P->depth + P->links > MAX_TREE && too_deep(P, "expression"))
      break;
    int level = 0;
    int op = binop_at(P, &level);
    if (!op || level < min_level)
      break;
    oxf_node *n = new_node(P, OXF_BINARY, P->tok->loc);
    advance(P);
    n->op = op;
    n->lhs = lhs;
    n->rhs = binary(P, level + 1);
    if (level == 3) {
      int l2;
      if (binop_at(P, &l2) && l2 == 3)
        perr(P, P->tok->loc, "comparison operators cannot be chained; use parentheses");
    }
    lhs = n;
  }
  P->links -= links;
  P->depth--;
  return lhs;
}

static oxf_node *expr(parser *P) { return binary(P, 1); }

static oxf_node *if_expr(parser *P) {
  oxb_loc loc = P->tok->loc;
  advance(P); /* if */
  oxf_node *n;
  bool saved = P->no_struct_brace;
  P->no_struct_brace = true;
  if (consume(P, "let")) {
    n = new_node(P, OXF_IF_LET, loc);
    if (!at(P, "Some"))
      perr(P, P->tok->loc, "only 'if let Some(name) = ...' patterns are supported");
    if (P->tok->kind == OXF_TK_IDENT) /* Some, or the unsupported Ok, None... */
      advance(P);
    expect(P, "(");
    n->name = ident(P, "a name to bind");
    expect(P, ")");
    expect(P, "=");
    n->lhs = expr(P);
  } else {
    n = new_node(P, OXF_IF, loc);
    n->cond = expr(P);
  }
  P->no_struct_brace = saved;
  n->then = block(P);
  if (consume(P, "else")) {
    if (!at(P, "if")) {
      n->els = block(P);
    } else { /* sema recurses on 'else if' chains too */
      if (++P->depth, !too_deep(P, "'else if' chain"))
        n->els = if_expr(P);
      P->depth--;
    }
  }
  return n;
}

/* ------------------------------------------------------------- statements */

static bool ends_with_block(oxf_node *n) {
  return n->kind == OXF_IF || n->kind == OXF_IF_LET || n->kind == OXF_BLOCK ||
         n->kind == OXF_WHILE || n->kind == OXF_LOOP || n->kind == OXF_FOR ||
         n->kind == OXF_UNSAFE;
}

static oxf_node *stmt(parser *P, bool *is_value);

static oxf_node *block(parser *P) {
  oxf_node *b = new_node(P, OXF_BLOCK, P->tok->loc);
  if (!expect(P, "{"))
    return b;
  if (++P->depth, too_deep(P, "blocks")) {
    P->depth--;
    return b;
  }
  while (!at(P, "}") && P->tok->kind != OXF_TK_EOF && !oxb_too_many_errors(P->d)) {
    oxf_token *before = P->tok;
    bool is_value = false;
    oxf_node *s = stmt(P, &is_value);
    if (is_value) {
      if (at(P, "}")) {
        b->value = s->lhs; /* a trailing expression is the block's value */
        break;
      }
      if (!ends_with_block(s->lhs)) {
        char got[64];
        describe(P->tok, got, sizeof got);
        perr(P, P->tok->loc, "expected ';' or '}' after an expression, found %s", got);
        recover_stmt(P);
      }
    }
    if (s)
      oxb_vec_push(P->a, &b->args, s);
    if (P->tok == before) /* no progress: skip a token so we always terminate */
      advance(P);
  }
  P->depth--;
  expect(P, "}");
  return b;
}

static oxf_node *stmt(parser *P, bool *is_value) {
  oxf_token *t = P->tok;
  *is_value = false;
  if (consume(P, ";"))
    return NULL;
  if (at(P, "let")) {
    oxf_node *n = new_node(P, OXF_LET, t->loc);
    advance(P);
    n->is_mut = consume(P, "mut");
    n->loc = P->tok->loc;
    if (!n->is_mut && consume(P, "(")) { /* let (a, mut b, _) = ... */
      while (!at(P, ")") && P->tok->kind != OXF_TK_EOF) {
        oxf_node *v = new_node(P, OXF_NAME, P->tok->loc);
        v->is_mut = consume(P, "mut");
        v->loc = P->tok->loc;
        v->name = consume(P, "_") ? "_" : ident(P, "a variable name");
        if (!v->name) {
          recover_stmt(P);
          return NULL;
        }
        oxb_vec_push(P->a, &n->args, v);
        if (!consume(P, ","))
          break;
      }
      expect(P, ")");
    } else {
      n->name = ident(P, "a variable name");
      if (!n->name) {
        recover_stmt(P);
        return NULL;
      }
    }
    if (consume(P, ":"))
      n->type = type(P);
    if (expect(P, "="))
      n->init = expr(P);
    else
      perr(P, n->loc, "a 'let' needs an initial value");
    if (!expect(P, ";"))
      recover_stmt(P);
    return n;
  }
  if (at(P, "while")) {
    oxf_node *n = new_node(P, OXF_WHILE, t->loc);
    advance(P);
    bool saved = P->no_struct_brace;
    P->no_struct_brace = true;
    n->cond = expr(P);
    P->no_struct_brace = saved;
    n->body = block(P);
    return n;
  }
  if (at(P, "loop")) {
    oxf_node *n = new_node(P, OXF_LOOP, t->loc);
    advance(P);
    n->body = block(P);
    return n;
  }
  if (at(P, "for")) {
    oxf_node *n = new_node(P, OXF_FOR, t->loc);
    advance(P);
    n->name = ident(P, "a loop variable");
    expect(P, "in");
    bool saved = P->no_struct_brace;
    P->no_struct_brace = true;
    oxf_node *r = expr(P);
    if (at(P, "..")) {
      oxf_node *rr = new_node(P, OXF_RANGE, P->tok->loc);
      advance(P);
      rr->lhs = r;
      rr->rhs = expr(P);
      r = rr;
    }
    P->no_struct_brace = saved;
    if (r->kind == OXF_METHOD && !strcmp(r->name, "step_by") && r->lhs->kind == OXF_RANGE &&
        r->args.len == 1) {
      n->step = r->args.items[0];
      r = r->lhs;
    }
    if (r->kind == OXF_CALL && !strcmp(r->name, "thread::grid_stride")) {
      n->init = r; /* a witness loop: sema checks the call */
    } else if (r->kind != OXF_RANGE) {
      perr(P, r->loc, "a for loop iterates over a range 'a..b', '(a..b).step_by(s)' or "
                      "thread::grid_stride(n)");
    } else {
      n->init = r->lhs;
      n->cond = r->rhs;
    }
    n->body = block(P);
    return n;
  }
  if (at(P, "break") || at(P, "continue")) {
    oxf_node *n = new_node(P, at(P, "break") ? OXF_BREAK : OXF_CONTINUE, t->loc);
    advance(P);
    if (!expect(P, ";"))
      recover_stmt(P);
    return n;
  }
  if (at(P, "return")) {
    oxf_node *n = new_node(P, OXF_RETURN, t->loc);
    advance(P);
    if (!at(P, ";") && !at(P, "}"))
      n->lhs = expr(P);
    if (!at(P, "}") && !expect(P, ";"))
      recover_stmt(P);
    return n;
  }
  /* As in Rust, a statement that starts with a block-like expression (if,
   * unsafe, a block) ends with its closing brace: `if c { } *o = x;` is two
   * statements, not a multiplication. */
  if (at(P, "if") || at(P, "unsafe") || at(P, "{")) {
    oxf_node *b = primary(P);
    if (!at(P, ".") && !at(P, "?")) {
      oxf_node *s = new_node(P, OXF_EXPR, b->loc);
      s->lhs = b;
      if (!consume(P, ";"))
        *is_value = true;
      return s;
    }
    P->tok = t; /* a method call on the block's value: parse it as an expression */
  }
  oxf_node *e = expr(P);
  static const struct {
    const char *tok;
    int op;
  } assigns[] = {{"=", 0},          {"+=", OXF_OP_ADD}, {"-=", OXF_OP_SUB}, {"*=", OXF_OP_MUL},
                 {"/=", OXF_OP_DIV}, {"%=", OXF_OP_REM}, {"&=", OXF_OP_AND}, {"|=", OXF_OP_OR},
                 {"^=", OXF_OP_XOR}, {"<<=", OXF_OP_SHL}, {">>=", OXF_OP_SHR}};
  for (size_t i = 0; i < OXB_COUNT(assigns); i++) {
    if (at(P, assigns[i].tok)) {
      oxf_node *n = new_node(P, OXF_ASSIGN, P->tok->loc);
      advance(P);
      n->op = assigns[i].op;
      n->lhs = e;
      n->rhs = expr(P);
      if (!expect(P, ";"))
        recover_stmt(P);
      return n;
    }
  }
  oxf_node *s = new_node(P, OXF_EXPR, e->loc);
  s->lhs = e;
  if (consume(P, ";"))
    return s;
  *is_value = true;
  return s;
}

/* ------------------------------------------------------------------ items */

static int64_t const_int(parser *P) {
  if (P->tok->kind != OXF_TK_INT) {
    perr(P, P->tok->loc, "expected an integer");
    if (!at(P, ",") && !at(P, ")")) /* skip the bad entry, keep the list's shape */
      advance(P);
    return 0;
  }
  int64_t v = P->tok->ival > 0x7fffffff ? -1 : (int64_t)P->tok->ival;
  advance(P);
  return v;
}

/* #[launch_contract(block = (x[, y[, z]]), requires = (e, ...))] */
static void launch_contract(parser *P, oxf_fn *fn) {
  fn->has_contract = true;
  expect(P, "(");
  while (!at(P, ")") && P->tok->kind != OXF_TK_EOF) {
    oxb_loc loc = P->tok->loc;
    if (consume(P, "block")) {
      expect(P, "=");
      expect(P, "(");
      for (int i = 0; i < 3 && !at(P, ")"); i++) {
        /* checked here: 0 in fn->block means "not given" */
        if (P->tok->kind == OXF_TK_INT &&
            (P->tok->overflow || P->tok->ival < 1 || P->tok->ival > 1024))
          perr(P, P->tok->loc, "block dimensions must be 1..1024, found %.*s",
               P->tok->len > 40 ? 40 : P->tok->len, P->tok->text);
        fn->block[i] = const_int(P);
        if (!consume(P, ","))
          break;
      }
      expect(P, ")");
    } else if (consume(P, "requires")) {
      expect(P, "=");
      expect(P, "(");
      while (!at(P, ")") && P->tok->kind != OXF_TK_EOF) {
        oxb_vec_push(P->a, &fn->requires, expr(P));
        if (!consume(P, ","))
          break;
      }
      expect(P, ")");
    } else {
      perr(P, loc, "unknown launch_contract entry; expected 'block' or 'requires'");
      /* skip to the ')' that closes the contract, so that the attribute ends cleanly */
      for (int depth = 0; P->tok->kind != OXF_TK_EOF && !(depth == 0 && at(P, ")")); advance(P)) {
        if (at(P, "(") || at(P, "["))
          depth++;
        else if ((at(P, ")") || at(P, "]")) && --depth < 0)
          break;
      }
      break;
    }
    if (!consume(P, ","))
      break;
  }
  expect(P, ")");
}

static void attribute(parser *P, oxf_fn *fn) {
  expect(P, "[");
  oxb_loc loc = P->tok->loc;
  if (consume(P, "kernel")) {
    fn->is_kernel = true;
  } else if (consume(P, "tile")) {
    fn->is_tile = true;
  } else if (consume(P, "launch_contract")) {
    fn->contract_loc = loc;
    launch_contract(P, fn);
  } else if (consume(P, "inline")) {
    if (consume(P, "(")) { /* #[inline(always)] */
      ident(P, "'always' or 'never'");
      expect(P, ")");
    }
  } else {
    char got[64];
    describe(P->tok, got, sizeof got);
    perr(P, loc, "unknown attribute %s; expected 'kernel', 'launch_contract' or 'inline' "
                 "('tile' for tile kernels)", got);
    while (!at(P, "]") && P->tok->kind != OXF_TK_EOF)
      advance(P);
  }
  expect(P, "]");
}

/* A type generic's declaration after its name: ': Float' (or Int, Num). */
static oxf_typeexpr *type_param(parser *P, const char *name, oxb_loc loc) {
  oxf_typeexpr *t = oxb_alloc(P->a, sizeof *t);
  t->kind = OXF_TY_TYPEPARAM;
  t->loc = loc;
  t->bound = OXF_BOUND_FLOAT;
  if (!consume(P, ":")) {
    perr(P, loc, "give type generic '%s' a bound: '%s: Float', '%s: Int' or '%s: Num'", name, name,
         name, name);
    return t;
  }
  static const char *const names[] = {"Float", "Int", "Num"};
  for (int b = 0; b < 3; b++)
    if (at(P, names[b])) {
      t->bound = (oxf_bound)(b + 1);
      advance(P);
      return t;
    }
  char got[64];
  describe(P->tok, got, sizeof got);
  perr(P, P->tok->loc, "a type generic's bound is Float (f16, bf16, f32, f64), Int (i8 to u64) "
                       "or Num (either); found %s", got);
  if (P->tok->kind == OXF_TK_IDENT)
    advance(P);
  return t;
}

/* <T: Float, const B: i32, ...>: type generics of any function, const
 * generics of a #[tile] function. */
static void generics(parser *P, oxf_fn *fn) {
  expect(P, "<");
  while (!at(P, ">") && P->tok->kind != OXF_TK_EOF) {
    bool is_const = consume(P, "const");
    oxb_loc loc = P->tok->loc;
    const char *name = ident(P, is_const ? "a const generic name" : "a generic name");
    if (!name)
      break;
    for (int i = 0; i < fn->generics.len; i++)
      if (!strcmp(fn->generics.items[i], name))
        perr(P, loc, "generic '%s' appears twice", name);
    oxf_typeexpr *t;
    if (!is_const) {
      t = type_param(P, name, loc);
      fn->ntypes++;
    } else {
      if (!fn->is_tile)
        perr(P, loc, "const generics are for #[tile] kernels; a SIMT function takes type "
                     "generics only, written '<T: Float>'");
      expect(P, ":");
      t = type(P);
      if (!t)
        break;
      if (t->kind != OXF_TY_SCALAR || t->tvar || !oxi_is_int(t->elem))
        perr(P, t->loc, "a const generic is an integer (i32, i64, u32, usize, ...)");
      t->loc = loc; /* errors about the generic point at its name */
    }
    oxb_vec_push(P->a, &fn->generics, (void *)name);
    oxb_vec_push(P->a, &fn->generic_types, t);
    if (!consume(P, ","))
      break;
  }
  expect(P, ">");
}

static oxf_fn *function(parser *P) {
  oxf_fn *fn = oxb_alloc(P->a, sizeof *fn);
  while (consume(P, "#"))
    attribute(P, fn);
  consume(P, "pub");
  fn->is_unsafe = consume(P, "unsafe");
  if (!expect(P, "fn"))
    return NULL;
  fn->loc = P->tok->loc;
  fn->name = ident(P, "a function name");
  if (!fn->name)
    return NULL;
  P->fn = fn;
  if (at(P, "<"))
    generics(P, fn);
  expect(P, "(");
  while (!at(P, ")") && P->tok->kind != OXF_TK_EOF) {
    oxf_param *prm = oxb_alloc(P->a, sizeof *prm);
    prm->loc = P->tok->loc;
    if (at(P, "mut")) {
      perr(P, P->tok->loc, "parameters are immutable; copy into a 'let mut' variable");
      advance(P);
    }
    prm->name = ident(P, "a parameter name");
    if (!prm->name)
      return NULL;
    expect(P, ":");
    prm->type = type(P);
    if (!prm->type)
      return NULL;
    oxb_vec_push(P->a, &fn->params, prm);
    if (!consume(P, ","))
      break;
  }
  if (!expect(P, ")"))
    return NULL;
  if (consume(P, "->"))
    fn->ret = type(P);
  fn->body = block(P);
  return fn;
}

oxf_program *oxf_parse(oxb_arena *a, oxb_diags *d, const oxb_source *src) {
  parser P = {a, d, oxf_tokenize(a, d, src), 0, 0, false, false, NULL};
  oxf_program *prog = oxb_alloc(a, sizeof *prog);
  while (P.tok->kind != OXF_TK_EOF && !oxb_too_many_errors(d)) {
    oxf_token *before = P.tok;
    if (at(&P, "use")) { /* `use oxide::*;` and the like are accepted and ignored */
      while (!at(&P, ";") && P.tok->kind != OXF_TK_EOF)
        advance(&P);
      consume(&P, ";");
      continue;
    }
    oxf_fn *fn = function(&P);
    if (fn && prog->fns.len == OXF_MAX_FUNCTIONS) {
      perr(&P, fn->loc, "too many functions: a source has at most %d", OXF_MAX_FUNCTIONS);
      break;
    }
    if (fn) {
      oxb_vec_push(a, &prog->fns, fn);
    } else {
      /* skip to the next item */
      while (P.tok->kind != OXF_TK_EOF && !at(&P, "#") && !at(&P, "fn") && !at(&P, "pub") &&
             !at(&P, "unsafe"))
        advance(&P);
    }
    if (P.tok == before)
      advance(&P);
  }
  return prog;
}

/* ------------------------------------------------------------------- dump */

const char *oxf_op_name(int op) {
  static const char *const names[] = {"?",  "+",  "-",  "*",  "/",  "%",  "&",  "|",
                                      "^",  "<<", ">>", "==", "!=", "<",  "<=", ">",
                                      ">=", "&&", "||", "-",  "!",  "*"};
  return (op >= 0 && (size_t)op < OXB_COUNT(names)) ? names[op] : "?";
}

static const char *tyname(const oxf_typeexpr *t, const oxf_fn *fn, char *buf, size_t n) {
  if (!t)
    return "()";
  const char *e = t->tvar && fn && t->tvar <= fn->generics.len
                      ? (const char *)fn->generics.items[t->tvar - 1] : ox_dtype_name(t->elem);
  switch (t->kind) {
  case OXF_TY_TENSOR:
  case OXF_TY_MUTTENSOR:
  case OXF_TY_ATOMICTENSOR: {
    oxb_str s = {0};
    oxb_str_addf(&s, "&%sTensor<%s%s%s, [", t->kind == OXF_TY_MUTTENSOR ? "mut " : "",
                 t->kind == OXF_TY_ATOMICTENSOR ? "Atomic<" : "", e,
                 t->kind == OXF_TY_ATOMICTENSOR ? ">" : "");
    for (int i = 0; i < t->rank; i++) {
      int64_t d = t->dims[i];
      int g = OXF_DIM_IS_GENERIC(d) ? OXF_DIM_GENERIC_INDEX(d) : -1;
      if (g >= 0 && fn && g < fn->generics.len)
        oxb_str_addf(&s, "%s%s", i ? ", " : "", (const char *)fn->generics.items[g]);
      else
        oxb_str_addf(&s, "%s%lld", i ? ", " : "", (long long)d);
    }
    oxb_str_add(&s, "]>", 2);
    snprintf(buf, n, "%s", s.buf);
    oxb_str_free(&s);
    break;
  }
  case OXF_TY_SCALAR: snprintf(buf, n, "%s", e); break;
  case OXF_TY_SLICE: snprintf(buf, n, "&[%s]", e); break;
  case OXF_TY_MUTSLICE: snprintf(buf, n, "&mut [%s]", e); break;
  case OXF_TY_ATOMIC: snprintf(buf, n, "&[Atomic<%s>]", e); break;
  case OXF_TY_DISJOINT: snprintf(buf, n, "DisjointSlice<%s>", e); break;
  case OXF_TY_SHARED: snprintf(buf, n, "SharedArray<%s, %lld>", e, (long long)t->count); break;
  case OXF_TY_UNIT: snprintf(buf, n, "()"); break;
  case OXF_TY_TYPEPARAM: snprintf(buf, n, "%s", oxf_bound_name(t->bound)); break;
  case OXF_TY_ARRAY: snprintf(buf, n, "[%s; %lld]", e, (long long)t->count); break;
  case OXF_TY_TUPLE: snprintf(buf, n, "(%d values)", t->nitems); break;
  }
  return buf;
}

static void dump_node(const oxf_node *n, int ind, oxb_str *o);

static void dump_child(const char *label, const oxf_node *n, int ind, oxb_str *o) {
  if (!n)
    return;
  oxb_str_addf(o, "%*s%s:\n", ind, "", label);
  dump_node(n, ind + 2, o);
}

static void dump_node(const oxf_node *n, int ind, oxb_str *o) {
  static const char *const kinds[] = {
      "Int",  "Float",  "Bool",   "Name",  "Call", "Method",   "Index",  "Unary",  "Binary",
      "Cast", "If",     "Block",  "Range", "Assign", "Let",    "Expr",   "While",  "Loop",
      "For",  "Break",  "Continue", "Return", "IfLet", "Unsafe", "Array", "Type", "Tuple", "Field"};
  char buf[160];
  oxb_str_addf(o, "%*s%s", ind, "", kinds[n->kind]);
  switch (n->kind) {
  case OXF_INT: oxb_str_addf(o, " %llu", (unsigned long long)n->ival); break;
  case OXF_FLOAT: oxb_str_addf(o, " %g", n->fval); break;
  case OXF_BOOL: oxb_str_addf(o, " %s", n->ival ? "true" : "false"); break;
  case OXF_UNARY: case OXF_BINARY: oxb_str_addf(o, " %s", oxf_op_name(n->op)); break;
  case OXF_ASSIGN: oxb_str_addf(o, " %s=", n->op ? oxf_op_name(n->op) : ""); break;
  case OXF_CAST: oxb_str_addf(o, " %s", tyname(n->type, NULL, buf, sizeof buf)); break;
  case OXF_LET: if (n->is_mut) oxb_str_add(o, " mut", 4); break;
  default: break;
  }
  if (n->suffix)
    oxb_str_addf(o, " :%s", ox_dtype_name((ox_dtype)(n->suffix - 1)));
  if (n->name)
    oxb_str_addf(o, " %s", n->name);
  if (n->kind == OXF_LET && n->type)
    oxb_str_addf(o, ": %s", tyname(n->type, NULL, buf, sizeof buf));
  oxb_str_addf(o, "  @%d:%d\n", n->loc.line, n->loc.col);
  dump_child("lhs", n->lhs, ind + 2, o);
  dump_child("rhs", n->rhs, ind + 2, o);
  dump_child("cond", n->cond, ind + 2, o);
  dump_child("init", n->init, ind + 2, o);
  dump_child("step", n->step, ind + 2, o);
  dump_child("then", n->then, ind + 2, o);
  dump_child("else", n->els, ind + 2, o);
  dump_child("body", n->body, ind + 2, o);
  for (int i = 0; i < n->args.len; i++)
    if (n->args.items[i])
      dump_node(n->args.items[i], ind + 2, o);
  dump_child("value", n->value, ind + 2, o);
}

void oxf_dump(const oxf_program *p, oxb_str *o) {
  char buf[160];
  for (int i = 0; i < p->fns.len; i++) {
    const oxf_fn *fn = p->fns.items[i];
    oxb_str_addf(o, "Fn %s%s%s%s", fn->is_kernel ? "#[kernel] " : "", fn->is_tile ? "#[tile] " : "",
                 fn->is_unsafe ? "unsafe " : "", fn->name);
    for (int j = 0; j < fn->generics.len; j++) {
      const oxf_typeexpr *t = fn->generic_types.items[j];
      oxb_str_addf(o, "%s%s%s: %s%s", j ? ", " : "<", t->kind == OXF_TY_TYPEPARAM ? "" : "const ",
                   (const char *)fn->generics.items[j], t->kind == OXF_TY_TYPEPARAM
                   ? oxf_bound_name(t->bound) : ox_dtype_name(t->elem),
                   j == fn->generics.len - 1 ? ">" : "");
    }
    oxb_str_add(o, "(", 1);
    for (int j = 0; j < fn->params.len; j++) {
      const oxf_param *prm = fn->params.items[j];
      oxb_str_addf(o, "%s%s: %s", j ? ", " : "", prm->name, tyname(prm->type, fn, buf, sizeof buf));
    }
    oxb_str_addf(o, ") -> %s  @%d:%d\n", tyname(fn->ret, fn, buf, sizeof buf), fn->loc.line,
                 fn->loc.col);
    if (fn->has_contract) {
      oxb_str_addf(o, "  contract block=(%lld, %lld, %lld)\n", (long long)fn->block[0],
                   (long long)fn->block[1], (long long)fn->block[2]);
      for (int j = 0; j < fn->requires.len; j++)
        dump_node(fn->requires.items[j], 4, o);
    }
    dump_node(fn->body, 2, o);
  }
}
