/* fp8_test - f8e4m3 and f8e5m2 end to end on one device (argv[1]: "cpu" or
 * "cuda"): the conversions from f32 against a reference that searches all
 * 256 codes for the nearest (ties to the even code, saturating), the
 * conversions back against an independent decoding, and fp8 matmuls (K-major
 * B as wgmma takes fp8 on sm_90; N-major B, mixed formats and unaligned rows,
 * which are widened to f16) against a double-precision product, with
 * dimensions no tile divides and outputs poisoned with NaN. */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "check.h"

static ox_device dev;

/* C = A x B^T * s for A [M, K] of TA and Bt [N, K] of TB: B consumed K-major */
#define MM_KMAJOR(name, TA, TB)                                                                    \
  "#[tile]\n"                                                                                     \
  "fn " name "<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>,\n"     \
  "        a: &Tensor<" TA ", [-1, -1]>, bt: &Tensor<" TB ", [-1, -1]>, s: f32) {\n"             \
  "    let pa = a.partition([BM, BK]);\n"                                                         \
  "    let pb = bt.partition([BN, BK]);\n"                                                        \
  "    let mut acc = full([BM, BN], 0.0f32);\n"                                                   \
  "    for k in 0..(a.dim(1) + (BK as usize) - 1) / (BK as usize) {\n"                            \
  "        acc = mma(pa.load([tile_id(0), k]), transpose(pb.load([tile_id(1), k])), acc);\n"      \
  "    }\n"                                                                                       \
  "    c.store(acc * s);\n"                                                                       \
  "}\n"

static const char *SRC =
    "#[tile]\n"
    "fn conv<const B: i32>(y4: &mut Tensor<f8e4m3, [B]>, y5: &mut Tensor<f8e5m2, [B]>, x: &Tensor<f32, [-1]>) {\n"
    "    let t = x.partition([B]).load([tile_id(0)]);\n"
    "    y4.store(t as f8e4m3);\n"
    "    y5.store(t as f8e5m2);\n"
    "}\n"
    "#[tile]\n"
    "fn back<const B: i32>(z4: &mut Tensor<f32, [B]>, z5: &mut Tensor<f32, [B]>, a: &Tensor<f8e4m3, [-1]>,\n"
    "        b: &Tensor<f8e5m2, [-1]>) {\n"
    "    z4.store(a.partition([B]).load([tile_id(0)]) as f32);\n"
    "    z5.store(b.partition([B]).load([tile_id(0)]) as f32);\n"
    "}\n" MM_KMAJOR("mm_e4m3", "f8e4m3", "f8e4m3") MM_KMAJOR("mm_e5m2", "f8e5m2", "f8e5m2")
        MM_KMAJOR("mm_mixed", "f8e4m3", "f8e5m2")
    "#[tile]\n"
    "fn mm_nmajor<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>,\n"
    "        a: &Tensor<f8e4m3, [-1, -1]>, b: &Tensor<f8e4m3, [-1, -1]>, s: f32) {\n"
    "    let pa = a.partition([BM, BK]);\n"
    "    let pb = b.partition([BK, BN]);\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + (BK as usize) - 1) / (BK as usize) {\n"
    "        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc * s);\n"
    "}\n";

/* The formats, decoded independently of the compiler's bit manipulation. */
static double decode(ox_dtype t, uint8_t c) {
  int M = t == OX_F8E4M3 ? 3 : 2, bias = t == OX_F8E4M3 ? 7 : 15, emax = t == OX_F8E4M3 ? 15 : 31;
  int e = (c & 0x7f) >> M, m = c & ((1 << M) - 1);
  double v;
  if (t == OX_F8E4M3 && (c & 0x7f) == 0x7f)
    v = NAN;
  else if (t == OX_F8E5M2 && e == emax)
    v = m ? NAN : INFINITY;
  else
    v = e ? ldexp(1.0 + m / (double)(1 << M), e - bias) : ldexp(m / (double)(1 << M), 1 - bias);
  return c & 0x80 ? -v : v;
}

/* The code x converts to: the nearest finite value (ties to the even code),
 * the largest finite one beyond it (saturation), NaN for NaN. */
static uint8_t encode(ox_dtype t, double x) {
  if (isnan(x))
    return 0x7f;
  double max = t == OX_F8E4M3 ? 448 : 57344;
  if (fabs(x) >= max)
    return (uint8_t)((t == OX_F8E4M3 ? 0x7e : 0x7b) | (signbit(x) ? 0x80 : 0));
  double best = INFINITY;
  int code = 0;
  for (int c = 0; c < 128; c++) {
    double v = decode(t, (uint8_t)c);
    if (!isfinite(v))
      continue;
    double d = fabs(fabs(x) - v);
    if (d < best || (d == best && !(c & 1))) {
      best = d;
      code = c;
    }
  }
  return (uint8_t)(code | (signbit(x) ? 0x80 : 0));
}

static void test_conversions(ox_kernel conv, ox_kernel back) {
  /* every value of both formats, the midpoints between neighbours and an f32
     step either side, values beyond the ranges, infinities, NaN, tiny ones */
  enum { MAXN = 8192 };
  float *x = malloc(sizeof(float) * MAXN);
  int n = 0;
  for (int f = 0; f < 2; f++) {
    ox_dtype t = f ? OX_F8E5M2 : OX_F8E4M3;
    for (int c = 0; c < 256; c++) {
      double v = decode(t, (uint8_t)c), w = decode(t, (uint8_t)(c + 1));
      if (!isfinite(v))
        continue;
      x[n++] = (float)v;
      if ((c & 0x7f) < 0x7f && isfinite(w) && (c & 0x7f) != 0x7f) {
        float mid = (float)((v + w) / 2);
        x[n++] = mid;
        x[n++] = nextafterf(mid, INFINITY);
        x[n++] = nextafterf(mid, -INFINITY);
      }
    }
  }
  const float extra[] = {448, 449, 464, 465, 480, 1e6f, -1e6f, 57344, 61439, 61440, 1e30f, -1e30f,
                         INFINITY, -INFINITY, NAN, 0x1p-10f, 0x1p-11f, 0x1.1p-10f, 0x1p-17f, 0x1p-18f,
                         0x1.01p-17f, 1e-30f, -0.0f, 0.0f, 3.0e-3f, 0.1f, -2.7f};
  for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
    x[n++] = extra[i];
  CHECK(n <= MAXN, "%d inputs", n);
  const int64_t shape[1] = {n}, tile[1] = {256};
  ox_tensor tx, y4, y5, p4, p5;
  CHECK_OK(ox_tensor_from_host(dev, NULL, OX_F32, 1, shape, x, sizeof(float) * (size_t)n, &tx));
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_F8E4M3, 1, shape, &y4));
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_F8E5M2, 1, shape, &y5));
  CHECK_OK(ox_tensor_partition(y4, 1, tile, &p4));
  CHECK_OK(ox_tensor_partition(y5, 1, tile, &p5));
  ox_arg args[3] = {ox_arg_tensor(p4), ox_arg_tensor(p5), ox_arg_tensor(tx)};
  CHECK_OK(ox_launch(conv, NULL, NULL, args, 3));
  uint8_t *q[2] = {malloc((size_t)n), malloc((size_t)n)};
  CHECK_OK(ox_tensor_to_host(y4, NULL, q[0], (size_t)n));
  CHECK_OK(ox_tensor_to_host(y5, NULL, q[1], (size_t)n));
  int bad = 0;
  for (int f = 0; f < 2; f++)
    for (int i = 0; i < n; i++) {
      ox_dtype t = f ? OX_F8E5M2 : OX_F8E4M3;
      uint8_t want = encode(t, x[i]);
      bool ok = isnan(x[i]) ? isnan(decode(t, q[f][i])) : q[f][i] == want;
      if (!ok && bad++ < 10)
        fprintf(stderr, "  %s(%a) = 0x%02x, expected 0x%02x\n", ox_dtype_name(t), (double)x[i], q[f][i], want);
    }
  CHECK(bad == 0, "conversions to fp8: %d of %d wrong", bad, 2 * n);
  /* back: every code of both formats */
  const int64_t s256[1] = {256};
  uint8_t codes[256];
  for (int c = 0; c < 256; c++)
    codes[c] = (uint8_t)c;
  ox_tensor a4, a5, z4, z5, pz4, pz5;
  CHECK_OK(ox_tensor_from_host(dev, NULL, OX_F8E4M3, 1, s256, codes, 256, &a4));
  CHECK_OK(ox_tensor_from_host(dev, NULL, OX_F8E5M2, 1, s256, codes, 256, &a5));
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_F32, 1, s256, &z4));
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_F32, 1, s256, &z5));
  const int64_t t64[1] = {64};
  CHECK_OK(ox_tensor_partition(z4, 1, t64, &pz4));
  CHECK_OK(ox_tensor_partition(z5, 1, t64, &pz5));
  ox_arg bargs[4] = {ox_arg_tensor(pz4), ox_arg_tensor(pz5), ox_arg_tensor(a4), ox_arg_tensor(a5)};
  CHECK_OK(ox_launch(back, NULL, NULL, bargs, 4));
  float z[2][256];
  CHECK_OK(ox_tensor_to_host(z4, NULL, z[0], sizeof z[0]));
  CHECK_OK(ox_tensor_to_host(z5, NULL, z[1], sizeof z[1]));
  bad = 0;
  for (int f = 0; f < 2; f++)
    for (int c = 0; c < 256; c++) {
      double want = decode(f ? OX_F8E5M2 : OX_F8E4M3, (uint8_t)c);
      bool ok = isnan(want) ? isnan(z[f][c]) : z[f][c] == want && !signbit(z[f][c]) == !signbit(want);
      if (!ok && bad++ < 10)
        fprintf(stderr, "  %s 0x%02x -> %a, expected %a\n", f ? "f8e5m2" : "f8e4m3", c, (double)z[f][c], want);
    }
  CHECK(bad == 0, "conversions from fp8: %d of 512 wrong", bad);
  ox_tensor all[] = {tx, y4, y5, p4, p5, a4, a5, z4, z5, pz4, pz5};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    ox_tensor_release(all[i]);
  free(q[0]);
  free(q[1]);
  free(x);
}

static unsigned rng = 12345;
/* A random finite code of magnitude below 32 (e4m3) or 28 (e5m2). */
static uint8_t rand_code(ox_dtype t) {
  rng = rng * 1664525u + 1013904223u;
  unsigned r = rng >> 8;
  return (uint8_t)((r & 0x80) | (r >> 8) % (t == OX_F8E4M3 ? 0x60u : 0x50u));
}

/* An R x C fp8 matrix of random codes (vals: their values), as a view into
 * a wider tensor when `pad` (rows pad bytes apart more: not 16-byte aligned
 * for pad 1, so not copied by cp.async). */
static ox_tensor matrix(ox_dtype t, int64_t R, int64_t C, int pad, double *vals, ox_tensor *base) {
  int64_t pitch = C + pad, shape[2] = {R, pitch};
  uint8_t *h = malloc((size_t)(R * pitch));
  for (int64_t i = 0; i < R * pitch; i++)
    h[i] = 0x7f; /* NaN in both formats: must never be read */
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) {
      uint8_t c = rand_code(t);
      h[i * pitch + j] = c;
      vals[i * C + j] = decode(t, c);
    }
  CHECK_OK(ox_tensor_from_host(dev, NULL, t, 2, shape, h, (size_t)(R * pitch), base));
  free(h);
  ox_tensor v = NULL;
  CHECK_OK(ox_tensor_slice(*base, 1, 0, C, 1, &v));
  return v;
}

typedef struct mm_case {
  int64_t M, N, K;
  int pad; /* B's rows: 0 contiguous, 1 unaligned */
} mm_case;

/* kernel k on tiles BM x BN x BK; kmajor: B given as Bt [N, K] */
static void test_matmul(ox_kernel k, const char *what, ox_dtype ta, ox_dtype tb, bool kmajor, const int64_t *tile,
                        int64_t BK, const mm_case *cases, int ncases) {
  CHECK_OK(ox_kernel_set_generic(k, "BK", BK));
  /* on wgmma (sm_90) with fp8 inputs: one format, B K-major */
  bool fast = ox_device_compute_capability(dev) >= 90 && kmajor && ta == tb;
  for (int ci = 0; ci < ncases; ci++) {
    mm_case cs = cases[ci];
    int64_t M = cs.M, N = cs.N, K = cs.K;
    double *a = malloc(sizeof(double) * (size_t)(M * K)), *b = malloc(sizeof(double) * (size_t)(N * K));
    ox_tensor abase, bbase;
    ox_tensor tA = matrix(ta, M, K, 0, a, &abase);
    ox_tensor tB = kmajor ? matrix(tb, N, K, cs.pad, b, &bbase) : matrix(tb, K, N, cs.pad, b, &bbase);
    const int64_t sc[2] = {M, N};
    ox_tensor tc, part;
    CHECK_OK(ox_tensor_full(dev, NULL, OX_F32, 2, sc, NAN, &tc));
    CHECK_OK(ox_tensor_partition(tc, 2, tile, &part));
    const float s = 0.25f;
    ox_arg args[4] = {ox_arg_tensor(part), ox_arg_tensor(tA), ox_arg_tensor(tB), ox_arg_f32(s)};
    CHECK_OK(ox_launch(k, NULL, NULL, args, 4));
    float *got = malloc(sizeof(float) * (size_t)(M * N));
    CHECK_OK(ox_tensor_to_host(tc, NULL, got, sizeof(float) * (size_t)(M * N)));
    int bad = 0;
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double want = 0, mag = 0;
        for (int64_t p = 0; p < K; p++) {
          double x = a[i * K + p] * (kmajor ? b[j * K + p] : b[p * N + j]);
          want += x;
          mag += fabs(x);
        }
        want *= s;
        mag *= s;
        /* exact products, f32 accumulation: error ~ K * 2^-24 * sum |a b|; fp8 wgmma
           accumulates in the tensor cores with fewer bits (about 14, as cuBLAS's
           fast accumulation does; measured up to ~5e-4 * sum |a b| for f8e5m2 at
           K = 333 on the H200), still far below one product left out */
        double rel = fast ? 1e-3 : 1e-5;
        if (!(fabs(got[i * N + j] - want) <= rel * mag + 1e-6) && bad++ < 5)
          fprintf(stderr, "  %s: c[%lld][%lld] = %.9g, expected %.9g\n", what, (long long)i, (long long)j,
                  got[i * N + j], want);
      }
    CHECK(bad == 0, "%s %lldx%lldx%lld tiles, M=%lld N=%lld K=%lld, B rows padded by %d: %d wrong", what,
          (long long)tile[0], (long long)tile[1], (long long)BK, (long long)M, (long long)N, (long long)K, cs.pad, bad);
    ox_tensor all[] = {tA, tB, abase, bbase, tc, part};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
      ox_tensor_release(all[i]);
    free(a);
    free(b);
    free(got);
  }
}

int main(int argc, char **argv) {
  const char *d = argc > 1 ? argv[1] : "cpu";
  CHECK_OK(ox_device_get(strcmp(d, "cpu") ? OX_DEVICE_CUDA : OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("fp8_test");
  ox_compile_options o = {.filename = "fp8.oxk"};
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(dev, SRC, &o, &m));
  if (!m)
    return test_done("fp8_test");
  ox_kernel conv, back, e4, e5, mixed, nmajor;
  CHECK_OK(ox_module_get_kernel(m, "conv", &conv));
  CHECK_OK(ox_module_get_kernel(m, "back", &back));
  CHECK_OK(ox_module_get_kernel(m, "mm_e4m3", &e4));
  CHECK_OK(ox_module_get_kernel(m, "mm_e5m2", &e5));
  CHECK_OK(ox_module_get_kernel(m, "mm_mixed", &mixed));
  CHECK_OK(ox_module_get_kernel(m, "mm_nmajor", &nmajor));
  test_conversions(conv, back);
  static const mm_case cases[] = {{200, 136, 96, 0}, {67, 300, 100, 0}, {1, 1, 1, 0}, {130, 70, 333, 1}};
  static const mm_case big[] = {{300, 520, 333, 0}};
  const int64_t t128[2] = {128, 128}, t64[2] = {64, 64}, t256[2] = {128, 256};
  /* on sm_90: fp8 wgmma (k32), pipelined along K where B's rows allow cp.async */
  test_matmul(e4, "mm_e4m3", OX_F8E4M3, OX_F8E4M3, true, t128, 64, cases, 4);
  test_matmul(e4, "mm_e4m3", OX_F8E4M3, OX_F8E4M3, true, t64, 32, cases, 4);
  test_matmul(e4, "mm_e4m3", OX_F8E4M3, OX_F8E4M3, true, t256, 128, big, 1);
  test_matmul(e5, "mm_e5m2", OX_F8E5M2, OX_F8E5M2, true, t128, 128, cases, 4);
  /* widened to f16 on every target */
  test_matmul(mixed, "mm_mixed", OX_F8E4M3, OX_F8E5M2, true, t128, 64, cases, 4);
  test_matmul(nmajor, "mm_nmajor", OX_F8E4M3, OX_F8E4M3, false, t128, 64, cases, 4);
  ox_module_destroy(m);
  return test_done("fp8_test");
}
