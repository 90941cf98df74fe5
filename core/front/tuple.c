/* tuple.c - tuples (docs/language.md section 4): `(a, b)`, `t.0`, `let (i,
 * mut j) = ...`, a device function that returns several values (`-> (f32,
 * u32)`), and `tile_id()` giving every axis's id at once. A tuple holds
 * scalars and tiles, and lives only in the compiler: its values are SSA values
 * (or slots, for a function's results), never memory.
 *
 * Reached from sema.c through sema.tuple (set by check.c), so that the two
 * files do not call each other. */
#include "front/sema.h"

#include <string.h>

static const val VERR = {V_ERR, NULL, NULL, NULL};

/* A tuple value: an unnamed binding (not in any scope) holds its values. */
val oxs_tuple_val(sema *S, const oxs_tuple *t) {
  binding *b = oxb_alloc(S->a, sizeof *b);
  b->kind = B_TUPLE;
  b->tuple = t;
  return (val){V_TUPLE, NULL, b, NULL};
}

/* (e0, e1, ...): each a scalar or a tile. */
static val make(sema *S, const oxf_node *n) {
  if (n->args.len > OXF_MAX_TUPLE) {
    ERR(S, n->loc, "a tuple holds at most %d values, found %d", OXF_MAX_TUPLE, n->args.len);
    return VERR;
  }
  oxs_tuple *t = oxb_alloc(S->a, sizeof *t);
  for (int i = 0; i < n->args.len; i++) {
    const oxf_node *e = n->args.items[i];
    val v = oxs_expr(S, e, OXI_VOID);
    if (v.k == V_ERR || v.k == V_NEVER)
      return v;
    if (v.k != V_SCALAR && v.k != V_TILE) {
      ERR(S, e->loc, "a tuple holds numbers, bools and tiles, found %s", oxs_vdesc(S, v));
      return VERR;
    }
    t->v[t->n++] = v.v;
  }
  return oxs_tuple_val(S, t);
}

val oxs_tuple_expr(sema *S, const oxf_node *n, oxi_type hint) {
  (void)hint;
  if (n->kind == OXF_TUPLE)
    return make(S, n);
  /* t.N */
  val v = oxs_expr(S, n->lhs, OXI_VOID);
  if (v.k == V_ERR)
    return v;
  if (v.k != V_TUPLE) {
    ERR(S, n->loc, "'.%llu' takes a value of a tuple; this is %s (Oxide has no structs or fields)",
        (unsigned long long)n->ival, oxs_vdesc(S, v));
    return VERR;
  }
  if (n->ival >= (uint64_t)v.b->tuple->n) {
    ERR(S, n->loc, "the tuple has %d values (.0 to .%d), not .%llu", v.b->tuple->n, v.b->tuple->n - 1,
        (unsigned long long)n->ival);
    return VERR;
  }
  return oxs_value(v.b->tuple->v[n->ival]);
}

void oxs_let_tuple(sema *S, const oxf_node *n, val v) {
  if (v.k != V_TUPLE) {
    ERR(S, n->init->loc, "'let (..) = ' takes a tuple, found %s", oxs_vdesc(S, v));
    for (int i = 0; i < n->args.len; i++)
      oxs_bind(S, B_VALUE, ((const oxf_node *)n->args.items[i])->name, n->loc)->poisoned = true;
    return;
  }
  if (n->name) { /* let t = (a, b): the tuple itself */
    if (n->is_mut)
      ERR(S, n->loc, "a tuple cannot be mutable; take its values apart: 'let (mut a, b) = ...'");
    binding *b = oxs_bind(S, B_TUPLE, n->name, n->loc);
    b->tuple = v.b->tuple;
    return;
  }
  if (n->args.len != v.b->tuple->n) {
    ERR(S, n->loc, "the pattern names %d values, and the tuple has %d", n->args.len, v.b->tuple->n);
    for (int i = 0; i < n->args.len; i++)
      oxs_bind(S, B_VALUE, ((const oxf_node *)n->args.items[i])->name, n->loc)->poisoned = true;
    return;
  }
  for (int i = 0; i < n->args.len; i++) {
    const oxf_node *p = n->args.items[i];
    oxi_instr *x = v.b->tuple->v[i];
    if (!strcmp(p->name, "_"))
      continue;
    binding *b = oxs_bind(S, p->is_mut ? B_SLOT : B_VALUE, p->name, p->loc);
    b->type = x->type;
    if (p->is_mut) {
      b->is_mut = true;
      b->tile = x->tshape;
      b->slot = oxi_slot_new(S->m, S->k, x->type);
      oxs_var_set(S, b->slot, x);
    } else {
      b->v = x;
    }
  }
}

bool oxs_tuple_frame(sema *S, frame *f, const oxf_typeexpr *t) {
  if (t->nitems > OXF_MAX_TUPLE) {
    ERR(S, t->loc, "a tuple holds at most %d values, found %d", OXF_MAX_TUPLE, t->nitems);
    return false;
  }
  for (int i = 0; i < t->nitems; i++)
    if (t->items[i]->kind != OXF_TY_SCALAR) {
      ERR(S, t->items[i]->loc, "a device function returns scalars, in a tuple or alone");
      return false;
    }
  f->nret = t->nitems;
  for (int i = 0; i < t->nitems; i++) {
    f->ret_types[i] = t->items[i]->elem;
    f->ret_slots[i] = oxi_slot_new(S->m, S->k, f->ret_types[i]);
  }
  return true;
}

void oxs_return_tuple(sema *S, frame *f, val v, oxb_loc at) {
  if (v.k == V_ERR || v.k == V_NEVER)
    return;
  if (v.k != V_TUPLE || v.b->tuple->n != f->nret) {
    ERR(S, at, "'%s' returns a tuple of %d values, found %s", f->fn->name, f->nret,
        v.k == V_TUPLE ? "another number of them" : oxs_vdesc(S, v));
    return;
  }
  for (int i = 0; i < f->nret; i++) {
    oxi_instr *x = v.b->tuple->v[i];
    if (x->tshape || x->type != f->ret_types[i]) {
      ERR(S, at, "value %d of the tuple '%s' returns is %s, found %s", i, f->fn->name,
          oxi_type_name(f->ret_types[i]), x->tshape ? "a tile" : oxi_type_name(x->type));
      return;
    }
    oxs_var_set(S, f->ret_slots[i], x);
  }
}

val oxs_tuple_result(sema *S, const frame *f) {
  oxs_tuple *t = oxb_alloc(S->a, sizeof *t);
  t->n = f->nret;
  for (int i = 0; i < f->nret; i++)
    t->v[i] = oxs_var_get(S, f->ret_slots[i]);
  return oxs_tuple_val(S, t);
}
