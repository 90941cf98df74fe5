/* rng.c - counter-based random numbers (docs/language.md section 5.6):
 * Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as
 * easy as 1, 2, 3", SC'11), written as IR arithmetic: the same numbers on both
 * targets, for scalars and, in tile kernels, element by element on tiles. A
 * number is a pure function of a key (the seed) and a counter (the offset), so
 * any thread or element draws its own without state, and a kernel that draws
 * dropout masks draws the same ones again in the backward pass.
 *
 * Reached from sema.c through sema.rng_call (set by check.c), so that the two
 * files do not call each other. */
#include "front/sema.h"

#include <string.h>

/* A constant of type t, a tile of shape s where s is given. */
static oxi_instr *k(sema *S, const oxi_tshape *s, oxi_type t, uint64_t v) {
  oxi_instr *c = oxs_const_int(S, t, v);
  if (!s)
    return c;
  oxi_instr *sp = oxs_emit(S, OXI_T_SPLAT, t);
  sp->ops[0] = c;
  sp->nops = 1;
  sp->tshape = s;
  return sp;
}

static oxi_instr *bin(sema *S, int sub, oxi_type t, oxi_instr *a, oxi_instr *b) {
  return oxs_op2(S, OXI_BIN, sub, t, a, b);
}

/* Word w of Philox4x32-10 of key[2] and counter c[4] (u32 values of one shape):
 * one elementwise math op (the backend's oxl_philox), so that a tile of numbers
 * is one pass over the tile on the CPU, not one per arithmetic step. */
static oxi_instr *philox(sema *S, oxi_instr *const key[2], oxi_instr *const c[4], int w) {
  oxs_ensure_open(S);
  oxi_instr *in = oxs_append(S, OXI_MATH, OX_U32);
  in->sub = OXI_M_PHILOX0 + w;
  in->ops[0] = key[0];
  in->ops[1] = key[1];
  for (int i = 0; i < 4; i++)
    in->ops[2 + i] = c[i];
  in->nops = 6;
  in->tshape = c[0]->tshape;
  return in;
}

/* Word w (0..3) as a float in [0, 1): its top 24 bits times 2^-24 (every value
 * an f32 holds exactly); `plus_one` shifts it to (0, 1], for a logarithm. */
static oxi_instr *unit(sema *S, const oxi_tshape *s, oxi_instr *w, bool plus_one) {
  oxi_instr *top = bin(S, OXI_SHR, OX_U32, w, k(S, s, OX_U32, 8));
  if (plus_one)
    top = bin(S, OXI_ADD, OX_U32, top, k(S, s, OX_U32, 1));
  oxi_instr *f = oxs_cast_to(S, top, OX_F32);
  oxi_instr *scale = oxs_const_float(S, OX_F32, 1.0 / 16777216.0);
  if (s) {
    oxi_instr *sp = oxs_emit(S, OXI_T_SPLAT, OX_F32);
    sp->ops[0] = scale;
    sp->nops = 1;
    sp->tshape = s;
    scale = sp;
  }
  return oxs_op2(S, OXI_BIN, OXI_MUL, OX_F32, f, scale);
}

static oxi_instr *math1(sema *S, int fn, oxi_instr *x) {
  oxs_ensure_open(S);
  oxi_instr *in = oxs_append(S, OXI_MATH, x->type);
  in->sub = fn;
  in->ops[0] = x;
  in->nops = 1;
  in->tshape = x->tshape;
  return in;
}

/* An integer argument (scalar, or tile in tile kernels), or NULL after an error. */
static oxi_instr *int_arg(sema *S, const oxf_node *a, const char *what) {
  oxi_instr *v = oxs_operand(S, a, OX_U32, what, S->is_tile);
  if (v && !oxi_is_int(v->type)) {
    ERR(S, a->loc, "%s is an integer, found %s", what, oxs_vdesc(S, oxs_value(v)));
    return NULL;
  }
  return v;
}

/* The low and high 32 bits of integer v. */
static void halves(sema *S, oxi_instr *v, oxi_instr **lo, oxi_instr **hi) {
  oxi_instr *w = oxs_cast_to(S, v, oxi_is_signed(v->type) ? OX_I64 : OX_U64);
  w = oxs_cast_to(S, w, OX_U64);
  *lo = oxs_cast_to(S, w, OX_U32);
  *hi = oxs_cast_to(S, bin(S, OXI_SHR, OX_U64, w, k(S, w->tshape, OX_U64, 32)), OX_U32);
}

val oxs_rng_call(sema *S, const oxf_node *n, oxi_type hint, bool *handled) {
  static const val err = {V_ERR, NULL, NULL, NULL};
  (void)hint;
  const char *name = n->name;
  bool raw = !strcmp(name, "philox");
  *handled = raw || !strcmp(name, "rand") || !strcmp(name, "randint") || !strcmp(name, "randn");
  if (!*handled)
    return err;
  oxi_instr *key[2], *c[4], *v[7];
  if (raw) {
    /* philox(k0, k1, c0, c1, c2, c3, w): word w of Philox4x32-10, for known-answer tests
       and generators of one's own */
    if (!oxs_argc(S, n, 7, name))
      return err;
    for (int i = 0; i < 6; i++) {
      if (!(v[i] = int_arg(S, n->args.items[i], "a philox word")))
        return err;
      if (v[i]->type != OX_U32) {
        ERR(S, ((oxf_node *)n->args.items[i])->loc, "philox's key and counter words are u32, found %s",
            oxi_type_name(v[i]->type));
        return err;
      }
    }
    const oxf_node *w = n->args.items[6];
    if (w->kind != OXF_INT || w->ival > 3) {
      ERR(S, w->loc, "philox's last argument is the word of the result, an integer literal 0 to 3");
      return err;
    }
    if (!S->tile_unify(S, n->loc, v, 6))
      return err;
    return oxs_value(philox(S, v, v + 2, (int)w->ival));
  }
  /* rand(seed, offset) and friends: key = the seed's two words, counter = the
     offset's two words and two zeros */
  if (!oxs_argc(S, n, 2, name))
    return err;
  if (!(v[0] = int_arg(S, n->args.items[0], "the seed")) || !(v[1] = int_arg(S, n->args.items[1], "the offset")))
    return err;
  if (!S->tile_unify(S, n->loc, v, 2))
    return err;
  const oxi_tshape *s = v[0]->tshape;
  halves(S, v[0], &key[0], &key[1]);
  halves(S, v[1], &c[0], &c[1]);
  c[2] = c[3] = k(S, s, OX_U32, 0);
  oxi_instr *w0 = philox(S, key, c, 0);
  if (!strcmp(name, "randint"))
    return oxs_value(w0);
  if (!strcmp(name, "rand"))
    return oxs_value(unit(S, s, w0, false));
  /* randn: Box-Muller of two words, sqrt(-2 ln u1) cos(2 pi u2), u1 in (0, 1] */
  oxi_instr *u1 = unit(S, s, w0, true), *u2 = unit(S, s, philox(S, key, c, 1), false);
  oxi_instr *m2 = oxs_const_float(S, OX_F32, -2.0), *tau = oxs_const_float(S, OX_F32, 6.283185307179586);
  if (s) {
    oxi_instr *a = oxs_emit(S, OXI_T_SPLAT, OX_F32), *b = oxs_emit(S, OXI_T_SPLAT, OX_F32);
    a->ops[0] = m2, a->nops = 1, a->tshape = s;
    b->ops[0] = tau, b->nops = 1, b->tshape = s;
    m2 = a, tau = b;
  }
  oxi_instr *r = math1(S, OXI_M_SQRT, oxs_op2(S, OXI_BIN, OXI_MUL, OX_F32, m2, math1(S, OXI_M_LOG, u1)));
  return oxs_value(oxs_op2(S, OXI_BIN, OXI_MUL, OX_F32, r, math1(S, OXI_M_COS, oxs_op2(S, OXI_BIN, OXI_MUL, OX_F32, tau, u2))));
}
