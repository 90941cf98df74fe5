/* tile_add - z = x + y as a tile kernel: 1024 elements partitioned into tiles
 * of 128 gives a grid of 8 blocks (cuTile Rust's quick start), then a length
 * that the tile does not divide. */
#include "common.h"

static int run(ox_device dev, ox_kernel k, int64_t n, int64_t tile) {
  float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n),
        *z = malloc(sizeof(float) * (size_t)n);
  unsigned seed = (unsigned)n;
  for (int64_t i = 0; i < n; i++) {
    x[i] = example_rand(&seed);
    y[i] = example_rand(&seed);
    z[i] = -1e30f;
  }
  ox_tensor tx, ty, tz, part;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, x, sizeof(float) * (size_t)n, &tx));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, y, sizeof(float) * (size_t)n, &ty));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, z, sizeof(float) * (size_t)n, &tz));
  OX_CHECK(ox_tensor_partition(tz, 1, &tile, &part));
  int64_t grid[OX_MAX_DIMS];
  ox_tensor_partition_grid(part, grid);
  ox_arg args[3] = {ox_arg_tensor(part), ox_arg_tensor(tx), ox_arg_tensor(ty)};
  OX_CHECK(ox_launch(k, NULL, NULL, args, 3)); /* the grid is the partition's */
  ox_stream s;
  OX_CHECK(ox_device_stream(dev, &s));
  OX_CHECK(ox_stream_synchronize(s));
  OX_CHECK(ox_tensor_to_host(tz, NULL, z, sizeof(float) * (size_t)n));
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (z[i] != x[i] + y[i] && bad++ < 5)
      fprintf(stderr, "n=%lld: z[%lld] = %g, expected %g\n", (long long)n, (long long)i, z[i], x[i] + y[i]);
  if (n == 1024 && grid[0] != 8) {
    fprintf(stderr, "the grid of 1024 / 128 is %lld, not 8\n", (long long)grid[0]);
    bad++;
  }
  ox_tensor_release(part);
  ox_tensor_release(tx);
  ox_tensor_release(ty);
  ox_tensor_release(tz);
  free(x);
  free(y);
  free(z);
  return bad;
}

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "tile_add");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "add", &k));
  int bad = run(dev, k, 1024, 128) + run(dev, k, 100003, 1024) + run(dev, k, 5, 4);
  ox_module_destroy(m);
  return example_finish("tile_add", dev, bad);
}
