/* reduce - a block reduction with warp shuffles and shared memory: partial
 * sums per block, finished on the host, checked against a double sum. */
#include <math.h>

#include "common.h"

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "reduce");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "block_sum", &k));
  const int64_t n = 3 * 1000 * 1000 + 11;
  const int64_t blocks = (n + 511) / 512;
  float *x = malloc(sizeof(float) * n), *part = malloc(sizeof(float) * blocks);
  unsigned seed = 3;
  double want = 0;
  for (int64_t i = 0; i < n; i++) {
    x[i] = example_rand(&seed);
    want += x[i];
  }
  ox_tensor tx, tp;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, x, sizeof(float) * n, &tx));
  OX_CHECK(ox_tensor_empty(dev, NULL, OX_F32, 1, &blocks, &tp));
  ox_launch_config cfg = {{(uint32_t)blocks, 1, 1}, {256, 1, 1}};
  ox_arg args[2] = {ox_arg_tensor(tx), ox_arg_tensor(tp)};
  OX_CHECK(ox_launch(k, NULL, &cfg, args, 2));
  ox_stream s;
  OX_CHECK(ox_device_stream(dev, &s));
  OX_CHECK(ox_stream_synchronize(s));
  OX_CHECK(ox_tensor_to_host(tp, NULL, part, sizeof(float) * blocks));
  int bad = 0;
  double got = 0;
  for (int64_t b = 0; b < blocks; b++) {
    double ref = 0;
    for (int64_t i = b * 512; i < (b + 1) * 512 && i < n; i++)
      ref += x[i];
    if (fabs(part[b] - ref) > 1e-4 * (1 + fabs(ref)) && bad++ < 5)
      fprintf(stderr, "partial[%lld] = %.9g, expected %.9g\n", (long long)b, part[b], ref);
    got += part[b];
  }
  if (fabs(got - want) > 1e-3 * (1 + fabs(want))) {
    fprintf(stderr, "sum = %.9g, expected %.9g\n", got, want);
    bad++;
  }
  ox_tensor_release(tx);
  ox_tensor_release(tp);
  ox_module_destroy(m);
  free(x);
  free(part);
  return example_finish("reduce", dev, bad);
}
