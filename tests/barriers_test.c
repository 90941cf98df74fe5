/* barriers_test - SIMT kernels whose threads wait for each other, on the
 * device of argv[1] ("cpu" or "cuda"): barriers in loops, an early return
 * before a barrier, shuffles in loops and in code only some warps run, a
 * thread's local array across a barrier. On the CPU such kernels run their
 * threads in loops (IR threads.c), those with local arrays on fibers; both
 * must give the GPU's answers. Then, on the CPU only, the executor's
 * documented rules where a GPU's behaviour is undefined (runtime/cpu.c's top
 * comment): partial warps and absent lanes, a barrier in divergent code, and
 * the deadlock rule. Checked against the answers computed here. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static ox_device dev;
static bool cpu;

static ox_kernel kernel(ox_module *m, const char *src, const char *name) {
  ox_compile_options o = {.filename = "bar.oxk"};
  ox_kernel k = NULL;
  *m = NULL;
  CHECK_OK(ox_module_compile(dev, src, &o, m));
  if (*m)
    CHECK_OK(ox_module_get_kernel(*m, name, &k));
  return k;
}

/* Launches k(x, out) on grid x block threads; out (u32 or f32, n elements) starts at 0xdeadbeef. */
static void launch(ox_kernel k, ox_tensor x, ox_tensor out, uint32_t grid, uint32_t block) {
  ox_arg args[2] = {ox_arg_tensor(x), ox_arg_tensor(out)};
  ox_launch_config cfg = {{grid, 1, 1}, {block, 1, 1}};
  CHECK_OK(ox_launch(k, NULL, &cfg, x ? args : args + 1, x ? 2 : 1));
  ox_stream s;
  CHECK_OK(ox_device_stream(dev, &s));
  CHECK_OK(ox_stream_synchronize(s));
}

static ox_tensor tensor(ox_dtype t, int64_t n, const void *init) {
  ox_tensor x = NULL;
  CHECK_OK(ox_tensor_from_host(dev, NULL, t, 1, &n, init, (size_t)n * 4, &x));
  return x;
}

static void fetch(ox_tensor t, void *dst) { CHECK_OK(ox_tensor_to_host(t, NULL, dst, ox_tensor_nbytes(t))); }

static int differ(const char *what, const uint32_t *got, const uint32_t *want, int n) {
  int bad = 0;
  for (int i = 0; i < n; i++)
    if (got[i] != want[i] && bad++ < 3)
      fprintf(stderr, "%s: element %d is %u (0x%08x), expected %u (0x%08x)\n", what, i, got[i], got[i], want[i],
              want[i]);
  CHECK(bad == 0, "%s: %d elements differ", what, bad);
  return bad;
}

/* Compiles kernel `name` of `src`, runs it as name(x, out) on grid x block threads with
 * out (n u32s) starting at 0xdeadbeef, and compares out with `want`. */
static void check_kernel(const char *src, const char *name, const uint32_t *x, const uint32_t *want, int n,
                         uint32_t grid, uint32_t block, const char *what) {
  ox_module m;
  ox_kernel k = kernel(&m, src, name);
  uint32_t *got = malloc((size_t)n * 4);
  for (int i = 0; i < n; i++)
    got[i] = 0xdeadbeef;
  ox_tensor tx = tensor(OX_U32, n, x), to = tensor(OX_U32, n, got);
  if (k) {
    launch(k, tx, to, grid, block);
    fetch(to, got);
    differ(what, got, want, n);
  }
  ox_tensor_release(tx);
  ox_tensor_release(to);
  ox_module_destroy(m);
  free(got);
}

/* A tree sum through shared memory, a barrier in the loop: every thread of a block gets its sum. */
static void test_tree(void) {
  static const char *src =
      "#[kernel]\n"
      "fn tree(x: &[u32], out: DisjointSlice<u32>) {\n"
      "    let mut s = SharedArray::<u32, 256>::new();\n"
      "    let t = thread::thread_idx_x() as usize;\n"
      "    let i = thread::index_1d();\n"
      "    s[t] = x[i.get()];\n"
      "    sync_threads();\n"
      "    let mut half = 128usize;\n"
      "    while half > 0 {\n"
      "        if t < half { s[t] = s[t] + s[t + half]; }\n"
      "        sync_threads();\n"
      "        half = half / 2;\n"
      "    }\n"
      "    if let Some(o) = out.get_mut(i) { *o = s[0]; }\n"
      "}\n";
  enum { B = 256, G = 5, N = B * G };
  uint32_t *x = malloc(N * 4), *want = malloc(N * 4);
  for (int i = 0; i < N; i++)
    x[i] = (uint32_t)(i * 7 + 3) % 1000;
  for (int b = 0; b < G; b++) {
    uint32_t sum = 0;
    for (int t = 0; t < B; t++)
      sum += x[b * B + t];
    for (int t = 0; t < B; t++)
      want[b * B + t] = sum;
  }
  check_kernel(src, "tree", x, want, N, G, B, "tree sum");
  free(x), free(want);
}

/* Threads 100..127 of each block return before the barrier; the others pass it. */
static void test_early_return(void) {
  static const char *src =
      "#[kernel]\n"
      "fn early(x: &[u32], out: DisjointSlice<u32>) {\n"
      "    let mut s = SharedArray::<u32, 128>::new();\n"
      "    let t = thread::thread_idx_x() as usize;\n"
      "    let i = thread::index_1d();\n"
      "    if t >= 100 { return; }\n"
      "    s[t] = x[i.get()] * 2;\n"
      "    sync_threads();\n"
      "    if let Some(o) = out.get_mut(i) { *o = s[99 - t]; }\n"
      "}\n";
  enum { B = 128, G = 3, N = B * G };
  uint32_t x[N], want[N];
  for (int i = 0; i < N; i++)
    x[i] = (uint32_t)i;
  for (int b = 0; b < G; b++)
    for (int t = 0; t < B; t++)
      want[b * B + t] = t < 100 ? 2 * x[b * B + 99 - t] : 0xdeadbeef;
  check_kernel(src, "early", x, want, N, G, B, "early return");
}

/* Shuffles in a loop, run by warps 0 and 1 only (whole warps: defined on a GPU), then a
 * barrier that every thread reaches. */
static void test_warps_apart(void) {
  static const char *src =
      "#[kernel]\n"
      "fn apart(x: &[u32], out: DisjointSlice<u32>) {\n"
      "    let t = thread::thread_idx_x();\n"
      "    let i = thread::index_1d();\n"
      "    let mut v = x[i.get()];\n"
      "    if t < 64 {\n"
      "        let mut d = 16u32;\n"
      "        while d > 0 {\n"
      "            v = v + warp::shuffle_xor(v, d);\n"
      "            d = d / 2;\n"
      "        }\n"
      "    } else {\n"
      "        v = v * 3 + warp::lane_id();\n"
      "    }\n"
      "    let mut s = SharedArray::<u32, 128>::new();\n"
      "    s[t as usize] = v;\n"
      "    sync_threads();\n"
      "    if let Some(o) = out.get_mut(i) { *o = s[(127 - t) as usize]; }\n"
      "}\n";
  enum { B = 128, G = 2, N = B * G };
  uint32_t x[N], want[N], v[N];
  for (int i = 0; i < N; i++)
    x[i] = (uint32_t)(i * i) % 977;
  for (int b = 0; b < G; b++)
    for (int t = 0; t < B; t++) {
      uint32_t r = 0;
      if (t < 64)
        for (int l = 0; l < 32; l++)
          r += x[b * B + t / 32 * 32 + l];
      else
        r = x[b * B + t] * 3 + (uint32_t)t % 32;
      v[b * B + t] = r;
    }
  for (int b = 0; b < G; b++)
    for (int t = 0; t < B; t++)
      want[b * B + t] = v[b * B + 127 - t];
  check_kernel(src, "apart", x, want, N, G, B, "shuffles in some warps");
}

/* A thread's local array across a barrier (on the CPU: the fibers). */
static void test_local_array(void) {
  static const char *src =
      "#[kernel]\n"
      "fn local(x: &[u32], out: DisjointSlice<u32>) {\n"
      "    let mut a = [0u32; 4];\n"
      "    let mut s = SharedArray::<u32, 64>::new();\n"
      "    let t = thread::thread_idx_x() as usize;\n"
      "    let i = thread::index_1d();\n"
      "    a[t % 4] = x[i.get()];\n"
      "    s[t] = a[t % 4] + 1;\n"
      "    sync_threads();\n"
      "    if let Some(o) = out.get_mut(i) { *o = s[63 - t] + a[t % 4]; }\n"
      "}\n";
  enum { B = 64, G = 2, N = B * G };
  uint32_t x[N], want[N];
  for (int i = 0; i < N; i++)
    x[i] = (uint32_t)i * 5;
  for (int b = 0; b < G; b++)
    for (int t = 0; t < B; t++)
      want[b * B + t] = x[b * B + 63 - t] + 1 + x[b * B + t];
  check_kernel(src, "local", x, want, N, G, B, "local array across a barrier");
}

/* CPU only. A block of 40 threads: warp 1 has lanes 0..7. A shuffle from an absent lane
 * gives the caller's own value; a ballot counts the present lanes. */
static void test_partial_warp(void) {
  static const char *src =
      "#[kernel]\n"
      "fn partial(x: &[u32], out: DisjointSlice<u32>) {\n"
      "    let i = thread::index_1d();\n"
      "    let v = x[i.get()];\n"
      "    let a = warp::shuffle_down(v, 4);\n"
      "    let b = warp::shuffle_xor(v, 16);\n"
      "    let c = warp::ballot(v % 2 == 0);\n"
      "    if let Some(o) = out.get_mut(i) { *o = a * 1000000 + b * 1000 + (c % 1000); }\n"
      "}\n";
  enum { B = 40, N = B };
  uint32_t x[N], want[N];
  for (int i = 0; i < N; i++)
    x[i] = (uint32_t)(i * 3 + 1) % 97;
  for (int t = 0; t < N; t++) {
    int w = t / 32, l = t % 32, lanes = w ? 8 : 32;
    uint32_t a = l + 4 < lanes ? x[t + 4] : x[t], b = (l ^ 16) < lanes ? x[w * 32 + (l ^ 16)] : x[t], c = 0;
    for (int j = 0; j < lanes; j++)
      c |= (x[w * 32 + j] % 2 == 0 ? 1u : 0u) << j;
    want[t] = a * 1000000 + b * 1000 + c % 1000;
  }
  check_kernel(src, "partial", x, want, N, 1, B, "partial warp");
}

/* CPU only. Threads 0..15 wait at one barrier, the others at another: as on NVIDIA GPUs
 * (arrivals are counted, not places), all are released together. Then lanes of one warp
 * at a shuffle while the others wait at a barrier (the deadlock rule): the shuffle
 * completes over the lanes present. */
static void test_divergent(void) {
  static const char *src =
      "#[kernel]\n"
      "fn div(x: &[u32], out: DisjointSlice<u32>) {\n"
      "    let mut s = SharedArray::<u32, 64>::new();\n"
      "    let t = thread::thread_idx_x();\n"
      "    let i = thread::index_1d();\n"
      "    s[t as usize] = x[i.get()] + 1;\n"
      "    if t < 16 { sync_threads(); } else { sync_threads(); }\n"
      "    let mut r = s[(63 - t) as usize];\n"
      "    if t < 8 { r = r + 1000 * warp::shuffle_xor(r, 1); }\n"
      "    sync_threads();\n"
      "    if let Some(o) = out.get_mut(i) { *o = r; }\n"
      "}\n";
  enum { N = 64 };
  uint32_t x[N], want[N];
  for (int i = 0; i < N; i++)
    x[i] = (uint32_t)i * 2;
  for (int t = 0; t < N; t++) {
    uint32_t r = x[63 - t] + 1;
    if (t < 8)
      r += 1000 * (x[63 - (t ^ 1)] + 1);
    want[t] = r;
  }
  check_kernel(src, "div", x, want, N, 1, N, "divergent barrier and shuffle");
}

int main(int argc, char **argv) {
  const char *d = argc > 1 ? argv[1] : "cpu";
  cpu = strcmp(d, "cpu") == 0;
  CHECK_OK(ox_device_get(cpu ? OX_DEVICE_CPU : OX_DEVICE_CUDA, 0, &dev));
  if (!dev)
    return test_done("barriers_test");
  test_tree();
  test_early_return();
  test_warps_apart();
  test_local_array();
  if (cpu) {
    test_partial_warp();
    test_divergent();
  }
  return test_done("barriers_test");
}
