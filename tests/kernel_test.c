/* kernel_test - compiled kernels end to end on one device (argv[1]: "cpu" or
 * "cuda"): launches checked against the signature and the contract, bounds
 * errors reported at synchronization with their source location while the
 * next launch still works, and the compiled-kernel cache. */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static ox_device dev;
static ox_stream stream;

static ox_tensor make(ox_dtype t, int64_t n, const void *data) {
  ox_tensor x = NULL;
  if (data)
    CHECK_OK(ox_tensor_from_host(dev, NULL, t, 1, &n, data, (size_t)n * ox_dtype_size(t), &x));
  else
    CHECK_OK(ox_tensor_empty(dev, NULL, t, 1, &n, &x));
  return x;
}

static ox_kernel kernel(ox_module *m, const char *src, const char *name) {
  ox_compile_options o = {.filename = "t.oxk"};
  ox_kernel k = NULL;
  CHECK_OK(ox_module_compile(dev, src, &o, m));
  if (*m)
    CHECK_OK(ox_module_get_kernel(*m, name, &k));
  return k;
}

static const char *VECADD =
    "#[kernel]\n"
    "#[launch_contract(block = (128, 1, 1), requires = (a.len() >= c.len(), b.len() >= c.len()))]\n"
    "fn vecadd(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {\n"
    "    let i = thread::index_1d();\n"
    "    if let Some(out) = c.get_mut(i) { *out = a[i] + b[i]; }\n"
    "}\n";

static void test_launch_checks(void) {
  ox_module m;
  ox_kernel k = kernel(&m, VECADD, "vecadd");
  if (!k)
    return;
  const int64_t n = 1000;
  float a[1000], b[1000], c[1000];
  for (int i = 0; i < n; i++)
    a[i] = (float)i, b[i] = 0.5f * (float)i, c[i] = -1;
  ox_tensor ta = make(OX_F32, n, a), tb = make(OX_F32, n, b), tc = make(OX_F32, n, c);
  ox_tensor tshort = make(OX_F32, n - 1, NULL), ti = make(OX_I32, n, NULL);
  ox_launch_config cfg = {{(uint32_t)((n + 127) / 128), 1, 1}, {128, 1, 1}};
  ox_arg args[3] = {ox_arg_tensor(ta), ox_arg_tensor(tb), ox_arg_tensor(tc)};
  ox_event e0, e1;
  CHECK_OK(ox_event_create(dev, &e0));
  CHECK_OK(ox_event_create(dev, &e1));
  CHECK_OK(ox_event_record(e0, stream));
  CHECK_OK(ox_launch(k, stream, &cfg, args, 3));
  CHECK_OK(ox_event_record(e1, stream));
  CHECK_OK(ox_event_synchronize(e1));
  float ms = -1;
  CHECK_OK(ox_event_elapsed_ms(e0, e1, &ms));
  CHECK(ms >= 0 && ms < 10000, "elapsed %g ms", ms);
  ox_stream side;
  CHECK_OK(ox_stream_create(dev, &side));
  CHECK_OK(ox_stream_wait_event(side, e1));
  CHECK_OK(ox_stream_synchronize(side));
  ox_stream_destroy(side);
  CHECK_ERR(ox_stream_wait_event(stream, NULL), OX_ERR_INVALID_ARGUMENT, "event is NULL");
  ox_event_destroy(e0);
  ox_event_destroy(e1);
  CHECK_OK(ox_stream_synchronize(stream));
  CHECK_OK(ox_tensor_to_host(tc, stream, c, sizeof c));
  int bad = 0;
  for (int i = 0; i < n; i++)
    bad += c[i] != a[i] + b[i];
  CHECK(bad == 0, "%d wrong sums", bad);

  CHECK_ERR(ox_launch(k, stream, &cfg, args, 2), OX_ERR_INVALID_ARGUMENT, "takes 3 arguments, got 2");
  ox_arg wrong_t[3] = {ox_arg_tensor(ti), ox_arg_tensor(tb), ox_arg_tensor(tc)};
  CHECK_ERR(ox_launch(k, stream, &cfg, wrong_t, 3), OX_ERR_INVALID_ARGUMENT, "expected a tensor of f32, got i32");
  ox_arg scalar[3] = {ox_arg_f32(1), ox_arg_tensor(tb), ox_arg_tensor(tc)};
  CHECK_ERR(ox_launch(k, stream, &cfg, scalar, 3), OX_ERR_INVALID_ARGUMENT, "got a scalar");
  ox_arg alias[3] = {ox_arg_tensor(tc), ox_arg_tensor(tb), ox_arg_tensor(tc)};
  CHECK_ERR(ox_launch(k, stream, &cfg, alias, 3), OX_ERR_INVALID_ARGUMENT,
            "argument 3 ('c', DisjointSlice<T>) overlaps argument 1 ('a')");
  ox_arg shortb[3] = {ox_arg_tensor(ta), ox_arg_tensor(tshort), ox_arg_tensor(tc)};
  CHECK_ERR(ox_launch(k, stream, &cfg, shortb, 3), OX_ERR_LAUNCH,
            "t.oxk:2:72: launch contract of kernel 'vecadd' violated: b.len() >= c.len() is false (b.len() = 999, c.len() = 1000)");
  ox_launch_config blk = {{8, 1, 1}, {64, 1, 1}};
  CHECK_ERR(ox_launch(k, stream, &blk, args, 3), OX_ERR_LAUNCH, "launch_contract block = (128, 1, 1)");
  ox_launch_config huge = {{1, 1, 1}, {2048, 1, 1}};
  CHECK_ERR(ox_launch(k, stream, &huge, args, 3), OX_ERR_LAUNCH, "exceeds");
  CHECK_ERR(ox_launch(NULL, stream, &cfg, args, 3), OX_ERR_INVALID_ARGUMENT, "kernel is NULL");
  CHECK_ERR(ox_launch(k, stream, NULL, args, 3), OX_ERR_INVALID_ARGUMENT, "config is NULL");
  /* a launch check alone runs nothing */
  CHECK_OK(ox_launch_check(k, stream, &cfg, args, 3));
  ox_kernel none;
  CHECK_ERR(ox_module_get_kernel(m, "nope", &none), OX_ERR_NOT_FOUND, "no kernel 'nope' in t.oxk (it has 'vecadd')");

  /* a tensor of another device */
  ox_device other;
  ox_device_type ot = ox_device_get_type(dev) == OX_DEVICE_CPU ? OX_DEVICE_CUDA : OX_DEVICE_CPU;
  if (ox_device_get(ot, 0, &other) == OX_OK) {
    ox_tensor tx;
    CHECK_OK(ox_tensor_empty(other, NULL, OX_F32, 1, &n, &tx));
    ox_arg mixed[3] = {ox_arg_tensor(tx), ox_arg_tensor(tb), ox_arg_tensor(tc)};
    CHECK_ERR(ox_launch(k, stream, &cfg, mixed, 3), OX_ERR_INVALID_ARGUMENT, "the tensor is on");
    ox_tensor_release(tx);
  }
  ox_clear_error();
  ox_tensor_release(ta);
  ox_tensor_release(tb);
  ox_tensor_release(tc);
  ox_tensor_release(tshort);
  ox_tensor_release(ti);
  ox_module_destroy(m);
}

static void test_bounds(void) {
  /* no contract: the read a[i.get() + 1] keeps its check; the last thread fails */
  static const char *src =
      "#[kernel]\n"
      "fn shift(a: &[f32], c: DisjointSlice<f32>) {\n"
      "    let i = thread::index_1d();\n"
      "    if let Some(out) = c.get_mut(i) { *out = a[i.get() + 1]; }\n"
      "}\n"
      "#[kernel]\n"
      "fn synced(a: &[f32], c: DisjointSlice<f32>) {\n"
      "    let s = SharedArray::<f32, 64>::new();\n"
      "    let t = thread::thread_idx_x() as usize;\n"
      "    s[t] = a[t * 2];\n"
      "    sync_threads();\n"
      "    let i = thread::index_1d();\n"
      "    if let Some(out) = c.get_mut(i) { *out = s[63 - t]; }\n"
      "}\n";
  ox_module m;
  ox_kernel k = kernel(&m, src, "shift"), ks = NULL;
  if (!k)
    return;
  CHECK_OK(ox_module_get_kernel(m, "synced", &ks));
  const int64_t n = 1000;
  float a[1000], c[1000];
  for (int i = 0; i < n; i++)
    a[i] = (float)i;
  ox_tensor ta = make(OX_F32, n, a), tc = make(OX_F32, n, NULL);
  ox_launch_config cfg = {{8, 1, 1}, {128, 1, 1}};
  ox_arg args[2] = {ox_arg_tensor(ta), ox_arg_tensor(tc)};
  for (int round = 0; round < 3; round++) {
    CHECK_OK(ox_launch(k, stream, &cfg, args, 2));
    CHECK_ERR(ox_stream_synchronize(stream), OX_ERR_BOUNDS,
              "t.oxk:4:46: out-of-bounds read in kernel 'shift': a[i.get() + 1] with index 1000, but the length is 1000");
    /* the error was consumed, and the device still works */
    CHECK_OK(ox_stream_synchronize(stream));
    CHECK_OK(ox_tensor_to_host(tc, stream, c, sizeof c));
    int bad = 0;
    for (int i = 0; i < n - 1; i++)
      bad += c[i] != a[i + 1];
    CHECK(bad == 0, "round %d: %d wrong values before the failing thread", round, bad);
  }
  /* a kernel with barriers: the failing read gives zero, the block does not hang */
  ox_tensor small = make(OX_F32, 100, a);
  ox_arg sargs[2] = {ox_arg_tensor(small), ox_arg_tensor(tc)};
  ox_launch_config one = {{1, 1, 1}, {64, 1, 1}};
  CHECK_OK(ox_launch(ks, stream, &one, sargs, 2));
  CHECK_ERR(ox_stream_synchronize(stream), OX_ERR_BOUNDS, "t.oxk:10:12: out-of-bounds read in kernel 'synced'");
  CHECK_OK(ox_tensor_to_host(tc, stream, c, sizeof c));
  CHECK(c[63] == 0.0f && c[13] == 0.0f && c[14] == 98.0f, "c[63]=%g c[13]=%g c[14]=%g", c[63], c[13], c[14]);
  /* a host read of the output reports the pending error itself (and consumes it), as
     Python's reads do: the values it would give are partial */
  CHECK_OK(ox_launch(k, stream, &cfg, args, 2));
  CHECK_ERR(ox_tensor_to_host(tc, stream, c, sizeof c), OX_ERR_BOUNDS, "t.oxk:4:46: out-of-bounds read in kernel 'shift'");
  CHECK_OK(ox_stream_synchronize(stream));
  /* a read on another stream waits for the write, and leaves the writer's error to the
     writer's own synchronize (its owner may be destroying it meanwhile) */
  ox_stream other;
  CHECK_OK(ox_stream_create(ox_tensor_device(tc), &other));
  CHECK_OK(ox_launch(k, stream, &cfg, args, 2));
  CHECK_OK(ox_tensor_to_host(tc, other, c, sizeof c));
  CHECK(c[0] == a[1] && c[n - 2] == a[n - 1], "the read saw the write: c[0]=%g", c[0]);
  CHECK_ERR(ox_stream_synchronize(stream), OX_ERR_BOUNDS, "out-of-bounds read in kernel 'shift'");
  ox_stream_destroy(other);
  ox_tensor_release(small);
  ox_tensor_release(ta);
  ox_tensor_release(tc);
  ox_module_destroy(m);
}

/* Shared arrays beyond the 48 KiB of static shared memory: dynamic shared
 * memory on CUDA, up to what the device lets a block opt in to (the CPU
 * device allows 99 KiB, the least of any supported GPU). */
static void test_big_shared(void) {
  static const char *src =
      "#[kernel]\n"
      "fn rev80k(a: &[f32], c: DisjointSlice<f32>) {\n"
      "    let s = SharedArray::<f32, 20000>::new();\n"
      "    let t = thread::thread_idx_x() as usize;\n"
      "    for j in 0..79 { let e = t + (j as usize) * 256; if e < 20000 { s[e] = a[e]; } }\n"
      "    sync_threads();\n"
      "    for i in thread::grid_stride(c.len()) {\n"
      "        if let Some(out) = c.get_mut(i) { *out = s[19999 - i.get()]; }\n"
      "    }\n"
      "}\n"
      "#[kernel]\n"
      "fn fill120k(c: DisjointSlice<f32>) {\n"
      "    let s = SharedArray::<f32, 30000>::new();\n"
      "    let t = thread::thread_idx_x() as usize;\n"
      "    s[29999 - t] = t as f32;\n"
      "    sync_threads();\n"
      "    if let Some(out) = c.get_mut(thread::index_1d()) { *out = s[29744 + t] + 1.0; }\n"
      "}\n";
  ox_module m;
  ox_kernel k = kernel(&m, src, "rev80k"), k120 = NULL;
  if (!k)
    return;
  CHECK_OK(ox_module_get_kernel(m, "fill120k", &k120));
  static float a[20000], c[20000];
  for (int i = 0; i < 20000; i++)
    a[i] = (float)i * 0.5f;
  ox_tensor ta = make(OX_F32, 20000, a), tc = make(OX_F32, 20000, NULL);
  ox_launch_config one = {{1, 1, 1}, {256, 1, 1}};
  ox_arg args[2] = {ox_arg_tensor(ta), ox_arg_tensor(tc)};
  CHECK_OK(ox_launch(k, stream, &one, args, 2));
  CHECK_OK(ox_tensor_to_host(tc, stream, c, sizeof c));
  int bad = 0;
  for (int i = 0; i < 20000; i++)
    bad += c[i] != a[19999 - i];
  CHECK(bad == 0, "80000 bytes of shared memory: %d wrong", bad);
  /* 120000 bytes: above the CPU's 99 KiB; within an H200's 227 KiB */
  ox_arg one_arg = ox_arg_tensor(tc);
  ox_status st = ox_launch(k120, stream, &one, &one_arg, 1);
  if (ox_device_get_type(dev) == OX_DEVICE_CPU) {
    CHECK_ERR(st, OX_ERR_LAUNCH, "kernel 'fill120k' needs 120000 bytes of shared memory; CPU");
  } else if (st == OX_OK) {
    CHECK_OK(ox_tensor_to_host(tc, stream, c, sizeof c));
    int wrong = 0;
    for (int i = 0; i < 256; i++)
      wrong += c[i] != (float)(255 - i) + 1.0f;
    CHECK(wrong == 0, "120000 bytes of shared memory: %d wrong", wrong);
  } else {
    CHECK_ERR(st, OX_ERR_LAUNCH, "kernel 'fill120k' needs 120000 bytes of shared memory");
  }
  ox_tensor_release(ta);
  ox_tensor_release(tc);
  ox_module_destroy(m);
}

/* Grid-stride witness loops: every element exactly once, for lengths that are
 * and are not multiples of the chunk, grids smaller and larger than the data,
 * with continue and break in the body. Without the break (`gs_any`, two loops
 * with different limits over one output), the CPU runs the loops over runs of
 * elements block by block (front/stride.c): an element's owner must be the same
 * in both loops. */
static void test_grid_stride(void) {
  static const char *src =
      "#[kernel]\n"
      "fn gs(a: &[i32], c: DisjointSlice<i32>, stop: usize) {\n"
      "    for i in thread::grid_stride(c.len()) {\n"
      "        if i.get() == stop { break; }\n"
      "        if i.get() % 7 == 3 { continue; }\n"
      "        if let Some(out) = c.get_mut(i) { *out += a[i] + 1; }\n"
      "    }\n"
      "}\n"
      "#[kernel]\n"
      "fn gs_any(a: &[i32], c: DisjointSlice<i32>, stop: usize) {\n"
      "    for i in thread::grid_stride(c.len()) {\n"
      "        if i.get() % 7 == 3 { continue; }\n"
      "        if let Some(out) = c.get_mut(i) { *out += a[i] + 1; }\n"
      "    }\n"
      "    for i in thread::grid_stride(stop) {\n"
      "        if let Some(out) = c.get_mut(i) { *out += 1000; }\n"
      "    }\n"
      "}\n";
  ox_module m;
  ox_kernel k = kernel(&m, src, "gs"), kany = NULL;
  if (!k)
    return;
  CHECK_OK(ox_module_get_kernel(m, "gs_any", &kany));
  static const int64_t lens[] = {0, 1, 3, 4, 5, 1000, 4099, 40003};
  static const uint32_t grids[][2] = {{1, 1}, {1, 32}, {3, 64}, {64, 128}};
  static int32_t a[40003], c[40003];
  for (int i = 0; i < 40003; i++)
    a[i] = i * 3;
  for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
    for (size_t gi = 0; gi < sizeof grids / sizeof grids[0]; gi++)
      for (int brk = 0; brk < 2; brk++) {
        int64_t n = lens[li];
        uint64_t stop = brk ? (uint64_t)n / 2 : UINT64_MAX;
        for (int i = 0; i < n; i++)
          c[i] = 100;
        ox_tensor ta = make(OX_I32, n, n ? a : NULL), tc = make(OX_I32, n, n ? c : NULL);
        ox_launch_config cfg = {{grids[gi][0], 1, 1}, {grids[gi][1], 1, 1}};
        ox_arg args[3] = {ox_arg_tensor(ta), ox_arg_tensor(tc), ox_arg_u64(stop)};
        CHECK_OK(ox_launch(k, stream, &cfg, args, 3));
        CHECK_OK(ox_stream_synchronize(stream));
        if (n)
          CHECK_OK(ox_tensor_to_host(tc, stream, c, sizeof(int32_t) * (size_t)n));
        int bad = 0;
        for (int64_t i = 0; i < n && !brk; i++)
          bad += c[i] != (i % 7 == 3 ? 100 : 100 + a[i] + 1);
        for (int64_t i = 0; i < n; i++) /* with break: each element at most once */
          bad += c[i] != 100 && c[i] != 100 + a[i] + 1;
        CHECK(bad == 0, "grid_stride n=%lld grid=%ux%u break=%d: %d wrong", (long long)n,
              grids[gi][0], grids[gi][1], brk, bad);
        /* gs_any: the second loop over the first half (brk) or past the end */
        uint64_t n2 = brk ? (uint64_t)n / 2 : (uint64_t)n + 9;
        for (int i = 0; i < n; i++)
          c[i] = 100;
        if (n)
          CHECK_OK(ox_tensor_copy_from_host(tc, stream, c, sizeof(int32_t) * (size_t)n));
        args[2] = ox_arg_u64(n2);
        CHECK_OK(ox_launch(kany, stream, &cfg, args, 3));
        if (n)
          CHECK_OK(ox_tensor_to_host(tc, stream, c, sizeof(int32_t) * (size_t)n));
        bad = 0;
        for (int64_t i = 0; i < n; i++)
          bad += c[i] != (i % 7 == 3 ? 100 : 100 + a[i] + 1) + ((uint64_t)i < n2 ? 1000 : 0);
        CHECK(bad == 0, "grid_stride (any owner) n=%lld n2=%llu grid=%ux%u: %d wrong", (long long)n,
              (unsigned long long)n2, grids[gi][0], grids[gi][1], bad);
        ox_tensor_release(ta);
        ox_tensor_release(tc);
      }
  ox_module_destroy(m);
}

/* Compiles VECADD in a child process and returns 1 if it came from the cache. */
static int child_from_cache(const char *self, const char *devname) {
  pid_t pid = fork();
  if (pid == 0) {
    execl(self, self, devname, "--cache-child", (char *)NULL);
    _exit(99);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 98;
}

static void test_cache(const char *self, const char *devname) {
  char dir[] = "/tmp/oxide-cache-test-XXXXXX";
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  setenv("OXIDE_CACHE_DIR", dir, 1);
  /* a source no other test compiles, so the in-memory cache is cold */
  char src[512];
  snprintf(src, sizeof src, "%s// cache test %d\n", VECADD, (int)getpid());
  ox_module m1, m2;
  ox_compile_options o = {.filename = "t.oxk"};
  CHECK_OK(ox_module_compile(dev, src, &o, &m1));
  CHECK(!ox_module_from_cache(m1), "first compile came from the cache");
  CHECK_OK(ox_module_compile(dev, src, &o, &m2));
  CHECK(ox_module_from_cache(m2), "second compile did not use the cache");
  ox_module_destroy(m1);
  ox_module_destroy(m2);
  /* a fresh process finds it on disk */
  setenv("OXIDE_CACHE_TEST_SRC", src, 1);
  CHECK(child_from_cache(self, devname) == 1, "a new process did not load from the disk cache");
  /* OXIDE_CACHE=0 turns it off */
  setenv("OXIDE_CACHE", "0", 1);
  CHECK(child_from_cache(self, devname) == 0, "OXIDE_CACHE=0 still used the cache");
  unsetenv("OXIDE_CACHE");
  CHECK(strcmp(ox_cache_dir(), dir) == 0, "cache dir %s", ox_cache_dir());
  char cmd[256];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0, "cleanup");
}

/* A kernel's signature as bindings read it (ox_kernel_param). */
static void test_params(void) {
  const char *src = "#[kernel]\n"
                    "unsafe fn mixed(a: &[f32], b: &mut [i32], h: &[Atomic<u32>], out: DisjointSlice<f64>,\n"
                    "                alpha: f32, n: u64) {}\n"
                    "#[tile]\n"
                    "fn t<const B: i32>(z: &mut Tensor<f32, [B, B]>, x: &Tensor<bf16, [-1, -1]>) {}\n";
  ox_module m = NULL;
  ox_kernel k = NULL, t = NULL;
  CHECK_OK(ox_module_compile(dev, src, NULL, &m));
  CHECK_OK(ox_module_get_kernel(m, "mixed", &k));
  CHECK_OK(ox_module_get_kernel(m, "t", &t));
  struct {
    const char *name;
    ox_param_kind kind;
    ox_dtype dtype;
    int rank, writable;
  } want[] = {{"a", OX_PARAM_SLICE, OX_F32, 1, 0},          {"b", OX_PARAM_MUT_SLICE, OX_I32, 1, 1},
              {"h", OX_PARAM_ATOMIC_SLICE, OX_U32, 1, 1},   {"out", OX_PARAM_DISJOINT, OX_F64, 1, 1},
              {"alpha", OX_PARAM_SCALAR, OX_F32, 0, 0},     {"n", OX_PARAM_SCALAR, OX_U64, 0, 0},
              {"z", OX_PARAM_TILE, OX_F32, 2, 1},           {"x", OX_PARAM_TENSOR, OX_BF16, 2, 0}};
  for (int i = 0; i < 8; i++) {
    ox_param_info p;
    CHECK_OK(ox_kernel_param(i < 6 ? k : t, i < 6 ? i : i - 6, &p));
    CHECK(p.name && !strcmp(p.name, want[i].name) && p.kind == want[i].kind && p.dtype == want[i].dtype &&
              p.rank == want[i].rank && p.writable == want[i].writable,
          "parameter %d (%s): kind %d dtype %d rank %d writable %d", i, want[i].name, p.kind, p.dtype, p.rank,
          p.writable);
  }
  ox_param_info p;
  CHECK_ERR(ox_kernel_param(k, 6, &p), OX_ERR_INVALID_ARGUMENT, "has 6 parameters");
  CHECK_ERR(ox_kernel_param(k, -1, &p), OX_ERR_INVALID_ARGUMENT, "index -1");
  CHECK(ox_kernel_is_unsafe(k) == 1 && ox_kernel_is_unsafe(t) == 0, "unsafe flags");
  ox_module_destroy(m);
  CHECK_ERR(ox_kernel_param(k, 0, &p), OX_ERR_INVALID_ARGUMENT, "not live");
  CHECK(ox_kernel_is_unsafe(k) == -1, "a dead kernel");
}

int main(int argc, char **argv) {
  const char *devname = argc > 1 ? argv[1] : "cpu";
  if (!strcmp(devname, "cpu"))
    CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &dev));
  else
    CHECK_OK(ox_device_get(OX_DEVICE_CUDA, 0, &dev));
  if (!dev)
    return test_done("kernel_test");
  if (argc > 2 && !strcmp(argv[2], "--cache-child")) {
    ox_module m;
    ox_compile_options o = {.filename = "t.oxk"};
    if (ox_module_compile(dev, getenv("OXIDE_CACHE_TEST_SRC"), &o, &m) != OX_OK)
      return 97;
    int r = ox_module_from_cache(m);
    ox_module_destroy(m);
    return r;
  }
  CHECK_OK(ox_stream_create(dev, &stream));
  test_launch_checks();
  test_params();
  test_bounds();
  test_grid_stride();
  test_big_shared();
  test_cache(argv[0], devname);
  ox_stream_destroy(stream);
  return test_done("kernel_test");
}
