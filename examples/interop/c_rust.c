/* C makes a tensor, a kernel launched from Rust writes it (through the
 * rust_affine entry point of the oxide_rust_fill cdylib, which has its own
 * copy of liboxide: the tensor crosses as DLPack, not as a handle), and C
 * reads it back. Checks the values, and that the export's reference went
 * back exactly once (the tensor's storage stays valid and releasable).
 *   c_rust [cpu|cuda] */
#include <oxide/oxide.h>
#include <stdio.h>
#include <string.h>

int rust_affine(void *managed, float a, float b);
const char *rust_last_error(void);

#define CHECK(call)                                                              \
  do {                                                                           \
    if ((call) != OX_OK) {                                                       \
      fprintf(stderr, "%s failed: %s\n", #call, ox_last_error());                \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

int main(int argc, char **argv) {
  int cuda = argc > 1 && !strcmp(argv[1], "cuda");
  ox_device dev;
  CHECK(ox_device_get(cuda ? OX_DEVICE_CUDA : OX_DEVICE_CPU, 0, &dev));
  enum { N = 10007 };
  static float host[N];
  for (int i = 0; i < N; i++)
    host[i] = (float)i;
  int64_t n = N;
  ox_tensor t;
  CHECK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, host, sizeof host, &t));
  for (int round = 0; round < 3; round++) {
    void *managed;
    CHECK(ox_tensor_to_dlpack(t, NULL, 1, &managed)); /* one more reference, for Rust */
    if (rust_affine(managed, 2.0f, 1.0f) != 0) {
      fprintf(stderr, "rust_affine: %s\n", rust_last_error());
      return 1;
    }
  }
  CHECK(ox_tensor_to_host(t, NULL, host, sizeof host));
  int bad = 0;
  for (int i = 0; i < N; i++) /* x -> 2x + 1, three times: 8x + 7 */
    bad += host[i] != 8.0f * (float)i + 7.0f;
  ox_tensor_release(t); /* the last reference: Rust's were all given back */
  printf("c_rust on %s: %d of %d wrong\n", ox_device_name(dev), bad, N);
  return bad != 0;
}
