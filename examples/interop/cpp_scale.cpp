// A C++ library (oxide.hpp) that Python (cpp_python.py) shares a tensor and
// a stream with, through public API only: tensors cross as DLPack, the
// stream as its CUstream (Stream.handle in Python, wrapped here: one Oxide
// stream for both, so ownership tracking sees one stream). Built as a
// shared library linked to the same liboxide.so as the Python package.
#include <oxide/oxide.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace {
std::string last_error;

const char *SCALE = R"(#[kernel]
fn scale(x: DisjointSlice<f32>, alpha: f32) {
    let i = thread::index_1d();
    if let Some(o) = x.get_mut(i) { *o = alpha * *o; }
}
)";

// Runs f, turning an oxide::Error into a status and a message.
template <class F> int guarded(F &&f) {
  try {
    f();
    return 0;
  } catch (const oxide::Error &e) {
    last_error = e.what();
    return e.status();
  }
}
} // namespace

extern "C" {

// x *= alpha, queued on `cu_stream` (a CUstream; 0 for the device's default
// stream, and on the CPU) without waiting: the caller synchronizes that
// stream. Takes over `managed` (a DLManagedTensorVersioned*), as DLPack says.
int cpp_scale(void *managed, float alpha, uintptr_t cu_stream) {
  return guarded([&] {
    auto x = oxide::Tensor::from_dlpack(static_cast<DLManagedTensorVersioned *>(managed));
    oxide::Device dev = x.device();
    oxide::Stream s = cu_stream ? dev.wrap_stream(reinterpret_cast<void *>(cu_stream))
                                : dev.default_stream();
    static std::optional<oxide::Kernel> kernels[2]; // compiled once per device type
    auto &k = kernels[dev.type() == OX_DEVICE_CUDA];
    if (!k)
      k = oxide::Module::compile(dev, SCALE).kernel("scale");
    uint32_t blocks = static_cast<uint32_t>((x.numel() + 255) / 256);
    k->launch(oxide::LaunchConfig{oxide::Dim3(blocks, 1, 1), oxide::Dim3(256, 1, 1), &s}, x, alpha);
  });
}

// A new f32 tensor [0, 1, ..., n-1] made here, handed out as a
// DLManagedTensorVersioned* (NULL on error) that the caller takes over.
void *cpp_make_iota(int64_t n, int cuda) {
  void *out = nullptr;
  int st = guarded([&] {
    oxide::Device dev = cuda ? oxide::Device::cuda(0) : oxide::Device::cpu();
    oxide::Tensor t = oxide::Tensor::arange(dev, OX_F32, 0.0, 1.0, n);
    out = t.to_dlpack();
  });
  return st ? nullptr : out;
}

const char *cpp_last_error(void) { return last_error.c_str(); }
}
