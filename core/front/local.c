/* local.c - a thread's own arrays in SIMT kernels (docs/language.md section
 * 3): `let mut acc = [0.0f32; 16];` or `[a, b, c]`, indexed like slices and
 * written in place. Per-thread accumulators and small tables then need no
 * shared memory and no `unsafe`: an array belongs to one thread, so no
 * ownership rule applies to it, and its accesses are bounds-checked (LLVM
 * drops the checks a loop `for j in 0..16` makes redundant, and keeps the
 * array in registers when the loop is unrolled).
 *
 * Reached from sema.c through sema.local_array (set by check.c), so that the
 * two files do not call each other. */
#include "front/sema.h"

static const val VERR = {V_ERR, NULL, NULL, NULL};

/* Stores v into every element of local array `mem` (count n): a loop. */
static void fill(sema *S, oxi_mem mem, int64_t n, oxi_instr *v) {
  int slot = oxi_slot_new(S->m, S->k, OX_U64);
  oxs_var_set(S, slot, oxs_const_int(S, OX_U64, 0));
  oxi_block *head = oxs_new_block(S), *body = oxs_new_block(S), *done = oxs_new_block(S);
  oxs_br(S, head);
  oxs_set_block(S, head);
  oxi_instr *i = oxs_var_get(S, slot);
  oxs_condbr(S, oxs_op2(S, OXI_CMP, OXI_LT, OX_BOOL, i, oxs_const_int(S, OX_U64, (uint64_t)n)), body, done);
  oxs_set_block(S, body);
  oxi_instr *st = oxs_op2(S, OXI_STORE, 0, OXI_VOID, i, v);
  st->mem = mem;
  oxs_var_set(S, slot, oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, i, oxs_const_int(S, OX_U64, 1)));
  oxs_br(S, head);
  oxs_set_block(S, done);
}

val oxs_local_array(sema *S, const oxf_node *n, oxi_type hint) {
  if (S->is_tile) {
    ERR(S, n->loc, "an array '[..]' is written only as the sizes of x.partition([..]) and the "
                   "indices of .load([..])");
    return VERR;
  }
  bool repeat = n->op == 1;
  int64_t count = n->args.len;
  if (repeat) {
    const oxf_node *c = n->rhs;
    if (!c || c->kind != OXF_INT || (c->suffix && c->suffix - 1 != OX_U64)) {
      ERR(S, c ? c->loc : n->loc, "the length of '[v; n]' is an integer literal (a usize)");
      return VERR;
    }
    count = c->ival > (uint64_t)OXF_MAX_LOCAL_ELEMS ? OXF_MAX_LOCAL_ELEMS + 1 : (int64_t)c->ival;
  }
  if (count < 1 || count > OXF_MAX_LOCAL_ELEMS) {
    ERR(S, repeat ? n->rhs->loc : n->loc, "a thread's array holds 1 to %d elements, found %llu",
        OXF_MAX_LOCAL_ELEMS, repeat ? (unsigned long long)n->rhs->ival : (unsigned long long)count);
    return VERR;
  }
  /* the elements: the first sets the type (the hint, if any, types an untyped literal) */
  oxi_instr *first = oxs_scalar_expr(S, n->args.items[0], hint, "an array element");
  if (!first)
    return VERR;
  oxi_type t = first->type;
  int64_t bytes = count * (int64_t)ox_dtype_size((ox_dtype)t);
  if (S->local_bytes + bytes > OXF_MAX_LOCAL_BYTES) {
    ERR(S, n->loc, "%s '%s' keeps more than %d bytes in its threads' own arrays (this one: %lld); "
                   "use a SharedArray, or smaller arrays",
        oxs_unit_name(S), S->kfn->name, OXF_MAX_LOCAL_BYTES, (long long)bytes);
    return VERR;
  }
  S->local_bytes += bytes;
  oxi_shared *a = oxb_alloc(S->a, sizeof *a);
  a->dtype = (ox_dtype)t;
  a->count = count;
  oxb_vec_push(S->a, &S->k->locals, a);
  oxi_mem mem = {OXI_MEM_LOCAL, S->k->locals.len - 1};
  if (repeat) {
    fill(S, mem, count, first);
  } else {
    for (int64_t e = 0; e < count; e++) {
      oxi_instr *v = e ? oxs_scalar_expr(S, n->args.items[e], t, "an array element") : first;
      if (!v)
        return VERR;
      if (v->type != t) {
        ERR(S, ((oxf_node *)n->args.items[e])->loc, "array elements have one type: the first is %s, "
                                                     "this one %s", oxi_type_name(t), oxi_type_name(v->type));
        return VERR;
      }
      oxi_instr *st = oxs_op2(S, OXI_STORE, 0, OXI_VOID, oxs_const_int(S, OX_U64, (uint64_t)e), v);
      st->mem = mem;
    }
  }
  binding *b = oxs_bind(S, B_MEM, NULL, n->loc);
  b->mem = mem;
  b->mkind = OXF_TY_ARRAY;
  b->type = t;
  return (val){V_MEM, NULL, b, NULL};
}
