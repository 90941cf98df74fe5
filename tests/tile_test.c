/* tile_test - #[tile] kernels end to end on one device (argv[1]: "cpu" or
 * "cuda"): generics bound from partitions, masked edges, 2-D tiles over
 * strided (transposed) inputs, casts and math, the launch checks, and
 * dot/mma matmuls, their epilogues and `let mut` tiles carried by loops. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"

static ox_device dev;

/* C = A x B for inputs of dtype T, K in steps of BK (string literals) */
#define MATMUL(name, T, BK)                                                                          \
  "#[tile]\n"                                                                                       \
  "fn " name "<const BM: i32, const BN: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<" T           \
  ", [-1, -1]>, b: &Tensor<" T ", [-1, -1]>) {\n"                                                   \
  "    let pa = a.partition([BM, " BK "]);\n"                                                       \
  "    let pb = b.partition([" BK ", BN]);\n"                                                       \
  "    let mut acc = full([BM, BN], 0.0f32);\n"                                                     \
  "    for k in 0..(a.dim(1) + " BK " - 1) / " BK " {\n"                                            \
  "        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);\n"                   \
  "    }\n"                                                                                         \
  "    c.store(acc);\n"                                                                             \
  "}\n"

static const char *SRC =
    "#[tile]\n"
    "fn add<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>) {\n"
    "    z.store(load_tile_like(x, z) + load_tile_like(y, z));\n"
    "}\n"
    "#[tile]\n"
    "fn scale2d<const BM: i32, const BN: i32>(z: &mut Tensor<f16, [BM, BN]>, x: &Tensor<f32, [-1, -1]>, s: f32) {\n"
    "    let t = x.partition([BM, BN]).load([tile_id(0), tile_id(1)]);\n"
    "    z.store((t * s).exp() as f16);\n"
    "}\n"
    "#[tile]\n"
    "fn rmsnorm<const BN: i32>(y: &mut Tensor<f32, [1, BN]>, x: &Tensor<f32, [-1, -1]>, w: &Tensor<f32, [1, -1]>, n: f32, eps: f32) {\n"
    "    let t = x.partition([1, BN]).load([tile_id(0), 0]);\n"
    "    let ms = reduce_sum(t * t, 1) / n;\n"
    "    y.store(t * rsqrt(ms + eps) * w.partition([1, BN]).load([0, 0]));\n"
    "}\n"
    "#[tile]\n"
    "fn layernorm<const BN: i32>(y: &mut Tensor<f32, [1, BN]>, x: &Tensor<f32, [-1, -1]>, n: f32, eps: f32) {\n"
    "    let t = x.partition([1, BN]).load([tile_id(0), 0]);\n"
    "    let mean = reduce_sum(t, 1) / n;\n"
    "    let var = reduce_sum(t * t, 1) / n - mean * mean;\n"
    "    y.store((t - mean) * rsqrt(var + eps));\n"
    "}\n"
    "#[tile]\n"
    "fn colmax<const BN: i32>(y: &mut Tensor<i32, [1, BN]>, x: &Tensor<i32, [16, -1]>) {\n"
    "    y.store(reduce_max(x.partition([16, BN]).load_padded([0, tile_id(1)], i32::MIN), 0));\n"
    "}\n"
    "#[tile]\n"
    "fn far<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, i: u64) {\n"
    "    z.store(x.partition([B]).load_padded([i], -7.0));\n"
    "}\n"
    "#[tile]\n"
    "fn tr<const B: i32>(z: &mut Tensor<f32, [B, B]>, x: &Tensor<f32, [-1, -1]>) {\n"
    "    let t = x.partition([B, B]).load([tile_id(1), tile_id(0)]);\n"
    "    z.store(transpose(t));\n"
    "}\n"
    "#[tile]\n"
    "fn shapes(z: &mut Tensor<i32, [4, 8]>, x: &Tensor<i32, [-1]>) {\n"
    "    let t = x.partition([32]).load([0]);\n"
    "    let a = reshape(t, [4, 8]);\n"
    "    let b = permute(reshape(t, [2, 4, 4]), [2, 0, 1]);\n"
    "    let c = reshape(b, [4, 8]);\n"
    "    let d = broadcast_to(full([1, 8], 1000), [4, 8]) + iota([4, 8], 0) * 100;\n"
    "    z.store(a * 1000000 + c * 1000 + d);\n"
    "}\n"
    "#[tile]\n"
    "fn two<const B: i32>(a: &mut Tensor<i32, [B]>, b: &mut Tensor<i32, [B]>, x: &Tensor<i32, [-1]>) {\n"
    "    let t = load_tile_like(x, a);\n"
    "    a.store(t + 1);\n"
    "    b.store(t * 2);\n"
    "}\n"
    /* a K-loop matmul carrying its accumulator tile (tensor cores on CUDA
     * for bf16/f16 when the warps can tile the result; else shared memory) */
    MATMUL("mm_bf16", "bf16", "32")
    MATMUL("mm_f32", "f32", "8")
    /* K steps of 64 and 128 (whole 128-byte rows): wgmma on sm_90 for M of
     * 64 or 128 and N of 64 to 256 */
    MATMUL("mm_wg", "bf16", "64")
    MATMUL("mm_wg16", "f16", "128")
    /* f32 tensors multiplied as tf32 (tensor cores, m16n8k8, on CUDA) */
    "#[tile]\n"
    "fn mm_tf32<const BM: i32, const BN: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<f32, [-1, -1]>, b: &Tensor<f32, [-1, -1]>) {\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + 15) / 16 {\n"
    "        let x = a.partition([BM, 16]).load([tile_id(0), k]) as tf32;\n"
    "        acc = mma(x, b.partition([16, BN]).load([k, tile_id(1)]) as tf32, acc);\n"
    "    }\n"
    "    c.store(acc);\n"
    "}\n"
    "#[tile]\n"
    "fn mm_f16<const BM: i32, const BN: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<f16, [-1, -1]>, b: &Tensor<f16, [-1, -1]>) {\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + 15) / 16 {\n"
    "        acc += dot(a.partition([BM, 16]).load([tile_id(0), k]), b.partition([16, BN]).load([k, tile_id(1)]));\n"
    "    }\n"
    "    c.store(acc);\n"
    "}\n"
    /* an epilogue that keeps the mma layout (c), then one that needs the
     * blocked layout (d: a broadcast row added) */
    "#[tile]\n"
    "fn mm_epi<const BM: i32, const BN: i32>(c: &mut Tensor<f32, [BM, BN]>, d: &mut Tensor<f32, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>, bias: &Tensor<f32, [1, -1]>, alpha: f32) {\n"
    "    let pa = a.partition([BM, 32]);\n"
    "    let pb = b.partition([32, BN]);\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + 31) / 32 {\n"
    "        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    let r = acc * alpha + 1.0;\n"
    "    c.store(r);\n"
    "    d.store(max(r, 0.0) + bias.partition([1, BN]).load([0, tile_id(1)]));\n"
    "}\n"
    /* row sums of A x B: a reduction of the accumulator, over column tiles */
    "#[tile]\n"
    "fn mm_rowsum<const BM: i32>(s: &mut Tensor<f32, [BM, 1]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let pa = a.partition([BM, 64]);\n"
    "    let pb = b.partition([64, 64]);\n"
    "    let mut tot = full([BM, 1], 0.0f32);\n"
    "    let mut acc = full([BM, 64], 0.0f32);\n"
    "    for j in 0..(b.dim(1) + 63) / 64 {\n"
    "        acc = full([BM, 64], 0.0f32);\n"
    "        for k in 0..(a.dim(1) + 63) / 64 {\n"
    "            acc = mma(pa.load([tile_id(0), k]), pb.load([k, j]), acc);\n"
    "        }\n"
    "        tot += reduce_sum(acc, 1);\n"
    "    }\n"
    "    s.store(tot);\n"
    "}\n"
    /* two products in one K loop (two tensor-core dots, each pipelined on
     * CUDA for aligned inputs) */
    "#[tile]\n"
    "fn mm_two<const BM: i32, const BN: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>, a2: &Tensor<bf16, [-1, -1]>, b2: &Tensor<bf16, [-1, -1]>) {\n"
    "    let pa = a.partition([BM, 32]);\n"
    "    let pb = b.partition([32, BN]);\n"
    "    let pa2 = a2.partition([BM, 32]);\n"
    "    let pb2 = b2.partition([32, BN]);\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    let mut acc2 = full([BM, BN], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + 31) / 32 {\n"
    "        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);\n"
    "        acc2 = mma(pa2.load([tile_id(0), k]), pb2.load([k, tile_id(1)]), acc2);\n"
    "    }\n"
    "    c.store(acc - acc2 * 0.5);\n"
    "}\n"
    /* the K tiles in reverse order (a prefetch of the next K tile is always
     * the wrong guess), then (A x B)^T as bf16, through shared memory */
    "#[tile]\n"
    "fn mm_rev<const BN: i32, const BM: i32>(ct: &mut Tensor<bf16, [BN, BM]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let pa = a.partition([BM, 32]);\n"
    "    let pb = b.partition([32, BN]);\n"
    "    let nk = (a.dim(1) + 31) / 32;\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for i in 0..nk {\n"
    "        acc = mma(pa.load([tile_id(1), nk - 1 - i]), pb.load([nk - 1 - i, tile_id(0)]), acc);\n"
    "    }\n"
    "    ct.store(transpose(acc as bf16));\n"
    "}\n"
    /* the K tiles from the middle, wrapping to 0: the prefetches guess right,
     * then wrong once with copies in flight (the pipeline's ring drains and
     * releases its stages, refills, and runs on), then right again */
    "#[tile]\n"
    "fn mm_wrap<const BM: i32, const BN: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let pa = a.partition([BM, 64]);\n"
    "    let pb = b.partition([64, BN]);\n"
    "    let nk = (a.dim(1) + 63) / 64;\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for i in 0..nk {\n"
    "        let k = (i + nk / 2) % nk;\n"
    "        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc);\n"
    "}\n"
    /* the same walk with A negated (in registers, staged by the threads): on
     * sm_90 B alone is a TMA load, through a ring of its own whose next tile
     * is copied ahead; the guesses go right, wrong once at the wrap, right */
    "#[tile]\n"
    "fn mm_tl<const BM: i32, const BN: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let pa = a.partition([BM, 64]);\n"
    "    let pb = b.partition([64, BN]);\n"
    "    let nk = (a.dim(1) + 63) / 64;\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for i in 0..nk {\n"
    "        let k = (i + nk / 2) % nk;\n"
    "        let bt = pb.load([k, tile_id(1)]);\n"
    "        acc = mma(-pa.load([tile_id(0), k]), bt, acc);\n"
    "    }\n"
    "    c.store(-acc);\n"
    "}\n"
    /* `let mut` tiles in a scalar loop, no dot (the `if` comes last: a tile
     * value such as t defined before an `if` and used after it or inside it,
     * or defined before a loop and used in it, is not compiled yet) */
    "#[tile]\n"
    "fn shiftsum<const B: i32>(z: &mut Tensor<f32, [B]>, bits: &mut Tensor<i32, [B]>, x: &Tensor<f32, [-1]>, n: u64) {\n"
    "    let p = x.partition([B]);\n"
    "    let mut s = full([B], 0.0f32);\n"
    "    let mut m = full([B], 0i32);\n"
    "    for j in 0..n {\n"
    "        let t = p.load([tile_id(0) + j]);\n"
    "        s += t;\n"
    "        s = s * 0.5;\n"
    "        m = m * 2 + select(t > 0.0, 1, 0);\n"
    "        if j == 2 {\n"
    "            s = s * 0.25;\n"
    "        }\n"
    "    }\n"
    "    s -= 1.0;\n"
    "    z.store(s);\n"
    "    bits.store(m);\n"
    "}\n"
    /* dot without an accumulator, one K tile */
    "#[tile]\n"
    "fn dot1<const BM: i32, const BN: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<f16, [-1, -1]>, b: &Tensor<f16, [-1, -1]>) {\n"
    "    c.store(dot(a.partition([BM, 32]).load([tile_id(0), 0]), b.partition([32, BN]).load([0, tile_id(1)])));\n"
    "}\n"
    /* atomic adds into tensors, with the grid from the launch: a split-K
     * matmul (blocks (j, i, s) add their part of K into C) and a histogram */
    "#[tile]\n"
    "fn splitk(c: &Tensor<Atomic<f32>, [-1, -1]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>, kper: u64) {\n"
    "    let pa = a.partition([64, 32]);\n"
    "    let pb = b.partition([32, 64]);\n"
    "    let mut acc = full([64, 64], 0.0f32);\n"
    "    let k0 = tile_id(2) * kper;\n"
    "    for k in k0..k0 + kper {\n"
    "        acc = mma(pa.load([tile_id(1), k]), pb.load([k, tile_id(0)]), acc);\n"
    "    }\n"
    "    c.atomic_add([tile_id(1), tile_id(0)], acc);\n"
    "}\n"
    "#[tile]\n"
    "fn hist(h: &Tensor<Atomic<u32>, [-1]>, x: &Tensor<i32, [-1]>) {\n"
    "    h.atomic_add_at(x.partition([256]).load_padded([tile_id(0)], -1), 1u32);\n"
    "}\n";

static ox_tensor host_tensor(ox_dtype dt, int ndim, const int64_t *shape, const void *data) {
  int64_t n = 1;
  for (int i = 0; i < ndim; i++)
    n *= shape[i];
  ox_tensor t = NULL;
  CHECK_OK(ox_tensor_from_host(dev, NULL, dt, ndim, shape, data, (size_t)n * ox_dtype_size(dt), &t));
  return t;
}

static void test_add(ox_kernel k) {
  static const int64_t cases[][2] = {{1024, 128}, {100003, 1024}, {5, 4}, {1, 1}, {3000, 2}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int64_t n = cases[c][0], tile = cases[c][1];
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n),
          *z = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
      x[i] = (float)(i % 97) * 0.5f;
      y[i] = (float)(i % 13) - 6.0f;
      z[i] = NAN;
    }
    ox_tensor tx = host_tensor(OX_F32, 1, &n, x), ty = host_tensor(OX_F32, 1, &n, y);
    ox_tensor tz = host_tensor(OX_F32, 1, &n, z), part = NULL;
    CHECK_OK(ox_tensor_partition(tz, 1, &tile, &part));
    ox_arg args[3] = {ox_arg_tensor(part), ox_arg_tensor(tx), ox_arg_tensor(ty)};
    CHECK_OK(ox_launch(k, NULL, NULL, args, 3));
    CHECK_OK(ox_tensor_to_host(tz, NULL, z, sizeof(float) * (size_t)n));
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
      bad += z[i] != x[i] + y[i];
    CHECK(bad == 0, "add n=%lld tile=%lld: %d wrong", (long long)n, (long long)tile, bad);
    ox_tensor_release(part);
    ox_tensor_release(tx);
    ox_tensor_release(ty);
    ox_tensor_release(tz);
    free(x);
    free(y);
    free(z);
  }
}

/* z[i][j] = exp(x[i][j] * s) as f16, where x is a transposed view (strides
 * (1, M)) of an N x M tensor, and the tiles do not divide M x N. */
static void test_scale2d(ox_kernel k) {
  const int64_t M = 37, N = 70, shape_t[2] = {N, M};
  float *xt = malloc(sizeof(float) * (size_t)(M * N));
  for (int64_t i = 0; i < M * N; i++)
    xt[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
  ox_tensor base = host_tensor(OX_F32, 2, shape_t, xt), x = NULL;
  CHECK_OK(ox_tensor_transpose(base, 0, 1, &x)); /* M x N, strides (1, M) */
  const int64_t zshape[2] = {M, N}, tile[2] = {16, 32};
  ox_tensor z = NULL, part = NULL;
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_F16, 2, zshape, &z));
  CHECK_OK(ox_tensor_partition(z, 2, tile, &part));
  const float s = 1.5f;
  ox_arg args[3] = {ox_arg_tensor(part), ox_arg_tensor(x), ox_arg_f32(s)};
  CHECK_OK(ox_launch(k, NULL, NULL, args, 3));
  uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(M * N));
  CHECK_OK(ox_tensor_to_host(z, NULL, h, sizeof(uint16_t) * (size_t)(M * N)));
  int bad = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      /* decode f16 */
      uint16_t b = h[i * N + j];
      int e = (b >> 10) & 31;
      double mant = (b & 1023) / 1024.0, got = e ? ldexp(1 + mant, e - 15) : ldexp(mant, -14);
      if (b & 0x8000)
        got = -got;
      double want = exp((double)xt[j * M + i] * s);
      bad += fabs(got - want) > 2e-3 * want;
    }
  CHECK(bad == 0, "scale2d: %d of %lld wrong", bad, (long long)(M * N));
  ox_tensor_release(part);
  ox_tensor_release(z);
  ox_tensor_release(x);
  ox_tensor_release(base);
  free(xt);
  free(h);
}

/* Row reductions with broadcasting back: RMSNorm and LayerNorm over rows
 * whose length is not a power of two (padding 0 adds nothing to the sums). */
static void test_norms(ox_kernel rms, ox_kernel ln) {
  const int64_t rows = 37, cols = 300, shape[2] = {rows, cols}, wshape[2] = {1, cols}, tile[2] = {1, 512};
  float *x = malloc(sizeof(float) * (size_t)(rows * cols)), *w = malloc(sizeof(float) * (size_t)cols),
        *y = malloc(sizeof(float) * (size_t)(rows * cols));
  for (int64_t i = 0; i < rows * cols; i++)
    x[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
  for (int64_t c = 0; c < cols; c++)
    w[c] = 0.5f + (float)c / (float)cols;
  ox_tensor tx = host_tensor(OX_F32, 2, shape, x), tw = host_tensor(OX_F32, 2, wshape, w), ty = NULL, part = NULL;
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_F32, 2, shape, &ty));
  CHECK_OK(ox_tensor_partition(ty, 2, tile, &part));
  const float eps = 1e-5f;
  for (int which = 0; which < 2; which++) {
    ox_arg ra[5] = {ox_arg_tensor(part), ox_arg_tensor(tx), ox_arg_tensor(tw), ox_arg_f32((float)cols), ox_arg_f32(eps)};
    ox_arg la[4] = {ox_arg_tensor(part), ox_arg_tensor(tx), ox_arg_f32((float)cols), ox_arg_f32(eps)};
    CHECK_OK(which ? ox_launch(ln, NULL, NULL, la, 4) : ox_launch(rms, NULL, NULL, ra, 5));
    CHECK_OK(ox_tensor_to_host(ty, NULL, y, sizeof(float) * (size_t)(rows * cols)));
    double worst = 0;
    for (int64_t r = 0; r < rows; r++) {
      double s1 = 0, s2 = 0;
      for (int64_t c = 0; c < cols; c++) {
        s1 += x[r * cols + c];
        s2 += (double)x[r * cols + c] * x[r * cols + c];
      }
      double mean = s1 / cols, var = s2 / cols - mean * mean;
      for (int64_t c = 0; c < cols; c++) {
        double v = x[r * cols + c];
        double want = which ? (v - mean) / sqrt(var + eps) : v / sqrt(s2 / cols + eps) * w[c];
        double err = fabs(y[r * cols + c] - want) / (fabs(want) + 1e-3);
        worst = err > worst ? err : worst;
      }
    }
    CHECK(worst < 2e-4, "%s: worst relative error %.3g", which ? "layernorm" : "rmsnorm", worst);
  }
  ox_tensor_release(part);
  ox_tensor_release(tx);
  ox_tensor_release(tw);
  ox_tensor_release(ty);
  free(x);
  free(w);
  free(y);
}

/* A reduction over axis 0 (columns) of an integer tile, with padding. */
static void test_colmax(ox_kernel k) {
  const int64_t R = 16, C = 100, shape[2] = {R, C}, yshape[2] = {1, C}, tile[2] = {1, 32};
  int32_t x[16 * 100], y[100];
  for (int i = 0; i < R * C; i++)
    x[i] = (int32_t)((i * 7919) % 1000) - 500;
  ox_tensor tx = host_tensor(OX_I32, 2, shape, x), ty = NULL, part = NULL;
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_I32, 2, yshape, &ty));
  CHECK_OK(ox_tensor_partition(ty, 2, tile, &part));
  ox_arg args[2] = {ox_arg_tensor(part), ox_arg_tensor(tx)};
  CHECK_OK(ox_launch(k, NULL, NULL, args, 2));
  CHECK_OK(ox_tensor_to_host(ty, NULL, y, sizeof y));
  int bad = 0;
  for (int c = 0; c < C; c++) {
    int32_t want = INT32_MIN;
    for (int r = 0; r < R; r++)
      want = x[r * C + c] > want ? x[r * C + c] : want;
    bad += y[c] != want;
  }
  CHECK(bad == 0, "colmax: %d of %d wrong", bad, (int)C);
  /* a static dim that the tensor does not have is refused */
  const int64_t shape2[2] = {8, C};
  ox_tensor t8 = NULL;
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_I32, 2, shape2, &t8));
  ox_arg bad_args[2] = {ox_arg_tensor(part), ox_arg_tensor(t8)};
  CHECK_ERR(ox_launch(k, NULL, NULL, bad_args, 2), OX_ERR_INVALID_ARGUMENT, "dim 0 is 8, the kernel says 16");
  ox_tensor_release(t8);
  ox_tensor_release(part);
  ox_tensor_release(tx);
  ox_tensor_release(ty);
}

/* Tile coordinates far past the tensor (even where coord * tile wraps
 * 64 bits) read only padding: never memory outside the tensor. */
static void test_far(ox_kernel k) {
  const int64_t n = 64, tile = 16;
  float x[64], z[64];
  for (int i = 0; i < n; i++)
    x[i] = (float)i;
  ox_tensor tx = host_tensor(OX_F32, 1, &n, x), tz = NULL, part = NULL;
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_F32, 1, &n, &tz));
  CHECK_OK(ox_tensor_partition(tz, 1, &tile, &part));
  static const uint64_t idx[] = {3, 4, 1000, ((uint64_t)1 << 60) - 1, UINT64_MAX, ((uint64_t)1 << 62) + 1};
  for (size_t c = 0; c < sizeof idx / sizeof idx[0]; c++) {
    ox_arg args[3] = {ox_arg_tensor(part), ox_arg_tensor(tx), ox_arg_u64(idx[c])};
    CHECK_OK(ox_launch(k, NULL, NULL, args, 3));
    CHECK_OK(ox_tensor_to_host(tz, NULL, z, sizeof z));
    int bad = 0;
    for (int i = 0; i < n; i++) {
      float want = idx[c] == 3 ? (float)(48 + i % 16) : -7.0f;
      bad += z[i] != want;
    }
    CHECK(bad == 0, "far: tile index %llu: %d wrong", (unsigned long long)idx[c], bad);
  }
  ox_tensor_release(part);
  ox_tensor_release(tx);
  ox_tensor_release(tz);
}

/* transpose, reshape, permute, broadcast_to, full and iota. */
static void test_shapes(ox_kernel tr, ox_kernel shapes) {
  /* a tiled transpose of a 70 x 45 matrix: z = x^T */
  const int64_t M = 70, N = 45, xs[2] = {M, N}, zs[2] = {N, M}, tile[2] = {16, 16};
  float *x = malloc(sizeof(float) * (size_t)(M * N)), *z = malloc(sizeof(float) * (size_t)(M * N));
  for (int64_t i = 0; i < M * N; i++)
    x[i] = (float)i;
  ox_tensor tx = host_tensor(OX_F32, 2, xs, x), tz = NULL, part = NULL;
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_F32, 2, zs, &tz));
  CHECK_OK(ox_tensor_partition(tz, 2, tile, &part));
  ox_arg args[2] = {ox_arg_tensor(part), ox_arg_tensor(tx)};
  CHECK_OK(ox_launch(tr, NULL, NULL, args, 2));
  CHECK_OK(ox_tensor_to_host(tz, NULL, z, sizeof(float) * (size_t)(M * N)));
  int bad = 0;
  for (int64_t i = 0; i < N; i++)
    for (int64_t j = 0; j < M; j++)
      bad += z[i * M + j] != x[j * N + i];
  CHECK(bad == 0, "tiled transpose: %d wrong", bad);
  ox_tensor_release(part);
  ox_tensor_release(tx);
  ox_tensor_release(tz);
  free(x);
  free(z);
  /* shapes: one 4 x 8 tile */
  const int64_t n = 32, s2[2] = {4, 8}, t2[2] = {4, 8};
  int32_t xi[32], zi[32];
  for (int i = 0; i < 32; i++)
    xi[i] = i;
  ox_tensor ti = host_tensor(OX_I32, 1, &n, xi), to = NULL, po = NULL;
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_I32, 2, s2, &to));
  CHECK_OK(ox_tensor_partition(to, 2, t2, &po));
  ox_arg a2[2] = {ox_arg_tensor(po), ox_arg_tensor(ti)};
  CHECK_OK(ox_launch(shapes, NULL, NULL, a2, 2));
  CHECK_OK(ox_tensor_to_host(to, NULL, zi, sizeof zi));
  bad = 0;
  for (int r = 0; r < 4; r++)
    for (int c = 0; c < 8; c++) {
      int f = r * 8 + c;
      /* b = permute(t as [2,4,4], [2,0,1]): b[i][j][k] = t3[j][k][i], shape [4,2,4];
       * c = b flattened row-major */
      int i = f / 8, j = (f / 4) % 2, k = f % 4;
      int cval = xi[j * 16 + k * 4 + i];
      int want = xi[f] * 1000000 + cval * 1000 + 1000 + r * 100;
      bad += zi[f] != want;
    }
  CHECK(bad == 0, "reshape/permute/broadcast_to/full/iota: %d wrong", bad);
  ox_tensor_release(po);
  ox_tensor_release(ti);
  ox_tensor_release(to);
}

/* ---------------------------------------------------------------- dot, mma and `let mut` tiles
 * Fresh random inputs each run (TILE_TEST_SEED=n repeats a run; every failure
 * prints the seed), a double-precision host reference, shapes that the tiles
 * do not divide. Inputs are views inside a frame of NaN, so a load that read
 * memory past a view's edge instead of the padding 0 would spread NaN into
 * the result; outputs are views inside a NaN-poisoned frame, checked after
 * the launch to be all written, and the frame never.
 *
 * Frames are ALIGNED (the view starts 16 bytes into its row and rows are a
 * multiple of 16 bytes apart: a contiguous16 tensor, whose tiles the CUDA
 * lowering moves in 16-byte pieces, cp.async for tensor-core operands; the
 * NaN right after each row then lies in the piece that straddles the edge)
 * or UNALIGNED (2 elements in, rows cols + 5 apart: the general path). */

enum { ALIGNED, UNALIGNED, TRANSPOSED };

/* The frame around a rows x cols view of elements of `es` bytes: 1 row above
 * and below, `left` columns before the view, rows `pitch` elements apart. */
static void frame_of(int how, size_t es, int64_t cols, int64_t *left, int64_t *pitch) {
  int64_t v = 16 / (int64_t)es; /* elements per 16 bytes */
  *left = how == ALIGNED ? v : 2;
  *pitch = how == ALIGNED ? (v + cols + 1 + v - 1) / v * v : cols + 5;
}

static unsigned seed;
static uint64_t rng_state;

static double urand(void) { /* uniform in [-1, 1) (xorshift64*) */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (double)((rng_state * 0x2545F4914F6CDD1DULL) >> 11) * 0x1p-52 - 1.0;
}

/* f32 -> bf16 and f16, rounding to nearest even (finite, |f| < 65504) */
static uint16_t to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static uint16_t to_f16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
  float a = fabsf(f);
  if (a < 0x1p-14f) /* subnormal: units of 2^-24 (1024 rounds up to the smallest normal) */
    return (uint16_t)(sign | (uint16_t)lrintf(a * 0x1p24f));
  int e;
  long q = lrintf(frexpf(a, &e) * 2048.0f); /* 1024 .. 2048 */
  if (q == 2048)
    q = 1024, e++;
  return (uint16_t)(sign | (uint16_t)((e + 14) << 10) | (uint16_t)(q - 1024));
}

static double from_bf16(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* f32 -> tf32: to nearest, ties away from zero, on the 13 dropped bits (as
 * the GPU's cvt.rna.tf32.f32; finite inputs) */
static double tf32_round(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u = (u + 0x1000u) & ~0x1fffu;
  memcpy(&f, &u, 4);
  return f;
}

static double from_f16(uint16_t h) {
  int e = (h >> 10) & 31;
  double mant = (h & 1023) / 1024.0, v = e ? ldexp(1 + mant, e - 15) : ldexp(mant, -14);
  return h & 0x8000 ? -v : v;
}

/* A rows x cols input of dtype dt (f32, f16 or bf16) of random values in
 * [-1, 1), rounded to dt; `val` gets them (row-major, as doubles). It is a
 * view inside a NaN frame, ALIGNED or UNALIGNED, or TRANSPOSED: the
 * transposed view of a cols x rows tensor in an unaligned frame (strides
 * (1, rows + 5)). *base is the whole tensor, to release. */
static ox_tensor framed_input(ox_dtype dt, int64_t rows, int64_t cols, int how, double *val, ox_tensor *base) {
  int transposed = how == TRANSPOSED;
  ox_dtype st = dt == OX_TF32 ? OX_F32 : dt; /* tf32: f32 tensors, which the kernel rounds */
  size_t es = ox_dtype_size(st);
  int64_t left, bc;
  frame_of(how, es, transposed ? rows : cols, &left, &bc);
  int64_t br = (transposed ? cols : rows) + 2, bshape[2] = {br, bc};
  unsigned char *h = malloc(es * (size_t)(br * bc));
  for (int64_t i = 0; i < br * bc; i++) {
    float nan = NAN;
    uint16_t nan16 = dt == OX_BF16 ? 0x7fc0 : 0x7e00;
    memcpy(h + es * (size_t)i, es == 4 ? (const void *)&nan : (const void *)&nan16, es);
  }
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      float f = (float)urand();
      uint16_t b16 = dt == OX_BF16 ? to_bf16(f) : to_f16(f);
      val[i * cols + j] = dt == OX_F32    ? f
                          : dt == OX_TF32 ? tf32_round(f)
                          : dt == OX_BF16 ? from_bf16(b16)
                                          : from_f16(b16);
      int64_t at = transposed ? (j + 1) * bc + i + left : (i + 1) * bc + j + left;
      memcpy(h + es * (size_t)at, es == 4 ? (const void *)&f : (const void *)&b16, es);
    }
  *base = host_tensor(st, 2, bshape, h);
  free(h);
  ox_tensor r = NULL, rc = NULL, v = NULL;
  CHECK_OK(ox_tensor_slice(*base, 0, 1, br - 1, 1, &r));
  CHECK_OK(ox_tensor_slice(r, 1, left, left + (transposed ? rows : cols), 1, &rc));
  ox_tensor_release(r);
  if (!transposed)
    return rc;
  CHECK_OK(ox_tensor_transpose(rc, 0, 1, &v));
  ox_tensor_release(rc);
  return v;
}

/* A rows x cols output of dtype dt (f32 or bf16): a view inside a frame
 * (ALIGNED or UNALIGNED, as above) of a tensor of NaN, partitioned into tiles
 * of `tile`. */
typedef struct framed {
  ox_tensor base, view, part;
  ox_dtype dt;
  int64_t rows, cols, left, pitch;
} framed;

static framed framed_output(ox_dtype dt, int64_t rows, int64_t cols, const int64_t *tile, int how) {
  framed o = {NULL, NULL, NULL, dt, rows, cols, 0, 0};
  frame_of(how, ox_dtype_size(dt), cols, &o.left, &o.pitch);
  const int64_t bshape[2] = {rows + 2, o.pitch};
  ox_tensor r = NULL;
  CHECK_OK(ox_tensor_full(dev, NULL, dt, 2, bshape, NAN, &o.base));
  CHECK_OK(ox_tensor_slice(o.base, 0, 1, rows + 1, 1, &r));
  CHECK_OK(ox_tensor_slice(r, 1, o.left, o.left + cols, 1, &o.view));
  CHECK_OK(ox_tensor_partition(o.view, 2, tile, &o.part));
  ox_tensor_release(r);
  return o;
}

/* Reads the output back: its elements to `got` (row-major, as f32); returns
 * how many frame elements are no longer NaN. */
static int framed_read(const framed *o, float *got) {
  int64_t bc = o->pitch, n = (o->rows + 2) * bc;
  size_t es = ox_dtype_size(o->dt);
  unsigned char *h = malloc(es * (size_t)n);
  CHECK_OK(ox_tensor_to_host(o->base, NULL, h, es * (size_t)n));
  int frame = 0;
  for (int64_t i = 0; i < o->rows + 2; i++)
    for (int64_t j = 0; j < bc; j++) {
      float v;
      uint16_t b16;
      if (es == 4)
        memcpy(&v, h + 4 * (size_t)(i * bc + j), 4);
      else
        memcpy(&b16, h + 2 * (size_t)(i * bc + j), 2), v = (float)from_bf16(b16);
      int inside = i >= 1 && i <= o->rows && j >= o->left && j < o->left + o->cols;
      if (inside)
        got[(i - 1) * o->cols + j - o->left] = v;
      else
        frame += !isnan(v);
    }
  free(h);
  return frame;
}

static void framed_release(framed *o) {
  ox_tensor_release(o->part);
  ox_tensor_release(o->view);
  ox_tensor_release(o->base);
}

/* Counts the elements of `got` farther than tol[i] from want[i] (NaN is
 * always wrong) and prints the first few. */
static int compare(const char *what, const float *got, const double *want, const double *tol, int64_t rows,
                   int64_t cols) {
  int bad = 0;
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      int64_t e = i * cols + j;
      if (!(fabs(got[e] - want[e]) <= tol[e]) && bad++ < 4)
        fprintf(stderr, "  %s (seed %u): [%lld][%lld] = %.9g, expected %.9g (tolerance %.3g)\n", what, seed,
                (long long)i, (long long)j, got[e], want[e], tol[e]);
    }
  return bad;
}

/* C = A x B (M x K by K x N) in double, and sum |a b| per element */
static void host_matmul(const double *a, const double *b, int64_t M, int64_t N, int64_t K, double *c,
                        double *mag) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0, m = 0;
      for (int64_t p = 0; p < K; p++) {
        s += a[i * K + p] * b[p * N + j];
        m += fabs(a[i * K + p] * b[p * N + j]);
      }
      c[i * N + j] = s;
      mag[i * N + j] = m;
    }
}

typedef struct mm_case {
  int64_t M, N, K;
  int how; /* the frames: ALIGNED, UNALIGNED, or B TRANSPOSED (A and C unaligned) */
} mm_case;

static const char *const how_name[] = {"aligned", "unaligned", "B transposed"};

static const mm_case mm_cases[] = {
    {200, 136, 72, ALIGNED}, {200, 136, 5, ALIGNED}, {67, 300, 100, TRANSPOSED}, {90, 50, 40, UNALIGNED},
    {1, 1, 1, ALIGNED}};

/* A matmul kernel (mm_bf16, mm_f16, mm_f32) on tiles `tile`, or, with
 * `dot1`, the single-K-tile dot (K <= 32). */
static void test_matmul(ox_kernel k, ox_dtype dt, const int64_t *tile, const char *what, const mm_case *cases,
                        size_t ncases) {
  for (size_t ci = 0; ci < ncases; ci++) {
    mm_case cs = cases[ci];
    int64_t M = cs.M, N = cs.N, K = cs.K;
    double *a = malloc(sizeof(double) * (size_t)(M * K)), *b = malloc(sizeof(double) * (size_t)(K * N));
    double *want = malloc(sizeof(double) * (size_t)(M * N)), *tol = malloc(sizeof(double) * (size_t)(M * N));
    float *got = malloc(sizeof(float) * (size_t)(M * N));
    int ah = cs.how == TRANSPOSED ? UNALIGNED : cs.how, ch = ah;
    ox_tensor abase, bbase, ta = framed_input(dt, M, K, ah, a, &abase), tb = framed_input(dt, K, N, cs.how, b, &bbase);
    framed c = framed_output(OX_F32, M, N, tile, ch);
    ox_arg args[3] = {ox_arg_tensor(c.part), ox_arg_tensor(ta), ox_arg_tensor(tb)};
    CHECK_OK(ox_launch(k, NULL, NULL, args, 3));
    int frame = framed_read(&c, got);
    host_matmul(a, b, M, N, K, want, tol);
    /* f32 accumulation of K products: error ~ K * 2^-24 * sum |a b| */
    for (int64_t e = 0; e < M * N; e++)
      tol[e] = 1e-5 * tol[e] + 1e-6;
    int bad = compare(what, got, want, tol, M, N);
    CHECK(bad == 0 && frame == 0, "%s %lldx%lld tiles, M=%lld N=%lld K=%lld (%s), seed %u: %d wrong, %d frame elements written",
          what, (long long)tile[0], (long long)tile[1], (long long)M, (long long)N, (long long)K,
          how_name[cs.how], seed, bad, frame);
    framed_release(&c);
    ox_tensor_release(ta);
    ox_tensor_release(tb);
    ox_tensor_release(abase);
    ox_tensor_release(bbase);
    free(a);
    free(b);
    free(want);
    free(tol);
    free(got);
  }
}

/* Epilogues of a bf16 matmul on 64 x 64 tiles (wgmma on sm_90, mma.sync
 * before): c = alpha * acc + 1 (stays in the mma layout, stored from it) and
 * d = max(c, 0) + bias[j] (converted to the blocked layout for the broadcast
 * row); then the row sums of A x B, reduce_sum of the accumulator over column
 * tiles of 64 (K steps of 64; the accumulator reset in an outer loop). */
static void test_epilogue(ox_kernel epi, ox_kernel rowsum) {
  static const mm_case cases[] = {{200, 136, 72, ALIGNED}, {70, 40, 5, TRANSPOSED}, {100, 70, 40, UNALIGNED}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    int64_t M = cases[ci].M, N = cases[ci].N, K = cases[ci].K;
    const int64_t tile[2] = {64, 64}, stile[2] = {64, 1};
    double *a = malloc(sizeof(double) * (size_t)(M * K)), *b = malloc(sizeof(double) * (size_t)(K * N));
    double *bias = malloc(sizeof(double) * (size_t)N), *mm = malloc(sizeof(double) * (size_t)(M * N));
    double *mag = malloc(sizeof(double) * (size_t)(M * N)), *want = malloc(sizeof(double) * (size_t)(M * N));
    double *tol = malloc(sizeof(double) * (size_t)(M * N));
    float *got = malloc(sizeof(float) * (size_t)(M * N));
    ox_tensor abase, bbase, biasbase;
    int how = cases[ci].how, ah = how == TRANSPOSED ? UNALIGNED : how;
    ox_tensor ta = framed_input(OX_BF16, M, K, ah, a, &abase), tb = framed_input(OX_BF16, K, N, how, b, &bbase);
    ox_tensor tbias = framed_input(OX_F32, 1, N, ah, bias, &biasbase);
    host_matmul(a, b, M, N, K, mm, mag);
    const float alpha = -1.25f;
    framed c = framed_output(OX_F32, M, N, tile, ah), d = framed_output(OX_F32, M, N, tile, ah),
           s = framed_output(OX_F32, M, 1, stile, ah);
    ox_arg args[6] = {ox_arg_tensor(c.part), ox_arg_tensor(d.part), ox_arg_tensor(ta),
                      ox_arg_tensor(tb),     ox_arg_tensor(tbias),  ox_arg_f32(alpha)};
    CHECK_OK(ox_launch(epi, NULL, NULL, args, 6));
    int frame = framed_read(&c, got);
    for (int64_t e = 0; e < M * N; e++) {
      want[e] = alpha * mm[e] + 1.0;
      tol[e] = 1e-5 * (fabs(alpha) * mag[e] + 1.0) + 1e-6;
    }
    int bad = compare("mm_epi c", got, want, tol, M, N);
    CHECK(bad == 0 && frame == 0, "mm_epi: c = alpha * acc + 1, M=%lld N=%lld K=%lld (%s), seed %u: %d wrong, %d frame elements written",
          (long long)M, (long long)N, (long long)K, how_name[how], seed, bad, frame);
    frame = framed_read(&d, got);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        int64_t e = i * N + j;
        want[e] = (want[e] > 0 ? want[e] : 0.0) + bias[j];
        tol[e] += 1e-6 * fabs(bias[j]);
      }
    bad = compare("mm_epi d", got, want, tol, M, N);
    CHECK(bad == 0 && frame == 0, "mm_epi: d = max(c, 0) + bias, M=%lld N=%lld K=%lld (%s), seed %u: %d wrong, %d frame elements written",
          (long long)M, (long long)N, (long long)K, how_name[how], seed, bad, frame);
    /* the row sums */
    ox_arg sargs[3] = {ox_arg_tensor(s.part), ox_arg_tensor(ta), ox_arg_tensor(tb)};
    CHECK_OK(ox_launch(rowsum, NULL, NULL, sargs, 3));
    frame = framed_read(&s, got);
    for (int64_t i = 0; i < M; i++) {
      double sum = 0, m = 0;
      for (int64_t j = 0; j < N; j++) {
        sum += mm[i * N + j];
        m += mag[i * N + j];
      }
      want[i] = sum;
      tol[i] = 2e-5 * m + 1e-6;
    }
    bad = compare("mm_rowsum", got, want, tol, M, 1);
    CHECK(bad == 0 && frame == 0, "mm_rowsum: M=%lld N=%lld K=%lld (%s), seed %u: %d wrong, %d frame elements written",
          (long long)M, (long long)N, (long long)K, how_name[how], seed, bad, frame);
    framed_release(&c);
    framed_release(&d);
    framed_release(&s);
    ox_tensor_release(ta);
    ox_tensor_release(tb);
    ox_tensor_release(tbias);
    ox_tensor_release(abase);
    ox_tensor_release(bbase);
    ox_tensor_release(biasbase);
    free(a);
    free(b);
    free(bias);
    free(mm);
    free(mag);
    free(want);
    free(tol);
    free(got);
  }
}

/* Two dots in one K loop: c = A x B - 0.5 * A2 x B2; and a K loop in
 * reverse order: ct = (A x B)^T as bf16 (64 x 64 tiles). */
static void test_two_dots(ox_kernel two, ox_kernel rev) {
  static const mm_case cases[] = {{200, 136, 72, ALIGNED}, {130, 70, 100, ALIGNED}, {90, 50, 40, UNALIGNED}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    int64_t M = cases[ci].M, N = cases[ci].N, K = cases[ci].K;
    int how = cases[ci].how;
    const int64_t tile[2] = {64, 64};
    size_t mn = (size_t)(M * N);
    double *a = malloc(sizeof(double) * (size_t)(M * K)), *b = malloc(sizeof(double) * (size_t)(K * N));
    double *a2 = malloc(sizeof(double) * (size_t)(M * K)), *b2 = malloc(sizeof(double) * (size_t)(K * N));
    double *mm = malloc(sizeof(double) * mn), *mag = malloc(sizeof(double) * mn);
    double *mm2 = malloc(sizeof(double) * mn), *mag2 = malloc(sizeof(double) * mn);
    double *want = malloc(sizeof(double) * mn), *tol = malloc(sizeof(double) * mn);
    float *got = malloc(sizeof(float) * mn);
    ox_tensor base[4];
    ox_tensor ta = framed_input(OX_BF16, M, K, how, a, &base[0]), tb = framed_input(OX_BF16, K, N, how, b, &base[1]);
    ox_tensor ta2 = framed_input(OX_BF16, M, K, how, a2, &base[2]), tb2 = framed_input(OX_BF16, K, N, how, b2, &base[3]);
    host_matmul(a, b, M, N, K, mm, mag);
    host_matmul(a2, b2, M, N, K, mm2, mag2);
    framed c = framed_output(OX_F32, M, N, tile, how);
    ox_arg args[5] = {ox_arg_tensor(c.part), ox_arg_tensor(ta), ox_arg_tensor(tb), ox_arg_tensor(ta2),
                      ox_arg_tensor(tb2)};
    CHECK_OK(ox_launch(two, NULL, NULL, args, 5));
    int frame = framed_read(&c, got);
    for (size_t e = 0; e < mn; e++) {
      want[e] = mm[e] - 0.5 * mm2[e];
      tol[e] = 1e-5 * (mag[e] + mag2[e]) + 1e-6;
    }
    int bad = compare("mm_two", got, want, tol, M, N);
    CHECK(bad == 0 && frame == 0, "mm_two: M=%lld N=%lld K=%lld (%s), seed %u: %d wrong, %d frame elements written",
          (long long)M, (long long)N, (long long)K, how_name[how], seed, bad, frame);
    /* reverse K order, transposed bf16 result */
    framed ct = framed_output(OX_BF16, N, M, tile, how);
    ox_arg rargs[3] = {ox_arg_tensor(ct.part), ox_arg_tensor(ta), ox_arg_tensor(tb)};
    CHECK_OK(ox_launch(rev, NULL, NULL, rargs, 3));
    frame = framed_read(&ct, got);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        want[j * M + i] = mm[i * N + j];
        tol[j * M + i] = 1e-5 * mag[i * N + j] + 0x1p-8 * fabs(mm[i * N + j]) + 1e-6; /* bf16 rounding */
      }
    bad = compare("mm_rev", got, want, tol, N, M);
    CHECK(bad == 0 && frame == 0, "mm_rev: M=%lld N=%lld K=%lld (%s), seed %u: %d wrong, %d frame elements written",
          (long long)M, (long long)N, (long long)K, how_name[how], seed, bad, frame);
    framed_release(&c);
    framed_release(&ct);
    ox_tensor_release(ta);
    ox_tensor_release(tb);
    ox_tensor_release(ta2);
    ox_tensor_release(tb2);
    for (int i = 0; i < 4; i++)
      ox_tensor_release(base[i]);
    free(a);
    free(b);
    free(a2);
    free(b2);
    free(mm);
    free(mag);
    free(mm2);
    free(mag2);
    free(want);
    free(tol);
    free(got);
  }
}

/* `let mut` tiles carried by a scalar loop: z[i] = the tiles i .. i+n-1 of x
 * folded as s = (s + t) * 0.5 (and * 0.25 at j = 2, under an `if`), then
 * s - 1, and bits[i] = their signs as bits; loads past the end read the
 * padding 0. */
static void test_let_mut(ox_kernel k) {
  const int64_t len = 1000, B = 128, tile[2] = {1, B};
  static const uint64_t ns[] = {0, 1, 5, 9};
  double *xv = malloc(sizeof(double) * (size_t)len), *want = malloc(sizeof(double) * (size_t)len),
         *tol = malloc(sizeof(double) * (size_t)len);
  float *got = malloc(sizeof(float) * (size_t)len);
  int32_t *bits = malloc(sizeof(int32_t) * (size_t)len);
  ox_tensor xbase, x2 = framed_input(OX_F32, 1, len, ALIGNED, xv, &xbase), x = NULL;
  CHECK_OK(ox_tensor_reshape(x2, 1, &len, &x)); /* 1-D, inside the frame */
  for (size_t c = 0; c < sizeof ns / sizeof ns[0]; c++) {
    uint64_t n = ns[c];
    framed z = framed_output(OX_F32, 1, len, tile, c % 2 ? ALIGNED : UNALIGNED);
    ox_tensor zv = NULL, zp = NULL, tb = NULL, tbp = NULL;
    CHECK_OK(ox_tensor_reshape(z.view, 1, &len, &zv));
    CHECK_OK(ox_tensor_partition(zv, 1, &B, &zp));
    CHECK_OK(ox_tensor_full(dev, NULL, OX_I32, 1, &len, -12345, &tb));
    CHECK_OK(ox_tensor_partition(tb, 1, &B, &tbp));
    ox_arg args[4] = {ox_arg_tensor(zp), ox_arg_tensor(tbp), ox_arg_tensor(x), ox_arg_u64(n)};
    CHECK_OK(ox_launch(k, NULL, NULL, args, 4));
    int frame = framed_read(&z, got);
    CHECK_OK(ox_tensor_to_host(tb, NULL, bits, sizeof(int32_t) * (size_t)len));
    int badbits = 0;
    for (int64_t e = 0; e < len; e++) {
      double s = 0;
      int32_t m = 0;
      for (uint64_t j = 0; j < n; j++) {
        int64_t at = (e / B + (int64_t)j) * B + e % B;
        double t = at < len ? xv[at] : 0.0;
        s = (s + t) * 0.5;
        if (j == 2)
          s *= 0.25;
        m = m * 2 + (t > 0);
      }
      want[e] = s - 1.0;
      tol[e] = 1e-6;
      if (bits[e] != m && badbits++ < 4)
        fprintf(stderr, "  shiftsum bits (seed %u, n %llu): [%lld] = %d, expected %d\n", seed,
                (unsigned long long)n, (long long)e, bits[e], m);
    }
    int bad = compare("shiftsum", got, want, tol, 1, len);
    CHECK(bad == 0 && badbits == 0 && frame == 0, "shiftsum n=%llu, seed %u: %d wrong, %d bits wrong, %d frame elements written",
          (unsigned long long)n, seed, bad, badbits, frame);
    ox_tensor_release(tbp);
    ox_tensor_release(tb);
    ox_tensor_release(zp);
    ox_tensor_release(zv);
    framed_release(&z);
  }
  ox_tensor_release(x);
  ox_tensor_release(x2);
  ox_tensor_release(xbase);
  free(xv);
  free(want);
  free(tol);
  free(got);
  free(bits);
}

static void test_launch_errors(ox_kernel add, ox_kernel two) {
  const int64_t n = 100, t8 = 8, t16 = 16;
  ox_tensor x, y, z, p8, p16, zi, w;
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, &n, &x));
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, &n, &y));
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, &n, &z));
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_I32, 1, &n, &zi));
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_I32, 1, &n, &w));
  CHECK_OK(ox_tensor_partition(z, 1, &t8, &p8));
  ox_arg plain[3] = {ox_arg_tensor(z), ox_arg_tensor(x), ox_arg_tensor(y)};
  CHECK_ERR(ox_launch(add, NULL, NULL, plain, 3), OX_ERR_INVALID_ARGUMENT, "partition of a tensor");
  ox_arg few[2] = {ox_arg_tensor(p8), ox_arg_tensor(x)};
  CHECK_ERR(ox_launch(add, NULL, NULL, few, 2), OX_ERR_INVALID_ARGUMENT, "takes 3 arguments");
  ox_arg dt[3] = {ox_arg_tensor(p8), ox_arg_tensor(zi), ox_arg_tensor(y)};
  CHECK_ERR(ox_launch(add, NULL, NULL, dt, 3), OX_ERR_INVALID_ARGUMENT, "expected a f32 tensor");
  ox_arg alias[3] = {ox_arg_tensor(p8), ox_arg_tensor(z), ox_arg_tensor(y)};
  CHECK_ERR(ox_launch(add, NULL, NULL, alias, 3), OX_ERR_INVALID_ARGUMENT, "overlaps");
  ox_launch_config wrong = {{3, 1, 1}, {64, 1, 1}};
  ox_arg ok[3] = {ox_arg_tensor(p8), ox_arg_tensor(x), ox_arg_tensor(y)};
  CHECK_ERR(ox_launch(add, NULL, &wrong, ok, 3), OX_ERR_LAUNCH, "partition's (13, 1, 1)");
  CHECK_OK(ox_launch_check(add, NULL, NULL, ok, 3));
  /* two outputs must agree on the grid */
  ox_tensor pw8, pw16;
  CHECK_OK(ox_tensor_partition(zi, 1, &t8, &pw8));
  CHECK_OK(ox_tensor_partition(w, 1, &t16, &pw16));
  ox_arg mismatch[3] = {ox_arg_tensor(pw8), ox_arg_tensor(pw16), ox_arg_tensor(zi)};
  CHECK_ERR(ox_launch(two, NULL, NULL, mismatch, 3), OX_ERR_INVALID_ARGUMENT, "generic 'B' is 8");
  CHECK_OK(ox_tensor_partition(z, 1, &t16, &p16));
  ox_tensor_release(p16);
  ox_tensor_release(pw8);
  ox_tensor_release(pw16);
  ox_tensor_release(p8);
  ox_tensor_release(x);
  ox_tensor_release(y);
  ox_tensor_release(z);
  ox_tensor_release(zi);
  ox_tensor_release(w);
  ox_clear_error();
}

/* Split-K: C (zeros) += the products of 3 parts of K, added atomically by
 * blocks whose grid comes from the launch config; a launch without it is
 * refused. */
static void test_splitk(ox_kernel k) {
  static const mm_case cases[] = {{200, 136, 200, ALIGNED}, {70, 90, 75, UNALIGNED}};
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    int64_t M = cases[ci].M, N = cases[ci].N, K = cases[ci].K, splits = 3;
    double *a = malloc(sizeof(double) * (size_t)(M * K)), *b = malloc(sizeof(double) * (size_t)(K * N));
    double *want = malloc(sizeof(double) * (size_t)(M * N)), *tol = malloc(sizeof(double) * (size_t)(M * N));
    float *got = malloc(sizeof(float) * (size_t)(M * N));
    ox_tensor abase, bbase, ta = framed_input(OX_BF16, M, K, cases[ci].how, a, &abase),
                            tb = framed_input(OX_BF16, K, N, cases[ci].how, b, &bbase), tc = NULL;
    const int64_t shape[2] = {M, N};
    CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 2, shape, &tc));
    uint64_t kper = (uint64_t)(((K + 31) / 32 + splits - 1) / splits);
    ox_arg args[4] = {ox_arg_tensor(tc), ox_arg_tensor(ta), ox_arg_tensor(tb), ox_arg_u64(kper)};
    CHECK(ox_launch(k, NULL, NULL, args, 4) == OX_ERR_LAUNCH, "splitk without a grid: %s", ox_last_error());
    CHECK(strstr(ox_last_error(), "no partitioned output") != NULL, "message: %s", ox_last_error());
    ox_launch_config cfg = {{(uint32_t)((N + 63) / 64), (uint32_t)((M + 63) / 64), (uint32_t)splits}, {0, 0, 0}};
    CHECK_OK(ox_launch(k, NULL, &cfg, args, 4));
    CHECK_OK(ox_tensor_to_host(tc, NULL, got, sizeof(float) * (size_t)(M * N)));
    host_matmul(a, b, M, N, K, want, tol);
    for (int64_t e = 0; e < M * N; e++)
      tol[e] = 1e-5 * tol[e] + 1e-6;
    int bad = compare("splitk", got, want, tol, M, N);
    CHECK(bad == 0, "splitk M=%lld N=%lld K=%lld (%s), seed %u: %d wrong", (long long)M, (long long)N,
          (long long)K, how_name[cases[ci].how], seed, bad);
    ox_tensor_release(tc);
    ox_tensor_release(ta);
    ox_tensor_release(tb);
    ox_tensor_release(abase);
    ox_tensor_release(bbase);
    free(a);
    free(b);
    free(want);
    free(tol);
    free(got);
  }
}

/* A histogram of 10007 values, some below 0 or past the last bin (skipped). */
static void test_hist(ox_kernel k) {
  const int64_t n = 10007, bins = 100;
  int32_t *x = malloc(sizeof(int32_t) * (size_t)n);
  uint32_t want[100] = {0}, got[100];
  for (int64_t i = 0; i < n; i++) {
    x[i] = (int32_t)floor((urand() + 1) * 0.5 * (double)(bins + 6)) - 3;
    if (x[i] >= 0 && x[i] < bins)
      want[x[i]]++;
  }
  ox_tensor tx = host_tensor(OX_I32, 1, &n, x), th = NULL;
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_U32, 1, &bins, &th));
  ox_arg args[2] = {ox_arg_tensor(th), ox_arg_tensor(tx)};
  ox_launch_config cfg = {{(uint32_t)((n + 255) / 256), 0, 0}, {0, 0, 0}};
  CHECK_OK(ox_launch(k, NULL, &cfg, args, 2));
  CHECK_OK(ox_tensor_to_host(th, NULL, got, sizeof got));
  int bad = 0;
  for (int64_t i = 0; i < bins; i++)
    bad += got[i] != want[i];
  CHECK(bad == 0, "hist, seed %u: %d bins wrong (bin 0: %u, expected %u)", seed, bad, got[0], want[0]);
  ox_tensor_release(tx);
  ox_tensor_release(th);
  free(x);
}

/* ox_kernel_set_generic: a generic that sizes no output (S, the step) gets
 * its value only from it; one that does must agree with the partition. */
/* A column sum of a [256, 256] f32 tile: on CUDA the lowering moves the
 * tile through shared memory (256 KiB), more than any GPU gives a block, so
 * code for CUDA is refused with the sizes; on the CPU a block is one thread
 * with its tiles in its own memory, and the kernel runs. */
static void test_shared_limit(void) {
  static const char *src = "#[tile]\n"
                           "fn colsum(y: &mut Tensor<f32, [1, 256]>, x: &Tensor<f32, [-1, -1]>) {\n"
                           "    y.store(reduce_sum(x.partition([256, 256]).load([0, tile_id(1)]), 0));\n"
                           "}\n";
  ox_compile_options o = {.filename = "big.oxk", .sm = 90};
  char *out = NULL;
  CHECK_ERR(ox_emit(src, &o, OX_TARGET_CUDA, OX_EMIT_PTX, &out), OX_ERR_UNSUPPORTED,
            "big.oxk:2:4: kernel 'colsum' needs 262144 ");
  CHECK(strstr(ox_last_error(), "bytes of shared memory for its reductions, layout changes and dot operands; "
                                "a block has 232448 here") != NULL,
        "message: %s", ox_last_error());
  ox_free(out);
  ox_module m = NULL;
  ox_kernel k = NULL;
  o.sm = 0;
  CHECK_OK(ox_module_compile(dev, src, &o, &m));
  if (!m)
    return;
  CHECK_OK(ox_module_get_kernel(m, "colsum", &k));
  const int64_t xs[2] = {200, 300}, ys[2] = {1, 300}, tile[2] = {1, 256};
  float *x = malloc(sizeof(float) * 200 * 300), y[300];
  for (int i = 0; i < 200 * 300; i++)
    x[i] = (float)(i % 7) - 3.0f;
  ox_tensor tx = NULL, ty = NULL, part = NULL;
  CHECK_OK(ox_tensor_from_host(dev, NULL, OX_F32, 2, xs, x, sizeof(float) * 200 * 300, &tx));
  CHECK_OK(ox_tensor_full(dev, NULL, OX_F32, 2, ys, NAN, &ty));
  CHECK_OK(ox_tensor_partition(ty, 2, tile, &part));
  ox_arg args[2] = {ox_arg_tensor(part), ox_arg_tensor(tx)};
  if (ox_device_get_type(dev) == OX_DEVICE_CUDA) { /* refused at the launch that specializes it */
    CHECK_ERR(ox_launch(k, NULL, NULL, args, 2), OX_ERR_UNSUPPORTED,
              "big.oxk:2:4: kernel 'colsum' needs 262144 bytes of shared memory");
    goto done;
  }
  CHECK_OK(ox_launch(k, NULL, NULL, args, 2));
  CHECK_OK(ox_tensor_to_host(ty, NULL, y, sizeof y));
  int bad = 0;
  for (int j = 0; j < 300; j++) {
    double want = 0;
    for (int i = 0; i < 200; i++)
      want += x[i * 300 + j];
    bad += y[j] != (float)want; /* small integers: exact in any order */
  }
  CHECK(bad == 0, "colsum on the CPU: %d wrong", bad);
  { /* a chain of 600 tiles of 512 KiB: 300 MiB, over the CPU's bound on a block's tile
     * values (256 MiB), but the compiler's limit on loops (a loop per tile op on the CPU,
     * front/limits.h) ends it first */
    size_t cap = 64 * 1024;
    char *big = malloc(cap);
    size_t n = (size_t)snprintf(big, cap, "#[tile]\nfn chain(y: &mut Tensor<f64, [1, 65536]>) {\n"
                                           "    let t0 = iota([1, 65536], 1) as f64;\n");
    for (int i = 1; i < 600; i++)
      n += (size_t)snprintf(big + n, cap - n, "    let t%d = t%d * 2.0 + 1.0;\n", i, i - 1);
    snprintf(big + n, cap - n, "    y.store(t599);\n}\n");
    ox_module mc = NULL;
    ox_kernel kc = NULL;
    CHECK_OK(ox_module_compile(dev, big, &o, &mc));
    if (mc) {
      CHECK_OK(ox_module_get_kernel(mc, "chain", &kc));
      const int64_t cs[2] = {1, 65536};
      ox_tensor tc = NULL, pc = NULL;
      CHECK_OK(ox_tensor_empty(dev, NULL, OX_F64, 2, cs, &tc));
      CHECK_OK(ox_tensor_partition(tc, 2, cs, &pc));
      ox_arg one = ox_arg_tensor(pc);
      CHECK_ERR(ox_launch(kc, NULL, NULL, &one, 1), OX_ERR_COMPILE,
                "error: kernel 'chain' has too many loops for its size after the tile lowering");
      ox_tensor_release(pc);
      ox_tensor_release(tc);
      ox_module_destroy(mc);
    }
    free(big);
  }
done:
  free(x);
  ox_tensor_release(part);
  ox_tensor_release(tx);
  ox_tensor_release(ty);
  ox_module_destroy(m);
}

static void test_set_generic(void) {
  static const char *src =
      "#[tile]\n"
      "fn steps<const B: i32, const S: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>) {\n"
      "    z.store(x.partition([B]).load([tile_id(0)]) * (S as f32));\n"
      "}\n"
      "#[kernel]\nfn simt(a: &[f32]) { }\n";
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(dev, src, NULL, &m));
  if (!m)
    return;
  ox_kernel k = NULL, simt = NULL;
  CHECK_OK(ox_module_get_kernel(m, "steps", &k));
  CHECK_OK(ox_module_get_kernel(m, "simt", &simt));
  const int64_t n = 100, tile = 32;
  float x[100], y[100];
  for (int i = 0; i < n; i++)
    x[i] = (float)i;
  ox_tensor tx = host_tensor(OX_F32, 1, &n, x), ty = NULL, part = NULL;
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, &n, &ty));
  CHECK_OK(ox_tensor_partition(ty, 1, &tile, &part));
  ox_arg args[2] = {ox_arg_tensor(part), ox_arg_tensor(tx)};
  CHECK(ox_launch(k, NULL, NULL, args, 2) == OX_ERR_INVALID_ARGUMENT &&
            strstr(ox_last_error(), "generic 'S' is not bound") != NULL,
        "unbound S: %s", ox_last_error());
  CHECK(ox_kernel_set_generic(k, "Q", 1) == OX_ERR_INVALID_ARGUMENT &&
            strstr(ox_last_error(), "has no generic 'Q'") != NULL, "%s", ox_last_error());
  CHECK(ox_kernel_set_generic(simt, "S", 1) == OX_ERR_INVALID_ARGUMENT, "a SIMT kernel has no generics");
  CHECK(ox_kernel_set_generic(k, "S", 0) == OX_ERR_INVALID_ARGUMENT, "S = 0");
  CHECK_OK(ox_kernel_set_generic(k, "S", 3));
  CHECK_OK(ox_launch(k, NULL, NULL, args, 2));
  CHECK_OK(ox_tensor_to_host(ty, NULL, y, sizeof y));
  int bad = 0;
  for (int i = 0; i < n; i++)
    bad += y[i] != 3.0f * (float)i;
  CHECK(bad == 0, "steps with S = 3: %d wrong", bad);
  CHECK_OK(ox_kernel_set_generic(k, "B", 64)); /* the partition says 32 */
  CHECK(ox_launch(k, NULL, NULL, args, 2) == OX_ERR_INVALID_ARGUMENT &&
            strstr(ox_last_error(), "is 32 from the output partitions but was set to 64") != NULL,
        "B conflict: %s", ox_last_error());
  ox_tensor_release(part);
  ox_tensor_release(tx);
  ox_tensor_release(ty);
  ox_module_destroy(m);
  ox_clear_error();
}

int main(int argc, char **argv) {
  const char *d = argc > 1 ? argv[1] : "cpu";
  CHECK_OK(ox_device_get(strcmp(d, "cpu") ? OX_DEVICE_CUDA : OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("tile_test");
  ox_compile_options o = {.filename = "tile.oxk"};
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(dev, SRC, &o, &m));
  ox_kernel add = NULL, scale = NULL, two = NULL, rms = NULL, ln = NULL, colmax = NULL, far = NULL;
  ox_kernel tr = NULL, shapes = NULL;
  ox_kernel mm_bf16 = NULL, mm_f16 = NULL, mm_f32 = NULL, mm_tf32 = NULL, mm_epi = NULL, mm_rowsum = NULL, shiftsum = NULL, dot1 = NULL;
  ox_kernel mm_two = NULL, mm_rev = NULL, splitk = NULL, hist = NULL, mm_wg = NULL, mm_wg16 = NULL, mm_wrap = NULL;
  ox_kernel mm_tl = NULL;
  if (m) {
    CHECK_OK(ox_module_get_kernel(m, "mm_wg", &mm_wg));
    CHECK_OK(ox_module_get_kernel(m, "mm_wg16", &mm_wg16));
    CHECK_OK(ox_module_get_kernel(m, "splitk", &splitk));
    CHECK_OK(ox_module_get_kernel(m, "hist", &hist));
    CHECK_OK(ox_module_get_kernel(m, "mm_two", &mm_two));
    CHECK_OK(ox_module_get_kernel(m, "mm_rev", &mm_rev));
    CHECK_OK(ox_module_get_kernel(m, "mm_wrap", &mm_wrap));
    CHECK_OK(ox_module_get_kernel(m, "mm_tl", &mm_tl));
    CHECK_OK(ox_module_get_kernel(m, "mm_bf16", &mm_bf16));
    CHECK_OK(ox_module_get_kernel(m, "mm_f16", &mm_f16));
    CHECK_OK(ox_module_get_kernel(m, "mm_f32", &mm_f32));
    CHECK_OK(ox_module_get_kernel(m, "mm_tf32", &mm_tf32));
    CHECK_OK(ox_module_get_kernel(m, "mm_epi", &mm_epi));
    CHECK_OK(ox_module_get_kernel(m, "mm_rowsum", &mm_rowsum));
    CHECK_OK(ox_module_get_kernel(m, "shiftsum", &shiftsum));
    CHECK_OK(ox_module_get_kernel(m, "dot1", &dot1));
    CHECK_OK(ox_module_get_kernel(m, "tr", &tr));
    CHECK_OK(ox_module_get_kernel(m, "shapes", &shapes));
    CHECK_OK(ox_module_get_kernel(m, "far", &far));
    CHECK_OK(ox_module_get_kernel(m, "rmsnorm", &rms));
    CHECK_OK(ox_module_get_kernel(m, "layernorm", &ln));
    CHECK_OK(ox_module_get_kernel(m, "colmax", &colmax));
    CHECK_OK(ox_module_get_kernel(m, "add", &add));
    CHECK_OK(ox_module_get_kernel(m, "scale2d", &scale));
    CHECK_OK(ox_module_get_kernel(m, "two", &two));
  }
  if (add)
    test_add(add);
  if (scale)
    test_scale2d(scale);
  if (add && two)
    test_launch_errors(add, two);
  if (rms && ln)
    test_norms(rms, ln);
  if (colmax)
    test_colmax(colmax);
  if (far)
    test_far(far);
  if (tr && shapes)
    test_shapes(tr, shapes);
  const char *env = getenv("TILE_TEST_SEED");
  seed = env ? (unsigned)strtoul(env, NULL, 0) : (unsigned)time(NULL);
  rng_state = 0x9E3779B97F4A7C15ULL * ((uint64_t)seed + 1);
  const size_t nmm = sizeof mm_cases / sizeof mm_cases[0];
  const int64_t t128[2] = {128, 128}, t64[2] = {64, 64}, t32[2] = {32, 32}, t16[2] = {16, 16};
  if (mm_bf16) { /* tensor cores on CUDA (mma.sync: 4 warps of 64 x 64; wgmma on sm_90, A's rows
                    64-byte swizzled) */
    test_matmul(mm_bf16, OX_BF16, t128, "mm_bf16", mm_cases, nmm);
    /* 18 x 4 tiles: on CUDA the pipelined K loop runs its blocks in groups of 8
       rows of tiles, the last group short */
    static const mm_case many[] = {{1100, 200, 72, ALIGNED}};
    test_matmul(mm_bf16, OX_BF16, t64, "mm_bf16", many, 1);
  }
  if (mm_wg && mm_wg16) { /* wgmma on sm_90: one or two warpgroups, N of 64 to 256, A's rows in one
                             or two 128-byte panels (mma.sync elsewhere) */
    static const int64_t tiles[][2] = {{128, 128}, {64, 64}, {128, 256}, {64, 128}};
    for (int i = 0; i < 4; i++)
      test_matmul(mm_wg, OX_BF16, tiles[i], "mm_wg", mm_cases, nmm);
    static const mm_case big[] = {{300, 520, 333, ALIGNED}, {130, 260, 200, UNALIGNED}};
    test_matmul(mm_wg, OX_BF16, tiles[2], "mm_wg", big, 2);
    test_matmul(mm_wg16, OX_F16, tiles[3], "mm_wg16", mm_cases, nmm);
    test_matmul(mm_wg16, OX_F16, tiles[0], "mm_wg16", big, 2);
    /* more tiles than the GPU holds blocks at once (504 of 64 x 64, 144 of 128 x 256): on sm_90
       each persistent block runs several, its copies running on into its next tile's first K
       tiles when K has 2 or more (K of 1, 2 and 4 tiles of 64; edges cut) */
    static const mm_case many_tiles[] = {{1500, 1300, 64, ALIGNED}, {1500, 1300, 100, UNALIGNED},
                                         {2000, 2100, 200, ALIGNED}, {1950, 2050, 129, UNALIGNED}};
    if (!strcmp(d, "cuda")) { /* (the CPU runs them too, slowly: once is enough there) */
      test_matmul(mm_wg, OX_BF16, tiles[1], "mm_wg", many_tiles, 2);
      test_matmul(mm_wg, OX_BF16, tiles[2], "mm_wg", many_tiles + 2, 2);
    } else {
      test_matmul(mm_wg, OX_BF16, tiles[1], "mm_wg", many_tiles + 1, 1);
    }
  }
  if (mm_wrap) { /* 16 and 6 K tiles: one wrong guess each, after right ones (TMA on sm_90) */
    static const mm_case wrap[] = {{300, 520, 1000, ALIGNED}, {130, 260, 333, ALIGNED}, {130, 260, 333, UNALIGNED}};
    static const int64_t tiles[][2] = {{128, 256}, {64, 64}};
    for (int i = 0; i < 2; i++)
      test_matmul(mm_wrap, OX_BF16, tiles[i], "mm_wrap", wrap, 3);
    for (int i = 0; mm_tl && i < 2; i++)
      test_matmul(mm_tl, OX_BF16, tiles[i], "mm_tl", wrap, 3);
  }
  if (mm_f16) /* dot on tensor cores on CUDA (mma.sync: 4 warps of 32 x 32; wgmma on sm_90, A's rows
                 32-byte swizzled); `acc += dot` adds in the blocked layout */
    test_matmul(mm_f16, OX_F16, t64, "mm_f16", mm_cases, nmm);
  if (mm_f32) /* shared memory everywhere */
    test_matmul(mm_f32, OX_F32, t32, "mm_f32", mm_cases, nmm);
  if (mm_tf32) { /* tensor cores on CUDA (m16n8k8); 16 x 16: too small for them */
    test_matmul(mm_tf32, OX_TF32, t128, "mm_tf32", mm_cases, nmm);
    test_matmul(mm_tf32, OX_TF32, t16, "mm_tf32", mm_cases, nmm);
  }
  if (mm_epi && mm_rowsum)
    test_epilogue(mm_epi, mm_rowsum);
  if (mm_two && mm_rev)
    test_two_dots(mm_two, mm_rev);
  if (shiftsum)
    test_let_mut(shiftsum);
  static const mm_case dot_cases[] = {{100, 70, 32, ALIGNED}, {100, 70, 20, ALIGNED}, {100, 70, 20, TRANSPOSED}};
  if (dot1) { /* 64 x 64: tensor cores on CUDA; 16 x 16: too small for them */
    test_matmul(dot1, OX_F16, t64, "dot1", dot_cases, 3);
    test_matmul(dot1, OX_F16, t16, "dot1", dot_cases, 3);
  }
  test_set_generic();
  test_shared_limit();
  if (splitk)
    test_splitk(splitk);
  if (hist)
    test_hist(hist);
  ox_module_destroy(m);
  if (ox_device_compute_capability(dev) >= 90) {
    /* On sm_90 the bf16/f16 dots above run on wgmma. Compiled for sm_80 (PTX
       the driver compiles for this GPU), the same kernels take the mma.sync
       path that sm_80 to sm_89 GPUs run: check it here too. */
    ox_compile_options o80 = {.filename = "tile80.oxk", .sm = 80};
    m = NULL;
    CHECK_OK(ox_module_compile(dev, SRC, &o80, &m));
    const char *names[] = {"mm_bf16", "mm_wg", "mm_f16", "mm_epi", "mm_rowsum", "mm_two", "mm_rev"};
    ox_kernel ks[7] = {NULL};
    for (int i = 0; m && i < 7; i++)
      CHECK_OK(ox_module_get_kernel(m, names[i], &ks[i]));
    if (ks[6]) {
      static const mm_case many[] = {{1100, 200, 72, ALIGNED}};
      test_matmul(ks[0], OX_BF16, t128, "mm_bf16 (sm_80)", mm_cases, nmm);
      test_matmul(ks[0], OX_BF16, t64, "mm_bf16 (sm_80)", many, 1);
      test_matmul(ks[1], OX_BF16, t128, "mm_wg (sm_80)", mm_cases, nmm);
      test_matmul(ks[2], OX_F16, t64, "mm_f16 (sm_80)", mm_cases, nmm);
      test_epilogue(ks[3], ks[4]);
      test_two_dots(ks[5], ks[6]);
    }
    ox_module_destroy(m);
  }
  return test_done("tile_test");
}
