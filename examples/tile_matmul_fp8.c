/* tile_matmul_fp8 - an fp8 (f8e4m3) matmul as torch._scaled_mm computes it:
 * A [M, K] and Bt [N, K] are quantized from f32 by the `quantize` kernel
 * (x / scale rounded to the nearest f8e4m3), then C = (A x Bt^T) * scale_a *
 * scale_b in bf16. Checks that every quantized value is the nearest fp8 one,
 * and C against a double-precision product of the same fp8 values, with
 * dimensions that no tile divides and C poisoned with NaN first. */
#include <math.h>

#include "common.h"

/* Quantizes host values x [R, C] (f32) with the kernel, returns the fp8 tensor
 * and its bytes in q; counts wrong roundings in *bad. */
static ox_tensor quantize(ox_device dev, ox_kernel kq, const float *x, int64_t R, int64_t C, float inv_scale,
                          uint8_t *q, int *bad) {
  const int64_t shape[2] = {R, C}, tile[2] = {32, 64};
  ox_tensor tx, ty, part;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 2, shape, x, sizeof(float) * (size_t)(R * C), &tx));
  OX_CHECK(ox_tensor_empty(dev, NULL, OX_F8E4M3, 2, shape, &ty));
  OX_CHECK(ox_tensor_partition(ty, 2, tile, &part));
  ox_arg args[3] = {ox_arg_tensor(part), ox_arg_tensor(tx), ox_arg_f32(inv_scale)};
  OX_CHECK(ox_launch(kq, NULL, NULL, args, 3));
  OX_CHECK(ox_tensor_to_host(ty, NULL, q, (size_t)(R * C)));
  for (int64_t i = 0; i < R * C; i++) {
    float v = x[i] * inv_scale;
    double d = example_from_e4m3(q[i]);
    /* the nearest: no closer value among the neighbouring codes (same sign) */
    int c = q[i] & 0x7f;
    double lo = c > 0 ? example_from_e4m3((uint8_t)((q[i] & 0x80) | (c - 1))) : d;
    double hi = c < 0x7e ? example_from_e4m3((uint8_t)((q[i] & 0x80) | (c + 1))) : d;
    int ok = isfinite(d) && (d == 0 || (d < 0) == (v < 0)) && fabs(d - v) <= fabs(lo - v) &&
              (fabs(v) > 448 ? fabs(d) == 448 : fabs(d - v) <= fabs(hi - v));
    if (!ok && (*bad)++ < 5)
      fprintf(stderr, "quantize(%.9g) = 0x%02x (%.9g)\n", v, q[i], d);
  }
  ox_tensor_release(part);
  ox_tensor_release(tx);
  return ty;
}

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "tile_matmul_fp8");
  ox_kernel k, kq;
  OX_CHECK(ox_module_get_kernel(m, "matmul_fp8", &k));
  OX_CHECK(ox_module_get_kernel(m, "quantize", &kq));
  OX_CHECK(ox_kernel_set_generic(k, "BK", 64)); /* K step; BM and BN come from C's partition */
  const int64_t M = 300, N = 200, K = 176;
  const int64_t sc[2] = {M, N}, tile[2] = {128, 128};
  float *xa = malloc(sizeof(float) * (size_t)(M * K)), *xb = malloc(sizeof(float) * (size_t)(N * K));
  uint8_t *a = malloc((size_t)(M * K)), *b = malloc((size_t)(N * K));
  uint16_t *c = malloc(2 * (size_t)(M * N));
  unsigned seed = 11;
  for (int64_t i = 0; i < M * K; i++) /* a few beyond the fp8 range, which saturate */
    xa[i] = example_rand(&seed) * (i % 97 == 0 ? 8.0f : 2.0f);
  for (int64_t i = 0; i < N * K; i++)
    xb[i] = example_rand(&seed);
  const float scale_a = 1.0f / 128, scale_b = 1.0f / 256;
  int bad = 0;
  ox_tensor ta = quantize(dev, kq, xa, M, K, 1 / scale_a, a, &bad);
  ox_tensor tb = quantize(dev, kq, xb, N, K, 1 / scale_b, b, &bad);
  ox_tensor tc, part;
  OX_CHECK(ox_tensor_full(dev, NULL, OX_BF16, 2, sc, NAN, &tc)); /* poisoned */
  OX_CHECK(ox_tensor_partition(tc, 2, tile, &part));
  ox_arg args[5] = {ox_arg_tensor(part), ox_arg_tensor(ta), ox_arg_tensor(tb), ox_arg_f32(scale_a),
                    ox_arg_f32(scale_b)};
  OX_CHECK(ox_launch(k, NULL, NULL, args, 5));
  OX_CHECK(ox_tensor_to_host(tc, NULL, c, 2 * (size_t)(M * N)));
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double want = 0, mag = 0;
      for (int64_t p = 0; p < K; p++) {
        double t = example_from_e4m3(a[i * K + p]) * example_from_e4m3(b[j * K + p]);
        want += t;
        mag += fabs(t);
      }
      want *= (double)scale_a * scale_b;
      mag *= (double)scale_a * scale_b;
      double got = example_from_bf16(c[i * N + j]);
      /* one rounding to bf16 (8 significant bits) after the accumulation, which
         on Hopper's fp8 tensor cores keeps about 14 significant bits (as cuBLAS's
         fast accumulation does): ~2^-14 of sum |a b|, up to ~5e-4 measured */
      if (!(fabs(got - want) <= 0x1p-8 * fabs(want) + 1e-3 * mag + 1e-30) && bad++ < 10)
        fprintf(stderr, "c[%lld][%lld] = %.9g, expected %.9g\n", (long long)i, (long long)j, got, want);
    }
  ox_tensor_release(part);
  ox_tensor_release(ta);
  ox_tensor_release(tb);
  ox_tensor_release(tc);
  ox_module_destroy(m);
  free(xa);
  free(xb);
  free(a);
  free(b);
  free(c);
  return example_finish("tile_matmul_fp8", dev, bad);
}
