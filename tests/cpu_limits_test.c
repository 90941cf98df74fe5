/*
 * cpu_limits_test.c - CPU kernels that cannot kill the process, and launches
 * that can be stopped (core/runtime/cpu.c, backend/target_cpu.c):
 *  - stacks: a kernel keeping 9,000 f64 values live across barriers (72 KiB
 *    of frame, more than the old fixed 64 KiB fiber stack), and a kernel
 *    without barriers with a big frame, run correctly; the measured need
 *    survives the compiled-kernel cache; a need above the limit is a compile
 *    error naming the kernel, and a launch error for a hand-made kernel;
 *  - concurrency: a launch on stream B completes while a launch on stream A
 *    is stuck in an endless loop;
 *  - cancellation: ox_stream_cancel from another thread and from a signal
 *    handler, of block kernels and of barrier kernels (fibers); the streams
 *    work afterwards; ox_cancel_on_sigint chains to the previous handler.
 * Internal: it reads the executor's per-kernel stack need and calls the
 * backend with a lower stack limit.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"
#include "check.h"

static ox_device dev;

static double now_s(void) { return (double)oxb_now_ns() / 1e9; }

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static ox_kernel kernel(ox_module *m, const char *src, const char *name) {
  ox_compile_options o = {.filename = "limits.oxk"};
  ox_kernel k = NULL;
  *m = NULL;
  CHECK_OK(ox_module_compile(dev, src, &o, m));
  if (*m)
    CHECK_OK(ox_module_get_kernel(*m, name, &k));
  return k;
}

static ox_tensor tensor_f64(int64_t n, const double *init) {
  ox_tensor t = NULL;
  if (init)
    CHECK_OK(ox_tensor_from_host(dev, NULL, OX_F64, 1, &n, init, (size_t)n * sizeof(double), &t));
  else
    CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F64, 1, &n, &t));
  return t;
}

/* ------------------------------------------------------------------ stacks */

/* A kernel that loads n values from a shared array and keeps them all live
 * until the end, where they are summed. The loads are unchecked (`unsafe`):
 * the compiler allows a kernel at most 256 bounds-checked accesses, and the
 * point here is the stack, not the checks. Every 64 loads, `sync` kernels pass a
 * barrier (the values are live across it: the barrier may change the shared
 * array, so they cannot be loaded again later), other kernels an atomic on
 * shared memory, which also pins the loads before it. (Groups keep LLVM's
 * instruction selection, quadratic in the loads between two such points,
 * fast.) Without a barrier, every thread fills the whole array (the same
 * values), as it cannot wait for the others. */
static char *live_values_kernel(const char *name, int n, bool sync) {
  oxb_str s = {0};
  oxb_str_addf(&s,
               "#[kernel]\n#[launch_contract(requires = (a.len() >= %d))]\n"
               "fn %s(a: &[f64], out: DisjointSlice<f64>) {\n"
               "  let sh = SharedArray::<f64, %d>::new();\n"
               "  let c = SharedArray::<u32, 1>::new();\n"
               "  let mut i = %s;\n"
               "  while i < %d { sh[i] = a[i]; i += %s; }\n",
               n, name, n, sync ? "thread::thread_idx_x() as usize" : "0usize", n,
               sync ? "thread::block_dim_x() as usize" : "1");
  const char *pin = sync ? "  sync_threads();\n" : "  c.atomic_add(0, 1u32);\n";
  for (int i = 0; i < n; i++) {
    if (i % 64 == 0)
      oxb_str_addf(&s, "%s", pin);
    oxb_str_addf(&s, "  let v%d = unsafe { sh[%d] };\n", i, i);
  }
  oxb_str_addf(&s, "%s", pin);
  /* sums of 64, last values first: v0 is needed last */
  for (int g = (n - 1) / 64 * 64; g >= 0; g -= 64) {
    oxb_str_addf(&s, "  let p%d = 0.0f64", g);
    for (int i = (g + 64 < n ? g + 64 : n) - 1; i >= g; i--)
      oxb_str_addf(&s, " + v%d", i);
    oxb_str_addf(&s, ";\n");
  }
  oxb_str_addf(&s, "  let mut s = 0.0f64;\n");
  for (int g = (n - 1) / 64 * 64; g >= 0; g -= 64)
    oxb_str_addf(&s, "  s += p%d;\n", g);
  oxb_str_addf(&s, "  if let Some(o) = out.get_mut(thread::index_1d()) { *o = s; }\n}\n");
  return oxb_str_take(&s);
}

/* Compiles and runs a live_values_kernel; returns its stack need. */
static uint32_t run_live_values(int n, bool sync, bool expect_cached) {
  char *src = live_values_kernel(sync ? "live_sync" : "live_block", n, sync);
  ox_module m;
  double t0 = now_s();
  ox_kernel k = kernel(&m, src, sync ? "live_sync" : "live_block");
  double secs = now_s() - t0;
  free(src);
  if (!k)
    return 0;
  CHECK(ox_module_from_cache(m) == expect_cached, "from cache: %d", ox_module_from_cache(m));
  double *h = malloc((size_t)n * sizeof *h);
  for (int i = 0; i < n; i++)
    h[i] = i + 1;
  const int threads = 64, blocks = 3;
  ox_tensor a = tensor_f64(n, h), out = tensor_f64(threads * blocks, NULL);
  ox_arg args[2] = {ox_arg_tensor(a), ox_arg_tensor(out)};
  ox_launch_config cfg = {{blocks, 1, 1}, {threads, 1, 1}};
  CHECK_OK(ox_launch(k, NULL, &cfg, args, 2));
  double r[64 * 3] = {0};
  CHECK_OK(ox_tensor_to_host(out, NULL, r, sizeof r));
  double want = (double)n * (n + 1) / 2;
  int bad = 0;
  for (int i = 0; i < threads * blocks; i++)
    bad += r[i] != want;
  CHECK(bad == 0, "%d wrong sums (r[0] = %.17g, want %.17g)", bad, r[0], want);
  uint32_t need = oxa_kernel_get("test", k)->cpu.stack_bytes;
  printf("%d live f64 values (%s): stack need %u bytes, compiled in %.1f s%s\n", n,
         sync ? "across barriers" : "no barrier", need, secs, expect_cached ? " (cache)" : "");
  ox_tensor_release(a);
  ox_tensor_release(out);
  free(h);
  ox_module_destroy(m);
  return need;
}

static void test_stacks(void) {
  /* The kernel (safe, 9,000 f64 values live across barriers: 72 KB of
   * spill slots, which overflowed the 64 KiB fiber stacks of old) is now
   * refused at compile time by the size limits, with a located error. */
  char *big = live_values_kernel("safe_9000", 9000, true);
  char *p;
  while ((p = strstr(big, "unsafe { ")) != NULL) { /* the safe form: checked reads */
    memmove(p, p + 9, strlen(p + 9) + 1);
    char *close = strstr(p, " }");
    memmove(close, close + 2, strlen(close + 2) + 1);
  }
  ox_module bm = NULL;
  ox_compile_options bo = {.filename = "safe_9000.oxk", .no_cache = 1};
  CHECK_ERR(ox_module_compile(dev, big, &bo, &bm), OX_ERR_COMPILE, "safe_9000.oxk:");
  free(big);
  /* Within the limits: 5,000 values. A kernel with barriers runs its threads in loops
   * (IR threads.c), which keep values live across a barrier per thread in the block's
   * shared memory, not on a stack (on fibers they took 40 KB of each fiber's stack). */
  uint32_t need = run_live_values(5000, true, false);
  CHECK(need < 5000 * 8, "stack need %u for 5,000 f64", need);
  /* no barrier: above what a block_fn may take of the caller's stack, so it
   * runs on a fiber of its own */
  need = run_live_values(3000, false, false);
  CHECK(need >= 3000 * 7 && need < 3000 * 8 + 8192, "stack need %u for 3,000 f64", need);
  /* again: from the cache, with the same need */
  uint32_t again = run_live_values(3000, false, true);
  CHECK(again == need, "from the cache: stack need %u, compiled %u", again, need);

  /* A small kernel needs little. */
  ox_module m;
  ox_kernel k = kernel(&m,
                       "#[kernel]\nfn small(out: DisjointSlice<f64>) {\n"
                       "  if let Some(o) = out.get_mut(thread::index_1d()) { *o = 1.0; }\n}\n",
                       "small");
  if (k)
    CHECK(oxa_kernel_get("test", k)->cpu.stack_bytes > 0 &&
              oxa_kernel_get("test", k)->cpu.stack_bytes < 1024,
          "small kernel: stack need %u", oxa_kernel_get("test", k)->cpu.stack_bytes);
  ox_module_destroy(m);

  /* Above the limit: a compile error naming the kernel and its line. The
   * backend is called with a limit of 1 KiB, as the real one (4 MiB) takes a
   * kernel too big to compile quickly. */
  char *src = live_values_kernel("too_big", 512, true);
  oxb_arena arena = {0};
  oxi_module irm;
  const oxf_program *prog;
  CHECK_OK(oxa_front(&arena, src, "big.oxk", &irm, NULL, &prog));
  oxl_options lo = {.target = OXL_CPU, .opt_level = 3, .cpu_stack_max = 1024};
  char *obj = NULL;
  size_t len = 0;
  CHECK_ERR(oxl_generate(&irm, &lo, OXL_OUT_OBJ, &obj, &len), OX_ERR_COMPILE,
            "KiB of stack per thread on the CPU, more than the 1 KiB the CPU executor allows");
  CHECK(strstr(ox_last_error(), "big.oxk:3:4: kernel 'too_big' needs ") != NULL, "located: %s",
        ox_last_error());
  CHECK(obj == NULL && len == 0, "output on failure");
  /* With the real limit it compiles, and the object carries its table. */
  lo.cpu_stack_max = 0;
  CHECK_OK(oxl_generate(&irm, &lo, OXL_OUT_OBJ, &obj, &len));
  oxl_jit *jit = NULL;
  if (obj) {
    CHECK(len > 16 && memcmp(obj + len - 8, "OXSTACK1", 8) == 0, "no stack table");
    CHECK_OK(oxl_jit_load(obj, len, &jit));
    uint32_t b = oxl_jit_stack_bytes(jit, "too_big.block"); /* (its threads in loops) */
    CHECK(b > 1024 && b < 512 * 8 * 4, "too_big.block needs %u", b);
    CHECK(oxl_jit_stack_bytes(jit, "nope") == 0, "unknown entry");
    oxl_jit_destroy(jit);
    /* an object without its table (or a damaged one) is refused cleanly */
    jit = NULL;
    CHECK_ERR(oxl_jit_load(obj, len - 16, &jit), OX_ERR_INTERNAL, "without its stack-size table");
    CHECK(jit == NULL, "jit on failure");
    memset(obj + len - 16, 0xff, 4); /* the record count */
    CHECK_ERR(oxl_jit_load(obj, len, &jit), OX_ERR_INTERNAL, "damaged stack-size table");
  }
  free(obj);
  free(src);
  oxb_arena_free(&arena);
}

/* ------------------------------------------------------------ cancellation */

/* Endless unless a[0] <= 0: x grows to 2^24 and stays (x + 1 == x). */
static const char *SPIN =
    "#[kernel]\n"
    "fn spin(a: &[f32], out: DisjointSlice<f32>) {\n"
    "    let mut x = 0.0f32;\n"
    "    while x >= 0.0 { x += a[0]; }\n"
    "    if let Some(o) = out.get_mut(thread::index_1d()) { *o = x; }\n"
    "}\n"
    "#[kernel]\n"
    "fn spin_sync(a: &[f32], out: DisjointSlice<f32>) {\n"
    "    let sh = SharedArray::<f32, 1>::new();\n"
    "    let mut x = 0.0f32;\n"
    "    while x >= 0.0 { x += a[0]; sync_threads(); sh[0] = x; }\n"
    "    if let Some(o) = out.get_mut(thread::index_1d()) { *o = x; }\n"
    "}\n"
    "#[kernel]\n"
    "fn fill(out: DisjointSlice<f32>, v: f32) {\n"
    "    if let Some(o) = out.get_mut(thread::index_1d()) { *o = v; }\n"
    "}\n";

static pthread_t g_main;
static ox_module g_mod;
static ox_kernel g_spin, g_spin_sync, g_fill;
static ox_tensor g_one, g_spin_out;

typedef struct launch_job {
  ox_kernel k;
  ox_stream s;
  uint32_t grid, block;
  _Atomic int done;
  ox_status status;
  char message[300];
} launch_job;

static void *launch_thread(void *p) {
  launch_job *j = p;
  ox_arg args[2] = {ox_arg_tensor(g_one), ox_arg_tensor(g_spin_out)};
  ox_launch_config cfg = {{j->grid, 1, 1}, {j->block, 1, 1}};
  j->status = ox_launch(j->k, j->s, &cfg, args, 2);
  snprintf(j->message, sizeof j->message, "%s", ox_last_error());
  if (!pthread_equal(pthread_self(), g_main))
    ox_clear_error(); /* the thread's message would leak when it exits */
  atomic_store(&j->done, 1);
  return NULL;
}

/* Fills n floats with v on stream s and checks them; returns the seconds it took. */
static double fill_and_check(ox_stream s, float v, int n) {
  int64_t len = n;
  ox_tensor t;
  CHECK_OK(ox_tensor_zeros(dev, s, OX_F32, 1, &len, &t));
  ox_arg args[2] = {ox_arg_tensor(t), ox_arg_f32(v)};
  ox_launch_config cfg = {{(uint32_t)(n + 127) / 128, 1, 1}, {128, 1, 1}};
  double t0 = now_s();
  CHECK_OK(ox_launch(g_fill, s, &cfg, args, 2));
  double secs = now_s() - t0;
  CHECK_OK(ox_stream_synchronize(s));
  float *h = malloc((size_t)n * sizeof *h);
  CHECK_OK(ox_tensor_to_host(t, s, h, (size_t)n * sizeof *h));
  int bad = 0;
  for (int i = 0; i < n; i++)
    bad += h[i] != v;
  CHECK(bad == 0, "fill %g: %d wrong", v, bad);
  free(h);
  ox_tensor_release(t);
  return secs;
}

/* Waits until the launch on s has started (the executor marks its stream). */
static bool wait_running(ox_stream h, launch_job *j) {
  oxr_stream *s = oxr_stream_get("test", h);
  for (int i = 0; i < 10000 && !atomic_load(&s->cpu_running) && !atomic_load(&j->done); i++)
    sleep_ms(1);
  return atomic_load(&s->cpu_running) != 0;
}

/* Waits (up to 20 s) for a launch thread to return; false if it did not. */
static bool wait_done(launch_job *j, double *secs) {
  double t0 = now_s();
  while (!atomic_load(&j->done) && now_s() - t0 < 20)
    sleep_ms(1);
  *secs = now_s() - t0;
  return atomic_load(&j->done);
}

/* (b) + (d): an endless launch on A does not hold up B; cancelling A ends it
 * with OX_ERR_CANCELLED; both streams work afterwards. */
static void test_cancel_from_thread(ox_kernel k, uint32_t grid, uint32_t block) {
  ox_stream a, b;
  CHECK_OK(ox_stream_create(dev, &a));
  CHECK_OK(ox_stream_create(dev, &b));
  launch_job j = {.k = k, .s = a, .grid = grid, .block = block};
  pthread_t th;
  pthread_create(&th, NULL, launch_thread, &j);
  CHECK(wait_running(a, &j), "the launch on A did not start");
  sleep_ms(50); /* let the workers get stuck in A's blocks */
  /* B runs while A spins, on B's launching thread at least */
  double secs = fill_and_check(b, 3.0f, 100000);
  CHECK(secs < 5, "a launch on B took %.2f s while A spins", secs);
  CHECK(!atomic_load(&j.done), "the endless launch on A returned: %s", j.message);
  /* a child forked now launches on A and B: the spinning launch stayed in
   * the parent, and does not hold up A in the child */
  if (k == g_spin) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
      alarm(20); /* a hang ends the child, and fails the check below */
      int before = test_failures;
      fill_and_check(a, 4.0f, 3000);
      fill_and_check(b, 4.5f, 3000);
      _exit(test_failures == before ? 0 : 1);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "launches in a child forked during a "
          "launch failed (status %d)", status);
  }
  /* a cancel of B (idle) changes nothing on A */
  CHECK_OK(ox_stream_cancel(b));
  sleep_ms(20);
  CHECK(!atomic_load(&j.done), "cancelling B ended A's launch");
  CHECK_OK(ox_stream_cancel(a));
  double waited;
  bool done = wait_done(&j, &waited);
  CHECK(done, "ox_stream_cancel did not end the launch");
  if (!done) {
    fprintf(stderr, "giving up: the launch thread is stuck\n");
    exit(1);
  }
  pthread_join(th, NULL);
  CHECK(j.status == OX_ERR_CANCELLED && strstr(j.message, "kernel '") && strstr(j.message, "was cancelled"),
        "%s: %s", ox_status_name(j.status), j.message);
  CHECK(waited < 2, "the cancel took %.2f s", waited);
  printf("%s: grid %u x %u cancelled in %.1f ms; B's launch meanwhile %.1f ms\n", ox_kernel_name(k),
         grid, block, waited * 1e3, secs * 1e3);
  /* the next launches on both streams work */
  fill_and_check(a, 5.0f, 5000);
  fill_and_check(b, 6.0f, 5000);
  CHECK_OK(ox_stream_synchronize(a));
  ox_stream_destroy(a);
  ox_stream_destroy(b);
}

/* (c): cancelled from a signal handler on the launching thread. */
static ox_stream g_sig_stream;
static _Atomic int g_sig_count;
static void on_alarm(int sig) {
  (void)sig;
  g_sig_count++;
  ox_stream_cancel(g_sig_stream);
}

static void test_cancel_from_signal(ox_kernel k, uint32_t grid, uint32_t block) {
  CHECK_OK(ox_stream_create(dev, &g_sig_stream));
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, &old);
  g_sig_count = 0;
  /* every 100 ms: a tick that comes before the launch starts is lost */
  struct itimerval it = {{0, 100000}, {0, 100000}}, off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_REAL, &it, NULL);
  ox_arg args[2] = {ox_arg_tensor(g_one), ox_arg_tensor(g_spin_out)};
  ox_launch_config cfg = {{grid, 1, 1}, {block, 1, 1}};
  double t0 = now_s();
  ox_status st = ox_launch(k, g_sig_stream, &cfg, args, 2);
  double secs = now_s() - t0;
  setitimer(ITIMER_REAL, &off, NULL);
  sigaction(SIGALRM, &old, NULL);
  CHECK_ERR(st, OX_ERR_CANCELLED, "was cancelled");
  CHECK(g_sig_count >= 1 && secs < 5, "%d signals, %.2f s", g_sig_count, secs);
  printf("%s: cancelled from a signal handler after %.1f ms\n", ox_kernel_name(k), secs * 1e3);
  fill_and_check(g_sig_stream, 7.0f, 1000);
  ox_stream_destroy(g_sig_stream);
}

/* ox_cancel_on_sigint: cancels, then chains to the handler before it. */
static _Atomic int g_prev_called;
static void prev_handler(int sig) {
  (void)sig;
  g_prev_called++;
}

/* a handler that passes SIGINT on to the one it replaced (Oxide's) */
static struct sigaction g_chained_to;
static _Atomic int g_chaining_called;
static void chaining_handler(int sig, siginfo_t *info, void *uc) {
  g_chaining_called++;
  if (g_chaining_called < 100) /* a guard for the test itself: a loop fails the check below */
    g_chained_to.sa_sigaction(sig, info, uc);
}

static void *send_sigint(void *p) {
  launch_job *j = p;
  wait_running(j->s, j);
  sleep_ms(20);
  kill(getpid(), SIGINT);
  return NULL;
}

static void test_sigint(void) {
  CHECK_ERR(ox_cancel_on_sigint(0), OX_ERR_INVALID_ARGUMENT, "without a matching");
  struct sigaction sa, old, cur;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = prev_handler;
  sigaction(SIGINT, &sa, &old);
  CHECK_OK(ox_cancel_on_sigint(1));
  CHECK_OK(ox_cancel_on_sigint(1)); /* counted */
  sigaction(SIGINT, NULL, &cur);
  CHECK((cur.sa_flags & SA_SIGINFO) && cur.sa_handler != prev_handler, "Oxide's handler not installed");

  ox_stream s;
  CHECK_OK(ox_stream_create(dev, &s));
  launch_job j = {.k = g_spin, .s = s, .grid = 4, .block = 32};
  pthread_t th;
  pthread_create(&th, NULL, send_sigint, &j);
  launch_thread(&j);
  pthread_join(th, NULL);
  CHECK(j.status == OX_ERR_CANCELLED, "%s: %s", ox_status_name(j.status), j.message);
  CHECK(g_prev_called == 1, "the previous handler ran %d times", g_prev_called);
  fill_and_check(s, 8.0f, 1000);
  ox_stream_destroy(s);

  CHECK_OK(ox_cancel_on_sigint(0));
  sigaction(SIGINT, NULL, &cur);
  CHECK(cur.sa_flags & SA_SIGINFO, "uninstalled too early");
  CHECK_OK(ox_cancel_on_sigint(0));
  sigaction(SIGINT, NULL, &cur);
  CHECK(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == prev_handler, "the previous handler is not back");
  CHECK_ERR(ox_cancel_on_sigint(0), OX_ERR_INVALID_ARGUMENT, "without a matching");

  /* SIGINT ignored: nothing is installed */
  sa.sa_handler = SIG_IGN;
  sigaction(SIGINT, &sa, NULL);
  CHECK_OK(ox_cancel_on_sigint(1));
  sigaction(SIGINT, NULL, &cur);
  CHECK(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_IGN, "installed over SIG_IGN");
  CHECK_OK(ox_cancel_on_sigint(0));
  /* replaced meanwhile: the replacement stays */
  sa.sa_handler = prev_handler;
  sigaction(SIGINT, &sa, NULL);
  CHECK_OK(ox_cancel_on_sigint(1));
  sa.sa_handler = SIG_DFL;
  sigaction(SIGINT, &sa, NULL);
  CHECK_OK(ox_cancel_on_sigint(0));
  sigaction(SIGINT, NULL, &cur);
  CHECK(!(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL, "a later handler was replaced");

  /* replaced while enabled: the next enabling call puts Oxide's back in front, and a
     replacement that passes the signal on to Oxide's (which then calls it) runs once,
     without the two calling each other for ever */
  sa.sa_handler = prev_handler;
  sigaction(SIGINT, &sa, NULL);
  CHECK_OK(ox_cancel_on_sigint(1));
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = chaining_handler;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGINT, &sa, &g_chained_to);
  CHECK((g_chained_to.sa_flags & SA_SIGINFO) && g_chained_to.sa_sigaction != chaining_handler, "not Oxide's");
  CHECK_OK(ox_cancel_on_sigint(1));
  sigaction(SIGINT, NULL, &cur);
  CHECK(cur.sa_sigaction == g_chained_to.sa_sigaction, "Oxide's handler not put back in front");
  g_chaining_called = 0;
  raise(SIGINT);
  CHECK(g_chaining_called == 1, "the replacement ran %d times", g_chaining_called);
  CHECK_OK(ox_cancel_on_sigint(0));
  CHECK_OK(ox_cancel_on_sigint(0));
  sigaction(SIGINT, &old, NULL);
}

static void test_cancel_args(void) {
  CHECK(ox_stream_cancel(NULL) == OX_ERR_INVALID_ARGUMENT, "NULL stream");
  ox_stream s;
  CHECK_OK(ox_device_stream(dev, &s));
  CHECK_OK(ox_stream_cancel(s)); /* nothing runs: no effect on what follows */
  fill_and_check(s, 2.0f, 1000);
  CHECK_OK(ox_stream_create(dev, &s));
  ox_stream_destroy(s);
  CHECK(ox_stream_cancel(s) == OX_ERR_INVALID_ARGUMENT, "destroyed stream");
  ox_device cuda;
  if (ox_device_get(OX_DEVICE_CUDA, 0, &cuda) == OX_OK) {
    CHECK_OK(ox_device_stream(cuda, &s));
    CHECK(ox_stream_cancel(s) == OX_ERR_UNSUPPORTED, "CUDA stream");
  }
  ox_clear_error();
}

/* A hand-made kernel that declares more than the limit is refused at launch. */
static void nop_block(oxr_cpu_ctx *c, void **args) { (void)c, (void)args; }
static void test_launch_limit(void) {
  oxr_cpu_kernel k = {.block_fn = nop_block, .stack_bytes = OXR_CPU_STACK_MAX + 1, .name = "huge"};
  uint32_t g[3] = {1, 1, 1};
  CHECK_ERR(oxr_cpu_launch(&k, g, g, NULL, NULL, 0, NULL), OX_ERR_LAUNCH,
            "CPU launch of kernel 'huge': it needs 4097 KiB of stack per thread, more than the "
            "4096 KiB the CPU executor allows");
  k.stack_bytes = OXR_CPU_STACK_MAX; /* at the limit: runs, on a fiber */
  CHECK_OK(oxr_cpu_launch(&k, g, g, NULL, NULL, 0, NULL));
}

int main(void) {
  /* Several workers even on a small machine, unless the caller chose. */
  setenv("OXIDE_CPU_THREADS", "4", 0);
  /* a fresh compiled-kernel cache: the first compiles are never cached */
  char dir[] = "/tmp/oxide-limits-test-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  setenv("OXIDE_CACHE_DIR", dir, 1);
  g_main = pthread_self();
  CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("cpu_limits_test");
  test_launch_limit();

  ox_compile_options o = {.filename = "spin.oxk"};
  CHECK_OK(ox_module_compile(dev, SPIN, &o, &g_mod));
  if (g_mod) {
    CHECK_OK(ox_module_get_kernel(g_mod, "spin", &g_spin));
    CHECK_OK(ox_module_get_kernel(g_mod, "spin_sync", &g_spin_sync));
    CHECK_OK(ox_module_get_kernel(g_mod, "fill", &g_fill));
    float one = 1.0f;
    int64_t n1 = 1, nout = 1024;
    CHECK_OK(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n1, &one, sizeof one, &g_one));
    CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, &nout, &g_spin_out));
    test_cancel_args();
    /* more blocks than workers: every worker gets stuck */
    test_cancel_from_thread(g_spin, 16, 64);
    test_cancel_from_thread(g_spin_sync, 16, 64);
    test_cancel_from_signal(g_spin, 8, 32);
    test_cancel_from_signal(g_spin_sync, 8, 32);
    test_sigint();
    ox_tensor_release(g_one);
    ox_tensor_release(g_spin_out);
    ox_module_destroy(g_mod);
  }
  test_stacks();
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0, "cleanup");
  return test_done("cpu_limits_test");
}
