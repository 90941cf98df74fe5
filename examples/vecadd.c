/* vecadd - the first example: c = a + b on 1,000,003 floats (not a multiple of
 * the block), with the kernel's launch contract checked at launch. */
#include "common.h"

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "vecadd");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "vecadd", &k));

  const int64_t n = 1000003;
  float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n), *c = malloc(sizeof(float) * n);
  unsigned seed = 1;
  for (int64_t i = 0; i < n; i++) {
    a[i] = example_rand(&seed);
    b[i] = example_rand(&seed);
    c[i] = -1e30f; /* poison: every element must be written */
  }
  ox_tensor ta, tb, tc;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, a, sizeof(float) * n, &ta));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, b, sizeof(float) * n, &tb));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, c, sizeof(float) * n, &tc));

  ox_launch_config cfg = {{(uint32_t)((n + 255) / 256), 1, 1}, {256, 1, 1}};
  ox_arg args[3] = {ox_arg_tensor(ta), ox_arg_tensor(tb), ox_arg_tensor(tc)};
  OX_CHECK(ox_launch(k, NULL, &cfg, args, 3));
  ox_stream s;
  OX_CHECK(ox_device_stream(dev, &s));
  OX_CHECK(ox_stream_synchronize(s));
  OX_CHECK(ox_tensor_to_host(tc, NULL, c, sizeof(float) * n));

  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (c[i] != a[i] + b[i] && bad++ < 5)
      fprintf(stderr, "c[%lld] = %g, expected %g\n", (long long)i, c[i], a[i] + b[i]);

  /* The contract refuses a launch whose block shape or sizes break it. */
  ox_launch_config wrong = {{1, 1, 1}, {128, 1, 1}};
  if (ox_launch(k, NULL, &wrong, args, 3) != OX_ERR_LAUNCH) {
    fprintf(stderr, "a launch with block 128 was not refused\n");
    bad++;
  }

  ox_tensor_release(ta);
  ox_tensor_release(tb);
  ox_tensor_release(tc);
  ox_module_destroy(m);
  free(a);
  free(b);
  free(c);
  return example_finish("vecadd", dev, bad);
}
