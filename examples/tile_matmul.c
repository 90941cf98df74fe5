/* tile_matmul - C = A x B, bf16 inputs, f32 accumulation, dimensions that are
 * not multiples of the tiles, checked against a double-precision product of
 * the same bf16 values. */
#include <math.h>

#include "common.h"

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "tile_matmul");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "matmul", &k));
  OX_CHECK(ox_kernel_set_generic(k, "BK", 32)); /* K step; BM and BN come from C's partition */
  const int64_t M = 300, N = 200, K = 100;
  const int64_t sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N}, tile[2] = {128, 128};
  uint16_t *a = malloc(2 * (size_t)(M * K)), *b = malloc(2 * (size_t)(K * N));
  float *c = malloc(sizeof(float) * (size_t)(M * N));
  unsigned seed = 7;
  for (int64_t i = 0; i < M * K; i++)
    a[i] = example_to_bf16(example_rand(&seed));
  for (int64_t i = 0; i < K * N; i++)
    b[i] = example_to_bf16(example_rand(&seed));
  ox_tensor ta, tb, tc, part;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_BF16, 2, sa, a, 2 * (size_t)(M * K), &ta));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_BF16, 2, sb, b, 2 * (size_t)(K * N), &tb));
  OX_CHECK(ox_tensor_full(dev, NULL, OX_F32, 2, sc, NAN, &tc)); /* poisoned */
  OX_CHECK(ox_tensor_partition(tc, 2, tile, &part));
  ox_arg args[3] = {ox_arg_tensor(part), ox_arg_tensor(ta), ox_arg_tensor(tb)};
  OX_CHECK(ox_launch(k, NULL, NULL, args, 3));
  OX_CHECK(ox_tensor_to_host(tc, NULL, c, sizeof(float) * (size_t)(M * N)));
  int bad = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double want = 0, mag = 0;
      for (int64_t p = 0; p < K; p++) {
        want += example_from_bf16(a[i * K + p]) * example_from_bf16(b[p * N + j]);
        mag += fabs(example_from_bf16(a[i * K + p]) * example_from_bf16(b[p * N + j]));
      }
      /* f32 accumulation of K products: error ~ K * 2^-24 * sum |a b| */
      if (!(fabs(c[i * N + j] - want) <= 1e-5 * mag + 1e-6) && bad++ < 5)
        fprintf(stderr, "c[%lld][%lld] = %.9g, expected %.9g\n", (long long)i, (long long)j,
                c[i * N + j], want);
    }
  ox_tensor_release(part);
  ox_tensor_release(ta);
  ox_tensor_release(tb);
  ox_tensor_release(tc);
  ox_module_destroy(m);
  free(a);
  free(b);
  free(c);
  return example_finish("tile_matmul", dev, bad);
}
