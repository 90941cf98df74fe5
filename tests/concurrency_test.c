/* concurrency_test.c - many threads using Oxide at once: handles made and
 * released on several threads (and released on another thread than made
 * them), launches of one shared kernel on per-thread streams, events,
 * chains, compiles of the same and of different sources. Checks every
 * result; CI also runs it under ThreadSanitizer, where a data race in the
 * core fails it. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

enum { THREADS = 8, ROUNDS = 40, N = 256 };

static const char *SRC = "#[kernel]\n"
                         "fn axpb(x: &[f32], out: DisjointSlice<f32>, a: f32, b: f32) {\n"
                         "    let i = thread::index_1d();\n"
                         "    if let Some(o) = out.get_mut(i) {\n"
                         "        *o = a * x[i] + b;\n"
                         "    }\n"
                         "}\n";

static ox_device dev;
static ox_kernel shared_kernel;
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER; /* check.h's counters */

/* Handles made on one thread and released by another. */
static ox_tensor handoff[THREADS][ROUNDS];

#define TCHECK(cond, what)                                                                     \
  do {                                                                                          \
    pthread_mutex_lock(&check_lock);                                                            \
    CHECK(cond, "thread %d round %d: %s", id, r, what);                                         \
    pthread_mutex_unlock(&check_lock);                                                          \
  } while (0)

static void *worker(void *arg) {
  int id = (int)(intptr_t)arg;
  ox_stream s = NULL;
  int r = -1;
  TCHECK(ox_stream_create(dev, &s) == OX_OK, "stream");
  /* a module of this thread's own (a distinct source: compiled, cached) */
  char src[600];
  snprintf(src, sizeof src, "%s\n// thread %d\n", SRC, id);
  ox_module own = NULL;
  ox_kernel k = NULL;
  TCHECK(ox_module_compile(dev, src, NULL, &own) == OX_OK, "compile");
  TCHECK(ox_module_get_kernel(own, "axpb", &k) == OX_OK, "kernel");
  int64_t n = N;
  float x[N], out[N];
  for (int i = 0; i < N; i++)
    x[i] = (float)i;
  for (r = 0; r < ROUNDS; r++) {
    ox_tensor tx = NULL, to = NULL;
    TCHECK(ox_tensor_from_host(dev, s, OX_F32, 1, &n, x, sizeof x, &tx) == OX_OK, "from_host");
    TCHECK(ox_tensor_empty(dev, s, OX_F32, 1, &n, &to) == OX_OK, "empty");
    float a = (float)(id + 1), b = (float)r;
    ox_arg args[4] = {ox_arg_tensor(tx), ox_arg_tensor(to), ox_arg_f32(a), ox_arg_f32(b)};
    ox_launch_config cfg = {{N / 64, 1, 1}, {64, 1, 1}};
    TCHECK(ox_launch(r % 2 ? k : shared_kernel, s, &cfg, args, 4) == OX_OK, "launch");
    ox_event e = NULL;
    TCHECK(ox_event_create(dev, &e) == OX_OK && ox_event_record(e, s) == OX_OK, "event");
    TCHECK(ox_event_synchronize(e) == OX_OK, "event sync");
    ox_event_destroy(e);
    TCHECK(ox_tensor_to_host(to, s, out, sizeof out) == OX_OK, "to_host");
    int bad = 0;
    for (int i = 0; i < N; i++)
      bad += out[i] != a * (float)i + b;
    TCHECK(bad == 0, "results");
    /* a chain of one launch, run twice */
    ox_chain c = NULL;
    TCHECK(ox_chain_create(dev, &c) == OX_OK, "chain");
    TCHECK(ox_chain_launch(c, shared_kernel, &cfg, args, 4) == OX_OK, "chain launch");
    TCHECK(ox_chain_run(c, s) == OX_OK && ox_chain_run(c, s) == OX_OK, "chain run");
    ox_chain_destroy(c);
    ox_tensor_release(tx);
    handoff[id][r] = to; /* released by the next thread */
  }
  TCHECK(ox_stream_synchronize(s) == OX_OK, "synchronize");
  ox_stream_destroy(s);
  ox_module_destroy(own);
  return NULL;
}

static void *releaser(void *arg) {
  int id = (int)(intptr_t)arg, r = 0;
  int from = (id + 1) % THREADS;
  for (r = 0; r < ROUNDS; r++) {
    float one = 0;
    ox_tensor t = handoff[from][r];
    TCHECK(ox_tensor_numel(t) == N, "a handed-off tensor is live");
    ox_tensor v = NULL;
    TCHECK(ox_tensor_slice(t, 0, 1, 2, 1, &v) == OX_OK, "view");
    TCHECK(ox_tensor_to_host(v, NULL, &one, sizeof one) == OX_OK, "read");
    ox_tensor_release(t);
    TCHECK(ox_tensor_numel(v) == 1, "a view outlives its base");
    ox_tensor_release(v);
    TCHECK(ox_tensor_numel(t) == 0 && ox_last_status() == OX_ERR_INVALID_ARGUMENT,
           "the released handle is dead");
  }
  return NULL;
}

/* One CPU tensor shared by threads that write it (kernel launches and
 * host copies, each writing every element with one value) and threads that
 * read it (host copies): every read must see one write whole. CPU work runs
 * on the caller's threads, so only the core's per-storage access locks
 * keep these apart (ThreadSanitizer reports the race without them). */
enum { SHARED_N = 1 << 16, SHARED_ROUNDS = 100 };
static ox_tensor shared_t;

/* (Checks are counted locally and reported at the end: check.h's lock,
 * taken after every operation, would order the threads for ThreadSanitizer
 * and hide the very race this looks for.) */
static void *shared_writer(void *arg) {
  int id = (int)(intptr_t)arg, r = 0, failed = 0;
  ox_stream s = NULL;
  ox_stream_create(dev, &s);
  ox_tensor one = NULL;
  int64_t n = SHARED_N;
  ox_tensor_full(dev, s, OX_F32, 1, &n, 1.0, &one);
  static float host[2][SHARED_N];
  for (; r < SHARED_ROUNDS; r++) {
    float v = (float)(id * 1000 + r);
    if (r % 4 == 3) { /* a kernel writes it: out = 0 * one + v */
      ox_arg a[4] = {ox_arg_tensor(one), ox_arg_tensor(shared_t), ox_arg_f32(0.0f), ox_arg_f32(v)};
      ox_launch_config cfg = {{SHARED_N / 256, 1, 1}, {256, 1, 1}};
      failed += ox_launch(shared_kernel, s, &cfg, a, 4) != OX_OK;
    } else { /* a host copy writes it */
      for (int i = 0; i < SHARED_N; i++)
        host[id][i] = v;
      failed += ox_tensor_copy_from_host(shared_t, s, host[id], sizeof host[id]) != OX_OK;
    }
  }
  TCHECK(failed == 0, "shared writes");
  ox_tensor_release(one);
  ox_stream_destroy(s);
  return NULL;
}

static void *shared_reader(void *arg) {
  int id = (int)(intptr_t)arg, r = 0, failed = 0, mixed = 0;
  ox_stream s = NULL;
  ox_stream_create(dev, &s);
  float *h = malloc(sizeof(float) * SHARED_N);
  for (; r < 3 * SHARED_ROUNDS; r++) {
    failed += ox_tensor_to_host(shared_t, s, h, sizeof(float) * SHARED_N) != OX_OK;
    for (int i = 1; i < SHARED_N; i++)
      if (h[i] != h[0]) {
        mixed++;
        break;
      }
  }
  TCHECK(failed == 0, "shared reads");
  TCHECK(mixed == 0, "a read saw two writes at once");
  free(h);
  ox_stream_destroy(s);
  return NULL;
}

int main(void) {
  CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &dev));
  ox_module m = NULL;
  CHECK_OK(ox_module_compile(dev, SRC, NULL, &m));
  CHECK_OK(ox_module_get_kernel(m, "axpb", &shared_kernel));
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, worker, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < THREADS; i++)
    pthread_create(&th[i], NULL, releaser, (void *)(intptr_t)i);
  for (int i = 0; i < THREADS; i++)
    pthread_join(th[i], NULL);
  int64_t n = SHARED_N;
  CHECK_OK(ox_tensor_zeros(dev, NULL, OX_F32, 1, &n, &shared_t));
  pthread_t rw[4];
  for (int i = 0; i < 2; i++) {
    pthread_create(&rw[i], NULL, shared_writer, (void *)(intptr_t)i);
    pthread_create(&rw[2 + i], NULL, shared_reader, (void *)(intptr_t)i);
  }
  for (int i = 0; i < 4; i++)
    pthread_join(rw[i], NULL);
  ox_tensor_release(shared_t);
  ox_module_destroy(m);
  return test_done("concurrency_test");
}
