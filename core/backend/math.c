/* math.c - the math functions of f32 and f64 values (docs/language.md section
 * 5.5). Where the targets' libraries differ (the GPU has approximate
 * instructions and no libm; the CPU has libm), a formula of Oxide's own is
 * written here once, so that both targets compute the same thing: tanh, erf,
 * sigmoid, atan2 and atan of f32. f64 transcendentals are libm's on the CPU;
 * on the GPU, exp and log (and what is made of them: exp2, log2, pow, tanh,
 * sigmoid) are Oxide's, and the others missing (oxl_math_gpu_lacks). On the
 * CPU, f32 exp, exp2, log and log2 are Oxide's inline code too, which the
 * loop vectorizer widens (libm's are calls); f32 sin, cos and tan are libm's,
 * named with glibc's vector variants (libmvec) for the vectorizer. Calls only
 * values.c. */
#include "backend/codegen.h"

#include <assert.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LOG2E 1.4426950408889634
#define LN2 0.6931471805599453
#define PI 3.141592653589793

static LLVMValueRef k(cg_t *C, oxi_type t, double v) {
  return LLVMConstReal(t == OX_F64 ? LLVMDoubleTypeInContext(C->ctx) : LLVMFloatTypeInContext(C->ctx), v);
}

static bool gpu_f32(cg_t *C, oxi_type t) { return C->opt->target == OXL_CUDA && t == OX_F32; }
static bool gpu_f64(cg_t *C, oxi_type t) { return C->opt->target == OXL_CUDA && t == OX_F64; }

static LLVMValueRef add(cg_t *C, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFAdd(C->b, a, b, ""); }
static LLVMValueRef mul(cg_t *C, LLVMValueRef a, LLVMValueRef b) { return LLVMBuildFMul(C->b, a, b, ""); }

/* a b + c, fused where the target has an fma (every GPU, x86-64 with FMA3):
 * one instruction and one rounding instead of two */
static LLVMValueRef muladd(cg_t *C, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  char name[40];
  snprintf(name, sizeof name, "llvm.fmuladd.%s", oxl_type_suffix(LLVMTypeOf(a)));
  LLVMValueRef args[3] = {a, b, c};
  return oxl_cg_call(C, name, LLVMTypeOf(a), args, 3);
}

/* c[0] + c[1] u + ... + c[n-1] u^(n-1), by Horner's rule, each step an fma
 * where there is one: half the instructions of a multiply and an add (a
 * GPU epilogue's erf is most of its cost) */
static LLVMValueRef poly(cg_t *C, oxi_type t, LLVMValueRef u, const double *c, int n) {
  LLVMValueRef r = k(C, t, c[n - 1]);
  for (int i = n - 2; i >= 0; i--)
    r = muladd(C, r, u, k(C, t, c[i]));
  return r;
}

/* ---- f64 exp and log on the GPU, which has no libm: argument reduction to
 * a small interval, a polynomial there, and the exponent put back by bits.
 * Within about 1 ulp (the polynomials' truncation errors are below 1e-17). */

/* ln 2 in two parts, the first with its low bits zero, so that k ln2_hi is
 * exact for the k of any f64 (Cody and Waite) */
static const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;

static LLVMValueRef fma64(cg_t *C, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c) {
  LLVMValueRef x[3] = {a, b, c};
  return oxl_cg_call(C, "llvm.fma.f64", LLVMTypeOf(a), x, 3);
}

/* p * 2^kf for an integer-valued kf (f64: in [-1100, 1100]; f32: [-152,
 * 130]): two factors 2^h and 2^(k - h), h = k / 2, each a normal number, so
 * that results that overflow or go subnormal come out right (inf, or
 * gradually to 0). The factors are made by bits: exponent bias, mantissa bits. */
static LLVMValueRef scale(cg_t *C, LLVMValueRef p, LLVMValueRef kf) {
  LLVMTypeRef ft = LLVMTypeOf(p);
  bool dbl = LLVMGetTypeKind(ft) == LLVMDoubleTypeKind;
  LLVMTypeRef it = dbl ? LLVMInt64TypeInContext(C->ctx) : LLVMInt32TypeInContext(C->ctx);
  LLVMValueRef bias = LLVMConstInt(it, dbl ? 1023 : 127, 0), bits = LLVMConstInt(it, dbl ? 52 : 23, 0);
  LLVMValueRef i = LLVMBuildFPToSI(C->b, kf, it, "");
  LLVMValueRef h = LLVMBuildAShr(C->b, i, LLVMConstInt(it, 1, 0), ""), j = LLVMBuildSub(C->b, i, h, "");
  LLVMValueRef s1 = LLVMBuildBitCast(C->b, LLVMBuildShl(C->b, LLVMBuildAdd(C->b, h, bias, ""), bits, ""), ft, "");
  LLVMValueRef s2 = LLVMBuildBitCast(C->b, LLVMBuildShl(C->b, LLVMBuildAdd(C->b, j, bias, ""), bits, ""), ft, "");
  return mul(C, mul(C, p, s1), s2);
}

/* e^r for |r| <= ln(2) / 2: its Taylor series to r^13 / 13!. */
static LLVMValueRef exp_small64(cg_t *C, LLVMValueRef r) {
  double c[14];
  c[0] = 1.0;
  for (int i = 1; i < 14; i++)
    c[i] = c[i - 1] / i;
  return poly(C, OX_F64, r, c, 14);
}

static LLVMValueRef nan_passes(cg_t *C, LLVMValueRef x, LLVMValueRef r) {
  return LLVMBuildSelect(C->b, LLVMBuildFCmp(C->b, LLVMRealUNO, x, x, ""), x, r, "");
}

/* e^x = 2^k e^r, k = rint(x / ln 2), r = x - k ln 2 with ln 2 in two parts
 * (Cody and Waite) so that r is exact to about 2^-100. */
static LLVMValueRef exp64(cg_t *C, LLVMValueRef x) {
  LLVMValueRef xc = oxl_intrinsic2(C, "minnum", oxl_intrinsic2(C, "maxnum", x, k(C, OX_F64, -760.0)), k(C, OX_F64, 760.0));
  LLVMValueRef kf = oxl_intrinsic1(C, "rint", mul(C, xc, k(C, OX_F64, LOG2E)));
  LLVMValueRef nk = LLVMBuildFNeg(C->b, kf, "");
  LLVMValueRef r = fma64(C, nk, k(C, OX_F64, ln2_lo), fma64(C, nk, k(C, OX_F64, ln2_hi), xc));
  return nan_passes(C, x, scale(C, exp_small64(C, r), kf));
}

/* 2^x = 2^k e^(f ln 2), k = rint(x), f = x - k (exact). */
static LLVMValueRef exp2_64(cg_t *C, LLVMValueRef x) {
  LLVMValueRef xc = oxl_intrinsic2(C, "minnum", oxl_intrinsic2(C, "maxnum", x, k(C, OX_F64, -1100.0)), k(C, OX_F64, 1100.0));
  LLVMValueRef kf = oxl_intrinsic1(C, "rint", xc);
  LLVMValueRef f = LLVMBuildFSub(C->b, xc, kf, "");
  return nan_passes(C, x, scale(C, exp_small64(C, mul(C, f, k(C, OX_F64, LN2))), kf));
}

/* log's special values: +inf for +inf, -inf for 0, NaN for negatives and NaN */
static LLVMValueRef log_special(cg_t *C, oxi_type t, LLVMValueRef x, LLVMValueRef r) {
  LLVMValueRef inf = k(C, t, __builtin_inf());
  r = LLVMBuildSelect(C->b, LLVMBuildFCmp(C->b, LLVMRealOEQ, x, inf, ""), inf, r, "");
  r = LLVMBuildSelect(C->b, LLVMBuildFCmp(C->b, LLVMRealOEQ, x, k(C, t, 0.0), ""), LLVMBuildFNeg(C->b, inf, ""), r, "");
  r = LLVMBuildSelect(C->b, LLVMBuildFCmp(C->b, LLVMRealOLT, x, k(C, t, 0.0), ""), k(C, t, __builtin_nan("")), r, "");
  return nan_passes(C, x, r);
}

/* x = m 2^e with m in [sqrt(1/2), sqrt(2)), from x's bits (subnormals scaled
 * into the normals first, by 2^54 for f64 and 2^23 for f32): returns m, and e
 * as a float of x's type. Positive finite x only; the callers handle the rest. */
static LLVMValueRef split_log(cg_t *C, LLVMValueRef x, LLVMValueRef *ef) {
  LLVMTypeRef ft = LLVMTypeOf(x);
  bool dbl = LLVMGetTypeKind(ft) == LLVMDoubleTypeKind;
  oxi_type t = dbl ? OX_F64 : OX_F32;
  LLVMTypeRef it = dbl ? LLVMInt64TypeInContext(C->ctx) : LLVMInt32TypeInContext(C->ctx);
  int mbits = dbl ? 52 : 23, bias = dbl ? 1023 : 127, pre = dbl ? 54 : 23;
  unsigned long long emask = dbl ? 0x7ff : 0xff, mmask = (1ULL << mbits) - 1, one = (unsigned long long)bias << mbits;
  LLVMValueRef tiny = LLVMBuildFCmp(C->b, LLVMRealOLT, x, k(C, t, dbl ? 2.2250738585072014e-308 : 1.1754943508222875e-38), "");
  LLVMValueRef xs = LLVMBuildSelect(C->b, tiny, mul(C, x, k(C, t, (double)(1ULL << pre))), x, "");
  LLVMValueRef bits = LLVMBuildBitCast(C->b, xs, it, "");
  LLVMValueRef e = LLVMBuildSub(C->b, LLVMBuildAnd(C->b, LLVMBuildLShr(C->b, bits, LLVMConstInt(it, (unsigned)mbits, 0), ""),
                                                   LLVMConstInt(it, emask, 0), ""),
                                LLVMConstInt(it, (unsigned)bias, 0), "");
  e = LLVMBuildSelect(C->b, tiny, LLVMBuildSub(C->b, e, LLVMConstInt(it, (unsigned)pre, 0), ""), e, "");
  LLVMValueRef mb = LLVMBuildOr(C->b, LLVMBuildAnd(C->b, bits, LLVMConstInt(it, mmask, 0), ""), LLVMConstInt(it, one, 0), "");
  LLVMValueRef m = LLVMBuildBitCast(C->b, mb, ft, "");
  LLVMValueRef big = LLVMBuildFCmp(C->b, LLVMRealOGT, m, k(C, t, 1.4142135623730951), "");
  m = LLVMBuildSelect(C->b, big, mul(C, m, k(C, t, 0.5)), m, "");
  e = LLVMBuildSelect(C->b, big, LLVMBuildAdd(C->b, e, LLVMConstInt(it, 1, 0), ""), e, "");
  *ef = LLVMBuildSIToFP(C->b, e, ft, "");
  return m;
}

/* ln x = e ln 2 + ln m for x = m 2^e, m in [sqrt(1/2), sqrt(2)); ln m =
 * 2 atanh(s) = 2 (s + s^3/3 + ... + s^23/23), s = (m - 1) / (m + 1), |s| <=
 * 0.172. Subnormals are scaled by 2^54 first; 0 gives -inf, negatives NaN. */
static LLVMValueRef log64(cg_t *C, LLVMValueRef x) {
  LLVMValueRef ef, m = split_log(C, x, &ef);
  LLVMValueRef s = LLVMBuildFDiv(C->b, LLVMBuildFSub(C->b, m, k(C, OX_F64, 1.0), ""), add(C, m, k(C, OX_F64, 1.0)), "");
  double c[12];
  for (int i = 0; i < 12; i++)
    c[i] = 1.0 / (2 * i + 1);
  LLVMValueRef lm = mul(C, mul(C, k(C, OX_F64, 2.0), s), poly(C, OX_F64, mul(C, s, s), c, 12));
  return log_special(C, OX_F64, x, fma64(C, ef, k(C, OX_F64, ln2_hi), fma64(C, ef, k(C, OX_F64, ln2_lo), lm)));
}

/* ---- f32 exp, exp2, log and log2 on the CPU: the same reductions in f32,
 * inline, so that a loop of them vectorizes (libm's expf is a call the
 * vectorizer cannot widen: a tile softmax ran at libm's scalar speed).
 * Measured against float64 (test_cpu_math.py): within 1 ulp. */

static const float ln2_hi32 = 0.693145751953125f, ln2_lo32 = 1.428606765330187e-06f; /* hi: 16 bits */


/* e^(u c) for |u c| <= ln(2) / 2: the Taylor series of e^x to x^7 / 7!, in u
 * with the powers of c folded into the coefficients (c = 1 or ln 2) */
static LLVMValueRef exp_small32(cg_t *C, LLVMValueRef u, double c) {
  double q[8];
  q[0] = 1.0;
  for (int i = 1; i < 8; i++)
    q[i] = q[i - 1] * c / i;
  return poly(C, OX_F32, u, q, 8);
}

/* e^x = 2^k e^r, k = rint(x log2 e), r = x - k ln 2 in two parts (Cody and Waite) */
static LLVMValueRef exp32(cg_t *C, LLVMValueRef x) {
  LLVMValueRef xc = oxl_intrinsic2(C, "minnum", oxl_intrinsic2(C, "maxnum", x, k(C, OX_F32, -104.0)), k(C, OX_F32, 89.0));
  LLVMValueRef kf = oxl_intrinsic1(C, "rint", mul(C, xc, k(C, OX_F32, LOG2E)));
  LLVMValueRef nk = LLVMBuildFNeg(C->b, kf, "");
  LLVMValueRef r = muladd(C, nk, k(C, OX_F32, ln2_lo32), muladd(C, nk, k(C, OX_F32, ln2_hi32), xc));
  return nan_passes(C, x, scale(C, exp_small32(C, r, 1.0), kf));
}

/* 2^x = 2^k e^(f ln 2), k = rint(x), f = x - k (exact) */
static LLVMValueRef exp2_32(cg_t *C, LLVMValueRef x) {
  LLVMValueRef xc = oxl_intrinsic2(C, "minnum", oxl_intrinsic2(C, "maxnum", x, k(C, OX_F32, -151.0)), k(C, OX_F32, 129.0));
  LLVMValueRef kf = oxl_intrinsic1(C, "rint", xc);
  return nan_passes(C, x, scale(C, exp_small32(C, LLVMBuildFSub(C->b, xc, kf, ""), LN2), kf));
}

/* x = m 2^e (split_log), and ln m = ln(1 + f) = f - f^2/2 + f^3 P(f), f = m - 1 (exact, the leading term), P
 * fitted for Oxide by weighted least squares on [sqrt(1/2) - 1, sqrt(2) - 1]
 * (relative error 7e-9): no division, so a scalar loop is fast too. Gives e; 0,
 * negatives, inf and NaN are the caller's. */
static LLVMValueRef log_parts32(cg_t *C, LLVMValueRef x, LLVMValueRef *ef) {
  LLVMValueRef m = split_log(C, x, ef);
  LLVMValueRef f = LLVMBuildFSub(C->b, m, k(C, OX_F32, 1.0), "");
  static const double c[8] = {0.33333354047279135,  -0.25000851943542957, 0.1999982657295808,
                              -0.16621369910242287, 0.14227114035855115,  -0.13202104208883586,
                              0.12620327488971073,  -0.0736286787148653};
  return muladd(C, mul(C, f, f), muladd(C, f, poly(C, OX_F32, f, c, 8), k(C, OX_F32, -0.5)), f);
}


static LLVMValueRef log32(cg_t *C, LLVMValueRef x) {
  LLVMValueRef ef, lm = log_parts32(C, x, &ef);
  return log_special(C, OX_F32, x, muladd(C, ef, k(C, OX_F32, ln2_hi32), muladd(C, ef, k(C, OX_F32, ln2_lo32), lm)));
}

/* log2 x = e + ln m log2 e, the constant in two parts */
static LLVMValueRef log2_32(cg_t *C, LLVMValueRef x) {
  LLVMValueRef ef, lm = log_parts32(C, x, &ef);
  const float hi = 1.44269502162933349609375f; /* log2 e rounded to f32 */
  LLVMValueRef l2 = muladd(C, lm, k(C, OX_F32, hi), mul(C, lm, k(C, OX_F32, LOG2E - hi)));
  return log_special(C, OX_F32, x, add(C, l2, ef));
}

static bool cpu_f32(cg_t *C, oxi_type t) { return C->opt->target == OXL_CPU && t == OX_F32; }

/* 2^x: ex2.approx on the GPU for f32 (relative error about 2^-22), Oxide's
 * elsewhere but for f64 on the CPU (libm's). */
static LLVMValueRef exp2_of(cg_t *C, oxi_type t, LLVMValueRef x) {
  return gpu_f32(C, t)   ? oxl_ptx_f32(C, "ex2.approx.ftz.f32", x)
         : gpu_f64(C, t) ? exp2_64(C, x)
         : cpu_f32(C, t) ? exp2_32(C, x)
                         : oxl_intrinsic1(C, "exp2", x);
}

/* log2 x, as exp2_of. */
static LLVMValueRef log2_of(cg_t *C, oxi_type t, LLVMValueRef x) {
  return gpu_f32(C, t)   ? oxl_ptx_f32(C, "lg2.approx.f32", x)
         : gpu_f64(C, t) ? mul(C, log64(C, x), k(C, OX_F64, LOG2E))
         : cpu_f32(C, t) ? log2_32(C, x)
                         : oxl_intrinsic1(C, "log2", x);
}

/* f32 on the GPU: the PTX approximate instructions; NULL where there is none. */
static LLVMValueRef gpu_approx(cg_t *C, int fn, LLVMValueRef x) {
  switch (fn) {
  case OXI_M_EXP: return oxl_ptx_f32(C, "ex2.approx.ftz.f32", mul(C, x, k(C, OX_F32, LOG2E)));
  case OXI_M_EXP2: return oxl_ptx_f32(C, "ex2.approx.ftz.f32", x);
  case OXI_M_LOG: return mul(C, oxl_ptx_f32(C, "lg2.approx.f32", x), k(C, OX_F32, LN2));
  case OXI_M_LOG2: return oxl_ptx_f32(C, "lg2.approx.f32", x);
  case OXI_M_SIN: return oxl_ptx_f32(C, "sin.approx.f32", x);
  case OXI_M_COS: return oxl_ptx_f32(C, "cos.approx.f32", x);
  case OXI_M_TAN:
    return LLVMBuildFDiv(C->b, oxl_ptx_f32(C, "sin.approx.f32", x), oxl_ptx_f32(C, "cos.approx.f32", x), "");
  case OXI_M_RSQRT: return oxl_ptx_f32(C, "rsqrt.approx.f32", x);
  /* not div.rn.f32, whose slow path is a subroutine call: a call in a function makes the driver
     serialize all its wgmmas (C7509) */
  case OXI_M_RECIP: return oxl_ptx_f32(C, "rcp.approx.ftz.f32", x);
  default: return NULL;
  }
}

/* tanh(x) = sign(x) * (1 - 2 / (exp(2|x|) + 1)); a short series near 0 avoids the
 * cancellation there. */
static LLVMValueRef tanh_of(cg_t *C, oxi_type t, LLVMValueRef x) {
  LLVMValueRef ax = oxl_intrinsic1(C, "fabs", x);
  LLVMValueRef e2x = exp2_of(C, t, mul(C, ax, k(C, t, 2.0 * LOG2E)));
  LLVMValueRef big =
      LLVMBuildFSub(C->b, k(C, t, 1.0), LLVMBuildFDiv(C->b, k(C, t, 2.0), add(C, e2x, k(C, t, 1.0)), ""), "");
  static const double series[] = {1.0, -1.0 / 3.0, 2.0 / 15.0, -17.0 / 315.0}; /* x - x^3/3 + ... */
  LLVMValueRef small = mul(C, poly(C, t, mul(C, ax, ax), series, 4), ax);
  LLVMValueRef near0 = LLVMBuildFCmp(C->b, LLVMRealOLT, ax, k(C, t, 0.125), "");
  return oxl_intrinsic2(C, "copysign", LLVMBuildSelect(C->b, near0, small, big, ""), x);
}

/* erf(x) of f32, within 2.3 ulp (CPU, measured): for |x| <= 1, x * P(x^2) (P fitted to
 * erf(x)/x, relative error 1e-8); for 1 < |x| < 4, 1 - exp(-x^2 + Q(|x| - 2.5))
 * (Q fitted to log(erfc(x)) + x^2, error 7e-8 in the exponent); from 4 on, 1
 * (erf(4) rounds to 1 in f32). Coefficients fitted for Oxide by least squares. */
static LLVMValueRef erf_of(cg_t *C, oxi_type t, LLVMValueRef x) {
  static const double p[] = {1.1283791669401535,    -0.37612634119857996, 0.11283685275146874,
                             -0.02685829734592531,  0.005197441070085595, -0.0008095523365237438,
                             8.153021837843324e-05};
  static const double q[] = {-1.5568152708441485,   -0.35268070186184153,  0.05610625510060691,
                             -0.010858424910754418, 0.0021654257061628937, -0.00042024258826075557,
                             7.718427449278806e-05, -1.3280548963808666e-05, 1.6652778854724492e-06};
  double q2[9]; /* Q log2 e: the exponent in base 2 is -x^2 log2 e + Q2, one fma */
  for (int i = 0; i < 9; i++)
    q2[i] = q[i] * LOG2E;
  LLVMValueRef ax = oxl_intrinsic1(C, "fabs", x), x2 = mul(C, x, x);
  LLVMValueRef inner = mul(C, poly(C, t, x2, p, 7), ax);
  LLVMValueRef expo = muladd(C, x2, k(C, t, -LOG2E), poly(C, t, LLVMBuildFSub(C->b, ax, k(C, t, 2.5), ""), q2, 9));
  LLVMValueRef outer = LLVMBuildFSub(C->b, k(C, t, 1.0), exp2_of(C, t, expo), "");
  LLVMValueRef r = LLVMBuildSelect(C->b, LLVMBuildFCmp(C->b, LLVMRealOLE, ax, k(C, t, 1.0), ""), inner, outer, "");
  r = LLVMBuildSelect(C->b, LLVMBuildFCmp(C->b, LLVMRealOGE, ax, k(C, t, 4.0), ""), k(C, t, 1.0), r, "");
  return oxl_intrinsic2(C, "copysign", r, x); /* NaN stays NaN: the selects keep it */
}

/* atan2(y, x) of f32: atan of a = min(|x|, |y|) / max(|x|, |y|) in [0, 1] as
 * a * P(a^2) (P fitted to atan(a)/a, relative error 2e-8), then the octant and
 * quadrant: pi/2 - r where |y| > |x|, pi - r where x < 0, the sign of y. Equal
 * magnitudes take a = 1 (atan2(inf, inf) = pi/4) and two zeros a = 0. */
static LLVMValueRef atan2_of(cg_t *C, oxi_type t, LLVMValueRef y, LLVMValueRef x) {
  assert(t == OX_F32); /* the sign test below reads f32 bits */
  static const double p[] = {0.999999999707384,    -0.33333314873257647, 0.19999112484436068,
                             -0.1427092691916138,  0.10990184719001231,  -0.08522398159440474,
                             0.06011983136681691,  -0.03345106495581783, 0.01219612090244497,
                             -0.002093313944551056};
  LLVMValueRef ax = oxl_intrinsic1(C, "fabs", x), ay = oxl_intrinsic1(C, "fabs", y);
  LLVMValueRef mx = oxl_intrinsic2(C, "maxnum", ax, ay), mn = oxl_intrinsic2(C, "minnum", ax, ay);
  /* on the GPU a reciprocal (rcp.approx): div.rn.f32's slow path would be a call */
  LLVMValueRef a = gpu_f32(C, t) ? mul(C, mn, oxl_ptx_f32(C, "rcp.approx.ftz.f32", mx)) : LLVMBuildFDiv(C->b, mn, mx, "");
  a = LLVMBuildSelect(C->b, LLVMBuildFCmp(C->b, LLVMRealOEQ, mx, mn, ""), k(C, t, 1.0), a, "");
  a = LLVMBuildSelect(C->b, LLVMBuildFCmp(C->b, LLVMRealOEQ, mx, k(C, t, 0.0), ""), k(C, t, 0.0), a, "");
  LLVMValueRef r = mul(C, poly(C, t, mul(C, a, a), p, 10), a);
  r = LLVMBuildSelect(C->b, LLVMBuildFCmp(C->b, LLVMRealOGT, ay, ax, ""),
                      LLVMBuildFSub(C->b, k(C, t, PI / 2), r, ""), r, "");
  /* x < 0, or x = -0.0 (the sign bit): pi - r */
  LLVMValueRef neg = LLVMBuildICmp(C->b, LLVMIntSLT, LLVMBuildBitCast(C->b, x, LLVMInt32TypeInContext(C->ctx), ""),
                                   LLVMConstInt(LLVMInt32TypeInContext(C->ctx), 0, 0), "");
  r = LLVMBuildSelect(C->b, neg, LLVMBuildFSub(C->b, k(C, t, PI), r, ""), r, "");
  LLVMValueRef nan = LLVMBuildFCmp(C->b, LLVMRealUNO, x, y, "");
  r = LLVMBuildSelect(C->b, nan, add(C, x, y), r, "");
  return oxl_intrinsic2(C, "copysign", r, y);
}

/* glibc's vector math library (libmvec), loaded into the process once so that
 * the JIT resolves its functions; 'e' (AVX-512, 16 f32 lanes), 'd' (AVX2, 8)
 * or 0 where it or the CPU's vector width is missing. */
static char g_mvec;
static void *g_mvec_lib;
static pthread_once_t g_mvec_once = PTHREAD_ONCE_INIT;

static void mvec_init(void) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (!(g_mvec_lib = dlopen("libmvec.so.1", RTLD_NOW | RTLD_GLOBAL)))
    return;
  __builtin_cpu_init();
  g_mvec = __builtin_cpu_supports("avx512f") ? 'e' : __builtin_cpu_supports("avx2") ? 'd' : 0;
#endif
}

/* f32 `name` (sinf, cosf, tanf) on the CPU: libm's scalar function, with the
 * vector variant of libmvec named for the loop vectorizer (the call site's
 * vector-function-abi-variant, LLVM's VFABI), so that a loop of them widens to
 * one call per 16 (or 8) elements instead of a call each. glibc documents these
 * variants within 4 ulp; tests/python/test_cpu_math.py measures them. f64 keeps
 * libm's scalar functions: their variants measured up to 3.2 ulp (sin, cos,
 * exp) against libm's 0.5, and f64 is chosen for its accuracy. */
static LLVMValueRef vector_libm(cg_t *C, const char *name, LLVMValueRef x) {
  pthread_once(&g_mvec_once, mvec_init);
  LLVMValueRef r = oxl_cg_call(C, name, LLVMTypeOf(x), &x, 1);
  if (!g_mvec)
    return r;
  int lanes = g_mvec == 'e' ? 16 : 8;
  char vname[64], abi[160];
  snprintf(vname, sizeof vname, "_ZGV%cN%dv_%s", g_mvec, lanes, name);
  if (!dlsym(g_mvec_lib, vname)) /* an older glibc (tanf's came in 2.35) */
    return r;
  snprintf(abi, sizeof abi, "_ZGV_LLVM_N%dv_%s(%s)", lanes, name, vname);
  /* the variant, declared (the vectorizer calls only what the module declares) and kept
     through the optimizer's clean-ups until it does */
  if (!LLVMGetNamedFunction(C->mod, vname)) {
    LLVMTypeRef vt = LLVMVectorType(LLVMTypeOf(x), (unsigned)lanes);
    LLVMValueRef vf = LLVMAddFunction(C->mod, vname, LLVMFunctionType(vt, &vt, 1, 0));
    LLVMValueRef used = LLVMGetNamedGlobal(C->mod, "llvm.compiler.used");
    LLVMValueRef items[64];
    unsigned n = 0;
    if (used) {
      LLVMValueRef init = LLVMGetInitializer(used);
      for (unsigned i = 0; init && i < (unsigned)LLVMGetNumOperands(init) && n < 63; i++)
        items[n++] = LLVMGetOperand(init, i);
      LLVMDeleteGlobal(used);
    }
    items[n++] = vf;
    LLVMTypeRef pt = LLVMPointerTypeInContext(C->ctx, 0);
    LLVMValueRef g = LLVMAddGlobal(C->mod, LLVMArrayType2(pt, n), "llvm.compiler.used");
    LLVMSetInitializer(g, LLVMConstArray2(pt, items, n));
    LLVMSetLinkage(g, LLVMAppendingLinkage);
    LLVMSetSection(g, "llvm.metadata");
  }
  LLVMAttributeRef a = LLVMCreateStringAttribute(C->ctx, "vector-function-abi-variant", 27, abi, (unsigned)strlen(abi));
  LLVMAddCallSiteAttribute(r, LLVMAttributeFunctionIndex, a);
  /* no memory touched (errno is not Oxide's), so that the vectorizer may widen the call */
  unsigned mem = LLVMGetEnumAttributeKindForName("memory", 6), nounwind = LLVMGetEnumAttributeKindForName("nounwind", 8);
  LLVMAddCallSiteAttribute(r, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(C->ctx, mem, 0));
  LLVMAddCallSiteAttribute(r, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(C->ctx, nounwind, 0));
  return r;
}

/* A function of libm (f64 on the CPU): declared, and resolved by the JIT in the process. */
static LLVMValueRef libm(cg_t *C, const char *name, LLVMValueRef *a, int n) {
  return oxl_cg_call(C, name, LLVMTypeOf(a[0]), a, n);
}

LLVMValueRef oxl_math_float(cg_t *C, int fn, oxi_type t, LLVMValueRef *a) {
  assert(t == OX_F32 || t == OX_F64);
  if (gpu_f32(C, t)) {
    LLVMValueRef r = gpu_approx(C, fn, a[0]);
    if (r)
      return r;
  }
  bool own = t == OX_F32; /* f32: Oxide's formulas, the same on both targets */
  switch (fn) {
  case OXI_M_SQRT: return oxl_intrinsic1(C, "sqrt", a[0]);
  case OXI_M_RSQRT: return LLVMBuildFDiv(C->b, k(C, t, 1.0), oxl_intrinsic1(C, "sqrt", a[0]), "");
  case OXI_M_EXP: return gpu_f64(C, t) ? exp64(C, a[0]) : cpu_f32(C, t) ? exp32(C, a[0]) : oxl_intrinsic1(C, "exp", a[0]);
  case OXI_M_EXP2: return exp2_of(C, t, a[0]);
  case OXI_M_LOG: return gpu_f64(C, t) ? log64(C, a[0]) : cpu_f32(C, t) ? log32(C, a[0]) : oxl_intrinsic1(C, "log", a[0]);
  case OXI_M_LOG2: return log2_of(C, t, a[0]);
  case OXI_M_SIN: return cpu_f32(C, t) ? vector_libm(C, "sinf", a[0]) : oxl_intrinsic1(C, "sin", a[0]);
  case OXI_M_COS: return cpu_f32(C, t) ? vector_libm(C, "cosf", a[0]) : oxl_intrinsic1(C, "cos", a[0]);
  case OXI_M_TAN: return own ? vector_libm(C, "tanf", a[0]) : libm(C, "tan", a, 1); /* the GPU's: sin/cos above */
  case OXI_M_POW: {
    /* pow(x, y) = exp2(y * log2(x)) on both targets, so they agree (x < 0 gives NaN) */
    return exp2_of(C, t, mul(C, a[1], log2_of(C, t, a[0])));
  }
  case OXI_M_TANH: return tanh_of(C, t, a[0]);
  case OXI_M_ERF: return own ? erf_of(C, t, a[0]) : libm(C, "erf", a, 1);
  case OXI_M_ATAN2: return own ? atan2_of(C, t, a[0], a[1]) : libm(C, "atan2", a, 2);
  case OXI_M_ATAN: return own ? atan2_of(C, t, a[0], k(C, t, 1.0)) : libm(C, "atan", a, 1);
  case OXI_M_SIGMOID: {
    /* 1 / (1 + e^-x): e^-x overflows to inf for x < -88 (f32), giving 0 */
    LLVMValueRef e = exp2_of(C, t, mul(C, a[0], k(C, t, -LOG2E)));
    LLVMValueRef d = add(C, e, k(C, t, 1.0));
    return gpu_f32(C, t) ? oxl_ptx_f32(C, "rcp.approx.ftz.f32", d) : LLVMBuildFDiv(C->b, k(C, t, 1.0), d, "");
  }
  case OXI_M_FMA: {
    char name[32];
    snprintf(name, sizeof name, "llvm.fma.%s", oxl_type_suffix(LLVMTypeOf(a[0])));
    return oxl_cg_call(C, name, LLVMTypeOf(a[0]), a, 3);
  }
  case OXI_M_ABS: return oxl_intrinsic1(C, "fabs", a[0]);
  case OXI_M_MIN: return oxl_intrinsic2(C, "minnum", a[0], a[1]);
  case OXI_M_MAX: return oxl_intrinsic2(C, "maxnum", a[0], a[1]);
  case OXI_M_CLAMP: return oxl_intrinsic2(C, "minnum", oxl_intrinsic2(C, "maxnum", a[0], a[1]), a[2]);
  case OXI_M_FLOOR: return oxl_intrinsic1(C, "floor", a[0]);
  case OXI_M_CEIL: return oxl_intrinsic1(C, "ceil", a[0]);
  case OXI_M_ROUND: return oxl_intrinsic1(C, "round", a[0]); /* half away from zero, as Rust */
  case OXI_M_TRUNC: return oxl_intrinsic1(C, "trunc", a[0]);
  case OXI_M_SIGNUM: {
    /* Rust's signum: 1.0 or -1.0 by the sign bit (so -1.0 for -0.0), NaN for NaN */
    LLVMValueRef s = oxl_intrinsic2(C, "copysign", k(C, t, 1.0), a[0]);
    return LLVMBuildSelect(C->b, LLVMBuildFCmp(C->b, LLVMRealUNO, a[0], a[0], ""), a[0], s, "");
  }
  case OXI_M_RECIP: return LLVMBuildFDiv(C->b, k(C, t, 1.0), a[0], "");
  default: assert(!"math"); return NULL;
  }
}

/* Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC'11): ten rounds of two 32 x 32 -> 64-bit
 * products (the round's multipliers), the key bumped by the Weyl increments between rounds. */
LLVMValueRef oxl_philox(cg_t *C, LLVMValueRef *a, int w) {
  LLVMTypeRef i32 = LLVMInt32TypeInContext(C->ctx), i64 = LLVMInt64TypeInContext(C->ctx);
  LLVMValueRef k0 = a[0], k1 = a[1], c[4] = {a[2], a[3], a[4], a[5]};
  for (int round = 0; round < 10; round++) {
    if (round) {
      k0 = LLVMBuildAdd(C->b, k0, LLVMConstInt(i32, 0x9E3779B9u, 0), "");
      k1 = LLVMBuildAdd(C->b, k1, LLVMConstInt(i32, 0xBB67AE85u, 0), "");
    }
    LLVMValueRef p0 = LLVMBuildMul(C->b, LLVMBuildZExt(C->b, c[0], i64, ""), LLVMConstInt(i64, 0xD2511F53u, 0), "");
    LLVMValueRef p1 = LLVMBuildMul(C->b, LLVMBuildZExt(C->b, c[2], i64, ""), LLVMConstInt(i64, 0xCD9E8D57u, 0), "");
    LLVMValueRef hi0 = LLVMBuildTrunc(C->b, LLVMBuildLShr(C->b, p0, LLVMConstInt(i64, 32, 0), ""), i32, "");
    LLVMValueRef hi1 = LLVMBuildTrunc(C->b, LLVMBuildLShr(C->b, p1, LLVMConstInt(i64, 32, 0), ""), i32, "");
    LLVMValueRef n0 = LLVMBuildXor(C->b, LLVMBuildXor(C->b, hi1, c[1], ""), k0, "");
    LLVMValueRef n2 = LLVMBuildXor(C->b, LLVMBuildXor(C->b, hi0, c[3], ""), k1, "");
    c[1] = LLVMBuildTrunc(C->b, p1, i32, "");
    c[3] = LLVMBuildTrunc(C->b, p0, i32, "");
    c[0] = n0;
    c[2] = n2;
  }
  return c[w];
}

bool oxl_math_gpu_lacks(int fn, oxi_type t) {
  if (t != OX_F64)
    return false;
  switch (fn) {
  case OXI_M_SIN: case OXI_M_COS: case OXI_M_TAN: case OXI_M_ERF: case OXI_M_ATAN2: case OXI_M_ATAN: return true;
  default: return false;
  }
}
