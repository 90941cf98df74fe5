/* histogram - byte histogram with shared and global atomics. */
#include "common.h"

int main(int argc, char **argv) {
  ox_device dev = example_device(argc, argv);
  ox_module m = example_module(dev, "histogram");
  ox_kernel k;
  OX_CHECK(ox_module_get_kernel(m, "histogram", &k));
  const int64_t n = 5 * 1000 * 1000 + 3, nb = 256;
  unsigned char *data = malloc((size_t)n);
  uint32_t want[256] = {0}, got[256], zero[256] = {0};
  unsigned seed = 11;
  for (int64_t i = 0; i < n; i++) {
    seed = seed * 1664525u + 1013904223u;
    /* skewed, so that some bins are hot (atomic contention) */
    data[i] = (unsigned char)((seed >> 24) & ((seed >> 20) & 1 ? 0xff : 0x0f));
    want[data[i]]++;
  }
  ox_tensor td, tb;
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_U8, 1, &n, data, (size_t)n, &td));
  OX_CHECK(ox_tensor_from_host(dev, NULL, OX_U32, 1, &nb, zero, sizeof zero, &tb));
  ox_launch_config cfg = {{120, 1, 1}, {256, 1, 1}};
  ox_arg args[2] = {ox_arg_tensor(td), ox_arg_tensor(tb)};
  OX_CHECK(ox_launch(k, NULL, &cfg, args, 2));
  ox_stream s;
  OX_CHECK(ox_device_stream(dev, &s));
  OX_CHECK(ox_stream_synchronize(s));
  OX_CHECK(ox_tensor_to_host(tb, NULL, got, sizeof got));
  int bad = 0;
  for (int b = 0; b < 256; b++)
    if (got[b] != want[b] && bad++ < 5)
      fprintf(stderr, "bin %d = %u, expected %u\n", b, got[b], want[b]);
  ox_tensor_release(td);
  ox_tensor_release(tb);
  ox_module_destroy(m);
  free(data);
  return example_finish("histogram", dev, bad);
}
