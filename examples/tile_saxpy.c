/* tile_saxpy - y = a * x + y0 as a tile kernel, on a length the tile does not divide. */
#include "common.h"

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "tile_saxpy");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "saxpy", &k));
  const int64_t n = (1 << 20) + 3, tile = 1024;
  float *x = malloc(sizeof(float) * (size_t)n), *y0 = malloc(sizeof(float) * (size_t)n),
        *y = malloc(sizeof(float) * (size_t)n);
  unsigned seed = 9;
  for (int64_t i = 0; i < n; i++) {
    x[i] = example_rand(&seed);
    y0[i] = example_rand(&seed);
  }
  const float a = -1.75f;
  ox_tensor tx, ty0, ty, part;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, x, sizeof(float) * (size_t)n, &tx));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, y0, sizeof(float) * (size_t)n, &ty0));
  OX_CHECK(ox_tensor_empty(dev, NULL, OX_F32, 1, &n, &ty));
  OX_CHECK(ox_tensor_partition(ty, 1, &tile, &part));
  ox_arg args[4] = {ox_arg_tensor(part), ox_arg_f32(a), ox_arg_tensor(tx), ox_arg_tensor(ty0)};
  OX_CHECK(ox_launch(k, NULL, NULL, args, 4));
  OX_CHECK(ox_tensor_to_host(ty, NULL, y, sizeof(float) * (size_t)n));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float want = a * x[i] + y0[i];
    if (y[i] != want && bad++ < 5)
      fprintf(stderr, "y[%lld] = %.9g, expected %.9g\n", (long long)i, y[i], want);
  }
  ox_tensor_release(part);
  ox_tensor_release(tx);
  ox_tensor_release(ty0);
  ox_tensor_release(ty);
  ox_module_destroy(m);
  free(x);
  free(y0);
  free(y);
  return example_finish("tile_saxpy", dev, bad);
}
