/* codegen.c - Oxide IR to LLVM IR.
 *
 * One lowering for both targets. What differs is behind small hooks: how a
 * thread finds its indices (PTX special registers, or arguments and the CPU
 * context), barriers and warp operations (PTX intrinsics, or calls into the
 * CPU executor), shared memory (address space 3, or the block's buffer), and
 * math functions (math.c).
 *
 * Safety is kept in the generated code, not only in the front end: integer
 * division by zero, shifts by too much and float-to-int overflow are defined
 * here (Rust's wrapping/saturating results), because on the CPU they would
 * otherwise trap or be undefined. */
#include "backend/codegen.h"

#include <llvm-c/Analysis.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define PTX_KERNEL_CC 71 /* llvm::CallingConv::PTX_Kernel */

static LLVMTypeRef llty(cg_t *C, oxi_type t) {
  switch (t) {
  case OX_BOOL: return LLVMInt1TypeInContext(C->ctx);
  case OX_I8: case OX_U8: case OX_F8E4M3: case OX_F8E5M2: return LLVMInt8TypeInContext(C->ctx);
  case OX_I16: case OX_U16: return LLVMInt16TypeInContext(C->ctx);
  case OX_I32: case OX_U32: return LLVMInt32TypeInContext(C->ctx);
  case OX_I64: case OX_U64: return LLVMInt64TypeInContext(C->ctx);
  case OX_F16: return LLVMHalfTypeInContext(C->ctx);
  case OX_BF16: return LLVMBFloatTypeInContext(C->ctx);
  case OX_F32: case OX_TF32: return LLVMFloatTypeInContext(C->ctx);
  case OX_F64: return LLVMDoubleTypeInContext(C->ctx);
  case OXI_V4: return LLVMVectorType(LLVMInt32TypeInContext(C->ctx), 4);
  default: break;
  }
  if (oxi_is_vacc(t)) { /* the struct an inline asm statement with n "=f" (vi32: "=r") outputs returns */
    LLVMTypeRef f[OXI_VF32_MAX];
    for (int i = 0; i < oxi_vacc_len(t); i++)
      f[i] = oxi_vacc_is_int(t) ? LLVMInt32TypeInContext(C->ctx) : LLVMFloatTypeInContext(C->ctx);
    return LLVMStructTypeInContext(C->ctx, f, (unsigned)oxi_vacc_len(t), 0);
  }
  return LLVMVoidTypeInContext(C->ctx);
}

/* In memory and in parameters a bool is a byte. */
static LLVMTypeRef memty(cg_t *C, oxi_type t) {
  return t == OX_BOOL ? LLVMInt8TypeInContext(C->ctx) : llty(C, t);
}

static LLVMTypeRef i32t(cg_t *C) { return LLVMInt32TypeInContext(C->ctx); }
static LLVMTypeRef i64t(cg_t *C) { return LLVMInt64TypeInContext(C->ctx); }
static LLVMTypeRef f32t(cg_t *C) { return LLVMFloatTypeInContext(C->ctx); }
static LLVMTypeRef voidt(cg_t *C) { return LLVMVoidTypeInContext(C->ctx); }
static LLVMTypeRef ptrt(cg_t *C, unsigned as) { return LLVMPointerTypeInContext(C->ctx, as); }
static LLVMValueRef ci32(cg_t *C, uint64_t v) { return LLVMConstInt(i32t(C), v, 0); }
static LLVMValueRef ci64(cg_t *C, uint64_t v) { return LLVMConstInt(i64t(C), v, 0); }

static LLVMValueRef val(cg_t *C, const oxi_instr *v) {
  assert(v->id >= 0 && v->id < C->k->next_id && C->vals[v->id]);
  return C->vals[v->id];
}

/* tf32 is an f32 whose 13 low mantissa bits are zero: `float` in LLVM, in
 * registers and in (shared) memory, rounded wherever a value becomes tf32 --
 * to nearest, ties away from zero, as the GPU's cvt.rna.tf32.f32 does. */
static double tf32_const(double v);
static LLVMValueRef tf32_round(cg_t *C, LLVMValueRef f);

static LLVMValueRef fconst(cg_t *C, oxi_type t, double v) {
  return LLVMConstReal(llty(C, t), t == OX_TF32 ? tf32_const(v) : v);
}

/* ---------------------------------------------------------------- math */

/* f16/bf16 compute in f32 and round once at the end, the same on both targets.
 * (tf32 too, but its values are already f32: no extension, see tf32_round.) */
static bool narrow_float(oxi_type t) { return t == OX_F16 || t == OX_BF16; }
static LLVMValueRef narrow_result(cg_t *C, LLVMValueRef r, oxi_type t);
static LLVMValueRef bf16_round(cg_t *C, LLVMValueRef f);

static LLVMValueRef math(cg_t *C, const oxi_instr *in) {
  oxi_type t = in->type;
  LLVMValueRef a[6];
  assert(in->nops <= 6);
  for (int i = 0; i < in->nops; i++)
    a[i] = val(C, in->ops[i]);
  if (in->sub >= OXI_M_PHILOX0 && in->sub <= OXI_M_PHILOX3)
    return oxl_philox(C, a, in->sub - OXI_M_PHILOX0);
  if (oxi_is_int(t)) {
    bool s = oxi_is_signed(t);
    switch (in->sub) {
    case OXI_M_ABS: {
      LLVMValueRef neg = LLVMBuildNeg(C->b, a[0], "");
      LLVMValueRef lt = LLVMBuildICmp(C->b, LLVMIntSLT, a[0], LLVMConstInt(llty(C, t), 0, 0), "");
      return LLVMBuildSelect(C->b, lt, neg, a[0], "");
    }
    case OXI_M_MIN: return oxl_intrinsic2(C, s ? "smin" : "umin", a[0], a[1]);
    case OXI_M_MAX: return oxl_intrinsic2(C, s ? "smax" : "umax", a[0], a[1]);
    case OXI_M_CLAMP:
      return oxl_intrinsic2(C, s ? "smin" : "umin", oxl_intrinsic2(C, s ? "smax" : "umax", a[0], a[1]), a[2]);
    case OXI_M_SIGNUM: { /* -1, 0 or 1 (unsigned: 0 or 1) */
      LLVMTypeRef ty = llty(C, t);
      LLVMValueRef pos = LLVMBuildZExt(C->b, LLVMBuildICmp(C->b, s ? LLVMIntSGT : LLVMIntUGT, a[0], LLVMConstInt(ty, 0, 0), ""), ty, "");
      if (!s)
        return pos;
      LLVMValueRef neg = LLVMBuildZExt(C->b, LLVMBuildICmp(C->b, LLVMIntSLT, a[0], LLVMConstInt(ty, 0, 0), ""), ty, "");
      return LLVMBuildSub(C->b, pos, neg, "");
    }
    default: assert(!"integer math"); return NULL;
    }
  }
  oxi_type ct = t;
  if (narrow_float(t)) {
    for (int i = 0; i < in->nops; i++)
      a[i] = LLVMBuildFPExt(C->b, a[i], f32t(C), "");
    ct = OX_F32;
  }
  if (t == OX_TF32)
    ct = OX_F32;
  LLVMValueRef r = oxl_math_float(C, in->sub, ct, a);
  if (narrow_float(t) || t == OX_TF32)
    r = narrow_result(C, r, t);
  return r;
}

/* Rounds an f32 result to f16/bf16/tf32. */
static LLVMValueRef narrow_result(cg_t *C, LLVMValueRef r, oxi_type t) {
  if (t == OX_TF32)
    return tf32_round(C, r);
  if (t == OX_BF16 && C->opt->target == OXL_CPU)
    return bf16_round(C, r);
  return LLVMBuildFPTrunc(C->b, r, llty(C, t), "");
}

/* -------------------------------------------------------- arithmetic */

/* Whether the kernel being generated issues wgmma. */
static bool has_wgmma(const oxi_kernel *k) {
  for (int bi = 0; bi < k->blocks.len; bi++) {
    const oxi_block *b = k->blocks.items[bi];
    for (int i = 0; i < b->instrs.len; i++)
      if (((const oxi_instr *)b->instrs.items[i])->op == OXI_WGMMA)
        return true;
  }
  return false;
}

/* a / d or a % d of u64 (d != 0) without a call. ptxas makes div.u64 and rem.u64 a
 * subroutine call, and a call anywhere in a kernel makes the driver serialize every wgmma of
 * it (C7509): a kernel on wgmma that divides a usize index (`bh / heads`) would lose its
 * overlapped products. Operands below 2^32 (an index) take one 32-bit division; others a
 * loop of shifts and subtractions, one quotient bit a turn. */
static LLVMValueRef udiv64_inline(cg_t *C, LLVMValueRef a, LLVMValueRef d, bool rem) {
  LLVMTypeRef i64 = LLVMInt64TypeInContext(C->ctx), i32 = LLVMInt32TypeInContext(C->ctx);
  LLVMValueRef k0 = LLVMConstInt(i64, 0, 0), k1 = LLVMConstInt(i64, 1, 0);
  LLVMBasicBlockRef here = LLVMGetInsertBlock(C->b);
  LLVMBasicBlockRef small = LLVMAppendBasicBlockInContext(C->ctx, C->fn, "div32");
  LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(C->ctx, C->fn, "div64");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(C->ctx, C->fn, "divided");
  LLVMValueRef wide = LLVMBuildLShr(C->b, LLVMBuildOr(C->b, a, d, ""), LLVMConstInt(i64, 32, 0), "");
  LLVMBuildCondBr(C->b, LLVMBuildICmp(C->b, LLVMIntEQ, wide, k0, ""), small, loop);
  LLVMPositionBuilderAtEnd(C->b, small);
  LLVMValueRef a32 = LLVMBuildTrunc(C->b, a, i32, ""), d32 = LLVMBuildTrunc(C->b, d, i32, "");
  LLVMValueRef r32 = LLVMBuildZExt(C->b, rem ? LLVMBuildURem(C->b, a32, d32, "") : LLVMBuildUDiv(C->b, a32, d32, ""),
                                   i64, "");
  LLVMBuildBr(C->b, done);
  /* loop: bit i from 63 down to 0; r = 2 r + bit i of a; r >= d: r -= d, q |= 1 << i */
  LLVMPositionBuilderAtEnd(C->b, loop);
  LLVMValueRef i = LLVMBuildPhi(C->b, i64, "i"), q = LLVMBuildPhi(C->b, i64, "q"), r = LLVMBuildPhi(C->b, i64, "r");
  LLVMValueRef bit = LLVMBuildAnd(C->b, LLVMBuildLShr(C->b, a, i, ""), k1, "");
  LLVMValueRef r2 = LLVMBuildOr(C->b, LLVMBuildShl(C->b, r, k1, ""), bit, "");
  /* r's top bit before the shift: 2 r overflows, and then exceeds d as well */
  LLVMValueRef over = LLVMBuildICmp(C->b, LLVMIntSLT, r, k0, "");
  LLVMValueRef ge = LLVMBuildOr(C->b, over, LLVMBuildICmp(C->b, LLVMIntUGE, r2, d, ""), "");
  LLVMValueRef rn = LLVMBuildSelect(C->b, ge, LLVMBuildSub(C->b, r2, d, ""), r2, "");
  LLVMValueRef qn = LLVMBuildOr(C->b, q, LLVMBuildShl(C->b, LLVMBuildZExt(C->b, ge, i64, ""), i, ""), "");
  LLVMValueRef in = LLVMBuildSub(C->b, i, k1, "");
  LLVMBuildCondBr(C->b, LLVMBuildICmp(C->b, LLVMIntEQ, i, k0, ""), done, loop);
  LLVMValueRef iv[2] = {LLVMConstInt(i64, 63, 0), in}, qv[2] = {k0, qn}, rv[2] = {k0, rn};
  LLVMBasicBlockRef from[2] = {here, loop};
  LLVMAddIncoming(i, iv, from, 2);
  LLVMAddIncoming(q, qv, from, 2);
  LLVMAddIncoming(r, rv, from, 2);
  LLVMPositionBuilderAtEnd(C->b, done);
  LLVMValueRef out = LLVMBuildPhi(C->b, i64, "");
  LLVMValueRef ov[2] = {r32, rem ? rn : qn};
  LLVMBasicBlockRef ob[2] = {small, loop};
  LLVMAddIncoming(out, ov, ob, 2);
  return out;
}

/* The division or remainder of integers of type ty (d != 0), as LLVM's; 64-bit ones without
 * a call in a CUDA kernel on wgmma (udiv64_inline; signed through magnitudes: the quotient
 * truncates toward zero and the remainder takes a's sign, as Rust's). */
static LLVMValueRef int_divide(cg_t *C, LLVMValueRef a, LLVMValueRef d, bool s, bool rem) {
  LLVMTypeRef ty = LLVMTypeOf(a);
  if (C->opt->target != OXL_CUDA || LLVMGetIntTypeWidth(ty) != 64 || !has_wgmma(C->k)) {
    if (s)
      return rem ? LLVMBuildSRem(C->b, a, d, "") : LLVMBuildSDiv(C->b, a, d, "");
    return rem ? LLVMBuildURem(C->b, a, d, "") : LLVMBuildUDiv(C->b, a, d, "");
  }
  if (!s)
    return udiv64_inline(C, a, d, rem);
  LLVMValueRef zero = LLVMConstInt(ty, 0, 0);
  LLVMValueRef na = LLVMBuildICmp(C->b, LLVMIntSLT, a, zero, ""), nd = LLVMBuildICmp(C->b, LLVMIntSLT, d, zero, "");
  LLVMValueRef ma = LLVMBuildSelect(C->b, na, LLVMBuildNeg(C->b, a, ""), a, "");
  LLVMValueRef md = LLVMBuildSelect(C->b, nd, LLVMBuildNeg(C->b, d, ""), d, "");
  LLVMValueRef m = udiv64_inline(C, ma, md, rem); /* MIN's magnitude 2^63 is right as u64 */
  LLVMValueRef neg = rem ? na : LLVMBuildXor(C->b, na, nd, "");
  return LLVMBuildSelect(C->b, neg, LLVMBuildNeg(C->b, m, ""), m, "");
}

static LLVMValueRef binop(cg_t *C, const oxi_instr *in) {
  LLVMValueRef a = val(C, in->ops[0]), b = val(C, in->ops[1]);
  oxi_type t = in->type;
  if (oxi_is_float(t)) {
    bool narrow = narrow_float(t);
    if (narrow) {
      a = LLVMBuildFPExt(C->b, a, f32t(C), "");
      b = LLVMBuildFPExt(C->b, b, f32t(C), "");
    }
    LLVMValueRef r;
    switch (in->sub) {
    case OXI_ADD: r = LLVMBuildFAdd(C->b, a, b, ""); break;
    case OXI_SUB: r = LLVMBuildFSub(C->b, a, b, ""); break;
    case OXI_MUL: r = LLVMBuildFMul(C->b, a, b, ""); break;
    case OXI_DIV: r = LLVMBuildFDiv(C->b, a, b, ""); break;
    case OXI_REM: r = LLVMBuildFRem(C->b, a, b, ""); break;
    default: assert(!"float binop"); return NULL;
    }
    return narrow || t == OX_TF32 ? narrow_result(C, r, t) : r;
  }
  bool s = oxi_is_signed(t);
  LLVMTypeRef ty = llty(C, t);
  switch (in->sub) {
  case OXI_ADD: return in->nuw ? LLVMBuildNUWAdd(C->b, a, b, "") : LLVMBuildAdd(C->b, a, b, "");
  case OXI_SUB: return LLVMBuildSub(C->b, a, b, "");
  case OXI_MUL: return LLVMBuildMul(C->b, a, b, "");
  case OXI_AND: return LLVMBuildAnd(C->b, a, b, "");
  case OXI_OR: return LLVMBuildOr(C->b, a, b, "");
  case OXI_XOR: return LLVMBuildXor(C->b, a, b, "");
  case OXI_SHL:
  case OXI_SHR: {
    /* Rust's wrapping shift: the amount is taken modulo the bit width */
    unsigned w = LLVMGetIntTypeWidth(ty);
    b = LLVMBuildAnd(C->b, b, LLVMConstInt(ty, w - 1, 0), "");
    if (in->sub == OXI_SHL)
      return LLVMBuildShl(C->b, a, b, "");
    return s ? LLVMBuildAShr(C->b, a, b, "") : LLVMBuildLShr(C->b, a, b, "");
  }
  case OXI_DIV:
  case OXI_REM: {
    /* x / 0 would trap on the CPU: divide by 1 instead (the result is
     * unspecified, as on the GPU); MIN / -1 wraps as in Rust */
    LLVMValueRef zero = LLVMConstInt(ty, 0, 0), one = LLVMConstInt(ty, 1, 0);
    LLVMValueRef bad = LLVMBuildICmp(C->b, LLVMIntEQ, b, zero, "");
    if (s) {
      unsigned w = LLVMGetIntTypeWidth(ty);
      LLVMValueRef minv = LLVMConstInt(ty, (uint64_t)1 << (w - 1), 0);
      LLVMValueRef ovf = LLVMBuildAnd(C->b, LLVMBuildICmp(C->b, LLVMIntEQ, a, minv, ""),
                                      LLVMBuildICmp(C->b, LLVMIntEQ, b, LLVMConstAllOnes(ty), ""), "");
      bad = LLVMBuildOr(C->b, bad, ovf, "");
      /* MIN / -1 = MIN (wrapping), MIN % -1 = 0: dividing by 1 and negating gives
       * MIN for the quotient; the remainder by 1 is 0 */
      LLVMValueRef d = LLVMBuildSelect(C->b, bad, one, b, "");
      LLVMValueRef q = int_divide(C, a, d, true, in->sub == OXI_REM);
      if (in->sub == OXI_DIV)
        q = LLVMBuildSelect(C->b, ovf, LLVMBuildNeg(C->b, q, ""), q, "");
      return q;
    }
    LLVMValueRef d = LLVMBuildSelect(C->b, bad, one, b, "");
    return int_divide(C, a, d, false, in->sub == OXI_REM);
  }
  default: assert(!"int binop"); return NULL;
  }
}

static LLVMValueRef compare(cg_t *C, const oxi_instr *in) {
  LLVMValueRef a = val(C, in->ops[0]), b = val(C, in->ops[1]);
  oxi_type t = in->ops[0]->type;
  if (oxi_is_float(t)) {
    static const LLVMRealPredicate p[] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT,
                                          LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
    return LLVMBuildFCmp(C->b, p[in->sub], a, b, "");
  }
  static const LLVMIntPredicate ps[] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
  static const LLVMIntPredicate pu[] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
  return LLVMBuildICmp(C->b, oxi_is_signed(t) ? ps[in->sub] : pu[in->sub], a, b, "");
}

/* f32 -> bf16 rounded to nearest even, in integer operations: the CPU may
 * lack both an instruction and a library helper for it (what NVPTX does
 * natively on sm_80+, with the same result). NaN stays a quiet NaN. */
static LLVMValueRef bf16_round(cg_t *C, LLVMValueRef f) {
  LLVMValueRef u = LLVMBuildBitCast(C->b, f, i32t(C), "");
  LLVMValueRef lsb = LLVMBuildAnd(C->b, LLVMBuildLShr(C->b, u, ci32(C, 16), ""), ci32(C, 1), "");
  LLVMValueRef r = LLVMBuildAdd(C->b, u, LLVMBuildAdd(C->b, ci32(C, 0x7fff), lsb, ""), "");
  LLVMValueRef hi = LLVMBuildTrunc(C->b, LLVMBuildLShr(C->b, r, ci32(C, 16), ""), LLVMInt16TypeInContext(C->ctx), "");
  LLVMValueRef nan = LLVMBuildFCmp(C->b, LLVMRealUNO, f, f, "");
  hi = LLVMBuildSelect(C->b, nan, LLVMConstInt(LLVMInt16TypeInContext(C->ctx), 0x7fc0, 0), hi, "");
  return LLVMBuildBitCast(C->b, hi, LLVMBFloatTypeInContext(C->ctx), "");
}

/* f32 -> tf32, rounded to nearest with ties away from zero on the 13 dropped
 * mantissa bits. CUDA: the cvt.rna.tf32.f32 instruction (sm_80+). CPU: in
 * integer operations, with the GPU's results: adding half of the dropped
 * unit to the magnitude bits and clearing them rounds the magnitude half up
 * (ties away, for either sign); a carry moves into the exponent, and from
 * the largest binades into the infinity's pattern (0x7f7ff000 and up become
 * Inf, as IEEE rounding to nearest requires). Subnormals round the same way.
 * Inf and NaN are kept. (The GPU clears a NaN's 13 low payload bits, as
 * measured on an H200, so a NaN with payload only there becomes Inf there;
 * the default NaNs arithmetic makes have high payload bits and stay NaN.) */
static LLVMValueRef tf32_round(cg_t *C, LLVMValueRef f) {
  if (LLVMIsAConstantFP(f)) { /* `3 as tf32`: no instruction (inline asm does not fold) */
    LLVMBool lossy;
    return LLVMConstReal(f32t(C), tf32_const(LLVMConstRealGetDouble(f, &lossy)));
  }
  if (C->opt->target == OXL_CUDA) {
    static const char text[] = "cvt.rna.tf32.f32 $0, $1;";
    LLVMTypeRef p = f32t(C);
    LLVMTypeRef fty = LLVMFunctionType(i32t(C), &p, 1, 0);
    LLVMValueRef asmv = LLVMGetInlineAsm(fty, (char *)text, sizeof text - 1, "=r,f", 4, 0, 0,
                                         LLVMInlineAsmDialectATT, 0);
    return LLVMBuildBitCast(C->b, LLVMBuildCall2(C->b, fty, asmv, &f, 1, ""), f32t(C), "");
  }
  LLVMValueRef u = LLVMBuildBitCast(C->b, f, i32t(C), "");
  LLVMValueRef up = LLVMBuildAdd(C->b, u, ci32(C, 0x1000), "");
  LLVMValueRef r = LLVMBuildAnd(C->b, up, ci32(C, 0xffffe000u), "");
  LLVMValueRef mag = LLVMBuildAnd(C->b, u, ci32(C, 0x7fffffff), "");
  LLVMValueRef finite = LLVMBuildICmp(C->b, LLVMIntULT, mag, ci32(C, 0x7f800000), "");
  return LLVMBuildBitCast(C->b, LLVMBuildSelect(C->b, finite, r, u, ""), f32t(C), "");
}

/* The tf32 constant nearest v, through f32 as a cast from f64 goes. */
static double tf32_const(double v) {
  float f = (float)v;
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) < 0x7f800000u)
    u = (u + 0x1000u) & 0xffffe000u;
  memcpy(&f, &u, 4);
  return f;
}

/* fp8 (OCP formats: f8e4m3 is E4M3FN, bias 7, no infinities, NaN S.1111.111;
 * f8e5m2 is E5M2, bias 15, IEEE-like) <-> f32, in integer operations that are
 * the same on both targets (sm_89's cvt instructions are absent on sm_80 and
 * the CPU). Every fp8 value is an f32 value, so widening is exact. */
typedef struct fp8_format {
  unsigned M, bias, top; /* mantissa bits, exponent bias, the exponent of NaN/infinity (0: none) */
  double max, min_normal;
} fp8_format;

static fp8_format fp8_of(oxi_type t) {
  return t == OX_F8E4M3 ? (fp8_format){3, 7, 0, 448.0, 0x1p-6} : (fp8_format){2, 15, 31, 57344.0, 0x1p-14};
}

static LLVMValueRef fp8_to_f32(cg_t *C, LLVMValueRef v, oxi_type from) {
  fp8_format f = fp8_of(from);
  LLVMBuilderRef b = C->b;
  LLVMValueRef u = LLVMBuildZExt(b, v, i32t(C), "");
  LLVMValueRef sign = LLVMBuildShl(b, LLVMBuildAnd(b, u, ci32(C, 0x80), ""), ci32(C, 24), "");
  LLVMValueRef mag = LLVMBuildAnd(b, u, ci32(C, 0x7f), "");
  LLVMValueRef e = LLVMBuildLShr(b, mag, ci32(C, f.M), "");
  LLVMValueRef m = LLVMBuildAnd(b, mag, ci32(C, (1u << f.M) - 1), "");
  /* normal: the exponent rebiased, the mantissa moved to f32's top bits */
  LLVMValueRef normal = LLVMBuildAdd(b, LLVMBuildShl(b, mag, ci32(C, 23 - f.M), ""),
                                     ci32(C, (uint64_t)(127 - f.bias) << 23), "");
  /* subnormal: m * 2^(1 - bias - M), exact in f32 */
  LLVMValueRef sub = LLVMBuildFMul(b, LLVMBuildUIToFP(b, m, f32t(C), ""),
                                   fconst(C, OX_F32, ldexp(1.0, 1 - (int)f.bias - (int)f.M)), "");
  LLVMValueRef bits = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, e, ci32(C, 0), ""),
                                      LLVMBuildBitCast(b, sub, i32t(C), ""), normal, "");
  if (f.top) /* e5m2: the top exponent is infinity (m 0) or NaN */
    bits = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, e, ci32(C, f.top), ""),
                           LLVMBuildOr(b, ci32(C, 0x7f800000), LLVMBuildShl(b, m, ci32(C, 21), ""), ""), bits, "");
  else /* e4m3: S.1111.111 is NaN */
    bits = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntEQ, mag, ci32(C, 0x7f), ""), ci32(C, 0x7fc00000), bits, "");
  return LLVMBuildBitCast(b, LLVMBuildOr(b, bits, sign, ""), f32t(C), "");
}

/* f32 -> fp8, rounding to nearest even with saturation (PTX's .satfinite):
 * beyond the largest finite value (infinities too) gives that value, NaN
 * gives NaN. */
static LLVMValueRef f32_to_fp8(cg_t *C, LLVMValueRef x, oxi_type to) {
  fp8_format f = fp8_of(to);
  LLVMBuilderRef b = C->b;
  LLVMValueRef u = LLVMBuildBitCast(b, x, i32t(C), "");
  LLVMValueRef sign = LLVMBuildAnd(b, LLVMBuildLShr(b, u, ci32(C, 24), ""), ci32(C, 0x80), "");
  LLVMValueRef a = LLVMBuildBitCast(b, LLVMBuildAnd(b, u, ci32(C, 0x7fffffff), ""), f32t(C), "");
  LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGT, a, fconst(C, OX_F32, f.max), "");
  a = LLVMBuildSelect(b, big, fconst(C, OX_F32, f.max), a, ""); /* NaN stays (compares false) */
  LLVMValueRef ab = LLVMBuildBitCast(b, a, i32t(C), "");
  /* normal: round f32's mantissa to M bits (to nearest, ties to even), then rebias */
  unsigned drop = 23 - f.M;
  LLVMValueRef odd = LLVMBuildAnd(b, LLVMBuildLShr(b, ab, ci32(C, drop), ""), ci32(C, 1), "");
  LLVMValueRef r = LLVMBuildAdd(b, ab, LLVMBuildAdd(b, ci32(C, (1u << (drop - 1)) - 1), odd, ""), "");
  LLVMValueRef normal = LLVMBuildSub(b, LLVMBuildLShr(b, r, ci32(C, drop), ""),
                                     ci32(C, (uint64_t)(127 - f.bias) << f.M), "");
  /* subnormal: a / 2^(1 - bias - M) rounded to an integer (to nearest even,
     by adding and subtracting 2^23, where f32's spacing is 1); 2^M is the
     smallest normal's code, as it should be */
  LLVMValueRef y = LLVMBuildFMul(b, a, fconst(C, OX_F32, ldexp(1.0, (int)f.bias + (int)f.M - 1)), "");
  LLVMValueRef two23 = fconst(C, OX_F32, 0x1p23);
  y = LLVMBuildFSub(b, LLVMBuildFAdd(b, y, two23, ""), two23, "");
  LLVMValueRef sub = LLVMBuildFPToUI(b, y, i32t(C), "");
  LLVMValueRef small = LLVMBuildFCmp(b, LLVMRealOLT, a, fconst(C, OX_F32, f.min_normal), "");
  LLVMValueRef code = LLVMBuildSelect(b, small, sub, normal, "");
  LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
  code = LLVMBuildSelect(b, nan, ci32(C, 0x7f), code, "");
  return LLVMBuildTrunc(b, LLVMBuildOr(b, code, sign, ""), LLVMInt8TypeInContext(C->ctx), "");
}

static LLVMValueRef convert(cg_t *C, LLVMValueRef v, oxi_type from, oxi_type to) {
  if (from == to)
    return v;
  if (oxi_is_fp8(from)) /* through f32, which holds every fp8 value */
    return convert(C, fp8_to_f32(C, v, from), OX_F32, to);
  if (oxi_is_fp8(to)) /* from f64 through f32: rounded twice, which can differ in the last bit */
    return f32_to_fp8(C, convert(C, v, from, OX_F32), to);
  if (from == OX_TF32) { /* a tf32 value is an f32 value: as is to f32, else as an f32 */
    if (to == OX_F32)
      return v;
    from = OX_F32;
  }
  if (to == OX_TF32) {
    v = convert(C, v, from, OX_F32); /* ints and f64 become f32 first */
    /* f16 and bf16 values (at most 11 significant bits, exponents within
     * f32's) are tf32 values already */
    return narrow_float(from) ? v : tf32_round(C, v);
  }
  LLVMTypeRef tt = llty(C, to);
  if (to == OX_BOOL) /* the front end allows only bool -> bool */
    return LLVMBuildICmp(C->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
  if (oxi_is_float(from) && oxi_is_float(to)) {
    if (narrow_float(from) && narrow_float(to)) /* f16 <-> bf16 through f32 */
      v = LLVMBuildFPExt(C->b, v, f32t(C), ""), from = OX_F32;
    size_t fs = ox_dtype_size((ox_dtype)from), ts = ox_dtype_size((ox_dtype)to);
    if (ts > fs)
      return LLVMBuildFPExt(C->b, v, tt, "");
    if (narrow_float(to) && from == OX_F64) /* through f32, as the host has no f64 -> f16/bf16 helper */
      v = LLVMBuildFPTrunc(C->b, v, f32t(C), ""), from = OX_F32;
    if (to == OX_BF16 && C->opt->target == OXL_CPU)
      return bf16_round(C, v);
    return LLVMBuildFPTrunc(C->b, v, tt, "");
  }
  if (oxi_is_float(from)) {
    /* Rust's `as` saturates and maps NaN to 0 */
    if (narrow_float(from))
      v = LLVMBuildFPExt(C->b, v, f32t(C), "");
    char name[64];
    snprintf(name, sizeof name, "llvm.%s.sat.%s.%s", oxi_is_signed(to) ? "fptosi" : "fptoui",
             oxl_type_suffix(tt), oxl_type_suffix(LLVMTypeOf(v)));
    return oxl_cg_call(C, name, tt, &v, 1);
  }
  if (oxi_is_float(to)) {
    if (narrow_float(to)) {
      LLVMValueRef f = from == OX_BOOL || !oxi_is_signed(from) ? LLVMBuildUIToFP(C->b, v, f32t(C), "")
                                                                 : LLVMBuildSIToFP(C->b, v, f32t(C), "");
      return LLVMBuildFPTrunc(C->b, f, tt, "");
    }
    return from == OX_BOOL || !oxi_is_signed(from) ? LLVMBuildUIToFP(C->b, v, tt, "")
                                                   : LLVMBuildSIToFP(C->b, v, tt, "");
  }
  /* integer <-> integer, and bool -> integer */
  unsigned fw = LLVMGetIntTypeWidth(LLVMTypeOf(v)), tw = LLVMGetIntTypeWidth(tt);
  if (tw < fw)
    return LLVMBuildTrunc(C->b, v, tt, "");
  if (tw == fw)
    return v;
  return from != OX_BOOL && oxi_is_signed(from) ? LLVMBuildSExt(C->b, v, tt, "")
                                                : LLVMBuildZExt(C->b, v, tt, "");
}

/* -------------------------------------------------------------- memory */

static LLVMValueRef mem_base(cg_t *C, oxi_mem mem) {
  if (mem.kind == OXI_MEM_PARAM)
    return C->ptrs[mem.index];
  if (mem.kind == OXI_MEM_LOCAL)
    return C->locals[mem.index];
  const oxi_shared *sh = C->k->shared.items[mem.index];
  return C->hooks->shared_ptr(C, sh->offset);
}

static LLVMValueRef mem_len(cg_t *C, oxi_mem mem) {
  if (mem.kind == OXI_MEM_PARAM)
    return C->lens[mem.index];
  const oxi_shared *sh = (mem.kind == OXI_MEM_LOCAL ? &C->k->locals : &C->k->shared)->items[mem.index];
  return ci64(C, (uint64_t)sh->count);
}

static LLVMValueRef elem_ptr(cg_t *C, oxi_mem mem, LLVMValueRef idx) {
  ox_dtype dt = oxi_mem_dtype(C->k, mem);
  return LLVMBuildInBoundsGEP2(C->b, memty(C, dt), mem_base(C, mem), &idx, 1, "");
}

/* Calls the module's failure routine: records the first failed check of the
 * launch (kernel tag, site, index, length) in the stream's error record. */
static void emit_fail(cg_t *C, int site, int kind, LLVMValueRef idx, LLVMValueRef len) {
  LLVMValueRef err = C->hooks->err_ptr(C), tag = C->hooks->tag(C);
  LLVMValueRef args[6] = {err, tag, ci32(C, (uint64_t)site), ci32(C, (uint64_t)kind), idx, len};
  LLVMTypeRef params[6] = {LLVMTypeOf(err), i32t(C), i32t(C), i32t(C), i64t(C), i64t(C)};
  LLVMTypeRef fty = LLVMFunctionType(voidt(C), params, 6, 0);
  LLVMBuildCall2(C->b, fty, C->fail_fn, args, 6, "");
}

/* Defines the failure routine: cold, never inlined, so the fast path stays small. */
static void define_fail(cg_t *C, unsigned err_as) {
  LLVMTypeRef params[6] = {ptrt(C, err_as), i32t(C), i32t(C), i32t(C), i64t(C), i64t(C)};
  LLVMTypeRef fty = LLVMFunctionType(voidt(C), params, 6, 0);
  LLVMValueRef f = LLVMAddFunction(C->mod, "__oxide_check_failed", fty);
  LLVMSetLinkage(f, LLVMInternalLinkage);
  unsigned kinds[] = {LLVMGetEnumAttributeKindForName("noinline", 8),
                      LLVMGetEnumAttributeKindForName("cold", 4)};
  for (int i = 0; i < 2; i++)
    LLVMAddAttributeAtIndex(f, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(C->ctx, kinds[i], 0));
  LLVMBasicBlockRef entry = LLVMAppendBasicBlockInContext(C->ctx, f, "entry");
  LLVMBasicBlockRef claim = LLVMAppendBasicBlockInContext(C->ctx, f, "claim");
  LLVMBasicBlockRef done = LLVMAppendBasicBlockInContext(C->ctx, f, "done");
  LLVMBuilderRef saved = C->b;
  C->b = LLVMCreateBuilderInContext(C->ctx);
  LLVMPositionBuilderAtEnd(C->b, entry);
  LLVMValueRef err = LLVMGetParam(f, 0);
  LLVMValueRef cx = LLVMBuildAtomicCmpXchg(C->b, err, ci32(C, 0), ci32(C, 1),
                                           LLVMAtomicOrderingMonotonic, LLVMAtomicOrderingMonotonic, 0);
  LLVMValueRef won = LLVMBuildExtractValue(C->b, cx, 1, "");
  LLVMBuildCondBr(C->b, won, claim, done);
  LLVMPositionBuilderAtEnd(C->b, claim);
  /* oxr_errrec: u32 flag, tag, site, kind; u64 index, len */
  static const unsigned off[] = {4, 8, 12, 16, 24};
  for (int i = 0; i < 5; i++) {
    LLVMValueRef o = ci64(C, off[i]);
    LLVMValueRef p = LLVMBuildInBoundsGEP2(C->b, LLVMInt8TypeInContext(C->ctx), err, &o, 1, "");
    LLVMBuildStore(C->b, LLVMGetParam(f, (unsigned)i + 1), p);
  }
  LLVMBuildBr(C->b, done);
  LLVMPositionBuilderAtEnd(C->b, done);
  LLVMBuildRetVoid(C->b);
  LLVMDisposeBuilder(C->b);
  C->b = saved;
  C->fail_fn = f;
}

/* A checked access: branch to a failure path when idx >= len. Kernels whose
 * threads run independently leave the thread there; kernels that synchronize
 * continue with a zero value (a thread that left would hang a later barrier).
 * Returns the block that continues, with the builder positioned in it. */
static LLVMBasicBlockRef check(cg_t *C, const oxi_instr *in, LLVMValueRef idx, LLVMBasicBlockRef *fail_bb) {
  LLVMValueRef len = mem_len(C, in->mem);
  LLVMValueRef ok = LLVMBuildICmp(C->b, LLVMIntULT, idx, len, "");
  LLVMBasicBlockRef good = LLVMAppendBasicBlockInContext(C->ctx, C->fn, "inbounds");
  LLVMBasicBlockRef bad = LLVMAppendBasicBlockInContext(C->ctx, C->fn, "oob");
  LLVMValueRef br = LLVMBuildCondBr(C->b, ok, good, bad);
  /* branch weights: the check almost never fails */
  LLVMValueRef md[3] = {LLVMMDStringInContext(C->ctx, "branch_weights", 14), ci32(C, 1u << 20), ci32(C, 1)};
  LLVMSetMetadata(br, LLVMGetMDKindIDInContext(C->ctx, "prof", 4), LLVMMDNodeInContext(C->ctx, md, 3));
  LLVMPositionBuilderAtEnd(C->b, bad);
  int kind = in->op == OXI_LOAD ? 0 : in->op == OXI_STORE ? 1 : 2;
  emit_fail(C, in->check - 1, kind, idx, len);
  *fail_bb = bad;
  LLVMPositionBuilderAtEnd(C->b, good);
  return good;
}

static LLVMValueRef memop(cg_t *C, const oxi_instr *in) {
  LLVMValueRef idx = val(C, in->ops[0]);
  LLVMBasicBlockRef bad = NULL, good = NULL;
  bool sync = C->k->uses_sync || C->k->looped; /* a failed check leaves the thread going on */
  if (in->check)
    good = check(C, in, idx, &bad);
  ox_dtype dt = oxi_mem_dtype(C->k, in->mem);
  LLVMTypeRef mt = memty(C, dt);
  unsigned align = (unsigned)ox_dtype_size(dt);
  LLVMValueRef r = NULL;
  LLVMValueRef p = elem_ptr(C, in->mem, idx);
  if (in->op == OXI_LOAD && in->type == OXI_V4) { /* 16 bytes in one load, aligned to them */
    r = LLVMBuildLoad2(C->b, llty(C, OXI_V4), p, "");
    LLVMSetAlignment(r, 16);
  } else if (in->op == OXI_LOAD && (in->type == OX_U64 || in->type == OX_U32) && ox_dtype_size(dt) == 2) {
    /* four (two) 16-bit elements in one load, aligned to its size */
    bool four = in->type == OX_U64;
    r = LLVMBuildLoad2(C->b, four ? i64t(C) : i32t(C), p, "");
    LLVMSetAlignment(r, four ? 8 : 4);
  } else if (in->op == OXI_LOAD) {
    r = LLVMBuildLoad2(C->b, mt, p, "");
    LLVMSetAlignment(r, align);
    if (dt == OX_BOOL)
      r = LLVMBuildICmp(C->b, LLVMIntNE, r, LLVMConstInt(mt, 0, 0), "");
  } else if (in->op == OXI_STORE) {
    LLVMValueRef v = val(C, in->ops[1]);
    if (dt == OX_BOOL)
      v = LLVMBuildZExt(C->b, v, mt, "");
    LLVMValueRef st = LLVMBuildStore(C->b, v, p);
    /* a vector store (a u64 of four 16-bit elements, a v4 of 16 bytes) is aligned to its size */
    LLVMSetAlignment(st, in->ops[1]->type == OXI_V4 ? 16 : in->ops[1]->type == OX_U64 && ox_dtype_size(dt) == 2 ? 8 : align);
  } else {
    LLVMValueRef v = val(C, in->ops[1]);
    bool fl = oxi_is_float(dt), s = oxi_is_signed(dt);
    if (in->sub == OXI_CAS) {
      LLVMValueRef cx = LLVMBuildAtomicCmpXchg(C->b, p, v, val(C, in->ops[2]),
                                               LLVMAtomicOrderingMonotonic,
                                               LLVMAtomicOrderingMonotonic, 0);
      r = LLVMBuildExtractValue(C->b, cx, 0, "");
    } else {
      LLVMAtomicRMWBinOp op;
      switch (in->sub) {
      case OXI_ADD: op = fl ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd; break;
      case OXI_SUB: op = LLVMAtomicRMWBinOpSub; break;
      case OXI_AND: op = LLVMAtomicRMWBinOpAnd; break;
      case OXI_OR: op = LLVMAtomicRMWBinOpOr; break;
      case OXI_XOR: op = LLVMAtomicRMWBinOpXor; break;
      case OXI_XCHG: op = LLVMAtomicRMWBinOpXchg; break;
      case OXI_MIN: op = fl ? LLVMAtomicRMWBinOpFMin : s ? LLVMAtomicRMWBinOpMin : LLVMAtomicRMWBinOpUMin; break;
      case OXI_MAX: op = fl ? LLVMAtomicRMWBinOpFMax : s ? LLVMAtomicRMWBinOpMax : LLVMAtomicRMWBinOpUMax; break;
      default: assert(!"atomic op"); op = LLVMAtomicRMWBinOpAdd; break;
      }
      r = LLVMBuildAtomicRMW(C->b, op, p, v, LLVMAtomicOrderingMonotonic, 0);
    }
  }
  if (!in->check)
    return r;
  LLVMBasicBlockRef here = LLVMGetInsertBlock(C->b);
  (void)good;
  if (!sync) {
    /* leave the thread on the failure path */
    LLVMPositionBuilderAtEnd(C->b, bad);
    LLVMBuildRetVoid(C->b);
    LLVMPositionBuilderAtEnd(C->b, here);
    return r;
  }
  LLVMBasicBlockRef join = LLVMAppendBasicBlockInContext(C->ctx, C->fn, "checked");
  LLVMBuildBr(C->b, join);
  LLVMPositionBuilderAtEnd(C->b, bad);
  LLVMBuildBr(C->b, join);
  LLVMPositionBuilderAtEnd(C->b, join);
  if (!r || in->op == OXI_STORE)
    return r;
  LLVMValueRef phi = LLVMBuildPhi(C->b, LLVMTypeOf(r), "");
  LLVMValueRef zero = LLVMConstNull(LLVMTypeOf(r));
  LLVMValueRef vals[2] = {r, zero};
  LLVMBasicBlockRef bbs[2] = {here, bad};
  LLVMAddIncoming(phi, vals, bbs, 2);
  return phi;
}

/* ------------------------------------------------------ tensor cores */

/* The four registers of an {i32 x 4} or {float x 4} result as a v4. */
static LLVMValueRef v4_of_struct(cg_t *C, LLVMValueRef s) {
  LLVMValueRef v = LLVMGetUndef(llty(C, OXI_V4));
  for (unsigned i = 0; i < 4; i++) {
    LLVMValueRef e = LLVMBuildBitCast(C->b, LLVMBuildExtractValue(C->b, s, i, ""), i32t(C), "");
    v = LLVMBuildInsertElement(C->b, v, e, ci32(C, i), "");
  }
  return v;
}

static LLVMValueRef v4_reg(cg_t *C, const oxi_instr *v4, unsigned i, LLVMTypeRef as) {
  return LLVMBuildBitCast(C->b, LLVMBuildExtractElement(C->b, val(C, v4), ci32(C, i), ""), as, "");
}

static LLVMValueRef ldmatrix(cg_t *C, const oxi_instr *in) {
  assert(C->opt->target == OXL_CUDA && "the tile lowering gives ldmatrix to the CUDA target only");
  LLVMTypeRef r4[4] = {i32t(C), i32t(C), i32t(C), i32t(C)};
  LLVMTypeRef st = LLVMStructTypeInContext(C->ctx, r4, 4, 0);
  LLVMValueRef p = elem_ptr(C, in->mem, val(C, in->ops[0]));
  LLVMValueRef s = oxl_cg_call(C, in->sub ? "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.trans.b16.p3"
                                          : "llvm.nvvm.ldmatrix.sync.aligned.m8n8.x4.b16.p3",
                               st, &p, 1);
  return v4_of_struct(C, s);
}

/* mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16} (m16n8k8 for tf32, m16n8k32
 * .s32.{s8,u8} for 8-bit integers, whose C and D are 4 i32): A in 4 registers, B in 2
 * (a half of a v4 from ldmatrix.x4.trans, which holds two n8 tiles), C and D
 * 4 floats. */
static LLVMValueRef mma(cg_t *C, const oxi_instr *in) {
  assert(C->opt->target == OXL_CUDA && "the tile lowering gives mma to the CUDA target only");
  bool i8 = in->sub == OX_I8 || in->sub == OX_U8; /* m16n8k32, four bytes a register, i32 sums */
  LLVMTypeRef f = i8 ? i32t(C) : LLVMFloatTypeInContext(C->ctx);
  LLVMTypeRef reg = in->sub == OX_F16 ? LLVMVectorType(LLVMHalfTypeInContext(C->ctx), 2) : i32t(C);
  LLVMValueRef args[10];
  for (unsigned i = 0; i < 4; i++)
    args[i] = v4_reg(C, in->ops[0], i, reg);
  for (unsigned i = 0; i < 2; i++)
    args[4 + i] = v4_reg(C, in->ops[1], 2 * (unsigned)in->index + i, reg);
  for (unsigned i = 0; i < 4; i++)
    args[6 + i] = v4_reg(C, in->ops[2], i, f);
  LLVMTypeRef f4[4] = {f, f, f, f};
  const char *name = in->sub == OX_F16    ? "llvm.nvvm.mma.m16n8k16.row.col.f32.f32"
                     : in->sub == OX_TF32 ? "llvm.nvvm.mma.m16n8k8.row.col.tf32" /* same fragment shapes */
                     : in->sub == OX_I8   ? "llvm.nvvm.mma.m16n8k32.row.col.s8"
                     : in->sub == OX_U8   ? "llvm.nvvm.mma.m16n8k32.row.col.u8"
                                          : "llvm.nvvm.mma.m16n8k16.row.col.bf16";
  LLVMValueRef s = oxl_cg_call(C, name, LLVMStructTypeInContext(C->ctx, f4, 4, 0), args, 10);
  return v4_of_struct(C, s);
}

/* Hopper's wgmma, as inline PTX (LLVM 19 has no intrinsic for
 * wgmma.mma_async). The accumulator is a struct of n floats, tied in and out
 * ("+f"), and the fence and the wait pass it through the same way, so that no
 * read or write of its registers can move across them: between a wgmma and
 * the wait for it the registers belong to the tensor cores. The `nextra`
 * other inputs come first, extra_cons[i] the constraint letter of input i. */
static LLVMValueRef vf32_asm(cg_t *C, const char *text, LLVMValueRef acc, LLVMValueRef *extra, int nextra,
                             const char *extra_cons) {
  int n = (int)LLVMCountStructElementTypes(LLVMTypeOf(acc));
  assert(nextra <= 5 && (int)strlen(extra_cons) == nextra);
  LLVMTypeRef params[OXI_VF32_MAX + 5], et = LLVMStructGetTypeAtIndex(LLVMTypeOf(acc), 0);
  LLVMValueRef args[OXI_VF32_MAX + 5];
  oxb_str cons = {0};
  for (int i = 0; i < n; i++) /* i32 sums (vi32) in "r" registers: wgmma's .s32 takes no .f32 ones */
    oxb_str_addf(&cons, "%s=%c", i ? "," : "", et == f32t(C) ? 'f' : 'r');
  for (int i = 0; i < nextra; i++) {
    oxb_str_addf(&cons, ",%c", extra_cons[i]);
    params[i] = LLVMTypeOf(extra[i]);
    args[i] = extra[i];
  }
  for (int i = 0; i < n; i++) {
    oxb_str_addf(&cons, ",%d", i);
    params[nextra + i] = et;
    args[nextra + i] = LLVMBuildExtractValue(C->b, acc, (unsigned)i, "");
  }
  oxb_str_addf(&cons, ",~{memory}");
  LLVMTypeRef fty = LLVMFunctionType(LLVMTypeOf(acc), params, (unsigned)(nextra + n), 0);
  LLVMValueRef asmv = LLVMGetInlineAsm(fty, (char *)text, strlen(text), cons.buf, cons.len, 1, 0,
                                       LLVMInlineAsmDialectATT, 0);
  LLVMValueRef r = LLVMBuildCall2(C->b, fty, asmv, args, (unsigned)(nextra + n), "");
  oxb_str_free(&cons);
  return r;
}

/* An inline PTX statement with 32-bit ("r") and 64-bit ("l") operands that
 * must stay where it is ("memory"). */
static void ptx_ops(cg_t *C, const char *text, LLVMValueRef *ops, int n) {
  LLVMTypeRef types[8];
  assert(n <= 8);
  char cons[64] = "";
  for (int i = 0; i < n; i++) {
    types[i] = LLVMTypeOf(ops[i]);
    strcat(cons, LLVMGetIntTypeWidth(types[i]) == 64 ? "l," : "r,");
  }
  strcat(cons, "~{memory}");
  LLVMTypeRef fty = LLVMFunctionType(voidt(C), types, (unsigned)n, 0);
  LLVMValueRef asmv = LLVMGetInlineAsm(fty, (char *)text, strlen(text), cons, strlen(cons), 1, 0,
                                       LLVMInlineAsmDialectATT, 0);
  LLVMBuildCall2(C->b, fty, asmv, ops, (unsigned)n, "");
}

static LLVMValueRef to32(cg_t *C, LLVMValueRef v) { return LLVMBuildTrunc(C->b, v, i32t(C), ""); }

/* mbarriers and TMA copies (sm_90): shared addresses as 32-bit registers, the
 * tensor map by its generic address (a __grid_constant__ parameter). */
static void tma(cg_t *C, const oxi_instr *in) {
  assert(C->opt->target == OXL_CUDA && "the tile lowering gives TMA to the CUDA target only");
  LLVMValueRef bar = to32(C, val(C, in->ops[in->op == OXI_TMA_LOAD ? 1 : 0]));
  switch (in->op) {
  case OXI_MBAR_INIT: {
    LLVMValueRef ops[2] = {bar, ci32(C, in->imm)};
    ptx_ops(C, "mbarrier.init.shared::cta.b64 [$0], $1;", ops, 2);
    break;
  }
  case OXI_MBAR_EXPECT: {
    LLVMValueRef ops[2] = {bar, ci32(C, in->imm)};
    if (in->imm) {
      ptx_ops(C, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", ops, 2);
    } else { /* predicated, not branched around: see OXI_MBAR_EXPECT */
      ops[1] = LLVMBuildZExt(C->b, val(C, in->ops[1]), i32t(C), "");
      ptx_ops(C, "{ .reg .pred p; setp.ne.b32 p, $1, 0; @p mbarrier.arrive.shared::cta.b64 _, [$0]; }", ops, 2);
    }
    break;
  }
  case OXI_MBAR_WAIT: {
    LLVMValueRef ops[2] = {bar, to32(C, val(C, in->ops[1]))};
    ptx_ops(C, "{ .reg .pred p; WAIT${:uid}: mbarrier.try_wait.parity.shared::cta.b64 p, [$0], $1; "
               "@!p bra WAIT${:uid}; }", ops, 2);
    break;
  }
  default: { /* [dst], [map, {coordinates, innermost first}], [mbarrier] */
    int n = in->nops - 2;
    LLVMValueRef ops[8] = {to32(C, val(C, in->ops[0])), LLVMBuildPtrToInt(C->b, C->ptrs[in->index], i64t(C), "")};
    char text[200];
    int at = snprintf(text, sizeof text, "cp.async.bulk.tensor.%dd.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                                         "[$0], [$1, {", n);
    for (int i = 0; i < n; i++) {
      ops[2 + i] = to32(C, val(C, in->ops[2 + i]));
      at += snprintf(text + at, sizeof text - (size_t)at, "%s$%d", i ? ", " : "", 2 + i);
    }
    ops[2 + n] = bar;
    snprintf(text + at, sizeof text - (size_t)at, "}], [$%d];", 2 + n);
    ptx_ops(C, text, ops, 3 + n);
    break;
  }
  }
}

/* bar.sync or bar.arrive on a named barrier (a register id), maybe predicated. */
static void named_bar(cg_t *C, const oxi_instr *in) {
  assert(C->opt->target == OXL_CUDA && "the tile lowering gives named barriers to the CUDA target only");
  char text[120];
  const char *op = in->sub ? "bar.arrive" : "bar.sync";
  LLVMValueRef ops[2] = {to32(C, val(C, in->ops[0])), NULL};
  if (in->nops == 2) {
    ops[1] = LLVMBuildZExt(C->b, val(C, in->ops[1]), i32t(C), "");
    snprintf(text, sizeof text, "{ .reg .pred p; setp.ne.b32 p, $1, 0; @p %s $0, %d; }", op, (int)in->imm);
  } else {
    snprintf(text, sizeof text, "%s $0, %d;", op, (int)in->imm);
  }
  ptx_ops(C, text, ops, in->nops);
}

/* A PTX statement without operands that must stay where it is ("memory"). */
static void ptx_void(cg_t *C, const char *text) {
  LLVMTypeRef fty = LLVMFunctionType(voidt(C), NULL, 0, 0);
  LLVMValueRef asmv = LLVMGetInlineAsm(fty, (char *)text, strlen(text), "~{memory}", 9, 1, 0,
                                       LLVMInlineAsmDialectATT, 0);
  LLVMBuildCall2(C->b, fty, asmv, NULL, 0, "");
}

/* wgmma.mma_async.sync.aligned.m64nNk16.f32.{bf16,f16}: A K-major from
 * shared memory through a descriptor or from registers (a v4), B N-major
 * (imm-trans-b 1), or K-major when in->index is 1, through a descriptor; D
 * accumulates (scale-d true). fp8 inputs: m64nNk32, A and B K-major from
 * shared memory. */
static LLVMValueRef wgmma(cg_t *C, const oxi_instr *in) {
  assert(C->opt->target == OXL_CUDA && "the tile lowering gives wgmma to the CUDA target only");
  int n = (int)in->imm / 2;
  oxb_str t = {0};
  bool regs = in->ops[0]->type == OXI_V4; /* A in registers: no imm-trans-a */
  bool integer = in->sub == OX_I8 || in->sub == OX_U8, byte = oxi_is_fp8(in->sub) || integer;
  static const char *const names[OX_DTYPE_COUNT] = {[OX_F16] = "f16", [OX_BF16] = "bf16", [OX_F8E4M3] = "e4m3",
                                                    [OX_F8E5M2] = "e5m2", [OX_I8] = "s8", [OX_U8] = "u8"};
  const char *ty = names[in->sub];
  /* p: scale-d, whether D accumulates (no accumulator given: D = A B, and its input registers
     are undefined, so nothing writes them while other groups are in flight) */
  oxb_str_addf(&t, "{ .reg .pred p; setp.ne.b32 p, %d, 0; wgmma.mma_async.sync.aligned.m64n%dk%d.%s.%s.%s {",
               in->nops == 3, (int)in->imm, byte ? 32 : 16, integer ? "s32" : "f32", ty, ty);
  for (int i = 0; i < n; i++)
    oxb_str_addf(&t, "%s$%d", i ? ", " : "", i);
  if (integer) /* no scales of A and B for integers */
    oxb_str_addf(&t, "}, $%d, $%d, p; }", n, n + 1);
  else if (byte) /* 8-bit inputs: both K-major, no transpose operands */
    oxb_str_addf(&t, "}, $%d, $%d, p, 1, 1; }", n, n + 1);
  else if (regs)
    oxb_str_addf(&t, "}, {$%d, $%d, $%d, $%d}, $%d, p, 1, 1, %d; }", n, n + 1, n + 2, n + 3, n + 4,
                 in->index ? 0 : 1);
  else
    oxb_str_addf(&t, "}, $%d, $%d, p, 1, 1, 0, %d; }", n, n + 1, in->index ? 0 : 1);
  LLVMValueRef d[5];
  int nd = 0;
  for (unsigned i = 0; regs && i < 4; i++)
    d[nd++] = LLVMBuildExtractElement(C->b, val(C, in->ops[0]), ci32(C, i), "");
  if (!regs)
    d[nd++] = val(C, in->ops[0]);
  d[nd++] = val(C, in->ops[1]);
  LLVMValueRef acc = in->nops == 3 ? val(C, in->ops[2]) : LLVMGetUndef(llty(C, in->type));
  LLVMValueRef r = vf32_asm(C, t.buf, acc, d, nd, regs ? "rrrrl" : "ll");
  oxb_str_free(&t);
  return r;
}

static LLVMValueRef wgmma_sync(cg_t *C, const oxi_instr *in) {
  assert(C->opt->target == OXL_CUDA && "the tile lowering gives wgmma to the CUDA target only");
  char text[96];
  if (in->sub == 2)
    snprintf(text, sizeof text, "wgmma.wait_group.sync.aligned %d;", (int)in->imm);
  else if (in->sub == 3)
    snprintf(text, sizeof text, "wgmma.commit_group.sync.aligned;");
  else if (in->sub == 1)
    snprintf(text, sizeof text, "wgmma.commit_group.sync.aligned; wgmma.wait_group.sync.aligned %d;",
             (int)in->imm);
  else
    snprintf(text, sizeof text, "wgmma.fence.sync.aligned;");
  if (in->nops)
    return vf32_asm(C, text, val(C, in->ops[0]), NULL, 0, "");
  ptx_void(C, text);
  return NULL;
}

/* ------------------------------------------------------------ a kernel */

static void emit_instr(cg_t *C, const oxi_instr *in) {
  LLVMValueRef r = NULL;
  switch (in->op) {
  case OXI_CONST:
    if (oxi_is_vacc(in->type))
      r = LLVMConstNull(llty(C, in->type));
    else if (oxi_is_float(in->type))
      r = fconst(C, in->type, in->fimm);
    else if (oxi_is_fp8(in->type)) /* folded by LLVM to the byte */
      r = f32_to_fp8(C, fconst(C, OX_F32, in->fimm), in->type);
    else
      r = LLVMConstInt(llty(C, in->type), in->imm, 0);
    break;
  case OXI_PARAM: r = C->scalars[in->index]; break;
  case OXI_LEN: r = mem_len(C, in->mem); break;
  case OXI_LOAD: case OXI_STORE: case OXI_ATOMIC: r = memop(C, in); break;
  case OXI_BIN:
    if (in->type == OX_BOOL) {
      LLVMValueRef a = val(C, in->ops[0]), b = val(C, in->ops[1]);
      r = in->sub == OXI_AND ? LLVMBuildAnd(C->b, a, b, "") : in->sub == OXI_OR ? LLVMBuildOr(C->b, a, b, "")
                                                                                : LLVMBuildXor(C->b, a, b, "");
    } else {
      r = binop(C, in);
    }
    break;
  case OXI_CMP: r = compare(C, in); break;
  case OXI_NEG:
    if (oxi_is_float(in->type))
      r = LLVMBuildFNeg(C->b, val(C, in->ops[0]), "");
    else
      r = LLVMBuildNeg(C->b, val(C, in->ops[0]), "");
    break;
  case OXI_NOT: r = LLVMBuildNot(C->b, val(C, in->ops[0]), ""); break;
  case OXI_CAST: r = convert(C, val(C, in->ops[0]), in->ops[0]->type, in->type); break;
  case OXI_SELECT:
    r = LLVMBuildSelect(C->b, val(C, in->ops[0]), val(C, in->ops[1]), val(C, in->ops[2]), "");
    break;
  case OXI_VAR_GET: r = LLVMBuildLoad2(C->b, llty(C, in->type), C->slots[in->index], ""); break;
  case OXI_VAR_SET: LLVMBuildStore(C->b, val(C, in->ops[0]), C->slots[in->index]); break;
  case OXI_SREG:
    /* an exact block shape from the launch contract makes block sizes constants */
    if (C->k->block[0] && in->sub >= OXI_SREG_NTID_X && in->sub <= OXI_SREG_NTID_Z)
      r = ci32(C, (uint64_t)C->k->block[in->sub - OXI_SREG_NTID_X]);
    else if (C->k->block[0] && in->sub <= OXI_SREG_TID_Z && C->k->block[in->sub] == 1)
      r = ci32(C, 0);
    else
      r = C->hooks->sreg(C, in->sub);
    break;
  case OXI_BARRIER: C->hooks->barrier(C); break;
  case OXI_SHFL: r = C->hooks->shfl(C, in->sub, val(C, in->ops[0]), val(C, in->ops[1])); break;
  case OXI_VOTE: r = C->hooks->vote(C, in->sub, val(C, in->ops[0])); break;
  case OXI_MATH: r = math(C, in); break;
  case OXI_DIM: r = C->dims[in->mem.index][in->index]; break;
  case OXI_STRIDE: r = C->strides[in->mem.index][in->index]; break;
  case OXI_ALIGNED: {
    LLVMValueRef addr = LLVMBuildPtrToInt(C->b, mem_base(C, in->mem), i64t(C), "");
    LLVMValueRef low = LLVMBuildAnd(C->b, addr, ci64(C, in->imm - 1), "");
    r = LLVMBuildICmp(C->b, LLVMIntEQ, low, ci64(C, 0), "");
    break;
  }
  case OXI_ASSUME: {
    if (in->ops[0]->op == OXI_ALIGNED) {
      /* as an "align" operand bundle, which the optimizer keeps and uses to
       * raise the alignment of accesses (a plain assume of the test would be
       * folded away where the same test guards the code) */
      LLVMValueRef bargs[2] = {mem_base(C, in->ops[0]->mem), ci64(C, in->ops[0]->imm)};
      LLVMOperandBundleRef ob = LLVMCreateOperandBundle("align", 5, bargs, 2);
      LLVMValueRef t = LLVMConstInt(LLVMInt1TypeInContext(C->ctx), 1, 0);
      LLVMTypeRef i1 = LLVMInt1TypeInContext(C->ctx);
      LLVMTypeRef fty;
      LLVMValueRef f = oxl_cg_fn(C, "llvm.assume", voidt(C), &i1, 1, &fty);
      LLVMBuildCallWithOperandBundles(C->b, fty, f, &t, 1, &ob, 1, "");
      LLVMDisposeOperandBundle(ob);
      break;
    }
    LLVMValueRef c = val(C, in->ops[0]);
    oxl_cg_call(C, "llvm.assume", voidt(C), &c, 1);
    break;
  }
  case OXI_LDMATRIX: r = ldmatrix(C, in); break;
  case OXI_MMA: r = mma(C, in); break;
  case OXI_CP_ASYNC: {
    assert(C->opt->target == OXL_CUDA && "the tile lowering gives cp.async to the CUDA target only");
    oxi_mem sm = {OXI_MEM_SHARED, in->index};
    LLVMValueRef args[3] = {elem_ptr(C, sm, val(C, in->ops[1])), elem_ptr(C, in->mem, val(C, in->ops[0])),
                            val(C, in->ops[2])};
    oxl_cg_call(C, "llvm.nvvm.cp.async.cg.shared.global.16.s", voidt(C), args, 3);
    break;
  }
  case OXI_PREFETCH: {
    assert(C->opt->target == OXL_CUDA && "the tile lowering gives prefetches to the CUDA target only");
    LLVMValueRef ptr = elem_ptr(C, in->mem, val(C, in->ops[0]));
    /* the global window's address where the pointer is global, else a generic one */
    bool global = LLVMGetPointerAddressSpace(LLVMTypeOf(ptr)) == 1;
    const char *text = global ? "prefetch.global.L2 [$0];" : "prefetch.L2 [$0];";
    LLVMValueRef a = LLVMBuildPtrToInt(C->b, ptr, i64t(C), "");
    LLVMTypeRef at = i64t(C);
    LLVMTypeRef fty = LLVMFunctionType(voidt(C), &at, 1, 0);
    LLVMValueRef asmv = LLVMGetInlineAsm(fty, (char *)text, strlen(text), "l", 1, 1, 0, LLVMInlineAsmDialectATT, 0);
    LLVMBuildCall2(C->b, fty, asmv, &a, 1, "");
    break;
  }
  case OXI_CP_COMMIT: oxl_cg_call(C, "llvm.nvvm.cp.async.commit.group", voidt(C), NULL, 0); break;
  case OXI_CP_WAIT: {
    LLVMValueRef n = ci32(C, in->imm);
    oxl_cg_call(C, "llvm.nvvm.cp.async.wait.group", voidt(C), &n, 1);
    break;
  }
  case OXI_PACK:
    r = LLVMGetUndef(llty(C, OXI_V4));
    for (unsigned i = 0; i < 4; i++)
      r = LLVMBuildInsertElement(C->b, r, LLVMBuildBitCast(C->b, val(C, in->ops[i]), i32t(C), ""),
                                 ci32(C, i), "");
    break;
  case OXI_PACK2: {
    LLVMTypeRef h = llty(C, in->ops[0]->type);
    /* two f32s rounded on the GPU: one paired conversion, not two and a move (LLVM splits a
       vector fptrunc); cvt.rn.{bf16,f16}x2.f32 takes the high half first */
    bool cvt = C->opt->target == OXL_CUDA;
    for (int i = 0; i < 2; i++)
      cvt = cvt && in->ops[i]->op == OXI_CAST && in->ops[i]->ops[0]->type == OX_F32;
    if (cvt) {
      LLVMValueRef a[2] = {val(C, in->ops[1]->ops[0]), val(C, in->ops[0]->ops[0])};
      LLVMTypeRef pt[2] = {f32t(C), f32t(C)};
      const char *text = in->ops[0]->type == OX_BF16 ? "cvt.rn.bf16x2.f32 $0, $1, $2;" : "cvt.rn.f16x2.f32 $0, $1, $2;";
      LLVMTypeRef fty = LLVMFunctionType(i32t(C), pt, 2, 0);
      LLVMValueRef asmv = LLVMGetInlineAsm(fty, (char *)text, strlen(text), "=r,f,f", 6, 0, 0, LLVMInlineAsmDialectATT, 0);
      r = LLVMBuildCall2(C->b, fty, asmv, a, 2, "");
      break;
    }
    r = LLVMGetUndef(LLVMVectorType(h, 2));
    r = LLVMBuildInsertElement(C->b, r, val(C, in->ops[0]), ci32(C, 0), "");
    r = LLVMBuildInsertElement(C->b, r, val(C, in->ops[1]), ci32(C, 1), "");
    r = LLVMBuildBitCast(C->b, r, i32t(C), "");
    break;
  }
  case OXI_UNPACK:
    if (in->ops[0]->type == OX_U32)
      r = LLVMBuildExtractElement(C->b, LLVMBuildBitCast(C->b, val(C, in->ops[0]), LLVMVectorType(llty(C, in->type), 2), ""),
                                  ci32(C, (unsigned)in->index), "");
    else if (oxi_is_vacc(in->ops[0]->type))
      r = LLVMBuildExtractValue(C->b, val(C, in->ops[0]), (unsigned)in->index, "");
    else
      r = v4_reg(C, in->ops[0], (unsigned)in->index, llty(C, in->type));
    break;
  case OXI_VSET: r = LLVMBuildInsertValue(C->b, val(C, in->ops[0]), val(C, in->ops[1]), (unsigned)in->index, ""); break;
  case OXI_SHARED_ADDR: r = LLVMBuildPtrToInt(C->b, elem_ptr(C, in->mem, val(C, in->ops[0])), i64t(C), ""); break;
  case OXI_WGMMA: r = wgmma(C, in); break;
  case OXI_WGMMA_SYNC: r = wgmma_sync(C, in); break;
  case OXI_FENCE_ASYNC:
    assert(C->opt->target == OXL_CUDA && "the tile lowering gives fences to the CUDA target only");
    ptx_void(C, in->sub ? "fence.mbarrier_init.release.cluster;" : "fence.proxy.async.shared::cta;");
    break;
  case OXI_MBAR_INIT: case OXI_MBAR_EXPECT: case OXI_MBAR_WAIT: case OXI_TMA_LOAD: tma(C, in); break;
  case OXI_NAMED_BAR: named_bar(C, in); break;
  case OXI_SETMAXNREG: {
    assert(C->opt->target == OXL_CUDA && "the tile lowering gives setmaxnreg to the CUDA target only");
    char text[64];
    snprintf(text, sizeof text, "setmaxnreg.%s.sync.aligned.u32 %u;", in->sub ? "inc" : "dec", (unsigned)in->imm);
    ptx_void(C, text);
    break;
  }
  case OXI_RENDEZVOUS:
    assert(C->hooks->rendezvous && "only the CPU's looped kernels rendezvous");
    r = C->hooks->rendezvous(C, (int64_t)in->imm, val(C, in->ops[0]));
    break;
  case OXI_BR: LLVMBuildBr(C->b, C->bbs[in->target[0]->id]); break;
  case OXI_CONDBR:
    LLVMBuildCondBr(C->b, val(C, in->ops[0]), C->bbs[in->target[0]->id], C->bbs[in->target[1]->id]);
    break;
  case OXI_RET: LLVMBuildRetVoid(C->b); break;
  default: assert(!"unknown IR op"); break;
  }
  if (in->id >= 0)
    C->vals[in->id] = r;
}

/* Emits the body of kernel k into C->fn, whose parameters the caller has
 * already mapped to C->ptrs/lens/scalars. */
void oxl_cg_body(cg_t *C) {
  const oxi_kernel *k = C->k;
  C->vals = oxb_calloc((size_t)k->next_id + 1, sizeof(LLVMValueRef));
  C->slots = oxb_calloc((size_t)k->slots.len + 1, sizeof(LLVMValueRef));
  C->bbs = oxb_calloc((size_t)k->blocks.len, sizeof(LLVMBasicBlockRef));
  LLVMBasicBlockRef entry = LLVMGetInsertBlock(C->b);
  for (int i = 0; i < k->slots.len; i++)
    C->slots[i] = LLVMBuildAlloca(C->b, llty(C, oxi_slot_type(k, i)), "");
  /* a thread's arrays: in the entry block, so that LLVM keeps in registers those whose
     indices become constants (loops over them unrolled) */
  C->locals = oxb_calloc((size_t)k->locals.len + 1, sizeof(LLVMValueRef));
  for (int i = 0; i < k->locals.len; i++) {
    const oxi_shared *a = k->locals.items[i];
    C->locals[i] = LLVMBuildAlloca(C->b, LLVMArrayType2(memty(C, a->dtype), (uint64_t)a->count), "");
    LLVMSetAlignment(C->locals[i], 16);
  }
  for (int i = 0; i < k->blocks.len; i++)
    C->bbs[i] = LLVMAppendBasicBlockInContext(C->ctx, C->fn, "");
  LLVMPositionBuilderAtEnd(C->b, entry);
  LLVMBuildBr(C->b, C->bbs[0]);
  /* Blocks in reverse post-order, so that a value's definition (which
   * dominates its uses: the IR verifier checks it) is emitted before them,
   * whatever order the blocks were made in. Unreachable blocks get no code. */
  int n = k->blocks.len, *order = oxb_malloc(sizeof(int) * (size_t)n * 3), *stack = order + n,
      *next = order + 2 * n, done = 0, sp = 0;
  char *seen = oxb_calloc((size_t)n, 1);
  stack[sp++] = 0;
  next[0] = 0;
  seen[0] = 1;
  while (sp) {
    const oxi_block *b = k->blocks.items[stack[sp - 1]];
    const oxi_instr *term = oxi_terminator(b);
    int t = next[b->id]++;
    if (term && t < 2 && term->target[t] && !seen[term->target[t]->id]) {
      int s = term->target[t]->id;
      seen[s] = 1;
      next[s] = 0;
      stack[sp++] = s;
    } else if (!term || t >= 1) {
      order[done++] = b->id; /* post-order */
      sp--;
    }
  }
  for (int i = done - 1; i >= 0; i--) {
    const oxi_block *b = k->blocks.items[order[i]];
    LLVMPositionBuilderAtEnd(C->b, C->bbs[b->id]);
    for (int ii = 0; ii < b->instrs.len; ii++)
      emit_instr(C, b->instrs.items[ii]);
  }
  for (int bi = 0; bi < n; bi++)
    if (!seen[bi]) {
      LLVMPositionBuilderAtEnd(C->b, C->bbs[bi]);
      LLVMBuildUnreachable(C->b);
    }
  free(order);
  free(seen);
  free(C->vals);
  free(C->slots);
  free(C->locals);
  free(C->bbs);
  C->vals = C->slots = C->locals = NULL;
  C->bbs = NULL;
}

/* Maps the flattened parameters of `fn` starting at `first`: scalars by value
 * (bool as i8, f16/bf16 as i16 bits), slices as (pointer, u64 length). */
void oxl_cg_map_params(cg_t *C, LLVMValueRef *params) {
  const oxi_kernel *k = C->k;
  int j = 0;
  for (int i = 0; i < k->params.len; i++) {
    const oxi_param *p = k->params.items[i];
    if (p->kind == OXI_P_SCALAR) {
      LLVMValueRef v = params[j++];
      if (p->dtype == OX_BOOL)
        v = LLVMBuildICmp(C->b, LLVMIntNE, v, LLVMConstInt(LLVMTypeOf(v), 0, 0), "");
      else if (narrow_float(p->dtype))
        v = LLVMBuildBitCast(C->b, v, llty(C, p->dtype), "");
      C->scalars[i] = v;
    } else if (p->kind == OXI_P_TMAP) { /* its (param-space) address: OXI_TMA_LOAD's operand */
      C->ptrs[i] = params[j++];
    } else {
      C->ptrs[i] = params[j++];
      C->lens[i] = params[j++];
      if (oxi_is_tensor_kind(p->kind)) {
        for (int d = 0; d < p->rank; d++)
          C->dims[i][d] = params[j++];
        for (int d = 0; d < p->rank; d++)
          C->strides[i][d] = params[j++];
      }
    }
  }
}

/* The flattened parameter types of kernel k. Returns the count. */
int oxl_cg_param_types(cg_t *C, LLVMTypeRef *out, unsigned ptr_as) {
  int j = 0;
  for (int i = 0; i < C->k->params.len; i++) {
    const oxi_param *p = C->k->params.items[i];
    if (p->kind == OXI_P_SCALAR) {
      out[j++] = p->dtype == OX_BOOL ? LLVMInt8TypeInContext(C->ctx)
                 : narrow_float(p->dtype) ? LLVMInt16TypeInContext(C->ctx)
                                          : llty(C, p->dtype);
    } else if (p->kind == OXI_P_TMAP) { /* byval [128 x i8] (oxl_cg_param_attrs) */
      out[j++] = ptrt(C, 0);
    } else {
      out[j++] = ptrt(C, ptr_as);
      for (int w = 1; w < oxi_param_width(p); w++) /* length, then dims and strides */
        out[j++] = i64t(C);
    }
  }
  return j;
}

/* Marks slice parameters: every slice is noalias (the launch refuses a mutable
 * argument that overlaps another), read-only slices also readonly, so the GPU
 * reads them through the non-coherent (read-only) data path. */
void oxl_cg_param_attrs(cg_t *C, LLVMValueRef fn, int first) {
  unsigned noalias = LLVMGetEnumAttributeKindForName("noalias", 7);
  unsigned readonly = LLVMGetEnumAttributeKindForName("readonly", 8);
  unsigned nocapture = LLVMGetEnumAttributeKindForName("nocapture", 9);
  int j = first;
  for (int i = 0; i < C->k->params.len; i++) {
    const oxi_param *p = C->k->params.items[i];
    if (p->kind == OXI_P_SCALAR) {
      j++;
      continue;
    }
    unsigned idx = (unsigned)j + 1; /* attribute indices of parameters start at 1 */
    if (p->kind == OXI_P_TMAP) { /* a CUtensorMap by value, 64-byte aligned in the param space */
      unsigned byval = LLVMGetEnumAttributeKindForName("byval", 5);
      unsigned align = LLVMGetEnumAttributeKindForName("align", 5);
      LLVMTypeRef map = LLVMArrayType2(LLVMInt8TypeInContext(C->ctx), 128);
      LLVMAddAttributeAtIndex(fn, idx, LLVMCreateTypeAttribute(C->ctx, byval, map));
      LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(C->ctx, align, 64));
      j++;
      continue;
    }
    if (p->kind != OXI_P_ATOMIC && p->kind != OXI_P_ATENSOR)
      LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(C->ctx, noalias, 0));
    if (p->kind == OXI_P_SLICE || p->kind == OXI_P_TENSOR)
      LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(C->ctx, readonly, 0));
    LLVMAddAttributeAtIndex(fn, idx, LLVMCreateEnumAttribute(C->ctx, nocapture, 0));
    j += oxi_param_width(p);
  }
}

/* True if kernel k uses math the target cannot do; reports it. */
static bool unsupported(cg_t *C) {
  if (C->opt->target != OXL_CUDA)
    return false;
  for (int bi = 0; bi < C->k->blocks.len; bi++) {
    const oxi_block *b = C->k->blocks.items[bi];
    for (int ii = 0; ii < b->instrs.len; ii++) {
      const oxi_instr *in = b->instrs.items[ii];
      if (in->op == OXI_MATH && oxl_math_gpu_lacks(in->sub, in->type)) {
        oxb_set_error(OX_ERR_UNSUPPORTED,
                      "%s: kernel '%s': f64 %s is not supported on the CUDA target yet (f32 is)",
                      C->m->filename, C->k->name, oxi_math_name(in->sub));
        return true;
      }
    }
  }
  if (C->k->shared_bytes > OXI_SHARED_MAX) {
    oxb_set_error(OX_ERR_UNSUPPORTED,
                  "%s: kernel '%s' uses %lld bytes of shared memory; CUDA GPUs allow at most %d KiB "
                  "per block",
                  C->m->filename, C->k->name, (long long)C->k->shared_bytes, OXI_SHARED_MAX / 1024);
    return true;
  }
  return false;
}

ox_status oxl_cg_module(cg_t *C) {
  unsigned err_as = C->opt->target == OXL_CUDA ? 1 : 0;
  define_fail(C, err_as);
  for (int i = 0; i < C->m->kernels.len; i++) {
    C->k = C->m->kernels.items[i];
    assert(!C->k->is_tile && "tile kernels are lowered (core/tile) before code generation");
    if (unsupported(C))
      return OX_ERR_UNSUPPORTED;
    int n = C->k->params.len + 1;
    C->ptrs = oxb_calloc((size_t)n, sizeof(LLVMValueRef));
    C->lens = oxb_calloc((size_t)n, sizeof(LLVMValueRef));
    C->scalars = oxb_calloc((size_t)n, sizeof(LLVMValueRef));
    C->dims = oxb_calloc((size_t)n, sizeof *C->dims);
    C->strides = oxb_calloc((size_t)n, sizeof *C->strides);
    C->kernel(C);
    free(C->ptrs);
    free(C->lens);
    free(C->scalars);
    free(C->dims);
    free(C->strides);
    C->ptrs = C->lens = C->scalars = NULL; /* (oxl_generate frees what an unwind leaves) */
    C->dims = C->strides = NULL;
  }
  char *msg = NULL;
  if (LLVMVerifyModule(C->mod, LLVMReturnStatusAction, &msg)) {
    ox_status s = oxb_set_error(OX_ERR_INTERNAL, "internal error: invalid LLVM IR generated: %s", msg);
    LLVMDisposeMessage(msg);
    return s;
  }
  LLVMDisposeMessage(msg);
  return OX_OK;
}
