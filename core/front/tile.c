/* tile.c - #[tile] kernels (docs/tile-design.md, milestone 1): their
 * parameters and const generics, tile values and the tile ops, lowered to the
 * tile IR that the tile-lowering pass (core/tile) turns into thread-level IR.
 *
 * A tile kernel says what one block's tile does. Its outputs are &mut Tensor
 * parameters: each is the block's own tile of a partitioned tensor, whose
 * shape (the tile shape) is static powers of two once the const generics are
 * bound, so a tile kernel writes only its own tile and cannot race. Inputs are
 * &Tensor parameters, read-only, read in tiles.
 *
 * Tile values are IR values with a tile shape (oxi_instr.tshape) whose type is
 * the element dtype. Elementwise operations are the scalar IR ops with a shape
 * (sema.c makes both with the same code); a scalar next to a tile is splatted
 * to the tile's shape first (OXI_T_SPLAT), so that every operand of an
 * elementwise op has the result's shape; tiles of different shapes are
 * broadcast numpy-style (OXI_T_BROADCAST). */
#include "front/sema.h"

#include <stdio.h>
#include <string.h>

#define MAX_TILE_ELEMS OXS_MAX_TILE_ELEMS
/* T_LOAD carries one coordinate per dim in ops[] */
#define MAX_LOAD_RANK ((int)OXB_COUNT(((oxi_instr *)0)->ops))

/* ----------------------------------------------------------------- shapes */

static bool same_shape(const oxi_tshape *a, const oxi_tshape *b) {
  if (a->rank != b->rank)
    return false;
  for (int d = 0; d < a->rank; d++)
    if (a->dims[d] != b->dims[d])
      return false;
  return true;
}

static bool pow2(int64_t v) { return v >= 1 && (v & (v - 1)) == 0; }

static bool same_shape_dims(const oxi_tshape *a, int rank, const int64_t *dims) {
  if (a->rank != rank)
    return false;
  for (int d = 0; d < rank; d++)
    if (a->dims[d] != dims[d])
      return false;
  return true;
}


static oxi_instr *splat(sema *S, oxi_instr *v, const oxi_tshape *shape) {
  oxi_instr *in = oxs_emit(S, OXI_T_SPLAT, v->type);
  in->ops[0] = v;
  in->nops = 1;
  in->tshape = shape;
  return in;
}

static oxi_instr *broadcast(sema *S, oxi_instr *v, const oxi_tshape *shape) {
  oxi_instr *in = oxs_emit(S, OXI_T_BROADCAST, v->type);
  in->ops[0] = v;
  in->nops = 1;
  in->tshape = shape;
  return in;
}

/* Tile v with leading dims of 1 up to `rank` ([BN] as [1, BN]): numpy's rank
 * promotion, a reshape that moves no element. */
static oxi_instr *lead_ones(sema *S, oxi_instr *v, int rank) {
  const oxi_tshape *s = v->tshape;
  int64_t dims[OXI_MAX_RANK];
  int pad = rank - s->rank;
  for (int d = 0; d < rank; d++)
    dims[d] = d < pad ? 1 : s->dims[d - pad];
  oxi_instr *in = oxs_emit(S, OXI_T_RESHAPE, v->type);
  in->ops[0] = v;
  in->nops = 1;
  in->tshape = oxs_new_shape(S, rank, dims);
  return in;
}

/* oxs_tile_unify, where the result must also have shape `with` (if given):
 * numpy's broadcasting (tiles of lower rank take leading dims of 1, then each
 * dim equal, or 1 in all but one of them); scalars are splatted. */
static bool unify_with(sema *S, oxb_loc loc, oxi_instr **ops, int n, const oxi_tshape *with) {
  int64_t dims[OXI_MAX_RANK];
  int rank = with ? with->rank : -1;
  int top = rank;
  for (int i = 0; i < n; i++)
    if (ops[i]->tshape && ops[i]->tshape->rank > top)
      top = ops[i]->tshape->rank;
  for (int i = 0; i < n; i++)
    if (ops[i]->tshape && ops[i]->tshape->rank < top && (!with || top == with->rank))
      ops[i] = lead_ones(S, ops[i], top);
  if (with)
    memcpy(dims, with->dims, sizeof dims);
  for (int i = 0; i < n; i++) {
    const oxi_tshape *t = ops[i]->tshape;
    if (!t)
      continue;
    if (rank < 0) {
      rank = t->rank;
      memcpy(dims, t->dims, sizeof dims);
      continue;
    }
    bool ok = t->rank == rank;
    for (int d = 0; ok && d < rank; d++) {
      if (t->dims[d] == dims[d] || t->dims[d] == 1)
        continue;
      if (dims[d] == 1 && !with)
        dims[d] = t->dims[d];
      else
        ok = false;
    }
    if (!ok) {
      ERR(S, loc, "tiles of shapes %s and %s do not broadcast (dims must be equal or 1%s)",
          oxs_shape_text(S, oxs_new_shape(S, rank, dims)), oxs_shape_text(S, t),
          t->rank != rank ? ", and ranks equal" : "");
      return false;
    }
  }
  if (rank < 0)
    return true;
  const oxi_tshape *shape = with;
  for (int i = 0; i < n && !shape; i++)
    if (ops[i]->tshape && same_shape_dims(ops[i]->tshape, rank, dims))
      shape = ops[i]->tshape;
  if (!shape)
    shape = oxs_new_shape(S, rank, dims);
  for (int i = 0; i < n; i++) {
    if (!ops[i]->tshape)
      ops[i] = splat(S, ops[i], shape);
    else if (!same_shape(ops[i]->tshape, shape))
      ops[i] = broadcast(S, ops[i], shape);
  }
  return true;
}

bool oxs_tile_unify(sema *S, oxb_loc loc, oxi_instr **ops, int n) {
  return unify_with(S, loc, ops, n, NULL);
}

bool oxs_tile_unify_to(sema *S, oxb_loc loc, oxi_instr **ops, int n, const oxi_tshape *shape) {
  return unify_with(S, loc, ops, n, shape);
}

/* ------------------------------------------------------------- helpers */

static oxi_param *param_of(sema *S, const binding *b) { return S->k->params.items[b->mem.index]; }

static bool is_tensor(val v) {
  return v.k == V_MEM && (v.b->mkind == OXF_TY_TENSOR || v.b->mkind == OXF_TY_MUTTENSOR);
}

static const oxf_node *arg(const oxf_node *n, int i) { return n->args.items[i]; }

static bool nargs(sema *S, const oxf_node *n, int want, const char *what) {
  if (n->args.len == want)
    return true;
  ERR(S, n->loc, "'%s' takes %d argument%s, found %d", what, want, want == 1 ? "" : "s",
      n->args.len);
  return false;
}

/* A tensor parameter given as an argument (an output only, with `out`). */
static binding *tensor_arg(sema *S, const oxf_node *a, bool out, const char *what) {
  val v = oxs_expr(S, a, OXI_VOID);
  if (v.k == V_ERR)
    return NULL;
  if (!is_tensor(v) || (out && v.b->mkind != OXF_TY_MUTTENSOR)) {
    ERR(S, a->loc, "%s must be %s, found %s", what,
        out ? "an output tile (an &mut Tensor parameter)" : "a tensor parameter",
        oxs_vdesc(S, v));
    return NULL;
  }
  return v.b;
}

/* An axis: an integer literal below `rank`. */
static bool axis_arg(sema *S, const oxf_node *a, int rank, const char *what, const char *of,
                     int *axis) {
  if (a->kind != OXF_INT) {
    ERR(S, a->loc, "the axis of %s must be an integer literal", what);
    return false;
  }
  if (a->ival >= (uint64_t)rank) {
    ERR(S, a->loc, "axis %llu is out of range for %s: '%s' has rank %d (axes 0..%d)",
        (unsigned long long)a->ival, what, of, rank, rank - 1);
    return false;
  }
  *axis = (int)a->ival;
  return true;
}

/* t.load / t.id / t.count, dim, stride: instructions about tensor `b`. */
static oxi_instr *about(sema *S, oxi_op op, oxi_type t, const binding *b, int index) {
  oxi_instr *in = oxs_emit(S, op, t);
  in->mem = b->mem;
  in->index = index;
  return in;
}

/* A tile of `shape` from tensor `x` at tile coordinates `coords`. */
static val tile_load(sema *S, oxb_loc loc, const binding *x, oxi_instr **coords, int rank,
                     const oxi_tshape *shape, uint64_t imm, double fimm) {
  if (rank > MAX_LOAD_RANK) {
    ERR(S, loc, "tile loads of rank %d are not supported yet (at most %d dims)", rank,
        MAX_LOAD_RANK);
    return (val){V_ERR, NULL, NULL, NULL};
  }
  oxi_instr *in = about(S, OXI_T_LOAD, x->type, x, 0);
  for (int d = 0; d < rank; d++)
    in->ops[d] = coords[d];
  in->nops = rank;
  in->tshape = shape;
  in->imm = imm;
  in->fimm = fimm;
  return oxs_value(in);
}

/* --------------------------------------------------------------- builtins */

static bool padding(sema *S, const oxf_node *n, oxi_type t, uint64_t *imm, double *fimm);

/* load_tile_like(x, z) and load_tile_like(x, z, pad): the tile of x at this
 * block's tile coordinates of output z, in z's tile shape; elements outside x
 * read the padding (0). */
static val load_tile_like(sema *S, const oxf_node *n) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  if (n->args.len != 2 && n->args.len != 3) {
    ERR(S, n->loc, "'load_tile_like' takes 2 arguments, or 3 with a padding value, found %d", n->args.len);
    return err;
  }
  binding *x = tensor_arg(S, arg(n, 0), false, "the first argument of load_tile_like");
  binding *z = tensor_arg(S, arg(n, 1), true, "the second argument of load_tile_like");
  if (!x || !z)
    return err;
  const oxi_param *px = param_of(S, x), *pz = param_of(S, z);
  bool own_tile = px->rank == pz->rank;
  for (int d = 0; own_tile && d < px->rank; d++)
    own_tile = px->dims[d] == pz->dims[d];
  if (x->mkind == OXF_TY_MUTTENSOR && !own_tile) {
    /* with other tile shapes, x's elements at z's tile belong to other blocks:
     * reading them would race with their writes */
    ERR(S, arg(n, 0)->loc, "load_tile_like(%s, %s) reads output '%s' at the tiles of output '%s', "
                           "whose tile shape differs: those elements belong to other blocks",
        x->name, z->name, x->name, z->name);
    return err;
  }
  int rx = param_of(S, x)->rank, rz = param_of(S, z)->rank;
  if (rx != rz) {
    ERR(S, n->loc, "load_tile_like(%s, %s) needs tensors of one rank: '%s' has rank %d, '%s' "
                   "rank %d", x->name, z->name, x->name, rx, z->name, rz);
    return err;
  }
  uint64_t imm = 0;
  double fimm = 0;
  if (n->args.len == 3 && !padding(S, arg(n, 2), x->type, &imm, &fimm))
    return err;
  if (rz > MAX_LOAD_RANK)
    return tile_load(S, n->loc, x, NULL, rz, z->tile, imm, fimm);
  oxi_instr *coords[OXI_MAX_RANK];
  for (int d = 0; d < rz; d++)
    coords[d] = about(S, OXI_T_ID, OX_U64, z, d);
  return tile_load(S, n->loc, x, coords, rz, z->tile, imm, fimm);
}

static oxi_instr *reduce(sema *S, oxi_instr *t, int sub, int axis) {
  int64_t dims[OXI_MAX_RANK];
  memcpy(dims, t->tshape->dims, sizeof dims);
  dims[axis] = 1;
  oxi_instr *in = oxs_emit(S, OXI_T_REDUCE, t->type);
  in->sub = sub;
  in->index = axis;
  in->ops[0] = t;
  in->nops = 1;
  in->tshape = oxs_new_shape(S, t->tshape->rank, dims);
  return in;
}

/* argmax(t, axis) / argmin(t, axis): the first index (i32) along axis of the
 * largest / smallest element, the axis kept with size 1 like reduce_*: the
 * extreme, then the smallest index where an element equals it. NaNs are
 * passed over (max and min ignore them); a row of NaNs gives 0. */
static val arg_extreme(sema *S, const oxf_node *n, bool largest) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  const char *name = largest ? "argmax" : "argmin";
  if (!nargs(S, n, 2, name))
    return err;
  val t = oxs_expr(S, arg(n, 0), OXI_VOID);
  if (t.k == V_ERR)
    return err;
  if (t.k != V_TILE || t.v->type == OX_BOOL || oxi_is_fp8(t.v->type)) {
    ERR(S, arg(n, 0)->loc, "'%s' takes a tile of numbers, found %s", name, oxs_vdesc(S, t));
    return err;
  }
  const oxi_tshape *s = t.v->tshape;
  int axis;
  if (!axis_arg(S, arg(n, 1), s->rank, name, oxs_shape_text(S, s), &axis))
    return err;
  oxi_instr *ext = broadcast(S, reduce(S, t.v, largest ? OXI_MAX : OXI_MIN, axis), s);
  oxi_instr *at = oxs_op2(S, OXI_CMP, OXI_EQ, OX_BOOL, t.v, ext);
  oxi_instr *idx = oxs_emit(S, OXI_T_IOTA, OX_I32);
  idx->index = axis;
  idx->tshape = s;
  oxi_instr *none = splat(S, oxs_const_int(S, OX_I32, INT32_MAX), s);
  oxi_instr *cand = oxs_emit(S, OXI_SELECT, OX_I32);
  cand->ops[0] = at, cand->ops[1] = idx, cand->ops[2] = none, cand->nops = 3, cand->tshape = s;
  oxi_instr *first = reduce(S, cand, OXI_MIN, axis);
  oxi_instr *none1 = splat(S, oxs_const_int(S, OX_I32, INT32_MAX), first->tshape);
  oxi_instr *zero = splat(S, oxs_const_int(S, OX_I32, 0), first->tshape);
  oxi_instr *empty = oxs_op2(S, OXI_CMP, OXI_EQ, OX_BOOL, first, none1); /* made before its use */
  oxi_instr *r = oxs_emit(S, OXI_SELECT, OX_I32);
  r->ops[0] = empty, r->ops[1] = zero, r->ops[2] = first, r->nops = 3, r->tshape = first->tshape;
  return oxs_value(r);
}

/* select(c, a, b): elementwise c ? a : b; c a bool tile or a bool. */
static val select_call(sema *S, const oxf_node *n, oxi_type hint) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  if (!nargs(S, n, 3, "select"))
    return err;
  oxi_instr *c = oxs_operand(S, arg(n, 0), OX_BOOL, "the condition of select", true);
  if (!c)
    return err;
  if (c->type != OX_BOOL) {
    ERR(S, arg(n, 0)->loc, "the condition of select must be bool (or a tile of bool), found %s",
        oxi_type_name(c->type));
    return err;
  }
  oxi_instr *ab[2];
  if (oxs_untyped_literal(arg(n, 1)) && !oxs_untyped_literal(arg(n, 2))) {
    ab[1] = oxs_operand(S, arg(n, 2), hint, "a value of select", true);
    ab[0] = ab[1] ? oxs_operand(S, arg(n, 1), ab[1]->type, "a value of select", true) : NULL;
  } else {
    ab[0] = oxs_operand(S, arg(n, 1), hint, "a value of select", true);
    ab[1] = ab[0] ? oxs_operand(S, arg(n, 2), ab[0]->type, "a value of select", true) : NULL;
  }
  if (!ab[0] || !ab[1])
    return err;
  if (ab[0]->type != ab[1]->type) {
    ERR(S, n->loc, "select needs two values of one type, found %s and %s",
        oxi_type_name(ab[0]->type), oxi_type_name(ab[1]->type));
    return err;
  }
  /* a bool scalar condition stays a scalar; a tile one broadcasts with the values (numpy's where) */
  oxi_instr *ops[3] = {c, ab[0], ab[1]};
  if (!unify_with(S, n->loc, c->tshape ? ops : ops + 1, c->tshape ? 3 : 2, NULL))
    return err;
  oxi_instr *in = oxs_emit(S, OXI_SELECT, ops[1]->type);
  in->ops[0] = ops[0];
  in->ops[1] = ops[1];
  in->ops[2] = ops[2];
  in->nops = 3;
  in->tshape = ops[1]->tshape;
  return oxs_value(in);
}

/* The tile operand of a shape builtin. */
static oxi_instr *tile_operand(sema *S, const oxf_node *a, oxi_type hint, const char *what) {
  val t = oxs_expr(S, a, hint);
  if (t.k == V_ERR)
    return NULL;
  if (t.k != V_TILE) {
    ERR(S, a->loc, "'%s' takes a tile, found %s", what, oxs_vdesc(S, t));
    return NULL;
  }
  return t.v;
}

static val shape_op(sema *S, oxi_op op, oxi_instr *t, const oxi_tshape *shape) {
  oxi_instr *in = oxs_emit(S, op, t->type);
  in->ops[0] = t;
  in->nops = 1;
  in->tshape = shape;
  return oxs_value(in);
}

/* reshape, permute, transpose, broadcast_to, full, iota. */
static val shape_call(sema *S, const oxf_node *n, oxi_type hint, bool *handled) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  const char *name = n->name;
  *handled = true;
  if (!strcmp(name, "reshape") || !strcmp(name, "broadcast_to")) {
    bool bc = name[0] == 'b';
    if (!nargs(S, n, 2, name))
      return err;
    oxi_instr *t = tile_operand(S, arg(n, 0), hint, name);
    const oxi_tshape *shape = t ? oxs_shape_arg(S, arg(n, 1), name) : NULL;
    if (!shape)
      return err;
    int64_t et = 1, es = 1;
    for (int d = 0; d < t->tshape->rank; d++)
      et *= t->tshape->dims[d];
    for (int d = 0; d < shape->rank; d++)
      es *= shape->dims[d];
    if (!bc && et != es) {
      ERR(S, n->loc, "reshape keeps the element count: %s has %lld elements, %s has %lld",
          oxs_shape_text(S, t->tshape), (long long)et, oxs_shape_text(S, shape), (long long)es);
      return err;
    }
    if (bc) {
      oxi_instr *ops[1] = {t};
      if (!unify_with(S, n->loc, ops, 1, shape))
        return err;
      return oxs_value(ops[0]);
    }
    return shape_op(S, OXI_T_RESHAPE, t, shape);
  }
  if (!strcmp(name, "permute") || !strcmp(name, "transpose")) {
    bool tr = name[0] == 't';
    if (!nargs(S, n, tr ? 1 : 2, name))
      return err;
    oxi_instr *t = tile_operand(S, arg(n, 0), hint, name);
    if (!t)
      return err;
    int rank = t->tshape->rank, perm[OXI_MAX_RANK];
    if (tr) {
      if (rank != 2) {
        ERR(S, n->loc, "transpose swaps the dims of a 2-D tile; this one is %s (use permute)",
            oxs_shape_text(S, t->tshape));
        return err;
      }
      perm[0] = 1;
      perm[1] = 0;
    } else {
      const oxf_node *a = arg(n, 1);
      unsigned seen = 0;
      bool ok = a->kind == OXF_ARRAY && a->args.len == rank;
      for (int d = 0; ok && d < rank; d++) {
        const oxf_node *e = a->args.items[d];
        ok = e->kind == OXF_INT && e->ival < (uint64_t)rank && !(seen & (1u << e->ival));
        if (ok) {
          perm[d] = (int)e->ival;
          seen |= 1u << e->ival;
        }
      }
      if (!ok) {
        ERR(S, a->loc, "permute takes a permutation of the %d dims as integer literals, such as [1, 0]",
            rank);
        return err;
      }
    }
    int64_t dims[OXI_MAX_RANK];
    uint64_t bits = 0;
    for (int d = 0; d < rank; d++) {
      dims[d] = t->tshape->dims[perm[d]];
      bits |= (uint64_t)perm[d] << (4 * d);
    }
    val r = shape_op(S, OXI_T_PERMUTE, t, oxs_new_shape(S, rank, dims));
    r.v->imm = bits;
    return r;
  }
  if (!strcmp(name, "full")) {
    if (!nargs(S, n, 2, name))
      return err;
    const oxi_tshape *shape = oxs_shape_arg(S, arg(n, 0), "full");
    if (!shape)
      return err;
    /* an untyped float literal is f32 where the context says no float type
       (a `let` finds one in its variable's later uses: stmt.c) */
    const oxf_node *lit = arg(n, 1);
    while (lit->kind == OXF_UNARY && lit->op == OXF_OP_NEG)
      lit = lit->lhs;
    bool f32 = oxs_untyped_literal(arg(n, 1)) && lit->kind == OXF_FLOAT && !oxi_is_float(hint);
    val v = oxs_expr(S, arg(n, 1), f32 ? OX_F32 : hint);
    if (v.k == V_ERR)
      return err;
    if (v.k != V_SCALAR) {
      ERR(S, arg(n, 1)->loc, "full([..], value) takes a scalar value, found %s", oxs_vdesc(S, v));
      return err;
    }
    return oxs_value(splat(S, v.v, shape));
  }
  if (!strcmp(name, "iota")) {
    if (!nargs(S, n, 2, name))
      return err;
    const oxi_tshape *shape = oxs_shape_arg(S, arg(n, 0), "iota");
    int axis;
    if (!shape || !axis_arg(S, arg(n, 1), shape->rank, "iota", oxs_shape_text(S, shape), &axis))
      return err;
    oxi_type t = oxi_is_int(hint) || oxi_is_float(hint) ? hint : OX_I32;
    oxi_instr *in = oxs_emit(S, OXI_T_IOTA, t);
    in->index = axis;
    in->tshape = shape;
    return oxs_value(in);
  }
  *handled = false;
  return err;
}

/* dot(a, b): the f32 matrix product of a [M, K] and b [K, N] tiles of one
 * dtype (bf16 and f16 run on tensor cores on the GPU; tf32 tiles hold f32
 * values rounded to tf32, multiplied in f32 where no tensor core takes them);
 * mma(a, b, acc) adds it to an f32 [M, N] accumulator, the body of a K loop. */
static val dot_call(sema *S, const oxf_node *n, bool acc) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  const char *name = acc ? "mma" : "dot";
  if (!nargs(S, n, acc ? 3 : 2, name))
    return err;
  oxi_instr *ops[3];
  for (int i = 0; i < (acc ? 3 : 2); i++) {
    val v = oxs_expr(S, arg(n, i), i == 2 ? OX_F32 : OXI_VOID);
    if (v.k == V_ERR)
      return err;
    if (v.k != V_TILE || v.v->tshape->rank != 2) {
      ERR(S, arg(n, i)->loc, "'%s' takes 2-D tiles, found %s", name,
          v.k == V_TILE ? oxs_shape_text(S, v.v->tshape) : oxs_vdesc(S, v));
      return err;
    }
    ops[i] = v.v;
  }
  const oxi_tshape *a = ops[0]->tshape, *b = ops[1]->tshape;
  if (a->dims[1] != b->dims[0]) {
    ERR(S, n->loc, "'%s': the inner dims differ: %s x %s", name, oxs_shape_text(S, a),
        oxs_shape_text(S, b));
    return err;
  }
  oxi_type et = ops[0]->type;
  bool fp8 = oxi_is_fp8(et) && oxi_is_fp8(ops[1]->type); /* e4m3 and e5m2 mix, as wgmma allows */
  bool ints = et == ops[1]->type && (et == OX_I8 || et == OX_U8 || et == OX_I16 || et == OX_I32);
  if (!fp8 && !ints && (et != ops[1]->type || !(et == OX_BF16 || et == OX_F16 || et == OX_TF32 || et == OX_F32))) {
    ERR(S, n->loc, "'%s' multiplies two tiles of one dtype, bf16, f16, tf32 or f32, two fp8 tiles "
                   "(f8e4m3, f8e5m2), or two integer tiles of one dtype (i8, u8, i16, i32); found %s and %s",
        name, oxi_type_name(et), oxi_type_name(ops[1]->type));
    return err;
  }
  oxi_type rt = ints ? OX_I32 : OX_F32; /* integer products are exact, summed in i32 (wrapping) */
  int64_t dims[2] = {a->dims[0], b->dims[1]};
  oxi_tshape *shape = oxs_new_shape(S, 2, dims);
  if (acc && (ops[2]->type != rt || !same_shape(ops[2]->tshape, shape))) {
    ERR(S, arg(n, 2)->loc, "'mma' accumulates into an %s tile of shape %s, found %s of %s", oxi_type_name(rt),
        oxs_shape_text(S, shape), oxi_type_name(ops[2]->type), oxs_shape_text(S, ops[2]->tshape));
    return err;
  }
  oxi_instr *in = oxs_emit(S, OXI_T_DOT, rt);
  for (int i = 0; i < (acc ? 3 : 2); i++)
    in->ops[i] = ops[i];
  in->nops = acc ? 3 : 2;
  in->tshape = shape;
  return oxs_value(in);
}

val oxs_tile_call(sema *S, const oxf_node *n, oxi_type hint, bool *handled) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  const char *name = n->name;
  *handled = true;
  if (!strcmp(name, "load_tile_like"))
    return load_tile_like(S, n);
  val sv = shape_call(S, n, hint, handled);
  if (*handled)
    return sv;
  *handled = true;
  if (!strcmp(name, "select"))
    return select_call(S, n, hint);
  static const struct {
    const char *name;
    int sub;
  } reduces[] = {{"reduce_sum", OXI_ADD}, {"reduce_prod", OXI_MUL}, {"reduce_min", OXI_MIN},
                 {"reduce_max", OXI_MAX}};
  for (size_t r = 0; r < sizeof reduces / sizeof reduces[0]; r++) {
    if (strcmp(name, reduces[r].name))
      continue;
    if (!nargs(S, n, 2, name))
      return err;
    val t = oxs_expr(S, arg(n, 0), hint);
    if (t.k == V_ERR)
      return err;
    if (t.k != V_TILE) {
      ERR(S, arg(n, 0)->loc, "'%s' reduces a tile, found %s", name, oxs_vdesc(S, t));
      return err;
    }
    int axis;
    if (!axis_arg(S, arg(n, 1), t.v->tshape->rank, name, oxs_shape_text(S, t.v->tshape), &axis))
      return err;
    if (t.v->type == OX_BOOL || oxi_is_fp8(t.v->type)) {
      ERR(S, arg(n, 0)->loc, "'%s' needs a numeric tile, found a %s tile%s", name, oxi_type_name(t.v->type),
          t.v->type == OX_BOOL ? "" : " (a storage type: convert with 'as f32' first)");
      return err;
    }
    int64_t dims[OXI_MAX_RANK];
    memcpy(dims, t.v->tshape->dims, sizeof dims);
    dims[axis] = 1;
    oxi_instr *in = oxs_emit(S, OXI_T_REDUCE, t.v->type);
    in->sub = reduces[r].sub;
    in->index = axis;
    in->ops[0] = t.v;
    in->nops = 1;
    in->tshape = oxs_new_shape(S, t.v->tshape->rank, dims);
    return oxs_value(in);
  }
  if (!strcmp(name, "argmax") || !strcmp(name, "argmin"))
    return arg_extreme(S, n, name[3] == 'm' && name[4] == 'a');
  if (!strcmp(name, "dot") || !strcmp(name, "mma"))
    return dot_call(S, n, !strcmp(name, "mma"));
  val ov = oxs_tile_op_call(S, n, hint, handled); /* tile_ops.c */
  if (*handled)
    return ov;
  *handled = true;
  bool id = !strcmp(name, "tile_id");
  if ((id || !strcmp(name, "num_tiles")) && n->args.len == 0 && S->out) {
    /* every axis at once, as a tuple: let (i, j) = tile_id(); */
    int rank = param_of(S, S->out)->rank;
    oxs_tuple *t = oxb_alloc(S->a, sizeof *t);
    for (int axis = 0; axis < rank && t->n < OXF_MAX_TUPLE; axis++)
      t->v[t->n++] = about(S, id ? OXI_T_ID : OXI_T_COUNT, OX_U64, S->out, axis);
    return oxs_tuple_val(S, t);
  }
  if (id || !strcmp(name, "num_tiles")) {
    if (!nargs(S, n, 1, name))
      return err;
    if (!S->out) { /* no partitioned output: the launch's grid, axes as CUDA's x, y, z */
      int axis;
      if (!axis_arg(S, arg(n, 0), 3, name, "the launch grid", &axis))
        return err;
      oxi_instr *r = oxs_emit(S, OXI_SREG, OX_U32);
      r->sub = (id ? OXI_SREG_CTAID_X : OXI_SREG_NCTAID_X) + axis;
      oxi_instr *c = oxs_emit(S, OXI_CAST, OX_U64);
      c->ops[0] = r;
      c->nops = 1;
      return oxs_value(c);
    }
    int axis;
    if (!axis_arg(S, arg(n, 0), param_of(S, S->out)->rank, name, S->out->name, &axis))
      return err;
    return oxs_value(about(S, id ? OXI_T_ID : OXI_T_COUNT, OX_U64, S->out, axis));
  }
  *handled = false;
  return err;
}

/* ---------------------------------------------------------------- methods */

/* A padding value: a constant of dtype t, as T_LOAD holds it (imm for
 * integers and bool, fimm for floats). */
static bool padding(sema *S, const oxf_node *n, oxi_type t, uint64_t *imm, double *fimm) {
  const char *tn = oxi_type_name(t);
  *imm = 0;
  *fimm = 0;
  if (n->kind == OXF_NAME && strstr(n->name, "::")) { /* f32::INFINITY, i32::MAX, ... */
    oxi_type ct;
    if (!oxs_type_constant(n->name, &ct, imm, fimm) || ct != t)
      goto bad;
    return true;
  }
  oxi_instr *v = oxs_operand(S, n, t, "a padding value", false);
  if (!v)
    return false;
  if (v->op != OXI_CONST || v->type != t)
    goto bad;
  *imm = oxi_is_float(t) ? 0 : v->imm;
  *fimm = oxi_is_float(t) ? v->fimm : 0;
  /* the constant itself is not needed: drop it if it is still the last instruction */
  if (S->cur->instrs.len && S->cur->instrs.items[S->cur->instrs.len - 1] == v)
    S->cur->instrs.len--;
  return true;
bad:
  if (oxi_is_float(t))
    ERR(S, n->loc, "the padding value must be a constant of the tensor's dtype %s: a literal, "
                   "%s::INFINITY, %s::NEG_INFINITY, %s::MAX or %s::MIN", tn, tn, tn, tn, tn);
  else
    ERR(S, n->loc, "the padding value must be a constant of the tensor's dtype %s: a literal, "
                   "%s::MAX or %s::MIN", tn, tn, tn);
  return false;
}

/* x.partition([s0, s1, ...]): sizes are integer literals or const generics,
 * static powers of two, one per dim of x. */
static val partition(sema *S, const oxf_node *n, binding *x) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  if (x->mkind == OXF_TY_ATOMICTENSOR) {
    ERR(S, n->loc, "'%s' is an atomic tensor: blocks add into it (atomic_add), none reads it",
        x->name);
    return err;
  }
  if (x->mkind == OXF_TY_MUTTENSOR) {
    ERR(S, n->loc, "'%s' is an output tile (&mut Tensor), which cannot be partitioned again: "
                   "read this block's tile of it with load_tile_like(%s, %s)", x->name, x->name,
        x->name);
    return err;
  }
  if (!nargs(S, n, 1, "partition"))
    return err;
  const oxf_node *a = arg(n, 0);
  int rank = param_of(S, x)->rank;
  if (a->kind != OXF_ARRAY) {
    ERR(S, a->loc, "partition takes the tile shape as an array: '%s.partition([%s])'", x->name,
        rank == 1 ? "B" : rank == 2 ? "BM, BN" : "..");
    return err;
  }
  if (a->args.len != rank) {
    ERR(S, a->loc, "'%s' has rank %d, but the partition gives %d size%s", x->name, rank,
        a->args.len, a->args.len == 1 ? "" : "s");
    return err;
  }
  int64_t dims[OXI_MAX_RANK] = {0};
  int64_t elems = 1;
  bool ok = true;
  for (int d = 0; d < rank; d++) {
    const oxf_node *e = a->args.items[d];
    char text[96];
    if (!oxs_const_size(S, e, &dims[d], text, sizeof text)) {
      ok = false;
      continue;
    }
    if (!pow2(dims[d])) {
      ERR(S, e->loc, "tile shapes are static powers of two: dim %d of the partition of '%s' is "
                     "%s", d, x->name, text);
      ok = false;
      continue;
    }
    elems = elems > MAX_TILE_ELEMS ? elems : elems * dims[d];
  }
  if (!ok)
    return err;
  oxi_tshape *shape = oxs_new_shape(S, rank, dims);
  if (elems > MAX_TILE_ELEMS) {
    ERR(S, a->loc, "a tile holds at most %lld elements; the partition of '%s' is %s",
        (long long)MAX_TILE_ELEMS, x->name, oxs_shape_text(S, shape));
    return err;
  }
  binding *p = oxs_bind(S, B_PART, NULL, n->loc);
  p->mem = x->mem;
  p->type = x->type;
  p->mkind = x->mkind;
  p->tile = shape;
  return (val){V_PART, NULL, p, NULL};
}

/* p.load([i, j, ..]), p.load_padded([i, j, ..], value) and p.prefetch([i, j, ..]) of partition p. */
static val part_load(sema *S, const oxf_node *n, binding *p) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  if (!strcmp(n->name, "num_tiles")) { /* ceil(dim / tile) along an axis */
    int axis;
    if (!nargs(S, n, 1, "num_tiles") || !axis_arg(S, arg(n, 0), p->tile->rank, "num_tiles", "the partition", &axis))
      return err;
    int64_t t = p->tile->dims[axis];
    oxi_instr *dim = about(S, OXI_DIM, OX_U64, p, axis);
    oxi_instr *up = oxs_op2(S, OXI_BIN, OXI_ADD, OX_U64, dim, oxs_const_int(S, OX_U64, (uint64_t)t - 1));
    int sh = 0;
    while (((int64_t)1 << sh) < t)
      sh++;
    return oxs_value(oxs_op2(S, OXI_BIN, OXI_SHR, OX_U64, up, oxs_const_int(S, OX_U64, (uint64_t)sh)));
  }
  bool padded = !strcmp(n->name, "load_padded"), prefetch = !strcmp(n->name, "prefetch");
  if (!padded && !prefetch && strcmp(n->name, "load")) {
    ERR(S, n->loc, "a partition has methods load([..]), load_padded([..], value), prefetch([..]) and "
                   "num_tiles(axis), not '%s'", n->name);
    return err;
  }
  if (!nargs(S, n, padded ? 2 : 1, n->name))
    return err;
  const oxf_node *a = arg(n, 0);
  int rank = p->tile->rank;
  if (a->kind != OXF_ARRAY) {
    ERR(S, a->loc, "%s takes the tile's index as an array, one usize per dim: '.%s([%s]%s)'",
        n->name, n->name, rank == 1 ? "i" : rank == 2 ? "i, j" : "..", padded ? ", value" : "");
    return err;
  }
  if (a->args.len != rank) {
    ERR(S, a->loc, "the partition has rank %d, but %s gives %d index%s", rank, n->name,
        a->args.len, a->args.len == 1 ? "" : "es");
    return err;
  }
  oxi_instr *coords[OXI_MAX_RANK];
  bool ok = true;
  for (int d = 0; d < rank; d++) {
    const oxf_node *e = a->args.items[d];
    coords[d] = oxs_operand(S, e, OX_U64, "a tile index", false);
    if (coords[d] && coords[d]->type != OX_U64) {
      ERR(S, e->loc, "a tile index must be usize, found %s; convert it with 'as usize'",
          oxi_type_name(coords[d]->type));
      coords[d] = NULL;
    }
    ok &= coords[d] != NULL;
  }
  uint64_t imm = 0;
  double fimm = 0;
  if (padded)
    ok &= padding(S, arg(n, 1), p->type, &imm, &fimm);
  if (!ok)
    return err;
  if (prefetch) { /* a hint: nothing is read into the kernel, so nothing is checked */
    if (rank > MAX_LOAD_RANK) {
      ERR(S, n->loc, "tile prefetches of rank %d are not supported (at most %d dims)", rank, MAX_LOAD_RANK);
      return err;
    }
    oxi_instr *in = about(S, OXI_T_PREFETCH, OXI_VOID, p, 0);
    for (int d = 0; d < rank; d++)
      in->ops[d] = coords[d];
    in->nops = rank;
    in->tshape = p->tile;
    return (val){V_UNIT, NULL, NULL, NULL};
  }
  return tile_load(S, n->loc, p, coords, rank, p->tile, imm, fimm);
}

/* z.store(t): t a tile of z's tile shape and dtype, or a scalar of its dtype. */
static val store(sema *S, const oxf_node *n, binding *z) {
  static const val err = {V_ERR, NULL, NULL, NULL}, unit = {V_UNIT, NULL, NULL, NULL};
  if (z->mkind == OXF_TY_ATOMICTENSOR) {
    ERR(S, n->loc, "'%s' is an atomic tensor: add tiles into it with %s.atomic_add([..], t)", z->name,
        z->name);
    return err;
  }
  if (z->mkind != OXF_TY_MUTTENSOR) {
    ERR(S, n->loc, "'%s' is a read-only tensor (&Tensor); tiles are stored into &mut Tensor "
                   "outputs", z->name);
    return err;
  }
  if (!nargs(S, n, 1, "store"))
    return err;
  const oxf_node *a = arg(n, 0);
  val v = oxs_expr(S, a, z->type);
  if (v.k == V_ERR)
    return err;
  if (v.k != V_TILE && v.k != V_SCALAR) {
    ERR(S, a->loc, "'%s.store' takes a tile (or a scalar for every element), found %s", z->name,
        oxs_vdesc(S, v));
    return err;
  }
  if (v.v->type != z->type) {
    ERR(S, a->loc, "'%s' holds %s, found %s; convert with 'as %s'", z->name,
        oxi_type_name(z->type), oxs_vdesc(S, v), oxi_type_name(z->type));
    return err;
  }
  oxi_instr *t = v.v;
  if (!t->tshape) {
    t = splat(S, t, z->tile);
  } else if (!same_shape(t->tshape, z->tile)) {
    ERR(S, a->loc, "'%s' stores tiles of shape %s, found shape %s (a store does not "
                   "broadcast: broadcast_to the tile's shape first)", z->name, oxs_shape_text(S, z->tile),
        oxs_shape_text(S, t->tshape));
    return err;
  }
  oxi_instr *in = about(S, OXI_T_STORE, OXI_VOID, z, 0);
  in->ops[0] = t;
  in->nops = 1;
  return unit;
}

/* t.atomic_add([i, j, ..], tile): adds the tile into the atomic tensor at
 * those tile coordinates (as a partition's load would read them), skipping
 * elements outside; t.atomic_add_at(index, v) (rank 1): adds element e of v
 * (a tile, or a scalar for every element) at index element e of the integer
 * tile `index`, skipping indices outside (negative ones too). */
static val atomic_add(sema *S, const oxf_node *n, binding *b, bool at) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  const char *name = at ? "atomic_add_at" : "atomic_add";
  const oxi_param *p = param_of(S, b);
  if (!nargs(S, n, 2, name))
    return err;
  oxi_instr *in;
  if (at) {
    if (p->rank != 1) {
      ERR(S, n->loc, "'atomic_add_at' scatters into a 1-D atomic tensor; '%s' has %d dims", b->name,
          p->rank);
      return err;
    }
    val idx = oxs_expr(S, arg(n, 0), OXI_VOID);
    if (idx.k == V_ERR)
      return err;
    if (idx.k != V_TILE || !oxi_is_int(idx.v->type)) {
      ERR(S, arg(n, 0)->loc, "'atomic_add_at' takes a tile of integer indices, found %s", oxs_vdesc(S, idx));
      return err;
    }
    oxi_instr *v = oxs_operand(S, arg(n, 1), p->dtype, "the added value", true);
    if (!v)
      return err;
    if (v->type != (oxi_type)p->dtype) {
      ERR(S, arg(n, 1)->loc, "'%s' holds %s, found %s", b->name, ox_dtype_name(p->dtype), oxi_type_name(v->type));
      return err;
    }
    oxi_instr *ops[2] = {idx.v, v};
    if (!oxs_tile_unify_to(S, n->loc, ops + 1, 1, idx.v->tshape))
      return err;
    oxi_instr *i64 = idx.v;
    if (i64->type != OX_U64) { /* negative indices become huge: outside */
      oxi_instr *c = oxs_emit(S, OXI_CAST, oxi_is_signed(i64->type) ? OX_I64 : OX_U64);
      c->ops[0] = i64;
      c->nops = 1;
      c->tshape = i64->tshape;
      i64 = c;
      if (i64->type != OX_U64) {
        c = oxs_emit(S, OXI_CAST, OX_U64);
        c->ops[0] = i64;
        c->nops = 1;
        c->tshape = i64->tshape;
        i64 = c;
      }
    }
    in = oxs_emit(S, OXI_T_ATOMIC_ADD, OXI_VOID);
    in->sub = 1;
    in->ops[0] = i64;
    in->ops[1] = ops[1];
    in->nops = 2;
  } else {
    if (p->rank > MAX_LOAD_RANK - 1) {
      ERR(S, n->loc, "'atomic_add' takes tensors of up to %d dims; '%s' has %d", MAX_LOAD_RANK - 1,
          b->name, p->rank);
      return err;
    }
    const oxf_node *a = arg(n, 0);
    if (a->kind != OXF_ARRAY || a->args.len != p->rank) {
      ERR(S, a->loc, "'atomic_add' takes the tile's coordinates as an array, one usize per dim of '%s' (%d)",
          b->name, p->rank);
      return err;
    }
    oxi_instr *coords[OXI_MAX_RANK];
    for (int d = 0; d < p->rank; d++)
      if (!(coords[d] = oxs_operand(S, a->args.items[d], OX_U64, "a tile coordinate", false)))
        return err;
    for (int d = 0; d < p->rank; d++)
      if (coords[d]->type != OX_U64) {
        ERR(S, ((oxf_node *)a->args.items[d])->loc, "a tile coordinate is a usize, found %s",
            oxi_type_name(coords[d]->type));
        return err;
      }
    val v = oxs_expr(S, arg(n, 1), p->dtype);
    if (v.k == V_ERR)
      return err;
    if (v.k != V_TILE || v.v->tshape->rank != p->rank || v.v->type != (oxi_type)p->dtype) {
      ERR(S, arg(n, 1)->loc, "'atomic_add' adds a tile of %s with %d dims into '%s', found %s",
          ox_dtype_name(p->dtype), p->rank, b->name, oxs_vdesc(S, v));
      return err;
    }
    in = oxs_emit(S, OXI_T_ATOMIC_ADD, OXI_VOID);
    for (int d = 0; d < p->rank; d++)
      in->ops[d] = coords[d];
    in->ops[p->rank] = v.v;
    in->nops = p->rank + 1;
  }
  in->mem = b->mem;
  return (val){V_UNIT, NULL, NULL, NULL};
}

/* The indices of x.at([..]) or x.load_at([..], ..): one usize per dim of x. */
static bool element_indices(sema *S, const oxf_node *n, const binding *x, const char *what,
                            oxi_instr **idx) {
  const oxf_node *a = arg(n, 0);
  int rank = param_of(S, x)->rank;
  if (a->kind != OXF_ARRAY) {
    ERR(S, a->loc, "%s takes element indices as an array, one usize per dim: '%s.%s([%s]%s)'", what,
        x->name, what, rank == 1 ? "i" : rank == 2 ? "i, j" : "..", !strcmp(what, "load_at") ? ", [..]" : "");
    return false;
  }
  if (a->args.len != rank) {
    ERR(S, a->loc, "'%s' has rank %d, but %s gives %d index%s", x->name, rank, what, a->args.len,
        a->args.len == 1 ? "" : "es");
    return false;
  }
  bool ok = true;
  for (int d = 0; d < rank; d++) {
    const oxf_node *e = a->args.items[d];
    idx[d] = oxs_operand(S, e, OX_U64, "an element index", false);
    if (idx[d] && idx[d]->type != OX_U64) {
      ERR(S, e->loc, "an element index must be usize, found %s; convert it with 'as usize'",
          oxi_type_name(idx[d]->type));
      idx[d] = NULL;
    }
    ok &= idx[d] != NULL;
  }
  return ok;
}

/* Inputs alone are read at elements: an output's other elements are other
 * blocks' tiles, whose writes such a read would race with. */
static bool readable_at(sema *S, const oxf_node *n, const binding *x, const char *what) {
  if (x->mkind == OXF_TY_TENSOR)
    return true;
  if (x->mkind == OXF_TY_MUTTENSOR)
    ERR(S, n->loc, "'%s' is an output tile (&mut Tensor): its other elements belong to other "
                   "blocks, so it is not read with %s; read this block's tile with "
                   "load_tile_like(%s, %s)", x->name, what, x->name, x->name);
  else
    ERR(S, n->loc, "'%s' is an atomic tensor: blocks add into it (atomic_add), none reads it", x->name);
  return false;
}

/* x.at([i0, ..]): element [i0, ..] of input x as a scalar, 0 outside x (as a
 * load's padding), the same in every thread. */
static val element_at(sema *S, const oxf_node *n, binding *x) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  oxi_instr *idx[OXI_MAX_RANK];
  if (!readable_at(S, n, x, "at([..])") || !nargs(S, n, 1, "at") || !element_indices(S, n, x, "at", idx))
    return err;
  return oxs_value(oxs_tensor_element(S, x, idx, param_of(S, x)->rank));
}

/* x.gather([i0, ..]) and x.gather([..], pad): a tile whose element e is
 * x[i0[e], ..]: each index an integer tile or scalar, broadcast together to the
 * result's shape (at least one a tile), converted to usize (a negative index
 * becomes one past every dim); elements outside x read the padding (0). */
static val gather(sema *S, const oxf_node *n, binding *x) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  int rank = param_of(S, x)->rank;
  if (!readable_at(S, n, x, "gather([..])"))
    return err;
  if (n->args.len != 1 && n->args.len != 2) {
    ERR(S, n->loc, "gather takes one index per dim of '%s', tiles or scalars, and optionally a padding "
                   "value: '%s.gather([%s])'", x->name, x->name, rank == 1 ? "idx" : "rows, cols");
    return err;
  }
  const oxf_node *a = arg(n, 0);
  if (a->kind != OXF_ARRAY || a->args.len != rank) {
    ERR(S, a->loc, "'%s' has rank %d: gather takes %d index%s as an array, '%s.gather([%s])'", x->name, rank,
        rank, rank == 1 ? "" : "es", x->name, rank == 1 ? "idx" : "rows, cols");
    return err;
  }
  oxi_instr *idx[OXI_MAX_RANK];
  bool tile = false;
  for (int d = 0; d < rank; d++) {
    const oxf_node *e = a->args.items[d];
    idx[d] = oxs_operand(S, e, OX_U64, "a gather index", true);
    if (!idx[d])
      return err;
    if (!oxi_is_int(idx[d]->type)) {
      ERR(S, e->loc, "a gather index is an integer tile or scalar, found %s", oxs_vdesc(S, oxs_value(idx[d])));
      return err;
    }
    tile |= idx[d]->tshape != NULL;
  }
  if (!tile) {
    ERR(S, a->loc, "gather needs at least one index tile; for one element write '%s.at([..])'", x->name);
    return err;
  }
  for (int d = 0; d < rank; d++) /* i64 -1 becomes 2^64 - 1: outside */
    idx[d] = oxs_cast_to(S, idx[d], OX_U64);
  if (!S->tile_unify(S, a->loc, idx, rank))
    return err;
  uint64_t imm = 0;
  double fimm = 0;
  if (n->args.len == 2 && !padding(S, arg(n, 1), x->type, &imm, &fimm))
    return err;
  oxi_instr *in = about(S, OXI_T_GATHER, x->type, x, 0);
  for (int d = 0; d < rank; d++)
    in->ops[d] = idx[d];
  in->nops = rank;
  in->tshape = idx[0]->tshape;
  in->imm = imm;
  in->fimm = fimm;
  return oxs_value(in);
}

/* x.load_at([o0, ..], [s0, ..]) and x.load_at([..], [..], pad): the tile of
 * shape [s0, ..] whose element [l0, ..] is x[o0 + l0, ..]: a tile at any element
 * offset (T_LOAD with sub 1), elements outside x read the padding (0). */
static val load_at(sema *S, const oxf_node *n, binding *x) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  int rank = param_of(S, x)->rank;
  if (!readable_at(S, n, x, "load_at([..], [..])"))
    return err;
  if (n->args.len != 2 && n->args.len != 3) {
    ERR(S, n->loc, "load_at takes the first element's indices, the tile's shape and optionally a "
                   "padding value: '%s.load_at([%s], [%s])'", x->name, rank == 1 ? "i" : "i, j",
        rank == 1 ? "B" : "BM, BN");
    return err;
  }
  oxi_instr *idx[OXI_MAX_RANK];
  if (!element_indices(S, n, x, "load_at", idx))
    return err;
  const oxi_tshape *shape = oxs_shape_arg(S, arg(n, 1), "load_at");
  if (!shape)
    return err;
  if (shape->rank != rank) {
    ERR(S, arg(n, 1)->loc, "'%s' has rank %d, but the tile of load_at has %d dims", x->name, rank, shape->rank);
    return err;
  }
  uint64_t imm = 0;
  double fimm = 0;
  if (n->args.len == 3 && !padding(S, arg(n, 2), x->type, &imm, &fimm))
    return err;
  val v = tile_load(S, n->loc, x, idx, rank, shape, imm, fimm);
  if (v.k == V_TILE)
    v.v->sub = 1;
  return v;
}

/* t.item() (a tile of one element) and t.at([i, j, ..]): an element of a tile as
 * a scalar, the same in every thread (a loop bound, an index...); 0 where an
 * index is past its dim. */
static val tile_method(sema *S, const oxf_node *n, oxi_instr *t) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  const oxi_tshape *s = t->tshape;
  oxi_instr *idx[OXI_MAX_RANK];
  if (!strcmp(n->name, "item")) {
    if (!nargs(S, n, 0, "item"))
      return err;
    int64_t elems = 1;
    for (int d = 0; d < s->rank; d++)
      elems *= s->dims[d];
    if (elems != 1) {
      ERR(S, n->loc, "item() takes the element of a tile of one element, found shape %s: read one with "
                     "'t.at([..])', or reduce it first", oxs_shape_text(S, s));
      return err;
    }
    for (int d = 0; d < s->rank; d++)
      idx[d] = oxs_const_int(S, OX_U64, 0);
    return oxs_value(oxs_tile_element(S, t, idx));
  }
  if (!strcmp(n->name, "at")) {
    if (!nargs(S, n, 1, "at"))
      return err;
    const oxf_node *a = arg(n, 0);
    if (a->kind != OXF_ARRAY || a->args.len != s->rank) {
      ERR(S, a->loc, "a tile of shape %s is read at %d index%s, as an array: 't.at([%s])'", oxs_shape_text(S, s),
          s->rank, s->rank == 1 ? "" : "es", s->rank == 1 ? "i" : s->rank == 2 ? "i, j" : "..");
      return err;
    }
    for (int d = 0; d < s->rank; d++) {
      const oxf_node *e = a->args.items[d];
      idx[d] = oxs_operand(S, e, OX_U64, "an element index", false);
      if (!idx[d])
        return err;
      if (idx[d]->type != OX_U64) {
        ERR(S, e->loc, "an element index must be usize, found %s; convert it with 'as usize'",
            oxi_type_name(idx[d]->type));
        return err;
      }
    }
    return oxs_value(oxs_tile_element(S, t, idx));
  }
  if (!strcmp(n->name, "slice")) { /* t.slice([o0, ..], [s0, ..]): the sub-tile from those offsets */
    if (!nargs(S, n, 2, "slice"))
      return err;
    const oxf_node *a = arg(n, 0);
    if (a->kind != OXF_ARRAY || a->args.len != s->rank) {
      ERR(S, a->loc, "a tile of shape %s is sliced from %d offset%s, as an array of sizes: 't.slice([%s], [..])'",
          oxs_shape_text(S, s), s->rank, s->rank == 1 ? "" : "s", s->rank == 1 ? "o" : s->rank == 2 ? "o0, o1" : "..");
      return err;
    }
    const oxi_tshape *r = oxs_shape_arg(S, arg(n, 1), "the slice");
    if (!r)
      return err;
    if (r->rank != s->rank) {
      ERR(S, arg(n, 1)->loc, "a tile of shape %s is sliced to a tile of its rank, found %s", oxs_shape_text(S, s),
          oxs_shape_text(S, r));
      return err;
    }
    uint64_t packed = 0;
    for (int d = 0; d < s->rank; d++) {
      int64_t o;
      char text[96];
      if (!oxs_const_size(S, a->args.items[d], &o, text, sizeof text))
        return err;
      if (o < 0 || o + r->dims[d] > s->dims[d]) {
        ERR(S, ((oxf_node *)a->args.items[d])->loc, "the slice's dim %d, %lld elements from %s, passes the "
            "tile's %lld", d, (long long)r->dims[d], text, (long long)s->dims[d]);
        return err;
      }
      packed |= (uint64_t)o << (16 * d);
    }
    oxi_instr *in = oxs_emit(S, OXI_T_SLICE, t->type);
    in->ops[0] = t;
    in->nops = 1;
    in->imm = packed;
    in->tshape = r;
    return oxs_value(in);
  }
  ERR(S, n->loc, "a tile has methods item(), at([..]), slice([..], [..]) and the math functions (t.exp(), "
                 "t.max(v), ...), not '%s'", n->name);
  return err;
}

val oxs_tile_method(sema *S, const oxf_node *n, val recv, oxi_type hint) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  (void)hint;
  if (recv.k == V_TILE)
    return tile_method(S, n, recv.v);
  binding *b = recv.b;
  if (recv.k == V_PART)
    return part_load(S, n, b);
  const char *name = n->name;
  if (b->mkind == OXF_TY_ATOMICTENSOR && (!strcmp(name, "atomic_add") || !strcmp(name, "atomic_add_at")))
    return atomic_add(S, n, b, name[10] == '_');
  if (!strcmp(name, "partition"))
    return partition(S, n, b);
  if (!strcmp(name, "at"))
    return element_at(S, n, b);
  if (!strcmp(name, "load_at"))
    return load_at(S, n, b);
  if (!strcmp(name, "gather"))
    return gather(S, n, b);
  if (!strcmp(name, "store"))
    return store(S, n, b);
  bool dim = !strcmp(name, "dim");
  if (dim || !strcmp(name, "stride")) {
    if (!nargs(S, n, 1, name))
      return err;
    int axis;
    char what[64];
    snprintf(what, sizeof what, "'%s'", name);
    if (!axis_arg(S, arg(n, 0), param_of(S, b)->rank, what, b->name, &axis))
      return err;
    return oxs_value(about(S, dim ? OXI_DIM : OXI_STRIDE, OX_U64, b, axis));
  }
  if (b->mkind == OXF_TY_MUTTENSOR && (!strcmp(name, "load") || !strcmp(name, "load_padded")))
    ERR(S, n->loc, "an output tile (&mut Tensor) has methods store(t), dim(k) and stride(k), not '%s'; "
                   "read this block's tile of it with load_tile_like(%s, %s)", name, b->name, b->name);
  else if (b->mkind == OXF_TY_MUTTENSOR)
    ERR(S, n->loc, "an output tile (&mut Tensor) has methods store(t), dim(k) and stride(k), "
                   "not '%s'", name);
  else if (b->mkind == OXF_TY_ATOMICTENSOR)
    ERR(S, n->loc, "an atomic tensor has methods atomic_add([..], t), atomic_add_at(index, v), "
                   "dim(k) and stride(k), not '%s'", name);
  else
    ERR(S, n->loc, "a tensor (&Tensor) has methods partition([..]), at([..]), load_at([..], [..]), "
                   "gather([..]), dim(k) and stride(k), not '%s'%s", name, !strcmp(name, "load") ? "; partition it first: "
                                                           "x.partition([..]).load([..])" : "");
  return err;
}

/* ---------------------------------------------------------------- kernels */

/* Does v fit in integer type t? */
static bool fits(oxi_type t, int64_t v) {
  int bits = (int)ox_dtype_size((ox_dtype)t) * 8;
  if (oxi_is_signed(t))
    return bits == 64 || (v >= -((int64_t)1 << (bits - 1)) && v < ((int64_t)1 << (bits - 1)));
  return v >= 0 && (bits == 64 || v < ((int64_t)1 << bits));
}

/* The value of a written tensor dim once the generics are bound; `text`
 * describes it for messages ("B = 100", "100", "-1"). */
static int64_t bind_dim(const oxf_fn *fn, const int64_t *gen, int64_t d, char *text, size_t n) {
  if (OXF_DIM_IS_GENERIC(d)) {
    int g = OXF_DIM_GENERIC_INDEX(d);
    snprintf(text, n, "%s = %lld", (const char *)fn->generics.items[g], (long long)gen[g]);
    return gen[g];
  }
  snprintf(text, n, "%lld", (long long)d);
  return d;
}

/* Lowers the parameters; S->out becomes the first &mut Tensor's binding. */
static void tile_params(sema *S, const oxf_fn *fn, const int64_t *gen) {
  oxi_kernel *k = S->k;
  for (int i = 0; i < fn->params.len; i++) {
    const oxf_param *p = fn->params.items[i];
    if (!p->type)
      continue;
    oxs_check_param_name(S, fn, i);
    for (int g = 0; g < fn->generics.len; g++)
      if (!strcmp(fn->generics.items[g], p->name))
        ERR(S, p->loc, "'%s' is both a %s generic and a parameter", p->name,
            oxf_is_type_generic(fn, g) ? "type" : "const");
    oxi_param *ip = oxb_alloc(S->a, sizeof *ip);
    ip->name = p->name;
    ip->dtype = p->type->elem;
    oxf_tykind kind = p->type->kind;
    bool tf32 = (kind == OXF_TY_SCALAR || kind == OXF_TY_TENSOR || kind == OXF_TY_MUTTENSOR ||
                 kind == OXF_TY_ATOMICTENSOR) && oxs_check_param_dtype(S, p);
    if (kind == OXF_TY_SCALAR) {
      ip->kind = OXI_P_SCALAR;
      oxb_vec_push(S->a, &k->params, ip);
      binding *b = oxs_bind(S, B_VALUE, p->name, p->loc);
      oxi_instr *pv = oxs_emit(S, OXI_PARAM, ip->dtype);
      pv->index = k->params.len - 1;
      b->v = pv;
      b->type = ip->dtype;
      continue;
    }
    if (kind != OXF_TY_TENSOR && kind != OXF_TY_MUTTENSOR && kind != OXF_TY_ATOMICTENSOR) {
      ERR(S, p->loc, "tile kernel parameters are scalars, &Tensor<T, [dims]> inputs, &mut "
                     "Tensor<T, [tile]> outputs and &Tensor<Atomic<T>, [dims]> atomic tensors; "
                     "slices, DisjointSlice and atomic slices belong to #[kernel] (SIMT) functions");
      ip->kind = OXI_P_SCALAR;
      oxb_vec_push(S->a, &k->params, ip);
      continue;
    }
    bool out = kind == OXF_TY_MUTTENSOR;
    ip->kind = out ? OXI_P_TILE : kind == OXF_TY_ATOMICTENSOR ? OXI_P_ATENSOR : OXI_P_TENSOR;
    if (kind == OXF_TY_ATOMICTENSOR && !tf32 && ip->dtype != OX_I32 && ip->dtype != OX_U32 &&
        ip->dtype != OX_I64 && ip->dtype != OX_U64 && ip->dtype != OX_F32 && ip->dtype != OX_F64)
      ERR(S, p->loc, "atomic tensors hold i32, u32, i64, u64, f32 or f64, not %s",
          ox_dtype_name(ip->dtype));
    ip->rank = p->type->rank;
    int64_t elems = 1;
    bool ok = ip->rank >= 1;
    for (int d = 0; d < ip->rank; d++) {
      char text[96];
      int64_t v = bind_dim(fn, gen, p->type->dims[d], text, sizeof text);
      ip->dims[d] = v;
      if (out && v == OXF_DIM_DYNAMIC) {
        ERR(S, p->loc, "the tile shape of output '%s' must be static: dim %d is -1 (dynamic); "
                       "use a const generic", p->name, d);
        ok = false;
      } else if (out && !pow2(v)) {
        ERR(S, p->loc, "tile shapes are static powers of two: dim %d of output '%s' is %s",
            d, p->name, text);
        ok = false;
      } else if (!out && v < 1 && v != OXF_DIM_DYNAMIC) {
        ERR(S, p->loc, "a tensor dim is >= 1 or -1 (dynamic): dim %d of '%s' is %s", d,
            p->name, text);
        ok = false;
      } else if (!out && OXF_DIM_IS_GENERIC(p->type->dims[d]) && v == OXF_DIM_DYNAMIC) {
        ERR(S, p->loc, "a tensor dim is >= 1 or -1 (dynamic): dim %d of '%s' is %s; write -1 "
                       "for a dynamic dim", d, p->name, text);
        ok = false;
      }
      if (ok && out)
        elems = elems > MAX_TILE_ELEMS ? elems : elems * v;
    }
    oxi_tshape *shape = oxs_new_shape(S, ip->rank, ip->dims);
    if (ok && out && elems > MAX_TILE_ELEMS)
      ERR(S, p->loc, "a tile holds at most %lld elements; output '%s' has the tile shape %s",
          (long long)MAX_TILE_ELEMS, p->name, oxs_shape_text(S, shape));
    oxb_vec_push(S->a, &k->params, ip);
    binding *b = oxs_bind(S, B_MEM, p->name, p->loc);
    b->mem.kind = OXI_MEM_PARAM;
    b->mem.index = k->params.len - 1;
    b->mkind = kind;
    b->type = ip->dtype;
    if (out) {
      b->tile = shape;
      if (!S->out)
        S->out = b;
    }
  }
}

void oxs_tile_kernel(sema *S, const oxf_fn *fn, const int64_t *gen) {
  oxi_kernel *k = oxi_kernel_new(S->m, fn->name);
  k->line = fn->loc.line;
  k->col = fn->loc.col;
  k->is_tile = true;
  oxs_begin(S, fn, k);
  S->is_tile = true;
  S->out = NULL;
  S->cur = oxi_block_new(S->m, k);
  int errors_before = S->d->errors;
  if (fn->is_unsafe)
    ERR(S, fn->loc, "tile kernels cannot be unsafe: their loads and stores are always checked");
  if (fn->ret && fn->ret->kind != OXF_TY_UNIT)
    ERR(S, fn->ret->loc, "tile kernels return nothing; results go to their &mut Tensor outputs");
  /* const generics: bound values, visible as constants of their type */
  for (int g = 0; g < fn->generics.len; g++) {
    const oxf_typeexpr *t = fn->generic_types.items[g];
    const char *name = fn->generics.items[g];
    if (t->kind == OXF_TY_TYPEPARAM) /* bound already, in the syntax tree (oxf_instantiate) */
      continue;
    if (t->kind == OXF_TY_SCALAR && oxi_is_int(t->elem) && !fits(t->elem, gen[g]))
      ERR(S, t->loc, "const generic '%s' = %lld does not fit in %s", name, (long long)gen[g],
          ox_dtype_name(t->elem));
    binding *b = oxs_bind(S, B_VALUE, name, t->loc);
    b->is_generic = true;
    b->gval = gen[g];
    b->type = oxi_is_int(t->elem) ? t->elem : OX_I32;
  }
  tile_params(S, fn, gen);
  bool atomics = false;
  for (int i = 0; i < S->k->params.len; i++)
    atomics |= ((oxi_param *)S->k->params.items[i])->kind == OXI_P_ATENSOR;
  if (!S->out && !atomics && S->d->errors == errors_before)
    ERR(S, fn->loc, "a tile kernel writes a partitioned output (`&mut Tensor<T, [tile]>`) or adds "
                    "into an atomic tensor (`&Tensor<Atomic<T>, [dims]>`): add one");
  if (S->d->errors == errors_before) { /* a bad signature: the body's errors would mislead */
    val v = oxs_block_expr(S, fn->body, OXI_VOID);
    if ((v.k == V_SCALAR || v.k == V_TILE) && fn->body->value)
      ERR(S, fn->body->value->loc, "tile kernels return nothing; end the expression with ';' "
                                   "(results go to '%s.store(t)')", S->out ? S->out->name : "z");
  }
  if (!oxi_terminator(S->cur))
    oxi_emit(S->m, k, S->cur, OXI_RET, OXI_VOID);
  S->is_tile = false;
  S->out = NULL;
}
