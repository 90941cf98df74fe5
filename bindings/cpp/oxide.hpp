// oxide.hpp - header-only C++17 RAII wrappers over Oxide's C API (oxide.h).
//
//   auto dev = oxide::Device::cpu();
//   auto mod = oxide::Module::compile(dev, source, "saxpy.oxk");
//   auto x = oxide::Tensor::from_host(dev, std::vector<float>{1, 2, 3});
//   auto out = oxide::Tensor::empty(dev, OX_F32, {3});
//   mod.kernel("saxpy").launch({{1}, {256}}, x, x, out, 2.0f);  // float -> f32 scalar
//   dev.default_stream().synchronize();  // out-of-bounds accesses throw here
//   std::vector<float> r = out.to_host<float>();
//
// Every failing call throws oxide::Error, which carries the ox_status and the
// message of ox_last_error(). Scalars map by their C++ type (float -> f32,
// double -> f64, int32_t -> i32, uint64_t -> u64, bool -> bool ...), exactly as
// the kernel language refuses implicit conversions; oxide::f16(x)/bf16(x) make
// half-precision scalars.
#ifndef OXIDE_OXIDE_HPP
#define OXIDE_OXIDE_HPP

#include <oxide/oxide.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace oxide {

class Error : public std::runtime_error {
public:
  Error(ox_status status, const std::string &message)
      : std::runtime_error(message), status_(status) {}
  ox_status status() const noexcept { return status_; }
  const char *status_name() const noexcept { return ox_status_name(status_); }

private:
  ox_status status_;
};

namespace detail {
// ox_last_error() is per thread and valid until the next failing call: copy it now.
inline void check(ox_status s) {
  if (s != OX_OK)
    throw Error(s, ox_last_error());
}

// Frees strings that Oxide hands over.
inline std::string take(char *p) {
  std::string s(p ? p : "");
  ox_free(p);
  return s;
}
} // namespace detail

inline std::string version() { return ox_version(); }

inline std::string doctor() {
  char *out = nullptr;
  detail::check(ox_doctor(&out));
  return detail::take(out);
}

// ---------------------------------------------------------------- dtypes

// the ox_dtype of a C++ element type (none is OX_TF32: tf32 lives in kernels
// only, as casts and dot operands; tensors hold f32 and refuse tf32)
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr ox_dtype value = OX_BOOL; };
template <> struct dtype_of<int8_t> { static constexpr ox_dtype value = OX_I8; };
template <> struct dtype_of<int16_t> { static constexpr ox_dtype value = OX_I16; };
template <> struct dtype_of<int32_t> { static constexpr ox_dtype value = OX_I32; };
template <> struct dtype_of<int64_t> { static constexpr ox_dtype value = OX_I64; };
template <> struct dtype_of<uint8_t> { static constexpr ox_dtype value = OX_U8; };
template <> struct dtype_of<uint16_t> { static constexpr ox_dtype value = OX_U16; };
template <> struct dtype_of<uint32_t> { static constexpr ox_dtype value = OX_U32; };
template <> struct dtype_of<uint64_t> { static constexpr ox_dtype value = OX_U64; };
template <> struct dtype_of<float> { static constexpr ox_dtype value = OX_F32; };
template <> struct dtype_of<double> { static constexpr ox_dtype value = OX_F64; };

// ---------------------------------------------------------------- devices

class Stream;

// Devices live as long as the process: a Device is a plain, copyable handle.
class Device {
public:
  static Device cpu() { return get(OX_DEVICE_CPU, 0); }
  static Device cuda(int ordinal = 0) { return get(OX_DEVICE_CUDA, ordinal); }
  // $OXIDE_DEVICE if set, else CUDA device 0 when a GPU is usable, else the CPU.
  static Device default_device() {
    ox_device d;
    detail::check(ox_device_default(&d));
    return Device(d);
  }
  static int count(ox_device_type type) {
    int n = 0;
    detail::check(ox_device_count(type, &n));
    return n;
  }
  explicit Device(ox_device h) : h_(h) {}

  ox_device_type type() const { return ox_device_get_type(h_); }
  int ordinal() const { return ox_device_ordinal(h_); }
  std::string name() const { return ox_device_name(h_); }
  int compute_capability() const { return ox_device_compute_capability(h_); } // 90 = sm_90; 0: CPU
  Stream stream() const;         // a new stream
  Stream default_stream() const; // borrowed
  ox_device get() const { return h_; }
  bool operator==(const Device &o) const { return h_ == o.h_; }
  bool operator!=(const Device &o) const { return h_ != o.h_; }

private:
  static Device get(ox_device_type t, int ordinal) {
    ox_device d;
    detail::check(ox_device_get(t, ordinal, &d));
    return Device(d);
  }
  ox_device h_;
};

// ---------------------------------------------------------------- streams

// Owns a stream made by Device::stream() (destroyed with it); a default stream
// is borrowed. Move-only.
class Stream {
public:
  Stream(ox_stream h, bool owned) : h_(h), owned_(owned) {}
  Stream(Stream &&o) noexcept : h_(std::exchange(o.h_, nullptr)), owned_(o.owned_) {}
  Stream &operator=(Stream &&o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
      owned_ = o.owned_;
    }
    return *this;
  }
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream() { reset(); }

  // Waits for the queued work; throws Error(OX_ERR_BOUNDS) if a kernel on this
  // stream made an out-of-bounds access since the last synchronization.
  void synchronize() const { detail::check(ox_stream_synchronize(h_)); }
  Device device() const { return Device(ox_stream_device(h_)); }
  ox_stream get() const { return h_; }

private:
  void reset() {
    if (owned_ && h_)
      ox_stream_destroy(h_);
    h_ = nullptr;
  }
  ox_stream h_;
  bool owned_;
};

inline Stream Device::stream() const {
  ox_stream s;
  detail::check(ox_stream_create(h_, &s));
  return Stream(s, true);
}

inline Stream Device::default_stream() const {
  ox_stream s;
  detail::check(ox_device_stream(h_, &s));
  return Stream(s, false);
}

// ---------------------------------------------------------------- tensors

// A reference to a reference-counted tensor: copies share it (retain), the
// last one frees it (release).
class Tensor {
public:
  static Tensor empty(Device dev, ox_dtype dtype, std::vector<int64_t> shape,
                      const Stream *s = nullptr) {
    ox_tensor t;
    detail::check(ox_tensor_empty(dev.get(), s ? s->get() : nullptr, dtype, (int)shape.size(),
                                  shape.data(), &t));
    return Tensor(t);
  }
  // A copy of `data`, 1-D unless `shape` says otherwise.
  template <class T>
  static Tensor from_host(Device dev, const std::vector<T> &data, std::vector<int64_t> shape = {},
                          const Stream *s = nullptr) {
    static_assert(!std::is_same_v<T, bool>, "std::vector<bool> is packed: use uint8_t data");
    if (shape.empty())
      shape.push_back((int64_t)data.size());
    ox_tensor t;
    detail::check(ox_tensor_from_host(dev.get(), s ? s->get() : nullptr, dtype_of<T>::value,
                                      (int)shape.size(), shape.data(), data.data(),
                                      data.size() * sizeof(T), &t));
    return Tensor(t);
  }

  // A tile kernel's output: this tensor cut into tiles of `tile` (a view).
  Tensor partition(std::vector<int64_t> tile) const {
    ox_tensor t;
    detail::check(ox_tensor_partition(h_, (int)tile.size(), tile.data(), &t));
    return Tensor(t);
  }

  explicit Tensor(ox_tensor adopt) : h_(adopt) {} // takes over one reference
  Tensor(const Tensor &o) : h_(o.h_) { ox_tensor_retain(h_); }
  Tensor(Tensor &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Tensor &operator=(Tensor o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Tensor() { ox_tensor_release(h_); }

  // The elements, copied after the work queued on `s` (default stream if null).
  template <class T> std::vector<T> to_host(const Stream *s = nullptr) const {
    if (dtype_of<T>::value != dtype())
      throw Error(OX_ERR_INVALID_ARGUMENT, std::string("to_host: the tensor holds ") +
                                               ox_dtype_name(dtype()) + ", not " +
                                               ox_dtype_name(dtype_of<T>::value));
    std::vector<T> out((size_t)numel());
    detail::check(ox_tensor_to_host(h_, s ? s->get() : nullptr, out.data(), nbytes()));
    return out;
  }
  template <class T> void copy_from_host(const std::vector<T> &data, const Stream *s = nullptr) {
    detail::check(ox_tensor_copy_from_host(h_, s ? s->get() : nullptr, data.data(),
                                           data.size() * sizeof(T)));
  }

  ox_dtype dtype() const { return ox_tensor_dtype(h_); }
  std::vector<int64_t> shape() const {
    const int64_t *p = ox_tensor_shape(h_);
    return std::vector<int64_t>(p, p + ox_tensor_ndim(h_));
  }
  int64_t numel() const { return ox_tensor_numel(h_); }
  size_t nbytes() const { return ox_tensor_nbytes(h_); }
  Device device() const { return Device(ox_tensor_device(h_)); }
  void *data() const { return ox_tensor_data(h_); }
  ox_tensor get() const { return h_; }

private:
  ox_tensor h_;
};

// ---------------------------------------------------------------- launch arguments

inline ox_arg arg(const Tensor &t) { return ox_arg_tensor(t.get()); }
inline ox_arg arg(ox_arg a) { return a; }
inline ox_arg arg(bool x) { return ox_arg_bool(x); }
inline ox_arg arg(float x) { return ox_arg_f32(x); }
inline ox_arg arg(double x) { return ox_arg_f64(x); }
// Integers by width and signedness, so that long and long long both work.
template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
ox_arg arg(T x) {
  ox_arg a{};
  a.kind = OX_ARG_SCALAR;
  if constexpr (std::is_signed_v<T>) {
    a.dtype = sizeof(T) == 1 ? OX_I8 : sizeof(T) == 2 ? OX_I16 : sizeof(T) == 4 ? OX_I32 : OX_I64;
    a.v.i = x;
  } else {
    a.dtype = sizeof(T) == 1 ? OX_U8 : sizeof(T) == 2 ? OX_U16 : sizeof(T) == 4 ? OX_U32 : OX_U64;
    a.v.u = x;
  }
  return a;
}
// Half-precision scalars (converted by Oxide at launch).
inline ox_arg f16(double x) {
  ox_arg a = ox_arg_f64(x);
  a.dtype = OX_F16;
  return a;
}
inline ox_arg bf16(double x) {
  ox_arg a = ox_arg_f64(x);
  a.dtype = OX_BF16;
  return a;
}

struct Dim3 {
  Dim3(uint32_t x_ = 1, uint32_t y_ = 1, uint32_t z_ = 1) : x(x_), y(y_), z(z_) {}
  uint32_t x, y, z;
};

struct LaunchConfig {
  Dim3 grid, block;
  const Stream *stream = nullptr; // null: the device's default stream
  ox_launch_config c() const { return {{grid.x, grid.y, grid.z}, {block.x, block.y, block.z}}; }
  // For tile kernels: the partition gives the grid and the tile lowering the
  // block; a kernel whose only outputs are atomic tensors takes `grid`.
  static LaunchConfig tile(Dim3 grid = Dim3(0, 0, 0), const Stream *s = nullptr) {
    return {grid, Dim3(0, 0, 0), s};
  }
};

// ---------------------------------------------------------------- modules

class Module;

// A kernel shares ownership of its module, so it stays valid after the
// Module object is gone.
class Kernel {
public:
  // Queues a launch; argument, contract and limit errors throw at once, an
  // out-of-bounds access at the next Stream::synchronize().
  template <class... Args> void launch(const LaunchConfig &cfg, const Args &...args) const {
    ox_arg a[sizeof...(Args) + 1] = {arg(args)...};
    ox_launch_config c = cfg.c();
    detail::check(ox_launch(h_, cfg.stream ? cfg.stream->get() : nullptr, &c, a, (int)sizeof...(Args)));
  }
  template <class... Args> void check(const LaunchConfig &cfg, const Args &...args) const {
    ox_arg a[sizeof...(Args) + 1] = {arg(args)...};
    ox_launch_config c = cfg.c();
    detail::check(
        ox_launch_check(h_, cfg.stream ? cfg.stream->get() : nullptr, &c, a, (int)sizeof...(Args)));
  }
  std::string name() const { return ox_kernel_name(h_); }
  int num_params() const { return ox_kernel_num_params(h_); }
  // A tile kernel's const generic that sizes no output (ox_kernel_set_generic).
  void set_generic(const std::string &name, int64_t value) const {
    detail::check(ox_kernel_set_generic(h_, name.c_str(), value));
  }
  ox_kernel get() const { return h_; }

private:
  friend class Module;
  Kernel(ox_kernel h, std::shared_ptr<const void> mod) : h_(h), mod_(std::move(mod)) {}
  ox_kernel h_;
  std::shared_ptr<const void> mod_;
};

struct CompileOptions {
  std::string filename; // for diagnostics; "" = "<input>" (compile) or the path (compile_file)
  int sm = 0;           // CUDA architecture (80, 90...); 0 = the device's
  int opt_level = 0;    // 0 = the default (3)
  bool no_cache = false;
};

class Module {
public:
  static Module compile(Device dev, const std::string &source, const CompileOptions &o = {}) {
    return load(dev, o, [&](const ox_compile_options *opts, ox_module *m) {
      return ox_module_compile(dev.get(), source.c_str(), opts, m);
    });
  }
  static Module compile(Device dev, const std::string &source, const std::string &filename) {
    CompileOptions o;
    o.filename = filename;
    return compile(dev, source, o);
  }
  static Module compile_file(Device dev, const std::string &path, CompileOptions o = {}) {
    if (o.filename.empty())
      o.filename = path;
    return load(dev, o, [&](const ox_compile_options *opts, ox_module *m) {
      return ox_module_compile_file(dev.get(), path.c_str(), opts, m);
    });
  }

  Kernel kernel(const std::string &name) const {
    ox_kernel k;
    detail::check(ox_module_get_kernel(h_->m, name.c_str(), &k));
    return Kernel(k, h_);
  }
  bool from_cache() const { return ox_module_from_cache(h_->m) != 0; }
  ox_module get() const { return h_->m; }

private:
  // liboxide keeps the options' filename pointer for later messages (bounds
  // errors, launch contracts) without copying it: it lives here with the module.
  struct Owner {
    ox_module m = nullptr;
    std::string filename;
    ~Owner() { ox_module_destroy(m); }
  };
  template <class F> static Module load(Device, const CompileOptions &o, F &&fn) {
    auto own = std::make_shared<Owner>();
    own->filename = o.filename;
    ox_compile_options opts{};
    opts.filename = own->filename.empty() ? nullptr : own->filename.c_str();
    opts.sm = o.sm;
    opts.opt_level = o.opt_level;
    opts.no_cache = o.no_cache;
    detail::check(fn(&opts, &own->m));
    return Module(std::move(own));
  }
  explicit Module(std::shared_ptr<Owner> h) : h_(std::move(h)) {}
  std::shared_ptr<Owner> h_;
};

// The text of one compilation stage (OX_EMIT_PTX, OX_EMIT_IR, ...); needs no device.
inline std::string emit(const std::string &source, ox_emit_kind kind,
                        ox_target target = OX_TARGET_DEFAULT, int sm = 0) {
  ox_compile_options o{};
  o.sm = sm;
  char *out = nullptr;
  detail::check(ox_emit(source.c_str(), &o, target, kind, &out));
  return detail::take(out);
}

} // namespace oxide

#endif // OXIDE_OXIDE_HPP
