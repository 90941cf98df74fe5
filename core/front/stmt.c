/* stmt.c - statements: let (with its type and mutability rules), assignment
 * (to slots, slice elements, shared arrays, tiles, compound forms), for loops
 * (ranges, and grid-stride loops with their witnesses), while, break,
 * continue, return. Expressions are sema.c's (oxs_expr); sema.c reaches
 * statements through S->stmt, which check.c sets to oxs_stmt, so that the
 * two files do not call each other. */
#include "front/sema.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Binds the name of a 'let' that had an error, so that its uses raise no
 * "unknown name" or type errors that follow from the first. */
static void let_poisoned(sema *S, const oxf_node *n) {
  oxs_bind(S, B_VALUE, n->name, n->loc)->poisoned = true;
}

/* The literal an untyped `let` initializer is made of (`16`, `-1.5`, `[0.0; 8]`, `[1, 2]`), or NULL. */
static const oxf_node *untyped_init(const oxf_node *init) {
  if (init->kind == OXF_ARRAY && init->args.len)
    init = init->args.items[0];
  return oxs_untyped_literal(init) ? init : NULL;
}

/* In a tile kernel, a tile whose dtype is the context's: zeros([..]) and
 * ones([..]) without a type (3: it takes a float or an integer type), full([..], v)
 * of an untyped literal (1: a float type, 2: an integer type); 0 if not one. */
static int context_tile(const oxf_node *init) {
  if (init->kind != OXF_CALL)
    return 0;
  if ((!strcmp(init->name, "zeros") || !strcmp(init->name, "ones")) && !init->gen.len)
    return 3;
  if (strcmp(init->name, "full") || init->args.len != 2 || !oxs_untyped_literal(init->args.items[1]))
    return 0;
  const oxf_node *l = init->args.items[1];
  while (l->kind == OXF_UNARY)
    l = l->lhs;
  return l->kind == OXF_FLOAT ? 1 : 2;
}

/* The dtype of a tile variable or output named by n, or OXI_VOID. */
static oxi_type tile_name_type(sema *S, const oxf_node *n, const char *name) {
  if (!n || n->kind != OXF_NAME || !strcmp(n->name, name))
    return OXI_VOID;
  const binding *b = oxs_lookup(S, n->name);
  if (!b || b->poisoned)
    return OXI_VOID;
  bool tile = (b->kind == B_SLOT && b->tile) || (b->kind == B_VALUE && b->v && b->v->tshape);
  return tile ? b->type : OXI_VOID;
}

static bool arith(const oxf_node *n) {
  return n && ((n->kind == OXF_BINARY && n->op >= OXF_OP_ADD && n->op <= OXF_OP_REM) ||
               (n->kind == OXF_UNARY && n->op == OXF_OP_NEG));
}

/* In arithmetic expression n (+ - * / % and unary -, all of one type, tiles and
 * the scalars splatted next to them): whether `name` is one of its operands
 * (*has), and the type of the first operand that says one (*t): a tile or
 * scalar variable, a cast, a suffixed literal, load_tile_like(x, ..). */
static void arith_operands(sema *S, const oxf_node *n, const char *name, bool *has, oxi_type *t, int depth) {
  if (!n || depth > 64)
    return;
  if (arith(n)) {
    arith_operands(S, n->lhs, name, has, t, depth + 1);
    arith_operands(S, n->rhs, name, has, t, depth + 1);
    return;
  }
  oxi_type u = OXI_VOID;
  if (n->kind == OXF_NAME && !strcmp(n->name, name)) {
    *has = true;
  } else if (n->kind == OXF_NAME) {
    const binding *b = oxs_lookup(S, n->name);
    u = b && !b->poisoned && (b->kind == B_VALUE || b->kind == B_SLOT) ? b->type : OXI_VOID;
  } else if (n->kind == OXF_CAST && n->type && n->type->kind == OXF_TY_SCALAR) {
    u = n->type->elem;
  } else if ((n->kind == OXF_INT || n->kind == OXF_FLOAT) && n->suffix) {
    u = (oxi_type)(n->suffix - 1);
  } else if (n->kind == OXF_CALL && !strcmp(n->name, "load_tile_like") && n->args.len >= 2) {
    const oxf_node *x = n->args.items[0];
    const binding *b = x->kind == OXF_NAME ? oxs_lookup(S, x->name) : NULL;
    u = b && b->kind == B_MEM ? b->type : OXI_VOID;
  }
  if (*t == OXI_VOID)
    *t = u;
}

/* The type the first use in n of tile variable `name` says, beyond what infer.c
 * reads: a store into an output (`z.store(name)`), an operand or assignment
 * next to a tile variable (`t = name`), an operand of arithmetic whose other
 * operands say a type (`load_tile_like(x, y) + name * 2.0`: x's dtype). A `let`
 * of the name hides it from there on (*hidden). */
static oxi_type tile_use(sema *S, const oxf_node *n, const char *name, bool *hidden, int depth) {
  if (!n || *hidden || depth > 200)
    return OXI_VOID;
  if (n->kind == OXF_LET && n->name && !strcmp(n->name, name)) {
    *hidden = true;
    return OXI_VOID;
  }
  const oxf_node *l = n->lhs, *r = n->rhs;
  bool named_l = l && l->kind == OXF_NAME && !strcmp(l->name, name);
  bool named_r = r && r->kind == OXF_NAME && !strcmp(r->name, name);
  if (n->kind == OXF_METHOD && n->name && !strcmp(n->name, "store") && n->args.len == 1 && l &&
      l->kind == OXF_NAME) {
    const oxf_node *a = n->args.items[0];
    const binding *z = oxs_lookup(S, l->name);
    if (a->kind == OXF_NAME && !strcmp(a->name, name) && z && z->kind == B_MEM && z->mkind == OXF_TY_MUTTENSOR)
      return z->type;
  }
  if (arith(n)) { /* the largest arithmetic expression around it: tile_use comes from the top */
    bool has = false;
    oxi_type t = OXI_VOID;
    arith_operands(S, n, name, &has, &t, 0);
    if (has && t != OXI_VOID)
      return t;
  }
  if ((n->kind == OXF_BINARY && n->op != OXF_OP_SHL && n->op != OXF_OP_SHR && n->op != OXF_OP_LAND &&
       n->op != OXF_OP_LOR) || n->kind == OXF_ASSIGN) {
    oxi_type t = named_l ? tile_name_type(S, r, name) : named_r ? tile_name_type(S, l, name) : OXI_VOID;
    if (t != OXI_VOID)
      return t;
  }
  const oxf_node *kids[] = {n->lhs, n->rhs, n->cond, n->then, n->els, n->body, n->init, n->step};
  for (size_t i = 0; i < OXB_COUNT(kids); i++) {
    oxi_type t = tile_use(S, kids[i], name, hidden, depth + 1);
    if (t != OXI_VOID)
      return t;
  }
  for (int i = 0; i < n->args.len; i++) {
    oxi_type t = tile_use(S, n->args.items[i], name, hidden, depth + 1);
    if (t != OXI_VOID)
      return t;
  }
  return tile_use(S, n->value, name, hidden, depth + 1);
}

/* The type of tile `let` n's context_tile initializer from its variable's later
 * uses: an operand or assignment with a typed value (infer.c), or tile_use's;
 * OXI_VOID if none says (the initializer then takes its default). */
static oxi_type tile_let_type(sema *S, const oxf_node *n, int kinds) {
  oxi_type t = OXI_VOID;
  for (int k = 1; k <= 2 && t == OXI_VOID; k++)
    if (kinds & k)
      t = oxs_infer_type(S, n->name, k == 1, S->rest, S->nrest, S->rest_value);
  bool hidden = false;
  for (int i = 0; i < S->nrest && t == OXI_VOID && !hidden; i++)
    t = tile_use(S, S->rest[i], n->name, &hidden, 0);
  if (t == OXI_VOID && !hidden)
    t = tile_use(S, S->rest_value, n->name, &hidden, 0);
  /* a literal takes only a type of its kind */
  if ((kinds == 1 && !oxi_is_float(t)) || (kinds == 2 && !oxi_is_int(t)))
    return OXI_VOID;
  return t;
}

static void let_stmt(sema *S, const oxf_node *n) {
  oxi_type hint = OXI_VOID;
  const oxf_node *lit = n->type || !n->init || S->is_tile ? NULL : untyped_init(n->init);
  if (lit) { /* its type from the first use that says one (infer.c) */
    const oxf_node *l = lit->kind == OXF_UNARY ? lit->lhs : lit;
    hint = oxs_infer_type(S, n->name, l->kind == OXF_FLOAT, S->rest, S->nrest, S->rest_value);
  }
  int kinds = S->is_tile && !n->type && n->init && n->name ? context_tile(n->init) : 0;
  if (kinds)
    hint = tile_let_type(S, n, kinds);
  if (n->type) {
    if (n->type->kind != OXF_TY_SCALAR && n->type->kind != OXF_TY_SHARED &&
        (n->type->kind != OXF_TY_ARRAY || S->is_tile)) {
      ERR(S, n->type->loc, S->is_tile ? "local variables hold scalars and tiles (a tile's type "
                                        "is not written: remove the annotation)"
                                      : "local variables hold scalars, arrays [T; N] (or a SharedArray)");
      let_poisoned(S, n);
      return;
    }
    hint = n->type->elem;
  }
  val v = oxs_expr(S, n->init, hint);
  if (v.k == V_ERR || v.k == V_NEVER) {
    if (!n->name) /* a pattern: each of its names */
      for (int i = 0; i < n->args.len; i++)
        oxs_bind(S, B_VALUE, ((const oxf_node *)n->args.items[i])->name, n->loc)->poisoned = true;
    else
      let_poisoned(S, n);
    return;
  }
  if (!n->name || v.k == V_TUPLE) { /* let (a, b) = .., let t = (a, b) (tuple.c) */
    if (n->type)
      ERR(S, n->type->loc, "a tuple's type is not written; remove the annotation");
    oxs_let_tuple(S, n, v);
    return;
  }
  if (v.k == V_WITNESS) {
    if (v.b->name) {
      ERR(S, n->init->loc, "a thread-index witness cannot be copied: '%s' already holds it; use "
                           "'%s' itself, or '%s.get()' for a plain number", v.b->name, v.b->name,
          v.b->name);
      let_poisoned(S, n);
      return;
    }
    if (n->is_mut) {
      ERR(S, n->loc, "a thread-index witness cannot be mutable: remove 'mut'");
      let_poisoned(S, n);
      return;
    }
    if (n->type)
      ERR(S, n->type->loc, "a thread-index witness has no type to annotate; remove ': %s'",
          oxi_type_name(hint));
    oxs_name_binding(S, v.b, n->name);
    v.b->loc = n->loc;
    return;
  }
  if (v.k == V_MEM) {
    if (v.b->name) {
      ERR(S, n->init->loc, "'%s' cannot be copied into another variable; use it directly",
          v.b->name);
      let_poisoned(S, n);
      return;
    }
    if (v.b->mkind == OXF_TY_ARRAY) { /* a thread's array, fresh */
      const oxi_shared *a = S->k->locals.items[v.b->mem.index];
      if (n->type && (n->type->kind != OXF_TY_ARRAY || a->dtype != n->type->elem || a->count != n->type->count)) {
        char want[64];
        if (n->type->kind == OXF_TY_ARRAY)
          snprintf(want, sizeof want, "[%s; %lld]", ox_dtype_name(n->type->elem), (long long)n->type->count);
        else
          snprintf(want, sizeof want, "%s", ox_dtype_name(n->type->elem));
        ERR(S, n->init->loc, "expected %s, found [%s; %lld]", want, ox_dtype_name(a->dtype), (long long)a->count);
        let_poisoned(S, n);
        return;
      }
      v.b->is_mut = n->is_mut;
      oxs_name_binding(S, v.b, n->name);
      return;
    }
    const oxi_shared *sh = v.b->mkind == OXF_TY_SHARED ? S->k->shared.items[v.b->mem.index] : NULL;
    if (n->type && (!sh || n->type->kind != OXF_TY_SHARED || sh->dtype != n->type->elem ||
                    sh->count != n->type->count)) {
      if (sh && n->type->kind == OXF_TY_SHARED)
        ERR(S, n->init->loc, "expected SharedArray<%s, %lld>, found SharedArray<%s, %lld>",
            ox_dtype_name(n->type->elem), (long long)n->type->count, ox_dtype_name(sh->dtype),
            (long long)sh->count);
      else
        ERR(S, n->init->loc, "expected %s, found %s",
            n->type->kind == OXF_TY_SHARED ? "a SharedArray" : ox_dtype_name(n->type->elem),
            oxs_vdesc(S, v));
      let_poisoned(S, n);
      return;
    }
    oxs_name_binding(S, v.b, n->name); /* a fresh SharedArray */
    return;
  }
  if (v.k == V_TILE) {
    if (n->type) {
      ERR(S, n->init->loc, "expected %s, found %s", ox_dtype_name(n->type->elem), oxs_vdesc(S, v));
      let_poisoned(S, n);
      return;
    }
    /* a `let mut` tile lives in a slot of its dtype whose values carry its
     * shape; the tile lowering gives it one slot per element a thread holds */
    binding *b = oxs_bind(S, n->is_mut ? B_SLOT : B_VALUE, n->name, n->loc);
    b->type = v.v->type;
    if (n->is_mut) {
      b->tile = v.v->tshape;
      b->is_mut = true;
      b->slot = oxi_slot_new(S->m, S->k, b->type);
      oxs_var_set(S, b->slot, v.v);
    } else {
      b->v = v.v;
    }
    return;
  }
  if (v.k == V_PART) {
    if (v.b->name) {
      ERR(S, n->init->loc, "'%s' cannot be copied into another variable; use it directly",
          v.b->name);
      let_poisoned(S, n);
      return;
    }
    if (n->type || n->is_mut) {
      ERR(S, n->type ? n->type->loc : n->loc, "a partition is bound with a plain 'let %s = "
                                              "x.partition([..])'", n->name);
      let_poisoned(S, n);
      return;
    }
    oxs_name_binding(S, v.b, n->name); /* a fresh partition */
    v.b->loc = n->loc;
    return;
  }
  if (v.k == V_OPTION || v.k == V_MUTREF) {
    ERR(S, n->init->loc, "%s cannot be stored in a variable; write 'if let Some(x) = "
                         "s.get_mut(i) { *x = ...; }'", oxs_vdesc(S, v));
    let_poisoned(S, n);
    return;
  }
  if (v.k != V_SCALAR) {
    ERR(S, n->init->loc, "cannot bind %s to a variable", oxs_vdesc(S, v));
    let_poisoned(S, n);
    return;
  }
  if (n->type && (n->type->kind != OXF_TY_SCALAR || v.v->type != (oxi_type)n->type->elem)) {
    if (n->type->kind == OXF_TY_SCALAR)
      ERR(S, n->init->loc, "expected %s, found %s; convert with 'as %s'",
          ox_dtype_name(n->type->elem), oxi_type_name(v.v->type), ox_dtype_name(n->type->elem));
    else
      ERR(S, n->init->loc, "expected a SharedArray, found %s", oxi_type_name(v.v->type));
    let_poisoned(S, n);
    return;
  }
  if (n->is_mut) {
    binding *b = oxs_bind(S, B_SLOT, n->name, n->loc);
    b->type = v.v->type;
    b->slot = oxi_slot_new(S->m, S->k, b->type);
    b->is_mut = true;
    oxs_var_set(S, b->slot, v.v);
  } else {
    binding *b = oxs_bind(S, B_VALUE, n->name, n->loc);
    b->v = v.v;
    b->type = v.v->type;
  }
}

/* Is compound assignment `n` (x op= v) defined for type t? Reports if not. */
static bool compound_ok(sema *S, const oxf_node *n, oxi_type t) {
  bool shift = n->op == OXF_OP_SHL || n->op == OXF_OP_SHR;
  bool bitwise = n->op >= OXF_OP_AND && n->op <= OXF_OP_SHR;
  if (bitwise ? oxi_is_int(t) || (t == OX_BOOL && !shift) : oxs_is_numeric(t))
    return true;
  ERR(S, n->loc, "'%s=' is not defined for %s", oxf_op_name(n->op), oxi_type_name(t));
  return false;
}

/* t = v and t op= v for a `let mut` tile: v is a tile of t's shape and
 * dtype, or a scalar (splatted); a compound assignment broadcasts v. */
static void tile_assign(sema *S, const oxf_node *n, binding *b) {
  oxi_instr *v = oxs_operand(S, n->rhs, b->type, "the assigned value", true);
  if (!v)
    return;
  if (n->op) {
    oxi_instr *old = oxs_var_get(S, b->slot);
    old->tshape = b->tile;
    if (n->op > OXF_OP_REM) {
      ERR(S, n->loc, "'%s=' on a tile: only += -= *= /= %%= are defined", oxf_op_name(n->op));
      return;
    }
    if (!compound_ok(S, n, b->type))
      return;
    if (v->type != b->type) {
      ERR(S, n->rhs->loc, "mismatched types: %s %s= %s", oxi_type_name(b->type), oxf_op_name(n->op),
          oxi_type_name(v->type));
      return;
    }
    oxi_instr *ops[2] = {old, v};
    if (!oxs_tile_unify_to(S, n->rhs->loc, ops, 2, b->tile))
      return;
    static const int map[] = {0, OXI_ADD, OXI_SUB, OXI_MUL, OXI_DIV, OXI_REM};
    v = oxs_op2(S, OXI_BIN, map[n->op], b->type, ops[0], ops[1]);
  } else {
    if (v->type != b->type) {
      ERR(S, n->rhs->loc, "'%s' is a tile of %s, found %s%s; convert with 'as %s'", n->lhs->name,
          oxi_type_name(b->type), v->tshape ? "a tile of " : "", oxi_type_name(v->type),
          oxi_type_name(b->type));
      return;
    }
    if (!v->tshape) {
      oxi_instr *ops[1] = {v};
      if (!oxs_tile_unify_to(S, n->rhs->loc, ops, 1, b->tile))
        return;
      v = ops[0];
    } else if (v->tshape->rank != b->tile->rank ||
               memcmp(v->tshape->dims, b->tile->dims, sizeof(int64_t) * (size_t)b->tile->rank)) {
      ERR(S, n->rhs->loc, "'%s' is a tile of shape %s, found shape %s", n->lhs->name,
          oxs_shape_text(S, b->tile), oxs_shape_text(S, v->tshape));
      return;
    }
  }
  oxs_var_set(S, b->slot, v);
}

static void assign(sema *S, const oxf_node *n) {
  const oxf_node *l = n->lhs;
  /* *out = v, *out += v */
  if (l->kind == OXF_UNARY && l->op == OXF_OP_DEREF) {
    val r = oxs_expr(S, l->lhs, OXI_VOID);
    if (r.k == V_ERR)
      return;
    if (r.k != V_MUTREF) {
      ERR(S, l->loc, "only the reference bound by 'if let Some(x) = s.get_mut(i)' can be written "
                     "through '*'");
      return;
    }
    binding *rb = r.b;
    oxi_instr *v = oxs_scalar_expr(S, n->rhs, rb->type, "the assigned value");
    if (!v)
      return;
    if (n->op) {
      oxi_instr *old = oxs_op1(S, OXI_LOAD, 0, rb->type, rb->v);
      old->mem = rb->mem;
      if (v->type != rb->type) {
        ERR(S, n->rhs->loc, "mismatched types: %s %s= %s", oxi_type_name(rb->type),
            oxf_op_name(n->op), oxi_type_name(v->type));
        return;
      }
      if (!compound_ok(S, n, rb->type))
        return;
      static const int map[] = {0, OXI_ADD, OXI_SUB, OXI_MUL, OXI_DIV, OXI_REM, OXI_AND, OXI_OR,
                                OXI_XOR, OXI_SHL, OXI_SHR};
      v = oxs_op2(S, OXI_BIN, map[n->op], rb->type, old, v);
    }
    if (v->type != rb->type) {
      ERR(S, n->rhs->loc, "the element type is %s, found %s; convert with 'as %s'",
          oxi_type_name(rb->type), oxi_type_name(v->type), oxi_type_name(rb->type));
      return;
    }
    oxi_instr *st = oxs_op2(S, OXI_STORE, 0, OXI_VOID, rb->v, v);
    st->mem = rb->mem;
    return;
  }
  /* s[i] = v */
  if (l->kind == OXF_INDEX) {
    val base = oxs_expr(S, l->lhs, OXI_VOID);
    if (base.k == V_ERR)
      return;
    if (base.k != V_MEM) {
      ERR(S, l->loc, "cannot index %s", oxs_vdesc(S, base));
      return;
    }
    binding *mb = base.b;
    switch (mb->mkind) {
    case OXF_TY_SLICE:
      ERR(S, l->loc, "'%s' is a shared read-only slice (&[%s]) and cannot be written; outputs are "
                     "DisjointSlice<%s>", mb->name, oxi_type_name(mb->type), oxi_type_name(mb->type));
      return;
    case OXF_TY_DISJOINT:
      ERR(S, l->loc, "a DisjointSlice is written only through '%s.get_mut(i)' with a "
                     "thread-index witness: 'if let Some(x) = %s.get_mut(i) { *x = ...; }'",
          mb->name, mb->name);
      return;
    case OXF_TY_ATOMIC:
      ERR(S, l->loc, "an atomic slice is written with atomic operations only (%s.atomic_add(i, v), "
                     "%s.atomic_exchange(i, v), ...)", mb->name, mb->name);
      return;
    case OXF_TY_TENSOR:
    case OXF_TY_MUTTENSOR:
    case OXF_TY_ATOMICTENSOR:
      ERR(S, l->loc, "a tensor is not written element by element; store a whole tile into an "
                     "output with '%s.store(t)'", mb->name);
      return;
    case OXF_TY_ARRAY:
      if (!mb->is_mut) {
        ERR(S, l->loc, "'%s' is not mutable; declare it 'let mut %s = [..]'", mb->name ? mb->name : "the array",
            mb->name ? mb->name : "a");
        return;
      }
      break;
    default: break;
    }
    binding *w;
    oxi_instr *idx = oxs_index_value(S, l->rhs, &w);
    if (!idx)
      return;
    val rv = oxs_expr(S, n->rhs, mb->type);
    if (rv.k == V_WITNESS) {
      ERR(S, n->rhs->loc, "a thread-index witness cannot be stored; store '%s.get()' (a plain "
                          "number) instead", rv.b->name ? rv.b->name : "i");
      return;
    }
    if (rv.k != V_SCALAR) {
      if (rv.k != V_ERR)
        ERR(S, n->rhs->loc, "cannot store %s", oxs_vdesc(S, rv));
      return;
    }
    oxi_instr *v = rv.v;
    const char *what = oxs_access_text(S, l);
    if (n->op) {
      if (v->type != mb->type) {
        ERR(S, n->rhs->loc, "mismatched types: %s %s= %s", oxi_type_name(mb->type),
            oxf_op_name(n->op), oxi_type_name(v->type));
        return;
      }
      if (!compound_ok(S, n, mb->type))
        return;
      oxi_instr *old = oxs_mem_access(S, OXI_LOAD, mb, idx, w, l->lhs->loc, what);
      static const int map[] = {0, OXI_ADD, OXI_SUB, OXI_MUL, OXI_DIV, OXI_REM, OXI_AND, OXI_OR,
                                OXI_XOR, OXI_SHL, OXI_SHR};
      v = oxs_op2(S, OXI_BIN, map[n->op], mb->type, old, v);
    }
    if (v->type != mb->type) {
      ERR(S, n->rhs->loc, "the element type is %s, found %s; convert with 'as %s'",
          oxi_type_name(mb->type), oxi_type_name(v->type), oxi_type_name(mb->type));
      return;
    }
    oxi_instr *st = oxs_mem_access(S, OXI_STORE, mb, idx, w, l->lhs->loc, what);
    st->ops[1] = v;
    st->nops = 2;
    return;
  }
  if (l->kind != OXF_NAME) {
    ERR(S, l->loc, "cannot assign to this expression");
    return;
  }
  binding *b = oxs_lookup(S, l->name);
  if (!b) {
    ERR(S, l->loc, "unknown name '%s'", l->name);
    return;
  }
  if (b->poisoned)
    return;
  if (b->kind == B_WITNESS) {
    ERR(S, l->loc, "a thread-index witness cannot be reassigned");
    return;
  }
  if (b->kind == B_MUTREF) {
    ERR(S, l->loc, "'%s' is a reference: write through it with '*%s = ...'", l->name, l->name);
    return;
  }
  if (b->is_generic) {
    ERR(S, l->loc, "'%s' is a const generic and cannot be assigned", l->name);
    return;
  }
  if (b->kind != B_SLOT) {
    if (ERR(S, l->loc, "cannot assign twice to immutable variable '%s'; declare it 'let mut %s'",
            l->name, l->name))
      oxb_note_at(S->d, b->loc, "'%s' is declared here", l->name);
    return;
  }
  if (b->tile) {
    tile_assign(S, n, b);
    return;
  }
  oxi_instr *v = oxs_scalar_expr(S, n->rhs, b->type, "the assigned value");
  if (!v)
    return;
  if (n->op) {
    oxi_instr *old = oxs_var_get(S, b->slot);
    bool shift = n->op == OXF_OP_SHL || n->op == OXF_OP_SHR;
    if (shift && oxi_is_int(v->type))
      v = oxs_cast_to(S, v, b->type);
    if (v->type != b->type) {
      ERR(S, n->rhs->loc, "mismatched types: %s %s= %s", oxi_type_name(b->type), oxf_op_name(n->op),
          oxi_type_name(v->type));
      return;
    }
    static const int map[] = {0, OXI_ADD, OXI_SUB, OXI_MUL, OXI_DIV, OXI_REM, OXI_AND, OXI_OR,
                              OXI_XOR, OXI_SHL, OXI_SHR};
    bool bitwise = n->op >= OXF_OP_AND && n->op <= OXF_OP_SHR;
    if (bitwise ? !(oxi_is_int(b->type) || (b->type == OX_BOOL && !shift)) : !oxs_is_numeric(b->type)) {
      ERR(S, n->loc, "'%s=' is not defined for %s", oxf_op_name(n->op), oxi_type_name(b->type));
      return;
    }
    v = oxs_op2(S, OXI_BIN, map[n->op], b->type, old, v);
  }
  if (v->type != b->type) {
    ERR(S, n->rhs->loc, "'%s' is %s, found %s; convert with 'as %s'", l->name,
        oxi_type_name(b->type), oxi_type_name(v->type), oxi_type_name(b->type));
    return;
  }
  oxs_var_set(S, b->slot, v);
}

static void loop_body(sema *S, const oxf_node *body, oxi_block *brk, oxi_block *cont) {
  if (S->nloops == (int)OXB_COUNT(S->loops)) {
    ERR(S, body->loc, "loops nested too deeply: the limit is %d", OXF_MAX_LOOP_NESTING);
    return;
  }
  S->loops[S->nloops].brk = brk;
  S->loops[S->nloops].cont = cont;
  S->nloops++;
  oxs_block_expr(S, body, OXI_VOID);
  S->nloops--;
}

/* One copy of a grid-stride loop body with witness value `iv`; `cont` is
 * where `continue` goes. */
static void stride_copy(sema *S, const oxf_node *n, oxi_instr *iv, binding *bound, oxi_block *done,
                        oxi_block *cont) {
  int saved = S->nbinds, saved_facts = S->nfacts;
  binding *w = oxs_bind(S, B_WITNESS, n->name, n->loc);
  w->v = iv;
  w->wk = W_STRIDE;
  if (bound)
    oxs_push_fact(S, w, bound->mem);
  loop_body(S, n->body, done, cont);
  S->nfacts = saved_facts;
  oxs_unbind_to(S, saved);
  oxs_br(S, cont);
}

/* The elements from `slot`'s value on, one at a time, while they are below
 * `lim` (and `mine` holds, if given): one copy of the loop body each, then on
 * to `exit`. */
static void element_run(sema *S, const oxf_node *n, int slot, oxi_instr *mine, oxi_instr *lim, binding *bound,
                        oxi_block *done, oxi_block *exit) {
  oxi_block *head = oxs_new_block(S), *body = oxs_new_block(S), *next = oxs_new_block(S);
  oxs_count_loop(S, n->loc);
  oxs_br(S, head);
  oxs_set_block(S, head);
  oxi_instr *e = oxs_var_get(S, slot);
  oxi_instr *go = oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, e, lim);
  oxs_condbr(S, mine ? oxs_op2(S, OXI_BIN, OXI_AND, OX_BOOL, mine, go) : go, body, exit);
  oxs_set_block(S, body);
  stride_copy(S, n, e, bound, done, next);
  oxs_set_block(S, next);
  oxi_instr *adv = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, oxs_var_get(S, slot), oxs_const_int(S, OX_U64, 1));
  adv->nuw = true;
  oxs_var_set(S, slot, adv);
  oxs_br(S, head);
}

/* A grid_stride loop on the CPU where the owner makes no difference
 * (oxs_strides_any_owner): the elements 0..lim in runs of RUN, run r to block
 * r mod (the grid's blocks), each run walked in order by the block's first
 * thread, the others given none. A core then streams through memory rather than
 * stepping by the grid's stride a thread at a time. The owner of an element
 * depends on neither the limit nor the loop, as on the GPU: every grid_stride
 * loop of the kernel gives it to the same block. */
static void cpu_stride_for(sema *S, const oxf_node *n, oxi_instr *lim, binding *bound, oxi_block *done) {
  enum { RUN = 16384 };
  oxi_instr *tid = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, oxs_sreg64(S, OXI_SREG_TID_X),
                           oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, oxs_sreg64(S, OXI_SREG_NTID_X),
                                   oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, oxs_sreg64(S, OXI_SREG_TID_Y),
                                           oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, oxs_sreg64(S, OXI_SREG_NTID_Y),
                                                   oxs_sreg64(S, OXI_SREG_TID_Z)))));
  oxi_instr *block = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, oxs_sreg64(S, OXI_SREG_CTAID_X),
                             oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, oxs_sreg64(S, OXI_SREG_NCTAID_X),
                                     oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, oxs_sreg64(S, OXI_SREG_CTAID_Y),
                                             oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, oxs_sreg64(S, OXI_SREG_NCTAID_Y),
                                                     oxs_sreg64(S, OXI_SREG_CTAID_Z)))));
  oxi_instr *blocks = oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64,
                              oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, oxs_sreg64(S, OXI_SREG_NCTAID_X),
                                      oxs_sreg64(S, OXI_SREG_NCTAID_Y)),
                              oxs_sreg64(S, OXI_SREG_NCTAID_Z));
  /* runs from `block` on, `blocks` apart; the other threads start past the limit. r * RUN
     stays below 2^63 + 2^44 (the limit is at most 2^63, and a grid has under 2^32 blocks) */
  int rs = oxi_slot_new(S->m, S->k, OX_U64), es = oxi_slot_new(S->m, S->k, OX_U64);
  oxi_block *first = oxs_new_block(S), *others = oxs_new_block(S), *head = oxs_new_block(S);
  oxs_condbr(S, oxs_op2(S, OXI_CMP, OXI_EQ, OX_BOOL, tid, oxs_const_int(S, OX_U64, 0)), first, others);
  oxs_set_block(S, others);
  oxs_br(S, done);
  oxs_set_block(S, first);
  oxs_var_set(S, rs, block);
  oxs_count_loop(S, n->loc);
  oxs_br(S, head);
  oxs_set_block(S, head);
  oxi_instr *start = oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, oxs_var_get(S, rs), oxs_const_int(S, OX_U64, RUN));
  oxi_block *run = oxs_new_block(S), *latch = oxs_new_block(S);
  oxs_condbr(S, oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, start, lim), run, done);
  oxs_set_block(S, run);
  oxi_instr *past = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, start, oxs_const_int(S, OX_U64, RUN));
  oxi_instr *end = oxs_append(S, OXI_MATH, OX_U64);
  end->sub = OXI_M_MIN;
  end->ops[0] = past;
  end->ops[1] = lim;
  end->nops = 2;
  oxs_var_set(S, es, start);
  element_run(S, n, es, NULL, end, bound, done, latch);
  oxs_set_block(S, latch);
  oxs_var_set(S, rs, oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, oxs_var_get(S, rs), blocks));
  oxs_br(S, head);
}

/* for i in thread::grid_stride(n): i is a witness for each of the elements
 * 0..n that this thread owns. The elements are dealt out in chunks of four:
 * chunk c (elements 4c..4c+3) belongs to the thread whose index_1d() is c
 * modulo the grid's thread count T, the last partial chunk included. An element's
 * owner, (element / 4) mod T, depends on neither n nor the loop: each iteration's
 * witness is as unique as index_1d() itself, in every grid_stride loop of the kernel.
 *
 * Chunks make a thread's accesses in one step contiguous: when every slice
 * parameter starts on a 16-byte boundary (checked once, in the kernel), the
 * backend may merge them into 16-byte vector loads and stores; otherwise the
 * same chunks run with scalar accesses. */
static void grid_stride_for(sema *S, const oxf_node *n) {
  const oxf_node *call = n->init;
  if (!oxs_argc(S, call, 1, "thread::grid_stride"))
    return;
  const oxf_node *arg = call->args.items[0];
  oxi_instr *lim = oxs_scalar_expr(S, arg, OX_U64, "the loop limit");
  if (!lim)
    return;
  if (lim->type != OX_U64) {
    ERR(S, arg->loc, "the loop limit must be usize, found %s", oxi_type_name(lim->type));
    return;
  }
  /* grid_stride(x.len()): every witness of the loop is below x's length */
  binding *bound = NULL;
  if (arg->kind == OXF_METHOD && !strcmp(arg->name, "len") && arg->lhs->kind == OXF_NAME) {
    binding *b = oxs_lookup(S, arg->lhs->name);
    if (b && b->kind == B_MEM && b->mem.kind == OXI_MEM_PARAM)
      bound = b;
  }
  enum { CHUNK = 4 };
  oxi_instr *me = oxs_linear_index(S);
  oxi_instr *step = oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64,
                        oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64,
                            oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, oxs_sreg64(S, OXI_SREG_NTID_X), oxs_sreg64(S, OXI_SREG_NTID_Y)),
                            oxs_sreg64(S, OXI_SREG_NTID_Z)),
                        oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64,
                            oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, oxs_sreg64(S, OXI_SREG_NCTAID_X), oxs_sreg64(S, OXI_SREG_NCTAID_Y)),
                            oxs_sreg64(S, OXI_SREG_NCTAID_Z)));
  /* No element index reaches 2^63 (tensors are smaller) and the launch keeps the
   * grid's thread count below 2^63: with the limit clamped to 2^63, c + step
   * cannot wrap, so the loops need no overflow exit. */
  oxi_instr *clamp = oxs_append(S, OXI_MATH, OX_U64);
  clamp->sub = OXI_M_MIN;
  clamp->ops[0] = lim;
  clamp->ops[1] = oxs_const_int(S, OX_U64, (uint64_t)1 << 63);
  clamp->nops = 2;
  /* const_int above was placed after `clamp`: move clamp to the end */
  S->cur->instrs.items[S->cur->instrs.len - 2] = S->cur->instrs.items[S->cur->instrs.len - 1];
  S->cur->instrs.items[S->cur->instrs.len - 1] = clamp;
  lim = clamp;
  oxi_instr *chunks = oxs_op2(S, OXI_BIN, OXI_DIV, OX_U64, lim, oxs_const_int(S, OX_U64, CHUNK));
  oxi_instr *aligned = NULL;
  for (int p = 0; p < S->k->params.len; p++) {
    oxi_param *prm = S->k->params.items[p];
    if (prm->kind == OXI_P_SCALAR || prm->kind == OXI_P_ATOMIC)
      continue;
    oxs_ensure_open(S);
    oxi_instr *a = oxs_append(S, OXI_ALIGNED, OX_BOOL);
    a->mem.kind = OXI_MEM_PARAM;
    a->mem.index = p;
    a->imm = 16;
    aligned = aligned ? oxs_op2(S, OXI_BIN, OXI_AND, OX_BOOL, aligned, a) : a;
  }
  int slot = oxi_slot_new(S->m, S->k, OX_U64);
  oxi_block *done = oxs_new_block(S), *tail = oxs_new_block(S);
  oxi_block *pre[2] = {oxs_new_block(S), oxs_new_block(S)};
  if (oxs_strides_any_owner(S)) {
    /* on the CPU (the branch is folded at code generation), runs of the elements block by
       block instead: front/stride.c says when, cpu_stride_for how */
    oxi_block *cpu = oxs_new_block(S), *gpu = oxs_new_block(S);
    oxs_condbr(S, oxs_op2(S, OXI_CMP, OXI_NE, OX_BOOL, oxs_sreg(S, OXI_SREG_ON_CPU), oxs_const_int(S, OX_U32, 0)),
               cpu, gpu);
    oxs_set_block(S, cpu);
    cpu_stride_for(S, n, lim, bound, done);
    oxs_set_block(S, gpu);
  }
  if (aligned)
    oxs_condbr(S, aligned, pre[0], pre[1]);
  else
    oxs_br(S, pre[1]);
  for (int version = 0; version < 2; version++) {
    oxs_set_block(S, pre[version]);
    if (version == 0) /* every slice is 16-byte aligned here */
      for (int p = 0; p < S->k->params.len; p++) {
        oxi_param *prm = S->k->params.items[p];
        if (prm->kind == OXI_P_SCALAR || prm->kind == OXI_P_ATOMIC)
          continue;
        oxi_instr *a = oxs_append(S, OXI_ALIGNED, OX_BOOL);
        a->mem.kind = OXI_MEM_PARAM;
        a->mem.index = p;
        a->imm = 16;
        oxs_op1(S, OXI_ASSUME, 0, OXI_VOID, a);
      }
    oxs_var_set(S, slot, me);
    oxi_block *head = oxs_new_block(S), *body = oxs_new_block(S);
    oxs_count_loop(S, n->loc);
    oxs_br(S, head);
    oxs_set_block(S, head);
    oxi_instr *c = oxs_var_get(S, slot);
    oxs_condbr(S, oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, c, chunks), body, tail);
    oxs_set_block(S, body);
    oxi_instr *base = oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, c, oxs_const_int(S, OX_U64, CHUNK));
    for (int k = 0; k < CHUNK; k++) {
      oxi_instr *iv = k ? oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, base, oxs_const_int(S, OX_U64, (uint64_t)k)) : base;
      oxi_block *next = oxs_new_block(S);
      stride_copy(S, n, iv, bound, done, next);
      oxs_set_block(S, next);
    }
    oxi_instr *adv = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, oxs_var_get(S, slot), step);
    adv->nuw = true;
    oxs_var_set(S, slot, adv);
    oxs_br(S, head);
  }
  /* the last lim % 4 elements, 4 * chunks .. lim, make up chunk `chunks`: they go to
   * that chunk's owner, the thread whose index is chunks modulo the grid's thread
   * count, like every other chunk. So an element's owner is (element / 4) mod T
   * whatever the limit is: two grid_stride loops over one output, even with limits
   * that differ per thread, never give one element to two threads. */
  oxs_set_block(S, tail);
  oxi_instr *owner = oxs_op2(S, OXI_BIN, OXI_REM, OX_U64, chunks, step);
  oxi_instr *mine = oxs_op2(S, OXI_CMP, OXI_EQ, OX_BOOL, me, owner);
  oxs_var_set(S, slot, oxs_op2(S, OXI_BIN, OXI_MUL, OX_U64, chunks, oxs_const_int(S, OX_U64, CHUNK)));
  element_run(S, n, slot, mine, lim, bound, done, done);
  oxs_set_block(S, done);
}

static void for_stmt(sema *S, const oxf_node *n) {
  if (n->init && n->init->kind == OXF_CALL && S->is_tile) {
    ERR(S, n->init->loc, "'thread::grid_stride' is a SIMT builtin, not available in tile kernels: "
                         "each block handles its own tile (tile_id(axis))");
    return;
  }
  if (n->init && n->init->kind == OXF_CALL) {
    grid_stride_for(S, n);
    return;
  }
  if (!n->init || !n->cond)
    return;
  oxi_instr *lo, *hi;
  if (oxs_untyped_expr(n->init) && oxs_untyped_expr(n->cond) && !S->is_tile &&
      n->body && n->body->kind == OXF_BLOCK) { /* `for j in 0..8`: j's type from its use in the body */
    oxi_type t = oxs_infer_type(S, n->name, false, (const oxf_node *const *)n->body->args.items,
                                n->body->args.len, n->body->value);
    lo = oxs_scalar_expr(S, n->init, t, "a range bound");
    hi = oxs_scalar_expr(S, n->cond, t, "a range bound");
  } else if (oxs_untyped_literal(n->init) && !oxs_untyped_literal(n->cond)) {
    hi = oxs_scalar_expr(S, n->cond, OXI_VOID, "a range bound");
    lo = oxs_scalar_expr(S, n->init, hi ? hi->type : OXI_VOID, "a range bound");
  } else {
    lo = oxs_scalar_expr(S, n->init, OXI_VOID, "a range bound");
    hi = oxs_scalar_expr(S, n->cond, lo ? lo->type : OXI_VOID, "a range bound");
  }
  if (!lo || !hi)
    return;
  if (lo->type != hi->type || !oxi_is_int(lo->type)) {
    ERR(S, n->loc, "a range needs two integers of one type, found %s..%s", oxi_type_name(lo->type),
        oxi_type_name(hi->type));
    return;
  }
  oxi_type t = lo->type;
  oxi_instr *step = NULL;
  if (n->step) {
    step = oxs_scalar_expr(S, n->step, OX_U64, "a step");
    if (!step)
      return;
    if (step->type != OX_U64) {
      ERR(S, n->step->loc, "step_by takes a usize, found %s", oxi_type_name(step->type));
      return;
    }
    if (step->op == OXI_CONST && step->imm == 0) {
      ERR(S, n->step->loc, "step_by(0) would never advance the loop");
      return;
    }
  }
  /* for i in lo..hi: the loop counter is a slot; `i` inside is an immutable copy */
  int slot = oxi_slot_new(S->m, S->k, t);
  oxs_var_set(S, slot, lo);
  oxi_block *head = oxs_new_block(S), *body = oxs_new_block(S), *latch = oxs_new_block(S), *done = oxs_new_block(S);
  oxs_br(S, head);
  oxs_set_block(S, head);
  oxi_instr *iv = oxs_var_get(S, slot);
  oxs_condbr(S, oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, iv, hi), body, done);
  oxs_set_block(S, body);
  int saved = S->nbinds;
  binding *b = oxs_bind(S, B_VALUE, n->name, n->loc);
  b->v = oxs_var_get(S, slot);
  b->type = t;
  oxs_count_loop(S, n->loc);
  loop_body(S, n->body, done, latch);
  oxs_unbind_to(S, saved);
  oxs_br(S, latch);
  oxs_set_block(S, latch);
  /* i += step while i + step < hi. The distance hi - i is taken in 64 bits
   * (exact as unsigned, since i < hi), so a step larger than the type's range
   * ends the loop instead of being truncated or wrapping. A zero step (not a
   * constant: that is a compile error) ends the loop after one iteration,
   * where Rust would panic. */
  oxi_type wt = oxi_is_signed(t) ? OX_I64 : OX_U64;
  oxi_instr *cur = oxs_var_get(S, slot);
  oxi_instr *cur64 = oxs_cast_to(S, cur, wt);
  oxi_instr *rem = oxs_cast_to(S, oxs_op2(S, OXI_BIN, OXI_SUB, wt, oxs_cast_to(S, hi, wt), cur64), OX_U64);
  oxi_instr *inc = step ? step : oxs_const_int(S, OX_U64, 1);
  oxi_instr *stop = oxs_op2(S, OXI_CMP, OXI_GE, OX_BOOL, inc, rem);
  if (step)
    stop = oxs_op2(S, OXI_BIN, OXI_OR, OX_BOOL, stop,
               oxs_op2(S, OXI_CMP, OXI_EQ, OX_BOOL, inc, oxs_const_int(S, OX_U64, 0)));
  oxi_block *store = oxs_new_block(S);
  oxs_condbr(S, stop, done, store);
  oxs_set_block(S, store);
  oxs_var_set(S, slot, oxs_cast_to(S, oxs_op2(S, OXI_BIN, OXI_ADD, wt, cur64, oxs_cast_to(S, inc, wt)), t));
  oxs_br(S, head);
  oxs_set_block(S, done);
}

static void stmt_at(sema *S, const oxf_node *n);

/* Lowers statement `n`; the instructions made for it carry its location. */
void oxs_stmt(sema *S, const oxf_node *n) {
  if (S->too_big)
    return;
  oxb_loc outer = S->at;
  S->at = n->loc;
  stmt_at(S, n);
  S->at = outer;
}

static void stmt_at(sema *S, const oxf_node *n) {
  oxs_ensure_open(S);
  switch (n->kind) {
  case OXF_LET: let_stmt(S, n); return;
  case OXF_ASSIGN: assign(S, n); return;
  case OXF_EXPR: oxs_expr(S, n->lhs, OXI_VOID); return;
  case OXF_WHILE: {
    oxi_block *head = oxs_new_block(S), *body = oxs_new_block(S), *done = oxs_new_block(S);
    oxs_br(S, head);
    oxs_set_block(S, head);
    oxi_instr *c = oxs_scalar_expr(S, n->cond, OX_BOOL, "a condition");
    if (c && c->type != OX_BOOL) {
      ERR(S, n->cond->loc, "a condition must be bool, found %s", oxi_type_name(c->type));
      c = NULL;
    }
    oxs_condbr(S, c ? c : oxs_const_int(S, OX_BOOL, 0), body, done);
    oxs_set_block(S, body);
    oxs_count_loop(S, n->loc);
    loop_body(S, n->body, done, head);
    oxs_br(S, head);
    oxs_set_block(S, done);
    return;
  }
  case OXF_LOOP: {
    oxi_block *body = oxs_new_block(S), *done = oxs_new_block(S);
    oxs_br(S, body);
    oxs_set_block(S, body);
    oxs_count_loop(S, n->loc);
    loop_body(S, n->body, done, body);
    oxs_br(S, body);
    oxs_set_block(S, done);
    return;
  }
  case OXF_FOR: for_stmt(S, n); return;
  case OXF_BREAK:
  case OXF_CONTINUE: {
    int base = S->nframes ? S->frames[S->nframes - 1].loop_base : 0;
    if (S->nloops <= base) {
      ERR(S, n->loc, "'%s' outside of a loop", n->kind == OXF_BREAK ? "break" : "continue");
      return;
    }
    loopctx *l = &S->loops[S->nloops - 1];
    oxs_br(S, n->kind == OXF_BREAK ? l->brk : l->cont);
    return;
  }
  case OXF_RETURN: {
    if (S->nframes) {
      frame *f = &S->frames[S->nframes - 1];
      if (f->nret) { /* a tuple of results (tuple.c) */
        if (n->lhs)
          oxs_return_tuple(S, f, oxs_expr(S, n->lhs, OXI_VOID), n->lhs->loc);
        else
          ERR(S, n->loc, "'%s' must return a tuple of %d values", f->fn->name, f->nret);
        oxs_br(S, f->exit);
        return;
      }
      if (n->lhs) {
        oxi_instr *v = oxs_scalar_expr(S, n->lhs, f->ret_type, "a return value");
        if (!v)
          return;
        if (f->ret_slot < 0) {
          ERR(S, n->lhs->loc, "'%s' returns nothing, but a value is returned", f->fn->name);
          return;
        }
        if (v->type != f->ret_type) {
          ERR(S, n->lhs->loc, "'%s' returns %s, found %s", f->fn->name, oxi_type_name(f->ret_type),
              oxi_type_name(v->type));
          return;
        }
        oxs_var_set(S, f->ret_slot, v);
      } else if (f->ret_slot >= 0) {
        ERR(S, n->loc, "'%s' must return a %s", f->fn->name, oxi_type_name(f->ret_type));
        return;
      }
      oxs_br(S, f->exit);
      return;
    }
    if (n->lhs) {
      ERR(S, n->lhs->loc, S->is_tile ? "tile kernels return nothing; results go to their "
                                       "&mut Tensor outputs"
                                     : "kernels return nothing; results go to their "
                                       "DisjointSlice outputs");
      return;
    }
    oxs_append(S, OXI_RET, OXI_VOID);
    return;
  }
  default: oxs_expr(S, n, OXI_VOID); return;
  }
}

