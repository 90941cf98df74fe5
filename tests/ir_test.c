/* ir_test.c - Oxide IR built by hand: the verifier accepts a well-formed
 * kernel and rejects each kind of bad IR with the right message, and the
 * printer shows what was built. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

static int failures;

#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      failures++;                                                              \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                     \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
    }                                                                          \
  } while (0)

/* ------------------------------------------------------------- building */

typedef struct T {
  oxb_arena arena;
  oxi_module m;
  oxi_kernel *k;
} T;

static void t_init(T *t, const char *name) {
  memset(t, 0, sizeof *t);
  t->m.arena = &t->arena;
  t->m.filename = "t.oxk";
  t->k = oxi_kernel_new(&t->m, name);
}

static void param(T *t, const char *name, oxi_pkind kind, ox_dtype dt) {
  oxi_param *p = oxb_alloc(&t->arena, sizeof *p);
  p->name = name;
  p->kind = kind;
  p->dtype = dt;
  oxb_vec_push(&t->arena, &t->k->params, p);
}

static oxi_block *blk(T *t) { return oxi_block_new(&t->m, t->k); }

static oxi_instr *ins(T *t, oxi_block *b, oxi_op op, oxi_type ty, int sub, oxi_instr *a,
                      oxi_instr *c, oxi_instr *d) {
  oxi_instr *in = oxi_emit(&t->m, t->k, b, op, ty);
  in->sub = sub;
  oxi_instr *ops[3] = {a, c, d};
  for (int i = 0; i < 3 && ops[i]; i++)
    in->ops[in->nops++] = ops[i];
  return in;
}

static oxi_instr *konst(T *t, oxi_block *b, oxi_type ty, uint64_t v) {
  oxi_instr *in = ins(t, b, OXI_CONST, ty, 0, NULL, NULL, NULL);
  in->imm = v;
  in->fimm = (double)v;
  return in;
}

static oxi_instr *mem(T *t, oxi_block *b, oxi_op op, oxi_type ty, int param_index, oxi_instr *idx,
                      oxi_instr *v) {
  oxi_instr *in = ins(t, b, op, ty, 0, idx, v, NULL);
  in->mem.kind = OXI_MEM_PARAM;
  in->mem.index = param_index;
  return in;
}

static void br(T *t, oxi_block *b, oxi_block *to) {
  ins(t, b, OXI_BR, OXI_VOID, 0, NULL, NULL, NULL)->target[0] = to;
}

static void condbr(T *t, oxi_block *b, oxi_instr *c, oxi_block *x, oxi_block *y) {
  oxi_instr *in = ins(t, b, OXI_CONDBR, OXI_VOID, 0, c, NULL, NULL);
  in->target[0] = x;
  in->target[1] = y;
}

static void ret(T *t, oxi_block *b) { ins(t, b, OXI_RET, OXI_VOID, 0, NULL, NULL, NULL); }

/* The well-formed kernel
 *   k(%a: &[f32], %c: &mut [f32], %n: u32, %h: &[Atomic<u32>]):
 *   i = tid.x as u64; if i < len(a) { c[i] = a[i] * 2 (checked); h[0] += 1 }
 *   with a variable slot, a shared array and a contract relation. */
static void build_good(T *t) {
  t_init(t, "good");
  param(t, "a", OXI_P_SLICE, OX_F32);
  param(t, "c", OXI_P_MUTSLICE, OX_F32);
  param(t, "n", OXI_P_SCALAR, OX_U32);
  param(t, "h", OXI_P_ATOMIC, OX_U32);
  t->k->block[0] = 64;
  t->k->block[1] = t->k->block[2] = 1;
  t->k->uses_sync = true;
  oxi_shared *sh = oxb_alloc(&t->arena, sizeof *sh);
  sh->dtype = OX_F32;
  sh->count = 64;
  oxb_vec_push(&t->arena, &t->k->shared, sh);
  t->k->shared_bytes = 256;
  oxi_site *site = oxb_alloc(&t->arena, sizeof *site);
  site->line = 3;
  site->col = 9;
  site->what = "a[i]";
  oxb_vec_push(&t->arena, &t->k->sites, site);
  oxi_hexpr *la = oxb_alloc(&t->arena, sizeof *la), *lc = oxb_alloc(&t->arena, sizeof *lc),
            *ge = oxb_alloc(&t->arena, sizeof *ge);
  la->kind = lc->kind = OXI_H_LEN;
  la->param = 0;
  lc->param = 1;
  ge->kind = OXI_H_CMP;
  ge->sub = OXI_GE;
  ge->a = la;
  ge->b = lc;
  oxi_requires *rq = oxb_alloc(&t->arena, sizeof *rq);
  rq->expr = ge;
  rq->text = "a.len() >= c.len()";
  oxb_vec_push(&t->arena, &t->k->requires, rq);
  int slot = oxi_slot_new(&t->m, t->k, OX_U32);

  oxi_block *b0 = blk(t), *b1 = blk(t), *b2 = blk(t);
  oxi_instr *tid = ins(t, b0, OXI_SREG, OX_U32, OXI_SREG_TID_X, NULL, NULL, NULL);
  oxi_instr *i = ins(t, b0, OXI_CAST, OX_U64, 0, tid, NULL, NULL);
  oxi_instr *len = mem(t, b0, OXI_LEN, OX_U64, 0, NULL, NULL);
  oxi_instr *n = ins(t, b0, OXI_PARAM, OX_U32, 0, NULL, NULL, NULL);
  n->index = 2;
  ins(t, b0, OXI_VAR_SET, OXI_VOID, 0, n, NULL, NULL)->index = slot;
  oxi_instr *lt = ins(t, b0, OXI_CMP, OX_BOOL, OXI_LT, i, len, NULL);
  condbr(t, b0, lt, b1, b2);

  oxi_instr *x = mem(t, b1, OXI_LOAD, OX_F32, 0, i, NULL);
  x->check = 1;
  oxi_instr *two = konst(t, b1, OX_F32, 2);
  oxi_instr *y = ins(t, b1, OXI_BIN, OX_F32, OXI_MUL, x, two, NULL);
  mem(t, b1, OXI_STORE, OXI_VOID, 1, i, y);
  oxi_instr *zero = konst(t, b1, OX_U64, 0);
  oxi_instr *one = konst(t, b1, OX_U32, 1);
  mem(t, b1, OXI_ATOMIC, OX_U32, 3, zero, one)->sub = OXI_ADD;
  oxi_instr *sv = ins(t, b1, OXI_VAR_GET, OX_U32, 0, NULL, NULL, NULL);
  sv->index = slot;
  ins(t, b1, OXI_MATH, OX_F32, OXI_M_SQRT, y, NULL, NULL);
  ins(t, b1, OXI_BARRIER, OXI_VOID, 0, NULL, NULL, NULL);
  br(t, b1, b2);
  ret(t, b2);
}

static const char good_text[] =
    "kernel good(%a: &[] f32, %c: &mut [] f32, %n: u32, %h: &[Atomic] u32) block(64, 1, 1) sync {\n"
    "  requires (len(%a) ge len(%c))\n"
    "  shared0: [f32; 64] at 0\n"
    "  $0: u32\n"
    "  bb0:\n"
    "    v0: u32 = sreg tid.x\n"
    "    v1: u64 = cast v0\n"
    "    v2: u64 = len %a\n"
    "    v3: u32 = param %n\n"
    "    var.set $0, v3\n"
    "    v4: bool = cmp.lt v1, v2\n"
    "    condbr v4, bb1, bb2\n"
    "  bb1:\n"
    "    v5: f32 = load %a, v1  [checked 3:9]\n"
    "    v6: f32 = const 2\n"
    "    v7: f32 = bin.mul v5, v6\n"
    "    store %c, v1, v7  [unchecked]\n"
    "    v8: u64 = const 0\n"
    "    v9: u32 = const 1\n"
    "    v10: u32 = atomic.add %h, v8, v9  [unchecked]\n"
    "    v11: u32 = var.get $0\n"
    "    v12: f32 = math.sqrt v7\n"
    "    barrier\n"
    "    br bb2\n"
    "  bb2:\n"
    "    ret\n"
    "}\n";

/* ------------------------------------------------------------ bad IR */

/* Each builds a kernel "bad" with one defect. */
typedef void (*builder)(T *t);

static void bad_no_terminator(T *t) {
  oxi_block *b = blk(t);
  konst(t, b, OX_U32, 1);
}

static void bad_terminator_mid_block(T *t) {
  oxi_block *b0 = blk(t), *b1 = blk(t);
  br(t, b0, b1);
  ret(t, b0);
  ret(t, b1);
}

static void bad_operand_types(T *t) {
  oxi_block *b = blk(t);
  oxi_instr *x = konst(t, b, OX_U32, 1), *y = konst(t, b, OX_F32, 1);
  ins(t, b, OXI_BIN, OX_U32, OXI_ADD, x, y, NULL);
  ret(t, b);
}

static void bad_float_shift(T *t) {
  oxi_block *b = blk(t);
  oxi_instr *x = konst(t, b, OX_F32, 1), *y = konst(t, b, OX_F32, 2);
  ins(t, b, OXI_BIN, OX_F32, OXI_SHL, x, y, NULL);
  ret(t, b);
}

static void bad_float_not(T *t) {
  oxi_block *b = blk(t);
  ins(t, b, OXI_NOT, OX_F64, 0, konst(t, b, OX_F64, 1), NULL, NULL);
  ret(t, b);
}

static void bad_cmp_types(T *t) {
  oxi_block *b = blk(t);
  oxi_instr *x = konst(t, b, OX_U32, 1), *y = konst(t, b, OX_I32, 1);
  ins(t, b, OXI_CMP, OX_BOOL, OXI_EQ, x, y, NULL);
  ret(t, b);
}

/* bb0: condbr -> bb1 | bb2; bb1 defines v, both reach bb3, which uses v. */
static void bad_not_dominated(T *t) {
  oxi_block *b0 = blk(t), *b1 = blk(t), *b2 = blk(t), *b3 = blk(t);
  oxi_instr *c = konst(t, b0, OX_BOOL, 1);
  condbr(t, b0, c, b1, b2);
  oxi_instr *v = konst(t, b1, OX_U32, 7);
  br(t, b1, b3);
  br(t, b2, b3);
  ins(t, b3, OXI_NEG, OX_U32, 0, v, NULL, NULL);
  ret(t, b3);
}

static void bad_use_before_def(T *t) {
  oxi_block *b = blk(t);
  oxi_instr *neg = ins(t, b, OXI_NEG, OX_I32, 0, NULL, NULL, NULL);
  neg->ops[0] = konst(t, b, OX_I32, 1);
  neg->nops = 1;
  ret(t, b);
}

static void bad_unplaced_operand(T *t) {
  oxi_block *b = blk(t);
  oxi_instr *loose = konst(t, NULL, OX_I32, 1);
  ins(t, b, OXI_NEG, OX_I32, 0, loose, NULL, NULL);
  ret(t, b);
}

static void bad_store_readonly(T *t) {
  param(t, "a", OXI_P_SLICE, OX_F32);
  oxi_block *b = blk(t);
  oxi_instr *i = konst(t, b, OX_U64, 0), *v = konst(t, b, OX_F32, 1);
  mem(t, b, OXI_STORE, OXI_VOID, 0, i, v);
  ret(t, b);
}

static void bad_store_atomic(T *t) {
  param(t, "h", OXI_P_ATOMIC, OX_U32);
  oxi_block *b = blk(t);
  oxi_instr *i = konst(t, b, OX_U64, 0), *v = konst(t, b, OX_U32, 1);
  mem(t, b, OXI_STORE, OXI_VOID, 0, i, v);
  ret(t, b);
}

static void bad_load_atomic(T *t) {
  param(t, "h", OXI_P_ATOMIC, OX_U32);
  oxi_block *b = blk(t);
  mem(t, b, OXI_LOAD, OX_U32, 0, konst(t, b, OX_U64, 0), NULL);
  ret(t, b);
}

static void bad_load_type(T *t) {
  param(t, "a", OXI_P_SLICE, OX_F32);
  oxi_block *b = blk(t);
  mem(t, b, OXI_LOAD, OX_I32, 0, konst(t, b, OX_U64, 0), NULL);
  ret(t, b);
}

static void bad_store_type(T *t) {
  param(t, "c", OXI_P_DISJOINT, OX_F32);
  oxi_block *b = blk(t);
  oxi_instr *i = konst(t, b, OX_U64, 0), *v = konst(t, b, OX_F64, 1);
  mem(t, b, OXI_STORE, OXI_VOID, 0, i, v);
  ret(t, b);
}

static void bad_index_type(T *t) {
  param(t, "a", OXI_P_SLICE, OX_F32);
  oxi_block *b = blk(t);
  mem(t, b, OXI_LOAD, OX_F32, 0, konst(t, b, OX_U32, 0), NULL);
  ret(t, b);
}

static void bad_mem_range(T *t) {
  param(t, "a", OXI_P_SLICE, OX_F32);
  oxi_block *b = blk(t);
  mem(t, b, OXI_LOAD, OX_F32, 1, konst(t, b, OX_U64, 0), NULL);
  ret(t, b);
}

static void bad_mem_scalar(T *t) {
  param(t, "n", OXI_P_SCALAR, OX_U64);
  oxi_block *b = blk(t);
  mem(t, b, OXI_LEN, OX_U64, 0, NULL, NULL);
  ret(t, b);
}

static void bad_check_site(T *t) {
  param(t, "a", OXI_P_SLICE, OX_F32);
  oxi_block *b = blk(t);
  mem(t, b, OXI_LOAD, OX_F32, 0, konst(t, b, OX_U64, 0), NULL)->check = 1; /* no sites */
  ret(t, b);
}

static void bad_slot_index(T *t) {
  oxi_slot_new(&t->m, t->k, OX_U32);
  oxi_block *b = blk(t);
  ins(t, b, OXI_VAR_GET, OX_U32, 0, NULL, NULL, NULL)->index = 1;
  ret(t, b);
}

static void bad_slot_type(T *t) {
  oxi_slot_new(&t->m, t->k, OX_U32);
  oxi_block *b = blk(t);
  ins(t, b, OXI_VAR_SET, OXI_VOID, 0, konst(t, b, OX_I64, 1), NULL, NULL)->index = 0;
  ret(t, b);
}

static void bad_param(T *t) {
  param(t, "n", OXI_P_SCALAR, OX_U32);
  oxi_block *b = blk(t);
  ins(t, b, OXI_PARAM, OX_I32, 0, NULL, NULL, NULL)->index = 0;
  ret(t, b);
}

static void bad_condbr(T *t) {
  oxi_block *b0 = blk(t), *b1 = blk(t);
  condbr(t, b0, konst(t, b0, OX_U32, 1), b1, b1);
  ret(t, b1);
}

static void bad_branch_elsewhere(T *t) {
  oxi_block *b0 = blk(t);
  oxi_block *stray = oxb_alloc(&t->arena, sizeof *stray); /* id 0, but not this kernel's bb0 */
  br(t, b0, stray);
}

static void bad_select(T *t) {
  oxi_block *b = blk(t);
  oxi_instr *c = konst(t, b, OX_BOOL, 1), *x = konst(t, b, OX_U32, 1), *y = konst(t, b, OX_U64, 2);
  ins(t, b, OXI_SELECT, OX_U32, 0, c, x, y);
  ret(t, b);
}

static void bad_vote(T *t) {
  oxi_block *b = blk(t);
  ins(t, b, OXI_VOTE, OX_BOOL, 0, konst(t, b, OX_U32, 1), NULL, NULL);
  ret(t, b);
}

static void bad_shfl(T *t) {
  oxi_block *b = blk(t);
  oxi_instr *v = konst(t, b, OX_F32, 1), *lane = konst(t, b, OX_U64, 1);
  ins(t, b, OXI_SHFL, OX_F32, 0, v, lane, NULL);
  ret(t, b);
}

static void bad_math(T *t) {
  oxi_block *b = blk(t);
  ins(t, b, OXI_MATH, OX_F32, OXI_M_SQRT, konst(t, b, OX_F64, 2), NULL, NULL);
  ret(t, b);
}

static void bad_sreg(T *t) {
  oxi_block *b = blk(t);
  ins(t, b, OXI_SREG, OX_U64, OXI_SREG_TID_X, NULL, NULL, NULL);
  ret(t, b);
}

static void bad_assume(T *t) {
  oxi_block *b = blk(t);
  ins(t, b, OXI_ASSUME, OXI_VOID, 0, konst(t, b, OX_I64, 1), NULL, NULL);
  ret(t, b);
}

static void bad_atomic_type(T *t) {
  param(t, "h", OXI_P_ATOMIC, OX_U32);
  oxi_block *b = blk(t);
  mem(t, b, OXI_ATOMIC, OX_U32, 0, konst(t, b, OX_U64, 0), konst(t, b, OX_I32, 1))->sub = OXI_ADD;
  ret(t, b);
}

static void bad_no_blocks(T *t) { (void)t; }

static void bad_value_twice(T *t) {
  oxi_block *b = blk(t);
  oxi_instr *x = konst(t, b, OX_U32, 1);
  oxb_vec_push(&t->arena, &b->instrs, x); /* the same instruction placed twice */
  ret(t, b);
}

static const struct {
  const char *name;
  builder build;
  const char *msg; /* the verifier's line, after "IR verifier: kernel bad, " */
} bad[] = {
    {"missing terminator", bad_no_terminator, "bb0, - (v-1): block does not end in a terminator"},
    {"terminator mid-block", bad_terminator_mid_block,
     "bb0, br (v-1): terminator in the middle of a block"},
    {"operand type mismatch", bad_operand_types,
     "bb0, bin (v2): binary operands must share the result type"},
    {"float shift", bad_float_shift,
     "bb0, bin (v2): binary operation not defined for its type"},
    {"float not", bad_float_not, "bb0, not (v1): unary operation not defined for its type"},
    {"cmp type mismatch", bad_cmp_types, "bb0, cmp (v2): cmp of mismatched types"},
    {"use not dominated", bad_not_dominated,
     "bb3, neg (v2): operand is used where its definition does not dominate the use"},
    {"use before definition", bad_use_before_def,
     "bb0, neg (v0): operand is used where its definition does not dominate the use"},
    {"operand placed nowhere", bad_unplaced_operand,
     "bb0, neg (v1): operand is not a value placed in this kernel"},
    {"store to a read-only slice", bad_store_readonly,
     "bb0, store (v-1): store to a read-only or atomic slice"},
    {"store to an atomic slice", bad_store_atomic,
     "bb0, store (v-1): store to a read-only or atomic slice"},
    {"plain load of an atomic slice", bad_load_atomic,
     "bb0, load (v1): plain load from an atomic slice"},
    {"load of the wrong type", bad_load_type, "bb0, load (v1): load type differs from memory"},
    {"store of the wrong type", bad_store_type,
     "bb0, store (v-1): stored value type differs from memory"},
    {"index not u64", bad_index_type, "bb0, load (v1): index must be u64"},
    {"memory out of range", bad_mem_range, "bb0, load (v1): memory reference out of range"},
    {"memory is a scalar", bad_mem_scalar, "bb0, len (v0): memory reference names a scalar parameter"},
    {"bad check site", bad_check_site, "bb0, load (v1): bad check site"},
    {"bad slot index", bad_slot_index, "bb0, var.get (v0): no such variable slot"},
    {"slot type mismatch", bad_slot_type, "bb0, var.set (v-1): variable slot type mismatch"},
    {"param of the wrong type", bad_param,
     "bb0, param (v0): param does not name a scalar parameter of this type"},
    {"condbr on a non-bool", bad_condbr, "bb0, condbr (v-1): condbr needs bool and 2 targets"},
    {"branch to another kernel's block", bad_branch_elsewhere,
     "bb0, br (v-1): branch to a block of another kernel"},
    {"select types", bad_select, "bb0, select (v3): select types"},
    {"vote of a non-bool", bad_vote, "bb0, vote (v1): vote of a non-bool"},
    {"shfl lane type", bad_shfl, "bb0, shfl (v2): shfl operands"},
    {"math operand type", bad_math, "bb0, math (v1): math operand type differs from result"},
    {"sreg type", bad_sreg, "bb0, sreg (v0): special registers are u32"},
    {"assume of a non-bool", bad_assume, "bb0, assume (v-1): assume of a non-bool"},
    {"atomic operand type", bad_atomic_type,
     "bb0, atomic (v2): atomic operand types differ from memory"},
    {"no blocks", bad_no_blocks, "bb-1, - (v-1): kernel has no blocks"},
    {"value defined twice", bad_value_twice, "bb0, const (v0): value defined twice"},
};

/* --------------------------------------------------------------- tests */

static void test_good(void) {
  T t;
  build_good(&t);
  oxb_str err = {0};
  bool ok = oxi_verify(&t.m, &err);
  CHECK(ok, "the verifier rejects a well-formed kernel:\n%s", err.buf ? err.buf : "");
  oxb_str_free(&err);
  oxb_str out = {0};
  oxi_print(&t.m, &out);
  CHECK(out.buf && !strcmp(out.buf, good_text), "printer output differs:\n%s\n-- expected:\n%s",
        out.buf ? out.buf : "", good_text);
  oxb_str_free(&out);
  oxb_arena_free(&t.arena);
}

static void test_bad(void) {
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    T t;
    t_init(&t, "bad");
    bad[i].build(&t);
    oxb_str err = {0};
    bool ok = oxi_verify(&t.m, &err);
    char want[256];
    snprintf(want, sizeof want, "IR verifier: kernel bad, %s\n", bad[i].msg);
    CHECK(!ok, "%s: the verifier accepts it", bad[i].name);
    CHECK(err.buf && strstr(err.buf, want), "%s: expected\n  %s got\n  %s", bad[i].name, want,
          err.buf ? err.buf : "(nothing)");
    oxb_str_free(&err);
    oxb_arena_free(&t.arena);
  }
}

/* Every problem is reported, and a good kernel next to a bad one stays quiet. */
static void test_several(void) {
  T t;
  build_good(&t);
  oxi_kernel *good = t.k;
  t.k = oxi_kernel_new(&t.m, "bad");
  oxi_block *b = blk(&t);
  oxi_instr *x = konst(&t, b, OX_U32, 1), *y = konst(&t, b, OX_F32, 1);
  ins(&t, b, OXI_BIN, OX_U32, OXI_ADD, x, y, NULL);
  ins(&t, b, OXI_VOTE, OX_BOOL, 0, x, NULL, NULL);
  oxb_str err = {0};
  CHECK(!oxi_verify(&t.m, &err), "accepts a module with a bad kernel");
  const char *e = err.buf ? err.buf : "";
  CHECK(strstr(e, "kernel bad, bb0, - (v-1): block does not end in a terminator") &&
            !strstr(e, "kernel good"),
        "structural problems: %s", e);
  /* with the terminator in place, the two instruction problems both show */
  oxb_str_free(&err);
  ret(&t, b);
  CHECK(!oxi_verify(&t.m, &err), "accepts a module with a bad kernel");
  e = err.buf ? err.buf : "";
  CHECK(strstr(e, "bin (v2): binary operands") && strstr(e, "vote (v3): vote of a non-bool") &&
            !strstr(e, "kernel good"),
        "instruction problems: %s", e);
  (void)good;
  oxb_str_free(&err);
  oxb_arena_free(&t.arena);
}

/* Loops: a value defined in a loop header dominates the body and the exit;
 * one defined in the body does not reach the exit. */
static void test_loops(void) {
  for (int body_def = 0; body_def < 2; body_def++) {
    T t;
    t_init(&t, "loop");
    oxi_block *entry = blk(&t), *head = blk(&t), *body = blk(&t), *exit = blk(&t);
    br(&t, entry, head);
    oxi_instr *hv = konst(&t, head, OX_BOOL, 1);
    condbr(&t, head, hv, body, exit);
    oxi_instr *bv = konst(&t, body, OX_BOOL, 0);
    br(&t, body, head);
    ins(&t, exit, OXI_NOT, OX_BOOL, 0, body_def ? bv : hv, NULL, NULL);
    ret(&t, exit);
    oxb_str err = {0};
    bool ok = oxi_verify(&t.m, &err);
    CHECK(ok == !body_def, "loop (use of the %s value): %s", body_def ? "body" : "header",
          err.buf ? err.buf : "accepted");
    oxb_str_free(&err);
    oxb_arena_free(&t.arena);
  }
}

/* Dominance on random CFGs, against its definition: block a dominates b when
 * b cannot be reached from the entry without passing a. A value defined in
 * block a and used in block b verifies exactly when a dominates b, or b is
 * unreachable (code there never runs). */
static bool reaches_avoiding(int n, int succ[][2], int avoid, int target) {
  bool seen[64] = {0};
  int stack[64], sp = 0;
  if (avoid == 0)
    return false;
  stack[sp++] = 0;
  seen[0] = true;
  while (sp) {
    int b = stack[--sp];
    if (b == target)
      return true;
    for (int s = 0; s < 2; s++) {
      int c = succ[b][s];
      if (c >= 0 && c != avoid && !seen[c]) {
        seen[c] = true;
        stack[sp++] = c;
      }
    }
  }
  (void)n;
  return false;
}

static void test_dominance_random(void) {
  unsigned seed = 12345;
  int checked = 0;
  for (int round = 0; round < 300; round++) {
    int n = 2 + (int)((seed = seed * 1103515245u + 12345u) >> 16) % 30;
    int succ[64][2];
    for (int b = 0; b < n; b++)
      for (int s = 0; s < 2; s++) {
        int r = (int)((seed = seed * 1103515245u + 12345u) >> 16);
        succ[b][s] = s == 1 && r % 3 == 0 ? -1 : r % (n + 1) - 1; /* -1: none */
      }
    for (int b = 0; b < n; b++) /* no first successor: a return */
      if (succ[b][0] < 0)
        succ[b][1] = -1;
    int a = (int)((seed = seed * 1103515245u + 12345u) >> 16) % n;
    int u = (int)((seed = seed * 1103515245u + 12345u) >> 16) % n;
    if (a == u)
      continue;
    T t;
    t_init(&t, "rand");
    oxi_block *bb[64];
    for (int b = 0; b < n; b++)
      bb[b] = blk(&t);
    oxi_instr *def = konst(&t, bb[a], OX_U32, 7);
    ins(&t, bb[u], OXI_NEG, OX_U32, 0, def, NULL, NULL);
    for (int b = 0; b < n; b++) {
      if (succ[b][0] < 0)
        ret(&t, bb[b]);
      else if (succ[b][1] < 0)
        br(&t, bb[b], bb[succ[b][0]]);
      else
        condbr(&t, bb[b], konst(&t, bb[b], OX_BOOL, 1), bb[succ[b][0]], bb[succ[b][1]]);
    }
    bool reachable = reaches_avoiding(n, succ, -1, u);
    bool want = !reachable || !reaches_avoiding(n, succ, a, u);
    oxb_str err = {0};
    bool ok = oxi_verify(&t.m, &err);
    CHECK(ok == want, "random CFG %d (%d blocks, def in bb%d, use in bb%d): %s", round, n, a, u,
          err.buf ? err.buf : "accepted");
    oxb_str_free(&err);
    oxb_arena_free(&t.arena);
    checked++;
  }
  CHECK(checked > 200, "only %d random CFGs", checked);
}

/* A large CFG as the front end makes them (an inlined call's exit block is
 * made before the blocks of its body): 40,000 blocks in nested diamonds
 * verify at once. Dominator bit sets took minutes on this shape. */
static void test_dominance_large(void) {
  T t;
  t_init(&t, "big");
  enum { DEPTH = 10000 };
  oxi_block *cur = blk(&t);
  oxi_instr *v = konst(&t, cur, OX_U32, 1);
  oxi_block **exits = malloc(sizeof *exits * DEPTH);
  for (int d = 0; d < DEPTH; d++) { /* cur: if c { then... } else { ... }, exit made first */
    exits[d] = blk(&t);
    oxi_block *th = blk(&t), *el = blk(&t);
    condbr(&t, cur, konst(&t, cur, OX_BOOL, 1), th, el);
    br(&t, el, exits[d]);
    v = ins(&t, th, OXI_NEG, OX_U32, 0, v, NULL, NULL);
    cur = blk(&t);
    br(&t, th, cur);
  }
  for (int d = DEPTH - 1; d >= 0; d--) { /* cur falls through every exit, outermost last */
    br(&t, cur, exits[d]);
    cur = exits[d];
  }
  ins(&t, cur, OXI_NEG, OX_U32, 0, konst(&t, cur, OX_U32, 2), NULL, NULL);
  ret(&t, cur);
  uint64_t t0 = oxb_now_ns();
  oxb_str err = {0};
  bool ok = oxi_verify(&t.m, &err);
  double secs = (double)(oxb_now_ns() - t0) * 1e-9;
  CHECK(ok, "large CFG: %s", err.buf ? err.buf : "");
  CHECK(t.k->blocks.len == 4 * DEPTH + 1, "large CFG: %d blocks", t.k->blocks.len);
  CHECK(secs < 2.0, "verifying %d blocks took %.2f s", t.k->blocks.len, secs);
  oxb_str_free(&err);
  /* the innermost `then` value is used past the joins: not dominated */
  ins(&t, exits[0], OXI_NEG, OX_U32, 0, v, NULL, NULL);
  oxi_instr *last = exits[0]->instrs.items[exits[0]->instrs.len - 1];
  exits[0]->instrs.items[exits[0]->instrs.len - 1] = exits[0]->instrs.items[exits[0]->instrs.len - 2];
  exits[0]->instrs.items[exits[0]->instrs.len - 2] = last; /* keep the terminator last */
  CHECK(!oxi_verify(&t.m, &err) && err.buf && strstr(err.buf, "does not dominate"),
        "large CFG, use past the joins: %s", err.buf ? err.buf : "accepted");
  oxb_str_free(&err);
  free(exits);
  oxb_arena_free(&t.arena);
}

/* Every parameter kind prints (an atomic tensor's name was read past the end
 * of the printer's table: UBSan reports that). */
static void test_print_params(void) {
  T t;
  t_init(&t, "params");
  static const oxi_pkind kinds[] = {OXI_P_SCALAR, OXI_P_SLICE, OXI_P_MUTSLICE, OXI_P_ATOMIC,
                                    OXI_P_DISJOINT, OXI_P_TENSOR, OXI_P_TILE, OXI_P_ATENSOR};
  static const char *const names[] = {"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"};
  for (int i = 0; i < 8; i++)
    param(&t, names[i], kinds[i], OX_F32);
  ret(&t, blk(&t));
  oxb_str out = {0};
  oxi_print(&t.m, &out);
  CHECK(out.buf && strstr(out.buf, "kernel params(%p0: f32, %p1: &[] f32, %p2: &mut [] f32, "
                                   "%p3: &[Atomic] f32, %p4: DisjointSlice f32, %p5: &Tensor f32, "
                                   "%p6: &mut Tensor f32, %p7: &Tensor Atomic f32) {\n"),
        "parameter kinds printed as:\n%s", out.buf ? out.buf : "");
  oxb_str_free(&out);
  oxb_arena_free(&t.arena);
}

/* Printing of the other instructions. */
static void test_print_ops(void) {
  T t;
  t_init(&t, "ops");
  param(&t, "x", OXI_P_SCALAR, OX_I32);
  param(&t, "o", OXI_P_DISJOINT, OX_F64);
  oxi_block *b = blk(&t);
  oxi_instr *m1 = konst(&t, b, OX_I32, (uint64_t)-5);
  oxi_instr *f = konst(&t, b, OX_F64, 0);
  f->fimm = 0.25;
  oxi_instr *c = konst(&t, b, OX_BOOL, 1);
  ins(&t, b, OXI_SELECT, OX_I32, 0, c, m1, m1);
  ins(&t, b, OXI_SHFL, OX_F64, 3, f, ins(&t, b, OXI_SREG, OX_U32, OXI_SREG_LANEID, NULL, NULL, NULL), NULL);
  ins(&t, b, OXI_VOTE, OX_U32, 2, c, NULL, NULL);
  ins(&t, b, OXI_ASSUME, OXI_VOID, 0, c, NULL, NULL);
  ins(&t, b, OXI_MATH, OX_F64, OXI_M_FMA, f, f, f);
  ret(&t, b);
  oxb_str err = {0};
  CHECK(oxi_verify(&t.m, &err), "ops kernel: %s", err.buf ? err.buf : "");
  oxb_str_free(&err);
  oxb_str out = {0};
  oxi_print(&t.m, &out);
  const char *o = out.buf ? out.buf : "";
  static const char *const lines[] = {
      "kernel ops(%x: i32, %o: DisjointSlice f64) {\n", "    v0: i32 = const -5\n",
      "    v1: f64 = const 0.25\n",     "    v2: bool = const 1\n",
      "    v3: i32 = select v2, v0, v0\n", "    v4: u32 = sreg laneid\n",
      "    v5: f64 = shfl.xor v1, v4\n", "    v6: u32 = vote.ballot v2\n",
      "    assume v2\n",                 "    v7: f64 = math.fma v1, v1, v1\n"};
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
    CHECK(strstr(o, lines[i]), "missing printed line %s in:\n%s", lines[i], o);
  oxb_str_free(&out);
  oxb_arena_free(&t.arena);
}

/* Hopper's warpgroup ops: a well-formed sequence verifies and prints; each
 * kind of misuse is named. Variant v (0 = good) breaks one thing. */
static void wgmma_kernel(T *t, int v) {
  t_init(t, "wg");
  oxi_shared *sh = oxb_alloc(&t->arena, sizeof *sh);
  sh->dtype = OX_BF16;
  sh->count = 64 * 64 + 64 * 128;
  sh->align = 1024;
  oxb_vec_push(&t->arena, &t->k->shared, sh);
  param(t, "x", OXI_P_SLICE, OX_BF16);
  oxi_block *b = blk(t);
  oxi_instr *zero = konst(t, b, oxi_vf32(64), 0);
  oxi_instr *one = konst(t, b, v == 1 ? OX_I32 : OX_F32, 1);
  oxi_instr *acc = ins(t, b, OXI_VSET, oxi_vf32(64), 0, zero, one, NULL);
  acc->index = 3;
  oxi_instr *addr = ins(t, b, OXI_SHARED_ADDR, OX_U64, 0, konst(t, b, OX_U64, 0), NULL, NULL);
  addr->mem.kind = v == 2 ? OXI_MEM_PARAM : OXI_MEM_SHARED;
  ins(t, b, OXI_FENCE_ASYNC, OXI_VOID, 0, NULL, NULL, NULL);
  acc = ins(t, b, OXI_WGMMA_SYNC, oxi_vf32(64), 0, acc, NULL, NULL);
  oxi_instr *w = ins(t, b, OXI_WGMMA, oxi_vf32(64), OX_BF16, addr, addr, acc);
  w->imm = v == 3 ? 96 : 128; /* 96 columns: 48 registers, not 64 */
  oxi_instr *done = ins(t, b, OXI_WGMMA_SYNC, oxi_vf32(64), 1, w, NULL, NULL);
  done->imm = 1;
  ins(t, b, OXI_WGMMA_SYNC, OXI_VOID, 2, NULL, NULL, NULL);
  ins(t, b, OXI_UNPACK, OX_F32, 0, done, NULL, NULL)->index = v == 4 ? 64 : 63;
  ret(t, b);
}

static void test_wgmma(void) {
  static const char *const want[] = {
      NULL, "vset (v2): vset: a vf32 (vi32) with one register replaced by an f32 (i32)",
      "shared.addr (v4): shared.addr: u64 address of a shared array's element at a u64 index",
      "wgmma (v6): wgmma: vf32 x N/2 from A (a u64 descriptor or a v4), a u64 descriptor of B",
      "unpack (v8): unpack: a 32-bit scalar from a v4, or an f32 from a vf32"};
  for (int v = 0; v < 5; v++) {
    T t;
    wgmma_kernel(&t, v);
    oxb_str err = {0};
    bool ok = oxi_verify(&t.m, &err);
    if (!v) {
      CHECK(ok, "the verifier rejects good wgmma IR:\n%s", err.buf ? err.buf : "");
      oxb_str out = {0};
      oxi_print(&t.m, &out);
      const char *o = out.buf ? out.buf : "";
      static const char *const lines[] = {
          "  shared0: [bf16; 12288] at 0, align 1024\n", "    v0: vf32x64 = const 0\n", "    v2: vf32x64 = vset 3, v0, v1\n",
          "    v4: u64 = shared.addr shared0 v3\n", "    fence.async\n",
          "    v5: vf32x64 = wgmma.sync.fence v2\n", "    v6: vf32x64 = wgmma.m64n128k16.bf16 v4, v4, v5\n",
          "    v7: vf32x64 = wgmma.sync.commit.wait 1, v6\n", "    wgmma.sync.wait 0\n",
          "    v8: f32 = unpack 63, v7\n"};
      for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        CHECK(strstr(o, lines[i]), "missing printed line %s in:\n%s", lines[i], o);
      oxb_str_free(&out);
    } else {
      CHECK(!ok && err.buf && strstr(err.buf, want[v]), "wgmma variant %d: expected %s, got %s", v, want[v],
            err.buf ? err.buf : "(accepted)");
    }
    oxb_str_free(&err);
    oxb_arena_free(&t.arena);
  }
}

/* A vector store (a u64 of four 16-bit elements) and a 16-bit half of a
 * u32: accepted into 16-bit memory and as bf16/f16; variant v breaks one
 * thing (1: into f32 memory, 2: a half as f32, 3: half 2). */
static void vector_kernel(T *t, int v) {
  t_init(t, "vec");
  param(t, "c", OXI_P_DISJOINT, v == 1 ? OX_F32 : OX_BF16);
  oxi_block *b = blk(t);
  oxi_instr *two = konst(t, b, OX_U32, 0x3f803f80);
  oxi_instr *h = ins(t, b, OXI_UNPACK, v == 2 ? OX_F32 : OX_BF16, 0, two, NULL, NULL);
  h->index = v == 3 ? 2 : 1;
  mem(t, b, OXI_STORE, OXI_VOID, 0, konst(t, b, OX_U64, 4), konst(t, b, OX_U64, 0x3f803f803f803f80ull));
  mem(t, b, OXI_STORE, OXI_VOID, 0, konst(t, b, OX_U64, 0), v == 1 ? konst(t, b, OX_F32, 1) : h);
  ret(t, b);
}

static void test_vector_store(void) {
  static const char *const want[] = {NULL, "store (v-1): stored value type differs from memory",
                                     "unpack (v1): unpack: a bf16 or f16 from half 0 or 1 of a u32",
                                     "unpack (v1): unpack: a bf16 or f16 from half 0 or 1 of a u32"};
  for (int v = 0; v < 4; v++) {
    T t;
    vector_kernel(&t, v);
    oxb_str err = {0};
    bool ok = oxi_verify(&t.m, &err);
    if (!v)
      CHECK(ok, "the verifier rejects a vector store:\n%s", err.buf ? err.buf : "");
    else
      CHECK(!ok && err.buf && strstr(err.buf, want[v]), "vector variant %d: expected %s, got %s", v, want[v],
            err.buf ? err.buf : "(accepted)");
    oxb_str_free(&err);
    oxb_arena_free(&t.arena);
  }
}

/* setmaxnreg: variant 0 the producer's decrease to 40 (accepted, printed);
 * 1 to 20 registers, 2 to 44 (not a multiple of 8), 3 an unknown direction. */
static void test_setmaxnreg(void) {
  for (int v = 0; v < 4; v++) {
    T t;
    t_init(&t, "regs");
    oxi_block *b = blk(&t);
    oxi_instr *r = ins(&t, b, OXI_SETMAXNREG, OXI_VOID, v == 3 ? 2 : 0, NULL, NULL, NULL);
    r->imm = v == 1 ? 20 : v == 2 ? 44 : 40;
    ret(&t, b);
    oxb_str err = {0};
    bool ok = oxi_verify(&t.m, &err);
    if (!v) {
      CHECK(ok, "the verifier rejects setmaxnreg.dec 40:\n%s", err.buf ? err.buf : "");
      oxb_str out = {0};
      oxi_print(&t.m, &out);
      CHECK(out.buf && strstr(out.buf, "    setmaxnreg.dec 40\n"), "printed: %s", out.buf ? out.buf : "");
      oxb_str_free(&out);
    } else {
      CHECK(!ok && err.buf && strstr(err.buf, "setmaxnreg: no operands, dec (0) or inc (1), 24 to 256 registers by 8"),
            "setmaxnreg variant %d: got %s", v, err.buf ? err.buf : "(accepted)");
    }
    oxb_str_free(&err);
    oxb_arena_free(&t.arena);
  }
}

int main(void) {
  test_good();
  test_wgmma();
  test_vector_store();
  test_setmaxnreg();
  test_bad();
  test_several();
  test_loops();
  test_dominance_random();
  test_dominance_large();
  test_print_params();
  test_print_ops();
  if (failures) {
    fprintf(stderr, "ir_test: %d failure(s)\n", failures);
    return 1;
  }
  printf("ir_test: %zu bad-IR cases and the good kernel passed\n", sizeof bad / sizeof bad[0]);
  return 0;
}
