/* tile_rmsnorm - RMSNorm of a rows x cols matrix whose row length is not a
 * power of two (1000 columns in tiles of 1024), with a weight vector, checked
 * against a double-precision reference. */
#include <math.h>

#include "common.h"

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "tile_rmsnorm");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "rmsnorm", &k));
  const int64_t rows = 37, cols = 1000, shape[2] = {rows, cols}, wshape[2] = {1, cols}, tile[2] = {1, 1024};
  const float eps = 1e-6f;
  float *x = malloc(sizeof(float) * (size_t)(rows * cols)), *y = malloc(sizeof(float) * (size_t)(rows * cols)),
        *w = malloc(sizeof(float) * (size_t)cols);
  unsigned seed = 37;
  for (int64_t i = 0; i < rows * cols; i++)
    x[i] = 3.0f * example_rand(&seed);
  for (int64_t c = 0; c < cols; c++)
    w[c] = 1.0f + 0.5f * example_rand(&seed);
  ox_tensor tx, tw, ty, part;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 2, shape, x, sizeof(float) * (size_t)(rows * cols), &tx));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 2, wshape, w, sizeof(float) * (size_t)cols, &tw));
  /* y starts as NaN: an element the kernel does not write fails the check */
  OX_CHECK(ox_tensor_full(dev, NULL, OX_F32, 2, shape, NAN, &ty));
  OX_CHECK(ox_tensor_partition(ty, 2, tile, &part));
  ox_arg args[5] = {ox_arg_tensor(part), ox_arg_tensor(tx), ox_arg_tensor(tw), ox_arg_i32((int32_t)cols),
                    ox_arg_f32(eps)};
  OX_CHECK(ox_launch(k, NULL, NULL, args, 5));
  OX_CHECK(ox_tensor_to_host(ty, NULL, y, sizeof(float) * (size_t)(rows * cols)));
  int bad = 0;
  for (int64_t r = 0; r < rows; r++) {
    double ss = 0;
    for (int64_t c = 0; c < cols; c++)
      ss += (double)x[r * cols + c] * x[r * cols + c];
    double inv = 1.0 / sqrt(ss / (double)cols + eps);
    for (int64_t c = 0; c < cols; c++) {
      double want = x[r * cols + c] * inv * w[c];
      /* relative 2e-4 (GPU rsqrt is approximate), or 1e-5 near zero; !(a <= b)
       * also catches NaN */
      if (!(fabs(y[r * cols + c] - want) <= 2e-4 * fabs(want) + 1e-5) && bad++ < 5)
        fprintf(stderr, "y[%lld][%lld] = %.9g, expected %.9g\n", (long long)r, (long long)c,
                y[r * cols + c], want);
    }
  }
  ox_tensor_release(part);
  ox_tensor_release(tx);
  ox_tensor_release(tw);
  ox_tensor_release(ty);
  ox_module_destroy(m);
  free(x);
  free(y);
  free(w);
  return example_finish("tile_rmsnorm", dev, bad);
}
