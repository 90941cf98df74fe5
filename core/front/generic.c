/* generic.c - type generics (`<T: Float>`): what a bound admits, and a
 * function's copy with its type generics replaced by dtypes.
 *
 * A generic kernel is checked and lowered once per binding of its generics,
 * as tile kernels are per tile size (oxf_check_spec). Rather than teach every
 * rule of the checker about type variables, the binding is applied to the
 * syntax tree: the copy names f16 wherever the source wrote T, and the checker
 * sees an ordinary function. So a kernel over T is exactly as correct, and as
 * fast, as the same kernel written for each dtype by hand. */
#include "front/front.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

bool oxf_is_type_generic(const oxf_fn *fn, int g) {
  assert(g >= 0 && g < fn->generic_types.len);
  return ((const oxf_typeexpr *)fn->generic_types.items[g])->kind == OXF_TY_TYPEPARAM;
}

int64_t oxf_generic_placeholder(const oxf_fn *fn, int g) {
  if (!oxf_is_type_generic(fn, g))
    return OXF_TILE_PLACEHOLDER;
  const oxf_typeexpr *t = fn->generic_types.items[g];
  return (int64_t)(t->bound == OXF_BOUND_INT ? OX_I32 : OX_F32) + 1;
}

bool oxf_bound_admits(oxf_bound bound, ox_dtype t) {
  bool fl = t == OX_F16 || t == OX_BF16 || t == OX_F32 || t == OX_F64;
  bool in = t >= OX_I8 && t <= OX_U64;
  return bound == OXF_BOUND_FLOAT ? fl : bound == OXF_BOUND_INT ? in : fl || in;
}

const char *oxf_bound_name(oxf_bound bound) {
  return bound == OXF_BOUND_FLOAT ? "Float" : bound == OXF_BOUND_INT ? "Int" : "Num";
}

typedef struct copier {
  oxb_arena *a;
  const oxf_fn *fn;
  const int64_t *gen;
} copier;

/* A path that starts with a type generic (`T::MAX`) names the dtype's
 * (`f16::MAX`): the checker resolves those. */
static const char *copy_name(const copier *c, const char *name) {
  if (!name)
    return NULL;
  const char *sep = strstr(name, "::");
  if (!sep)
    return name;
  for (int g = 0; g < c->fn->generics.len; g++) {
    const char *gn = c->fn->generics.items[g];
    if (oxf_is_type_generic(c->fn, g) && strlen(gn) == (size_t)(sep - name) && !strncmp(name, gn, strlen(gn))) {
      const char *dt = ox_dtype_name((ox_dtype)(c->gen[g] - 1));
      size_t n = strlen(dt) + strlen(sep) + 1;
      char *out = oxb_alloc(c->a, n);
      snprintf(out, n, "%s%s", dt, sep);
      return out;
    }
  }
  return name;
}

static oxf_typeexpr *copy_type(const copier *c, const oxf_typeexpr *t) {
  if (t && t->kind == OXF_TY_TUPLE) { /* (T, u32): its items */
    oxf_typeexpr *u = oxb_alloc(c->a, sizeof *u);
    *u = *t;
    u->items = oxb_alloc(c->a, sizeof *u->items * (size_t)(t->nitems + 1));
    for (int i = 0; i < t->nitems; i++)
      u->items[i] = copy_type(c, t->items[i]);
    return u;
  }
  if (!t || !t->tvar)
    return (oxf_typeexpr *)t; /* shared: nothing in it changes */
  oxf_typeexpr *u = oxb_alloc(c->a, sizeof *u);
  *u = *t;
  u->elem = (ox_dtype)(c->gen[t->tvar - 1] - 1);
  u->tvar = 0;
  return u;
}

static oxf_node *copy_node(const copier *c, const oxf_node *n);

static oxb_vec copy_nodes(const copier *c, const oxb_vec *v) {
  oxb_vec out = {0};
  for (int i = 0; i < v->len; i++)
    oxb_vec_push(c->a, &out, copy_node(c, v->items[i]));
  return out;
}

/* The parser bounds the tree's depth, and so this recursion. */
static oxf_node *copy_node(const copier *c, const oxf_node *n) {
  if (!n)
    return NULL;
  oxf_node *m = oxb_alloc(c->a, sizeof *m);
  *m = *n;
  m->lhs = copy_node(c, n->lhs);
  m->rhs = copy_node(c, n->rhs);
  m->cond = copy_node(c, n->cond);
  m->then = copy_node(c, n->then);
  m->els = copy_node(c, n->els);
  m->body = copy_node(c, n->body);
  m->init = copy_node(c, n->init);
  m->step = copy_node(c, n->step);
  m->value = copy_node(c, n->value);
  m->args = copy_nodes(c, &n->args);
  m->gen = copy_nodes(c, &n->gen);
  m->type = copy_type(c, n->type);
  m->name = copy_name(c, n->name);
  return m;
}

const oxf_fn *oxf_instantiate(oxb_arena *a, const oxf_fn *fn, const int64_t *generics) {
  if (!fn->ntypes)
    return fn;
  copier c = {a, fn, generics};
  for (int g = 0; g < fn->generics.len; g++)
    assert(!oxf_is_type_generic(fn, g) ||
           oxf_bound_admits(((const oxf_typeexpr *)fn->generic_types.items[g])->bound,
                            (ox_dtype)(generics[g] - 1)));
  oxf_fn *f = oxb_alloc(a, sizeof *f);
  *f = *fn;
  f->params = (oxb_vec){0};
  for (int i = 0; i < fn->params.len; i++) {
    const oxf_param *p = fn->params.items[i];
    oxf_param *q = oxb_alloc(a, sizeof *q);
    *q = *p;
    q->type = copy_type(&c, p->type);
    oxb_vec_push(a, &f->params, q);
  }
  f->ret = copy_type(&c, fn->ret);
  f->body = copy_node(&c, fn->body);
  f->requires = copy_nodes(&c, &fn->requires);
  return f;
}
