// cpp_test - the C++ binding (bindings/cpp/oxide.hpp): vecadd and saxpy, then
// errors as exceptions. Runs on the CPU, and on CUDA device 0 when one is usable.
#include <oxide/oxide.hpp>

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

  // an out-of-bounds read is reported at synchronize, with its location; the
  // next launch works
  auto oob = oxide::Module::compile(dev, OOB, "oob.oxk").kernel("oob");
  auto small = oxide::Tensor::from_host(dev, std::vector<float>{1, 2, 3, 4});
  auto out = oxide::Tensor::empty(dev, OX_F32, {4});
  oob.launch({{1}, {4}}, small, out);
  EXPECT(status_of([&] { dev.default_stream().synchronize(); }, &msg) == OX_ERR_BOUNDS);
  EXPECT(msg.find("oob.oxk:5:") != std::string::npos);
  oob.launch({{1}, {4}}, oxide::Tensor::from_host(dev, std::vector<float>{1, 2, 3, 4, 5}), out);
  dev.default_stream().synchronize();
  EXPECT(out.to_host<float>() == (std::vector<float>{2, 3, 4, 5}));

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

int main() {
  try {
    run(oxide::Device::cpu());
    if (oxide::Device::count(OX_DEVICE_CUDA) > 0)
      run(oxide::Device::cuda(0));
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
