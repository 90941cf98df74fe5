/* oom_test - out of memory during a compile is an error, never an abort
 * (base.h: protected regions; backend/emit.c: memory for LLVM). For each of
 * a shrinking series of address-space limits (RLIMIT_AS, from 1 GiB above
 * what the process maps down to 64 KiB), a child process sets the limit and
 * runs three steps: a SIMT kernel compiled (through the cache) and launched
 * on the CPU, a tile kernel specialized, lowered for the CPU and launched,
 * and a tile matmul emitted as PTX for sm_90 (wgmma). Each step must end in
 * OX_OK (with right results) or OX_ERR_OUT_OF_MEMORY with a message; a
 * child killed by a signal (an abort) fails the test. The child then lifts
 * the limit and runs the steps again, reusing what it made: all must be OK
 * (no lock left held, nothing half made). The largest limit must give OK
 * everywhere, every step must fail with OX_ERR_OUT_OF_MEMORY somewhere, and
 * some compile must have been unwound by a failed allocation (not only
 * stopped by the check before LLVM).
 * A failure of the test's own allocations (host arrays, tensors) skips the
 * step. Sanitizers map terabytes of shadow memory, so under them the test
 * skips itself. OXIDE_TEST_VERBOSE=1 shows each child's messages. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define SANITIZED 1
#endif
#endif

enum { OUT_OK, OUT_OOM, OUT_SKIP, OUT_BAD, NOUT };
static const char *const out_names[NOUT] = {"ok", "oom", "skip", "BAD"};
enum { STEP_SIMT, STEP_TILE, STEP_PTX, NSTEPS };
static const char *const step_names[NSTEPS] = {"simt", "tile", "ptx"};

static ox_device dev;

/* Writes to fd without stdio (whose buffers need memory the child may lack). */
static void say(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(int fd, const char *fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof buf - 1)
    n = (int)sizeof buf - 1;
  if (n > 0 && write(fd, buf, (size_t)n) < 0)
    return;
}

/* Where the last OOM came from, by its message: an allocation that unwound a
 * compile, the check before LLVM, or elsewhere (a tensor, the runtime). */
enum { WHERE_UNWIND, WHERE_LLVM, WHERE_OTHER, NWHERE };
static const char *const where_names[NWHERE] = {"unwound", "before LLVM", "elsewhere"};
static int where;

/* The outcome of a library call: OK, or OOM with a message; else BAD. */
static int outcome(const char *what, ox_status s) {
  if (s == OX_OK)
    return OUT_OK;
  if (s == OX_ERR_OUT_OF_MEMORY && ox_last_error()[0]) {
    const char *m = ox_last_error();
    where = strstr(m, "failed while compiling") ? WHERE_UNWIND : strstr(m, "for LLVM") ? WHERE_LLVM : WHERE_OTHER;
    return OUT_OOM;
  }
  say(2, "%s returned %s with the message \"%s\"\n", what, ox_status_name(s), ox_last_error());
  return OUT_BAD;
}

/* A step's tensor allocation: out of memory there skips the step. */
#define ALLOC(call)                                                                                          \
  do {                                                                                                       \
    ox_status s_ = (call);                                                                                   \
    if (s_ == OX_ERR_OUT_OF_MEMORY) {                                                                        \
      r = OUT_SKIP;                                                                                          \
      goto done;                                                                                             \
    }                                                                                                        \
    if ((r = outcome(#call, s_)) != OUT_OK)                                                                  \
      goto done;                                                                                             \
  } while (0)

/* A library call of the step under test. */
#define RUN(call)                                                                                            \
  do {                                                                                                       \
    if ((r = outcome(#call, (call))) != OUT_OK)                                                              \
      goto done;                                                                                             \
  } while (0)

/* ---- step 1: a SIMT kernel through the cache (a source of its own per
 * child, so that code generation runs once, then the cache serves it) */
static char simt_src[512];
static ox_module simt_mod;

static int step_simt(void) {
  enum { N = 1000 };
  int r = OUT_OK;
  ox_tensor a = NULL, c = NULL;
  float *h = NULL;
  ox_kernel k = NULL;
  if (!simt_mod) {
    ox_compile_options o = {.filename = "oom_simt.oxk"};
    RUN(ox_module_compile(dev, simt_src, &o, &simt_mod));
  }
  RUN(ox_module_get_kernel(simt_mod, "twice", &k));
  if (!(h = malloc(sizeof(float) * N))) {
    r = OUT_SKIP;
    goto done;
  }
  for (int i = 0; i < N; i++)
    h[i] = (float)i;
  int64_t n = N;
  ALLOC(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, h, sizeof(float) * N, &a));
  ALLOC(ox_tensor_empty(dev, NULL, OX_F32, 1, &n, &c));
  ox_launch_config cfg = {{(N + 127) / 128, 1, 1}, {128, 1, 1}};
  ox_arg args[2] = {ox_arg_tensor(a), ox_arg_tensor(c)};
  RUN(ox_launch(k, NULL, &cfg, args, 2));
  ALLOC(ox_tensor_to_host(c, NULL, h, sizeof(float) * N));
  for (int i = 0; i < N && r == OUT_OK; i++)
    if (h[i] != 2.0f * (float)i) {
      say(2, "simt: c[%d] = %g, expected %g\n", i, (double)h[i], 2.0 * i);
      r = OUT_BAD;
    }
done:
  ox_tensor_release(a);
  ox_tensor_release(c);
  free(h);
  return r;
}

/* ---- step 2: a tile kernel, specialized at its first launch */
static const char *TILE_SRC =
    "#[tile]\n"
    "fn scale<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, s: f32) {\n"
    "    z.store(load_tile_like(x, z) * s + 1.0);\n"
    "}\n";
static ox_module tile_mod;

static int step_tile(void) {
  enum { N = 3000 };
  int r = OUT_OK;
  ox_tensor x = NULL, z = NULL, part = NULL;
  float *h = NULL;
  ox_kernel k = NULL;
  if (!tile_mod) {
    ox_compile_options o = {.filename = "oom_tile.oxk", .no_cache = 1};
    RUN(ox_module_compile(dev, TILE_SRC, &o, &tile_mod));
  }
  RUN(ox_module_get_kernel(tile_mod, "scale", &k));
  if (!(h = malloc(sizeof(float) * N))) {
    r = OUT_SKIP;
    goto done;
  }
  for (int i = 0; i < N; i++)
    h[i] = (float)(i % 101);
  int64_t n = N, tile = 256;
  ALLOC(ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, h, sizeof(float) * N, &x));
  ALLOC(ox_tensor_empty(dev, NULL, OX_F32, 1, &n, &z));
  ALLOC(ox_tensor_partition(z, 1, &tile, &part));
  ox_arg args[3] = {ox_arg_tensor(part), ox_arg_tensor(x), ox_arg_f32(3.0f)};
  RUN(ox_launch(k, NULL, NULL, args, 3));
  ALLOC(ox_tensor_to_host(z, NULL, h, sizeof(float) * N));
  for (int i = 0; i < N && r == OUT_OK; i++)
    if (h[i] != (float)(i % 101) * 3.0f + 1.0f) {
      say(2, "tile: z[%d] = %g, expected %g\n", i, (double)h[i], (i % 101) * 3.0 + 1.0);
      r = OUT_BAD;
    }
done:
  ox_tensor_release(part);
  ox_tensor_release(x);
  ox_tensor_release(z);
  free(h);
  return r;
}

/* ---- step 3: PTX of a tile matmul on sm_90's wgmma */
static const char *MATMUL_SRC =
    "#[tile]\n"
    "fn matmul<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>,\n"
    "        a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
    "    let pa = a.partition([BM, BK]);\n"
    "    let pb = b.partition([BK, BN]);\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + (BK as usize) - 1) / (BK as usize) {\n"
    "        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc);\n"
    "}\n";

static int step_ptx(void) {
  const ox_generic_value gen[3] = {{"BM", 128}, {"BN", 128}, {"BK", 64}};
  ox_compile_options o = {.size = sizeof o, .filename = "oom_matmul.oxk", .sm = 90, .generics = gen,
                          .num_generics = 3};
  char *ptx = NULL;
  int r = outcome("ox_emit(PTX)", ox_emit(MATMUL_SRC, &o, OX_TARGET_CUDA, OX_EMIT_PTX, &ptx));
  if (r == OUT_OK && (!ptx || !strstr(ptx, "wgmma.mma_async"))) {
    say(2, "ptx: no wgmma in the PTX\n");
    r = OUT_BAD;
  }
  ox_free(ptx);
  return r;
}

static int (*const steps[NSTEPS])(void) = {step_simt, step_tile, step_ptx};

static long mapped_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = -1;
  if (f && fscanf(f, "%ld", &pages) != 1)
    pages = -1;
  if (f)
    fclose(f);
  return pages < 0 ? -1 : pages * sysconf(_SC_PAGESIZE);
}

/* The child: the steps under a limit of `headroom` bytes above what it maps
 * now, then again without it. Prints "R <phase> <step> <outcome>" lines. */
static void child(long headroom, int id) {
  alarm(300); /* a hang fails too */
  snprintf(simt_src, sizeof simt_src,
           "// oom_test child %d\n"
           "#[kernel]\n"
           "fn twice(a: &[f32], c: DisjointSlice<f32>) {\n"
           "    let i = thread::index_1d();\n"
           "    if let Some(out) = c.get_mut(i) { *out = a[i] * 2.0; }\n"
           "}\n",
           id);
  long now = mapped_bytes();
  struct rlimit old, rl;
  if (now < 0 || getrlimit(RLIMIT_AS, &old) != 0)
    _exit(2);
  rl = old;
  rl.rlim_cur = (rlim_t)(now + headroom);
  if (old.rlim_max != RLIM_INFINITY && rl.rlim_cur > old.rlim_max)
    rl.rlim_cur = old.rlim_max;
  if (setrlimit(RLIMIT_AS, &rl) != 0)
    _exit(2);
  int bad = 0;
  for (int phase = 0; phase < 2; phase++) {
    if (phase == 1 && setrlimit(RLIMIT_AS, &old) != 0)
      _exit(2);
    for (int i = 0; i < NSTEPS; i++) {
      ox_clear_error();
      int r = steps[i]();
      /* without the limit, what failed under it must work now */
      if (phase == 1 && r != OUT_OK) {
        say(2, "step %s without the limit: %s\n", step_names[i], out_names[r]);
        r = OUT_BAD;
      }
      bad |= r == OUT_BAD;
      say(1, "R %d %d %d %d\n", phase, i, r, r == OUT_OOM ? where : 0);
      if (r == OUT_OOM && phase == 0)
        say(1, "  %s: %s\n", step_names[i], ox_last_error());
    }
  }
  exit(bad ? 1 : 0);
}

/* Runs one child; adds its outcomes under the limit to counts[step][outcome]
 * (got[step] = its outcome); false when it failed. */
static bool run_child(long headroom, int id, int counts[NSTEPS][NOUT], int wheres[NSTEPS][NWHERE], int got[NSTEPS]) {
  int fds[2];
  if (pipe(fds) != 0)
    return false;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0)
    return false;
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 1);
    dup2(fds[1], 2);
    close(fds[1]);
    child(headroom, id);
  }
  close(fds[1]);
  static char out[1 << 16];
  size_t n = 0;
  ssize_t k;
  while ((k = read(fds[0], out + n, sizeof out - 1 - n)) > 0 || (k < 0 && errno == EINTR))
    n += k > 0 ? (size_t)k : 0;
  out[n] = 0;
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  int seen = 0;
  for (int i = 0; i < NSTEPS; i++)
    got[i] = -1;
  for (const char *p = out; (p = strstr(p, "R ")); p++) {
    int phase, step, r, w;
    if ((p == out || p[-1] == '\n') && sscanf(p, "R %d %d %d %d", &phase, &step, &r, &w) == 4 && step >= 0 &&
        step < NSTEPS && r >= 0 && r < NOUT && w >= 0 && w < NWHERE) {
      seen++;
      if (phase == 0) {
        counts[step][r]++;
        wheres[step][w] += r == OUT_OOM;
        got[step] = r;
      }
    }
  }
  bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 && seen == 2 * NSTEPS;
  if (getenv("OXIDE_TEST_VERBOSE"))
    printf("%s", out);
  CHECK(ok, "limit %ld KiB above the mapped size: the child %s %d; its output:\n%s", headroom >> 10,
        WIFSIGNALED(status) ? "was killed by signal" : "exited with", WIFSIGNALED(status) ? WTERMSIG(status)
                                                                                           : WEXITSTATUS(status),
        out);
  return ok;
}

static void remove_dir(const char *path) {
  DIR *d = opendir(path);
  char p[4096];
  for (struct dirent *e; d && (e = readdir(d));)
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(p, sizeof p, "%s/%s", path, e->d_name);
      unlink(p);
    }
  if (d)
    closedir(d);
  rmdir(path);
}

int main(void) {
#ifdef SANITIZED
  printf("oom_test: skipped: built with a sanitizer, whose shadow memory does not fit under an "
         "address-space limit (RLIMIT_AS)\n");
  return 0;
#endif
  CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("oom_test");
  /* the cache in a directory of its own, which the children share */
  char dir[] = "/tmp/oxide-oom-test-XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp: %s", strerror(errno));
  setenv("OXIDE_CACHE_DIR", dir, 1);
  int counts[NSTEPS][NOUT] = {{0}}, wheres[NSTEPS][NWHERE] = {{0}}, got[NSTEPS];
  int id = 0;
  /* 1 GiB, then 3/4 of the last each time, down to 64 KiB */
  for (long h = 1L << 30; h >= 1L << 16; h = h / 4 * 3, id++) {
    bool ok = run_child(h, id, counts, wheres, got);
    printf("headroom %7ld KiB:", h >> 10);
    for (int i = 0; i < NSTEPS; i++)
      printf(" %s %s", step_names[i], got[i] >= 0 ? out_names[got[i]] : "-");
    printf("%s\n", ok ? "" : "  FAILED");
    if (id == 0)
      for (int i = 0; i < NSTEPS; i++)
        CHECK(got[i] == OUT_OK, "step %s under the largest limit (1 GiB more): %s", step_names[i],
              got[i] >= 0 ? out_names[got[i]] : "no result");
  }
  int unwound = 0;
  for (int i = 0; i < NSTEPS; i++) {
    printf("%s: %d ok, %d out of memory (%d %s, %d %s, %d %s), %d skipped\n", step_names[i], counts[i][OUT_OK],
           counts[i][OUT_OOM], wheres[i][0], where_names[0], wheres[i][1], where_names[1], wheres[i][2],
           where_names[2], counts[i][OUT_SKIP]);
    CHECK(counts[i][OUT_OOM] > 0, "step %s never ran out of memory: the limits did not reach it", step_names[i]);
    unwound += wheres[i][WHERE_UNWIND];
  }
  CHECK(unwound > 0, "no compile was unwound by a failed allocation: the limits did not reach one");
  remove_dir(dir);
  return test_done("oom_test");
}
