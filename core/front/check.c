/* check.c - the front end's entry: checks a program kernel by kernel
 * (oxf_check, oxf_check_spec): each #[kernel]'s signature and launch
 * contract here, its body through sema.c; #[tile] kernels through tile.c;
 * device functions no kernel calls in a throwaway kernel. Calls sema.c and
 * tile.c (through sema.h), which do not call it. */
#include "front/sema.h"

#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------- launch contract */

/* Lowers one `requires` expression to a host expression (evaluated at each
 * launch) and, alongside, to IR for an assumption the optimizer may use. */
static oxi_hexpr *host_expr(sema *S, const oxf_node *n, oxi_instr **ir) {
  oxi_hexpr *h = oxb_alloc(S->a, sizeof *h);
  *ir = NULL;
  switch (n->kind) {
  case OXF_INT:
    if (n->ival > INT64_MAX) {
      ERR(S, n->loc, "contract constants must fit in i64");
      return NULL;
    }
    h->kind = OXI_H_CONST;
    h->value = (int64_t)n->ival;
    *ir = oxs_const_int(S, OX_I64, n->ival);
    return h;
  case OXF_NAME: {
    for (int i = 0; i < S->k->params.len; i++) {
      oxi_param *p = S->k->params.items[i];
      if (strcmp(p->name, n->name))
        continue;
      if (p->kind != OXI_P_SCALAR || !oxi_is_int(p->dtype)) {
        ERR(S, n->loc, "'%s' is not an integer parameter; contracts relate slice lengths "
                       "(x.len()) and integer parameters", n->name);
        return NULL;
      }
      h->kind = OXI_H_PARAM;
      h->param = i;
      oxi_instr *pv = oxs_emit(S, OXI_PARAM, p->dtype);
      pv->index = i;
      *ir = oxs_cast_to(S, pv, OX_I64);
      return h;
    }
    ERR(S, n->loc, "unknown parameter '%s' in the launch contract", n->name);
    return NULL;
  }
  case OXF_METHOD:
    if (!strcmp(n->name, "len") && n->args.len == 0 && n->lhs->kind == OXF_NAME) {
      for (int i = 0; i < S->k->params.len; i++) {
        oxi_param *p = S->k->params.items[i];
        if (!strcmp(p->name, n->lhs->name) && p->kind != OXI_P_SCALAR) {
          h->kind = OXI_H_LEN;
          h->param = i;
          oxi_instr *len = oxs_emit(S, OXI_LEN, OX_U64);
          len->mem.kind = OXI_MEM_PARAM;
          len->mem.index = i;
          *ir = oxs_cast_to(S, len, OX_I64);
          return h;
        }
      }
    }
    ERR(S, n->loc, "in a contract, only 'x.len()' of a slice parameter is allowed");
    return NULL;
  case OXF_UNARY:
    if (n->op == OXF_OP_NOT) {
      h->kind = OXI_H_NOT;
      oxi_instr *a;
      h->a = host_expr(S, n->lhs, &a);
      if (!h->a)
        return NULL;
      if (a->type != OX_BOOL) {
        ERR(S, n->loc, "'!' negates a relation, not a number");
        return NULL;
      }
      *ir = oxs_op1(S, OXI_NOT, 0, OX_BOOL, a);
      return h;
    }
    break;
  case OXF_BINARY: {
    oxi_instr *a, *b;
    h->a = host_expr(S, n->lhs, &a);
    h->b = host_expr(S, n->rhs, &b);
    if (!h->a || !h->b)
      return NULL;
    bool lbool = a->type == OX_BOOL, rbool = b->type == OX_BOOL;
    if (n->op == OXF_OP_LAND || n->op == OXF_OP_LOR) {
      if (!lbool || !rbool) {
        ERR(S, n->loc, "'%s' joins relations", oxf_op_name(n->op));
        return NULL;
      }
      h->kind = n->op == OXF_OP_LAND ? OXI_H_AND : OXI_H_OR;
      *ir = oxs_op2(S, OXI_BIN, n->op == OXF_OP_LAND ? OXI_AND : OXI_OR, OX_BOOL, a, b);
      return h;
    }
    if (lbool || rbool) {
      ERR(S, n->loc, "'%s' needs numbers on both sides", oxf_op_name(n->op));
      return NULL;
    }
    if (n->op >= OXF_OP_EQ && n->op <= OXF_OP_GE) {
      h->kind = OXI_H_CMP;
      h->sub = n->op - OXF_OP_EQ;
      *ir = oxs_op2(S, OXI_CMP, h->sub, OX_BOOL, a, b);
      return h;
    }
    if (n->op >= OXF_OP_ADD && n->op <= OXF_OP_REM) {
      h->kind = OXI_H_BIN;
      static const int map[] = {0, OXI_ADD, OXI_SUB, OXI_MUL, OXI_DIV, OXI_REM};
      h->sub = map[n->op];
      /* division by a zero the host refuses; the IR form only matters when the
       * relation held, so a wrapping op is fine */
      *ir = oxs_op2(S, OXI_BIN, h->sub, OX_I64, a, b);
      return h;
    }
    break;
  }
  default: break;
  }
  ERR(S, n->loc, "unsupported expression in a launch contract; use x.len(), integer parameters, "
                 "integers, + - * / %%, comparisons, && || !");
  return NULL;
}

/* Records len(x) >= len(y) facts for bounds-check proofs, from a relation
 * that holds whenever the launch runs: only at the top of a `requires` entry
 * or under &&, never under || or !. */
static void record_relations(sema *S, const oxi_hexpr *h) {
  if (h->kind == OXI_H_AND) {
    record_relations(S, h->a);
    record_relations(S, h->b);
    return;
  }
  if (h->kind != OXI_H_CMP || h->a->kind != OXI_H_LEN || h->b->kind != OXI_H_LEN || S->nrel >= 30)
    return;
  int x = h->a->param, y = h->b->param;
  if (h->sub == OXI_GE || h->sub == OXI_GT || h->sub == OXI_EQ) {
    S->rel_ge[S->nrel][0] = x;
    S->rel_ge[S->nrel++][1] = y;
  }
  if (h->sub == OXI_LE || h->sub == OXI_LT || h->sub == OXI_EQ) {
    S->rel_ge[S->nrel][0] = y;
    S->rel_ge[S->nrel++][1] = x;
  }
}

static void contract(sema *S, const oxf_fn *fn) {
  if (!fn->has_contract)
    return;
  if (!fn->is_kernel)
    ERR(S, fn->contract_loc, "launch_contract applies to #[kernel] functions only");
  if (fn->block[0]) {
    int64_t total = 1;
    for (int i = 0; i < 3; i++) {
      int64_t b = fn->block[i] ? fn->block[i] : 1;
      if (b <= 0 || b > 1024) {
        ERR(S, fn->contract_loc, "block dimensions must be 1..1024, found %lld", (long long)b);
        return;
      }
      total *= b;
      S->k->block[i] = (int)b;
    }
    if (total > 1024) {
      ERR(S, fn->contract_loc, "a block holds at most 1024 threads; (%lld, %lld, %lld) has %lld",
          (long long)fn->block[0], (long long)S->k->block[1], (long long)S->k->block[2],
          (long long)total);
      S->k->block[0] = 0;
    }
  }
  const oxb_source *src = S->d->src;
  for (int i = 0; i < fn->requires.len; i++) {
    const oxf_node *rn = fn->requires.items[i];
    oxi_instr *ir;
    oxi_hexpr *h = host_expr(S, rn, &ir);
    if (!h)
      continue;
    if (!ir || ir->type != OX_BOOL) {
      ERR(S, rn->loc, "a 'requires' entry must be a relation such as 'a.len() >= c.len()'");
      continue;
    }
    oxi_requires *r = oxb_alloc(S->a, sizeof *r);
    r->expr = h;
    /* the text: from the start of the expression's leftmost token to the next ',' or ')' at depth 0 */
    const oxf_node *left = rn;
    while (left->lhs && (left->kind == OXF_BINARY || left->kind == OXF_METHOD))
      left = left->lhs;
    r->line = left->loc.line;
    r->col = left->loc.col;
    int start = left->loc.offset, end = start, depth = 0;
    while (src && end < (int)src->len) {
      char c = src->text[end];
      if (c == '(')
        depth++;
      if (c == ')' && depth-- == 0)
        break;
      if (c == ',' && depth == 0)
        break;
      end++;
    }
    r->text = src ? oxb_strndup(S->a, src->text + start, (size_t)(end - start)) : "requires";
    oxb_vec_push(S->a, &S->k->requires, r);
    oxs_op1(S, OXI_ASSUME, 0, OXI_VOID, ir);
    record_relations(S, h);
  }
}

/* --------------------------------------------------------------- kernels */

static void check_kernel(sema *S, const oxf_fn *fn) {
  oxi_kernel *k = oxi_kernel_new(S->m, fn->name);
  k->line = fn->loc.line;
  k->col = fn->loc.col;
  k->is_unsafe = fn->is_unsafe;
  int errors_before = S->d->errors;
  oxs_begin(S, fn, k); /* unsafe kernels still check reads outside unsafe {} blocks */
  S->cur = oxi_block_new(S->m, S->k);
  if (fn->ret && fn->ret->kind != OXF_TY_UNIT)
    ERR(S, fn->ret->loc, "kernels return nothing; results go to their DisjointSlice outputs");
  for (int i = 0; i < fn->params.len; i++) {
    const oxf_param *p = fn->params.items[i];
    if (!p->type)
      continue;
    oxs_check_param_name(S, fn, i);
    oxi_param *ip = oxb_alloc(S->a, sizeof *ip);
    ip->name = p->name;
    ip->dtype = p->type->elem;
    oxf_tykind kind = p->type->kind;
    if (kind == OXF_TY_SCALAR || kind == OXF_TY_SLICE || kind == OXF_TY_MUTSLICE ||
        kind == OXF_TY_ATOMIC || kind == OXF_TY_DISJOINT) /* the others are refused below */
      oxs_check_param_dtype(S, p);
    switch (p->type->kind) {
    case OXF_TY_SCALAR: ip->kind = OXI_P_SCALAR; break;
    case OXF_TY_SLICE: ip->kind = OXI_P_SLICE; break;
    case OXF_TY_ATOMIC: ip->kind = OXI_P_ATOMIC; break;
    case OXF_TY_DISJOINT: ip->kind = OXI_P_DISJOINT; break;
    case OXF_TY_MUTSLICE:
      ip->kind = OXI_P_MUTSLICE;
      if (!fn->is_unsafe)
        ERR(S, p->loc, "'&mut [%s]' parameters are allowed only in 'unsafe fn' kernels: threads "
                       "could race on it; use DisjointSlice<%s> for per-thread outputs",
            ox_dtype_name(p->type->elem), ox_dtype_name(p->type->elem));
      break;
    default:
      if (p->type->kind == OXF_TY_TENSOR || p->type->kind == OXF_TY_MUTTENSOR ||
          p->type->kind == OXF_TY_ATOMICTENSOR)
        ERR(S, p->loc, "Tensor parameters belong to #[tile] kernels; a #[kernel] takes "
                       "scalars, &[T], &mut [T], &[Atomic<T>] or DisjointSlice<T>");
      else
        ERR(S, p->loc, "kernel parameters are scalars, &[T], &mut [T], &[Atomic<T>] or "
                       "DisjointSlice<T>");
      ip->kind = OXI_P_SCALAR;
      break;
    }
    oxb_vec_push(S->a, &k->params, ip);
    binding *b;
    if (ip->kind == OXI_P_SCALAR) {
      b = oxs_bind(S, B_VALUE, p->name, p->loc);
      oxi_instr *pv = oxs_emit(S, OXI_PARAM, ip->dtype);
      pv->index = k->params.len - 1;
      b->v = pv;
      b->type = ip->dtype;
    } else {
      b = oxs_bind(S, B_MEM, p->name, p->loc);
      b->mem.kind = OXI_MEM_PARAM;
      b->mem.index = k->params.len - 1;
      b->mkind = p->type->kind;
      b->type = ip->dtype;
    }
  }
  if (S->d->errors > errors_before) /* a bad signature: the body's errors would mislead */
    return;
  contract(S, fn);
  val v = oxs_block_expr(S, fn->body, OXI_VOID);
  if (v.k == V_SCALAR)
    ERR(S, fn->body->value->loc, "kernels return nothing; end the expression with ';'");
  if (!oxi_terminator(S->cur))
    oxs_emit(S, OXI_RET, OXI_VOID);
}

/* Checks a device function that no kernel calls, as if called with fresh
 * arguments, in a kernel that is dropped afterwards. */
static void check_alone(sema *S, const oxf_fn *fn) {
  oxi_kernel *k = oxi_kernel_new(S->m, fn->name);
  oxs_begin(S, fn, k);
  S->cur = oxi_block_new(S->m, S->k);
  binding *argb[64];
  bool ok = fn->params.len <= 64;
  for (int i = 0; ok && i < fn->params.len; i++) {
    const oxf_param *p = fn->params.items[i];
    if (!p->type) {
      ok = false;
      break;
    }
    binding *b = oxb_alloc(S->a, sizeof *b);
    b->name = p->name;
    b->loc = p->loc;
    b->type = p->type->elem;
    oxi_param *ip = oxb_alloc(S->a, sizeof *ip);
    ip->name = p->name;
    ip->dtype = p->type->elem;
    if (p->type->kind == OXF_TY_SCALAR) {
      ip->kind = OXI_P_SCALAR;
      oxb_vec_push(S->a, &k->params, ip);
      b->kind = B_VALUE;
      b->v = oxs_emit(S, OXI_PARAM, ip->dtype);
      b->v->index = k->params.len - 1;
    } else if (p->type->kind == OXF_TY_SLICE) {
      ip->kind = OXI_P_SLICE;
      oxb_vec_push(S->a, &k->params, ip);
      b->kind = B_MEM;
      b->mkind = OXF_TY_SLICE;
      b->mem.kind = OXI_MEM_PARAM;
      b->mem.index = k->params.len - 1;
    } else if (p->type->kind == OXF_TY_SHARED && p->type->count > 0) {
      oxi_shared *sh = oxb_alloc(S->a, sizeof *sh);
      sh->dtype = p->type->elem;
      sh->count = p->type->count;
      oxb_vec_push(S->a, &k->shared, sh);
      b->kind = B_MEM;
      b->mkind = OXF_TY_SHARED;
      b->mem.kind = OXI_MEM_SHARED;
      b->mem.index = k->shared.len - 1;
    } else {
      ERR(S, p->loc, "device function parameters must be scalars, &[T] or SharedArray<T, N>; "
                     "outputs are written in the kernel itself");
      ok = false;
    }
    argb[i] = b;
  }
  if (ok) {
    if (fn->ret && fn->ret->kind != OXF_TY_SCALAR && fn->ret->kind != OXF_TY_UNIT && fn->ret->kind != OXF_TY_TUPLE)
      ERR(S, fn->ret->loc, "device functions return a scalar, a tuple of scalars, or nothing");
    else
      oxs_inline_body(S, fn, argb, fn->loc);
  }
  S->m->kernels.len--; /* drop the stand-in kernel */
}

/* fn's placeholder generics (oxf_generic_placeholder), in `a`. */
static int64_t *placeholders(oxb_arena *a, const oxf_fn *fn) {
  int64_t *gens = oxb_alloc(a, sizeof(int64_t) * (size_t)(fn->generics.len + 1));
  for (int g = 0; g < fn->generics.len; g++)
    gens[g] = oxf_generic_placeholder(fn, g);
  return gens;
}

/* Each type generic must be bound where fn is used: a kernel's by the dtype
 * of a tensor or slice argument of the launch, a device function's by its
 * arguments at each call. */
static void check_type_generics(sema *S, const oxf_fn *fn) {
  bool kernel = fn->is_kernel || fn->is_tile;
  if (fn->ntypes && fn->generics.len > OXF_MAX_GENERICS)
    ERR(S, fn->loc, "'%s' has more than %d generics", fn->name, OXF_MAX_GENERICS);
  for (int g = 0; g < fn->generics.len; g++) {
    if (!oxf_is_type_generic(fn, g))
      continue;
    bool bound = false;
    for (int i = 0; i < fn->params.len && !bound; i++) {
      const oxf_typeexpr *t = ((const oxf_param *)fn->params.items[i])->type;
      bound = t && t->tvar == g + 1 && (!kernel || t->kind != OXF_TY_SCALAR);
    }
    if (!bound)
      ERR(S, ((const oxf_typeexpr *)fn->generic_types.items[g])->loc,
          kernel ? "type generic '%s' must be the element type of a %s parameter: the launch takes "
                   "it from that argument's dtype"
                 : "type generic '%s' must be the type of a parameter: each call takes it from "
                   "that argument",
          (const char *)fn->generics.items[g], fn->is_tile ? "tensor" : "slice");
  }
}

static void sema_init(sema *S, oxb_arena *a, oxb_diags *d, const oxf_program *p, oxi_module *m) {
  S->stmt = oxs_stmt;
  S->tile_call = oxs_tile_call;
  S->tile_method = oxs_tile_method;
  S->rng_call = oxs_rng_call;
  S->local_array = oxs_local_array;
  S->tuple = oxs_tuple_expr;
  S->call_fn = oxs_call_fn;
  S->tile_unify = oxs_tile_unify;
  S->a = a;
  S->d = d;
  S->prog = p;
  S->m = m;
}

bool oxf_check(oxb_arena *a, oxb_diags *d, const oxf_program *p, oxi_module *m) {
  sema S = {0};
  sema_init(&S, a, d, p, m);
  int kernels = 0;
  for (int i = 0; i < p->fns.len; i++) {
    const oxf_fn *fn = p->fns.items[i];
    for (int j = 0; j < i; j++)
      if (!strcmp(((oxf_fn *)p->fns.items[j])->name, fn->name))
        ERR(&S, fn->loc, "function '%s' is defined twice", fn->name);
    check_type_generics(&S, fn);
    if (fn->is_tile && fn->is_kernel) {
      kernels++;
      ERR(&S, fn->loc, "'%s' is marked both #[kernel] and #[tile]; a kernel is one or the other",
          fn->name);
      continue;
    }
    if (fn->is_tile && fn->has_contract)
      ERR(&S, fn->contract_loc, "launch_contract applies to #[kernel] functions only (a tile "
                                "kernel's grid is its output's partition)");
    if (fn->is_tile || (fn->is_kernel && fn->ntypes)) {
      /* checked with placeholder generics into a module of its own, dropped:
       * generic kernels are lowered per specialization (oxf_check_spec) */
      kernels++;
      int64_t *gens = placeholders(a, fn);
      const oxf_fn *inst = oxf_instantiate(a, fn, gens);
      oxi_module scratch = {a, m->filename, {0}};
      S.m = &scratch;
      if (fn->is_tile)
        oxs_tile_kernel(&S, inst, gens);
      else
        check_kernel(&S, inst);
      S.m = m;
      continue;
    }
    if (!fn->is_kernel) {
      if (fn->has_contract)
        ERR(&S, fn->contract_loc, "launch_contract applies to #[kernel] functions only");
      continue;
    }
    kernels++;
    check_kernel(&S, fn);
  }
  /* device functions no kernel calls are still checked: in a throwaway kernel
   * whose parameters stand in for theirs */
  for (int i = 0; i < p->fns.len && !d->errors; i++) {
    const oxf_fn *fn = p->fns.items[i];
    bool called = fn->is_kernel || fn->is_tile;
    for (int j = 0; j < S.ncalled; j++)
      called |= S.called[j] == fn;
    if (!called)
      check_alone(&S, oxf_instantiate(a, fn, placeholders(a, fn)));
  }
  if (!kernels && !d->errors) {
    oxb_loc none = {0, 0, 0};
    oxb_error_at(d, none, "no #[kernel] function in this source");
  }
  return d->errors == 0;
}

bool oxf_check_spec(oxb_arena *a, oxb_diags *d, const oxf_program *p, const oxf_fn *fn,
                    const int64_t *generics, oxi_module *m) {
  sema S = {0};
  sema_init(&S, a, d, p, m);
  int before = d->errors;
  if (!fn->is_tile && !(fn->is_kernel && fn->ntypes)) {
    oxb_error_at(d, fn->loc, "'%s' is not a generic kernel (a #[tile] kernel, or a #[kernel] with "
                             "type generics)", fn->name);
    return false;
  }
  if (!generics)
    generics = placeholders(a, fn);
  for (int g = 0; g < fn->generics.len; g++) {
    const oxf_typeexpr *t = fn->generic_types.items[g];
    if (t->kind == OXF_TY_TYPEPARAM &&
        (generics[g] < 1 || generics[g] > OX_F8E5M2 + 1 || !oxf_bound_admits(t->bound, (ox_dtype)(generics[g] - 1))))
      ERR(&S, t->loc, "type generic '%s: %s' cannot be %s", (const char *)fn->generics.items[g],
          oxf_bound_name(t->bound), generics[g] >= 1 && generics[g] <= OX_F8E5M2 + 1
          ? ox_dtype_name((ox_dtype)(generics[g] - 1)) : "that (not a dtype)");
  }
  if (d->errors != before)
    return false;
  const oxf_fn *inst = oxf_instantiate(a, fn, generics);
  if (fn->is_tile)
    oxs_tile_kernel(&S, inst, generics);
  else
    check_kernel(&S, inst);
  return d->errors == before;
}
