/* tile_softmax - row softmax of a rows x cols matrix whose row length is not
 * a power of two, checked against a double-precision reference. */
#include <math.h>

#include "common.h"

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "tile_softmax");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "softmax", &k));
  const int64_t rows = 300, cols = 1000, shape[2] = {rows, cols}, tile[2] = {1, 1024};
  float *x = malloc(sizeof(float) * (size_t)(rows * cols)), *y = malloc(sizeof(float) * (size_t)(rows * cols));
  unsigned seed = 21;
  for (int64_t i = 0; i < rows * cols; i++)
    x[i] = 8.0f * example_rand(&seed);
  ox_tensor tx, ty, part;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 2, shape, x, sizeof(float) * (size_t)(rows * cols), &tx));
  OX_CHECK(ox_tensor_empty(dev, NULL, OX_F32, 2, shape, &ty));
  OX_CHECK(ox_tensor_partition(ty, 2, tile, &part));
  ox_arg args[2] = {ox_arg_tensor(part), ox_arg_tensor(tx)};
  OX_CHECK(ox_launch(k, NULL, NULL, args, 2));
  OX_CHECK(ox_tensor_to_host(ty, NULL, y, sizeof(float) * (size_t)(rows * cols)));
  int bad = 0;
  for (int64_t r = 0; r < rows; r++) {
    double mx = -INFINITY, sum = 0;
    for (int64_t c = 0; c < cols; c++)
      mx = fmax(mx, x[r * cols + c]);
    for (int64_t c = 0; c < cols; c++)
      sum += exp(x[r * cols + c] - mx);
    for (int64_t c = 0; c < cols; c++) {
      double want = exp(x[r * cols + c] - mx) / sum;
      if (fabs(y[r * cols + c] - want) > 1e-5 * want + 1e-9 && bad++ < 5)
        fprintf(stderr, "y[%lld][%lld] = %.9g, expected %.9g\n", (long long)r, (long long)c,
                y[r * cols + c], want);
    }
  }
  ox_tensor_release(part);
  ox_tensor_release(tx);
  ox_tensor_release(ty);
  ox_module_destroy(m);
  free(x);
  free(y);
  return example_finish("tile_softmax", dev, bad);
}
