/* tsan_fiber_test.c - kernels with barriers, warp shuffles and votes, which
 * the CPU device runs on fibers (one ucontext per GPU thread), launched many
 * times from several host threads at once, each result checked. CI runs it
 * under ThreadSanitizer (label "threads"): before core/runtime/cpu.c kept
 * TSan's shadow call stack balanced across fiber switches, a TSan build
 * crashed here after some 300 launches (a worker's shadow stack overflowed
 * from the 1024-thread blocks). The block sizes differ from kernel to kernel,
 * so the executors' fiber stacks are also remapped along the way. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

enum { HOST_THREADS = 4, ROUNDS = 40, KERNELS = 4 };

static const char *SRC =
    /* a block's 128 elements reversed through shared memory */
    "#[kernel]\n"
    "fn reverse(x: &[i32], out: DisjointSlice<i32>) {\n"
    "    let s = SharedArray::<i32, 128>::new();\n"
    "    let t = thread::thread_idx_x() as usize;\n"
    "    s[t] = x[thread::block_idx_x() as usize * 128 + t];\n"
    "    sync_threads();\n"
    "    let i = thread::index_1d();\n"
    "    if let Some(o) = out.get_mut(i) { *o = s[127 - t]; }\n"
    "}\n"
    /* a block's 1024 elements summed by a tree: eleven barriers */
    "#[kernel]\n"
    "fn tree_sum(x: &[i32], sums: DisjointSlice<i32>) {\n"
    "    let s = SharedArray::<i32, 1024>::new();\n"
    "    let t = thread::thread_idx_x() as usize;\n"
    "    s[t] = x[thread::block_idx_x() as usize * 1024 + t];\n"
    "    sync_threads();\n"
    "    let mut stride = 512usize;\n"
    "    while stride > 0 {\n"
    "        if t < stride { s[t] = s[t] + s[t + stride]; }\n"
    "        sync_threads();\n"
    "        stride = stride / 2;\n"
    "    }\n"
    "    let b = thread::index_block();\n"
    "    if let Some(o) = sums.get_mut(b) { *o = s[0]; }\n"
    "}\n"
    /* each lane gets its warp's sum twice: by an xor butterfly, and by a
     * shuffle_down tree whose lane 0 is broadcast */
    "#[kernel]\n"
    "fn warp_sum(x: &[i32], out: DisjointSlice<i32>) {\n"
    "    let i = thread::index_1d();\n"
    "    let v = x[i];\n"
    "    let mut a = v;\n"
    "    let mut d = v;\n"
    "    let mut k = 16u32;\n"
    "    while k > 0 {\n"
    "        a += warp::shuffle_xor(a, k);\n"
    "        d += warp::shuffle_down(d, k);\n"
    "        k = k / 2;\n"
    "    }\n"
    "    let total = warp::shuffle(d, 0);\n"
    "    if let Some(o) = out.get_mut(i) { *o = a + (total << 16); }\n"
    "}\n"
    /* ballot, all and any of the lanes' x > 50 */
    "#[kernel]\n"
    "fn vote(x: &[i32], out: DisjointSlice<u64>) {\n"
    "    let i = thread::index_1d();\n"
    "    let p = x[i] > 50;\n"
    "    let b = warp::ballot(p) as u64;\n"
    "    let all = warp::all(p) as u64;\n"
    "    let any = warp::any(p) as u64;\n"
    "    if let Some(o) = out.get_mut(i) { *o = b | (all << 32) | (any << 33); }\n"
    "}\n";

static const char *NAMES[KERNELS] = {"reverse", "tree_sum", "warp_sum", "vote"};
static const uint32_t BLOCK[KERNELS] = {128, 1024, 64, 96};
static ox_device dev;
static ox_kernel kernels[KERNELS];
static int launches[HOST_THREADS], bad[HOST_THREADS], failed[HOST_THREADS];

/* x's values are 0..99, which a round and a thread shift. */
static int32_t value(int id, int r, int i) { return (i * 7 + r * 13 + id * 31) % 100; }

/* Checks out (n elements of kernel k's output for x) on the host; the count
 * of wrong elements. */
static int verify(int k, const int32_t *x, const void *out, int n, uint32_t block) {
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    int base = i / (int)block * (int)block, t = i % (int)block, w = i / 32 * 32;
    if (k == 0) {
      wrong += ((const int32_t *)out)[i] != x[base + (int)block - 1 - t];
    } else if (k == 1) {
      if (t != 0) continue; /* one sum per block */
      int32_t s = 0;
      for (int j = 0; j < (int)block; j++) s += x[base + j];
      wrong += ((const int32_t *)out)[i / (int)block] != s;
    } else if (k == 2) {
      int32_t s = 0;
      for (int j = 0; j < 32; j++) s += x[w + j];
      wrong += ((const int32_t *)out)[i] != s + (s << 16);
    } else {
      uint32_t b = 0;
      for (int j = 0; j < 32; j++) b |= (uint32_t)(x[w + j] > 50) << j;
      uint64_t want = b | (uint64_t)(b == ~0u) << 32 | (uint64_t)(b != 0) << 33;
      wrong += ((const uint64_t *)out)[i] != want;
    }
  }
  return wrong;
}

static void *host_thread(void *arg) {
  int id = (int)(intptr_t)arg;
  ox_stream s = NULL;
  if (ox_stream_create(dev, &s) != OX_OK) {
    failed[id]++;
    return NULL;
  }
  for (int r = 0; r < ROUNDS; r++) {
    for (int kk = 0; kk < KERNELS; kk++) {
      int k = (kk + id) % KERNELS; /* the threads run different kernels at once */
      uint32_t block = BLOCK[k], blocks = 1 + (uint32_t)(r + id) % 4;
      int64_t n = (int64_t)block * blocks, nout = k == 1 ? blocks : n;
      int32_t *x = malloc(sizeof(int32_t) * (size_t)n);
      uint64_t *out = calloc((size_t)n, sizeof(uint64_t));
      for (int i = 0; i < n; i++) x[i] = value(id, r, i);
      ox_dtype ot = k == 3 ? OX_U64 : OX_I32;
      ox_tensor tx = NULL, to = NULL;
      ox_status st = ox_tensor_from_host(dev, s, OX_I32, 1, &n, x, sizeof(int32_t) * (size_t)n, &tx);
      if (st == OX_OK) st = ox_tensor_empty(dev, s, ot, 1, &nout, &to);
      ox_arg args[2] = {ox_arg_tensor(tx), ox_arg_tensor(to)};
      ox_launch_config cfg = {{blocks, 1, 1}, {block, 1, 1}};
      if (st == OX_OK) st = ox_launch(kernels[k], s, &cfg, args, 2);
      if (st == OX_OK) st = ox_tensor_to_host(to, s, out, (size_t)nout * ox_dtype_size(ot));
      if (st == OX_OK) {
        launches[id]++;
        int wrong = verify(k, x, out, (int)n, block);
        if (wrong && bad[id]++ < 3)
          fprintf(stderr, "thread %d round %d %s: %d wrong\n", id, r, NAMES[k], wrong);
      } else {
        fprintf(stderr, "thread %d round %d %s: %s\n", id, r, NAMES[k], ox_last_error());
        failed[id]++;
      }
      ox_tensor_release(tx);
      ox_tensor_release(to);
      free(x);
      free(out);
    }
  }
  if (ox_stream_synchronize(s) != OX_OK) failed[id]++;
  ox_stream_destroy(s);
  return NULL;
}

int main(void) {
  /* One pool worker, whatever the cores: each OS thread then runs enough GPU
   * threads to have overflowed TSan's shadow stack before the fix. */
  setenv("OXIDE_CPU_THREADS", "2", 0);
  CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &dev));
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(dev, SRC, NULL, &m));
  for (int k = 0; k < KERNELS; k++) CHECK_OK(ox_module_get_kernel(m, NAMES[k], &kernels[k]));
  if (test_failures) return test_done("tsan_fiber_test");
  pthread_t th[HOST_THREADS];
  for (int i = 0; i < HOST_THREADS; i++)
    CHECK(pthread_create(&th[i], NULL, host_thread, (void *)(intptr_t)i) == 0, "pthread_create");
  int total = 0;
  for (int i = 0; i < HOST_THREADS; i++) {
    pthread_join(th[i], NULL);
    total += launches[i];
    CHECK(failed[i] == 0, "host thread %d: %d calls failed", i, failed[i]);
    CHECK(bad[i] == 0, "host thread %d: %d launches gave wrong results", i, bad[i]);
  }
  CHECK(total == HOST_THREADS * ROUNDS * KERNELS, "%d launches ran", total);
  printf("%d launches of barrier, shuffle and vote kernels from %d threads\n", total,
         HOST_THREADS);
  ox_module_destroy(m);
  return test_done("tsan_fiber_test");
}
