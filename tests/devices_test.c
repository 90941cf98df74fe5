/* devices_test - kernels, tensors and copies on two CUDA devices.
 *
 *   devices_test mock   (CPU CI) against tests/mock_cuda.c, a stand-in driver
 *                       with two GPUs ($OXIDE_CUDA_DRIVER): which device each
 *                       launch and load goes to, what is refused, peer copies
 *                       or (with MOCK_CUDA_PEER=0) copies through the host,
 *                       and cross-device stream ordering (events recorded in
 *                       their own device's context). The mock runs no
 *                       kernel: contents are checked for copies only.
 *   devices_test cuda   (ctest label gpu2: a machine with two GPUs) the same
 *                       on real devices, with contents: kernels on both,
 *                       copies both ways, many iterations of ordering.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

#include "../dlpack/dlpack.h"
#include "check.h"

static const char *SRC =
    "#[kernel]\n"
    "#[launch_contract(block = (256, 1, 1), requires = (a.len() >= c.len(), b.len() >= c.len()))]\n"
    "fn vadd(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {\n"
    "    let i = thread::index_1d();\n"
    "    if let Some(o) = c.get_mut(i) { *o = a[i] + b[i]; }\n"
    "}\n"
    "#[tile]\n"
    "fn tadd<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>) {\n"
    "    z.store(load_tile_like(x, z) + load_tile_like(y, z));\n"
    "}\n";

enum { N = 1000 };
static int mock;
static int (*launches)(int), (*loads)(int), (*peer_copies)(void), (*cross_waits)(void);

static ox_tensor filled(ox_device d, float base) {
  static float host[N];
  for (int i = 0; i < N; i++)
    host[i] = base + (float)i;
  int64_t shape[1] = {N};
  ox_tensor t = NULL;
  CHECK_OK(ox_tensor_from_host(d, NULL, OX_F32, 1, shape, host, sizeof host, &t));
  return t;
}

/* Whether t holds base + i (after its device's work). */
static int holds(ox_tensor t, float base) {
  static float host[N];
  if (ox_tensor_to_host(t, NULL, host, sizeof host) != OX_OK)
    return 0;
  for (int i = 0; i < N; i++)
    if (host[i] != base + (float)i)
      return 0;
  return 1;
}

static ox_status vadd(ox_kernel k, ox_stream s, ox_tensor a, ox_tensor b, ox_tensor c) {
  ox_arg args[3] = {ox_arg_tensor(a), ox_arg_tensor(b), ox_arg_tensor(c)};
  ox_launch_config cfg = {{(N + 255) / 256, 1, 1}, {256, 1, 1}};
  return ox_launch(k, s, &cfg, args, 3);
}

static ox_status tadd(ox_kernel k, ox_tensor z, ox_tensor x, ox_tensor y) {
  int64_t tile[1] = {256};
  ox_tensor zp = NULL;
  ox_status st = ox_tensor_partition(z, 1, tile, &zp);
  ox_arg args[3] = {ox_arg_tensor(zp), ox_arg_tensor(x), ox_arg_tensor(y)};
  if (!st)
    st = ox_launch(k, NULL, NULL, args, 3);
  ox_tensor_release(zp);
  return st;
}

/* A launch goes to the device of its tensors (the module's code loaded there
 * once), or of its stream; tensors of two devices are refused. */
static void launches_follow_tensors(ox_device d0, ox_device d1) {
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(d0, SRC, NULL, &m));
  ox_kernel k = NULL, t = NULL;
  CHECK_OK(ox_module_get_kernel(m, "vadd", &k));
  CHECK_OK(ox_module_get_kernel(m, "tadd", &t));
  ox_tensor a0 = filled(d0, 1), b0 = filled(d0, 2), c0 = filled(d0, 0);
  ox_tensor a1 = filled(d1, 1), b1 = filled(d1, 2), c1 = filled(d1, 0);
  int before0 = mock ? launches(0) : 0, loads1 = mock ? loads(1) : 0;
  for (int i = 0; i < 3; i++)
    CHECK_OK(vadd(k, NULL, a1, b1, c1));
  if (mock)
    CHECK(launches(1) == 3 && launches(0) == before0 && loads(1) == loads1 + 1,
          "three launches with cuda:1 tensors: %d there, %d on cuda:0 (of %d before), %d loads on cuda:1",
          launches(1), launches(0), before0, loads(1) - loads1);
  else { /* c = a + b = (1 + i) + (2 + i) */
    static float host[N];
    CHECK_OK(ox_tensor_to_host(c1, NULL, host, sizeof host));
    int ok = 1;
    for (int i = 0; i < N; i++)
      ok &= host[i] == 3.0f + 2.0f * (float)i;
    CHECK(ok, "vadd on cuda:1: wrong sums");
  }
  CHECK_OK(vadd(k, NULL, a0, b0, c0));
  CHECK(!mock || launches(0) == before0 + 1, "a launch with cuda:0 tensors did not run there");
  /* an explicit stream says the device; its tensors must be there */
  ox_stream s1 = NULL;
  CHECK_OK(ox_stream_create(d1, &s1));
  CHECK_OK(vadd(k, s1, a1, b1, c1));
  CHECK_ERR(vadd(k, s1, a0, b0, c0), OX_ERR_INVALID_ARGUMENT, "the tensor is on cuda:0, the launch on cuda:1");
  CHECK_ERR(vadd(k, NULL, a0, b1, c1), OX_ERR_INVALID_ARGUMENT,
            "argument 1 ('a') is on cuda:0 and argument 2 ('b') on cuda:1; a launch runs on one device");
  /* a tile kernel: specialized once for the architecture, loaded on each device */
  int l1 = mock ? loads(1) : 0, l0 = mock ? loads(0) : 0;
  CHECK_OK(tadd(t, c1, a1, b1));
  CHECK_OK(tadd(t, c1, a1, b1));
  CHECK_OK(tadd(t, c0, a0, b0));
  CHECK(!mock || (loads(1) == l1 + 1 && loads(0) == l0 + 1), "tile kernel loads: %d on cuda:1, %d on cuda:0",
        mock ? loads(1) - l1 : -1, mock ? loads(0) - l0 : -1);
  CHECK_ERR(tadd(t, c0, a1, b1), OX_ERR_INVALID_ARGUMENT, "a launch runs on one device");
  /* a chain on cuda:1 of a kernel compiled on cuda:0 */
  ox_chain ch = NULL;
  CHECK_OK(ox_chain_create(d1, &ch));
  ox_arg args[3] = {ox_arg_tensor(a1), ox_arg_tensor(b1), ox_arg_tensor(c1)};
  ox_launch_config cfg = {{(N + 255) / 256, 1, 1}, {256, 1, 1}};
  CHECK_OK(ox_chain_launch(ch, k, &cfg, args, 3));
  CHECK_OK(ox_chain_run(ch, s1));
  ox_chain_destroy(ch);
  CHECK_OK(ox_stream_synchronize(s1));
  ox_stream_destroy(s1);
  ox_tensor ts[] = {a0, b0, c0, a1, b1, c1};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
    ox_tensor_release(ts[i]);
  ox_module_destroy(m); /* (unloads its code from both devices) */
}

/* Copies between the GPUs: exact contents both ways, with peer access when
 * the driver gives it (else through the host), ordered after the source's
 * writer on the other device. */
static void copies(ox_device d0, ox_device d1, int peer) {
  ox_tensor x0 = filled(d0, 7), y1 = filled(d1, 0), back = NULL;
  int pc = mock ? peer_copies() : 0, cw = mock ? cross_waits() : 0;
  CHECK_OK(ox_tensor_copy(y1, x0, NULL));
  CHECK(holds(y1, 7), "cuda:0 -> cuda:1: wrong contents");
  CHECK_OK(ox_tensor_to(y1, d0, NULL, &back));
  CHECK(back && holds(back, 7), "cuda:1 -> cuda:0: wrong contents");
  if (mock)
    CHECK(peer_copies() == pc + (peer ? 2 : 0), "%d peer copies, expected %d", peer_copies() - pc, peer ? 2 : 0);
  /* a strided source (a transposed view): made dense on its own GPU first, then one DMA */
  int64_t shape2[2] = {N / 10, 10};
  ox_tensor m2 = NULL, tv = NULL, moved = NULL;
  CHECK_OK(ox_tensor_reshape(x0, 2, shape2, &m2));
  CHECK_OK(ox_tensor_transpose(m2, 0, 1, &tv));
  CHECK_OK(ox_tensor_to(tv, d1, NULL, &moved));
  CHECK(moved && ox_tensor_device(moved) == d1 && ox_tensor_is_contiguous(moved), "a strided copy to cuda:1");
  if (!mock) { /* element (i, j) of the transpose is x0[j * 10 + i] = 7 + j * 10 + i */
    static float host[N];
    CHECK_OK(ox_tensor_to_host(moved, NULL, host, sizeof host));
    int ok = 1;
    for (int i = 0; i < 10; i++)
      for (int j = 0; j < N / 10; j++)
        ok &= host[i * (N / 10) + j] == 7.0f + (float)(j * 10 + i);
    CHECK(ok, "a strided copy to cuda:1: wrong contents");
  }
  if (mock)
    CHECK(peer_copies() == pc + (peer ? 3 : 0), "the strided copy: %d peer copies in all", peer_copies() - pc);
  ox_tensor_release(moved);
  ox_tensor_release(tv);
  ox_tensor_release(m2);
  /* the source written on cuda:0's own stream, copied on cuda:1's: cuda:1 waits for it on the device */
  ox_stream s0 = NULL;
  CHECK_OK(ox_stream_create(d0, &s0));
  ox_module m = NULL;
  ox_kernel k = NULL;
  CHECK_OK(ox_module_compile(d0, SRC, NULL, &m));
  CHECK_OK(ox_module_get_kernel(m, "vadd", &k));
  int64_t shape[1] = {N};
  ox_tensor one0 = NULL, acc0 = filled(d0, 0), tmp0 = filled(d0, 0), acc1 = filled(d1, 0);
  CHECK_OK(ox_tensor_full(d0, NULL, OX_F32, 1, shape, 1.0, &one0));
  /* rounds of: tmp0 = acc0 + 1 on cuda:0's stream s0, acc1 <- tmp0 on cuda:1's default stream,
     acc0 <- acc1 on s0; no host wait between them */
  int rounds = mock ? 3 : 50;
  for (int r = 0; r < rounds; r++) {
    CHECK_OK(vadd(k, s0, acc0, one0, tmp0));
    CHECK_OK(ox_tensor_copy(acc1, tmp0, NULL));
    CHECK_OK(ox_tensor_copy(acc0, acc1, s0));
  }
  if (!mock)
    CHECK(holds(acc0, (float)rounds), "after %d rounds across the GPUs: wrong contents", rounds);
  if (mock && peer) /* (through the host, the copy waits for the source on the host) */
    CHECK(cross_waits() > cw, "no stream of one GPU waited for the other's");
  ox_stream_destroy(s0);
  ox_tensor_release(tmp0);
  ox_tensor_release(one0);
  ox_tensor_release(acc0);
  ox_tensor_release(acc1);
  ox_tensor_release(x0);
  ox_tensor_release(y1);
  ox_tensor_release(back);
  ox_module_destroy(m);
}

/* A tensor of cuda:1 leaves through DLPack with device id 1 and comes back
 * on cuda:1 (its memory, not a copy). */
static void dlpack_device_ids(ox_device d1) {
  ox_tensor t = filled(d1, 5), back = NULL;
  void *out = NULL;
  CHECK_OK(ox_tensor_to_dlpack(t, NULL, 1, &out));
  DLManagedTensorVersioned *m = out;
  CHECK(m && m->dl_tensor.device.device_type == kDLCUDA && m->dl_tensor.device.device_id == 1,
        "exported with device (%d, %d)", m ? (int)m->dl_tensor.device.device_type : -1,
        m ? (int)m->dl_tensor.device.device_id : -1);
  CHECK_OK(ox_tensor_from_dlpack(m, 1, &back));
  CHECK(back && ox_tensor_device(back) == d1 && ox_tensor_data(back) == ox_tensor_data(t) && holds(back, 5),
        "imported from device id 1: not the same memory on cuda:1");
  ox_tensor_release(back);
  ox_tensor_release(t);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "mock";
  mock = !strcmp(mode, "mock");
  if (mock) {
    const char *lib = getenv("OXIDE_CUDA_DRIVER");
    void *h = lib ? dlopen(lib, RTLD_NOW | RTLD_LOCAL) : NULL;
    CHECK(h != NULL, "the mock driver (OXIDE_CUDA_DRIVER=%s) does not load: %s", lib ? lib : "(unset)", dlerror());
    if (!h)
      return test_done("devices_test");
    *(void **)&launches = dlsym(h, "mock_cuda_launches");
    *(void **)&loads = dlsym(h, "mock_cuda_module_loads");
    *(void **)&peer_copies = dlsym(h, "mock_cuda_peer_copies");
    *(void **)&cross_waits = dlsym(h, "mock_cuda_cross_waits");
  }
  int n = 0;
  CHECK_OK(ox_device_count(OX_DEVICE_CUDA, &n));
  CHECK(n >= 2, "%d CUDA devices: this test needs two", n);
  if (n < 2)
    return test_done("devices_test");
  ox_device d0 = NULL, d1 = NULL;
  CHECK_OK(ox_device_get(OX_DEVICE_CUDA, 0, &d0));
  CHECK_OK(ox_device_get(OX_DEVICE_CUDA, 1, &d1));
  launches_follow_tensors(d0, d1);
  dlpack_device_ids(d1);
  const char *p = getenv(mock ? "MOCK_CUDA_PEER" : "OXIDE_PEER");
  copies(d0, d1, !(p && !strcmp(p, "0")));
  return test_done("devices_test");
}
