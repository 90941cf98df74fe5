/* tile_ops.c - tile sizes and shapes as the source writes them (for tile.c
 * too), and the tile built-ins added after tile.c had grown near the size of a
 * file: scans (cumsum, cumprod, cummax, cummin: OXI_T_SCAN), sorts and top-k
 * (OXI_T_SORT, and a slice of it), cat (reshapes, broadcasts and a select,
 * which every lowering has already), zeros and ones (splats). tile.c calls this
 * file; it calls only sema.c and build.c (sema.h), never tile.c. */
#include "front/sema.h"

#include <stdio.h>
#include <string.h>

static const val err = {.k = V_ERR};

static bool pow2(int64_t v) { return v >= 1 && (v & (v - 1)) == 0; }

oxi_tshape *oxs_new_shape(sema *S, int rank, const int64_t *dims) {
  oxi_tshape *s = oxb_alloc(S->a, sizeof *s);
  s->rank = rank;
  for (int d = 0; d < rank; d++)
    s->dims[d] = dims[d];
  return s;
}

static const oxf_node *arg(const oxf_node *n, int i) { return n->args.items[i]; }

static bool nargs(sema *S, const oxf_node *n, int lo, int hi, const char *what) {
  if (n->args.len >= lo && n->args.len <= hi)
    return true;
  if (lo == hi)
    ERR(S, n->loc, "'%s' takes %d argument%s, found %d", what, lo, lo == 1 ? "" : "s", n->args.len);
  else
    ERR(S, n->loc, "'%s' takes %d or %d arguments, found %d", what, lo, hi, n->args.len);
  return false;
}

/* An axis: an integer literal below the rank of shape s. */
static bool axis_arg(sema *S, const oxf_node *a, const oxi_tshape *s, const char *what, int *axis) {
  if (a->kind != OXF_INT) {
    ERR(S, a->loc, "the axis of %s must be an integer literal", what);
    return false;
  }
  if (a->ival >= (uint64_t)s->rank) {
    ERR(S, a->loc, "axis %llu is out of range for %s: '%s' has rank %d (axes 0..%d)", (unsigned long long)a->ival,
        what, oxs_shape_text(S, s), s->rank, s->rank - 1);
    return false;
  }
  *axis = (int)a->ival;
  return true;
}

bool oxs_const_size(sema *S, const oxf_node *e, int64_t *v, char *text, size_t n) {
  if (e->kind == OXF_INT) {
    *v = e->ival > ((uint64_t)1 << 40) ? -1 : (int64_t)e->ival;
    snprintf(text, n, "%llu", (unsigned long long)e->ival);
    return true;
  }
  binding *g = e->kind == OXF_NAME ? oxs_lookup(S, e->name) : NULL;
  if (g && g->is_generic) {
    *v = g->gval;
    snprintf(text, n, "%s = %lld", g->name, (long long)g->gval);
    return true;
  }
  if (e->kind == OXF_CAST)
    return oxs_const_size(S, e->lhs, v, text, n);
  if (e->kind == OXF_BINARY && e->op >= OXF_OP_ADD && e->op <= OXF_OP_SHR && e->op != OXF_OP_AND &&
      e->op != OXF_OP_OR && e->op != OXF_OP_XOR) {
    int64_t a, b;
    char ta[96], tb[96];
    if (!oxs_const_size(S, e->lhs, &a, ta, sizeof ta) || !oxs_const_size(S, e->rhs, &b, tb, sizeof tb))
      return false;
    bool bad = false;
    switch (e->op) {
    case OXF_OP_ADD: bad = __builtin_add_overflow(a, b, v); break;
    case OXF_OP_SUB: bad = __builtin_sub_overflow(a, b, v); break;
    case OXF_OP_MUL: bad = __builtin_mul_overflow(a, b, v); break;
    case OXF_OP_DIV: bad = b == 0; *v = bad ? 0 : a / b; break;
    case OXF_OP_REM: bad = b == 0; *v = bad ? 0 : a % b; break;
    case OXF_OP_SHL: bad = b < 0 || b > 40 || a > ((int64_t)1 << 40); *v = bad ? 0 : a << b; break;
    default: bad = b < 0 || b > 62; *v = bad ? 0 : a >> b; break;
    }
    if (bad) {
      ERR(S, e->loc, "this tile size does not evaluate: %s %s %s", ta, oxf_op_name(e->op), tb);
      return false;
    }
    snprintf(text, n, "%lld", (long long)*v);
    return true;
  }
  ERR(S, e->loc, "a tile size is an integer literal, a const generic, or an expression of them "
                 "([D / 2, BM * 2])");
  return false;
}

const oxi_tshape *oxs_shape_arg(sema *S, const oxf_node *a, const char *what) {
  if (a->kind != OXF_ARRAY || a->args.len < 1 || a->args.len > OXI_MAX_RANK) {
    ERR(S, a->loc, "%s takes a shape: an array of 1 to %d sizes such as [BM, BN]", what, OXI_MAX_RANK);
    return NULL;
  }
  int64_t dims[OXI_MAX_RANK], elems = 1;
  for (int d = 0; d < a->args.len; d++) {
    const oxf_node *e = a->args.items[d];
    char text[96];
    if (!oxs_const_size(S, e, &dims[d], text, sizeof text))
      return NULL;
    if (!pow2(dims[d])) {
      ERR(S, e->loc, "tile shapes are static powers of two: dim %d of %s is %s", d, what, text);
      return NULL;
    }
    elems = elems > OXS_MAX_TILE_ELEMS ? elems : elems * dims[d];
  }
  const oxi_tshape *shape = oxs_new_shape(S, a->args.len, dims);
  if (elems > OXS_MAX_TILE_ELEMS) {
    ERR(S, a->loc, "a tile holds at most %lld elements; %s is %s", (long long)OXS_MAX_TILE_ELEMS, what,
        oxs_shape_text(S, shape));
    return NULL;
  }
  return shape;
}

/* A one-operand tile op `op` of t (a scan, a sort, a reshape...), of type `type` and shape `shape`. */
static oxi_instr *tile_op(sema *S, oxi_op op, oxi_type type, oxi_instr *t, const oxi_tshape *shape) {
  oxi_instr *in = oxs_emit(S, op, type);
  in->ops[0] = t;
  in->nops = 1;
  in->tshape = shape;
  return in;
}

/* The tile operand of a scan or a sort: a tile of numbers (comparable and combinable). */
static oxi_instr *numeric_tile(sema *S, const oxf_node *a, oxi_type hint, const char *name) {
  val t = oxs_expr(S, a, hint);
  if (t.k == V_ERR)
    return NULL;
  if (t.k != V_TILE || t.v->type == OX_BOOL || oxi_is_fp8(t.v->type)) {
    ERR(S, a->loc, "'%s' takes a tile of numbers, found %s%s", name, oxs_vdesc(S, t),
        t.k == V_TILE && oxi_is_fp8(t.v->type) ? " (a storage type: convert with 'as f32' first)" : "");
    return NULL;
  }
  return t.v;
}

/* cumsum(t, axis) and the others: element i along the axis combines elements
 * 0..i of its row (inclusive). */
static val scan(sema *S, const oxf_node *n, oxi_type hint, int sub) {
  if (!nargs(S, n, 2, 2, n->name))
    return err;
  oxi_instr *t = numeric_tile(S, arg(n, 0), hint, n->name);
  int axis;
  if (!t || !axis_arg(S, arg(n, 1), t->tshape, n->name, &axis))
    return err;
  oxi_instr *in = tile_op(S, OXI_T_SCAN, t->type, t, t->tshape);
  in->sub = sub;
  in->index = axis;
  return oxs_value(in);
}

/* sort(t, axis) and argsort(t, axis), ascending, or descending with a third
 * argument `true`; topk(t, k, axis) and topk_indices(t, k, axis): the first k of
 * the descending sort, a slice of it (k a size, a power of two). A sort along an
 * axis sorts each row along it, as NumPy's does; NaNs are larger than every
 * number (last ascending, first descending, as NumPy and torch.topk put them). */
static val sort(sema *S, const oxf_node *n, bool indices, bool top) {
  const char *name = n->name;
  if (!nargs(S, n, top ? 3 : 2, 3, name))
    return err;
  oxi_instr *t = numeric_tile(S, arg(n, 0), OXI_VOID, name);
  int axis;
  if (!t || !axis_arg(S, arg(n, top ? 2 : 1), t->tshape, name, &axis))
    return err;
  int64_t k = 0, len = t->tshape->dims[axis];
  bool desc = top;
  if (top) {
    char text[96];
    if (!oxs_const_size(S, arg(n, 1), &k, text, sizeof text))
      return err;
    if (!pow2(k) || k > len) {
      ERR(S, arg(n, 1)->loc, "'%s' takes k, a power of two up to the size %lld of axis %d (the result is a tile), "
                             "found %s", name, (long long)len, axis, text);
      return err;
    }
  } else if (n->args.len == 3) {
    const oxf_node *d = arg(n, 2);
    if (d->kind != OXF_BOOL) {
      ERR(S, d->loc, "the third argument of %s says whether it is descending: true or false", name);
      return err;
    }
    desc = d->ival != 0;
  }
  oxi_instr *in = tile_op(S, OXI_T_SORT, indices ? OX_I32 : t->type, t, t->tshape);
  in->sub = (desc ? 1 : 0) | (indices ? 2 : 0);
  in->index = axis;
  if (!top || k == len)
    return oxs_value(in);
  int64_t dims[OXI_MAX_RANK];
  memcpy(dims, t->tshape->dims, sizeof dims);
  dims[axis] = k;
  return oxs_value(tile_op(S, OXI_T_SLICE, in->type, in, oxs_new_shape(S, t->tshape->rank, dims))); /* offsets 0 */
}

/* cat([a, b, ..], axis): tiles of one shape and dtype, one after the other along
 * the axis; their count is a power of two, so the result's dims are. Each tile
 * [.., s, ..] is viewed as [outer, 1, s * inner], broadcast to [outer, n, s * inner],
 * and the n are picked by their index along the new dim: reshapes, broadcasts
 * and a select, which every lowering has. */
static val cat(sema *S, const oxf_node *n) {
  if (!nargs(S, n, 2, 2, "cat"))
    return err;
  const oxf_node *list = arg(n, 0);
  if (list->kind != OXF_ARRAY || list->args.len < 2 || list->args.len > 8 || !pow2(list->args.len)) {
    ERR(S, list->loc, "cat takes the tiles as an array of 2, 4 or 8 tiles of one shape (so that the result's dims are "
                      "powers of two): 'cat([a, b], axis)'");
    return err;
  }
  int cnt = list->args.len;
  oxi_instr *t[8];
  for (int i = 0; i < cnt; i++) {
    const oxf_node *e = list->args.items[i];
    val v = oxs_expr(S, e, i ? t[0]->type : OXI_VOID);
    if (v.k == V_ERR)
      return err;
    if (v.k != V_TILE) {
      ERR(S, e->loc, "'cat' joins tiles, found %s", oxs_vdesc(S, v));
      return err;
    }
    t[i] = v.v;
    if (i && t[i]->type != t[0]->type) {
      ERR(S, e->loc, "'cat' joins tiles of one dtype: the first is %s, this one %s", oxi_type_name(t[0]->type),
          oxi_type_name(t[i]->type));
      return err;
    }
    const oxi_tshape *a = t[0]->tshape, *b = t[i]->tshape;
    bool same = a->rank == b->rank;
    for (int d = 0; same && d < a->rank; d++)
      same = a->dims[d] == b->dims[d];
    if (!same) {
      ERR(S, e->loc, "'cat' joins tiles of one shape: the first is %s, this one %s", oxs_shape_text(S, a),
          oxs_shape_text(S, b));
      return err;
    }
  }
  const oxi_tshape *s = t[0]->tshape;
  int axis;
  if (!axis_arg(S, arg(n, 1), s, "cat", &axis))
    return err;
  int64_t dims[OXI_MAX_RANK], outer = 1, inner = 1, elems = 1;
  for (int d = 0; d < s->rank; d++) {
    dims[d] = s->dims[d] * (d == axis ? cnt : 1);
    elems *= dims[d];
    *(d < axis ? &outer : &inner) *= s->dims[d];
  }
  const oxi_tshape *rs = oxs_new_shape(S, s->rank, dims);
  if (elems > OXS_MAX_TILE_ELEMS) {
    ERR(S, n->loc, "a tile holds at most %lld elements; cat makes %s", (long long)OXS_MAX_TILE_ELEMS,
        oxs_shape_text(S, rs));
    return err;
  }
  /* [n, s * inner] when nothing is before the axis, else [outer, n, s * inner] */
  int lead = outer > 1, r = lead + 2;
  int64_t one[3] = {outer, 1, inner}, many[3] = {outer, cnt, inner};
  const oxi_tshape *s1 = oxs_new_shape(S, r, one + !lead), *sn = oxs_new_shape(S, r, many + !lead);
  oxi_instr *which = oxs_emit(S, OXI_T_IOTA, OX_I32);
  which->index = lead;
  which->tshape = sn;
  oxi_instr *res = NULL;
  for (int i = cnt - 1; i >= 0; i--) {
    oxi_instr *b = tile_op(S, OXI_T_BROADCAST, t[i]->type, tile_op(S, OXI_T_RESHAPE, t[i]->type, t[i], s1), sn);
    if (!res) {
      res = b;
      continue;
    }
    oxi_instr *ci = oxs_const_int(S, OX_I32, (uint64_t)i); /* made before its use */
    oxi_instr *at = oxs_emit(S, OXI_T_SPLAT, OX_I32);
    at->ops[0] = ci;
    at->nops = 1;
    at->tshape = sn;
    oxi_instr *c = oxs_op2(S, OXI_CMP, OXI_EQ, OX_BOOL, which, at);
    oxi_instr *sel = oxs_emit(S, OXI_SELECT, t[i]->type);
    sel->ops[0] = c, sel->ops[1] = b, sel->ops[2] = res, sel->nops = 3, sel->tshape = sn;
    res = sel;
  }
  return oxs_value(tile_op(S, OXI_T_RESHAPE, res->type, res, rs));
}

/* zeros([..]), ones([..]), zeros::<T>([..]), ones::<T>([..]): full([..], 0) and
 * full([..], 1) of type T, else of the context's type (as an untyped literal
 * takes it: 'z.store(zeros([B]))' is z's dtype, 't + ones([B])' is t's), else f32. */
static val fill(sema *S, const oxf_node *n, oxi_type hint, bool one) {
  const char *name = n->name;
  if (!nargs(S, n, 1, 1, name))
    return err;
  oxi_type t = oxs_is_numeric(hint) || hint == OX_BOOL ? hint : OX_F32;
  if (n->gen.len) {
    const oxf_node *g = n->gen.items[0];
    const oxf_typeexpr *ty = g->kind == OXF_TYPE ? g->type : NULL;
    if (n->gen.len != 1 || !ty || ty->kind != OXF_TY_SCALAR || !(oxs_is_numeric(ty->elem) || ty->elem == OX_BOOL)) {
      ERR(S, g->loc, "write %s::<T>([..]) with T a number or bool type, such as %s::<f16>([B])", name, name);
      return err;
    }
    t = ty->elem;
  }
  const oxi_tshape *shape = oxs_shape_arg(S, arg(n, 0), name);
  if (!shape)
    return err;
  oxi_instr *v = oxi_is_float(t) ? oxs_const_float(S, t, one ? 1.0 : 0.0) : oxs_const_int(S, t, one);
  oxi_instr *in = oxs_emit(S, OXI_T_SPLAT, t);
  in->ops[0] = v;
  in->nops = 1;
  in->tshape = shape;
  return oxs_value(in);
}

/* Whether the program has a device function `name`: a new built-in yields to
 * it, so that programs written before it keep their meaning. */
static bool program_function(const sema *S, const char *name) {
  for (int i = 0; S->prog && i < S->prog->fns.len; i++) {
    const oxf_fn *fn = S->prog->fns.items[i];
    if (!fn->is_kernel && !fn->is_tile && !strcmp(fn->name, name))
      return true;
  }
  return false;
}

val oxs_tile_op_call(sema *S, const oxf_node *n, oxi_type hint, bool *handled) {
  static const struct {
    const char *name;
    int sub;
  } scans[] = {{"cumsum", OXI_ADD}, {"cumprod", OXI_MUL}, {"cummin", OXI_MIN}, {"cummax", OXI_MAX}};
  const char *name = n->name;
  *handled = false;
  if (strchr(name, ':') || program_function(S, name))
    return err;
  *handled = true;
  for (size_t i = 0; i < OXB_COUNT(scans); i++)
    if (!strcmp(name, scans[i].name))
      return scan(S, n, hint, scans[i].sub);
  if (!strcmp(name, "sort") || !strcmp(name, "argsort"))
    return sort(S, n, name[0] == 'a', false);
  if (!strcmp(name, "topk") || !strcmp(name, "topk_indices"))
    return sort(S, n, name[4] == '_', true);
  if (!strcmp(name, "cat"))
    return cat(S, n);
  if (!strcmp(name, "zeros") || !strcmp(name, "ones"))
    return fill(S, n, hint, name[0] == 'o');
  *handled = false;
  return err;
}
