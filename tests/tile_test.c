/* tile_test - #[tile] kernels end to end on one device (argv[1]: "cpu" or
 * "cuda"): generics bound from partitions, masked edges, 2-D tiles over
 * strided (transposed) inputs, casts and math, and the launch checks. */
#include <math.h>
#include <stdlib.h>

#include "check.h"

static ox_device dev;

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
  if (m) {
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
  ox_module_destroy(m);
  return test_done("tile_test");
}
