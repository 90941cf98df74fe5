// cpp_test - the C++ binding (bindings/cpp/oxide.hpp): vecadd and saxpy, then
// errors as exceptions. Runs on the CPU, and on CUDA device 0 when one is usable.
#include <oxide/oxide.hpp>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

static int failures = 0;
#define EXPECT(cond)                                                                         \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      std::fprintf(stderr, "%s:%d: EXPECT(%s) failed\n", __FILE__, __LINE__, #cond);         \
      failures++;                                                                            \
    }                                                                                        \
  } while (0)

static const char *VECADD = R"(#[kernel]
#[launch_contract(block = (256, 1, 1), requires = (a.len() >= c.len(), b.len() >= c.len()))]
fn vecadd(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(out) = c.get_mut(i) {
        *out = a[i] + b[i];
    }
}
)";

static const char *SAXPY = R"(#[kernel]
fn saxpy(x: &[f32], y: &[f32], out: DisjointSlice<f32>, alpha: f32, n: u64) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) {
        if i.get() < n {
            *o = alpha * x[i] + y[i];
        }
    }
}
)";

static const char *OOB = R"(#[kernel]
fn oob(a: &[f32], c: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(o) = c.get_mut(i) {
        *o = a[i.get() + 1];
    }
}
)";

// Runs `fn` and returns the status of the oxide::Error it throws (OX_OK: none).
template <class F> static ox_status status_of(F &&fn, std::string *message = nullptr) {
  try {
    fn();
  } catch (const oxide::Error &e) {
    if (message)
      *message = e.what();
    return e.status();
  }
  return OX_OK;
}

static const char *SCALE = R"(#[tile]
fn scale<const B: i32, const S: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>) {
    z.store(x.partition([B]).load([tile_id(0)]) * (S as f32));
}
)";

static void run(oxide::Device dev) {
  std::printf("cpp_test on %s\n", dev.name().c_str());
  const int64_t n = 1000;
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; i++)
    a[i] = (float)i, b[i] = 0.5f * (float)i;

  // vecadd on the default stream; the Kernel outlives its Module object.
  oxide::Kernel vecadd = oxide::Module::compile(dev, VECADD, "vecadd.oxk").kernel("vecadd");
  EXPECT(vecadd.name() == "vecadd" && vecadd.num_params() == 3);
  auto ta = oxide::Tensor::from_host(dev, a), tb = oxide::Tensor::from_host(dev, b);
  auto tc = oxide::Tensor::empty(dev, OX_F32, {n});
  vecadd.launch({{(uint32_t)((n + 255) / 256)}, {256}}, ta, tb, tc);
  dev.default_stream().synchronize();
  std::vector<float> c = tc.to_host<float>();
  for (int64_t i = 0; i < n; i++)
    EXPECT(c[i] == 1.5f * (float)i);

  // saxpy on a stream of its own, with scalars typed by their C++ types
  oxide::Module m = oxide::Module::compile(dev, SAXPY);
  oxide::Stream s = dev.stream();
  oxide::Tensor copy = tc; // a second reference to the same tensor
  m.kernel("saxpy").launch({{4}, {256}, &s}, ta, tb, copy, 2.0f, (uint64_t)n);
  s.synchronize();
  c = tc.to_host<float>(&s);
  for (int64_t i = 0; i < n; i++)
    EXPECT(c[i] == 2.0f * (float)i + 0.5f * (float)i);
  EXPECT(tc.shape() == std::vector<int64_t>{n} && tc.nbytes() == sizeof(float) * n);

  // errors: each throws oxide::Error with the status and Oxide's message
  std::string msg;
  auto saxpy = m.kernel("saxpy");
  EXPECT(status_of([&] { saxpy.launch({{1}, {1}}, ta, tb, tc, 2.0, (uint64_t)n); }, &msg) ==
         OX_ERR_INVALID_ARGUMENT); // 2.0 is a double: f64, not f32
  EXPECT(msg.find("expected f32, got f64") != std::string::npos);
  EXPECT(status_of([&] { saxpy.launch({{1}, {1}}, ta, tb, tc); }, &msg) == OX_ERR_INVALID_ARGUMENT);
  EXPECT(msg.find("takes 5 arguments, got 3") != std::string::npos);
  EXPECT(status_of([&] { vecadd.launch({{1}, {128}}, ta, tb, tc); }, &msg) == OX_ERR_LAUNCH);
  EXPECT(msg.find("vecadd.oxk:") != std::string::npos);
  EXPECT(status_of([&] { m.kernel("nope"); }) == OX_ERR_NOT_FOUND);
  EXPECT(status_of([&] { oxide::Module::compile(dev, "fn broken(", "broken.oxk"); }, &msg) ==
         OX_ERR_COMPILE);
  EXPECT(msg.find("broken.oxk:1:") != std::string::npos && msg.find('^') != std::string::npos);
  EXPECT(status_of([&] { tc.to_host<double>(); }) == OX_ERR_INVALID_ARGUMENT);

  // an out-of-bounds read is reported once, with its location: by the launch
  // (the CPU: its kernel has run), else at synchronize; the next launch works
  auto oob = oxide::Module::compile(dev, OOB, "oob.oxk").kernel("oob");
  auto small = oxide::Tensor::from_host(dev, std::vector<float>{1, 2, 3, 4});
  auto out = oxide::Tensor::empty(dev, OX_F32, {4});
  auto once = [&](auto &&launch, auto &&later) {
    ox_status st = status_of(launch, &msg);
    return st != OX_OK ? st : status_of(later, &msg);
  };
  EXPECT(once([&] { oob.launch({{1}, {4}}, small, out); },
              [&] { dev.default_stream().synchronize(); }) == OX_ERR_BOUNDS);
  EXPECT(msg.find("oob.oxk:5:") != std::string::npos);
  dev.default_stream().synchronize(); // reported once
  oob.launch({{1}, {4}}, oxide::Tensor::from_host(dev, std::vector<float>{1, 2, 3, 4, 5}), out);
  dev.default_stream().synchronize();
  EXPECT(out.to_host<float>() == (std::vector<float>{2, 3, 4, 5}));
  // else a host read of the output reports the pending error itself, and consumes it
  EXPECT(once([&] { oob.launch({{1}, {4}}, small, out); }, [&] { out.to_host<float>(); }) == OX_ERR_BOUNDS);
  EXPECT(msg.find("oob.oxk:5:") != std::string::npos);
  dev.default_stream().synchronize();

  // a tile kernel: the output's partition gives the grid; S is set by hand
  auto scale = oxide::Module::compile(dev, SCALE, "scale.oxk").kernel("scale");
  auto y = oxide::Tensor::empty(dev, OX_F32, {n});
  EXPECT(status_of([&] { scale.launch(oxide::LaunchConfig::tile(), y.partition({128}), ta); }, &msg) == OX_ERR_INVALID_ARGUMENT);
  EXPECT(msg.find("generic 'S' is not bound") != std::string::npos);
  scale.set_generic("S", 3);
  scale.launch(oxide::LaunchConfig::tile(), y.partition({128}), ta);
  std::vector<float> ys = y.to_host<float>();
  for (int64_t i = 0; i < n; i++)
    EXPECT(ys[i] == 3.0f * (float)i);
}

// Everything else the header wraps: containers, f16/bf16 elements, dtype
// checks, empty tensors, const outputs, views, fills, copies, events,
// chains, DLPack, kernel signatures.
static void run_more(oxide::Device dev) {
  std::string msg;
  // tensors from an initializer list, a std::array, a pointer and a size
  auto a = oxide::Tensor::from_host(dev, {1.0f, 2.0f, 3.0f, 4.0f});
  std::array<int32_t, 6> ai{1, 2, 3, 4, 5, 6};
  auto b = oxide::Tensor::from_host(dev, ai, {2, 3});
  double raw[3] = {0.5, 1.5, 2.5};
  auto c = oxide::Tensor::from_host(dev, raw, 3);
  EXPECT(a.to_host<float>() == (std::vector<float>{1, 2, 3, 4}));
  EXPECT(b.shape() == (std::vector<int64_t>{2, 3}) && b.dtype() == OX_I32);
  EXPECT(c.to_host<double>() == (std::vector<double>{0.5, 1.5, 2.5}));
  // host copies check the element type both ways
  EXPECT(status_of([&] { a.copy_from_host(std::vector<int32_t>{1, 2, 3, 4}); }, &msg) ==
         OX_ERR_INVALID_ARGUMENT);
  EXPECT(msg.find("holds f32, not i32") != std::string::npos);
  a.copy_from_host({5.0f, 6.0f, 7.0f, 8.0f});
  float back[4];
  a.to_host(back, 4);
  EXPECT(back[0] == 5 && back[3] == 8);

  // f16 and bf16 elements: written and read back exactly (these values are representable)
  std::vector<oxide::half> hv;
  for (float f : {1.0f, -2.5f, 65504.0f, 5.9604645e-8f, 0.0f})
    hv.push_back(oxide::half(f));
  auto h = oxide::Tensor::from_host(dev, hv);
  EXPECT(h.dtype() == OX_F16);
  auto hb = h.to_host<oxide::half>();
  EXPECT((float)hb[0] == 1.0f && (float)hb[1] == -2.5f && (float)hb[2] == 65504.0f &&
         (float)hb[3] == 5.9604645e-8f && hb[4].bits == 0);
  EXPECT(oxide::half(1e6f).bits == 0x7c00 && oxide::half(1.0f + 1.0f / 4096).bits == 0x3c00);
  auto bf = oxide::Tensor::full(dev, OX_BF16, {3}, 3.0);
  for (auto x : bf.to_host<oxide::bfloat16>())
    EXPECT((float)x == 3.0f);

  // an empty (moved-from) tensor is an error, not a crash or std::length_error
  oxide::Tensor moved = std::move(c);
  EXPECT(status_of([&] { (void)c.shape(); }, &msg) == OX_ERR_INVALID_ARGUMENT);
  EXPECT(msg.find("empty") != std::string::npos && !c && moved);

  // a const Tensor cannot be a kernel's output
  auto m = oxide::Module::compile(dev, SAXPY, "saxpy.oxk");
  auto saxpy = m.kernel("saxpy");
  const oxide::Tensor out = oxide::Tensor::empty(dev, OX_F32, {4});
  EXPECT(status_of([&] { saxpy.launch({{1}, {32}}, a, a, out, 1.0f, (uint64_t)4); }, &msg) ==
         OX_ERR_INVALID_ARGUMENT);
  EXPECT(msg.find("argument 3 ('out'): the kernel writes it, but the oxide::Tensor is const") !=
         std::string::npos);
  oxide::Tensor out2 = out; // a non-const reference to the same tensor is fine
  saxpy.launch({{1}, {32}}, a, a, out2, 1.0f, (uint64_t)4);
  EXPECT(out.to_host<float>() == (std::vector<float>{10, 12, 14, 16}));
  EXPECT(saxpy.params().size() == 5 && std::string(saxpy.params()[2].name) == "out" &&
         saxpy.params()[2].kind == OX_PARAM_DISJOINT && saxpy.params()[3].dtype == OX_F32);
  EXPECT(!saxpy.is_unsafe());

  // views, fills, copies
  auto ar = oxide::Tensor::arange(dev, OX_F32, 0, 1, 12);
  auto grid = ar.reshape({3, 4});
  auto col = grid.transpose(0, 1).slice(0, 1, 2); // column 1 as a [1, 3] view
  EXPECT(col.shape() == (std::vector<int64_t>{1, 3}) && !col.is_contiguous());
  EXPECT(col.strides() == (std::vector<int64_t>{1, 4}));
  auto dense = col.to(oxide::Device::cpu());
  EXPECT(dense.is_contiguous() && dense.to_host<float>() == (std::vector<float>{1, 5, 9}));
  auto bc = oxide::Tensor::from_host(dev, {7.0f}).broadcast_to({2, 2});
  EXPECT(bc.is_read_only() && bc.strides() == (std::vector<int64_t>{0, 0}));
  auto z = oxide::Tensor::zeros(dev, OX_F32, {2, 2});
  z.copy_from(bc);
  EXPECT(z.to_host<float>() == (std::vector<float>{7, 7, 7, 7}));
  EXPECT(grid.partition({2, 2}).partition_grid() == (std::vector<int64_t>{2, 2}));
  EXPECT(grid.partition_grid().empty());

  // events time a stream's work
  oxide::Stream s = dev.stream();
  oxide::Event e0(dev), e1(dev);
  e0.record(s);
  saxpy.launch({{1}, {32}, &s}, a, a, out2, 2.0f, (uint64_t)4);
  e1.record(s);
  e1.synchronize();
  EXPECT(e0.elapsed_ms(e1) >= 0);
  s.wait(e1);
  EXPECT(status_of([&] { oxide::Event never(dev); never.synchronize(); }, &msg) ==
         OX_ERR_INVALID_ARGUMENT);

  // a chain keeps its kernels' module alive after the Module object is gone
  oxide::Chain chain(dev);
  {
    auto tmp = oxide::Module::compile(dev, SAXPY).kernel("saxpy");
    chain.launch(tmp, {{1}, {32}}, a, a, out2, 3.0f, (uint64_t)4);
  }
  chain.copy(z, bc);
  chain.run(&s);
  s.synchronize();
  EXPECT(out.to_host<float>() == (std::vector<float>{20, 24, 28, 32}));

  // DLPack: out and back in without a copy
  DLManagedTensorVersioned *dl = a.to_dlpack();
  EXPECT(dl->dl_tensor.ndim == 1 && dl->dl_tensor.shape[0] == 4);
  auto again = oxide::Tensor::from_dlpack(dl);
  EXPECT(again.data() == a.data());
  DLManagedTensor *legacy = grid.to_dlpack_legacy();
  auto again2 = oxide::Tensor::from_dlpack(legacy);
  EXPECT(again2.shape() == (std::vector<int64_t>{3, 4}));

  // streams: CPU streams cannot wrap a CUstream; the per-thread stream exists
  if (dev.type() == OX_DEVICE_CPU)
    EXPECT(status_of([&] { dev.wrap_stream(nullptr); }) == OX_ERR_INVALID_ARGUMENT);
  dev.per_thread_stream().synchronize();
  // a CPU stream with nothing running cancels (nothing); a CUDA one cannot
  EXPECT(status_of([&] { dev.stream().cancel(); }) == (dev.type() == OX_DEVICE_CPU ? OX_OK : OX_ERR_UNSUPPORTED));

  // tuning: the runtime chooses among tile configurations at the first launch
  std::string_view src = SCALE; // a std::string_view source compiles as a std::string's does
  oxide::Kernel sk;             // empty until assigned
  EXPECT(!sk && status_of([&] { sk.name(); }, &msg) == OX_ERR_INVALID_ARGUMENT &&
         msg.find("an empty oxide::Kernel") != std::string::npos);
  EXPECT(status_of([&] { sk.launch(oxide::LaunchConfig::tile(), a); }) == OX_ERR_INVALID_ARGUMENT);
  sk = oxide::Module::compile(dev, src, std::string_view("scale.oxk")).kernel("scale");
  EXPECT(static_cast<bool>(sk));
  sk.set_generic("S", 2);
  sk.set_candidates({{{"B", 64}}, {{"B", 256}}});
  auto xs = oxide::Tensor::from_host(dev, std::vector<float>(1000, 1.5f));
  auto ys = oxide::Tensor::empty(dev, OX_F32, {1000});
  int before = sk.tuned(ys.partition({64}), xs); // -1, unless an earlier run's choice is in the cache
  EXPECT(before >= -1 && before <= 1);
  sk.launch(oxide::LaunchConfig::tile(), ys.partition({64}), xs);
  int chosen = sk.tuned(ys.partition({64}), xs);
  EXPECT(chosen == 0 || chosen == 1);
  EXPECT(ys.to_host<float>() == std::vector<float>(1000, 3.0f));
  sk.set_candidates({});
  (void)oxide::cache_dir(); // a path, or "" when the cache is off
}

// One generic source on double and float tensors, its scalar from any C++ number.
static void run_generic(oxide::Device dev) {
  auto k = oxide::Module::compile(dev, R"(#[kernel]
fn axpy<T: Float>(x: &[T], y: &[T], out: DisjointSlice<T>, a: T) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) { *o = a * x[i] + y[i]; }
}
)").kernel("axpy");
  auto xd = oxide::Tensor::from_host(dev, std::vector<double>{1, 2, 3});
  auto outd = oxide::Tensor::from_host(dev, std::vector<double>{0, 0, 0});
  k.launch({{1}, {32}}, xd, xd, outd, 2.0f);
  EXPECT(outd.to_host<double>() == (std::vector<double>{3, 6, 9}));
  auto xf = oxide::Tensor::from_host(dev, std::vector<float>{1, 2, 3});
  auto outf = oxide::Tensor::from_host(dev, std::vector<float>{0, 0, 0});
  k.launch({{1}, {32}}, xf, xf, outf, 3);
  EXPECT(outf.to_host<float>() == (std::vector<float>{4, 8, 12}));
  std::string msg;
  EXPECT(status_of([&] { k.launch({{1}, {32}}, xf, xd, outf, 3); }, &msg) == OX_ERR_INVALID_ARGUMENT &&
         msg.find("type generic 'T' is f32 from argument 1 ('x') and f64 from argument 2 ('y')") !=
             std::string::npos);
}

int main() {
  try {
    run(oxide::Device::cpu());
    run_generic(oxide::Device::cpu());
    run_more(oxide::Device::cpu());
    if (oxide::Device::count(OX_DEVICE_CUDA) > 0) {
      run(oxide::Device::cuda(0));
      run_more(oxide::Device::cuda(0));
      run_generic(oxide::Device::cuda(0));
    }
    else
      std::printf("cpp_test: no GPU, CUDA part skipped\n");
    if (oxide::Device::count(OX_DEVICE_CUDA) == 0)
      EXPECT(status_of([] { oxide::Device::cuda(0); }) == OX_ERR_NO_DEVICE);
    // a kernel file from the repository; the filename defaults to the path
    auto k = oxide::Module::compile_file(oxide::Device::cpu(), OXIDE_SOURCE_DIR "/examples/vecadd.oxk")
                 .kernel("vecadd");
    EXPECT(k.num_params() == 3);
    EXPECT(status_of([] { oxide::Module::compile_file(oxide::Device::cpu(), "/nonexistent.oxk"); }) ==
           OX_ERR_IO);
  } catch (const oxide::Error &e) {
    std::fprintf(stderr, "unexpected oxide::Error %s: %s\n", e.status_name(), e.what());
    return 1;
  }
  std::printf("cpp_test: %s\n", failures ? "FAILED" : "PASSED");
  return failures != 0;
}
