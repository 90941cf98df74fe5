/*
 * cpu_exec_test.c - the CPU executor (core/runtime/cpu.c) driven directly with
 * hand-written C kernels: block indices, barriers, warp shuffles and votes
 * (full and partial warps), early returns, deadlock release, big blocks, many
 * blocks, concurrent launches, fork, and launch validation.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime.h"

static int failures;
#define CHECK(cond, ...)                                                  \
  do {                                                                    \
    if (!(cond)) {                                                        \
      fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                       \
      fprintf(stderr, "\n");                                              \
      failures++;                                                         \
    }                                                                     \
  } while (0)

enum { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR };
enum { VOTE_ALL, VOTE_ANY, VOTE_BALLOT };

static ox_status launch(oxr_cpu_block_fn bf, oxr_cpu_thread_fn tf, uint32_t shared, uint32_t gx,
                        uint32_t gy, uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz,
                        void **args) {
  oxr_cpu_kernel k = {.block_fn = bf, .thread_fn = tf, .shared_bytes = shared};
  uint32_t grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
  return oxr_cpu_launch(&k, grid, block, args, NULL, 0, NULL);
}

static uint32_t linear_block(const oxr_cpu_ctx *c) {
  return c->block_idx[0] + c->grid_dim[0] * (c->block_idx[1] + c->grid_dim[1] * c->block_idx[2]);
}
static uint32_t linear_thread(const oxr_cpu_ctx *c, uint32_t tx, uint32_t ty, uint32_t tz) {
  return tx + c->block_dim[0] * (ty + c->block_dim[1] * tz);
}
static uint32_t block_threads(const oxr_cpu_ctx *c) {
  return c->block_dim[0] * c->block_dim[1] * c->block_dim[2];
}

/* ---- block_fn: every block of a 3-D grid once, with the right indices; the
 * error record and tag are passed through. */
static oxr_errrec g_err;
static _Atomic int g_bad;

static void k_blocks(oxr_cpu_ctx *c, void **args) {
  _Atomic int *hits = args[0];
  if (c->grid_dim[0] != 5 || c->grid_dim[1] != 4 || c->grid_dim[2] != 3 || c->block_dim[0] != 2 ||
      c->block_dim[1] != 3 || c->block_dim[2] != 4 || c->err != &g_err || c->tag != 77 ||
      c->shared == NULL || ((uintptr_t)c->shared & 15) != 0)
    atomic_fetch_add(&g_bad, 1);
  if (c->block_idx[0] >= 5 || c->block_idx[1] >= 4 || c->block_idx[2] >= 3)
    atomic_fetch_add(&g_bad, 1);
  else
    atomic_fetch_add(&hits[linear_block(c)], 1);
  if (linear_block(c) == 17 && c->err->flag == 0) c->err->flag = 1, c->err->tag = c->tag;
}

static void test_block_fn(void) {
  _Atomic int hits[60] = {0};
  void *args[] = {hits};
  oxr_cpu_kernel k = {.block_fn = k_blocks, .shared_bytes = 100};
  uint32_t grid[3] = {5, 4, 3}, block[3] = {2, 3, 4};
  CHECK(oxr_cpu_launch(&k, grid, block, args, &g_err, 77, NULL) == OX_OK, "%s", ox_last_error());
  for (int i = 0; i < 60; i++) CHECK(hits[i] == 1, "block %d ran %d times", i, hits[i]);
  CHECK(g_bad == 0, "bad indices/ctx seen %d times", g_bad);
  CHECK(g_err.flag == 1 && g_err.tag == 77, "error record not passed through");
}

/* ---- thread_fn: shared-memory tree reduction with barriers. */
static void k_reduce(oxr_cpu_ctx *c, void **args, uint32_t tx, uint32_t ty, uint32_t tz) {
  uint64_t *sm = (uint64_t *)c->shared, *out = args[0];
  uint32_t t = linear_thread(c, tx, ty, tz), n = block_threads(c), b = linear_block(c);
  sm[t] = (uint64_t)b * 100000 + t * t + 1;
  c->barrier(c);
  for (uint32_t s = n / 2; s > 0; s /= 2) {
    if (t < s) sm[t] += sm[t + s];
    c->barrier(c);
  }
  if (t == 0) out[b] = sm[0];
}

static uint64_t reduce_expect(uint32_t b, uint32_t n) {
  uint64_t sum = 0;
  for (uint32_t t = 0; t < n; t++) sum += (uint64_t)b * 100000 + t * t + 1;
  return sum;
}

static void test_reduce(uint32_t nblocks, uint32_t bx, uint32_t by) {
  uint32_t n = bx * by;
  uint64_t *out = calloc(nblocks, sizeof *out);
  void *args[] = {out};
  uint64_t t0 = oxb_now_ns();
  CHECK(launch(NULL, k_reduce, n * 8, nblocks, 1, 1, bx, by, 1, args) == OX_OK, "%s",
        ox_last_error());
  double ms = (double)(oxb_now_ns() - t0) / 1e6;
  for (uint32_t b = 0; b < nblocks; b++)
    CHECK(out[b] == reduce_expect(b, n), "reduce %u threads: block %u sum %llu, want %llu", n, b,
          (unsigned long long)out[b], (unsigned long long)reduce_expect(b, n));
  printf("reduce: %u blocks x %u threads: %.1f ms\n", nblocks, n, ms);
  free(out);
}

/* ---- warp shuffle reductions: down with a guard for partial warps, and xor. */
static void k_warp_sum(oxr_cpu_ctx *c, void **args, uint32_t tx, uint32_t ty, uint32_t tz) {
  uint64_t *out = args[0];
  uint32_t t = linear_thread(c, tx, ty, tz), n = block_threads(c), lane = c->lane(c);
  uint32_t width = n - t / 32 * 32 < 32 ? n - t / 32 * 32 : 32; /* lanes of this warp */
  uint64_t v = t + 1, x = t + 1;
  for (uint32_t off = 16; off > 0; off /= 2) {
    uint64_t o = c->shfl(c, v, off, SHFL_DOWN);
    if (lane + off < width) v += o;
  }
  if (width == 32)
    for (uint32_t m = 1; m < 32; m *= 2) x += c->shfl(c, x, m, SHFL_XOR);
  uint32_t b = linear_block(c), warps = (n + 31) / 32;
  if (lane == 0) out[2 * (b * warps + t / 32)] = v;
  if (lane == 5 && width == 32) out[2 * (b * warps + t / 32) + 1] = x;
}

static void test_warp_sum(uint32_t nblocks, uint32_t n) {
  uint32_t warps = (n + 31) / 32;
  uint64_t *out = calloc(2 * nblocks * warps, sizeof *out);
  void *args[] = {out};
  CHECK(launch(NULL, k_warp_sum, 0, nblocks, 1, 1, n, 1, 1, args) == OX_OK, "%s", ox_last_error());
  for (uint32_t b = 0; b < nblocks; b++)
    for (uint32_t w = 0; w < warps; w++) {
      uint64_t want = 0;
      uint32_t hi = (w + 1) * 32 < n ? (w + 1) * 32 : n;
      for (uint32_t t = w * 32; t < hi; t++) want += t + 1;
      CHECK(out[2 * (b * warps + w)] == want, "block %u of %u threads, warp %u: down sum %llu, want %llu",
            b, n, w, (unsigned long long)out[2 * (b * warps + w)], (unsigned long long)want);
      if (hi - w * 32 == 32)
        CHECK(out[2 * (b * warps + w) + 1] == want, "warp %u: xor sum %llu, want %llu", w,
              (unsigned long long)out[2 * (b * warps + w) + 1], (unsigned long long)want);
    }
  free(out);
}

/* ---- every shuffle mode against the rule: source lane as CUDA computes it
 * (only bits 4:0 of the argument count, as in PTX); an absent source lane
 * gives the caller's own value. Plus votes. out[t*8 + i]. */
static void k_modes(oxr_cpu_ctx *c, void **args, uint32_t tx, uint32_t ty, uint32_t tz) {
  uint64_t *out = args[0];
  uint32_t t = linear_thread(c, tx, ty, tz), lane = c->lane(c);
  uint64_t v = 1000 + t;
  uint64_t *o = out + 8 * (linear_block(c) * block_threads(c) + t);
  o[0] = c->shfl(c, v, lane * 7 + 3 + 32, SHFL_IDX);
  o[1] = c->shfl(c, v, 3, SHFL_UP);
  o[2] = c->shfl(c, v, 5, SHFL_DOWN);
  o[3] = c->shfl(c, v, 9, SHFL_XOR);
  o[4] = c->shfl(c, v, 33, SHFL_DOWN); /* as down by 1 */
  o[5] = c->vote(c, lane % 3 == 0, VOTE_BALLOT);
  o[6] = c->vote(c, lane % 3 == 0, VOTE_ALL);
  o[6] |= c->vote(c, 1, VOTE_ALL) << 1;
  o[6] |= c->vote(c, lane == 7, VOTE_ANY) << 2;
  o[6] |= c->vote(c, 0, VOTE_ANY) << 3;
  o[7] = lane == t % 32;
}

static void test_modes(uint32_t n) {
  uint64_t *out = calloc(8 * 2 * n, sizeof *out);
  void *args[] = {out};
  CHECK(launch(NULL, k_modes, 0, 2, 1, 1, n, 1, 1, args) == OX_OK, "%s", ox_last_error());
  for (uint32_t b = 0; b < 2; b++)
    for (uint32_t t = 0; t < n; t++) {
      uint64_t *o = out + 8 * (b * n + t);
      uint32_t lane = t % 32, base = t - lane, width = n - base < 32 ? n - base : 32;
#define SRC(s) ((s) < width ? 1000 + base + (s) : 1000 + t)
      uint32_t ballot = 0;
      for (uint32_t l = 0; l < width; l++) ballot |= (l % 3 == 0) << l;
      uint64_t want[8] = {SRC((lane * 7 + 3) % 32),
                          lane >= 3 ? SRC(lane - 3) : 1000 + t,
                          SRC(lane + 5),
                          SRC(lane ^ 9),
                          SRC(lane + 1),
                          ballot,
                          (width == 1) | 1 << 1 | (width > 7) << 2,
                          1};
#undef SRC
      for (int i = 0; i < 8; i++)
        CHECK(o[i] == want[i], "block of %u, thread %u, op %d: %llu, want %llu", n, t, i,
              (unsigned long long)o[i], (unsigned long long)want[i]);
    }
  free(out);
}

/* ---- early returns: half the threads return before the barriers. */
static void k_early(oxr_cpu_ctx *c, void **args, uint32_t tx, uint32_t ty, uint32_t tz) {
  uint64_t *sm = (uint64_t *)c->shared, *out = args[0];
  uint32_t t = linear_thread(c, tx, ty, tz), n = block_threads(c);
  if (t % 2 == 1) return; /* odd threads leave at once */
  sm[t / 2] = t;
  c->barrier(c);
  if (t >= n / 2) return; /* more leave between barriers */
  c->barrier(c);
  if (t == 0) {
    uint64_t s = 0;
    for (uint32_t i = 0; i < n / 2; i++) s += sm[i];
    out[linear_block(c)] = s;
  }
  c->barrier(c);
}

static void test_early_exit(void) {
  uint64_t out[7] = {0};
  void *args[] = {out};
  CHECK(launch(NULL, k_early, 64 * 8, 7, 1, 1, 128, 1, 1, args) == OX_OK, "%s", ox_last_error());
  for (int b = 0; b < 7; b++) CHECK(out[b] == 64 * 63, "early exit: block %d sum %llu", b, (unsigned long long)out[b]);
}

/* ---- incorrect programs must not hang: lanes of a warp that returned, and
 * lanes waiting at a shuffle while the rest of their warp waits at the barrier. */
static void k_deadlock(oxr_cpu_ctx *c, void **args, uint32_t tx, uint32_t ty, uint32_t tz) {
  uint64_t *out = args[0];
  uint32_t t = linear_thread(c, tx, ty, tz), lane = c->lane(c);
  if (t >= 48) return; /* warp 1: lanes 16..31 leave */
  uint64_t a = c->shfl(c, t, 1, SHFL_DOWN); /* warp 1 completes with its 16 lanes */
  uint64_t b = lane < 8 ? c->shfl(c, t, 1, SHFL_DOWN) : 0; /* the rest go to the barrier */
  c->barrier(c);
  out[t] = a << 32 | b;
}

static void test_deadlock(void) {
  uint64_t out[64];
  memset(out, 0xff, sizeof out);
  void *args[] = {out};
  CHECK(launch(NULL, k_deadlock, 0, 3, 1, 1, 64, 1, 1, args) == OX_OK, "%s", ox_last_error());
  for (uint32_t t = 0; t < 48; t++) {
    uint32_t lane = t % 32, last = t < 32 ? 31 : 15;
    uint64_t a = lane < last ? t + 1 : t;
    /* Released with only lanes 0..7 present: lane 7's source is absent. */
    uint64_t b = lane < 8 ? (lane < 7 ? t + 1 : t) : 0;
    CHECK(out[t] == (a << 32 | b), "deadlock release: thread %u got %llx, want %llx", t,
          (unsigned long long)out[t], (unsigned long long)(a << 32 | b));
  }
}

/* ---- thread indices in 3-D blocks; many blocks spread over the workers. */
static _Atomic uint64_t g_count;
static void k_count(oxr_cpu_ctx *c, void **args, uint32_t tx, uint32_t ty, uint32_t tz) {
  uint32_t *seen = args[0];
  uint32_t t = linear_thread(c, tx, ty, tz), n = block_threads(c);
  if (tx >= c->block_dim[0] || ty >= c->block_dim[1] || tz >= c->block_dim[2] ||
      c->lane(c) != t % 32)
    atomic_fetch_add(&g_bad, 1);
  seen[linear_block(c) * n + t]++; /* each thread owns its slot */
  c->barrier(c);
  atomic_fetch_add(&g_count, 1);
}

static void k_count_blocks(oxr_cpu_ctx *c, void **args) {
  atomic_fetch_add(&g_count, block_threads(c));
}

static void test_many_blocks(void) {
  uint32_t nb = 1000, bx = 4, by = 4, bz = 4;
  uint32_t *seen = calloc(nb * 64, sizeof *seen);
  void *args[] = {seen};
  g_count = 0;
  g_bad = 0;
  CHECK(launch(NULL, k_count, 0, 10, 10, 10, bx, by, bz, args) == OX_OK, "%s", ox_last_error());
  CHECK(g_count == nb * 64, "thread count %llu", (unsigned long long)g_count);
  CHECK(g_bad == 0, "bad thread indices %d", g_bad);
  for (uint32_t i = 0; i < nb * 64; i++) CHECK(seen[i] == 1, "thread slot %u ran %u times", i, seen[i]);
  g_count = 0;
  CHECK(launch(k_count_blocks, NULL, 0, 1000, 1, 1, 1024, 1, 1, args) == OX_OK, "%s", ox_last_error());
  CHECK(g_count == 1000 * 1024, "block_fn count %llu", (unsigned long long)g_count);
  free(seen);
}

/* ---- a kernel with a sizeable frame on its fiber stack. */
static void k_stack(oxr_cpu_ctx *c, void **args, uint32_t tx, uint32_t ty, uint32_t tz) {
  volatile uint32_t buf[4096]; /* 16 KiB */
  for (uint32_t i = 0; i < 4096; i++) buf[i] = i ^ tx;
  c->barrier(c);
  uint64_t s = 0;
  for (uint32_t i = 0; i < 4096; i++) s += buf[i];
  ((uint64_t *)args[0])[tx] = s;
}

static void test_stack(void) {
  uint64_t out[256];
  void *args[] = {out};
  CHECK(launch(NULL, k_stack, 0, 1, 1, 1, 256, 1, 1, args) == OX_OK, "%s", ox_last_error());
  for (uint32_t t = 0; t < 256; t++) {
    uint64_t want = 0;
    for (uint32_t i = 0; i < 4096; i++) want += i ^ t;
    CHECK(out[t] == want, "stack test thread %u", t);
  }
}

/* ---- launches from several host threads at once. */
static void *host_thread(void *arg) {
  for (int i = 0; i < 10; i++) {
    uint64_t out[9] = {0};
    void *args[] = {out};
    if (launch(NULL, k_reduce, 64 * 8, 9, 1, 1, 64, 1, 1, args) != OX_OK) return "launch failed";
    for (uint32_t b = 0; b < 9; b++)
      if (out[b] != reduce_expect(b, 64)) return "wrong sum";
  }
  return NULL;
}

static void test_concurrent(void) {
  pthread_t th[4];
  for (int i = 0; i < 4; i++) pthread_create(&th[i], NULL, host_thread, NULL);
  for (int i = 0; i < 4; i++) {
    void *r;
    pthread_join(th[i], &r);
    CHECK(r == NULL, "host thread %d: %s", i, (const char *)r);
  }
}

/* ---- the child of a fork can still launch (the workers stay behind). */
static void test_fork(void) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    uint64_t out[5] = {0};
    void *args[] = {out};
    int ok = launch(NULL, k_reduce, 32 * 8, 5, 1, 1, 32, 1, 1, args) == OX_OK;
    for (uint32_t b = 0; b < 5; b++) ok &= out[b] == reduce_expect(b, 32);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "launch in a forked child failed");
}

static void test_validation(void) {
  oxr_cpu_kernel none = {0}, both = {.block_fn = k_count_blocks, .thread_fn = k_count};
  oxr_cpu_kernel ok = {.block_fn = k_count_blocks};
  uint32_t g[3] = {1, 1, 1}, b[3] = {1, 1, 1}, big[3] = {32, 32, 2}, zero[3] = {0, 1, 1};
  CHECK(oxr_cpu_launch(&none, g, b, NULL, NULL, 0, NULL) == OX_ERR_INVALID_ARGUMENT, "no function");
  CHECK(oxr_cpu_launch(&both, g, b, NULL, NULL, 0, NULL) == OX_ERR_INVALID_ARGUMENT, "two functions");
  CHECK(oxr_cpu_launch(&ok, g, big, NULL, NULL, 0, NULL) == OX_ERR_LAUNCH, "2048 threads");
  CHECK(oxr_cpu_launch(&ok, zero, b, NULL, NULL, 0, NULL) == OX_ERR_LAUNCH, "empty grid");
  CHECK(oxr_cpu_launch(&ok, g, zero, NULL, NULL, 0, NULL) == OX_ERR_LAUNCH, "empty block");
}

int main(void) {
  /* Several workers even on a one-core machine, unless the caller chose. */
  setenv("OXIDE_CPU_THREADS", "4", 0);
  printf("CPU threads: %d\n", oxr_cpu_threads());
  test_validation();
  test_block_fn();
  test_reduce(64, 256, 1);
  test_reduce(8, 32, 32); /* 1024 threads */
  test_reduce(1, 1, 1);
  test_warp_sum(5, 256);
  test_warp_sum(5, 48); /* partial warp of 16 lanes */
  test_warp_sum(3, 1);
  test_warp_sum(3, 1024);
  test_modes(64);
  test_modes(48);
  test_modes(7);
  test_modes(1);
  test_early_exit();
  test_deadlock();
  test_many_blocks();
  test_stack();
  test_concurrent();
  test_fork();
  if (failures) {
    printf("FAILED (%d checks)\n", failures);
    return 1;
  }
  printf("PASSED\n");
  return 0;
}
