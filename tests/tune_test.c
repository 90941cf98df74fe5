/* tune_test - candidate tile configurations measured at the first launch
 * (ox_kernel_set_candidates) on one device (argv[1]: "cpu" or "cuda"): the
 * choice gives the right result in outputs passed whole or partitioned in
 * other tiles, writes the user's outputs once (an atomic histogram counts one
 * launch, not the measurements), skips a candidate that does not compile, is
 * kept for the next process through the cache (a child process run twice),
 * survives candidates set while other threads launch, and bad candidates are
 * refused with clear errors. */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"

static ox_device dev;

static const char *SRC =
    "#[tile]\n"
    "fn mm<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<f32, [-1, -1]>,\n"
    "        b: &Tensor<f32, [-1, -1]>) {\n"
    "    let pa = a.partition([BM, BK]);\n"
    "    let pb = b.partition([BK, BN]);\n"
    "    let mut acc = full([BM, BN], 0.0f32);\n"
    "    for k in 0..(a.dim(1) + (BK as usize) - 1) / (BK as usize) {\n"
    "        acc = mma(pa.load([tile_id(0), k]), pb.load([k, tile_id(1)]), acc);\n"
    "    }\n"
    "    c.store(acc);\n"
    "}\n"
    "#[tile]\n"
    "fn hist<const B: i32>(g: &Tensor<Atomic<f32>, [-1]>, x: &Tensor<i32, [-1]>) {\n"
    "    g.atomic_add_at(x.partition([B]).load_padded([tile_id(0)], 0), 1.0);\n"
    "}\n";

#define CAND(name, ...) \
  static const ox_generic_value name[] = {__VA_ARGS__}
CAND(c64, {"BM", 64}, {"BN", 64}, {"BK", 32});
CAND(c32, {"BN", 32}, {"BM", 32}, {"BK", 16});
CAND(huge, {"BM", 1024}, {"BM", 1024}); /* "BM" twice */
CAND(toolarge, {"BM", 512}, {"BN", 1024}, {"BK", 16}); /* a tile no lowering takes */
CAND(three, {"BM", 48}, {"BN", 64}, {"BK", 16});
CAND(partial, {"BM", 64}, {"BN", 64});
CAND(unknown, {"BQ", 64});

static ox_module compile(void) {
  ox_compile_options o = {.filename = "tune.oxk"};
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(dev, SRC, &o, &m));
  return m;
}

static ox_tensor host(ox_dtype dt, int n, const int64_t *shape, const void *data, size_t bytes) {
  ox_tensor t = NULL;
  CHECK_OK(ox_tensor_from_host(dev, NULL, dt, n, shape, data, bytes, &t));
  return t;
}

/* C = A x B with candidates {toolarge, c64, c32}; `part`: C passed partitioned
 * in 16 x 16 tiles (else whole). Returns the number of wrong elements and
 * the tuned index before and after the launch. */
static int matmul(ox_kernel k, bool part, int *before, int *after) {
  const int64_t M = 100, N = 70, K = 45, sa[2] = {M, K}, sb[2] = {K, N}, sc[2] = {M, N}, t16[2] = {16, 16};
  float *a = malloc(sizeof(float) * M * K), *b = malloc(sizeof(float) * K * N), *c = malloc(sizeof(float) * M * N);
  for (int64_t i = 0; i < M * K; i++)
    a[i] = (float)((i * 7) % 13) - 6;
  for (int64_t i = 0; i < K * N; i++)
    b[i] = (float)((i * 5) % 11) - 5;
  ox_tensor ta = host(OX_F32, 2, sa, a, sizeof(float) * M * K), tb = host(OX_F32, 2, sb, b, sizeof(float) * K * N);
  ox_tensor tc = NULL, out = NULL;
  CHECK_OK(ox_tensor_full(dev, NULL, OX_F32, 2, sc, NAN, &tc));
  if (part)
    CHECK_OK(ox_tensor_partition(tc, 2, t16, &out));
  ox_arg args[3] = {ox_arg_tensor(part ? out : tc), ox_arg_tensor(ta), ox_arg_tensor(tb)};
  CHECK_OK(ox_kernel_tuned(k, args, 3, before));
  CHECK_OK(ox_launch(k, NULL, NULL, args, 3));
  CHECK_OK(ox_kernel_tuned(k, args, 3, after));
  CHECK_OK(ox_tensor_to_host(tc, NULL, c, sizeof(float) * M * N));
  int bad = 0;
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double want = 0;
      for (int64_t p = 0; p < K; p++)
        want += (double)a[i * K + p] * b[p * N + j];
      bad += c[i * N + j] != want; /* small integers: exact */
    }
  ox_tensor_release(out);
  ox_tensor_release(ta);
  ox_tensor_release(tb);
  ox_tensor_release(tc);
  free(a);
  free(b);
  free(c);
  return bad;
}

static void set_matmul_candidates(ox_kernel k) {
  const ox_tile_candidate cands[3] = {{toolarge, 3}, {c64, 3}, {c32, 3}};
  CHECK_OK(ox_kernel_set_candidates(k, cands, 3));
}

/* The child process: one tuned launch; prints the index before and after. */
static int child(void) {
  ox_module m = compile();
  ox_kernel k = NULL;
  CHECK_OK(ox_module_get_kernel(m, "mm", &k));
  set_matmul_candidates(k);
  int before = -2, after = -2, bad = matmul(k, false, &before, &after);
  printf("tuned %d %d %d\n", before, after, bad);
  ox_module_destroy(m);
  return test_failures != 0;
}

static void test_persistence(const char *self, const char *devname) {
  char dir[] = "/tmp/oxide-tune-XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  char cmd[512];
  snprintf(cmd, sizeof cmd, "OXIDE_CACHE_DIR=%s '%s' %s child", dir, self, devname);
  int got[2][3];
  for (int run = 0; run < 2; run++) {
    FILE *p = popen(cmd, "r");
    CHECK(p != NULL, "popen");
    int n = p ? fscanf(p, "tuned %d %d %d", &got[run][0], &got[run][1], &got[run][2]) : 0;
    int rc = p ? pclose(p) : -1;
    CHECK(n == 3 && rc == 0, "child run %d: %d fields, exit status %d", run, n, rc);
  }
  /* the first process measured (nothing chosen before, the second or third
     candidate after: the first does not compile); the second started with it */
  CHECK(got[0][0] == -1 && (got[0][1] == 1 || got[0][1] == 2) && got[0][2] == 0,
        "first process: tuned %d before, %d after, %d wrong", got[0][0], got[0][1], got[0][2]);
  CHECK(got[1][0] == got[0][1] && got[1][1] == got[0][1] && got[1][2] == 0,
        "second process: tuned %d before, %d after (first chose %d), %d wrong", got[1][0], got[1][1], got[0][1],
        got[1][2]);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0, "%s", cmd);
}

static void test_matmul(ox_kernel k) {
  set_matmul_candidates(k);
  int before, after;
  int bad = matmul(k, false, &before, &after);
  CHECK(bad == 0 && after >= 1, "whole output: %d wrong, tuned %d", bad, after);
  /* the same key (the output's tiles are all the candidates' to set): no new measurement */
  int b2, a2;
  bad = matmul(k, true, &b2, &a2);
  CHECK(bad == 0 && b2 == after && a2 == after, "partitioned output: %d wrong, tuned %d then %d (first %d)", bad,
        b2, a2, after);
}

static void test_hist(ox_kernel k) {
  const int64_t n = 1000, bins = 8, sx[1] = {n}, sg[1] = {bins};
  int32_t x[1000];
  for (int i = 0; i < n; i++)
    x[i] = (i * 3) % (int)bins;
  ox_tensor tx = host(OX_I32, 1, sx, x, sizeof x), tg = NULL;
  CHECK_OK(ox_tensor_full(dev, NULL, OX_F32, 1, sg, 0, &tg));
  static const ox_generic_value b64[] = {{"B", 64}}, b256[] = {{"B", 256}}, b128[] = {{"B", 128}};
  const ox_tile_candidate cands[3] = {{b64, 1}, {b256, 1}, {b128, 1}};
  CHECK_OK(ox_kernel_set_candidates(k, cands, 3));
  ox_launch_config cfg = {{16, 1, 1}, {0, 0, 0}}; /* no output partition: 16 blocks of B cover 1000 for B >= 64 */
  ox_arg args[2] = {ox_arg_tensor(tg), ox_arg_tensor(tx)};
  CHECK_OK(ox_launch(k, NULL, &cfg, args, 2));
  float g[8];
  CHECK_OK(ox_tensor_to_host(tg, NULL, g, sizeof g));
  /* padding reads 0: bin 0 also counts the padded elements of the grid's blocks */
  int idx = -1;
  CHECK_OK(ox_kernel_tuned(k, args, 2, &idx));
  int64_t B = idx == 0 ? 64 : idx == 1 ? 256 : 128, pad = 16 * B - n;
  int bad = 0;
  for (int i = 0; i < bins; i++) {
    int64_t want = n / bins + (i < n % bins) + (i == 0 ? pad : 0);
    bad += g[i] != (float)want;
  }
  CHECK(idx >= 0 && bad == 0, "histogram after a tuned launch (candidate %d): %d bins wrong (one launch's counts "
        "expected: the measurements add into scratch tensors)", idx, bad);
  ox_tensor_release(tx);
  ox_tensor_release(tg);
}

static void test_errors(ox_kernel k, ox_kernel hist) {
  const ox_tile_candidate dup[1] = {{huge, 2}}, odd[1] = {{three, 3}}, mixed[2] = {{c64, 3}, {partial, 2}},
                          unk[1] = {{unknown, 1}}, none[1] = {{NULL, 0}};
  CHECK_ERR(ox_kernel_set_candidates(k, dup, 1), OX_ERR_INVALID_ARGUMENT, "candidate 0 sets 'BM' twice");
  CHECK_ERR(ox_kernel_set_candidates(k, odd, 1), OX_ERR_INVALID_ARGUMENT, "BM = 48 is not a power of two");
  CHECK_ERR(ox_kernel_set_candidates(k, mixed, 2), OX_ERR_INVALID_ARGUMENT,
            "every candidate sets the same generics; candidate 1 does not set 'BK'");
  CHECK_ERR(ox_kernel_set_candidates(k, unk, 1), OX_ERR_INVALID_ARGUMENT, "candidate 0: no generic 'BQ'");
  CHECK_ERR(ox_kernel_set_candidates(k, none, 1), OX_ERR_INVALID_ARGUMENT, "candidate 0 sets no generic");
  CHECK_ERR(ox_kernel_set_candidates(k, NULL, 2), OX_ERR_INVALID_ARGUMENT, "candidates is NULL");
  int idx;
  CHECK_OK(ox_kernel_set_candidates(hist, NULL, 0)); /* cleared */
  CHECK_ERR(ox_kernel_tuned(hist, NULL, 0, &idx), OX_ERR_INVALID_ARGUMENT, "has no candidate configurations");
  /* only candidates that do not compile: the first one's error */
  const ox_tile_candidate bad[1] = {{toolarge, 3}};
  CHECK_OK(ox_kernel_set_candidates(k, bad, 1));
  const int64_t s2[2] = {64, 64};
  ox_tensor a = NULL, c = NULL;
  CHECK_OK(ox_tensor_full(dev, NULL, OX_F32, 2, s2, 1, &a));
  CHECK_OK(ox_tensor_full(dev, NULL, OX_F32, 2, s2, 0, &c));
  ox_arg args[3] = {ox_arg_tensor(c), ox_arg_tensor(a), ox_arg_tensor(a)};
  CHECK_ERR(ox_launch(k, NULL, NULL, args, 3), OX_ERR_COMPILE,
            "kernel 'mm': no candidate configuration runs; the first one failed with");
  ox_tensor_release(a);
  ox_tensor_release(c);
}

/* Candidates set again and again while other threads launch the kernel (the
 * tuning lock keeps each launch on one consistent list): every launch still
 * computes the sum (run under ThreadSanitizer in CI, label "threads"). */
typedef struct racer {
  ox_kernel k;
  int bad;
} racer;

static const ox_generic_value r64[] = {{"B", 64}}, r128[] = {{"B", 128}}, r256[] = {{"B", 256}};

static void *race_launches(void *p) {
  racer *r = p;
  const int64_t n = 300, shape[1] = {300};
  float ones[300];
  for (int i = 0; i < n; i++)
    ones[i] = 1;
  /* no CHECK here: the harness's counters are the main thread's */
  ox_tensor x = NULL, z = NULL, zp = NULL;
  const int64_t t64[1] = {64};
  if (ox_tensor_from_host(dev, NULL, OX_F32, 1, shape, ones, sizeof ones, &x) ||
      ox_tensor_full(dev, NULL, OX_F32, 1, shape, 0, &z) ||
      ox_tensor_partition(z, 1, t64, &zp)) { /* zp: what runs while the candidates are cleared */
    r->bad++;
    return NULL;
  }
  for (int it = 0; it < 30; it++) {
    ox_arg args[3] = {ox_arg_tensor(zp), ox_arg_tensor(x), ox_arg_tensor(x)};
    if (ox_launch(r->k, NULL, NULL, args, 3) != OX_OK) {
      fprintf(stderr, "  launch failed: %s\n", ox_last_error());
      r->bad++;
      continue;
    }
    float got[300];
    if (ox_tensor_to_host(z, NULL, got, sizeof got)) {
      r->bad++;
      continue;
    }
    for (int i = 0; i < n; i++)
      r->bad += got[i] != 2;
  }
  ox_tensor_release(x);
  ox_tensor_release(zp);
  ox_tensor_release(z);
  return NULL;
}

static void test_race(void) {
  static const char *ADD = "#[tile]\n"
                           "fn add<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>) {\n"
                           "    z.store(load_tile_like(x, z) + load_tile_like(y, z));\n"
                           "}\n";
  ox_compile_options o = {.filename = "add.oxk", .no_cache = 1};
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(dev, ADD, &o, &m));
  if (!m)
    return;
  racer r[3] = {{0}};
  const ox_tile_candidate lists[2][2] = {{{r64, 1}, {r128, 1}}, {{r256, 1}, {r64, 1}}};
  pthread_t th[3];
  for (int i = 0; i < 3; i++) {
    CHECK_OK(ox_module_get_kernel(m, "add", &r[i].k));
    if (i == 0)
      CHECK_OK(ox_kernel_set_candidates(r[0].k, lists[0], 2));
    pthread_create(&th[i], NULL, race_launches, &r[i]);
  }
  for (int it = 0; it < 40; it++)
    CHECK_OK(ox_kernel_set_candidates(r[0].k, lists[it & 1], it % 5 == 4 ? 0 : 2));
  for (int i = 0; i < 3; i++) {
    pthread_join(th[i], NULL);
    CHECK(r[i].bad == 0, "thread %d: %d wrong elements or failed launches while candidates changed", i, r[i].bad);
  }
  ox_module_destroy(m);
}

int main(int argc, char **argv) {
  const char *d = argc > 1 ? argv[1] : "cpu";
  CHECK_OK(ox_device_get(strcmp(d, "cpu") ? OX_DEVICE_CUDA : OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("tune_test");
  if (argc > 2 && !strcmp(argv[2], "child"))
    return child();
  ox_module m = compile();
  if (!m)
    return test_done("tune_test");
  ox_kernel mm = NULL, hist = NULL;
  CHECK_OK(ox_module_get_kernel(m, "mm", &mm));
  CHECK_OK(ox_module_get_kernel(m, "hist", &hist));
  test_matmul(mm);
  test_hist(hist);
  test_errors(mm, hist);
  ox_module_destroy(m);
  test_race();
  test_persistence(argv[0], d);
  return test_done("tune_test");
}
