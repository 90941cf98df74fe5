/* tile_layernorm - LayerNorm of a rows x cols matrix whose row length is not
 * a power of two (1000 columns in tiles of 1024), with weight and bias
 * vectors, checked against a double-precision reference. The rows have a
 * mean far from 0, so padding that leaked into the variance would show. */
#include <math.h>

#include "common.h"

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "tile_layernorm");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "layernorm", &k));
  const int64_t rows = 37, cols = 1000, shape[2] = {rows, cols}, wshape[2] = {1, cols}, tile[2] = {1, 1024};
  const float eps = 1e-5f;
  float *x = malloc(sizeof(float) * (size_t)(rows * cols)), *y = malloc(sizeof(float) * (size_t)(rows * cols)),
        *w = malloc(sizeof(float) * (size_t)cols), *b = malloc(sizeof(float) * (size_t)cols);
  unsigned seed = 41;
  for (int64_t r = 0; r < rows; r++) {
    float mean = 10.0f * example_rand(&seed), spread = 1.5f + example_rand(&seed);
    for (int64_t c = 0; c < cols; c++)
      x[r * cols + c] = mean + spread * example_rand(&seed);
  }
  for (int64_t c = 0; c < cols; c++) {
    w[c] = 1.0f + 0.5f * example_rand(&seed);
    b[c] = 0.5f * example_rand(&seed);
  }
  ox_tensor tx, tw, tb, ty, part;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 2, shape, x, sizeof(float) * (size_t)(rows * cols), &tx));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 2, wshape, w, sizeof(float) * (size_t)cols, &tw));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 2, wshape, b, sizeof(float) * (size_t)cols, &tb));
  /* y starts as NaN: an element the kernel does not write fails the check */
  OX_CHECK(ox_tensor_full(dev, NULL, OX_F32, 2, shape, NAN, &ty));
  OX_CHECK(ox_tensor_partition(ty, 2, tile, &part));
  ox_arg args[6] = {ox_arg_tensor(part), ox_arg_tensor(tx), ox_arg_tensor(tw), ox_arg_tensor(tb),
                    ox_arg_i32((int32_t)cols), ox_arg_f32(eps)};
  OX_CHECK(ox_launch(k, NULL, NULL, args, 6));
  OX_CHECK(ox_tensor_to_host(ty, NULL, y, sizeof(float) * (size_t)(rows * cols)));
  int bad = 0;
  for (int64_t r = 0; r < rows; r++) {
    double sum = 0, sq = 0;
    for (int64_t c = 0; c < cols; c++)
      sum += x[r * cols + c];
    double mean = sum / (double)cols;
    for (int64_t c = 0; c < cols; c++)
      sq += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    double inv = 1.0 / sqrt(sq / (double)cols + eps);
    for (int64_t c = 0; c < cols; c++) {
      double want = (x[r * cols + c] - mean) * inv * w[c] + b[c];
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
  ox_tensor_release(tb);
  ox_tensor_release(ty);
  ox_module_destroy(m);
  free(x);
  free(y);
  free(w);
  free(b);
  return example_finish("tile_layernorm", dev, bad);
}
