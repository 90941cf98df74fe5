/* transpose - a shared-memory tiled transpose of a matrix whose sides are not
 * multiples of the tile. */
#include "common.h"

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "transpose");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "transpose", &k));
  const uint64_t rows = 1000, cols = 777;
  const int64_t n = (int64_t)(rows * cols);
  float *in = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * n);
  unsigned seed = 5;
  for (int64_t i = 0; i < n; i++)
    in[i] = example_rand(&seed);
  ox_tensor ti, to;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, in, sizeof(float) * n, &ti));
  OX_CHECK(ox_tensor_empty(dev, NULL, OX_F32, 1, &n, &to));
  ox_launch_config cfg = {{(uint32_t)((cols + 31) / 32), (uint32_t)((rows + 31) / 32), 1}, {32, 8, 1}};
  ox_arg args[4] = {ox_arg_tensor(ti), ox_arg_tensor(to), ox_arg_u64(rows), ox_arg_u64(cols)};
  OX_CHECK(ox_launch(k, NULL, &cfg, args, 4));
  ox_stream s;
  OX_CHECK(ox_device_stream(dev, &s));
  OX_CHECK(ox_stream_synchronize(s));
  OX_CHECK(ox_tensor_to_host(to, NULL, out, sizeof(float) * n));
  int bad = 0;
  for (uint64_t r = 0; r < rows; r++)
    for (uint64_t c = 0; c < cols; c++)
      if (out[c * rows + r] != in[r * cols + c] && bad++ < 5)
        fprintf(stderr, "out[%llu][%llu] = %g, expected %g\n", (unsigned long long)c,
                (unsigned long long)r, out[c * rows + r], in[r * cols + c]);
  /* The contract relates the lengths to the shape: a wrong shape is refused. */
  args[2] = ox_arg_u64(rows + 1);
  if (ox_launch(k, NULL, &cfg, args, 4) != OX_ERR_LAUNCH) {
    fprintf(stderr, "a launch with the wrong shape was not refused\n");
    bad++;
  }
  /* Output overlapping the input is refused before the launch. */
  args[2] = ox_arg_u64(rows);
  args[1] = ox_arg_tensor(ti);
  if (ox_launch(k, NULL, &cfg, args, 4) != OX_ERR_INVALID_ARGUMENT) {
    fprintf(stderr, "an output aliasing the input was not refused\n");
    bad++;
  }
  ox_tensor_release(ti);
  ox_tensor_release(to);
  ox_module_destroy(m);
  free(in);
  free(out);
  return example_finish("transpose", dev, bad);
}
