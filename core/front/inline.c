/* inline.c - calls of device functions (docs/language.md section 9): each
 * call inlines the function's body, its parameters bound to the arguments
 * (a generic function's type generics taken from them, and the body
 * instantiated for those types: generic.c), its result in a slot (or one a
 * value of a tuple: tuple.c). The IR has no calls.
 *
 * Reached from sema.c through sema.call_fn (set by check.c), so that the two
 * files do not call each other. */
#include "front/sema.h"

static const val VERR = {V_ERR, NULL, NULL, NULL};
static const val VUNIT = {V_UNIT, NULL, NULL, NULL};

static val inline_body(sema *S, const oxf_fn *fn, const oxf_fn *inst, binding **argb, oxb_loc call);

/* Parameter p's element type, its type generic's binding in gen where it has one. */
static ox_dtype param_elem(const oxf_param *p, const int64_t *gen) {
  return p->type->tvar && gen[p->type->tvar - 1] ? (ox_dtype)(gen[p->type->tvar - 1] - 1) : p->type->elem;
}

/* Binds p's type generic to t, the type of argument `an` of a call of fn, if
 * the generic's bound admits it. */
static bool bind_type(sema *S, const oxf_node *an, const oxf_fn *fn, const oxf_param *p, oxi_type t,
                      int64_t *gen) {
  int g = p->type->tvar - 1;
  const oxf_typeexpr *decl = fn->generic_types.items[g];
  if (!oxf_bound_admits(decl->bound, (ox_dtype)t)) {
    ERR(S, an->loc, "argument '%s' of '%s' is %s, which '%s: %s' does not admit", p->name, fn->name,
        oxi_type_name(t), (const char *)fn->generics.items[g], oxf_bound_name(decl->bound));
    return false;
  }
  gen[g] = (int64_t)t + 1;
  return true;
}

/* Inlines device function `fn` at this call. */
val oxs_call_fn(sema *S, const oxf_node *n, const oxf_fn *fn, oxi_type hint) {
  for (int i = 0; i < S->nframes; i++)
    if (S->frames[i].fn == fn) {
      ERR(S, n->loc, "recursive call of '%s': device functions are inlined and cannot recurse",
          fn->name);
      return VERR;
    }
  if (S->nframes == (int)OXB_COUNT(S->frames)) {
    ERR(S, n->loc, "device functions nested too deeply: calls inside calls are inlined at most "
                   "%d deep", OXF_MAX_INLINE_DEPTH);
    return VERR;
  }
  if (++S->ncalls > OXF_MAX_INLINED_CALLS) {
    oxs_size_error(S, n->loc, "%s '%s' inlines more than %d device-function calls, the compiler's "
                          "limit (each call is a copy of the function's body)",
               oxs_unit_name(S), S->kfn->name, OXF_MAX_INLINED_CALLS);
    return VERR;
  }
  if (n->args.len != fn->params.len) {
    ERR(S, n->loc, "'%s' takes %d argument%s, found %d", fn->name, fn->params.len,
        fn->params.len == 1 ? "" : "s", n->args.len);
    return VERR;
  }
  /* evaluate arguments in the caller's scope */
  binding *argb[64];
  if (fn->params.len > 64) {
    ERR(S, n->loc, "too many parameters");
    return VERR;
  }
  /* a generic function's type generics take the types of the arguments (the
     first argument of each sets it; the rest must agree) */
  int64_t gen[OXF_MAX_GENERICS] = {0};
  bool ok = true;
  for (int i = 0; i < fn->params.len; i++) {
    const oxf_param *p = fn->params.items[i];
    const oxf_node *an = n->args.items[i];
    argb[i] = NULL;
    if (!p->type) {
      ok = false;
      continue;
    }
    int tv = p->type->tvar;
    if (p->type->kind == OXF_TY_SCALAR) {
      oxi_instr *v = oxs_scalar_expr(S, an, tv && !gen[tv - 1] ? OXI_VOID : param_elem(p, gen), "an argument");
      if (!v) {
        ok = false;
        continue;
      }
      if (tv && !gen[tv - 1] && !bind_type(S, an, fn, p, v->type, gen)) {
        ok = false;
        continue;
      }
      if (v->type != (oxi_type)param_elem(p, gen)) {
        ERR(S, an->loc, "argument '%s' of '%s' is %s, found %s", p->name, fn->name,
            ox_dtype_name(param_elem(p, gen)), oxi_type_name(v->type));
        ok = false;
        continue;
      }
      binding *b = oxb_alloc(S->a, sizeof *b);
      b->kind = B_VALUE;
      b->name = p->name;
      b->type = v->type;
      b->v = v;
      argb[i] = b;
    } else if (p->type->kind == OXF_TY_SLICE || p->type->kind == OXF_TY_SHARED) {
      val v = oxs_expr(S, an, OXI_VOID);
      if (v.k == V_ERR) {
        ok = false;
        continue;
      }
      if (tv && !gen[tv - 1] && v.k == V_MEM && !bind_type(S, an, fn, p, v.b->type, gen)) {
        ok = false;
        continue;
      }
      bool fits = v.k == V_MEM && v.b->type == (oxi_type)param_elem(p, gen) &&
                  (p->type->kind != OXF_TY_SHARED ||
                   ((oxi_shared *)S->k->shared.items[v.b->mem.index])->count == p->type->count) &&
                  (p->type->kind == OXF_TY_SLICE
                       ? (v.b->mkind == OXF_TY_SLICE || v.b->mkind == OXF_TY_MUTSLICE)
                       : v.b->mkind == OXF_TY_SHARED);
      if (!fits) {
        ERR(S, an->loc, "argument '%s' of '%s' must be %s of %s%s, found %s", p->name, fn->name,
            p->type->kind == OXF_TY_SLICE ? "a slice" : "a shared array",
            ox_dtype_name(param_elem(p, gen)),
            p->type->kind == OXF_TY_SHARED ? " with the declared length" : "", oxs_vdesc(S, v));
        ok = false;
        continue;
      }
      binding *b = oxb_alloc(S->a, sizeof *b);
      *b = *v.b;
      b->name = p->name;
      if (p->type->kind == OXF_TY_SLICE)
        b->mkind = OXF_TY_SLICE; /* passed as &[T]: read-only inside */
      argb[i] = b;
    } else {
      val v = oxs_expr(S, an, OXI_VOID);
      if (v.k == V_WITNESS)
        ERR(S, an->loc, "a thread-index witness cannot be passed to a function; pass '%s' "
                        "(the DisjointSlice write stays in the kernel)", "i.get()");
      else if (v.k != V_ERR)
        ERR(S, p->loc, "device function parameters must be scalars, &[T] or SharedArray; "
                       "outputs are written in the kernel itself");
      ok = false;
    }
  }
  if (!ok)
    return VERR;
  return inline_body(S, fn, fn->ntypes ? oxf_instantiate(S->a, fn, gen) : fn, argb, n->loc);
}

/* Lowers the body of device function `fn` in place (of `inst`, its instance
 * for the call's types, when it is generic), its parameters bound to `argb`,
 * for the call at `call`; returns its value. */
static val inline_body(sema *S, const oxf_fn *fn, const oxf_fn *inst, binding **argb, oxb_loc call) {
  for (int i = 0; i < S->ncalled; i++)
    if (S->called[i] == fn)
      goto known;
  if (S->ncalled < (int)OXB_COUNT(S->called))
    S->called[S->ncalled++] = fn;
known:;
  frame *f = &S->frames[S->nframes];
  f->fn = fn;
  f->call = call;
  f->exit = oxs_new_block(S);
  f->ret_type = inst->ret && inst->ret->kind == OXF_TY_SCALAR ? inst->ret->elem : OXI_VOID;
  f->nret = 0;
  if (inst->ret && inst->ret->kind == OXF_TY_TUPLE) { /* several results, a slot each (tuple.c) */
    if (!oxs_tuple_frame(S, f, inst->ret))
      return VERR;
  } else if (inst->ret && inst->ret->kind != OXF_TY_SCALAR && inst->ret->kind != OXF_TY_UNIT) {
    ERR(S, inst->ret->loc, "device functions return a scalar, a tuple of scalars, or nothing");
    return VERR;
  }
  f->ret_slot = f->ret_type == OXI_VOID ? -1 : oxi_slot_new(S->m, S->k, f->ret_type);
  int saved_nbinds = S->nbinds, saved_facts = S->nfacts, saved_loops = S->nloops;
  f->base = S->nbinds;
  f->loop_base = S->nloops;
  S->nframes++;
  for (int i = 0; i < fn->params.len; i++) {
    binding *b = oxs_bind(S, argb[i]->kind, argb[i]->name, argb[i]->loc), keep = *b;
    *b = *argb[i];
    b->rec = keep.rec; /* its place on the stack stays */
    b->idx = keep.idx;
    b->shadow = keep.shadow;
  }
  val body = oxs_block_expr(S, inst->body, f->ret_type);
  if (f->nret) {
    if (body.k == V_TUPLE || (inst->body->value && body.k != V_NEVER))
      oxs_return_tuple(S, f, body, inst->body->value ? inst->body->value->loc : fn->loc);
    else if (body.k != V_NEVER && body.k != V_ERR && !oxs_terminated(S))
      ERR(S, fn->loc, "'%s' must return its tuple on every path", fn->name);
  } else if (body.k == V_SCALAR && f->ret_slot >= 0) {
    if (body.v->type != f->ret_type)
      ERR(S, inst->body->value ? inst->body->value->loc : fn->loc, "'%s' returns %s, found %s",
          fn->name, oxi_type_name(f->ret_type), oxi_type_name(body.v->type));
    else
      oxs_var_set(S, f->ret_slot, body.v);
  } else if (f->ret_slot >= 0 && body.k != V_NEVER && body.k != V_ERR && !oxs_terminated(S)) {
    ERR(S, fn->loc, "'%s' must return a %s on every path", fn->name, oxi_type_name(f->ret_type));
  }
  oxs_br(S, f->exit);
  oxs_set_block(S, f->exit);
  S->nframes--;
  oxs_unbind_to(S, saved_nbinds);
  S->nfacts = saved_facts;
  S->nloops = saved_loops;
  if (f->nret)
    return oxs_tuple_result(S, f);
  if (f->ret_slot < 0)
    return VUNIT;
  return oxs_value(oxs_var_get(S, f->ret_slot));
}

/* recv.method(args) */

val oxs_inline_body(sema *S, const oxf_fn *fn, binding **argb, oxb_loc call) { return inline_body(S, fn, fn, argb, call); }
