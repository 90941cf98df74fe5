/* wrap_test - foreign CUDA streams (ox_stream_wrap), as PyTorch's and CuPy's
 * arrive (argv[1]: "cuda"; on the CPU only the refusal is checked):
 *   - wrapping one CUstream twice gives one handle, which lives until the
 *     last matching ox_stream_destroy;
 *   - destroying a wrapper never waits on the host (a stream blocked by a
 *     host function would hang the test: an alarm turns that into a failure);
 *   - a tensor written on a foreign stream, whose wrapper is gone, is still
 *     read complete on another stream (the use is remembered);
 *   - ox_tensor_set_release_stream hands imported memory back at once and
 *     orders the producer's stream after Oxide's work on it;
 *   - a launch on a foreign stream being captured into a graph, with a wait
 *     that ownership tracking would otherwise make, captures and replays.
 * The driver is opened here (dlopen) to make streams Oxide does not own. */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <dlpack/dlpack.h>

#include "check.h"
#include "produce_consume.h"

typedef void *CUstream_t;
typedef void (*host_fn)(void *);
static struct {
  int (*stream_create)(CUstream_t *, unsigned);
  int (*stream_destroy)(CUstream_t);
  int (*stream_sync)(CUstream_t);
  int (*launch_host_func)(CUstream_t, host_fn, void *);
  int (*begin_capture)(CUstream_t, int);
  int (*end_capture)(CUstream_t, void **);
  int (*instantiate)(void **, void *, unsigned long long);
  int (*graph_launch)(void *, CUstream_t);
  int (*exec_destroy)(void *);
  int (*graph_destroy)(void *);
  int (*mem_alloc)(unsigned long long *, size_t);
  int (*mem_free)(unsigned long long);
} cu;

static int load_driver(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (!lib)
    return 0;
  void **slots[] = {(void **)&cu.stream_create,    (void **)&cu.stream_destroy,
                    (void **)&cu.stream_sync,      (void **)&cu.launch_host_func,
                    (void **)&cu.begin_capture,    (void **)&cu.end_capture,
                    (void **)&cu.instantiate,      (void **)&cu.graph_launch,
                    (void **)&cu.exec_destroy,     (void **)&cu.graph_destroy,
                    (void **)&cu.mem_alloc,        (void **)&cu.mem_free};
  const char *names[] = {"cuStreamCreate",         "cuStreamDestroy_v2", "cuStreamSynchronize",
                         "cuLaunchHostFunc",       "cuStreamBeginCapture_v2",
                         "cuStreamEndCapture",     "cuGraphInstantiateWithFlags",
                         "cuGraphLaunch",          "cuGraphExecDestroy", "cuGraphDestroy",
                         "cuMemAlloc_v2",          "cuMemFree_v2"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (!(*slots[i] = dlsym(lib, names[i])))
      return 0;
  return 1;
}

/* A gate: a host function queued on a stream blocks it until opened. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open, gate_passed, marker_saw_gate;
static void gate(void *arg) {
  (void)arg;
  pthread_mutex_lock(&gate_mu);
  while (!gate_open)
    pthread_cond_wait(&gate_cv, &gate_mu);
  gate_passed = 1;
  pthread_mutex_unlock(&gate_mu);
}
static void open_gate(void) {
  pthread_mutex_lock(&gate_mu);
  gate_open = 1;
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
}
/* queued on another stream: records whether the gate had been passed */
static void marker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&gate_mu);
  marker_saw_gate = gate_passed;
  pthread_mutex_unlock(&gate_mu);
}

static int deleted;
static void deleter(DLManagedTensorVersioned *m) {
  deleted++;
  free(m);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "wrap_test: timed out (a wrapper's destroy or a release waited "
                            "on the host for a blocked stream)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}


int main(int argc, char **argv) {
  int gpu = argc > 1 && !strcmp(argv[1], "cuda");
  ox_device dev = NULL;
  if (!gpu) {
    ox_device cpu;
    ox_stream w;
    CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &cpu));
    CHECK_ERR(ox_stream_wrap(cpu, (void *)0x1234, &w), OX_ERR_INVALID_ARGUMENT, "only CUDA streams");
    return test_done("wrap_test");
  }
  CHECK_OK(ox_device_get(OX_DEVICE_CUDA, 0, &dev));
  CHECK(load_driver(), "libcuda.so.1 and its functions");
  if (!dev || test_failures)
    return test_done("wrap_test");
  signal(SIGALRM, on_alarm);
  alarm(60);

  ox_compile_options o = {.filename = "wrap.oxk"};
  ox_module m = NULL;
  ox_kernel kp = NULL, kc = NULL;
  CHECK_OK(ox_module_compile(dev, PRODUCE_CONSUME, &o, &m));
  CHECK_OK(ox_module_get_kernel(m, "produce", &kp));
  CHECK_OK(ox_module_get_kernel(m, "consume", &kc));
  const int64_t n = 1 << 16;
  ox_launch_config cfg = {{(uint32_t)(n / 256), 1, 1}, {256, 1, 1}};
  CUstream_t ca = NULL, cb = NULL, cc = NULL;
  CHECK(cu.stream_create(&ca, 0) == 0 && cu.stream_create(&cb, 0) == 0 &&
            cu.stream_create(&cc, 1 /* non-blocking: capture needs no legacy sync */) == 0,
        "cuStreamCreate");

  /* 1. one handle per CUstream, refcounted */
  ox_stream w1, w2;
  CHECK_OK(ox_stream_wrap(dev, ca, &w1));
  CHECK_OK(ox_stream_wrap(dev, ca, &w2));
  CHECK(w1 == w2, "wrapping one CUstream twice gives one handle");
  CHECK(ox_stream_handle(w1) == ca, "the handle names the CUstream");
  ox_stream_destroy(w2);
  CHECK(ox_stream_handle(w1) == ca, "alive until the last destroy");
  ox_stream_destroy(w1);
  CHECK_ERR(ox_stream_synchronize(w1), OX_ERR_INVALID_ARGUMENT, "not live");

  /* 2. destroying a wrapper does not wait for its blocked stream */
  ox_tensor x, y;
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_F32, 1, &n, &x));
  CHECK_OK(ox_tensor_empty(dev, NULL, OX_F32, 1, &n, &y));
  ox_stream def;
  CHECK_OK(ox_device_stream(dev, &def));
  CHECK_OK(ox_stream_synchronize(def));
  CHECK(cu.launch_host_func(ca, gate, NULL) == 0, "cuLaunchHostFunc");
  CHECK_OK(ox_stream_wrap(dev, ca, &w1));
  ox_arg pa[5] = {ox_arg_tensor(x), ox_arg_f32(7.0f), ox_arg_u32(200000), ox_arg_f32(1.0f),
                  ox_arg_f32(0.0f)};
  CHECK_OK(ox_launch(kp, w1, &cfg, pa, 5)); /* queued behind the gate */
  ox_stream_destroy(w1);                     /* must not wait: the gate is shut */
  CHECK(!gate_passed, "the wrapper's destroy returned while its stream was blocked");

  /* 3. ... and its write is still ordered before a read on another stream */
  ox_stream sb;
  CHECK_OK(ox_stream_create(dev, &sb));
  ox_arg ca2[2] = {ox_arg_tensor(x), ox_arg_tensor(y)};
  CHECK_OK(ox_launch(kc, sb, &cfg, ca2, 2));
  open_gate();
  float *h = malloc(sizeof(float) * (size_t)n);
  CHECK_OK(ox_tensor_to_host(y, sb, h, sizeof(float) * (size_t)n));
  int bad = 0;
  for (int64_t i = 0; i < n; i++)
    bad += h[i] != 8.0f;
  CHECK(bad == 0, "%d of %lld elements read before the foreign stream's write", bad, (long long)n);

  /* 4. a release stream: imported memory goes back at once, the producer's
   * stream ordered after Oxide's work */
  gate_open = gate_passed = 0;
  unsigned long long mem = 0;
  CHECK(cu.mem_alloc(&mem, sizeof(float) * (size_t)n) == 0, "cuMemAlloc");
  DLManagedTensorVersioned *mt = calloc(1, sizeof *mt);
  static int64_t shape[1];
  shape[0] = n;
  mt->version.major = DLPACK_MAJOR_VERSION;
  mt->version.minor = DLPACK_MINOR_VERSION;
  mt->deleter = deleter;
  mt->dl_tensor.data = (void *)(uintptr_t)mem;
  mt->dl_tensor.device.device_type = kDLCUDA;
  mt->dl_tensor.device.device_id = 0;
  mt->dl_tensor.ndim = 1;
  mt->dl_tensor.dtype.code = kDLFloat;
  mt->dl_tensor.dtype.bits = 32;
  mt->dl_tensor.dtype.lanes = 1;
  mt->dl_tensor.shape = shape;
  ox_tensor f;
  CHECK_OK(ox_tensor_from_dlpack(mt, 1, &f));
  ox_stream wb, sa;
  CHECK_OK(ox_stream_wrap(dev, cb, &wb));
  CHECK_ERR(ox_tensor_set_release_stream(x, wb), OX_ERR_INVALID_ARGUMENT, "Oxide's own");
  CHECK_OK(ox_tensor_set_release_stream(f, wb));
  CHECK_OK(ox_stream_create(dev, &sa));
  CHECK_OK(ox_stream_synchronize(def));
  CHECK(cu.launch_host_func(ox_stream_handle(sa), gate, NULL) == 0, "cuLaunchHostFunc");
  ox_arg fa[5] = {ox_arg_tensor(f), ox_arg_f32(3.0f), ox_arg_u32(1000), ox_arg_f32(1.0f),
                  ox_arg_f32(0.0f)};
  CHECK_OK(ox_launch(kp, sa, &cfg, fa, 5)); /* writes f behind the gate */
  ox_tensor_release(f);                      /* must not wait for sa */
  CHECK(deleted == 1, "the producer's deleter ran at the release (%d)", deleted);
  CHECK(cu.launch_host_func(cb, marker, NULL) == 0, "cuLaunchHostFunc");
  open_gate();
  CHECK(cu.stream_sync(cb) == 0, "cuStreamSynchronize");
  CHECK(marker_saw_gate, "the release stream was ordered after Oxide's write");
  ox_stream_destroy(wb);

  /* 5. capture on a foreign stream, where tracking would make a wait */
  ox_stream wc;
  CHECK_OK(ox_stream_wrap(dev, cc, &wc));
  pa[1] = ox_arg_f32(9.0f);
  CHECK_OK(ox_launch(kp, sa, &cfg, pa, 5)); /* x = 9, last written on sa */
  CHECK_OK(ox_stream_synchronize(sa));
  CHECK(cu.begin_capture(cc, 1 /* thread-local */) == 0, "cuStreamBeginCapture");
  CHECK_OK(ox_launch(kc, wc, &cfg, ca2, 2)); /* reads x: would wait for sa */
  void *graph = NULL, *exec = NULL;
  CHECK(cu.end_capture(cc, &graph) == 0 && graph, "the capture was not invalidated");
  CHECK(graph && cu.instantiate(&exec, graph, 0) == 0, "cuGraphInstantiate");
  for (int r = 0; r < 3 && exec; r++)
    CHECK(cu.graph_launch(exec, cc) == 0, "cuGraphLaunch");
  CHECK_OK(ox_tensor_to_host(y, wc, h, sizeof(float) * (size_t)n));
  bad = 0;
  for (int64_t i = 0; i < n; i++)
    bad += h[i] != 10.0f;
  CHECK(bad == 0, "%d wrong elements after the graph replays (y was 8, x + 1 is 10)", bad);
  if (exec)
    cu.exec_destroy(exec);
  if (graph)
    cu.graph_destroy(graph);
  ox_stream_destroy(wc);

  /* 6. a stream first seen inside a capture (global mode, as torch.cuda.graph
   * uses): wrapping it must call nothing the capture forbids */
  CUstream_t cd = NULL;
  CHECK(cu.stream_create(&cd, 1) == 0, "cuStreamCreate");
  CHECK(cu.begin_capture(cd, 0 /* global */) == 0, "cuStreamBeginCapture");
  ox_stream wd = NULL;
  CHECK_OK(ox_stream_wrap(dev, cd, &wd));
  CHECK_OK(ox_launch(kc, wd, &cfg, ca2, 2));
  graph = NULL;
  CHECK(cu.end_capture(cd, &graph) == 0 && graph, "the capture was not invalidated");
  if (graph)
    cu.graph_destroy(graph);
  ox_stream_destroy(wd);
  ox_stream lw = NULL;
  CHECK_OK(ox_tensor_last_writer(y, &lw));
  CHECK(lw != wd, "a use inside a capture is not recorded (it has not happened)");
  cu.stream_destroy(cd);

  free(h);
  ox_tensor_release(x);
  ox_tensor_release(y);
  ox_stream_destroy(sa);
  ox_stream_destroy(sb);
  ox_module_destroy(m);
  cu.mem_free(mem);
  cu.stream_destroy(ca);
  cu.stream_destroy(cb);
  cu.stream_destroy(cc);
  alarm(0);
  return test_done("wrap_test");
}
