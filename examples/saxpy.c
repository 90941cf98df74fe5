/* saxpy - y = alpha * x + y with a scalar argument, on a length that is not a
 * multiple of the block. */
#include <math.h>

#include "common.h"

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "saxpy");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "saxpy", &k));
  const int64_t n = (1 << 20) + 77;
  float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n), *r = malloc(sizeof(float) * n);
  unsigned seed = 7;
  for (int64_t i = 0; i < n; i++) {
    x[i] = example_rand(&seed);
    y[i] = example_rand(&seed);
  }
  const float alpha = 2.5f;
  ox_tensor tx, ty, tr;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, x, sizeof(float) * n, &tx));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, y, sizeof(float) * n, &ty));
  OX_CHECK(ox_tensor_empty(dev, NULL, OX_F32, 1, &n, &tr));
  ox_launch_config cfg = {{(uint32_t)((n + 127) / 128), 1, 1}, {128, 1, 1}};
  ox_arg args[4] = {ox_arg_f32(alpha), ox_arg_tensor(tx), ox_arg_tensor(ty), ox_arg_tensor(tr)};
  OX_CHECK(ox_launch(k, NULL, &cfg, args, 4));
  ox_stream s;
  OX_CHECK(ox_device_stream(dev, &s));
  OX_CHECK(ox_stream_synchronize(s));
  OX_CHECK(ox_tensor_to_host(tr, NULL, r, sizeof(float) * n));
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    float want = fmaf(alpha, x[i], y[i]);
    if (r[i] != want && bad++ < 5)
      fprintf(stderr, "y[%lld] = %.9g, expected %.9g\n", (long long)i, r[i], want);
  }
  /* A scalar of the wrong dtype is refused, not converted. */
  args[0] = ox_arg_f64(alpha);
  if (ox_launch(k, NULL, &cfg, args, 4) != OX_ERR_INVALID_ARGUMENT) {
    fprintf(stderr, "an f64 alpha was not refused\n");
    bad++;
  }
  ox_tensor_release(tx);
  ox_tensor_release(ty);
  ox_tensor_release(tr);
  ox_module_destroy(m);
  free(x);
  free(y);
  free(r);
  return example_finish("saxpy", dev, bad);
}
