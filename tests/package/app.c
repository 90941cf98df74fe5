/* app.c - a user's C program, built against an installed Oxide (find_package,
 * pkg-config, the static library) or the source tree (add_subdirectory): it
 * compiles a kernel, runs it on the CPU and checks the result. */
#include <dlpack/dlpack.h>
#include <oxide/oxide.h>
#include <stdio.h>

#define TRY(call)                                                                  \
  do {                                                                             \
    if ((call) != OX_OK) {                                                         \
      fprintf(stderr, "%s failed: %s\n", #call, ox_last_error());                 \
      return 1;                                                                    \
    }                                                                              \
  } while (0)

static const char *SRC = "#[kernel]\n"
                         "fn twice(x: &[f32], out: DisjointSlice<f32>) {\n"
                         "    let i = thread::index_1d();\n"
                         "    if let Some(o) = out.get_mut(i) {\n"
                         "        *o = 2.0 * x[i];\n"
                         "    }\n"
                         "}\n";

int main(void) {
  ox_device dev;
  ox_module m;
  ox_kernel k;
  ox_tensor x, y;
  float in[4] = {1, 2, 3, 4}, out[4] = {0};
  int64_t n = 4;
  TRY(ox_device_get(OX_DEVICE_CPU, 0, &dev));
  TRY(ox_module_compile(dev, SRC, NULL, &m));
  TRY(ox_module_get_kernel(m, "twice", &k));
  TRY(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, in, sizeof in, &x));
  TRY(ox_tensor_empty(dev, NULL, OX_F32, 1, &n, &y));
  ox_arg args[2] = {ox_arg_tensor(x), ox_arg_tensor(y)};
  ox_launch_config cfg = {{1, 1, 1}, {4, 1, 1}};
  TRY(ox_launch(k, NULL, &cfg, args, 2));
  TRY(ox_tensor_to_host(y, NULL, out, sizeof out));
  for (int i = 0; i < 4; i++)
    if (out[i] != 2 * in[i]) {
      fprintf(stderr, "wrong result %g at %d\n", out[i], i);
      return 1;
    }
  ox_tensor_release(x);
  ox_tensor_release(y);
  ox_module_destroy(m);
  printf("PASSED (C, Oxide %s, DLPack %d.%d)\n", ox_version(), DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
  return 0;
}
