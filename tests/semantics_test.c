/* semantics_test - the same kernels give the same answers on every device
 * (argv[1]: "cpu" or "cuda"): warp shuffles and votes, atomics on global and
 * shared memory, math functions against double-precision references, casts,
 * integer corner cases that must not trap, and tf32 rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static ox_device dev;

static ox_module compile(const char *src) {
  ox_compile_options o = {.filename = "sem.oxk"};
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(dev, src, &o, &m));
  return m;
}

static void run(ox_module m, const char *name, uint32_t grid, uint32_t block, ox_arg *args, int n) {
  ox_kernel k;
  if (!m || ox_module_get_kernel(m, name, &k) != OX_OK) {
    CHECK(0, "no kernel %s", name);
    return;
  }
  ox_launch_config cfg = {{grid, 1, 1}, {block, 1, 1}};
  CHECK_OK(ox_launch(k, NULL, &cfg, args, n));
  ox_stream s;
  CHECK_OK(ox_device_stream(dev, &s));
  CHECK_OK(ox_stream_synchronize(s));
}

static ox_tensor tensor(ox_dtype t, int64_t n, const void *init) {
  ox_tensor x = NULL;
  if (init)
    CHECK_OK(ox_tensor_from_host(dev, NULL, t, 1, &n, init, (size_t)n * ox_dtype_size(t), &x));
  else
    CHECK_OK(ox_tensor_empty(dev, NULL, t, 1, &n, &x));
  return x;
}

static void fetch(ox_tensor t, void *dst) {
  CHECK_OK(ox_tensor_to_host(t, NULL, dst, ox_tensor_nbytes(t)));
}

/* Shuffles and votes over a block of 64 threads (two warps). */
static void test_warp(void) {
  ox_module m = compile(
      "#[kernel]\n"
      "fn warp_ops(out: DisjointSlice<u32>) {\n"
      "    let i = thread::index_1d();\n"
      "    let lane = warp::lane_id();\n"
      "    let v = lane * 10 + thread::thread_idx_x() / 32;\n"
      "    let a = warp::shuffle(v, (lane + 5) % 32);\n"
      "    let b = warp::shuffle_up(v, 3);\n"
      "    let c = warp::shuffle_down(v, 3);\n"
      "    let d = warp::shuffle_xor(v, 6);\n"
      "    let all = warp::all(lane < 40) as u32;\n"
      "    let any = warp::any(lane == 31) as u32;\n"
      "    let none = warp::any(lane == 99) as u32;\n"
      "    let ballot = warp::ballot(lane % 3 == 0);\n"
      "    let r = a ^ (b << 8) ^ (c << 16) ^ (d << 4) ^ (all << 28) ^ (any << 29) ^ (none << 30) ^ ballot;\n"
      "    if let Some(o) = out.get_mut(i) { *o = r; }\n"
      "}\n");
  ox_tensor t = tensor(OX_U32, 64, NULL);
  ox_arg args[1] = {ox_arg_tensor(t)};
  run(m, "warp_ops", 1, 64, args, 1);
  uint32_t got[64];
  fetch(t, got);
  uint32_t ballot = 0;
  for (int l = 0; l < 32; l++)
    if (l % 3 == 0)
      ballot |= 1u << l;
  int bad = 0;
  for (int t_ = 0; t_ < 64; t_++) {
    uint32_t lane = (uint32_t)t_ % 32, w = (uint32_t)t_ / 32;
#define V(l) ((uint32_t)(l) * 10 + w)
    uint32_t a = V((lane + 5) % 32), b = lane >= 3 ? V(lane - 3) : V(lane),
             c = lane + 3 < 32 ? V(lane + 3) : V(lane), d = V(lane ^ 6);
    uint32_t want = a ^ (b << 8) ^ (c << 16) ^ (d << 4) ^ (1u << 28) ^ (1u << 29) ^ ballot;
    if (got[t_] != want && bad++ < 3)
      fprintf(stderr, "thread %d: %08x, expected %08x\n", t_, got[t_], want);
  }
  CHECK(bad == 0, "%d warp results differ", bad);
  ox_tensor_release(t);
  ox_module_destroy(m);
}

/* Atomics on global and shared memory from many threads. */
static void test_atomics(void) {
  ox_module m = compile(
      "#[kernel]\n"
      "fn atomics(g: &[Atomic<i32>], f: &[Atomic<f32>], u: &[Atomic<u64>]) {\n"
      "    let s = SharedArray::<i32, 4>::new();\n"
      "    let t = thread::thread_idx_x() as i32;\n"
      "    if t == 0 { s[0] = 0; s[1] = 1000000; s[2] = -1000000; s[3] = 0; }\n"
      "    sync_threads();\n"
      "    let x = (t * 37) % 101 - 50;\n"
      "    s.atomic_add(0, x);\n"
      "    s.atomic_min(1, x);\n"
      "    s.atomic_max(2, x);\n"
      "    s.atomic_exchange(3, 7);\n"
      "    sync_threads();\n"
      "    if t == 0 {\n"
      "        g.atomic_add(0, s[0]);\n"
      "        g.atomic_min(1, s[1]);\n"
      "        g.atomic_max(2, s[2]);\n"
      "        g.atomic_exchange(3, s[3]);\n"
      "    }\n"
      "    g.atomic_add(4, 1);\n"
      "    f.atomic_add(0, 0.5);\n"
      "    // compare-and-swap: each thread increments g[5] with a CAS loop\n"
      "    loop {\n"
      "        let old = g.atomic_add(5, 0);\n"
      "        if g.atomic_cas(5, old, old + 2) == old { break; }\n"
      "    }\n"
      "    u.atomic_max(0, (t as u64) << 33);\n"
      "}\n");
  int32_t g0[6] = {0, 1 << 30, -(1 << 30), 0, 0, 0};
  float f0[1] = {0};
  uint64_t u0[1] = {0};
  ox_tensor g = tensor(OX_I32, 6, g0), f = tensor(OX_F32, 1, f0), u = tensor(OX_U64, 1, u0);
  ox_arg args[3] = {ox_arg_tensor(g), ox_arg_tensor(f), ox_arg_tensor(u)};
  const int blocks = 5, threads = 128;
  run(m, "atomics", blocks, threads, args, 3);
  int32_t gg[6];
  fetch(g, gg);
  fetch(f, f0);
  fetch(u, u0);
  int sum = 0, mn = 1 << 30, mx = -(1 << 30);
  for (int t = 0; t < threads; t++) {
    int x = (t * 37) % 101 - 50;
    sum += x;
    mn = x < mn ? x : mn;
    mx = x > mx ? x : mx;
  }
  CHECK(gg[0] == blocks * sum, "sum %d, expected %d", gg[0], blocks * sum);
  CHECK(gg[1] == mn && gg[2] == mx, "min %d max %d, expected %d %d", gg[1], gg[2], mn, mx);
  CHECK(gg[3] == 7, "exchange gave %d", gg[3]);
  CHECK(gg[4] == blocks * threads, "count %d", gg[4]);
  CHECK(gg[5] == 2 * blocks * threads, "cas count %d", gg[5]);
  CHECK(f0[0] == 0.5f * blocks * threads, "float sum %g", f0[0]);
  CHECK(u0[0] == (uint64_t)(threads - 1) << 33, "u64 max %llx", (unsigned long long)u0[0]);
  ox_tensor_release(g);
  ox_tensor_release(f);
  ox_tensor_release(u);
  ox_module_destroy(m);
}

/* Math functions against double references, on inputs across their range. */
static void test_math(void) {
  ox_module m = compile(
      "#[kernel]\n"
      "fn math(x: &[f32], out: DisjointSlice<f32>) {\n"
      "    let i = thread::index_1d();\n"
      "    let n = x.len();\n"
      "    let j = i.get() % n;\n"
      "    let f = i.get() / n;\n"
      "    let v = x[j];\n"
      "    let r = if f == 0 { v.sqrt() } else if f == 1 { v.exp() } else if f == 2 { v.ln() }\n"
      "        else if f == 3 { v.sin() } else if f == 4 { v.cos() } else if f == 5 { v.tanh() }\n"
      "        else if f == 6 { v.exp2() } else if f == 7 { v.log2() } else if f == 8 { v.rsqrt() }\n"
      "        else if f == 9 { v.powf(1.5) } else if f == 10 { v.floor() } else if f == 11 { v.ceil() }\n"
      "        else if f == 12 { v.abs() } else if f == 13 { v.mul_add(2.0, 1.0) }\n"
      "        else if f == 14 { recip(v) } else { v.min(3.0).max(-3.0) };\n"
      "    if let Some(o) = out.get_mut(i) { *o = r; }\n"
      "}\n");
  enum { N = 256, F = 16 };
  float x[N], out[N * F];
  for (int i = 0; i < N; i++)
    x[i] = 0.01f + 9.0f * (float)i / N; /* positive, so every function is defined */
  ox_tensor tx = tensor(OX_F32, N, x), to = tensor(OX_F32, N * F, NULL);
  ox_arg args[2] = {ox_arg_tensor(tx), ox_arg_tensor(to)};
  run(m, "math", N * F / 128, 128, args, 2);
  fetch(to, out);
  static const char *const names[F] = {"sqrt", "exp", "ln", "sin", "cos", "tanh", "exp2", "log2",
                                       "rsqrt", "powf", "floor", "ceil", "abs", "mul_add", "recip", "clamp"};
  /* |got - ref| <= rel * |ref| + abs: the GPU uses PTX's approximate
   * instructions for exp2/lg2/sin/cos/rsqrt/rcp, whose error is absolute near
   * the zeros of log, sin and cos (about 2^-21 for sin and cos) */
  static const double rel[F] = {1e-6, 2e-6, 2e-6, 2e-6, 2e-6, 2e-6, 2e-6, 2e-6,
                                2e-6, 4e-6, 0, 0, 0, 1e-7, 2e-7, 0};
  static const double abs_[F] = {0, 0, 1e-6, 2e-6, 2e-6, 1e-7, 0, 1e-6, 0, 0, 0, 0, 0, 0, 0, 0};
  for (int f = 0; f < F; f++) {
    double worst = 0;
    for (int i = 0; i < N; i++) {
      double v = x[i], r;
      switch (f) {
      case 0: r = sqrt(v); break;
      case 1: r = exp(v); break;
      case 2: r = log(v); break;
      case 3: r = sin(v); break;
      case 4: r = cos(v); break;
      case 5: r = tanh(v); break;
      case 6: r = exp2(v); break;
      case 7: r = log2(v); break;
      case 8: r = 1 / sqrt(v); break;
      case 9: r = pow(v, 1.5); break;
      case 10: r = floor(v); break;
      case 11: r = ceil(v); break;
      case 12: r = fabs(v); break;
      case 13: r = v * 2 + 1; break;
      case 14: r = 1 / v; break;
      default: r = v > 3 ? 3 : v; break;
      }
      /* in units of the allowed error (plus one float rounding of the result) */
      double err = fabs(out[f * N + i] - r) / (rel[f] * fabs(r) + abs_[f] + 1.2e-7 * fabs(r) + 1e-30);
      worst = err > worst ? err : worst;
    }
    CHECK(worst <= 1.0, "%s: worst error %.3g times the allowed", names[f], worst);
  }
  ox_tensor_release(tx);
  ox_tensor_release(to);
  ox_module_destroy(m);
}

/* The math functions whose f32 formulas are Oxide's own (erf, sigmoid, atan,
 * atan2), the CPU's or PTX's tan, and round/trunc/signum/clamp, against double
 * references on both signs, on the target under test. */
static void test_math_more(void) {
  ox_module m = compile(
      "#[kernel]\n"
      "fn math2(x: &[f32], out: DisjointSlice<f32>, iout: DisjointSlice<i32>) {\n"
      "    let i = thread::index_1d();\n"
      "    let n = x.len();\n"
      "    let j = i.get() % n;\n"
      "    let f = i.get() / n;\n"
      "    let v = x[j];\n"
      "    let r = if f == 0 { erf(v) } else if f == 1 { sigmoid(v) } else if f == 2 { v.atan() }\n"
      "        else if f == 3 { v.atan2(0.75 - v) } else if f == 4 { (v * 0.3).tan() } else if f == 5 { v.round() }\n"
      "        else if f == 6 { v.trunc() } else if f == 7 { v.signum() } else { v.clamp(-1.5, 2.0) };\n"
      "    if let Some(o) = out.get_mut(i) { *o = r; }\n"
      "    if let Some(o) = iout.get_mut(i) { *o = (v as i32).signum() * 100 + (v as i32).clamp(-2, 3); }\n"
      "}\n");
  enum { N = 256, F = 9 };
  float x[N], out[N * F];
  int32_t iout[N * F];
  for (int i = 0; i < N; i++)
    x[i] = -5.0f + 10.0f * (float)i / N + (i % 8 == 0 ? 0.5f : 0.0f); /* halves, for round */
  ox_tensor tx = tensor(OX_F32, N, x), to = tensor(OX_F32, N * F, NULL), ti = tensor(OX_I32, N * F, NULL);
  ox_arg args[3] = {ox_arg_tensor(tx), ox_arg_tensor(to), ox_arg_tensor(ti)};
  run(m, "math2", N * F / 128, 128, args, 3);
  fetch(to, out);
  fetch(ti, iout);
  static const char *const names[F] = {"erf", "sigmoid", "atan", "atan2", "tan", "round", "trunc", "signum", "clamp"};
  /* relative and absolute bounds: 2 ulp-ish for the formulas, PTX's sin/cos (tan on the GPU) and
     ex2/rcp (sigmoid) about 2^-20 */
  static const double rel[F] = {4e-7, 2e-6, 4e-7, 4e-7, 4e-6, 0, 0, 0, 0};
  static const double abs_[F] = {1e-7, 1e-7, 1e-7, 1e-7, 2e-6, 0, 0, 0, 0};
  for (int f = 0; f < F; f++) {
    double worst = 0;
    for (int i = 0; i < N; i++) {
      double v = x[i], r;
      switch (f) {
      case 0: r = erf(v); break;
      case 1: r = 1 / (1 + exp(-v)); break;
      case 2: r = atan(v); break;
      case 3: r = atan2(v, 0.75f - x[i]); break;
      case 4: r = tan((double)(x[i] * 0.3f)); break;
      case 5: r = round(v); break;
      case 6: r = trunc(v); break;
      case 7: r = v < 0 || (v == 0 && signbit(v)) ? -1 : 1; break;
      default: r = v < -1.5 ? -1.5 : v > 2 ? 2 : v; break;
      }
      double err = fabs(out[f * N + i] - r) / (rel[f] * fabs(r) + abs_[f] + 1.2e-7 * fabs(r) + 1e-30);
      worst = err > worst ? err : worst;
    }
    CHECK(worst <= 1.0, "%s: worst error %.3g times the allowed", names[f], worst);
  }
  for (int i = 0; i < N * F; i++) {
    int v = (int)x[i % N];
    int want = (v > 0) - (v < 0);
    want = want * 100 + (v < -2 ? -2 : v > 3 ? 3 : v);
    CHECK(iout[i] == want, "integer signum/clamp of %d: %d, expected %d", v, iout[i], want);
    if (iout[i] != want)
      break;
  }
  ox_tensor_release(tx);
  ox_tensor_release(to);
  ox_tensor_release(ti);
  ox_module_destroy(m);
}

/* Casts saturate, integer corner cases are defined and do not trap. */
static void test_ints(void) {
  ox_module m = compile(
      "#[kernel]\n"
      "fn ints(x: &[f32], y: &[i32], out: DisjointSlice<i32>) {\n"
      "    let i = thread::index_1d();\n"
      "    let k = i.get();\n"
      "    let r = if k < 4 { x[k] as i32 }\n"
      "        else if k == 4 { y[0] / y[1] }\n"      /* MIN / -1 wraps */
      "        else if k == 5 { y[0] % y[1] }\n"
      "        else if k == 6 { y[2] << 35 }\n"      /* shift amount modulo 32 */
      "        else if k == 7 { (x[0] as u8) as i32 }\n"
      "        else { (y[3] as u32 >> 1) as i32 };\n"
      "    if let Some(o) = out.get_mut(i) { *o = r; }\n"
      "}\n");
  float x[4] = {3e9f, -3e9f, NAN, -7.9f};
  int32_t y[4] = {INT32_MIN, -1, 3, -2}, out[9];
  ox_tensor tx = tensor(OX_F32, 4, x), ty = tensor(OX_I32, 4, y), to = tensor(OX_I32, 9, NULL);
  ox_arg args[3] = {ox_arg_tensor(tx), ox_arg_tensor(ty), ox_arg_tensor(to)};
  run(m, "ints", 1, 9, args, 3);
  fetch(to, out);
  int32_t want[9] = {INT32_MAX, INT32_MIN, 0, -7, INT32_MIN, 0, 3 << 3, 255, (int32_t)(0xfffffffeu >> 1)};
  for (int i = 0; i < 9; i++)
    CHECK(out[i] == want[i], "ints[%d] = %d, expected %d", i, out[i], want[i]);
  ox_tensor_release(tx);
  ox_tensor_release(ty);
  ox_tensor_release(to);
  ox_module_destroy(m);
}

/* for loops: steps beyond the type's range end the loop, narrow types do not
 * wrap, a zero step runs one iteration; lane_id in a kernel without barriers. */
static void test_loops(void) {
  ox_module m = compile(
      "#[kernel]\n"
      "fn loops(out: DisjointSlice<i32>, s: usize) {\n"
      "    let i = thread::index_1d();\n"
      "    let mut n = 0i32;\n"
      "    for k in (0u8..200).step_by(300) { n += 1; }\n"
      "    for k in (-100i8..100).step_by(s) { n += 100; }\n"
      "    for k in 250u8..255 { n += 10000; }\n"
      "    for k in (0..10).step_by(3) { n += 1000000; }\n"
      "    n += (warp::lane_id() as i32) << 24;\n"
      "    if let Some(o) = out.get_mut(i) { *o = n; }\n"
      "}\n");
  for (int z = 0; z < 2; z++) {
    ox_tensor t = tensor(OX_I32, 40, NULL);
    ox_arg args[2] = {ox_arg_tensor(t), ox_arg_u64(z ? 0 : 50)};
    run(m, "loops", 1, 40, args, 2);
    int32_t got[40];
    fetch(t, got);
    for (int i = 0; i < 40; i++) {
      int32_t want = 1 + (z ? 100 : 400) + 50000 + 4000000 + ((i % 32) << 24);
      CHECK(got[i] == want, "loops (step %d) thread %d: %d, expected %d", z ? 0 : 50, i, got[i], want);
    }
    ox_tensor_release(t);
  }
  ox_module_destroy(m);
}

/* ---- tf32: f32 rounded to 10 mantissa bits, ties away from zero */

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint32_t to_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

/* The reference rounding, in double arithmetic rather than on the bits:
 * x / ulp rounded half away from zero (C's round) times the ulp of a tf32 of
 * x's binade (2^(e-10); subnormals: 2^-136, f32's subnormal step times 2^13).
 * A result of 2^128 overflows to Inf in the conversion to float, as IEEE
 * rounding to nearest makes every value from 0x1.ffep127 up infinite. */
static float tf32_ref(float x) {
  if (isnan(x) || isinf(x) || x == 0)
    return x;
  int e;
  frexp(x, &e); /* x = f * 2^e, 0.5 <= |f| < 1: the binade's exponent is e - 1 */
  double ulp = ldexp(1, (e - 1 < -126 ? -126 : e - 1) - 10);
  double r = round((double)x / ulp) * ulp;
  return r == 0 ? copysignf(0.0f, x) : (float)r;
}

/* `x as tf32` and back to f32, bit for bit against the reference: ties
 * (13 low bits 0x1000) of both signs round away from zero, carries move into
 * the next binade and past the largest finite f32 to Inf, subnormals round
 * on the same grid, -0, Inf and NaN stay. (A NaN whose payload is only in the
 * 13 low bits is left out: the CPU keeps it, the GPU's cvt.rna clears those
 * bits, making it Inf.) */
static void test_tf32_cast(void) {
  ox_module m = compile(
      "#[kernel]\n"
      "fn to_tf32(x: &[f32], out: DisjointSlice<f32>) {\n"
      "    let i = thread::index_1d();\n"
      "    if let Some(o) = out.get_mut(i) { *o = (x[i] as tf32) as f32; }\n"
      "}\n");
  static const uint32_t cases[] = {
      0x3f800000, 0x3f801000, 0x3f803000, 0xbf801000, 0xbf803000, 0x3f800fff, 0x3f801001,
      0xbf800fff, 0x3fffffff, 0x3ffff000, 0xbffff000, 0x7f7fffff, 0x7f7ff000, 0x7f7fefff,
      0xff7ff000, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001, 0x00000000,
      0x80000000, 0x00000001, 0x80000fff, 0x00001000, 0x80001000, 0x00003000, 0x007ff000,
      0x807fffff, 0x00800000, 0x00801000, 0x40490fdb /* pi */, 0x1e3ce508 /* 1e-20 */};
  enum { NC = sizeof cases / sizeof cases[0], N = NC + 512 };
  float x[N], out[N];
  uint32_t lcg = 12345;
  for (int i = 0; i < N; i++) {
    lcg = lcg * 1664525u + 1013904223u;
    x[i] = from_bits(i < NC ? cases[i] : lcg);
  }
  ox_tensor tx = tensor(OX_F32, N, x), to = tensor(OX_F32, N, NULL);
  ox_arg args[2] = {ox_arg_tensor(tx), ox_arg_tensor(to)};
  run(m, "to_tf32", (N + 127) / 128, 128, args, 2);
  fetch(to, out);
  int bad = 0;
  for (int i = 0; i < N; i++) {
    float want = tf32_ref(x[i]);
    int ok = isnan(want) ? isnan(out[i]) : to_bits(out[i]) == to_bits(want);
    if (!ok && bad++ < 5)
      fprintf(stderr, "tf32 of %08x: %08x, expected %08x\n", to_bits(x[i]), to_bits(out[i]),
              to_bits(want));
  }
  CHECK(bad == 0, "%d tf32 casts differ", bad);
  /* the reference itself, on the cases the rounding rule decides */
  CHECK(to_bits(tf32_ref(from_bits(0x3f801000))) == 0x3f802000 &&
            to_bits(tf32_ref(from_bits(0xbf801000))) == 0xbf802000 &&
            to_bits(tf32_ref(from_bits(0x7f7ff000))) == 0x7f800000 &&
            to_bits(tf32_ref(from_bits(0x7f7fefff))) == 0x7f7fe000 &&
            to_bits(tf32_ref(from_bits(0x80001000))) == 0x80002000,
        "tf32 reference");
  ox_tensor_release(tx);
  ox_tensor_release(to);
  ox_module_destroy(m);
}

/* Arithmetic and math on tf32 compute in f32 and round the result to tf32;
 * ints and f64 become f32 first; a tf32 literal is rounded. */
static void test_tf32_ops(void) {
  ox_module m = compile(
      "#[kernel]\n"
      "fn tf32_ops(x: &[f32], y: &[f32], out: DisjointSlice<f32>) {\n"
      "    let i = thread::index_1d();\n"
      "    let k = i.get();\n"
      "    let a = x[k / 8] as tf32;\n"
      "    let b = y[k / 8] as tf32;\n"
      "    let c: tf32 = 0.1;\n"
      "    let r = if k % 8 == 0 { a + b } else if k % 8 == 1 { a * b } else if k % 8 == 2 { a - b }\n"
      "        else if k % 8 == 3 { a / b } else if k % 8 == 4 { (a * a).sqrt() + c }\n"
      "        else if k % 8 == 5 { a.mul_add(b, c) }\n"
      "        else if k % 8 == 6 { ((k as i32) * 12345) as tf32 }\n"
      "        else { ((x[k / 8] as f64) * 3.0) as tf32 };\n"
      "    if let Some(o) = out.get_mut(i) { *o = r as f32; }\n"
      "}\n");
  enum { N = 128 };
  float x[N], y[N], out[8 * N];
  uint32_t lcg = 777;
  for (int i = 0; i < N; i++) {
    lcg = lcg * 1664525u + 1013904223u;
    x[i] = (float)((double)(lcg >> 8) / (1 << 24) * 8 - 4); /* [-4, 4), full mantissas */
    lcg = lcg * 1664525u + 1013904223u;
    y[i] = (float)((double)(lcg >> 8) / (1 << 24) * 3 + 0.5);
  }
  ox_tensor tx = tensor(OX_F32, N, x), ty = tensor(OX_F32, N, y), to = tensor(OX_F32, 8 * N, NULL);
  ox_arg args[3] = {ox_arg_tensor(tx), ox_arg_tensor(ty), ox_arg_tensor(to)};
  run(m, "tf32_ops", 8 * N / 128, 128, args, 3);
  fetch(to, out);
  int bad = 0, low = 0;
  float c = tf32_ref(0.1f);
  for (int k = 0; k < 8 * N; k++) {
    float a = tf32_ref(x[k / 8]), b = tf32_ref(y[k / 8]), r;
    switch (k % 8) {
    case 0: r = a + b; break;
    case 1: r = a * b; break;
    case 2: r = a - b; break;
    case 3: r = a / b; break;
    case 4: r = tf32_ref(sqrtf(tf32_ref(a * a))) + c; break;
    case 5: r = fmaf(a, b, c); break;
    case 6: r = (float)(k * 12345); break;
    default: r = (float)((double)x[k / 8] * 3.0); break;
    }
    float want = tf32_ref(r);
    low += (to_bits(out[k]) & 0x1fff) != 0;
    if (to_bits(out[k]) != to_bits(want) && bad++ < 5)
      fprintf(stderr, "tf32 op %d of %g, %g: %a, expected %a\n", k % 8, a, b, out[k], want);
  }
  CHECK(bad == 0, "%d tf32 results differ", bad);
  CHECK(low == 0, "%d tf32 results keep low mantissa bits", low);
  ox_tensor_release(tx);
  ox_tensor_release(ty);
  ox_tensor_release(to);
  ox_module_destroy(m);
}

int main(int argc, char **argv) {
  const char *d = argc > 1 ? argv[1] : "cpu";
  CHECK_OK(ox_device_get(strcmp(d, "cpu") ? OX_DEVICE_CUDA : OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("semantics_test");
  test_warp();
  test_atomics();
  test_math();
  test_math_more();
  test_ints();
  test_loops();
  test_tf32_cast();
  test_tf32_ops();
  return test_done("semantics_test");
}
