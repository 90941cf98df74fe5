/* streams_test - ownership tracking across streams (argv[1]: "cpu" or
 * "cuda"): a tensor produced by a slow kernel on one stream and consumed on
 * another, many times over, must always be read complete, with no
 * synchronization in the program. Without Oxide's automatic ordering the
 * consumer races ahead (run with OXIDE_DEBUG_NO_STREAM_ORDERING=1 to see the
 * test catch that: it then fails). */
#include <stdlib.h>

#include "check.h"
#include "produce_consume.h"

int main(int argc, char **argv) {
  const char *d = argc > 1 ? argv[1] : "cpu";
  ox_device dev = NULL;
  CHECK_OK(ox_device_get(strcmp(d, "cpu") ? OX_DEVICE_CUDA : OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("streams_test");
  ox_compile_options o = {.filename = "streams.oxk"};
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(dev, PRODUCE_CONSUME, &o, &m));
  ox_kernel kp = NULL, kc = NULL;
  if (m) {
    CHECK_OK(ox_module_get_kernel(m, "produce", &kp));
    CHECK_OK(ox_module_get_kernel(m, "consume", &kc));
  }
  if (!kp || !kc)
    return test_done("streams_test");
  const int64_t n = 1 << 16;
  const int iters = strcmp(d, "cpu") ? 100 : 5;
  const uint32_t spin = strcmp(d, "cpu") ? 200000 : 10; /* GPU: ~0.5 ms per producer */
  ox_stream sa, sb;
  CHECK_OK(ox_stream_create(dev, &sa));
  CHECK_OK(ox_stream_create(dev, &sb));
  ox_tensor x, y;
  CHECK_OK(ox_tensor_empty(dev, sa, OX_F32, 1, &n, &x));
  CHECK_OK(ox_tensor_empty(dev, sb, OX_F32, 1, &n, &y));
  float *h = malloc(sizeof(float) * (size_t)n);
  ox_launch_config cfg = {{(uint32_t)(n / 256), 1, 1}, {256, 1, 1}};
  int bad_iters = 0;
  for (int it = 0; it < iters; it++) {
    ox_arg pa[5] = {ox_arg_tensor(x), ox_arg_f32((float)it), ox_arg_u32(spin), ox_arg_f32(1.0f),
                    ox_arg_f32(0.0f)};
    ox_arg ca[2] = {ox_arg_tensor(x), ox_arg_tensor(y)};
    CHECK_OK(ox_launch(kp, sa, &cfg, pa, 5)); /* write x on stream A */
    CHECK_OK(ox_launch(kc, sb, &cfg, ca, 2)); /* read x, write y on stream B */
    CHECK_OK(ox_tensor_to_host(y, sb, h, sizeof(float) * (size_t)n));
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
      bad += h[i] != (float)it + 1.0f;
    bad_iters += bad != 0;
  }
  CHECK(bad_iters == 0, "%d of %d iterations read x before stream A finished writing it", bad_iters, iters);
  /* the reverse: B reads x while A overwrites it next (write after read) */
  int war = 0;
  for (int it = 0; it < iters; it++) {
    ox_arg ca[2] = {ox_arg_tensor(x), ox_arg_tensor(y)};
    ox_arg pa[5] = {ox_arg_tensor(x), ox_arg_f32(-1.0f), ox_arg_u32(1), ox_arg_f32(1.0f), ox_arg_f32(0.0f)};
    ox_arg pb[5] = {ox_arg_tensor(x), ox_arg_f32((float)it), ox_arg_u32(spin), ox_arg_f32(1.0f), ox_arg_f32(0.0f)};
    CHECK_OK(ox_launch(kp, sb, &cfg, pb, 5)); /* slow write of x on B */
    CHECK_OK(ox_launch(kc, sb, &cfg, ca, 2)); /* read x on B */
    CHECK_OK(ox_launch(kp, sa, &cfg, pa, 5)); /* overwrite x on A: must wait for B's read */
    CHECK_OK(ox_tensor_to_host(y, sb, h, sizeof(float) * (size_t)n));
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
      bad += h[i] != (float)it + 1.0f;
    war += bad != 0;
  }
  CHECK(war == 0, "%d of %d iterations: stream A overwrote x before stream B read it", war, iters);
  /* a chain: recorded once, run lazily; on CUDA captured as a graph and replayed */
  ox_chain c;
  CHECK_OK(ox_chain_create(dev, &c));
  ox_arg pa[5] = {ox_arg_tensor(x), ox_arg_f32(7.0f), ox_arg_u32(spin), ox_arg_f32(1.0f), ox_arg_f32(0.0f)};
  ox_arg ca[2] = {ox_arg_tensor(x), ox_arg_tensor(y)};
  CHECK_OK(ox_chain_launch(c, kp, &cfg, pa, 5));
  CHECK_OK(ox_chain_launch(c, kc, &cfg, ca, 2));
  ox_launch_config wrong = {{1, 1, 1}, {2048, 1, 1}};
  CHECK_ERR(ox_chain_launch(c, kc, &wrong, ca, 2), OX_ERR_LAUNCH, "exceeds");
  CHECK_OK(ox_chain_capture(c, sa));
  for (int rep = 0; rep < 10; rep++) {
    CHECK_OK(ox_chain_run(c, sa));
    CHECK_OK(ox_tensor_to_host(y, sb, h, sizeof(float) * (size_t)n));
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
      bad += h[i] != 8.0f;
    CHECK(bad == 0, "chain replay %d: %d wrong", rep, bad);
  }
  if (strcmp(d, "cpu"))
    CHECK_ERR(ox_chain_run(c, sb), OX_ERR_INVALID_ARGUMENT, "replays on the stream it was captured on");
  ox_chain_destroy(c);
  CHECK_OK(ox_stream_synchronize(sa));
  CHECK_OK(ox_stream_synchronize(sb));
  ox_tensor_release(x);
  ox_tensor_release(y);
  ox_stream_destroy(sa);
  ox_stream_destroy(sb);
  ox_module_destroy(m);
  free(h);
  return test_done("streams_test");
}
